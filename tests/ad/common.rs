//! Helpers shared by the AD tests: running VLAD text through the library API,
//! converting results, and comparing numbers with tolerances.

use vlad::toplevel::Session;
use vlad::value::Value;

thread_local! {
    /// Set while [`by_transform`] runs: sessions run the prelude's `jvp`/`vjp`
    /// by the closure transforms only (no dual numbers or tapes).
    static TRANSFORM_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A session with the prelude loaded and program output (`write`) discarded.
pub fn session() -> Session {
    let mut s = Session::new();
    s.m.out = Box::new(std::io::sink());
    s.m.tape.enabled = !TRANSFORM_ONLY.with(|t| t.get());
    s
}

/// Runs the given tests with the prelude's `jvp` and `vjp` on the closure
/// transforms only, as `--no-tape` does: by default they run on dual numbers
/// and tapes (`vlad::ad::tape`), and each test file runs its tests both ways.
pub fn by_transform(tests: &[fn()]) {
    TRANSFORM_ONLY.with(|t| t.set(true));
    for t in tests {
        t();
    }
    TRANSFORM_ONLY.with(|t| t.set(false));
}

/// Program output collected in memory (give a session `Box::new(out.clone())`).
#[derive(Clone, Default)]
pub struct Out(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Out {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.borrow()).into_owned()
    }
}

impl std::io::Write for Out {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs program text in a session, panicking with the rendered error on failure.
pub fn run_in(s: &mut Session, name: &str, src: &str) -> Vec<Value> {
    match s.run_text(name, src) {
        Ok(v) => v,
        Err(e) => panic!("VLAD program {} failed:\n{}\nprogram:\n{}", name, e.render(&s.sources), src),
    }
}

/// Runs program text in a fresh session.
pub fn run(src: &str) -> Vec<Value> {
    run_in(&mut session(), "test", src)
}

/// A number, or a panic naming what it was.
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("expected a number, got {}", vlad::print::to_string(v)))
}

/// The numbers of a program's expressions, in order.
pub fn nums(src: &str) -> Vec<f64> {
    run(src).iter().map(num).collect()
}

/// A proper list (or a dotted pair chain) of numbers, flattened left to right.
pub fn flat(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fn go(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Nil => {}
            Value::Pair(p) => {
                go(&p.car, out);
                go(&p.cdr, out);
            }
            other => out.push(num(other)),
        }
    }
    go(v, &mut out);
    out
}

/// A list of lists of numbers (a matrix as rows).
pub fn matrix(v: &Value) -> Vec<Vec<f64>> {
    let mut rows = Vec::new();
    let mut cur = v.clone();
    while let Value::Pair(p) = cur {
        rows.push(flat(&p.car));
        cur = p.cdr.clone();
    }
    rows
}

/// `|a - b| <= tol * max(1, |a|, |b|)`.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    a == b || (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

#[track_caller]
pub fn assert_close(actual: f64, expected: f64, tol: f64, what: &str) {
    assert!(
        close(actual, expected, tol),
        "{}: got {:e}, expected {:e} (tol {:e})",
        what,
        actual,
        expected,
        tol
    );
}

#[track_caller]
pub fn assert_all_close(actual: &[f64], expected: &[f64], tol: f64, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{}: got {:?}, expected {:?}", what, actual, expected);
    for (a, e) in actual.iter().zip(expected) {
        assert!(close(*a, *e, tol), "{}: got {:?}, expected {:?} (tol {:e})", what, actual, expected, tol);
    }
}

/// A real as VLAD source text (always with a decimal point or exponent).
pub fn lit(x: f64) -> String {
    vlad::print::format_real(x)
}

/// Central finite difference of order 4 for f'(x).
pub fn fd1(f: &dyn Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    (8.0 * (f(x + h) - f(x - h)) - (f(x + 2.0 * h) - f(x - 2.0 * h))) / (12.0 * h)
}

/// Central finite difference of order 4 for f''(x).
pub fn fd2(f: &dyn Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    (-f(x + 2.0 * h) + 16.0 * f(x + h) - 30.0 * f(x) + 16.0 * f(x - h) - f(x - 2.0 * h)) / (12.0 * h * h)
}

/// f'''(x) as the order-4 first difference of the order-4 second difference.
pub fn fd3(f: &dyn Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    fd1(&|y| fd2(f, y, h), x, h)
}

/// Mixed partial d²f/dadb by central differences.
pub fn fd_mixed(f: &dyn Fn(f64, f64) -> f64, a: f64, b: f64, h: f64) -> f64 {
    (f(a + h, b + h) - f(a + h, b - h) - f(a - h, b + h) + f(a - h, b - h)) / (4.0 * h * h)
}

/// The derivative-taking operators in each mode, for building nestings.
pub const MODES: [(&str, &str); 2] = [("F", "derivative-F"), ("R", "derivative-R")];

/// Every nesting of `depth` derivative operators: (label like "FR", VLAD text
/// applying them to `f`, e.g. `(derivative-F (derivative-R f))`).
pub fn nestings(depth: usize, f: &str) -> Vec<(String, String)> {
    if depth == 0 {
        return vec![(String::new(), f.to_string())];
    }
    let mut out = Vec::new();
    for (label, op) in MODES {
        for (l2, inner) in nestings(depth - 1, f) {
            out.push((format!("{}{}", label, l2), format!("({} {})", op, inner)));
        }
    }
    out
}
