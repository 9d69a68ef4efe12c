#!/usr/bin/env python3
"""Random numeric VLAD programs for the tier of compiled code (src/jit):
top-level procedures on exact integers, reals and booleans (arithmetic that
may overflow into big integers, exact quotients, mixed operands, comparisons,
conditionals, named-let loops, recursion, calls of each other, the
one-argument primitives compiled code computes, the sign tests and `abs`,
lists taken apart: `car`, `cdr`, `null?`, `pair?`, `'()` and list walks;
lists made: `cons`, `list`, `map` and `map2` of primitives, procedures and
lambdas),
called with arguments of every kind, lists among them (of numbers, of
other values, improper, nested). Run them with `--jit-after 1` against `--no-jit`
(tools/fuzz/run.sh A A N "--jit-after 1 --max-steps 300000" "--no-jit
--max-steps 300000"): values, errors and the steps counted must agree.

    gen_num.py SEED
"""
import random
import sys

r = random.Random(int(sys.argv[1]))
# (every other program has no boolean constants: fewer of its calls fail,
# so more of its code runs)
NUMERIC = int(sys.argv[1]) % 2 == 0

INTS = ["0", "1", "2", "3", "-1", "7", "100", "4611686018427387903", "-4611686018427387904",
        "9223372036854775807", "-9223372036854775808", "3037000499", "12345678901234567890",
        "16", "9007199254740992", "9007199254740993", "-9007199254740993", "4503599627370496"]
REALS = ["0.0", "-0.0", "1.0", "0.5", "-2.5", "1e308", "-1e308", "1e-300", "3.25", "(/ 0.0 0.0)",
         "(/ 1.0 0.0)", "9007199254740992.0", "-9007199254740994.0", "(/ -1.0 0.0)"]
BOOLS = ["#t", "#f"]
OPS = ["+", "-", "*", "/", "<", ">", "<=", ">=", "=", "atan"]
UNARY = ["real", "sqrt", "exp", "log", "sin", "cos", "zero?", "positive?", "negative?", "abs"]
LISTS = ["'()", "(list 1 2 3)", "(list 0.5 -2.5 3)", "(list 1 #t 2)", "(cons 1 2)", "(list (list 1 2) 3)",
         "(list 4611686018427387903 1)", "(list car 1)", "(list 2.5)", "(list '() 1)"]


def const():
    k = r.random()
    if k < 0.55:
        return r.choice(INTS)
    if k < 0.9 or NUMERIC:
        return r.choice(REALS)
    return r.choice(BOOLS)


def expr(vs, depth, fns):
    """An expression over the variables `vs`, calling procedures of `fns`
    (name, arity)."""
    k = r.random()
    if depth <= 0 or k < 0.25:
        return r.choice(vs) if vs and r.random() < 0.7 else const()
    if k < 0.52:
        return "(%s %s %s)" % (r.choice(OPS), expr(vs, depth - 1, fns), expr(vs, depth - 1, fns))
    if k < 0.6:
        return "(%s %s)" % (r.choice(UNARY), expr(vs, depth - 1, fns))
    if k < 0.72:
        return "(if %s %s %s)" % (expr(vs, depth - 1, fns), expr(vs, depth - 1, fns), expr(vs, depth - 1, fns))
    if k < 0.84 and fns:
        name, n = r.choice(fns)
        return "(%s %s)" % (name, " ".join(expr(vs, depth - 1, fns) for _ in range(n)))
    if k < 0.88 and vs:
        # a list taken apart (or anything else, which the evaluator rejects)
        v = r.choice(vs)
        j = r.random()
        if j < 0.3:
            return "(%s %s)" % (r.choice(["car", "cdr", "cadr"]), v)
        if j < 0.55:
            return "(if (%s %s) %s %s)" % (r.choice(["null?", "pair?"]), v, expr(vs, depth - 1, fns),
                                            expr(vs, depth - 1, fns))
        if j < 0.65:
            return "'()"
        # a walk down it, summing (or counting) its elements
        step = r.choice(["(+ acc (car l))", "(+ acc 1)", "(* acc (car l))", "(if (car l) (+ acc 1) acc)"])
        return "(let walk%d ((l %s) (acc %s)) (if (pair? l) (walk%d (cdr l) %s) acc))" % (
            depth, v, expr(vs, depth - 1, fns), depth, step)
    if k < 0.9 and vs:
        # a list made: by cons or list, or by a walk of a primitive, of a
        # procedure, or of a lambda reading the variables around it
        v, w = r.choice(vs), r.choice(vs)
        j = r.random()
        if j < 0.2:
            return "(cons %s %s)" % (expr(vs, depth - 1, fns), r.choice([v, "'()", expr(vs, depth - 1, fns)]))
        if j < 0.3:
            return "(list %s %s)" % (expr(vs, depth - 1, fns), expr(vs, depth - 1, fns))
        if j < 0.45:
            return "(map2 %s %s %s)" % (r.choice(["+", "-", "*", "/"]), v, w)
        if j < 0.55:
            return "(map %s %s)" % (r.choice(["sqrt", "exp", "real", "abs", "zero?"]), v)
        ones = [f for f, n in fns if n == 1]
        if j < 0.65 and ones:
            return "(map %s %s)" % (r.choice(ones), v)
        y = "y%d" % depth
        if j < 0.85:
            return "(map (lambda (%s) %s) %s)" % (y, expr(vs + [y], depth - 1, fns), v)
        z = "z%d" % depth
        return "(map2 (lambda (%s %s) %s) %s %s)" % (y, z, expr(vs + [y, z], depth - 1, fns), v, w)
    if k < 0.93:
        # a named let's loop, bounded by an integer count
        i, acc = "i%d" % depth, "acc%d" % depth
        bound = r.choice(["3", "10", "50", "0", "-2"])
        body = expr(vs + [i, acc], depth - 1, fns)
        return "(let loop%d ((%s %s) (%s %s)) (if (<= %s 0) %s (loop%d (- %s 1) %s)))" % (
            depth, i, bound, acc, expr(vs, depth - 1, fns), i, acc, depth, i, body)
    # a let
    x = "v%d" % depth
    return "(let ((%s %s)) %s)" % (x, expr(vs, depth - 1, fns), expr(vs + [x], depth - 1, fns))


def main():
    fns = []
    out = []
    for i in range(r.randint(1, 5)):
        n = r.randint(1, 3)
        ps = ["n"] + ["x%d" % j for j in range(1, n)]
        name = "f%d" % i
        base = expr(ps, 3, fns)
        # recursion on `n` (an integer counting down, or anything else)
        rec_args = " ".join(["(- n 1)"] + [expr(ps, 2, fns) for _ in range(n - 1)])
        kind = r.random()
        if kind < 0.35:
            body = "(if (<= n 0) %s (%s %s (%s %s)))" % (base, r.choice(OPS[:3]), expr(ps, 2, fns), name, rec_args)
        elif kind < 0.6:
            # in tail position: a loop
            body = "(if (<= n 0) %s (%s %s))" % (base, name, rec_args)
        elif kind < 0.75:
            body = "(if (< n 2) %s (+ (%s %s) (%s %s)))" % (
                base, name, rec_args, name, " ".join(["(- n 2)"] + [expr(ps, 1, fns) for _ in range(n - 1)]))
        else:
            body = expr(ps, 4, fns)
        out.append("(define (%s %s) %s)" % (name, " ".join(ps), body))
        fns.append((name, n))
    for _ in range(r.randint(2, 8)):
        name, n = r.choice(fns)
        counts = ["0", "1", "5", "12", "20", "-3", "2.5", "(/ 0.0 0.0)", "4611686018427387903"]
        if not NUMERIC:
            counts.append("#t")
        args = [r.choice(counts)] + [r.choice(LISTS) if r.random() < 0.4 else const() for _ in range(n - 1)]
        out.append("(%s %s)" % (name, " ".join(args)))
    print("\n".join(out))


main()
