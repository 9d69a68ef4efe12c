//! The REPL. On a terminal: an interactive session built on `rustyline`
//! (multi-line input decided by the reader, history, completion, matching
//! brackets, `:` commands, Ctrl-C to interrupt an evaluation). Otherwise a plain
//! read-eval-print loop over standard input, without prompts or colours.
//!
//! Every input (a complete text: one or more lines whose brackets, strings and
//! comments are closed) is one unit, as a file would be: its definitions see each
//! other, and later inputs see all earlier definitions. A definition of a name
//! that already exists makes a new binding for later inputs (earlier definitions
//! keep using the old one).

mod helper;

use crate::cli::Opts;
use crate::error::{Error, ErrorKind, Result};
use crate::eval::GState;
use crate::toplevel::{Item, Session, Step, MAX_SOURCE, MAX_SOURCE_TEXT};
use crate::value::Value;
use rustc_hash::FxHashMap;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A REPL command: name, argument, one-line description.
pub struct Command {
    pub name: &'static str,
    pub args: &'static str,
    pub help: &'static str,
}

pub const COMMANDS: &[Command] = &[
    Command { name: ":help", args: "", help: "show this help" },
    Command { name: ":load", args: "FILE", help: "load a file, as (include \"FILE\") would" },
    Command {
        name: ":anf",
        args: "EXPR",
        help: "show the A-normal form of EXPR (of the definition, when EXPR is a name)",
    },
    Command {
        name: ":reverse",
        args: "EXPR",
        help: "show the reverse (*j) transform of the procedure EXPR evaluates to",
    },
    Command {
        name: ":forward",
        args: "EXPR",
        help: "show the forward (bundle) transform of the procedure EXPR evaluates to",
    },
    Command { name: ":time", args: "EXPR", help: "evaluate EXPR and show the wall time it took" },
    Command {
        name: ":meter",
        args: "EXPR",
        help: "evaluate EXPR and count primitive operations (primal vs derivative work)",
    },
    Command { name: ":env", args: "", help: "list your definitions" },
    Command { name: ":quit", args: "", help: "leave the REPL (also Ctrl-D)" },
];

const PROMPT: &str = "vlad> ";
const CONTINUE_PROMPT: &str = "  ... ";

/// Where the history is kept: `$VLAD_HISTORY` (empty: no history), else
/// `vlad/history` in the user's data directory.
pub fn history_path() -> Option<PathBuf> {
    match std::env::var_os("VLAD_HISTORY") {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(PathBuf::from(p)),
        None => dirs::data_dir().map(|d| d.join("vlad").join("history")),
    }
}

/// Runs the REPL: interactive when standard input is a terminal. Returns the exit code.
pub fn run(opts: &Opts) -> i32 {
    if let Err(code) = crate::cli::check_backend(opts) {
        return code;
    }
    let interactive = std::io::stdin().is_terminal();
    let color = interactive && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut s = Session::new();
    s.late_binding = true;
    s.include_dirs = opts.include.clone();
    s.m.set_max_depth(opts.max_depth);
    s.m.tape.enabled = !opts.no_tape;
    s.m.jit_after = opts.jit_after();
    if opts.metered {
        s.m.meter = Some(vec![0; crate::prims::prims().len()].into());
    }
    let prelude = s.scope.clone();
    let repl = Repl {
        s,
        opts: opts.clone(),
        color,
        color_err: color && std::io::stderr().is_terminal(),
        interactive,
        inputs: 0,
        failed: false,
        evaluating: Arc::new(AtomicBool::new(false)),
        prelude,
        command_text: String::new(),
        steps_total: 0,
        after_expr: None,
    };
    if interactive {
        repl.interactive()
    } else {
        repl.batch()
    }
}

enum Flow {
    Continue,
    Quit,
}

struct Repl {
    s: Session,
    opts: Opts,
    /// Colours on standard output (the prompt, the editor).
    color: bool,
    /// Colours on standard error (error messages).
    color_err: bool,
    /// Reading from a terminal.
    interactive: bool,
    /// Inputs read so far (names them `<input-N>`).
    inputs: usize,
    /// Whether any input failed (the exit code of the non-interactive loop).
    failed: bool,
    /// Set while evaluating: a Ctrl-C then interrupts the evaluation.
    evaluating: Arc<AtomicBool>,
    /// The prelude's bindings (to tell user definitions apart).
    prelude: FxHashMap<Rc<str>, u32>,
    /// The input of the command being run (shown under errors in its argument).
    command_text: String,
    /// Procedure calls of the evaluations so far (each counts from 0, for its
    /// `--max-steps`): `--metered`'s total at the end.
    steps_total: u64,
    /// Whether the last input ended with an expression (and whether that had
    /// its expected value already): an input that starts with `===> EXPECTED`
    /// is then that expression's annotation, as in a file (ignored, as `vlad
    /// run` ignores it), or a second one, an error as in a file.
    after_expr: Option<bool>,
}

/// The command at the start of an input, and the byte offset where its argument starts.
fn split_command(text: &str) -> Option<(&str, usize)> {
    let lead = text.len() - text.trim_start().len();
    let t = &text[lead..];
    if !t.starts_with(':') {
        return None;
    }
    let end = t.find(char::is_whitespace).unwrap_or(t.len());
    Some((&t[..end], lead + end))
}

fn command_takes_expr(name: &str) -> bool {
    matches!(name, ":anf" | ":reverse" | ":forward" | ":time" | ":meter")
}

/// Whether the input so far ends inside a list, string or comment (so another
/// line is needed). Decided by the reader itself.
/// Adds a line to the input read so far: the whole input once it is complete
/// (taken out of `pending`), `None` while it needs more lines. Blank input is
/// dropped.
fn complete_input(pending: &mut String, line: &str) -> Option<String> {
    pending.push_str(line);
    if pending.trim().is_empty() {
        pending.clear();
        return None;
    }
    if needs_more(pending) {
        return None;
    }
    Some(std::mem::take(pending))
}

pub fn needs_more(text: &str) -> bool {
    let code = match split_command(text) {
        Some((name, arg)) if command_takes_expr(name) => &text[arg..],
        Some(_) => return false,
        None => text,
    };
    match crate::reader::read_all(code, u32::MAX) {
        Err(e) => e.kind == crate::reader::ReadErrorKind::Incomplete,
        // (an annotation's expected value is on the next line)
        Ok(data) => data.last().is_some_and(is_arrow),
    }
}

fn is_arrow(d: &crate::datum::Datum) -> bool {
    d.as_symbol() == Some("===>")
}

/// `text` with a leading annotation, `===> EXPECTED`, blanked out (line breaks
/// kept, so that what follows keeps its place), and where its arrow is; `None`
/// if it has none.
fn strip_annotation(text: &str) -> Option<(String, std::ops::Range<usize>)> {
    let data = crate::reader::read_all(text, u32::MAX).ok()?;
    let [arrow, expected, ..] = data.as_slice() else { return None };
    if !is_arrow(arrow) {
        return None;
    }
    let end = expected.span.end as usize;
    let blank: String = text[..end]
        .chars()
        .map(|c| if c == '\n' { "\n".to_string() } else { " ".repeat(c.len_utf8()) })
        .collect();
    Some((blank + &text[end..], arrow.span.start as usize..arrow.span.end as usize))
}

fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1e-3 {
        format!("{:.1} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{:.3} s", secs)
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

impl Repl {
    // ----- the two loops -----

    /// Reads standard input line by line; each complete input is evaluated at once.
    fn batch(mut self) -> i32 {
        let mut pending = String::new();
        let mut start_line = 1;
        let mut line_no = 0;
        // The input being read has a line that is not UTF-8 (reported): it is
        // read to its end, as well as the reader can tell, and dropped.
        let mut poisoned = false;
        loop {
            let mut bytes = Vec::new();
            let read = (&mut self.s.m.input).take(MAX_SOURCE + 1).read_until(b'\n', &mut bytes);
            let n = match read {
                // (the line, or the input it ends, past the bound)
                Ok(n) if (pending.len() + n) as u64 > MAX_SOURCE => {
                    self.report(&Error::new(
                        ErrorKind::Syntax,
                        None,
                        format!("reading standard input: an input larger than {MAX_SOURCE_TEXT}"),
                    ));
                    break;
                }
                Ok(n) => n,
                Err(e) => {
                    self.report(&Error::new(
                        ErrorKind::Syntax,
                        None,
                        format!("reading standard input: {}", e),
                    ));
                    break;
                }
            };
            if n == 0 {
                if !pending.trim().is_empty() && !poisoned {
                    let text = std::mem::take(&mut pending);
                    self.input(&text, "<stdin>", start_line);
                }
                break;
            }
            line_no += 1;
            if pending.is_empty() {
                start_line = line_no;
            }
            if line_no == 1 && bytes.starts_with("\u{FEFF}".as_bytes()) {
                // (a byte-order mark, as a file may start with: not input)
                bytes.drain(..3);
            }
            let line = match String::from_utf8(bytes) {
                Ok(line) => line,
                Err(e) => {
                    self.bad_utf8(e.as_bytes(), e.utf8_error().valid_up_to(), line_no);
                    poisoned = true;
                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                }
            };
            let Some(text) = complete_input(&mut pending, &line) else { continue };
            if std::mem::take(&mut poisoned) {
                continue;
            }
            if let Flow::Quit = self.input(&text, "<stdin>", start_line) {
                break;
            }
        }
        let _ = self.s.m.out.flush();
        self.print_meter();
        if self.failed {
            1
        } else {
            0
        }
    }

    /// Bytes `start..end` of input `text` (named `name`, starting at line
    /// `first_line`), recorded as a source so that an error there shows it.
    fn span_in(
        &mut self,
        name: &str,
        text: &str,
        first_line: usize,
        start: usize,
        end: usize,
    ) -> crate::source::Span {
        let id = self.s.sources.add(name, text);
        self.s.sources.set_first_line(id, first_line);
        crate::source::Span::new(id, start, end)
    }

    /// Reports input line `line_no` of standard input, whose bytes are not UTF-8
    /// from offset `good` on, as files report it.
    fn bad_utf8(&mut self, bytes: &[u8], good: usize, line_no: usize) {
        let span = self.span_in("<stdin>", &String::from_utf8_lossy(bytes), line_no, good, good);
        let message = format!(
            "invalid UTF-8 (byte 0x{:02X}): input must be UTF-8 text; this input is skipped",
            bytes[good]
        );
        self.report(&Error::syntax(span, message));
    }

    fn interactive(mut self) -> i32 {
        use rustyline::error::ReadlineError;
        use rustyline::history::{FileHistory, History};
        use rustyline::{ColorMode, CompletionType, Config, Editor};

        self.install_interrupt_handler();
        let config =
            Config::builder().max_history_size(10_000).and_then(|b| b.history_ignore_dups(true)).map(|b| {
                b.history_ignore_space(true)
                    .auto_add_history(false)
                    .completion_type(CompletionType::List)
                    .color_mode(if self.color { ColorMode::Enabled } else { ColorMode::Disabled })
                    .build()
            });
        let mut rl = match config.and_then(Editor::<helper::VladHelper, FileHistory>::with_config) {
            Ok(rl) => rl,
            Err(e) => {
                eprintln!("vlad: cannot start the line editor ({}); reading standard input plainly", e);
                return self.batch();
            }
        };
        let mut h = helper::VladHelper::new(self.color);
        h.names = self.names();
        rl.set_helper(Some(h));
        let hist = history_path();
        if let Some(p) = &hist {
            if p.exists() {
                if let Err(e) = rl.load_history(p) {
                    eprintln!("vlad: cannot read the history file {}: {}", p.display(), e);
                }
            } else if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
        // (a failed write shows up, and is reported, at the first value)
        let _ = writeln!(
            std::io::stdout(),
            "vlad {} — VLAD with first-class automatic differentiation. :help for help, Ctrl-D to leave.",
            env!("CARGO_PKG_VERSION")
        );
        let mut pending = String::new();
        let mut history_warned = false;
        loop {
            if let Some(h) = rl.helper_mut() {
                h.pending = if pending.is_empty() { String::new() } else { format!("{}\n", pending) };
            }
            let prompt = if pending.is_empty() { PROMPT } else { CONTINUE_PROMPT };
            match rl.readline(prompt) {
                Ok(line) => {
                    if !pending.is_empty() {
                        pending.push('\n');
                    }
                    let Some(text) = complete_input(&mut pending, &line) else { continue };
                    let _ = rl.history_mut().add(&text);
                    if let Some(p) = &hist {
                        if let Err(e) = rl.append_history(p) {
                            if !history_warned {
                                eprintln!("vlad: cannot write the history file {}: {}", p.display(), e);
                                history_warned = true;
                            }
                        }
                    }
                    self.inputs += 1;
                    let name = format!("<input-{}>", self.inputs);
                    let flow = self.input(&text, &name, 1);
                    if let Some(h) = rl.helper_mut() {
                        h.names = self.names();
                    }
                    if let Flow::Quit = flow {
                        break;
                    }
                }
                // Ctrl-C: drop the input being typed.
                Err(ReadlineError::Interrupted) => pending.clear(),
                // Ctrl-D on an empty line: leaves, except in a continued input,
                // which it ends (the reader reports what is unfinished).
                Err(ReadlineError::Eof) if !pending.trim().is_empty() => {
                    let text = std::mem::take(&mut pending);
                    self.inputs += 1;
                    let name = format!("<input-{}>", self.inputs);
                    if let Flow::Quit = self.input(&text, &name, 1) {
                        break;
                    }
                }
                Err(ReadlineError::Eof) => break,
                // Bytes that are not UTF-8 (the editor has dropped the line).
                Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                    pending.clear();
                    self.report(&Error::new(
                        ErrorKind::Syntax,
                        None,
                        "invalid UTF-8 typed: input must be UTF-8 text; the input being typed is dropped",
                    ));
                }
                Err(e) => {
                    eprintln!("vlad: {}", e);
                    break;
                }
            }
        }
        if let Some(p) = &hist {
            let _ = rl.append_history(p);
        }
        self.print_meter();
        0
    }

    /// `--metered`'s counts for the whole session.
    fn print_meter(&mut self) {
        self.s.m.set_steps(self.steps_total);
        crate::cli::print_meter(&self.s);
    }

    /// Ctrl-C while evaluating sets the machine's interrupt flag (reading, the
    /// editor has the terminal in raw mode and sees Ctrl-C as a key). Three
    /// presses without the evaluator noticing (a long primitive) end the program.
    fn install_interrupt_handler(&self) {
        let evaluating = self.evaluating.clone();
        let interrupt = self.s.m.interrupt.clone();
        let unanswered = AtomicUsize::new(0);
        let r = ctrlc::set_handler(move || {
            if !evaluating.load(Ordering::SeqCst) {
                return;
            }
            if interrupt.swap(true, Ordering::SeqCst) {
                if unanswered.fetch_add(1, Ordering::SeqCst) >= 1 {
                    eprintln!("\nvlad: not responding to interrupts; exiting");
                    std::process::exit(130);
                }
            } else {
                unanswered.store(0, Ordering::SeqCst);
            }
        });
        if let Err(e) = r {
            eprintln!("vlad: cannot handle Ctrl-C ({}); an evaluation cannot be interrupted", e);
        }
    }

    /// Names for completion: keywords, primitives, the prelude and user definitions.
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = crate::expand::KEYWORDS.iter().map(|s| s.to_string()).collect();
        // (a form before a string, a variable otherwise: not among the keywords)
        v.push("error".to_string());
        v.extend(crate::prims::prims().iter().map(|p| p.name.to_string()));
        v.extend(self.s.scope.keys().map(|k| k.to_string()));
        v.sort();
        v.dedup();
        v
    }

    // ----- evaluation -----

    /// Handles one complete input: a command, or definitions and expressions.
    fn input(&mut self, text: &str, name: &str, first_line: usize) -> Flow {
        // `--timeout` bounds the whole input: reading and compiling it (which do not
        // look at the clock: the watchdog stops them) and each evaluation
        // ([`Repl::guarded`] starts the clock again).
        let loc = format!("{}:{}:1", name, first_line);
        crate::watchdog::set_phase(crate::watchdog::Phase::Compiling);
        crate::watchdog::arm(
            crate::cli::deadline(self.opts.timeout),
            Box::new(move || {
                eprintln!("{}: error: {}", loc, crate::watchdog::message());
                3
            }),
        );
        let after_expr = self.after_expr;
        let flow = match split_command(text) {
            Some((cmd, arg)) => {
                self.after_expr = None;
                self.command(cmd, text, arg, name, first_line)
            }
            None => {
                match (strip_annotation(text), after_expr) {
                    (Some((rest, _)), Some(false)) => {
                        self.after_expr = Some(true);
                        self.eval_text(&rest, name, first_line)
                    }
                    // (the expression before had its expected value)
                    (Some((_, arrow)), Some(true)) => {
                        self.after_expr = None;
                        let span = self.span_in(name, text, first_line, arrow.start, arrow.end);
                        self.report(&Error::syntax(
                            span,
                            "a second `===>`: an expression has one expected value",
                        ))
                    }
                    // (`after_expr` kept through an input of comments alone)
                    _ => self.eval_text(text, name, first_line),
                }
                Flow::Continue
            }
        };
        crate::watchdog::disarm();
        crate::watchdog::set_phase(crate::watchdog::Phase::Running);
        flow
    }

    /// Reads text into items (a fresh source named `name`, numbered from `first_line`).
    fn read(&mut self, text: &str, name: &str, first_line: usize) -> Result<Vec<Item>> {
        let dir = std::env::current_dir().ok();
        let id = self.s.sources.len() as u32;
        let r = self.s.read_items(name, text, dir.as_deref(), &mut Vec::new());
        self.s.sources.set_first_line(id, first_line);
        r
    }

    fn eval_text(&mut self, text: &str, name: &str, first_line: usize) {
        match self.read(text, name, first_line) {
            Ok(items) => self.eval_items(items),
            Err(e) => {
                self.after_expr = None;
                self.report(&e)
            }
        }
    }

    /// `:load FILE`, the argument at `arg..` in `text`.
    fn load(&mut self, text: &str, arg: usize, name: &str, first_line: usize) -> Result<()> {
        let rest = &text[arg..];
        let start = arg + (rest.len() - rest.trim_start().len());
        let typed = rest.trim();
        let file = typed.strip_prefix('"').and_then(|f| f.strip_suffix('"')).unwrap_or(typed);
        let span = self.span_in(name, text, first_line, start, start + typed.len());
        let dir = std::env::current_dir().ok();
        let items = self.s.load(file, span, dir.as_deref())?;
        self.eval_items(items);
        Ok(())
    }

    /// Compiles and runs the items of one input.
    fn eval_items(&mut self, items: Vec<Item>) {
        // What the names meant before this input: a constant definition whose
        // evaluation fails gives its name back its earlier meaning (an error leaves
        // every earlier definition intact), instead of one that repeats the error.
        let before = self.s.scope.clone();
        let kept = self.after_expr.take();
        let unit = match self.s.compile(items) {
            Ok(u) => u,
            Err(e) => return self.report(&e),
        };
        for note in &unit.notes {
            self.note(note);
        }
        // (an input of comments alone changes nothing: as in a file, an
        // annotation may follow them)
        self.after_expr = match unit.steps.last() {
            Some(Step::Expr { expected, .. }) => Some(expected.is_some()),
            Some(_) => None,
            None => kept,
        };
        for step in unit.steps {
            let r = match step {
                Step::Define(g, _) => {
                    let r = self.guarded(|s| s.m.global(g).map_err(|e| s.name_pattern(e)).map(|_| ()));
                    if r.is_err() {
                        let name = self.s.m.globals[g as usize].name.clone();
                        match before.get(&name) {
                            Some(&old) => self.s.scope.insert(name.clone(), old),
                            None => self.s.scope.remove(&name),
                        };
                        // (a name earlier definitions use is undefined again)
                        if let Some(&(_, _, span)) = unit.filled.iter().find(|(_, h, _)| *h == g) {
                            self.s.unfill(name, g, span);
                        }
                    }
                    r
                }
                Step::Expr { thunk, span, .. } => self
                    .guarded(|s| s.run_thunk(&thunk).and_then(|v| s.printable(v, span)))
                    .map(|v| self.print_value(&v)),
                Step::Failed { error, .. } => Err(error),
            };
            if let Err(e) = r {
                return self.report(&e);
            }
        }
    }

    /// Runs `f` as an evaluation: fresh limits, Ctrl-C interrupts it, a panic
    /// (a bug) becomes an error instead of ending the session.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut Session) -> Result<T>) -> Result<T> {
        let m = &mut self.s.m;
        m.set_steps(0);
        m.set_max_steps(self.opts.max_steps.unwrap_or(u64::MAX));
        m.deadline = crate::cli::deadline(self.opts.timeout);
        m.stack.clear();
        m.reset_depth();
        m.interrupt.store(false, Ordering::SeqCst);
        // A primitive operation that runs on past the deadline (it cannot be
        // interrupted) ends the session: better than not answering at all.
        crate::watchdog::set_phase(crate::watchdog::Phase::Running);
        crate::watchdog::arm(
            m.deadline,
            Box::new(|| {
                eprintln!("error: {}", crate::watchdog::message());
                3
            }),
        );
        self.evaluating.store(true, Ordering::SeqCst);
        let s = &mut self.s;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(s)));
        self.evaluating.store(false, Ordering::SeqCst);
        self.steps_total += self.s.m.steps();
        crate::watchdog::disarm();
        self.s.m.interrupt.store(false, Ordering::SeqCst);
        let _ = self.s.m.out.flush();
        match r {
            Ok(r) => r,
            Err(p) => {
                self.s.fresh_machine();
                if p.is::<crate::stack::Exhausted>() {
                    // (see `stack::grow`)
                    return Err(Error::runtime(None, crate::stack::EXHAUSTED));
                }
                Err(Error::runtime(None, format!("internal error (a bug in vlad): {}", panic_message(&*p))))
            }
        }
    }

    /// Prints a value as an evaluation would run: Ctrl-C and `--timeout` stop the
    /// printing of a huge one.
    fn print_value(&mut self, v: &Value) {
        if let Err(e) = self.guarded(|s| s.m.write_value(v)) {
            self.report(&e);
        }
        let _ = self.s.m.out.flush();
    }

    /// Prints a line of output.
    fn say(&mut self, text: &str) {
        let r = writeln!(self.s.m.out, "{}", text).and_then(|()| self.s.m.out.flush());
        if let Err(e) = r {
            self.report(&crate::eval::output_error(&e));
        }
    }

    /// A note on an input (not an error: the input still runs), on standard error.
    fn note(&mut self, e: &Error) {
        let _ = self.s.m.out.flush();
        let text = e.render(&self.s.sources).replacen(": error: ", ": note: ", 1);
        self.to_stderr(&text, "33");
    }

    fn report(&mut self, e: &Error) {
        self.failed = true;
        let _ = self.s.m.out.flush();
        let mut text = e.render(&self.s.sources);
        if self.interactive && e.kind == ErrorKind::Limit && e.message == "interrupted" {
            // After the terminal's `^C`.
            text.insert(0, '\n');
        }
        self.to_stderr(&text, "31");
    }

    /// A rendered error or note on standard error, its first line in bold
    /// `color` (an ANSI colour code) where standard error takes colours.
    fn to_stderr(&self, text: &str, color: &str) {
        if self.color_err {
            let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
            eprint!("\x1b[1;{color}m{first}\x1b[0m\n{rest}");
        } else {
            eprint!("{text}");
        }
    }

    // ----- commands -----

    fn command(&mut self, cmd: &str, text: &str, arg: usize, name: &str, first_line: usize) -> Flow {
        let arg_text = text[arg..].trim();
        // (where the argument starts in the input)
        let arg_start = text.len() - text[arg..].trim_start().len();
        // The argument with everything before it blanked out (byte for byte), so
        // that error locations point into the input as typed (which is shown under
        // them: `compile_one`).
        let padded: String = text[..arg]
            .bytes()
            .map(|b| if b == b'\n' { '\n' } else { ' ' })
            .chain(text[arg..].chars())
            .collect();
        self.command_text = text.to_string();
        // An error about the command itself, at `start..end` of the input.
        let at = |me: &mut Repl, start: usize, end: usize, message: String| {
            let span = me.span_in(name, text, first_line, start, end);
            me.report(&Error::syntax(span, message));
            Flow::Continue
        };
        let cmd_start = arg - cmd.len();
        let known = COMMANDS.iter().any(|c| c.name == cmd) || matches!(cmd, ":q" | ":h" | ":exit" | ":?");
        if !known {
            let hint = crate::suggest::nearest_hint(cmd, COMMANDS.iter().map(|c| c.name));
            let hint = if hint.is_empty() { " (:help lists them)".to_string() } else { hint };
            return at(self, cmd_start, arg, format!("unknown command `{}`{}", cmd, hint));
        }
        if command_takes_expr(cmd) && arg_text.is_empty() {
            return at(self, cmd_start, arg, format!("usage: {} EXPR", cmd));
        }
        if cmd == ":load" && arg_text.is_empty() {
            return at(self, cmd_start, arg, "usage: :load FILE".to_string());
        }
        if !command_takes_expr(cmd) && cmd != ":load" && !arg_text.is_empty() {
            return at(self, arg_start, arg_start + arg_text.len(), format!("`{}` takes no argument", cmd));
        }
        let r = match cmd {
            ":quit" | ":q" | ":exit" => return Flow::Quit,
            ":help" | ":h" | ":?" => {
                self.help();
                Ok(())
            }
            ":env" => {
                self.env();
                Ok(())
            }
            ":load" => self.load(text, arg, name, first_line),
            ":anf" => self.anf(&padded, arg_text, name, first_line),
            ":reverse" => self.transform(&padded, name, first_line, crate::anf::Kind::R),
            ":forward" => self.transform(&padded, name, first_line, crate::anf::Kind::F),
            ":time" => self.time(&padded, name, first_line),
            ":meter" => self.meter(&padded, name, first_line),
            _ => Ok(()),
        };
        if let Err(mut e) = r {
            // (an error about the argument's value as a whole: placed at the argument)
            if e.span.is_none() && e.trace.is_empty() && command_takes_expr(cmd) {
                e.span = Some(self.span_in(name, text, first_line, arg_start, arg_start + arg_text.len()));
            }
            self.report(&e);
        }
        Flow::Continue
    }

    fn help(&mut self) {
        let mut out = String::from(
            "Type a definition or an expression; an expression prints its value. An input continues\n\
             on more lines until its brackets are closed. Definitions accumulate; defining a name\n\
             again replaces it for later inputs.\n\nCommands:\n",
        );
        for c in COMMANDS {
            let head = if c.args.is_empty() { c.name.to_string() } else { format!("{} {}", c.name, c.args) };
            out.push_str(&format!("  {:<16} {}\n", head, c.help));
        }
        out.push_str(
            "\nKeys: Tab completes names and commands, Up/Down and Ctrl-R search the history,\n\
             Ctrl-C cancels the input (or interrupts an evaluation), Ctrl-D leaves.",
        );
        self.say(&out);
    }

    /// Lists the user's definitions, oldest first.
    fn env(&mut self) {
        let mut defs: Vec<(u32, Rc<str>)> = self
            .s
            .scope
            .iter()
            .filter(|(n, g)| self.prelude.get(*n) != Some(*g))
            .map(|(n, g)| (*g, n.clone()))
            .collect();
        defs.sort();
        if defs.is_empty() {
            self.say("no definitions yet");
            return;
        }
        let width = defs.iter().map(|(_, n)| n.chars().count()).max().unwrap_or(0).min(24);
        let mut out = Vec::new();
        for (g, name) in defs {
            let what = match &self.s.m.globals[g as usize].state {
                GState::Value(v @ (Value::Closure(..) | Value::Prim(_))) => {
                    let _ = v;
                    "procedure".to_string()
                }
                GState::Value(v) => {
                    let mut t = crate::print::to_string(v);
                    if t.chars().count() > 60 {
                        t = t.chars().take(57).collect::<String>() + "...";
                    }
                    format!("= {}", t)
                }
                GState::Thunk(_) => "not evaluated (its evaluation failed)".to_string(),
                GState::Forcing => "being evaluated".to_string(),
                GState::Failed(_) => "not defined (it failed to compile)".to_string(),
            };
            let shadow = if self.prelude.contains_key(&name) { "  (replaces the prelude's)" } else { "" };
            out.push(format!("{:<width$}  {}{}", name, what, shadow, width = width));
        }
        self.say(&out.join("\n"));
    }

    /// Compiles the single expression of a command argument.
    fn compile_one(&mut self, padded: &str, name: &str, first_line: usize) -> Result<Rc<crate::anf::Group>> {
        let id = self.s.sources.len() as u32;
        let r = self.s.compile_expr(padded, name);
        self.s.sources.set_first_line(id, first_line);
        // Errors show the line as typed, command and all.
        self.s.sources.set_text(id, &self.command_text);
        r
    }

    fn anf(&mut self, padded: &str, arg: &str, name: &str, first_line: usize) -> Result<()> {
        // A name: show its definition.
        if let Some(&g) = self.s.scope.get(arg) {
            let mut out = String::new();
            let global = &self.s.m.globals[g as usize];
            match (&global.thunk, &global.state) {
                // A constant definition (evaluated or not): its code.
                (Some(grp), _) => {
                    if let Some(ms) = grp.members.get() {
                        out = crate::show::block_to_string(&ms[0].body);
                    }
                }
                (None, GState::Value(Value::Closure(inst, i))) => {
                    crate::show::write_closure(&mut out, inst, *i as usize)
                }
                // A reversible procedure: its definition, as `vlad anf` shows it.
                (None, GState::Value(Value::Rev(r))) => {
                    self.say(crate::rev::proc_text(r).trim_end());
                    return Ok(());
                }
                _ => {}
            }
            if !out.is_empty() {
                self.say(&format!("(define {}\n  {})", arg, out.replace('\n', "\n  ")));
                return Ok(());
            }
        }
        let g = self.compile_one(padded, name, first_line)?;
        let Some(thunk) = g.members.get().and_then(|ms| ms.first()) else {
            return Err(Error::runtime(None, "internal error: no A-normal form"));
        };
        // Leave out the check of the (empty) argument of the expression's thunk.
        let mut body = thunk.body.clone();
        body.binds.retain(
            |b| !matches!(b, crate::anf::Bind::Check(_, crate::anf::Atom::Var(v), _) if *v == thunk.param),
        );
        let out = crate::show::block_to_string(&body);
        self.say(&out);
        Ok(())
    }

    fn transform(
        &mut self,
        padded: &str,
        name: &str,
        first_line: usize,
        kind: crate::anf::Kind,
    ) -> Result<()> {
        let g = self.compile_one(padded, name, first_line)?;
        let v = self.guarded(|s| s.run_thunk(&g))?;
        let out = match &v {
            Value::Closure(inst, i) => {
                let t = crate::ad::transform_group(&inst.group, kind);
                self.guarded(|s| s.m.group_members(&t).map(|_| ()))?;
                let mut out = String::new();
                crate::show::write_group_member(&mut out, &t, *i as usize, 0);
                out
            }
            Value::Prim(p) => crate::ad::rules::rule_source(*p, kind),
            other => {
                let command = if kind == crate::anf::Kind::R { ":reverse" } else { ":forward" };
                let shown = crate::print::to_string(other);
                let message = if let Value::Rev(_) = other {
                    // (a procedure to `procedure?`, but its derivatives are
                    // `rev-grad`'s, not a transform's)
                    format!(
                        "{command} shows the transformed code of a lambda or a primitive's rule; {shown} is a \
                         reversible procedure, differentiated by running it backward (as `rev-grad` does), \
                         not by transformed code"
                    )
                } else {
                    format!("{command} needs a procedure, but the expression's value is {shown}")
                };
                return Err(Error::runtime(None, message));
            }
        };
        self.say(&out);
        Ok(())
    }

    fn time(&mut self, padded: &str, name: &str, first_line: usize) -> Result<()> {
        let g = self.compile_one(padded, name, first_line)?;
        let t0 = Instant::now();
        let r = self.guarded(|s| s.run_thunk(&g).and_then(|v| s.printable(v, crate::source::Span::UNKNOWN)));
        let dt = t0.elapsed();
        match r {
            Ok(v) => {
                self.print_value(&v);
                self.say(&format!("time: {}", format_duration(dt)));
                Ok(())
            }
            Err(e) => {
                self.report(&e);
                self.say(&format!("time: {} (until the error)", format_duration(dt)));
                Ok(())
            }
        }
    }

    fn meter(&mut self, padded: &str, name: &str, first_line: usize) -> Result<()> {
        let g = self.compile_one(padded, name, first_line)?;
        let n = crate::prims::prims().len();
        let saved = self.s.m.meter.replace(vec![0; n].into());
        self.s.m.meter_derivative = Some(vec![0; n]);
        let r = self.guarded(|s| s.run_thunk(&g).and_then(|v| s.printable(v, crate::source::Span::UNKNOWN)));
        let all = self.s.m.meter.take().unwrap_or_default();
        let deriv = self.s.m.meter_derivative.take().unwrap_or_default();
        self.s.m.meter = saved.map(|mut old| {
            old.iter_mut().zip(&all).for_each(|(o, a)| *o += a);
            old
        });
        match r {
            Ok(v) => self.print_value(&v),
            Err(e) => self.report(&e),
        }
        let mut rows: Vec<(usize, u64, u64)> =
            (0..n).filter(|&i| all[i] > 0).map(|i| (i, all[i], deriv.get(i).copied().unwrap_or(0))).collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let total: u64 = all.iter().sum();
        let total_d: u64 = deriv.iter().sum();
        let mut out = format!(
            "primitive operations: {} (primal {}, derivative {})",
            total,
            total - total_d.min(total),
            total_d
        );
        let width = rows.iter().map(|r| crate::prims::prims()[r.0].name.len()).max().unwrap_or(0);
        let cw = rows.iter().map(|r| r.1.to_string().len()).max().unwrap_or(0);
        for (i, c, d) in rows {
            out.push_str(&format!(
                "\n  {:<width$}  {:>cw$}  (primal {}, derivative {})",
                crate::prims::prims()[i].name,
                c,
                c - d.min(c),
                d,
                width = width,
                cw = cw
            ));
        }
        self.say(&out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_is_decided_by_the_reader() {
        assert!(needs_more("(define (f x)"));
        assert!(needs_more("(f \"a)\n"));
        assert!(needs_more("#| (f) "));
        assert!(!needs_more("(f x) ; (unbalanced in a comment"));
        assert!(!needs_more("(display \")\")"));
        assert!(needs_more(":anf (f"));
        assert!(!needs_more(":load (weird"));
        assert!(!needs_more(")"));
    }

    #[test]
    fn commands_split() {
        assert_eq!(split_command("  :anf (f x)"), Some((":anf", 6)));
        assert_eq!(split_command(":quit"), Some((":quit", 5)));
        assert_eq!(split_command("(f x)"), None);
    }
}
