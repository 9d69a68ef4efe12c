#!/usr/bin/env python3
# Random programs for run.sh (GEN=gen_sweeps.py) aimed at gradient-F's forward sweeps
# (ad::tape::gradient_by_sweeps): odd seeds, gradient-F inside derivative-F/-R over an
# outer variable (used directly, through a product or a sum), and jacobian-F of
# gradient-F; even seeds, gradient-F at the top level of functions that take inner
# gradients, derivatives and HVPs (gradient-R, gradient-F, derivative-R, hvp, hvp-RR) of
# closures reading its variables. Arithmetic, sqrt/exp/log/sin/cos/atan, if; exact,
# big, rational, signed-zero and huge constants; exact and double arguments.
#
#   python3 tools/fuzz/gen_sweeps.py SEED
import random, sys


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


def ff(R):
    out = []
    for i in range(8):
        nv = R.choice([2, 2, 3])
        xs = ' '.join(R.choice(['1.5', '2', '-0.75', '3.0', '0.0', '1']) for _ in range(nv))
        def leaf():
            k = R.random()
            if k < 0.45: return R.choice(['(car v)', '(cadr v)'] + (['(caddr v)'] if nv > 2 else []))
            if k < 0.65: return R.choice(['w', 'w1'])
            return R.choice(CONSTS)
        body = expr(R, R.randint(1, 4), leaf)
        wdef = R.choice(['w', '(* 1.0 w)', '(+ w 0.5)', '(* w w)'])
        pt = R.choice(['0.5', '2', '1.25', '-1'])
        mode = R.choice(['F', 'F', 'F', 'R'])
        sel = R.choice(['car', 'cadr', '(lambda (g) (reduce + 0 g))', '(lambda (g) g)'])
        if mode == 'F' and sel == '(lambda (g) g)':
            sel = 'car'
        out.append(f"((derivative-{mode} (lambda (w) (let ((w1 {wdef})) ({sel} ((gradient-F (lambda (v) {body})) (list {xs})))))) {pt})")
        if R.random() < 0.3:
            out.append(f"((jacobian-F (gradient-F (lambda (v) (let ((w 0.5) (w1 1.5)) {body})))) (list {xs}))")
    return out


def nested(R):
    def over(vs):
        return lambda: R.choice(vs) if R.random() < 0.7 else R.choice(CONSTS)
    out = []
    for i in range(6):
        nv = R.choice([2, 3])
        xs = ' '.join(R.choice(['1.5', '2', '-0.75', '3.0', '0.0', '1', '0.25']) for _ in range(nv))
        outer_vars = ['(car v)', '(cadr v)'] + (['(caddr v)'] if nv > 2 else [])
        inner_vars = outer_vars + ['(car u)', '(cadr u)']
        body = expr(R, R.randint(1, 3), over(inner_vars))
        us = ' '.join(R.choice(['0.5', '1', '-2.0', '1.25']) for _ in range(2))
        kind = R.randrange(6)
        if kind == 0: inner = f"(car ((gradient-R (lambda (u) {body})) (list {us})))"
        elif kind == 1: inner = f"(cadr ((gradient-F (lambda (u) {body})) (list {us})))"
        elif kind == 2: inner = f"((derivative-R (lambda (s) (let ((u (list s 0.5))) {body}))) 0.75)"
        elif kind == 3: inner = f"(car (hvp (lambda (u) {body}) (list {us}) (list 1.0 0.5)))"
        elif kind == 4: inner = f"(cadr (hvp-RR (lambda (u) {body}) (list {us}) (list 1 -1.0)))"
        else: inner = f"(+ {expr(R, 2, over(outer_vars))} (car ((gradient-R (lambda (u) {body})) (list {us}))))"
        out.append(f"((gradient-F (lambda (v) {inner})) (list {xs}))")
    return out


if __name__ == '__main__':
    seed = int(sys.argv[1])
    R = random.Random(seed)
    print('\n'.join(ff(R) if seed % 2 else nested(R)))
