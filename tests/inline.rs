//! Calls of small procedures run in place (`resolve::Inline`): a program must
//! behave exactly as when every call is made, in its values, its `--metered`
//! counts (procedure calls included), its `--max-steps` and `--max-depth`
//! limits, and its errors' messages and call traces (tail calls included,
//! whose frames a trace does not show); and the calls must in fact run in
//! place (else the comparison would test nothing). Likewise a primitive's
//! calls of a closure of one arithmetic operation computed without a frame
//! (`Machine::call_arith_body`), below.

mod common;

use common::outcome;
use vlad::resolve::{CBind, CBlock, CExpr};
use vlad::toplevel::Session;
use vlad::value::Value;

/// Programs whose calls of small global procedures run in place: chains of
/// them in and out of tail position, procedures reached by tail calls that
/// make one, tuple and destructured parameters, calls inside them, errors at
/// every level, recursion around them, and derivatives through them.
const PROGRAMS: &[&str] = &[
    // a tail chain ending in a failing primitive
    "(define (sq x) (* x x))
     (define (k x) (sq x))
     (define (h x) (k x))
     (define (g x) (+ 1 (h x)))
     (define (p x) (g x))
     (p 3) (p 2.5) (p #t)",
    // a procedure reached by tail calls whose tail call runs in place
    "(define (sq x) (* x x))
     (define (k x) (+ (sq x) 1))
     (define (h x) (k x))
     (define (loop n x) (if (= n 0) (h x) (loop (- n 1) x)))
     (define (top x) (* 2 (loop 3 x)))
     (top 4) (top #f)",
    // a destructured parameter called with one argument, and with a non-pair
    "(define (f (cons a b)) a)
     (define (g x) (f x))
     (define (w x) (+ 1 (g x)))
     (w (cons 1 2)) (w 5)",
    // a parameter read beyond its destructuring, passed several arguments
    // (its destructuring cannot be skipped) or one
    "(define (h x) (let (((cons a b) x)) (list x a)))
     (define (g x) (h x 5))
     (define (g1 x) (h x))
     (g 3) (g1 (cons 1 2)) (g1 4)",
    // a tuple parameter, and the wrong number of arguments
    "(define (f a b c) (+ a (* b c)))
     (define (g x) (f x x 2))
     (define (w x) (+ 1 (g x)))
     (define (bad x) (f x x))
     (w 5) (g 1.5) (f 1 2 3) (bad 1)",
    "(define (f a b c) (+ a (* b c)))
     (define (g x) (f x x #t))
     (g 5)",
    // a procedure run in place that makes a call (not in tail position)
    "(define (dot u v) (if (null? u) 0 (+ (* (car u) (car v)) (dot (cdr u) (cdr v)))))
     (define (magnitude v) (sqrt (dot v v)))
     (define (v- u v) (map2 - u v))
     (define (distance u v) (magnitude (v- u v)))
     (define (f x) (+ 1 (distance x (list 1 2))))
     (f (list 4 6)) (f (list 4.5 -1)) (f (list 1 #t)) (f 7)",
    // errors under recursion, through nested calls run in place
    "(define (sq x) (* x x))
     (define (d u) (sqrt (sq u)))
     (define (e u) (d u))
     (define (rec n x) (if (= n 0) (e x) (+ 1 (rec (- n 1) x))))
     (rec 5 2.0) (rec 5 #t)",
    "(define (sq x) (* x x))
     (define (rec n) (if (= n 0) 0 (+ (sq n) (rec (- n 1)))))
     (rec 30)",
    "(define (bad x) (car x))
     (define (m x) (bad (cdr x)))
     (define (n2 x) (m (cdr x)))
     (define (o x) (list (n2 x)))
     (o (list 1 2 3)) (o (list 1 2))",
    "(define (f x) (g2 x))
     (define (g2 x) (* x 2))
     (define (h x) (+ (f x) (f #t)))
     (h 1)",
    "(define (sq x) (* x x))
     (define (l x) (sq (sq (sq (sq (sq x))))))
     (l 1.0001) (l 3) (l #t)",
    // a procedure run in place that builds a closure, and errors inside it
    "(define (k*v k v) (map (lambda (x) (* k x)) v))
     (define (v+ u v) (map2 + u v))
     (define (step x v) (v+ x (k*v 0.5 v)))
     (define (adder k) (lambda (x) (+ k x)))
     (step (list 1 2) (list 3 4)) (step (list 1 2) (list 3 #t)) (step (list 1) 5)
     ((adder 3) 4) ((adder #t) 4) (map (adder 1) (list 1 2))",
    // callees with conditionals: a recursion and a loop (called: they call
    // themselves), the prelude's abs and max, a conditional in tail position
    // whose branch makes a call run in place, one bound to a variable whose
    // branch ends in one (not in tail position: it counts a level)
    "(define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))
     (define (loop i acc) (if (= i 0) acc (loop (- i 1) (+ acc 1))))
     (define (sq x) (* x x))
     (define (pick b x) (if b (sq x) (- x)))
     (define (sel b x) (let ((y (if b (sq x) x))) (+ y 1)))
     (define (f x) (+ (fact x) (+ (loop x 0) (+ (abs (- x 10)) (+ (max x 3) (+ (pick (> x 2) x) (sel #f x)))))))
     (define (g b x) (let ((y (if b (sq x) x))) (+ y (loop 2 0))))
     (f 5) (fact 4) (f #t) (pick #t (list 1)) (pick #t #f) (sel #t #f) (loop #t 0)
     (g #t 3) (g #t #f) (+ 1 (g #t #f))",
    // a callee run in place twice in one procedure, binding a variable it
    // never reads in a branch (and outside one), with a variable of the
    // caller's live between the two calls: each call binds its variables
    // afresh (a slot kept from the first call was written by the second,
    // over the caller's)
    "(define (noisy b x) (if b (let ((u (* x 2))) x) x))
     (define (noisy2 b x) (let ((u (* x 3))) (if b x u)))
     (define (g a) (let* ((p (noisy #t a)) (y (+ a 100)) (q (noisy #t a))) (list p y q)))
     (define (g2 a) (let* ((p (noisy2 #t a)) (y (+ a 100)) (q (noisy2 #f a))) (list p y q)))
     (define (g3 a) (let* ((p (noisy #f a)) (y (noisy #t (+ a 1))) (q (noisy #t a)) (r (noisy #t y))) (list p y q r)))
     (g 1) (g2 1) (g3 5) (g 1.5)",
    // the pair a callee run in place returns, taken apart at once
    "(define (swap2 p) (cons (cdr p) (car p)))
     (define (mk a b) (list a b (* a b)))
     (define (h x) (let (((cons p q) (swap2 x))) (+ p (* 10 q))))
     (define (k a) (let (((list u v w) (mk a (+ a 1)))) (list w v u)))
     (define (bad x) (let (((cons p q) (swap2 x))) p))
     (h (cons 1 2)) (k 3) ((gradient-R (lambda (v) (h (cons (car v) (cadr v))))) (list 1.0 2.0))
     (hvp (lambda (v) (car (k (car v)))) (list 2.0) (list 1.0)) (bad 5)",
    // procedures passed as arguments (called through a variable)
    "(define (ap f x) (f x))
     (define (tw f x) (ap f (ap f x)))
     (define (bad x) (car x))
     (tw (lambda (x) (* 2 x)) 5) (tw bad 5)",
    "(define (id x) x)
     (define (k x) (id (id (id x))))
     (define (r n) (if (= n 0) 0 (k (+ 1 (r (- n 1))))))
     (r 20)",
    // derivatives of code calling procedures run in place, in every mode
    "(define (sq x) (* x x))
     (define (f x) (sq (sin x)))
     (define (p v) (+ (sq (car v)) (* 3 (sq (cadr v)))))
     ((derivative-R f) 3.0) ((derivative-F f) 0.5)
     ((gradient-R p) (list 2.0 1.0)) ((gradient-F p) (list 2.0 1.0))
     (hvp p (list 2.0 1.0) (list 1.0 0.5)) (hvp-RR p (list 2.0 1.0) (list 1.0 0.5))
     ((derivative-F (lambda (x) ((derivative-R f) x))) 3.0)
     ((derivative-R (derivative-R f)) 0.25)
     ((derivative-R f) #t)",
    // the transforms called directly
    "(define (sq x) (* x x))
     (define (f x) (+ (sq x) x))
     (cdr (unsensitize ((cdr ((*j f) (*j 3.0))) (sensitize 1.0))))
     (unperturb (tangent ((j* f) (bundle 2.0 (perturb 1.0)))))",
    // the prelude's small procedures (jvp inside hvp...)
    "(define (f v) (* (car v) (cadr v)))
     (hvp f (list 1.0 2.0) (list 1 0))
     (jvp f (list 1.0 2.0) (list 1 1))
     (vjp f (list 1.0 2.0) 1)",
    // a procedure of four parameters and seven operations (its parameter's
    // parts not counted against the bound): called with four arguments, and
    // with one tuple; failing; differentiated
    "(define (f x1 y1 x2 y2) (- (+ (* x1 x1) (* y1 y1)) (+ (* x2 x2) (* y2 y2))))
     (define (mk x) (lambda (y) (f (car x) (cadr x) (car y) (cadr y))))
     (define (g a) (+ 1 (f a a 2 a)))
     (define (tup p) (f p))
     ((mk (list 1.0 2.0)) (list 3.0 4.0)) (g 3) (tup (cons 1 (cons 2 (cons 3 4)))) (g #t) (tup (list 1 2))
     ((gradient-R (mk (list 1.0 2.0))) (list 3.0 4.0)) ((gradient-F (lambda (v) (g (car v)))) (list 2.0))",
    // procedures whose body is a named `let` (its loop run in place): its
    // value the procedure's, or used; in a conditional's branch; a loop in
    // tail position of another's body; calls in tail position of the loop's
    // body (run in place, or made: not run in place); a loop that escapes
    // (a procedure, not a loop); one calling the procedure from its body;
    // failing at the first iteration and later; through every AD mode
    "(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
     (define (mag v) (sqrt (dot v v)))
     (define (dist u v) (mag (map2 - u v)))
     (define (sum-to n) (let loop ((i 0) (acc 0)) (if (= i n) acc (loop (+ i 1) (+ acc i)))))
     (define (fac n) (if (< n 0) 0 (let loop ((i n) (acc 1)) (if (= i 0) acc (loop (- i 1) (* acc i))))))
     (define (used n) (+ 1 (let loop ((i n) (acc 0)) (if (= i 0) acc (loop (- i 1) (+ acc 2))))))
     (define (two n) (let o ((i 0) (acc 0)) (if (= i n) acc (let p ((j 0)) (if (< j 2) (p (+ j 1)) (o (+ i 1) (+ acc j)))))))
     (define (sq x) (* x x))
     (define (ends n) (let loop ((i 0)) (if (= i n) (sq i) (loop (+ i 1)))))
     (define (ends-bad n) (let loop ((i 0)) (if (= i n) (sq (list i)) (loop (+ i 1)))))
     (define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
     (define (calls n) (let loop ((i 0)) (if (= i n) (fib i) (loop (+ i 1)))))
     (define (esc n) (let loop ((i 0)) (if (< i n) (loop (+ i 1)) loop)))
     (define (back n) (let loop ((i 0)) (if (< i 2) (loop (+ i 1)) (if (= n 0) i (+ 1 (back (- n 1)))))))
     (define (deep n) (if (= n 0) 0 (+ 1 (deep2 (- n 1)))))
     (define (deep2 n) (let loop ((i 0)) (if (= i 1) (deep n) (loop (+ i 1)))))
     (mag (list 3 4)) (dist (list 1.0 2.0) (list 4.0 6.0)) (+ 1 (sum-to 10)) (list (fac 5) (fac -1) (used 3))
     (two 3) (+ 1 (ends 3)) (ends-bad 2) (+ 1 (ends-bad 2)) (calls 6) (procedure? (esc 2)) (back 3) (deep 7)
     (mag (list 1 #t)) (+ 1 (dist (list 1.0) 5)) (sum-to #t) (fac #t) (two #t)
     ((gradient-R (lambda (v) (* (mag v) (dot v v)))) (list 1.0 2.0 2.0))
     ((gradient-F (lambda (v) (* (mag v) (dot v v)))) (list 1.0 2.0 2.0))
     (hvp (lambda (v) (dist v (list 0.5 0.25))) (list 1.0 2.0) (list 1.0 0.5))
     ((derivative-R (lambda (x) (fac (sum-to (used x))))) 1)
     (cdr (unsensitize ((cdr ((*j mag) (*j (list 3.0 4.0)))) (sensitize 1.0))))",
    // procedures bound by a `let` to lambdas capturing nothing (run in
    // place behind a guard): called in the `let`'s body and by procedures
    // built there, in tail position and not, of one operation or several,
    // calling one another, failing; in procedures rebuilt by `%with-env`
    // with another procedure in their place (the guard fails: the call is
    // made, in tail position and not); differentiated
    "(define (saddle-f a b)
       (let* ((f (lambda (x1 y1 x2 y2) (- (+ (* x1 x1) (* y1 y1)) (+ (* x2 x2) (* y2 y2)))))
              (sq (lambda (x) (* x x)))
              (g (lambda (x) (+ 1 (sq x))))
              (in (lambda (y) (f a b (car y) (cadr y))))
              (out (lambda (y) (+ 1 (f a b (car y) (g (cadr y)))))))
         (list (in (list 1 2)) (out (list 3 4)) (g a) in out)))
     (define (mk k) (let ((h (lambda (x) (* x x)))) (lambda (y) (h (+ y k)))))
     (define (mk2 k) (let ((h (lambda (x) (* x x)))) (lambda (y) (+ 1 (h (+ y k))))))
     (car (saddle-f 1 2)) (cadr (saddle-f 1.5 2)) (saddle-f #t 2) ((list-ref (saddle-f 1 2) 3) (list 1 #t))
     ((mk 1) 2) ((mk2 1) 2) ((mk 1) #t) ((mk2 1) #t)
     ((%with-env (mk 1) (list 1 (lambda (x) (* -1 x)))) 2)
     ((%with-env (mk2 1) (list 1 (lambda (x) (* -1 x)))) 2)
     ((%with-env (mk2 1) (list 1 (lambda (x) (car x)))) 2)
     ((%with-env (mk 1) (list 1 5)) 2)
     ((gradient-R (lambda (v) (car (saddle-f (car v) (cadr v))))) (list 1.0 2.0))
     ((gradient-F (lambda (v) ((mk2 (car v)) (cadr v)))) (list 1.0 2.0))
     ((derivative-R (mk 0.5)) 2.0) ((derivative-F (mk2 0.5)) 2.0)
     (hvp (lambda (v) ((list-ref (saddle-f (car v) 2.0) 3) v)) (list 1.0 2.0) (list 1.0 0.5))
     (hvp-RR (lambda (v) ((list-ref (saddle-f (car v) 2.0) 4) v)) (list 1.0 2.0) (list 1.0 0.5))",
];

/// [`outcome`] metered, with calls of small procedures run in place or not.
fn outcome_inline(src: &str, inline: bool, limit: Option<(&str, u64)>) -> String {
    let configure = |m: &mut vlad::eval::Machine| {
        m.inline_calls = inline;
        m.meter = Some(vec![0; vlad::prims::prims().len()].into());
    };
    outcome(src, &configure, limit)
}

/// A depth (`("depth", n)`) or step (`("steps", n)`) limit, or none.
type Limit<'a> = Option<(&'a str, u64)>;

/// Each of [`PROGRAMS`] shows the same (`show(src, inline, limit)`) with
/// calls run in place and without, unlimited and at each of a few depth and
/// step limits.
fn programs_agree(show: &dyn Fn(&str, bool, Limit) -> String) {
    for src in PROGRAMS {
        let limits: Vec<Option<(&str, u64)>> = std::iter::once(None)
            .chain([2, 3, 4, 5, 8, 24].map(|n| Some(("depth", n))))
            .chain([1, 3, 6, 10, 25, 60].map(|n| Some(("steps", n))))
            .collect();
        for limit in limits {
            let (on, off) = (show(src, true, limit), show(src, false, limit));
            assert_eq!(on, off, "program (limit {limit:?}):\n{src}");
        }
    }
}

#[test]
fn calls_run_in_place_behave_as_calls() {
    programs_agree(&outcome_inline);
}

/// The same unmetered (metering makes every operation by the primitive's
/// call): a call run in place whose body is one operation is then computed
/// at once (`Machine::inline_arith`), on numbers and on a level's reals.
#[test]
fn calls_run_in_place_behave_as_calls_unmetered() {
    let unmetered = |src: &str, inline: bool, limit: Option<(&str, u64)>| {
        outcome(src, &|m: &mut vlad::eval::Machine| m.inline_calls = inline, limit)
    };
    programs_agree(&unmetered);
    // (values by hand: sq applied five times to 3 is 3^32; d/dx sin(x)^2 at
    // 3 is 2 sin 3 cos 3)
    let first = |out: &str| -> f64 { out.lines().next().and_then(|l| l.parse().ok()).expect(out) };
    let out = unmetered(PROGRAMS[11], true, None);
    assert_eq!(first(&out), (0..5).fold(1.0001f64, |x, _| x * x), "{out}");
    assert!(out.contains("\n1853020188851841\n"), "{out}");
    let out = unmetered(PROGRAMS[18], true, None);
    assert!((first(&out) - 2.0 * 3.0f64.sin() * 3.0f64.cos()).abs() < 1e-15, "{out}");
}

/// Whether a block runs a call in place (at any depth of its conditionals).
fn has_inline(b: &CBlock) -> bool {
    let expr = |e: &CExpr| match e {
        CExpr::Inline(_) | CExpr::Guarded(_) => true,
        CExpr::If(_, t, f) => has_inline(t) || has_inline(f),
        _ => false,
    };
    b.binds.iter().any(|bind| matches!(bind, CBind::Let(_, e) | CBind::Split(e, ..) if expr(e)))
        || expr(&b.tail)
}

/// The procedure a program's last expression gives runs calls in place (or not).
fn runs_in_place(defs: &str, name: &str, inline: bool) -> bool {
    let mut s = Session::new();
    s.m.inline_calls = inline;
    let v = s.run_text("t.vlad", &format!("{defs}\n{name}\n")).expect("the program runs");
    let Some(Value::Closure(inst, 0)) = v.last() else { panic!("{name} is not a procedure") };
    s.m.group_code(&inst.group).expect("its code");
    let code = inst.group.code.get().expect("resolved");
    code.members.iter().any(|m| has_inline(&m.body))
}

#[test]
fn small_procedures_run_in_place() {
    let defs = "(define (sq x) (* x x))
                (define (f3 a b c) (+ a (* b c)))
                (define (loop n) (if (= n 0) 0 (loop (- n 1))))
                (define (g x) (+ (sq x) (f3 x x x)))
                (define (h x) (+ 1 (loop x)))
                (define (k x) (sq (loop x)))";
    assert!(runs_in_place(defs, "g", true));
    assert!(!runs_in_place(defs, "g", false), "inline_calls off");
    // a loop: called (its tail call is not run in place)
    assert!(!runs_in_place(defs, "h", true));
    assert!(runs_in_place(defs, "k", true));
    // a conditional: run in place
    let defs = "(define (f x) (+ 1 (abs x)))";
    assert!(runs_in_place(defs, "f", true));
    // a callee building a closure
    let defs = "(define (k*v k v) (map (lambda (x) (* k x)) v)) (define (f v) (car (k*v 2 v)))";
    assert!(runs_in_place(defs, "f", true));
    // a named `let`'s small loop: run in place, as a loop; a large one, or
    // one whose body's tail call is made, not run in place
    let defs = "(define (dot u v) (let loop ((u u) (v v) (acc 0)) (if (null? u) acc (loop (cdr u) (cdr v) (+ acc (* (car u) (car v)))))))
                (define (mag v) (sqrt (dot v v)))
                (define (big n) (let loop ((i 0) (a 0)) (if (= i n) a (loop (+ i 1) (+ a (* i (+ i (* i (+ i (* i (+ i (* i (+ i 1)))))))))))))
                (define (g n) (+ 1 (big n)))
                (define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
                (define (calls n) (let loop ((i 0)) (if (= i n) (fib i) (loop (+ i 1)))))
                (define (h n) (+ 1 (calls n)))";
    assert!(runs_in_place(defs, "mag", true));
    assert!(in_place_loop(defs, "mag"));
    assert!(!runs_in_place(defs, "g", true), "more than INLINE_LOOP_BINDS");
    assert!(!runs_in_place(defs, "h", true), "a call in tail position of the loop's body");
    // four parameters, seven operations: the bindings taking the parameter
    // apart not counted
    let defs = "(define (f x1 y1 x2 y2) (- (+ (* x1 x1) (* y1 y1)) (+ (* x2 x2) (* y2 y2))))
                (define (g a) (+ 1 (f a a 2 a)))
                (define (f9 a b) (* (* (* a b) (* a b)) (* (* a b) (* (* a b) (* (* a b) (* a b))))))
                (define (h a) (+ 1 (f9 a a)))";
    assert!(runs_in_place(defs, "g", true));
    assert!(!runs_in_place(defs, "h", true), "nine operations");
    // a procedure bound by a `let` to a lambda capturing nothing: called
    // from a procedure built in its scope; one capturing a value is not
    let defs = "(define (mk k) (let ((h (lambda (x) (* x x)))) (lambda (y) (+ 1 (h (+ y k))))))
                (define (mk2 k) (let ((h (lambda (x) (* x k)))) (lambda (y) (+ 1 (h y)))))";
    assert!(runs_in_place(defs, "(mk 1)", true));
    assert!(!runs_in_place(defs, "(mk 1)", false), "inline_calls off");
    assert!(!runs_in_place(defs, "(mk2 1)", true), "h captures k");
}

/// Whether a procedure's code runs a loop inside a call run in place.
fn in_place_loop(defs: &str, name: &str) -> bool {
    fn inline_loop(b: &CBlock) -> bool {
        let found = |e: &CExpr| match e {
            CExpr::Inline(il) => has_loop(&il.body) || inline_loop(&il.body),
            CExpr::Guarded(g) => has_loop(&g.inline.body) || inline_loop(&g.inline.body),
            CExpr::If(_, t, f) => inline_loop(t) || inline_loop(f),
            _ => false,
        };
        b.binds.iter().any(|x| matches!(x, CBind::Let(_, e) if found(e))) || found(&b.tail)
    }
    let mut s = Session::new();
    let v = s.run_text("t.vlad", &format!("{defs}\n{name}\n")).expect("the program runs");
    let Some(Value::Closure(inst, 0)) = v.last() else { panic!("{name} is not a procedure") };
    s.m.group_code(&inst.group).expect("its code");
    let code = inst.group.code.get().expect("resolved");
    code.members.iter().any(|m| inline_loop(&m.body))
}

// A primitive's call of a closure whose body is one arithmetic operation
// (`map` of `(lambda (x) (* k x))`) is computed without a frame
// (`Machine::call_arith_body`): a program must behave exactly as when the call
// is made, in its values, its errors and their traces, its count of steps, and
// its `--max-steps` and `--max-depth` limits, on numbers and on the reals of
// every AD mode; and such closures must in fact be recognised.

/// Programs mapping closures of one arithmetic operation.
const ARITH_PROGRAMS: &[&str] = &[
    // numbers: doubles, machine integers, a captured value, a constant on
    // either side, `(- x 1)` (`Arith2Int`), comparisons
    "(define (k*v k v) (map (lambda (x) (* k x)) v))
     (k*v 2 (list 1 2.5 -3)) (k*v 0.5 (list 4 5))
     (map (lambda (x) (- x 1)) (list 1 2.5 3))
     (map (lambda (x) (+ 1.5 x)) (list 1 2))
     (map (lambda (x) (/ 1.0 x)) (list 4 0.5 0))
     (map (lambda (x) (< x 2)) (list 1 2 3))",
    // where the inline arithmetic does not apply: exact results beyond machine
    // integers, exact division, a non-number (an error, with its trace)
    "(define (k*v k v) (map (lambda (x) (* k x)) v))
     (map (lambda (x) (* x 4611686018427387904)) (list 4 1))
     (map (lambda (x) (/ x 3)) (list 1 6 -2))
     (k*v 2 (list 1 #t 3))
     (map (lambda (x) (+ x 1)) (list 1 (list 2)))",
    // the reals of every AD mode, nested
    "(define (k*v k v) (map (lambda (x) (* k x)) v))
     (define (f x) (reduce + 0 (k*v 3.0 (map (lambda (xi) (* xi xi)) x))))
     ((gradient-F f) (list 1.0 2.0))
     ((gradient-R f) (list 1.0 2.0))
     (hvp f (list 1.0 2.0) (list 1.0 0.5))
     (hvp-RR f (list 1.0 2.0) (list 1.0 0.5))
     ((gradient-F (lambda (w) (car ((gradient-R (lambda (x) (reduce + 0 (k*v (car w) x)))) (list 1.0 2.0))))) (list 3.0))
     ((gradient-R (lambda (w) ((derivative-F (lambda (s) (reduce + 0 (k*v s w)))) 2.0))) (list 1.0 2.0))
     ((gradient-R (lambda (x) (reduce + 0 (map (lambda (xi) (- xi 1)) x)))) (list 1 2))",
    // calls nested deeply (for --max-depth) and many (for --max-steps)
    "(define (deep n) (if (= n 0) (map (lambda (x) (* 2 x)) (list 1 2 3)) (cons n (deep (- n 1)))))
     (deep 3) (deep 6)
     (define (spin n acc) (if (= n 0) acc (spin (- n 1) (map (lambda (x) (+ x 1)) acc))))
     (spin 20 (list 1 2 3))",
];

/// [`outcome`] (not metered: metering makes every call), with calls of
/// one-operation closures computed without a frame or not.
fn outcome_arith(src: &str, fast: bool, limit: Option<(&str, u64)>) -> String {
    outcome(src, &|m: &mut vlad::eval::Machine| m.arith_bodies = fast, limit)
}

#[test]
fn calls_computed_without_a_frame_behave_as_calls() {
    for src in ARITH_PROGRAMS {
        let limits: Vec<Option<(&str, u64)>> = std::iter::once(None)
            .chain([2, 3, 4, 5, 6, 8, 24].map(|n| Some(("depth", n))))
            .chain([1, 3, 6, 10, 25, 60, 200, 1000].map(|n| Some(("steps", n))))
            .collect();
        for limit in limits {
            let (on, off) = (outcome_arith(src, true, limit), outcome_arith(src, false, limit));
            assert_eq!(on, off, "program (limit {limit:?}):\n{src}");
        }
    }
    // (the values themselves, derived by hand: 3 x^2 summed has gradient 6x)
    let out = outcome_arith(ARITH_PROGRAMS[2], true, None);
    assert!(out.starts_with("(6.0 12.0)\n"), "{out}");
}

/// The closures above are the ones recognised (once called, when their code
/// is resolved), and others are not.
#[test]
fn one_operation_bodies_are_recognised() {
    let mut s = Session::new();
    s.m.out = Box::new(std::io::sink());
    let value = |s: &mut Session, src: &str| {
        let vs = s.run_text("t.vlad", src).unwrap_or_else(|e| panic!("{}", e.render(&s.sources)));
        vs.last().cloned().expect("a value")
    };
    for (f, call, yes) in [
        ("(let ((k 2)) (lambda (x) (* k x)))", "(map g (list 1 2))", true),
        ("(lambda (x) (- x 1))", "(map g (list 1 2))", true),
        ("(lambda (x) (/ 1.0 x))", "(map g (list 1 2))", true),
        ("(lambda (x) (< x 2))", "(map g (list 1 2))", true),
        ("(lambda (x) (* (+ x 1) 2))", "(map g (list 1 2))", false),
        ("(lambda (x y) (* x y))", "(map2 g (list 1 2) (list 3 4))", false),
        ("(lambda (x) x)", "(map g (list 1 2))", false),
    ] {
        let v = value(&mut s, &format!("(define g {f})\n{call}\ng"));
        assert_eq!(vlad::eval::has_arith_body(&v), yes, "{f}");
    }
}

// Named `let`s called only in tail position run as loops in their procedure's
// frame (`resolve::Loop`): a program must behave exactly as when each is a
// procedure called, in its values, its `--metered` counts, its `--max-steps`
// and `--max-depth` limits, and its errors' messages and traces; and such
// loops must in fact be made.

/// Programs with named `let`s: loops of one and several variables, swapping
/// and rotating them, nested in each other's tail positions, capturing the
/// procedure's variables and building closures over their own, calling
/// procedures (run in place or not, recursive), failing at each point, and
/// differentiated in every mode.
const LOOPS: &[&str] = &[
    // procedures defined at the top level calling themselves in tail
    // position (their own loops): one variable and several, swapped and
    // rotated, a list walked, failing at the first iteration and later, a
    // call with other arguments (made), calls not in tail position beside
    // tail ones, a named let's loop inside calling the procedure, a
    // destructured parameter, a procedure passed as a value, one held by
    // another global than the one it calls (that call made), and
    // derivatives through them in every mode
    "(define (count i n) (if (= i n) i (count (+ i 1) n)))
     (define (swap a b k) (if (= k 0) (list a b) (swap b a (- k 1))))
     (define (rot a b c k) (if (= k 0) (list a b c) (rot c a b (- k 1))))
     (define (down n) (if (= n 0) #t (down (- n 1))))
     (define (walk xs acc) (if (null? xs) acc (walk (cdr xs) (+ acc (car xs)))))
     (count 0 10) (swap 1 2 5) (rot 1 2 3 4) (walk (list 1 2 3) 0) (walk (list 1 #t 3) 0)
     (walk 5 0) (count #t 3) (swap 1 2 #t) (+ 1 (walk (list 1 2) 0)) (down 3) (down #t)",
    "(define (f n acc) (if (= n 0) acc (if (= n 7) (f (- n 1)) (f (- n 1) (+ acc n)))))
     (define (g n acc) (if (= n 0) acc (if (< n 4) (g (- n 1) (+ acc (g 0 n))) (g (- n 1) acc))))
     (define (h n) (let loop ((i 0)) (if (< i 3) (loop (+ i 1)) (if (= n 0) i (h (- n 1))))))
     (define (d (cons a b) k) (if (= k 0) (list a b) (d (cons b a) (- k 1))))
     (define (ap fn x) (fn x 0))
     (f 5 0) (f 9 0) (g 6 0) (h 4) (d (cons 1 2) 3) (d 5 1) (ap f 4) (ap count -3)",
    "(define (mk) (lambda (n) (if (= n 0) 0 (hh (- n 1)))))
     (define hh (mk))
     (define hh2 (mk))
     (define (pw x n acc) (if (= n 0) acc (pw x (- n 1) (* acc x))))
     (define (sumsq v acc) (if (null? v) acc (sumsq (cdr v) (+ acc (* (car v) (car v))))))
     (hh2 3) (hh 2) (hh2 #t)
     ((derivative-R (lambda (x) (pw x 3 1.0))) 2.0) ((derivative-F (lambda (x) (pw x 3 1.0))) 2.0)
     ((gradient-R (lambda (v) (sumsq v 0))) (list 1.0 2.0 3.0))
     ((gradient-F (lambda (v) (sumsq v 0))) (list 1.0 2.0 3.0))
     (hvp (lambda (v) (sumsq v 0)) (list 1.0 2.0) (list 1.0 0.5))
     ((derivative-F (lambda (y) ((derivative-R (lambda (x) (pw x 3 y))) 2.0))) 1.5)
     ((derivative-R (lambda (x) (pw x 3 1.0))) #t)",
    "(define (swap n) (let loop ((a 1) (b 2) (i 0)) (if (= i n) (list a b) (loop b a (+ i 1)))))
     (define (rot n) (let loop ((a 1) (b 2) (c 3) (i 0)) (if (= i n) (list a b c) (loop c a b (+ i 1)))))
     (define (dup n) (let loop ((a 1) (b 2) (i 0)) (if (= i n) (list a b) (loop (+ a b) a (+ i 1)))))
     (swap 3) (rot 4) (dup 10) (swap #t) (rot (list 1))",
    "(define (sum xs) (let loop ((xs xs) (acc 0)) (if (null? xs) acc (loop (cdr xs) (+ acc (car xs))))))
     (define (g xs) (+ 1 (sum xs)))
     (g (list 1 2 3)) (g (list 1 #t 3)) (g 5) (sum (list 1.5 2.5))",
    "(define (nest n) (let o ((i 0) (acc '())) (if (= i n) acc (let p ((j 0) (acc acc)) (if (= j i) (o (+ i 1) acc) (p (+ j 1) (cons (list i j) acc)))))))
     (define (tail-inner n) (let o ((i 0)) (if (< i n) (o (+ i 1)) (let p ((j i) (acc '())) (if (= j 0) (car acc) (p (- j 1) (cons j acc)))))))
     (nest 4) (tail-inner 5) (tail-inner 0) (nest #t)",
    "(define (clos n) (let loop ((i 0) (fs '())) (if (= i n) (map (lambda (f) (f 10)) fs) (loop (+ i 1) (cons (lambda (x) (+ x i)) fs)))))
     (define (capt k xs) (let loop ((xs xs) (acc '())) (if (null? xs) acc (loop (cdr xs) (cons (* k (car xs)) acc)))))
     (clos 4) (capt 3 (list 1 2 3)) (capt #t (list 1))",
    "(define (sq x) (* x x))
     (define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))
     (define (h x) (let* ((a (* x 2)) (b (+ a 1))) (fact b)))
     (define (f n) (let loop ((i 0) (acc 0)) (if (= i n) acc (loop (+ i 1) (+ acc (+ (sq i) (+ (h i) (fact i))))))))
     (define (e n) (let loop ((i 0)) (if (= i n) (fact #t) (loop (+ i 1)))))
     (define (t n) (let loop ((i 0)) (if (= i n) (sq (list i)) (loop (+ i 1)))))
     (f 4) (e 3) (t 2) (+ 1 (t 2))",
    "(define (esc n) (let loop ((i 0)) (if (< i n) (loop (+ i 1)) loop)))
     (define (non-tail n) (let loop ((i 0)) (if (< i n) (+ 1 (loop (+ i 1))) i)))
     (define (mixed n) (let loop ((a 0) (b 0)) (if (= a n) (list a b) (if (= a 2) (loop (cons (+ a 1) (+ b 1))) (loop (+ a 1) (+ b 2))))))
     (procedure? (esc 3)) (non-tail 5) (mixed 4) (non-tail #t)",
    "(define (ev-od n) (letrec ((ev (lambda (n) (if (= n 0) #t (od (- n 1))))) (od (lambda (n) (if (= n 0) #f (ev (- n 1)))))) (ev n)))
     (define (sib n) (letrec ((f (lambda (n) (let loop ((i 0) (acc 0)) (if (= i n) acc (loop (+ i 1) (+ acc (g i))))))) (g (lambda (x) (* x x)))) (f n)))
     (ev-od 11) (sib 5) (sib #t)",
    "(define (sumsq xs) (let loop ((xs xs) (acc 0.0)) (if (null? xs) acc (loop (cdr xs) (+ acc (* (car xs) (car xs)))))))
     (define (pw x) (let loop ((i 0) (y x)) (if (= i 3) y (loop (+ i 1) (* y x)))))
     (define (newton f x0) (let loop ((x x0) (i 0)) (if (= i 8) x (loop (- x (/ (f x) ((derivative-R f) x))) (+ i 1)))))
     ((gradient-R sumsq) (list 1.0 2.0 3.0)) ((gradient-F sumsq) (list 1.0 2.0 3.0))
     ((derivative-R pw) 2.0) ((derivative-F pw) 2.0) ((derivative-R (derivative-R pw)) 2.0)
     ((derivative-F (derivative-R pw)) 2.0) (hvp sumsq (list 1.0 2.0) (list 1.0 0.5))
     ((derivative-R (lambda (c) (newton (lambda (x) (- (* x x) c)) 1.0))) 2.0)
     ((derivative-F (lambda (c) (newton (lambda (x) (- (* x x) c)) 1.0))) 2.0)
     ((derivative-R pw) #t)",
    "(define (cnt n) (let loop ((i 0)) (if (= i n) i (loop (+ i 1)))))
     (define (deep n) (if (= n 0) (cnt 100) (+ 1 (deep (- n 1)))))
     (deep 3) (cnt #t)",
    // (initial values computed: their code comes between the loop's
    // procedure and its first call, and reads what the loop captures)
    "(define (sq x) (* x x))
     (define (am f x) (let loop ((x x) (fx (f x)) (i 0)) (if (= i 5) (list x fx) (let ((xp (- x 0.5))) (if (< (f xp) fx) (loop xp (f xp) (+ i 1)) (loop x fx (+ i 1)))))))
     (define (two n) (let outer ((i 0) (acc (list n))) (if (= i n) acc (let inner ((j (* 2 i)) (k (sq i))) (if (> j k) (outer (+ i 1) (cons j acc)) (inner (+ j 1) k))))))
     (define (bad n) (let loop ((i (sq n)) (j (car n))) (if (= i 0) j (loop (- i 1) j))))
     (am sq 3.0) (two 4) (bad 2) (am sq #t)
     ((derivative-R (lambda (c) (car (am (lambda (x) (* c x x)) 3.0)))) 2.0)
     ((gradient-F (lambda (v) (cadr (am (lambda (x) (* (car v) x (cadr v))) 3.0)))) (list 1.0 2.0))",
    // (named `let`s whose values are used: loops run as inner blocks)
    "(define (f n) (+ 1 (let loop ((i 0) (acc 0)) (if (< i n) (loop (+ i 1) (+ acc i)) acc))))
     (define (g xs) (let ((s (let loop ((xs xs) (s 0)) (if (null? xs) s (loop (cdr xs) (+ s (car xs))))))) (/ s (length xs))))
     (define (h n) (let ((a (let p ((i 0)) (if (< i n) (p (+ i 1)) (* i 2)))) (b (let q ((j n) (acc '())) (if (= j 0) acc (q (- j 1) (cons (let r ((k j) (m 1)) (if (= k 0) m (r (- k 1) (* m 2)))) acc)))))) (list a b)))
     (define (e n) (* 2 (let loop ((i 0)) (if (< i n) (loop (+ i 1)) (car i)))))
     (define (d n) (list (let loop ((i n)) (if (= i 0) #t (loop (- i 1)))) (let loop ((i (car n))) i)))
     (define (w f n) (+ 1 (let loop ((i 0) (x (f 1.0))) (if (= i n) x (loop (+ i 1) (f x))))))
     (define (m n) (let o ((i 0) (acc 0)) (if (= i n) acc (o (+ i 1) (+ acc (let p ((j 0) (s 0)) (if (> j i) s (p (+ j 1) (+ s j)))))))))
     (define (k n) (+ 0 (let o ((i 0)) (if (= i n) i (let p ((j 0)) (if (< j 2) (p (+ j 1)) (o (+ i 1))))))))
     (define (v f x) (* (f x) (let loop ((i 0) (y (f x))) (if (= i 3) (+ y x) (loop (+ i 1) (f y))))))
     (define (two f n) (list (let a ((i (f n)) (s (f 1))) (if (< i 0) s (a (- i 1) (+ s i)))) (f n) (let b ((j (f n))) (if (< j 5) j (b (- j 5))))))
     (f 10) (g (list 1 2 3 4)) (h 3) (e 0) (e 3) (d 2) (d #t) (w (lambda (x) (* x 1.5)) 3) (m 4) (k 3) (g 5)
     (define (sp n) (let (((cons a b) (let loop ((i 0)) (if (< i n) (loop (+ i 1)) (cons i (* i 2)))))) (+ a b)))
     (define (sq2 (list a b)) (+ a b))
     (define (sl n) (sq2 (let loop ((i 0)) (if (< i n) (loop (+ i 1)) (list i 2)))))
     (v (lambda (x) (* x 2)) 3) (two (lambda (x) (* x 3)) 4) (two (lambda (x) (* x 3)) #t) (v car (list 1))
     (sp 4) (sl 3) (sp #t) (sl 0)
     ((derivative-R (lambda (c) (w (lambda (x) (* c x)) 3))) 2.0)
     ((derivative-F (lambda (c) (w (lambda (x) (* c x)) 3))) 2.0)
     ((gradient-R g) (list 1.0 2.0 3.0)) ((gradient-F g) (list 1.0 2.0 3.0))",
];

/// [`outcome`] metered, with named `let`s run as loops or not.
fn outcome_loops(src: &str, loops: bool, limit: Option<(&str, u64)>) -> String {
    let configure = |m: &mut vlad::eval::Machine| {
        m.named_let_loops = loops;
        m.meter = Some(vec![0; vlad::prims::prims().len()].into());
    };
    outcome(src, &configure, limit)
}

#[test]
fn named_lets_run_as_loops_behave_as_procedures() {
    for src in LOOPS {
        let limits: Vec<Option<(&str, u64)>> = std::iter::once(None)
            .chain([2, 3, 4, 6, 24].map(|n| Some(("depth", n))))
            .chain([1, 3, 6, 10, 25, 60, 5000].map(|n| Some(("steps", n))))
            .collect();
        for limit in limits {
            let (on, off) = (outcome_loops(src, true, limit), outcome_loops(src, false, limit));
            assert_eq!(on, off, "program (limit {limit:?}):\n{src}");
        }
    }
}

/// Whether a block runs a loop (at any depth of its conditionals, as its
/// tail or as a binding's value).
fn has_loop(b: &CBlock) -> bool {
    let bound = b.binds.iter().any(|x| matches!(x, CBind::Let(_, CExpr::Loop(_))));
    bound
        || match &b.tail {
            CExpr::Loop(_) => true,
            CExpr::If(_, t, f) => has_loop(t) || has_loop(f),
            _ => false,
        }
}

#[test]
fn named_lets_in_tail_position_are_loops() {
    let code = |loops: bool, name: &str| {
        let mut s = Session::new();
        s.m.named_let_loops = loops;
        let defs = "(define (sum xs) (let loop ((xs xs) (acc 0)) (if (null? xs) acc (loop (cdr xs) (+ acc (car xs))))))
                    (define (non-tail n) (let loop ((i 0)) (if (< i n) (+ 1 (loop (+ i 1))) i)))
                    (define (computed f x) (let loop ((x x) (fx (f x))) (if (< fx 1) x (loop (- x 1) (f (- x 1))))))
                    (define (used n) (* 2 (let loop ((i 0)) (if (< i n) (loop (+ i 1)) i))))";
        let v = s.run_text("t.vlad", &format!("{defs}\n{name}\n")).expect("the program runs");
        let Some(Value::Closure(inst, 0)) = v.last() else { panic!("{name} is not a procedure") };
        s.m.group_code(&inst.group).expect("its code");
        has_loop(&inst.group.code.get().expect("resolved").members[0].body)
    };
    assert!(code(true, "sum"));
    assert!(!code(false, "sum"), "named_let_loops off");
    assert!(!code(true, "non-tail"));
    assert!(code(true, "computed"), "initial values computed between the procedure and its call");
    assert!(code(true, "used"), "a named let whose value is used");
    assert!(!code(false, "used"));
}

#[test]
fn procedures_calling_themselves_in_tail_position_are_loops() {
    let code = |loops: bool, name: &str| {
        let mut s = Session::new();
        s.m.named_let_loops = loops;
        let defs = "(define (count i n) (if (= i n) i (count (+ i 1) n)))
                    (define (walk xs acc) (if (null? xs) acc (walk (cdr xs) (+ acc (car xs)))))
                    (define (down n) (if (= n 0) #t (down (- n 1))))
                    (define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))
                    (define (other n acc) (if (= n 0) acc (other n)))";
        let v = s.run_text("t.vlad", &format!("{defs}\n{name}\n")).expect("the program runs");
        let Some(Value::Closure(inst, 0)) = v.last() else { panic!("{name} is not a procedure") };
        s.m.group_code(&inst.group).expect("its code");
        has_loop(&inst.group.code.get().expect("resolved").members[0].body)
    };
    assert!(code(true, "count"));
    assert!(code(true, "walk"));
    assert!(code(true, "down"));
    assert!(!code(false, "count"), "named_let_loops off");
    assert!(!code(true, "fact"), "no call in tail position");
    assert!(!code(true, "other"), "a call with other arguments");
    // (the values, by hand: 3 x^2 at 2 is 12; 2v for the sum of squares)
    let mut s = Session::new();
    let v = s
        .run_text(
            "t.vlad",
            "(define (pw x n acc) (if (= n 0) acc (pw x (- n 1) (* acc x))))
             (define (sumsq v acc) (if (null? v) acc (sumsq (cdr v) (+ acc (* (car v) (car v))))))
             (define (count i n) (if (= i n) i (count (+ i 1) n)))
             ((derivative-R (lambda (x) (pw x 3 1.0))) 2.0)
             ((gradient-R (lambda (v) (sumsq v 0))) (list 1.0 2.0 3.0))
             (count 0 100000)",
        )
        .expect("the program runs");
    let shown: Vec<String> = v.iter().map(vlad::print::to_string).collect();
    assert_eq!(shown, ["12.0", "(2.0 4.0 6.0)", "100000"]);
}
