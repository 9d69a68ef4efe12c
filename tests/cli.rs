//! The `vlad` binary: error reports (location, wording, call trace, exit
//! status), `vlad test` output, `vlad run` output and options, `vlad anf`.
//! Programs are written to a fresh directory and run from there, so file names
//! in messages are the relative names given on the command line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A scratch directory, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "vlad-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn file(&self, name: &str, text: &str) -> &Dir {
        let p = self.0.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<std::process::Output> for Out {
    fn from(o: std::process::Output) -> Out {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

fn vlad(dir: &Dir, args: &[&str]) -> Out {
    Command::new(env!("CARGO_BIN_EXE_vlad")).args(args).current_dir(dir.path()).output().unwrap().into()
}

/// Runs `vlad ARGS` in `dir` from a shell that first runs `setup` (which
/// must succeed).
fn vlad_after(dir: &Dir, setup: &str, args: &[&str]) -> Out {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{setup} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_vlad"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap()
        .into()
}

/// Runs `bad.vlad` holding `src` with `vlad run`; it must fail without printing anything.
fn run_bad(src: &str, extra: &[&str]) -> Out {
    let d = Dir::new();
    d.file("bad.vlad", src);
    let mut args = vec!["run", "bad.vlad"];
    args.extend(extra);
    let o = vlad(&d, &args);
    assert_ne!(o.code, 0, "{src}: exit status 0\n{}", o.stderr);
    o
}

fn assert_stderr(o: &Out, expected: &str) {
    assert_eq!(o.stderr, expected, "\nstdout: {}", o.stdout);
}

// ---- errors found before anything runs ----

#[test]
fn unbound_variable() {
    // reported before the first line runs: nothing is printed
    let o = run_bad("(write 1)\n(define (f x) (+ x y))\n(f 1)\n", &[]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert_stderr(
        &o,
        "bad.vlad:2:20: error: unbound variable `y`\n  | (define (f x) (+ x y))\n  |                    ^\n",
    );
}

#[test]
fn an_expression_sees_only_earlier_definitions() {
    let o = run_bad("(f 1)\n(define (f x) x)\n", &[]);
    assert!(o.stderr.starts_with("bad.vlad:1:2: error: unbound variable `f`\n"), "{}", o.stderr);
}

#[test]
fn an_unbound_name_near_a_bound_one_gets_a_suggestion() {
    // a prelude procedure, a local, a definition of the file, a keyword
    for (src, hint) in [
        ("(lenght (list 1 2))\n", "unbound variable `lenght` (did you mean `length`?)"),
        ("(let ((alpha 1)) (+ alph 1))\n", "unbound variable `alph` (did you mean `alpha`?)"),
        ("(define (square-sum x y) 1)\n(sqaure-sum 1 2)\n", "(did you mean `square-sum`?)"),
        ("((lamda (x) x) 1)\n", "unbound variable `lamda` (did you mean `lambda`?)"),
        ("((gradient-r (lambda (x) x)) 1.0)\n", "(did you mean `gradient-R`?)"),
    ] {
        let o = run_bad(src, &[]);
        assert!(o.stderr.contains(hint), "{src}: {}", o.stderr);
    }
    // a short name gets none (`y` is not a misspelling of `x`)
    let o = run_bad("(define (f x) (+ x y))\n", &[]);
    assert!(o.stderr.contains("unbound variable `y`\n"), "{}", o.stderr);
}

#[test]
fn a_scheme_form_vlad_lacks_or_a_malformed_number_says_what_to_use() {
    for (src, at, hint) in [
        ("(define x 1)\n(set! x 2)\n", "bad.vlad:2:2", "unbound variable `set!` (VLAD has no mutation"),
        ("(begin 1 2)\n", "bad.vlad:1:2", "unbound variable `begin` (a body is one expression"),
        ("(foldl + 0 (list 1 2))\n", "bad.vlad:1:2", "unbound variable `foldl` (VLAD folds with `fold-left`"),
        ("(expt 2 3)\n", "bad.vlad:1:2", "unbound variable `expt` (VLAD has no power primitive"),
        ("(+ 1/0 1)\n", "bad.vlad:1:4", "unbound variable `1/0` (not a number: a rational's denominator"),
        (
            "(define (f x) `(1 ,x))\n",
            "bad.vlad:1:15",
            "unbound variable `quasiquote` (VLAD has no quasiquote",
        ),
        ("(case 1 ((1) 2) (else 3))\n", "bad.vlad:1:2", "`case` is not VLAD syntax: use `cond`"),
        (
            "(define (f x) (assert (> x 0)))\n",
            "bad.vlad:1:16",
            "unbound variable `assert` (stop with a message by `(if ok value (error \"f: bad input\" x))`)",
        ),
    ] {
        let o = run_bad(src, &[]);
        assert!(o.stderr.starts_with(&format!("{at}: error: {hint}")), "{src}: {}", o.stderr);
    }
    // a definition of the same name is used as it is
    let d = Dir::new();
    d.file("ok.vlad", "(define (case x) (+ x 1))\n(case 1)\n(define (begin x) x)\n(begin 2)\n");
    let o = vlad(&d, &["ok.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "2\n2\n"), "{}", o.stderr);
}

#[test]
fn a_misspelt_name_in_a_reversible_procedure_gets_a_suggestion() {
    let fib = "(define-reversible (fib x1 x2 n)\n  (if-rev (= n 0) (begin-rev (+= x1 1) (+= x2 1))\n    \
               (begin-rev (-= n 1) (call fib x1 x2 n) (+= x1 x2) (swap x1 x2))\n    (= x1 x2)))\n(call fib 0 0 4)\n";
    for (from, to, hint) in [
        (
            "(+= x1 x2)",
            "(+= x1 x22)",
            "`x22` is not a variable of `fib`, a definition or a primitive (did you mean `x2`?)",
        ),
        (
            "(+= x1 x2)",
            "(+= x11 x2)",
            "`x11` is not a parameter of `fib` or a `local` in scope (did you mean `x1`?)",
        ),
        ("(call fib x1", "(call fibb x1", "(did you mean `fib`?)"),
    ] {
        let src = fib.replacen(from, to, 1);
        assert_ne!(src, fib);
        let o = run_bad(&src, &[]);
        assert!(o.stderr.contains(hint), "{src}: {}", o.stderr);
    }
}

#[test]
fn unbalanced_parentheses() {
    // line 1 would print, line 3 is malformed: nothing runs
    let o = run_bad("(write 1)\n(+ 1 2)\n(car (cons 1 2)))\n", &[]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert_stderr(&o, "bad.vlad:3:17: error: unexpected `)`\n  | (car (cons 1 2)))\n  |                 ^\n");
    let o = run_bad("(write 1)\n(+ 1\n   2\n", &[]);
    assert_eq!(o.stdout, "");
    assert_stderr(&o, "bad.vlad:2:1: error: unclosed list (missing `)`)\n  | (+ 1\n  | ^\n");
    let o = run_bad("(write 1)\n#| never closed\n", &[]);
    assert_eq!(o.stdout, "");
    assert!(o.stderr.starts_with("bad.vlad:2:1: error: unterminated block comment\n"), "{}", o.stderr);
}

#[test]
fn bad_syntax_is_reported_before_anything_runs() {
    let o = run_bad("(write 1)\n(if 1 2)\n", &[]);
    assert_eq!(o.stdout, "");
    assert_stderr(
        &o,
        "bad.vlad:2:1: error: `if` needs a test, a consequent and an alternative\n  | (if 1 2)\n  | ^\n",
    );
    let o = run_bad("(write 1)\n(define (f x)\n  (let ((y)) y))\n", &[]);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr.starts_with("bad.vlad:3:9: error: a binding is `(pattern expression)`\n"),
        "{}",
        o.stderr
    );
}

#[test]
fn duplicate_definition() {
    let o = run_bad("(write 1)\n(define (f x) x)\n(define x 3)\n(define (f y) y)\n", &[]);
    assert_eq!(o.stdout, "");
    assert_stderr(
        &o,
        "bad.vlad:4:10: error: `f` is defined twice; the first definition is at bad.vlad:2:10\n  | (define (f y) y)\n  |          ^\n",
    );
}

#[test]
fn duplicate_definition_across_an_include() {
    let d = Dir::new();
    d.file("main.vlad", "(include \"lib\")\n(define (helper) 2)\n")
        .file("lib.vlad", "\n(define (helper) 1)\n");
    let o = vlad(&d, &["main.vlad"]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "main.vlad:2:10: error: `helper` is defined twice; the first definition is at lib.vlad:2:10
  | (define (helper) 2)
  |          ^
",
    );
}

/// A file included twice (here once directly and once through another file) defines
/// its names twice; the message gave the same location for both definitions.
#[test]
fn a_file_included_twice_is_named_in_the_duplicate_definition_error() {
    let d = Dir::new();
    d.file("main.vlad", "(include \"lib\")\n(include \"other\")\n(helper)\n")
        .file("other.vlad", "(include \"lib\")\n")
        .file("lib.vlad", "\n(define (helper) 1)\n");
    let o = vlad(&d, &["main.vlad"]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "lib.vlad:2:10: error: `helper` is defined twice: lib.vlad is included twice \
         (each include splices the file in again)
  | (define (helper) 1)
  |          ^
",
    );
}

#[test]
fn include_not_found() {
    let o = run_bad("(write 1)\n(include \"nope\")\n", &[]);
    assert_eq!(o.stdout, "");
    assert_stderr(
        &o,
        "bad.vlad:2:1: error: include not found: \"nope\" (searched the including file's directory, -I directories, and the prelude)\n  | (include \"nope\")\n  | ^\n",
    );
}

#[test]
fn include_of_a_directory_says_so() {
    let d = Dir::new();
    d.file("main.vlad", "(include \"lib\")\n1\n").file("lib/x.vlad", "2\n");
    let o = vlad(&d, &["main.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""));
    // (the path as the including file's directory names it)
    assert_stderr(
        &o,
        "main.vlad:1:1: error: include not found: \"lib\" (lib is a directory; include names a .vlad file)\n  | (include \"lib\")\n  | ^\n",
    );
}

/// `(include "/dev/null")` said "include not found", though the file exists.
#[test]
fn include_of_a_device_says_so() {
    let o = run_bad("(write 1)\n(include \"/dev/null\")\n", &[]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""));
    assert_stderr(
        &o,
        "bad.vlad:2:1: error: include not found: \"/dev/null\" (/dev/null is a character device, not a regular file; include names a .vlad file)\n  | (include \"/dev/null\")\n  | ^\n",
    );
}

/// A NUL (or other control character) was read as part of a symbol, giving
/// "unbound variable" with the character invisible.
#[test]
fn a_control_character_in_source_is_a_syntax_error() {
    let o = run_bad("(write 1)\n(define (f x) (+ x\u{1}y))\n", &[]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""));
    assert_stderr(
        &o,
        "bad.vlad:2:19: error: unexpected control character U+0001 (allowed only in strings and comments)\n  | (define (f x) (+ x\u{2401}y))\n  |                   ^\n",
    );
}

#[test]
fn include_cycle() {
    let d = Dir::new();
    d.file("a.vlad", "(write 1)\n(include \"b\")\n").file("b.vlad", "\n  (include \"a.vlad\")\n");
    let o = vlad(&d, &["a.vlad"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr.starts_with(
            "b.vlad:2:3: error: include cycle: a.vlad includes b.vlad, which includes a.vlad again\n"
        ),
        "{}",
        o.stderr
    );
    d.file("self.vlad", "(include \"self\")\n");
    let o = vlad(&d, &["self.vlad"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.starts_with("self.vlad:1:1: error: include cycle: self.vlad includes itself\n"),
        "{}",
        o.stderr
    );
}

#[test]
fn missing_program_file() {
    let d = Dir::new();
    let o = vlad(&d, &["nonexistent.vlad"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("error: cannot read nonexistent.vlad: "), "{}", o.stderr);
}

/// A byte-order mark at the start of a file (some editors write one) was read
/// as a symbol: "unbound variable" with the name invisible.
#[test]
fn a_byte_order_mark_starting_a_file_is_skipped() {
    let d = Dir::new();
    d.file("lib.vlad", "\u{FEFF}(define (triple x) (* 3 x))\r\n");
    d.file("p.vlad", "\u{FEFF}(include \"lib\")\r\n(triple 2)\r\n(car 1)\r\n");
    let o = vlad(&d, &["p.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, "6\n"), "{}", o.stderr);
    // (columns count from the first character after the mark)
    assert!(o.stderr.starts_with("p.vlad:3:1: error: pattern mismatch"), "{}", o.stderr);
}

#[test]
fn a_misspelt_command_is_not_taken_for_a_program_file() {
    let d = Dir::new();
    d.file("x.vlad", "(+ 1 2)\n");
    for (args, word, near) in [
        (&["tset", "x.vlad"][..], "tset", "test"),
        (&["--timeout", "5", "rnu", "x.vlad"], "rnu", "run"),
        (&["ann"], "ann", "anf"),
        // a command's name cut short
        (&["ru", "x.vlad"], "ru", "run"),
        (&["an", "x.vlad"], "an", "anf"),
    ] {
        let o = vlad(&d, args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        let first =
            format!("error: `{word}` is neither a program file nor a command (did you mean `{near}`?)\n");
        assert!(o.stderr.starts_with(&first), "{args:?}: {}", o.stderr);
    }
    // clap said "the subcommand 'x.vlad' cannot be used with '[FILE]'" for these
    for (args, first) in [
        (
            &["xyz", "x.vlad"][..],
            "error: `xyz` is neither a program file nor a command (the commands are run, test, anf, repl, help)\n",
        ),
        (
            &["x.vlad", "--timeout", "5", "x.vlad"],
            "error: vlad runs one program file at a time; after `x.vlad` there is `x.vlad`\n",
        ),
    ] {
        let o = vlad(&d, args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.starts_with(first), "{args:?}: {}", o.stderr);
    }
    let o = vlad(&d, &["x.vlad", "--timeout", "5"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "3\n"), "{}", o.stderr);
    // a file of that name is run
    d.file("tset", "(+ 1 2)\n");
    let o = vlad(&d, &["tset"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "3\n"), "{}", o.stderr);
}

/// `vlad test DIR | head`: the output's reader goes away. `println!` panicked
/// on the failed write ("failed printing to stdout: Broken pipe", an internal
/// error); the process now ends as other Unix tools do, by SIGPIPE, quietly.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let d = Dir::new();
    // far more output than a pipe holds
    d.file("t.vlad", &"(+ 1 1) ===> 3\n".repeat(5000));
    d.file("p.vlad", &"12345678901234567890\n".repeat(20000));
    for args in [&["test", "t.vlad"][..], &["p.vlad"], &["anf", "p.vlad"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vlad"))
            .args(args)
            .current_dir(d.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{args:?}");
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(13), "{args:?}: {:?}\n{err}", o.status);
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// Output that cannot be written (standard output on a full disk) is an
/// error, exit status 1: `vlad run` dropped it and reported success, `vlad
/// test` and `vlad anf` panicked in `println!`.
#[test]
fn output_that_cannot_be_written_is_an_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full here");
        return;
    };
    let d = Dir::new();
    d.file("p.vlad", "(write 1)\n(+ 1 2)\n");
    d.file("t.vlad", "(+ 1 2) ===> 3\n");
    // (`--help` and `--version` too: clap's own output)
    for args in [&["p.vlad"][..], &["test", "t.vlad"], &["anf", "t.vlad"], &["--help"], &["--version"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_vlad"))
            .args(args)
            .current_dir(d.path())
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("error: cannot write the output: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // the REPL's commands (they printed nothing and the session ended with status 0)
    for input in [":help\n", ":env\n", ":anf car\n", ":reverse sin\n"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vlad"))
            .env("VLAD_HISTORY", "")
            .stdin(std::process::Stdio::piped())
            .stdout(full.try_clone().unwrap())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{input:?}: {err}");
        assert!(err.contains("error: cannot write the output: "), "{input:?}: {err}");
    }
    // an error that cannot be reported (standard error full) still exits 1, not
    // as an internal error (70)
    d.file("e.vlad", "(car 1)\n");
    let o = Command::new(env!("CARGO_BIN_EXE_vlad"))
        .arg("e.vlad")
        .current_dir(d.path())
        .stderr(full.try_clone().unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

// ---- run-time errors ----

/// `(error "message" irritant ...)` reports like any run-time error: the
/// form's location and source line, the message and the irritants, the call
/// trace; the program stops with status 1 after what it printed before. In a
/// derivative the trace has the transformed procedures but not the form's
/// primitive. `error` with no message first is an unbound variable with a hint.
#[test]
fn the_error_form_reports_its_message_where_it_is() {
    let o = run_bad(
        "(define (check x) (if (< x 0) (error \"check: negative\" x (list x)) x))\n(write 1)\n(check -2)\n(write 3)\n",
        &[],
    );
    assert_eq!((o.code, o.stdout.as_str()), (1, "1\n1\n"));
    assert_stderr(
        &o,
        "bad.vlad:1:31: error: check: negative -2 (-2)\n\
         \x20 | (define (check x) (if (< x 0) (error \"check: negative\" x (list x)) x))\n\
         \x20 |                               ^\n\
         \x20 in check called at bad.vlad:3:1\n",
    );
    let o = run_bad(
        "(define (check x) (if (< x 0) (error \"check: negative\" x) x))\n((derivative-R check) -2.0)\n",
        &[],
    );
    assert!(o.stderr.starts_with("bad.vlad:1:31: error: check: negative -2.0\n"), "{}", o.stderr);
    assert!(o.stderr.contains("  in (reverse check)\n") && !o.stderr.contains("%error"), "{}", o.stderr);
    let o = run_bad("(error 5)\n", &[]);
    assert!(
        o.stderr.contains("unbound variable `error` (`error` needs its message first, a string"),
        "{}",
        o.stderr
    );
}

/// A call trace through nested derivatives names no internal primitive of
/// the prelude (it showed `in (forward %real-vjp) called at prelude/ad.vlad:..`):
/// the user wrote none of them.
#[test]
fn traces_leave_out_internal_primitives() {
    let o = run_bad("((derivative-F (derivative-R (lambda (x) (* x (cons x x))))) 3.0)\n", &[]);
    assert!(o.stderr.starts_with("bad.vlad:1:42: error: *: expected two numbers"), "{}", o.stderr);
    assert!(o.stderr.contains("  in (forward (reverse lambda))\n"), "{}", o.stderr);
    assert!(!o.stderr.contains('%'), "{}", o.stderr);
    // (derivative-F's procedure, a curried definition's inner lambda, named after it)
    assert!(o.stderr.ends_with("  in derivative-F called at bad.vlad:1:1\n"), "{}", o.stderr);
}

/// The procedures a curried definition makes are named after it in a trace
/// (they were each `lambda`); a lambda written in a definition's body keeps
/// its own (no) name.
#[test]
fn curried_definitions_name_their_procedures() {
    let o = run_bad("(define ((adder a) b) (+ a b))\n(define (g x) (* 2 ((adder 1) x)))\n(g #t)\n", &[]);
    assert_stderr(
        &o,
        "bad.vlad:1:23: error: +: expected two numbers, got #t (a boolean)
  | (define ((adder a) b) (+ a b))
  |                       ^
  in adder called at bad.vlad:2:20
  in g called at bad.vlad:3:1
",
    );
    let o = run_bad("(define (adder a) (lambda (b) (+ a b)))\n((adder 1) #t)\n", &[]);
    assert!(o.stderr.ends_with("  in lambda called at bad.vlad:2:1\n"), "{}", o.stderr);
    let o = run_bad("(define (((k a) b) c) (+ a c))\n(((k 1) 2) #t)\n", &[]);
    assert!(o.stderr.ends_with("  in k called at bad.vlad:2:1\n"), "{}", o.stderr);
    let o = run_bad("(define ((f x) y) (car y))\n((f 1) 2)\n", &[]);
    assert!(o.stderr.contains("  in f called at bad.vlad:2:1\n"), "{}", o.stderr);
}

/// `write` with a string: `(write "label" x)` prints the label, a space and
/// x's value on one line and returns the value (so it wraps any expression,
/// also one being differentiated, where it prints the primal); `(write
/// "text")` prints the text and returns `()`. The expected lines are the
/// labels and the values worked by hand (d/dx x^2 = 2x, d2/dx2 = 2).
#[test]
fn write_with_a_label_prints_it_before_the_value() {
    let d = Dir::new();
    d.file(
        "w.vlad",
        "(define (f x) (write \"f at\" (* x x)))\n\
         (write \"start\")\n\
         (+ (f 3) 1)\n\
         ((derivative-R f) 3.0)\n\
         ((derivative-F (derivative-R f)) 3.0)\n\
         (write \"pair:\" (list 1 (cons 2 3)))\n\
         (write-real \"r:\" (f 0.5))\n",
    );
    for flags in [&[][..], &["--no-tape"][..]] {
        let mut args = vec!["run", "w.vlad"];
        args.extend(flags);
        let o = vlad(&d, &args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            o.stdout,
            "start\n()\nf at 9\n10\nf at 9.0\n6.0\nf at 9.0\n2.0\npair: (1 (2 . 3))\n(1 (2 . 3))\n\
             f at 0.25\nr: 0.25\n0.25\n",
            "{flags:?}"
        );
    }
    let o = run_bad("(write \"a b:\" 1 2)\n", &[]);
    assert!(
        o.stderr.starts_with("bad.vlad:1:17: error: `write` with a label prints one value after it"),
        "{}",
        o.stderr
    );
    let o = vlad(&d, &["anf", "w.vlad"]);
    assert!(
        o.stdout.contains("(%write-label \"f at\" ")
            && o.stdout.contains("(%write-text \"start\")")
            && o.stdout.contains("(%write-real-label \"r:\" "),
        "{}",
        o.stdout
    );
}

/// A labelled `write` as a reversible statement prints where it runs: a
/// `call` prints forwards, an `uncall` the same lines in reverse order (its
/// statements run inverted, last first); the state is unchanged by it. The
/// expected lines follow from the definition: y = 1 + 3*3 = 10.
#[test]
fn write_is_a_reversible_statement_that_prints_both_ways() {
    // (and `write-real` with a label, the same for reals)
    for head in ["write", "write-real"] {
        let d = Dir::new();
        d.file(
            "r.vlad",
            &format!(
                "(define-reversible (add-sq x y) ({head} \"x\" x) (+= y (* x x)) ({head} \"y\" y))\n\
                 (call add-sq 3 1)\n\
                 (uncall add-sq 3 10)\n"
            ),
        );
        let o = vlad(&d, &["run", "r.vlad"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(o.stdout, "x 3\ny 10\n(3 10)\ny 10\nx 3\n(3 1)\n", "{head}");
    }
}

/// Forward mode through a reversible procedure runs it once, with tangents:
/// each `write` statement prints one line per `derivative-F` (it ran the
/// procedure for its result and again for the tangent, printing each line
/// twice); reverse mode runs it forward, then backward (the lines again, in
/// reverse order). The derivative of y = 1 + x^2 at 3 is 6; the printed
/// values are the primal ones, x = 3 and y = 10. The same with and without
/// the tape.
#[test]
fn forward_mode_runs_a_reversible_procedure_once() {
    let d = Dir::new();
    d.file(
        "r.vlad",
        "(define-reversible (add-sq x y) (write \"x\" x) (+= y (* x x)) (write \"y\" y))\n\
         (define (f x) (cadr (call add-sq x 1.0)))\n\
         ((derivative-F f) 3.0)\n\
         ((derivative-R f) 3.0)\n",
    );
    for flags in [&["run", "r.vlad"][..], &["run", "--no-tape", "r.vlad"]] {
        let o = vlad(&d, flags);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(o.stdout, "x 3.0\ny 10.0\n6.0\nx 3.0\ny 10.0\ny 10.0\nx 3.0\n6.0\n");
    }
    // Its errors there are the plain run's: the count of values by `uncall`'s
    // name, the hint when one value too many made the last variable a pair.
    for (call, message) in [
        (
            "(uncall sq! x)",
            "r.vlad:2:33: error: uncall: sq! takes 2 values (y x), got 1\n",
        ),
        (
            "(call sq! 0.0 x 1.0)",
            "r.vlad:1:36: error: *: expected two numbers, got (3.0 . 1.0) (a pair) (forward, in sq!) (sq! takes 2 values (y x), \
             so its last variable x was given the rest, (3.0 . 1.0), a pair that is not a list: were 3 values passed?)\n",
        ),
    ] {
        let d = Dir::new();
        d.file(
            "r.vlad",
            &format!("(define-reversible (sq! y x) (+= y (* x x)))\n((derivative-F (lambda (x) (car {call}))) 3.0)\n"),
        );
        let o = vlad(&d, &["run", "r.vlad"]);
        assert_eq!(o.code, 1);
        assert!(o.stderr.starts_with(message), "{call}: {}", o.stderr);
    }
}

/// A call with too few arguments fails in the parameters' destructuring; the
/// message says so, names all the parameters and counts the arguments (it said
/// "for the pattern `y z`" of `x y z` given 2; for a procedure of no
/// parameters it named no pattern at all, nor for a named `let`).
#[test]
fn too_few_or_too_many_arguments_are_named_so() {
    for (src, expected) in [
        (
            "(define (f x y) (+ x y))\n(f 1)\n",
            "bad.vlad:1:12: error: pattern mismatch: expected a pair, got 1 (an exact integer), \
             for the parameters `x y` (too few arguments: 1 given)\n",
        ),
        // the failing parameter is a later one: all are named, and the count
        // is of those matched and the one that failed
        (
            "(define (f x y z) (+ x y))\n(f 1 2)\n",
            "bad.vlad:1:14: error: pattern mismatch: expected a pair, got 2 (an exact integer), \
             for the parameters `x y z` (too few arguments: 2 given)\n",
        ),
        (
            "((lambda ((cons a b) c d) a) (cons 1 2) 3)\n",
            "bad.vlad:1:22: error: pattern mismatch: expected a pair, got 3 (an exact integer), \
             for the parameters `(cons a b) c d` (too few arguments: 2 given)\n",
        ),
        (
            "(define (f x y z) (+ x y))\n(f)\n",
            "bad.vlad:1:12: error: pattern mismatch: expected a pair, got () (the empty list), \
             for the parameters `x y z` (too few arguments: none given)\n",
        ),
        // a curried definition's outer list, and its inner one (which named
        // only the parameters from the unmatched one on, without the count)
        (
            "(define ((g a) b c) (+ a b))\n((g 1) 2)\n",
            "bad.vlad:1:16: error: pattern mismatch: expected a pair, got 2 (an exact integer), \
             for the parameters `b c` (too few arguments: 1 given)\n",
        ),
        (
            "(define ((g a b) c) (+ a c))\n((g 1) 2)\n",
            "bad.vlad:1:13: error: pattern mismatch: expected a pair, got 1 (an exact integer), \
             for the parameters `a b` (too few arguments: 1 given)\n",
        ),
        // a `list` pattern meeting a shorter or a longer list, and the last
        // parts of a `cons*` pattern, whose value ended before them (they were
        // named as "the parameters `b c`")
        (
            "((lambda ((list a b c)) a) (list 1))\n",
            "bad.vlad:1:11: error: pattern mismatch: expected a pair, got () (the empty list), \
             for the pattern `(list a b c)` (a list of fewer than 3 elements)\n",
        ),
        (
            "(let (((list a b) (list 1 2 3))) a)\n",
            "bad.vlad:1:8: error: pattern mismatch: expected (), got (3), \
             for the pattern `(list a b)` (a list of more than 2 elements)\n",
        ),
        (
            "((lambda ((cons* a b c)) a) (list 1))\n",
            "bad.vlad:1:20: error: pattern mismatch: expected a pair, got () (the empty list), \
             for `b c` of the pattern `(cons* a b c)` (the value ended before them)\n",
        ),
        // a named let's loop (located at its variables), a comment among parameters
        (
            "(let loop ((i 0) (j 1) (k 2)) (if (< i 1) (loop 5 6) i))\n",
            "bad.vlad:1:19: error: pattern mismatch: expected a pair, got 6 (an exact integer), \
             for the variables `i j k` of the named `let` `loop` (too few arguments: 2 given)\n",
        ),
        (
            "(define (f x ; the first (of two)\n  y) x)\n(f 1)\n",
            "bad.vlad:1:12: error: pattern mismatch: expected a pair, got 1 (an exact integer), \
             for the parameters `x y` (too few arguments: 1 given)\n",
        ),
        // (brackets in a comment before the parameter that did not match)
        (
            "(define (f x ; x) is the first\n  y z) x)\n(f 1 2)\n",
            "bad.vlad:2:3: error: pattern mismatch: expected a pair, got 2 (an exact integer), \
             for the parameters `x y z` (too few arguments: 2 given)\n",
        ),
        (
            "(define (f) 1)\n(f 2)\n",
            "bad.vlad:1:9: error: pattern mismatch: expected (), got 2, for the parameters `()` \
             (the procedure takes no arguments)\n",
        ),
        (
            "((lambda () 1) 5)\n",
            "bad.vlad:1:10: error: pattern mismatch: expected (), got 5, for the parameters `()` \
             (the procedure takes no arguments)\n",
        ),
        // a `let` pattern is a pattern
        (
            "(let ((() 5)) 1)\n",
            "bad.vlad:1:8: error: pattern mismatch: expected (), got 5, for the pattern `()`\n",
        ),
    ] {
        let o = run_bad(src, &[]);
        assert!(o.stderr.starts_with(expected), "{src}: {}", o.stderr);
    }
}

/// A one-argument primitive given more than one receives them as a pair: the
/// error says that this is what a pair can be.
#[test]
fn a_pair_given_to_a_one_argument_primitive_is_explained() {
    for flags in [&[][..], &["--no-tape"]] {
        for (src, at, name, got) in [
            ("(sqrt 1 2)\n", "bad.vlad:1:1", "sqrt", "(1 . 2)"),
            ("((derivative-R (lambda (x) (sin x x))) 1.0)\n", "bad.vlad:1:28", "sin", "(1.0 . 1.0)"),
        ] {
            let o = run_bad(src, flags);
            let expected = format!(
                "{at}: error: {name}: expected a number, got {got} (a pair, which is also what more than one \
                 argument make: `{name}` takes one)\n"
            );
            assert!(o.stderr.starts_with(&expected), "{src} {flags:?}: {}", o.stderr);
        }
    }
}

/// A defined procedure's parameter pattern is named with the procedure (a
/// call by a primitive, `(map car l)`, is in no trace).
#[test]
fn pattern_mismatch() {
    let o = run_bad("(define (f (cons a b)) a)\n(define (g x) (+ 1 (f x)))\n(g 5)\n", &[]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "bad.vlad:1:12: error: pattern mismatch: expected a pair, got 5 (an exact integer), for the pattern `(cons a b)` of `f`
  | (define (f (cons a b)) a)
  |            ^
  in f called at bad.vlad:2:20
  in g called at bad.vlad:3:1
",
    );
    // (and of a curried definition's inner list: it was named without `g`)
    let o = run_bad("(define ((g (cons a b)) c) (+ a c))\n((g 5) 3)\n", &[]);
    assert!(
        o.stderr.starts_with(
            "bad.vlad:1:13: error: pattern mismatch: expected a pair, got 5 (an exact integer), \
             for the pattern `(cons a b)` of `g`\n"
        ),
        "{}",
        o.stderr
    );
    // (and a pattern nested in a parameter, as a lambda's inside the body is
    // not: it is no parameter of `h`)
    for (src, expected) in [
        (
            "(define (f (list x (list y z))) (+ x y z))\n(f (list 1 2))\n",
            "bad.vlad:1:20: error: pattern mismatch: expected a pair, got 2 (an exact integer), \
             for the pattern `(list y z)` of `f`\n",
        ),
        (
            "(define ((g (cons a (list b c))) d) (+ a b))\n((g (cons 1 (list 2))) 3)\n",
            "bad.vlad:1:21: error: pattern mismatch: expected a pair, got () (the empty list), \
             for the pattern `(list b c)` of `g` (a list of fewer than 2 elements)\n",
        ),
        (
            "(define (h x) (map (lambda ((list p (list q r))) p) x))\n(h (list (list 1 2)))\n",
            "bad.vlad:1:37: error: pattern mismatch: expected a pair, got 2 (an exact integer), \
             for the pattern `(list q r)`\n",
        ),
    ] {
        let o = run_bad(src, &[]);
        assert!(o.stderr.starts_with(expected), "{src}: {}", o.stderr);
    }
    let o = run_bad("(map car (list 1 2))\n", &[]);
    assert!(
        o.stderr.starts_with(
            "prelude/base.vlad:4:14: error: pattern mismatch: expected a pair, got 1 (an exact integer), \
             for the pattern `(cons a d)` of `car`\n"
        ),
        "{}",
        o.stderr
    );
}

/// An error in a procedure that a primitive called (`map` calling its
/// argument) keeps its place, and the trace shows the primitive's call (it
/// went from the procedure's body straight to the caller of the function
/// holding the `map`); a primitive's own error is placed at its call.
#[test]
fn a_primitives_call_of_a_procedure_is_in_the_trace() {
    let o =
        run_bad("(define (g x) (+ x 1))\n(define (f l) (let ((ys (map g l))) ys))\n(f (list 1 #t))\n", &[]);
    assert_stderr(
        &o,
        "bad.vlad:1:15: error: +: expected two numbers, got #t (a boolean)
  | (define (g x) (+ x 1))
  |               ^
  in map called at bad.vlad:2:25
  in f called at bad.vlad:3:1
",
    );
    let o = run_bad("(define (f l) (let ((ys (map cadr l))) ys))\n(f (list (list 1 2) 3))\n", &[]);
    assert!(o.stderr.starts_with("prelude/base.vlad:"), "{}", o.stderr);
    assert!(
        o.stderr.ends_with("  in map called at bad.vlad:1:25\n  in f called at bad.vlad:2:1\n"),
        "{}",
        o.stderr
    );
    let o = run_bad("(map2 (lambda (a b) (car a)) (list 1) (list 2))\n", &[]);
    assert!(o.stderr.starts_with("bad.vlad:1:21: error: pattern mismatch"), "{}", o.stderr);
    assert!(o.stderr.ends_with("  in map2 called at bad.vlad:1:1\n"), "{}", o.stderr);
    let o = run_bad("(map 1 (list 1 2))\n", &[]);
    assert_stderr(
        &o,
        "bad.vlad:1:1: error: cannot apply 1 (an exact integer): not a procedure
  | (map 1 (list 1 2))
  | ^
",
    );
}

/// A list primitive misused in a function being differentiated reports what
/// its call outside a derivative reports (the run on a dual-number or tape
/// level fails in the primitive itself; the transform, which runs next, ran
/// the primitive's definition and said "pattern mismatch: expected a pair").
#[test]
fn a_list_primitives_error_under_a_derivative_is_its_own() {
    for (src, want) in [
        (
            "(define (f l) (list-ref l 5))\n((gradient-R f) (list 1.0 2.0))\n",
            "bad.vlad:1:15: error: list-ref: index 5 is past the end of a list of 2 elements\n",
        ),
        (
            "(define (f l) (* (car l) (list-ref l 5)))\n((gradient-F f) (list 1.0 2.0))\n",
            "bad.vlad:1:26: error: list-ref: index 5 is past the end of a list of 2 elements\n",
        ),
        (
            "((derivative-F (lambda (x) (list-ref (list x (* 2 x)) 1.5))) 1.0)\n",
            "bad.vlad:1:28: error: list-ref: the index must be a whole number from 0, got 1.5 (a real)\n",
        ),
        (
            "((derivative-R (lambda (x) (length (cons x x)))) 1.0)\n",
            "bad.vlad:1:28: error: length: expected a list, got (1.0 . 1.0)",
        ),
    ] {
        let o = run_bad(src, &[]);
        assert!(o.stderr.starts_with(want), "{src}: {}", o.stderr);
        assert!(!o.stderr.contains("loop"), "{src}: {}", o.stderr);
    }
}

#[test]
fn wrong_argument_type_to_a_primitive() {
    let o = run_bad("(define (f x) (+ x #t))\n(define (g x) (* 2 (f x)))\n(g 1)\n", &[]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "bad.vlad:1:15: error: +: expected two numbers, got #t (a boolean)
  | (define (f x) (+ x #t))
  |               ^
  in f called at bad.vlad:2:20
  in g called at bad.vlad:3:1
",
    );
}

/// A backpropagator-shaped procedure called as `(unsensitize (f (sensitize x)))`
/// runs its untagged entry; an error in it is traced to it by name.
#[test]
fn error_in_a_fused_backpropagator_call() {
    let o = run_bad(
        "(define (f s) (sensitize (+ 1 (unsensitize s))))\n(define (g x) (unsensitize (f (sensitize x))))\n(g (list 1 2))\n",
        &[],
    );
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "bad.vlad:1:26: error: +: expected two numbers, got (1 2) (a pair, which is also what more than two arguments make: `+` takes two)
  | (define (f s) (sensitize (+ 1 (unsensitize s))))
  |                          ^
  in f called at bad.vlad:2:28
  in g called at bad.vlad:3:1
",
    );
}

#[test]
fn applying_a_non_procedure() {
    let o = run_bad("(define (g x) (+ 1 (x 2)))\n(g 5)\n", &[]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "bad.vlad:1:20: error: cannot apply 5 (an exact integer): not a procedure
  | (define (g x) (+ 1 (x 2)))
  |                    ^
  in g called at bad.vlad:2:1
",
    );
}

#[test]
fn error_in_the_prelude_shows_the_user_call() {
    let o = run_bad("(define (g x) (+ 1 (abs x)))\n(g #t)\n", &[]);
    assert_stderr(
        &o,
        "prelude/base.vlad:12:21: error: negative?: expected a number, got #t (a boolean)
  | (define (abs x) (if (negative? x) (- 0 x) (if (zero? x) (+ x 0) x)))  ; absolute value ((abs -0.0) is 0.0)
  |                     ^
  in abs called at bad.vlad:1:20
  in g called at bad.vlad:2:1
",
    );
}

#[test]
fn a_pair_accessor_error_is_shown_at_the_call() {
    // car, cdr, cadr... are taken apart in place: the error is at the call.
    let o = run_bad("(define (g x) (+ 1 (cadr x)))\n(g (list 5))\n", &[]);
    assert_stderr(
        &o,
        "bad.vlad:1:20: error: pattern mismatch: expected a pair, got () (the empty list), for the pattern `(cons a d)` of `cadr`
  | (define (g x) (+ 1 (cadr x)))
  |                    ^
  in g called at bad.vlad:2:1
",
    );
    // So is an accessor that is a `cond` clause's receiver (`=>`), at the clause.
    let o = run_bad("(define (g x) (cond (x => cdr) (else 0)))\n(g 5)\n", &[]);
    assert!(
        o.stderr.starts_with(
            "bad.vlad:1:21: error: pattern mismatch: expected a pair, got 5 (an exact integer), \
             for the pattern `(cons a d)` of `cdr`\n"
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn output_before_a_run_time_error_is_kept() {
    let o = run_bad("(write 1)\n(+ 2 3)\n(car 5)\n(write 4)\n", &[]);
    assert_eq!(o.code, 1);
    // `write` prints 1 and returns it, which is printed too; nothing after the error runs
    assert_eq!(o.stdout, "1\n1\n5\n");
    assert!(o.stderr.contains("error: pattern mismatch"), "{}", o.stderr);
}

/// A lazy AD operation that fails on a part of the result (`unperturb` of a pair of
/// plain numbers) stops the program with a located error and status 1; it used to
/// print `#<error: ...>` as the value and exit 0.
#[test]
fn a_failing_lazy_ad_operation_taken_apart_by_an_accessor_is_shown_at_the_accessor() {
    // cadr is compiled in place (no call frame): the error forcing the lazy pair
    // once had no location at all.
    let o = run_bad("(define (g x) (+ 1 (cadr x)))\n(g (unsensitize (list 1 2)))\n", &[]);
    assert_stderr(
        &o,
        "bad.vlad:1:20: error: unsensitize: expected a sensitivity value, got 1 (an exact integer)
  | (define (g x) (+ 1 (cadr x)))
  |                    ^
  in g called at bad.vlad:2:1
",
    );
}

#[test]
fn a_failing_lazy_ad_operation_is_an_error_of_its_expression() {
    let o = run_bad("(+ 2 3)\n(unperturb (cons 1 2))\n(write 4)\n", &[]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "5\n");
    assert_stderr(
        &o,
        "bad.vlad:2:1: error: unperturb: expected a perturbation value, got 1 (an exact integer)
  | (unperturb (cons 1 2))
  | ^
",
    );
}

/// Deeply nested source compiles and runs (the compiler's passes are linear in the
/// nesting: resolving 16,000 nested conditionals once took 37 s and 8 GB).
#[test]
fn deeply_nested_conditionals_run() {
    let n = 20_000;
    let mut body = "1".to_string();
    for i in (0..n).rev() {
        body = format!("(let ((x{i} (if c (+ 1 {body}) 0))) x{i})");
    }
    let tail = format!("{}1{}", "(if c ".repeat(n), " 0)".repeat(n));
    let d = Dir::new();
    d.file("nested.vlad", &format!("(define (f c) {body})\n(f #t)\n(define (g c) {tail})\n(g #t)\n"));
    let o = vlad(&d, &["nested.vlad"]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, format!("{}\n1\n", n + 1).as_str(), ""));
}

/// A deeply nested closure prints with bounded indentation: output linear in the
/// code's size (20,000 nested lambdas once printed 6 GB of spaces).
#[test]
fn deeply_nested_closures_print_in_linear_space() {
    let n = 20_000;
    let d = Dir::new();
    d.file("lam.vlad", &format!("(define f {}x{})\nf\n", "(lambda (x) ".repeat(n), ")".repeat(n)));
    let o = vlad(&d, &["lam.vlad"]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert!(o.stdout.starts_with("(lambda (x"), "{}", &o.stdout[..100]);
    assert_eq!(o.stdout.matches("(lambda (x").count(), n);
    let widest = o.stdout.lines().map(|l| l.len()).max().unwrap();
    assert!(widest < 120, "a line of {widest} characters");
}

/// The prelude's `hvp-RR` walks no list by recursion (it is a `vjp` of the
/// gradient, seeded with v): a Hessian-vector product over a list longer than
/// `--max-depth` runs. For f(x) = sum of x_i^3, H v = (6 x_i v_i); x_i = i,
/// v = 1: the entries sum to 6 * 2999 * 3000 / 2 and the last is 6 * 2999.
#[test]
fn reverse_over_reverse_hvp_of_a_long_list_needs_no_deep_recursion() {
    let d = Dir::new();
    d.file(
        "h.vlad",
        "(define (f x) (fold-left (lambda (acc xi) (+ acc (* (* xi xi) xi))) 0 x))
(define x (iota 3000))
(define h (hvp-RR f x (map (lambda (xi) 1) x)))
(list (length h) (fold-left + 0 h) (list-ref h 2999))
",
    );
    let o = vlad(&d, &["--max-depth", "1000", "h.vlad"]);
    assert_eq!((o.code, o.stderr.as_str(), o.stdout.as_str()), (0, "", "(3000 26991000 17994)\n"));
}

/// Neither do the prelude's `hessian`, `jacobian-F` and `jacobian-R` (their unit
/// vectors and rows): over lists longer than `--max-depth` they run (each once
/// recursed as deep as the list is long). x_i = i for i < 150:
/// the Hessian of the sum of x_i^3 is diag(6 x_i), whose entries sum to
/// 6 * 149 * 150 / 2 = 67050 and whose last is 6 * 149; the Jacobian of
/// x -> (x_i^2) is diag(2 x_i): sum 22350, last 298.
#[test]
fn list_helpers_of_the_prelude_need_no_deep_recursion() {
    let d = Dir::new();
    d.file(
        "h.vlad",
        "(define x (iota 150))
(define (summary m) (list (length m) (length (car m)) (fold-left + 0 (map (lambda (r) (fold-left + 0 r)) m))
                          (list-ref (list-ref m 149) 149)))
(summary ((hessian (lambda (x) (fold-left (lambda (acc xi) (+ acc (* (* xi xi) xi))) 0 x))) x))
(summary ((jacobian-F (lambda (x) (map (lambda (xi) (* xi xi)) x))) x))
(summary ((jacobian-R (lambda (x) (map (lambda (xi) (* xi xi)) x))) x))
",
    );
    let o = vlad(&d, &["--max-depth", "100", "h.vlad"]);
    assert_eq!(
        (o.code, o.stderr.as_str(), o.stdout.as_str()),
        (0, "", "(150 150 67050 894)\n(150 150 22350 298)\n(150 150 22350 298)\n")
    );
}

#[test]
fn max_depth_stops_deep_recursion() {
    for args in [&["--max-depth", "1000"][..], &[][..]] {
        let d = Dir::new();
        d.file("deep.vlad", "(define (f n) (+ 1 (f n)))\n(f 1)\n");
        let mut a = vec![];
        a.extend_from_slice(args);
        a.push("deep.vlad");
        if args.is_empty() {
            // `vlad run FILE --max-depth N` works as well
            a = vec!["run", "deep.vlad", "--max-depth", "1000"];
        }
        let o = vlad(&d, &a);
        assert_eq!(o.code, 1);
        let mut expected = String::from(
            "deep.vlad:1:20: error: recursion too deep (more than 1000 nested calls; see --max-depth)
  | (define (f n) (+ 1 (f n)))
  |                    ^
",
        );
        for _ in 0..8 {
            expected.push_str("  in f called at deep.vlad:1:20\n");
        }
        expected.push_str("  ... 992 more frames\n  from the top-level expression at deep.vlad:2:1\n");
        assert_stderr(&o, &expected);
    }
}

/// A deeply curried `define` head is read in time linear in its depth (a
/// 20,000-deep head once copied the rest of the head at each level: minutes).
#[test]
fn deeply_curried_define_is_read_in_linear_time() {
    let n = 20_000;
    let d = Dir::new();
    d.file("curry.vlad", &format!("(define {}f{} 7)\n(procedure? f)\n", "(".repeat(n), ")".repeat(n)));
    let o = vlad_within(&d, &["curry.vlad"], "", Duration::from_secs(20)).expect("took more than 20 s");
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "#t\n", ""));
}

#[test]
fn max_steps_stops_an_infinite_loop() {
    let o = run_bad("(define (spin n) (spin (+ n 1)))\n(spin 0)\n", &["--max-steps", "100000"]);
    assert_eq!(o.code, 3);
    assert_stderr(
        &o,
        "bad.vlad:1:18: error: step limit of 100000 exceeded (--max-steps)
  | (define (spin n) (spin (+ n 1)))
  |                  ^
  in spin called at bad.vlad:1:18
  from the top-level expression at bad.vlad:2:1
",
    );
}

/// A named `let`'s loop (run in its procedure's frame) is named in a trace
/// as the procedure it is would be: reached by a tail call, from the call
/// that entered it last.
#[test]
fn an_error_in_a_named_let_names_the_loop_and_its_last_call() {
    let o = run_bad(
        "(define (f n) (let loop ((i 0) (acc '())) (if (= i n) (car acc) (loop (+ i 1) (cons i acc)))))
(define (g n) (+ 1 (f n)))
(g 0)
(g 2)
",
        &[],
    );
    assert_stderr(
        &o,
        "bad.vlad:1:55: error: pattern mismatch: expected a pair, got () (the empty list), for the pattern `(cons a d)` of `car`
  | (define (f n) (let loop ((i 0) (acc '())) (if (= i n) (car acc) (loop (+ i 1) (cons i acc)))))
  |                                                       ^
  in loop called at bad.vlad:1:15
  in f called at bad.vlad:2:20
  in g called at bad.vlad:3:1
",
    );
    let o = run_bad("(define (f n) (let loop ((i 0)) (if (= i n) (+ i ()) (loop (+ i 1)))))\n(f 2)\n", &[]);
    assert!(o.stderr.contains("  in loop called at bad.vlad:1:54\n  from the top-level"), "{}", o.stderr);
    let o = run_bad("(define (f n) (let loop ((i 0)) (loop (+ i 1))))\n(f 0)\n", &["--max-steps", "1000"]);
    assert_eq!(o.code, 3);
    assert!(o.stderr.contains("step limit of 1000 exceeded"), "{}", o.stderr);
    assert!(o.stderr.contains("  in loop called at bad.vlad:1:33\n"), "{}", o.stderr);
}

#[test]
fn timeout_stops_an_infinite_loop() {
    let t = Instant::now();
    let o = run_bad("(write 7)\n(define (spin n) (spin (+ n 1)))\n(spin 0)\n", &["--timeout", "0.5"]);
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(o.code, 3);
    assert_eq!(o.stdout, "7\n7\n");
    assert!(o.stderr.starts_with("bad.vlad:2:18: error: time limit exceeded (--timeout)\n"), "{}", o.stderr);
}

/// A tape's backward sweep makes no procedure calls, so it must check `--timeout`
/// (and Ctrl-C) itself, as the transform's backpropagator does through its calls:
/// a long sweep running past the deadline was ended only by the watchdog, which
/// ends the whole program (in the REPL, the session). Here the forward run makes
/// too few calls to check the clock (already past: about 600, where the evaluator
/// checks every 1024 calls in a debug build, 16384 in a release one), so only the
/// sweep of its 14400 nodes (or, by the transform, its 31000 calls) can see it: it
/// stops there, with the transform's message and no value printed. (Each
/// iteration multiplies 24 times, so that the transform soon reaches a check even
/// in a debug build: with 8000 iterations of two products it took 0.3-0.4 s to
/// reach its first, over the watchdog's 1 s grace on a loaded machine.)
#[test]
fn timeout_is_checked_in_a_tapes_backward_sweep() {
    let products: Vec<String> =
        (0..24).map(|k| format!("(a (* a {}))", if k % 2 == 0 { "1.001" } else { "0.999" })).collect();
    let src = format!(
        "(define (g x) (let loop ((i 0) (a x)) (if (= i 600) a (loop (+ i 1) (let* ({}) a)))))\n\
         ((derivative g) 0.5)\n",
        products.join(" ")
    );
    let src = src.as_str();
    for extra in [&["--timeout", "0"][..], &["--timeout", "0", "--no-tape"][..]] {
        let o = run_bad(src, extra);
        assert_eq!(o.code, 3, "{extra:?}: {}", o.stderr);
        assert_eq!(o.stdout, "", "{extra:?}: {}", o.stderr);
        assert!(o.stderr.contains("error: time limit exceeded (--timeout)\n"), "{extra:?}: {}", o.stderr);
        assert!(!o.stderr.contains("while printing"), "{extra:?}: {}", o.stderr);
    }
}

/// A timeout too large for a `Duration` or an `Instant` means no limit (it panicked);
/// NaN and negative ones are refused by the option parser.
#[test]
fn huge_timeouts_mean_no_limit_and_nan_is_refused() {
    let d = Dir::new();
    d.file("p.vlad", "(+ 1 2)\n");
    for t in ["1e20", "1e30", "inf", "1e15"] {
        let o = vlad(&d, &["--timeout", t, "p.vlad"]);
        assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "3\n", ""), "--timeout {t}");
    }
    // A limit is checked now and then (every few thousand calls, between the
    // pieces of a value printed): a program that ends before any check is not
    // stopped. With 0, the value was printed whole and then reported as
    // stopped "while printing a value".
    let o = vlad(&d, &["--timeout", "0", "p.vlad"]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "3\n", ""), "--timeout 0");
    for t in ["nan", "-1"] {
        let o = vlad(&d, &[&format!("--timeout={t}"), "p.vlad"]);
        assert_eq!(o.code, 2, "--timeout={t}: {}", o.stderr);
        assert!(o.stderr.contains("must not be negative or NaN"), "{}", o.stderr);
    }
    // (written apart, `-1` was taken for an unknown option: "unexpected argument")
    for args in [&["--timeout", "-1", "p.vlad"][..], &["test", "--timeout", "-0.5", "p.vlad"]] {
        let o = vlad(&d, args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains("must not be negative or NaN"), "{}", o.stderr);
    }
}

/// Options may come before the subcommand (`vlad --timeout 5 test FILE`); clap took
/// the subcommand's name for the program file and refused the options.
#[test]
fn options_before_a_subcommand_apply_to_it() {
    let d = Dir::new();
    d.file("lib/inc.vlad", "(define (sq x) (* x x))\n")
        .file("t.vlad", "(include \"inc\")\n(sq 3) ===> 9\n")
        .file("spin.vlad", "(define (spin n) (spin (+ n 1)))\n(spin 0)\n");
    let o = vlad(&d, &["-I", "lib", "--timeout", "20", "test", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "1 passed, 0 failed\n"), "{}", o.stderr);
    let o = vlad(&d, &["-Ilib", "--max-depth=1000", "run", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "9\n"), "{}", o.stderr);
    let o = vlad(&d, &["--max-steps", "1000", "run", "spin.vlad"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(o.stderr.contains("step limit of 1000 exceeded"), "{}", o.stderr);
    let o = vlad(&d, &["-I", "lib", "anf", "t.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // with no subcommand the arguments are left as they are
    let o = vlad(&d, &["--max-steps", "1000", "t.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("include not found"), "{}", o.stderr);
}

/// In `vlad test`, `--max-steps` and `--timeout` bound each check: a runaway check
/// used up the budget and every later check failed with the limit's error.
#[test]
fn test_command_limits_apply_to_each_check() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(define (spin n) (spin (+ n 1)))\n(define (fact n) (if (= n 0) 1 (* n (fact (- n 1)))))\n\
         (spin 0) ===> (error \"limit\")\n(fact 20) ===> 2432902008176640000\n\
         (spin 0) ===> (error \"limit\")\n(fact 30) ===> 265252859812191058636308480000000\n",
    );
    let o = vlad(&d, &["test", "--max-steps", "100", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "4 passed, 0 failed\n"), "{}", o.stderr);
    let o = vlad(&d, &["test", "--timeout", "0.3", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "4 passed, 0 failed\n"), "{}", o.stderr);
    // A runaway check fails even where the error it expects would match the
    // limit's message: only one that names the limit passes.
    d.file(
        "u.vlad",
        "(define (spin n) (spin (+ n 1)))\n(spin 0) ===> (error \"\")\n(spin 0) ===> (error \"e\")\n\
         (spin 0) ===> (error \"step limit\")\n(car 5) ===> (error \"\")\n",
    );
    let o = vlad(&d, &["test", "--max-steps", "100", "u.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.ends_with("2 passed, 2 failed\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains("u.vlad:2: expected an error matching \"\", got error: step limit"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("u.vlad:3: expected an error matching \"e\", got error: step limit"),
        "{}",
        o.stdout
    );
}

/// An error raised in another file (the prelude, an included one), reached
/// through tail calls (no frame of the user's file), still names the top-level
/// expression it came from. (The prelude's `list-ref` was the example; it is a
/// primitive now, so an included file's loop stands in for it.)
#[test]
fn prelude_errors_name_the_top_level_expression() {
    let d = Dir::new();
    d.file("lib.vlad", "(define (nth l i) (if (= i 0) (car l) (nth (cdr l) (- i 1))))\n");
    d.file("bad.vlad", "(include \"lib\")\n(define xs (list 1 2))\n(nth xs 5)\n");
    let o = vlad(&d, &["bad.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("lib.vlad:1:"), "{}", o.stderr);
    assert!(o.stderr.ends_with("  from the top-level expression at bad.vlad:3:1\n"), "{}", o.stderr);
    // an error inside the expression is located there, with no extra line
    let o = run_bad("(define (f x) (car x))\n(f 3)\n", &[]);
    assert!(o.stderr.starts_with("bad.vlad:1:"), "{}", o.stderr);
    assert!(
        o.stderr.contains("in f called at bad.vlad:2:1") && !o.stderr.contains("top-level"),
        "{}",
        o.stderr
    );
}

#[test]
fn test_failure_lines_clip_long_values() {
    let d = Dir::new();
    d.file("t.vlad", "(iota 5000) ===> (0 1 2)\n(iota 3) ===> (iota 4)\n");
    let o = vlad(&d, &["test", "t.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let all = format!("{}{}", o.stdout, o.stderr);
    let first = all.lines().find(|l| l.contains("t.vlad:1:")).expect(&all);
    // the start and the end of the 5000 numbers, and how long the text is
    assert!(first.contains("got (0 1 2 3 4 5") && first.ends_with("4998 4999)"), "{first}");
    assert!(first.contains("... (23891 characters in all) ..."), "{first}");
    assert!(first.len() < 1000, "{} characters", first.len());
    assert!(all.contains("expected (iota 4), got (0 1 2)"), "{all}");
}

/// Runs `vlad ARGS` in `dir` with `stdin` as its input; kills it after `limit`
/// (returning `None`) so that a hang fails the test instead of stalling it.
fn vlad_within(dir: &Dir, args: &[&str], stdin: &str, limit: Duration) -> Option<Out> {
    use std::io::{Read, Write};
    use std::process::Stdio;
    // Standard output goes to a file: a pipe nobody reads while the child runs
    // would block a child that prints much.
    let out_file = dir.path().join("stdout.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vlad"))
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let stdout = String::from_utf8_lossy(&std::fs::read(&out_file).unwrap()).into_owned();
    Some(Out { code: status.code().unwrap_or(-1), stdout, stderr })
}

/// The file `-` is standard input, for `vlad`, `run`, `test` and `anf` ("cannot
/// read -: No such file or directory" before): named `<stdin>` in messages, its
/// `include`s found from the current directory; `read-real` then meets the end
/// of the input.
#[test]
fn the_file_dash_is_standard_input() {
    let d = Dir::new();
    d.file("lib.vlad", "(define (sq x) (* x x))\n");
    let limit = Duration::from_secs(60);
    let o = vlad_within(&d, &["-"], "(include \"lib\")\n(sq 3)\n(car 5)\n", limit).expect("vlad hung");
    assert_eq!((o.code, o.stdout.as_str()), (1, "9\n"), "{}", o.stderr);
    assert!(o.stderr.starts_with("<stdin>:3:1: error: pattern mismatch"), "{}", o.stderr);
    let o = vlad_within(&d, &["test", "-"], "(* 4 4) ===> 16\n(* 4 4) ===> 15\n", limit);
    let o = o.expect("vlad hung");
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (1, "<stdin>:2: expected 15, got 16\n1 passed, 1 failed\n"),
        "{}",
        o.stderr
    );
    let o = vlad_within(&d, &["run", "-"], "(read-real)\n", limit).expect("vlad hung");
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("<stdin>:1:1: error: read-real: end of input"), "{}", o.stderr);
    let o = vlad_within(&d, &["anf", "-"], "(define (f x) (* x x))\n", limit).expect("vlad hung");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("(define f\n"), "{}", o.stdout);
    // (a file whose name is the one standard input goes by is a file)
    d.file("<stdin>", "(+ 40 2)\n");
    let o = vlad_within(&d, &["<stdin>"], "(+ 1 2)\n", limit).expect("vlad hung");
    assert_eq!((o.code, o.stdout.as_str()), (0, "42\n"), "{}", o.stderr);
}

/// Memory running out (here under `ulimit -v`, as a list grows without end)
/// ended the process with Rust's abort ("memory allocation of 48 bytes failed",
/// SIGABRT); it is an error with exit status 1.
#[test]
fn running_out_of_memory_is_an_error_not_a_crash() {
    let d = Dir::new();
    d.file("p.vlad", "(define (grow l) (grow (cons 1.0 l)))\n(grow '())\n");
    let cmd = format!("ulimit -v 1000000 && exec '{}' p.vlad", env!("CARGO_BIN_EXE_vlad"));
    let o = Command::new("sh").args(["-c", &cmd]).current_dir(d.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "error: out of memory (the system refused an allocation under an address-space limit, \
         `ulimit -v`, of 1000000 kB); vlad stopped\n"
    );
}

/// `vlad test DIR` on a directory with no .vlad files passed ("0 passed, 0 failed",
/// exit status 0): a wrong path looked like success. It is a failure naming the directory.
#[test]
fn test_of_a_directory_without_vlad_files_fails() {
    let d = Dir::new();
    d.file("empty/readme.txt", "not a program\n").file("full/t.vlad", "(+ 1 2) ===> 3\n");
    let o = vlad(&d, &["test", "empty", "full"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stdout, "empty: error: no .vlad files in this directory\n1 passed, 1 failed\n");
}

/// `vlad test FILE` on a file with nothing to check (empty, or definitions only)
/// passed ("0 passed, 0 failed"), where an empty directory fails: a file named to be
/// checked that has no expression fails, naming it; such a file found in a directory
/// (one the others include) is not a failure.
#[test]
fn test_of_a_file_without_checks_fails() {
    let d = Dir::new();
    d.file("empty.vlad", "").file("defs.vlad", "(define x 1)\n").file("dir/a.vlad", "(define y 2)\n");
    d.file("dir/t.vlad", "(+ 1 2) ===> 3\n");
    let o = vlad(&d, &["test", "empty.vlad", "defs.vlad", "dir"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "empty.vlad: error: no checks in this file (no expression to check)\n\
         defs.vlad: error: no checks in this file (no expression to check)\n\
         1 passed, 2 failed\n"
    );
    let o = vlad(&d, &["test", "dir"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "1 passed, 0 failed\n"));
}

/// `vlad test DIR` read every `.vlad` entry of DIR, and one that was a named
/// pipe blocked it forever (even with `--timeout`): such an entry is reported
/// and not read; the regular files beside it are checked.
#[cfg(unix)]
#[test]
fn test_of_a_directory_does_not_read_a_named_pipe_in_it() {
    let d = Dir::new();
    d.file("dir/t.vlad", "(+ 1 2) ===> 3\n").file("only/readme.txt", "\n");
    for fifo in ["dir/p.vlad", "only/q.vlad"] {
        let made = Command::new("mkfifo").arg(d.path().join(fifo)).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available here");
            return;
        }
    }
    let o = vlad(&d, &["test", "--timeout", "5", "dir", "only"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "dir/p.vlad: error: a named pipe, not a regular file; not checked\n\
         only/q.vlad: error: a named pipe, not a regular file; not checked\n\
         1 passed, 2 failed\n"
    );
}

/// `vlad test DIR` where DIR cannot be read said "no .vlad files in this
/// directory" (the read error dropped): it says why. (Skipped where the
/// permission does not stop a read: as root.)
#[test]
fn test_of_an_unreadable_directory_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new();
    d.file("locked/t.vlad", "(+ 1 2) ===> 3\n");
    let locked = d.path().join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let readable = std::fs::read_dir(&locked).is_ok();
    let o = vlad(&d, &["test", "locked"]);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    if readable {
        eprintln!(
            "test_of_an_unreadable_directory_says_why: skipped: permissions do not stop reads here (root)"
        );
        return;
    }
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout.starts_with("locked: error: cannot read the directory: Permission denied"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.ends_with("0 passed, 1 failed\n"), "{}", o.stdout);
}

/// A value of 2^60 pairs (60 levels of `(cons x x)`, shared) printed at the top
/// level: the printer built the whole text in memory and the process died of
/// an allocation failure (or ran past --timeout until the watchdog stopped it).
/// It now prints in pieces, in bounded memory, and stops at --timeout with an
/// error naming the expression; in the REPL the session goes on; `vlad test`
/// stops printing once the text is too long to match the expectation.
#[test]
fn printing_a_huge_shared_value_is_bounded() {
    let d = Dir::new();
    let dbl = "(define (dbl k x) (if (= k 0) x (dbl (- k 1) (cons x x))))\n";
    d.file("p.vlad", &format!("{dbl}(+ 1 2)\n(dbl 60 '())\n(+ 3 4)\n"))
        .file("t.vlad", &format!("{dbl}(dbl 60 '()) ===> (1 2)\n(dbl 2 '()) ===> ((()) ())\n"));
    let limit = Duration::from_secs(60);
    let o = vlad_within(&d, &["--timeout", "1", "p.vlad"], "", limit).expect("vlad run hung");
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("p.vlad:3:1: error: time limit exceeded (--timeout) while printing a value\n"),
        "{}",
        o.stderr
    );
    // the value's text was being written (a line begun with its first 60 parentheses)
    assert!(
        o.stdout.starts_with(&format!("3\n{}())", "(".repeat(60))),
        "{}",
        &o.stdout[..100.min(o.stdout.len())]
    );
    assert!(o.stdout.ends_with('\n'));
    let o = vlad_within(&d, &["test", "t.vlad"], "", limit).expect("vlad test hung");
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.starts_with("t.vlad:2: expected (1 2), got (((((("), "{}", o.stdout);
    assert!(o.stdout.contains("... (longer than "), "{}", o.stdout);
    assert!(o.stdout.ends_with("1 passed, 1 failed\n"), "{}", o.stdout);
    let input = format!("{dbl}(dbl 60 '())\n(+ 3 4)\n");
    let o = vlad_within(&d, &["--timeout", "1"], &input, limit).expect("the REPL hung");
    assert!(
        o.stderr.contains("error: time limit exceeded (--timeout) while printing a value"),
        "{}",
        o.stderr
    );
    // the value's line ended where printing stopped; the session went on
    assert!(o.stdout.starts_with(&"(".repeat(60)), "{}", &o.stdout[..100.min(o.stdout.len())]);
    assert!(o.stdout.ends_with("\n7\n"), "{}", &o.stdout[o.stdout.len().saturating_sub(100)..]);
}

/// `--timeout` bounds a program stuck in one primitive operation (here the product
/// of two exact integers of 10^8 bits, minutes of work), which the evaluator cannot
/// interrupt: it ran on for minutes. A watchdog ends it a second after the deadline,
/// in `vlad run`, `vlad test` (reporting the checks so far) and the REPL.
#[test]
fn timeout_stops_a_long_primitive_operation() {
    let d = Dir::new();
    let sq = "(define (sq n x) (if (= n 0) x (sq (- n 1) (* x x))))\n";
    d.file("p.vlad", &format!("{sq}(+ 1 2)\n(zero? (sq 27 3))\n(+ 3 4)\n")).file(
        "t.vlad",
        &format!("(+ 1 2) ===> 4\n{sq}(+ 1 2) ===> 3\n(zero? (sq 27 3)) ===> #f\n(+ 3 4) ===> 7\n"),
    );
    let limit = Duration::from_secs(60);
    let msg = "time limit exceeded (--timeout); a primitive operation was still running 1 s later";
    let o = vlad_within(&d, &["--timeout", "0.5", "p.vlad"], "", limit).expect("vlad run hung");
    assert_eq!((o.code, o.stdout.as_str()), (3, "3\n"), "{}", o.stderr);
    assert!(o.stderr.starts_with(&format!("error: {msg}")), "{}", o.stderr);
    let o = vlad_within(&d, &["test", "--timeout", "0.5", "t.vlad"], "", limit).expect("vlad test hung");
    assert_eq!(o.code, 3, "{}", o.stderr);
    let expected = format!(
        "t.vlad:1: expected 4, got 3\nt.vlad:4: error: {msg} and cannot be interrupted, so vlad stopped\n\
         1 passed, 2 failed (the checks after this one did not run)\n"
    );
    assert_eq!(o.stdout, expected, "{}", o.stderr);
    let input = format!("{sq}(+ 1 2)\n(zero? (sq 27 3))\n(+ 3 4)\n");
    let o = vlad_within(&d, &["--timeout", "0.1"], &input, limit).expect("the REPL hung");
    assert_eq!((o.code, o.stdout.as_str()), (3, "3\n"), "{}", o.stderr);
    assert!(o.stderr.starts_with(&format!("error: {msg}")), "{}", o.stderr);
    // between REPL inputs the watchdog is disarmed: waiting for input is not timed
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_vlad"))
        .args(["--timeout", "0.2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"(+ 1 2)\n").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    stdin.write_all(b"(+ 3 4)\n").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "3\n7\n");
}

/// Reading and compiling do not look at the clock; past `--timeout` the watchdog
/// stops them. Its message said "a primitive operation was still running" and gave
/// no place: it now says the program was being read and compiled, and names the
/// file (`vlad run`) or the input (the REPL).
#[test]
fn timeout_while_compiling_says_so() {
    let d = Dir::new();
    // two million definitions: seconds of reading and compiling even on a fast
    // machine (half a million took under the REPL case's 1.5 s on one); vlad
    // stops 1 s past the limit, so more input costs the test no time
    let defs: String = (0..2_000_000).map(|i| format!("(define (f{i} x) (+ x {i}))\n")).collect();
    d.file("big.vlad", &format!("{defs}(+ 1 2)\n"));
    let limit = Duration::from_secs(60);
    let msg = "error: time limit exceeded (--timeout) while reading and compiling, before evaluation; \
               it was still not done 1 s later and cannot be interrupted, so vlad stopped\n";
    let o = vlad_within(&d, &["--timeout", "0", "big.vlad"], "", limit).expect("vlad run hung");
    assert_eq!((o.code, o.stdout.as_str()), (3, ""), "{}", o.stderr);
    assert_eq!(o.stderr, format!("big.vlad: {msg}"));
    // in the REPL, one input of all the definitions (one line), after one that runs
    let input = format!("(+ 1 2)\n{}\n", defs.replace('\n', " "));
    let o = vlad_within(&d, &["--timeout", "0.1"], &input, limit).expect("the REPL hung");
    assert_eq!((o.code, o.stdout.as_str()), (3, "3\n"), "{}", o.stderr);
    assert_eq!(o.stderr, format!("<stdin>:2:1: {msg}"));
}

// ---- vlad run ----

#[test]
fn run_prints_each_top_level_value() {
    let d = Dir::new();
    d.file(
        "p.vlad",
        "'()\n#t\n#f\n42\n1.0\n0.25\n-0.0\n1e21\n(/ 1 3)\n(/ 1.0 0)\n(/ -1.0 0)\n(* 4294967296 4294967296)\n\
         (list 1 2 3)\n(cons 1 2)\n(cons* 1 2 3)\n'(1 (2 . 3) #t ())\n+\n(define (f x) x)\n(f 5)\n",
    );
    let o = vlad(&d, &["p.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stdout,
        "()\n#t\n#f\n42\n1.0\n0.25\n-0.0\n1e21\n0.3333333333333333\n+inf.0\n-inf.0\n18446744073709551616\n\
         (1 2 3)\n(1 . 2)\n(1 2 . 3)\n(1 (2 . 3) #t ())\n+\n5\n"
    );
    assert_eq!(o.stderr, "");
    // `vlad run FILE` is the same
    assert_eq!(vlad(&d, &["run", "p.vlad"]).stdout, o.stdout);
}

#[test]
fn run_prints_closures_as_their_lambda() {
    let d = Dir::new();
    d.file("c.vlad", "(lambda (x) (* x x))\n");
    let o = vlad(&d, &["c.vlad"]);
    let re = regex::Regex::new(
        r"^\(lambda \(x_(\d+)\)\n +\(let\* \(\(t_(\d+) \(\* x_(\d+) x_(\d+)\)\)\)\n +t_(\d+)\)\)\n$",
    )
    .unwrap();
    assert!(re.is_match(&o.stdout), "{}", o.stdout);
}

#[test]
fn run_with_include_search_path() {
    let d = Dir::new();
    d.file("src/main.vlad", "(include \"sub/a\")\n(include \"lib\")\n(list (a) (b) (c))\n")
        .file("src/sub/a.vlad", "(include \"b.vlad\")\n(define (a) 1)\n")
        .file("src/sub/b.vlad", "(define (b) 2)\n")
        .file("libdir/lib.vlad", "(define (c) 3)\n");
    let o = vlad(&d, &["run", "src/main.vlad", "-I", "libdir"]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "(1 2 3)\n", ""));
    let o = vlad(&d, &["src/main.vlad", "--include", "libdir"]);
    assert_eq!(o.stdout, "(1 2 3)\n");
    // without -I, lib is not found
    let o = vlad(&d, &["run", "src/main.vlad"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("src/main.vlad:2:1: error: include not found: \"lib\""), "{}", o.stderr);
}

#[test]
fn annotations_are_ignored_when_running() {
    let d = Dir::new();
    d.file("a.vlad", "(+ 1 2) ===> 4\n(* 2 3)\n");
    let o = vlad(&d, &["a.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "3\n6\n"));
}

#[test]
fn metered_counts_primitive_arithmetic() {
    let d = Dir::new();
    d.file("m.vlad", "(define (f x) (* x (+ x 1)))\n(f 3)\n(f 2.5)\n");
    let o = vlad(&d, &["--metered", "m.vlad"]);
    assert_eq!(o.code, 0);
    assert_eq!(o.stdout, "12\n8.75\n");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines[0], "metered: 4 primitive operations (+ 2, * 2)");
    // (none: no empty parentheses)
    d.file("none.vlad", "(define (f x) x)\n(f 3)\n");
    let o0 = vlad(&d, &["--metered", "none.vlad"]);
    assert_eq!(o0.stderr.lines().next(), Some("metered: 0 primitive operations"), "{}", o0.stderr);
    // The second line counts procedure calls (each top-level expression runs as
    // one): one more expression making three more calls of f, four more.
    d.file("m3.vlad", "(define (f x) (* x (+ x 1)))\n(f 3)\n(f 2.5)\n(f (f (f 1)))\n");
    let o3 = vlad(&d, &["--metered", "m3.vlad"]);
    let calls = |s: &str| -> u64 {
        let l = s.lines().nth(1).expect("a second metered line");
        let n = l.strip_prefix("metered: ").and_then(|r| r.split(' ').next()).expect("a count");
        assert!(l.ends_with("procedure calls, 0 AD value operations"), "{l}");
        n.parse().expect("a number")
    };
    assert_eq!(calls(&o3.stderr) - calls(&o.stderr), 3 + 1);
}

#[test]
fn metered_counts_a_reversible_procedures_arithmetic() {
    // A from-loop with entry test (= i 0), step i += 1, y += x i, until (= i n): the
    // until test runs for i = 0..n (n + 1 times), the entry test at the start and after
    // each of the n steps (n + 1), the product once a step. (The executor's inline
    // arithmetic, used when not metering, must not change these.)
    let d = Dir::new();
    d.file(
        "r.vlad",
        "(define-reversible (r y x n) (local (i 0) (from-loop (= i 0) (skip) (begin-rev (+= i 1) (+= y (* x i))) (= i n)) (delocal i n)))\n(call r 0 2 10)\n",
    );
    let o = vlad(&d, &["--metered", "r.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "(110 2 10)\n"), "{}", o.stderr);
    assert_eq!(
        o.stderr.lines().next(),
        Some("metered: 32 primitive operations (* 10, = 22)"),
        "{}",
        o.stderr
    );
}

#[test]
fn rev_grad_evaluates_a_right_hand_side_a_bounded_number_of_times() {
    // x += (+ y (+ y ... (+ y 1.0))), d deep: x ends x + d y + 1, so the gradient
    // is (1 d). The backward run evaluates the right-hand side once, to uncompute
    // x, noting its parts' values for the adjoints: 2d `+` with the forward run.
    // (It evaluated each part again at every level: d²/2, 4.5 million here.)
    let d = 3000;
    let mut rhs = String::from("1.0");
    for _ in 0..d {
        rhs = format!("(+ y {rhs})");
    }
    let dir = Dir::new();
    dir.file("r.vlad", &format!("(define-reversible (f x y) (+= x {rhs}))\n(rev-grad f 0 1.0 2.0)\n"));
    let o = vlad(&dir, &["--metered", "r.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "(1 3000.0)\n"), "{}", o.stderr);
    let adds: u64 = o
        .stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("metered: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {}", o.stderr));
    assert!(adds <= 2 * d, "{adds} additions for a right-hand side of {d}");
}

#[test]
fn time_reports_each_top_level_expression() {
    let d = Dir::new();
    // Definitions are not reported; each expression is, after its value, with its
    // location (the numbers themselves are not checked: no timing in tests).
    d.file(
        "t.vlad",
        "(define (loop i acc) (if (= i 0) acc (loop (- i 1) (+ acc 1))))\n(loop 10 0)\n(define k 2)\n  (loop 3000 k)\n",
    );
    let o = vlad(&d, &["--time", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "10\n3002\n"), "{}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", o.stderr);
    let ms = |l: &str, at: &str| -> f64 {
        let rest = l.strip_prefix("time: ").unwrap_or_else(|| panic!("{l}"));
        let (n, loc) = rest.split_once(" ms ").unwrap_or_else(|| panic!("{l}"));
        assert_eq!(loc, format!("({at})"), "{l}");
        n.parse().unwrap_or_else(|_| panic!("{l}"))
    };
    assert!(ms(lines[0], "t.vlad:2:1") >= 0.0 && ms(lines[1], "t.vlad:4:3") >= 0.0, "{}", o.stderr);
    // `vlad run` takes it too; without it nothing is reported.
    let r = vlad(&d, &["run", "--time", "t.vlad"]);
    assert_eq!(r.stderr.lines().count(), 2, "{}", r.stderr);
    assert_eq!(vlad(&d, &["t.vlad"]).stderr, "");
}

/// prelude/optimize.vlad's `transpose` (of lists of rows) shadows the vector primitive
/// in a program that includes it; it passes packed matrices on to the primitive, so
/// both kinds transpose, and gradients go through either.
#[test]
fn optimize_transpose_takes_lists_of_rows_and_packed_matrices() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(include \"optimize\")\n\
         (transpose '((1 2 3) (4 5 6)))\n\
         (transpose (vector-of '((1 2 3) (4 5 6))))\n\
         ((gradient-R (lambda (a) (vec-sum (vec* (transpose a) (vec-shape-like (vec-iota 6) (transpose a)))))) \
           (vector-of '((1 2 3) (4 5 6))))\n\
         ((gradient-R (lambda (a) (dot (map car (transpose a)) '(10 20 30)))) '((1 2 3) (4 5 6)))\n",
    );
    let o = vlad(&d, &["t.vlad"]);
    // d/dA of sum_ij (A^T)_ij * k_ij, k = 0..5 laid out 3x2 row-major: A_ji's weight is
    // k at (i, j) of the transpose, i.e. entry (j, i) of A gets 2i + j.
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (
            0,
            "((1 4) (2 5) (3 6))\n(matrix (1.0 4.0) (2.0 5.0) (3.0 6.0))\n(matrix (0.0 2.0 4.0) (1.0 3.0 5.0))\n\
             ((10 20 30) (0 0 0))\n"
        ),
        "{}",
        o.stderr
    );
}

/// A program that includes prelude/optimize.vlad may define one of its names, as
/// it may a built-in prelude name: its definition is the program's, while the
/// library's procedures keep using their own (m*v's dot products here: (11)),
/// and an expression before the program's definition sees the library's.
#[test]
fn a_program_may_redefine_a_name_of_an_included_prelude_library() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(include \"optimize\")\n\
         (magnitude (list 3 4))\n\
         (define (dot a b) 100)\n\
         (define (magnitude v) 7)\n\
         (dot (list 1 2) (list 3 4))\n\
         (m*v (list (list 1 2)) (list 3 4))\n\
         (distance (list 0 0) (list 3 4))\n\
         (magnitude (list 3 4))\n",
    );
    let o = vlad(&d, &["t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "5\n100\n(11)\n5\n7\n"), "{}", o.stderr);
}

/// Tail calls run in constant stack (LANGUAGE.md) in forward-transformed code too:
/// a transformed procedure's call of a global procedure (itself, or a mutually
/// recursive one) calls a lazily transformed closure, which used to be called
/// through a nested call: 10^5 iterations under `--max-depth 1000` failed with
/// "recursion too deep". d/dx of x through the loop is 1; of x^2 through the
/// mutual recursion at 3, 6; the second derivative of x^3 at 2, 12.
#[test]
fn forward_mode_keeps_tail_calls_between_global_procedures() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(define (loop n acc) (if (= n 0) acc (loop (- n 1) (+ acc 0.0))))\n\
         (define (ev n x) (if (= n 0) x (od (- n 1) (* x 1.0))))\n\
         (define (od n x) (if (= n 0) x (ev (- n 1) (* x 1.0))))\n\
         (define ((deriv-F f) x) (unperturb (tangent ((j* f) (bundle x (perturb 1))))))\n\
         ((deriv-F (lambda (x) (loop 100000 x))) 1.0)\n\
         ((deriv-F (lambda (x) (ev 100001 (* x x)))) 3.0)\n\
         ((deriv-F (deriv-F (lambda (x) (ev 100000 (* x (* x x)))))) 2.0)\n\
         ((derivative-F (lambda (x) (od 100000 (* x x)))) 3.0)\n",
    );
    for flags in [&["--max-depth", "1000", "t.vlad"][..], &["--no-tape", "--max-depth", "1000", "t.vlad"]] {
        let o = vlad(&d, flags);
        assert_eq!((o.code, o.stdout.as_str()), (0, "1.0\n6.0\n12.0\n6.0\n"), "{flags:?}: {}", o.stderr);
    }
}

/// A limit of 0 is met before the first call has a place: the error is placed
/// at the top-level expression (it had no location line at all).
#[test]
fn a_limit_of_zero_is_placed_at_the_expression() {
    let src = "(define (f x) (+ x 1))\n(f 2)\n";
    let o = run_bad(src, &["--max-steps", "0"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("bad.vlad:2:1: error: step limit of 0 exceeded (--max-steps)\n  | (f 2)\n"),
        "{}",
        o.stderr
    );
    let o = run_bad(src, &["--max-depth", "0"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("bad.vlad:2:1: error: recursion too deep (more than 0 nested calls"),
        "{}",
        o.stderr
    );
}

/// Every optimiser of prelude/optimize.vlad that takes a derivative has a plain
/// form using reverse mode beside its `-by` form (README): `newton-argmin` too.
/// Newton's method on the quadratic (x - 3)^2 + 1 lands on its minimum, 3, in a step.
#[test]
fn newton_argmin_has_a_plain_form() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(include \"optimize\")\n\
         (define (f x) (+ (* (- x 3) (- x 3)) 1))\n\
         (newton-argmin f 0.0 1e-12)\n\
         ((newton-argmin-by derivative-F) f 10.0 1e-12)\n",
    );
    let o = vlad(&d, &["t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "3.0\n3.0\n"), "{}", o.stderr);
}

/// `--repeat N` evaluates each top-level expression N times (definitions once) and
/// prints its value once; with `--time` the line gives the median and each run.
#[test]
fn repeat_evaluates_each_expression_n_times_and_prints_its_value_once() {
    let d = Dir::new();
    // 10 iterations: 11 `=`, 10 `-`, 10 `+` a run; `write-real` writes in each run.
    d.file(
        "t.vlad",
        "(define (loop i acc) (if (= i 0) acc (loop (- i 1) (+ acc 1))))\n(loop (write-real 10) 0)\n",
    );
    let o = vlad(&d, &["--metered", "--time", "--repeat", "3", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "10\n10\n10\n10\n"), "{}", o.stderr);
    assert!(o.stderr.contains("metered: 93 primitive operations (+ 30, - 30, = 33)\n"), "{}", o.stderr);
    let time = o.stderr.lines().find(|l| l.starts_with("time: ")).unwrap_or_else(|| panic!("{}", o.stderr));
    let (median, rest) = time["time: ".len()..].split_once(" ms (t.vlad:2:1; median of 3 runs: ").unwrap();
    let runs: Vec<f64> = rest.strip_suffix(" ms)").unwrap().split(' ').map(|t| t.parse().unwrap()).collect();
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!((runs.len(), median.parse::<f64>().unwrap()), (3, sorted[1]), "{time}");
    // An error stops the repetition at the run that failed, as without `--repeat`.
    d.file("e.vlad", "(car (write-real 1))\n");
    let e = vlad(&d, &["--repeat", "3", "e.vlad"]);
    assert_eq!((e.code, e.stdout.as_str()), (1, "1\n"), "{}", e.stderr);
    assert_eq!(vlad(&d, &["--repeat", "0", "t.vlad"]).code, 2);
    assert_eq!(vlad(&d, &["--repeat", "1000001", "t.vlad"]).code, 2);
    // accepted and ignored by `test`, `anf` and the REPL before
    for args in [
        &["test", "--time", "t.vlad"][..],
        &["anf", "--repeat", "2", "t.vlad"],
        &["repl", "--time"],
        &["--repeat", "2"],
    ] {
        let o = vlad(&d, args);
        assert_eq!((o.code, o.stdout.as_str()), (2, ""), "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("apply to running a program (`vlad FILE`, `vlad run FILE`)")
                || o.stderr.contains("applies to running a program (`vlad FILE`, `vlad run FILE`)"),
            "{args:?}: {}",
            o.stderr
        );
    }
}

// ---- vlad test ----

#[test]
fn test_command_metered_prints_the_counts_of_each_file() {
    let d = Dir::new();
    let src = "(define (f x) (* x (+ x 1)))\n(f 3) ===> 12\n(f 2.5) ===> 8.75\n";
    d.file("m.vlad", src);
    let o = vlad(&d, &["test", "--metered", "m.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "2 passed, 0 failed\n"), "{}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines[0], "metered: m.vlad");
    // The same counts as running the file (procedure calls summed over the checks).
    let r = vlad(&d, &["--metered", "m.vlad"]);
    assert_eq!(lines[1..].join("\n"), r.stderr.trim_end(), "run: {}", r.stderr);
    assert_eq!(lines[1], "metered: 4 primitive operations (+ 2, * 2)");
}

#[test]
fn anf_command_checks_the_backend() {
    let d = Dir::new();
    d.file("a.vlad", "(define (f x) x)\n");
    let o = vlad(&d, &["anf", "--backend", "bogus", "a.vlad"]);
    assert_eq!(o.code, 2);
    assert_stderr(&o, "error: --backend must be auto, cpu or cuda, not `bogus`\n");
}

#[test]
fn test_command_compares_and_shows_deeply_nested_values() {
    // 100,000 nested lists: the expected value is compared and, on a
    // mismatch, printed (one buffer, not a copy per level), the failure line
    // keeping the start and the end of each.
    let n = 100_000;
    let d = Dir::new();
    let nest = "(define (nest n) (let loop ((i 0) (acc '())) (if (= i n) acc (loop (+ i 1) (list acc)))))";
    let deep = |k: usize| format!("{}{}", "(".repeat(k), ")".repeat(k));
    d.file("t.vlad", &format!("{nest}\n(nest {n}) ===> {}\n(nest {n}) ===> {}\n", deep(n + 1), deep(n)));
    let o = vlad(&d, &["test", "t.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &o.stdout[..o.stdout.len().min(300)]);
    let clipped =
        |k: usize| format!("{} ... ({} characters in all) ... {}", "(".repeat(400), 2 * k, ")".repeat(400));
    assert_eq!(lines[0], format!("t.vlad:3: expected {}, got {}", clipped(n), clipped(n + 1)));
    assert_eq!(lines[1], "1 passed, 1 failed");
}

#[test]
fn test_command_reports_each_failure_and_a_summary() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(+ 1 2) ===> 3\n(+ 1 2) ===> 4\n(= 1 2)\n(car 5) ===> (error \"pattern\")\n\
         (car 5) ===> (error \"zzz\")\n(+ 1 1) ===> (error \"x\")\n'(1 2) ===> (1 2)\n(list 1 2.0) ===> (1.0 2)\n\
         (list 1 2) ===>\n  (1 2 3)\n",
    );
    let o = vlad(&d, &["test", "t.vlad"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stdout,
        "t.vlad:2: expected 4, got 3
t.vlad:3: expected #t, got #f
t.vlad:5: expected an error matching \"zzz\", got error: pattern mismatch: expected a pair, got 5 (an exact integer), for the pattern `(cons a d)` of `car`
t.vlad:6: expected an error matching \"x\", got 2
t.vlad:9: expected (1 2 3), got (1 2)
4 passed, 5 failed
"
    );
}

#[test]
fn test_command_passes_and_sums_over_files_and_directories() {
    let d = Dir::new();
    d.file("ok/a.vlad", "(+ 1 2) ===> 3\n(< 1 2)\n")
        .file("ok/b.vlad", "(* 2 3) ===> 6\n")
        .file("ok/notes.txt", "(+ 1 1) ===> 3\n")
        .file("bad.vlad", "(+ 1 2) ===> 5\n");
    let o = vlad(&d, &["test", "ok"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "3 passed, 0 failed\n"));
    let o = vlad(&d, &["test", "ok/a.vlad", "bad.vlad", "ok/b.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, "bad.vlad:1: expected 5, got 3\n3 passed, 1 failed\n"));
}

#[test]
fn test_command_counts_a_file_that_does_not_compile_as_a_failure() {
    let d = Dir::new();
    d.file("a.vlad", "(+ 1 2) ===> 3\n").file("b.vlad", "(+ 1 2) ===> 3\n(+ 1\n");
    let o = vlad(&d, &["test", "a.vlad", "b.vlad"]);
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "b.vlad:2:1: error: unclosed list (missing `)`)\n1 passed, 1 failed\n");
}

/// Misplaced arrows: the second of two on one expression was reported as an
/// arrow that "must follow an expression" (it does follow one).
#[test]
fn test_command_names_a_misplaced_arrow() {
    let d = Dir::new();
    for (src, expected) in [
        (
            "(+ 1 2) ===> 3 ===> 3\n",
            "t.vlad:1:16: error: a second `===>`: an expression has one expected value\n",
        ),
        (
            "(+ 1 2) ===> 3\n===> 4\n",
            "t.vlad:2:1: error: a second `===>`: an expression has one expected value\n",
        ),
        ("===> 3\n", "t.vlad:1:1: error: `===>` must follow an expression\n"),
        ("(+ 1 2) ===>\n", "t.vlad:1:9: error: `===>` must be followed by the expected value\n"),
        // (the second arrow is not the expected value)
        ("(+ 1 2) ===> ===> 3\n", "t.vlad:1:9: error: `===>` must be followed by the expected value\n"),
    ] {
        d.file("t.vlad", src);
        let o = vlad(&d, &["test", "t.vlad"]);
        assert_eq!(o.code, 1);
        assert_eq!(o.stdout, format!("{expected}0 passed, 1 failed\n"), "{src}");
    }
}

#[test]
fn test_command_goes_on_past_an_annotation_that_does_not_compile() {
    let d = Dir::new();
    d.file(
        "t.vlad",
        "(nope 1) ===> (error \"unbound variable `nope`\")\n(nope 2) ===> 2\n(if 1) ===> 3\n\
         (define (f x) (g x))\n(f 1) ===> 1\n(define 5 1)\n(+ 1 2) ===> 3\n",
    );
    let o = vlad(&d, &["test", "t.vlad"]);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stdout,
        "t.vlad:2: expected 2, got error: unbound variable `nope`
t.vlad:3: expected 3, got error: `if` needs a test, a consequent and an alternative
t.vlad:5: expected 1, got error: unbound variable `g`
t.vlad:6:9: definition failed: bad `define`: expected a name or `(name parameter ...)`
2 passed, 4 failed
"
    );
    // `vlad run` still rejects the program before anything runs.
    let o = vlad(&d, &["run", "t.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, ""));
}

#[test]
fn test_command_with_include_path() {
    let d = Dir::new();
    d.file("t/t.vlad", "(include \"lib\")\n(c) ===> 3\n").file("libdir/lib.vlad", "(define (c) 3)\n");
    let o = vlad(&d, &["test", "t/t.vlad", "-I", "libdir"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "1 passed, 0 failed\n"));
}

// ---- vlad anf ----

#[test]
fn anf_prints_the_alpha_renamed_a_normal_form() {
    let d = Dir::new();
    d.file("m.vlad", "(define (f x) (* x (+ x 1)))\n(f 3)\n");
    let o = vlad(&d, &["anf", "m.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let re = regex::Regex::new(
        r"^\(define f\n  \(lambda \(x_(\d+)\)\n    \(let\* \(\(t_(\d+) \(\+ x_(\d+) 1\)\)\n +\(t_(\d+) \(\* x_(\d+) t_(\d+)\)\)\)\n      t_(\d+)\)\)\)\n\(let\* \(\(t_(\d+) \(f 3\)\)\)\n  t_(\d+)\)\n$",
    )
    .unwrap();
    let c = re.captures(&o.stdout).unwrap_or_else(|| panic!("{}", o.stdout));
    // x is one variable; the two temporaries are distinct; the result is the product
    assert!(c[1] == c[3] && c[3] == c[5], "{}", o.stdout);
    assert!(c[2] == c[6] && c[2] != c[4] && c[4] == c[7], "{}", o.stdout);
    // the top-level expression is shown too
    assert_eq!(&c[8], &c[9], "{}", o.stdout);
    let o = vlad(&d, &["anf", "--reverse", "m.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains(";; reverse transform of f\n"), "{}", o.stdout);
}

/// The `error` form's primitive is shown with its message, not the index the
/// code holds it by.
#[test]
fn anf_shows_the_message_of_an_error_form() {
    let d = Dir::new();
    d.file("m.vlad", "(define (f x) (error \"f: \\\"no\\\" ∂\" x))\n");
    let o = vlad(&d, &["anf", "m.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let re = regex::Regex::new(r#"\(%error "f: \\"no\\" ∂" p_\d+\)"#).unwrap();
    assert!(re.is_match(&o.stdout), "{}", o.stdout);
}

#[test]
fn anf_shows_the_transforms_of_a_recursive_procedure() {
    // The transform refers to itself (through the lifted global): shown by name,
    // not expanded forever.
    let d = Dir::new();
    d.file("w.vlad", "(define (walk l) (if (null? l) 0.0 (walk (cdr l))))\n");
    let o = vlad(&d, &["anf", "--reverse", "--forward", "w.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("((reverse walk) "), "{}", o.stdout);
    assert!(o.stdout.contains(";; forward transform of walk\n"), "{}", o.stdout);
}

#[test]
fn backpropagators_bind_no_unread_unsensitize() {
    // Where the result's sensitivity goes on, still tagged, to the
    // backpropagator of the call that made it, its `unsensitize` is read by
    // nothing and is not emitted; where nothing else reads the sensitivity
    // (a constant result), it stays, so misuse is still reported.
    let d = Dir::new();
    d.file("b.vlad", "(define (h x) (* x x))\n(define (g x) (h (+ x 1)))\n(define (k x) 3)\n");
    let o = vlad(&d, &["anf", "--reverse", "b.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let bound = regex::Regex::new(r"\((sens_\d+) \(unsensitize ").unwrap();
    let hg = &o.stdout[..o.stdout.find("(define k").unwrap()];
    let mut n = 0;
    for c in bound.captures_iter(hg) {
        n += 1;
        let uses = hg.matches(&format!("{} ", &c[1])).count() + hg.matches(&format!("{})", &c[1])).count();
        assert!(uses >= 2, "{} is bound by unsensitize and never read:\n{}", &c[1], hg);
    }
    assert!(n > 0, "{}", hg);
    let k = &o.stdout[o.stdout.find(";; reverse transform of k").unwrap()..];
    assert!(k.contains("(unsensitize s_"), "{}", k);
}

#[test]
fn printed_reversible_code_stops_indenting() {
    // 200 nested statements: each is printed (forward and inverse), and the
    // indentation stops growing at 64 columns, so the text stays linear in
    // the code's size.
    let n = 200;
    let d = Dir::new();
    d.file(
        "r.vlad",
        &format!("(define-reversible (f x) {}(+= x 1){})\n", "(begin-rev (skip) ".repeat(n), ")".repeat(n)),
    );
    let o = vlad(&d, &["anf", "--inverse", "r.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.matches("(begin-rev").count(), 2 * n, "{}", o.stdout);
    let widest = o.stdout.lines().map(|l| l.len() - l.trim_start().len()).max().unwrap();
    assert_eq!(widest, 64, "{}", o.stdout);
}

#[test]
fn only_the_built_in_prelude_s_car_is_compiled_in_place() {
    // A program file that happens to be called prelude/base.vlad defines its own car.
    let d = Dir::new();
    d.file("prelude/base.vlad", "(define (car x) 42)\n(car (list 1 2))\n");
    let o = vlad(&d, &["prelude/base.vlad"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout, "42\n");
}

/// `read-real` gives the numbers of its input one at a time, several to a line
/// or one, and says which datum is not a number.
#[test]
fn read_real_reads_number_by_number() {
    let d = Dir::new();
    d.file("rr.vlad", "(read-real)\n(+ (read-real) 1)\n(read-real)\n(read-real)\n(read-real)\n");
    let o = vlad_within(&d, &["run", "rr.vlad"], "1 2 3\n\n  4/3\nfoo 5\n", Duration::from_secs(60))
        .expect("vlad hung");
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "1\n3\n3\n4/3\n");
    assert!(o.stderr.starts_with("rr.vlad:5:1: error: read-real: not a number: foo\n"), "{}", o.stderr);
}

/// `read-real` takes no arguments (the empty list, which `(read-real)` passes):
/// given any, it says so, before reading anything; `(read-real '())` reads.
#[test]
fn read_real_with_arguments_is_an_arity_error() {
    let o = run_bad("(read-real 5)\n", &[]);
    assert_eq!(o.code, 1);
    assert_stderr(
        &o,
        "bad.vlad:1:1: error: read-real: expected no arguments (the empty list), got 5 (an exact integer): \
         `read-real` takes none\n  | (read-real 5)\n  | ^\n",
    );
    let o = run_bad("(read-real 1 2)\n", &[]);
    assert!(
        o.stderr.starts_with(
            "bad.vlad:1:1: error: read-real: expected no arguments (the empty list), got (1 . 2) (a pair, \
             which is also what more than one argument make): `read-real` takes none\n"
        ),
        "{}",
        o.stderr
    );
    // (the empty list is no argument: read as `(read-real)` reads)
    let d = Dir::new();
    d.file("rr.vlad", "(read-real '())\n");
    let o = vlad_within(&d, &["run", "rr.vlad"], "2.5\n", Duration::from_secs(60)).expect("vlad hung");
    assert_eq!((o.code, o.stdout.as_str()), (0, "2.5\n"), "{}", o.stderr);
}

/// Runs `vlad ARGS` in `dir` with its address space limited to `kib` KiB
/// (`ulimit -v`), as a sandbox or a small machine would.
fn vlad_limited(dir: &Dir, kib: u64, args: &[&str]) -> Out {
    vlad_after(dir, &format!("ulimit -v {kib}"), args)
}

/// Where memory runs out before `--max-depth`, deep recursion (of the evaluator, and
/// of `plus` over a value nested millions deep) is an error: the stack segment it
/// needed could not be mapped, which once panicked and then spent minutes unwinding.
#[test]
fn recursion_that_runs_out_of_memory_is_an_error() {
    let d = Dir::new();
    d.file("deep.vlad", "(define (f n) (+ 1 (f n)))\n(f 1)\n(+ 1 2)\n").file(
        "plus.vlad",
        "(define d (let loop ((i 0) (d '())) (if (= i 10000000) d (loop (+ i 1) (cons d '())))))\n\
         (pair? (plus d d))\n",
    );
    let o = vlad_limited(&d, 1 << 20, &["test", "deep.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout.starts_with(
            "deep.vlad:2: expected #t, got error: recursion too deep (out of memory for the stack at "
        ),
        "{}",
        o.stdout
    );
    assert!(o.stdout.ends_with("0 passed, 2 failed\n"), "{}", o.stdout);
    let o = vlad_limited(&d, 3 << 20, &["plus.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with(
            "plus.vlad:2:8: error: out of memory for the stack (a value or a recursion nested too deeply)\n"
        ),
        "{}",
        o.stderr
    );
}

/// Under an address-space limit a little above the binary's size (`ulimit -v`,
/// 70 MB more), every program exited with status 70 and no message: the
/// thread it runs on could have no stack of 64 MiB or more, and none smaller
/// was tried. It runs now (on the calling thread, where a second one would not
/// fit), and a recursion too deep for the memory left is the usual error.
#[test]
fn a_tight_address_space_limit_still_runs_programs() {
    let d = Dir::new();
    d.file(
        "p.vlad",
        "(define (count n) (if (= n 0) 0 (+ 1 (count (- n 1)))))\n(count 100)\n(count 100000)\n",
    );
    let kib = std::fs::metadata(env!("CARGO_BIN_EXE_vlad")).unwrap().len() / 1024 + 70_000;
    let o = vlad_limited(&d, kib, &["p.vlad"]);
    match o.code {
        0 => assert_eq!(o.stdout, "100\n100000\n", "{}", o.stderr),
        // (the debug build's frames are larger)
        1 => {
            assert_eq!(o.stdout, "100\n", "{}", o.stderr);
            assert!(
                o.stderr
                    .starts_with("p.vlad:1:38: error: recursion too deep (out of memory for the stack at "),
                "{}",
                o.stderr
            );
        }
        c => panic!("exit status {c}\nstdout: {}\nstderr: {}", o.stdout, o.stderr),
    }
}

/// Under an address-space limit too small for the allocator's first 32 MiB
/// segment, but large enough for the loader to map the program, vlad stops
/// with its out-of-memory error naming the limit (status 1). It aborted
/// before: Rust's start-up allocates before `main`, and the error callback
/// that turns a refused allocation into that error was registered in `main`.
/// The limits tried rise from 8 MB by 4 MB, from those where the loader
/// cannot map the program (its own failure, or a signal) to one where the
/// program runs; none may end in an abort (SIGABRT: `code` -1 with no
/// message of vlad's), and at least one must give the error.
#[test]
fn an_address_space_too_small_to_start_in_is_an_error() {
    let d = Dir::new();
    d.file("p.vlad", "(+ 1 2)\n");
    let mut errors = 0;
    for mb in (8..).step_by(4) {
        let kib = mb * 1000;
        let o = vlad_limited(&d, kib, &["p.vlad"]);
        match o.code {
            0 => {
                assert_eq!(o.stdout, "3\n", "{}", o.stderr);
                break;
            }
            1 => {
                assert_eq!(
                    o.stderr,
                    format!(
                        "error: out of memory (the system refused an allocation under an address-space \
                         limit, `ulimit -v`, of {kib} kB); vlad stopped\n"
                    )
                );
                errors += 1;
            }
            // (the loader's failure: "error while loading shared libraries")
            127 => assert!(o.stderr.contains("error while loading"), "{}", o.stderr),
            // (a signal: only where the loader itself has no room)
            -1 => assert!(errors == 0 && o.stderr.is_empty(), "at {kib} kB, a signal: {}", o.stderr),
            c => panic!("at {kib} kB, exit status {c}\nstdout: {}\nstderr: {}", o.stdout, o.stderr),
        }
        assert!(mb < 4096, "no limit up to 4 GB runs the program");
    }
    assert!(errors > 0, "no limit gave the out-of-memory error");
}

/// A control group of its own under the one this test runs in, whose memory
/// is limited to `bytes` (cgroup v1's memory controller, or v2's), removed
/// when dropped; `None` where one cannot be made (not root, no writable
/// cgroup file system, v2 without the memory controller delegated).
struct MemoryGroup(PathBuf);

impl MemoryGroup {
    fn new(bytes: u64) -> Option<MemoryGroup> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("vlad-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
            let (root, limit) = if ctl.is_empty() {
                ("/sys/fs/cgroup", "memory.max")
            } else if ctl.split(',').any(|c| c == "memory") {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            } else {
                continue;
            };
            let dir = Path::new(root).join(path.trim_start_matches('/')).join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let g = MemoryGroup(dir);
            // (and a process can be moved into it: a v2 hierarchy may refuse)
            let procs = g.0.join("cgroup.procs");
            let moves = || {
                Command::new("sh")
                    .arg("-c")
                    .arg(format!("echo $$ > '{}'", procs.display()))
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if std::fs::write(g.0.join(limit), bytes.to_string()).is_ok() && moves() {
                return Some(g);
            }
        }
        None
    }

    /// Runs `vlad ARGS` in `dir`, in this group.
    fn vlad(&self, dir: &Dir, args: &[&str]) -> Out {
        vlad_after(dir, &format!("echo $$ > '{}'", self.0.join("cgroup.procs").display()), args)
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // (a group whose last process has just exited can be busy a moment)
        for _ in 0..20 {
            if std::fs::remove_dir(&self.0).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Under a control group's memory limit (a container's), which lets the stack
/// be mapped and kills the process (without a message) as it touches more
/// than the limit, a runaway recursion is an error before the limit, and so
/// is `plus` over a value nested millions deep; a recursion that fits still
/// runs (a million deep; 2,000 in a debug build, whose frames are some 60 KiB
/// a call). A vector larger than the limit is refused, and data that grows
/// past it is an error: vectors, a list, big integers. (Once, each of these
/// but the recursion that fits was killed, exit status 137, under this 600
/// MiB limit.)
#[test]
fn under_a_control_groups_memory_limit_deep_recursion_and_large_data_are_errors() {
    const FITS: u32 = if cfg!(debug_assertions) { 2_000 } else { 1_000_000 };
    let Some(g) = MemoryGroup::new(600 << 20) else {
        eprintln!(
            "under_a_control_groups_memory_limit_deep_recursion_and_large_data_are_errors: skipped: \
             no control group with a memory limit can be made here (needs root and a writable cgroup file system)"
        );
        return;
    };
    let d = Dir::new();
    d.file("deep.vlad", "(define (f n) (+ 1 (f n)))\n(f 1)\n")
        .file("plus.vlad", "(define d (let loop ((i 0) (d '())) (if (= i 3000000) d (loop (+ i 1) (cons d '())))))\n(pair? (plus d d))\n")
        .file("fits.vlad", &format!("(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1)))))\n(f {FITS})\n"));
    // (the stack's check or, where the recursion's memory grows past the
    // evaluator's check every so many steps first, that one: a debug build)
    let o = g.vlad(&d, &["deep.vlad"]);
    assert!(
        (o.code == 1
            && o.stderr
                .starts_with("deep.vlad:1:20: error: recursion too deep (out of memory for the stack at "))
            || (o.code == 3
                && o.stderr.starts_with("deep.vlad:1:20: error: out of memory: the program holds ")),
        "{}: {}",
        o.code,
        o.stderr
    );
    let o = g.vlad(&d, &["plus.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with(
            "plus.vlad:2:8: error: out of memory for the stack (a value or a recursion nested too deeply)\n"
        ),
        "{}",
        o.stderr
    );
    let o = g.vlad(&d, &["fits.vlad"]);
    assert_eq!((o.code, o.stdout), (0, format!("{FITS}\n")), "{}", o.stderr);
    // (a vector larger than the limit is refused as one larger than the
    // machine is; one within it is made)
    d.file(
        "vec.vlad",
        "(vec-length (make-vec 100000000 1.0)) ===> 100000000\n(vec-length (make-vec 10000000 1.0)) ===> 10000000\n",
    );
    let o = g.vlad(&d, &["test", "vec.vlad"]);
    assert_eq!(
        o.stdout,
        "vec.vlad:1: expected 100000000, got error: make-vec: a vector of 100000000 numbers needs 0.8 GB, \
         more than the 0.6 GB of memory this process may use (its control group's limit)\n1 passed, 1 failed\n",
        "{}",
        o.stderr
    );
    // (data that grows past the limit: vectors of 100 MB kept in a list, each
    // checked against the memory left as it is made; a list of 10^8 numbers,
    // stopped by the evaluator's check every so many steps, with exit status
    // 3 as for the other limits: slow to reach the limit in a debug build)
    d.file(
        "vecs.vlad",
        "(let loop ((i 0) (l '())) (if (= i 20) (length l) (loop (+ i 1) (cons (make-vec 12500000 1.0) l))))\n",
    )
    .file("list.vlad", "(let loop ((i 0) (l '())) (if (= i 100000000) (length l) (loop (+ i 1) (cons i l))))\n");
    let o = g.vlad(&d, &["vecs.vlad"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with("vecs.vlad:1:71: error: make-vec: a vector of 12500000 numbers needs 95 MB, and "),
        "{}",
        o.stderr
    );
    if !cfg!(debug_assertions) {
        let o = g.vlad(&d, &["list.vlad"]);
        assert_eq!(o.code, 3, "{}", o.stderr);
        assert!(
            o.stderr.starts_with("list.vlad:1:58: error: out of memory: the program holds "),
            "{}",
            o.stderr
        );
    }
    // (a recursion multiplying a big integer as it descends, each level
    // holding a longer one: memory growing as the square of the depth, some
    // 100 MB between the evaluator's looks every so many steps near the
    // limit; stopped by the look that the big integers made prompt. Once
    // killed, exit status 137. A debug build's frames may run out of stack
    // first.)
    d.file(
        "big.vlad",
        "(define (f n x) (if (= n 0) 0 (+ 1 (f (- n 1) (* x 4611686018427387903)))))\n(f 1000000 3)\n",
    );
    let o = g.vlad(&d, &["big.vlad"]);
    assert!(
        (o.code == 3 && o.stderr.starts_with("big.vlad:1:47: error: out of memory: the program holds "))
            || (cfg!(debug_assertions)
                && o.code == 1
                && o.stderr.starts_with(
                    "big.vlad:1:36: error: recursion too deep (out of memory for the stack at "
                )),
        "{}: {}",
        o.code,
        o.stderr
    );
}

/// Under a memory limit, a program nested too deeply for the stack its
/// compilation needs (400,000 nested `if`s, `+`s, `lambda`s) is an error,
/// not `stacker`'s panic ("mmap failed to allocate stack", once reported as an
/// internal error with exit status 70). (Without the limit such programs
/// compile and run: `deeply_nested_conditionals_run`,
/// `eval::tests::deeply_nested_programs_compile_on_a_small_stack`.)
#[test]
fn a_program_nested_too_deeply_for_the_memory_left_is_an_error() {
    let n = 400_000;
    let d = Dir::new();
    let nest = |open: &str, inner: &str| format!("{}{inner}{}", open.repeat(n), ")".repeat(n));
    d.file("ifs.vlad", &format!("(define (f x) {})\n(f 5)\n", nest("(if (< x 0) 0 ", "x")))
        .file("sums.vlad", &format!("(define (f x) {})\n(f 0)\n", nest("(+ 1 ", "x")))
        .file("lambdas.vlad", &format!("(define f {})\n(pair? f)\n", nest("(lambda (x) ", "x")));
    let message = "error: out of memory for the stack (a program or a value nested too deeply)\n";
    for f in ["ifs.vlad", "sums.vlad", "lambdas.vlad"] {
        let o = vlad_limited(&d, 1_500_000, &[f]);
        assert_eq!((o.code, o.stderr.as_str(), o.stdout.as_str()), (1, message, ""), "{f}");
    }
    // (`vlad test`: the file's failure, wherever the passes ran out: reading
    // its data or compiling)
    let o = vlad_limited(&d, 1_500_000, &["test", "sums.vlad"]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (1, format!("sums.vlad: {message}0 passed, 1 failed\n").as_str(), "")
    );
}

/// A value nested too deeply for the memory left to walk, met while running
/// (a reversible procedure's argument, 3,000,000 lists deep), is that
/// expression's error: `vlad test` fails that check and runs the ones after
/// it, and a program stops there with the error at the expression. (It ended
/// the whole run with the bare message, as a compile-time one does.)
#[test]
fn a_value_nested_too_deeply_for_the_memory_left_is_its_expressions_error() {
    let d = Dir::new();
    d.file(
        "deep.vlad",
        "(define-reversible (id x) (skip))
(define (deep n) (let loop ((i 0) (d '())) (if (= i n) d (loop (+ i 1) (list d)))))
(+ 1 2)
===> 3
(pair? (call id (deep 3000000)))
===> #t
(* 2 3)
===> 6
",
    );
    let message = "error: out of memory for the stack (a program or a value nested too deeply)";
    let o = vlad_limited(&d, 1_500_000, &["test", "deep.vlad"]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (1, format!("deep.vlad:5: expected #t, got {message}\n2 passed, 1 failed\n").as_str(), ""),
    );
    let o = vlad_limited(&d, 1_500_000, &["deep.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, "3\n"));
    assert!(o.stderr.starts_with(&format!("deep.vlad:5:1: {message}\n")), "{}", o.stderr);
}

/// A list nested millions deep in its first element prints (the printer once
/// overflowed its 1 GiB stack at 3,000,000 levels).
#[test]
fn a_value_nested_millions_deep_prints() {
    let n = 3_000_000;
    let d = Dir::new();
    d.file(
        "deep.vlad",
        &format!("(let loop ((i 0) (d '())) (if (= i {n}) d (loop (+ i 1) (cons d '()))))\n"),
    );
    let o = vlad(&d, &["deep.vlad"]);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    assert_eq!(o.stdout, format!("{}{}\n", "(".repeat(n + 1), ")".repeat(n + 1)));
}

/// A source file that is not UTF-8 is an error at its first bad byte, in a
/// program and in an included file.
#[test]
fn a_file_that_is_not_utf8_is_an_error_at_the_bad_byte() {
    let d = Dir::new();
    std::fs::write(d.path().join("bad.vlad"), b"(+ 1 2)\n(car \xff 1)\n").unwrap();
    d.file("inc.vlad", "(include \"bad.vlad\")\n");
    for f in ["bad.vlad", "inc.vlad"] {
        let o = vlad(&d, &[f]);
        assert_eq!(o.code, 1);
        assert_stderr(
            &o,
            "bad.vlad:2:6: error: invalid UTF-8 (byte 0xFF): source files must be UTF-8 text
  | (car \u{fffd} 1)
  |      ^
",
        );
    }
}

/// Data with shared structure: `(big n)` is `n` pairs each holding the one
/// before twice (2^n reals as a tree). The derivatives take it in time of its
/// size, on a tape or by the transform (AD.md: `zero`, `plus`... keep the
/// sharing). The tape's walks took each pair as often as it is reached, so
/// gradient-R, vjp and jvp of such data ran for ever (here: past the timeout);
/// forcing a lazy zero of it did too. Values: the derivative of `leftmost`
/// (the one real it reads) is 1 there, the others' zeros; of x*x at 1.5, 3.
#[test]
fn derivatives_of_data_with_shared_structure_take_time_in_its_size() {
    let src = "(define (big n) (let loop ((i 0) (v 1.5)) (if (= i n) v (loop (+ i 1) (cons v v)))))\n\
               (define (big2 n) (if (= n 0) 1.5 (let ((v (big2 (- n 1)))) (list v v))))\n\
               (define (leftmost v) (if (pair? v) (leftmost (car v)) v))\n\
               (define (rightmost v) (if (pair? v) (rightmost (cdr v)) v))\n\
               (define (sq v) (* (leftmost v) (leftmost v)))\n\
               (define g ((gradient-R leftmost) (big 60)))\n\
               (list (leftmost g) (rightmost g))\n\
               (leftmost (vjp leftmost (big 60) 2.0))\n\
               (leftmost (cdr (jvp (lambda (x) (cons x (big 60))) 1.0 1.0)))\n\
               (rightmost (jvp (lambda (v) (cons (leftmost v) v)) (big 60) (big 60)))\n\
               (define h (vjp leftmost (big2 40) 2.0))\n\
               (leftmost ((gradient-R sq) h))\n\
               (leftmost ((gradient-R sq) (big2 40)))\n\
               (leftmost (vjp (lambda (x) (cons x (big2 40))) 1.0 (cons 1.0 (big2 40))))\n";
    let d = Dir::new();
    d.file("s.vlad", src);
    let want = "(1 0.0)\n2.0\n0.0\n1.5\n4.0\n3.0\n1.0\n";
    for extra in [&[][..], &["--no-tape"][..]] {
        let mut args = vec!["--timeout", "60"];
        args.extend(extra);
        args.push("s.vlad");
        let o = vlad(&d, &args);
        assert_eq!((o.code, o.stdout.as_str()), (0, want), "{extra:?}: {}", o.stderr);
    }
}

/// A second derivative through a recursive reversible procedure, reverse
/// mode inside: the nested derivative of each `call` ran the callee's whole
/// derivative (its `%rev-vjp` rule), so a recursion n deep cost n² (4000
/// deep: 18 s in a release build; 10000 deep: ~110 s by that growth, past
/// this test's timeout). The translation that nested derivatives go through now applies
/// the callee's translation, so the cost is linear (10000 deep: ~2 s in a
/// release build, 23 s a derivative in the debug build `cargo test` makes).
/// Each derivative, with the tape and without, runs in a process of its own,
/// 8000 deep (~18 s each in the debug build, a third of the 60 s limit; the
/// n² cost would take ~70 s in a release build). G(x) = Σ 0.001 sin x over n
/// levels: G'' = -0.001 n sin x.
#[test]
fn second_derivatives_through_a_deep_reversible_recursion_are_linear() {
    let n = 8000;
    let defs = format!(
        "(define ((dR f) x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1)))))\n\
         (define-reversible (rp y x n) (if-rev (= n 0) (skip)\n\
           (begin-rev (-= n 1) (call rp y x n) (+= y (* 0.001 (sin x))) (+= n 1)) (= n 0)))\n\
         (define (G x) (car (call rp 0.0 x {n})))\n"
    );
    let d = Dir::new();
    d.file("rr.vlad", &format!("{defs}((dR (dR G)) 1.0)\n"));
    d.file("fr.vlad", &format!("{defs}((derivative (dR G)) 1.0)\n"));
    let want = -0.001 * n as f64 * 1f64.sin();
    for file in ["rr.vlad", "fr.vlad"] {
        for extra in [&[][..], &["--no-tape"][..]] {
            let mut args = vec!["--timeout", "60"];
            args.extend(extra);
            args.push(file);
            let o = vlad(&d, &args);
            assert_eq!(o.code, 0, "{file} {extra:?}: {}", o.stderr);
            let g: f64 = o.stdout.trim().parse().unwrap();
            assert!((g - want).abs() <= 1e-9 * want.abs(), "{file} {extra:?}: {g} against {want}");
        }
    }
}

/// `call` and `uncall` (and `rev-grad`) converted each argument's parts
/// before finding that the argument was not a proper list (which is then held
/// as it is): a pair sharing its parts, `(cons x x)` nested 60 deep, took time
/// exponential in its depth, beyond `--max-steps`. The spine is looked at
/// first now. And a list nested in lists millions deep is converted (and
/// back), and `rev-grad` shapes its derivatives, without overflowing the
/// native stack.
#[test]
fn reversible_calls_take_shared_and_deeply_nested_arguments_at_once() {
    let d = Dir::new();
    d.file(
        "r.vlad",
        "(define (dup n x) (if (= n 0) x (dup (- n 1) (cons x x))))\n\
         (define (nest n x) (if (= n 0) x (nest (- n 1) (list x))))\n\
         (define-reversible (p v) (skip))\n\
         (define (depth l) (let loop ((l l) (k 0)) (if (pair? l) (loop (car l) (+ k 1)) k)))\n\
         (depth (car (call p (dup 60 1.0))))\n\
         (depth (car (uncall p (dup 60 1.0))))\n\
         (depth (car (call p (nest 1000000 1.0))))\n\
         (define-reversible (q x v) (skip))\n\
         (car (rev-grad q 0 1.0 (nest 1000000 1.0)))\n",
    );
    let o = vlad(&d, &["--timeout", "60", "r.vlad"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "60\n60\n1000000\n1\n"), "{}", o.stderr);
}

/// Long reductions add fixed chunks in order, whatever the thread count
/// (docs/vectors.md), but with `VLAD_THREADS=1` they were one sequential sum,
/// and differed in the last bits. The printed values are compared exactly.
#[test]
fn long_reductions_do_not_depend_on_the_thread_count() {
    let d = Dir::new();
    d.file(
        "r.vlad",
        "(define v (vec-sin (vec-scale 0.001 (vec-iota 1000003))))\n\
         (vec-sum (vec-exp v))\n(vec-sum v)\n(vec-dot v v)\n",
    );
    let out = |threads: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_vlad"))
            .args(["--backend", "cpu", "r.vlad"])
            .env("VLAD_THREADS", threads)
            .current_dir(d.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = out("1");
    assert_eq!(one.lines().count(), 3, "{one}");
    assert_eq!(one, out("2"));
    assert_eq!(one, out("5"));
}

/// A procedure's code is compiled on its first call, during evaluation; where
/// that ran past `--timeout` (a million nested `if`s: seconds), the watchdog's
/// message said "a primitive operation was still running". It says it was
/// compiling (a debug build may still be compiling the file: that says so too).
#[test]
fn a_timeout_while_compiling_says_so() {
    let d = Dir::new();
    let n = 1_000_000;
    d.file("n.vlad", &format!("{}0{}\n", "(if #t ".repeat(n), " 1)".repeat(n)));
    for args in [&["--timeout", "1", "n.vlad"][..], &["test", "--timeout", "1", "n.vlad"][..]] {
        let o = vlad(&d, args);
        let text = format!("{}{}", o.stdout, o.stderr);
        assert_eq!(o.code, 3, "{args:?}: {text}");
        assert!(
            text.contains("while compiling a procedure for its first call")
                || text.contains("while reading and compiling, before evaluation"),
            "{args:?}: {text}"
        );
    }
}
