//! The line editor's helper: completion of bound names and REPL commands,
//! matching-bracket highlighting (brackets in strings and comments do not
//! count), hints for command arguments, and the coloured prompt.

use super::COMMANDS;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::{Hint, Hinter};
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use std::borrow::Cow;
use std::cell::Cell;

const MATCH_STYLE: &str = "\x1b[1;34m";
const UNMATCHED_STYLE: &str = "\x1b[1;31m";
const HINT_STYLE: &str = "\x1b[2m";
const PROMPT_STYLE: &str = "\x1b[1;32m";
const RESET: &str = "\x1b[0m";

/// What the editor needs to know about the session.
pub struct VladHelper {
    /// Bound names (prelude, primitives, user definitions) and keywords, sorted.
    pub names: Vec<String>,
    /// The earlier lines of an input that is being continued (with their newlines),
    /// so that a bracket can be matched against them; empty at the main prompt.
    pub pending: String,
    /// Whether to colour the prompt.
    pub color: bool,
    files: FilenameCompleter,
    /// The bracket to highlight in the current line: its position and, when it has
    /// a partner in this line, the partner's position (`None`: unmatched).
    bracket: Cell<Option<(usize, Option<usize>)>>,
}

impl VladHelper {
    pub fn new(color: bool) -> VladHelper {
        VladHelper {
            names: Vec::new(),
            pending: String::new(),
            color,
            files: FilenameCompleter::new(),
            bracket: Cell::new(None),
        }
    }

    fn at_input_start(&self) -> bool {
        self.pending.trim().is_empty()
    }
}

fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '\'' | '`' | ',' | '"' | ';')
}

fn is_open(b: u8) -> bool {
    b == b'(' || b == b'['
}

fn is_close(b: u8) -> bool {
    b == b')' || b == b']'
}

/// Pairs the brackets of VLAD source text, skipping strings, `;` comments and
/// (nested) `#| |#` comments. Returns each code bracket's byte position and
/// the position of its partner (`None` when it has none yet or is mismatched).
pub fn bracket_pairs(text: &str) -> Vec<(usize, Option<usize>)> {
    let b = text.as_bytes();
    let mut out: Vec<(usize, Option<usize>)> = Vec::new();
    let mut stack: Vec<usize> = Vec::new(); // indices into `out`
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b';' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'#' if b.get(i + 1) == Some(&b'|') => {
                let mut depth = 1;
                i += 2;
                while i < b.len() && depth > 0 {
                    if b[i] == b'|' && b.get(i + 1) == Some(&b'#') {
                        depth -= 1;
                        i += 1;
                    } else if b[i] == b'#' && b.get(i + 1) == Some(&b'|') {
                        depth += 1;
                        i += 1;
                    }
                    i += 1;
                }
                continue;
            }
            c if is_open(c) => {
                stack.push(out.len());
                out.push((i, None));
            }
            c if is_close(c) => {
                let partner = match stack.last() {
                    Some(&k) if (b[out[k].0] == b'(') == (c == b')') => {
                        stack.pop();
                        out[k].1 = Some(i);
                        Some(out[k].0)
                    }
                    _ => None,
                };
                out.push((i, partner));
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The bracket the cursor is at (just after a closing one, or on any), and its partner.
fn find_bracket(pending: &str, line: &str, pos: usize) -> Option<(usize, Option<usize>)> {
    let full = format!("{}{}", pending, line);
    let off = pending.len();
    let pairs = bracket_pairs(&full);
    let lookup = |p: usize| pairs.iter().find(|(q, _)| *q == off + p).copied();
    let bytes = line.as_bytes();
    let mut candidates = Vec::new();
    if pos > 0 && is_close(bytes[pos - 1]) {
        candidates.push(pos - 1);
    }
    if pos < bytes.len() && (is_open(bytes[pos]) || is_close(bytes[pos])) {
        candidates.push(pos);
    }
    if pos > 0 && is_open(bytes[pos - 1]) {
        candidates.push(pos - 1);
    }
    for c in candidates {
        if let Some((_, partner)) = lookup(c) {
            return match partner {
                Some(p) if p >= off => Some((c, Some(p - off))),
                // The partner is on an earlier line of the input.
                Some(_) => None,
                // An opening bracket not closed yet is normal while typing.
                None if is_open(bytes[c]) => None,
                None => Some((c, None)),
            };
        }
    }
    None
}

impl Completer for VladHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let trimmed = before.trim_start();
        if self.at_input_start() && trimmed.starts_with(':') {
            if !trimmed.contains(char::is_whitespace) {
                let start = pos - trimmed.len();
                let cands = COMMANDS
                    .iter()
                    .filter(|c| c.name.starts_with(trimmed))
                    .map(|c| Pair { display: c.name.to_string(), replacement: format!("{} ", c.name) })
                    .collect();
                return Ok((start, cands));
            }
            if trimmed.starts_with(":load ") {
                return self.files.complete(line, pos, ctx);
            }
        }
        let start = before.rfind(is_delimiter).map(|i| i + before[i..].chars().next().unwrap().len_utf8());
        let start = start.unwrap_or(0);
        let word = &before[start..];
        if word.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let cands = self
            .names
            .iter()
            .filter(|n| n.starts_with(word))
            .map(|n| Pair { display: n.clone(), replacement: n.clone() })
            .collect();
        Ok((start, cands))
    }
}

/// A hint after a command name: the rest of the name and its argument.
pub struct CommandHint {
    display: String,
    complete: String,
}

impl Hint for CommandHint {
    fn display(&self) -> &str {
        &self.display
    }
    fn completion(&self) -> Option<&str> {
        if self.complete.is_empty() {
            None
        } else {
            Some(&self.complete)
        }
    }
}

impl Hinter for VladHelper {
    type Hint = CommandHint;

    fn hint(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> Option<CommandHint> {
        if !self.at_input_start() || pos != line.len() || !line.starts_with(':') {
            return None;
        }
        if line.contains(char::is_whitespace) {
            return None;
        }
        let mut matching = COMMANDS.iter().filter(|c| c.name.starts_with(line));
        let cmd = matching.next()?;
        if matching.next().is_some() {
            return None;
        }
        let rest = &cmd.name[line.len()..];
        let display = if cmd.args.is_empty() { rest.to_string() } else { format!("{} {}", rest, cmd.args) };
        if display.is_empty() {
            return None;
        }
        Some(CommandHint { display, complete: rest.to_string() })
    }
}

impl Highlighter for VladHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        let Some((at, partner)) = self.bracket.get() else {
            return Cow::Borrowed(line);
        };
        let mut marks: Vec<(usize, &str)> = match partner {
            Some(p) => vec![(at, MATCH_STYLE), (p, MATCH_STYLE)],
            None => vec![(at, UNMATCHED_STYLE)],
        };
        if marks.iter().any(|(p, _)| *p >= line.len() || !line.is_char_boundary(*p)) {
            return Cow::Borrowed(line);
        }
        marks.sort();
        let mut out = String::with_capacity(line.len() + 24);
        let mut last = 0;
        for (p, style) in marks {
            out.push_str(&line[last..p]);
            out.push_str(style);
            out.push_str(&line[p..p + 1]);
            out.push_str(RESET);
            last = p + 1;
        }
        out.push_str(&line[last..]);
        Cow::Owned(out)
    }

    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, default: bool) -> Cow<'b, str> {
        if self.color && default {
            let style = if prompt.trim() == "..." { HINT_STYLE } else { PROMPT_STYLE };
            Cow::Owned(format!("{}{}{}", style, prompt, RESET))
        } else {
            Cow::Borrowed(prompt)
        }
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        Cow::Owned(format!("{}{}{}", HINT_STYLE, hint, RESET))
    }

    fn highlight_char(&self, line: &str, pos: usize, kind: CmdKind) -> bool {
        if kind == CmdKind::ForcedRefresh {
            self.bracket.set(None);
            return false;
        }
        self.bracket.set(find_bracket(&self.pending, line, pos));
        self.bracket.get().is_some()
    }
}

/// Multi-line input is decided by the REPL loop with the real reader (so that it
/// can show a continuation prompt), not by the editor.
impl Validator for VladHelper {}

impl Helper for VladHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_skip_strings_and_comments() {
        let t = "(a \"(\" ; )\n #| ( |# [b])";
        let p = bracket_pairs(t);
        let opens: Vec<_> = p.iter().filter(|(i, _)| is_open(t.as_bytes()[*i])).collect();
        assert_eq!(opens.len(), 2);
        assert_eq!(p[0], (0, Some(t.len() - 1)));
    }

    #[test]
    fn mismatched_close_is_unmatched() {
        let p = bracket_pairs("(a])");
        assert_eq!(p[1], (2, None));
        assert_eq!(p[2], (3, Some(0)));
    }

    #[test]
    fn cursor_after_close_finds_partner() {
        assert_eq!(find_bracket("", "(+ 1 2)", 7), Some((6, Some(0))));
        assert_eq!(find_bracket("", "(+ 1 2)", 0), Some((0, Some(6))));
        assert_eq!(find_bracket("", "x)", 2), Some((1, None)));
        // The partner is on the previous line: nothing to show in this one.
        assert_eq!(find_bracket("(f\n", "x)", 2), None);
        // A bracket inside a string is not code.
        assert_eq!(find_bracket("", "\"(\"", 2), None);
    }
}
