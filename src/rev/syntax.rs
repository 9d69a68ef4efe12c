//! The reversible sub-language's syntax: statements parsed from data, the
//! static rules checked at definition time, and printing back to source.
//!
//! ```text
//! (define-reversible (name var ...) [(declare option ...)] stmt ...)
//! stmt ::= (+= place e) | (-= place e) | (^= place e) | (*= place e) | (/= place e)
//!        | (swap place place)
//!        | (if-rev test stmt stmt assertion)
//!        | (from-loop entry do-stmt loop-stmt until)
//!        | (local (x init) stmt ... (delocal x final))
//!        | (push x stack) | (pop x stack)
//!        | (call p x ...) | (uncall p x ...)
//!        | (begin-rev stmt ...) | (skip)
//!        | (with-uncompute (stmt ...) stmt ...)
//! place ::= x | (ref place e)
//! option ::= mod32 | unchecked | (tolerance number)
//! ```
//! Right-hand sides `e`, indices and conditions are ordinary VLAD expressions.

use crate::check::datum_text;
use crate::datum::{Datum, DatumKind};
use crate::error::{Error, Result};
use crate::source::Span;
use std::rc::Rc;

/// An update operator.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UpOp {
    Add,
    Sub,
    Xor,
    Mul,
    Div,
}

impl UpOp {
    pub fn name(self) -> &'static str {
        match self {
            UpOp::Add => "+=",
            UpOp::Sub => "-=",
            UpOp::Xor => "^=",
            UpOp::Mul => "*=",
            UpOp::Div => "/=",
        }
    }
    pub fn inverse(self) -> UpOp {
        match self {
            UpOp::Add => UpOp::Sub,
            UpOp::Sub => UpOp::Add,
            UpOp::Xor => UpOp::Xor,
            UpOp::Mul => UpOp::Div,
            UpOp::Div => UpOp::Mul,
        }
    }
    fn from_name(s: &str) -> Option<UpOp> {
        Some(match s {
            "+=" => UpOp::Add,
            "-=" => UpOp::Sub,
            "^=" => UpOp::Xor,
            "*=" => UpOp::Mul,
            "/=" => UpOp::Div,
            _ => return None,
        })
    }
}

/// A variable name with its location.
pub type Name = (Rc<str>, Span);

/// An updatable location: a variable or an element of a vector variable.
#[derive(Clone, Debug)]
pub enum Place {
    Var(Rc<str>, Span),
    Ref(Box<Place>, Datum, Span),
}

impl Place {
    /// The variable the place lives in.
    pub fn root(&self) -> &Rc<str> {
        match self {
            Place::Var(n, _) => n,
            Place::Ref(p, _, _) => p.root(),
        }
    }
    pub fn span(&self) -> Span {
        match self {
            Place::Var(_, s) | Place::Ref(_, _, s) => *s,
        }
    }
    /// The index expressions, outermost vector first.
    pub fn indices(&self) -> Vec<&Datum> {
        match self {
            Place::Var(..) => vec![],
            Place::Ref(p, i, _) => {
                let mut v = p.indices();
                v.push(i);
                v
            }
        }
    }
    pub fn text(&self) -> String {
        match self {
            Place::Var(n, _) => n.to_string(),
            Place::Ref(p, i, _) => format!("(ref {} {})", p.text(), datum_text(i)),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Stmt {
    Update {
        op: UpOp,
        place: Place,
        rhs: Datum,
        span: Span,
    },
    Swap {
        a: Place,
        b: Place,
        span: Span,
    },
    If {
        test: Datum,
        then: Box<Stmt>,
        els: Box<Stmt>,
        assert: Datum,
        span: Span,
    },
    From {
        entry: Datum,
        body: Box<Stmt>,
        step: Box<Stmt>,
        until: Datum,
        span: Span,
    },
    Local {
        var: Name,
        init: Datum,
        body: Vec<Stmt>,
        fin: Datum,
        delocal_span: Span,
        span: Span,
    },
    /// `(push x stack)`, or `(pop x stack)` when `pop`.
    Push {
        pop: bool,
        x: Name,
        stack: Name,
        span: Span,
    },
    Call {
        uncall: bool,
        callee: Name,
        args: Vec<Name>,
        span: Span,
    },
    Begin(Vec<Stmt>, Span),
    Skip(Span),
    WithUncompute {
        compute: Vec<Stmt>,
        body: Vec<Stmt>,
        span: Span,
    },
}

/// Statements nest as deeply as the source does: dropped with an explicit
/// work list rather than by recursion.
impl Drop for Stmt {
    fn drop(&mut self) {
        fn take_parts(s: &mut Stmt, out: &mut Vec<Stmt>) {
            let hole = || Stmt::Skip(Span::default());
            match s {
                Stmt::If { then, els, .. } => {
                    out.push(std::mem::replace(&mut **then, hole()));
                    out.push(std::mem::replace(&mut **els, hole()));
                }
                Stmt::From { body, step, .. } => {
                    out.push(std::mem::replace(&mut **body, hole()));
                    out.push(std::mem::replace(&mut **step, hole()));
                }
                Stmt::Local { body, .. } | Stmt::Begin(body, _) => out.append(body),
                Stmt::WithUncompute { compute, body, .. } => {
                    out.append(compute);
                    out.append(body);
                }
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

impl Stmt {
    pub fn span(&self) -> Span {
        match self {
            Stmt::Update { span, .. }
            | Stmt::Swap { span, .. }
            | Stmt::If { span, .. }
            | Stmt::From { span, .. }
            | Stmt::Local { span, .. }
            | Stmt::Push { span, .. }
            | Stmt::Call { span, .. }
            | Stmt::WithUncompute { span, .. } => *span,
            Stmt::Begin(_, s) | Stmt::Skip(s) => *s,
        }
    }
}

/// Per-procedure options, from `(declare ...)`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Janus's 32-bit modular arithmetic: values in [0, 2^32), updates wrap.
    pub mod32: bool,
    /// Run-time reversibility checks (assertions, `delocal`, `pop`); `unchecked` turns them off.
    pub checked: bool,
    /// Relative tolerance for comparing doubles in the checks.
    pub tolerance: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options { mod32: false, checked: true, tolerance: 1e-8 }
    }
}

/// A parsed `define-reversible`.
#[derive(Clone, Debug)]
pub struct ProcDef {
    pub name: Rc<str>,
    pub name_span: Span,
    pub params: Vec<Name>,
    pub options: Options,
    /// The `(declare ...)` form as written, for printing.
    pub declare: Option<Datum>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

fn bad(span: Span, msg: impl Into<String>) -> Error {
    Error::syntax(span, msg)
}

/// Names that are statement keywords (and so cannot be variables).
pub const STMT_KEYWORDS: &[&str] = &[
    "+=",
    "-=",
    "^=",
    "*=",
    "/=",
    "swap",
    "if-rev",
    "from-loop",
    "local",
    "delocal",
    "push",
    "pop",
    "call",
    "uncall",
    "begin-rev",
    "skip",
    "with-uncompute",
    "declare",
];

fn name_of(d: &Datum, what: &str) -> Result<Name> {
    match d.as_symbol() {
        Some(s) if !STMT_KEYWORDS.contains(&s) && !crate::expand::KEYWORDS.contains(&s) => {
            Ok((s.into(), d.span))
        }
        Some(s) => Err(bad(d.span, format!("`{}` is a keyword and cannot be used as {}", s, what))),
        None => Err(bad(d.span, format!("expected {}, got {}", what, datum_text(d)))),
    }
}

/// Parses `(define-reversible (name var ...) [(declare ...)] stmt ...)`.
pub fn parse_define(d: &Datum) -> Result<ProcDef> {
    let list = d.as_list().unwrap_or(&[]);
    let header = list.get(1).and_then(|h| h.as_list()).filter(|h| !h.is_empty()).ok_or_else(|| {
        bad(d.span, "`define-reversible` needs a header `(name variable ...)` and statements")
    })?;
    let (name, name_span) = name_of(&header[0], "a procedure name")?;
    let mut params: Vec<Name> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for p in &header[1..] {
        let n = name_of(p, "a variable name")?;
        if !seen.insert(n.0.clone()) {
            return Err(bad(n.1, format!("variable `{}` is declared twice in `{}`", n.0, name)));
        }
        params.push(n);
    }
    let mut rest = &list[2..];
    let mut options = Options::default();
    let mut declare = None;
    if let Some(first) = rest.first() {
        if let Some(items) = first.as_list() {
            if items.first().and_then(|h| h.as_symbol()) == Some("declare") {
                for o in &items[1..] {
                    match (o.as_symbol(), o.as_list()) {
                        (Some("mod32"), _) => options.mod32 = true,
                        (Some("unchecked"), _) => options.checked = false,
                        (_, Some([h, v])) if h.as_symbol() == Some("tolerance") => {
                            options.tolerance = match v.kind {
                                DatumKind::Real(r) if r >= 0.0 => r,
                                DatumKind::Int(i) if i >= 0 => i as f64,
                                _ => return Err(bad(v.span, "`tolerance` takes a non-negative number")),
                            }
                        }
                        _ => {
                            return Err(bad(
                                o.span,
                                format!(
                                    "unknown declaration {} (known: mod32, unchecked, (tolerance number))",
                                    datum_text(o)
                                ),
                            ))
                        }
                    }
                }
                declare = Some(first.clone());
                rest = &rest[1..];
            }
        }
    }
    let body = rest.iter().map(parse_stmt).collect::<Result<Vec<_>>>()?;
    let def = ProcDef { name, name_span, params, options, declare, body, span: d.span };
    check_proc(&def)?;
    Ok(def)
}

fn parse_place(d: &Datum) -> Result<Place> {
    if let Some(items) = d.as_list() {
        if items.first().and_then(|h| h.as_symbol()) == Some("ref") {
            if items.len() != 3 {
                return Err(bad(d.span, "`ref` takes a vector and an index: (ref v i)"));
            }
            return Ok(Place::Ref(Box::new(parse_place(&items[1])?), items[2].clone(), d.span));
        }
    }
    let (n, s) = name_of(d, "a variable or (ref v i)")?;
    Ok(Place::Var(n, s))
}

const STMT_LIST: &str =
    "+= -= ^= *= /= swap if-rev from-loop local push pop call uncall begin-rev skip with-uncompute error write write-real";

/// Parses one statement.
pub fn parse_stmt(d: &Datum) -> Result<Stmt> {
    crate::stack::grow(|| parse_stmt_here(d))
}

fn parse_stmt_here(d: &Datum) -> Result<Stmt> {
    let sp = d.span;
    let items = match d.as_list() {
        Some(items) if !items.is_empty() => items,
        _ => {
            return Err(bad(
                sp,
                format!("expected a reversible statement ({}), got {}", STMT_LIST, datum_text(d)),
            ))
        }
    };
    let head = items[0].as_symbol().unwrap_or("");
    let argc = items.len() - 1;
    let need = |n: usize, form: &str| -> Result<()> {
        if argc != n {
            Err(bad(sp, format!("bad `{}`: expected {}", head, form)))
        } else {
            Ok(())
        }
    };
    if let Some(op) = UpOp::from_name(head) {
        need(2, &format!("({} place expression)", head))?;
        return Ok(Stmt::Update { op, place: parse_place(&items[1])?, rhs: items[2].clone(), span: sp });
    }
    Ok(match head {
        "swap" => {
            need(2, "(swap place place)")?;
            Stmt::Swap { a: parse_place(&items[1])?, b: parse_place(&items[2])?, span: sp }
        }
        "if-rev" => {
            need(4, "(if-rev test then-statement else-statement assertion)")?;
            Stmt::If {
                test: items[1].clone(),
                then: Box::new(parse_stmt(&items[2])?),
                els: Box::new(parse_stmt(&items[3])?),
                assert: items[4].clone(),
                span: sp,
            }
        }
        "from-loop" => {
            need(4, "(from-loop entry-assertion do-statement loop-statement until-test)")?;
            Stmt::From {
                entry: items[1].clone(),
                body: Box::new(parse_stmt(&items[2])?),
                step: Box::new(parse_stmt(&items[3])?),
                until: items[4].clone(),
                span: sp,
            }
        }
        "local" => {
            let form = "(local (x init) statement ... (delocal x final))";
            if argc < 2 {
                return Err(bad(sp, format!("bad `local`: expected {}", form)));
            }
            let (var, init) = match items[1].as_list() {
                Some([x, init]) => (name_of(x, "a variable name")?, init.clone()),
                _ => return Err(bad(items[1].span, format!("bad `local` binding: expected {}", form))),
            };
            let last = &items[items.len() - 1];
            let fin = match last.as_list() {
                Some([h, x, fin]) if h.as_symbol() == Some("delocal") => {
                    let (n, s) = name_of(x, "a variable name")?;
                    if n != var.0 {
                        return Err(bad(
                            s,
                            format!("`delocal` of `{}` does not match `local` of `{}`", n, var.0),
                        ));
                    }
                    fin.clone()
                }
                _ => {
                    return Err(bad(
                        last.span,
                        format!("a `local` must end with (delocal {} final-value): {}", var.0, form),
                    ))
                }
            };
            let body = items[2..items.len() - 1].iter().map(parse_stmt).collect::<Result<Vec<_>>>()?;
            Stmt::Local { var, init, body, fin, delocal_span: last.span, span: sp }
        }
        "delocal" => return Err(bad(sp, "`delocal` must be the last statement of a `local`")),
        "push" | "pop" => {
            need(2, &format!("({} variable stack-variable)", head))?;
            Stmt::Push {
                pop: head == "pop",
                x: name_of(&items[1], "a variable name")?,
                stack: name_of(&items[2], "a stack variable")?,
                span: sp,
            }
        }
        "call" | "uncall" => {
            if argc < 1 {
                return Err(bad(sp, format!("bad `{}`: expected ({} procedure variable ...)", head, head)));
            }
            Stmt::Call {
                uncall: head == "uncall",
                callee: name_of(&items[1], "a procedure name")?,
                args: items[2..]
                    .iter()
                    .map(|a| name_of(a, "a variable (arguments are passed by reference)"))
                    .collect::<Result<_>>()?,
                span: sp,
            }
        }
        "begin-rev" => Stmt::Begin(items[1..].iter().map(parse_stmt).collect::<Result<_>>()?, sp),
        "skip" => {
            need(0, "(skip)")?;
            Stmt::Skip(sp)
        }
        // (the `error` form and a labelled `write` as statements: an `if-rev`
        // with nothing in its branches. `error` is its test and its assertion,
        // so it fails where it is run, forwards or backwards; a `write` prints
        // once each way: its test is `(if FORM #t #t)`, which prints and is
        // true, and its assertion `#t`)
        "error" | "write" | "write-real" if crate::expand::text_form(items) => {
            let atom = |kind| Datum { kind, span: sp };
            let (test, assert) = if head == "error" {
                (d.clone(), d.clone())
            } else {
                let if_true = vec![
                    atom(DatumKind::Symbol("if".into())),
                    d.clone(),
                    atom(DatumKind::Bool(true)),
                    atom(DatumKind::Bool(true)),
                ];
                (atom(DatumKind::List(if_true, None)), atom(DatumKind::Bool(true)))
            };
            Stmt::If { test, then: Box::new(Stmt::Skip(sp)), els: Box::new(Stmt::Skip(sp)), assert, span: sp }
        }
        "with-uncompute" => {
            let compute = match items.get(1).and_then(|c| c.as_list()) {
                Some(c) => c.iter().map(parse_stmt).collect::<Result<Vec<_>>>()?,
                None => return Err(bad(
                    sp,
                    "bad `with-uncompute`: expected (with-uncompute (compute-statement ...) statement ...)",
                )),
            };
            Stmt::WithUncompute {
                compute,
                body: items[2..].iter().map(parse_stmt).collect::<Result<_>>()?,
                span: sp,
            }
        }
        _ => {
            return Err(bad(
                items[0].span,
                format!(
                    "unknown reversible statement `{}` (expected one of: {})",
                    datum_text(&items[0]),
                    STMT_LIST
                ),
            ))
        }
    })
}

/// Does the expression mention the variable? (Syntactic; quoted data excluded.)
pub fn mentions(d: &Datum, name: &str) -> bool {
    crate::stack::grow(|| mentions_here(d, name))
}

fn mentions_here(d: &Datum, name: &str) -> bool {
    match &d.kind {
        DatumKind::Symbol(s) => &**s == name,
        DatumKind::List(items, tail) => {
            if items.first().and_then(|h| h.as_symbol()) == Some("quote") {
                return false;
            }
            items.iter().any(|i| mentions(i, name)) || tail.as_ref().is_some_and(|t| mentions(t, name))
        }
        _ => false,
    }
}

/// The static rules: the updated variable is not read by its own right-hand side or
/// index; no variable passed twice to a call; variables declared. (Undeclared names
/// in expressions are reported when they are compiled.)
/// The variables in scope while checking a procedure (a multiset: a `local`
/// may shadow a name).
#[derive(Default)]
struct Scope(rustc_hash::FxHashMap<Rc<str>, u32>);

impl Scope {
    fn contains(&self, n: &str) -> bool {
        self.0.get(n).is_some_and(|c| *c > 0)
    }
    fn push(&mut self, n: Rc<str>) {
        *self.0.entry(n).or_default() += 1;
    }
    fn pop(&mut self, n: &str) {
        if let Some(c) = self.0.get_mut(n) {
            *c -= 1;
        }
    }
}

fn check_proc(def: &ProcDef) -> Result<()> {
    let mut scope = Scope::default();
    for (n, _) in &def.params {
        scope.push(n.clone());
    }
    for s in &def.body {
        check_stmt(def, s, &mut scope)?;
    }
    Ok(())
}

fn rule_error(def: &ProcDef, span: Span, rule: &str, detail: String) -> Error {
    bad(span, format!("{} (in {}): {}", rule, def.name, detail))
}

fn check_declared(def: &ProcDef, scope: &Scope, n: &str, span: Span) -> Result<()> {
    if scope.contains(n) {
        Ok(())
    } else {
        Err(rule_error(
            def,
            span,
            "undeclared variable",
            format!(
                "`{}` is not a parameter of `{}` or a `local` in scope{}",
                n,
                def.name,
                crate::suggest::nearest_hint(n, scope.0.iter().filter(|(_, c)| **c > 0).map(|(k, _)| &**k))
            ),
        ))
    }
}

fn check_place(def: &ProcDef, scope: &Scope, p: &Place) -> Result<()> {
    check_declared(def, scope, p.root(), p.span())?;
    let root = p.root();
    for i in p.indices() {
        if mentions(i, root) {
            return Err(rule_error(
                def,
                i.span,
                "updated variable used in its own index",
                format!("the index {} of {} reads `{}` itself", datum_text(i), p.text(), root),
            ));
        }
    }
    Ok(())
}

fn check_stmt(def: &ProcDef, s: &Stmt, scope: &mut Scope) -> Result<()> {
    crate::stack::grow(|| check_stmt_here(def, s, scope))
}

fn check_stmt_here(def: &ProcDef, s: &Stmt, scope: &mut Scope) -> Result<()> {
    match s {
        Stmt::Update { op, place, rhs, span } => {
            check_place(def, scope, place)?;
            if mentions(rhs, place.root()) {
                return Err(rule_error(
                    def,
                    *span,
                    "updated variable used in its own right-hand side",
                    format!(
                        "({} {} {}) reads `{}`, which it updates (not reversible)",
                        op.name(),
                        place.text(),
                        datum_text(rhs),
                        place.root()
                    ),
                ));
            }
            if def.options.mod32 && matches!(op, UpOp::Mul | UpOp::Div) {
                return Err(rule_error(
                    def,
                    *span,
                    "no *= or /= in mod32 procedures",
                    format!("{} is not invertible modulo 2^32", op.name()),
                ));
            }
        }
        Stmt::Swap { a, b, span } => {
            check_place(def, scope, a)?;
            check_place(def, scope, b)?;
            if let (Place::Var(x, _), Place::Var(y, _)) = (a, b) {
                if x == y {
                    return Err(rule_error(
                        def,
                        *span,
                        "aliasing",
                        format!("`{}` is swapped with itself", x),
                    ));
                }
            }
            for (p, q) in [(a, b), (b, a)] {
                for i in p.indices() {
                    if mentions(i, q.root()) {
                        return Err(rule_error(
                            def,
                            i.span,
                            "updated variable used in its own index",
                            format!(
                                "the index {} of {} reads `{}`, which the swap updates",
                                datum_text(i),
                                p.text(),
                                q.root()
                            ),
                        ));
                    }
                }
            }
        }
        Stmt::If { then, els, .. } => {
            check_stmt(def, then, scope)?;
            check_stmt(def, els, scope)?;
        }
        Stmt::From { body, step, .. } => {
            check_stmt(def, body, scope)?;
            check_stmt(def, step, scope)?;
        }
        Stmt::Local { var, init, body, fin, .. } => {
            if scope.contains(&var.0) {
                return Err(rule_error(
                    def,
                    var.1,
                    "local shadows a variable",
                    format!("`{}` is already a variable here; pick another name", var.0),
                ));
            }
            for (e, what) in [(init, "initial"), (fin, "final")] {
                if mentions(e, &var.0) {
                    return Err(rule_error(
                        def,
                        e.span,
                        "updated variable used in its own right-hand side",
                        format!(
                            "the {} value {} of local `{}` reads `{}` itself",
                            what,
                            datum_text(e),
                            var.0,
                            var.0
                        ),
                    ));
                }
            }
            scope.push(var.0.clone());
            for b in body {
                check_stmt(def, b, scope)?;
            }
            scope.pop(&var.0);
        }
        Stmt::Push { x, stack, span, pop } => {
            check_declared(def, scope, &x.0, x.1)?;
            check_declared(def, scope, &stack.0, stack.1)?;
            if x.0 == stack.0 {
                return Err(rule_error(
                    def,
                    *span,
                    "aliasing",
                    format!(
                        "`{}` is both the value and the stack of a {}",
                        x.0,
                        if *pop { "pop" } else { "push" }
                    ),
                ));
            }
        }
        Stmt::Call { callee, args, span, .. } => {
            for (i, a) in args.iter().enumerate() {
                check_declared(def, scope, &a.0, a.1)?;
                if args[..i].iter().any(|b| b.0 == a.0) {
                    return Err(rule_error(
                        def,
                        a.1,
                        "aliasing",
                        format!("`{}` is passed twice in one call (arguments are passed by reference)", a.0),
                    ));
                }
                if a.0 == callee.0 {
                    return Err(rule_error(
                        def,
                        a.1,
                        "aliasing",
                        format!("`{}` is both the procedure called and one of its arguments", a.0),
                    ));
                }
            }
            let _ = span;
        }
        Stmt::Begin(v, _) => {
            for b in v {
                check_stmt(def, b, scope)?;
            }
        }
        Stmt::Skip(_) => {}
        Stmt::WithUncompute { compute, body, .. } => {
            for b in compute.iter().chain(body) {
                check_stmt(def, b, scope)?;
            }
        }
    }
    Ok(())
}

/// Indentation stops growing at this many columns (as printed VLAD code's
/// does), so printing deeply nested statements takes space linear in their size.
const MAX_INDENT: usize = 64;

fn indent(out: &mut String, n: usize) {
    out.push('\n');
    for _ in 0..n.min(MAX_INDENT) {
        out.push(' ');
    }
}

/// The `error` or labelled `write` form an `if-rev` stands for, as `parse_stmt`
/// writes those statements (and as their inverses are): nothing in the branches,
/// and the form as test and assertion (`error`), or `(if FORM #t #t)` as one and
/// `#t` as the other (`write`, `write-real`).
fn text_statement<'d>(test: &'d Datum, then: &Stmt, els: &Stmt, assert: &'d Datum) -> Option<&'d Datum> {
    if !matches!((then, els), (Stmt::Skip(_), Stmt::Skip(_))) {
        return None;
    }
    let text_form = |d: &Datum, heads: &[&str]| {
        d.as_list().is_some_and(|xs| {
            xs.first().and_then(Datum::as_symbol).is_some_and(|h| heads.contains(&h))
                && crate::expand::text_form(xs)
        })
    };
    if text_form(test, &["error"]) && datum_text(test) == datum_text(assert) {
        return Some(test);
    }
    let printed = |d: &'d Datum| match d.as_list() {
        Some([h, form, t, e])
            if h.as_symbol() == Some("if")
                && matches!((&t.kind, &e.kind), (DatumKind::Bool(true), DatumKind::Bool(true)))
                && text_form(form, &["write", "write-real"]) =>
        {
            Some(form)
        }
        _ => None,
    };
    let is_true = |d: &Datum| matches!(d.kind, DatumKind::Bool(true));
    match (printed(test), printed(assert)) {
        (Some(form), None) if is_true(assert) => Some(form),
        (None, Some(form)) if is_true(test) => Some(form),
        _ => None,
    }
}

/// Prints a statement as source, indented by `ind` after line breaks.
pub fn write_stmt(out: &mut String, s: &Stmt, ind: usize) {
    crate::stack::grow(|| write_stmt_here(out, s, ind))
}

fn write_stmt_here(out: &mut String, s: &Stmt, ind: usize) {
    match s {
        Stmt::Update { op, place, rhs, .. } => {
            out.push_str(&format!("({} {} {})", op.name(), place.text(), datum_text(rhs)))
        }
        Stmt::Swap { a, b, .. } => out.push_str(&format!("(swap {} {})", a.text(), b.text())),
        Stmt::If { test, then, els, assert, .. } => {
            if let Some(form) = text_statement(test, then, els, assert) {
                return out.push_str(&datum_text(form));
            }
            out.push_str(&format!("(if-rev {}", datum_text(test)));
            indent(out, ind + 8);
            write_stmt(out, then, ind + 8);
            indent(out, ind + 8);
            write_stmt(out, els, ind + 8);
            indent(out, ind + 8);
            out.push_str(&datum_text(assert));
            out.push(')');
        }
        Stmt::From { entry, body, step, until, .. } => {
            out.push_str(&format!("(from-loop {}", datum_text(entry)));
            for b in [body, step] {
                indent(out, ind + 11);
                write_stmt(out, b, ind + 11);
            }
            indent(out, ind + 11);
            out.push_str(&datum_text(until));
            out.push(')');
        }
        Stmt::Local { var, init, body, fin, .. } => {
            out.push_str(&format!("(local ({} {})", var.0, datum_text(init)));
            for b in body {
                indent(out, ind + 2);
                write_stmt(out, b, ind + 2);
            }
            indent(out, ind + 2);
            out.push_str(&format!("(delocal {} {}))", var.0, datum_text(fin)));
        }
        Stmt::Push { pop, x, stack, .. } => {
            out.push_str(&format!("({} {} {})", if *pop { "pop" } else { "push" }, x.0, stack.0))
        }
        Stmt::Call { uncall, callee, args, .. } => {
            out.push_str(if *uncall { "(uncall " } else { "(call " });
            out.push_str(&callee.0);
            for a in args {
                out.push(' ');
                out.push_str(&a.0);
            }
            out.push(')');
        }
        Stmt::Begin(v, _) => {
            out.push_str("(begin-rev");
            for b in v {
                indent(out, ind + 2);
                write_stmt(out, b, ind + 2);
            }
            out.push(')');
        }
        Stmt::Skip(_) => out.push_str("(skip)"),
        Stmt::WithUncompute { compute, body, .. } => {
            out.push_str("(with-uncompute (");
            for (i, b) in compute.iter().enumerate() {
                if i > 0 {
                    indent(out, ind + 17);
                }
                write_stmt(out, b, ind + 17);
            }
            out.push(')');
            for b in body {
                indent(out, ind + 2);
                write_stmt(out, b, ind + 2);
            }
            out.push(')');
        }
    }
}

/// A statement as source text.
pub fn stmt_text(s: &Stmt) -> String {
    let mut out = String::new();
    write_stmt(&mut out, s, 0);
    out
}

/// Prints a whole definition, under the given name.
pub fn proc_text(def: &ProcDef, name: &str) -> String {
    let mut out = format!("(define-reversible ({}", name);
    for (p, _) in &def.params {
        out.push(' ');
        out.push_str(p);
    }
    out.push(')');
    if let Some(d) = &def.declare {
        out.push_str("\n  ");
        out.push_str(&datum_text(d));
    }
    for s in &def.body {
        out.push_str("\n  ");
        write_stmt(&mut out, s, 2);
    }
    out.push_str(")\n");
    out
}
