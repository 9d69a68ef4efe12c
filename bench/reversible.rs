//! Reversible procedures: forward (`call`) against backward (`uncall`) time, which
//! should be equal within noise; and gradients of the same loop-heavy function by
//! `rev-grad` (NiLang: run backward, no tape) against `*j` on the ordinary VLAD
//! version (a closure chain as long as the loop), in time and in peak memory.
//!
//! `cargo bench --bench reversible`; the peak-memory table is printed first.

use criterion::{criterion_group, BenchmarkId, Criterion};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use vlad::anf::Group;
use vlad::toplevel::Session;

/// Counts live heap bytes and their peak.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new > l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const DEFS: &str = "
;; the Schrodinger simulation of examples/reversible/schrodinger.vlad
(define-reversible (update-x X Y alpha eps i)
  (declare mod32)
  (+= (ref X i) (*/ (ref alpha i) (ref Y i)))
  (-= (ref X i) (*/ eps (+ (ref Y (% (+ i 1) 128)) (ref Y (% (- i 1) 128))))))
(define-reversible (update-y X Y alpha eps i)
  (declare mod32)
  (-= (ref Y i) (*/ (ref alpha i) (ref X i)))
  (+= (ref Y i) (*/ eps (+ (ref X (% (+ i 1) 128)) (ref X (% (- i 1) 128))))))
(define-reversible (step X Y alpha eps)
  (declare mod32)
  (local (i 0)
    (from-loop (= i 0) (begin-rev (call update-x X Y alpha eps i) (+= i 1)) (skip) (= i 128))
    (delocal i 128))
  (local (i 0)
    (from-loop (= i 0) (begin-rev (call update-y X Y alpha eps i) (+= i 1)) (skip) (= i 128))
    (delocal i 128)))
(define-reversible (simulate X Y alpha eps n steps)
  (declare mod32)
  (from-loop (= n 0) (skip) (begin-rev (call step X Y alpha eps) (+= n 1)) (= n steps)))
(define (bump i) (let ((d (- i 64))) (if (< (* d d) 100) (* 1000000 (- 100 (* d d))) 0)))
(define X0 (map bump (iota 128)))
(define Y0 (map (lambda (i) 0) (iota 128)))
(define alpha (map (lambda (i) (+ 1073741824 (* 1000 i))) (iota 128)))
(define eps 536870912)
(define S20 (call simulate X0 Y0 alpha eps 0 20))

;; one loop-heavy function, reversible and ordinary
(define-reversible (rloop y x n)
  (local (i 0)
    (from-loop (= i 0)
               (skip)
               (begin-rev (+= i 1) (*= y 0.999) (+= y (* 0.01 (sin (* x i)))))
               (= i n))
    (delocal i n)))
(define (vloop x n)
  (let loop ((i 0) (y 0.0))
    (if (= i n) y (let ((i1 (+ i 1))) (loop i1 (+ (* y 0.999) (* 0.01 (sin (* x i1)))))))))
(define (star-j-grad x n)
  (cdr (unsensitize ((cdr ((*j (lambda (x) (vloop x n))) (*j x))) (sensitize 1.0)))))
(define (car (cons a d)) a)
(define (star-j-through-call x n)
  (cdr (unsensitize ((cdr ((*j (lambda (x) (car (call rloop 0.0 x n)))) (*j x))) (sensitize 1.0)))))
";

fn session() -> Session {
    let mut s = Session::new();
    s.run_text("bench.vlad", DEFS).expect("bench definitions");
    s
}

fn thunk(s: &mut Session, text: &str) -> Rc<Group> {
    s.compile_expr(text, "bench").expect("bench expression")
}

fn peak_bytes(s: &mut Session, g: &Rc<Group>) -> usize {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let v = s.run_thunk(g).expect("runs");
    let peak = PEAK.load(Ordering::Relaxed) - base;
    drop(v);
    peak
}

fn memory_report() {
    let mut s = session();
    println!("peak heap growth while computing d/dx of the loop at x = 1.3 (bytes)");
    println!("{:>8}  {:>12}  {:>12}  {:>16}", "n", "rev-grad", "*j (VLAD)", "*j through call");
    for n in [1_000, 10_000, 100_000] {
        let a = thunk(&mut s, &format!("(rev-grad rloop 0 0.0 1.3 {n})"));
        let b = thunk(&mut s, &format!("(star-j-grad 1.3 {n})"));
        let c = thunk(&mut s, &format!("(star-j-through-call 1.3 {n})"));
        let (pa, pb, pc) = (peak_bytes(&mut s, &a), peak_bytes(&mut s, &b), peak_bytes(&mut s, &c));
        println!("{:>8}  {:>12}  {:>12}  {:>16}", n, pa, pb, pc);
    }
    let g1 = s.run_text("g", "(cadr (rev-grad rloop 0 0.0 1.3 10000))").unwrap();
    let g2 = s.run_text("g", "(star-j-grad 1.3 10000)").unwrap();
    println!(
        "gradients agree: rev-grad {} *j {}\n",
        vlad::print::to_string(&g1[0]),
        vlad::print::to_string(&g2[0])
    );
}

fn forward_vs_backward(c: &mut Criterion) {
    let mut s = session();
    let fwd = thunk(&mut s, "(call simulate X0 Y0 alpha eps 0 20)");
    let bwd = thunk(&mut s, "(uncall simulate (car S20) (cadr S20) alpha eps 20 20)");
    let inv = thunk(&mut s, "(call (rev-inverse simulate) (car S20) (cadr S20) alpha eps 20 20)");
    let mut g = c.benchmark_group("schrodinger 128 cells x 20 steps");
    g.bench_function("call (forward)", |b| b.iter(|| black_box(s.run_thunk(&fwd).unwrap())));
    g.bench_function("uncall (backward)", |b| b.iter(|| black_box(s.run_thunk(&bwd).unwrap())));
    g.bench_function("call of rev-inverse (backward)", |b| b.iter(|| black_box(s.run_thunk(&inv).unwrap())));
    g.finish();
}

fn gradients(c: &mut Criterion) {
    let mut s = session();
    let mut g = c.benchmark_group("gradient of a loop");
    for n in [1_000u32, 10_000] {
        let a = thunk(&mut s, &format!("(rev-grad rloop 0 0.0 1.3 {n})"));
        let b = thunk(&mut s, &format!("(star-j-grad 1.3 {n})"));
        let d = thunk(&mut s, &format!("(star-j-through-call 1.3 {n})"));
        let f = thunk(&mut s, &format!("((derivative-F (lambda (x) (car (call rloop 0.0 x {n})))) 1.3)"));
        let p = thunk(&mut s, &format!("(call rloop 0.0 1.3 {n})"));
        let v = thunk(&mut s, &format!("(vloop 1.3 {n})"));
        g.bench_with_input(BenchmarkId::new("primal: call rloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&p).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("primal: vloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&v).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("rev-grad rloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&a).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("*j vloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&b).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("*j through call rloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&d).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("derivative-F through call rloop", n), &n, |bch, _| {
            bch.iter(|| black_box(s.run_thunk(&f).unwrap()))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = forward_vs_backward, gradients
}

fn main() {
    // Dropping the closure chain of a 100000-step *j needs a large stack, as in the CLI.
    vlad::cli::run_on_big_stack(|| {
        memory_report();
        0
    });
    benches();
    Criterion::default().configure_from_args().final_summary();
}
