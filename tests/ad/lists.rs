//! Item 7: derivatives through recursion and higher-order procedures, gradients
//! of functions of lists, and Jacobians, in both modes, against closed forms.

use crate::common::*;
use vlad::print::to_string;

/// x^n by recursive multiplication (non-tail and tail recursive, and by
/// repeated squaring) has derivative n x^(n-1); second derivative n(n-1)x^(n-2).
#[test]
fn power_by_recursion() {
    let defs = "(define (pow x n) (if (= n 0) 1 (* x (pow x (- n 1)))))\n\
                (define (pow-acc x n) (let loop ((k n) (acc 1)) (if (zero? k) acc (loop (- k 1) (* acc x)))))\n\
                (define (pow-sq x n) (cond ((= n 0) 1)\n\
                                          ((= 0 (- n (* 2 (quotient2 n)))) (let ((h (pow-sq x (quotient2 n)))) (* h h)))\n\
                                          (else (* x (pow-sq x (- n 1))))))\n\
                (define (quotient2 n) (let loop ((q 0)) (if (> (* 2 (+ q 1)) n) q (loop (+ q 1)))))\n";
    for n in [1, 2, 3, 5, 8, 13] {
        for x in [0.5, 1.0, 1.7, -1.2] {
            let xs = lit(x);
            let mut src = defs.to_string();
            for p in ["pow", "pow-acc", "pow-sq"] {
                for (_, d) in MODES {
                    src.push_str(&format!("(({d} (lambda (x) ({p} x {n}))) {xs})\n"));
                }
                for (_, d) in nestings(2, &format!("(lambda (x) ({p} x {n}))")) {
                    src.push_str(&format!("({d} {xs})\n"));
                }
            }
            let v = nums(&src);
            let nf = n as f64;
            let d1 = nf * x.powi(n - 1);
            let d2 = nf * (nf - 1.0) * x.powi((n - 2).max(0));
            let d2 = if n < 2 { 0.0 } else { d2 };
            for (k, got) in v.iter().enumerate() {
                let (exp, order) = if k % 6 < 2 { (d1, 1) } else { (d2, 2) };
                assert_close(*got, exp, 1e-13, &format!("d^{} x^{} at {} (#{})", order, n, x, k));
            }
        }
    }
}

/// Derivatives with respect to a parameter threaded through mutual recursion
/// (a letrec of two procedures capturing the variable).
#[test]
fn mutual_recursion() {
    for (l, d) in MODES {
        let v = nums(&format!(
            "(({d} (lambda (x)\n\
                (letrec ((ev (lambda (n) (if (= n 0) 1.0 (* x (od (- n 1))))))\n\
                         (od (lambda (n) (if (= n 0) x (+ x (ev (- n 1)))))))\n\
                  (ev 4)))) 1.5)"
        ));
        // ev4 = x·od3, od3 = x + ev2, ev2 = x·od1, od1 = x + ev0 = x + 1
        // ev2 = x² + x, od3 = x² + 2x, ev4 = x³ + 2x² → 3x² + 4x
        assert_close(v[0], 3.0 * 1.5 * 1.5 + 4.0 * 1.5, 1e-14, l);
    }
}

/// map, reduce, fold-left, map2 and list-ref on lists whose elements depend on x.
#[test]
fn higher_order_list_procedures() {
    for (l, d) in MODES {
        let v = nums(&format!(
            "(({d} (lambda (x) (reduce + 0 (map (lambda (c) (* c (* x x))) (list 1 2 3))))) 2.0)\n\
             (({d} (lambda (x) (fold-left * 1 (map (lambda (k) (+ x k)) (iota 4))))) 0.5)\n\
             (({d} (lambda (x) (reduce + 0 (map2 * (list x (sin x) 2.0) (list 3.0 x x))))) 0.9)\n\
             (({d} (lambda (x) (list-ref (map exp (list 1.0 x (* 2.0 x))) 2))) 0.3)\n\
             (({d} (lambda (x) (length (list x x x)))) 0.3)\n\
             (({d} (lambda (x) (reduce (lambda (a b) (+ (* a a) b)) x (list x 2.0 x)))) 0.7)"
        ));
        let x = 0.5;
        // (x)(x+1)(x+2)(x+3): d/dx = sum of products of three
        let prod_d = (x + 1.0) * (x + 2.0) * (x + 3.0)
            + x * (x + 2.0) * (x + 3.0)
            + x * (x + 1.0) * (x + 3.0)
            + x * (x + 1.0) * (x + 2.0);
        let y: f64 = 0.9;
        // 3x + x sin x + 2x → 5 + sin x + x cos x
        let m2 = 5.0 + y.sin() + y * y.cos();
        // reduce: x² + (4 + (x² + x)) → 4x + 1
        let exp = [12.0 * 2.0, prod_d, m2, 2.0 * (0.6f64).exp(), 0.0, 4.0 * 0.7 + 1.0];
        assert_all_close(&v, &exp, 1e-14, l);
    }
}

/// Gradients of functions of lists by `gradient-R` and `gradient-F`, against
/// closed forms and against each other.
#[test]
fn gradients_of_list_functions() {
    let xs = [0.5, -1.25, 2.0, 0.75, 1.5];
    let cs = [1.0, 2.0, -0.5, 3.0, 0.25];
    let xl = format!("(list {})", xs.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(" "));
    let cl = format!("(list {})", cs.iter().map(|x| lit(*x)).collect::<Vec<_>>().join(" "));
    let src = format!(
        "(define cs {cl})\n\
         (define (wsq l) (reduce + 0 (map2 (lambda (x c) (* c (* x x))) l cs)))\n\
         (define (prod l) (reduce * 1 l))\n\
         (define (norm l) (sqrt (reduce + 0 (map (lambda (x) (* x x)) l))))\n\
         (define (softsum l) (log (reduce + 0 (map exp l))))\n\
         (define (dot-self l) (let loop ((l l) (acc 0)) (if (null? l) acc (loop (cdr l) (+ acc (* (car l) (car l)))))))\n\
         ((gradient-R wsq) {xl})\n((gradient-F wsq) {xl})\n\
         ((gradient-R prod) {xl})\n((gradient-F prod) {xl})\n\
         ((gradient-R norm) {xl})\n((gradient-F norm) {xl})\n\
         ((gradient-R softsum) {xl})\n((gradient-F softsum) {xl})\n\
         ((gradient-R dot-self) {xl})\n((gradient-F dot-self) {xl})\n"
    );
    let v = run(&src);
    let p: f64 = xs.iter().product();
    let n = xs.iter().map(|x| x * x).sum::<f64>().sqrt();
    let z: f64 = xs.iter().map(|x| x.exp()).sum();
    let expects: [Vec<f64>; 5] = [
        xs.iter().zip(cs).map(|(x, c)| 2.0 * c * x).collect(),
        xs.iter().map(|x| p / x).collect(),
        xs.iter().map(|x| x / n).collect(),
        xs.iter().map(|x| x.exp() / z).collect(),
        xs.iter().map(|x| 2.0 * x).collect(),
    ];
    for (k, exp) in expects.iter().enumerate() {
        assert_all_close(&flat(&v[2 * k]), exp, 1e-14, &format!("gradient-R #{}", k));
        assert_all_close(&flat(&v[2 * k + 1]), exp, 1e-14, &format!("gradient-F #{}", k));
    }
}

/// Gradients with respect to nested structure (pairs of lists, improper lists)
/// by reverse mode, and the same structure's directional derivatives by jvp.
#[test]
fn gradients_of_nested_structures() {
    let v = run("(define (f (cons (list a b) (cons c d))) (+ (* a (* b c)) (sin d)))\n\
         ((gradient-R f) (cons (list 1.0 2.0) (cons 3.0 0.5)))\n\
         (jvp f (cons (list 1.0 2.0) (cons 3.0 0.5)) (cons (list 1.0 0.0) (cons 0.0 0.0)))\n\
         (jvp f (cons (list 1.0 2.0) (cons 3.0 0.5)) (cons (list 0.0 1.0) (cons 0.0 0.0)))\n\
         (jvp f (cons (list 1.0 2.0) (cons 3.0 0.5)) (cons (list 0.0 0.0) (cons 1.0 0.0)))\n\
         (jvp f (cons (list 1.0 2.0) (cons 3.0 0.5)) (cons (list 0.0 0.0) (cons 0.0 1.0)))\n\
         (jvp f (cons (list 1.0 2.0) (cons 3.0 0.5)) (cons (list 0.5 -1.0) (cons 2.0 4.0)))");
    let g = [6.0, 3.0, 2.0, 0.5f64.cos()];
    assert_eq!(
        vlad::print::to_string(&v[0]).matches('(').count(),
        2,
        "shape: {}",
        vlad::print::to_string(&v[0])
    );
    assert_all_close(&flat(&v[0]), &g, 1e-15, "gradient-R of nested");
    let j: Vec<f64> = v[1..5].iter().map(num).collect();
    assert_all_close(&j, &g, 1e-15, "jvp basis");
    assert_close(num(&v[5]), 0.5 * g[0] - g[1] + 2.0 * g[2] + 4.0 * g[3], 1e-14, "jvp direction");
}

/// Jacobians of R³ → R² and R² → R³ maps: `jacobian-F` and `jacobian-R` agree
/// with the closed form (and with each other), and vjp/jvp are consistent
/// (u·(J v) = (uᵀJ)·v).
#[test]
fn jacobians() {
    let (x, y, z) = (0.5f64, -1.5f64, 2.0f64);
    let v = run(&format!(
        "(define (f (list x y z)) (list (* x (* y z)) (+ (sin x) (* y y)) (exp (* 0.5 z))))\n\
         (define (g (list a b)) (list (* a b) (/ a b) (atan a b)))\n\
         ((jacobian-F f) (list {x:?} {y:?} {z:?}))\n\
         ((jacobian-R f) (list {x:?} {y:?} {z:?}))\n\
         ((jacobian-F g) (list {x:?} {y:?}))\n\
         ((jacobian-R g) (list {x:?} {y:?}))\n\
         (jvp f (list {x:?} {y:?} {z:?}) (list 1.0 2.0 3.0))\n\
         (vjp f (list {x:?} {y:?} {z:?}) (list -1.0 0.5 2.0))"
    ));
    let jf = [vec![y * z, x * z, x * y], vec![x.cos(), 2.0 * y, 0.0], vec![0.0, 0.0, 0.5 * (0.5 * z).exp()]];
    let r2 = x * x + y * y;
    let jg = [vec![y, x], vec![1.0 / y, -x / (y * y)], vec![y / r2, -x / r2]];
    for (k, expect) in [(0, &jf[..]), (1, &jf[..]), (2, &jg[..]), (3, &jg[..])] {
        let m = matrix(&v[k]);
        assert_eq!(m.len(), expect.len(), "rows of #{}", k);
        for (row, erow) in m.iter().zip(expect) {
            assert_all_close(row, erow, 1e-14, &format!("jacobian #{}", k));
        }
    }
    let jv: Vec<f64> = jf.iter().map(|r| r[0] + 2.0 * r[1] + 3.0 * r[2]).collect();
    let u = [-1.0, 0.5, 2.0];
    let utj: Vec<f64> = (0..3).map(|c| (0..3).map(|r| u[r] * jf[r][c]).sum()).collect();
    assert_all_close(&flat(&v[4]), &jv, 1e-14, "jvp");
    assert_all_close(&flat(&v[5]), &utj, 1e-14, "vjp");
}

/// Newton's method for a square root, differentiated with respect to its
/// argument through the (fixed-count) iteration: d√a/da = 1/(2√a).
#[test]
fn derivative_through_iteration() {
    for (l, d) in MODES {
        let v = nums(&format!(
            "(define (newton-sqrt a) (let loop ((k 0) (r 1.0)) (if (= k 30) r (loop (+ k 1) (* 0.5 (+ r (/ a r)))))))\n\
             (({d} newton-sqrt) 2.0)\n(({d} newton-sqrt) 9.0)"
        ));
        assert_all_close(&v, &[0.5 / 2f64.sqrt(), 1.0 / 6.0], 1e-14, l);
    }
}

/// Reverse mode over a long loop builds a chain of backpropagators, each
/// closing over the next; creating, running and dropping such chains (and long
/// chains of ordinary closures) must not overflow the native stack of an
/// ordinary thread using the library.
#[test]
fn long_closure_chains() {
    let r = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let v = nums(
                "(let loop ((k 100000) (h (lambda (y) y))) (if (= k 0) 1.0 (loop (- k 1) (lambda (y) (h y)))))\n\
                 (define (powt x n) (let loop ((k n) (acc 1.0)) (if (= k 0) acc (loop (- k 1) (* acc x)))))\n\
                 ((derivative-R (lambda (x) (powt x 20000))) 1.0)",
            );
            assert_all_close(&v, &[1.0, 20000.0], 0.0, "long chains");
        })
        .unwrap()
        .join();
    assert!(r.is_ok());
}

/// `vjp` accepts `()` in its sensitivity where the result has a number (as the
/// reversible procedures' derivatives take it): it is that number's zero. It
/// failed inside the function (`*: expected two numbers, got ()`) or gave a
/// gradient of the wrong shape (`()` for a real). Closed forms: for
/// f(a, b) = (ab, a), ybar = (u, v) gives (ub + v, ua); the derivative of
/// `leftmost` is 1 at the leftmost real, 0 elsewhere.
#[test]
fn a_nil_sensitivity_of_a_number_is_zero() {
    let v = run("(vjp (lambda (x) (* x x)) 2.0 '())\n\
                 (vjp (lambda (x) (+ x 1.0)) 2.0 '())\n\
                 (vjp (lambda ((list a b)) (list (* a b) a)) (list 2.0 3.0) (list 1.0 '()))\n\
                 (vjp (lambda ((list a b)) (list (* a b) a)) (list 2.0 3.0) (list '() 1.0))\n\
                 (vjp (lambda ((list a b)) (+ a b)) (list 2.0 3.0) '())\n\
                 (define (big n z) (let loop ((i 0) (v z)) (if (= i n) v (loop (+ i 1) (cons v v)))))\n\
                 (define (leftmost v) (if (pair? v) (leftmost (car v)) v))\n\
                 (define g (vjp (lambda (v) (* 2.0 (leftmost v))) (big 60 1.5) 1.0))\n\
                 (list (leftmost g) (leftmost (cdr g)))\n\
                 (define r (vjp (lambda (v) (cons (leftmost v) v)) (big 60 1.5) (cons 1.0 (big 60 '()))))\n\
                 (list (leftmost r) (leftmost (cdr r)))\n");
    assert_eq!(num(&v[0]), 0.0);
    assert_eq!(num(&v[1]), 0.0);
    assert_eq!(flat(&v[2]), [3.0, 2.0]);
    assert_eq!(flat(&v[3]), [1.0, 0.0]);
    assert_eq!(flat(&v[4]), [0.0, 0.0]);
    // (shared data, 2^60 leaves as a tree: done in time of its size)
    assert_eq!(flat(&v[5]), [2.0, 0.0]);
    assert_eq!(flat(&v[6]), [1.0, 0.0]);
}

/// A procedure's sensitivity is a procedure (of the sensitivities of what it
/// captures) or `()`; `vjp` of the identity passes it on as given. (Data there
/// is an error: `structure.rs`, `misuse_is_a_clear_error`; a pair there made
/// `vjp` recurse without end.) The identity's vjp is its sensitivity: applied
/// to 2.0, the closure of (* k y) with k = 5.0 gives 10.0. A boolean's
/// sensitivity is a boolean or `()` (data there is an error too), and x's is
/// the cdr's: 3.0, 4.0.
fn a_procedure_sensitivity_passes_through() {
    let v = run("(vjp (lambda (f) f) car '())\n\
                 ((vjp (lambda (f) f) (let ((k 3.0)) (lambda (y) (* k y))) (let ((k 5.0)) (lambda (y) (* k y)))) 2.0)\n\
                 (vjp (lambda (x) (cons #t x)) 1.0 (cons #f 3.0))\n\
                 (vjp (lambda (x) (cons #t x)) 1.0 (cons '() 4.0))\n");
    assert_eq!(to_string(&v[0]), "()");
    assert_eq!(num(&v[1]), 10.0);
    // (a boolean's sensitivity is a boolean or `()`: the real's passes through)
    assert_eq!(num(&v[2]), 3.0);
    assert_eq!(num(&v[3]), 4.0);
}

#[test]
fn a_procedure_sensitivity_passes_through_vjp() {
    a_procedure_sensitivity_passes_through();
}

/// `list-ref` under every nesting of two and three derivatives: f(a, b, c) =
/// ac + b²c through `list-ref` has gradient (c, 2bc, a + b²) and Hessian
/// ((0 0 1) (0 2c 2b) (1 2b 0)); ∂³f/∂b²∂c = 2. Also elements that are
/// pairs (an inexact index), and a list built inside the function.
fn list_ref_under_every_nesting() {
    let (a, b, c) = (1.5, -2.0, 0.75);
    let f = "(lambda (l) (+ (* (list-ref l 0) (list-ref l 2)) (* (* (list-ref l 1) (list-ref l 1)) (list-ref l 2))))";
    let x = format!("(list {} {} {})", lit(a), lit(b), lit(c));
    let grad = [c, 2.0 * b * c, a + b * b];
    let hess = [[0.0, 0.0, 1.0], [0.0, 2.0 * c, 2.0 * b], [1.0, 2.0 * b, 0.0]];
    let mut src = format!("(define f {f})\n((gradient-R f) {x})\n((gradient-F f) {x})\n");
    for (k, (outer, inner)) in [("R", "R"), ("F", "R"), ("R", "F"), ("F", "F")].into_iter().enumerate() {
        // row k of the Hessian (k = 3: row 0 again), one gradient inside the other
        let sel = ["car", "cadr", "caddr", "car"][k];
        src.push_str(&format!("((gradient-{outer} (lambda (l) ({sel} ((gradient-{inner} f) l)))) {x})\n"));
    }
    let dir = "(list 0.5 -1.0 2.0)";
    src.push_str(&format!("(hvp f {x} {dir})\n(hvp-RR f {x} {dir})\n"));
    for (o1, o2, o3) in [("R", "F", "R"), ("F", "R", "F"), ("R", "R", "R"), ("F", "F", "F")] {
        src.push_str(&format!(
            "((derivative-{o1} (lambda (b) ((derivative-{o2} (lambda (b2) ((derivative-{o3} \
               (lambda (c) (f (list {a} b2 c)))) {c}))) b))) {b})\n",
            a = lit(a),
            b = lit(b),
            c = lit(c)
        ));
    }
    src.push_str(
        "(define (g l) (let ((p (list-ref l 1.))) (* (car p) (cdr p))))\n\
         ((gradient-R g) (list (cons 1. 2.) (cons 3. 4.) (cons 5. 6.)))\n\
         ((gradient-F g) (list (cons 1. 2.) (cons 3. 4.) (cons 5. 6.)))\n\
         ((derivative-R (lambda (x) (list-ref (map (lambda (k) (* k (* x x))) (list 1. 2. 3.)) 2))) 2.)\n\
         ((derivative-F (lambda (x) (list-ref (map (lambda (k) (* k (* x x))) (list 1. 2. 3.)) 2))) 2.)\n\
         (vjp (lambda (l) (list (list-ref l 1) (list-ref l 0))) (list 1. 2.) (list 10. 20.))\n\
         (jvp (lambda (l) (list (list-ref l 1) (list-ref l 0))) (list 1. 2.) (list 10. 20.))\n",
    );
    let v = run(&src);
    assert_all_close(&flat(&v[0]), &grad, 1e-15, "gradient-R");
    assert_all_close(&flat(&v[1]), &grad, 1e-15, "gradient-F");
    for k in 0..4 {
        assert_all_close(&flat(&v[2 + k]), &hess[k % 3], 1e-15, &format!("Hessian row {k}"));
    }
    let hv: Vec<f64> = hess.iter().map(|r| r[0] * 0.5 - r[1] + r[2] * 2.0).collect();
    assert_all_close(&flat(&v[6]), &hv, 1e-15, "hvp");
    assert_all_close(&flat(&v[7]), &hv, 1e-15, "hvp-RR");
    for (k, d3) in v[8..12].iter().enumerate() {
        assert_close(num(d3), 2.0, 1e-15, &format!("third derivative #{k}"));
    }
    assert_eq!(flat(&v[12]), [0.0, 0.0, 4.0, 3.0, 0.0, 0.0]);
    assert_eq!(flat(&v[13]), [0.0, 0.0, 4.0, 3.0, 0.0, 0.0]);
    assert_eq!(num(&v[14]), 12.0);
    assert_eq!(num(&v[15]), 12.0);
    assert_eq!(flat(&v[16]), [20.0, 10.0]);
    assert_eq!(flat(&v[17]), [20.0, 10.0]);
    assert_eq!(v.len(), 18);
}

#[test]
fn list_ref_under_nesting() {
    list_ref_under_every_nesting();
}

/// Every test above again, with the prelude's `jvp`/`vjp` run by the closure
/// transforms only (as `--no-tape`): the tests above run them on dual numbers
/// and tapes. (A new test above belongs in this list too.)
#[test]
fn all_of_the_above_by_the_transform() {
    by_transform(&[
        power_by_recursion,
        mutual_recursion,
        higher_order_list_procedures,
        gradients_of_list_functions,
        gradients_of_nested_structures,
        jacobians,
        derivative_through_iteration,
        long_closure_chains,
        a_nil_sensitivity_of_a_number_is_zero,
        a_procedure_sensitivity_passes_through,
        list_ref_under_every_nesting,
    ]);
}
