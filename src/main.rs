//! The `vlad` command line.

use libmimalloc_sys as mi;
use std::ffi::c_void;
use vlad::alloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() {
    // Large (2 MiB, transparent huge) OS pages for the heap: AD workloads that
    // build long tapes fault in hundreds of megabytes, and with 4 KiB pages the
    // kernel's page faults took half of such a run (product-R at 10^5: 1.24 s,
    // 0.68 s with large pages).
    // SAFETY: sets a mimalloc option; no allocation depends on its old value.
    unsafe { mi::mi_option_set(mi::mi_option_large_os_pages, 1) };
    // SAFETY: registers a plain function with no argument.
    unsafe { mi::mi_register_error(Some(allocator_error), std::ptr::null_mut()) };
    // Output to a pipe that was closed (`vlad test DIR | head`) ends the
    // process quietly, as for other Unix tools: Rust ignores SIGPIPE, and
    // `println!` then panicked on the write's error ("failed printing to
    // stdout: Broken pipe").
    // SAFETY: restores the signal's default action before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    std::process::exit(vlad::cli::main());
}

/// mimalloc's error callback. Out of memory (`ENOMEM`: the system refused an
/// allocation) becomes a clear error and exit status 1 rather than Rust's abort
/// (a "core dumped" crash); nothing in vlad allocates fallibly, so the failed
/// allocation would abort right after. Writing to the unbuffered standard
/// error allocates nothing; should exiting itself fail to allocate, the second
/// failure aborts. Other codes (mimalloc's consistency checks) change nothing.
extern "C" fn allocator_error(code: std::ffi::c_int, _: *mut c_void) {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    const ENOMEM: std::ffi::c_int = 12;
    static ONCE: AtomicBool = AtomicBool::new(false);
    if code != ENOMEM {
        return;
    }
    if ONCE.swap(true, Ordering::SeqCst) {
        std::process::abort()
    }
    let _ = std::io::stderr()
        .write_all(b"error: out of memory (the system refused an allocation); vlad stopped\n");
    std::process::exit(1)
}
