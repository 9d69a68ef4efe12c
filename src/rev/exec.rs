//! The executor: one interpreter for compiled reversible code with a direction
//! flag. Running a statement backward executes its inverse directly (updates
//! use the inverse operator, sequences run in reverse, conditionals enter by
//! their assertion and check their test...), so `uncall` never builds an inverse.
//!
//! Variables live in a private store: a stack of frames of [`Val`]s (a VLAD
//! list passed in becomes a vector with O(1) `ref`, and goes back out as a list).
//! A call passes variables by reference (moved into the callee's frame and back).
//! In the derivative modes a parallel store holds each variable's tangent or
//! adjoint (see `grad.rs`).

use super::compile::{CExpr, CPlace, CStmt, Callee, Deriv, ProcCode, RExpr};
use super::syntax::UpOp;
use super::RevProc;
use crate::error::{Error, ErrorKind, Result};
use crate::eval::Machine;
use crate::num;
use crate::source::Span;
use crate::value::Value;
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::rc::Rc;

/// A variable's value in the store.
#[derive(Clone)]
pub enum Val {
    S(Value),
    /// A vector (or stack: the top is element 0).
    A(VecDeque<Val>),
}

impl Drop for Val {
    /// Arrays nested in arrays as deeply as memory allows (a list nested in
    /// lists millions deep, as an argument) are emptied with a work list, not
    /// by recursion, which overflowed the native stack.
    fn drop(&mut self) {
        let Val::A(items) = self else { return };
        if items.iter().all(|x| matches!(x, Val::S(_))) {
            return;
        }
        let mut work = vec![std::mem::take(items)];
        while let Some(mut q) = work.pop() {
            for mut v in q.drain(..) {
                if let Val::A(inner) = &mut v {
                    if !inner.is_empty() {
                        work.push(std::mem::take(inner));
                    }
                }
            }
        }
    }
}

impl Default for Val {
    fn default() -> Self {
        Val::S(Value::Nil)
    }
}

/// Converts a VLAD value for the store: proper lists become vectors.
pub fn to_val(m: &mut Machine, v: &Value) -> Result<Val> {
    let v = crate::ad::ops::force(m, v)?;
    Ok(to_val_forced(&v))
}

fn to_val_forced(v: &Value) -> Val {
    match v {
        Value::Nil => Val::A(VecDeque::new()),
        // A packed vector (or a matrix, row-major) is a vector of reals here.
        Value::Vector(rv) => Val::A(rv.host().iter().map(|x| Val::S(Value::Real(*x))).collect()),
        Value::Pair(_) => {
            // (the spine first: a pair that is not a proper list is held as
            // it is, its parts not converted; converting them first made a
            // pair that shares its parts, as `(cons x x)` nested, take time
            // exponential in its depth)
            let mut cur = v;
            let mut n = 0;
            while let Value::Pair(p) = cur {
                cur = &p.cdr;
                n += 1;
            }
            if !matches!(cur, Value::Nil) {
                return Val::S(v.clone());
            }
            let mut items = VecDeque::with_capacity(n);
            let mut cur = v;
            while let Value::Pair(p) = cur {
                // (lists nested in lists as deeply as memory allows)
                items.push_back(crate::stack::grow(|| to_val_forced(&p.car)));
                cur = &p.cdr;
            }
            Val::A(items)
        }
        _ => Val::S(v.clone()),
    }
}

/// A list of numbers packed like `like` when `like` is a packed vector of that length.
pub fn repack(v: Value, like: &Value) -> Value {
    let Value::Vector(rv) = like else { return v };
    let mut xs = Vec::with_capacity(rv.len());
    let mut cur = &v;
    while let Value::Pair(p) = cur {
        match p.car.as_f64() {
            Some(x) => xs.push(x),
            None => return v,
        }
        cur = &p.cdr;
    }
    if !matches!(cur, Value::Nil) || xs.len() != rv.len() {
        return v;
    }
    Value::Vector(Rc::new(crate::vec::RealVec::from_vec(xs, rv.shape())))
}

/// Converts back to a VLAD value (vectors become lists).
pub fn val_value(v: &Val) -> Value {
    match v {
        Val::S(x) => x.clone(),
        Val::A(items) => {
            Value::list(items.iter().map(|x| crate::stack::grow(|| val_value(x))).collect::<Vec<_>>())
        }
    }
}

/// Drops a store entry, with no call where it owns nothing (a number, a slot
/// left empty).
#[inline(always)]
fn discard_val(v: Val) {
    match &v {
        Val::S(x) if !x.needs_drop() => std::mem::forget(v),
        _ => drop(v),
    }
}

/// Sets a store entry.
#[inline(always)]
fn put_val(slot: &mut Val, v: Val) {
    discard_val(std::mem::replace(slot, v));
}

/// Cuts the store back to `len` entries (a finished frame).
#[inline(always)]
fn truncate_vals(vals: &mut Vec<Val>, len: usize) {
    while vals.len() > len {
        if let Some(v) = vals.pop() {
            discard_val(v);
        }
    }
}

/// A variable's value as a VLAD value ([`val_value`], inlined for a scalar).
#[inline(always)]
fn var_value(v: &Val) -> Value {
    match v {
        Val::S(x) => x.clone(),
        _ => val_value(v),
    }
}

/// A short printed form for messages.
pub fn describe(v: &Value) -> String {
    crate::print::brief(v, 60)
}

pub fn describe_val(v: &Val) -> String {
    describe(&val_value(v))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dir {
    Fwd,
    Bwd,
}

impl Dir {
    pub fn flip(self) -> Dir {
        match self {
            Dir::Fwd => Dir::Bwd,
            Dir::Bwd => Dir::Fwd,
        }
    }
    /// Flipped when `b`.
    pub fn xor(self, b: bool) -> Dir {
        if b {
            self.flip()
        } else {
            self
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dir::Fwd => "forward",
            Dir::Bwd => "backward",
        }
    }
}

/// What the parallel store holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Plain,
    /// Tangents, propagated in the direction of execution (forward mode).
    Tangent,
    /// Adjoints, propagated while running backward over a forward run (NiLang).
    Adjoint,
}

/// Nested reversible calls allowed at most (also bounded by `--max-depth`).
pub const MAX_REV_DEPTH: usize = 100_000;

/// The running procedure: its code and the base of its frame in the store.
#[derive(Clone, Copy)]
pub struct Frame<'c> {
    pub code: &'c ProcCode,
    pub base: usize,
}

pub struct Exec<'m> {
    pub m: &'m mut Machine,
    pub vals: Vec<Val>,
    pub ders: Vec<Val>,
    pub mode: Mode,
    /// The direction of the statement being run (for error messages from expressions).
    pub dir: Dir,
    depth: usize,
    max_depth: usize,
    /// `vjp`'s notes of an evaluation, kept for the next (see [`Notes`]).
    pub(super) notes: Notes,
}

/// The value of each subexpression an evaluation went through, in the order it
/// began them (an expression, then the parts it evaluated, in order), each with
/// where the notes of its parts end: the reverse pass (`Exec::vjp`) reads an
/// expression's parts' values here rather than evaluating each part again,
/// which was quadratic in the nesting depth of a right-hand side.
#[derive(Default)]
pub(super) struct Notes(Vec<(u32, Value)>);

impl Notes {
    /// A subexpression's evaluation begins: where its note goes.
    fn open(&mut self) -> usize {
        self.0.push((0, Value::Nil));
        self.0.len() - 1
    }
    /// The subexpression whose note is at `at` has the value `v`.
    fn close(&mut self, at: usize, v: &Value) {
        let end = self.0.len() as u32;
        let note = &mut self.0[at];
        note.0 = end;
        std::mem::replace(&mut note.1, v.clone()).discard();
    }

    /// The value of the subexpression noted at `at`.
    pub(super) fn value(&self, at: usize) -> &Value {
        &self.0[at].1
    }

    /// Where the note after those of the subexpression at `at` (and its parts) is.
    pub(super) fn end(&self, at: usize) -> usize {
        self.0[at].0 as usize
    }

    /// The values of the parts of the subexpression at `at`, in order, taken
    /// (each is read once; the parts' own parts are still noted).
    pub(super) fn take_parts(&mut self, at: usize) -> SmallVec<[Value; 3]> {
        let (end, mut p) = (self.end(at), at + 1);
        let mut out = SmallVec::new();
        while p < end {
            out.push(std::mem::replace(&mut self.0[p].1, Value::Nil));
            p = self.end(p);
        }
        out
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

/// A rule violation detected below the statement level: (rule, detail).
pub type Violation = (&'static str, String);

fn index_of(v: &Value) -> Option<usize> {
    match v {
        Value::Int(i) if *i >= 0 => Some(*i as usize),
        _ => None,
    }
}

fn bad_index(i: &Value, len: usize) -> Violation {
    if i.is_number() && !matches!(i, Value::Int(_) | Value::Big(_)) {
        ("index not an exact integer", format!("the index {} is not an exact integer", describe(i)))
    } else if !i.is_number() {
        ("index not a number", format!("the index {} is not a number", describe(i)))
    } else {
        let s = if len == 1 { "" } else { "s" };
        ("index out of range", format!("index {} but the vector has {len} element{s}", describe(i)))
    }
}

/// The element at an index path.
pub fn get_path<'a>(mut cur: &'a Val, idx: &[Value]) -> std::result::Result<&'a Val, Violation> {
    for i in idx {
        match cur {
            Val::A(items) => {
                let n = index_of(i).filter(|n| *n < items.len()).ok_or_else(|| bad_index(i, items.len()))?;
                cur = &items[n];
            }
            Val::S(v) => return Err(("not a vector", format!("{} is not a vector (a list)", describe(v)))),
        }
    }
    Ok(cur)
}

pub fn get_path_mut<'a>(mut cur: &'a mut Val, idx: &[Value]) -> std::result::Result<&'a mut Val, Violation> {
    for i in idx {
        match cur {
            Val::A(items) => {
                let len = items.len();
                let n = index_of(i).filter(|n| *n < len).ok_or_else(|| bad_index(i, len))?;
                cur = &mut items[n];
            }
            Val::S(v) => return Err(("not a vector", format!("{} is not a vector (a list)", describe(v)))),
        }
    }
    Ok(cur)
}

fn two_32() -> BigInt {
    BigInt::from(1u64 << 32)
}

/// Reduces an integer into [0, 2^32).
pub fn wrap32(v: &Value) -> std::result::Result<Value, Violation> {
    match v {
        Value::Int(i) => Ok(Value::Int(i.rem_euclid(1 << 32))),
        Value::Big(b) => {
            let r = b.as_ref() % two_32();
            let r = if r.is_negative() { r + two_32() } else { r };
            Ok(Value::Int(r.to_i64().unwrap_or(0)))
        }
        other => Err((
            "mod32 needs integers",
            format!("{} is not an integer (mod32 procedures compute on 32-bit integers)", describe(other)),
        )),
    }
}

fn is_exact_zero(v: &Value) -> bool {
    match v {
        Value::Int(0) => true,
        Value::Real(r) => *r == 0.0,
        _ => false,
    }
}

/// Exact division where both are exact (a rational result), else VLAD's `/`.
pub fn div_exact(a: &Value, b: &Value) -> Option<std::result::Result<Value, String>> {
    // (a rational operand: `/`'s exact division, with its shortcut for a small
    // operand, `num::rat_small_arith`)
    if matches!(a, Value::Rat(_)) || matches!(b, Value::Rat(_)) {
        return num::arith('/', a, b);
    }
    if num::is_exact_num(a) && num::is_exact_num(b) {
        let (x, y) = (num::rat(a)?, num::rat(b)?);
        if y.is_zero() {
            return Some(Err("exact division by zero".into()));
        }
        return Some(Ok(num::from_rat(x / y)));
    }
    num::arith('/', a, b)
}

/// Applies an update operator to a value.
#[inline]
pub fn apply_op(op: UpOp, t: &Value, e: &Value, mod32: bool) -> std::result::Result<Value, Violation> {
    // (doubles, the commonest: as `num::arith` computes them; and machine
    // integers that do not overflow)
    match (t, e, op) {
        (Value::Real(a), Value::Real(b), UpOp::Add) => return Ok(Value::Real(a + b)),
        (Value::Real(a), Value::Real(b), UpOp::Sub) => return Ok(Value::Real(a - b)),
        // (a zero operand is refused below: multiplying by it cannot be undone)
        (Value::Real(a), Value::Real(b), UpOp::Mul) if *b != 0.0 => return Ok(Value::Real(a * b)),
        (Value::Int(a), Value::Int(b), UpOp::Add | UpOp::Sub) => {
            let r = if op == UpOp::Add { a.checked_add(*b) } else { a.checked_sub(*b) };
            match r {
                Some(r) if mod32 => return Ok(Value::Int(r.rem_euclid(1 << 32))),
                Some(r) => return Ok(Value::Int(r)),
                None => {}
            }
        }
        _ => {}
    }
    apply_op_general(op, t, e, mod32)
}

#[inline(never)]
fn apply_op_general(op: UpOp, t: &Value, e: &Value, mod32: bool) -> std::result::Result<Value, Violation> {
    let not_num = |what: &str, v: &Value| -> Violation {
        (
            "not a number",
            format!("{} {} is {} ({}), not a number", op.name(), what, describe(v), v.kind_name()),
        )
    };
    if !t.is_number() {
        return Err(not_num("target", t));
    }
    if !e.is_number() {
        return Err(not_num("operand", e));
    }
    let r = match op {
        UpOp::Add => num::arith('+', t, e),
        UpOp::Sub => num::arith('-', t, e),
        UpOp::Mul => {
            if is_exact_zero(e) {
                return Err((
                    "division by zero",
                    "multiplying by zero cannot be undone (*= needs a non-zero operand)".into(),
                ));
            }
            num::arith('*', t, e)
        }
        UpOp::Div => {
            if is_exact_zero(e) {
                return Err(("division by zero", "/= by zero".into()));
            }
            div_exact(t, e)
        }
        UpOp::Xor => match (t, e) {
            (Value::Int(a), Value::Int(b)) => Some(Ok(Value::Int(a ^ b))),
            _ => match (num::big(t), num::big(e)) {
                (Some(a), Some(b)) => Some(Ok(num::from_big(a ^ b))),
                _ => {
                    return Err((
                        "^= needs integers",
                        format!(
                            "^= on {} and {}: exclusive or is defined on exact integers",
                            describe(t),
                            describe(e)
                        ),
                    ))
                }
            },
        },
    };
    let v = match r {
        Some(Ok(v)) => v,
        Some(Err(msg)) => return Err(("division by zero", msg)),
        None => return Err(not_num("operand", e)),
    };
    if mod32 {
        wrap32(&v)
    } else {
        Ok(v)
    }
}

/// Equality for the checks: numbers by value (doubles within the relative tolerance).
pub fn val_eq(a: &Val, b: &Val, tol: f64) -> bool {
    match (a, b) {
        (Val::S(x), Val::S(y)) => value_eq(x, y, tol),
        (Val::A(xs), Val::A(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| crate::stack::grow(|| val_eq(x, y, tol)))
        }
        _ => false,
    }
}

fn value_eq(x: &Value, y: &Value, tol: f64) -> bool {
    if x.is_number() && y.is_number() {
        if matches!(x, Value::Real(_)) || matches!(y, Value::Real(_)) {
            let (a, b) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            return a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0);
        }
        return num::num_equal(x, y);
    }
    match (x, y) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Prim(a), Value::Prim(b)) => a == b,
        (Value::Rev(a), Value::Rev(b)) => Rc::ptr_eq(&a.code, &b.code) && a.inverted == b.inverted,
        _ => x.ptr_id().is_some() && x.ptr_id() == y.ptr_id(),
    }
}

fn is_zero_val(v: &Val, tol: f64) -> bool {
    match v {
        Val::S(x) if x.is_number() => value_eq(x, &Value::Int(0), tol),
        _ => false,
    }
}

/// The zero left behind by `push`.
fn zero_of(v: &Val) -> Val {
    match v {
        Val::S(Value::Real(_)) => Val::S(Value::Real(0.0)),
        _ => Val::S(Value::Int(0)),
    }
}

/// A zero derivative shaped like a value (non-numbers get `()`).
pub fn zero_der(v: &Val) -> Val {
    match v {
        Val::S(x) if x.is_number() => Val::S(num::zero_like(x)),
        Val::S(_) => Val::S(Value::Nil),
        Val::A(items) => Val::A(items.iter().map(|x| crate::stack::grow(|| zero_der(x))).collect()),
    }
}

impl<'m> Exec<'m> {
    pub fn new(m: &'m mut Machine, mode: Mode) -> Exec<'m> {
        let max_depth = m.max_depth().min(MAX_REV_DEPTH);
        Exec {
            m,
            vals: Vec::new(),
            ders: Vec::new(),
            mode,
            dir: Dir::Fwd,
            depth: 0,
            max_depth,
            notes: Notes::default(),
        }
    }

    /// Runs `f`, a level of the executor's recursion, on a new native stack
    /// segment where the current one is running out (checked against the bounds
    /// the machine keeps, see `eval::grow_native_stack`: no call into `stacker`
    /// on the common path).
    #[inline(always)]
    pub(super) fn guarded<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        if self.m.native_stack_ok() {
            f(self)
        } else {
            crate::eval::grow_native_stack(self, |x| &mut *x.m, f)
        }
    }

    pub fn err(&self, f: Frame, dir: Dir, span: Span, rule: &str, detail: impl AsRef<str>) -> Error {
        Error::runtime(
            Some(span),
            format!("{} ({}, in {}): {}", rule, dir.name(), f.code.name, detail.as_ref()),
        )
    }

    pub(super) fn violation(&self, f: Frame, dir: Dir, span: Span, v: Violation) -> Error {
        self.err(f, dir, span, v.0, v.1)
    }

    /// " where x = 1, y = 2" for the variables an expression mentions.
    pub fn where_vars(&self, f: Frame, vars: &[(Rc<str>, u32)]) -> String {
        if vars.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = vars
            .iter()
            .map(|(n, s)| format!("{} = {}", n, describe_val(&self.vals[f.base + *s as usize])))
            .collect();
        format!(" where {}", parts.join(", "))
    }

    #[inline(always)]
    fn tick(&mut self, f: Frame, dir: Dir, span: Span) -> Result<()> {
        // (`count_step` is true every so often, and on each step past the limit)
        if !self.m.count_step() {
            return Ok(());
        }
        self.check_limits(f, dir, span)
    }

    #[cold]
    #[inline(never)]
    fn check_limits(&mut self, f: Frame, dir: Dir, span: Span) -> Result<()> {
        let m = &mut *self.m;
        if let Err(mut e) = m.check_interrupt_and_clock() {
            e.span = Some(span);
            return Err(e);
        }
        if m.steps() > m.max_steps() {
            let msg = format!(
                "step limit of {} exceeded (--max-steps) ({}, in {})",
                m.max_steps(),
                dir.name(),
                f.code.name
            );
            return Err(Error::new(ErrorKind::Limit, Some(span), msg));
        }
        Ok(())
    }

    /// Runs a procedure whose frame starts at `base` (already filled).
    pub fn run(&mut self, code: &ProcCode, base: usize, dir: Dir) -> Result<()> {
        let f = Frame { code, base };
        self.exec(f, &code.body, dir)
    }

    /// Sets up a frame for a top-level run from the given values.
    pub fn push_frame(&mut self, code: &ProcCode, vals: Vec<Val>, ders: Option<Vec<Val>>) -> usize {
        let base = self.vals.len();
        self.vals.extend(vals);
        self.vals.resize_with(base + code.nslots, Val::default);
        if self.mode != Mode::Plain {
            let d =
                ders.unwrap_or_else(|| self.vals[base..base + code.nparams].iter().map(zero_der).collect());
            self.ders.resize_with(base, Val::default);
            self.ders.extend(d);
            self.ders.resize_with(base + code.nslots, Val::default);
        }
        base
    }

    // ----- expressions -----

    pub fn eval(&mut self, f: Frame, e: &RExpr) -> Result<Value> {
        self.eval_noting::<false>(f, e)
    }

    /// [`Exec::eval`], noting in `self.notes` (if `NOTE`) the value of each
    /// subexpression it evaluates (see [`Notes`]).
    pub(super) fn eval_noting<const NOTE: bool>(&mut self, f: Frame, e: &RExpr) -> Result<Value> {
        if !NOTE {
            // (a leaf needs no stack check)
            match e {
                RExpr::Const(v) => return Ok(v.clone()),
                RExpr::Var(s) => return Ok(var_value(&self.vals[f.base + *s as usize])),
                _ => {}
            }
        }
        self.guarded(|x| {
            if !NOTE {
                return x.eval_here::<false>(f, e);
            }
            let at = x.notes.open();
            let r = x.eval_here::<true>(f, e);
            if let Ok(v) = &r {
                x.notes.close(at, v);
            }
            r
        })
    }

    /// Notes the evaluation of what `vjp` of `e` reads: the values of `e`'s parts
    /// (as [`Exec::eval_noting`] notes them), not `e`'s own (noted as `()`): a
    /// procedure applied there is called by its reverse transform, not also here.
    pub(super) fn note_parts(&mut self, f: Frame, e: &RExpr) -> Result<()> {
        crate::stack::grow(|| {
            let at = self.notes.open();
            match e {
                RExpr::Const(_) | RExpr::Var(_) | RExpr::Global(_) | RExpr::Prim(_, Deriv::Zero, ..) => {}
                RExpr::Elem(_, xs, _) | RExpr::Prim(_, _, xs, ..) => {
                    self.eval_all_noting::<true>(f, xs)?;
                }
                RExpr::If(b) => {
                    let c = self.eval_noting::<true>(f, &b[0])?;
                    self.note_parts(f, if c.is_true_stripped() { &b[1] } else { &b[2] })?;
                }
                RExpr::And(_) | RExpr::Or(_) => {
                    self.eval_here::<true>(f, e)?;
                }
                RExpr::Apply(fe, args, _) => {
                    self.eval_noting::<true>(f, fe)?;
                    self.eval_all_noting::<true>(f, args)?;
                }
            }
            self.notes.close(at, &Value::Nil);
            Ok(())
        })
    }

    fn eval_here<const NOTE: bool>(&mut self, f: Frame, e: &RExpr) -> Result<Value> {
        match e {
            RExpr::Const(v) => Ok(v.clone()),
            RExpr::Var(s) => Ok(var_value(&self.vals[f.base + *s as usize])),
            RExpr::Global(g) => self.m.global(*g),
            RExpr::Elem(s, idx, sp) => {
                // (one index, the commonest: no vector of them)
                let (one, more);
                let iv: &[Value] = if let [i] = &idx[..] {
                    one = self.eval_noting::<NOTE>(f, i)?;
                    std::slice::from_ref(&one)
                } else {
                    more = self.eval_all_noting::<NOTE>(f, idx)?;
                    &more
                };
                match get_path(&self.vals[f.base + *s as usize], iv) {
                    Ok(v) => Ok(var_value(v)),
                    Err(v) => Err(self.violation(f, self.dir, *sp, v)),
                }
            }
            RExpr::Prim(p, _, args, sp, op) => match (op, &args[..]) {
                // (two numbers for `+ - * /` or a comparison: the evaluator's
                // inline arithmetic, the primitive's own result)
                (Some(op), [a, b]) => {
                    let x = self.eval_noting::<NOTE>(f, a)?;
                    let y = self.eval_noting::<NOTE>(f, b)?;
                    if self.m.meter.is_none() {
                        if let Some(v) = crate::eval::inline_arith(*op, &x, &y) {
                            x.discard();
                            y.discard();
                            // (Janus: modulo 2^32 in a mod32 procedure, as
                            // `prim_value` reduces the primitive's result)
                            return match v {
                                Value::Int(i) if f.code.options.mod32 => {
                                    Ok(Value::Int(i.rem_euclid(1 << 32)))
                                }
                                v => Ok(v),
                            };
                        }
                    }
                    self.prim_value(f, *p, &mut [x, y], *sp)
                }
                (None, [a, b]) => {
                    let x = self.eval_noting::<NOTE>(f, a)?;
                    let y = self.eval_noting::<NOTE>(f, b)?;
                    let mut xs = [x, y];
                    let r = self.prim_value(f, *p, &mut xs, *sp);
                    let [x, y] = xs;
                    x.discard();
                    y.discard();
                    r
                }
                // (one argument, as `sin`: no vector of them)
                (_, [a]) => {
                    let x = self.eval_noting::<NOTE>(f, a)?;
                    let mut xs = [x];
                    let r = self.prim_value(f, *p, &mut xs, *sp);
                    let [x] = xs;
                    x.discard();
                    r
                }
                _ => {
                    let mut xs = self.eval_all_noting::<NOTE>(f, args)?;
                    self.prim_value(f, *p, &mut xs, *sp)
                }
            },
            RExpr::If(b) => {
                let c = self.eval_noting::<NOTE>(f, &b[0])?;
                self.eval_noting::<NOTE>(f, if c.is_true_stripped() { &b[1] } else { &b[2] })
            }
            RExpr::And(parts) => {
                let mut r = Value::Bool(true);
                for x in parts.iter() {
                    r = self.eval_noting::<NOTE>(f, x)?;
                    if !r.is_true_stripped() {
                        return Ok(r);
                    }
                }
                Ok(r)
            }
            RExpr::Or(parts) => {
                for x in parts.iter() {
                    let r = self.eval_noting::<NOTE>(f, x)?;
                    if r.is_true_stripped() {
                        return Ok(r);
                    }
                }
                Ok(Value::Bool(false))
            }
            RExpr::Apply(fe, args, sp) => {
                let fv = self.eval_noting::<NOTE>(f, fe)?;
                let xs = self.eval_all_noting::<NOTE>(f, args)?;
                self.m.apply_value(fv, tuple(xs), Some(*sp))
            }
        }
    }

    /// A primitive's value on its arguments, as a reversible procedure computes it
    /// (see [`Exec::call_prim`]; modulo 2^32 in a mod32 procedure).
    fn prim_value(&mut self, f: Frame, p: crate::prims::PrimId, xs: &mut [Value], sp: Span) -> Result<Value> {
        let y = self.call_prim(f, p, xs, sp)?;
        if f.code.options.mod32 && matches!(y, Value::Int(_) | Value::Big(_)) {
            // Janus: every arithmetic operation is modulo 2^32.
            return wrap32(&y).map_err(|v| self.violation(f, self.dir, sp, v));
        }
        Ok(y)
    }

    /// Calls a primitive on its arguments, as `Machine::call_prim` does (metering,
    /// forcing lazy arguments), without going through the value stack.
    /// An error names the direction and the procedure, as a rule's does.
    pub fn call_prim(
        &mut self,
        f: Frame,
        p: crate::prims::PrimId,
        xs: &mut [Value],
        sp: Span,
    ) -> Result<Value> {
        let def = crate::prims::prim(p);
        if let Some(m) = &mut self.m.meter {
            if def.class != crate::prims::Class::Other {
                m[p as usize] += 1;
            }
        }
        if !def.lazy {
            for x in xs.iter_mut() {
                if let Value::Lazy(_) = x {
                    *x = crate::ad::ops::force(self.m, x)?;
                }
            }
        }
        (def.imp)(self.m, xs).map_err(|mut e| {
            if e.kind == ErrorKind::Runtime && e.span.is_none() {
                e.message = format!("{} ({}, in {})", e.message, self.dir.name(), f.code.name);
            }
            e.at(sp)
        })
    }

    pub fn eval_all(&mut self, f: Frame, es: &[RExpr]) -> Result<SmallVec<[Value; 3]>> {
        self.eval_all_noting::<false>(f, es)
    }

    fn eval_all_noting<const NOTE: bool>(&mut self, f: Frame, es: &[RExpr]) -> Result<SmallVec<[Value; 3]>> {
        let mut out = SmallVec::new();
        for e in es {
            out.push(self.eval_noting::<NOTE>(f, e)?);
        }
        Ok(out)
    }

    fn cond(&mut self, f: Frame, c: &CExpr, dir: Dir) -> Result<bool> {
        self.dir = dir;
        let v = self.eval(f, &c.e)?;
        let t = v.is_true_stripped();
        v.discard();
        Ok(t)
    }

    fn index_values(&mut self, f: Frame, p: &CPlace) -> Result<SmallVec<[Value; 3]>> {
        let mut out = SmallVec::new();
        for i in p.idx.iter() {
            out.push(self.eval(f, &i.e)?);
        }
        Ok(out)
    }

    // ----- statements -----

    pub fn exec(&mut self, f: Frame, s: &CStmt, dir: Dir) -> Result<()> {
        self.guarded(|x| x.exec_here(f, s, dir))
    }

    fn exec_here(&mut self, f: Frame, s: &CStmt, dir: Dir) -> Result<()> {
        self.dir = dir;
        match s {
            CStmt::Seq(v) => {
                if dir == Dir::Fwd {
                    for x in v.iter() {
                        self.exec(f, x, dir)?;
                    }
                } else {
                    for x in v.iter().rev() {
                        self.exec(f, x, dir)?;
                    }
                }
                Ok(())
            }
            CStmt::Skip => Ok(()),
            CStmt::Update { op, place, rhs, span } => {
                self.tick(f, dir, *span)?;
                let op = if dir == Dir::Bwd { op.inverse() } else { *op };
                // (a variable, the commonest place: no index to evaluate)
                let held;
                let iv: &[Value] = if place.idx.is_empty() {
                    &[]
                } else {
                    held = self.index_values(f, place)?;
                    &held
                };
                match self.mode {
                    Mode::Plain => {
                        let e = self.eval(f, &rhs.e)?;
                        let mod32 = f.code.options.mod32;
                        let slot = f.base + place.slot as usize;
                        // (`true`: the place is wrong, not the operation)
                        let r = match get_path_mut(&mut self.vals[slot], iv) {
                            Ok(Val::S(t)) => apply_op(op, t, &e, mod32)
                                .map(|n| std::mem::replace(t, n).discard())
                                .map_err(|v| (v, false)),
                            Ok(Val::A(_)) => Err((
                                ("not a number", format!("{} is a vector, not a number", place.text)),
                                true,
                            )),
                            Err(v) => Err((v, true)),
                        };
                        match r {
                            Ok(()) => {
                                e.discard();
                                Ok(())
                            }
                            Err((v, at)) => Err(self.update_error(f, dir, *span, op, place, rhs, &e, v, at)),
                        }
                    }
                    _ => self.update_deriv(f, dir, op, place, iv, rhs, *span),
                }
            }
            CStmt::Swap { a, b, span } => {
                self.tick(f, dir, *span)?;
                let ia = self.index_values(f, a)?;
                let ib = self.index_values(f, b)?;
                self.swap(f, dir, a, &ia, b, &ib, *span)
            }
            CStmt::If { test, then, els, assert, span } => {
                self.tick(f, dir, *span)?;
                let (first, last) = if dir == Dir::Fwd { (test, assert) } else { (assert, test) };
                let took = self.cond(f, first, dir)?;
                self.exec(f, if took { then } else { els }, dir)?;
                let exit = self.cond(f, last, dir)?;
                if exit != took && f.code.options.checked {
                    let branch = if took { "then" } else { "else" };
                    let detail = if dir == Dir::Fwd {
                        format!(
                            "the {} branch was taken, so the assertion {} must be {} on exit, but it is {}{}",
                            branch,
                            last.text,
                            if took { "#t" } else { "#f" },
                            if exit { "#t" } else { "#f" },
                            self.where_vars(f, &last.vars)
                        )
                    } else {
                        format!(
                            "running backward, the assertion {} chose the {} branch, so the test {} must be {} on exit, but it is {}{}",
                            first.text,
                            branch,
                            last.text,
                            if took { "#t" } else { "#f" },
                            if exit { "#t" } else { "#f" },
                            self.where_vars(f, &last.vars)
                        )
                    };
                    return Err(self.err(f, dir, *span, "if-rev exit assertion failed", detail));
                }
                Ok(())
            }
            CStmt::From { entry, body, step, until, span } => {
                let (entry, until) = if dir == Dir::Fwd { (entry, until) } else { (until, entry) };
                let checked = f.code.options.checked;
                self.tick(f, dir, *span)?;
                if checked && !self.cond(f, entry, dir)? {
                    let detail = format!(
                        "{} must be #t when the loop starts{}, but it is #f{}",
                        entry.text,
                        if dir == Dir::Bwd {
                            " (running backward, the until-test is the entry assertion)"
                        } else {
                            ""
                        },
                        self.where_vars(f, &entry.vars)
                    );
                    return Err(self.err(f, dir, *span, "from-loop entry assertion failed", detail));
                }
                loop {
                    self.exec(f, body, dir)?;
                    if self.cond(f, until, dir)? {
                        return Ok(());
                    }
                    self.exec(f, step, dir)?;
                    self.tick(f, dir, *span)?;
                    if checked && self.cond(f, entry, dir)? {
                        let detail = format!(
                            "{} must be #f after each iteration, but it is #t again{}",
                            entry.text,
                            self.where_vars(f, &entry.vars)
                        );
                        return Err(self.err(f, dir, *span, "from-loop entry assertion failed", detail));
                    }
                }
            }
            CStmt::Local { slot, name, init, body, fin, span, delocal_span } => {
                self.tick(f, dir, *span)?;
                let (first, last) = if dir == Dir::Fwd { (init, fin) } else { (fin, init) };
                let at = f.base + *slot as usize;
                self.local_enter(f, at, first)?;
                self.exec(f, body, dir)?;
                self.dir = dir;
                let expect = self.eval(f, &last.e)?;
                let expect = to_val(self.m, &expect)?;
                if f.code.options.checked && !val_eq(&self.vals[at], &expect, f.code.options.tolerance) {
                    let detail = format!(
                        "{} is {} but (delocal {} {}) expects {}{}",
                        name,
                        describe_val(&self.vals[at]),
                        name,
                        last.text,
                        describe_val(&expect),
                        self.where_vars(f, &last.vars)
                    );
                    let sp = if dir == Dir::Fwd { *delocal_span } else { *span };
                    return Err(self.err(f, dir, sp, "delocal mismatch", detail));
                }
                self.local_exit(f, at, last)?;
                self.vals[at] = Val::default();
                Ok(())
            }
            CStmt::Push { pop, x, s, xname, sname, span } => {
                self.tick(f, dir, *span)?;
                let is_pop = *pop != (dir == Dir::Bwd);
                let (xi, si) = (f.base + *x as usize, f.base + *s as usize);
                if !matches!(self.vals[si], Val::A(_)) {
                    let detail =
                        format!("the stack {} is {}, not a list", sname, describe_val(&self.vals[si]));
                    return Err(self.err(f, dir, *span, "not a stack", detail));
                }
                let derivs = self.mode != Mode::Plain;
                if is_pop {
                    if matches!(&self.vals[si], Val::A(st) if st.is_empty()) {
                        return Err(self.err(
                            f,
                            dir,
                            *span,
                            "pop from an empty stack",
                            format!("{} is empty", sname),
                        ));
                    }
                    if f.code.options.checked && !is_zero_val(&self.vals[xi], f.code.options.tolerance) {
                        let detail = format!(
                            "{} is {}; pop needs it to be 0 (it is overwritten)",
                            xname,
                            describe_val(&self.vals[xi])
                        );
                        return Err(self.err(f, dir, *span, "pop into a non-zero variable", detail));
                    }
                    let Val::A(st) = &mut self.vals[si] else { unreachable!() };
                    self.vals[xi] = st.pop_front().unwrap_or_default();
                    if derivs {
                        let d = match &mut self.ders[si] {
                            Val::A(st) => st.pop_front().unwrap_or_default(),
                            _ => Val::default(),
                        };
                        self.ders[xi] = d;
                    }
                } else {
                    let v = std::mem::take(&mut self.vals[xi]);
                    self.vals[xi] = zero_of(&v);
                    let Val::A(st) = &mut self.vals[si] else { unreachable!() };
                    st.push_front(v);
                    if derivs {
                        let d = std::mem::take(&mut self.ders[xi]);
                        self.ders[xi] = zero_der(&self.vals[xi]);
                        if let Val::A(st) = &mut self.ders[si] {
                            st.push_front(d);
                        }
                    }
                }
                Ok(())
            }
            CStmt::Call { uncall, callee, args, span } => {
                self.tick(f, dir, *span)?;
                let pv = match callee {
                    Callee::Global(g, _) => self.m.global(*g)?,
                    Callee::Var(s, _) => val_value(&self.vals[f.base + *s as usize]),
                };
                let (cname, pv) = match (callee, pv) {
                    (_, Value::Rev(r)) => (String::new(), r),
                    (Callee::Global(_, n) | Callee::Var(_, n), other) => {
                        let detail = format!(
                            "`{}` is {} ({}), not a reversible procedure",
                            n,
                            describe(&other),
                            other.kind_name()
                        );
                        return Err(self.err(f, dir, *span, "call of a non-reversible procedure", detail));
                    }
                };
                let _ = cname;
                self.call(f, dir.xor(*uncall), &pv, args, *span)
            }
            CStmt::WithUncompute { compute, body } => {
                self.exec(f, compute, Dir::Fwd)?;
                self.exec(f, body, dir)?;
                self.exec(f, compute, Dir::Bwd)
            }
        }
    }

    /// A call by reference: the arguments move into a new frame and back.
    fn call(&mut self, f: Frame, dir: Dir, p: &Rc<RevProc>, args: &[u32], span: Span) -> Result<()> {
        let code = &p.code;
        if args.len() != code.nparams {
            let detail = format!(
                "{} takes {} variables ({}), got {}",
                p.display_name(),
                code.nparams,
                code.def.params.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" "),
                args.len()
            );
            return Err(self.err(f, dir, span, "wrong number of arguments", detail));
        }
        if self.depth >= self.max_depth {
            let detail = format!("more than {} nested reversible calls", self.max_depth);
            return Err(self.err(f, dir, span, "recursion limit exceeded", detail));
        }
        let nb = self.vals.len();
        let derivs = self.mode != Mode::Plain;
        // (the arguments moved to the new frame, then its other slots)
        for a in args.iter() {
            let v = std::mem::take(&mut self.vals[f.base + *a as usize]);
            self.vals.push(v);
        }
        self.vals.resize_with(nb + code.nslots, Val::default);
        if derivs {
            self.ders.truncate(nb);
            self.ders.resize_with(nb, Val::default);
            for a in args.iter() {
                let d = std::mem::take(&mut self.ders[f.base + *a as usize]);
                self.ders.push(d);
            }
            self.ders.resize_with(nb + code.nslots, Val::default);
        }
        // Between a mod32 procedure and one that is not, the values must be in
        // the mod32 one's range both ways (as `call` from VLAD checks them on
        // entry): wrapping them instead would not be reversible.
        let crossing = code.options.mod32 != f.code.options.mod32;
        if crossing && code.options.mod32 {
            self.mod32_range(f, dir, span, p, nb)?;
        }
        self.depth += 1;
        let d = dir.xor(p.inverted);
        let mut r = if self.m.native_stack_ok() {
            self.run(code, nb, d)
        } else {
            crate::stack::try_grow(256 * 1024, 16 * 1024 * 1024, || self.run(code, nb, d))
        };
        self.depth -= 1;
        if crossing && r.is_ok() && f.code.options.mod32 {
            r = self.mod32_range(f, dir, span, p, nb);
        }
        match r {
            Ok(()) => {
                for (i, a) in args.iter().enumerate() {
                    let v = std::mem::take(&mut self.vals[nb + i]);
                    put_val(&mut self.vals[f.base + *a as usize], v);
                    if derivs {
                        let d = std::mem::take(&mut self.ders[nb + i]);
                        put_val(&mut self.ders[f.base + *a as usize], d);
                    }
                }
                truncate_vals(&mut self.vals, nb);
                if derivs {
                    truncate_vals(&mut self.ders, nb);
                }
                Ok(())
            }
            Err(mut e) => {
                self.vals.truncate(nb);
                if derivs {
                    self.ders.truncate(nb);
                }
                if e.trace.len() < 4 || e.kind != ErrorKind::Runtime {
                    e.push_frame(&format!("{} ({})", p.display_name(), d.name()), span);
                } else {
                    e.trace_elided += 1;
                }
                Err(e)
            }
        }
    }

    /// Checks that the variables of a call of `p` (its frame at `nb`) are
    /// integers in [0, 2^32), as a mod32 procedure's are: on entry to `p` if it
    /// is mod32, on its return to the running mod32 procedure if it is not.
    fn mod32_range(&self, f: Frame, dir: Dir, span: Span, p: &RevProc, nb: usize) -> Result<()> {
        let code = &p.code;
        let Some(i) = (0..code.nparams).find(|&i| !super::check_mod32(&self.vals[nb + i])) else {
            return Ok(());
        };
        let value = describe_val(&self.vals[nb + i]);
        let detail = if code.options.mod32 {
            super::mod32_entry(p, i, &value)
        } else {
            format!(
                "{} (not mod32) returned {} = {} to this mod32 procedure, whose variables hold integers in [0, 2^32)",
                p.display_name(),
                code.def.params[i].0,
                value
            )
        };
        Err(self.err(f, dir, span, "mod32 range", detail))
    }

    #[allow(clippy::too_many_arguments)]
    fn swap(
        &mut self,
        f: Frame,
        dir: Dir,
        a: &CPlace,
        ia: &[Value],
        b: &CPlace,
        ib: &[Value],
        span: Span,
    ) -> Result<()> {
        let (sa, sb) = (f.base + a.slot as usize, f.base + b.slot as usize);
        if sa == sb {
            let n = ia.len().min(ib.len());
            let prefix = ia[..n].iter().zip(&ib[..n]).all(|(x, y)| num::num_equal(x, y));
            if prefix {
                if ia.len() == ib.len() {
                    return Ok(()); // an element swapped with itself
                }
                let detail = format!("{} and {} overlap", a.text, b.text);
                return Err(self.err(f, dir, span, "aliasing", detail));
            }
        }
        let derivs = self.mode != Mode::Plain;
        for store in 0..(if derivs { 2 } else { 1 }) {
            let vs = if store == 0 { &mut self.vals } else { &mut self.ders };
            let r = (|| {
                let x = std::mem::take(get_path_mut(&mut vs[sa], ia)?);
                let y = match get_path_mut(&mut vs[sb], ib) {
                    Ok(p) => std::mem::replace(p, x),
                    Err(e) => {
                        // put x back before reporting
                        if let Ok(p) = get_path_mut(&mut vs[sa], ia) {
                            *p = x;
                        }
                        return Err(e);
                    }
                };
                *get_path_mut(&mut vs[sa], ia)? = y;
                Ok(())
            })();
            if let Err(v) = r {
                return Err(self.violation(f, dir, span, v));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn update_error(
        &self,
        f: Frame,
        dir: Dir,
        span: Span,
        op: UpOp,
        place: &CPlace,
        rhs: &CExpr,
        e: &Value,
        v: Violation,
        at_place: bool,
    ) -> Error {
        let mut detail = format!("({} {} {}): {}", op.name(), place.text, rhs.text, v.1);
        if v.0 == "division by zero" {
            detail.push_str(&format!("; the operand is {}", describe(e)));
        }
        if at_place {
            // (the place's variable, then those its indices mention)
            let mut vars = vec![(f.code.slot_names[place.slot as usize].clone(), place.slot)];
            for x in place.idx.iter().flat_map(|i| i.vars.iter()) {
                if !vars.iter().any(|(_, s)| *s == x.1) {
                    vars.push(x.clone());
                }
            }
            detail.push_str(&self.where_vars(f, &vars));
        } else {
            detail.push_str(&self.where_vars(f, &rhs.vars));
        }
        self.err(f, dir, span, v.0, detail)
    }

    fn local_enter(&mut self, f: Frame, at: usize, first: &CExpr) -> Result<()> {
        match self.mode {
            Mode::Plain => {
                let v = self.eval(f, &first.e)?;
                self.vals[at] = to_val(self.m, &v)?;
            }
            Mode::Adjoint => {
                let v = self.eval(f, &first.e)?;
                self.vals[at] = to_val(self.m, &v)?;
                self.ders[at] = zero_der(&self.vals[at]);
            }
            Mode::Tangent => {
                let (v, dv) = self.eval_t(f, &first.e)?;
                self.vals[at] = to_val(self.m, &v)?;
                self.ders[at] = super::grad::der_val(&self.vals[at], &dv);
            }
        }
        if f.code.options.mod32 {
            if let Val::S(x) = &self.vals[at] {
                if x.is_number() {
                    let w = wrap32(x).map_err(|v| self.violation(f, self.dir, first.span, v))?;
                    self.vals[at] = Val::S(w);
                }
            }
        }
        Ok(())
    }

    fn local_exit(&mut self, f: Frame, at: usize, last: &CExpr) -> Result<()> {
        if self.mode == Mode::Adjoint {
            // The ancilla's adjoint flows into what its initial value was computed from
            // (nothing when that is a constant), then is dropped.
            let d = val_value(&std::mem::take(&mut self.ders[at]));
            self.vjp(f, &last.e, d)?;
        }
        if self.mode != Mode::Plain {
            self.ders[at] = Val::default();
        }
        Ok(())
    }
}

/// The argument of a VLAD call: `'()`, the value, or the tuple `(cons* x ...)`.
pub fn tuple(xs: SmallVec<[Value; 3]>) -> Value {
    let mut it = xs.into_iter().rev();
    match it.next() {
        None => Value::Nil,
        Some(last) => it.fold(last, |acc, x| Value::cons(x, acc)),
    }
}
