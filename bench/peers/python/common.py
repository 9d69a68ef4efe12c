"""Shared pieces of the Python peers' workloads (bench/peers/python).

Every workload prints one line per measurement:
    RESULT <name> <seconds> <value> <value> ...
where <seconds> is the median CPU time (process time: user + system, all
threads) of one run, divided by the workload's unit count (e.g. calls), and the
values are the computed result, flattened, for run.sh's agreement check.
The algorithms are the same as bench/peers/ad.ss and bench/peers/vlad/*.vlad.
"""
import statistics
import sys
import time


def flatten(v):
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out.extend(flatten(x))
        return out
    try:
        import numpy
        a = numpy.asarray(v, dtype=float)
        if a.ndim > 0:
            return [float(x) for x in a.ravel()]
        return [float(a)]
    except Exception:
        return [float(v)]


def bench(name, reps, per, thunk):
    times, v = [], None
    for _ in range(reps):
        t0 = time.process_time()
        v = thunk()
        t1 = time.process_time()
        times.append(t1 - t0)
    vals = " ".join(repr(x) for x in flatten(v))
    print(f"RESULT {name} {statistics.median(times) / per!r} {vals}", flush=True)


def make_argmin(np):
    """The benchmark's gradient descent (Siskind & Pearlmutter's saddle and
    particle): step eta from 1e-5, doubled after 10 improving steps, halved
    after a step that does not improve; stop when |grad| <= 1e-5 or when a step
    moves <= 1e-5."""

    def magnitude(v):
        return np.sqrt(np.dot(v, v))

    def distance(u, v):
        return magnitude(u - v)

    def multivariate_argmin(gradient, f, x):
        g = gradient(f)
        fx, gx, eta, i = f(x), g(x), 1e-5, 0
        while True:
            if magnitude(gx) <= 1e-5:
                return x
            if i == 10:
                eta, i = 2.0 * eta, 0
                continue
            x_prime = x - eta * gx
            if distance(x, x_prime) <= 1e-5:
                return x
            fx_prime = f(x_prime)
            if fx_prime < fx:
                x, fx, gx, i = x_prime, fx_prime, g(x_prime), i + 1
            else:
                eta, i = eta / 2.0, 0

    def multivariate_argmax(gradient, f, x):
        return multivariate_argmin(gradient, lambda x: 0.0 - f(x), x)

    def multivariate_max(gradient, f, x):
        return f(multivariate_argmax(gradient, f, x))

    return multivariate_argmin, multivariate_argmax, multivariate_max, distance


def make_workloads(np, gradient_F, gradient_R, asarray):
    """saddle and particle for an array library `np` with the two gradient
    operators; `asarray` builds a 1-D float array from a list (of possibly
    traced scalars)."""
    argmin, argmax, maxv, distance = make_argmin(np)
    grads = {"F": gradient_F, "R": gradient_R}

    def payoff(x1, y1, x2, y2):
        return (x1 * x1 + y1 * y1) - (x2 * x2 + y2 * y2)

    def outer_objective(inner, start):
        return lambda x: maxv(inner, lambda y: payoff(x[0], x[1], y[0], y[1]), start)

    def saddle(variant):
        outer, inner = grads[variant[0]], grads[variant[1]]
        start = asarray([1.0, 1.0])
        xs = argmin(outer, outer_objective(inner, start), start)
        ys = argmax(inner, lambda y: payoff(xs[0], xs[1], y[0], y[1]), start)
        return [xs, ys]

    def saddle_grad(variant):
        # one outer gradient (through a whole inner solve), at x = (1 1)
        outer, inner = grads[variant[0]], grads[variant[1]]
        start = asarray([1.0, 1.0])
        return outer(outer_objective(inner, start))(start)

    def naive_euler(gradient, w):
        charges = [asarray([10.0, 10.0 - w]), asarray([10.0, 0.0])]
        x = asarray([0.0, 8.0])
        xdot = asarray([0.75, 0.0])
        delta_t = 0.1

        def p(x):
            return sum(1.0 / distance(x, c) for c in charges)

        gp = gradient(p)
        while True:
            xddot = -1.0 * gp(x)
            x_new = x + delta_t * xdot
            if x_new[1] > 0:
                x, xdot = x_new, xdot + delta_t * xddot
            else:
                delta_t_f = (0.0 - x[1]) / xdot[1]
                x_t_f = x + delta_t_f * xdot
                return x_t_f[0] * x_t_f[0]

    def particle(variant):
        outer, inner = grads[variant[0]], grads[variant[1]]
        return argmin(outer, lambda w: naive_euler(inner, w[0]), asarray([0.0]))[0]

    def particle_grad(variant):
        # one outer gradient (through a whole simulation), at w = (0)
        outer, inner = grads[variant[0]], grads[variant[1]]
        return outer(lambda w: naive_euler(inner, w[0]))(asarray([0.0]))

    return {"saddle": saddle, "saddle-grad": saddle_grad,
            "particle": particle, "particle-grad": particle_grad}


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


XOR_W0 = [0.5, -0.4, 0.1, -0.3, 0.6, -0.2, 0.7, -0.5, 0.05]
XOR_RATE = 2.5


def make_product(n, one=1.0):
    """f(x) = prod_{i=1..n} (1 + x/i), as a loop from i = n down; `one` is the
    starting product (a library's scalar 1.0 where a plain float will not do)."""
    def f(x):
        p = one
        for i in range(n, 0, -1):
            p = (1.0 + x / i) * p
        return p
    return f


def make_xor_error(np, X, T):
    """The XOR network's squared error as a function of its 9 weights, for an
    array library `np` (reshape, exp, sum) and the inputs X and targets T."""
    def sigmoid(z):
        return 1.0 / (1.0 + np.exp(0.0 - z))

    def error(w):
        W = np.reshape(w[0:6], (2, 3))
        h = sigmoid(X @ W[:, 0:2].T + W[:, 2])
        o = sigmoid(h @ w[6:8] + w[8])
        d = o - T
        return np.sum(d * d)
    return error


def args():
    """argv: WORKLOAD REPS [PARAM ...]"""
    a = sys.argv[1:]
    if len(a) < 2:
        sys.exit(f"usage: {sys.argv[0]} WORKLOAD REPS [PARAM ...]")
    return a[0], int(a[1]), a[2:]
