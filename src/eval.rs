//! The evaluator: runs resolved A-normal form with a value stack for frames,
//! proper tail calls, a growable native stack for deep recursion, and step,
//! time and interrupt limits.

use crate::ad::tape::Level;
use crate::anf::{Group, Kind, Lambda};
use crate::error::{Error, ErrorKind, Result};
use crate::prims::{self, Class, PrimDef, PrimId};
use crate::resolve::{
    Again, AppArith, CArgs, CAtom, CBind, CBlock, CExpr, Cond, GroupCode, Guard, Inline, InlineCallee, Loop,
    Moves, Op2, Param, Retag, Split,
};
use crate::source::Span;
use crate::value::{Inst, InstBuilder, InstRc, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A top-level definition's slot.
pub struct Global {
    pub name: Rc<str>,
    pub span: Span,
    pub state: GState,
    /// A constant definition's code (kept once evaluated, for the REPL's `:anf`).
    pub thunk: Option<Rc<Group>>,
}

pub enum GState {
    Value(Value),
    /// A constant definition not evaluated yet: a thunk group taking `'()`.
    Thunk(Rc<Group>),
    Forcing,
    /// A definition that failed to compile (`vlad test` goes on past it): using
    /// it raises that error.
    Failed(Error),
}

enum Next {
    /// The result is on top of the value stack.
    Return,
    /// Call the procedure under the given number of arguments on top of the stack.
    TailCall(usize, Span),
    /// Call member `j` of the running procedure's instance (itself or a sibling
    /// of its group) with the given number of arguments on top of the stack:
    /// no closure is built for it. (A `u32` count keeps this as small as
    /// `TailCall`: the evaluator's native frames, one per nested call, hold one.)
    TailSibling(u32, u32, Span),
}

/// Reads an operand (a clone); a global not evaluated yet is evaluated, and an
/// error returns from the enclosing function.
macro_rules! atom {
    ($m:expr, $base:expr, $inst:expr, $a:expr) => {
        match $a {
            CAtom::Local(s) => $m.slot($base + *s as usize).clone(),
            CAtom::Env(i) => $inst.env[*i as usize].clone(),
            CAtom::Sibling(j) => Value::Closure($inst.clone(), *j),
            CAtom::Const(v) => v.clone(),
            CAtom::Global(g) => match &$m.globals[*g as usize].state {
                GState::Value(v) => v.clone(),
                _ => $m.global_slow(*g)?,
            },
        }
    };
}

/// Member `idx` of `inst` if its body may be one arithmetic operation on its
/// parameter that [`Machine::call_arith_body`] computes without a frame: one
/// parameter (slot 0), nothing bound before the body's expression, in a plain
/// group without native code whose code is resolved (it has been called).
#[inline(always)]
fn arith_lambda(inst: &InstRc, idx: u32) -> Option<&crate::resolve::LambdaCode> {
    let g = inst.group();
    if g.native.get().is_some() {
        return None;
    }
    let code = g.code.get().filter(|c| c.plain)?;
    let lam = &code.members[idx as usize];
    (lam.unary == 1 && lam.body.binds.is_empty()).then_some(lam)
}

/// The operation of `lam` (an [`arith_lambda`] of `inst`) on its argument `x`,
/// if its body is one on the parameter and constants or captured values: the
/// operator, the operands (the second `Err(k)` for `Arith2Int`'s exact integer
/// `k`) and the primitive.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn arith_operation<'a>(
    lam: &'a crate::resolve::LambdaCode,
    inst: &'a InstRc,
    x: &'a Value,
) -> Option<(Op2, &'a Value, std::result::Result<&'a Value, i64>, PrimId)> {
    // (the parameter is slot 0, the only slot such a body reads)
    let operand = |a: &'a CAtom| match a {
        CAtom::Local(0) => Some(x),
        CAtom::Env(i) => Some(&inst.env[*i as usize]),
        CAtom::Const(v) => Some(v),
        _ => None,
    };
    match &lam.body.tail {
        CExpr::Arith2(op, a, b, p, _) => Some((*op, operand(a)?, Ok(operand(b)?), *p)),
        CExpr::Arith2Int(op, 0, k, p, _) => Some((*op, x, Err(*k), *p)),
        _ => None,
    }
}

/// Whether `f` is a closure whose calls by a primitive (`map`'s) are computed
/// without a frame (see `Machine::call_arith_body`), for the tests.
pub fn has_arith_body(f: &Value) -> bool {
    let Value::Closure(inst, idx) = f else { return false };
    let nil = Value::Nil;
    arith_lambda(inst, *idx).is_some_and(|lam| arith_operation(lam, inst, &nil).is_some())
}

/// [`Machine::peek`] on the value stack and the globals alone (so that the
/// machine's other parts may be borrowed meanwhile).
#[inline(always)]
fn peek_in<'a>(
    stack: &'a [Value],
    globals: &'a [Global],
    base: usize,
    inst: &'a InstRc,
    a: &'a CAtom,
) -> Option<&'a Value> {
    match a {
        CAtom::Local(s) => stack.get(base + *s as usize),
        CAtom::Env(i) => Some(&inst.env[*i as usize]),
        CAtom::Const(v) => Some(v),
        CAtom::Global(g) => match &globals[*g as usize].state {
            GState::Value(v) => Some(v),
            _ => None,
        },
        CAtom::Sibling(_) => None,
    }
}

/// The address of a local: the native stack pointer, near enough.
#[inline(always)]
fn stack_pointer() -> usize {
    let x = 0u8;
    std::ptr::addr_of!(x) as usize
}

/// Runs `f` on a new stack segment if the native stack is running out (or its
/// bounds are not known yet), recording in the machine (reached from `ctx` by
/// `machine`) the bounds of the stack `f` runs on, so that the recursion in `f`
/// can check them cheaply ([`Machine::native_stack_ok`]); they are restored after.
/// `ctx` is the machine itself, or an executor holding it.
#[cold]
#[inline(never)]
pub(crate) fn grow_native_stack<C, R>(
    ctx: &mut C,
    machine: impl Fn(&mut C) -> &mut Machine,
    f: impl FnOnce(&mut C) -> R,
) -> R {
    let m = machine(ctx);
    let saved = (m.stack_lo, m.stack_span);
    let r = stacker::maybe_grow(RED_ZONE, SEGMENT, || {
        let sp = stack_pointer();
        let m = machine(ctx);
        match stacker::remaining_stack() {
            Some(rem) if rem > RED_ZONE => {
                // Safe while the stack pointer is in (sp - rem + RED_ZONE, sp];
                // checked again (by `stack::can_grow`, for the memory the
                // stack's pages take) after each `stack::CHUNK` of it.
                m.stack_span = (rem - RED_ZONE).min(crate::stack::CHUNK);
                m.stack_lo = sp - m.stack_span;
            }
            // Unknown bounds: check on every call.
            _ => (m.stack_lo, m.stack_span) = (0, 0),
        }
        f(ctx)
    });
    let m = machine(ctx);
    (m.stack_lo, m.stack_span) = saved;
    r
}

/// A result of the inline arithmetic.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Real(f64),
    Bool(bool),
}

/// Stores a [`Num`] as a value at `p`, variant by variant: a value merged from
/// several variants would be copied through a temporary, which the processor
/// cannot forward from the partial stores that built it (a slow stall).
///
/// # Safety
/// `p` must be valid for writes; what it held is overwritten without a drop.
#[inline(always)]
unsafe fn write_num(p: *mut Value, n: Num) {
    match n {
        Num::Int(x) => p.write(Value::Int(x)),
        Num::Real(x) => p.write(Value::Real(x)),
        Num::Bool(x) => p.write(Value::Bool(x)),
    }
}

/// Moves a value from `src` to `dst`. Numbers and booleans are copied field by
/// field: they were usually just stored that way (see [`write_num`]).
///
/// # Safety
/// `src` must be a valid value, given up by the caller; `dst` must be valid
/// for writes, not overlapping `src`; what it held is overwritten without a drop.
#[inline(always)]
unsafe fn move_value(src: *const Value, dst: *mut Value) {
    match &*src {
        Value::Int(x) => dst.write(Value::Int(*x)),
        Value::Real(x) => dst.write(Value::Real(*x)),
        Value::Bool(x) => {
            // (rarer than numbers: tested after them)
            std::hint::cold_path();
            dst.write(Value::Bool(*x))
        }
        _ => std::ptr::copy_nonoverlapping(src, dst, 1),
    }
}

/// Copies (clones) the value at `src` to `dst`; numbers and booleans field by
/// field (see [`move_value`]).
///
/// # Safety
/// `src` must be a valid value; `dst` must be valid for writes, not overlapping
/// `src`; what it held is overwritten without a drop.
#[inline(always)]
unsafe fn clone_value(src: *const Value, dst: *mut Value) {
    match &*src {
        Value::Int(x) => dst.write(Value::Int(*x)),
        Value::Real(x) => dst.write(Value::Real(*x)),
        Value::Bool(x) => {
            // (rarer than numbers: tested after them)
            std::hint::cold_path();
            dst.write(Value::Bool(*x))
        }
        v => dst.write(v.clone()),
    }
}

/// Drops the values at `p[lo..hi]`, calling the drop only for those that need it.
///
/// # Safety
/// Each of them must be a valid value, dropped here once and not used after.
#[inline(always)]
pub(crate) unsafe fn drop_values(p: *mut Value, lo: usize, hi: usize) {
    for i in lo..hi {
        let x = p.add(i);
        if (*x).needs_drop() {
            std::ptr::drop_in_place(x);
        }
    }
}

impl Num {
    #[inline(always)]
    fn value(self) -> Value {
        match self {
            Num::Int(x) => Value::Int(x),
            Num::Real(x) => Value::Real(x),
            Num::Bool(x) => Value::Bool(x),
        }
    }
}

/// A level's commonest operations on `x` and `y` (see
/// [`Machine::level_arith`]): a comparison of reals on levels by their
/// values, `+ - * /` by the level's record; `None` where neither applies.
#[inline(always)]
pub(crate) fn level_op(tape: &mut crate::ad::tape::Tapes, op: Op2, x: &Value, y: &Value) -> Option<Value> {
    if op.is_comparison() {
        let (x, y) = (crate::ad::tape::strip(x), crate::ad::tape::strip(y));
        if let (Value::Real(_), Value::Real(_)) = (&*x, &*y) {
            return fast_arith(op, &x, &y).map(Num::value);
        }
        return None;
    }
    crate::ad::tape::level_arith2(tape, op, x, y)
}

/// Machine-integer and double arithmetic without going through the primitive table.
#[inline(always)]
fn fast_arith(op: Op2, x: &Value, y: &Value) -> Option<Num> {
    match (x, y) {
        (Value::Int(a), Value::Int(b)) => int_arith(op, *a, *b),
        (Value::Real(a), Value::Real(b)) => Some(match op {
            Op2::Add => Num::Real(a + b),
            Op2::Sub => Num::Real(a - b),
            Op2::Mul => Num::Real(a * b),
            Op2::Div => Num::Real(a / b),
            Op2::Lt => Num::Bool(a < b),
            Op2::Gt => Num::Bool(a > b),
            Op2::Le => Num::Bool(a <= b),
            Op2::Ge => Num::Bool(a >= b),
            Op2::Eq => Num::Bool(a == b),
        }),
        // An exact integer with a real is converted to a double (as
        // `num::arith` does); comparisons of the two take the general path.
        (Value::Int(a), Value::Real(b)) => mixed_arith(op, *a as f64, *b),
        (Value::Real(a), Value::Int(b)) => mixed_arith(op, *a, *b as f64),
        _ => None,
    }
}

/// [`fast_arith`] as a value: the inline arithmetic of numbers (`None` where
/// the primitive must run), for the native list walks.
#[inline]
pub(crate) fn inline_arith(op: Op2, x: &Value, y: &Value) -> Option<Value> {
    fast_arith(op, x, y).map(Num::value)
}

/// Machine-integer arithmetic (`None` on overflow, and for `/`).
#[inline(always)]
fn int_arith(op: Op2, a: i64, b: i64) -> Option<Num> {
    Some(match op {
        Op2::Add => Num::Int(a.checked_add(b)?),
        Op2::Sub => Num::Int(a.checked_sub(b)?),
        Op2::Mul => Num::Int(a.checked_mul(b)?),
        Op2::Div => return None,
        Op2::Lt => Num::Bool(a < b),
        Op2::Gt => Num::Bool(a > b),
        Op2::Le => Num::Bool(a <= b),
        Op2::Ge => Num::Bool(a >= b),
        Op2::Eq => Num::Bool(a == b),
    })
}

/// [`int_arith`], storing the result in slot `i` (see [`Machine::set_num`])
/// from the arm that computed it (false where there is none): each arm then
/// stores its own variant, where a [`Num`] merged from the arms would be told
/// apart again to be stored.
#[inline(always)]
fn int_arith_put(m: &mut Machine, op: Op2, a: i64, b: i64, i: usize) -> bool {
    match op {
        Op2::Add => match a.checked_add(b) {
            Some(r) => m.set_num(i, Num::Int(r)),
            None => return false,
        },
        Op2::Sub => match a.checked_sub(b) {
            Some(r) => m.set_num(i, Num::Int(r)),
            None => return false,
        },
        Op2::Mul => match a.checked_mul(b) {
            Some(r) => m.set_num(i, Num::Int(r)),
            None => return false,
        },
        Op2::Div => return false,
        Op2::Lt => m.set_num(i, Num::Bool(a < b)),
        Op2::Gt => m.set_num(i, Num::Bool(a > b)),
        Op2::Le => m.set_num(i, Num::Bool(a <= b)),
        Op2::Ge => m.set_num(i, Num::Bool(a >= b)),
        Op2::Eq => m.set_num(i, Num::Bool(a == b)),
    }
    true
}

/// The double arithmetic of [`fast_arith`], storing the result in slot `i`
/// from the arm that computed it (see [`int_arith_put`]).
#[inline(always)]
fn real_arith_put(m: &mut Machine, op: Op2, a: f64, b: f64, i: usize) {
    match op {
        Op2::Add => m.set_num(i, Num::Real(a + b)),
        Op2::Sub => m.set_num(i, Num::Real(a - b)),
        Op2::Mul => m.set_num(i, Num::Real(a * b)),
        Op2::Div => m.set_num(i, Num::Real(a / b)),
        Op2::Lt => m.set_num(i, Num::Bool(a < b)),
        Op2::Gt => m.set_num(i, Num::Bool(a > b)),
        Op2::Le => m.set_num(i, Num::Bool(a <= b)),
        Op2::Ge => m.set_num(i, Num::Bool(a >= b)),
        Op2::Eq => m.set_num(i, Num::Bool(a == b)),
    }
}

/// `+`, `-`, `*` or `/` of an exact integer and a real, as doubles.
#[inline(always)]
fn mixed_arith(op: Op2, a: f64, b: f64) -> Option<Num> {
    match op {
        Op2::Add => Some(Num::Real(a + b)),
        Op2::Sub => Some(Num::Real(a - b)),
        Op2::Mul => Some(Num::Real(a * b)),
        Op2::Div => Some(Num::Real(a / b)),
        _ => None,
    }
}

/// The error of a loop's iteration (see [`Machine::run_block`]): the loop is
/// named, with where it was called last, as a procedure reached by a tail
/// call is (unless the error arose in a call run in place in tail position
/// of the loop, which replaces it as a tail call does).
#[cold]
#[inline(never)]
fn loop_failed(mut e: Error, at: Option<(&Loop, Span)>) -> Error {
    if let Some((lp, s)) = at {
        if e.tail_frame.is_none() {
            e.tail_frame = Some((lp.name.to_string(), s));
        }
    }
    e
}

/// The trace of an error in a loop run as an inner block
/// (`Machine::run_inner_loop`), last called at `last`: as `call_failed`
/// decorates a non-tail call's, the loop reached by its tail calls shown at
/// the last of them, then the loop at its first call.
#[cold]
#[inline(never)]
fn inner_loop_failed(mut e: Error, lp: &Loop, last: Span) -> Error {
    if let Some((name, s)) = e.tail_frame.take() {
        e.push_frame_at(&name, s);
    } else if last != lp.site {
        e.push_frame_at(&lp.name, last);
    }
    e.push_frame_at(&lp.name, lp.site);
    e
}

/// The name of member `idx` of a group for a call trace: a member's second
/// entry (`LambdaCode::untagged`) has its member's name.
fn member_name(g: &Group, idx: u32) -> String {
    let n = g.members.get().map_or(0, |m| m.len());
    match g.code.get().and_then(|c| c.members.get(idx as usize)) {
        Some(c) if idx as usize >= n => c.name.to_string(),
        _ => g.display_name(idx as usize),
    }
}

#[cold]
#[inline(never)]
fn not_a_procedure(v: &Value, span: Option<Span>) -> Error {
    let shown = crate::print::brief_source(v, 60);
    if let Value::Rev(r) = v {
        // (a procedure to `procedure?`, but one that runs one way or the other)
        let n = if r.inverted { format!("(rev-inverse {})", r.name()) } else { r.name().to_string() };
        return Error::runtime(
            span,
            format!("cannot apply {shown} directly: a reversible procedure runs by (call {n} arg ...) or (uncall {n} arg ...)"),
        );
    }
    Error::runtime(span, format!("cannot apply {} ({}): not a procedure", shown, v.kind_name()))
}

#[cold]
#[inline(never)]
fn arity_error(name: &str, arity: u8, n: usize) -> Error {
    Error::runtime(None, format!("{}: expected {} arguments, got {}", name, arity, n))
}

/// The native stack cannot grow (the machine or a limit such as `ulimit -v` has no
/// memory left for it) before `--max-depth` is reached.
#[cold]
#[inline(never)]
fn out_of_stack(depth: usize, span: Option<Span>) -> Error {
    Error::runtime(
        span,
        format!(
            "recursion too deep (out of memory for the stack at {} nested calls; see --max-depth)",
            depth
        ),
    )
}

#[cold]
#[inline(never)]
fn too_deep(max: usize, span: Option<Span>) -> Error {
    Error::runtime(span, format!("recursion too deep (more than {} nested calls; see --max-depth)", max))
}

#[cold]
#[inline(never)]
fn shape_error(inst: &Inst, idx: u32) -> Error {
    Error::runtime(
        None,
        format!(
            "cannot apply {}: a {} procedure is a shape, not code",
            inst.group.display_name(idx as usize),
            inst.group.tags()[0].name()
        ),
    )
}

/// Bytes of native stack kept free before growing onto a new segment: the
/// most that evaluation may use between two checks of [`Machine::stack_ok`]
/// (one interpreted call's native frames, a primitive's, an AD rule's). A
/// build without optimisations (`cargo test`'s) has frames of tens of
/// kilobytes where an optimised one has hundreds of bytes, so it keeps more.
pub(crate) const RED_ZONE: usize = if cfg!(debug_assertions) { 1024 * 1024 } else { 256 * 1024 };
const SEGMENT: usize = 16 * 1024 * 1024;
/// Steps between checks of the clock and of Ctrl-C (a mask: a power of two minus one).
/// A build without optimisations (`cargo test`'s) makes a call some 20-60 times
/// slower, so it checks 16 times as often: about as soon after a deadline,
/// well within the watchdog's grace (`watchdog::GRACE`) even on a loaded machine.
const CHECK_EVERY: u64 = if cfg!(debug_assertions) { 0x3ff } else { 0x3fff };

/// The interpreter state.
pub struct Machine {
    pub stack: Vec<Value>,
    pub globals: Vec<Global>,
    /// `max_depth` minus the number of nested calls running (see
    /// [`Machine::depth`]): a call takes one and fails if none is left.
    depth_left: isize,
    max_depth: usize,
    /// Procedure calls counted so far (see [`Machine::steps`]) are
    /// `step_end - fuel`: `fuel` counts down to the next check of the limits,
    /// clock and Ctrl-C ([`Machine::tick`]), at most `CHECK_EVERY + 1` steps
    /// away, or at the step that passes `max_steps`.
    step_end: u64,
    fuel: u64,
    max_steps: u64,
    /// The native stack the evaluator runs on can be used while the stack pointer
    /// minus `stack_lo` is below `stack_span` (0: check with `stacker` on every call).
    stack_lo: usize,
    stack_span: usize,
    /// Value-level AD work done natively (lazy expansions, `plus`, `zero`, tag
    /// and bundle steps): with `steps`, a deterministic measure of total work.
    pub ad_work: u64,
    /// Run primitives' derivative rules natively where possible (`ad::native`);
    /// off only to check the native rules against the interpreted ones.
    pub native_rules: bool,
    /// Whether the reverse-over-reverse steps of `ad::native_rr` run natively
    /// too (with `native_rules`; off, to compare them with the steps they fuse).
    pub native_rr: bool,
    /// Whether a `BpCall` of a backpropagator with an untagged entry
    /// (`resolve::Untagged`) runs that entry (with `native_rules`); off, the
    /// call runs step by step (a test compares the two).
    pub untagged_entries: bool,
    /// Whether calls of small procedures held by globals run in place
    /// (`resolve::Inline`; on by default; set before any code is resolved).
    pub inline_calls: bool,
    /// Whether named `let`s whose procedures are only called run as loops in
    /// their procedure's frame (`resolve::Loop`; on by default; set before any
    /// code is resolved; off, each is a procedure, which a test compares).
    pub named_let_loops: bool,
    /// Whether a primitive's call of a closure whose body is one arithmetic
    /// operation (`map` of `(lambda (x) (* k x))`) computes it without a frame
    /// (`Machine::call_arith_body`; on by default; off, the call is made, which
    /// a test compares).
    pub arith_bodies: bool,
    /// The entries of a procedure after which it is compiled to machine code
    /// where it can be (`jit`; 0: never; set before any code is resolved).
    pub jit_after: u64,
    pub deadline: Option<Instant>,
    pub interrupt: Arc<AtomicBool>,
    /// For [`Machine::check_memory`]: the limit checks made, and the resident
    /// memory (bytes) up to which the memory left was last found enough (0:
    /// not looked at yet).
    memory_checks: u32,
    memory_found: usize,
    /// Per-primitive call counts when metering. (A boxed slice: `None` is a
    /// null pointer, which the evaluator's fast paths test with no constant
    /// to load.)
    pub meter: Option<Box<[u64]>>,
    /// When set (with `meter`), per-primitive counts of the calls made by
    /// AD-transformed code (derivative work; the REPL's `:meter`).
    pub meter_derivative: Option<Vec<u64>>,
    /// Compiled forward/reverse versions of primitives, by (primitive, kind).
    pub prim_rules: FxHashMap<(PrimId, u8), Value>,
    /// Reverse mode on tapes (`ad::tape`): the tapes running now.
    pub tape: crate::ad::tape::Tapes,
    pub out: Box<dyn Write>,
    /// Where vector primitives run (`--backend`).
    pub backend: crate::vec::Backend,
    pub input: Box<dyn std::io::BufRead>,
    /// Data `read-real` has read from `input` and not yet given out (a line
    /// may hold several numbers), each with its text (for an error).
    input_pending: std::collections::VecDeque<(crate::datum::Datum, String)>,
    /// The list whose elements a reversible procedure's translation read last
    /// (`rev`'s `%rev-ref`), held, and its elements: a loop reading one list
    /// takes each element in constant time, not a walk of the list.
    pub rev_elems: Option<(Value, Rc<[Value]>)>,
    /// The pairs compiled code has made, held until it returns (`jit::Made`).
    pub(crate) jit_made: crate::jit::Made,
}

impl Default for Machine {
    fn default() -> Self {
        Machine::new()
    }
}

// Where compiled code (`jit`) finds the machine's counts.
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) const JIT_FUEL: usize = std::mem::offset_of!(Machine, fuel);
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) const JIT_DEPTH: usize = std::mem::offset_of!(Machine, depth_left);
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) const JIT_STACK_LO: usize = std::mem::offset_of!(Machine, stack_lo);
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) const JIT_STACK_SPAN: usize = std::mem::offset_of!(Machine, stack_span);

/// The value stack's capacity after its first growth (see `grow_stack_to`): 16 MiB.
const STACK_GROWN: usize = 1 << 20;

impl Machine {
    pub fn new() -> Machine {
        Machine {
            stack: Vec::with_capacity(1024),
            globals: Vec::new(),
            depth_left: 10_000_000,
            max_depth: 10_000_000,
            step_end: CHECK_EVERY + 1,
            fuel: CHECK_EVERY + 1,
            max_steps: u64::MAX,
            stack_lo: 0,
            stack_span: 0,
            ad_work: 0,
            native_rules: true,
            native_rr: true,
            untagged_entries: true,
            inline_calls: true,
            named_let_loops: true,
            arith_bodies: true,
            jit_after: crate::jit::DEFAULT_AFTER,
            deadline: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            memory_checks: 0,
            memory_found: 0,
            meter: None,
            meter_derivative: None,
            prim_rules: FxHashMap::default(),
            tape: Default::default(),
            out: Box::new(std::io::stdout()),
            backend: crate::vec::default_backend(),
            input: Box::new(std::io::BufReader::new(std::io::stdin())),
            input_pending: Default::default(),
            rev_elems: None,
            jit_made: crate::jit::Made::default(),
        }
    }

    /// Prints a value and a newline on the program's output (`write`, and the
    /// values of top-level expressions), in pieces, so that printing a huge value
    /// takes bounded memory and stops at an interrupt, `--timeout` or `--max-steps`
    /// (the line is ended, then the error returned). Output that cannot be written
    /// (a full disk; a closed pipe ends the process by SIGPIPE, `main`) is an
    /// error: the rest of the output would be lost too.
    pub fn write_value(&mut self, v: &Value) -> Result<()> {
        self.io_allowed()?;
        let mut limit = Ok(());
        let mut failed = None;
        let mut first = true;
        crate::print::stream(v, &mut |piece| {
            // (checked between pieces: a value printed whole was not stopped)
            if !std::mem::take(&mut first) {
                limit = self.check_limits();
                if limit.is_err() {
                    return false;
                }
            }
            if let Err(e) = self.out.write_all(piece.as_bytes()) {
                failed = Some(e);
            }
            failed.is_none()
        });
        if failed.is_none() {
            failed = self.out.write_all(b"\n").err();
        }
        if let Some(e) = failed {
            return Err(output_error(&e));
        }
        limit.map_err(|mut e| {
            e.message.push_str(" while printing a value");
            e
        })
    }

    /// Fails while input and output are off (`ad::tape::NO_IO`: a run that
    /// is to be made again if it reads or writes).
    #[inline]
    fn io_allowed(&self) -> Result<()> {
        if self.tape.no_io {
            return Err(Error::runtime(None, crate::ad::tape::NO_IO));
        }
        Ok(())
    }

    /// The text of a labelled `write` form, followed by `end`.
    pub fn write_text(&mut self, text: &str, end: &str) -> Result<()> {
        self.io_allowed()?;
        let r = self.out.write_all(text.as_bytes()).and_then(|()| self.out.write_all(end.as_bytes()));
        r.map_err(|e| output_error(&e))
    }

    /// `read-real`: reads the next number from standard input (numbers are
    /// separated by white space or line breaks, as Scheme's `read` sees them).
    pub fn read_real(&mut self) -> Result<Value> {
        self.io_allowed()?;
        let _ = self.out.flush();
        while self.input_pending.is_empty() {
            let mut line = String::new();
            match self.input.read_line(&mut line) {
                Ok(0) => return Err(Error::runtime(None, "read-real: end of input")),
                Ok(_) => {
                    let ds = crate::reader::read_all(&line, u32::MAX)
                        .map_err(|e| Error::runtime(None, format!("read-real: {}", e.message)))?;
                    for d in ds {
                        let text = line.get(d.span.start as usize..d.span.end as usize).unwrap_or("");
                        self.input_pending.push_back((d, text.to_string()));
                    }
                }
                Err(e) => return Err(Error::runtime(None, format!("read-real: {}", e))),
            }
        }
        let Some((d, text)) = self.input_pending.pop_front() else {
            return Err(Error::runtime(None, "read-real: end of input"));
        };
        match &d.kind {
            crate::datum::DatumKind::Int(i) => Ok(Value::Int(*i)),
            crate::datum::DatumKind::Big(b) => Ok(Value::Big(b.clone())),
            crate::datum::DatumKind::Real(r) => Ok(Value::Real(*r)),
            crate::datum::DatumKind::Rat(q) => Ok(Value::Rat(q.clone())),
            _ => Err(Error::runtime(None, format!("read-real: not a number: {}", text))),
        }
    }

    /// Adds a global slot.
    pub fn add_global(&mut self, name: Rc<str>, span: Span, state: GState) -> u32 {
        let id = self.globals.len() as u32;
        crate::show::set_global_name(id, name.clone());
        self.globals.push(Global { name, span, state, thunk: None });
        id
    }

    /// The value of a global, evaluating a constant definition on first use.
    pub fn global(&mut self, id: u32) -> Result<Value> {
        match &self.globals[id as usize].state {
            GState::Value(v) => Ok(v.clone()),
            GState::Forcing => Err(Error::runtime(
                Some(self.globals[id as usize].span),
                format!("the definition of `{}` depends on its own value", self.globals[id as usize].name),
            )),
            GState::Failed(e) => Err(e.clone()),
            GState::Thunk(g) => {
                let g = g.clone();
                self.globals[id as usize].state = GState::Forcing;
                self.stack.push(Value::Nil);
                let r = self.call_closure(InstRc::empty(g.clone()), 0, 1, None);
                match r {
                    Ok(v) => {
                        self.globals[id as usize].state = GState::Value(v.clone());
                        Ok(v)
                    }
                    Err(e) => {
                        // Leave it unevaluated so a later use reports the error again.
                        self.globals[id as usize].state = GState::Thunk(g);
                        Err(e)
                    }
                }
            }
        }
    }

    /// The A-normal form of a group's members, computing a transformed group's on demand.
    pub fn group_members<'g>(&mut self, g: &'g Rc<Group>) -> Result<&'g [Lambda]> {
        if g.members.get().is_none() {
            if g.computing.get() {
                return Err(Error::runtime(None, "internal error: transform of a group depends on itself"));
            }
            g.computing.set(true);
            let ms = crate::ad::compute_members(self, g);
            g.computing.set(false);
            let _ = g.members.set(ms?);
        }
        Ok(g.members.get().unwrap())
    }

    /// The runnable code of a group.
    pub fn group_code<'g>(&mut self, g: &'g Rc<Group>) -> Result<&'g GroupCode> {
        if g.code.get().is_none() {
            let members = self.group_members(g)?;
            if g.is_derivative_code() {
                g.mark_nested_derivative();
            }
            let globals = &self.globals;
            let callees = |k: u32| match globals.get(k as usize).map(|x| &x.state) {
                Some(GState::Value(Value::Closure(i, 0))) if i.env.is_empty() => Some(i.group.clone()),
                _ => None,
            };
            let callees: Option<crate::resolve::Callees<'_>> =
                if self.inline_calls { Some(&callees) } else { None };
            let code = crate::resolve::resolve_group(g, members, callees, self.named_let_loops);
            for lam in code.members.iter() {
                lam.jit.set(crate::jit::initial(g, &code, self.jit_after));
                lam.closure_jit.set(crate::jit::initial_closure(g, &code, self.jit_after));
                crate::jit::initial_loops(g, &code, &lam.body, self.jit_after);
            }
            let _ = g.code.set(code);
        }
        Ok(g.code.get().unwrap())
    }

    /// [`Machine::group_code`] where the group's code is not made yet: made
    /// with the watchdog told (`--timeout`'s message then says what ran past it).
    #[cold]
    #[inline(never)]
    pub fn group_code_first<'g>(&mut self, g: &'g Rc<Group>) -> Result<&'g GroupCode> {
        let was = crate::watchdog::phase();
        if was == crate::watchdog::Phase::Running {
            crate::watchdog::set_phase(crate::watchdog::Phase::CompilingCalled);
        }
        let r = self.group_code(g);
        crate::watchdog::set_phase(was);
        r
    }

    /// The procedure calls (and other steps) counted so far: a deterministic
    /// measure of work, bounded by `--max-steps`.
    pub fn steps(&self) -> u64 {
        self.step_end - self.fuel
    }

    /// Sets the count of steps (to 0 for a fresh evaluation).
    pub fn set_steps(&mut self, steps: u64) {
        self.arm(steps);
    }

    /// The most steps allowed (`--max-steps`; `u64::MAX`: no limit).
    pub fn max_steps(&self) -> u64 {
        self.max_steps
    }

    /// Sets the most steps allowed: a step counted past it fails.
    pub fn set_max_steps(&mut self, max: u64) {
        let steps = self.steps();
        self.max_steps = max;
        self.arm(steps);
    }

    /// Restarts the countdown of [`Machine::tick`] at `steps` steps: to the
    /// next periodic check, or to the step that passes `max_steps` if that
    /// comes first (the next step, if the count is past it already).
    fn arm(&mut self, steps: u64) {
        let room = self.max_steps.saturating_sub(steps).saturating_add(1);
        self.fuel = room.min(CHECK_EVERY + 1);
        self.step_end = steps + self.fuel;
    }

    /// The number of nested procedure calls running.
    pub fn depth(&self) -> usize {
        (self.max_depth as isize - self.depth_left) as usize
    }

    /// Forgets the calls running (before a fresh evaluation, or after one failed).
    pub fn reset_depth(&mut self) {
        self.depth_left = self.max_depth as isize;
    }

    /// The most nested calls allowed (`--max-depth`).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Sets the most nested calls allowed (a call nested deeper fails).
    pub fn set_max_depth(&mut self, max: usize) {
        let max = max.min(isize::MAX as usize / 2);
        let depth = self.depth();
        self.max_depth = max;
        self.depth_left = max as isize - depth as isize;
    }

    /// Counts a step; every so often checks the clock and Ctrl-C.
    #[inline(always)]
    pub(crate) fn tick(&mut self) -> Result<()> {
        if self.count_step() {
            return self.check_limits();
        }
        Ok(())
    }

    /// Counts a step; true where the limits are to be checked now (every
    /// `CHECK_EVERY + 1` steps, and on each step past `max_steps`).
    #[inline(always)]
    pub(crate) fn count_step(&mut self) -> bool {
        self.fuel -= 1;
        if self.fuel == 0 {
            self.rearm();
            return true;
        }
        false
    }

    #[cold]
    #[inline(never)]
    fn rearm(&mut self) {
        self.arm(self.step_end);
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn check_limits(&mut self) -> Result<()> {
        if self.over_steps() {
            return Err(Error::new(
                ErrorKind::Limit,
                None,
                format!("step limit of {} exceeded (--max-steps)", self.max_steps),
            ));
        }
        self.check_memory()?;
        self.check_interrupt_and_clock()
    }

    /// Every fourth check of the limits (some 65,000 steps): where the
    /// process's resident memory has grown by [`crate::stack::CHUNK`] past
    /// where the memory left was last found enough for it, an error unless
    /// it still is (`stack::room_for`). A program whose data grows past what
    /// the machine or its control group (a container's limit) has left then
    /// stops with an error rather than being killed; the first look only notes
    /// the size, so a program that does not grow is never stopped.
    #[cold]
    #[inline(never)]
    fn check_memory(&mut self) -> Result<()> {
        self.memory_checks = self.memory_checks.wrapping_add(1);
        if !self.memory_checks.is_multiple_of(4) {
            return Ok(());
        }
        self.check_memory_now()
    }

    /// [`Machine::check_memory`]'s look at the memory, now.
    #[cold]
    #[inline(never)]
    fn check_memory_now(&mut self) -> Result<()> {
        let Some(rss) = crate::stack::resident_bytes() else { return Ok(()) };
        if self.memory_found == 0 {
            self.memory_found = rss + crate::stack::CHUNK;
        }
        if rss < self.memory_found {
            return Ok(());
        }
        // (room for as much again as it grew by since the memory left was
        // last found enough, a chunk at least: the next look may come as late)
        let grown = rss.saturating_sub(self.memory_found - crate::stack::CHUNK);
        if crate::stack::room_for(grown.max(crate::stack::CHUNK)) {
            self.memory_found = rss + crate::stack::CHUNK;
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Limit,
            None,
            format!("out of memory: the program holds {} MB, and too little is left for more", rss >> 20),
        ))
    }

    /// The counts compiled code changes (`jit`): the steps' countdown and
    /// the levels left, saved when it is entered.
    pub(crate) fn jit_counts(&self) -> (u64, u64, isize) {
        (self.step_end, self.fuel, self.depth_left)
    }

    /// Sets the counts back to where compiled code that gave up found them.
    pub(crate) fn set_jit_counts(&mut self, (step_end, fuel, depth_left): (u64, u64, isize)) {
        (self.step_end, self.fuel, self.depth_left) = (step_end, fuel, depth_left);
    }

    /// For compiled code whose countdown of steps ran out: restarts it, and
    /// tells whether the limits `check_limits` checks are all within bounds
    /// (leaving Ctrl-C to be seen again by the evaluator, which runs the
    /// code's call again where they are not).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) fn jit_tick_ok(&mut self) -> bool {
        self.rearm();
        !self.over_steps()
            && self.check_memory().is_ok()
            && !self.interrupt.load(Ordering::Relaxed)
            && !self.past_deadline()
    }

    /// Whether more steps were counted than `--max-steps` allows.
    fn over_steps(&self) -> bool {
        self.steps() > self.max_steps
    }

    /// Whether `--timeout`'s deadline has passed.
    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() > d)
    }

    /// Ctrl-C and `--timeout`: an error if either has come.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_interrupt_and_clock(&mut self) -> Result<()> {
        if self.interrupt.load(Ordering::Relaxed) {
            self.interrupt.store(false, Ordering::Relaxed);
            return Err(Error::new(ErrorKind::Limit, None, "interrupted"));
        }
        if self.past_deadline() {
            return Err(Error::new(ErrorKind::Limit, None, "time limit exceeded (--timeout)"));
        }
        Ok(())
    }

    /// Applies a procedure value to one argument value.
    pub fn apply_value(&mut self, f: Value, arg: Value, span: Option<Span>) -> Result<Value> {
        self.stack.push(arg);
        self.call(f, 1, span)
    }

    /// Calls `f` with the `nargs` values on top of the value stack (an n-tuple when
    /// `nargs` > 1), removing them.
    pub fn call(&mut self, f: Value, nargs: usize, span: Option<Span>) -> Result<Value> {
        self.call_push(f, nargs, span)?;
        Ok(self.pop())
    }

    /// Calls procedure `f` on `args` (a primitive calling a procedure it was
    /// passed, as `map` does): as [`Machine::call`], a closure through the
    /// reference (no count raised and lowered around the call).
    pub fn call_on(&mut self, f: &Value, args: &[Value]) -> Result<Value> {
        if let (Value::Closure(inst, idx), [x]) = (f, args) {
            if let Some(v) = self.call_arith_body(inst, *idx, x) {
                return Ok(v);
            }
        }
        match f {
            Value::Closure(inst, idx) => self.call_closure_on(inst, *idx, args),
            f => {
                for a in args {
                    self.push(a.clone());
                }
                self.call(f.clone(), args.len(), None)
            }
        }
    }

    /// Calls member `idx` of `inst` on `args`, as a call (not in tail
    /// position) of a closure a slot holds is made (`app_push`); for
    /// [`Machine::call_on`], and for compiled code calling a procedure value
    /// (`jit::call_value`).
    #[inline(always)]
    pub(crate) fn call_closure_on(&mut self, inst: &InstRc, idx: u32, args: &[Value]) -> Result<Value> {
        for a in args {
            self.push(a.clone());
        }
        self.call_closure_pushed(inst, idx, args.len())
    }

    /// [`Machine::call_closure_on`] of the `nargs` values on top of the
    /// value stack (pushed by the caller, which may write them there in
    /// place: see [`Machine::push_in_place`]).
    #[inline(always)]
    pub(crate) fn call_closure_pushed(&mut self, inst: &InstRc, idx: u32, nargs: usize) -> Result<Value> {
        self.call_closure_push(inst, idx, nargs, None)?;
        Ok(self.pop())
    }

    /// Pushes the value `make` makes, made where the value stack's next
    /// element goes: for a value made in one of several ways, each way
    /// calling this with its own `make`, not a value made on the native stack
    /// in parts and copied whole, which loads 16 bytes the processor cannot
    /// forward from the stores that just made them (a stall).
    #[inline(always)]
    pub(crate) fn push_with(&mut self, make: impl FnOnce() -> Value) {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
        // SAFETY: there is room for one more element.
        unsafe {
            let len = self.stack.len();
            self.stack.as_mut_ptr().add(len).write(make());
            self.stack.set_len(len + 1);
        }
    }

    /// Drops the top `n` values of the value stack.
    pub(crate) fn drop_pushed(&mut self, n: usize) {
        self.truncate_to(self.stack.len() - n);
    }

    /// A call on `x` of member `idx` of `inst` whose body is one arithmetic
    /// operation on its parameter and constants or captured values, as `map`
    /// is passed `(lambda (x) (* k x))` (see [`arith_lambda`]): the operation
    /// computed as the body computes it (`prims::arith2_of`: the inline
    /// arithmetic on numbers, else that of a level's reals, a level's real
    /// straight to its record), the call counted as a step, without a frame.
    /// `None` where that does not apply or does not give a value (then the
    /// call is made, and reports any error as it does): a step that checks the
    /// limits, a call past `--max-depth`, anything metered.
    #[inline(never)]
    fn call_arith_body(&mut self, inst: &InstRc, idx: u32, x: &Value) -> Option<Value> {
        if self.fuel <= 1 || self.depth_left < 1 || self.meter.is_some() || !self.arith_bodies {
            return None;
        }
        let lam = arith_lambda(inst, idx)?;
        let (op, a, b, p) = arith_operation(lam, inst, x)?;
        let int;
        let b = match b {
            Ok(b) => b,
            Err(k) => {
                int = Value::Int(k);
                &int
            }
        };
        let v = match fast_arith(op, a, b) {
            Some(n) => n.value(),
            None => prims::arith2_active(self, op, p, a, b)?.ok()?,
        };
        self.fuel -= 1;
        Some(v)
    }

    /// Pops the top of the value stack (a result left there by a call).
    #[inline(always)]
    fn pop(&mut self) -> Value {
        self.stack.pop().unwrap_or(Value::Nil)
    }

    /// Like [`Machine::call`], but leaves the result on top of the value stack.
    /// (The evaluator's own calls pass values through the value stack rather than
    /// returning `Result<Value>`, which compiles to slow partial copies.)
    fn call_push(&mut self, f: Value, nargs: usize, span: Option<Span>) -> Result<()> {
        // A lazily zeroed or tagged closure: build it (its head normal form is
        // a closure), then call it, here rather than in a nested call, so that
        // deep recursion through such calls keeps one frame.
        let f = match f {
            Value::Lazy(_) => self.force_procedure(f)?,
            f => f,
        };
        match f {
            Value::Closure(inst, idx) => self.call_closure_push(&inst, idx, nargs, span.as_ref()),
            Value::Prim(p) => {
                let v = self.call_prim(p, nargs).map_err(|e| match span {
                    Some(s) => e.at_prim(prims::prim(p).name, s),
                    None => e,
                })?;
                self.stack.push(v);
                Ok(())
            }
            other => {
                let len = self.stack.len();
                self.stack.truncate(len - nargs);
                Err(not_a_procedure(&other, span))
            }
        }
    }

    /// The head normal form of a lazy value being called (see [`Machine::call_push`]).
    #[inline(never)]
    fn force_procedure(&mut self, f: Value) -> Result<Value> {
        crate::ad::ops::hnf(self, &f)
    }

    /// Pops `nargs` values and returns them as one value (building the tuple).
    fn pop_args_value(&mut self, nargs: usize) -> Value {
        let mut acc = self.stack.pop().unwrap_or(Value::Nil);
        for _ in 1..nargs {
            let v = self.stack.pop().unwrap_or(Value::Nil);
            acc = Value::cons(v, acc);
        }
        acc
    }

    /// [`Machine::call_prim`] of a primitive of `N` arguments, `xs` (not on
    /// the value stack).
    #[inline(always)]
    fn call_prim_array<const N: usize>(&mut self, p: PrimId, mut xs: [Value; N]) -> Result<Value> {
        let def = self.prim_entry(p)?;
        self.force_args(def, &mut xs)?;
        (def.imp)(self, &xs)
    }

    /// A primitive's arguments with the lazy ones built (unless `def` takes
    /// them lazy).
    #[inline(always)]
    fn force_args(&mut self, def: &PrimDef, xs: &mut [Value]) -> Result<()> {
        if !def.lazy {
            for b in xs.iter_mut() {
                if let Value::Lazy(_) = b {
                    *b = self.force_arg(def, b)?;
                }
            }
        }
        Ok(())
    }

    /// Primitive `p`'s definition, as a call of it begins: the call metered,
    /// and declined on a tape that does not model it.
    #[inline(always)]
    fn prim_entry(&mut self, p: PrimId) -> Result<&'static PrimDef> {
        let def = prims::prim(p);
        if let Some(m) = &mut self.meter {
            if def.class != Class::Other {
                m[p as usize] += 1;
            }
        }
        if self.tape.active() && !def.tape_ok {
            return Err(crate::ad::tape::decline(def.name));
        }
        Ok(def)
    }

    /// A call of primitive `p` on `xs`, as many as it takes, made for
    /// compiled code (`jit::call_prim`) as the evaluator makes such a call
    /// (`prim_value`; the code is never a derivative's, whose calls
    /// `--metered` counts apart).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) fn prim_call(&mut self, p: PrimId, xs: &mut [Value]) -> Result<Value> {
        let def = self.prim_entry(p)?;
        self.force_args(def, xs)?;
        (def.imp)(self, xs)
    }

    /// Calls a primitive on the `nargs` values on top of the stack.
    pub fn call_prim(&mut self, p: PrimId, nargs: usize) -> Result<Value> {
        let def = match self.prim_entry(p) {
            Ok(def) => def,
            Err(e) => {
                let len = self.stack.len();
                self.stack.truncate(len - nargs);
                return Err(e);
            }
        };
        if nargs == def.arity as usize && nargs <= 3 {
            let mut buf: [Value; 3] = [Value::Nil, Value::Nil, Value::Nil];
            for i in (0..nargs).rev() {
                buf[i] = self.stack.pop().unwrap_or(Value::Nil);
            }
            self.force_args(def, &mut buf[..nargs])?;
            let r = (def.imp)(self, &buf[..nargs]);
            return self.exact_checked(r);
        }
        if nargs > 1 && def.arity >= 2 {
            let len = self.stack.len();
            self.stack.truncate(len - nargs);
            return Err(arity_error(def.name, def.arity, nargs));
        }
        let mut v = self.pop_args_value(nargs);
        if let Value::Lazy(_) = v {
            v = crate::ad::ops::hnf(self, &v)?;
        }
        let mut args: SmallVec<[Value; 4]> = SmallVec::new();
        prims::spread(self, p, v, &mut args)?;
        self.force_args(def, &mut args)?;
        let r = (def.imp)(self, &args);
        self.exact_checked(r)
    }

    /// A primitive's result `r`, or, where it is a big integer or a
    /// rational and those made since the last such look hold more than a
    /// quarter of [`crate::stack::CHUNK`] (`num::made_past`: the memory they
    /// take grows by more than their bytes, their operations' temporaries
    /// left in the allocator's free lists, about three times as much in a
    /// recursion multiplying as it descends), the out-of-memory error if too
    /// little memory is left for more (`check_memory_now`).
    #[inline(always)]
    fn exact_checked(&mut self, r: Result<Value>) -> Result<Value> {
        if let Ok(Value::Big(_) | Value::Rat(_)) = &r {
            if crate::num::made_past(crate::stack::CHUNK / 4) {
                self.check_memory_now()?;
            }
        }
        r
    }

    /// A lazy argument of a primitive that does not take lazy values: built as
    /// far as the primitive looks (see `PrimDef::shallow`).
    #[cold]
    fn force_arg(&mut self, def: &PrimDef, v: &Value) -> Result<Value> {
        if def.shallow {
            crate::ad::ops::hnf(self, v)
        } else {
            crate::ad::ops::force(self, v)
        }
    }

    /// [`Machine::meter_site`] where derivative work is metered.
    #[inline(always)]
    fn meter_site_derivative(&mut self, p: PrimId, inst: &InstRc) {
        if self.meter_derivative.is_some() {
            self.meter_site(p, inst);
        }
    }

    /// Counts a primitive call made by AD-transformed code (see `meter_derivative`).
    #[cold]
    fn meter_site(&mut self, p: PrimId, inst: &InstRc) {
        if prims::prim(p).class == Class::Other || !inst.group.is_derivative_code() {
            return;
        }
        if let Some(d) = &mut self.meter_derivative {
            d[p as usize] += 1;
        }
    }

    /// Calls a closure; deep recursion grows the native stack instead of overflowing.
    pub fn call_closure(
        &mut self,
        inst: InstRc,
        idx: u32,
        nargs: usize,
        span: Option<Span>,
    ) -> Result<Value> {
        self.call_closure_push(&inst, idx, nargs, span.as_ref())?;
        Ok(self.pop())
    }

    /// Calls a closure, leaving the result on top of the value stack.
    #[inline(always)]
    fn call_closure_push(
        &mut self,
        inst: &InstRc,
        idx: u32,
        nargs: usize,
        span: Option<&Span>,
    ) -> Result<()> {
        self.depth_left -= 1;
        if self.depth_left < 0 {
            return Err(self.call_too_deep(nargs, span));
        }
        let r = if self.stack_ok() {
            self.call_loop(inst, idx, nargs, span)
        } else {
            self.call_loop_grow(inst, idx, nargs, span)
        };
        self.depth_left += 1;
        r
    }

    /// A call nested deeper than `max_depth`: not made (its arguments are
    /// dropped, the count of calls running is restored).
    #[cold]
    #[inline(never)]
    fn call_too_deep(&mut self, nargs: usize, span: Option<&Span>) -> Error {
        self.depth_left += 1;
        let len = self.stack.len();
        self.stack.truncate(len - nargs);
        too_deep(self.max_depth, span.copied())
    }

    /// `call_loop` when the native stack may be running out (or its bounds are not
    /// known yet): continues on a new segment if needed, and records the bounds of
    /// the stack it runs on so that the calls it makes can check them cheaply.
    #[cold]
    #[inline(never)]
    fn call_loop_grow(&mut self, inst: &InstRc, idx: u32, nargs: usize, span: Option<&Span>) -> Result<()> {
        if !crate::stack::can_grow(RED_ZONE) {
            let len = self.stack.len();
            self.stack.truncate(len - nargs);
            return Err(out_of_stack(self.depth(), span.copied()));
        }
        self.with_stack(|m| m.call_loop(inst, idx, nargs, span))
    }

    /// Whether the native stack has room for another level of evaluation
    /// without a check by `stacker` (see [`Machine::with_stack`]).
    #[inline(always)]
    fn stack_ok(&self) -> bool {
        stack_pointer().wrapping_sub(self.stack_lo) < self.stack_span
    }

    /// Runs `f` on a new stack segment if the native stack is running out (or its
    /// bounds are not known yet), recording the bounds of the stack it runs on so
    /// that the calls and nested blocks it evaluates can check them cheaply.
    #[cold]
    #[inline(never)]
    fn with_stack<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        grow_native_stack(self, |m| m, f)
    }

    /// Whether the native stack has room for another level of a recursive
    /// executor (the reversible one, `rev::exec`) without a check by
    /// `stacker`; where not, it continues in [`grow_native_stack`].
    #[inline(always)]
    pub(crate) fn native_stack_ok(&self) -> bool {
        self.stack_ok()
    }

    /// Runs a closure call; leaves the result on top of the value stack, where the
    /// arguments were. The common case (the body returns without a tail call)
    /// takes no loop state; tail calls continue in [`Machine::tail_loop`].
    fn call_loop(&mut self, inst: &InstRc, idx: u32, nargs: usize, span: Option<&Span>) -> Result<()> {
        let base = self.stack.len() - nargs;
        match self.enter(base, inst, idx, nargs) {
            Ok(Next::Return) => Ok(()),
            Ok(next) => self.tail_loop(base, inst, idx, next, span),
            Err(e) => Err(self.call_failed(base, e, None, inst, idx, &inst.group, idx, span)),
        }
    }

    /// Continues a call with the tail call its body made (`next`: the procedure
    /// and its arguments are above the frame at `base`), looping on further tail calls.
    #[inline(never)]
    fn tail_loop(
        &mut self,
        base: usize,
        first: &InstRc,
        first_idx: u32,
        next: Next,
        span: Option<&Span>,
    ) -> Result<()> {
        /// A tail call to make: a `Next` taken apart where `enter` returns it,
        /// its call site kept beside it. (Assigning the whole `Next` to a
        /// variable copied it field by field, and reading its `Span` back whole
        /// at the loop's top then stalled on every tail call: a failed
        /// store-to-load forwarding, ~30% of a self-recursive loop's samples.)
        enum Tail {
            Sibling(u32, usize),
            Call(usize),
        }
        let (mut tail, mut site) = match next {
            Next::TailSibling(j, n, s) => (Tail::Sibling(j, n as usize), s),
            Next::TailCall(n, s) => (Tail::Call(n), s),
            Next::Return => return Ok(()),
        };
        // The procedure running now and where it was tail-called from.
        let mut inst = first.clone();
        let mut idx = first_idx;
        let mut tail_site: Option<Span> = None;
        let e = loop {
            let n = match tail {
                Tail::Sibling(j, n) => {
                    // The stack holds the frame, then the n arguments.
                    idx = j;
                    tail_site = Some(site);
                    let len = self.stack.len();
                    self.remove_below(base, len - n);
                    n
                }
                Tail::Call(n) => {
                    // The stack holds the frame, the procedure, then its n arguments.
                    let len = self.stack.len();
                    let fpos = len - n - 1;
                    let f = std::mem::replace(&mut self.stack[fpos], Value::Nil);
                    self.remove_below(base, fpos + 1);
                    // (a lazily tagged closure, as a transformed procedure's
                    // call of a global procedure is: built here, so that the
                    // call stays a tail call; but code with no place in the
                    // source, as a primitive's derivative rule, is called as a
                    // primitive is, from here, so that an error in it is placed
                    // at the call)
                    let (f, forced) = match f {
                        Value::Lazy(_) => match self.force_procedure(f) {
                            Ok(f) => (f, true),
                            Err(e) => break e,
                        },
                        f => (f, false),
                    };
                    match f {
                        Value::Closure(i2, k2)
                            if !forced || i2.group.spans.get(k2 as usize).is_some_and(|s| s.is_known()) =>
                        {
                            inst = i2;
                            idx = k2;
                            tail_site = Some(site);
                        }
                        // A primitive (or a non-procedure) in tail position.
                        f => match self.call_push(f, n, Some(site)) {
                            Ok(()) => return Ok(()),
                            Err(e) => break e,
                        },
                    }
                    n
                }
            };
            match self.enter(base, &inst, idx, n) {
                Ok(Next::Return) => return Ok(()),
                Ok(Next::TailSibling(j, n, s)) => (tail, site) = (Tail::Sibling(j, n as usize), s),
                Ok(Next::TailCall(n, s)) => (tail, site) = (Tail::Call(n), s),
                Err(e) => break e,
            }
        };
        Err(self.call_failed(base, e, tail_site, &inst, idx, &first.group, first_idx, span))
    }

    /// Decorates the error of a call: the frame is dropped; the trace gets the
    /// procedure running when it failed if it was reached by a tail call (at
    /// `tail_site`), then the procedure originally called (at the call site `span`).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn call_failed(
        &mut self,
        base: usize,
        mut e: Error,
        tail_site: Option<Span>,
        inst: &Inst,
        idx: u32,
        entered: &Group,
        entered_idx: u32,
        span: Option<&Span>,
    ) -> Error {
        self.truncate_to(base);
        if let Some((name, s)) = e.tail_frame.take() {
            // The running procedure reached a tail call run in place, which
            // failed: show that procedure, as the call would have.
            e.push_frame_at(&name, s);
        } else if let Some(s) = tail_site {
            // The running procedure was reached by a tail call: show where.
            e.push_frame_at(&member_name(&inst.group, idx), s);
        }
        if let Some(&s) = span {
            e.push_frame_at(&member_name(entered, entered_idx), s);
        }
        e
    }

    /// Sets up the frame of member `idx` with its arguments and runs its body.
    #[inline(always)]
    fn enter(&mut self, base: usize, inst: &InstRc, idx: u32, nargs: usize) -> Result<Next> {
        self.tick()?;
        if inst.group().native.get().is_some() && self.native_rules && self.enter_native(base, inst, nargs)? {
            return Ok(Next::Return);
        }
        let code: &GroupCode = match inst.group().code.get() {
            Some(c) if c.plain => c,
            _ => self.enter_checks(base, inst, idx, nargs)?,
        };
        let lam = &code.members[idx as usize];
        if lam.jit.get() != crate::jit::NEVER && crate::jit::run(self, base, lam, nargs) {
            return Ok(Next::Return);
        }
        if lam.closure_jit.get() != crate::jit::NEVER && crate::jit::run_closure(self, base, inst, lam, nargs)
        {
            return Ok(Next::Return);
        }
        // The slots the body needs before its tail (a branch extends the frame).
        let nslots = lam.body.pre as usize;
        let start = if nargs == lam.unary {
            // (`Param::Slot(0)`) The one argument is already in its slot.
            self.push_nils(base + nslots);
            0
        } else {
            match &lam.param {
                Param::Tuple { parts, skip, .. } if parts.len() == nargs => {
                    self.push_nils(base + nslots);
                    *skip
                }
                // (one argument, a tuple to destructure, as a gradient passes
                // its list: moved from the first slot to the parameter's, which
                // is past the parts' slots; its bindings then run)
                Param::Tuple { slot, .. } if nargs == 1 => {
                    self.push_nils(base + nslots);
                    self.stack.swap(base, base + *slot as usize);
                    0
                }
                Param::Slot(slot) | Param::Tuple { slot, .. } => {
                    self.enter_tuple(base, *slot, nargs, nslots);
                    0
                }
            }
        };
        self.run_block::<false>(base, inst, &lam.body, start)
    }

    /// Runs a call natively (`ad::native`) if it can be; then its result is at `base`.
    #[inline(never)]
    fn enter_native(&mut self, base: usize, inst: &InstRc, nargs: usize) -> Result<bool> {
        let Some(nat) = inst.group().native.get() else { return Ok(false) };
        match crate::ad::native::run(self, nat, inst, base, nargs)? {
            Some(v) => {
                self.ret::<false>(base, v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Sets up a frame whose parameter slot gets the arguments as one value.
    #[inline(never)]
    fn enter_tuple(&mut self, base: usize, slot: u32, nargs: usize, nslots: usize) {
        let v = self.pop_args_value(nargs);
        self.push_nils(base + nslots);
        self.stack[base + slot as usize] = v;
    }

    /// Grows the value stack to `len` with `()` (the frame's unset slots).
    #[inline]
    fn push_nils(&mut self, len: usize) {
        let cur = self.stack.len();
        if len > cur {
            if len > self.stack.capacity() {
                self.grow_stack_to(len);
            }
            // SAFETY: the capacity was just reserved, and every element up to the
            // new length is initialised before the length is set.
            unsafe {
                let p = self.stack.as_mut_ptr();
                for i in cur..len {
                    p.add(i).write(Value::Nil);
                }
                self.stack.set_len(len);
            }
        }
    }

    /// The checks made before entering a member of a group that is not plain
    /// (shapes, forward/reverse transformed groups), and its code, computed on
    /// first use.
    #[cold]
    #[inline(never)]
    fn enter_checks<'i>(
        &mut self,
        base: usize,
        inst: &'i InstRc,
        idx: u32,
        nargs: usize,
    ) -> Result<&'i GroupCode> {
        if inst.group.is_shape() {
            return Err(shape_error(inst, idx));
        }
        if let crate::anf::Origin::Transformed(k @ (Kind::F | Kind::R), _) = &inst.group.origin {
            if nargs > 0 {
                let arg = &self.stack[base];
                if let Some(msg) = crate::ad::ops::tag_mismatch(*k, arg) {
                    return Err(Error::runtime(None, format!("{}: {}", member_name(&inst.group, idx), msg)));
                }
            }
        }
        if inst.group.code.get().is_none() {
            return self.group_code_first(&inst.group);
        }
        self.group_code(&inst.group)
    }

    /// Runs a block. A procedure's body (`INNER` false) ends by leaving its result
    /// alone at `base` (the frame is gone) or with a tail call: the procedure and
    /// its arguments pushed above the frame. An inner block (a branch of an `if`
    /// that is not in tail position) pushes its result above the frame.
    #[inline(always)]
    fn run_block<const INNER: bool>(
        &mut self,
        base: usize,
        inst: &InstRc,
        block: &CBlock,
        start: usize,
    ) -> Result<Next> {
        self.run_blocks::<INNER, false>(base, inst, block, start, &mut None)
    }

    /// Runs a procedure's own loop (`resolve::Loop::entered`): its variables
    /// are the parameters the call set, its frame the call's. An error after
    /// it called itself names it at the last of those calls, as a tail
    /// call's frame would have been named.
    #[inline(never)]
    fn run_own_loop(&mut self, base: usize, inst: &InstRc, lp: &Loop) -> Result<Next> {
        let mut at = Some((lp, lp.site));
        let r = self.run_blocks::<false, true>(base, inst, &lp.body, 0, &mut at);
        r.map_err(|e| match at {
            Some((_, s)) if s.is_known() => loop_failed(e, at),
            _ => e,
        })
    }

    /// An iteration of a procedure's own loop (`resolve::Loop::entered`),
    /// its step counted and its parameters (`params`) set: the tail call of
    /// the procedure it stands for, run in compiled code if the procedure
    /// has it (or is counted towards it: the iterations count as entries).
    /// True where it was: its result is then alone at `base`.
    #[inline(always)]
    fn jit_again(&mut self, base: usize, inst: &InstRc, params: &[u32]) -> bool {
        let Some(code) = inst.group().code.get() else { return false };
        let lam = &code.members[0];
        lam.jit.get() != crate::jit::NEVER
            && params.iter().enumerate().all(|(i, p)| *p == i as u32)
            && crate::jit::run(self, base, lam, params.len())
    }

    /// A procedure's call of itself (`resolve::Again::global`) where global
    /// `g` no longer holds it: made as the tail call it is.
    #[cold]
    #[inline(never)]
    fn again_as_call(&mut self, base: usize, inst: &InstRc, a: &Again, g: u32) -> Result<Next> {
        self.push_atom(base, inst, &CAtom::Global(g))?;
        let n = self.push_tail_args(base, inst, &a.args, a.moves)?;
        Ok(Next::TailCall(n, a.site))
    }

    /// Runs a named `let`'s loop (see `resolve::Loop`), entered in tail
    /// position of a procedure's body, and the rest of that body: it counts
    /// as the call it stands for; its frame extends the procedure's. An error
    /// in it names it and where it was called last.
    #[inline(never)]
    fn run_loop(&mut self, base: usize, inst: &InstRc, lp: &Loop) -> Result<Next> {
        if lp.entered {
            return self.run_own_loop(base, inst, lp);
        }
        let mut at = Some((lp, lp.site));
        let r = match self.enter_loop(base, inst, lp) {
            Ok(()) if let Some(v) = self.jit_loop_entry(base, lp) => {
                self.ret::<false>(base, v);
                Ok(Next::Return)
            }
            Ok(()) => self.run_blocks::<false, true>(base, inst, &lp.body, 0, &mut at),
            Err(e) => Err(e),
        };
        r.map_err(|e| loop_failed(e, at))
    }

    /// The value of a named `let`'s loop whose value is used (see
    /// `Resolver::inner_loop_at`), run as an inner block: it counts as the
    /// non-tail call it stands for (a step, and a level), and an error in it
    /// names it where it was called last and where it was called first, as
    /// that call's frames would have; one whose first call is in tail
    /// position of a call run in place (`Loop::in_place_tail`) counts as
    /// that tail call (a step), and is named as a procedure reached by tail
    /// calls is. It checks the native stack as a nested block does.
    #[inline(never)]
    fn run_inner_loop(&mut self, base: usize, inst: &InstRc, lp: &Loop) -> Result<Value> {
        if !lp.in_place_tail {
            self.level_down(lp.site)?;
        }
        let r = self.nested(Some(lp.site), |m| m.inner_loop(base, inst, lp));
        if !lp.in_place_tail {
            self.depth_left += 1;
        }
        r
    }

    /// A level more for a call made without `call_closure` (a call run in
    /// place, a loop run as an inner block): too deep is reported at `site`
    /// without a frame, as `call_too_deep` reports it. The caller gives the
    /// level back (`depth_left += 1`) when the call returns.
    #[inline(always)]
    fn level_down(&mut self, site: Span) -> Result<()> {
        self.depth_left -= 1;
        if self.depth_left < 0 {
            // (the call is not made: nothing to trace)
            self.depth_left += 1;
            return Err(too_deep(self.max_depth, Some(site)));
        }
        Ok(())
    }

    /// `f` run where a block nested in a binding runs: it recurses natively
    /// as a call does (deeply nested source; large frames in a debug build),
    /// so it checks the native stack as a call does, continuing on a new
    /// segment where one is needed (out of stack, placed at `site`, where
    /// none can be had).
    #[inline(always)]
    fn nested<R>(&mut self, site: Option<Span>, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        if self.stack_ok() {
            f(self)
        } else if !crate::stack::can_grow(RED_ZONE) {
            Err(out_of_stack(self.depth(), site))
        } else {
            self.with_stack(f)
        }
    }

    /// [`Machine::run_inner_loop`]'s loop.
    fn inner_loop(&mut self, base: usize, inst: &InstRc, lp: &Loop) -> Result<Value> {
        let mut at = Some((lp, lp.site));
        let r = match self.enter_loop(base, inst, lp) {
            Ok(()) if let Some(v) = self.jit_loop_entry(base, lp) => {
                self.ret::<true>(base, v);
                Ok(Next::Return)
            }
            Ok(()) => self.run_blocks::<true, true>(base, inst, &lp.body, 0, &mut at),
            Err(e) => Err(e),
        };
        match r {
            Ok(_) => Ok(self.pop()),
            Err(e) if lp.in_place_tail => Err(loop_failed(e, at)),
            Err(e) => Err(inner_loop_failed(e, lp, at.map_or(lp.site, |(_, s)| s))),
        }
    }

    /// The value of a loop just entered (`enter_loop`) whose code is
    /// compiled, run in compiled code from its first iteration (as from a
    /// later one: `jit::run_loop`); `None` where it is not compiled, or its
    /// code does not take the values it reads, or gave up.
    #[inline(always)]
    fn jit_loop_entry(&mut self, base: usize, lp: &Loop) -> Option<Value> {
        if crate::jit::loop_compiled(lp) {
            crate::jit::run_loop(self, base, lp)
        } else {
            None
        }
    }

    /// Enters a loop: the step its first call counts, its frame, its
    /// variables set to the first call's arguments, the dead slots emptied.
    #[inline(always)]
    fn enter_loop(&mut self, base: usize, inst: &InstRc, lp: &Loop) -> Result<()> {
        self.tick()?;
        self.push_nils(base + lp.frame as usize);
        self.assign(base, inst, &lp.init, lp.init_moves, &lp.params, lp.init_in_order)?;
        self.clear_slots(base, &lp.dead);
        Ok(())
    }

    /// [`Machine::run_block`]; with `LOOP`, the body of a loop and the blocks
    /// it runs (`at`: the loop running and where it was called last, set by
    /// each call of it).
    #[inline(always)]
    fn run_blocks<'b, const INNER: bool, const LOOP: bool>(
        &mut self,
        base: usize,
        inst: &InstRc,
        block: &'b CBlock,
        start: usize,
        at: &mut Option<(&'b Loop, Span)>,
    ) -> Result<Next> {
        let mut block = block;
        let mut start = start;
        loop {
            for b in &block.binds[start..] {
                // The common bindings are run here; a call recurses through
                // `call_loop` alone (one native frame per interpreted call level).
                match b {
                    CBind::Let(s, CExpr::Arith2(op, a, b2, p, span)) => {
                        self.bind_arith(base, inst, *op, a, b2, p, span, base + *s as usize)?
                    }
                    // (The commonest operator, `(- n k)`, is told apart in
                    // this match: its arithmetic then needs no jump on it.)
                    CBind::Let(s, CExpr::Arith2Int(Op2::Sub, x, k, ..)) => {
                        let i = base + *s as usize;
                        if !self.arith_int_put(base, Op2::Sub, *x, *k, i) {
                            self.exec_other(base, inst, b)?
                        }
                    }
                    CBind::Let(s, CExpr::Arith2Int(op, x, k, ..)) => {
                        let i = base + *s as usize;
                        if !self.arith_int_put(base, *op, *x, *k, i) {
                            self.exec_other(base, inst, b)?
                        }
                    }
                    CBind::Let(s, CExpr::App(f, args, span, _)) => {
                        self.app_push(base, inst, f, args, span)?;
                        self.pop_into(base + *s as usize);
                    }
                    CBind::Let(s, CExpr::AppArith(c)) => {
                        self.app_arith_push(base, inst, c)?;
                        self.pop_into(base + *s as usize);
                    }
                    // (the call's result is the slot: see `CBind::PushArith`)
                    CBind::PushArith(s, c, clear) => {
                        debug_assert_eq!(self.stack.len(), base + *s as usize);
                        self.app_arith_push(base, inst, c)?;
                        self.clear_slots(base, clear);
                    }
                    CBind::PushApp(s, f, args, span, clear) => {
                        debug_assert_eq!(self.stack.len(), base + *s as usize);
                        self.app_push(base, inst, f, args, span)?;
                        self.clear_slots(base, clear);
                    }
                    // (a list walked: in a small frame of its own, not
                    // through `exec_bind`'s)
                    CBind::Uncons(..) => self.exec_uncons(base, inst, b)?,
                    _ => self.exec_bind(base, inst, b)?,
                }
            }
            start = 0;
            // The common cases are run here, the rest out of line (`tail_slow`),
            // so that this frame stays small.
            match &block.tail {
                CExpr::If(c, t, e) => {
                    block = if self.truth(base, inst, c)? { t } else { e };
                    if !INNER {
                        // (An inner block's slots are all in its frame already.)
                        self.push_nils(base + block.pre as usize);
                    }
                    continue;
                }
                CExpr::App(f, args, span, moves) if !INNER => {
                    // (a sibling is not pushed: no closure is built for it;
                    // nor is a global naming a member of the running instance,
                    // as a procedure defined at the top level calling itself)
                    let j = match f {
                        CAtom::Sibling(j) => *j,
                        CAtom::Global(g) if let Some(j) = self.global_member_of(*g, inst) => j,
                        _ => {
                            self.push_atom(base, inst, f)?;
                            let n = self.push_tail_args(base, inst, args, *moves)?;
                            return Ok(Next::TailCall(n, *span));
                        }
                    };
                    let n = self.push_tail_args(base, inst, args, *moves)?;
                    return Ok(Next::TailSibling(j, n as u32, *span));
                }
                // Each case leaves its value separately: a value merged from
                // several cases is copied through memory piecewise (slowly).
                // A procedure's body stores a number result in the first slot
                // of its frame (there is always one: the parameter's), from the
                // arm that computed it (the operands are read by then), then
                // drops the rest of the frame.
                // (`(+ a b)`, the commonest, is told apart in this match: its
                // arithmetic then needs no jump on the operator.)
                CExpr::Arith2(Op2::Add, a, b, ..) if !INNER => {
                    let stored = self.arith_fast_put(base, inst, Op2::Add, a, b, base);
                    return self.ret_stored(stored, base, inst, &block.tail);
                }
                CExpr::Arith2(op, a, b, ..) if !INNER => {
                    let stored = self.arith_fast_put(base, inst, *op, a, b, base);
                    return self.ret_stored(stored, base, inst, &block.tail);
                }
                CExpr::Arith2Int(op, x, k, ..) if !INNER => {
                    let stored = self.arith_int_put(base, *op, *x, *k, base);
                    return self.ret_stored(stored, base, inst, &block.tail);
                }
                CExpr::Arith2(op, a, b, ..) => match self.arith_fast(base, inst, *op, a, b) {
                    Some(n) => return Ok(self.ret_num::<INNER>(base, n)),
                    None => return self.tail_slow::<INNER>(base, inst, &block.tail),
                },
                CExpr::Arith2Int(op, x, k, ..) => match self.arith_int(base, *op, *x, *k) {
                    Some(n) => return Ok(self.ret_num::<INNER>(base, n)),
                    None => return self.tail_slow::<INNER>(base, inst, &block.tail),
                },
                CExpr::Atom(CAtom::Local(s)) if !INNER => {
                    self.ret_slot(base, base + *s as usize);
                    return Ok(Next::Return);
                }
                CExpr::Loop(lp) if !INNER && !LOOP => return self.run_loop(base, inst, lp),
                // (a loop entered in tail position of another's body: that
                // one is not called again)
                CExpr::Loop(lp) if !INNER => {
                    *at = Some((lp, lp.site));
                    self.enter_loop(base, inst, lp)?;
                    if let Some(v) = self.jit_loop_entry(base, lp) {
                        self.ret::<INNER>(base, v);
                        return Ok(Next::Return);
                    }
                    block = &lp.body;
                    continue;
                }
                CExpr::Again(a) if !INNER || LOOP => {
                    if let Some(g) = a.global {
                        if INNER || self.global_member_of(g, inst) != Some(0) {
                            return self.again_as_call(base, inst, a, g);
                        }
                    }
                    let Some((lp, _)) = *at else {
                        return Err(Error::runtime(Some(a.site), "internal error: a loop's call outside it"));
                    };
                    *at = Some((lp, a.site));
                    self.tick()?;
                    self.assign(base, inst, &a.set, a.set_moves, &a.params, a.in_order)?;
                    self.clear_slots(base, &a.clear);
                    // (a procedure's call of itself, or a named `let`'s, which
                    // may go on in compiled code)
                    if a.global.is_some() {
                        if self.jit_again(base, inst, &lp.params) {
                            return Ok(Next::Return);
                        }
                    } else if lp.jit.get() != crate::jit::NEVER {
                        if let Some(v) = crate::jit::run_loop(self, base, lp) {
                            self.ret::<INNER>(base, v);
                            return Ok(Next::Return);
                        }
                    }
                    block = &lp.body;
                    continue;
                }
                other => return self.tail_slow::<INNER>(base, inst, other),
            }
        }
    }

    /// Sets the variables of a loop (`params`, slots) to the arguments of a
    /// call of it: one by one if `in_order` (see `resolve::Again`), else all
    /// read before any is set; `moves` as for a tail call's.
    #[inline(always)]
    fn assign(
        &mut self,
        base: usize,
        inst: &InstRc,
        args: &CArgs,
        moves: Moves,
        params: &[u32],
        in_order: bool,
    ) -> Result<()> {
        if !in_order {
            self.push_tail_args(base, inst, args, moves)?;
            for p in params.iter().rev() {
                self.pop_into(base + *p as usize);
            }
        } else {
            let mut m = moves.0;
            for (a, p) in args.atoms().iter().zip(params) {
                let take = m & 1 != 0;
                m >>= 1;
                let v = match a {
                    CAtom::Local(s) if s == p => continue,
                    CAtom::Local(s) if take => {
                        std::mem::replace(self.slot_mut(base + *s as usize), Value::Nil)
                    }
                    a => atom!(self, base, inst, a),
                };
                self.set(base + *p as usize, v);
            }
        }
        Ok(())
    }

    /// Empties slots `dead` of the frame at `base` (see `resolve::Loop::dead`,
    /// `resolve::Again::clear`, and the slots a call run in place read last:
    /// `CBind::PushArith`, `CBind::Clear`).
    #[inline(always)]
    fn clear_slots(&mut self, base: usize, dead: &[u32]) {
        for s in dead {
            let i = base + *s as usize;
            if self.slot(i).needs_drop() {
                self.clear_slot(i);
            }
        }
    }

    /// The member that global `g` holds if it is a closure of instance `inst`
    /// (a tail call of it is then a sibling's: the same closure, no count to
    /// raise and lower).
    #[inline(never)]
    fn global_member_of(&self, g: u32, inst: &InstRc) -> Option<u32> {
        match &self.globals[g as usize].state {
            GState::Value(Value::Closure(ci, k)) if InstRc::ptr_eq(ci, inst) => Some(*k),
            _ => None,
        }
    }

    /// Sets slot `i` of the running frame to a number.
    #[inline(always)]
    fn set_num(&mut self, i: usize, n: Num) {
        if self.slot(i).needs_drop() {
            self.clear_slot(i);
        }
        // SAFETY: a slot of the frame, holding nothing to drop.
        unsafe { write_num(self.slot_mut(i), n) }
    }

    /// Ends a procedure's body whose number result was `stored` in the first
    /// slot of its frame (see `run_block`): drops the rest of the frame; where
    /// the inline arithmetic did not apply, runs the tail `e` out of line.
    #[inline(always)]
    fn ret_stored(&mut self, stored: bool, base: usize, inst: &InstRc, e: &CExpr) -> Result<Next> {
        if stored {
            self.truncate_to(base + 1);
            return Ok(Next::Return);
        }
        self.tail_slow::<false>(base, inst, e)
    }

    /// Pushes a number on the value stack.
    #[inline(always)]
    fn push_num(&mut self, n: Num) {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
        // SAFETY: there is room for one more element.
        unsafe {
            let len = self.stack.len();
            write_num(self.stack.as_mut_ptr().add(len), n);
            self.stack.set_len(len + 1);
        }
    }

    /// Leaves a block's result, a number, as [`Machine::ret`] does.
    #[inline(always)]
    fn ret_num<const INNER: bool>(&mut self, base: usize, n: Num) -> Next {
        if !INNER {
            self.truncate_to(base);
        }
        self.push_num(n);
        Next::Return
    }

    /// The tail expressions of a block that `run_block` does not run itself:
    /// a jump to the function for the kind (no frame of its own to set up).
    #[inline(never)]
    fn tail_slow<const INNER: bool>(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Next> {
        match e {
            // (a call run in place behind a guard that fails: the call, in
            // tail position)
            CExpr::Guarded(g) => self.tail_guarded::<INNER>(base, inst, g),
            CExpr::App(..) => self.tail_app::<INNER>(base, inst, e),
            CExpr::Prim(..) => self.tail_prim::<INNER>(base, inst, e),
            _ => self.tail_value::<INNER>(base, inst, e),
        }
    }

    /// A call in tail position (see `tail_slow`): in a procedure's body, its
    /// procedure and arguments pushed for the caller's loop to make it.
    #[inline(never)]
    fn tail_app<const INNER: bool>(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Next> {
        let CExpr::App(f, args, span, _) = e else { return self.tail_value::<INNER>(base, inst, e) };
        let fv = atom!(self, base, inst, f);
        if INNER {
            let n = self.push_args(base, inst, args)?;
            self.call_push(fv, n, Some(*span))?;
            return Ok(Next::Return);
        }
        self.push(fv);
        let n = self.push_args(base, inst, args)?;
        Ok(Next::TailCall(n, *span))
    }

    /// A primitive's call in tail position (see `tail_slow`).
    #[inline(never)]
    fn tail_prim<const INNER: bool>(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Next> {
        let v = self.prim_value(base, inst, e)?;
        self.ret::<INNER>(base, v);
        Ok(Next::Return)
    }

    /// Any other expression in tail position (see `tail_slow`): its value left.
    #[inline(never)]
    fn tail_value<const INNER: bool>(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Next> {
        let v = match e {
            CExpr::Arith2(op, a, b, p, span) => match self.arith_fast(base, inst, *op, a, b) {
                Some(n) => n.value(),
                None => self.arith_slow(base, inst, *op, a, b, *p, *span)?,
            },
            CExpr::Arith2Int(op, x, k, p, span) => {
                self.arith_int_value(base, inst, *op, *x, *k, *p, *span)?
            }
            CExpr::Atom(a) => atom!(self, base, inst, a),
            other => self.eval_expr(base, inst, other)?,
        };
        self.ret::<INNER>(base, v);
        Ok(Next::Return)
    }

    /// Leaves a procedure body's result, frame slot `i`, alone at `base`
    /// (dropping the rest of the frame).
    #[inline(always)]
    fn ret_slot(&mut self, base: usize, i: usize) {
        if i != base {
            if self.stack[base].needs_drop() {
                self.clear_slot(base);
            }
            assert!(i < self.stack.len());
            // SAFETY: both are elements of the stack; the value moves from slot `i`
            // (left holding `()`) to slot `base` (holding nothing to drop).
            unsafe {
                let p = self.stack.as_mut_ptr();
                move_value(p.add(i), p.add(base));
                p.add(i).write(Value::Nil);
            }
        }
        self.truncate_to(base + 1);
    }

    /// Leaves a block's result: alone at `base` for a procedure's body (dropping
    /// its frame), above the frame for an inner block.
    #[inline(always)]
    fn ret<const INNER: bool>(&mut self, base: usize, v: Value) {
        if !INNER {
            self.truncate_to(base);
        }
        self.push(v);
    }

    /// Pushes a value on the value stack (inlined; growing is out of line).
    #[inline(always)]
    pub(crate) fn push(&mut self, v: Value) {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
        // SAFETY: there is room for one more element.
        unsafe {
            let len = self.stack.len();
            self.stack.as_mut_ptr().add(len).write(v);
            self.stack.set_len(len + 1);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_stack(&mut self) {
        self.grow_stack_to(self.stack.len() + 1);
    }

    /// Makes room for `len` values. The first growth goes straight to
    /// `STACK_GROWN` values (virtual memory: the system gives it pages as the
    /// stack reaches them), then doubling: a deep recursion no longer moves
    /// its stack to fresh memory at each doubling (which the system zeroes,
    /// and which was a third of a recursion 10^5 deep).
    #[cold]
    #[inline(never)]
    fn grow_stack_to(&mut self, len: usize) {
        let cap = self.stack.capacity();
        if len > cap {
            let want = len.max(cap * 2).max(STACK_GROWN);
            self.stack.reserve_exact(want - self.stack.len());
        }
    }

    /// Truncates the value stack, dropping only values that need it.
    #[inline(always)]
    fn truncate_to(&mut self, len: usize) {
        let cur = self.stack.len();
        if cur > len {
            // SAFETY: the length is lowered first, and each element past it is
            // dropped once (or needs no drop).
            unsafe {
                self.stack.set_len(len);
                drop_values(self.stack.as_mut_ptr(), len, cur);
            }
        }
    }

    /// Removes the values at `base..from` (a finished frame), moving the ones
    /// above down in their place; as `drain` does, dropping only values that
    /// need it, without its per-element calls.
    #[inline(always)]
    fn remove_below(&mut self, base: usize, from: usize) {
        let len = self.stack.len();
        assert!(base <= from && from <= len);
        // SAFETY: the length is lowered to `base` first; each element of
        // `base..from` is dropped once (or needs no drop), then the `len - from`
        // elements above are moved down (overlapping copy) and the length set
        // to cover them.
        unsafe {
            self.stack.set_len(base);
            let p = self.stack.as_mut_ptr();
            drop_values(p, base, from);
            // (value by value, not `ptr::copy`: the few arguments of a tail
            // call were just stored, and memmove's wide loads of them cannot
            // be forwarded from those stores)
            for i in 0..len - from {
                p.add(base + i).write(p.add(from + i).read());
            }
            self.stack.set_len(base + (len - from));
        }
    }

    /// Sets a frame slot.
    #[inline(always)]
    fn set(&mut self, i: usize, v: Value) {
        if self.slot(i).needs_drop() {
            self.clear_slot(i);
        }
        // SAFETY: a slot of the frame (see `slot`), whose old value owns
        // nothing. (One plain store: the value is written field by field, never
        // copied through a temporary.)
        unsafe { std::ptr::write(self.slot_mut(i), v) }
    }

    /// Moves the value at `src` into slot `i` as its 16 bytes at once (a
    /// pair's field, stored long before: read whole, where a copy field by
    /// field would be reassembled through a temporary that its wide load
    /// cannot be forwarded from).
    ///
    /// # Safety
    /// `src` must be a valid value given up by the caller, not a slot.
    #[inline(always)]
    unsafe fn set_whole(&mut self, i: usize, src: *const Value) {
        if self.slot(i).needs_drop() {
            self.clear_slot(i);
        }
        std::ptr::copy_nonoverlapping(src, self.slot_mut(i), 1);
    }

    /// Copies the car and the cdr of a shared pair into slots `x` and `y` of
    /// the frame at `base`, each whole (see [`Machine::set_whole`]).
    #[inline(always)]
    fn set_parts(&mut self, base: usize, x: u32, y: u32, p: &crate::value::Pair) {
        for (s, v) in [(x, &p.car), (y, &p.cdr)] {
            // (one owner more: the copy made below)
            std::mem::forget(v.clone());
            // SAFETY: `v`'s count was raised for this copy; `p` is held by the
            // caller, so the slot's old value cannot be what holds `v`.
            unsafe { self.set_whole(base + s as usize, v) }
        }
    }

    /// Moves the top of the value stack into slot `i`.
    #[inline(always)]
    fn pop_into(&mut self, i: usize) {
        if self.slot(i).needs_drop() {
            self.clear_slot(i);
        }
        let top = self.stack.len() - 1;
        debug_assert!(i < top);
        // SAFETY: both are elements of the stack (`i` is a slot of the running
        // frame, below the result on top, see `slot`); the slot holds nothing to
        // drop, and the top is given up by lowering the length.
        unsafe {
            let p = self.stack.as_mut_ptr();
            move_value(p.add(top), p.add(i));
            self.stack.set_len(top);
        }
    }

    /// Slot `i` of the running frame (`base` plus a slot number of its code),
    /// without a bounds check.
    #[inline(always)]
    fn slot(&self, i: usize) -> &Value {
        debug_assert!(i < self.stack.len());
        // SAFETY: the resolver numbers the slots a block uses below the block's
        // `frame` (its procedure's `nslots` bounds them all), and the value stack
        // is grown to `base + frame` before a block runs (`enter`, `run_block`),
        // or, in a block with calls run in place (`PushArith`), to
        // `base + pre`, then slot by slot by those and by `Grow`s before any
        // binding or tail that reads or writes a slot past them
        // (`Resolver::block_resolved`); the frame is only cut back when its procedure returns or fails, after its last
        // slot access.
        unsafe { self.stack.get_unchecked(i) }
    }

    /// [`Machine::slot`] for writing.
    #[inline(always)]
    fn slot_mut(&mut self, i: usize) -> &mut Value {
        debug_assert!(i < self.stack.len());
        // SAFETY: as for `slot`.
        unsafe { self.stack.get_unchecked_mut(i) }
    }

    #[cold]
    #[inline(never)]
    fn clear_slot(&mut self, i: usize) {
        self.stack[i] = Value::Nil;
    }

    /// Whether a condition holds.
    #[inline(always)]
    fn truth(&mut self, base: usize, inst: &InstRc, c: &Cond) -> Result<bool> {
        match c {
            Cond::Cmp(op, a, b, ..) => {
                if let Some(Num::Bool(t)) = self.arith_fast(base, inst, *op, a, b) {
                    return Ok(t);
                }
            }
            // (The commonest comparison, `(< n k)`, is told apart in this
            // match: its arithmetic then needs no jump on the operator.)
            Cond::CmpInt(Op2::Lt, x, k, ..) => {
                if let Some(Num::Bool(t)) = self.arith_int(base, Op2::Lt, *x, *k) {
                    return Ok(t);
                }
            }
            Cond::CmpInt(op, x, k, ..) => {
                if let Some(Num::Bool(t)) = self.arith_int(base, *op, *x, *k) {
                    return Ok(t);
                }
            }
            Cond::Atom(a) => match self.peek(base, inst, a) {
                Some(Value::Bool(t)) => return Ok(*t),
                Some(Value::Tagged(..) | Value::Bundle(_)) | None => {}
                Some(_) => return Ok(true),
            },
            Cond::Is(shape, a) => {
                if let Some(v) = self.peek_operand(base, inst, a) {
                    return Ok(shape.test(v));
                }
            }
        }
        self.truth_slow(base, inst, c)
    }

    #[inline(never)]
    fn truth_slow(&mut self, base: usize, inst: &InstRc, c: &Cond) -> Result<bool> {
        Ok(match c {
            Cond::Atom(c) => match self.peek(base, inst, c) {
                Some(v) => v.is_true_stripped(),
                None => atom!(self, base, inst, c).is_true_stripped(),
            },
            Cond::Cmp(op, a, b, p, span) => match self.arith_fast(base, inst, *op, a, b) {
                Some(Num::Bool(t)) => t,
                _ => self.arith_slow(base, inst, *op, a, b, *p, *span)?.is_true_stripped(),
            },
            Cond::CmpInt(op, x, k, p, span) => {
                self.arith_int_value(base, inst, *op, *x, *k, *p, *span)?.is_true_stripped()
            }
            Cond::Is(shape, a) => shape.test(&atom!(self, base, inst, a)),
        })
    }

    /// An operand by reference, where it is one (not a sibling closure, which is
    /// built, nor a global not evaluated yet).
    #[inline(always)]
    fn peek<'a>(&'a self, base: usize, inst: &'a InstRc, a: &'a CAtom) -> Option<&'a Value> {
        match a {
            CAtom::Local(s) => Some(self.slot(base + *s as usize)),
            CAtom::Env(i) => Some(&inst.env[*i as usize]),
            CAtom::Const(v) => Some(v),
            CAtom::Global(g) => match &self.globals[*g as usize].state {
                GState::Value(v) => Some(v),
                _ => None,
            },
            CAtom::Sibling(_) => None,
        }
    }

    /// [`Machine::peek`] of an operand of arithmetic: a slot, the commonest,
    /// is told apart first (the others are marked cold, or the compiler tests
    /// for them first).
    #[inline(always)]
    fn peek_operand<'a>(&'a self, base: usize, inst: &'a InstRc, a: &'a CAtom) -> Option<&'a Value> {
        if let CAtom::Local(s) = a {
            return Some(self.slot(base + *s as usize));
        }
        std::hint::cold_path();
        self.peek(base, inst, a)
    }

    /// Inline machine-integer and double arithmetic on operands read in place.
    #[inline(always)]
    fn arith_fast(&self, base: usize, inst: &InstRc, op: Op2, a: &CAtom, b: &CAtom) -> Option<Num> {
        if self.meter.is_some() {
            return None;
        }
        fast_arith(op, self.peek_operand(base, inst, a)?, self.peek_operand(base, inst, b)?)
    }

    /// [`Machine::arith_fast`], storing the result in slot `i` from the arm
    /// that computed it (see [`int_arith_put`]); false where the inline
    /// arithmetic does not apply. The operands are read first (`i` may be the
    /// slot of one of them).
    #[inline(always)]
    fn arith_fast_put(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        a: &CAtom,
        b: &CAtom,
        i: usize,
    ) -> bool {
        if self.meter.is_some() {
            return false;
        }
        let (Some(x), Some(y)) = (self.peek_operand(base, inst, a), self.peek_operand(base, inst, b)) else {
            return false;
        };
        match (x, y) {
            (Value::Int(x), Value::Int(y)) => {
                let (x, y) = (*x, *y);
                int_arith_put(self, op, x, y, i)
            }
            (Value::Real(x), Value::Real(y)) => {
                let (x, y) = (*x, *y);
                real_arith_put(self, op, x, y, i);
                true
            }
            (x, y) => match fast_arith(op, x, y) {
                Some(n) => {
                    self.set_num(i, n);
                    true
                }
                None => false,
            },
        }
    }

    /// [`Machine::arith_int`], storing the result in slot `i` (see
    /// [`Machine::arith_fast_put`]).
    #[inline(always)]
    fn arith_int_put(&mut self, base: usize, op: Op2, x: u32, k: i64, i: usize) -> bool {
        if self.meter.is_some() {
            return false;
        }
        match self.slot(base + x as usize) {
            Value::Int(a) => {
                let a = *a;
                int_arith_put(self, op, a, k, i)
            }
            a => match fast_arith(op, a, &Value::Int(k)) {
                Some(n) => {
                    self.set_num(i, n);
                    true
                }
                None => false,
            },
        }
    }

    /// [`Machine::arith_fast`] of slot `x` and the exact integer `k`
    /// ([`CExpr::Arith2Int`], [`Cond::CmpInt`]).
    #[inline(always)]
    fn arith_int(&self, base: usize, op: Op2, x: u32, k: i64) -> Option<Num> {
        if self.meter.is_some() {
            return None;
        }
        match self.slot(base + x as usize) {
            Value::Int(a) => int_arith(op, *a, k),
            a => fast_arith(op, a, &Value::Int(k)),
        }
    }

    /// The value of slot `x` and the exact integer `k` under `op` (primitive
    /// `p`, errors at `span`), through the primitive where the inline
    /// arithmetic does not apply.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn arith_int_value(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        x: u32,
        k: i64,
        p: PrimId,
        span: Span,
    ) -> Result<Value> {
        match self.arith_int(base, op, x, k) {
            Some(n) => Ok(n.value()),
            None => {
                let (a, b) = crate::resolve::int_operands(x, k);
                self.arith_slow(base, inst, op, &a, &b, p, span)
            }
        }
    }

    /// A tag primitive `p` (doing `op`) on `v`: at once for a real under tags,
    /// through the primitive otherwise (errors at `span`).
    fn retag(&mut self, op: Retag, v: Value, p: PrimId, span: Span) -> Result<Value> {
        let fast = match (op, &v) {
            (Retag::Tag(t), Value::Real(_) | Value::TReal(..)) => Some(Value::tagged(t, v.clone())),
            (Retag::Untag(t), Value::TReal(..)) => v.peel_if(t),
            _ => None,
        };
        match fast {
            Some(r) => {
                self.ad_work += 1;
                Ok(r)
            }
            None => {
                self.push(v);
                self.call_prim(p, 1).map_err(|e| e.at(span))
            }
        }
    }

    /// `(unsensitize (bp (sensitize x)))` (see `CExpr::BpCall`): natively for a
    /// scalar primitive's backpropagator (or its forward transform), otherwise
    /// the three steps.
    #[inline(never)]
    fn bp_call(&mut self, base: usize, inst: &InstRc, c: &crate::resolve::BpCall) -> Result<Value> {
        use crate::resolve::Step;
        use crate::value::Tag;
        let bp = atom!(self, base, inst, &c.bp);
        let x = atom!(self, base, inst, &c.x);
        if let (Value::Closure(bi, _), true) = (&bp, self.native_rules) {
            if bi.group.native.get().is_some() {
                // (an error in the rule placed at the call it differentiates,
                // as the rule's interpreted code's would be)
                let r = if c.forward {
                    crate::ad::native::fbp_untagged(self, bi, &x)
                } else {
                    match crate::ad::native::bp_untagged(self, bi, &x) {
                        Ok(None) if self.native_rr => crate::ad::native_rr::struct_bp_untagged(self, bi, &x),
                        r => r,
                    }
                }
                .map_err(|e| e.at(c.call))?;
                if let Some(r) = r {
                    // the calls it stands for
                    for _ in 0..if c.forward { 3 } else { 1 } {
                        self.tick().map_err(|e| e.at(c.call))?;
                    }
                    return Ok(r);
                }
            } else {
                // A backpropagator of the reverse transform: its untagged entry
                // (`(unsensitize (sensitize x))` is x, and so is the other pair),
                // compiled on first use.
                self.group_code(&bi.group)?;
                if let Some((bi, idx)) = self.untagged_target(base, inst, c)? {
                    self.push(x);
                    self.call_closure_push(&bi, idx, 1, Some(&c.call))?;
                    return Ok(self.pop());
                }
            }
        }
        let s = match &c.sensitize {
            Step::Prim(p, span) => self.retag(Retag::Tag(Tag::Sensitivity), x, *p, *span)?,
            Step::Call(f, span) => {
                let fv = atom!(self, base, inst, f);
                self.push(x);
                self.call_push(fv, 1, Some(*span))?;
                self.pop()
            }
        };
        self.push(s);
        self.call_push(bp, 1, Some(c.call))?;
        let r = self.pop();
        match &c.unsensitize {
            Step::Prim(p, span) => self.retag(Retag::Untag(Tag::Sensitivity), r, *p, *span),
            Step::Call(f, span) => {
                let fv = atom!(self, base, inst, f);
                self.push(r);
                self.call_push(fv, 1, Some(*span))?;
                Ok(self.pop())
            }
        }
    }

    /// Binary arithmetic through the primitive table (other numbers, AD values,
    /// metering).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn arith_slow(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        a: &CAtom,
        b: &CAtom,
        p: PrimId,
        span: Span,
    ) -> Result<Value> {
        if let Some(v) = self.level_arith(base, inst, op, a, b) {
            return Ok(v);
        }
        self.arith_general(base, inst, a, b, p, span)
    }

    /// A level's commonest operations, on operands read in place (where a
    /// tape is active and nothing is metered): a comparison of reals on
    /// levels by their values, as the primitive compares them (for two
    /// doubles, as the inline arithmetic does); `+ - * /` by the level's
    /// record (`tape::level_arith2`). `None` where neither applies.
    #[inline(always)]
    fn level_arith(&mut self, base: usize, inst: &InstRc, op: Op2, a: &CAtom, b: &CAtom) -> Option<Value> {
        if !self.tape.active() || self.meter.is_some() || self.meter_derivative.is_some() {
            return None;
        }
        let (stack, globals) = (&self.stack, &self.globals);
        let (x, y) = (peek_in(stack, globals, base, inst, a)?, peek_in(stack, globals, base, inst, b)?);
        level_op(&mut self.tape, op, x, y)
    }

    /// [`Machine::arith_slow`] past a level's commonest operations: the
    /// primitive's call (a real of a level's straight to its record).
    #[inline(always)]
    fn arith_general(
        &mut self,
        base: usize,
        inst: &InstRc,
        a: &CAtom,
        b: &CAtom,
        p: PrimId,
        span: Span,
    ) -> Result<Value> {
        let x = atom!(self, base, inst, a);
        let y = atom!(self, base, inst, b);
        self.meter_site_derivative(p, inst);
        self.arith_prim(p, x, y).map_err(|e| e.at(span))
    }

    /// Primitive `p` of [`CExpr::Arith2`] on `x` and `y`: a real on a dual
    /// number or tape level (`ad::tape`) straight to its record, else the
    /// primitive's call.
    #[inline(always)]
    fn arith_prim(&mut self, p: PrimId, x: Value, y: Value) -> Result<Value> {
        if x.is_active() || y.is_active() {
            if let Some(f) = crate::ad::tape::scalar_formula(p) {
                if let Some(m) = &mut self.meter {
                    m[p as usize] += 1;
                }
                return crate::ad::tape::record(self, f, &[x, y], &prims::prim(p).imp);
            }
        }
        self.stack.push(x);
        self.stack.push(y);
        self.call_prim(p, 2)
    }

    /// `op` on two values, as [`Machine::arith_slow`] computes it on two
    /// operands holding them (a level's commonest operations, else the
    /// primitive's call): for compiled code meeting a value it does not take
    /// apart (`jit::held_arith`, a real of a level among them).
    pub(crate) fn arith_values(&mut self, op: Op2, x: Value, y: Value) -> Result<Value> {
        if self.tape.active() && self.meter.is_none() && self.meter_derivative.is_none() {
            if let Some(v) = level_op(&mut self.tape, op, &x, &y) {
                return Ok(v);
            }
        }
        self.arith_prim(op.prim(), x, y)
    }

    /// [`Machine::arith_slow`], storing the result in slot `i`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn arith_slow_put(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        a: &CAtom,
        b: &CAtom,
        p: PrimId,
        span: Span,
        i: usize,
    ) -> Result<()> {
        // (a level's commonest operations, as `arith_slow` computes them, the
        // result written into the slot variant by variant: moved out of
        // `arith_slow`'s result it is copied whole from the narrow stores that
        // built it, a stall that was a third of `arith_slow`'s time)
        if self.tape.active()
            && self.meter.is_none()
            && self.meter_derivative.is_none()
            && !op.is_comparison()
        {
            let (stack, globals) = (&self.stack, &self.globals);
            if let (Some(x), Some(y)) =
                (peek_in(stack, globals, base, inst, a), peek_in(stack, globals, base, inst, b))
            {
                if let Some((t, node, v)) = crate::ad::tape::plain_arith2(&mut self.tape, op, x, y) {
                    self.set(i, Value::TapeReal(t, node, v));
                    return Ok(());
                }
                match crate::ad::tape::level_arith2_parts(&mut self.tape, op, x, y) {
                    Some(Level::Tape(t, node, v)) => {
                        self.set(i, Value::TapeReal(t, node, v));
                        return Ok(());
                    }
                    Some(Level::Active(r)) => {
                        self.set(i, Value::Active(r));
                        return Ok(());
                    }
                    None => {}
                }
            }
            let v = self.arith_general(base, inst, a, b, p, span)?;
            self.set(i, v);
            return Ok(());
        }
        let v = self.arith_slow(base, inst, op, a, b, p, span)?;
        self.set(i, v);
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn global_slow(&mut self, g: u32) -> Result<Value> {
        self.global(g)
    }

    /// Pushes the arguments; returns how many.
    #[inline(always)]
    fn push_args(&mut self, base: usize, inst: &InstRc, a: &CArgs) -> Result<usize> {
        match a {
            CArgs::One(x) => {
                self.push_atom(base, inst, x)?;
                Ok(1)
            }
            CArgs::Tuple(xs) => {
                for x in xs.iter() {
                    self.push_atom(base, inst, x)?;
                }
                Ok(xs.len())
            }
        }
    }

    /// Pushes the arguments of a call ending a procedure's body, moving out of
    /// the frame (which is dropped next) those that `moves` allows; returns how many.
    #[inline(always)]
    fn push_tail_args(&mut self, base: usize, inst: &InstRc, a: &CArgs, moves: Moves) -> Result<usize> {
        match a {
            CArgs::One(x) => {
                self.push_tail_atom(base, inst, x, moves.0 & 1 != 0)?;
                Ok(1)
            }
            CArgs::Tuple(xs) => {
                let mut m = moves.0;
                for x in xs.iter() {
                    self.push_tail_atom(base, inst, x, m & 1 != 0)?;
                    m >>= 1;
                }
                Ok(xs.len())
            }
        }
    }

    /// Pushes an operand's value: a value owning memory is moved out of its
    /// slot (left holding `()`) if `take` (a slot the frame reads no more),
    /// anything else is copied.
    #[inline(always)]
    fn push_tail_atom(&mut self, base: usize, inst: &InstRc, a: &CAtom, take: bool) -> Result<()> {
        if let (CAtom::Local(s), true) = (a, take) {
            let i = base + *s as usize;
            if self.slot(i).needs_drop() {
                if self.stack.len() == self.stack.capacity() {
                    self.grow_stack();
                }
                let len = self.stack.len();
                debug_assert!(i < len);
                // SAFETY: slot `i` is an element of the stack below `len` (see
                // `slot`), and there is room for one more element; its value
                // moves to the top and the slot is left holding `()` (owning
                // nothing).
                unsafe {
                    let p = self.stack.as_mut_ptr();
                    std::ptr::copy_nonoverlapping(p.add(i), p.add(len), 1);
                    p.add(i).write(Value::Nil);
                    self.stack.set_len(len + 1);
                }
                return Ok(());
            }
        }
        self.push_atom(base, inst, a)
    }

    /// Pushes an operand's value (a copy; globals and siblings out of line).
    #[inline(always)]
    fn push_atom(&mut self, base: usize, inst: &InstRc, a: &CAtom) -> Result<()> {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
        let len = self.stack.len();
        // (A slot, the commonest operand, is told apart first: the others are
        // marked cold, or the compiler tests for them first.)
        let src: *const Value = if let CAtom::Local(s) = a {
            self.slot(base + *s as usize)
        } else {
            std::hint::cold_path();
            match a {
                CAtom::Env(i) => &inst.env[*i as usize],
                CAtom::Const(v) => v,
                _ => return self.push_atom_slow(base, inst, a),
            }
        };
        // SAFETY: `src` is a valid value (an element of the stack below `len`, of
        // the environment, or of the code), and there is room for one more element.
        unsafe {
            clone_value(src, self.stack.as_mut_ptr().add(len));
            self.stack.set_len(len + 1);
        }
        Ok(())
    }

    #[inline(never)]
    fn push_atom_slow(&mut self, base: usize, inst: &InstRc, a: &CAtom) -> Result<()> {
        let v = atom!(self, base, inst, a);
        self.push(v);
        Ok(())
    }

    /// The closure that atom `f` reads, where it is one read in place (a
    /// global, a slot, the environment, a constant), as an uncounted copy of
    /// its reference, with its member: no count to raise before the call and
    /// lower after it.
    #[inline(always)]
    fn callee_in_place(&self, base: usize, inst: &InstRc, f: &CAtom) -> Option<(ManuallyDrop<InstRc>, u32)> {
        // (A global or a slot, the commonest procedures, are told apart first,
        // with a test each rather than the jump of `peek`.)
        let callee = match f {
            CAtom::Global(g) => match &self.globals[*g as usize].state {
                GState::Value(v) => Some(v),
                _ => None,
            },
            CAtom::Local(s) => Some(self.slot(base + *s as usize)),
            _ => {
                std::hint::cold_path();
                self.peek(base, inst, f)
            }
        };
        let Some(Value::Closure(ci, k)) = callee else { return None };
        // SAFETY: the copy is never dropped (`ManuallyDrop`), and its callers
        // use it for one call, made once its arguments are pushed; the instance
        // stays alive until that call returns, held by the place it was read
        // from, which nothing changes meanwhile (pushing the arguments
        // included):
        // - a slot of this frame: the callee and everything it runs only
        //   push, pop and drop values at or above its own base, which is
        //   above this frame (the stack may be reallocated, which moves the
        //   reference but not the instance); this frame's slots are written
        //   by this procedure alone, after the call;
        // - the environment of `inst`, or a constant of its code: `inst`
        //   (borrowed for this whole call) keeps both alive, and an
        //   instance's environment is never changed;
        // - a global's value: a `GState::Value` is only replaced by the
        //   top level between evaluations (`toplevel`), never while a call
        //   runs (`Machine::global` changes only a `Thunk`'s state); the
        //   vector of globals may grow, moving the reference, not the instance.
        // Everything the callee keeps of it beyond the call (a closure it
        // builds, a tail call's `inst`) clones this copy, raising the count.
        Some((ManuallyDrop::new(unsafe { std::ptr::read(ci) }), *k))
    }

    /// A call not in tail position, leaving the result on top of the value stack.
    #[inline(always)]
    fn app_push(&mut self, base: usize, inst: &InstRc, f: &CAtom, args: &CArgs, span: &Span) -> Result<()> {
        if let Some((ci, k)) = self.callee_in_place(base, inst, f) {
            // (One argument, the commonest case, is passed as a constant count.)
            if let CArgs::One(x) = args {
                self.push_atom(base, inst, x)?;
                return self.call_closure_push(&ci, k, 1, Some(span));
            }
            let n = self.push_args(base, inst, args)?;
            return self.call_closure_push(&ci, k, n, Some(span));
        }
        if let CAtom::Sibling(j) = f {
            // A sibling of the running procedure (or itself): called on `inst`,
            // with no closure built for it.
            let n = self.push_args(base, inst, args)?;
            return self.call_closure_push(inst, *j, n, Some(span));
        }
        self.app_push_slow(base, inst, f, args, span)
    }

    /// Makes a call whose argument is arithmetic (see `resolve::AppArith`):
    /// the argument computed onto the value stack, then the call made as
    /// [`Machine::app_push`] makes it, leaving the result on top of the stack.
    #[inline(always)]
    fn app_arith_push(&mut self, base: usize, inst: &InstRc, c: &AppArith) -> Result<()> {
        self.push_arith_arg(base, inst, &c.arg)?;
        if let Some((ci, k)) = self.callee_in_place(base, inst, &c.f) {
            return self.call_closure_push(&ci, k, 1, Some(&c.call));
        }
        self.app_pushed_slow(base, inst, &c.f, 1, &c.call)
    }

    /// Pushes the argument of an `AppArith` (arithmetic) onto the value stack.
    #[inline(always)]
    fn push_arith_arg(&mut self, base: usize, inst: &InstRc, arg: &CExpr) -> Result<()> {
        // (`(- n k)` of an exact integer, the commonest (a recursion's
        // `(f (- n 1))`): pushed as computed, with no placeholder stored first
        // and tested for a value to drop when overwritten)
        if let CExpr::Arith2Int(Op2::Sub, x, k, ..) = arg {
            if let (None, Value::Int(a)) = (&self.meter, self.slot(base + *x as usize)) {
                if let Some(r) = a.checked_sub(*k) {
                    self.push_num(Num::Int(r));
                    return Ok(());
                }
            }
        }
        // (otherwise stored in place, from the arm that computed it: see
        // `int_arith_put`; `(- n k)` told apart as `run_blocks` does)
        let i = self.stack.len();
        self.push(Value::Nil);
        match arg {
            CExpr::Arith2Int(Op2::Sub, x, k, p, span) => {
                if !self.arith_int_put(base, Op2::Sub, *x, *k, i) {
                    let v = self.arith_int_value(base, inst, Op2::Sub, *x, *k, *p, *span)?;
                    self.set(i, v);
                }
            }
            CExpr::Arith2Int(op, x, k, p, span) => {
                if !self.arith_int_put(base, *op, *x, *k, i) {
                    let v = self.arith_int_value(base, inst, *op, *x, *k, *p, *span)?;
                    self.set(i, v);
                }
            }
            CExpr::Arith2(op, a, b, p, span) => self.bind_arith(base, inst, *op, a, b, p, span, i)?,
            e => {
                let v = self.eval_expr(base, inst, e)?;
                self.set(i, v);
            }
        }
        Ok(())
    }

    /// A call of something other than a closure read in place, its `n`
    /// arguments already pushed (see [`Machine::app_arith_push`]).
    #[inline(never)]
    fn app_pushed_slow(
        &mut self,
        base: usize,
        inst: &InstRc,
        f: &CAtom,
        n: usize,
        span: &Span,
    ) -> Result<()> {
        if let CAtom::Sibling(j) = f {
            return self.call_closure_push(inst, *j, n, Some(span));
        }
        let fv = self.procedure_value(base, inst, f)?;
        self.call_value_push(fv, n, span)
    }

    /// A call of something other than a closure read in place.
    #[inline(never)]
    fn app_push_slow(
        &mut self,
        base: usize,
        inst: &InstRc,
        f: &CAtom,
        args: &CArgs,
        span: &Span,
    ) -> Result<()> {
        let fv = self.procedure_value(base, inst, f)?;
        let n = self.push_args(base, inst, args)?;
        self.call_value_push(fv, n, span)
    }

    /// The value of the atom a call calls (a lazily tagged closure, as forward
    /// mode over reverse mode calls them: forced here, so that a recursion
    /// through it keeps one frame).
    #[inline(always)]
    fn procedure_value(&mut self, base: usize, inst: &InstRc, f: &CAtom) -> Result<Value> {
        Ok(match atom!(self, base, inst, f) {
            fv @ Value::Lazy(_) => self.force_procedure(fv)?,
            fv => fv,
        })
    }

    /// Calls `fv` on the `n` arguments on top of the value stack.
    #[inline(always)]
    fn call_value_push(&mut self, fv: Value, n: usize, span: &Span) -> Result<()> {
        match fv {
            Value::Closure(ci, k) => self.call_closure_push(&ci, k, n, Some(span)),
            fv => self.call_push(fv, n, Some(*span)),
        }
    }

    fn eval_expr(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Value> {
        match e {
            CExpr::Atom(a) => Ok(atom!(self, base, inst, a)),
            CExpr::App(f, args, span, _) => {
                self.app_push(base, inst, f, args, span)?;
                Ok(self.pop())
            }
            CExpr::AppArith(c) => {
                self.app_arith_push(base, inst, c)?;
                Ok(self.pop())
            }
            CExpr::Arith2(op, a, b, p, span) => match self.arith_fast(base, inst, *op, a, b) {
                Some(n) => Ok(n.value()),
                None => self.arith_slow(base, inst, *op, a, b, *p, *span),
            },
            CExpr::Arith2Int(op, x, k, p, span) => self.arith_int_value(base, inst, *op, *x, *k, *p, *span),
            CExpr::Prim(..) => self.prim_value(base, inst, e),
            CExpr::Retag(op, a, p, span) => {
                let v = atom!(self, base, inst, a);
                self.retag(*op, v, *p, *span)
            }
            CExpr::BpCall(c) => self.bp_call(base, inst, c),
            CExpr::Inline(il) => self.eval_inline(base, inst, il),
            CExpr::Guarded(g) => match self.guard_fails(base, inst, g) {
                true => self.eval_expr(base, inst, &g.call),
                false => self.eval_inline(base, inst, &g.inline),
            },
            // (a loop in tail position, and a call of one, are the last
            // expressions of blocks `run_block` runs itself; one here is a
            // binding's value, whose pair a `Split` takes apart, say)
            CExpr::Loop(lp) => self.run_inner_loop(base, inst, lp),
            CExpr::Again(_) => Err(Error::runtime(None, "internal error: a loop's call outside it")),
            CExpr::Plus(a, b, p, span) => {
                let av = atom!(self, base, inst, a);
                let bv = atom!(self, base, inst, b);
                match (&av, &bv) {
                    (Value::Real(x), Value::Real(y)) => {
                        self.ad_work += 1;
                        Ok(Value::Real(x + y))
                    }
                    (Value::TReal(s, x), Value::TReal(t, y)) if s == t => {
                        self.ad_work += 1;
                        Ok(Value::TReal(*s, x + y))
                    }
                    _ => {
                        self.push(av);
                        self.push(bv);
                        self.call_prim(*p, 2).map_err(|e| e.at(*span))
                    }
                }
            }
            CExpr::Cons(a, d, moves) => self.cons_of(base, inst, a, d, *moves),
            CExpr::Closure(g, caps) => self.capture(base, inst, g.clone(), caps, 0),
            CExpr::If(c, t, f) => self.if_value(base, inst, c, t, f),
            CExpr::MakeEnvSensLike(l, xs) => {
                let lv = atom!(self, base, inst, l);
                let lv = crate::ad::ops::hnf(self, &lv)?;
                if crate::ad::ops::is_prim_based(&lv) || matches!(lv, Value::Nil) {
                    return Ok(Value::Nil);
                }
                let (g, i) = match &lv {
                    Value::Closure(li, i) if li.env.len() == xs.len() => (li.group.clone(), *i),
                    other => {
                        return Err(Error::runtime(
                            None,
                            format!(
                                "sensitivity does not conform: expected the sensitivity of a procedure with {} captured values, got {}",
                                xs.len(),
                                crate::print::brief(other, 60)
                            ),
                        ))
                    }
                };
                self.capture(base, inst, g, xs, i)
            }
            CExpr::MakeEnvSens(g, i, xs) => {
                if crate::ad::ops::group_is_prim_based(g) {
                    return Ok(Value::Nil);
                }
                self.capture(base, inst, g.clone(), xs, *i)
            }
        }
    }

    /// Member `i` of a new instance of `g` capturing the values of `caps`,
    /// built in place (an error while reading a capture frees it).
    #[inline(always)]
    fn capture(&mut self, base: usize, inst: &InstRc, g: Rc<Group>, caps: &[CAtom], i: u32) -> Result<Value> {
        let mut b = InstBuilder::new(g, caps.len());
        for c in caps {
            b.push(atom!(self, base, inst, c));
        }
        Ok(Value::Closure(b.finish(), i))
    }

    /// The untagged entry (`LambdaCode::untagged`) of the backpropagator that a
    /// `BpCall` calls, when it has a compiled one that applies, with the calls
    /// of the tag operations it stands for counted; `None` otherwise (the
    /// general path, [`Machine::bp_call`], runs it, compiling it on first use).
    #[inline(always)]
    fn untagged_target(
        &mut self,
        base: usize,
        inst: &InstRc,
        c: &crate::resolve::BpCall,
    ) -> Result<Option<(InstRc, u32)>> {
        if !(self.native_rules && self.untagged_entries) {
            return Ok(None);
        }
        let Some(Value::Closure(bi, k)) = self.peek(base, inst, &c.bp) else { return Ok(None) };
        if bi.group.native.get().is_some() {
            return Ok(None);
        }
        let Some(code) = bi.group.code.get() else { return Ok(None) };
        let Some(u) = code.members.get(*k as usize).and_then(|m| m.untagged) else { return Ok(None) };
        if u.forward != c.forward {
            return Ok(None);
        }
        let bi = bi.clone();
        for _ in 0..u.calls {
            self.tick().map_err(|e| e.at(c.call))?;
        }
        Ok(Some((bi, u.index)))
    }

    /// A binding that takes apart the pair an expression returns (`CBind::Split`).
    /// Out of line and small: the reverse transform's recursions (a transformed
    /// procedure calling itself, a backpropagator calling the one of a recursive
    /// call) go through here, one frame per level besides `call_loop`'s.
    #[inline(never)]
    fn exec_split(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let CBind::Split(e, x, rest, span) = b else { return self.exec_other(base, inst, b) };
        let (x, span) = (*x, *span);
        let (car, cdr) = match e {
            CExpr::BpCall(c) => match self.untagged_target(base, inst, c)? {
                Some((bi, idx)) => {
                    let xv = atom!(self, base, inst, &c.x);
                    self.push(xv);
                    self.call_closure_push(&bi, idx, 1, Some(&c.call))?;
                    let v = self.pop();
                    self.split_value(v, span)?
                }
                None => {
                    if let Split::Pair(..) = rest {
                        if self.native_bp_split(base, inst, c, x, rest)? {
                            return Ok(());
                        }
                    }
                    self.split_bp_call(base, inst, c, span)?
                }
            },
            CExpr::App(f, args, call, _) => match self.peek(base, inst, f) {
                Some(Value::Closure(ci, 0))
                    if self.native_rules
                        && matches!(ci.group.native.get(), Some(crate::ad::native::Native::R { .. }))
                        && self.depth_left > 0 =>
                {
                    let ci = ci.clone();
                    let want_cdr = !matches!(rest, Split::Unread);
                    self.split_reverse_call(base, inst, &ci, args, call, span, want_cdr)?
                }
                _ => {
                    self.app_push(base, inst, f, args, call)?;
                    let v = self.pop();
                    self.split_value(v, span)?
                }
            },
            e => {
                let v = self.eval_expr(base, inst, e)?;
                self.split_value(v, span)?
            }
        };
        self.stack[base + x as usize] = car;
        match rest {
            Split::Slot(y) => self.stack[base + *y as usize] = cdr,
            Split::Unread => drop(cdr),
            Split::Pair(a, d, span) => {
                let (cadr, cddr) = self.split_value(cdr, *span)?;
                self.stack[base + *a as usize] = cadr;
                self.stack[base + *d as usize] = cddr;
            }
        }
        Ok(())
    }

    /// A call of a primitive's reverse version `ci` whose result is taken apart
    /// at once: natively without building the pair where it can be, as an
    /// ordinary call otherwise.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn split_reverse_call(
        &mut self,
        base: usize,
        inst: &InstRc,
        ci: &InstRc,
        args: &CArgs,
        call: &Span,
        span: Span,
        want_cdr: bool,
    ) -> Result<(Value, Value)> {
        let n = self.push_args(base, inst, args)?;
        let b = self.stack.len() - n;
        match crate::ad::native::reverse_parts(self, ci, b, n, want_cdr) {
            Ok(Some(parts)) => {
                self.truncate_to(b);
                Ok(parts)
            }
            Ok(None) => {
                self.call_closure_push(ci, 0, n, Some(call))?;
                let v = self.pop();
                self.split_value(v, span)
            }
            Err(e) => Err(self.call_failed(b, e, None, ci, 0, &ci.group, 0, Some(call))),
        }
    }

    /// The backpropagator a reverse `BpCall` calls, when it is a scalar
    /// primitive's (`Native::Bp`) and the native rules are on.
    #[inline(always)]
    fn native_bp_target(&self, base: usize, inst: &InstRc, c: &crate::resolve::BpCall) -> Option<InstRc> {
        if c.forward || !self.native_rules {
            return None;
        }
        match self.peek(base, inst, &c.bp) {
            Some(Value::Closure(bi, _))
                if matches!(bi.group.native.get(), Some(crate::ad::native::Native::Bp { .. })) =>
            {
                Some(bi.clone())
            }
            _ => None,
        }
    }

    /// A `Split` binding of a `BpCall` of a scalar primitive's backpropagator
    /// (`Native::Bp`) whose argument sensitivity is taken apart at once
    /// (`Split::Pair`), run natively ([`crate::ad::native::bp_untagged_cotangent`]:
    /// a binary primitive's two parts are never built into a pair) with its
    /// slots set; `false` (nothing done) when the native code does not apply.
    #[inline(never)]
    fn native_bp_split(
        &mut self,
        base: usize,
        inst: &InstRc,
        c: &crate::resolve::BpCall,
        x: u32,
        rest: &Split,
    ) -> Result<bool> {
        let Split::Pair(a, d, span) = rest else { return Ok(false) };
        let Some(bi) = self.native_bp_target(base, inst, c) else { return Ok(false) };
        let xv = atom!(self, base, inst, &c.x);
        let Some((xa, xb)) =
            crate::ad::native::bp_untagged_cotangent(self, &bi, &xv).map_err(|e| e.at(c.call))?
        else {
            return Ok(false);
        };
        self.tick().map_err(|e| e.at(c.call))?;
        let (ca, cd) = match xb {
            Some(xb) => (xa, xb),
            None => self.split_value(xa, *span)?,
        };
        // (the primitive's environment sensitivity is `()`)
        self.stack[base + x as usize] = Value::Nil;
        self.stack[base + *a as usize] = ca;
        self.stack[base + *d as usize] = cd;
        Ok(true)
    }

    /// A backpropagator call whose result is taken apart at once (see [`CExpr::BpCall`]).
    #[inline(never)]
    fn split_bp_call(
        &mut self,
        base: usize,
        inst: &InstRc,
        c: &crate::resolve::BpCall,
        span: Span,
    ) -> Result<(Value, Value)> {
        if let Some(bi) = self.native_bp_target(base, inst, c) {
            let x = atom!(self, base, inst, &c.x);
            if let Some(parts) =
                crate::ad::native::bp_untagged_parts(self, &bi, &x).map_err(|e| e.at(c.call))?
            {
                self.tick().map_err(|e| e.at(c.call))?;
                return Ok(parts);
            }
        }
        let v = self.bp_call(base, inst, c)?;
        self.split_value(v, span)
    }

    /// The car and cdr of a pair (a lazy pair is taken apart one level), moved
    /// out of it when nothing else holds it; a pattern mismatch at `span` otherwise.
    #[inline(never)]
    fn split_value(&mut self, v: Value, span: Span) -> Result<(Value, Value)> {
        match v {
            Value::Pair(p) => Ok(match Rc::try_unwrap(p) {
                Ok(q) => q.into_parts(),
                Err(p) => (p.car.clone(), p.cdr.clone()),
            }),
            v => self.split_value_slow(v, span),
        }
    }

    /// [`Machine::split_value`] of anything but a pair: a lazy pair is taken
    /// apart one level; anything else is a pattern mismatch.
    #[cold]
    #[inline(never)]
    fn split_value_slow(&mut self, v: Value, span: Span) -> Result<(Value, Value)> {
        let v = match v {
            // A failure forcing it (a part without the tag an untagging primitive
            // removes) is an error of this destructuring, which may be a prelude
            // accessor compiled in place, with no call frame of its own.
            Value::Lazy(_) if v.is_pair() => crate::ad::ops::hnf(self, &v).map_err(|e| e.at(span))?,
            v => v,
        };
        match v {
            Value::Pair(_) => self.split_value(v, span),
            other => Err(Error::runtime(
                Some(span),
                format!(
                    "pattern mismatch: expected a pair, got {} ({})",
                    crate::print::brief_source(&other, 60),
                    other.kind_name()
                ),
            )),
        }
    }

    /// Runs a binding (the ones `run_block` does not run itself): a jump to
    /// the function running its kind, each out of line, so that this one
    /// has no frame to set up (with the commonest cases inlined here, it
    /// saved six registers and took a large frame on every binding); the
    /// rest go to [`Machine::exec_other`], whose frame is large.
    #[inline(never)]
    fn exec_bind(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        match b {
            CBind::Split(..) => self.exec_split(base, inst, b),
            CBind::Let(s, CExpr::Cons(a, d, moves)) => self.exec_cons(base, inst, *s, a, d, *moves),
            CBind::Let(s, e @ CExpr::Prim(..)) => self.exec_prim(base, inst, e, base + *s as usize),
            CBind::Let(s, CExpr::Inline(il)) => self.exec_inline(base, inst, il, base + *s as usize),
            CBind::Let(_, CExpr::Arith2(..)) => self.exec_arith(base, inst, b),
            CBind::Let(_, CExpr::App(..) | CExpr::AppArith(_)) => self.exec_app(base, inst, b),
            CBind::Let(_, CExpr::If(..) | CExpr::Loop(_) | CExpr::Closure(..)) => {
                self.exec_block_value(base, inst, b)
            }
            CBind::Uncons(..) => self.exec_uncons(base, inst, b),
            CBind::PushArith(..) | CBind::PushApp(..) => self.exec_push(base, inst, b),
            _ => self.exec_other(base, inst, b),
        }
    }

    /// A call whose result stays where the call puts it (see
    /// `CBind::PushArith`; `run_block` runs these itself).
    #[inline(never)]
    fn exec_push(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let clear = match b {
            CBind::PushArith(s, c, clear) => {
                debug_assert_eq!(self.stack.len(), base + *s as usize);
                self.app_arith_push(base, inst, c)?;
                clear
            }
            CBind::PushApp(s, f, args, span, clear) => {
                debug_assert_eq!(self.stack.len(), base + *s as usize);
                self.app_push(base, inst, f, args, span)?;
                clear
            }
            _ => return self.exec_other(base, inst, b),
        };
        self.clear_slots(base, clear);
        Ok(())
    }

    /// A binding of arithmetic (see `exec_bind`; `run_block` runs its own).
    #[inline(never)]
    fn exec_arith(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let CBind::Let(s, CExpr::Arith2(op, x, y, p, span)) = b else {
            return self.exec_other(base, inst, b);
        };
        self.bind_arith(base, inst, *op, x, y, p, span, base + *s as usize)
    }

    /// Stores `(op x y)` in slot `i`: the inline arithmetic, else straight
    /// to the primitive (no second try of the inline arithmetic).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn bind_arith(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        x: &CAtom,
        y: &CAtom,
        p: &PrimId,
        span: &Span,
        i: usize,
    ) -> Result<()> {
        if !self.arith_fast_put(base, inst, op, x, y, i) {
            self.arith_slow_put(base, inst, op, x, y, *p, *span, i)?
        }
        Ok(())
    }

    /// A binding of a call's value (see `exec_bind`; `run_block` makes its own).
    #[inline(never)]
    fn exec_app(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let s = match b {
            CBind::Let(s, CExpr::App(f, args, span, _)) => {
                self.app_push(base, inst, f, args, span)?;
                s
            }
            CBind::Let(s, CExpr::AppArith(c)) => {
                self.app_arith_push(base, inst, c)?;
                s
            }
            _ => return self.exec_other(base, inst, b),
        };
        self.pop_into(base + *s as usize);
        Ok(())
    }

    /// A binding of a call run in place to slot `i` (see `exec_bind`).
    #[inline(never)]
    fn exec_inline(&mut self, base: usize, inst: &InstRc, il: &Inline, i: usize) -> Result<()> {
        if self.inline_arith(base, inst, il, i) {
            return Ok(());
        }
        let v = self.eval_inline(base, inst, il)?;
        self.set(i, v);
        Ok(())
    }

    /// A binding of a bound `if`, an inner loop or a lambda (see `exec_bind`).
    #[inline(never)]
    fn exec_block_value(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let (s, v) = match b {
            CBind::Let(s, CExpr::If(c, t, e)) => (s, self.if_value(base, inst, c, t, e)?),
            CBind::Let(s, CExpr::Loop(lp)) => (s, self.run_inner_loop(base, inst, lp)?),
            CBind::Let(s, CExpr::Closure(g, caps)) => (s, self.capture(base, inst, g.clone(), caps, 0)?),
            _ => return self.exec_other(base, inst, b),
        };
        self.set(base + *s as usize, v);
        Ok(())
    }

    /// A call run in place whose body is one arithmetic operation (`(sqr x)`
    /// of `(define (sqr x) (* x x))`), its value stored in slot `i` at once
    /// where the inline arithmetic or a level's record computes it: counted
    /// as a step, as `run_inline` counts it. False (nothing done) where that
    /// does not apply: a step that checks the limits, a call past
    /// `--max-depth`, anything metered, an operation needing the primitive.
    #[inline(always)]
    fn inline_arith(&mut self, base: usize, inst: &InstRc, il: &Inline, i: usize) -> bool {
        let CExpr::Arith2(op, a, b, ..) = &il.body.tail else { return false };
        if !il.body.binds.is_empty() || self.fuel <= 1 || (!il.tail && self.depth_left < 1) {
            return false;
        }
        if let Some(n) = self.arith_fast(base, inst, *op, a, b) {
            self.fuel -= 1;
            self.set_num(i, n);
            return true;
        }
        self.inline_level_arith(base, inst, *op, a, b, i)
    }

    /// [`Machine::inline_arith`] on a level's reals (`Machine::level_arith`,
    /// as `arith_slow` computes them first).
    #[inline(never)]
    fn inline_level_arith(
        &mut self,
        base: usize,
        inst: &InstRc,
        op: Op2,
        a: &CAtom,
        b: &CAtom,
        i: usize,
    ) -> bool {
        match self.level_arith(base, inst, op, a, b) {
            Some(v) => {
                self.fuel -= 1;
                self.set(i, v);
                true
            }
            None => false,
        }
    }

    /// The value of an `if` that is not in tail position: a branch that is a
    /// variable or a constant is read at once (`(if c a b)`, `(max ...)`-like
    /// code), any other run as an inner block.
    #[inline(always)]
    fn if_value(&mut self, base: usize, inst: &InstRc, c: &Cond, t: &CBlock, e: &CBlock) -> Result<Value> {
        let b = if self.truth(base, inst, c)? { t } else { e };
        if b.binds.is_empty() {
            match &b.tail {
                CExpr::Atom(a) => return Ok(atom!(self, base, inst, a)),
                CExpr::Arith2(op, x, y, ..) => {
                    if let Some(n) = self.arith_fast(base, inst, *op, x, y) {
                        return Ok(n.value());
                    }
                }
                _ => {}
            }
        }
        self.nested(None, |m| m.run_block::<true>(base, inst, b, 0))?;
        Ok(self.pop())
    }

    /// A binding of a primitive's call `e` to slot `i`, reached from
    /// `exec_bind` in one step, not through `exec_other` and `eval_expr` (see
    /// `prim_value`). (Not an arm of `run_block`'s own match: that made every
    /// call's loop larger, fib +1.5% instructions.)
    #[inline(never)]
    fn exec_prim(&mut self, base: usize, inst: &InstRc, e: &CExpr, i: usize) -> Result<()> {
        // (a number written as one: copied whole from where the primitive
        // left it, stored in parts just before, it stalled the processor, a
        // quarter of a `sqrt`'s time)
        match self.prim_value(base, inst, e)? {
            Value::Real(x) => self.set_num(i, Num::Real(x)),
            Value::Int(x) => self.set_num(i, Num::Int(x)),
            v => self.set(i, v),
        }
        Ok(())
    }

    /// The value of a primitive's call `e` (`CExpr::Prim`): up to three
    /// arguments that fit the primitive's arity read in place (in order, then
    /// the call metered); other calls through `prim_pushed`.
    #[inline(always)]
    fn prim_value(&mut self, base: usize, inst: &InstRc, e: &CExpr) -> Result<Value> {
        let CExpr::Prim(p, args, span) = e else { return self.eval_expr(base, inst, e) };
        let (p, xs) = (*p, args.atoms());
        let n = xs.len();
        if n != prims::prim(p).arity as usize || n > 3 {
            return self.prim_pushed(base, inst, p, args, *span);
        }
        let x = atom!(self, base, inst, &xs[0]);
        let v = if n == 1 {
            self.meter_site_derivative(p, inst);
            self.call_prim_array(p, [x])
        } else {
            let y = atom!(self, base, inst, &xs[1]);
            if n == 2 {
                self.meter_site_derivative(p, inst);
                self.call_prim_array(p, [x, y])
            } else {
                let z = atom!(self, base, inst, &xs[2]);
                self.meter_site_derivative(p, inst);
                self.call_prim_array(p, [x, y, z])
            }
        };
        v.map_err(|e| e.at_prim(prims::prim(p).name, *span))
    }

    /// A primitive's call whose arguments are not as many as its arity (a
    /// tuple to spread, or to fold) or are more than three: pushed on the
    /// value stack for `call_prim`, then the call metered (out of line:
    /// `prim_value` is inlined where the calls that fit are made).
    #[inline(never)]
    fn prim_pushed(
        &mut self,
        base: usize,
        inst: &InstRc,
        p: PrimId,
        args: &CArgs,
        span: Span,
    ) -> Result<Value> {
        let n = self.push_args(base, inst, args)?;
        self.meter_site_derivative(p, inst);
        self.call_prim(p, n).map_err(|e| e.at_prim(prims::prim(p).name, span))
    }

    /// A call run in place (`resolve::Inline`): counted as the call would be
    /// (a step; a level unless in tail position), its body run as a nested
    /// block of the caller's, and an error in it traced as the call's would
    /// be (as `call_failed` does: a tail call's frame is left for the
    /// enclosing call's decoration to show in place of the caller's).
    #[inline(never)]
    fn eval_inline(&mut self, base: usize, inst: &InstRc, il: &Inline) -> Result<Value> {
        if !il.tail {
            self.level_down(il.site)?;
        }
        let r = self.run_inline(base, inst, il);
        if !il.tail {
            self.depth_left += 1;
        }
        r.map_err(|mut e| {
            if il.tail {
                if e.tail_frame.is_none() {
                    e.tail_frame = Some((il.name.to_string(), il.site));
                }
            } else {
                if let Some((name, s)) = e.tail_frame.take() {
                    e.push_frame_at(&name, s);
                }
                e.push_frame_at(&il.name, il.site);
            }
            e
        })
    }

    /// Whether the variable a call run in place calls does not hold the
    /// procedure run (see `resolve::Guard`).
    #[inline(always)]
    fn guard_fails(&self, base: usize, inst: &InstRc, g: &Guard) -> bool {
        !self.peek(base, inst, &g.callee).is_some_and(|v| g.holds(v))
    }

    /// A call run in place behind a guard, in tail position (see
    /// [`Machine::tail_slow`]): where the guard fails, the call, made as a
    /// tail call.
    #[inline(never)]
    fn tail_guarded<const INNER: bool>(&mut self, base: usize, inst: &InstRc, g: &Guard) -> Result<Next> {
        if self.guard_fails(base, inst, g) {
            return self.tail_slow::<INNER>(base, inst, &g.call);
        }
        let v = self.eval_inline(base, inst, &g.inline)?;
        self.ret::<INNER>(base, v);
        Ok(Next::Return)
    }

    /// The value of a call run in place: its body's bindings run one by one
    /// (a few, see `resolve::inlinable_body`; a conditional's branch runs as
    /// a nested block, checking the native stack; calls run in place inside
    /// it nest at most `resolve::INLINE_DEPTH` deep), then its last
    /// expression's value.
    #[inline(always)]
    fn run_inline(&mut self, base: usize, inst: &InstRc, il: &Inline) -> Result<Value> {
        self.tick()?;
        match &il.callee {
            Some(c) => self.run_inline_compiled(base, inst, il, c),
            None => self.run_inline_body(base, inst, il),
        }
    }

    /// [`Machine::run_inline`]'s run of the body, its step counted.
    #[inline(always)]
    fn run_inline_body(&mut self, base: usize, inst: &InstRc, il: &Inline) -> Result<Value> {
        for b in &il.body.binds {
            self.exec_bind(base, inst, b)?;
        }
        // (the commonest last expressions here, not through `eval_expr`,
        // which has the same arms: that call cost the saddle and XOR
        // gradients 0.8-1% instructions)
        match &il.body.tail {
            CExpr::Arith2(op, a, b, p, span) => match self.arith_fast(base, inst, *op, a, b) {
                Some(n) => Ok(n.value()),
                None => self.arith_slow(base, inst, *op, a, b, *p, *span),
            },
            CExpr::Arith2Int(op, x, k, p, span) => self.arith_int_value(base, inst, *op, *x, *k, *p, *span),
            CExpr::Atom(a) => Ok(atom!(self, base, inst, a)),
            e @ CExpr::Prim(..) => self.prim_value(base, inst, e),
            e => self.eval_expr(base, inst, e),
        }
    }

    /// A call run in place (its step and level counted) whose procedure's
    /// code may be compiled (see `resolve::Inline::callee`): run by that
    /// code where it has some, as a call of it would be; else run in place,
    /// the steps it took counted towards compiling it (`jit::count_in_place`).
    #[inline(never)]
    fn run_inline_compiled(
        &mut self,
        base: usize,
        inst: &InstRc,
        il: &Inline,
        c: &InlineCallee,
    ) -> Result<Value> {
        let code = match c.group.code.get() {
            Some(code) => code,
            None => self.group_code_first(&c.group)?,
        };
        let lam = &code.members[0];
        let n = c.args.len();
        if lam.jit.get() == crate::jit::NEVER || crate::jit::arity(lam) != Some(n) {
            return self.run_inline_body(base, inst, il);
        }
        if crate::jit::is_compiled(lam) {
            // (the operands read where they are, unboxed)
            let mut args = [(0i64, 0i64); crate::jit::MAX_ARITY];
            for (x, a) in args.iter_mut().zip(c.args.iter()) {
                match self.peek(base, inst, a).and_then(crate::jit::unbox) {
                    Some(u) => *x = u,
                    None => return self.run_inline_body(base, inst, il),
                }
            }
            // SAFETY: the operands' values are held where they are (slots, the
            // environment, globals, the code) through the call.
            if let Some(v) = unsafe { crate::jit::run_in_place(self, lam, n, &args) } {
                return Ok(v);
            }
            return self.run_inline_body(base, inst, il);
        }
        let before = self.steps();
        let v = self.run_inline_body(base, inst, il)?;
        let steps = self.steps() - before;
        crate::jit::count_in_place(self, lam, steps + 1);
        Ok(v)
    }

    /// An `Uncons` binding `b` (of `a`'s parts to slots `x` and `y`): a
    /// pair's parts copied out where it lies, the pair's count left alone
    /// (`set`: a slot a loop's call emptied needs no drop), or, where the
    /// slot is read nowhere after, the pair moved out of it and taken apart
    /// (its parts moved where nothing else holds it), leaving a slot that
    /// needs no drop when it is written next; anything else as `exec_other`
    /// takes it apart.
    #[inline(never)]
    fn exec_uncons(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        let CBind::Uncons(x, y, a, _, moved) = b else { return self.exec_other(base, inst, b) };
        let (x, y) = (*x, *y);
        if let (true, CAtom::Local(s)) = (*moved, a) {
            let i = base + *s as usize;
            if let Value::Pair(_) = self.slot(i) {
                // (the pair's pointer alone read out and the slot's tag alone
                // written, and a pair held only here taken apart in place:
                // not `mem::replace` and `Rc::try_unwrap`, whose copies of
                // the whole slot and pair load 16 bytes at once that were
                // just stored in parts, loads the processor cannot forward
                // from those stores, which stalls it)
                // SAFETY: a pair, its count moved out of the slot.
                let mut p = unsafe { crate::value::take_pair(self.slot_mut(i)) };
                match Rc::get_mut(&mut p) {
                    Some(q) => {
                        // SAFETY: the fields of a pair held only here, each
                        // moved out once, `()` left in their places (so the
                        // pair, dropped, frees only its cell).
                        unsafe {
                            self.set_whole(base + x as usize, &q.car);
                            self.set_whole(base + y as usize, &q.cdr);
                            std::ptr::write(&mut q.car, Value::Nil);
                            std::ptr::write(&mut q.cdr, Value::Nil);
                        }
                    }
                    None => self.set_parts(base, x, y, &p),
                }
                return Ok(());
            }
        }
        if let Some(Value::Pair(p)) = self.peek_operand(base, inst, a) {
            let p = p.clone();
            self.set_parts(base, x, y, &p);
            return Ok(());
        }
        self.exec_other(base, inst, b)
    }

    /// A `cons` binding (list building, and the pairs AD-transformed code returns),
    /// in a small frame of its own.
    #[inline(never)]
    fn exec_cons(
        &mut self,
        base: usize,
        inst: &InstRc,
        s: u32,
        a: &CAtom,
        d: &CAtom,
        moves: u8,
    ) -> Result<()> {
        let v = self.cons_of(base, inst, a, d, moves)?;
        self.set(base + s as usize, v);
        Ok(())
    }

    /// The pair of `a` and `d`, each moved out of its slot where `moves`
    /// says it is read nowhere after (see [`CExpr::Cons`]), else copied.
    #[inline(always)]
    fn cons_of(&mut self, base: usize, inst: &InstRc, a: &CAtom, d: &CAtom, moves: u8) -> Result<Value> {
        let av = self.operand(base, inst, a, moves & 1 != 0)?;
        let dv = self.operand(base, inst, d, moves & 2 != 0)?;
        Ok(Value::cons(av, dv))
    }

    /// The value of operand `a`: moved out of its slot (left holding `()`)
    /// if `take` (a slot read nowhere after), else copied.
    #[inline(always)]
    fn operand(&mut self, base: usize, inst: &InstRc, a: &CAtom, take: bool) -> Result<Value> {
        Ok(match a {
            CAtom::Local(s) if take => std::mem::replace(self.slot_mut(base + *s as usize), Value::Nil),
            a => atom!(self, base, inst, a),
        })
    }

    /// The bindings other than `Split` (see [`Machine::exec_bind`]).
    #[inline(never)]
    fn exec_other(&mut self, base: usize, inst: &InstRc, b: &CBind) -> Result<()> {
        match b {
            // (arithmetic and calls are bound by `exec_arith` and `exec_app`,
            // or by `run_block` itself)
            CBind::Let(s, e) => {
                let v = self.eval_expr(base, inst, e)?;
                self.set(base + *s as usize, v)
            }
            CBind::Uncons(x, y, a, span, moved) => {
                let v = self.operand(base, inst, a, *moved)?;
                let (car, cdr) = self.split_value(v, *span)?;
                self.stack[base + *x as usize] = car;
                self.stack[base + *y as usize] = cdr;
            }
            CBind::Split(..) => return self.exec_split(base, inst, b),
            CBind::PushArith(..) | CBind::PushApp(..) => return self.exec_push(base, inst, b),
            CBind::Clear(slots) => self.clear_slots(base, slots),
            CBind::Grow(len) => {
                debug_assert!(self.stack.len() <= base + *len as usize);
                self.push_nils(base + *len as usize)
            }
            CBind::Check(c, a, span) => {
                let v = atom!(self, base, inst, a);
                let v = crate::ad::ops::force(self, &v).map_err(|e| e.at(*span))?;
                if !crate::ad::ops::literal_matches(c, &v) {
                    return Err(Error::runtime(
                        Some(*span),
                        format!(
                            "pattern mismatch: expected {}, got {}",
                            crate::print::to_string(c),
                            crate::print::brief(&v, 60)
                        ),
                    ));
                }
            }
            CBind::Letrec(slots, g, caps, shared) => {
                let ni = if caps.is_empty() {
                    shared.get_or_init(|| InstBuilder::new(g.clone(), 0).finish()).clone()
                } else {
                    let mut b = InstBuilder::new(g.clone(), caps.len());
                    for c in caps.iter() {
                        b.push(atom!(self, base, inst, c));
                    }
                    b.finish()
                };
                for (j, s) in slots.iter().enumerate() {
                    self.stack[base + *s as usize] = Value::Closure(ni.clone(), j as u32);
                }
            }
            CBind::EnvSens(slots, a) => {
                let v = atom!(self, base, inst, a);
                let v = crate::ad::ops::hnf(self, &v)?;
                match &v {
                    Value::Nil if slots.is_empty() => {}
                    Value::Closure(i, _) if i.env.len() == slots.len() => {
                        for (s, x) in slots.iter().zip(i.env.iter()) {
                            self.stack[base + *s as usize] = x.clone();
                        }
                    }
                    other => {
                        return Err(Error::runtime(
                            None,
                            format!(
                                "sensitivity does not conform: expected the sensitivity of a procedure with {} captured values (a value shaped like the procedure), got {}",
                                slots.len(),
                                crate::print::brief(other, 60)
                            ),
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

/// The error for output that could not be written (standard output on a full
/// disk, say): the program stops, as its remaining output would be lost too.
pub fn output_error(e: &std::io::Error) -> Error {
    Error::runtime(None, format!("cannot write the output: {e}"))
}

#[cfg(test)]
mod tests;
