//! Dual numbers and tapes (`vlad::ad::tape`): the prelude's `jvp` and `vjp`
//! (and so every derivative, gradient and Hessian helper) run the function on
//! active reals when they can and by the closure transforms otherwise, with the
//! same values, output and errors either way (but for a list primitive's
//! misuse, which a level reports in the primitive's words: see
//! `a_list_primitives_misuse_is_the_primitives_error`); levels nest in every
//! mix of modes.

use crate::common::*;
use vlad::error::ErrorKind;
use vlad::toplevel::Session;

fn session_with(tape: bool) -> (Session, Out) {
    let mut s = session();
    s.m.tape.enabled = tape;
    let out = Out::default();
    s.m.out = Box::new(out.clone());
    (s, out)
}

/// What running `src` gives: its values printed, its output, or its error
/// rendered; and the session, to look at its counts.
fn outcome(src: &str, tape: bool) -> (String, Session) {
    let (mut s, out) = session_with(tape);
    let r = match s.run_text("t", src) {
        Ok(vs) => vs.iter().map(vlad::print::to_string).collect::<Vec<_>>().join("\n"),
        Err(e) => format!("error: {}", e.render(&s.sources)),
    };
    let printed = out.text();
    (format!("{printed}{r}"), s)
}

/// Runs `src` both ways; the outcomes must be the same text. Returns it and
/// the tape session's (runs, runs that gave way), not counting the runs that
/// gave way only because an exact cotangent might be the transform's inexact
/// one (`d(2x)/dx` at 1.0: see `exactness_may_differ`).
fn alike(src: &str) -> (String, u64, u64) {
    let (a, s) = outcome(src, true);
    let (b, _) = outcome(src, false);
    assert_eq!(a, b, "on the tape and by the transform, for:\n{src}");
    let t = &s.m.tape;
    (a, t.runs + t.exactness_declined, t.declined_runs - t.exactness_declined)
}

/// Runs each case both ways (`alike`): every one must run on levels, none
/// giving way, and where a closed form is given print it (a single inexact
/// number within `tol` of it, relative; anything else exactly as printed).
fn on_levels_alike<'a>(cases: impl IntoIterator<Item = (&'a str, Option<&'a str>)>, tol: f64) {
    for (src, want) in cases {
        let (got, runs, declined) = alike(src);
        if let Some(w) = want {
            match (got.parse::<f64>(), w.parse::<f64>()) {
                (Ok(g), Ok(v)) if w.contains('.') => assert_close(g, v, tol, src),
                _ => assert_eq!(got, w, "{src}"),
            }
        }
        assert!(runs > 0 && declined == 0, "{src}: {runs} runs on levels, {declined} gave way");
    }
}

#[test]
fn values_print_alike_and_match_closed_forms() {
    let cases: &[(&str, &str)] = &[
        // 2x^2 + 3xy + 4y^2 at (3, 4): (4x + 3y, 3x + 8y), exact at exact arguments
        ("((gradient-R (lambda (l) (+ (* 2 (* (car l) (car l))) (+ (* 3 (* (car l) (cadr l))) (* 4 (* (cadr l) (cadr l))))))) (list 3 4))", "(24 41)"),
        ("((gradient-F (lambda (l) (+ (* 2 (* (car l) (car l))) (+ (* 3 (* (car l) (cadr l))) (* 4 (* (cadr l) (cadr l))))))) (list 3 4))", "(24 41)"),
        // its Hessian (4 3; 3 8) times (7 8)
        ("(hvp (lambda (l) (+ (* 2 (* (car l) (car l))) (+ (* 3 (* (car l) (cadr l))) (* 4 (* (cadr l) (cadr l)))))) (list 3 4) (list 7 8))", "(52 85)"),
        ("(hvp-RR (lambda (l) (+ (* 2 (* (car l) (car l))) (+ (* 3 (* (car l) (cadr l))) (* 4 (* (cadr l) (cadr l)))))) (list 3 4) (list 7 8))", "(52 85)"),
        // exactness as the transform gives it: d(2x)/dx = 2 exactly, even at 1.0
        ("((derivative-R (lambda (x) (* 2 x))) 1.0)", "2"),
        // (forward: the constant's tangent 0 times 1.0 is 0.0, so 0.0 + 2 = 2.0)
        ("((derivative-F (lambda (x) (* 2 x))) 1.0)", "2.0"),
        ("((derivative-R (lambda (x) 5)) 1.0)", "0.0"),
        ("((derivative-F (lambda (x) 5)) 1)", "0"),
        ("((gradient-R (lambda (l) (* 2 (car l)))) (list 1.0 2.0 3))", "(2 0.0 0)"),
        // d/dx 1/x = -1/x^2 (VLAD's / of integers that do not divide is a real),
        // d/dx sqrt(x) = 1/(2 sqrt x)
        ("((derivative-R (lambda (x) (/ 1 x))) 4)", "-0.0625"),
        ("((derivative-R sqrt) 4)", "0.25"),
        // vjp and value-and-vjp of (x^2, sin x) at 2 with (1, 1): 2x + cos x
        ("(vjp (lambda (x) (list (* x x) (sin x))) 2.0 (list 1.0 1.0))", &format!("{}", 4.0 + 2.0f64.cos())),
        ("(value-and-vjp (lambda (x) (list (* x x) (sin x))) 2.0 (list 1.0 0.0))", &format!("((4.0 {}) . 4.0)", 2.0f64.sin())),
        // the paper's identity through a closure, and a branch
        ("((derivative-R (lambda (a) (((lambda (b) (lambda (c) b)) a) 1))) 4)", "1"),
        ("((derivative-R (lambda (x) (if (< x 0) (- 0 x) x))) -3)", "-1"),
        // d/dx atan(x, 2) = 2 / (x^2 + 4)
        ("((derivative-R (lambda (x) (atan x 2.0))) 1.0)", "0.4"),
        // third derivative of exp in a mix of modes
        ("((derivative-F (derivative-R (derivative-F exp))) 1)", &format!("{}", 1f64.exp())),
        // gradient-F over any shape of pairs, () and booleans: d(x z)/d(x, b, z) = (z, b, x),
        // and d(a d)/d((a) . d) = ((d) . a)
        ("((gradient-F (lambda (l) (* (car l) (caddr l)))) (list 3.0 #t 4))", "(4.0 #t 3.0)"),
        ("((gradient-F (lambda (l) (* (car (car l)) (cdr l)))) (cons (list 2.0) 5.0))", "((5.0) . 2.0)"),
        ("((derivative-R (lambda (x) (car ((gradient-F (lambda (l) (* x (* (car l) (car l))))) (list x 2.0))))) 5.0)", "20.0"),
        // Jacobians of (x y, sin x) at (1, 2): ((y x) (cos x 0))
        ("((jacobian-R (lambda (l) (list (* (car l) (cadr l)) (sin (car l))))) (list 1.0 2.0))", &format!("((2.0 1.0) ({} 0.0))", 1f64.cos())),
        ("((jacobian-F (lambda (l) (list (* (car l) (cadr l)) (sin (car l))))) (list 1.0 2.0))", &format!("((2.0 1.0) ({} 0.0))", 1f64.cos())),
    ];
    on_levels_alike(cases.iter().map(|&(src, want)| (src, Some(want))), 1e-13);
}

/// The backward sweep's own rules for the commonest nodes (`+ - * /` on
/// doubles, their sensitivity a double, an exact integer or, forward over
/// reverse, a dual: `plain_node`) against closed forms and the transform.
/// f(x, y) = x/y - xy + x at (3, 2): ∇f = (1/y - y + 1, -x/y² - x) =
/// (-0.5, -3.75); its Hessian ((0, -1/y² - 1), (-1/y² - 1, 2x/y³)) times
/// (1, 1) is (-1.25, -0.5). And a tape long enough that a node's two kept
/// values lie in different chunks of its store: g(x) = Π (1 + x/i), i = 1..3000,
/// g'(x) = g(x) Σ 1/(i + x) at 0.5. And a longer one (9000 nodes, past the
/// sweep's checks of the limits and its store's chunks) whose runs of such
/// nodes are broken by others (`/` by an exact integer) and hold nodes no
/// sensitivity reaches: a(i+1) = a(i) (1 + x/i) - y/i from a(1) = 1, for
/// i = 1..1500, at (0.5, 0.25), against the forward recurrences of its
/// derivatives, da(i+1) = da(i) (1 + x/i) + a(i)/i (in x) and
/// db(i+1) = db(i) (1 + x/i) - 1/i (in y).
#[test]
fn the_sweeps_double_rules_give_the_closed_forms() {
    let f = "(lambda (l) (let ((x (car l)) (y (cadr l))) (+ (- (/ x y) (* x y)) x)))";
    let (n, x) = (3000, 0.5f64);
    let g: f64 = (1..=n).map(|i| 1.0 + x / i as f64).product();
    let dg = g * (1..=n).map(|i| 1.0 / (i as f64 + x)).sum::<f64>();
    let product = format!(
        "(define (p x i) (if (> i {n}) 1.0 (* (+ 1.0 (/ x i)) (p x (+ i 1))))) ((derivative-R (lambda (x) (p x 1))) {x})"
    );
    let (m, y) = (1500, 0.25f64);
    let (mut a, mut da, mut db) = (1.0f64, 0.0f64, 0.0f64);
    for i in 1..=m {
        let i = i as f64;
        (a, da, db) = (a * (1.0 + x / i) - y / i, da * (1.0 + x / i) + a / i, db * (1.0 + x / i) - 1.0 / i);
    }
    let chain = format!(
        "(define (q x y i a) (if (> i {m}) a (let ((unused (* y a))) (q x y (+ i 1) (- (* a (+ 1.0 (/ x i))) (/ y i))))))\n\
         (define dq (gradient-R (lambda (l) (q (car l) (cadr l) 1 1.0))))"
    );
    let cases = [
        (format!("(car ((gradient-R {f}) (list 3.0 2.0)))"), "-0.5".to_string()),
        (format!("(cadr ((gradient-R {f}) (list 3.0 2.0)))"), "-3.75".to_string()),
        (format!("(car (hvp {f} (list 3.0 2.0) (list 1.0 1.0)))"), "-1.25".to_string()),
        (format!("(cadr (hvp {f} (list 3.0 2.0) (list 1.0 1.0)))"), "-0.5".to_string()),
        // (an exact seed scaled by a rule: d(x · y/2)/d(x, y) = (y/2, x/2))
        (
            "((gradient-R (lambda (l) (* (car l) (/ (cadr l) 2.0)))) (list 3.0 4.0))".to_string(),
            "(2.0 1.5)".to_string(),
        ),
        (product, format!("{dg}")),
        (format!("{chain} (car (dq (list {x} {y})))"), format!("{da}")),
        (format!("{chain} (cadr (dq (list {x} {y})))"), format!("{db}")),
        // (exact sensitivities through `+` and `-` of two, the seed 1 first:
        // d(0 - (2 - (u^2 + v^2))) = (2u, 2v); d(u - (v + u)) = (0, -1),
        // d((u - v) - (v - u)) = (2, -2), d(u + (2 - v)) = (1, -1), exactly)
        (
            "((gradient-R (lambda (l) (- 0.0 (- (+ 1.0 1.0) (+ (* (car l) (car l)) (* (cadr l) (cadr l))))))) (list 3.0 4.0))"
                .to_string(),
            "(6.0 8.0)".to_string(),
        ),
        ("((gradient-R (lambda (l) (- (car l) (+ (cadr l) (car l))))) (list 3.0 4.0))".to_string(), "(0 -1)".to_string()),
        (
            "((gradient-R (lambda (l) (- (- (car l) (cadr l)) (- (cadr l) (car l))))) (list 3.0 4.0))".to_string(),
            "(2 -2)".to_string(),
        ),
        ("((gradient-R (lambda (l) (+ (car l) (- 2.0 (cadr l))))) (list 3.0 4.0))".to_string(), "(1 -1)".to_string()),
    ];
    on_levels_alike(cases.iter().map(|(src, want)| (src.as_str(), Some(want.as_str()))), 1e-12);
}

/// d/dx (x * d/dy (x + y)) = 1 (no perturbation confusion) and
/// d/dx ((d/dy x y^2) at y = x) = d/dx 2x^2 = 4x, in all four nestings, each
/// derivative on its own level.
#[test]
fn nested_levels_in_every_mix() {
    for outer in ["derivative-F", "derivative-R"] {
        for inner in ["derivative-F", "derivative-R"] {
            let src = format!(
                "(({outer} (lambda (x) (* x (({inner} (lambda (y) (+ x y))) 1)))) 1)\n\
                 (({outer} (lambda (x) (({inner} (lambda (y) (* x (* y y)))) x))) 3.0)"
            );
            let (got, runs, declined) = alike(&src);
            assert_eq!(got, "1\n12.0", "{outer} of {inner}");
            assert_eq!((runs, declined), (4, 0), "{outer} of {inner}: runs on levels, runs that gave way");
        }
    }
}

/// A gradient inside a gradient, in all four nestings, over a list whose
/// reals are the outer level's (and a constant) and of which only the first
/// gets a sensitivity: the inner gradient's one-hot tangents (forward) and
/// the zeros of the other reals (reverse: on the outer tape) are the
/// transform's. d/dw of the inner gradient's sum, (2w + 0 + 0), is 2.
#[test]
fn nested_gradients_over_lists_with_unused_reals() {
    let mut cases = Vec::new();
    for outer in ["gradient-F", "gradient-R"] {
        for inner in ["gradient-F", "gradient-R"] {
            cases.push(format!(
                "(({outer} (lambda (w) (let ((g (({inner} (lambda (x) (* (car x) (car x))))\n\
                 (list (car w) (* 2.0 (car w)) 3.0))))\n\
                 (+ (car g) (+ (cadr g) (caddr g)))))) (list 1.5))"
            ));
        }
    }
    on_levels_alike(cases.iter().map(|c| (c.as_str(), Some("(2.0)"))), 0.0);
}

/// An inner gradient whose primal result, a real of the outer tape (it holds
/// `x`), is dropped, after its sweep recorded on the outer tape (the rule of
/// `*` multiplies by `x y`): the outer sweep runs with a dropped result noted,
/// its other nodes (`g g`, `sin x`, `3 x`: doubles) by the commonest node's
/// steps. The inner f(y) = k x y^2 has df/dy = 2kxy, at y = 2x: g = 4kx^2, so
/// d/dx (g^2 + sin x) = 64k^2 x^3 + cos x, d/dx (g^2 + 3x) = 64k^2 x^3 + 3, with
/// the exactness the transform gives (the dropped result's zeros) at an exact
/// x and an inexact one, and with the inner derivative in each mode.
#[test]
fn dropped_inner_results_and_the_outer_sweeps_doubles() {
    let mut cases = Vec::new();
    for inner in ["gradient-R", "gradient-F"] {
        // (k the factor of f: 1 exact, or 0.5, whose sensitivities on the
        // outer tape are doubles; g = 4k x^2, d/dx g^2 = 64k^2 x^3)
        for (k, kf) in [("1", 1.0), ("0.5", 0.5)] {
            let c = 64.0 * kf * kf;
            for (x, tail, want) in [
                ("1.5", "(sin (car x))", Some(c * 1.5f64.powi(3) + 1.5f64.cos())),
                ("1.5", "(* 3 (car x))", Some(c * 1.5f64.powi(3) + 3.0)),
                ("2", "(* 3 (car x))", None),
                ("2", "(* 3.0 (car x))", None),
            ] {
                let src = format!(
                    "(car ((gradient-R (lambda (x) (let ((g (car (({inner} (lambda (y) (* {k} (* (car x) (* (car y) (car y))))))\n\
                     (list (* 2 (car x)))))))\n\
                     (+ (* g g) {tail})))) (list {x})))"
                );
                cases.push((src, want.map(|w| format!("{w:?}"))));
            }
        }
    }
    on_levels_alike(cases.iter().map(|(c, w)| (c.as_str(), w.as_deref())), 1e-14);
    // The dropped result's reals (`SOURCE`) take the sweep's general steps: with
    // v = (1/4, 3) and the inner f(v) = sqrt(1 - u1 v1 / 2) + sqrt(1 - u2 v2 / 2),
    // whose second term is NaN at u = v, d/du of df/dv1 = -(u1/4) (1 - u1 v1/2)^(-1/2)
    // is (-(1/s + u1 v1 / (4 s^3)) / 4, 0) with s = sqrt(1 - u1 v1 / 2): 0.0 on the
    // tape, which follows no zero into the NaN (the transform's reads +nan.0 there,
    // a corner the README describes).
    let (got, _) = outcome(
        "((gradient-R (lambda (u) (car ((gradient-R (lambda (v) (reduce + 0.0 (map (lambda (e) (sqrt (+ 1.0 (* -0.5 e))))\n\
         (map2 * u v))))) (list 0.25 3))))) (list 0.25 3))",
        true,
    );
    let s = (1.0f64 - 0.25 * 0.25 / 2.0).sqrt();
    let want = -(1.0 / s + 0.25 * 0.25 / (4.0 * s.powi(3))) / 4.0;
    let parts: Vec<&str> = got.trim_matches(|c| c == '(' || c == ')').split(' ').collect();
    assert_eq!(parts.len(), 2, "{got}");
    assert_close(parts[0].parse().unwrap_or(f64::NAN), want, 1e-14, &got);
    assert_eq!(parts[1], "0.0", "{got}");
}

/// A function that writes runs by the transform (nothing with an effect runs
/// on a tape), so its output appears once; the second call of the same
/// function does not try the tape again: fewer multiplications, by what the
/// first call's attempt did before `write` (x x on the tape: one; on a dual
/// number: one and the two of its tangent, d x + x d). Of seven calls, the
/// first, third and sixth try it (after each decline the function waits 1, 2,
/// 4... calls).
#[test]
fn effects_run_once_and_a_declined_function_is_not_tried_again() {
    for (d, attempt) in [("derivative-R", 1), ("derivative-F", 3)] {
        let src = format!("(define (f x) (let* ((a (* x x)) (u (write a))) a))\n(({d} f) 3.0)");
        let (got, runs, declined) = alike(&src);
        assert_eq!(got, "9.0\n6.0", "{d}");
        assert_eq!((runs, declined), (0, 1), "{d}");
        let (mut s, out) = session_with(true);
        run_in(&mut s, "defs", "(define (f x) (let* ((a (* x x)) (u (write a))) a))");
        let mut muls = Vec::new();
        for _ in 0..7 {
            s.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
            run_in(&mut s, "call", &format!("(({d} f) 3.0)"));
            let mul = vlad::prims::lookup("*").unwrap() as usize;
            muls.push(s.m.meter.take().unwrap()[mul]);
        }
        let tried: Vec<usize> = (0..7).filter(|k| muls[*k] == muls[1] + attempt).collect();
        assert_eq!(tried, [0, 2, 5], "{d}: the calls that tried the tape ({muls:?})");
        assert!((0..7).all(|k| tried.contains(&k) || muls[k] == muls[1]), "{d}: {muls:?}");
        assert_eq!(out.text(), "9.0\n".repeat(7), "{d}");
        assert_eq!((s.m.tape.runs, s.m.tape.declined_runs), (0, 7), "{d}");
    }
}

/// A function that gave way once, on a rare branch (a `write`), runs on a
/// tape again after its next call: of five calls at 1, -1, 1, 1, 1, the
/// second gives way, the third waits, the others run on a tape, with the
/// transform's values (x³ + 1, derivative 3x²).
#[test]
fn a_function_that_gave_way_once_returns_to_the_tape() {
    for d in ["derivative-R", "derivative-F"] {
        let (mut s, out) = session_with(true);
        run_in(
            &mut s,
            "defs",
            "(define (f x) (if (< x 0.) (write (+ (* x (* x x)) 1.)) (+ (* x (* x x)) 1.)))",
        );
        let mut got = Vec::new();
        let mut ways = Vec::new();
        for x in ["1.0", "-1.0", "1.0", "1.0", "1.0"] {
            let before = (s.m.tape.runs, s.m.tape.declined_runs);
            got.push(num(&run_in(&mut s, "call", &format!("(({d} f) {x})"))[0]));
            ways.push((s.m.tape.runs - before.0, s.m.tape.declined_runs - before.1));
        }
        assert_eq!(got, [3.0; 5], "{d}");
        assert_eq!(
            ways,
            [(1, 0), (0, 1), (0, 1), (1, 0), (1, 0)],
            "{d}: (on a tape, by the transform) per call"
        );
        assert_eq!(out.text(), "0.0\n", "{d}");
    }
}

/// Vectors, reversible procedures (at a first derivative: see
/// `nested_derivatives_through_reversible_procedures_run_on_levels`) and the AD
/// primitives themselves are not modelled on a tape: those runs give way to the
/// transform, with its values.
#[test]
fn what_a_tape_does_not_model_gives_way() {
    let cases: &[(&str, &str)] = &[
        // a packed vector argument: 2v
        ("((gradient-R (lambda (v) (vec-dot v v))) (vector-of (list 1.0 2.0)))", "(vector 2.0 4.0)"),
        // vectors inside: d/dx (x^2 + x) = 2x + 1
        ("((derivative-R (lambda (x) (vec-dot (vector-of (list x x)) (vector-of (list x 1.0))))) 2.0)", "5.0"),
        ("((derivative-F (lambda (x) (vec-dot (vector-of (list x x)) (vector-of (list x 1.0))))) 2.0)", "5.0"),
        ("((gradient-F (lambda (v) (vec-dot v v))) (vector-of (list 1.0 2.0)))", "(vector 2.0 4.0)"),
        // *j inside: x * (d/dy y^2 at x) = 2x^2, derivative 4x
        ("((derivative-R (lambda (x) (* x ((lambda (g) (cdr (unsensitize ((cdr ((*j g) (*j x))) (sensitize 1))))) (lambda (y) (* y y)))))) 3.0)", "12.0"),
        // a reversible procedure: y += x^2, d/dx = 2x
        ("(define-reversible (p y x) (+= y (* x x)))\n((derivative-R (lambda (x) (car (call p 0.0 x)))) 2.0)", "4.0"),
    ];
    for (src, want) in cases {
        let (got, runs, declined) = alike(src);
        assert!(got.ends_with(want), "{src}: {got}");
        assert!(runs == 0 && declined > 0, "{src}: {runs} runs on the tape, {declined} gave way");
    }
}

/// A derivative of a derivative through a reversible procedure runs its
/// translation on the levels (a first derivative gives way, for the executor's
/// own derivative run), with the transform's values: f(x) = x^2 sum sin u_i
/// read from a list, and g(x) = sum (x sin u_i)^2 through element updates of
/// a list, have f'' = 2 sum sin u_i and g'' = 2 sum sin^2 u_i (u_i = 0.01 i,
/// i < 40; the third derivative of g is 0). Element updates of a packed vector
/// by an active real give way, as does a `write` in the procedure (printed
/// once, by the transform).
#[test]
fn nested_derivatives_through_reversible_procedures_run_on_levels() {
    let defs = "(define-reversible (rd s u x n)\n\
                  (local (i 0) (from-loop (= i 0) (skip) (begin-rev (+= s (* x (sin (ref u i)))) (+= i 1)) (= i n))\n\
                    (delocal i n)))\n\
                (define-reversible (sq s w u x n)\n\
                  (local (i 0) (from-loop (= i 0) (skip)\n\
                    (begin-rev (+= (ref w i) (* x (sin (ref u i)))) (+= s (* (ref w i) (ref w i))) (+= i 1)) (= i n))\n\
                    (delocal i n)))\n\
                (define u (map (lambda (i) (* 0.01 i)) (iota 40)))\n\
                (define w (map (lambda (i) 0.0) (iota 40)))\n\
                (define (f x) (car (call rd 0.0 u (* x x) 40)))\n\
                (define (g x) (car (call sq 0.0 w u x 40)))\n\
                (define (gv x) (car (call sq 0.0 (vector-of w) u x 40)))\n";
    let sins: Vec<f64> = (0..40).map(|i| (0.01 * i as f64).sin()).collect();
    let f2 = 2.0 * sins.iter().sum::<f64>();
    let g2 = 2.0 * sins.iter().map(|s| s * s).sum::<f64>();
    let mut cases = Vec::new();
    for (o, i) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
        cases.push((format!("{defs}((derivative-{o} (derivative-{i} f)) 0.7)"), f2));
        cases.push((format!("{defs}((derivative-{o} (derivative-{i} g)) 0.7)"), g2));
    }
    cases.push((format!("{defs}((derivative-R (derivative-F (derivative-R g))) 0.7)"), 0.0));
    // (a right-hand side that takes a derivative itself: y += d/dz (x z^2) at z =
    // x, so h(x) = 2x^2 and h'' = 4 (-4 uncalled); its levels, started while
    // the procedure is checked on plain values, are not confused with the
    // nested derivatives' own)
    let u4 = "(define-reversible (u4 y x) (+= y ((derivative-R (lambda (z) (* z (* x z)))) x)))\n";
    for (o, i) in [("F", "R"), ("R", "R"), ("R", "F"), ("F", "F")] {
        cases.push((
            format!("{u4}((derivative-{o} (derivative-{i} (lambda (x) (car (call u4 0.0 x))))) 0.6)"),
            4.0,
        ));
        cases.push((
            format!("{u4}((derivative-{o} (derivative-{i} (lambda (x) (car (uncall u4 0.0 x))))) 0.6)"),
            -4.0,
        ));
    }
    for (src, want) in &cases {
        let (got, runs, declined) = alike(src);
        assert_close(got.parse().unwrap(), *want, 1e-10, src);
        assert!(runs > 0 && declined == 0, "{src}: {runs} runs on levels, {declined} gave way");
    }
    for src in [
        format!("{defs}((derivative-R (derivative-R gv)) 0.7)"),
        format!("{defs}((derivative-R g) 0.7)"),
        "(define-reversible (p y x) (+= y (* x x)) (write \"y\" y))\n\
         ((derivative-R (derivative-R (lambda (x) (car (call p 0.0 x))))) 3.0)"
            .to_string(),
    ] {
        let (_, _, declined) = alike(&src);
        assert!(declined > 0, "{src}: gives way");
    }
}

#[test]
fn errors_are_the_transforms() {
    for src in [
        "((derivative-R (lambda (x) (car x))) 1.0)",
        "((derivative-F (lambda (x) (car x))) 1.0)",
        "((gradient-F (lambda (l) l)) (list 1.0 2.0))",
        "((gradient-R (lambda (x) (list x))) 1.0)",
        "(vjp (lambda (x) (list x x)) 2 (list 1))",
        "(jvp (lambda (x) (* x x)) 2.0 (list 1.0))",
        "((derivative-R (lambda (x) (/ x 0))) 1)",
    ] {
        let (got, _, _) = alike(src);
        assert!(got.starts_with("error: "), "{src}: {got}");
    }
}

/// A list primitive misused in the function: on a level the primitive runs
/// and says what is wrong; by the transform its definition (`Rule::Via`)
/// runs and says, in the primitive's name, where the list ends, at the same
/// place, or (`length`, `list-ref`) its versions run the primitive, which says
/// it again. The level's error is reported (the transform's alone with the
/// tape off).
#[test]
fn a_list_primitives_misuse_is_the_primitives_error() {
    for (src, want) in [
        ("((gradient-R (lambda (l) (list-ref l 2))) (list 1.0 2.0))", "list-ref: index 2 is past the end"),
        ("((derivative-F (lambda (x) (list-ref (list x x) -1))) 1.0)", "list-ref: the index must be"),
        ("((derivative-R (lambda (x) (length (cons x x)))) 1.0)", "length: expected a list"),
        ("((derivative-R (lambda (x) (car (append (cons x x) (list x))))) 1.0)", "append: expected a list"),
    ] {
        let (on_tape, _) = outcome(src, true);
        let (by_transform, _) = outcome(src, false);
        assert!(on_tape.starts_with("error: t:1:") && on_tape.contains(want), "{src}: {on_tape}");
        // (`length`'s versions apply it to the transformed list: its own error, showing
        // that list; `list-ref`'s to the untagged list, traced through them)
        let own = if want.starts_with("length") {
            "error: length: expected a list, got ((reverse 1.0)"
        } else if want.starts_with("list-ref") {
            &format!("error: {want}")
        } else {
            "error: append: expected a list, but it ends in 1.0 (a real), not ()"
        };
        assert!(by_transform.contains(own), "{src}: {by_transform}");
    }
    // (an error of the function's own code is the transform's, as ever)
    let (got, _, _) = alike("((derivative-R (lambda (x) (list-ref (car x) 0))) 1.0)");
    assert!(got.contains("pattern mismatch"), "{got}");
}

/// The list walks by the transform (the tape off), misused: each says, in
/// its own name, where its list ends (their definitions' patterns said
/// "pattern mismatch: expected a pair"), in every mode, with the primal of
/// what it ends in; where the whole argument is not a list, in the words of
/// the primitive itself (as on the tape: "expected a list, got #t").
#[test]
fn list_walks_misused_by_the_transform_say_so() {
    for d in ["derivative-R", "derivative-F"] {
        for (body, want) in [
            (
                "(car (append (cons x x) (list x)))",
                "append: expected a list, but it ends in 0.5 (a real), not ()",
            ),
            (
                "(car (map (lambda (y) (* y y)) (cons x 2)))",
                "map: expected a list, but it ends in 2 (an exact integer), not ()",
            ),
            ("(car (map2 * (list x x) (list x)))", "map2: the second list is shorter than the first"),
            (
                "(car (map2 * (list x x) (cons x x)))",
                "map2: expected a list, but the second list ends in 0.5 (a real), not ()",
            ),
            (
                "(car (map2 * (cons x x) (list x x)))",
                "map2: expected a list, but the first list ends in 0.5 (a real), not ()",
            ),
            (
                "(fold-left + 0. (cons 1. x))",
                "fold-left: expected a list, but it ends in 0.5 (a real), not ()",
            ),
            ("(reduce + 0. x)", "reduce: expected a list, got 0.5 (a real)"),
            // (the whole argument not a list: the primitive's own message)
            ("(car (map (lambda (y) (* y y)) #t))", "map: expected a list, got #t (a boolean)"),
            ("(car (map2 * x (list x)))", "map2: expected a list, got 0.5 (a real)"),
            ("(car (map2 * (list x) 2))", "map2: expected a list, got 2 (an exact integer)"),
            ("(car (map2 * (list x) '()))", "map2: the second list is shorter than the first"),
            ("(fold-left + x 3)", "fold-left: expected a list, got 3 (an exact integer)"),
            ("(car (append x (list x)))", "append: expected a list, got 0.5 (a real)"),
        ] {
            let src = format!("(({d} (lambda (x) {body})) 0.5)");
            let (got, _) = outcome(&src, false);
            assert!(got.starts_with("error: t:1:") && got.contains(want), "{src}: {got}");
            if !want.contains("ends in") {
                // (and on the tape, where the primitive itself runs: the same words)
                let (got, _) = outcome(&src, true);
                assert!(got.starts_with("error: t:1:") && got.contains(want), "{src}: {got}");
            }
        }
        // (a message's first line, without the variables' numbers, which differ
        // between sessions: the trace below it names the transformed
        // procedures it ran in)
        let first = |s: String| {
            let line = s.lines().next().unwrap_or_default();
            let mut out = String::new();
            let mut numbered = false;
            for c in line.chars() {
                if !(numbered && c.is_ascii_digit()) {
                    out.push(c);
                }
                numbered = c == '_' || (numbered && c.is_ascii_digit());
            }
            out
        };
        // A procedure where a list (or a pair, or a procedure) should be is
        // shown as the program wrote it, as the tape shows it, not as the
        // transform made it (`(reverse (lambda ...))`), however deeply nested
        // the transforms.
        for (body, want) in [
            ("(car (map (lambda (y) (* y y)) (lambda (z) z)))", "map: expected a list, got (lambda (z_"),
            (
                "(car (map (lambda (y) y) (cons x (lambda (z) z))))",
                "map: expected a list, but it ends in (lambda (z_",
            ),
            ("(reduce + 0. (lambda (z) (* x z)))", "reduce: expected a list, got (lambda (z_"),
            // (the primitive applied to the transformed value; a pattern)
            ("(length (lambda (z) z))", "length: expected a list, got (lambda (z_"),
            ("(car (lambda (z) z))", "pattern mismatch: expected a pair, got (lambda (z_"),
            // (and inside a value that is not a procedure, applied)
            ("((list (lambda (z) z)) x)", "cannot apply ((lambda (z_) z_)) (a pair): not a procedure"),
        ] {
            for src in [
                format!("(({d} (lambda (x) {body})) 0.5)"),
                format!("((derivative-F ({d} (lambda (x) {body}))) 0.5)"),
            ] {
                let got = first(outcome(&src, false).0);
                assert!(got.starts_with("error: t:1:") && got.contains(want), "{src}: {got}");
                assert!(got.contains(" (a procedure)") || got.contains("(a pair)"), "{src}: {got}");
                assert!(!got.contains("(reverse") && !got.contains("(forward"), "{src}: {got}");
                if !want.contains("ends in") {
                    assert_eq!(first(outcome(&src, true).0), got, "{src}: on the tape");
                }
            }
        }
    }
}

/// `--max-steps` stops a run on a tape; it is not retried by the transform.
#[test]
fn limits_stop_a_run_on_a_tape() {
    let (mut s, _) = session_with(true);
    s.m.set_max_steps(20_000);
    let r = s.run_text(
        "t",
        "((derivative-R (lambda (x) (let loop ((i 0) (a x)) (if (= i 1000000) a (loop (+ i 1) (* a 1.0)))))) 1.0)",
    );
    let e = r.err().expect("the step limit");
    assert_eq!(e.kind, ErrorKind::Limit);
    assert_eq!((s.m.tape.runs, s.m.tape.declined_runs), (0, 0));
}

/// Long arguments and results are walked without deep recursion (on the test
/// thread's small stack): the gradient of a sum of 200,000 reals is all ones.
#[test]
fn long_arguments_and_results() {
    let src =
        "(define xs (let loop ((i 0) (acc '())) (if (= i 200000) acc (loop (+ i 1) (cons 0.5 acc)))))\n\
               (define (sum l) (fold-left + 0.0 l))\n\
               (define g ((gradient-R sum) xs))\n\
               (list (length g) (sum g))\n\
               (define v (vjp (lambda (l) l) xs xs))\n\
               (list (length v) (sum v))\n\
               (jvp sum xs xs)";
    let (mut s, _) = session_with(true);
    let v = run_in(&mut s, "long", src);
    let printed: Vec<String> = v.iter().map(vlad::print::to_string).collect();
    assert_eq!(printed, ["(200000 200000.0)", "(200000 100000.0)", "100000.0"]);
    assert_eq!((s.m.tape.runs, s.m.tape.declined_runs), (3, 0));
}

/// Data with shared structure past the first 4096 pairs (eight references to
/// one list of 600 reals; a list holding itself twice at each of 20 levels,
/// 2^20 times its distinct pairs as a tree; 40 references to the list, as an
/// argument and as a result): the tape takes data whose tree is at most 32
/// times its distinct pairs, as it would their unshared copy; the transform,
/// which keeps the sharing, takes the rest. The gradient of the sum of squares
/// of the elements of all the lists, by position, is 2x at every place x is
/// reached; the vjp of x -> 40 references to x l, with the cotangent 40
/// references to l, is 40 |l|^2 = 40 * 10^-6 * (599 * 600 * 1199 / 6).
#[test]
fn shared_structure_runs_where_it_is_cheaper() {
    let defs = "(define l (map (lambda (i) (* 0.001 i)) (iota 600)))\n\
                (define (refs k x) (let loop ((i 0) (acc '())) (if (= i k) acc (loop (+ i 1) (cons x acc)))))\n\
                (define (ssq ls) (fold-left (lambda (a m) (fold-left (lambda (b x) (+ b (* x x))) a m)) 0.0 ls))\n\
                (define (big n z) (let loop ((i 0) (v z)) (if (= i n) v (loop (+ i 1) (cons v v)))))\n\
                (define (leftmost v) (if (pair? v) (leftmost (car v)) v))\n";
    // (the gradient's element 599 of list 7, and the sum of every element:
    // 2 * 0.599 and 2 * 8 * (0.001 * 599 * 600 / 2))
    let eight = format!(
        "{defs}(define g ((gradient-R ssq) (refs 8 l)))\n\
         (list (list-ref (list-ref g 7) 599) (fold-left (lambda (a m) (fold-left + a m)) 0.0 g))"
    );
    let (got, runs, declined) = alike(&eight);
    let nums: Vec<f64> =
        got.trim_matches(|c| c == '(' || c == ')').split(' ').map(|x| x.parse().unwrap()).collect();
    assert_close(nums[0], 2.0 * 0.599, 1e-12, "eight references: an element");
    assert_close(nums[1], 2.0 * 8.0 * (0.001 * 599.0 * 600.0 / 2.0), 1e-9, "eight references: the sum");
    assert_eq!((runs, declined), (1, 0), "eight references run on the tape");
    let ssq = 40.0 * 1e-6 * (599.0 * 600.0 * 1199.0 / 6.0);
    for (src, want) in [
        (
            format!(
                "{defs}(leftmost ((gradient-R (lambda (v) (* 3.0 (leftmost v)))) (big 20 (list 1.5 2.5))))"
            ),
            3.0,
        ),
        (format!("{defs}(list-ref (list-ref ((gradient-R ssq) (refs 40 l)) 39) 10)"), 0.02),
        (format!("{defs}(vjp (lambda (x) (refs 40 (map (lambda (y) (* x y)) l))) 2.0 (refs 40 l))"), ssq),
    ] {
        let (got, runs, declined) = alike(&src);
        assert_close(got.parse().unwrap(), want, 1e-9, &src);
        assert_eq!((runs, declined), (0, 1), "{src}: gives way");
    }
}

/// The primitive operations on active reals are the transform's: the
/// function's own, and each primitive's tangent or cotangent rule (here, where
/// every operation depends on the argument; an operation on constants only is
/// not differentiated at all on active reals); in nested reverse mode a tape
/// can do fewer (it skips the rules of operations that no
/// sensitivity reaches, where the transform applies them to a zero), and a
/// little different ones (reverse over forward by the transform uses the
/// primitives' second-order rules, which reuse `sin x` where the tape
/// differentiates `cos`'s tangent rule).
#[test]
fn primitive_operations_are_the_transforms() {
    enum Want {
        Same,
        Fewer,
        AtMost,
    }
    use Want::*;
    let defs = "(define (f (list x y)) (* (sin x) (+ (* x y) (/ y (exp x)))))\n\
                (define (g l) (fold-left (lambda (a b) (+ a (* b (sqrt b)))) 0.0 l))";
    for (expr, want) in [
        ("((gradient-R f) (list 0.5 2.0))", Same),
        ("((gradient-F f) (list 0.5 2.0))", Same),
        ("((gradient-R g) (list 1.0 2.0 3.0 4.0))", Same),
        ("(hvp f (list 0.5 2.0) (list 1.0 -1.0))", Same),
        ("(hvp-RR f (list 0.5 2.0) (list 1.0 -1.0))", AtMost),
        ("((derivative-R (derivative-F (lambda (x) (f (list x x))))) 0.3)", AtMost),
        // (+ i 1) on the loop counter: no tangent rule on a dual number
        ("((derivative-F (lambda (x) (let loop ((i 1) (a x)) (if (> i 3) a (loop (+ i 1) (* a x)))))) 2.0)", Fewer),
        // (in reverse mode the same: +'s cotangent rule does no arithmetic)
        ("((derivative-R (lambda (x) (let loop ((i 1) (a x)) (if (> i 3) a (loop (+ i 1) (* a x)))))) 2.0)", Same),
    ] {
        let counts = |tape: bool| {
            let (mut s, _) = session_with(tape);
            run_in(&mut s, "defs", defs);
            s.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
            run_in(&mut s, "expr", expr);
            if tape {
                assert_eq!(s.m.tape.declined_runs, 0, "{expr}");
            }
            s.m.meter.take().unwrap()
        };
        let (on_tape, by_transform) = (counts(true), counts(false));
        let (a, b) = (on_tape.iter().sum::<u64>(), by_transform.iter().sum::<u64>());
        match want {
            Same => assert_eq!(on_tape, by_transform, "primitive operations of {expr}"),
            Fewer => assert!(a < b && a * 4 >= b * 3, "{expr}: {a} on the tape, {b} by the transform"),
            AtMost => assert!(a <= b && a * 4 >= b * 3, "{expr}: {a} on the tape, {b} by the transform"),
        }
    }
}

/// Cases an audit found where the tape's outcome differed from the
/// transform's; each is checked both ways (`alike`) and against what the
/// transform's rules give, worked out by hand.
#[test]
fn audit_cases_agree_with_the_transform() {
    let cases: &[(&str, &str)] = &[
        // sqrt's cotangent rule divides by 2 sqrt(0) = 0 (exact): an error in
        // the backward sweep, reported as the transform's backpropagator does
        ("((derivative-R (lambda (x) (sqrt x))) 0)", "error: "),
        ("((derivative-R (lambda (x) (log x))) 0)", "error: "),
        // a boolean's sensitivity is what reaches it (`plus` of two keeps the
        // first), its zero the boolean itself; data there is an error, both ways
        ("(vjp (lambda (x) x) #t #f)", "#f"),
        ("(vjp (lambda (x) x) #t 3)", "error: "),
        ("(vjp (lambda (x) (list (car x) (cadr x) (cadr x))) (list 1 #t) (list 1 #f #t))", "(1 #f)"),
        ("(vjp (lambda (x) (list (car x) #f)) (list 1 #t) (list 1 #f))", "(1 #t)"),
        // `zero`'s rules: (zero dx) forward, (zero x) reverse: at 2.0, the
        // cotangent 1 of x plus the inexact zero of x through (zero x); the
        // tangent 1 plus the exact zero of the exact tangent 1
        ("((derivative-R (lambda (x) (+ x (zero x)))) 2.0)", "1.0"),
        ("((derivative-F (lambda (x) (+ x (zero x)))) 2.0)", "1"),
        ("((derivative-R (lambda (x) (+ x (car (zero (list x (lambda (y) x))))))) 2.0)", "1.0"),
        // the sensitivity of the list (1 . zero) reaches 1.5x as 0.0, and x
        // through *'s rule as 0.0 * 1.5: 1 + 0.0
        ("((derivative-R (lambda (x) (car (list x (* x 1.5))))) 2)", "1.0"),
        ("((derivative-R (lambda (x) (car (cons x (* x 1.5))))) 2)", "1.0"),
        ("((derivative-R (lambda (x) (car (list 5 (* x 1.5))))) 2)", "0.0"),
        // the cotangent of a real that no sensitivity reaches is its zero on its
        // own levels: here a dual number whose tangent is the zero of the
        // exact tangent 1
        ("((derivative-F (derivative-R (lambda (x) 0.25))) 1.0)", "0"),
        ("((derivative-F (derivative-R (lambda (x) (sin 0.25)))) 1.0)", "0"),
        // d/dx ((d/dy 2xy) at y = x) = 2, exact by the tape; the transform's
        // zero sensitivity of the inner result (y . backpropagator) reaches x
        // through 2xy inexact: 2.0
        ("((derivative-R (lambda (x) ((derivative-R (lambda (y) (* 2 (* x y)))) x))) 1.5)", "2.0"),
        // the same through a product of the two levels' variables, and with a
        // forward level inside: the inner result's zero reaches x as 0.0
        ("((derivative-R (lambda (x1) ((derivative-R (lambda (x2) (* x1 x2))) 1.5))) 1.5)", "1.0"),
        ("((derivative-R (derivative-R (derivative-F (lambda (x) (* x (* x x)))))) 1.5)", "6.0"),
        // an inner derivative whose value is not used: its backward phase
        // never runs in the transform, so no zero reaches x through x y
        (
            "((derivative-R (lambda (x) (let ((d ((derivative-R (lambda (y) (* x y))) 2.0))) (* 2 x)))) 1.5)",
            "2",
        ),
    ];
    for (src, want) in cases {
        let (got, _, _) = alike(src);
        assert!(got.starts_with(want), "{src}: {got}");
    }
}

/// The n-th derivative of x^n by n nested `derivative-R`s is n!, exact at
/// an exact x; at an inexact x the transform's is inexact from the second
/// level on (each inner derivative drops its primal result, whose zero
/// sensitivity 0.0 reaches x through the products), and so is the tapes'
/// (`ad::tape`'s `Discard`): every level runs on a tape, none gives way to
/// the transform, whose cost grows about elevenfold a level (eight levels
/// took a minute; the same as the transform's, checked up to four). The
/// same for the n-th derivative of x^(n-1), 0 (where the inner levels, not
/// only the outermost, gave way).
#[test]
fn nth_derivatives_of_x_to_the_n_run_on_tapes_at_every_level() {
    for (n, degree) in (1..=8u64).map(|n| (n, n)).chain((2..=8u64).map(|n| (n, n - 1))) {
        let mut body = "x".to_string();
        for _ in 1..degree {
            body = format!("(* x {body})");
        }
        let mut f = format!("(lambda (x) {body})");
        for _ in 0..n {
            f = format!("(derivative-R {f})");
        }
        let factorial: u64 = if degree == n { (1..=n).product() } else { 0 };
        let inexact = if n == 1 { "1".to_string() } else { format!("{factorial}.0") };
        for (x, want) in [("1.5", inexact), ("3", factorial.to_string())] {
            let src = format!("({f} {x})");
            let (got, s) = outcome(&src, true);
            assert_eq!(got, want, "{src}");
            let t = &s.m.tape;
            assert!(
                t.runs > 0 && t.declined_runs == 0,
                "{src}: {} runs, {} gave way",
                t.runs,
                t.declined_runs
            );
            if n <= 4 {
                assert_eq!(outcome(&src, false).0, got, "by the transform: {src}");
            }
        }
    }
}

/// Nested forward levels compute the arithmetic of an inner level (its
/// values, its tangents, a tape's cotangent rules and sums) on unboxed numbers
/// where they are plain numbers or reals of one forward level (`Lift` in
/// `ad::native`): the same numbers, the same exactness, as the primitives give
/// by the transform, in forward over reverse and forward over forward, with
/// exact and inexact arguments, tangents and constants mixed, and each rule.
#[test]
fn nested_forward_arithmetic_prints_as_the_transform() {
    let cases: &[(&str, Option<&str>)] = &[
        // Hessians by closed form: of x^2 (2 0; 0 0), of 2x + xy (0 1; 1 0), of x/y
        // (0 -1/y^2; -1/y^2 2x/y^3) at (3, 4): times (1, 1) (-1/16, -1/16 + 6/64)
        ("(hvp (lambda (x) (* (car x) (car x))) '(3 4) '(1 0))", Some("(2 0)")),
        ("(hvp (lambda (x) (+ (* 2 (car x)) (* (car x) (cadr x)))) '(3 4.0) '(1 1))", None),
        ("(hvp (lambda (x) (+ (* 2 (car x)) (* (car x) (cadr x)))) '(3 4) '(1 1))", Some("(1 1)")),
        ("(hvp (lambda (x) (/ (car x) (cadr x))) '(3 4) '(1 1))", Some("(-0.0625 0.03125)")),
        ("(hvp (lambda (x) (/ (car x) (cadr x))) '(3.0 4) '(1 2))", None),
        ("(hvp (lambda (x) (- (car x) (* 3 (cadr x)))) '(3 4) '(1 1))", Some("(0 0)")),
        ("(hvp (lambda (x) (sin (* (car x) (cadr x)))) '(1.0 2) '(1 0))", None),
        ("(hvp (lambda (x) (cos (* (car x) (cadr x)))) '(1 2) '(1 0))", None),
        ("(hvp (lambda (x) (exp (* (car x) (cadr x)))) '(1 2.0) '(0 1))", None),
        ("(hvp (lambda (x) (log (* (car x) (cadr x)))) '(1 2.0) '(1 1))", None),
        ("(hvp (lambda (x) (sqrt (* (car x) (cadr x)))) '(1 4.0) '(1 1))", None),
        ("(hvp (lambda (x) (atan (car x) (cadr x))) '(1 4.0) '(1 1))", None),
        ("(hvp (lambda (x) (let ((y (* (car x) (car x)))) (* y y))) '(2 1) '(1 1))", Some("(48 0)")),
        // exact integers past a machine word (the unboxed path gives way to the primitives)
        (
            "(hvp (lambda (x) (* 1000000000000 (* (car x) (car x)))) '(4611686018427387904 1) '(1 1))",
            Some("(2000000000000 0)"),
        ),
        ("(hvp (lambda (x) (* (car x) 0)) '(2 1) '(1 1))", Some("(0 0)")),
        ("(hvp (lambda (x) 5) '(2 1) '(1 1))", Some("(0 0)")),
        // d3/dx3 x^3 = 6x, d2/dx2 1/x = 2/x^3, d2/dx2 x/3 = 0, d2/dx2 3x^2 = 6
        ("((derivative-F (derivative-F (lambda (x) (* x (* x x))))) 2)", Some("12")),
        ("((derivative-F (derivative-F (lambda (x) (* x (* x x))))) 2.0)", Some("12.0")),
        ("((derivative-F (derivative-F (lambda (x) (/ 1 x)))) 2)", Some("0.25")),
        ("((derivative-F (derivative-F (lambda (x) (/ x 3)))) 6)", None),
        ("((derivative-F (derivative-R (lambda (x) (/ 1 x)))) 2)", Some("0.25")),
        ("((derivative-F (derivative-R (lambda (x) (/ x 3)))) 6)", None),
        ("((derivative-F (derivative-R (lambda (x) (* (* x x) 3)))) 6)", Some("6")),
        ("((derivative-F (derivative-R (lambda (x) (- 0 (* (* x x) 3))))) 6)", Some("-6")),
        ("((derivative-F (derivative-R (lambda (x) (sin (* x x))))) 0.5)", None),
        ("((derivative-F (derivative-R (lambda (x) (cos x)))) 0)", Some("-1.0")),
        ("((derivative-F (derivative-R (lambda (x) (exp (* 2 x))))) 1)", None),
        ("((derivative-F (derivative-R (lambda (x) (sqrt x)))) 4)", Some("-0.03125")),
        ("((derivative-F (derivative-R (lambda (x) (log x)))) 4)", Some("-0.0625")),
        ("((derivative-F (derivative-R (lambda (x) (atan x 2)))) 4)", None),
        ("((derivative-F (derivative-F (derivative-R (lambda (x) (* (* x x) (* x x)))))) 2)", Some("48")),
        // a level's constant is a real of the enclosing one
        ("((derivative-F (lambda (y) ((derivative-R (lambda (x) (* x (* y y)))) 3))) 2)", Some("4")),
        ("((derivative-F (lambda (y) ((derivative-F (lambda (x) (/ x y))) 3))) 2)", Some("-0.25")),
        ("((derivative-F (lambda (y) ((derivative-R (lambda (x) (/ y x))) 3))) 2)", None),
        (
            "((derivative-F (lambda (y) ((derivative-R (lambda (x) (let ((z (* x y))) (+ z z)))) 3))) 2.5)",
            Some("2.0"),
        ),
        (
            "(jvp (gradient-R (lambda (x) (+ (* (car x) (car x)) (* 2.5 (cadr x))))) '(1 2) '(3 4))",
            Some("(6 0.0)"),
        ),
        ("(jvp (gradient-R (lambda (x) (* (* (car x) (car x)) (cadr x)))) '(-1 -2.0) '(0 -0.0))", None),
        (
            "(jvp (gradient-R (lambda (x) (* (* (car x) (car x)) (cadr x)))) '(1.5 -2.0) '(1 -1))",
            Some("(-7.0 3.0)"),
        ),
    ];
    on_levels_alike(cases.iter().copied(), 1e-15);
}

/// The same for reverse levels nested in a reverse level (`Rv` in `ad::native`:
/// a tape's rules and sums recorded on the enclosing tape, unboxed): reverse
/// over reverse and reverse over forward print as the transform does.
#[test]
fn nested_reverse_arithmetic_prints_as_the_transform() {
    let cases: &[(&str, Option<&str>)] = &[
        ("(hvp-RR (lambda (x) (* (car x) (car x))) '(3 4) '(1 0))", Some("(2 0)")),
        ("(hvp-RR (lambda (x) (+ (* 2 (car x)) (* (car x) (cadr x)))) '(3 4) '(1 1))", Some("(1 1)")),
        ("(hvp-RR (lambda (x) (+ (* 2 (car x)) (* (car x) (cadr x)))) '(3 4.0) '(1 1))", None),
        ("(hvp-RR (lambda (x) (/ (car x) (cadr x))) '(3 4) '(1 1))", Some("(-0.0625 0.03125)")),
        ("(hvp-RR (lambda (x) (sin (* (car x) (cadr x)))) '(1.0 2) '(1 0))", None),
        ("(hvp-RR (lambda (x) (exp (* (car x) (cadr x)))) '(1 2.0) '(0 1))", None),
        ("(hvp-RR (lambda (x) (log (* (car x) (cadr x)))) '(1 2.0) '(1 1))", None),
        ("(hvp-RR (lambda (x) (sqrt (* (car x) (cadr x)))) '(1 4.0) '(1 1))", None),
        ("(hvp-RR (lambda (x) (atan (car x) (cadr x))) '(1 4.0) '(1 1))", None),
        ("(hvp-RR (lambda (x) (let ((y (* (car x) (car x)))) (* y y))) '(2 1) '(1 1))", Some("(48 0)")),
        ("(hvp-RR (lambda (x) (* 1000000000000 (* (car x) (car x)))) '(4611686018427387904 1) '(1 1))", Some("(2000000000000 0)")),
        ("((derivative-R (derivative-R (lambda (x) (/ 1 x)))) 2)", Some("0.25")),
        ("((derivative-R (derivative-R (lambda (x) (* (* x x) 3)))) 6)", Some("6")),
        ("((derivative-R (derivative-R (lambda (x) (cos x)))) 0)", Some("-1.0")),
        ("((derivative-R (derivative-R (lambda (x) (sqrt x)))) 4)", Some("-0.03125")),
        ("((derivative-R (derivative-R (lambda (x) (atan x 2)))) 4)", Some("-0.04")),
        ("((derivative-R (derivative-F (lambda (x) (* x (* x x))))) 2)", Some("12")),
        ("((derivative-R (derivative-F (lambda (x) (/ 1 x)))) 2)", Some("0.25")),
        ("((derivative-R (derivative-F (lambda (x) (exp (* 2 x))))) 1)", None),
        ("((derivative-R (derivative-F (lambda (x) (sqrt x)))) 4.0)", Some("-0.03125")),
        ("((derivative-R (derivative-R (derivative-R (lambda (x) (* (* x x) (* x x)))))) 2)", Some("48")),
        ("((derivative-R (derivative-F (derivative-R (lambda (x) (* (* x x) (* x x)))))) 2.0)", Some("48.0")),
        // 2 * 4611686018427387904: past a machine word (the unboxed path gives way to the primitives)
        ("((derivative-R (derivative-R (lambda (x) (* 4611686018427387904 (* x x))))) 4611686018427387904)", Some("9223372036854775808")),
        ("((derivative-R (derivative-F (lambda (x) (* 4611686018427387904 (* x x))))) 4611686018427387904)", Some("9223372036854775808")),
        ("((derivative-R (lambda (y) ((derivative-R (lambda (x) (* x (* y y)))) 3))) 2)", Some("4")),
        ("((derivative-R (lambda (y) ((derivative-F (lambda (x) (/ x y))) 3))) 2)", Some("-0.25")),
        ("((derivative-R (lambda (y) ((derivative-R (lambda (x) (/ y x))) 3))) 2)", None),
        ("((derivative-R (lambda (x) ((derivative-F (lambda (y) (* 2.5 (* x y)))) x))) 1)", Some("2.5")),
        ("(vjp (gradient-R (lambda (x) (* (* (car x) (car x)) (cadr x)))) '(1.5 -2.0) '(1 -1))", Some("(-7.0 3.0)")),
        // `/` and `sqrt` on doubles, their rules recorded on the enclosing tape
        // directly: d2/dx2 1/x = 2/x^3, d2/dx2 sqrt x = -x^(-3/2)/4, d/dy
        // d/dx y/sqrt(x) = -x^(-3/2)/2, d/dw d/dx (x^2 + w^2)^(-1/2) = 3xw (x^2 +
        // w^2)^(-5/2), and H v of a/b at (3, 4), v = (1, 1): (-1/b^2, -1/b^2 + 2a/b^3)
        ("((derivative-R (derivative-R (lambda (x) (/ 1.0 x)))) 2.0)", Some("0.25")),
        ("((derivative-R (derivative-R (lambda (x) (sqrt x)))) 4.0)", Some("-0.03125")),
        ("((derivative-R (lambda (y) ((derivative-R (lambda (x) (/ y (sqrt x)))) 4.0))) 2.0)", Some("-0.0625")),
        (
            "((derivative-R (lambda (w) ((derivative-R (lambda (x) (/ 1.0 (sqrt (+ (* x x) (* w w)))))) 3.0))) 4.0)",
            Some("0.01152"),
        ),
        ("(hvp-RR (lambda (x) (/ (car x) (cadr x))) '(3.0 4.0) '(1.0 1.0))", Some("(-0.0625 0.03125)")),
        // an inner function closing over the outer variable: its own arithmetic
        // (w - 0.5, w (w - 0.5)) recorded on the outer tape, and the inner reals
        // meeting it: d/dw d/dx ((w - 0.5) w x - x/w) = 2w - 0.5 + 1/w^2 at w =
        // 2, inner reverse or forward; and the gradient in (a, b) of d/dx ((a -
        // b) x - x/a), (1 + 1/a^2, -1), at (2, 0.5), the outer tape recorded for
        // gradient-F's sweeps
        ("((derivative-R (lambda (w) ((derivative-R (lambda (x) (- (* (* (- w 0.5) w) x) (/ x w)))) 3.0))) 2.0)", Some("3.75")),
        ("((derivative-R (lambda (w) ((derivative-F (lambda (x) (- (* (* (- w 0.5) w) x) (/ x w)))) 3.0))) 2.0)", Some("3.75")),
        (
            "((gradient-F (lambda (v) ((derivative-R (lambda (x) (- (* (- (car v) (cadr v)) x) (/ x (car v))))) 3.0))) (list 2.0 0.5))",
            Some("(1.25 -1.0)"),
        ),
        (
            "((gradient-F (lambda (v) ((derivative-F (lambda (x) (- (* (- (car v) (cadr v)) x) (/ x (car v))))) 3.0))) (list 2.0 0.5))",
            Some("(1.25 -1.0)"),
        ),
        // an operation of an inner real and an outer one, or of inner reals
        // whose values are outer ones (`nested_doubles`): d/dw d/dx (x - w) x/w
        // = -2x/w^2 at (3, 2); d/dw d/dx (x + w)^2 = 2, exact; the gradient in
        // (a, b) of d/dx a x/(b - x) = ab/(b - x)^2 at x = 1, (b/(b - x)^2,
        // a/(b - x)^2 - 2ab/(b - x)^3) at (2, 3); and d/dw d/dx of 3 (x - w)^2
        // summed in a loop, -6
        ("((derivative-R (lambda (w) ((derivative-R (lambda (x) (* (- x w) (/ x w)))) 3.0))) 2.0)", Some("-1.5")),
        ("((derivative-R (lambda (w) ((derivative-R (lambda (x) (* (+ x w) (+ x w)))) 3))) 2)", Some("2")),
        (
            "((gradient-R (lambda (v) ((derivative-R (lambda (x) (/ (* x (car v)) (- (cadr v) x)))) 1.0))) (list 2.0 3.0))",
            Some("(0.75 -1.0)"),
        ),
        (
            "((derivative-R (lambda (w) ((derivative-R (lambda (x) (let loop ((i 0) (acc 0.0)) (if (= i 3) acc (loop (+ i 1) (+ acc (* (- x w) (- x w)))))))) 1.0))) 0.5)",
            Some("-6.0"),
        ),
    ];
    on_levels_alike(cases.iter().copied(), 1e-15);
}

/// A level's arithmetic on doubles (`record_doubles` in `ad::tape`): exact
/// integer constants meet the reals as the primitives convert them (a product
/// with 3 is a double, the cotangent through it exact where the sensitivity
/// is), reals whose values are exact integers stay exact, and a tape over a
/// forward level keeps its dual numbers unboxed; each checked both ways and
/// against its closed form.
#[test]
fn exact_constants_on_doubles_print_as_the_transform() {
    let s = 1.0 / (1.0 + (-0.5f64).exp());
    let sig = format!("{}", s * (1.0 - s));
    let cases: &[(&str, Option<&str>)] = &[
        // d/dx -3x = -3: the seed 1 times the exact 3, exactly
        ("((derivative-R (lambda (x) (* (- 0 x) 3))) 1.5)", Some("-3")),
        ("((gradient-R (lambda (l) (* (- 0 (car l)) 3))) (list 1.5))", Some("(-3)")),
        // d/dx x/4 and 1/x at 2.0: 0.25, -0.25
        ("((gradient-R (lambda (l) (+ (/ (car l) 4) (/ 1 (cadr l))))) (list 1.5 2.0))", Some("(0.25 -0.25)")),
        // the exact arguments stay exact: d/d(x, y) 3xy + 2 = (3y, 3x)
        ("((gradient-R (lambda (l) (+ (* 3 (* (car l) (cadr l))) 2))) (list 2 5))", Some("(15 6)")),
        // sigmoid'(w x) at w = 0.5, x = 1 (an exact datum): s(1 - s)
        ("((gradient-R (lambda (w) (/ 1 (+ 1 (exp (- 0 (* (car w) 1))))))) (list 0.5))", Some(&format!("({sig})"))),
        // forward: the constant's tangent its zero
        ("((gradient-F (lambda (l) (* (- 0 (car l)) 3))) (list 1.5))", Some("(-3.0)")),
        ("(jvp (lambda (x) (* 3 (* x x))) 1.5 2.0)", Some("18.0")),
        // forward over reverse with exact constants: H of 3x^2 + 2xy at (1.5, 2.0) times (1, 1) = (8, 2)
        ("(hvp (lambda (l) (+ (* 3 (* (car l) (car l))) (* 2 (* (car l) (cadr l))))) (list 1.5 2.0) (list 1.0 1.0))", Some("(8.0 2.0)")),
        // and a sensitivity summed from three uses: d2/dx2 x^3 = 6x at 0.5, times 2
        ("(hvp (lambda (l) (* (* (car l) (car l)) (car l))) (list 0.5) (list 2.0))", Some("(6.0)")),
        // atan's rules square an exact constant: d/dx atan(x, 3) = 3/(x^2 + 9) at 0.0
        ("((gradient-R (lambda (l) (atan (car l) 3))) (list 0.0))", Some(&format!("({})", 1.0 / 3.0))),
        ("(hvp (lambda (l) (atan (car l) 3)) (list 1.0) (list 1.0))", Some(&format!("({})", -6.0 / 100.0))),
        // a constant past the unboxed numbers, where an operation of the enclosing
        // level only runs within the inner one's (found by a differential fuzz:
        // this recursed without end once)
        ("(hvp (lambda (l) (/ (atan (cadr l) 12345678901234567890) (car l))) (list 2 3) (list 1 0))", None),
        ("((jacobian-F (gradient-F (lambda (l) (* (car l) (atan (cadr l) 12345678901234567890))))) (list 2 3))", None),
        // reverse over forward with exact constants: d2/dx2 3 atan(x, 2) = -12x/(x^2 + 4)^2 at 1.5
        ("((derivative-R (derivative-F (lambda (x) (* 3 (atan x 2))))) 1.5)", Some(&format!("{}", -18.0 / 39.0625))),
        ("((jacobian-R (gradient-F (lambda (l) (* (- (car l) 1) (/ (cadr l) 4))))) (list 1.5 2.0))", Some("((0.0 0.25) (0.25 0.0))")),
    ];
    on_levels_alike(cases.iter().map(|(s, w)| (*s, w.as_deref())), 1e-15);
}

/// A gradient's exact seed 1 (a sensitivity passed down through sums, or
/// `gradient-F`'s tangents) reaching a rule that scales it by doubles (`*`,
/// `/`, `sqrt`, `exp`, `sin`, `atan`...), and on a tape
/// over a forward level a dual sensitivity reaching a node of plain doubles:
/// the sweep computes both unboxed, as the transform computes them; checked
/// both ways, and against closed forms where given (with gradients in a
/// parameter the forward level perturbs and the tape's input does not).
#[test]
fn exact_and_dual_sensitivities_at_doubles_print_as_the_transform() {
    let f = |x: f64| format!("{x}");
    let cases: Vec<(&str, String)> = vec![
        // d/d(x, y, z) sqrt(x) + exp(y) + sin(z) + x/y at (4, 0.5, 1): the seed
        // reaches each rule exact
        (
            "((gradient-R (lambda (l) (+ (+ (sqrt (car l)) (exp (cadr l))) (+ (sin (caddr l)) (/ (car l) (cadr l)))))) (list 4.0 0.5 1.0))",
            format!("({} {} {})", f(0.25 + 2.0), f(0.5f64.exp() - 16.0), f(1.0f64.cos())),
        ),
        // d/dx atan(x, 2.0) + log(x) at 1.5: 2/(x^2 + 4) + 1/x
        (
            "((gradient-R (lambda (l) (+ (atan (car l) 2.0) (log (car l))))) (list 1.5))",
            format!("({})", f(2.0 / 6.25 + 1.0 / 1.5)),
        ),
        // gradient-F's exact seeds through rules that scale them, and through a
        // sum and a difference, whose tangents stay exact: (e^y/(2 sqrt x),
        // sqrt(x) e^y) at (4, 0.5), and 1
        (
            "((gradient-F (lambda (l) (* (sqrt (car l)) (exp (cadr l))))) (list 4.0 0.5))",
            format!("({} {})", f(0.5f64.exp() / 4.0), f(2.0 * 0.5f64.exp())),
        ),
        ("((derivative-F (lambda (x) (- (+ x x) x))) 1.5)", "1".into()),
        // the seed through differences (the sweep's `-` on an exact
        // sensitivity): d/d(x, y) -(x^2 + 3y) at (1.5, 2) = (-2x, -3); d/d(x, y)
        // (x - y) and (x - x) at exact (5, 7): (1 -1) and (0 0), exact;
        // d/dx c (0.5 - x), c = -2^63, whose sensitivity of `-` is c, and -c
        // is 2^63, past a fixnum
        (
            "((gradient-R (lambda (l) (- 0.0 (+ (* (car l) (car l)) (* 3.0 (cadr l)))))) (list 1.5 2.0))",
            format!("({:?} {:?})", -2.0 * 1.5, -3.0),
        ),
        ("((gradient-R (lambda (l) (- (car l) (cadr l)))) (list 5 7))", "(1 -1)".into()),
        ("((gradient-R (lambda (l) (- (car l) (car l)))) (list 5 7))", "(0 0)".into()),
        ("((gradient-R (lambda (l) (- 0 (- 0 (- (car l) 1))))) (list 2.0))", "(1)".into()),
        ("((gradient-R (lambda (l) (* -9223372036854775808 (- 0.5 (car l))))) (list 2.0))", "(9223372036854775808)".into()),
        // and with exact constants: d/dx (x/4)(3x) = 1.5x, d/dx 0x + atan(x, 2) = 2/(x^2 + 4)
        ("((derivative-F (lambda (x) (* (/ x 4) (* 3 x)))) 1.5)", "2.25".into()),
        ("((derivative-F (lambda (x) (+ (* x 0) (atan x 2)))) -1.5)", f(2.0 / 6.25)),
        // d/dc of d/dx x^2 c at x = 1.5 (not perturbed): 2x = 3
        ("((derivative-F (lambda (c) (car ((gradient-R (lambda (l) (* (* (car l) (car l)) c))) (list 1.5))))) 2.0)", "3.0".into()),
        // d/dc of d/dx (x/4.0 + sin x) c at x = 0.5: 1/4 + cos(0.5)
        (
            "((derivative-F (lambda (c) (car ((gradient-R (lambda (l) (* (+ (/ (car l) 4.0) (sin (car l))) c))) (list 0.5))))) 2.0)",
            f(0.25 + 0.5f64.cos()),
        ),
        // d/dc of d/dx x c^2 at c = 3.0: 2c (c^2, the enclosing forward level's
        // product, computed within the tape)
        ("((derivative-F (lambda (c) (car ((gradient-R (lambda (l) (* (car l) (* c c)))) (list 1.5))))) 3.0)", "6.0".into()),
        // d/dc of d/dx atan(x, 2.0) c^2 at x = 1.5, c = 3.0: 2c 2/(x^2 + 4)
        (
            "((derivative-F (lambda (c) (car ((gradient-R (lambda (l) (* (atan (car l) 2.0) (* c c)))) (list 1.5))))) 3.0)",
            f(6.0 * 2.0 / 6.25),
        ),
    ];
    on_levels_alike(cases.iter().map(|(s, w)| (*s, Some(w.as_str()))), 1e-15);
    // (a dual sensitivity reaching a node of doubles, `(cos (- b b))`: found
    // by a differential fuzz of `hvp` and `hessian`)
    on_levels_alike(
        [
            "(hvp (lambda (x) (let ((a (car x)) (b (cadr x))) (cos (- (* (+ a a) (+ a b)) (cos (- b b)))))) (list 2 3) (list 1 0.5))",
            "((hessian (lambda (x) (let ((a (car x)) (b (cadr x))) (cos (- (* (+ a a) (+ a b)) (cos (- b b))))))) (list 1.5 -0.5))",
        ]
        .map(|s| (s, None)),
        0.0,
    );
}

/// Forward mode's `+ - * /` on a level's reals of doubles read in place
/// (`tape::forward_arith2`): with double constants on either side, `gradient-F`'s
/// exact seeds through `*` and `/` (the seed taken as a double there, as the
/// transform converts it) and through `+` and `-` (where the tangent stays
/// exact, so the general path), signed zeros, infinities and NaN; each printed
/// as the transform prints it, and equal to its closed form where given.
#[test]
fn forward_arithmetic_in_place_prints_as_the_transform() {
    let f = |x: f64| format!("{x}");
    let cases: Vec<(&str, String)> = vec![
        // d/dx (x/3 - 2.5)(x + 0.5) / (1.5 x) at 2: (x/3 - 2.5) ... by hand:
        // g = (x/3 - 2.5)(x + 0.5) / (1.5x); g' = [(2x/3 + 1/6 - 2.5)(1.5x) - 1.5 (x/3 - 2.5)(x + 0.5)] / (1.5x)^2
        (
            "((derivative-F (lambda (x) (/ (* (- (/ x 3.0) 2.5) (+ x 0.5)) (* 1.5 x)))) 2.0)",
            f(((4.0 / 3.0 + 1.0 / 6.0 - 2.5) * 3.0 - 1.5 * (2.0 / 3.0 - 2.5) * 2.5) / 9.0),
        ),
        // d/dx x^5 by repeated products in a loop at 1.25: 5x^4
        (
            "(define (pow x n acc) (if (= n 0) acc (pow x (- n 1) (* acc x)))) ((derivative-F (lambda (x) (pow x 5 1.0))) 1.25)",
            f(5.0 * 1.25f64.powi(4)),
        ),
        // constants first, and the seed through a quotient: d/dx (2.0 - 3.0/x) = 3/x^2
        ("((derivative-F (lambda (x) (- 2.0 (/ 3.0 x)))) 1.5)", f(3.0 / 2.25)),
        // the seed through sums stays exact, until it meets a double constant's zero tangent 0.0
        ("((derivative-F (lambda (x) (- (+ x x) x))) 1.5)", "1".into()),
        ("((derivative-F (lambda (x) (- (+ x x) (+ x 0.5)))) 1.5)", "1.0".into()),
        // (one exact tangent and a double one, or a double constant's: 1 + 0.0; an
        // exact constant's zero tangent is exact: 0 - 1 stays exact)
        ("((derivative-F (lambda (x) (+ x 10.0))) 2)", "1.0".into()),
        ("((derivative-F (lambda (x) (- 10 x))) 2.0)", "-1".into()),
        ("((derivative-F (lambda (x) (- (* 3.0 x) (- x 0.5)))) 2.0)", "2.0".into()),
        ("((gradient-F (lambda (l) (- (car l) (+ (cadr l) 1.0)))) (list 1.0 2.0))", "(1.0 -1.0)".into()),
        // a negative zero tangent through a difference: 1(-0.0) + (-2)(0.0), less 0.0
        ("((derivative-F (lambda (x) (- (* x -0.0) 1.0))) -2.0)", "-0.0".into()),
        ("((gradient-F (lambda (l) (+ (* (car l) (cadr l)) (car l)))) (list 2.0 -3.0))", "(-2.0 2.0)".into()),
    ];
    on_levels_alike(cases.iter().map(|(s, w)| (*s, Some(w.as_str()))), 1e-15);
    on_levels_alike(
        [
            // signed zeros, infinities, NaN
            "((derivative-F (lambda (x) (* x -0.0))) 2.0)",
            "((derivative-F (lambda (x) (/ x 0.0))) 2.0)",
            "((derivative-F (lambda (x) (/ 1.0 x))) 0.0)",
            "((derivative-F (lambda (x) (- (* x 1e308) (* x 1e308)))) 10.0)",
            "((derivative-F (lambda (x) (* (/ x 0.0) 0.0))) -1.0)",
            "((derivative-F (lambda (x) (+ (* -0.0 x) -0.0))) 0.0)",
        ]
        .map(|s| (s, None)),
        0.0,
    );
}

/// Forward over forward with exact numbers: a gradient's exact seed 1 and
/// exact constants meeting the enclosing level's doubles (converted where they
/// meet one, as the transform converts them), and meeting each other (exact
/// results, as the transform keeps them); each printed as the transform prints
/// it, and equal to its closed form where given.
#[test]
fn nested_forward_exact_seeds_print_as_the_transform() {
    let f = |x: f64| format!("{x:?}");
    // d/dw of d/dx sqrt((x - 2w)(x - 10)) at x = 12, w = 0.5: with u the
    // product and h = (2x - 10 - 2w) / (2 sqrt u), dh/dw = (-4 sqrt u - (2x -
    // 10 - 2w) u_w / sqrt u) / (4u), u_w = -2(x - 10)
    let (x, w) = (12.0f64, 0.5f64);
    let u = (x - 2.0 * w) * (x - 10.0);
    let dhdw = (-4.0 * u.sqrt() - (2.0 * x - 10.0 - 2.0 * w) * (-2.0 * (x - 10.0)) / u.sqrt()) / (4.0 * u);
    let cases: Vec<(&str, Option<String>)> = vec![
        // (x - 10)(0 + x) = x^2 - 10x: second derivative 2
        ("((derivative-F (derivative-F (lambda (x) (* (- x 10.0) (+ 0 x))))) 2.0)", Some(f(2.0))),
        ("((derivative-F (derivative-F (lambda (x) (+ 0 (* x x))))) 1.5)", Some(f(2.0))),
        (
            "((derivative-F (lambda (w) ((derivative-F (lambda (x) (sqrt (+ 0 (* (- x (* 2.0 w)) (- x 10.0)))))) 12.0))) 0.5)",
            Some(f(dhdw)),
        ),
        // exp(x - 1)'' = exp(x - 1) at 1; log'' = -1/x^2 at 2 (a function of an exact integer)
        ("((derivative-F (derivative-F (lambda (x) (exp (- x 1.0))))) 1)", Some(f(1.0))),
        ("((derivative-F (derivative-F (lambda (x) (log x)))) 2)", Some(f(-0.25))),
        ("((derivative-F (derivative-F (lambda (x) (log (* 1.0 x))))) 2)", Some(f(-0.25))),
        // exact numbers meeting each other stay exact: (x^2)'' = 2, (x + 1)'' = 0, (3 - x / 2)'' = 0
        ("((derivative-F (derivative-F (lambda (x) (* x x)))) 3)", Some("2".into())),
        ("((derivative-F (derivative-F (lambda (x) (+ x 1)))) 2)", Some("0".into())),
        ("((derivative-F (derivative-F (lambda (x) (- 3 (/ x 2))))) 4)", None),
        // mixed: (1.5 x^2)'' = 3 at an exact point, (x^3)'' = 6x at 2
        ("((derivative-F (derivative-F (lambda (x) (* 1.5 (* x x))))) 2)", Some(f(3.0))),
        ("((derivative-F (derivative-F (lambda (x) (* x (* x x))))) 2)", Some("12".into())),
        ("((derivative-F (derivative-F (lambda (x) (* x (* x (+ x 0.0)))))) 2)", Some(f(12.0))),
        // Hessians by forward over forward, at exact and inexact points
        ("((jacobian-F (gradient-F (lambda (l) (* (car l) (- (cadr l) 0.5))))) (list 2 3))", None),
        ("((jacobian-F (gradient-F (lambda (l) (+ 0 (* (car l) (* (cadr l) (cadr l))))))) (list 2 3))", None),
        ("((jacobian-F (gradient-F (lambda (l) (sin (* (car l) (cadr l)))))) (list 0.5 3))", None),
        ("((jacobian-F (gradient-F (lambda (l) (atan (car l) (+ 1 (cadr l)))))) (list 2 3))", None),
    ];
    on_levels_alike(cases.iter().map(|(s, w)| (*s, w.as_deref())), 1e-14);
}

/// An operation of the outer forward level alone (none of its operands the inner
/// level's) while an inner level runs, forward or a tape (the saddle's payoff
/// squares the outer x inside every inner derivative): with double and exact
/// tangents and constants, as the transform computes it (exact where exact
/// numbers meet each other), and equal to the closed form.
#[test]
fn outer_forward_operations_inside_an_inner_level_print_as_the_transform() {
    let f = |x: f64| format!("{x:?}");
    // d/dx of d/dy [y ((x + 1)(3 - x) + x/4)] = d/dx [(x + 1)(3 - x) + x/4] = 2 - 2x + 1/4
    let inner = "(define (inner g x) ((g (lambda (y) (* (car y) (+ (* (+ (car x) 1) (- 3 (car x))) (/ (car x) 4))))) (list 1.5)))\n\
                 (define (outer g h x0) ((g (lambda (x) (car (inner h x)))) (list x0)))\n";
    let mut cases: Vec<(String, Option<String>)> = Vec::new();
    for (o, i) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
        for x0 in ["2", "2.0", "0.5"] {
            let x: f64 = x0.parse().unwrap();
            cases.push((
                format!("{inner}(outer gradient-{o} gradient-{i} {x0})"),
                Some(format!("({})", f(2.25 - 2.0 * x))),
            ));
        }
    }
    let more: Vec<(&str, Option<String>)> = vec![
        // d/dx of d/dy y (x + 1)(x - 0.5) = 2x + 0.5
        (
            "((derivative-F (lambda (x) ((derivative-F (lambda (y) (* y (* (+ x 1) (- x 0.5))))) 3))) 2)",
            Some(f(4.5)),
        ),
        // exact numbers meeting each other stay exact: (x^2 - 1)' = 2x, (x + x)' = 2, (x + 1)' = 1
        (
            "((derivative-F (lambda (x) ((derivative-R (lambda (y) (* y (- (* x x) 1)))) 3))) 2)",
            Some("4".into()),
        ),
        (
            "((derivative-F (lambda (x) ((derivative-R (lambda (y) (* y (- (* x x) 1.5)))) 3))) 2)",
            Some(f(4.0)),
        ),
        ("((derivative-F (lambda (x) ((derivative-F (lambda (y) (* y (+ x x)))) 3))) 2)", Some("2".into())),
        ("((derivative-F (lambda (x) ((derivative-F (lambda (y) (* y (+ x 1)))) 3))) 2)", Some("1".into())),
        (
            "((derivative-F (lambda (x) ((derivative-F (lambda (y) (* y (/ 1 (+ x 1))))) 3))) 1.0)",
            Some(f(-0.25)),
        ),
    ];
    cases.extend(more.into_iter().map(|(s, w)| (s.to_string(), w)));
    on_levels_alike(cases.iter().map(|(s, w)| (s.as_str(), w.as_deref())), 1e-14);
}

/// Reverse over forward: a forward level's duals whose values and tangents are
/// a tape's reals of doubles, with exact seeds and constants that meet doubles
/// (recorded unboxed) and exact numbers that meet each other (kept exact):
/// each printed as the transform prints it, and equal to its closed form
/// where given.
#[test]
fn reverse_over_forward_prints_as_the_transform() {
    let f = |x: f64| format!("{x:?}");
    let cases: Vec<(&str, Option<String>)> = vec![
        // d/dw of d/dx (x - w)(0 + x) = d/dw (2x - w) = -1
        (
            "((derivative-R (lambda (w) ((derivative-F (lambda (x) (* (- x w) (+ 0 x)))) 2.0))) 0.5)",
            Some(f(-1.0)),
        ),
        ("((derivative-R (derivative-F (lambda (x) (* x x)))) 3)", Some("2".into())),
        ("((derivative-R (derivative-F (lambda (x) (* 1.5 (* x x))))) 2.0)", Some(f(3.0))),
        // (1 + x^2)^(1/2)'' = (1 + x^2)^(-3/2); (1/x)'' = 2/x^3; log(2x)'' = -1/x^2;
        // exp(2x)'' = 4 exp(2x); sin(2x)'' = -4 sin(2x)
        ("((derivative-R (derivative-F (lambda (x) (sqrt (+ 1.0 (* x x)))))) 2.0)", Some(f(5f64.powf(-1.5)))),
        ("((derivative-R (derivative-F (lambda (x) (/ 1.0 x)))) 2.0)", Some(f(0.25))),
        ("((derivative-R (derivative-F (lambda (x) (log (* 2 x))))) 2.0)", Some(f(-0.25))),
        ("((derivative-R (derivative-F (lambda (x) (exp (* 2 x))))) 0.5)", Some(f(4.0 * 1f64.exp()))),
        ("((derivative-R (derivative-F (lambda (x) (sin (* 2 x))))) 0.5)", Some(f(-4.0 * 1f64.sin()))),
        // d/dy d/dx 2xy = 2; d/dy d/dx 2x(y - 1) = 2
        ("((derivative-R (lambda (y) ((derivative-F (lambda (x) (* 2 (* x y)))) 1.0))) 3)", Some(f(2.0))),
        (
            "((derivative-R (lambda (y) ((derivative-F (lambda (x) (* (* 2 x) (- y 1)))) 1.0))) 3.0)",
            Some(f(2.0)),
        ),
        // the inner derivative (d/dx (x + 1) = 1, exact: the seed meets an exact
        // constant's zero tangent; d/dx 3xw = 3w) and its derivative by w (0; 3)
        (
            "(value-and-vjp (lambda (w) ((derivative-F (lambda (x) (+ x 1))) w)) 2.0 1.0)",
            Some("(1 . 0.0)".into()),
        ),
        (
            "(value-and-vjp (lambda (w) ((derivative-F (lambda (x) (* (* x w) 3))) 2.0)) 2.0 1)",
            Some("(6.0 . 3.0)".into()),
        ),
        // Hessians by reverse over forward
        ("((jacobian-R (gradient-F (lambda (l) (* (car l) (- (cadr l) 0.5))))) (list 2.0 3.0))", None),
        ("((jacobian-R (gradient-F (lambda (l) (+ 0 (* (car l) (* (cadr l) (cadr l))))))) (list 2 3))", None),
        (
            "((jacobian-R (gradient-F (lambda (l) (+ 0 (* (car l) (* (cadr l) (cadr l))))))) (list 2.0 3.0))",
            None,
        ),
        ("((jacobian-R (gradient-F (lambda (l) (/ (car l) (- 1 (cadr l)))))) (list 2.0 3.0))", None),
    ];
    on_levels_alike(cases.iter().map(|(s, w)| (*s, w.as_deref())), 1e-14);
}

/// Comparisons of reals on levels (read in place, by their values, as the
/// primitive compares them): each branch taken as the transform takes it,
/// across levels, with equal values and NaN.
#[test]
fn comparisons_of_reals_on_levels_take_the_transforms_branches() {
    let cases: Vec<(&str, Option<&str>)> = vec![
        // d/dx (if x < 2 then x^2 else 3x): 2x = 3 at 1.5, 3 at 2.5
        ("((derivative-F (lambda (x) (if (< x 2.0) (* x x) (* 3.0 x)))) 1.5)", Some("3.0")),
        ("((derivative-R (lambda (x) (if (< 2.0 x) (* 3.0 x) (* x x)))) 2.5)", Some("3.0")),
        // NaN is not equal to itself (either branch's derivative is NaN here:
        // the two ways must agree)
        ("((derivative-F (lambda (x) (if (= x x) (* 2.0 x) (* 3.0 x)))) (/ 0.0 0.0))", None),
        // equal values: <= and >= hold, < and > do not
        ("((gradient-R (lambda (l) (if (<= (car l) (cadr l)) (* 2.0 (car l)) (* 5.0 (cadr l))))) (list 1.0 1.0))", None),
        ("((gradient-F (lambda (l) (if (> (car l) (cadr l)) (* 2.0 (car l)) (* 5.0 (cadr l))))) (list 1.0 1.0))", None),
        // an inner level's real against an enclosing level's: d/dy of y (x > y at x = 2, y = 1)
        ("((derivative-F (lambda (y) ((derivative-R (lambda (x) (if (> x y) (* x y) (- x y)))) 2.0))) 1.0)", None),
        ("((derivative-F (lambda (y) ((derivative-R (lambda (x) (if (>= y x) (* x y) (- x y)))) 2.0))) 1.0)", None),
    ];
    on_levels_alike(cases, 1e-15);
    // and the closed forms of the equal-values cases: (2 0) and (0 5)
    assert_eq!(alike("((gradient-R (lambda (l) (if (<= (car l) (cadr l)) (* 2.0 (car l)) (* 5.0 (cadr l))))) (list 1.0 1.0))").0.replace(".0", ""), "(2 0)");
    assert_eq!(alike("((gradient-F (lambda (l) (if (> (car l) (cadr l)) (* 2.0 (car l)) (* 5.0 (cadr l))))) (list 1.0 1.0))").0.replace(".0", ""), "(0 5)");
    // d/dy [d/dx x y] = 1 where x > y; d/dy [d/dx (x - y)] = 0 where y < x
    assert_eq!(alike("((derivative-F (lambda (y) ((derivative-R (lambda (x) (if (> x y) (* x y) (- x y)))) 2.0))) 1.0)").0.replace(".0", ""), "1");
    assert_eq!(alike("((derivative-F (lambda (y) ((derivative-R (lambda (x) (if (>= y x) (* x y) (- x y)))) 2.0))) 1.0)").0.replace(".0", ""), "0");
}

/// `gradient-F` under a forward level (forward over forward, as in the
/// particle's and the saddle's FF solves; at the top level too) takes its
/// gradient from one run of the function recorded on a tape and swept forward
/// once per real of its argument (`gradient_by_sweeps`): the same numbers and exactness as its
/// runs, so as the transform, and the closed forms. It leaves the gradient to
/// the runs where the function reads or writes (which must happen once a
/// run), where its result is not the tape's, and where the tape keeps a value
/// boxed.
#[test]
fn gradient_f_under_a_forward_level_by_one_recorded_run() {
    let f = |x: f64| format!("{x:?}");
    // f(v; w) = (v1 - w)(v2 + w^2): its gradient (v2 + w^2, v1 - w), whose
    // derivatives in w are (2w, -1)
    let pf = "(lambda (v) (* (- (car v) w) (+ (cadr v) (* w w))))";
    // g(v; w) = sin(w v1) + exp(v2 / w): dg/dv1 = w cos(w v1), whose derivative
    // in w is cos(w v1) - w v1 sin(w v1); dg/dv2 = exp(v2 / w) / w, whose is
    // -exp(v2 / w) (v2 / w + 1) / w^2
    let (w, v1, v2) = (0.9f64, 0.3f64, 0.7f64);
    let g1 = (w * v1).cos() - w * v1 * (w * v1).sin();
    let g2 = -(v2 / w).exp() * (v2 / w + 1.0) / (w * w);
    let pg = "(lambda (v) (+ (sin (* w (car v))) (exp (/ (cadr v) w))))";
    let swept: Vec<(String, Option<String>)> = vec![
        (format!("((derivative-F (lambda (w) (car ((gradient-F {pf}) (list 1.0 2.0))))) 0.5)"), Some(f(1.0))),
        (format!("((derivative-F (lambda (w) (cadr ((gradient-F {pf}) (list 1.0 2.0))))) 0.5)"), Some(f(-1.0))),
        // (w made a dual whose tangent is a double, 1.0: a product keeps its
        // operands, and a dual with an exact tangent, the seed 1, is kept
        // boxed, which a sweep does not read: see below)
        (format!("((derivative-F (lambda (u) (let ((w (* 1.0 u))) (car ((gradient-F {pg}) (list 0.3 0.7)))))) 0.9)"), Some(f(g1))),
        (format!("((derivative-F (lambda (u) (let ((w (* 1.0 u))) (cadr ((gradient-F {pg}) (list 0.3 0.7)))))) 0.9)"), Some(f(g2))),
        // a nested argument: h = v11 w v2, dh/dv11 = w v2 and dh/dv2 = v11 w,
        // whose derivatives in w are v2 = 3 and v11 = 1
        (
            "((derivative-F (lambda (u) (let ((w (* 1.0 u))) (caar ((gradient-F (lambda (v) (* (caar v) (* w (cadr v))))) (list (list 1.0 2.0) 3.0)))))) 0.5)".into(),
            Some(f(3.0)),
        ),
        (
            "((derivative-F (lambda (u) (let ((w (* 1.0 u))) (cadr ((gradient-F (lambda (v) (* (caar v) (* w (cadr v))))) (list (list 1.0 2.0) 3.0)))))) 0.5)".into(),
            Some(f(1.0)),
        ),
        // exact reals summed with an exact constant: the gradient (1 1), exact
        ("((derivative-F (lambda (w) (* w (car ((gradient-F (lambda (v) (+ (+ (car v) (cadr v)) 3))) (list 1 2)))))) 0.5)".into(), Some(f(1.0))),
        // every rule
        (
            "((derivative-F (lambda (u) (let ((w (+ u 0.0))) (cadr ((gradient-F (lambda (v) (atan (* w (log (car v))) (sqrt (- (cadr v) (/ w 3)))))) (list 1.5 2.0)))))) 0.5)".into(),
            None,
        ),
    ];
    for (src, want) in &swept {
        let (got, _, declined) = alike(src);
        if let Some(w) = want {
            let last = got.lines().last().unwrap_or("");
            assert_close(last.parse::<f64>().unwrap_or(f64::NAN), w.parse().unwrap(), 1e-13, src);
        }
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    }
    // at the top level (no enclosing forward level: the sweeps on doubles),
    // every rule, against the closed forms: the gradient of atan(u, s), u =
    // 0.5 log x, s = sqrt(y - 1/3), at (x, y) = (1.5, 2): (s (0.5/x), -u/(2s))
    // / (u^2 + s^2); of sin(x) cos(y) + exp(x y); and of 2 + (x + y) - 5 at
    // exact (1, 2), exact
    let (x, y) = (1.5f64, 2.0f64);
    let (u, s2) = (0.5 * x.ln(), (y - 1.0 / 3.0).sqrt());
    let r = u * u + s2 * s2;
    let top: Vec<(String, String)> = vec![
        (
            "((gradient-F (lambda (v) (atan (* 0.5 (log (car v))) (sqrt (- (cadr v) (/ 1.0 3)))))) (list 1.5 2.0))".into(),
            format!("{} {}", s2 * (0.5 / x) / r, -u / (2.0 * s2) / r),
        ),
        (
            "((gradient-F (lambda (v) (+ (* (sin (car v)) (cos (cadr v))) (exp (* (car v) (cadr v)))))) (list 1.5 2.0))".into(),
            format!(
                "{} {}",
                x.cos() * y.cos() + y * (x * y).exp(),
                -x.sin() * y.sin() + x * (x * y).exp()
            ),
        ),
        ("((gradient-F (lambda (v) (- (+ 2 (+ (car v) (cadr v))) 5))) (list 1 2))".into(), "1 1".into()),
    ];
    for (src, want) in &top {
        let (got, _, declined) = alike(src);
        let got: Vec<&str> = got.trim_matches(|c| c == '(' || c == ')').split(' ').collect();
        for (g, w) in got.iter().zip(want.split(' ')) {
            match (g.parse::<f64>(), w.parse::<f64>()) {
                (Ok(g), Ok(v)) if w.contains('.') => assert_close(g, v, 1e-13, src),
                _ => assert_eq!(*g, w, "{src}"),
            }
        }
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    }
    // the derivative, in an enclosing level's variable u that the function
    // does not read, of a gradient's component: the zero of that component,
    // exact where it is: the seed 1 and exact zeros, summed or differenced with
    // exact constants, stay exact (the first and third: 1), and meeting a
    // double they do not (the second: the zero of the real 2.0, and 0.0 + 0)
    for (src, want) in [
        ("((derivative-F (lambda (u) (car ((gradient-F (lambda (v) (- (+ (car v) 5) 3))) (list 1.0 2.0))))) 0.5)", "0"),
        ("((derivative-F (lambda (u) (cadr ((gradient-F (lambda (v) (- (+ (car v) 5) 3))) (list 1.0 2.0))))) 0.5)", "0.0"),
        ("((derivative-F (lambda (u) (cadr ((gradient-F (lambda (v) (+ (car v) (cadr v)))) (list 1 2))))) 0.5)", "0"),
    ] {
        let (got, _, declined) = alike(src);
        assert_eq!(got, want, "{src}");
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    }
    // the inner gradient written whole (outside the function; the outer
    // derivative then gives way to the transform, which writing its reals
    // does): exact where exact numbers meet, the seed 1 and exact constants
    // in sums
    for src in [
        "((derivative-F (lambda (w) (* w (car (write ((gradient-F (lambda (v) (- (+ (car v) 5) 3))) (list 1.0 2.0))))))) 0.5)",
        "((derivative-F (lambda (w) (* w (cadr (write ((gradient-F (lambda (v) (cadr v))) (list 1.0 2.0))))))) 0.5)",
    ] {
        let (got, _, _) = alike(src);
        let (_, s) = outcome(src, true);
        assert!(s.m.tape.swept > 0, "{src}: {got}");
    }
    // a Hessian by jacobian-F of gradient-F: jacobian-F records one run of
    // the gradient, whose own sweeps compute on that run's tape (one swept
    // gradient), making a `zero` node there for each input's zero, which
    // forward sweeps do not take: jacobian-F then takes its columns by runs,
    // and their gradients are left to runs (their duals' tangents, the exact
    // basis, are exact: kept boxed)
    let src =
        "((jacobian-F (gradient-F (lambda (l) (- (+ (car l) 5) (* (cadr l) (car l)))))) (list 2.0 3.0))";
    let (got, _, declined) = alike(src);
    assert_eq!(got, "((0.0 -1.0) (-1.0 0.0))", "{src}");
    let (_, s) = outcome(src, true);
    assert!(declined == 0 && s.m.tape.swept == 1, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    // left to the runs, the same way as the transform: output in the
    // function (written once a run), a result that is not the tape's, a
    // product with a dual whose tangent is exact (kept boxed), the duals of
    // two enclosing levels (forward over forward over forward)
    let fff = format!("((derivative-F (lambda (u) ((derivative-F (lambda (w) (car ((gradient-F {pf}) (list u 2.0))))) 0.5))) 1.0)");
    let runs = [
        fff.as_str(),
        "((derivative-F (lambda (w) (car ((gradient-F (lambda (v) (* w (car v)))) (list 1.0 2.0))))) 0.5)",
        "((derivative-F (lambda (w) (car ((gradient-F (lambda (v) (write (* w (car v))))) (list 1.0 2.0))))) 0.5)",
        "((derivative-F (lambda (w) (car ((gradient-F (lambda (v) w)) (list 1.0 2.0))))) 0.5)",
    ];
    for src in runs {
        alike(src);
        let (_, s) = outcome(src, true);
        assert_eq!(s.m.tape.swept, 0, "{src}");
    }
}

/// `gradient-F`'s forward sweeps over one recorded run take up to four
/// directions in one pass over the tape (`tape::sweep_directions`): for any
/// number of inputs, each in blocks of four and what is left, the gradient is
/// the closed form's and the transform's, exactness included.
/// f(v) = Σ k v_k² + v_1 v_n (k = 1..n): ∂f/∂v_k = 2 k v_k, plus v_n for
/// k = 1 and v_1 for k = n; at v_k = k/2, and at exact v_k = k (then an exact
/// gradient by the transform, which the sweeps match).
#[test]
fn gradient_f_sweeps_any_number_of_directions() {
    let defs =
        "(define (sq-sum v k) (if (null? v) 0 (+ (* k (* (car v) (car v))) (sq-sum (cdr v) (+ k 1)))))\n\
                (define (last l) (if (null? (cdr l)) (car l) (last (cdr l))))\n";
    let f = "(lambda (v) (+ (sq-sum v 1) (* (car v) (last v))))";
    for n in 1..=11usize {
        let v: Vec<f64> = (1..=n).map(|k| k as f64 / 2.0).collect();
        let list = v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(" ");
        let src = format!("{defs}((gradient-F {f}) (list {list}))");
        let (got, _, declined) = alike(&src);
        let got: Vec<f64> = got
            .lines()
            .last()
            .unwrap_or("")
            .trim_matches(|c| c == '(' || c == ')')
            .split(' ')
            .map(|g| g.parse().unwrap_or(f64::NAN))
            .collect();
        assert_eq!(got.len(), n, "{src}");
        for (k, g) in got.iter().enumerate() {
            let mut want = 2.0 * (k + 1) as f64 * v[k];
            if k == 0 {
                want += v[n - 1];
            }
            if k == n - 1 {
                want += v[0];
            }
            assert_close(*g, want, 1e-14, &format!("n = {n}, component {k}"));
        }
        swept_if_several(n, &src, declined);
        let exact = (1..=n).map(|k| k.to_string()).collect::<Vec<_>>().join(" ");
        let src = format!("{defs}((gradient-F {f}) (list {exact}))");
        let want: Vec<String> = (1..=n)
            .map(|k| (2 * k * k + if k == 1 { n } else { 0 } + if k == n { 1 } else { 0 }).to_string())
            .collect();
        let (got, _, declined) = alike(&src);
        assert_eq!(got.lines().last().unwrap_or(""), format!("({})", want.join(" ")), "{src}");
        swept_if_several(n, &src, declined);
    }
}

/// `gradient-F`'s sweeps on a tape longer than a chunk of nodes (4096: the
/// one-chunk tapes are swept by `tape::sweep_doubles`, longer ones chunk by
/// chunk) give the closed form's gradient and the transform's: f(v) = Σ_{i <
/// n} v1 v2 + v3 i (exact i, n = 3000), ∇f = (n v2, n v1, n(n-1)/2), at
/// (1.5, 2.0, 1.0) and at exact (3, 2, 1) (then exact, as the transform's).
#[test]
fn gradient_f_sweeps_a_tape_of_several_chunks() {
    let f = "(lambda (v) (let loop ((i 0) (acc 0)) (if (= i 3000) acc (loop (+ i 1) (+ (+ acc (* (car v) (cadr v))) (* (caddr v) i))))))";
    for (point, want) in
        [("(list 1.5 2.0 1.0)", "(6000.0 4500.0 4498500.0)"), ("(list 3 2 1)", "(6000 9000 4498500)")]
    {
        let src = format!("((gradient-F {f}) {point})");
        let (got, _, declined) = alike(&src);
        let got = got.lines().last().unwrap_or("").to_string();
        if point.contains('.') {
            let nums: Vec<f64> = got
                .trim_matches(|c| c == '(' || c == ')')
                .split(' ')
                .map(|g| g.parse().unwrap_or(f64::NAN))
                .collect();
            assert_eq!(nums, vec![6000.0, 4500.0, 4498500.0], "{src}");
        } else {
            assert_eq!(got, want, "{src}");
        }
        swept_if_several(3, &src, declined);
    }
}

/// For [`gradient_f_sweeps_any_number_of_directions`]: with two inputs or
/// more, `src`'s gradient came from the sweeps, none giving way.
fn swept_if_several(n: usize, src: &str, declined: u64) {
    if n > 1 {
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    }
}

/// `gradient-F` under an enclosing tape (reverse over forward, as in the
/// saddle's RF solve; forward over forward's outer level records on a tape
/// too) takes its gradient from one recorded run swept forward. Where no
/// tangent depends on the tape's reals (the function meets them only in sums
/// and differences, which keep no operand, and in operations of their own,
/// and its argument holds none) the sweeps compute on doubles. Where a
/// tangent's rule reads such a real (a product of it and the argument's
/// real), or the argument holds one (a gradient through an optimiser's
/// steps), they compute on the enclosing tape, recording there what the runs
/// would. The outer derivative flows through the function's value and its
/// gradient, as by the runs and the transform.
#[test]
fn gradient_f_under_a_tape_by_one_recorded_run() {
    // F(w) = w g1 + w^2, g = grad of v -> w^2 + v1 v2 - 3 v2 at (1, 2):
    // (v2, v1 - 3) = (2, -2), so F = 2w + w^2, F'(0.5) = 3; and with g2, F =
    // -2w + w^2, F'(0.5) = -1
    let inner = "(lambda (v) (- (+ (* w w) (* (car v) (cadr v))) (* 3.0 (cadr v))))";
    let swept = [
        (format!("((derivative-R (lambda (w) (+ (* w (car ((gradient-F {inner}) (list 1.0 2.0)))) (* w w)))) 0.5)"), 3.0),
        (format!("((derivative-R (lambda (w) (+ (* w (cadr ((gradient-F {inner}) (list 1.0 2.0)))) (* w w)))) 0.5)"), -1.0),
        // the saddle's shape: the value at a point the inner gradient found
        // (one step of ascent on -(v1^2 + v2^2) + w^2 from (1, 1), rate 0.25:
        // v = (0.5, 0.5)), differentiated in w through it: 2w = 1 (v's step
        // does not depend on w)
        (
            "((derivative-R (lambda (w) (let* ((f (lambda (v) (- (* w w) (+ (* (car v) (car v)) (* (cadr v) (cadr v)))))) (v (map2 + (list 1.0 1.0) (map (lambda (g) (* 0.25 g)) ((gradient-F f) (list 1.0 1.0)))))) (f v)))) 0.5)".into(),
            1.0,
        ),
        // gradient-R outside: d/du of u1 u2 + u1 g1 + u2 g2, g = (2, -2) as above
        // with w = u1: (u2 + 2, u1 - 2) at (0.5, 3)
        (
            format!("((gradient-R (lambda (u) (let* ((w (car u)) (g ((gradient-F {inner}) (list 1.0 2.0)))) (+ (* (car u) (cadr u)) (+ (* (car u) (car g)) (* (cadr u) (cadr g))))))) (list 0.5 3.0))"),
            5.0,
        ),
    ];
    for (src, want) in &swept {
        let (got, _, declined) = alike(src);
        let first = got.trim_start_matches('(').split([' ', ')']).next().unwrap_or("");
        assert_close(first.parse::<f64>().unwrap_or(f64::NAN), *want, 1e-13, &format!("{src}: {got}"));
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}, gave way {declined}", s.m.tape.swept);
    }
    // a tangent that depends on w: d/dv1 of w v1^2 at v1 = 1 is 2w, whose
    // derivative is 2; the argument holding w: d/dv1 of v1 v2 at (w, 2) is 2
    // (the derivative in w of d/dv2, v1 = w, is 1), of v1 v2 at (w, 2) times
    // w: 2w, whose derivative is 2; with a constant of the tape in a sum
    // (d/dv1 of v1 (v1 + w) at v1 = w is 3w); exact throughout: d/dv1 of w v1
    // v2 at (1, 2) is 2w, at (1, w) w^2 (derivative 6 at 3), d/dv2 of 2 v1 +
    // v2^2 at (1, w) 2w
    for (src, want) in [
        ("((derivative-R (lambda (w) (car ((gradient-F (lambda (v) (* w (* (car v) (car v))))) (list 1.0 2.0))))) 0.5)", "2.0"),
        ("((derivative-R (lambda (w) (cadr ((gradient-F (lambda (v) (+ (* (car v) (cadr v)) (* (car v) (car v))))) (list w 2.0))))) 0.5)", "1.0"),
        ("((derivative-R (lambda (w) (* w (car ((gradient-F (lambda (v) (* (car v) (cadr v)))) (list w 2.0)))))) 0.5)", "2.0"),
        ("((derivative-R (lambda (w) (car ((gradient-F (lambda (v) (* (car v) (+ (car v) w)))) (list w 2.0))))) 0.5)", "3.0"),
        ("((derivative-R (lambda (w) (car ((gradient-F (lambda (v) (* w (* (car v) (cadr v))))) (list 1 2))))) 1)", "2"),
        ("((derivative-R (lambda (w) (car ((gradient-F (lambda (v) (* w (* (car v) (cadr v))))) (list 1 w))))) 3)", "6"),
        ("((derivative-R (lambda (w) (cadr ((gradient-F (lambda (v) (+ (* 2 (car v)) (* (cadr v) (cadr v))))) (list 1 w))))) 3)", "2"),
    ] {
        let (got, _, _) = alike(src);
        assert_eq!(got, want, "{src}");
        let (_, s) = outcome(src, true);
        assert!(s.m.tape.swept > 0, "{src}");
    }
    // h(w) = d/dv1 of w v1 v2 at (1, 2) = 2w, its derivative 2, then h at 0.5
    // and 0.75 at the top level: each swept
    let src = "(define (h w) (car ((gradient-F (lambda (v) (* w (* (car v) (cadr v))))) (list 1.0 2.0))))\n\
               ((derivative-R h) 0.5)\n(h 0.5)\n(h 0.75)";
    let (got, _, _) = alike(src);
    assert_eq!(got, "2.0\n1.0\n1.5", "{src}");
    let (_, s) = outcome(src, true);
    assert_eq!(s.m.tape.swept, 3, "{src}");
}

/// `jacobian-F` and `hessian` take their columns (each a `jvp` along a unit
/// vector, exact 1 and 0) from one recorded run swept forward once per real
/// of the argument: the runs' columns (a metered session takes them by runs),
/// exact where theirs are, as the transform's; outputs that are constants get
/// their zeros. Exact integer arguments (kept boxed on the recorded tape) are
/// swept as numbers. Under an enclosing tape whose reals the argument holds,
/// swept on that tape.
#[test]
fn jacobians_and_hessians_by_one_recorded_run() {
    let rosen = "(lambda (l) (let loop ((l l) (acc 0.0)) (if (null? (cdr l)) acc \
        (loop (cdr l) (+ acc (+ (* 100. (let ((d (- (cadr l) (* (car l) (car l))))) (* d d))) (let ((e (- 1. (car l)))) (* e e))))))))";
    let cases = [
        // d2/dx2 of Rosenbrock's function in 4 and 3 variables, at doubles and
        // exact integers
        (format!("((hessian {rosen}) '(0.5 1.5 -0.3 2.0))"), Some("((-298.0 -200.0 0.0 0.0) (-200.0 3022.0 -600.0 0.0) (0.0 -600.0 -490.0 120.0) (0.0 0.0 120.0 200.0))")),
        (format!("((hessian {rosen}) '(1 2 3))"), Some("((402.0 -400.0 0.0) (-400.0 3802.0 -800.0) (0.0 -800.0 200.0))")),
        // xy: exact where the argument is
        ("((hessian (lambda (l) (* (car l) (cadr l)))) '(1 2))".into(), Some("((0 1) (1 0))")),
        ("((hessian (lambda (l) (* (car l) (cadr l)))) '(1.5 2.5))".into(), Some("((0.0 1.0) (1.0 0.0))")),
        // (x, 3, xy, 2.5): constant rows are the constants' zeros
        ("((jacobian-F (lambda (l) (list (car l) 3 (* (car l) (cadr l)) 2.5))) '(1 2))".into(), Some("((1 0) (0 0) (2 1) (0.0 0.0))")),
        ("((jacobian-F (lambda (l) (map (lambda (x) (* x x)) l))) '(1.0 -0.0 3.0))".into(), Some("((2.0 0.0 0.0) (-0.0 -0.0 -0.0) (0.0 0.0 6.0))")),
        ("((jacobian-F (lambda (l) (list (sin (* (car l) (cadr l))) (/ (car l) (cadr l))))) '(0.5 2.0))".into(), None),
    ];
    for (src, want) in &cases {
        let (got, _, declined) = alike(src);
        if let Some(w) = want {
            assert_eq!(got, *w, "{src}");
        }
        let (_, s) = outcome(src, true);
        assert!(declined == 0 && s.m.tape.swept > 0, "{src}: swept {}", s.m.tape.swept);
        let (mut runs, _) = session_with(true);
        runs.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
        let by_runs = run_in(&mut runs, "t", src).iter().map(vlad::print::to_string).collect::<Vec<_>>();
        assert_eq!(by_runs, std::slice::from_ref(&got), "the runs, for {src}");
        assert_eq!(runs.m.tape.swept, 0);
    }
    // under derivative-R, the argument holding w: d/dw of H11 of w x1^2 x2 at
    // (w, 2), 2 w x2 = 4w, is 4
    let src = "((derivative-R (lambda (w) (car (car ((hessian (lambda (l) (* w (* (car l) (* (car l) (cadr l)))))) (list w 2.0)))))) 0.5)";
    let (got, s) = outcome(src, true);
    assert_eq!(got, "4.0", "{src}");
    assert!(s.m.tape.swept > 0 && s.m.tape.declined_runs == 0, "{src}");
}

/// A gradient taken through an optimiser's steps (reverse over `gradient-F`):
/// the loss sum c_i x_i^2 after `n` steps of gradient descent at rate `eta`
/// from x = 1, each step's gradient by `gradient-F`, is sum c (1 - 2 eta
/// c)^(2n), whose derivative in eta is -4n sum c^2 (1 - 2 eta c)^(2n - 1).
/// Each step's gradient is swept on the outer tape (its argument holds the
/// tape's reals), giving the runs' value (a metered session makes the runs;
/// the outer sweep's sums go in another order, so to rounding), as the
/// transform and the other modes do.
#[test]
fn a_gradient_through_gradient_descent_is_swept_on_the_enclosing_tape() {
    let (n, eta, cs) = (12, 0.01, [1.0, 2.0, 3.0, 5.0]);
    let closed: f64 =
        cs.iter().map(|c: &f64| -4.0 * n as f64 * c * c * (1.0 - 2.0 * eta * c).powi(2 * n - 1)).sum();
    let program = |outer: &str, inner: &str| {
        format!(
            "(define cs '(1. 2. 3. 5.))\n\
             (define (loss x) (let loop ((c cs) (x x) (acc 0.)) (if (null? c) acc (loop (cdr c) (cdr x) (+ acc (* (car c) (* (car x) (car x))))))))\n\
             (define (descend eta) (let ((g ({inner} loss))) (let loop ((i 0) (x (map (lambda (c) 1.) cs))) (if (= i {n}) (loss x) (loop (+ i 1) (map2 (lambda (xi gi) (- xi (* eta gi))) x (g x)))))))\n\
             (({outer} descend) {eta})"
        )
    };
    let src = program("derivative-R", "gradient-F");
    let (got, s) = outcome(&src, true);
    assert_close(got.parse::<f64>().unwrap_or(f64::NAN), closed, 1e-12, &src);
    let t = &s.m.tape;
    assert!(t.swept >= n as u64 && t.declined_runs == 0, "swept {}, gave way {}", t.swept, t.declined_runs);
    let (mut runs, _) = session_with(true);
    runs.m.meter = Some(vec![0; vlad::prims::prims().len()].into());
    let by_runs = vlad::print::to_string(&run_in(&mut runs, "t", &src)[0]);
    assert_close(by_runs.parse::<f64>().unwrap_or(f64::NAN), closed, 1e-12, "the runs");
    assert_eq!(runs.m.tape.swept, 0);
    let (transform, _) = outcome(&src, false);
    assert_close(transform.parse::<f64>().unwrap_or(f64::NAN), closed, 1e-12, "the transform");
    for (outer, inner) in
        [("derivative-F", "gradient-F"), ("derivative-F", "gradient-R"), ("derivative-R", "gradient-R")]
    {
        let (other, _) = outcome(&program(outer, inner), true);
        assert_close(other.parse::<f64>().unwrap_or(f64::NAN), closed, 1e-12, &format!("{outer} of {inner}"));
    }
}

/// Nested derivatives hundreds of levels deep run on dual numbers at every level
/// (up to 1024 running levels; past 64 they went to the transform, whose cost
/// grows about ninefold a level on such a nesting: 65 levels ran for minutes).
/// Each level differentiates x² plus the (constant) value of the level inside it
/// at 1.5: 3 at every depth.
#[test]
fn nested_derivatives_hundreds_deep_stay_on_the_tape() {
    let def =
        "(define (deep n) (if (= n 0) 0.0 ((derivative (lambda (x) (+ (* x x) (deep (- n 1))))) 1.5)))\n";
    for (n, ms) in [(66, "derivative-F"), (400, "derivative-R")] {
        let src = format!("{}(deep {n})", def.replace("derivative ", &format!("{ms} ")));
        let (out, s) = outcome(&src, true);
        assert_eq!(out, "3.0", "depth {n}");
        assert_eq!(
            (s.m.tape.runs, s.m.tape.declined_runs),
            (n, 0),
            "depth {n}: (runs on the tape, given way)"
        );
    }
}
