//! Dual numbers and tapes: how the prelude's `jvp` (so `derivative-F`, `hvp`),
//! `gradient-F` (one `jvp` per real of the argument), and `vjp`,
//! `value-and-vjp` and `real-vjp` (so `gradient-R`, `derivative-R`) run when
//! they are called directly (not themselves transformed by an enclosing AD
//! operation).
//!
//! The function runs on its own, untransformed code, with each real of the
//! argument replaced by a [`Value::Active`] real of a new *level* (on a tape,
//! a real whose value is a double is a [`Value::TapeReal`]: the same real,
//! unboxed, made by `reverse_real`). On a forward level an active real
//! carries its tangent, and each scalar primitive computes
//! the result's tangent by its tangent rule (the same arithmetic in the same
//! order as its forward version, [`super::native`]'s `jvp_num`). On a reverse
//! level (a tape) each operation on an active real is recorded (operands and
//! result), and one backward sweep over the tape applies each primitive's
//! cotangent rule, as its backpropagator in the reverse transform does
//! (`vjp_num`). Levels nest in any mix: an active real's value (and tangent)
//! may be active reals of an enclosing level, so the arithmetic of an inner
//! level (and of its backward sweep) is itself differentiated by the outer
//! one; each level has its own identity, so there is no perturbation confusion.
//!
//! This is an optimisation, not a change of value (but for the corners below):
//! whenever the run meets
//! something the tape does not model (an AD primitive other than `zero`, a
//! vector or reversible primitive, input or output: any primitive not marked
//! `tape_ok`; an argument or result that is not made of pairs, `()`, booleans
//! and reals) or fails in any way, the level is discarded and the call runs as
//! the paper's transforms define it (`(*j f)` and the backpropagator; `j*`):
//! the primitives' `Rule::Via` definitions, which are also what any enclosing
//! transform differentiates. Nothing with an effect runs on a tape, so the
//! second run repeats nothing observable; limits (`--max-steps`, `--timeout`,
//! Ctrl-C) stop both. A function whose tape run was declined runs by the
//! transform its next call, then its next 2, 4, ... 1024 after each further
//! decline, before it is tried on a tape again; a run on a tape that succeeds
//! starts the count again (`Declined`). What can differ: the transform applies
//! rules to zeros (the zero tangents of values that do not depend on the
//! argument, the zero sensitivities of values that do not reach the result),
//! which a tape skips. A zero through
//! an inexact operand is inexact, so whether a derivative is exact can differ
//! (a tape gives way where it sees that, `exactness_may_differ`, but not through
//! pairs taken apart, nor for a constant operand's zero tangent in nested
//! forward mode: plain here, a zero of its own level there, see `record`;
//! where it knows the transform's zero reaches a node, as the zero of the
//! primal result a nested `vjp` drops, see `Discard`, it makes the inputs
//! below that node inexact itself instead of giving way, or, under an
//! enclosing level, sweeps the zero through the rules as the transform does); a
//! zero through an infinite operand is NaN where the tape's derivative is a
//! number, and the sign of a zero can differ. And a sum of several
//! sensitivities (or of a nested level's tangent contributions) may be added
//! in another order, which can change its last bits.

use super::native::{self, Formula, Out, StructOp};
use crate::error::{Error, ErrorKind, Result};
use crate::eval::Machine;
use crate::num;
use crate::prims::{self, PrimId};
use crate::value::{Active, ListBuilder, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::rc::Rc;

/// No parent (no tape node: a constant, or a forward level's real).
pub(super) const NONE: u32 = u32::MAX;

/// How many nodes the backward sweep goes through between checks of the limits.
const SWEEP_CHECK_EVERY: usize = 1024;

/// The list (or improper list) `p` heads, rebuilt with `g` of each element and
/// of its final cdr: walked along the spine, so a long list takes no recursion
/// (`g` recurses into the lists nested in it). The first error stops it.
fn map_spine<E>(
    p: &crate::value::Pair,
    g: &mut dyn FnMut(&Value) -> std::result::Result<Value, E>,
) -> std::result::Result<Value, E> {
    let mut items = ListBuilder::new();
    items.push(g(&p.car)?);
    let mut rest = &p.cdr;
    while let Value::Pair(q) = rest {
        items.push(g(&q.car)?);
        rest = &q.cdr;
    }
    let tail = g(rest)?;
    Ok(items.finish(tail))
}

/// Calls `f` on each value of `x` that is not a pair, in order (depth
/// first, cars before cdrs), without recursion or allocation for small
/// trees; stops at the first for which `f` returns false, and returns
/// whether none did.
fn for_each_leaf<'a>(x: &'a Value, mut f: impl FnMut(&'a Value) -> bool) -> bool {
    let mut work: SmallVec<[&Value; 16]> = smallvec::smallvec![x];
    while let Some(v) = work.pop() {
        match v {
            Value::Pair(p) => {
                work.push(&p.cdr);
                work.push(&p.car);
            }
            v => {
                if !f(v) {
                    return false;
                }
            }
        }
    }
    true
}

/// The reals of `x` in order (depth first, cars before cdrs); `None` unless
/// it is made of pairs, `()`, booleans and reals.
fn reals_in_order(x: &Value) -> Option<SmallVec<[&Value; 8]>> {
    let mut reals = SmallVec::new();
    // (a proper list of reals, the commonest, down its spine)
    if let Some(mut l) = flat_list_of_reals(x) {
        while let Value::Pair(p) = l {
            reals.push(&p.car);
            l = &p.cdr;
        }
        return Some(reals);
    }
    let fits = for_each_leaf(x, |v| match v {
        Value::Nil | Value::Bool(_) => true,
        _ if is_real(v) => {
            reals.push(v);
            true
        }
        _ => false,
    });
    fits.then_some(reals)
}

/// How many reals `x` holds; `None` unless it is made of pairs, `()`,
/// booleans and reals (as [`reals_in_order`]).
fn real_count(x: &Value) -> Option<usize> {
    // (a list of atoms, the commonest, in one walk down its spine)
    let (mut l, mut n) = (x, 0);
    while let Value::Pair(p) = l {
        match &p.car {
            Value::Pair(_) => return reals_in_order(x).map(|r| r.len()),
            Value::Nil | Value::Bool(_) => {}
            v if is_real(v) => n += 1,
            _ => return None,
        }
        l = &p.cdr;
    }
    match l {
        Value::Nil | Value::Bool(_) => Some(n),
        v if is_real(v) => Some(n + 1),
        _ => None,
    }
}

/// The index in the stack of the running level `id`, if it runs.
fn running(m: &Machine, id: u32) -> Option<usize> {
    m.tape.stack.iter().rposition(|t| t.id == id)
}

/// The index in the stack of the running level `id`.
fn level(m: &Machine, id: u32) -> Result<usize> {
    running(m, id).ok_or_else(|| decline("a finished level's real"))
}

/// The most levels running at once (nested derivatives); a run deeper gives way
/// to the transform.
const MAX_LEVELS: usize = 1024;

/// The most pairs a run builds of its lazy arguments (a lazy zero of data
/// with shared structure, say, whose expansion may be far larger than the
/// data): past that, the transform, which takes them as they are.
const FORCED_PAIRS: usize = 1 << 16;

/// The deepest nesting (of lists in the car of lists) of an argument or result
/// walked here (recursively, on the evaluator's stack); deeper ones go to the
/// transform, whose walks grow the stack.
const MAX_NESTING: usize = 1000;

/// Is `v` nested at most `MAX_NESTING` deep in the cars of its pairs, and not
/// a large structure whose sharing makes it far larger as a tree? The tape's
/// walks of an argument, tangent, sensitivity, result and cotangent take each
/// pair as often as it is reached, so data with shared structure (a list of `n`
/// pairs each holding the one before twice: 2^n reals as a tree) go to the
/// transform, whose `zero`, `plus` and sensitivities keep the sharing. Data
/// that holds a pair a few times (eight references to one list) stay on the
/// tape, which takes them as their unshared copy: see [`expansion_within`].
fn shallow(v: &Value) -> bool {
    // (a list of atoms, the commonest, in one walk down its spine)
    let mut l = v;
    while let Value::Pair(p) = l {
        if let Value::Pair(_) = p.car {
            return shallow_nested(l);
        }
        l = &p.cdr;
    }
    true
}

/// [`shallow`] of any data. (A list down its spine holds no pair twice: only
/// a pair in a car can be one reached before.) Past
/// `ops::SHARING_WATCHED_AFTER` pairs, a pair reached a second time sends the
/// question to [`expansion_within`].
#[inline(never)]
fn shallow_nested(v: &Value) -> bool {
    let mut work: SmallVec<[(&Value, usize); 16]> = smallvec::smallvec![(v, 0usize)];
    let mut watch = super::ops::SharingWatch::default();
    while let Some((w, d)) = work.pop() {
        if let Value::Pair(p) = w {
            if d > MAX_NESTING {
                return false;
            }
            if watch.again(p) {
                return expansion_within(v);
            }
            work.push((&p.car, d + 1));
            work.push((&p.cdr, d));
        }
    }
    true
}

/// How many times larger than its distinct pairs data with shared structure
/// may be as a tree (each pair counted as often as it is reached), for the
/// tape to take it as it takes its unshared copy. The tape's work on the
/// argument grows with the tree, the transform's with the distinct pairs, but
/// the transform runs the function itself about eight times slower: a function
/// that walks what it is given (`k` references to one list of 10^4 reals,
/// summed: 5.5 times the primal on the tape for every `k` from 4 to 64, 44
/// times by the transform) gains, one that reads a little of a widely shared
/// structure loses, at most in proportion to this.
const EXPANSION_RATIO: usize = 32;

/// [`shallow`] of data with shared structure: its size as a tree (each pair
/// counted as often as it is reached) at most [`EXPANSION_RATIO`] times its
/// distinct pairs, and its nesting within `MAX_NESTING`. Computed in one walk of its distinct
/// pairs, each shared pair's tree size and nesting kept for the next time it
/// is reached.
#[inline(never)]
fn expansion_within(v: &Value) -> bool {
    let mut memo = FxHashMap::default();
    let mut distinct = 0usize;
    match tree_size(v, 0, &mut memo, &mut distinct) {
        Some((size, _)) => size <= distinct.saturating_mul(EXPANSION_RATIO),
        None => false,
    }
}

/// The pairs of `v` as a tree (saturating) and its nesting in the cars of its
/// pairs; `None` if that nesting, below `depth`, passes `MAX_NESTING`.
/// `memo`: the shared pairs (held by more than one value) already sized;
/// `distinct`: a count of the pairs walked. Recursive in the cars only (at
/// most `MAX_NESTING` deep); a list's spine is walked in a loop.
fn tree_size(
    v: &Value,
    depth: usize,
    memo: &mut FxHashMap<*const crate::value::Pair, (usize, usize)>,
    distinct: &mut usize,
) -> Option<(usize, usize)> {
    if depth > MAX_NESTING {
        return None;
    }
    // (down the spine: each pair's car sized, until a leaf or a pair sized before)
    let mut spine: Vec<(&Rc<crate::value::Pair>, usize, usize)> = Vec::new();
    let mut l = v;
    let mut end = (0usize, 0usize);
    while let Value::Pair(p) = l {
        if let Some(&known) = memo.get(&Rc::as_ptr(p)) {
            end = known;
            break;
        }
        *distinct += 1;
        let (size, nesting) = match &p.car {
            car @ Value::Pair(_) => {
                let (s, n) = tree_size(car, depth + 1, memo, distinct)?;
                (s, n + 1)
            }
            _ => (0, 0),
        };
        spine.push((p, size, nesting));
        l = &p.cdr;
    }
    // (back up the spine: the sizes of its tails, kept for the shared pairs)
    let (mut size, mut nesting) = end;
    for (p, car_size, car_nesting) in spine.into_iter().rev() {
        size = size.saturating_add(car_size).saturating_add(1);
        nesting = nesting.max(car_nesting);
        if Rc::strong_count(p) > 1 {
            memo.insert(Rc::as_ptr(p), (size, nesting));
        }
    }
    if depth + nesting > MAX_NESTING {
        return None;
    }
    Some((size, nesting))
}

/// One operation on a tape: `y = f(x)`, whose operands `x` (one or two) are
/// the tape's nodes `parents` (or constants, `NONE`); an input has no formula.
/// The node keeps only the operands and result its formula's cotangent rule
/// reads (`kept_mask`), in order, after those of the nodes before it in one of
/// its tape's stores: unboxed in `reals` when each is a double or a real of the
/// tape's forward level `lift` whose value and tangent are doubles (then its
/// value and tangent, two doubles) or a small exact integer (as a double:
/// `record_doubles`), as values in `vals` otherwise. (The
/// backward sweep finds them by counting back from the stores' ends.) The
/// others are passed to the rule as `0.0`, as before they were stored that
/// way. (Unboxed, a forward level's real no longer keeps its boxed dual alive:
/// the program frees it when it drops it.)
#[derive(Clone, Copy)]
struct Node {
    parents: [u32; 2],
    f: Option<Formula>,
    /// How many operands it has (`ARITY`), and, above, which of them are
    /// exact constants (bit `j + CONST_SHIFT` for operand `j`; for forward
    /// sweeps, `sweep_forward`, as a `+` or `-` keeps no operand), or
    /// `UNKNOWN` where the node does not tell (`push_op`'s, on a tape not
    /// recorded for forward sweeps, or a constant of another kind).
    n: u8,
    /// `UNBOXED` if its kept values are in `reals`, then bit `j` (0, 1: an
    /// operand, 2: the result) set if that one is a dual of level `lift`, and
    /// bit `j + EXACT_SHIFT` if it is an exact integer (an operand); `INEXACT`
    /// if an operand or the result is inexact (see `exactness_may_differ`).
    bits: u8,
}

/// `Node::n`: the operand count.
const ARITY: u8 = 0x03;
/// `Node::n`: where the exact constant operands' bits start.
const CONST_SHIFT: u8 = 2;
/// `Node::n`: the exact constant operands are not noted.
const UNKNOWN: u8 = 0x10;

/// `Node::bits`: the node's kept values are doubles in `reals`.
const UNBOXED: u8 = 0x80;
/// `Node::bits`: an operand or the result is inexact.
const INEXACT: u8 = 0x40;
/// `Node::bits`: which kept values are duals.
const DUALS: u8 = 0x07;
/// `Node::bits`: which kept values are exact integers (kept as doubles), from
/// bit `EXACT_SHIFT` on.
const EXACTS: u8 = 0x38;
const EXACT_SHIFT: u8 = 3;

// (five nodes in the space one took when each kept its values in it)
const _: () = assert!(std::mem::size_of::<Node>() <= 12);

/// A level: the dual numbers of one `jvp` (no tape) or the tape of one `vjp`.
struct Tape {
    id: u32,
    forward: bool,
    /// The forward level whose reals the nodes keep unboxed (`NONE` until one does).
    lift: u32,
    nodes: Chunks<Node>,
    /// The values nodes keep (boxed).
    vals: Chunks<Value>,
    /// The values nodes keep unboxed (a double; a dual's value and tangent).
    reals: Chunks<f64>,
    /// Recorded for forward sweeps (`gradient_by_sweeps`): `push_op`'s nodes
    /// note their exact constants too (see `Node::n`).
    sweeps: bool,
    /// The primal results that runs of `vjp` nested in this one dropped, in
    /// this level's nodes (see [`Discard`]).
    discards: Vec<Discard>,
}

/// A primal result that a nested `vjp` run dropped (`real-vjp`, `vjp`: not
/// `value-and-vjp`), noted on an enclosing tape: the nodes of this tape that
/// its reals are (`y`, all before `from`), and the nodes this tape got while
/// the run swept its own tape and built the cotangent (`from` to `to`). The
/// transform's `vjp` (`prims::REAL_VJP_VIA`, `VJP_VIA`) gives the dropped
/// result the sensitivity `(zero y)` wherever its backward phase runs, which
/// is wherever the cotangent has a sensitivity; the nodes of the run's sweep
/// reach nothing but the cotangent, so where one of them is reached, each node
/// of `y` gets a zero (0.0 where its value is inexact), and the rules of
/// every node below it run on that (see `sweep`). On a tape that a level
/// encloses, `values` holds each real's value (a real of the enclosing
/// levels) to make that zero of, as the transform makes it.
struct Discard {
    from: u32,
    to: u32,
    y: SmallVec<[u32; 2]>,
    values: Vec<Value>,
}

/// An operation on doubles that a tape records with its kept values unboxed
/// (see [`Node`]): `f` on the first `n` operands, whose nodes are `parents`,
/// values `xs` and (bit `j` of `duals` set) enclosing forward level `lift`'s
/// tangents `ds`; bit `j` of `exact` set for an exact constant; the result
/// `y`, with tangent `dy` on level `lift` where an operand is a dual.
struct DoubleOp {
    f: Formula,
    n: usize,
    parents: [u32; 2],
    xs: [f64; 2],
    ds: [f64; 2],
    duals: u8,
    exact: u8,
    lift: u32,
    y: f64,
    dy: Option<f64>,
}

impl Tape {
    /// Records `op` on this tape (level `self.id`): its kept values, then its
    /// node; the result, a real of this level (over a dual of `op.lift`).
    #[inline(always)]
    fn push_doubles(&mut self, op: DoubleOp) -> Value {
        let (node, value) = self.push_doubles_node(op);
        reverse_real(self.id, node, value)
    }

    /// [`Tape::push_doubles`], its result as parts.
    #[inline(always)]
    fn push_doubles_level(&mut self, op: DoubleOp) -> Level {
        let (node, value) = self.push_doubles_node(op);
        reverse_real_level(self.id, node, value)
    }

    /// [`Tape::push_doubles`]' node, and the result's value.
    #[inline(always)]
    fn push_doubles_node(&mut self, op: DoubleOp) -> (u32, Value) {
        let DoubleOp { f, n, parents, xs, ds, mut duals, exact, lift, y, dy } = op;
        let node = self.nodes.len() as u32;
        let kept = kept_mask(f, n);
        for j in 0..n {
            if kept & (1 << j) != 0 {
                self.reals.push(xs[j]);
                if duals & (1 << j) != 0 {
                    self.reals.push(ds[j]);
                }
            }
        }
        let value = match dy {
            Some(dy) => {
                self.lift = lift;
                if kept & 4 != 0 {
                    self.reals.push(y);
                    self.reals.push(dy);
                    duals |= 4;
                }
                forward_real(lift, Value::Real(y), Value::Real(dy))
            }
            None => {
                if kept & 4 != 0 {
                    self.reals.push(y);
                }
                Value::Real(y)
            }
        };
        // (the result is a double, or has one: inexact)
        let bits = UNBOXED | INEXACT | (duals & kept) | ((exact & kept) << EXACT_SHIFT);
        self.nodes.push(Node { parents, f: Some(f), n: n as u8 | exact << CONST_SHIFT, bits });
        (node, value)
    }

    /// Records `f` (`+ - * /`) on two operands, each a double `(value, NONE,
    /// exact)` (an exact one a small integer kept as a double marked exact) or
    /// this tape's real `(value, node, false)`, not both constants: the node
    /// keeping its doubles unboxed, as `push_doubles_node` records it without
    /// duals; the result, a real of this tape.
    #[inline(always)]
    fn push_plain2(&mut self, f: Formula, x: (f64, u32, bool), y: (f64, u32, bool)) -> Level {
        let (node, v) = self.push_plain2_node(f, x, y);
        reverse_parts(self.id, node, v)
    }

    /// [`Tape::push_plain2`]: the node and the result's value.
    #[inline(always)]
    fn push_plain2_node(&mut self, f: Formula, x: (f64, u32, bool), y: (f64, u32, bool)) -> (u32, f64) {
        let ((a, na, exact_a), (b, nb, exact_b)) = (x, y);
        let v = match f {
            Formula::Add => a + b,
            Formula::Sub => a - b,
            Formula::Mul => a * b,
            _ => a / b,
        };
        let kept = kept_mask(f, 2);
        if kept & 1 != 0 {
            self.reals.push(a);
        }
        if kept & 2 != 0 {
            self.reals.push(b);
        }
        if kept & 4 != 0 {
            self.reals.push(v);
        }
        let exact = exact_a as u8 | (exact_b as u8) << 1;
        let node = self.nodes.len() as u32;
        let bits = UNBOXED | INEXACT | ((exact & kept) << EXACT_SHIFT);
        self.nodes.push(Node { parents: [na, nb], f: Some(f), n: 2 | exact << CONST_SHIFT, bits });
        (node, v)
    }

    fn new(id: u32, forward: bool) -> Tape {
        Tape {
            id,
            forward,
            lift: NONE,
            nodes: Chunks::default(),
            vals: Chunks::default(),
            reals: Chunks::default(),
            sweeps: false,
            discards: Vec::new(),
        }
    }
}

/// The tape nodes of a run's inputs: inline while they are few.
type Inputs = SmallVec<[u32; 8]>;

/// How many items a chunk of a tape's store holds.
const CHUNK: usize = 4096;

/// How many emptied tapes `Tapes` keeps for reuse (nested levels each take one).
const SPARE_TAPES: usize = 4;

/// The largest sensitivities' store kept for the next reverse run (entries).
const SPARE_ADJ: usize = 1 << 16;

/// A tape's nodes (or the values they keep), in order: in chunks of `CHUNK`
/// (the first grows as a vector does, and is all a short tape allocates), so
/// that a long tape grows without copying itself and without a doubled
/// vector's unused half. Items are pushed on `last` (never longer than
/// `CHUNK`); `full` holds the chunks before it, each `CHUNK` long.
struct Chunks<T> {
    full: Vec<Vec<T>>,
    last: Vec<T>,
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks { full: Vec::new(), last: Vec::new() }
    }
}

impl<T> Chunks<T> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.full.len() * CHUNK + self.last.len()
    }

    #[inline(always)]
    fn push(&mut self, n: T) {
        if self.last.len() == CHUNK {
            self.start_chunk();
        }
        self.last.push(n);
    }

    /// Sets the full chunk `last` aside and starts a new one.
    #[inline(never)]
    fn start_chunk(&mut self) {
        let full = std::mem::replace(&mut self.last, Vec::with_capacity(CHUNK));
        self.full.push(full);
    }

    /// Empty, keeping the last chunk's room.
    fn clear(&mut self) {
        self.full.clear();
        self.last.clear();
    }

    fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let (chunks, rest) = (len / CHUNK, len % CHUNK);
        if chunks < self.full.len() {
            // (the chunk `len` ends in becomes the last)
            self.full.truncate(chunks + 1);
            self.last = self.full.pop().expect("the chunk len ends in");
        }
        self.last.truncate(rest);
    }

    /// Item `i`.
    #[inline(always)]
    fn get(&self, i: usize) -> &T {
        let c = i / CHUNK;
        if c < self.full.len() {
            &self.full[c][i % CHUNK]
        } else {
            &self.last[i % CHUNK]
        }
    }

    /// The chunk item `i` is in (its first item is item `i / CHUNK * CHUNK`).
    #[inline(always)]
    fn chunk_of(&self, i: usize) -> &[T] {
        let c = i / CHUNK;
        if c < self.full.len() {
            &self.full[c]
        } else {
            &self.last
        }
    }

    /// Items `i` and `i + 1`.
    #[inline(always)]
    fn pair(&self, i: usize) -> (T, T)
    where
        T: Copy,
    {
        if i / CHUNK == self.full.len() {
            let r = &self.last[i % CHUNK..];
            (r[0], r[1])
        } else {
            (*self.get(i), *self.get(i + 1))
        }
    }

    /// The values a node keeps (`kept_mask`), from item `at` on, in their
    /// places (operands, result); the default (0.0) where one is not kept.
    #[inline(always)]
    fn kept(&self, mut at: usize, kept: u8) -> [T; 3]
    where
        T: Copy + Default,
    {
        let mut vs = [T::default(); 3];
        for (j, v) in vs.iter_mut().enumerate() {
            if kept & (1 << j) != 0 {
                *v = *self.get(at);
                at += 1;
            }
        }
        vs
    }

    /// The items with their numbers, last first.
    #[cfg(test)]
    fn iter_rev(&self) -> impl Iterator<Item = (usize, &T)> {
        (0..self.len()).rev().map(|i| (i, self.get(i)))
    }
}

/// How far a tape's stores reach (see `level_len`, `truncate_level`).
#[derive(Clone, Copy)]
pub struct Mark {
    nodes: usize,
    vals: usize,
    reals: usize,
}

/// How to undo a change to [`Tapes::declined`] (the entry a key had) or to
/// the sweeps' sets (a key added to the set of runs under a tape, or not).
enum Undo {
    Declined(usize, Option<Declined>),
    Sweeps(bool, usize),
}

/// What [`Tapes::marks`] takes of each running level, innermost last: its
/// stores' lengths, its dropped results' count, and its `lift`.
pub type LevelMarks = SmallVec<[(Mark, usize, u32); 2]>;

/// A function whose run on a level was declined (see [`Tapes::declined`]):
/// its calls run by the transform while `skip` lasts; each decline after a
/// new try doubles `wait`, the calls it skips, up to [`MAX_DECLINED_WAIT`]
/// (a function that always gives way wastes a partial run a few times per
/// thousand calls; one that gave way once, on a rare branch, returns to
/// the tape at its next call).
#[derive(Clone)]
struct Declined {
    /// (held so that its address is not reused while it is a key)
    _group: Rc<crate::anf::Group>,
    skip: u32,
    wait: u32,
}

/// The most calls a declined function runs by the transform before it is
/// tried on a level again.
const MAX_DECLINED_WAIT: u32 = 1024;

/// The levels of the calls running now (innermost last), and what the
/// machine remembers between calls.
pub struct Tapes {
    /// The running levels, innermost last (boxed: a level is pushed and
    /// popped on every derivative call, and a `Tape` is 160 bytes: moved
    /// whole four times per call, it was ~200 instructions of memcpy).
    #[allow(clippy::vec_box)]
    stack: Vec<Box<Tape>>,
    next_id: u32,
    /// Closure groups (by address, and forward or reverse) whose run on a
    /// level was declined; each group held, so that its address is not
    /// reused by another while its key is here (a program's groups are freed
    /// when it is done: a later one at the same address was taken for it,
    /// and ran by the transform).
    declined: FxHashMap<usize, Declined>,
    /// The compiled `Rule::Via` definitions, run when the tape declines.
    fallbacks: FxHashMap<PrimId, Value>,
    /// Off: every call runs the transform (to compare the two).
    pub enabled: bool,
    /// Calls run on a level, and calls that gave way to the transform.
    pub runs: u64,
    pub declined_runs: u64,
    /// Why the first run that gave way did (for `--metered`).
    pub first_decline: Option<String>,
    /// Emptied tapes whose stores keep their room for the next runs (a run
    /// on a short tape then allocates nothing for it; see `Tapes::recycle`).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Tape>>,
    /// The sensitivities' store of the last reverse run, emptied (kept for
    /// the next, as `spare` keeps tapes).
    spare_adj: Vec<Option<Sens>>,
    /// The sweep's marks of the nodes (see `sweep`), kept for the next run
    /// as `spare_adj` is.
    spare_marks: Vec<u8>,
    /// The forward sweeps' stores of tangents and of their exactness (see
    /// `sweep_doubles`), kept for the next gradient as `spare_adj` is.
    spare_tangents: (Vec<f64>, Vec<u8>),
    /// Runs that gave way because the transform's cotangent could be inexact
    /// where the tape's is exact (see `exactness_may_differ`).
    pub exactness_declined: u64,
    /// Set while `gradient_by_sweeps` records its one run: input and output
    /// fail (and the gradient is then taken by its runs, which do them).
    pub no_io: bool,
    /// Gradients (`gradient-F`) taken by `gradient_by_sweeps`.
    pub swept: u64,
    /// The functions (member of a group, as `declined`) whose gradient
    /// `gradient_by_sweeps` left to the runs: not tried that way again, at
    /// the top level and under forward levels only (`sweeps_declined`), or
    /// under a tape (`sweeps_declined_taped`: there the function meets the
    /// tape's reals, which the sweeps often cannot take, where elsewhere it
    /// meets doubles).
    sweeps_declined: FxHashMap<usize, Rc<crate::anf::Group>>,
    sweeps_declined_taped: FxHashMap<usize, Rc<crate::anf::Group>>,
    /// While compiled code that may give up runs (`journaling` of them,
    /// nested), how to undo each change made to `declined` and the sweeps'
    /// sets since the outermost began (see [`Tapes::begin_journal`]).
    journal: Vec<Undo>,
    journaling: u32,
    /// The error of the last run whose function failed on a level (the
    /// run then gave way): reported instead of the transform's if that
    /// fails at the same place (see [`run`]).
    primal_error: Option<Error>,
}

/// Why a run gives way when its exact cotangent might be the transform's inexact one.
pub const EXACTNESS: &str = "an exact cotangent that the transform's zero sensitivities may make inexact";

impl Default for Tapes {
    fn default() -> Self {
        Tapes {
            stack: Vec::new(),
            next_id: 0,
            declined: FxHashMap::default(),
            fallbacks: FxHashMap::default(),
            enabled: true,
            runs: 0,
            declined_runs: 0,
            first_decline: None,
            exactness_declined: 0,
            spare: Vec::new(),
            spare_adj: Vec::new(),
            spare_marks: Vec::new(),
            spare_tangents: (Vec::new(), Vec::new()),
            no_io: false,
            swept: 0,
            sweeps_declined: FxHashMap::default(),
            sweeps_declined_taped: FxHashMap::default(),
            journal: Vec::new(),
            journaling: 0,
            primal_error: None,
        }
    }
}

impl Tapes {
    /// Whether the innermost level, a tape, may keep duals of level `lift`:
    /// `lift` runs, a forward level, and is the one the tape keeps (if any).
    #[inline(always)]
    fn may_lift(&self, lift: u32) -> bool {
        self.forward_running(lift) && self.stack.last().is_some_and(|t| t.lift == NONE || t.lift == lift)
    }

    /// Is level `id` running, and a forward level?
    #[inline(always)]
    pub(super) fn forward_running(&self, id: u32) -> bool {
        self.stack.iter().rev().find(|l| l.id == id).is_some_and(|l| l.forward)
    }

    /// Is a function running on a level now?
    #[inline(always)]
    pub fn active(&self) -> bool {
        !self.stack.is_empty()
    }

    /// How far each running level's records reach (its stores, the dropped
    /// results noted on it, the forward level its nodes keep unboxed), for
    /// [`Tapes::rewind`]: compiled code that gives up after the evaluator
    /// has computed on these levels for it (`jit::run_loop`) is run again
    /// from where it was entered, which must not find their records twice.
    pub fn marks(&self) -> LevelMarks {
        self.stack
            .iter()
            .map(|t| {
                let len = Mark { nodes: t.nodes.len(), vals: t.vals.len(), reals: t.reals.len() };
                (len, t.discards.len(), t.lift)
            })
            .collect()
    }

    /// Forgets what the running levels recorded since `marks` were taken
    /// (the same levels, none pushed or popped since, their records only
    /// grown: levels that runs in between pushed were popped when those
    /// returned).
    pub fn rewind(&mut self, marks: &LevelMarks) {
        for (t, &(len, discards, lift)) in self.stack.iter_mut().zip(marks.iter()) {
            t.nodes.truncate(len.nodes);
            t.vals.truncate(len.vals);
            t.reals.truncate(len.reals);
            t.discards.truncate(discards);
            t.lift = lift;
        }
    }

    /// Starts noting how to undo the changes to the functions whose runs on
    /// levels (or sweeps) gave way, whose calls then skip them: compiled
    /// code that gives up after the evaluator made calls for it is run again
    /// from where it was entered (`jit::run_loop`), and the evaluator must
    /// make them as it would have (the same steps counted), as if they had
    /// not been made. Gives the mark to pass to [`Tapes::end_journal`].
    pub fn begin_journal(&mut self) -> usize {
        self.journaling += 1;
        self.journal.len()
    }

    /// Stops noting what [`Tapes::begin_journal`] began noting, undoing the
    /// changes made since (`undo`) or keeping them.
    pub fn end_journal(&mut self, mark: usize, undo: bool) {
        if undo {
            while self.journal.len() > mark {
                match self.journal.pop() {
                    Some(Undo::Declined(k, Some(d))) => {
                        self.declined.insert(k, d);
                    }
                    Some(Undo::Declined(k, None)) => {
                        self.declined.remove(&k);
                    }
                    Some(Undo::Sweeps(taped, k)) => {
                        self.sweeps_declined(taped).remove(&k);
                    }
                    None => break,
                }
            }
        }
        self.journaling -= 1;
        if self.journaling == 0 {
            self.journal.clear();
        }
    }

    /// Notes `undo`, where a journal is kept.
    #[inline(always)]
    fn journaled(&mut self, undo: Undo) {
        if self.journaling > 0 {
            self.journal.push(undo);
        }
    }

    /// Notes, where a journal is kept, the entry of `declined` at `k` before
    /// it changes.
    #[inline(always)]
    fn note_declined(&mut self, k: usize) {
        if self.journaling > 0 {
            let old = self.declined.get(&k).cloned();
            self.journal.push(Undo::Declined(k, old));
        }
    }

    /// How many levels are running (nested derivatives on levels).
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Runs `f` with no level running (as on plain values), then the levels
    /// again: for work done on the plain values of active reals. (Levels `f`
    /// starts take identities from 0 again, as at the top level; the next level
    /// after it takes one past both its and the paused levels', so that none is
    /// taken twice.)
    pub fn paused<R>(m: &mut Machine, f: impl FnOnce(&mut Machine) -> R) -> R {
        let levels = std::mem::take(&mut m.tape.stack);
        let next = m.tape.next_id;
        let r = f(m);
        m.tape.stack = levels;
        m.tape.next_id = m.tape.next_id.max(next);
        r
    }

    /// Starts a new innermost level (a tape unless `forward`) with a new
    /// identity, which it returns; `None` if none is left.
    #[inline(always)]
    fn push_level(&mut self, forward: bool) -> Option<u32> {
        if self.stack.is_empty() {
            // (no active real is left from an earlier run: identities start again)
            self.next_id = 0;
        }
        if self.next_id == NONE {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        let level = self.fresh(id, forward);
        self.stack.push(level);
        Some(id)
    }

    /// The functions whose sweeps gave way under a tape (`taped`) or not.
    fn sweeps_declined(&mut self, taped: bool) -> &mut FxHashMap<usize, Rc<crate::anf::Group>> {
        if taped {
            &mut self.sweeps_declined_taped
        } else {
            &mut self.sweeps_declined
        }
    }

    /// A new level: an emptied spare tape if there is one (see `recycle`).
    fn fresh(&mut self, id: u32, forward: bool) -> Box<Tape> {
        match self.spare.pop() {
            Some(mut t) => {
                (t.id, t.forward, t.lift, t.sweeps) = (id, forward, NONE, false);
                t
            }
            None => Box::new(Tape::new(id, forward)),
        }
    }

    /// Keeps a finished level's stores, emptied, for the next levels (at most
    /// `SPARE_TAPES` of them; a chunk at most each: a long tape's other
    /// chunks are freed).
    fn recycle(&mut self, mut t: Box<Tape>) {
        if self.spare.len() < SPARE_TAPES {
            t.nodes.clear();
            t.vals.clear();
            t.reals.clear();
            t.discards.clear();
            self.spare.push(t);
        }
    }

    /// Forgets levels left by an evaluation that did not return (a panic caught
    /// by the REPL): a new top-level evaluation runs on none.
    pub fn clear_levels(&mut self) {
        self.stack.clear();
    }
}

/// The error that makes the tape give way to the transform (never seen by a
/// user: every active real is inside a tape run, which catches it).
pub fn decline(what: &str) -> Error {
    Error::runtime(None, format!("internal: {what} reached a real being differentiated on a tape"))
}

/// Does a primitive's argument list hold an active real (at its top level)?
#[inline]
pub fn any_active(args: &[Value]) -> bool {
    args.iter().any(|a| a.is_active())
}

/// The number under every tape's active real.
pub fn strip(v: &Value) -> Cow<'_, Value> {
    let mut v = v;
    loop {
        match v {
            Value::Active(a) => v = &a.value,
            Value::TapeReal(_, _, p) => return Cow::Owned(Value::Real(*p)),
            _ => return Cow::Borrowed(v),
        }
    }
}

/// A scalar primitive (of formula `f`, computed on numbers by `imp`) applied
/// to arguments of which at least one is active: computed on their values at
/// the innermost level among them; its tangent computed there (forward) or the
/// operation recorded (reverse).
pub fn record(
    m: &mut Machine,
    f: Formula,
    args: &[Value],
    imp: &dyn Fn(&mut Machine, &[Value]) -> Result<Value>,
) -> Result<Value> {
    if let Some(y) = record_doubles(m, f, args) {
        return Ok(y);
    }
    if let Some(t) = m.tape.stack.last().filter(|t| t.forward) {
        let id = t.id;
        if let Some(y) = native::record_forward_lifted(m, id, f, args) {
            return Ok(y);
        }
        if let Some(y) = native::record_forward_rev::<false>(m, id, f, args) {
            return Ok(y);
        }
        if let Some(y) = native::record_forward_lifted2(m, id, f, args) {
            return Ok(y);
        }
    }
    let n = args.len();
    if n > 2 {
        return Err(decline("a primitive of more than two numbers"));
    }
    let mut level = 0;
    for a in args {
        match a {
            Value::Active(x) => level = level.max(x.tape),
            Value::TapeReal(t, ..) => level = level.max(*t as u32),
            _ => {}
        }
    }
    let k = self::level(m, level)?;
    let forward = m.tape.stack[k].forward;
    if forward && k + 1 < m.tape.stack.len() {
        // (an operation of an enclosing forward level, none of whose operands
        // is the inner levels' (forward mode within a tape, say): on doubles
        // as `record_doubles` computes it on the innermost level)
        if let Some(y) = record_doubles_on(m, f, args, level, true) {
            return Ok(y);
        }
        // (or, where its operands' values and tangents are reals of a level
        // enclosing it, as its `record` computes those on the innermost level:
        // the same operations, so the same bits; the inner levels of forward
        // mode nested three deep take this for their tangent rules)
        let lifted = |a: &Value| match a {
            Value::Active(r) if r.tape == level => {
                other_dual(level, &r.value) || other_dual(level, &r.tangent)
            }
            a => other_dual(level, a),
        };
        if args.iter().any(lifted) {
            if let Some(y) = native::record_forward_lifted_enclosing(m, level, f, args) {
                return Ok(y);
            }
            // (or reals of two levels enclosing it: forward mode nested four deep)
            if let Some(y) = native::record_forward_lifted2(m, level, f, args) {
                return Ok(y);
            }
        }
        if args.iter().any(|a| tape_part(level, a)) {
            // (or where they hold an enclosing tape's reals: reverse over
            // forward over forward, as `record` records those on the
            // innermost level)
            if let Some(y) = record_enclosing_forward_rev(m, f, args, level) {
                return Ok(y);
            }
        }
    }
    // the values at this level (and on a forward level the tangents: a constant's
    // is its zero)
    let mut parents = [NONE; 2];
    let mut x = [Value::Nil, Value::Nil];
    let mut d = [Value::Nil, Value::Nil];
    for (i, a) in args.iter().enumerate() {
        match a {
            Value::Active(v) if v.tape == level => {
                parents[i] = v.node;
                x[i] = v.value.clone();
                if forward {
                    d[i] = v.tangent.clone();
                }
            }
            // (a tape's real, unboxed: its level is a tape)
            Value::TapeReal(t, node, p) if *t as u32 == level => {
                parents[i] = *node;
                x[i] = Value::Real(*p);
            }
            _ => {
                x[i] = a.clone();
                if forward {
                    // (a constant here: its zero, plain even where the constant is a
                    // real of an enclosing level, whose zero the transform keeps on
                    // that level: differentiating those zeros there made nested forward
                    // mode half again as slow, and changes only whether a zero is
                    // exact, never a value)
                    d[i] = zero_of(a);
                }
            }
        }
    }
    // (the values may be active on an enclosing level: computed there; on
    // doubles, the primitive's own arithmetic, inline; on an enclosing tape's
    // reals, reverse over reverse, as that tape records the evaluator's)
    let enclosing = match (&x[..n], forward) {
        ([a, b], false) => enclosing_tape_arith2(m, f, a, b),
        _ => None,
    };
    let y = enclosing.or_else(|| match (&x[..n], f) {
        ([Value::Real(a)], _) => native::formula_f64(f, &[*a]).map(Value::Real),
        ([Value::Real(a), Value::Real(b)], _) => native::formula_f64(f, &[*a, *b]).map(Value::Real),
        _ => None,
    });
    let y = match y {
        Some(y) => y,
        None => {
            // (reals of an enclosing forward level: computed as that level's
            // `record` would, unboxed)
            let lifted = match &x[..n] {
                [a] => native::lifted_op(m, f, &[a]),
                [a, b] => native::lifted_op(m, f, &[a, b]),
                _ => None,
            };
            match lifted {
                Some(y) => y,
                None => imp(m, &x[..n])?,
            }
        }
    };
    if forward {
        let dy = native::tangent_rule(m, f, &x[..n], &y, &d[..n])?;
        return Ok(forward_real(level, y, dy));
    }
    let node = push_op(m, k, f, n, parents, x, &y);
    Ok(reverse_real(level, node, y))
}

/// Is operand `a` of an operation on forward level `id` a tape's real, or a
/// real of `id` whose value or tangent is one? (Reverse over forward:
/// `native::record_forward_lifted` declines it.)
pub(super) fn tape_part(id: u32, a: &Value) -> bool {
    let tape = |v: &Value| match v {
        Value::TapeReal(..) => true,
        Value::Active(r) => r.node != NONE,
        _ => false,
    };
    match a {
        Value::Active(r) if r.tape == id && r.node == NONE => tape(&r.value) || tape(&r.tangent),
        _ => tape(a),
    }
}

/// The commonest operation of a level, read in place (no operand cloned; the
/// caller checks that nothing is metered): `op` (`+ - * /`) on two operands,
/// each a real of the innermost level whose value is a double, or a constant
/// (a double, or an exact integer of at most `EXACT_AS_DOUBLE` in magnitude,
/// kept as a double marked exact), at least one of them a real. On a forward
/// level each real's tangent is a double (or, for `*` and `/`, a small exact integer, as
/// `record_doubles` takes it: `gradient-F`'s seed 1; `+` and `-` of one are
/// left to `record_doubles`) and a constant's is 0.0;
/// on a tape the node keeps its doubles unboxed. The same operations in the
/// same order, and the same node, as `record_doubles` (`formula_f64`, then
/// `jvp_num` on `f64`; `kept_mask`), so the same bits. `None` where that
/// does not apply (nothing done).
#[inline(always)]
pub fn level_arith2(tapes: &mut Tapes, op: crate::resolve::Op2, x: &Value, y: &Value) -> Option<Value> {
    if let Some((t, node, v)) = plain_arith2(tapes, op, x, y) {
        return Some(Value::TapeReal(t, node, v));
    }
    level_arith2_parts(tapes, op, x, y).map(Level::into_value)
}

/// A real of a level, as parts: a tape's real whose value is a double (a
/// `Value::TapeReal`'s parts) or a boxed one (a `Value::Active`'s cell).
/// [`level_arith2_parts`] gives its result so, that the caller writes the
/// value where it is to be kept, variant by variant: a value merged from
/// several variants is copied through a temporary whose wide load the
/// processor cannot forward from the narrow stores that built it (a slow
/// stall; see `eval::Machine::arith_slow_put`).
pub enum Level {
    Tape(u16, u32, f64),
    Active(Rc<Active>),
}

impl Level {
    #[inline(always)]
    pub fn into_value(self) -> Value {
        match self {
            Level::Tape(t, node, p) => Value::TapeReal(t, node, p),
            Level::Active(a) => Value::Active(a),
        }
    }
}

/// [`level_arith2_parts`]'s commonest case alone, small enough for the
/// evaluator to try first: `+ - * /` on the innermost level, a reverse one
/// whose identity fits a [`Value::TapeReal`], each operand a real of it whose
/// value is a double or a constant, not both constants; the result's level,
/// node and value. (Where the evaluator calls [`level_arith2_parts`] itself,
/// its larger frame and its result, built and then taken apart, cost this
/// case a third more.)
#[inline(always)]
pub fn plain_arith2(
    tapes: &mut Tapes,
    op: crate::resolve::Op2,
    x: &Value,
    y: &Value,
) -> Option<(u16, u32, f64)> {
    use crate::resolve::Op2;
    let f = match op {
        Op2::Add => Formula::Add,
        Op2::Sub => Formula::Sub,
        Op2::Mul => Formula::Mul,
        Op2::Div => Formula::Div,
        _ => return None,
    };
    let t = tapes.stack.last_mut()?;
    if t.forward || t.id > u16::MAX as u32 {
        return None;
    }
    let (a, b) = (plain_real(x, t.id)?, plain_real(y, t.id)?);
    if a.1 == NONE && b.1 == NONE {
        return None;
    }
    let id = t.id as u16;
    let (node, v) = t.push_plain2_node(f, a, b);
    Some((id, node, v))
}

/// [`level_arith2`], its result as parts.
#[inline]
pub fn level_arith2_parts(tapes: &mut Tapes, op: crate::resolve::Op2, x: &Value, y: &Value) -> Option<Level> {
    use crate::resolve::Op2;
    let f = match op {
        Op2::Add => Formula::Add,
        Op2::Sub => Formula::Sub,
        Op2::Mul => Formula::Mul,
        Op2::Div => Formula::Div,
        _ => return None,
    };
    let t = tapes.stack.last_mut()?;
    let id = t.id;
    if !t.forward {
        // (the commonest operation first: each operand a real of this tape
        // whose value is a double, or a constant, and no duals: the node
        // `push_doubles_node` records for them, recorded here directly)
        if let Some(((a, na, exact_a), (b, nb, exact_b))) =
            plain_real(x, id).and_then(|a| Some((a, plain_real(y, id)?)))
        {
            if na == NONE && nb == NONE {
                return None;
            }
            return Some(t.push_plain2(f, (a, na, exact_a), (b, nb, exact_b)));
        }
        // (no operand of this tape, one an enclosing tape's real: the outer
        // variable's own arithmetic in an inner function, recorded there, as
        // the steps below come to record it)
        let theirs = |v: &Value| matches!(v, Value::TapeReal(t, ..) if *t as u32 != id);
        if (theirs(x) || theirs(y)) && own_node(x, id).is_none() && own_node(y, id).is_none() {
            return tapes_arith2_parts(tapes, f, x, y);
        }
        // (reverse over reverse, the commonest case of it: a real of this tape
        // meeting an enclosing tape's, or one whose value is one; the same as
        // the steps below come to, `nested_tape_arith2`, without their tries
        // of the other cases)
        if let Some(r) = nested_doubles(tapes, id, f, x, y) {
            return r;
        }
        // (a value, its tangent, whether it is a real of the enclosing forward
        // level `lift` (a dual, forward over reverse), its tape node, and
        // whether it is a small exact integer constant, kept as a double marked
        // exact, as `record_doubles` keeps it)
        let mut lift = NONE;
        let mut real = |v: &Value| {
            let (v, node) = match v {
                Value::TapeReal(t, node, p) if *t as u32 == id => {
                    return Some((*p, 0.0, false, *node, false))
                }
                Value::Active(r) if r.tape == id => (&r.value, r.node),
                _ => (v, NONE),
            };
            match v {
                Value::Real(p) => Some((*p, 0.0, false, node, false)),
                Value::Int(k) if node == NONE && k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => {
                    Some((*k as f64, 0.0, false, NONE, true))
                }
                Value::Active(w) if w.node == NONE && w.tape < id && (lift == NONE || lift == w.tape) => {
                    let (Value::Real(p), Value::Real(d)) = (&w.value, &w.tangent) else { return None };
                    lift = w.tape;
                    Some((*p, *d, true, node, false))
                }
                _ => None,
            }
        };
        let (Some((a, da, dual_a, na, exact_a)), Some((b, db, dual_b, nb, exact_b))) = (real(x), real(y))
        else {
            // (reverse over reverse: a real of this tape whose value is an
            // enclosing tape's real, or which meets one; or no real of this
            // tape but an enclosing tape's, recorded there as `record` records
            // it: the outer variable's own arithmetic in an inner function)
            return nested_tape_arith2(tapes, id, f, x, y).or_else(|| tapes_arith2_parts(tapes, f, x, y));
        };
        if na == NONE && nb == NONE {
            // (no operand is the tape's: perhaps an enclosing forward level's operation)
            return if dual_a || dual_b { enclosing_forward2(tapes, id, f, x, y) } else { None };
        }
        let v = native::formula_f64(f, &[a, b])?;
        let duals = dual_a as u8 | (dual_b as u8) << 1;
        let dv = if duals != 0 {
            if !tapes.may_lift(lift) {
                return None;
            }
            Some(tangent2(f, a, b, v, da, db))
        } else {
            None
        };
        let op = DoubleOp {
            f,
            n: 2,
            parents: [na, nb],
            xs: [a, b],
            ds: [da, db],
            duals,
            exact: exact_a as u8 | (exact_b as u8) << 1,
            lift,
            y: v,
            dy: dv,
        };
        return Some(tapes.stack.last_mut()?.push_doubles_level(op));
    }
    // (a value, its tangent, and whether it is a real of the level)
    let exact_ok = scales(f);
    let dual = |v: &Value| match v {
        Value::Active(r) if r.tape == id => match (&r.value, &r.tangent) {
            (Value::Real(p), Value::Real(d)) => Some((*p, *d, true)),
            (Value::Real(p), Value::Int(k)) if exact_ok && k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => {
                Some((*p, *k as f64, true))
            }
            _ => None,
        },
        Value::Real(p) => Some((*p, 0.0, false)),
        // (a small exact integer constant, as `record_doubles` takes it)
        Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => Some((*k as f64, 0.0, false)),
        _ => None,
    };
    let (Some((a, da, ra)), Some((b, db, rb))) = (dual(x), dual(y)) else {
        // (forward over forward: `record`'s `native::record_forward_lifted`)
        if !native::lifted_candidates(id, [x, y]) {
            return if other_dual(id, x) || other_dual(id, y) {
                enclosing_forward2(tapes, id, f, x, y)
            } else {
                // (no real of this level but an enclosing tape's, perhaps:
                // recorded there, as `record` records it)
                let mine = |v: &Value| matches!(v, Value::Active(r) if r.tape == id);
                if mine(x) || mine(y) {
                    None
                } else {
                    tapes_arith2_parts(tapes, f, x, y)
                }
            };
        }
        return native::lifted_arith2(tapes, id, f, [x, y]).map(Level::Active);
    };
    if !(ra || rb) {
        return None;
    }
    dual_op2(id, f, a, b, da, db)
}

/// An operand of [`level_arith2`]'s commonest case on tape `id`: a real of
/// the tape whose value is a double (unboxed), or a double or small exact
/// integer constant; its double, tape node (`NONE` for a constant) and
/// whether it is an exact constant.
#[inline(always)]
fn plain_real(v: &Value, id: u32) -> Option<(f64, u32, bool)> {
    match v {
        Value::TapeReal(t, node, p) if *t as u32 == id => Some((*p, *node, false)),
        Value::Real(p) => Some((*p, NONE, false)),
        Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => Some((*k as f64, NONE, true)),
        _ => None,
    }
}

/// The tangent rule of `f` (`+ - * /`) on doubles: operands `a`, `b`, result
/// `v`, tangents `da`, `db`; the operations of `jvp_num` on `f64`, in its order.
#[inline(always)]
fn tangent2(f: Formula, a: f64, b: f64, v: f64, da: f64, db: f64) -> f64 {
    match f {
        // (+ d1 d2), (- d1 d2)
        Formula::Add => da + db,
        Formula::Sub => da - db,
        // (+ (* d1 x2) (* x1 d2))
        Formula::Mul => da * b + a * db,
        // (/ (- d1 (* y d2)) x2)
        _ => (da - v * db) / b,
    }
}

/// `+ - * /` (`f`) on doubles `a` and `b` with tangents `da` and `db` on forward
/// level `id`: the value by `formula_f64`, the tangent by `tangent2`, the
/// result's cell written in place.
#[inline(always)]
fn dual_op2(id: u32, f: Formula, a: f64, b: f64, da: f64, db: f64) -> Option<Level> {
    let v = native::formula_f64(f, &[a, b])?;
    let dv = tangent2(f, a, b, v, da, db);
    // (the cell's fields written in place: through `forward_real_rc`, which
    // takes the values built, saddle-grad-FF took 0.5% more instructions)
    Some(Level::Active(crate::value::rc_build(|| Active {
        tape: id,
        node: NONE,
        value: Value::Real(v),
        tangent: Value::Real(dv),
    })))
}

/// Is `v` a dual number of a level other than `id`?
#[inline(always)]
pub(super) fn other_dual(id: u32, v: &Value) -> bool {
    matches!(v, Value::Active(w) if w.node == NONE && w.tape != id)
}

/// `native::record_forward_rev` on forward level `level` while levels inside
/// it run (reverse over forward over forward: `record`), out of line, as
/// `native::record_forward_lifted_enclosing` is.
#[inline(never)]
fn record_enclosing_forward_rev(m: &mut Machine, f: Formula, args: &[Value], level: u32) -> Option<Value> {
    native::record_forward_rev::<true>(m, level, f, args)
}

/// `+ - * /` (`f`) on `x` and `y` while level `id` runs (the innermost), where
/// neither is a real of `id` and one or both are reals of one enclosing forward
/// level whose values are doubles and tangents doubles or small exact integers
/// (the others constants: doubles or small exact integers): the operation of
/// that level, as `record` computes it there (its `record_doubles_on` of the
/// enclosing level: the same cases, operations and order, so the same bits),
/// without the primitive's call. `None` where that does not apply. (The saddle's
/// payoff squares the outer level's x in every inner evaluation.)
#[inline(never)]
fn enclosing_forward2(tapes: &Tapes, id: u32, f: Formula, x: &Value, y: &Value) -> Option<Level> {
    let mut lift = NONE;
    // (value, tangent, bit 0: an exact constant, bit 1: an exact tangent)
    let mut part = |v: &Value| match v {
        Value::Active(w) if other_dual(id, v) && (lift == NONE || lift == w.tape) => {
            let Value::Real(p) = w.value else { return None };
            lift = w.tape;
            match w.tangent {
                Value::Real(d) => Some((p, d, 0u8)),
                Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => Some((p, k as f64, 2)),
                _ => None,
            }
        }
        Value::Real(p) => Some((*p, 0.0, 0)),
        Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => Some((*k as f64, 0.0, 1)),
        _ => None,
    };
    let ((a, da, ea), (b, db, eb)) = (part(x)?, part(y)?);
    if lift == NONE || !tapes.forward_running(lift) {
        return None;
    }
    let (exact, exact_tangents) = ((ea & 1) | (eb & 1) << 1, (ea >> 1) | (eb >> 1) << 1);
    if tangent_stays_exact(f, 2, exact_tangents, exact) {
        return None;
    }
    dual_op2(lift, f, a, b, da, db)
}

/// Must an operation on doubles of formula `f` with `n` operands, whose
/// tangents are exact where bit `i` of `exact_tangents` is set and which are
/// exact constants where bit `i` of `exact` is, leave its tangent to the
/// general path, which keeps it exact? ([`record_doubles_on`]'s test, and
/// [`enclosing_forward2`]'s.) Where the tangent rule scales each exact tangent
/// by an operand or the result, each term meets a double (an active operand's
/// value, the result, or a constant's tangent 0.0 where the rule has the
/// constant's exact zero: the same IEEE product) before any sum, where
/// `num::arith` converts it as `as f64` does, and an exact constant's product
/// with an exact tangent is exact both ways (both at most 2^26), so the rule on
/// doubles gives the same numbers. A sum's or difference's tangent is converted
/// so where one of its two tangents is a double; where both are exact (an exact
/// constant's tangent is its exact zero) it stays exact.
#[inline(always)]
fn tangent_stays_exact(f: Formula, n: usize, exact_tangents: u8, exact: u8) -> bool {
    exact_tangents != 0
        && !scales(f)
        && (!matches!(f, Formula::Add | Formula::Sub) || n != 2 || exact_tangents | exact == 3)
}

/// Exact integers that [`record_doubles`] keeps as doubles: small enough that
/// a product of two, and the sum of two such products (`atan`'s rules), is
/// exact both as an integer and as a double.
pub(super) const EXACT_AS_DOUBLE: i64 = 1 << 26;

/// [`record`]'s common cases, on doubles: each operand a real of the innermost
/// level or a constant. On a forward level, the reals' values and tangents are
/// doubles and the constants doubles or small exact integers. On a tape, the
/// reals' values and the constants are those, or reals of one enclosing forward
/// level (forward over reverse) whose values and tangents are doubles, which
/// the node keeps unboxed (see [`Node`]). The same values as the general path
/// (`native::lifted_op`, `native::tangent_rule`): an exact integer meets a
/// double in every operation of the primitive and of its rules (an active
/// operand's value is one), where it is converted as `as f64` converts it
/// (`num::arith`), and a constant's tangent is its zero. `None` where that does
/// not apply (nothing done).
#[inline(always)]
fn record_doubles(m: &mut Machine, f: Formula, args: &[Value]) -> Option<Value> {
    let t = m.tape.stack.last()?;
    record_doubles_on(m, f, args, t.id, t.forward)
}

/// [`record_doubles`] on level `id` (`forward`: a forward level), the innermost
/// or an enclosing forward level.
#[inline(always)]
fn record_doubles_on(m: &mut Machine, f: Formula, args: &[Value], id: u32, forward: bool) -> Option<Value> {
    let n = args.len();
    if n == 0 || n > 2 {
        return None;
    }
    // (each operand's value, tangent on the forward level `lift` if it has one,
    // and tape node)
    let (mut xs, mut ds, mut parents, mut exact, mut duals) = ([0.0; 2], [0.0; 2], [NONE; 2], 0u8, 0u8);
    let mut lift = NONE;
    let (mut active, mut exact_tangents) = (false, 0u8);
    for (i, a) in args.iter().enumerate() {
        let (mut v, mut real) = (a, false);
        if let Value::TapeReal(t, node, p) = a {
            if *t as u32 == id {
                // (a tape's real, unboxed: `id` is a tape)
                parents[i] = *node;
                active = true;
                xs[i] = *p;
                continue;
            }
        }
        if let Value::Active(r) = a {
            if r.tape == id {
                real = true;
                parents[i] = r.node;
                active = true;
                if forward {
                    let Value::Real(x) = r.value else { return None };
                    ds[i] = match r.tangent {
                        Value::Real(d) => d,
                        // (an exact tangent, such as `gradient-F`'s seed 1: see below)
                        Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => {
                            exact_tangents |= 1 << i;
                            k as f64
                        }
                        _ => return None,
                    };
                    xs[i] = x;
                    continue;
                }
                v = &r.value;
            }
        }
        match v {
            Value::Real(x) => xs[i] = *x,
            // (a constant: a tape's real that is an exact integer computes
            // exactly with another)
            Value::Int(k) if !real && k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => {
                xs[i] = *k as f64;
                exact |= 1 << i;
            }
            // (a real of an enclosing forward level, on a tape)
            Value::Active(w)
                if !forward && w.node == NONE && w.tape < id && (lift == NONE || lift == w.tape) =>
            {
                let (Value::Real(x), Value::Real(d)) = (&w.value, &w.tangent) else { return None };
                (xs[i], ds[i]) = (*x, *d);
                duals |= 1 << i;
                lift = w.tape;
            }
            _ => return None,
        }
    }
    if !active || ((forward || duals != 0) && m.meter.is_some()) {
        return None;
    }
    if tangent_stays_exact(f, n, exact_tangents, exact) {
        return None;
    }
    let y = native::formula_f64(f, &xs[..n])?;
    if forward {
        let dy = native::tangent_doubles(m, f, &xs[..n], y, &ds[..n])?;
        return Some(forward_real(id, Value::Real(y), Value::Real(dy)));
    }
    // (a tape: the innermost level's)
    debug_assert!(m.tape.stack.last().is_some_and(|t| t.id == id));
    let dy = if duals != 0 {
        if !m.tape.may_lift(lift) {
            return None;
        }
        Some(native::tangent_doubles(m, f, &xs[..n], y, &ds[..n])?)
    } else {
        None
    };
    let op = DoubleOp { f, n, parents, xs, ds, duals, exact, lift, y, dy };
    Some(m.tape.stack.last_mut()?.push_doubles(op))
}

/// Records on the tape at index `k` of the running levels `y = f(x)` on doubles
/// (the first `n` of `xs`, whose tape nodes are `parents`, `NONE` for a
/// constant; bit `i` of `exact` set for an exact integer constant of at most
/// 2^26 in magnitude, held as its double) as `record_doubles` records such an
/// operation: unboxed, standing for `push_op`'s node of those values (see
/// [`record_doubles`], [`Node`]); its node.
#[allow(clippy::too_many_arguments)]
pub(super) fn push_doubles_at(
    m: &mut Machine,
    k: usize,
    f: Formula,
    n: usize,
    parents: [u32; 2],
    xs: [f64; 2],
    exact: u8,
    y: f64,
) -> u32 {
    let op = DoubleOp { f, n, parents, xs, ds: [0.0; 2], duals: 0, exact, lift: NONE, y, dy: None };
    m.tape.stack[k].push_doubles_node(op).0
}

/// Records `y = f(x)` (the first `n` of `x`, whose tape nodes are `parents`,
/// `NONE` for a constant) on the tape at index `k` of the running levels; its node.
#[inline(always)]
pub(super) fn push_op(
    m: &mut Machine,
    k: usize,
    f: Formula,
    n: usize,
    parents: [u32; 2],
    x: [Value; 2],
    y: &Value,
) -> u32 {
    m.tape.stack[k].push_op(f, n, parents, x, y)
}

impl Tape {
    /// [`push_op`] on this tape.
    fn push_op(&mut self, f: Formula, n: usize, parents: [u32; 2], x: [Value; 2], y: &Value) -> u32 {
        // (the node keeps only the operands and result its cotangent rule reads, so
        // that the others, on an enclosing level above all, can be freed)
        let inexact = is_inexact(y) || x[..n].iter().any(is_inexact);
        // (its constants' exactness, for a forward sweep: see `Node::n`)
        let consts = if self.sweeps { const_exactness(&x[..n], &parents) } else { UNKNOWN };
        let kept = kept_mask(f, n);
        // unboxed if each is a double or a real of the tape's forward level (the
        // first it meets, if none yet) made of doubles
        let mut lift = self.lift;
        // (the values a rule may read: the operands, then the result; bit j of `kept`)
        let vs: [&Value; 3] = [&x[0], &x[1], y];
        let unboxed = (0..3).all(|j| kept & (1 << j) == 0 || unboxable(vs[j], &mut lift));
        let node = self.nodes.len() as u32;
        let mut bits = if inexact { INEXACT } else { 0 };
        if unboxed {
            self.lift = lift;
            bits |= UNBOXED;
            for (j, v) in vs.into_iter().enumerate() {
                if kept & (1 << j) != 0 {
                    bits |= push_unboxed(&mut self.reals, v) << j;
                }
            }
        } else {
            let [x0, x1] = x;
            if kept & 1 != 0 {
                self.vals.push(x0);
            }
            if kept & 2 != 0 {
                self.vals.push(x1);
            }
            if kept & 4 != 0 {
                self.vals.push(y.clone());
            }
        }
        self.nodes.push(Node { parents, f: Some(f), n: n as u8 | consts, bits });
        node
    }
}

/// Which of the constant operands `x` of a node (those whose `parents` are
/// `NONE`) are exact, as `Node::n` notes them (bit `j + CONST_SHIFT`): as an
/// enclosing forward level takes a constant's zero tangent, exact where the
/// constant is an exact number or a dual number or an enclosing tape's real
/// whose value is one; `UNKNOWN` if one is neither that nor a double or such a
/// real whose value is one.
fn const_exactness(x: &[Value], parents: &[u32; 2]) -> u8 {
    let mut bits = 0;
    for (j, v) in x.iter().enumerate() {
        if parents[j] != NONE {
            continue;
        }
        // (a dual's tangent, or a real of an enclosing tape's, is the zero
        // of its value: `native::record_forward_rev`)
        let value = match v {
            Value::Active(a) => &a.value,
            Value::TapeReal(..) => &Value::Real(0.0),
            v => v,
        };
        bits |= match value {
            Value::Int(_) | Value::Big(_) | Value::Rat(_) => 1 << (j as u8 + CONST_SHIFT),
            Value::Real(_) => 0,
            _ => UNKNOWN,
        };
    }
    bits
}

/// Can a node keep `v` unboxed: a double, or a real of forward level `lift`
/// (set by the first such real) whose value and tangent are doubles?
#[inline(always)]
fn unboxable(v: &Value, lift: &mut u32) -> bool {
    match v {
        Value::Real(_) => true,
        Value::Active(a)
            if a.node == NONE
                && matches!((&a.value, &a.tangent), (Value::Real(_), Value::Real(_)))
                && a.tape < NONE
                && (*lift == NONE || *lift == a.tape) =>
        {
            *lift = a.tape;
            true
        }
        _ => false,
    }
}

/// Keeps unboxable `v` in `reals`: 1 if as a dual (its value and tangent).
#[inline(always)]
fn push_unboxed(reals: &mut Chunks<f64>, v: &Value) -> u8 {
    match v {
        Value::Active(a) => {
            if let (Value::Real(p), Value::Real(d)) = (&a.value, &a.tangent) {
                reals.push(*p);
                reals.push(*d);
            }
            1
        }
        Value::Real(r) => {
            reals.push(*r);
            0
        }
        _ => 0,
    }
}

/// The index among the running levels of reverse level `id` (a tape), if it runs.
pub(super) fn reverse_level(m: &Machine, id: u32) -> Option<usize> {
    running(m, id).filter(|&k| !m.tape.stack[k].forward)
}

/// How far the tape at index `k` of the running levels reaches.
pub(super) fn level_len(m: &Machine, k: usize) -> Mark {
    let t = &m.tape.stack[k];
    Mark { nodes: t.nodes.len(), vals: t.vals.len(), reals: t.reals.len() }
}

/// Forgets what the tape at index `k` of the running levels recorded past `mark`.
pub(super) fn truncate_level(m: &mut Machine, k: usize, mark: Mark) {
    let t = &mut m.tape.stack[k];
    t.nodes.truncate(mark.nodes);
    t.vals.truncate(mark.vals);
    t.reals.truncate(mark.reals);
}

/// A real of reverse level `id`: tape node `node`, of value `value`.
#[inline(always)]
pub(super) fn reverse_real(id: u32, node: u32, value: Value) -> Value {
    match value {
        Value::Real(p) if id <= u16::MAX as u32 => Value::TapeReal(id as u16, node, p),
        value => {
            Value::Active(crate::value::rc_build(|| Active { tape: id, node, value, tangent: Value::Nil }))
        }
    }
}

/// [`reverse_real`] of a double, as parts (as [`reverse_real_level`] makes
/// them: written for a double, the commonest tape operation's code is
/// shorter: through `reverse_real_level`, product-R and XOR took 1.3–1.4% more
/// instructions).
#[inline(always)]
fn reverse_parts(id: u32, node: u32, v: f64) -> Level {
    if id <= u16::MAX as u32 {
        Level::Tape(id as u16, node, v)
    } else {
        Level::Active(crate::value::rc_build(|| Active {
            tape: id,
            node,
            value: Value::Real(v),
            tangent: Value::Nil,
        }))
    }
}

/// [`reverse_real`], as parts. (Apart, not `reverse_real` made of it: through
/// [`Level::into_value`] the reverse levels' other callers took 0.7–1.4% more
/// instructions.)
#[inline(always)]
fn reverse_real_level(id: u32, node: u32, value: Value) -> Level {
    match value {
        Value::Real(p) if id <= u16::MAX as u32 => Level::Tape(id as u16, node, p),
        value => {
            Level::Active(crate::value::rc_build(|| Active { tape: id, node, value, tangent: Value::Nil }))
        }
    }
}

/// `Node::kept` of a node of formula `f` with `n` operands: which operands
/// (bits 0, 1) and whether the result (bit 2) its cotangent rule reads
/// (`native::vjp_num`).
#[inline(always)]
fn kept_mask(f: Formula, n: usize) -> u8 {
    let all = match f {
        Formula::Add | Formula::Sub => 0,
        Formula::Mul | Formula::Atan => 3,
        Formula::Div => 6,
        Formula::Sqrt | Formula::Exp => 4,
        Formula::Log | Formula::Sin | Formula::Cos => 1,
        Formula::Zero | Formula::Struct(_) => 7,
    };
    all & [4, 5, 7][n.min(2)]
}

/// The formula of scalar primitive `p`, if it has a derivative rule that a
/// level applies (not a comparison).
pub fn scalar_formula(p: PrimId) -> Option<Formula> {
    native::formula_of(p).filter(|f| !matches!(f, Formula::Zero | Formula::Struct(_)))
}

/// What a call of the prelude's reverse-mode entry points asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// `real-vjp`: the gradient of a function returning a real (seed 1).
    RealVjp,
    /// `vjp`: the cotangent of the argument for a given sensitivity.
    Vjp,
    /// `value-and-vjp`: the result and that cotangent.
    ValueAndVjp,
    /// `jvp`: the tangent of the result for a given tangent of the argument.
    Jvp,
}

/// `%real-vjp`, `%vjp`, `%value-and-vjp` called directly: on a tape where it
/// can be, by the transform (`via`, the primitive's definition) otherwise.
pub fn run(m: &mut Machine, want: Want, args: &[Value]) -> Result<Value> {
    // (the derivative's name for its errors, and the primitive's)
    let (who, name) = match want {
        Want::RealVjp => ("derivative-R/gradient-R", "%real-vjp"),
        Want::Vjp => ("vjp", "%vjp"),
        Want::ValueAndVjp => ("value-and-vjp", "%value-and-vjp"),
        Want::Jvp => ("jvp/derivative-F", "%jvp"),
    };
    check_function(who, &args[0])?;
    m.tape.primal_error = None;
    if let Some(v) = try_tape(m, want, args)? {
        m.tape.runs += 1;
        return Ok(v);
    }
    by_transform(m, name, args)
}

/// The error to report when a function failed on a level and then by the
/// transform (`e`): the transform's, as a run on a level gives the same
/// errors as the transform, but for a list primitive's misuse. There the
/// level ran the primitive itself, whose message says what is wrong
/// ("list-ref: index 5 is past the end of a list of 2 elements"), and the
/// transform its definition (`Rule::Via`), which failed at the same place
/// saying less ("map: expected a list, but it ends in 2.0 (a real), not ()",
/// traced through the definition's loops), or (`length`, whose versions apply it to
/// the transformed list: `Rule::Predicate`) the primitive itself, whose
/// message shows the transformed value (`(reverse 1.0)`), or (`list-ref`,
/// whose versions apply it to the untagged list: `Rule::Element`) the primitive itself, traced
/// through its transformed versions: the level's error (`on_tape`) then.
fn same_error(e: Error, on_tape: Option<Error>) -> Error {
    let said_by = |msg: &str, name: &str| msg.strip_prefix(name).is_some_and(|rest| rest.starts_with(": "));
    let list_prim = |msg: &str| {
        prims::prims().iter().find(|p| {
            matches!(p.rule, prims::Rule::Via { .. } | prims::Rule::Predicate | prims::Rule::Element { .. })
                && !p.name.starts_with('%')
                && said_by(msg, p.name)
        })
    };
    match on_tape {
        Some(t)
            if e.kind == ErrorKind::Runtime
                && t.kind == ErrorKind::Runtime
                && t.span.is_some()
                && t.span == e.span
                && list_prim(&t.message).is_some_and(|p| {
                    e.message.starts_with("pattern mismatch") || said_by(&e.message, p.name)
                }) =>
        {
            t
        }
        _ => e,
    }
}

/// The error of `who` (a derivative) given `f` to differentiate where `f` is
/// plainly not a procedure (data, seen through any tags): it was reported as
/// the application of the transformed value (`cannot apply (reverse 5)`).
fn check_function(who: &str, f: &Value) -> Result<()> {
    let core = f.untagged();
    let data = matches!(
        core,
        Value::Nil
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Big(_)
            | Value::Rat(_)
            | Value::Real(_)
            | Value::TReal(..)
            | Value::TapeReal(..)
            | Value::Active(_)
            | Value::Pair(_)
            | Value::Vector(_)
    ) || matches!(core, Value::Lazy(z) if z.pair);
    if data {
        return Err(Error::runtime(
            None,
            format!(
                "{who}: expected a procedure to differentiate, got {} ({})",
                crate::print::brief(f, 60),
                f.kind_name()
            ),
        ));
    }
    Ok(())
}

/// Primitive `name` on `args` by its `Rule::Via` definition (the transform),
/// counted as a call that gave way; its error as [`same_error`] chooses, with
/// the error of the run on a level that gave way, if there was one.
fn by_transform(m: &mut Machine, name: &str, args: &[Value]) -> Result<Value> {
    let on_tape = m.tape.primal_error.take();
    m.tape.declined_runs += 1;
    let p = prims::lookup(name).expect("the tape's primitives");
    let via = fallback(m, p)?;
    let arg = args.iter().rev().cloned().reduce(|acc, v| Value::cons(v, acc)).unwrap_or(Value::Nil);
    m.apply_value(via, arg, None).map_err(|e| same_error(e, on_tape))
}

/// `((gradient-F f) x)` called directly: one run on a forward level per real of
/// `x` (in order), along the one-hot tangent the prelude's walk builds (1 there,
/// the zero of every other real); by the transform where any run gives way.
pub fn gradient_forward(m: &mut Machine, args: &[Value]) -> Result<Value> {
    check_function("gradient-F", &args[0])?;
    let x = super::ops::force(m, &args[1])?;
    m.tape.primal_error = None;
    if let Some(g) = gradient_runs(m, &args[0], &x)? {
        m.tape.runs += 1;
        return Ok(g);
    }
    by_transform(m, "%gradient-F", args)
}

/// `(%jvp-units f x)` called directly (`jacobian-F`, `hessian`): `(jvp f x u)`
/// for each unit vector `u` of the list `x`, in order (`prims::JVP_UNITS_VIA`).
/// Where `x` is a list of at least two reals and `f` returns a real or a list
/// of reals, from one run recorded on a tape and swept forward once per real
/// of `x` (`gradient_by_sweeps`: the jvps' tangents, exact where theirs are);
/// otherwise, or where the sweeps give way, by its definition, whose `jvp`s
/// run on levels as they can.
pub fn jvp_units(m: &mut Machine, args: &[Value]) -> Result<Value> {
    check_function("jacobian-F", &args[0])?;
    let (f, x) = (&args[0], super::ops::force(m, &args[1])?);
    let n = flat_list_of_reals(&x).map_or(0, |l| list_items(l).count());
    if m.tape.enabled {
        m.tape.primal_error = None;
        if let Some(cols) = swept(m, f, &x, n, true)? {
            m.tape.runs += 1;
            return Ok(Value::list(cols));
        }
    }
    let p = prims::lookup("%jvp-units").expect("the tape's primitives");
    let via = fallback(m, p)?;
    m.apply_value(via, Value::cons(f.clone(), x), None)
}

/// The gradient by forward runs, or `None` where one gives way.
fn gradient_runs(m: &mut Machine, f: &Value, x: &Value) -> Result<Option<Value>> {
    if !m.tape.enabled || !shallow(x) {
        return Ok(None);
    }
    let Some(n) = real_count(x) else { return Ok(None) };
    if let Some(ds) = swept(m, f, x, n, false)? {
        return Ok(Some(fill(x, ds, n)));
    }
    let mut ds = Vec::with_capacity(n);
    for i in 0..n {
        // (the one-hot tangent is not built: the activation makes it, `activate_one_hot`)
        match try_tape_with(m, Want::Jvp, &[f.clone(), x.clone()], Some(i))? {
            // (gradient-F's %real-derivative: the function must return a real)
            Some(d) if is_real(&d) => ds.push(d),
            _ => return Ok(None),
        }
    }
    Ok(Some(fill(x, ds, n)))
}

/// [`gradient_by_sweeps`] of `f` at `x` (`n` reals), where the sweeps are
/// tried: `n` at least 2, [`sweeps_apply`], and `f` not one whose sweeps gave
/// way before (a function whose sweeps were lost is not recorded for them
/// again: the run would be lost again, most likely). `None` where the runs
/// take it.
fn swept(m: &mut Machine, f: &Value, x: &Value, n: usize, units: bool) -> Result<Option<Vec<Value>>> {
    let key = group_key(f, Want::Jvp);
    let taped = m.tape.stack.iter().any(|t| !t.forward);
    if n < 2 || !sweeps_apply(m) || key.is_some_and(|k| m.tape.sweeps_declined(taped).contains_key(&k)) {
        return Ok(None);
    }
    match gradient_by_sweeps(m, f, x, n, units)? {
        Swept::Done(ds) => {
            m.tape.swept += 1;
            return Ok(Some(ds));
        }
        Swept::Lost => {
            if let (Some(k), Value::Closure(inst, _)) = (key, f) {
                if m.tape.sweeps_declined(taped).insert(k, inst.group.clone()).is_none() {
                    m.tape.journaled(Undo::Sweeps(taped, k));
                }
            }
        }
        // (nothing run: the next call, on other inputs, may suit)
        Swept::Unfit => {}
    }
    Ok(None)
}

/// Whether `gradient_by_sweeps` is tried: with nothing metered (the runs'
/// operations are what `--metered` counts). Under an enclosing tape too: a
/// tangent that depends on that tape's reals is one whose rule reads a value
/// that is one (a kept operand or result: kept boxed, so the sweeps give way)
/// or an input that is one (`gradient_by_sweeps` gives way before the run);
/// the tangents the sweeps compute from doubles alone are constants to it, as
/// the runs' are.
fn sweeps_apply(m: &Machine) -> bool {
    m.tape.stack.len() < 63 && m.meter.is_none()
}

/// What [`gradient_by_sweeps`] did.
enum Swept {
    /// The tangents, one per real of `x`, in order.
    Done(Vec<Value>),
    /// `f` ran on the tape, but the sweeps gave way (its run was lost).
    Lost,
    /// Nothing was run: the inputs do not suit the sweeps.
    Unfit,
}

/// Why a run recorded for forward sweeps stops at input or output.
pub const NO_IO: &str = "input or output while a gradient-F is recorded once for its forward sweeps";

/// `gradient-F`'s `n` forward runs (`gradient_runs`) done by one: `f` run
/// once on a tape, which is then swept forward once per real of `x`, each
/// node's tangent by the primitive's tangent rule on the numbers the node
/// keeps (`native::jvp_num` on `L1`s: a double with its tangent on the
/// enclosing forward level the tape keeps, as a forward level over that one
/// computes it: `native::lifted_arith2` and the `L1` path of
/// `record_forward_lifted`), so the same tangents, run by run, with the
/// interpreter's work done once. Tangents are kept exact as the forward runs
/// keep them: the seed 1 and an exact real's zero are exact, and a sum or
/// difference of exact tangents is (an exact constant's zero tangent is
/// exact); any other rule meets a double. `None` (nothing done but the run)
/// wherever that does not hold: a node keeping a boxed value or of another
/// kind (`zero`, a vector, a nested level's), a sum with a constant of unknown
/// exactness meeting an exact tangent, input or output in the run (`NO_IO`),
/// a result that is not a real of the tape, an error.
fn gradient_by_sweeps(m: &mut Machine, f: &Value, x: &Value, n: usize, units: bool) -> Result<Swept> {
    use native::L1;
    // (each input's tangent when it is not the one seeded: its zero, as
    // `activate_one_hot` makes it (`zero_active`), or for `units` exact 0, as
    // `%unit` makes it; and whether exact)
    let Some(reals) = reals_in_order(x) else { return Ok(Swept::Unfit) };
    let mut zeros: SmallVec<[(L1, bool); 8]> = SmallVec::with_capacity(n);
    // (the enclosing reverse level whose reals are among the inputs, if any:
    // then the sweeps compute on its tape, `sweep_forward_rev`)
    let mut outer: Option<u32> = None;
    let mut duals = false;
    for &v in &reals {
        let tape = match v {
            Value::TapeReal(t, ..) => Some(*t as u32),
            Value::Active(a) if a.node != NONE && matches!(a.value, Value::Real(_) | Value::Int(_)) => {
                Some(a.tape)
            }
            _ => None,
        };
        if let Some(t) = tape {
            if outer.is_some_and(|o| o != t) || reverse_level(m, t).is_none() {
                return Ok(Swept::Unfit);
            }
            outer = Some(t);
            zeros.push((L1 { p: 0.0, t: None }, false));
            continue;
        }
        zeros.push(match v {
            Value::Int(_) => (L1 { p: 0.0, t: None }, true),
            Value::Real(_) => (L1 { p: 0.0, t: None }, false),
            Value::Active(a)
                if a.node == NONE && matches!((&a.value, &a.tangent), (Value::Real(_), Value::Real(_))) =>
            {
                duals = true;
                (L1 { p: 0.0, t: Some(0.0) }, false)
            }
            _ => return Ok(Swept::Unfit),
        });
    }
    if duals && outer.is_some() {
        return Ok(Swept::Unfit);
    }
    if units {
        zeros.iter_mut().for_each(|z| *z = (L1 { p: 0.0, t: None }, true));
    }
    let Some(id) = m.tape.push_level(false) else { return Ok(Swept::Unfit) };
    m.tape.stack.last_mut().expect("the level pushed").sweeps = true;
    let mut inputs = Inputs::new();
    let mut bools = false;
    let xa = activate(m, x, id, &mut inputs, &mut bools);
    let no_io = std::mem::replace(&mut m.tape.no_io, true);
    let r = match xa {
        Some(xa) => m.apply_value(f.clone(), xa, None).map(Some),
        None => Ok(None),
    };
    m.tape.no_io = no_io;
    let tape = m.tape.stack.pop().expect("the level pushed above");
    let y = match r {
        Ok(Some(y)) => Some(y),
        Ok(None) => None,
        Err(e) if e.kind == ErrorKind::Limit => {
            m.tape.recycle(tape);
            return Err(e);
        }
        Err(_) => None,
    };
    // (the result's reals: nodes of the level, or constants, whose tangent is
    // their zero; `gradient-F`'s must be one real of the level)
    let own = |v: &Value| own_node(v, id).map(|n| n as usize);
    let outs: Option<SmallVec<[Option<usize>; 4]>> = y.as_ref().and_then(|y| match (units, y) {
        (false, y) => Some(smallvec::smallvec![Some(own(y)?)]),
        (true, Value::Pair(_)) => flat_list_of_reals(y).map(|l| list_items(l).map(own).collect()),
        (true, y) => is_real(y).then(|| smallvec::smallvec![own(y)]),
    });
    let ts = outs.as_ref().and_then(|outs| {
        let nodes: SmallVec<[usize; 4]> = outs.iter().flatten().copied().collect();
        match outer {
            Some(outer) => sweep_forward_rev(m, &tape, &inputs, &reals, &nodes, Some(outer), units),
            None if duals => sweep_forward(m, &tape, &inputs, &zeros, &nodes),
            None => sweep_forward(m, &tape, &inputs, &zeros, &nodes).or_else(|| {
                // (a node keeping a real of an enclosing tape, as a function
                // closing over one keeps it: swept on the innermost tape; or
                // keeping an exact integer: as numbers)
                let innermost = m.tape.stack.iter().rev().find(|t| !t.forward).map(|t| t.id);
                sweep_forward_rev(m, &tape, &inputs, &reals, &nodes, innermost, units)
            }),
        }
    });
    m.tape.recycle(tape);
    match (ts, outs, y) {
        (Some(ts), _, _) if !units => Ok(Swept::Done(ts)),
        (Some(ts), Some(outs), Some(y)) => Ok(Swept::Done(columns(m, ts, &outs, &y, n)?)),
        _ => Ok(Swept::Lost),
    }
}

/// [`gradient_by_sweeps`]' columns for `%jvp-units`: in each of `n`
/// directions, the tangent of the result `y` (a real's, or the list of its
/// reals'), from the tangents `ts` of its reals that are nodes (`outs`,
/// direction by direction), a constant's its zero, as `tangent_of` gives the
/// runs'.
#[inline(never)]
fn columns(
    m: &mut Machine,
    ts: Vec<Value>,
    outs: &[Option<usize>],
    y: &Value,
    n: usize,
) -> Result<Vec<Value>> {
    let mut cols = Vec::with_capacity(n);
    let mut ts = ts.into_iter();
    let items: SmallVec<[&Value; 8]> =
        if is_real(y) { smallvec::smallvec![y] } else { list_items(y).collect() };
    for _ in 0..n {
        let mut col: SmallVec<[Value; 8]> = SmallVec::with_capacity(items.len());
        for (v, node) in items.iter().zip(outs) {
            col.push(match node {
                Some(_) => ts.next().expect("a tangent per node"),
                None => zero_active(m, v)?,
            });
        }
        // (a real's column is its one tangent, a list's the list of them)
        cols.push(if is_real(y) { col.pop().expect("a real's tangent") } else { Value::list(col) });
    }
    Ok(cols)
}

/// The node of level `id` that real `y` is.
#[inline(always)]
fn own_node(y: &Value, id: u32) -> Option<u32> {
    match y {
        Value::TapeReal(t, node, _) if *t as u32 == id => Some(*node),
        Value::Active(r) if r.tape == id => Some(r.node),
        _ => None,
    }
}

/// The elements of proper list `l`.
fn list_items(l: &Value) -> impl Iterator<Item = &Value> {
    let mut at = l;
    std::iter::from_fn(move || match at {
        Value::Pair(p) => {
            at = &p.cdr;
            Some(&p.car)
        }
        _ => None,
    })
}

/// [`sweep_forward`] where inputs are reals of the enclosing reverse level
/// `outer` (reverse over `gradient-F`: a gradient taken through an
/// optimiser's steps, say): each tangent computed on that tape as the forward
/// runs compute it there ([`native::Rv`], `record_forward_rev`'s arithmetic,
/// recording each operation whose operand is one of its reals), from the
/// values the nodes keep (boxed ones too: reals of `outer`), the seed 1 and
/// the other inputs' zeros as `activate_one_hot` makes them (`zero_active`: of
/// a real of `outer`, a node of its tape). `None`, with that tape as it was,
/// where a node keeps a dual or a real of another level, is not a scalar
/// primitive's, or its rule is not done on such numbers.
fn sweep_forward_rev(
    m: &mut Machine,
    tape: &Tape,
    inputs: &[u32],
    reals: &[&Value],
    outs: &[usize],
    outer: Option<u32>,
    units: bool,
) -> Option<Vec<Value>> {
    if inputs.len() != reals.len() || tape.lift != NONE {
        return None;
    }
    // (no enclosing tape: plain numbers, exact integers among them, which
    // `sweep_forward` does not take where a node keeps them)
    let Some(outer) = outer else { return rev_sweeps(m, tape, inputs, reals, outs, (NONE, 0), units) };
    let k = reverse_level(m, outer)?;
    let mark = level_len(m, k);
    let out = rev_sweeps(m, tape, inputs, reals, outs, (outer, k as u32), units);
    if out.is_none() {
        truncate_level(m, k, mark);
    }
    out
}

/// [`sweep_forward_rev`]'s sweeps, on the reverse level `level` (its id and
/// index among the running levels): the tangents of nodes `outs`, direction
/// by direction (for `units`, each other input's tangent exact 0).
fn rev_sweeps(
    m: &mut Machine,
    tape: &Tape,
    inputs: &[u32],
    reals: &[&Value],
    outs: &[usize],
    level: (u32, u32),
    units: bool,
) -> Option<Vec<Value>> {
    use native::Rv;
    let mut zeros: SmallVec<[Rv; 8]> = SmallVec::with_capacity(reals.len());
    for v in reals {
        if units {
            zeros.push(Rv::plain(0.0, true));
            continue;
        }
        let z = zero_active(m, v).ok()?;
        zeros.push(Rv::of(m, &z, level)?);
    }
    let len = tape.nodes.len();
    let none = Rv::plain(0.0, true);
    let mut tan = vec![none; len];
    let mut out = Vec::with_capacity(inputs.len());
    for dir in 0..inputs.len() {
        for (j, &node) in inputs.iter().enumerate() {
            tan[node as usize] = if j == dir { Rv::plain(1.0, true) } else { zeros[j] };
        }
        let (mut at, mut vat) = (0usize, 0usize);
        for i in 0..len {
            let node = *tape.nodes.get(i);
            let Some(f) = node.f else { continue };
            if node.bits & DUALS != 0 || matches!(f, Formula::Zero | Formula::Struct(_)) {
                return None;
            }
            let n = (node.n & ARITY) as usize;
            let kept = kept_mask(f, n);
            let exacts = (node.bits & EXACTS) >> EXACT_SHIFT;
            // (the values the node keeps, as `sweep` reads them)
            let mut vals = [none; 3];
            for (j, v) in vals.iter_mut().enumerate() {
                if kept & (1 << j) != 0 {
                    *v = if node.bits & UNBOXED != 0 {
                        at += 1;
                        Rv::plain(*tape.reals.get(at - 1), exacts & (1 << j) != 0)
                    } else {
                        vat += 1;
                        Rv::of(m, tape.vals.get(vat - 1), level)?
                    };
                }
            }
            // (a constant's tangent: the zero of its value, exact as it is)
            let mut d = [none; 2];
            for j in 0..n {
                d[j] = match node.parents[j] {
                    NONE if kept & (1 << j) != 0 => vals[j].zero(),
                    NONE if node.n & UNKNOWN != 0 => return None,
                    NONE => Rv::plain(0.0, node.n & (1 << (j as u8 + CONST_SHIFT)) != 0),
                    p => tan[p as usize],
                };
            }
            tan[i] = Rv::jvp(m, f, &vals[..n], vals[2], &d[..n]).ok()?;
        }
        out.extend(outs.iter().map(|&o| tan[o].value(level.0)));
    }
    Some(out)
}

/// The sweeps of [`gradient_by_sweeps`] over `tape` whose inputs are
/// `inputs`: the tangents of nodes `outs`, direction by direction. On plain doubles
/// where no enclosing forward level is in play (no node keeps a dual, no
/// input's zero is one): `L1`s whose tangents are all `None` compute as
/// `f64`s do, operation for operation (`L1::arith2`, `L1::op`), so the same
/// bits with less to test.
#[inline(never)]
fn sweep_forward(
    m: &mut Machine,
    tape: &Tape,
    inputs: &[u32],
    zeros: &[(native::L1, bool)],
    outs: &[usize],
) -> Option<Vec<Value>> {
    use native::L1;
    if inputs.len() != zeros.len() {
        return None;
    }
    if tape.lift == NONE && zeros.iter().all(|(z, _)| z.t.is_none()) {
        return sweep_forward_doubles(m, tape, inputs, zeros, outs);
    }
    let lift = (tape.lift != NONE).then_some(tape.lift);
    let none = L1 { p: 0.0, t: None };
    let ts = sweep_forward_on::<L1>(m, tape, inputs, zeros, outs, none, L1 { p: 1.0, t: None }, |p, t| {
        Some(L1 { p, t })
    })?;
    ts.into_iter().map(|(t, e)| if e { exact_tangent(t.p) } else { Some(t.value(lift)) }).collect()
}

/// [`sweep_forward`]'s sweeps on numbers `N` (`kept_value` makes one of a
/// node's kept double and, where the node keeps a dual, its tangent's double;
/// `None` gives the sweeps up): the tangents of nodes `outs` in each input's
/// direction (direction by direction) and whether each is exact. The
/// directions are swept up to four at a time (`sweep_directions`), each node
/// read once for them all.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep_forward_on<N: native::Num + Copy>(
    m: &mut Machine,
    tape: &Tape,
    inputs: &[u32],
    zeros: &[(N, bool)],
    outs: &[usize],
    none: N,
    one: N,
    kept_value: impl Fn(f64, Option<f64>) -> Option<N> + Copy,
) -> Option<Vec<(N, bool)>> {
    let mut out = Vec::with_capacity(inputs.len() * outs.len());
    let mut first = 0;
    while first < inputs.len() {
        let s = Sweeps { tape, inputs, zeros, outs, none, one, first };
        first += match inputs.len() - first {
            1 => sweep_directions::<N, 1>(m, &s, kept_value, &mut out)?,
            2 => sweep_directions::<N, 2>(m, &s, kept_value, &mut out)?,
            3 => sweep_directions::<N, 3>(m, &s, kept_value, &mut out)?,
            _ => sweep_directions::<N, 4>(m, &s, kept_value, &mut out)?,
        };
    }
    Some(out)
}

/// What [`sweep_directions`] sweeps: as [`sweep_forward_on`]'s arguments, and
/// the first direction (input) of those it sweeps.
struct Sweeps<'a, N> {
    tape: &'a Tape,
    inputs: &'a [u32],
    zeros: &'a [(N, bool)],
    outs: &'a [usize],
    none: N,
    one: N,
    first: usize,
}

/// [`sweep_forward_on`]'s sweeps of directions `s.first..s.first + W`, in
/// one pass over the tape: each direction's tangents computed as a sweep of
/// it alone computes them, operation for operation; the tangents of `s.outs`
/// pushed on `out`, direction by direction. `W`, or `None` where the sweeps
/// give up.
#[inline(always)]
fn sweep_directions<N: native::Num + Copy, const W: usize>(
    m: &mut Machine,
    s: &Sweeps<'_, N>,
    kept_value: impl Fn(f64, Option<f64>) -> Option<N>,
    out: &mut Vec<(N, bool)>,
) -> Option<usize> {
    let (tape, none) = (s.tape, s.none);
    let len = tape.nodes.len();
    let mut tan: Vec<[(N, bool); W]> = vec![[(none, false); W]; len];
    for (k, &node) in s.inputs.iter().enumerate() {
        let t = &mut tan[node as usize];
        for (dir, t) in t.iter_mut().enumerate() {
            *t = if k == s.first + dir { (s.one, true) } else { s.zeros[k] };
        }
    }
    let mut at = 0usize;
    for i in 0..len {
        let node = *tape.nodes.get(i);
        let Some(f) = node.f else { continue };
        if node.bits & UNBOXED == 0 || matches!(f, Formula::Zero | Formula::Struct(_)) {
            return None;
        }
        let n = (node.n & ARITY) as usize;
        let kept = kept_mask(f, n);
        let duals = node.bits & DUALS;
        // (the values the node keeps: those its rules read, laid out as
        // `sweep` reads them)
        let mut vals = [none; 3];
        for (j, v) in vals.iter_mut().enumerate() {
            if kept & (1 << j) != 0 {
                let p = *tape.reals.get(at);
                at += 1;
                let t = if duals & (1 << j) != 0 {
                    at += 1;
                    Some(*tape.reals.get(at - 1))
                } else {
                    None
                };
                *v = kept_value(p, t)?;
            }
        }
        // (the operands' tangents, direction by direction; a constant's none,
        // exact as the node notes it)
        let mut d = [[(none, false); W]; 2];
        for (j, d) in d.iter_mut().enumerate().take(n) {
            match node.parents[j] {
                NONE => {
                    let exact = node.n & (1 << (j as u8 + CONST_SHIFT)) != 0;
                    *d = [(none, exact); W];
                }
                p => *d = tan[p as usize],
            }
        }
        let sum = matches!(f, Formula::Add | Formula::Sub);
        let mut y = [(none, false); W];
        for dir in 0..W {
            let exact = [d[0][dir].1, d[1][dir].1];
            // (a sum's tangent is exact if both are; any other rule meets a double)
            let exact_out = if sum && exact[..n].iter().any(|&e| e) {
                if n != 2 || node.n & UNKNOWN != 0 {
                    // (an exact tangent and a constant whose exactness is not known)
                    return None;
                }
                exact[0] && exact[1]
            } else {
                false
            };
            let ds = [d[0][dir].0, d[1][dir].0];
            let dy = native::jvp_num::<N>(m, f, &vals[..n], &vals[2], &ds[..n]).ok()?;
            y[dir] = (dy, exact_out);
        }
        tan[i] = y;
    }
    let tan = &tan;
    out.extend((0..W).flat_map(|dir| s.outs.iter().map(move |&o| tan[o][dir])));
    Some(W)
}

/// [`sweep_directions`] on doubles (`sweep_forward` where no forward level
/// is lifted and every input's zero is a double) over a tape of one chunk
/// (`nodes`, and the values they keep, `reals`): the same tangents of the
/// same nodes, operation for operation, on doubles alone. A node's tangents
/// are `W` doubles from `tan[i * W]` on, and their exactness (direction `dir`
/// exact if bit `dir` is set) is `exacts[i]`; both stores are the caller's,
/// emptied here, so that a run of many gradients reuses them. `+ - * /` of
/// two are computed in place (the rules of `native::jvp_num`: `(+ d1 d2)`,
/// `(- d1 d2)`, `(+ (* d1 x2) (* x1 d2))`, `(/ (- d1 (* y d2)) x2)`); any
/// other rule is `jvp_num`'s. The tangents of `outs` are pushed on `out`,
/// direction by direction. `W`, or `None` where the sweeps give up, as
/// `sweep_directions` gives up.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn sweep_doubles<const W: usize>(
    m: &mut Machine,
    (nodes, reals): (&[Node], &[f64]),
    inputs: &[u32],
    zeros: &[(native::L1, bool)],
    outs: &[usize],
    first: usize,
    (tan, exacts): (&mut Vec<f64>, &mut Vec<u8>),
    out: &mut Vec<Value>,
) -> Option<usize> {
    let len = nodes.len();
    let all: u8 = (1 << W) - 1;
    tan.clear();
    tan.resize(len * W, 0.0);
    exacts.clear();
    exacts.resize(len, 0);
    for (k, &node) in inputs.iter().enumerate() {
        let at = node as usize;
        for dir in 0..W {
            let (t, e) = if k == first + dir { (1.0, true) } else { (zeros[k].0.p, zeros[k].1) };
            tan[at * W + dir] = t;
            exacts[at] = (exacts[at] & !(1 << dir)) | ((e as u8) << dir);
        }
    }
    // (where the values the next node keeps are)
    let mut at = 0;
    for (i, node) in nodes.iter().enumerate() {
        let Some(f) = node.f else { continue };
        if node.bits & UNBOXED == 0 {
            return None;
        }
        let n = (node.n & ARITY) as usize;
        // (the operands' tangents: a constant's none)
        let tangents = |j: usize| match node.parents[j] {
            NONE => [0.0; W],
            p => {
                let mut d = [0.0; W];
                d.copy_from_slice(&tan[p as usize * W..(p as usize + 1) * W]);
                d
            }
        };
        // (their exactness: a constant's as the node notes it)
        let exact = |j: usize| match node.parents[j] {
            NONE if node.n & (1 << (j as u8 + CONST_SHIFT)) != 0 => all,
            NONE => 0,
            p => exacts[p as usize],
        };
        let mut y = [0.0; W];
        let mut exact_out = 0;
        match (f, n) {
            (Formula::Add | Formula::Sub, 2) => {
                let (d0, d1) = (tangents(0), tangents(1));
                // (a sum's tangent is exact if both are)
                let (e0, e1) = (exact(0), exact(1));
                if e0 | e1 != 0 {
                    if node.n & UNKNOWN != 0 {
                        // (an exact tangent and a constant whose exactness is not known)
                        return None;
                    }
                    exact_out = e0 & e1;
                }
                for k in 0..W {
                    y[k] = if f == Formula::Add { d0[k] + d1[k] } else { d0[k] - d1[k] };
                }
            }
            (Formula::Mul | Formula::Div, 2) => {
                // (`*` keeps its operands, `/` its second operand and its
                // result: none may be a dual)
                if node.bits & DUALS & kept_mask(f, 2) != 0 {
                    return None;
                }
                let (u, v) = (*reals.get(at)?, *reals.get(at + 1)?);
                at += 2;
                let (d0, d1) = (tangents(0), tangents(1));
                for k in 0..W {
                    y[k] = if f == Formula::Mul { d0[k] * v + u * d1[k] } else { (d0[k] - v * d1[k]) / u };
                }
            }
            (Formula::Zero | Formula::Struct(_), _) => return None,
            _ => {
                let kept = kept_mask(f, n);
                // (a kept dual: not on doubles alone)
                if node.bits & DUALS & kept != 0 {
                    return None;
                }
                let mut vals = [0.0; 3];
                for (j, v) in vals.iter_mut().enumerate() {
                    if kept & (1 << j) != 0 {
                        *v = *reals.get(at)?;
                        at += 1;
                    }
                }
                let (d0, d1) = (tangents(0), if n == 2 { tangents(1) } else { [0.0; W] });
                if matches!(f, Formula::Add | Formula::Sub) && (0..n).any(|j| exact(j) != 0) {
                    // (a sum of other than two operands meeting an exact tangent)
                    return None;
                }
                for k in 0..W {
                    let ds = [d0[k], d1[k]];
                    y[k] = native::jvp_num::<f64>(m, f, &vals[..n], &vals[2], &ds[..n]).ok()?;
                }
            }
        }
        tan[i * W..(i + 1) * W].copy_from_slice(&y);
        exacts[i] = exact_out;
    }
    if outs.iter().all(|&o| exacts[o] == 0) {
        // (doubles alone, the commonest, each written in its place: a value
        // made in one of two ways and pushed is made on the stack in parts
        // and copied whole, a load the processor cannot forward from those
        // stores, which stalls it)
        let n = W * outs.len();
        out.reserve(n);
        let start = out.len();
        let spare = out.spare_capacity_mut();
        for dir in 0..W {
            for (k, &o) in outs.iter().enumerate() {
                spare[dir * outs.len() + k].write(Value::Real(tan[o * W + dir]));
            }
        }
        // SAFETY: the `n` values past `start` were written just above.
        unsafe { out.set_len(start + n) };
        return Some(W);
    }
    for dir in 0..W {
        for &o in outs {
            let t = tan[o * W + dir];
            out.push(if exacts[o] & (1 << dir) != 0 { exact_tangent(t)? } else { Value::Real(t) });
        }
    }
    Some(W)
}

/// A tangent that the forward sweeps found exact, as the runs give it: an
/// integer (`None` where the double is not one, which an exact tangent
/// always is).
#[inline(always)]
fn exact_tangent(p: f64) -> Option<Value> {
    (p.fract() == 0.0 && p.abs() <= EXACT_AS_DOUBLE as f64).then(|| Value::Int(p as i64))
}

/// [`sweep_forward`] where no forward level is lifted and every input's
/// zero is a double: the directions swept up to four at a time on doubles
/// alone (`sweep_doubles` where the tape is one chunk, the commonest, else
/// `sweep_forward_on`), into the tangents' values.
#[inline(never)]
fn sweep_forward_doubles(
    m: &mut Machine,
    tape: &Tape,
    inputs: &[u32],
    zeros: &[(native::L1, bool)],
    outs: &[usize],
) -> Option<Vec<Value>> {
    if !tape.nodes.full.is_empty() || !tape.reals.full.is_empty() {
        // (a long tape: as any other, chunk by chunk)
        let zeros: SmallVec<[(f64, bool); 8]> = zeros.iter().map(|&(z, e)| (z.p, e)).collect();
        let ts = sweep_forward_on::<f64>(m, tape, inputs, &zeros, outs, 0.0, 1.0, |p, t| {
            t.is_none().then_some(p)
        })?;
        return ts
            .into_iter()
            .map(|(t, e)| if e { exact_tangent(t) } else { Some(Value::Real(t)) })
            .collect();
    }
    let stores = (&tape.nodes.last[..], &tape.reals.last[..]);
    let (mut tan, mut exacts) = std::mem::take(&mut m.tape.spare_tangents);
    let mut out = Vec::with_capacity(inputs.len() * outs.len());
    let mut first = 0;
    let mut done = true;
    while first < inputs.len() {
        let (t, o) = ((&mut tan, &mut exacts), &mut out);
        let swept = match inputs.len() - first {
            1 => sweep_doubles::<1>(m, stores, inputs, zeros, outs, first, t, o),
            2 => sweep_doubles::<2>(m, stores, inputs, zeros, outs, first, t, o),
            3 => sweep_doubles::<3>(m, stores, inputs, zeros, outs, first, t, o),
            _ => sweep_doubles::<4>(m, stores, inputs, zeros, outs, first, t, o),
        };
        match swept {
            Some(w) => first += w,
            None => {
                done = false;
                break;
            }
        }
    }
    keep_spare(&mut m.tape.spare_tangents.0, tan);
    keep_spare(&mut m.tape.spare_tangents.1, exacts);
    done.then_some(out)
}

/// `x` with each real made a real of forward level `id` whose tangent is 1 for
/// the `i`th (in order) and its zero (on its own level, as the prelude walk's
/// `zero` gives it) for every other: `activate_forward` of `x` and that
/// one-hot tangent, without building the tangent.
fn activate_one_hot(m: &mut Machine, x: &Value, i: usize, id: u32) -> Result<Value> {
    // (a proper list of reals, the commonest, down its spine: as `map_reals`
    // walks it, the closure below written out; through `map_reals` ~90
    // instructions more per run, a call of the closure per element)
    if let Some(mut items) = flat_list_of_reals(x) {
        let mut out = ListBuilder::new();
        let mut k = 0;
        while let Value::Pair(p) = items {
            let v = &p.car;
            let t = if k == i { Value::Int(1) } else { zero_active(m, v)? };
            k += 1;
            out.push(forward_real(id, v.clone(), t));
            items = &p.cdr;
        }
        return Ok(out.finish(Value::Nil));
    }
    let mut k = 0;
    map_reals(x, &mut |v| {
        let t = if k == i { Value::Int(1) } else { zero_active(m, v)? };
        k += 1;
        Ok(forward_real(id, v.clone(), t))
    })
}

/// `x` if it is a proper list of reals (as [`map_reals`] walks it, element
/// by element: the same order).
#[inline]
fn flat_list_of_reals(x: &Value) -> Option<&Value> {
    let mut l = x;
    while let Value::Pair(p) = l {
        if !is_real(&p.car) {
            return None;
        }
        l = &p.cdr;
    }
    matches!(l, Value::Nil).then_some(x)
}

/// `x` (holding `n` reals) with its reals replaced, in order, by the values
/// of `ds`.
#[inline(always)]
fn fill(x: &Value, ds: Vec<Value>, n: usize) -> Value {
    // (a proper list of reals, the commonest, with a value each: the list of
    // the values, made at once)
    if ds.len() == n && flat_list_of_reals(x).is_some() {
        return Value::list(ds);
    }
    let mut ds = ds.into_iter();
    // (a proper list of reals down its spine, as in `activate_one_hot`)
    if let Some(mut items) = flat_list_of_reals(x) {
        let mut out = ListBuilder::new();
        while let Value::Pair(p) = items {
            out.push(ds.next().unwrap_or(Value::Nil));
            items = &p.cdr;
        }
        return out.finish(Value::Nil);
    }
    map_reals(x, &mut |_| Ok(ds.next().unwrap_or(Value::Nil))).unwrap_or(Value::Nil)
}

/// `x` (pairs, `()`, booleans and reals, nested at most `MAX_NESTING` deep)
/// with each real replaced by `g` of it, in order.
fn map_reals(x: &Value, g: &mut dyn FnMut(&Value) -> Result<Value>) -> Result<Value> {
    Ok(match x {
        Value::Pair(p) => map_spine(p, &mut |v| map_reals(v, g))?,
        _ if is_real(x) => g(x)?,
        _ => x.clone(),
    })
}

/// The compiled `Rule::Via` definition of primitive `p`.
fn fallback(m: &mut Machine, p: PrimId) -> Result<Value> {
    if let Some(v) = m.tape.fallbacks.get(&p) {
        return Ok(v.clone());
    }
    let v = super::rules::via_closure(p)?;
    m.tape.fallbacks.insert(p, v.clone());
    Ok(v)
}

fn group_key(f: &Value, want: Want) -> Option<usize> {
    match f {
        Value::Closure(inst, i) => Some(
            Rc::as_ptr(&inst.group) as usize ^ ((*i as usize) << 48) ^ ((want == Want::Jvp) as usize) << 63,
        ),
        _ => None,
    }
}

/// The run on a new level, or `None` where it declines.
fn try_tape(m: &mut Machine, want: Want, args: &[Value]) -> Result<Option<Value>> {
    try_tape_with(m, want, args, None)
}

/// [`try_tape`]; with `one_hot` `Some(i)` (a forward run for `gradient-F`),
/// `args` is the function and its argument, and the tangent is 1 at the
/// argument's `i`th real and zero elsewhere.
fn try_tape_with(
    m: &mut Machine,
    want: Want,
    args: &[Value],
    one_hot: Option<usize>,
) -> Result<Option<Value>> {
    if !m.tape.enabled || m.tape.stack.len() >= MAX_LEVELS {
        return Ok(None);
    }
    let key = group_key(&args[0], want);
    if let Some(k) = key {
        if m.tape.declined.get(&k).is_some_and(|d| d.skip > 0) {
            m.tape.note_declined(k);
            if let Some(d) = m.tape.declined.get_mut(&k) {
                d.skip -= 1;
            }
            return Ok(None);
        }
    }
    // (lazy parts, a lazy zero's above all, built: the walks below see data)
    let mut built: SmallVec<[Value; 3]> = SmallVec::new();
    let args = if args[1..].iter().any(super::ops::is_or_has_lazy) {
        for (i, a) in args.iter().enumerate() {
            built.push(match a {
                // (one that would build more than the tape takes: see `shallow`)
                Value::Pair(_) | Value::Lazy(_) if i > 0 => {
                    match super::ops::force_within(m, a, FORCED_PAIRS)? {
                        Some(v) => v,
                        None => {
                            return Ok(gave_way(
                                m,
                                "an argument (or tangent, or sensitivity) too large to build",
                            ))
                        }
                    }
                }
                _ => a.clone(),
            });
        }
        &built[..]
    } else {
        args
    };
    let (f, x) = (&args[0], &args[1]);
    // (a tangent or sensitivity is walked in step with the argument or the
    // result, so within their size)
    if !shallow(x) {
        return Ok(gave_way(m, "an argument nested too deeply or sharing structure"));
    }
    let forward = want == Want::Jvp;
    let Some(id) = m.tape.push_level(forward) else {
        // (a level's identity is a `u32` below `NONE`: past 2^32 - 1 levels in
        // one top-level run, the transform)
        return Ok(gave_way(m, "no level identity left"));
    };
    let mut inputs = Inputs::new();
    let mut bools = false;
    let xa = match one_hot {
        _ if !forward => activate(m, x, id, &mut inputs, &mut bools),
        None => activate_forward(x, &args[2], id),
        Some(i) => match activate_one_hot(m, x, i, id) {
            Ok(xa) => Some(xa),
            // (a tangent's zero that cannot be made: the level is dropped and
            // the whole gradient given to the transform, as before the run)
            Err(e) => {
                let tape = m.tape.stack.pop().expect("the level pushed above");
                m.tape.recycle(tape);
                return if e.kind == ErrorKind::Limit { Err(e) } else { Ok(None) };
            }
        },
    };
    let r = match xa {
        Some(xa) => m.apply_value(f.clone(), xa, None).map(Some),
        None => Ok(None),
    };
    let tape = m.tape.stack.pop().expect("the level pushed above");
    let y = match r {
        Ok(Some(y)) => {
            if let Some(k) = key {
                if !m.tape.declined.is_empty() {
                    if let Some(old) = m.tape.declined.remove(&k) {
                        m.tape.journaled(Undo::Declined(k, Some(old)));
                    }
                }
            }
            y
        }
        Ok(None) => return Ok(gave_way(m, "an argument (or tangent) not made of pairs, () and reals")),
        Err(e) if e.kind == ErrorKind::Limit => return Err(e),
        Err(e) => {
            gave_way(m, &e.message);
            if let (Some(k), Value::Closure(inst, _)) = (key, f) {
                m.tape.note_declined(k);
                let d = m.tape.declined.entry(k).or_insert(Declined {
                    _group: inst.group.clone(),
                    skip: 0,
                    wait: 0,
                });
                d.wait = (d.wait * 2).clamp(1, MAX_DECLINED_WAIT);
                d.skip = d.wait;
            }
            m.tape.primal_error = Some(e);
            return Ok(None);
        }
    };
    if !shallow(&y) {
        return Ok(gave_way(m, "a result nested too deeply or sharing structure"));
    }
    if forward {
        m.tape.recycle(tape);
        let dy = match tangent_of(m, &y, id) {
            Ok(dy) => dy,
            Err(e) if e.kind == ErrorKind::Limit => return Err(e),
            Err(_) => None,
        };
        return Ok(dy.or_else(|| gave_way(m, "a result not made of pairs, () and reals")));
    }
    // The sensitivity of each node the result is made of.
    let mut adj: Vec<Option<Sens>> = std::mem::take(&mut m.tape.spare_adj);
    adj.resize_with(tape.nodes.len(), || None);
    let ok = match (want, &y) {
        // (the commonest: a real of this tape, seeded 1, as `seed` seeds it)
        (Want::RealVjp, y) if let Some(node) = own_node(y, id) => {
            adj[node as usize] = Some(Sens::Int(1));
            true
        }
        (Want::RealVjp, _) => seed(&y, &Value::Int(1), id, &mut adj, true, false),
        _ => seed(&y, &args[2], id, &mut adj, false, bools),
    };
    if !ok {
        // (the transform reports a result that does not fit the sensitivity)
        return Ok(gave_way(m, "a result not made of pairs, () and reals shaped like the sensitivity"));
    }
    let mut tape = tape;
    // (where the enclosing tapes are before the sweep, for `note_discard`)
    let lengths = tape_lengths(m, want);
    let mut marks = std::mem::take(&mut m.tape.spare_marks);
    marks.clear();
    marks.resize(tape.nodes.len(), 0);
    let any_marked = match sweep(m, &mut tape, &mut adj, &mut marks) {
        Ok(t) => t,
        Err(e) if e.kind == ErrorKind::Limit => return Err(e),
        // (the transform's backpropagator meets the same error: reported as it
        // reports it)
        Err(_) => return Ok(gave_way(m, "an error in the backward sweep")),
    };
    // (the tape and the other nodes' sensitivities freed before the cotangent is built)
    let lift = tape.lift;
    m.tape.recycle(tape);
    let certain_zeros = any_marked && m.tape.stack.is_empty();
    // (a proper list of reals, the commonest, each an input in order (as
    // `activate` made them): its cotangent straight from their sensitivities,
    // as `cotangent` builds it, where no zero is to be added)
    let xb = if !certain_zeros && flat_list_of_reals(x).is_some() {
        let xb = flat_cotangent(m, x, &inputs, &mut adj, lift);
        keep_spare(&mut m.tape.spare_adj, adj);
        xb
    } else {
        let mut sens: SmallVec<[Option<Value>; 8]> = SmallVec::with_capacity(inputs.len());
        for &n in &inputs {
            sens.push(adj[n as usize].take().map(|s| s.into_value(lift)));
        }
        keep_spare(&mut m.tape.spare_adj, adj);
        if certain_zeros {
            match add_certain_zeros(m, x, &inputs, &mut marks, &mut sens) {
                Ok(()) => {}
                Err(e) if e.kind == ErrorKind::Limit => return Err(e),
                Err(_) => return Ok(gave_way(m, "an error in the backward sweep")),
            }
        }
        let mut k = 0;
        cotangent(m, x, &mut sens, &mut k)
    };
    let xb = match xb {
        Ok(xb) => xb,
        Err(e) if e.kind == ErrorKind::Limit => return Err(e),
        Err(_) => return Ok(gave_way(m, "an error in the backward sweep")),
    };
    let differ = any_marked && exactness_may_differ(&marks, &inputs, &xb);
    keep_spare(&mut m.tape.spare_marks, marks);
    if differ {
        m.tape.exactness_declined += 1;
        return Ok(gave_way(m, EXACTNESS));
    }
    if !lengths.is_empty() {
        note_discard(m, id, &y, &lengths);
    }
    Ok(Some(match want {
        Want::ValueAndVjp => Value::cons(deactivate(&y, id), xb),
        _ => xb,
    }))
}

/// The cotangents (`sens`, one an input, in order) of the inputs that the
/// transform's zeros surely reach (`CERTAIN`, or `SOURCE`: an input that is
/// itself a dropped result, with an inexact value), made inexact as the
/// transform's zero 0.0 added to them makes them (an exact one plus 0.0; an
/// inexact one is left as it is: the zero's sign aside, adding it changes
/// nothing); those are unmarked, the question `exactness_may_differ` asks
/// being answered for them. Only for a run that no level encloses: under
/// one, the transform's zeros here also compute with that level's reals
/// (`0.0` times a real of an enclosing tape is a node there, whose own
/// zeros the enclosing level's exactness depends on), so there the sweep
/// runs the rules on the zeros themselves (`zero_discards`) and marks none
/// `CERTAIN`.
#[inline(never)]
fn add_certain_zeros(
    m: &mut Machine,
    x: &Value,
    inputs: &[u32],
    marks: &mut [u8],
    sens: &mut [Option<Value>],
) -> Result<()> {
    // (the inputs' values, where one is needed: for a zero, or to see whether
    // an input that is a dropped result is inexact)
    let mut xs: Option<SmallVec<[&Value; 8]>> = None;
    for (j, &n) in inputs.iter().enumerate() {
        let mark = marks[n as usize];
        if mark & (CERTAIN | SOURCE) == 0 {
            continue;
        }
        if mark & CERTAIN == 0 || sens[j].as_ref().is_none_or(|c| !is_inexact(c)) {
            let xs = xs.get_or_insert_with(|| reals_in_order(x).unwrap_or_default());
            let Some(&xj) = xs.get(j) else { break };
            if mark & CERTAIN == 0 && !is_inexact(xj) {
                continue;
            }
            let c = match sens[j].take() {
                Some(c) => c,
                None => zero_active(m, xj)?,
            };
            sens[j] = Some(if is_inexact(&c) { c } else { add_slow(m, c, Value::Real(0.0))? });
        }
        marks[n as usize] &= !(TAINTED | CERTAIN);
    }
    Ok(())
}

/// The length of each enclosing tape (its identity, its length), where a
/// run of `want` may note a dropped result on it (see [`note_discard`]).
fn tape_lengths(m: &Machine, want: Want) -> SmallVec<[(u32, u32); 2]> {
    if want == Want::ValueAndVjp {
        return SmallVec::new();
    }
    m.tape.stack.iter().filter(|t| !t.forward).map(|t| (t.id, t.nodes.len() as u32)).collect()
}

/// Notes on each enclosing tape the primal result `y` that this run of
/// level `id` drops (see [`Discard`]): the nodes its reals are on that tape
/// (a real of this level by its value, a real of a level by the real of the
/// enclosing one under it), and the nodes the tape got from `lengths` (its
/// length before this run's sweep) on.
#[inline(never)]
fn note_discard(m: &mut Machine, id: u32, y: &Value, lengths: &[(u32, u32)]) {
    // (nothing to note where the sweep recorded nothing on the enclosing
    // tapes, as a sweep on doubles records nothing: the commonest)
    let grew = |&(level, from): &(u32, u32)| {
        m.tape.stack.iter().find(|t| t.id == level).is_some_and(|t| t.nodes.len() as u32 > from)
    };
    if !lengths.iter().any(grew) {
        return;
    }
    // (a tape that a level encloses, one not first on the stack, seeds the
    // zeros of the values, `zero_discards`; the outermost has no use for them)
    let first = m.tape.stack.first().map(|t| t.id);
    let want_values = lengths.iter().any(|&(level, _)| first != Some(level));
    // (level, node) of each real, each level it is on, and (if wanted) its value there
    let mut nodes: SmallVec<[(u32, u32); 8]> = SmallVec::new();
    let mut values: SmallVec<[Value; 8]> = SmallVec::new();
    for_each_leaf(y, |mut v| {
        loop {
            match v {
                Value::TapeReal(t, node, p) => {
                    nodes.push((*t as u32, *node));
                    if want_values {
                        values.push(Value::Real(*p));
                    }
                    break;
                }
                Value::Active(a) => {
                    if a.node != NONE && a.tape != id {
                        nodes.push((a.tape, a.node));
                        if want_values {
                            values.push(a.value.clone());
                        }
                    }
                    v = &a.value;
                }
                _ => break,
            }
        }
        true
    });
    for &(level, from) in lengths {
        let keep = first != Some(level);
        let Some(t) = m.tape.stack.iter_mut().find(|t| t.id == level) else { continue };
        let len = t.nodes.len() as u32;
        let mut y = SmallVec::new();
        let mut vals = Vec::new();
        for (j, &(l, n)) in nodes.iter().enumerate() {
            if l == level {
                y.push(n);
                if keep {
                    vals.push(values[j].clone());
                }
            }
        }
        if !y.is_empty() && len > from {
            t.discards.push(Discard { from, to: len - 1, y, values: vals });
        }
    }
}

/// Notes why a run gave way (the first time); `None`.
fn gave_way(m: &mut Machine, why: &str) -> Option<Value> {
    if m.tape.first_decline.is_none() {
        m.tape.first_decline = Some(why.to_string());
    }
    None
}

/// `x` with each real bundled with the real at the same place in `dx` on
/// forward level `id`; `None` unless both are made of pairs, `()`, booleans
/// and reals of the same shape.
fn activate_forward(x: &Value, dx: &Value, id: u32) -> Option<Value> {
    let mut depth = 0usize;
    activate_forward_rec(x, dx, id, &mut depth)
}

fn activate_forward_rec(x: &Value, dx: &Value, id: u32, depth: &mut usize) -> Option<Value> {
    match (x, dx) {
        (Value::Nil, Value::Nil) => Some(Value::Nil),
        // (a boolean's tangent is its zero, itself)
        (Value::Bool(_), Value::Bool(_)) => Some(x.clone()),
        (Value::Pair(p), Value::Pair(q)) => {
            *depth += 1;
            if *depth > MAX_NESTING {
                return None;
            }
            let mut items = ListBuilder::new();
            items.push(activate_forward_rec(&p.car, &q.car, id, depth)?);
            let (mut rest, mut drest) = (&p.cdr, &q.cdr);
            while let (Value::Pair(a), Value::Pair(b)) = (rest, drest) {
                items.push(activate_forward_rec(&a.car, &b.car, id, depth)?);
                (rest, drest) = (&a.cdr, &b.cdr);
            }
            let tail = activate_forward_rec(rest, drest, id, depth)?;
            *depth -= 1;
            Some(items.finish(tail))
        }
        _ if is_real(x) && is_real(dx) => Some(forward_real(id, x.clone(), dx.clone())),
        _ => None,
    }
}

/// An inexact number (perhaps under active reals)?
fn is_inexact(v: &Value) -> bool {
    matches!(*strip(v), Value::Real(_))
}

fn is_real(v: &Value) -> bool {
    v.is_number() || v.is_active()
}

/// The tangent of a result on forward level `id`: of each of its reals, that
/// level's tangent (a constant's zero; a boolean's, itself); `None` unless it is
/// made of pairs, `()`, booleans and reals.
fn tangent_of(m: &mut Machine, y: &Value, id: u32) -> Result<Option<Value>> {
    Ok(match y {
        Value::Active(a) if a.tape == id => Some(a.tangent.clone()),
        // (a constant here, perhaps a real of an enclosing level: its zero there)
        _ if is_real(y) => Some(zero_active(m, y)?),
        Value::Nil | Value::Bool(_) => Some(y.clone()),
        Value::Pair(p) => {
            // (stopped by an error, or by a part that is not data: `None`)
            let r = map_spine(p, &mut |v| match tangent_of(m, v, id) {
                Ok(Some(t)) => Ok(t),
                Ok(None) => Err(None),
                Err(e) => Err(Some(e)),
            });
            match r {
                Ok(t) => Some(t),
                Err(None) => None,
                Err(Some(e)) => return Err(e),
            }
        }
        _ => None,
    })
}

/// `x` with each real replaced by a fresh input of tape `id` (recorded in
/// `inputs`, in order); `None` if `x` holds anything but pairs, `()`,
/// booleans and reals.
/// (`bools`: set if it holds a boolean).
fn activate(m: &mut Machine, x: &Value, id: u32, inputs: &mut Inputs, bools: &mut bool) -> Option<Value> {
    let mut budget = 0usize;
    activate_rec(m, x, id, inputs, &mut budget, bools)
}

fn activate_rec(
    m: &mut Machine,
    x: &Value,
    id: u32,
    inputs: &mut Inputs,
    depth: &mut usize,
    bools: &mut bool,
) -> Option<Value> {
    match x {
        Value::Nil => Some(x.clone()),
        Value::Bool(_) => {
            *bools = true;
            Some(x.clone())
        }
        Value::Int(_)
        | Value::Real(_)
        | Value::Big(_)
        | Value::Rat(_)
        | Value::Active(_)
        | Value::TapeReal(..) => Some(input(m.tape.stack.last_mut()?, id, inputs, x)),
        // (a proper list of numbers and reals, the commonest, down its spine:
        // each as the arm above makes it)
        Value::Pair(_) if *depth < MAX_NESTING && flat_list_of_reals(x).is_some() => {
            let t = m.tape.stack.last_mut()?;
            let mut out = ListBuilder::new();
            let mut items = x;
            while let Value::Pair(p) = items {
                out.push(input(t, id, inputs, &p.car));
                items = &p.cdr;
            }
            Some(out.finish(Value::Nil))
        }
        Value::Pair(p) => {
            // (lists are walked along their spine without recursion; cars nest)
            *depth += 1;
            if *depth > MAX_NESTING {
                return None;
            }
            let r = map_spine(p, &mut |v| activate_rec(m, v, id, inputs, depth, bools).ok_or(())).ok();
            *depth -= 1;
            r
        }
        _ => None,
    }
}

/// A new input of tape `t`, level `id` (its node recorded in `inputs`): real
/// `x` of the argument as a real of the tape.
#[inline(always)]
fn input(t: &mut Tape, id: u32, inputs: &mut Inputs, x: &Value) -> Value {
    let node = t.nodes.len() as u32;
    // (an input keeps no value: no rule reads it)
    t.nodes.push(Node { parents: [NONE; 2], f: None, n: 0, bits: 0 });
    inputs.push(node);
    reverse_real(id, node, x.clone())
}

/// Seeds the sensitivity `s` of result `y` on the nodes of tape `id`. `false`
/// if `y` does not fit (a real result for `real-vjp`; for `vjp`, pairs, `()`,
/// booleans and reals shaped like `s`, a boolean's a boolean or `()`), or if
/// the argument holds booleans (`bools`) and a boolean of the result has a
/// sensitivity other than itself: the transform gives a boolean of the argument
/// the sensitivity that reaches it, and the tape does not follow booleans (one
/// with its own value as its sensitivity gets itself either way, as does one
/// that none reaches).
fn seed(y: &Value, s: &Value, id: u32, adj: &mut [Option<Sens>], real: bool, bools: bool) -> bool {
    let mut work: SmallVec<[(&Value, &Value); 16]> = smallvec::smallvec![(y, s)];
    while let Some((y, s)) = work.pop() {
        let own = own_node(y, id);
        match (y, s) {
            (_, _) if let Some(i) = own => {
                if !strip(s).is_number() {
                    return false;
                }
                let i = i as usize;
                adj[i] = Some(Sens::of(match adj[i].take() {
                    None => s.clone(),
                    // (a result holding one real twice; nothing on a forward level yet)
                    Some(old) => match num::arith('+', &old.into_value(NONE), s) {
                        Some(Ok(v)) => v,
                        _ => return false,
                    },
                }));
            }
            // a constant (or a real of an enclosing tape): no sensitivity here
            (Value::Active(_) | Value::TapeReal(..), _)
            | (Value::Int(_) | Value::Real(_) | Value::Big(_) | Value::Rat(_), _) => {
                if !strip(s).is_number() {
                    return false;
                }
            }
            (Value::Bool(b), s) if !real => {
                // (data there is the transform's error to report)
                if !matches!(&*strip(s), Value::Bool(_) | Value::Nil)
                    || bools && !matches!(s, Value::Bool(c) if c == b)
                {
                    return false;
                }
            }
            (Value::Nil, Value::Nil) if !real => {}
            (Value::Pair(a), Value::Pair(b)) if !real => {
                work.push((&a.cdr, &b.cdr));
                work.push((&a.car, &b.car));
            }
            _ => return false,
        }
        if real {
            break;
        }
    }
    true
}

/// The backward sweep: each node's sensitivity, last node first, through its
/// formula's cotangent rule to its parents. It frees what it has gone through
/// of the tape as it goes. It marks in `marks` (one `0` a node) `TAINTED`
/// the nodes below a node that no sensitivity reached and whose operands or
/// result are inexact (see `exactness_may_differ`), and `CERTAIN` those below
/// a node of a dropped result whose nested run's backward phase the
/// transform runs (see [`Discard`]); its result: whether it marked any.
/// It makes no procedure calls, so it checks `--timeout` and Ctrl-C itself
/// (every `SWEEP_CHECK_EVERY` nodes): a long sweep stops as the transform's
/// backpropagator would, not by the watchdog ending the program (the REPL's
/// session, `vlad test`'s run).
fn sweep(m: &mut Machine, tape: &mut Tape, adj: &mut [Option<Sens>], marks: &mut [u8]) -> Result<bool> {
    if tape.discards.is_empty() {
        sweep_marking::<false>(m, tape, adj, marks)
    } else {
        sweep_marking::<true>(m, tape, adj, marks)
    }
}

/// [`sweep`], on a tape with dropped results noted (`DISCARDS`) or none.
#[inline(always)]
fn sweep_marking<const DISCARDS: bool>(
    m: &mut Machine,
    tape: &mut Tape,
    adj: &mut [Option<Sens>],
    marks: &mut [u8],
) -> Result<bool> {
    // (an operand or result the rule does not read)
    let zero = Value::Real(0.0);
    // (where the values the nodes from `i` on keep start)
    let (mut reals_at, mut vals_at) = (tape.reals.len(), tape.vals.len());
    let mut any = false;
    // (nothing metered: the doubles cases below apply)
    let plain = m.meter.is_none();
    // (the dropped results of nested runs, the last first, the next one's
    // `from`, and the last node reached so far)
    let mut discards = std::mem::take(&mut tape.discards);
    discards.sort_unstable_by_key(|d| std::cmp::Reverse(d.from));
    let mut next = 0;
    let mut next_from = discards.first().map_or(NONE, |d| d.from);
    let mut lowest_reached = NONE;
    // (a level encloses this one: the dropped results get their zeros as
    // sensitivities, see `zero_discards`)
    let enclosed = !m.tape.stack.is_empty();
    let mut i = tape.nodes.len();
    while i > 0 {
        i -= 1;
        // (not at the last node: what is left of a run's sweep there is
        // one node, and the tape is emptied right after)
        if i.is_multiple_of(SWEEP_CHECK_EVERY) && i > 0 {
            m.check_limits()?;
            // (the nodes past `i` are done with)
            tape.nodes.truncate(i + 1);
            tape.reals.truncate(reals_at);
            tape.vals.truncate(vals_at);
        }
        let node = *tape.nodes.get(i);
        // (not for a run of one node, which the steps below take as fast)
        if plain
            && !DISCARDS
            && run_kind(&node)
            && matches!(adj[i], None | Some(Sens::Real(_) | Sens::Int(_)))
            && i > 0
            && run_kind(tape.nodes.get(i - 1))
        {
            // (a run of the commonest nodes, from `i` down)
            let (done, at, marked) = plain_run(m, tape, adj, marks, i, reals_at)?;
            if done > 0 {
                (reals_at, any) = (at, any | marked);
                i = i + 1 - done;
                continue;
            }
        }
        // (the commonest node first, as the steps below run it: doubles only,
        // none exact nor a dual, a double sensitivity (or an exact one that
        // the rule scales, or a dual of the running forward level) or none,
        // nothing metered; where results were dropped, not a node where some
        // are due (`next_from`) nor one of them (`SOURCE`), whose steps below
        // are then those of any other node, `lowest_reached` aside)
        if plain
            && node.bits & (UNBOXED | DUALS | EXACTS) == UNBOXED
            && (!DISCARDS || (i as u32 != next_from && marks[i] & SOURCE == 0))
        {
            if let Some(f) = node.f.filter(|f| !matches!(f, Formula::Zero | Formula::Struct(_))) {
                if DISCARDS && (adj[i].is_some() || marks[i] & CERTAIN != 0) {
                    lowest_reached = i as u32;
                }
                let yb = match adj[i] {
                    None => Some(None),
                    Some(Sens::Real(p)) => Some(Some((p, None))),
                    Some(Sens::Int(k)) if scales(f) => Some(Some((k as f64, None))),
                    Some(Sens::Dual(p, t)) if forward_level_running(m, tape.lift) => Some(Some((p, Some(t)))),
                    Some(Sens::Int(k))
                        if matches!(f, Formula::Add | Formula::Sub)
                            && node.n & ARITY == 2
                            && k != i64::MIN =>
                    {
                        any |= exact_sum_node(m, &node, f, k, adj, marks, i, tape.lift)?;
                        continue;
                    }
                    _ => None,
                };
                if let Some(yb) = yb {
                    any |= plain_node(m, &node, f, yb, adj, marks, i, &tape.reals, &mut reals_at, tape.lift)?;
                    continue;
                }
            }
        }
        // (a node that none reaches has no sensitivity by now: all its
        // children are done)
        let reached = adj[i].is_some();
        let mut mark = marks[i];
        if DISCARDS {
            if reached || mark & CERTAIN != 0 {
                lowest_reached = i as u32;
            }
            if i as u32 == next_from {
                let due = due_discards(&discards, &mut next, &mut next_from);
                any |= zero_discards(m, due, lowest_reached, enclosed, marks, adj, tape.lift)?;
                mark = marks[i];
            }
        }
        let Some(f) = node.f else { continue };
        if DISCARDS && mark & SOURCE != 0 {
            if node.bits & INEXACT != 0 {
                mark |= CERTAIN;
                marks[i] = mark;
            }
        } else if !reached && node.bits & INEXACT != 0 {
            mark |= TAINTED;
            marks[i] = mark;
        }
        any |= pass_marks(&node, mark, marks);
        let n = (node.n & ARITY) as usize;
        let kept = kept_mask(f, n);
        let unboxed = node.bits & UNBOXED != 0;
        let mut at = if unboxed {
            reals_at -= (kept.count_ones() + (node.bits & DUALS).count_ones()) as usize;
            reals_at
        } else {
            vals_at -= kept.count_ones() as usize;
            vals_at
        };
        let Some(yb) = adj[i].take() else { continue };
        let structural = matches!(f, Formula::Struct(_));
        let exacts = (node.bits & EXACTS) >> EXACT_SHIFT;
        // (an exact sensitivity, such as a gradient's seed 1 passed down
        // through sums, at a rule that scales it by the node's doubles: each
        // such rule (`native::vjp_num`) meets it with a double first, where
        // `num::arith` converts it as `as f64` does, so it is converted so here,
        // as `native::cotangent_duals` converts it)
        let real_yb = match yb {
            Sens::Real(p) => Some(p),
            Sens::Int(k) if exacts == 0 && scales(f) => Some(k as f64),
            _ => None,
        };
        if let (UNBOXED, Some(yb), true, false) = (node.bits & (UNBOXED | DUALS), real_yb, plain, structural)
        {
            // (the commonest node, first: doubles only, nothing metered:
            // `native::cotangent`'s first case, summed unboxed)
            let mut vs = [0.0; 3];
            for (j, v) in vs.iter_mut().enumerate() {
                if kept & (1 << j) != 0 {
                    *v = *tape.reals.get(at);
                    at += 1;
                }
            }
            match native::cotangent_f64(m, f, &vs[..n], vs[2], yb)? {
                Some(Out::One(a)) => add_unboxed(m, adj, node.parents[0], (a, None), tape.lift)?,
                Some(Out::Two(a, b)) => {
                    add_unboxed(m, adj, node.parents[0], (a, None), tape.lift)?;
                    add_unboxed(m, adj, node.parents[1], (b, None), tape.lift)?;
                }
                None => return Err(decline("a primitive without a cotangent rule")),
            }
            continue;
        }
        if let (Formula::Add, 2) = (f, n) {
            // (`+`'s rule, (cons yb yb), on any sensitivity: no arithmetic)
            let lift = tape.lift;
            add_sens(m, adj, node.parents[0], yb.clone(), lift)?;
            add_sens(m, adj, node.parents[1], yb, lift)?;
            continue;
        }
        let duals = node.bits & DUALS;
        let parts = if unboxed {
            let mut vs = [(0.0, None); 3];
            for (j, v) in vs.iter_mut().enumerate() {
                if kept & (1 << j) != 0 {
                    let p = *tape.reals.get(at);
                    at += 1;
                    if duals & (1 << j) != 0 {
                        *v = (p, Some(*tape.reals.get(at)));
                        at += 1;
                    } else {
                        v.0 = p;
                    }
                }
            }
            // (duals among the values, or a dual sensitivity reaching doubles
            // while its level runs: forward over reverse)
            let ready = exacts == 0
                && !structural
                && (duals != 0 || matches!(yb, Sens::Dual(..)) && forward_level_running(m, tape.lift));
            let unboxed_yb = match yb {
                Sens::Dual(p, t) => Some((p, Some(t))),
                _ => real_yb.map(|p| (p, None)),
            };
            if let Some(o) = (ready && unboxed_yb.is_some())
                .then(|| native::cotangent_duals_unboxed(m, f, tape.lift, &vs[..n], vs[2], unboxed_yb?))
                .flatten()
            {
                // (forward over reverse on doubles: summed unboxed)
                match o {
                    Out::One(a) => add_unboxed(m, adj, node.parents[0], a, tape.lift)?,
                    Out::Two(a, b) => {
                        add_unboxed(m, adj, node.parents[0], a, tape.lift)?;
                        add_unboxed(m, adj, node.parents[1], b, tape.lift)?;
                    }
                }
                continue;
            }
            if let (Formula::Sub, 2, true, Sens::Int(k)) = (f, n, plain, &yb) {
                if sub_exact(m, adj, &node, *k, tape.lift)? {
                    continue;
                }
            }
            let yb = yb.into_value(tape.lift);
            if let Some(o) =
                ready.then(|| native::cotangent_duals(m, f, tape.lift, &vs[..n], vs[2], &yb)).flatten()
            {
                o
            } else {
                // (rebuilt as they were)
                let value = |j: usize| match vs[j] {
                    (p, None) if exacts & (1 << j) != 0 => Value::Int(p as i64),
                    (p, None) => Value::Real(p),
                    (p, Some(t)) => forward_real(tape.lift, Value::Real(p), Value::Real(t)),
                };
                let (x, y) = ([value(0), value(1)], value(2));
                match enclosing_reverse_rule(m, f, [&x[0], &x[1]], n, &y, &yb) {
                    Some(o) => Some(o),
                    None => rule(m, f, [&x[0], &x[1]], n, &y, &yb)?,
                }
            }
        } else {
            let yb = yb.into_value(tape.lift);
            let mut x = [&zero, &zero];
            for (j, v) in x.iter_mut().enumerate() {
                if kept & (1 << j) != 0 {
                    *v = tape.vals.get(at);
                    at += 1;
                }
            }
            let y = if kept & 4 != 0 { tape.vals.get(at) } else { &zero };
            match enclosing_reverse_rule(m, f, x, n, y, &yb) {
                Some(o) => Some(o),
                None => rule(m, f, x, n, y, &yb)?,
            }
        };
        let parts = parts.ok_or_else(|| decline("a primitive without a cotangent rule"))?;
        propagate(m, adj, &node, parts, tape.lift)?;
    }
    debug_assert!(reals_at == 0 && vals_at == 0, "each node's values found");
    Ok(any)
}

/// Whether `node` is of the kinds [`plain_run`] takes (its sensitivity aside):
/// told before the call, so that a tape of other nodes pays no call a node.
#[inline(always)]
fn run_kind(node: &Node) -> bool {
    match node.f {
        None => true,
        Some(Formula::Add | Formula::Sub | Formula::Mul | Formula::Div) => {
            node.bits & (UNBOXED | DUALS | EXACTS) == UNBOXED && node.n & ARITY == 2
        }
        Some(_) => false,
    }
}

/// [`sweep_marking`]'s steps, where nothing is metered and no results were
/// dropped, for the run of the commonest nodes from node `i` down: a `+`,
/// `-`, `*` or `/` of two keeping unboxed doubles, none exact nor a dual,
/// whose sensitivity is none, a double, or an exact integer (that `*` and
/// `/` scale, as `plain_node` converts it, and `+` and `-` pass down, as
/// `exact_sum_node` does), and inputs (no formula: nothing to do). The same
/// steps as the loop's for them, on the chunk of nodes `i` is in, without
/// the loop's tests for the other kinds (a tape's sweep is mostly such
/// nodes: about a third fewer instructions a node). Stops at a node of
/// another kind, at the chunk's start, or before the next node where the
/// loop checks the limits; the number of nodes it did (0 where node `i` is
/// of another kind). `reals_at` moved back past their kept values, `any`
/// set where a parent was marked.
#[inline(never)]
fn plain_run(
    m: &mut Machine,
    tape: &Tape,
    adj: &mut [Option<Sens>],
    marks: &mut [u8],
    i: usize,
    reals_at: usize,
) -> Result<(usize, usize, bool)> {
    let chunk = tape.nodes.chunk_of(i);
    let base = i / CHUNK * CHUNK;
    // (the lowest node of the run: above the next node where the limits are
    // checked, unless `i` is that node, and within the chunk)
    let lowest = match i / SWEEP_CHECK_EVERY * SWEEP_CHECK_EVERY {
        _ if i.is_multiple_of(SWEEP_CHECK_EVERY) => i,
        0 => 0,
        checked => checked + 1,
    };
    debug_assert!(lowest >= base);
    let (lift, mut reals_at, mut any) = (tape.lift, reals_at, false);
    let mut j = i;
    loop {
        let node = chunk[j - base];
        // (an input has no formula: nothing to do, as the loop does nothing)
        if let Some(f) = node.f {
            if !run_kind(&node) {
                break;
            }
            let product = matches!(f, Formula::Mul | Formula::Div);
            let yb = match adj[j] {
                None => None,
                Some(Sens::Real(p)) => Some((p, None)),
                Some(Sens::Int(k)) if product => Some((k as f64, None)),
                Some(Sens::Int(k)) if k != i64::MIN => {
                    any |= exact_sum_node(m, &node, f, k, adj, marks, j, lift)?;
                    if j == lowest {
                        return Ok((i - j + 1, reals_at, any));
                    }
                    j -= 1;
                    continue;
                }
                _ => break,
            };
            any |= plain_node(m, &node, f, yb, adj, marks, j, &tape.reals, &mut reals_at, lift)?;
        }
        if j == lowest {
            return Ok((i - j + 1, reals_at, any));
        }
        j -= 1;
    }
    Ok((i - j, reals_at, any))
}

/// Passes a node's marks `mark` (its `TAINTED` and `CERTAIN` bits) on to its
/// parents; whether it had any to pass.
#[inline(always)]
fn pass_marks(node: &Node, mark: u8, marks: &mut [u8]) -> bool {
    let mark = mark & (TAINTED | CERTAIN);
    if mark == 0 {
        return false;
    }
    let mut any = false;
    for &p in &node.parents {
        if p != NONE {
            marks[p as usize] |= mark;
            any = true;
        }
    }
    any
}

/// [`sweep`]'s step of a `+` or `-` of two (node `i`, formula `f`, no values
/// kept) whose sensitivity is the exact integer `k` (not `i64::MIN`), such as
/// a gradient's seed 1: `k` to the first parent, `k` or `-k` to the second,
/// as the general step sums them (`add_sens`, `sub_exact`), the marks passed
/// on as [`plain_node`] passes them. Whether a parent was marked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn exact_sum_node(
    m: &mut Machine,
    node: &Node,
    f: Formula,
    k: i64,
    adj: &mut [Option<Sens>],
    marks: &mut [u8],
    i: usize,
    lift: u32,
) -> Result<bool> {
    let any = pass_marks(node, marks[i], marks);
    adj[i] = None;
    add_int(m, adj, node.parents[0], k, lift)?;
    add_int(m, adj, node.parents[1], if f == Formula::Sub { -k } else { k }, lift)?;
    Ok(any)
}

/// [`sweep_marking`]'s steps for a node `i` of formula `f` (not `Zero` nor
/// structural) keeping unboxed doubles, none exact nor a dual, whose
/// sensitivity `yb` is a double `(p, None)` or a real of the running forward
/// level `lift` made of doubles `(p, Some(t))` (or none), with nothing
/// metered: its marks passed to its parents (whether any was: the sweep's
/// result), its kept values found (`reals_at` moved back past them) and,
/// where it has a sensitivity, its rule's cotangents (as
/// `native::cotangent_f64`, or for a dual `native::cotangent_duals_unboxed`,
/// computes them, by the same operations) added to its parents'.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn plain_node(
    m: &mut Machine,
    node: &Node,
    f: Formula,
    yb: Option<(f64, Option<f64>)>,
    adj: &mut [Option<Sens>],
    marks: &mut [u8],
    i: usize,
    reals: &Chunks<f64>,
    reals_at: &mut usize,
    lift: u32,
) -> Result<bool> {
    let mut mark = marks[i];
    if yb.is_none() && node.bits & INEXACT != 0 {
        mark |= TAINTED;
        marks[i] = mark;
    }
    let any = pass_marks(node, mark, marks);
    let n = (node.n & ARITY) as usize;
    let yb = match yb {
        Some((p, None)) => Some(p),
        Some((p, Some(t))) if (f, n) == (Formula::Add, 2) => {
            // (forward over reverse: `+`'s rule, (cons yb yb), no arithmetic)
            adj[i] = None;
            add_unboxed(m, adj, node.parents[0], (p, Some(t)), lift)?;
            add_unboxed(m, adj, node.parents[1], (p, Some(t)), lift)?;
            return Ok(any);
        }
        Some((p, Some(t))) => {
            // (forward over reverse: the general sweep's case for it)
            let kept = kept_mask(f, n);
            *reals_at -= KEPT_COUNT[kept as usize] as usize;
            adj[i] = None;
            let vs = reals.kept(*reals_at, kept).map(|v| (v, None));
            match native::cotangent_duals_unboxed(m, f, lift, &vs[..n], vs[2], (p, Some(t))) {
                Some(Out::One(a)) => add_unboxed(m, adj, node.parents[0], a, lift)?,
                Some(Out::Two(a, b)) => {
                    add_unboxed(m, adj, node.parents[0], a, lift)?;
                    add_unboxed(m, adj, node.parents[1], b, lift)?;
                }
                None => return Err(decline("a primitive without a cotangent rule on duals")),
            }
            return Ok(any);
        }
        None => None,
    };
    // (`native::vjp_num`'s rules on doubles, the same operations in the same
    // order; `+`, `-`, `*`, `/` of two told apart, the rest by `cotangent_f64`)
    let (a, b) = match (f, n) {
        (Formula::Add, 2) | (Formula::Sub, 2) => {
            let Some(yb) = yb else { return Ok(any) };
            adj[i] = None;
            (yb, if f == Formula::Add { yb } else { 0.0 - yb })
        }
        (Formula::Mul, 2) | (Formula::Div, 2) => {
            // (`*` keeps its operands, `/` its second operand and its result)
            *reals_at -= 2;
            let Some(yb) = yb else { return Ok(any) };
            adj[i] = None;
            let (u, v) = reals.pair(*reals_at);
            if f == Formula::Mul {
                (yb * v, yb * u)
            } else {
                (yb / u, 0.0 - yb * v / u)
            }
        }
        _ => {
            let kept = kept_mask(f, n);
            *reals_at -= KEPT_COUNT[kept as usize] as usize;
            let Some(yb) = yb else { return Ok(any) };
            adj[i] = None;
            let vs = reals.kept(*reals_at, kept);
            match native::cotangent_f64(m, f, &vs[..n], vs[2], yb)? {
                Some(Out::One(a)) => {
                    add_real(m, adj, node.parents[0], a, lift)?;
                    return Ok(any);
                }
                Some(Out::Two(a, b)) => (a, b),
                None => return Err(decline("a primitive without a cotangent rule")),
            }
        }
    };
    add_real(m, adj, node.parents[0], a, lift)?;
    add_real(m, adj, node.parents[1], b, lift)?;
    Ok(any)
}

/// How many of a node's values a `kept_mask` keeps.
const KEPT_COUNT: [u8; 8] = [0, 1, 1, 2, 1, 2, 2, 3];

/// `sweep`'s marks of a node (one byte each): below a node that no
/// sensitivity reached and whose operands or result are inexact (the
/// transform may give it a zero: see `exactness_may_differ`)...
const TAINTED: u8 = 1;
/// ... below a node that the transform surely gives a zero, with an inexact
/// operand or result (so the transform's sensitivity of each node below is
/// inexact)...
const CERTAIN: u8 = 2;
/// ... a node of a dropped result (see [`Discard`]) whose cotangent's
/// backward phase runs: the transform gives it a zero.
const SOURCE: u8 = 4;

/// The dropped results whose `from` the sweep is at (`discards[*next..]`,
/// the last first; every node from `from` on is done, so whether a node of
/// a nested run's sweep was reached or surely gets a zero is known: the
/// sweep's `lowest_reached`, the last such node so far, is at most its `to`).
/// Moves `next` and `next_from` on.
fn due_discards<'d>(discards: &'d [Discard], next: &mut usize, next_from: &mut u32) -> &'d [Discard] {
    let start = *next;
    while discards.get(*next).is_some_and(|d| d.from == *next_from) {
        *next += 1;
    }
    *next_from = discards.get(*next).map_or(NONE, |d| d.from);
    &discards[start..*next]
}

/// The zeros of the dropped results `due` whose cotangents' backward phases
/// run in the transform (see [`due_discards`]). On the outermost tape their
/// nodes are marked `SOURCE` (no arithmetic: the sweep marks what is below
/// them `CERTAIN`); whether it marked any. On a tape that a level encloses
/// (`enclosed`) the transform's zeros compute with that level's reals (`0.0`
/// times one of them is a node there, whose own zeros the enclosing level's
/// exactness depends on), so each node gets its zero as the transform gives
/// it, `(zero y)` of its value (a real of the enclosing levels), added to its
/// sensitivity, and the sweep runs the rules below it on that, recording there
/// what the transform computes.
#[inline(never)]
fn zero_discards(
    m: &mut Machine,
    due: &[Discard],
    lowest_reached: u32,
    enclosed: bool,
    marks: &mut [u8],
    adj: &mut [Option<Sens>],
    lift: u32,
) -> Result<bool> {
    let mut any = false;
    for d in due.iter().filter(|d| lowest_reached <= d.to) {
        if enclosed {
            for (&y, v) in d.y.iter().zip(&d.values) {
                let z = zero_active(m, v)?;
                add_to(m, adj, y, z, lift)?;
            }
        } else {
            for &y in &d.y {
                marks[y as usize] |= SOURCE;
            }
            any = true;
        }
    }
    Ok(any)
}

/// `-`'s rule, (cons yb (- 0 yb)), in the sweep, on an exact sensitivity `yb`
/// = `k`, such as a gradient's seed 1 reaching `(- 0.0 (f x))`: `(- 0 yb)` as
/// the rule computes it, exact, added to the node's parents; `false` (nothing
/// done) at its one overflow, -2^63, left to the rule. (Out of `sweep`'s loop,
/// whose other cases it would make slower.)
#[inline(never)]
fn sub_exact(m: &mut Machine, adj: &mut [Option<Sens>], node: &Node, k: i64, lift: u32) -> Result<bool> {
    let Some(neg) = k.checked_neg() else { return Ok(false) };
    add_int(m, adj, node.parents[0], k, lift)?;
    add_int(m, adj, node.parents[1], neg, lift)?;
    Ok(true)
}

/// `f` (`+ - * /`) on `a` and `b`, reals of one enclosing tape held as
/// doubles, or doubles, or small exact integers, not all constants, with
/// nothing metered: recorded on that tape as the evaluator records its
/// arithmetic there (`level_arith2`). The general path (`native::lifted_op`,
/// through `Rv`) records the same operation on the same parents, through more
/// layers (see [`enclosing_reverse_rule`] for an exact integer operand).
/// `None`, with nothing recorded, where that does not apply.
fn enclosing_tape_arith2(m: &mut Machine, f: Formula, a: &Value, b: &Value) -> Option<Value> {
    if m.meter.is_some() || m.meter_derivative.is_some() {
        return None;
    }
    tapes_arith2(&mut m.tape, f, a, b)
}

/// [`enclosing_tape_arith2`], the caller having checked that nothing is metered.
fn tapes_arith2(tapes: &mut Tapes, f: Formula, a: &Value, b: &Value) -> Option<Value> {
    tapes_arith2_parts(tapes, f, a, b).map(Level::into_value)
}

/// [`tapes_arith2`], its result as parts.
fn tapes_arith2_parts(tapes: &mut Tapes, f: Formula, a: &Value, b: &Value) -> Option<Level> {
    if !matches!(f, Formula::Add | Formula::Sub | Formula::Mul | Formula::Div) {
        return None;
    }
    let id = match (a, b) {
        (Value::TapeReal(t, ..), _) | (_, Value::TapeReal(t, ..)) => *t as u32,
        _ => return None,
    };
    let (x, y) = (plain_real(a, id)?, plain_real(b, id)?);
    if x.1 == NONE && y.1 == NONE {
        return None;
    }
    let k = tapes.stack.iter().rposition(|t| t.id == id)?;
    let t = &mut tapes.stack[k];
    if t.forward {
        return None;
    }
    Some(t.push_plain2(f, x, y))
}

/// An operand of [`nested_doubles`] on tape `id`: its node there (`own`,
/// `NONE` for a constant), whether it is a real of the tape at all (`ours`),
/// and its value on the enclosing levels: a real of enclosing tape `t` (node
/// `node`) held as the double `p`, or a double or small exact integer (`t` and
/// `node` `NONE`; `exact` for the integer, as `plain_real` takes it).
#[derive(Clone, Copy)]
struct NestedPart {
    own: u32,
    ours: bool,
    t: u32,
    node: u32,
    p: f64,
    exact: bool,
}

impl NestedPart {
    /// `v`'s parts, where it is a real of tape `id` whose value is a double or
    /// an enclosing tape's real held as one, or an enclosing tape's real, or
    /// a double or small exact integer; `None` for anything else.
    #[inline(always)]
    fn of(v: &Value, id: u32) -> Option<NestedPart> {
        let (own, ours, t, node, p, exact) = match v {
            Value::TapeReal(t, node, p) if *t as u32 == id => (*node, true, NONE, NONE, *p, false),
            Value::TapeReal(t, node, p) => (NONE, false, *t as u32, *node, *p, false),
            Value::Active(r) if r.tape == id => match r.value {
                Value::TapeReal(t, node, p) if t as u32 != id => (r.node, true, t as u32, node, p, false),
                _ => return None,
            },
            Value::Real(p) => (NONE, false, NONE, NONE, *p, false),
            Value::Int(k) if k.unsigned_abs() <= EXACT_AS_DOUBLE as u64 => {
                (NONE, false, NONE, NONE, *k as f64, true)
            }
            _ => return None,
        };
        Some(NestedPart { own, ours, t, node, p, exact })
    }

    /// Its value on the enclosing levels, as `nested_tape_arith2`'s `part`
    /// takes it.
    #[inline(always)]
    fn value(&self) -> Value {
        if self.t != NONE {
            Value::TapeReal(self.t as u16, self.node, self.p)
        } else if self.exact {
            Value::Int(self.p as i64)
        } else {
            Value::Real(self.p)
        }
    }
}

/// [`nested_tape_arith2`] where it applies to `x` and `y` as [`NestedPart`]s
/// (a real of tape `id`, the level running now, and one of an enclosing tape
/// or whose value is one, the others constants): `Some` of its result, the
/// same value recorded on the same nodes, without the tries of the other
/// cases that [`level_arith2_parts`] makes before it (reverse over reverse:
/// an inner function's arithmetic on its own variable and the outer one's).
/// `None` where those operands are not such (the caller goes on as before).
#[inline(always)]
fn nested_doubles(tapes: &mut Tapes, id: u32, f: Formula, x: &Value, y: &Value) -> Option<Option<Level>> {
    let (a, b) = (NestedPart::of(x, id)?, NestedPart::of(y, id)?);
    if !(a.ours || b.ours) || (a.t == NONE && b.t == NONE) {
        return None;
    }
    // (from here the steps before `nested_tape_arith2` decline, as does
    // `tapes_arith2_parts` on `x` and `y` after it: its result is the result)
    let t = if a.t != NONE { a.t } else { b.t };
    if (a.t != NONE && a.t != t) || (b.t != NONE && b.t != t) || (a.node == NONE && b.node == NONE) {
        return Some(None);
    }
    let Some(k) = tapes.stack.iter().rposition(|l| l.id == t) else { return Some(None) };
    let outer = &mut tapes.stack[k];
    if outer.forward {
        return Some(None);
    }
    let (outer_node, v) = outer.push_plain2_node(f, (a.p, a.node, a.exact), (b.p, b.node, b.exact));
    let v = Value::TapeReal(t as u16, outer_node, v);
    let Some(inner) = tapes.stack.last_mut() else { return Some(None) };
    let node = inner.push_op(f, 2, [a.own, b.own], [a.value(), b.value()], &v);
    Some(Some(Level::Active(crate::value::rc_build(|| Active {
        tape: id,
        node,
        value: v,
        tangent: Value::Nil,
    }))))
}

/// [`level_arith2`] on tape `id` (the level running now) of operands one of
/// which at least is a real of it, and one at least an enclosing tape's real
/// or a real of this tape whose value is one (reverse over reverse: a
/// function that closes over the enclosing level's variable, say), the others
/// constants: the value computed on that tape ([`tapes_arith2`]), then
/// recorded here (`Tape::push_op`), as `record` computes and records it.
/// `None`, with nothing recorded, where that does not apply.
fn nested_tape_arith2(tapes: &mut Tapes, id: u32, f: Formula, x: &Value, y: &Value) -> Option<Level> {
    // (an operand's node on this tape, `NONE` for a constant, and its value there)
    let part = |v: &Value| match v {
        Value::Active(r) if r.tape == id => Some((r.node, r.value.clone())),
        Value::TapeReal(t, node, p) if *t as u32 == id => Some((*node, Value::Real(*p))),
        Value::TapeReal(..) | Value::Real(_) | Value::Int(_) => Some((NONE, v.clone())),
        _ => None,
    };
    let ours = |v: &Value| own_node(v, id).is_some();
    let enclosing = |v: &Value| match v {
        Value::Active(r) => r.tape == id && matches!(r.value, Value::TapeReal(..)),
        Value::TapeReal(t, ..) => *t as u32 != id,
        _ => false,
    };
    if !((ours(x) || ours(y)) && (enclosing(x) || enclosing(y))) {
        return None;
    }
    let ((na, a), (nb, b)) = (part(x)?, part(y)?);
    let v = tapes_arith2(tapes, f, &a, &b)?;
    let t = tapes.stack.last_mut()?;
    let node = t.push_op(f, 2, [na, nb], [a, b], &v);
    Some(reverse_real_level(id, node, v))
}

/// The id of the level running now (the top of the stack) if it is a reverse
/// one (a tape) and nothing is metered: the level an inner tape's sweep records
/// its arithmetic on, reverse over reverse.
#[inline(always)]
fn enclosing_tape(m: &Machine) -> Option<u32> {
    let t = m.tape.stack.last()?;
    (!t.forward && m.meter.is_none() && m.meter_derivative.is_none()).then_some(t.id)
}

/// Is `v` a real of tape `id` held as a double (`Some(true)`), or a double
/// (`Some(false)`)?
#[inline(always)]
fn on_tape(v: &Value, id: u32) -> Option<bool> {
    match v {
        Value::TapeReal(t, node, _) if *t as u32 == id && *node != NONE => Some(true),
        Value::Real(_) => Some(false),
        _ => None,
    }
}

/// Reverse over reverse: the cotangent rule of a `*`, `-`, `/` or `sqrt` node
/// whose kept operands and result (`y`) are reals of the enclosing tape (the
/// level running now) or doubles, and whose sensitivity `yb` is too (or a
/// small exact integer, as a gradient's seed 1), recorded on that tape as the evaluator records its
/// arithmetic (`level_arith2`): the operations of `native::vjp_num`, in its
/// order, which the general path (`rule`, through `native::lifted_op`) records
/// on the same parents, through more layers. (Where an operand is a small exact
/// integer, a gradient's seed 1, that path's node keeps it boxed, this one as a
/// double marked exact, as the evaluator's own recording does,
/// `record_doubles`: the backward sweep reads the same number from either.)
/// An operation of two constants gives a constant, as the general path
/// computes it. `None`, with nothing recorded, where that does not apply.
fn enclosing_reverse_rule(
    m: &mut Machine,
    f: Formula,
    x: [&Value; 2],
    n: usize,
    y: &Value,
    yb: &Value,
) -> Option<Out<Value>> {
    use crate::resolve::Op2;
    let id = enclosing_tape(m)?;
    let yb_on = match yb {
        Value::Int(_) => plain_real(yb, id).map(|_| false),
        _ => on_tape(yb, id),
    }?;
    // (`op` on `a` and `b`, recorded where either is the tape's; of two
    // constants, a constant, by the evaluator's inline arithmetic, which
    // computes it as `X64` does: doubles unless both are exact, then exact)
    let arith = |m: &mut Machine, op: Op2, (a, a_on): (&Value, bool), (b, b_on): (&Value, bool)| {
        if a_on || b_on {
            level_arith2(&mut m.tape, op, a, b)
        } else {
            crate::eval::inline_arith(op, a, b)
        }
    };
    match (f, n) {
        // (cons (* yb x2) (* yb x1)) (two doubles at most among the four: no
        // exact product)
        (Formula::Mul, 2) => {
            let (x0, x1) = (on_tape(x[0], id)?, on_tape(x[1], id)?);
            let a = arith(m, Op2::Mul, (yb, yb_on), (x[1], x1))?;
            Some(Out::Two(a, arith(m, Op2::Mul, (yb, yb_on), (x[0], x0))?))
        }
        // (cons yb (- 0 yb))
        (Formula::Sub, 2) => {
            Some(Out::Two(yb.clone(), arith(m, Op2::Sub, (&Value::Int(0), false), (yb, yb_on))?))
        }
        // (cons (/ yb x2) (- 0 (/ (* yb y) x2)))
        (Formula::Div, 2) => {
            let (x1, y_on) = (on_tape(x[1], id)?, on_tape(y, id)?);
            let a = arith(m, Op2::Div, (yb, yb_on), (x[1], x1))?;
            let b = arith(m, Op2::Mul, (yb, yb_on), (y, y_on))?;
            let b_on = on_tape(&b, id)?;
            let c = arith(m, Op2::Div, (&b, b_on), (x[1], x1))?;
            let c_on = on_tape(&c, id)?;
            Some(Out::Two(a, arith(m, Op2::Sub, (&Value::Int(0), false), (&c, c_on))?))
        }
        // (/ yb (* 2 y))
        (Formula::Sqrt, 1) => {
            let y_on = on_tape(y, id)?;
            let a = arith(m, Op2::Mul, (&Value::Int(2), false), (y, y_on))?;
            let a_on = on_tape(&a, id)?;
            Some(Out::One(arith(m, Op2::Div, (yb, yb_on), (&a, a_on))?))
        }
        _ => None,
    }
}

/// Whether the tangent and cotangent rules of formula `f` multiply or divide
/// each tangent and the sensitivity by the operands or the result (all but `+`
/// and `-`, which sum or negate them, exact where they are exact).
fn scales(f: Formula) -> bool {
    use Formula::*;
    matches!(f, Mul | Div | Sqrt | Exp | Log | Sin | Cos | Atan)
}

/// The cotangent rule of a node of formula `f`, operands `x` (the first `n`),
/// result `y` and sensitivity `yb`.
fn rule(
    m: &mut Machine,
    f: Formula,
    x: [&Value; 2],
    n: usize,
    y: &Value,
    yb: &Value,
) -> Result<Option<Out<Value>>> {
    match f {
        // `zero`'s rule: (zero x)
        Formula::Struct(StructOp::Zero) => Ok(Some(Out::One(super::ops::zero(m, x[0])?))),
        _ => native::cotangent(m, f, &x[..n], y, yb),
    }
}

/// Adds a node's cotangent (its one or two parts) to its parents' sensitivities.
#[inline(always)]
fn propagate(
    m: &mut Machine,
    adj: &mut [Option<Sens>],
    node: &Node,
    parts: Out<Value>,
    lift: u32,
) -> Result<()> {
    let (a, b) = match parts {
        Out::One(a) => (a, None),
        Out::Two(a, b) => (a, Some(b)),
    };
    add_to(m, adj, node.parents[0], a, lift)?;
    if let Some(b) = b {
        add_to(m, adj, node.parents[1], b, lift)?;
    }
    Ok(())
}

/// A node's sensitivity in the sweep: a double, an exact integer that fits
/// in a machine word (a gradient's seed 1, passed down through sums and
/// differences), or a real of the tape's forward level `lift` made of doubles
/// (its value and tangent), unboxed; anything else as a value.
#[derive(Clone)]
enum Sens {
    Real(f64),
    Int(i64),
    Dual(f64, f64),
    Boxed(Value),
}

impl Sens {
    /// `v` as a sensitivity, unboxed where it is a double or a real of forward
    /// level `lift` made of doubles.
    fn of_level(v: Value, lift: u32) -> Sens {
        match &v {
            Value::Real(r) => Sens::Real(*r),
            Value::Int(k) => Sens::Int(*k),
            Value::Active(a) if a.node == NONE && a.tape == lift && lift != NONE => {
                match (&a.value, &a.tangent) {
                    (Value::Real(p), Value::Real(t)) => Sens::Dual(*p, *t),
                    _ => Sens::Boxed(v),
                }
            }
            _ => Sens::Boxed(v),
        }
    }

    /// `v` as a sensitivity (unboxed if a double).
    fn of(v: Value) -> Sens {
        Sens::of_level(v, NONE)
    }

    /// As a value (a dual: a real of forward level `lift`).
    fn into_value(self, lift: u32) -> Value {
        match self {
            Sens::Real(r) => Value::Real(r),
            Sens::Int(k) => Value::Int(k),
            Sens::Dual(p, t) => forward_real(lift, Value::Real(p), Value::Real(t)),
            Sens::Boxed(v) => v,
        }
    }
}

/// [`add_to`] of a sensitivity.
#[inline(always)]
fn add_sens(m: &mut Machine, adj: &mut [Option<Sens>], node: u32, c: Sens, lift: u32) -> Result<()> {
    match c {
        Sens::Real(p) => add_unboxed(m, adj, node, (p, None), lift),
        Sens::Int(k) => add_int(m, adj, node, k, lift),
        Sens::Dual(p, t) => add_unboxed(m, adj, node, (p, Some(t)), lift),
        Sens::Boxed(v) => add_to(m, adj, node, v, lift),
    }
}

/// [`add_to`] of an exact integer `k`, unboxed where the sensitivity is an
/// exact integer the sum fits in, or a double (as `num::arith` sums them: the
/// integer converted, the sum a double).
#[inline(always)]
fn add_int(m: &mut Machine, adj: &mut [Option<Sens>], node: u32, k: i64, lift: u32) -> Result<()> {
    if node == NONE {
        return Ok(());
    }
    let slot = &mut adj[node as usize];
    let sum = match &*slot {
        None => Sens::Int(k),
        Some(Sens::Int(old)) => match old.checked_add(k) {
            Some(s) => Sens::Int(s),
            None => return add_to(m, adj, node, Value::Int(k), lift),
        },
        Some(Sens::Real(old)) => Sens::Real(old + k as f64),
        _ => return add_to(m, adj, node, Value::Int(k), lift),
    };
    if slot.is_some() {
        m.ad_work += 1;
    }
    *slot = Some(sum);
    Ok(())
}

/// [`add_unboxed`] of a double `c`, the commonest cases (no sensitivity yet,
/// or a double) first.
#[inline(always)]
fn add_real(m: &mut Machine, adj: &mut [Option<Sens>], node: u32, c: f64, lift: u32) -> Result<()> {
    if node == NONE {
        return Ok(());
    }
    match &mut adj[node as usize] {
        slot @ None => *slot = Some(Sens::Real(c)),
        Some(Sens::Real(old)) => {
            *old += c;
            m.ad_work += 1;
        }
        _ => return add_unboxed(m, adj, node, (c, None), lift),
    }
    Ok(())
}

/// [`add_to`] of a double `(c, None)` or a real of the tape's forward level
/// `lift` made of doubles `(c, Some(t))`, unboxed where the sensitivity is: as
/// `native::lifted_op` sums them (a plain double's tangent is its zero).
#[inline(always)]
fn add_unboxed(
    m: &mut Machine,
    adj: &mut [Option<Sens>],
    node: u32,
    c: (f64, Option<f64>),
    lift: u32,
) -> Result<()> {
    if node == NONE {
        return Ok(());
    }
    let slot = &mut adj[node as usize];
    let sum = match (&*slot, c) {
        (None, (p, None)) => Sens::Real(p),
        (None, (p, Some(t))) => Sens::Dual(p, t),
        (Some(Sens::Real(old)), (p, None)) => Sens::Real(old + p),
        // (as `num::arith` sums an exact integer and a double)
        (Some(Sens::Int(old)), (p, None)) => Sens::Real(*old as f64 + p),
        (Some(Sens::Real(old)), (p, Some(t))) if m.meter.is_none() => Sens::Dual(old + p, 0.0 + t),
        (Some(Sens::Dual(op, ot)), (p, None)) if m.meter.is_none() => Sens::Dual(op + p, ot + 0.0),
        (Some(Sens::Dual(op, ot)), (p, Some(t))) if m.meter.is_none() => Sens::Dual(op + p, ot + t),
        _ => {
            let c = match c {
                (p, None) => Value::Real(p),
                (p, Some(t)) => forward_real(lift, Value::Real(p), Value::Real(t)),
            };
            return add_to(m, adj, node, c, lift);
        }
    };
    if slot.is_some() {
        m.ad_work += 1;
    }
    *slot = Some(sum);
    Ok(())
}

/// Adds a cotangent to a node's sensitivity (as `plus` does: not metered).
fn add_to(m: &mut Machine, adj: &mut [Option<Sens>], node: u32, c: Value, lift: u32) -> Result<()> {
    if node == NONE {
        return Ok(());
    }
    let slot = &mut adj[node as usize];
    *slot = Some(Sens::of_level(
        match slot.take() {
            None => c,
            Some(old) => {
                let old = old.into_value(lift);
                m.ad_work += 1;
                match (&old, &c) {
                    (Value::Real(a), Value::Real(b)) => Value::Real(a + b),
                    // (reals of the enclosing tape, reverse over reverse: summed
                    // there, as `add_slow` records the sum, without its layers)
                    (Value::TapeReal(..), _) | (_, Value::TapeReal(..))
                        if enclosing_tape(m)
                            .is_some_and(|id| on_tape(&old, id).is_some() && on_tape(&c, id).is_some()) =>
                    {
                        match level_arith2(&mut m.tape, crate::resolve::Op2::Add, &old, &c) {
                            Some(v) => v,
                            None => add_slow(m, old, c)?,
                        }
                    }
                    // (reals of one forward level, made of doubles: summed there,
                    // as `native::lifted_op` sums them)
                    (Value::Active(a), Value::Active(b))
                        if a.node == NONE
                            && b.node == NONE
                            && a.tape == b.tape
                            && forward_level_running(m, a.tape) =>
                    {
                        match (&a.value, &a.tangent, &b.value, &b.tangent) {
                            (Value::Real(ap), Value::Real(at), Value::Real(bp), Value::Real(bt))
                                if m.meter.is_none() =>
                            {
                                forward_real(a.tape, Value::Real(ap + bp), Value::Real(at + bt))
                            }
                            _ => add_slow(m, old, c)?,
                        }
                    }
                    _ if old.is_number() && c.is_number() => num::arith('+', &old, &c)
                        .unwrap_or_else(|| Err("not numbers".into()))
                        .map_err(|e| Error::runtime(None, format!("+: {e}")))?,
                    _ => add_slow(m, old, c)?,
                }
            }
        },
        lift,
    ));
    Ok(())
}

/// [`add_to`]'s sum of a sensitivity on an enclosing level: summed there, by
/// `plus`'s rules (not counted as arithmetic at any level); unboxed where it is
/// a forward level's real.
fn add_slow(m: &mut Machine, old: Value, c: Value) -> Result<Value> {
    match native::lifted_op(m, Formula::Add, &[&old, &c]) {
        Some(v) => Ok(v),
        None => {
            let (meter, derivative) = (m.meter.take(), m.meter_derivative.take());
            let r = native::apply_unmetered(m, native::add_id(), &[old, c]);
            (m.meter, m.meter_derivative) = (meter, derivative);
            r
        }
    }
}

/// Is level `id` running, and a forward one (dual numbers)?
pub(super) fn forward_level_running(m: &Machine, id: u32) -> bool {
    m.tape.forward_running(id)
}

/// A real of forward level `id` (its value and tangent).
#[inline]
pub(super) fn forward_real(id: u32, value: Value, tangent: Value) -> Value {
    Value::Active(forward_real_rc(id, value, tangent))
}

/// [`forward_real`]'s cell.
#[inline(always)]
pub(super) fn forward_real_rc(id: u32, value: Value, tangent: Value) -> Rc<Active> {
    crate::value::rc_build(|| Active { tape: id, node: NONE, value, tangent })
}

/// `x`'s shape with the sensitivity of each of its reals (the inputs, in
/// order): their zero where nothing reached them.
fn cotangent(m: &mut Machine, x: &Value, sens: &mut [Option<Value>], k: &mut usize) -> Result<Value> {
    // (a proper list of reals, the commonest, down its spine: each as the
    // last arm below makes it)
    if let (Value::Pair(_), Some(mut items)) = (x, flat_list_of_reals(x)) {
        let mut out = ListBuilder::new();
        while let Value::Pair(p) = items {
            out.push(cotangent_real(m, &p.car, sens, k)?);
            items = &p.cdr;
        }
        return Ok(out.finish(Value::Nil));
    }
    Ok(match x {
        Value::Pair(p) => map_spine(p, &mut |v| cotangent(m, v, sens, k))?,
        Value::Nil | Value::Bool(_) => x.clone(),
        _ => cotangent_real(m, x, sens, k)?,
    })
}

/// Keeps `v`, emptied, in `spare` for the next run (the sensitivities' and
/// marks' vectors), unless it grew past [`SPARE_ADJ`].
#[inline(always)]
fn keep_spare<T>(spare: &mut Vec<T>, mut v: Vec<T>) {
    v.clear();
    if v.capacity() <= SPARE_ADJ {
        *spare = v;
    }
}

/// [`cotangent`] of `x`, a proper list of reals (`flat_list_of_reals`) whose
/// `j`th element is input `inputs[j]`, from the sensitivities `adj` (taken).
fn flat_cotangent(
    m: &mut Machine,
    x: &Value,
    inputs: &[u32],
    adj: &mut [Option<Sens>],
    lift: u32,
) -> Result<Value> {
    let mut out = ListBuilder::new();
    let mut items = x;
    let mut j = 0;
    while let Value::Pair(p) = items {
        out.push(match adj[inputs[j] as usize].take() {
            Some(s) => s.into_value(lift),
            // (the transform's (zero x): on x's own levels, if any)
            None => zero_active(m, &p.car)?,
        });
        j += 1;
        items = &p.cdr;
    }
    Ok(out.finish(Value::Nil))
}

/// [`cotangent`] of real `x`, the `k`th input.
#[inline(always)]
fn cotangent_real(m: &mut Machine, x: &Value, sens: &mut [Option<Value>], k: &mut usize) -> Result<Value> {
    let i = *k;
    *k += 1;
    match sens[i].take() {
        Some(c) => Ok(c),
        // (the transform's (zero x): on x's own levels, if any)
        None => zero_active(m, x),
    }
}

/// Could the transform give an inexact cotangent where the tape's `xb` has an
/// exact one? The transform applies each operation's cotangent rule to the
/// sensitivity that reaches its result, and a pair's sensitivity carries the
/// zero of each part that none reached (`(car (list x (* 1.5 x)))` gives
/// `(* 1.5 x)` a zero), where the tape skips the operation. A zero through a
/// rule that computes with an inexact number is inexact (0.0), and added to an
/// exact cotangent makes it inexact. So: is an input whose cotangent is exact
/// below a node that no sensitivity reached and whose operands or result are
/// inexact? (It may answer yes where no zero reaches that node, as when its
/// value is only compared: the run then gives way needlessly, not wrongly.
/// It does not see the zero a pair's sensitivity gives an input that is a
/// part of the pair, as in `(let (((cons u w) (cons x 2))) (- x w))`.)
/// (`marks`: `TAINTED` or `CERTAIN` on the nodes below such a node, from the
/// sweep, which finds them, less the inputs `add_certain_zeros` made inexact.)
fn exactness_may_differ(marks: &[u8], inputs: &[u32], xb: &Value) -> bool {
    // the cotangents of the inputs, in order (walked as `cotangent` built them)
    let leaves = reals_in_order(xb).unwrap_or_default();
    inputs.iter().zip(leaves).any(|(&n, c)| marks[n as usize] & (TAINTED | CERTAIN) != 0 && !is_inexact(c))
}

/// `zero` of an active real (`ops::zero`): a real of its level, the zero of
/// its value, as the transform's `zero` gives: on a forward level with the
/// zero of its tangent (the rule `(zero dx)`), on a tape a node whose
/// cotangent rule is `(zero x)`.
pub fn zero_active(m: &mut Machine, v: &Value) -> Result<Value> {
    if let Value::TapeReal(t, node, p) = *v {
        // (the `Active` it stands for, read in place: its value's zero is
        // 0.0, counted as `ops::zero` counts it; its level is a tape)
        let id = t as u32;
        if let Some(k) = running(m, id).filter(|&k| !m.tape.stack[k].forward) {
            m.ad_work += 1;
            return Ok(zero_on_tape(m, k, node, Value::Real(p), Value::Real(0.0)));
        }
        return zero_active(m, &v.clone().boxed_active());
    }
    let Value::Active(a) = v else { return Ok(zero_of(v)) };
    if a.value.is_number()
        && a.tangent.is_number()
        && running(m, a.tape).is_some_and(|k| m.tape.stack[k].forward)
    {
        // (a dual number of numbers on a running level, the commonest:
        // `ops::zero` of each is its `zero_like`, counted as those two calls
        // count it)
        m.ad_work += 2;
        return Ok(forward_real(a.tape, num::zero_like(&a.value), num::zero_like(&a.tangent)));
    }
    let value = super::ops::zero(m, &a.value)?;
    let k = level(m, a.tape)?;
    if m.tape.stack[k].forward {
        let tangent = super::ops::zero(m, &a.tangent)?;
        return Ok(forward_real(a.tape, value, tangent));
    }
    Ok(zero_on_tape(m, k, a.node, a.value.clone(), value))
}

/// The zero `value` of the real of the tape at index `k` of the running
/// levels whose node is `node` and value `x`: a node whose cotangent rule is
/// `(zero x)`, and its real.
#[inline(always)]
fn zero_on_tape(m: &mut Machine, k: usize, node: u32, x: Value, value: Value) -> Value {
    // (a zero is exact as its real is: the node is inexact as the real is)
    let zero = push_op(m, k, Formula::Struct(StructOp::Zero), 1, [node, NONE], [x, Value::Nil], &value);
    reverse_real(m.tape.stack[k].id, zero, value)
}

/// The zero of a real (exact or not, as the real).
pub fn zero_of(x: &Value) -> Value {
    num::zero_like(&strip(x))
}

/// Does `v` hold an active real (of any level) among its leaves?
pub fn holds_active(v: &Value) -> bool {
    !for_each_leaf(v, |x| !x.is_active())
}

/// `v` with each active real (of any level, at any depth of its lists)
/// replaced by its plain value (`strip`).
pub fn plain_data(v: &Value) -> Value {
    match v {
        Value::Pair(p) => match map_spine(p, &mut |x| {
            Ok::<_, std::convert::Infallible>(crate::stack::grow(|| plain_data(x)))
        }) {
            Ok(v) => v,
            Err(never) => match never {},
        },
        _ => strip(v).into_owned(),
    }
}

/// A result with tape `id`'s reals replaced by their values.
fn deactivate(y: &Value, id: u32) -> Value {
    match y {
        Value::Active(a) if a.tape == id => a.value.clone(),
        Value::TapeReal(t, _, p) if *t as u32 == id => Value::Real(*p),
        Value::Pair(p) => match map_spine(p, &mut |v| Ok::<_, std::convert::Infallible>(deactivate(v, id))) {
            Ok(v) => v,
            Err(never) => match never {},
        },
        _ => y.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::Op2;

    fn ys(nodes: &Chunks<i64>) -> Vec<i64> {
        let mut out: Vec<i64> = nodes
            .iter_rev()
            .map(|(i, &y)| {
                assert_eq!(y as usize, i, "item {i} numbered as pushed");
                y
            })
            .collect();
        out.reverse();
        out
    }

    /// Items keep their numbers across chunks, and truncating at, before and
    /// past a chunk boundary keeps exactly the first `len`.
    #[test]
    fn nodes_in_chunks() {
        let total = 3 * CHUNK + 5;
        for cut in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 3, total, total + 10] {
            let mut nodes = Chunks::<i64>::default();
            for i in 0..total {
                nodes.push(i as i64);
            }
            assert_eq!(nodes.len(), total);
            assert_eq!(*nodes.get(CHUNK + 7), (CHUNK + 7) as i64);
            nodes.truncate(cut);
            let kept = cut.min(total);
            assert_eq!(nodes.len(), kept);
            assert_eq!(ys(&nodes), (0..kept as i64).collect::<Vec<_>>(), "cut at {cut}");
            // and it grows again from there
            nodes.push(kept as i64);
            assert_eq!(ys(&nodes), (0..=kept as i64).collect::<Vec<_>>(), "pushed after a cut at {cut}");
        }
    }

    /// `Tapes::rewind` forgets exactly what the running levels recorded
    /// after `Tapes::marks` (nodes, the values they keep, dropped results,
    /// the forward level kept unboxed), and recording goes on from there:
    /// the next node has the number the first forgotten one had.
    #[test]
    fn rewind_forgets_what_was_recorded_after_the_marks() {
        let mut m = Machine::new();
        let mut inputs = Inputs::new();
        for id in 0..2 {
            let level = m.tape.fresh(id, false);
            m.tape.stack.push(level);
        }
        m.tape.next_id = 2;
        let x = input(&mut m.tape.stack[0], 0, &mut inputs, &Value::Real(3.0));
        let y = input(&mut m.tape.stack[1], 1, &mut inputs, &Value::Real(0.5));
        let lens = |m: &Machine| -> Vec<(usize, usize, usize, usize, u32)> {
            m.tape
                .stack
                .iter()
                .map(|t| (t.nodes.len(), t.vals.len(), t.reals.len(), t.discards.len(), t.lift))
                .collect()
        };
        let xy = level_arith2(&mut m.tape, Op2::Mul, &x, &y).expect("recorded");
        let before = lens(&m);
        let marks = m.tape.marks();
        // (more on both levels: a real of the inner level over one of the
        // outer, then the outer's own; a dropped result noted; a lift set)
        let z = level_arith2(&mut m.tape, Op2::Mul, &xy, &x).expect("recorded");
        level_arith2(&mut m.tape, Op2::Add, &x, &x).expect("recorded");
        level_arith2(&mut m.tape, Op2::Sub, &z, &y).expect("recorded");
        m.tape.stack[0].discards.push(Discard { from: 0, to: 1, y: SmallVec::new(), values: Vec::new() });
        m.tape.stack[1].lift = 0;
        let grown = lens(&m);
        assert!(grown.iter().zip(&before).all(|(g, b)| g.0 > b.0), "{grown:?} against {before:?}");
        m.tape.rewind(&marks);
        assert_eq!(lens(&m), before);
        // (the next node of the inner level is numbered as the first forgotten)
        let Some(Value::TapeReal(1, node, _)) = level_arith2(&mut m.tape, Op2::Mul, &y, &y) else {
            panic!("a real of the inner level")
        };
        assert_eq!(node as usize, before[1].0);
    }

    /// Are `a` and `b` the same value, bit for bit: numbers, and reals of
    /// levels with the same level, node, value and tangent?
    fn same_bits(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Real(x), Value::Real(y)) => x.to_bits() == y.to_bits(),
            (Value::Int(x), Value::Int(y)) => x == y,
            (Value::Active(x), Value::Active(y)) => {
                x.tape == y.tape
                    && x.node == y.node
                    && same_bits(&x.value, &y.value)
                    && same_bits(&x.tangent, &y.tangent)
            }
            _ => false,
        }
    }

    /// A number, or a real of a level as `level[value|tangent]`.
    fn show(v: &Value) -> String {
        match v {
            Value::Active(a) => format!("{}[{}|{}]", a.tape, show(&a.value), show(&a.tangent)),
            Value::Real(x) => format!("{x:?}"),
            v => crate::print::to_string(v),
        }
    }

    /// Forward over forward on the evaluator's path (`level_arith2`, then
    /// `native::lifted_arith2`) gives what `record` gives
    /// (`native::record_forward_lifted`), bit for bit, on
    /// every mix of reals of the inner level (values and tangents doubles,
    /// exact integers or reals of the outer level, themselves of doubles or
    /// exact integers) and constants, for `+ - * /`; and it applies where an
    /// operand holds a real of the outer level.
    #[test]
    fn forward_over_forward_inline_is_record() {
        let mut m = Machine::new();
        for id in 0..2 {
            let level = m.tape.fresh(id, true);
            m.tape.stack.push(level);
        }
        m.tape.next_id = 2;
        let o = |p: Value, t: Value| forward_real(0, p, t);
        let outer = [
            o(Value::Real(2.0), Value::Real(0.5)),
            o(Value::Real(-3.0), Value::Real(0.25)),
            o(Value::Real(0.0), Value::Real(0.0)),
            o(Value::Int(2), Value::Int(1)),
            o(Value::Real(1.5), Value::Int(0)),
        ];
        let mut parts =
            vec![Value::Real(1.5), Value::Real(-0.0), Value::Int(1), Value::Int(0), Value::Int(3)];
        parts.extend(outer.iter().cloned());
        let mut pool = Vec::new();
        for v in &parts {
            for t in &parts {
                pool.push(forward_real(1, v.clone(), t.clone()));
            }
        }
        // (constants: numbers, and reals of the outer level)
        pool.extend(parts.iter().cloned());
        let (mut applied, mut declined) = (0, 0);
        for (op, name) in [(Op2::Add, "+"), (Op2::Sub, "-"), (Op2::Mul, "*"), (Op2::Div, "/")] {
            let p = crate::prims::lookup(name).expect("a primitive");
            let f = scalar_formula(p).expect("a scalar formula");
            for x in &pool {
                for y in &pool {
                    let Some(fast) = level_arith2(&mut m.tape, op, x, y) else {
                        declined += 1;
                        continue;
                    };
                    applied += 1;
                    let general = record(&mut m, f, &[x.clone(), y.clone()], &crate::prims::prim(p).imp)
                        .expect("the general path computes it");
                    assert!(
                        same_bits(&fast, &general),
                        "{name} on {} and {}: {} against {}",
                        show(x),
                        show(y),
                        show(&fast),
                        show(&general)
                    );
                }
            }
            // (two reals of the inner level over reals of the outer: always)
            let xy = forward_real(1, outer[0].clone(), outer[1].clone());
            assert!(level_arith2(&mut m.tape, op, &xy, &xy).is_some(), "{name} of hyper-duals");
        }
        assert!(applied > 10_000 && declined > 1_000, "applied {applied}, declined {declined}");
    }
}
