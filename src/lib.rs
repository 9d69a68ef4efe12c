//! vlad: an interpreter for VLAD, the purely functional Scheme dialect with
//! first-class forward- and reverse-mode automatic differentiation.
//!
//! Pipeline: [`reader`] → [`expand`] → [`anf`] → [`resolve`] → [`eval`], with
//! [`ad`] transforming closure groups at run time. See ARCHITECTURE.md.

pub mod ad;
pub mod alloc;
pub mod anf;
pub mod check;
pub mod cli;
pub mod datum;
pub mod error;
pub mod eval;
pub mod expand;
pub mod jit;
pub mod num;
pub mod prims;
pub mod print;
pub mod reader;
pub mod repl;
pub mod resolve;
pub mod rev;
pub mod show;
pub mod source;
pub mod stack;
pub mod suggest;
pub mod toplevel;
pub mod value;
pub mod vec;
pub mod watchdog;
