//! Closure group instances: one heap block per instance, behind a thin pointer.
//!
//! An instance is the group's code plus the captured values. It used to be an
//! `Rc<Inst>` whose `env` was a `Box<[Value]>`: two allocations per closure
//! (and two frees), and two pointers to follow for every captured-variable
//! read. Here the reference count, the length, the group and the values are one
//! block:
//!
//! ```text
//! InstRc ──> [ count | len | group | env[0] | env[1] | ... | env[len-1] ]
//! ```
//!
//! [`InstRc`] is one pointer wide (so [`Value`] stays two words) and derefs to
//! [`Inst`], a dynamically sized struct whose last field is the `[Value]`
//! slice: code reads `inst.group`, `inst.env[k]`, `inst.env.len()` as before.
//! The fat `&Inst` is built from the thin pointer and the length stored in the
//! block (`ptr::slice_from_raw_parts(p, len) as *const Inst`: a slice-tailed
//! struct's metadata is the slice's length).
//!
//! The count is not atomic (like `Rc`, an `InstRc` is neither `Send` nor
//! `Sync`, which the `NonNull` field ensures); there are no weak references.
//!
//! Dropping the last reference drops the captured values through
//! [`super::defer_drop`], as the old `Drop for Inst` did, so that long chains
//! of closures each capturing the previous one do not recurse once per link.

use super::{defer_drop, Value};
use crate::anf::Group;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::rc::Rc;

/// The fixed-size start of an instance's block: what a thin pointer can read
/// without knowing the length.
#[repr(C)]
struct Header {
    /// The number of `InstRc`s pointing here (never 0 while one exists).
    count: Cell<usize>,
    /// The number of captured values (`env.len()`).
    len: usize,
}

/// Everything before the values; used only to compute the block's layout,
/// which must match `Inst`'s (both are `repr(C)` with the same leading fields).
#[repr(C)]
struct Prefix {
    _header: Header,
    _group: Rc<Group>,
}

/// An instance of a closure group: the code plus the captured free variables,
/// in the group's fixed order. Always behind an [`InstRc`] (it is unsized).
#[repr(C)]
pub struct Inst {
    header: Header,
    pub group: Rc<Group>,
    pub env: [Value],
}

/// A counted reference to an [`Inst`]: one pointer, one allocation.
pub struct InstRc {
    ptr: NonNull<Header>,
    // Owns an `Inst` (for drop check), like `Rc<Inst>` would.
    _owns: PhantomData<Inst>,
}

/// The layout of an instance's block with `len` values.
fn layout(len: usize) -> Layout {
    let values = Layout::array::<Value>(len).expect("closure environment too large");
    let (l, _) = Layout::new::<Prefix>().extend(values).expect("closure environment too large");
    l.pad_to_align()
}

/// The (fat) pointer to the instance in the block at `p` with `len` values.
/// Only computes an address: `p` need not be initialised.
#[inline(always)]
fn fat(p: NonNull<Header>, len: usize) -> *mut Inst {
    ptr::slice_from_raw_parts_mut(p.as_ptr().cast::<Value>(), len) as *mut Inst
}

/// The first value's slot in the block at `p` (allocated for `len` values).
#[inline(always)]
fn env_ptr(p: NonNull<Header>, len: usize) -> *mut Value {
    // SAFETY: a place projection through a raw pointer into the allocation
    // (no reference to uninitialised memory is made).
    unsafe { (&raw mut (*fat(p, len)).env).cast::<Value>() }
}

impl InstRc {
    /// An instance capturing `env`.
    pub fn new(group: Rc<Group>, mut env: Vec<Value>) -> InstRc {
        let len = env.len();
        let mut b = InstBuilder::new(group, len);
        // SAFETY: the block has room for `len` values and none is written
        // yet; the values are moved (the vector forgets them: `set_len(0)`).
        unsafe {
            ptr::copy_nonoverlapping(env.as_ptr(), env_ptr(b.ptr, len), len);
            env.set_len(0);
        }
        b.filled = len;
        b.finish()
    }

    /// An instance capturing nothing.
    pub fn empty(group: Rc<Group>) -> InstRc {
        InstBuilder::new(group, 0).finish()
    }

    /// An instance capturing the values of `env`, written in place (no
    /// intermediate vector). Panics if the iterator's length was wrong.
    pub fn from_exact_iter<I>(group: Rc<Group>, env: I) -> InstRc
    where
        I: IntoIterator<Item = Value, IntoIter: ExactSizeIterator>,
    {
        let it = env.into_iter();
        let mut b = InstBuilder::new(group, it.len());
        for v in it {
            b.push(v);
        }
        b.finish()
    }

    /// The number of `InstRc`s pointing to this instance.
    #[inline(always)]
    pub fn strong_count(this: &InstRc) -> usize {
        this.header().count.get()
    }

    /// Whether two references are to the same instance.
    #[inline(always)]
    pub fn ptr_eq(a: &InstRc, b: &InstRc) -> bool {
        a.ptr == b.ptr
    }

    /// The address of the instance (for identity, like `Rc::as_ptr`).
    #[inline(always)]
    pub fn as_ptr(this: &InstRc) -> *const () {
        this.ptr.as_ptr() as *const ()
    }

    /// The instance's group: `inst.group` without building the fat pointer
    /// (which reads the length), for the evaluator's hottest paths.
    #[inline(always)]
    pub fn group(&self) -> &Rc<Group> {
        // SAFETY: the block is initialised and lives while this reference
        // does; the field's address does not depend on the length.
        unsafe { &(*fat(self.ptr, 0)).group }
    }

    /// The number of captured values (without building the fat pointer).
    #[inline(always)]
    pub fn env_len(&self) -> usize {
        self.header().len
    }

    #[inline(always)]
    fn header(&self) -> &Header {
        // SAFETY: the block lives while this reference does.
        unsafe { self.ptr.as_ref() }
    }

    /// Drops the instance's contents and frees the block (the count reached 0).
    #[cold]
    #[inline(never)]
    unsafe fn drop_slow(&mut self) {
        let len = self.env_len();
        let p = fat(self.ptr, len);
        // SAFETY (the caller's): this was the last reference, so the block is
        // ours; each field is read out (moved) exactly once, then freed.
        unsafe {
            ptr::drop_in_place(&raw mut (*p).group);
            let env = env_ptr(self.ptr, len);
            for k in 0..len {
                defer_drop(ptr::read(env.add(k)));
            }
            dealloc(self.ptr.as_ptr().cast::<u8>(), layout(len));
        }
    }
}

impl std::ops::Deref for InstRc {
    type Target = Inst;

    #[inline(always)]
    fn deref(&self) -> &Inst {
        // SAFETY: the block is initialised (only `InstBuilder::finish` makes an
        // `InstRc`) and lives while this reference does; only shared
        // references to it are ever made (the count is a `Cell`).
        unsafe { &*fat(self.ptr, self.env_len()) }
    }
}

impl Clone for InstRc {
    #[inline(always)]
    fn clone(&self) -> InstRc {
        let c = &self.header().count;
        let n = c.get().wrapping_add(1);
        c.set(n);
        // As `Rc`: a count that wrapped (after `mem::forget` in a loop) aborts.
        if n == 0 {
            std::process::abort();
        }
        InstRc { ptr: self.ptr, _owns: PhantomData }
    }
}

impl Drop for InstRc {
    #[inline(always)]
    fn drop(&mut self) {
        let c = &self.header().count;
        let n = c.get() - 1;
        c.set(n);
        if n == 0 {
            // SAFETY: that was the last reference.
            unsafe { self.drop_slow() }
        }
    }
}

/// An instance being built in place: its block is allocated with room for
/// `len` values, which are then pushed in order. Dropped before `finish` (an
/// error or panic while computing a value), it drops what was written and
/// frees the block.
pub struct InstBuilder {
    ptr: NonNull<Header>,
    len: usize,
    filled: usize,
}

impl InstBuilder {
    /// Allocates an instance of `group` with room for `len` values.
    #[inline]
    pub fn new(group: Rc<Group>, len: usize) -> InstBuilder {
        let l = layout(len);
        // SAFETY: `l` is never zero-sized (the prefix is not).
        let raw = unsafe { alloc(l) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else { handle_alloc_error(l) };
        // SAFETY: freshly allocated with the layout of `Inst` with `len` values.
        unsafe {
            ptr.as_ptr().write(Header { count: Cell::new(1), len });
            (&raw mut (*fat(ptr, len)).group).write(group);
        }
        InstBuilder { ptr, len, filled: 0 }
    }

    /// Writes the next value. Panics if all `len` are written already.
    #[inline(always)]
    pub fn push(&mut self, v: Value) {
        assert!(self.filled < self.len, "closure environment overfilled");
        // SAFETY: slot `filled` is in the block and not written yet.
        unsafe { env_ptr(self.ptr, self.len).add(self.filled).write(v) };
        self.filled += 1;
    }

    /// The finished instance. Panics unless all `len` values were pushed.
    #[inline]
    pub fn finish(self) -> InstRc {
        assert!(self.filled == self.len, "closure environment underfilled");
        let ptr = self.ptr;
        std::mem::forget(self);
        let r = InstRc { ptr, _owns: PhantomData };
        debug_assert_eq!(std::mem::size_of_val::<Inst>(&r), layout(r.env_len()).size());
        r
    }
}

impl Drop for InstBuilder {
    fn drop(&mut self) {
        // SAFETY: the group and the first `filled` values were written; they
        // are dropped once, and the block freed with the layout it was allocated with.
        unsafe {
            ptr::drop_in_place(&raw mut (*fat(self.ptr, self.len)).group);
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(env_ptr(self.ptr, self.len), self.filled));
            dealloc(self.ptr.as_ptr().cast::<u8>(), layout(self.len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anf::Origin;
    use num_bigint::BigInt;

    fn group() -> Rc<Group> {
        Group::new(vec![], vec![], vec![], vec![], Origin::Source)
    }

    /// A value whose drops can be counted: the `Rc`'s count goes down by one.
    fn big(probe: &Rc<BigInt>) -> Value {
        Value::Big(probe.clone())
    }

    #[test]
    fn layout_matches_the_struct() {
        let g = group();
        for len in [0usize, 1, 2, 3, 7, 100] {
            let i = InstRc::new(g.clone(), (0..len as i64).map(Value::Int).collect());
            assert_eq!(std::mem::size_of_val::<Inst>(&i), layout(len).size());
            assert_eq!(std::mem::align_of_val::<Inst>(&i), layout(len).align());
            assert_eq!(i.env.len(), len);
            assert_eq!(i.env_len(), len);
            for (k, v) in i.env.iter().enumerate() {
                assert!(matches!(v, Value::Int(x) if *x == k as i64));
            }
        }
        assert_eq!(std::mem::size_of::<InstRc>(), std::mem::size_of::<usize>());
        assert_eq!(std::mem::size_of::<Option<InstRc>>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn clone_and_drop_count() {
        let g = group();
        let probe = Rc::new(BigInt::from(7));
        let i = InstRc::new(g.clone(), vec![big(&probe), Value::Int(1), big(&probe)]);
        assert_eq!(Rc::strong_count(&probe), 3);
        assert_eq!(Rc::strong_count(&g), 2);
        assert_eq!(InstRc::strong_count(&i), 1);
        let j = i.clone();
        let k = j.clone();
        assert_eq!(InstRc::strong_count(&i), 3);
        assert!(InstRc::ptr_eq(&i, &k));
        assert!(Rc::ptr_eq(&k.group, &g));
        drop(i);
        drop(j);
        assert_eq!(InstRc::strong_count(&k), 1);
        assert_eq!(Rc::strong_count(&probe), 3);
        drop(k);
        assert_eq!(Rc::strong_count(&probe), 1);
        assert_eq!(Rc::strong_count(&g), 1);
    }

    #[test]
    fn zero_length() {
        let g = group();
        let i = InstRc::empty(g.clone());
        assert!(i.env.is_empty());
        let j = InstRc::new(g.clone(), Vec::new());
        let k = InstRc::from_exact_iter(g.clone(), std::iter::empty());
        assert_eq!(j.env_len() + k.env_len(), 0);
        assert_eq!(Rc::strong_count(&g), 4);
        drop((i, j, k));
        assert_eq!(Rc::strong_count(&g), 1);
    }

    #[test]
    fn through_values() {
        let g = group();
        let probe = Rc::new(BigInt::from(1));
        let v = Value::Closure(InstRc::from_exact_iter(g.clone(), [big(&probe), big(&probe)]), 0);
        let w = v.clone();
        assert_eq!(Rc::strong_count(&probe), 3);
        drop(v);
        assert_eq!(Rc::strong_count(&probe), 3);
        drop(w);
        assert_eq!(Rc::strong_count(&probe), 1);
        assert_eq!(Rc::strong_count(&g), 1);
    }

    #[test]
    fn builder_dropped_part_way() {
        let g = group();
        let probe = Rc::new(BigInt::from(2));
        let mut b = InstBuilder::new(g.clone(), 3);
        b.push(big(&probe));
        b.push(big(&probe));
        assert_eq!(Rc::strong_count(&probe), 3);
        drop(b);
        assert_eq!(Rc::strong_count(&probe), 1);
        assert_eq!(Rc::strong_count(&g), 1);
    }

    /// An iterator that claims more items than it yields.
    struct Liar(usize);
    impl Iterator for Liar {
        type Item = Value;
        fn next(&mut self) -> Option<Value> {
            self.0 = self.0.checked_sub(1)?;
            Some(Value::Int(0))
        }
    }
    impl ExactSizeIterator for Liar {
        fn len(&self) -> usize {
            self.0 + 1
        }
    }

    #[test]
    fn lying_iterator_panics_cleanly() {
        let g = group();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            InstRc::from_exact_iter(g.clone(), Liar(2))
        }));
        assert!(r.is_err());
        assert_eq!(Rc::strong_count(&g), 1);
        let mut b = InstBuilder::new(g.clone(), 1);
        b.push(Value::Nil);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.push(Value::Nil)));
        assert!(r.is_err());
        drop(b);
        assert_eq!(Rc::strong_count(&g), 1);
    }

    #[test]
    fn long_chain_drops_without_deep_recursion() {
        // Each closure captures the previous one (and a counted value): a
        // recursive drop would need a million native frames. On a small
        // stack, to be sure the drop does not recurse deeply (values are not
        // `Send`, so the thread builds the chain too).
        let t = std::thread::Builder::new().stack_size(256 * 1024).spawn(|| {
            let g = group();
            let probe = Rc::new(BigInt::from(3));
            let n = if cfg!(miri) { 2_000 } else { 1_000_000 };
            let mut v = Value::Nil;
            for _ in 0..n {
                v = Value::Closure(InstRc::from_exact_iter(g.clone(), [v, big(&probe)]), 0);
            }
            assert_eq!(Rc::strong_count(&probe), n + 1);
            assert_eq!(Rc::strong_count(&g), n + 1);
            drop(v);
            assert_eq!(Rc::strong_count(&probe), 1);
            assert_eq!(Rc::strong_count(&g), 1);
        });
        t.unwrap().join().unwrap();
    }
}
