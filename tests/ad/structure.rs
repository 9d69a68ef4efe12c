//! Item 9: the AD primitives as operations on values: how tagged values print,
//! that inverses undo, `zero`/`plus` on aggregates, and clear errors (never
//! panics) on misuse.

use crate::common::*;
use vlad::print::to_string;
use vlad::value::Value;

fn shown(src: &str) -> Vec<String> {
    run(src).iter().map(to_string).collect()
}

#[test]
fn tagged_values_print() {
    assert_eq!(
        shown(
            "(*j 3)\n(bundle 1 (perturb 2))\n(sensitize 4)\n(perturb 5)\n(*j 2.5)\n\
             (*j '())\n(*j (list 1 2))\n(perturb (cons 1 2))\n(bundle '() '())\n(*j (*j 3))"
        ),
        [
            "(reverse 3)",
            "(forward 1 (perturbation 2))",
            "(sensitivity 4)",
            "(perturbation 5)",
            "(reverse 2.5)",
            "()",
            "((reverse 1) (reverse 2))",
            "((perturbation 1) . (perturbation 2))",
            "()",
            "(reverse (reverse 3))",
        ]
    );
}

#[test]
fn predicates_see_the_outer_tag() {
    assert_eq!(
        shown(
            "(reverse? (*j 3))\n(reverse? 3)\n(sensitivity? (sensitize 1))\n(perturbation? (perturb 1))\n\
             (forward? (bundle 1 (perturb 2)))\n(forward? (perturb 2))\n(reverse? (*j (lambda (x) x)))\n\
             (forward? (j* (lambda (x) x)))\n(reverse? (*j (cons 1 2)))\n(procedure? (*j sin))\n\
             (procedure? (j* (lambda (x) x)))\n(real? (*j 1))"
        ),
        ["#t", "#f", "#t", "#t", "#t", "#f", "#t", "#t", "#t", "#t", "#t", "#f"]
    );
    // `()` is the same at every tag depth: a tagged pair whose first part is
    // `()` is tagged by the parts after it (a list of 10^5 `()` before the
    // tagged part is walked in a loop); all `()` is tagged by nothing
    assert_eq!(
        shown(
            "(perturbation? (perturb (cons '() 3.0)))\n(reverse? (*j (list '() '() 2.0)))\n\
             (forward? (bundle (cons '() 1.0) (perturb (cons '() 3.0))))\n\
             (sensitivity? (sensitize (cons (list '() '()) 1)))\n(reverse? (*j (list '() '())))\n\
             (perturbation? (cons '() (*j 1)))\n\
             (define (nils n acc) (if (= n 0) acc (nils (- n 1) (cons '() acc))))\n\
             (reverse? (*j (nils 100000 (list 5))))"
        ),
        ["#t", "#t", "#t", "#t", "#f", "#f", "#t"]
    );
}

#[test]
fn inverses_undo() {
    let v = shown(
        "(*j-inverse (*j 3))\n(*j-inverse (*j 2.5))\n(*j-inverse (*j (cons 1 (cons 2.5 '()))))\n\
         (*j-inverse (*j '()))\n(*j-inverse (*j (*j 4)))\n(*j-inverse (*j-inverse (*j (*j 4))))\n\
         (unsensitize (sensitize (list 1 2)))\n(unperturb (perturb 7))\n\
         (primal (bundle 1 (perturb 2)))\n(tangent (bundle 1 (perturb 2)))\n\
         (primal (bundle (cons 1 2) (perturb (cons 3 4))))\n(tangent (bundle (cons 1 2) (perturb (cons 3 4))))\n\
         (*j-inverse (*j sin))\n(primal (j* cos))\n(*j-inverse (*j #t))",
    );
    assert_eq!(
        v,
        [
            "3",
            "2.5",
            "(1 2.5)",
            "()",
            "(reverse 4)",
            "4",
            "(1 2)",
            "7",
            "1",
            "(perturbation 2)",
            "(1 . 2)",
            "((perturbation 3) . (perturbation 4))",
            "sin",
            "cos",
            "#t",
        ]
    );
}

/// `*j-inverse` of a transformed closure is a closure that behaves like the
/// original (same code, same environment), including recursive closures and
/// closures capturing closures; likewise `primal` of a bundled closure.
#[test]
fn inverses_undo_on_closures() {
    let v = run("(define (mk a) (lambda (z) (+ (* a z) 1.0)))\n\
         (define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))\n\
         (define (compose f g) (lambda (x) (f (g x))))\n\
         ((*j-inverse (*j (mk 3.0))) 2.0)\n\
         ((*j-inverse (*j fact)) 5)\n\
         ((*j-inverse (*j (compose (mk 2.0) (mk 5.0)))) 1.0)\n\
         ((primal (j* (mk 3.0))) 2.0)\n\
         ((primal (bundle (mk 3.0) (perturb (mk 1.0)))) 2.0)\n\
         ((*j-inverse (*j-inverse (*j (*j (compose sin (mk 2.0)))))) 0.25)\n\
         (procedure? (tangent (bundle (mk 3.0) (perturb (mk 1.0)))))");
    assert_close(num(&v[0]), 7.0, 0.0, "mk");
    assert_close(num(&v[1]), 120.0, 0.0, "fact");
    assert_close(num(&v[2]), 13.0, 0.0, "compose");
    assert_close(num(&v[3]), 7.0, 0.0, "primal of j*");
    assert_close(num(&v[4]), 7.0, 0.0, "primal of bundle");
    assert_close(num(&v[5]), 1.5f64.sin(), 1e-15, "double *j");
    assert!(matches!(v[6], Value::Bool(true)));
    // the closures print as the same lambda as the original
    let p = shown("(define (mk a) (lambda (z) (+ (* a z) 1.0)))\n(mk 3.0)\n(*j-inverse (*j (mk 3.0)))");
    assert_eq!(p[0], p[1]);
}

#[test]
fn zero_and_plus() {
    assert_eq!(
        shown(
            "(zero 3)\n(zero 2.5)\n(zero (cons 1 2.5))\n(zero (list 1 (cons 2 3) '()))\n(zero #t)\n(zero '())\n\
             (plus (cons 1 2) (cons 3 4))\n(plus (list 1.5 (cons 2 3)) (list 1 (cons 1 1)))\n(plus '() '())\n\
             (plus (sensitize 1) (sensitize 2))\n(plus (*j 1) (*j 2))\n(zero (*j (cons 1 2.0)))\n(zero sin)"
        ),
        [
            "0",
            "0.0",
            "(0 . 0.0)",
            "(0 (0 . 0) ())",
            "#t",
            "()",
            "(4 . 6)",
            "(2.5 (3 . 4))",
            "()",
            "(sensitivity 3)",
            "(reverse 3)",
            "((reverse 0) . (reverse 0.0))",
            "()",
        ]
    );
    // zero of a closure is the closure with a zeroed environment; plus adds environments
    let v = run("(define (mk a) (lambda (z) (* a z)))\n\
         ((zero (mk 3.0)) 2.0)\n((plus (mk 3.0) (mk 4.5)) 2.0)");
    assert_close(num(&v[0]), 0.0, 0.0, "zero closure");
    assert_close(num(&v[1]), 15.0, 0.0, "plus closures");
}

/// Misuse is a VLAD error with a message naming the primitive, not a panic.
#[test]
fn misuse_is_a_clear_error() {
    let cases: &[(&str, &str)] = &[
        ("(*j-inverse 3)", "\\*j-inverse: expected a reverse value, got 3"),
        ("(*j-inverse (cons 1 2))", "\\*j-inverse"),
        ("(*j-inverse (lambda (x) x))", "\\*j-inverse"),
        ("(*j-inverse sin)", "\\*j-inverse"),
        ("(primal 3)", "primal: expected a forward"),
        ("(tangent 3)", "tangent: expected a forward"),
        ("(primal (*j 3))", "primal"),
        ("(tangent (lambda (x) x))", "tangent"),
        ("(unperturb 3)", "unperturb: expected a perturbation"),
        ("(unsensitize (perturb 3))", "unsensitize: expected a sensitivity"),
        ("(plus 1 (cons 1 2))", "plus: values do not conform"),
        ("(plus (cons 1 2) (cons 1 '()))", "plus"),
        ("(plus (sensitize 1) (perturb 1))", "plus"),
        ("(plus (lambda (x) x) (lambda (y) y))", "plus"),
        ("(plus #t 1)", "plus"),
        ("(bundle 1 2)", "bundle: the tangent must be a perturbation"),
        ("(bundle (cons 1 2) (perturb 3))", "bundle"),
        ("(bundle 1 (perturb (cons 1 2)))", "bundle"),
        ("(bundle (lambda (x) x) (perturb 1))", "bundle"),
        ("(+ (*j 1) 2)", "\\+"),
        ("(sin (perturb 1))", "sin"),
        ("(sin (bundle 1 (perturb 2)))", "sin"),
        ("((derivative-R (lambda (x) (car x))) 1.0)", "pair"),
        ("((derivative-F (lambda (x) (car x))) 1.0)", "pair"),
        // (vjp checks ybar's shape against the result's where it enters)
        (
            "(vjp sin 1.0 (cons 1 2))",
            "^vjp: the sensitivity must be shaped like the function's result: the result is a real, \
             the sensitivity is a pair \\(1 . 2\\)",
        ),
        ("(vjp (lambda (x) (list x x)) 1.0 (list 1.0 2.0 3.0))", "at \\(cddr ...\\) the result has \\(\\)"),
        // (a procedure's sensitivity is a procedure or `()`: data there was
        // passed on, or made `vjp` recurse until memory ran out)
        (
            "(vjp (lambda (f) f) car (cons 1.0 2.0))",
            "^vjp: the sensitivity must be shaped like the function's result: the result is a procedure, \
             the sensitivity is a pair \\(1.0 . 2.0\\)",
        ),
        (
            "(vjp (lambda (f) (cons f 2.0)) car (cons (cons 1.0 '()) 3.0))",
            "at \\(car ...\\) the result has a procedure, the sensitivity has a pair \\(1.0\\)",
        ),
        ("(vjp (lambda (f) f) car 1.0)", "the result is a procedure, the sensitivity is the real 1.0"),
        // (a boolean's is a boolean or `()`, a reversible procedure's a procedure
        // or `()`: data there was passed on, by the tape as by the transform)
        (
            "(vjp (lambda (x) (cons #t x)) 1.0 (cons (cons 1.0 '()) 3.0))",
            "at \\(car ...\\) the result has a boolean, the sensitivity has a pair \\(1.0\\)",
        ),
        ("(vjp (lambda (x) (cons #t x)) 1.0 (cons 2.0 3.0))", "the result has a boolean, the sensitivity has the real 2.0"),
        ("(jvp (lambda (x) (cdr x)) (cons #t 3.0) (cons 1.0 3.0))", "the argument has a boolean, the tangent has the real 1.0"),
        (
            "(define-reversible (step x y) (+= y (* x x)))\n(vjp (lambda (x) (cons step x)) 1.0 (cons 2.0 3.0))",
            "the result has a reversible procedure, the sensitivity has the real 2.0",
        ),
        (
            "(define-reversible (step x y) (+= y (* x x)))\n(jvp (lambda (x) (cdr x)) (cons step 3.0) (cons 1.0 3.0))",
            "the argument has a reversible procedure, the tangent has the real 1.0",
        ),
        ("(vjp j* car (cons 1 2))", "the result is a procedure, the sensitivity is a pair \\(1 . 2\\)"),
        (
            "(vjp (lambda (x) (lambda (y) (* x y))) 2.0 (cons 1 2))",
            "the result is a procedure, the sensitivity is a pair \\(1 . 2\\)",
        ),
        (
            "(jvp (lambda (f) (f 2.0)) sin 1.0)",
            "^jvp: the tangent must be shaped like the argument: the argument is a procedure, the tangent is the real 1.0",
        ),
        // (jvp checks dx's shape against the argument's where it enters: it was
        // found where the function took the bundled argument apart, as a bundle
        // of its parts, its tags showing)
        (
            "(jvp sin 1.0 (cons 1 2))",
            "^jvp: the tangent must be shaped like the argument: the argument is a real, \
             the tangent is a pair \\(1 . 2\\)",
        ),
        (
            "(jvp (lambda (v) (car v)) (list 1.0) (list 1.0 2.0))",
            "^jvp: the tangent must be shaped like the argument: at \\(cdr ...\\) the argument has \\(\\), \
             the tangent has a pair \\(2.0\\)",
        ),
        (
            "(hvp (lambda (v) (car v)) (list 1.0) (list 1.0 2.0))",
            "^jvp: the tangent must be shaped like the argument",
        ),
        ("(jvp (lambda (v) v) 1.0 #t)", "the argument is a real, the tangent is a boolean #t"),
        (
            "((derivative-F (lambda (v) (car v))) (list 1.0 2.0))",
            "the argument is a pair, the tangent is the real 1 \\(derivative-F takes a real: \
             for a function of a list or vector, use gradient-F",
        ),
        // (a derivative of data: it was reported as the application of the
        // transformed value, `cannot apply (reverse 5)`)
        ("((derivative-R 5) 1.0)", "^derivative-R/gradient-R: expected a procedure to differentiate, got 5"),
        (
            "((gradient-F (list 1)) (list 1.0))",
            "^gradient-F: expected a procedure to differentiate, got \\(1\\)",
        ),
        ("((derivative-F #t) 1.0)", "^jvp/derivative-F: expected a procedure to differentiate, got #t"),
        ("(vjp 2.5 1.0 1.0)", "^vjp: expected a procedure to differentiate, got 2.5 \\(a real\\)"),
        // (a real given where a pair is expected, in code differentiated by
        // either mode: said to be one)
        (
            "((gradient-R (lambda (v) (car v))) 3.0)",
            "got \\(reverse 3.0\\) \\(a real under reverse-mode AD\\)",
        ),
        ("((gradient-F (lambda (v) (car v))) 3.0)", "\\(a real under forward-mode AD\\)"),
        ("(plus 1)", "plus"),
        // reverse-mode derivatives and gradients seed the result with 1: only
        // a real result can take it (at any nesting)
        (
            "((derivative-R (lambda (x) (list x x))) 1.0)",
            "derivative-R/gradient-R: the function must return a real, got \\(1.0 1.0\\)",
        ),
        ("((gradient-R (lambda (l) (cdr l))) (list 1.0 2.0))", "must return a real, got \\(2.0\\)"),
        ("((gradient-R (lambda (l) (null? l))) (list 1.0))", "must return a real, got #f"),
        ("((derivative-R (lambda (x) '())) 1.0)", "must return a real, got \\(\\)"),
        (
            "((derivative-F (lambda (y) ((derivative-R (lambda (x) (cons x y))) 2.0))) 1.0)",
            "must return a real, got \\(2.0 . 1.0\\)",
        ),
        (
            "((derivative-R (lambda (y) ((gradient-R (lambda (l) (list (car l) y))) (list 2.0)))) 1.0)",
            "must return a real",
        ),
        // a backpropagator given something that is not a sensitivity: reported
        // whether the result is constant or its sensitivity is passed on
        ("((cdr ((*j (lambda (x) 3)) (*j 2.0))) 1.0)", "unsensitize: expected a sensitivity"),
        (
            "((cdr ((*j (lambda (x) (cdr x))) (*j (cons 1.0 2.0)))) 1.0)",
            "unsensitize: expected a sensitivity",
        ),
        ("((cdr ((*j (lambda (x) (abs x))) (*j 2.0))) 1.0)", "unsensitize: expected a sensitivity"),
    ];
    for (src, pat) in cases {
        let r = std::panic::catch_unwind(|| session().run_text("misuse", src).map(|v| v.len()))
            .unwrap_or_else(|_| panic!("{} panicked instead of failing with an error", src));
        let msg = match r {
            Ok(_) => panic!("{} succeeded; expected an error", src),
            Err(e) => e.message.clone(),
        };
        let re = regex::Regex::new(pat).unwrap();
        assert!(re.is_match(&msg), "{}: error {:?} does not match {:?}", src, msg, pat);
    }
}

/// Errors raised in code the interpreter generates (primitive rules,
/// backpropagators) are located at the nearest call in source code, never at
/// `<unknown>` or at the start of the prelude: an error in a primitive's
/// derivative rule at the primitive's use in the differentiated code (in both
/// modes), and the trace names the backpropagator's call.
#[test]
fn errors_in_generated_code_are_located() {
    // (source, the first line's pattern, a pattern for a line of the trace)
    let cases: &[(&str, Option<&str>, Option<&str>)] = &[
        (
            "\n((*j (lambda (x) (* x x))) 3.0)",
            Some("misuse:2:1: error: .*must be applied to a reverse value"),
            None,
        ),
        // (the bad sensitivity reaches the backpropagator of `(* x x)`, which
        // reports it; the call that passed it is in the trace)
        (
            "\n((cdr ((*j (lambda (x) (* x x))) (*j 3.0))) 1.0)",
            Some("misuse:2:24: error: unsensitize"),
            Some("in backpropagator of lambda called at misuse:2:1"),
        ),
        ("(vjp (lambda (x) (cons x x)) 1.0 2.0)", None, None),
        ("(vjp (lambda (x) (if (< x 0) x (cons x x))) 1.0 2.0)", None, None),
        ("(vjp sin 1.0 (cons 1 2))", None, None),
        // d/dx sqrt at an exact 0: 1/(2 sqrt 0), an exact division by zero
        // in sqrt's rule, placed at `(sqrt x)` whichever mode runs it
        (
            "(define (f x) (+ 1 (sqrt x)))\n((derivative-R f) 0)",
            Some("misuse:1:20: error: /: exact division by zero"),
            Some("in backpropagator of f$"),
        ),
        (
            "(define (f x) (+ 1 (sqrt x)))\n((derivative-F f) 0)",
            Some("misuse:1:20: error: /: exact division by zero"),
            None,
        ),
        (
            "(define (g x) (* x (sqrt x)))\n(define (f x) (+ 1 (g x)))\n((derivative-R f) 0)",
            Some("misuse:1:20: error: /: exact division by zero"),
            Some("in backpropagator of g called at misuse:2:20"),
        ),
        (
            "((gradient-R (lambda (v) (sqrt (car v)))) (list 0 1))",
            Some("misuse:1:26: error: /: exact division by zero"),
            None,
        ),
        (
            "((derivative-R (lambda (x) ((derivative-R (lambda (y) (* x (sqrt y)))) x))) 0)",
            Some("misuse:1:60: error: /: exact division by zero"),
            None,
        ),
    ];
    for (src, first_line, in_trace) in cases {
        let mut s = session();
        let e = match s.run_text("misuse", src) {
            Ok(_) => panic!("{} succeeded", src),
            Err(e) => e.render(&s.sources),
        };
        assert!(!e.contains("<unknown>") && !e.contains("base.vlad:1:1"), "{}:\n{}", src, e);
        assert!(e.lines().next().unwrap().contains(": error: "), "{}:\n{}", src, e);
        if let Some(re) = first_line {
            let re = regex::Regex::new(re).unwrap();
            assert!(re.is_match(e.lines().next().unwrap()), "{}:\n{}", src, e);
        }
        if let Some(re) = in_trace {
            let re = regex::Regex::new(re).unwrap();
            assert!(e.lines().any(|l| re.is_match(l.trim())), "{}:\n{}", src, e);
        }
    }
}

/// Every test above again, with the prelude's `jvp`/`vjp` run by the closure
/// transforms only (as `--no-tape`): the tests above run them on dual numbers
/// and tapes. (A new test above belongs in this list too.)
#[test]
fn all_of_the_above_by_the_transform() {
    by_transform(&[
        tagged_values_print,
        predicates_see_the_outer_tag,
        inverses_undo,
        inverses_undo_on_closures,
        zero_and_plus,
        misuse_is_a_clear_error,
        errors_in_generated_code_are_located,
    ]);
}
