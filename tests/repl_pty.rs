//! The interactive REPL, driven through a pseudo-terminal. Every expectation has
//! a timeout (and the child is killed when a session is dropped), so a broken
//! REPL fails these tests instead of hanging them. Where no pseudo-terminal can
//! be allocated, the tests print why and pass.

use rexpect::session::{spawn_with_options, Options, PtySession};
use std::path::Path;
use std::process::Command;

const TIMEOUT_MS: u64 = 20_000;

/// A scratch directory, removed when the test ends (also when it fails).
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("vlad-repl-{tag}-")).tempdir().unwrap()
}

/// Starts `vlad` on a pseudo-terminal (no colours, history in `history`) and
/// waits for its first prompt; `None` (after saying why) if no pty is available.
fn start(history: &Path, color: bool) -> Option<PtySession> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vlad"));
    cmd.env("VLAD_HISTORY", history).env("TERM", "xterm");
    if color {
        cmd.env_remove("NO_COLOR");
    } else {
        cmd.env("NO_COLOR", "1");
    }
    let opts = Options::new().timeout_ms(Some(TIMEOUT_MS)).strip_ansi_escape_codes(!color);
    match spawn_with_options(cmd, opts) {
        Ok(mut p) => {
            p.exp_string("vlad> ").expect("first prompt");
            Some(p)
        }
        Err(e) => {
            println!("skipping: cannot run vlad on a pseudo-terminal: {}", e);
            None
        }
    }
}

/// Types a line (Enter is `\r` on a terminal).
fn line(p: &mut PtySession, text: &str) {
    p.send(text).unwrap();
    p.send("\r").unwrap();
    p.flush().unwrap();
}

/// Types a line and waits for the next main prompt.
fn line_prompt(p: &mut PtySession, text: &str) -> String {
    line(p, text);
    p.exp_string("vlad> ").expect("prompt")
}

/// Waits for a value printed on its own line.
fn value(p: &mut PtySession, v: &str) {
    p.exp_regex(&format!("\r\n{}\r\n", regex_escape(v))).unwrap_or_else(|e| panic!("expected {}: {}", v, e));
}

fn regex_escape(s: &str) -> String {
    s.chars().flat_map(|c| if c.is_ascii_alphanumeric() { vec![c] } else { vec!['\\', c] }).collect()
}

fn quit(mut p: PtySession) {
    line(&mut p, ":quit");
    p.exp_eof().expect("vlad exits on :quit");
}

#[test]
fn multi_line_definition_uses_a_continuation_prompt() {
    let dir = temp_dir("multi");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line(&mut p, "(define (cube x)");
    p.exp_string("  ... ").expect("continuation prompt");
    // A bracket in a string or comment does not close anything.
    line(&mut p, "  ; a comment with ) in it");
    p.exp_string("  ... ").expect("still continuing after a comment");
    line(&mut p, "  (* x (* x x)))");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(cube 11)");
    value(&mut p, "1331");
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

#[test]
fn tab_completes_names_and_commands() {
    let dir = temp_dir("complete");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line_prompt(&mut p, "(define (my-long-function x) (* x 1000))");
    // A user definition.
    p.send("(my-lo\t").unwrap();
    p.flush().unwrap();
    p.exp_string("my-long-function").expect("completion of a user definition");
    line(&mut p, " 7)");
    value(&mut p, "7000");
    p.exp_string("vlad> ").unwrap();
    // A prelude procedure (unique prefix).
    p.send("((gradient-\t").unwrap();
    p.flush().unwrap();
    p.exp_string("gradient-").unwrap();
    p.send("R\t").unwrap();
    p.flush().unwrap();
    p.send(" (lambda (x) (* x x))) 3)\r").unwrap();
    p.flush().unwrap();
    value(&mut p, "6");
    p.exp_string("vlad> ").unwrap();
    // A command.
    p.send(":an\t").unwrap();
    p.flush().unwrap();
    p.exp_string(":anf ").expect("command completion");
    line(&mut p, "(my-long-function 2)");
    p.exp_string("(my-long-function 2)").unwrap();
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

#[test]
fn an_error_keeps_the_session() {
    let dir = temp_dir("error");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line_prompt(&mut p, "(define (half x) (/ x 2))");
    line(&mut p, "(car 5)");
    p.exp_string("<input-2>:1:1: error: pattern mismatch").expect("the error is reported, with its location");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(undefined-thing 1)");
    p.exp_string("error:").unwrap();
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(half 8642)");
    value(&mut p, "4321");
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

#[test]
fn anf_command_shows_the_a_normal_form() {
    let dir = temp_dir("anf");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line_prompt(&mut p, "(define (sq x) (* x x))");
    line(&mut p, ":anf (sq (+ 1 2))");
    p.exp_string("(let* ((t_").expect("an A-normal form");
    p.exp_regex(r"\(sq t_\d+\)").expect("the call on a named intermediate");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, ":reverse sq");
    p.exp_string("(reverse *)").expect("the reverse transform");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, ":meter ((gradient sq) 3)");
    p.exp_string("primitive operations:").unwrap();
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

#[test]
fn ctrl_c_interrupts_an_infinite_loop() {
    let dir = temp_dir("interrupt");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line_prompt(&mut p, "(define (spin n) (spin (+ n 1)))");
    line_prompt(&mut p, "(define keep 1234)");
    line(&mut p, "(spin 0)");
    std::thread::sleep(std::time::Duration::from_millis(700));
    p.send_control('c').unwrap();
    p.exp_string("interrupted").expect("the loop is interrupted");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(+ keep 1)");
    value(&mut p, "1235");
    p.exp_string("vlad> ").unwrap();
    // Ctrl-C while typing drops the input.
    p.send("(this is not finished").unwrap();
    p.flush().unwrap();
    p.send_control('c').unwrap();
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(* keep 2)");
    value(&mut p, "2468");
    p.exp_string("vlad> ").unwrap();
    // Ctrl-D leaves.
    p.send_control('d').unwrap();
    p.exp_eof().expect("Ctrl-D exits");
}

#[test]
fn history_is_saved_between_sessions() {
    let dir = temp_dir("history");
    let hist = dir.path().join("sub").join("history");
    let Some(mut p) = start(&hist, false) else { return };
    line_prompt(&mut p, "(+ 40 2)");
    line(&mut p, "(* 6");
    p.exp_string("  ... ").unwrap();
    line(&mut p, "   7)");
    p.exp_string("vlad> ").unwrap();
    quit(p);
    let text = std::fs::read_to_string(&hist).expect("the history file is written");
    assert!(text.contains("(+ 40 2)"), "history: {:?}", text);
    assert!(text.contains(":quit"), "history: {:?}", text);
    // A new session recalls it (Up twice: `:quit`, then the multi-line input).
    let Some(mut p) = start(&hist, false) else { return };
    p.send("\x1b[A\x1b[A\r").unwrap();
    p.flush().unwrap();
    value(&mut p, "42");
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

#[test]
fn matching_bracket_is_highlighted() {
    let dir = temp_dir("highlight");
    let Some(mut p) = start(&dir.path().join("history"), true) else { return };
    // Typing the closing bracket highlights the opening one (bold blue).
    p.send("(+ 1 2)").unwrap();
    p.flush().unwrap();
    p.exp_string("\x1b[1;34m(\x1b[0m").expect("the matching bracket is highlighted");
    p.send("\r").unwrap();
    p.flush().unwrap();
    p.exp_regex("\r\n3\r\n").expect("the value");
    p.exp_string("vlad> ").unwrap();
    quit(p);
}

/// Ctrl-D on the empty line of an unfinished input ended the session, dropping the
/// input without a word; it ends the input (reported as unfinished) and the session
/// goes on; on an empty main prompt it leaves.
#[test]
fn ctrl_d_in_an_unfinished_input_ends_the_input() {
    let dir = temp_dir("ctrl-d");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    line(&mut p, "(define (g x)");
    p.exp_string("  ... ").expect("continuation prompt");
    p.send_control('d').unwrap();
    p.exp_string("<input-1>:1:1: error: unclosed list (missing `)`)").expect("the input is reported");
    p.exp_string("vlad> ").unwrap();
    line(&mut p, "(+ 1 2)");
    value(&mut p, "3");
    p.exp_string("vlad> ").unwrap();
    p.send_control('d').unwrap();
    p.exp_eof().expect("Ctrl-D on an empty line leaves");
}

/// The README's REPL session (the block after `$ vlad`) runs as shown: each
/// input typed at its prompt, and the lines up to the next prompt printed
/// exactly, but for the `:time` line's figure; `^C` is Ctrl-C typed while the
/// input before it runs. (tests/docs.rs checks the README's other examples.)
#[test]
fn the_readme_session_runs_as_shown() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut lines = readme.lines().skip_while(|l| *l != "$ vlad").skip(1);
    // (its first line is the banner, printed before the first prompt)
    let banner = lines.next().unwrap();
    assert!(banner.starts_with("vlad "), "the README's session starts: {banner}");
    let session: Vec<&str> = lines.take_while(|l| !l.starts_with("```")).collect();
    assert!(session.len() > 20, "the README's session is {} lines", session.len());
    let dir = temp_dir("readme");
    let Some(mut p) = start(&dir.path().join("history"), false) else { return };
    let mut i = 0;
    let mut inputs = 0;
    while i < session.len() {
        let input = session[i]
            .strip_prefix("vlad> ")
            .or_else(|| session[i].strip_prefix("  ... "))
            .unwrap_or_else(|| panic!("README.md session line {}: expected an input: {}", i + 1, session[i]));
        inputs += 1;
        i += 1;
        let mut out = Vec::new();
        while i < session.len() && !session[i].starts_with("vlad> ") && !session[i].starts_with("  ... ") {
            out.push(session[i]);
            i += 1;
        }
        let last = i == session.len();
        if session.get(i).is_some_and(|l| l.starts_with("  ... ")) {
            line(&mut p, input);
            p.exp_string("  ... ")
                .unwrap_or_else(|e| panic!("after `{input}`, the continuation prompt: {e}"));
            continue;
        }
        line(&mut p, input);
        if out.first() == Some(&"^C") {
            std::thread::sleep(std::time::Duration::from_millis(700));
            p.send_control('c').unwrap();
            out.remove(0);
        }
        // What it prints, from the end of the echoed input to the next prompt
        // (the terminal's line ends carry carriage returns where they fall).
        let eol = "\r*\n\r*";
        let mut pattern = format!("{eol}(\\^C{eol})?");
        for l in &out {
            match l.strip_prefix("time: ") {
                Some(_) => pattern.push_str("time: [0-9.]+ [^\r\n ]*s"),
                None => pattern.push_str(&meta_escape(l)),
            }
            pattern.push_str(eol);
        }
        if !last {
            pattern.push_str("vlad> ");
        }
        p.exp_regex(&pattern)
            .unwrap_or_else(|e| panic!("after `{input}`, expected\n{}\n: {e}", out.join("\n")));
    }
    assert!(inputs >= 10, "{inputs} inputs");
    quit(p);
}

/// `s` as a regular expression matching it literally (the `regex` crate's
/// metacharacters escaped; `regex_escape` escapes every other character too,
/// which makes `\<` a word boundary).
fn meta_escape(s: &str) -> String {
    s.chars().flat_map(|c| if "\\.+*?()|[]{}^$#&-~".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}
