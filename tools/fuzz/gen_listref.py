#!/usr/bin/env python3
# gen.py's programs with `(car v)` and `(cadr v)` of a variable written as
# `(list-ref v 0)` and `(list-ref v 1)`, and `(car (list a b))` as
# `(list-ref (list a b) 0.)` (an inexact index): for differential runs of
# list-ref's rules (run.sh: GEN=gen_listref.py; with --no-tape, every
# derivative goes through them).
# Usage: python3 gen_listref.py SEED > program.vlad
import os, re, subprocess, sys
out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "gen.py"), sys.argv[1]],
                     check=True, capture_output=True, text=True).stdout
out = re.sub(r"\(car ([a-z]\w*)\)", r"(list-ref \1 0)", out)
out = re.sub(r"\(cadr ([a-z]\w*)\)", r"(list-ref \1 1)", out)
out = out.replace("(car (list ", "(list-ref-0 (list ")
print("(define (list-ref-0 l) (list-ref l 0.))")
print(out, end="")
