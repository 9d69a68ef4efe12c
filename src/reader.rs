//! The reader: source text to [`Datum`]s with spans.
//!
//! Grammar (a small Scheme subset):
//! - atmosphere: whitespace, `;` line comments, nesting `#| ... |#` block comments,
//!   and `#;` datum comments (which skip the next datum);
//! - lists `( ... )` and `[ ... ]` (each closed by its own kind), dotted tails `(a b . c)`;
//! - `'x`, `` `x ``, `,x`, `,@x` for `(quote x)`, `(quasiquote x)`, `(unquote x)`,
//!   `(unquote-splicing x)`;
//! - booleans `#t #f #true #false` (any letter case), strings with `\\ \" \n \t \r` escapes;
//! - numbers (see `parse_number`; with `#x #b #o #d #e #i` prefixes, `parse_prefixed`)
//!   and symbols (every other token).
//!
//! The reader is a single left-to-right pass with an explicit stack (no recursion),
//! so deeply nested input cannot overflow the Rust stack and the whole read is O(n).
//!
//! A dotted tail that is itself a list is spliced in, as in Scheme:
//! `(a . (b c))` reads as `(a b c)` and `(a . ())` as `(a)`, so a `List`'s `tail`
//! is never a `List`.

use crate::datum::{Datum, DatumKind};
use crate::source::{FileId, Span};
use num_bigint::BigInt;
use std::fmt;
use std::rc::Rc;

/// Whether more input could fix a [`ReadError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadErrorKind {
    /// Input ended inside a list, string, block comment or after a quote/`#;`
    /// (the REPL uses this to ask for more lines).
    Incomplete,
    /// Anything else malformed.
    Syntax,
}

/// A malformed or unfinished text; reading stops at the first one.
#[derive(Clone, Debug)]
pub struct ReadError {
    pub kind: ReadErrorKind,
    /// The offending characters, or the opening delimiter of an unfinished construct.
    pub span: Span,
    /// What is wrong, without location (the caller adds `FILE:LINE:COL`).
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReadError {}

/// Reads every datum in `src` (file id `file` goes into every span).
pub fn read_all(src: &str, file: FileId) -> Result<Vec<Datum>, ReadError> {
    Reader { src, bytes: src.as_bytes(), pos: 0, file, stack: Vec::new(), out: Vec::new() }.run()
}

/// Where a list is in its dotted-tail syntax.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DotState {
    /// No `.` seen yet.
    NoDot,
    /// A `.` was seen at this byte offset; the tail datum comes next.
    AfterDot(usize),
    /// The tail has been read; only `)` may follow.
    HaveTail,
}

/// A partially read compound datum.
enum Frame {
    List {
        open: u8,
        start: usize,
        items: Vec<Datum>,
        tail: Option<Datum>,
        dot: DotState,
    },
    /// `'`, `` ` ``, `,` or `,@` waiting for its datum; `start..prefix_end` is the prefix.
    Quote {
        name: &'static str,
        start: usize,
        prefix_end: usize,
    },
    /// `#;` waiting for the datum it discards; `start` is the offset of the `#`.
    DatumComment {
        start: usize,
    },
}

struct Reader<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    file: FileId,
    stack: Vec<Frame>,
    out: Vec<Datum>,
}

/// Bytes that end a token (besides whitespace).
/// Whitespace between tokens: Unicode's, and the invisible zero-width
/// no-break space (U+FEFF, a byte-order mark where it starts a file) and
/// zero-width space (U+200B) that pasted text carries, which would otherwise
/// become part of a symbol no one can see.
fn is_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{feff}' | '\u{200b}')
}

fn is_delimiter_byte(b: u8) -> bool {
    matches!(b, b'(' | b')' | b'[' | b']' | b'"' | b';' | b'\'' | b'`' | b',')
}

fn closer_for(open: u8) -> u8 {
    if open == b'[' {
        b']'
    } else {
        b')'
    }
}

impl<'a> Reader<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn err<T>(
        &self,
        kind: ReadErrorKind,
        start: usize,
        end: usize,
        message: impl Into<String>,
    ) -> Result<T, ReadError> {
        Err(ReadError { kind, span: self.span(start, end), message: message.into() })
    }

    /// Byte length of the character starting at `at` (1 at end of input, so spans stay sane).
    fn char_len(&self, at: usize) -> usize {
        self.src.get(at..).and_then(|s| s.chars().next()).map_or(1, char::len_utf8)
    }

    fn run(mut self) -> Result<Vec<Datum>, ReadError> {
        // (Partially built data, on error, may be deeply nested: `Datum`'s `Drop`
        // takes it apart without recursion.)
        self.read_loop().map(|()| self.out)
    }

    fn read_loop(&mut self) -> Result<(), ReadError> {
        loop {
            self.skip_atmosphere()?;
            let Some(&b) = self.bytes.get(self.pos) else {
                return self.eof();
            };
            let start = self.pos;
            match b {
                b'(' | b'[' => {
                    self.check_datum_allowed(start)?;
                    self.pos += 1;
                    self.stack.push(Frame::List {
                        open: b,
                        start,
                        items: Vec::new(),
                        tail: None,
                        dot: DotState::NoDot,
                    });
                }
                b')' | b']' => {
                    self.pos += 1;
                    let d = self.close_list(start, b)?;
                    self.complete(d)?;
                }
                b'\'' | b'`' | b',' => {
                    self.check_datum_allowed(start)?;
                    self.pos += 1;
                    let name = match b {
                        b'\'' => "quote",
                        b'`' => "quasiquote",
                        _ if self.bytes.get(self.pos) == Some(&b'@') => {
                            self.pos += 1;
                            "unquote-splicing"
                        }
                        _ => "unquote",
                    };
                    self.stack.push(Frame::Quote { name, start, prefix_end: self.pos });
                }
                b'"' => {
                    self.check_datum_allowed(start)?;
                    let d = self.read_string()?;
                    self.complete(d)?;
                }
                b'#' if self.bytes.get(start + 1) == Some(&b';') => {
                    self.pos += 2;
                    self.stack.push(Frame::DatumComment { start });
                }
                b'#' => {
                    self.check_datum_allowed(start)?;
                    let d = self.read_hash()?;
                    self.complete(d)?;
                }
                _ => {
                    if let Some(c) = self.control_at(start) {
                        return self.err(
                            ReadErrorKind::Syntax,
                            start,
                            start + c.len_utf8(),
                            format!(
                                "unexpected control character U+{:04X} (allowed only in strings and comments)",
                                c as u32
                            ),
                        );
                    }
                    let end = self.token_end(start);
                    let tok = &self.src[start..end];
                    if tok == "." {
                        self.dot(start)?;
                        self.pos = end;
                    } else {
                        self.check_datum_allowed(start)?;
                        self.pos = end;
                        let kind = parse_number(tok).unwrap_or_else(|| DatumKind::Symbol(Rc::from(tok)));
                        self.complete(Datum::new(kind, self.span(start, end)))?;
                    }
                }
            }
        }
    }

    /// End of input: fine at top level, otherwise the innermost open construct is incomplete.
    fn eof(&self) -> Result<(), ReadError> {
        match self.stack.last() {
            None => Ok(()),
            Some(Frame::List { start, open, .. }) => {
                let what =
                    if *open == b'[' { "unclosed list (missing `]`)" } else { "unclosed list (missing `)`)" };
                self.err(ReadErrorKind::Incomplete, *start, start + 1, what)
            }
            Some(Frame::Quote { start, prefix_end, .. }) => {
                let prefix = &self.src[*start..*prefix_end];
                self.err(
                    ReadErrorKind::Incomplete,
                    *start,
                    *prefix_end,
                    format!("expected a datum after `{prefix}`"),
                )
            }
            Some(Frame::DatumComment { start }) => {
                self.err(ReadErrorKind::Incomplete, *start, start + 2, "expected a datum after `#;`")
            }
        }
    }

    /// A datum starting at `start` is an error right after a dotted tail: `(a . b c)`.
    fn check_datum_allowed(&self, start: usize) -> Result<(), ReadError> {
        if let Some(Frame::List { dot: DotState::HaveTail, open, .. }) = self.stack.last() {
            let close = closer_for(*open) as char;
            let len = self.char_len(start);
            return self.err(
                ReadErrorKind::Syntax,
                start,
                start + len,
                format!("expected `{close}` after the datum following `.` in a dotted list"),
            );
        }
        Ok(())
    }

    /// A lone `.` token at `at`.
    fn dot(&mut self, at: usize) -> Result<(), ReadError> {
        let msg = match self.stack.last_mut() {
            Some(Frame::List { items, dot, .. }) => match *dot {
                DotState::NoDot if !items.is_empty() => {
                    *dot = DotState::AfterDot(at);
                    return Ok(());
                }
                DotState::NoDot => "unexpected `.`: a dotted list needs at least one datum before the `.`",
                DotState::AfterDot(_) | DotState::HaveTail => "unexpected second `.` in a dotted list",
            },
            Some(_) => "unexpected `.`: expected a datum",
            None => "unexpected `.` outside a list",
        };
        self.err(ReadErrorKind::Syntax, at, at + 1, msg)
    }

    /// `close` (`)` or `]`) at `at`, already consumed: pops and builds the list.
    fn close_list(&mut self, at: usize, close: u8) -> Result<Datum, ReadError> {
        let c = close as char;
        match self.stack.last() {
            None => return self.err(ReadErrorKind::Syntax, at, at + 1, format!("unexpected `{c}`")),
            Some(Frame::Quote { start, prefix_end, .. }) => {
                let prefix = &self.src[*start..*prefix_end];
                return self.err(
                    ReadErrorKind::Syntax,
                    at,
                    at + 1,
                    format!("expected a datum after `{prefix}`, found `{c}`"),
                );
            }
            Some(Frame::DatumComment { .. }) => {
                return self.err(
                    ReadErrorKind::Syntax,
                    at,
                    at + 1,
                    format!("expected a datum after `#;`, found `{c}`"),
                );
            }
            Some(Frame::List { open, dot, .. }) => {
                let want = closer_for(*open);
                if want != close {
                    let (w, o) = (want as char, *open as char);
                    return self.err(
                        ReadErrorKind::Syntax,
                        at,
                        at + 1,
                        format!("expected `{w}` to close `{o}`, found `{c}`"),
                    );
                }
                if let DotState::AfterDot(d) = *dot {
                    return self.err(
                        ReadErrorKind::Syntax,
                        d,
                        d + 1,
                        "expected a datum after `.` in a dotted list",
                    );
                }
            }
        }
        let Some(Frame::List { start, mut items, tail, .. }) = self.stack.pop() else {
            return self.err(ReadErrorKind::Syntax, at, at + 1, "internal reader error");
        };
        let mut tail = tail.map(Box::new);
        // Splice list tails: `(a . (b . (c . d)))` is `(a b c . d)`. A list that is itself
        // about to become a dotted tail is left alone, so that a whole chain is spliced once,
        // by its outermost list (splicing at every level would be quadratic).
        let is_tail = matches!(self.stack.last(), Some(Frame::List { dot: DotState::AfterDot(_), .. }));
        if !is_tail {
            while let Some(t) = &mut tail {
                let DatumKind::List(more, rest) = &mut t.kind else { break };
                items.append(more);
                let next = rest.take();
                tail = next;
            }
        }
        Ok(Datum::new(DatumKind::List(items, tail), self.span(start, at + 1)))
    }

    /// Hands a finished datum to the innermost open construct (or the output).
    fn complete(&mut self, mut d: Datum) -> Result<(), ReadError> {
        loop {
            match self.stack.last_mut() {
                None => {
                    self.out.push(d);
                    return Ok(());
                }
                Some(Frame::List { items, tail, dot, .. }) => {
                    match *dot {
                        DotState::NoDot => items.push(d),
                        DotState::AfterDot(_) => {
                            *tail = Some(d);
                            *dot = DotState::HaveTail;
                        }
                        // Unreachable in practice: `check_datum_allowed` rejects the datum's start.
                        DotState::HaveTail => {
                            let (s, e) = (d.span.start as usize, d.span.end as usize);
                            return self.err(
                                ReadErrorKind::Syntax,
                                s,
                                e,
                                "expected `)` after the datum following `.`",
                            );
                        }
                    }
                    return Ok(());
                }
                Some(&mut Frame::Quote { name, start, prefix_end }) => {
                    self.stack.pop();
                    let end = d.span.end as usize;
                    let sym = Datum::new(DatumKind::Symbol(Rc::from(name)), self.span(start, prefix_end));
                    d = Datum::new(DatumKind::List(vec![sym, d], None), self.span(start, end));
                }
                Some(Frame::DatumComment { .. }) => {
                    self.stack.pop();
                    return Ok(());
                }
            }
        }
    }

    /// Skips whitespace, `;` comments and (nesting) `#| |#` comments. `#;` is handled by the
    /// main loop because it needs the datum stack.
    fn skip_atmosphere(&mut self) -> Result<(), ReadError> {
        let bytes = self.bytes;
        while let Some(&b) = bytes.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b';' => {
                    self.pos = match bytes[self.pos..].iter().position(|&c| c == b'\n') {
                        Some(i) => self.pos + i + 1,
                        None => bytes.len(),
                    };
                }
                b'#' if bytes.get(self.pos + 1) == Some(&b'|') => self.skip_block_comment()?,
                0x80.. => match self.src[self.pos..].chars().next() {
                    Some(c) if is_space(c) => self.pos += c.len_utf8(),
                    _ => return Ok(()),
                },
                _ => return Ok(()),
            }
        }
        Ok(())
    }

    fn skip_block_comment(&mut self) -> Result<(), ReadError> {
        let start = self.pos;
        let bytes = self.bytes;
        let mut i = start + 2;
        let mut depth = 1usize;
        while i < bytes.len() {
            match (bytes[i], bytes.get(i + 1)) {
                (b'#', Some(b'|')) => {
                    depth += 1;
                    i += 2;
                }
                (b'|', Some(b'#')) => {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        self.pos = i;
                        return Ok(());
                    }
                }
                _ => i += 1,
            }
        }
        self.err(ReadErrorKind::Incomplete, start, start + 2, "unterminated block comment")
    }

    /// The control character at `at`, if there is one that is not whitespace
    /// (U+0000 to U+001F, U+007F to U+009F, but tab, line feed and the like are
    /// whitespace): outside strings and comments it is an error, so that an
    /// invisible character never becomes part of a symbol.
    fn control_at(&self, at: usize) -> Option<char> {
        let c = self.src.get(at..)?.chars().next()?;
        (c.is_control() && !c.is_whitespace()).then_some(c)
    }

    /// End offset of the token starting at `start`: up to whitespace, a delimiter
    /// or a control character.
    fn token_end(&self, start: usize) -> usize {
        let mut i = start;
        let bytes = self.bytes;
        while let Some(&b) = bytes.get(i) {
            if b < 0x80 {
                if b.is_ascii_whitespace() || b == 0x0b || is_delimiter_byte(b) || b.is_ascii_control() {
                    break;
                }
                i += 1;
            } else {
                let c = self.src[i..].chars().next().unwrap_or(' ');
                if is_space(c) || c.is_control() {
                    break;
                }
                i += c.len_utf8();
            }
        }
        i
    }

    /// A string literal starting at `self.pos` (the `"`).
    fn read_string(&mut self) -> Result<Datum, ReadError> {
        let start = self.pos;
        let bytes = self.bytes;
        let mut s = String::new();
        let mut i = start + 1;
        let mut chunk = i;
        loop {
            match bytes.get(i) {
                None => return self.err(ReadErrorKind::Incomplete, start, start + 1, "unterminated string"),
                Some(b'"') => {
                    s.push_str(&self.src[chunk..i]);
                    self.pos = i + 1;
                    return Ok(Datum::new(DatumKind::Str(Rc::from(s)), self.span(start, i + 1)));
                }
                Some(b'\\') => {
                    s.push_str(&self.src[chunk..i]);
                    let c = match bytes.get(i + 1) {
                        None => {
                            return self.err(
                                ReadErrorKind::Incomplete,
                                start,
                                start + 1,
                                "unterminated string",
                            )
                        }
                        Some(b'\\') => '\\',
                        Some(b'"') => '"',
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'r') => '\r',
                        Some(_) => {
                            let len = 1 + self.char_len(i + 1);
                            let esc = &self.src[i..i + len];
                            return self.err(
                                ReadErrorKind::Syntax,
                                i,
                                i + len,
                                format!("unknown escape `{esc}` in string (known: \\\\ \\\" \\n \\t \\r)"),
                            );
                        }
                    };
                    s.push(c);
                    i += 2;
                    chunk = i;
                }
                Some(_) => i += 1,
            }
        }
    }

    /// `#...` at `self.pos` that is neither `#|` nor `#;`: a boolean (`#t`,
    /// `#f`, `#true`, `#false`) or a number with radix and exactness prefixes
    /// (`#x1F`, `#b101`, `#o17`, `#d10`, `#e1.5`, `#i1/3`, `#x#e10`), any letter case.
    fn read_hash(&mut self) -> Result<Datum, ReadError> {
        let start = self.pos;
        let mut end = self.token_end(start + 1);
        let tok = self.src[start..end].to_ascii_lowercase();
        let kind = match tok.as_str() {
            "#t" | "#true" => DatumKind::Bool(true),
            "#f" | "#false" => DatumKind::Bool(false),
            t if t.len() > 1 && matches!(t.as_bytes()[1], b'x' | b'b' | b'o' | b'd' | b'e' | b'i') => {
                match parse_prefixed(t) {
                    Ok(k) => k,
                    Err(why) => {
                        let tok = &self.src[start..end];
                        return self.err(
                            ReadErrorKind::Syntax,
                            start,
                            end,
                            format!("bad number `{tok}`: {why}"),
                        );
                    }
                }
            }
            _ => {
                if end == start + 1 && end < self.bytes.len() && !self.bytes[end].is_ascii_whitespace() {
                    // `#(`, `#'`, `#"`...: show the delimiter that follows.
                    end += self.char_len(end);
                }
                let tok = &self.src[start..end];
                return self.err(ReadErrorKind::Syntax, start, end, format!("bad `#` syntax: {tok}"));
            }
        };
        self.pos = end;
        Ok(Datum::new(kind, self.span(start, end)))
    }
}

/// A number written with `#` prefixes (lower case): at most one radix (`#x`
/// 16, `#o` 8, `#b` 2, `#d` 10) and at most one exactness (`#e` exact, `#i`
/// inexact), in either order, before a number of that radix (other radices:
/// `[+-]?digits` or `[+-]?digits/digits`, exact). `#e` reads a decimal
/// exactly (`#e0.1` is 1/10); `#i` converts to the nearest double.
fn parse_prefixed(tok: &str) -> Result<DatumKind, String> {
    let (mut radix, mut exact) = (None, None);
    let mut rest = tok;
    while let Some(r) = rest.strip_prefix('#') {
        let c = r.bytes().next().ok_or("`#` without a prefix letter")?;
        match c {
            b'x' | b'b' | b'o' | b'd' if radix.is_none() => {
                radix = Some(match c {
                    b'x' => 16,
                    b'b' => 2,
                    b'o' => 8,
                    _ => 10,
                })
            }
            b'e' | b'i' if exact.is_none() => exact = Some(c == b'e'),
            b'x' | b'b' | b'o' | b'd' => return Err("two radix prefixes".into()),
            b'e' | b'i' => return Err("two exactness prefixes".into()),
            _ => {
                return Err(format!("unknown prefix `#{}`", &r[..r.chars().next().map_or(1, char::len_utf8)]))
            }
        }
        rest = &r[1..];
    }
    let radix = radix.unwrap_or(10);
    let n = if radix == 10 { parse_number(rest) } else { parse_radix(rest, radix) };
    let Some(n) = n else {
        return Err(match radix {
            10 => "not a number".into(),
            r => format!("not an exact number in base {r}"),
        });
    };
    Ok(match (exact, n) {
        (Some(true), DatumKind::Real(_)) => {
            if rest.ends_with("inf.0") || rest.ends_with("nan.0") {
                return Err("infinities and NaNs have no exact value".into());
            }
            exact_kind(exact_decimal(rest)?)
        }
        (Some(false), n) => DatumKind::Real(n.as_f64().unwrap_or(f64::NAN)),
        (_, n) => n,
    })
}

/// `[+-]?D+(/D+)?` in base `radix`, exact (a zero denominator is not a number).
fn parse_radix(tok: &str, radix: u32) -> Option<DatumKind> {
    let (neg, body) = match tok.as_bytes().first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    let int = |t: &str| {
        if t.is_empty() || !t.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        BigInt::parse_bytes(t.as_bytes(), radix)
    };
    let q = match body.split_once('/') {
        Some((n, d)) => {
            let d = int(d)?;
            if num_traits::Zero::is_zero(&d) {
                return None;
            }
            num_rational::BigRational::new(int(n)?, d)
        }
        None => num_rational::BigRational::from_integer(int(body)?),
    };
    Some(exact_kind(if neg { -q } else { q }))
}

/// An exact number as a datum: an integer (small or big) or a rational.
fn exact_kind(q: num_rational::BigRational) -> DatumKind {
    match crate::num::from_rat(q) {
        crate::value::Value::Int(i) => DatumKind::Int(i),
        crate::value::Value::Big(b) => DatumKind::Big(b),
        crate::value::Value::Rat(r) => DatumKind::Rat(r),
        // (from_rat makes nothing else)
        _ => DatumKind::Int(0),
    }
}

/// The exact value of a decimal real token (`parse_number` accepted it as a
/// real, and it is not an infinity or NaN): digits, optional fraction,
/// optional exponent (at most 100000 in magnitude).
fn exact_decimal(tok: &str) -> Result<num_rational::BigRational, String> {
    let (mantissa, exp) = match tok.find(['e', 'E']) {
        Some(k) => (&tok[..k], &tok[k + 1..]),
        None => (tok, "0"),
    };
    let exp: i64 = exp.parse().map_err(|_| "exponent too large for an exact number".to_string())?;
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let neg = int_part.starts_with('-');
    let digits: String = int_part.trim_start_matches(['+', '-']).chars().chain(frac.chars()).collect();
    let scale = exp - frac.len() as i64;
    if scale.abs() > 100_000 {
        return Err("exponent too large for an exact number".into());
    }
    let n = BigInt::parse_bytes(digits.as_bytes(), 10).unwrap_or_default();
    let p = num_traits::pow(BigInt::from(10), scale.unsigned_abs() as usize);
    let q = if scale >= 0 {
        num_rational::BigRational::from_integer(n * p)
    } else {
        num_rational::BigRational::new(n, p)
    };
    Ok(if neg { -q } else { q })
}

/// Parses a number token, or returns `None` if the token is a symbol.
///
/// - exact integers: `[+-]?[0-9]+`, as `Int` if they fit in `i64`, else `Big`;
/// - reals: `[+-]?(D+ | D+.D* | .D+)([eE][+-]?D+)?` with a `.` or an exponent,
///   parsed with Rust's correctly rounded `str::parse::<f64>`; and `+inf.0`,
///   `-inf.0`, `+nan.0`, `-nan.0`.
///
/// - exact rationals: `[+-]?D+/D+` with a non-zero denominator (`1/2`, `-6/4`),
///   normalised (`4/2` reads as the integer 2).
///
/// Everything else is a symbol, including `1+`, `-`, `...`, `->x`, `inf`, `nan`, `1/0`.
fn parse_number(tok: &str) -> Option<DatumKind> {
    if let Some((n, d)) = tok.split_once('/') {
        let int = |t: &str| match parse_number(t) {
            Some(DatumKind::Int(i)) => Some(BigInt::from(i)),
            Some(DatumKind::Big(b)) => Some((*b).clone()),
            _ => None,
        };
        if d.starts_with(['+', '-']) || d.contains('/') {
            return None;
        }
        let (n, d) = (int(n)?, int(d)?);
        if num_traits::Zero::is_zero(&d) {
            return None;
        }
        let q = num_rational::BigRational::new(n, d);
        return Some(if q.is_integer() {
            match crate::num::from_big(q.to_integer()) {
                crate::value::Value::Int(i) => DatumKind::Int(i),
                crate::value::Value::Big(b) => DatumKind::Big(b),
                _ => return None,
            }
        } else {
            DatumKind::Rat(Rc::new(q))
        });
    }
    match tok {
        "+inf.0" => return Some(DatumKind::Real(f64::INFINITY)),
        "-inf.0" => return Some(DatumKind::Real(f64::NEG_INFINITY)),
        "+nan.0" => return Some(DatumKind::Real(f64::NAN)),
        "-nan.0" => return Some(DatumKind::Real(-f64::NAN)),
        _ => {}
    }
    let b = tok.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i = 1;
    }
    let digits = |i: &mut usize| {
        let s = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - s
    };
    let int_digits = digits(&mut i);
    let mut frac_digits = 0;
    let mut inexact = false;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = digits(&mut i);
        inexact = true;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
        inexact = true;
    }
    if i != b.len() {
        return None;
    }
    if inexact {
        return tok.parse::<f64>().ok().map(DatumKind::Real);
    }
    match tok.parse::<i64>() {
        Ok(n) => Some(DatumKind::Int(n)),
        Err(_) => {
            let digits = tok.trim_start_matches(['+', '-']).as_bytes();
            let mut n = BigInt::parse_bytes(digits, 10)?;
            if b[0] == b'-' {
                n = -n;
            }
            Some(DatumKind::Big(Rc::new(n)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(src: &str) -> Vec<Datum> {
        match read_all(src, 7) {
            Ok(v) => v,
            Err(e) => panic!("read {src:?} failed: {e:?}"),
        }
    }

    fn read1(src: &str) -> Datum {
        let mut v = read(src);
        assert_eq!(v.len(), 1, "expected one datum in {src:?}");
        v.pop().unwrap()
    }

    fn err(src: &str) -> ReadError {
        match read_all(src, 7) {
            Ok(v) => panic!("read {src:?} should fail, got {}", show_all(&v)),
            Err(e) => e,
        }
    }

    /// A compact printing that shows each atom's type.
    fn show(d: &Datum) -> String {
        match &d.kind {
            DatumKind::Int(n) => n.to_string(),
            DatumKind::Big(n) => format!("big:{n}"),
            DatumKind::Rat(q) => format!("rat:{q}"),
            DatumKind::Real(x) => format!("{x:?}f"),
            DatumKind::Bool(b) => (if *b { "#t" } else { "#f" }).to_string(),
            DatumKind::Str(s) => format!("{s:?}"),
            DatumKind::Symbol(s) => s.to_string(),
            DatumKind::List(items, tail) => {
                let mut parts: Vec<String> = items.iter().map(show).collect();
                if let Some(t) = tail {
                    parts.push(".".into());
                    parts.push(show(t));
                }
                format!("({})", parts.join(" "))
            }
        }
    }

    fn show_all(v: &[Datum]) -> String {
        v.iter().map(show).collect::<Vec<_>>().join(" ")
    }

    fn check(src: &str, expected: &str) {
        assert_eq!(show_all(&read(src)), expected, "reading {src:?}");
    }

    fn sp(start: usize, end: usize) -> Span {
        Span::new(7, start, end)
    }

    fn check_err(src: &str, kind: ReadErrorKind, span: (usize, usize), msg: &str) {
        let e = err(src);
        assert_eq!(e.kind, kind, "kind for {src:?}: {e:?}");
        assert_eq!(e.span, sp(span.0, span.1), "span for {src:?}: {e:?}");
        assert!(e.message.contains(msg), "message for {src:?}: {:?} should contain {msg:?}", e.message);
    }

    fn real(src: &str) -> f64 {
        match &read1(src).kind {
            DatumKind::Real(x) => *x,
            k => panic!("{src:?} read as {k:?}, not a real"),
        }
    }

    fn sym(src: &str) -> String {
        match &read1(src).kind {
            DatumKind::Symbol(s) => s.to_string(),
            k => panic!("{src:?} read as {k:?}, not a symbol"),
        }
    }

    // ---- atmosphere ----

    #[test]
    fn empty_and_whitespace() {
        check("", "");
        check("  \n\t\r\x0c ", "");
        check("; just a comment", "");
        check("; comment\n; another\n", "");
        check("#| block |#", "");
        check("a ; comment ( \" \nb", "a b");
    }

    #[test]
    fn block_comments_nest() {
        check("#| a #| b |# c |# x", "x");
        check("x #| ( \" ; |# y", "x y");
        check("#|#|a|#|#z", "z");
        check("#| outer #| inner |# still ( comment |#(1)", "(1)");
        check("a#|b|#", "a#|b|#"); // `#|` inside a token is part of the symbol
        check("(a #| c |# b)", "(a b)");
    }

    #[test]
    fn datum_comments() {
        check("#; (a b) c", "c");
        check("#;x", "");
        check("(a #;b c)", "(a c)");
        check("(a #; (b (c)) d)", "(a d)");
        check("#; #; a b c", "c");
        check("#;   ; line comment\n #| block |# x y", "y");
        check("'#;a b", "(quote b)");
        check("#;'a b", "b");
        check("(a . #;b c)", "(a . c)");
        check("(a . b #;c)", "(a . b)");
        check("(#;a)", "()");
        check("#;#|x|#1 2", "2");
    }

    // ---- lists ----

    #[test]
    fn lists_and_brackets() {
        check("()", "()");
        check("[]", "()");
        check("(a b c)", "(a b c)");
        check("[a (b [c]) d]", "(a (b (c)) d)");
        check("(let ([x 1] [y 2]) x)", "(let ((x 1) (y 2)) x)");
        check("(a)(b)", "(a) (b)");
        check("a(b)c", "a (b) c");
    }

    #[test]
    fn mismatched_brackets() {
        check_err("(a]", ReadErrorKind::Syntax, (2, 3), "expected `)`");
        check_err("[a)", ReadErrorKind::Syntax, (2, 3), "expected `]`");
        check_err("([a) ]", ReadErrorKind::Syntax, (3, 4), "expected `]`");
    }

    #[test]
    fn unbalanced_close() {
        check_err(")", ReadErrorKind::Syntax, (0, 1), "unexpected `)`");
        check_err("(a) b)", ReadErrorKind::Syntax, (5, 6), "unexpected `)`");
        check_err("]", ReadErrorKind::Syntax, (0, 1), "unexpected `]`");
    }

    #[test]
    fn dotted_pairs() {
        check("(a . b)", "(a . b)");
        check("(a b . c)", "(a b . c)");
        check("[a . 1]", "(a . 1)");
        check("(a . (b c))", "(a b c)");
        check("(a . ())", "(a)");
        check("(a . (b . c))", "(a b . c)");
        check("(a . (b . (c . (d))))", "(a b c d)");
        check("(a . [b . ((c) . d)])", "(a b (c) . d)");
        check("(a . (b . #;x (c)))", "(a b c)");
        check("(a . ((b . (c)) . (d . e)))", "(a (b c) d . e)");
        check("((a . (b)) . ())", "((a b))");
        check("(a . 'b)", "(a quote b)");
        check("(a .b)", "(a .b)"); // `.b` is a symbol
        check("(a ... b)", "(a ... b)");
        let d = read1("(a b . c)");
        match &d.kind {
            DatumKind::List(items, Some(tail)) => {
                assert_eq!(items.len(), 2);
                assert_eq!(tail.as_symbol(), Some("c"));
                assert_eq!(tail.span, sp(7, 8));
            }
            k => panic!("{k:?}"),
        }
        assert!(d.as_list().is_none());
        assert_eq!(read1("(a . (b c))").as_list().map(|l| l.len()), Some(3));
    }

    #[test]
    fn dotted_pair_errors() {
        check_err("( . a)", ReadErrorKind::Syntax, (2, 3), "at least one datum before the `.`");
        check_err("(a . )", ReadErrorKind::Syntax, (3, 4), "expected a datum after `.`");
        check_err("(a . b c)", ReadErrorKind::Syntax, (7, 8), "expected `)` after the datum following `.`");
        check_err("[a . b c]", ReadErrorKind::Syntax, (7, 8), "expected `]`");
        check_err("(a . b (c d))", ReadErrorKind::Syntax, (7, 8), "expected `)`");
        check_err("(a . . b)", ReadErrorKind::Syntax, (5, 6), "second `.`");
        check_err("(a . b . c)", ReadErrorKind::Syntax, (7, 8), "second `.`");
        check_err(".", ReadErrorKind::Syntax, (0, 1), "outside a list");
        check_err("a . b", ReadErrorKind::Syntax, (2, 3), "outside a list");
        check_err("'.", ReadErrorKind::Syntax, (1, 2), "unexpected `.`");
        check_err("(a . b]", ReadErrorKind::Syntax, (6, 7), "expected `)`");
    }

    // ---- quotes ----

    #[test]
    fn quotes() {
        check("'x", "(quote x)");
        check("' x", "(quote x)");
        check("''x", "(quote (quote x))");
        check("'(a b)", "(quote (a b))");
        check("`(a ,b ,@c)", "(quasiquote (a (unquote b) (unquote-splicing c)))");
        check("'()", "(quote ())");
        check("(a 'b c)", "(a (quote b) c)");
        check("'\n; c\n x", "(quote x)");
        check(", @x", "(unquote @x)");
        let d = read1("  'foo ");
        assert_eq!(d.span, sp(2, 6));
        let l = d.as_list().unwrap();
        assert_eq!(l[0].as_symbol(), Some("quote"));
        assert_eq!(l[0].span, sp(2, 3));
        assert_eq!(l[1].span, sp(3, 6));
        let d = read1(",@(a)");
        assert_eq!(d.span, sp(0, 5));
        assert_eq!(d.as_list().unwrap()[0].span, sp(0, 2));
    }

    #[test]
    fn quote_errors() {
        check_err("'", ReadErrorKind::Incomplete, (0, 1), "expected a datum after `'`");
        check_err("(a ,@", ReadErrorKind::Incomplete, (3, 5), "expected a datum after `,@`");
        check_err("(a ')", ReadErrorKind::Syntax, (4, 5), "expected a datum after `'`, found `)`");
    }

    // ---- atoms ----

    #[test]
    fn booleans() {
        check("#t #f #true #false", "#t #f #t #f");
        check("(#t)", "(#t)");
        let d = read1(" #true");
        assert_eq!(d.span, sp(1, 6));
    }

    #[test]
    fn booleans_in_any_case() {
        check("#T #F #True #FALSE", "#t #f #t #f");
    }

    #[test]
    fn numbers_with_radix_and_exactness_prefixes() {
        check("#x1F #X1f #xff #x-FF #b101 #b-0 #o17 #d10 #D-7", "31 31 255 -255 5 0 15 10 -7");
        check("#x1/2 #b11/10 #o-10/4", "rat:1/2 rat:3/2 -2");
        check("#x10000000000000000", "big:18446744073709551616");
        // #e: a decimal's exact value, not its double's
        check(
            "#e1.5 #e0.1 #e-2.50 #e1e3 #e1.5e-3 #e7 #e1/3",
            "rat:3/2 rat:1/10 rat:-5/2 1000 rat:3/2000 7 rat:1/3",
        );
        // either order, one of each kind
        check("#x#e10 #e#x10 #i#b101", "16 16 5.0f");
        // #i: the nearest double
        assert_eq!(real("#i1/3"), 1.0 / 3.0);
        assert_eq!(real("#i7"), 7.0);
        assert_eq!(real("#i123456789012345678901234567890"), 1.2345678901234568e29);
        assert_eq!(real("#I2.5"), 2.5);
        // (a prefixed number inside a list)
        check("(a #x1F)", "(a 31)");
        let d = read1(" #x1F");
        assert_eq!(d.span, sp(1, 5));
    }

    #[test]
    fn bad_prefixed_numbers() {
        check_err("#x", ReadErrorKind::Syntax, (0, 2), "bad number `#x`: not an exact number in base 16");
        check_err("#b102", ReadErrorKind::Syntax, (0, 5), "not an exact number in base 2");
        check_err("#x1.5", ReadErrorKind::Syntax, (0, 5), "not an exact number in base 16");
        check_err("#x1/0", ReadErrorKind::Syntax, (0, 5), "not an exact number in base 16");
        check_err("#e", ReadErrorKind::Syntax, (0, 2), "bad number `#e`: not a number");
        check_err("#eabc", ReadErrorKind::Syntax, (0, 5), "not a number");
        check_err("#x#b1", ReadErrorKind::Syntax, (0, 5), "two radix prefixes");
        check_err("#e#i1", ReadErrorKind::Syntax, (0, 5), "two exactness prefixes");
        check_err("#x#q1", ReadErrorKind::Syntax, (0, 5), "unknown prefix `#q`");
        check_err("#e+inf.0", ReadErrorKind::Syntax, (0, 8), "no exact value");
        check_err("#e1e999999999", ReadErrorKind::Syntax, (0, 13), "exponent too large");
    }

    #[test]
    fn bad_hash_syntax() {
        check_err("#(1 2)", ReadErrorKind::Syntax, (0, 2), "bad `#` syntax: #(");
        check_err("#\\a", ReadErrorKind::Syntax, (0, 3), "bad `#` syntax: #\\a");
        check_err("#tru", ReadErrorKind::Syntax, (0, 4), "bad `#` syntax: #tru");
        check_err("#q1", ReadErrorKind::Syntax, (0, 3), "bad `#` syntax: #q1");
        check_err("#t1", ReadErrorKind::Syntax, (0, 3), "bad `#` syntax: #t1");
        check_err("#", ReadErrorKind::Syntax, (0, 1), "bad `#` syntax: #");
        check_err("# a", ReadErrorKind::Syntax, (0, 1), "bad `#` syntax: #");
        // (the line break that follows was put in the message)
        assert_eq!(err("#\n").message, "bad `#` syntax: #");
        check_err("#λ", ReadErrorKind::Syntax, (0, 3), "bad `#` syntax: #λ");
        // `#` inside a symbol is fine.
        check("a#b", "a#b");
    }

    #[test]
    fn strings() {
        check(r#""hello""#, r#""hello""#);
        check(r#""""#, r#""""#);
        check(r#""a\\b\"c\nd\te\rf""#, r#""a\\b\"c\nd\te\rf""#);
        check("\"two\nlines\"", r#""two\nlines""#);
        check("\"λ ü ; ( #|\"", "\"λ ü ; ( #|\"");
        check(r#"("a" "b")"#, r#"("a" "b")"#);
        let d = read1(r#"  "a\nb" "#);
        assert_eq!(d.span, sp(2, 8));
        match &d.kind {
            DatumKind::Str(s) => assert_eq!(&**s, "a\nb"),
            k => panic!("{k:?}"),
        }
        check(r#"a"b""#, r#"a "b""#);
    }

    #[test]
    fn string_errors() {
        check_err(r#""abc"#, ReadErrorKind::Incomplete, (0, 1), "unterminated string");
        check_err("(f \"abc\n", ReadErrorKind::Incomplete, (3, 4), "unterminated string");
        check_err(r#""abc\"#, ReadErrorKind::Incomplete, (0, 1), "unterminated string");
        check_err(r#""a\qb""#, ReadErrorKind::Syntax, (2, 4), "unknown escape `\\q`");
        check_err(r#""a\λ""#, ReadErrorKind::Syntax, (2, 5), "unknown escape");
    }

    #[test]
    fn rationals() {
        check("1/2 -6/4 +3/9 4/2 -0/5", "rat:1/2 rat:-3/2 rat:1/3 2 0");
        check("123456789012345678901234567891/2", "rat:123456789012345678901234567891/2");
        check("(1/3 . 2/3)", "(rat:1/3 . rat:2/3)");
    }

    #[test]
    fn integers() {
        check("0 42 -12 +7 -0", "0 42 -12 7 0");
        check("9223372036854775807 -9223372036854775808", "9223372036854775807 -9223372036854775808");
        check("9223372036854775808 -9223372036854775809", "big:9223372036854775808 big:-9223372036854775809");
        check("+9223372036854775808", "big:9223372036854775808");
        let hundred = "1234567890".repeat(10);
        check(&hundred, &format!("big:{hundred}"));
        check(&format!("-{hundred}"), &format!("big:-{hundred}"));
        check("007", "7");
        let d = read1(" -12 ");
        assert_eq!(d.span, sp(1, 4));
    }

    #[test]
    fn reals() {
        for (src, want) in [
            ("1.5", 1.5),
            (".5", 0.5),
            ("-0.25", -0.25),
            ("1.", 1.0),
            ("-1.", -1.0),
            ("+.5", 0.5),
            ("1e10", 1e10),
            ("1E-3", 1e-3),
            ("-2.5e+7", -2.5e7),
            ("0.1", 0.1),
            ("3.141592653589793238462643383279", std::f64::consts::PI),
            ("1e400", f64::INFINITY),
            ("1e-400", 0.0),
            ("2.5E3", 2500.0),
            ("123456789012345678901234567890.0", 123456789012345678901234567890.0),
        ] {
            assert_eq!(real(src), want, "{src}");
        }
        assert!(real("-0.0").is_sign_negative());
        assert_eq!(real("+inf.0"), f64::INFINITY);
        assert_eq!(real("-inf.0"), f64::NEG_INFINITY);
        assert!(real("+nan.0").is_nan());
        assert!(real("-nan.0").is_nan());
        // Correct rounding: the classic hard case for naive parsers.
        assert_eq!(real("2.2250738585072011e-308"), f64::from_bits(0x000F_FFFF_FFFF_FFFF));
        assert_eq!(real("2.2250738585072012e-308"), f64::MIN_POSITIVE);
        assert_eq!(real("0.30000000000000004"), 0.1 + 0.2);
        assert_eq!(real("9007199254740993.0"), 9007199254740992.0);
    }

    #[test]
    fn number_like_symbols() {
        for s in [
            "1+",
            "-",
            "+",
            "...",
            "1/0",
            "1/-2",
            "1/2/3",
            "1./2",
            "/2",
            "1/",
            "->x",
            "*j",
            "*j-inverse",
            "===>",
            "vec+",
            "+=",
            "-=",
            "1-",
            "e10",
            "1e",
            "1e+",
            "1.5.2",
            "inf",
            "nan",
            "+inf",
            "inf.0",
            "+inf.00",
            "--1",
            "+-1",
            "1..",
            "..5",
            ".e1",
            "-.",
            "+.",
            "1.e",
            "0x10",
            "1_000",
            "١٢",
            "−1",
        ] {
            assert_eq!(sym(s), s);
        }
    }

    #[test]
    fn symbols() {
        for s in
            ["λ", "αβ", "x₁", "foo-bar?", "set!", "<=", "a.b", "|x|", "a{b}", "@", "string->symbol", "-x"]
        {
            assert_eq!(sym(s), s);
        }
        // Case-sensitive.
        check("Foo foo FOO", "Foo foo FOO");
        assert_ne!(read1("Foo").as_symbol(), read1("foo").as_symbol());
        // Delimiters end symbols.
        check("a'b", "a (quote b)");
        check("a`b,c", "a (quasiquote b) (unquote c)");
        check("a;b\nc", "a c");
        check("(λ (x₁) x₁)", "(λ (x₁) x₁)");
        // Unicode whitespace separates tokens.
        check("a\u{a0}b\u{2003}c", "a b c");
        check("a\u{feff}b\u{200b}c", "a b c");
        let d = read1(" αβ ");
        assert_eq!(d.span, sp(1, 5));
    }

    /// A control character outside strings and comments was read as part of a
    /// symbol (`a<NUL>` gave "unbound variable `a`" with the character invisible):
    /// it is an error at the character, naming it.
    #[test]
    fn control_characters_are_errors_outside_strings_and_comments() {
        check_err("\0", ReadErrorKind::Syntax, (0, 1), "unexpected control character U+0000");
        check_err("(f a\0b)", ReadErrorKind::Syntax, (4, 5), "control character U+0000");
        check_err("(f \u{7f})", ReadErrorKind::Syntax, (3, 4), "U+007F");
        check_err("x \u{1b}[31m", ReadErrorKind::Syntax, (2, 3), "U+001B");
        check_err("(a \u{9b}", ReadErrorKind::Syntax, (3, 5), "U+009B");
        check_err("#t\u{1}", ReadErrorKind::Syntax, (2, 3), "U+0001");
        // strings, comments and whitespace controls (tab, form feed, NEL) are fine
        check("\"a\0b\" ; \0\n #| \u{1} |# x\t\u{c}y\u{85}z", "\"a\\0b\" x y z");
    }

    // ---- spans ----

    #[test]
    fn spans() {
        let src = "(define (f x)\n  [g x . 1])";
        let d = read1(src);
        assert_eq!(d.span, sp(0, src.len()));
        let l = d.as_list().unwrap();
        assert_eq!(l[0].span, sp(1, 7));
        assert_eq!(l[1].span, sp(8, 13));
        assert_eq!(l[1].as_list().unwrap()[1].span, sp(11, 12));
        assert_eq!(l[2].span, sp(16, 25));
        match &l[2].kind {
            DatumKind::List(items, Some(t)) => {
                assert_eq!(items[0].span, sp(17, 18));
                assert_eq!(t.span, sp(23, 24));
            }
            k => panic!("{k:?}"),
        }
        let v = read("a\n  (b)  \"s\" #;x 12");
        let spans: Vec<Span> = v.iter().map(|d| d.span).collect();
        assert_eq!(spans, vec![sp(0, 1), sp(4, 7), sp(9, 12), sp(17, 19)]);
        // The file id goes into every span.
        let v = read_all("(a)", 3).unwrap();
        assert_eq!(v[0].span.file, 3);
        assert_eq!(v[0].as_list().unwrap()[0].span.file, 3);
    }

    // ---- incomplete input ----

    #[test]
    fn incomplete() {
        check_err("(", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
        check_err("(a (b c)", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
        check_err("(a (b c", ReadErrorKind::Incomplete, (3, 4), "unclosed list");
        check_err("[a", ReadErrorKind::Incomplete, (0, 1), "missing `]`");
        check_err("(a . ", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
        check_err("(a . b", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
        check_err("#| abc", ReadErrorKind::Incomplete, (0, 2), "unterminated block comment");
        check_err("a #| #| |# ", ReadErrorKind::Incomplete, (2, 4), "unterminated block comment");
        check_err("#;", ReadErrorKind::Incomplete, (0, 2), "expected a datum after `#;`");
        check_err("#; ; x", ReadErrorKind::Incomplete, (0, 2), "expected a datum after `#;`");
        check_err("(define (f x)\n  (+ x 1)\n", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
        check_err("(a ; comment )", ReadErrorKind::Incomplete, (0, 1), "unclosed list");
    }

    #[test]
    fn errors_display_and_first_error_wins() {
        let e = err("(a] (");
        assert_eq!(e.kind, ReadErrorKind::Syntax);
        assert_eq!(e.to_string(), e.message);
        check_err("(#;)", ReadErrorKind::Syntax, (3, 4), "expected a datum after `#;`, found `)`");
    }

    // ---- depth and size ----

    fn depth(d: &Datum) -> usize {
        let mut n = 0;
        let mut cur = d;
        while let DatumKind::List(items, _) = &cur.kind {
            n += 1;
            match items.last() {
                Some(x) => cur = x,
                None => break,
            }
        }
        n
    }

    const DEEP: usize = 100_000;

    #[test]
    fn deep_nesting() {
        let src = "(".repeat(DEEP) + &")".repeat(DEEP);
        let mut v = read(&src);
        assert_eq!(depth(&v[0]), DEEP);
        assert_eq!(v[0].span, sp(0, 2 * DEEP));
        // (`Datum`'s `Drop` takes it apart without recursion: a derived drop would
        // overflow a debug build's 8 MB stack at this depth.)
        drop(v.pop().unwrap());

        let src = "[".repeat(DEEP) + "x" + &"]".repeat(DEEP);
        drop(read(&src).pop().unwrap());

        let src = "'".repeat(DEEP) + "x";
        let mut v = read(&src);
        assert_eq!(depth(&v[0]), DEEP);
        assert_eq!(v[0].span, sp(0, DEEP + 1));
        drop(v.pop().unwrap());

        let src = "(a . ".repeat(DEEP) + "b" + &")".repeat(DEEP);
        let mut v = read(&src);
        assert_eq!(
            show(&v[0]),
            "(a a a a a a a a a a a . b)".replace(" a a a a a a a a a a", &" a".repeat(DEEP - 1))
        );
        drop(v.pop().unwrap());
    }

    #[test]
    fn deep_nesting_errors_are_disposed_safely() {
        // Incomplete: 100,000 unclosed parens around a deep complete datum.
        let inner = "(".repeat(DEEP) + &")".repeat(DEEP);
        let e = err(&("(".repeat(DEEP) + &inner));
        assert_eq!(e.kind, ReadErrorKind::Incomplete);
        assert_eq!(e.span, sp(DEEP - 1, DEEP));
        // A syntax error after a deep datum at top level.
        let e = err(&(inner.clone() + ")"));
        assert_eq!(e.span, sp(2 * DEEP, 2 * DEEP + 1));
        // A deep datum inside a datum comment.
        check(&format!("#;{inner} 1"), "1");
        let e = err(&format!("#;{inner}")[..DEEP + 2]);
        assert_eq!(e.kind, ReadErrorKind::Incomplete);
    }

    #[test]
    fn large_input_is_linear() {
        let unit = "(define (f x) [g 'x \"str\\n\" 1.5 -42 #t]) ; comment\n#| block |# #;(skip me) ";
        let src = unit.repeat(1_000_000 / unit.len() + 1);
        assert!(src.len() > 1_000_000);
        let t = std::time::Instant::now();
        let v = read(&src);
        let elapsed = t.elapsed();
        assert_eq!(v.len(), 1_000_000 / unit.len() + 1);
        // Milliseconds in release; a generous bound for unoptimized test builds.
        assert!(elapsed.as_secs_f64() < 2.0, "1 MB took {elapsed:?}");

        // One huge list, one huge string, one huge comment.
        let src = format!("({})", "abc ".repeat(250_000));
        assert_eq!(read1(&src).as_list().unwrap().len(), 250_000);
        let src = format!("\"{}\"", "ab\\n".repeat(250_000));
        let t = std::time::Instant::now();
        read1(&src);
        let src = format!("#|{}|# x", "#| |#".repeat(200_000));
        check(&src, "x");
        let src = format!(";{}\nx", "a".repeat(1_000_000));
        check(&src, "x");
        assert!(t.elapsed().as_secs_f64() < 2.0);
    }

    // ---- fuzzing ----

    /// Every span of every datum lies inside the source and on char boundaries.
    fn check_spans(src: &str, d: &Datum) {
        let mut work = vec![d];
        while let Some(d) = work.pop() {
            let (s, e) = (d.span.start as usize, d.span.end as usize);
            assert!(s <= e && e <= src.len() && src.is_char_boundary(s) && src.is_char_boundary(e), "{d:?}");
            if let DatumKind::List(items, tail) = &d.kind {
                work.extend(items.iter());
                work.extend(tail.as_deref());
            }
        }
    }

    fn fuzz_one(src: &str) {
        match read_all(src, 0) {
            Ok(v) => v.iter().for_each(|d| check_spans(src, d)),
            Err(e) => {
                let (s, e2) = (e.span.start as usize, e.span.end as usize);
                assert!(s < e2 && e2 <= src.len(), "{e:?}");
                assert!(src.is_char_boundary(s) && src.is_char_boundary(e2), "{e:?}");
                assert!(!e.message.is_empty());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_strings_never_panic(src in any::<String>()) {
            fuzz_one(&src);
        }

        #[test]
        fn syntax_soup_never_panics(src in "[()\\[\\]'`,@#;|\"\\\\. \n\ta-z0-9+eE.λ-]{0,60}") {
            fuzz_one(&src);
        }
    }

    #[test]
    fn reading_is_prefix_stable() {
        // Every prefix of a valid text either reads or is an error; never a panic.
        let src = "(a [b . c] 'd `(e ,f ,@g) \"h\\\"i\" #t #| x #| y |# |# #;(j) 1.5e3 -7 λ)";
        for i in 0..=src.len() {
            if src.is_char_boundary(i) {
                fuzz_one(&src[..i]);
            }
        }
        let e = err(&src[..src.len() - 1]);
        assert_eq!(e.kind, ReadErrorKind::Incomplete);
    }
}
