#!/usr/bin/env python3
"""Random reversible procedures (REVERSIBLE.md), for `tools/fuzz/crash.sh`
(GEN=gen_rev.py): statements of every kind over a few variables (some
misused: an updated variable in its own right-hand side, an undeclared one, a
wrong assertion, a vector index out of range), then `call`, `uncall`,
`rev-grad` and derivatives through `call`, with arguments of every kind. Most
fail; vlad must say why (exit 1), never panic.

    gen_rev.py SEED   prints one program
"""
import random
import sys

VARS = ["a", "b", "c", "v"]


def rhs(r, d, avoid):
    vs = [x for x in VARS[:3] if x != avoid] or ["1"]
    if d <= 0 or r.random() < 0.35:
        if r.random() < 0.03:
            return avoid or "1"  # (the updated variable read: an error)
        refs = [] if avoid.startswith("(ref v") else ["(ref v 0)", "(ref v 5)"]
        return r.choice(vs + ["1", "2", "0.5", "1/3", "-3"] + refs)
    op = r.choice(["+", "-", "*", "/", "sin", "exp", "max"])
    if op in ("sin", "exp"):
        return "(%s %s)" % (op, rhs(r, d - 1, avoid))
    return "(%s %s %s)" % (op, rhs(r, d - 1, avoid), rhs(r, d - 1, avoid))


def target(r):
    x = r.choice(VARS[:3] * 3 + ["(ref v 0)", "(ref v 1)", "(ref v 9)"] + (["z"] if r.random() < 0.1 else []))
    return x


def stmt(r, d):
    k = r.randrange(12)
    if d <= 0 or k <= 3:
        t = target(r)
        op = r.choice(["+=", "-=", "*=", "/=", "^="])
        return "(%s %s %s)" % (op, t, rhs(r, 2, t if r.random() < 0.9 else ""))
    if k == 4:
        return "(swap %s %s)" % tuple(r.sample(VARS[:3], 2) if r.random() < 0.9 else ["a", "a"])
    if k == 5:
        return "(if-rev (< a %s) %s %s (< a %s))" % (rhs(r, 1, ""), stmt(r, d - 1), stmt(r, d - 1), rhs(r, 1, ""))
    if k == 6:
        return "(from-loop (= c 0) %s (+= c 1) (= c %d))" % (stmt(r, d - 1), r.randint(0, 4))
    if k == 7:
        return "(local (t %s) %s (delocal t %s))" % (rhs(r, 1, ""), stmt(r, d - 1), rhs(r, 1, ""))
    if k == 8:
        return "(begin-rev %s)" % " ".join(stmt(r, d - 1) for _ in range(r.randint(0, 3)))
    if k == 9:
        return r.choice(["(skip)", "(call p0 a b c v)", "(uncall p0 a b c v)", "(call p0 a a c v)"])
    if k == 10:
        return "(with-uncompute (%s) %s)" % (stmt(r, d - 1), stmt(r, d - 1))
    x = r.choice(VARS[:3])
    if r.random() < 0.2:
        return "(%s %s s)" % (r.choice(["push", "pop"]), x)
    return "(local (s '()) (push %s s) %s (pop %s s) (delocal s '()))" % (x, stmt(r, d - 1), x)


def arg(r):
    return r.choice(["0", "1", "2.5", "-1", "1/2", "(vector-of (list 1.0 2.0))", "'()", "#t", "(list 1 2)",
                     "100000000000000000000"])


def main():
    r = random.Random(int(sys.argv[1]))
    out = ["(define-reversible (p0 a b c v) %s)" % stmt(r, 2)]
    out.append("(define-reversible (p1 a b c v) %s)" % " ".join(stmt(r, 3) for _ in range(r.randint(1, 4))))
    for _ in range(r.randint(3, 7)):
        p = r.choice(["p0", "p1"])
        args = " ".join(arg(r) for _ in range(r.choice([4, 4, 4, 3, 5])))
        k = r.randrange(5)
        if k == 0:
            out.append("(call %s %s)" % (p, args))
        elif k == 1:
            out.append("(uncall %s %s)" % (p, args))
        elif k == 2:
            out.append("(let ((o (call %s %s))) (uncall %s (car o) (cadr o) (caddr o) (car (cdr (cdr (cdr o))))))" % (p, args, p))
        elif k == 3:
            out.append("(rev-grad %s %d %s)" % (p, r.randint(-1, 4), args))
        else:
            op = r.choice(["derivative-R", "derivative-F", "derivative"])
            out.append("((%s (lambda (x) (car (call %s x 1.0 0 (vector-of (list x 2.0)))))) 0.5)" % (op, p))
    print("\n".join(out))


main()
