//! The `vlad` command line.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// mimalloc, through its plain entry points where the layout allows. AD
/// workloads allocate and free many small values (pairs, closures, lazy tags);
/// mimalloc is markedly faster at that than the system allocator. Its plain
/// `mi_malloc` aligns every block to 16 bytes or to the block's size,
/// whichever is smaller; only larger alignments take the aligned entry points
/// (which are slower whenever a page's free list runs out). Set here, for the
/// program only: library users (and benchmarks that count allocations) choose
/// their own.
struct MiMalloc;

/// What `mi_malloc` guarantees (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// Whether `mi_malloc(size)` is aligned enough for `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc with at least the layout's size and
// alignment (see `plain`), and goes back to it through `mi_free`/`mi_realloc*`.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if plain(l.align(), l.size()) {
            mi::mi_malloc(l.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(l.size(), l.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if plain(l.align(), l.size()) {
            mi::mi_zalloc(l.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(l.size(), l.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
        mi::mi_free(p as *mut c_void)
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        if plain(l.align(), size) {
            mi::mi_realloc(p as *mut c_void, size) as *mut u8
        } else {
            mi::mi_realloc_aligned(p as *mut c_void, size, l.align()) as *mut u8
        }
    }
}

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
