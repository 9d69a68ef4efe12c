//! Programs: reading files with `include`, top-level definitions and
//! expressions, and their evaluation in a [`Session`] (the prelude first, then
//! user code; the REPL adds one unit per input).

use crate::anf::{Atom, GlobalScope, Group, Normalizer};
use crate::datum::{Datum, DatumKind};
use crate::error::{Error, ErrorKind, Result};
use crate::eval::{GState, Machine};
use crate::expand::{self, Core, CoreLambda, Pat};
use crate::source::{SourceMap, Span};
use crate::value::{InstRc, Value};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The prelude files, embedded so the binary runs from anywhere.
pub const PRELUDE: &[(&str, &str)] = &[
    ("base.vlad", include_str!("../prelude/base.vlad")),
    ("ad.vlad", include_str!("../prelude/ad.vlad")),
    ("optimize.vlad", include_str!("../prelude/optimize.vlad")),
];

/// Prelude files loaded at start-up, in order.
const PRELUDE_LOAD: &[&str] = &["base.vlad", "ad.vlad"];

/// One top-level item.
pub enum Item {
    Define {
        name: Rc<str>,
        name_span: Span,
        value: Datum,
        lambda: bool,
        /// How many lambdas, inside the outermost, a curried definition
        /// (`(define ((f a) b) body)`) made: named after `name` too, so that
        /// a trace reads "in f called at ...", not "in lambda".
        curried: usize,
        span: Span,
    },
    /// `(define-reversible (name var ...) stmt ...)` (REVERSIBLE.md), already parsed.
    DefineReversible {
        name: Rc<str>,
        name_span: Span,
        def: Box<crate::rev::syntax::ProcDef>,
    },
    Expr {
        datum: Datum,
        expected: Option<Datum>,
    },
    /// A definition that could not be parsed (only with `Session::defer_errors`):
    /// its name, when it has one, raises the error when used.
    Broken {
        name: Option<(Rc<str>, Span)>,
        error: Error,
    },
}

/// A session: the machine, the sources, and the names defined so far.
pub struct Session {
    pub m: Machine,
    pub sources: SourceMap,
    /// Top-level names visible to new code (prelude and earlier units).
    pub scope: FxHashMap<Rc<str>, u32>,
    pub include_dirs: Vec<PathBuf>,
    /// Names defined by the prelude (for `:env` and completion).
    pub prelude_names: Vec<Rc<str>>,
    /// The prelude's pair accessors (`car`, `cadr`...) by global, with the parts
    /// they take: calls of them are compiled to destructuring in place.
    pub accessors: FxHashMap<u32, &'static [bool]>,
    /// Set while `Session::new` compiles the built-in prelude.
    loading_prelude: bool,
    /// `vlad test`: an expression that fails to compile becomes a
    /// [`Step::Failed`] (a check that fails, or passes if it expects an error)
    /// and a definition that fails to compile raises its error when used,
    /// instead of the whole unit being rejected.
    pub defer_errors: bool,
    /// Arm the `--timeout` watchdog ([`crate::watchdog`]) for each evaluation
    /// (set by the command line only).
    pub watchdog: bool,
    /// The REPL: a definition may use a name that a later input defines (a
    /// global is made for it, [`Session::pending`], which that definition
    /// fills; until then, reading it is an error).
    pub late_binding: bool,
    /// The names definitions use that no input has defined yet, and their globals.
    pub pending: FxHashMap<Rc<str>, u32>,
}

/// The prelude's pair accessors and the parts they take, innermost first (`true` = car).
const ACCESSORS: [(&str, &[bool]); 7] = [
    ("car", &[true]),
    ("cdr", &[false]),
    ("caar", &[true, true]),
    ("cadr", &[false, true]),
    ("cdar", &[true, false]),
    ("cddr", &[false, false]),
    ("caddr", &[false, false, true]),
];

/// A procedure's parameter list that a call's arguments ran out in (see
/// [`param_list`]).
struct ParamList {
    /// The parameters, as their text (a named `let`'s: its variables).
    names: Vec<String>,
    /// How many of them matched (those before the one that did not).
    matched: usize,
    /// The named `let`'s name, for one.
    loop_name: Option<String>,
}

/// The largest source file (or input line of the REPL) read: far beyond any
/// program, and a bound on what reading a device or a runaway file takes.
pub const MAX_SOURCE: u64 = 1 << 30;

/// [`MAX_SOURCE`] in words, for messages.
pub const MAX_SOURCE_TEXT: &str = "1 GiB, the most vlad reads";

/// The name a program read from standard input (the file `-` of the command
/// line) goes by in messages.
const STDIN_NAME: &str = "<stdin>";

/// Whether source file `path` is standard input: `-` named on the command
/// line (`at` is `None`: not an `include`).
fn is_stdin(path: &Path, at: Option<Span>) -> bool {
    at.is_none() && path == Path::new("-")
}

/// The name of source file `path` in messages: as given, standard input's
/// [`STDIN_NAME`].
fn source_name(path: &Path, at: Option<Span>) -> String {
    if is_stdin(path, at) {
        STDIN_NAME.to_string()
    } else {
        path.display().to_string()
    }
}

/// The lists of `data` (a source file read) that hold offset `at` inside,
/// after their opening bracket: from the outermost, one in the other.
fn lists_around(data: &[Datum], at: u32) -> Vec<&Datum> {
    let mut path = Vec::new();
    let mut items = data;
    while let Some(d) = items.iter().find(|d| d.span.start < at && at < d.span.end && d.as_list().is_some()) {
        path.push(d);
        items = d.as_list().unwrap_or_default();
    }
    path
}

/// Whether `list` is `form`'s second element, as a `lambda`'s or a
/// `define`'s parameter list is, and `form` starts with one of `heads`.
fn second_of(form: &Datum, list: &Datum, heads: &[&str]) -> bool {
    form.as_list().is_some_and(|xs| {
        xs.first().and_then(Datum::as_symbol).is_some_and(|h| heads.contains(&h))
            && xs.get(1).is_some_and(|x| std::ptr::eq(x, list))
    })
}

/// The parameter list of a `lambda`, a `define` or a named `let` in a source
/// file's `data` that holds offset `at`, where the first parameter that did
/// not match starts (in a named `let`, its variable in its binding).
fn param_list(data: &[Datum], at: u32) -> Option<ParamList> {
    let path = lists_around(data, at);
    let (list, parent) = match path.as_slice() {
        [.., parent, list] => (*list, *parent),
        _ => return None,
    };
    let (items, loop_name) = if second_of(parent, list, &["lambda"]) {
        (list.as_list()?, None)
    } else if header_name(&path, &["define", "define-reversible"]).is_some() {
        // (a definition's list starts with the procedure's name, or with the
        // inner list of a curried definition)
        (list.as_list()?.get(1..)?, None)
    } else {
        // (`list` is a binding of a named `let`: `(let name (binding ...) body)`)
        let [.., form, _, _] = path.as_slice() else { return None };
        match form.as_list()? {
            [h, name, bindings, ..] if h.as_symbol() == Some("let") && std::ptr::eq(bindings, parent) => {
                (parent.as_list()?, Some(name.as_symbol()?.to_string()))
            }
            _ => return None,
        }
    };
    let matched = items.iter().filter(|d| d.span.end <= at).count();
    let names = match loop_name {
        Some(_) => items.iter().map(binding_var).collect::<Option<Vec<_>>>()?,
        None => items.iter().map(crate::check::datum_text).collect(),
    };
    Some(ParamList { names, matched, loop_name })
}

/// The procedure a `define` in a source file's `data` names whose parameter
/// list holds offset `at`, directly or in a pattern nested in a parameter
/// (`(list y z)` of `(define (f (list x (list y z))) ...)`: everything inside
/// a definition's header is its parameters).
fn defined_around(data: &[Datum], at: u32) -> Option<String> {
    let path = lists_around(data, at);
    (1..=path.len()).rev().find_map(|k| header_name(&path[..k], &["define"]))
}

/// The name of the procedure whose definition's header is the last list of
/// `path` (a path of [`lists_around`]): `(f x y)` of `(define (f x y) ...)`,
/// a form that starts with one of `heads`; or, of a curried definition
/// `(define ((g a) b) ...)`, `((g a) b)` and its first element `(g a)`.
fn header_name(path: &[&Datum], heads: &[&str]) -> Option<String> {
    let [.., parent, list] = path else { return None };
    let first_of = |outer: &Datum, inner: &Datum| {
        outer.as_list().and_then(|xs| xs.first()).is_some_and(|x| std::ptr::eq(x, inner))
    };
    let header = second_of(parent, list, heads)
        || first_of(parent, list) && header_name(&path[..path.len() - 1], heads).is_some();
    if !header {
        return None;
    }
    let mut d = *list;
    loop {
        d = d.as_list()?.first()?;
        if let Some(name) = d.as_symbol() {
            return Some(name.to_string());
        }
    }
}

/// The `cons*` or `list` pattern in a source file's `data` whose parts hold
/// offset `at`, as written (without comments).
fn enclosing_pattern(data: &[Datum], at: u32) -> Option<String> {
    let list = *lists_around(data, at).last()?;
    let head = list.as_list()?.first()?.as_symbol()?;
    matches!(head, "cons*" | "list").then(|| crate::check::datum_text(list))
}

/// Where a `(list p ...)` pattern met a list of another length (its spine
/// ended early, or went on), says so: " (a list of fewer than N elements)".
fn list_length_note(message: &str, data: &[Datum]) -> String {
    let n = match data {
        [d] => match d.as_list() {
            Some([h, ps @ ..]) if h.as_symbol() == Some("list") => ps.len(),
            _ => return String::new(),
        },
        _ => return String::new(),
    };
    let elements = if n == 1 { "element" } else { "elements" };
    if message.starts_with("pattern mismatch: expected a pair, got () ") {
        format!(" (a list of fewer than {n} {elements})")
    } else if let Some(got) = message.strip_prefix("pattern mismatch: expected (), got ") {
        // (past the n elements, a pair: the list goes on; anything else ends
        // the spine of what is not a list)
        match (got.starts_with('('), n) {
            (true, _) => format!(" (a list of more than {n} {elements})"),
            (false, 0) => " (not a list)".to_string(),
            (false, _) => {
                let end = got.split(", for the pattern").next().unwrap_or(got);
                format!(" (not a list: after {n} {elements} it ends in {end}, not ())")
            }
        }
    } else {
        String::new()
    }
}

/// The variable of a `let` binding `(x e)`.
fn binding_var(d: &Datum) -> Option<String> {
    match d.as_list()? {
        [x, _] => x.as_symbol().map(str::to_string),
        _ => None,
    }
}

/// The accessor a call's source text names, if it is a call of one of the
/// prelude's pair accessors (`(car x)`).
fn accessor_call(text: &str) -> Option<&'static str> {
    let ds = crate::reader::read_all(text, u32::MAX).ok()?;
    let [d] = ds.as_slice() else { return None };
    let items = d.as_list()?;
    // (or a `cond` clause whose receiver is one: `(test => car)`)
    let head = match items {
        [_, arrow, receiver] if arrow.as_symbol() == Some("=>") => receiver.as_symbol()?,
        _ => items.first()?.as_symbol()?,
    };
    ACCESSORS.iter().map(|(n, _)| *n).find(|n| *n == head)
}

/// A compiled unit, ready to run.
pub struct Unit {
    pub steps: Vec<Step>,
    /// With [`Session::late_binding`]: notes on the names its definitions use
    /// that are not defined yet (see [`Session::pending`]).
    pub notes: Vec<Error>,
    /// The pending globals its definitions fill, by name, with the place
    /// of the first use that made each (see [`Session::unfill`]).
    pub filled: Vec<(Rc<str>, u32, Span)>,
}

pub enum Step {
    /// Evaluate a constant definition (global id).
    Define(u32, Span),
    /// Evaluate an expression (a thunk) and print or check its value.
    Expr { thunk: Rc<Group>, span: Span, expected: Option<Datum> },
    /// An expression that failed to compile, or a definition that failed to parse
    /// and has no name (only with `Session::defer_errors`).
    Failed { error: Error, span: Span, expected: Option<Datum>, definition: bool },
}

struct Scope<'a> {
    base: &'a FxHashMap<Rc<str>, u32>,
    local: &'a FxHashMap<Rc<str>, u32>,
    accessors: &'a FxHashMap<u32, &'static [bool]>,
    /// For a definition with [`Session::late_binding`]: the names pending
    /// from earlier inputs, and its own new unbound names.
    forward: Option<Unbound<'a>>,
}

/// See [`Scope::forward`].
type Unbound<'a> = (&'a FxHashMap<Rc<str>, u32>, &'a std::cell::RefCell<Forward>);

/// The new unbound names of a definition being compiled with
/// [`Session::late_binding`], whose globals (numbered from `next`) are made
/// once it is compiled.
struct Forward {
    next: u32,
    new: Vec<(Rc<str>, Span)>,
    notes: Vec<Error>,
}

impl Forward {
    fn lookup(&mut self, name: &str, span: Span, hint: &str) -> u32 {
        if let Some(i) = self.new.iter().position(|(n, _)| &**n == name) {
            return self.next + i as u32;
        }
        self.new.push((name.into(), span));
        self.notes.push(Error::syntax(
            span,
            format!("`{name}` is not defined yet{hint}: a later input may define it; until then, using it is an error"),
        ));
        self.next + self.new.len() as u32 - 1
    }
}

/// The error of reading a pending global (see [`Session::pending`]).
fn not_defined_yet(name: &str, span: Span) -> GState {
    GState::Failed(Error::runtime(Some(span), format!("unbound variable `{name}` (it has not been defined)")))
}

impl GlobalScope for Scope<'_> {
    fn lookup(&self, name: &str) -> Option<Atom> {
        if let Some(g) = self.local.get(name).or_else(|| self.base.get(name)) {
            return Some(Atom::Global(*g));
        }
        crate::prims::lookup(name).map(|p| Atom::Const(Value::Prim(p)))
    }
    fn accessor(&self, g: u32) -> Option<&'static [bool]> {
        self.accessors.get(&g).copied()
    }
    fn each_name(&self, f: &mut dyn FnMut(&str)) {
        self.local.keys().chain(self.base.keys()).for_each(|n| f(n));
        crate::prims::prims().iter().for_each(|p| f(p.name));
    }
    fn forward(&self, name: &str, span: Span, hint: &str) -> Option<Atom> {
        let (pending, new) = self.forward?;
        let g = match pending.get(name) {
            Some(&g) => g,
            None => new.borrow_mut().lookup(name, span, hint),
        };
        Some(Atom::Global(g))
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A session with the prelude loaded.
    pub fn new() -> Session {
        let mut s = Session::bare();
        s.loading_prelude = true;
        for name in PRELUDE_LOAD {
            let text = PRELUDE.iter().find(|(n, _)| n == name).map(|(_, t)| *t).unwrap_or("");
            let items = s
                .read_items(&format!("prelude/{}", name), text, None, &mut Vec::new())
                .expect("prelude reads");
            let unit = s.compile(items).unwrap_or_else(|e| panic!("prelude: {}", e.render(&s.sources)));
            for step in unit.steps {
                if let Step::Define(g, _) = step {
                    let _ = s.m.global(g);
                }
            }
        }
        s.loading_prelude = false;
        s.prelude_names = s.scope.keys().cloned().collect();
        s.prelude_names.sort();
        s
    }

    /// A session without the prelude.
    pub fn bare() -> Session {
        Session {
            m: Machine::new(),
            sources: SourceMap::new(),
            scope: FxHashMap::default(),
            include_dirs: Vec::new(),
            prelude_names: Vec::new(),
            accessors: FxHashMap::default(),
            loading_prelude: false,
            defer_errors: false,
            watchdog: false,
            late_binding: false,
            pending: FxHashMap::default(),
        }
    }

    /// Reads a file's items, following includes.
    pub fn read_file(&mut self, path: &Path) -> Result<Vec<Item>> {
        let text = self.read_source(path, None)?;
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut stack = vec![canon];
        self.read_items(&source_name(path, None), &text, path.parent(), &mut stack)
    }

    /// The text of a source file. A read failure is an error at `at` (the `include`,
    /// if any); text that is not UTF-8 is an error at its first bad byte. A
    /// leading byte-order mark (as some editors write) is not part of the text:
    /// it was read as a symbol, "unbound variable" with the name invisible.
    fn read_source(&mut self, path: &Path, at: Option<Span>) -> Result<String> {
        use std::io::Read;
        let name = source_name(path, at);
        let cannot =
            |e: std::io::Error| Error::new(ErrorKind::Syntax, at, format!("cannot read {name}: {e}"));
        // (at most one byte past the limit: a device such as /dev/zero, or a
        // file still being written, is not read until memory runs out)
        let mut bytes = Vec::new();
        if is_stdin(path, at) {
            std::io::stdin().lock().take(MAX_SOURCE + 1).read_to_end(&mut bytes).map_err(cannot)?;
        } else {
            std::fs::File::open(path)
                .and_then(|f| f.take(MAX_SOURCE + 1).read_to_end(&mut bytes))
                .map_err(cannot)?;
        }
        if bytes.len() as u64 > MAX_SOURCE {
            return Err(Error::new(
                ErrorKind::Syntax,
                at,
                format!("cannot read {name}: it is larger than {MAX_SOURCE_TEXT}"),
            ));
        }
        if bytes.starts_with("\u{FEFF}".as_bytes()) {
            bytes.drain(..3);
        }
        String::from_utf8(bytes).map_err(|e| {
            let good = e.utf8_error().valid_up_to();
            let byte = e.as_bytes()[good];
            let file = self.sources.add(name.clone(), String::from_utf8_lossy(e.as_bytes()));
            Error::syntax(
                Span::new(file, good, good),
                format!("invalid UTF-8 (byte 0x{byte:02X}): source files must be UTF-8 text"),
            )
        })
    }

    /// Reads source text into items. `dir` is where relative includes start.
    pub fn read_items(
        &mut self,
        name: &str,
        text: &str,
        dir: Option<&Path>,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Vec<Item>> {
        // (data nested too deeply for the memory left: an error, see `stack::grow`)
        crate::stack::catch_exhausted(|| self.read_items_here(name, text, dir, stack))
    }

    fn read_items_here(
        &mut self,
        name: &str,
        text: &str,
        dir: Option<&Path>,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Vec<Item>> {
        let file = self.sources.add(name, text);
        let data = crate::reader::read_all(text, file).map_err(|e| {
            let kind = if e.kind == crate::reader::ReadErrorKind::Incomplete {
                ErrorKind::Incomplete
            } else {
                ErrorKind::Syntax
            };
            Error::new(kind, Some(e.span), e.message)
        })?;
        let mut items = Vec::new();
        let mut it = data.into_iter().peekable();
        // (the item before ended with an expected value)
        let mut checked = false;
        while let Some(d) = it.next() {
            if d.as_symbol() == Some("===>") {
                let message = if checked {
                    "a second `===>`: an expression has one expected value"
                } else {
                    "`===>` must follow an expression"
                };
                return Err(Error::syntax(d.span, message));
            }
            checked = it.peek().and_then(|n| n.as_symbol()) == Some("===>");
            let expected = if checked {
                let arrow = it.next().unwrap();
                match it.next() {
                    // (`e ===> ===> v`: the second arrow is not a value)
                    Some(v) if v.as_symbol() != Some("===>") => Some(v),
                    _ => {
                        return Err(Error::syntax(
                            arrow.span,
                            "`===>` must be followed by the expected value",
                        ))
                    }
                }
            } else {
                None
            };
            if let Some(list) = d.as_list() {
                match list.first().and_then(|h| h.as_symbol()) {
                    Some("include") => {
                        if expected.is_some() {
                            return Err(Error::syntax(d.span, "an `include` has no value to check"));
                        }
                        let target = match list {
                            [_, Datum { kind: DatumKind::Str(s), .. }] => s.clone(),
                            _ => {
                                return Err(Error::syntax(
                                    d.span,
                                    "`include` takes one string: (include \"name\")",
                                ))
                            }
                        };
                        items.extend(self.include(&target, d.span, dir, stack, false)?);
                        continue;
                    }
                    Some(head @ ("define" | "define-reversible")) => {
                        if expected.is_some() {
                            return Err(Error::syntax(d.span, "a definition has no value to check"));
                        }
                        let item = if head == "define" {
                            parse_define(&d, list)
                        } else {
                            crate::rev::syntax::parse_define(&d).and_then(|def| {
                                check_name(&list[1].as_list().unwrap()[0], &def.name)?;
                                Ok(Item::DefineReversible {
                                    name: def.name.clone(),
                                    name_span: def.name_span,
                                    def: Box::new(def),
                                })
                            })
                        };
                        match item {
                            Ok(item) => items.push(item),
                            Err(error) if self.defer_errors => {
                                items.push(Item::Broken { name: defined_name(list), error })
                            }
                            Err(e) => return Err(e),
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            items.push(Item::Expr { datum: d, expected });
        }
        Ok(items)
    }

    /// The items of the file the REPL's `:load FILE` names (`span`: the name as
    /// typed), found as `(include "FILE")` would find it from directory `dir`.
    pub fn load(&mut self, target: &str, span: Span, dir: Option<&Path>) -> Result<Vec<Item>> {
        self.include(target, span, dir, &mut Vec::new(), true)
    }

    /// The items of an included file (`load`: for `:load`, whose messages say so).
    fn include(
        &mut self,
        target: &str,
        span: Span,
        dir: Option<&Path>,
        stack: &mut Vec<PathBuf>,
        load: bool,
    ) -> Result<Vec<Item>> {
        let what = if load { ":load" } else { "include" };
        let fail = |why: String| {
            let message = if load {
                format!("cannot load \"{}\": {}", target, why)
            } else {
                format!("include not found: \"{}\" ({})", target, why)
            };
            Err(Error::syntax(span, message))
        };
        let mut names = vec![target.to_string()];
        if !target.ends_with(".vlad") {
            names.push(format!("{}.vlad", target));
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(d) = dir {
            dirs.push(d.to_path_buf());
        }
        dirs.extend(self.include_dirs.iter().cloned());
        // A path that exists but cannot be included (a directory, a device, a FIFO:
        // reading one could wait forever) or cannot be looked at, remembered to
        // say so if no file is found after it.
        let mut unusable: Option<String> = None;
        for d in &dirs {
            for n in &names {
                let p = d.join(n);
                let meta = match std::fs::metadata(&p) {
                    Ok(m) => m,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        unusable.get_or_insert_with(|| format!("cannot access {}: {}", p.display(), e));
                        continue;
                    }
                };
                if !meta.is_file() {
                    unusable.get_or_insert_with(|| {
                        format!("{} is {}; {} names a .vlad file", p.display(), file_kind(&meta), what)
                    });
                    continue;
                }
                let canon = std::fs::canonicalize(&p).unwrap_or(p.clone());
                if let Some(i) = stack.iter().position(|q| *q == canon) {
                    // (the files of the cycle, by name: a.vlad includes b.vlad, ...)
                    let name = |q: &PathBuf| {
                        q.file_name().map_or(q.display().to_string(), |n| n.to_string_lossy().into())
                    };
                    let message = if i + 1 == stack.len() {
                        format!("include cycle: {} includes itself", p.display())
                    } else {
                        let chain: Vec<String> = stack[i..].iter().map(name).collect();
                        format!(
                            "include cycle: {}, which includes {} again",
                            chain.join(" includes "),
                            name(&canon)
                        )
                    };
                    return Err(Error::syntax(span, message));
                }
                let text = self.read_source(&p, Some(span))?;
                stack.push(canon);
                let r = self.read_items(&p.display().to_string(), &text, p.parent(), stack);
                stack.pop();
                return r;
            }
        }
        for n in &names {
            if let Some((pn, text)) = PRELUDE.iter().find(|(pn, _)| pn == n) {
                let key = PathBuf::from(format!("<prelude>/{}", pn));
                if stack.contains(&key) {
                    return Err(Error::syntax(span, format!("include cycle: {} includes itself", pn)));
                }
                stack.push(key);
                let r = self.read_items(&format!("prelude/{}", pn), text, None, stack);
                stack.pop();
                return r;
            }
        }
        if let Some(why) = unusable {
            return fail(why);
        }
        if load {
            fail("no such file (searched the current directory, -I directories, and the prelude)".into())
        } else {
            fail("searched the including file's directory, -I directories, and the prelude".into())
        }
    }

    /// Compiles items: allocates globals, checks duplicates and scopes, and
    /// converts every definition and expression. Nothing runs.
    pub fn compile(&mut self, items: Vec<Item>) -> Result<Unit> {
        // (a program nested too deeply for the memory left: an error, see
        // `stack::grow`)
        crate::stack::catch_exhausted(|| self.compile_parts(items))
    }

    /// [`Session::compile`], its library part first.
    fn compile_parts(&mut self, items: Vec<Item>) -> Result<Unit> {
        // The definitions of a library file included from the prelude directory
        // (`(include "optimize")`) are compiled first, as a unit of their own: as
        // with the built-in prelude, the library's uses of its names keep its
        // definitions, and the program's own definition of one of those names
        // replaces it for the program's code only.
        let from_prelude = |it: &Item| {
            let span = match it {
                Item::Define { name_span, .. } | Item::DefineReversible { name_span, .. } => *name_span,
                Item::Broken { name: Some((_, span)), .. } => *span,
                _ => return false,
            };
            self.sources.file(span.file).is_some_and(|f| f.name.starts_with("prelude/"))
        };
        let (library, items): (Vec<Item>, Vec<Item>) = items.into_iter().partition(from_prelude);
        if library.is_empty() {
            return self.compile_part(items);
        }
        let mut unit = self.compile_part(library)?;
        let rest = self.compile_part(items)?;
        unit.steps.extend(rest.steps);
        unit.notes.extend(rest.notes);
        unit.filled.extend(rest.filled);
        Ok(unit)
    }

    /// [`Session::compile`] of a part of the items.
    fn compile_part(&mut self, items: Vec<Item>) -> Result<Unit> {
        let mut filled = Vec::new();
        let r = self.compile_unit(items, &mut filled);
        match r {
            Ok(mut unit) => {
                unit.filled = filled.into_iter().map(|(name, g, (span, _))| (name, g, span)).collect();
                Ok(unit)
            }
            Err(e) => {
                // The pending globals it was to define stay pending.
                for (name, g, (span, state)) in filled {
                    let global = &mut self.m.globals[g as usize];
                    (global.span, global.state) = (span, state);
                    self.pending.insert(name, g);
                }
                Err(e)
            }
        }
    }

    /// Resolves a pending global as a definition of this unit (`filled`: each
    /// one, with what it held, to put back if the unit fails to compile).
    fn fill_pending(
        &mut self,
        name: &Rc<str>,
        span: Span,
        filled: &mut Vec<(Rc<str>, u32, (Span, GState))>,
    ) -> Option<u32> {
        let g = self.pending.remove(name)?;
        let global = &mut self.m.globals[g as usize];
        let old = (
            std::mem::replace(&mut global.span, span),
            std::mem::replace(&mut global.state, GState::Forcing),
        );
        filled.push((name.clone(), g, old));
        Some(g)
    }

    /// Pending again: a global that a definition filled, whose evaluation
    /// failed (the REPL); `span`: the use that made it.
    pub fn unfill(&mut self, name: Rc<str>, g: u32, span: Span) {
        let global = &mut self.m.globals[g as usize];
        (global.state, global.span, global.thunk) = (not_defined_yet(&name, span), span, None);
        self.pending.insert(name, g);
    }

    fn compile_unit(
        &mut self,
        items: Vec<Item>,
        filled: &mut Vec<(Rc<str>, u32, (Span, GState))>,
    ) -> Result<Unit> {
        let mut defined: FxHashMap<Rc<str>, (u32, Span)> = FxHashMap::default();
        let mut full: FxHashMap<Rc<str>, u32> = FxHashMap::default();
        for it in &items {
            if let Item::Define { name, name_span, .. }
            | Item::DefineReversible { name, name_span, .. }
            | Item::Broken { name: Some((name, name_span)), .. } = it
            {
                if let Some((_, prev)) = defined.get(name) {
                    let first = self.sources.location(*prev);
                    // One file included twice: both definitions are at the same place.
                    let message = if first == self.sources.location(*name_span) {
                        let file = self.sources.file(name_span.file).map_or("a file", |f| &*f.name);
                        format!(
                            "`{}` is defined twice: {} is included twice (each include splices the file in again)",
                            name, file
                        )
                    } else {
                        format!("`{}` is defined twice; the first definition is at {}", name, first)
                    };
                    return Err(Error::syntax(*name_span, message));
                }
                let g = match self.fill_pending(name, *name_span, filled) {
                    Some(g) => g,
                    None => self.m.add_global(name.clone(), *name_span, GState::Forcing),
                };
                defined.insert(name.clone(), (g, *name_span));
                full.insert(name.clone(), g);
            }
        }
        // The built-in prelude's own pair accessors (its uses of them included)
        // are compiled to destructuring in place.
        for it in items.iter().filter(|_| self.loading_prelude) {
            if let Item::Define { name, name_span, .. } = it {
                let in_base =
                    self.sources.file(name_span.file).is_some_and(|f| f.name == "prelude/base.vlad");
                if let (true, Some((_, path))) = (in_base, ACCESSORS.iter().find(|(n, _)| **n == **name)) {
                    self.accessors.insert(full[name], path);
                }
            }
        }
        let mut visible: FxHashMap<Rc<str>, u32> = FxHashMap::default();
        let mut steps = Vec::new();
        let mut errors: Vec<Error> = Vec::new();
        let mut notes: Vec<Error> = Vec::new();
        for it in items {
            match it {
                Item::Define { name, value, lambda, curried, span, .. } => {
                    let g = defined[&name].0;
                    visible.insert(name.clone(), g);
                    let forward = std::cell::RefCell::new(Forward {
                        next: self.m.globals.len() as u32,
                        new: Vec::new(),
                        notes: Vec::new(),
                    });
                    let r = (|| -> Result<GState> {
                        let scope = Scope {
                            base: &self.scope,
                            local: &full,
                            accessors: &self.accessors,
                            forward: self.late_binding.then_some((&self.pending, &forward)),
                        };
                        let mut n = Normalizer::new(&scope);
                        if lambda {
                            let list = value.as_list().unwrap();
                            let l = expand::expand_lambda(&value, list, Some(name.clone()))?;
                            let l = expand::name_inner_lambdas(l, curried);
                            let grp = n.lambda(&l)?;
                            Ok(GState::Value(Value::Closure(InstRc::empty(grp), 0)))
                        } else {
                            let core = expand::expand(&value)?;
                            let grp = n.lambda(&thunk(core, Some(name.clone())))?;
                            Ok(GState::Thunk(grp))
                        }
                    })();
                    // (names it uses that no input has defined yet: globals to fill later)
                    let forward = forward.into_inner();
                    for (name, span) in forward.new {
                        let h = self.m.add_global(name.clone(), span, not_defined_yet(&name, span));
                        self.pending.insert(name, h);
                    }
                    // (a constant is evaluated at once: an error, not a note, if it reads one)
                    if lambda {
                        notes.extend(forward.notes);
                    }
                    let r = r.map(|state| {
                        let global = &mut self.m.globals[g as usize];
                        global.thunk = None;
                        if let GState::Thunk(grp) = &state {
                            steps.push(Step::Define(g, span));
                            global.thunk = Some(grp.clone());
                        }
                        global.state = state;
                    });
                    if let Err(e) = r {
                        if self.defer_errors {
                            self.m.globals[g as usize].state = GState::Failed(e);
                        } else {
                            errors.push(e);
                        }
                    }
                }
                Item::DefineReversible { name, def, .. } => {
                    let g = defined[&name].0;
                    visible.insert(name.clone(), g);
                    let scope =
                        Scope { base: &self.scope, local: &full, accessors: &self.accessors, forward: None };
                    match crate::rev::define(*def, &scope) {
                        Ok(v) => self.m.globals[g as usize].state = GState::Value(v),
                        Err(e) if self.defer_errors => self.m.globals[g as usize].state = GState::Failed(e),
                        Err(e) => errors.push(e),
                    }
                }
                Item::Broken { name, error } => match name {
                    Some((name, _)) => {
                        let g = defined[&name].0;
                        visible.insert(name, g);
                        self.m.globals[g as usize].state = GState::Failed(error);
                    }
                    None => {
                        let span = error.span.unwrap_or_default();
                        steps.push(Step::Failed { error, span, expected: None, definition: true })
                    }
                },
                Item::Expr { datum, expected } => {
                    let scope = Scope {
                        base: &self.scope,
                        local: &visible,
                        accessors: &self.accessors,
                        forward: None,
                    };
                    let mut n = Normalizer::new(&scope);
                    let r = expand::expand(&datum).and_then(|core| n.lambda(&thunk(core, None)));
                    match r {
                        Ok(grp) => steps.push(Step::Expr { thunk: grp, span: datum.span, expected }),
                        Err(error) if self.defer_errors => {
                            steps.push(Step::Failed { error, span: datum.span, expected, definition: false })
                        }
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
        if let Some(e) = errors.into_iter().next() {
            return Err(e);
        }
        for (name, (g, _)) in defined {
            self.scope.insert(name, g);
        }
        Ok(Unit { steps, notes, filled: Vec::new() })
    }

    /// Evaluates a constant definition (a `Step::Define`) from a clean stack.
    pub fn run_define(&mut self, g: u32) -> Result<Value> {
        self.fresh_machine();
        let r = self.exhaustible(|m| m.global(g));
        r.map_err(|e| self.name_pattern(e))
    }

    /// Runs a thunk group (a top-level expression).
    pub fn run_thunk(&mut self, g: &Rc<Group>) -> Result<Value> {
        self.fresh_machine();
        self.m.stack.push(Value::Nil);
        let at = g.spans.first().copied();
        let r = self.exhaustible(|m| m.call_closure(InstRc::empty(g.clone()), 0, 1, None));
        // (a list held for reversible procedures' element reads is not kept
        // past the expression)
        self.m.rev_elems = None;
        r.map_err(|e| anchor(self.name_pattern(e), at))
    }

    /// The machine as a top-level run starts it: no values on its stack, no
    /// calls running, no tapes.
    pub fn fresh_machine(&mut self) {
        self.m.stack.clear();
        self.m.reset_depth();
        self.m.tape.clear_levels();
    }

    /// Runs `f` on the machine, a pass that finds no stack left for it while
    /// evaluating (the first call of a procedure nested too deeply resolves
    /// it; an AD transform of one: see `stack::grow`) the expression's error,
    /// not the end of the run; after an error the machine is made fresh at
    /// once (an unwinding left its values held until the next run).
    fn exhaustible(&mut self, f: impl FnOnce(&mut Machine) -> Result<Value>) -> Result<Value> {
        let m = &mut self.m;
        let r = crate::stack::catch_exhausted(|| f(m));
        if r.is_err() {
            self.fresh_machine();
        }
        r
    }

    /// The value of a top-level expression `span`, checked before it is printed or
    /// compared: the pending lazy AD operations on its pairs are applied (as the
    /// printer would apply them), and one that fails (`(unperturb (cons 1 2))`: the
    /// parts are not perturbations) is the expression's error, instead of a value
    /// that prints as `#<error: ...>`.
    pub fn printable(&self, v: Value, span: Span) -> Result<Value> {
        let mut m = Machine::new();
        let mut seen = rustc_hash::FxHashSet::default();
        let mut work = vec![v.clone()];
        while let Some(x) = work.pop() {
            match &x {
                Value::Lazy(z) if seen.insert(Rc::as_ptr(z) as *const u8 as usize) => {
                    let h = crate::ad::ops::hnf(&mut m, &x).map_err(|mut e| {
                        if e.span.is_none() {
                            e.span = Some(span).filter(|s| s.is_known());
                        }
                        e
                    })?;
                    work.push(h);
                }
                // Only a shared pair can be met twice (one count is its parent's, one
                // `x`'s); walking one twice costs time, not correctness.
                Value::Pair(p)
                    if Rc::strong_count(p) <= 2 || seen.insert(Rc::as_ptr(p) as *const u8 as usize) =>
                {
                    work.push(p.cdr.clone());
                    work.push(p.car.clone());
                }
                Value::Bundle(b) => {
                    work.push(b.1.clone());
                    work.push(b.0.clone());
                }
                Value::Tagged(_, y) => work.push((**y).clone()),
                _ => {}
            }
        }
        Ok(v)
    }

    /// A pattern mismatch names the pattern (LANGUAGE.md: "a run-time error naming
    /// the pattern and the value"): the evaluator knows only its location, so its
    /// source text is added here.
    pub fn name_pattern(&self, mut e: Error) -> Error {
        let named = [", for the pattern `", ", for the parameters `"];
        if !e.message.starts_with("pattern mismatch:") || named.iter().any(|n| e.message.contains(n)) {
            return e;
        }
        let Some(sp) = e.span else { return e };
        let Some(file) = self.sources.file(sp.file) else { return e };
        let text = file.text.get(sp.start as usize..sp.end as usize);
        let data = text.and_then(|t| crate::reader::read_all(t, u32::MAX).ok()).unwrap_or_default();
        // (the whole file as read, for the forms around the location: read
        // once, where a message needs them)
        let file_data = std::cell::OnceCell::new();
        let whole = || -> &[Datum] {
            file_data.get_or_init(|| crate::reader::read_all(&file.text, u32::MAX).unwrap_or_default())
        };
        // (a procedure of no parameters, `(lambda () ...)` or `(define (f) ...)`,
        // given an argument: the text before the location is the keyword)
        let before = file.text.get(..sp.start as usize).unwrap_or("");
        let keyword = |k: &str| before.trim_end().strip_suffix(k).is_some_and(|b| b.ends_with('('));
        let header = match &data[..] {
            [d] => d.as_list().is_some_and(|l| {
                l.is_empty() && keyword("lambda")
                    || l.len() == 1 && l[0].as_symbol().is_some() && keyword("define")
            }),
            _ => false,
        };
        if e.message.starts_with("pattern mismatch: expected (),") && header {
            e.message.push_str(", for the parameters `()` (the procedure takes no arguments)");
            return e;
        }
        // The location is a pattern's, or a call's that destructures inline (`(car 5)`).
        let is_pattern = !data.is_empty() && data.iter().all(|d| expand::pattern(d).is_ok());
        // (a named `let`'s loop called with too few arguments is located at
        // its variables, from the first that did not match to the last, which
        // is no datum: `i 0) (j`)
        let too_few = e.message.starts_with("pattern mismatch: expected a pair,")
            && (data.len() > 1 || text.is_some() && data.is_empty());
        let params = too_few
            .then(|| param_list(whole(), sp.start))
            .flatten()
            .filter(|p| (is_pattern || p.loop_name.is_some()) && p.names.len() > p.matched + 1);
        if let Some(p) = params {
            // All the parameters, and how many arguments came: those the ones
            // before matched, and the value that is no pair, unless the call
            // passed none.
            let given = match p.matched {
                0 if e.message.starts_with("pattern mismatch: expected a pair, got () ") => {
                    "none".to_string()
                }
                n => (n + 1).to_string(),
            };
            let names = p.names.join(" ");
            let what = match p.loop_name {
                Some(name) => format!("the variables `{names}` of the named `let` `{name}`"),
                None => format!("the parameters `{names}`"),
            };
            e.message = format!("{}, for {} (too few arguments: {} given)", e.message, what, given);
        } else if text.is_some_and(|t| is_pattern && t.chars().count() <= 80) {
            // Several patterns are a procedure's parameters (from the one that did
            // not match on): the argument tuple ended before them. (Shown as the
            // data read, without any comments among them.)
            let text = data.iter().map(crate::check::datum_text).collect::<Vec<_>>().join(" ");
            e.message = if data.len() > 1 && e.message.starts_with("pattern mismatch: expected a pair,") {
                // (or the last parts of a `cons*` pattern, `b c` of `(cons* a b c)`)
                match enclosing_pattern(whole(), sp.start) {
                    Some(pat) => {
                        format!(
                            "{}, for `{}` of the pattern `{}` (the value ended before them)",
                            e.message, text, pat
                        )
                    }
                    None => format!("{}, for the parameters `{}` (too few arguments)", e.message, text),
                }
            } else {
                // (a defined procedure's parameter is named with the procedure: the
                // call may be a primitive's, `(map car l)`, not in the trace)
                let of = defined_around(whole(), sp.start).map(|f| format!(" of `{f}`"));
                format!(
                    "{}, for the pattern `{}`{}{}",
                    e.message,
                    text,
                    of.unwrap_or_default(),
                    list_length_note(&e.message, &data)
                )
            };
        } else if let Some(name) = text.and_then(accessor_call) {
            // A call of a prelude accessor compiled to destructuring in place: name
            // the accessor and its pattern, as a call of it would.
            e.message = format!("{}, for the pattern `(cons a d)` of `{}`", e.message, name);
        }
        e
    }

    /// Runs program text as one unit (definitions and expressions, as a file would)
    /// and returns the values of its expressions, in order.
    pub fn run_text(&mut self, name: &str, text: &str) -> Result<Vec<Value>> {
        let dir = std::env::current_dir().ok();
        let items = self.read_items(name, text, dir.as_deref(), &mut Vec::new())?;
        let unit = self.compile(items)?;
        let mut values = Vec::new();
        for step in unit.steps {
            match step {
                Step::Define(g, _) => {
                    self.run_define(g)?;
                }
                Step::Failed { error, .. } => return Err(error),
                Step::Expr { thunk, .. } => {
                    // Callers get plain data: pending lazy AD operations are applied.
                    let v = self.run_thunk(&thunk)?;
                    values.push(crate::ad::ops::force(&mut self.m, &v)?);
                }
            }
        }
        Ok(values)
    }

    /// Compiles a single expression in the session scope (for the REPL commands).
    pub fn compile_expr(&mut self, text: &str, name: &str) -> Result<Rc<Group>> {
        let items = self.read_items(name, text, None, &mut Vec::new())?;
        let mut items = items.into_iter();
        let datum = match (items.next(), items.next()) {
            (Some(Item::Expr { datum, .. }), None) => datum,
            (Some(Item::Expr { .. }), Some(second)) => {
                return Err(Error::new(
                    ErrorKind::Syntax,
                    item_span(&second),
                    "expected one expression; this is another one",
                ))
            }
            (Some(it), _) => {
                return Err(Error::new(
                    ErrorKind::Syntax,
                    item_span(&it),
                    "expected an expression, not a definition",
                ))
            }
            (None, _) => return Err(Error::new(ErrorKind::Syntax, None, "expected an expression")),
        };
        let empty = FxHashMap::default();
        let scope = Scope { base: &self.scope, local: &empty, accessors: &self.accessors, forward: None };
        let mut n = Normalizer::new(&scope);
        let core = expand::expand(&datum)?;
        n.lambda(&thunk(core, None))
    }
}

/// Where an item starts, for messages.
fn item_span(it: &Item) -> Option<Span> {
    match it {
        Item::Define { span, .. } => Some(*span),
        Item::DefineReversible { name_span, .. } => Some(*name_span),
        Item::Expr { datum, .. } => Some(datum.span),
        Item::Broken { error, .. } => error.span,
    }
}

/// What a path that is not a regular file is, for messages.
pub(crate) fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_char_device() {
            return "a character device, not a regular file";
        }
        if t.is_block_device() {
            return "a block device, not a regular file";
        }
        if t.is_fifo() {
            return "a named pipe, not a regular file";
        }
        if t.is_socket() {
            return "a socket, not a regular file";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// `(lambda () e)` for a top-level expression.
fn thunk(body: Core, name: Option<Rc<str>>) -> CoreLambda {
    let span = body.span();
    // The parameter (always `'()`) is ignored, so the thunk's code is just the expression's.
    CoreLambda { param: Pat::Var(" unit".into(), span), body, span, name }
}

fn parse_define(d: &Datum, list: &[Datum]) -> Result<Item> {
    if list.len() != 3 {
        return Err(Error::syntax(
            d.span,
            "`define` takes a name (or a call pattern) and exactly one body expression",
        ));
    }
    let sp = d.span;
    match &list[1].kind {
        DatumKind::Symbol(name) => {
            let is_lambda =
                list[2].as_list().and_then(|l| l.first()).and_then(|h| h.as_symbol()) == Some("lambda");
            check_name(&list[1], name)?;
            Ok(Item::Define {
                name: name.clone(),
                name_span: list[1].span,
                value: list[2].clone(),
                lambda: is_lambda,
                curried: 0,
                span: sp,
            })
        }
        DatumKind::List(head, None) if !head.is_empty() => {
            // (define (f p ...) body) and curried (define ((f a) b) body).
            // `target` is borrowed, not cloned: cloning the head at each level would copy
            // the whole nested head again per level (quadratic in the nesting depth).
            let mut target = &list[1];
            let mut body = list[2].clone();
            let mut curried = 0;
            loop {
                let items = target.as_list().unwrap();
                let params = Datum::new(DatumKind::List(items[1..].to_vec(), None), target.span);
                let lam_sym = Datum::new(DatumKind::Symbol("lambda".into()), target.span);
                body = Datum::new(DatumKind::List(vec![lam_sym, params, body], None), sp);
                match &items[0].kind {
                    DatumKind::Symbol(name) => {
                        check_name(&items[0], name)?;
                        return Ok(Item::Define {
                            name: name.clone(),
                            name_span: items[0].span,
                            value: body,
                            lambda: true,
                            curried,
                            span: sp,
                        });
                    }
                    DatumKind::List(h, None) if !h.is_empty() => {
                        target = &items[0];
                        curried += 1;
                    }
                    _ => return Err(Error::syntax(items[0].span, "bad `define`: expected a name")),
                }
            }
        }
        _ => Err(Error::syntax(list[1].span, "bad `define`: expected a name or `(name parameter ...)`")),
    }
}

/// The name a `define` or `define-reversible` form would define, if it has one.
fn defined_name(list: &[Datum]) -> Option<(Rc<str>, Span)> {
    let mut target = list.get(1)?;
    loop {
        match &target.kind {
            DatumKind::Symbol(name) if !expand::KEYWORDS.contains(&&**name) && &**name != "===>" => {
                return Some((name.clone(), target.span))
            }
            DatumKind::List(items, None) if !items.is_empty() => target = &items[0],
            _ => return None,
        }
    }
}

fn check_name(d: &Datum, name: &str) -> Result<()> {
    if expand::KEYWORDS.contains(&name) || name == "===>" {
        return Err(Error::syntax(d.span, format!("`{}` is syntax and cannot be defined", name)));
    }
    Ok(())
}

/// An error of top-level expression `at` that names no place inside it (it was
/// raised in the prelude or an included file, and the calls from the expression
/// were tail calls, so no frame recorded them) ends its trace with the expression
/// ([`Error::push_top_level`]).
fn anchor(mut e: Error, at: Option<Span>) -> Error {
    let Some(at) = at.filter(|s| s.is_known()) else { return e };
    if e.span.is_none() && e.trace.is_empty() {
        // (no place at all, as a limit of 0 met before the first call: the
        // expression is the place)
        e.span = Some(at);
        return e;
    }
    let inside = |s: &Span| s.file == at.file && at.start <= s.start && s.end <= at.end;
    if !e.span.iter().chain(e.trace.iter().map(|(_, s)| s)).any(inside) {
        e.push_top_level(at);
    }
    e
}
