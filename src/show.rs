//! Printing A-normal form (for `vlad anf`, the REPL's `:anf`, and closures).

use crate::anf::{var_name, Args, Atom, Bind, Block, Expr, Group, Lambda, Origin};
use crate::value::{InstRc, Value};
use std::cell::RefCell;
use std::fmt::Write;
use std::rc::Rc;

thread_local! {
    static GLOBAL_NAMES: RefCell<Vec<Rc<str>>> = const { RefCell::new(Vec::new()) };
}

/// Records the display name of a global slot.
pub fn set_global_name(id: u32, name: Rc<str>) {
    GLOBAL_NAMES.with(|g| {
        let mut g = g.borrow_mut();
        if g.len() <= id as usize {
            g.resize(id as usize + 1, "?".into());
        }
        g[id as usize] = name;
    })
}

fn global_name(id: u32) -> Rc<str> {
    GLOBAL_NAMES.with(|g| g.borrow().get(id as usize).cloned().unwrap_or_else(|| "?".into()))
}

pub fn write_atom(out: &mut String, a: &Atom) {
    match a {
        Atom::Var(v) => out.push_str(&var_name(*v)),
        Atom::Global(g) => out.push_str(&global_name(*g)),
        Atom::Const(c @ Value::Lazy(_)) => match crate::ad::ops::hnf_detached(c) {
            Ok(h) => write_atom(out, &Atom::Const(h)),
            Err(_) => out.push_str("#<lazy value>"),
        },
        Atom::Const(c) => match c {
            // By name: a transformed procedure's code may contain the procedure itself.
            Value::Closure(inst, i) => write_closure_name(out, &inst.group, *i as usize),
            Value::Nil | Value::Pair(_) => {
                out.push('\'');
                crate::print::write_value(out, c)
            }
            _ => crate::print::write_value(out, c),
        },
    }
}

fn write_args(out: &mut String, a: &Args) {
    match a {
        Args::One(x) => {
            out.push(' ');
            write_atom(out, x)
        }
        Args::Tuple(xs) => {
            for x in xs {
                out.push(' ');
                write_atom(out, x);
            }
        }
    }
}

fn write_expr(out: &mut String, e: &Expr, depth: usize) {
    match e {
        Expr::Atom(a) => write_atom(out, a),
        Expr::App(f, args, _) => {
            out.push('(');
            write_atom(out, f);
            // (the forward or reverse version of `error`'s or `write`'s
            // primitive, on its text's index, tagged by the transform)
            let rule = match f {
                Atom::Const(Value::Closure(inst, _)) => rule_prim(&inst.group),
                _ => None,
            };
            if !rule.is_some_and(|p| write_text_args(out, p, args)) {
                write_args(out, args);
            }
            out.push(')');
        }
        Expr::Prim(p, args, _) => {
            out.push('(');
            out.push_str(crate::prims::prim(*p).name);
            if !write_text_args(out, *p, args) {
                write_args(out, args);
            }
            out.push(')');
        }
        Expr::Cons(a, d) => {
            out.push_str("(cons ");
            write_atom(out, a);
            out.push(' ');
            write_atom(out, d);
            out.push(')');
        }
        Expr::Lambda(g) => write_group_member(out, g, 0, depth),
        Expr::If(c, t, f) => {
            out.push_str("(if ");
            write_atom(out, c);
            newline(out, depth + 1);
            write_block(out, t, depth + 1);
            newline(out, depth + 1);
            write_block(out, f, depth + 1);
            out.push(')');
        }
        Expr::MakeEnvSensLike(l, xs) => {
            out.push_str("(environment-sensitivity-like ");
            write_atom(out, l);
            for x in xs {
                out.push(' ');
                write_atom(out, x);
            }
            out.push(')');
        }
        Expr::MakeEnvSens(g, i, xs) => {
            let _ = write!(out, "(environment-sensitivity {}", g.display_name(*i as usize));
            for x in xs {
                out.push(' ');
                write_atom(out, x);
            }
            out.push(')');
        }
    }
}

/// Indentation stops growing at this depth, so that printing deeply nested code
/// takes space and time linear in its size.
const MAX_INDENT: usize = 32;

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth.min(MAX_INDENT) {
        out.push_str("  ");
    }
}

/// A block as `(let* (bindings) result)`, or just the result.
pub fn write_block(out: &mut String, b: &Block, depth: usize) {
    if b.binds.is_empty() {
        write_atom(out, &b.result);
        return;
    }
    out.push_str("(let* (");
    for (i, bind) in b.binds.iter().enumerate() {
        if i > 0 {
            newline(out, depth + 3);
        }
        out.push('(');
        match bind {
            Bind::Let(x, e) => {
                out.push_str(&var_name(*x));
                out.push(' ');
                write_expr(out, e, depth + 3);
            }
            Bind::Uncons(x, y, a, _) => {
                let _ = write!(out, "(cons {} {}) ", var_name(*x), var_name(*y));
                write_atom(out, a);
            }
            Bind::Check(c, a, _) => {
                write_atom(out, &Atom::Const(c.clone()));
                out.push(' ');
                write_atom(out, a);
            }
            Bind::Letrec(names, g) => {
                out.push('(');
                for (i, n) in names.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(&var_name(*n));
                }
                out.push_str(") (letrec");
                for (i, name) in names.iter().enumerate() {
                    newline(out, depth + 4);
                    let _ = write!(out, "({} ", var_name(*name));
                    write_group_member(out, g, i, depth + 5);
                    out.push(')');
                }
                out.push(')');
            }
            Bind::EnvSens(xs, a) => {
                out.push_str("(environment-sensitivity");
                for x in xs {
                    out.push(' ');
                    out.push_str(&var_name(*x));
                }
                out.push_str(") ");
                write_atom(out, a);
            }
        }
        out.push(')');
    }
    out.push(')');
    newline(out, depth + 1);
    write_atom(out, &b.result);
    out.push(')');
}

pub fn write_lambda(out: &mut String, l: &Lambda, depth: usize) {
    let _ = write!(out, "(lambda ({})", var_name(l.param));
    newline(out, depth + 1);
    write_block(out, &l.body, depth + 1);
    out.push(')');
}

/// Member `i` of a group, or a description if its code is not computed yet.
pub fn write_group_member(out: &mut String, g: &Group, i: usize, depth: usize) {
    match g.members.get() {
        Some(ms) => write_lambda(out, &ms[i], depth),
        None => match &g.origin {
            Origin::Transformed(k, parent) => {
                let _ = write!(out, "({} ", k.name());
                write_group_member(out, parent, i, depth);
                out.push(')');
            }
            _ => out.push_str("(lambda ...)"),
        },
    }
}

/// The primitive whose derivative rule `g` is, through any transforms of it
/// (`(forward (reverse %error))`).
fn rule_prim(g: &Group) -> Option<crate::prims::PrimId> {
    match &g.origin {
        Origin::PrimRule(_, p) => Some(*p),
        Origin::Transformed(_, parent) => rule_prim(parent),
        Origin::Source => None,
    }
}

/// The arguments of a call of the `error` form's or a labelled `write`'s
/// primitive `p` (or of its forward or reverse version) with the text it
/// prints in place of the text's index (the index is the code's constant,
/// tagged in transformed code); false (nothing written) for other calls.
fn write_text_args(out: &mut String, p: crate::prims::PrimId, args: &Args) -> bool {
    let name = crate::prims::prim(p).name;
    let (k, rest) = match args {
        Args::Tuple(xs) if matches!(name, "%error" | "%write-label" | "%write-real-label") => match &xs[..] {
            [Atom::Const(k), rest] => (k, Some(rest)),
            _ => return false,
        },
        Args::One(Atom::Const(k)) if name == "%write-text" => (k, None),
        _ => return false,
    };
    let Some(msg) = crate::prims::message(crate::prims::int_index(k)) else { return false };
    let _ = write!(out, " {:?}", &*msg);
    if let Some(rest) = rest {
        out.push(' ');
        write_atom(out, rest);
    }
    true
}

/// A closure's name with its transforms, e.g. `(reverse walk)`.
fn write_closure_name(out: &mut String, g: &Group, i: usize) {
    match &g.origin {
        Origin::PrimRule(k, p) => {
            let _ = write!(out, "({} {})", k.name(), crate::prims::prim(*p).name);
        }
        Origin::Transformed(k, parent) => {
            let _ = write!(out, "({} ", k.name());
            write_closure_name(out, parent, i);
            out.push(')');
        }
        Origin::Source => out.push_str(&g.display_name(i)),
    }
}

pub fn write_closure(out: &mut String, inst: &InstRc, i: usize) {
    if let Origin::PrimRule(k, p) = &inst.group.origin {
        let _ = write!(out, "({} {})", k.name(), crate::prims::prim(*p).name);
        return;
    }
    write_group_member(out, &inst.group, i, 0);
}

/// [`write_closure`] of the closure a transformed one is a transform of
/// (through any number of transforms): its source, or its primitive's name.
pub fn write_closure_source(out: &mut String, inst: &InstRc, i: usize) {
    let mut g = &inst.group;
    while let Origin::Transformed(_, parent) = &g.origin {
        g = parent;
    }
    match &g.origin {
        Origin::PrimRule(_, p) => out.push_str(crate::prims::prim(*p).name),
        _ => write_group_member(out, g, i, 0),
    }
}

/// A whole lambda as text.
pub fn lambda_to_string(l: &Lambda) -> String {
    let mut s = String::new();
    write_lambda(&mut s, l, 0);
    s
}

pub fn block_to_string(b: &Block) -> String {
    let mut s = String::new();
    write_block(&mut s, b, 0);
    s
}
