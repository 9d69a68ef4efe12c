//! Stack growth for the recursive passes over programs (expansion, conversion
//! to A-normal form, resolution, the AD transforms): however deeply a program
//! nests, each recursion step runs with at least [`RED_ZONE`] bytes of stack,
//! on a fresh segment if the thread's own is nearly used up. (Evaluation grows
//! its stack in `eval::Machine::with_stack`, and the tag operations on values in `ad::ops`.)
//! The trees those passes build (`Datum`, `Core`, the A-normal form's `Block`,
//! the resolved `CBlock`, the reversible sub-language's `Stmt`, `CStmt` and
//! `RExpr`) are dropped with work lists rather than by recursion, so a program
//! nested tens of thousands deep compiles and runs even on a 2 MiB thread.

/// The stack a recursion step may use before the next check.
pub const RED_ZONE: usize = 512 * 1024;
/// The size of each extra segment.
pub const SEGMENT: usize = 16 * 1024 * 1024;

/// Runs `f` with at least [`RED_ZONE`] bytes of stack.
#[inline(always)]
pub fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// `stacker::maybe_grow(red_zone, segment, f)` for a step that can fail: where
/// the stack has less than `red_zone` bytes left and no new segment can be had,
/// an error instead of `stacker`'s panic (see [`can_grow`]).
pub fn try_grow<R>(
    red_zone: usize,
    segment: usize,
    f: impl FnOnce() -> crate::error::Result<R>,
) -> crate::error::Result<R> {
    match stacker::remaining_stack() {
        Some(rem) if rem >= red_zone => f(),
        _ if segment_mappable(segment) => stacker::grow(segment, f),
        _ => Err(crate::error::Error::runtime(
            None,
            "out of memory for the stack (a value or a recursion nested too deeply)",
        )),
    }
}

/// Whether a recursion step can get [`RED_ZONE`] bytes of stack: the current
/// segment has them, or a new segment can be mapped. `stacker` panics when it
/// cannot map a segment (under a memory limit such as `ulimit -v`), and the panic
/// then unwinds through every frame of the recursion; code that can fail checks
/// this first and reports an error instead.
pub fn can_grow() -> bool {
    match stacker::remaining_stack() {
        Some(rem) if rem >= RED_ZONE => true,
        _ => segment_mappable(SEGMENT),
    }
}

/// Maps and unmaps, readable and writable as `stacker` maps its segments, room
/// for a segment of `size` bytes and as much again for the data the recursion
/// allocates on it.
#[cfg(unix)]
fn segment_mappable(size: usize) -> bool {
    let size = 2 * size;
    // SAFETY: a fresh anonymous private mapping, unmapped before returning and
    // never accessed.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, size);
    }
    true
}

#[cfg(not(unix))]
fn segment_mappable(_: usize) -> bool {
    true
}
