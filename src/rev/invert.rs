//! Local, syntactic program inversion (Janus paper §2.3.3). Used to print the
//! inverse of a procedure (`show-inverse`, `vlad anf --inverse`); the executor
//! never builds inverses, it runs statements backward with a direction flag.

use super::syntax::{ProcDef, Stmt};

/// The inverse of a statement.
pub fn invert(s: &Stmt) -> Stmt {
    match s {
        Stmt::Update { op, place, rhs, span } => {
            Stmt::Update { op: op.inverse(), place: place.clone(), rhs: rhs.clone(), span: *span }
        }
        Stmt::Swap { .. } | Stmt::Skip(_) => s.clone(),
        Stmt::If { test, then, els, assert, span } => Stmt::If {
            test: assert.clone(),
            then: Box::new(invert(then)),
            els: Box::new(invert(els)),
            assert: test.clone(),
            span: *span,
        },
        Stmt::From { entry, body, step, until, span } => Stmt::From {
            entry: until.clone(),
            body: Box::new(invert(body)),
            step: Box::new(invert(step)),
            until: entry.clone(),
            span: *span,
        },
        Stmt::Local { var, init, body, fin, delocal_span, span } => Stmt::Local {
            var: var.clone(),
            init: fin.clone(),
            body: invert_seq(body),
            fin: init.clone(),
            delocal_span: *delocal_span,
            span: *span,
        },
        Stmt::Push { pop, x, stack, span } => {
            Stmt::Push { pop: !pop, x: x.clone(), stack: stack.clone(), span: *span }
        }
        Stmt::Call { uncall, callee, args, span } => {
            Stmt::Call { uncall: !uncall, callee: callee.clone(), args: args.clone(), span: *span }
        }
        Stmt::Begin(v, span) => Stmt::Begin(invert_seq(v), *span),
        Stmt::WithUncompute { compute, body, span } => {
            Stmt::WithUncompute { compute: compute.clone(), body: invert_seq(body), span: *span }
        }
    }
}

/// The inverse of a sequence: the inverted statements in reverse order.
pub fn invert_seq(v: &[Stmt]) -> Vec<Stmt> {
    v.iter().rev().map(invert).collect()
}

/// The inverse of a procedure (same name and parameters, inverted body).
pub fn invert_proc(def: &ProcDef) -> ProcDef {
    ProcDef { body: invert_seq(&def.body), ..def.clone() }
}
