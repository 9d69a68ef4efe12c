//! The reader's output: S-expression data with spans.

use crate::source::Span;
use num_bigint::BigInt;
use std::rc::Rc;

/// One S-expression as read from source.
#[derive(Debug)]
pub struct Datum {
    pub kind: DatumKind,
    pub span: Span,
}

/// (Copying recurses once per level of nesting, growing the stack as it goes.)
impl Clone for Datum {
    fn clone(&self) -> Datum {
        let kind = match &self.kind {
            DatumKind::List(..) => crate::stack::grow(|| self.kind.clone()),
            k => k.clone(),
        };
        Datum { kind, span: self.span }
    }
}

/// Data nest as deeply as the source does: a list is dropped with an explicit
/// work list rather than by recursion (the derived drop would recurse once per
/// level of nesting).
impl Drop for Datum {
    fn drop(&mut self) {
        let DatumKind::List(items, tail) = &mut self.kind else { return };
        let mut work: Vec<Datum> = std::mem::take(items);
        work.extend(tail.take().map(|t| *t));
        while let Some(mut d) = work.pop() {
            if let DatumKind::List(items, tail) = &mut d.kind {
                work.append(items);
                work.extend(tail.take().map(|t| *t));
            }
        }
    }
}

#[derive(Clone, Debug)]
pub enum DatumKind {
    /// An exact integer that fits in `i64`.
    Int(i64),
    /// An exact integer that does not fit in `i64`.
    Big(Rc<BigInt>),
    /// An exact rational that is not an integer (`1/3`), normalised.
    Rat(Rc<num_rational::BigRational>),
    /// A double (`1.5`, `1e10`, `+inf.0`, `-nan.0`, `1.`).
    Real(f64),
    Bool(bool),
    /// A string literal, escapes already processed.
    Str(Rc<str>),
    Symbol(Rc<str>),
    /// `(a b c)` has `tail: None`; `(a b . c)` has `tail: Some(c)`.
    /// `'x` is read as the list `(quote x)`.
    List(Vec<Datum>, Option<Box<Datum>>),
}

impl DatumKind {
    /// A number as the nearest `f64` (as [`crate::value::Value::as_f64`] converts
    /// the value it reads as); `None` for anything else.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            DatumKind::Int(i) => Some(*i as f64),
            DatumKind::Big(b) => Some(num_traits::ToPrimitive::to_f64(&**b).unwrap_or(f64::NAN)),
            DatumKind::Real(r) => Some(*r),
            DatumKind::Rat(q) => Some(crate::num::rat_f64(q)),
            _ => None,
        }
    }
}

impl Datum {
    pub fn new(kind: DatumKind, span: Span) -> Datum {
        Datum { kind, span }
    }
    /// The symbol's name, if this is a symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match &self.kind {
            DatumKind::Symbol(s) => Some(s),
            _ => None,
        }
    }
    /// The elements of a proper list.
    pub fn as_list(&self) -> Option<&[Datum]> {
        match &self.kind {
            DatumKind::List(v, None) => Some(v),
            _ => None,
        }
    }
}
