//! Command-line interface: `vlad FILE`, `vlad run`, `vlad test`, `vlad anf`, `vlad repl`.

use crate::check::{self, Report};
use crate::error::{Error, ErrorKind};
use crate::toplevel::{Item, Session, Step};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "vlad",
    version,
    about = "VLAD: a functional Scheme dialect with first-class automatic differentiation",
    long_about = "Runs VLAD programs. `vlad FILE.vlad` runs a program and prints the value of each \
top-level expression; with no file (or `vlad repl`) it starts an interactive session.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Program to run (same as `vlad run FILE`; `-`: standard input); omit for the REPL
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub opts: Opts,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a program, printing the value of each top-level expression
    Run {
        /// Program file (`.vlad`; `-`: standard input)
        file: PathBuf,
        #[command(flatten)]
        opts: Opts,
    },
    /// Check the `EXPR ===> EXPECTED` annotations of files (directories: every .vlad in them)
    Test {
        /// Files to check, or directories (every `.vlad` file in them); `-`: standard input
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        opts: Opts,
    },
    /// Print the expanded, alpha-renamed A-normal form of a program
    Anf {
        /// Program file (`.vlad`; `-`: standard input)
        file: PathBuf,
        /// Also print the reverse (`*j`) transform of each top-level procedure
        #[arg(long)]
        reverse: bool,
        /// Also print the forward (`bundle`) transform of each top-level procedure
        #[arg(long)]
        forward: bool,
        /// Also print the inverse of each reversible procedure (`define-reversible`)
        #[arg(long)]
        inverse: bool,
        #[command(flatten)]
        opts: Opts,
    },
    /// Start the interactive REPL
    Repl {
        #[command(flatten)]
        opts: Opts,
    },
}

#[derive(Args, Debug, Clone, Default)]
pub struct Opts {
    /// Add a directory to the `include` search path (after the including file's directory)
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Stop a program after this many procedure calls (exit status 3; `vlad test`: each check, failing it unless it expects `(error "limit")`; the REPL: each input)
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u64>,
    /// Stop a program after this many seconds (exit status 3; `vlad test`: each check, failing it unless it expects `(error "limit")`; the REPL: each input)
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Fail with "recursion too deep" beyond this many nested calls
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub max_depth: usize,
    /// After the run, print counts of primitive arithmetic operations, procedure calls and AD value operations (to stderr)
    #[arg(long)]
    pub metered: bool,
    /// After each top-level expression of a program, print the CPU time it took (user and
    /// system, of the whole process; definitions, reading and compiling not counted) to
    /// stderr, as `time: 12.345 ms (FILE:LINE:COL)`
    #[arg(long)]
    pub time: bool,
    /// Evaluate each top-level expression of a program N times, printing its value once
    /// (with `--time`: the median CPU time of the N runs, and each run's); an expression
    /// that reads or writes (`read-real`, `write`, `write-real`) does so in each run, and
    /// every run counts towards `--max-steps` and `--timeout` (N at most 1000000)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub repeat: u32,
    /// Where vector primitives run: auto, the GPU for long vectors where one is found and
    /// has room, else the CPU; cpu; or cuda, the GPU always (an error without one, or
    /// without room for a vector)
    #[arg(long, value_name = "auto|cpu|cuda", default_value = "auto")]
    pub backend: String,
    /// Run the prelude's jvp and vjp (derivative-F/-R, gradient-F/-R, hvp...) by the closure
    /// transforms only, never on dual numbers or a tape (to compare the two; the same values
    /// but for corners the README describes)
    #[arg(long)]
    pub no_tape: bool,
    /// Run everything in the evaluator: never compile numeric procedures to machine code
    /// (to compare the two; the same values, steps and errors)
    #[arg(long)]
    pub no_jit: bool,
    /// Compile a numeric procedure to machine code once it has been called this many times
    /// (a small one holding a loop, or a `map` calling a procedure, and run in place by its
    /// callers: once it has taken this many steps there), and a named `let`'s numeric loop
    /// once it has run this many
    /// iterations (where the build has the `jit` feature; 0: never)
    #[arg(long, value_name = "N", default_value_t = crate::jit::DEFAULT_AFTER)]
    pub jit_after: u64,
}

impl Opts {
    /// The machine's `jit_after` these options ask for (`--no-jit`: 0, never).
    pub(crate) fn jit_after(&self) -> u64 {
        if self.no_jit {
            0
        } else {
            self.jit_after
        }
    }
}

/// Parses the command line and runs it on a thread with a large stack; returns the exit code.
pub fn main() -> i32 {
    let args = options_after_subcommand(std::env::args_os().collect());
    if let Some(e) = misspelt_command(&args) {
        eprintln!("{e}\n\nFor more information, try '--help'.");
        return 2;
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // `--help`, `--version` (status 0) or a bad command line (2); help that
        // cannot be written is an error, as any output is.
        Err(e) => {
            let code = e.exit_code();
            let written = e.print().and_then(|()| std::io::stdout().flush());
            return match written {
                Err(io) if code == 0 => output_failed(&io),
                _ => code,
            };
        }
    };
    run_on_big_stack(move || dispatch(cli))
}

const SUBCOMMANDS: [&str; 4] = ["run", "test", "anf", "repl"];

/// `vlad --timeout 5 test FILE` as `vlad test --timeout 5 FILE`: options written before
/// a subcommand are moved after it, where the subcommand takes them (clap would take
/// the subcommand's name for the program file and refuse the rest). Arguments with no
/// subcommand among them are left as they are.
pub fn options_after_subcommand(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if let Some(i) = first_operand(&args).filter(|&i| i > 1) {
        if args[i].to_str().is_some_and(|a| SUBCOMMANDS.contains(&a)) {
            let sub = args.remove(i);
            args.insert(1, sub);
        }
    }
    args
}

/// Where the first argument that is neither an option nor an option's value is (the
/// subcommand, or the program file, or `--`); `None` if there is none, or if an
/// argument before it is not UTF-8.
fn first_operand(args: &[std::ffi::OsString]) -> Option<usize> {
    next_operand(args, 1)
}

/// [`first_operand`] from `args[i]` on.
fn next_operand(args: &[std::ffi::OsString], mut i: usize) -> Option<usize> {
    const WITH_VALUE: [&str; 8] = [
        "-I",
        "--include",
        "--max-steps",
        "--timeout",
        "--max-depth",
        "--backend",
        "--repeat",
        "--jit-after",
    ];
    while i < args.len() {
        let a = args[i].to_str()?;
        if WITH_VALUE.contains(&a) {
            i += 2;
        } else if a.starts_with('-') && a != "-" && a != "--" {
            i += 1;
        } else {
            return Some(i);
        }
    }
    None
}

/// `vlad tset FILE`: the error for a program file that does not exist and is
/// named like a subcommand misspelt (clap would take it for the file and then
/// refuse `FILE` as a subcommand, or report the file missing), if that is so.
pub fn misspelt_command(args: &[std::ffi::OsString]) -> Option<String> {
    let i = first_operand(args)?;
    let a = args[i].to_str()?;
    if a == "--" || a == "help" || SUBCOMMANDS.contains(&a) {
        return None;
    }
    // (clap would refuse the second as "the subcommand 'X' cannot be used with '[FILE]'")
    let another = next_operand(args, i + 1).map(|j| args[j].to_string_lossy());
    if Path::new(a).exists() {
        return another
            .map(|b| format!("error: vlad runs one program file at a time; after `{a}` there is `{b}`"));
    }
    let commands = SUBCOMMANDS.into_iter().chain(["help"]);
    let mut hint = crate::suggest::nearest_hint(a, commands.clone());
    if hint.is_empty() && !a.is_empty() {
        // (a command's name cut short: `ru`, `an`)
        let mut starting = commands.clone().filter(|c| c.starts_with(a));
        if let (Some(c), None) = (starting.next(), starting.next()) {
            hint = format!(" (did you mean `{c}`?)");
        }
    }
    if hint.is_empty() && another.is_some() {
        hint = format!(" (the commands are {})", commands.collect::<Vec<_>>().join(", "));
    }
    (!hint.is_empty()).then(|| format!("error: `{a}` is neither a program file nor a command{hint}"))
}

/// Below this much address space left (`ulimit -v`), `run_on_big_stack` runs
/// on the calling thread: a thread would take its stack and a segment of the
/// allocator's of its own from it.
const TIGHT_ADDRESS_SPACE: usize = 256 << 20;

/// Runs `f` on a thread whose stack is large enough for deep data (dropping long
/// closure chains, printing deep lists); evaluation itself grows its stack as needed.
/// The stack is 1 GiB, or half the memory the process has room for where that is
/// less (`stack::memory_room`; at least 256 MiB): its pages become memory as a
/// deep recursion touches them, unchecked, while the segments a recursion takes
/// past it are each checked for room (a control group's memory limit would
/// otherwise end the process without a message). Under an address-space limit
/// (`ulimit -v`) the stack is at most half the address space left, and smaller
/// sizes are tried where a thread cannot be had; where none can, `f` runs on
/// the calling thread (every pass over a program, and evaluation, grow their
/// stacks by segments: see `stack`).
pub fn run_on_big_stack<F: FnOnce() -> i32 + Send + 'static>(f: F) -> i32 {
    let room = crate::stack::address_room();
    let first = crate::stack::memory_room()
        .map_or(1 << 30, |r| (r / 2).clamp(256 << 20, 1 << 30))
        .min(room.map_or(usize::MAX, |r| r / 2));
    // (each thread's allocations come from segments of their own, of 32 MiB:
    // under a tight limit, no second thread)
    let sizes: &[usize] = if room.is_some_and(|r| r < TIGHT_ADDRESS_SPACE) {
        &[]
    } else {
        &[first, 256 << 20, 64 << 20, 16 << 20, 4 << 20]
    };
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(f)));
    for &size in sizes.iter().filter(|&&s| s <= first) {
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = slot.clone();
        let spawned = std::thread::Builder::new().name("vlad".into()).stack_size(size).spawn(move || {
            crate::stack::prefer_huge_pages();
            let g = s2.lock().unwrap_or_else(|e| e.into_inner()).take();
            let _ = tx.send(g.map_or(70, run_guarded));
        });
        if let Ok(h) = spawned {
            let _ = h.join();
            return rx.recv().unwrap_or(70);
        }
    }
    // (no thread could be started: the address space is nearly used up)
    let f = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    f.map_or(70, run_guarded)
}

/// Runs `f`, reporting a panic (a bug in vlad, never the user's fault) plainly:
/// its exit status, or 70 after a panic (1 where the stack ran out, or
/// standard error could not be written).
fn run_guarded(f: impl FnOnce() -> i32) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(c) => c,
        Err(p) if p.is::<crate::stack::Exhausted>() => {
            // (a pass over a program or a value found no stack left:
            // see `stack::grow`)
            let _ = writeln!(std::io::stderr(), "error: {}", crate::stack::EXHAUSTED);
            1
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            if msg.starts_with("failed printing to std") {
                // (standard error could not be written, `eprintln!`: not a
                // bug, and nothing more can be said there)
                1
            } else {
                let _ =
                    writeln!(std::io::stderr(), "internal error (a bug in vlad, please report it): {msg}");
                70
            }
        }
    }
}

/// A program file's items, or `None` with the error reported.
fn read_program(s: &mut Session, file: &Path) -> Option<Vec<crate::toplevel::Item>> {
    match s.read_file(file) {
        Ok(i) => Some(i),
        Err(e) => {
            report_error(s, &e);
            None
        }
    }
}

fn new_session(opts: &Opts) -> Session {
    let mut s = Session::new();
    s.include_dirs = opts.include.clone();
    apply_limits(&mut s, opts);
    s.watchdog = true;
    s
}

/// `--timeout`: a number of seconds, not negative (`inf` or a huge number: no limit).
fn parse_timeout(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(t) if t >= 0.0 => Ok(t),
        Ok(_) => Err("the number of seconds must not be negative or NaN".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The instant `--timeout` seconds from now; `None` (no limit) when that is beyond
/// what an `Instant` can hold (`Duration::from_secs_f64` and `Instant + Duration`
/// panic there).
pub(crate) fn deadline(timeout: Option<f64>) -> Option<Instant> {
    let d = Duration::try_from_secs_f64(timeout?.max(0.0)).ok()?;
    Instant::now().checked_add(d)
}

fn apply_limits(s: &mut Session, opts: &Opts) {
    s.m.set_max_steps(opts.max_steps.unwrap_or(u64::MAX));
    s.m.set_max_depth(opts.max_depth);
    s.m.tape.enabled = !opts.no_tape;
    s.m.jit_after = opts.jit_after();
    s.m.deadline = deadline(opts.timeout);
    if opts.metered {
        s.m.meter = Some(vec![0; crate::prims::prims().len()].into());
    }
}

/// Checks `--backend` and makes it the default for new machines. `cuda` without a
/// usable GPU is an error; `auto` silently uses the CPU then.
pub(crate) fn check_backend(opts: &Opts) -> Result<(), i32> {
    use crate::vec::Backend;
    match Backend::parse(&opts.backend) {
        Some(Backend::Cuda) if !crate::vec::cuda_available() => {
            eprintln!(
                "error: --backend cuda: no usable CUDA device: {}",
                crate::vec::cuda_unavailable_reason()
            );
            Err(2)
        }
        Some(b) => {
            crate::vec::set_default_backend(b);
            Ok(())
        }
        None => {
            eprintln!("error: --backend must be auto, cpu or cuda, not `{}`", opts.backend);
            Err(2)
        }
    }
}

fn dispatch(cli: Cli) -> i32 {
    match cli.cmd {
        Some(Cmd::Run { file, opts }) => run_file(&file, &opts),
        Some(Cmd::Test { files, opts }) => {
            only_run_times(&opts, "vlad test").unwrap_or_else(|| test_files(&files, &opts))
        }
        Some(Cmd::Anf { file, reverse, forward, inverse, opts }) => only_run_times(&opts, "vlad anf")
            .unwrap_or_else(|| anf_file(&file, reverse, forward, inverse, &opts)),
        Some(Cmd::Repl { opts }) => {
            only_run_times(&opts, "the REPL").unwrap_or_else(|| crate::repl::run(&opts))
        }
        None => match cli.file {
            Some(f) => run_file(&f, &cli.opts),
            None => only_run_times(&cli.opts, "the REPL").unwrap_or_else(|| crate::repl::run(&cli.opts)),
        },
    }
}

/// `--time` and `--repeat` apply to running a program file: elsewhere they
/// are refused (they were accepted and did nothing); the exit status then.
fn only_run_times(opts: &Opts, what: &str) -> Option<i32> {
    let given = match (opts.time, opts.repeat != 1) {
        (true, true) => "--time and --repeat apply",
        (true, false) => "--time applies",
        (false, true) => "--repeat applies",
        (false, false) => return None,
    };
    let hint = if what == "the REPL" { " (there, `:time EXPR` times an expression)" } else { "" };
    eprintln!("error: {given} to running a program (`vlad FILE`, `vlad run FILE`), not to {what}{hint}");
    Some(2)
}

fn report_error(s: &Session, e: &Error) {
    eprint!("{}", e.render(&s.sources));
}

/// Prints the metering counts.
pub fn print_meter(s: &Session) {
    if let Some(m) = &s.m.meter {
        let mut parts = Vec::new();
        let mut total = 0;
        for (i, c) in m.iter().enumerate() {
            if *c > 0 {
                parts.push(format!("{} {}", crate::prims::prims()[i].name, c));
                total += c;
            }
        }
        if parts.is_empty() {
            eprintln!("metered: 0 primitive operations");
        } else {
            eprintln!("metered: {} primitive operations ({})", total, parts.join(", "));
        }
        eprintln!("metered: {} procedure calls, {} AD value operations", s.m.steps(), s.m.ad_work);
        let t = &s.m.tape;
        if t.runs + t.declined_runs > 0 {
            let why = match &t.first_decline {
                Some(w) => {
                    format!(" (the first run that gave way met: {})", w.trim_start_matches("internal: "))
                }
                None => String::new(),
            };
            eprintln!(
                "metered: {} jvp/vjp calls on dual numbers or a tape, {} by the transform{}",
                t.runs, t.declined_runs, why
            );
        }
    }
}

fn run_file(file: &Path, opts: &Opts) -> i32 {
    if let Err(c) = check_backend(opts) {
        return c;
    }
    let mut s = new_session(opts);
    let code = run_program(&mut s, file, opts.time, opts.repeat);
    // The process ends now: what the program built (long lists, tapes) is left
    // to the operating system rather than freed piece by piece (dropping a list
    // of 10^5 elements took 15% of the run that built it).
    std::mem::forget(s);
    code
}

/// The CPU time this process has used so far (user and system, all threads;
/// the wall clock since the first call where there is no such clock).
fn cpu_time() -> std::time::Duration {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid place for the result.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
            return std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        }
    }
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Reads, compiles and runs a program file in session `s`; the exit status
/// (`time`: report each top-level expression's CPU time, see `Opts::time`; `repeat`:
/// evaluate each top-level expression that many times, see `Opts::repeat`).
fn run_program(s: &mut Session, file: &Path, time: bool, repeat: u32) -> i32 {
    // Reading and compiling do not look at the clock: past the deadline, the
    // watchdog stops them (naming the file), as it stops a long primitive operation.
    let name = file.display().to_string();
    crate::watchdog::set_phase(crate::watchdog::Phase::Compiling);
    crate::watchdog::arm(
        s.m.deadline,
        Box::new(move || {
            match crate::watchdog::phase() {
                crate::watchdog::Phase::Compiling => {
                    eprintln!("{}: error: {}", name, crate::watchdog::message())
                }
                crate::watchdog::Phase::Running | crate::watchdog::Phase::CompilingCalled => {
                    eprintln!("error: {}", crate::watchdog::message())
                }
            }
            3
        }),
    );
    let Some(items) = read_program(s, file) else { return 1 };
    let unit = match s.compile(items) {
        Ok(u) => u,
        Err(e) => {
            report_error(s, &e);
            return 1;
        }
    };
    crate::watchdog::set_phase(crate::watchdog::Phase::Running);
    // Count only the program's own work.
    if let Some(m) = &mut s.m.meter {
        m.iter_mut().for_each(|c| *c = 0);
    }
    for step in unit.steps {
        let r = match step {
            Step::Define(g, _) => s.run_define(g).map(|_| ()),
            Step::Expr { thunk, span, .. } => {
                let mut times = Vec::new();
                let (mut first, mut failed) = (None, None);
                for _ in 0..repeat {
                    let t0 = time.then(cpu_time);
                    let r = s.run_thunk(&thunk).and_then(|v| s.printable(v, span));
                    times.extend(t0.map(|t0| cpu_time().saturating_sub(t0)));
                    match r {
                        // the first run's value is printed; a later run's is dropped
                        // here, untimed, before the next run
                        Ok(x) => {
                            first.get_or_insert(x);
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                let v = match (failed, first) {
                    (Some(e), _) => Err(e),
                    (None, Some(x)) => Ok(x),
                    (None, None) => Ok(crate::value::Value::Nil), // (`repeat` is at least 1)
                };
                v.and_then(|v| s.m.write_value(&v).map_err(|e| e.at(span))).map(|()| {
                    if !times.is_empty() {
                        let _ = s.m.out.flush();
                        eprintln!("time: {}", time_report(&times, &s.sources.location(span)));
                    }
                })
            }
            Step::Failed { error, .. } => Err(error),
        };
        if let Err(e) = r {
            let _ = s.m.out.flush();
            report_error(s, &e);
            print_meter(s);
            return if e.kind == ErrorKind::Limit { 3 } else { 1 };
        }
    }
    if let Err(e) = s.m.out.flush() {
        return output_failed(&e);
    }
    print_meter(s);
    0
}

/// `12.345 ms (FILE:LINE:COL)` for one run; for several, their median first, then
/// `(FILE:LINE:COL; median of 3 runs: 14.1 12.3 12.4 ms)`, the runs in order.
fn time_report(times: &[Duration], location: &str) -> String {
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    if let [t] = times {
        return format!("{:.3} ms ({})", ms(t), location);
    }
    let mut sorted: Vec<f64> = times.iter().map(ms).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
    let runs: Vec<String> = times.iter().map(|t| format!("{:.3}", ms(t))).collect();
    format!("{:.3} ms ({}; median of {} runs: {} ms)", median, location, n, runs.join(" "))
}

use std::io::Write;

fn test_files(files: &[PathBuf], opts: &Opts) -> i32 {
    if let Err(c) = check_backend(opts) {
        return c;
    }
    let mut report = Report::default();
    let opts2 = opts.clone();
    let mk = move || new_session(&opts2);
    let (paths, problems) = check::list_paths(files);
    for f in paths {
        let before = report.passed + report.failed;
        check::check_file(&mk, &f, &mut report);
        // A file named to be checked that has nothing to check (no expression:
        // empty, or definitions only) is a mistake too; one found in a
        // directory may be a file the others include.
        if report.passed + report.failed == before && files.contains(&f) {
            report.failed += 1;
            report
                .failures
                .push(format!("{}: error: no checks in this file (no expression to check)", f.display()));
        }
    }
    // A directory with nothing to check is a mistake (a wrong path), not a pass.
    report.failed += problems.len();
    report.failures.extend(problems);
    let mut text: String = report.failures.iter().map(|l| format!("{l}\n")).collect();
    text.push_str(&format!("{} passed, {} failed\n", report.passed, report.failed));
    if let Err(code) = emit(&text) {
        return code;
    }
    if report.failed > 0 {
        1
    } else {
        0
    }
}

fn anf_file(file: &Path, reverse: bool, forward: bool, inverse: bool, opts: &Opts) -> i32 {
    if let Err(c) = check_backend(opts) {
        return c;
    }
    let mut s = new_session(opts);
    let Some(items) = read_program(&mut s, file) else { return 1 };
    let names: Vec<Option<std::rc::Rc<str>>> = items
        .iter()
        .map(|it| match it {
            Item::Define { name, .. } | Item::DefineReversible { name, .. } => Some(name.clone()),
            Item::Expr { .. } | Item::Broken { .. } => None,
        })
        .collect();
    let unit = match s.compile(items) {
        Ok(u) => u,
        Err(e) => {
            report_error(&s, &e);
            return 1;
        }
    };
    // The expressions' thunks, in order (definitions are found through the scope).
    let mut exprs = unit.steps.iter().filter_map(|st| match st {
        Step::Expr { thunk, .. } => Some(thunk.clone()),
        Step::Define(..) | Step::Failed { .. } => None,
    });
    let mut code = 0;
    let mut out = String::new();
    for name in &names {
        let (group, title, is_thunk) = match name {
            Some(name) => {
                let g = s.scope[name];
                if let crate::eval::GState::Value(crate::value::Value::Rev(r)) =
                    &s.m.globals[g as usize].state
                {
                    out.push_str(&crate::rev::proc_text(r));
                    if inverse {
                        out.push_str(&format!(";; inverse of {} (what `uncall {}` runs)\n", name, name));
                        out.push_str(&crate::rev::inverse_text(r));
                    }
                    continue;
                }
                match &s.m.globals[g as usize].state {
                    crate::eval::GState::Value(crate::value::Value::Closure(inst, _)) => {
                        (inst.group.clone(), name.to_string(), false)
                    }
                    crate::eval::GState::Thunk(grp) => (grp.clone(), name.to_string(), true),
                    _ => continue,
                }
            }
            None => match exprs.next() {
                Some(t) => (t, String::new(), true),
                None => continue,
            },
        };
        if is_thunk {
            // A constant or a top-level expression: show its body.
            let body =
                group.members.get().map(|ms| crate::show::block_to_string(&ms[0].body)).unwrap_or_default();
            if title.is_empty() {
                out.push_str(&format!("{}\n", body));
            } else {
                out.push_str(&format!("(define {}\n  {})\n", title, body.replace('\n', "\n  ")));
            }
            continue;
        }
        out.push_str(&format!("(define {}\n  ", title));
        crate::show::write_group_member(&mut out, &group, 0, 1);
        out.push_str(")\n");
        for (flag, kind) in [(forward, crate::anf::Kind::F), (reverse, crate::anf::Kind::R)] {
            if !flag {
                continue;
            }
            let t = crate::ad::transform_group(&group, kind);
            match s.m.group_members(&t) {
                Ok(_) => {
                    out.push_str(&format!(";; {} transform of {}\n  ", kind.name(), title));
                    crate::show::write_group_member(&mut out, &t, 0, 1);
                    out.push('\n');
                }
                Err(e) => {
                    report_error(&s, &e);
                    code = 1;
                }
            }
        }
    }
    match emit(&out) {
        Ok(()) => code,
        Err(c) => c,
    }
}

/// Writes `text` on standard output; where it cannot be written (a full disk:
/// `print!` panicked), says so and gives exit status 1.
fn emit(text: &str) -> Result<(), i32> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| output_failed(&e))
}

/// Reports output that could not be written; the exit status for it.
fn output_failed(e: &std::io::Error) -> i32 {
    eprintln!("error: {}", crate::eval::output_error(e).message);
    1
}
