//! Items 3-6: perturbation confusion, closures over outer variables, the paper's
//! identity example, min/max nesting, Hessians by every nesting, and third
//! derivatives by all eight nestings.

use crate::common::*;

/// d/dx (x · d/dy (x + y)) at x = 1 is 1 (2 would mean the inner derivative
/// confused its perturbation with the outer one), in all four combinations.
#[test]
fn perturbation_confusion_classic() {
    for (lo, outer) in MODES {
        for (li, inner) in MODES {
            let v = nums(&format!(
                "(({outer} (lambda (x) (* x (({inner} (lambda (y) (+ x y))) 1)))) 1)\n\
                 (({outer} (lambda (x) (* x (({inner} (lambda (y) (+ x y))) 1.0)))) 2.0)\n\
                 (({outer} (lambda (x) (* x (({inner} (lambda (y) (* x y))) 2.0)))) 3.0)\n\
                 (({outer} (lambda (x) (({inner} (lambda (y) (* x (* y y)))) x))) 3.0)"
            ));
            let label = format!("{}{}", lo, li);
            // x · 1 → 1; x · x → 2x; d/dx [x · 2x] (inner d/dy(x y²) at y = x) → 4x
            assert_all_close(&v, &[1.0, 1.0, 6.0, 12.0], 0.0, &label);
        }
    }
}

/// The same, with the outer variable reaching the inner derivative through data
/// structures: as a component of the point the inner gradient is taken at, in a
/// pair destructured by the inner function, and in a list the inner closure captures.
#[test]
fn perturbation_confusion_through_data() {
    for (lo, outer) in MODES {
        for (grad, inner) in [("F", "gradient-F"), ("R", "gradient-R")] {
            let label = format!("{}{}", lo, grad);
            let v = nums(&format!(
                "(({outer} (lambda (x) (* x (cadr (({inner} (lambda (p) (+ (car p) (cadr p)))) (list x 1.0)))))) 1.0)\n\
                 (({outer} (lambda (x) (* x (car (({inner} (lambda (p) (* (car p) (cadr p)))) (list 5.0 x)))))) 1.5)\n\
                 (({outer} (lambda (x) (* x (({inner} (lambda (y) (let (((cons a b) (cons x y))) (+ a b)))) 1.0)))) 1.0)\n\
                 (({outer} (lambda (x) (let ((box (list x (cons 2.0 x))))\n\
                     (* x (({inner} (lambda (y) (+ (* (car box) y) (cdr (cadr box))))) 1.0))))) 2.0)"
            ));
            // x·1 → 1;  x · d/dq0 (q0 q1) = x·x → 2x = 3;  x·1 → 1;  x · x → 2x = 4
            assert_all_close(&v, &[1.0, 3.0, 1.0, 4.0], 0.0, &label);
        }
    }
}

/// Paper §3: λa.((λb.λc.b) a) 1 is the identity, so its derivative is 1.
#[test]
fn paper_identity_example() {
    for (l, op) in nestings(1, "(lambda (a) (((lambda (b) (lambda (c) b)) a) 1))") {
        let v = nums(&format!("({op} 4)\n({op} -2.5)\n({op} 0.0)"));
        assert_all_close(&v, &[1.0, 1.0, 1.0], 0.0, &l);
    }
    for (l, op) in nestings(2, "(lambda (a) (((lambda (b) (lambda (c) b)) a) 1))") {
        assert_close(nums(&format!("({op} 4.0)"))[0], 0.0, 0.0, &l);
    }
}

/// Closures capturing the differentiated variable, created in one place and
/// applied in another, returned from procedures, composed, and passed to
/// higher-order procedures; gradients with respect to closures.
#[test]
fn closures_over_outer_variables() {
    let defs = "(define (mk a) (lambda (z) (* a z)))\n\
                (define (compose f g) (lambda (x) (f (g x))))\n\
                (define (twice f) (lambda (x) (f (f x))))\n\
                (define (adder x) (lambda (y) (lambda (z) (+ x (* y z)))))\n";
    for (l, d) in MODES {
        let v = nums(&format!(
            "{defs}\
             (({d} (lambda (a) ((mk a) 3.0))) 2.0)\n\
             (({d} (lambda (x) ((lambda (y) (* x y)) x))) 3.0)\n\
             (({d} (lambda (x) ((compose sin (mk x)) 2.0))) 0.5)\n\
             (({d} (lambda (x) ((twice (mk x)) 3.0))) 0.5)\n\
             (({d} (lambda (x) ((twice (lambda (y) (* x (sin y)))) 0.7))) 1.3)\n\
             (({d} (lambda (x) (((adder x) (* x x)) x))) 2.0)\n\
             (({d} (lambda (x) (let ((fs (list (mk x) (mk (* 2.0 x)) sin)))\n\
                                  (reduce + 0 (map (lambda (f) (f x)) fs))))) 1.5)"
        ));
        // (twice (λy. x sin y)) 0.7 = x sin(x sin 0.7); d/dx = sin(x s) + x cos(x s) s, s = sin 0.7
        let s = 0.7f64.sin();
        let x = 1.3;
        let tw = (x * s).sin() + x * (x * s).cos() * s;
        // x + x² · x → 1 + 3x²;  x·x + 2x·x + sin x → 6x + cos x
        let exp =
            [3.0, 6.0, 2.0 * 1.0f64.cos(), 2.0 * 0.5 * 3.0, tw, 1.0 + 3.0 * 4.0, 6.0 * 1.5 + 1.5f64.cos()];
        assert_all_close(&v, &exp, 1e-14, l);
    }
    // sensitivity / tangent with respect to a closure: the environment's
    let v = run("(define (mk a) (lambda (z) (* a (* z z))))\n\
         (vjp (lambda (f) (f 3.0)) (mk 2.0) 1.0)\n\
         (jvp (lambda (f) (f 3.0)) (mk 2.0) (mk 1.0))\n\
         (jvp (lambda (f) (f 3.0)) (mk 2.0) (mk 0.5))");
    match &v[0] {
        vlad::value::Value::Closure(inst, _) => {
            assert_eq!(inst.env.len(), 1, "closure sensitivity has one captured variable");
            assert_close(num(&inst.env[0]), 9.0, 0.0, "d(a z²)/da at z=3");
        }
        other => panic!("expected a closure-shaped sensitivity, got {}", vlad::print::to_string(other)),
    }
    assert_close(num(&v[1]), 9.0, 0.0, "jvp along a closure tangent");
    assert_close(num(&v[2]), 4.5, 0.0, "jvp along a closure tangent");
}

/// Reverse mode applied to a procedure that itself applies `*j` (self application
/// of the transform), written with raw primitives rather than the prelude.
#[test]
fn raw_primitives_nested() {
    let v = nums(
        "(define (dr f) (lambda (x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1.0))))))\n\
         (define (df f) (lambda (x) (unperturb (tangent ((j* f) (bundle x (perturb 1.0)))))))\n\
         ((dr (dr (lambda (x) (* x (* x x))))) 2.0)\n\
         ((dr (df (lambda (x) (* x (* x x))))) 2.0)\n\
         ((df (dr (lambda (x) (* x (* x x))))) 2.0)\n\
         ((dr (dr (dr (lambda (x) (* x (* x x)))))) 2.0)\n\
         ((dr (lambda (x) ((dr (lambda (y) (* x y))) x))) 2.0)\n",
    );
    assert_all_close(&v[..5], &[12.0, 12.0, 12.0, 6.0, 1.0], 0.0, "raw nesting");
}

/// The value half of `(*j f)` applied to `(*j x)` is `(*j (f x))`.
#[test]
fn reverse_value_is_tagged_primal() {
    let v = run("(car ((*j (lambda (x) (* x x))) (*j 3.0)))\n\
                 (*j-inverse (car ((*j (lambda (x) (cons x (* x x)))) (*j 3.0))))\n\
                 (value-and-vjp (lambda (x) (* x (sin x))) 2.0 1.0)");
    assert_eq!(vlad::print::to_string(&v[0]), "(reverse 9.0)");
    assert_eq!(vlad::print::to_string(&v[1]), "(3.0 . 9.0)");
    assert_all_close(
        &flat(&v[2]),
        &[2.0 * 2.0f64.sin(), 2.0f64.sin() + 2.0 * 2.0f64.cos()],
        1e-15,
        "value-and-vjp",
    );
}

/// min over x of max over y of f(x, y), with the inner optimum found by gradient
/// ascent (its gradient taken with respect to y inside a closure over x) and the
/// outer gradient taken through the inner loop, in all four combinations. The
/// expected values come from the same recurrences differentiated by hand in Rust.
#[test]
fn min_max_nesting() {
    // g(x, y) = x² + x y − y²; inner: y ← y + 0.25 ∂g/∂y (30 steps from 1);
    // outer: x ← x − 0.1 d/dx g(x, y(x)) (20 steps from 1).
    let mut x = 1.0f64;
    for _ in 0..20 {
        let (mut y, mut dy) = (1.0f64, 0.0f64);
        for _ in 0..30 {
            let (ny, ndy) = (y + 0.25 * (x - 2.0 * y), dy + 0.25 * (1.0 - 2.0 * dy));
            y = ny;
            dy = ndy;
        }
        let dg = 2.0 * x + y + (x - 2.0 * y) * dy;
        x -= 0.1 * dg;
    }
    for (lo, outer) in MODES {
        for (li, inner) in MODES {
            let v = nums(&format!(
                "(define (g x y) (- (+ (* x x) (* x y)) (* y y)))\n\
                 (define (ascend x)\n\
                   (let loop ((k 0) (y 1.0))\n\
                     (if (= k 30) y (loop (+ k 1) (+ y (* 0.25 (({inner} (lambda (y) (g x y))) y)))))))\n\
                 (let loop ((k 0) (x 1.0))\n\
                   (if (= k 20) x (loop (+ k 1) (- x (* 0.1 (({outer} (lambda (x) (g x (ascend x)))) x))))))"
            ));
            assert_close(v[0], x, 1e-12, &format!("{}{}", lo, li));
        }
    }
}

/// AD.md's saddle: argmin over (s, t) of max over (u, v) of s² + t² − u² − v²
/// from (1, 1) and (1, 1), inner and outer gradients in all four combinations of
/// `gradient-F`/`gradient-R`. With rate 0.25 both iterations halve their point
/// each step, so after 20 outer and 20 inner steps the points are exactly 2⁻²⁰.
#[test]
fn saddle_point_all_modes() {
    let expect = 2f64.powi(-20);
    for (lo, outer) in [("F", "gradient-F"), ("R", "gradient-R")] {
        for (li, inner) in [("F", "gradient-F"), ("R", "gradient-R")] {
            let v = run(&format!(
                "(define (f (list s t) (list u v)) (- (+ (* s s) (* t t)) (+ (* u u) (* v v))))\n\
                 (define (step p g r) (map2 (lambda (a b) (+ a (* r b))) p g))\n\
                 (define (argmax-y x)\n\
                   (let loop ((k 0) (y (list 1.0 1.0)))\n\
                     (if (= k 20) y (loop (+ k 1) (step y (({inner} (lambda (y) (f x y))) y) 0.25)))))\n\
                 (define x* (let loop ((k 0) (x (list 1.0 1.0)))\n\
                   (if (= k 20) x (loop (+ k 1) (step x (({outer} (lambda (x) (f x (argmax-y x)))) x) -0.25)))))\n\
                 x*\n(argmax-y x*)"
            ));
            let label = format!("{}{}", lo, li);
            assert_all_close(&flat(&v[0]), &[expect, expect], 1e-12, &format!("x* {}", label));
            assert_all_close(&flat(&v[1]), &[expect, expect], 1e-12, &format!("y* {}", label));
        }
    }
}

const QUAD: &str = "(define (f (list x y)) (+ (* 2 (* x x)) (+ (* 3 (* x y)) (* 4 (* y y)))))\n";

/// Hessian of 2x² + 3xy + 4y² at (3, 4) is ((4 3) (3 8)) by FF, FR, RF, RR
/// (Jacobian in the first mode of the gradient in the second), and by the prelude's
/// `hessian`.
#[test]
fn hessian_all_nestings() {
    for (lo, jac) in [("F", "jacobian-F"), ("R", "jacobian-R")] {
        for (li, grad) in [("F", "gradient-F"), ("R", "gradient-R")] {
            let v =
                run(&format!("{QUAD}(({jac} ({grad} f)) (list 3 4))\n(({jac} ({grad} f)) (list 3.0 4.0))"));
            for h in &v {
                assert_eq!(matrix(h), [[4.0, 3.0], [3.0, 8.0]], "{}{}", lo, li);
            }
        }
    }
    let v = run(&format!(
        "{QUAD}((hessian f) (list 3 4))\n((gradient-R f) (list 3 4))\n((gradient-F f) (list 3 4))"
    ));
    assert_eq!(matrix(&v[0]), [[4.0, 3.0], [3.0, 8.0]]);
    assert_eq!(flat(&v[1]), [24.0, 41.0]);
    assert_eq!(flat(&v[2]), [24.0, 41.0]);
}

/// H·(7, 8) = (52, 85) by reverse-over-reverse (paper §5, by double application of
/// `*j` written out) and forward-over-reverse, and by the prelude's helpers.
#[test]
fn hessian_vector_product() {
    let v = run(&format!(
        "{QUAD}\
         (define (dot (list a b) (list c d)) (+ (* a c) (* b d)))\n\
         (define ((grad f) x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1)))))\n\
         (define (hv-rr f x v) ((grad (lambda (x) (dot ((grad f) x) v))) x))\n\
         (define (hv-fr f x v) (unperturb (tangent ((j* (grad f)) (bundle x (perturb v))))))\n\
         (hv-rr f (list 3 4) (list 7 8))\n\
         (hv-fr f (list 3 4) (list 7 8))\n\
         (hvp f (list 3 4) (list 7 8))\n\
         (hvp-RR f (list 3 4) (list 7 8))\n\
         (hv-rr f (list 3.5 -1.0) (list 7.0 8.0))\n\
         (hv-fr f (list 3.5 -1.0) (list 7.0 8.0))"
    ));
    for h in &v {
        assert_eq!(flat(h), [52.0, 85.0], "{}", vlad::print::to_string(h));
    }
    // a non-quadratic function: f(x, y) = x² sin y + exp(x y); H·v against the
    // closed-form Hessian
    let (x, y, vx, vy) = (0.7f64, 1.3f64, -0.5f64, 2.0f64);
    let e = (x * y).exp();
    let hxx = 2.0 * y.sin() + y * y * e;
    let hxy = 2.0 * x * y.cos() + e + x * y * e;
    let hyy = -x * x * y.sin() + x * x * e;
    let expect = [hxx * vx + hxy * vy, hxy * vx + hyy * vy];
    let v = run(&format!(
        "(define (f (list x y)) (+ (* (* x x) (sin y)) (exp (* x y))))\n\
         (hvp f (list {x:?} {y:?}) (list {vx:?} {vy:?}))\n\
         (hvp-RR f (list {x:?} {y:?}) (list {vx:?} {vy:?}))\n\
         ((hessian f) (list {x:?} {y:?}))\n\
         ((jacobian-R (gradient-R f)) (list {x:?} {y:?}))\n\
         ((jacobian-R (gradient-F f)) (list {x:?} {y:?}))\n\
         ((jacobian-F (gradient-F f)) (list {x:?} {y:?}))"
    ));
    assert_all_close(&flat(&v[0]), &expect, 1e-13, "hvp");
    assert_all_close(&flat(&v[1]), &expect, 1e-13, "hvp-RR");
    for (k, h) in v[2..].iter().enumerate() {
        assert_all_close(&flat(h), &[hxx, hxy, hxy, hyy], 1e-13, &format!("hessian #{}", k));
    }
}

/// Third derivatives by all eight nestings, against closed forms.
#[test]
fn third_derivatives_all_nestings() {
    type Case = (&'static str, f64, f64, fn(f64) -> f64);
    let cases: &[Case] = &[
        ("(lambda (x) (* (* x x) (* x x)))", 2.0, 48.0, |x| x.powi(4)),
        ("exp", 1.0, std::f64::consts::E, f64::exp),
        ("(lambda (x) (exp x))", 1.0, std::f64::consts::E, f64::exp),
        ("sin", 0.5, -(0.5f64.cos()), f64::sin),
        ("(lambda (x) (/ 1.0 x))", 2.0, -6.0 / 16.0, |x| 1.0 / x),
        ("log", 2.0, 2.0 / 8.0, f64::ln),
        ("(lambda (x) (* x (sin x)))", 0.8, -3.0 * 0.8f64.sin() - 0.8 * 0.8f64.cos(), |x| x * x.sin()),
        ("(lambda (x) (sqrt (+ 1.0 (* x x))))", 0.6, -3.0 * 0.6 / (1.0 + 0.36f64).powf(2.5), |x| {
            (1.0 + x * x).sqrt()
        }),
    ];
    for (f, x, expect, rf) in cases {
        assert_close(fd3(rf, *x, 1e-2), *expect, 1e-6, &format!("sanity: FD of d³{} at {}", f, x));
        let ns = nestings(3, f);
        assert_eq!(ns.len(), 8);
        let src: String = ns.iter().map(|(_, op)| format!("({} {})\n", op, lit(*x))).collect();
        let v = nums(&src);
        for ((l, _), got) in ns.iter().zip(&v) {
            assert_close(*got, *expect, 1e-12, &format!("{}: d³{} at {}", l, f, x));
        }
    }
}

/// Mixed-order checks against finite differences of the closed-form second
/// derivative: fourth derivatives of exp and sin by a few nestings.
#[test]
fn fourth_derivatives() {
    for op in ["FFFF", "RRRR", "FRFR", "RFRF", "RRFF"] {
        let mut e = "sin".to_string();
        for c in op.chars().rev() {
            e = format!("({} {})", if c == 'F' { "derivative-F" } else { "derivative-R" }, e);
        }
        let v = nums(&format!("({} 0.5)", e));
        assert_close(v[0], 0.5f64.sin(), 1e-13, &format!("d⁴ sin {}", op));
        let fd = fd2(&|y: f64| -y.sin(), 0.5, 1e-2);
        assert_close(v[0], fd, 1e-6, "vs FD of sin''");
    }
}

/// The AD primitives are first-class: used inside code that is itself being
/// differentiated, in either mode, they are differentiated like any other
/// procedure (`*j`, `*j-inverse`, `bundle`, `primal`, `tangent`, `perturb`,
/// `sensitize` and inverses as identities on the value, `zero` as constant,
/// `plus` as addition).
#[test]
fn ad_primitives_inside_differentiated_code() {
    let bodies: &[(&str, f64)] = &[
        ("(*j-inverse (car ((*j (lambda (y) (* x y))) (*j 2.0))))", 2.0),
        ("(primal (bundle (* x x) (perturb 1.0)))", 6.0),
        ("(unperturb (tangent (bundle 1.0 (perturb (* x x)))))", 6.0),
        ("(car (plus (cons x 1.0) (cons (* x x) 2.0)))", 7.0),
        ("(+ x (car (zero (cons x x))))", 1.0),
        ("(unsensitize (sensitize (* x x)))", 6.0),
        ("(*j-inverse (*j (* x x)))", 6.0),
        ("(vjp (lambda (y) (* y y)) x 1.0)", 2.0),
        ("(jvp (lambda (y) (* y (* y x))) x 1.0)", 12.0),
        ("(cdr (unsensitize ((cdr ((*j (lambda (y) (* x (* y y)))) (*j x))) (sensitize 1.0))))", 12.0),
    ];
    for (body, expect) in bodies {
        for (l, d) in MODES {
            let v = nums(&format!("(({d} (lambda (x) {body})) 3.0)"));
            assert_close(v[0], *expect, 0.0, &format!("d{} of {} at 3", l, body));
        }
    }
}

/// Closures used inside one branch of a conditional and also outside it, chosen
/// by a conditional, recursive, or stored in data: the environment
/// sensitivities from the branch taken and from elsewhere must combine.
#[test]
fn closures_across_branches() {
    let cases: &[(&str, f64, f64)] = &[
        ("(let ((g (lambda (y) (* x y)))) (+ (g 2.0) (if (< x 5) (g 3.0) 1.0)))", 1.0, 5.0),
        ("(let ((g (lambda (y) (* x y)))) (+ (g 2.0) (if (> x 5) (g 3.0) 1.0)))", 1.0, 2.0),
        ("(letrec ((g (lambda (n) (if (= n 0) x (* x (g (- n 1))))))) (+ (g 2) (if (< x 5) (g 1) 1.0)))", 2.0, 16.0),
        ("(letrec ((g (lambda (n) (if (= n 0) x (* x (g (- n 1))))))) (+ (g 2) (if (> x 5) (g 1) 1.0)))", 2.0, 12.0),
        ("(let ((p (cons (lambda (y) (* x y)) x))) (+ ((car p) 2.0) (if (> x 5) ((car p) 3.0) (cdr p))))", 2.0, 3.0),
        ("(let ((p (cons (lambda (y) (* x y)) x))) (+ ((car p) 2.0) (if (< x 5) ((car p) 3.0) (cdr p))))", 2.0, 5.0),
        ("(let ((g (lambda (y) (* x y)))) (if (> x 5) (g 3.0) 1.0))", 1.0, 0.0),
        ("(let* ((g (lambda (y) (* x y))) (h (if (< x 5) g (lambda (y) y)))) (+ (h 2.0) (g 1.0)))", 1.0, 3.0),
        ("(let* ((g (lambda (y) (* x y))) (h (if (> x 5) g (lambda (y) y)))) (+ (h 2.0) (g 1.0)))", 1.0, 1.0),
        ("(let* ((g (lambda (y) (* x y))) (h (if (> x 5) g (lambda (y) (* y (* x x)))))) (+ (h 2.0) (g 1.0)))", 1.0, 5.0),
        ("(let* ((g (lambda (y) (* x y))) (gs (list g g (lambda (z) (+ z x))))) (reduce + 0 (map (lambda (f) (f 2.0)) gs)))", 1.0, 5.0),
        ("(let* ((g (lambda (y) (* x y))) (k (lambda (y) (g (g y))))) (+ (k 2.0) (g 1.0)))", 1.5, 7.0),
    ];
    for (body, x, expect) in cases {
        for (l, d) in MODES {
            let v = nums(&format!("(({d} (lambda (x) {body})) {})", lit(*x)));
            assert_close(v[0], *expect, 0.0, &format!("d{} of {} at {}", l, body, x));
        }
    }
}

/// Bodies that end in a conditional (whose reverse transform builds the
/// backpropagator in each branch): the rest of the body used by one branch or
/// both, a branch that ignores the argument, a captured variable used in one
/// branch only, self and mutual recursion, and a conditional inside a branch.
/// First derivatives in every mode and second derivatives in every nesting,
/// against closed forms.
#[test]
fn bodies_ending_in_conditionals() {
    // (function, [(x, f'(x), f''(x))])
    type Points = [(f64, f64, f64); 2];
    let cases: [(&str, Points); 6] = [
        // x>0: x^3 (y = x^2 from before the conditional); else -x^2
        (
            "(lambda (x) (let ((y (* x x))) (if (> x 0) (* y x) (- 0 y))))",
            [(2.0, 12.0, 12.0), (-2.0, 4.0, -2.0)],
        ),
        // x>0: a constant; else 3x^2 (y from before the conditional)
        ("(lambda (x) (let ((y (* 3 (* x x)))) (if (> x 0) 5.0 y)))", [(1.5, 0.0, 0.0), (-1.0, -6.0, 6.0)]),
        // a closure over x whose body ends in a conditional that uses x in one branch
        (
            "(lambda (x) ((lambda (z) (if (> z 0) (* x (* z z)) (sin z))) x))",
            [(2.0, 12.0, 12.0), (-1.0, 0.540_302_305_868_139_8, 0.841_470_984_807_896_5)],
        ),
        // x^3 by self-recursion
        (
            "(lambda (x) (letrec ((p (lambda (n) (if (= n 0) 1.0 (* x (p (- n 1))))))) (p 3)))",
            [(2.0, 12.0, 12.0), (-1.0, 3.0, -6.0)],
        ),
        // mutual recursion: e(3) = x o(2) = x e(1) = x^2 o(0) = x^4
        (
            "(lambda (x) (letrec ((e (lambda (n) (if (= n 0) x (* x (o (- n 1))))))\n\
                                (o (lambda (n) (if (= n 0) (* x x) (e (- n 1))))))\n\
                         (e 3)))",
            [(2.0, 32.0, 48.0), (0.5, 0.5, 3.0)],
        ),
        // a conditional inside a branch: x<0: x^2; 0<=x<1: x^3; else 2x^2
        (
            "(lambda (x) (let ((s (* x x))) (if (< x 0) s (if (< x 1) (* s x) (* 2 s)))))",
            [(0.5, 0.75, 3.0), (3.0, 12.0, 4.0)],
        ),
    ];
    for (f, points) in cases {
        for (l, op) in nestings(1, f) {
            for (x, d1, _) in points {
                assert_close(nums(&format!("({op} {})", lit(x)))[0], d1, 1e-12, &format!("{l} {f} at {x}"));
            }
        }
        for (l, op) in nestings(2, f) {
            for (x, _, d2) in points {
                assert_close(nums(&format!("({op} {})", lit(x)))[0], d2, 1e-12, &format!("{l} {f} at {x}"));
            }
        }
    }
}

/// Every test above again, with the prelude's `jvp`/`vjp` run by the closure
/// transforms only (as `--no-tape`): the tests above run them on dual numbers
/// and tapes. (A new test above belongs in this list too.)
#[test]
fn all_of_the_above_by_the_transform() {
    by_transform(&[
        perturbation_confusion_classic,
        perturbation_confusion_through_data,
        paper_identity_example,
        closures_over_outer_variables,
        raw_primitives_nested,
        reverse_value_is_tagged_primal,
        min_max_nesting,
        saddle_point_all_modes,
        hessian_all_nestings,
        hessian_vector_product,
        third_derivatives_all_nestings,
        fourth_derivatives,
        ad_primitives_inside_differentiated_code,
        closures_across_branches,
        bodies_ending_in_conditionals,
    ]);
}
