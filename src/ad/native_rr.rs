//! Native code for reverse over reverse: the steps of nested reverse-mode code
//! around the rule closures of [`super::native`], run at once when the values
//! are what they expect, with the same results, closures and meter counts as
//! the interpreted steps.

use super::native::{captured, struct_vjp, Formula, Native};
use crate::error::Result;
use crate::eval::Machine;
use crate::value::{Inst, LazyOp, Tag, Value};

/// Does `(unsensitize (sensitize x))` give back `x` itself, after one AD value
/// operation each (and no other work)?
fn sensitize_round_trips(x: &Value) -> bool {
    match x {
        Value::Nil | Value::Real(_) | Value::TReal(..) | Value::Pair(_) => true,
        // `sensitize` would cancel a pending `unsensitize` (and rebuild the value).
        Value::Lazy(z) => z.ops.last() != Some(&LazyOp::Untag(Tag::Sensitivity)),
        _ => false,
    }
}

/// `(unsensitize (bp (sensitize x)))` for a closure `bp` of the backpropagator
/// of an AD primitive's reverse version (`*j`, `sensitize`, `zero`, `plus`...)
/// or of a shape predicate's, natively (see [`super::native::bp_untagged`]):
/// the pair `(cons '() xb)` the backpropagator builds, without the tags.
pub fn struct_bp_untagged(m: &mut Machine, inst: &Inst, x: &Value) -> Result<Option<Value>> {
    if !sensitize_round_trips(x) {
        return Ok(None);
    }
    match inst.group.native.get() {
        // (lambda (s) (sensitize (cons '() (vjp x y (unsensitize s)))))
        Some(Native::Bp { f: Formula::Struct(op), env }) => {
            // sensitize, unsensitize
            m.ad_work += 2;
            let (cx, _) = captured(env, inst);
            let xb = struct_vjp(m, *op, cx, x)?;
            // sensitize, unsensitize
            m.ad_work += 2;
            Ok(Some(Value::cons(Value::Nil, xb)))
        }
        // (lambda (s) (sensitize (cons '() (zero (*j-inverse v))))), `s` unread
        Some(Native::ShapeBp) if inst.env.len() == 1 => {
            // sensitize
            m.ad_work += 1;
            let v = super::ops::untag(m, Tag::Reverse, &inst.env[0])?;
            let z = super::ops::lazy_zero(m, &v)?;
            // sensitize, unsensitize
            m.ad_work += 2;
            Ok(Some(Value::cons(Value::Nil, z)))
        }
        _ => Ok(None),
    }
}
