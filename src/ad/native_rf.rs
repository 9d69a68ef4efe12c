//! Reverse over forward of the scalar primitives, natively.
//!
//! The reverse transform R(F(p)) of a scalar primitive's forward version is
//! compiled from its own source (`rules::rf_source`): the forward version's
//! steps on `(*j-inverse v)`, returning `(*j (bundle y (perturb dy)))` and a
//! backpropagator that applies the primitive's second-order rule (the reverse
//! of its tangent rule) to the sensitivity of that bundle. When the arguments
//! are `*j`-tagged bundles of numbers, both are run here instead of by the
//! evaluator: the same arithmetic (the primitives' implementations, metered
//! alike; on doubles when nothing is metered and every number is a real), the
//! same result, the same backpropagator closure (group, and what its
//! environment holds: the tangent rule's arguments and results, as numbers or
//! pairs of numbers rather than lazily tagged pairs). Anything else is left to
//! the evaluator.

use super::native::{dual_of, Dual, Formula, Native, Out, Two};
use crate::anf::{Args, Atom, Bind, Expr, Group, VarId};
use crate::error::Result;
use crate::eval::Machine;
use crate::prims::{self, PrimId};
use crate::value::{Inst, Tag, Value};
use std::cell::OnceCell;
use std::rc::Rc;

/// What each captured value of the backpropagator is: the argument `x`, its
/// tangent `d`, the result `y` or its tangent `dy`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    X,
    D,
    Y,
    Dy,
}

/// The backpropagator's group and what its environment holds.
type Layout = (Rc<Group>, Box<[Role]>);

/// The backpropagator's layout, found on the first call (`None`: the code is
/// not what the native code expects).
#[derive(Default)]
pub struct RfCell {
    bp: OnceCell<Option<Layout>>,
}

/// Finds the backpropagator of R(F(p))'s code (`rules::rf_source`) and what it
/// captures, and gives it its native code.
fn layout(m: &mut Machine, g: &Rc<Group>, p: PrimId, f: Formula) -> Result<Option<Layout>> {
    let members = m.group_members(g)?;
    let [lam] = members else { return Ok(None) };
    let named = |q: PrimId, name: &str| prims::prim(q).name == name;
    let [mut x, mut d, mut y, mut dy]: [Option<VarId>; 4] = [None; 4];
    let mut bp = None;
    for b in &lam.body.binds {
        match b {
            Bind::Let(v, Expr::Prim(q, _, _)) if *q == p => y = Some(*v),
            Bind::Let(v, Expr::Prim(q, _, _)) if named(*q, "primal") => x = Some(*v),
            Bind::Let(v, Expr::Prim(q, _, _)) if named(*q, "unperturb") => d = Some(*v),
            Bind::Let(_, Expr::Prim(q, Args::One(Atom::Var(w)), _)) if named(*q, "perturb") => dy = Some(*w),
            Bind::Let(_, Expr::Lambda(lg)) if bp.is_none() => bp = Some(lg.clone()),
            _ => {}
        }
    }
    let Some(bp) = bp else { return Ok(None) };
    let roles: Option<Box<[Role]>> = bp
        .free
        .iter()
        .map(|v| {
            let v = Some(*v);
            if v == x {
                Some(Role::X)
            } else if v == d {
                Some(Role::D)
            } else if v == y {
                Some(Role::Y)
            } else if v == dy {
                Some(Role::Dy)
            } else {
                None
            }
        })
        .collect();
    let Some(roles) = roles else { return Ok(None) };
    if bp.native.set(Native::RFBp(p, f, roles.clone())).is_err() {
        return Ok(None);
    }
    Ok(Some((bp, roles)))
}

/// One number, or a pair of two (a binary primitive's argument or tangent).
fn one_or_pair(v: &[Value]) -> Value {
    match v {
        [a, b] => Value::cons(a.clone(), b.clone()),
        [a] => a.clone(),
        _ => Value::Nil,
    }
}

/// R(F(p)) on the `nargs` arguments at `stack[base..]`: `(cons (*j y) bp)`.
pub fn run(
    m: &mut Machine,
    cell: &RfCell,
    p: PrimId,
    f: Formula,
    inst: &Inst,
    base: usize,
    nargs: usize,
) -> Result<Option<Value>> {
    let Some(leaves) = super::native::leaves(m, p, base, nargs)? else { return Ok(None) };
    // each `(*j (bundle a (perturb da)))` for numbers `a` and `da`
    let (mut xs, mut ds): (Two<Value>, Two<Value>) = (Two::new(), Two::new());
    for l in &leaves {
        let Some(b) = l.peel_if(Tag::Reverse) else { return Ok(None) };
        let Some(Dual { p, t }) = dual_of(m, &b, None)? else { return Ok(None) };
        xs.push(p);
        ds.push(t);
    }
    let lay = match cell.bp.get() {
        Some(l) => l,
        None => {
            let l = layout(m, &inst.group, p, f)?;
            let _ = cell.bp.set(l);
            cell.bp.get().unwrap_or(&None)
        }
    };
    let Some((bp, roles)) = lay else { return Ok(None) };
    let (y, dy) = super::native::apply_jvp(m, p, f, &xs, &ds)?;
    let env = roles.iter().map(|r| match r {
        Role::X => one_or_pair(&xs),
        Role::D => one_or_pair(&ds),
        Role::Y => y.clone(),
        Role::Dy => dy.clone(),
    });
    let bpv = Value::closure(bp.clone(), env, 0);
    let out = Value::bundle(y, Value::tagged(Tag::Perturbation, dy));
    Ok(Some(Value::cons(Value::tagged(Tag::Reverse, out), bpv)))
}

/// The backpropagator of R(F(p)) on its sensitivity `s`:
/// `(sensitize (cons '() (bundle xb (perturb db))))`.
pub fn run_bp(
    m: &mut Machine,
    p: PrimId,
    f: Formula,
    roles: &[Role],
    inst: &Inst,
    base: usize,
    nargs: usize,
) -> Result<Option<Value>> {
    if nargs != 1 {
        return Ok(None);
    }
    let Some(sb) = m.stack[base].peel_if(Tag::Sensitivity) else { return Ok(None) };
    let Some(vb) = cotangent(m, p, f, roles, inst, &sb)? else { return Ok(None) };
    Ok(Some(super::ops::tag(m, Tag::Sensitivity, &Value::cons(Value::Nil, vb))?))
}

/// `(unsensitize (bp (sensitize sb)))` for a backpropagator `bp` of R(F(p)):
/// `(cons '() (bundle xb (perturb db)))`, or `None` if the native code does
/// not apply.
pub fn bp_untagged(m: &mut Machine, inst: &Inst, sb: &Value) -> Result<Option<Value>> {
    let Some(Native::RFBp(p, f, roles)) = inst.group.native.get() else { return Ok(None) };
    let Some(vb) = cotangent(m, *p, *f, roles, inst, sb)? else { return Ok(None) };
    // unsensitize after sensitize cancels: the pair itself
    m.ad_work += 2;
    Ok(Some(Value::cons(Value::Nil, vb)))
}

/// The sensitivity of R(F(p))'s argument bundle from the sensitivity `sb` of
/// its result bundle, by the second-order rule.
fn cotangent(
    m: &mut Machine,
    p: PrimId,
    f: Formula,
    roles: &[Role],
    inst: &Inst,
    sb: &Value,
) -> Result<Option<Value>> {
    let Some(Dual { p: yb, t: db }) = dual_of(m, sb, None)? else { return Ok(None) };
    // (what the rule does not capture, it does not read)
    let (mut x, mut d, mut y, mut dy) = (None, None, &Value::Nil, &Value::Nil);
    for (r, v) in roles.iter().zip(inst.env.iter()) {
        match r {
            Role::X => x = Some(v),
            Role::D => d = Some(v),
            Role::Y => y = v,
            Role::Dy => dy = v,
        }
    }
    let parts = |v: Option<&Value>| -> Option<[Value; 2]> {
        match v {
            Some(Value::Pair(q)) if q.car.is_number() && q.cdr.is_number() => {
                Some([q.car.clone(), q.cdr.clone()])
            }
            Some(v) if v.is_number() => Some([v.clone(), Value::Nil]),
            Some(_) => None,
            None => Some([Value::Nil, Value::Nil]),
        }
    };
    let (Some(x), Some(d)) = (parts(x), parts(d)) else { return Ok(None) };
    let n = prims::prim(p).arity as usize;
    let (xb, dxb) = super::native::rf_rule(m, f, &x[..n], y, &d[..n], dy, &yb, &db)?;
    let leaf = |a: Value, da: Value| Value::bundle(a, Value::tagged(Tag::Perturbation, da));
    Ok(Some(match (xb, dxb) {
        (Out::One(a), Out::One(da)) => leaf(a, da),
        (Out::Two(a, b), Out::Two(da, db)) => Value::cons(leaf(a, da), leaf(b, db)),
        _ => return Ok(None),
    }))
}
