//! The expander: surface VLAD syntax (data with spans) to a tiny core language of
//! constants, variables, one-argument lambdas with patterns, applications,
//! `letrec`, `let` of one pattern, `if`, and pair construction.

use crate::datum::{Datum, DatumKind};
use crate::error::{Error, Result};
use crate::source::Span;
use crate::value::Value;
use std::rc::Rc;

/// A core expression.
#[derive(Clone, Debug)]
pub enum Core {
    Const(ConstVal, Span),
    Var(Rc<str>, Span),
    Lambda(Rc<CoreLambda>),
    /// `(f a ...)`: no argument means `'()`, one is passed as is, several as a tuple.
    App(Box<Core>, Vec<Core>, Span),
    Letrec(Vec<(Rc<str>, Span, Rc<CoreLambda>)>, Box<Core>, Span),
    Let(Pat, Box<Core>, Box<Core>, Span),
    If(Box<Core>, Box<Core>, Box<Core>, Span),
    Cons(Box<Core>, Box<Core>, Span),
}

/// A quoted or literal constant (kept as data so the core stays `Debug`).
#[derive(Clone, Debug)]
pub struct ConstVal(pub DatumKindValue);

/// Values that literals denote: (), booleans, numbers and pairs of these; and
/// the primitives that forms expand into calls of (`error`'s).
#[derive(Debug)]
pub enum DatumKindValue {
    Nil,
    Bool(bool),
    Int(i64),
    Big(Rc<num_bigint::BigInt>),
    Rat(Rc<num_rational::BigRational>),
    Real(f64),
    Pair(Box<DatumKindValue>, Box<DatumKindValue>),
    Prim(crate::prims::PrimId),
}

/// (Copying recurses once per level of nesting, growing the stack as it goes.)
impl Clone for DatumKindValue {
    fn clone(&self) -> DatumKindValue {
        match self {
            DatumKindValue::Nil => DatumKindValue::Nil,
            DatumKindValue::Bool(b) => DatumKindValue::Bool(*b),
            DatumKindValue::Int(i) => DatumKindValue::Int(*i),
            DatumKindValue::Big(b) => DatumKindValue::Big(b.clone()),
            DatumKindValue::Rat(q) => DatumKindValue::Rat(q.clone()),
            DatumKindValue::Real(r) => DatumKindValue::Real(*r),
            DatumKindValue::Prim(p) => DatumKindValue::Prim(*p),
            DatumKindValue::Pair(a, d) => crate::stack::grow(|| DatumKindValue::Pair(a.clone(), d.clone())),
        }
    }
}

/// Quoted data nest as deeply as the source does: dropped with an explicit
/// work list rather than by recursion.
impl Drop for DatumKindValue {
    fn drop(&mut self) {
        let DatumKindValue::Pair(a, d) = self else { return };
        let mut work = vec![
            std::mem::replace(&mut **a, DatumKindValue::Nil),
            std::mem::replace(&mut **d, DatumKindValue::Nil),
        ];
        while let Some(mut v) = work.pop() {
            if let DatumKindValue::Pair(a, d) = &mut v {
                work.push(std::mem::replace(&mut **a, DatumKindValue::Nil));
                work.push(std::mem::replace(&mut **d, DatumKindValue::Nil));
            }
        }
    }
}

impl DatumKindValue {
    pub fn to_value(&self) -> Value {
        match self {
            DatumKindValue::Nil => Value::Nil,
            DatumKindValue::Bool(b) => Value::Bool(*b),
            DatumKindValue::Int(i) => Value::Int(*i),
            DatumKindValue::Big(b) => Value::Big(b.clone()),
            DatumKindValue::Rat(q) => Value::Rat(q.clone()),
            DatumKindValue::Real(r) => Value::Real(*r),
            DatumKindValue::Prim(p) => Value::Prim(*p),
            DatumKindValue::Pair(a, d) => crate::stack::grow(|| Value::cons(a.to_value(), d.to_value())),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CoreLambda {
    pub param: Pat,
    pub body: Core,
    pub span: Span,
    pub name: Option<Rc<str>>,
}

/// A destructuring pattern.
#[derive(Debug)]
pub enum Pat {
    Var(Rc<str>, Span),
    Const(ConstVal, Span),
    Cons(Box<Pat>, Box<Pat>, Span),
}

/// (Copying recurses once per level of nesting, growing the stack as it goes.)
impl Clone for Pat {
    fn clone(&self) -> Pat {
        match self {
            Pat::Var(n, s) => Pat::Var(n.clone(), *s),
            Pat::Const(c, s) => Pat::Const(c.clone(), *s),
            Pat::Cons(a, d, s) => crate::stack::grow(|| Pat::Cons(a.clone(), d.clone(), *s)),
        }
    }
}

/// A procedure of n parameters has an n-deep pattern: dropped with a work
/// list rather than by recursion.
impl Drop for Pat {
    fn drop(&mut self) {
        let hole = || Pat::Const(ConstVal(DatumKindValue::Nil), Span::default());
        let Pat::Cons(a, d, _) = self else { return };
        let mut work = vec![std::mem::replace(&mut **a, hole()), std::mem::replace(&mut **d, hole())];
        while let Some(mut p) = work.pop() {
            if let Pat::Cons(a, d, _) = &mut p {
                work.push(std::mem::replace(&mut **a, hole()));
                work.push(std::mem::replace(&mut **d, hole()));
            }
        }
    }
}

impl Pat {
    pub fn span(&self) -> Span {
        match self {
            Pat::Var(_, s) | Pat::Const(_, s) | Pat::Cons(_, _, s) => *s,
        }
    }
    /// The variables bound, in order (a work list: a tuple of n parameters is a
    /// pattern n deep).
    pub fn vars(&self, out: &mut Vec<(Rc<str>, Span)>) {
        let mut work = vec![self];
        while let Some(p) = work.pop() {
            match p {
                Pat::Var(n, s) => out.push((n.clone(), *s)),
                Pat::Const(..) => {}
                Pat::Cons(a, d, _) => {
                    work.push(d);
                    work.push(a);
                }
            }
        }
    }
}

/// Core expressions nest as deeply as the source does: they are dropped with
/// an explicit work list rather than by recursion (see `anf::Block`'s `Drop`).
impl Drop for Core {
    fn drop(&mut self) {
        fn hole() -> Core {
            Core::Const(ConstVal(DatumKindValue::Nil), Span::default())
        }
        fn take_parts(c: &mut Core, out: &mut Vec<Core>) {
            fn take(b: &mut Core, out: &mut Vec<Core>) {
                if !matches!(b, Core::Const(..) | Core::Var(..)) {
                    out.push(std::mem::replace(b, hole()));
                }
            }
            match c {
                Core::Const(..) | Core::Var(..) => {}
                Core::Lambda(l) => {
                    if let Some(l) = Rc::get_mut(l) {
                        out.push(std::mem::replace(&mut l.body, hole()));
                    }
                }
                Core::App(f, args, _) => {
                    take(f, out);
                    out.append(args);
                }
                Core::Letrec(defs, body, _) => {
                    for (_, _, l) in defs.iter_mut() {
                        if let Some(l) = Rc::get_mut(l) {
                            out.push(std::mem::replace(&mut l.body, hole()));
                        }
                    }
                    take(body, out);
                }
                Core::Let(_, a, b, _) | Core::Cons(a, b, _) => {
                    take(a, out);
                    take(b, out);
                }
                Core::If(c, t, e, _) => {
                    take(c, out);
                    take(t, out);
                    take(e, out);
                }
            }
        }
        let mut pending = Vec::new();
        take_parts(self, &mut pending);
        while let Some(mut c) = pending.pop() {
            take_parts(&mut c, &mut pending);
        }
    }
}

impl Core {
    pub fn span(&self) -> Span {
        match self {
            Core::Const(_, s) | Core::Var(_, s) | Core::App(_, _, s) | Core::Letrec(_, _, s) => *s,
            Core::Let(_, _, _, s) | Core::If(_, _, _, s) | Core::Cons(_, _, s) => *s,
            Core::Lambda(l) => l.span,
        }
    }
}

/// Names that are syntax, not variables.
pub const KEYWORDS: &[&str] = &[
    "lambda",
    "let",
    "let*",
    "letrec",
    "if",
    "cond",
    "and",
    "or",
    "cons",
    "cons*",
    "list",
    "quote",
    "define",
    "include",
    "else",
    "define-reversible",
];

fn bad(d: &Datum, msg: impl Into<String>) -> Error {
    Error::syntax(d.span, msg)
}

/// Turns a quoted datum into a constant; symbols and strings are not VLAD data.
pub fn datum_const(d: &Datum) -> Result<ConstVal> {
    fn go(d: &Datum) -> Result<DatumKindValue> {
        crate::stack::grow(|| go_here(d))
    }
    fn go_here(d: &Datum) -> Result<DatumKindValue> {
        Ok(match &d.kind {
            DatumKind::Int(i) => DatumKindValue::Int(*i),
            DatumKind::Big(b) => DatumKindValue::Big(b.clone()),
            DatumKind::Rat(q) => DatumKindValue::Rat(q.clone()),
            DatumKind::Real(r) => DatumKindValue::Real(*r),
            DatumKind::Bool(b) => DatumKindValue::Bool(*b),
            DatumKind::List(items, tail) => {
                // Convert left to right, so an error names the first bad element.
                let cars = items.iter().map(go).collect::<Result<Vec<_>>>()?;
                let tail = match tail {
                    Some(t) => go(t)?,
                    None => DatumKindValue::Nil,
                };
                cars.into_iter().rev().fold(tail, |acc, a| DatumKindValue::Pair(Box::new(a), Box::new(acc)))
            }
            DatumKind::Symbol(s) => {
                return Err(bad(d, format!("symbols are not VLAD data: `{}` cannot be quoted", s)))
            }
            DatumKind::Str(_) => return Err(bad(d, "strings are not VLAD data")),
        })
    }
    go(d).map(ConstVal)
}

/// Whether a form `(head "text" ...)` has a string after its head: `error`
/// and `write` are then the forms that print it (they are variables otherwise).
pub fn text_form(items: &[Datum]) -> bool {
    matches!(items.get(1).map(|m| &m.kind), Some(DatumKind::Str(_)))
}

/// `(error "message" irritant ...)`: a call of the primitive `%error` on the
/// message's index (`prims::intern_message`) and the list of the irritants,
/// which fails with the message followed by the irritants' values.
fn expand_error(d: &Datum, items: &[Datum]) -> Result<Core> {
    let sp = d.span;
    let DatumKind::Str(msg) = &items[1].kind else { unreachable!("checked by the caller") };
    let prim = crate::prims::lookup("%error").expect("the primitive of `error`");
    let k = crate::prims::intern_message(msg);
    let irritants = expand_cons_star(d, &items[2..], Some(Core::Const(ConstVal(DatumKindValue::Nil), sp)))?;
    Ok(Core::App(
        Box::new(Core::Const(ConstVal(DatumKindValue::Prim(prim)), items[0].span)),
        vec![Core::Const(ConstVal(DatumKindValue::Int(k)), items[1].span), irritants],
        sp,
    ))
}

/// `(write "label" x)`: a call of the primitive `%write-label` on the label's
/// index (`prims::intern_message`) and `x`, which prints the label, a space and
/// `x`'s value, and returns the value; `(write "text")`: of `%write-text`,
/// which prints the text and returns `()`. `(write-real "label" x)` is
/// `%write-real-label`, the same for a real (`write-real`'s check).
fn expand_write(d: &Datum, items: &[Datum]) -> Result<Core> {
    let sp = d.span;
    let real = items[0].as_symbol() == Some("write-real");
    let DatumKind::Str(text) = &items[1].kind else { unreachable!("checked by the caller") };
    let k = Core::Const(ConstVal(DatumKindValue::Int(crate::prims::intern_message(text))), items[1].span);
    let (name, args) = match &items[2..] {
        [] if real => {
            return Err(bad(d, "`write-real` with a label prints a real after it: `(write-real \"x:\" x)`"))
        }
        [] => ("%write-text", vec![k]),
        [x] if real => ("%write-real-label", vec![k, expand(x)?]),
        [x] => ("%write-label", vec![k, expand(x)?]),
        [_, extra, ..] if real => {
            return Err(bad(extra, "`write-real` with a label prints one real after it: `(write-real \"x:\" x)`"))
        }
        [_, extra, ..] => {
            return Err(bad(
                extra,
                "`write` with a label prints one value after it: for several, write a list, `(write \"x y:\" (list x y))`",
            ))
        }
    };
    let prim = crate::prims::lookup(name).expect("the primitives of `write`");
    Ok(Core::App(Box::new(Core::Const(ConstVal(DatumKindValue::Prim(prim)), items[0].span)), args, sp))
}

/// Expands one expression.
pub fn expand(d: &Datum) -> Result<Core> {
    crate::stack::grow(|| expand_here(d))
}

fn expand_here(d: &Datum) -> Result<Core> {
    let sp = d.span;
    match &d.kind {
        DatumKind::Int(_)
        | DatumKind::Big(_)
        | DatumKind::Rat(_)
        | DatumKind::Real(_)
        | DatumKind::Bool(_) => Ok(Core::Const(datum_const(d)?, sp)),
        DatumKind::Str(_) => Err(bad(
            d,
            "a string is not a VLAD expression (a string may only be the message of `(error \"...\" x ...)`, \
             the label of `(write \"...\" x)` or `(write-real \"...\" x)`, or the file of `(include \"...\")`)",
        )),
        DatumKind::Symbol(s) => {
            if KEYWORDS.contains(&&**s) {
                return Err(bad(d, format!("`{}` is syntax and cannot be used as a variable", s)));
            }
            Ok(Core::Var(s.clone(), sp))
        }
        DatumKind::List(items, Some(_)) => {
            let _ = items;
            Err(bad(d, "a dotted list is not an expression"))
        }
        DatumKind::List(items, None) => {
            if items.is_empty() {
                // STALINGRAD accepts an unquoted `()`; so do we.
                return Ok(Core::Const(ConstVal(DatumKindValue::Nil), sp));
            }
            if let Some(head) = items[0].as_symbol() {
                match head {
                    "quote" => return expand_quote(d, items),
                    "lambda" => return expand_lambda(d, items, None).map(Core::Lambda),
                    "let" => return expand_let(d, items),
                    "let*" => return expand_let_star(d, items),
                    "letrec" => return expand_letrec(d, items),
                    "if" => {
                        if items.len() != 4 {
                            return Err(bad(d, "`if` needs a test, a consequent and an alternative"));
                        }
                        return Ok(Core::If(
                            Box::new(expand(&items[1])?),
                            Box::new(expand(&items[2])?),
                            Box::new(expand(&items[3])?),
                            sp,
                        ));
                    }
                    "cond" => return expand_cond(d, &items[1..]),
                    "and" => return expand_and(d, &items[1..]),
                    "or" => return expand_or(d, &items[1..]),
                    "cons" => {
                        if items.len() != 3 {
                            return Err(bad(d, "`cons` takes exactly two expressions"));
                        }
                        return Ok(Core::Cons(
                            Box::new(expand(&items[1])?),
                            Box::new(expand(&items[2])?),
                            sp,
                        ));
                    }
                    "cons*" => return expand_cons_star(d, &items[1..], None),
                    "list" => {
                        return expand_cons_star(
                            d,
                            &items[1..],
                            Some(Core::Const(ConstVal(DatumKindValue::Nil), sp)),
                        )
                    }
                    "define" => return Err(bad(d, "`define` is allowed only at top level")),
                    "define-reversible" => {
                        return Err(bad(d, "`define-reversible` is allowed only at top level"))
                    }
                    "include" => return Err(bad(d, "`include` is allowed only at top level")),
                    // (`error` is a variable otherwise: a string is no expression)
                    "error" if text_form(items) => {
                        return expand_error(d, items)
                    }
                    // (likewise `write` and `write-real` with a label, printing forms)
                    "write" | "write-real" if text_form(items) => {
                        return expand_write(d, items)
                    }
                    "else" => return Err(bad(d, "`else` outside `cond`")),
                    // (Scheme's `case`, which would fail at its `else` clause)
                    "case"
                        if items
                            .iter()
                            .skip(2)
                            .any(|c| c.as_list().and_then(|l| l.first()?.as_symbol()) == Some("else")) =>
                    {
                        return Err(bad(&items[0], "`case` is not VLAD syntax: use `cond`"))
                    }
                    _ => {}
                }
            }
            let f = expand(&items[0])?;
            let args = items[1..].iter().map(expand).collect::<Result<Vec<_>>>()?;
            Ok(Core::App(Box::new(f), args, sp))
        }
    }
}

fn expand_quote(d: &Datum, items: &[Datum]) -> Result<Core> {
    if items.len() != 2 {
        return Err(bad(d, "`quote` takes one datum"));
    }
    Ok(Core::Const(datum_const(&items[1])?, d.span))
}

fn expand_cons_star(d: &Datum, items: &[Datum], tail: Option<Core>) -> Result<Core> {
    let mut exprs = items.iter().map(expand).collect::<Result<Vec<_>>>()?;
    let mut acc = match tail {
        Some(t) => t,
        None => match exprs.pop() {
            Some(last) => last,
            None => Core::Const(ConstVal(DatumKindValue::Nil), d.span),
        },
    };
    for e in exprs.into_iter().rev() {
        acc = Core::Cons(Box::new(e), Box::new(acc), d.span);
    }
    Ok(acc)
}

/// A parameter list `(p ...)` as one pattern: 0 params match `'()`, 1 is itself,
/// n are the tuple `(cons* p1 ... pn)`.
pub fn params_pattern(d: &Datum) -> Result<Pat> {
    match &d.kind {
        DatumKind::List(items, None) => {
            let pats = items.iter().map(pattern).collect::<Result<Vec<_>>>()?;
            Ok(tuple_pattern(pats, d.span))
        }
        _ => Err(bad(d, "expected a parameter list `(p ...)`")),
    }
}

fn tuple_pattern(mut pats: Vec<Pat>, span: Span) -> Pat {
    match pats.len() {
        0 => Pat::Const(ConstVal(DatumKindValue::Nil), span),
        1 => pats.pop().unwrap(),
        _ => {
            let mut acc = pats.pop().unwrap();
            for p in pats.into_iter().rev() {
                let s = p.span().to(acc.span());
                acc = Pat::Cons(Box::new(p), Box::new(acc), s);
            }
            acc
        }
    }
}

/// One pattern: a variable, a constant, `(cons p q)`, `(cons* p ...)`, `(list p ...)`.
pub fn pattern(d: &Datum) -> Result<Pat> {
    crate::stack::grow(|| pattern_here(d))
}

fn pattern_here(d: &Datum) -> Result<Pat> {
    match &d.kind {
        DatumKind::Symbol(s) => {
            if KEYWORDS.contains(&&**s) {
                return Err(bad(d, format!("`{}` is syntax and cannot be bound", s)));
            }
            Ok(Pat::Var(s.clone(), d.span))
        }
        DatumKind::Int(_)
        | DatumKind::Big(_)
        | DatumKind::Rat(_)
        | DatumKind::Real(_)
        | DatumKind::Bool(_) => Ok(Pat::Const(datum_const(d)?, d.span)),
        DatumKind::List(items, None) if items.is_empty() => {
            Ok(Pat::Const(ConstVal(DatumKindValue::Nil), d.span))
        }
        DatumKind::List(items, None) => match items[0].as_symbol() {
            Some("quote") if items.len() == 2 => Ok(Pat::Const(datum_const(&items[1])?, d.span)),
            Some("cons") => {
                if items.len() != 3 {
                    return Err(bad(d, "a `cons` pattern has two parts"));
                }
                Ok(Pat::Cons(Box::new(pattern(&items[1])?), Box::new(pattern(&items[2])?), d.span))
            }
            Some("cons*") => {
                let pats = items[1..].iter().map(pattern).collect::<Result<Vec<_>>>()?;
                if pats.is_empty() {
                    return Ok(Pat::Const(ConstVal(DatumKindValue::Nil), d.span));
                }
                Ok(tuple_pattern(pats, d.span))
            }
            Some("list") => {
                let mut acc = Pat::Const(ConstVal(DatumKindValue::Nil), d.span);
                for it in items[1..].iter().rev() {
                    acc = Pat::Cons(Box::new(pattern(it)?), Box::new(acc), d.span);
                }
                Ok(acc)
            }
            _ => Err(bad(
                d,
                "bad pattern: expected a variable, a constant, or (cons ...), (cons* ...), (list ...)",
            )),
        },
        _ => Err(bad(d, "bad pattern")),
    }
}

/// Checks a pattern binds no variable twice.
fn check_distinct(pats: &[&Pat]) -> Result<()> {
    let mut vars = Vec::new();
    for p in pats {
        p.vars(&mut vars);
    }
    let mut seen = rustc_hash::FxHashSet::default();
    for (n, s) in &vars {
        if !seen.insert(n) {
            return Err(Error::syntax(*s, format!("variable `{}` is bound twice", n)));
        }
    }
    Ok(())
}

/// `(lambda (p ...) body)`.
pub fn expand_lambda(d: &Datum, items: &[Datum], name: Option<Rc<str>>) -> Result<Rc<CoreLambda>> {
    if items.len() != 3 {
        return Err(bad(
            d,
            if items.len() < 3 {
                "`lambda` needs a parameter list and a body"
            } else {
                "a VLAD `lambda` has exactly one body expression"
            },
        ));
    }
    let param = params_pattern(&items[1])?;
    check_distinct(&[&param])?;
    let body = expand(&items[2])?;
    Ok(Rc::new(CoreLambda { param, body, span: d.span, name }))
}

/// Names the `levels` lambdas nested as the bodies of `l` (the inner lambdas
/// of a curried definition) after `l`.
pub fn name_inner_lambdas(l: Rc<CoreLambda>, levels: usize) -> Rc<CoreLambda> {
    let inner = match &l.body {
        Core::Lambda(inner) if levels > 0 => inner.clone(),
        _ => return l,
    };
    // (moved apart, not copied: each was just made, and is held only here
    // once the outer one's body lets go of it)
    let mut outer = Rc::try_unwrap(l).unwrap_or_else(|l| (*l).clone());
    outer.body = Core::Const(ConstVal(DatumKindValue::Nil), outer.span);
    let mut inner = Rc::try_unwrap(inner).unwrap_or_else(|l| (*l).clone());
    if inner.name.is_none() {
        inner.name = outer.name.clone();
    }
    outer.body = Core::Lambda(name_inner_lambdas(Rc::new(inner), levels - 1));
    Rc::new(outer)
}

fn bindings(d: &Datum) -> Result<Vec<(&Datum, &Datum)>> {
    let list = d.as_list().ok_or_else(|| bad(d, "expected a list of bindings `((p e) ...)`"))?;
    list.iter()
        .map(|b| match b.as_list() {
            Some([p, e]) => Ok((p, e)),
            _ => Err(bad(b, "a binding is `(pattern expression)`")),
        })
        .collect()
}

fn expand_let(d: &Datum, items: &[Datum]) -> Result<Core> {
    if items.len() == 4 {
        if let Some(name) = items[1].as_symbol() {
            // Named let: ((letrec ((name (lambda (p ...) body))) name) e ...)
            let bs = bindings(&items[2])?;
            let pats = bs.iter().map(|(p, _)| pattern(p)).collect::<Result<Vec<_>>>()?;
            check_distinct(&pats.iter().collect::<Vec<_>>())?;
            let inits = bs.iter().map(|(_, e)| expand(e)).collect::<Result<Vec<_>>>()?;
            let lam = Rc::new(CoreLambda {
                param: tuple_pattern(pats, items[2].span),
                body: expand(&items[3])?,
                span: d.span,
                name: Some(name.into()),
            });
            let nm: Rc<str> = name.into();
            let letrec = Core::Letrec(
                vec![(nm.clone(), items[1].span, lam)],
                Box::new(Core::Var(nm, items[1].span)),
                d.span,
            );
            return Ok(Core::App(Box::new(letrec), inits, d.span));
        }
    }
    if items.len() != 3 {
        return Err(bad(d, "`let` needs bindings and exactly one body expression"));
    }
    let bs = bindings(&items[1])?;
    let pats = bs.iter().map(|(p, _)| pattern(p)).collect::<Result<Vec<_>>>()?;
    check_distinct(&pats.iter().collect::<Vec<_>>())?;
    let inits = bs.iter().map(|(_, e)| expand(e)).collect::<Result<Vec<_>>>()?;
    let body = expand(&items[2])?;
    if pats.len() == 1 {
        let p = pats.into_iter().next().unwrap();
        let e = inits.into_iter().next().unwrap();
        return Ok(Core::Let(p, Box::new(e), Box::new(body), d.span));
    }
    // Parallel binding: evaluate every init into a hidden temporary first.
    let temps: Vec<Rc<str>> = (0..pats.len()).map(|i| format!(" let{}", i).into()).collect();
    let mut acc = body;
    for (p, t) in pats.into_iter().zip(&temps).rev() {
        let s = p.span();
        acc = Core::Let(p, Box::new(Core::Var(t.clone(), s)), Box::new(acc), d.span);
    }
    for (e, t) in inits.into_iter().zip(&temps).rev() {
        let s = e.span();
        acc = Core::Let(Pat::Var(t.clone(), s), Box::new(e), Box::new(acc), d.span);
    }
    Ok(acc)
}

fn expand_let_star(d: &Datum, items: &[Datum]) -> Result<Core> {
    if items.len() != 3 {
        return Err(bad(d, "`let*` needs bindings and exactly one body expression"));
    }
    let bs = bindings(&items[1])?;
    let mut acc = expand(&items[2])?;
    for (p, e) in bs.into_iter().rev() {
        let pat = pattern(p)?;
        check_distinct(&[&pat])?;
        acc = Core::Let(pat, Box::new(expand(e)?), Box::new(acc), d.span);
    }
    Ok(acc)
}

fn expand_letrec(d: &Datum, items: &[Datum]) -> Result<Core> {
    if items.len() != 3 {
        return Err(bad(d, "`letrec` needs bindings and exactly one body expression"));
    }
    let bs = bindings(&items[1])?;
    let mut defs = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (p, e) in bs {
        let name = p.as_symbol().ok_or_else(|| bad(p, "`letrec` binds variables only"))?;
        let lam = match e.as_list() {
            Some(l) if l.first().and_then(|h| h.as_symbol()) == Some("lambda") => {
                expand_lambda(e, l, Some(name.into()))?
            }
            _ => return Err(bad(e, "`letrec` binds lambda expressions only")),
        };
        if !seen.insert(name) {
            return Err(bad(p, format!("`{}` is bound twice in this `letrec`", name)));
        }
        defs.push((name.into(), p.span, lam));
    }
    Ok(Core::Letrec(defs, Box::new(expand(&items[2])?), d.span))
}

fn expand_cond(d: &Datum, clauses: &[Datum]) -> Result<Core> {
    crate::stack::grow(|| expand_cond_here(d, clauses))
}

fn expand_cond_here(d: &Datum, clauses: &[Datum]) -> Result<Core> {
    let (first, rest) = match clauses.split_first() {
        Some(x) => x,
        None => return Err(bad(d, "`cond` needs a final `else` clause")),
    };
    let parts = first
        .as_list()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| bad(first, "a `cond` clause is `(test expression)`"))?;
    if parts[0].as_symbol() == Some("else") {
        if !rest.is_empty() {
            return Err(bad(first, "`else` must be the last `cond` clause"));
        }
        if parts.len() != 2 {
            return Err(bad(first, "`else` takes exactly one expression"));
        }
        return expand(&parts[1]);
    }
    if rest.is_empty() {
        return Err(Error::syntax(d.span, "`cond` needs a final `else` clause"));
    }
    let test = expand(&parts[0])?;
    let restc = expand_cond(d, rest)?;
    match parts.len() {
        // (cond (test) ...) yields the test's value when true.
        1 => Ok(or2(test, restc, first.span)),
        2 if parts[1].as_symbol() == Some("=>") => {
            Err(bad(first, "a `cond` clause `(test => receiver)` needs a receiver after `=>`"))
        }
        2 => Ok(Core::If(Box::new(test), Box::new(expand(&parts[1])?), Box::new(restc), first.span)),
        // (cond (test => receiver) ...) applies the receiver to the test's
        // value when true, as Scheme's does.
        3 if parts[1].as_symbol() == Some("=>") => {
            let receiver = expand(&parts[2])?;
            Ok(cond_arrow(test, receiver, restc, first.span))
        }
        _ => Err(bad(first, "a `cond` clause has exactly one expression after its test (or `=> receiver`)")),
    }
}

/// `(cond (test => receiver) rest ...)`: the receiver applied to the test's
/// value where true.
fn cond_arrow(test: Core, receiver: Core, rest: Core, span: Span) -> Core {
    test_bound(" cond", test, |t| Core::App(Box::new(receiver), vec![t], span), rest, span)
}

/// `(or a b)`: `a`'s value where true, else `b`.
fn or2(a: Core, b: Core, span: Span) -> Core {
    test_bound(" or", a, |t| t, b, span)
}

/// `test`'s value bound to `name` (one no program can write: it has a space),
/// then `then` of it where true, `rest` where not.
fn test_bound(name: &str, test: Core, then: impl FnOnce(Core) -> Core, rest: Core, span: Span) -> Core {
    let t: Rc<str> = name.into();
    Core::Let(
        Pat::Var(t.clone(), span),
        Box::new(test),
        Box::new(Core::If(
            Box::new(Core::Var(t.clone(), span)),
            Box::new(then(Core::Var(t, span))),
            Box::new(rest),
            span,
        )),
        span,
    )
}

fn expand_and(d: &Datum, items: &[Datum]) -> Result<Core> {
    crate::stack::grow(|| expand_and_here(d, items))
}

fn expand_and_here(d: &Datum, items: &[Datum]) -> Result<Core> {
    match items.split_first() {
        None => Ok(Core::Const(ConstVal(DatumKindValue::Bool(true)), d.span)),
        Some((x, [])) => expand(x),
        Some((x, rest)) => Ok(Core::If(
            Box::new(expand(x)?),
            Box::new(expand_and(d, rest)?),
            Box::new(Core::Const(ConstVal(DatumKindValue::Bool(false)), d.span)),
            d.span,
        )),
    }
}

fn expand_or(d: &Datum, items: &[Datum]) -> Result<Core> {
    crate::stack::grow(|| expand_or_here(d, items))
}

fn expand_or_here(d: &Datum, items: &[Datum]) -> Result<Core> {
    match items.split_first() {
        None => Ok(Core::Const(ConstVal(DatumKindValue::Bool(false)), d.span)),
        Some((x, [])) => expand(x),
        Some((x, rest)) => Ok(or2(expand(x)?, expand_or(d, rest)?, d.span)),
    }
}

#[cfg(test)]
mod tests;
