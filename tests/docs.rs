//! The documentation's examples run as shown. From README.md and docs/*.md:
//! - transcripts in a code block: `$ cat FILE` and the file's lines, then
//!   `$ vlad ARGS` (or `$ cargo run --release -- ARGS`) and what it prints
//!   (standard output, then standard error); `$ echo '...' | vlad` and
//!   `$ printf '...' | vlad` feed the REPL a pipe. A `scheme` block whose first
//!   line is `;; FILE.vlad` is that file for a later transcript. (The
//!   interactive REPL session, `$ vlad` alone, is left to tests/repl_pty.rs.)
//! - a `scheme` block followed by a line `prints` and a block: its output;
//! - `EXPR ; => VALUE` lines of a `scheme` block: checked by `vlad test` (as
//!   `EXPR ===> VALUE`) after the block's lines before them;
//! - `EXPR ; FILE:L:C: error: MESSAGE` lines: the block up to there, run as
//!   FILE, fails with that message.
//!
//! So an example that no longer runs, or prints something else, fails here
//! rather than misleading a reader.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

struct Block {
    lang: String,
    lines: Vec<String>,
    /// The line of the file where the block's text starts (1-based).
    at: usize,
    /// The last non-empty line of text before the block.
    before: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    let mut before = String::new();
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut cur, fence) {
            (None, Some(lang)) => {
                cur = Some(Block {
                    lang: lang.trim().to_string(),
                    lines: Vec::new(),
                    at: i + 2,
                    before: before.clone(),
                })
            }
            (Some(_), Some(_)) => out.push(cur.take().unwrap()),
            (Some(b), None) => b.lines.push(line.to_string()),
            (None, None) if !line.trim().is_empty() => before = line.trim().to_string(),
            (None, None) => {}
        }
    }
    out
}

struct Run {
    stdout: String,
    stderr: String,
}

fn vlad(dir: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vlad"));
    c.args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = c.spawn().unwrap();
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    Run {
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The text of a shell word quoted with `'...'` (no quote inside), for `echo`
/// and `printf` (whose `\n` is a newline).
fn quoted(word: &str) -> Option<&str> {
    word.strip_prefix('\'')?.strip_suffix('\'')
}

/// The first datum of `s` (a number, a symbol or a balanced list), as written.
fn first_datum(s: &str) -> &str {
    let s = s.trim_start();
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &s[..=i];
                }
            }
            c if c.is_whitespace() && depth == 0 => return &s[..i],
            _ => {}
        }
    }
    s
}

/// Checks the examples of one documentation file, adding a line to `failures`
/// for each that differs; returns how many it checked.
fn check_file(doc: &Path, failures: &mut Vec<String>) -> usize {
    let text = std::fs::read_to_string(doc).unwrap();
    let name = doc.file_name().unwrap().to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let mut files: HashMap<String, String> = HashMap::new();
    let mut checked = 0;
    let bs = blocks(&text);
    let mut fail = |at: usize, what: String| failures.push(format!("{name}:{at}: {what}"));
    for (k, b) in bs.iter().enumerate() {
        let body = b.lines.join("\n") + "\n";
        if b.lang == "scheme" {
            if let Some(f) =
                b.lines.first().and_then(|l| l.strip_prefix(";; ")).filter(|f| f.ends_with(".vlad"))
            {
                files.insert(f.trim().to_string(), body.clone());
            }
            // a block and the output it prints
            if let Some(out) = bs.get(k + 1).filter(|n| n.before == "prints") {
                std::fs::write(dir.path().join("block.vlad"), &body).unwrap();
                let r = vlad(dir.path(), &["block.vlad"], None);
                let expected = out.lines.join("\n") + "\n";
                checked += 1;
                if r.stdout != expected || !r.stderr.is_empty() {
                    fail(b.at, format!("prints\n{}{}instead of\n{expected}", r.stdout, r.stderr));
                }
            }
            // `; =>` values and `; FILE:L:C: error:` lines
            let mut so_far = String::new();
            let mut arrows = String::new();
            for (i, line) in b.lines.iter().enumerate() {
                if let Some((expr, value)) = line.split_once("; =>") {
                    arrows.push_str(&format!("{} ===> {}\n", expr.trim_end(), first_datum(value)));
                    continue;
                }
                if let Some((expr, msg)) = line.split_once("; ").filter(|(_, m)| m.contains(": error: ")) {
                    let file = msg.split(':').next().unwrap();
                    std::fs::write(dir.path().join(file), format!("{so_far}{expr}\n")).unwrap();
                    let r = vlad(dir.path(), &[file], None);
                    checked += 1;
                    if !r.stderr.starts_with(msg.trim_end()) {
                        fail(b.at + i, format!("the error is\n{}instead of\n{msg}", r.stderr));
                    }
                    // (an expression that fails: left out of what follows)
                    continue;
                }
                so_far.push_str(line);
                so_far.push('\n');
                arrows.push_str(line);
                arrows.push('\n');
            }
            if arrows.contains("===>") {
                std::fs::write(dir.path().join("arrows.vlad"), &arrows).unwrap();
                let r = vlad(dir.path(), &["test", "arrows.vlad"], None);
                checked += 1;
                if !r.stdout.contains(" passed, 0 failed") {
                    fail(b.at, format!("`vlad test` of its `; =>` lines:\n{}{}", r.stdout, r.stderr));
                }
            }
            continue;
        }
        // transcripts
        if !b.lines.iter().any(|l| l.starts_with("$ ")) || b.lines.iter().any(|l| l.trim_end() == "$ vlad") {
            continue;
        }
        let mut i = 0;
        while i < b.lines.len() {
            let Some(cmd) = b.lines[i].strip_prefix("$ ") else {
                i += 1;
                continue;
            };
            let start = i;
            i += 1;
            let mut out = Vec::new();
            while i < b.lines.len() && !b.lines[i].starts_with("$ ") {
                out.push(b.lines[i].clone());
                i += 1;
            }
            let out = out.join("\n") + "\n";
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let (args, stdin): (Vec<&str>, Option<String>) = match words.as_slice() {
                ["cat", f] => {
                    files.insert(f.to_string(), out);
                    continue;
                }
                ["vlad", args @ ..] => (args.to_vec(), None),
                ["cargo", "run", "--release", "--", args @ ..] => (args.to_vec(), None),
                [pipe @ ("echo" | "printf"), .., "|", "vlad"] => {
                    let word = cmd[pipe.len()..].rsplit_once('|').unwrap().0.trim();
                    let Some(q) = quoted(word) else {
                        fail(b.at + start, format!("cannot read the command `{cmd}`"));
                        continue;
                    };
                    let s = if *pipe == "echo" { format!("{q}\n") } else { q.replace("\\n", "\n") };
                    (Vec::new(), Some(s))
                }
                _ => {
                    fail(b.at + start, format!("cannot read the command `{cmd}`"));
                    continue;
                }
            };
            for (f, content) in &files {
                std::fs::write(dir.path().join(f), content).unwrap();
            }
            let r = vlad(dir.path(), &args, stdin.as_deref());
            let got = format!("{}{}", r.stdout, r.stderr);
            checked += 1;
            if got != out {
                fail(b.at + start, format!("`{cmd}` prints\n{got}instead of\n{out}"));
            }
        }
    }
    checked
}

#[test]
fn the_documentation_examples_run_as_shown() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    let mut more: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    let mut failures = Vec::new();
    let mut checked = 0;
    for d in &docs {
        checked += check_file(d, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} of the documentation's examples differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // (the README's transcripts alone are more than this: a change of format
    // that hid them all from the parser would fail here)
    assert!(checked >= 10, "only {checked} examples found");
}
