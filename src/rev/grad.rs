//! Derivatives of reversible code, NiLang's way: no tape. Forward mode carries a
//! tangent next to every variable. Reverse mode runs the procedure forward, then
//! backward on (value, adjoint) pairs: each update uncomputes its value and applies
//! the rule of its inverse update to the adjoints (backward of `y += a*b` is
//! `y -= a*b; a-bar += y-bar*b; b-bar += y-bar*a`), ancillas start with a zero
//! adjoint and drop theirs at `delocal`. Memory is the store, whatever the number
//! of loop iterations.
//!
//! Right-hand sides are differentiated natively when they are simple arithmetic,
//! otherwise with VLAD's own AD (`*j` for adjoints, `bundle` for tangents).

use super::compile::{CExpr, CPlace, Deriv, RExpr};
use super::exec::{apply_op, get_path, get_path_mut, tuple, val_value, Dir, Exec, Frame, Notes, Val};
use super::syntax::UpOp;
use crate::ad::ops;
use crate::anf::Kind;
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::num;
use crate::source::Span;
use crate::stack::{try_grow, RED_ZONE, SEGMENT};
use crate::value::{Tag, Value};
use smallvec::{smallvec, SmallVec};

/// Arguments and their tangents, as the executor holds them.
type Values = SmallVec<[Value; 3]>;

#[inline]
fn arith(op: char, a: &Value, b: &Value) -> Result<Value> {
    // (a double with a double or an exact integer, the commonest: inline)
    match num::real_arith(op, a, b) {
        Some(v) => Ok(v),
        None => arith_general(op, a, b),
    }
}

#[inline(never)]
fn arith_general(op: char, a: &Value, b: &Value) -> Result<Value> {
    match num::arith(op, a, b) {
        Some(Ok(v)) => Ok(v),
        Some(Err(m)) => Err(Error::runtime(None, format!("derivative: {}", m))),
        None => Err(Error::runtime(
            None,
            format!(
                "derivative: expected numbers, got {} and {}",
                super::exec::describe(a),
                super::exec::describe(b)
            ),
        )),
    }
}

/// Is a derivative zero (`()` stands for zero)?
pub fn is_zero_der(v: &Value) -> bool {
    match v {
        Value::Nil | Value::Int(0) => true,
        Value::Real(r) => *r == 0.0,
        _ => false,
    }
}

/// Sum of derivatives (`()` is zero; lists add elementwise).
pub fn dadd(a: &Value, b: &Value) -> Result<Value> {
    if let (Value::Real(x), Value::Real(y)) = (a, b) {
        return Ok(Value::Real(x + y));
    }
    match (a, b) {
        (Value::Nil, _) => Ok(b.clone()),
        (_, Value::Nil) => Ok(a.clone()),
        // (lists as long, and nested as deeply, as memory allows)
        (Value::Pair(p), Value::Pair(q)) => {
            try_grow(RED_ZONE, SEGMENT, || Ok(Value::cons(dadd(&p.car, &q.car)?, dadd(&p.cdr, &q.cdr)?)))
        }
        (x, y) if x.is_number() && y.is_number() => arith('+', x, y),
        _ => Ok(a.clone()),
    }
}

fn dmul(a: &Value, b: &Value) -> Result<Value> {
    if matches!(a, Value::Nil) || matches!(b, Value::Nil) {
        return Ok(Value::Nil);
    }
    arith('*', a, b)
}

fn ddiv(a: &Value, b: &Value) -> Result<Value> {
    if matches!(a, Value::Nil) {
        return Ok(Value::Nil);
    }
    arith('/', a, b)
}

fn dneg(a: &Value) -> Result<Value> {
    if matches!(a, Value::Nil) {
        return Ok(Value::Nil);
    }
    arith('-', &Value::Int(0), a)
}

fn dsub(a: &Value, b: &Value) -> Result<Value> {
    dadd(a, &dneg(b)?)
}

/// Is `v` a procedure's tangent or sensitivity (shaped like the closure, perhaps lazy)?
fn is_proc_der(v: &Value) -> bool {
    matches!(v, Value::Closure(..) | Value::Lazy(_))
}

/// A derivative store entry shaped like a value (non-numbers get `()`, except a
/// closure, whose tangent or sensitivity is kept: it captures values that depend on
/// what is differentiated).
pub fn der_val(v: &Val, d: &Value) -> Val {
    if let (Val::A(_), Value::Vector(rv)) = (v, d) {
        let l = Value::list(rv.host().iter().map(|x| Value::Real(*x)).collect::<Vec<_>>());
        return der_val(v, &l);
    }
    match v {
        Val::S(x) if x.is_number() && d.is_number() => Val::S(d.clone()),
        Val::S(x) if x.is_number() => Val::S(num::zero_like(x)),
        Val::S(Value::Closure(..)) if is_proc_der(d) => Val::S(d.clone()),
        Val::S(_) => Val::S(Value::Nil),
        Val::A(items) => {
            let mut cur = d;
            let mut out = std::collections::VecDeque::with_capacity(items.len());
            for it in items {
                match cur {
                    Value::Pair(p) => {
                        out.push_back(crate::stack::grow(|| der_val(it, &p.car)));
                        cur = &p.cdr;
                    }
                    _ => out.push_back(crate::stack::grow(|| der_val(it, &Value::Nil))),
                }
            }
            Val::A(out)
        }
    }
}

/// Adds a derivative into a store entry.
fn der_add(slot: &mut Val, d: &Value) -> Result<()> {
    match slot {
        Val::S(x) => {
            let sum = dadd(x, d)?;
            std::mem::replace(x, sum).discard();
        }
        Val::A(items) => {
            let mut cur = d;
            for it in items.iter_mut() {
                match cur {
                    Value::Pair(p) => {
                        try_grow(RED_ZONE, SEGMENT, || der_add(it, &p.car))?;
                        cur = &p.cdr;
                    }
                    _ => break,
                }
            }
        }
    }
    Ok(())
}

/// Where a tangent or sensitivity does not fit the value it belongs to: the path to
/// the part (element indices, outermost first), the part and its derivative.
pub struct Misfit {
    pub path: Vec<usize>,
    pub x: Value,
    pub d: Value,
}

/// The number of elements of a list and its tail (`()` for a proper list).
fn spine(v: &Value) -> (usize, &Value) {
    let (mut n, mut cur) = (0, v);
    while let Value::Pair(p) = cur {
        n += 1;
        cur = &p.cdr;
    }
    (n, cur)
}

/// Checks a tangent or sensitivity `d` that comes in from VLAD (forced) against the
/// value `x` it belongs to, as VLAD's AD would: pairs where `x` has pairs (lists of
/// the same length), numbers (or `()`, a zero) where it has numbers, a packed vector
/// of as many elements (or `()`) for a packed vector, `()` for `()`, a boolean, number
/// or `()` for a boolean, a procedure's derivative (or `()`) for a procedure. A lazy
/// zero fits anything. Nothing here is coerced: what does not fit is an error for
/// the caller to report (see [`conform`] for the derivatives the runs compute).
pub fn misfit(x: &Value, d: &Value) -> Option<Misfit> {
    let mut path = Vec::new();
    misfit_at(x, d, &mut path)
}

fn misfit_at(x: &Value, d: &Value, path: &mut Vec<usize>) -> Option<Misfit> {
    crate::stack::grow(|| misfit_here(x, d, path))
}

fn misfit_here(x: &Value, d: &Value, path: &mut Vec<usize>) -> Option<Misfit> {
    let here = |path: &Vec<usize>| Some(Misfit { path: path.clone(), x: x.clone(), d: d.clone() });
    if let Value::Lazy(z) = d {
        if z.zero {
            return None;
        }
    }
    let fits = match x {
        Value::Pair(_) => {
            let ((nx, tx), (nd, td)) = (spine(x), spine(d));
            if !matches!(d, Value::Pair(_)) || nx != nd {
                return here(path);
            }
            let (mut cx, mut cd, mut i) = (x, d, 0);
            while let (Value::Pair(p), Value::Pair(q)) = (cx, cd) {
                path.push(i);
                if let Some(m) = misfit_at(&p.car, &q.car, path) {
                    return Some(m);
                }
                path.pop();
                (cx, cd, i) = (&p.cdr, &q.cdr, i + 1);
            }
            // (an improper list's tail: reported with the whole list)
            if misfit_at(tx, td, &mut Vec::new()).is_some() {
                return here(path);
            }
            true
        }
        _ if x.is_number() => d.is_number() || matches!(d, Value::Nil),
        Value::Vector(rv) => match d {
            // (as `plus` allows: a matrix and a vector of its elements conform)
            Value::Vector(dv) => dv.len() == rv.len(),
            Value::Nil => true,
            _ => false,
        },
        Value::Bool(_) => matches!(d, Value::Bool(_) | Value::Nil) || d.is_number(),
        Value::Nil => matches!(d, Value::Nil),
        Value::Closure(..) | Value::Prim(_) | Value::Rev(_) => {
            matches!(d, Value::Closure(..) | Value::Lazy(_) | Value::Nil | Value::Prim(_) | Value::Rev(_))
        }
        // (tagged and lazy values do not reach a plain run)
        _ => true,
    };
    if fits {
        None
    } else {
        here(path)
    }
}

/// A derivative the runs computed, shaped exactly like `x` for VLAD's AD operations:
/// numbers where `x` has numbers (zero for `()`, the runs' zero), a packed vector
/// for a packed vector (the store holds it as a list), `(zero x)` elsewhere. Only for
/// what the executor computes (its store holds `()` for zero and lists for vectors):
/// tangents and sensitivities coming in from VLAD are checked with [`misfit`] instead.
pub fn conform(m: &mut Machine, x: &Value, d: &Value) -> Result<Value> {
    if x.is_number() {
        return Ok(if d.is_number() { d.clone() } else { num::zero_like(x) });
    }
    if let Value::Vector(_) = x {
        return Ok(match d {
            Value::Vector(_) => d.clone(),
            Value::Pair(_) => match super::exec::repack(d.clone(), x) {
                v @ Value::Vector(_) => v,
                _ => ops::zero(m, x)?,
            },
            _ => ops::zero(m, x)?,
        });
    }
    if let Value::Pair(_) = x {
        let mut xs = Vec::new();
        let (mut cx, mut cd) = (x.clone(), d.clone());
        while let Value::Pair(p) = cx.clone() {
            let (dcar, dcdr) = match &cd {
                Value::Pair(q) => (q.car.clone(), q.cdr.clone()),
                _ => (Value::Nil, Value::Nil),
            };
            // (lists nested in lists as deeply as memory allows)
            xs.push(try_grow(RED_ZONE, SEGMENT, || conform(m, &p.car, &dcar))?);
            cx = p.cdr.clone();
            cd = dcdr;
        }
        let tail = conform(m, &cx, &cd)?;
        return Ok(xs.into_iter().rev().fold(tail, |acc, v| Value::cons(v, acc)));
    }
    if let (Value::Closure(..), true) = (x, is_proc_der(d)) {
        return Ok(d.clone());
    }
    ops::zero(m, x)
}

fn partials(m: &mut Machine, dv: Deriv, xs: &[Value], y: &Value) -> Result<SmallVec<[Value; 2]>> {
    let one = Value::Int(1);
    let both_ints = || xs.iter().all(|x| matches!(x, Value::Int(_) | Value::Big(_)));
    let _ = m;
    Ok(match dv {
        Deriv::Add => smallvec![one.clone(), one],
        Deriv::Sub => smallvec![one, Value::Int(-1)],
        Deriv::Mul => smallvec![xs[1].clone(), xs[0].clone()],
        Deriv::FloorDiv if both_ints() => smallvec![],
        Deriv::Div | Deriv::FloorDiv => {
            smallvec![arith('/', &one, &xs[1])?, dneg(&arith('/', y, &xs[1])?)?]
        }
        Deriv::Mod if xs.iter().all(num::is_exact_num) => smallvec![],
        Deriv::Mod => smallvec![one, dneg(&arith('/', &arith('-', &xs[0], y)?, &xs[1])?)?],
        Deriv::Sqrt => smallvec![arith('/', &one, &arith('*', &Value::Int(2), y)?)?],
        Deriv::Exp => smallvec![y.clone()],
        Deriv::Log => smallvec![arith('/', &one, &xs[0])?],
        Deriv::Sin => smallvec![num::real_fn(f64::cos, &xs[0]).unwrap_or(Value::Nil)],
        Deriv::Cos => smallvec![dneg(&num::real_fn(f64::sin, &xs[0]).unwrap_or(Value::Nil))?],
        Deriv::Atan => {
            let r = arith('+', &arith('*', &xs[0], &xs[0])?, &arith('*', &xs[1], &xs[1])?)?;
            smallvec![arith('/', &xs[1], &r)?, dneg(&arith('/', &xs[0], &r)?)?]
        }
        Deriv::Id => smallvec![one],
        Deriv::Zero => smallvec![],
    })
}

fn needs_result(dv: Deriv) -> bool {
    matches!(dv, Deriv::Div | Deriv::FloorDiv | Deriv::Mod | Deriv::Sqrt | Deriv::Exp)
}

/// Forward mode through a VLAD procedure: `(y, dy)` for `f` (with tangent `df`, `()`
/// when it is constant) at `x` with tangent `dx`.
pub fn apply_jvp(
    m: &mut Machine,
    f: Value,
    df: &Value,
    x: Value,
    dx: &Value,
    sp: Span,
) -> Result<(Value, Value)> {
    let ff = if is_zero_der(df) {
        ops::lift(m, Kind::F, &f)?
    } else {
        let dfc = conform(m, &f, df)?;
        let dfp = ops::tag(m, Tag::Perturbation, &dfc)?;
        ops::bundle(m, &f, &dfp)?
    };
    let dxc = conform(m, &x, dx)?;
    let dxp = ops::tag(m, Tag::Perturbation, &dxc)?;
    let xb = ops::bundle(m, &x, &dxp)?;
    let r = m.apply_value(ff, xb, Some(sp))?;
    let y = ops::primal(m, &r)?;
    let y = ops::force(m, &y)?;
    let t = ops::tangent(m, &r)?;
    let dy = ops::untag(m, Tag::Perturbation, &t)?;
    let dy = ops::force(m, &dy)?;
    Ok((y, dy))
}

/// Reverse mode through a VLAD procedure: the cotangents of `f` (shaped like the
/// procedure: those of the values it captures) and of `x`, for cotangent `ybar` of `(f x)`.
pub fn apply_vjp(m: &mut Machine, f: Value, x: Value, ybar: &Value, sp: Span) -> Result<(Value, Value)> {
    let internal = |what: &str, v: &Value| {
        Error::runtime(
            Some(sp),
            format!("internal error: expected {}, got {}", what, super::exec::describe(v)),
        )
    };
    let fr = ops::tag(m, Tag::Reverse, &f)?;
    let xr = ops::tag(m, Tag::Reverse, &x)?;
    let r = m.apply_value(fr, xr, Some(sp))?;
    let r = ops::hnf(m, &r)?;
    let Value::Pair(p) = &r else { return Err(internal("a (value . backpropagator) pair", &r)) };
    let y = ops::untag(m, Tag::Reverse, &p.car)?;
    let y = ops::force(m, &y)?;
    let yc = conform(m, &y, ybar)?;
    let s = ops::tag(m, Tag::Sensitivity, &yc)?;
    let out = m.apply_value(p.cdr.clone(), s, Some(sp))?;
    let out = ops::untag(m, Tag::Sensitivity, &out)?;
    let out = ops::hnf(m, &out)?;
    let Value::Pair(q) = &out else { return Err(internal("a (f-bar . x-bar) pair", &out)) };
    Ok((q.car.clone(), ops::force(m, &q.cdr)?))
}

impl Exec<'_> {
    /// Value and tangent of an expression.
    pub fn eval_t(&mut self, f: Frame, e: &RExpr) -> Result<(Value, Value)> {
        // (a leaf needs no stack check)
        match e {
            RExpr::Const(v) => return Ok((v.clone(), Value::Nil)),
            RExpr::Var(s) => {
                let i = f.base + *s as usize;
                return Ok((val_value(&self.vals[i]), val_value(&self.ders[i])));
            }
            _ => {}
        }
        self.guarded(|x| x.eval_t_here(f, e))
    }

    fn eval_t_here(&mut self, f: Frame, e: &RExpr) -> Result<(Value, Value)> {
        match e {
            RExpr::Const(_) | RExpr::Global(_) => Ok((self.eval(f, e)?, Value::Nil)),
            // the value (and derivative) of the part that decides, as in VLAD
            RExpr::And(parts) => {
                let mut r = (Value::Bool(true), Value::Nil);
                for x in parts.iter() {
                    r = self.eval_t(f, x)?;
                    if !r.0.is_true_stripped() {
                        break;
                    }
                }
                Ok(r)
            }
            RExpr::Or(parts) => {
                for x in parts.iter() {
                    let r = self.eval_t(f, x)?;
                    if r.0.is_true_stripped() {
                        return Ok(r);
                    }
                }
                Ok((Value::Bool(false), Value::Nil))
            }
            RExpr::Var(s) => {
                let i = f.base + *s as usize;
                Ok((val_value(&self.vals[i]), val_value(&self.ders[i])))
            }
            RExpr::Elem(s, idx, _) => {
                let v = self.eval(f, e)?;
                let iv = self.eval_all(f, idx)?;
                let d = get_path(&self.ders[f.base + *s as usize], &iv).map(val_value).unwrap_or(Value::Nil);
                Ok((v, d))
            }
            RExpr::Prim(p, dv, args, sp, op) => match &args[..] {
                // (one and two arguments, the commonest: in arrays)
                [a] => {
                    let (x, dx) = self.eval_t(f, a)?;
                    self.prim_t(f, *p, *dv, None, [x], [dx], *sp)
                }
                [a, b] => {
                    let (x, dx) = self.eval_t(f, a)?;
                    let (y, dy) = self.eval_t(f, b)?;
                    self.prim_t(f, *p, *dv, *op, [x, y], [dx, dy], *sp)
                }
                _ => {
                    let (xs, dxs) = self.eval_t_all(f, args)?;
                    self.prim_t(f, *p, *dv, None, xs, dxs, *sp)
                }
            },
            RExpr::If(b) => {
                let c = self.eval(f, &b[0])?;
                self.eval_t(f, if c.is_true_stripped() { &b[1] } else { &b[2] })
            }
            RExpr::Apply(fe, args, sp) => {
                let (fv, dfv) = self.eval_t(f, fe)?;
                let (xs, dxs) = self.eval_t_all(f, args)?;
                if is_zero_der(&dfv) && dxs.iter().all(is_zero_der) {
                    let y = self.m.apply_value(fv, tuple(xs), Some(*sp))?;
                    return Ok((y, Value::Nil));
                }
                apply_jvp(self.m, fv, &dfv, tuple(xs), &tuple(dxs), *sp)
            }
        }
    }

    /// Accumulates the cotangent `cot` of an expression into the adjoints of the
    /// variables it reads (evaluating its parts once, noting their values).
    pub fn vjp(&mut self, f: Frame, e: &RExpr, cot: Value) -> Result<()> {
        if is_zero_der(&cot) {
            return Ok(());
        }
        self.notes.clear();
        self.note_parts(f, e)?;
        self.vjp_of_notes(f, e, cot)
    }

    /// Values and tangents of expressions, in order.
    fn eval_t_all(&mut self, f: Frame, es: &[RExpr]) -> Result<(Values, Values)> {
        let (mut xs, mut dxs) = (SmallVec::new(), SmallVec::new());
        for e in es {
            let (x, dx) = self.eval_t(f, e)?;
            xs.push(x);
            dxs.push(dx);
        }
        Ok((xs, dxs))
    }

    /// Value and tangent of primitive `p` at `xs` with tangents `dxs` (`op`: its
    /// inline operation, for two numbers, as a plain run computes it).
    #[allow(clippy::too_many_arguments)]
    fn prim_t<A: AsRef<[Value]> + AsMut<[Value]>>(
        &mut self,
        f: Frame,
        p: crate::prims::PrimId,
        dv: Deriv,
        op: Option<crate::resolve::Op2>,
        mut xs: A,
        dxs: A,
        sp: Span,
    ) -> Result<(Value, Value)> {
        let inline = match (op, xs.as_ref(), &self.m.meter) {
            (Some(op), [x, y], None) => crate::eval::inline_arith(op, x, y),
            _ => None,
        };
        let y = match inline {
            // (as `prim_value` reduces the primitive's result in a mod32 procedure)
            Some(Value::Int(i)) if f.code.options.mod32 => Value::Int(i.rem_euclid(1 << 32)),
            Some(v) => v,
            None => {
                // (the primitive gets copies: the partials below read the arguments)
                let mut args: SmallVec<[Value; 3]> = xs.as_ref().iter().cloned().collect();
                let y = self.call_prim(f, p, &mut args, sp)?;
                if f.code.options.mod32 && matches!(y, Value::Int(_) | Value::Big(_)) {
                    // as in a plain run (the wrap is the identity locally: same derivative)
                    super::exec::wrap32(&y).map_err(|v| self.violation(f, self.dir, sp, v))?
                } else {
                    y
                }
            }
        };
        if dv == Deriv::Zero || dxs.as_ref().iter().all(is_zero_der) {
            return Ok((y, Value::Nil));
        }
        let ps = partials(self.m, dv, xs.as_mut(), &y).map_err(|e| e.at(sp))?;
        let mut dy = Value::Nil;
        for (pd, dx) in ps.iter().zip(dxs.as_ref()) {
            dy = dadd(&dy, &dmul(pd, dx)?)?;
        }
        Ok((y, dy))
    }

    /// [`Exec::vjp`] of `e`, whose evaluation `self.notes` holds (from its start).
    fn vjp_of_notes(&mut self, f: Frame, e: &RExpr, cot: Value) -> Result<()> {
        let mut notes = std::mem::take(&mut self.notes);
        let r = self.vjp_noted(f, e, cot, &mut notes, 0);
        notes.clear();
        self.notes = notes;
        r
    }

    /// [`Exec::vjp`] of the expression whose evaluation was noted at `at` of `notes`.
    fn vjp_noted(&mut self, f: Frame, e: &RExpr, cot: Value, notes: &mut Notes, at: usize) -> Result<()> {
        if let RExpr::Var(_) | RExpr::Const(_) | RExpr::Global(_) = e {
            // (a leaf needs no stack check)
            return self.vjp_here(f, e, cot, notes, at);
        }
        self.guarded(|x| x.vjp_here(f, e, cot, notes, at))
    }

    fn vjp_here(&mut self, f: Frame, e: &RExpr, cot: Value, notes: &mut Notes, at: usize) -> Result<()> {
        if is_zero_der(&cot) {
            return Ok(());
        }
        match e {
            RExpr::Const(_) | RExpr::Global(_) => Ok(()),
            RExpr::And(parts) | RExpr::Or(parts) => {
                // the part whose value it is: the first false (and) or true (or) one
                // (the parts evaluated are those noted)
                let or = matches!(e, RExpr::Or(_));
                let mut p = at + 1;
                for (i, x) in parts.iter().enumerate() {
                    if p == notes.end(at) {
                        break;
                    }
                    if notes.value(p).is_true_stripped() == or || (!or && i + 1 == parts.len()) {
                        return self.vjp_noted(f, x, cot, notes, p);
                    }
                    p = notes.end(p);
                }
                Ok(())
            }
            RExpr::Var(s) => {
                let slot = &mut self.ders[f.base + *s as usize];
                match slot {
                    // a closure's sensitivities add as VLAD values do
                    Val::S(d) if is_proc_der(d) && is_proc_der(&cot) => {
                        *d = ops::plus(self.m, d, &cot)?;
                        Ok(())
                    }
                    _ => der_add(slot, &cot),
                }
            }
            RExpr::Elem(s, _, _) => {
                let iv = notes.take_parts(at);
                if let Ok(d) = get_path_mut(&mut self.ders[f.base + *s as usize], &iv) {
                    der_add(d, &cot)?;
                }
                Ok(())
            }
            RExpr::Prim(p, dv, args, sp, _) => {
                if *dv == Deriv::Zero {
                    return Ok(());
                }
                let xs = notes.take_parts(at);
                let y =
                    if needs_result(*dv) { self.call_prim(f, *p, &mut xs.clone(), *sp)? } else { Value::Nil };
                let ps = partials(self.m, *dv, &xs, &y).map_err(|e| e.at(*sp))?;
                let mut n = at + 1;
                for (a, pd) in args.iter().zip(ps.iter()) {
                    if !is_zero_der(pd) {
                        let c = dmul(&cot, pd)?;
                        self.vjp_noted(f, a, c, notes, n)?;
                    }
                    n = notes.end(n);
                }
                Ok(())
            }
            RExpr::If(b) => {
                // (its notes: the test's, then the branch's)
                let taken = if notes.value(at + 1).is_true_stripped() { &b[1] } else { &b[2] };
                let branch = notes.end(at + 1);
                self.vjp_noted(f, taken, cot, notes, branch)
            }
            RExpr::Apply(fe, args, sp) => {
                if args.is_empty() && matches!(**fe, RExpr::Const(_) | RExpr::Global(_)) {
                    return Ok(());
                }
                // (its notes: the procedure's, then the arguments')
                let mut xs = notes.take_parts(at);
                let fv = xs.remove(0);
                let (fbar, xbar) = apply_vjp(self.m, fv, tuple(xs), &cot, *sp)?;
                if !matches!(**fe, RExpr::Const(_) | RExpr::Global(_)) {
                    self.vjp_noted(f, fe, fbar, notes, at + 1)?;
                }
                let n = args.len();
                let mut cur = xbar;
                let mut p = notes.end(at + 1);
                for (i, a) in args.iter().enumerate() {
                    let part = if i + 1 == n {
                        std::mem::replace(&mut cur, Value::Nil)
                    } else {
                        match &cur {
                            Value::Pair(p) => {
                                let (car, cdr) = (p.car.clone(), p.cdr.clone());
                                cur = cdr;
                                car
                            }
                            _ => Value::Nil,
                        }
                    };
                    self.vjp_noted(f, a, part, notes, p)?;
                    p = notes.end(p);
                }
                Ok(())
            }
        }
    }

    /// An update in a derivative mode: the value as in plain mode, plus the
    /// tangent rule (forward mode) or the adjoint rule of the inverse update.
    #[allow(clippy::too_many_arguments)]
    pub fn update_deriv(
        &mut self,
        f: Frame,
        dir: Dir,
        op: UpOp,
        place: &CPlace,
        iv: &[Value],
        rhs: &CExpr,
        span: Span,
    ) -> Result<()> {
        let slot = f.base + place.slot as usize;
        let mod32 = f.code.options.mod32;
        let (e, de) = if self.mode == super::exec::Mode::Tangent {
            self.eval_t(f, &rhs.e)?
        } else {
            // (noted: the adjoint rule below reads its parts' values from the notes)
            self.notes.clear();
            (self.eval_noting::<true>(f, &rhs.e)?, Value::Nil)
        };
        let t = match get_path(&self.vals[slot], iv) {
            Ok(Val::S(t)) => t.clone(),
            Ok(Val::A(_)) => {
                let v = ("not a number", format!("{} is a vector, not a number", place.text));
                return Err(self.update_error(f, dir, span, op, place, rhs, &e, v, true));
            }
            Err(v) => return Err(self.update_error(f, dir, span, op, place, rhs, &e, v, true)),
        };
        let td = match get_path(&self.ders[slot], iv) {
            Ok(Val::S(d)) => d.clone(),
            _ => Value::Nil,
        };
        let nt = apply_op(op, &t, &e, mod32)
            .map_err(|v| self.update_error(f, dir, span, op, place, rhs, &e, v, false))?;
        let ntd = if self.mode == super::exec::Mode::Tangent {
            match op {
                UpOp::Add => dadd(&td, &de)?,
                UpOp::Sub => dsub(&td, &de)?,
                UpOp::Mul => dadd(&dmul(&td, &e)?, &dmul(&t, &de)?)?,
                UpOp::Div => ddiv(&dsub(&td, &dmul(&nt, &de)?)?, &e)?,
                UpOp::Xor => td,
            }
        } else {
            // The executed update undoes the forward run's inverse update.
            match op {
                UpOp::Add => {
                    self.vjp_of_notes(f, &rhs.e, dneg(&td)?)?;
                    td
                }
                UpOp::Sub => {
                    self.vjp_of_notes(f, &rhs.e, td.clone())?;
                    td
                }
                UpOp::Div => {
                    self.vjp_of_notes(f, &rhs.e, dmul(&td, &nt)?)?;
                    dmul(&td, &e)?
                }
                UpOp::Mul => {
                    self.vjp_of_notes(f, &rhs.e, dneg(&ddiv(&dmul(&td, &t)?, &e)?)?)?;
                    ddiv(&td, &e)?
                }
                UpOp::Xor => td,
            }
        };
        if let Ok(Val::S(x)) = get_path_mut(&mut self.vals[slot], iv) {
            std::mem::replace(x, nt).discard();
        }
        t.discard();
        e.discard();
        de.discard();
        if let Ok(d) = get_path_mut(&mut self.ders[slot], iv) {
            *d = Val::S(ntd);
        }
        Ok(())
    }
}
