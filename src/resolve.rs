//! Resolution: turns a group's A-normal form into runnable code in which every
//! variable is a frame slot, a captured-environment index, a sibling of a
//! recursive group, a global, or a constant. No names are looked up at run time.

use crate::anf::{Args, Atom, Bind, Block, Expr, GlobalId, Group, Lambda, VarId};
use crate::prims::PrimId;
use crate::source::Span;
use crate::value::Value;
use rustc_hash::{FxHashMap, FxHashSet};
use std::rc::Rc;

/// An operand. (A tag of its own, not one folded into a constant's: reading
/// an operand is then one plain dispatch.)
#[derive(Clone)]
#[repr(u8)]
pub enum CAtom {
    Local(u32),
    Env(u32),
    Sibling(u32),
    Global(u32),
    Const(Value),
}

#[repr(u8)]
pub enum CArgs {
    One(CAtom),
    Tuple(Box<[CAtom]>),
}

impl CArgs {
    /// The arguments, in order.
    pub fn atoms(&self) -> &[CAtom] {
        match self {
            CArgs::One(x) => std::slice::from_ref(x),
            CArgs::Tuple(xs) => xs,
        }
    }
}

#[repr(u8)]
pub enum CExpr {
    Atom(CAtom),
    /// A binary arithmetic or comparison primitive on two operands, with an
    /// inline fast path for machine integers and doubles.
    Arith2(Op2, CAtom, CAtom, PrimId, Span),
    /// [`CExpr::Arith2`] of a slot and an exact integer constant (`(- n 1)`):
    /// no dispatch on the kinds of the operands.
    Arith2Int(Op2, u32, i64, PrimId, Span),
    /// A call. The last field is for a call in tail position (see [`Moves`]).
    App(CAtom, CArgs, Span, Moves),
    /// A call of one argument that the binding before it computed by
    /// arithmetic and that nothing else reads (see [`AppArith`]).
    AppArith(Box<AppArith>),
    Prim(PrimId, CArgs, Span),
    /// `(cons a d)`; bit 0 (1): `a` is a slot of the frame read nowhere after,
    /// whose value is moved into the pair (the slot emptied), as bit 1 (2)
    /// says of `d`.
    Cons(CAtom, CAtom, u8),
    Closure(Rc<Group>, Box<[CAtom]>),
    If(Cond, Box<CBlock>, Box<CBlock>),
    MakeEnvSens(Rc<Group>, u32, Box<[CAtom]>),
    MakeEnvSensLike(CAtom, Box<[CAtom]>),
    /// A tag primitive (`sensitize`, `unperturb`, `*j`...) on one operand, with
    /// an inline fast path for a real under tags; the primitive otherwise.
    Retag(Retag, CAtom, PrimId, Span),
    /// `plus` of two operands, with an inline fast path for reals under the
    /// same tags; the primitive otherwise.
    Plus(CAtom, CAtom, PrimId, Span),
    /// `(unsensitize (bp (sensitize x)))`, the reverse transform's call of a
    /// backpropagator (the two intermediate values read nowhere else): run
    /// natively when `bp` is a scalar primitive's backpropagator, step by step
    /// otherwise.
    BpCall(Box<BpCall>),
    /// A call of a small procedure held by a global, its body resolved in
    /// the caller's frame (see [`Inline`]).
    Inline(Box<Inline>),
    /// A call of a variable bound to a lambda run in place as
    /// [`CExpr::Inline`] runs a global's, where the variable holds it (see
    /// [`Guard`]).
    Guarded(Box<Guard>),
    /// A named `let`'s loop entered, in the frame of the procedure it is in
    /// (see [`Loop`]). In tail position, or as a binding's value (a loop run
    /// as an inner block, see `Resolver::inner_loop_at`).
    Loop(Box<Loop>),
    /// The innermost [`Loop`]'s procedure called again (a call of it in tail
    /// position of its body): its variables set, its body run from the top.
    Again(Box<Again>),
}

/// A procedure bound by a `letrec` of its own (a named `let`'s loop) that is
/// only ever called, never used as a value: by the `letrec`'s body, once (in
/// tail position of a procedure's body, or as the value of a binding after
/// which the procedure goes on: a loop run as an inner block), and by itself
/// in tail position of its own body, each call with the same number of
/// arguments. It is then run as
/// a loop in the frame of the procedure it is in (its variables in slots of
/// that frame, the values it captures read where they are) instead of as a
/// closure that each iteration calls: no closure built, no frame pushed and
/// dropped. Each entry counts as the call would (a step for `--max-steps` and
/// `--metered`); an error in the loop names it and where it was called last,
/// as that call's frame would have been named (see `Resolver::loop_plan`).
pub struct Loop {
    /// The first call's arguments, and those of them that may be moved.
    pub init: CArgs,
    pub init_moves: Moves,
    /// Whether the first call's arguments may be stored one by one (see
    /// [`Again::in_order`]).
    pub init_in_order: bool,
    /// The slots of the loop's variables (its parameter, or the parts of the
    /// tuple it destructures at once), in order.
    pub params: Box<[u32]>,
    /// The other slots of the frame but those of values the loop captures:
    /// emptied once the first call's arguments are read, as a tail call
    /// drops the frame it leaves (what the procedure held but no longer
    /// reads is not kept while the loop runs).
    pub dead: Box<[u32]>,
    /// The slots the frame needs while the loop runs (its body's and its
    /// branches', and the `dead` ones).
    pub frame: u32,
    pub body: CBlock,
    pub name: Rc<str>,
    /// Where the first call is (unknown for a procedure's own loop).
    pub site: Span,
    /// A procedure defined at the top level that calls itself in tail
    /// position, run as a loop in its own frame (see
    /// `Resolver::self_loop_plan`): entered by the procedure's call, its
    /// variables the procedure's parameters (no step counted, nothing set
    /// or emptied on entry).
    pub entered: bool,
    /// A named `let`'s loop whose first call is in tail position of a call
    /// run in place (`Inline`), run as an inner block: that call is a tail
    /// call of the procedure run in place, so entering the loop takes no
    /// level, and an error in it names it where it was called last, as a
    /// procedure reached by a tail call is named (see `mark_tail_loops`).
    pub in_place_tail: bool,
    /// Its state for the tier of compiled code, as a procedure's
    /// ([`LambdaCode::jit`]): a named `let`'s loop whose iterations are
    /// counted goes on in compiled code once compiled (`jit::run_loop`).
    pub jit: std::cell::Cell<usize>,
}

/// A call of the innermost [`Loop`] (see [`CExpr::Again`]).
pub struct Again {
    pub args: CArgs,
    /// For a procedure's call of itself through the global that holds it
    /// (a loop with [`Loop::entered`]): that global. The call is run as an
    /// iteration only while the global holds the running procedure (a
    /// later definition may replace it); else it is made.
    pub global: Option<GlobalId>,
    /// The arguments that may be moved (the loop's own variables: the
    /// values it captures are read again by the next iteration).
    pub moves: Moves,
    /// The arguments an iteration stores (those not in their variables'
    /// slots already: see `Resolver::prefer`), and those of them that may
    /// be moved.
    pub set: CArgs,
    pub set_moves: Moves,
    /// The slots of the loop's variables (see [`Loop::params`]) that `set`
    /// goes to.
    pub params: Box<[u32]>,
    /// Whether each argument of `set` may be stored in its variable before
    /// the next is read: none is a slot of a variable set before it (else
    /// they are all read first).
    pub in_order: bool,
    /// The slots the loop's body binds before this call, but its variables'
    /// and the arguments moved: emptied once the arguments are read (an
    /// iteration's values are not kept while the next runs). (A slot bound
    /// only on another path is emptied by the call ending that path, or by
    /// the frame's end.)
    pub clear: Box<[u32]>,
    pub site: Span,
}

/// Whether the arguments of a call of a loop may be stored in its variables
/// (`params`) one by one (see [`Again::in_order`]).
fn in_order(args: &CArgs, params: &[u32]) -> bool {
    let xs = args.atoms();
    xs.iter().enumerate().all(|(j, x)| !matches!(x, CAtom::Local(s) if params[..j].contains(s)))
}

/// A call of a small procedure defined at the top level (`(sqr x)`, `(v- u
/// v)`), its body run in the caller's frame (its variables in slots of the
/// caller's) instead of through a call: no frame pushed and dropped, no
/// arguments passed. It counts as the call would (a step for `--max-steps`
/// and `--metered`, a level for `--max-depth` unless it is in tail position),
/// and an error in it names the procedure and the call site as the call's
/// would. What may be so run: see `Resolver::inline_call`.
///
/// A call of a variable bound by a `let` to a lambda that captures nothing
/// (`(let ((f (lambda (x y) ...))) ... (f a b) ...)`, the call in that
/// lambda's scope, in a procedure built there too) runs in place the same
/// way, behind a [`Guard`] ([`CExpr::Guarded`]).
pub struct Inline {
    pub body: CBlock,
    pub name: Rc<str>,
    pub site: Span,
    /// In the caller's tail position (the call would have replaced the
    /// caller's frame: no level counted).
    pub tail: bool,
    /// The procedure run, with the call's operands, where a global's whose
    /// body holds a loop (as a dot product's) or a walk calling a procedure
    /// (`jit::runs_long`) is run in place: the
    /// evaluator calls its compiled code instead once it has some (see
    /// `Machine::run_inline`), as a call of it would.
    pub callee: Option<Box<InlineCallee>>,
}

/// The procedure a call run in place runs, and the call's operands (see
/// [`Inline::callee`]).
pub struct InlineCallee {
    pub group: Rc<Group>,
    pub args: Box<[CAtom]>,
}

/// A call of a variable run in place (see [`Inline`]) where the variable
/// holds a closure of the lambda whose body is run there. (It does unless
/// the closure reading it was rebuilt with other values, as `%with-env` or
/// an AD operation's lazy zero rebuilds one.)
pub struct Guard {
    /// The variable called.
    pub callee: CAtom,
    /// The lambda (a group of one procedure that captures nothing).
    pub group: Rc<Group>,
    /// The call, made where the variable holds anything else.
    pub call: CExpr,
    /// The call run in place.
    pub inline: Inline,
}

impl Guard {
    /// Whether `v`, the variable's value, is a closure of the lambda.
    #[inline(always)]
    pub fn holds(&self, v: &Value) -> bool {
        matches!(v, Value::Closure(i, 0) if std::ptr::eq(&*i.group, &*self.group))
    }
}

thread_local! {
    /// The variables bound by a `let` to a lambda whose calls may run in
    /// place (see [`Inline`]), recorded as the code binding them is
    /// resolved, which is before the code of any procedure built in their
    /// scope is (variables are never rebound: each binder is a fresh
    /// [`VarId`]).
    static KNOWN_LAMBDAS: std::cell::RefCell<FxHashMap<VarId, std::rc::Weak<Group>>> =
        std::cell::RefCell::new(FxHashMap::default());
}

/// The arguments of a call in tail position that may be moved out of the
/// frame rather than copied when the call ends a procedure's body (the frame
/// is dropped then): bit `i` for argument `i`, set when it is a slot that no
/// later argument reads. (0 for other calls, and where a block that is not a
/// procedure's body ends with the call, the arguments are copied.)
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Moves(pub u32);

impl Moves {
    /// The arguments of a tail call that may be moved.
    fn of(args: &CArgs) -> Moves {
        let xs = args.atoms();
        let mut bits = 0u32;
        for (i, x) in xs.iter().enumerate().take(32) {
            if let CAtom::Local(s) = x {
                if !xs[i + 1..].iter().any(|y| matches!(y, CAtom::Local(t) if t == s)) {
                    bits |= 1 << i;
                }
            }
        }
        Moves(bits)
    }
}

/// The parts of a [`CExpr::AppArith`]: `(f (- n 1))`, whose argument is
/// computed onto the value stack, where the call takes it, instead of into a
/// slot that the call then reads (no slot to write, no second dispatch).
pub struct AppArith {
    pub f: CAtom,
    /// The argument: a [`CExpr::Arith2`] or [`CExpr::Arith2Int`].
    pub arg: CExpr,
    /// Where the procedure is called.
    pub call: Span,
}

/// The parts of a [`CExpr::BpCall`].
pub struct BpCall {
    pub bp: CAtom,
    pub x: CAtom,
    /// How `sensitize` and `unsensitize` are applied: the primitives, or (in a
    /// forward-transformed backpropagator) calls of their forward versions.
    pub sensitize: Step,
    pub unsensitize: Step,
    /// Where the backpropagator is called.
    pub call: Span,
    /// Whether this is the forward transform of a backpropagator call.
    pub forward: bool,
}

/// A tag operation of a [`BpCall`]: a primitive (with the span of its use) or
/// a call of a closure (its forward version).
pub enum Step {
    Prim(PrimId, Span),
    Call(CAtom, Span),
}

/// What a tag primitive does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Retag {
    Tag(crate::value::Tag),
    Untag(crate::value::Tag),
}

impl Retag {
    fn of(name: &str) -> Option<Retag> {
        use crate::ad::ops::prim_name;
        use crate::value::Tag::*;
        [Perturbation, Sensitivity, Reverse].into_iter().find_map(|t| {
            if prim_name(t, false) == name {
                Some(Retag::Tag(t))
            } else if prim_name(t, true) == name {
                Some(Retag::Untag(t))
            } else {
                None
            }
        })
    }
}

/// The condition of an `if`.
#[repr(u8)]
pub enum Cond {
    Atom(CAtom),
    /// A comparison computed only for the `if` (its variable used nowhere else):
    /// tested at once, without storing the boolean in a slot.
    Cmp(Op2, CAtom, CAtom, PrimId, Span),
    /// [`Cond::Cmp`] of a slot and an exact integer constant.
    CmpInt(Op2, u32, i64, PrimId, Span),
    /// `(null? x)` (`Shape::Null`) or `(pair? x)` read only by the `if`: the
    /// primitive's test made in place (it takes any value, lazy ones as they
    /// are, and is neither metered nor declined by a tape).
    Is(Shape, CAtom),
}

/// The shape [`Cond::Is`] tests for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    Null,
    Pair,
}

impl Shape {
    /// The primitive `name` tests for this shape.
    fn of(name: &str) -> Option<Shape> {
        match name {
            "null?" => Some(Shape::Null),
            "pair?" => Some(Shape::Pair),
            _ => None,
        }
    }

    /// Whether `v` has this shape: the primitive's result.
    #[inline(always)]
    pub fn test(self, v: &Value) -> bool {
        match self {
            Shape::Null => matches!(v, Value::Nil),
            Shape::Pair => v.is_pair(),
        }
    }
}

#[repr(u8)]
pub enum CBind {
    Let(u32, CExpr),
    /// `((cons x y) a)`; `true`: `a` is a slot of the frame read nowhere
    /// after (its pair is moved out of it and taken apart, moved apart when
    /// nothing else holds it).
    Uncons(u32, u32, CAtom, Span, bool),
    /// `(r e)` then `((cons x y) r)`, `r` read nowhere else: the pair `e`
    /// returns is taken apart without being stored (moved apart when nothing
    /// else holds it), and not built at all where a native version can return
    /// its two parts (a scalar primitive's reverse version, a backpropagator
    /// call). `x` goes to the first slot; `y` as [`Split`] says.
    Split(CExpr, u32, Split, Span),
    Check(Value, CAtom, Span),
    /// The slots of the group's members, the group, the values it captures;
    /// a group that captures nothing is instantiated once, here, and that
    /// instance shared by every run of the binding (a named `let` whose loop
    /// reads only its own variables allocated a closure at each entry).
    Letrec(Box<[u32]>, Rc<Group>, Box<[CAtom]>, std::cell::OnceCell<crate::value::InstRc>),
    EnvSens(Box<[u32]>, CAtom),
    /// `(x (f a))`, a call's result left where the call put it: `x` takes a
    /// slot of its own, past every slot used before it, in a block that
    /// `run_block` runs as a procedure's body or as a branch of an `if` in
    /// tail position (not in a loop, nor in a call run in place; see
    /// `Resolver::push_from`). When it runs, the frame holds exactly the
    /// slots below `x`'s (see [`CBlock::pre`]), so the result of the call,
    /// left on top of the value stack, is the slot, and nothing moves.
    /// Then the slots of the variables the call (or its fused argument) read
    /// for the last time are emptied of values that own something (the
    /// third field): a `Let` reusing one of them would have dropped its
    /// value there. (One whose slot the frame holds already, which the
    /// resolver does not make, is a `Let` and a [`CBind::Clear`].)
    PushArith(u32, Box<AppArith>, Box<[u32]>),
    /// A [`CBind::PushArith`] of an `App`.
    PushApp(u32, CAtom, CArgs, Span, Box<[u32]>),
    /// Empties the slots of variables read for the last time by the binding
    /// before (a call that would have been a [`CBind::PushArith`] or
    /// `PushApp`) of values that own something.
    Clear(Box<[u32]>),
    /// Sets up the frame's slots up to this one (exclusive) with `()`, in a
    /// block with calls run in place (`PushArith`, `PushApp`; see
    /// [`CBlock::pre`]), before a binding or the block's tail that needs them.
    Grow(u32),
}

/// Where a [`CBind::Split`] puts the second part of its pair.
pub enum Split {
    Slot(u32),
    /// The second part is never read: not stored (and, where a native version
    /// returns it, not built).
    Unread,
    /// `((cons a b) y)` next, `y` read nowhere else: taken apart in turn.
    Pair(u32, u32, Span),
}

/// A block whose last expression is in tail position.
pub struct CBlock {
    pub binds: Vec<CBind>,
    pub tail: CExpr,
    /// The slots the frame needs while the block runs (up to its tail): the
    /// enclosing blocks' and parameters', its bindings', and those of the blocks
    /// nested in its bindings. The branches of an `if` in tail position need
    /// more (their own `frame`); the two branches of an `if` share slot numbers.
    pub frame: u32,
    /// The slots `run_block` sets up on entering the block (procedure
    /// bodies, branches of an `if` in tail position): `frame`, or, where the
    /// block has calls run in place (`PushArith`, `PushApp`), the slots
    /// below the first of them: the results of those calls become their
    /// slots, and `Grow` bindings set up the others as needed.
    pub pre: u32,
}

/// Keeps `marks` (the frame's size once each binding of a block being
/// resolved was made) in step with its `len` bindings, `nslots` being the
/// size now: the bindings made since the last call (`before` of them then;
/// the last of those `replaced` by another) get it.
fn sync_marks(marks: &mut Vec<u32>, len: usize, nslots: u32, replaced: bool, before: usize) {
    if replaced {
        marks.truncate(before.saturating_sub(1));
    }
    marks.truncate(len);
    marks.resize(len, nslots);
}

/// Resolved blocks nest through conditionals as deeply as the source does:
/// dropped with an explicit work list rather than by recursion.
impl Drop for CBlock {
    fn drop(&mut self) {
        fn take(e: &mut CExpr, out: &mut Vec<CBlock>) {
            let empty = || CBlock {
                binds: Vec::new(),
                tail: CExpr::Atom(CAtom::Const(Value::Nil)),
                frame: 0,
                pre: 0,
            };
            match e {
                CExpr::If(_, t, f) => {
                    for b in [t, f] {
                        out.push(std::mem::replace(&mut **b, empty()));
                    }
                }
                CExpr::Loop(l) => out.push(std::mem::replace(&mut l.body, empty())),
                _ => {}
            }
        }
        fn take_parts(b: &mut CBlock, out: &mut Vec<CBlock>) {
            for bind in b.binds.iter_mut() {
                if let CBind::Let(_, e) | CBind::Split(e, ..) = bind {
                    take(e, out);
                }
            }
            take(&mut b.tail, out);
        }
        let mut pending = Vec::new();
        take_parts(self, &mut pending);
        while let Some(mut b) = pending.pop() {
            take_parts(&mut b, &mut pending);
        }
    }
}

/// The operands of a [`CExpr::Arith2Int`] or [`Cond::CmpInt`] as atoms.
pub fn int_operands(x: u32, k: i64) -> (CAtom, CAtom) {
    (CAtom::Local(x), CAtom::Const(Value::Int(k)))
}

/// The primitives with an inline fast path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op2 {
    Add,
    Sub,
    Mul,
    /// (exact operands take the general path: an exact quotient, or an error)
    Div,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
}

impl Op2 {
    pub fn is_comparison(self) -> bool {
        !matches!(self, Op2::Add | Op2::Sub | Op2::Mul | Op2::Div)
    }

    /// Every operation, in the order of their discriminants (`op as usize`,
    /// as compiled code passes one), with its primitive's name.
    pub const ALL: [(Op2, &'static str); 9] = [
        (Op2::Add, "+"),
        (Op2::Sub, "-"),
        (Op2::Mul, "*"),
        (Op2::Div, "/"),
        (Op2::Lt, "<"),
        (Op2::Gt, ">"),
        (Op2::Le, "<="),
        (Op2::Ge, ">="),
        (Op2::Eq, "="),
    ];

    /// The inline operation of the primitive named `name`, if it has one.
    pub fn of(name: &str) -> Option<Op2> {
        Op2::ALL.iter().find(|(_, n)| *n == name).map(|&(op, _)| op)
    }

    /// The operation whose discriminant is `i`, if one is.
    pub fn from_index(i: i64) -> Option<Op2> {
        usize::try_from(i).ok().and_then(|i| Op2::ALL.get(i)).map(|&(op, _)| op)
    }

    /// The primitive this is the inline operation of.
    pub fn prim(self) -> PrimId {
        static IDS: std::sync::OnceLock<[PrimId; 9]> = std::sync::OnceLock::new();
        let ids = IDS
            .get_or_init(|| Op2::ALL.map(|(_, n)| crate::prims::lookup(n).expect("an arithmetic primitive")));
        ids[self as usize]
    }
}

/// How the parameter is bound.
pub enum Param {
    Slot(u32),
    /// The parameter is only destructured as an n-tuple into these slots; a call
    /// passing an n-tuple of arguments fills them directly and skips the first
    /// `skip` bindings. Otherwise the argument goes to `slot` and all bindings run.
    Tuple {
        slot: u32,
        parts: Box<[u32]>,
        skip: usize,
    },
}

pub struct LambdaCode {
    /// The most slots the frame ever needs (see [`CBlock::frame`]).
    pub nslots: u32,
    pub param: Param,
    /// 1 where `param` is `Param::Slot(0)` (a call with one argument leaves it
    /// in its slot: the common case, told by one comparison with the count of
    /// arguments), `usize::MAX` otherwise.
    pub unary: usize,
    pub body: CBlock,
    pub name: Rc<str>,
    pub span: Span,
    /// For a backpropagator `(lambda (s) (let* ((x (unsensitize s)) ...
    /// (r (sensitize a))) r))` (the reverse transform's, `s` and `r` read
    /// nowhere else): the index in [`GroupCode::members`] of its untagged
    /// entry, `(lambda (x) (let* (...) a))`, which a [`CExpr::BpCall`] of it
    /// runs instead of `(unsensitize (bp (sensitize x)))`.
    pub untagged: Option<Untagged>,
    /// Its state for the tier of compiled code (see `jit::NEVER`): set when
    /// the machine has resolved it.
    pub jit: std::cell::Cell<usize>,
    /// Its state for the tier's code of its body run on the values a call
    /// passes, whatever they are (see `jit::run_closure`; `jit::NEVER` or a
    /// count, as `jit`'s): set when the machine has resolved it.
    pub closure_jit: std::cell::Cell<usize>,
}

/// The untagged entry of a backpropagator (see [`LambdaCode::untagged`]).
#[derive(Clone, Copy)]
pub struct Untagged {
    /// Its index in [`GroupCode::members`].
    pub index: u32,
    /// Whether it is the forward transform of such a backpropagator (its tag
    /// operations the forward versions', as a forward [`BpCall`]'s).
    pub forward: bool,
    /// The procedure calls of those forward versions that a fused call runs
    /// no more (the caller's two, and the body's leading unsensitize and
    /// trailing sensitize that the entry drops): counted instead.
    pub calls: u8,
}

pub struct GroupCode {
    /// (A boxed slice: indexing it on a call is a length check and a load.
    /// An inline `SmallVec` of one saved that load but tested whether it had
    /// spilled twice per call, which cost more.)
    pub members: Box<[LambdaCode]>,
    /// False when entering a member needs checks first: a shape (never run) or
    /// a forward/reverse transformed group (its argument's tags are checked).
    pub plain: bool,
}

/// Which procedure each global holds, for calls to be run in place (see
/// [`Inline`]): the group of a closure of one lambda capturing nothing.
pub type Callees<'a> = &'a dyn Fn(GlobalId) -> Option<Rc<Group>>;

/// Resolves every member of a group whose A-normal form is known. `callees`
/// (the globals' procedures) lets calls of small ones run in place; `None`
/// resolves every call as a call. `loops` lets named `let`s run as loops
/// (see [`Loop`]); false makes each a procedure.
pub fn resolve_group(g: &Group, members: &[Lambda], callees: Option<Callees<'_>>, loops: bool) -> GroupCode {
    // (only in source code: the transforms' code calls no globals directly,
    // and code run for a derivative is metered apart from the code it calls)
    let callees = callees.filter(|_| !g.is_derivative_code());
    let mut outer = FxHashMap::default();
    for (i, v) in g.free.iter().enumerate() {
        outer.insert(*v, CAtom::Env(i as u32));
    }
    for (j, v) in g.names.iter().enumerate() {
        outer.insert(*v, CAtom::Sibling(j as u32));
    }
    // (a procedure defined at the top level may run as its own loop)
    let own_loop = loops && members.len() == 1 && g.free.is_empty() && g.names.is_empty();
    let lambda = |i: usize, l: &Lambda, uses: FxHashMap<VarId, u32>, entry: bool| {
        let last = last_reads(l);
        let mut r = Resolver {
            map: FxHashMap::default(),
            outer: &outer,
            nslots: 0,
            free: Vec::new(),
            uses,
            last,
            params: vec![l.param],
            entering: Vec::new(),
            prefer: Vec::new(),
            callees,
            group: g,
            inlining: Vec::new(),
            tail: true,
            loops: Vec::new(),
            make_loops: loops,
            loop_tail: false,
        };
        let param = tuple_param(l, &mut r);
        let body = match own_loop && entry {
            true => r.self_loop(l, &param),
            false => r.block(&l.body),
        };
        LambdaCode {
            nslots: r.nslots,
            unary: if matches!(param, Param::Slot(0)) { 1 } else { usize::MAX },
            param,
            body,
            name: g.display_name(i).into(),
            span: g.spans.get(i).copied().unwrap_or_default(),
            untagged: None,
            jit: std::cell::Cell::new(crate::jit::NEVER),
            closure_jit: std::cell::Cell::new(crate::jit::NEVER),
        }
    };
    let mut code: Vec<LambdaCode> = Vec::with_capacity(members.len());
    let mut entries = Vec::new();
    for (i, l) in members.iter().enumerate() {
        let mut uses = FxHashMap::default();
        count_uses_block(&l.body, &mut uses);
        if let Some(u) = untagged_entry(l, &uses) {
            entries.push((i, u));
        }
        code.push(lambda(i, l, uses, true));
    }
    for (i, (u, forward, dropped)) in entries {
        let mut uses = FxHashMap::default();
        count_uses_block(&u.body, &mut uses);
        let calls = if forward { 2 + dropped } else { 0 };
        code[i].untagged = Some(Untagged { index: code.len() as u32, forward, calls });
        let c = lambda(i, &u, uses, false);
        code.push(c);
    }
    let members = code.into_boxed_slice();
    let plain = !g.is_shape()
        && !matches!(g.origin, crate::anf::Origin::Transformed(crate::anf::Kind::F | crate::anf::Kind::R, _));
    GroupCode { members, plain }
}

/// The untagged entry of a backpropagator (see [`LambdaCode::untagged`]),
/// whether it is the forward transform of one (its tag operations are calls of
/// the forward versions of `sensitize` and `unsensitize`), and how many of the
/// body's tag operations it drops. Where the body does not start by
/// unsensitizing `s` (it passes `s` on to the backpropagator of its result),
/// the entry sensitizes its argument into `s`, so that call is a
/// [`CExpr::BpCall`] in turn.
fn untagged_entry(l: &Lambda, uses: &FxHashMap<VarId, u32>) -> Option<(Lambda, bool, u8)> {
    let b = &l.body.binds;
    let n = b.len();
    let Some(Bind::Let(r, last)) = b.last() else { return None };
    let (true, forward, a) = tag_step(last)? else { return None };
    let once = |v: &VarId| uses.get(v).copied() == Some(1);
    if !once(r) || !matches!(&l.body.result, Atom::Var(v) if v == r) {
        return None;
    }
    let middle = |from: usize| b[from..n - 1].iter().cloned();
    let first = match b.first() {
        Some(Bind::Let(x, e)) if n >= 2 => tag_step(e).map(|t| (x, t)),
        _ => None,
    };
    match first {
        Some((x, (false, fw, Atom::Var(s)))) if fw == forward && s == l.param && once(&s) => {
            Some((Lambda { param: *x, body: Block { binds: middle(1).collect(), result: a } }, forward, 2))
        }
        _ => {
            let x = crate::anf::fresh_var("sens");
            // (the last binding's operation, on x)
            let sensitize = match last {
                Expr::Prim(q, _, span) => Expr::Prim(*q, Args::One(Atom::Var(x)), *span),
                Expr::App(f, _, span) => Expr::App(f.clone(), Args::One(Atom::Var(x)), *span),
                _ => return None,
            };
            let binds = std::iter::once(Bind::Let(l.param, sensitize)).chain(middle(0)).collect();
            // (the sensitize it adds stands for the caller's)
            Some((Lambda { param: x, body: Block { binds, result: a } }, forward, 0))
        }
    }
}

/// If `e` is `(sensitize a)` or `(unsensitize a)`, or a call of the constant
/// forward version of one: whether it sensitizes, whether it is the forward
/// version, and `a` (what [`BpCall`]s and untagged entries are made of).
fn tag_step(e: &Expr) -> Option<(bool, bool, Atom)> {
    use crate::ad::native::{Formula, Native, StructOp};
    use crate::value::Tag::Sensitivity;
    match e {
        Expr::Prim(p, Args::One(a), _) => match crate::prims::prim(*p).name {
            "sensitize" => Some((true, false, a.clone())),
            "unsensitize" => Some((false, false, a.clone())),
            _ => None,
        },
        Expr::App(Atom::Const(Value::Closure(fi, _)), Args::One(a), _) => match fi.group.native.get() {
            Some(Native::F(_, Formula::Struct(StructOp::Tag(Sensitivity)))) => Some((true, true, a.clone())),
            Some(Native::F(_, Formula::Struct(StructOp::Untag(Sensitivity)))) => {
                Some((false, true, a.clone()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Decides how the parameter is bound. A tuple parameter's parts get slots
/// 0..n, where a caller's pushed arguments already are.
fn tuple_param(l: &Lambda, r: &mut Resolver<'_>) -> Param {
    let chain = skippable_chain(l, &r.uses);
    let Some(&(_, last)) = chain.last() else { return Param::Slot(r.bind(l.param)) };
    // Pre-bind the slots of the components so the fast path can fill them.
    let mut parts = Vec::new();
    for (a, _) in &chain {
        parts.push(r.bind(*a));
    }
    parts.push(r.bind(last));
    let slot = r.bind(l.param);
    Param::Tuple { slot, parts: parts.into(), skip: chain.len() }
}

/// The chain `Uncons(a1, r1, param), Uncons(a2, r2, r1), ...` a lambda's body
/// starts with, as far as a caller passing the parts may skip its bindings:
/// the source of each (the parameter, then each rest but the last) must be
/// read by that binding alone (`uses`), or skipping it would leave that
/// variable unset.
fn skippable_chain(l: &Lambda, uses: &FxHashMap<VarId, u32>) -> Vec<(VarId, VarId)> {
    let mut chain = Vec::new();
    let mut cur = l.param;
    for b in &l.body.binds {
        match b {
            Bind::Uncons(a, d, Atom::Var(src), _)
                if *src == cur && *a != cur && uses.get(&cur).copied() == Some(1) =>
            {
                chain.push((*a, *d));
                cur = *d;
            }
            _ => break,
        }
    }
    chain
}

/// How many times each variable is read in a block (see [`visit_block`]).
pub(crate) fn count_uses_block(b: &Block, uses: &mut FxHashMap<VarId, u32>) {
    visit_block(b, &mut |v| *uses.entry(v).or_default() += 1);
}

/// Calls `f` on every variable read in a block (nested blocks and the captures of
/// nested lambdas included), once per occurrence.
fn visit_block(b: &Block, f: &mut impl FnMut(VarId)) {
    crate::stack::grow(|| visit_block_here(b, f))
}

fn visit_block_here(b: &Block, f: &mut impl FnMut(VarId)) {
    for bind in &b.binds {
        visit_bind(bind, f);
    }
    visit_atom(&b.result, f);
}

fn visit_atom(a: &Atom, f: &mut impl FnMut(VarId)) {
    if let Atom::Var(v) = a {
        f(*v);
    }
}

fn visit_bind(bind: &Bind, f: &mut impl FnMut(VarId)) {
    match bind {
        Bind::Let(_, e) => match e {
            Expr::Atom(a) => visit_atom(a, f),
            Expr::Cons(a, d) => {
                visit_atom(a, f);
                visit_atom(d, f);
            }
            Expr::App(g, args, _) => {
                visit_atom(g, f);
                visit_args(args, f);
            }
            Expr::Prim(_, args, _) => visit_args(args, f),
            Expr::Lambda(g) => g.free.iter().for_each(|v| f(*v)),
            Expr::If(c, t, e) => {
                visit_atom(c, f);
                visit_block(t, f);
                visit_block(e, f);
            }
            Expr::MakeEnvSens(_, _, xs) => xs.iter().for_each(|x| visit_atom(x, f)),
            Expr::MakeEnvSensLike(l, xs) => {
                visit_atom(l, f);
                xs.iter().for_each(|x| visit_atom(x, f))
            }
        },
        Bind::Uncons(_, _, a, _) | Bind::Check(_, a, _) | Bind::EnvSens(_, a) => visit_atom(a, f),
        Bind::Letrec(_, g) => g.free.iter().for_each(|v| f(*v)),
    }
}

fn visit_args(a: &Args, f: &mut impl FnMut(VarId)) {
    match a {
        Args::One(x) => visit_atom(x, f),
        Args::Tuple(xs) => xs.iter().for_each(|x| visit_atom(x, f)),
    }
}

/// The variables a binding binds.
fn bound_vars(bind: &Bind) -> Vec<VarId> {
    match bind {
        Bind::Let(x, _) => vec![*x],
        Bind::Uncons(x, y, _, _) => vec![*x, *y],
        Bind::Check(..) => vec![],
        Bind::Letrec(names, _) => names.clone(),
        Bind::EnvSens(xs, _) => xs.clone(),
    }
}

struct Resolver<'g> {
    /// Where the lambda's own variables are.
    map: FxHashMap<VarId, CAtom>,
    /// Where the group's captured variables and members are (shared by the
    /// members, not copied for each).
    outer: &'g FxHashMap<VarId, CAtom>,
    /// Slots in use so far (the frame size so far).
    nslots: u32,
    /// Slots of variables no longer read, for reuse.
    free: Vec<u32>,
    /// How often each variable of the lambda is read.
    uses: FxHashMap<VarId, u32>,
    /// Where each variable of the lambda is read last (see [`last_reads`]).
    last: FxHashMap<VarId, usize>,
    /// Variables bound outside any block (the parameter): released by the body.
    params: Vec<VarId>,
    /// Variables of the enclosing block read last by the `if` whose branch
    /// is being resolved: released by the branch where it reads them last
    /// (see [`Resolver::branches`]).
    entering: Vec<VarId>,
    /// Variables passed to the innermost loop by the call ending the block
    /// that binds them, and the slots of the loop's variables they are passed
    /// to: given those slots where free, so that the call finds its arguments
    /// in place (see [`Resolver::prefer_loop_slots`]). The slots are kept
    /// from other variables meanwhile.
    prefer: Vec<(VarId, u32)>,
    /// The procedures globals hold, for calls run in place (see [`Inline`]).
    callees: Option<Callees<'g>>,
    /// The group being resolved.
    group: &'g Group,
    /// The globals whose calls are being resolved in place, outermost first.
    inlining: Vec<*const Group>,
    /// Whether the block being resolved ends the procedure's body (or the
    /// body of a call run in place): its last expression is in tail
    /// position. (An `if`'s branches are in tail position only if the `if`
    /// is; a branch of one bound to a variable is not.)
    tail: bool,
    /// Whether the block being resolved is in tail position of the body of
    /// a loop run as an inner block (a named `let` not in tail position, see
    /// [`Resolver::inner_loop_at`]), where a call of the loop is an
    /// [`Again`] though no call there is a tail call of the procedure.
    loop_tail: bool,
    /// The loops whose bodies are being resolved (see [`Loop`]), innermost last.
    loops: Vec<LoopScope>,
    /// Whether named `let`s may run as loops (else every one is a procedure).
    make_loops: bool,
}

/// A [`Loop`] whose body is being resolved: its procedure's variable (a call
/// of it is an [`Again`]), its variables' slots, and the slots of the values
/// it captures (variables of the enclosing code, which an iteration may not
/// move).
struct LoopScope {
    var: VarId,
    params: Box<[u32]>,
    /// The slots of the values it captures.
    kept: FxHashSet<u32>,
    /// The slots its body has bound so far, but its variables' (see
    /// [`Again::clear`]), in the order bound.
    temps: Vec<u32>,
    temps_set: FxHashSet<u32>,
    /// A procedure's own loop (see [`Loop::entered`]): its calls are those
    /// of the global holding it.
    global: bool,
}

/// How a [`Loop`] is entered: its procedure, the variables the arguments of
/// a call go to, and how many leading bindings of its body take the tuple of
/// arguments apart (not run: the arguments go to the parts at once).
struct LoopPlan<'a> {
    lambda: &'a Lambda,
    vars: Vec<VarId>,
    skip: usize,
}

/// The calls of `v` in tail position of a block (its last binding, if it is
/// the block's result, or the branches of a conditional there), if each
/// passes arguments as `args` does (one, or a tuple as long); `None` if one
/// passes them otherwise.
fn tail_calls(b: &Block, v: VarId, args: &Args) -> Option<u32> {
    crate::stack::grow(|| {
        let Some(Bind::Let(x, e)) = b.binds.last() else { return Some(0) };
        if !matches!(&b.result, Atom::Var(r) if r == x) {
            return Some(0);
        }
        match e {
            Expr::App(Atom::Var(f), a, _) if *f == v => match (a, args) {
                (Args::One(_), Args::One(_)) => Some(1),
                (Args::Tuple(xs), Args::Tuple(ys)) if xs.len() == ys.len() => Some(1),
                _ => None,
            },
            Expr::If(_, t, f) => Some(tail_calls(t, v, args)? + tail_calls(f, v, args)?),
            _ => Some(0),
        }
    })
}

/// How many arguments a call passes (a procedure's own loop takes as many
/// as it has variables: see [`Resolver::self_loop`]).
fn arg_count(args: &Args) -> usize {
    match args {
        Args::One(_) => 1,
        Args::Tuple(xs) => xs.len(),
    }
}

/// Whether a call in tail position of block `b` (its last binding, if it is
/// the block's result, or the branches of a conditional there) is one of a
/// global that `calls_self` accepts with its arguments.
fn self_tail_call(b: &Block, calls_self: &dyn Fn(GlobalId, &Args) -> bool) -> bool {
    crate::stack::grow(|| {
        let Some(Bind::Let(x, e)) = b.binds.last() else { return false };
        if !matches!(&b.result, Atom::Var(r) if r == x) {
            return false;
        }
        match e {
            Expr::App(Atom::Global(g), args, _) => calls_self(*g, args),
            Expr::If(_, t, f) => self_tail_call(t, calls_self) || self_tail_call(f, calls_self),
            _ => false,
        }
    })
}

/// The arguments of a call that may be moved into a loop's variables: those
/// [`Moves::of`] finds, but slots in `kept` (the values the loop captures,
/// which the next iteration reads again).
fn loop_moves(atoms: &CArgs, kept: &FxHashSet<u32>) -> Moves {
    let mut m = Moves::of(atoms);
    for (i, a) in atoms.atoms().iter().enumerate().take(32) {
        if matches!(a, CAtom::Local(s) if kept.contains(s)) {
            m.0 &= !(1 << i);
        }
    }
    m
}

/// At most this many calls run in place one inside another.
const INLINE_DEPTH: usize = 3;
/// At most this many bindings in a procedure run in place.
const INLINE_BINDS: usize = 8;
/// At most this many bindings in the named `let`s' loops of a procedure run
/// in place (their bodies are resolved again at each place): a small
/// helper's loop, as a dot product's, whose call costs as much as a few of
/// its iterations. (A larger loop runs more iterations a call: with 24, the
/// saddle's gradient-descent loop was run in place too, and its inner solve
/// took 0.5% more instructions than with no loop run in place; with 12, 2%
/// fewer.)
const INLINE_LOOP_BINDS: usize = 12;

/// Whether calls of procedure `c` (held by global `g`, or bound by a `let`)
/// may run in place (see [`Inline`]): a lambda of source code capturing
/// nothing (so that the code it was built from says all it does) whose body
/// may be.
fn inlinable_group(c: &Group, g: Option<GlobalId>) -> bool {
    // (source code only: `is_derivative_code` is any other origin too)
    let plain = !c.is_derivative_code()
        && !c.is_shape()
        && c.names.is_empty()
        && c.free.is_empty()
        && c.native.get().is_none();
    match c.members.get().map(|m| m.as_slice()) {
        Some([l]) => plain && inlinable_body(&l.body, g),
        _ => false,
    }
}

/// Whether the body of a procedure may be run in place (see [`Inline`]):
/// a few bindings (those of its conditionals' branches included, not those
/// taking its parameter apart first), none made
/// by the transforms, a `letrec` only of one small procedure (a named `let`,
/// which runs as a loop in place, or is built as the call would build it), no
/// call of itself, and no call in tail position (its own, or a branch's of a
/// conditional there) but one of a global, or of a named `let` bound before
/// it: run in place in turn, or the callee is not (a call there would be a
/// level deeper than the tail call it replaces: see `ends_in_call`). A
/// lambda is built as the call would build it (the same code, capturing the
/// same values).
fn inlinable_body(b: &Block, g: Option<GlobalId>) -> bool {
    // (the bindings taking a tuple parameter apart first are not counted: a
    // call passing as many arguments skips them, and one passing a list
    // takes it apart as the call would)
    let parts = b.binds.iter().take_while(|x| matches!(x, Bind::Uncons(..))).count();
    let mut binds = 0;
    let mut loop_binds = 0;
    small_block(&b.binds[parts..], &b.result, g, true, &mut binds, &mut loop_binds)
}

/// How many bindings (nested ones included) [`last_reads_within`] walks at
/// most: a branch's walk for the variables it frees, at each level of a
/// chain of conditionals, stays cheap.
const BRANCH_WALK: usize = 256;

/// Where block `b` reads each of `vars` (variables bound before it) last:
/// the index of the binding (a conditional's for a read in its branches;
/// `b.binds.len()` for the block's result); `None` if `b` has more than
/// [`BRANCH_WALK`] bindings, nested ones included.
fn last_reads_within(b: &Block, vars: &[VarId]) -> Option<FxHashMap<VarId, usize>> {
    fn fits(b: &Block, budget: &mut usize) -> bool {
        b.binds.iter().all(|bind| {
            *budget = match budget.checked_sub(1) {
                Some(n) => n,
                None => return false,
            };
            match bind {
                Bind::Let(_, Expr::If(_, t, f)) => fits(t, budget) && fits(f, budget),
                _ => true,
            }
        })
    }
    let mut budget = BRANCH_WALK;
    fits(b, &mut budget).then(|| last_reads_in(b, vars))
}

/// The bindings of a block, those of its conditionals' branches included.
fn block_size(b: &Block) -> usize {
    b.binds.len()
        + b.binds
            .iter()
            .map(|bind| match bind {
                Bind::Let(_, Expr::If(_, t, f)) => block_size(t) + block_size(f),
                _ => 0,
            })
            .sum::<usize>()
}

/// (`g`: the procedure's global, if a global holds it; one calling itself is
/// not run in place, so its recursion is not unrolled a level at each call
/// site)
fn small_block(
    bs: &[Bind],
    result: &Atom,
    g: Option<GlobalId>,
    tail: bool,
    binds: &mut usize,
    loop_binds: &mut usize,
) -> bool {
    *binds += bs.len();
    *binds <= INLINE_BINDS
        && bs.iter().enumerate().all(|(i, bind)| {
            let last = tail && i + 1 == bs.len();
            match bind {
                Bind::Let(x, e) => {
                    let last = last && matches!(result, Atom::Var(r) if r == x);
                    match e {
                        Expr::Atom(_) | Expr::Prim(..) | Expr::Cons(..) | Expr::Lambda(_) => true,
                        Expr::App(Atom::Global(h), ..) => Some(*h) != g,
                        // (a named `let`'s first call: its loop, run in place)
                        Expr::App(Atom::Var(f), ..) if last => bs[..i]
                            .iter()
                            .any(|d| matches!(d, Bind::Letrec(names, _) if names.as_slice() == [*f])),
                        Expr::App(..) => !last,
                        Expr::If(_, t, f) => {
                            small_block(&t.binds, &t.result, g, last, binds, loop_binds)
                                && small_block(&f.binds, &f.result, g, last, binds, loop_binds)
                        }
                        Expr::MakeEnvSens(..) | Expr::MakeEnvSensLike(..) => false,
                    }
                }
                Bind::Uncons(..) | Bind::Check(..) => true,
                Bind::Letrec(names, lg) => match lg.members.get().map(|m| m.as_slice()) {
                    Some([l]) if names.len() == 1 && !lg.is_derivative_code() => {
                        *loop_binds += block_size(&l.body);
                        *loop_binds <= INLINE_LOOP_BINDS
                    }
                    _ => false,
                },
                Bind::EnvSens(..) => false,
            }
        })
}

/// Marks [`Loop::in_place_tail`] the loops of a block run in place whose
/// value is its value (its last binding's, or a conditional's branch's
/// there, or such a loop's body's): the named `let`s called in tail position
/// of the procedure. Their bodies' calls run in place in tail position are
/// tail calls of the procedure too (resolved as an inner block's, they were
/// not marked so: see [`Inline::tail`]).
fn mark_tail_loops(b: &mut CBlock) {
    match &mut b.tail {
        CExpr::If(_, t, f) => {
            mark_tail_loops(t);
            mark_tail_loops(f);
        }
        CExpr::Inline(il) => il.tail = true,
        CExpr::Guarded(g) => g.inline.tail = true,
        CExpr::Atom(CAtom::Local(r)) => {
            let r = *r;
            if let Some(CBind::Let(s, CExpr::Loop(lp))) = b.binds.last_mut() {
                if *s == r {
                    lp.in_place_tail = true;
                    mark_tail_loops(&mut lp.body);
                }
            }
        }
        _ => {}
    }
}

/// The variables bound in a block run in place, in it and in its
/// conditionals' branches (not in the lambdas it builds: they are their own
/// groups'), with those of the named `let`s' procedures it binds (their
/// parameters, and what their bodies bind): a loop resolved in place gives
/// them slots of the caller's frame.
fn inlined_vars(b: &Block, out: &mut Vec<VarId>) {
    for bind in &b.binds {
        out.extend(bound_vars(bind));
        match bind {
            Bind::Let(_, Expr::If(_, t, f)) => {
                inlined_vars(t, out);
                inlined_vars(f, out);
            }
            Bind::Letrec(_, g) => {
                for l in g.members.get().map(|m| m.as_slice()).unwrap_or_default() {
                    out.push(l.param);
                    inlined_vars(&l.body, out);
                }
            }
            _ => {}
        }
    }
}

/// Whether a resolved block run in place ends in a call (its own tail, or
/// that of a conditional's branch there, or of a loop whose value is its
/// value: the loop's first call is then the procedure's tail call, and so are
/// those its body makes in tail position, but its own).
fn ends_in_call(b: &CBlock) -> bool {
    match &b.tail {
        CExpr::App(..) => true,
        // (the call a guard falls back to)
        CExpr::Guarded(_) => true,
        CExpr::If(_, t, f) => ends_in_call(t) || ends_in_call(f),
        _ => tail_loop(b).is_some_and(|lp| ends_in_call(&lp.body)),
    }
}

/// The loop whose value is the value of block `b` (its last binding's, the
/// block's result), if there is one.
fn tail_loop(b: &CBlock) -> Option<&Loop> {
    match (&b.tail, b.binds.last()) {
        (CExpr::Atom(CAtom::Local(r)), Some(CBind::Let(s, CExpr::Loop(lp)))) if s == r => Some(lp),
        _ => None,
    }
}

/// For each variable of a lambda that is read, the index of the binding of the
/// block that binds it (the body, for the parameter) that reads it last, itself or
/// in a block nested in it; the block's length if that is its result. One walk of
/// the body, so that deeply nested blocks resolve in linear time.
fn last_reads(l: &Lambda) -> FxHashMap<VarId, usize> {
    last_reads_in(&l.body, &[l.param])
}

/// [`last_reads`] of a block whose variables `params` are bound before it.
fn last_reads_in(body: &Block, params: &[VarId]) -> FxHashMap<VarId, usize> {
    struct Walk {
        /// The nesting depth of the block binding each variable.
        depth: FxHashMap<VarId, usize>,
        /// The index of the binding being walked in each enclosing block.
        at: Vec<usize>,
        last: FxHashMap<VarId, usize>,
    }
    impl Walk {
        fn read(&mut self, a: &Atom) {
            if let Atom::Var(v) = a {
                if let Some(&d) = self.depth.get(v) {
                    self.last.insert(*v, self.at[d]);
                }
            }
        }
        fn block(&mut self, b: &Block) {
            crate::stack::grow(|| self.block_here(b))
        }
        fn block_here(&mut self, b: &Block) {
            let d = self.at.len();
            self.at.push(0);
            for (i, bind) in b.binds.iter().enumerate() {
                self.at[d] = i;
                match bind {
                    Bind::Let(_, Expr::If(c, t, e)) => {
                        self.read(c);
                        self.block(t);
                        self.block(e);
                    }
                    // No other binding has a nested block.
                    bind => visit_bind(bind, &mut |v| self.read(&Atom::Var(v))),
                }
                for v in bound_vars(bind) {
                    self.depth.insert(v, d);
                }
            }
            self.at[d] = b.binds.len();
            self.read(&b.result);
            self.at.pop();
        }
    }
    let mut w = Walk { depth: FxHashMap::default(), at: Vec::new(), last: FxHashMap::default() };
    for p in params {
        w.depth.insert(*p, 0);
    }
    w.block(body);
    w.last
}

impl Resolver<'_> {
    /// The procedure global `g` holds, if a call of it may be run in place
    /// here (see [`Inline`]): a lambda of source code capturing nothing, with
    /// an [`inlinable_body`], not the procedure being resolved nor one already
    /// being run in place around this call, and not too deep.
    /// The body of a procedure that calls itself in tail position through
    /// the global that holds it (`(define (f i acc) ... (f (+ i 1) ...))`),
    /// passing as many arguments as its variables (its parameter, or the
    /// parts of the tuple it destructures at once): a [`Loop`] in its own
    /// frame ([`Loop::entered`]) after the bindings that take the tuple
    /// apart, each such call an [`Again`] of it (checking the global at run
    /// time). Steps, `--metered` counts and error traces are those of the
    /// tail calls it replaces. Otherwise the body as it is.
    fn self_loop(&mut self, l: &Lambda, param: &Param) -> CBlock {
        let (params, skip): (Box<[u32]>, usize) = match param {
            Param::Slot(s) => (Box::new([*s]), 0),
            Param::Tuple { parts, skip, .. } => (parts.clone(), *skip),
        };
        let n = params.len();
        let calls_self = |g: GlobalId, args: &Args| arg_count(args) == n && self.holds_self(g);
        if !self_tail_call(&l.body, &calls_self) {
            return self.block(&l.body);
        }
        self.loops.push(LoopScope {
            var: crate::anf::fresh_var("self"),
            params: params.clone(),
            kept: FxHashSet::default(),
            temps: Vec::new(),
            temps_set: FxHashSet::default(),
            global: true,
        });
        let mut body = self.block(&l.body);
        let scope = self.loops.pop().expect("the procedure's loop scope");
        // (the bindings taking the tuple apart: run by a call passing the
        // tuple whole, skipped by one passing its parts, not by the loop)
        if body.binds.len() < skip || !body.binds[..skip].iter().all(|b| matches!(b, CBind::Uncons(..))) {
            return body;
        }
        let top = scope.temps.iter().max().map_or(0, |s| s + 1);
        let frame = body.frame.max(top);
        let rest: Vec<CBind> = body.binds.drain(skip..).collect();
        let tail = std::mem::replace(&mut body.tail, CExpr::Atom(CAtom::Const(Value::Nil)));
        let lp = Loop {
            init: CArgs::Tuple(Box::new([])),
            init_moves: Moves::default(),
            init_in_order: true,
            params,
            dead: Box::new([]),
            frame,
            body: CBlock { binds: rest, tail, frame: body.frame, pre: body.frame },
            name: self.group.display_name(0).into(),
            site: Span::UNKNOWN,
            entered: true,
            in_place_tail: false,
            jit: std::cell::Cell::new(crate::jit::NEVER),
        };
        CBlock { binds: std::mem::take(&mut body.binds), tail: CExpr::Loop(Box::new(lp)), frame, pre: frame }
    }

    /// Whether global `g` holds the procedure being resolved (as far as
    /// is known now: see [`Again::global`]).
    fn holds_self(&self, g: GlobalId) -> bool {
        self.callees.and_then(|c| c(g)).is_some_and(|c| std::ptr::eq(&*c, self.group))
    }

    /// Whether a call of procedure `c` may run in place here: not one of
    /// those being run in place around it (nor the one being resolved), and
    /// not too deep.
    fn may_inline(&self, c: &Group) -> bool {
        self.inlining.len() < INLINE_DEPTH
            && !self.inlining.contains(&(c as *const Group))
            && !std::ptr::eq(c, self.group)
    }

    fn callee(&self, g: GlobalId) -> Option<Rc<Group>> {
        let c = (self.callees?)(g)?;
        (self.may_inline(&c) && inlinable_group(&c, Some(g))).then_some(c)
    }

    /// The lambda variable `v` is bound to, if a call of it may run in
    /// place here (see [`KNOWN_LAMBDAS`]).
    fn known_lambda(&self, v: VarId) -> Option<Rc<Group>> {
        self.callees?;
        let c = KNOWN_LAMBDAS.with(|k| k.borrow().get(&v).and_then(std::rc::Weak::upgrade))?;
        self.may_inline(&c).then_some(c)
    }

    /// Records that `x` is bound to lambda `g`, if calls of it may run in
    /// place (in source code, where calls run in place at all).
    fn record_lambda(&self, x: VarId, g: &Rc<Group>) {
        if self.callees.is_some() && inlinable_group(g, None) {
            KNOWN_LAMBDAS.with(|k| k.borrow_mut().insert(x, Rc::downgrade(g)));
        }
    }

    /// `(g args)` run in place (see [`Resolver::inline_body`]).
    fn inline_call(&mut self, g: GlobalId, args: &Args, site: Span, tail: bool) -> Option<CExpr> {
        let callee = self.callee(g)?;
        let mut il = self.inline_body(callee.clone(), args, site, tail)?;
        // (a loop run in place is entered in the evaluator at each call, and
        // compiled on its own at best, and a walk's calls are the
        // evaluator's: the procedure's compiled code, where it has some,
        // runs the call whole)
        if cfg!(feature = "jit") && crate::jit::runs_long(&il.body) {
            let ops = self.args(args).atoms().into();
            il.callee = Some(Box::new(InlineCallee { group: callee, args: ops }));
        }
        Some(CExpr::Inline(Box::new(il)))
    }

    /// `(v args)`, `v` a variable bound to a lambda calls of which may run
    /// in place, run in place behind a [`Guard`].
    fn inline_var_call(&mut self, v: VarId, args: &Args, site: Span, tail: bool) -> Option<CExpr> {
        let group = self.known_lambda(v)?;
        let callee = self.atom(&Atom::Var(v));
        let call = CExpr::App(callee.clone(), self.args(args), site, Moves::default());
        let inline = self.inline_body(group.clone(), args, site, tail)?;
        Some(CExpr::Guarded(Box::new(Guard { callee, group, call, inline })))
    }

    /// A call of `callee` (at `site`; `tail`: in tail position) run in
    /// place: the callee's parameter, or the parts
    /// of a tuple parameter it destructures at once (as `tuple_param` finds
    /// them) when the call passes as many arguments, stand for the call's
    /// operands, and its body is resolved as a block of the caller's, its
    /// variables in free slots of the caller's frame. `None` (nothing changed)
    /// otherwise, or if the body's call in tail position is not run in place
    /// in turn.
    fn inline_body(&mut self, callee: Rc<Group>, args: &Args, site: Span, tail: bool) -> Option<Inline> {
        let l = &callee.members.get()?[0];
        let mut uses = FxHashMap::default();
        count_uses_block(&l.body, &mut uses);
        let (vars, skip): (Vec<VarId>, usize) = match args {
            Args::One(_) => (vec![l.param], 0),
            Args::Tuple(xs) => {
                // (the first n - 1 bindings of the chain `tuple_param` finds
                // take the n arguments apart)
                let k = xs.len() - 1;
                let chain = skippable_chain(l, &uses);
                if chain.len() < k || k == 0 {
                    return None;
                }
                let mut parts: Vec<VarId> = chain[..k].iter().map(|(a, _)| *a).collect();
                parts.push(chain[k - 1].1);
                (parts, k)
            }
        };
        let ops: Vec<CAtom> = match args {
            Args::One(x) => vec![self.atom(x)],
            Args::Tuple(xs) => xs.iter().map(|x| self.atom(x)).collect(),
        };
        let body = Lambda {
            param: l.param,
            body: Block { binds: l.body.binds[skip..].to_vec(), result: l.body.result.clone() },
        };
        // (the callee's variables are its own: none is the caller's; all of
        // them, those its conditionals' branches bind included, are forgotten
        // after, so that another call of it binds them afresh: a slot kept
        // for one would be written again by that call, after it was freed
        // and given to a variable of the caller's)
        let mut own: Vec<VarId> = Vec::new();
        inlined_vars(&body.body, &mut own);
        own.extend(vars.iter().copied());
        own.extend(uses.keys().copied());
        // (a call of the procedure from inside a procedure its body builds,
        // being resolved now, as a named `let`'s loop that calls it: that
        // procedure's variables are the callee's too, and in use)
        if own.iter().any(|v| self.map.contains_key(v) || self.outer.contains_key(v)) {
            return None;
        }
        for (v, a) in vars.iter().zip(ops) {
            self.map.insert(*v, a);
        }
        self.uses.extend(uses);
        self.last.extend(last_reads(&body));
        // As an `if`'s branch: the body's slots are all free after it.
        let (start, free) = (self.nslots, self.free.clone());
        self.inlining.push(Rc::as_ptr(&callee));
        let outer_tail = std::mem::replace(&mut self.tail, true);
        let outer_loop_tail = std::mem::replace(&mut self.loop_tail, false);
        let mut block = self.block(&body.body);
        self.tail = outer_tail;
        self.loop_tail = outer_loop_tail;
        self.inlining.pop();
        let end = self.nslots;
        for v in &own {
            self.map.remove(v);
            self.uses.remove(v);
            self.last.remove(v);
        }
        self.free = free;
        if ends_in_call(&block) {
            // (a call there would count a level the tail call it replaces does not)
            self.nslots = start;
            return None;
        }
        self.free.extend((start..end).rev());
        mark_tail_loops(&mut block);
        let name = callee.display_name(0).into();
        Some(Inline { body: block, name, site, tail, callee: None })
    }

    /// The [`Loop`] that bindings `i` and `i + 1`, the last, of block `b` (in
    /// tail position) make, if they are `(letrec ((lp lambda)) (lp args ...))`
    /// with `lp` a procedure that may run as one (see [`Resolver::loop_plan`]):
    /// the slots the block needs before the loop's (its frame), and the loop.
    fn loop_at(
        &mut self,
        b: &Block,
        i: usize,
        names: &[VarId],
        g: &Group,
        dying: &mut [Vec<VarId>],
    ) -> Option<(u32, CExpr)> {
        if i + 2 != b.binds.len() {
            return None;
        }
        let (r, f, args, site, plan) = self.loop_call(b, i, names, g)?;
        if !matches!(&b.result, Atom::Var(x) if *x == r) {
            return None;
        }
        let init = self.args(args);
        // (the values the loop captures are read by every iteration)
        self.release_at_loop(i, g, dying);
        let frame = self.nslots;
        let lp = self.resolve_loop(f, g, plan, init, site, None);
        Some((frame, CExpr::Loop(Box::new(lp))))
    }

    /// Bindings `i` and `i + 1` of block `b`, if they are `(letrec ((lp
    /// lambda)) (r (lp args ...)))` (`names` and `g` the first's) with `lp` a
    /// procedure that may run as a loop: `r`, `lp`, the call's arguments and
    /// site, and how the loop runs (see [`Resolver::loop_plan`]).
    fn loop_call<'b, 'g>(
        &self,
        b: &'b Block,
        i: usize,
        names: &[VarId],
        g: &'g Group,
    ) -> Option<(VarId, VarId, &'b Args, Span, LoopPlan<'g>)> {
        let Some(Bind::Let(r, Expr::App(Atom::Var(f), args, site))) = b.binds.get(i + 1) else { return None };
        if names != [*f] {
            return None;
        }
        let plan = self.loop_plan(*f, g, args)?;
        Some((*r, *f, args, *site, plan))
    }

    /// Frees the slots of what bindings `i` and `i + 1` (a loop's `letrec`
    /// and its call) read last, but for the values the loop (`g`) captures,
    /// which it returns.
    fn release_at_loop(&mut self, i: usize, g: &Group, dying: &mut [Vec<VarId>]) -> Vec<VarId> {
        let mut captured = Vec::new();
        for k in [i, i + 1] {
            for v in std::mem::take(&mut dying[k]) {
                if g.free.contains(&v) {
                    captured.push(v);
                } else {
                    self.release(v);
                }
            }
        }
        captured
    }

    /// The frame slots of those of `vars` that are the procedure's own
    /// variables.
    fn local_slots(&self, vars: impl IntoIterator<Item = VarId>) -> FxHashSet<u32> {
        vars.into_iter()
            .filter_map(|v| match self.atom(&Atom::Var(v)) {
                CAtom::Local(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    /// The [`Loop`] that bindings `i` and `i + 1` of block `b` make where
    /// they are `(letrec ((lp lambda)) (r (lp args ...)))` not in tail
    /// position of the procedure (a named `let` whose value is used), with
    /// `lp` a procedure that may run as one (see [`Resolver::loop_plan`]):
    /// `r`, and the loop, run as an inner block whose result is `r`'s value
    /// (its body's calls are not tail calls, but its own calls in tail
    /// position of its body are [`Again`]s; it empties no slot on entry,
    /// and its slots are all free after it, as an `if`'s branch's).
    fn inner_loop_at(
        &mut self,
        b: &Block,
        i: usize,
        names: &[VarId],
        g: &Group,
        dying: &mut [Vec<VarId>],
    ) -> Option<(VarId, CExpr)> {
        let (r, f, args, site, plan) = self.loop_call(b, i, names, g)?;
        let init = self.args(args);
        // (an argument read after the loop is not moved into it)
        let mut read_after = Vec::new();
        visit_args(args, &mut |v| {
            if !dying[i + 1].contains(&v) {
                read_after.push(v)
            }
        });
        let live = self.local_slots(read_after);
        // (the values the loop captures are read by every iteration: freed
        // after it)
        let captured = self.release_at_loop(i, g, dying);
        let (start, free) = (self.nslots, self.free.clone());
        let lp = self.resolve_loop(f, g, plan, init, site, Some(live));
        // (the loop's variables are dead after it: all its slots are free)
        let end = self.nslots;
        self.free = free;
        self.free.extend((start..end).rev());
        self.release_all(captured);
        Some((r, CExpr::Loop(Box::new(lp))))
    }

    /// The [`Loop`] of procedure `g`, bound to `f` and called first with
    /// arguments `init` at `site`, as `plan` runs it: in tail position of
    /// the procedure (its body's tail calls are the procedure's, and
    /// entering it empties the frame's slots but its variables' and the
    /// values it captures), or (`inner`: the slots of arguments read after
    /// the loop, not moved into it) as an inner block.
    fn resolve_loop(
        &mut self,
        f: VarId,
        g: &Group,
        plan: LoopPlan,
        init: CArgs,
        site: Span,
        inner: Option<FxHashSet<u32>>,
    ) -> Loop {
        // (the slots of the values the loop captures: kept while it runs)
        let kept = self.local_slots(g.free.iter().copied());
        let init_moves = match &inner {
            Some(live) => loop_moves(&init, &kept.union(live).copied().collect()),
            None => loop_moves(&init, &kept),
        };
        let inner = inner.is_some();
        let l = plan.lambda;
        let body = Block { binds: l.body.binds[plan.skip..].to_vec(), result: l.body.result.clone() };
        let mut uses = FxHashMap::default();
        count_uses_block(&body, &mut uses);
        uses.retain(|v, _| *v != f && !g.free.contains(v));
        self.uses.extend(uses);
        self.last.extend(last_reads_in(&body, &plan.vars));
        let params: Box<[u32]> = plan.vars.iter().map(|v| self.bind(*v)).collect();
        // (released where the body reads them last, as a procedure's parameter)
        self.params = plan.vars;
        self.loops.push(LoopScope {
            var: f,
            params: params.clone(),
            kept,
            temps: Vec::new(),
            temps_set: FxHashSet::default(),
            global: false,
        });
        let outer_tail = std::mem::replace(&mut self.tail, !inner);
        let outer_loop_tail = std::mem::replace(&mut self.loop_tail, inner);
        let body = self.block(&body);
        self.tail = outer_tail;
        self.loop_tail = outer_loop_tail;
        // (a slot bound by a call tried in place and then not run so may be
        // past the frame, yet in a call's `clear`)
        let scope = self.loops.pop().expect("the loop's scope");
        let top = scope.temps.iter().max().map_or(0, |s| s + 1);
        let name = g.display_name(0).into();
        let init_in_order = in_order(&init, &params);
        // (every slot of the frame but the loop's variables' and the values
        // it captures: dead once a call of the loop has read its arguments;
        // none for an inner loop, after which the procedure goes on)
        let dead: Box<[u32]> = if inner {
            Box::new([])
        } else {
            (0..self.nslots).filter(|s| !scope.kept.contains(s) && !params.contains(s)).collect()
        };
        let frame = self.nslots.max(top);
        if inner {
            // (its slots are the procedure's frame's)
            self.nslots = frame;
        }
        Loop {
            init,
            init_moves,
            init_in_order,
            params,
            dead,
            frame,
            body,
            name,
            site,
            entered: false,
            in_place_tail: false,
            jit: std::cell::Cell::new(crate::jit::NEVER),
        }
    }

    /// How the procedure `g` bound by a `letrec` to `lp` alone, and called
    /// by the `letrec`'s body with `args`, runs as a [`Loop`], if it may: the
    /// code being resolved and `g` are source code (a transformed procedure's
    /// argument is checked as it is entered), `lp` is read by that call alone
    /// there and in `g`'s body only by calls of it in tail position passing
    /// their arguments as that call does, and the code is not a call run in
    /// place (whose variables are forgotten after it). With a tuple of n
    /// arguments, `g`'s body must take its parameter apart at once (the
    /// chain `tuple_param` finds), as a call run in place does.
    fn loop_plan<'a>(&self, lp: VarId, g: &'a Group, args: &Args) -> Option<LoopPlan<'a>> {
        let plain = self.make_loops
            && !self.group.is_derivative_code()
            && !g.is_derivative_code()
            && !g.is_shape()
            && g.native.get().is_none()
            && g.names == [lp]
            && self.uses.get(&lp).copied() == Some(1);
        if !plain {
            return None;
        }
        let [l] = g.members.get()?.as_slice() else { return None };
        let mut uses = FxHashMap::default();
        count_uses_block(&l.body, &mut uses);
        if uses.get(&lp).copied().unwrap_or(0) != tail_calls(&l.body, lp, args)? {
            return None;
        }
        let (vars, skip) = match args {
            Args::One(_) => (vec![l.param], 0),
            Args::Tuple(xs) => {
                let k = xs.len().checked_sub(1).filter(|k| *k > 0)?;
                let chain = skippable_chain(l, &uses);
                if chain.len() < k {
                    return None;
                }
                let mut parts: Vec<VarId> = chain[..k].iter().map(|(a, _)| *a).collect();
                parts.push(chain[k - 1].1);
                (parts, k)
            }
        };
        Some(LoopPlan { lambda: l, vars, skip })
    }

    /// The innermost loop, the global its call goes through (a procedure's
    /// own loop), the arguments and the call site, if `e` is a call of it.
    fn loop_call_of<'e>(&self, e: &'e Expr) -> Option<(&LoopScope, Option<GlobalId>, &'e Args, &'e Span)> {
        match e {
            Expr::App(Atom::Var(f), args, site) => {
                Some((self.loops.last().filter(|l| l.var == *f)?, None, args, site))
            }
            // (a procedure's own loop: the arguments as many as its variables)
            Expr::App(Atom::Global(g), args, site) => {
                let l = self.loops.last().filter(|l| l.global)?;
                if !self.inlining.is_empty() || !self.holds_self(*g) || arg_count(args) != l.params.len() {
                    return None;
                }
                Some((l, Some(*g), args, site))
            }
            _ => None,
        }
    }

    /// `e`, in tail position, as an [`Again`] if it is a call of the
    /// innermost loop.
    fn again(&self, e: &Expr) -> Option<CExpr> {
        let (l, global, args, site) = self.loop_call_of(e)?;
        let atoms = self.args(args);
        let moves = loop_moves(&atoms, &l.kept);
        // (an argument in its variable's slot already is left there)
        let (set, params): (Vec<CAtom>, Vec<u32>) = atoms
            .atoms()
            .iter()
            .zip(l.params.iter())
            .filter(|(a, p)| !matches!(a, CAtom::Local(s) if s == *p))
            .map(|(a, p)| (a.clone(), *p))
            .unzip();
        let set = CArgs::Tuple(set.into());
        // (nor is one moved out of a variable that keeps its value)
        let mut keep = l.kept.clone();
        keep.extend(l.params.iter().filter(|p| !params.contains(p)));
        let set_moves = loop_moves(&set, &keep);
        let in_order = in_order(&set, &params);
        let moved: FxHashSet<u32> = set
            .atoms()
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                CAtom::Local(s) if i < 32 && set_moves.0 & (1 << i) != 0 => Some(*s),
                _ => None,
            })
            .collect();
        let mut clear: Vec<u32> = l.temps.iter().copied().filter(|s| !moved.contains(s)).collect();
        clear.sort_unstable();
        let again = Again {
            args: atoms,
            global,
            moves,
            set,
            set_moves,
            params: params.into(),
            in_order,
            clear: clear.into(),
            site: *site,
        };
        Some(CExpr::Again(Box::new(again)))
    }

    /// Binds `x` to the value of `ce` (resolved already: the blocks nested in
    /// it have their slots), once the variables read last by it (`dying`)
    /// have freed theirs.
    fn bind_let(&mut self, binds: &mut Vec<CBind>, x: VarId, ce: CExpr, dying: Vec<VarId>) {
        self.release_all(dying);
        let s = self.bind(x);
        binds.push(CBind::Let(s, ce));
    }

    fn bind(&mut self, v: VarId) -> u32 {
        if let Some(CAtom::Local(s)) = self.map.get(&v) {
            return *s;
        }
        let s = match self.free_slot(v) {
            Some(s) => s,
            None => {
                self.nslots += 1;
                self.nslots - 1
            }
        };
        self.map.insert(v, CAtom::Local(s));
        if let Some(l) = self.loops.last_mut() {
            if !l.params.contains(&s) && l.temps_set.insert(s) {
                l.temps.push(s);
            }
        }
        s
    }

    /// A free slot for variable `v`: the slot preferred for it if that is
    /// free, else the one freed last that no other variable prefers.
    fn free_slot(&mut self, v: VarId) -> Option<u32> {
        if self.prefer.is_empty() {
            return self.free.pop();
        }
        if let Some(k) = self.prefer.iter().position(|(x, _)| *x == v) {
            let (_, s) = self.prefer.remove(k);
            if let Some(i) = self.free.iter().rposition(|f| *f == s) {
                return Some(self.free.remove(i));
            }
        }
        let i = self.free.iter().rposition(|f| !self.prefer.iter().any(|(_, s)| s == f))?;
        Some(self.free.remove(i))
    }

    /// Frees the slot of a variable that is no longer read.
    fn release(&mut self, v: VarId) {
        if let Some(s) = self.slot_of(v) {
            self.free.push(s);
        }
    }

    /// The frame slot of variable `v`, if it has one.
    fn slot_of(&self, v: VarId) -> Option<u32> {
        match self.map.get(&v) {
            Some(CAtom::Local(s)) => Some(*s),
            _ => None,
        }
    }

    fn release_all(&mut self, vs: Vec<VarId>) {
        for v in vs {
            self.release(v);
        }
    }

    fn atom(&self, a: &Atom) -> CAtom {
        match a {
            Atom::Var(v) => self.map.get(v).or_else(|| self.outer.get(v)).cloned().unwrap_or_else(|| {
                panic!("internal error: unresolved variable {}", crate::anf::var_name(*v))
            }),
            Atom::Global(g) => CAtom::Global(*g),
            Atom::Const(c) => CAtom::Const(c.clone()),
        }
    }

    fn args(&self, a: &Args) -> CArgs {
        match a {
            Args::One(x) => CArgs::One(self.atom(x)),
            Args::Tuple(xs) => CArgs::Tuple(xs.iter().map(|x| self.atom(x)).collect()),
        }
    }

    fn captures(&self, g: &Group) -> Box<[CAtom]> {
        g.free.iter().map(|v| self.atom(&Atom::Var(*v))).collect()
    }

    /// [`Resolver::expr`] of the expression of a binding after which the
    /// variables `dying` are no longer read (see [`Resolver::branches`]).
    fn expr_at(&mut self, e: &Expr, dying: &[VarId]) -> CExpr {
        match e {
            Expr::If(c, t, f) => {
                let c = Cond::Atom(self.atom(c));
                self.branches(c, t, f, dying)
            }
            Expr::Cons(a, d) => {
                let last = |x: &Atom| matches!(x, Atom::Var(v) if dying.contains(v));
                let (ca, cd) = (self.atom(a), self.atom(d));
                let (la, ld) = (matches!(ca, CAtom::Local(_)), matches!(cd, CAtom::Local(_)));
                // (the car is read first: not moved where the cdr reads it too)
                let same = matches!((&ca, &cd), (CAtom::Local(x), CAtom::Local(y)) if x == y);
                let moves = u8::from(la && last(a) && !same) | u8::from(ld && last(d)) << 1;
                CExpr::Cons(ca, cd, moves)
            }
            e => self.expr(e),
        }
    }

    fn expr(&mut self, e: &Expr) -> CExpr {
        match e {
            Expr::Atom(a) => CExpr::Atom(self.atom(a)),
            Expr::App(f, args, s) => CExpr::App(self.atom(f), self.args(args), *s, Moves::default()),
            Expr::Prim(p, Args::Tuple(xs), s)
                if xs.len() == 2 && Op2::of(crate::prims::prim(*p).name).is_some() =>
            {
                let op = Op2::of(crate::prims::prim(*p).name).unwrap();
                match (self.atom(&xs[0]), self.atom(&xs[1])) {
                    (CAtom::Local(x), CAtom::Const(Value::Int(k))) => CExpr::Arith2Int(op, x, k, *p, *s),
                    (a, b) => CExpr::Arith2(op, a, b, *p, *s),
                }
            }
            Expr::Prim(p, Args::One(x), s) if Retag::of(crate::prims::prim(*p).name).is_some() => {
                let op = Retag::of(crate::prims::prim(*p).name).unwrap();
                CExpr::Retag(op, self.atom(x), *p, *s)
            }
            Expr::Prim(p, Args::Tuple(xs), s) if xs.len() == 2 && crate::prims::prim(*p).name == "plus" => {
                CExpr::Plus(self.atom(&xs[0]), self.atom(&xs[1]), *p, *s)
            }
            Expr::Prim(p, args, s) => CExpr::Prim(*p, self.args(args), *s),
            Expr::Cons(a, d) => CExpr::Cons(self.atom(a), self.atom(d), 0),
            Expr::Lambda(g) => CExpr::Closure(g.clone(), self.captures(g)),
            Expr::If(c, t, f) => {
                let c = Cond::Atom(self.atom(c));
                self.branches(c, t, f, &[])
            }
            Expr::MakeEnvSens(g, i, xs) => {
                CExpr::MakeEnvSens(g.clone(), *i, xs.iter().map(|x| self.atom(x)).collect())
            }
            Expr::MakeEnvSensLike(l, xs) => {
                CExpr::MakeEnvSensLike(self.atom(l), xs.iter().map(|x| self.atom(x)).collect())
            }
        }
    }

    /// `ce`, the call bound by binding `i` of block `b`, as a
    /// [`CExpr::AppArith`] if its one argument is the arithmetic bound just
    /// before (the last of `binds`, taken off them) and read nowhere else;
    /// else `ce`. (Not where the call's pair is taken apart next: that
    /// binding and the call become a `CBind::Split`.)
    fn arith_arg_fused(
        &self,
        binds: &mut Vec<CBind>,
        b: &Block,
        i: usize,
        ce: CExpr,
        split_next: bool,
    ) -> (CExpr, Option<VarId>) {
        let CExpr::App(f, CArgs::One(CAtom::Local(a)), call, _) = &ce else { return (ce, None) };
        let (
            Some(Bind::Let(t, Expr::Prim(..))),
            Some(Bind::Let(_, Expr::App(_, Args::One(Atom::Var(t2)), _))),
        ) = (i.checked_sub(1).and_then(|j| b.binds.get(j)), b.binds.get(i))
        else {
            return (ce, None);
        };
        if t != t2 || self.uses.get(t).copied() != Some(1) || split_next {
            return (ce, None);
        }
        match binds.last() {
            Some(CBind::Let(s, CExpr::Arith2(..) | CExpr::Arith2Int(..))) if s == a => {}
            _ => return (ce, None),
        }
        let Some(CBind::Let(_, arg)) = binds.pop() else { unreachable!("checked above") };
        (CExpr::AppArith(Box::new(AppArith { f: f.clone(), arg, call: *call })), Some(*t))
    }

    /// The index of the first binding of block `b` (run as a procedure's
    /// body or a branch of an `if` in tail position) from which the calls
    /// bound to variables run in place ([`CBind::PushArith`], `PushApp`):
    /// the last bindings before the block's result, if they are calls and
    /// arithmetic passed to the call after it (fused into it, see
    /// [`Resolver::arith_arg_fused`]), and the result is arithmetic or an
    /// `if` (neither needs slots; a call there may run in place and need
    /// some, and those would then need `Grow`s). `b.binds.len()` if there
    /// are none.
    fn push_from(&self, b: &Block) -> usize {
        let n = b.binds.len();
        let mut end = n;
        if let Some(Bind::Let(x, e)) = b.binds.last() {
            if matches!(&b.result, Atom::Var(r) if r == x) {
                if !matches!(e, Expr::Prim(..) | Expr::If(..)) {
                    return n;
                }
                end = n - 1;
                // (a comparison the `if` reads)
                if matches!(e, Expr::If(..))
                    && matches!(b.binds.get(n.wrapping_sub(2)), Some(Bind::Let(_, Expr::Prim(..))))
                {
                    end = n - 2;
                }
            }
        }
        let mut k = end;
        while k > 0 {
            match &b.binds[k - 1] {
                Bind::Let(_, Expr::App(..)) => k -= 1,
                Bind::Let(t, Expr::Prim(..))
                    if k < end
                        && self.uses.get(t).copied() == Some(1)
                        && matches!(&b.binds[k], Bind::Let(_, Expr::App(_, Args::One(Atom::Var(t2)), _)) if t2 == t) =>
                {
                    k -= 1
                }
                _ => break,
            }
        }
        k
    }

    /// Binds `x` to the call `ce` as a `Let` to become a [`CBind::PushArith`]
    /// or `PushApp`: a slot of its own
    /// past every slot used so far; `dying` (the variables the call reads
    /// last) and the slots `released` before it are emptied after the call.
    /// `fused`: the variable of the argument fused into `ce` (`AppArith`),
    /// whose slot is given back (nothing stores it now; emptied too where it
    /// was another's before: unless it is the slot the binding before took
    /// at the top of the frame, if it took one, beside the variable).
    fn bind_push(
        &mut self,
        binds: &mut Vec<CBind>,
        x: VarId,
        ce: CExpr,
        mut dying: Vec<VarId>,
        released: &[u32],
        fused: Option<(VarId, Option<u32>)>,
    ) -> (u32, Box<[u32]>) {
        let mut clear: Vec<u32> = released.to_vec();
        if let Some((t, fresh)) = fused {
            dying.retain(|v| *v != t);
            if let Some(CAtom::Local(ts)) = self.map.remove(&t) {
                if fresh == Some(ts) && ts + 1 == self.nslots {
                    self.nslots -= 1;
                } else {
                    // (a slot freed by a variable before: the store that
                    // would have dropped its value there is gone)
                    self.free.push(ts);
                    clear.push(ts);
                }
            }
        }
        clear.extend(dying.iter().filter_map(|v| self.slot_of(*v)));
        self.release_all(dying);
        let s = self.nslots;
        self.nslots += 1;
        clear.retain(|c| *c != s);
        clear.sort_unstable();
        clear.dedup();
        self.map.insert(x, CAtom::Local(s));
        binds.push(CBind::Let(s, ce));
        (s, clear.into_boxed_slice())
    }

    /// Bindings `i`, `i + 1` and `i + 2` of a block, if they are
    /// `(a (sensitize x)) (r (bp a)) (c (unsensitize r))` with `a` and `r` read
    /// nowhere else, the tag operations being the primitives or (in a
    /// forward-transformed backpropagator) constant closures of their forward
    /// versions: a [`CExpr::BpCall`] (bound to `c`).
    fn bp_call_at(&self, b: &Block, i: usize) -> Option<BpCall> {
        let (
            Some(Bind::Let(a, first)),
            Some(Bind::Let(r, Expr::App(bp, Args::One(Atom::Var(a2)), call))),
            Some(Bind::Let(_, last)),
        ) = (b.binds.get(i), b.binds.get(i + 1), b.binds.get(i + 2))
        else {
            return None;
        };
        let once = |v: &VarId| self.uses.get(v).copied() == Some(1);
        if a2 != a || !once(a) || !once(r) {
            return None;
        }
        let (true, fwd1, x) = tag_step(first)? else { return None };
        let (false, fwd2, r2) = tag_step(last)? else { return None };
        if fwd1 != fwd2 || !matches!(&r2, Atom::Var(v) if v == r) {
            return None;
        }
        // (how the evaluator applies each: the primitive, or a call of its forward version)
        let step = |e: &Expr| match e {
            Expr::Prim(p, _, s) => Some(Step::Prim(*p, *s)),
            Expr::App(f, _, s) => Some(Step::Call(self.atom(f), *s)),
            _ => None,
        };
        let (sensitize, unsensitize) = (step(first)?, step(last)?);
        Some(BpCall {
            bp: self.atom(bp),
            x: self.atom(&x),
            sensitize,
            unsensitize,
            call: *call,
            forward: fwd1,
        })
    }

    fn block(&mut self, b: &Block) -> CBlock {
        crate::stack::grow(|| self.block_here(b))
    }

    fn block_here(&mut self, b: &Block) -> CBlock {
        match self.sink_named_let(b) {
            Some(sunk) => self.block_resolved(&sunk),
            None => self.block_resolved(b),
        }
    }

    /// Block `b` with the `letrec` of each named `let`'s loop moved down to
    /// just before its call where the computations of the loop's first
    /// arguments (the `let`'s initial values, which do not see the loop) came
    /// between the two: `(let loop ((x x) (fx (f x))) ...)` is `((letrec
    /// ((loop ...)) loop) x (f x))`, whose A-normal form builds the procedure,
    /// then computes `(f x)`, then calls it. Building a procedure runs
    /// nothing, so the order is the same to the program; side by side the
    /// two make a [`Loop`] (see [`Resolver::loop_at`],
    /// [`Resolver::inner_loop_at`]). `None` where that does not apply
    /// (nothing to move, or the procedure would not run as a loop). The
    /// binding indices `last` records for the variables `b` binds (and the
    /// parameters bound before it) are moved with their bindings.
    fn sink_named_let(&mut self, b: &Block) -> Option<Block> {
        if !self.make_loops {
            return None;
        }
        // (each procedure variable's call, where a binding of the block is one)
        let mut calls: FxHashMap<VarId, usize> = FxHashMap::default();
        for (k, bind) in b.binds.iter().enumerate() {
            if let Bind::Let(_, Expr::App(Atom::Var(f), _, _)) = bind {
                calls.insert(*f, k);
            }
        }
        // (the `letrec`s that move, by the index of their call)
        let mut moving: FxHashMap<usize, usize> = FxHashMap::default();
        for (j, bind) in b.binds.iter().enumerate() {
            let Bind::Letrec(names, g) = bind else { continue };
            let [lp] = names.as_slice() else { continue };
            let Some(&k) = calls.get(lp) else { continue };
            let Bind::Let(_, Expr::App(_, args, _)) = &b.binds[k] else { continue };
            if k > j + 1 && self.loop_plan(*lp, g, args).is_some() {
                moving.insert(k, j);
            }
        }
        if moving.is_empty() {
            return None;
        }
        let moved: FxHashSet<usize> = moving.values().copied().collect();
        let n = b.binds.len();
        let mut binds = Vec::with_capacity(n);
        let mut pos = vec![0; n + 1];
        pos[n] = n;
        for (k, bind) in b.binds.iter().enumerate() {
            if moved.contains(&k) {
                continue;
            }
            if let Some(&j) = moving.get(&k) {
                pos[j] = binds.len();
                binds.push(b.binds[j].clone());
            }
            pos[k] = binds.len();
            binds.push(bind.clone());
        }
        let vars: FxHashSet<VarId> =
            b.binds.iter().flat_map(bound_vars).chain(self.params.iter().copied()).collect();
        for v in &vars {
            if let Some(i) = self.last.get_mut(v) {
                *i = pos[*i];
            }
        }
        // (what a moved procedure captures is read where it is built now, at the latest)
        for &j in &moved {
            let Bind::Letrec(_, g) = &b.binds[j] else { continue };
            for v in g.free.iter().filter(|v| vars.contains(v)) {
                if let Some(i) = self.last.get_mut(v) {
                    *i = (*i).max(pos[j]);
                }
            }
        }
        Some(Block { binds, result: b.result.clone() })
    }

    fn block_resolved(&mut self, b: &Block) -> CBlock {
        let mut binds = Vec::with_capacity(b.binds.len());
        let n = b.binds.len();
        let mut tail = None;
        let mut frame = 0;
        let mut fused: Option<Cond> = None;
        // Liveness: the variables this block binds (and the parameter, for a
        // procedure's body) by the index of the binding that reads them last
        // (`n`: the result), so that their slots can be reused: by the results of
        // that binding (every binding reads its operands before it stores its
        // results; the blocks nested in it are resolved before, so they do not
        // reuse them) and by the bindings after it. Variables never read free
        // their slots after the binding that binds them.
        let mut dying: Vec<Vec<VarId>> = vec![Vec::new(); n + 1];
        let mut unread: Vec<Vec<VarId>> = vec![Vec::new(); n + 1];
        for v in std::mem::take(&mut self.params) {
            match self.last.get(&v) {
                Some(&l) => dying[l].push(v),
                None => self.release(v),
            }
        }
        // (the variables of the enclosing block read last by the `if` this
        // block is a branch of: freed where this block reads them last, at
        // once if it does not; a block too large to walk here leaves them to
        // the enclosing block, which frees them after the `if`)
        let entering = std::mem::take(&mut self.entering);
        if !entering.is_empty() {
            if let Some(last) = last_reads_within(b, &entering) {
                for v in entering {
                    match last.get(&v) {
                        Some(&l) => dying[l].push(v),
                        None => self.release(v),
                    }
                }
            }
        }
        for (i, bind) in b.binds.iter().enumerate() {
            for v in bound_vars(bind) {
                match self.last.get(&v) {
                    Some(&l) if l > i => dying[l].push(v),
                    _ => unread[i].push(v),
                }
            }
        }
        // (a block `run_block` sets up on entry, where a call's result may
        // stay where the call leaves it: see `CBind::PushArith`)
        let push_ctx = self.tail && !self.loop_tail && self.loops.is_empty() && self.inlining.is_empty();
        let push_from = if push_ctx { self.push_from(b) } else { n };
        let preferred = self.prefer.len();
        self.prefer_loop_slots(b);
        // A backpropagator call being fused (bindings skipped so far).
        let mut bp_call: Option<(BpCall, usize)> = None;
        // The slots freed after the binding before, and the slot it took at
        // the top of the frame, if it did (see `bind_push`).
        let mut released: Vec<u32> = Vec::new();
        let mut fresh: Option<u32> = None;
        // For each binding made, the frame's size once it was made (the
        // slots it and the blocks nested in it use are below); how many
        // bindings there were before this one, and whether it replaced the
        // last of them (see `sync_marks`).
        let mut marks: Vec<u32> = Vec::new();
        let mut len_before = 0;
        let mut replaced_last = false;
        // The calls bound to become `PushArith`s or `PushApp`s: the index of
        // their `Let`, its slot, the slots to empty after it.
        let mut pushes: Vec<(usize, u32, Box<[u32]>)> = Vec::new();
        let (outer_tail, outer_loop_tail) = (self.tail, self.loop_tail);
        // (the call an inner loop's binding stands for, at the next index)
        let mut skip = false;
        for (i, bind) in b.binds.iter().enumerate() {
            sync_marks(&mut marks, binds.len(), self.nslots, std::mem::take(&mut replaced_last), len_before);
            len_before = binds.len();
            let fresh_before = std::mem::take(&mut fresh);
            // (what this binding's expression holds is in tail position only
            // if the expression is, and the block is)
            let last = i + 1 == n && matches!((bind, &b.result), (Bind::Let(x, _), Atom::Var(r)) if r == x);
            self.tail = outer_tail && last;
            self.loop_tail = outer_loop_tail && last;
            released.clear();
            if i > 0 {
                if fused.is_some() || bp_call.is_some() {
                    // A comparison fused into the `if` after it is read by that
                    // `if`; the operands of a fused backpropagator call, by it.
                    let d = std::mem::take(&mut dying[i - 1]);
                    dying[i].extend(d);
                } else {
                    let d = std::mem::take(&mut dying[i - 1]);
                    released.extend(d.iter().filter_map(|v| self.slot_of(*v)));
                    self.release_all(d);
                }
                let u = std::mem::take(&mut unread[i - 1]);
                released.extend(u.iter().filter_map(|v| self.slot_of(*v)));
                self.release_all(u);
            }
            if std::mem::take(&mut skip) {
                continue;
            }
            match bp_call.take() {
                Some((c, 2)) => {
                    let Bind::Let(x, _) = bind else { unreachable!("checked by bp_call_at") };
                    let ce = CExpr::BpCall(Box::new(c));
                    if i + 1 == n && matches!(&b.result, Atom::Var(r) if r == x) {
                        frame = self.nslots;
                        tail = Some(ce);
                    } else {
                        self.bind_let(&mut binds, *x, ce, std::mem::take(&mut dying[i]));
                    }
                    continue;
                }
                Some((c, k)) => {
                    bp_call = Some((c, k + 1));
                    continue;
                }
                None => {}
            }
            if fused.is_none() {
                if let Some(c) = self.bp_call_at(b, i) {
                    bp_call = Some((c, 1));
                    continue;
                }
            }
            // A comparison, or a test of shape (`null?`, `pair?`), read only by
            // the `if` bound next is fused into it.
            if let Bind::Let(x, Expr::Prim(p, args, s)) = bind {
                let read_by_if =
                    matches!(b.binds.get(i + 1), Some(Bind::Let(_, Expr::If(Atom::Var(c), ..))) if c == x);
                if read_by_if && self.uses.get(x).copied() == Some(1) {
                    let name = crate::prims::prim(*p).name;
                    let cond = match args {
                        Args::Tuple(xs) if xs.len() == 2 => match Op2::of(name) {
                            Some(op) if op.is_comparison() => {
                                Some(match (self.atom(&xs[0]), self.atom(&xs[1])) {
                                    (CAtom::Local(x), CAtom::Const(Value::Int(k))) => {
                                        Cond::CmpInt(op, x, k, *p, *s)
                                    }
                                    (a, b) => Cond::Cmp(op, a, b, *p, *s),
                                })
                            }
                            _ => None,
                        },
                        Args::One(a) => Shape::of(name).map(|shape| Cond::Is(shape, self.atom(a))),
                        _ => None,
                    };
                    if cond.is_some() {
                        fused = cond;
                        continue;
                    }
                }
            }
            if let (Some(c), Bind::Let(x, Expr::If(_, t, f))) = (fused.take(), bind) {
                if i + 1 == n && matches!(&b.result, Atom::Var(r) if r == x) {
                    frame = self.nslots;
                    tail = Some(self.branches(c, t, f, &dying[i]));
                } else {
                    let ce = self.branches(c, t, f, &dying[i]);
                    self.bind_let(&mut binds, *x, ce, std::mem::take(&mut dying[i]));
                }
                continue;
            }
            if let Bind::Letrec(names, g) = bind {
                // (in a call run in place, a loop is an inner block: its
                // body's calls are not the procedure's tail calls)
                if outer_tail && self.inlining.is_empty() {
                    if let Some((f, ce)) = self.loop_at(b, i, names, g, &mut dying) {
                        frame = f;
                        tail = Some(ce);
                        break;
                    }
                }
                if let Some((r, ce)) = self.inner_loop_at(b, i, names, g, &mut dying) {
                    self.bind_let(&mut binds, r, ce, Vec::new());
                    skip = true;
                    continue;
                }
            }
            match bind {
                Bind::Let(x, e) => {
                    if let Expr::Lambda(g) = e {
                        self.record_lambda(*x, g);
                    }
                    if self.tail || self.loop_tail {
                        if let Some(ce) = self.again(e) {
                            frame = self.nslots;
                            tail = Some(ce);
                            continue;
                        }
                    }
                    let is_tail = i + 1 == n && matches!(&b.result, Atom::Var(r) if r == x);
                    let inline = match e {
                        Expr::App(Atom::Global(g), args, s) => self.inline_call(*g, args, *s, self.tail),
                        Expr::App(Atom::Var(v), args, s) => self.inline_var_call(*v, args, *s, self.tail),
                        _ => None,
                    };
                    if let Some(ce) = inline {
                        if is_tail {
                            // (after the body run in place: its slots are in the frame)
                            frame = self.nslots;
                            tail = Some(ce);
                        } else {
                            self.bind_let(&mut binds, *x, ce, std::mem::take(&mut dying[i]));
                        }
                    } else if is_tail {
                        frame = self.nslots;
                        tail = Some(match self.expr_at(e, &dying[i]) {
                            CExpr::App(f, args, s, _) => {
                                let moves = Moves::of(&args);
                                CExpr::App(f, args, s, moves)
                            }
                            e => e,
                        });
                    } else {
                        let ce = self.expr_at(e, &dying[i]);
                        let split_next =
                            matches!(b.binds.get(i + 1), Some(Bind::Uncons(_, _, Atom::Var(r), _)) if r == x);
                        let (ce, fused_arg) = self.arith_arg_fused(&mut binds, b, i, ce, split_next);
                        replaced_last |= fused_arg.is_some();
                        if i >= push_from
                            && matches!(ce, CExpr::App(..) | CExpr::AppArith(_))
                            && !split_next
                            && !self.map.contains_key(x)
                        {
                            let d = std::mem::take(&mut dying[i]);
                            let fused = fused_arg.map(|t| (t, fresh_before));
                            let (slot, clear) = self.bind_push(&mut binds, *x, ce, d, &released, fused);
                            pushes.push((binds.len() - 1, slot, clear));
                        } else {
                            let top = self.nslots;
                            self.bind_let(&mut binds, *x, ce, std::mem::take(&mut dying[i]));
                            fresh = (self.nslots > top).then_some(top);
                        }
                    }
                }
                Bind::Uncons(x, y, a, s) => {
                    let ca = self.atom(a);
                    let moved = matches!((a, &ca), (Atom::Var(r), CAtom::Local(_)) if dying[i].contains(r));
                    self.release_all(std::mem::take(&mut dying[i]));
                    let (sx, sy) = (self.bind(*x), self.bind(*y));
                    // The pair the binding before made (and that nothing else reads).
                    let fresh = match (a, i.checked_sub(1).and_then(|j| b.binds.get(j))) {
                        (Atom::Var(r), Some(Bind::Let(r2, _) | Bind::Uncons(_, r2, _, _))) => {
                            r == r2 && self.uses.get(r).copied() == Some(1)
                        }
                        _ => false,
                    };
                    match binds.pop() {
                        Some(CBind::Let(sr, e)) if fresh && matches!(ca, CAtom::Local(s) if s == sr) => {
                            let rest =
                                if self.uses.contains_key(y) { Split::Slot(sy) } else { Split::Unread };
                            binds.push(CBind::Split(e, sx, rest, *s));
                            replaced_last = true;
                        }
                        Some(CBind::Split(e, sr, Split::Slot(sd), s0))
                            if fresh && matches!(ca, CAtom::Local(s) if s == sd) =>
                        {
                            binds.push(CBind::Split(e, sr, Split::Pair(sx, sy, *s), s0));
                            replaced_last = true;
                        }
                        last => {
                            binds.extend(last);
                            binds.push(CBind::Uncons(sx, sy, ca, *s, moved));
                        }
                    }
                }
                Bind::Check(c, a, s) => binds.push(CBind::Check(c.clone(), self.atom(a), *s)),
                Bind::Letrec(names, g) => {
                    let caps = self.captures(g);
                    self.release_all(std::mem::take(&mut dying[i]));
                    let slots: Box<[u32]> = names.iter().map(|n| self.bind(*n)).collect();
                    binds.push(CBind::Letrec(slots, g.clone(), caps, std::cell::OnceCell::new()));
                }
                Bind::EnvSens(xs, a) => {
                    let a = self.atom(a);
                    self.release_all(std::mem::take(&mut dying[i]));
                    let slots = xs.iter().map(|x| self.bind(*x)).collect();
                    binds.push(CBind::EnvSens(slots, a));
                }
            }
        }
        self.tail = outer_tail;
        self.loop_tail = outer_loop_tail;
        let tail = tail.unwrap_or_else(|| {
            frame = self.nslots;
            CExpr::Atom(self.atom(&b.result))
        });
        self.prefer.truncate(preferred);
        sync_marks(&mut marks, binds.len(), self.nslots, replaced_last, len_before);
        // The calls run in place: from the first, the frame is set up as the
        // block runs (`Grow`s where a binding or the tail needs slots past
        // those set up so far); one whose slot was set up already (none is,
        // but a mark taken too high would make it so) stays a `Let`, with a
        // `Clear` after it.
        let mut pre = frame;
        if let Some(&(_, first, _)) = pushes.first() {
            pre = first;
            let mut len = first;
            let mut out = Vec::with_capacity(binds.len() + 2);
            let mut pushes = pushes.into_iter().peekable();
            for (k, (bind, mark)) in binds.into_iter().zip(marks).enumerate() {
                let clear = pushes.next_if(|p| p.0 == k).map(|p| p.2);
                match (bind, clear) {
                    (CBind::Let(s, e @ (CExpr::App(..) | CExpr::AppArith(_))), Some(clear)) if s >= len => {
                        if s > len {
                            out.push(CBind::Grow(s));
                        }
                        len = s + 1;
                        out.push(match e {
                            CExpr::AppArith(c) => CBind::PushArith(s, c, clear),
                            CExpr::App(f, args, span, _) => CBind::PushApp(s, f, args, span, clear),
                            _ => unreachable!("matched above"),
                        });
                    }
                    (bind, clear) => {
                        if mark > len {
                            out.push(CBind::Grow(mark));
                            len = mark;
                        }
                        out.push(bind);
                        if let Some(clear) = clear.filter(|c| !c.is_empty()) {
                            out.push(CBind::Clear(clear));
                        }
                    }
                }
            }
            if frame > len {
                out.push(CBind::Grow(frame));
            }
            // (nothing to empty after the last binding where only inline
            // arithmetic runs before the frame is dropped)
            if matches!(tail, CExpr::Arith2(..) | CExpr::Arith2Int(..)) {
                if let Some(CBind::PushArith(_, _, clear) | CBind::PushApp(.., clear)) = out.last_mut() {
                    *clear = Box::new([]);
                }
            }
            binds = out;
        }
        CBlock { binds, tail, frame, pre }
    }

    /// Where block `b` ends in a call of the innermost loop (an [`Again`] in
    /// tail position of its body): each variable `b` binds that the call
    /// passes prefers the slot of the loop's variable it is passed to (see
    /// `prefer`), so that the call need not move it there.
    fn prefer_loop_slots(&mut self, b: &Block) {
        if !(self.tail || self.loop_tail) {
            return;
        }
        let (Some(Bind::Let(x, e)), Atom::Var(r)) = (b.binds.last(), &b.result) else { return };
        let Some((l, _, args, _)) = self.loop_call_of(e).filter(|_| r == x) else { return };
        let xs: &[Atom] = match args {
            Args::One(a) => std::slice::from_ref(a),
            Args::Tuple(xs) => xs,
        };
        if xs.len() != l.params.len() {
            return;
        }
        let params = l.params.clone();
        let bound: FxHashSet<VarId> = b.binds.iter().flat_map(bound_vars).collect();
        for (a, p) in xs.iter().zip(params.iter()) {
            if let Atom::Var(v) = a {
                if bound.contains(v) && !self.prefer.iter().any(|(y, _)| y == v) {
                    self.prefer.push((*v, *p));
                }
            }
        }
    }

    /// An `if`: the two branches share slot numbers (only one of them runs);
    /// what is bound after it gets slots past both.
    /// Each branch frees the slots of the variables of the enclosing block
    /// that the `if` reads last (`dying`) where it reads them last.
    fn branches(&mut self, c: Cond, t: &Block, f: &Block, dying: &[VarId]) -> CExpr {
        let (start, free) = (self.nslots, self.free.clone());
        self.entering = dying.to_vec();
        let t = self.block(t);
        let t_end = self.nslots;
        self.nslots = start;
        self.free = free.clone();
        self.entering = dying.to_vec();
        let f = self.block(f);
        let end = self.nslots.max(t_end);
        // The branches' variables are dead after the `if`: all their slots are free.
        self.nslots = end;
        self.free = free;
        self.free.extend((start..end).rev());
        CExpr::If(c, Box::new(t), Box::new(f))
    }
}

/// Variables used (read) anywhere in a block, for the AD transforms.
pub fn used_vars(b: &Block) -> FxHashSet<VarId> {
    let mut uses = FxHashMap::default();
    count_uses_block(b, &mut uses);
    uses.into_keys().collect()
}

#[cfg(test)]
mod tests;
