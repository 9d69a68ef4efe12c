//! Packed vectors (VECTORS.md): every vector primitive's derivatives against
//! central finite differences and against the same computation written on lists,
//! in every nesting of forward and reverse mode (gradients, Jacobian-vector
//! products, Hessian-vector products FF/FR/RF/RR); symbolic zeros; printing;
//! errors; and the CPU/GPU agreement and device-residency checks, which print
//! "skipped: no CUDA device" where there is none.

use std::rc::Rc;
use vlad::toplevel::Session;
use vlad::value::Value;
use vlad::vec::{Backend, RealVec};

/// List versions of the vector primitives, written with the prelude's list functions.
const LIST_LIB: &str = r#"
(define (l+ a b) (map2 + a b))
(define (l- a b) (map2 - a b))
(define (l* a b) (map2 * a b))
(define (l/ a b) (map2 / a b))
(define (lscale s a) (map (lambda (x) (* s x)) a))
(define (lshift s a) (map (lambda (x) (+ s x)) a))
(define (lneg a) (map (lambda (x) (- 0 x)) a))
(define (lsum a) (reduce + 0 a))
(define (ldot a b) (lsum (l* a b)))
(define (lmax a) (fold-left (lambda (m x) (if (> x m) x m)) (car a) (cdr a)))
(define (lprefix a)
  (let loop ((a a) (s 0)) (if (null? a) '() (let ((s2 (+ s (car a)))) (cons s2 (loop (cdr a) s2))))))
(define (lsuffix a) (reverse (lprefix (reverse a))))
(define (ltanh a) (map (lambda (x) (let ((e (exp (* 2 x)))) (/ (- e 1) (+ e 1)))) a))
(define (lrelu a) (map (lambda (x) (if (> x 0) x 0)) a))
(define (take l n) (if (= n 0) '() (cons (car l) (take (cdr l) (- n 1)))))
(define (drop l n) (if (= n 0) l (drop (cdr l) (- n 1))))
(define (lrows l c) (if (null? l) '() (cons (take l c) (lrows (drop l c) c))))
(define (lflat m) (reduce append '() m))
(define (lmatvec a x) (map (lambda (row) (ldot row x)) a))
(define (ltranspose a) (if (null? (car a)) '() (cons (map car a) (ltranspose (map cdr a)))))
(define (lvecmat x a) (lmatvec (ltranspose a) x))
(define (lmatmat a b) (let ((bt (ltranspose b))) (map (lambda (row) (map (lambda (col) (ldot row col)) bt)) a)))
(define (louter u v) (map (lambda (ui) (lscale ui v)) u))
(define (lonehot n i x) (map (lambda (k) (if (= k i) x 0)) (iota n)))
(define (vscalar y) (if (real? y) (sin y) (vec-sum (vec-sin y))))
(define (lscalar y) (if (real? y) (sin y) (lsum (map sin y))))
"#;

struct Case {
    name: &'static str,
    /// A vector-valued, matrix-valued or real-valued expression of the vector `x`.
    vec: &'static str,
    /// The same on the list `x`: a list (matrices flattened row by row) or a real.
    list: &'static str,
    x: &'static [f64],
}

const X6: &[f64] = &[0.3, -0.7, 1.1, 0.45, -0.2, 0.8];
const X4: &[f64] = &[0.3, -0.7, 1.1, 0.45];

fn cases() -> Vec<Case> {
    vec![
        Case { name: "vec+", vec: "(vec+ x (vec-exp (vec-scale 0.5 x)))", list: "(l+ x (map exp (lscale 0.5 x)))", x: X4 },
        Case { name: "vec-", vec: "(vec- (vec-exp (vec-scale 0.5 x)) x)", list: "(l- (map exp (lscale 0.5 x)) x)", x: X4 },
        Case { name: "vec*", vec: "(vec* x (vec-cos x))", list: "(l* x (map cos x))", x: X4 },
        Case { name: "vec/", vec: "(vec/ x (vec-shift 2 (vec* x x)))", list: "(l/ x (lshift 2 (l* x x)))", x: X4 },
        Case { name: "vec-neg", vec: "(vec-neg (vec* x x))", list: "(lneg (l* x x))", x: X4 },
        Case { name: "vec-scale", vec: "(vec-scale (vec-ref x 0) (vec* x x))", list: "(lscale (car x) (l* x x))", x: X4 },
        Case { name: "vec-shift", vec: "(vec-shift (vec-sum x) (vec* x x))", list: "(lshift (lsum x) (l* x x))", x: X4 },
        Case { name: "vec-exp", vec: "(vec-exp (vec* x x))", list: "(map exp (l* x x))", x: X4 },
        Case { name: "vec-log", vec: "(vec-log (vec-shift 3 (vec* x x)))", list: "(map log (lshift 3 (l* x x)))", x: X4 },
        Case { name: "vec-sin", vec: "(vec-sin (vec* x x))", list: "(map sin (l* x x))", x: X4 },
        Case { name: "vec-cos", vec: "(vec-cos (vec* x x))", list: "(map cos (l* x x))", x: X4 },
        Case { name: "vec-sqrt", vec: "(vec-sqrt (vec-shift 3 (vec* x x)))", list: "(map sqrt (lshift 3 (l* x x)))", x: X4 },
        Case { name: "vec-tanh", vec: "(vec-tanh (vec* x x))", list: "(ltanh (l* x x))", x: X4 },
        Case { name: "vec-max0", vec: "(vec-max0 (vec* x (vec-exp x)))", list: "(lrelu (l* x (map exp x)))", x: X4 },
        Case { name: "vec-sum", vec: "(vec-sum (vec* x (vec-exp x)))", list: "(lsum (l* x (map exp x)))", x: X4 },
        Case { name: "vec-dot", vec: "(vec-dot x (vec-exp x))", list: "(ldot x (map exp x))", x: X4 },
        Case { name: "vec-max", vec: "(vec-max (vec* x (vec-shift 1 x)))", list: "(lmax (l* x (lshift 1 x)))", x: X4 },
        Case { name: "vec-prefix-sum", vec: "(vec-prefix-sum (vec* x x))", list: "(lprefix (l* x x))", x: X4 },
        Case { name: "vec-suffix-sum", vec: "(vec-suffix-sum (vec* x x))", list: "(lsuffix (l* x x))", x: X4 },
        Case { name: "vec-ref", vec: "(* (vec-ref x 1) (vec-ref x 2))", list: "(* (list-ref x 1) (list-ref x 2))", x: X4 },
        Case {
            name: "vec-one-hot",
            vec: "(vec+ (vec-one-hot x 1 (vec-dot x x)) x)",
            list: "(l+ (lonehot 4 1 (ldot x x)) x)",
            x: X4,
        },
        Case { name: "make-vec", vec: "(vec* x (make-vec 4 (vec-sum x)))", list: "(lscale (lsum x) x)", x: X4 },
        Case { name: "vec-fill", vec: "(vec* x (vec-fill x (vec-dot x x)))", list: "(lscale (ldot x x) x)", x: X4 },
        Case {
            name: "vector-of/list-of",
            vec: "(vector-of (map (lambda (t) (* t (* t t))) (list-of x)))",
            list: "(map (lambda (t) (* t (* t t))) x)",
            x: X4,
        },
        Case {
            name: "vector-of rows",
            vec: "(vec-flatten (vector-of (list (list (vec-ref x 0) (vec-ref x 1)) (list (* (vec-ref x 2) (vec-ref x 3)) 1))))",
            list: "(list (list-ref x 0) (list-ref x 1) (* (list-ref x 2) (list-ref x 3)) 1)",
            x: X4,
        },
        Case {
            name: "list-of matrix",
            vec: "(vector-of (map (lambda (row) (ldot row row)) (list-of (vec-reshape (vec-sin x) 3 2))))",
            list: "(map (lambda (row) (ldot row row)) (lrows (map sin x) 2))",
            x: X6,
        },
        Case {
            name: "mat-vec",
            vec: "(mat-vec (vec-reshape (vec-sin x) 2 3) (vector-of (list (vec-ref x 0) (vec-ref x 1) (vec-ref x 2))))",
            list: "(lmatvec (lrows (map sin x) 3) (take x 3))",
            x: X6,
        },
        Case {
            name: "vec-mat",
            vec: "(vec-mat (vector-of (list (vec-ref x 0) (vec-ref x 1))) (vec-reshape (vec-sin x) 2 3))",
            list: "(lvecmat (take x 2) (lrows (map sin x) 3))",
            x: X6,
        },
        Case {
            name: "mat-mat",
            vec: "(mat-mat (vec-reshape (vec-sin x) 2 3) (vec-reshape (vec* x x) 3 2))",
            list: "(lflat (lmatmat (lrows (map sin x) 3) (lrows (l* x x) 2)))",
            x: X6,
        },
        Case {
            name: "transpose",
            vec: "(vec* (vec-flatten (transpose (vec-reshape x 2 3))) (vec-exp x))",
            list: "(l* (lflat (ltranspose (lrows x 3))) (map exp x))",
            x: X6,
        },
        Case {
            name: "vec-outer",
            vec: "(vec-outer (vec-sin x) (vec* x x))",
            list: "(lflat (louter (map sin x) (l* x x)))",
            x: X4,
        },
        Case {
            name: "vec-shape-like",
            vec: "(vec+ (vec-shape-like (vec* x x) (vec-reshape x 2 3)) (vec-reshape (vec-cos x) 2 3))",
            list: "(l+ (l* x x) (map cos x))",
            x: X6,
        },
    ]
}

fn session(backend: Backend) -> Session {
    let mut s = Session::new();
    s.m.out = Box::new(std::io::sink());
    s.m.backend = backend;
    s.run_text("lib", LIST_LIB).expect("list library");
    s
}

fn eval(s: &mut Session, text: &str) -> Value {
    match s.run_text("test", text) {
        Ok(mut v) => v.pop().expect("a value"),
        Err(e) => panic!("{}\n  in: {}", e.render(&s.sources), text),
    }
}

/// The numbers of a real, a vector, or a (nested) list, flattened.
fn nums(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fn go(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Pair(p) => {
                go(&p.car, out);
                go(&p.cdr, out);
            }
            Value::Nil => {}
            Value::Vector(x) => out.extend_from_slice(x.host()),
            Value::Lazy(_) => go(&vlad::ad::ops::hnf_detached(v).expect("forcing a lazy value"), out),
            other => out.push(
                other.as_f64().unwrap_or_else(|| panic!("not a number: {}", vlad::print::to_string(other))),
            ),
        }
    }
    go(v, &mut out);
    out
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())))
}

fn assert_close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert!(close(a, b, tol), "{}: {:?} vs {:?}", what, a, b);
}

fn vlist(x: &[f64]) -> String {
    let parts: Vec<String> = x.iter().map(|v| format!("{:?}", v)).collect();
    format!("(list {})", parts.join(" "))
}

fn vvec(x: &[f64]) -> String {
    format!("(vector-of {})", vlist(x))
}

/// A direction for Hessian-vector products.
fn dir(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 - 0.3 * i as f64 + 0.1 * (i * i) as f64).collect()
}

/// Checks one case: values, gradients (reverse, forward, lists, finite differences)
/// and Hessian-vector products (four nestings, lists, finite differences of the gradient).
fn check_case(s: &mut Session, c: &Case) {
    let n = c.x.len();
    let f = format!("(lambda (x) (vscalar {}))", c.vec);
    let fl = format!("(lambda (x) (lscalar {}))", c.list);
    let x = vvec(c.x);
    let xl = vlist(c.x);
    let u = dir(n);
    let (uv, ul) = (vvec(&u), vlist(&u));
    let name = c.name;

    // The primal agrees with the list version.
    let fx = nums(&eval(s, &format!("({} {})", f, x)));
    let fxl = nums(&eval(s, &format!("({} {})", fl, xl)));
    assert_close(&format!("{name}: value vs list"), &fx, &fxl, 1e-12);
    // Also the unscalarised results.
    let yval = eval(s, &format!("((lambda (x) {}) {})", c.vec, x));
    let scalar = yval.as_f64().is_some();
    let yv = nums(&yval);
    let yl = nums(&eval(s, &format!("((lambda (x) {}) {})", c.list, xl)));
    assert_close(&format!("{name}: vector result vs list result"), &yv, &yl, 1e-12);

    // Gradients.
    let g_r = nums(&eval(s, &format!("((gradient-R {}) {})", f, x)));
    let g_l = nums(&eval(s, &format!("((gradient-R {}) {})", fl, xl)));
    let g_f: Vec<f64> = (0..n)
        .map(|i| {
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            nums(&eval(s, &format!("(jvp {} {} {})", f, x, vvec(&e))))[0]
        })
        .collect();
    let h = 1e-6;
    let g_fd: Vec<f64> = (0..n)
        .map(|i| {
            let (mut a, mut b) = (c.x.to_vec(), c.x.to_vec());
            a[i] += h;
            b[i] -= h;
            let fa = nums(&eval(s, &format!("({} {})", f, vvec(&a))))[0];
            let fb = nums(&eval(s, &format!("({} {})", f, vvec(&b))))[0];
            (fa - fb) / (2.0 * h)
        })
        .collect();
    assert_eq!(g_r.len(), n, "{name}: gradient length");
    assert_close(&format!("{name}: reverse gradient vs list gradient"), &g_r, &g_l, 1e-10);
    assert_close(&format!("{name}: reverse gradient vs forward"), &g_r, &g_f, 1e-10);
    assert_close(&format!("{name}: reverse gradient vs finite differences"), &g_r, &g_fd, 1e-6);

    // Jacobian-vector product of the vector-valued map, against the list version.
    let jv = nums(&eval(s, &format!("(jvp (lambda (x) {}) {} {})", c.vec, x, uv)));
    let jl = nums(&eval(s, &format!("(jvp (lambda (x) {}) {} {})", c.list, xl, ul)));
    assert_close(&format!("{name}: jvp vs list jvp"), &jv, &jl, 1e-10);
    // Vector-Jacobian product of the vector-valued map, against the list version.
    let m = yv.len();
    let w = dir(m + 1)[1..].to_vec();
    let ybar = if scalar {
        "0.7".to_string()
    } else {
        // Shape the cotangent like the result (a matrix result gets a matrix).
        format!("(vec-shape-like {} ((lambda (x) {}) {}))", vvec(&w), c.vec, x)
    };
    let ybar_l = if scalar { "0.7".to_string() } else { vlist(&w) };
    let vj = nums(&eval(s, &format!("(vjp (lambda (x) {}) {} {})", c.vec, x, ybar)));
    let vl = nums(&eval(s, &format!("(vjp (lambda (x) {}) {} {})", c.list, xl, ybar_l)));
    assert_close(&format!("{name}: vjp vs list vjp"), &vj, &vl, 1e-10);

    // Hessian-vector products in the four nestings.
    let hv_fr = nums(&eval(s, &format!("(jvp (gradient-R {}) {} {})", f, x, uv)));
    let hv_rr =
        nums(&eval(s, &format!("(vjp (lambda (x) (vec-dot ((gradient-R {}) x) {})) {} 1)", f, uv, x)));
    let hv_rf = nums(&eval(s, &format!("((gradient-R (lambda (x) (jvp {} x {}))) {})", f, uv, x)));
    let hv_ff: Vec<f64> = (0..n)
        .map(|i| {
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            nums(&eval(s, &format!("(jvp (lambda (x) (jvp {} x {})) {} {})", f, uv, x, vvec(&e))))[0]
        })
        .collect();
    let hv_l = nums(&eval(s, &format!("(jvp (gradient-R {}) {} {})", fl, xl, ul)));
    let hg = 1e-5;
    let xp: Vec<f64> = c.x.iter().zip(&u).map(|(a, b)| a + hg * b).collect();
    let xm: Vec<f64> = c.x.iter().zip(&u).map(|(a, b)| a - hg * b).collect();
    let gp = nums(&eval(s, &format!("((gradient-R {}) {})", f, vvec(&xp))));
    let gm = nums(&eval(s, &format!("((gradient-R {}) {})", f, vvec(&xm))));
    let hv_fd: Vec<f64> = gp.iter().zip(&gm).map(|(a, b)| (a - b) / (2.0 * hg)).collect();
    assert_close(&format!("{name}: HVP forward-over-reverse vs list"), &hv_fr, &hv_l, 1e-9);
    assert_close(&format!("{name}: HVP reverse-over-reverse"), &hv_rr, &hv_fr, 1e-9);
    assert_close(&format!("{name}: HVP reverse-over-forward"), &hv_rf, &hv_fr, 1e-9);
    assert_close(&format!("{name}: HVP forward-over-forward"), &hv_ff, &hv_fr, 1e-9);
    assert_close(&format!("{name}: HVP vs finite differences of the gradient"), &hv_fr, &hv_fd, 1e-5);
}

fn run_cases(backend: Backend) -> usize {
    // Deep AD nesting on a big stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut s = session(backend);
            let cs = cases();
            for c in &cs {
                check_case(&mut s, c);
            }
            cs.len()
        })
        .unwrap()
        .join()
        .expect("a case failed")
}

#[test]
fn derivatives_of_every_primitive_agree_with_lists_and_finite_differences_cpu() {
    let n = run_cases(Backend::Cpu);
    assert!(n >= 30);
}

/// Prints a line that the test harness does not capture (so it shows in `cargo test`).
fn visible(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{}", line);
}

fn cuda_or_skip(test: &str) -> bool {
    if vlad::vec::cuda_available() {
        true
    } else {
        visible(&format!("{}: skipped: no CUDA device ({})", test, vlad::vec::cuda_unavailable_reason()));
        false
    }
}

#[test]
fn derivatives_of_every_primitive_on_the_gpu() {
    if !cuda_or_skip("derivatives_of_every_primitive_on_the_gpu") {
        return;
    }
    run_cases(Backend::Cuda);
}

/// The acceptance file of the spec, from the shared folder beside the repository.
#[test]
fn acceptance_file_passes_on_every_backend() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        root.join("../shared/acceptance/vectors.vlad"),
        root.join("../../shared/acceptance/vectors.vlad"),
        root.join("tests/vlad/vectors.vlad"),
    ];
    assert!(candidates[2].exists());
    let mut backends = vec![Backend::Cpu, Backend::Auto];
    if cuda_or_skip("acceptance_file_passes_on_every_backend (cuda)") {
        backends.push(Backend::Cuda);
    }
    for path in candidates.iter().filter(|p| p.exists()) {
        for &b in &backends {
            let p = path.clone();
            let r = std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || {
                    let mk = move || {
                        let mut s = Session::new();
                        s.m.out = Box::new(std::io::sink());
                        s.m.backend = b;
                        s
                    };
                    let mut report = vlad::check::Report::default();
                    vlad::check::check_file(&mk, &p, &mut report);
                    report
                })
                .unwrap()
                .join()
                .unwrap();
            assert!(r.failed == 0 && r.passed > 0, "{} on {:?}: {:?}", path.display(), b, r.failures);
        }
    }
}

fn run1(text: &str) -> String {
    let text = text.to_string();
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let mut s = session(Backend::Cpu);
            match s.run_text("t", &text) {
                Ok(v) => vlad::print::to_string(v.last().unwrap()),
                Err(e) => format!("error: {}", e.message),
            }
        })
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn vectors_print_readably() {
    assert_eq!(run1("(vector-of '(1 2.5 -3))"), "(vector 1.0 2.5 -3.0)");
    assert_eq!(run1("(vector-of '())"), "(vector)");
    assert_eq!(run1("(vector-of '((1 2) (3 4) (5 6)))"), "(matrix (1.0 2.0) (3.0 4.0) (5.0 6.0))");
    assert_eq!(run1("(*j (vector-of '(1)))"), "(reverse (vector 1.0))");
    assert_eq!(run1("(make-vec 3 0)"), "(vector 0.0 0.0 0.0)");
    assert_eq!(run1("(list (vec-length (make-vec 7 1)) (vector? (make-vec 1 1)) (vector? 1))"), "(7 #t #f)");
    assert_eq!(run1("(let ((m (vector-of '((1 2 3) (4 5 6))))) (list (mat-rows m) (mat-cols m)))"), "(2 3)");
}

#[test]
fn primitives_compute_the_right_numbers() {
    let cases = [
        ("(vec-dot (vector-of '(1 2 3)) (vector-of '(4 5 6)))", "32.0"),
        ("(list-of (vec-prefix-sum (vector-of '(1 2 3 4))))", "(1.0 3.0 6.0 10.0)"),
        ("(list-of (vec-suffix-sum (vector-of '(1 2 3 4))))", "(10.0 9.0 7.0 4.0)"),
        ("(vec-max (vector-of '(1 7 3)))", "7.0"),
        ("(vec-argmax (vector-of '(1 7 3 7)))", "1"),
        ("(list-of (vec-iota 4))", "(0.0 1.0 2.0 3.0)"),
        ("(list-of (vec-max0 (vector-of '(-1 0 2))))", "(0.0 0.0 2.0)"),
        ("(list-of (vec-scale 2 (vector-of '(1 2))))", "(2.0 4.0)"),
        ("(list-of (vec-shift 2 (vector-of '(1 2))))", "(3.0 4.0)"),
        ("(list-of (vec/ (vector-of '(1 2)) (vector-of '(4 8))))", "(0.25 0.25)"),
        ("(list-of (mat-vec (vector-of '((1 2) (3 4))) (vector-of '(1 10))))", "(21.0 43.0)"),
        ("(list-of (vec-mat (vector-of '(1 10)) (vector-of '((1 2) (3 4)))))", "(31.0 42.0)"),
        (
            "(list-of (mat-mat (vector-of '((1 2) (3 4))) (vector-of '((5 6) (7 8)))))",
            "((19.0 22.0) (43.0 50.0))",
        ),
        ("(list-of (transpose (vector-of '((1 2 3) (4 5 6)))))", "((1.0 4.0) (2.0 5.0) (3.0 6.0))"),
        ("(list-of (vec-outer (vector-of '(1 2)) (vector-of '(3 4 5))))", "((3.0 4.0 5.0) (6.0 8.0 10.0))"),
        ("(list-of (vec-reshape (vec-iota 6) 2 3))", "((0.0 1.0 2.0) (3.0 4.0 5.0))"),
        ("(list-of (vec-one-hot (make-vec 3 1) 2 5))", "(0.0 0.0 5.0)"),
        ("(vec-ref (vector-of '(4 5 6)) 2)", "6.0"),
        ("(vec-sum (make-vec 1000000 0.5))", "500000.0"),
        ("(plus (vector-of '(1 2)) (vector-of '(10 20)))", "(vector 11.0 22.0)"),
        ("(plus (zero (vector-of '(1 2))) (vector-of '(10 20)))", "(vector 10.0 20.0)"),
        ("(zero (vector-of '((1 2) (3 4))))", "(matrix (0.0 0.0) (0.0 0.0))"),
    ];
    for (text, want) in cases {
        assert_eq!(run1(text), want, "{}", text);
    }
}

#[test]
fn shape_and_argument_errors_are_clear() {
    let cases = [
        (
            "(vec+ (make-vec 3 1) (make-vec 2 1))",
            "vec+: shapes differ: a vector of length 3 and a vector of length 2",
        ),
        ("(vec-ref (make-vec 3 1) 3)", "vec-ref: index 3 out of range for a vector of length 3"),
        ("(vec-sum 5)", "vec-sum: expected a vector, got 5"),
        ("(mat-vec (make-vec 4 1) (make-vec 2 1))", "mat-vec: expected a matrix as first argument"),
        (
            "(mat-vec (vec-reshape (make-vec 6 1) 2 3) (make-vec 2 1))",
            "mat-vec: a 2x3 matrix times a vector of length 2",
        ),
        (
            "(vec-reshape (make-vec 5 1) 2 3)",
            "vec-reshape: cannot make a 2x3 matrix from a vector of length 5",
        ),
        ("(vector-of (list 1 #t))", "vector-of: expected a number"),
        ("(vector-of '((1 2) (3)))", "vector-of: rows of different lengths"),
        ("(vec-max (vector-of '()))", "vec-max: empty vector"),
        ("(make-vec -1 0)", "make-vec: expected a non-negative integer"),
        ("(make-vec 2.5 0)", "make-vec: expected a non-negative integer"),
        // (whole numbers from 0, but past any length or index: not "expected a
        // non-negative integer")
        ("(make-vec 100000000000000000000000 1)", "make-vec: 100000000000000000000000 is too large"),
        ("(vec-ref (vec-iota 3) 18446744073709551616)", "vec-ref: 18446744073709551616 is too large"),
        ("(vec-one-hot (vec-iota 3) 1e20 1)", "vec-one-hot: 1e20 is too large"),
    ];
    for (text, want) in cases {
        let got = run1(text);
        assert!(got.starts_with(&format!("error: {}", want)), "{}: got {}", text, got);
    }
}

/// A vector longer than the machine's memory could hold (8 PB here) is
/// refused at once, not allocated page by page until the process is killed.
/// (Linux, where the system reports its memory.)
#[cfg(target_os = "linux")]
#[test]
fn vectors_larger_than_memory_are_refused() {
    for (text, name) in [("(make-vec 1000000000000000 1.0)", "make-vec"), ("(vec-iota 1e15)", "vec-iota")] {
        let got = run1(text);
        let want = format!("error: {name}: a vector of 1000000000000000 numbers needs 8000000.0 GB, more than this machine's");
        assert!(got.starts_with(&want), "{}: got {}", text, got);
    }
    assert_eq!(run1("(vec-length (make-vec 1000 1.0))"), "1000");
    // Products whose result is far larger than their arguments: 3e6 x 3e6 numbers
    // (72 TB) is an error, not an aborted allocation; also in a gradient's forward phase.
    let big = "(define u (make-vec 3000000 1.0))";
    for (expr, name) in [
        ("(vec-outer u u)", "vec-outer"),
        ("(mat-mat (vec-reshape u 3000000 1) (vec-reshape u 1 3000000))", "mat-mat"),
        ("((gradient-R (lambda (x) (vec-sum (vec-outer x x)))) u)", "vec-outer"),
    ] {
        let got = run1(&format!("{big} {expr}"));
        let want = format!(
            "error: {name}: a result of 9000000000000 numbers needs 72000.0 GB, more than this machine's"
        );
        assert!(got.starts_with(&want), "{}: got {}", expr, got);
    }
    // An r x 0 (or 0 x c) matrix holds no numbers, whatever r: its product with
    // a vector has r (c), and its list r rows. These panicked ("capacity
    // overflow", exit 70) or were allocated until the process was killed.
    let rows = "(vec-reshape (vec-iota 0) 4611686018427387904 0)";
    let cols = "(vec-reshape (vec-iota 0) 0 4000000000000)";
    for (expr, want) in [
        (
            format!("(mat-vec {rows} (vec-iota 0))"),
            "error: mat-vec: a result of 4611686018427387904 numbers needs ",
        ),
        (
            format!("(vec-mat (vec-iota 0) {cols})"),
            "error: vec-mat: a result of 4000000000000 numbers needs 32000.0 GB",
        ),
        (
            format!("(length (list-of {rows}))"),
            "error: list-of: the 4611686018427387904 rows of a 4611686018427387904x0 matrix need ",
        ),
    ] {
        let got = run1(&expr);
        assert!(got.starts_with(want), "{}: got {}", expr, got);
    }
    assert_eq!(run1("(list-of (mat-vec (vec-reshape (vec-iota 0) 3 0) (vec-iota 0)))"), "(0.0 0.0 0.0)");
    assert_eq!(run1("(list-of (vec-reshape (vec-iota 0) 2 0))"), "(() ())");
}

#[test]
fn zeros_are_symbolic_until_touched() {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let mut s = session(Backend::Cpu);
            let is_sym_zero = |v: &Value| matches!(v, Value::Vector(x) if x.is_zero());
            // zero of a huge vector costs nothing, and neither does make-vec of 0.
            assert!(is_sym_zero(&eval(&mut s, "(zero (make-vec 100000000 1))")));
            assert!(is_sym_zero(&eval(&mut s, "(make-vec 100000000 0)")));
            // Operations that keep a zero a zero do no work.
            assert!(is_sym_zero(&eval(
                &mut s,
                "(vec* (make-vec 100000000 0) (zero (make-vec 100000000 1)))"
            )));
            assert!(is_sym_zero(&eval(&mut s, "(vec-scale 3 (vec-sin (make-vec 100000000 0)))")));
            assert!(is_sym_zero(&eval(&mut s, "(vec-prefix-sum (make-vec 100000000 0))")));
            // Adding a zero returns the other vector itself.
            let pair = eval(&mut s, "(let ((v (make-vec 10 1))) (cons v (plus v (zero v))))");
            match &pair {
                Value::Pair(p) => match (&p.car, &p.cdr) {
                    (Value::Vector(a), Value::Vector(b)) => assert!(Rc::ptr_eq(a, b)),
                    _ => panic!("expected two vectors"),
                },
                _ => panic!("expected a pair"),
            }
            // The forward tangent of a constant vector is a symbolic zero.
            let t = eval(&mut s, "(unperturb (tangent (j* (make-vec 100000000 2))))");
            assert!(is_sym_zero(&t));
            // A gradient that does not depend on x is a symbolic zero.
            let g = eval(&mut s, "((gradient-R (lambda (x) 3.0)) (make-vec 100000000 2))");
            assert!(is_sym_zero(&g));
            // Touching it materialises zeros.
            assert_eq!(nums(&eval(&mut s, "(vec-sum (vec-exp (make-vec 5 0)))")), vec![5.0]);
            // ... and it stays a zero: an operation that takes a zero as a zero
            // gives the same value after it was printed (its numbers made) as
            // before (a product by it is it, even where the other is infinite).
            let products = "(list (vec* z w) (vec-dot z w) (mat-vec (vec-reshape z 1 2) w))";
            let src = format!(
                "(define z (make-vec 2 0)) (define w (vector-of (list (/ 1. 0.) 1.))) \
                 (define before {products}) z (define after {products}) (list before after)"
            );
            let out = s.run_text("t", &src).map(|vs| vlad::print::to_string(vs.last().unwrap()));
            let want = "(((vector 0.0 0.0) 0.0 (vector 0.0)) ((vector 0.0 0.0) 0.0 (vector 0.0)))";
            assert_eq!(out.ok().as_deref(), Some(want));
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn perturbations_are_not_confused_with_vectors() {
    // d/dx (x * d/dy sum(x*y, x*y)) at x = 1 is 2x · 2 ... written on vectors of length 2:
    // inner d/dy vec-sum(vec-scale x (make-vec 2 y)) = 2x, outer d/dx (x * 2x) = 4x = 4.
    let f = "(lambda (x) (* x ((derivative-F (lambda (y) (vec-sum (vec-scale x (make-vec 2 y))))) 2)))";
    for outer in ["derivative-F", "derivative-R"] {
        for inner in ["derivative-F", "derivative-R"] {
            let text = format!("(({} {}) 1)", outer, f.replace("derivative-F", inner));
            assert_eq!(run1(&text), "4.0", "{}", text);
        }
    }
}

#[test]
fn gradients_of_long_vectors_cost_a_constant_number_of_primitive_calls() {
    // The reverse phase of a vector computation calls a handful of primitives,
    // whatever the length (the loops are inside the primitives).
    let count = |n: usize| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let mut s = session(Backend::Cpu);
                s.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
                eval(
                    &mut s,
                    &format!(
                        "((gradient-R (lambda (x) (vec-sum (vec-exp (vec* x x))))) (make-vec {} 0.5))",
                        n
                    ),
                );
                s.m.meter.unwrap().iter().sum::<u64>()
            })
            .unwrap()
            .join()
            .unwrap()
    };
    assert_eq!(count(10), count(100000));
}

#[test]
fn backend_flag_is_checked() {
    let exe = env!("CARGO_BIN_EXE_vlad");
    let dir = std::env::temp_dir().join(format!("vlad-vec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("v.vlad");
    std::fs::write(&f, "(vec-sum (vec-exp (make-vec 200000 0)))\n").unwrap();
    let run = |b: &str| std::process::Command::new(exe).args(["--backend", b]).arg(&f).output().unwrap();
    for b in ["auto", "cpu"] {
        let o = run(b);
        assert!(o.status.success(), "{}: {}", b, String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "200000.0\n");
    }
    let o = run("gpu");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend must be auto, cpu or cuda"));
    let o = run("cuda");
    if vlad::vec::cuda_available() {
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stdout), "200000.0\n");
    } else {
        visible("backend_flag_is_checked (cuda run): skipped: no CUDA device");
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("error: --backend cuda: no usable CUDA device"), "{}", err);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU and GPU agree to rounding on every primitive, and chains stay on the device.
#[test]
fn cpu_and_gpu_agree_and_chains_stay_on_the_device() {
    if !cuda_or_skip("cpu_and_gpu_agree_and_chains_stay_on_the_device") {
        return;
    }
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let n = 1 << 20;
            let prog = format!(
                "(define x (vec-scale 0.000001 (vec-iota {n})))
                 (define y (vec-cos x))
                 (define m (vec-reshape (vec-sin (vec-iota 65536)) 256 256))
                 (define v (vec-cos (vec-iota 256)))"
            );
            let exprs = [
                "(vec-sum (vec-exp x))",
                "(vec-dot x y)",
                "(vec-max (vec-sin (vec-scale 1000 x)))",
                "(vec-argmax (vec-sin (vec-scale 1000 x)))",
                "(vec-sum (vec-log (vec-shift 1 x)))",
                "(vec-sum (vec-sqrt x))",
                "(vec-sum (vec-tanh (vec-shift -0.5 x)))",
                "(vec-sum (vec-max0 (vec-shift -0.5 x)))",
                "(vec-sum (vec/ y (vec-shift 1 x)))",
                "(vec-sum (vec- y (vec* x x)))",
                "(vec-ref (vec-prefix-sum y) 1000)",
                "(vec-ref (vec-suffix-sum y) 1000)",
                "(vec-sum (mat-vec m v))",
                "(vec-sum (vec-mat v m))",
                "(vec-sum (vec* (mat-mat m m) m))",
                "(vec-ref (transpose (vec-reshape (vec-iota 6) 2 3)) 1)",
                "(vec-sum (vec* (transpose m) m))",
                "(vec-sum (vec-outer v v))",
                "(vec-sum ((gradient-R (lambda (x) (vec-sum (vec-exp x)))) x))",
                "(vec-sum (jvp (gradient-R (lambda (x) (vec-dot (vec-sin x) x))) x y))",
            ];
            let mut cpu = session(Backend::Cpu);
            let mut gpu = session(Backend::Cuda);
            for s in [&mut cpu, &mut gpu] {
                if let Err(e) = s.run_text("defs", &prog) {
                    panic!("{}", e.render(&s.sources));
                }
            }
            for e in exprs {
                let a = nums(&eval(&mut cpu, e));
                let b = nums(&eval(&mut gpu, e));
                assert_close(&format!("cpu vs gpu: {}", e), &a, &b, 1e-9);
            }
            // Residency: a chain on device-resident vectors copies no vector back.
            let before = vlad::vec::transfers();
            let r = eval(&mut gpu, "(vec-scale 2 (vec+ (vec-exp x) (vec* y y)))");
            let after = vlad::vec::transfers();
            assert!(matches!(&r, Value::Vector(v) if v.on_device_only()), "the result stays on the device");
            assert_eq!(after.to_host, before.to_host, "no vector copied back in a chain");
            assert_eq!(after.to_device, before.to_device, "no vector copied over in a chain");
            // Copying back happens when the host needs the numbers, once.
            if let Value::Vector(v) = &r {
                let _ = v.host();
                let _ = v.host();
            }
            assert_eq!(vlad::vec::transfers().to_host, after.to_host + 1);
            // A gradient on the device stays there too.
            let before = vlad::vec::transfers();
            let g = eval(&mut gpu, "((gradient-R (lambda (x) (vec-sum (vec-exp x)))) x)");
            let after = vlad::vec::transfers();
            assert!(matches!(&g, Value::Vector(v) if v.on_device_only()));
            assert_eq!((after.to_host, after.to_device), (before.to_host, before.to_device));
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn host_vectors_are_not_counted_as_transfers_on_the_cpu() {
    let before = vlad::vec::transfers();
    let v = Rc::new(RealVec::from_vec(vec![1.0, 2.0], vlad::vec::Shape::Vector));
    assert_eq!(v.host(), &[1.0, 2.0]);
    assert!(!v.on_device());
    let after = vlad::vec::transfers();
    assert_eq!(before, after);
}

/// The examples run on the CPU backend and learn: the least-squares weights are
/// recovered, and the MLP's loss falls.
#[test]
fn examples_learn() {
    let exe = env!("CARGO_BIN_EXE_vlad");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = std::env::temp_dir().join(format!("vlad-vec-examples-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // The MLP trains for 300 steps instead of 1000 here, to keep the debug build quick.
    let run = |file: &str| {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap()
            .replace("(train params0 1000 ", "(train params0 300 ");
        let f = tmp.join(file.replace('/', "_"));
        std::fs::write(&f, text).unwrap();
        let o = std::process::Command::new(exe).args(["--backend", "cpu"]).arg(&f).output().unwrap();
        assert!(o.status.success(), "{}: {}", file, String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = run("examples/least_squares.vlad");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.last(), Some(&"#t"), "{}", out);
    let last = lines[lines.len() - 2];
    let w: Vec<f64> =
        last.trim_matches(|c| c == '(' || c == ')').split(' ').map(|x| x.parse().unwrap()).collect();
    assert_close("least-squares weights", &w, &[1.0, -2.0, 3.0, -4.0, 0.5, -0.25, 2.0, 1.5], 1e-3);
    let out = run("examples/mlp.vlad");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 3, "{}", out);
    let first: f64 =
        lines[0].trim_matches(|c| c == '(' || c == ')').split(' ').nth(1).unwrap().parse().unwrap();
    // (300 steps here: the final check of the file, loss < 0.02 after 1000 steps, may not hold.)
    let last: f64 = lines[lines.len() - 2].parse().unwrap();
    assert!(last < 0.2 * first && last < 0.05, "loss {} -> {}", first, last);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Sums the squares of a vector read element by element (two `vec-ref`s an element).
const LOOP_SQ: &str = "(define (loop-sq v) (let loop ((i 0) (acc 0.0)) (if (= i (vec-length v)) acc \
     (loop (+ i 1) (+ acc (* (vec-ref v i) (vec-ref v i)))))))
(define (loop-sq-list l) (let loop ((l l) (acc 0.0)) (if (null? l) acc \
     (loop (cdr l) (+ acc (* (car l) (car l)))))))
(define (loop-cube v) (let loop ((i 0) (acc 0.0)) (if (= i (vec-length v)) acc \
     (loop (+ i 1) (+ acc (* (vec-ref v i) (* (vec-ref v i) (vec-ref v i))))))))
(define (loop-cube-list l) (let loop ((l l) (acc 0.0)) (if (null? l) acc \
     (loop (cdr l) (+ acc (* (car l) (* (car l) (car l))))))))";

fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(256 << 20).spawn(f).unwrap().join().unwrap()
}

#[test]
fn reverse_phase_of_an_element_by_element_loop_is_linear() {
    // Each `vec-ref`'s sensitivity is a one-hot: adding it to the gradient so far must
    // cost constant work (amortised), not a pass over the whole vector.
    let work = |n: usize| {
        on_big_stack(move || {
            let mut s = session(Backend::Cpu);
            s.run_text("defs", LOOP_SQ).expect("definitions");
            let before = vlad::vec::numbers_written();
            let g = eval(&mut s, &format!("((gradient-R loop-sq) (vec-iota {}))", n));
            assert_eq!(nums(&g).len(), n);
            vlad::vec::numbers_written() - before
        })
    };
    let (w1, w4) = (work(2000), work(8000));
    assert!(w4 <= 20 * 8000, "numbers written for a gradient of length 8000: {}", w4);
    assert!(w4 < 6 * w1, "numbers written grow faster than the length: {} at 2000, {} at 8000", w1, w4);
}

#[test]
fn gradient_of_an_element_by_element_loop_is_exact() {
    on_big_stack(|| {
        let mut s = session(Backend::Cpu);
        s.run_text("defs", LOOP_SQ).expect("definitions");
        for n in [1usize, 2, 7, 40, 300] {
            let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0 - 0.5).collect();
            let g = nums(&eval(&mut s, &format!("((gradient-R loop-sq) {})", vvec(&x))));
            let two_x: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
            assert_eq!(g, two_x, "gradient of the sum of squares at length {}", n);
            let gl = nums(&eval(&mut s, &format!("((gradient-R loop-sq-list) {})", vlist(&x))));
            assert_eq!(g, gl, "vector and list gradients at length {}", n);
            // Three reads an element: sums of three sensitivities, against lists and 3x^2.
            let g3 = nums(&eval(&mut s, &format!("((gradient-R loop-cube) {})", vvec(&x))));
            let g3l = nums(&eval(&mut s, &format!("((gradient-R loop-cube-list) {})", vlist(&x))));
            let g3c: Vec<f64> = x.iter().map(|v| 3.0 * v * v).collect();
            assert_close(&format!("cube gradient vs lists at length {}", n), &g3, &g3l, 1e-14);
            assert_close(&format!("cube gradient vs 3x^2 at length {}", n), &g3, &g3c, 1e-14);
            // The gradient is an ordinary vector: it prints, compares and computes as one.
            let printed =
                vlad::print::to_string(&eval(&mut s, &format!("((gradient-R loop-sq) {})", vvec(&x))));
            let dense = vlad::print::to_string(&eval(&mut s, &format!("(vec-scale 2 {})", vvec(&x))));
            assert_eq!(printed, dense);
            let d = nums(&eval(
                &mut s,
                &format!("(vec-dot ((gradient-R loop-sq) {}) (vec-fill {} 1))", vvec(&x), vvec(&x)),
            ));
            assert_close("sum of the gradient", &d, &[two_x.iter().sum::<f64>()], 1e-12);
        }
    });
}

#[test]
fn hessian_vector_products_through_vec_ref_are_exact() {
    on_big_stack(|| {
        let mut s = session(Backend::Cpu);
        s.run_text("defs", LOOP_SQ).expect("definitions");
        let n = 30;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.61).cos() - 0.2).collect();
        let u = dir(n);
        let (xv, uv) = (vvec(&x), vvec(&u));
        // Sum of squares: H u = 2u.
        let two_u: Vec<f64> = u.iter().map(|v| 2.0 * v).collect();
        let fr = nums(&eval(&mut s, &format!("(jvp (gradient-R loop-sq) {} {})", xv, uv)));
        let rr = nums(&eval(
            &mut s,
            &format!("(vjp (lambda (x) (vec-dot ((gradient-R loop-sq) x) {})) {} 1)", uv, xv),
        ));
        let rf = nums(&eval(&mut s, &format!("((gradient-R (lambda (x) (jvp loop-sq x {}))) {})", uv, xv)));
        assert_close("HVP FR of the sum of squares", &fr, &two_u, 1e-14);
        assert_close("HVP RR of the sum of squares", &rr, &two_u, 1e-14);
        assert_close("HVP RF of the sum of squares", &rf, &two_u, 1e-14);
        // Sum of cubes: H u = 6 x u.
        let six_xu: Vec<f64> = x.iter().zip(&u).map(|(a, b)| 6.0 * a * b).collect();
        let fr3 = nums(&eval(&mut s, &format!("(jvp (gradient-R loop-cube) {} {})", xv, uv)));
        let rr3 = nums(&eval(
            &mut s,
            &format!("(vjp (lambda (x) (vec-dot ((gradient-R loop-cube) x) {})) {} 1)", uv, xv),
        ));
        let l3 =
            nums(&eval(&mut s, &format!("(jvp (gradient-R loop-cube-list) {} {})", vlist(&x), vlist(&u))));
        assert_close("HVP FR of the sum of cubes", &fr3, &six_xu, 1e-12);
        assert_close("HVP RR of the sum of cubes", &rr3, &six_xu, 1e-12);
        assert_close("HVP FR of the sum of cubes vs lists", &fr3, &l3, 1e-12);
    });
}

/// A sensitivity must be shaped like the value it is the sensitivity of: a
/// wrong one is an error where it enters (vjp's ybar, or a vector primitive's
/// backpropagator called with it), in every nesting, not a wrong result (a
/// transpose's backpropagator would turn a 2x3 sensitivity of a 3x2 result into
/// a 3x2 "gradient" of a 2x3 argument) or an error deep inside a rule.
#[test]
fn wrong_shaped_sensitivities_are_errors() {
    let a = "(define A (vector-of (list (list 1 2 3) (list 4 5 6))))\n";
    let vjp = "error: vjp: the sensitivity must be shaped like the function's result: ";
    let cases = [
        ("(vjp transpose A A)", format!("{vjp}the result is a 3x2 matrix, the sensitivity is a 2x3 matrix")),
        ("(vjp (lambda (x) (vec-reshape x 3 2)) A A)", format!("{vjp}the result is a 3x2 matrix")),
        ("(vjp vec-exp (vec-iota 3) (vec-iota 2))", format!("{vjp}the result is a vector of length 3, the sensitivity is a vector of length 2")),
        ("(vjp vec-exp (vec-iota 3) 1)", format!("{vjp}the result is a vector of length 3, the sensitivity is the real 1")),
        ("(vjp vec-sum (vec-iota 3) (vec-iota 3))", format!("{vjp}the result is a real, the sensitivity is a vector of length 3")),
        ("(vjp (lambda (x) (* x x)) 3 (vec-iota 2))", format!("{vjp}the result is a real, the sensitivity is a vector")),
        ("(vjp (lambda (x) (vec-outer x x)) (vec-iota 2) (vec-iota 4))", "error: vec-outer: the sensitivity of its result must be shaped like the result: the result is a 2x2 matrix, the sensitivity is a vector of length 4".into()),
        ("(vjp (lambda (x) (list x x)) 3 (list 1 2 3))", format!("{vjp}at (cddr ...) the result has (), the sensitivity has a pair (3)")),
        ("(vjp (lambda (x) (list x (vec-scale x (vec-iota 2)))) 3 (list 1 (vec-iota 3)))", format!("{vjp}at (cadr ...) the result has a vector of length 2, the sensitivity has a vector of length 3")),
        ("(vjp (lambda (x) (list x x)) 3 (list 1))", format!("{vjp}at (cdr ...) the result has a pair, the sensitivity has ()")),
        ("(vjp (lambda (x) (list x (vec-scale x A))) 3 (list 1 (vec-iota 6)))", "error: vec-scale: the sensitivity of its result must be shaped like the result: the result is a 2x3 matrix, the sensitivity is a vector of length 6".into()),
        ("(vjp (lambda (x) (cons x x)) 3 5)", format!("{vjp}the result is a pair, the sensitivity is the real 5")),
        ("(value-and-vjp transpose A A)", format!("{vjp}the result is a 3x2 matrix")),
        // a backpropagator called by the program
        ("((cdr ((*j transpose) (*j A))) (sensitize A))", "error: transpose: the sensitivity of its result must be shaped like the result: the result is a 3x2 matrix, the sensitivity is a 2x3 matrix".into()),
        ("((cdr ((*j (lambda (x) (transpose (vec-exp x)))) (*j A))) (sensitize A))", "error: transpose: the sensitivity of its result".into()),
        ("((cdr ((*j (lambda (x) (mat-vec x (vec-iota 3)))) (*j A))) (sensitize (vec-iota 3)))", "error: mat-vec: the sensitivity of its result must be shaped like the result: the result is a vector of length 2, the sensitivity is a vector of length 3".into()),
        ("((cdr ((*j vec-sum) (*j (vec-iota 3)))) (sensitize (vec-iota 3)))", "error: vec-sum: the sensitivity of its result must be shaped like the result: the result is a real, the sensitivity is a vector of length 3".into()),
        // nested: forward over reverse, reverse over reverse
        ("(jvp (lambda (x) (vec-sum (vjp transpose x x))) A A)", format!("{vjp}the result is a 3x2 matrix")),
        ("((gradient-R (lambda (x) (vec-sum (vjp transpose x x)))) A)", format!("{vjp}the result is a 3x2 matrix")),
        ("((gradient-F (lambda (x) (vec-sum (vjp transpose x x)))) A)", format!("{vjp}the result is a 3x2 matrix")),
        // gradient-F, like gradient-R, wants a real result
        ("((gradient-F vec-exp) (vec-iota 2))", "error: gradient-F: the function must return a real, but its derivative along a real of the argument is (vector 1.0 0.0) (a vector)".into()),
        ("((gradient-F (lambda (x) (list x))) 2)", "error: gradient-F: the function must return a real".into()),
        ("((gradient-R vec-exp) (vec-iota 2))", "error: derivative-R/gradient-R: the function must return a real".into()),
    ];
    for (text, want) in &cases {
        let got = run1(&format!("{a}{text}"));
        assert!(got.starts_with(want.as_str()), "{text}:\n  got  {got}\n  want {want}");
    }
    // right shapes (and zeros of any shape) still work, in every nesting
    let ok = [
        ("(vjp transpose A (transpose A))", "(matrix (1.0 2.0 3.0) (4.0 5.0 6.0))"),
        ("(vjp (lambda (x) (list x (vec-sum x))) (vec-iota 2) (list (vec-iota 2) 2))", "(vector 2.0 3.0)"),
        ("(vjp (lambda (x) (cons x #t)) 3 (cons 1 #f))", "1"),
        ("(vjp (lambda (x) (list x x)) 3 (zero (list 1 2)))", "0"),
        ("(hvp-RR (lambda (x) (vec-sum (vec* x x))) (vec-iota 2) (vec-iota 2))", "(vector 0.0 2.0)"),
        ("(jvp (lambda (x) (vec-sum (vjp transpose x (transpose x)))) A A)", "21.0"),
    ];
    for (text, want) in ok {
        assert_eq!(run1(&format!("{a}{text}")), want, "{text}");
    }
    // the error says where the call is
    let text = format!("{a}(define B A)\n(vjp transpose A B)");
    let mut s = session(Backend::Cpu);
    let Err(e) = s.run_text("shapes.vlad", &text) else { panic!("no error") };
    let r = e.render(&s.sources);
    assert!(r.contains("in vjp called at shapes.vlad:3:1"), "{r}");
}
