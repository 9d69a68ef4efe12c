//! Item 1: every primitive's derivative rules, checked at several points against
//! closed forms and central finite differences (computed here in Rust with
//! `f64`), and forward mode against reverse mode, for first and second
//! derivatives; the primitive itself and a closure wrapping it are both
//! differentiated.

use crate::common::*;

struct Unary {
    name: &'static str,
    f: fn(f64) -> f64,
    d1: fn(f64) -> f64,
    d2: fn(f64) -> f64,
    points: &'static [f64],
}

fn unaries() -> Vec<Unary> {
    vec![
        Unary {
            name: "sqrt",
            f: f64::sqrt,
            d1: |x| 0.5 / x.sqrt(),
            d2: |x| -0.25 / (x * x.sqrt()),
            points: &[0.25, 1.0, 2.0, 9.5],
        },
        Unary { name: "exp", f: f64::exp, d1: f64::exp, d2: f64::exp, points: &[-1.5, 0.0, 0.5, 2.0] },
        Unary {
            name: "log",
            f: f64::ln,
            d1: |x| 1.0 / x,
            d2: |x| -1.0 / (x * x),
            points: &[0.3, 1.0, 2.0, 7.5],
        },
        Unary { name: "sin", f: f64::sin, d1: f64::cos, d2: |x| -x.sin(), points: &[-1.0, 0.0, 0.5, 2.5] },
        Unary {
            name: "cos",
            f: f64::cos,
            d1: |x| -x.sin(),
            d2: |x| -x.cos(),
            points: &[-1.0, 0.0, 0.5, 2.5],
        },
        Unary { name: "real", f: |x| x, d1: |_| 1.0, d2: |_| 0.0, points: &[-2.0, 0.5, 3.0] },
        Unary { name: "write", f: |x| x, d1: |_| 1.0, d2: |_| 0.0, points: &[-2.0, 0.5] },
        Unary { name: "write-real", f: |x| x, d1: |_| 1.0, d2: |_| 0.0, points: &[1.5] },
    ]
}

/// First and second derivatives of each unary primitive, applied directly and
/// through a closure, in every mode.
#[test]
fn unary_primitives() {
    for u in unaries() {
        let mut src = String::from("(define (g x) (");
        src.push_str(u.name);
        src.push_str(" x))\n");
        let mut labels = Vec::new();
        for &x in u.points {
            let x = lit(x);
            for f in [u.name, "g"] {
                for (l, op) in nestings(1, f) {
                    src.push_str(&format!("({} {})\n", op, x));
                    labels.push((1, format!("d{} {} at {}", l, f, x)));
                }
                for (l, op) in nestings(2, f) {
                    src.push_str(&format!("({} {})\n", op, x));
                    labels.push((2, format!("d{} {} at {}", l, f, x)));
                }
            }
        }
        let got = nums(&src);
        let mut i = 0;
        for &x in u.points {
            let fd_1 = fd1(&u.f, x, 1e-3 * x.abs().max(0.1));
            let fd_2 = fd2(&u.f, x, 1e-2 * x.abs().max(0.1));
            assert_close(fd_1, (u.d1)(x), 1e-8, &format!("sanity: FD of {} at {}", u.name, x));
            for _ in 0..2 {
                let first = &got[i..i + 2];
                // forward and reverse agree
                assert_close(first[0], first[1], 1e-14, &labels[i].1);
                for k in 0..2 {
                    assert_close(first[k], (u.d1)(x), 1e-14, &labels[i + k].1);
                    assert_close(first[k], fd_1, 1e-8, &format!("{} vs finite differences", labels[i + k].1));
                }
                i += 2;
                let second = &got[i..i + 4];
                for k in 0..4 {
                    assert_close(second[k], (u.d2)(x), 1e-13, &labels[i + k].1);
                    assert_close(second[k], second[0], 1e-14, &format!("{} vs FF", labels[i + k].1));
                    assert_close(
                        second[k],
                        fd_2,
                        1e-6,
                        &format!("{} vs finite differences", labels[i + k].1),
                    );
                }
                i += 4;
            }
        }
        assert_eq!(i, got.len());
    }
}

struct Binary {
    name: &'static str,
    f: fn(f64, f64) -> f64,
    /// (df/da, df/db)
    grad: fn(f64, f64) -> (f64, f64),
    points: &'static [(f64, f64)],
}

fn binaries() -> Vec<Binary> {
    vec![
        Binary { name: "+", f: |a, b| a + b, grad: |_, _| (1.0, 1.0), points: &[(3.0, 4.0), (-1.5, 0.25)] },
        Binary { name: "-", f: |a, b| a - b, grad: |_, _| (1.0, -1.0), points: &[(3.0, 4.0), (-1.5, 0.25)] },
        Binary {
            name: "*",
            f: |a, b| a * b,
            grad: |a, b| (b, a),
            points: &[(3.0, 4.0), (-1.5, 0.25), (0.0, 2.0)],
        },
        Binary {
            name: "/",
            f: |a, b| a / b,
            grad: |a, b| (1.0 / b, -a / (b * b)),
            points: &[(3.0, 4.0), (-1.5, 0.25), (2.0, -3.0)],
        },
        Binary {
            name: "atan",
            f: f64::atan2,
            grad: |y, x| (x / (x * x + y * y), -y / (x * x + y * y)),
            points: &[(3.0, 4.0), (-1.5, 0.25), (1.0, -2.0), (0.5, 0.0)],
        },
    ]
}

/// Partial derivatives of binary primitives: `vjp` on the primitive itself gives
/// both at once, `jvp` gives each along a basis direction, and closures fixing
/// one argument give each by `derivative-F`/`-R`; second derivatives including
/// the mixed partial by all four nestings.
#[test]
fn binary_primitives() {
    for b in binaries() {
        for &(x, y) in b.points {
            let (xs, ys) = (lit(x), lit(y));
            let n = b.name;
            let src = format!(
                "(define (fa a) ({n} a {ys}))\n\
                 (define (fb b) ({n} {xs} b))\n\
                 (define (g p) ({n} (car p) (cdr p)))\n\
                 (vjp {n} (cons {xs} {ys}) 1.0)\n\
                 (vjp g (cons {xs} {ys}) 1.0)\n\
                 (jvp {n} (cons {xs} {ys}) (cons 1.0 0.0))\n\
                 (jvp {n} (cons {xs} {ys}) (cons 0.0 1.0))\n\
                 (jvp g (cons {xs} {ys}) (cons 1.0 0.0))\n\
                 (jvp g (cons {xs} {ys}) (cons 0.0 1.0))\n\
                 ((derivative-F fa) {xs})\n((derivative-R fa) {xs})\n\
                 ((derivative-F fb) {ys})\n((derivative-R fb) {ys})\n\
                 (vjp {n} (cons {xs} {ys}) 2.5)\n"
            );
            let mut src = src;
            // second derivatives: d²/da², d²/db², d²/dadb in every nesting
            for (_, op) in nestings(2, "fa") {
                src.push_str(&format!("({} {})\n", op, xs));
            }
            for (_, op) in nestings(2, "fb") {
                src.push_str(&format!("({} {})\n", op, ys));
            }
            for (_, outer) in MODES {
                for (_, inner) in MODES {
                    src.push_str(&format!(
                        "(({outer} (lambda (a) (({inner} (lambda (b) ({n} a b))) {ys}))) {xs})\n"
                    ));
                }
            }
            let v = run(&src);
            let what = format!("{} at ({}, {})", n, xs, ys);
            let (ga, gb) = (b.grad)(x, y);
            let fda = fd1(&|a| (b.f)(a, y), x, 1e-3);
            let fdb = fd1(&|c| (b.f)(x, c), y, 1e-3);
            assert_close(fda, ga, 1e-8, "sanity");
            assert_close(fdb, gb, 1e-8, "sanity");
            assert_all_close(&flat(&v[0]), &[ga, gb], 1e-14, &format!("vjp {}", what));
            assert_all_close(&flat(&v[1]), &[ga, gb], 1e-14, &format!("vjp closure {}", what));
            assert_all_close(&flat(&v[0]), &[fda, fdb], 1e-8, &format!("vjp vs FD {}", what));
            let firsts: Vec<f64> = v[2..10].iter().map(num).collect();
            let exp = [ga, gb, ga, gb, ga, ga, gb, gb];
            assert_all_close(&firsts, &exp, 1e-14, &format!("jvp/derivative {}", what));
            assert_all_close(&flat(&v[10]), &[2.5 * ga, 2.5 * gb], 1e-14, &format!("vjp scaled {}", what));
            let daa = fd2(&|a| (b.f)(a, y), x, 1e-2 * x.abs().max(0.1));
            let dbb = fd2(&|c| (b.f)(x, c), y, 1e-2 * y.abs().max(0.1));
            let dab = fd_mixed(&|a, c| (b.f)(a, c), x, y, 1e-4);
            let seconds: Vec<f64> = v[11..].iter().map(num).collect();
            assert_eq!(seconds.len(), 12);
            for k in 0..4 {
                assert_close(seconds[k], daa, 1e-6, &format!("d²/da² #{} {}", k, what));
                assert_close(seconds[4 + k], dbb, 1e-6, &format!("d²/db² #{} {}", k, what));
                assert_close(seconds[8 + k], dab, 1e-6, &format!("d²/dadb #{} {}", k, what));
                assert_close(seconds[k], seconds[0], 1e-13, "nestings agree");
                assert_close(seconds[4 + k], seconds[4], 1e-13, "nestings agree");
                assert_close(seconds[8 + k], seconds[8], 1e-13, "nestings agree");
            }
        }
    }
}

/// Exact integer arguments keep exact arithmetic where the rule allows it.
#[test]
fn exact_arguments() {
    let v = run("((derivative-R (lambda (x) (* x (* x x)))) 2)\n\
                 ((derivative-F (lambda (x) (* x (* x x)))) 2)\n\
                 (vjp * (cons 3 4) 1)\n\
                 (jvp - (cons 3 4) (cons 1 1))");
    let shown: Vec<String> = v.iter().map(vlad::print::to_string).collect();
    assert_eq!(shown, ["12", "12", "(4 . 3)", "0"]);
}

/// Comparisons and predicates have zero derivatives: their sensitivity to their
/// arguments is zero, and a function whose value only depends on a comparison
/// through a branch choice has the derivative of the branch taken.
#[test]
fn comparisons_and_predicates_are_flat() {
    for c in ["=", "<", ">", "<=", ">="] {
        let v = run(&format!(
            "(vjp {c} (cons 3.0 4.0) #t)\n\
             (vjp (lambda (p) ({c} (car p) (cdr p))) (cons 3.0 4.0) #f)\n\
             (jvp {c} (cons 3.0 4.0) (cons 1.0 1.0))\n\
             ((derivative-R (lambda (x) (if ({c} x 2.0) (* 3.0 x) (* 5.0 x)))) 1.0)\n\
             ((derivative-F (lambda (x) (if ({c} x 2.0) (* 3.0 x) (* 5.0 x)))) 1.0)\n\
             ((derivative-R (lambda (x) (if ({c} x 2.0) (* 3.0 x) (* 5.0 x)))) 4.0)\n\
             ((derivative-F (lambda (x) (if ({c} x 2.0) (* 3.0 x) (* 5.0 x)))) 4.0)"
        ));
        assert_all_close(&flat(&v[0]), &[0.0, 0.0], 0.0, c);
        assert_all_close(&flat(&v[1]), &[0.0, 0.0], 0.0, c);
        // the tangent of a boolean is the boolean's zero (the boolean itself)
        assert!(matches!(v[2], vlad::value::Value::Bool(_)), "{}: {}", c, vlad::print::to_string(&v[2]));
        let expect_lo = if c == "<" || c == "<=" { 3.0 } else { 5.0 };
        let expect_hi = if c == ">" || c == ">=" { 3.0 } else { 5.0 };
        assert_all_close(
            &v[3..].iter().map(num).collect::<Vec<_>>(),
            &[expect_lo, expect_lo, expect_hi, expect_hi],
            0.0,
            c,
        );
    }
    for p in ["zero?", "positive?", "negative?", "real?", "null?", "pair?", "boolean?", "procedure?"] {
        let v = run(&format!(
            "(vjp {p} 3.0 #t)\n\
             (jvp {p} 3.0 1.0)\n\
             ((derivative-R (lambda (x) (if ({p} x) (* x x) (* 7.0 x)))) 3.0)\n\
             ((derivative-F (lambda (x) (if ({p} x) (* x x) (* 7.0 x)))) 3.0)\n\
             ((derivative-R (derivative-R (lambda (x) (if ({p} x) (* x (* x x)) (* 7.0 (* x x)))))) 3.0)\n\
             ((derivative-F (derivative-R (lambda (x) (if ({p} x) (* x (* x x)) (* 7.0 (* x x)))))) 3.0)"
        ));
        assert_close(num(&v[0]), 0.0, 0.0, p);
        let truth = p == "positive?" || p == "real?";
        assert!(
            matches!(v[1], vlad::value::Value::Bool(b) if b == truth),
            "{}: {}",
            p,
            vlad::print::to_string(&v[1])
        );
        let (d1, d2) = if truth { (6.0, 18.0) } else { (7.0, 14.0) };
        assert_close(num(&v[2]), d1, 0.0, p);
        assert_close(num(&v[3]), d1, 0.0, p);
        assert_close(num(&v[4]), d2, 0.0, p);
        assert_close(num(&v[5]), d2, 0.0, p);
    }
}

/// `real`, `write` and `write-real` are identities for AD in both modes and at
/// second order, and `write` still prints (the value, not a tagged value).
#[test]
fn identity_rules_print_primal() {
    let mut s = session();
    let buf = Out::default();
    s.m.out = Box::new(buf.clone());
    let v = run_in(
        &mut s,
        "write",
        "((derivative-R (lambda (x) (* x (write (* x x))))) 3.0)\n\
         ((derivative-F (lambda (x) (* x (write-real (* x x))))) 3.0)\n\
         ((derivative-F (derivative-R (lambda (x) (* x (real (* x x)))))) 3.0)",
    );
    assert_all_close(&v.iter().map(num).collect::<Vec<_>>(), &[27.0, 27.0, 18.0], 0.0, "d(x*id(x²))");
    let out = buf.text();
    assert!(out.lines().next().is_some_and(|l| l.contains("9.0")), "write printed: {:?}", out);
}

/// Type predicates answer for the untransformed value at every level of
/// transformation, on leaves, aggregates and procedures alike.
#[test]
fn type_predicates_under_ad() {
    let defs = "(define (score v) (+ (if (null? v) 1 0) (+ (if (pair? v) 2 0) (+ (if (real? v) 4 0)\n\
                  (+ (if (boolean? v) 8 0) (if (procedure? v) 16 0))))))\n\
                (define (total x) (reduce + 0 (map2 * (map score (list '() (cons x x) x #t sin (lambda (y) (* x y)) (list x)))\n\
                                                 (list 1 10 100 1000 10000 100000 1000000))))\n\
                (define (f x) (* x (total x)))\n\
                (define (g x) (* (* x x) (total x)))\n";
    let s = 1.0 + 20.0 + 400.0 + 8000.0 + 160000.0 + 1600000.0 + 2000000.0;
    let mut src = format!("{defs}(total 2.0)\n");
    for (_, op) in nestings(1, "f") {
        src.push_str(&format!("({} 2.0)\n", op));
    }
    for (_, op) in nestings(2, "g") {
        src.push_str(&format!("({} 2.0)\n", op));
    }
    for (_, op) in nestings(3, "g") {
        src.push_str(&format!("({} 2.0)\n", op));
    }
    let v = nums(&src);
    let mut expect = vec![s, s, s];
    expect.extend([2.0 * s; 4]);
    expect.extend([0.0; 8]);
    assert_all_close(&v, &expect, 0.0, "type predicates");
}

/// The native versions of the primitives' derivative rules (`ad::native`,
/// `ad::native_rf` for reverse over forward) give exactly what the interpreted
/// rule closures give, in every mode and nesting, exact and inexact, and the
/// same operation counts.
#[test]
fn native_rules_agree_with_the_interpreted_rules() {
    let program = "
      (define (f x) (let ((a (* x x)) (b (/ 3.0 (+ x 1))) (c (- (sqrt (+ x 2)) (exp (* 0.1 x)))))
                      (+ (* a (sin x)) (- (cos b) (+ (log (+ 1 c)) (atan a b))))))
      (define (g x) (if (< x 2) (* x (* x x)) (- (/ x 3) (sqrt x))))
      (define (h p) (let ((x (car p)) (y (cadr p))) (+ (* x (exp y)) (atan y x))))
      (list ((derivative-F f) 0.7) ((derivative-R f) 0.7)
            ((derivative-F (derivative-R f)) 0.7) ((derivative-R (derivative-F f)) 0.7)
            ((derivative-R (derivative-R f)) 0.7) ((derivative-F (derivative-F f)) 0.7)
            ((derivative-R g) 1) ((derivative-F g) 1) ((derivative-R g) 5) ((derivative-R (derivative-R g)) 1)
            ((gradient-R h) (list 0.3 1.2)) ((gradient-F h) (list 3 2))
            (hvp h (list 0.3 1.2) (list 1 -1)) (hvp-RR h (list 0.3 1.2) (list 1 -1))
            ((hessian (lambda (l) (fold-left (lambda (a x) (+ a (* x (* x x)))) 0.0 l))) (list 1.0 2.0 3.0))
            ((jacobian-R (lambda (l) (map (lambda (x) (* x (car l))) l))) (list 1.0 2.0))
            ((jacobian-F (lambda (l) (map (lambda (x) (* x (car l))) l))) (list 1.0 2.0))
            (jvp (lambda (p) (cons (* (car p) (cdr p)) (zero p))) (cons 2.0 3.0) (cons 1.0 0.5))
            (hvp (lambda (l) (fold-left (lambda (a x) (+ a (/ (sin x) (- 3.0 (cos (sqrt (exp (log (* x x))))))))) 0.0 l))
                 (list 0.5 1.5) (list 1.0 -2.0))
            (hvp (lambda (l) (atan (car l) (- (cadr l) (* 2 (car l))))) (list 0.5 1.5) (list 1 -2))
            (hvp (lambda (l) (* (car l) (car l))) (list 3 4) (list 1 1))
            ((derivative-R (derivative-F g)) 1) ((derivative-R (derivative-F g)) 5)
            ((derivative-R (derivative-F (lambda (x) (+ (sqrt (* 2 x)) (- (/ 1 x) (cos (* x x))))))) 3)
            ((gradient-R (lambda (p) ((derivative-F (lambda (t) (h (list (* t (car p)) (cadr p))))) 1.0)))
             (list 0.3 1.2))
            ((gradient-R (lambda (p) ((derivative-F (lambda (t) (h (list (* t (car p)) (- (cadr p) t))))) 2)))
             (list 3 1))
            ((derivative-R (derivative-R (derivative-F f))) 0.7) ((derivative-F (derivative-R (derivative-F f))) 0.7)
            ((derivative-R (derivative-F (derivative-F f))) 0.7)
            ;; forward mode three and four deep (their operations on doubles
            ;; unboxed once past the exact seeds: `native::L2`)
            ((derivative-F (derivative-F (derivative-F f))) 0.7)
            ((derivative-F (derivative-F (derivative-F (derivative-F f)))) 0.7)
            ((derivative-F (derivative-F (derivative-F
              (lambda (x) (let ((y (sin x)))
                            (+ (* y (exp y)) (- (/ (sqrt (+ 2.0 (* y y))) (+ 1.0 y)) (atan y (cos (log (+ 2.0 y)))))))))))
             0.7)
            ((derivative-F (derivative-F (derivative-F g))) 5)
            ((derivative-R (derivative-R g)) 5) ((derivative-R (derivative-R (derivative-R f))) 0.7)
            (hvp-RR (lambda (l) (fold-left (lambda (a x) (+ a (/ (sin x) (- 3.0 (cos (sqrt (exp (log (* x x))))))))) 0.0 l))
                    (list 0.5 1.5) (list 1.0 -2.0))
            (hvp-RR (lambda (l) (atan (car l) (- (cadr l) (* 2 (car l))))) (list 0.5 1.5) (list 1 -2))
            (hvp-RR (lambda (l) (* (car l) (car l))) (list 3 4) (list 1 1))
            ((gradient-R (lambda (l) (car ((gradient-R (lambda (m) (* (car m) (* (cadr m) (car l))))) l))))
             (list 2.0 3.0))
            ;; sensitivities of closures that capture values, signed zeros, exact
            ;; integers, and lists longer than the forward tag operations take at once
            (hvp (lambda (l) (let ((k 2.0)) (fold-left (lambda (a x) (+ a (* k (* x (* x x))))) 0.0 l)))
                 (list 1.0 -2.0 0.5) (list 1.0 1.0 -0.0))
            (hvp (lambda (l) (let ((c (car l))) (fold-left (lambda (a x) (+ a (* c (* x x)))) 0 l)))
                 (list 1.5 -0.0 2.0) (list -0.0 1 2))
            (hvp (lambda (l) (fold-left (lambda (a x) (+ a (* x (* x x)))) 0.0 l))
                 (iota 20) (map (lambda (i) (- 1.0 (* 0.1 i))) (iota 20))))";
    let run_rr = |native: bool, rr: bool, metered: bool| {
        let mut s = session();
        s.m.native_rules = native;
        s.m.native_rr = rr;
        if metered {
            s.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
        }
        let v = run_in(&mut s, "native", program);
        let out: Vec<String> = v.iter().map(vlad::print::to_string).collect();
        (out, (s.m.meter.take().unwrap_or_default(), s.m.steps(), s.m.ad_work))
    };
    let run_with = |native: bool, metered: bool| {
        let (out, (ops, _, _)) = run_rr(native, true, metered);
        (out, ops)
    };
    let (native, native_ops) = run_with(true, true);
    let (interpreted, interpreted_ops) = run_with(false, true);
    assert_eq!(native, interpreted);
    // Reverse over reverse (`ad::native_rr`): the steps it fuses give the same
    // values and count the same operations, procedure calls and AD value operations.
    assert_eq!(
        run_rr(true, true, true),
        run_rr(true, false, true),
        "the native reverse-over-reverse steps differ"
    );
    assert_eq!(run_rr(true, true, false).0, run_rr(true, false, false).0);
    // Unmetered, the rules compute on reals as unboxed doubles: the same bits.
    let (unmetered, _) = run_with(true, false);
    assert_eq!(unmetered, interpreted, "the rules on doubles differ");
    assert_eq!(native_ops, interpreted_ops, "the native rules count different operations");
    // and they are the right numbers: the first two against a central difference
    let fd = {
        let f = |x: f64| {
            let a = x * x;
            let b = 3.0 / (x + 1.0);
            let c = (x + 2.0).sqrt() - (0.1 * x).exp();
            a * x.sin() + (b.cos() - ((1.0 + c).ln() + a.atan2(b)))
        };
        let h = 1e-6;
        (f(0.7 + h) - f(0.7 - h)) / (2.0 * h)
    };
    let last = native.last().unwrap();
    let d: Vec<f64> = native[0]
        .trim_matches(|c| c == '(' || c == ')')
        .split(' ')
        .take(2)
        .map(|t| t.parse().unwrap())
        .collect();
    assert!((d[0] - fd).abs() < 1e-6 && (d[1] - fd).abs() < 1e-6, "{:?} vs {fd} ({last})", d);
}

/// The type predicates on transformed values, natively (`Native::ShapeF`,
/// `ShapeR`; `real?` and `boolean?` look through the tag of a leaf) and by their
/// interpreted rules: the same answers in every nesting, and the right ones. f(x) = x * code, where code has one bit
/// per predicate and value, so f' = code.
#[test]
fn type_predicates_under_every_nesting() {
    let defs = "
      (define (bits v) (list (real? v) (boolean? v) (null? v) (pair? v) (procedure? v)))
      (define (code l) (fold-left (lambda (a b) (+ (* 2 a) (if b 1 0))) 0 l))
      (define (f x)
        (* x (code (append (bits x) (append (bits #t) (append (bits '()) (append (bits (cons x 1.0))
                           (append (bits (lambda (y) (* x y))) (bits (* x x))))))))))";
    // real? boolean? null? pair? procedure? of x, #t, (), a pair, a closure, a real
    let want = [
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 0, 1],
        [1, 0, 0, 0, 0],
    ]
    .iter()
    .flatten()
    .fold(0u64, |a, b| 2 * a + b);
    let exprs: Vec<(String, String)> =
        nestings(1, "f").into_iter().chain(nestings(2, "(lambda (x) (* x (f x)))")).collect();
    let run_with = |native: bool| {
        let mut s = session();
        s.m.native_rules = native;
        run_in(&mut s, "defs", defs);
        exprs
            .iter()
            .map(|(_, e)| {
                let v = run_in(&mut s, "expr", &format!("({e} 1.5)"));
                num(v.last().unwrap())
            })
            .collect::<Vec<f64>>()
    };
    let native = run_with(true);
    assert_eq!(native, run_with(false));
    for ((label, _), got) in exprs.iter().zip(&native) {
        // d/dx x*code = code; d2/dx2 x^2*code = 2 code
        let expect = if label.len() == 1 { want as f64 } else { 2.0 * want as f64 };
        assert_eq!(*got, expect, "{label}");
    }
}

#[test]
fn value_predicates_under_every_nesting() {
    // `vector?` and `vec-length` (rules of kind Predicate: their versions apply
    // the primitive to the value as it is) under every nesting to depth 2,
    // natively and by the interpreted rules: x * (4 + 0 + 3).
    let defs = "
      (define (g x)
        (* x (+ (if (vector? (vector-of (list 1.0 2.0))) 4 0)
                (+ (if (vector? x) 100 0) (vec-length (vector-of (list 1.0 2.0 3.0)))))))";
    let exprs: Vec<(String, String)> =
        nestings(1, "g").into_iter().chain(nestings(2, "(lambda (x) (* x (g x)))")).collect();
    let run_with = |native: bool| {
        let mut s = session();
        s.m.native_rules = native;
        run_in(&mut s, "defs", defs);
        exprs
            .iter()
            .map(|(_, e)| num(run_in(&mut s, "expr", &format!("({e} 1.5)")).last().unwrap()))
            .collect::<Vec<f64>>()
    };
    let native = run_with(true);
    assert_eq!(native, run_with(false));
    for ((label, _), got) in exprs.iter().zip(&native) {
        // d/dx 7x = 7; d2/dx2 7x^2 = 14
        assert_eq!(*got, if label.len() == 1 { 7.0 } else { 14.0 }, "{label}");
    }
}

#[test]
fn hvp_of_a_sum_of_cubes_over_a_list_is_six_x() {
    // Forward over reverse through `fold-left`: the sensitivity tuples of its
    // backpropagators (pairs, closures, long lists) go through the forward
    // versions of the tag operations and `plus` (`ad::native::struct_f_tree`,
    // `plus_f_tree`). H = diag(6 x_i), so H times ones is 6 x_i, exactly.
    let program = "
      (define (f l) (fold-left (lambda (acc x) (+ acc (* (* x x) x))) 0.0 l))
      (define xs (map (lambda (i) (/ (* 1.0 i) 8)) (iota 40)))
      (list (hvp f xs (map (lambda (x) 1.0) xs)) (map (lambda (x) (* 6.0 x)) xs))";
    for native in [true, false] {
        let mut s = session();
        s.m.native_rules = native;
        let v = run_in(&mut s, "hvp", program);
        let out = vlad::print::to_string(v.last().unwrap());
        let inner = out.trim_start_matches("((").trim_end_matches("))");
        let (got, want) = inner.split_once(") (").unwrap();
        assert_eq!(got, want, "native rules: {native}");
    }
}

#[test]
fn forward_tag_operations_on_aggregates_agree_with_their_definitions() {
    // The forward versions of the tag primitives are lazy on pairs (a pending
    // `LazyOp::FTag`/`FUntag`, expanded one level at a time, and the untag of
    // a tag cancelling); with the native rules off they run by their
    // definitions (primal, tag, tangent, bundle). Same values and the same errors.
    let defs = "
      (define fx (bundle (list 1.0 (cons 2.0 -0.0) '()) (perturb (list 0.5 (cons -1.0 3) '()))))
      (define g (let ((k 2.0) (l (list 1.0 2.0))) (lambda (x) (* k (+ x (cadr l))))))
      (define fg (bundle g (perturb (zero g))))
      (define (fs v) ((j* sensitize) v))
      (define (fu v) ((j* unsensitize) v))";
    let exprs = [
        "(list (primal (fu (fs fx))) (tangent (fu (fs fx))))",
        "(let ((y (fs fx))) (list (unsensitize (primal y)) (unperturb (tangent y))))",
        "(let ((y ((j* *j) (fs fx)))) (list (*j-inverse (unsensitize (car (primal y)))) (cdr (primal y))))",
        "(primal ((fu (fs fg)) (bundle 3.0 (perturb 1.0))))",
        "(tangent ((fu (fs fg)) (bundle 3.0 (perturb 1.0))))",
        "(car (primal (fu fx)))",
        "(car (primal ((j* *j-inverse) (fs fx))))",
        "(fu fg)",
    ];
    let run_with = |native: bool| -> Vec<String> {
        let mut s = session();
        s.m.native_rules = native;
        run_in(&mut s, "defs", defs);
        exprs
            .iter()
            .map(|e| match s.run_text("expr", e) {
                Ok(v) => vlad::print::to_string(v.last().unwrap()),
                Err(e) => format!("error: {}", e.message),
            })
            // (variable numbers depend on the session's counter)
            .map(|t| {
                let mut out = String::new();
                let mut digits_after_underscore = false;
                for c in t.chars() {
                    if c.is_ascii_digit() && digits_after_underscore {
                        continue;
                    }
                    digits_after_underscore = c == '_';
                    out.push(c);
                }
                out
            })
            .collect()
    };
    let (native, interpreted) = (run_with(true), run_with(false));
    assert_eq!(native, interpreted);
    assert!(native[0].contains("-0.0"), "{}", native[0]);
    assert!(native[5].starts_with("error: unsensitize"), "{}", native[5]);
    assert!(native[7].starts_with("error: unsensitize"), "{}", native[7]);
}

/// Reverse over forward of each scalar primitive (`(*j (j* p))`, compiled from
/// the primitive's second-order rule, `rules::rf_source`) against the reverse
/// transform of its forward version written out as a procedure here (with the
/// textbook tangent): the same result bundle, and the same sensitivities of the
/// argument and of its tangent for a sensitivity of the result bundle with both
/// parts nonzero; with the native rules and without, exact and inexact.
#[test]
fn second_order_rules_agree_with_transformed_forward_versions() {
    // (primitive, tangent of y = (p x) along d, written with x/x1 x2, y, d/d1 d2)
    let unary: &[(&str, &str)] = &[
        ("sqrt", "(/ d (* 2 y))"),
        ("exp", "(* d (exp x))"),
        ("log", "(/ d x)"),
        ("sin", "(* d (cos x))"),
        ("cos", "(- 0 (* (sin x) d))"),
    ];
    let binary: &[(&str, &str)] = &[
        ("+", "(+ d1 d2)"),
        ("-", "(- d1 d2)"),
        ("*", "(+ (* x1 d2) (* x2 d1))"),
        ("/", "(/ (- (* d1 x2) (* x1 d2)) (* x2 x2))"),
        ("atan", "(/ (- (* x2 d1) (* x1 d2)) (+ (* x1 x1) (* x2 x2)))"),
    ];
    let mut src = String::from(
        "(define (run f arg s)
           (let* ((r ((*j f) (*j arg)))
                  (vb (cdr (unsensitize ((cdr r) (sensitize s))))))
             (list (*j-inverse (car r)) vb)))\n",
    );
    let mut labels = Vec::new();
    for (p, dy) in unary {
        src.push_str(&format!(
            "(define (f-{p} v) (let* ((x (primal v)) (d (unperturb (tangent v))) (y ({p} x))) (bundle y (perturb {dy}))))\n"
        ));
        for (x, d, yb, db) in
            [("0.7", "1.3", "0.4", "-2.5"), ("2", "3", "1", "-1"), ("1.9", "-0.2", "0", "1.5")]
        {
            let arg = format!("(bundle {x} (perturb {d}))");
            let s = format!("(bundle {yb} (perturb {db}))");
            src.push_str(&format!("(run (j* {p}) {arg} {s})\n(run f-{p} {arg} {s})\n"));
            labels.push(format!("{p} at {arg}, sensitivity {s}"));
        }
    }
    for (p, dy) in binary {
        src.push_str(&format!(
            "(define (f-{p} v) (let* ((x (primal v)) (x1 (car x)) (x2 (cdr x)) (d (unperturb (tangent v)))
                                      (d1 (car d)) (d2 (cdr d)) (y ({p} x1 x2)))
                                 (bundle y (perturb {dy}))))\n"
        ));
        for (x1, d1, x2, d2, yb, db) in [
            ("0.7", "1.3", "-1.9", "0.6", "0.4", "-2.5"),
            ("2", "1", "3", "-1", "1", "2"),
            ("1.5", "0", "0.5", "2.0", "0", "1"),
        ] {
            let arg = format!("(cons (bundle {x1} (perturb {d1})) (bundle {x2} (perturb {d2})))");
            let s = format!("(bundle {yb} (perturb {db}))");
            src.push_str(&format!("(run (j* {p}) {arg} {s})\n(run f-{p} {arg} {s})\n"));
            labels.push(format!("{p} at {arg}, sensitivity {s}"));
        }
    }
    // the parts of (list (bundle y (perturb dy)) sensitivity) as numbers
    let parts = |v: &vlad::value::Value| -> Vec<f64> {
        let text = vlad::print::to_string(v);
        text.replace(['(', ')'], " ").split_whitespace().filter_map(|t| t.parse::<f64>().ok()).collect()
    };
    for native in [true, false] {
        let mut s = session();
        s.m.native_rules = native;
        let v = run_in(&mut s, "second-order", &src);
        assert_eq!(v.len(), 2 * labels.len());
        for (k, label) in labels.iter().enumerate() {
            let (rule, transformed) = (parts(&v[2 * k]), parts(&v[2 * k + 1]));
            assert!(
                rule.len() >= 4 && rule.len() == transformed.len(),
                "{label}: {rule:?} vs {transformed:?}"
            );
            assert_all_close(&rule, &transformed, 1e-13, &format!("{label} (native rules: {native})"));
        }
    }
}

/// The untagged entries of backpropagators (`resolve::Untagged`): code whose
/// procedures' backpropagators are called by the reverse transform's code (and
/// by its forward transform) gives the same values, primitive operations and
/// procedure calls with them as step by step, with fewer AD value operations
/// (the skipped `sensitize`/`unsensitize` pairs: so the entries did run).
#[test]
fn untagged_backpropagator_entries_agree_with_the_steps_they_skip() {
    let program = "
      (define (prod x i) (if (> i 6) 1.0 (* (+ 1.0 (/ x i)) (prod x (+ i 1)))))
      (define (sq x) (* x x))
      (define (f x) (let* ((a (sq x)) (k (lambda (y) (+ (sq y) (* a y))))) (k (sin (prod x 1)))))
      (define (h p) (let ((x (car p)) (y (cadr p))) (+ (f x) (* (sq y) (prod y 2)))))
      (define (bp s) (sensitize (+ 1 (unsensitize s))))
      (list ((derivative-R f) 0.7) ((derivative-F f) 0.7)
            ((derivative-F (derivative-R f)) 0.7) ((derivative-R (derivative-F f)) 0.7)
            ((derivative-R (derivative-R f)) 0.7) ((derivative-F (derivative-F f)) 0.7)
            ((gradient-R h) (list 0.3 1.2)) (hvp h (list 0.3 1.2) (list 1 -1))
            (hvp-RR h (list 0.3 1.2) (list 1 -1))
            ((derivative-R (derivative-R (derivative-R f))) 0.4)
            ((derivative-F (derivative-R (derivative-R f))) 0.4)
            (unsensitize (bp (sensitize 41))))";
    let run = |on: bool| {
        let mut s = session();
        s.m.untagged_entries = on;
        s.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
        let v = run_in(&mut s, "entries", program);
        let out: Vec<String> = v.iter().map(vlad::print::to_string).collect();
        (out, s.m.meter.take().unwrap_or_default(), s.m.steps(), s.m.ad_work)
    };
    let (on, off) = (run(true), run(false));
    assert_eq!(on.0, off.0, "values");
    assert_eq!(on.1, off.1, "primitive operations");
    assert_eq!(on.2, off.2, "procedure calls");
    assert!(on.3 < off.3, "AD value operations: {} with the entries, {} without", on.3, off.3);
}

/// Every test above again, with the prelude's `jvp`/`vjp` run by the closure
/// transforms only (as `--no-tape`): the tests above run them on dual numbers
/// and tapes. (A new test above belongs in this list too.)
#[test]
fn all_of_the_above_by_the_transform() {
    by_transform(&[
        unary_primitives,
        binary_primitives,
        exact_arguments,
        comparisons_and_predicates_are_flat,
        identity_rules_print_primal,
        type_predicates_under_ad,
        native_rules_agree_with_the_interpreted_rules,
        type_predicates_under_every_nesting,
        value_predicates_under_every_nesting,
        hvp_of_a_sum_of_cubes_over_a_list_is_six_x,
        forward_tag_operations_on_aggregates_agree_with_their_definitions,
        second_order_rules_agree_with_transformed_forward_versions,
        untagged_backpropagator_entries_agree_with_the_steps_they_skip,
    ]);
}
