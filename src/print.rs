//! The printer: lists in list/dotted notation, `#t`/`#f`, exact integers,
//! doubles in shortest round-trip form with a decimal point (`1.0`, `0.25`),
//! tagged values as `(perturbation v)`, `(forward p t)`, `(sensitivity v)`,
//! `(reverse v)`, closures as their (renamed) lambda, primitives by name.

use crate::value::{Tag, Value};
use std::fmt::Write;

/// Formats a double so that it reads back as the same double and as a real.
pub fn format_real(r: f64) -> String {
    if r.is_nan() {
        return "+nan.0".into();
    }
    if r.is_infinite() {
        return if r > 0.0 { "+inf.0".into() } else { "-inf.0".into() };
    }
    let s = format!("{:?}", r);
    // Rust prints 1e100 as "1e100" and 1.0 as "1.0"; keep a '.' or 'e' so it reads as a real.
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{}.0", s)
    }
}

/// The printed form of a value.
pub fn to_string(v: &Value) -> String {
    let mut p = Printer::new(usize::MAX, None);
    p.value(v);
    p.buf
}

pub fn write_value(out: &mut String, v: &Value) {
    let mut p = Printer::new(usize::MAX, None);
    p.buf = std::mem::take(out);
    p.value(v);
    *out = p.buf;
}

/// The printed form of a value, cut short (ending in `...`) once it is longer than
/// about `max` characters; for error messages, which may be handed huge values.
/// Printing stops there, so it takes time and space bounded by `max`, not by the value.
pub fn brief(v: &Value, max: usize) -> String {
    prefix(v, max).0
}

/// [`brief`], and whether that is the whole printed form (not cut short).
pub fn prefix(v: &Value, max: usize) -> (String, bool) {
    printed(v, max, false)
}

/// [`brief`] of a value of transformed code as the user's code had it: a
/// closure that is an AD transform of another (`(reverse (lambda ...))`)
/// shown as the closure it is a transform of (`(lambda ...)`), as a
/// message about a value the program gave shows it where no transform runs.
pub fn brief_source(v: &Value, max: usize) -> String {
    printed(v, max, true).0
}

/// [`prefix`], closures shown as their source if `source` (see [`brief_source`]).
fn printed(v: &Value, max: usize, source: bool) -> (String, bool) {
    let mut p = Printer::new(max, None);
    p.source = source;
    p.value(v);
    let mut s = p.buf;
    if s.chars().count() > max {
        let cut = s.char_indices().nth(max.saturating_sub(3)).map(|(i, _)| i).unwrap_or(s.len());
        s.truncate(cut);
        s.push_str("...");
        return (s, false);
    }
    (s, true)
}

/// Prints a value in pieces of about `CHUNK` bytes, handing each to `sink`,
/// which returns `false` to stop the printing (a failed write, an interrupt, a
/// time limit). Space is bounded by the piece size, not by the printed length:
/// a value with much sharing (a list of 60 levels of `(cons x x)`) prints
/// forever in constant memory rather than building a string of 2^60 pieces.
/// Returns `false` if `sink` stopped it.
pub fn stream(v: &Value, sink: &mut dyn FnMut(&str) -> bool) -> bool {
    let mut p = Printer::new(usize::MAX, Some(sink));
    p.value(v);
    p.flush();
    !p.stopped
}

/// The size of the pieces [`stream`] hands out.
const CHUNK: usize = 1 << 16;

/// Printing state: the text not yet handed out, how much was handed out, the
/// length after which to stop with `...`, and where pieces go.
struct Printer<'a> {
    buf: String,
    flushed: usize,
    limit: usize,
    sink: Option<&'a mut dyn FnMut(&str) -> bool>,
    stopped: bool,
    /// Closures of transformed code shown as the source they are a
    /// transform of (see [`brief_source`]).
    source: bool,
}

/// What remains to print of a value, on the printer's stack.
enum Todo {
    Text(&'static str),
    Value(Value),
    /// The rest of a list, from this pair (or its end), and whether it is the
    /// whole list (no element printed yet).
    Rest(Value, bool),
}

impl<'a> Printer<'a> {
    fn new(limit: usize, sink: Option<&'a mut dyn FnMut(&str) -> bool>) -> Self {
        Printer { buf: String::new(), flushed: 0, limit, sink, stopped: false, source: false }
    }

    /// Whether printing should stop here: past the length limit (after
    /// writing `...`) or stopped by the sink.
    fn full(&mut self) -> bool {
        if self.stopped {
            return true;
        }
        if self.buf.len() >= CHUNK {
            self.flush();
            if self.stopped {
                return true;
            }
        }
        self.flushed + self.buf.len() > self.limit
    }

    fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if !self.stopped && !sink(&self.buf) {
                self.stopped = true;
            }
            self.flushed += self.buf.len();
            self.buf.clear();
        }
    }

    fn push_str(&mut self, s: &str) {
        self.buf.push_str(s)
    }

    /// Prints `v`. Nested values (a list in the car of a list, millions
    /// deep) are taken from a stack of what remains to print, not by
    /// recursion: a level costs one entry (about 32 bytes) of it.
    fn value(&mut self, v: &Value) {
        let mut todo = vec![Todo::Value(v.clone())];
        while let Some(t) = todo.pop() {
            match t {
                Todo::Text(s) => self.push_str(s),
                Todo::Value(v) => self.value_here(&v, &mut todo),
                Todo::Rest(cur, first) => self.rest(cur, first, &mut todo),
            }
        }
    }

    /// Prints `v`, or its beginning, leaving its parts on `todo` (to be
    /// printed in the order they are popped).
    fn value_here(&mut self, v: &Value, todo: &mut Vec<Todo>) {
        if self.full() {
            if !self.stopped {
                self.buf.push_str("...");
            }
            return;
        }
        match v {
            Value::Nil => self.push_str("()"),
            Value::Bool(true) => self.push_str("#t"),
            Value::Bool(false) => self.push_str("#f"),
            Value::Int(i) => {
                let _ = write!(self.buf, "{}", i);
            }
            Value::Big(b) => {
                let _ = write!(self.buf, "{}", b);
            }
            Value::Real(r) => self.buf.push_str(&format_real(*r)),
            // (a real on a tape: only in messages the tape discards)
            Value::Active(a) => todo.push(Todo::Value(a.value.clone())),
            Value::TapeReal(_, _, p) => self.buf.push_str(&format_real(*p)),
            Value::Rat(q) => {
                let _ = write!(self.buf, "{}/{}", q.numer(), q.denom());
            }
            Value::Rev(r) => {
                let _ = write!(self.buf, "#<reversible {}>", r.display_name());
            }
            Value::Vector(x) => self.vector(x),
            Value::Pair(_) => {
                self.push_str("(");
                todo.push(Todo::Rest(v.clone(), true));
            }
            Value::Prim(p) => self.push_str(crate::prims::prim(*p).name),
            // (on one line where the printing is cut short, for a message)
            Value::Closure(inst, i) if self.limit != usize::MAX => {
                let mut code = String::new();
                if self.source {
                    crate::show::write_closure_source(&mut code, inst, *i as usize);
                } else {
                    crate::show::write_closure(&mut code, inst, *i as usize);
                }
                let lines: Vec<&str> = code.lines().map(str::trim).collect();
                self.push_str(&lines.join(" "));
            }
            Value::Closure(inst, i) => crate::show::write_closure(&mut self.buf, inst, *i as usize),
            Value::Tagged(..) | Value::TReal(..) => {
                let (t, inner) = v.peel().expect("a tagged value");
                self.push_str(match t {
                    Tag::Perturbation => "(perturbation ",
                    Tag::Sensitivity => "(sensitivity ",
                    Tag::Reverse => "(reverse ",
                });
                todo.push(Todo::Text(")"));
                todo.push(Todo::Value(inner));
            }
            Value::Lazy(_) => match crate::ad::ops::hnf_detached(v) {
                Ok(m) => todo.push(Todo::Value(m)),
                Err(e) => {
                    let _ = write!(self.buf, "#<error: {}>", e.message);
                }
            },
            Value::Bundle(b) => {
                self.push_str("(forward ");
                todo.extend([
                    Todo::Text(")"),
                    Todo::Value(b.1.clone()),
                    Todo::Text(" "),
                    Todo::Value(b.0.clone()),
                ]);
            }
        }
    }

    /// Prints the rest of a list from `cur` (after its `(`; `first`: nothing
    /// of it printed yet), leaving its next element and the rest after that on
    /// `todo`.
    fn rest(&mut self, cur: Value, first: bool, todo: &mut Vec<Todo>) {
        let cur = match cur {
            Value::Lazy(_) => crate::ad::ops::hnf_detached(&cur).unwrap_or(cur),
            cur => cur,
        };
        match &cur {
            Value::Pair(_) if self.full() => {
                if !self.stopped {
                    self.push_str(" ...");
                }
                self.push_str(")");
            }
            Value::Pair(p) => {
                if !first {
                    self.push_str(" ");
                }
                todo.push(Todo::Rest(p.cdr.clone(), false));
                todo.push(Todo::Value(p.car.clone()));
            }
            Value::Nil => self.push_str(")"),
            other => {
                self.push_str(" . ");
                todo.push(Todo::Text(")"));
                todo.push(Todo::Value(other.clone()));
            }
        }
    }

    /// A vector as `(vector x ...)`, a matrix as `(matrix (x ...) ...)`.
    fn vector(&mut self, v: &crate::vec::RealVec) {
        let xs = v.host();
        let (rows, cols, head) = match v.shape() {
            crate::vec::Shape::Vector => (xs.len(), 1, "(vector"),
            crate::vec::Shape::Matrix(r, c) => (r, c, "(matrix"),
        };
        let matrix = head == "(matrix";
        self.push_str(head);
        for i in 0..rows {
            if self.full() {
                if !self.stopped {
                    self.push_str(" ...");
                }
                break;
            }
            self.push_str(if matrix { " (" } else { " " });
            for j in 0..cols {
                if j > 0 {
                    self.push_str(" ");
                }
                self.buf.push_str(&format_real(xs[i * cols + j]));
            }
            if matrix {
                self.push_str(")");
            }
        }
        self.push_str(")");
    }
}

#[cfg(test)]
mod tests;
