//! Unit tests of resolution: how parameters are bound (the tuple fast path) and
//! where variables live (slots, environment, siblings); the fast path must give
//! the same results as the general path.

use super::*;
use crate::anf::tests::norm as group;
use crate::toplevel::Session;

fn code(g: &Group) -> GroupCode {
    resolve_group(g, g.members.get().unwrap(), None, true)
}

/// (number of parts, bindings skipped) of a tuple parameter; None for a plain slot.
fn param_shape(src: &str) -> Option<(usize, usize)> {
    let g = group(src);
    match &code(&g).members[0].param {
        Param::Slot(_) => None,
        Param::Tuple { parts, skip, .. } => Some((parts.len(), *skip)),
    }
}

#[test]
fn tuple_parameters_get_the_first_slots() {
    assert_eq!(param_shape("(lambda (x) x)"), None);
    assert_eq!(param_shape("(lambda () 1)"), None);
    assert_eq!(param_shape("(lambda (a b) a)"), Some((2, 1)));
    assert_eq!(param_shape("(lambda (a b c d) a)"), Some((4, 3)));
    assert_eq!(param_shape("(lambda ((cons a b)) a)"), Some((2, 1)));
    // nested patterns: the first component is destructured after the fast path fills it
    assert_eq!(param_shape("(lambda ((cons a b) c) a)"), Some((2, 1)));
    assert_eq!(param_shape("(lambda (0 x) x)"), Some((2, 1)));
    assert_eq!(param_shape("(lambda ((list a b)) a)"), Some((3, 2)));
    let g = group("(lambda (a b c) (list c b a))");
    let c = code(&g);
    match &c.members[0].param {
        Param::Tuple { parts, .. } => assert_eq!(&parts[..], &[0, 1, 2]),
        Param::Slot(_) => unreachable!(),
    }
    assert!(c.members[0].nslots >= 3);
}

/// Collects every resolved atom of a block.
fn atoms(b: &CBlock, out: &mut Vec<String>) {
    let a = |x: &CAtom, out: &mut Vec<String>| {
        out.push(match x {
            CAtom::Local(s) => format!("local {s}"),
            CAtom::Env(i) => format!("env {i}"),
            CAtom::Sibling(j) => format!("sibling {j}"),
            CAtom::Global(g) => format!("global {g}"),
            CAtom::Const(v) => format!("const {}", crate::print::to_string(v)),
        })
    };
    let args = |x: &CArgs, out: &mut Vec<String>| match x {
        CArgs::One(y) => a(y, out),
        CArgs::Tuple(ys) => ys.iter().for_each(|y| a(y, out)),
    };
    // (the operands of arithmetic, alone or as an `AppArith`'s argument)
    let arith = |e: &CExpr, out: &mut Vec<String>| match e {
        CExpr::Arith2(_, x, y, _, _) => {
            a(x, out);
            a(y, out)
        }
        CExpr::Arith2Int(_, x, k, _, _) => {
            let (x, y) = super::int_operands(*x, *k);
            a(&x, out);
            a(&y, out)
        }
        _ => unreachable!("only arithmetic is passed here"),
    };
    let expr = |e: &CExpr, out: &mut Vec<String>| match e {
        CExpr::Atom(x) => a(x, out),
        CExpr::App(f, xs, ..) => {
            a(f, out);
            args(xs, out)
        }
        CExpr::AppArith(c) => {
            a(&c.f, out);
            arith(&c.arg, out)
        }
        CExpr::Prim(_, xs, _) => args(xs, out),
        CExpr::Arith2(..) | CExpr::Arith2Int(..) => arith(e, out),
        CExpr::Plus(x, y, _, _) => {
            a(x, out);
            a(y, out)
        }
        CExpr::Retag(_, x, _, _) => a(x, out),
        CExpr::BpCall(c) => {
            a(&c.bp, out);
            a(&c.x, out)
        }
        CExpr::Cons(x, y, _) => {
            a(x, out);
            a(y, out)
        }
        CExpr::Closure(_, caps) => caps.iter().for_each(|c| a(c, out)),
        CExpr::If(c, t, f) => {
            match c {
                Cond::Atom(c) | Cond::Is(_, c) => a(c, out),
                Cond::Cmp(_, x, y, _, _) => {
                    a(x, out);
                    a(y, out)
                }
                Cond::CmpInt(_, x, k, _, _) => {
                    let (x, y) = super::int_operands(*x, *k);
                    a(&x, out);
                    a(&y, out)
                }
            }
            atoms(t, out);
            atoms(f, out)
        }
        CExpr::MakeEnvSens(..) | CExpr::MakeEnvSensLike(..) => {}
        CExpr::Inline(il) => atoms(&il.body, out),
        CExpr::Guarded(g) => {
            a(&g.callee, out);
            atoms(&g.inline.body, out)
        }
        CExpr::Loop(l) => {
            args(&l.init, out);
            atoms(&l.body, out)
        }
        CExpr::Again(g) => args(&g.args, out),
    };
    for bind in &b.binds {
        match bind {
            CBind::Let(_, e) | CBind::Split(e, ..) => expr(e, out),
            CBind::PushArith(_, c, _) => {
                a(&c.f, out);
                arith(&c.arg, out)
            }
            CBind::PushApp(_, f, xs, ..) => {
                a(f, out);
                args(xs, out)
            }
            CBind::Uncons(_, _, x, ..) | CBind::Check(_, x, _) | CBind::EnvSens(_, x) => a(x, out),
            CBind::Letrec(_, _, caps, _) => caps.iter().for_each(|c| a(c, out)),
            CBind::Clear(_) | CBind::Grow(_) => {}
        }
    }
    expr(&b.tail, out);
}

/// The group of the first `letrec` binding of member 0's body.
fn letrec_group(g: &Group) -> Rc<Group> {
    g.members.get().unwrap()[0]
        .body
        .binds
        .iter()
        .find_map(|b| match b {
            crate::anf::Bind::Letrec(_, g) => Some(g.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn captured_variables_and_siblings_resolve_to_environment_and_sibling_slots() {
    let g = group(
        "(lambda (k) (letrec ((ev (lambda (n) (if (= n 0) #t (od (- n k))))) (od (lambda (n) (ev n)))) ev))",
    );
    let lg = letrec_group(&g);
    let c = code(&lg);
    let mut ev = Vec::new();
    atoms(&c.members[0].body, &mut ev);
    // ev reads n (its parameter, a local), k (captured: env 0), and calls od (sibling 1)
    assert!(ev.contains(&"env 0".to_string()), "{ev:?}");
    assert!(ev.contains(&"sibling 1".to_string()), "{ev:?}");
    assert!(!ev.iter().any(|a| a.starts_with("global")), "{ev:?}");
    let mut od = Vec::new();
    atoms(&c.members[1].body, &mut od);
    assert!(od.contains(&"sibling 0".to_string()), "{od:?}");
    // the body of ev is an if in tail position, and od's body is a tail call
    assert!(matches!(c.members[0].body.tail, CExpr::If(..)));
    assert!(matches!(c.members[1].body.tail, CExpr::App(..)));
}

fn eval_all(src: &str) -> Vec<String> {
    let mut s = Session::new();
    match s.run_text("t.vlad", src) {
        Ok(v) => v.iter().map(crate::print::to_string).collect(),
        Err(e) => vec![format!("error: {}", e.message)],
    }
}

/// Each pair: a call that passes its arguments on the stack (fast path when the
/// count matches the parameters) and the same call with the tuple built first.
#[test]
fn tuple_fast_path_gives_the_same_results_as_the_general_path() {
    let defs = "(define (f a b c) (list c b a))
                (define (g (cons a b) c) (list a b c))
                (define (h 0 x) x)
                (define (k x) x)
                (define (call3 p x y z) (p x y z))";
    let cases = [
        ("(f 1 2 3)", "(f (cons* 1 2 3))", "(3 2 1)"),
        ("(let ((t (cons* 1 2 3))) (f t))", "(f (cons 1 (cons 2 3)))", "(3 2 1)"),
        // through an unknown procedure
        ("(call3 f 1 2 3)", "(call3 (lambda (t) (f t)) 1 2 3)", "(3 2 1)"),
        // more arguments than parameters: the last parameter takes the rest
        ("(f 1 2 3 4)", "(f (cons* 1 2 3 4))", "((3 . 4) 2 1)"),
        ("(g (cons 1 2) 3)", "(g (cons (cons 1 2) 3))", "(1 2 3)"),
        ("(h 0 5)", "(h (cons 0 5))", "5"),
        ("(h 1 5)", "(h (cons 1 5))", "error: pattern mismatch: expected 0, got 1, for the pattern `0` of `h`"),
        ("(f 1 2)", "(f (cons 1 2))", "error: pattern mismatch: expected a pair, got 2 (an exact integer), for the parameters `a b c` (too few arguments: 2 given)"),
        ("(g 1 2)", "(g (cons 1 2))", "error: pattern mismatch: expected a pair, got 1 (an exact integer), for the pattern `(cons a b)` of `g`"),
        ("(k 1 2 3)", "(k (cons* 1 2 3))", "(1 2 . 3)"),
    ];
    for (fast, slow, expected) in cases {
        let a = eval_all(&format!("{defs} {fast}"));
        let b = eval_all(&format!("{defs} {slow}"));
        assert_eq!(a, [expected], "{fast}");
        assert_eq!(b, [expected], "{slow}");
    }
}

/// Calls `f` on the expression of each binding of a block (with the
/// `CBind::Split` that takes its value apart, where one does) and on its
/// tail, each followed by the same in the branches of a conditional it is.
fn each_expr(b: &CBlock, f: &mut dyn FnMut(&CExpr, Option<&Split>)) {
    let visit = |e: &CExpr, split: Option<&Split>, f: &mut dyn FnMut(&CExpr, Option<&Split>)| {
        f(e, split);
        if let CExpr::If(_, t, e) = e {
            each_expr(t, f);
            each_expr(e, f);
        }
    };
    for bind in &b.binds {
        match bind {
            CBind::Split(e, _, rest, _) => visit(e, Some(rest), f),
            CBind::Let(_, e) => visit(e, None, f),
            // (the calls in place, as the expressions they were: an
            // `AppArith`'s argument left out)
            CBind::PushArith(_, c, _) => {
                let arg = CExpr::Atom(CAtom::Const(crate::value::Value::Nil));
                let e = CExpr::AppArith(Box::new(super::AppArith { f: c.f.clone(), arg, call: c.call }));
                visit(&e, None, f)
            }
            CBind::PushApp(_, g, xs, span, _) => {
                let xs = match xs {
                    CArgs::One(x) => CArgs::One(x.clone()),
                    CArgs::Tuple(ys) => CArgs::Tuple(ys.clone()),
                };
                visit(&CExpr::App(g.clone(), xs, *span, Default::default()), None, f)
            }
            _ => {}
        }
    }
    visit(&b.tail, None, f);
}

/// What `name` says of each expression of member 0's body of the lambda
/// `src` (see [`each_expr`]), in order, where it says something.
fn shape(src: &str, name: impl Fn(&CExpr, Option<&Split>) -> Option<&'static str>) -> Vec<&'static str> {
    let mut out = Vec::new();
    each_expr(&code(&group(src)).members[0].body, &mut |e, split| out.extend(name(e, split)));
    out
}

/// The `CBind::Split`s of a lambda's body and nested blocks: for each, what
/// becomes of its second part.
fn split_shape(src: &str) -> Vec<&'static str> {
    shape(src, |_, split| {
        split.map(|rest| match rest {
            Split::Slot(_) => "stored",
            Split::Unread => "unread",
            Split::Pair(..) => "split",
        })
    })
}

#[test]
fn a_pair_taken_apart_at_once_is_split_without_being_stored() {
    // (r (f x)) ((cons a b) r): one split
    assert_eq!(split_shape("(lambda (f x) (let (((cons a b) (f x))) (+ a b)))"), ["stored"]);
    // b never read: not stored
    assert_eq!(split_shape("(lambda (f x) (let (((cons a b) (f x))) a))"), ["unread"]);
    // and ((cons c d) b) after it: the second part taken apart in turn
    assert_eq!(split_shape("(lambda (f x) (let (((cons a (cons c d)) (f x))) (+ a (+ c d))))"), ["split"]);
    // the pair read again: not split (it must be stored)
    assert_eq!(
        split_shape("(lambda (f x) (let* ((p (f x)) ((cons a b) p)) (cons p a)))"),
        Vec::<&str>::new()
    );
    // a parameter is destructured by the tuple fast path instead
    assert_eq!(split_shape("(lambda ((cons a b)) (+ a b))"), Vec::<&str>::new());
}

/// A split pair is moved apart only when nothing else holds it; a pair that is
/// also held elsewhere (here by a global and by a captured variable) keeps its
/// parts. Mismatches keep their message.
#[test]
fn split_pairs_held_elsewhere_are_left_intact() {
    let defs = "(define p (cons 1 (cons 2 3)))
                (define (f) p)
                (define (g x) (if (= x 0) (cons x x) x))";
    let cases = [
        ("(let (((cons a (cons b c)) (f))) (list a b c p))", "(1 2 3 (1 2 . 3))"),
        ("(let* ((q (cons 4 5)) (k (lambda () q)) ((cons a b) (k))) (list a b q))", "(4 5 (4 . 5))"),
        ("(let (((cons a b) (g 0))) (+ a b))", "0"),
        (
            "(let (((cons a b) (g 7))) (+ a b))",
            "error: pattern mismatch: expected a pair, got 7 (an exact integer), for the pattern `(cons a b)`",
        ),
        (
            "(let (((cons a (cons b c)) (cons 1 2))) a)",
            "error: pattern mismatch: expected a pair, got 2 (an exact integer), for the pattern `(cons b c)`",
        ),
    ];
    for (src, expected) in cases {
        assert_eq!(eval_all(&format!("{defs} {src}")), [expected], "{src}");
    }
}

/// The untagged entry of a backpropagator-shaped lambda, if it gets one: its
/// number of bindings before the tail and whether it starts by sensitizing its
/// argument.
fn untagged_shape(src: &str) -> Option<(usize, bool)> {
    let c = code(&group(src));
    let e = c.members[0].untagged?;
    assert!(!e.forward && e.calls == 0);
    let u = &c.members[e.index as usize];
    let Param::Slot(p) = u.param else { panic!("a tuple parameter") };
    let starts = matches!(&u.body.binds.first(),
        Some(CBind::Let(_, CExpr::Retag(Retag::Tag(crate::value::Tag::Sensitivity), CAtom::Local(q), ..))) if *q == p);
    let sensitize = |e: &CExpr| matches!(e, CExpr::Retag(Retag::Tag(crate::value::Tag::Sensitivity), ..));
    assert!(!sensitize(&u.body.tail), "{src}: the entry returns without sensitizing");
    Some((u.body.binds.len(), starts))
}

#[test]
fn backpropagators_get_an_untagged_entry() {
    // (x (unsensitize s)) first and (r (sensitize a)) last: both dropped
    assert_eq!(
        untagged_shape("(lambda (s) (let ((x (unsensitize s))) (sensitize (+ x 1))))"),
        Some((0, false))
    );
    assert_eq!(untagged_shape("(lambda (s) (sensitize (unsensitize s)))"), Some((0, false)));
    // s used otherwise: the entry sensitizes its argument into s
    assert_eq!(untagged_shape("(lambda (s) (sensitize (cons s s)))"), Some((1, true)));
    assert_eq!(
        untagged_shape("(lambda (s) (let ((x (unsensitize s))) (sensitize (cons s x))))"),
        Some((2, true))
    );
    // not ending in a sensitize of the result: none
    assert_eq!(untagged_shape("(lambda (s) (unsensitize s))"), None);
    assert_eq!(untagged_shape("(lambda (s) (let ((x (unsensitize s))) (cons x (sensitize x))))"), None);
}

/// The shape test an `if` makes: `Cond::Is` where the `null?`/`pair?` result
/// is read by the `if` alone, a slot otherwise.
fn if_condition(src: &str) -> String {
    let g = group(src);
    let c = code(&g);
    match &c.members[0].body.tail {
        CExpr::If(Cond::Is(shape, _), ..) => format!("{shape:?}"),
        CExpr::If(Cond::Atom(_), ..) => "atom".to_string(),
        CExpr::If(..) => "comparison".to_string(),
        _ => "no if".to_string(),
    }
}

#[test]
fn shape_tests_read_only_by_an_if_are_fused_into_it() {
    assert_eq!(if_condition("(lambda (l) (if (null? l) 0 1))"), "Null");
    assert_eq!(if_condition("(lambda (l) (if (pair? l) 0 1))"), "Pair");
    assert_eq!(if_condition("(lambda (l) (let ((t (null? l))) (if t t 1)))"), "atom");
    assert_eq!(if_condition("(lambda (l) (if (real? l) 0 1))"), "atom");
    assert_eq!(if_condition("(lambda (l) (if (< l 1) 0 1))"), "comparison");
}

/// (loops, calls of loops, `letrec` bindings left) in a block and the blocks in it.
fn loop_counts(b: &CBlock, n: &mut (usize, usize, usize)) {
    let expr = |e: &CExpr, n: &mut (usize, usize, usize)| match e {
        CExpr::If(_, t, f) => {
            loop_counts(t, n);
            loop_counts(f, n);
        }
        CExpr::Loop(l) => {
            n.0 += 1;
            loop_counts(&l.body, n);
        }
        CExpr::Again(_) => n.1 += 1,
        CExpr::Inline(il) => loop_counts(&il.body, n),
        CExpr::Guarded(g) => loop_counts(&g.inline.body, n),
        _ => {}
    };
    for bind in &b.binds {
        match bind {
            CBind::Let(_, e) | CBind::Split(e, ..) => expr(e, n),
            CBind::Letrec(..) => n.2 += 1,
            _ => {}
        }
    }
    expr(&b.tail, n);
}

fn loops(src: &str) -> (usize, usize, usize) {
    let g = group(src);
    let mut n = (0, 0, 0);
    loop_counts(&code(&g).members[0].body, &mut n);
    n
}

#[test]
fn named_lets_called_only_in_tail_position_of_their_bodies_run_as_loops() {
    // a loop of several variables, of one, called from two places
    assert_eq!(
        loops("(lambda (n) (let loop ((i 0) (a 0)) (if (= i n) a (loop (+ i 1) (+ a i)))))"),
        (1, 1, 0)
    );
    assert_eq!(loops("(lambda (n) (let loop ((i n)) (if (= i 0) i (loop (- i 1)))))"), (1, 1, 0));
    assert_eq!(
        loops("(lambda (n) (let loop ((i 0)) (cond ((= i n) i) ((< i 3) (loop (+ i 1))) (else (loop (+ i 2))))))"),
        (1, 2, 0)
    );
    // one loop calling the loop around it: that one stays a procedure, the
    // inner one is a loop in its code
    let src =
        "(lambda (n) (let o ((i 0)) (if (= i n) i (let p ((j 0)) (if (= j i) (o (+ i 1)) (p (+ j 1)))))))";
    assert_eq!(loops(src), (0, 0, 1));
    let g = group(src);
    let o = letrec_group(&g);
    let mut n = (0, 0, 0);
    loop_counts(&code(&o).members[0].body, &mut n);
    assert_eq!(n, (1, 1, 0));
    // one loop in tail position of another's body
    assert_eq!(
        loops("(lambda (n) (let o ((i 0)) (if (< i n) (o (+ i 1)) (let p ((j i)) (if (= j 0) j (p (- j 1)))))))"),
        (2, 2, 0)
    );
    // a named let whose value is used: a loop run as an inner block (and
    // one whose initial values are computed, between its procedure and
    // its call in the A-normal form)
    assert_eq!(loops("(lambda (n) (+ 1 (let loop ((i 0)) (if (< i n) (loop (+ i 1)) i))))"), (1, 1, 0));
    assert_eq!(
        loops("(lambda (n) (let ((s (let loop ((i (* n 2)) (a (+ n 1))) (if (< i 0) a (loop (- i 1) (+ a i)))))) (* s n)))"),
        (1, 1, 0)
    );
    assert_eq!(
        loops("(lambda (f x) (let loop ((x x) (fx (f x))) (if (< fx 1) x (loop (- x 1) (f (- x 1))))))"),
        (1, 1, 0)
    );
    // several in one block, their procedures built before all their
    // initial values: each moved down to its call (in one pass: moved one
    // at a time, 2000 of them in one block took 22 s to resolve)
    assert_eq!(
        loops(
            "(lambda (n) (list (let a ((i (* n 2)) (s (+ n 1))) (if (< i 0) s (a (- i 1) (+ s 1))))
                               (let b ((j (+ n 3))) (if (< j 5) j (b (- j 5))))
                               (let c ((k n)) (if (= k 0) k (c (- k 1))))))"
        ),
        (3, 3, 0)
    );
    // not loops: the procedure used as a value, called in no tail position,
    // the calls passing different tuples
    assert_eq!(loops("(lambda (n) (let loop ((i 0)) (if (< i n) (loop (+ i 1)) loop)))"), (0, 0, 1));
    assert_eq!(loops("(lambda (n) (let loop ((i 0)) (if (< i n) (+ 1 (loop (+ i 1))) i)))"), (0, 0, 1));
    assert_eq!(
        loops("(lambda (n f) (let loop ((i 0)) (if (< i n) (f (lambda (j) (loop j))) i)))"),
        (0, 0, 1)
    );
    assert_eq!(
        loops("(lambda (n) (let loop ((a 0) (b 0)) (if (= a n) b (loop (cons (+ a 1) b)))))"),
        (0, 0, 1)
    );
}

#[test]
fn loops_give_what_their_procedures_give() {
    // (values worked out by hand: each loop's result in closed form)
    let src = "(define (swap n) (let loop ((a 1) (b 2) (i 0)) (if (= i n) (list a b) (loop b a (+ i 1)))))
               (swap 3)
               (define (rot n) (let loop ((a 1) (b 2) (c 3) (i 0)) (if (= i n) (list a b c) (loop c a b (+ i 1)))))
               (rot 4)
               (define (fib n) (let loop ((a 0) (b 1) (i 0)) (if (= i n) a (loop b (+ a b) (+ i 1)))))
               (fib 30)
               (define (tri n) (let o ((i 0) (s 0)) (if (> i n) s (o (+ i 1) (let p ((j 0) (t s)) (if (= j i) t (p (+ j 1) (+ t 1))))))))
               (tri 4)
               (define (sq k xs) (let loop ((xs xs) (acc '())) (if (null? xs) acc (loop (cdr xs) (cons (* k (car xs)) acc)))))
               (sq 3 (list 1 2 3))";
    assert_eq!(eval_all(src), ["(2 1)", "(3 1 2)", "832040", "10", "(9 6 3)"]);
}

/// The loop of member 0's body (its tail), and the calls of it in its body's branches.
fn the_loop(c: &GroupCode) -> (&Loop, Vec<&Again>) {
    let CExpr::Loop(l) = &c.members[0].body.tail else { panic!("no loop") };
    fn agains<'a>(b: &'a CBlock, out: &mut Vec<&'a Again>) {
        match &b.tail {
            CExpr::Again(a) => out.push(a),
            CExpr::If(_, t, f) => {
                agains(t, out);
                agains(f, out);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    agains(&l.body, &mut out);
    (l, out)
}

#[test]
fn a_loop_keeps_its_variables_and_what_it_captures_and_empties_the_rest() {
    let g = group("(lambda (n) (let loop ((i 0) (a 0)) (if (= i n) a (loop (+ i 1) (+ (* i i) (* a 2))))))");
    let c = code(&g);
    let (l, calls) = the_loop(&c);
    assert_eq!(calls.len(), 1);
    // n (the parameter, slot 0) is captured: kept, as are the loop's variables
    assert!(!l.dead.contains(&0), "{:?}", l.dead);
    for p in l.params.iter() {
        assert!(!l.dead.contains(p) && !calls[0].clear.contains(p));
    }
    // `(* i i)` and `(* a 2)` are bound in the body, one slot then reused by
    // their sum: the other is emptied by the call (the two arguments are
    // moved into the variables, so their slots need no emptying)
    assert_eq!(calls[0].clear.len(), 1, "{:?}", calls[0].clear);
    assert!(l.frame as usize > l.params.len());
    // arguments read from slots set before them are all read first
    assert!(calls[0].in_order);
    let g = group("(lambda (n) (let loop ((a 1) (b 2) (i 0)) (if (= i n) (cons a b) (loop b a (+ i 1)))))");
    let c = code(&g);
    assert!(!the_loop(&c).1[0].in_order);
}

#[test]
fn a_loops_arguments_computed_in_a_branch_are_bound_in_its_variables_slots() {
    // Each argument is computed where the variable it replaces is read last
    // (in the branch): it gets that variable's slot, so the call stores nothing.
    let src = "(lambda (u v) (let loop ((u u) (v v) (acc 0))
                 (if (null? u) acc (let* (((cons hu tu) u) ((cons hv tv) v)) (loop tu tv (+ acc (* hu hv)))))))";
    let g = group(src);
    let c = code(&g);
    let (_, calls) = the_loop(&c);
    assert_eq!(calls.len(), 1);
    assert!(calls[0].set.atoms().is_empty(), "{:?}", calls[0].params);
    assert_eq!(calls[0].args.atoms().len(), 3);
    let g = group("(lambda (n) (let loop ((i 0) (acc 0.0)) (if (= i n) acc (loop (+ i 1) (+ acc 0.5)))))");
    let c = code(&g);
    assert!(the_loop(&c).1[0].set.atoms().is_empty());
    // a variable passed on as it is stays where it is
    let g = group("(lambda (n) (let loop ((i 0) (a 1) (b 2)) (if (= i n) b (loop (+ i 1) a (+ a b)))))");
    let c = code(&g);
    assert!(the_loop(&c).1[0].set.atoms().is_empty());
    // swapped variables are stored (all read first); the count is in place
    let g = group("(lambda (n) (let loop ((i 0) (a 1) (b 2)) (if (= i n) b (loop (+ i 1) b a))))");
    let c = code(&g);
    let (l, calls) = the_loop(&c);
    assert_eq!(calls[0].set.atoms().len(), 2, "{:?}", calls[0].params);
    assert_eq!(&calls[0].params[..], &l.params[1..]);
    assert!(!calls[0].in_order);
    // a variable passed twice keeps its value for the second
    let g = group("(lambda (n) (let loop ((i 0) (a 1) (b 2)) (if (= i n) (cons a b) (loop (+ i 1) a a))))");
    let c = code(&g);
    let (l, calls) = the_loop(&c);
    assert_eq!(&calls[0].params[..], &l.params[2..]);
    assert_eq!(calls[0].set_moves, Moves(0));
}

#[test]
fn loops_whose_arguments_share_their_variables_slots_run_as_before() {
    // (values worked out by hand)
    let src = "(define (dup n) (let loop ((i 0) (a 1) (b 2)) (if (= i n) (list a b) (loop (+ i 1) a a))))
               (dup 2)
               (define (walk l) (let loop ((l l) (acc '())) (if (null? l) acc (loop (cdr l) (cons (car l) acc)))))
               (walk (list 1 2 3))
               (define (mix n) (let loop ((i 0) (a 1) (b 2)) (if (= i n) (list a b) (if (< a b) (loop (+ i 1) (+ a b) a) (loop (+ i 1) b (- a b))))))
               (mix 3)
               (define (keep n) (let loop ((i 0) (fs '())) (if (= i n) (map (lambda (f) (f 10)) fs) (loop (+ i 1) (cons (lambda (x) (+ x i)) fs)))))
               (keep 3)
               (define (own n a b) (if (= n 0) (list a b) (if (< a b) (own (- n 1) (* a 2) a) (own (- n 1) a (+ b 1)))))
               (own 4 1 1)";
    // mix: (1 2) -> a<b: (3 1) -> (1 2) -> (3 1); keep: i = 2, 1, 0 consed last first;
    // own: (1 1) -> a=b: (1 2) -> a<b: (2 1) -> (2 2) -> (2 3)
    assert_eq!(eval_all(src), ["(1 1)", "(3 2 1)", "(3 1)", "(12 11 10)", "(2 3)"]);
}

/// The calls of a lambda's body (and its branches): "arith" for one whose
/// argument is computed onto the stack (`CExpr::AppArith`), "call" for the others.
fn call_shape(src: &str) -> Vec<&'static str> {
    shape(src, |e, _| match e {
        CExpr::App(..) => Some("call"),
        CExpr::AppArith(_) => Some("arith"),
        _ => None,
    })
}

#[test]
fn a_calls_one_argument_computed_by_arithmetic_just_before_goes_onto_the_stack() {
    // both calls of a doubly recursive procedure, an exact constant or not
    assert_eq!(call_shape("(lambda (f n) (+ (f (- n 1)) (f (* n 2.5))))"), ["arith", "arith"]);
    assert_eq!(call_shape("(lambda (f n m) (+ 1 (f (+ n m))))"), ["arith"]);
    // in a branch
    assert_eq!(call_shape("(lambda (f n) (if (< n 2) n (+ 1 (f (- n 1)))))"), ["arith"]);
    // the argument read again, two arguments, a call in tail position, an
    // argument that is not arithmetic, a result taken apart next: plain calls
    assert_eq!(call_shape("(lambda (f n) (let ((m (- n 1))) (+ (f m) m)))"), ["call"]);
    assert_eq!(call_shape("(lambda (f n) (+ 1 (f (- n 1) n)))"), ["call"]);
    assert_eq!(call_shape("(lambda (f n) (f (- n 1)))"), ["call"]);
    assert_eq!(call_shape("(lambda (f n) (+ 1 (f (sqrt n))))"), ["call"]);
    assert_eq!(call_shape("(lambda (f n) (let (((cons a b) (f (- n 1)))) (+ a b)))"), ["call"]);
}

#[test]
fn calls_of_arithmetic_give_what_plain_calls_give() {
    // values by hand: fib(15) = 610; 2^10 by doubling; a float argument;
    // an exact integer past 64 bits; a rational; a non-procedure and a
    // non-number keep their errors (the arithmetic's, then the call's)
    let src = "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
               (define (pow2 n) (if (= n 0) 1 (* 2 (pow2 (- n 1)))))
               (define (sq x) (* x x))
               (fib 15) (pow2 10) (+ 1 (sq (* 1.5 2))) (+ 0 (sq (+ 4294967296 0)))
               (+ 0 (sq (+ 1/3 0)))";
    assert_eq!(eval_all(src), ["610", "1024", "10.0", "18446744073709551616", "1/9"]);
    let e = eval_all("(define (sq x) (* x x)) (+ 1 (sq (- (cons 1 2) 1)))");
    assert!(e[0].contains("expected two numbers"), "{e:?}");
    let e = eval_all("(define (g x) (let ((h (car (list 5)))) (+ 1 (h (- x 1))))) (g 3)");
    assert!(e[0].contains("not a procedure"), "{e:?}");
    // derivatives through such calls: d/dx (x+1)^2 = 2(x+1) = 6 at 2
    let d = "(define (sq x) (* x x)) (define (f x) (+ 1.0 (sq (+ x 1.0))))
             ((derivative-F f) 2.0) ((derivative-R f) 2.0)";
    assert_eq!(eval_all(d), ["6.0", "6.0"]);
}

/// The bindings of the branch run when the test fails of the `if` that ends
/// member 0's body.
fn else_branch(src: &str) -> (Vec<&'static str>, u32, u32) {
    let c = code(&group(src));
    let CExpr::If(_, _, e) = &c.members[0].body.tail else { panic!("not an if") };
    let kinds = e
        .binds
        .iter()
        .map(|b| match b {
            CBind::PushArith(..) => "push-arith",
            CBind::PushApp(..) => "push-app",
            CBind::Grow(_) => "grow",
            CBind::Clear(_) => "clear",
            CBind::Let(..) => "let",
            _ => "other",
        })
        .collect();
    (kinds, e.pre, e.frame)
}

#[test]
fn calls_bound_at_the_end_of_a_branch_leave_their_results_in_place() {
    // both calls of a doubly recursive procedure: their results are the
    // branch's last two slots, which its entry does not set up
    let (kinds, pre, frame) = else_branch("(lambda (f n) (if (< n 2) n (+ (f (- n 1)) (f (- n 2)))))");
    assert_eq!(kinds, ["push-arith", "push-arith"]);
    assert_eq!((pre + 2, frame), (frame, frame));
    // two arguments
    let (kinds, _, _) = else_branch("(lambda (f n) (if (< n 2) n (* n (f n (- n 1)))))");
    assert_eq!(kinds, ["let", "push-app"]);
    // a result the block's tail passes on (a call, which may run in place
    // and need slots): ordinary bindings
    let (kinds, pre, frame) = else_branch("(lambda (f g n) (if (< n 2) n (g (f (- n 1)))))");
    assert_eq!(kinds, ["let"]);
    assert_eq!(pre, frame);
}

#[test]
fn calls_left_in_place_give_what_bindings_give() {
    // values by hand: 2^10 by doubling (the argument's slot was the
    // parameter's); sums of squares where the second call runs in place and
    // needs a slot past the first's; a list walked (the pair read last is
    // emptied after the call); a body, not a branch; 10^5 deep; an error in
    // a call whose result would stay in place
    let src = "(define (pow2 n) (if (= n 0) 1 (* 2 (pow2 (- n 1)))))
               (define (sq x) (* x x))
               (define (sumsq n) (if (< n 1) 0 (+ (sumsq (- n 1)) (sq n))))
               (define (len l) (if (null? l) 0 (+ 1 (len (cdr l)))))
               (define (twice f x) (let ((a (f x))) (+ a (f a))))
               (define (sum n) (if (= n 0) 0 (+ n (sum (- n 1)))))
               (pow2 10) (sumsq 10) (len (iota 1000)) (twice (lambda (y) (* y 3)) 2) (sum 100000)";
    assert_eq!(eval_all(src), ["1024", "385", "1000", "24", "5000050000"]);
    let e = eval_all("(define (h n) (car n)) (define (g n) (+ (g (h n)) 1)) (g 5)");
    assert!(e[0].contains("car"), "{e:?}");
}

/// `Op2::ALL` lists the operations in the order of their discriminants (what
/// compiled code passes `jit::held_arith`), each with its primitive's name.
#[test]
fn op2_table_follows_the_discriminants() {
    for (i, &(op, name)) in Op2::ALL.iter().enumerate() {
        assert_eq!(op as usize, i, "{name}");
        assert_eq!(Op2::from_index(i as i64), Some(op));
        assert_eq!(Op2::of(name), Some(op));
        assert_eq!(crate::prims::prim(op.prim()).name, name);
    }
    assert_eq!(Op2::from_index(9), None);
    assert_eq!(Op2::from_index(-1), None);
    assert_eq!(Op2::of("quotient"), None);
}
