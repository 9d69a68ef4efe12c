//! Compiles a parsed reversible procedure into the form the executor runs:
//! variables become frame slots, callees are resolved to globals or variables,
//! and right-hand sides become small expression trees. Simple arithmetic on
//! variables, vector elements and constants is evaluated natively (calling the
//! primitives' own implementations, so the semantics are VLAD's); anything else
//! (`let`, `lambda`, calls of user functions...) is compiled with the normal
//! pipeline into a VLAD closure over the variables it mentions.

use super::syntax::{Options, Place, ProcDef, Stmt, UpOp};
use crate::anf::{Atom, GlobalScope, Normalizer};
use crate::check::datum_text;
use crate::datum::{Datum, DatumKind};
use crate::error::{Error, Result};
use crate::expand::{self, ConstVal, CoreLambda, DatumKindValue, Pat};
use crate::prims::{self, PrimId};
use crate::resolve::Op2;
use crate::source::Span;
use crate::value::{InstRc, Value};
use std::rc::Rc;

/// How a natively evaluated primitive is differentiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deriv {
    Add,
    Sub,
    Mul,
    Div,
    /// `/` in reversible code: floored on two integers (zero derivative), else `/`.
    FloorDiv,
    /// `%`: floored modulo (zero derivative on integers).
    Mod,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Atan,
    Id,
    /// Piecewise constant (comparisons, predicates, bitwise operations, `*/`).
    Zero,
}

pub(super) fn deriv_of(name: &str) -> Option<Deriv> {
    Some(match name {
        "+" => Deriv::Add,
        "-" => Deriv::Sub,
        "*" => Deriv::Mul,
        "/" => Deriv::Div,
        "%rev-div" => Deriv::FloorDiv,
        "%rev-mod" => Deriv::Mod,
        "sqrt" => Deriv::Sqrt,
        "exp" => Deriv::Exp,
        "log" => Deriv::Log,
        "sin" => Deriv::Sin,
        "cos" => Deriv::Cos,
        "atan" => Deriv::Atan,
        "real" => Deriv::Id,
        "=" | "<" | ">" | "<=" | ">=" | "zero?" | "positive?" | "negative?" | "null?" | "boolean?"
        | "real?" | "pair?" | "procedure?" | "%rev-fracmul" | "%rev-and" | "%rev-or" | "%rev-xor"
        | "%rev-ints?" => Deriv::Zero,
        _ => return None,
    })
}

/// A right-hand side, index or condition.
pub enum RExpr {
    Const(Value),
    /// A variable (a vector variable is read as a list).
    Var(u32),
    Global(u32),
    /// An element of a vector variable: `(ref (ref v i) j)` is `Elem(v, [i, j])`.
    Elem(u32, Box<[RExpr]>, Span),
    /// A primitive applied, with its inline operation where it has one (`+ - * /`
    /// and the comparisons, which the evaluator computes inline on two numbers).
    Prim(PrimId, Deriv, Box<[RExpr]>, Span, Option<Op2>),
    If(Box<[RExpr; 3]>),
    And(Box<[RExpr]>),
    Or(Box<[RExpr]>),
    /// A procedure applied to arguments (0: `'()`, 1: as is, n: a tuple), as VLAD does.
    Apply(Box<RExpr>, Box<[RExpr]>, Span),
}

/// Right-hand sides nest as deeply as the source does: dropped with an
/// explicit work list rather than by recursion.
impl Drop for RExpr {
    fn drop(&mut self) {
        fn take_parts(e: &mut RExpr, out: &mut Vec<RExpr>) {
            let hole = || RExpr::Var(0);
            match e {
                RExpr::Const(_) | RExpr::Var(_) | RExpr::Global(_) => {}
                RExpr::Elem(_, xs, _) | RExpr::Prim(_, _, xs, ..) | RExpr::And(xs) | RExpr::Or(xs) => {
                    out.extend(std::mem::take(xs).into_vec())
                }
                RExpr::If(xs) => out.extend(xs.iter_mut().map(|x| std::mem::replace(x, hole()))),
                RExpr::Apply(f, xs, _) => {
                    out.push(std::mem::replace(&mut **f, hole()));
                    out.extend(std::mem::take(xs).into_vec());
                }
            }
        }
        let mut pending = Vec::new();
        take_parts(self, &mut pending);
        while let Some(mut e) = pending.pop() {
            take_parts(&mut e, &mut pending);
        }
    }
}

/// Compiled statements nest as deeply as the source does: dropped with an
/// explicit work list rather than by recursion.
impl Drop for CStmt {
    fn drop(&mut self) {
        fn take_parts(s: &mut CStmt, out: &mut Vec<CStmt>) {
            let mut take = |b: &mut Box<CStmt>| out.push(std::mem::replace(&mut **b, CStmt::Skip));
            match s {
                CStmt::If { then, els, .. } => {
                    take(then);
                    take(els);
                }
                CStmt::From { body, step, .. } => {
                    take(body);
                    take(step);
                }
                CStmt::Local { body, .. } => take(body),
                CStmt::WithUncompute { compute, body } => {
                    take(compute);
                    take(body);
                }
                CStmt::Seq(xs) => out.extend(std::mem::take(xs).into_vec()),
                _ => {}
            }
        }
        let mut pending = Vec::new();
        take_parts(self, &mut pending);
        while let Some(mut s) = pending.pop() {
            take_parts(&mut s, &mut pending);
        }
    }
}

/// An expression with what error messages need.
pub struct CExpr {
    pub e: RExpr,
    pub text: Rc<str>,
    /// The procedure's variables it mentions.
    pub vars: Box<[(Rc<str>, u32)]>,
    pub span: Span,
}

/// A compiled place: a slot and the index expressions into it.
pub struct CPlace {
    pub slot: u32,
    pub idx: Box<[CExpr]>,
    pub text: Rc<str>,
    pub span: Span,
}

pub enum Callee {
    Global(u32, Rc<str>),
    Var(u32, Rc<str>),
}

pub enum CStmt {
    Update {
        op: UpOp,
        place: CPlace,
        rhs: CExpr,
        span: Span,
    },
    Swap {
        a: CPlace,
        b: CPlace,
        span: Span,
    },
    If {
        test: CExpr,
        then: Box<CStmt>,
        els: Box<CStmt>,
        assert: CExpr,
        span: Span,
    },
    From {
        entry: CExpr,
        body: Box<CStmt>,
        step: Box<CStmt>,
        until: CExpr,
        span: Span,
    },
    Local {
        slot: u32,
        name: Rc<str>,
        init: CExpr,
        body: Box<CStmt>,
        fin: CExpr,
        span: Span,
        delocal_span: Span,
    },
    Push {
        pop: bool,
        x: u32,
        s: u32,
        xname: Rc<str>,
        sname: Rc<str>,
        span: Span,
    },
    Call {
        uncall: bool,
        callee: Callee,
        args: Box<[u32]>,
        span: Span,
    },
    Seq(Box<[CStmt]>),
    Skip,
    WithUncompute {
        compute: Box<CStmt>,
        body: Box<CStmt>,
    },
}

/// A compiled reversible procedure.
pub struct ProcCode {
    pub name: Rc<str>,
    pub def: ProcDef,
    pub nparams: usize,
    pub nslots: usize,
    pub slot_names: Vec<Rc<str>>,
    pub body: CStmt,
    pub options: Options,
    /// What its names mean, for [`ProcCode::functional`].
    pub frozen: super::functional::Frozen,
    /// The procedure as VLAD closures, for nested differentiation, made on first
    /// use (an error text if it could not be translated).
    pub functional: std::cell::OnceCell<std::result::Result<super::functional::Functional, String>>,
}

/// The names right-hand sides see on top of the program's: `/` floored on integers,
/// `%`, `*/`, the bitwise operations, and `ref` (on a list, inside closures).
pub struct RhsScope<'a> {
    pub inner: &'a dyn GlobalScope,
}

fn prim_atom(name: &str) -> Option<Atom> {
    prims::lookup(name).map(|p| Atom::Const(Value::Prim(p)))
}

impl GlobalScope for RhsScope<'_> {
    fn accessor(&self, g: u32) -> Option<&'static [bool]> {
        self.inner.accessor(g)
    }
    fn each_name(&self, f: &mut dyn FnMut(&str)) {
        self.inner.each_name(f);
        ["%", "*/", "bitwise-and", "bitwise-or", "bitwise-xor", "ref"].into_iter().for_each(f);
    }
    fn lookup(&self, name: &str) -> Option<Atom> {
        let own = self.inner.lookup(name);
        match name {
            "/" => match own {
                Some(Atom::Const(Value::Prim(p))) if prims::prim(p).name == "/" => prim_atom("%rev-div"),
                other => other,
            },
            "%" => own.or_else(|| prim_atom("%rev-mod")),
            "*/" => own.or_else(|| prim_atom("%rev-fracmul")),
            "bitwise-and" => own.or_else(|| prim_atom("%rev-and")),
            "bitwise-or" => own.or_else(|| prim_atom("%rev-or")),
            "bitwise-xor" => own.or_else(|| prim_atom("%rev-xor")),
            "ref" => own.or_else(|| self.inner.lookup("list-ref")),
            _ => own,
        }
    }
}

struct Compiler<'a> {
    scope: RhsScope<'a>,
    /// The variables in scope, outermost first, with their slots.
    vars: Vec<(Rc<str>, u32)>,
    /// Where each name is in `vars` (innermost last).
    index: rustc_hash::FxHashMap<Rc<str>, Vec<usize>>,
    slot_names: Vec<Rc<str>>,
    proc: Rc<str>,
}

/// Compiles a definition against the names visible to it.
pub fn compile(def: ProcDef, scope: &dyn GlobalScope) -> Result<ProcCode> {
    let mut index: rustc_hash::FxHashMap<Rc<str>, Vec<usize>> = Default::default();
    for (i, (n, _)) in def.params.iter().enumerate() {
        index.entry(n.clone()).or_default().push(i);
    }
    let mut c = Compiler {
        scope: RhsScope { inner: scope },
        vars: def.params.iter().enumerate().map(|(i, (n, _))| (n.clone(), i as u32)).collect(),
        index,
        slot_names: def.params.iter().map(|(n, _)| n.clone()).collect(),
        proc: def.name.clone(),
    };
    let body = c.seq(&def.body)?;
    Ok(ProcCode {
        frozen: super::functional::freeze(&def, scope),
        functional: Default::default(),
        name: def.name.clone(),
        nparams: def.params.len(),
        nslots: c.slot_names.len(),
        slot_names: c.slot_names,
        body,
        options: def.options.clone(),
        def,
    })
}

impl Compiler<'_> {
    fn var(&self, name: &str) -> Option<u32> {
        let at = *self.index.get(name)?.last()?;
        Some(self.vars[at].1)
    }

    /// The variables in scope that `d` mentions (outside quoted data), each
    /// once (its innermost binding), outermost first.
    fn mentioned(&self, d: &Datum) -> Vec<(Rc<str>, u32)> {
        let mut at: Vec<usize> = Vec::new();
        let mut seen = rustc_hash::FxHashSet::default();
        let mut work = vec![d];
        while let Some(d) = work.pop() {
            match &d.kind {
                DatumKind::Symbol(n) => {
                    if let Some(&i) = self.index.get(&**n).and_then(|v| v.last()) {
                        if seen.insert(i) {
                            at.push(i);
                        }
                    }
                }
                DatumKind::List(items, tail)
                    if items.first().and_then(|h| h.as_symbol()) != Some("quote") =>
                {
                    work.extend(items.iter());
                    work.extend(tail.as_deref());
                }
                _ => {}
            }
        }
        at.sort_unstable();
        at.into_iter().map(|i| self.vars[i].clone()).collect()
    }

    fn undeclared(&self, name: &str, span: Span) -> Error {
        Error::syntax(
            span,
            format!(
                "undeclared variable (in {}): `{}` is not a variable of `{}`, a definition or a primitive{}",
                self.proc,
                name,
                self.proc,
                self.hint(name)
            ),
        )
    }

    /// " (did you mean `x`?)" for a misspelling of a name in scope, or "".
    #[cold]
    fn hint(&self, name: &str) -> String {
        let bound = crate::anf::names_in_scope(&self.index, &self.scope);
        crate::suggest::nearest_hint(name, bound.iter().map(|n| &**n))
    }

    fn seq(&mut self, v: &[Stmt]) -> Result<CStmt> {
        let mut out = Vec::with_capacity(v.len());
        for s in v {
            out.push(self.stmt(s)?);
        }
        Ok(if out.len() == 1 { out.pop().unwrap() } else { CStmt::Seq(out.into_boxed_slice()) })
    }

    fn stmt(&mut self, s: &Stmt) -> Result<CStmt> {
        crate::stack::grow(|| self.stmt_here(s))
    }

    fn stmt_here(&mut self, s: &Stmt) -> Result<CStmt> {
        Ok(match s {
            Stmt::Update { op, place, rhs, span } => {
                CStmt::Update { op: *op, place: self.place(place)?, rhs: self.cexpr(rhs)?, span: *span }
            }
            Stmt::Swap { a, b, span } => CStmt::Swap { a: self.place(a)?, b: self.place(b)?, span: *span },
            Stmt::If { test, then, els, assert, span } => CStmt::If {
                test: self.cexpr(test)?,
                then: Box::new(self.stmt(then)?),
                els: Box::new(self.stmt(els)?),
                assert: self.cexpr(assert)?,
                span: *span,
            },
            Stmt::From { entry, body, step, until, span } => CStmt::From {
                entry: self.cexpr(entry)?,
                body: Box::new(self.stmt(body)?),
                step: Box::new(self.stmt(step)?),
                until: self.cexpr(until)?,
                span: *span,
            },
            Stmt::Local { var, init, body, fin, delocal_span, span } => {
                let init = self.cexpr(init)?;
                let fin = self.cexpr(fin)?;
                let slot = self.slot_names.len() as u32;
                self.slot_names.push(var.0.clone());
                self.index.entry(var.0.clone()).or_default().push(self.vars.len());
                self.vars.push((var.0.clone(), slot));
                let body = self.seq(body);
                self.vars.pop();
                if let Some(v) = self.index.get_mut(&var.0) {
                    v.pop();
                }
                CStmt::Local {
                    slot,
                    name: var.0.clone(),
                    init,
                    body: Box::new(body?),
                    fin,
                    span: *span,
                    delocal_span: *delocal_span,
                }
            }
            Stmt::Push { pop, x, stack, span } => CStmt::Push {
                pop: *pop,
                x: self.var(&x.0).ok_or_else(|| self.undeclared(&x.0, x.1))?,
                s: self.var(&stack.0).ok_or_else(|| self.undeclared(&stack.0, stack.1))?,
                xname: x.0.clone(),
                sname: stack.0.clone(),
                span: *span,
            },
            Stmt::Call { uncall, callee, args, span } => {
                let c = match self.var(&callee.0) {
                    Some(s) => Callee::Var(s, callee.0.clone()),
                    None => match self.scope.inner.lookup(&callee.0) {
                        Some(Atom::Global(g)) => Callee::Global(g, callee.0.clone()),
                        _ => {
                            return Err(Error::syntax(
                                callee.1,
                                format!(
                                    "undeclared procedure (in {}): `{}` is not a reversible procedure defined with `define-reversible` or a variable{}",
                                    self.proc,
                                    callee.0,
                                    self.hint(&callee.0)
                                ),
                            ))
                        }
                    },
                };
                let args = args
                    .iter()
                    .map(|(n, sp)| self.var(n).ok_or_else(|| self.undeclared(n, *sp)))
                    .collect::<Result<Vec<_>>>()?;
                CStmt::Call { uncall: *uncall, callee: c, args: args.into_boxed_slice(), span: *span }
            }
            Stmt::Begin(v, _) => self.seq(v)?,
            Stmt::Skip(_) => CStmt::Skip,
            Stmt::WithUncompute { compute, body, .. } => CStmt::WithUncompute {
                compute: Box::new(self.seq(compute)?),
                body: Box::new(self.seq(body)?),
            },
        })
    }

    fn place(&mut self, p: &Place) -> Result<CPlace> {
        let root = p.root();
        let slot = self.var(root).ok_or_else(|| self.undeclared(root, p.span()))?;
        let idx = p.indices().into_iter().map(|i| self.cexpr(i)).collect::<Result<Vec<_>>>()?;
        Ok(CPlace { slot, idx: idx.into_boxed_slice(), text: p.text().into(), span: p.span() })
    }

    fn cexpr(&mut self, d: &Datum) -> Result<CExpr> {
        let e = self.expr(d)?;
        let vars = self.mentioned(d);
        Ok(CExpr { e, text: datum_text(d).into(), vars: vars.into_boxed_slice(), span: d.span })
    }

    fn expr(&mut self, d: &Datum) -> Result<RExpr> {
        crate::stack::grow(|| self.expr_here(d))
    }

    fn expr_here(&mut self, d: &Datum) -> Result<RExpr> {
        let sp = d.span;
        match &d.kind {
            DatumKind::Int(_)
            | DatumKind::Big(_)
            | DatumKind::Rat(_)
            | DatumKind::Real(_)
            | DatumKind::Bool(_) => Ok(RExpr::Const(expand::datum_const(d)?.0.to_value())),
            DatumKind::Symbol(s) => {
                if let Some(slot) = self.var(s) {
                    return Ok(RExpr::Var(slot));
                }
                if expand::KEYWORDS.contains(&&**s) {
                    return self.fallback(d);
                }
                match self.scope.lookup(s) {
                    Some(Atom::Global(g)) => Ok(RExpr::Global(g)),
                    Some(Atom::Const(v)) => Ok(RExpr::Const(v)),
                    _ => Err(self.undeclared(s, sp)),
                }
            }
            DatumKind::List(items, None) if !items.is_empty() => {
                let head = items[0].as_symbol();
                if let Some(h) = head {
                    if self.var(h).is_none() {
                        match h {
                            "quote" if items.len() == 2 => {
                                return Ok(RExpr::Const(expand::datum_const(&items[1])?.0.to_value()))
                            }
                            "ref" if items.len() == 3 => {
                                if let Some((slot, idx)) = self.elem_path(d)? {
                                    return Ok(RExpr::Elem(slot, idx.into_boxed_slice(), sp));
                                }
                                return self.fallback(d);
                            }
                            "if" if items.len() == 4 => {
                                return Ok(RExpr::If(Box::new([
                                    self.expr(&items[1])?,
                                    self.expr(&items[2])?,
                                    self.expr(&items[3])?,
                                ])))
                            }
                            "and" | "or" => {
                                let parts =
                                    items[1..].iter().map(|i| self.expr(i)).collect::<Result<Vec<_>>>()?;
                                let parts = parts.into_boxed_slice();
                                return Ok(if h == "and" { RExpr::And(parts) } else { RExpr::Or(parts) });
                            }
                            _ if expand::KEYWORDS.contains(&h) => return self.fallback(d),
                            "error" | "write" | "write-real" if expand::text_form(items) => {
                                return self.fallback(d)
                            }
                            _ => {}
                        }
                    }
                }
                let args = items[1..].iter().map(|i| self.expr(i)).collect::<Result<Vec<_>>>()?;
                let f = self.expr(&items[0])?;
                if let RExpr::Const(Value::Prim(p)) = &f {
                    let def = prims::prim(*p);
                    let fits = match def.arity {
                        0 => args.is_empty(),
                        n => n as usize == args.len(),
                    };
                    if let (Some(dv), true) = (deriv_of(def.name), fits) {
                        return Ok(RExpr::Prim(*p, dv, args.into_boxed_slice(), sp, Op2::of(def.name)));
                    }
                }
                Ok(RExpr::Apply(Box::new(f), args.into_boxed_slice(), sp))
            }
            _ => self.fallback(d),
        }
    }

    /// `(ref (ref v i) j)` rooted at a variable: its slot and index expressions.
    fn elem_path(&mut self, d: &Datum) -> Result<Option<(u32, Vec<RExpr>)>> {
        match d.as_list() {
            Some([h, inner, i]) if h.as_symbol() == Some("ref") => {
                let base = if let Some(n) = inner.as_symbol() {
                    self.var(n).map(|s| (s, Vec::new()))
                } else {
                    self.elem_path(inner)?
                };
                match base {
                    Some((s, mut idx)) => {
                        idx.push(self.expr(i)?);
                        Ok(Some((s, idx)))
                    }
                    None => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// Any other expression: a VLAD closure over the variables it mentions.
    fn fallback(&mut self, d: &Datum) -> Result<RExpr> {
        let used = self.mentioned(d);
        let sp = d.span;
        let mut pats: Vec<Pat> = used.iter().map(|(n, _)| Pat::Var(n.clone(), sp)).collect();
        let param = match pats.len() {
            0 => Pat::Const(ConstVal(DatumKindValue::Nil), sp),
            1 => pats.pop().unwrap(),
            _ => {
                let mut acc = pats.pop().unwrap();
                while let Some(p) = pats.pop() {
                    acc = Pat::Cons(Box::new(p), Box::new(acc), sp);
                }
                acc
            }
        };
        let body = expand::expand(d)?;
        let lam =
            CoreLambda { param, body, span: sp, name: Some(format!("expression in {}", self.proc).into()) };
        let mut n = Normalizer::new(&self.scope);
        let g = n.lambda(&lam)?;
        let f = Value::Closure(InstRc::empty(g), 0);
        let args: Vec<RExpr> = used.iter().map(|(_, s)| RExpr::Var(*s)).collect();
        Ok(RExpr::Apply(Box::new(RExpr::Const(f)), args.into_boxed_slice(), sp))
    }
}

impl ProcCode {
    /// The procedure as VLAD closures (translated and compiled on first use).
    pub fn functional(&self) -> &std::result::Result<super::functional::Functional, String> {
        self.functional.get_or_init(|| super::functional::translate(&self.def, &self.frozen))
    }
}
