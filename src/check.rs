//! `vlad test`: checks `EXPR ===> EXPECTED` annotations.
//!
//! The value is printed and read back, then compared with the expected datum:
//! numbers within 1e-10 relative to their magnitude, absolute below magnitude 1
//! (`numbers_close`; exact and inexact by value),
//! everything else structurally. `EXPR ===> (error "REGEX")` expects an error
//! whose message matches REGEX; an expression with no annotation must be `#t`.

use crate::datum::{Datum, DatumKind};
use crate::error::{Error, ErrorKind, Result};
use crate::toplevel::{Session, Step};
use crate::value::Value;
use std::path::Path;

/// Outcome of checking files.
#[derive(Default, Debug)]
pub struct Report {
    pub passed: usize,
    pub failed: usize,
    /// One line per failure.
    pub failures: Vec<String>,
}

/// Relative tolerance for numbers.
pub const TOLERANCE: f64 = 1e-10;

fn num_of(d: &Datum) -> Option<f64> {
    d.kind.as_f64()
}

/// Structural equality of data, numbers within tolerance.
pub fn datum_matches(actual: &Datum, expected: &Datum) -> bool {
    match (&actual.kind, &expected.kind) {
        (DatumKind::Int(a), DatumKind::Int(b)) => a == b,
        (DatumKind::Big(a), DatumKind::Big(b)) => a == b,
        (DatumKind::Rat(a), DatumKind::Rat(b)) => a == b,
        (DatumKind::Bool(a), DatumKind::Bool(b)) => a == b,
        (DatumKind::Symbol(a), DatumKind::Symbol(b)) => a == b,
        (DatumKind::Str(a), DatumKind::Str(b)) => a == b,
        // A packed vector (printed `(vector x ...)`, `(matrix (x ...) ...)`)
        // matches the list of its numbers (its rows) too, as `list-of` gives them;
        // also as a list's tail (printed `(1 . (vector 2.0 3.0))`, which reads
        // back as `(1 vector 2.0 3.0)`: VLAD has no symbols as data, so the
        // symbol is the vector's head).
        (DatumKind::List(a, None), DatumKind::List(b, None)) if a.len() == b.len() + 1 && !packed(b) => {
            // (otherwise the lengths differ: no match)
            a.iter().position(is_packed_head).is_some_and(|k| {
                a[..k].iter().zip(b).all(|(x, y)| datum_matches(x, y))
                    && a[k + 1..].iter().zip(&b[k..]).all(|(x, y)| datum_matches(x, y))
            })
        }
        (DatumKind::List(a, ta), DatumKind::List(b, tb)) => crate::stack::grow(|| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| datum_matches(x, y))
                && match (ta, tb) {
                    (None, None) => true,
                    (Some(x), Some(y)) => datum_matches(x, y),
                    _ => false,
                }
        }),
        _ => match (num_of(actual), num_of(expected)) {
            (Some(a), Some(b)) => numbers_close(a, b),
            _ => false,
        },
    }
}

/// Is a printed list a packed vector's or matrix's (headed `vector`, `matrix`)?
fn packed(items: &[Datum]) -> bool {
    items.first().is_some_and(is_packed_head)
}

fn is_packed_head(d: &Datum) -> bool {
    matches!(d.as_symbol(), Some("vector" | "matrix"))
}

/// Within `TOLERANCE` relative to the larger magnitude, or absolute where
/// both are below 1 (a result that cancels to a rounding error matches 0).
pub fn numbers_close(a: f64, b: f64) -> bool {
    if a == b || (a.is_nan() && b.is_nan()) {
        return true;
    }
    // An infinity (or NaN) is close only to itself: the relative test below would
    // accept +inf.0 for any number, since inf <= 1e-10 * inf.
    if !a.is_finite() || !b.is_finite() {
        return false;
    }
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// The regex of an `(error "REGEX")` expectation.
fn error_expectation(d: &Datum) -> Option<&str> {
    match d.as_list() {
        Some([h, Datum { kind: DatumKind::Str(s), .. }]) if h.as_symbol() == Some("error") => Some(s),
        _ => None,
    }
}

/// Checks one result against its expectation; `Err` carries "expected ..., got ...".
pub fn check(result: &Result<Value>, expected: Option<&Datum>) -> std::result::Result<(), String> {
    let shown = |r: &Result<Value>| match r {
        Ok(v) => clip_printed(crate::print::prefix(v, SHOWN), SHOWN),
        Err(e) => format!("error: {}", e.message),
    };
    match expected {
        None => match result {
            Ok(Value::Bool(true)) => Ok(()),
            r => Err(format!("expected #t, got {}", shown(r))),
        },
        Some(exp) => {
            if let Some(re) = error_expectation(exp) {
                let rx =
                    regex::Regex::new(re).map_err(|e| format!("bad regex in (error \"{}\"): {}", re, e))?;
                // (a check that a limit stopped fails, unless it expects the
                // limit by name: `(error "limit")`, `(error "step limit")`; a
                // regex that happens to match the limit's message, as "" or "e"
                // do, does not pass a runaway check)
                let names_limit = |re: &str| {
                    let re = re.to_lowercase();
                    re.contains("limit") || re.contains("interrupt")
                };
                return match result {
                    Err(e) if e.kind != ErrorKind::Limit || (names_limit(re) && rx.is_match(&e.message)) => {
                        if rx.is_match(&e.message) {
                            Ok(())
                        } else {
                            Err(format!("expected an error matching \"{}\", got error: {}", re, e.message))
                        }
                    }
                    r => Err(format!("expected an error matching \"{}\", got {}", re, shown(r))),
                };
            }
            match result {
                Ok(v) => {
                    // A value printed 64 times longer than the expectation cannot
                    // match it (a number prints in at most ~25 characters, and in at
                    // least one), so printing stops there (or at what a failure line
                    // shows, if more): a huge value (say 2^60 pairs shared 60 deep)
                    // fails the check instead of filling memory.
                    let expected = datum_text(exp);
                    let max = SHOWN.max(64 * expected.len() + 4096);
                    let printed = crate::print::prefix(v, max);
                    let ok = printed.1
                        && crate::reader::read_all(&printed.0, u32::MAX)
                            .ok()
                            .and_then(|ds| ds.into_iter().next())
                            .map(|d| datum_matches(&d, exp))
                            .unwrap_or(false);
                    if ok {
                        Ok(())
                    } else {
                        Err(format!("expected {}, got {}", clip(expected), clip_printed(printed, max)))
                    }
                }
                Err(e) => Err(format!("expected {}, got error: {}", clip(datum_text(exp)), e.message)),
            }
        }
    }
}

/// How much of a value is printed for a failure line (before [`clip`]).
const SHOWN: usize = 100_000;

/// A value's text for a failure line, from at most `max` characters of it printed
/// (and whether that was all of it: [`crate::print::prefix`]).
fn clip_printed(printed: (String, bool), max: usize) -> String {
    match printed {
        (text, true) => clip(text),
        (text, false) => {
            let head: String = text.chars().take(400).collect();
            format!("{} ... (longer than {} characters)", head, max)
        }
    }
}

/// A value's text for a failure line: a long one keeps its start and end.
fn clip(text: String) -> String {
    const KEEP: usize = 400;
    let n = text.chars().count();
    if n <= 3 * KEEP {
        return text;
    }
    let head: String = text.chars().take(KEEP).collect();
    let tail: String = text.chars().skip(n - KEEP).collect();
    format!("{} ... ({} characters in all) ... {}", head, n, tail)
}

/// Prints a datum back as source text.
pub fn datum_text(d: &Datum) -> String {
    let mut out = String::new();
    write_datum(d, &mut out);
    out
}

/// [`datum_text`] into `out` (one buffer, so deep data prints in linear time).
fn write_datum(d: &Datum, out: &mut String) {
    match &d.kind {
        DatumKind::Int(i) => out.push_str(&i.to_string()),
        DatumKind::Big(b) => out.push_str(&b.to_string()),
        DatumKind::Rat(q) => out.push_str(&q.to_string()),
        DatumKind::Real(r) => out.push_str(&crate::print::format_real(*r)),
        DatumKind::Bool(b) => out.push_str(if *b { "#t" } else { "#f" }),
        DatumKind::Str(s) => out.push_str(&format!("{:?}", s)),
        DatumKind::Symbol(s) => out.push_str(s),
        DatumKind::List(items, tail) => crate::stack::grow(|| {
            out.push('(');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_datum(it, out);
            }
            if let Some(t) = tail {
                out.push_str(" . ");
                write_datum(t, out);
            }
            out.push(')');
        }),
    }
}

/// Checks one file in a fresh session made by `new_session`.
pub fn check_file(new_session: &dyn Fn() -> Session, path: &Path, report: &mut Report) {
    let mut sess = new_session();
    // One annotation that fails to compile fails (or, expecting an error, passes)
    // by itself; the checks after it still run.
    sess.defer_errors = true;
    // `--max-steps` and `--timeout` bound each check (as each REPL input), so that one
    // runaway check does not use up the budget of the checks after it.
    let budget = sess.m.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
    // `--metered`: the procedure calls of all the checks (`steps` restarts at each).
    let calls = std::cell::Cell::new(0u64);
    let fresh_limits = |sess: &mut Session| {
        calls.set(calls.get() + sess.m.steps());
        sess.m.set_steps(0);
        sess.m.deadline = budget.and_then(|b| std::time::Instant::now().checked_add(b));
    };
    let fail = |report: &mut Report, line: String| {
        report.failed += 1;
        report.failures.push(line);
    };
    let items = match sess.read_file(path) {
        Ok(items) => items,
        Err(e) => return fail(report, render_short(&sess, &e, path)),
    };
    let unit = match sess.compile(items) {
        Ok(u) => u,
        Err(e) => return fail(report, render_short(&sess, &e, path)),
    };
    // `--metered` counts only the file's own work (as `vlad run` does), not the prelude's.
    if let Some(m) = &mut sess.m.meter {
        m.iter_mut().for_each(|c| *c = 0);
    }
    sess.m.set_steps(0);
    for step in unit.steps {
        match step {
            Step::Define(g, span) => {
                fresh_limits(&mut sess);
                arm_watchdog(&sess, span, report);
                if let Err(e) = sess.run_define(g) {
                    let loc = sess.sources.location(span);
                    fail(report, format!("{}: definition failed: {}", loc, e.message));
                }
            }
            Step::Failed { error, span, definition: true, .. } => {
                let loc = sess.sources.location(span);
                fail(report, format!("{}: definition failed: {}", loc, error.message));
            }
            Step::Expr { .. } | Step::Failed { .. } => {
                let (r, span, expected) = match step {
                    Step::Expr { thunk, span, expected } => {
                        fresh_limits(&mut sess);
                        arm_watchdog(&sess, span, report);
                        (sess.run_thunk(&thunk).and_then(|v| sess.printable(v, span)), span, expected)
                    }
                    Step::Failed { error, span, expected, .. } => (Err(error), span, expected),
                    Step::Define(..) => unreachable!(),
                };
                let loc = sess.sources.location(span);
                let loc = loc.rsplit_once(':').map(|(a, _)| a.to_string()).unwrap_or(loc);
                match check(&r, expected.as_ref()) {
                    Ok(()) => report.passed += 1,
                    Err(msg) => fail(report, format!("{}: {}", loc, msg)),
                }
            }
        }
    }
    if sess.watchdog {
        crate::watchdog::disarm();
    }
    if sess.m.meter.is_some() {
        sess.m.set_steps(sess.m.steps() + calls.get());
        eprintln!("metered: {}", path.display());
        crate::cli::print_meter(&sess);
    }
}

/// `--timeout` for the check at `span`: should it run on, stuck in one primitive
/// operation, after its deadline, the watchdog prints the report so far, with this
/// check failed, and ends the run.
fn arm_watchdog(sess: &Session, span: crate::source::Span, report: &Report) {
    if !sess.watchdog || sess.m.deadline.is_none() {
        return;
    }
    let loc = sess.sources.location(span);
    let loc = loc.rsplit_once(':').map(|(a, _)| a.to_string()).unwrap_or(loc);
    let failures = report.failures.clone();
    let (passed, failed) = (report.passed, report.failed + 1);
    crate::watchdog::arm(
        sess.m.deadline,
        Box::new(move || {
            // (written as the process ends: a failed write changes nothing)
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            for line in &failures {
                let _ = writeln!(out, "{}", line);
            }
            let _ = writeln!(out, "{}: error: {}", loc, crate::watchdog::message());
            let _ =
                writeln!(out, "{} passed, {} failed (the checks after this one did not run)", passed, failed);
            let _ = out.flush();
            3
        }),
    );
}

fn render_short(sess: &Session, e: &Error, path: &Path) -> String {
    match e.span {
        Some(s) => format!("{}: error: {}", sess.sources.location(s), e.message),
        None => format!("{}: error: {}", path.display(), e.message),
    }
}

/// The `.vlad` files named, directories expanded (sorted).
pub fn expand_paths(paths: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    list_paths(paths).0
}

/// [`expand_paths`], with a line for each directory that gives nothing to
/// check: one that cannot be read (its error) or holds no `.vlad` file (a
/// wrong path is a mistake, not a pass), and for each `.vlad` entry of a
/// directory that is not a regular file (a named pipe, a device: reading
/// one could wait forever), which is not checked.
pub fn list_paths(paths: &[std::path::PathBuf]) -> (Vec<std::path::PathBuf>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for p in paths {
        if p.is_dir() {
            let reported = problems.len();
            let mut v: Vec<_> = match std::fs::read_dir(p) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "vlad"))
                    // (a named pipe or device found there is not read: that
                    // could wait forever; it is reported instead)
                    .filter(|f| match std::fs::metadata(f) {
                        Ok(m) if m.is_file() => true,
                        Ok(m) => {
                            let kind = crate::toplevel::file_kind(&m);
                            problems.push(format!("{}: error: {kind}; not checked", f.display()));
                            false
                        }
                        Err(e) => {
                            problems.push(format!("{}: error: cannot access it: {e}", f.display()));
                            false
                        }
                    })
                    .collect(),
                Err(e) => {
                    problems.push(format!("{}: error: cannot read the directory: {e}", p.display()));
                    continue;
                }
            };
            if v.is_empty() && problems.len() == reported {
                problems.push(format!("{}: error: no .vlad files in this directory", p.display()));
            }
            v.sort();
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    (out, problems)
}
