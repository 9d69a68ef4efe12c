"""PyTorch (CPU, float64, torch.func) versions of the bench/peers workloads.

usage: python torch_bench.py WORKLOAD REPS [PARAM ...]   (workloads as jax_bench.py)
Forward mode is torch.func.jvp; reverse is torch.func.grad.  Eager only (no
torch.compile: it is not what these nested, data-dependent solvers can use).
"""
import torch
from torch.func import grad, jvp

from common import args, bench, make_product, make_workloads, make_xor_error, XOR_W0, XOR_RATE

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


class TorchNp:
    """the few numpy-style functions make_workloads needs"""
    sqrt = staticmethod(torch.sqrt)

    @staticmethod
    def dot(u, v):
        return torch.dot(u, v)


def gradient_F(f):
    def g(x):
        n = x.shape[0]
        eye = torch.eye(n)
        return torch.stack([jvp(f, (x,), (eye[i],))[1] for i in range(n)])
    return g


def gradient_R(f):
    return grad(f)


def asarray(l):
    return torch.stack([torch.as_tensor(v, dtype=torch.float64) for v in l])


def main():
    workload, reps, params = args()
    wl = make_workloads(TorchNp, gradient_F, gradient_R, asarray)
    if workload in wl:
        for v in params:
            bench(f"{workload}-{v}", reps, 1, lambda v=v: wl[workload](v).detach().numpy())
    elif workload == "hvp-quad":
        calls = int(params[0])

        def f(x):
            return 2.0 * (x[0] * x[0]) + (3.0 * (x[0] * x[1]) + 4.0 * (x[1] * x[1]))
        x, v = torch.tensor([3.0, 4.0]), torch.tensor([7.0, 8.0])

        def hfr(x, v):
            return jvp(grad(f), (x,), (v,))[1]

        def hrr(x, v):
            return grad(lambda x: torch.dot(grad(f)(x), v))(x)

        def run(h):
            acc = torch.zeros(2)
            for _ in range(calls):
                acc = acc + h(x, v)
            return (acc / calls).numpy()
        bench("hvp-quad-FR", reps, calls, lambda: run(hfr))
        bench("hvp-quad-RR", reps, calls, lambda: run(hrr))
    elif workload == "hvp-sum":
        n = int(params[0])

        def f(x):
            return torch.sum(x * x * x)
        x = torch.arange(n, dtype=torch.float64) / n
        v = torch.ones(n)
        for mode in params[1:]:
            if mode == "FR":
                def h():
                    return jvp(grad(f), (x,), (v,))[1]
            else:
                def h():
                    return grad(lambda x: torch.dot(grad(f)(x), v))(x)

            def run(h=h):
                r = h()
                return [float(r.sum()), float(r[-1])]
            bench(f"hvp-sum-{mode}-{n}", reps, 1, run)
    elif workload == "product":
        n = int(params[0])

        f = make_product(n, torch.tensor(1.0))
        bench(f"product-R-{n}", reps, 1, lambda: float(grad(f)(torch.tensor(0.5))))
    elif workload == "xor":
        steps = int(params[0])
        X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
        T = torch.tensor([0.0, 1.0, 1.0, 0.0])

        error = make_xor_error(torch, X, T)
        g = grad(error)

        def train():
            w = torch.tensor(XOR_W0)
            for _ in range(steps):
                w = w - XOR_RATE * g(w)
            return [float(error(w)), w.numpy()]
        bench(f"xor-{steps}", reps, 1, train)
    else:
        raise SystemExit(f"unknown workload {workload}")


if __name__ == "__main__":
    main()
