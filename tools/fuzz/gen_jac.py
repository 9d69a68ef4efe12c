#!/usr/bin/env python3
# Random programs for run.sh (GEN=gen_jac.py) aimed at jacobian-F and hessian
# (`%jvp-units`: one recorded run swept forward once per real of the argument):
# Hessians and forward Jacobians of random functions of 2-4 reals (lists of
# results with constants among them), at the top level, inside derivative-F/-R
# over an outer variable the argument or the function holds, and of inner
# gradients; exact and double arguments.
#
#   python3 tools/fuzz/gen_jac.py SEED
import random, sys


# (CONSTS and expr as in gen_sweeps.py)
CONSTS = ['2', '3', '-1', '0', '1', '0.5', '2.0', '-0.0', '0.0', '1e300', '100000000000000000000', '(/ 1 3)']


def expr(R, d, leaf):
    """A random scalar expression of depth at most d over leaf() (a variable or constant)."""
    if d <= 0 or R.random() < 0.2: return leaf()
    k = R.random()
    if k < 0.55:
        op = R.choice(['+', '-', '*', '*', '+', '/'])
        return f"({op} {expr(R, d-1, leaf)} {expr(R, d-1, leaf)})"
    if k < 0.8:
        op = R.choice(['sqrt', 'exp', 'sin', 'cos', 'log'])
        a = expr(R, d-1, leaf)
        if op in ('sqrt', 'log'): a = f"(+ 2.5 (* {a} {a}))"
        if op == 'exp': a = f"(sin {a})"
        return f"({op} {a})"
    if k < 0.9:
        return f"(atan {expr(R, d-1, leaf)} (+ 1.5 (* {expr(R, d-1, leaf)} {expr(R, d-1, leaf)})))"
    return f"(if (< {expr(R, 1, leaf)} {expr(R, 1, leaf)}) {expr(R, d-1, leaf)} {expr(R, d-1, leaf)})"




def program(R):
    out = []
    for _ in range(8):
        nv = R.choice([2, 2, 3, 4])
        xs = [R.choice(['1.5', '2', '-0.75', '3.0', '0.0', '1', '0.25']) for _ in range(nv)]
        vars_ = ['(car v)', '(cadr v)', '(caddr v)', '(cadddr v)'][:nv]
        def leaf(extra=()):
            k = R.random()
            if k < 0.55: return R.choice(vars_)
            if k < 0.7 and extra: return R.choice(extra)
            return R.choice(CONSTS)
        body = expr(R, R.randint(1, 4), leaf)
        outs = ' '.join(R.choice([expr(R, R.randint(0, 3), leaf), expr(R, 2, leaf), R.choice(CONSTS)]) for _ in range(R.choice([1, 2, 3])))
        kind = R.randrange(6)
        if kind == 0:
            out.append(f"((hessian (lambda (v) {body})) (list {' '.join(xs)}))")
        elif kind == 1:
            out.append(f"((jacobian-F (lambda (v) (list {outs}))) (list {' '.join(xs)}))")
        elif kind == 2:
            out.append(f"((jacobian-F (gradient-R (lambda (v) {body}))) (list {' '.join(xs)}))")
        else:
            # inside a derivative in w: w in the argument, or in the function
            wbody = expr(R, R.randint(1, 3), lambda: leaf(('w', '(* w w)')))
            ys = list(xs)
            if R.random() < 0.6:
                ys[R.randrange(nv)] = R.choice(['w', '(* 2.0 w)', '(+ w 1)'])
            mode = R.choice(['F', 'R'])
            sel = R.choice(['(lambda (h) (car (car h)))', '(lambda (h) (cadr (car h)))', '(lambda (h) (reduce + 0 (map (lambda (r) (reduce + 0 r)) h)))'])
            what = R.choice(['hessian', 'jacobian-F (lambda (g) (list (car g) (* 2 (cadr g))))'])
            if what == 'hessian':
                out.append(f"((derivative-{mode} (lambda (w) ({sel} ((hessian (lambda (v) {wbody})) (list {' '.join(ys)}))))) {R.choice(['0.5', '2', '1.25', '-1'])})")
            else:
                out.append(f"((derivative-{mode} (lambda (w) ({sel} ((jacobian-F (lambda (v) (list {wbody} {expr(R, 2, lambda: leaf(('w',)))}))) (list {' '.join(ys)}))))) {R.choice(['0.5', '2', '1.25', '-1'])})")
    return out


seed = int(sys.argv[1])
R = random.Random(seed)
print('\n'.join(program(R)))
