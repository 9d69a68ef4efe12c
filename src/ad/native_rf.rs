//! Reverse over forward of the scalar primitives, natively.
//!
//! When reverse mode transforms code that calls the forward version F(p) of a
//! scalar primitive, it runs the reverse transform R(F(p)) of the forward rule
//! closure (`rules::rule_source(p, Kind::F)`): straight-line code that calls a
//! dozen reverse versions of primitives (`(reverse primal)`, `(reverse *)`,
//! `(reverse bundle)`...), each returning its value and a backpropagator, and
//! that ends by building its own backpropagator closure capturing those. Its
//! backpropagator calls them back in turn.
//!
//! Both are run here instead of by the evaluator, from a plan made once from
//! the transformed code itself (so every primitive with a formula is covered,
//! whatever its tangent rule): the same steps in the same order, on the
//! values themselves, without frames, dispatch or lazy tag operations. The
//! reverse versions and backpropagators the code calls are run as their own
//! native code would run them: the same arithmetic (through the primitives,
//! metered alike), the same backpropagator closures (group and environment),
//! the same results. A tag operation on a pair of numbers is applied to its
//! parts at once rather than lazily (the same value; `Machine::ad_work` counts
//! fewer operations than on the evaluator's path), and one call is counted for
//! each call the code makes. Arguments of any other shape, and any step the
//! plan does not know, are left to the evaluator.

use super::native::{bp_closure, bp_cotangent, Formula, Native, StructOp};
use super::ops;
use crate::anf::{Args, Atom, Bind, Expr, Group, VarId};
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::prims::{self, PrimId};
use crate::value::{Inst, Tag, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::cell::OnceCell;
use std::rc::Rc;

/// The plan of a reverse-transformed forward rule, made on its first call.
#[derive(Default)]
pub struct RfCell {
    plan: OnceCell<Option<Rc<Plan>>>,
}

/// An operand: a register, a captured value (backpropagator only) or a constant.
#[derive(Clone)]
enum Arg {
    Reg(u16),
    Env(u16),
    Const(Value),
}

/// A call of a primitive's reverse version, bound as `(cons val bp)`.
struct Call {
    rule: Value,
    prim: PrimId,
    f: Formula,
    bp: Rc<Group>,
    env: Box<[bool]>,
    args: SmallVec<[Arg; 2]>,
    val: u16,
    bpr: u16,
}

enum Step {
    Call(Box<Call>),
    Uncons(Arg, u16, u16),
}

/// The forward sweep.
struct Plan {
    arity: u8,
    nregs: usize,
    param: u16,
    steps: Vec<Step>,
    val: u16,
    bp: Rc<Group>,
    caps: Box<[u16]>,
}

/// A step of the backpropagator.
enum BStep {
    /// A tag primitive, `zero` or another one-argument AD primitive.
    Prim(u16, Op1, Arg),
    Plus(u16, Arg, Arg),
    /// `(bp x)`: `sensitize` applied to `x` first, `unsensitize` to the result
    /// after, when the code does so (and uses nothing in between).
    Call {
        dst: u16,
        f: Arg,
        x: Arg,
        pre: bool,
        post: bool,
    },
    Uncons(Arg, u16, u16),
    Cons(u16, Arg, Arg),
    EnvSens(u16, Rc<Group>, u32, Vec<Arg>),
}

/// A one-argument primitive of a backpropagator.
#[derive(Clone, Copy)]
enum Op1 {
    Tag(Tag),
    /// (with the primitive, for a value it does not apply to)
    Untag(Tag, PrimId),
    Zero,
    Other(PrimId),
}

impl Op1 {
    fn of(p: PrimId) -> Op1 {
        match prims::prim(p).name {
            "sensitize" => Op1::Tag(Tag::Sensitivity),
            "unsensitize" => Op1::Untag(Tag::Sensitivity, p),
            "*j-inverse" => Op1::Untag(Tag::Reverse, p),
            "zero" => Op1::Zero,
            _ => Op1::Other(p),
        }
    }
}

/// The backpropagator of a reverse-transformed forward rule.
pub struct BpPlan {
    nregs: usize,
    param: u16,
    steps: Vec<BStep>,
    result: Arg,
    /// The final `(sensitize pair)` of the result, if that is how it ends.
    last_tag: Option<Arg>,
}

fn prim_named(p: PrimId, name: &str) -> bool {
    prims::prim(p).name == name
}

/// Variables as registers.
#[derive(Default)]
struct Regs {
    map: FxHashMap<VarId, u16>,
    env: FxHashMap<VarId, u16>,
}

impl Regs {
    fn def(&mut self, v: VarId) -> u16 {
        let n = self.map.len() as u16;
        *self.map.entry(v).or_insert(n)
    }
    fn arg(&self, a: &Atom) -> Option<Arg> {
        match a {
            Atom::Var(v) => match self.map.get(v) {
                Some(r) => Some(Arg::Reg(*r)),
                None => self.env.get(v).map(|i| Arg::Env(*i)),
            },
            Atom::Const(c) => Some(Arg::Const(c.clone())),
            Atom::Global(_) => None,
        }
    }
}

/// Makes the plan of the reverse transform `t` of a scalar primitive's
/// forward version, and gives its backpropagator group its native code.
fn make_plan(m: &mut Machine, t: &Rc<Group>, p: PrimId) -> Result<Option<Rc<Plan>>> {
    let members = m.group_members(t)?;
    let [lam] = members else { return Ok(None) };
    let mut regs = Regs::default();
    let param = regs.def(lam.param);
    let b = &lam.body.binds;
    let mut steps = Vec::new();
    let mut i = 0;
    let mut bpg: Option<(Rc<Group>, VarId)> = None;
    let mut out = None;
    while i < b.len() {
        match (&b[i], b.get(i + 1)) {
            (
                Bind::Let(r, Expr::App(Atom::Const(rule @ Value::Closure(ci, 0)), args, _)),
                Some(Bind::Uncons(x, bpv, Atom::Var(r2), _)),
            ) if r2 == r => {
                let Some(Native::R { prim, f, bp, env }) = ci.group.native.get() else { return Ok(None) };
                let args: Option<SmallVec<[Arg; 2]>> = match args {
                    Args::One(a) => regs.arg(a).map(|a| smallvec::smallvec![a]),
                    Args::Tuple(xs) if xs.len() == 2 => xs.iter().map(|a| regs.arg(a)).collect(),
                    _ => None,
                };
                let Some(args) = args else { return Ok(None) };
                if matches!(f, Formula::Zero) {
                    return Ok(None);
                }
                let (val, bpr) = (regs.def(*x), regs.def(*bpv));
                steps.push(Step::Call(Box::new(Call {
                    rule: rule.clone(),
                    prim: *prim,
                    f: *f,
                    bp: bp.clone(),
                    env: env.clone(),
                    args,
                    val,
                    bpr,
                })));
                i += 2;
                continue;
            }
            (Bind::Uncons(a, d, src, _), _) => {
                let Some(src) = regs.arg(src) else { return Ok(None) };
                let (a, d) = (regs.def(*a), regs.def(*d));
                steps.push(Step::Uncons(src, a, d));
            }
            (Bind::Let(v, Expr::Lambda(g)), _) if bpg.is_none() => bpg = Some((g.clone(), *v)),
            (Bind::Let(o, Expr::Cons(Atom::Var(val), Atom::Var(bpv))), _)
                if bpg.as_ref().is_some_and(|(_, v)| v == bpv) && i + 1 == b.len() =>
            {
                out = Some((*o, *val));
            }
            _ => return Ok(None),
        }
        i += 1;
    }
    let (Some((bp, _)), Some((o, val))) = (bpg, out) else { return Ok(None) };
    if !matches!(lam.body.result, Atom::Var(r) if r == o) {
        return Ok(None);
    }
    let Some(Arg::Reg(val)) = regs.arg(&Atom::Var(val)) else { return Ok(None) };
    let caps: Option<Box<[u16]>> = bp.free.iter().map(|v| regs.map.get(v).copied()).collect();
    let Some(caps) = caps else { return Ok(None) };
    let Some(bplan) = make_bp_plan(&bp) else { return Ok(None) };
    if bp.native.set(Native::RFBp(Rc::new(bplan))).is_err() {
        return Ok(None);
    }
    Ok(Some(Rc::new(Plan {
        arity: prims::prim(p).arity,
        nregs: regs.map.len(),
        param,
        steps,
        val,
        bp,
        caps,
    })))
}

fn make_bp_plan(g: &Rc<Group>) -> Option<BpPlan> {
    let [lam] = g.members.get()?.as_slice() else { return None };
    let mut regs = Regs::default();
    for (i, v) in g.free.iter().enumerate() {
        regs.env.insert(*v, i as u16);
    }
    let param = regs.def(lam.param);
    let b = &lam.body.binds;
    // uses of each variable (the steps below take only the binds they know)
    let mut uses: FxHashMap<VarId, u32> = FxHashMap::default();
    crate::resolve::count_uses_block(&lam.body, &mut uses);
    let once = |v: &VarId| uses.get(v).copied() == Some(1);
    let tag_prim = |e: &Expr, name: &str| match e {
        Expr::Prim(p, Args::One(a), _) if prim_named(*p, name) => Some(a.clone()),
        _ => None,
    };
    let mut steps = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match &b[i] {
            Bind::Let(v, e) => {
                // (sensitize x) read only by the call that follows
                if let (Some(x), Some(Bind::Let(_, Expr::App(_, Args::One(Atom::Var(a)), _)))) =
                    (tag_prim(e, "sensitize"), b.get(i + 1))
                {
                    if a == v && once(v) {
                        let x = regs.arg(&x)?;
                        i += 1;
                        let Bind::Let(r, Expr::App(f, _, _)) = &b[i] else { return None };
                        let f = regs.arg(f)?;
                        steps.push(call_step(&mut regs, b, &mut i, *r, f, x, true, &once, &tag_prim));
                        i += 1;
                        continue;
                    }
                }
                match e {
                    Expr::App(f, Args::One(x), _) => {
                        let (f, x) = (regs.arg(f)?, regs.arg(x)?);
                        steps.push(call_step(&mut regs, b, &mut i, *v, f, x, false, &once, &tag_prim));
                    }
                    Expr::Prim(p, Args::One(a), _) if prims::prim(*p).arity == 1 => {
                        let a = regs.arg(a)?;
                        steps.push(BStep::Prim(regs.def(*v), Op1::of(*p), a));
                    }
                    Expr::Prim(p, Args::Tuple(xs), _) if prim_named(*p, "plus") && xs.len() == 2 => {
                        let (a, d) = (regs.arg(&xs[0])?, regs.arg(&xs[1])?);
                        steps.push(BStep::Plus(regs.def(*v), a, d));
                    }
                    Expr::Cons(a, d) => {
                        let (a, d) = (regs.arg(a)?, regs.arg(d)?);
                        steps.push(BStep::Cons(regs.def(*v), a, d));
                    }
                    Expr::MakeEnvSens(g, k, xs) => {
                        let xs = xs.iter().map(|a| regs.arg(a)).collect::<Option<Vec<_>>>()?;
                        steps.push(BStep::EnvSens(regs.def(*v), g.clone(), *k, xs));
                    }
                    _ => return None,
                }
            }
            Bind::Uncons(x, y, a, _) => {
                let a = regs.arg(a)?;
                let (x, y) = (regs.def(*x), regs.def(*y));
                steps.push(BStep::Uncons(a, x, y));
            }
            _ => return None,
        }
        i += 1;
    }
    let result = regs.arg(&lam.body.result)?;
    let last_tag = match (steps.last(), &result) {
        (Some(BStep::Prim(d, Op1::Tag(Tag::Sensitivity), a)), Arg::Reg(r)) if d == r => Some(a.clone()),
        _ => None,
    };
    Some(BpPlan { nregs: regs.map.len(), param, steps, result, last_tag })
}

/// A backpropagator call bound to `r`, with a following `(unsensitize r)`
/// folded in when `r` is read nowhere else.
#[allow(clippy::too_many_arguments)]
fn call_step(
    regs: &mut Regs,
    b: &[Bind],
    i: &mut usize,
    r: VarId,
    f: Arg,
    x: Arg,
    pre: bool,
    once: &dyn Fn(&VarId) -> bool,
    tag_prim: &dyn Fn(&Expr, &str) -> Option<Atom>,
) -> BStep {
    if let Some(Bind::Let(u, e)) = b.get(*i + 1) {
        if matches!(tag_prim(e, "unsensitize"), Some(Atom::Var(a)) if a == r) && once(&r) {
            *i += 1;
            return BStep::Call { dst: regs.def(*u), f, x, pre, post: true };
        }
    }
    BStep::Call { dst: regs.def(r), f, x, pre, post: false }
}

/// The plan of a call's group (made on its first call).
fn plan(m: &mut Machine, cell: &RfCell, p: PrimId, inst: &Inst) -> Result<Option<Rc<Plan>>> {
    if let Some(pl) = cell.plan.get() {
        return Ok(pl.clone());
    }
    let pl = make_plan(m, &inst.group, p)?;
    let _ = cell.plan.set(pl.clone());
    Ok(pl)
}

/// Is this `(*j (bundle a (perturb da)))` for numbers `a` and `da`?
fn rf_leaf(v: &Value) -> bool {
    let Value::Tagged(Tag::Reverse, b) = v else { return false };
    let Value::Bundle(b) = &**b else { return false };
    dual(b)
}

/// R(F(p)) on the `nargs` arguments at `stack[base..]`: `(cons (*j y) bp)`.
pub fn run(
    m: &mut Machine,
    cell: &RfCell,
    p: PrimId,
    inst: &Inst,
    base: usize,
    nargs: usize,
) -> Result<Option<Value>> {
    let args = &m.stack[base..base + nargs];
    let ok = match (prims::prim(p).arity, args) {
        (1, [a]) => rf_leaf(a),
        (2, [Value::Pair(q)]) => rf_leaf(&q.car) && rf_leaf(&q.cdr),
        (2, [a, b]) => rf_leaf(a) && rf_leaf(b),
        _ => false,
    };
    if !ok {
        return Ok(None);
    }
    let Some(pl) = plan(m, cell, p, inst)? else { return Ok(None) };
    let v = match &m.stack[base..base + nargs] {
        [a, b] => Value::cons(a.clone(), b.clone()),
        [a] => a.clone(),
        _ => return Ok(None),
    };
    debug_assert!(pl.arity as usize >= nargs);
    let mut r: Vec<Value> = vec![Value::Nil; pl.nregs];
    r[pl.param as usize] = v;
    for step in &pl.steps {
        match step {
            Step::Uncons(src, a, d) => {
                let s = get(&r, &[], src);
                let (x, y) = uncons(m, &s)?;
                r[*a as usize] = x;
                r[*d as usize] = y;
            }
            Step::Call(c) => {
                let args: SmallVec<[Value; 2]> = c.args.iter().map(|a| get(&r, &[], a)).collect();
                let (val, bp) = match call_r(m, c, &args)? {
                    Some(vb) => {
                        m.tick()?;
                        vb
                    }
                    None => {
                        // the call itself, as the code makes it
                        let n = args.len();
                        m.stack.extend(args);
                        let pair = m.call(c.rule.clone(), n, None)?;
                        uncons(m, &pair)?
                    }
                };
                r[c.val as usize] = val;
                r[c.bpr as usize] = bp;
            }
        }
    }
    let bp = Value::closure(pl.bp.clone(), pl.caps.iter().map(|i| r[*i as usize].clone()), 0);
    Ok(Some(Value::cons(std::mem::replace(&mut r[pl.val as usize], Value::Nil), bp)))
}

fn get(r: &[Value], env: &[Value], a: &Arg) -> Value {
    match a {
        Arg::Reg(i) => r[*i as usize].clone(),
        Arg::Env(i) => env[*i as usize].clone(),
        Arg::Const(c) => c.clone(),
    }
}

/// The parts of a pair (a lazy one built one level).
fn uncons(m: &mut Machine, v: &Value) -> Result<(Value, Value)> {
    match ops::hnf(m, v)? {
        Value::Pair(p) => Ok((p.car.clone(), p.cdr.clone())),
        other => {
            Err(Error::runtime(None, format!("expected a pair, got {}", crate::print::brief(&other, 60))))
        }
    }
}

/// A reverse version's call as its native code runs it, on values it
/// handles: `(value, backpropagator)`; `None` for the evaluator.
fn call_r(m: &mut Machine, c: &Call, args: &[Value]) -> Result<Option<(Value, Value)>> {
    match c.f {
        Formula::Struct(op) => {
            let (x, y) = match args {
                [a, b] => {
                    let (Some(xa), Some(xb)) = (e_untag(m, Tag::Reverse, a), e_untag(m, Tag::Reverse, b))
                    else {
                        return Ok(None);
                    };
                    let y = match op {
                        StructOp::Bundle => e_bundle(m, &xa, &xb)?,
                        StructOp::Plus => ops::plus(m, &xa, &xb)?,
                        _ => return Ok(None),
                    };
                    (Value::cons(xa, xb), y)
                }
                [a] => {
                    let Some(xe) = e_untag(m, Tag::Reverse, a) else { return Ok(None) };
                    let y = match op {
                        StructOp::Primal => e_primal(m, &xe)?,
                        StructOp::Tangent => e_tangent(m, &xe)?,
                        StructOp::Tag(t) => e_tag(m, t, &xe)?,
                        StructOp::Untag(t) => match e_untag(m, t, &xe) {
                            Some(y) => y,
                            None => return Ok(None),
                        },
                        _ => return Ok(None),
                    };
                    // (what it captures: `*j-inverse` of its argument, as the
                    // primitive makes it: lazily, for a pair)
                    let x = if c.env.is_empty() || !matches!(a, Value::Pair(_)) {
                        xe
                    } else {
                        ops::untag(m, Tag::Reverse, a)?
                    };
                    (x, y)
                }
                _ => return Ok(None),
            };
            let jy = e_tag(m, Tag::Reverse, &y)?;
            Ok(Some((jy, bp_closure(&c.bp, &c.env, &x, &y))))
        }
        _ => {
            let leaves: SmallVec<[Value; 2]> = match (prims::prim(c.prim).arity, args) {
                (2, [Value::Pair(q)]) => smallvec::smallvec![q.car.clone(), q.cdr.clone()],
                (2, [a, b]) => smallvec::smallvec![a.clone(), b.clone()],
                (1, [a]) => smallvec::smallvec![a.clone()],
                _ => return Ok(None),
            };
            super::native::reverse_on_leaves(m, c.prim, &c.bp, &c.env, &leaves)
        }
    }
}

/// `tag` on a number or a pair of them, at once; anything else as the primitive does it.
fn e_tag(m: &mut Machine, t: Tag, v: &Value) -> Result<Value> {
    Ok(match v {
        Value::Nil => {
            m.ad_work += 1;
            Value::Nil
        }
        Value::Pair(p) => {
            let a = e_tag(m, t, &p.car)?;
            Value::cons(a, e_tag(m, t, &p.cdr)?)
        }
        Value::Lazy(_) | Value::Closure(..) | Value::Prim(_) | Value::Rev(_) => ops::tag(m, t, v)?,
        _ => {
            m.ad_work += 1;
            Value::tagged(t, v.clone())
        }
    })
}

/// `untag` likewise; `None` if `v` is not tagged `t` where it should be.
fn e_untag(m: &mut Machine, t: Tag, v: &Value) -> Option<Value> {
    match v {
        Value::Nil => {
            m.ad_work += 1;
            Some(Value::Nil)
        }
        Value::Pair(p) => {
            let a = e_untag(m, t, &p.car)?;
            let d = e_untag(m, t, &p.cdr)?;
            Some(Value::cons(a, d))
        }
        Value::Lazy(_) | Value::Closure(..) | Value::Rev(_) => ops::untag(m, t, v).ok(),
        _ => {
            let r = v.peel_if(t)?;
            m.ad_work += 1;
            Some(r)
        }
    }
}

/// `untag` at once where [`e_untag`] can, otherwise as the primitive does it
/// (which also reports a value that is not tagged `t`).
fn untag_now(m: &mut Machine, t: Tag, v: &Value) -> Result<Value> {
    match e_untag(m, t, v) {
        Some(u) => Ok(u),
        None => ops::untag(m, t, v),
    }
}

/// `primal` (`tangent` when `tangent` is set) of a bundle, or of a pair of
/// them (its parts at once).
fn e_part(m: &mut Machine, v: &Value, tangent: bool) -> Result<Value> {
    match v {
        Value::Bundle(b) => {
            m.ad_work += 1;
            Ok(if tangent { b.1.clone() } else { b.0.clone() })
        }
        Value::Pair(p) => {
            let a = e_part(m, &p.car, tangent)?;
            Ok(Value::cons(a, e_part(m, &p.cdr, tangent)?))
        }
        Value::Lazy(z) if !z.zero => {
            let h = ops::hnf(m, v)?;
            e_part(m, &h, tangent)
        }
        _ if tangent => ops::tangent(m, v),
        _ => ops::primal(m, v),
    }
}

fn e_primal(m: &mut Machine, v: &Value) -> Result<Value> {
    e_part(m, v, false)
}

fn e_tangent(m: &mut Machine, v: &Value) -> Result<Value> {
    e_part(m, v, true)
}

/// `bundle` of numbers (or pairs of them) with their perturbations.
fn e_bundle(m: &mut Machine, p: &Value, t: &Value) -> Result<Value> {
    match (p, t) {
        (Value::Pair(a), Value::Pair(b)) => {
            let x = e_bundle(m, &a.car, &b.car)?;
            Ok(Value::cons(x, e_bundle(m, &a.cdr, &b.cdr)?))
        }
        (_, Value::TReal(..) | Value::Tagged(..))
            if (p.is_number() || matches!(p, Value::TReal(..)))
                && t.outer_tag() == Some(Tag::Perturbation) =>
        {
            m.ad_work += 1;
            Ok(Value::bundle(p.clone(), t.clone()))
        }
        // a pair of numbers and the lazy zero of a pair: its parts, as `bundle` makes them
        (Value::Pair(_), Value::Lazy(z)) if z.zero => {
            let h = ops::hnf(m, t)?;
            e_bundle(m, p, &h)
        }
        (Value::Lazy(z), Value::Pair(_)) if z.zero => {
            let h = ops::hnf(m, p)?;
            e_bundle(m, &h, t)
        }
        _ => ops::bundle(m, p, t),
    }
}

/// `zero` of a number (at once) or of anything else (as the primitive does it).
fn e_zero(m: &mut Machine, v: &Value) -> Result<Value> {
    match v {
        Value::Real(_) | Value::Int(_) | Value::TReal(..) => ops::zero(m, v),
        _ => ops::lazy_zero(m, v),
    }
}

/// `(zero v)` to be bundled with `other`. Of a pair of numbers, bundled with
/// something that is not a lazy zero, it is built at once: `bundle` takes the
/// lazy zero apart down to its numbers, which it zeroes, before anything
/// reads the bundle (only a bundle of two lazy zeros is itself one, which
/// `plus` would skip).
fn zero_beside(m: &mut Machine, other: &Value, v: &Value) -> Result<Value> {
    match v {
        Value::Pair(p) if !matches!(other, Value::Lazy(z) if z.zero) && numbers(v) => {
            m.ad_work += 1;
            let a = ops::zero(m, &p.car)?;
            Ok(Value::cons(a, ops::zero(m, &p.cdr)?))
        }
        _ => e_zero(m, v),
    }
}

/// Is this a pair of numbers (each possibly tagged)?
fn numbers(v: &Value) -> bool {
    let num = |x: &Value| {
        matches!(x, Value::TReal(..)) || x.is_number() || matches!(x, Value::Tagged(_, y) if y.is_number())
    };
    matches!(v, Value::Pair(p) if num(&p.car) && num(&p.cdr))
}

/// `plus` of numbers, bundles and pairs of them (as the primitive adds
/// them: the same additions in the same order); anything else by the primitive.
fn e_plus(m: &mut Machine, a: &Value, b: &Value) -> Result<Value> {
    m.ad_work += 1;
    Ok(match (a, b) {
        (Value::Real(x), Value::Real(y)) => Value::Real(x + y),
        (Value::TReal(s, x), Value::TReal(t, y)) if s == t => Value::TReal(*s, x + y),
        (Value::Bundle(x), Value::Bundle(y)) => {
            let p = e_plus(m, &x.0, &y.0)?;
            Value::bundle(p, e_plus(m, &x.1, &y.1)?)
        }
        (Value::Pair(p), Value::Pair(q)) => {
            let car = e_plus(m, &p.car, &q.car)?;
            Value::cons(car, e_plus(m, &p.cdr, &q.cdr)?)
        }
        _ => {
            m.ad_work -= 1;
            ops::plus(m, a, b)?
        }
    })
}

/// The backpropagator of R(F(p)), called with sensitivity `s` (natively).
pub fn run_bp(m: &mut Machine, pl: &BpPlan, inst: &Inst, base: usize, nargs: usize) -> Result<Option<Value>> {
    if nargs != 1 || !bp_arg(&m.stack[base], true) {
        return Ok(None);
    }
    let s = m.stack[base].clone();
    bp_core(m, pl, inst, s, false).map(Some)
}

/// Is this the sensitivity of a forward bundle of numbers (tagged when `tagged`)?
fn bp_arg(v: &Value, tagged: bool) -> bool {
    let b = if tagged {
        match v {
            Value::Tagged(Tag::Sensitivity, b) => &**b,
            _ => return false,
        }
    } else {
        v
    };
    let Value::Bundle(b) = b else { return false };
    dual(b)
}

/// A forward bundle of a number and a perturbed number.
fn dual(b: &(Value, Value)) -> bool {
    b.0.is_number() && b.1.peel_if(Tag::Perturbation).is_some_and(|d| d.is_number())
}

/// `(unsensitize (bp (sensitize x)))` for a closure `bp` of R(F(p))'s
/// backpropagator (see `CExpr::BpCall`), natively when `x` suits it.
pub fn bp_untagged(m: &mut Machine, inst: &Inst, x: &Value) -> Result<Option<Value>> {
    let Some(Native::RFBp(pl)) = inst.group.native.get() else { return Ok(None) };
    if !bp_arg(x, false) || pl.last_tag.is_none() {
        return Ok(None);
    }
    let s = Value::tagged(Tag::Sensitivity, x.clone());
    bp_core(m, pl, inst, s, true).map(Some)
}

fn bp_core(m: &mut Machine, pl: &BpPlan, inst: &Inst, s: Value, untagged: bool) -> Result<Value> {
    let env = &inst.env[..];
    let mut r: Vec<Value> = vec![Value::Nil; pl.nregs];
    r[pl.param as usize] = s;
    let n = pl.steps.len();
    for (k, step) in pl.steps.iter().enumerate() {
        match step {
            BStep::Prim(d, p, a) => {
                if untagged && k + 1 == n && pl.last_tag.is_some() {
                    // `unsensitize` after this `sensitize` cancels
                    m.ad_work += 2;
                    return Ok(get(&r, env, a));
                }
                let v = get(&r, env, a);
                r[*d as usize] = prim1(m, *p, v)?;
            }
            BStep::Plus(d, a, b) => {
                let (a, b) = (get(&r, env, a), get(&r, env, b));
                r[*d as usize] = e_plus(m, &a, &b)?;
            }
            BStep::Call { dst, f, x, pre, post } => {
                let (f, x) = (get(&r, env, f), get(&r, env, x));
                r[*dst as usize] = call_bp(m, f, x, *pre, *post)?;
            }
            BStep::Uncons(a, x, y) => {
                let v = get(&r, env, a);
                let (p, q) = uncons(m, &v)?;
                r[*x as usize] = p;
                r[*y as usize] = q;
            }
            BStep::Cons(d, a, b) => {
                r[*d as usize] = Value::cons(get(&r, env, a), get(&r, env, b));
            }
            BStep::EnvSens(d, g, i, xs) => {
                r[*d as usize] = if ops::group_is_prim_based(g) {
                    Value::Nil
                } else {
                    Value::closure(g.clone(), xs.iter().map(|a| get(&r, env, a)), *i)
                };
            }
        }
    }
    let v = get(&r, env, &pl.result);
    if untagged {
        return untag_now(m, Tag::Sensitivity, &v);
    }
    Ok(v)
}

/// A one-argument AD primitive of a backpropagator.
fn prim1(m: &mut Machine, op: Op1, v: Value) -> Result<Value> {
    let p = match op {
        Op1::Tag(t) => return e_tag(m, t, &v),
        Op1::Zero => return e_zero(m, &v),
        Op1::Untag(t, p) => match e_untag(m, t, &v) {
            Some(r) => return Ok(r),
            None => p,
        },
        Op1::Other(p) => p,
    };
    m.stack.push(v);
    m.call_prim(p, 1)
}

/// A call of a backpropagator of a primitive's reverse version, as its native
/// code runs it (`pre`: on `(sensitize x)`; `post`: its result unsensitized).
fn call_bp(m: &mut Machine, f: Value, x: Value, pre: bool, post: bool) -> Result<Value> {
    if let Value::Closure(inst, _) = &f {
        if let Some(Native::Bp { f: form, env }) = inst.group.native.get() {
            let yb = if pre { Some(x.clone()) } else { e_untag(m, Tag::Sensitivity, &x) };
            if let Some(yb) = yb {
                if let Some(xb) = bp_value(m, *form, env, inst, yb)? {
                    m.tick()?;
                    let pair = Value::cons(Value::Nil, xb);
                    return Ok(if post {
                        m.ad_work += 2;
                        pair
                    } else {
                        e_tag(m, Tag::Sensitivity, &pair)?
                    });
                }
            }
        }
    }
    // the steps as the code makes them
    let s = if pre { e_tag(m, Tag::Sensitivity, &x)? } else { x };
    m.stack.push(s);
    let r = m.call(f, 1, None)?;
    if post {
        return untag_now(m, Tag::Sensitivity, &r);
    }
    Ok(r)
}

/// The cotangent of a primitive's reverse version's backpropagator, from the
/// unsensitized sensitivity `yb` of its result; `None` if not handled here.
fn bp_value(m: &mut Machine, f: Formula, env: &[bool], inst: &Inst, yb: Value) -> Result<Option<Value>> {
    let Formula::Struct(op) = f else {
        if !yb.is_number() || f == Formula::Zero {
            return Ok(None);
        }
        return bp_cotangent(m, f, env, inst, yb);
    };
    let x =
        || inst.env.first().cloned().ok_or_else(|| Error::runtime(None, "internal error: no captured value"));
    Ok(Some(match op {
        StructOp::Tag(t) => match e_untag(m, t, &yb) {
            Some(v) => v,
            None => return Ok(None),
        },
        StructOp::Untag(t) => e_tag(m, t, &yb)?,
        // (bundle yb (zero (tangent x)))
        StructOp::Primal => {
            let t = e_tangent(m, &x()?)?;
            let z = zero_beside(m, &yb, &t)?;
            e_bundle(m, &yb, &z)?
        }
        // (bundle (zero (primal x)) yb)
        StructOp::Tangent => {
            let p = e_primal(m, &x()?)?;
            let z = zero_beside(m, &yb, &p)?;
            e_bundle(m, &z, &yb)?
        }
        // (cons (primal yb) (tangent yb))
        StructOp::Bundle => {
            let p = e_primal(m, &yb)?;
            Value::cons(p, e_tangent(m, &yb)?)
        }
        StructOp::Plus => Value::cons(yb.clone(), yb),
        StructOp::Zero => return Ok(None),
    }))
}
