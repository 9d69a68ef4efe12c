//! Criterion benchmarks of the vector primitives against tight native Rust loops
//! over `f64` slices (issue #7: CPU elementwise operations and reductions within
//! 1.5x of native), and of gradients, on the CPU and (when a device is present) the
//! GPU. Each VLAD expression is compiled once; only running it is timed.
//!
//! `cargo bench --bench vectors` measures; `cargo bench --bench vectors -- --test`
//! runs each once. `VLAD_THREADS=1` makes the CPU backend single-threaded (the
//! native loops always are). GPU groups print "skipped: no CUDA device" without one.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::rc::Rc;
use std::time::Duration;
use vlad::anf::Group;
use vlad::toplevel::Session;
use vlad::value::Value;
use vlad::vec::Backend;

#[path = "common.rs"]
mod common;
use common::{prepare, run};

fn setup(backend: Backend, defs: &str, call: &str) -> (Session, Rc<Group>) {
    let mut s = Session::new();
    s.m.backend = backend;
    prepare(s, defs, call)
}

/// Forces a result's numbers onto the host when it is a device vector (so GPU timings
/// include finishing the work, not only queueing it).
fn settle(v: &Value) {
    match v {
        Value::Vector(x) if x.on_device() => {
            black_box(x.get(0));
        }
        _ => {}
    }
}

const DEFS: &str = "(define a (vec-sin (vec-iota N))) (define b (vec-cos (vec-iota N)))";

fn defs(n: usize) -> String {
    DEFS.replace("N", &n.to_string())
}

fn native_inputs(n: usize) -> (Vec<f64>, Vec<f64>) {
    ((0..n).map(|i| (i as f64).sin()).collect(), (0..n).map(|i| (i as f64).cos()).collect())
}

/// Native baselines: the loops a Rust programmer would write.
mod native {
    pub fn add_into(a: &[f64], b: &[f64], out: &mut [f64]) {
        for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
            *o = x + y;
        }
    }
    pub fn add_alloc(a: &[f64], b: &[f64]) -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| x + y).collect()
    }
    pub fn exp_alloc(a: &[f64]) -> Vec<f64> {
        a.iter().map(|x| x.exp()).collect()
    }
    pub fn sum_naive(a: &[f64]) -> f64 {
        a.iter().sum()
    }
    pub fn dot_naive(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }
    /// Eight accumulators (what a tuned native loop does; vectorises).
    pub fn sum_unrolled(a: &[f64]) -> f64 {
        let mut acc = [0.0; 8];
        let c = a.chunks_exact(8);
        let r = c.remainder();
        for ch in c {
            for k in 0..8 {
                acc[k] += ch[k];
            }
        }
        acc.iter().sum::<f64>() + r.iter().sum::<f64>()
    }
    pub fn dot_unrolled(a: &[f64], b: &[f64]) -> f64 {
        let mut acc = [0.0; 8];
        let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            for k in 0..8 {
                acc[k] += x[k] * y[k];
            }
        }
        acc.iter().sum::<f64>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f64>()
    }
}

const SIZES: &[usize] = &[1_000, 100_000, 1_000_000, 10_000_000];

fn cpu_vs_native(c: &mut Criterion) {
    for &n in SIZES {
        let mut g = c.benchmark_group(format!("cpu n={}", n));
        g.throughput(Throughput::Elements(n as u64));
        g.warm_up_time(Duration::from_millis(300));
        g.measurement_time(Duration::from_secs(if n >= 10_000_000 { 3 } else { 1 }));
        g.sample_size(if n >= 10_000_000 { 10 } else { 30 });
        let (a, b) = native_inputs(n);
        let mut out = vec![0.0; n];
        let d = defs(n);

        g.bench_function(BenchmarkId::new("add", "native into buffer"), |bn| {
            bn.iter(|| native::add_into(black_box(&a), black_box(&b), &mut out))
        });
        g.bench_function(BenchmarkId::new("add", "native allocating"), |bn| {
            bn.iter(|| black_box(native::add_alloc(black_box(&a), black_box(&b))))
        });
        let (mut s, t) = setup(Backend::Cpu, &d, "(vec+ a b)");
        g.bench_function(BenchmarkId::new("add", "vlad vec+"), |bn| bn.iter(|| black_box(run(&mut s, &t))));

        g.bench_function(BenchmarkId::new("exp", "native allocating"), |bn| {
            bn.iter(|| black_box(native::exp_alloc(black_box(&a))))
        });
        g.bench_function(BenchmarkId::new("exp", "native into buffer"), |bn| {
            bn.iter(|| {
                for (o, x) in out.iter_mut().zip(black_box(&a)) {
                    *o = x.exp();
                }
            })
        });
        g.bench_function(BenchmarkId::new("exp", "vlad cpu loop into buffer"), |bn| {
            bn.iter(|| vlad::vec::cpu::unary(vlad::vec::ops::Un::Exp, black_box(&a), &mut out))
        });
        let (mut s, t) = setup(Backend::Cpu, &d, "(vec-exp a)");
        g.bench_function(BenchmarkId::new("exp", "vlad vec-exp"), |bn| {
            bn.iter(|| black_box(run(&mut s, &t)))
        });

        g.bench_function(BenchmarkId::new("sum", "native naive"), |bn| {
            bn.iter(|| black_box(native::sum_naive(black_box(&a))))
        });
        g.bench_function(BenchmarkId::new("sum", "native unrolled"), |bn| {
            bn.iter(|| black_box(native::sum_unrolled(black_box(&a))))
        });
        g.bench_function(BenchmarkId::new("sum", "vlad cpu loop"), |bn| {
            bn.iter(|| black_box(vlad::vec::cpu::sum(black_box(&a))))
        });
        let (mut s, t) = setup(Backend::Cpu, &d, "(vec-sum a)");
        g.bench_function(BenchmarkId::new("sum", "vlad vec-sum"), |bn| {
            bn.iter(|| black_box(run(&mut s, &t)))
        });

        g.bench_function(BenchmarkId::new("dot", "native naive"), |bn| {
            bn.iter(|| black_box(native::dot_naive(black_box(&a), black_box(&b))))
        });
        g.bench_function(BenchmarkId::new("dot", "native unrolled"), |bn| {
            bn.iter(|| black_box(native::dot_unrolled(black_box(&a), black_box(&b))))
        });
        let (mut s, t) = setup(Backend::Cpu, &d, "(vec-dot a b)");
        g.bench_function(BenchmarkId::new("dot", "vlad vec-dot"), |bn| {
            bn.iter(|| black_box(run(&mut s, &t)))
        });
        g.finish();
    }
}

/// Gradients of `vec-dot` and `vec-sum(vec-exp)` at 10^7 elements, per backend.
fn gradients(c: &mut Criterion) {
    let n = 10_000_000;
    let mut backends = vec![Backend::Cpu];
    if vlad::vec::cuda_available() {
        backends.push(Backend::Cuda);
    } else {
        eprintln!("gradients on cuda: skipped: no CUDA device ({})", vlad::vec::cuda_unavailable_reason());
    }
    let mut g = c.benchmark_group(format!("gradient n={}", n));
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    for b in backends {
        let d = defs(n);
        for (name, f) in [
            ("grad vec-dot(x, b)", "((gradient-R (lambda (x) (vec-dot x b))) a)"),
            ("grad vec-sum(vec-exp x)", "((gradient-R (lambda (x) (vec-sum (vec-exp x)))) a)"),
        ] {
            let (mut s, t) = setup(b, &d, f);
            g.bench_function(BenchmarkId::new(name, b.name()), |bn| {
                bn.iter(|| {
                    let v = run(&mut s, &t);
                    settle(&v);
                    black_box(v)
                })
            });
        }
    }
    g.finish();
}

/// An elementwise chain over 10^8 doubles on the GPU, reported as memory bandwidth:
/// `(vec+ (vec* a b) a)` reads a and b and writes two results per element pass.
fn gpu_chain(c: &mut Criterion) {
    if !vlad::vec::cuda_available() {
        eprintln!("gpu chain 10^8: skipped: no CUDA device ({})", vlad::vec::cuda_unavailable_reason());
        return;
    }
    let n = 100_000_000usize;
    let d = defs(n);
    let mut g = c.benchmark_group("gpu chain n=10^8");
    // vec* reads 2n and writes n doubles; vec+ reads 2n and writes n: 6n doubles moved.
    g.throughput(Throughput::Bytes((6 * 8 * n) as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    let (mut s, t) = setup(Backend::Cuda, &d, "(vec+ (vec* a b) a)");
    g.bench_function("(vec+ (vec* a b) a)", |bn| {
        bn.iter(|| {
            let v = run(&mut s, &t);
            settle(&v);
            black_box(v)
        })
    });
    g.finish();
}

criterion_group!(benches, cpu_vs_native, gradients, gpu_chain);
criterion_main!(benches);
