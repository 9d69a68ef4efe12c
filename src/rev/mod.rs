//! Reversible (Janus-style) procedures inside VLAD (REVERSIBLE.md, docs/reversible.md).
//!
//! - [`syntax`]: statements parsed from data, static rules, printing;
//! - [`invert`]: local syntactic inversion (for printing; involutive);
//! - [`compile`]: slots, callees and right-hand sides resolved;
//! - [`exec`]: one executor with a direction flag over a private store;
//! - [`grad`](mod@grad): tangents and NiLang-style adjoints (gradients by running backward).
//!
//! From VLAD's side a reversible procedure is a value ([`Value::Rev`]) and a pure
//! function from the tuple of its variables' initial values to their final values.
//! `call`, `uncall` and `rev-grad` are primitives whose one argument is the tuple
//! `(cons* p a ...)` that VLAD passes for `(call p a ...)`; the number of p's variables
//! says where each value is. `%rev-call` / `%rev-uncall` take `p` and a list of values.

pub mod compile;
pub mod exec;
pub mod functional;
pub mod grad;
pub mod invert;
pub mod syntax;

use crate::ad::ops::force;
use crate::anf::GlobalScope;
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::prims::{Class, PrimDef, Rule};
use crate::value::Value;
use compile::ProcCode;
use exec::{describe, to_val, val_value, zero_der, Dir, Exec, Mode, Val};
use num_bigint::BigInt;
use num_integer::Integer;
use std::rc::Rc;

/// A reversible procedure value: compiled code, run backward when `inverted`
/// (`rev-inverse` flips the flag; the code is shared).
pub struct RevProc {
    pub code: Rc<ProcCode>,
    pub inverted: bool,
}

impl RevProc {
    pub fn name(&self) -> &str {
        &self.code.name
    }
    pub fn display_name(&self) -> String {
        if self.inverted {
            format!("(rev-inverse {})", self.code.name)
        } else {
            self.code.name.to_string()
        }
    }
}

/// Parses and compiles `(define-reversible ...)` against the visible names.
pub fn define(def: syntax::ProcDef, scope: &dyn GlobalScope) -> Result<Value> {
    let code = compile::compile(def, scope)?;
    Ok(Value::Rev(Rc::new(RevProc { code: Rc::new(code), inverted: false })))
}

/// The source text of a procedure value (its inverse's, printed as `NAME-inverse`).
pub fn proc_text(p: &RevProc) -> String {
    if p.inverted {
        syntax::proc_text(&invert::invert_proc(&p.code.def), &format!("{}-inverse", p.code.name))
    } else {
        syntax::proc_text(&p.code.def, &p.code.name)
    }
}

/// The source text of the inverse of a procedure value.
pub fn inverse_text(p: &RevProc) -> String {
    proc_text(&RevProc { code: p.code.clone(), inverted: !p.inverted })
}

fn err(msg: String) -> Error {
    Error::runtime(None, msg)
}

fn expect_rev(p: &Value, what: &str) -> Result<Rc<RevProc>> {
    match p {
        Value::Rev(r) => Ok(r.clone()),
        other => Err(err(format!(
            "{}: expected a reversible procedure (defined with define-reversible), got {} ({})",
            what,
            describe(other),
            other.kind_name()
        ))),
    }
}

/// The elements of a proper list (forced: primitives may receive pairs with lazy parts).
fn list_items(m: &mut Machine, v: &Value) -> Option<Vec<Value>> {
    let v = crate::ad::ops::force(m, v).ok()?;
    let mut out = Vec::new();
    let mut cur = &v;
    loop {
        match cur {
            Value::Nil => return Some(out),
            Value::Pair(p) => {
                out.push(p.car.clone());
                cur = &p.cdr;
            }
            _ => return None,
        }
    }
}

pub(super) fn check_mod32(v: &Val) -> bool {
    match v {
        Val::S(Value::Int(i)) => (0..1i64 << 32).contains(i),
        Val::S(x) => !x.is_number(),
        Val::A(items) => items.iter().all(check_mod32),
    }
}

/// Why variable `i` of mod32 procedure `p`, holding `value`, cannot enter it.
pub(super) fn mod32_entry(p: &RevProc, i: usize, value: &str) -> String {
    format!(
        "{} is a mod32 procedure: its variables hold integers in [0, 2^32), but {} is {}",
        p.display_name(),
        p.code.def.params[i].0,
        value
    )
}

/// The argument list of a run as store values (arity and mod32 range checked).
fn in_vals(m: &mut Machine, p: &RevProc, args: &Value, what: &str) -> Result<Vec<Val>> {
    let items = list_items(m, args)
        .ok_or_else(|| err(format!("{what}: expected a list of arguments, got {}", describe(args))))?;
    let code = &p.code;
    if items.len() != code.nparams {
        return Err(err(format!(
            "{}: {} takes {} ({}), got {}",
            what,
            p.display_name(),
            values(code.nparams),
            code.def.params.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" "),
            items.len()
        )));
    }
    let mut vals = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        let sv = to_val(m, v)?;
        if code.options.mod32 && !check_mod32(&sv) {
            return Err(err(format!("{}: {}", what, mod32_entry(p, i, &describe(v)))));
        }
        vals.push(sv);
    }
    Ok(vals)
}

fn dir_of(flag: &Value) -> Dir {
    if flag.is_true() {
        Dir::Fwd
    } else {
        Dir::Bwd
    }
}

/// Splits the argument tuple `(cons* p a1 ... an)` of `call` (n = the number of p's
/// variables plus `extra`): 0 values is `p` itself, 1 is `(cons p a1)`, and so on.
fn split_call(m: &mut Machine, tuple: &Value, extra: usize, what: &str) -> Result<(Value, Vec<Value>)> {
    let t = force(m, tuple)?;
    let (p, rest) = match &t {
        Value::Pair(pr) => (pr.car.clone(), Some(pr.cdr.clone())),
        other => (other.clone(), None),
    };
    let rp = expect_rev(&p, what)?;
    let n = rp.code.nparams + extra;
    // `got`: how many arguments follow `p` (None: some), the position included.
    let wrong = |got: Option<usize>| {
        let names = rp.code.def.params.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" ");
        let k = if extra == 1 { "a variable position and " } else { "" };
        let got = match got {
            None => "some".to_string(),
            Some(0) => "none".to_string(),
            // the values counted apart from the position
            Some(g) if extra == 1 => match g - 1 {
                0 => "the position and no values".to_string(),
                1 => "the position and 1 value".to_string(),
                v => format!("the position and {} values", v),
            },
            Some(g) => g.to_string(),
        };
        err(format!(
            "{}: {} takes {}{} ({}), got {}",
            what,
            rp.display_name(),
            k,
            values(rp.code.nparams),
            names,
            got
        ))
    };
    let Some(mut rest) = rest else {
        return if n == 0 { Ok((p, vec![])) } else { Err(wrong(Some(0))) };
    };
    if n == 0 {
        return Err(wrong(None));
    }
    let mut xs = Vec::with_capacity(n);
    for i in 0..n - 1 {
        match rest {
            Value::Pair(pr) => {
                xs.push(pr.car.clone());
                rest = pr.cdr.clone();
            }
            _ => return Err(wrong(Some(i + 1))),
        }
    }
    xs.push(rest);
    Ok((p, xs))
}

/// Where the last value of a call is a pair that is not a list, the words that
/// a failed run adds to its error: the values after the variables' count end
/// up in the last variable as that pair (`(call p 1 2 3)` with two variables
/// gives the second one `(2 . 3)`), which is almost always too many arguments.
fn improper_last(p: &Value, xs: &[Value]) -> Option<String> {
    let last = xs.last()?;
    let mut v = last;
    let mut n = 0;
    while let Value::Pair(pr) = v {
        v = &pr.cdr;
        n += 1;
    }
    if n == 0 || matches!(v, Value::Nil) {
        return None;
    }
    let Value::Rev(rp) = p else { return None };
    let names = rp.code.def.params.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" ");
    Some(format!(
        " ({} takes {} ({}), so its last variable {} was given the rest, {}, \
         a pair that is not a list: were {} values passed?)",
        rp.display_name(),
        values(rp.code.nparams),
        names,
        rp.code.def.params.last().map(|(n, _)| n.to_string()).unwrap_or_default(),
        describe(last),
        rp.code.nparams + n
    ))
}

/// "1 value", "2 values".
fn values(n: usize) -> String {
    format!("{} value{}", n, if n == 1 { "" } else { "s" })
}

fn with_hint(mut e: Error, hint: Option<String>) -> Error {
    if let Some(h) = hint {
        e.message.push_str(&h);
    }
    e
}

/// The parts of a value shaped like the tuple of `n` arguments after `p`.
fn split_like(t: &Value, n: usize) -> Vec<Value> {
    let mut rest = match t {
        Value::Pair(pr) if n > 0 => pr.cdr.clone(),
        _ => return vec![Value::Nil; n],
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n.saturating_sub(1) {
        match rest {
            Value::Pair(pr) => {
                out.push(pr.car.clone());
                rest = pr.cdr.clone();
            }
            _ => {
                out.push(Value::Nil);
                rest = Value::Nil;
            }
        }
    }
    out.push(rest);
    out
}

/// `(cons* head x1 ... xn)`: `head` alone when there are no xs.
/// Which VLAD translation of a procedure `%rev-fun...` gives.
#[derive(Clone, Copy)]
enum Entry {
    List,
    Tuple,
    Grad,
}

/// A value with its tags and lazy operations removed at the top.
fn plain(m: &mut Machine, v: &Value) -> Result<Value> {
    let mut v = force(m, v)?;
    while matches!(v, Value::Tagged(..) | Value::TReal(..) | Value::Bundle(_)) {
        let s = crate::ad::ops::strip(&v).into_owned();
        v = force(m, &s)?;
    }
    Ok(v)
}

/// Checks a (transformed) argument tuple of `call`/`uncall` (`extra` 0) or `rev-grad`
/// (`extra` 1) with their own messages.
fn check_tuple(m: &mut Machine, tuple: &Value, extra: usize, what: &str) -> Result<()> {
    let (p, mut rest) = match plain(m, tuple)? {
        Value::Pair(pr) => (plain(m, &pr.car)?, Some(pr.cdr.clone())),
        other => (other, None),
    };
    let rp = expect_rev(&p, what)?;
    let n = rp.code.nparams + extra;
    let mut xs = Vec::new();
    while let Some(r) = rest.take() {
        if xs.len() + 1 < n {
            if let Value::Pair(pr) = plain(m, &r)? {
                xs.push(plain(m, &pr.car)?);
                rest = Some(pr.cdr.clone());
                continue;
            }
        }
        xs.push(r);
    }
    let (_, xs) = split_call(m, &make_tuple(p, xs), extra, what)?;
    if extra == 1 {
        grad_index(&xs[0], rp.code.nparams)?;
    }
    Ok(())
}

fn car_cdr(m: &mut Machine, v: &Value) -> Result<(Value, Value)> {
    match plain(m, v)? {
        Value::Pair(p) => Ok((p.car.clone(), p.cdr.clone())),
        other => Err(err(format!("internal error: expected a pair, got {}", describe(&other)))),
    }
}

/// `(%rev-fun (cons p flag))`, `(%rev-fun-tuple (cons (cons* p a ...) flag))`,
/// `(%rev-fun-grad (cons* p k a ...))`: the closure for `p` run forward (`flag` #t)
/// or backward, on transformed arguments (their tags are ignored).
fn fun_entry(m: &mut Machine, arg: &Value, which: Entry) -> Result<Value> {
    let (head, flag) = match which {
        Entry::Grad => (arg.clone(), Value::Bool(true)),
        _ => car_cdr(m, arg)?,
    };
    let p = match which {
        Entry::List => plain(m, &head)?,
        _ => match plain(m, &head)? {
            Value::Pair(pr) => plain(m, &pr.car)?,
            other => other,
        },
    };
    let flag = plain(m, &flag)?.is_true_stripped();
    // The tuple of `call`/`uncall`/`rev-grad` is checked as their plain versions check
    // it (the translation would only fail to match its pattern).
    match which {
        Entry::List => {}
        Entry::Tuple => check_tuple(m, &head, 0, if flag { "call" } else { "uncall" })?,
        Entry::Grad => check_tuple(m, &head, 1, "rev-grad")?,
    }
    let rp = expect_rev(&p, "nested differentiation")?;
    let e = translation(&rp, flag)?;
    match which {
        Entry::List => Ok(e.list.clone()),
        Entry::Tuple => Ok(e.tuple.clone()),
        Entry::Grad => {
            e.grad.clone().ok_or_else(|| err(format!("rev-grad: {} has no variables", rp.display_name())))
        }
    }
}

/// The VLAD translation of `rp` called (`call`: `call` true) or uncalled.
fn translation(rp: &RevProc, call: bool) -> Result<&functional::Entries> {
    let f = rp
        .code
        .functional()
        .as_ref()
        .map_err(|msg| err(format!("nested differentiation through {}: {}", rp.display_name(), msg)))?;
    Ok(if call != rp.inverted { &f.fwd } else { &f.bwd })
}

fn elem_index(i: &Value, len: usize, what: &str) -> Result<usize> {
    let k = match i {
        Value::Int(k) if *k >= 0 => Some(*k as usize),
        Value::Real(r) if *r >= 0.0 && r.fract() == 0.0 && *r < 9e15 => Some(*r as usize),
        _ => None,
    };
    match k {
        Some(k) if k < len => Ok(k),
        _ => {
            Err(err(format!("{}: index {} out of range for a vector of {} elements", what, describe(i), len)))
        }
    }
}

/// The elements of a list (forced).
fn elems(m: &mut Machine, v: &Value, what: &str) -> Result<Vec<Value>> {
    list_items(m, v).ok_or_else(|| err(format!("{}: expected a vector (a list), got {}", what, describe(v))))
}

/// `(ref v i)` on a list or packed vector.
fn elem_ref(m: &mut Machine, v: &Value, i: &Value) -> Result<Value> {
    if let Value::Vector(rv) = v {
        let k = elem_index(i, rv.len(), "ref")?;
        return Ok(Value::Real(rv.host()[k]));
    }
    let xs = list_elems(m, v)?;
    let k = elem_index(i, xs.len(), "ref")?;
    Ok(xs[k].clone())
}

/// The elements of list `v` for `%rev-ref` and `%rev-set`: those of the list
/// read last if `v` is that list (`Machine::rev_elems`), else found (and kept).
fn list_elems(m: &mut Machine, v: &Value) -> Result<Rc<[Value]>> {
    if let (Some((held, xs)), Value::Pair(_)) = (&m.rev_elems, v) {
        if held.ptr_id() == v.ptr_id() {
            return Ok(xs.clone());
        }
    }
    let xs: Rc<[Value]> = elems(m, v, "ref")?.into();
    if let Value::Pair(_) = v {
        m.rev_elems = Some((v.clone(), xs.clone()));
    }
    Ok(xs)
}

/// `v` with element `i` replaced by `x` (a list or packed vector).
fn elem_set(m: &mut Machine, v: &Value, i: &Value, x: &Value) -> Result<Value> {
    if let Value::Vector(rv) = v {
        if x.is_active() {
            // (a packed vector holds no active real)
            return Err(crate::ad::tape::decline("%rev-set"));
        }
        let k = elem_index(i, rv.len(), "ref")?;
        let mut xs = rv.host().to_vec();
        xs[k] = x.as_f64().ok_or_else(|| {
            err(format!("an element of a packed vector must be a real, got {}", describe(x)))
        })?;
        return Ok(Value::Vector(Rc::new(crate::vec::RealVec::from_vec(xs, rv.shape()))));
    }
    let mut xs = list_elems(m, v)?.to_vec();
    let k = elem_index(i, xs.len(), "ref")?;
    xs[k] = x.clone();
    // (kept as the list read last: the loop that updated it reads it next)
    let xs: Rc<[Value]> = xs.into();
    let list = Value::list(xs.iter().cloned());
    m.rev_elems = Some((list.clone(), xs));
    Ok(list)
}

/// A value as the executor's store holds it: packed vectors (at any depth of a list)
/// become lists of their elements, proper lists are rebuilt with their elements
/// converted, anything else is kept.
fn unpack(v: &Value) -> Value {
    match v {
        Value::Vector(rv) => Value::list(rv.host().iter().map(|x| Value::Real(*x)).collect::<Vec<_>>()),
        Value::Pair(_) => {
            let mut items = Vec::new();
            let mut cur = v;
            while let Value::Pair(p) = cur {
                items.push(p.car.clone());
                cur = &p.cdr;
            }
            if !matches!(cur, Value::Nil) || !items.iter().any(has_vector) {
                return v.clone();
            }
            Value::list(items.iter().map(unpack).collect::<Vec<_>>())
        }
        other => other.clone(),
    }
}

fn has_vector(v: &Value) -> bool {
    let mut cur = v;
    loop {
        match cur {
            Value::Vector(_) => return true,
            Value::Pair(p) => {
                if has_vector(&p.car) {
                    return true;
                }
                cur = &p.cdr;
            }
            _ => return false,
        }
    }
}

/// The inverse of [`unpack`]: `v` (lists) with the packed vectors of `like` packed again.
fn pack_like(v: &Value, like: &Value) -> Value {
    match (v, like) {
        (_, Value::Vector(_)) => exec::repack(v.clone(), like),
        (Value::Pair(p), Value::Pair(q)) => Value::cons(pack_like(&p.car, &q.car), pack_like(&p.cdr, &q.cdr)),
        _ => v.clone(),
    }
}

/// `(rev-grad p k a ...)` on its tuple `(cons* p k a ...)`.
fn rev_grad(m: &mut Machine, tuple: &Value) -> Result<Value> {
    let (p, mut xs) = split_call(m, tuple, 1, "rev-grad")?;
    let hint = improper_last(&p, &xs[1..]);
    let k = xs.remove(0);
    grad(m, &p, &k, &Value::list(xs)).map_err(|e| with_hint(e, hint))
}

fn make_tuple(head: Value, xs: Vec<Value>) -> Value {
    let mut it = xs.into_iter().rev();
    match it.next() {
        None => head,
        Some(last) => Value::cons(head, it.fold(last, |acc, x| Value::cons(x, acc))),
    }
}

/// The position `k` of the variable `rev-grad` differentiates, among `n`.
fn grad_index(k: &Value, n: usize) -> Result<usize> {
    match k {
        Value::Int(i) if *i >= 0 && (*i as usize) < n => Ok(*i as usize),
        _ if n == 0 => Err(err("rev-grad: the procedure has no variables to differentiate".to_string())),
        other => Err(err(format!(
            "rev-grad: the variable to differentiate is given by its position, an exact integer from 0 to {}; got {}",
            n.saturating_sub(1),
            describe(other)
        ))),
    }
}

/// `call` (`Dir::Fwd`) or `uncall` (`Dir::Bwd`): the list of final values.
pub fn run(m: &mut Machine, p: &Value, args: &Value, dir: Dir) -> Result<Value> {
    let what = if dir == Dir::Fwd { "call" } else { "uncall" };
    if m.tape.active() {
        return run_on_levels(m, p, args, dir);
    }
    let rp = expect_rev(p, what)?;
    let vals = in_vals(m, &rp, args, what)?;
    let orig = list_items(m, args).unwrap_or_default();
    let mut ex = Exec::new(m, Mode::Plain);
    let base = ex.push_frame(&rp.code, vals, None);
    ex.run(&rp.code, base, dir.xor(rp.inverted))?;
    // Packed vectors passed in come back packed.
    let outs = ex.vals[..rp.code.nparams].iter().zip(&orig).map(|(v, a)| exec::repack(val_value(v), a));
    Ok(Value::list(outs.collect::<Vec<_>>()))
}

/// [`run`] while a function runs on active reals (`ad::tape`). Where they
/// are nested derivatives' (two or more levels running) and the arguments hold
/// active reals, the call is what the transform's rules make it
/// (`VIA_VJP`...): the procedure run natively on the arguments' plain values,
/// silently, for the checks its translation leaves out, then its translation
/// (`functional`) applied to the arguments, ordinary code the levels
/// differentiate. A first derivative gives way to the transform instead,
/// whose rule for `call` is the executor's own derivative run (linear in the
/// procedure's element updates, where the translation copies a list at each),
/// and so does a call on plain values (its `write` statements would print
/// during a run that may still give way).
fn run_on_levels(m: &mut Machine, p: &Value, args: &Value, dir: Dir) -> Result<Value> {
    let what = if dir == Dir::Fwd { "call" } else { "uncall" };
    if m.tape.depth() < 2 || !crate::ad::tape::holds_active(args) {
        return Err(crate::ad::tape::decline(what));
    }
    let rp = expect_rev(p, what)?;
    let primal = crate::ad::tape::plain_data(args);
    let out = std::mem::replace(&mut m.out, Box::new(std::io::sink()));
    let checked = crate::ad::tape::Tapes::paused(m, |m| run(m, p, &primal, dir));
    m.out = out;
    checked?;
    let f = translation(&rp, dir == Dir::Fwd)?.list.clone();
    let r = m.call_on(&f, std::slice::from_ref(args));
    // (the list it read last is not held past the call)
    m.rev_elems = None;
    r
}

/// The arguments of one of the translation's arithmetic helpers, which a
/// level does not model: it gives way if one is an active real.
fn on_plain(a: &[Value], what: &str) -> Result<()> {
    if crate::ad::tape::any_active(a) {
        return Err(crate::ad::tape::decline(what));
    }
    Ok(())
}

/// `(rev-grad p k a ...)`: d(final value of variable k)/d(a_i) for every i, by a forward
/// run and then a backward run on (value, adjoint) pairs.
pub fn grad(m: &mut Machine, p: &Value, k: &Value, args: &Value) -> Result<Value> {
    let rp = expect_rev(p, "rev-grad")?;
    let orig = list_items(m, args).unwrap_or_default();
    let vals = in_vals(m, &rp, args, "rev-grad")?;
    let n = rp.code.nparams;
    let k = grad_index(k, n)?;
    let d = Dir::Fwd.xor(rp.inverted);
    let mut ex = Exec::new(m, Mode::Plain);
    let base = ex.push_frame(&rp.code, vals, None);
    ex.run(&rp.code, base, d)?;
    ex.mode = Mode::Adjoint;
    ex.ders = ex.vals.iter().map(zero_der).collect();
    match &ex.vals[k] {
        Val::S(x) if x.is_number() => ex.ders[k] = Val::S(Value::Int(1)),
        other => {
            return Err(err(format!(
                "rev-grad: variable {} ({}) of {} ends as {}, not a number",
                k,
                rp.code.def.params[k].0,
                rp.display_name(),
                exec::describe_val(other)
            )))
        }
    }
    ex.run(&rp.code, base, d.flip())?;
    let ders: Vec<Value> = ex.ders[..n].iter().map(val_value).collect();
    let mut out = Vec::with_capacity(n);
    for (a, dv) in orig.iter().zip(&ders) {
        out.push(grad::conform(ex.m, a, dv)?);
    }
    Ok(Value::list(out))
}

/// The name a derivative run reports under: `call`/`uncall` (`tuple`) or
/// `%rev-call`/`%rev-uncall`, run forward when `flag` is true.
fn run_name(flag: &Value, tuple: bool) -> &'static str {
    match (flag.is_true(), tuple) {
        (true, true) => "call",
        (false, true) => "uncall",
        (true, false) => "%rev-call",
        (false, false) => "%rev-uncall",
    }
}

/// `v` described with its shape: a list's length, a packed vector's shape.
fn shape_of(v: &Value) -> String {
    let what = match v {
        Value::Pair(_) => {
            let mut n = 0;
            let mut cur = v;
            while let Value::Pair(p) = cur {
                n += 1;
                cur = &p.cdr;
            }
            match cur {
                Value::Nil => format!("a list of {} element{}", n, if n == 1 { "" } else { "s" }),
                _ => "a pair".to_string(),
            }
        }
        Value::Vector(rv) => rv.describe(),
        other => other.kind_name().to_string(),
    };
    format!("{} ({})", describe(v), what)
}

/// Checks the tangents (`kind` "tangent", of the arguments) or sensitivities (of the
/// results) `ds` that VLAD passes to a derivative run of `p` against the values `xs`
/// they belong to: a list with one for each variable, each shaped like its value
/// ([`grad::misfit`]). Both are forced.
fn check_incoming(p: &RevProc, what: &str, kind: &str, xs: &[Value], ds: &Value) -> Result<Vec<Value>> {
    let of = if kind == "tangent" { "arguments" } else { "results" };
    let names: Vec<&str> = p.code.def.params.iter().map(|(n, _)| &**n).collect();
    let mut items = Vec::with_capacity(xs.len());
    let mut cur = ds;
    while let Value::Pair(q) = cur {
        items.push(q.car.clone());
        cur = &q.cdr;
    }
    if !matches!(cur, Value::Nil) || items.len() != xs.len() {
        let n = xs.len();
        return Err(err(format!(
            "{}: the {} of the {} of {} must be a list of {} value{}, one for each variable ({}), got {}",
            what,
            kind,
            of,
            p.display_name(),
            n,
            if n == 1 { "" } else { "s" },
            names.join(" "),
            shape_of(ds)
        )));
    }
    for (i, (x, d)) in xs.iter().zip(&items).enumerate() {
        if let Some(m) = grad::misfit(x, d) {
            let mut place = format!("variable {}", names.get(i).copied().unwrap_or("?"));
            for k in &m.path {
                place = format!("element {} of {}", k, place);
            }
            return Err(err(format!(
                "{}: the {} of the {} of {} must be shaped like them, but {} is {} and its {} is {}",
                what,
                kind,
                of,
                p.display_name(),
                place,
                shape_of(&m.x),
                kind,
                shape_of(&m.d)
            )));
        }
    }
    Ok(items)
}

/// The backpropagator of `%rev-call` (`flag` #t) / `%rev-uncall` (`call`/`uncall` when
/// `tuple`): starting from the outputs `y` with adjoints `ybar`, runs backward and
/// returns the adjoints of the inputs `a`.
pub fn vjp(
    m: &mut Machine,
    p: &Value,
    flag: &Value,
    tuple: bool,
    a: &Value,
    y: &Value,
    ybar: &Value,
) -> Result<Value> {
    let what = run_name(flag, tuple);
    let rp = expect_rev(p, what)?;
    let d = dir_of(flag).xor(rp.inverted);
    let (a, y, ybar) = (&force(m, a)?, &force(m, y)?, &force(m, ybar)?);
    let vals = in_vals(m, &rp, y, what)?;
    let ys = list_items(m, y).unwrap_or_default();
    let yb = check_incoming(&rp, what, "sensitivity", &ys, ybar)?;
    let ders: Vec<Val> = vals.iter().zip(&yb).map(|(v, b)| grad::der_val(v, b)).collect();
    let mut ex = Exec::new(m, Mode::Adjoint);
    let base = ex.push_frame(&rp.code, vals, Some(ders));
    ex.run(&rp.code, base, d.flip())?;
    let n = rp.code.nparams;
    let ders: Vec<Value> = ex.ders[..n].iter().map(val_value).collect();
    let ins = list_items(ex.m, a).unwrap_or_default();
    let mut out = Vec::with_capacity(n);
    for (x, dv) in ins.iter().zip(&ders) {
        out.push(grad::conform(ex.m, x, dv)?);
    }
    Ok(Value::list(out))
}

/// The tangent rule of `%rev-call` / `%rev-uncall` (`call`/`uncall` when `tuple`):
/// runs once with tangents; returns the outputs (as the run returns them) paired
/// with their tangents.
pub fn jvp(m: &mut Machine, p: &Value, flag: &Value, tuple: bool, a: &Value, da: &Value) -> Result<Value> {
    let what = run_name(flag, tuple);
    let rp = expect_rev(p, what)?;
    let d = dir_of(flag).xor(rp.inverted);
    let (a, da) = (&force(m, a)?, &force(m, da)?);
    let vals = in_vals(m, &rp, a, what)?;
    let ins = list_items(m, a).unwrap_or_default();
    let dl = check_incoming(&rp, what, "tangent", &ins, da)?;
    let ders: Vec<Val> = vals.iter().zip(&dl).map(|(v, b)| grad::der_val(v, b)).collect();
    let mut ex = Exec::new(m, Mode::Tangent);
    let base = ex.push_frame(&rp.code, vals, Some(ders));
    ex.run(&rp.code, base, d)?;
    let n = rp.code.nparams;
    let mut ys = Vec::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    for (i, a_i) in ins.iter().enumerate().take(n) {
        let y = exec::repack(val_value(&ex.vals[i]), a_i);
        let dy = val_value(&ex.ders[i]);
        out.push(grad::conform(ex.m, &y, &dy)?);
        ys.push(y);
    }
    Ok(Value::cons(Value::list(ys), Value::list(out)))
}

// ----- primitives used by reversible code and by the syntax above -----

fn int_pair(a: &Value, b: &Value) -> Option<(BigInt, BigInt)> {
    match (a, b) {
        (Value::Int(_) | Value::Big(_), Value::Int(_) | Value::Big(_)) => {
            Some((crate::num::big(a)?, crate::num::big(b)?))
        }
        _ => None,
    }
}

fn num_err(name: &str, a: &Value, b: &Value) -> Error {
    err(format!("{}: expected two numbers, got {} and {}", name, describe(a), describe(b)))
}

fn floor_div(a: &Value, b: &Value) -> Result<Value> {
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        if *y != 0 && !(*x == i64::MIN && *y == -1) {
            return Ok(Value::Int(x.div_floor(y)));
        }
    }
    if let Some((x, y)) = int_pair(a, b) {
        if num_traits::Zero::is_zero(&y) {
            return Err(err("/: division by zero (floored integer division)".into()));
        }
        return Ok(crate::num::from_big(x.div_floor(&y)));
    }
    match exec::div_exact(a, b) {
        Some(Ok(v)) => Ok(v),
        Some(Err(m)) => Err(err(format!("/: {}", m))),
        None => Err(num_err("/", a, b)),
    }
}

fn floor_mod(a: &Value, b: &Value) -> Result<Value> {
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        if *y == -1 {
            return Ok(Value::Int(0));
        }
        if *y != 0 {
            return Ok(Value::Int(x.mod_floor(y)));
        }
    }
    if let Some((x, y)) = int_pair(a, b) {
        if y == BigInt::from(0) {
            return Err(err("%: division by zero".into()));
        }
        return Ok(crate::num::from_big(x.mod_floor(&y)));
    }
    if crate::num::is_exact_num(a) && crate::num::is_exact_num(b) {
        let (x, y) = (crate::num::rat(a).unwrap(), crate::num::rat(b).unwrap());
        if num_traits::Zero::is_zero(&y) {
            return Err(err("%: division by zero".into()));
        }
        let q = (&x / &y).floor();
        return Ok(crate::num::from_rat(x - y * q));
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => Ok(Value::Real(x - y * (x / y).floor())),
        _ => Err(num_err("%", a, b)),
    }
}

fn int_op(name: &str, a: &Value, b: &Value, f: fn(BigInt, BigInt) -> BigInt) -> Result<Value> {
    match int_pair(a, b) {
        Some((x, y)) => Ok(crate::num::from_big(f(x, y))),
        None => Err(err(format!(
            "{}: expected two exact integers, got {} and {}",
            name,
            describe(a),
            describe(b)
        ))),
    }
}

// Nested differentiation goes through the procedure as VLAD code (`functional`):
// each of these equals a VLAD function of the procedure's translation.
// The translation leaves out the run-time checks (assertions, `delocal`, `pop`,
// division by zero): `%rev-checked`, whose derivative is zero, runs the procedure
// with them on the primal values first (its transformed versions reach the plain
// values), as `call`'s own rule does at one level, and errors as that run would.
const VIA_JVP: Rule = Rule::Via {
    f: "(lambda ((cons p (cons flag (cons a (cons da t))))) \
          (let* ((checked (%rev-checked (cons flag #f) (cons p a))) \
                 (f (%rev-fun (cons p flag))) (r ((bundle f (perturb (zero f))) (bundle a (perturb da))))) \
            (cons (primal r) (unperturb (tangent r)))))",
};
const VIA_VJP: Rule = Rule::Via {
    f: "(lambda ((cons p (cons flag (cons x (cons y (cons yb t)))))) \
          (let* ((checked (%rev-checked (cons flag #f) (cons p x))) \
                 (f (%rev-fun (cons p flag))) ((cons fy bp) ((*j f) (*j x))) \
                 ((cons fb xb) (unsensitize (bp (sensitize yb)))))  xb))",
};
const VIA_JVP_TUPLE: Rule = Rule::Via {
    f: "(lambda ((cons flag (cons x (cons dx t)))) \
          (let* ((checked (%rev-checked (cons flag #t) x)) \
                 (f (%rev-fun-tuple (cons x flag))) (r ((bundle f (perturb (zero f))) (bundle x (perturb dx))))) \
            (cons (primal r) (unperturb (tangent r)))))",
};
const VIA_VJP_TUPLE: Rule = Rule::Via {
    f: "(lambda ((cons flag (cons x (cons y (cons yb t))))) \
          (let* ((checked (%rev-checked (cons flag #t) x)) \
                 (f (%rev-fun-tuple (cons x flag))) ((cons fy bp) ((*j f) (*j x))) \
                 ((cons fb xb) (unsensitize (bp (sensitize yb))))) xb))",
};
// (The translation leaves out the run-time checks: `%rev-grad-checked` runs the
// procedure with them on the primal values, as `call`'s own rule does for the others.)
const VIA_GRAD: Rule =
    Rule::Via { f: "(lambda (x) (let ((checked (%rev-grad-checked x))) ((%rev-fun-grad x) x)))" };
use crate::prims::ZERO_RULES as ZERO;

/// The primitives of this module, appended to the primitive table.
pub fn prims() -> Vec<PrimDef> {
    let p = PrimDef::new;
    vec![
        p(
            "%rev-call",
            2,
            |m, a| run(m, &a[0], &a[1], Dir::Fwd),
            Rule::Joint {
                jvp: "(lambda ((cons p a) (cons dp da)) (%rev-jvp p (list #t a da)))",
                vjp: "(lambda ((cons p a) y yb) (cons '() (%rev-vjp p (list #t a y yb))))",
            },
            Class::Other,
        ),
        p(
            "%rev-uncall",
            2,
            |m, a| run(m, &a[0], &a[1], Dir::Bwd),
            Rule::Joint {
                jvp: "(lambda ((cons p a) (cons dp da)) (%rev-jvp p (list #f a da)))",
                vjp: "(lambda ((cons p a) y yb) (cons '() (%rev-vjp p (list #f a y yb))))",
            },
            Class::Other,
        ),
        // Primitives here take two arguments (the evaluator spreads a lazy tuple of
        // three only one level), so the extra ones travel in pairs.
        // `(call p a ...)`, `(uncall p a ...)`, `(rev-grad p k a ...)`: ordinary
        // primitives (a program may define its own `call`) whose one argument is the
        // tuple `(cons* p a ...)`, split by the number of p's variables.
        p(
            "call",
            1,
            |m, a| {
                let (p, xs) = split_call(m, &a[0], 0, "call")?;
                let hint = improper_last(&p, &xs);
                run(m, &p, &Value::list(xs), Dir::Fwd).map_err(|e| with_hint(e, hint))
            },
            Rule::Joint {
                jvp: "(lambda (x dx) (%rev-jvp-tuple (list #t x dx)))",
                vjp: "(lambda (x y yb) (%rev-vjp-tuple (list #t x y yb)))",
            },
            Class::Other,
        ),
        p(
            "uncall",
            1,
            |m, a| {
                let (p, xs) = split_call(m, &a[0], 0, "uncall")?;
                let hint = improper_last(&p, &xs);
                run(m, &p, &Value::list(xs), Dir::Bwd).map_err(|e| with_hint(e, hint))
            },
            Rule::Joint {
                jvp: "(lambda (x dx) (%rev-jvp-tuple (list #f x dx)))",
                vjp: "(lambda (x y yb) (%rev-vjp-tuple (list #f x y yb)))",
            },
            Class::Other,
        ),
        p(
            "rev-grad",
            1,
            |m, a| rev_grad(m, &a[0]),
            VIA_GRAD,
            Class::Other,
        ),
        // `call`/`uncall` (first argument `(cons flag tuple?)`; the second the
        // call's tuple, or `(cons p args)`) as a primitive with a zero
        // derivative, for the checks the translation leaves out (see `VIA_JVP`).
        p(
            "%rev-checked",
            2,
            |m, a| {
                let how = force(m, &a[0])?;
                let (flag, tuple) = match &how {
                    Value::Pair(h) => (h.car.clone(), h.cdr.is_true()),
                    _ => return Err(err("%rev-checked: bad arguments".into())),
                };
                let dir = if flag.is_true() { Dir::Fwd } else { Dir::Bwd };
                let (p, args) = if tuple {
                    let (p, xs) = split_call(m, &a[1], 0, run_name(&flag, true))?;
                    (p, Value::list(xs))
                } else {
                    match force(m, &a[1])? {
                        Value::Pair(pa) => (pa.car.clone(), pa.cdr.clone()),
                        _ => return Err(err("%rev-checked: bad arguments".into())),
                    }
                };
                // (its `write` statements print once, from the translation)
                let out = std::mem::replace(&mut m.out, Box::new(std::io::sink()));
                let r = run(m, &p, &args, dir);
                m.out = out;
                r
            },
            ZERO,
            Class::Other,
        ),
        // `rev-grad` as a primitive with a zero derivative: its transformed versions
        // reach the plain values, where it runs with the checks.
        p(
            "%rev-grad-checked",
            1,
            |m, a| rev_grad(m, &a[0]),
            ZERO,
            Class::Other,
        ),
        p(
            "%rev-jvp-tuple",
            1,
            |m, a| {
                let args = force(m, &a[0])?;
                match list_items(m, &args).as_deref() {
                    Some([flag, x, dx]) => {
                        let (p, xs) = split_call(m, x, 0, run_name(flag, true))?;
                        let hint = improper_last(&p, &xs);
                        let dxs = split_like(dx, xs.len());
                        jvp(m, &p, flag, true, &Value::list(xs), &Value::list(dxs)).map_err(|e| with_hint(e, hint))
                    }
                    _ => Err(err("%rev-jvp-tuple: bad arguments".into())),
                }
            },
            VIA_JVP_TUPLE,
            Class::Other,
        ),
        p(
            "%rev-vjp-tuple",
            1,
            |m, a| {
                let args = force(m, &a[0])?;
                match list_items(m, &args).as_deref() {
                    Some([flag, x, y, yb]) => {
                        let (p, xs) = split_call(m, x, 0, "call")?;
                        let xb = vjp(m, &p, flag, true, &Value::list(xs), y, yb)?;
                        let xb = list_items(m, &xb).unwrap_or_default();
                        Ok(make_tuple(Value::Nil, xb))
                    }
                    _ => Err(err("%rev-vjp-tuple: bad arguments".into())),
                }
            },
            VIA_VJP_TUPLE,
            Class::Other,
        ),
        // The same on a list of values, `(%rev-call p (list a ...))`. These helpers take
        // two arguments (the evaluator spreads a lazy tuple of three only one level), so
        // the extra ones travel in lists.
        p(
            "%rev-vjp",
            2,
            |m, a| {
                let args = force(m, &a[1])?;
                match list_items(m, &args).as_deref() {
                    Some([flag, x, y, yb]) => vjp(m, &a[0], flag, false, x, y, yb),
                    _ => Err(err("%rev-vjp: bad arguments".into())),
                }
            },
            VIA_VJP,
            Class::Other,
        ),
        p(
            "%rev-jvp",
            2,
            |m, a| {
                let args = force(m, &a[1])?;
                match list_items(m, &args).as_deref() {
                    Some([flag, x, dx]) => jvp(m, &a[0], flag, false, x, dx),
                    _ => Err(err("%rev-jvp: bad arguments".into())),
                }
            },
            VIA_JVP,
            Class::Other,
        ),
        // The procedure as VLAD closures (`functional`), for the rules above. They
        // receive transformed arguments (`Rule::Predicate`: zero derivative).
        p("%rev-fun", 1, |m, a| fun_entry(m, &a[0], Entry::List), Rule::Predicate, Class::Other),
        p("%rev-fun-tuple", 1, |m, a| fun_entry(m, &a[0], Entry::Tuple), Rule::Predicate, Class::Other),
        p("%rev-fun-grad", 1, |m, a| fun_entry(m, &a[0], Entry::Grad), Rule::Predicate, Class::Other),
        // What the translation computes with: element access and update on a list or
        // packed vector, packed vectors as lists of their elements (as the store holds
        // them) and back (`%rev-repack` at the top, as `call` returns them;
        // `%rev-pack-like` at any depth, for the cotangent), exact division (`/=`), and
        // the zero `push` leaves behind.
        p(
            "%rev-ref",
            2,
            |m, a| elem_ref(m, &a[0], &a[1]),
            Rule::Rules {
                jvp: "(lambda ((cons v i) y (cons dv di)) (%rev-ref dv i))",
                vjp: "(lambda ((cons v i) y yb) (cons (%rev-set (zero v) i yb) (zero i)))",
            },
            Class::Other,
        ),
        p(
            "%rev-set",
            3,
            |m, a| elem_set(m, &a[0], &a[1], &a[2]),
            Rule::Rules {
                jvp: "(lambda ((cons* v i x) y (cons* dv di dx)) (%rev-set dv i dx))",
                vjp: "(lambda ((cons* v i x) y yb) (cons* (%rev-set yb i (zero x)) (zero i) (%rev-ref yb i)))",
            },
            Class::Other,
        ),
        p(
            "%rev-unpack",
            1,
            |_, a| Ok(unpack(&a[0])),
            Rule::Rules { jvp: "(lambda (x y dx) (%rev-unpack dx))", vjp: "(lambda (x y yb) (%rev-pack-like yb x))" },
            Class::Other,
        ),
        p(
            "%rev-pack-like",
            2,
            |_, a| Ok(pack_like(&a[0], &a[1])),
            Rule::Rules {
                jvp: "(lambda ((cons v like) y (cons dv dl)) (%rev-pack-like dv like))",
                vjp: "(lambda ((cons v like) y yb) (cons (%rev-unpack yb) (zero like)))",
            },
            Class::Other,
        ),
        p(
            "%rev-repack",
            2,
            |m, a| {
                // (a packed vector holds no active real)
                if m.tape.active() && matches!(a[1], Value::Vector(_)) && crate::ad::tape::holds_active(&a[0]) {
                    return Err(crate::ad::tape::decline("%rev-repack"));
                }
                Ok(exec::repack(a[0].clone(), &a[1]))
            },
            Rule::Rules {
                jvp: "(lambda ((cons v like) y (cons dv dl)) (%rev-repack dv like))",
                vjp: "(lambda ((cons v like) y yb) (cons (%rev-unpack yb) (zero like)))",
            },
            Class::Other,
        ),
        p(
            "%rev-qdiv",
            2,
            |_, a| {
                on_plain(a, "/=")?;
                match exec::div_exact(&a[0], &a[1]) {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(msg)) => Err(err(format!("/=: {}", msg))),
                    None => Err(num_err("/=", &a[0], &a[1])),
                }
            },
            Rule::Rules {
                jvp: "(lambda ((cons x1 x2) y (cons d1 d2)) (/ (- d1 (* y d2)) x2))",
                vjp: "(lambda ((cons x1 x2) y yb) (cons (/ yb x2) (- 0 (/ (* yb y) x2))))",
            },
            Class::Arith,
        ),
        // `mod32` wrapping of an integer (anything else as is), with the derivative
        // the executor's runs give it: the identity's.
        p(
            "%rev-wrap32",
            1,
            |_, a| match &a[0] {
                v @ (Value::Int(_) | Value::Big(_)) => exec::wrap32(v).map_err(|(_, m)| err(m)),
                v => Ok(v.clone()),
            },
            Rule::Rules { jvp: "(lambda (x y dx) dx)", vjp: "(lambda (x y yb) yb)" },
            Class::Other,
        ),
        p(
            "%rev-zero-of",
            1,
            |_, a| {
                let x = crate::ad::tape::strip(&a[0]);
                Ok(if matches!(*x, Value::Real(_)) { Value::Real(0.0) } else { Value::Int(0) })
            },
            ZERO,
            Class::Other,
        ),
        p(
            "rev-inverse",
            1,
            |_, a| {
                let r = expect_rev(&a[0], "rev-inverse")?;
                Ok(Value::Rev(Rc::new(RevProc { code: r.code.clone(), inverted: !r.inverted })))
            },
            ZERO,
            Class::Other,
        ),
        p(
            "show-inverse",
            1,
            |m, a| {
                let r = expect_rev(&a[0], "show-inverse")?;
                let text = inverse_text(&r);
                let _ = write!(m.out, "{}", text);
                Ok(Value::Bool(true))
            },
            ZERO,
            Class::Other,
        ),
        p(
            "%rev-div",
            2,
            |_, a| on_plain(a, "/").and_then(|()| floor_div(&a[0], &a[1])),
            Rule::Rules {
                jvp: "(lambda ((cons x1 x2) y (cons d1 d2)) (if (%rev-ints? x1 x2) (zero y) (/ (- d1 (* y d2)) x2)))",
                vjp: "(lambda ((cons x1 x2) y yb) (if (%rev-ints? x1 x2) (cons (zero x1) (zero x2)) (cons (/ yb x2) (- 0 (/ (* yb y) x2)))))",
            },
            Class::Arith,
        ),
        p(
            "%rev-mod",
            2,
            |_, a| on_plain(a, "%").and_then(|()| floor_mod(&a[0], &a[1])),
            Rule::Rules {
                jvp: "(lambda ((cons x1 x2) y (cons d1 d2)) (if (%rev-ints? x1 x2) (zero y) (- d1 (* d2 (/ (- x1 y) x2)))))",
                vjp: "(lambda ((cons x1 x2) y yb) (if (%rev-ints? x1 x2) (cons (zero x1) (zero x2)) (cons yb (- 0 (* yb (/ (- x1 y) x2))))))",
            },
            Class::Arith,
        ),
        p(
            "%rev-fracmul",
            2,
            |_, a| {
                on_plain(a, "*/")?;
                match (&a[0], &a[1]) {
                    (Value::Int(x), Value::Int(y)) => {
                        let r = (*x as i128 * *y as i128) >> 32; // floored
                        Ok(i64::try_from(r).map(Value::Int).unwrap_or_else(|_| crate::num::from_big(BigInt::from(r))))
                    }
                    _ => int_op("*/", &a[0], &a[1], |x, y| (x * y).div_floor(&(BigInt::from(1) << 32))),
                }
            },
            ZERO,
            Class::Arith,
        ),
        p("%rev-and", 2, |_, a| on_plain(a, "&").and_then(|()| int_op("bitwise-and", &a[0], &a[1], |x, y| x & y)), ZERO, Class::Arith),
        p("%rev-or", 2, |_, a| on_plain(a, "|").and_then(|()| int_op("bitwise-or", &a[0], &a[1], |x, y| x | y)), ZERO, Class::Arith),
        p("%rev-xor", 2, |_, a| on_plain(a, "^").and_then(|()| int_op("bitwise-xor", &a[0], &a[1], |x, y| x ^ y)), ZERO, Class::Arith),
        // `^=` in the translation: the target's derivative passes through, as in the
        // executor's tangent and adjoint runs.
        p(
            "%rev-xor-update",
            2,
            |_, a| on_plain(a, "^=").and_then(|()| int_op("^=", &a[0], &a[1], |x, y| x ^ y)),
            Rule::Rules {
                jvp: "(lambda ((cons x e) y (cons dx de)) dx)",
                vjp: "(lambda ((cons x e) y yb) (cons yb (zero e)))",
            },
            Class::Arith,
        ),
        p(
            "%rev-ints?",
            2,
            |_, a| {
                let (x, y) = (crate::ad::ops::strip(&a[0]), crate::ad::ops::strip(&a[1]));
                Ok(Value::Bool(int_pair(&x, &y).is_some()))
            },
            Rule::Predicate,
            Class::Other,
        ),
    ]
}

use std::io::Write;
