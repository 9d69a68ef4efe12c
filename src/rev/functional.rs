//! The meaning of a reversible procedure as ordinary VLAD code, for nested
//! differentiation.
//!
//! First-order derivatives of `call`/`uncall` come from the executor ([`super::grad`](mod@super::grad)):
//! tangents carried next to every variable, adjoints by running backward. Those
//! native derivative runs compute on plain numbers, so they cannot themselves be
//! differentiated. When they must be (a derivative of a derivative through a
//! reversible procedure: AD.md's "any mix, any depth"), the primitives that run them
//! are differentiated through an equivalent VLAD function instead (`Rule::Via`): this
//! module writes that function from the procedure's statements, in state-passing
//! style, and compiles it with the normal pipeline, so `*j` and `bundle` transform it
//! like any other closure, to any depth.
//!
//! The translation of a statement list binds each updated variable anew with `let`:
//! `(+= x e)` is `(let ((x (+ x e))) rest)`; an element update rebuilds the list or
//! packed vector with `%rev-set`; a branch or loop returns the list of the variables
//! in scope and the rest destructures it; a loop is a local recursive function; an
//! ancilla is a `let` whose variable is dropped after the body; `call`/`uncall` of
//! another procedure applies that procedure's translation (`%rev-fun`), so a
//! derivative goes through every level of a recursion as through one. The backward direction translates the inverted
//! statements ([`super::invert`]). The run-time reversibility checks (assertions,
//! `delocal`, `pop` into zero) are left out: this function is only differentiated at
//! arguments where the executor has just run the procedure, checks included.
//!
//! Generated names start with `#%` (the reader cannot produce them), and primitives
//! are named `#%p:NAME`, so neither can be captured or shadowed by the program.

use super::invert;
use super::syntax::{Place, ProcDef, Stmt, UpOp};
use crate::anf::{Atom, GlobalScope, Normalizer};
use crate::datum::{Datum, DatumKind};
use crate::expand::{self, Core};
use crate::prims;
use crate::source::Span;
use crate::value::{InstRc, Value};
use std::rc::Rc;

/// The VLAD closures equivalent to running a procedure in one direction.
pub struct Entries {
    /// `(lambda ((list a ...)) (list a' ...))`, as `%rev-call`.
    pub list: Value,
    /// The same on the tuple `(cons* p a ...)`, as `call`.
    pub tuple: Value,
    /// `(lambda ((cons* p k a ...)) gradient)`, as `rev-grad` (none without variables).
    pub grad: Option<Value>,
}

/// Both directions of a procedure (`bwd` runs the inverse).
pub struct Functional {
    pub fwd: Entries,
    pub bwd: Entries,
}

/// The names the generated code sees: the right-hand sides' own scope, plus the
/// primitives under `#%p:` and `ref` as `%rev-ref` (lists and packed vectors).
/// Translating and compiling waits for the first nested derivative (most procedures
/// never need it), so what the names mean at the definition is frozen here.
pub struct Frozen {
    names: rustc_hash::FxHashMap<Rc<str>, Atom>,
    accessors: rustc_hash::FxHashMap<u32, &'static [bool]>,
}

impl GlobalScope for Frozen {
    fn accessor(&self, g: u32) -> Option<&'static [bool]> {
        self.accessors.get(&g).copied()
    }
    fn lookup(&self, name: &str) -> Option<Atom> {
        if let Some(p) = name.strip_prefix("#%p:") {
            return prims::lookup(p).map(|p| Atom::Const(Value::Prim(p)));
        }
        self.names.get(name).cloned()
    }
}

/// What the names of `def` (every symbol it contains) mean in `scope`, as the
/// translation will see them.
pub fn freeze(def: &ProcDef, scope: &dyn GlobalScope) -> Frozen {
    let rhs = super::compile::RhsScope { inner: scope };
    let mut f = Frozen { names: Default::default(), accessors: Default::default() };
    let mut note = |name: &Rc<str>| {
        if f.names.contains_key(name) {
            return;
        }
        let atom = if &**name == "ref" {
            scope.lookup("ref").or_else(|| prims::lookup("%rev-ref").map(|p| Atom::Const(Value::Prim(p))))
        } else {
            rhs.lookup(name)
        };
        if let Some(a) = atom {
            if let Atom::Global(g) = a {
                if let Some(acc) = scope.accessor(g) {
                    f.accessors.insert(g, acc);
                }
            }
            f.names.insert(name.clone(), a);
        }
    };
    let mut work: Vec<&Stmt> = def.body.iter().collect();
    let mut data: Vec<&Datum> = Vec::new();
    while let Some(s) = work.pop() {
        match s {
            Stmt::Update { place, rhs, .. } => {
                data.extend(place.indices());
                data.push(rhs);
            }
            Stmt::Swap { a, b, .. } => {
                data.extend(a.indices());
                data.extend(b.indices());
            }
            Stmt::If { test, then, els, assert, .. } => {
                data.push(test);
                data.push(assert);
                work.push(then);
                work.push(els);
            }
            Stmt::From { entry, body, step, until, .. } => {
                data.push(entry);
                data.push(until);
                work.push(body);
                work.push(step);
            }
            Stmt::Local { init, body, fin, .. } => {
                data.push(init);
                data.push(fin);
                work.extend(body.iter());
            }
            Stmt::Call { callee, .. } => note(&callee.0),
            Stmt::Begin(v, _) => work.extend(v.iter()),
            Stmt::WithUncompute { compute, body, .. } => {
                work.extend(compute.iter());
                work.extend(body.iter());
            }
            Stmt::Push { .. } | Stmt::Skip(_) => {}
        }
    }
    while let Some(d) = data.pop() {
        match &d.kind {
            DatumKind::Symbol(n) => note(n),
            DatumKind::List(items, tail) => {
                data.extend(items.iter());
                data.extend(tail.as_deref());
            }
            _ => {}
        }
    }
    note(&"ref".into());
    f
}

/// Translates and compiles both directions of `def`.
pub fn translate(def: &ProcDef, scope: &Frozen) -> Result<Functional, String> {
    let inv = invert::invert_proc(def);
    Ok(Functional { fwd: entries(def, scope)?, bwd: entries(&inv, scope)? })
}

fn entries(def: &ProcDef, scope: &Frozen) -> Result<Entries, String> {
    let mut t = Tr { span: def.span, fresh: 0, mod32: def.options.mod32, scope };
    let params: Vec<Rc<str>> = def.params.iter().map(|(n, _)| n.clone()).collect();
    let orig: Vec<Rc<str>> = (0..params.len()).map(|i| format!("#%o{}", i).into()).collect();
    // (let ((a (%rev-unpack o)) ...) BODY (list (%rev-repack a o) ...))
    let out = t.list(
        params.iter().zip(&orig).map(|(a, o)| t.call("%rev-repack", vec![t.sym(a), t.sym(o)])).collect(),
    );
    let body = t.seq(def.body.iter(), &params, out);
    let binds = params.iter().zip(&orig).map(|(a, o)| (t.sym(a), t.call("%rev-unpack", vec![t.sym(o)])));
    let body = t.let_star(binds.collect(), body);
    let list_pat = t.list(orig.iter().map(|o| t.sym(o)).collect());
    let list_lam = t.form(vec![t.sym("lambda"), t.form(vec![list_pat]), body]);
    // the tuple entry: (cons* p a ...) (p alone when there are no variables)
    let head = |extra: &[&str]| {
        let mut items = vec![t.sym("cons*"), t.sym("#%proc")];
        items.extend(extra.iter().map(|e| t.sym(e)));
        items.extend(orig.iter().map(|o| t.sym(o)));
        if items.len() == 2 {
            t.sym("#%proc")
        } else {
            t.form(items)
        }
    };
    let call_list = t.list(orig.iter().map(|o| t.sym(o)).collect());
    let tuple_lam = t.form(vec![
        t.sym("lambda"),
        t.form(vec![head(&[])]),
        t.form(vec![list_lam.clone(), call_list.clone()]),
    ]);
    // the gradient entry: the adjoints of the variables for a unit adjoint of variable k
    let grad_lam = (!params.is_empty()).then(|| {
        let src = "(lambda (HEAD) (let* ((#%f LIST) ((cons #%y #%bp) ((#%p:*j #%f) (#%p:*j ARGS))) \
               ((cons #%fb #%xb) (#%p:unsensitize (#%bp (#%p:sensitize (#%p:%rev-set (#%p:zero (#%p:*j-inverse #%y)) #%k 1)))))) \
               #%xb))";
        let d = crate::reader::read_all(&src.replace("#%", "MARK--"), u32::MAX).ok()?;
        let mut d = d.into_iter().next()?;
        rename_marks(&mut d);
        substitute(&mut d, "HEAD", &head(&["#%k"]));
        substitute(&mut d, "LIST", &list_lam);
        substitute(&mut d, "ARGS", &call_list);
        Some(d)
    });
    let grad_lam = match grad_lam {
        Some(Some(d)) => Some(d),
        Some(None) => return Err("internal error: the gradient entry does not read".into()),
        None => None,
    };
    let name = def.name.clone();
    Ok(Entries {
        list: compile(&list_lam, scope, &name)?,
        tuple: compile(&tuple_lam, scope, &name)?,
        grad: match grad_lam {
            Some(d) => Some(compile(&d, scope, &name)?),
            None => None,
        },
    })
}

/// `MARK--x` back to `#%x` (the reader cannot read `#%`, which is the point).
fn rename_marks(d: &mut Datum) {
    match &mut d.kind {
        DatumKind::Symbol(s) if s.starts_with("MARK--") => *s = format!("#%{}", &s[6..]).into(),
        DatumKind::List(items, tail) => {
            items.iter_mut().for_each(rename_marks);
            if let Some(t) = tail {
                rename_marks(t);
            }
        }
        _ => {}
    }
}

fn substitute(d: &mut Datum, name: &str, by: &Datum) {
    match &mut d.kind {
        DatumKind::Symbol(s) if &**s == name => *d = by.clone(),
        DatumKind::List(items, tail) => {
            items.iter_mut().for_each(|i| substitute(i, name, by));
            if let Some(t) = tail {
                substitute(t, name, by);
            }
        }
        _ => {}
    }
}

fn compile(d: &Datum, scope: &Frozen, name: &str) -> Result<Value, String> {
    let fail = |m: String| format!("the VLAD translation of {} does not compile: {}", name, m);
    let core = expand::expand(d).map_err(|e| fail(e.message.clone()))?;
    let mut lam = match &core {
        Core::Lambda(l) => (**l).clone(),
        _ => return Err(fail("not a lambda".into())),
    };
    lam.name = Some(format!("{} (as VLAD)", name).into());
    let g = Normalizer::new(scope).lambda(&lam).map_err(|e| fail(e.message.clone()))?;
    Ok(Value::Closure(InstRc::empty(g), 0))
}

struct Tr<'a> {
    span: Span,
    fresh: u32,
    mod32: bool,
    scope: &'a Frozen,
}

impl Tr<'_> {
    fn d(&self, kind: DatumKind) -> Datum {
        Datum::new(kind, self.span)
    }
    fn sym(&self, s: &str) -> Datum {
        self.d(DatumKind::Symbol(s.into()))
    }
    fn form(&self, items: Vec<Datum>) -> Datum {
        self.d(DatumKind::List(items, None))
    }
    fn list(&self, items: Vec<Datum>) -> Datum {
        let mut v = vec![self.sym("list")];
        v.extend(items);
        self.form(v)
    }
    fn names(&self, vars: &[Rc<str>]) -> Datum {
        self.list(vars.iter().map(|v| self.sym(v)).collect())
    }
    /// A call of primitive `p` (never shadowed).
    fn call(&self, p: &str, args: Vec<Datum>) -> Datum {
        let mut v = vec![self.sym(&format!("#%p:{}", p))];
        v.extend(args);
        self.form(v)
    }
    fn fresh(&mut self, what: &str) -> Rc<str> {
        self.fresh += 1;
        format!("#%{}{}", what, self.fresh).into()
    }
    /// `(let* (binds ...) body)`.
    fn let_star(&self, binds: Vec<(Datum, Datum)>, body: Datum) -> Datum {
        if binds.is_empty() {
            return body;
        }
        let b = binds.into_iter().map(|(p, e)| self.form(vec![p, e])).collect();
        self.form(vec![self.sym("let*"), self.form(b), body])
    }

    /// Statements, then `rest`, with `vars` (the variables in scope) rebound.
    fn seq<'s>(
        &mut self,
        stmts: impl DoubleEndedIterator<Item = &'s Stmt>,
        vars: &[Rc<str>],
        rest: Datum,
    ) -> Datum {
        let mut acc = rest;
        for s in stmts.rev() {
            acc = self.stmt(s, vars, acc);
        }
        acc
    }

    /// A statement run for its effect on `vars`, as an expression giving their list.
    fn block(&mut self, s: &Stmt, vars: &[Rc<str>]) -> Datum {
        let out = self.names(vars);
        self.stmt(s, vars, out)
    }

    fn stmt(&mut self, s: &Stmt, vars: &[Rc<str>], rest: Datum) -> Datum {
        crate::stack::grow(|| self.stmt_here(s, vars, rest))
    }

    fn stmt_here(&mut self, s: &Stmt, vars: &[Rc<str>], rest: Datum) -> Datum {
        match s {
            Stmt::Update { op, place, rhs, .. } => {
                let (root, idx, mut binds) = self.place_path(place, vars);
                let e = self.fresh("e");
                binds.push((self.sym(&e), self.rhs(rhs, vars)));
                let cur = self.read(&root, &idx);
                let prim = match op {
                    UpOp::Add => "+",
                    UpOp::Sub => "-",
                    UpOp::Mul => "*",
                    UpOp::Div => "%rev-qdiv",
                    UpOp::Xor => "%rev-xor-update",
                };
                let mut new = self.call(prim, vec![cur, self.sym(&e)]);
                if self.mod32 {
                    new = self.call("%rev-wrap32", vec![new]);
                }
                binds.push((self.sym(&root), self.set(&root, &idx, new)));
                self.let_star(binds, rest)
            }
            Stmt::Swap { a, b, .. } => {
                let (ra, ia, mut binds) = self.place_path(a, vars);
                let (rb, ib, more) = self.place_path(b, vars);
                binds.extend(more);
                let (ta, tb) = (self.fresh("a"), self.fresh("b"));
                binds.push((self.sym(&ta), self.read(&ra, &ia)));
                binds.push((self.sym(&tb), self.read(&rb, &ib)));
                binds.push((self.sym(&ra), self.set(&ra, &ia, self.sym(&tb))));
                binds.push((self.sym(&rb), self.set(&rb, &ib, self.sym(&ta))));
                self.let_star(binds, rest)
            }
            Stmt::If { test, then, els, .. } => {
                let (t, e) = (self.block(then, vars), self.block(els, vars));
                let sub = self.form(vec![self.sym("if"), self.rhs(test, vars), t, e]);
                self.let_star(vec![(self.names(vars), sub)], rest)
            }
            Stmt::From { body, step, until, .. } => {
                let lp = self.fresh("loop");
                let again = self.form(vec![self.sym(&lp), self.names(vars)]);
                let next = self.stmt(step, vars, again);
                let after_body =
                    self.form(vec![self.sym("if"), self.rhs(until, vars), self.names(vars), next]);
                let run = self.stmt(body, vars, after_body);
                let lam = self.form(vec![self.sym("lambda"), self.form(vec![self.names(vars)]), run]);
                let sub = self.form(vec![
                    self.sym("letrec"),
                    self.form(vec![self.form(vec![self.sym(&lp), lam])]),
                    self.form(vec![self.sym(&lp), self.names(vars)]),
                ]);
                self.let_star(vec![(self.names(vars), sub)], rest)
            }
            Stmt::Local { var, init, body, .. } => {
                let mut inner: Vec<Rc<str>> = vars.iter().filter(|v| **v != var.0).cloned().collect();
                let outer = inner.clone();
                inner.push(var.0.clone());
                let init = self.rhs(init, vars);
                let out = self.names(&inner);
                let run = self.seq(body.iter(), &inner, out);
                let sub = self.let_star(vec![(self.sym(&var.0), init)], run);
                let mut pat = outer.clone();
                pat.push(self.fresh("gone"));
                self.let_star(vec![(self.names(&pat), sub)], rest)
            }
            Stmt::Push { pop: false, x, stack, .. } => {
                let pushed = self.form(vec![self.sym("cons"), self.sym(&x.0), self.sym(&stack.0)]);
                let zero = self.call("%rev-zero-of", vec![self.sym(&x.0)]);
                let t = self.fresh("s");
                self.let_star(
                    vec![(self.sym(&t), pushed), (self.sym(&x.0), zero), (self.sym(&stack.0), self.sym(&t))],
                    rest,
                )
            }
            Stmt::Push { pop: true, x, stack, .. } => {
                let pat = self.form(vec![self.sym("cons"), self.sym(&x.0), self.sym(&stack.0)]);
                self.let_star(vec![(pat, self.sym(&stack.0))], rest)
            }
            Stmt::Call { uncall, callee, args, .. } => {
                // The callee's own translation, applied: a derivative of this
                // goes through the callee's statements as through these (a
                // `%rev-call` would be differentiated by its rule, whose nested
                // derivative runs the callee's whole derivative at each call:
                // a recursive procedure n deep cost n² under a second derivative).
                let names: Vec<Rc<str>> = args.iter().map(|(n, _)| n.clone()).collect();
                let entry =
                    self.form(vec![self.sym("cons"), self.sym(&callee.0), self.d(DatumKind::Bool(!*uncall))]);
                let run = self.form(vec![self.call("%rev-fun", vec![entry]), self.names(&names)]);
                self.let_star(vec![(self.names(&names), run)], rest)
            }
            Stmt::Begin(v, _) => self.seq(v.iter(), vars, rest),
            Stmt::Skip(_) => rest,
            Stmt::WithUncompute { compute, body, .. } => {
                let undo = invert::invert_seq(compute);
                let all: Vec<&Stmt> = compute.iter().chain(body.iter()).chain(undo.iter()).collect();
                self.seq(all.into_iter(), vars, rest)
            }
        }
    }

    /// A place's variable and its index expressions, bound to fresh names first
    /// (the executor evaluates indices before it updates anything).
    #[allow(clippy::type_complexity)]
    fn place_path(&mut self, p: &Place, vars: &[Rc<str>]) -> (Rc<str>, Vec<Datum>, Vec<(Datum, Datum)>) {
        let mut binds = Vec::new();
        let mut idx = Vec::new();
        for i in p.indices() {
            let t = self.fresh("i");
            binds.push((self.sym(&t), self.rhs(i, vars)));
            idx.push(self.sym(&t));
        }
        (p.root().clone(), idx, binds)
    }

    fn read(&self, root: &str, idx: &[Datum]) -> Datum {
        idx.iter().fold(self.sym(root), |acc, i| self.call("%rev-ref", vec![acc, i.clone()]))
    }

    /// The new value of `root` once the element at `idx` is `v`.
    fn set(&self, root: &str, idx: &[Datum], v: Datum) -> Datum {
        match idx.split_last() {
            None => v,
            Some((last, outer)) => {
                let container = self.read(root, outer);
                let updated = self.call("%rev-set", vec![container, last.clone(), v]);
                self.set(root, outer, updated)
            }
        }
    }

    /// A right-hand side, index or condition: `(ref v i ...)` on a variable is the
    /// element (whatever `ref` means to the program), as the executor reads it.
    fn rhs(&self, d: &Datum, vars: &[Rc<str>]) -> Datum {
        crate::stack::grow(|| self.rhs_here(d, vars))
    }

    fn rhs_here(&self, d: &Datum, vars: &[Rc<str>]) -> Datum {
        let DatumKind::List(items, None) = &d.kind else { return d.clone() };
        let Some(h) = items.first() else { return d.clone() };
        let head = h.as_symbol().filter(|h| !vars.iter().any(|v| &**v == *h));
        match head {
            Some("quote") => d.clone(),
            Some("ref") if items.len() == 3 && self.var_rooted(&items[1], vars) => {
                let at = vec![self.rhs(&items[1], vars), self.rhs(&items[2], vars)];
                Datum::new(
                    DatumKind::List(std::iter::once(self.sym("#%p:%rev-ref")).chain(at).collect(), None),
                    d.span,
                )
            }
            Some("if" | "and" | "or") => {
                let mut v = vec![items[0].clone()];
                v.extend(items[1..].iter().map(|i| self.rhs(i, vars)));
                Datum::new(DatumKind::List(v, None), d.span)
            }
            Some(h) if expand::KEYWORDS.contains(&h) => d.clone(),
            _ => {
                let app = Datum::new(
                    DatumKind::List(items.iter().map(|i| self.rhs(i, vars)).collect(), None),
                    d.span,
                );
                // mod32: the executor wraps the integer results of the primitives it
                // evaluates natively (compile.rs: those with a derivative rule, called
                // with their arity)
                match head.and_then(|h| self.scope.lookup(h)) {
                    Some(Atom::Const(Value::Prim(p))) if self.mod32 => {
                        let def = prims::prim(p);
                        let fits = match def.arity {
                            0 => items.len() == 1,
                            n => n as usize + 1 == items.len(),
                        };
                        if fits && super::compile::deriv_of(def.name).is_some() {
                            self.call("%rev-wrap32", vec![app])
                        } else {
                            app
                        }
                    }
                    _ => app,
                }
            }
        }
    }

    fn var_rooted(&self, d: &Datum, vars: &[Rc<str>]) -> bool {
        match d.as_symbol() {
            Some(n) => vars.iter().any(|v| &**v == n),
            None => match d.as_list() {
                Some([h, inner, _]) if h.as_symbol() == Some("ref") => self.var_rooted(inner, vars),
                _ => false,
            },
        }
    }
}
