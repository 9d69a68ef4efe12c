//! First-class AD (paper 003, AD.md): the value-level AD primitives ([`ops`]),
//! the forward ([`forward`]) and reverse ([`reverse`]) transforms of a closure
//! group's A-normal form, and the primitives' derivative rules ([`rules`]).
//! The prelude's `jvp` and `vjp` are defined by those transforms and, called
//! directly, run on dual numbers and tapes ([`tape`]) where that gives the same
//! result faster.
//!
//! A transformed group is created (and cached on its source group) the moment
//! a closure is transformed; its code is computed on first call.

pub mod forward;
pub mod native;
pub mod native_rf;
pub mod native_rr;
pub mod ops;
pub mod reverse;
pub mod rules;
pub mod tape;

use crate::anf::{Group, Kind, Lambda, Origin};
use crate::error::{Error, Result};
use crate::eval::Machine;
use std::rc::Rc;

/// The transform `k` of a group, cached: computed once per group and kind.
pub fn transform_group(g: &Rc<Group>, k: Kind) -> Rc<Group> {
    if let Some(t) = &g.transforms.borrow()[k as usize] {
        return t.clone();
    }
    let t = Group::lazy(g, Origin::Transformed(k, g.clone()));
    g.transforms.borrow_mut()[k as usize] = Some(t.clone());
    let native = match k {
        Kind::F => g.native.get().and_then(native::forward_of),
        Kind::R => g.native.get().and_then(native::reverse_of),
        _ => None,
    };
    if let Some(n) = native {
        let _ = t.native.set(n);
    }
    t
}

/// Computes the A-normal form of a transformed group's members.
pub fn compute_members(m: &mut Machine, g: &Rc<Group>) -> Result<Vec<Lambda>> {
    let members = match &g.origin {
        Origin::Transformed(Kind::F, parent) => {
            let parent = parent.clone();
            forward::transform(m, &parent)?
        }
        Origin::Transformed(Kind::R, parent) => {
            // reverse over forward of a scalar primitive: its second-order rule
            let rf = match parent.origin {
                Origin::PrimRule(Kind::F, p) => rules::rf_source(p).map(|src| (p, src)),
                _ => None,
            };
            match rf {
                Some((p, src)) => vec![rules::compile_rule(p, &src)?.0],
                None => {
                    let parent = parent.clone();
                    reverse::transform(m, &parent)?
                }
            }
        }
        _ => return Err(Error::runtime(None, format!("cannot run {}: it has no code", g.display_name(0)))),
    };
    debug_assert_eq!(
        crate::anf::group_free_vars(&g.names, &members),
        g.free,
        "transform changed the captured variables"
    );
    Ok(members)
}
