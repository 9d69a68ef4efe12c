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
    // (on Linux this was done before Rust's start-up: see REGISTER_ALLOCATOR_ERROR)
    #[cfg(not(target_os = "linux"))]
    // SAFETY: registers a plain function with no argument.
    unsafe {
        mi::mi_register_error(Some(allocator_error), std::ptr::null_mut())
    };
    // Output to a pipe that was closed (`vlad test DIR | head`) ends the
    // process quietly, as for other Unix tools: Rust ignores SIGPIPE, and
    // `println!` then panicked on the write's error ("failed printing to
    // stdout: Broken pipe").
    // SAFETY: restores the signal's default action before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    std::process::exit(vlad::cli::main());
}

/// Registers [`allocator_error`] before anything allocates: Rust's own
/// start-up allocates before `main` (the program's arguments, the main
/// thread's name), and under a tight address-space limit (`ulimit -v` of
/// about 40 MB or less) mimalloc cannot map its first segment there, so the
/// process aborted with Rust's "memory allocation of 4 bytes failed" and no
/// word of what to do. Run by the C runtime, as a constructor, before Rust's
/// start-up.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_ALLOCATOR_ERROR: extern "C" fn() = {
    extern "C" fn register() {
        // SAFETY: registers a plain function with no argument; mimalloc
        // stores it and allocates nothing.
        unsafe { mi::mi_register_error(Some(allocator_error), std::ptr::null_mut()) };
        grow_main_stack();
    }
    register
};

/// The main thread's stack, grown by [`MAIN_STACK`] now, before anything
/// else takes address space: under an address-space limit (`ulimit -v`)
/// that left mimalloc room for its first segment but the stack none to grow
/// into as the command line was read (a window of some 100 kB, where a
/// debug build's larger frames reached past the stack's first pages), the
/// process died of a segmentation fault instead of the out-of-memory error
/// of a slightly tighter limit. (The programs run on a thread of their own,
/// whose stack is mapped whole when it starts.)
#[cfg(target_os = "linux")]
#[inline(never)]
fn grow_main_stack() {
    let mut probe = [0u8; MAIN_STACK];
    // (each page written, from the top down, as the stack grows)
    for i in (0..MAIN_STACK).step_by(4096).rev() {
        // SAFETY: an element of the array.
        unsafe { std::ptr::write_volatile(probe.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&probe);
}

/// How much of the main thread's stack [`grow_main_stack`] maps.
#[cfg(target_os = "linux")]
const MAIN_STACK: usize = 1 << 20;

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
    // (formatted into a buffer on the stack: nothing here may allocate)
    let mut buf = [0u8; 200];
    let size = buf.len();
    let mut out = &mut buf[..];
    let _ = out.write_all(b"error: out of memory (the system refused an allocation");
    if let Some(kb) = vlad::stack::address_limit().map(|b| b / 1024) {
        let _ = write!(out, " under an address-space limit, `ulimit -v`, of {kb} kB");
    }
    let _ = out.write_all(b"); vlad stopped\n");
    let len = size - out.len();
    let _ = std::io::stderr().write_all(&buf[..len]);
    std::process::exit(1)
}
