//! AD benchmarks: a 1,000-term scalar function f(x) = Σ c_i x_i² of a list of
//! reals, its value (primal), its gradient by reverse mode (`gradient-R`, one
//! `*j` pass), one directional derivative by forward mode (`jvp`), and a
//! Hessian-vector product (forward over reverse, `hvp`; and reverse over
//! reverse, `hvp-RR`).
//!
//! Two formulations of f: `loop` walks the lists with a named let that
//! destructures them, `map2` is the prelude style `(reduce + 0 (map2 ... l cs))`.
//!
//! The Hessian-vector products use 100 terms: reverse mode currently takes time
//! quadratic in the length of the lists it walks (eager tagging of aggregate
//! sensitivities at every backpropagator boundary), which makes `hvp-RR` of the
//! 1,000-term `map2` function take minutes and gigabytes.
//!
//! Each derivative runs twice: as the prelude runs it by default (on dual numbers
//! or a tape, `vlad::ad::tape`), and by the closure transforms only
//! (`.../transform`, as `--no-tape`).
//!
//! `ad-nested`: Hessians of a 10-variable function in the four nestings, a
//! gradient through exact constants (the shapes of bench/peers' saddle,
//! particle and XOR workloads), reverse over reverse mixing the two levels'
//! reals, and a 5th derivative by nested reverse mode.
//!
//! `cargo bench --bench ad -- --test` runs each once.

// The program's own allocator (src/alloc.rs: mimalloc with a cache of small blocks),
// so that these time what `vlad` runs.
#[global_allocator]
static ALLOC: vlad::alloc::MiMalloc = vlad::alloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::rc::Rc;
use std::time::Duration;
use vlad::anf::Group;
use vlad::toplevel::Session;

const N: usize = 1000;
const N_HVP: usize = 100;

fn defs() -> String {
    format!(
        "(define (mk n s) (let loop ((i 0) (acc '())) (if (= i n) acc (loop (+ i 1) (cons (+ 1.0 (* s i)) acc)))))\n\
         (define cs (mk {N} 0.001))\n\
         (define xs (mk {N} 0.002))\n\
         (define vs (mk {N} -0.003))\n\
         (define cs100 (mk {N_HVP} 0.001))\n\
         (define xs100 (mk {N_HVP} 0.002))\n\
         (define vs100 (mk {N_HVP} -0.003))\n\
         (define (f-loop l)\n\
           (let loop ((l l) (c cs) (acc 0.0))\n\
             (if (null? l) acc (let (((cons x xt) l) ((cons k kt) c)) (loop xt kt (+ acc (* x (* x k))))))))\n\
         (define (f-map2 l) (reduce + 0 (map2 (lambda (x c) (* x (* x c))) l cs)))\n\
         (define (f-loop100 l)\n\
           (let loop ((l l) (c cs100) (acc 0.0))\n\
             (if (null? l) acc (let (((cons x xt) l) ((cons k kt) c)) (loop xt kt (+ acc (* x (* x k))))))))\n\
         (define (f-map2100 l) (reduce + 0 (map2 (lambda (x c) (* x (* x c))) l cs100)))\n\
         xs cs vs xs100 cs100 vs100"
    )
}

struct Prog {
    s: Session,
}

impl Prog {
    fn new() -> Prog {
        let mut s = Session::new();
        s.m.out = Box::new(std::io::sink());
        if let Err(e) = s.run_text("bench-defs", &defs()) {
            panic!("{}", e.render(&s.sources));
        }
        Prog { s }
    }

    fn compile(&mut self, expr: &str) -> Rc<Group> {
        match self.s.compile_expr(expr, "bench") {
            Ok(g) => g,
            Err(e) => panic!("{}", e.render(&self.s.sources)),
        }
    }

    fn run(&mut self, g: &Rc<Group>) -> vlad::value::Value {
        match self.s.run_thunk(g) {
            Ok(v) => v,
            Err(e) => panic!("{}", e.render(&self.s.sources)),
        }
    }
}

fn bench_ad(c: &mut Criterion) {
    let mut p = Prog::new();
    for style in ["loop", "map2"] {
        let mut group = c.benchmark_group(format!("ad-{}-{}", style, N));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        let cases = [
            ("primal", format!("(f-{style} xs)")),
            ("gradient-R", format!("((gradient-R f-{style}) xs)")),
            ("jvp-F", format!("(jvp f-{style} xs vs)")),
        ];
        for (name, expr) in cases {
            let g = p.compile(&expr);
            for tape in [true, false] {
                if name == "primal" && !tape {
                    continue;
                }
                p.s.m.tape.enabled = tape;
                // check once that it runs and gives a result of the right shape
                let v = p.run(&g);
                if name.starts_with("primal") || name.starts_with("jvp") {
                    assert!(v.as_f64().is_some(), "{}: {}", expr, vlad::print::to_string(&v));
                }
                let label = if tape { name.to_string() } else { format!("{name}/transform") };
                group.bench_function(label, |b| b.iter(|| black_box(p.run(&g))));
            }
        }
        group.finish();
        let mut group = c.benchmark_group(format!("ad-{}-{}", style, N_HVP));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        let cases = [
            ("primal", format!("(f-{style}{N_HVP} xs{N_HVP})")),
            ("gradient-R", format!("((gradient-R f-{style}{N_HVP}) xs{N_HVP})")),
            ("hvp-FR", format!("(hvp f-{style}{N_HVP} xs{N_HVP} vs{N_HVP})")),
            ("hvp-RR", format!("(hvp-RR f-{style}{N_HVP} xs{N_HVP} vs{N_HVP})")),
        ];
        for (name, expr) in cases {
            let g = p.compile(&expr);
            for tape in [true, false] {
                if name == "primal" && !tape {
                    continue;
                }
                p.s.m.tape.enabled = tape;
                let label = if tape { name.to_string() } else { format!("{name}/transform") };
                group.bench_function(label, |b| b.iter(|| black_box(p.run(&g))));
            }
        }
        p.s.m.tape.enabled = true;
        group.finish();
    }
}

/// Nested levels and exact constants, the shapes of the saddle, particle and
/// XOR workloads in bench/peers: the Hessian of a 10-variable function in the
/// four nestings (forward/reverse Jacobian of a forward/reverse gradient), and
/// the gradient of a sum of sigmoids written with exact constants
/// (`(/ 1 (+ 1 (exp (- 0 (* 2 x))))`), a gradient of a gradient whose inner
/// function mixes its variable with the outer one 400 times, and the 5th
/// derivative of x^5 by
/// nested `derivative-R`s (which gave way to the transform before 95ff917),
/// each on levels and by the transform.
fn bench_nested(c: &mut Criterion) {
    let mut p = Prog::new();
    let defs = "(define xs10 (mk 10 0.05))\n\
                (define (g l) (let loop ((l l) (acc 0.0) (prev 1.0))\n\
                  (if (null? l) acc (loop (cdr l) (+ acc (* (car l) (* prev (car l)))) (car l)))))\n\
                (define (sig-sum l) (reduce + 0 (map (lambda (x) (/ 1 (+ 1 (exp (- 0 (* 2 x)))))) l)))";
    if let Err(e) = p.s.run_text("bench-nested", defs) {
        panic!("{}", e.render(&p.s.sources));
    }
    let mut group = c.benchmark_group("ad-nested");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let cases = [
        ("hessian-FF-10", "((jacobian-F (gradient-F g)) xs10)"),
        ("hessian-FR-10", "((jacobian-F (gradient-R g)) xs10)"),
        ("hessian-RF-10", "((jacobian-R (gradient-F g)) xs10)"),
        ("hessian-RR-10", "((jacobian-R (gradient-R g)) xs10)"),
        ("gradient-R-exact-constants-100", "((gradient-R sig-sum) xs100)"),
        // reverse over reverse, the inner function's arithmetic mixing its own
        // variable with the outer one (each `-` and `+` a real of the inner
        // tape whose value is one of the outer: `nested_doubles` in ad::tape)
        (
            "rr-mixed-levels-200",
            "((gradient-R (lambda (x) (car ((gradient-R (lambda (y) (let loop ((i 0) (acc 0.0)) \
             (if (= i 200) acc (loop (+ i 1) (+ acc (* (- (car x) (car y)) (cadr x)))))))) (list 2.0 3.0))))) \
             (list 1.0 0.5))",
        ),
        // the 5th derivative of x^5 by five nested derivative-Rs at a real
        // point (120.0): each inner level drops a result whose zero reaches x
        (
            "nth-derivative-R-5",
            "((derivative-R (derivative-R (derivative-R (derivative-R (derivative-R \
             (lambda (x) (* x (* x (* x (* x x)))))))))) 1.5)",
        ),
    ];
    for (name, expr) in cases {
        let g = p.compile(expr);
        // (check once that both ways give the same value)
        let printed: Vec<String> = [true, false]
            .iter()
            .map(|&tape| {
                p.s.m.tape.enabled = tape;
                vlad::print::to_string(&p.run(&g))
            })
            .collect();
        assert_eq!(printed[0], printed[1], "{expr}: on levels and by the transform");
        for tape in [true, false] {
            p.s.m.tape.enabled = tape;
            let label = if tape { name.to_string() } else { format!("{name}/transform") };
            group.bench_function(label, |b| b.iter(|| black_box(p.run(&g))));
        }
    }
    p.s.m.tape.enabled = true;
    group.finish();
}

criterion_group!(benches, bench_ad, bench_nested);
criterion_main!(benches);
