#!/usr/bin/env python3
# Random VLAD programs of derivatives nested three and four deep, in every mix
# of derivative-F and derivative-R, over scalar bodies that use every level's
# variable (gen.py's scalar expressions): for differential runs (run.sh:
# GEN=gen_nested.py) of the levels' arithmetic where forward levels enclose
# each other (ad::tape::record, ad::native::record_forward_lifted).
# Usage: python3 gen_nested.py SEED > program.vlad
import random, sys
R = random.Random(int(sys.argv[1]))
def num():
    return R.choice(["1.5", "2.0", "-0.5", "3", "0.25", "2", "-1", "0.0", "1", "0.75"])
def scalar(vs, d):
    if d <= 0 or R.random() < 0.2:
        return R.choice(vs + vs + [num()])
    k = R.randrange(13)
    a = lambda: scalar(vs, d - 1)
    if k < 5: return f"({R.choice(['+','-','*','*'])} {a()} {a()})"
    if k == 5: return f"(sqrt (+ 1.0 (* {a()} {a()})))"
    if k == 6: return f"(sin {a()})"
    if k == 7: return f"(if (< {a()} {a()}) {a()} {a()})"
    if k == 8: return f"(exp (* 0.1 {a()}))"
    if k == 9: return f"(let ((t {a()})) (* t {a()}))"
    if k == 10: return f"(/ {a()} (+ 2.0 (* {a()} {a()})))"
    if k == 11: return f"(sq {a()})"
    return f"(cos {a()})"
def nest(vs, depth):
    v = "abcd"[len(vs)]
    inner = scalar(vs + [v], R.randrange(2, 5)) if depth == 1 else nest(vs + [v], depth - 1)
    d = R.choice(["derivative-F", "derivative-F", "derivative-R"])
    # (the point each level differentiates at depends on the enclosing levels'
    # variables, so that every level's perturbation reaches the innermost body)
    x = num()
    for u in vs:
        x = R.choice([f"(+ {x} (* {num()} {u}))", f"(* {x} {u})", f"(sin (+ {x} {u}))"])
    return f"(({d} (lambda ({v}) {inner})) {x})"
print("(define (sq x) (* x x))")
for _ in range(6):
    print(nest([], R.choice([3, 3, 4])))
