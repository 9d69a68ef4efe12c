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

/// Runs `f` with at least [`RED_ZONE`] bytes of stack. Where the stack has
/// less left and no new segment can be mapped (under a memory limit such as
/// `ulimit -v`), unwinds with [`Exhausted`] (without the panic hook's
/// message), which [`catch_exhausted`] and the command line's and the REPL's
/// handlers turn into an error: `stacker` itself would panic there.
#[inline(always)]
pub fn grow<R>(f: impl FnOnce() -> R) -> R {
    match stacker::remaining_stack() {
        Some(rem) if rem >= RED_ZONE => f(),
        _ => grow_segment(f),
    }
}

/// [`grow`] past the current segment.
#[inline(never)]
fn grow_segment<R>(f: impl FnOnce() -> R) -> R {
    if !segment_mappable(SEGMENT) {
        std::panic::resume_unwind(Box::new(Exhausted));
    }
    stacker::grow(SEGMENT, f)
}

/// What a recursion step of a pass over a program unwinds with when no
/// stack is left for it (see [`grow`]).
pub struct Exhausted;

/// The message of an [`Exhausted`] unwinding, as an error.
pub const EXHAUSTED: &str = "out of memory for the stack (a program or a value nested too deeply)";

/// Runs `f`, an [`Exhausted`] unwinding out of it an error.
pub fn catch_exhausted<R>(f: impl FnOnce() -> crate::error::Result<R>) -> crate::error::Result<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) if p.is::<Exhausted>() => Err(crate::error::Error::runtime(None, EXHAUSTED)),
        Err(p) => std::panic::resume_unwind(p),
    }
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

/// Whether a recursion step can get `red_zone` bytes of stack (what it then
/// asks `stacker::maybe_grow` for, with segments of [`SEGMENT`] bytes): the
/// current segment has them, or a new segment can be mapped. `stacker` panics
/// when it cannot map a segment (under a memory limit such as `ulimit -v`), and
/// the panic then unwinds through every frame of the recursion; code that can
/// fail checks this first and reports an error instead.
pub fn can_grow(red_zone: usize) -> bool {
    match stacker::remaining_stack() {
        Some(rem) if rem >= red_zone => true,
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

/// Asks the kernel for transparent huge pages (2 MiB) for the next
/// [`HUGE_STACK`] bytes of this thread's stack, below the part in use now: a
/// recursion 10⁵ deep touches tens of megabytes of stack, and page faults on
/// 4 KiB pages took about a third of such a run (the recursive product in
/// reverse mode at 10⁵: 5,700 faults). The part in use stays on small pages, so
/// a program that does not recurse deeply touches no more memory than before;
/// and only so much is advised because a huge page the kernel does not have
/// free is made by compacting memory on the fault (`defrag` is `madvise`):
/// advising the whole 1 GiB made a recursion 5·10⁶ deep up to 2.5× slower,
/// now and then. Advice only: where the kernel ignores it, nothing changes.
#[cfg(target_os = "linux")]
pub fn prefer_huge_pages() {
    const HUGE: usize = 2 << 20;
    let Some(rem) = stacker::remaining_stack() else { return };
    let x = 0u8;
    let sp = std::ptr::addr_of!(x) as usize;
    // The stack grows down from `sp` to `sp - rem`; whole huge pages only,
    // leaving the one `sp` is in alone.
    let lo = sp.saturating_sub(rem.min(HUGE_STACK)).next_multiple_of(HUGE);
    let hi = (sp & !(HUGE - 1)).saturating_sub(HUGE);
    if hi > lo {
        // SAFETY: advice on a range of this thread's own stack mapping, which
        // changes no contents and no permissions.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
pub fn prefer_huge_pages() {}

/// How much of the stack [`prefer_huge_pages`] advises: enough for a recursion
/// of some 800,000 interpreted calls.
pub const HUGE_STACK: usize = 256 << 20;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The `VmFlags` line of the mapping of `/proc/self/smaps` that holds `addr`.
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                        inside = a <= addr && addr < b;
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }

    /// On a 64 MiB thread stack: the stack 8 MiB below the part in use is marked
    /// for huge pages (`hg`), the part in use is not, and a recursion through
    /// the marked part runs.
    #[test]
    fn deep_stack_is_advised_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("deep_stack_is_advised_huge_pages: skipped: this kernel has no transparent huge pages");
            return;
        }
        let r = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(|| {
                let x = 0u8;
                let sp = std::ptr::addr_of!(x) as usize;
                let before = vm_flags(sp - (8 << 20));
                super::prefer_huge_pages();
                let deep = vm_flags(sp - (8 << 20));
                let here = vm_flags(sp);
                // (a recursion ~10 MiB deep, through the advised part)
                fn down(n: u32) -> u32 {
                    let pad = std::hint::black_box([1u8; 512]);
                    if n == 0 {
                        0
                    } else {
                        down(n - 1) + pad[0] as u32
                    }
                }
                (before, deep, here, down(20_000))
            })
            .unwrap()
            .join()
            .unwrap();
        let (before, deep, here, sum) = r;
        assert_eq!(sum, 20_000);
        let has = |f: &Option<String>| f.as_deref().is_some_and(|f| f.split(' ').any(|x| x == "hg"));
        assert!(before.is_some() && !has(&before), "flags before the advice: {before:?}");
        assert!(has(&deep), "flags 8 MiB down after the advice: {deep:?}");
        assert!(!has(&here), "flags where the stack is in use: {here:?}");
    }
}
