//! Source files and byte spans: every syntax object and error carries a [`Span`]
//! that the [`SourceMap`] turns into `FILE:LINE:COL`.

use std::rc::Rc;

/// Index of a file in the [`SourceMap`].
pub type FileId = u32;

/// A half-open byte range `start..end` in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

/// The default span is [`Span::UNKNOWN`].
impl Default for Span {
    fn default() -> Span {
        Span::UNKNOWN
    }
}

impl Span {
    /// No location: code the interpreter generates (AD transforms, primitive rules).
    pub const UNKNOWN: Span = Span { file: FileId::MAX, start: 0, end: 0 };

    /// Whether this is a location in a source file (not [`Span::UNKNOWN`] or in
    /// text read with `FileId::MAX`, like primitive rules).
    pub fn is_known(&self) -> bool {
        self.file != FileId::MAX
    }

    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start: start as u32, end: end as u32 }
    }
    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// One loaded source text.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: Rc<str>,
    line_starts: Vec<u32>,
    /// Lines before this text in the input it was cut from (the REPL reading a
    /// pipe numbers `<stdin>` lines from the start of the stream).
    line_offset: usize,
}

impl SourceFile {
    fn new(name: String, text: Rc<str>) -> SourceFile {
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        SourceFile { name, text, line_starts, line_offset: 0 }
    }

    /// 1-based line and column (column counted in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self.text.get(start..end).map(|s| s.chars().count()).unwrap_or(end - start);
        (line + 1 + self.line_offset, col + 1)
    }

    /// The text of a 1-based line (as numbered by [`SourceFile::line_col`]), without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(line) =
            line.checked_sub(self.line_offset).filter(|&l| l >= 1 && l <= self.line_starts.len())
        else {
            return "";
        };
        let start = self.line_starts[line - 1] as usize;
        let end = self.line_starts.get(line).map(|&e| e as usize).unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }
}

/// All source texts seen in a session (files, includes, the prelude, REPL inputs).
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Registers a text under a display name and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<Rc<str>>) -> FileId {
        self.files.push(SourceFile::new(name.into(), text.into()));
        (self.files.len() - 1) as FileId
    }

    pub fn file(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id as usize)
    }

    /// How many texts have been added (the id the next one will get).
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Numbers the lines of text `id` from `first_line` instead of 1.
    pub fn set_first_line(&mut self, id: FileId, first_line: usize) {
        if let Some(f) = self.files.get_mut(id as usize) {
            f.line_offset = first_line.saturating_sub(1);
        }
    }

    /// Shows `text` instead of text `id` under errors: the same text with some
    /// characters blanked out (by the REPL, to compile a command's argument in
    /// place). Ignored unless the lengths and lines agree.
    pub fn set_text(&mut self, id: FileId, text: &str) {
        if let Some(f) = self.files.get_mut(id as usize) {
            let lines_agree = f.text.bytes().zip(text.bytes()).all(|(a, b)| (a == b'\n') == (b == b'\n'));
            if f.text.len() == text.len() && lines_agree {
                f.text = Rc::from(text);
            }
        }
    }

    /// `FILE:LINE:COL` of the start of a span.
    pub fn location(&self, span: Span) -> String {
        match self.files.get(span.file as usize) {
            Some(f) => {
                let (l, c) = f.line_col(span.start);
                format!("{}:{}:{}", f.name, l, c)
            }
            None => "<unknown>".to_string(),
        }
    }

    /// 1-based line of the start of a span.
    pub fn line(&self, span: Span) -> usize {
        self.files.get(span.file as usize).map(|f| f.line_col(span.start).0).unwrap_or(0)
    }
}
