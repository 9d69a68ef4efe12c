//! The interactive REPL (placeholder until the REPL issue): reads expressions
//! from standard input and prints their values.

use crate::cli::Opts;
use crate::toplevel::{Session, Step};
use std::io::{Read, Write};

/// Runs a non-interactive read-eval-print loop over standard input.
pub fn run(opts: &Opts) -> i32 {
    let mut s = Session::new();
    s.include_dirs = opts.include.clone();
    let mut text = String::new();
    if std::io::stdin().read_to_string(&mut text).is_err() {
        return 1;
    }
    let items = match s.read_items("<stdin>", &text, std::env::current_dir().ok().as_deref(), &mut Vec::new())
    {
        Ok(i) => i,
        Err(e) => {
            eprint!("{}", e.render(&s.sources));
            return 1;
        }
    };
    let unit = match s.compile(items) {
        Ok(u) => u,
        Err(e) => {
            eprint!("{}", e.render(&s.sources));
            return 1;
        }
    };
    let mut code = 0;
    for step in unit.steps {
        let r = match step {
            Step::Define(g, _) => s.m.global(g).map(|_| ()),
            Step::Expr { thunk, .. } => s.run_thunk(&thunk).map(|v| {
                let text = crate::print::to_string(&v);
                let _ = writeln!(s.m.out, "{}", text);
            }),
        };
        if let Err(e) = r {
            let _ = s.m.out.flush();
            eprint!("{}", e.render(&s.sources));
            code = 1;
        }
    }
    let _ = s.m.out.flush();
    code
}
