#!/usr/bin/env python3
"""Random, mostly ill-typed VLAD programs, for `tools/fuzz/crash.sh`: calls of
the primitives and prelude procedures with arguments of any kind and number,
derivative operators applied to anything, vectors, reversible procedures,
deep and odd syntax. The programs are not meant to run: vlad must answer each
with a value or a clear error (exit 0, 1 or 3), never a panic (exit 70) or a
signal.

    gen_junk.py SEED   prints one program
"""
import random
import sys

PRIMS = """+ - * / = < > <= >= zero? positive? negative? null? pair? procedure? real?
boolean? sqrt exp log sin cos atan car cdr cadr cons list length append map map2
fold-left reduce list-ref reverse iota equal? not abs max min zero plus bundle
primal tangent perturb unperturb sensitize unsensitize *j *j-inverse j* jvp vjp
value-and-vjp derivative-F derivative-R derivative gradient-F gradient-R gradient
jacobian-F jacobian-R hvp hessian vector-of list-of make-vec vec-length vec-ref
vec-iota vec+ vec- vec* vec/ vec-scale vec-exp vec-log vec-sin vec-cos vec-sqrt
vec-tanh vec-max0 vec-sum vec-dot vec-max vec-prefix-sum mat-vec mat-mat
transpose mat-rows mat-cols vec-reshape vec-outer vec-argmax vector? write
write-real error call uncall rev-grad rev-inverse v+ v- k*v dot magnitude
distance m*v m*m outer-product identity-matrix perturbation? forward?
sensitivity? reverse? bitwise-and bitwise-or bitwise-xor""".split()

SPECIAL = ["if", "let", "let*", "letrec", "lambda", "cond", "and", "or", "begin", "quote", "define"]


def atom(r, names):
    k = r.randrange(14)
    if k == 0:
        return str(r.randint(-3, 5))
    if k == 1:
        return r.choice(["0.0", "1.5", "-2.25", "1e308", "-0.0", "3.0e-320", "1e400"])
    if k == 2:
        return r.choice(["#t", "#f", "'()", "'a", "'(1 2)", "'(1 . 2)", "'((1 2) (3 4))"])
    if k == 3:
        return str(r.choice([2**62, 2**64 + 1, -(2**70), 10**30]))
    if k == 4:
        return "1/3" if r.random() < 0.5 else "-7/2"
    if k == 5 and names:
        return r.choice(names)
    if k == 6:
        return '"s"'
    if k == 7:
        return "(vector-of (list 1.0 2.0 3.0))"
    if k == 8:
        return "(list 1.0 2.0)"
    return r.choice(PRIMS)


def expr(r, depth, names):
    if depth <= 0 or r.random() < 0.25:
        return atom(r, names)
    k = r.randrange(12)
    sub = lambda: expr(r, depth - 1, names)
    if k <= 4:
        f = r.choice(PRIMS) if r.random() < 0.8 else sub()
        n = r.choice([0, 1, 1, 2, 2, 2, 3, 4])
        return "(" + " ".join([f] + [sub() for _ in range(n)]) + ")"
    if k == 5:
        v = "v%d" % r.randrange(4)
        return "(lambda (%s) %s)" % (v, expr(r, depth - 1, names + [v]))
    if k == 6:
        v = "v%d" % r.randrange(4)
        return "(let ((%s %s)) %s)" % (v, sub(), expr(r, depth - 1, names + [v]))
    if k == 7:
        return "(if %s %s %s)" % (sub(), sub(), sub())
    if k == 8:
        # a derivative of a lambda, applied
        v = "x%d" % r.randrange(3)
        op = r.choice(["gradient-R", "gradient-F", "derivative", "derivative-F", "hessian", "j*", "*j"])
        return "((%s (lambda (%s) %s)) %s)" % (op, v, expr(r, depth - 1, names + [v]), sub())
    if k == 9:
        return "(%s)" % sub()
    if k == 10:
        # odd syntax: a special form with wrong parts
        s = r.choice(SPECIAL)
        return "(" + " ".join([s] + [sub() for _ in range(r.randrange(4))]) + ")"
    return "(%s %s)" % (sub(), sub())


class Typed:
    """Mostly well-typed code (reals, lists of reals, vectors; derivatives of
    lambdas over them, nested), with a mistake (a value of another kind, a
    missing or extra argument) at a rate `bad`: errors deep inside derivatives."""

    def __init__(self, r, bad):
        self.r, self.bad = r, bad

    def slip(self, names):
        r = self.r
        if r.random() < 0.5:
            return atom(r, names)
        return r.choice(["'()", "#t", "car", "(lambda (q) q)", "(list 1.0)", "(list)", '"s"', "1/0"])

    def leaf(self, d, env, kind, literals, stop=0.2):
        """A mistake (at rate `bad`), or at depth 0 (else at rate `stop`) a
        variable of `kind` (None: none) or one of `literals`; None where a
        compound expression is to be built."""
        r = self.r
        if r.random() < self.bad:
            return self.slip(env[kind] if kind else [])
        if d <= 0 or r.random() < stop:
            if kind and env[kind] and r.random() < 0.6:
                return r.choice(env[kind])
            return r.choice(literals)
        return None

    def real(self, d, env):
        r = self.r
        e = self.leaf(d, env, "real", ["1.5", "-0.5", "2", "0.0", "3.25", "1/2"])
        if e is not None:
            return e
        k = r.randrange(14)
        x = lambda: self.real(d - 1, env)
        l = lambda: self.lst(d - 1, env)
        v = lambda: self.vec(d - 1, env)
        if k <= 3:
            return "(%s %s %s)" % (r.choice("+-*/"), x(), x())
        if k == 4:
            return "(%s %s)" % (r.choice(["sqrt", "exp", "log", "sin", "cos", "abs", "square"]), x())
        if k == 5:
            return "(%s %s)" % (r.choice(["car", "cadr", "magnitude"]), l())
        if k == 6:
            return "(dot %s %s)" % (l(), l())
        if k == 7:
            n = self.fresh(env)
            op = r.choice(["derivative-F", "derivative-R", "derivative"])
            return "((%s (lambda (%s) %s)) %s)" % (op, n, self.real(d - 1, self.bind(env, "real", n)), x())
        if k == 8:
            n = self.fresh(env)
            op = r.choice(["gradient-F", "gradient-R", "gradient"])
            body = self.real(d - 1, self.bind(env, "list", n))
            return "(car ((%s (lambda (%s) %s)) %s))" % (op, n, body, l())
        if k == 9:
            return "(%s %s)" % (r.choice(["vec-sum", "vec-max"]), v())
        if k == 10:
            return "(if (< %s %s) %s %s)" % (x(), x(), x(), x())
        if k == 11:
            n = self.fresh(env)
            return "(let ((%s %s)) %s)" % (n, x(), self.real(d - 1, self.bind(env, "real", n)))
        if k == 12:
            return "(vec-dot %s %s)" % (v(), v())
        return "(fold-left + 0.0 %s)" % l()

    def lst(self, d, env):
        r = self.r
        e = self.leaf(d, env, "list", ["(list 1.0 2.0)", "(list 0.5 -1.5)", "(list 3 4)"])
        if e is not None:
            return e
        k = r.randrange(8)
        x = lambda: self.real(d - 1, env)
        l = lambda: self.lst(d - 1, env)
        if k == 0:
            return "(list %s %s)" % (x(), x())
        if k == 1:
            n = self.fresh(env)
            return "(map (lambda (%s) %s) %s)" % (n, self.real(d - 1, self.bind(env, "real", n)), l())
        if k == 2:
            return "(%s %s %s)" % (r.choice(["v+", "v-"]), l(), l())
        if k == 3:
            return "(k*v %s %s)" % (x(), l())
        if k == 4:
            n = self.fresh(env)
            op = r.choice(["gradient-F", "gradient-R"])
            return "((%s (lambda (%s) %s)) %s)" % (op, n, self.real(d - 1, self.bind(env, "list", n)), l())
        if k == 5:
            return "(list-of %s)" % self.vec(d - 1, env)
        if k == 6:
            return "(map2 %s %s %s)" % (r.choice(["+", "-", "*", "max"]), l(), l())
        n = self.fresh(env)
        return "(hvp (lambda (%s) %s) %s %s)" % (n, self.real(d - 1, self.bind(env, "list", n)), l(), l())

    def vec(self, d, env):
        r = self.r
        e = self.leaf(d, env, None, ["(vector-of (list 1.0 2.0))", "(make-vec 2 0.5)", "(vec-iota 2)"], 0.3)
        if e is not None:
            return e
        x = lambda: self.real(d - 1, env)
        v = lambda: self.vec(d - 1, env)
        k = r.randrange(5)
        if k == 0:
            return "(vector-of %s)" % self.lst(d - 1, env)
        if k == 1:
            return "(%s %s %s)" % (r.choice(["vec+", "vec-", "vec*"]), v(), v())
        if k == 2:
            return "(vec-scale %s %s)" % (x(), v())
        if k == 3:
            return "(%s %s)" % (r.choice(["vec-exp", "vec-tanh", "vec-max0", "vec-sin"]), v())
        return "(make-vec 2 %s)" % x()

    def fresh(self, env):
        env["n"][0] += 1
        return "z%d" % env["n"][0]

    @staticmethod
    def bind(env, kind, n):
        e = dict(env)
        e[kind] = env[kind] + [n]
        return e


def typed_program(r):
    t = Typed(r, r.choice([0.0, 0.02, 0.05, 0.1]))
    out = []
    for _ in range(r.randint(2, 6)):
        env = {"real": [], "list": [], "n": [0]}
        out.append(t.real(r.randint(2, 6), env) if r.random() < 0.7 else t.lst(r.randint(2, 5), env))
    return out


def main():
    r = random.Random(int(sys.argv[1]))
    print('(include "optimize")')
    if r.random() < 0.6:
        print("\n".join(typed_program(r)))
        return
    names = []
    out = []
    if r.random() < 0.3:
        out.append("(define-reversible (rv x y) (+= x y))")
        names.append("rv")
    for i in range(r.randint(1, 3)):
        n = "g%d" % i
        out.append("(define (%s a b) %s)" % (n, expr(r, 4, names + ["a", "b"])))
        names.append(n)
    for _ in range(r.randint(2, 6)):
        out.append(expr(r, 5, names))
    print("\n".join(out))


main()
