//! AD test suite (issue #3): derivatives of every primitive, random programs
//! checked against finite differences and the other mode, perturbation
//! confusion, nesting in every combination of modes, Hessians, third
//! derivatives, recursion and higher-order procedures, the cheap-gradient
//! operation count, and the AD primitives' behaviour on values.

mod common;
mod lists;
mod meter;
mod nesting;
mod prims;
mod random;
mod rng;
mod structure;
mod tape;
