//! Run-time values. Everything is immutable and reference counted; recursive
//! closures are a letrec group instance plus an index, so there are no cycles.

use crate::anf::Group;
use crate::prims::PrimId;
use num_bigint::BigInt;
use std::rc::Rc;

mod inst;
pub use inst::{Inst, InstBuilder, InstRc};

/// A VLAD value. 16 bytes. The variants holding no reference count come first,
/// so that telling them apart (on every clone and drop) is one comparison.
pub enum Value {
    Nil,
    Bool(bool),
    /// An exact integer that fits in a machine word.
    Int(i64),
    Real(f64),
    Prim(PrimId),
    // (the variants above and these two own nothing: see `needs_drop`)
    /// A real under one to [`Tags::MAX`] tags, unboxed: the tagged numbers of
    /// forward and reverse mode (tangents, sensitivities, `*j` reals) cost no
    /// allocation. [`Value::tagged`] and [`Value::peel`] keep the two forms
    /// canonical, so code that builds and takes apart tags through them never
    /// sees the difference.
    TReal(Tags, f64),
    /// The commonest [`Value::Active`], unboxed: a real of tape `.0` (a level
    /// identity below 2^16), node `.1`, whose value is the double `.2` (its
    /// tangent `()`). A tape's reals of such levels and values are always
    /// made so (`ad::tape::reverse_real`); code that meets one treats it as
    /// that `Active` (or boxes it: [`Value::boxed_active`]).
    TapeReal(u16, u32, f64),
    /// An exact integer that does not (always normalised: never fits in `i64`).
    Big(Rc<BigInt>),
    /// An exact rational that is not an integer (always normalised: denominator > 1).
    Rat(Rc<num_rational::BigRational>),
    Pair(Rc<Pair>),
    /// Member `.1` of a closure group instance (a plain lambda is a group of one).
    Closure(InstRc, u32),
    /// A perturbation-, sensitivity- or reverse-tagged value (AD.md). Never a
    /// real under at most [`Tags::MAX`] tags: that is a [`Value::TReal`].
    Tagged(Tag, Rc<Value>),
    /// A forward-mode bundle of a primal and a (perturbation-tagged) tangent.
    Bundle(Rc<(Value, Value)>),
    /// A packed vector of doubles or a row-major matrix (`vec`): a leaf, like a real.
    Vector(Rc<crate::vec::RealVec>),
    /// A pair or closure seen through `zero` and tag operations that have not been
    /// applied yet (AD.md: `zero`, `*j`, `*j-inverse`, `sensitize`... are lazy, so a
    /// sensitivity that is passed along or never touched costs nothing).
    Lazy(Rc<Lazy>),
    /// A reversible procedure (REVERSIBLE.md), run with `call` / `uncall`.
    Rev(Rc<crate::rev::RevProc>),
    /// A real being differentiated on a level of [`crate::ad::tape`] (a dual
    /// number or a tape's node): exists only while the prelude's `jvp` or `vjp`
    /// runs its function on one.
    Active(Rc<Active>),
}

/// A real on level `tape` (a forward level's dual number, with its tangent; or
/// node `node` of a reverse level's tape), whose value (and tangent) is a
/// number or a real of an enclosing level.
pub struct Active {
    pub tape: u32,
    pub node: u32,
    pub value: Value,
    pub tangent: Value,
}

// (40 bytes, 56 with its reference counts: a size class below 64)
const _: () = assert!(std::mem::size_of::<Active>() == 40);

// A value is two words; the unboxed tagged real must not make it bigger.
const _: () = assert!(std::mem::size_of::<Value>() == 16);

impl Clone for Value {
    // By hand and inlined: the evaluator clones a value on every variable read.
    // The derived clone is an out-of-line call whose result is built field by
    // field in a temporary and then copied whole, which stalls the processor.
    #[inline(always)]
    fn clone(&self) -> Value {
        if !self.needs_drop() {
            // SAFETY: nothing to count: a plain copy.
            return unsafe { std::ptr::read(self) };
        }
        match self {
            Value::Nil
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Real(_)
            | Value::TReal(..)
            | Value::TapeReal(..)
            | Value::Prim(_) => {}
            Value::Big(x) => std::mem::forget(Rc::clone(x)),
            Value::Rat(x) => std::mem::forget(Rc::clone(x)),
            Value::Pair(x) => std::mem::forget(Rc::clone(x)),
            Value::Closure(x, _) => std::mem::forget(InstRc::clone(x)),
            Value::Tagged(_, x) => std::mem::forget(Rc::clone(x)),
            Value::Bundle(x) => std::mem::forget(Rc::clone(x)),
            Value::Vector(x) => std::mem::forget(Rc::clone(x)),
            Value::Lazy(x) => std::mem::forget(Rc::clone(x)),
            Value::Rev(x) => std::mem::forget(Rc::clone(x)),
            Value::Active(x) => std::mem::forget(Rc::clone(x)),
        }
        // SAFETY: the reference count (if any) was just incremented, so the
        // bitwise copy is one more owner.
        unsafe { std::ptr::read(self) }
    }
}

/// `ops` applied (innermost first) to `base`, or to `(zero base)` when `zero` is
/// set. `base` is always a pair, a closure, or a `Bundle` whose primal is one of
/// those (a bundle not yet distributed over the aggregate's parts), or a lazy value.
///
/// `base` may itself be lazy: operations on a lazy value wrap it rather than
/// copy its pending operations, and each lazy value remembers its head normal
/// form (`hnf`), so values derived from one lazy value share its expansion.
pub struct Lazy {
    pub base: Value,
    pub zero: bool,
    pub ops: smallvec::SmallVec<[LazyOp; 2]>,
    pub hnf: std::cell::OnceCell<Value>,
    /// Shaped like a pair (otherwise like a closure).
    pub pair: bool,
}

/// A pending operation of a lazy value: a tag operation, taking the primal
/// or tangent of a forward value, or the forward version of a tag operation
/// (what the forward transforms of `sensitize`, `*j`... do to a forward value:
/// `(bundle (t (primal v)) (perturb (t (unperturb (tangent v)))))`). `zero`
/// commutes with all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyOp {
    Tag(Tag),
    Untag(Tag),
    Primal,
    Tangent,
    FTag(Tag),
    FUntag(Tag),
}

/// The tags that wrap non-aggregate values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    Perturbation,
    Sensitivity,
    Reverse,
}

/// The tags around a [`Value::TReal`], outermost first: a count (1 to
/// [`Tags::MAX`]) in the low four bits, then two bits per tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tags(u32);

impl Tags {
    pub const MAX: u32 = 14;

    pub fn one(t: Tag) -> Tags {
        Tags((t.code() << 4) | 1)
    }

    pub fn count(self) -> u32 {
        self.0 & 15
    }

    pub fn outer(self) -> Tag {
        Tag::of_code((self.0 >> 4) & 3)
    }

    /// With `t` added outside (the caller checks `count() < MAX`).
    fn push(self, t: Tag) -> Tags {
        Tags(((self.0 >> 4) << 6) | (t.code() << 4) | (self.count() + 1))
    }

    /// `x` under these tags but the outermost: a real, or a `TReal` again.
    fn inner(self, x: f64) -> Value {
        if self.count() == 1 {
            Value::Real(x)
        } else {
            Value::TReal(Tags(((self.0 >> 6) << 4) | (self.count() - 1)), x)
        }
    }
}

impl Tag {
    fn code(self) -> u32 {
        match self {
            Tag::Perturbation => 0,
            Tag::Sensitivity => 1,
            Tag::Reverse => 2,
        }
    }

    fn of_code(c: u32) -> Tag {
        match c {
            0 => Tag::Perturbation,
            1 => Tag::Sensitivity,
            _ => Tag::Reverse,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tag::Perturbation => "perturbation",
            Tag::Sensitivity => "sensitivity",
            Tag::Reverse => "reverse",
        }
    }
}

/// A cons cell.
pub struct Pair {
    pub car: Value,
    pub cdr: Value,
}

impl Pair {
    /// The car and the cdr, moved out (without the work of `Pair`'s drop,
    /// which has nothing left to do).
    #[inline]
    pub fn into_parts(self) -> (Value, Value) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: each field is read out once and `me` is never dropped, so
        // each value keeps exactly one owner.
        unsafe { (std::ptr::read(&me.car), std::ptr::read(&me.cdr)) }
    }
}

impl Drop for Pair {
    // Deep lists (in either direction) would otherwise be dropped recursively,
    // one native frame per cell. The cdr chain is freed in a loop, pair by
    // pair while each is owned only here (no recursion and no thread-local
    // bookkeeping per pair: the common long list); cars (and a shared or
    // non-pair tail) go through `defer_drop`, which bounds their nesting.
    fn drop(&mut self) {
        // (a number, the commonest part, owns nothing: it is neither moved
        // out nor looked at again)
        if self.car.needs_drop() {
            defer_drop(std::mem::replace(&mut self.car, Value::Nil));
        }
        if !self.cdr.needs_drop() {
            return;
        }
        let Value::Pair(_) = self.cdr else {
            defer_drop(std::mem::replace(&mut self.cdr, Value::Nil));
            return;
        };
        // (each pair of the chain is taken apart in place, its cdr's pointer
        // read out and `()` written over its tag: moving a pair or a value
        // out whole, as `Rc::try_unwrap` and `mem::replace` do, loads 16
        // bytes at once that were often just stored in parts, loads the
        // processor cannot forward from those stores, which stalls it)
        // SAFETY: the count moved out of the cdr, which holds `()` instead.
        let mut p = unsafe { take_pair(&mut self.cdr) };
        loop {
            let Some(q) = Rc::get_mut(&mut p) else {
                // (shared: one owner fewer)
                return;
            };
            if q.car.needs_drop() {
                defer_drop(std::mem::replace(&mut q.car, Value::Nil));
            }
            match q.cdr {
                // SAFETY: as above.
                Value::Pair(_) => p = unsafe { take_pair(&mut q.cdr) },
                // (the pair freed as `p` goes: its parts own nothing now)
                ref rest if !rest.needs_drop() => return,
                _ => {
                    defer_drop(std::mem::replace(&mut q.cdr, Value::Nil));
                    return;
                }
            }
        }
    }
}

/// The pair `v` holds, moved out, `()` written over `v`.
///
/// # Safety
/// `v` must be a `Value::Pair`, whose count the caller takes.
#[inline(always)]
pub(crate) unsafe fn take_pair(v: &mut Value) -> Rc<Pair> {
    let Value::Pair(p) = v else {
        // SAFETY: (the caller's)
        unsafe { std::hint::unreachable_unchecked() }
    };
    // SAFETY: the pair's pointer is read out once; `v` is then overwritten,
    // as `()`, without being dropped.
    unsafe {
        let p = std::ptr::read(p);
        std::ptr::write(v, Value::Nil);
        p
    }
}

/// A list built first element first, one pair per element and nothing else:
/// the elements need not be gathered (in a vector that a long list grows by
/// copying, on memory the system must zero) to be consed from the last.
pub struct ListBuilder {
    head: Value,
    /// The cdr of the last pair (owned through `head`; `()` until `finish`),
    /// or null while the list is empty.
    tail: *mut Value,
}

impl Default for ListBuilder {
    fn default() -> Self {
        ListBuilder::new()
    }
}

/// `Rc::new(make())`, with the value built in its heap cell. `Rc::new(x)`
/// builds `x` on the stack, allocates, then copies it with wide loads; those
/// loads wait for the narrower stores that just built it (a failed
/// store-to-load forwarding: perf showed most of `ListBuilder::push`'s time
/// on that copy). Allocating first lets the fields be stored in place.
#[inline(always)]
pub fn rc_build<T>(make: impl FnOnce() -> T) -> Rc<T> {
    // (`Rc::new` of an uninitialised value copies nothing; `Rc::new_uninit`
    // goes through an out-of-line layout computation)
    let mut cell = Rc::new(std::mem::MaybeUninit::<T>::uninit());
    // (a fresh cell: the only reference to it)
    Rc::get_mut(&mut cell).expect("a new cell").write(make());
    // SAFETY: initialised just above.
    unsafe { cell.assume_init() }
}

impl ListBuilder {
    pub fn new() -> ListBuilder {
        ListBuilder { head: Value::Nil, tail: std::ptr::null_mut() }
    }

    /// Appends an element.
    #[inline(always)]
    pub fn push(&mut self, v: Value) {
        let mut cell = rc_build(|| Pair { car: v, cdr: Value::Nil });
        let cdr: *mut Value = &mut Rc::get_mut(&mut cell).expect("a new pair").cdr;
        self.link(Value::Pair(cell));
        self.tail = cdr;
    }

    /// The list, ending with `last` (`()` for a proper list).
    #[inline]
    pub fn finish(mut self, last: Value) -> Value {
        self.link(last);
        std::mem::replace(&mut self.head, Value::Nil)
    }

    /// Puts `v` where the list ends now.
    #[inline]
    fn link(&mut self, v: Value) {
        if self.tail.is_null() {
            self.head = v;
        } else {
            // SAFETY: `tail` is the cdr of the last pair, a pair made by `push`
            // and reachable only through `head` (which this builder owns and
            // has lent to no one): nothing else reads or writes it, and its
            // heap cell stays where it is while `head` owns it. It holds `()`,
            // so overwriting it leaks nothing.
            unsafe { std::ptr::write(self.tail, v) }
        }
    }
}

/// How deeply drops of aggregates may nest directly before the rest is queued:
/// a few hundred native frames (well inside the evaluator's red zone, which a
/// drop may start at the edge of). An unoptimised build spends about 3 KB of
/// stack a level (some 17 frames: `Rc`, `Pair`, `Lazy`, `OnceCell` drops), so
/// 256 levels overran the 512 KB red zone there (tests/vlad_files.rs crashed
/// in a debug build dropping a deep structure at the bottom of a deep
/// recursion); it nests a quarter as deep.
const DROP_DEPTH: u32 = if cfg!(debug_assertions) { 64 } else { 256 };

thread_local! {
    /// Drops of aggregates nested now (in this thread).
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Aggregates reached beyond `DROP_DEPTH`, dropped by the outermost drop.
    static PENDING: std::cell::RefCell<Vec<Value>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Drops a value without recursing more than `DROP_DEPTH` aggregates deep:
/// aggregates owned only here are dropped directly up to that depth (the
/// common case: one thread-local counter) and queued beyond it, for the
/// outermost call to drop.
#[inline]
fn defer_drop(v: Value) {
    // (every aggregate that can hold a pair: a chain of lazy or tagged values
    // and pairs, as the transforms build over deep data, nests as deep as the
    // data, and was dropped by native recursion)
    let heavy = match &v {
        Value::Pair(p) => Rc::strong_count(p) == 1,
        Value::Closure(i, _) => InstRc::strong_count(i) == 1 && i.env_len() != 0,
        Value::Lazy(l) => Rc::strong_count(l) == 1,
        Value::Tagged(_, t) => Rc::strong_count(t) == 1,
        Value::Bundle(b) => Rc::strong_count(b) == 1,
        _ => false,
    };
    if heavy {
        drop_heavy(v);
    }
}

fn drop_heavy(v: Value) {
    let d = DEPTH.with(|c| c.get());
    if d >= DROP_DEPTH {
        // If the queue is already gone (thread teardown), `v` is dropped right here.
        let _ = PENDING.try_with(|p| p.borrow_mut().push(v));
        return;
    }
    DEPTH.with(|c| c.set(d + 1));
    drop(v);
    if d == 0 {
        // The outermost drop: drop what was queued (which may queue more).
        while let Some(x) = PENDING.try_with(|p| p.borrow_mut().pop()).ok().flatten() {
            drop(x);
        }
    }
    DEPTH.with(|c| c.set(d));
}

impl Value {
    #[inline]
    pub fn cons(car: Value, cdr: Value) -> Value {
        Value::Pair(rc_build(|| Pair { car, cdr }))
    }

    /// `v` under one more tag (unboxed when `v` is a real under few tags).
    #[inline]
    pub fn tagged(tag: Tag, v: Value) -> Value {
        match v {
            Value::Real(x) => Value::TReal(Tags::one(tag), x),
            Value::TReal(ts, x) if ts.count() < Tags::MAX => Value::TReal(ts.push(tag), x),
            v => Value::Tagged(tag, Rc::new(v)),
        }
    }

    /// The outermost tag of a tagged value.
    #[inline]
    pub fn outer_tag(&self) -> Option<Tag> {
        match self {
            Value::Tagged(t, _) => Some(*t),
            Value::TReal(ts, _) => Some(ts.outer()),
            _ => None,
        }
    }

    /// A tagged value's outermost tag and what it wraps.
    #[inline]
    pub fn peel(&self) -> Option<(Tag, Value)> {
        match self {
            Value::Tagged(t, x) => Some((*t, (**x).clone())),
            Value::TReal(ts, x) => Some((ts.outer(), ts.inner(*x))),
            _ => None,
        }
    }

    /// What a value tagged `t` (outermost) wraps.
    #[inline]
    pub fn peel_if(&self, t: Tag) -> Option<Value> {
        match self {
            Value::TReal(ts, x) if ts.outer() == t => Some(ts.inner(*x)),
            Value::Tagged(t2, x) if *t2 == t => Some((**x).clone()),
            _ => None,
        }
    }

    pub fn bundle(p: Value, t: Value) -> Value {
        Value::Bundle(Rc::new((p, t)))
    }

    /// Member `idx` of an instance of `group` capturing `env` (written in place).
    pub fn closure(
        group: Rc<Group>,
        env: impl IntoIterator<Item = Value, IntoIter: ExactSizeIterator>,
        idx: u32,
    ) -> Value {
        Value::Closure(InstRc::from_exact_iter(group, env), idx)
    }

    /// A proper list of the given values.
    pub fn list(items: impl IntoIterator<Item = Value, IntoIter: DoubleEndedIterator>) -> Value {
        items.into_iter().rev().fold(Value::Nil, |acc, v| Value::cons(v, acc))
    }

    /// Drops the value, with no call where it owns nothing (most numbers):
    /// where the compiler cannot tell, a plain `drop` calls the drop glue out
    /// of line for every value.
    #[inline(always)]
    pub fn discard(self) {
        if self.needs_drop() {
            drop(self)
        } else {
            std::mem::forget(self)
        }
    }

    /// Whether dropping this value does anything (it holds a reference count).
    #[inline(always)]
    pub fn needs_drop(&self) -> bool {
        !matches!(
            self,
            Value::Nil
                | Value::Bool(_)
                | Value::Int(_)
                | Value::Real(_)
                | Value::TReal(..)
                | Value::TapeReal(..)
                | Value::Prim(_)
        )
    }

    /// A real on a level (a dual number or a tape's node), boxed or not?
    #[inline(always)]
    pub fn is_active(&self) -> bool {
        matches!(self, Value::Active(_) | Value::TapeReal(..))
    }

    /// An unboxed tape's real as the [`Value::Active`] it stands for; any
    /// other value as it is.
    pub fn boxed_active(self) -> Value {
        match self {
            Value::TapeReal(t, node, p) => Value::Active(rc_build(|| Active {
                tape: t as u32,
                node,
                value: Value::Real(p),
                tangent: Value::Nil,
            })),
            v => v,
        }
    }

    /// Everything except `#f` is true.
    pub fn is_true(&self) -> bool {
        !matches!(self, Value::Bool(false))
    }

    /// Truth of a condition computed by transformed code: strips AD tags first.
    pub fn is_true_stripped(&self) -> bool {
        match self {
            Value::Bool(false) => false,
            Value::Tagged(_, v) => v.is_true_stripped(),
            Value::TReal(..) => true,
            Value::Bundle(b) => b.0.is_true_stripped(),
            _ => true,
        }
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Big(_) | Value::Real(_) | Value::Rat(_))
    }

    pub fn is_procedure(&self) -> bool {
        match self {
            Value::Prim(_) | Value::Closure(..) | Value::Rev(_) => true,
            Value::Lazy(z) => !z.pair,
            _ => false,
        }
    }

    /// Is this a pair (possibly a lazy zero shaped like one)?
    pub fn is_pair(&self) -> bool {
        match self {
            Value::Pair(_) => true,
            Value::Lazy(z) => z.pair,
            _ => false,
        }
    }

    /// Converts a number to `f64` (exact integers rounded).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Big(b) => Some(num_traits::ToPrimitive::to_f64(&**b).unwrap_or(f64::NAN)),
            Value::Real(r) => Some(*r),
            Value::Rat(q) => Some(crate::num::rat_f64(q)),
            _ => None,
        }
    }

    /// What this is under its tags and in its bundles' primals (itself if
    /// none; a [`Value::TReal`] as it is, a real under tags).
    pub fn untagged(&self) -> &Value {
        let mut v = self;
        loop {
            v = match v {
                Value::Tagged(_, x) => x,
                Value::Bundle(b) => &b.0,
                v => return v,
            }
        }
    }

    /// Is this a number under tags or in bundles (a differentiated real)?
    fn wraps_number(&self) -> bool {
        let v = self.untagged();
        matches!(v, Value::TReal(..)) || v.is_number()
    }

    /// A short description of the kind of value, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "the empty list",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Big(_) => "an exact integer",
            Value::Real(_) => "a real",
            Value::Rat(_) => "an exact rational",
            Value::Rev(_) => "a reversible procedure",
            Value::Vector(v) if v.is_matrix() => "a matrix",
            Value::Vector(_) => "a vector",
            Value::Pair(_) => "a pair",
            Value::Prim(_) | Value::Closure(..) => "a procedure",
            Value::Tagged(..) | Value::TReal(..) => match self.outer_tag() {
                Some(Tag::Perturbation) => "a perturbation",
                Some(Tag::Sensitivity) => "a sensitivity",
                // (what a function differentiated by `*j` is given for its real
                // argument: said so, as the printed `(reverse 3.0)` may puzzle)
                _ if self.wraps_number() => "a real under reverse-mode AD",
                _ => "a reverse value",
            },
            Value::Bundle(b) if b.0.wraps_number() => "a real under forward-mode AD",
            Value::Bundle(_) => "a forward (bundled) value",
            Value::Lazy(z) if z.pair => "a pair",
            Value::Lazy(_) => "a procedure",
            Value::Active(_) | Value::TapeReal(..) => "a real",
        }
    }

    /// Pointer identity for reference values, used by memo tables.
    pub fn ptr_id(&self) -> Option<usize> {
        match self {
            Value::Pair(p) => Some(Rc::as_ptr(p) as usize),
            Value::Closure(i, k) => Some(InstRc::as_ptr(i) as usize ^ ((*k as usize) << 48)),
            Value::Tagged(_, v) => Some(Rc::as_ptr(v) as usize),
            Value::Bundle(b) => Some(Rc::as_ptr(b) as usize),
            Value::Big(b) => Some(Rc::as_ptr(b) as usize),
            Value::Lazy(z) => Some(Rc::as_ptr(z) as usize),
            Value::Rat(q) => Some(Rc::as_ptr(q) as usize),
            Value::Rev(r) => Some(Rc::as_ptr(r) as usize),
            Value::Vector(v) => Some(Rc::as_ptr(v) as usize),
            Value::Active(v) => Some(Rc::as_ptr(v) as usize),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ListBuilder, Value};
    use std::rc::Rc;

    /// The elements of a proper list, or `None`.
    fn items(mut v: &Value) -> Option<Vec<i64>> {
        let mut out = Vec::new();
        loop {
            match v {
                Value::Nil => return Some(out),
                Value::Pair(p) => {
                    let Value::Int(k) = p.car else { return None };
                    out.push(k);
                    v = &p.cdr;
                }
                _ => return None,
            }
        }
    }

    #[test]
    fn list_builder_conses_in_order() {
        assert!(matches!(ListBuilder::new().finish(Value::Nil), Value::Nil));
        assert!(matches!(ListBuilder::new().finish(Value::Int(7)), Value::Int(7)));
        let mut b = ListBuilder::new();
        for k in 1..=3 {
            b.push(Value::Int(k));
        }
        assert_eq!(items(&b.finish(Value::Nil)), Some(vec![1, 2, 3]));
        // an improper list: (1 2 . 9)
        let mut b = ListBuilder::new();
        b.push(Value::Int(1));
        b.push(Value::Int(2));
        let Value::Pair(p) = b.finish(Value::Int(9)) else { panic!("a pair") };
        let Value::Pair(q) = &p.cdr else { panic!("a pair") };
        assert!(matches!((&p.car, &q.car, &q.cdr), (Value::Int(1), Value::Int(2), Value::Int(9))));
    }

    /// Dropping a long list frees every pair and releases each element (its
    /// count back to one), stops at a tail another owner shares (which stays
    /// whole), and neither that nor lists nested a million deep in their
    /// cars overflows a small stack.
    #[test]
    fn dropping_lists_releases_their_elements_and_stops_at_shared_tails() {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let elem = Value::cons(Value::Real(1.5), Value::Nil);
                let Value::Pair(e) = &elem else { unreachable!() };
                let mut tail = ListBuilder::new();
                for k in 0..3 {
                    tail.push(Value::Int(k));
                }
                let tail = tail.finish(Value::Nil);
                let mut b = ListBuilder::new();
                for _ in 0..1_000_000 {
                    b.push(elem.clone());
                }
                let list = b.finish(tail.clone());
                assert_eq!(Rc::strong_count(e), 1_000_001);
                drop(list);
                assert_eq!(Rc::strong_count(e), 1);
                assert_eq!(items(&tail), Some(vec![0, 1, 2]));
                let mut nested = Value::Nil;
                for _ in 0..1_000_000 {
                    nested = Value::cons(nested, Value::Int(0));
                }
                drop(nested);
            })
            .unwrap()
            .join()
            .expect("dropped without overflowing the stack");
    }

    /// Pairs nested through lazy, tagged and bundled values (as the
    /// transforms build over deep data) were dropped by native recursion, one
    /// frame chain per level: a debug build's 64 MiB test thread overflowed at
    /// 100,000 levels (tests/vlad/gradient_shapes.vlad).
    #[test]
    fn pairs_nested_through_lazy_tagged_and_bundled_values_drop_on_a_small_stack() {
        use super::{Lazy, Tag};
        // (2 MiB, a default thread's stack: a level here is a few frames more
        // than a plain pair's, and a debug build's frames are large)
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let mut v = Value::Real(1.0);
                for k in 0..300_000 {
                    let inner = match k % 3 {
                        0 => Value::Lazy(Rc::new(Lazy {
                            base: v,
                            zero: false,
                            ops: Default::default(),
                            hnf: Default::default(),
                            pair: true,
                        })),
                        1 => Value::Tagged(Tag::Sensitivity, Rc::new(v)),
                        _ => Value::Bundle(Rc::new((v, Value::Nil))),
                    };
                    v = Value::cons(inner, Value::Nil);
                }
                drop(v);
            })
            .unwrap()
            .join()
            .expect("dropped without overflowing the stack");
    }

    #[test]
    fn list_builder_dropped_unfinished_frees_a_long_list() {
        // (a builder given up half way, as an error in `map`'s function leaves
        // it, owns what it built: dropped without recursing per pair)
        let mut b = ListBuilder::new();
        for k in 0..1_000_000 {
            b.push(Value::Int(k));
        }
        drop(b);
        let mut b = ListBuilder::new();
        for k in 0..1_000_000 {
            b.push(Value::Int(k));
        }
        let l = b.finish(Value::Nil);
        assert_eq!(items(&l).map(|v| (v.len(), v[999_999])), Some((1_000_000, 999_999)));
    }
}
