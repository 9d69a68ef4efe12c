//! The forward transform of a closure group (what `bundle` does to code): the
//! same A-normal form with constants and globals lifted to bundles with zero
//! tangents, primitives replaced by their forward versions, and nested lambdas
//! transformed in turn. Values carry the tangents; the code barely changes.

use super::{ops, rules, transform_group};
use crate::anf::{Args, Atom, Bind, Block, Expr, Group, Kind, Lambda, VarId};
use crate::error::Result;
use crate::eval::Machine;
use std::rc::Rc;

/// Maps atoms, primitives and nested groups for a transform that leaves the
/// structure of the code alone (forward mode, and the forward phase of reverse mode).
pub struct Lifter<'m> {
    pub m: &'m mut Machine,
    pub k: Kind,
    /// The variables each conditional's branches use, sorted (see
    /// `reverse::branch_vars`), by the conditional's address.
    pub branch_vars: rustc_hash::FxHashMap<usize, Rc<[VarId]>>,
}

impl Lifter<'_> {
    pub fn atom(&mut self, a: &Atom) -> Result<Atom> {
        Ok(match a {
            Atom::Var(v) => Atom::Var(*v),
            Atom::Global(g) => {
                let v = self.m.global(*g)?;
                Atom::Const(ops::lift(self.m, self.k, &v)?)
            }
            Atom::Const(c) => Atom::Const(ops::lift(self.m, self.k, c)?),
        })
    }

    pub fn args(&mut self, a: &Args) -> Result<Args> {
        Ok(match a {
            Args::One(x) => Args::One(self.atom(x)?),
            Args::Tuple(xs) => Args::Tuple(xs.iter().map(|x| self.atom(x)).collect::<Result<_>>()?),
        })
    }

    pub fn group(&self, g: &Rc<Group>) -> Rc<Group> {
        transform_group(g, self.k)
    }

    pub fn prim(&mut self, p: crate::prims::PrimId) -> Result<Atom> {
        Ok(Atom::Const(rules::prim_rule(self.m, p, self.k)?))
    }
}

/// The members of the forward transform of `g`.
pub fn transform(m: &mut Machine, g: &Rc<Group>) -> Result<Vec<Lambda>> {
    let members = m.group_members(g)?;
    let mut l = Lifter { m, k: Kind::F, branch_vars: Default::default() };
    members.iter().map(|lam| Ok(Lambda { param: lam.param, body: block(&mut l, &lam.body)? })).collect()
}

fn block(l: &mut Lifter, b: &Block) -> Result<Block> {
    crate::stack::grow(|| block_here(l, b))
}

fn block_here(l: &mut Lifter, b: &Block) -> Result<Block> {
    let mut binds = Vec::with_capacity(b.binds.len());
    for bind in &b.binds {
        binds.push(match bind {
            Bind::Let(x, e) => Bind::Let(*x, expr(l, e)?),
            Bind::Uncons(x, y, a, s) => Bind::Uncons(*x, *y, l.atom(a)?, *s),
            Bind::Check(c, a, s) => Bind::Check(c.clone(), l.atom(a)?, *s),
            Bind::Letrec(names, g) => Bind::Letrec(names.clone(), l.group(g)),
            Bind::EnvSens(xs, a) => Bind::EnvSens(xs.clone(), l.atom(a)?),
        });
    }
    Ok(Block { binds, result: l.atom(&b.result)? })
}

fn expr(l: &mut Lifter, e: &Expr) -> Result<Expr> {
    Ok(match e {
        Expr::Atom(a) => Expr::Atom(l.atom(a)?),
        Expr::App(f, args, s) => Expr::App(l.atom(f)?, l.args(args)?, *s),
        Expr::Prim(p, args, s) => Expr::App(l.prim(*p)?, l.args(args)?, *s),
        Expr::Cons(a, d) => Expr::Cons(l.atom(a)?, l.atom(d)?),
        Expr::Lambda(g) => Expr::Lambda(l.group(g)),
        Expr::If(c, t, f) => Expr::If(l.atom(c)?, block(l, t)?, block(l, f)?),
        Expr::MakeEnvSens(g, i, xs) => {
            Expr::MakeEnvSens(l.group(g), *i, xs.iter().map(|x| l.atom(x)).collect::<Result<_>>()?)
        }
        Expr::MakeEnvSensLike(like, xs) => {
            Expr::MakeEnvSensLike(l.atom(like)?, xs.iter().map(|x| l.atom(x)).collect::<Result<_>>()?)
        }
    })
}
