"""JAX (CPU, float64) versions of the bench/peers workloads, eager and jit.

usage: python jax_bench.py WORKLOAD REPS [PARAM ...]
  saddle VARIANT...          full saddle solve, eager (VARIANT: FF FR RF RR)
  saddle-grad VARIANT...     one outer gradient through one inner solve, eager
  particle VARIANT...        full particle solve, eager
  particle-grad VARIANT...   one outer gradient through one simulation, eager
  hvp-quad CALLS [jit]       HVP of 2x^2+3xy+4y^2: FR = jvp of grad, RR = grad of grad.v
  hvp-sum N MODE... [jit]    HVP of sum_i x_i^3 over an array of N, x_i = i/N, v = 1
                             (MODE FR: jvp of grad; RR: grad of grad.v)
  product N [jit]            d/dx prod_{i=1..N} (1 + x/i) at x = 0.5 (grad; jit: fori_loop)
  xor STEPS [jit]            XOR backprop (jit: the whole training loop in fori_loop)
With `jit`, the function timed is jax.jit-compiled; it is called once before
timing, so compilation is not counted.  saddle and particle are eager only:
their loops stop on data-dependent tests and reverse mode cannot go through
lax.while_loop, so the nested solvers cannot be jitted as written.
Forward mode is jax.jvp; reverse is jax.grad.
"""
import os
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as onp  # noqa: E402

from common import args, bench, make_product, make_workloads, make_xor_error, XOR_W0, XOR_RATE  # noqa: E402


def gradient_F(f):
    def g(x):
        n = x.shape[0]
        eye = jnp.eye(n, dtype=jnp.float64)
        return jnp.stack([jax.jvp(f, (x,), (eye[i],))[1] for i in range(n)])
    return g


def gradient_R(f):
    return jax.grad(f)


def asarray(l):
    return jnp.stack([jnp.asarray(v, dtype=jnp.float64) for v in l])


def ready(v):
    return jax.block_until_ready(v)


def main():
    workload, reps, params = args()
    jit = "jit" in params
    params = [p for p in params if p != "jit"]
    tag = "-jit" if jit else ""
    wl = make_workloads(jnp, gradient_F, gradient_R, asarray)
    maybe_jit = jax.jit if jit else (lambda f: f)
    if workload in wl:
        for v in params:
            bench(f"{workload}-{v}", reps, 1, lambda v=v: onp.asarray(ready(wl[workload](v))))
    elif workload == "hvp-quad":
        calls = int(params[0])

        def f(x):
            return 2.0 * (x[0] * x[0]) + (3.0 * (x[0] * x[1]) + 4.0 * (x[1] * x[1]))
        x, v = jnp.array([3.0, 4.0]), jnp.array([7.0, 8.0])
        hfr = maybe_jit(lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1])
        hrr = maybe_jit(lambda x, v: jax.grad(lambda x: jnp.dot(jax.grad(f)(x), v))(x))

        def run(h):
            acc = onp.zeros(2)
            for _ in range(calls):
                acc = acc + onp.asarray(h(x, v))
            return acc / calls
        for name, h in (("FR", hfr), ("RR", hrr)):
            ready(h(x, v))
            bench(f"hvp-quad-{name}{tag}", reps, calls, lambda h=h: run(h))
    elif workload == "hvp-sum":
        n = int(params[0])

        def f(x):
            return jnp.sum(x * x * x)
        x = jnp.arange(n, dtype=jnp.float64) / n
        v = jnp.ones(n)
        for mode in params[1:]:
            if mode == "FR":
                h = maybe_jit(lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1])
            else:
                h = maybe_jit(lambda x, v: jax.grad(lambda x: jnp.dot(jax.grad(f)(x), v))(x))
            ready(h(x, v))

            def run(h=h):
                r = onp.asarray(h(x, v))
                return [r.sum(), r[-1]]
            bench(f"hvp-sum-{mode}-{n}{tag}", reps, 1, run)
    elif workload == "product":
        n = int(params[0])
        if jit:
            def f(x):
                return jax.lax.fori_loop(0, n, lambda k, p: (1.0 + x / (n - k)) * p, 1.0)
        else:
            f = make_product(n)
        g = maybe_jit(jax.grad(f))
        x0 = jnp.float64(0.5)
        ready(g(x0))
        bench(f"product-R-{n}{tag}", reps, 1, lambda: float(g(x0)))
    elif workload == "xor":
        steps = int(params[0])
        X = jnp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
        T = jnp.array([0.0, 1.0, 1.0, 0.0])

        error = make_xor_error(jnp, X, T)
        g = jax.grad(error)
        w0 = jnp.array(XOR_W0)
        if jit:
            train_j = jax.jit(lambda w: jax.lax.fori_loop(0, steps, lambda k, w: w - XOR_RATE * g(w), w))
            ready(train_j(w0))

            def train():
                w = train_j(w0)
                return [float(error(w)), onp.asarray(w)]
        else:
            def train():
                w = w0
                for _ in range(steps):
                    w = w - XOR_RATE * g(w)
                return [float(error(w)), onp.asarray(w)]
        bench(f"xor-{steps}{tag}", reps, 1, train)
    else:
        raise SystemExit(f"unknown workload {workload}")


if __name__ == "__main__":
    main()
