//! The AD primitives on values: `zero`, `plus`, the taggers (`perturb`,
//! `sensitize`, `*j`) and their inverses, and `bundle`/`primal`/`tangent`.
//! Tags are pushed into pairs and closures; closures get their group
//! transformed (lazily) and their environments mapped.

use super::{rules, transform_group};
use crate::anf::{Group, Kind, Origin};
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::num;
use crate::value::{Inst, InstBuilder, InstRc, Lazy, LazyOp, Tag, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::rc::Rc;

const RED_ZONE: usize = 128 * 1024;
const SEGMENT: usize = 8 * 1024 * 1024;

fn err(msg: String) -> Error {
    Error::runtime(None, msg)
}

fn short(v: &Value) -> String {
    crate::print::brief(v, 60)
}

pub fn tag_kind(t: Tag) -> Kind {
    match t {
        Tag::Perturbation => Kind::P,
        Tag::Sensitivity => Kind::S,
        Tag::Reverse => Kind::R,
    }
}

/// The primitive of tag operation `t` (its inverse when `inverse` is set).
pub(crate) fn prim_name(t: Tag, inverse: bool) -> &'static str {
    match (t, inverse) {
        (Tag::Perturbation, false) => "perturb",
        (Tag::Perturbation, true) => "unperturb",
        (Tag::Sensitivity, false) => "sensitize",
        (Tag::Sensitivity, true) => "unsensitize",
        (Tag::Reverse, false) => "*j",
        (Tag::Reverse, true) => "*j-inverse",
    }
}

/// An instance of `group` capturing `f` of each value `inst` captures.
fn map_env(
    m: &mut Machine,
    inst: &Inst,
    group: Rc<Group>,
    f: &mut dyn FnMut(&mut Machine, &Value) -> Result<Value>,
) -> Result<InstRc> {
    // The only deep recursion of the tag operations: closures nested in closures.
    crate::stack::try_grow(RED_ZONE, SEGMENT, || {
        let mut env = InstBuilder::new(group, inst.env.len());
        for v in inst.env.iter() {
            env.push(f(m, v)?);
        }
        Ok(env.finish())
    })
}

/// Is this a primitive's transformed version (possibly transformed again)?
/// Like primitives, such closures have `()` as their zero and sensitivity.
pub fn is_prim_based(v: &Value) -> bool {
    match v {
        Value::Closure(inst, _) => group_is_prim_based(&inst.group),
        _ => false,
    }
}

pub fn group_is_prim_based(g: &crate::anf::Group) -> bool {
    match &g.origin {
        Origin::PrimRule(..) => true,
        Origin::Transformed(_, parent) => group_is_prim_based(parent),
        Origin::Source => false,
    }
}

/// `zero`: the same shape with every real replaced by zero (primitives become `()`).
pub fn zero(m: &mut Machine, v: &Value) -> Result<Value> {
    m.ad_work += 1;
    crate::stack::try_grow(RED_ZONE, SEGMENT, || {
        Ok(match v {
            Value::Nil | Value::Bool(_) => v.clone(),
            Value::Int(_) | Value::Big(_) | Value::Real(_) | Value::Rat(_) => num::zero_like(v),
            Value::Vector(x) => Value::Vector(Rc::new(x.zero_like())),
            Value::Pair(p) => Value::cons(zero(m, &p.car)?, zero(m, &p.cdr)?),
            // Like primitives, reversible procedures have `()` as their zero.
            Value::Prim(_) | Value::Rev(_) => Value::Nil,
            Value::Closure(_, _) if is_prim_based(v) => Value::Nil,
            Value::Closure(inst, i) => {
                Value::Closure(map_env(m, inst, inst.group.clone(), &mut |m, x| zero(m, x))?, *i)
            }
            Value::Tagged(t, x) => Value::tagged(*t, zero(m, x)?),
            Value::TReal(ts, _) => Value::TReal(*ts, 0.0),
            Value::Bundle(b) => Value::bundle(zero(m, &b.0)?, zero(m, &b.1)?),
            Value::Lazy(_) => {
                let h = hnf(m, v)?;
                zero(m, &h)?
            }
            // (a constant: no derivative on any level)
            // (on its level: the transform's `zero` has derivative rules)
            Value::Active(_) | Value::TapeReal(..) => super::tape::zero_active(m, v)?,
        })
    })
}

/// The `zero` primitive: lazy for pairs and closures, eager for everything else.
pub fn lazy_zero(m: &mut Machine, v: &Value) -> Result<Value> {
    make_lazy(m, v, true, SmallVec::new())
}

type Ops = SmallVec<[LazyOp; 2]>;

/// Is this an aggregate that tag, primal and tangent operations can be
/// deferred on (a pair, a closure that is not a primitive's version, or a lazy value)?
fn deferrable(v: &Value) -> bool {
    match v {
        Value::Pair(_) | Value::Lazy(_) => true,
        Value::Closure(..) => !is_prim_based(v),
        _ => false,
    }
}

/// Applies one operation to a value now (one level deep: parts of aggregates
/// stay lazy).
fn apply_op(m: &mut Machine, op: LazyOp, v: &Value) -> Result<Value> {
    match op {
        LazyOp::Tag(t) => tag(m, t, v),
        LazyOp::Untag(t) => untag(m, t, v),
        LazyOp::Primal => primal(m, v),
        LazyOp::Tangent => tangent(m, v),
        LazyOp::FTag(t) => super::native::forward_retag(m, t, false, v),
        LazyOp::FUntag(t) => super::native::forward_retag(m, t, true, v),
    }
}

/// `ops` applied to `base` (or to its zero): lazy when `base` is an aggregate.
pub fn make_lazy(m: &mut Machine, base: &Value, zero_it: bool, ops: Ops) -> Result<Value> {
    // `zero` is idempotent and commutes with every operation, so a value built
    // from lazy zeros is flagged as one too (`plus` skips it in constant time).
    let zero_it = zero_it
        || match base {
            Value::Bundle(b) => is_lazy_zero(&b.0) && is_lazy_zero(&b.1),
            _ => false,
        };
    match base {
        Value::Pair(_) => {}
        Value::Closure(..) if !is_prim_based(base) => {}
        // A bundle not yet distributed over an aggregate primal.
        Value::Bundle(b) if deferrable(&b.0) => {}
        Value::Lazy(z) => {
            if ops.is_empty() && (!zero_it || z.zero) {
                return Ok(base.clone());
            }
            if let Some(first) = ops.first() {
                if cancels(z.ops.last(), *first) {
                    // (untag (tag x)) is x: drop the pair of operations.
                    let mut all = SmallVec::from_slice(&z.ops);
                    all.pop();
                    all.extend_from_slice(&ops[1..]);
                    return make_lazy(m, &z.base, z.zero || zero_it, all);
                }
            }
            if zero_it || z.zero {
                // A zero shares nothing worth keeping with its base's expansion
                // (zero commutes with every operation): one lazy value over the
                // base with all the operations, not a chain of them.
                let mut all = SmallVec::from_slice(&z.ops);
                all.extend_from_slice(&ops);
                return Ok(new_lazy(&z.base, true, all));
            }
            // Wrap it (sharing its expansion) rather than copy its operations.
            let zero_it = zero_it || z.zero;
            return Ok(new_lazy(base, zero_it, ops));
        }
        _ => {
            let mut r = if zero_it { zero(m, base)? } else { base.clone() };
            for op in ops {
                r = apply_op(m, op, &r)?;
            }
            return Ok(r);
        }
    }
    if ops.is_empty() && !zero_it && !matches!(base, Value::Bundle(_)) {
        return Ok(base.clone());
    }
    Ok(new_lazy(base, zero_it, ops))
}

fn new_lazy(base: &Value, zero: bool, ops: Ops) -> Value {
    let pair = match base {
        Value::Bundle(b) => b.0.is_pair(),
        _ => base.is_pair(),
    };
    Value::Lazy(Rc::new(Lazy { base: base.clone(), zero, ops, hnf: Default::default(), pair }))
}

fn cancels(last: Option<&LazyOp>, op: LazyOp) -> bool {
    match (last, op) {
        (Some(LazyOp::Tag(a)), LazyOp::Untag(b))
        | (Some(LazyOp::Untag(a)), LazyOp::Tag(b))
        | (Some(LazyOp::FTag(a)), LazyOp::FUntag(b))
        | (Some(LazyOp::FUntag(a)), LazyOp::FTag(b)) => *a == b,
        _ => false,
    }
}

/// Is this a lazy zero?
fn is_lazy_zero(v: &Value) -> bool {
    matches!(v, Value::Lazy(z) if z.zero)
}

fn with_op(m: &mut Machine, v: &Value, z: &Lazy, op: LazyOp) -> Result<Value> {
    if let (Value::Bundle(b), true) = (&z.base, z.ops.is_empty()) {
        // The primal or tangent of a bundle not yet distributed: its own part.
        match op {
            LazyOp::Primal => return make_lazy(m, &b.0, z.zero, SmallVec::new()),
            LazyOp::Tangent => return make_lazy(m, &b.1, z.zero, SmallVec::new()),
            _ => {}
        }
    }
    make_lazy(m, v, false, smallvec::smallvec![op])
}

/// Head normal form: applies a lazy value's pending operations one level down, so
/// the result is a real pair or closure whose parts may still be lazy. Computed
/// once per lazy value.
pub fn hnf(m: &mut Machine, v: &Value) -> Result<Value> {
    let Value::Lazy(z) = v else { return Ok(v.clone()) };
    if let Some(h) = z.hnf.get() {
        return Ok(h.clone());
    }
    let h = crate::stack::try_grow(RED_ZONE, SEGMENT, || hnf_step(m, z))?;
    let _ = z.hnf.set(h.clone());
    Ok(h)
}

fn hnf_step(m: &mut Machine, z: &Lazy) -> Result<Value> {
    m.ad_work += 1;
    let base = match &z.base {
        Value::Lazy(_) => hnf(m, &z.base)?,
        // Distribute the bundle one level.
        Value::Bundle(b) => bundle_step(m, &b.0, &b.1)?,
        other => other.clone(),
    };
    match &base {
        Value::Pair(p) => {
            let car = make_lazy(m, &p.car, z.zero, SmallVec::from_slice(&z.ops))?;
            // (a pair holding one value twice, as `(cons v v)`, gives one lazy
            // value twice: expanded once, its expansion shared as `v` is)
            let cdr = match (p.car.ptr_id(), p.cdr.ptr_id()) {
                (Some(a), Some(d)) if a == d => car.clone(),
                _ => make_lazy(m, &p.cdr, z.zero, SmallVec::from_slice(&z.ops))?,
            };
            Ok(Value::cons(car, cdr))
        }
        Value::Closure(inst, i) if !is_prim_based(&base) => {
            let mut g = inst.group.clone();
            for (k, op) in z.ops.iter().enumerate() {
                g = match group_after(*op, &g) {
                    Some(g) => g,
                    None if matches!(op, LazyOp::FTag(_) | LazyOp::FUntag(_)) => {
                        return Err(closure_op_error(m, &base, &z.ops[..=k]))
                    }
                    None => return Err(op_error(*op, &base)),
                };
            }
            let mut env = InstBuilder::new(g, inst.env.len());
            for x in inst.env.iter() {
                env.push(make_lazy(m, x, z.zero, SmallVec::from_slice(&z.ops))?);
            }
            Ok(Value::Closure(env.finish(), *i))
        }
        other => make_lazy(m, other, z.zero, SmallVec::from_slice(&z.ops)),
    }
}

/// Would [`force`] change `v` (is it lazy, or data holding a lazy value)?
pub fn is_or_has_lazy(v: &Value) -> bool {
    match v {
        Value::Lazy(_) => true,
        Value::Pair(_) => has_lazy(v),
        _ => false,
    }
}

/// Applies every pending operation, however deep. One pass over the value: the
/// pairs above a lazy value are rebuilt (each counted in `ad_work`), the rest is
/// shared as it is.
pub fn force(m: &mut Machine, v: &Value) -> Result<Value> {
    // (the common case, data with nothing pending, is one scan without recursion)
    if let Value::Pair(_) = v {
        if !has_lazy(v) {
            return Ok(v.clone());
        }
    }
    let mut memo = ForceMemo { pairs: 0, limit: usize::MAX, done: None };
    Ok(force_changed::<false>(m, v, &mut memo)?.unwrap_or_else(|| v.clone()))
}

/// [`force`], or `None` if that builds more than `limit` pairs (then what it
/// built so far is dropped; the lazy values it expanded keep their expansions).
pub fn force_within(m: &mut Machine, v: &Value, limit: usize) -> Result<Option<Value>> {
    if let Value::Pair(_) = v {
        if !has_lazy(v) {
            return Ok(Some(v.clone()));
        }
    }
    let mut memo = ForceMemo { pairs: 0, limit, done: None };
    let r = force_changed::<false>(m, v, &mut memo)?;
    if memo.pairs > limit {
        return Ok(None);
    }
    Ok(Some(r.unwrap_or_else(|| v.clone())))
}

/// How many pairs a walk of data takes as they come (a tree's) before it
/// remembers those that something else holds too, so as to take each once:
/// data with shared structure (`n` pairs each holding the one before twice)
/// then take time in their size, not in their size as a tree (2^n), at the
/// cost of a table only in walks that long.
const SHARING_WATCHED_AFTER: usize = 4096;

/// [`force_changed`]'s count of the pairs walked, and what the values that
/// something else holds too became, by identity (in a long walk), each kept
/// beside so that its address is not reused during the walk.
struct ForceMemo {
    pairs: usize,
    /// (past it, the walk stops: see [`force_within`])
    limit: usize,
    done: Option<FxHashMap<usize, (Value, Option<Value>)>>,
}

/// [`force`], or `None` where `v` holds no lazy value. Past
/// `SHARING_WATCHED_AFTER` pairs the walk is a long one (`LONG`): a value that
/// something else holds too is forced once (`memo`), and what it becomes is
/// shared as it was; past `memo.limit` pairs, the walk stops.
fn force_changed<const LONG: bool>(
    m: &mut Machine,
    v: &Value,
    memo: &mut ForceMemo,
) -> Result<Option<Value>> {
    let pair = matches!(v, Value::Pair(_));
    if !LONG && pair && memo.pairs >= SHARING_WATCHED_AFTER {
        return force_changed::<true>(m, v, memo);
    }
    memo.pairs += pair as usize;
    let key = match v {
        _ if !LONG => None,
        _ if memo.pairs > memo.limit => return Ok(None),
        Value::Pair(_) | Value::Lazy(_) if shared(v) => v.ptr_id(),
        _ => None,
    };
    if let Some((_, r)) = key.and_then(|k| memo.done.as_ref()?.get(&k)) {
        return Ok(r.clone());
    }
    let r = crate::stack::try_grow(RED_ZONE, SEGMENT, || match v {
        Value::Lazy(_) => {
            let h = hnf(m, v)?;
            Ok(Some(force_changed::<LONG>(m, &h, memo)?.unwrap_or(h)))
        }
        Value::Pair(p) => {
            let a = force_changed::<LONG>(m, &p.car, memo)?;
            let d = force_changed::<LONG>(m, &p.cdr, memo)?;
            if a.is_none() && d.is_none() {
                return Ok(None);
            }
            m.ad_work += 1;
            Ok(Some(Value::cons(a.unwrap_or_else(|| p.car.clone()), d.unwrap_or_else(|| p.cdr.clone()))))
        }
        _ => Ok(None),
    })?;
    if let Some(k) = key {
        memo.done.get_or_insert_default().insert(k, (v.clone(), r.clone()));
    }
    Ok(r)
}

/// Past `SHARING_WATCHED_AFTER` pairs of a walk of data, the pairs met that
/// something else holds too, so as to tell one met again (a pair held once is
/// held by the pair it was reached from: it cannot be).
#[derive(Default)]
pub struct SharingWatch {
    pairs: usize,
    seen: rustc_hash::FxHashSet<*const crate::value::Pair>,
}

impl SharingWatch {
    /// Counts pair `p`, met in the walk: has it been met before?
    pub fn again(&mut self, p: &Rc<crate::value::Pair>) -> bool {
        self.pairs += 1;
        self.pairs > SHARING_WATCHED_AFTER && Rc::strong_count(p) > 1 && !self.seen.insert(Rc::as_ptr(p))
    }
}

/// Does `v` hold a lazy value anywhere in its pairs? (An explicit work list:
/// data nest and run as deep and long as memory allows.)
fn has_lazy(v: &Value) -> bool {
    // (a list of atoms, the commonest, in one walk down its spine)
    let mut l = v;
    loop {
        match l {
            Value::Pair(p) => match &p.car {
                Value::Lazy(_) => return true,
                Value::Pair(_) => break,
                _ => l = &p.cdr,
            },
            Value::Lazy(_) => return true,
            _ => return false,
        }
    }
    has_lazy_nested(l)
}

/// [`has_lazy`] of any data.
#[inline(never)]
fn has_lazy_nested(v: &Value) -> bool {
    let mut work: SmallVec<[&Value; 16]> = smallvec::smallvec![v];
    // (a pair met again is not looked into again: data with shared structure
    // take time in their size, not in their size as a tree)
    let mut watch = SharingWatch::default();
    while let Some(mut v) = work.pop() {
        // (down a spine in place: only a car that is a pair waits on the work list)
        loop {
            match v {
                Value::Lazy(_) => return true,
                Value::Pair(p) => {
                    if watch.again(p) {
                        break;
                    }
                    match &p.car {
                        Value::Lazy(_) => return true,
                        car @ Value::Pair(_) => work.push(car),
                        _ => {}
                    }
                    v = &p.cdr;
                }
                _ => break,
            }
        }
    }
    false
}

/// Head normal form outside any machine (for printing).
pub fn hnf_detached(v: &Value) -> Result<Value> {
    let mut m = Machine::new();
    hnf(&mut m, v)
}

/// `plus`: adds two conformant values. Shared substructure is added once
/// (memoized by identity), so sums of values with sharing stay their size.
pub fn plus(m: &mut Machine, a: &Value, b: &Value) -> Result<Value> {
    let mut memo = None;
    plus_rec(m, a, b, &mut memo)
}

type PlusMemo = Option<rustc_hash::FxHashMap<(usize, usize), Value>>;

fn shared(v: &Value) -> bool {
    match v {
        Value::Pair(p) => Rc::strong_count(p) > 1,
        Value::Closure(i, _) => InstRc::strong_count(i) > 1,
        Value::Lazy(z) => Rc::strong_count(z) > 1,
        Value::Vector(x) => Rc::strong_count(x) > 1,
        _ => false,
    }
}

fn plus_rec(m: &mut Machine, a: &Value, b: &Value, memo: &mut PlusMemo) -> Result<Value> {
    // Reals under the same tags (most leaves of a sensitivity) at once: what
    // the general path below computes, with its count of one step per tag
    // peeled and one for the sum.
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            m.ad_work += 1;
            return Ok(Value::Real(x + y));
        }
        (Value::TReal(s, x), Value::TReal(t, y)) if s == t => {
            m.ad_work += 1 + s.count() as u64;
            return Ok(Value::TReal(*s, x + y));
        }
        _ => {}
    }
    m.ad_work += 1;
    let key = if shared(a) && shared(b) {
        let k = (a.ptr_id().unwrap_or(0), b.ptr_id().unwrap_or(0));
        if let Some(v) = memo.as_ref().and_then(|mm| mm.get(&k)) {
            return Ok(v.clone());
        }
        Some(k)
    } else {
        None
    };
    let r = crate::stack::try_grow(RED_ZONE, SEGMENT, || {
        Ok(match (a, b) {
            (Value::Lazy(z), _) if z.zero => b.clone(),
            (_, Value::Lazy(z)) if z.zero => a.clone(),
            (Value::Lazy(_), _) | (_, Value::Lazy(_)) => {
                let (x, y) = (hnf(m, a)?, hnf(m, b)?);
                plus_rec(m, &x, &y, memo)?
            }
            (Value::Nil, Value::Nil) => Value::Nil,
            (Value::Bool(_), Value::Bool(_)) => a.clone(),
            (x, y) if x.is_number() && y.is_number() => match num::arith('+', x, y) {
                Some(r) => r.map_err(err)?,
                None => unreachable!(),
            },
            (Value::Vector(x), Value::Vector(y)) => crate::vec::prims::plus(m, x, y)?,
            (Value::Pair(p), Value::Pair(q)) => {
                Value::cons(plus_rec(m, &p.car, &q.car, memo)?, plus_rec(m, &p.cdr, &q.cdr, memo)?)
            }
            (Value::Prim(p), Value::Prim(q)) if p == q => a.clone(),
            (Value::Rev(p), Value::Rev(q)) if Rc::ptr_eq(p, q) => a.clone(),
            (Value::Closure(i1, k1), Value::Closure(i2, k2))
                if k1 == k2 && Rc::ptr_eq(&i1.group, &i2.group) && i1.env.len() == i2.env.len() =>
            {
                let mut env = InstBuilder::new(i1.group.clone(), i1.env.len());
                for (x, y) in i1.env.iter().zip(i2.env.iter()) {
                    env.push(plus_rec(m, x, y, memo)?);
                }
                Value::Closure(env.finish(), *k1)
            }
            (Value::Tagged(..) | Value::TReal(..), Value::Tagged(..) | Value::TReal(..))
                if a.outer_tag() == b.outer_tag() =>
            {
                let ((t, x), (_, y)) = (a.peel().unwrap(), b.peel().unwrap());
                Value::tagged(t, plus_rec(m, &x, &y, memo)?)
            }
            (Value::Bundle(x), Value::Bundle(y)) => {
                Value::bundle(plus_rec(m, &x.0, &y.0, memo)?, plus_rec(m, &x.1, &y.1, memo)?)
            }
            _ => {
                return Err(err(format!(
                    "plus: values do not conform: {} ({}) and {} ({})",
                    short(a),
                    a.kind_name(),
                    short(b),
                    b.kind_name()
                )))
            }
        })
    })?;
    if let Some(k) = key {
        memo.get_or_insert_with(Default::default).insert(k, r.clone());
    }
    Ok(r)
}

/// `perturb`, `sensitize`, `*j`: tags every leaf; closures get the transformed group.
pub fn tag(m: &mut Machine, t: Tag, v: &Value) -> Result<Value> {
    m.ad_work += 1;
    Ok(match v {
        Value::Nil => Value::Nil,
        Value::Lazy(z) => with_op(m, v, z, LazyOp::Tag(t))?,
        Value::Pair(_) => make_lazy(m, v, false, smallvec::smallvec![LazyOp::Tag(t)])?,
        Value::Prim(p) if t == Tag::Reverse => rules::prim_rule(m, *p, Kind::R)?,
        // A reversible procedure is its own transform: `%rev-call`'s rules see through it.
        Value::Rev(_) => v.clone(),
        Value::Closure(..) => closure_after(m, LazyOp::Tag(t), v, &mut |m, x| tag(m, t, x))?,
        Value::Active(_) | Value::TapeReal(..) => return Err(super::tape::decline(prim_name(t, false))),
        _ => Value::tagged(t, v.clone()),
    })
}

/// `unperturb`, `unsensitize`, `*j-inverse`: removes the outermost tag everywhere.
pub fn untag(m: &mut Machine, t: Tag, v: &Value) -> Result<Value> {
    m.ad_work += 1;
    Ok(match v {
        Value::Nil => Value::Nil,
        Value::Lazy(z) => with_op(m, v, z, LazyOp::Untag(t))?,
        Value::Tagged(t2, x) if *t2 == t => (**x).clone(),
        Value::TReal(..) if v.outer_tag() == Some(t) => v.peel_if(t).unwrap(),
        Value::Rev(_) => v.clone(),
        Value::Pair(_) => make_lazy(m, v, false, smallvec::smallvec![LazyOp::Untag(t)])?,
        Value::Closure(inst, _) => match &inst.group.origin {
            Origin::PrimRule(k, p) if *k == tag_kind(t) => Value::Prim(*p),
            _ => closure_after(m, LazyOp::Untag(t), v, &mut |m, x| untag(m, t, x))?,
        },
        _ => return Err(not_tagged(t, v)),
    })
}

/// The group of a closure after operation `op` (its environment gets `op` too),
/// if `op` applies to a closure of group `g`.
fn group_after(op: LazyOp, g: &Rc<crate::anf::Group>) -> Option<Rc<crate::anf::Group>> {
    match (op, &g.origin) {
        (LazyOp::Tag(t), _) => Some(transform_group(g, tag_kind(t))),
        (LazyOp::Untag(t), Origin::Transformed(k, parent)) if *k == tag_kind(t) => Some(parent.clone()),
        (LazyOp::Primal, Origin::Transformed(Kind::F, parent)) => Some(parent.clone()),
        (LazyOp::Tangent, Origin::Transformed(Kind::F, parent)) => Some(transform_group(parent, Kind::P)),
        // (bundle (t (primal c)) (perturb (t (unperturb (tangent c))))): the
        // forward transform of the (un)tagged group
        (LazyOp::FTag(t), Origin::Transformed(Kind::F, parent)) => {
            Some(transform_group(&transform_group(parent, tag_kind(t)), Kind::F))
        }
        (LazyOp::FUntag(t), Origin::Transformed(Kind::F, parent)) => match &parent.origin {
            Origin::Transformed(k, pp) if *k == tag_kind(t) => Some(transform_group(pp, Kind::F)),
            _ => None,
        },
        _ => None,
    }
}

/// `op` applied to a closure of a group it does not apply to.
fn op_error(op: LazyOp, v: &Value) -> Error {
    match op {
        LazyOp::Tag(t) | LazyOp::Untag(t) => not_tagged(t, v),
        LazyOp::Primal => not_forward("primal", v),
        LazyOp::Tangent => not_forward("tangent", v),
        // (forward_retag reports these)
        LazyOp::FTag(t) | LazyOp::FUntag(t) => not_tagged(t, v),
    }
}

/// The error of applying `ops` (the last of which fails on its group) to
/// closure `v`: the one the operations report applied one by one (a forward
/// tag operation reports what its definition's steps do).
fn closure_op_error(m: &mut Machine, v: &Value, ops: &[LazyOp]) -> Error {
    let mut r = v.clone();
    for op in ops {
        match apply_op(m, *op, &r).and_then(|x| hnf(m, &x)) {
            Ok(x) => r = x,
            Err(e) => return e,
        }
    }
    op_error(*ops.last().unwrap(), v)
}

/// `op` applied to a closure that is not a primitive's version: its group
/// mapped, its environment mapped by `f` (`op` itself, one level at a time).
fn closure_after(
    m: &mut Machine,
    op: LazyOp,
    v: &Value,
    f: &mut dyn FnMut(&mut Machine, &Value) -> Result<Value>,
) -> Result<Value> {
    let Value::Closure(inst, i) = v else { return Err(op_error(op, v)) };
    let g = group_after(op, &inst.group).ok_or_else(|| op_error(op, v))?;
    Ok(Value::Closure(map_env(m, inst, g, f)?, *i))
}

fn not_tagged(t: Tag, v: &Value) -> Error {
    err(format!(
        "{}: expected a {} value, got {} ({})",
        prim_name(t, true),
        t.name(),
        short(v),
        v.kind_name()
    ))
}

/// `bundle`: pairs a primal with a perturbation of the same shape. Over an
/// aggregate it is lazy: distributed over the parts one level at a time.
pub fn bundle(m: &mut Machine, p: &Value, t: &Value) -> Result<Value> {
    if let (Value::Lazy(zp), Value::Lazy(zt)) = (p, t) {
        // (bundle (primal x) (tangent x)) is x.
        if zp.ops.as_slice() == [LazyOp::Primal]
            && zt.ops.as_slice() == [LazyOp::Tangent]
            && zp.zero == zt.zero
            && zp.base.ptr_id().is_some()
            && zp.base.ptr_id() == zt.base.ptr_id()
        {
            return make_lazy(m, &zp.base, zp.zero, SmallVec::new());
        }
    }
    if deferrable(p) {
        // Check the outer shapes now; the parts are checked as they are reached.
        let conform = match p {
            Value::Pair(_) => t.is_pair(),
            Value::Lazy(_) if p.is_pair() => t.is_pair(),
            _ => matches!(t, Value::Closure(..) | Value::Lazy(_)) && !t.is_pair(),
        };
        if !conform {
            return Err(bundle_mismatch(p, t));
        }
        return make_lazy(m, &Value::bundle(p.clone(), t.clone()), false, SmallVec::new());
    }
    bundle_step(m, p, t)
}

/// `bundle` one level deep: the parts of an aggregate are bundled lazily.
fn bundle_step(m: &mut Machine, p: &Value, t: &Value) -> Result<Value> {
    m.ad_work += 1;
    if matches!(p, Value::Lazy(_)) || matches!(t, Value::Lazy(_)) {
        let (p, t) = (hnf(m, p)?, hnf(m, t)?);
        return bundle_step(m, &p, &t);
    }
    Ok(match (p, t) {
        (Value::Active(_) | Value::TapeReal(..), _) | (_, Value::Active(_) | Value::TapeReal(..)) => {
            return Err(super::tape::decline("bundle"))
        }
        (Value::Nil, Value::Nil) => Value::Nil,
        (Value::Rev(_), Value::Nil) => p.clone(),
        (Value::Closure(inst, i), Value::Nil) if is_prim_based(p) => {
            Value::Closure(InstRc::empty(transform_group(&inst.group, Kind::F)), *i)
        }
        (Value::Pair(a), Value::Pair(b)) => {
            Value::cons(bundle(m, &a.car, &b.car)?, bundle(m, &a.cdr, &b.cdr)?)
        }
        // (a primitive's tangent is its zero, `()`)
        (Value::Prim(q), Value::Nil) => rules::prim_rule(m, *q, Kind::F)?,
        (Value::Closure(i1, k1), Value::Closure(i2, k2)) if k1 == k2 && i1.env.len() == i2.env.len() => {
            match &i2.group.origin {
                Origin::Transformed(Kind::P, g) if Rc::ptr_eq(g, &i1.group) => {}
                _ => return Err(bundle_mismatch(p, t)),
            }
            let mut env = InstBuilder::new(transform_group(&i1.group, Kind::F), i1.env.len());
            for (x, y) in i1.env.iter().zip(i2.env.iter()) {
                env.push(bundle(m, x, y)?);
            }
            Value::Closure(env.finish(), *k1)
        }
        (Value::Pair(_) | Value::Closure(..) | Value::Prim(_), _)
        | (_, Value::Pair(_) | Value::Closure(..)) => return Err(bundle_mismatch(p, t)),
        (_, Value::Tagged(..) | Value::TReal(..))
            if t.outer_tag() == Some(Tag::Perturbation) && leaves_conform(p, t) =>
        {
            Value::bundle(p.clone(), t.clone())
        }
        _ => return Err(bundle_mismatch(p, t)),
    })
}

/// Can `t` (a perturbation) be the tangent of the leaf `p`, seen through their
/// tags? A vector's tangent is a vector of the same shape, a number's a number,
/// a boolean's a boolean (its zero is itself), and `()`'s is `()` (a value
/// still pending is checked when it is reached).
fn leaves_conform(p: &Value, t: &Value) -> bool {
    let inner = t.peel_if(Tag::Perturbation);
    match (leaf_tags(p), inner.as_ref().and_then(leaf_tags)) {
        (Some(a), Some(b)) if a != b => return false,
        _ => {}
    }
    match (&*strip(p), &*strip(t)) {
        (Value::Vector(a), Value::Vector(b)) => a.len() == b.len() && a.shape() == b.shape(),
        (Value::Lazy(_), _) | (_, Value::Lazy(_)) => true,
        (Value::Vector(_), _) | (_, Value::Vector(_)) => false,
        (x, y) if x.is_number() || y.is_number() => x.is_number() && y.is_number(),
        (Value::Bool(_), y) | (y, Value::Bool(_)) => matches!(y, Value::Bool(_)),
        (Value::Nil, y) | (y, Value::Nil) => matches!(y, Value::Nil),
        _ => true,
    }
}

/// The tags around a leaf, outermost first, seen through bundles' primals
/// (`None` where a value still pending hides them): the tangent of a leaf
/// under `*j` is under `*j` too (`(zero (*j 3))` is `(reverse 0)`).
fn leaf_tags(v: &Value) -> Option<SmallVec<[Tag; 4]>> {
    let mut tags = SmallVec::new();
    let mut v = v.clone();
    loop {
        v = match &v {
            Value::Bundle(b) => b.0.clone(),
            Value::Lazy(_) => return None,
            _ => match v.peel() {
                Some((t, x)) => {
                    tags.push(t);
                    x
                }
                None => return Some(tags),
            },
        }
    }
}

fn bundle_mismatch(p: &Value, t: &Value) -> Error {
    err(format!(
        "bundle: the tangent must be a perturbation shaped like the primal; got primal {} and tangent {}",
        short(p),
        short(t)
    ))
}

/// `primal` of a forward value.
pub fn primal(m: &mut Machine, v: &Value) -> Result<Value> {
    m.ad_work += 1;
    Ok(match v {
        Value::Lazy(z) => with_op(m, v, z, LazyOp::Primal)?,
        Value::Nil => Value::Nil,
        Value::Rev(_) => v.clone(),
        Value::Bundle(b) => b.0.clone(),
        Value::Pair(_) => make_lazy(m, v, false, smallvec::smallvec![LazyOp::Primal])?,
        Value::Closure(inst, _) => match &inst.group.origin {
            Origin::PrimRule(Kind::F, p) => Value::Prim(*p),
            _ => closure_after(m, LazyOp::Primal, v, &mut |m, x| primal(m, x))?,
        },
        _ => return Err(not_forward("primal", v)),
    })
}

/// `tangent` of a forward value (a perturbation).
pub fn tangent(m: &mut Machine, v: &Value) -> Result<Value> {
    m.ad_work += 1;
    Ok(match v {
        Value::Lazy(z) => with_op(m, v, z, LazyOp::Tangent)?,
        Value::Nil | Value::Rev(_) => Value::Nil,
        Value::Closure(..) if is_prim_based(v) => Value::Nil,
        Value::Bundle(b) => b.1.clone(),
        Value::Pair(_) => make_lazy(m, v, false, smallvec::smallvec![LazyOp::Tangent])?,
        Value::Closure(inst, _) => match &inst.group.origin {
            Origin::PrimRule(Kind::F, _) => Value::Nil,
            _ => closure_after(m, LazyOp::Tangent, v, &mut |m, x| tangent(m, x))?,
        },
        _ => return Err(not_forward("tangent", v)),
    })
}

fn not_forward(name: &str, v: &Value) -> Error {
    err(format!("{}: expected a forward (bundled) value, got {} ({})", name, short(v), v.kind_name()))
}

/// The outermost AD tag of a value, for the AD predicates.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OuterTag {
    F,
    P,
    S,
    R,
}

/// A pair's is that of its first part, in order, that is not `()` or a
/// reversible procedure (the same at every tag depth: `(cons '() x)` tagged
/// is tagged by its `x`), found without recursion (a long list of `()` is
/// walked in a loop).
pub fn outer_tag(v: &Value) -> Option<OuterTag> {
    match v {
        Value::Pair(_) | Value::Lazy(_) => {
            let mut work: Vec<Value> = vec![v.clone()];
            while let Some(x) = work.pop() {
                match x {
                    Value::Pair(p) => {
                        work.push(p.cdr.clone());
                        work.push(p.car.clone());
                    }
                    Value::Lazy(_) => match hnf_detached(&x) {
                        Ok(Value::Lazy(_)) | Err(_) => {}
                        Ok(h) => work.push(h),
                    },
                    // (the same at every tag depth: no answer there)
                    Value::Nil | Value::Rev(_) => {}
                    other => return outer_tag_of_part(&other),
                }
            }
            None
        }
        _ => outer_tag_of_part(v),
    }
}

/// [`outer_tag`] of a value that is not a pair nor lazy.
fn outer_tag_of_part(v: &Value) -> Option<OuterTag> {
    match v {
        Value::Tagged(..) | Value::TReal(..) => v.outer_tag().map(|t| match t {
            Tag::Perturbation => OuterTag::P,
            Tag::Sensitivity => OuterTag::S,
            Tag::Reverse => OuterTag::R,
        }),
        Value::Bundle(_) => Some(OuterTag::F),
        Value::Closure(inst, _) => inst.group.outer_kind().map(|k| match k {
            Kind::F => OuterTag::F,
            Kind::P => OuterTag::P,
            Kind::S => OuterTag::S,
            Kind::R => OuterTag::R,
        }),
        _ => None,
    }
}

/// Why an argument cannot be passed to a procedure transformed by `k`, if it
/// cannot: the procedure's tags must be a prefix of its argument's.
pub fn tag_mismatch(k: Kind, arg: &Value) -> Option<String> {
    let want = match k {
        Kind::F => OuterTag::F,
        Kind::R => OuterTag::R,
        _ => return None,
    };
    // Look at the first non-empty leaf of a (small) tuple or list.
    let mut arg = arg;
    for _ in 0..16 {
        match arg {
            // `()` and reversible procedures look the same at every tag depth.
            Value::Pair(p) if matches!(p.car, Value::Nil | Value::Rev(_)) => arg = &p.cdr,
            Value::Pair(p) => arg = &p.car,
            _ => break,
        }
    }
    let got = match arg {
        Value::Nil | Value::Lazy(_) | Value::Pair(_) | Value::Rev(_) => return None,
        Value::Int(_) | Value::Big(_) | Value::Real(_) | Value::Bool(_) | Value::Prim(_) => None,
        Value::Closure(..) if is_prim_based(arg) => return None,
        _ => match outer_tag(arg) {
            Some(t) => Some(t),
            None if matches!(arg, Value::Closure(..)) => return None,
            None => None,
        },
    };
    if got == Some(want) {
        return None;
    }
    let (what, how) = match k {
        Kind::F => ("forward", "(bundle x (perturb dx)) or (j* x)"),
        _ => ("reverse", "(*j x)"),
    };
    Some(format!(
        "a {what}-transformed procedure must be applied to a {what} value such as {how}, got {} ({})",
        short(arg),
        arg.kind_name()
    ))
}

/// Strips AD tags down to the base value of a leaf.
pub fn strip(v: &Value) -> std::borrow::Cow<'_, Value> {
    match v {
        Value::Tagged(_, x) => strip(x),
        Value::TReal(_, x) => std::borrow::Cow::Owned(Value::Real(*x)),
        Value::Bundle(b) => strip(&b.0),
        _ => std::borrow::Cow::Borrowed(v),
    }
}

/// Does a value match a pattern constant? Compares through AD tags, numbers by value.
pub fn literal_matches(c: &Value, v: &Value) -> bool {
    if let Value::Lazy(_) = v {
        return hnf_detached(v).map(|h| literal_matches(c, &h)).unwrap_or(false);
    }
    match (&*strip(c), &*strip(v)) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (x, y) if x.is_number() && y.is_number() => num::num_equal(x, y),
        (Value::Pair(p), Value::Pair(q)) => {
            literal_matches(&p.car, &q.car) && literal_matches(&p.cdr, &q.cdr)
        }
        _ => false,
    }
}

/// A constant as seen by code transformed by `k`: `*j` of it, or it bundled with a zero tangent.
pub fn lift(m: &mut Machine, k: Kind, v: &Value) -> Result<Value> {
    match k {
        Kind::R => tag(m, Tag::Reverse, v),
        Kind::F => {
            let z = zero(m, v)?;
            let dz = tag(m, Tag::Perturbation, &z)?;
            bundle(m, v, &dz)
        }
        Kind::P => tag(m, Tag::Perturbation, v),
        Kind::S => tag(m, Tag::Sensitivity, v),
    }
}

/// What a sensitivity of `y` must be, as far as it is checked: the shape of a
/// leaf (`None`: anything, as for booleans and procedures).
fn sens_kind(y: &Value) -> Option<&'static str> {
    match y {
        Value::Nil => Some("()"),
        Value::Pair(_) => Some("a pair"),
        Value::Vector(_) => Some("a vector"),
        Value::Closure(..) | Value::Prim(_) | Value::Rev(_) => Some("a procedure"),
        Value::Bool(_) => Some("a boolean"),
        y if y.is_number() => Some("a real"),
        _ => None,
    }
}

/// Where [`sensitivity_mismatch`] is in a value: how many car/cdr steps from the
/// root, and the steps themselves (bit `i` set: the `i`-th step from the end is a
/// cdr) while there are at most [`Path::NAMED`]. Constant size, so that walking a
/// long list stays linear.
#[derive(Clone, Copy, Default)]
struct Path {
    len: usize,
    cdrs: u16,
}

impl Path {
    const NAMED: usize = 8;

    fn step(self, cdr: bool) -> Path {
        let cdrs = if self.len < Path::NAMED { (self.cdrs << 1) | cdr as u16 } else { self.cdrs };
        Path { len: self.len + 1, cdrs }
    }

    /// The steps as `cxr` letters, the last step first (`da` for the cdr of the car).
    fn steps(self) -> String {
        (0..self.len).map(|i| if self.cdrs >> i & 1 == 1 { 'd' } else { 'a' }).collect()
    }
}

/// A leaf's shape in words: `a real`, `a vector of length 3`, `a 2x3 matrix`...
fn shape_words(v: &Value) -> String {
    match v {
        Value::Vector(x) => x.shape().describe(x.len()),
        v if v.is_number() => "a real".into(),
        Value::Nil => "()".into(),
        Value::Pair(_) => "a pair".into(),
        v => v.kind_name().into(),
    }
}

/// Checks that `s` can be a sensitivity of `y` (at the same tag depth: leaves are
/// compared through their tags): pairs where `y` has pairs, `()` where it has
/// `()`, reals where it has reals, vectors of the same shape where it has
/// vectors, a procedure or `()` where it has a procedure (a reversible one
/// too), a boolean or `()` where it has a boolean (a lazy zero conforms).
/// Unless `strict`, also `()` for a real and a flat vector for a matrix of as
/// many numbers (what the reversible procedures' derivatives accept).
/// On a mismatch, the words of an error: what `y` has and what `s` has there.
pub fn sensitivity_mismatch(m: &mut Machine, y: &Value, s: &Value, strict: bool) -> Result<Option<String>> {
    shape_mismatch(m, y, s, strict, ["the result", "the sensitivity"])
}

/// `s`, a sensitivity of `y` that [`sensitivity_mismatch`] accepted (not
/// strictly), with each `()` where `y` has a number made the exact zero it
/// stands for, through `s`'s plain pairs: so that `vjp`'s result is shaped like
/// the argument (`(vjp (lambda (x) (+ x 1.0)) 2.0 '())` gave `()`, not 0).
/// Parts with no such `()` are kept as they are, and shared parts are done
/// once (data shared 2^n ways take time in their size).
pub fn nil_as_zero(m: &mut Machine, y: &Value, s: &Value) -> Result<Value> {
    let mut memo = FxHashMap::default();
    Ok(nil_as_zero_in(m, y, s, &mut memo)?.unwrap_or_else(|| s.clone()))
}

type SpineStep = (Value, Option<Value>, Option<(usize, usize)>);

/// [`nil_as_zero`], `None` where nothing changes; `memo` holds what each
/// shared pair of `s` became (by the pairs of `y` and `s`).
fn nil_as_zero_in(
    m: &mut Machine,
    y: &Value,
    s: &Value,
    memo: &mut FxHashMap<(usize, usize), Option<Value>>,
) -> Result<Option<Value>> {
    crate::stack::try_grow(RED_ZONE, SEGMENT, || {
        let y = hnf(m, y)?;
        match s {
            Value::Nil if strip(&y).is_number() => return Ok(Some(Value::Int(0))),
            Value::Pair(_) => {}
            _ => return Ok(None),
        }
        // (along the cdrs in a loop: lists run as long as memory allows)
        let (mut y, mut s) = (y, s.clone());
        // (each pair of `s` on the way, what its car became, its key if shared)
        let mut spine: Vec<SpineStep> = Vec::new();
        let tail = loop {
            let (Value::Pair(a), Value::Pair(b)) = (&*strip(&y), &s) else {
                // (a pair of `s` where `y` has none, which the check lets
                // pass only where it has no shape to compare (none is known
                // now: a guard): no `()` there stands for a number's zero,
                // and the same two values again would recurse without end)
                if let Value::Pair(_) = s {
                    break None;
                }
                break nil_as_zero_in(m, &y, &s, memo)?;
            };
            let key = (shared(&s) && shared(&y)).then_some((Rc::as_ptr(a) as usize, Rc::as_ptr(b) as usize));
            if let Some(done) = key.and_then(|k| memo.get(&k)) {
                break done.clone();
            }
            let car = nil_as_zero_in(m, &a.car, &b.car, memo)?;
            spine.push((s.clone(), car, key));
            let next_y = hnf(m, &a.cdr)?;
            let next_s = b.cdr.clone();
            (y, s) = (next_y, next_s);
        };
        let mut out = tail;
        for (pair, car, key) in spine.into_iter().rev() {
            let Value::Pair(b) = &pair else { unreachable!() };
            if car.is_some() || out.is_some() {
                let car = car.unwrap_or_else(|| b.car.clone());
                let cdr = out.take().unwrap_or_else(|| b.cdr.clone());
                out = Some(Value::cons(car, cdr));
            }
            if let Some(k) = key {
                memo.insert(k, out.clone());
            }
        }
        Ok(out)
    })
}

/// [`sensitivity_mismatch`] of a tangent `dx` for an argument `x` (`jvp`'s:
/// strict), in those words.
pub fn tangent_mismatch(m: &mut Machine, x: &Value, dx: &Value) -> Result<Option<String>> {
    shape_mismatch(m, x, dx, true, ["the argument", "the tangent"])
}

/// [`sensitivity_mismatch`], `names` naming `y` and `s` in its words.
fn shape_mismatch(
    m: &mut Machine,
    y: &Value,
    s: &Value,
    strict: bool,
    names: [&str; 2],
) -> Result<Option<String>> {
    let mut seen: rustc_hash::FxHashSet<(usize, usize)> = Default::default();
    // (an explicit work list: lists run as long as memory allows), with the path
    // from the root (only its length, and its steps while it is short enough to name)
    let mut work: Vec<(Value, Value, Path)> = vec![(y.clone(), s.clone(), Path::default())];
    while let Some((y, s, path)) = work.pop() {
        if is_lazy_zero(&s) {
            continue;
        }
        if shared(&y) && shared(&s) && !seen.insert((y.ptr_id().unwrap_or(0), s.ptr_id().unwrap_or(0))) {
            continue;
        }
        let (y, s) = (hnf(m, &y)?, hnf(m, &s)?);
        let (ys, ss) = (strip(&y), strip(&s));
        let Some(want) = sens_kind(&ys) else { continue };
        let ok = match (&*ys, &*ss) {
            (Value::Pair(a), Value::Pair(b)) => {
                work.push((a.cdr.clone(), b.cdr.clone(), path.step(true)));
                work.push((a.car.clone(), b.car.clone(), path.step(false)));
                true
            }
            // (unless `strict`, a flat vector of as many numbers conforms to a
            // matrix, as the reversible procedures' derivatives take it)
            (Value::Vector(a), Value::Vector(b)) => {
                a.len() == b.len()
                    && (a.shape() == b.shape() || (!strict && b.shape() == crate::vec::Shape::Vector))
            }
            // (unless `strict`, `()` as the zero of a real, as the reversible
            // procedures' derivatives take it)
            (a, Value::Nil) if a.is_number() && !strict => true,
            // (a procedure's is a procedure, of the sensitivities of what it
            // captures, or `()`: data there is a mistake, which a procedure
            // capturing nothing would pass on as it is)
            (Value::Closure(..) | Value::Prim(_) | Value::Rev(_), b) => {
                !(matches!(b, Value::Pair(_) | Value::Vector(_) | Value::Bool(_)) || b.is_number())
            }
            // (a boolean's is itself, its `zero`, or `()`)
            (Value::Bool(_), b) => matches!(b, Value::Bool(_) | Value::Nil),
            (a, b) => sens_kind(a) == sens_kind(b) && want != "a vector",
        };
        if !ok {
            let at = match path.len {
                0 => String::new(),
                n if n <= Path::NAMED => format!("at (c{}r ...) ", path.steps()),
                _ => "deep inside ".into(),
            };
            let got = match &*ss {
                Value::Nil => "()".into(),
                Value::Pair(_) | Value::Vector(_) | Value::Bool(_) => {
                    format!("{} {}", shape_words(&ss), crate::print::brief(&s, 60))
                }
                x if x.is_number() => format!("the real {}", crate::print::brief(x, 60)),
                _ => format!("{} ({})", crate::print::brief(&s, 60), s.kind_name()),
            };
            let (has, s_has) = if at.is_empty() { (" is", " is") } else { (" has", " has") };
            return Ok(Some(format!(
                "{at}{}{has} {}, {}{s_has} {got}",
                names[0],
                shape_words(&ys),
                names[1]
            )));
        }
    }
    Ok(None)
}
