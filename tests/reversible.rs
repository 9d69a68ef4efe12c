//! Reversible procedures (REVERSIBLE.md): examples, round trips (examples and random
//! programs), the inverter, every error in both directions, and gradients
//! (rev-grad against finite differences, `*j` and forward mode).

use proptest::prelude::*;
use std::path::Path;
use vlad::error::{Error, ErrorKind};
use vlad::toplevel::Session;

fn session() -> Session {
    Session::new()
}

/// Runs program text; the printed values of its expressions.
fn run(s: &mut Session, text: &str) -> Result<Vec<String>, Error> {
    let vals = s.run_text("test.vlad", text)?;
    Ok(vals.iter().map(vlad::print::to_string).collect())
}

fn last(s: &mut Session, text: &str) -> String {
    match run(s, text) {
        Ok(v) => v.last().cloned().unwrap_or_default(),
        Err(e) => panic!("{}\nin:\n{}", e.render(&s.sources), text),
    }
}

fn eval1(text: &str) -> String {
    last(&mut session(), text)
}

fn num(s: &str) -> f64 {
    if let Some((n, d)) = s.split_once('/') {
        return n.parse::<f64>().unwrap() / d.parse::<f64>().unwrap();
    }
    s.parse::<f64>().unwrap_or_else(|_| panic!("not a number: {s}"))
}

fn nums(s: &str) -> Vec<f64> {
    s.trim_matches(|c| c == '(' || c == ')').split_whitespace().map(num).collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

/// `expr` evaluates to a number within `tol` (relative) of `want`.
fn assert_value(s: &mut Session, expr: &str, want: f64, tol: f64) {
    let got = num(&last(s, expr));
    assert!(close(got, want, tol), "{expr}: {got}, want {want}");
}

// ----- examples and the acceptance file -----

#[test]
fn examples_and_acceptance_pass() {
    let mut files = vlad::check::expand_paths(&[Path::new("examples/reversible").to_path_buf()]);
    assert!(files.len() >= 8, "examples missing: {files:?}");
    files.push(Path::new("tests/reversible_acceptance.vlad").to_path_buf());
    let mut report = vlad::check::Report::default();
    for f in &files {
        vlad::check::check_file(&session, f, &mut report);
    }
    assert_eq!(report.failed, 0, "{:#?}", report.failures);
    assert!(report.passed >= 60);
}

/// `uncall` after `call` (and `call` after `uncall`) gives the inputs back.
fn round_trip(s: &mut Session, p: &str, args: &str) {
    let text = format!(
        "(let ((in (list {args})))
           (let ((out (%rev-call {p} in)))
             (list (equal? (%rev-uncall {p} out) in) (equal? (%rev-call {p} (%rev-uncall {p} out)) out))))"
    );
    let out = run(s, &text).unwrap_or_else(|e| panic!("{}: {}", p, e.render(&s.sources)));
    assert_eq!(out[0], "(#t #t)", "round trip of ({p} {args})");
}

fn load(path: &str) -> Session {
    let mut s = session();
    let items = s.read_file(Path::new(path)).unwrap();
    let unit = s.compile(items).unwrap();
    for step in unit.steps {
        if let vlad::toplevel::Step::Define(g, _) = step {
            s.m.global(g).unwrap();
        }
    }
    s
}

#[test]
fn round_trip_on_every_example() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("fib", "fib", &["0 0 0", "0 0 7", "0 0 60"]),
        ("sqrt", "root", &["1 0", "15 0", "16 0", "99999999999 0"]),
        ("sqrt", "doublebit", &["0", "17", "-5"]),
        (
            "factor",
            "factor",
            &["840 (zeros 12)", "9973 (zeros 4)", "720720 (zeros 20)", "3 (zeros 3)", "4 (zeros 4)"],
        ),
        ("factor", "nexttry", &["0", "2", "9"]),
        ("rle", "encode", &["'(1 1 2 2 2 1 0) (zeros 8)", "'(4 4 4 4 0) (zeros 4)", "'(1 2 3 0) (zeros 8)"]),
        ("perm", "perm-to-code", &["'(0)", "'(5 3 1 0 2 4)", "'(1 0 2)", "'()"]),
        ("schrodinger", "simulate", &["X0 Y0 alpha eps 0 3"]),
        ("schrodinger", "update-y", &["X0 Y0 alpha eps 5"]),
        ("bennett", "bennett", &["3 0 8", "2 0 1", "17 5 4"]),
    ];
    for (file, p, argss) in cases {
        let mut s = load(&format!("examples/reversible/{file}.vlad"));
        for args in argss.iter() {
            round_trip(&mut s, p, args);
        }
    }
    // doubles: within the tolerance
    let mut s = load("examples/reversible/exp.vlad");
    for x in ["0.5", "1.6", "-2.5", "3.0"] {
        let out = nums(&last(&mut s, &format!("(uncall iexp (car (call iexp 0.5 {x})) {x})")));
        assert!(close(out[0], 0.5, 1e-9) && out[1] == num(x), "iexp round trip at {x}: {out:?}");
    }
}

#[test]
fn rationals_make_multiplication_reversible() {
    let mut s = session();
    let r = run(
        &mut s,
        "(define-reversible (scale x k) (*= x k) (/= x 3) (*= x 5/7))
         (call scale 1 2)
         (uncall scale 10/21 2)
         (call scale 1/3 2/5)
         (+ 1/2 1/3)
         (* 2/3 3/2)
         (< 1/3 0.34)
         (call scale 1.5 2)",
    )
    .unwrap();
    assert_eq!(r, vec!["(10/21 2)", "(1 2)", "(2/63 2/5)", "5/6", "1", "#t", "(0.7142857142857143 2)"]);
    round_trip(&mut s, "scale", "7 -3/4");
    round_trip(&mut s, "scale", "123456789012345678901234567890 11");
}

// ----- random well-formed programs -----

struct Gen {
    state: u64,
    fresh: u32,
    rational: bool,
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &'a [String]) -> &'a String {
        &v[self.below(v.len() as u64) as usize]
    }
    fn fresh(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{}{}", base, self.fresh)
    }

    fn expr(&mut self, vars: &[String], depth: u32) -> String {
        if depth == 0 || self.below(3) == 0 {
            if vars.is_empty() || self.below(3) == 0 {
                return format!("{}", self.below(11) as i64 - 5);
            }
            return self.pick(vars).clone();
        }
        let op = ["+", "-", "*"][self.below(3) as usize];
        format!("({} {} {})", op, self.expr(vars, depth - 1), self.expr(vars, depth - 1))
    }

    /// A statement that only updates `w` (scalars) and, when `vec_w`, the vector `v`;
    /// it may read `r`.
    fn stmt(&mut self, depth: u32, w: &[String], r: &[String], vec_w: bool) -> String {
        let choice = self.below(if depth == 0 { 4 } else { 10 });
        match choice {
            0 | 1 if !w.is_empty() => {
                let x = self.pick(w).clone();
                let others: Vec<String> = r.iter().filter(|v| **v != x).cloned().collect();
                let e = self.expr(&others, 2);
                let ops: &[&str] =
                    if self.rational { &["+=", "-=", "*=", "/="] } else { &["+=", "-=", "^="] };
                let op = ops[self.below(ops.len() as u64) as usize];
                if op == "*=" || op == "/=" {
                    format!("({op} {x} (+ 1 (* {e} {e})))")
                } else {
                    format!("({op} {x} {e})")
                }
            }
            2 if w.len() >= 2 => {
                let a = self.pick(w).clone();
                let b = loop {
                    let b = self.pick(w).clone();
                    if b != a {
                        break b;
                    }
                };
                if self.below(2) == 0 {
                    format!("(swap {a} {b})")
                } else {
                    format!("({} h {a} {b})", if self.below(2) == 0 { "call" } else { "uncall" })
                }
            }
            3 if vec_w => {
                let k = self.below(3);
                if self.below(3) == 0 && !w.is_empty() {
                    let x = self.pick(w).clone();
                    return format!("(swap (ref v {k}) {x})");
                }
                let e = self.expr(r, 2);
                format!("(+= (ref v {k}) {e})")
            }
            4 if !r.is_empty() => {
                let c = self.pick(r).clone();
                let w2: Vec<String> = w.iter().filter(|v| **v != c).cloned().collect();
                let k = self.below(7) as i64 - 3;
                let t = self.stmt(depth - 1, &w2, r, vec_w);
                let e = self.stmt(depth - 1, &w2, r, vec_w);
                format!("(if-rev (> {c} {k}) {t} {e} (> {c} {k}))")
            }
            5 => {
                let i = self.fresh("i");
                let k = 1 + self.below(3);
                let mut r2 = r.to_vec();
                r2.push(i.clone());
                let body = self.stmt(depth - 1, w, &r2, vec_w);
                format!("(local ({i} 0) (from-loop (= {i} 0) (skip) (begin-rev {body} (+= {i} 1)) (= {i} {k})) (delocal {i} {k}))")
            }
            6 => {
                let t = self.fresh("t");
                let reads: Vec<String> = r.iter().filter(|_| self.below(2) == 0).cloned().collect();
                let e = self.expr(&reads, 2);
                let w2: Vec<String> = w.iter().filter(|v| !reads.contains(v)).cloned().collect();
                let mut r2 = r.to_vec();
                r2.push(t.clone());
                let body = self.stmt(depth - 1, &w2, &r2, vec_w);
                format!("(local ({t} 0) (with-uncompute ((+= {t} {e})) {body}) (delocal {t} 0))")
            }
            7 if !w.is_empty() => {
                let s = self.fresh("s");
                let x = self.pick(w).clone();
                let w2: Vec<String> = w.iter().filter(|v| **v != x).cloned().collect();
                let body = self.stmt(depth - 1, &w2, r, vec_w);
                format!("(local ({s} '()) (push {x} {s}) {body} (pop {x} {s}) (delocal {s} '()))")
            }
            8 | 9 => {
                let n = 1 + self.below(3);
                let parts: Vec<String> = (0..n).map(|_| self.stmt(depth - 1, w, r, vec_w)).collect();
                format!("(begin-rev {})", parts.join(" "))
            }
            _ => "(skip)".to_string(),
        }
    }

    fn program(&mut self) -> String {
        let vars: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let n = 1 + self.below(4);
        let body: Vec<String> = (0..n).map(|_| self.stmt(3, &vars, &vars, true)).collect();
        format!(
            "(define-reversible (h p q) (+= p (* q 3)) (swap p q) (-= p 1))\n(define-reversible (g a b c d v)\n  {})",
            body.join("\n  ")
        )
    }
}

fn check_random_program(seed: u64, rational: bool) {
    let mut g = Gen { state: seed | 1, fresh: 0, rational };
    let prog = g.program();
    let mut s = session();
    if let Err(e) = run(&mut s, &prog) {
        panic!("generated program does not compile: {}\n{}", e.render(&s.sources), prog);
    }
    let ins: Vec<i64> = (0..7).map(|_| g.below(41) as i64 - 20).collect();
    let args = format!("{} {} {} {} (list {} {} {})", ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6]);
    let text = format!(
        "(define in (list {args}))
         (define out (%rev-call g in))
         (equal? (%rev-uncall g out) in)
         (equal? (%rev-call g (%rev-uncall g in)) in)
         (equal? (%rev-call (rev-inverse g) out) in)
         (equal? ((%rev-fun (cons g #t)) in) out)
         (equal? ((%rev-fun (cons g #f)) out) in)
         (define tup (cons* g {args}))
         (equal? ((%rev-fun-tuple (cons tup #t)) tup) out)"
    );
    match run(&mut s, &text) {
        Ok(v) => assert_eq!(
            v,
            vec!["#t", "#t", "#t", "#t", "#t", "#t"],
            "round trip, or the procedure as VLAD code (the last three), failed for\n{prog}\non {args}"
        ),
        Err(e) => panic!("{}\nfor\n{}\non {}", e.render(&s.sources), prog, args),
    }
    // The syntactic inverse, printed and read back, runs like uncall; inverting twice
    // gives the procedure back.
    let Ok(vlad::value::Value::Rev(rp)) = s.run_text("t", "g").map(|v| v[0].clone()) else { panic!() };
    let inv = vlad::rev::inverse_text(&rp);
    let text = format!("{inv}\n(equal? (%rev-call g-inverse out) (%rev-uncall g out))");
    assert_eq!(last(&mut s, &text), "#t", "printed inverse differs from uncall:\n{inv}");
    let d = &vlad::reader::read_all(&prog, 0).unwrap()[1];
    let def = vlad::rev::syntax::parse_define(d).unwrap();
    let twice = vlad::rev::invert::invert_proc(&vlad::rev::invert::invert_proc(&def));
    assert_eq!(vlad::rev::syntax::proc_text(&twice, "g"), vlad::rev::syntax::proc_text(&def, "g"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_integer_programs_round_trip(seed in any::<u64>()) {
        check_random_program(seed, false);
    }

    #[test]
    fn random_rational_programs_round_trip(seed in any::<u64>()) {
        check_random_program(seed, true);
    }
}

#[test]
fn inverter_is_an_involution_on_the_examples() {
    let mut n = 0;
    for f in vlad::check::expand_paths(&[Path::new("examples/reversible").to_path_buf()]) {
        let text = std::fs::read_to_string(&f).unwrap();
        for d in vlad::reader::read_all(&text, 0).unwrap() {
            let is_rev =
                d.as_list().and_then(|l| l.first()).and_then(|h| h.as_symbol()) == Some("define-reversible");
            if !is_rev {
                continue;
            }
            let def = vlad::rev::syntax::parse_define(&d).unwrap();
            let once = vlad::rev::invert::invert_proc(&def);
            let twice = vlad::rev::invert::invert_proc(&once);
            let t = |p| vlad::rev::syntax::proc_text(p, "p");
            assert_eq!(t(&twice), t(&def), "{}", f.display());
            assert_ne!(t(&once), t(&def));
            for (s1, s2) in def.body.iter().zip(&twice.body) {
                assert_eq!(vlad::rev::syntax::stmt_text(s1), vlad::rev::syntax::stmt_text(s2));
            }
            n += 1;
        }
    }
    assert!(n >= 15);
}

/// `error` and labelled `write` statements (an `if-rev` inside) print as they
/// were written, in a procedure and in its inverse; the printed text reads back
/// as the same statements.
#[test]
fn text_statements_print_as_written() {
    let src = "(define-reversible (p x y)\n  (write \"at\" x)\n  (+= x y)\n  (write-real \"y\" y)\n  (error \"bad\" y))";
    let d = vlad::reader::read_all(src, 0).unwrap().remove(0);
    let def = vlad::rev::syntax::parse_define(&d).unwrap();
    let t = |p: &vlad::rev::syntax::ProcDef| vlad::rev::syntax::proc_text(p, "p").trim_end().to_string();
    assert_eq!(t(&def), src);
    let once = vlad::rev::invert::invert_proc(&def);
    assert_eq!(
        t(&once),
        "(define-reversible (p x y)\n  (error \"bad\" y)\n  (write-real \"y\" y)\n  (-= x y)\n  (write \"at\" x))"
    );
    let back = vlad::reader::read_all(&t(&once), 0).unwrap().remove(0);
    let again = vlad::rev::syntax::parse_define(&back).unwrap();
    assert_eq!(t(&vlad::rev::invert::invert_proc(&again)), src);
    // an `if-rev` with something in a branch is not one
    let src = "(define-reversible (q x)\n  (if-rev (if (write \"w\" x) #t #t)\n          (+= x 1)\n          (skip)\n          #t))";
    let d = vlad::reader::read_all(src, 0).unwrap().remove(0);
    assert_eq!(
        t(&vlad::rev::syntax::parse_define(&d).unwrap())
            .replace("(define-reversible (p", "(define-reversible (q"),
        src
    );
}

#[test]
fn show_inverse_and_anf_inverse_print_the_inverse() {
    #[derive(Clone, Default)]
    struct Buf(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut s = session();
    let buf = Buf::default();
    s.m.out = Box::new(buf.clone());
    let r = last(
        &mut s,
        "(define-reversible (p x y) (+= x 1) (if-rev (= x 1) (swap x y) (*= y 2) (= y 1)) (call p x y))
         (show-inverse p)",
    );
    assert_eq!(r, "#t");
    let out = String::from_utf8(buf.0.borrow().clone()).unwrap();
    assert_eq!(
        out,
        "(define-reversible (p-inverse x y)\n  (uncall p x y)\n  (if-rev (= y 1)\n          (swap x y)\n          (/= y 2)\n          (= x 1))\n  (-= x 1))\n"
    );
    let exe = env!("CARGO_BIN_EXE_vlad");
    let o = std::process::Command::new(exe)
        .args(["anf", "--inverse", "examples/reversible/sqrt.vlad"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(text.contains(";; inverse of root"), "{text}");
    assert!(text.contains("(define-reversible (doublebit-inverse bit)\n  (local (z (/ bit 2))\n    (-= bit z)\n    (delocal z bit)))"), "{text}");
}

// ----- errors -----

fn error_of(s: &mut Session, text: &str) -> Error {
    match s.run_text("err.vlad", text) {
        Ok(v) => panic!(
            "expected an error from {text}, got {}",
            v.iter().map(vlad::print::to_string).collect::<Vec<_>>().join(" ")
        ),
        Err(e) => e,
    }
}

fn line_of(s: &Session, e: &Error) -> usize {
    let loc = s.sources.location(e.span.expect("error has a location"));
    loc.split(':').nth(1).unwrap().parse().unwrap()
}

#[test]
fn run_time_errors_fire_in_both_directions_with_their_location() {
    // (definitions, forward call, backward call, rule, line of the offending statement)
    let cases: &[(&str, &str, &str, &str, usize, usize)] = &[
        (
            "(define-reversible (p x y)\n  (if-rev (> x 0) (+= y 1) (skip) (> y 100)))",
            "(call p 1 0)",
            "(uncall p 1 5)",
            "if-rev exit assertion failed",
            2,
            2,
        ),
        (
            "(define-reversible (p i n)\n  (from-loop (= i 0) (skip) (+= i 1) (= i n)))",
            "(call p 1 3)",
            "(uncall p 2 3)",
            "from-loop entry assertion failed",
            2,
            2,
        ),
        (
            "(define-reversible (p i n)\n  (from-loop (= i 0) (skip) (+= i 0) (= i n)))",
            "(call p 0 3)",
            "(uncall p 3 3)",
            "from-loop entry assertion failed",
            2,
            2,
        ),
        (
            "(define-reversible (p x)\n  (local (t 0)\n    (+= t x)\n    (delocal t 0)))",
            "(call p 3)",
            "(uncall p 3)",
            "delocal mismatch",
            4,
            2,
        ),
        (
            "(define-reversible (p x s)\n  (pop x s))\n(define-reversible (q x s)\n  (push x s))",
            "(call p 1 '(2))",
            "(uncall q 1 '(2))",
            "pop into a non-zero variable",
            2,
            4,
        ),
        (
            "(define-reversible (p x s)\n  (pop x s))\n(define-reversible (q x s)\n  (push x s))",
            "(call p 0 '())",
            "(uncall q 0 '())",
            "pop from an empty stack",
            2,
            4,
        ),
        (
            "(define-reversible (p v i)\n  (+= (ref v i) 1))",
            "(call p '(1 2) 5)",
            "(uncall p '(1 2) -1)",
            "index out of range",
            2,
            2,
        ),
        (
            "(define-reversible (p x y)\n  (/= x y))",
            "(call p 1 0)",
            "(uncall p 1 0)",
            "division by zero",
            2,
            2,
        ),
        // (doubles: `*=` by 0.0 forward, and `/=` by 0.0, its inverse, backward)
        (
            "(define-reversible (p x y)\n  (*= x y))",
            "(call p 2.0 0.0)",
            "(uncall p 2.0 0.0)",
            "division by zero",
            2,
            2,
        ),
        (
            "(define-reversible (p x y)\n  (+= x (/ 5 y)))",
            "(call p 1 0)",
            "(uncall p 1 0)",
            "division by zero",
            2,
            2,
        ),
        (
            "(define-reversible (p x)\n  (+= x 1)\n  (call p x))",
            "(call p 0)",
            "(uncall p 0)",
            "recursion limit exceeded",
            3,
            3,
        ),
    ];
    for (defs, fwd, bwd, rule, fline, bline) in cases {
        for (expr, dir, line) in [(fwd, "forward", fline), (bwd, "backward", bline)] {
            let mut s = session();
            s.m.set_max_depth(200);
            run(&mut s, defs).unwrap();
            let e = error_of(&mut s, expr);
            // (a right-hand side's division: the primitive's message, then the
            // direction and procedure)
            let rhs = *rule == "division by zero" && e.message.starts_with("/:");
            let want = if rhs { format!("({}, in p)", dir) } else { format!("{} ({}, in ", rule, dir) };
            assert!(e.message.contains(&want), "{expr}: expected `{want}`, got: {}", e.message);
            assert!(!rhs || e.message.starts_with("/: division by zero"), "{expr}: {}", e.message);
            assert_eq!(e.kind, ErrorKind::Runtime);
            let l = line_of(&s, &e);
            assert_eq!(l, *line, "{expr}: wrong line for {}", e.render(&s.sources));
            // the session goes on; VLAD values are untouched
            assert_eq!(last(&mut s, "(+ 1 2)"), "3");
        }
    }
}

#[test]
fn step_limit_and_messages_name_the_values() {
    let mut s = session();
    run(&mut s, "(define-reversible (p i)\n  (from-loop (= i 0) (skip) (+= i 1) (= i -1)))").unwrap();
    for (e, dir) in [("(call p 0)", "forward"), ("(uncall p -1)", "backward")] {
        s.m.set_max_steps(s.m.steps() + 10_000);
        let err = error_of(&mut s, e);
        assert_eq!(err.kind, ErrorKind::Limit, "{}", err.message);
        assert!(err.message.contains("step limit") && err.message.contains(dir), "{}", err.message);
        s.m.set_max_steps(u64::MAX);
    }
    let e = error_of(
        &mut s,
        "(define-reversible (q x y)\n  (if-rev (> x 0) (+= y 1) (skip) (> y 100)))\n(call q 1 5)",
    );
    assert!(e.message.contains("(> y 100)") && e.message.contains("where y = 6"), "{}", e.message);
    // a failed call leaves the caller's values as they were
    let r = run(&mut s, "(define v '(1 2 3))\n(define-reversible (bad v) (+= (ref v 0) 1) (+= (ref v 9) 1))");
    assert!(r.is_ok());
    let _ = error_of(&mut s, "(call bad v)");
    assert_eq!(last(&mut s, "v"), "(1 2 3)");
}

#[test]
fn static_rules_are_checked_at_definition_time() {
    let cases: &[(&str, &str, usize)] = &[
        (
            "(define-reversible (p x)\n  (+= x (* 2 x)))",
            "updated variable used in its own right-hand side (in p)",
            2,
        ),
        (
            "(define-reversible (p v i)\n  (+= (ref v i) (ref v 0)))",
            "updated variable used in its own right-hand side",
            2,
        ),
        (
            "(define-reversible (p v)\n  (+= (ref v (ref v 0)) 1))",
            "updated variable used in its own index",
            2,
        ),
        ("(define-reversible (p v x)\n  (swap (ref v x) x))", "updated variable used in its own index", 2),
        ("(define-reversible (p x)\n  (+= y 1))", "undeclared variable (in p)", 2),
        ("(define-reversible (p x)\n  (+= x zz))", "undeclared variable (in p)", 2),
        (
            "(define-reversible (q a b) (skip))\n(define-reversible (p x)\n  (call q x x))",
            "aliasing (in p)",
            3,
        ),
        ("(define-reversible (p x f)\n  (call f x f))", "aliasing (in p)", 2),
        ("(define-reversible (p x)\n  (swap x x))", "aliasing (in p)", 2),
        ("(define-reversible (p x s)\n  (push s s))", "aliasing (in p)", 2),
        ("(define-reversible (p x)\n  (call nosuch x))", "undeclared procedure (in p)", 2),
        ("(define-reversible (p x)\n  (declare mod32)\n  (*= x 3))", "no *= or /= in mod32 procedures", 3),
        ("(define-reversible (p x)\n  (local (t 0) (+= t 1)))", "must end with (delocal t", 2),
        ("(define-reversible (p x)\n  (local (x 0) (delocal x 0)))", "local shadows a variable", 2),
        ("(define-reversible (p x)\n  (frob x))", "unknown reversible statement `frob`", 2),
        ("(define-reversible (p x)\n  (if-rev (= x 0) (skip) (skip)))", "bad `if-rev`", 2),
        ("(define-reversible (p x x)\n  (skip))", "declared twice", 1),
    ];
    for (text, msg, line) in cases {
        let mut s = session();
        let e = error_of(&mut s, text);
        assert_eq!(e.kind, ErrorKind::Syntax, "{text}: {}", e.message);
        assert!(e.message.contains(msg), "{text}: expected `{msg}`, got {}", e.message);
        assert_eq!(line_of(&s, &e), *line, "{}", e.render(&s.sources));
    }
}

#[test]
fn type_and_arity_errors_are_clear() {
    let mut s = session();
    run(
        &mut s,
        "(define-reversible (p x y) (+= x y))\n(define-reversible (m x) (declare mod32) (+= x 1))
         (define-reversible (z) (skip))\n(define-reversible (one x) (+= x 1))
         (define-reversible (r x y) (local (i 1) (+= (ref (ref x i) 0) (ref (ref y 1) i)) (delocal i 1)))",
    )
    .unwrap();
    for (e, msg) in [
        ("(call p 1)", "p takes 2 values (x y), got 1"),
        ("(call p)", "p takes 2 values (x y), got none"),
        ("(rev-grad p 0)", "p takes a variable position and 2 values (x y), got the position and no values"),
        (
            "(rev-grad p 0 1.0)",
            "p takes a variable position and 2 values (x y), got the position and 1 value",
        ),
        ("(rev-grad p)", "p takes a variable position and 2 values (x y), got none"),
        ("(call)", "call: expected a reversible procedure"),
        ("(call p #t 1)", "not a number"),
        ("(call car 1 2)", "expected a reversible procedure"),
        ("(p 1 2)", "cannot apply #<reversible p> directly: a reversible procedure runs by (call p arg ...) or (uncall p arg ...)"),
        ("((rev-inverse p) 1 2)", "runs by (call (rev-inverse p) arg ...) or (uncall (rev-inverse p) arg ...)"),
        ("(call m -1)", "mod32 procedure"),
        ("(rev-grad p 5 1.0 2.0)", "exact integer from 0 to 1"),
        ("(rev-grad z 0)", "rev-grad: the procedure has no variables to differentiate"),
        ("(call one)", "one takes 1 value (x), got none"),
        // one value too many: the last variable got a pair, as for `call`
        ("(rev-grad p 0 1.0 2.0 3.0)", "p takes 2 values (x y), so its last variable y was given the rest, (2.0 . 3.0)"),
        // a right-hand side's primitive names the direction and procedure
        ("(call p 1 car)", "(forward, in p)"),
        ("(uncall p 1 car)", "(backward, in p)"),
        // (the internal run on a list of values, given something else)
        ("(%rev-call p 1)", "call: expected a list of arguments, got 1"),
        // a place that is wrong shows its own variables, not the right-hand side's
        ("(call r (list 1 2) (list 5 (list 6 7)))", "2 is not a vector (a list) where x = (1 2), i = 1"),
        ("(call r (list 1 (list 2)) (list 5 (list 6)))", "index 1 but the vector has 1 element"),
    ] {
        let err = error_of(&mut s, e);
        assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
    }
}

#[test]
fn packed_vectors_are_vectors_too() {
    let r = eval1(
        "(define-reversible (dot s v w)
           (local (i 0)
             (from-loop (= i 0) (skip) (begin-rev (+= s (* (ref v i) (ref w i))) (+= i 1)) (= i 3))
             (delocal i 3)))
         (define-reversible (scale v k)
           (local (i 0)
             (from-loop (= i 0) (skip) (begin-rev (*= (ref v i) k) (+= i 1)) (= i 3))
             (delocal i 3)))
         (list (call dot 0.0 (vector-of '(1 2 3)) (vector-of '(4 5 6)))
               (uncall scale (vector-of '(2 4 6)) 2.0)
               (rev-grad dot 0 0.0 (vector-of '(1 2 3)) (vector-of '(4 5 6)))
               ((gradient-R (lambda (v) (car (call dot 0.0 v (vector-of '(4 5 6)))))) (vector-of '(1 2 3)))
               ((gradient-R (lambda (v) (vec-sum (car (call scale v 2.0))))) (vector-of '(1 2 3))))",
    );
    assert_eq!(
        r,
        "((32.0 (vector 1.0 2.0 3.0) (vector 4.0 5.0 6.0)) ((vector 1.0 2.0 3.0) 2.0) \
         (1 (vector 4.0 5.0 6.0) (vector 1.0 2.0 3.0)) (vector 4.0 5.0 6.0) (vector 2.0 2.0 2.0))"
    );
}

// ----- first-class procedures -----

#[test]
fn call_is_an_ordinary_name_a_program_may_redefine() {
    let r = eval1(
        "(define-reversible (z) (skip))
         (define-reversible (one x) (+= x 1))
         (list (uncall z) (call one 5) (procedure? call))",
    );
    assert_eq!(r, "(() (6) #t)");
    assert_eq!(eval1("(define (call p x y z) (p x y z)) (call (lambda (a b c) (+ a (+ b c))) 1 2 3)"), "6");
}

#[test]
fn reversible_procedures_are_first_class() {
    let r = eval1(
        "(define-reversible (inc x) (+= x 1))
         (define-reversible (dbl x) (*= x 2))
         ;; a reversible procedure held in a variable and called by reference
         (define-reversible (twice f x) (call f x) (call f x))
         (define (apply-all ps x) (if (null? ps) x (apply-all (cdr ps) (car (call (car ps) x)))))
         (list (procedure? inc)
               (call twice dbl 3)
               (uncall twice dbl 12)
               (call twice (rev-inverse inc) 5)
               (apply-all (list inc dbl (rev-inverse inc)) 10)
               (call (rev-inverse (rev-inverse inc)) 0))",
    );
    assert_eq!(
        r,
        "(#t (#<reversible dbl> 12) (#<reversible dbl> 3) (#<reversible (rev-inverse inc)> 3) 21 (1))"
    );
}

// ----- gradients -----

const GRAD_DEFS: &str = "
(define (car (cons a d)) a)
(define (cdr (cons a d)) d)
(define (square u) (* u u))
(define-reversible (sq-into y x) (+= y (square x)))
(define-reversible (f y x a)
  (local (t 0.0)
    (call sq-into t x)
    (+= y (* a (sin t)))
    (*= y (+ 2.0 (cos x)))
    (+= y (let ((u (* a x))) (exp (/ u 4))))
    (local (i 0)
      (from-loop (= i 0) (skip) (begin-rev (+= i 1) (+= y (/ (* x a) i))) (= i 3))
      (delocal i 3))
    (local (s '())
      (push t s)
      (+= t (* a a))
      (swap t y)
      (swap t y)
      (-= t (* a a))
      (pop t s)
      (delocal s '()))
    (uncall sq-into t x)
    (delocal t 0.0)))
(define (fx y x a) (car (call f y x a)))
(define ((deriv-R g) x) (cdr (unsensitize ((cdr ((*j g) (*j x))) (sensitize 1)))))
(define ((deriv-F g) x) (unperturb (tangent ((j* g) (bundle x (perturb 1.0))))))
(define (grad-R g xs) (cdr (unsensitize ((cdr ((*j g) (*j xs))) (sensitize 1)))))
";

#[test]
fn rev_grad_agrees_with_finite_differences_and_with_star_j() {
    let mut s = session();
    run(&mut s, GRAD_DEFS).unwrap();
    let mut g = Gen { state: 0x9e3779b97f4a7c15, fresh: 0, rational: false };
    for _ in 0..6 {
        let mut r = || (g.below(3000) as f64 / 1000.0) - 1.5;
        let (y, x, a) = (r(), r(), r());
        let rg = nums(&last(&mut s, &format!("(rev-grad f 0 {y} {x} {a})")));
        let h = 1e-5;
        let fd = |s: &mut Session, dy: f64, dx: f64, da: f64| {
            let p = num(&last(s, &format!("(fx {} {} {})", y + dy, x + dx, a + da)));
            let m = num(&last(s, &format!("(fx {} {} {})", y - dy, x - dx, a - da)));
            (p - m) / (2.0 * h)
        };
        let fds = [fd(&mut s, h, 0.0, 0.0), fd(&mut s, 0.0, h, 0.0), fd(&mut s, 0.0, 0.0, h)];
        for i in 0..3 {
            assert!(
                close(rg[i], fds[i], 1e-5),
                "rev-grad {rg:?} vs finite differences {fds:?} at {y} {x} {a}"
            );
        }
        // *j, with respect to all three at once and to x alone; forward mode
        let jr =
            nums(&last(&mut s, &format!("(grad-R (lambda (v) (car (%rev-call f v))) (list {y} {x} {a}))")));
        let dr = num(&last(&mut s, &format!("((deriv-R (lambda (x) (fx {y} x {a}))) {x})")));
        let df = num(&last(&mut s, &format!("((deriv-F (lambda (x) (fx {y} x {a}))) {x})")));
        for i in 0..3 {
            assert!(close(rg[i], jr[i], 1e-9), "rev-grad {rg:?} vs *j {jr:?}");
        }
        assert!(close(rg[1], dr, 1e-9) && close(rg[1], df, 1e-9), "{rg:?} {dr} {df}");
        // the inverse procedure: gradients of uncall, by running forward
        let out = last(&mut s, &format!("(call f {y} {x} {a})"));
        let o = nums(&out);
        let ig = nums(&last(&mut s, &format!("(rev-grad (rev-inverse f) 0 {} {} {})", o[0], o[1], o[2])));
        let ufd = |s: &mut Session| {
            let p = num(&last(s, &format!("(car (uncall f {} {} {}))", o[0] + h, o[1], o[2])));
            let m = num(&last(s, &format!("(car (uncall f {} {} {}))", o[0] - h, o[1], o[2])));
            (p - m) / (2.0 * h)
        };
        assert!(close(ig[0], ufd(&mut s), 1e-5), "{ig:?}");
        // *j through uncall
        let ju = nums(&last(
            &mut s,
            &format!("(grad-R (lambda (v) (car (%rev-uncall f v))) (list {} {} {}))", o[0], o[1], o[2]),
        ));
        for i in 0..3 {
            assert!(close(ig[i], ju[i], 1e-9), "{ig:?} vs {ju:?}");
        }
    }
}

#[test]
fn rev_grad_of_the_taylor_exp_and_of_integer_code() {
    let mut s = load("examples/reversible/exp.vlad");
    let g = nums(&last(&mut s, "(rev-grad iexp 0 0.0 1.6)"));
    assert!(close(g[1], 4.95303242, 1e-8), "{g:?}");
    assert_eq!(g[0], 1.0);
    // exact code has exact derivatives; floored division and % have none
    let r = eval1(
        "(define-reversible (p y x k) (+= y (* x x)) (+= y (/ x 2)) (+= y (% x 3)) (*= y k))
         (rev-grad p 0 1 5 3)",
    );
    assert_eq!(r, "(3 30 30)");
}

const NESTED_DEFS: &str = "
(define (car (cons a d)) a)
(define (cdr (cons a d)) d)
(define ((F f) x) (unperturb (tangent ((j* f) (bundle x (perturb 1.0))))))
(define ((R f) x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1)))))
(define-reversible (p2 x y) (*= x y) (+= y (* x x)) (/= x 7))
(define-reversible (sq y x) (+= y (* x x)))
;; every kind of statement: a loop over a vector, ancillas, calls and uncalls, a
;; branch, a stack, element swaps. s gets 2x^3 + x^6 from v = (x 2x x^2).
(define-reversible (cubes v s)
  (local (i 0)
    (from-loop (= i 0) (skip)
      (begin-rev
        (local (e 0.0)
          (+= e (ref v i))
          (local (t 0.0)
            (call sq t e)
            (if-rev (> e 0) (+= s (* t e)) (-= s (* t (- 0 e))) (> e 0))
            (uncall sq t e)
            (delocal t 0.0))
          (-= e (ref v i))
          (delocal e 0.0))
        (local (st '()) (push s st) (swap (ref v 0) (ref v 1)) (pop s st) (delocal st '()))
        (+= i 1))
      (= i 3))
    (delocal i 3)))
(define (g x) (car (cdr (call p2 x 5.0))))
(define (c x) (car (cdr (call cubes (list x (* 2 x) (* x x)) 0.0))))
(define (cv x) (car (cdr (call cubes (vector-of (list x (* 2 x) (* x x))) 0.0))))
(define (cu x) (car (cdr (uncall (rev-inverse cubes) (list x (* 2 x) (* x x)) 0.0))))
(define (ci x) (let ((q cubes)) (car (cdr (%rev-call q (list (list x (* 2 x) (* x x)) 0.0))))))
;; packed vectors inside a list: x * x^2 + 2 (the length of a row)
(define-reversible (nest m s) (+= s (* (ref (ref m 1) 0) (ref (ref m 1) 1))) (+= s (length (ref m 1))))
(define (h x) (car (cdr (call nest (list (vector-of (list 1.0 2.0)) (vector-of (list x (* x x)))) 0.0))))
";

/// Derivatives of derivatives through `call`, `uncall` and `rev-grad` (AD.md: any mix,
/// any depth), against closed forms.
#[test]
fn nested_differentiation_through_reversible_procedures() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    let x: f64 = 1.3;
    // g = 5 + 25 x^2: g'' = 50, g''' = 0
    for (mix, want) in [
        ("(F (F g))", 50.0),
        ("(F (R g))", 50.0),
        ("(R (F g))", 50.0),
        ("(R (R g))", 50.0),
        ("(F (F (F g)))", 0.0),
        ("(R (R (R g)))", 0.0),
        ("(R (F (R g)))", 0.0),
    ] {
        assert_value(&mut s, &format!("({mix} {x})"), want, 1e-12);
    }
    // c = 2x^3 + x^6 on a list, a packed vector, uncalling the inverse, and a
    // procedure held in a variable
    let d1 = 6.0 * x * x + 6.0 * x.powi(5);
    let d2 = 12.0 * x + 30.0 * x.powi(4);
    let d3 = 12.0 + 120.0 * x.powi(3);
    for f in ["c", "cv", "cu", "ci"] {
        for (mix, want) in [
            (format!("(F {f})"), d1),
            (format!("(R {f})"), d1),
            (format!("(F (F {f}))"), d2),
            (format!("(F (R {f}))"), d2),
            (format!("(R (F {f}))"), d2),
            (format!("(R (R {f}))"), d2),
            (format!("(R (R (R {f})))"), d3),
            (format!("(F (R (F {f})))"), d3),
        ] {
            assert_value(&mut s, &format!("({mix} {x})"), want, 1e-12);
        }
    }
    for (mix, want) in
        [("(R h)", 3.0 * x * x), ("(R (R h))", 6.0 * x), ("(F (R h))", 6.0 * x), ("(R (F h))", 6.0 * x)]
    {
        assert_value(&mut s, &format!("({mix} {x})"), want, 1e-12);
    }
    // the Taylor-series exp: its derivatives are exp again (to the series' accuracy);
    // uncall subtracts it; the derivative of rev-grad's derivative
    let mut s = load("examples/reversible/exp.vlad");
    run(&mut s, NESTED_DEFS).unwrap();
    let e = 1.6f64.exp();
    for (expr, want) in [
        ("((F (F (lambda (x) (car (call iexp 0.0 x))))) 1.6)", e),
        ("((R (R (lambda (x) (car (call iexp 0.0 x))))) 1.6)", e),
        ("((F (R (R (lambda (x) (car (call iexp 0.0 x)))))) 1.6)", e),
        ("((R (R (lambda (x) (car (uncall iexp 10.0 x))))) 1.6)", -e),
        ("((F (lambda (x) (car (cdr (rev-grad iexp 0 0.0 x))))) 1.6)", e),
        ("((R (lambda (x) (car (cdr (rev-grad iexp 0 0.0 x))))) 1.6)", e),
    ] {
        assert_value(&mut s, expr, want, 1e-8);
    }
}

#[test]
fn rev_grad_memory_does_not_grow_with_iterations() {
    // 20000 iterations, run forward and then backward with adjoints, with no tape:
    // the store has three variables (a tape would hold 20000 records).
    let mut s = session();
    let r = last(
        &mut s,
        "(define-reversible (decay y x n)
           (local (i 0)
             (from-loop (= i 0) (skip) (begin-rev (+= i 1) (*= y x)) (= i n))
             (delocal i n)))
         (rev-grad decay 0 1.0 0.99999 20000)",
    );
    let g = nums(&r);
    let want = 0.99999f64.powi(20000);
    assert!(close(g[0], want, 1e-9), "{r}");
    assert!(close(g[1], 20000.0 * 0.99999f64.powi(19999), 1e-7), "{r}");
}

#[test]
fn rev_grad_of_a_deeply_nested_right_hand_side() {
    // x += E_d with E_0 = 1, E_k = 1.001 (y + E_(k-1)) for even k, sqrt(y + E_(k-1))
    // for odd k, through a lambda every 50 levels and an `if` every 70: dE/dy by
    // the chain rule, level by level, here (forward mode by hand); dx/dx = 1.
    let d = 600;
    let y = 0.75f64;
    let (mut e, mut de) = (1.0f64, 0.0f64);
    let mut src = String::from("1.0");
    for k in 1..=d {
        if k % 2 == 0 {
            (e, de) = (1.001 * (y + e), 1.001 * (1.0 + de));
            src = format!("(* 1.001 (+ y {src}))");
        } else {
            (e, de) = ((y + e).sqrt(), (1.0 + de) / (2.0 * (y + e).sqrt()));
            src = format!("(sqrt (+ y {src}))");
        }
        if k % 50 == 0 {
            src = format!("((lambda (u) u) {src})");
        }
        if k % 70 == 0 {
            src = format!("(if (< y 0) 0.0 {src})");
        }
    }
    assert!(e.is_finite() && de > 1.0, "{e} {de}");
    let mut s = session();
    let r = last(&mut s, &format!("(define-reversible (f x y) (+= x {src}))\n(rev-grad f 0 2.0 {y})"));
    let g = nums(&r);
    assert!(close(g[0], 1.0, 1e-12) && close(g[1], de, 1e-9), "{r}, want (1 {de})");
}

/// A right-hand side may apply a procedure that depends on the variables: a lambda
/// capturing one, or a variable holding a closure passed in from VLAD (which captures
/// the value being differentiated). First derivatives (the native tangent and adjoint
/// runs) must follow that dependence too, not treat the procedure as a constant.
#[test]
fn first_derivatives_through_procedures_that_depend_on_the_variables() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (u1 y x) (+= y ((lambda (z) (* z x)) x)))
         (define-reversible (u2 y x) (+= y ((F (lambda (z) (* z (* x x)))) x)))
         (define-reversible (u3 y x) (+= y (* x ((lambda (z) (* z x)) 2.0))) (-= y ((lambda () (* x x)))))
         (define-reversible (ap y g) (+= y (g 2.0)) (+= y (* 3.0 (g 1.0))))
         (define (m4 x) (car (call ap 0.0 (lambda (z) (* z (* x x))))))
         (define (m5 x) (car (uncall ap 0.0 (lambda (z) (* z (* x x))))))",
    )
    .unwrap();
    let x: f64 = 1.3;
    for (expr, want) in [
        // x^2
        ("((F (lambda (x) (car (call u1 0.0 x)))) 1.3)", 2.0 * x),
        ("((R (lambda (x) (car (call u1 0.0 x)))) 1.3)", 2.0 * x),
        ("(car (cdr (rev-grad u1 0 0.0 1.3)))", 2.0 * x),
        // x^2 (d/dz of z x^2)
        ("((F (lambda (x) (car (call u2 0.0 x)))) 1.3)", 2.0 * x),
        ("((R (lambda (x) (car (call u2 0.0 x)))) 1.3)", 2.0 * x),
        ("(car (cdr (rev-grad u2 0 0.0 1.3)))", 2.0 * x),
        // 2x^2 - x^2
        ("((F (lambda (x) (car (call u3 0.0 x)))) 1.3)", 2.0 * x),
        ("((R (lambda (x) (car (call u3 0.0 x)))) 1.3)", 2.0 * x),
        ("(car (cdr (rev-grad u3 0 0.0 1.3)))", 2.0 * x),
        // 5x^2, and -5x^2 backward
        ("((F m4) 1.3)", 10.0 * x),
        ("((R m4) 1.3)", 10.0 * x),
        ("((F m5) 1.3)", -10.0 * x),
        ("((R m5) 1.3)", -10.0 * x),
        ("((F (F m4)) 1.3)", 10.0),
        ("((R (R m4)) 1.3)", 10.0),
    ] {
        assert_value(&mut s, expr, want, 1e-12);
    }
}

/// In a `mod32` procedure every integer operation of a right-hand side wraps, in the
/// tangent run as in the plain one, and nested derivatives (through the VLAD
/// translation) see the same values and treat the wrap as the first-order runs do (as
/// the identity, locally), instead of as a step function with zero derivative.
#[test]
fn mod32_derivatives_agree_at_every_order() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (m y x) (declare mod32) (+= y (* x (/ (* x x) 2))))
         (define (f x) (car (call m 0 x)))
         (define-reversible (q y x) (declare mod32) (+= y (* x x)) (-= y 5))
         (define (h x) (car (call q 0 x)))",
    )
    .unwrap();
    // f = x * floor(wrap(x^2) / 2): at 65537, wrap(x^2) = 2^17 + 1, f' = 65536 (the floor
    // has zero derivative), f'' = 0, and (x f')' = f' + x f'' = 65536.
    for (expr, want) in [
        ("((F f) 65537)", 65536.0),
        ("((R f) 65537)", 65536.0),
        ("((F (lambda (x) (* x ((F f) x)))) 65537)", 65536.0),
        ("((R (lambda (x) (* x ((F f) x)))) 65537)", 65536.0),
        ("((F (lambda (x) (* x ((R f) x)))) 65537)", 65536.0),
        ("((R (lambda (x) (* x ((R f) x)))) 65537)", 65536.0),
        // h = x^2 - 5: h' = 2x, h'' = 2
        ("((F h) 3)", 6.0),
        ("((R h) 3)", 6.0),
        ("((F (F h)) 3)", 2.0),
        ("((F (R h)) 3)", 2.0),
        ("((R (F h)) 3)", 2.0),
        ("((R (R h)) 3)", 2.0),
    ] {
        assert_value(&mut s, expr, want, 1e-12);
    }
}

/// A call between a mod32 procedure and one that is not checks the range the
/// mod32 side requires, both ways, as `call` from VLAD does on entry (wrapping
/// would not be reversible); in range, the round trip is exact.
#[test]
fn calls_between_mod32_and_other_procedures_check_the_range() {
    let mut s = session();
    run(
        &mut s,
        "(define-reversible (m8 x) (declare mod32) (+= x 10))
         (define-reversible (pl x) (call m8 x))
         (define-reversible (plain x) (+= x 10))
         (define-reversible (m7 x) (declare mod32) (call plain x))",
    )
    .unwrap();
    assert_eq!(last(&mut s, "(call pl 5)"), "(15)");
    assert_eq!(last(&mut s, "(uncall pl 3)"), "(4294967289)");
    assert_eq!(last(&mut s, "(uncall pl (car (call pl 4294967290)))"), "(4294967290)");
    assert_eq!(last(&mut s, "(uncall m7 (car (call m7 7)))"), "(7)");
    for (e, msg) in [
        ("(call pl -5)", "m8 is a mod32 procedure: its variables hold integers in [0, 2^32), but x is -5"),
        ("(uncall pl 4294967296)", "but x is 4294967296"),
        ("(call m7 4294967295)", "plain (not mod32) returned x = 4294967305 to this mod32 procedure"),
        ("(uncall m7 3)", "plain (not mod32) returned x = -7 to this mod32 procedure"),
    ] {
        let err = error_of(&mut s, e);
        assert!(err.message.contains("mod32 range"), "{e}: {}", err.message);
        assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
    }
}

/// A derivative of `rev-grad`, `call` or `uncall` with a malformed argument tuple fails as
/// the plain primitive does (the VLAD translation's pattern would only report a mismatch
/// at the definition), at the call.
#[test]
fn derivatives_of_malformed_calls_report_what_the_plain_primitives_do() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(&mut s, "(define-reversible (q y x) (+= y (* x x)))").unwrap();
    for (e, msg) in [
        (
            "((F (lambda (x) (rev-grad q))) 1.5)",
            "rev-grad: q takes a variable position and 2 values (y x), got none",
        ),
        (
            "((R (lambda (x) (rev-grad q 0))) 1.5)",
            "rev-grad: q takes a variable position and 2 values (y x), got the position and no values",
        ),
        (
            "((F (F (lambda (x) (rev-grad q 0 x)))) 1.5)",
            "rev-grad: q takes a variable position and 2 values (y x), got the position and 1 value",
        ),
        ("((F (lambda (x) (car (rev-grad q 5 0.0 x)))) 1.5)", "exact integer from 0 to 1; got 5"),
        ("((R (R (lambda (x) (car (rev-grad q #t 0.0 x))))) 1.5)", "exact integer from 0 to 1; got #t"),
        ("((F (F (lambda (x) (car (call q x))))) 1.5)", "call: q takes 2 values (y x), got 1"),
        ("((R (F (lambda (x) (car (uncall q x))))) 1.5)", "uncall: q takes 2 values (y x), got 1"),
    ] {
        let err = error_of(&mut s, e);
        assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
        assert_eq!(line_of(&s, &err), 1, "{e}: {}", err.render(&s.sources));
    }
}

/// The derivatives of `rev-grad` are always those of the VLAD translation, which leaves
/// out the run-time checks: the procedure must still be run with them, so a derivative
/// of `rev-grad` fails where `rev-grad` fails.
#[test]
fn derivatives_of_rev_grad_keep_the_run_time_checks() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (b1 y x) (if-rev (> x 0) (+= y (* x x)) (skip) (> y 100)))
         (define-reversible (b2 y x) (local (t 1.0) (+= y (* x t)) (delocal t 2.0)))",
    )
    .unwrap();
    for (e, msg) in [
        ("(rev-grad b1 0 0.0 1.5)", "if-rev exit assertion failed"),
        ("((F (lambda (x) (car (cdr (rev-grad b1 0 0.0 x))))) 1.5)", "if-rev exit assertion failed"),
        ("((R (lambda (x) (car (cdr (rev-grad b1 0 0.0 x))))) 1.5)", "if-rev exit assertion failed"),
        ("((F (R (lambda (x) (car (cdr (rev-grad b1 0 0.0 x)))))) 1.5)", "if-rev exit assertion failed"),
        ("((F (lambda (x) (car (cdr (rev-grad b2 0 0.0 x))))) 1.5)", "delocal mismatch"),
        ("((R (R (lambda (x) (car (cdr (rev-grad b2 0 0.0 x)))))) 1.5)", "delocal mismatch"),
    ] {
        let err = error_of(&mut s, e);
        assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
    }
}

/// Second derivatives through `call` and `uncall`, in every mix of modes, fail
/// as the plain call fails: the VLAD translation they differentiate leaves the
/// run-time checks out, so the procedure is run with them on the primal values.
/// (Forward mode inside, FF and RF, used to return a number.)
#[test]
fn nested_derivatives_through_call_keep_the_run_time_checks() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (dl y x) (local (t x) (+= y (* t t)) (delocal t 0.0)))
         (define-reversible (dz y x) (/= y x))
         (define-reversible (ia y x) (if-rev (> x 0) (+= y (* x x)) (skip) (> y 100)))
         (define-reversible (pp y x) (local (t x) (local (st '()) (push t st) (pop y st) (delocal st '())) (delocal t 0)))",
    )
    .unwrap();
    let cases = [
        ("(car (call dl 0.0 x))", "delocal mismatch"),
        ("(car (uncall dl 0.0 x))", "delocal mismatch"),
        ("(car (call dz 1.0 (- x 3.0)))", "division by zero"),
        ("(car (call ia 0.0 x))", "if-rev exit assertion failed"),
        ("(car (call pp 1.0 x))", "pop"),
    ];
    for (body, msg) in cases {
        // the plain call fails so, and every derivative of it must
        let plain = error_of(&mut s, &format!("((lambda (x) {body}) 3.0)"));
        assert!(plain.message.contains(msg), "{body}: plain call gave {}", plain.message);
        for (outer, inner) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
            for e in [
                format!("(({inner} (lambda (x) {body})) 3.0)"),
                format!("(({outer} ({inner} (lambda (x) {body}))) 3.0)"),
            ] {
                let err = error_of(&mut s, &e);
                assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
            }
        }
    }
    // a procedure whose checks pass: second derivatives as before (y + x^2: 2)
    for (o, i) in [("F", "F"), ("F", "R"), ("R", "F"), ("R", "R")] {
        assert_eq!(num(&last(&mut s, &format!("(({o} ({i} (lambda (x) (car (call sq 1.0 x))))) 3.0)"))), 2.0);
    }
}

/// `^=` keeps the target's derivative in the first-order runs (tangent and adjoint pass
/// through, the operand gets none); the VLAD translation differentiated for higher
/// orders must do the same, not treat the update as a constant.
#[test]
fn xor_update_derivatives_agree_at_every_order() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(&mut s, "(define-reversible (xp k y) (^= k 5) (+= y (* k k)))\n(define (g k) (car (call xp k 0)))\n(define (f k) (car (cdr (call xp k 0))))").unwrap();
    // g = k xor 5, with derivative 1 (first order); (k g')' = g' + k g'' = 1.
    // f = (k xor 5)^2: f' = 2 (k xor 5) = 12 at 3, f'' = 2.
    for (expr, want) in [
        ("((F g) 3)", 1.0),
        ("((R g) 3)", 1.0),
        ("((F (lambda (k) (* k ((F g) k)))) 3)", 1.0),
        ("((R (lambda (k) (* k ((R g) k)))) 3)", 1.0),
        ("((F f) 3)", 12.0),
        ("((F (F f)) 3)", 2.0),
        ("((R (R f)) 3)", 2.0),
        ("((F (R f)) 3)", 2.0),
    ] {
        assert_value(&mut s, expr, want, 1e-12);
    }
}

/// `and` / `or` in a right-hand side give the value of one of their parts, with its
/// derivative (as in VLAD): the first-order runs gave them none.
#[test]
fn and_or_in_right_hand_sides_carry_derivatives() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (ao y x) (+= y (or (> x 5) (* x x))) (+= y (or (* 3 x) 7)))
         (define-reversible (aa y x) (+= y (and (< x 5) (* x x))) (-= y (and (* 2 x) (* x (* x x)))))
         (define (f x) (car (call ao 0.0 x)))
         (define (g x) (car (call aa 0.0 x)))",
    )
    .unwrap();
    let x: f64 = 1.5;
    for (expr, want) in [
        // f = x^2 + 3x, g = x^2 - x^3
        ("((F f) 1.5)", 2.0 * x + 3.0),
        ("((R f) 1.5)", 2.0 * x + 3.0),
        ("(car (cdr (rev-grad ao 0 0.0 1.5)))", 2.0 * x + 3.0),
        ("((F g) 1.5)", 2.0 * x - 3.0 * x * x),
        ("((R g) 1.5)", 2.0 * x - 3.0 * x * x),
        ("(car (cdr (rev-grad aa 0 0.0 1.5)))", 2.0 * x - 3.0 * x * x),
        ("((R (F g)) 1.5)", 2.0 - 6.0 * x),
    ] {
        assert_value(&mut s, expr, want, 1e-12);
    }
}

/// A tangent or sensitivity that comes into the derivative runs of `call`, `uncall`,
/// `%rev-call` or `%rev-uncall` from VLAD must be shaped like the values it belongs to
/// (the arguments' tangents, the results' sensitivities), as VLAD's own AD requires of
/// ordinary code: it was made to fit silently (a sensitivity `(list 1.0)` for the two
/// results of `(call p 0.0 x)` gave 4.0, a plain `1.0` gave 0.0).
#[test]
fn wrong_shaped_tangents_and_sensitivities_are_errors() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (p y x) (+= y (* x x)))
         (define-reversible (pv y v) (+= y (* (ref v 0) (ref v 1))))
         (define-reversible (pm y m) (+= y (ref (ref m 1) 0)))
         ;; vjp and jvp less their checks of ybar's and dx's shapes, to reach the
         ;; reversible boundary's
         (define (raw-vjp f x ybar) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize ybar)))))
         (define (raw-jvp f x dx) (unperturb (tangent ((j* f) (bundle x (perturb dx))))))",
    )
    .unwrap();
    for (e, msg) in [
        // reverse mode: the sensitivity of the results
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1.0))", "a list of 2 values"),
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 1.0)", "a list of 2 values"),
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 '())", "a list of 2 values"),
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1.0 0.0 3.0))", "a list of 2 values"),
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1.0 #t))", "variable x"),
        ("(raw-vjp (lambda (x) (call p 0.0 x)) 2.0 (list (list 1.0) 0.0))", "variable y"),
        ("(raw-vjp (lambda (x) (uncall p 0.0 x)) 2.0 (list 1.0))", "uncall: the sensitivity"),
        ("(raw-vjp (lambda (x) (%rev-call p (list 0.0 x))) 2.0 (list 1.0))", "%rev-call: the sensitivity"),
        ("(raw-vjp (lambda (x) (%rev-uncall p (list 0.0 x))) 2.0 1.0)", "%rev-uncall: the sensitivity"),
        ("(raw-vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 (list 1.0)))", "variable v"),
        ("(raw-vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 (list 1.0 2.0 3.0)))", "variable v"),
        ("(raw-vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 1.0))", "variable v"),
        ("(raw-vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 (list 1.0 #f)))", "element 1 of variable v"),
        (
            "(raw-vjp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) (list 1.0 (vector-of '(1.0 2.0 3.0))))",
            "variable v",
        ),
        ("(raw-vjp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) (list 1.0 1.0))", "variable v"),
        (
            "(raw-vjp (lambda (m) (call pm 0.0 m)) (list (list 1.0 2.0) (list 3.0 4.0)) (list 1.0 (list (list 0.0 0.0) (list 0.0))))",
            "element 1 of variable m",
        ),
        // forward mode: the tangent of the arguments (bundle checks every leaf:
        // a real's tangent is a real, as a vector's is a vector of its shape)
        ("(raw-jvp (lambda (x) (call p 0.0 x)) 2.0 #t)", "bundle: the tangent must be"),
        ("(tangent ((j* (lambda (x) (call p 0.0 x))) (bundle 2.0 (perturb #t))))", "bundle: the tangent must be"),
        ("(raw-jvp (lambda (y) (uncall p y 2.0)) 0.0 #f)", "bundle: the tangent must be"),
        ("(raw-jvp (lambda (x) (%rev-call p (list 0.0 x))) 2.0 #f)", "bundle: the tangent must be"),
        ("(raw-jvp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) 1.0)", "bundle: the tangent must be"),
        (
            "(raw-jvp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) (vector-of '(1.0 2.0 3.0)))",
            "bundle: the tangent must be",
        ),
        // rev-grad's derivatives are those of its VLAD translation: VLAD's own errors
        ("(raw-vjp (lambda (x) (rev-grad p 0 0.0 x)) 2.0 (list 1.0))", "expected a pair"),
        ("(raw-jvp (lambda (x) (rev-grad p 0 0.0 x)) 2.0 #t)", "bundle: the tangent must be"),
    ] {
        let err = error_of(&mut s, e);
        assert!(err.message.contains(msg), "{e}: expected `{msg}`, got {}", err.message);
        // vjp itself checks ybar's shape against the result's where it enters
        if let Some(rest) = e.strip_prefix("(raw-vjp") {
            let e = format!("(vjp{rest}");
            let err = error_of(&mut s, &e);
            let msg = "vjp: the sensitivity must be shaped like the function's result";
            assert!(err.message.starts_with(msg), "{e}: expected `{msg}`, got {}", err.message);
        }
        // and jvp dx's against the argument's
        if let Some(rest) = e.strip_prefix("(raw-jvp") {
            let e = format!("(jvp{rest}");
            let err = error_of(&mut s, &e);
            let msg = "jvp: the tangent must be shaped like the argument";
            assert!(err.message.starts_with(msg), "{e}: expected `{msg}`, got {}", err.message);
        }
    }
}

/// What VLAD accepts as a tangent or sensitivity is accepted at the reversible boundary
/// too: exact numbers for reals, lazy zeros, `'()` as a zero, booleans, packed vectors
/// and matrices of the same shape, closures' sensitivities.
#[test]
fn well_shaped_tangents_and_sensitivities_still_work() {
    let mut s = session();
    run(&mut s, NESTED_DEFS).unwrap();
    run(
        &mut s,
        "(define-reversible (p y x) (+= y (* x x)))
         (define-reversible (pv y v) (+= y (* (ref v 0) (ref v 1))))
         (define-reversible (pb y b x) (if-rev b (+= y (* 3.0 x)) (skip) b))
         (define-reversible (ap y g) (+= y (g 2.0)))",
    )
    .unwrap();
    for (e, want) in [
        ("(vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1 0))", "4.0"),
        ("(vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1.0 '()))", "4.0"),
        ("(vjp (lambda (x) (call p 0.0 x)) 2.0 (list 1.0 (zero 2.0)))", "4.0"),
        ("(vjp (lambda (x) (call p 0.0 x)) 2.0 (zero (list 1.0 2.0)))", "0.0"),
        ("(vjp (lambda (x) (uncall p 0.0 x)) 2.0 (list 1.0 1.0))", "-3.0"),
        ("(vjp (lambda (x) (%rev-call p (list 0.0 x))) 2.0 (list 1.0 0.0))", "4.0"),
        ("(vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 (list 0.0 1.0)))", "(3.0 3.0)"),
        ("(vjp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 (zero (list 0.0 1.0))))", "(3.0 2.0)"),
        (
            "(vjp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) (list 1.0 (vector-of '(0.0 1.0))))",
            "(vector 3.0 3.0)",
        ),
        (
            "(vjp (lambda (m) (call pv 0.0 m)) (vector-of '((2.0 3.0))) (list 1.0 (vector-of '((0.0 1.0)))))",
            "(matrix (3.0 3.0))",
        ),
        // (as plus allows: a matrix and a vector of as many elements)
        (
            "(vjp (lambda (m) (call pv 0.0 m)) (vector-of '((2.0 3.0))) (list 1.0 (vector-of '(0.0 1.0))))",
            "(matrix (3.0 3.0))",
        ),
        ("(vjp (lambda (x) (call pb 0.0 #t x)) 2.0 (list 1.0 #t 0.0))", "3.0"),
        ("(vjp (lambda (x) (call pb 0.0 #t x)) 2.0 (list 1.0 '() 0.0))", "3.0"),
        ("(vjp (lambda (x) (call ap 0.0 (lambda (z) (* z x)))) 3.0 (list 1.0 '()))", "2.0"),
        ("(jvp (lambda (x) (call p 0.0 x)) 2.0 1)", "(4.0 1)"),
        ("(jvp (lambda (v) (call pv 0.0 v)) (list 2.0 3.0) (list 1.0 0.0))", "(3.0 (1.0 0.0))"),
        (
            "(jvp (lambda (v) (call pv 0.0 v)) (vector-of '(2.0 3.0)) (vector-of '(1.0 0.0)))",
            "(3.0 (vector 1.0 0.0))",
        ),
        ("(jvp (lambda (x) (call pb 0.0 #t x)) 2.0 1.0)", "(3.0 #t 1.0)"),
        ("(jvp (lambda (x) (car (call ap 0.0 (lambda (z) (* z x))))) 3.0 1.0)", "2.0"),
    ] {
        assert_eq!(last(&mut s, e), want, "{e}");
    }
}

/// Too many values for `call`/`uncall` end up in the last variable as a pair that is
/// not a list; the error that follows says so (with one value too few it is an
/// arity error at once). An index that is a number but not an exact integer is
/// reported as such, not as out of range.
#[test]
fn too_many_values_and_inexact_indices_are_named() {
    let mut s = session();
    run(&mut s, "(define-reversible (mul x y)\n  (+= x (* y 2)))").unwrap();
    let e = error_of(&mut s, "(call mul 1)");
    assert!(e.message.contains("call: mul takes 2 values (x y), got 1"), "{}", e.message);
    for call in ["(call mul 1 2 3)", "(uncall mul 1 2 3)"] {
        let e = error_of(&mut s, call);
        assert!(
            e.message
                .contains("mul takes 2 values (x y), so its last variable y was given the rest, (2 . 3)")
                && e.message.contains("were 3 values passed?"),
            "{call}: {}",
            e.message
        );
    }
    // a last value that is a list is one value, as before
    assert_eq!(last(&mut s, "(define-reversible (id x y) (skip))\n(call id 1 (list 2 3))"), "(1 (2 3))");
    run(&mut s, "(define-reversible (get v i r)\n  (+= r (ref v i)))").unwrap();
    let e = error_of(&mut s, "(call get (list 1 2 3) 1.0 0)");
    assert!(
        e.message.starts_with(
            "index not an exact integer (forward, in get): the index 1.0 is not an exact integer"
        ),
        "{}",
        e.message
    );
    assert_eq!(line_of(&s, &e), 2);
    let e = error_of(&mut s, "(call get (list 1 2 3) #t 0)");
    assert!(e.message.starts_with("index not a number (forward, in get)"), "{}", e.message);
    assert_eq!(last(&mut s, "(call get (list 1 2 3) 1 0)"), "((1 2 3) 1 2)");
}

/// The executor's arithmetic at its edges, where its inline paths (machine integers,
/// doubles, and modulo 2^32 in a mod32 procedure) meet the general ones: expected values
/// are worked out by hand.
#[test]
fn executor_arithmetic_at_the_edges() {
    let mut s = session();
    run(
        &mut s,
        "(define-reversible (a x y) (+= x y) (+= x y))
         (define-reversible (b x y) (-= x y))
         (define-reversible (c x y) (+= x (* y y)))
         (define-reversible (d x y) (declare mod32) (+= x (+ y y)))
         (define-reversible (e x) (declare mod32) (-= x 1))
         (define-reversible (g x y) (declare mod32) (if-rev (< x y) (+= x 1) (skip) (<= x y)))
         (define-reversible (h x y) (+= x (* y 0.5)) (*= x 3.0) (-= x 1.5))
         (define-reversible (k z a b) (+= z (atan a b)))",
    )
    .unwrap();
    for (expr, want) in [
        // 1 + 2 (2^63 - 1) = 2^64 - 1: past the machine integers, and back
        ("(call a 1 9223372036854775807)", "(18446744073709551615 9223372036854775807)"),
        ("(uncall a 18446744073709551615 9223372036854775807)", "(1 9223372036854775807)"),
        ("(call b -9223372036854775808 1)", "(-9223372036854775809 1)"),
        // (2^32)^2 = 2^64 on the right-hand side
        ("(call c 0 4294967296)", "(18446744073709551616 4294967296)"),
        // 2 (2^32 - 1) mod 2^32 = 2^32 - 2, then twice that mod 2^32 = 2^32 - 4
        ("(call d 0 4294967295)", "(4294967294 4294967295)"),
        ("(call d 4294967294 4294967295)", "(4294967292 4294967295)"),
        ("(uncall d 4294967292 4294967295)", "(4294967294 4294967295)"),
        ("(call e 0)", "(4294967295)"),
        ("(uncall e 4294967295)", "(0)"),
        // comparisons stay booleans in a mod32 procedure
        ("(call g 3 5)", "(4 5)"),
        ("(call g 7 5)", "(7 5)"),
        ("(uncall g 4 5)", "(3 5)"),
        // ((1 + 2/2) 3 - 1.5)
        ("(call h 1.0 2.0)", "(4.5 2.0)"),
        ("(uncall h 4.5 2.0)", "(1.0 2.0)"),
    ] {
        assert_eq!(last(&mut s, expr), want, "{expr}");
    }
    // x = (1 + y/2) 3 - 1.5: dx/dy = 1.5, dx/dx0 = 3; z = atan(a, b): dz/da = b / (a^2 + b^2)
    assert_value(&mut s, "(car (call k 0.0 1.0 1.0))", std::f64::consts::FRAC_PI_4, 1e-15);
    for (expr, want) in [
        ("((derivative-F (lambda (t) (car (call h 1.0 t)))) 2.0)", 1.5),
        ("((derivative-R (lambda (t) (car (call h 1.0 t)))) 2.0)", 1.5),
        ("(car (rev-grad h 0 1.0 2.0))", 3.0),
        ("(cadr (rev-grad h 0 1.0 2.0))", 1.5),
        ("((derivative-F (lambda (a) (car (call k 0.0 a 1.0)))) 1.0)", 0.5),
        ("((derivative-R (lambda (a) (car (call k 0.0 a 1.0)))) 1.0)", 0.5),
        ("((derivative-F (lambda (a) (car (call k 0.0 a 2.0)))) 1.0)", 0.4),
    ] {
        assert_value(&mut s, expr, want, 1e-12);
    }
}
