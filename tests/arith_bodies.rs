//! A primitive's call of a closure whose body is one arithmetic operation
//! (`map` of `(lambda (x) (* k x))`) is computed without a frame
//! (`Machine::call_arith_body`): a program must behave exactly as when the
//! call is made, in its values, its errors and their traces, its count of
//! steps, and its `--max-steps` and `--max-depth` limits, on numbers and on
//! the reals of every AD mode; and such closures must in fact be recognised
//! (else the comparison would test nothing).

use vlad::toplevel::Session;

const PROGRAMS: &[&str] = &[
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

/// What running each expression of `src` (after its definitions) prints: each
/// value or error (with its trace), then the steps counted.
fn outcome(src: &str, fast: bool, limit: Option<(&str, u64)>) -> String {
    let mut s = Session::new();
    s.m.out = Box::new(std::io::sink());
    s.m.arith_bodies = fast;
    match limit {
        Some(("depth", n)) => s.m.set_max_depth(n as usize),
        Some((_, n)) => s.m.set_max_steps(n),
        None => {}
    }
    let mut out = String::new();
    for (i, expr) in expressions(src).iter().enumerate() {
        match s.run_text(&format!("p{i}.vlad"), expr) {
            Ok(vs) => vs.iter().for_each(|v| out.push_str(&format!("{}\n", vlad::print::to_string(v)))),
            Err(e) => out.push_str(&e.render(&s.sources)),
        }
        out.push_str(&format!("{} steps\n", s.m.steps()));
    }
    out
}

/// The program as the definitions followed by each expression alone.
fn expressions(src: &str) -> Vec<String> {
    let Ok(forms) = vlad::reader::read_all(src, 0) else { panic!("the program does not read:\n{src}") };
    let text = |d: &vlad::datum::Datum| src[d.span.start as usize..d.span.end as usize].to_string();
    let (defs, exprs): (Vec<_>, Vec<_>) = forms.iter().partition(|d| text(d).starts_with("(define"));
    let defs: Vec<String> = defs.iter().map(|d| text(d)).collect();
    exprs.iter().map(|e| format!("{}\n{}\n", defs.join("\n"), text(e))).collect()
}

#[test]
fn calls_computed_without_a_frame_behave_as_calls() {
    for src in PROGRAMS {
        let limits: Vec<Option<(&str, u64)>> = std::iter::once(None)
            .chain([2, 3, 4, 5, 6, 8, 24].map(|n| Some(("depth", n))))
            .chain([1, 3, 6, 10, 25, 60, 200, 1000].map(|n| Some(("steps", n))))
            .collect();
        for limit in limits {
            let (on, off) = (outcome(src, true, limit), outcome(src, false, limit));
            assert_eq!(on, off, "program (limit {limit:?}):\n{src}");
        }
    }
    // (the values themselves, derived by hand: 3 x^2 summed has gradient 6x)
    let out = outcome(PROGRAMS[2], true, None);
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
