//! The REPL when standard input is not a terminal: it reads inputs from the pipe,
//! prints each value as it is evaluated, reports errors on stderr and goes on,
//! and exits non-zero if anything failed.

use std::io::Write;
use std::process::{Command, Stdio};

struct Out {
    stdout: String,
    stderr: String,
    code: i32,
}

fn pipe(input: &str, args: &[&str]) -> Out {
    pipe_bytes(input.as_bytes(), args)
}

fn pipe_bytes(input: &[u8], args: &[&str]) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vlad"))
        .args(args)
        .env("VLAD_HISTORY", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vlad");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    Out {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

#[test]
fn echo_expression_prints_its_value() {
    let o = pipe("(+ 1 2)\n", &[]);
    assert_eq!(o.stdout, "3\n");
    assert_eq!(o.stderr, "");
    assert_eq!(o.code, 0);
    let o = pipe("(+ 1 2)\n", &["repl"]);
    assert_eq!(o.stdout, "3\n");
}

#[test]
fn definitions_accumulate_and_inputs_span_lines() {
    let o = pipe(
        "(define (sq x)\n  ; a comment with ( in it\n  (* x x))\n(sq 5) (sq 6)\n(sq #| ) |#\n 7)\n",
        &[],
    );
    assert_eq!(o.stdout, "25\n36\n49\n", "stderr: {}", o.stderr);
    assert_eq!(o.code, 0);
}

#[test]
fn errors_go_to_stderr_and_the_session_continues() {
    let o = pipe("(define (half x) (/ x 2))\n\n(car 5)\n(half 10)\n(nope)\n(half 4)\n", &[]);
    assert_eq!(o.stdout, "5\n2\n");
    assert!(o.stderr.contains("error: pattern mismatch"), "{}", o.stderr);
    // Locations count the lines of standard input.
    assert!(o.stderr.contains("<stdin>:3:1"), "{}", o.stderr);
    assert!(o.stderr.contains("<stdin>:5:2: error: unbound"), "{}", o.stderr);
    assert_ne!(o.code, 0);
    // No prompts, no colours.
    assert!(!o.stdout.contains("vlad>") && !o.stdout.contains('\x1b'));
    assert!(!o.stderr.contains('\x1b'));
}

#[test]
fn redefinition_replaces_a_name_for_later_inputs() {
    let o = pipe(
        "(define k 1)\n(define (get) k)\n(define k 2)\nk\n(get)\n(define (car p) 99)\n(car '(1 2))\n",
        &[],
    );
    // `get` was compiled against the first `k`; a prelude name can be replaced too.
    assert_eq!(o.stdout, "2\n1\n99\n", "{}", o.stderr);
    assert_eq!(o.code, 0);
}

#[test]
fn a_definition_that_fails_to_evaluate_leaves_the_earlier_one() {
    // The failing definitions print their error once; the names keep their
    // earlier values (or stay unbound) instead of repeating the error.
    let o = pipe(
        "(define x 5)\n(define x (car 5))\nx\n(define y (+ y 1))\ny\n(define z (car 5))\nz\n(define (w) 3)\n(w)\n",
        &[],
    );
    assert_eq!(o.stdout, "5\n3\n", "{}", o.stderr);
    assert_eq!(o.stderr.matches("pattern mismatch").count(), 2, "{}", o.stderr);
    assert_eq!(o.stderr.matches("depends on its own value").count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("unbound variable `y`"), "{}", o.stderr);
    assert!(o.stderr.contains("unbound variable `z`"), "{}", o.stderr);
    assert_ne!(o.code, 0);
}

#[test]
fn an_unfinished_input_is_an_error() {
    let o = pipe("(+ 1 2)\n(+ 1\n", &[]);
    assert_eq!(o.stdout, "3\n");
    assert!(o.stderr.contains("<stdin>:2:1"), "{}", o.stderr);
    assert_ne!(o.code, 0);
}

#[test]
fn commands_work_without_a_terminal() {
    let o = pipe(
        ":help\n(define (sq x) (* x x))\n:anf (sq (+ 1 2))\n:reverse sq\n:forward sq\n:time (sq 3)\n:meter ((gradient sq) 3)\n:env\n:bogus\n:anf\n:quit\n(sq 100)\n",
        &[],
    );
    let s = &o.stdout;
    assert!(s.contains(":load FILE"), "{}", s);
    assert!(s.contains("(sq t_"), "{}", s);
    assert!(s.contains("(reverse *)"), "{}", s);
    assert!(s.contains("(forward *)"), "{}", s);
    assert!(s.contains("9\ntime: "), "{}", s);
    assert!(s.contains("6\nprimitive operations: "), "{}", s);
    assert!(s.contains("derivative"), "{}", s);
    assert!(s.contains("sq  procedure"), "{}", s);
    // :quit stops reading.
    assert!(!s.contains("10000"), "{}", s);
    assert!(o.stderr.contains("unknown command `:bogus`"), "{}", o.stderr);
    assert!(o.stderr.contains("usage: :anf EXPR"), "{}", o.stderr);
}

/// The transforms shown by `:reverse` and `:forward` give the text of an
/// `error` form or a labelled `write`, not its index under the transform's
/// tag (they showed `(reverse 5)`, `(forward 5 (perturbation 0))`).
#[test]
fn transforms_show_the_text_of_error_and_write() {
    let o = pipe(
        "(define (f x) (if (< x 0) (error \"f: negative\" x) (write \"f at\" (* x x))))\n:reverse f\n:forward f\n",
        &[],
    );
    let s = &o.stdout;
    assert!(s.contains("((reverse %error) \"f: negative\" "), "{}", s);
    assert!(s.contains("((reverse %write-label) \"f at\" "), "{}", s);
    assert!(s.contains("((forward %error) \"f: negative\" "), "{}", s);
    assert!(s.contains("((forward %write-label) \"f at\" "), "{}", s);
    assert!(!s.contains("%error) (") && !s.contains("%write-label) ("), "{}", s);
}

#[test]
fn a_misspelt_command_or_name_gets_a_suggestion() {
    let o = pipe(
        ":lod lib.vlad\n:tim (+ 1 2)\n(define (square-sum x y) (+ (* x x) (* y y)))\n(sqaure-sum 1 2)\n",
        &[],
    );
    assert!(o.stderr.contains("unknown command `:lod` (did you mean `:load`?)"), "{}", o.stderr);
    assert!(o.stderr.contains("unknown command `:tim` (did you mean `:time`?)"), "{}", o.stderr);
    assert!(o.stderr.contains("unbound variable `sqaure-sum` (did you mean `square-sum`?)"), "{}", o.stderr);
}

#[test]
fn a_byte_order_mark_starting_the_input_is_skipped() {
    let o = pipe("\u{FEFF}(+ 1 2)\n", &[]);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "3\n", ""));
}

#[test]
fn load_reads_a_file_like_include() {
    let tmp = tempfile::Builder::new().prefix("vlad-repl-load-").tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("lib.vlad"), "(define (triple x) (* 3 x))\n").unwrap();
    let o = pipe(
        &format!(
            ":load {}\n(triple 14)\n:load \"{}\"\n",
            dir.join("lib").display(),
            dir.join("lib.vlad").display()
        ),
        &[],
    );
    assert_eq!(o.stdout, "42\n", "{}", o.stderr);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn meter_separates_primal_and_derivative_work() {
    let o = pipe(":meter (* 2 (sin 1.))\n:meter ((gradient (lambda (x) (* x (sin x)))) 2.)\n", &[]);
    let lines: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("primitive operations")).collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    assert_eq!(lines[0], "primitive operations: 2 (primal 2, derivative 0)");
    // The gradient runs x sin x on a tape (primal: sin and *), then its backward
    // sweep (derivative: * gives yb x2 and yb x1, sin gives yb (cos x)).
    assert_eq!(lines[1], "primitive operations: 6 (primal 2, derivative 4)");
    // By the transform (--no-tape) all of it is transformed code.
    let o = pipe(":meter ((gradient (lambda (x) (* x (sin x)))) 2.)\n", &["--no-tape"]);
    let line =
        o.stdout.lines().find(|l| l.starts_with("primitive operations")).unwrap_or_default().to_string();
    assert!(line.contains("(primal 0, derivative "), "{}", o.stdout);
}

/// A failing lazy AD operation in the value (`unperturb` of a pair of plain numbers)
/// is an error of the input, also under `:time` and `:meter`, not a printed
/// `#<error: ...>`.
#[test]
fn a_failing_lazy_ad_operation_is_an_error_of_the_input() {
    let o = pipe(
        "(unperturb (cons 1 2))\n:time (unperturb (cons 1 2))\n:meter (unperturb (cons 1 2))\n(+ 1 2)\n",
        &[],
    );
    assert_eq!(o.code, 1);
    assert!(!o.stdout.contains("#<error"), "{}", o.stdout);
    assert!(o.stdout.ends_with("3\n"), "{}", o.stdout);
    assert_eq!(
        o.stderr.matches("error: unperturb: expected a perturbation value, got 1").count(),
        3,
        "{}",
        o.stderr
    );
    assert!(o.stderr.starts_with("<stdin>:1:1: error: unperturb"), "{}", o.stderr);
}

#[test]
fn anf_of_a_reversible_procedure_shows_its_definition() {
    let o = pipe("(define-reversible (r x) (+= x 1))\n:anf r\n(call r 1)\n", &[]);
    assert_eq!(o.stdout, "(define-reversible (r x)\n  (+= x 1))\n(2)\n", "{}", o.stderr);
    assert_eq!(o.code, 0);
}

/// Bytes that are not UTF-8 ended the session with "error: reading standard input:
/// stream did not contain valid UTF-8" and no location; they are reported as in a
/// file, at `<stdin>:LINE:COL`, the input they are in is skipped, and reading goes on.
#[test]
fn invalid_utf8_is_reported_at_its_place_and_the_session_goes_on() {
    let o = pipe_bytes(b"(+ 1 2)\n(define (f x)\n  (* x \xff 2))\n(+ 3 4)\n(f \xfe\n", &[]);
    assert_eq!(o.stdout, "3\n7\n", "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "<stdin>:3:8: error: invalid UTF-8 (byte 0xFF): input must be UTF-8 text; this input is skipped\n  |   (* x \u{fffd} 2))\n  |        ^\n\
         <stdin>:5:4: error: invalid UTF-8 (byte 0xFE): input must be UTF-8 text; this input is skipped\n  | (f \u{fffd}\n  |    ^\n"
    );
    assert_eq!(o.code, 1);
}

/// A control character outside strings and comments was read into a symbol
/// ("unbound variable `a`" with the NUL invisible): it is a reader error naming it.
#[test]
fn a_control_character_is_an_error_naming_it() {
    let o = pipe_bytes(b"(+ 1 2)\n(f a\0b)\n(+ 3 4)\n", &[]);
    assert_eq!(o.stdout, "3\n7\n", "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "<stdin>:2:5: error: unexpected control character U+0000 (allowed only in strings and comments)\n  | (f a\u{2400}b)\n  |     ^\n"
    );
    assert_eq!(o.code, 1);
}

/// `:load` of something that is not a loadable file said "include not found"
/// (for `/dev/null`, which exists), located in an `(include ...)` the user never
/// typed; each case now says what is wrong, at the name as typed.
#[test]
fn load_says_why_a_file_cannot_be_loaded() {
    let tmp = tempfile::Builder::new().prefix("vlad-repl-load-bad-").tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let sub = dir.join("sub").display().to_string();
    let o = pipe(&format!(":load /dev/null\n:load {sub}\n:load  \"{sub}/nope\"\n:load\n(+ 1 2)\n"), &[]);
    assert_eq!(o.stdout, "3\n", "{}", o.stderr);
    let expected = format!(
        "<stdin>:1:7: error: cannot load \"/dev/null\": /dev/null is a character device, not a regular file; :load names a .vlad file\n\
         \x20 | :load /dev/null\n  |       ^\n\
         <stdin>:2:7: error: cannot load \"{sub}\": {sub} is a directory; :load names a .vlad file\n\
         \x20 | :load {sub}\n  |       ^\n\
         <stdin>:3:8: error: cannot load \"{sub}/nope\": no such file (searched the current directory, -I directories, and the prelude)\n\
         \x20 | :load  \"{sub}/nope\"\n  |        ^\n"
    );
    assert!(o.stderr.starts_with(&expected), "{}", o.stderr);
    assert!(o.stderr.contains("usage: :load FILE"), "{}", o.stderr);
    assert_eq!(o.code, 1);
}

/// Errors about a command (unknown, missing or extra argument, more than one
/// expression, a definition where an expression is wanted) had no location, and
/// errors in a command's argument showed the line with the command blanked out;
/// `:quit extra` quit and `:env extra` ignored the argument.
#[test]
fn command_errors_are_located_in_the_line_as_typed() {
    let o = pipe(
        ":anf 1 2\n:time\n  :time (define x 1)\n:env extra\n:bogus 1\n:anf (+ 1\n  nope)\n:meter (car 5)\n:quit now\n(+ 9 9)\n",
        &[],
    );
    assert!(o.stdout.ends_with("18\n"), "{}", o.stdout);
    let expected = [
        "<stdin>:1:8: error: expected one expression; this is another one\n  | :anf 1 2\n  |        ^\n",
        "<stdin>:2:1: error: usage: :time EXPR\n  | :time\n  | ^\n",
        "<stdin>:3:9: error: expected an expression, not a definition\n  |   :time (define x 1)\n  |         ^\n",
        "<stdin>:4:6: error: `:env` takes no argument\n  | :env extra\n  |      ^\n",
        "<stdin>:5:1: error: unknown command `:bogus` (:help lists them)\n  | :bogus 1\n  | ^\n",
        "<stdin>:7:3: error: unbound variable `nope`\n  |   nope)\n  |   ^\n",
        "<stdin>:8:8: error: pattern mismatch: expected a pair, got 5 (an exact integer), for the pattern `(cons a d)` of `car`\n  | :meter (car 5)\n  |        ^\n",
        "<stdin>:9:7: error: `:quit` takes no argument\n  | :quit now\n  |       ^\n",
    ];
    assert_eq!(o.stderr, expected.concat());
    assert_eq!(o.code, 1);
    // errors about the argument's value as a whole had no place
    // (a reversible procedure is a procedure to `procedure?`: it was told
    // "needs a procedure")
    let o =
        pipe(":reverse 3\n:forward (+ 1 2)\n:anf ; c\n(define-reversible (p v) (skip))\n:reverse p\n", &[]);
    let expected = [
        "<stdin>:1:10: error: :reverse needs a procedure, but the expression's value is 3\n  | :reverse 3\n  |          ^\n",
        "<stdin>:2:10: error: :forward needs a procedure, but the expression's value is 3\n  | :forward (+ 1 2)\n  |          ^\n",
        "<stdin>:3:6: error: expected an expression\n  | :anf ; c\n  |      ^\n",
        "<stdin>:5:10: error: :reverse shows the transformed code of a lambda or a primitive's rule; \
         #<reversible p> is a reversible procedure, differentiated by running it backward (as `rev-grad` \
         does), not by transformed code\n  | :reverse p\n  |          ^\n",
    ];
    assert_eq!(o.stderr, expected.concat());
}

#[test]
fn a_definition_may_use_a_name_a_later_input_defines() {
    // LANGUAGE.md: each expression sees every definition before it, as one
    // `letrec`, in the REPL as in a file: mutually recursive procedures may
    // be typed one input at a time. Until the name is defined, a call that
    // reaches it fails (and the definition that uses it gets a note).
    let o = pipe(
        "(define (ev? n) (if (= n 0) #t (od? (- n 1))))\n(ev? 0)\n(ev? 3)\n\
         (define (od? n) (if (= n 0) #f (ev? (- n 1))))\n(ev? 10)\n(od? 7)\n(ev? 7)\n",
        &[],
    );
    assert_eq!(o.stdout, "#t\n#t\n#t\n#f\n", "{}", o.stderr);
    assert!(o.stderr.contains("<stdin>:1:33: note: `od?` is not defined yet"), "{}", o.stderr);
    assert!(
        o.stderr.contains("<stdin>:1:33: error: unbound variable `od?` (it has not been defined)"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("in ev? called at <stdin>:3:1"), "{}", o.stderr);
    assert_eq!(o.stderr.matches("error:").count(), 1, "{}", o.stderr);
    assert_ne!(o.code, 0);

    // Derivatives of a procedure whose helper comes later: d/dx x sin x = sin x + x cos x.
    let o = pipe(
        "(define (u x) (* x (w x)))\n(define (w x) (sin x))\n((derivative u) 2.0)\n((gradient-R u) 2.0)\n",
        &[],
    );
    let want = 2f64.sin() + 2.0 * 2f64.cos();
    let got: Vec<f64> = o.stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert!(got.len() == 2 && got.iter().all(|g| (g - want).abs() < 1e-12), "{:?} {}", got, o.stderr);
    assert_eq!(o.code, 0, "{}", o.stderr);

    // A name an expression uses directly must be defined before it; a
    // definition that fails (to compile or to evaluate) leaves the name
    // undefined for the definitions that use it, until one succeeds.
    let o = pipe(
        "(q)\n(define (f) (q))\n(define (q) (if))\n(f)\n(define q (car 5))\n(f)\n(define (q) 4)\n(f)\n",
        &[],
    );
    assert_eq!(o.stdout, "4\n", "{}", o.stderr);
    assert!(o.stderr.contains("<stdin>:1:2: error: unbound variable `q`\n"), "{}", o.stderr);
    assert_eq!(o.stderr.matches("unbound variable `q` (it has not been defined)").count(), 2, "{}", o.stderr);
    assert_ne!(o.code, 0);
}

#[test]
fn metered_counts_the_whole_session() {
    // Each input's count starts from 0 (for its --max-steps); the total at the
    // end said 0 procedure calls. d(100) makes 101 calls of d, plus the input's own.
    let o = pipe("(define (d n) (if (= n 0) 0 (+ 1 (d (- n 1)))))\n(d 100)\n(d 100)\n", &["--metered"]);
    assert_eq!(o.stdout, "100\n100\n", "{}", o.stderr);
    assert!(o.stderr.contains("metered: 602 primitive operations (+ 200, - 200, = 202)\n"), "{}", o.stderr);
    assert!(o.stderr.contains("metered: 204 procedure calls, "), "{}", o.stderr);
}

#[test]
fn anf_of_a_constant_shows_its_definition() {
    // Once evaluated, `:anf x` printed only `x` (the value replaced the code).
    let o = pipe("(define x (+ 2 3))\n:anf x\nx\n:anf x\n", &[]);
    let def = "(define x\n  (let* ((t_";
    assert_eq!(o.stdout.matches(def).count(), 2, "{}", o.stdout);
    assert!(o.stdout.contains(" (+ 2 3)))\n"), "{}", o.stdout);
    assert!(o.stdout.contains("\n5\n"), "{}", o.stdout);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn an_annotation_may_follow_its_expression_on_a_later_line() {
    // As in a file: `===> EXPECTED` on the next line, or the expected value on
    // the line after the arrow, belongs to the expression before (and is
    // ignored, as `vlad run` ignores it); after a definition it is an error.
    let o = pipe("(+ 1 2)\n===> 3\n(* 2\n 3) ===>\n 6 (- 9 1)\n(car 1)\n===> (error \"pair\")\n", &[]);
    assert_eq!(o.stdout, "3\n6\n8\n", "stderr: {}", o.stderr);
    assert_eq!(o.stderr.matches("error:").count(), 1, "{}", o.stderr);
    let o = pipe("(define x 1)\n===> 1\nx\n", &[]);
    assert_eq!(o.stdout, "1\n");
    assert!(o.stderr.contains("<stdin>:2:1: error: `===>` must follow an expression"), "{}", o.stderr);
    assert_eq!(o.code, 1);
}

#[test]
fn a_second_annotation_is_an_error_as_in_a_file() {
    // A second `===>` on a line of its own after an annotated expression was
    // ignored where the first was on the expression's line (exit status 0); a file
    // rejects it. It is the file's error, wherever the first was; a comment
    // between an expression and its annotation changes nothing.
    let second = "error: a second `===>`: an expression has one expected value";
    for (input, line) in
        [("(+ 1 2) ===> 3\n===> 5\n(+ 1 1)\n", 2), ("(+ 1 2)\n===> 3\n; c\n===> 5\n(+ 1 1)\n", 4)]
    {
        let o = pipe(input, &[]);
        assert_eq!(o.stdout, "3\n2\n", "{}", o.stderr);
        assert!(o.stderr.contains(&format!("<stdin>:{line}:1: {second}")), "{input:?}: {}", o.stderr);
        assert_eq!(o.stderr.matches("error:").count(), 1, "{}", o.stderr);
        assert_eq!(o.code, 1);
    }
    let o = pipe("(+ 1 2)\n; c\n===> 3\n", &[]);
    assert_eq!((o.stdout.as_str(), o.stderr.as_str(), o.code), ("3\n", "", 0));
}
