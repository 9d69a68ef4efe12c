//! Run-time values. Everything is immutable and reference counted; recursive
//! closures are a letrec group instance plus an index, so there are no cycles.

use crate::anf::Group;
use crate::prims::PrimId;
use num_bigint::BigInt;
use std::rc::Rc;

/// A VLAD value. 16 bytes.
#[derive(Clone)]
pub enum Value {
    Nil,
    Bool(bool),
    /// An exact integer that fits in a machine word.
    Int(i64),
    /// An exact integer that does not (always normalised: never fits in `i64`).
    Big(Rc<BigInt>),
    Real(f64),
    Pair(Rc<Pair>),
    Prim(PrimId),
    /// Member `.1` of a closure group instance (a plain lambda is a group of one).
    Closure(Rc<Inst>, u32),
    /// A perturbation-, sensitivity- or reverse-tagged value (AD.md).
    Tagged(Tag, Rc<Value>),
    /// A forward-mode bundle of a primal and a (perturbation-tagged) tangent.
    Bundle(Rc<(Value, Value)>),
}

/// The tags that wrap non-aggregate values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    Perturbation,
    Sensitivity,
    Reverse,
}

impl Tag {
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

impl Drop for Pair {
    // Long lists would otherwise be dropped recursively, one Rust frame per cell.
    fn drop(&mut self) {
        let mut next = std::mem::replace(&mut self.cdr, Value::Nil);
        while let Value::Pair(rc) = next {
            match Rc::try_unwrap(rc) {
                Ok(mut p) => next = std::mem::replace(&mut p.cdr, Value::Nil),
                Err(_) => break,
            }
        }
    }
}

/// An instance of a closure group: the code plus the captured free variables,
/// in the group's fixed order.
pub struct Inst {
    pub group: Rc<Group>,
    pub env: Box<[Value]>,
}

/// Closures nested this deep are dropped later, iteratively (see `Drop for Inst`).
const MAX_DROP_DEPTH: u32 = 64;

thread_local! {
    static DROP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static DEFERRED_ENVS: std::cell::RefCell<Vec<Box<[Value]>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Inst {
    // A chain of closures each capturing the next (reverse mode's backpropagators
    // over a long loop, closures composed in a loop) would otherwise be dropped
    // recursively, several Rust frames per closure: past a fixed depth,
    // environments are queued and the outermost drop empties the queue.
    fn drop(&mut self) {
        if self.env.is_empty() {
            return;
        }
        let env = std::mem::take(&mut self.env);
        let depth = DROP_DEPTH.get();
        if depth >= MAX_DROP_DEPTH {
            // Fails only while the thread is being torn down: then drop it here.
            let _ = DEFERRED_ENVS.try_with(|q| q.borrow_mut().push(env));
            return;
        }
        DROP_DEPTH.set(depth + 1);
        drop(env);
        if depth == 0 {
            while let Some(env) = DEFERRED_ENVS.try_with(|q| q.borrow_mut().pop()).ok().flatten() {
                drop(env);
            }
        }
        DROP_DEPTH.set(depth);
    }
}

impl Value {
    pub fn cons(car: Value, cdr: Value) -> Value {
        Value::Pair(Rc::new(Pair { car, cdr }))
    }

    pub fn tagged(tag: Tag, v: Value) -> Value {
        Value::Tagged(tag, Rc::new(v))
    }

    pub fn bundle(p: Value, t: Value) -> Value {
        Value::Bundle(Rc::new((p, t)))
    }

    pub fn closure(group: Rc<Group>, env: Vec<Value>, idx: u32) -> Value {
        Value::Closure(Rc::new(Inst { group, env: env.into_boxed_slice() }), idx)
    }

    /// A proper list of the given values.
    pub fn list(items: impl IntoIterator<Item = Value, IntoIter: DoubleEndedIterator>) -> Value {
        items.into_iter().rev().fold(Value::Nil, |acc, v| Value::cons(v, acc))
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
            Value::Bundle(b) => b.0.is_true_stripped(),
            _ => true,
        }
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Big(_) | Value::Real(_))
    }

    pub fn is_procedure(&self) -> bool {
        matches!(self, Value::Prim(_) | Value::Closure(..))
    }

    /// Converts a number to `f64` (exact integers rounded).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Big(b) => Some(num_traits::ToPrimitive::to_f64(&**b).unwrap_or(f64::NAN)),
            Value::Real(r) => Some(*r),
            _ => None,
        }
    }

    /// A short description of the kind of value, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "the empty list",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Big(_) => "an exact integer",
            Value::Real(_) => "a real",
            Value::Pair(_) => "a pair",
            Value::Prim(_) | Value::Closure(..) => "a procedure",
            Value::Tagged(Tag::Perturbation, _) => "a perturbation",
            Value::Tagged(Tag::Sensitivity, _) => "a sensitivity",
            Value::Tagged(Tag::Reverse, _) => "a reverse value",
            Value::Bundle(_) => "a forward (bundled) value",
        }
    }

    /// Pointer identity for reference values, used by memo tables.
    pub fn ptr_id(&self) -> Option<usize> {
        match self {
            Value::Pair(p) => Some(Rc::as_ptr(p) as usize),
            Value::Closure(i, k) => Some(Rc::as_ptr(i) as usize ^ ((*k as usize) << 48)),
            Value::Tagged(_, v) => Some(Rc::as_ptr(v) as usize),
            Value::Bundle(b) => Some(Rc::as_ptr(b) as usize),
            Value::Big(b) => Some(Rc::as_ptr(b) as usize),
            _ => None,
        }
    }
}
