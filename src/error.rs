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
        Error(Box::new(ErrorData { kind, span, message: message.into(), trace: Vec::new(), trace_elided: 0 }))
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
    /// Records one call frame as the error unwinds through it.
    pub fn push_frame(&mut self, name: &str, span: Span) {
        if self.trace.len() < MAX_TRACE {
            self.trace.push((name.to_string(), span));
        } else {
            self.trace_elided += 1;
        }
    }

    /// The full report: location line, source line with caret, call trace.
    pub fn render(&self, sm: &SourceMap) -> String {
        let mut out = String::new();
        match self.span {
            Some(sp) => {
                out.push_str(&format!("{}: error: {}\n", sm.location(sp), self.message));
                if let Some(f) = sm.file(sp.file) {
                    let (line, col) = f.line_col(sp.start);
                    let text = f.line_text(line);
                    out.push_str(&format!("  | {}\n  | {}^\n", text, " ".repeat(col.saturating_sub(1))));
                }
            }
            None => out.push_str(&format!("error: {}\n", self.message)),
        }
        for (name, sp) in &self.trace {
            if sm.file(sp.file).is_some() {
                out.push_str(&format!("  in {} called at {}\n", name, sm.location(*sp)));
            } else {
                out.push_str(&format!("  in {}\n", name));
            }
        }
        if self.trace_elided > 0 {
            out.push_str(&format!("  ... {} more frames\n", self.trace_elided));
        }
        out
    }
}
