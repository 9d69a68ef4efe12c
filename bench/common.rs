//! Helpers shared by the benchmarks that time compiled VLAD expressions
//! (included by each with `#[path = "common.rs"] mod common;`).

use std::rc::Rc;
use vlad::anf::Group;
use vlad::toplevel::Session;
use vlad::value::Value;

/// `s` with `defs` loaded and `call` compiled to a thunk: only running it is timed.
pub fn prepare(mut s: Session, defs: &str, call: &str) -> (Session, Rc<Group>) {
    if let Err(e) = s.run_text("bench.vlad", defs) {
        panic!("{}", e.render(&s.sources));
    }
    let thunk = s.compile_expr(call, "bench-call").unwrap_or_else(|e| panic!("{}", e.render(&s.sources)));
    (s, thunk)
}

/// Runs a prepared thunk.
pub fn run(s: &mut Session, thunk: &Rc<Group>) -> Value {
    match s.run_thunk(thunk) {
        Ok(v) => v,
        Err(e) => panic!("{}", e.render(&s.sources)),
    }
}
