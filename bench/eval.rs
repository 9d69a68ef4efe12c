//! Criterion benchmarks of the evaluator core. Each benchmark defines its
//! procedures once, compiles the call expression once, and times only running it.
//! `cargo bench` measures; `cargo bench -- --test` runs each once as a smoke test.

// The program's own allocator (src/alloc.rs: mimalloc with a cache of small blocks),
// so that these time what `vlad` runs.
#[global_allocator]
static ALLOC: vlad::alloc::MiMalloc = vlad::alloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::rc::Rc;
use vlad::anf::Group;
use vlad::toplevel::Session;
use vlad::value::Value;

#[path = "common.rs"]
mod common;
use common::{prepare, run};

/// A session with `defs` loaded and `call` compiled to a thunk.
fn setup(defs: &str, call: &str) -> (Session, Rc<Group>) {
    prepare(Session::new(), defs, call)
}

fn shown(v: &Value) -> String {
    vlad::print::to_string(v)
}

/// [`setup`] with compiled code off (`--no-jit`): the evaluator alone.
fn setup_evaluator(defs: &str, call: &str) -> (Session, Rc<Group>) {
    let mut s = Session::new();
    s.m.jit_after = 0;
    prepare(s, defs, call)
}

fn fib(c: &mut Criterion) {
    let defs = "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))";
    // (numeric: compiled to machine code after its first 30,000 calls, `src/jit`)
    let (mut s, t) = setup(defs, "(fib 25)");
    // F(25) = 75025
    assert_eq!(shown(&run(&mut s, &t)), "75025");
    c.bench_function("fib 25", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator(defs, "(fib 25)");
    assert_eq!(shown(&run(&mut s, &t)), "75025");
    c.bench_function("fib 25, evaluator", |b| b.iter(|| black_box(run(&mut s, &t))));
    // A short run in a fresh session, as a script or a REPL line runs it: fib
    // is entered 21891 times, fewer than the default `--jit-after`, so it
    // stays in the evaluator rather than paying a compile that would take
    // longer than the run (F(20) = 6765). A threshold too low shows here as
    // a jump to the compile's ~0.5-2 ms.
    c.bench_function("fib 20 in a fresh session", |b| {
        b.iter_batched(
            || setup(defs, "(fib 20)"),
            |(mut s, t)| {
                let v = run(&mut s, &t);
                assert_eq!(shown(&v), "6765");
                (s, v)
            },
            criterion::BatchSize::SmallInput,
        )
    });
}

fn tail_loop(c: &mut Criterion) {
    let (mut s, t) =
        setup("(define (count n acc) (if (= n 0) acc (count (- n 1) (+ acc 1))))", "(count 1000000 0)");
    assert_eq!(shown(&run(&mut s, &t)), "1000000");
    c.bench_function("tail loop 10^6", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator(
        "(define (count n acc) (if (= n 0) acc (count (- n 1) (+ acc 1))))",
        "(count 1000000 0)",
    );
    assert_eq!(shown(&run(&mut s, &t)), "1000000");
    c.bench_function("tail loop 10^6, evaluator", |b| b.iter(|| black_box(run(&mut s, &t))));
    // An `if` whose value is bound: the sum of min(n, 500) for n = 1 ... 1000
    // is 499 * 500 / 2 + 501 * 500 = 375250.
    let (mut s, t) = setup(
        "(define (clamped n acc) (if (= n 0) acc (let ((y (if (< n 500) n 500))) (clamped (- n 1) (+ acc y)))))",
        "(clamped 1000 0)",
    );
    assert_eq!(shown(&run(&mut s, &t)), "375250");
    c.bench_function("bound if in a tail loop 10^3", |b| b.iter(|| black_box(run(&mut s, &t))));
}

fn named_let(c: &mut Criterion) {
    // A named `let` (run as a loop in its procedure's frame) walking a list:
    // the dot product of (1 ... n) with itself is n(n+1)(2n+1)/6.
    let dot = "(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
               (define xs (let loop ((i 1000) (acc '())) (if (= i 0) acc (loop (- i 1) (cons i acc)))))";
    let (mut s, t) = setup(dot, "(dot xs xs)");
    assert_eq!(shown(&run(&mut s, &t)), "333833500");
    // (its loop is compiled on its own after 30,000 iterations, `jit::run_loop`)
    c.bench_function("named let over a list of 10^3", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator(dot, "(dot xs xs)");
    assert_eq!(shown(&run(&mut s, &t)), "333833500");
    c.bench_function("named let over a list of 10^3, evaluator", |b| b.iter(|| black_box(run(&mut s, &t))));
    // One whose value is used and whose initial value is computed (a loop run
    // as an inner block): twice the sum of 1 ... n, n(n+1).
    let (mut s, t) = setup(
        "(define (twice-sum xs) (* 2 (let loop ((xs (cdr xs)) (s (car xs))) (if (null? xs) s (loop (cdr xs) (+ s (car xs)))))))
         (define xs (let loop ((i 1000) (acc '())) (if (= i 0) acc (loop (- i 1) (cons i acc)))))",
        "(twice-sum xs)",
    );
    assert_eq!(shown(&run(&mut s, &t)), "1001000");
    c.bench_function("named let whose value is used, over 10^3", |b| b.iter(|| black_box(run(&mut s, &t))));
    // A small procedure holding a loop (`magnitude`, `dot` in place in it),
    // run in place in a loop that builds a list (so is not compiled itself):
    // once compiled, each call runs whole in its compiled code
    // (`Machine::run_inline_compiled`). |(3, 4)| = 5, 10^3 times.
    let mags = "(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
                (define (magnitude v) (sqrt (dot v v)))
                (define u (list 3.0 4.0))
                (define (mags k acc) (if (= k 0) acc (mags (- k 1) (cons (magnitude u) acc))))";
    let (mut s, t) = setup(mags, "(car (mags 1000 '()))");
    for _ in 0..40 {
        run(&mut s, &t);
    }
    assert_eq!(shown(&run(&mut s, &t)), "5.0");
    c.bench_function("magnitude run in place 10^3", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator(mags, "(car (mags 1000 '()))");
    assert_eq!(shown(&run(&mut s, &t)), "5.0");
    c.bench_function("magnitude run in place 10^3, evaluator", |b| b.iter(|| black_box(run(&mut s, &t))));
    // A numeric named `let` at the top level, in no procedure: compiled on
    // its own after 30,000 iterations, the rest in machine code (`jit::run_loop`);
    // the sum of 0 ... n-1 is n(n-1)/2.
    let top = "(let loop ((i 0) (acc 0)) (if (= i 1000000) acc (loop (+ i 1) (+ acc i))))";
    let (mut s, t) = setup("", top);
    assert_eq!(shown(&run(&mut s, &t)), "499999500000");
    c.bench_function("numeric named let 10^6 at the top level", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator("", top);
    assert_eq!(shown(&run(&mut s, &t)), "499999500000");
    c.bench_function("numeric named let 10^6 at the top level, evaluator", |b| {
        b.iter(|| black_box(run(&mut s, &t)))
    });
}

fn closures(c: &mut Criterion) {
    // Each iteration makes a closure capturing n and calls it: sum of 1..n = n(n+1)/2.
    let (mut s, t) = setup(
        "(define (closures n acc)
           (if (= n 0) acc (let ((f (lambda (x) (+ x n)))) (closures (- n 1) (+ acc (f 0))))))",
        "(closures 100000 0)",
    );
    assert_eq!(shown(&run(&mut s, &t)), "5000050000");
    c.bench_function("closure creation 10^5", |b| b.iter(|| black_box(run(&mut s, &t))));
    // A loop calling the closure its procedure was passed, which calls a
    // let-bound lambda and reads the value it captured (the saddle's objective
    // in small): once the loop is compiled, the closures' bodies run in place
    // of the calls (`jit::spec_ok`). x -> -(x c) with c = -1: the sum 0 + 1 + ...
    // of x = 1 each step, 10^5 steps.
    let calls = "(define (make c) (let* ((f (lambda (u v) (* u v))) (h (lambda (y) (f y c)))) (lambda (x) (- 0.0 (h x)))))
                 (define (iterate f n) (let loop ((i 0) (acc 0.0)) (if (= i n) acc (loop (+ i 1) (+ acc (f 1.0))))))";
    let call = "(iterate (make -1.0) 100000)";
    let (mut s, t) = setup(calls, call);
    assert_eq!(shown(&run(&mut s, &t)), "100000.0");
    c.bench_function("loop calling a closure 10^5", |b| b.iter(|| black_box(run(&mut s, &t))));
    let (mut s, t) = setup_evaluator(calls, call);
    assert_eq!(shown(&run(&mut s, &t)), "100000.0");
    c.bench_function("loop calling a closure 10^5, evaluator", |b| b.iter(|| black_box(run(&mut s, &t))));
}

fn real_arithmetic(c: &mut Criterion) {
    // Inline double arithmetic in a tail loop: sum of i/2 for i = 1..n is n(n+1)/4.
    let (mut s, t) = setup(
        "(define (sum-halves n acc) (if (= n 0) acc (sum-halves (- n 1) (+ acc (* 0.5 (real n))))))",
        "(sum-halves 100000 0.0)",
    );
    assert_eq!(shown(&run(&mut s, &t)), "2500025000.0");
    c.bench_function("real arithmetic 10^5", |b| b.iter(|| black_box(run(&mut s, &t))));
}

fn deep_recursion(c: &mut Criterion) {
    // Non-tail calls 10^5 deep: the native stack and the call path, not tail calls.
    let (mut s, t) = setup("(define (deep n) (if (= n 0) 0 (+ 1 (deep (- n 1)))))", "(deep 100000)");
    assert_eq!(shown(&run(&mut s, &t)), "100000");
    c.bench_function("non-tail recursion 10^5 deep", |b| b.iter(|| black_box(run(&mut s, &t))));
    // 10^6 deep in compiled code: past the first chunk of native stack, on
    // new segments (`jit::deeper`)
    let (mut s, t) = setup("(define (deep n) (if (= n 0) 0 (+ 1 (deep (- n 1)))))", "(deep 1000000)");
    assert_eq!(shown(&run(&mut s, &t)), "1000000");
    c.bench_function("non-tail recursion 10^6 deep", |b| b.iter(|| black_box(run(&mut s, &t))));
}

fn big_integers(c: &mut Criterion) {
    let (mut s, t) =
        setup("(define (fact n acc) (if (= n 0) acc (fact (- n 1) (* acc n))))", "(fact 1000 1)");
    // 1000! has 2568 decimal digits and ends in 249 zeros
    let text = shown(&run(&mut s, &t));
    assert_eq!(text.len(), 2568);
    assert!(text.ends_with(&"0".repeat(249)) && !text.ends_with(&"0".repeat(250)));
    c.bench_function("big integers: 1000!", |b| b.iter(|| black_box(run(&mut s, &t))));

    let (mut s, t) =
        setup("(define (fibl n a b) (if (= n 0) a (fibl (- n 1) b (+ a b))))", "(fibl 10000 0 1)");
    // F(10000) has 2090 decimal digits
    assert_eq!(shown(&run(&mut s, &t)).len(), 2090);
    c.bench_function("big integers: fib 10000 by addition", |b| b.iter(|| black_box(run(&mut s, &t))));
}

criterion_group!(benches, fib, tail_loop, named_let, closures, real_arithmetic, deep_recursion, big_integers);
criterion_main!(benches);
