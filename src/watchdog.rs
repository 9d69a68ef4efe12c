//! The last resort of `--timeout`.
//!
//! The evaluator compares the clock with its deadline between steps, but one
//! primitive operation can run for minutes without taking a step: the product of
//! two exact integers of millions of digits, or printing one. The watchdog is a
//! thread that ends the process when the evaluator has not stopped [`GRACE`] after
//! its deadline passed, so that `--timeout` bounds a run whatever it does.
//!
//! Only the command line arms it (library users and tests never do): `vlad run`
//! for the whole run, `vlad test` for each check, the REPL for each input.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long after the deadline the evaluator has to notice it by itself (it
/// normally does within microseconds, reporting where the program was).
pub const GRACE: Duration = Duration::from_secs(1);

/// What to do when the watchdog fires: report, and return the exit status.
pub type OnFire = Box<dyn FnOnce() -> i32 + Send>;

struct Armed {
    at: Instant,
    on_fire: OnFire,
}

struct Shared {
    armed: Mutex<Option<Armed>>,
    wake: Condvar,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

fn shared() -> &'static Shared {
    let mut fresh = false;
    let s = SHARED.get_or_init(|| {
        fresh = true;
        Shared { armed: Mutex::new(None), wake: Condvar::new() }
    });
    if fresh {
        let spawned = std::thread::Builder::new().name("vlad-watchdog".into()).spawn(move || watch(s));
        if let Err(e) = spawned {
            eprintln!("vlad: cannot start the --timeout watchdog ({})", e);
        }
    }
    s
}

/// What the program is doing, for the watchdog's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading and compiling source (which does not look at the clock).
    Compiling,
    /// Compiling a procedure's code (or its transformed version) on its first
    /// call, during evaluation (which does not look at the clock either).
    CompilingCalled,
    /// Evaluating (or printing a value).
    Running,
}

static PHASE: AtomicU8 = AtomicU8::new(Phase::Running as u8);

/// Tells the watchdog what the program does from now on (initially [`Phase::Running`]).
pub fn set_phase(p: Phase) {
    PHASE.store(p as u8, Ordering::SeqCst);
}

/// The current [`Phase`].
pub fn phase() -> Phase {
    match PHASE.load(Ordering::SeqCst) {
        x if x == Phase::Compiling as u8 => Phase::Compiling,
        x if x == Phase::CompilingCalled as u8 => Phase::CompilingCalled,
        _ => Phase::Running,
    }
}

/// The message printed when the watchdog stops a program (worded for the [`phase`]).
pub fn message() -> String {
    match phase() {
        Phase::Running => format!(
            "time limit exceeded (--timeout); a primitive operation was still running {} s later \
             and cannot be interrupted, so vlad stopped",
            GRACE.as_secs_f64()
        ),
        Phase::Compiling => format!(
            "time limit exceeded (--timeout) while reading and compiling, before evaluation; \
             it was still not done {} s later and cannot be interrupted, so vlad stopped",
            GRACE.as_secs_f64()
        ),
        Phase::CompilingCalled => format!(
            "time limit exceeded (--timeout) while compiling a procedure for its first call; \
             it was still not done {} s later and cannot be interrupted, so vlad stopped",
            GRACE.as_secs_f64()
        ),
    }
}

/// Ends the process with what `on_fire` returns unless [`disarm`] or another
/// `arm` comes first, [`GRACE`] after `deadline`. No deadline disarms.
pub fn arm(deadline: Option<Instant>, on_fire: OnFire) {
    let Some(at) = deadline.and_then(|d| d.checked_add(GRACE)) else {
        return disarm();
    };
    let s = shared();
    *s.armed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Armed { at, on_fire });
    s.wake.notify_all();
}

/// Cancels the armed deadline, if any.
pub fn disarm() {
    if let Some(s) = SHARED.get() {
        *s.armed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        s.wake.notify_all();
    }
}

fn watch(s: &'static Shared) {
    let mut armed = s.armed.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        armed = match &*armed {
            None => s.wake.wait(armed).unwrap_or_else(|e| e.into_inner()),
            Some(a) if now >= a.at => {
                let a = armed.take().expect("armed");
                let code = (a.on_fire)();
                std::process::exit(code);
            }
            Some(a) => {
                let left = a.at - now;
                s.wake.wait_timeout(armed, left).unwrap_or_else(|e| e.into_inner()).0
            }
        };
    }
}
