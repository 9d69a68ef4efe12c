"""HVP of f(x) = sum x_i^3 (float64) on the GPU: JAX (jit and eager) and torch.func, K calls
each followed by a sum read back as a Python float (as the vlad program does)."""
import sys, time
K = int(sys.argv[1]) if len(sys.argv) > 1 else 200
Ns = [int(a) for a in sys.argv[2:]] or [10**6, 10**7]

def timeit(fn, k):
    fn()
    t = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t) / k

try:
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    f = lambda x: jnp.sum(x * x * x)
    hvp = lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1]
    jh = jax.jit(hvp)
    print("jax devices:", jax.devices())
    for n in Ns:
        x = jnp.arange(n, dtype=jnp.float64) / n
        v = jnp.ones(n, dtype=jnp.float64)
        s = float(jnp.sum(jh(x, v)))
        assert abs(s - 3 * (n - 1)) < 1e-6 * n, s
        print(f"jax jit   n={n}: {timeit(lambda: float(jnp.sum(jh(x, v))), K)*1e3:.3f} ms")
        print(f"jax eager n={n}: {timeit(lambda: float(jnp.sum(hvp(x, v))), max(K // 10, 3))*1e3:.3f} ms")
except Exception as e:
    print("jax: skipped:", e)
try:
    import torch
    from torch.func import grad, jvp
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tf = lambda x: torch.sum(x * x * x)
    th = lambda x, v: jvp(grad(tf), (x,), (v,))[1]
    for n in Ns:
        x = torch.arange(n, dtype=torch.float64, device=dev) / n
        v = torch.ones(n, dtype=torch.float64, device=dev)
        s = float(torch.sum(th(x, v)))
        assert abs(s - 3 * (n - 1)) < 1e-6 * n, s
        print(f"torch.func {dev} n={n}: {timeit(lambda: float(torch.sum(th(x, v))), K)*1e3:.3f} ms")
except Exception as e:
    print("torch: skipped:", e)
