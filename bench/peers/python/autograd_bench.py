"""HIPS autograd versions of the bench/peers workloads.

usage: python autograd_bench.py WORKLOAD REPS [PARAM ...]
  saddle VARIANT...          full saddle solve (VARIANT: FF FR RF RR, outer first)
  saddle-grad VARIANT...     one outer gradient through one inner solve
  particle VARIANT...        full particle solve
  particle-grad VARIANT...   one outer gradient through one simulation
  hvp-quad CALLS             Hessian-vector product of 2x^2+3xy+4y^2 (FR and RR)
  hvp-sum N MODE...          HVP of sum_i x_i^3 over an array of N, x_i = i/N, v = 1
                             (MODE FR: make_jvp of grad; RR: hessian_vector_product)
  product N                  d/dx prod_{i=1..N} (1 + x/i) at x = 0.5 (reverse)
  xor STEPS                  XOR backprop, STEPS gradient steps
Forward mode is autograd's make_jvp; reverse is autograd's grad.
"""
import numpy as onp
import autograd.numpy as np
from autograd import grad, make_jvp, hessian_vector_product

from common import args, bench, make_product, make_workloads, make_xor_error, XOR_W0, XOR_RATE


def gradient_F(f):
    jf = make_jvp(f)

    def g(x):
        n = len(x)
        eye = onp.eye(n)
        return np.array([jf(x)(eye[i])[1] for i in range(n)])
    return g


def gradient_R(f):
    return grad(f)


def asarray(l):
    return np.array(l)


def main():
    workload, reps, params = args()
    wl = make_workloads(np, gradient_F, gradient_R, asarray)
    if workload in wl:
        for v in params:
            bench(f"{workload}-{v}", reps, 1, lambda v=v: wl[workload](v))
    elif workload == "hvp-quad":
        calls = int(params[0])

        def f(x):
            return 2.0 * (x[0] * x[0]) + (3.0 * (x[0] * x[1]) + 4.0 * (x[1] * x[1]))
        x, v = onp.array([3.0, 4.0]), onp.array([7.0, 8.0])
        hfr = make_jvp(grad(f))
        hrr = hessian_vector_product(f)

        def run(h):
            acc = onp.zeros(2)
            for _ in range(calls):
                acc = acc + h(x, v)
            return acc / calls
        bench("hvp-quad-FR", reps, calls, lambda: run(lambda x, v: hfr(x)(v)[1]))
        bench("hvp-quad-RR", reps, calls, lambda: run(hrr))
    elif workload == "hvp-sum":
        n = int(params[0])

        def f(x):
            return np.sum(x * x * x)
        x = onp.arange(n) / n
        v = onp.ones(n)
        hfr = make_jvp(grad(f))
        hrr = hessian_vector_product(f)
        for mode in params[1:]:
            h = (lambda: hfr(x)(v)[1]) if mode == "FR" else (lambda: hrr(x, v))

            def run(h=h):
                r = h()
                return [onp.sum(r), r[-1]]
            bench(f"hvp-sum-{mode}-{n}", reps, 1, run)
    elif workload == "product":
        n = int(params[0])

        f = make_product(n)
        bench(f"product-R-{n}", reps, 1, lambda: grad(f)(0.5))
    elif workload == "xor":
        steps = int(params[0])
        X = onp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
        T = onp.array([0.0, 1.0, 1.0, 0.0])

        error = make_xor_error(np, X, T)
        g = grad(error)

        def train():
            w = onp.array(XOR_W0)
            for _ in range(steps):
                w = w - XOR_RATE * g(w)
            return [error(w), w]
        bench(f"xor-{steps}", reps, 1, train)
    else:
        raise SystemExit(f"unknown workload {workload}")


if __name__ == "__main__":
    main()
