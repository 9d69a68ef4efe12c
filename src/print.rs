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
    let mut s = String::new();
    write_value(&mut s, v);
    s
}

pub fn write_value(out: &mut String, v: &Value) {
    write_limited(out, v, usize::MAX)
}

/// The printed form of a value, cut short (ending in `...`) once it is longer than
/// about `max` characters; for error messages, which may be handed huge values.
/// Printing stops there, so it takes time and space bounded by `max`, not by the value.
pub fn brief(v: &Value, max: usize) -> String {
    let mut s = String::new();
    write_limited(&mut s, v, max);
    if s.chars().count() > max {
        let cut = s.char_indices().nth(max.saturating_sub(3)).map(|(i, _)| i).unwrap_or(s.len());
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Writes a value, stopping (with `...`) once `out` is `limit` bytes long.
fn write_limited(out: &mut String, v: &Value, limit: usize) {
    if out.len() > limit {
        out.push_str("...");
        return;
    }
    // Nested values (a list in the car of a list, millions deep) recurse natively.
    let write_value = |out: &mut String, v: &Value| crate::stack::grow(|| write_limited(out, v, limit));
    match v {
        Value::Nil => out.push_str("()"),
        Value::Bool(true) => out.push_str("#t"),
        Value::Bool(false) => out.push_str("#f"),
        Value::Int(i) => {
            let _ = write!(out, "{}", i);
        }
        Value::Big(b) => {
            let _ = write!(out, "{}", b);
        }
        Value::Real(r) => out.push_str(&format_real(*r)),
        Value::Rat(q) => {
            let _ = write!(out, "{}/{}", q.numer(), q.denom());
        }
        Value::Rev(r) => {
            let _ = write!(out, "#<reversible {}>", r.display_name());
        }
        Value::Vector(x) => crate::vec::write(out, x, limit),
        Value::Pair(_) => {
            out.push('(');
            let mut cur = v.clone();
            let mut first = true;
            loop {
                if let Value::Lazy(_) = cur {
                    cur = match crate::ad::ops::hnf_detached(&cur) {
                        Ok(h) => h,
                        Err(_) => cur,
                    };
                }
                match &cur {
                    Value::Pair(_) if out.len() > limit => {
                        out.push_str(" ...");
                        break;
                    }
                    Value::Pair(p) => {
                        if !first {
                            out.push(' ');
                        }
                        first = false;
                        write_value(out, &p.car);
                        let next = p.cdr.clone();
                        cur = next;
                    }
                    Value::Nil => break,
                    other => {
                        out.push_str(" . ");
                        write_value(out, other);
                        break;
                    }
                }
            }
            out.push(')');
        }
        Value::Prim(p) => out.push_str(crate::prims::prim(*p).name),
        Value::Closure(inst, i) => crate::show::write_closure(out, inst, *i as usize),
        Value::Tagged(..) | Value::TReal(..) => {
            let (t, inner) = v.peel().expect("a tagged value");
            let inner = &inner;
            out.push('(');
            out.push_str(match t {
                Tag::Perturbation => "perturbation",
                Tag::Sensitivity => "sensitivity",
                Tag::Reverse => "reverse",
            });
            out.push(' ');
            write_value(out, inner);
            out.push(')');
        }
        Value::Lazy(_) => match crate::ad::ops::hnf_detached(v) {
            Ok(m) => write_value(out, &m),
            Err(e) => {
                let _ = write!(out, "#<error: {}>", e.message);
            }
        },
        Value::Bundle(b) => {
            out.push_str("(forward ");
            write_value(out, &b.0);
            out.push(' ');
            write_value(out, &b.1);
            out.push(')');
        }
    }
}

#[cfg(test)]
mod tests;
