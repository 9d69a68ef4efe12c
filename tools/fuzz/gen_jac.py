#!/usr/bin/env python3
# Random programs for run.sh (GEN=gen_jac.py) aimed at jacobian-F and hessian
# (`%jvp-units`: one recorded run swept forward once per real of the argument):
# Hessians and forward Jacobians of random functions of 2-4 reals (lists of
# results with constants among them), at the top level, inside derivative-F/-R
# over an outer variable the argument or the function holds, and of inner
# gradients; exact and double arguments (expressions as gen_sweeps.py makes them).
#
#   python3 tools/fuzz/gen_jac.py SEED
import os, random, sys
sys.dont_write_bytecode = True  # (no __pycache__ left in tools/fuzz)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_sweeps import CONSTS, expr


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
