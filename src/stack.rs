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
