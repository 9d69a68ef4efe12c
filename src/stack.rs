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
/// current segment has them (and, once the recursion is past the first
/// [`CHUNK`] of the stack, the memory to back the next chunk of it: see
/// [`room_for`]), or a new segment can be mapped. `stacker` panics
/// when it cannot map a segment (under a memory limit such as `ulimit -v`), and
/// the panic then unwinds through every frame of the recursion; code that can
/// fail checks this first and reports an error instead.
pub fn can_grow(red_zone: usize) -> bool {
    match stacker::remaining_stack() {
        Some(rem) if rem >= red_zone => stack_backed(red_zone),
        _ => segment_mappable(SEGMENT),
    }
}

/// Whether the stack down to `red_zone` bytes below here lies in a part
/// already found to have memory behind it, or the memory left has room for
/// the next [`CHUNK`] (which is then taken as found). The first chunk below
/// where a thread first asks is taken as found without looking: a program
/// that does not recurse deeply is never stopped for memory, however little
/// is left.
fn stack_backed(red_zone: usize) -> bool {
    use std::cell::Cell;
    thread_local! {
        // (the lowest address of the stack found to have memory behind it)
        static FOUND: Cell<usize> = const { Cell::new(0) };
    }
    let x = 0u8;
    let sp = std::ptr::addr_of!(x) as usize;
    let need = sp.saturating_sub(red_zone);
    let found = FOUND.get();
    if found == 0 {
        FOUND.set(sp.saturating_sub(CHUNK));
        return true;
    }
    if need >= found {
        return true;
    }
    if room_for(CHUNK) {
        FOUND.set(sp.saturating_sub(CHUNK));
        return true;
    }
    false
}

/// How much of a stack the evaluator uses between two calls of [`can_grow`]
/// (`eval::grow_native_stack` bounds its checks' span by it): the memory left
/// is checked that often as a deep recursion goes down its thread's stack,
/// whose pages become memory as they are first touched.
pub const CHUNK: usize = 32 << 20;

/// The memory kept free: a deep recursion stops with an error when the next
/// piece of its stack would leave less than this (see [`room_for`]).
pub const MARGIN: usize = 32 << 20;

/// Whether the process can use `bytes` more memory and still leave [`MARGIN`]
/// free, by [`memory_room`] (`true` where that is unknown). A recursion that
/// goes deeper than memory allows would otherwise be ended by the system: a
/// control group's memory limit (a container's) lets the stack be mapped and
/// kills the process as it touches it, without a message.
///
/// A reading is used again for 10 ms, less what each `room_for` since has
/// granted, so that it errs low (what a recursion took may have been given
/// back: one going up and down across a stack segment's edge maps a segment
/// each time down, and reading the memory left takes some 100 µs); where that
/// is not enough, the memory left is read again before refusing.
pub fn room_for(bytes: usize) -> bool {
    use std::cell::Cell;
    use std::time::{Duration, Instant};
    thread_local! {
        static LAST: Cell<Option<(Instant, Option<usize>)>> = const { Cell::new(None) };
    }
    let need = bytes.saturating_add(MARGIN);
    let now = Instant::now();
    let kept = LAST
        .get()
        .filter(|&(at, r)| now.duration_since(at) < Duration::from_millis(10) && r.is_none_or(|r| r >= need));
    let (at, room) = kept.unwrap_or_else(|| (now, memory_room()));
    match room {
        None => {
            LAST.set(Some((at, None)));
            true
        }
        Some(r) if r >= need => {
            LAST.set(Some((at, Some(r - bytes))));
            true
        }
        Some(r) => {
            LAST.set(Some((at, Some(r))));
            false
        }
    }
}

/// The bytes of memory this process can still use: the least of the system's
/// available memory (`MemAvailable`) and, for each control group the process
/// is in or under with a memory limit (cgroup v1 or v2), the limit less the
/// group's usage, its inactive file pages not counted (the kernel reclaims
/// them before it runs out). `None` where none of these can be read (not
/// Linux).
#[cfg(target_os = "linux")]
pub fn memory_room() -> Option<usize> {
    memory::room()
}

#[cfg(not(target_os = "linux"))]
pub fn memory_room() -> Option<usize> {
    None
}

/// The process's address-space limit in bytes (`ulimit -v`, `RLIMIT_AS`);
/// `None` where there is none (or it cannot be read). Allocates nothing: the
/// allocator's error callback (`src/main.rs`) names it.
#[cfg(target_os = "linux")]
pub fn address_limit() -> Option<usize> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` writes the limit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX))
}

#[cfg(not(target_os = "linux"))]
pub fn address_limit() -> Option<usize> {
    None
}

/// The bytes of address space this process can still map under its
/// address-space limit ([`address_limit`]): the limit less the size of its
/// mappings (`/proc/self/statm`). `None` where there is no such limit (or it
/// cannot be read).
#[cfg(target_os = "linux")]
pub fn address_room() -> Option<usize> {
    Some(address_limit()?.saturating_sub(statm_bytes(0)?))
}

#[cfg(not(target_os = "linux"))]
pub fn address_room() -> Option<usize> {
    None
}

/// The process's resident memory in bytes (Linux: `/proc/self/statm`).
#[cfg(target_os = "linux")]
pub fn resident_bytes() -> Option<usize> {
    statm_bytes(1)
}

/// Field `i` of `/proc/self/statm` (0: the size of the process's mappings,
/// 1: its resident part), a count of pages, in bytes.
#[cfg(target_os = "linux")]
fn statm_bytes(i: usize) -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(i)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(usize::try_from(page).ok().filter(|&p| p > 0)?))
}

#[cfg(not(target_os = "linux"))]
pub fn resident_bytes() -> Option<usize> {
    None
}

/// The machine's memory and swap in bytes (Linux: `MemTotal` and
/// `SwapTotal`).
#[cfg(target_os = "linux")]
pub fn machine_memory() -> Option<u64> {
    Some(memory::meminfo("MemTotal")? + memory::meminfo("SwapTotal").unwrap_or(0))
}

#[cfg(not(target_os = "linux"))]
pub fn machine_memory() -> Option<u64> {
    None
}

/// The least memory limit (bytes) of the control groups the process is in
/// or under (a container's), where one has a limit (Linux).
#[cfg(target_os = "linux")]
pub fn memory_limit() -> Option<u64> {
    memory::limit()
}

#[cfg(not(target_os = "linux"))]
pub fn memory_limit() -> Option<u64> {
    None
}

/// Reading the memory left (see [`memory_room`]) from `/proc` and the cgroup
/// file systems.
#[cfg(target_os = "linux")]
mod memory {
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    /// A control group's directory and the names of its files.
    struct Group {
        dir: PathBuf,
        v2: bool,
    }

    /// The directories of the control groups the process is in, and of their
    /// ancestors, that have memory files (found once).
    fn groups() -> &'static [Group] {
        static GROUPS: OnceLock<Vec<Group>> = OnceLock::new();
        GROUPS.get_or_init(|| {
            let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            groups_in(&text, Path::new("/sys/fs/cgroup"))
        })
    }

    /// The groups of [`groups`], from the text of `/proc/self/cgroup` and
    /// the cgroup file systems mounted at `root` (`/sys/fs/cgroup`: v2's
    /// hierarchy there or at `unified/` under it, v1's memory controller at
    /// `memory/`).
    fn groups_in(text: &str, root: &Path) -> Vec<Group> {
        let mut out = Vec::new();
        for line in text.lines() {
            // "ID:CONTROLLERS:PATH": v2's line is "0::PATH"
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(ctl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let (mounts, v2): (&[&str], bool) = if ctl.is_empty() {
                (&["", "unified"], true)
            } else if ctl.split(',').any(|c| c == "memory") {
                (&["memory"], false)
            } else {
                continue;
            };
            let limit = limit_file(v2);
            for mount in mounts {
                // (the group's own directory and its ancestors; inside a
                // container the mount's root is the container's group)
                let mut p = Path::new(path.trim_start_matches('/'));
                loop {
                    let dir = root.join(mount).join(p);
                    if dir.join(limit).exists() && !out.iter().any(|g: &Group| g.dir == dir) {
                        out.push(Group { dir, v2 });
                    }
                    match p.parent() {
                        Some(q) => p = q,
                        None => break,
                    }
                }
            }
        }
        out
    }

    /// The file holding a group's memory limit.
    fn limit_file(v2: bool) -> &'static str {
        if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        }
    }

    /// A group's memory limit, or `None` where it has none ("max" in v2; about
    /// 2^63 in v1).
    fn group_limit(g: &Group) -> Option<u64> {
        read_number(&g.dir.join(limit_file(g.v2))).filter(|&l| l < 1 << 60)
    }

    fn read_number(path: &Path) -> Option<u64> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }

    /// The value of `key` in a `KEY VALUE` or `KEY: VALUE kB` file.
    fn field(text: &str, key: &str) -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?;
            let rest = rest.strip_prefix(':').unwrap_or(rest);
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    /// What a group's limit leaves, or `None` where it has none.
    fn group_room(g: &Group) -> Option<u64> {
        let (usage, inactive) = if g.v2 {
            ("memory.current", "inactive_file")
        } else {
            ("memory.usage_in_bytes", "total_inactive_file")
        };
        let limit = group_limit(g)?;
        let usage = read_number(&g.dir.join(usage))?;
        let stat = std::fs::read_to_string(g.dir.join("memory.stat")).unwrap_or_default();
        let inactive = field(&stat, inactive).unwrap_or(0);
        Some(limit.saturating_sub(usage.saturating_sub(inactive)))
    }

    /// The least memory limit among the process's control groups (bytes),
    /// where any has one.
    pub(super) fn limit() -> Option<u64> {
        least_limit(groups())
    }

    fn least_limit(groups: &[Group]) -> Option<u64> {
        groups.iter().filter_map(group_limit).min()
    }

    /// The value (kB) of `key` in `/proc/meminfo`, in bytes.
    pub(super) fn meminfo(key: &str) -> Option<u64> {
        field(&std::fs::read_to_string("/proc/meminfo").ok()?, key).map(|kb| kb * 1024)
    }

    pub(super) fn room() -> Option<usize> {
        least_room(groups(), meminfo("MemAvailable"))
    }

    /// The least of what `groups`' limits leave and `available`.
    fn least_room(groups: &[Group], available: Option<u64>) -> Option<usize> {
        groups
            .iter()
            .filter_map(group_room)
            .chain(available)
            .min()
            .map(|r| usize::try_from(r).unwrap_or(usize::MAX))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn fields_are_read_from_both_formats() {
            let meminfo = "MemTotal:       24684000 kB\nMemAvailable:   20000000 kB\n";
            assert_eq!(super::field(meminfo, "MemAvailable"), Some(20_000_000));
            let stat = "active_file 10\ninactive_file 4096\ntotal_inactive_file 8192\n";
            assert_eq!(super::field(stat, "inactive_file"), Some(4096));
            assert_eq!(super::field(stat, "total_inactive_file"), Some(8192));
            assert_eq!(super::field(stat, "missing"), None);
        }

        /// Writes `files` (path under `root`, contents) into a new tree.
        fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
            let root = tempfile::tempdir().unwrap();
            for (path, text) in files {
                let p = root.path().join(path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
            root
        }

        /// cgroup v2 (the unified hierarchy, as a container or a systemd
        /// slice sees it): the process's group and its ancestors with a
        /// `memory.max` are found, "max" is no limit, and a group's room is
        /// its limit less its usage, its inactive file pages not counted.
        /// The least of the groups' rooms and `MemAvailable` is the room.
        #[test]
        fn cgroup_v2_groups_limits_and_room() {
            let root = tree(&[
                ("user.slice/memory.max", "max\n"),
                ("user.slice/memory.current", "5000000000\n"),
                ("user.slice/app/memory.max", "1000000\n"),
                ("user.slice/app/memory.current", "400000\n"),
                ("user.slice/app/memory.stat", "anon 250000\nactive_file 50000\ninactive_file 100000\n"),
                // (a sibling group, not the process's: not read)
                ("user.slice/other/memory.max", "10\n"),
            ]);
            let groups = super::groups_in("0::/user.slice/app\n", root.path());
            let dirs: Vec<_> =
                groups.iter().map(|g| (g.dir.strip_prefix(root.path()).unwrap(), g.v2)).collect();
            let (app, slice) = (std::path::Path::new("user.slice/app"), std::path::Path::new("user.slice"));
            assert_eq!(dirs, [(app, true), (slice, true)]);
            assert_eq!(super::least_limit(&groups), Some(1_000_000));
            assert_eq!(super::least_room(&groups, Some(1 << 30)), Some(700_000));
            // (MemAvailable the least)
            assert_eq!(super::least_room(&groups, Some(123)), Some(123));
            // usage past the limit (reclaimable pages not yet reclaimed): no room
            std::fs::write(root.path().join("user.slice/app/memory.current"), "2000000\n").unwrap();
            assert_eq!(super::least_room(&groups, None), Some(0));
        }

        /// cgroup v2 mounted at `unified/` beside v1's controllers (the
        /// hybrid layout), and v1's memory controller: its "no limit" is a
        /// number near 2^63; its usage and inactive pages have other names.
        #[test]
        fn cgroup_v1_and_hybrid_groups() {
            let root = tree(&[
                ("unified/job/memory.max", "3000000\n"),
                ("unified/job/memory.current", "1000000\n"),
                ("memory/job/memory.limit_in_bytes", "2000000\n"),
                ("memory/job/memory.usage_in_bytes", "1500000\n"),
                ("memory/job/memory.stat", "inactive_file 7\ntotal_inactive_file 500000\n"),
                ("memory/memory.limit_in_bytes", "9223372036854771712\n"),
                ("memory/memory.usage_in_bytes", "8000000000\n"),
            ]);
            let text = "12:pids:/job\n4:cpu,memory:/job\n0::/job\n";
            let groups = super::groups_in(text, root.path());
            let dirs: Vec<_> =
                groups.iter().map(|g| (g.dir.strip_prefix(root.path()).unwrap(), g.v2)).collect();
            let p = std::path::Path::new;
            assert_eq!(dirs, [(p("memory/job"), false), (p("memory"), false), (p("unified/job"), true)]);
            assert_eq!(super::least_limit(&groups), Some(2_000_000));
            // v1: 2e6 - (1.5e6 - 5e5); v2: 3e6 - 1e6 (no memory.stat)
            assert_eq!(super::least_room(&groups, None), Some(1_000_000));
            // no cgroup file systems at all: none found, and the room is MemAvailable's
            let empty = tree(&[]);
            assert!(super::groups_in(text, empty.path()).is_empty());
            assert_eq!(super::least_room(&[], Some(42)), Some(42));
        }

        /// A megabyte is granted, more than any machine has is refused, and
        /// the refusal does not stick.
        #[test]
        fn room_is_granted_where_there_is_some() {
            use crate::stack::room_for;
            assert!(room_for(1 << 20));
            assert!(!room_for(1 << 62));
            assert!(room_for(1 << 20));
        }

        /// On Linux the room is known (MemAvailable at least), and no more than
        /// the machine's memory.
        #[test]
        fn the_room_is_known_and_at_most_the_memory() {
            let total = super::field(&std::fs::read_to_string("/proc/meminfo").unwrap(), "MemTotal").unwrap();
            let room = super::room().expect("MemAvailable");
            assert!(room > 0 && room as u64 <= total * 1024, "{room} of {total} kB");
        }
    }
}

/// Maps and unmaps, readable and writable as `stacker` maps its segments, room
/// for a segment of `size` bytes and as much again for the data the recursion
/// allocates on it.
#[cfg(unix)]
fn segment_mappable(size: usize) -> bool {
    let size = 2 * size;
    if !room_for(size) {
        return false;
    }
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
/// now and then, and advising 256 MiB made a recursion 10⁶ deep slower than
/// advising none (see [`HUGE_STACK`]). Advice only: where the kernel ignores
/// it, nothing changes.
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
/// of some 200,000 interpreted calls. Wall time of whole runs advising 256 MiB /
/// 64 MiB / none (2-vCPU Intel Xeon, `defrag` `madvise`; runs of the builds
/// interleaved): a recursion 10⁶ deep (330 MB of stack), means 0.32 / 0.22 /
/// 0.22 s over 20 runs each and 0.37 / 0.20 / 0.22 s over 20 more (90th
/// percentiles 0.39 / 0.24 / 0.23 and 0.60 / 0.21 / 0.23 s); `derivative-R` of
/// a product by recursion 3·10⁵ deep, medians of 30 runs 0.09 / 0.10 / 0.10 s
/// (means 0.11 / 0.15 / 0.11 s: the runs of one stretch of the 64 MiB build's
/// were slow, as runs of each build were at other times); ten recursions 10⁵
/// deep, about 0.07 s each way. The time in the kernel is what varies:
/// compacting memory for huge pages.
pub const HUGE_STACK: usize = 64 << 20;

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
