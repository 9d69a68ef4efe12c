//! The reverse transform of a closure group (what `*j` does to code), after
//! paper 003 §4. Each member `λx0. let x_i = e_i in x_n` becomes
//!
//! ```text
//! λx0. let φ(x_1 = e_1) ... φ(x_n = e_n)
//!      in (cons x_n (λs. let x_n-bar = (unsensitize s)
//!                             ρ(x_n = e_n) ... ρ(x_1 = e_1)
//!                         in (sensitize (cons env-bar x0-bar))))
//! ```
//!
//! The forward phase φ keeps the code's shape (values are `*j`-tagged, constants
//! and globals lifted, primitives replaced by their reverse versions) and binds
//! each application's backpropagator; the reverse phase ρ runs the bindings
//! backwards, accumulating sensitivities with `plus` (first contributions are
//! plain bindings, so `plus` only appears where a value fans out). Variables that
//! receive no sensitivity get `(zero (*j-inverse x))`, and bindings whose result
//! has no sensitivity are skipped altogether. A conditional becomes a
//! conditional whose branches also return a backpropagator for the variables the
//! branches use.

use super::forward::Lifter;
use crate::anf::{
    block_free_vars, fresh_var, Args, Atom, Bind, Block, Expr, Group, Kind, Lambda, Origin, VarId,
};
use crate::error::Result;
use crate::eval::Machine;
use crate::prims::{self, PrimId};
use crate::source::Span;
use rustc_hash::{FxHashMap, FxHashSet};
use std::rc::Rc;

/// What the reverse phase needs to know about one forward binding.
enum Rec {
    Copy {
        x: VarId,
        a: Atom,
    },
    /// `s`: the call's place, where its backpropagator's call is placed (an
    /// error in it is reported at the call it differentiates).
    Call {
        x: VarId,
        bp: VarId,
        f: Atom,
        args: Args,
        s: Span,
    },
    Cons {
        x: VarId,
        a: Atom,
        d: Atom,
    },
    /// A closure (or closure-shaped sensitivity) built from these captured values.
    Captures {
        x: VarId,
        caps: Vec<Atom>,
    },
    Letrec {
        names: Vec<VarId>,
        caps: Vec<VarId>,
    },
    Uncons {
        x: VarId,
        y: VarId,
        a: Atom,
    },
    EnvSens {
        xs: Vec<VarId>,
        a: Atom,
    },
    If {
        x: VarId,
        bp: VarId,
        vars: Vec<VarId>,
    },
}

fn p(name: &str) -> PrimId {
    prims::lookup(name).expect("AD primitive missing from the table")
}

/// The members of the reverse transform of `g`.
///
/// A member whose body ends in a conditional (its result is the conditional's)
/// gets its backpropagator built in each branch instead, running that branch's
/// reverse phase and then the rest of the body's: the taken branch's
/// backpropagator is the member's, with no call of a separate branch
/// backpropagator, no list of sensitivities for the variables either branch
/// uses and no zeros for those the taken branch does not. The member's
/// tail conditionals are split (those of a branch too, up to a bound), so the
/// rest of the body's reverse phase is repeated a bounded number of times.
pub fn transform(m: &mut Machine, g: &Rc<Group>) -> Result<Vec<Lambda>> {
    let members = m.group_members(g)?;
    let mut l = Lifter { m, k: Kind::R, branch_vars: Default::default() };
    let mut out_members = Vec::with_capacity(members.len());
    for (i, lam) in members.iter().enumerate() {
        let body = member_block(&mut l, g, i, lam, &lam.body, &[])?;
        out_members.push(Lambda { param: lam.param, body });
    }
    Ok(out_members)
}

/// The most records of the rest of a body that a split conditional's branches
/// replay (see [`member_block`]): beyond it, conditionals get a backpropagator of
/// their own, so the code a split repeats stays within a constant factor.
const MAX_SPLIT_REPLAY: usize = 32;

/// The forward phase of `b`, the body of member `i` of `g` (`lam`) or a branch
/// of its tail conditional, ending in the member's backpropagator, which
/// replays `b`'s reverse phase and then `outer` (the enclosing blocks' tapes,
/// innermost first). A tail conditional is split: each branch ends in its own
/// such backpropagator.
fn member_block(
    l: &mut Lifter,
    g: &Rc<Group>,
    i: usize,
    lam: &Lambda,
    b: &Block,
    outer: &[&[Rec]],
) -> Result<Block> {
    let mut out = Vec::new();
    let mut tape = Vec::new();
    let tail_if = match (b.binds.last(), &b.result) {
        (Some(Bind::Let(x, Expr::If(c, t, f))), Atom::Var(r)) if x == r => Some((c, t, f)),
        _ => None,
    };
    let replayed: usize = outer.iter().map(|t| t.len()).sum();
    let split = tail_if.filter(|_| replayed + b.binds.len() <= MAX_SPLIT_REPLAY);
    let forward = if split.is_some() { &b.binds[..b.binds.len() - 1] } else { &b.binds[..] };
    forward_binds(l, forward, &mut out, &mut tape)?;
    let mut tapes: Vec<&[Rec]> = vec![&tape];
    tapes.extend_from_slice(outer);
    let result = match split {
        Some((c, t, f)) => {
            let tb = member_block(l, g, i, lam, t, &tapes)?;
            let fb = member_block(l, g, i, lam, f, &tapes)?;
            let o = fresh_var("out");
            out.push(Bind::Let(o, Expr::If(l.atom(c)?, tb, fb)));
            Atom::Var(o)
        }
        None => {
            let r = l.atom(&b.result)?;
            with_backpropagator(g, i, lam, &mut out, r, &b.result, &tapes)
        }
    };
    Ok(Block { binds: out, result })
}

/// Ends a forward phase whose result is `r` (`src` before the transform): binds
/// the backpropagator of member `i` of `g`, which replays `tapes` in order (each
/// backwards), and returns the variable holding `(cons r backpropagator)`.
fn with_backpropagator(
    g: &Rc<Group>,
    i: usize,
    lam: &Lambda,
    out: &mut Vec<Bind>,
    r: Atom,
    src: &Atom,
    tapes: &[&[Rec]],
) -> Atom {
    let span = g.spans.get(i).copied().unwrap_or_default();
    let s = fresh_var("s");
    let mut bw = Backward::default();
    let ybar = bw.prim1(p("unsensitize"), Atom::Var(s));
    bw.acc_atom(src, ybar);
    for t in tapes {
        bw.replay(t);
    }
    // A sibling's sensitivity is a sensitivity of the group's captured variables.
    for n in &g.names {
        if let Some(sn) = bw.acc.remove(n) {
            let tmps: Vec<VarId> = g.free.iter().map(|_| fresh_var("env")).collect();
            bw.binds.push(Bind::EnvSens(tmps.clone(), sn));
            for (fv, t) in g.free.iter().zip(tmps) {
                bw.add(*fv, Atom::Var(t));
            }
        }
    }
    let x0 = bw.get(lam.param);
    let env: Vec<Atom> = g.free.iter().map(|v| bw.get(*v)).collect();
    let es = bw.bind(Expr::MakeEnvSens(g.clone(), i as u32, env));
    let pair = bw.bind(Expr::Cons(es, x0));
    let res = bw.prim1(p("sensitize"), pair);
    let binds = without_dead_tag_ops(bw.binds, &res);
    let bp = Lambda { param: s, body: Block { binds, result: res } };
    let name = format!("backpropagator of {}", g.display_name(i));
    let bpg = Group::new(vec![], vec![bp], vec![Some(name.into())], vec![span], Origin::Source);
    let bpv = fresh_var("bp");
    out.push(Bind::Let(bpv, Expr::Lambda(bpg)));
    let o = fresh_var("out");
    out.push(Bind::Let(o, Expr::Cons(r, Atom::Var(bpv))));
    Atom::Var(o)
}

/// The bindings of a reverse phase less those of `zero`, `*j-inverse` and
/// `unsensitize` whose value nothing reads (as where the result's sensitivity
/// goes on, still tagged, to the backpropagator of the call that made it). An
/// `unsensitize` stays where its argument is read nowhere else, so a
/// backpropagator given something that is not a sensitivity still reports it.
fn without_dead_tag_ops(binds: Vec<Bind>, result: &Atom) -> Vec<Bind> {
    let (unsensitize, droppable) = (p("unsensitize"), [p("zero"), p("*j-inverse")]);
    let mut used = FxHashSet::default();
    block_free_vars(&Block { binds: vec![], result: result.clone() }, &mut FxHashSet::default(), &mut used);
    let mut kept = Vec::with_capacity(binds.len());
    for b in binds.into_iter().rev() {
        if let Bind::Let(x, Expr::Prim(pid, args, _)) = &b {
            let read_elsewhere = matches!(args, Args::One(Atom::Var(a)) if used.contains(a));
            if !used.contains(x) && (droppable.contains(pid) || (*pid == unsensitize && read_elsewhere)) {
                continue;
            }
        }
        let mut one = Block { binds: vec![b], result: Atom::Const(crate::value::Value::Nil) };
        block_free_vars(&one, &mut FxHashSet::default(), &mut used);
        kept.append(&mut one.binds);
    }
    kept.reverse();
    kept
}

fn var_atoms(vs: &[VarId]) -> Vec<Atom> {
    vs.iter().map(|v| Atom::Var(*v)).collect()
}

/// Emits the forward phase of a block and records what the reverse phase needs.
fn forward_block(l: &mut Lifter, b: &Block, out: &mut Vec<Bind>, tape: &mut Vec<Rec>) -> Result<Atom> {
    forward_binds(l, &b.binds, out, tape)?;
    l.atom(&b.result)
}

/// [`forward_block`] of bindings alone.
fn forward_binds(l: &mut Lifter, binds: &[Bind], out: &mut Vec<Bind>, tape: &mut Vec<Rec>) -> Result<()> {
    for bind in binds {
        match bind {
            Bind::Let(x, e) => match e {
                Expr::Atom(a) => {
                    out.push(Bind::Let(*x, Expr::Atom(l.atom(a)?)));
                    tape.push(Rec::Copy { x: *x, a: a.clone() });
                }
                Expr::App(_, args, s) | Expr::Prim(_, args, s) => {
                    let (fl, f0) = match e {
                        Expr::Prim(pid, _, _) => (l.prim(*pid)?, Atom::Const(crate::value::Value::Nil)),
                        _ => (l.atom(f_of(e))?, f_of(e).clone()),
                    };
                    let pair = fresh_var("r");
                    let bp = fresh_var("bp");
                    out.push(Bind::Let(pair, Expr::App(fl, l.args(args)?, *s)));
                    out.push(Bind::Uncons(*x, bp, Atom::Var(pair), *s));
                    tape.push(Rec::Call { x: *x, bp, f: f0, args: args.clone(), s: *s });
                }
                Expr::Cons(a, d) => {
                    out.push(Bind::Let(*x, Expr::Cons(l.atom(a)?, l.atom(d)?)));
                    tape.push(Rec::Cons { x: *x, a: a.clone(), d: d.clone() });
                }
                Expr::Lambda(g) => {
                    out.push(Bind::Let(*x, Expr::Lambda(l.group(g))));
                    tape.push(Rec::Captures { x: *x, caps: var_atoms(&g.free) });
                }
                Expr::MakeEnvSens(g, i, xs) => {
                    let lx = xs.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
                    out.push(Bind::Let(*x, Expr::MakeEnvSens(l.group(g), *i, lx)));
                    tape.push(Rec::Captures { x: *x, caps: xs.clone() });
                }
                Expr::MakeEnvSensLike(like, xs) => {
                    let lx = xs.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
                    out.push(Bind::Let(*x, Expr::MakeEnvSensLike(l.atom(like)?, lx)));
                    tape.push(Rec::Captures { x: *x, caps: xs.clone() });
                }
                Expr::If(c, t, f) => {
                    let vars = branch_vars(&mut l.branch_vars, e).to_vec();
                    let tb = branch(l, t, &vars)?;
                    let fb = branch(l, f, &vars)?;
                    let pair = fresh_var("r");
                    let bp = fresh_var("bp");
                    out.push(Bind::Let(pair, Expr::If(l.atom(c)?, tb, fb)));
                    out.push(Bind::Uncons(*x, bp, Atom::Var(pair), Span::default()));
                    tape.push(Rec::If { x: *x, bp, vars });
                }
            },
            Bind::Uncons(x, y, a, s) => {
                out.push(Bind::Uncons(*x, *y, l.atom(a)?, *s));
                tape.push(Rec::Uncons { x: *x, y: *y, a: a.clone() });
            }
            Bind::Check(c, a, s) => out.push(Bind::Check(c.clone(), l.atom(a)?, *s)),
            Bind::Letrec(names, g) => {
                out.push(Bind::Letrec(names.clone(), l.group(g)));
                tape.push(Rec::Letrec { names: names.clone(), caps: g.free.clone() });
            }
            Bind::EnvSens(xs, a) => {
                out.push(Bind::EnvSens(xs.clone(), l.atom(a)?));
                tape.push(Rec::EnvSens { xs: xs.clone(), a: a.clone() });
            }
        }
    }
    Ok(())
}

/// The variables either branch of conditional `e` uses (free in them), sorted;
/// remembered for `e` and for the conditionals nested in its branches, so a
/// nest of conditionals costs time linear in its size.
fn branch_vars(memo: &mut FxHashMap<usize, Rc<[VarId]>>, e: &Expr) -> Rc<[VarId]> {
    let key = e as *const Expr as usize;
    if let Some(v) = memo.get(&key) {
        return v.clone();
    }
    let Expr::If(_, t, f) = e else { return Rc::from(vec![]) };
    let mut free = FxHashSet::default();
    crate::stack::grow(|| {
        for b in [t, f] {
            block_vars(memo, b, &mut free);
        }
    });
    let mut vars: Vec<VarId> = free.into_iter().collect();
    vars.sort_unstable();
    let vars: Rc<[VarId]> = Rc::from(vars);
    memo.insert(key, vars.clone());
    vars
}

/// Adds the variables free in `b` to `out`, taking those of its conditionals'
/// branches from [`branch_vars`].
fn block_vars(memo: &mut FxHashMap<usize, Rc<[VarId]>>, b: &Block, out: &mut FxHashSet<VarId>) {
    let mut bound = FxHashSet::default();
    for bind in &b.binds {
        match bind {
            Bind::Let(x, e @ Expr::If(c, _, _)) => {
                let one = Block { binds: vec![], result: c.clone() };
                block_free_vars(&one, &mut bound, out);
                for v in branch_vars(memo, e).iter() {
                    if !bound.contains(v) {
                        out.insert(*v);
                    }
                }
                bound.insert(*x);
            }
            _ => {
                let one = Block { binds: vec![bind.clone()], result: Atom::Const(crate::value::Value::Nil) };
                block_free_vars(&one, &mut bound, out);
            }
        }
    }
    let one = Block { binds: vec![], result: b.result.clone() };
    block_free_vars(&one, &mut bound, out);
}

fn f_of(e: &Expr) -> &Atom {
    match e {
        Expr::App(f, _, _) => f,
        _ => unreachable!(),
    }
}

/// A branch of a conditional: its forward phase, returning its result paired with
/// a backpropagator that maps the result's sensitivity to the list of
/// sensitivities of `vars` (the variables either branch uses).
fn branch(l: &mut Lifter, b: &Block, vars: &[VarId]) -> Result<Block> {
    crate::stack::grow(|| branch_here(l, b, vars))
}

fn branch_here(l: &mut Lifter, b: &Block, vars: &[VarId]) -> Result<Block> {
    let mut out = Vec::new();
    let mut tape = Vec::new();
    let r = forward_block(l, b, &mut out, &mut tape)?;
    let ybar = fresh_var("s");
    let mut bw = Backward::default();
    bw.acc_atom(&b.result, Atom::Var(ybar));
    bw.replay(&tape);
    let mut list = Atom::Const(crate::value::Value::Nil);
    for v in vars.iter().rev() {
        let s = bw.get(*v);
        list = bw.bind(Expr::Cons(s, list));
    }
    let bp = Lambda { param: ybar, body: Block { binds: bw.binds, result: list } };
    let g = Group::new(
        vec![],
        vec![bp],
        vec![Some("branch backpropagator".into())],
        vec![Span::default()],
        Origin::Source,
    );
    let bpv = fresh_var("bp");
    out.push(Bind::Let(bpv, Expr::Lambda(g)));
    let res = fresh_var("r");
    out.push(Bind::Let(res, Expr::Cons(r, Atom::Var(bpv))));
    Ok(Block { binds: out, result: Atom::Var(res) })
}

/// Builds a reverse phase: bindings plus the current sensitivity of each variable.
#[derive(Default)]
struct Backward {
    binds: Vec<Bind>,
    acc: FxHashMap<VarId, Atom>,
    /// Variables bound to `(unsensitize a)`, so `(sensitize x)` of them is just `a`.
    unsensitized: FxHashMap<VarId, Atom>,
}

impl Backward {
    fn bind(&mut self, e: Expr) -> Atom {
        let t = fresh_var("sens");
        self.binds.push(Bind::Let(t, e));
        Atom::Var(t)
    }

    fn prim1(&mut self, pid: PrimId, a: Atom) -> Atom {
        if pid == p("sensitize") {
            if let Atom::Var(v) = &a {
                if let Some(orig) = self.unsensitized.get(v) {
                    return orig.clone();
                }
            }
        }
        let r = self.bind(Expr::Prim(pid, Args::One(a.clone()), Span::default()));
        if pid == p("unsensitize") {
            if let Atom::Var(v) = &r {
                self.unsensitized.insert(*v, a);
            }
        }
        r
    }

    /// Adds a contribution to a variable's sensitivity.
    fn add(&mut self, v: VarId, s: Atom) {
        match self.acc.remove(&v) {
            None => {
                self.acc.insert(v, s);
            }
            Some(old) => {
                let t = self.bind(Expr::Prim(p("plus"), Args::Tuple(vec![old, s]), Span::default()));
                self.acc.insert(v, t);
            }
        }
    }

    /// Contributions to constants and globals are dropped.
    fn acc_atom(&mut self, a: &Atom, s: Atom) {
        if let Atom::Var(v) = a {
            self.add(*v, s);
        }
    }

    /// The sensitivity of a variable, a zero shaped like its value if none arrived.
    fn get(&mut self, v: VarId) -> Atom {
        if let Some(a) = self.acc.get(&v) {
            return a.clone();
        }
        // (*j-inverse (zero x)) = (zero (*j-inverse x)), and is O(1) with lazy zeros.
        let z = self.prim1(p("zero"), Atom::Var(v));
        let z = self.prim1(p("*j-inverse"), z);
        self.acc.insert(v, z.clone());
        z
    }

    fn uncons(&mut self, a: Atom) -> (Atom, Atom) {
        let (x, y) = (fresh_var("sens"), fresh_var("sens"));
        self.binds.push(Bind::Uncons(x, y, a, Span::default()));
        (Atom::Var(x), Atom::Var(y))
    }

    fn env_sens(&mut self, s: Atom, caps: &[Atom]) {
        let tmps: Vec<VarId> = caps.iter().map(|_| fresh_var("env")).collect();
        self.binds.push(Bind::EnvSens(tmps.clone(), s));
        for (c, t) in caps.iter().zip(tmps) {
            self.acc_atom(c, Atom::Var(t));
        }
    }

    fn replay(&mut self, tape: &[Rec]) {
        let is_var = |a: &Atom| matches!(a, Atom::Var(_));
        for rec in tape.iter().rev() {
            match rec {
                Rec::Copy { x, a } => {
                    if let Some(s) = self.acc.get(x).cloned() {
                        self.acc_atom(a, s);
                    }
                }
                Rec::Call { x, bp, f, args, s: site } => {
                    let Some(s) = self.acc.get(x).cloned() else { continue };
                    let args_vars = match args {
                        Args::One(a) => is_var(a),
                        Args::Tuple(xs) => xs.iter().any(is_var),
                    };
                    if !is_var(f) && !args_vars {
                        continue;
                    }
                    let s1 = self.prim1(p("sensitize"), s);
                    let r = self.bind(Expr::App(Atom::Var(*bp), Args::One(s1), *site));
                    let r2 = self.prim1(p("unsensitize"), r);
                    let (fb, ab) = self.uncons(r2);
                    self.acc_atom(f, fb);
                    match args {
                        Args::One(a) => self.acc_atom(a, ab),
                        Args::Tuple(xs) => {
                            let mut cur = ab;
                            for (k, a) in xs.iter().enumerate() {
                                if k + 1 == xs.len() {
                                    self.acc_atom(a, cur.clone());
                                } else {
                                    if !xs[k..].iter().any(is_var) {
                                        break;
                                    }
                                    let (h, t) = self.uncons(cur.clone());
                                    self.acc_atom(a, h);
                                    cur = t;
                                }
                            }
                        }
                    }
                }
                Rec::Cons { x, a, d } => {
                    let Some(s) = self.acc.get(x).cloned() else { continue };
                    if is_var(a) || is_var(d) {
                        let (sa, sd) = self.uncons(s);
                        self.acc_atom(a, sa);
                        self.acc_atom(d, sd);
                    }
                }
                Rec::Captures { x, caps } => {
                    let Some(s) = self.acc.get(x).cloned() else { continue };
                    if caps.iter().any(is_var) {
                        self.env_sens(s, caps);
                    }
                }
                Rec::Letrec { names, caps } => {
                    for n in names {
                        if let Some(s) = self.acc.get(n).cloned() {
                            if !caps.is_empty() {
                                self.env_sens(s, &var_atoms(caps));
                            }
                        }
                    }
                }
                Rec::Uncons { x, y, a } => {
                    if is_var(a) && (self.acc.contains_key(x) || self.acc.contains_key(y)) {
                        let sx = self.get(*x);
                        let sy = self.get(*y);
                        let c = self.bind(Expr::Cons(sx, sy));
                        self.acc_atom(a, c);
                    }
                }
                Rec::EnvSens { xs, a } => {
                    if is_var(a) && xs.iter().any(|x| self.acc.contains_key(x)) {
                        let like = self.prim1(p("*j-inverse"), a.clone());
                        let comps: Vec<Atom> = xs.iter().map(|x| self.get(*x)).collect();
                        let s = self.bind(Expr::MakeEnvSensLike(like, comps));
                        self.acc_atom(a, s);
                    }
                }
                Rec::If { x, bp, vars } => {
                    let Some(s) = self.acc.get(x).cloned() else { continue };
                    if vars.is_empty() {
                        continue;
                    }
                    let mut cur = self.bind(Expr::App(Atom::Var(*bp), Args::One(s), Span::default()));
                    for v in vars {
                        let (h, t) = self.uncons(cur);
                        self.add(*v, h);
                        cur = t;
                    }
                }
            }
        }
    }
}
