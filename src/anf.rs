//! A-normal form: alpha-renamed (every binder a fresh [`VarId`]), every
//! intermediate value named, lambdas grouped into closure groups. This is the
//! form the evaluator runs (after [`crate::resolve`]) and the AD transforms rewrite.

use crate::error::{Error, Result};
use crate::expand::{Core, CoreLambda, Pat};
use crate::prims::PrimId;
use crate::resolve::GroupCode;
use crate::source::Span;
use crate::value::Value;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;

/// A variable after alpha renaming; unique in the session.
pub type VarId = u32;
/// Index of a top-level definition in the machine's global table.
pub type GlobalId = u32;

thread_local! {
    static VAR_NAMES: RefCell<Vec<Rc<str>>> = const { RefCell::new(Vec::new()) };
}

/// A fresh variable with a display name.
pub fn fresh_var(name: &str) -> VarId {
    VAR_NAMES.with(|v| {
        let mut v = v.borrow_mut();
        v.push(name.into());
        (v.len() - 1) as VarId
    })
}

/// The base name a variable was created with.
pub fn var_base_name(id: VarId) -> Rc<str> {
    VAR_NAMES.with(|v| v.borrow().get(id as usize).cloned().unwrap_or_else(|| "?".into()))
}

/// The printed (renamed) name of a variable: `name_id`.
pub fn var_name(id: VarId) -> String {
    format!("{}_{}", var_base_name(id).trim(), id)
}

/// An operand: a variable, a top-level definition, or a constant.
#[derive(Clone)]
pub enum Atom {
    Var(VarId),
    Global(GlobalId),
    Const(Value),
}

/// `let* (binds...) in result`.
#[derive(Clone)]
pub struct Block {
    pub binds: Vec<Bind>,
    pub result: Atom,
}

/// Blocks nest through conditionals as deeply as the source does: they are
/// dropped with an explicit work list rather than by recursion, so dropping
/// deeply nested code needs no more native stack than shallow code.
impl Drop for Block {
    fn drop(&mut self) {
        fn take_branches(binds: &mut [Bind], out: &mut Vec<Block>) {
            for b in binds {
                if let Bind::Let(_, Expr::If(_, t, f)) = b {
                    if !t.binds.is_empty() {
                        out.push(std::mem::replace(
                            t,
                            Block { binds: Vec::new(), result: Atom::Const(Value::Nil) },
                        ));
                    }
                    if !f.binds.is_empty() {
                        out.push(std::mem::replace(
                            f,
                            Block { binds: Vec::new(), result: Atom::Const(Value::Nil) },
                        ));
                    }
                }
            }
        }
        let mut pending = Vec::new();
        take_branches(&mut self.binds, &mut pending);
        while let Some(mut b) = pending.pop() {
            take_branches(&mut b.binds, &mut pending);
        }
    }
}

/// A binding of the A-normal form.
#[derive(Clone)]
pub enum Bind {
    /// `x = e`
    Let(VarId, Expr),
    /// `(x . y) = a`: destructuring; a run-time error if `a` is not a pair.
    Uncons(VarId, VarId, Atom, Span),
    /// A constant in a pattern: `a` must equal the constant.
    Check(Value, Atom, Span),
    /// `letrec` of a closure group: the names are bound to its members.
    Letrec(Vec<VarId>, Rc<Group>),
    /// Destructures a closure-shaped environment sensitivity into the
    /// sensitivities of the closure's captured variables (AD-generated).
    EnvSens(Vec<VarId>, Atom),
}

/// How arguments are passed: one value, or the tuple `(cons* a1 ... an)`, n >= 2,
/// which the evaluator need not build when the callee destructures it at once.
#[derive(Clone)]
pub enum Args {
    One(Atom),
    Tuple(Vec<Atom>),
}

#[derive(Clone)]
pub enum Expr {
    Atom(Atom),
    App(Atom, Args, Span),
    Prim(PrimId, Args, Span),
    Cons(Atom, Atom),
    /// A closure of a group of one lambda.
    Lambda(Rc<Group>),
    If(Atom, Block, Block),
    /// A closure-shaped sensitivity of member `idx` of `group`, with the given
    /// captured-variable sensitivities (AD-generated).
    MakeEnvSens(Rc<Group>, u32, Vec<Atom>),
    /// A closure-shaped sensitivity shaped like the closure `like`, with the
    /// given captured-variable sensitivities (AD-generated).
    MakeEnvSensLike(Atom, Vec<Atom>),
}

/// One lambda: its parameter and body.
#[derive(Clone)]
pub struct Lambda {
    pub param: VarId,
    pub body: Block,
}

/// Which AD transform produced a group from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// forward (`bundle`)
    F = 0,
    /// reverse (`*j`)
    R = 1,
    /// perturbation (`perturb`)
    P = 2,
    /// sensitivity (`sensitize`)
    S = 3,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::F => "forward",
            Kind::R => "reverse",
            Kind::P => "perturbation",
            Kind::S => "sensitivity",
        }
    }
}

/// Where a group's code came from.
#[derive(Clone)]
pub enum Origin {
    Source,
    /// The AD transform `Kind` of another group.
    Transformed(Kind, Rc<Group>),
    /// The forward or reverse version of a primitive (a closure compiled from
    /// the primitive's derivative rule).
    PrimRule(Kind, PrimId),
}

/// The code of a closure group: one lambda, or the lambdas of a `letrec`.
/// Members see the group's captured variables and each other.
pub struct Group {
    /// The letrec-bound names (empty for a plain lambda).
    pub names: Vec<VarId>,
    /// The captured free variables, in the fixed (sorted) order closures store them.
    pub free: Vec<VarId>,
    /// Display names of the members.
    pub member_names: Vec<Option<Rc<str>>>,
    pub spans: Vec<Span>,
    pub origin: Origin,
    /// The members' A-normal form; computed lazily for transformed groups.
    /// Empty for perturbation/sensitivity shapes, which are never run.
    pub members: OnceCell<Vec<Lambda>>,
    /// Cached transforms, by [`Kind`].
    pub transforms: RefCell<[Option<Rc<Group>>; 4]>,
    /// The resolved, runnable code.
    pub code: OnceCell<GroupCode>,
    /// Set while the members are being computed (to catch cycles).
    pub computing: Cell<bool>,
    /// Set on lambdas nested in AD-generated code (backpropagators, the bodies of
    /// primitives' derivative rules), so that metering can tell derivative work
    /// from primal work.
    pub in_derivative: Cell<bool>,
    /// A native implementation of the group's code (primitives' derivative
    /// rules, `ad::native`), used when the arguments suit it.
    pub native: OnceCell<crate::ad::native::Native>,
}

impl Group {
    pub fn new(
        names: Vec<VarId>,
        members: Vec<Lambda>,
        member_names: Vec<Option<Rc<str>>>,
        spans: Vec<Span>,
        origin: Origin,
    ) -> Rc<Group> {
        let free = group_free_vars(&names, &members);
        let cell = OnceCell::new();
        let _ = cell.set(members);
        Rc::new(Group {
            names,
            free,
            member_names,
            spans,
            origin,
            members: cell,
            transforms: RefCell::new([None, None, None, None]),
            code: OnceCell::new(),
            computing: Cell::new(false),
            in_derivative: Cell::new(false),
            native: OnceCell::new(),
        })
    }

    /// A group whose members will be computed on first use.
    pub fn lazy(like: &Group, origin: Origin) -> Rc<Group> {
        Rc::new(Group {
            names: like.names.clone(),
            free: like.free.clone(),
            member_names: like.member_names.clone(),
            spans: like.spans.clone(),
            origin,
            members: OnceCell::new(),
            transforms: RefCell::new([None, None, None, None]),
            code: OnceCell::new(),
            computing: Cell::new(false),
            in_derivative: Cell::new(false),
            native: OnceCell::new(),
        })
    }

    pub fn len(&self) -> usize {
        self.member_names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.member_names.is_empty()
    }

    /// The chain of transforms applied to reach this group, outermost first.
    pub fn tags(&self) -> Vec<Kind> {
        match &self.origin {
            Origin::Source => vec![],
            Origin::PrimRule(k, _) => vec![*k],
            Origin::Transformed(k, g) => {
                let mut t = vec![*k];
                t.extend(g.tags());
                t
            }
        }
    }

    /// The outermost transform applied to reach this group (`tags()[0]`,
    /// without building the chain).
    pub fn outer_kind(&self) -> Option<Kind> {
        match &self.origin {
            Origin::Source => None,
            Origin::PrimRule(k, _) | Origin::Transformed(k, _) => Some(*k),
        }
    }

    /// True for AD-generated code: a transformed group, a primitive's rule, or a
    /// lambda nested in one of these.
    pub fn is_derivative_code(&self) -> bool {
        !matches!(self.origin, Origin::Source) || self.in_derivative.get()
    }

    /// Marks the lambdas nested in this group's members as AD-generated code.
    pub fn mark_nested_derivative(&self) {
        fn block(b: &Block) {
            for bind in &b.binds {
                match bind {
                    Bind::Let(_, e) => expr(e),
                    Bind::Letrec(_, g) => g.in_derivative.set(true),
                    _ => {}
                }
            }
        }
        fn expr(e: &Expr) {
            match e {
                Expr::Lambda(g) => g.in_derivative.set(true),
                Expr::If(_, t, f) => {
                    block(t);
                    block(f);
                }
                _ => {}
            }
        }
        if let Some(ms) = self.members.get() {
            for m in ms {
                block(&m.body);
            }
        }
    }

    /// True for perturbation/sensitivity shapes, which cannot be applied.
    pub fn is_shape(&self) -> bool {
        matches!(self.origin, Origin::Transformed(Kind::P | Kind::S, _))
    }

    /// A display name for member `i`.
    pub fn display_name(&self, i: usize) -> String {
        let base = self
            .member_names
            .get(i)
            .cloned()
            .flatten()
            .map(|n| n.to_string())
            .unwrap_or_else(|| "lambda".into());
        let mut name = base;
        for k in self.tags().iter().rev() {
            name = format!("({} {})", k.name(), name);
        }
        name
    }
}

/// Free variables of a group: those of its members minus the letrec names, sorted.
pub fn group_free_vars(names: &[VarId], members: &[Lambda]) -> Vec<VarId> {
    let mut free = FxHashSet::default();
    for m in members {
        lambda_free_vars(m, &mut free);
    }
    for n in names {
        free.remove(n);
    }
    let mut v: Vec<VarId> = free.into_iter().collect();
    v.sort_unstable();
    v
}

fn lambda_free_vars(l: &Lambda, out: &mut FxHashSet<VarId>) {
    let mut bound = FxHashSet::default();
    bound.insert(l.param);
    block_free_vars(&l.body, &mut bound, out);
}

fn atom_use(a: &Atom, bound: &FxHashSet<VarId>, out: &mut FxHashSet<VarId>) {
    if let Atom::Var(v) = a {
        if !bound.contains(v) {
            out.insert(*v);
        }
    }
}

fn args_use(a: &Args, bound: &FxHashSet<VarId>, out: &mut FxHashSet<VarId>) {
    match a {
        Args::One(x) => atom_use(x, bound, out),
        Args::Tuple(xs) => xs.iter().for_each(|x| atom_use(x, bound, out)),
    }
}

/// Collects the free variables of a block given the variables bound around it.
pub fn block_free_vars(b: &Block, bound: &mut FxHashSet<VarId>, out: &mut FxHashSet<VarId>) {
    crate::stack::grow(|| block_free_vars_here(b, bound, out))
}

fn block_free_vars_here(b: &Block, bound: &mut FxHashSet<VarId>, out: &mut FxHashSet<VarId>) {
    for bind in &b.binds {
        match bind {
            Bind::Let(x, e) => {
                match e {
                    Expr::Atom(a) => atom_use(a, bound, out),
                    Expr::Cons(a, d) => {
                        atom_use(a, bound, out);
                        atom_use(d, bound, out);
                    }
                    Expr::App(f, args, _) => {
                        atom_use(f, bound, out);
                        args_use(args, bound, out);
                    }
                    Expr::Prim(_, args, _) => args_use(args, bound, out),
                    Expr::Lambda(g) => g.free.iter().for_each(|v| atom_use(&Atom::Var(*v), bound, out)),
                    Expr::If(c, t, e) => {
                        atom_use(c, bound, out);
                        block_free_vars(t, bound, out);
                        block_free_vars(e, bound, out);
                    }
                    Expr::MakeEnvSens(_, _, xs) => xs.iter().for_each(|x| atom_use(x, bound, out)),
                    Expr::MakeEnvSensLike(l, xs) => {
                        atom_use(l, bound, out);
                        xs.iter().for_each(|x| atom_use(x, bound, out))
                    }
                }
                bound.insert(*x);
            }
            Bind::Uncons(x, y, a, _) => {
                atom_use(a, bound, out);
                bound.insert(*x);
                bound.insert(*y);
            }
            Bind::Check(_, a, _) => atom_use(a, bound, out),
            Bind::Letrec(names, g) => {
                for n in names {
                    bound.insert(*n);
                }
                g.free.iter().for_each(|v| atom_use(&Atom::Var(*v), bound, out));
            }
            Bind::EnvSens(xs, a) => {
                atom_use(a, bound, out);
                for x in xs {
                    bound.insert(*x);
                }
            }
        }
    }
    atom_use(&b.result, bound, out);
}

/// What a name refers to while converting to A-normal form.
#[derive(Clone)]
pub enum Binding {
    Atom(Atom),
}

/// Name resolution for the conversion: locals shadow the top-level lookup.
pub trait GlobalScope {
    /// The atom a top-level name denotes (a global or a primitive constant).
    fn lookup(&self, name: &str) -> Option<Atom>;
    /// If global `g` is one of the prelude's pair accessors (`car`, `cdr`,
    /// `cadr`...), the parts it takes, innermost first (`true` = car): a call of
    /// it is then taken apart in place, with no call.
    fn accessor(&self, _g: u32) -> Option<&'static [bool]> {
        None
    }
    /// Every top-level name it binds, for the hint of an unbound variable
    /// (`suggest`): passed to `f` one by one.
    fn each_name(&self, _f: &mut dyn FnMut(&str)) {}
    /// An unbound `name` read at `span` (`hint`: the unbound-variable error's
    /// hint, or empty): where top-level names may be defined later (the REPL's
    /// later inputs), the global it is to be, instead of the error.
    fn forward(&self, _name: &str, _span: Span, _hint: &str) -> Option<Atom> {
        None
    }
}

/// The names in scope where an unbound one is met, for its hint: those of
/// `index` (a name's binding positions, innermost last; bound if any) and
/// those `globals` binds.
pub fn names_in_scope(index: &FxHashMap<Rc<str>, Vec<usize>>, globals: &dyn GlobalScope) -> Vec<Rc<str>> {
    let mut names: Vec<Rc<str>> =
        index.iter().filter(|(_, v)| !v.is_empty()).map(|(n, _)| n.clone()).collect();
    globals.each_name(&mut |n| names.push(n.into()));
    names
}

/// Converts core expressions to A-normal form.
pub struct Normalizer<'a> {
    globals: &'a dyn GlobalScope,
    scope: Vec<(Rc<str>, Atom)>,
    index: FxHashMap<Rc<str>, Vec<usize>>,
    /// The parts of each variable already taken apart (`Bind::Uncons`) by code
    /// that dominates the current position in the current lambda, so that
    /// `(car l)` and `(cdr l)` share one destructuring (and the reverse phase
    /// one sensitivity: no `plus` of two half-zero pairs).
    parts: FxHashMap<VarId, (VarId, VarId)>,
    /// Undo log of `parts`: the previous entry of each key set.
    parts_log: Vec<(VarId, Option<(VarId, VarId)>)>,
}

impl<'a> Normalizer<'a> {
    pub fn new(globals: &'a dyn GlobalScope) -> Normalizer<'a> {
        Normalizer {
            globals,
            scope: Vec::new(),
            index: FxHashMap::default(),
            parts: FxHashMap::default(),
            parts_log: Vec::new(),
        }
    }

    /// Binds `x` and `y` to the car and cdr of `a`, or reuses the parts an
    /// earlier destructuring of the same variable bound (it succeeded, so
    /// this one would too, with the same parts).
    fn uncons(&mut self, a: Atom, s: Span, binds: &mut Vec<Bind>, names: (&str, &str)) -> (VarId, VarId) {
        if let Atom::Var(v) = a {
            if let Some(&xy) = self.parts.get(&v) {
                return xy;
            }
        }
        let (x, y) = (fresh_var(names.0), fresh_var(names.1));
        binds.push(Bind::Uncons(x, y, a.clone(), s));
        if let Atom::Var(v) = a {
            let old = self.parts.insert(v, (x, y));
            self.parts_log.push((v, old));
        }
        (x, y)
    }

    /// Forgets the destructurings recorded since `mark` (leaving a block).
    fn forget_parts(&mut self, mark: usize) {
        while self.parts_log.len() > mark {
            let (v, old) = self.parts_log.pop().unwrap();
            match old {
                Some(xy) => self.parts.insert(v, xy),
                None => self.parts.remove(&v),
            };
        }
    }

    fn push(&mut self, name: Rc<str>, a: Atom) {
        self.index.entry(name.clone()).or_default().push(self.scope.len());
        self.scope.push((name, a));
    }

    fn pop_to(&mut self, len: usize) {
        while self.scope.len() > len {
            let (n, _) = self.scope.pop().unwrap();
            if let Some(v) = self.index.get_mut(&n) {
                v.pop();
            }
        }
    }

    fn lookup(&self, name: &str, span: Span) -> Result<Atom> {
        if let Some(&i) = self.index.get(name).and_then(|v| v.last()) {
            return Ok(self.scope[i].1.clone());
        }
        if let Some(a) = self.globals.lookup(name) {
            return Ok(a);
        }
        let hint = self.unbound_hint(name);
        self.globals
            .forward(name, span, &hint)
            .ok_or_else(|| Error::syntax(span, format!("unbound variable `{name}`{hint}")))
    }

    /// The hint for an unbound `name` (` (...)`), where there is one: a
    /// Scheme form VLAD lacks, a misspelling of a name in scope or a keyword.
    #[cold]
    fn unbound_hint(&self, name: &str) -> String {
        let mut bound = names_in_scope(&self.index, self.globals);
        bound.extend(crate::expand::KEYWORDS.iter().map(|&k| Rc::from(k)));
        let hint = crate::suggest::unbound_hint(name, bound.iter().map(|n| &**n));
        hint.map(|h| format!(" ({h})")).unwrap_or_default()
    }

    /// The parts a call of `f` takes, if `f` names a prelude pair accessor.
    fn accessor_of(&self, f: &Core) -> Option<&'static [bool]> {
        match f {
            Core::Var(n, s) => match self.lookup(n, *s) {
                Ok(Atom::Global(g)) => self.globals.accessor(g),
                _ => None,
            },
            _ => None,
        }
    }

    /// A top-level expression as a block.
    pub fn block(&mut self, e: &Core) -> Result<Block> {
        let mut binds = Vec::new();
        let mark = self.parts_log.len();
        let result = self.norm(e, &mut binds);
        self.forget_parts(mark);
        Ok(Block { binds, result: result? })
    }

    /// A lambda as a closure group of one.
    pub fn lambda(&mut self, l: &CoreLambda) -> Result<Rc<Group>> {
        let lam = self.lambda_code(l)?;
        Ok(Group::new(vec![], vec![lam], vec![l.name.clone()], vec![l.span], Origin::Source))
    }

    pub fn lambda_code(&mut self, l: &CoreLambda) -> Result<Lambda> {
        // A nested lambda captures the variables it names, not parts of them
        // the enclosing code happens to have taken apart.
        let outer = (std::mem::take(&mut self.parts), std::mem::take(&mut self.parts_log));
        let r = self.lambda_code_here(l);
        (self.parts, self.parts_log) = outer;
        r
    }

    fn lambda_code_here(&mut self, l: &CoreLambda) -> Result<Lambda> {
        let mark = self.scope.len();
        let mut binds = Vec::new();
        let param = match &l.param {
            Pat::Var(n, _) => {
                let v = fresh_var(n);
                self.push(n.clone(), Atom::Var(v));
                v
            }
            p => {
                let v = fresh_var("arg");
                self.destructure(p, Atom::Var(v), &mut binds)?;
                v
            }
        };
        let result = self.norm(&l.body, &mut binds)?;
        self.pop_to(mark);
        Ok(Lambda { param, body: Block { binds, result } })
    }

    fn destructure(&mut self, p: &Pat, a: Atom, binds: &mut Vec<Bind>) -> Result<()> {
        crate::stack::grow(|| self.destructure_here(p, a, binds))
    }

    fn destructure_here(&mut self, p: &Pat, a: Atom, binds: &mut Vec<Bind>) -> Result<()> {
        match p {
            Pat::Var(n, _) => {
                self.push(n.clone(), a);
            }
            Pat::Const(c, s) => binds.push(Bind::Check(c.0.to_value(), a, *s)),
            Pat::Cons(pa, pd, s) => {
                let names = (
                    match &**pa {
                        Pat::Var(n, _) => &**n,
                        _ => "car",
                    },
                    match &**pd {
                        Pat::Var(n, _) => &**n,
                        _ => "cdr",
                    },
                );
                let (x, y) = self.uncons(a, *s, binds, names);
                self.destructure(pa, Atom::Var(x), binds)?;
                self.destructure(pd, Atom::Var(y), binds)?;
            }
        }
        Ok(())
    }

    /// Binds a parameter pattern to the arguments of a call as the callee would:
    /// no argument is `'()`, one is passed as is, several as a tuple (taken
    /// apart directly where the pattern is a chain of `cons`).
    fn bind_args(&mut self, p: &Pat, mut atoms: Vec<Atom>, binds: &mut Vec<Bind>) -> Result<()> {
        match atoms.len() {
            0 => return self.destructure(p, Atom::Const(Value::Nil), binds),
            1 => return self.destructure(p, atoms.pop().unwrap(), binds),
            _ => {}
        }
        let mut p = p;
        let mut rest = atoms.into_iter();
        while let Pat::Cons(pa, pd, _) = p {
            let a = rest.next().unwrap();
            self.destructure(pa, a, binds)?;
            p = pd;
            if rest.len() == 1 {
                return self.destructure(p, rest.next().unwrap(), binds);
            }
        }
        // The pattern takes the remaining arguments as one tuple.
        let rest: Vec<Atom> = rest.collect();
        let mut acc = rest.last().cloned().unwrap();
        for a in rest.iter().rev().skip(1) {
            acc = self.bind_new("p", Expr::Cons(a.clone(), acc), binds);
        }
        self.destructure(p, acc, binds)
    }

    fn bind_new(&mut self, name: &str, e: Expr, binds: &mut Vec<Bind>) -> Atom {
        let x = fresh_var(name);
        binds.push(Bind::Let(x, e));
        Atom::Var(x)
    }

    fn norm(&mut self, e: &Core, binds: &mut Vec<Bind>) -> Result<Atom> {
        crate::stack::grow(|| self.norm_here(e, binds))
    }

    fn norm_here(&mut self, e: &Core, binds: &mut Vec<Bind>) -> Result<Atom> {
        match e {
            Core::Const(c, _) => Ok(Atom::Const(c.0.to_value())),
            Core::Var(n, s) => self.lookup(n, *s),
            Core::Lambda(l) => {
                let g = self.lambda(l)?;
                Ok(self.bind_new(l.name.as_deref().unwrap_or("f"), Expr::Lambda(g), binds))
            }
            Core::App(f, args, _) if matches!(&**f, Core::Lambda(_)) => {
                // ((lambda (p) body) a ...) is (let ((p a ...)) body): no closure, no call.
                let Core::Lambda(l) = &**f else { unreachable!() };
                let mut atoms = Vec::with_capacity(args.len());
                for a in args {
                    atoms.push(self.norm(a, binds)?);
                }
                let mark = self.scope.len();
                self.bind_args(&l.param, atoms, binds)?;
                let r = self.norm(&l.body, binds)?;
                self.pop_to(mark);
                Ok(r)
            }
            Core::App(f, args, s) => {
                if let (1, Some(path)) = (args.len(), self.accessor_of(f)) {
                    // (car x), (cadr x)...: destructured in place.
                    let mut cur = self.norm(&args[0], binds)?;
                    for &first in path {
                        let (a, d) = self.uncons(cur, *s, binds, ("car", "cdr"));
                        cur = Atom::Var(if first { a } else { d });
                    }
                    return Ok(cur);
                }
                let fa = self.norm(f, binds)?;
                let mut atoms = Vec::with_capacity(args.len());
                for a in args {
                    atoms.push(self.norm(a, binds)?);
                }
                let args = match atoms.len() {
                    0 => Args::One(Atom::Const(Value::Nil)),
                    1 => Args::One(atoms.pop().unwrap()),
                    _ => Args::Tuple(atoms),
                };
                let ex = match fa {
                    Atom::Const(Value::Prim(p)) => Expr::Prim(p, args, *s),
                    fa => Expr::App(fa, args, *s),
                };
                Ok(self.bind_new("t", ex, binds))
            }
            Core::Cons(a, d, _) => {
                let aa = self.norm(a, binds)?;
                let da = self.norm(d, binds)?;
                Ok(self.bind_new("p", Expr::Cons(aa, da), binds))
            }
            Core::If(c, t, f, _) => {
                let ca = self.norm(c, binds)?;
                let tb = self.block(t)?;
                let fb = self.block(f)?;
                Ok(self.bind_new("if", Expr::If(ca, tb, fb), binds))
            }
            Core::Let(p, init, body, _) => {
                let a = self.norm(init, binds)?;
                let mark = self.scope.len();
                match p {
                    // Give a let-bound variable its own name when it renames a non-variable,
                    // so the A-normal form reads like the source.
                    Pat::Var(n, _) if !matches!(a, Atom::Var(_)) && !n.starts_with(' ') => {
                        let x = fresh_var(n);
                        binds.push(Bind::Let(x, Expr::Atom(a)));
                        self.push(n.clone(), Atom::Var(x));
                    }
                    _ => self.destructure(p, a, binds)?,
                }
                let r = self.norm(body, binds)?;
                self.pop_to(mark);
                Ok(r)
            }
            Core::Letrec(defs, body, _) => {
                let mark = self.scope.len();
                let names: Vec<VarId> = defs.iter().map(|(n, _, _)| fresh_var(n)).collect();
                for ((n, _, _), v) in defs.iter().zip(&names) {
                    self.push(n.clone(), Atom::Var(*v));
                }
                let mut members = Vec::new();
                for (_, _, l) in defs {
                    members.push(self.lambda_code(l)?);
                }
                let g = Group::new(
                    names.clone(),
                    members,
                    defs.iter().map(|(n, _, _)| Some(n.clone())).collect(),
                    defs.iter().map(|(_, _, l)| l.span).collect(),
                    Origin::Source,
                );
                binds.push(Bind::Letrec(names, g));
                let r = self.norm(body, binds)?;
                self.pop_to(mark);
                Ok(r)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
