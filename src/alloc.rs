//! The program's memory allocator (set by `src/main.rs`): mimalloc behind a
//! per-thread cache of small blocks.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// mimalloc, through its plain entry points where the layout allows, with a
/// per-thread cache of small blocks in front. AD workloads allocate and free
/// many small values (pairs, closures, dual numbers, lazy tags); mimalloc is
/// markedly faster at that than the system allocator. Its plain `mi_malloc`
/// aligns every block to 16 bytes or to the block's size, whichever is
/// smaller; only larger alignments take the aligned entry points (which are
/// slower whenever a page's free list runs out). The program (`src/main.rs`)
/// makes it the global allocator; library users (and benchmarks that count
/// allocations) choose their own.
pub struct MiMalloc;

/// What `mi_malloc` guarantees (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// Whether `mi_malloc(size)` is aligned enough for `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// The small blocks a thread freed, kept for its next allocations of the same
/// size class (sizes 1 to 64 bytes, in classes 8 bytes apart), each class a
/// list linked through the blocks themselves. A freed value's block is
/// usually wanted again at once (an operation's result replaces its operand);
/// taking it from here costs a few instructions, against mimalloc's ~45 for a
/// `mi_free` and `mi_malloc` (which must find a block's page from its address:
/// the cache knows the class from the layout Rust passes to `dealloc`). Every
/// block in class `c` came from `mi_malloc((c + 1) * 8)`, so serves any
/// layout of that class (see `small_class`). At most [`CACHED`] blocks a class
/// are kept; further frees go to mimalloc, so a thread holds at most
/// 4096 × (8 + 16 + ... + 64) bytes (1.2 MB) this way. The cache has no
/// destructor (the global allocator may not use thread-local storage that
/// registers one): a thread that ends leaves its cached blocks allocated, at
/// most that much; vlad's values live on one thread, which lasts as long as
/// the process.
struct Cache {
    heads: [*mut Free; CLASSES],
    counts: [u32; CLASSES],
}

/// A cached block: its first word links to the next of its class.
struct Free {
    next: *mut Free,
}

const CLASSES: usize = 8;
const CACHED: u32 = 4096;

thread_local! {
    static CACHE: std::cell::UnsafeCell<Cache> = const {
        std::cell::UnsafeCell::new(Cache { heads: [std::ptr::null_mut(); CLASSES], counts: [0; CLASSES] })
    };
}

/// The cache's size class of a layout (`None`: not cached). A class's blocks
/// are `(c + 1) * 8` bytes from `mi_malloc`, aligned as it aligns that size
/// (see [`PLAIN_ALIGN`]): to 8 at least, which serves a layout aligned to 8
/// or less, and to 16 where the class's size is a multiple of 16, which
/// serves a layout aligned to 16 whose size is a multiple of 16 (its class's
/// size is then that size).
#[inline(always)]
fn small_class(l: Layout) -> Option<usize> {
    let size = l.size();
    let aligned = l.align() <= 8 || (l.align() == PLAIN_ALIGN && size.is_multiple_of(PLAIN_ALIGN));
    (size.wrapping_sub(1) < CLASSES * 8 && aligned).then(|| (size - 1) >> 3)
}

impl MiMalloc {
    /// A block of class `c`: the cache's, or a new one.
    #[inline(always)]
    unsafe fn alloc_small(c: usize) -> *mut u8 {
        let cached = CACHE.with(|cache| {
            // SAFETY: this thread's cache, borrowed nowhere else (nothing
            // below allocates).
            let cache = unsafe { &mut *cache.get() };
            let head = cache.heads[c];
            if !head.is_null() {
                // SAFETY: a cached block, its first word the link written in `dealloc`.
                cache.heads[c] = unsafe { (*head).next };
                cache.counts[c] -= 1;
            }
            head
        });
        if !cached.is_null() {
            return cached as *mut u8;
        }
        mi::mi_malloc((c + 1) << 3) as *mut u8
    }

    /// Frees block `p` of class `c`: into the cache if it has room.
    #[inline(always)]
    unsafe fn dealloc_small(p: *mut u8, c: usize) {
        let kept = CACHE.with(|cache| {
            // SAFETY: as in `alloc_small`.
            let cache = unsafe { &mut *cache.get() };
            if cache.counts[c] >= CACHED {
                return false;
            }
            let block = p as *mut Free;
            // SAFETY: a block of at least 8 bytes, aligned to 8, no longer in use.
            unsafe { (*block).next = cache.heads[c] };
            cache.heads[c] = block;
            cache.counts[c] += 1;
            true
        });
        if !kept {
            mi::mi_free(p as *mut c_void)
        }
    }
}

// SAFETY: every block comes from mimalloc with at least the layout's size and
// alignment (see `plain` and `small_class`), and goes back to it through
// `mi_free`/`mi_realloc*`, or is cached and handed out again for a layout of
// its class.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if let Some(c) = small_class(l) {
            Self::alloc_small(c)
        } else if plain(l.align(), l.size()) {
            mi::mi_malloc(l.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(l.size(), l.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if let Some(c) = small_class(l) {
            let p = Self::alloc_small(c);
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, l.size());
            }
            p
        } else if plain(l.align(), l.size()) {
            mi::mi_zalloc(l.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(l.size(), l.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        match small_class(l) {
            Some(c) => Self::dealloc_small(p, c),
            None => mi::mi_free(p as *mut c_void),
        }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        // SAFETY (of the layout): the caller guarantees `size`, rounded up to
        // `l.align()`, does not overflow.
        let new = Layout::from_size_align_unchecked(size, l.align());
        match (small_class(l), small_class(new)) {
            (Some(a), Some(b)) if a == b => p,
            (None, None) => {
                if plain(l.align(), size) {
                    mi::mi_realloc(p as *mut c_void, size) as *mut u8
                } else {
                    mi::mi_realloc_aligned(p as *mut c_void, size, l.align()) as *mut u8
                }
            }
            // (into or out of the cache's classes: a new block, the contents
            // copied, the old block freed as its layout says)
            _ => {
                let q = self.alloc(new);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(size));
                    self.dealloc(p, l);
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block freed is the next one of its size class handed out (also to
    /// a layout of another size in the class), never one of another class;
    /// `alloc_zeroed` zeroes a reused block; `realloc` keeps the contents
    /// within a class (the same block), into a larger class, and out of the
    /// cached sizes and back.
    #[test]
    fn small_blocks_are_reused_by_class_and_keep_their_contents() {
        let a = MiMalloc;
        let l56 = Layout::from_size_align(56, 8).unwrap();
        let l52 = Layout::from_size_align(52, 4).unwrap();
        let l24 = Layout::from_size_align(24, 8).unwrap();
        unsafe {
            let p = a.alloc(l56);
            assert!(!p.is_null() && (p as usize).is_multiple_of(8));
            std::ptr::write_bytes(p, 0xAB, 56);
            a.dealloc(p, l56);
            // (another class first: not that block)
            let q = a.alloc(l24);
            assert_ne!(q, p);
            // (the same class, another size: that block, zeroed)
            let r = a.alloc_zeroed(l52);
            assert_eq!(r, p);
            assert!((0..52).all(|i| *r.add(i) == 0));
            a.dealloc(r, l52);
            a.dealloc(q, l24);

            // (aligned to 16: a size that is a multiple of 16 is cached, and
            // one that is not is not; both come aligned)
            let l16 = Layout::from_size_align(16, 16).unwrap();
            let l20 = Layout::from_size_align(20, 16).unwrap();
            assert_eq!((small_class(l16), small_class(l20)), (Some(1), None));
            let (p, q) = (a.alloc(l16), a.alloc(l20));
            assert!((p as usize).is_multiple_of(16) && (q as usize).is_multiple_of(16));
            a.dealloc(p, l16);
            a.dealloc(q, l20);

            let l16 = Layout::from_size_align(16, 8).unwrap();
            let p = a.alloc(l16);
            for i in 0..16 {
                *p.add(i) = i as u8;
            }
            // (within the class: the same block)
            let q = a.realloc(p, l16, 12);
            assert_eq!(q, p);
            let l12 = Layout::from_size_align(12, 8).unwrap();
            assert!((0..12).all(|i| *p.add(i) == i as u8));
            // (a larger class, then past the cached sizes, then back)
            let p = a.realloc(p, l12, 40);
            let l40 = Layout::from_size_align(40, 8).unwrap();
            assert!((0..12).all(|i| *p.add(i) == i as u8));
            for i in 12..40 {
                *p.add(i) = i as u8;
            }
            let p = a.realloc(p, l40, 1000);
            let l1000 = Layout::from_size_align(1000, 8).unwrap();
            assert!((0..40).all(|i| *p.add(i) == i as u8));
            let p = a.realloc(p, l1000, 33);
            assert!((0..33).all(|i| *p.add(i) == i as u8));
            a.dealloc(p, Layout::from_size_align(33, 8).unwrap());
        }
    }

    /// At most `CACHED` blocks of a class are kept: the rest go back to
    /// mimalloc (the cache neither grows without bound nor loses blocks).
    #[test]
    fn the_cache_keeps_at_most_its_limit_of_a_class() {
        let a = MiMalloc;
        let l = Layout::from_size_align(40, 8).unwrap();
        let n = CACHED as usize + 100;
        unsafe {
            let blocks: Vec<*mut u8> = (0..n).map(|_| a.alloc(l)).collect();
            for &p in &blocks {
                a.dealloc(p, l);
            }
            CACHE.with(|c| assert_eq!((*c.get()).counts[4], CACHED));
            let again: Vec<*mut u8> = (0..n).map(|_| a.alloc(l)).collect();
            CACHE.with(|c| assert_eq!((*c.get()).counts[4], 0));
            // (the last kept come out first)
            assert_eq!(again[0], blocks[CACHED as usize - 1]);
            for p in again {
                a.dealloc(p, l);
            }
        }
    }
}
