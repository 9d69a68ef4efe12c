//! A tier of machine code for numeric procedures (feature `jit`, on by
//! default): a procedure defined at the top level whose code uses only
//! arithmetic and comparisons on exact integers, reals and booleans, the
//! numeric primitives of `Unary` and `atan`,
//! conditionals, named-`let` loops, lists taken apart and made (`cons`, and
//! the walks `map` and `map2` of an arithmetic primitive, of a procedure of
//! the same kind, or of a lambda made there that only walks call, whose body
//! runs in place of each call: `closures_ok`), and calls of procedures of
//! the same kind held by globals, is compiled with Cranelift once the
//! evaluator has entered it [`Machine::jit_after`] times. Its values are then
//! unboxed (a tag and 64 bits in registers); nothing is allocated or
//! reference counted but the pairs it makes, which the machine holds until
//! it returns ([`Made`]).
//!
//! A named `let`'s loop of the same kind, in any code, is compiled on its own
//! once it has run that many iterations, and its next iteration goes on in
//! compiled code with the values it reads of its frame ([`run_loop`]): this
//! is how a numeric loop at the top level, or in a procedure called once or
//! not compiled, leaves the evaluator.
//!
//! Such a loop may call procedures that slots of its frame hold (a
//! descent's function and gradient, passed to the procedure holding it):
//! the evaluator makes each such call for it ([`call_value`]). It holds the
//! values those calls return that it cannot take apart (a real of a running
//! level of AD, where the loop runs under a derivative), and has the
//! evaluator compute with them ([`held_arith`]: recording on the levels as
//! the evaluator would). Where it gives up there, what the levels recorded
//! since it was entered is forgotten ([`crate::ad::tape::Tapes::rewind`])
//! before the evaluator runs it again, and it is not entered under levels
//! again.
//!
//! Where such a loop was compiled while a slot it calls held a closure whose
//! lambda's body computes only what compiled code computes on any value the
//! evaluator would ([`spec_ok`]), its code runs that body in place of each
//! call made while the slot holds a closure of the same lambda
//! ([`closure_env`] tells; the values the closure captured are read where they
//! are), and so, inside it, the bodies of the closures that closure captured
//! and calls; the evaluator makes the other calls.
//!
//! A lambda's body of that kind which makes a call is also compiled for the
//! calls of its closures that the evaluator makes, on whatever values they
//! pass ([`run_closure`]): a derivative's function, run on its level's
//! reals (the saddle's inner objective, under `%real-vjp`), has its closure
//! calls run in place and only its arithmetic on those reals made by the
//! evaluator. Where that code gives up, what the levels recorded since it
//! was entered is forgotten, and the lambda is not entered in compiled code
//! again.
//!
//! A small procedure holding such a loop, which its callers run in place
//! (`resolve::Inline::callee`), counts the steps each such run takes as its
//! entries ([`count_in_place`]); once compiled, the evaluator runs each such
//! call whole in its code ([`run`]) instead of entering the loop's.
//!
//! The compiled code counts what the evaluator counts: a step for each call
//! and loop iteration (`--max-steps`, `--timeout` and Ctrl-C are checked as
//! often), a level for each nested call (`--max-depth`). It never fails with
//! an error of its own. Where the evaluator would do anything else (an
//! integer overflowing into a big one, an exact quotient, a comparison of an
//! integer beyond ±2^53 with a real, an operand of another kind, a limit
//! reached, no memory left for the native stack), the compiled code gives
//! up: the counts are set back to where they were when it was entered, and
//! the evaluator runs the call again from its start, which it may since the
//! code has no effects.
//! The procedure entered is not entered in compiled code again. Where the
//! native stack runs short, a call continues on a new segment of it, as the
//! evaluator's do (`deeper`).
//!
//! Each entry from the evaluator checks that the globals the code calls
//! still hold the procedures it was compiled with (a later definition may
//! replace them). `--metered` runs everything in the evaluator.

// (without the feature, nothing is compiled: what compiling uses is unused)
#![cfg_attr(not(feature = "jit"), allow(dead_code))]

use crate::anf::Origin;
use crate::eval::{GState, Machine};
use crate::resolve::{CAtom, CBind, CBlock, CExpr, Cond, GroupCode, LambdaCode, Loop, Param};
use crate::value::{InstRc, Pair, Value};
use std::rc::Rc;

#[cfg(feature = "jit")]
mod codegen;

/// Without the feature nothing is compiled: no state ever counts down to
/// these (see `initial`).
#[cfg(not(feature = "jit"))]
mod codegen {
    pub(super) fn compile(_: &mut crate::eval::Machine, _: &crate::resolve::LambdaCode) {}
    pub(super) fn compile_loop(_: &mut crate::eval::Machine, _: &crate::resolve::Loop, _: usize) {}
    pub(super) fn compile_closure(
        _: &mut crate::eval::Machine,
        _: &crate::resolve::LambdaCode,
        _: &crate::value::InstRc,
        _: usize,
    ) {
    }
}

/// The entries of a procedure (or iterations of a loop) after which it is
/// compiled, by default. Compiling costs about as much as the evaluator
/// spends on 30,000 calls of a small procedure or iterations of a small loop
/// (0.5–1.8 ms against 20–40 ns an entry, bench/peers/README.md, session 72),
/// and both grow with the code's size; compiling once the evaluator has spent
/// that much keeps any run within about twice the time of the better of the
/// two tiers (with 1000, a run of fib(15) took 15 times as long as in the
/// evaluator), at a cost of about a millisecond to a run that goes on long.
pub const DEFAULT_AFTER: u64 = 30_000;

/// The deepest nesting of blocks (conditionals, loops, calls run in place)
/// in code that is compiled.
const MAX_NESTING: usize = 48;

/// The most arguments a compiled procedure takes.
pub const MAX_ARITY: usize = 4;

/// The most values a loop compiled on its own reads from its procedure's
/// frame (its variables included).
const MAX_INPUTS: usize = 16;

/// The value tags of compiled code.
pub(crate) const INT: i64 = 0;
pub(crate) const REAL: i64 = 1;
pub(crate) const BOOL: i64 = 2;
/// The tag a compiled procedure returns when it gives up.
pub(crate) const FAIL: i64 = 3;
/// `()`.
pub(crate) const NIL: i64 = 4;
/// A pair: its bits are the address of the `Pair` (`Rc::as_ptr`), borrowed.
/// Every pair compiled code holds is part of a value that the frame it was
/// entered with (its arguments, its loop's inputs) holds, or one it made
/// (`cons`, a list `map` or `map2` built), which [`Made`] holds; both
/// outlive the run. A pair it returns is counted again (`rebox`) before
/// that frame and those it made are dropped.
pub(crate) const PAIR: i64 = 6;
/// Any other value (a part of a pair: a closure, a big integer, an AD
/// value, ...), which compiled code may pass on and test with `null?`
/// (false), but gives up computing with, testing for truth or with `pair?`
/// (it may be a tagged `#f`, or a lazy pair), or returning; a loop's code
/// has the evaluator compute with it ([`held_arith`]), and may put it in a
/// pair or pass it to a procedure value ([`value_of`]). Its bits are its
/// address in the pair (borrowed, as the pair is). The tags of values other
/// than `REAL` are even: `arith` tells two reals by the `and` of the tags.
pub(crate) const OTHER: i64 = 8;
/// A value compiled code cannot take apart but holds (a procedure a loop
/// calls, or a value such a call returned, see [`call_value`]): its bits are
/// 1 + its index in [`Made`]'s values, which hold it until the code returns.
/// It is an `OTHER` to everything but a call of a procedure value (and
/// `arith`'s test of two reals: even, as every tag but `REAL`).
pub(crate) const HELD: i64 = 12;

/// A procedure's state for the tier, in [`LambdaCode::jit`]: 0, never
/// compiled; `1..=COUNTING`, the entries left before it is compiled; else a
/// pointer to its [`Entry`].
pub const NEVER: usize = 0;
const COUNTING: usize = 1 << 32;

/// A compiled procedure: its code, how many arguments it takes, and the
/// globals its code calls, each with the procedure it held then (held here,
/// so that no other procedure can take its address).
pub struct Entry {
    code: *const u8,
    arity: usize,
    deps: Box<[(u32, InstRc)]>,
}

/// The state a group's member starts in: counting down from `after`
/// entries where the tier is built in, `after` is not 0, and its code is of
/// the kind compiled.
pub fn initial(group: &crate::anf::Group, code: &GroupCode, after: u64) -> usize {
    if !cfg!(feature = "jit") || after == 0 || !source_procedure(group, code) || !group.free.is_empty() {
        return NEVER;
    }
    let lam = &code.members[0];
    if arity(lam).is_none() || !body_ok(lam) {
        return NEVER;
    }
    after.min(COUNTING as u64 - 1) as usize + 1
}

/// The state a group's member starts in for calls of its closures made by
/// the evaluator on any values (see [`run_closure`]): counting down from
/// `after` entries where the tier is built in, `after` is not 0, and its
/// body is of the kind a loop's code runs in place of a call ([`spec_ok`])
/// and makes a call. (Entering compiled code costs more than the
/// evaluator spends on a body of a few operations, as `(lambda (x) (* k
/// x))`: with these compiled too, the particle's FF solve took 2.5% longer.
/// What compiled code saves is the calls, each the frame the evaluator sets
/// up for it.)
pub fn initial_closure(group: &crate::anf::Group, code: &GroupCode, after: u64) -> usize {
    if !cfg!(feature = "jit") || after == 0 || !spec_ok(group, code) || !makes_calls(&code.members[0].body) {
        return NEVER;
    }
    after.min(COUNTING as u64 - 1) as usize + 1
}

/// Whether `b` (or a block nested in it) makes a call, or runs one in place.
fn makes_calls(b: &CBlock) -> bool {
    let any = std::cell::Cell::new(false);
    visit(
        b,
        &mut |e| any.set(any.get() | matches!(e, CExpr::App(..) | CExpr::Inline(_) | CExpr::Guarded(_))),
        &mut |x| any.set(any.get() | matches!(x, CBind::PushApp(..))),
    );
    any.get()
}

/// Whether the body of `lam` (from the bindings compiled code starts at) is
/// of the kind compiled.
pub(crate) fn body_ok(lam: &LambdaCode) -> bool {
    let b = &lam.body;
    let d = MAX_NESTING;
    b.binds.get(start(lam)..).is_some_and(|bs| bs.iter().all(|x| bind_ok(x, d, false)))
        && expr_ok(&b.tail, d, false)
        && closures_ok(b)
}

/// Whether a lambda (a closure's code, see [`walk_fn_ok`]) whose body
/// compiled code runs in place of a call of it, which a walk makes, is of
/// the kind compiled: a procedure of source code, one of a group, of one or
/// two arguments.
pub(crate) fn lambda_ok(group: &crate::anf::Group, code: &GroupCode) -> bool {
    source_procedure(group, code)
        && arity(&code.members[0]).is_some_and(|n| n <= 2)
        && body_ok(&code.members[0])
}

/// Whether a loop's compiled code may run the body of the lambda of a
/// closure (a group's, `code` its code) in place of a call of it, where the
/// loop was compiled with a slot it reads, or a value a closure it so runs
/// captured, holding the closure (the code compares the value called with
/// it first: see `codegen::Gen::expected_call`): one procedure of source
/// code, of at most [`MAX_ARITY`] arguments, whose body is made only of
/// what compiled code computes on any value the evaluator would (arithmetic
/// and comparisons, on a level's reals by [`held_arith`], as loops make
/// them), pairs taken apart and made, conditionals on comparisons and
/// `null?`, calls run in place, calls of procedure values (themselves
/// run so, or made by [`call_value`]), and calls of primitives made by the
/// evaluator's code for them ([`prim_call_ok`], [`call_prim`]): no call of a
/// global's procedure, whose compiled code gives up on a level's real, no
/// primitive compiled code computes itself and gives up on such a real with
/// (`sqrt`, ...), no test of a value's truth (a real of a level may be a
/// tagged `#f`), no loop, walk or closure made.
pub(crate) fn spec_ok(group: &crate::anf::Group, code: &GroupCode) -> bool {
    if !source_procedure(group, code) {
        return false;
    }
    let lam = &code.members[0];
    // (all its bindings: those a tuple's parts skip run where it is passed
    // the tuple whole, see [`entry`])
    arity(lam).is_some()
        && lam.body.binds.iter().all(|x| spec_bind_ok(x, MAX_NESTING))
        && spec_expr_ok(&lam.body.tail, MAX_NESTING)
}

/// How compiled code enters `lam` on `n` arguments, as `Machine::enter`
/// does: the binding it starts at, and the slot the one argument goes to
/// where `lam` destructures its parameter as a tuple and is passed it whole
/// (its bindings then take it apart; otherwise the arguments go to slots 0,
/// 1, ...). `None` where compiled code makes no such call.
pub(crate) fn entry(lam: &LambdaCode, n: usize) -> Option<(usize, Option<u32>)> {
    if arity(lam) == Some(n) {
        return Some((start(lam), None));
    }
    match &lam.param {
        Param::Tuple { slot, .. } if n == 1 && arity(lam).is_some() => Some((0, Some(*slot))),
        _ => None,
    }
}

/// Whether the body of `lam` runs a call in place where its closure captured
/// `env` (a call run in place by the resolved code, or a call of a captured
/// closure whose lambda a loop's code would run in place, see [`spec_ok`]):
/// what compiling it for its closures' calls saves. A body whose calls the
/// evaluator would make anyway (through [`call_value`]) is left to the
/// evaluator: entering compiled code to make them cost more (a closure
/// `(lambda (x) (+ 1.0 (f x)))` that `map` called, `f` another's: 7.2 ms
/// against 10.3 ms for 10^5 calls).
pub(crate) fn runs_calls_in_place(lam: &LambdaCode, env: &[Value]) -> bool {
    let in_place = |f: &CAtom, n: usize| match f {
        CAtom::Env(i) => match env.get(*i as usize) {
            Some(Value::Closure(inst, 0)) => inst
                .group
                .code
                .get()
                .is_some_and(|code| spec_ok(&inst.group, code) && entry(&code.members[0], n).is_some()),
            _ => false,
        },
        _ => false,
    };
    let any = std::cell::Cell::new(false);
    visit(
        &lam.body,
        &mut |e| {
            let runs = match e {
                CExpr::Inline(_) | CExpr::Guarded(_) => true,
                CExpr::App(f, args, ..) => in_place(f, args.atoms().len()),
                _ => false,
            };
            any.set(any.get() | runs);
        },
        &mut |x| {
            if let CBind::PushApp(_, f, args, ..) = x {
                any.set(any.get() | in_place(f, args.atoms().len()));
            }
        },
    );
    any.get()
}

fn spec_block_ok(b: &CBlock, d: usize) -> bool {
    d > 0 && b.binds.iter().all(|x| spec_bind_ok(x, d - 1)) && spec_expr_ok(&b.tail, d - 1)
}

fn spec_bind_ok(b: &CBind, d: usize) -> bool {
    match b {
        CBind::Let(_, e) => spec_expr_ok(e, d),
        CBind::PushApp(_, f, args, ..) => {
            value_callee_ok(f, args.atoms().len()) && args.atoms().iter().all(atom_ok)
        }
        CBind::Uncons(_, _, a, ..) => atom_ok(a),
        CBind::Clear(_) | CBind::Grow(_) => true,
        _ => false,
    }
}

fn spec_expr_ok(e: &CExpr, d: usize) -> bool {
    match e {
        CExpr::Atom(a) => atom_ok(a),
        CExpr::Arith2(_, a, b, ..) => atom_ok(a) && atom_ok(b),
        CExpr::Arith2Int(..) => true,
        CExpr::App(f, args, ..) => value_callee_ok(f, args.atoms().len()) && args.atoms().iter().all(atom_ok),
        CExpr::Cons(a, d, _) => atom_ok(a) && atom_ok(d),
        // (made by the evaluator's code for it: see [`call_prim`])
        CExpr::Prim(p, args, _) => prim_call_ok(*p, args.atoms().len()) && args.atoms().iter().all(atom_ok),
        CExpr::If(c, t, f) => {
            matches!(c, Cond::Cmp(..) | Cond::CmpInt(..) | Cond::Is(crate::resolve::Shape::Null, _))
                && cond_ok(c)
                && spec_block_ok(t, d)
                && spec_block_ok(f, d)
        }
        CExpr::Inline(il) => spec_block_ok(&il.body, d),
        // (a let-bound lambda's call, run in place where the variable holds it)
        CExpr::Guarded(g) => {
            matches!(g.callee, CAtom::Local(_) | CAtom::Env(_))
                && spec_block_ok(&g.inline.body, d)
                && spec_expr_ok(&g.call, d)
        }
        _ => false,
    }
}

/// Whether compiled code makes a call of primitive `p` on `n` arguments by
/// the evaluator's code for it ([`call_prim`]), in the body of a closure's
/// lambda ([`spec_ok`]): as many as it takes, one to three (the evaluator's
/// own calls of a primitive that fit), and not one compiled code computes
/// itself (`Unary`, the walks, `atan`), which give up on a value they do
/// not take.
pub(crate) fn prim_call_ok(p: crate::prims::PrimId, n: usize) -> bool {
    (1..=3).contains(&n)
        && crate::prims::prim(p).arity as usize == n
        && Unary::of(p).is_none()
        && walk_lists(p).is_none()
        && !is_atan(p)
}

/// A call of the procedure a slot or a captured value holds, on `n` arguments.
fn value_callee_ok(f: &CAtom, n: usize) -> bool {
    matches!(f, CAtom::Local(_) | CAtom::Env(_)) && (1..=MAX_ARITY).contains(&n)
}

/// Whether a group is one procedure of source code (not a transform's, a
/// `letrec`'s, a shape, nor a primitive's native code), which compiled code
/// may run.
fn source_procedure(group: &crate::anf::Group, code: &GroupCode) -> bool {
    code.members.len() == 1
        && matches!(group.origin, Origin::Source)
        && !group.is_derivative_code()
        && group.names.is_empty()
        && code.plain
        && group.native.get().is_none()
}

/// A named `let`'s loop compiled on its own (see [`run_loop`]): its code,
/// the slots of the frame it reads (its variables among them), in the order
/// the code takes them, and the globals its code calls (as [`Entry`]'s).
pub struct LoopEntry {
    code: *const u8,
    inputs: Box<[u32]>,
    deps: Box<[(u32, InstRc)]>,
    /// For each input, whether the code calls the procedure it holds (an
    /// input it may take as a [`HELD`] value); none if it calls none.
    called: Box<[bool]>,
    /// Set once the code gave up where a level of AD ran: not entered there
    /// again (it still is where none runs).
    not_on_levels: std::cell::Cell<bool>,
    /// The groups whose lambdas the code runs in place of calls of their
    /// closures (see [`spec_ok`]), held so that no other group takes the
    /// address the code compares with.
    _expected: Box<[Rc<crate::anf::Group>]>,
}

impl LoopEntry {
    pub(crate) fn new(
        code: *const u8,
        lp: &Loop,
        inputs: Vec<u32>,
        deps: Box<[(u32, InstRc)]>,
        expected: Vec<Rc<crate::anf::Group>>,
    ) -> LoopEntry {
        let callees = value_callees(&lp.body);
        let called = match callees.is_empty() {
            true => Box::default(),
            false => inputs.iter().map(|s| callees.contains(s)).collect(),
        };
        LoopEntry {
            code,
            inputs: inputs.into(),
            deps,
            called,
            not_on_levels: std::cell::Cell::new(false),
            _expected: expected.into(),
        }
    }
}

/// The slots whose procedures code calls (see [`call_value`]).
pub(crate) fn value_callees(b: &CBlock) -> Vec<u32> {
    let out = std::cell::RefCell::new(Vec::new());
    let callee = |f: &CAtom| {
        if let CAtom::Local(s) = f {
            out.borrow_mut().push(*s);
        }
    };
    visit(
        b,
        &mut |e| match e {
            CExpr::App(f, ..) => callee(f),
            CExpr::AppArith(c) => callee(&c.f),
            _ => {}
        },
        &mut |x| match x {
            CBind::PushApp(_, f, ..) => callee(f),
            CBind::PushArith(_, c, _) => callee(&c.f),
            _ => {}
        },
    );
    out.into_inner()
}

/// Sets the state of each named `let`'s loop in `b`, the body of a member
/// of `group` (and in the blocks nested in it), whose code is of the kind
/// compiled: counting down from `after` iterations (see [`run_loop`]).
/// (Walked without recursion: code may nest deeply.)
pub fn initial_loops(group: &crate::anf::Group, code: &GroupCode, b: &CBlock, after: u64) {
    // (source code, as `initial` takes: not the transforms' code)
    if !cfg!(feature = "jit")
        || after == 0
        || !matches!(group.origin, Origin::Source)
        || group.is_derivative_code()
        || !code.plain
    {
        return;
    }
    let mut blocks = vec![b];
    let mut exprs: Vec<&CExpr> = Vec::new();
    while let Some(b) = blocks.pop() {
        for bind in &b.binds {
            match bind {
                CBind::Let(_, e) | CBind::Split(e, ..) => exprs.push(e),
                CBind::PushArith(_, c, _) => exprs.push(&c.arg),
                _ => {}
            }
        }
        exprs.push(&b.tail);
        while let Some(e) = exprs.pop() {
            match e {
                CExpr::If(_, t, f) => blocks.extend([&**t, &**f]),
                CExpr::Inline(il) => blocks.push(&il.body),
                CExpr::Guarded(g) => {
                    exprs.push(&g.call);
                    blocks.push(&g.inline.body);
                }
                CExpr::AppArith(c) => exprs.push(&c.arg),
                CExpr::Loop(lp) => {
                    if loop_ok(lp) {
                        lp.jit.set(after.min(COUNTING as u64 - 1) as usize + 1);
                    }
                    blocks.push(&lp.body);
                }
                _ => {}
            }
        }
    }
}

/// Whether a loop may be compiled on its own: a named `let`'s, of the kind
/// of code compiled, reading at most [`MAX_INPUTS`] slots of its frame.
fn loop_ok(lp: &Loop) -> bool {
    !lp.entered
        && block_ok(&lp.body, MAX_NESTING, true)
        && !calls_own(&lp.body)
        && closures_ok(&lp.body)
        && !reads(&lp.body, |r| matches!(r, Read::Env))
        && inputs(lp).len() <= MAX_INPUTS
}

/// A value code reads (see [`each_read`]): a slot of its frame (and whether
/// as the procedure a walk, `map` or `map2`, calls), or one its closure
/// captured.
#[derive(Clone, Copy)]
enum Read {
    Slot(u32, bool),
    Env,
}

/// Calls `f` on each value `b` (and the blocks nested in it) reads.
fn each_read(b: &CBlock, f: &mut dyn FnMut(Read)) {
    use std::cell::RefCell;
    let f = RefCell::new(f);
    visit(b, &mut |e| expr_reads(e, &mut *f.borrow_mut()), &mut |x| bind_reads(x, &mut *f.borrow_mut()));
}

/// Calls `f` on each value expression `e` reads itself (not in the blocks
/// nested in it).
fn expr_reads(e: &CExpr, f: &mut dyn FnMut(Read)) {
    let mut atom = |a: &CAtom, walked: bool| match a {
        CAtom::Local(s) => f(Read::Slot(*s, walked)),
        CAtom::Env(_) => f(Read::Env),
        _ => {}
    };
    match e {
        CExpr::Atom(a) => atom(a, false),
        CExpr::Arith2(_, a, b, ..) => {
            atom(a, false);
            atom(b, false);
        }
        CExpr::Arith2Int(_, s, ..) => atom(&CAtom::Local(*s), false),
        CExpr::App(g, args, ..) => {
            atom(g, false);
            args.atoms().iter().for_each(|a| atom(a, false));
        }
        CExpr::AppArith(c) => atom(&c.f, false),
        CExpr::Prim(p, args, _) => {
            let walk = walk_lists(*p).is_some();
            for (i, a) in args.atoms().iter().enumerate() {
                atom(a, walk && i == 0);
            }
        }
        CExpr::Cons(a, d, _) => {
            atom(a, false);
            atom(d, false);
        }
        CExpr::Closure(_, caps) => caps.iter().for_each(|a| atom(a, false)),
        CExpr::If(c, ..) => match c {
            Cond::Atom(a) | Cond::Is(_, a) => atom(a, false),
            Cond::Cmp(_, a, b, ..) => {
                atom(a, false);
                atom(b, false);
            }
            Cond::CmpInt(_, s, ..) => atom(&CAtom::Local(*s), false),
        },
        CExpr::Loop(l) => l.init.atoms().iter().for_each(|a| atom(a, false)),
        CExpr::Again(a) => a.set.atoms().iter().for_each(|a| atom(a, false)),
        _ => {}
    }
}

/// Calls `f` on each value binding `x` reads itself (not its expression's).
fn bind_reads(x: &CBind, f: &mut dyn FnMut(Read)) {
    let mut atom = |a: &CAtom| match a {
        CAtom::Local(s) => f(Read::Slot(*s, false)),
        CAtom::Env(_) => f(Read::Env),
        _ => {}
    };
    match x {
        CBind::PushArith(_, c, _) => atom(&c.f),
        CBind::PushApp(_, g, args, ..) => {
            atom(g);
            args.atoms().iter().for_each(atom);
        }
        CBind::Uncons(_, _, a, ..) => atom(a),
        _ => {}
    }
}

/// Whether `b` reads a value `want` says.
fn reads(b: &CBlock, want: impl Fn(Read) -> bool) -> bool {
    let mut found = false;
    each_read(b, &mut |r| found |= want(r));
    found
}

/// Whether each closure `b` makes (see [`bind_ok`]) is only ever called by
/// walks (`(map f l)`, `(map2 f l1 l2)`), which compiled code runs with the
/// closure's body in place of its calls, and each walk whose procedure is
/// a slot's calls such a closure: the slots holding closures followed
/// binding by binding (a slot is used again for other values).
fn closures_ok(b: &CBlock) -> bool {
    closures_in(b, &mut rustc_hash::FxHashSet::default(), MAX_NESTING)
}

/// [`closures_ok`] of `b`, the slots in `made` holding closures where it
/// starts (and where it ends, after).
fn closures_in(b: &CBlock, made: &mut rustc_hash::FxHashSet<u32>, d: usize) -> bool {
    if d == 0 {
        return false;
    }
    let mut ok = true;
    let mut check = |made: &rustc_hash::FxHashSet<u32>, r: Read| {
        if let Read::Slot(s, walked) = r {
            ok &= walked == made.contains(&s);
        }
    };
    for x in &b.binds {
        bind_reads(x, &mut |r| check(made, r));
        let e = match x {
            CBind::Let(_, e) => Some(e),
            CBind::PushArith(_, c, _) => Some(&c.arg),
            _ => None,
        };
        if let Some(e) = e {
            expr_reads(e, &mut |r| check(made, r));
            if !nested_closures_ok(e, made, d) {
                return false;
            }
        }
        match x {
            CBind::Let(s, CExpr::Closure(..)) => {
                made.insert(*s);
            }
            CBind::Let(s, _) | CBind::PushArith(s, ..) | CBind::PushApp(s, ..) => {
                made.remove(s);
            }
            CBind::Uncons(x, y, ..) => {
                made.remove(x);
                made.remove(y);
            }
            _ => {}
        }
    }
    expr_reads(&b.tail, &mut |r| check(made, r));
    ok && nested_closures_ok(&b.tail, made, d)
}

/// [`closures_in`] of the blocks nested in `e`.
fn nested_closures_ok(e: &CExpr, made: &rustc_hash::FxHashSet<u32>, d: usize) -> bool {
    let inner = |b: &CBlock, bound: &[u32]| {
        let mut m = made.clone();
        bound.iter().for_each(|s| {
            m.remove(s);
        });
        closures_in(b, &mut m, d - 1)
    };
    match e {
        CExpr::If(_, t, f) => inner(t, &[]) && inner(f, &[]),
        CExpr::Inline(il) => inner(&il.body, &[]),
        CExpr::Loop(lp) => inner(&lp.body, &lp.params),
        CExpr::AppArith(c) => nested_closures_ok(&c.arg, made, d),
        _ => true,
    }
}

/// The number of lists primitive `p` walks, calling a procedure on their
/// elements, where compiled code runs it: 1 for `map`, 2 for `map2`.
pub(crate) fn walk_lists(p: crate::prims::PrimId) -> Option<usize> {
    match crate::prims::prim(p).name {
        "map" => Some(1),
        "map2" => Some(2),
        _ => None,
    }
}

/// The arithmetic operation of primitive `p`, `+ - * /` (which `map2`
/// compiled calls as the arithmetic of two numbers).
pub(crate) fn arith_prim(p: crate::prims::PrimId) -> Option<crate::resolve::Op2> {
    crate::resolve::Op2::of(crate::prims::prim(p).name).filter(|op| !op.is_comparison())
}

/// Whether compiled code calls `f` for a walk of `n` lists: a one-argument
/// numeric primitive ([`Unary`]) for `map`, an arithmetic one for `map2`,
/// a procedure a global holds (found where the code is compiled), or a
/// closure made in the same code (see [`closures_ok`]).
fn walk_fn_ok(f: &CAtom, n: usize) -> bool {
    match f {
        CAtom::Const(Value::Prim(p)) => match n {
            1 => Unary::of(*p).is_some(),
            _ => arith_prim(*p).is_some(),
        },
        CAtom::Global(_) | CAtom::Local(_) => true,
        _ => false,
    }
}

/// Whether `b` holds a named `let`'s loop, or a walk of lists (`map`,
/// `map2`) calling a procedure (not a primitive, which the evaluator's walk
/// calls natively, in a loop of its own), whose compiled code, run instead
/// of the evaluator's in place, saves more than entering it costs (see
/// `resolve::Inline::callee`).
pub(crate) fn runs_long(b: &CBlock) -> bool {
    let mut found = false;
    let walk_calls = |e: &CExpr| match e {
        CExpr::Prim(p, args, _) => {
            walk_lists(*p).is_some() && !matches!(args.atoms().first(), Some(CAtom::Const(Value::Prim(_))))
        }
        _ => false,
    };
    visit(b, &mut |e| found |= matches!(e, CExpr::Loop(_)) || walk_calls(e), &mut |_| {});
    found
}

/// Whether `b` holds a procedure's call of itself as a loop
/// (`Again::global`), which only its procedure's code runs.
fn calls_own(b: &CBlock) -> bool {
    let mut found = false;
    visit(b, &mut |e| found |= matches!(e, CExpr::Again(a) if a.global.is_some()), &mut |_| {});
    found
}

/// Calls `expr` on each expression of `b` and of the blocks nested in it,
/// and `bind` on each binding (code of the kind compiled: nested at most
/// [`MAX_NESTING`] deep).
fn visit<'a>(b: &'a CBlock, expr: &mut dyn FnMut(&'a CExpr), bind: &mut dyn FnMut(&'a CBind)) {
    for x in &b.binds {
        bind(x);
        match x {
            CBind::Let(_, e) => visit_expr(e, expr, bind),
            CBind::PushArith(_, c, _) => visit_expr(&c.arg, expr, bind),
            _ => {}
        }
    }
    visit_expr(&b.tail, expr, bind);
}

fn visit_expr<'a>(e: &'a CExpr, expr: &mut dyn FnMut(&'a CExpr), bind: &mut dyn FnMut(&'a CBind)) {
    expr(e);
    match e {
        CExpr::If(_, t, f) => {
            visit(t, expr, bind);
            visit(f, expr, bind);
        }
        CExpr::Inline(il) => visit(&il.body, expr, bind),
        CExpr::Loop(lp) => visit(&lp.body, expr, bind),
        CExpr::AppArith(c) => visit_expr(&c.arg, expr, bind),
        _ => {}
    }
}

/// The slots of its frame a loop reads that it does not bind: its
/// variables, and those it reads of the code around it (each bound once
/// before the loop and live throughout it, so never bound in it).
pub(crate) fn inputs(lp: &Loop) -> Vec<u32> {
    let mut read = Vec::new();
    each_read(&lp.body, &mut |r| {
        if let Read::Slot(s, _) = r {
            read.push(s);
        }
    });
    let bound = std::cell::RefCell::new(rustc_hash::FxHashSet::default());
    visit(
        &lp.body,
        &mut |e| {
            if let CExpr::Loop(l) = e {
                bound.borrow_mut().extend(l.params.iter().copied());
            }
        },
        &mut |b| match b {
            CBind::Let(s, _) | CBind::PushArith(s, ..) | CBind::PushApp(s, ..) => {
                bound.borrow_mut().insert(*s);
            }
            CBind::Uncons(x, y, ..) => {
                bound.borrow_mut().extend([*x, *y]);
            }
            _ => {}
        },
    );
    let bound = bound.into_inner();
    let mut ins: Vec<u32> = lp.params.to_vec();
    for s in read {
        if !bound.contains(&s) && !ins.contains(&s) {
            ins.push(s);
            if ins.len() > MAX_INPUTS {
                break;
            }
        }
    }
    ins
}

/// The number of arguments `lam` takes in compiled code: its parameter
/// (slot 0), or the parts of a tuple it destructures, in slots 0, 1, ...
pub(crate) fn arity(lam: &LambdaCode) -> Option<usize> {
    match &lam.param {
        Param::Slot(0) if lam.unary == 1 => Some(1),
        Param::Tuple { parts, .. }
            if (2..=MAX_ARITY).contains(&parts.len())
                && parts.iter().enumerate().all(|(i, p)| *p == i as u32) =>
        {
            Some(parts.len())
        }
        _ => None,
    }
}

/// The bindings compiled code starts at (those a tuple's parts skip).
pub(crate) fn start(lam: &LambdaCode) -> usize {
    match &lam.param {
        Param::Tuple { skip, .. } => *skip,
        _ => 0,
    }
}

fn atom_ok(a: &CAtom) -> bool {
    match a {
        // (a closure's captured values: only in a lambda's body run in
        // place of a walk's calls, see `lambda_ok`; a procedure compiled
        // whole captures none, and a loop compiled on its own reads none)
        CAtom::Local(_) | CAtom::Env(_) => true,
        CAtom::Const(v) => matches!(v, Value::Int(_) | Value::Real(_) | Value::Bool(_) | Value::Nil),
        _ => false,
    }
}

/// Whether compiled code calls `f` on `n` arguments: a procedure a global
/// holds, or (`values`: in a loop compiled on its own) one a slot holds,
/// called through the evaluator (see [`call_value`]).
fn callee_ok(f: &CAtom, n: usize, values: bool) -> bool {
    (matches!(f, CAtom::Global(_)) || values && matches!(f, CAtom::Local(_))) && (1..=MAX_ARITY).contains(&n)
}

/// The code of blocks nested at most `d` deep is compiled (the passes over
/// it recurse once per level); `values`: calls of procedures slots hold too.
fn block_ok(b: &CBlock, d: usize, values: bool) -> bool {
    d > 0 && b.binds.iter().all(|x| bind_ok(x, d - 1, values)) && expr_ok(&b.tail, d - 1, values)
}

fn bind_ok(b: &CBind, d: usize, values: bool) -> bool {
    match b {
        // (a closure only a walk calls, see `closures_ok`)
        CBind::Let(_, CExpr::Closure(_, caps)) => caps.iter().all(atom_ok),
        CBind::Let(_, e) => expr_ok(e, d, values),
        CBind::PushArith(_, c, _) => callee_ok(&c.f, 1, values) && expr_ok(&c.arg, d, values),
        CBind::PushApp(_, f, args, ..) => {
            callee_ok(f, args.atoms().len(), values) && args.atoms().iter().all(atom_ok)
        }
        CBind::Clear(_) | CBind::Grow(_) => true,
        CBind::Uncons(_, _, a, ..) => atom_ok(a),
        _ => false,
    }
}

fn expr_ok(e: &CExpr, d: usize, values: bool) -> bool {
    match e {
        CExpr::Atom(a) => atom_ok(a),
        CExpr::Arith2(_, a, b, ..) => atom_ok(a) && atom_ok(b),
        CExpr::Arith2Int(..) => true,
        CExpr::App(f, args, ..) => {
            callee_ok(f, args.atoms().len(), values) && args.atoms().iter().all(atom_ok)
        }
        CExpr::AppArith(c) => callee_ok(&c.f, 1, values) && expr_ok(&c.arg, d, values),
        CExpr::If(c, t, f) => cond_ok(c) && block_ok(t, d, values) && block_ok(f, d, values),
        CExpr::Inline(il) => block_ok(&il.body, d, values),
        CExpr::Loop(lp) => lp.init.atoms().iter().all(atom_ok) && block_ok(&lp.body, d, values),
        CExpr::Again(a) => a.set.atoms().iter().all(atom_ok),
        CExpr::Prim(p, crate::resolve::CArgs::One(a), _) => Unary::of(*p).is_some() && atom_ok(a),
        CExpr::Prim(p, crate::resolve::CArgs::Tuple(xs), _) => match walk_lists(*p) {
            Some(n) => xs.len() == n + 1 && walk_fn_ok(&xs[0], n) && xs[1..].iter().all(atom_ok),
            None => is_atan(*p) && xs.len() == 2 && xs.iter().all(atom_ok),
        },
        CExpr::Cons(a, d, _) => atom_ok(a) && atom_ok(d),
        _ => false,
    }
}

fn cond_ok(c: &Cond) -> bool {
    match c {
        Cond::Atom(a) => atom_ok(a),
        Cond::Cmp(_, a, b, ..) => atom_ok(a) && atom_ok(b),
        Cond::CmpInt(..) | Cond::Is(..) => true,
    }
}

/// The one-argument primitives compiled code computes: on a real (`real`
/// also on an exact integer, which it returns as it is; `exp`, `log`, `sin`
/// and `cos` also on an exact integer, as its double, as `num::real_fn`
/// does; `sqrt` also on an exact integer from 0 to 2^53, exact for a perfect
/// square), and the sign tests `zero?`, `positive?` and `negative?` of a
/// number. Anything else gives up.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Unary {
    Real,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    ZeroP,
    PositiveP,
    NegativeP,
}

impl Unary {
    pub(crate) fn of(p: crate::prims::PrimId) -> Option<Unary> {
        Some(match crate::prims::prim(p).name {
            "real" => Unary::Real,
            "sqrt" => Unary::Sqrt,
            "exp" => Unary::Exp,
            "log" => Unary::Log,
            "sin" => Unary::Sin,
            "cos" => Unary::Cos,
            "zero?" => Unary::ZeroP,
            "positive?" => Unary::PositiveP,
            "negative?" => Unary::NegativeP,
            _ => return None,
        })
    }

    /// For `zero?`, `positive?` and `negative?`: the comparison with 0 of an
    /// exact integer, and of a real (ordered: false for NaN).
    #[cfg(feature = "jit")]
    pub(crate) fn sign_test(
        self,
    ) -> Option<(cranelift_codegen::ir::condcodes::IntCC, cranelift_codegen::ir::condcodes::FloatCC)> {
        use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
        Some(match self {
            Unary::ZeroP => (IntCC::Equal, FloatCC::Equal),
            Unary::PositiveP => (IntCC::SignedGreaterThan, FloatCC::GreaterThan),
            Unary::NegativeP => (IntCC::SignedLessThan, FloatCC::LessThan),
            _ => return None,
        })
    }

    /// The function compiled code calls for it (where it is not an instruction).
    pub(crate) fn function(self) -> Option<extern "C" fn(f64) -> f64> {
        extern "C" fn exp(x: f64) -> f64 {
            x.exp()
        }
        extern "C" fn ln(x: f64) -> f64 {
            x.ln()
        }
        extern "C" fn sin(x: f64) -> f64 {
            x.sin()
        }
        extern "C" fn cos(x: f64) -> f64 {
            x.cos()
        }
        match self {
            Unary::Exp => Some(exp),
            Unary::Log => Some(ln),
            Unary::Sin => Some(sin),
            Unary::Cos => Some(cos),
            _ => None,
        }
    }
}

/// Whether primitive `p` is `atan` (of two numbers, which compiled code
/// computes: `(atan y x)`).
pub(crate) fn is_atan(p: crate::prims::PrimId) -> bool {
    crate::prims::prim(p).name == "atan"
}

/// `atan` of two doubles, as `num::atan2` computes it for numbers whose
/// doubles are exact (compiled code calls it).
pub(crate) extern "C" fn atan2(y: f64, x: f64) -> f64 {
    y.atan2(x)
}

/// A value's tag and bits in compiled code, if it has them.
pub(crate) fn unbox(v: &Value) -> Option<(i64, i64)> {
    match v {
        Value::Int(x) => Some((INT, *x)),
        Value::Real(x) => Some((REAL, x.to_bits() as i64)),
        Value::Bool(b) => Some((BOOL, *b as i64)),
        Value::Nil => Some((NIL, 0)),
        Value::Pair(p) => Some((PAIR, Rc::as_ptr(p) as i64)),
        _ => None,
    }
}

/// The value of a tag and bits that compiled code returns; `None` for
/// `FAIL` (it gave up) and `OTHER` (a value it cannot return).
///
/// # Safety
/// A pair's bits must be the address of a pair that a value still held
/// holds (see [`PAIR`]).
unsafe fn rebox(tag: i64, bits: i64) -> Option<Value> {
    Some(match tag {
        INT => Value::Int(bits),
        REAL => Value::Real(f64::from_bits(bits as u64)),
        BOOL => Value::Bool(bits != 0),
        NIL => Value::Nil,
        // SAFETY: (the caller's) the pair is alive.
        PAIR => Value::Pair(unsafe { borrowed_pair(bits) }),
        _ => return None,
    })
}

/// A count of the pair at `bits` (a pair's bits, the pair borrowed by
/// compiled code): one more owner, the value made of it.
///
/// # Safety
/// `bits` must be the address of a live pair.
#[inline(always)]
unsafe fn borrowed_pair(bits: i64) -> Rc<Pair> {
    let p = bits as *const Pair;
    // SAFETY: (the caller's) one more count for the `Rc` made here.
    unsafe {
        Rc::increment_strong_count(p);
        Rc::from_raw(p)
    }
}

/// The parts of the pair at `p` (`car`'s tag and bits, then `cdr`'s), as
/// compiled code takes a pair apart (`((cons a d) p)`, `car`, `cdr`).
///
/// # Safety
/// `p` must be the address of a live pair; `out`, of four words.
pub(crate) unsafe extern "C" fn uncons(p: *const Pair, out: *mut i64) {
    // SAFETY: (the caller's)
    let (p, out) = unsafe { (&*p, std::slice::from_raw_parts_mut(out, 4)) };
    let (ta, a) = unbox(&p.car).unwrap_or((OTHER, &p.car as *const Value as i64));
    let (td, d) = unbox(&p.cdr).unwrap_or((OTHER, &p.cdr as *const Value as i64));
    out.copy_from_slice(&[ta, a, td, d]);
}

/// The pairs compiled code has made (`cons`, and the lists `map` and `map2`
/// build), each list held here from when its first pair is made until the
/// code returns to the evaluator: compiled code only borrows pairs
/// ([`PAIR`]), and frees none.
#[derive(Default)]
pub struct Made {
    values: Vec<Value>,
    /// `values.len()`, kept where compiled code reads it (a loop's calls of
    /// itself test it before they [`compact`]: see `MADE_LEN`).
    len: usize,
}

/// Where compiled code finds the number of values held for it, from the
/// machine's address ([`Made`]'s `len`).
pub(crate) const MADE_LEN: usize = std::mem::offset_of!(Machine, jit_made) + std::mem::offset_of!(Made, len);

/// The most values compiled code holds made in one run: past it, the code
/// gives up (a loop making a list at each iteration would otherwise hold
/// them all until it ends), and the evaluator, which drops each once it is
/// read no more, runs the call again.
const MAX_MADE: usize = 1 << 16;

impl Made {
    /// Drops what compiled code made since `mark` (`values.len()` when it
    /// was entered).
    #[inline(always)]
    fn release(&mut self, mark: usize) {
        if self.values.len() > mark {
            truncate_values(&mut self.values, mark);
            self.len = mark;
        }
    }

    /// Holds pair `p`; false past [`MAX_MADE`].
    #[inline(always)]
    fn hold(&mut self, p: Rc<Pair>) -> bool {
        if self.values.len() >= MAX_MADE {
            return false;
        }
        // (room made first, so that the value is written in place, its tag
        // and its pointer, not made on the stack and copied whole: see `snoc`)
        self.values.reserve(1);
        let n = self.values.len();
        // SAFETY: within the capacity reserved just above; the length counts
        // the value once it is written.
        unsafe {
            std::ptr::write(self.values.as_mut_ptr().add(n), Value::Pair(p));
            self.values.set_len(n + 1);
        }
        self.len = n + 1;
        true
    }

    /// Holds `v`: its bits as a [`HELD`] value; `None` past [`MAX_MADE`].
    #[inline(always)]
    fn hold_value(&mut self, v: Value) -> Option<i64> {
        if self.values.len() >= MAX_MADE {
            return None;
        }
        self.values.reserve(1);
        let n = self.values.len();
        // SAFETY: within the capacity reserved just above; the length counts
        // the value once it is written. (A level's real, the commonest, is
        // written from its parts: copied whole just after the arithmetic
        // that made it stored them, it stalled, as in `hold`.)
        unsafe {
            let at = self.values.as_mut_ptr().add(n);
            match &v {
                Value::TapeReal(t, node, x) => {
                    std::ptr::write(at, Value::TapeReal(*t, *node, *x));
                    // (nothing to drop: a level's real owns nothing)
                    std::mem::forget(v);
                }
                _ => std::ptr::write(at, v),
            }
            self.values.set_len(n + 1);
        }
        self.len = n + 1;
        Some(self.len as i64)
    }

    /// The value a [`HELD`] value's bits stand for.
    fn held(&self, bits: i64) -> Option<&Value> {
        self.values.get(usize::try_from(bits).ok()?.checked_sub(1)?)
    }
}

/// `values` truncated to `len`, only the values that own something dropped
/// (most compiled code holds are a level's reals, which own nothing: the
/// call `Vec::truncate` makes for each was 9% of a saddle solve's samples).
#[inline(always)]
fn truncate_values(values: &mut Vec<Value>, len: usize) {
    let n = values.len();
    if n > len {
        // SAFETY: the length is lowered first; each value past it is dropped
        // once, or owns nothing.
        unsafe {
            values.set_len(len);
            crate::eval::drop_values(values.as_mut_ptr(), len, n);
        }
    }
}

/// Whether a loop's body makes values the machine holds for compiled code
/// ([`Made`]): pairs (`cons`, the walks `map` and `map2`), the results of
/// calls (of procedures globals or slots hold, which may be pairs, or values
/// held for it), and, where the code may hold values (`held`, a loop
/// compiled on its own), arithmetic on them ([`held_arith`]). Its calls of
/// itself then drop what it made that its variables no longer hold
/// ([`compact`]).
pub(crate) fn makes_values(b: &CBlock, held: bool) -> bool {
    let any = std::cell::Cell::new(false);
    visit(
        b,
        &mut |e| {
            let makes = match e {
                CExpr::Cons(..) | CExpr::App(..) | CExpr::AppArith(..) => true,
                CExpr::Prim(p, crate::resolve::CArgs::Tuple(_), _) => walk_lists(*p).is_some(),
                CExpr::Arith2(..) => held,
                _ => false,
            };
            any.set(any.get() | makes);
        },
        &mut |x| any.set(any.get() | matches!(x, CBind::PushApp(..) | CBind::PushArith(..))),
    );
    any.get()
}

/// How many values a loop's iterations may leave made (see [`Made`]) before
/// its call of itself drops those its variables no longer hold (see
/// [`compact`]): often enough that a long loop holds little (and frees what
/// it made while the memory is still in the cache), seldom enough that the
/// loop's variables are looked at only every few iterations.
pub(crate) const COMPACT_AFTER: usize = 1024;

/// Called by a loop's call of itself in code that makes values (see
/// [`makes_values`]), its variables' new values (`n`, a tag and bits each, at
/// `vars`) set, where more than [`COMPACT_AFTER`] values were made since the
/// loop was entered (`mark`, [`Made`]'s `len` then): drops those of them the
/// variables do not hold. Only its variables carry values from one iteration
/// to the next (what the body binds is bound again each time; what the code
/// around the loop made is below `mark`, untouched), so each pair a variable
/// holds is counted once more and held again (its bits, an address, stay the
/// same), each value held for the code ([`HELD`]) that a variable holds is
/// held again, its bits at `vars` rewritten to its new place (the code reads
/// its variables back), and the rest is dropped. Nothing is done where a
/// variable holds a value borrowed from a pair's part ([`OTHER`]), whose pair
/// might be one of those dropped.
///
/// # Safety
/// `m` must be the machine compiled code was entered with; `vars`, `n` pairs
/// of words, a pair's bits the address of a live pair.
pub(crate) unsafe extern "C" fn compact(m: *mut Machine, mark: i64, vars: *mut i64, n: i64) {
    // SAFETY: (the caller's)
    let made = unsafe { &mut (*m).jit_made };
    let (mark, n) = (mark as usize, n as usize);
    // (the code tests it before the call)
    debug_assert!(made.values.len() >= mark.saturating_add(COMPACT_AFTER));
    // SAFETY: (the caller's) `n` pairs of words at `vars`.
    let var = |i: usize| unsafe { (*vars.add(2 * i), *vars.add(2 * i + 1)) };
    if (0..n).any(|i| var(i).0 == OTHER) {
        return;
    }
    let mut keep: smallvec::SmallVec<[Value; 8]> = smallvec::SmallVec::new();
    // (each value held since `mark` that a variable holds: its bits, old and new)
    let mut moved: smallvec::SmallVec<[(i64, i64); 4]> = smallvec::SmallVec::new();
    for i in 0..n {
        match var(i) {
            // SAFETY: (the caller's) a pair's bits are a live pair's address.
            (PAIR, b) => keep.push(Value::Pair(unsafe { borrowed_pair(b) })),
            (HELD, b) if usize::try_from(b).is_ok_and(|k| k > mark) && !moved.iter().any(|m| m.0 == b) => {
                let Some(v) = made.held(b).cloned() else { return };
                keep.push(v);
                moved.push((b, (mark + keep.len()) as i64));
            }
            _ => {}
        }
    }
    // (the variables' new bits written once nothing can stop the compaction)
    for i in 0..n {
        if let (HELD, b) = var(i) {
            if let Some(&(_, to)) = moved.iter().find(|m| m.0 == b) {
                // SAFETY: (the caller's) `vars` is the code's, written here only.
                unsafe { *vars.add(2 * i + 1) = to };
            }
        }
    }
    truncate_values(&mut made.values, mark);
    made.values.extend(keep);
    made.len = made.values.len();
}

/// Called by compiled code for a call of a procedure value (a loop's, see
/// [`LoopEntry::called`]): `f` on `nargs` arguments (a tag and bits each, at
/// `args`), made by the evaluator as it makes a call of a closure a slot
/// holds (`Machine::call_closure_on`: its step and level counted there). Its
/// value, held where compiled code cannot take it apart (see [`HELD`]);
/// `FAIL` where `f` is not a closure, an argument is a value compiled code
/// does not hold, or the call fails (an error, a limit): the evaluator, which
/// runs the code's call again, makes it again and reports it. Input and
/// output are off during the call (`tape.no_io`), since a run that gives up
/// is run again: a call that reads or writes fails, and the evaluator makes
/// it.
///
/// # Safety
/// `m` must be the machine compiled code was entered with; `args`, `nargs`
/// pairs of words; a pair's bits, the address of a live pair.
pub(crate) unsafe extern "C" fn call_value(
    m: *mut Machine,
    ft: i64,
    fb: i64,
    nargs: i64,
    args: *const i64,
) -> Ret {
    const GAVE_UP: Ret = Ret { tag: FAIL, bits: 0 };
    // SAFETY: (the caller's)
    let m = unsafe { &mut *m };
    // (a procedure a slot holds, held for the code, or one a closure whose
    // body the code runs captured, see `closure_env`)
    if ft != HELD && ft != OTHER {
        return GAVE_UP;
    }
    // SAFETY: (the caller's) an `OTHER`'s bits are a live value's address.
    let Some(Value::Closure(inst, idx)) = (unsafe { value_of(m, ft, fb) }) else { return GAVE_UP };
    // (the arguments pushed where the call reads them, the commonest kinds
    // each made there in its own arm: see `Machine::push_with`)
    let n = nargs as usize;
    for i in 0..n {
        // SAFETY: compiled code passes `nargs` pairs of words at `args`.
        let (t, b) = unsafe { (*args.add(2 * i), *args.add(2 * i + 1)) };
        match t {
            // SAFETY: (the caller's) a pair's bits are a live pair's address.
            PAIR => m.push_with(|| Value::Pair(unsafe { borrowed_pair(b) })),
            REAL => m.push_with(|| Value::Real(f64::from_bits(b as u64))),
            // SAFETY: (the caller's) as above.
            _ => match unsafe { value_of(m, t, b) } {
                Some(v) => m.push(v),
                None => {
                    m.drop_pushed(i);
                    return GAVE_UP;
                }
            },
        }
    }
    VALUE_CALLS.set(VALUE_CALLS.get() + 1);
    let no_io = std::mem::replace(&mut m.tape.no_io, true);
    // (a panic must not unwind into compiled code: give up instead; the
    // evaluator, making the call again, meets it)
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let r = m.call_closure_pushed(&inst, idx, n);
        held_result(m, &r)
    }));
    m.tape.no_io = no_io;
    r.unwrap_or(GAVE_UP)
}

/// Called by compiled code for a call of primitive `p` (see [`prim_call_ok`])
/// on `nargs` arguments (a tag and bits each, at `args`): made as the
/// evaluator makes it (`Machine::prim_call`), with input and output off as
/// in [`call_value`]. Its value as [`call_value`] gives one; `FAIL` where an
/// argument is a value compiled code does not hold or the call fails (the
/// evaluator, running the code's work again, makes it again and reports it).
///
/// # Safety
/// As [`call_value`]'s.
pub(crate) unsafe extern "C" fn call_prim(m: *mut Machine, p: i64, nargs: i64, args: *const i64) -> Ret {
    const GAVE_UP: Ret = Ret { tag: FAIL, bits: 0 };
    // SAFETY: (the caller's)
    let m = unsafe { &mut *m };
    let n = nargs as usize;
    // (each argument written where it goes, in the arm that makes it: a
    // value made in parts and copied whole stalls, see `Machine::push_with`)
    let mut xs = [Value::Nil, Value::Nil, Value::Nil];
    for (i, x) in xs.iter_mut().take(n).enumerate() {
        // SAFETY: compiled code passes `nargs` pairs of words at `args`.
        let (t, b) = unsafe { (*args.add(2 * i), *args.add(2 * i + 1)) };
        // SAFETY (each write): over `()`, which owns nothing; a pair's bits
        // are a live pair's address, an `OTHER`'s a live value's (the
        // caller's).
        unsafe {
            match t {
                REAL => std::ptr::write(x, Value::Real(f64::from_bits(b as u64))),
                INT => std::ptr::write(x, Value::Int(b)),
                PAIR => std::ptr::write(x, Value::Pair(borrowed_pair(b))),
                HELD | OTHER => match held_ref(&m.jit_made, t, b) {
                    Some(v) => std::ptr::write(x, v.clone()),
                    None => return GAVE_UP,
                },
                _ => match rebox(t, b) {
                    Some(v) => std::ptr::write(x, v),
                    None => return GAVE_UP,
                },
            }
        }
    }
    let no_io = std::mem::replace(&mut m.tape.no_io, true);
    // (a panic must not unwind into compiled code, as in `call_value`)
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let r = m.prim_call(p as u16, &mut xs[..n]);
        held_result(m, &r)
    }));
    m.tape.no_io = no_io;
    drop(xs);
    r.unwrap_or(GAVE_UP)
}

/// The result of a call made for compiled code (`r`), as the code takes it:
/// a pair held as one it made (borrowed by the code), a value it cannot take
/// apart held ([`HELD`]); `FAIL` where too many are held, or the call failed
/// (then Ctrl-C, taken by the check that reported it, is left for the
/// evaluator to see again). Looked at where the call left it, not moved: the
/// value read whole just after the call stored it in parts stalled (in
/// [`call_prim`], 40% of its samples).
#[inline(always)]
fn held_result(m: &mut Machine, r: &crate::error::Result<Value>) -> Ret {
    const GAVE_UP: Ret = Ret { tag: FAIL, bits: 0 };
    match r {
        Ok(Value::Pair(p)) => {
            let at = Rc::as_ptr(p) as i64;
            if m.jit_made.hold(p.clone()) {
                Ret { tag: PAIR, bits: at }
            } else {
                GAVE_UP
            }
        }
        Ok(v) => match unbox(v) {
            Some((tag, bits)) => Ret { tag, bits },
            None => match m.jit_made.hold_value(v.clone()) {
                Some(bits) => Ret { tag: HELD, bits },
                None => GAVE_UP,
            },
        },
        Err(e) => {
            if e.kind == crate::error::ErrorKind::Limit && e.message == "interrupted" {
                m.interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            GAVE_UP
        }
    }
}

/// Called by a loop's compiled code before it runs the body of a closure's
/// lambda in place of a call of the closure (see [`spec_ok`]): where the
/// value called (`ft`, `fb`: a [`HELD`] one, or an [`OTHER`], a value a
/// closure captured) is a closure of `group` (the address of its `Group`),
/// the address of the values it captured (`Inst::env`, which the closure,
/// held while the code runs, keeps; never 0); else 0.
///
/// # Safety
/// `m` must be the machine compiled code was entered with; an `OTHER`'s
/// bits, the address of a live value.
pub(crate) unsafe extern "C" fn closure_env(m: *mut Machine, ft: i64, fb: i64, group: i64) -> i64 {
    // SAFETY: (the caller's)
    let env = unsafe { env_of(m, ft, fb, group) };
    if env != 0 {
        VALUE_CALLS.set(VALUE_CALLS.get() + 1);
        IN_PLACE_CALLS.set(IN_PLACE_CALLS.get() + 1);
    }
    env
}

/// [`closure_env`] for a call the resolved code runs in place where the
/// variable called holds a closure of a lambda (`resolve::Guard`), as the
/// evaluator does (not counted).
///
/// # Safety
/// As [`closure_env`]'s.
pub(crate) unsafe extern "C" fn guard_env(m: *mut Machine, ft: i64, fb: i64, group: i64) -> i64 {
    // SAFETY: (the caller's)
    unsafe { env_of(m, ft, fb, group) }
}

/// # Safety
/// As [`closure_env`]'s.
#[inline(always)]
unsafe fn env_of(m: *mut Machine, ft: i64, fb: i64, group: i64) -> i64 {
    // SAFETY: (the caller's)
    match unsafe { held_ref(&(*m).jit_made, ft, fb) } {
        Some(Value::Closure(inst, 0)) if Rc::as_ptr(&inst.group) as i64 == group => inst.env.as_ptr() as i64,
        _ => 0,
    }
}

/// Called by a loop's compiled code (one that may hold values, see
/// [`HELD`]) for arithmetic or a comparison (`op`, an `Op2` as a number) on
/// two values that are not both numbers it computes with: `op` as the
/// evaluator computes it on values it holds (`Machine::arith_values`: a
/// level's record for a real of a running level, as one a call returned).
/// The result as [`call_value`] gives a call's (a comparison's, a boolean);
/// `FAIL` where the operation fails (the evaluator, running the code's work
/// again, reports it) or an operand is a value compiled code does not hold.
///
/// # Safety
/// `m` must be the machine compiled code was entered with; a pair's bits,
/// the address of a live pair.
pub(crate) unsafe extern "C" fn held_arith(
    m: *mut Machine,
    op: i64,
    ta: i64,
    a: i64,
    tb: i64,
    b: i64,
) -> Ret {
    use crate::resolve::Op2;
    const GAVE_UP: Ret = Ret { tag: FAIL, bits: 0 };
    // SAFETY: (the caller's)
    let m = unsafe { &mut *m };
    let Some(op) = Op2::from_index(op) else { return GAVE_UP };
    // (a level's commonest operations, as `Machine::arith_values` computes
    // them first, on the operands where they are, its result taken apart
    // where it is made: moving the values in and out cost a stall each)
    if m.tape.active() && m.meter.is_none() && m.meter_derivative.is_none() {
        let (made, tapes) = (&mut m.jit_made, &mut m.tape);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let nil = || std::mem::ManuallyDrop::new(Value::Nil);
            let (mut tx, mut ty) = (nil(), nil());
            // SAFETY: (the caller's) a pair's bits are a live pair's address.
            let (Some(x), Some(y)) =
                (unsafe { operand(made, ta, a, &mut tx) }, unsafe { operand(made, tb, b, &mut ty) })
            else {
                return Some(GAVE_UP);
            };
            let v = crate::eval::level_op(tapes, op, x, y)?;
            Some(match unbox(&v) {
                Some((tag, bits)) if tag != PAIR => {
                    // (a number or a boolean: nothing to drop)
                    std::mem::forget(v);
                    Ret { tag, bits }
                }
                _ => match made.hold_value(v) {
                    Some(bits) => Ret { tag: HELD, bits },
                    None => GAVE_UP,
                },
            })
        }));
        match r {
            Ok(Some(r)) => return r,
            Ok(None) => {}
            Err(_) => return GAVE_UP,
        }
    }
    // SAFETY: (the caller's) a pair's bits are a live pair's address.
    let value = |m: &Machine, t: i64, b: i64| unsafe { value_of(m, t, b) };
    let (Some(x), Some(y)) = (value(m, ta, a), value(m, tb, b)) else { return GAVE_UP };
    // (a panic must not unwind into compiled code, as in `call_value`)
    let v = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.arith_values(op, x, y))) {
        Ok(Ok(v)) => v,
        _ => return GAVE_UP,
    };
    match unbox(&v) {
        Some((tag, bits)) if tag != PAIR => Ret { tag, bits },
        _ => match m.jit_made.hold_value(v) {
            Some(bits) => Ret { tag: HELD, bits },
            None => GAVE_UP,
        },
    }
}

/// [`value_of`], borrowed where the value is held ([`HELD`]) or is at an
/// address ([`OTHER`]), else made in `tmp`: a number, a boolean or `()`,
/// which own nothing (`tmp` is not dropped); `None` for a pair, on which
/// no arithmetic is made (the evaluator reports it).
///
/// # Safety
/// As [`value_of`]'s.
#[inline(always)]
unsafe fn operand<'a>(
    made: &'a Made,
    tag: i64,
    bits: i64,
    tmp: &'a mut std::mem::ManuallyDrop<Value>,
) -> Option<&'a Value> {
    match tag {
        // SAFETY: (the caller's)
        HELD | OTHER => unsafe { held_ref(made, tag, bits) },
        PAIR => None,
        _ => {
            // SAFETY: (the caller's)
            **tmp = unsafe { rebox(tag, bits) }?;
            Some(tmp)
        }
    }
}

/// The value of a tag and bits in compiled code (see [`rebox`]), a
/// [`HELD`] one's and an [`OTHER`]'s included (the value held, or at that
/// address); `None` for `FAIL`.
///
/// # Safety
/// `m` must be the machine compiled code was entered with; a pair's bits,
/// the address of a live pair; an `OTHER`'s, of a live pair's part.
#[inline(always)]
unsafe fn value_of(m: &Machine, tag: i64, bits: i64) -> Option<Value> {
    match tag {
        // SAFETY: (the caller's)
        HELD | OTHER => unsafe { held_ref(&m.jit_made, tag, bits) }.cloned(),
        // SAFETY: (the caller's)
        _ => unsafe { rebox(tag, bits) },
    }
}

/// The value a [`HELD`] value stands for (held in `made`) or an [`OTHER`]'s
/// (at its address), where it is; `None` for any other tag.
///
/// # Safety
/// An `OTHER`'s bits must be 0 or the address of a live value.
#[inline(always)]
unsafe fn held_ref(made: &Made, tag: i64, bits: i64) -> Option<&Value> {
    match tag {
        HELD => made.held(bits),
        // SAFETY: (the caller's)
        OTHER => (bits != 0).then(|| unsafe { &*(bits as *const Value) }),
        _ => None,
    }
}

/// `(cons a d)` of two values, a tag and bits each (a pair's borrowed, see
/// [`PAIR`], an `OTHER`'s and a `HELD`'s as [`value_of`] takes them): the
/// new pair's address, held by the machine's [`Made`]; 0 where too many are
/// held.
///
/// # Safety
/// As [`value_of`]'s.
pub(crate) unsafe extern "C" fn cons(m: *mut Machine, ta: i64, a: i64, td: i64, d: i64) -> i64 {
    // SAFETY: (the caller's)
    let (m, car, cdr) = unsafe { (&mut *m, value_of(&*m, ta, a), value_of(&*m, td, d)) };
    let (Some(car), Some(cdr)) = (car, cdr) else { return 0 };
    let p = crate::value::rc_build(|| Pair { car, cdr });
    let at = Rc::as_ptr(&p) as i64;
    if m.jit_made.hold(p) {
        at
    } else {
        0
    }
}

/// Adds a value (a tag and bits) to a list a walk builds, first element
/// first: `tail` is where the list built so far ends (the cdr of its last
/// pair), 0 while it is empty. Gives the new end, and the list's first pair
/// (held by the machine's [`Made`]) where it was empty; `(0, 0)` where too
/// many are held.
///
/// # Safety
/// As [`cons`]'s; `tail`, 0 or what this returned last for the same list.
pub(crate) unsafe extern "C" fn snoc(m: *mut Machine, tail: i64, t: i64, x: i64) -> Ret {
    // (a real, the commonest, written in place in its own arm: a value
    // `value_of` gives is made on the stack in parts and copied whole, a
    // load the processor cannot forward from those stores, which stalls it)
    let mut p = if t == REAL {
        crate::value::rc_build(|| Pair { car: Value::Real(f64::from_bits(x as u64)), cdr: Value::Nil })
    } else {
        // SAFETY: (the caller's)
        let Some(v) = (unsafe { value_of(&*m, t, x) }) else { return Ret { tag: 0, bits: 0 } };
        crate::value::rc_build(|| Pair { car: v, cdr: Value::Nil })
    };
    let end = match Rc::get_mut(&mut p) {
        Some(q) => &mut q.cdr as *mut Value as i64,
        None => return Ret { tag: 0, bits: 0 },
    };
    if tail == 0 {
        let first = Rc::as_ptr(&p) as i64;
        // SAFETY: (the caller's)
        if !unsafe { (*m).jit_made.hold(p) } {
            return Ret { tag: 0, bits: 0 };
        }
        return Ret { tag: first, bits: end };
    }
    // SAFETY: `tail` is the cdr of the last pair of a list being built, made
    // here (as `ListBuilder`'s end): reachable only through its first pair,
    // which `Made` holds and nothing reads until the list is whole; it
    // holds `()`, so overwriting it leaks nothing.
    unsafe { std::ptr::write(tail as *mut Value, Value::Pair(p)) };
    Ret { tag: 0, bits: end }
}

/// How compiled code reads a pair's parts itself, where `Value`'s layout
/// (a Rust enum's, the compiler's to choose) is the one expected: a byte
/// telling the kind first, an integer's, a real's and a pair's word at 8
/// (a pair's a fixed distance from its address), a boolean at 1 (found by looking at values of each kind, see
/// [`pair_layout`]). Each part's tag is this table's entry for its first
/// byte (`OTHER` for the kinds compiled code does not take apart).
pub(crate) struct PairLayout {
    pub tags: [u8; 256],
    pub car: i32,
    pub cdr: i32,
    /// What a pair's address (`Rc::as_ptr`) is past the word its value holds.
    pub pair: i64,
}

/// The [`PairLayout`], `None` where values are not laid out as it expects
/// (compiled code then calls [`uncons`]).
pub(crate) fn pair_layout() -> Option<&'static PairLayout> {
    static LAYOUT: std::sync::OnceLock<Option<PairLayout>> = std::sync::OnceLock::new();
    LAYOUT.get_or_init(probe_layout).as_ref()
}

fn probe_layout() -> Option<PairLayout> {
    if std::mem::size_of::<Value>() != 16 || std::mem::align_of::<Value>() != 8 {
        return None;
    }
    let at = |v: &Value| v as *const Value as *const u8;
    // SAFETY: a value is 16 bytes; of the values looked at, byte 0 holds the
    // kind, byte 1 a boolean, bytes 8 to 15 a word (checked below: of two
    // values of a kind, the first bytes agree, and the contents are there).
    let first = |v: &Value| unsafe { *at(v) };
    let second = |v: &Value| unsafe { *at(v).add(1) };
    let word = |v: &Value| unsafe { (at(v).add(8) as *const i64).read() };
    let p = Rc::new(Pair { car: Value::Nil, cdr: Value::Nil });
    let pair = Value::Pair(p.clone());
    let (i1, i2, r1, r2) = (Value::Int(3), Value::Int(-5), Value::Real(1.5), Value::Real(-0.25));
    let (f, t) = (Value::Bool(false), Value::Bool(true));
    let kinds = [
        (first(&i1), INT),
        (first(&r1), REAL),
        (first(&f), BOOL),
        (first(&Value::Nil), NIL),
        (first(&pair), PAIR),
    ];
    let ok = first(&i1) == first(&i2)
        && (word(&i1), word(&i2)) == (3, -5)
        && first(&r1) == first(&r2)
        && (word(&r1), word(&r2)) == (1.5f64.to_bits() as i64, (-0.25f64).to_bits() as i64)
        && first(&f) == first(&t)
        && (second(&f), second(&t)) == (0, 1)
        && first(&pair) == first(&Value::Pair(Rc::new(Pair { car: Value::Nil, cdr: Value::Nil })))
        && kinds.iter().enumerate().all(|(i, a)| kinds[..i].iter().all(|b| a.0 != b.0));
    if !ok {
        return None;
    }
    let mut tags = [OTHER as u8; 256];
    for (byte, tag) in kinds {
        tags[byte as usize] = tag as u8;
    }
    Some(PairLayout {
        tags,
        car: std::mem::offset_of!(Pair, car) as i32,
        cdr: std::mem::offset_of!(Pair, cdr) as i32,
        pair: Rc::as_ptr(&p) as i64 - word(&pair),
    })
}

/// Runs the call of `lam` whose `nargs` arguments are at `base` on the value
/// stack (its step and level counted already) in compiled code, leaving its
/// result at `base`: true if it did. Counts the entry down, and compiles the
/// procedure when the count runs out. False where the call is to run in the
/// evaluator: not compiled (yet, or ever), arguments the code does not take,
/// metering, or the code gave up (then the counts are as they were).
#[inline(never)]
pub(crate) fn run(m: &mut Machine, base: usize, lam: &LambdaCode, nargs: usize) -> bool {
    if m.jit_after == 0 || m.meter.is_some() {
        return false;
    }
    let Some(state) = count_down(m, &lam.jit, |m| codegen::compile(m, lam)) else { return false };
    // SAFETY: a state above COUNTING is an entry's address; entries are
    // never freed (see `codegen::compile`).
    let entry = unsafe { &*(state as *const Entry) };
    if nargs != entry.arity {
        return false;
    }
    let mut args = [(0i64, 0i64); MAX_ARITY];
    for (i, a) in args.iter_mut().take(nargs).enumerate() {
        match unbox(&m.stack[base + i]) {
            Some(x) => *a = x,
            None => return false,
        }
    }
    // SAFETY: (the arguments are on the stack, held there during the call)
    match unsafe { run_entry(m, lam, entry, &args) } {
        Some(v) => {
            m.stack.truncate(base);
            m.stack.push(v);
            true
        }
        None => false,
    }
}

/// [`run`] of a call of `lam` (its step and level counted) whose `nargs`
/// arguments, unboxed (`unbox`), are `args`, the evaluator holding their
/// values where they are (a call run in place, see
/// `Machine::run_inline_compiled`): its value if the compiled code ran it,
/// `None` where the call is to run in the evaluator (as for `run`). Only for
/// a procedure compiled already.
///
/// # Safety
/// A pair among `args` must be held by a value that lives through the call.
#[inline(never)]
pub(crate) unsafe fn run_in_place(
    m: &mut Machine,
    lam: &LambdaCode,
    nargs: usize,
    args: &[(i64, i64); MAX_ARITY],
) -> Option<Value> {
    if m.jit_after == 0 || m.meter.is_some() || !has_entry(&lam.jit) {
        return None;
    }
    // SAFETY: as in `run`.
    let entry = unsafe { &*(lam.jit.get() as *const Entry) };
    if nargs != entry.arity {
        return None;
    }
    // SAFETY: (the caller's)
    unsafe { run_entry(m, lam, entry, args) }
}

/// The call of `entry`'s code (compiled for `lam`) on `args`: its result, or
/// `None` where it is not made (the native stack's bounds unknown, a global
/// it calls redefined) or the code gave up (the counts then set back, and
/// `lam` not entered in compiled code again).
///
/// # Safety
/// A pair among `args` must be held by a value that lives through the call.
#[inline(always)]
unsafe fn run_entry(
    m: &mut Machine,
    lam: &LambdaCode,
    entry: &Entry,
    args: &[(i64, i64); MAX_ARITY],
) -> Option<Value> {
    // (native stack bounds unknown here: the code would give up at its first call)
    if !m.native_stack_ok() {
        return None;
    }
    if !held(m, &entry.deps) {
        return None;
    }
    let saved = m.jit_counts();
    let made = m.jit_made.values.len();
    // SAFETY: the code was compiled for this arity; it reads and writes only
    // the machine's counts and what it made (and calls `tick`, `deeper` and
    // the functions that make pairs).
    let (tag, bits) = unsafe { call_code(entry.code, entry.arity, m, args) };
    RUNS.set(RUNS.get() + 1);
    // SAFETY: a pair returned is part of the arguments, held by the caller,
    // or one the code made, held until `release`.
    let v = unsafe { rebox(tag, bits) };
    m.jit_made.release(made);
    let Some(v) = v else {
        m.set_jit_counts(saved);
        lam.jit.set(NEVER);
        return None;
    };
    Some(v)
}

/// Runs the rest of a named `let`'s loop `lp` in compiled code, from its
/// body with the frame at `base` as the evaluator has just set it for an
/// iteration (counted already): its value if it did. Counts the iteration
/// down, and compiles the loop when the count runs out. `None` where the
/// loop is to go on in the evaluator: not compiled (yet, or ever), values
/// the code does not take, metering, or the code gave up (then the counts
/// are as they were, and the evaluator runs the iteration from its start).
#[inline(never)]
pub(crate) fn run_loop(m: &mut Machine, base: usize, lp: &Loop) -> Option<Value> {
    if m.jit_after == 0 || m.meter.is_some() {
        return None;
    }
    let state = count_down(m, &lp.jit, |m| codegen::compile_loop(m, lp, base))?;
    // SAFETY: a state above COUNTING is a loop entry's address; entries are
    // never freed (see `codegen::compile_loop`).
    let entry = unsafe { &*(state as *const LoopEntry) };
    // (code calling procedures through the evaluator may run where levels
    // of AD are, those calls and its arithmetic on their reals recording
    // on them; giving up, it is run again from here, so what they recorded
    // is forgotten first)
    let calls = !entry.called.is_empty();
    let levels = m.tape.active();
    if calls && levels && entry.not_on_levels.get() {
        return None;
    }
    let mut args = [(0i64, 0i64); MAX_INPUTS];
    for (i, (a, s)) in args.iter_mut().zip(entry.inputs.iter()).enumerate() {
        let v = m.stack.get(base + *s as usize)?;
        *a = match unbox(v) {
            Some(x) => x,
            // (a procedure it calls, or a real of a level, held below)
            None if calls && (entry.called[i] || v.is_active()) => (HELD, 0),
            None => return None,
        };
    }
    if !m.native_stack_ok() || !held(m, &entry.deps) {
        return None;
    }
    let saved = m.jit_counts();
    let made = m.jit_made.values.len();
    if calls {
        // (the procedures it calls, held for it)
        for (a, s) in args.iter_mut().zip(entry.inputs.iter()) {
            if a.0 == HELD {
                let v = m.stack[base + *s as usize].clone();
                match m.jit_made.hold_value(v) {
                    Some(bits) => a.1 = bits,
                    None => {
                        m.jit_made.release(made);
                        return None;
                    }
                }
            }
        }
    }
    let marks = (calls && levels).then(|| m.tape.marks());
    // (and the calls that gave way to the transform, whose calls would
    // skip the tape the second time: see `Tapes::begin_journal`)
    let journal = calls.then(|| m.tape.begin_journal());
    type F = extern "C" fn(*mut Machine, *const (i64, i64)) -> Ret;
    // SAFETY: the code was compiled for its inputs, which it reads from
    // `args`; it reads and writes only the machine's counts and what it made
    // (and calls `tick`, `deeper` and the functions that make pairs).
    let (tag, bits) = unsafe { std::mem::transmute::<*const u8, F>(entry.code)(m, args.as_ptr()) }.into();
    RUNS.set(RUNS.get() + 1);
    // SAFETY: a pair returned is part of the inputs, still in the frame, or
    // one the code made, held until `release`.
    let v = unsafe { value_of(m, tag, bits) };
    m.jit_made.release(made);
    if let Some(j) = journal {
        m.tape.end_journal(j, v.is_none());
    }
    if v.is_none() {
        m.set_jit_counts(saved);
        match &marks {
            Some(marks) => {
                m.tape.rewind(marks);
                entry.not_on_levels.set(true);
            }
            None => lp.jit.set(NEVER),
        }
    }
    v
}

/// The code of a closure's lambda whose body is of the kind [`spec_ok`]
/// takes, run on the values a call passes (see [`run_closure`]).
pub struct ClosureEntry {
    code: *const u8,
    arity: usize,
    /// The groups whose lambdas the code runs in place of calls of their
    /// closures (as [`LoopEntry`]'s).
    _expected: Box<[Rc<crate::anf::Group>]>,
}

impl ClosureEntry {
    pub(crate) fn new(code: *const u8, arity: usize, expected: Vec<Rc<crate::anf::Group>>) -> ClosureEntry {
        ClosureEntry { code, arity, _expected: expected.into() }
    }
}

/// Runs a call of closure `inst` (of `lam`, its step and level counted, its
/// `nargs` arguments on the stack from `base`) in compiled code: true if it
/// did (its value then at `base`, the arguments gone). Counts the call
/// down, and compiles the lambda's body when the count runs out, for the
/// values the closure called then captured: where one of them is a closure
/// the body calls, the body of its lambda is run in place of such a call
/// where the value captured then is a closure of the same lambda (see
/// [`spec_ok`]). The arguments may be anything: what compiled code cannot
/// take apart it holds ([`HELD`]), and it has the evaluator compute with
/// it ([`held_arith`]: a level's reals, as a function run on a level of AD
/// meets them) or make its calls ([`call_value`]). False where the call is
/// to run in the evaluator: not compiled (yet, or ever), metering, or the
/// code gave up; then the counts are as they were, what the levels
/// recorded meanwhile is forgotten, and the lambda is not entered in
/// compiled code again.
#[inline(never)]
pub(crate) fn run_closure(
    m: &mut Machine,
    base: usize,
    inst: &InstRc,
    lam: &LambdaCode,
    nargs: usize,
) -> bool {
    if m.jit_after == 0 || m.meter.is_some() {
        return false;
    }
    let Some(state) = count_down(m, &lam.closure_jit, |m| codegen::compile_closure(m, lam, inst, nargs))
    else {
        return false;
    };
    // SAFETY: a state above COUNTING is a closure entry's address; entries
    // are never freed (see `codegen::compile_closure`).
    let entry = unsafe { &*(state as *const ClosureEntry) };
    if nargs != entry.arity || !m.native_stack_ok() {
        return false;
    }
    let made = m.jit_made.values.len();
    let mut args = [(0i64, 0i64); MAX_ARITY];
    for (i, a) in args.iter_mut().take(nargs).enumerate() {
        let v = &m.stack[base + i];
        *a = match unbox(v) {
            Some(x) => x,
            // (held, not borrowed where it is: the stack may move as the
            // code's calls push on it)
            None => match m.jit_made.hold_value(v.clone()) {
                Some(bits) => (HELD, bits),
                None => {
                    m.jit_made.release(made);
                    return false;
                }
            },
        };
    }
    let saved = m.jit_counts();
    // (as in `run_loop`: what the levels record for it, and the calls that
    // gave way to the transform, undone where it gives up)
    let marks = m.tape.active().then(|| m.tape.marks());
    let journal = m.tape.begin_journal();
    type F = extern "C" fn(*mut Machine, i64, *const (i64, i64)) -> Ret;
    let env = inst.env.as_ptr() as i64;
    // SAFETY: the code was compiled for this lambda, whose closure's captured
    // values are at `env` (held by the caller, as `inst` is) and its
    // arguments at `args`; it reads and writes only the machine's counts and
    // what it made (and calls the functions `run_loop`'s code calls).
    let (tag, bits) =
        unsafe { std::mem::transmute::<*const u8, F>(entry.code)(m, env, args.as_ptr()) }.into();
    RUNS.set(RUNS.get() + 1);
    // SAFETY: a pair returned is part of the arguments, on the stack, or of
    // the captured values, or one the code made, held until `release`.
    let v = unsafe { value_of(m, tag, bits) };
    m.jit_made.release(made);
    m.tape.end_journal(journal, v.is_none());
    match v {
        Some(v) => {
            CLOSURE_RUNS.set(CLOSURE_RUNS.get() + 1);
            m.stack.truncate(base);
            m.stack.push(v);
            true
        }
        None => {
            m.set_jit_counts(saved);
            if let Some(marks) = &marks {
                m.tape.rewind(marks);
            }
            lam.closure_jit.set(NEVER);
            false
        }
    }
}

/// Whether the globals compiled code calls still hold the procedures it was
/// compiled with.
fn held(m: &Machine, deps: &[(u32, InstRc)]) -> bool {
    deps.iter().all(|(g, want)| {
        matches!(m.globals.get(*g as usize).map(|x| &x.state),
                 Some(GState::Value(Value::Closure(i, 0))) if InstRc::ptr_eq(i, want))
    })
}

thread_local! {
    static RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The entries into compiled code made on this thread so far (those that
/// gave up included): for tests that must know the code ran.
pub fn runs() -> u64 {
    RUNS.get()
}

thread_local! {
    static VALUE_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calls of procedure values made from compiled code on this thread so
/// far, by the evaluator ([`call_value`]) or with the bodies of their
/// closures' lambdas run in place ([`spec_ok`]): for tests.
pub fn value_calls() -> u64 {
    VALUE_CALLS.get()
}

thread_local! {
    static IN_PLACE_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Those of [`value_calls`] whose closures' lambdas' bodies compiled code
/// ran in place ([`closure_env`]): for tests.
pub fn in_place_calls() -> u64 {
    IN_PLACE_CALLS.get()
}

thread_local! {
    static CLOSURE_RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calls of closures the evaluator made whose lambdas' bodies ran in
/// compiled code to their end ([`run_closure`]) on this thread so far: for
/// tests.
pub fn closure_runs() -> u64 {
    CLOSURE_RUNS.get()
}

/// Whether a procedure's or a loop's state holds its entry's address.
#[inline(always)]
fn has_entry(state: &std::cell::Cell<usize>) -> bool {
    state.get() > COUNTING
}

/// Whether `lam` has compiled code.
pub fn is_compiled(lam: &LambdaCode) -> bool {
    has_entry(&lam.jit)
}

/// Whether loop `lp` has compiled code of its own (see [`run_loop`]).
#[inline(always)]
pub(crate) fn loop_compiled(lp: &Loop) -> bool {
    has_entry(&lp.jit)
}

/// What compiled code returns: a tag and bits, in two registers.
#[repr(C)]
pub(crate) struct Ret {
    tag: i64,
    bits: i64,
}

impl From<Ret> for (i64, i64) {
    fn from(r: Ret) -> (i64, i64) {
        (r.tag, r.bits)
    }
}

/// Calls compiled code of `nargs` arguments (the first `nargs` of `args`).
///
/// # Safety
/// `code` must be compiled code of that many arguments.
unsafe fn call_code(
    code: *const u8,
    nargs: usize,
    m: *mut Machine,
    args: &[(i64, i64); MAX_ARITY],
) -> (i64, i64) {
    let [a, b, c, d] = *args;
    type F1 = extern "C" fn(*mut Machine, i64, i64) -> Ret;
    type F2 = extern "C" fn(*mut Machine, i64, i64, i64, i64) -> Ret;
    type F3 = extern "C" fn(*mut Machine, i64, i64, i64, i64, i64, i64) -> Ret;
    type F4 = extern "C" fn(*mut Machine, i64, i64, i64, i64, i64, i64, i64, i64) -> Ret;
    // SAFETY: (the caller's) compiled code has this signature for its arity.
    unsafe {
        match nargs {
            1 => std::mem::transmute::<*const u8, F1>(code)(m, a.0, a.1),
            2 => std::mem::transmute::<*const u8, F2>(code)(m, a.0, a.1, b.0, b.1),
            3 => std::mem::transmute::<*const u8, F3>(code)(m, a.0, a.1, b.0, b.1, c.0, c.1),
            _ => std::mem::transmute::<*const u8, F4>(code)(m, a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1),
        }
        .into()
    }
}

/// Called by compiled code where the native stack has no room for a call
/// (`Machine::native_stack_ok`): makes the call of `code` (`nargs`
/// arguments, a tag and bits each, at `args`) on a new segment of stack,
/// as the evaluator continues there (`Machine::call_loop_grow`). Gives up
/// where there is no memory for one (the evaluator, running the call again,
/// reports it).
pub(crate) extern "C" fn deeper(m: *mut Machine, code: *const u8, nargs: i64, args: *const i64) -> Ret {
    let nargs = nargs as usize;
    let mut a = [(0i64, 0i64); MAX_ARITY];
    for (i, x) in a.iter_mut().take(nargs).enumerate() {
        // SAFETY: compiled code passes `nargs` pairs of words at `args`.
        *x = unsafe { (*args.add(2 * i), *args.add(2 * i + 1)) };
    }
    if !crate::stack::can_grow(crate::eval::RED_ZONE) {
        return Ret { tag: FAIL, bits: 0 };
    }
    // SAFETY: as in `tick`.
    let m = unsafe { &mut *m };
    // (a panic must not unwind into compiled code: give up instead)
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::eval::grow_native_stack(
            m,
            |m| m,
            |m| {
                // SAFETY: compiled code passes a callee's code and its arity.
                unsafe { call_code(code, nargs, m, &a) }
            },
        )
    }));
    let (tag, bits) = r.unwrap_or((FAIL, 0));
    Ret { tag, bits }
}

/// Called by compiled code when a step finds the countdown of
/// [`Machine::tick`] run out: 0 to go on, else to give up (a limit reached:
/// the evaluator, running the call again, reports it).
pub(crate) extern "C" fn tick(m: *mut Machine) -> i64 {
    // SAFETY: compiled code passes the machine it was entered with, which
    // `run` holds mutably while the code runs.
    let m = unsafe { &mut *m };
    // (a panic must not unwind into compiled code: give up instead)
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| !m.jit_tick_ok())).unwrap_or(true) as i64
}

/// Counts an entry (or an iteration) of the procedure or loop whose state
/// is `state` down: the state where it holds an entry's address; else
/// `None`, after `build` is run (with the state set to [`NEVER`], which
/// `build` replaces by the entry it makes) where the count has run out.
fn count_down(
    m: &mut Machine,
    state: &std::cell::Cell<usize>,
    build: impl FnOnce(&mut Machine),
) -> Option<usize> {
    count_down_by(m, state, 1, build)
}

/// [`count_down`] by `k` entries at once.
fn count_down_by(
    m: &mut Machine,
    state: &std::cell::Cell<usize>,
    k: u64,
    build: impl FnOnce(&mut Machine),
) -> Option<usize> {
    let s = state.get();
    if has_entry(state) {
        return Some(s);
    }
    if s as u64 <= k {
        state.set(NEVER);
        // (Cranelift's passes take more stack than the evaluator's red zone
        // leaves, in a debug build)
        stacker::maybe_grow(4 << 20, 16 << 20, || build(m));
    } else {
        state.set(s - k as usize);
    }
    None
}

/// Counts `steps` entries of `lam` down (see [`run`]): the steps a call of
/// it run in place took in the evaluator, its loop's iterations included
/// (see `resolve::Inline::callee`), so that a procedure whose calls loop is
/// compiled once the evaluator has spent on them about what as many calls
/// of a small procedure cost. Compiles it where the count runs out.
pub(crate) fn count_in_place(m: &mut Machine, lam: &LambdaCode, steps: u64) {
    if m.jit_after != 0 && m.meter.is_none() && lam.jit.get() != NEVER {
        count_down_by(m, &lam.jit, steps.max(1), |m| codegen::compile(m, lam));
    }
}

/// The procedure a global holds, if compiled code may call it with `n`
/// arguments: its instance and its code (resolved now if it was not yet).
pub(crate) fn callee(m: &mut Machine, g: u32, n: usize) -> Option<(InstRc, *const LambdaCode)> {
    let inst = match m.globals.get(g as usize).map(|x| &x.state) {
        Some(GState::Value(Value::Closure(i, 0))) => i.clone(),
        _ => return None,
    };
    let code = m.group_code(&inst.group).ok()?;
    if initial(&inst.group, code, 1) == NEVER {
        return None;
    }
    let lam = &code.members[0];
    if arity(lam) != Some(n) {
        return None;
    }
    let lam = lam as *const LambdaCode;
    Some((inst, lam))
}
