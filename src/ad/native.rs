//! Native versions of the forward and reverse rules of the scalar primitives.
//!
//! The forward and reverse versions of a primitive are VLAD closures compiled
//! from its rules ([`super::rules`]), so that they can be transformed again when
//! AD is nested. Running them through the evaluator costs a dozen interpreted
//! steps per arithmetic operation, so when such a closure (or the
//! backpropagator closure its reverse version returns) is called on numbers
//! carrying exactly the tags it expects, it is run here instead: same
//! arithmetic (the primitives' own implementations, metered alike), same
//! result, same backpropagator closure (group and environment) as the
//! interpreted code builds. Anything else (vectors, lazy or deeper-tagged
//! values, a transformed rule closure) takes the interpreted path.

use crate::anf::{Bind, Expr, Group, Kind, Lambda, VarId};
use crate::error::Result;
use crate::eval::Machine;
use crate::prims::{self, Class, PrimId, Rule};
use crate::value::{Inst, InstBuilder, InstRc, LazyOp, Tag, Value};
use smallvec::{smallvec, SmallVec};
use std::rc::Rc;

/// The one or two operands of a scalar rule (no allocation).
pub(super) type Two<T> = SmallVec<[T; 2]>;

/// A primitive's derivative rules, as native arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formula {
    Add,
    Sub,
    Mul,
    Div,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Atan,
    /// `ZERO_RULES`: a zero tangent and zero cotangents (comparisons, predicates).
    Zero,
    /// An AD primitive on values of any shape (`zero`, the taggers, `primal`...).
    Struct(StructOp),
}

/// The AD primitives whose rules are themselves AD primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructOp {
    Zero,
    Tag(Tag),
    Untag(Tag),
    Primal,
    Tangent,
    Bundle,
    Plus,
}

/// What a closure group runs natively.
pub enum Native {
    /// The forward version of primitive `p`.
    F(PrimId, Formula),
    /// The reverse version: returns `(cons (*j y) bp)` with `bp` a closure of
    /// group `bp`, whose environment holds `x` or `y` (`true`) at each position.
    R { prim: PrimId, f: Formula, bp: Rc<Group>, env: Box<[bool]> },
    /// The backpropagator of the reverse version.
    Bp { f: Formula, env: Box<[bool]> },
    /// The forward transform of a scalar primitive's reverse version (forward
    /// over reverse): `(cons (*j y) bp)` on forward bundles, `bp` a closure of
    /// the forward transform `bp_f` of the backpropagator's group.
    FR { prim: PrimId, f: Formula, bp_f: Rc<Group>, env: Box<[bool]> },
    /// The forward transform of its backpropagator.
    FBp { f: Formula, env: Box<[bool]> },
    /// The forward transform of a scalar primitive's forward version (forward
    /// over forward).
    FF(PrimId, Formula),
    /// The forward version of a shape predicate `(p v)` (`null?`, `pair?`...;
    /// `true`: one that tests the untagged value of a leaf, `real?`, `boolean?`).
    ShapeF(PrimId, bool),
    /// Its reverse version: `(cons (*j y) bp)`, `bp` a closure of group `bp`
    /// capturing the argument.
    ShapeR(PrimId, Rc<Group>, bool),
    /// Its backpropagator: `(sensitize (cons '() (zero (*j-inverse v))))`.
    ShapeBp,
    /// The reverse transform of a scalar primitive's forward version (reverse
    /// over forward, [`super::native_rf`]).
    RF(PrimId, Formula, super::native_rf::RfCell),
    /// The backpropagator it returns.
    RFBp(PrimId, Formula, Box<[super::native_rf::Role]>),
    /// The forward transform of a shape predicate's reverse version (forward
    /// over reverse): `(cons ((forward *j) ((forward p) v)) bp)`, `bp` a
    /// closure of the forward transform `bp_f` of the backpropagator's group
    /// capturing `v`.
    FShapeR(PrimId, Rc<Group>),
}

fn formula(p: PrimId) -> Option<Formula> {
    let def = prims::prim(p);
    let Rule::Rules { jvp, vjp } = def.rule else { return None };
    if let Rule::Rules { jvp: zj, vjp: zv } = prims::ZERO_RULES {
        if jvp == zj && vjp == zv {
            return Some(Formula::Zero);
        }
    }
    Some(match def.name {
        "zero" => Formula::Struct(StructOp::Zero),
        "perturb" => Formula::Struct(StructOp::Tag(Tag::Perturbation)),
        "unperturb" => Formula::Struct(StructOp::Untag(Tag::Perturbation)),
        "sensitize" => Formula::Struct(StructOp::Tag(Tag::Sensitivity)),
        "unsensitize" => Formula::Struct(StructOp::Untag(Tag::Sensitivity)),
        "*j" => Formula::Struct(StructOp::Tag(Tag::Reverse)),
        "*j-inverse" => Formula::Struct(StructOp::Untag(Tag::Reverse)),
        "primal" => Formula::Struct(StructOp::Primal),
        "tangent" => Formula::Struct(StructOp::Tangent),
        "bundle" => Formula::Struct(StructOp::Bundle),
        "plus" => Formula::Struct(StructOp::Plus),
        "+" => Formula::Add,
        "-" => Formula::Sub,
        "*" => Formula::Mul,
        "/" => Formula::Div,
        "sqrt" => Formula::Sqrt,
        "exp" => Formula::Exp,
        "log" => Formula::Log,
        "sin" => Formula::Sin,
        "cos" => Formula::Cos,
        "atan" => Formula::Atan,
        _ => return None,
    })
}

/// `formula`, computed once per primitive (for the rules' own arithmetic).
pub(super) fn formula_of(p: PrimId) -> Option<Formula> {
    static TABLE: std::sync::OnceLock<Vec<Option<Formula>>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| (0..prims::prims().len()).map(|i| formula(i as PrimId)).collect());
    t.get(p as usize).copied().flatten()
}

/// Gives a primitive's freshly compiled forward or reverse version (and its
/// backpropagator) their native implementations, when the primitive has one
/// and the code has the shape of the rule template.
pub fn attach(g: &Rc<Group>, p: PrimId, k: Kind, code: &Lambda) {
    let name = prims::prim(p).name;
    if let Rule::Predicate = prims::prim(p).rule {
        // (its rules are those of a shape predicate whose test is `(p v)`)
        attach_shape(g, p, k, code, false);
        return;
    }
    if let Rule::Shape { test } = prims::prim(p).rule {
        if test == format!("({name} v)") {
            attach_shape(g, p, k, code, false);
        } else if test == format!("(if (pair? v) #f (if (procedure? v) #f ({name} (STRIP v))))") {
            attach_shape(g, p, k, code, true);
        }
        return;
    }
    let Some(f) = formula(p) else { return };
    if prims::prim(p).arity > 2 {
        return;
    }
    match k {
        Kind::F => {
            let _ = g.native.set(Native::F(p, f));
        }
        Kind::R => {
            // (let* ((x (*j-inverse v)) (y (p x))) (cons (*j y) (lambda (s) ...)))
            let b = &code.body.binds;
            let (Some(Bind::Let(vx, Expr::Prim(..))), Some(Bind::Let(vy, Expr::Prim(q, ..)))) =
                (b.first(), b.get(1))
            else {
                return;
            };
            if *q != p {
                return;
            }
            let Some(bp) = only_lambda(b) else { return };
            let env: Option<Box<[bool]>> = bp
                .free
                .iter()
                .map(|v: &VarId| {
                    if v == vx {
                        Some(false)
                    } else if v == vy {
                        Some(true)
                    } else {
                        None
                    }
                })
                .collect();
            let Some(env) = env else { return };
            let _ = bp.native.set(Native::Bp { f, env: env.clone() });
            let _ = g.native.set(Native::R { prim: p, f, bp: bp.clone(), env });
        }
        _ => {}
    }
}

/// The backpropagator lambda of a rule template: its only lambda.
fn only_lambda(binds: &[Bind]) -> Option<&Rc<Group>> {
    let mut lambdas = binds.iter().filter_map(|bind| match bind {
        Bind::Let(_, Expr::Lambda(lg)) => Some(lg),
        _ => None,
    });
    match (lambdas.next(), lambdas.next()) {
        (Some(bp), None) => Some(bp),
        _ => None,
    }
}

/// The backpropagator closure a reverse version returns: group `bp` capturing
/// `x` or `y` (`true`) at each position of `env`.
pub(super) fn bp_closure(bp: &Rc<Group>, env: &[bool], x: &Value, y: &Value) -> Value {
    let captured = env.iter().map(|is_y| if *is_y { y.clone() } else { x.clone() });
    Value::closure(bp.clone(), captured, 0)
}

/// [`bp_closure`] given `x` itself, moved into the closure where it is
/// captured once (as it is: the captured variables are distinct).
fn bp_closure_of(bp: &Rc<Group>, env: &[bool], x: Value, y: &Value) -> Value {
    if env.iter().filter(|is_y| !**is_y).count() != 1 {
        return bp_closure(bp, env, &x, y);
    }
    let mut x = Some(x);
    let captured = env.iter().map(|is_y| if *is_y { y.clone() } else { x.take().unwrap_or(Value::Nil) });
    Value::closure(bp.clone(), captured, 0)
}

/// What a backpropagator captured: its `x` and its `y` (when its rule uses them).
pub(super) fn captured<'a>(env: &[bool], inst: &'a Inst) -> (Option<&'a Value>, Option<&'a Value>) {
    let (mut x, mut y) = (None, None);
    for (is_y, v) in env.iter().zip(inst.env.iter()) {
        if *is_y {
            y = Some(v);
        } else {
            x = Some(v);
        }
    }
    (x, y)
}

/// A shape predicate's versions: (let ((y (p v))) (bundle y (perturb (zero y))))
/// and (let ((y (p v))) (cons (*j y) (lambda (s) (sensitize (cons '() (zero (*j-inverse v))))))),
/// where `(p v)` is `(if (pair? v) #f (if (procedure? v) #f (p (STRIP v))))` for
/// a predicate that `strips` (STRIP being `primal` or `*j-inverse`).
fn attach_shape(g: &Rc<Group>, p: PrimId, k: Kind, code: &Lambda, strips: bool) {
    match k {
        Kind::F => {
            let _ = g.native.set(Native::ShapeF(p, strips));
        }
        Kind::R => {
            let b = &code.body.binds;
            let Some(bp) = only_lambda(b) else { return };
            // (the template of one that strips starts with its own tests)
            let first_ok = strips || matches!(b.first(), Some(Bind::Let(_, Expr::Prim(q, ..))) if *q == p);
            if !first_ok || bp.free.as_slice() != [code.param] {
                return;
            }
            let _ = bp.native.set(Native::ShapeBp);
            let _ = g.native.set(Native::ShapeR(p, bp.clone(), strips));
        }
        _ => {}
    }
}

/// `y` of a shape predicate's version of kind `k` (see [`attach_shape`]) on `v`.
fn shape_test(m: &mut Machine, p: PrimId, strips: bool, k: Kind, v: &Value) -> Result<Value> {
    if strips {
        if v.is_pair() || v.is_procedure() {
            m.ad_work += 1;
            return Ok(Value::Bool(false));
        }
        // STRIP: `primal` (forward) or `*j-inverse` (reverse)
        let x = match k {
            Kind::F => super::ops::primal(m, v)?,
            _ => super::ops::untag(m, Tag::Reverse, v)?,
        };
        m.stack.push(x);
    } else {
        m.stack.push(v.clone());
    }
    m.call_prim(p, 1)
}

/// The native code of the forward transform of a group with native code, if
/// there is one (`transform_group` calls this when it makes the transform).
pub fn forward_of(nat: &Native) -> Option<Native> {
    let scalar = |f: &Formula| !matches!(f, Formula::Struct(_) | Formula::Zero);
    match nat {
        Native::R { prim, f, bp, env } if scalar(f) => Some(Native::FR {
            prim: *prim,
            f: *f,
            bp_f: super::transform_group(bp, Kind::F),
            env: env.clone(),
        }),
        Native::Bp { f, env } if scalar(f) => Some(Native::FBp { f: *f, env: env.clone() }),
        Native::F(p, f) if scalar(f) => Some(Native::FF(*p, *f)),
        Native::ShapeR(p, bp, false) => Some(Native::FShapeR(*p, super::transform_group(bp, Kind::F))),
        _ => None,
    }
}

/// The native code of the reverse transform of a group with native code, if
/// there is one (`transform_group` calls this when it makes the transform).
pub fn reverse_of(nat: &Native) -> Option<Native> {
    match nat {
        Native::F(p, f) if !matches!(f, Formula::Struct(_) | Formula::Zero) => {
            Some(Native::RF(*p, *f, Default::default()))
        }
        _ => None,
    }
}

/// A forward bundle of a number with a perturbation of a number, as a `Dual`;
/// `tag` is the tag both the primal and the tangent carry inside (if any).
pub(super) fn dual_of(m: &mut Machine, v: &Value, tag: Option<Tag>) -> Result<Option<Dual>> {
    let forced;
    let v = match v {
        Value::Lazy(_) => {
            forced = super::ops::hnf(m, v)?;
            &forced
        }
        _ => v,
    };
    let Value::Bundle(b) = v else { return Ok(None) };
    let Some(d) = b.1.peel_if(Tag::Perturbation) else { return Ok(None) };
    let strip = |x: &Value| -> Option<Value> {
        let x = match tag {
            None => x.clone(),
            Some(t) => x.peel_if(t)?,
        };
        x.is_number().then_some(x)
    };
    Ok(match (strip(&b.0), strip(&d)) {
        (Some(p), Some(t)) => Some(Dual { p, t }),
        _ => None,
    })
}

/// A `Dual` as the forward bundle it stands for, with `tag` on both parts.
fn bundle_of(d: Dual, tag: Option<Tag>) -> Value {
    let wrap = |x: Value| match tag {
        Some(t) => Value::tagged(t, x),
        None => x,
    };
    Value::bundle(wrap(d.p), Value::tagged(Tag::Perturbation, wrap(d.t)))
}

/// Forward over reverse of a scalar primitive: the forward transform of
/// (let* ((x (*j-inverse v)) (y (p x))) (cons (*j y) (lambda (s) ...))), whose
/// steps are the forward versions of `*j-inverse`, `p` and `*j`.
fn run_fr(
    m: &mut Machine,
    prim: PrimId,
    f: Formula,
    bp_f: &Rc<Group>,
    env: &[bool],
    base: usize,
    nargs: usize,
) -> Result<Option<Value>> {
    let Some(args) = leaves(m, prim, base, nargs)? else { return Ok(None) };
    // Forward bundles of `*j`-tagged reals, unmetered: on doubles (as
    // `apply_jvp` computes them), read straight from the values.
    let d64: Option<Two<D64>> = args.iter().map(|a| d64_of(m, a, Some(Tag::Reverse))).collect();
    if let (Some(xs), false) = (d64, matches!(f, Formula::Zero | Formula::Struct(_))) {
        let (xf, df): (Two<f64>, Two<f64>) = xs.iter().map(|d| (d.p, d.t)).unzip();
        if let Some(y) = prim_f64(prim, &xf) {
            let dy = jvp_num(m, f, &xf, &y, &df)?;
            let yd = dual_of_d64(D64 { p: y, t: dy });
            let x = match &xs[..] {
                [a] => bundle_of(dual_of_d64(*a), None),
                [a, b] => Value::cons(bundle_of(dual_of_d64(*a), None), bundle_of(dual_of_d64(*b), None)),
                _ => return Ok(None),
            };
            let y = if env.contains(&true) { bundle_of(yd.clone(), None) } else { Value::Nil };
            let bpv = bp_closure(bp_f, env, &x, &y);
            return Ok(Some(Value::cons(bundle_of(yd, Some(Tag::Reverse)), bpv)));
        }
    }
    let mut xs: Two<Dual> = SmallVec::new();
    for a in &args {
        match dual_of(m, a, Some(Tag::Reverse))? {
            Some(d) => xs.push(d),
            None => return Ok(None),
        }
    }
    let primals: Two<Value> = xs.iter().map(|d| d.p.clone()).collect();
    let tangents: Two<Value> = xs.iter().map(|d| d.t.clone()).collect();
    let (y, dy) = apply_jvp(m, prim, f, &primals, &tangents)?;
    let yd = Dual { p: y, t: dy };
    let x = match &xs[..] {
        [a] => bundle_of(a.clone(), None),
        [a, b] => Value::cons(bundle_of(a.clone(), None), bundle_of(b.clone(), None)),
        _ => return Ok(None),
    };
    // (y is captured only by the rules that use it)
    let y = if env.contains(&true) { bundle_of(yd.clone(), None) } else { Value::Nil };
    let bpv = bp_closure(bp_f, env, &x, &y);
    Ok(Some(Value::cons(bundle_of(yd, Some(Tag::Reverse)), bpv)))
}

/// The forward transform of a scalar primitive's backpropagator:
/// (sensitize (cons '() (vjp x y (unsensitize s)))) on forward bundles, the
/// rule's arithmetic done by the primitives' forward versions.
fn run_fbp(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    base: usize,
    nargs: usize,
) -> Result<Option<Value>> {
    if nargs != 1 {
        return Ok(None);
    }
    let s = m.stack[base].clone();
    if let Some(r) = fbp_fast(m, f, env, inst, &s, Some(Tag::Sensitivity))? {
        return Ok(Some(r));
    }
    let Some(yb) = dual_of(m, &s, Some(Tag::Sensitivity))? else { return Ok(None) };
    fbp_core(m, f, env, inst, yb, Some(Tag::Sensitivity))
}

/// A forward bundle of numbers with a perturbation of a number (`tag` on
/// both parts, if any), unboxed by `num` (reals as doubles, or exact integers
/// and reals as [`X64`]), when nothing is metered (what [`dual_of`] and
/// [`dual_reals`] together find, without building the values).
fn fwd_of<N>(m: &Machine, v: &Value, tag: Option<Tag>, num: fn(&Value) -> Option<N>) -> Option<Fwd<N>> {
    if m.meter.is_some() {
        return None;
    }
    let Value::Bundle(b) = v else { return None };
    let t = b.1.peel_if(Tag::Perturbation)?;
    let (p, t) = match tag {
        None => (num(&b.0)?, num(&t)?),
        Some(tg) => (num(&b.0.peel_if(tg)?)?, num(&t.peel_if(tg)?)?),
    };
    Some(Fwd { p, t })
}

fn d64_of(m: &Machine, v: &Value, tag: Option<Tag>) -> Option<D64> {
    fwd_of(m, v, tag, real)
}

fn real(v: &Value) -> Option<f64> {
    match v {
        Value::Real(x) => Some(*x),
        _ => None,
    }
}

/// Dual numbers read straight from forward bundles (for [`fbp_fast`]).
trait Leaf: Num + Copy {
    fn read(m: &Machine, v: &Value, tag: Option<Tag>) -> Option<Self>;
    fn dual(self) -> Dual;
}

impl Leaf for D64 {
    fn read(m: &Machine, v: &Value, tag: Option<Tag>) -> Option<D64> {
        d64_of(m, v, tag)
    }
    fn dual(self) -> Dual {
        dual_of_d64(self)
    }
}

impl Leaf for DX {
    fn read(m: &Machine, v: &Value, tag: Option<Tag>) -> Option<DX> {
        fwd_of(m, v, tag, X64::of)
    }
    fn dual(self) -> Dual {
        Dual { p: self.p.value(), t: self.t.value() }
    }
}

/// The forward transform of a scalar primitive's backpropagator on its
/// sensitivity `s` (under `tag`, as it is passed, or bare), when it and every
/// captured number are forward bundles of reals (`D64`) or of exact integers
/// and reals (`DX`) and nothing is metered: [`fbp_core`]'s operations on
/// numbers read straight from the values. `None` otherwise.
fn fbp_fast(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    s: &Value,
    tag: Option<Tag>,
) -> Result<Option<Value>> {
    if m.meter.is_some() {
        return Ok(None);
    }
    if let Some(r) = fbp_leaves::<D64>(m, f, env, inst, s, tag)? {
        return Ok(Some(r));
    }
    fbp_leaves::<DX>(m, f, env, inst, s, tag)
}

fn fbp_leaves<N: Leaf>(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    s: &Value,
    tag: Option<Tag>,
) -> Result<Option<Value>> {
    let Some(yb) = N::read(m, s, tag) else { return Ok(None) };
    let (xv, yv) = captured(env, inst);
    let y = match yv {
        Some(v) => match N::read(m, v, None) {
            Some(d) => Some(d),
            None => return Ok(None),
        },
        None => None,
    };
    // (the captured argument's parts: the first `n` of `x`)
    let (x, n) = match xv {
        Some(Value::Pair(p)) => match (N::read(m, &p.car, None), N::read(m, &p.cdr, None)) {
            (Some(a), Some(b)) => ([a, b], 2),
            _ => return Ok(None),
        },
        Some(v) => match N::read(m, v, None) {
            Some(a) => ([a, a], 1),
            None => return Ok(None),
        },
        None => ([yb, yb], 0),
    };
    // (on exact integers, an operation the primitive does otherwise fails:
    // the general path then computes it)
    let Ok(Some(out)) = vjp_num(m, f, &x[..n], y.as_ref(), &yb) else { return Ok(None) };
    let xb = match out {
        Out::One(a) => bundle_of(a.dual(), tag),
        Out::Two(a, b) => Value::cons(bundle_of(a.dual(), tag), bundle_of(b.dual(), tag)),
    };
    m.ad_work += 10;
    Ok(Some(Value::cons(Value::Nil, xb)))
}

/// `(unsensitize (bp (sensitize x)))`, all three forward-transformed, for a
/// closure `bp` of the forward transform of a scalar primitive's
/// backpropagator and a forward bundle `x` of numbers, natively (see
/// [`bp_untagged`]): the backpropagator's cotangent without the tags.
pub fn fbp_untagged(m: &mut Machine, inst: &Inst, x: &Value) -> Result<Option<Value>> {
    let Some(Native::FBp { f, env }) = inst.group.native.get() else { return Ok(None) };
    if !matches!(x, Value::Bundle(_)) {
        return Ok(None);
    }
    if let Some(r) = fbp_fast(m, *f, env, inst, x, None)? {
        return Ok(Some(r));
    }
    let Some(yb) = dual_of(m, x, None)? else { return Ok(None) };
    fbp_core(m, *f, env, inst, yb, None)
}

/// The forward transform of a scalar primitive's backpropagator, given the
/// (untagged) dual sensitivity `yb` of its result: `(cons '() xb)`, the leaves
/// of `xb` carrying `tag` (`sensitize`d, as the backpropagator returns them, or
/// bare).
fn fbp_core(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    yb: Dual,
    tag: Option<Tag>,
) -> Result<Option<Value>> {
    let (xv, yv) = captured(env, inst);
    let y = match yv {
        Some(v) => match dual_of(m, v, None)? {
            Some(d) => Some(d),
            None => return Ok(None),
        },
        None => None,
    };
    let mut x: Two<Dual> = SmallVec::new();
    if let Some(v) = xv {
        let parts: Two<Value> = match super::ops::hnf(m, v)? {
            Value::Pair(p) => smallvec![p.car.clone(), p.cdr.clone()],
            other => smallvec![other],
        };
        for part in &parts {
            match dual_of(m, part, None)? {
                Some(d) => x.push(d),
                None => return Ok(None),
            }
        }
    }
    let y64 = match &y {
        Some(d) => dual_reals(m, std::slice::from_ref(d)).map(|v| Some(v[0])),
        None => Some(None),
    };
    let out = match (dual_reals(m, &x), y64, dual_reals(m, std::slice::from_ref(&yb))) {
        (Some(x64), Some(y64), Some(yb64)) => match vjp_num(m, f, &x64, y64.as_ref(), &yb64[0])? {
            Some(Out::One(a)) => Some(Out::One(dual_of_d64(a))),
            Some(Out::Two(a, b)) => Some(Out::Two(dual_of_d64(a), dual_of_d64(b))),
            None => None,
        },
        _ => match vjp_x64(m, f, &x, y.as_ref(), &yb) {
            Some(out) => Some(out),
            None => vjp_num(m, f, &x, y.as_ref(), &yb)?,
        },
    };
    let Some(out) = out else { return Ok(None) };
    // The forward version of `sensitize` on (cons '() xb), built at once: each
    // leaf is (bundle (sensitize a) (perturb (sensitize da))), as `struct_f`
    // makes it (see `struct_f_tree`).
    let xb = match out {
        Out::One(a) => bundle_of(a, tag),
        Out::Two(a, b) => Value::cons(bundle_of(a, tag), bundle_of(b, tag)),
    };
    m.ad_work += 10;
    Ok(Some(Value::cons(Value::Nil, xb)))
}

/// Forward over forward of a scalar primitive: the forward transform of
/// (let* ((x (primal v)) (y (p x))) (bundle y (perturb (jvp x y (unperturb (tangent v)))))),
/// on leaves (bundle (bundle a da) (perturb (bundle a' da'))): the primitive and
/// its tangent rule in dual numbers.
fn run_ff(m: &mut Machine, p: PrimId, f: Formula, base: usize, nargs: usize) -> Result<Option<Value>> {
    let Some(args) = leaves(m, p, base, nargs)? else { return Ok(None) };
    let (mut xs, mut ds): (Two<Dual>, Two<Dual>) = (SmallVec::new(), SmallVec::new());
    for a in &args {
        let Value::Bundle(outer) = a else { return Ok(None) };
        let Some(t) = outer.1.peel_if(Tag::Perturbation) else { return Ok(None) };
        let (Some(inner), Some(dinner)) = (dual_of(m, &outer.0, None)?, dual_of(m, &t, None)?) else {
            return Ok(None);
        };
        // inner = (a, da), dinner = (a', da'): x = (a, a'), dx = (da, da')
        xs.push(Dual { p: inner.p, t: dinner.p });
        ds.push(Dual { p: inner.t, t: dinner.t });
    }
    let primals: Two<Value> = xs.iter().map(|d| d.p.clone()).collect();
    let tangents: Two<Value> = xs.iter().map(|d| d.t.clone()).collect();
    let (y0, y1) = apply_jvp(m, p, f, &primals, &tangents)?;
    let y = Dual { p: y0, t: y1 };
    let dy = match (dual_reals(m, &xs), dual_reals(m, &ds), dual_reals(m, std::slice::from_ref(&y))) {
        (Some(x64), Some(d64), Some(y64)) => dual_of_d64(jvp_num(m, f, &x64, &y64[0], &d64)?),
        _ => match jvp_x64(m, f, &xs, &y, &ds) {
            Some(dy) => dy,
            None => jvp_num(m, f, &xs, &y, &ds)?,
        },
    };
    let inner = |p: Value, t: Value| Value::bundle(p, Value::tagged(Tag::Perturbation, t));
    Ok(Some(Value::bundle(inner(y.p, dy.p), Value::tagged(Tag::Perturbation, inner(y.t, dy.t)))))
}

/// Runs a native group on the `nargs` arguments at `stack[base..]`, if they
/// are what the fast path handles; `None` leaves them for the interpreter.
pub fn run(m: &mut Machine, nat: &Native, inst: &Inst, base: usize, nargs: usize) -> Result<Option<Value>> {
    if let Native::F(_, Formula::Struct(op))
    | Native::R { f: Formula::Struct(op), .. }
    | Native::Bp { f: Formula::Struct(op), .. } = nat
    {
        return run_struct(m, nat, *op, inst, base, nargs).map(Some);
    }
    match nat {
        Native::RF(p, f, cell) => super::native_rf::run(m, cell, *p, *f, inst, base, nargs),
        Native::RFBp(p, f, roles) => super::native_rf::run_bp(m, *p, *f, roles, inst, base, nargs),
        Native::FR { prim, f, bp_f, env } => run_fr(m, *prim, *f, bp_f, env, base, nargs),
        Native::FBp { f, env } => run_fbp(m, *f, env, inst, base, nargs),
        Native::FF(p, f) => run_ff(m, *p, *f, base, nargs),
        Native::ShapeF(p, strips) | Native::ShapeR(p, _, strips) if nargs == 1 => {
            use super::ops;
            let v = m.stack[base].clone();
            let k = if matches!(nat, Native::ShapeR(..)) { Kind::R } else { Kind::F };
            let y = shape_test(m, *p, *strips, k, &v)?;
            Ok(Some(match nat {
                Native::ShapeR(_, bp, _) => {
                    let jy = ops::tag(m, Tag::Reverse, &y)?;
                    Value::cons(jy, Value::closure(bp.clone(), [v], 0))
                }
                _ => match y {
                    Value::Bool(b) => {
                        m.ad_work += 3;
                        bool_bundle(b)
                    }
                    _ => {
                        let z = ops::lazy_zero(m, &y)?;
                        let pz = ops::tag(m, Tag::Perturbation, &z)?;
                        ops::bundle(m, &y, &pz)?
                    }
                },
            }))
        }
        Native::ShapeBp if inst.env.len() == 1 => {
            use super::ops;
            let x = ops::untag(m, Tag::Reverse, &inst.env[0])?;
            let z = ops::lazy_zero(m, &x)?;
            Ok(Some(ops::tag(m, Tag::Sensitivity, &Value::cons(Value::Nil, z))?))
        }
        Native::FShapeR(p, bp_f) if nargs == 1 => {
            // (let ((y ((forward p) v))) (cons ((forward *j) y) (lambda (s) ...))):
            // the two calls as `Native::ShapeF` and `Native::F` of `*j` run them,
            // on a forward argument (as the interpreter checks on entry).
            let v = m.stack[base].clone();
            if super::ops::tag_mismatch(Kind::F, &v).is_some() {
                return Ok(None);
            }
            m.stack.push(v.clone());
            let Value::Bool(b) = m.call_prim(*p, 1)? else { return Ok(None) };
            m.tick()?;
            m.ad_work += 3;
            let y = bool_bundle(b);
            m.tick()?;
            let jy = struct_f(m, tag_prim(Tag::Reverse, false), StructOp::Tag(Tag::Reverse), &y)?;
            Ok(Some(Value::cons(jy, Value::closure(bp_f.clone(), [v], 0))))
        }
        Native::ShapeF(..) | Native::ShapeR(..) | Native::ShapeBp | Native::FShapeR(..) => Ok(None),
        Native::F(p, f) => {
            if let Some((xs, ds, n)) = x64_duals(m, *p, *f, base, nargs) {
                // (the general path below, on doubles)
                if let (Some(xf), Some(df)) = (all_real(&xs[..n]), all_real(&ds[..n])) {
                    let y = prim_f64(*p, &xf[..n]).ok_or_else(not_scalar)?;
                    let dy = jvp_num(m, *f, &xf[..n], &y, &df[..n])?;
                    return Ok(Some(Value::bundle(
                        Value::Real(y),
                        Value::tagged(Tag::Perturbation, Value::Real(dy)),
                    )));
                }
                // (on exact integers and doubles, where every step stays in them)
                if let Some(y) = X64::try_op(*p, &xs[..n]) {
                    if let Ok(dy) = jvp_num(m, *f, &xs[..n], &y, &ds[..n]) {
                        return Ok(Some(Value::bundle(
                            y.value(),
                            Value::tagged(Tag::Perturbation, dy.value()),
                        )));
                    }
                }
            }
            if *f == Formula::Zero {
                if let Some(b) = predicate_f(m, *p, base, nargs)? {
                    return Ok(Some(bool_bundle(b)));
                }
            }
            let Some(args) = leaves(m, *p, base, nargs)? else { return Ok(None) };
            let mut xs = [Value::Nil, Value::Nil];
            let mut ds = [Value::Nil, Value::Nil];
            for (i, a) in args.iter().enumerate() {
                let Value::Bundle(b) = a else { return Ok(None) };
                let Some(d) = b.1.peel_if(Tag::Perturbation) else { return Ok(None) };
                if !b.0.is_number() || !d.is_number() {
                    return Ok(None);
                }
                xs[i] = b.0.clone();
                ds[i] = d;
            }
            let n = args.len();
            let (y, dy) = apply_jvp(m, *p, *f, &xs[..n], &ds[..n])?;
            if let (Value::Bool(b), Value::Bool(_)) = (&y, &dy) {
                return Ok(Some(bool_bundle(*b)));
            }
            Ok(Some(Value::bundle(y, Value::tagged(Tag::Perturbation, dy))))
        }
        Native::R { prim, bp, env, .. } => {
            let Some(args) = leaves(m, *prim, base, nargs)? else { return Ok(None) };
            Ok(reverse_on_leaves(m, *prim, bp, env, &args)?.map(|(jy, bpv)| Value::cons(jy, bpv)))
        }
        Native::Bp { f, env } => {
            if nargs != 1 {
                return Ok(None);
            }
            let yb = match m.stack[base].peel_if(Tag::Sensitivity) {
                Some(yb) if yb.is_number() => yb,
                _ if *f == Formula::Zero => Value::Nil,
                _ => return Ok(None),
            };
            let Some(xb) = bp_cotangent(m, *f, env, inst, yb)? else { return Ok(None) };
            let r = super::ops::tag(m, Tag::Sensitivity, &Value::cons(Value::Nil, xb))?;
            Ok(Some(r))
        }
    }
}

/// A scalar primitive's reverse version (`Native::R`) on its one or two
/// argument leaves, when each is a number under the `*j` tag: `(*j y)` and the
/// backpropagator closure (group `bp` capturing per `env`); `None` otherwise.
pub(super) fn reverse_on_leaves(
    m: &mut Machine,
    prim: PrimId,
    bp: &Rc<Group>,
    env: &[bool],
    leaves: &[Value],
) -> Result<Option<(Value, Value)>> {
    let Some(xs) = reverse_args(leaves) else { return Ok(None) };
    reverse_apply(m, prim, Some((bp, env)), xs, leaves.len()).map(Some)
}

/// The numbers under the `*j` tag of a scalar primitive's one or two argument
/// leaves, if that is what they are.
fn reverse_args(leaves: &[Value]) -> Option<[Value; 2]> {
    if !matches!(leaves.len(), 1 | 2) {
        return None;
    }
    let mut xs = [Value::Nil, Value::Nil];
    for (i, a) in leaves.iter().enumerate() {
        match a.peel_if(Tag::Reverse) {
            Some(x) if x.is_number() => xs[i] = x,
            _ => return None,
        }
    }
    Some(xs)
}

/// A scalar primitive's reverse version on `n` numbers `xs` (see
/// [`reverse_on_leaves`]): `(*j y)` and the backpropagator, a closure of group
/// `bp` capturing per `env`, or `()` where `bp` is `None` (the caller reads
/// no backpropagator, so none is built).
fn reverse_apply(
    m: &mut Machine,
    prim: PrimId,
    bp: Option<(&Rc<Group>, &[bool])>,
    xs: [Value; 2],
    n: usize,
) -> Result<(Value, Value)> {
    let y = apply(m, prim, &xs[..n])?;
    Ok(reverse_result(bp, xs, n, y))
}

/// `(*j y)` and the backpropagator of a scalar primitive's reverse version
/// called on `n` numbers `xs` with result `y` (see [`reverse_apply`]).
fn reverse_result(bp: Option<(&Rc<Group>, &[bool])>, xs: [Value; 2], n: usize, y: Value) -> (Value, Value) {
    let bpv = match bp {
        Some((bp, env)) => {
            let [a, b] = xs;
            let x = if n == 1 { a } else { Value::cons(a, b) };
            bp_closure_of(bp, env, x, &y)
        }
        None => Value::Nil,
    };
    (Value::tagged(Tag::Reverse, y), bpv)
}

/// A call of a scalar primitive's reverse version (`inst`, a `Native::R`
/// closure) on the `nargs` values at `base`, as the two parts of the pair it
/// returns: `(*j y)` and the backpropagator (`()` instead unless `want_bp`:
/// building a closure is not observable, and one never read need not be
/// built); `None` (having done nothing) when the native code does not apply.
/// The call is counted (`tick`) as the interpreter's would be.
pub fn reverse_parts(
    m: &mut Machine,
    inst: &Inst,
    base: usize,
    nargs: usize,
    want_bp: bool,
) -> Result<Option<(Value, Value)>> {
    let Some(Native::R { prim, f, bp, env }) = inst.group.native.get() else { return Ok(None) };
    if matches!(f, Formula::Struct(_)) || matches!(m.stack.get(base), Some(Value::Lazy(_)) | None) {
        return Ok(None);
    }
    let bp = if want_bp { Some((bp, &env[..])) } else { None };
    if let Some((xs, n)) = reverse_x64(m, *prim, base, nargs) {
        m.tick()?;
        // (the general path below, unboxed where every step stays in X64; the
        // arguments are what `reverse_args` would give otherwise)
        let y = X64::try_op(*prim, &xs[..n]);
        let xs = xs.map(X64::value);
        let y = match y {
            Some(y) => y.value(),
            None => apply(m, *prim, &xs[..n])?,
        };
        return Ok(Some(reverse_result(bp, xs, n, y)));
    }
    let Some(args) = leaves(m, *prim, base, nargs)? else { return Ok(None) };
    let Some(xs) = reverse_args(&args) else { return Ok(None) };
    m.tick()?;
    reverse_apply(m, *prim, bp, xs, args.len()).map(Some)
}

/// The numbers of a scalar primitive's arguments passed separately at `base`,
/// each an exact integer or a double under the `*j` tag alone, when nothing is
/// metered.
fn reverse_x64(m: &Machine, p: PrimId, base: usize, nargs: usize) -> Option<([X64; 2], usize)> {
    if m.meter.is_some() || nargs != prims::prim(p).arity as usize || nargs > 2 {
        return None;
    }
    let mut xs = [X64::I(0); 2];
    for (i, a) in m.stack.get(base..base + nargs)?.iter().enumerate() {
        xs[i] = match a {
            Value::TReal(ts, x) if ts.count() == 1 && ts.outer() == Tag::Reverse => X64::R(*x),
            Value::Tagged(Tag::Reverse, v) => match **v {
                Value::Int(k) => X64::I(k),
                _ => return None,
            },
            _ => return None,
        };
    }
    Some((xs, nargs))
}

/// The cotangent a scalar primitive's backpropagator (`Native::Bp`) computes
/// from the (unsensitized) sensitivity `yb` of its result: the argument's
/// sensitivity (the two parts of a binary primitive's, where they are computed
/// separately), or `None` if the values are not what the native code handles.
fn bp_cotangent_parts(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    yb: Value,
) -> Result<Option<Out<Value>>> {
    let (x, y) = captured(env, inst);
    let xs: [Value; 2];
    let xs: &[Value] = match x {
        Some(Value::Pair(p)) if p.car.is_number() && p.cdr.is_number() => {
            xs = [p.car.clone(), p.cdr.clone()];
            &xs
        }
        Some(v) if v.is_number() => std::slice::from_ref(v),
        Some(_) => return Ok(None),
        None => &[],
    };
    let xb = match vjp_unboxed(m, f, xs, y, &yb) {
        Some(Out::One(a)) => Some(Out::One(a.value())),
        Some(Out::Two(a, b)) => Some(Out::Two(a.value(), b.value())),
        None => vjp(m, f, xs, y, &yb)?.map(Out::One),
    };
    Ok(xb)
}

/// [`bp_cotangent_parts`] as one value (a pair where it has two parts).
pub(super) fn bp_cotangent(
    m: &mut Machine,
    f: Formula,
    env: &[bool],
    inst: &Inst,
    yb: Value,
) -> Result<Option<Value>> {
    Ok(bp_cotangent_parts(m, f, env, inst, yb)?.map(|o| match o {
        Out::One(v) => v,
        Out::Two(a, b) => Value::cons(a, b),
    }))
}

/// A scalar primitive's cotangent rule on exact integers and doubles, unboxed
/// ([`X64`]), when those are what it sees, nothing is metered, and every
/// operation stays in them (see `X64::op`); `None` otherwise (nothing done:
/// the caller runs the rule on values).
fn vjp_unboxed<V: std::borrow::Borrow<Value>>(
    m: &mut Machine,
    f: Formula,
    x: &[V],
    y: Option<&Value>,
    yb: &Value,
) -> Option<Out<X64>> {
    if m.meter.is_some() || matches!(f, Formula::Zero | Formula::Struct(_)) {
        return None;
    }
    if x.len() > 2 {
        return None;
    }
    let mut xs = [X64::I(0); 2];
    for (i, v) in x.iter().enumerate() {
        xs[i] = X64::of(v.borrow())?;
    }
    let xs = &xs[..x.len()];
    let y = match y {
        Some(v) => Some(X64::of(v)?),
        None => None,
    };
    vjp_num(m, f, xs, y.as_ref(), &X64::of(yb)?).ok().flatten()
}

/// `(unsensitize (bp (sensitize yb)))` for a closure `bp` of a scalar
/// primitive's backpropagator group, natively: what the reverse transform's
/// code does with each backpropagator it calls (`CExpr::BpCall`). `None`
/// when the native code does not apply (the caller then runs those steps).
pub fn bp_untagged(m: &mut Machine, inst: &Inst, yb: &Value) -> Result<Option<Value>> {
    if !matches!(inst.group.native.get(), Some(Native::Bp { .. })) {
        return super::native_rf::bp_untagged(m, inst, yb);
    }
    Ok(bp_untagged_parts(m, inst, yb)?.map(|(e, xb)| Value::cons(e, xb)))
}

/// What a scalar primitive's backpropagator (`Native::Bp`) with rule `f`
/// finds under the sensitivity tag, when the native code handles it: the
/// number `yb` (or `()` for a rule that does not read it).
#[inline(always)]
fn bp_input(f: Formula, yb: &Value) -> Option<Value> {
    match f {
        Formula::Struct(_) => None,
        _ if yb.is_number() => Some(yb.clone()),
        Formula::Zero => Some(Value::Nil),
        _ => None,
    }
}

/// [`bp_untagged_parts`] when the caller takes the argument's sensitivity
/// apart at once: that sensitivity alone (the environment's is `()`), as its
/// two parts where the rule computes them separately (`(a, Some(b))`: the
/// pair `(a . b)` is never built), whole otherwise (`(v, None)`).
pub fn bp_untagged_cotangent(
    m: &mut Machine,
    inst: &Inst,
    yb: &Value,
) -> Result<Option<(Value, Option<Value>)>> {
    let Some(Native::Bp { f, env }) = inst.group.native.get() else { return Ok(None) };
    let Some(yb) = bp_input(*f, yb) else { return Ok(None) };
    let Some(xb) = bp_cotangent_parts(m, *f, env, inst, yb)? else { return Ok(None) };
    // unsensitize after sensitize cancels: the pair itself
    m.ad_work += 2;
    Ok(Some(match xb {
        Out::One(v) => (v, None),
        Out::Two(a, b) => (a, Some(b)),
    }))
}

/// [`bp_untagged`] of a scalar primitive's backpropagator (`Native::Bp`), as
/// the two parts of the pair it returns: the primitive's (empty) environment
/// sensitivity and its argument's sensitivity.
pub fn bp_untagged_parts(m: &mut Machine, inst: &Inst, yb: &Value) -> Result<Option<(Value, Value)>> {
    let Some(Native::Bp { f, env }) = inst.group.native.get() else { return Ok(None) };
    let Some(yb) = bp_input(*f, yb) else { return Ok(None) };
    let Some(xb) = bp_cotangent(m, *f, env, inst, yb)? else { return Ok(None) };
    // unsensitize after sensitize cancels: the pair itself
    m.ad_work += 2;
    Ok(Some((Value::Nil, xb)))
}

/// The argument leaves of a call of an arity-1 or arity-2 primitive's version:
/// one value, or the two parts of a pair passed as two arguments or as one.
pub(super) fn leaves(m: &mut Machine, p: PrimId, base: usize, nargs: usize) -> Result<Option<Two<Value>>> {
    let arity = prims::prim(p).arity;
    if let (2, 1, Value::Lazy(_)) = (arity, nargs, &m.stack[base]) {
        // A tuple built lazily (by a tag operation): one level of it.
        let v = m.stack[base].clone();
        if v.is_pair() {
            if let Value::Pair(q) = super::ops::hnf(m, &v)? {
                return Ok(Some(smallvec![q.car.clone(), q.cdr.clone()]));
            }
        }
        return Ok(None);
    }
    let s = &m.stack[base..base + nargs];
    Ok(match (arity, s) {
        (1, [a]) => Some(smallvec![a.clone()]),
        (2, [a, b]) => Some(smallvec![a.clone(), b.clone()]),
        (2, [Value::Pair(q)]) => Some(smallvec![q.car.clone(), q.cdr.clone()]),
        _ => None,
    })
}

/// The cotangent rule of scalar formula `f` for argument `x`, result `y` and
/// result sensitivity `yb` (for `ad::tape`): as the backpropagator computes it,
/// on doubles when every number is one and nothing is metered.
pub(super) fn cotangent(
    m: &mut Machine,
    f: Formula,
    x: &[&Value],
    y: &Value,
    yb: &Value,
) -> Result<Option<Out<Value>>> {
    let doubles = match x {
        [Value::Real(a)] => Some(([*a, 0.0], 1)),
        [Value::Real(a), Value::Real(b)] => Some(([*a, *b], 2)),
        _ => None,
    };
    if let (Some((xs, n)), Value::Real(y), Value::Real(yb), None) = (doubles, y, yb, &m.meter) {
        return cotangent_doubles(m, f, &xs[..n], *y, *yb);
    }
    // (exact integers among the reals: a gradient's exact seed 1, passed down
    // through sums)
    if let Some(o) = vjp_unboxed(m, f, x, Some(y), yb) {
        return Ok(Some(match o {
            Out::One(a) => Out::One(a.value()),
            Out::Two(a, b) => Out::Two(a.value(), b.value()),
        }));
    }
    // (reals of an enclosing forward level: forward over reverse)
    let n = x.len();
    if n <= 2 {
        let mut vs = [y; 4];
        for (v, a) in vs.iter_mut().zip(x.iter().copied().chain([y, yb])) {
            *v = a;
        }
        let mut ls = [LIFT_ZERO; 4];
        if let Some(level) = lift_all(m, &vs[..n + 2], &mut ls) {
            if let Ok(o) = vjp_num::<Lift>(m, f, &ls[..n], Some(&ls[n]), &ls[n + 1]) {
                return Ok(o.map(|o| match o {
                    Out::One(a) => Out::One(unlift(a, level)),
                    Out::Two(a, b) => Out::Two(unlift(a, level), unlift(b, level)),
                }));
            }
        }
        // (reals of an enclosing reverse level: reverse over reverse)
        let mut rs = [RV_ZERO; 4];
        if let Some(level) = rev_all(m, &vs[..n + 2], &mut rs) {
            if let Some(o) =
                rev_rule(m, &rs[..n + 2], |m| vjp_num::<Rv>(m, f, &rs[..n], Some(&rs[n]), &rs[n + 1]))
            {
                return Ok(o.map(|o| match o {
                    Out::One(a) => Out::One(unrev(a, level)),
                    Out::Two(a, b) => Out::Two(unrev(a, level), unrev(b, level)),
                }));
            }
        }
    }
    let x: Two<Value> = x.iter().map(|&v| v.clone()).collect();
    vjp_num::<Value>(m, f, &x, Some(y), yb)
}

/// [`cotangent`] where every operand, the result and the sensitivity are
/// doubles and nothing is metered (its first case; `ad::tape` calls it
/// directly for the doubles a node keeps unboxed), unboxed.
#[inline]
pub(super) fn cotangent_f64(
    m: &mut Machine,
    f: Formula,
    x: &[f64],
    y: f64,
    yb: f64,
) -> Result<Option<Out<f64>>> {
    vjp_num::<f64>(m, f, x, Some(&y), &yb)
}

/// [`cotangent_f64`], boxed.
fn cotangent_doubles(m: &mut Machine, f: Formula, x: &[f64], y: f64, yb: f64) -> Result<Option<Out<Value>>> {
    Ok(match cotangent_f64(m, f, x, y, yb)? {
        Some(Out::One(a)) => Some(Out::One(Value::Real(a))),
        Some(Out::Two(a, b)) => Some(Out::Two(Value::Real(a), Value::Real(b))),
        None => None,
    })
}

/// [`cotangent`] of operands `x` and result `y` that `ad::tape` kept unboxed,
/// each a double `(v, None)` or a real of forward level `level` whose value and
/// tangent are doubles `(v, Some(t))`, at least one of them the latter: its
/// forward-over-reverse case (the one `cotangent` takes for those values),
/// computed on them as they are. `None` where `cotangent` would not take that
/// case or it fails (nothing done: the caller rebuilds the values and calls
/// `cotangent`, which then takes the path it always took).
pub(super) fn cotangent_duals(
    m: &mut Machine,
    f: Formula,
    level: u32,
    x: &[(f64, Option<f64>)],
    y: (f64, Option<f64>),
    yb: &Value,
) -> Option<Option<Out<Value>>> {
    if m.meter.is_some() || x.len() > 2 || !super::tape::forward_level_running(m, level) {
        return None;
    }
    let lift = |(p, t): (f64, Option<f64>)| Lift { p: X64::R(p), t: t.map(X64::R) };
    let yb = match yb {
        Value::Active(a) if a.tape == level => Lift { p: X64::of(&a.value)?, t: Some(X64::of(&a.tangent)?) },
        Value::Active(_) => return None,
        _ => Lift { p: X64::of(yb)?, t: None },
    };
    if let Some(yb) = yb.l1() {
        // (a sensitivity of doubles: `cotangent_duals_unboxed`, boxed)
        let o = cotangent_duals_unboxed(m, f, level, x, y, (yb.p, yb.t))?;
        let value = |(p, t)| L1 { p, t }.value(Some(level));
        return Some(Some(match o {
            Out::One(a) => Out::One(value(a)),
            Out::Two(a, b) => Out::Two(value(a), value(b)),
        }));
    }
    let mut ls = [LIFT_ZERO; 2];
    for (l, v) in ls.iter_mut().zip(x) {
        *l = lift(*v);
    }
    let o = vjp_num::<Lift>(m, f, &ls[..x.len()], Some(&lift(y)), &yb).ok()?;
    Some(o.map(|o| match o {
        Out::One(a) => Out::One(unlift(a, Some(level))),
        Out::Two(a, b) => Out::Two(unlift(a, Some(level)), unlift(b, Some(level))),
    }))
}

/// [`cotangent_duals`] of a sensitivity `yb` that is a double `(v, None)` or a
/// real of forward level `level` made of doubles `(v, Some(t))`, its parts as
/// such: the same numbers (`L1` computes as `Lift` does), unboxed. `None` where
/// that does not apply.
#[inline]
pub(super) fn cotangent_duals_unboxed(
    m: &mut Machine,
    f: Formula,
    level: u32,
    x: &[(f64, Option<f64>)],
    y: (f64, Option<f64>),
    yb: (f64, Option<f64>),
) -> Option<Out<(f64, Option<f64>)>> {
    if m.meter.is_some() || x.len() > 2 || !super::tape::forward_level_running(m, level) {
        return None;
    }
    let l1 = |(p, t): (f64, Option<f64>)| L1 { p, t };
    let mut ls = [L1::int(0); 2];
    for (l, v) in ls.iter_mut().zip(x) {
        *l = l1(*v);
    }
    Some(match vjp_num::<L1>(m, f, &ls[..x.len()], Some(&l1(y)), &l1(yb)).ok()?? {
        Out::One(a) => Out::One((a.p, a.t)),
        Out::Two(a, b) => Out::Two((a.p, a.t), (b.p, b.t)),
    })
}

/// The tangent rule of scalar formula `f` for argument `x`, result `y` and
/// argument tangent `d` (for `ad::tape`'s forward levels): as the forward
/// version computes it, on doubles when every number is one and nothing is metered.
pub(super) fn tangent_rule(
    m: &mut Machine,
    f: Formula,
    x: &[Value],
    y: &Value,
    d: &[Value],
) -> Result<Value> {
    if let (Some((xs, n)), Value::Real(y), Some((ds, _)), None) = (doubles(x), y, doubles(d), &m.meter) {
        return Ok(Value::Real(jvp_num::<f64>(m, f, &xs[..n], y, &ds[..n])?));
    }
    // (reals of an enclosing forward level: forward over forward)
    let n = x.len();
    if n <= 2 && d.len() == n && !matches!(f, Formula::Zero | Formula::Struct(_)) {
        let mut vs = [y; 5];
        for (v, a) in vs.iter_mut().zip(x.iter().chain(std::iter::once(y)).chain(d)) {
            *v = a;
        }
        let mut ls = [LIFT_ZERO; 5];
        if let Some(level) = lift_all(m, &vs[..2 * n + 1], &mut ls) {
            if let Ok(dy) = jvp_num::<Lift>(m, f, &ls[..n], &ls[n], &ls[n + 1..2 * n + 1]) {
                return Ok(unlift(dy, level));
            }
        }
        // (reals of an enclosing reverse level: reverse over forward)
        let mut rs = [RV_ZERO; 5];
        if let Some(level) = rev_all(m, &vs[..2 * n + 1], &mut rs) {
            if let Some(dy) = rev_rule(m, &rs[..2 * n + 1], |m| {
                jvp_num::<Rv>(m, f, &rs[..n], &rs[n], &rs[n + 1..2 * n + 1])
            }) {
                return Ok(unrev(dy, level));
            }
        }
    }
    jvp_num::<Value>(m, f, x, y, d)
}

/// [`tangent_rule`] on doubles (nothing metered): `None` if it fails.
#[inline]
pub(super) fn tangent_doubles(m: &mut Machine, f: Formula, x: &[f64], y: f64, d: &[f64]) -> Option<f64> {
    jvp_num::<f64>(m, f, x, &y, d).ok()
}

/// One or two reals, unboxed (and how many).
#[inline]
fn doubles(vs: &[Value]) -> Option<([f64; 2], usize)> {
    match vs {
        [Value::Real(a)] => Some(([*a, 0.0], 1)),
        [Value::Real(a), Value::Real(b)] => Some(([*a, *b], 2)),
        _ => None,
    }
}

/// `+`, for `ad::tape`'s sums of sensitivities on an enclosing tape.
pub(super) fn add_id() -> PrimId {
    prim_of(Formula::Add).expect("the primitive +")
}

/// A primitive applied without counting it (a sum that `plus` would do).
pub(super) fn apply_unmetered(m: &mut Machine, p: PrimId, args: &[Value]) -> Result<Value> {
    (prims::prim(p).imp)(m, args)
}

/// Calls primitive `p` on numbers, counted by the meters as derivative work.
pub(super) fn apply(m: &mut Machine, p: PrimId, args: &[Value]) -> Result<Value> {
    if m.meter.is_some() {
        let class = prims::prim(p).class;
        if class != Class::Other {
            if let Some(c) = &mut m.meter {
                c[p as usize] += 1;
            }
            if let Some(d) = &mut m.meter_derivative {
                d[p as usize] += 1;
            }
        }
    }
    (prims::prim(p).imp)(m, args)
}

/// The operations the rules compute with.
struct Ops {
    add: Formula,
    sub: Formula,
    mul: Formula,
    div: Formula,
    sin: Formula,
    cos: Formula,
}

const RULE_OPS: Ops = Ops {
    add: Formula::Add,
    sub: Formula::Sub,
    mul: Formula::Mul,
    div: Formula::Div,
    sin: Formula::Sin,
    cos: Formula::Cos,
};

/// The primitive of scalar formula `f` (not `Zero`, which many share, nor a
/// structural one).
fn prim_of(f: Formula) -> Option<PrimId> {
    static TABLE: std::sync::OnceLock<Vec<(Formula, PrimId)>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let scalar = |p| formula_of(p).filter(|f| !matches!(f, Formula::Zero | Formula::Struct(_)));
        (0..prims::prims().len() as PrimId).filter_map(|p| Some((scalar(p)?, p))).collect()
    });
    t.iter().find(|(g, _)| *g == f).map(|&(_, p)| p)
}

/// The tangent rule, as in the primitive table (same operations, same order).
fn jvp(m: &mut Machine, f: Formula, x: &[Value], y: &Value, d: &[Value]) -> Result<Value> {
    match f {
        // (zero y)
        Formula::Zero => super::ops::zero(m, y),
        Formula::Struct(op) => struct_jvp(m, op, &d[0]),
        _ => jvp_num(m, f, x, y, d),
    }
}

/// The tangent rule of a scalar primitive, on numbers or dual numbers.
#[inline(always)]
pub(super) fn jvp_num<N: Num>(m: &mut Machine, f: Formula, x: &[N], y: &N, d: &[N]) -> Result<N> {
    let i = &RULE_OPS;
    let op = |m: &mut Machine, f: Formula, a: &N, b: &N| N::op(m, f, &[a.clone(), b.clone()]);
    match f {
        // (+ d1 d2), (- d1 d2)
        Formula::Add => op(m, i.add, &d[0], &d[1]),
        Formula::Sub => op(m, i.sub, &d[0], &d[1]),
        // (+ (* d1 x2) (* x1 d2))
        Formula::Mul => {
            let a = op(m, i.mul, &d[0], &x[1])?;
            let b = op(m, i.mul, &x[0], &d[1])?;
            op(m, i.add, &a, &b)
        }
        // (/ (- d1 (* y d2)) x2)
        Formula::Div => {
            let a = op(m, i.mul, y, &d[1])?;
            let b = op(m, i.sub, &d[0], &a)?;
            op(m, i.div, &b, &x[1])
        }
        _ => jvp_num_other(m, f, x, y, d),
    }
}

/// [`jvp_num`]'s rules past `+ - * /`, in a call: inlined where `jvp_num` is
/// (as in a loop over directions, `tape::sweep_directions`), a sine or
/// cosine that no rule of the node reads may be computed for each node.
#[inline(never)]
fn jvp_num_other<N: Num>(m: &mut Machine, f: Formula, x: &[N], y: &N, d: &[N]) -> Result<N> {
    let i = &RULE_OPS;
    let op = |m: &mut Machine, f: Formula, a: &N, b: &N| N::op(m, f, &[a.clone(), b.clone()]);
    let two = N::int(2);
    let zero = N::int(0);
    match f {
        // (/ dx (* 2 y))
        Formula::Sqrt => {
            let a = op(m, i.mul, &two, y)?;
            op(m, i.div, &d[0], &a)
        }
        // (* dx y)
        Formula::Exp => op(m, i.mul, &d[0], y),
        // (/ dx x)
        Formula::Log => op(m, i.div, &d[0], &x[0]),
        // (* dx (cos x))
        Formula::Sin => {
            let c = N::op(m, i.cos, &x[..1])?;
            op(m, i.mul, &d[0], &c)
        }
        // (- 0 (* dx (sin x)))
        Formula::Cos => {
            let s = N::op(m, i.sin, &x[..1])?;
            let a = op(m, i.mul, &d[0], &s)?;
            op(m, i.sub, &zero, &a)
        }
        // (/ (- (* x2 d1) (* x1 d2)) (+ (* x1 x1) (* x2 x2)))
        Formula::Atan => {
            let a = op(m, i.mul, &x[1], &d[0])?;
            let b = op(m, i.mul, &x[0], &d[1])?;
            let num = op(m, i.sub, &a, &b)?;
            let c = op(m, i.mul, &x[0], &x[0])?;
            let e = op(m, i.mul, &x[1], &x[1])?;
            let den = op(m, i.add, &c, &e)?;
            op(m, i.div, &num, &den)
        }
        // (`jvp_num`'s)
        Formula::Add | Formula::Sub | Formula::Mul | Formula::Div => jvp_num(m, f, x, y, d),
        Formula::Zero | Formula::Struct(_) => {
            Err(crate::error::Error::runtime(None, "internal error: not a scalar rule"))
        }
    }
}

/// Numbers the cotangent rules compute with: plain numbers, or forward bundles
/// of them (for the forward transform of a backpropagator), whose operations are
/// the primitives' forward versions.
pub(super) trait Num: Sized + Clone {
    /// The primitive of scalar formula `f` on `args`.
    fn op(m: &mut Machine, f: Formula, args: &[Self]) -> Result<Self>;
    /// An exact integer constant of the rule's source.
    fn int(i: i64) -> Self;
}

impl Num for Value {
    fn op(m: &mut Machine, f: Formula, args: &[Value]) -> Result<Value> {
        apply(m, prim_of(f).ok_or_else(not_scalar)?, args)
    }
    fn int(i: i64) -> Value {
        Value::Int(i)
    }
}

/// A forward bundle of numbers: primal and (untagged) tangent.
#[derive(Clone)]
pub(super) struct Dual {
    pub(super) p: Value,
    pub(super) t: Value,
}

impl Num for Dual {
    /// The primitive's forward version (as `Native::F` runs it).
    fn op(m: &mut Machine, f: Formula, args: &[Dual]) -> Result<Dual> {
        let p = prim_of(f).ok_or_else(not_scalar)?;
        let xs: Two<Value> = args.iter().map(|a| a.p.clone()).collect();
        let ds: Two<Value> = args.iter().map(|a| a.t.clone()).collect();
        let y = apply(m, p, &xs)?;
        let dy = jvp(m, f, &xs, &y, &ds)?;
        Ok(Dual { p: y, t: dy })
    }
    /// A constant lifted by the forward transform: a zero tangent.
    fn int(i: i64) -> Dual {
        Dual { p: Value::Int(i), t: Value::Int(0) }
    }
}

/// The arguments of a scalar primitive's forward version, when they are its
/// one or two arguments, each a forward bundle of an exact integer or a double
/// with a perturbed one, and nothing is metered: their primals and tangents
/// (as [`X64`]) and their number.
fn x64_duals(
    m: &Machine,
    p: PrimId,
    f: Formula,
    base: usize,
    nargs: usize,
) -> Option<([X64; 2], [X64; 2], usize)> {
    if m.meter.is_some()
        || matches!(f, Formula::Zero | Formula::Struct(_))
        || nargs != prims::prim(p).arity as usize
    {
        return None;
    }
    let (mut xs, mut ds) = ([X64::I(0); 2], [X64::I(0); 2]);
    for (i, a) in m.stack.get(base..base + nargs)?.iter().enumerate() {
        let Value::Bundle(b) = a else { return None };
        (xs[i], ds[i]) = (X64::of(&b.0)?, X64::of(&b.1.peel_if(Tag::Perturbation)?)?);
    }
    Some((xs, ds, nargs))
}

/// The forward version of a numeric predicate (`<`, `zero?`...) on arguments
/// passed separately, each a bundle of numbers: the primitive's boolean, as
/// the general path computes it (`apply`, then the zero tangent of a boolean);
/// `None` for anything else.
fn predicate_f(m: &mut Machine, p: PrimId, base: usize, nargs: usize) -> Result<Option<bool>> {
    if nargs != prims::prim(p).arity as usize || nargs > 2 {
        return Ok(None);
    }
    let mut xs = [Value::Nil, Value::Nil];
    for (i, a) in m.stack[base..base + nargs].iter().enumerate() {
        let Value::Bundle(b) = a else { return Ok(None) };
        match b.1.peel_if(Tag::Perturbation) {
            Some(d) if b.0.is_number() && d.is_number() => xs[i] = b.0.clone(),
            _ => return Ok(None),
        }
    }
    Ok(match apply(m, p, &xs[..nargs])? {
        Value::Bool(b) => Some(b),
        _ => None,
    })
}

/// The doubles of some [`X64`] numbers, if they all are doubles.
fn all_real(xs: &[X64]) -> Option<[f64; 2]> {
    let mut r = [0.0; 2];
    for (i, x) in xs.iter().enumerate() {
        let X64::R(x) = x else { return None };
        r[i] = *x;
    }
    Some(r)
}

/// `(bundle b (perturb (zero b)))` for a boolean `b` (what the forward
/// versions of predicates return): one shared value for each.
fn bool_bundle(b: bool) -> Value {
    thread_local! {
        static BUNDLES: [Value; 2] = [false, true]
            .map(|b| Value::bundle(Value::Bool(b), Value::tagged(Tag::Perturbation, Value::Bool(b))));
    }
    BUNDLES.with(|v| v[b as usize].clone())
}

/// Primitive `p` on doubles: what its implementation computes on reals.
fn prim_f64(p: PrimId, a: &[f64]) -> Option<f64> {
    formula_f64(formula_of(p)?, a)
}

/// [`prim_f64`] for the primitive whose formula is `f`.
#[inline]
pub(super) fn formula_f64(f: Formula, a: &[f64]) -> Option<f64> {
    Some(match (f, a) {
        (Formula::Add, [x, y]) => x + y,
        (Formula::Sub, [x, y]) => x - y,
        (Formula::Mul, [x, y]) => x * y,
        (Formula::Div, [x, y]) => x / y,
        (Formula::Sqrt, [x]) => x.sqrt(),
        (Formula::Exp, [x]) => x.exp(),
        (Formula::Log, [x]) => x.ln(),
        (Formula::Sin, [x]) => x.sin(),
        (Formula::Cos, [x]) => x.cos(),
        (Formula::Atan, [y, x]) => y.atan2(*x),
        _ => return None,
    })
}

fn not_scalar() -> crate::error::Error {
    crate::error::Error::runtime(None, "internal error: not a scalar rule")
}

/// The rules on doubles: when every number a rule sees is a real (and nothing
/// is metered), the same operations in the same order, without boxing. An
/// exact constant of a rule meets only reals there, and the primitives
/// convert it to a double exactly as `as f64` does, so the results are the
/// same bits.
impl Num for f64 {
    #[inline(always)]
    fn op(_: &mut Machine, f: Formula, args: &[f64]) -> Result<f64> {
        formula_f64(f, args).ok_or_else(not_scalar)
    }
    fn int(i: i64) -> f64 {
        i as f64
    }
}

/// A forward bundle of unboxed numbers (as [`Dual`]): `f64` ([`D64`]) or
/// [`X64`] ([`DX`]); its operations are the primitives' forward versions.
#[derive(Clone, Copy)]
struct Fwd<N> {
    p: N,
    t: N,
}

/// A forward bundle of doubles (as [`Dual`] of reals).
type D64 = Fwd<f64>;

impl<N: Num + Copy> Num for Fwd<N> {
    fn op(m: &mut Machine, f: Formula, args: &[Fwd<N>]) -> Result<Fwd<N>> {
        let n = args.len();
        if n > 2 {
            return Err(not_scalar());
        }
        let (mut xs, mut ds) = ([N::int(0); 2], [N::int(0); 2]);
        for (i, a) in args.iter().enumerate() {
            (xs[i], ds[i]) = (a.p, a.t);
        }
        let y = N::op(m, f, &xs[..n])?;
        let dy = jvp_num(m, f, &xs[..n], &y, &ds[..n])?;
        Ok(Fwd { p: y, t: dy })
    }
    /// A constant lifted by the forward transform: a zero tangent.
    fn int(i: i64) -> Fwd<N> {
        Fwd { p: N::int(i), t: N::int(0) }
    }
}

/// The doubles of some dual numbers, if all their parts are reals and nothing
/// is metered.
fn dual_reals(m: &Machine, ds: &[Dual]) -> Option<Two<D64>> {
    if m.meter.is_some() {
        return None;
    }
    ds.iter()
        .map(|d| match (&d.p, &d.t) {
            (Value::Real(p), Value::Real(t)) => Some(D64 { p: *p, t: *t }),
            _ => None,
        })
        .collect()
}

fn dual_of_d64(d: D64) -> Dual {
    Dual { p: Value::Real(d.p), t: Value::Real(d.t) }
}

/// A number the rules compute with when exact integers meet reals (the
/// exact seed 1 of a gradient, passed through the sensitivities of sums):
/// an exact integer, or a double.
#[derive(Clone, Copy)]
enum X64 {
    I(i64),
    R(f64),
}

impl X64 {
    fn of(v: &Value) -> Option<X64> {
        match v {
            Value::Int(i) => Some(X64::I(*i)),
            Value::Real(x) => Some(X64::R(*x)),
            _ => None,
        }
    }

    fn value(self) -> Value {
        match self {
            X64::I(i) => Value::Int(i),
            X64::R(x) => Value::Real(x),
        }
    }

    /// Its zero, as `tape::zero_of` gives it (a constant's tangent): exact for
    /// an exact integer.
    fn zero(self) -> X64 {
        match self {
            X64::I(_) => X64::I(0),
            X64::R(_) => X64::R(0.0),
        }
    }

    fn f64(self) -> f64 {
        match self {
            X64::I(i) => i as f64,
            X64::R(x) => x,
        }
    }

    /// What the primitive computes (`num::arith`): exact integers stay exact
    /// under `+`, `-` and `*` (unless that overflows), and an exact integer
    /// with a real is converted to a double. Anything else (integer division,
    /// overflow, a function of an exact integer, a comparison) is not done
    /// here: `None`, for which the caller takes the general path.
    #[inline]
    fn try_op(p: PrimId, args: &[X64]) -> Option<X64> {
        Self::try_formula(formula_of(p)?, args)
    }

    /// [`X64::try_op`] for the primitive of formula `f`.
    #[inline]
    fn try_formula(f: Formula, args: &[X64]) -> Option<X64> {
        match (f, args) {
            (Formula::Add, [X64::I(a), X64::I(b)]) => a.checked_add(*b).map(X64::I),
            (Formula::Sub, [X64::I(a), X64::I(b)]) => a.checked_sub(*b).map(X64::I),
            (Formula::Mul, [X64::I(a), X64::I(b)]) => a.checked_mul(*b).map(X64::I),
            (Formula::Div, [X64::I(_), X64::I(_)]) => None,
            (Formula::Add | Formula::Sub | Formula::Mul | Formula::Div, [a, b]) => {
                formula_f64(f, &[a.f64(), b.f64()]).map(X64::R)
            }
            (_, [X64::R(a)]) => formula_f64(f, &[*a]).map(X64::R),
            (_, [X64::R(a), X64::R(b)]) => formula_f64(f, &[*a, *b]).map(X64::R),
            _ => None,
        }
    }
}

impl Num for X64 {
    /// [`X64::try_op`], failing where it gives `None` (the caller then takes
    /// the general path).
    fn op(_: &mut Machine, f: Formula, args: &[X64]) -> Result<X64> {
        X64::try_formula(f, args).ok_or_else(not_scalar)
    }
    fn int(i: i64) -> X64 {
        X64::I(i)
    }
}

/// A forward bundle of [`X64`] numbers.
type DX = Fwd<X64>;

/// A number of `ad::tape`'s arithmetic on an active real's value: an exact
/// integer or double ([`X64`]), plain (`t` none: a constant) or a real of one
/// forward level (`Value::Active` with that tangent). Its operations are what
/// the primitives do with such values, computed unboxed: plain numbers by
/// `num::arith`'s rules, a level's reals by the tape's `record` (the value as
/// the primitive computes it, the tangent by the tangent rule, a constant's
/// tangent its zero), so a rule run on them gives the same numbers, and the
/// same reals of the same level, as on the values, without the primitives'
/// dispatch and a boxed real per intermediate result.
#[derive(Clone, Copy)]
struct Lift {
    p: X64,
    t: Option<X64>,
}

/// A placeholder (an exact, plain 0).
const LIFT_ZERO: Lift = Lift { p: X64::I(0), t: None };

impl Num for Lift {
    fn op(m: &mut Machine, f: Formula, args: &[Lift]) -> Result<Lift> {
        Lift::formula_op(m, f, args)
    }
    fn int(i: i64) -> Lift {
        Lift { p: X64::I(i), t: None }
    }
}

impl Lift {
    /// The primitive of scalar formula `f` on `args`.
    fn formula_op(m: &mut Machine, f: Formula, args: &[Lift]) -> Result<Lift> {
        let n = args.len();
        if n > 2 {
            return Err(not_scalar());
        }
        let (mut xs, mut ds) = ([X64::I(0); 2], [X64::I(0); 2]);
        for (i, a) in args.iter().enumerate() {
            xs[i] = a.p;
            // (a constant's tangent: its zero)
            ds[i] = a.t.unwrap_or(a.p.zero());
        }
        // (all doubles: as `X64` computes them, without its dispatch per operation)
        let (mut x, mut d) = ([0.0; 2], [0.0; 2]);
        let mut doubles = true;
        for i in 0..n {
            match (xs[i], ds[i]) {
                (X64::R(a), X64::R(b)) => (x[i], d[i]) = (a, b),
                _ => doubles = false,
            }
        }
        if doubles {
            let y = formula_f64(f, &x[..n]).ok_or_else(not_scalar)?;
            if args.iter().all(|a| a.t.is_none()) {
                return Ok(Lift { p: X64::R(y), t: None });
            }
            // (the arithmetic rules' tangents inline: `jvp_num`'s operations, in its order)
            let dy = match (f, n) {
                (Formula::Add, 2) => d[0] + d[1],
                (Formula::Sub, 2) => d[0] - d[1],
                (Formula::Mul, 2) => d[0] * x[1] + x[0] * d[1],
                (Formula::Div, 2) => (d[0] - y * d[1]) / x[1],
                _ => jvp_num::<f64>(m, f, &x[..n], &y, &d[..n])?,
            };
            return Ok(Lift { p: X64::R(y), t: Some(X64::R(dy)) });
        }
        let y = X64::try_formula(f, &xs[..n]).ok_or_else(not_scalar)?;
        if args.iter().all(|a| a.t.is_none()) {
            return Ok(Lift { p: y, t: None });
        }
        let dy = jvp_num(m, f, &xs[..n], &y, &ds[..n])?;
        Ok(Lift { p: y, t: Some(dy) })
    }
}

/// The forward level and [`Lift`] numbers of some values: `None` unless each
/// is an exact integer or double, or a real of one running forward level whose
/// value and tangent are, and nothing is metered (the primitives count what
/// they compute).
fn lift_all(m: &Machine, vs: &[&Value], out: &mut [Lift]) -> Option<Option<u32>> {
    if m.meter.is_some() || vs.len() > out.len() {
        return None;
    }
    let mut level = None;
    for (o, v) in out.iter_mut().zip(vs) {
        *o = match v {
            Value::Active(a) => {
                match level {
                    None if super::tape::forward_level_running(m, a.tape) => level = Some(a.tape),
                    Some(id) if id == a.tape => {}
                    _ => return None,
                }
                Lift { p: X64::of(&a.value)?, t: Some(X64::of(&a.tangent)?) }
            }
            _ => Lift { p: X64::of(v)?, t: None },
        };
    }
    Some(level)
}

/// A number of `ad::tape`'s arithmetic on a tape's reals: an exact integer or
/// double ([`X64`]), plain (`node` none: a constant) or a real of one running
/// reverse level (the one at index `k` of the running levels, node `node` of
/// its tape). Its operations record on that tape what the tape's `record`
/// records for such values (and compute the value as the primitive does), so a
/// rule run on them gives the same numbers and the same tape as on the values,
/// without the primitives' dispatch and a boxed real per intermediate result.
#[derive(Clone, Copy)]
pub(super) struct Rv {
    v: X64,
    node: u32,
    k: u32,
}

/// No tape node: a constant.
const NO_NODE: u32 = super::tape::NONE;

/// A placeholder (an exact, plain 0).
const RV_ZERO: Rv = Rv { v: X64::I(0), node: NO_NODE, k: 0 };

impl Num for Rv {
    fn op(m: &mut Machine, f: Formula, args: &[Rv]) -> Result<Rv> {
        Rv::formula_op(m, f, args)
    }
    fn int(i: i64) -> Rv {
        Rv { v: X64::I(i), node: NO_NODE, k: 0 }
    }
}

impl Rv {
    /// `v` as a number of the reverse level `level` (its id and index among
    /// the running levels): an exact integer or double, or a real of that
    /// level whose value is one; `None` otherwise.
    pub(super) fn of(m: &Machine, v: &Value, level: (u32, u32)) -> Option<Rv> {
        Rv::of_level(m, v, &mut Some(level))
    }

    /// `v` as a number of the reverse level `level`, or, where that is none
    /// yet and `v` is a real of a running reverse level, of that one (set as
    /// `level`: [`one_reverse_level`]).
    #[inline(always)]
    fn of_level(m: &Machine, v: &Value, level: &mut Option<(u32, u32)>) -> Option<Rv> {
        Some(match v {
            Value::Active(a) => {
                Rv { v: X64::of(&a.value)?, node: a.node, k: one_reverse_level(m, level, a.tape)? }
            }
            Value::TapeReal(t, node, p) => {
                Rv { v: X64::R(*p), node: *node, k: one_reverse_level(m, level, *t as u32)? }
            }
            _ => Rv { v: X64::of(v)?, node: NO_NODE, k: 0 },
        })
    }

    /// A plain number: a double, or (`exact`) the exact integer it holds.
    pub(super) fn plain(p: f64, exact: bool) -> Rv {
        Rv { v: if exact { X64::I(p as i64) } else { X64::R(p) }, node: NO_NODE, k: 0 }
    }

    /// The zero of its value, plain: a constant's tangent (as
    /// [`record_forward_rev`] gives it).
    pub(super) fn zero(self) -> Rv {
        Rv { v: self.v.zero(), node: NO_NODE, k: 0 }
    }

    /// As a value: a real of reverse level `id` if it has a node.
    pub(super) fn value(self, id: u32) -> Value {
        unrev(self, Some(id))
    }

    /// As an [`R1`], where it is one: a double, or an exact integer of at
    /// most 2^26 in magnitude.
    fn r1(self) -> Option<R1> {
        let v = match self.v {
            X64::R(x) => x,
            X64::I(i) if i.unsigned_abs() <= super::tape::EXACT_AS_DOUBLE as u64 => i as f64,
            X64::I(_) => return None,
        };
        Some(R1 { v, exact: matches!(self.v, X64::I(_)), node: self.node, k: self.k })
    }

    /// The tangent rule of scalar formula `f` (operands `x`, result `y`,
    /// their tangents `d`) as [`record_forward_rev`] runs it: on doubles
    /// ([`R1`], as [`forward_rev_doubles`]) where each number is one and the
    /// operation itself is done on them, else on `Rv`s; recorded on the tape
    /// of the one reverse level among them. An error, with nothing recorded,
    /// where neither does the rule.
    pub(super) fn jvp(m: &mut Machine, f: Formula, x: &[Rv], y: Rv, d: &[Rv]) -> Result<Rv> {
        let n = x.len();
        let k = x.iter().chain(d).chain([&y]).find(|a| a.node != NO_NODE).map(|a| a.k as usize);
        let (mut xs, mut ds) = ([R1::int(0); 2], [R1::int(0); 2]);
        let doubles = (0..n).all(|i| match (x[i].r1(), d[i].r1()) {
            (Some(a), Some(b)) => {
                (xs[i], ds[i]) = (a, b);
                true
            }
            _ => false,
        });
        if let (true, Some(y1)) = (doubles && R1::does(f, &xs[..n]), y.r1()) {
            if let Some(dy) = undone_on_failure(m, k, |m| jvp_num::<R1>(m, f, &xs[..n], &y1, &ds[..n])) {
                let v = if dy.exact { X64::I(dy.v as i64) } else { X64::R(dy.v) };
                return Ok(Rv { v, node: dy.node, k: dy.k });
            }
        }
        undone_on_failure(m, k, |m| jvp_num::<Rv>(m, f, x, &y, d)).ok_or_else(not_scalar)
    }

    /// The primitive of scalar formula `f` on `args` (recorded if one is a tape's real).
    fn formula_op(m: &mut Machine, f: Formula, args: &[Rv]) -> Result<Rv> {
        let n = args.len();
        if n > 2 || matches!(f, Formula::Zero | Formula::Struct(_)) {
            return Err(not_scalar());
        }
        let mut xs = [X64::I(0); 2];
        for (x, a) in xs.iter_mut().zip(args) {
            *x = a.v;
        }
        let y = X64::try_formula(f, &xs[..n]).ok_or_else(not_scalar)?;
        let Some(k) = args.iter().find(|a| a.node != NO_NODE).map(|a| a.k) else {
            return Ok(Rv { v: y, node: NO_NODE, k: 0 });
        };
        let parents = [args[0].node, if n == 2 { args[1].node } else { NO_NODE }];
        let x = [xs[0].value(), if n == 2 { xs[1].value() } else { Value::Nil }];
        let node = super::tape::push_op(m, k as usize, f, n, parents, x, &y.value());
        Ok(Rv { v: y, node, k })
    }
}

/// The reverse level and [`Rv`] numbers of some values: `None` unless each is
/// an exact integer or double, or a real of one running reverse level whose
/// value is one, and nothing is metered.
fn rev_all(m: &Machine, vs: &[&Value], out: &mut [Rv]) -> Option<Option<u32>> {
    if m.meter.is_some() || vs.len() > out.len() {
        return None;
    }
    let mut level: Option<(u32, u32)> = None;
    for (o, v) in out.iter_mut().zip(vs) {
        *o = Rv::of_level(m, v, &mut level)?;
    }
    Some(level.map(|(id, _)| id))
}

/// The index among the running levels of reverse level `tape`, if it runs
/// and is `level`'s (the level met first, with its index; set by the first).
fn one_reverse_level(m: &Machine, level: &mut Option<(u32, u32)>, tape: u32) -> Option<u32> {
    match *level {
        None => {
            let k = super::tape::reverse_level(m, tape)? as u32;
            *level = Some((tape, k));
            Some(k)
        }
        Some((id, k)) if id == tape => Some(k),
        _ => None,
    }
}

/// A rule run on [`Rv`] numbers (`args`), or `None` if it fails (an
/// operation those numbers do not do): then the tape holds none of its operations.
fn rev_rule<T>(m: &mut Machine, args: &[Rv], rule: impl FnOnce(&mut Machine) -> Result<T>) -> Option<T> {
    let k = args.iter().find(|a| a.node != NO_NODE).map(|a| a.k as usize);
    undone_on_failure(m, k, rule)
}

/// `rule`, or `None` if it fails: then the tape at index `k` of the running
/// levels (if any) holds none of what it recorded.
fn undone_on_failure<T>(
    m: &mut Machine,
    k: Option<usize>,
    rule: impl FnOnce(&mut Machine) -> Result<T>,
) -> Option<T> {
    let len = k.map(|k| super::tape::level_len(m, k));
    match rule(m) {
        Ok(r) => Some(r),
        Err(_) => {
            if let (Some(k), Some(len)) = (k, len) {
                super::tape::truncate_level(m, k, len);
            }
            None
        }
    }
}

/// An [`Rv`] number as a value (a real of reverse level `level` if it has a node).
fn unrev(r: Rv, level: Option<u32>) -> Value {
    match level {
        Some(id) if r.node != NO_NODE => super::tape::reverse_real(id, r.node, r.v.value()),
        _ => r.v.value(),
    }
}

/// A [`Lift`] number as a value (a real of forward level `level` if it has a tangent).
fn unlift(l: Lift, level: Option<u32>) -> Value {
    match (l.t, level) {
        (Some(t), Some(id)) => super::tape::forward_real(id, l.p.value(), t.value()),
        _ => l.p.value(),
    }
}

/// Is scalar formula `f` of one or two `args` an operation on forward level `id`
/// (a real of it among them), and nothing metered? ([`record_forward_lifted`],
/// [`record_forward_rev`].)
fn forward_op(m: &Machine, id: u32, f: Formula, args: &[Value]) -> bool {
    (1..=2).contains(&args.len())
        && m.meter.is_none()
        && !matches!(f, Formula::Zero | Formula::Struct(_))
        && args.iter().any(|a| matches!(a, Value::Active(r) if r.tape == id))
}

/// The parts of the operands of an operation on forward level `id`, in order
/// value, tangent, value, tangent: a real of the level's value and tangent; a
/// constant itself twice (its tangent is its zero: bit `i` of the second
/// result marks operand `i` a constant).
fn operand_parts(id: u32, args: &[Value]) -> ([&Value; 4], u8) {
    let (mut parts, mut constants) = ([&Value::Nil; 4], 0u8);
    for (i, a) in args.iter().enumerate().take(2) {
        (parts[2 * i], parts[2 * i + 1]) = match a {
            Value::Active(r) if r.tape == id => (&r.value, &r.tangent),
            _ => {
                constants |= 1 << i;
                (a, a)
            }
        };
    }
    (parts, constants)
}

/// The operands' values and tangents from [`operand_parts`]' layout (`parts`:
/// value, tangent, value, tangent, as numbers of some kind), a constant's
/// tangent (bit `i` of `constants`) being `zero` of its value.
fn values_and_tangents<T: Copy>(
    n: usize,
    parts: &[T; 4],
    constants: u8,
    zero: impl Fn(T) -> T,
) -> ([T; 2], [T; 2]) {
    let (mut xs, mut ds) = ([parts[0]; 2], [parts[1]; 2]);
    for i in 0..n {
        xs[i] = parts[2 * i];
        ds[i] = if constants & (1 << i) != 0 { zero(xs[i]) } else { parts[2 * i + 1] };
    }
    (xs, ds)
}

/// `ad::tape::record` of scalar formula `f` on forward level `id` (the
/// innermost) where its reals' values and tangents, and the constants, are
/// numbers or reals of one enclosing forward level (forward over forward): the
/// value as [`lifted_op`] computes it and the tangent as [`tangent_rule`]
/// does (a constant's tangent its zero), without their checks per value.
/// `None` where that does not apply (nothing done).
#[inline(always)]
pub(super) fn record_forward_lifted(m: &mut Machine, id: u32, f: Formula, args: &[Value]) -> Option<Value> {
    // (a tape's real among the numbers, reverse over forward, which none of
    // the cases below takes: `record_forward_rev` does)
    if !forward_op(m, id, f, args) || args.iter().any(|a| super::tape::tape_part(id, a)) {
        return None;
    }
    // (doubles first: that instance is the smaller and faster; exact integers
    // occur at a gradient's seeds and constants)
    if let Some(y) = forward_lifted_doubles::<false>(m, id, f, args) {
        return Some(y);
    }
    if args.iter().any(has_exact_part) {
        if let Some(y) = forward_lifted_exact(m, id, f, args) {
            return Some(y);
        }
    }
    let n = args.len();
    let (parts, constants) = operand_parts(id, args);
    let mut ls = [LIFT_ZERO; 4];
    let level = lift_all(m, &parts[..2 * n], &mut ls)?;
    let (xs, ds) = values_and_tangents(n, &ls, constants, |x| Lift { p: x.p.zero(), t: None });
    let y = Lift::formula_op(m, f, &xs[..n]).ok()?;
    let dy = jvp_num::<Lift>(m, f, &xs[..n], &y, &ds[..n]).ok()?;
    Some(super::tape::forward_real(id, unlift(y, level), unlift(dy, level)))
}

/// [`record_forward_lifted`] on forward level `id` while levels inside it
/// run (forward mode nested three deep: `ad::tape::record`), out of line
/// (inlined into `record` a second time, it was no longer inlined at its
/// first place, the innermost level's, which nested forward mode runs most).
#[inline(never)]
pub(super) fn record_forward_lifted_enclosing(
    m: &mut Machine,
    id: u32,
    f: Formula,
    args: &[Value],
) -> Option<Value> {
    record_forward_lifted(m, id, f, args)
}

/// [`record_forward_lifted`] one level deeper: forward mode nested three deep,
/// an operation of the innermost level `id` whose operands' values and
/// tangents are reals of an enclosing forward level made of reals of one
/// enclosing that (or doubles): computed as [`L2`]s, the operations the
/// levels' `record`s would do (the value by `L2`'s arithmetic, as the
/// enclosing level's `record_forward_lifted` computes it, the tangent by the
/// rule on `L2`s, each of its operations the same), unboxed. Doubles only (an
/// exact integer takes the general path). `None` where that does not apply.
pub(super) fn record_forward_lifted2(m: &mut Machine, id: u32, f: Formula, args: &[Value]) -> Option<Value> {
    if !forward_op(m, id, f, args) {
        return None;
    }
    // (the two enclosing levels: those of a part made of another level's reals)
    let two = |v: &Value| match v {
        Value::Active(r) if r.node == NO_NODE => [&r.value, &r.tangent].into_iter().find_map(|q| match q {
            Value::Active(q) if q.node == NO_NODE => Some((r.tape, q.tape)),
            _ => None,
        }),
        _ => None,
    };
    let (hi, lo) = args.iter().find_map(|a| match a {
        Value::Active(r) if r.tape == id => two(&r.value).or_else(|| two(&r.tangent)),
        a => two(a),
    })?;
    if !(lo < hi && hi < id && m.tape.forward_running(hi) && m.tape.forward_running(lo)) {
        return None;
    }
    let n = args.len();
    let (mut xs, mut ds) = ([L2::int(0); 2], [L2::int(0); 2]);
    for (i, a) in args.iter().enumerate() {
        (xs[i], ds[i]) = match a {
            Value::Active(r) if r.tape == id => (L2::of(&r.value, hi, lo)?, L2::of(&r.tangent, hi, lo)?),
            // (a constant: its tangent is its zero, a double)
            c => (L2::of(c, hi, lo)?, L2::int(0)),
        };
    }
    let y = L2::op(m, f, &xs[..n]).ok()?;
    let dy = jvp_num::<L2>(m, f, &xs[..n], &y, &ds[..n]).ok()?;
    Some(super::tape::forward_real(id, y.value(hi, lo), dy.value(hi, lo)))
}

/// A number of [`record_forward_lifted2`]: a real of forward level `hi` whose
/// value and tangent are [`L1`]s of level `lo` (or, `t` none, a plain `L1`),
/// its operations the primitives' forward versions on level `hi` as that
/// level's `record_forward_lifted` computes them (a constant's tangent a plain
/// zero).
#[derive(Clone, Copy)]
pub(super) struct L2 {
    p: L1,
    t: Option<L1>,
}

impl L2 {
    /// `v` as an `L2` of levels `hi` over `lo`: a double, a real of `lo` made
    /// of doubles, or a real of `hi` made of those.
    fn of(v: &Value, hi: u32, lo: u32) -> Option<L2> {
        let l1 = |v: &Value| match v {
            Value::Real(p) => Some(L1 { p: *p, t: None }),
            Value::Active(r) if r.tape == lo && r.node == NO_NODE => match (&r.value, &r.tangent) {
                (Value::Real(p), Value::Real(t)) => Some(L1 { p: *p, t: Some(*t) }),
                _ => None,
            },
            _ => None,
        };
        match v {
            Value::Active(r) if r.tape == hi && r.node == NO_NODE => {
                Some(L2 { p: l1(&r.value)?, t: Some(l1(&r.tangent)?) })
            }
            v => Some(L2 { p: l1(v)?, t: None }),
        }
    }

    /// As a value: a real of `hi` if it has a tangent, its parts reals of `lo`
    /// where they have one.
    fn value(self, hi: u32, lo: u32) -> Value {
        match self.t {
            Some(t) => super::tape::forward_real(hi, self.p.value(Some(lo)), t.value(Some(lo))),
            None => self.p.value(Some(lo)),
        }
    }
}

impl Num for L2 {
    fn op(m: &mut Machine, f: Formula, args: &[L2]) -> Result<L2> {
        let n = args.len();
        if n > 2 {
            return Err(not_scalar());
        }
        let (mut x, mut d, mut plain) = ([L1::int(0); 2], [L1::int(0); 2], true);
        for (i, a) in args.iter().enumerate() {
            x[i] = a.p;
            if let Some(t) = a.t {
                d[i] = t;
                plain = false;
            }
        }
        let y = L1::op(m, f, &x[..n])?;
        if plain {
            return Ok(L2 { p: y, t: None });
        }
        let dy = jvp_num::<L1>(m, f, &x[..n], &y, &d[..n])?;
        Ok(L2 { p: y, t: Some(dy) })
    }
    fn int(i: i64) -> L2 {
        L2 { p: L1::int(i), t: None }
    }
}

/// [`record_forward_lifted`] where every number is a double, or an exact
/// integer that meets only doubles: each operand a real of level `id` whose
/// value and tangent are such numbers or reals of one enclosing forward level
/// made of them, or a constant that is one of those (its tangent its zero):
/// computed as `L1`s, as `Lift` computes them (see `L1`, and
/// [`exact_meets_doubles`] for the integers: a gradient's exact seed 1, a
/// constant 0; only if `EXACT`). `None` where that does not apply.
#[inline(always)]
fn forward_lifted_doubles<const EXACT: bool>(
    m: &mut Machine,
    id: u32,
    f: Formula,
    args: &[Value],
) -> Option<Value> {
    let n = args.len();
    let (x1, d1, level) = lifted_operands::<EXACT, _>(&m.tape, id, f, args)?;
    let y = L1::op(m, f, &x1[..n]).ok()?;
    let dy = jvp_num::<L1>(m, f, &x1[..n], &y, &d1[..n]).ok()?;
    Some(super::tape::forward_real(id, y.value(level), dy.value(level)))
}

/// The operands of [`forward_lifted_doubles`] (at most two) as `L1`s: their
/// values, their tangents, and the enclosing forward level whose reals they
/// hold (`None` if only numbers). `None` where that does not apply.
#[inline(always)]
fn lifted_operands<const EXACT: bool, V: std::borrow::Borrow<Value>>(
    tapes: &super::tape::Tapes,
    id: u32,
    f: Formula,
    args: &[V],
) -> Option<([L1; 2], [L1; 2], Option<u32>)> {
    /// A double, or an exact integer as the double `as f64` converts it to
    /// (and whether exact).
    #[inline(always)]
    fn number<const EXACT: bool>(v: &Value) -> Option<(f64, bool)> {
        match v {
            Value::Real(x) => Some((*x, false)),
            Value::Int(i) if EXACT => Some((*i as f64, true)),
            _ => None,
        }
    }
    /// A value or tangent as an `L1`, `level` the enclosing level it is a
    /// real of, and bit 0 set if its value is an exact integer, bit 1 if its tangent is.
    #[inline(always)]
    fn part<const EXACT: bool>(
        tapes: &super::tape::Tapes,
        v: &Value,
        level: &mut Option<u32>,
    ) -> Option<(L1, u8)> {
        match v {
            Value::Real(p) => Some((L1 { p: *p, t: None }, 0)),
            // (a tape's real is not: reverse over forward)
            Value::Active(w) if w.node == super::tape::NONE => {
                match *level {
                    None if tapes.forward_running(w.tape) => *level = Some(w.tape),
                    Some(l) if l == w.tape => {}
                    _ => return None,
                }
                match (&w.value, &w.tangent) {
                    (Value::Real(p), Value::Real(t)) => Some((L1 { p: *p, t: Some(*t) }, 0)),
                    (p, t) if EXACT => {
                        let ((p, ep), (t, et)) = (number::<EXACT>(p)?, number::<EXACT>(t)?);
                        Some((L1 { p, t: Some(t) }, ep as u8 | (et as u8) << 1))
                    }
                    _ => None,
                }
            }
            Value::Int(i) if EXACT => Some((L1 { p: *i as f64, t: None }, 1)),
            _ => None,
        }
    }
    let n = args.len();
    let (mut x1, mut d1) = ([L1::int(0); 2], [L1::int(0); 2]);
    let (mut ex, mut ed) = ([0u8; 2], [0u8; 2]);
    let mut level = None;
    for (i, a) in args.iter().enumerate().take(2) {
        ((x1[i], ex[i]), (d1[i], ed[i])) = match a.borrow() {
            Value::Active(r) if r.tape == id => {
                (part::<EXACT>(tapes, &r.value, &mut level)?, part::<EXACT>(tapes, &r.tangent, &mut level)?)
            }
            // (a constant: its tangent is its zero, exact if its value is)
            c => {
                let (x, e) = part::<EXACT>(tapes, c, &mut level)?;
                ((x, e), (L1 { p: 0.0, t: None }, e & 1))
            }
        };
    }
    if EXACT && !exact_meets_doubles(f, n, ex, ed) {
        return None;
    }
    Some((x1, d1, level))
}

/// Could [`lifted_arith2`] apply to `args` on level `id`: is one a real of
/// the level, and one, or its value or tangent, a dual number of another
/// level? (Its level must be an enclosing forward one; cheap, so that the
/// operations of reverse over forward, whose values are a tape's reals, pass
/// on at once.)
#[inline(always)]
pub(super) fn lifted_candidates(id: u32, args: [&Value; 2]) -> bool {
    let dual = |v: &Value| super::tape::other_dual(id, v);
    let (mut on_level, mut duals) = (false, false);
    for a in args {
        match a {
            Value::Active(r) if r.tape == id => {
                on_level = true;
                duals |= dual(&r.value) || dual(&r.tangent);
            }
            a => duals |= dual(a),
        }
    }
    on_level && duals
}

/// [`record_forward_lifted`] of `+ - * /` (`f`) on `x` and `y` on the
/// innermost level `id`, a forward one, where some value or tangent is a real
/// of an enclosing forward level (forward over forward), without a machine:
/// for the evaluator's inline arithmetic (`tape::level_arith2`). The same
/// operands as [`forward_lifted_doubles`] takes (doubles first, then exact
/// integers) and the same operations in the same order (`L1::arith2`,
/// `L1::jvp2`), so the same value. `None` where that does not apply, or
/// where no operand holds an enclosing level's real (`record`'s
/// `record_doubles` comes first there). Where [`lifted_candidates`].
#[inline(never)]
pub(super) fn lifted_arith2(
    tapes: &super::tape::Tapes,
    id: u32,
    f: Formula,
    args: [&Value; 2],
) -> Option<Rc<crate::value::Active>> {
    debug_assert!(matches!(f, Formula::Add | Formula::Sub | Formula::Mul | Formula::Div));
    debug_assert!(lifted_candidates(id, args));
    let (x1, d1, level) = match lifted_operands::<false, _>(tapes, id, f, &args) {
        Some(ops) => ops,
        None if args.iter().any(|a| has_exact_part(a)) => lifted_operands::<true, _>(tapes, id, f, &args)?,
        None => return None,
    };
    let outer = level?;
    let y = L1::arith2(f, x1[0], x1[1]);
    let dy = L1::jvp2(f, x1, y, d1);
    Some(match (y.t, dy.t) {
        // (the commonest: `forward_real` of `L1::value`s, each cell's fields
        // written in place; a value built on the stack first and then copied
        // into the cell, as there, stalls the copy's wide loads on its narrow
        // stores)
        (Some(yt), Some(dyt)) => {
            let dual = |p: f64, t: f64| {
                crate::value::rc_build(|| crate::value::Active {
                    tape: outer,
                    node: super::tape::NONE,
                    value: Value::Real(p),
                    tangent: Value::Real(t),
                })
            };
            let (v, t) = (dual(y.p, yt), dual(dy.p, dyt));
            crate::value::rc_build(|| crate::value::Active {
                tape: id,
                node: super::tape::NONE,
                value: Value::Active(v),
                tangent: Value::Active(t),
            })
        }
        _ => super::tape::forward_real_rc(id, y.value(level), dy.value(level)),
    })
}

/// [`forward_lifted_doubles`] where some numbers are exact integers.
#[inline(never)]
fn forward_lifted_exact(m: &mut Machine, id: u32, f: Formula, args: &[Value]) -> Option<Value> {
    forward_lifted_doubles::<true>(m, id, f, args)
}

/// Is `v` an exact integer, or a real of a forward level with one among its
/// value and tangent or theirs (one level down)?
fn has_exact_part(v: &Value) -> bool {
    let int = |v: &Value| match v {
        Value::Int(_) => true,
        Value::Active(w) => matches!(w.value, Value::Int(_)) || matches!(w.tangent, Value::Int(_)),
        _ => false,
    };
    match v {
        Value::Active(r) => int(&r.value) || int(&r.tangent),
        v => int(v),
    }
}

/// Does every exact integer among the operands of [`forward_lifted_doubles`]
/// meet only doubles in `Lift`'s computation of scalar formula `f` (its value
/// and `jvp_num`'s tangent rule, each operation on reals of the enclosing
/// level)? Then `Lift` converts each `as f64` where it meets a double and
/// computes on doubles, so `L1` on the converted numbers gives the same bits;
/// where two exact integers would meet (an exact result) or a function takes
/// one (`X64` declines it), it does not. `ex[i]`, `ed[i]`: operand `i`'s value
/// and tangent, bit 0 set if the value of that real of the enclosing level is
/// exact, bit 1 if its tangent is (a constant's zero tangent is exact if its
/// value is). An operation of that level on two numbers meets exact integers
/// with each other only where both have one: `+ - * /`'s rules combine parts
/// of different operands; a function's rule (of one operand) combines its
/// tangent with doubles computed from its value, which must be a double.
fn exact_meets_doubles(f: Formula, n: usize, ex: [u8; 2], ed: [u8; 2]) -> bool {
    let (x0, x1, d0, d1) = (ex[0] != 0, ex[1] != 0, ed[0] != 0, ed[1] != 0);
    // (two parts that meet in an operation, not both with an exact integer)
    let apart = |a: bool, b: bool| !(a && b);
    match (f, n) {
        // (y = x0 + x1, then d0 + d1)
        (Formula::Add | Formula::Sub, 2) => apart(x0, x1) && apart(d0, d1),
        // (y = x0 * x1, then d0 * x1, x0 * d1, and their sum: doubles)
        (Formula::Mul, 2) => apart(x0, x1) && apart(d0, x1) && apart(x0, d1),
        // (y = x0 / x1, then y * d1, d0 - that, that / x1: each with a double)
        (Formula::Div, 2) => apart(x0, x1),
        // (y = f(x0), then d0 with y, 2 * y or f'(x0): doubles)
        (Formula::Sqrt | Formula::Exp | Formula::Sin | Formula::Cos, 1) => ex[0] & 1 == 0,
        // (then d0 / x0)
        (Formula::Log, 1) => ex[0] & 1 == 0 && apart(d0, x0),
        _ => false,
    }
}

/// A [`Lift`] made of doubles: its arithmetic on doubles, the same operations
/// in the same order (`Lift::formula_op`'s first case), without its dispatch.
/// (The rules' exact constants are doubles here; in `Lift` they are exact
/// integers, which meet only doubles there and are converted as `as f64`
/// converts them, so the results are the same bits.)
#[derive(Clone, Copy)]
pub(super) struct L1 {
    pub(super) p: f64,
    pub(super) t: Option<f64>,
}

impl L1 {
    /// `+ - * /` (`f`) on `a` and `b`: the value on doubles, and its tangent
    /// on the enclosing level by the primitive's tangent rule on doubles
    /// (`jvp_num` on `f64`, in its order) where either has one.
    #[inline(always)]
    fn arith2(f: Formula, a: L1, b: L1) -> L1 {
        let y = match f {
            Formula::Add => a.p + b.p,
            Formula::Sub => a.p - b.p,
            Formula::Mul => a.p * b.p,
            _ => a.p / b.p,
        };
        if a.t.is_none() && b.t.is_none() {
            return L1 { p: y, t: None };
        }
        let (da, db) = (a.t.unwrap_or(0.0), b.t.unwrap_or(0.0));
        let dy = match f {
            // (+ d1 d2), (- d1 d2)
            Formula::Add => da + db,
            Formula::Sub => da - db,
            // (+ (* d1 x2) (* x1 d2))
            Formula::Mul => da * b.p + a.p * db,
            // (/ (- d1 (* y d2)) x2)
            _ => (da - y * db) / b.p,
        };
        L1 { p: y, t: Some(dy) }
    }

    /// The tangent of `y = x[0] f x[1]` (`+ - * /`) on this level, for
    /// tangents `d`: `jvp_num`'s rule, its operations in its order, each an
    /// [`L1::arith2`] (as `jvp_num::<L1>` computes it).
    #[inline(always)]
    fn jvp2(f: Formula, x: [L1; 2], y: L1, d: [L1; 2]) -> L1 {
        match f {
            Formula::Add | Formula::Sub => L1::arith2(f, d[0], d[1]),
            Formula::Mul => {
                let a = L1::arith2(Formula::Mul, d[0], x[1]);
                let b = L1::arith2(Formula::Mul, x[0], d[1]);
                L1::arith2(Formula::Add, a, b)
            }
            _ => {
                let a = L1::arith2(Formula::Mul, y, d[1]);
                let b = L1::arith2(Formula::Sub, d[0], a);
                L1::arith2(Formula::Div, b, x[1])
            }
        }
    }

    /// As a value (a real of forward level `level` if it has a tangent).
    pub(super) fn value(self, level: Option<u32>) -> Value {
        match (self.t, level) {
            (Some(t), Some(id)) => super::tape::forward_real(id, Value::Real(self.p), Value::Real(t)),
            _ => Value::Real(self.p),
        }
    }
}

impl Lift {
    /// The same number as an [`L1`], if it is made of doubles.
    fn l1(self) -> Option<L1> {
        match (self.p, self.t) {
            (X64::R(p), None) => Some(L1 { p, t: None }),
            (X64::R(p), Some(X64::R(t))) => Some(L1 { p, t: Some(t) }),
            _ => None,
        }
    }
}

impl Num for L1 {
    #[inline(always)]
    fn op(m: &mut Machine, f: Formula, args: &[L1]) -> Result<L1> {
        let n = args.len();
        if n > 2 {
            return Err(not_scalar());
        }
        if n == 2 && matches!(f, Formula::Add | Formula::Sub | Formula::Mul | Formula::Div) {
            return Ok(L1::arith2(f, args[0], args[1]));
        }
        let (mut x, mut d, mut plain) = ([0.0; 2], [0.0; 2], true);
        for (i, a) in args.iter().enumerate() {
            x[i] = a.p;
            if let Some(t) = a.t {
                d[i] = t;
                plain = false;
            }
        }
        let y = formula_f64(f, &x[..n]).ok_or_else(not_scalar)?;
        if plain {
            return Ok(L1 { p: y, t: None });
        }
        let dy = jvp_num::<f64>(m, f, &x[..n], &y, &d[..n])?;
        Ok(L1 { p: y, t: Some(dy) })
    }
    fn int(i: i64) -> L1 {
        L1 { p: i as f64, t: None }
    }
}

/// [`record_forward_lifted`] where the operands are numbers or reals of one
/// enclosing reverse level (reverse over forward): the value recorded on its
/// tape as [`lifted_op`] records it and the tangent rule as [`tangent_rule`]
/// records it. `None` where that does not apply (nothing done: the tape is as
/// it was).
///
/// `ENCLOSING`: whether `id` has levels running inside it (reverse over
/// forward over forward: `ad::tape::record`'s enclosing forward levels). It
/// changes nothing but makes that caller's copy a function of its own, so that
/// the innermost level's copy is inlined into `record` as it would be alone.
pub(super) fn record_forward_rev<const ENCLOSING: bool>(
    m: &mut Machine,
    id: u32,
    f: Formula,
    args: &[Value],
) -> Option<Value> {
    if !forward_op(m, id, f, args) {
        return None;
    }
    if let Some(y) = forward_rev_doubles::<ENCLOSING>(m, id, f, args) {
        return Some(y);
    }
    let n = args.len();
    let (parts, constants) = operand_parts(id, args);
    let mut rs = [RV_ZERO; 4];
    let id_r = rev_all(m, &parts[..2 * n], &mut rs)?;
    let (xs, ds) = values_and_tangents(n, &rs, constants, |x| Rv { v: x.v.zero(), node: NO_NODE, k: 0 });
    // (recorded on the enclosing tape; nothing left there if either fails)
    let (y, dy) = rev_rule(m, &rs[..2 * n], |m| {
        let y = Rv::formula_op(m, f, &xs[..n])?;
        let dy = jvp_num::<Rv>(m, f, &xs[..n], &y, &ds[..n])?;
        Ok((y, dy))
    })?;
    Some(super::tape::forward_real(id, unrev(y, id_r), unrev(dy, id_r)))
}

/// [`record_forward_rev`] where every number is a double, a real of the
/// enclosing tape whose value is a double, or an exact integer constant of at
/// most 2^26 in magnitude that meets only doubles (a gradient's seed 1, a
/// rule's 2): computed as `R1`s, which record on the tape the nodes `Rv`
/// records, as `record_doubles` records them. `None` where that does not apply
/// (nothing done: the tape is as it was).
fn forward_rev_doubles<const ENCLOSING: bool>(
    m: &mut Machine,
    id: u32,
    f: Formula,
    args: &[Value],
) -> Option<Value> {
    let n = args.len();
    let (parts, constants) = operand_parts(id, args);
    // (the tape's level and index among the running levels, once one is met)
    let mut level: Option<(u32, u32)> = None;
    let mut rs = [R1::int(0); 4];
    for (r, v) in rs.iter_mut().zip(&parts[..2 * n]) {
        *r = match v {
            Value::Real(x) => R1 { v: *x, exact: false, node: NO_NODE, k: 0 },
            Value::Int(i) if i.unsigned_abs() <= super::tape::EXACT_AS_DOUBLE as u64 => R1::int(*i),
            Value::Active(a) => {
                let Value::Real(x) = a.value else { return None };
                R1 { v: x, exact: false, node: a.node, k: one_reverse_level(m, &mut level, a.tape)? }
            }
            Value::TapeReal(t, node, x) => {
                R1 { v: *x, exact: false, node: *node, k: one_reverse_level(m, &mut level, *t as u32)? }
            }
            _ => return None,
        };
    }
    let (xs, ds) =
        values_and_tangents(n, &rs, constants, |x| R1 { v: 0.0, exact: x.exact, node: NO_NODE, k: 0 });
    // (recorded on the tape; nothing left there if either fails)
    let (y, dy) = undone_on_failure(m, level.map(|(_, k)| k as usize), |m| {
        let y = R1::op(m, f, &xs[..n])?;
        let dy = jvp_num::<R1>(m, f, &xs[..n], &y, &ds[..n])?;
        Ok((y, dy))
    })?;
    let id_r = level.map(|(l, _)| l);
    Some(super::tape::forward_real(id, y.value(id_r), dy.value(id_r)))
}

/// A number of [`forward_rev_doubles`]' arithmetic: a double, or an exact
/// integer of at most 2^26 in magnitude held as its double (a constant),
/// plain (`node` none) or a real of the tape at index `k` of the running
/// levels (its node `node`). An operation records on that tape, if an operand
/// is its real, the node `Rv` records (`push_op`'s, as `record_doubles`
/// records it: `tape::push_doubles_at`), and computes the value as `X64` does
/// where an exact integer meets a double (converted `as f64`); where exact
/// integers meet each other, or a function or `atan` takes one, it fails (the
/// caller takes `Rv`'s path, which keeps them exact).
#[derive(Clone, Copy)]
struct R1 {
    v: f64,
    exact: bool,
    node: u32,
    k: u32,
}

impl R1 {
    /// As a value (a real of reverse level `level` if it has a node).
    fn value(self, level: Option<u32>) -> Value {
        match level {
            Some(id) if self.node != NO_NODE => super::tape::reverse_real(id, self.node, Value::Real(self.v)),
            _ if self.exact => Value::Int(self.v as i64),
            _ => Value::Real(self.v),
        }
    }
}

impl R1 {
    /// Whether [`R1`]'s arithmetic does scalar formula `f` on `args`: one or
    /// two operands, and an exact integer only in `+ - * /` with a double.
    #[inline(always)]
    fn does(f: Formula, args: &[R1]) -> bool {
        R1::exact_operands(f, args).is_some()
    }

    /// Which of `args` are exact (bit `i` for operand `i`), where [`R1::does`]
    /// holds; `None` otherwise.
    #[inline(always)]
    fn exact_operands(f: Formula, args: &[R1]) -> Option<u8> {
        let n = args.len();
        let arith = matches!(f, Formula::Add | Formula::Sub | Formula::Mul | Formula::Div);
        if n > 2 || matches!(f, Formula::Zero | Formula::Struct(_)) {
            return None;
        }
        let exact = args.iter().enumerate().fold(0u8, |e, (i, a)| e | (a.exact as u8) << i);
        (exact == 0 || arith && n == 2 && exact != 3).then_some(exact)
    }
}

impl Num for R1 {
    #[inline(always)]
    fn op(m: &mut Machine, f: Formula, args: &[R1]) -> Result<R1> {
        let n = args.len();
        let Some(exact) = R1::exact_operands(f, args) else { return Err(not_scalar()) };
        let mut xs = [0.0; 2];
        for (x, a) in xs.iter_mut().zip(args) {
            *x = a.v;
        }
        let y = formula_f64(f, &xs[..n]).ok_or_else(not_scalar)?;
        let Some(k) = args.iter().find(|a| a.node != NO_NODE).map(|a| a.k) else {
            return Ok(R1 { v: y, exact: false, node: NO_NODE, k: 0 });
        };
        let parents = [args[0].node, if n == 2 { args[1].node } else { NO_NODE }];
        let node = super::tape::push_doubles_at(m, k as usize, f, n, parents, xs, exact, y);
        Ok(R1 { v: y, exact: false, node, k })
    }
    fn int(i: i64) -> R1 {
        R1 { v: i as f64, exact: true, node: NO_NODE, k: 0 }
    }
}

/// Scalar formula `f` on values that are numbers or reals of one forward level
/// (see [`Lift`]) or of one reverse level (see [`Rv`]: recorded on its tape),
/// as the primitive computes it; `None` where that does not apply (nothing
/// done: the caller calls the primitive).
pub(super) fn lifted_op(m: &mut Machine, f: Formula, x: &[&Value]) -> Option<Value> {
    if matches!(f, Formula::Zero | Formula::Struct(_)) {
        return None;
    }
    let mut xs = [LIFT_ZERO; 2];
    if let Some(level) = lift_all(m, x, &mut xs) {
        let y = Lift::formula_op(m, f, &xs[..x.len()]).ok()?;
        return Some(unlift(y, level));
    }
    // (reals of an enclosing reverse level: recorded on its tape)
    let mut rs = [RV_ZERO; 2];
    let level = rev_all(m, x, &mut rs)?;
    let y = Rv::formula_op(m, f, &rs[..x.len()]).ok()?;
    Some(unrev(y, level))
}

/// The cotangent rule of a scalar primitive on dual numbers whose parts are
/// exact integers and reals (and nothing is metered), computed on [`X64`]:
/// the same operations in the same order as on the values, so the same
/// results. `None` where that does not apply (the caller takes the general
/// path, which also reports any error).
fn vjp_x64(m: &mut Machine, f: Formula, x: &[Dual], y: Option<&Dual>, yb: &Dual) -> Option<Out<Dual>> {
    if m.meter.is_some() {
        return None;
    }
    let dx = |d: &Dual| Some(DX { p: X64::of(&d.p)?, t: X64::of(&d.t)? });
    let xs: Two<DX> = x.iter().map(dx).collect::<Option<_>>()?;
    let y = match y {
        Some(d) => Some(dx(d)?),
        None => None,
    };
    let back = |d: DX| Dual { p: d.p.value(), t: d.t.value() };
    match vjp_num(m, f, &xs, y.as_ref(), &dx(yb)?) {
        Ok(Some(Out::One(a))) => Some(Out::One(back(a))),
        Ok(Some(Out::Two(a, b))) => Some(Out::Two(back(a), back(b))),
        _ => None,
    }
}

/// The tangent rule of a scalar primitive on dual numbers whose parts are
/// exact integers and reals (and nothing is metered), computed on [`X64`] as
/// [`vjp_x64`] computes the cotangent rule; `None` where that does not apply.
fn jvp_x64(m: &mut Machine, f: Formula, x: &[Dual], y: &Dual, d: &[Dual]) -> Option<Dual> {
    if m.meter.is_some() {
        return None;
    }
    let dx = |d: &Dual| Some(DX { p: X64::of(&d.p)?, t: X64::of(&d.t)? });
    let xs: Two<DX> = x.iter().map(dx).collect::<Option<_>>()?;
    let ds: Two<DX> = d.iter().map(dx).collect::<Option<_>>()?;
    let dy = jvp_num(m, f, &xs, &dx(y)?, &ds).ok()?;
    Some(Dual { p: dy.p.value(), t: dy.t.value() })
}

/// A scalar primitive and its tangent, on reals as doubles when they all are.
pub(super) fn apply_jvp(
    m: &mut Machine,
    p: PrimId,
    f: Formula,
    x: &[Value],
    d: &[Value],
) -> Result<(Value, Value)> {
    if let (Some((xf, n)), Some((df, _)), false, None) =
        (doubles(x), doubles(d), matches!(f, Formula::Zero | Formula::Struct(_)), &m.meter)
    {
        if let Some(y) = prim_f64(p, &xf[..n]) {
            let dy = jvp_num(m, f, &xf[..n], &y, &df[..n])?;
            return Ok((Value::Real(y), Value::Real(dy)));
        }
    }
    let y = apply(m, p, x)?;
    let dy = jvp(m, f, x, &y, d)?;
    Ok((y, dy))
}

/// A cotangent: one part, or the two parts of a pair.
pub(super) enum Out<N> {
    One(N),
    Two(N, N),
}

/// The cotangent rule of a scalar primitive, as in the primitive table (same
/// operations, same order); `None` if it needs a value the backpropagator did
/// not capture.
fn vjp_num<N: Num>(m: &mut Machine, f: Formula, x: &[N], y: Option<&N>, yb: &N) -> Result<Option<Out<N>>> {
    let i = &RULE_OPS;
    let op = |m: &mut Machine, f: Formula, a: &N, b: &N| N::op(m, f, &[a.clone(), b.clone()]);
    let two = N::int(2);
    let zero = N::int(0);
    let need_x = |n: usize| x.len() == n;
    Ok(Some(match (f, y) {
        // (cons yb yb)
        (Formula::Add, _) => Out::Two(yb.clone(), yb.clone()),
        // (cons yb (- 0 yb))
        (Formula::Sub, _) => Out::Two(yb.clone(), op(m, i.sub, &zero, yb)?),
        // (cons (* yb x2) (* yb x1))
        (Formula::Mul, _) if need_x(2) => {
            let a = op(m, i.mul, yb, &x[1])?;
            Out::Two(a, op(m, i.mul, yb, &x[0])?)
        }
        // (cons (/ yb x2) (- 0 (/ (* yb y) x2)))
        (Formula::Div, Some(y)) if need_x(2) => {
            let a = op(m, i.div, yb, &x[1])?;
            let b = op(m, i.mul, yb, y)?;
            let c = op(m, i.div, &b, &x[1])?;
            Out::Two(a, op(m, i.sub, &zero, &c)?)
        }
        // (/ yb (* 2 y))
        (Formula::Sqrt, Some(y)) => {
            let a = op(m, i.mul, &two, y)?;
            Out::One(op(m, i.div, yb, &a)?)
        }
        // (* yb y)
        (Formula::Exp, Some(y)) => Out::One(op(m, i.mul, yb, y)?),
        // (/ yb x)
        (Formula::Log, _) if need_x(1) => Out::One(op(m, i.div, yb, &x[0])?),
        // (* yb (cos x))
        (Formula::Sin, _) if need_x(1) => {
            let c = N::op(m, i.cos, x)?;
            Out::One(op(m, i.mul, yb, &c)?)
        }
        // (- 0 (* yb (sin x)))
        (Formula::Cos, _) if need_x(1) => {
            let s = N::op(m, i.sin, x)?;
            let a = op(m, i.mul, yb, &s)?;
            Out::One(op(m, i.sub, &zero, &a)?)
        }
        // (let ((r (+ (* x1 x1) (* x2 x2)))) (cons (/ (* yb x2) r) (- 0 (/ (* yb x1) r))))
        (Formula::Atan, _) if need_x(2) => {
            let a = op(m, i.mul, &x[0], &x[0])?;
            let b = op(m, i.mul, &x[1], &x[1])?;
            let r = op(m, i.add, &a, &b)?;
            let c = op(m, i.mul, yb, &x[1])?;
            let first = op(m, i.div, &c, &r)?;
            let e = op(m, i.mul, yb, &x[0])?;
            let g = op(m, i.div, &e, &r)?;
            Out::Two(first, op(m, i.sub, &zero, &g)?)
        }
        _ => return Ok(None),
    }))
}

/// A scalar primitive's second-order rule (`rules::rf_rule`: the reverse of its
/// tangent rule) on numbers: the sensitivities of the argument `x` and of its
/// tangent `d`, from those of the result `y` (`yb`) and of its tangent `dy`
/// (`db`). A value the rule does not read may be `()`. On doubles when nothing
/// is metered and every number it reads is a real (the same bits, see
/// `impl Num for f64`).
#[allow(clippy::too_many_arguments)]
pub(super) fn rf_rule(
    m: &mut Machine,
    f: Formula,
    x: &[Value],
    y: &Value,
    d: &[Value],
    dy: &Value,
    yb: &Value,
    db: &Value,
) -> Result<(Out<Value>, Out<Value>)> {
    if m.meter.is_none() {
        // (an unread `()` stands in as NaN)
        let r = |v: &Value| match v {
            Value::Real(a) => Some(*a),
            Value::Nil => Some(f64::NAN),
            _ => None,
        };
        let xs: Option<Two<f64>> = x.iter().map(r).collect();
        let ds: Option<Two<f64>> = d.iter().map(r).collect();
        if let (Some(xs), Some(ds), Some(y), Some(dy), Some(yb), Some(db)) =
            (xs, ds, r(y), r(dy), r(yb), r(db))
        {
            let (a, b) = rf_num(m, f, &xs, &y, &ds, &dy, &yb, &db)?;
            let v = |o: Out<f64>| match o {
                Out::One(a) => Out::One(Value::Real(a)),
                Out::Two(a, b) => Out::Two(Value::Real(a), Value::Real(b)),
            };
            return Ok((v(a), v(b)));
        }
    }
    rf_num(m, f, x, y, d, dy, yb, db)
}

/// The second-order rule, as in `rules::rf_rule` (same operations, same order).
#[allow(clippy::too_many_arguments)]
fn rf_num<N: Num>(
    m: &mut Machine,
    f: Formula,
    x: &[N],
    y: &N,
    d: &[N],
    dy: &N,
    yb: &N,
    db: &N,
) -> Result<(Out<N>, Out<N>)> {
    let i = &RULE_OPS;
    let op = |m: &mut Machine, f: Formula, a: &N, b: &N| N::op(m, f, &[a.clone(), b.clone()]);
    let two = N::int(2);
    let zero = N::int(0);
    let need = |n: usize| {
        if x.len() == n && d.len() == n {
            Ok(())
        } else {
            Err(not_scalar())
        }
    };
    Ok(match f {
        // (cons (cons yb yb) (cons db db))
        Formula::Add => (Out::Two(yb.clone(), yb.clone()), Out::Two(db.clone(), db.clone())),
        // (cons (cons yb (- 0 yb)) (cons db (- 0 db)))
        Formula::Sub => {
            let a = op(m, i.sub, &zero, yb)?;
            let b = op(m, i.sub, &zero, db)?;
            (Out::Two(yb.clone(), a), Out::Two(db.clone(), b))
        }
        // (cons (cons (+ (* yb x2) (* db d2)) (+ (* yb x1) (* db d1))) (cons (* db x2) (* db x1)))
        Formula::Mul => {
            need(2)?;
            let a = op(m, i.mul, yb, &x[1])?;
            let b = op(m, i.mul, db, &d[1])?;
            let xb1 = op(m, i.add, &a, &b)?;
            let c = op(m, i.mul, yb, &x[0])?;
            let e = op(m, i.mul, db, &d[0])?;
            let xb2 = op(m, i.add, &c, &e)?;
            let db1 = op(m, i.mul, db, &x[1])?;
            let db2 = op(m, i.mul, db, &x[0])?;
            (Out::Two(xb1, xb2), Out::Two(db1, db2))
        }
        // (let ((yt (- yb (/ (* db d2) x2))))
        //   (cons (cons (/ yt x2) (- 0 (/ (+ (* yt y) (* db dy)) x2)))
        //         (cons (/ db x2) (- 0 (/ (* db y) x2)))))
        Formula::Div => {
            need(2)?;
            let a = op(m, i.mul, db, &d[1])?;
            let b = op(m, i.div, &a, &x[1])?;
            let yt = op(m, i.sub, yb, &b)?;
            let xb1 = op(m, i.div, &yt, &x[1])?;
            let c = op(m, i.mul, &yt, y)?;
            let e = op(m, i.mul, db, dy)?;
            let g = op(m, i.add, &c, &e)?;
            let h = op(m, i.div, &g, &x[1])?;
            let xb2 = op(m, i.sub, &zero, &h)?;
            let db1 = op(m, i.div, db, &x[1])?;
            let k = op(m, i.mul, db, y)?;
            let l = op(m, i.div, &k, &x[1])?;
            let db2 = op(m, i.sub, &zero, &l)?;
            (Out::Two(xb1, xb2), Out::Two(db1, db2))
        }
        // (let ((y2 (* 2 y))) (cons (/ (- yb (/ (* db dy) y)) y2) (/ db y2)))
        Formula::Sqrt => {
            let y2 = op(m, i.mul, &two, y)?;
            let a = op(m, i.mul, db, dy)?;
            let b = op(m, i.div, &a, y)?;
            let c = op(m, i.sub, yb, &b)?;
            let xb = op(m, i.div, &c, &y2)?;
            (Out::One(xb), Out::One(op(m, i.div, db, &y2)?))
        }
        // (cons (* (+ yb (* db d)) y) (* db y))
        Formula::Exp => {
            need(1)?;
            let a = op(m, i.mul, db, &d[0])?;
            let b = op(m, i.add, yb, &a)?;
            let xb = op(m, i.mul, &b, y)?;
            (Out::One(xb), Out::One(op(m, i.mul, db, y)?))
        }
        // (cons (/ (- yb (* db dy)) x) (/ db x))
        Formula::Log => {
            need(1)?;
            let a = op(m, i.mul, db, dy)?;
            let b = op(m, i.sub, yb, &a)?;
            let xb = op(m, i.div, &b, &x[0])?;
            (Out::One(xb), Out::One(op(m, i.div, db, &x[0])?))
        }
        // (let ((c (cos x))) (cons (- (* yb c) (* (* db d) y)) (* db c)))
        Formula::Sin => {
            need(1)?;
            let c = N::op(m, i.cos, &x[..1])?;
            let a = op(m, i.mul, yb, &c)?;
            let b = op(m, i.mul, db, &d[0])?;
            let e = op(m, i.mul, &b, y)?;
            let xb = op(m, i.sub, &a, &e)?;
            (Out::One(xb), Out::One(op(m, i.mul, db, &c)?))
        }
        // (let ((s (sin x))) (cons (- 0 (+ (* yb s) (* (* db d) y))) (- 0 (* db s))))
        Formula::Cos => {
            need(1)?;
            let s = N::op(m, i.sin, &x[..1])?;
            let a = op(m, i.mul, yb, &s)?;
            let b = op(m, i.mul, db, &d[0])?;
            let e = op(m, i.mul, &b, y)?;
            let g = op(m, i.add, &a, &e)?;
            let xb = op(m, i.sub, &zero, &g)?;
            let h = op(m, i.mul, db, &s)?;
            (Out::One(xb), Out::One(op(m, i.sub, &zero, &h)?))
        }
        // (let ((r (+ (* x1 x1) (* x2 x2))))
        //   (cons (cons (/ (- (* yb x2) (* db (+ d2 (* 2 (* x1 dy))))) r)
        //               (/ (- (* db (- d1 (* 2 (* x2 dy)))) (* yb x1)) r))
        //         (cons (/ (* db x2) r) (- 0 (/ (* db x1) r)))))
        Formula::Atan => {
            need(2)?;
            let a = op(m, i.mul, &x[0], &x[0])?;
            let b = op(m, i.mul, &x[1], &x[1])?;
            let r = op(m, i.add, &a, &b)?;
            let c = op(m, i.mul, yb, &x[1])?;
            let e = op(m, i.mul, &x[0], dy)?;
            let g = op(m, i.mul, &two, &e)?;
            let h = op(m, i.add, &d[1], &g)?;
            let k = op(m, i.mul, db, &h)?;
            let l = op(m, i.sub, &c, &k)?;
            let xb1 = op(m, i.div, &l, &r)?;
            let n = op(m, i.mul, &x[1], dy)?;
            let o = op(m, i.mul, &two, &n)?;
            let q = op(m, i.sub, &d[0], &o)?;
            let t = op(m, i.mul, db, &q)?;
            let u = op(m, i.mul, yb, &x[0])?;
            let w = op(m, i.sub, &t, &u)?;
            let xb2 = op(m, i.div, &w, &r)?;
            let z = op(m, i.mul, db, &x[1])?;
            let db1 = op(m, i.div, &z, &r)?;
            let aa = op(m, i.mul, db, &x[0])?;
            let bb = op(m, i.div, &aa, &r)?;
            let db2 = op(m, i.sub, &zero, &bb)?;
            (Out::Two(xb1, xb2), Out::Two(db1, db2))
        }
        Formula::Zero | Formula::Struct(_) => return Err(not_scalar()),
    })
}

/// The cotangent rule on plain values (numbers, or any values for the AD primitives).
fn vjp(m: &mut Machine, f: Formula, x: &[Value], y: Option<&Value>, yb: &Value) -> Result<Option<Value>> {
    Ok(Some(match f {
        Formula::Struct(op) => struct_vjp(m, op, x.first(), yb)?,
        // (zero x)
        Formula::Zero if !x.is_empty() => {
            let xv = if x.len() == 1 { x[0].clone() } else { Value::cons(x[0].clone(), x[1].clone()) };
            super::ops::zero(m, &xv)?
        }
        Formula::Zero => return Ok(None),
        _ => match vjp_num(m, f, x, y, yb)? {
            Some(Out::One(v)) => v,
            Some(Out::Two(a, b)) => Value::cons(a, b),
            None => return Ok(None),
        },
    }))
}

/// The argument of a call as the rule closure's parameter sees it: one value,
/// or several made into a tuple.
fn arg_value(m: &Machine, base: usize, nargs: usize) -> Value {
    let s = &m.stack[base..base + nargs];
    match s.split_last() {
        None => Value::Nil,
        Some((last, init)) => init.iter().rev().fold(last.clone(), |acc, v| Value::cons(v.clone(), acc)),
    }
}

/// An AD primitive's rule closure, run as the interpreter would run it: the
/// same value operations in the same order (they are all lazy primitives, so
/// their implementations take the values as they are).
fn run_struct(
    m: &mut Machine,
    nat: &Native,
    op: StructOp,
    inst: &Inst,
    base: usize,
    nargs: usize,
) -> Result<Value> {
    use super::ops;
    match nat {
        // (let* ((x (primal v)) (y (p x))) (bundle y (perturb (jvp x y (unperturb (tangent v))))))
        // Two arguments (plus, bundle): the operations distribute over the pair of
        // them, so they are applied to each and the tuples are never built.
        Native::F(p, _) if nargs == 2 => {
            if let (StructOp::Plus, Value::Bundle(a), Value::Bundle(b)) =
                (op, &m.stack[base], &m.stack[base + 1])
            {
                // Bundles of reals: (bundle (+ a b) (perturb (+ da db))) at once.
                if let (Value::Real(x), Value::Real(y)) = (&a.0, &b.0) {
                    if let (Some(Value::Real(dx)), Some(Value::Real(dy))) =
                        (a.1.peel_if(Tag::Perturbation), b.1.peel_if(Tag::Perturbation))
                    {
                        // primal twice, plus, tangent twice, untag twice, plus, tag, bundle
                        m.ad_work += 10;
                        let t = Value::tagged(Tag::Perturbation, Value::Real(dx + dy));
                        return Ok(Value::bundle(Value::Real(x + y), t));
                    }
                }
            }
            let (a, b) = (m.stack[base].clone(), m.stack[base + 1].clone());
            if op == StructOp::Plus {
                let budget = &mut { SMALL_TREE };
                let tree = is_lazy_zero(&a) || is_lazy_zero(&b) || (small(&a, budget) && small(&b, budget));
                if tree {
                    if let Some(r) = plus_f_tree(m, *p, &a, &b)? {
                        return Ok(r);
                    }
                }
            }
            struct_f2_slow(m, *p, op, &a, &b)
        }
        Native::F(p, _) => {
            let v = arg_value(m, base, nargs);
            struct_f(m, *p, op, &v)
        }
        Native::R { prim, bp, env, .. } if nargs == 2 => {
            let (a, b) = (m.stack[base].clone(), m.stack[base + 1].clone());
            let (xa, xb) = (ops::untag(m, Tag::Reverse, &a)?, ops::untag(m, Tag::Reverse, &b)?);
            let y = (prims::prim(*prim).imp)(m, &[xa.clone(), xb.clone()])?;
            let jy = ops::tag(m, Tag::Reverse, &y)?;
            let x = Value::cons(xa, xb);
            Ok(Value::cons(jy, bp_closure(bp, env, &x, &y)))
        }
        // (let* ((x (*j-inverse v)) (y (p x))) (cons (*j y) (lambda (s) ...)))
        Native::R { prim, bp, env, .. } => {
            let v = arg_value(m, base, nargs);
            let x = ops::untag(m, Tag::Reverse, &v)?;
            m.stack.push(x.clone());
            let y = m.call_prim(*prim, 1)?;
            let jy = ops::tag(m, Tag::Reverse, &y)?;
            Ok(Value::cons(jy, bp_closure(bp, env, &x, &y)))
        }
        Native::ShapeF(..)
        | Native::ShapeR(..)
        | Native::ShapeBp
        | Native::FR { .. }
        | Native::FBp { .. }
        | Native::FF(..)
        | Native::RF(..)
        | Native::RFBp(..)
        | Native::FShapeR(..) => {
            Err(crate::error::Error::runtime(None, "internal error: not an AD primitive's rule"))
        }
        // (lambda (s) (sensitize (cons '() (vjp x y (unsensitize s)))))
        Native::Bp { env, .. } => {
            let s = arg_value(m, base, nargs);
            let (x, _) = captured(env, inst);
            let yb = ops::untag(m, Tag::Sensitivity, &s)?;
            let xb = struct_vjp(m, op, x, &yb)?;
            ops::tag(m, Tag::Sensitivity, &Value::cons(Value::Nil, xb))
        }
    }
}

/// The forward version of AD primitive `p` on the value `v`:
/// (let* ((x (primal v)) (y (p x))) (bundle y (perturb (jvp x y (unperturb (tangent v)))))).
fn struct_f(m: &mut Machine, p: PrimId, op: StructOp, v: &Value) -> Result<Value> {
    let lazy = match (op, v) {
        (StructOp::Tag(_), Value::Pair(_)) | (StructOp::Tag(_) | StructOp::Untag(_), Value::Lazy(_)) => true,
        // (a pair built untagged, such as a native backpropagator's result, is
        // taken apart at once if it is small: nothing would cancel)
        (StructOp::Untag(_), Value::Pair(_)) => !small(v, &mut { SMALL_TREE }),
        _ => false,
    };
    if let (true, StructOp::Tag(t @ Tag::Sensitivity) | StructOp::Untag(t @ Tag::Sensitivity)) = (lazy, op) {
        // On an aggregate: lazy, so that the forward untag of a forward tag
        // (a backpropagator's result, sensitized by it and unsensitized by its
        // caller) cancels at once. (Only sensitivities: the forward versions of
        // `perturb`, `*j` and their inverses meet aggregates that are taken
        // apart next, where laziness only costs: +13% instructions on one
        // forward-over-forward saddle gradient.)
        m.ad_work += 1;
        let lop = if let StructOp::Tag(_) = op { LazyOp::FTag(t) } else { LazyOp::FUntag(t) };
        return super::ops::make_lazy(m, v, false, smallvec![lop]);
    }
    struct_f_now(m, p, op, v)
}

/// The forward version of tag operation `t` (removing it when `untag` is
/// set) on a value, one level deep (`LazyOp::FTag`, `LazyOp::FUntag`).
pub fn forward_retag(m: &mut Machine, t: Tag, untag: bool, v: &Value) -> Result<Value> {
    let op = if untag { StructOp::Untag(t) } else { StructOp::Tag(t) };
    struct_f_now(m, tag_prim(t, untag), op, v)
}

/// The primitive of a tag operation.
fn tag_prim(t: Tag, untag: bool) -> PrimId {
    const TAGS: [Tag; 3] = [Tag::Perturbation, Tag::Sensitivity, Tag::Reverse];
    static IDS: std::sync::OnceLock<[PrimId; 6]> = std::sync::OnceLock::new();
    let ids = IDS.get_or_init(|| {
        std::array::from_fn(|i| {
            prims::lookup(super::ops::prim_name(TAGS[i / 2], i % 2 == 1)).expect("tag primitive")
        })
    });
    let i = match t {
        Tag::Perturbation => 0,
        Tag::Sensitivity => 1,
        Tag::Reverse => 2,
    };
    ids[2 * i + untag as usize]
}

/// [`struct_f`] applied now (at least one level deep).
fn struct_f_now(m: &mut Machine, p: PrimId, op: StructOp, v: &Value) -> Result<Value> {
    // (`zero` only on a leaf: on an aggregate the general definition makes a
    // lazy zero, which `plus` skips, where adding it would turn -0.0 into 0.0)
    let tree = match op {
        StructOp::Tag(_) | StructOp::Untag(_) => true,
        StructOp::Zero => matches!(v, Value::Bundle(_)),
        _ => false,
    };
    if tree && small(v, &mut { SMALL_TREE }) {
        if let Some(r) = struct_f_tree(m, op, v)? {
            return Ok(r);
        }
    }
    struct_f_slow(m, p, op, v)
}

/// How many nodes [`struct_f_tree`] and [`plus_f_tree`] take on (larger
/// values get the general definition, lazy, so that passing a long list
/// through a tag operation and back stays O(1)).
const SMALL_TREE: u32 = 16;

/// Has `v` at most `budget` nodes (pairs, closures, leaves; a lazy value
/// counts as its head normal form if it has one, a leaf if not)?
fn small(v: &Value, budget: &mut u32) -> bool {
    if let Value::Nil = v {
        return true;
    }
    let Some(b) = budget.checked_sub(1) else { return false };
    *budget = b;
    match v {
        Value::Pair(q) => small(&q.car, budget) && small(&q.cdr, budget),
        Value::Closure(inst, _) => inst.env.iter().all(|x| small(x, budget)),
        Value::Lazy(z) => z.hnf.get().is_none_or(|h| small(h, budget)),
        _ => true,
    }
}

/// Is this a number or a boolean under zero or more tags (a leaf the tag
/// operations and `zero` treat one level at a time)?
fn tagged_leaf(v: &Value) -> bool {
    match v {
        Value::TReal(..) | Value::Bool(_) => true,
        Value::Tagged(_, x) => tagged_leaf(x),
        _ => v.is_number(),
    }
}

/// The forward transform's group of a closure that is neither a primitive's
/// version nor anything but a forward value: the group it was transformed from.
fn forward_parent(v: &Value) -> Option<(&InstRc, u32, &Rc<Group>)> {
    match v {
        Value::Closure(inst, i) if !super::ops::group_is_prim_based(&inst.group) => {
            match &inst.group.origin {
                crate::anf::Origin::Transformed(Kind::F, parent) => Some((inst, *i, parent)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The forward version of a tag operation (or of `zero` on a leaf:
/// `struct_f`) at once on a small tree of pairs and forward closures over forward bundles of
/// tagged numbers (the sensitivity tuples of forward-over-reverse
/// backpropagators): these operations distribute over the parts of pairs and
/// over closure environments (a closure's group becomes the forward transform
/// of the operation's group), and on a leaf they are the bundle of the
/// operation on the primal and on the perturbed tangent; a lazy part in head
/// normal form is taken as that. `None` (nothing done) for anything else
/// (a lazy part not yet expanded, which the general definition keeps lazy), or
/// where the operation would fail, so that the general definition reports it
/// when it should. The caller checks that `v` is [`small`].
fn struct_f_tree(m: &mut Machine, op: StructOp, v: &Value) -> Result<Option<Value>> {
    use super::ops;
    Ok(match v {
        Value::Nil => Some(Value::Nil),
        Value::Pair(q) => {
            let Some(car) = struct_f_tree(m, op, &q.car)? else { return Ok(None) };
            let Some(cdr) = struct_f_tree(m, op, &q.cdr)? else { return Ok(None) };
            m.ad_work += 1;
            Some(Value::cons(car, cdr))
        }
        Value::Bundle(bd) => {
            let Some(dx) = bd.1.peel_if(Tag::Perturbation) else { return Ok(None) };
            if !tagged_leaf(&bd.0) || !tagged_leaf(&dx) {
                return Ok(None);
            }
            let (y, dy) = match op {
                StructOp::Tag(t) => (Value::tagged(t, bd.0.clone()), Value::tagged(t, dx)),
                StructOp::Untag(t) => match (bd.0.peel_if(t), dx.peel_if(t)) {
                    (Some(y), Some(dy)) => (y, dy),
                    _ => return Ok(None),
                },
                // (zero counts itself)
                StructOp::Zero => (ops::zero(m, &bd.0)?, ops::zero(m, &dx)?),
                _ => return Ok(None),
            };
            // primal, the operation, tangent, untag, the operation, tag, bundle
            m.ad_work += 7;
            Some(Value::bundle(y, Value::tagged(Tag::Perturbation, dy)))
        }
        Value::Lazy(z) => match z.hnf.get() {
            // Already in head normal form: its parts.
            Some(h) => {
                let h = h.clone();
                return struct_f_tree(m, op, &h);
            }
            None => None,
        },
        Value::Closure(..) => {
            let Some((inst, i, parent)) = forward_parent(v) else { return Ok(None) };
            let g = match op {
                StructOp::Tag(t) => super::transform_group(parent, ops::tag_kind(t)),
                StructOp::Untag(t) => match &parent.origin {
                    crate::anf::Origin::Transformed(k, pp) if *k == ops::tag_kind(t) => pp.clone(),
                    _ => return Ok(None),
                },
                StructOp::Zero => parent.clone(),
                _ => return Ok(None),
            };
            let mut env = InstBuilder::new(super::transform_group(&g, Kind::F), inst.env.len());
            for x in inst.env.iter() {
                let Some(y) = struct_f_tree(m, op, x)? else { return Ok(None) };
                env.push(y);
            }
            m.ad_work += 1;
            Some(Value::Closure(env.finish(), i))
        }
        _ => None,
    })
}

/// The forward version of `plus` (`Native::F` of `plus`, two arguments) at
/// once on small trees of pairs and forward closures over forward bundles of
/// tagged numbers: `plus` distributes over pairs and environments like the
/// operations of [`struct_f_tree`], and a lazy zero added to a forward value
/// leaves it as it is (as `plus` does with the primals and the tangents).
/// Lazy parts not in head normal form get the general definition; `None`
/// for anything else, or where `plus` would fail. The caller checks that the
/// values are [`small`] (unless one is a lazy zero).
fn plus_f_tree(m: &mut Machine, p: PrimId, a: &Value, b: &Value) -> Result<Option<Value>> {
    use super::ops;
    let forward = |v: &Value| match v {
        Value::Nil | Value::Pair(_) | Value::Lazy(_) => true,
        Value::Bundle(bd) => bd.1.outer_tag() == Some(Tag::Perturbation),
        _ => forward_parent(v).is_some(),
    };
    if is_lazy_zero(a) && forward(b) {
        m.ad_work += 1;
        return Ok(Some(b.clone()));
    }
    if is_lazy_zero(b) && forward(a) {
        m.ad_work += 1;
        return Ok(Some(a.clone()));
    }
    let forced = |v: &Value| match v {
        Value::Lazy(z) => z.hnf.get().cloned(),
        _ => None,
    };
    if let (Value::Lazy(_), _) | (_, Value::Lazy(_)) = (a, b) {
        // Lazy parts already in head normal form are taken apart; others stay lazy.
        return match (forced(a), forced(b)) {
            (Some(x), None) if !matches!(b, Value::Lazy(_)) => plus_f_tree(m, p, &x, b),
            (None, Some(y)) if !matches!(a, Value::Lazy(_)) => plus_f_tree(m, p, a, &y),
            (Some(x), Some(y)) => plus_f_tree(m, p, &x, &y),
            _ => Ok(struct_f2_slow(m, p, StructOp::Plus, a, b).ok()),
        };
    }
    Ok(match (a, b) {
        (Value::Nil, Value::Nil) => Some(Value::Nil),
        (Value::Pair(q), Value::Pair(r)) => {
            let Some(car) = plus_f_tree(m, p, &q.car, &r.car)? else { return Ok(None) };
            let Some(cdr) = plus_f_tree(m, p, &q.cdr, &r.cdr)? else { return Ok(None) };
            m.ad_work += 1;
            Some(Value::cons(car, cdr))
        }
        (Value::Bundle(x), Value::Bundle(y)) => {
            let (Some(dx), Some(dy)) = (x.1.peel_if(Tag::Perturbation), y.1.peel_if(Tag::Perturbation))
            else {
                return Ok(None);
            };
            if ![&x.0, &y.0, &dx, &dy].iter().all(|v| tagged_leaf(v)) {
                return Ok(None);
            }
            let (Ok(s), Ok(ds)) = (ops::plus(m, &x.0, &y.0), ops::plus(m, &dx, &dy)) else { return Ok(None) };
            // primal twice, plus, tangent twice, untag twice, plus, tag, bundle (the
            // two `plus`es counted themselves)
            m.ad_work += 8;
            Some(Value::bundle(s, Value::tagged(Tag::Perturbation, ds)))
        }
        (Value::Closure(..), Value::Closure(..)) => {
            let (Some((i1, k1, _)), Some((i2, k2, _))) = (forward_parent(a), forward_parent(b)) else {
                return Ok(None);
            };
            if k1 != k2 || !Rc::ptr_eq(&i1.group, &i2.group) || i1.env.len() != i2.env.len() {
                return Ok(None);
            }
            let mut env = InstBuilder::new(i1.group.clone(), i1.env.len());
            for (x, y) in i1.env.iter().zip(i2.env.iter()) {
                let Some(z) = plus_f_tree(m, p, x, y)? else { return Ok(None) };
                env.push(z);
            }
            m.ad_work += 1;
            Some(Value::Closure(env.finish(), k1))
        }
        _ => None,
    })
}

/// Is this a lazy zero?
fn is_lazy_zero(v: &Value) -> bool {
    matches!(v, Value::Lazy(z) if z.zero)
}

/// The forward version of a two-argument AD primitive (`plus`, `bundle`) by
/// its definition, step by step (the operations distribute over the pair of
/// arguments, so they are applied to each and the tuple is never built).
fn struct_f2_slow(m: &mut Machine, p: PrimId, op: StructOp, a: &Value, b: &Value) -> Result<Value> {
    use super::ops;
    let (xa, xb) = (ops::primal(m, a)?, ops::primal(m, b)?);
    let y = (prims::prim(p).imp)(m, &[xa, xb])?;
    let (ta, tb) = (ops::tangent(m, a)?, ops::tangent(m, b)?);
    let da = ops::untag(m, Tag::Perturbation, &ta)?;
    let db = ops::untag(m, Tag::Perturbation, &tb)?;
    let d = struct_jvp2(m, op, &da, &db)?;
    let pd = ops::tag(m, Tag::Perturbation, &d)?;
    ops::bundle(m, &y, &pd)
}

/// [`struct_f`] by its definition, step by step.
fn struct_f_slow(m: &mut Machine, p: PrimId, op: StructOp, v: &Value) -> Result<Value> {
    use super::ops;
    let x = ops::primal(m, v)?;
    m.stack.push(x);
    let y = m.call_prim(p, 1)?;
    let t = ops::tangent(m, v)?;
    let dx = ops::untag(m, Tag::Perturbation, &t)?;
    let d = struct_jvp(m, op, &dx)?;
    let pd = ops::tag(m, Tag::Perturbation, &d)?;
    ops::bundle(m, &y, &pd)
}

/// The tangent rules of the AD primitives (the primitive table's, natively).
fn struct_jvp(m: &mut Machine, op: StructOp, dx: &Value) -> Result<Value> {
    use super::ops;
    match op {
        StructOp::Zero => ops::lazy_zero(m, dx),
        StructOp::Tag(t) => ops::tag(m, t, dx),
        StructOp::Untag(t) => ops::untag(m, t, dx),
        StructOp::Primal => ops::primal(m, dx),
        StructOp::Tangent => ops::tangent(m, dx),
        StructOp::Bundle | StructOp::Plus => {
            let (a, b) = two(m, dx)?;
            struct_jvp2(m, op, &a, &b)
        }
    }
}

/// The tangent rule of a binary AD primitive, on the two parts of the tangent.
fn struct_jvp2(m: &mut Machine, op: StructOp, a: &Value, b: &Value) -> Result<Value> {
    match op {
        StructOp::Bundle => super::ops::bundle(m, a, b),
        StructOp::Plus => super::ops::plus(m, a, b),
        _ => Err(crate::error::Error::runtime(None, "internal error: not a binary AD primitive")),
    }
}

/// The cotangent rules of the AD primitives; `x` is there when the rule uses it.
pub(super) fn struct_vjp(m: &mut Machine, op: StructOp, x: Option<&Value>, yb: &Value) -> Result<Value> {
    use super::ops;
    let need = |x: Option<&Value>| {
        x.cloned().ok_or_else(|| {
            crate::error::Error::runtime(None, "internal error: a rule's captured value is missing")
        })
    };
    match op {
        StructOp::Zero => ops::lazy_zero(m, &need(x)?),
        StructOp::Tag(t) => ops::untag(m, t, yb),
        StructOp::Untag(t) => ops::tag(m, t, yb),
        // (bundle yb (zero (tangent x)))
        StructOp::Primal => {
            let t = ops::tangent(m, &need(x)?)?;
            let z = ops::lazy_zero(m, &t)?;
            ops::bundle(m, yb, &z)
        }
        // (bundle (zero (primal x)) yb)
        StructOp::Tangent => {
            let p = ops::primal(m, &need(x)?)?;
            let z = ops::lazy_zero(m, &p)?;
            ops::bundle(m, &z, yb)
        }
        // (cons (primal yb) (tangent yb))
        StructOp::Bundle => {
            let p = ops::primal(m, yb)?;
            let t = ops::tangent(m, yb)?;
            Ok(Value::cons(p, t))
        }
        // (cons yb yb)
        StructOp::Plus => Ok(Value::cons(yb.clone(), yb.clone())),
    }
}

/// The two parts of a tuple argument, as a binary primitive takes them.
fn two(m: &mut Machine, v: &Value) -> Result<(Value, Value)> {
    let h = super::ops::hnf(m, v)?;
    match h {
        Value::Pair(p) => Ok((p.car.clone(), p.cdr.clone())),
        other => Err(crate::error::Error::runtime(
            None,
            format!("expected a pair of arguments, got {}", crate::print::brief(&other, 60)),
        )),
    }
}
