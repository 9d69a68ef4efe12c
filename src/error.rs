//! One error type for every stage; rendered as `FILE:LINE:COL: error: MESSAGE`
//! followed by a short VLAD call trace.

use crate::source::{SourceMap, Span};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reader or expander: reported before anything runs.
    Syntax,
    /// The reader ran out of input (the REPL asks for another line).
    Incomplete,
    /// Raised while evaluating.
    Runtime,
    /// `--max-steps`, `--timeout` or an interrupt.
    Limit,
}

/// An error; boxed so that `Result<Value>` stays small on the evaluator's hot path.
#[derive(Clone, Debug)]
pub struct Error(Box<ErrorData>);

#[derive(Clone, Debug)]
pub struct ErrorData {
    pub kind: ErrorKind,
    pub span: Option<Span>,
    pub message: String,
    /// Innermost first: the procedure name and the call site.
    pub trace: Vec<(String, Span)>,
    /// How many trace entries were dropped to keep the trace short.
    pub trace_elided: usize,
    /// The procedure running when the error arose, and where it was called,
    /// if it was a call in tail position run in place (`resolve::Inline`):
    /// the frame that would have replaced the enclosing procedure's in the
    /// trace had the call been made. Taken by the enclosing call's decoration.
    pub tail_frame: Option<(String, Span)>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl std::ops::Deref for Error {
    type Target = ErrorData;
    fn deref(&self) -> &ErrorData {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorData {
        &mut self.0
    }
}

pub const MAX_TRACE: usize = 8;

impl Error {
    /// An error at `span`; an unknown span (generated code) counts as none, so the
    /// error is located at the nearest call site in user code as it unwinds.
    pub fn new(kind: ErrorKind, span: Option<Span>, message: impl Into<String>) -> Error {
        let span = span.filter(|s| s.is_known());
        Error(Box::new(ErrorData {
            kind,
            span,
            message: message.into(),
            trace: Vec::new(),
            trace_elided: 0,
            tail_frame: None,
        }))
    }
    pub fn syntax(span: Span, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Syntax, Some(span), message)
    }
    pub fn runtime(span: Option<Span>, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Runtime, span, message)
    }
    /// Gives a location to an error raised without one (unless `span` is unknown).
    pub fn at(mut self, span: Span) -> Error {
        if self.span.is_none() && span.is_known() {
            self.span = Some(span);
        }
        self
    }
    /// Locates the error of a call of primitive `name` at `span`: the
    /// primitive's own error there; an error already located, in a procedure
    /// the primitive called (as `map` calls its argument), keeps its place
    /// and gets a frame for the primitive's call, so that the trace shows it.
    pub fn at_prim(mut self, name: &str, span: Span) -> Error {
        if self.span.is_none() {
            return self.at(span);
        }
        if span.is_known() && self.kind != ErrorKind::Limit {
            self.push_frame(name, span);
        }
        self
    }
    /// Records a call frame, procedure `name` called at `span`, which also
    /// locates an error raised without a location (generated code's) at the
    /// nearest call site in user code.
    pub fn push_frame_at(&mut self, name: &str, span: Span) {
        self.push_frame(name, span);
        if self.span.is_none() && span.is_known() {
            self.span = Some(span);
        }
    }

    /// Records one call frame as the error unwinds through it. (Not that of
    /// an internal primitive's transformed version, `(forward %error)` or
    /// `(forward (reverse %real-vjp))`: the prelude's and the `error` form's
    /// primitives, whose names are none the user wrote.)
    pub fn push_frame(&mut self, name: &str, span: Span) {
        let inner = name.rsplit(' ').next().unwrap_or(name).trim_end_matches(')');
        if inner.starts_with('%') && crate::prims::lookup(inner).is_some() {
            return;
        }
        if self.trace.len() < MAX_TRACE {
            self.trace.push((name.to_string(), span));
        } else {
            self.trace_elided += 1;
        }
    }

    /// Ends the trace with the top-level expression the error came from (an entry
    /// with no name, kept however long the trace is).
    pub fn push_top_level(&mut self, span: Span) {
        self.0.trace.push((String::new(), span));
    }

    /// The full report: location line, source line with caret, call trace.
    pub fn render(&self, sm: &SourceMap) -> String {
        let mut out = String::new();
        match self.span {
            Some(sp) => {
                out.push_str(&format!("{}: error: {}\n", sm.location(sp), self.message));
                if let Some(f) = sm.file(sp.file) {
                    let (line, col) = f.line_col(sp.start);
                    let (text, caret) = excerpt(f.line_text(line), col.saturating_sub(1));
                    out.push_str(&format!("  | {}\n  | {}^\n", text, caret));
                }
            }
            None => out.push_str(&format!("error: {}\n", self.message)),
        }
        let plural = if self.trace_elided == 1 { "" } else { "s" };
        let elided = format!("  ... {} more frame{}\n", self.trace_elided, plural);
        let mut elided_shown = self.trace_elided == 0;
        for (name, sp) in &self.trace {
            if name.is_empty() {
                if !elided_shown {
                    out.push_str(&elided);
                    elided_shown = true;
                }
                out.push_str(&format!("  from the top-level expression at {}\n", sm.location(*sp)));
            } else if sm.file(sp.file).is_some() {
                out.push_str(&format!("  in {} called at {}\n", name, sm.location(*sp)));
            } else {
                out.push_str(&format!("  in {}\n", name));
            }
        }
        if !elided_shown {
            out.push_str(&elided);
        }
        out
    }
}

/// Longest source line shown whole under an error; a longer one is cut to a
/// window around the caret.
const EXCERPT_WIDTH: usize = 120;

/// The source line to show and the padding that puts a caret under character
/// `col` (0-based) of it: tabs in the padding stay tabs so the caret lines up,
/// and a very long line (generated or minified code) is cut around the caret.
fn excerpt(line: &str, col: usize) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let col = col.min(chars.len());
    let (from, to) = if chars.len() <= EXCERPT_WIDTH {
        (0, chars.len())
    } else {
        let from = col.saturating_sub(EXCERPT_WIDTH / 2);
        (from, (from + EXCERPT_WIDTH).min(chars.len()))
    };
    let mut text: String = if from > 0 { "...".into() } else { String::new() };
    let mut pad: String = if from > 0 { "   ".into() } else { String::new() };
    text.extend(chars[from..to].iter().map(|&c| visible(c)));
    if to < chars.len() {
        text.push_str("...");
    }
    pad.extend(chars[from..col].iter().map(|&c| if c == '\t' { '\t' } else { ' ' }));
    (text, pad)
}

/// A control character as a visible one (its Unicode control picture, `␀` for
/// NUL, or `�`), so that a source line shown under an error neither hides it nor
/// sends it to the terminal; a tab stays a tab.
fn visible(c: char) -> char {
    match c {
        '\t' => c,
        '\0'..='\x1f' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
        '\x7f' => '\u{2421}',
        c if c.is_control() => '\u{fffd}',
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::excerpt;

    #[test]
    fn control_characters_are_shown_visibly() {
        let (text, pad) = excerpt("(f a\0b \x1b\x7f)", 4);
        assert_eq!(text, "(f a\u{2400}b \u{241b}\u{2421})");
        assert_eq!(pad, "    ");
    }

    #[test]
    fn the_caret_lines_up_under_tabs() {
        let (text, pad) = excerpt("\t(f\tx)", 4);
        assert_eq!(text, "\t(f\tx)");
        assert_eq!(pad, "\t  \t");
    }

    #[test]
    fn a_very_long_line_is_cut_around_the_caret() {
        let line = format!("{}(car 5){}", "(".repeat(1000), ")".repeat(1000));
        let (text, pad) = excerpt(&line, 1000);
        assert!(text.starts_with("...(") && text.ends_with(")..."), "{text}");
        assert!(text.chars().count() <= super::EXCERPT_WIDTH + 6);
        let caret = pad.chars().count();
        assert_eq!(text.chars().skip(caret).take(8).collect::<String>(), "(car 5))");
        // a short line is shown whole
        assert_eq!(excerpt("(car 5)", 0), ("(car 5)".to_string(), String::new()));
    }
}
