//! Lowering of a procedure's resolved code (`resolve::LambdaCode`) to
//! Cranelift's IR, and the module the code lives in (see the parent module).

use super::{
    arith_prim, arity, callee, lambda_ok, makes_values, start, walk_lists, ClosureEntry, Entry, LoopEntry,
    Unary, BOOL, COMPACT_AFTER, FAIL, INT, MADE_LEN, NIL, OTHER, PAIR, REAL,
};
use crate::anf::Group;
use crate::eval::{Machine, JIT_DEPTH, JIT_FUEL, JIT_STACK_LO, JIT_STACK_SPAN};
use crate::resolve::{
    Again, CArgs, CAtom, CBind, CBlock, CExpr, Cond, Guard, Inline, LambdaCode, Loop, Op2, Shape,
};
use crate::value::{InstRc, Value};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F64, I64};
use cranelift_codegen::ir::{self, AbiParam, InstBuilder, MemFlags, Signature};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Module};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

/// The code compiled on this thread (values and code are never shared
/// between threads), and what compiling needs, made on first use. Nothing
/// is freed before the thread ends: a procedure's state may point to its
/// entry for as long as its code is held.
struct Jit {
    module: JITModule,
    ctx: cranelift_codegen::Context,
    fctx: FunctionBuilderContext,
    /// (boxed: a procedure's state holds its entry's address)
    #[allow(clippy::vec_box)]
    entries: Vec<Box<Entry>>,
    #[allow(clippy::vec_box)]
    loop_entries: Vec<Box<LoopEntry>>,
    #[allow(clippy::vec_box)]
    closure_entries: Vec<Box<ClosureEntry>>,
}

thread_local! {
    /// `None`: not made yet; `Some(None)`: this machine has no Cranelift back end.
    static JIT: RefCell<Option<Option<Jit>>> = const { RefCell::new(None) };
}

fn make_jit() -> Option<Jit> {
    // (where the code's two results are returned as `jit::Ret`, a C struct of
    // two words, is: in two registers on these)
    if !cfg!(all(unix, any(target_arch = "x86_64", target_arch = "aarch64"))) {
        return None;
    }
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    // Cranelift checks every function it is given by default; that takes a
    // quarter of the compile time. The debug build (which runs the tests)
    // keeps the check; a release build trusts what the tests have verified.
    if !cfg!(debug_assertions) {
        flags.set("enable_verifier", "false").ok()?;
    }
    let isa = cranelift_native::builder().ok()?.finish(settings::Flags::new(flags)).ok()?;
    let module = JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()));
    let ctx = module.make_context();
    Some(Jit {
        module,
        ctx,
        fctx: FunctionBuilderContext::new(),
        entries: Vec::new(),
        loop_entries: Vec::new(),
        closure_entries: Vec::new(),
    })
}

/// The procedures compiled together: `root` and those it calls, directly or
/// through others, with the globals holding them.
struct Cluster {
    lams: Vec<*const LambdaCode>,
    /// Global → index in `lams` of the procedure it holds.
    globals: FxHashMap<u32, usize>,
    deps: Vec<(u32, InstRc)>,
}

/// Each call of a global in `b` (and in the blocks nested in it): the
/// global and the number of arguments; and each loop's call of the
/// procedure through its global (`Again::global`), as `(g, usize::MAX)`.
fn calls(b: &CBlock, out: &mut Vec<(u32, usize)>) {
    for bind in &b.binds {
        match bind {
            CBind::Let(_, e) => expr_calls(e, out),
            CBind::PushArith(_, c, _) => {
                if let CAtom::Global(g) = c.f {
                    out.push((g, 1));
                }
            }
            CBind::PushApp(_, CAtom::Global(g), args, ..) => out.push((*g, args.atoms().len())),
            _ => {}
        }
    }
    expr_calls(&b.tail, out);
}

fn expr_calls(e: &CExpr, out: &mut Vec<(u32, usize)>) {
    match e {
        CExpr::App(CAtom::Global(g), args, ..) => out.push((*g, args.atoms().len())),
        CExpr::Prim(p, args, _) => {
            // (a walk calling a global's procedure on its lists' elements)
            if let (Some(n), Some(CAtom::Global(g))) = (walk_lists(*p), args.atoms().first()) {
                out.push((*g, n));
            }
        }
        CExpr::AppArith(c) => {
            if let CAtom::Global(g) = c.f {
                out.push((g, 1));
            }
        }
        CExpr::If(_, t, f) => {
            calls(t, out);
            calls(f, out);
        }
        CExpr::Inline(il) => calls(&il.body, out),
        CExpr::Loop(lp) => calls(&lp.body, out),
        CExpr::Again(a) => {
            if let Some(g) = a.global {
                out.push((g, usize::MAX));
            }
        }
        _ => {}
    }
}

/// The procedures `root` calls, directly or through others (`root` first
/// where it is a procedure).
fn cluster(m: &mut Machine, root: Root<'_>) -> Option<Cluster> {
    let mut c = Cluster { lams: Vec::new(), globals: FxHashMap::default(), deps: Vec::new() };
    match root {
        Root::Proc(lam) => c.lams.push(lam as *const _),
        Root::Loop(lp, _) => {
            let mut cs = Vec::new();
            calls(&lp.body, &mut cs);
            c.add(m, cs, None)?;
        }
        // (its body calls no global's procedure: see `jit::spec_ok`)
        Root::Closure(..) => {}
    }
    let mut i = 0;
    while i < c.lams.len() {
        // SAFETY: each is the code of a group held by a global of `deps`
        // (or the root, which the caller holds).
        let lam = unsafe { &*c.lams[i] };
        let mut cs = Vec::new();
        calls(&lam.body, &mut cs);
        c.add(m, cs, Some((i, lam)))?;
        // (and those the lambdas it runs in place of a walk's calls call)
        let mut cs = Vec::new();
        let mut blocks = lambdas_made(m, &lam.body)?;
        while let Some(b) = blocks.pop() {
            calls(b, &mut cs);
            blocks.extend(lambdas_made(m, b)?);
        }
        c.add(m, cs, None)?;
        i += 1;
    }
    Some(c)
}

/// The bodies of the closures `b` makes (which compiled code runs in place
/// of a walk's calls of them, see `jit::closures_ok`), their code resolved
/// now; `None` where one is not of the kind compiled.
fn lambdas_made<'b>(m: &mut Machine, b: &'b CBlock) -> Option<Vec<&'b CBlock>> {
    let mut groups = Vec::new();
    super::visit(b, &mut |_| {}, &mut |x| {
        if let CBind::Let(_, CExpr::Closure(g, _)) = x {
            groups.push(g);
        }
    });
    let mut out = Vec::new();
    for g in groups {
        let code = m.group_code(g).ok()?;
        if !lambda_ok(g, code) {
            return None;
        }
        out.push(&code.members[0].body);
    }
    Some(out)
}

impl Cluster {
    /// Adds the procedures called by `cs`, the calls made by procedure `at`
    /// (its index and code; `None`: by a loop compiled on its own).
    fn add(
        &mut self,
        m: &mut Machine,
        cs: Vec<(u32, usize)>,
        at: Option<(usize, &LambdaCode)>,
    ) -> Option<()> {
        for (g, n) in cs {
            let j = match self.globals.get(&g) {
                Some(&j) => j,
                None => {
                    let n = if n == usize::MAX { arity(at?.1)? } else { n };
                    let (inst, code) = callee(m, g, n)?;
                    let j = match self.lams.iter().position(|l| *l == code) {
                        Some(j) => j,
                        None => {
                            self.lams.push(code);
                            self.lams.len() - 1
                        }
                    };
                    self.globals.insert(g, j);
                    self.deps.push((g, inst));
                    j
                }
            };
            // SAFETY: as above.
            let callee_arity = arity(unsafe { &*self.lams[j] });
            let ok = match n {
                // (a loop's call of its procedure: the global must hold it)
                usize::MAX => Some(j) == at.map(|a| a.0),
                n => callee_arity == Some(n),
            };
            if !ok {
                return None;
            }
        }
        Some(())
    }
}

/// The globals compiled code calls, each with the procedure it held then.
type Deps = Box<[(u32, InstRc)]>;

/// What a compiled function runs: a procedure, or a named `let`'s loop
/// from its body on (with the slots it reads, see `jit::inputs`).
#[derive(Clone, Copy)]
enum Root<'a> {
    Proc(&'a LambdaCode),
    Loop(&'a Loop, &'a [u32]),
    /// A closure's lambda, with the values the closure it is compiled for
    /// captured and the number of arguments (see [`compile_closure`]).
    Closure(&'a LambdaCode, &'a [Value], usize),
}

pub(super) fn compile(m: &mut Machine, root: &LambdaCode) {
    compile_root(m, Root::Proc(root), &[]);
}

/// Compiles loop `lp` on its own (with the procedures it calls); sets its
/// state to its entry where that can be done. Its frame is at `base`: the
/// closures the slots it calls hold there are those whose lambdas' bodies
/// its code runs in place of its calls of them, where they are of the kind
/// (see `jit::spec_ok`) and the slot holds a closure of the same lambda when
/// the call is made (see [`Gen::expected_call`]).
pub(super) fn compile_loop(m: &mut Machine, lp: &Loop, base: usize) {
    let inputs = super::inputs(lp);
    if inputs.len() > super::MAX_INPUTS {
        return;
    }
    let called = super::value_callees(&lp.body);
    let expected: Vec<(u32, Value)> = inputs
        .iter()
        .filter(|s| called.contains(s))
        .filter_map(|&s| match m.stack.get(base + s as usize) {
            Some(v @ Value::Closure(..)) => Some((s, v.clone())),
            _ => None,
        })
        .collect();
    if let Some(code) = compile_root(m, Root::Loop(lp, &inputs), &expected) {
        JIT.with(|j| {
            let mut j = j.borrow_mut();
            let Some(Some(jit)) = j.as_mut() else { return };
            let entry = Box::new(LoopEntry::new(code.0, lp, inputs, code.1, code.2));
            lp.jit.set(&*entry as *const LoopEntry as usize);
            jit.loop_entries.push(entry);
        });
    }
}

/// Compiles the body of `lam`, a lambda of the kind `jit::spec_ok` takes,
/// for calls of its closures on `nargs` arguments (see `jit::run_closure`,
/// `jit::entry`); sets its state to its
/// entry where that can be done and is worth it (`jit::runs_calls_in_place`).
/// `inst`, the closure called as the count ran out, is the one whose
/// captured closures are expected (as a loop's slots' are, see
/// [`compile_loop`]).
pub(super) fn compile_closure(m: &mut Machine, lam: &LambdaCode, inst: &InstRc, nargs: usize) {
    if super::entry(lam, nargs).is_none()
        || super::pair_layout().is_none()
        || !super::runs_calls_in_place(lam, &inst.env)
    {
        return;
    }
    if let Some(code) = compile_root(m, Root::Closure(lam, &inst.env, nargs), &[]) {
        JIT.with(|j| {
            let mut j = j.borrow_mut();
            let Some(Some(jit)) = j.as_mut() else { return };
            let entry = Box::new(ClosureEntry::new(code.0, nargs, code.2));
            lam.closure_jit.set(&*entry as *const ClosureEntry as usize);
            jit.closure_entries.push(entry);
        });
    }
}

/// Compiles `root` and the procedures it calls, setting their states to
/// their entries; for a loop, its code, the globals it depends on and the
/// groups of the closures it expects (`expected`: the slots a loop calls and
/// the closures they held, see [`compile_loop`]).
fn compile_root(
    m: &mut Machine,
    root: Root<'_>,
    expected: &[(u32, Value)],
) -> Option<(*const u8, Deps, Vec<Rc<Group>>)> {
    let c = cluster(m, root)?;
    JIT.with(|j| {
        let mut j = j.borrow_mut();
        let jit = j.get_or_insert_with(make_jit).as_mut()?;
        let sig = |module: &JITModule, n: usize| {
            let mut s = module.make_signature();
            s.params.push(AbiParam::new(I64));
            for _ in 0..2 * n {
                s.params.push(AbiParam::new(I64));
            }
            s.returns.push(AbiParam::new(I64));
            s.returns.push(AbiParam::new(I64));
            s
        };
        // (a loop's code takes the machine and the address of its inputs; a
        // closure's, the machine, the address of the values the closure
        // captured, and that of its arguments)
        let root_sig = match root {
            Root::Loop(..) => Some(1),
            Root::Closure(..) => Some(2),
            Root::Proc(_) => None,
        }
        .map(|n| {
            let mut s = sig(&jit.module, 0);
            for _ in 0..n {
                s.params.push(AbiParam::new(I64));
            }
            s
        });
        let mut ids = Vec::new();
        for &l in &c.lams {
            // SAFETY: see `cluster`.
            let n = arity(unsafe { &*l }).unwrap_or(1);
            let s = sig(&jit.module, n);
            ids.push(jit.module.declare_anonymous_function(&s).ok()?);
        }
        let loop_id = match &root_sig {
            Some(s) => Some(jit.module.declare_anonymous_function(s).ok()?),
            None => None,
        };
        let mut tick_sig = jit.module.make_signature();
        tick_sig.params.push(AbiParam::new(I64));
        tick_sig.returns.push(AbiParam::new(I64));
        let mut todo: Vec<(FuncId, Signature, usize, Root<'_>)> = Vec::new();
        for (k, &l) in c.lams.iter().enumerate() {
            // SAFETY: see `cluster`.
            let lam = unsafe { &*l };
            todo.push((ids[k], sig(&jit.module, arity(lam).unwrap_or(1)), k, Root::Proc(lam)));
        }
        if let (Some(id), Some(s)) = (loop_id, root_sig) {
            todo.push((id, s, usize::MAX, root));
        }
        let mut groups = Vec::new();
        for (id, s, me, r) in todo {
            jit.ctx.func.signature = s;
            build(jit, &c, &ids, me, r, tick_sig.clone(), expected, &mut groups);
            let ok = jit.module.define_function(id, &mut jit.ctx).is_ok();
            jit.module.clear_context(&mut jit.ctx);
            if !ok {
                return None;
            }
        }
        jit.module.finalize_definitions().ok()?;
        let deps: Deps = c.deps.into();
        for (k, &l) in c.lams.iter().enumerate() {
            // SAFETY: see `cluster`.
            let lam = unsafe { &*l };
            let code = jit.module.get_finalized_function(ids[k]);
            let entry = Box::new(Entry { code, arity: arity(lam).unwrap_or(1), deps: deps.clone() });
            lam.jit.set(&*entry as *const Entry as usize);
            jit.entries.push(entry);
        }
        Some((loop_id.map_or(std::ptr::null(), |id| jit.module.get_finalized_function(id)), deps, groups))
    })
}

#[allow(clippy::too_many_arguments)]
fn build<'c>(
    jit: &mut Jit,
    c: &'c Cluster,
    ids: &[FuncId],
    me: usize,
    root: Root<'c>,
    tick_sig: Signature,
    expected: &'c [(u32, Value)],
    groups: &mut Vec<Rc<Group>>,
) {
    let mut refs = Vec::with_capacity(ids.len());
    for &id in ids {
        refs.push(jit.module.declare_func_in_func(id, &mut jit.ctx.func));
    }
    let mut b = FunctionBuilder::new(&mut jit.ctx.func, &mut jit.fctx);
    let tick_sig = b.import_signature(tick_sig);
    // (the functions' signatures code calls: parameters, results)
    let mut sig = |params: &[ir::Type], returns: &[ir::Type]| {
        let mut s = Signature::new(b.func.signature.call_conv);
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(returns.iter().map(|t| AbiParam::new(*t)));
        b.import_signature(s)
    };
    let f64_sig = sig(&[F64], &[F64]);
    let f64x2_sig = sig(&[F64; 2], &[F64]);
    let deeper_sig = sig(&[I64; 4], &[I64; 2]);
    let prim_sig = sig(&[I64; 4], &[I64; 2]);
    let uncons_sig = sig(&[I64; 2], &[]);
    let cons_sig = sig(&[I64; 5], &[I64]);
    let snoc_sig = sig(&[I64; 4], &[I64; 2]);
    let value_sig = sig(&[I64; 5], &[I64; 2]);
    let held_sig = sig(&[I64; 6], &[I64; 2]);
    let compact_sig = sig(&[I64; 4], &[]);
    let env_sig = sig(&[I64; 4], &[I64]);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    let fail = b.create_block();
    b.set_cold_block(fail);
    let top = b.create_block();
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let mut g = Gen {
        b,
        m: params[0],
        slots: Vec::new(),
        fail,
        top,
        refs,
        globals: &c.globals,
        me,
        tick_sig,
        deeper_sig,
        prim_sig,
        f64_sig,
        f64x2_sig,
        uncons_sig,
        uncons_out: None,
        cons_sig,
        snoc_sig,
        value_sig,
        held_sig,
        compact_sig,
        held_ops: !matches!(root, Root::Proc(_)),
        loops: Vec::new(),
        env: Vec::new(),
        closures: Vec::new(),
        env_sig,
        expected_slots: Vec::new(),
        expected_env: &[],
        expected_depth: 0,
        groups,
    };
    match root {
        Root::Proc(lam) => {
            for i in 0..arity(lam).unwrap_or(1) {
                g.set_slot(i as u32, V { tag: Tag::D(params[1 + 2 * i]), bits: params[2 + 2 * i] });
            }
            g.b.ins().jump(top, &[]);
            g.b.switch_to_block(top);
            g.block(&lam.body, start(lam), Dest::Return);
        }
        Root::Loop(lp, inputs) => {
            // (its inputs, a tag and bits each, at the address passed; then
            // its body, which its calls of itself jump back to)
            for (i, s) in inputs.iter().enumerate() {
                let flags = MemFlags::trusted();
                let tag = g.b.ins().load(I64, flags, params[1], 16 * i as i32);
                let bits = g.b.ins().load(I64, flags, params[1], 16 * i as i32 + 8);
                g.set_slot(*s, V { tag: Tag::D(tag), bits });
            }
            g.expected_slots = expected.iter().map(|(s, v)| (*s, v)).collect();
            let mark = g.loop_mark(lp, true);
            g.b.ins().jump(top, &[]);
            g.b.switch_to_block(top);
            g.loops.push((top, lp, mark));
            g.block(&lp.body, 0, Dest::Return);
        }
        Root::Closure(lam, env, nargs) => {
            // (the values its closure captured, read where they are, as a
            // closure's run in place of a call are: see `Gen::expected_call`;
            // its arguments, a tag and bits each, at the address passed)
            let layout = super::pair_layout().expect("checked by compile_closure");
            g.env = (0..env.len()).map(|i| g.part(layout, params[1], 16 * i as i32)).collect();
            g.expected_env = env;
            let (from, tuple) = super::entry(lam, nargs).expect("checked by compile_closure");
            for i in 0..nargs {
                let flags = MemFlags::trusted();
                let tag = g.b.ins().load(I64, flags, params[2], 16 * i as i32);
                let bits = g.b.ins().load(I64, flags, params[2], 16 * i as i32 + 8);
                g.set_slot(tuple.unwrap_or(i as u32), V { tag: Tag::D(tag), bits });
            }
            g.b.ins().jump(top, &[]);
            g.b.switch_to_block(top);
            // (its tail calls made as other calls are: see `Gen::call_lambda`)
            let v = g.value(|g, dest| g.block(&lam.body, from, dest));
            g.deliver(v, Dest::Return);
        }
    }
    g.b.switch_to_block(fail);
    let t = g.b.ins().iconst(I64, FAIL);
    let z = g.b.ins().iconst(I64, 0);
    g.b.ins().return_(&[t, z]);
    g.b.seal_all_blocks();
    g.b.finalize();
}

/// A value's tag: known when the code is compiled, or computed.
#[derive(Clone, Copy)]
enum Tag {
    K(i64),
    D(ir::Value),
}

/// A value in compiled code: a tag, and 64 bits (an integer, a double's
/// bits, or 0/1).
#[derive(Clone, Copy)]
struct V {
    tag: Tag,
    bits: ir::Value,
}

/// Where a block's value goes: returned, or stored in two variables before
/// a jump to the block that reads them.
#[derive(Clone, Copy)]
enum Dest {
    Return,
    Join(ir::Block, Variable, Variable),
}

struct Gen<'a, 'c> {
    b: FunctionBuilder<'a>,
    /// The machine.
    m: ir::Value,
    /// Each slot's tag and bits.
    slots: Vec<(Variable, Variable)>,
    /// Gives up.
    fail: ir::Block,
    /// The body, with the parameters set.
    top: ir::Block,
    refs: Vec<ir::FuncRef>,
    globals: &'c FxHashMap<u32, usize>,
    me: usize,
    tick_sig: ir::SigRef,
    /// `jit::deeper`'s.
    deeper_sig: ir::SigRef,
    /// `jit::call_prim`'s.
    prim_sig: ir::SigRef,
    /// A function of a double to a double (`Unary::function`).
    f64_sig: ir::SigRef,
    /// A function of two doubles to a double (`jit::atan2`).
    f64x2_sig: ir::SigRef,
    /// `jit::uncons`'s.
    uncons_sig: ir::SigRef,
    /// The four words `jit::uncons` writes (one slot serves every pair the
    /// function takes apart), made at the first.
    uncons_out: Option<ir::StackSlot>,
    /// `jit::cons`'s and `jit::snoc`'s.
    cons_sig: ir::SigRef,
    snoc_sig: ir::SigRef,
    /// `jit::call_value`'s.
    value_sig: ir::SigRef,
    /// `jit::held_arith`'s.
    held_sig: ir::SigRef,
    /// `jit::compact`'s.
    compact_sig: ir::SigRef,
    /// A loop's code, which may meet values it holds but cannot take apart
    /// (`jit::HELD`): arithmetic and comparisons on them are made by the
    /// evaluator (`jit::held_arith`) instead of giving up.
    held_ops: bool,
    /// The loops entered: each one's top, its variables' slots, and, for a
    /// loop that makes values, how many the machine held as it was entered
    /// (see `jit::compact`).
    loops: Vec<(ir::Block, &'c Loop, Option<ir::Value>)>,
    /// In a lambda's body run in place of a walk's call of it: the values
    /// its closure captured (`CAtom::Env`).
    env: Vec<V>,
    /// The slots holding closures that walks call (see `jit::closures_ok`),
    /// each with its lambda's code and the values it captured: never made.
    closures: Vec<(u32, &'c LambdaCode, Vec<V>)>,
    /// `jit::closure_env`'s.
    env_sig: ir::SigRef,
    /// In a loop's code, the slots it calls whose closures' lambdas it may
    /// run in place of the calls (see [`Gen::expected_call`]), each with
    /// the closure the slot held as the loop was compiled.
    expected_slots: Vec<(u32, &'c Value)>,
    /// In a lambda's body run so: the values its closure captured when the
    /// loop was compiled (the closures among them, expected as the slots'
    /// are).
    expected_env: &'c [Value],
    /// How many such bodies the code being built is in.
    expected_depth: usize,
    /// The groups of the closures expected (see `LoopEntry`).
    groups: &'a mut Vec<Rc<Group>>,
}

/// The most bodies of lambdas of closures run in place of calls of them one
/// in another (see [`Gen::expected_call`]).
const MAX_EXPECTED_DEPTH: usize = 4;

/// What a walk calls on its lists' elements (see [`Gen::walk`]).
enum WalkFn<'c> {
    Unary(Unary),
    Arith(Op2),
    Global(&'c CAtom),
    Lambda(&'c LambdaCode, Vec<V>),
}

impl<'c> Gen<'_, 'c> {
    fn vars(&mut self, s: u32) -> (Variable, Variable) {
        while self.slots.len() <= s as usize {
            let t = self.b.declare_var(I64);
            let x = self.b.declare_var(I64);
            self.slots.push((t, x));
        }
        self.slots[s as usize]
    }

    fn set_slot(&mut self, s: u32, v: V) {
        self.closures.retain(|c| c.0 != s);
        self.expected_slots.retain(|c| c.0 != s);
        let (t, x) = self.vars(s);
        let tv = self.tag(v.tag);
        self.b.def_var(t, tv);
        self.b.def_var(x, v.bits);
    }

    fn tag(&mut self, t: Tag) -> ir::Value {
        match t {
            Tag::K(k) => self.b.ins().iconst(I64, k),
            Tag::D(v) => v,
        }
    }

    fn konst(&mut self, tag: i64, bits: i64) -> V {
        V { tag: Tag::K(tag), bits: self.b.ins().iconst(I64, bits) }
    }

    fn atom(&mut self, a: &CAtom) -> V {
        match a {
            CAtom::Local(s) => {
                let (t, x) = self.vars(*s);
                V { tag: Tag::D(self.b.use_var(t)), bits: self.b.use_var(x) }
            }
            CAtom::Const(Value::Int(x)) => self.konst(INT, *x),
            CAtom::Const(Value::Real(x)) => self.konst(REAL, x.to_bits() as i64),
            CAtom::Const(Value::Bool(x)) => self.konst(BOOL, *x as i64),
            CAtom::Const(Value::Nil) => self.konst(NIL, 0),
            CAtom::Env(i) => match self.env.get(*i as usize) {
                Some(v) => *v,
                None => self.give_up(),
            },
            // (not compiled: see `jit::atom_ok`)
            _ => self.give_up(),
        }
    }

    fn atoms(&mut self, xs: &[CAtom]) -> Vec<V> {
        xs.iter().map(|a| self.atom(a)).collect()
    }

    /// Jumps to `fail`; what follows is unreachable (a value for it to use).
    fn give_up(&mut self) -> V {
        self.b.ins().jump(self.fail, &[]);
        let dead = self.b.create_block();
        self.b.switch_to_block(dead);
        self.konst(BOOL, 0)
    }

    /// Goes on where `ok` is true; gives up otherwise.
    fn check(&mut self, ok: ir::Value) {
        let cont = self.b.create_block();
        self.b.ins().brif(ok, cont, &[], self.fail, &[]);
        self.b.switch_to_block(cont);
    }

    /// Gives up where `v` is an `OTHER` (or a `HELD`, the tags from
    /// `OTHER` on).
    fn not_other(&mut self, v: V) {
        match v.tag {
            Tag::K(k) if k < OTHER => {}
            _ => {
                let t = self.tag(v.tag);
                let bad = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, t, OTHER);
                self.fail_if(bad);
            }
        }
    }

    /// Gives up where `bad` is true.
    fn fail_if(&mut self, bad: ir::Value) {
        let cont = self.b.create_block();
        self.b.ins().brif(bad, self.fail, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    fn load(&mut self, offset: usize) -> ir::Value {
        self.b.ins().load(I64, MemFlags::trusted(), self.m, offset as i32)
    }

    fn store(&mut self, offset: usize, v: ir::Value) {
        self.b.ins().store(MemFlags::trusted(), v, self.m, offset as i32);
    }

    /// A step (`Machine::tick`): the countdown, and the check of the limits
    /// where it runs out.
    fn tick(&mut self) {
        let f = self.load(JIT_FUEL);
        let f1 = self.b.ins().iadd_imm(f, -1);
        self.store(JIT_FUEL, f1);
        let out = self.b.ins().icmp_imm(IntCC::Equal, f1, 0);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let cont = self.b.create_block();
        self.b.ins().brif(out, slow, &[], cont, &[]);
        self.b.switch_to_block(slow);
        let addr = self.b.ins().iconst(I64, super::tick as *const () as usize as i64);
        let call = self.b.ins().call_indirect(self.tick_sig, addr, &[self.m]);
        let r = self.b.inst_results(call)[0];
        self.b.ins().brif(r, self.fail, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// A level taken for a nested call (`--max-depth`).
    fn level_down(&mut self) {
        let d = self.load(JIT_DEPTH);
        let d1 = self.b.ins().iadd_imm(d, -1);
        self.store(JIT_DEPTH, d1);
        let bad = self.b.ins().icmp_imm(IntCC::SignedLessThan, d1, 0);
        self.fail_if(bad);
    }

    fn level_up(&mut self) {
        let d = self.load(JIT_DEPTH);
        let d1 = self.b.ins().iadd_imm(d, 1);
        self.store(JIT_DEPTH, d1);
    }

    /// Whether the native stack has room for a call (as `Machine::stack_ok`
    /// tells).
    fn stack_ok(&mut self) -> ir::Value {
        let sp = self.b.ins().get_stack_pointer(I64);
        let lo = self.load(JIT_STACK_LO);
        let span = self.load(JIT_STACK_SPAN);
        let d = self.b.ins().isub(sp, lo);
        self.b.ins().icmp(IntCC::UnsignedLessThan, d, span)
    }

    fn block(&mut self, blk: &'c CBlock, start: usize, dest: Dest) {
        for bind in &blk.binds[start.min(blk.binds.len())..] {
            self.bind(bind);
        }
        self.tail(&blk.tail, dest);
    }

    fn bind(&mut self, bind: &'c CBind) {
        match bind {
            CBind::Let(s, CExpr::Closure(g, caps)) => {
                // (a closure only walks call: its captured values kept for
                // its body, run in place of each call; see `jit::closures_ok`)
                let vs = self.atoms(caps);
                match g.code.get() {
                    Some(code) if code.members.len() == 1 => {
                        self.closures.retain(|c| c.0 != *s);
                        self.closures.push((*s, &code.members[0], vs));
                    }
                    _ => {
                        self.give_up();
                    }
                }
            }
            CBind::Let(s, e) => {
                let v = self.expr(e);
                self.set_slot(*s, v);
            }
            CBind::PushArith(s, c, _) => {
                let x = self.expr(&c.arg);
                let v = self.app(&c.f, vec![x], false);
                self.set_slot(*s, v);
            }
            CBind::PushApp(s, f, args, ..) => {
                let vs = self.atoms(args.atoms());
                let v = self.app(f, vs, false);
                self.set_slot(*s, v);
            }
            CBind::Clear(_) | CBind::Grow(_) => {}
            CBind::Uncons(x, y, a, ..) => {
                let v = self.atom(a);
                let (car, cdr) = self.uncons(v);
                self.set_slot(*x, car);
                self.set_slot(*y, cdr);
            }
            _ => {
                self.give_up();
            }
        }
    }

    /// Ends the block being built with `e`, its value going to `dest`.
    fn tail(&mut self, e: &'c CExpr, dest: Dest) {
        match e {
            CExpr::If(c, t, f) => {
                let (tb, fb) = (self.b.create_block(), self.b.create_block());
                self.cond(c, tb, fb);
                // (the closures made before, in each branch)
                let closures = self.closures.clone();
                self.b.switch_to_block(tb);
                self.block(t, 0, dest);
                self.closures.clone_from(&closures);
                self.b.switch_to_block(fb);
                self.block(f, 0, dest);
                self.closures = closures;
            }
            CExpr::App(f, args, ..) if matches!(dest, Dest::Return) => {
                let vs = self.atoms(args.atoms());
                match f {
                    CAtom::Global(g) if self.globals.get(g) == Some(&self.me) => {
                        // A call of itself: its parameters set, its body again.
                        self.tick();
                        for (i, v) in vs.into_iter().enumerate() {
                            self.set_slot(i as u32, v);
                        }
                        self.b.ins().jump(self.top, &[]);
                    }
                    _ => {
                        let v = self.app(f, vs, true);
                        self.deliver(v, dest);
                    }
                }
            }
            CExpr::Loop(lp) => self.run_loop(lp, dest),
            CExpr::Again(a) => self.again(a, dest),
            e => {
                let v = self.expr(e);
                self.deliver(v, dest);
            }
        }
    }

    /// A pair's parts, each as `jit::unbox` gives it, or `OTHER`; anything
    /// but a pair gives up, the evaluator reporting it.
    fn uncons(&mut self, v: V) -> (V, V) {
        let t = self.tag(v.tag);
        let is_pair = self.b.ins().icmp_imm(IntCC::Equal, t, PAIR);
        self.check(is_pair);
        if let Some(l) = super::pair_layout() {
            return (self.part(l, v.bits, l.car), self.part(l, v.bits, l.cdr));
        }
        let slot = *self.uncons_out.get_or_insert_with(|| {
            self.b.create_sized_stack_slot(ir::StackSlotData::new(ir::StackSlotKind::ExplicitSlot, 32, 3))
        });
        let out = self.b.ins().stack_addr(I64, slot, 0);
        let addr = self.b.ins().iconst(I64, super::uncons as *const () as usize as i64);
        self.b.ins().call_indirect(self.uncons_sig, addr, &[v.bits, out]);
        let w: Vec<ir::Value> = (0..4).map(|i| self.b.ins().stack_load(I64, slot, 8 * i)).collect();
        (V { tag: Tag::D(w[0]), bits: w[1] }, V { tag: Tag::D(w[2]), bits: w[3] })
    }

    /// The part at `offset` of the pair at `p`, read as `layout` says (as
    /// `jit::unbox` gives it, but for the bits of `()`, which nothing reads,
    /// and of an `OTHER`, its address, as `jit::uncons` gives it).
    fn part(&mut self, layout: &super::PairLayout, p: ir::Value, offset: i32) -> V {
        let flags = MemFlags::trusted();
        let kind = self.b.ins().uload8(I64, flags, p, offset);
        let table = self.b.ins().iconst(I64, layout.tags.as_ptr() as i64);
        let entry = self.b.ins().iadd(table, kind);
        let tag = self.b.ins().uload8(I64, flags, entry, 0);
        let word = self.b.ins().load(I64, flags, p, offset + 8);
        let flag = self.b.ins().uload8(I64, flags, p, offset + 1);
        let is_bool = self.b.ins().icmp_imm(IntCC::Equal, tag, BOOL);
        let is_pair = self.b.ins().icmp_imm(IntCC::Equal, tag, PAIR);
        let is_other = self.b.ins().icmp_imm(IntCC::Equal, tag, OTHER);
        let moved = self.b.ins().iadd_imm(word, layout.pair);
        let word = self.b.ins().select(is_pair, moved, word);
        let at = self.b.ins().iadd_imm(p, offset as i64);
        let word = self.b.ins().select(is_other, at, word);
        let bits = self.b.ins().select(is_bool, flag, word);
        V { tag: Tag::D(tag), bits }
    }

    /// A call of a function of the machine (and `args`) at `f`: its results.
    fn call_fn(&mut self, sig: ir::SigRef, f: usize, args: &[ir::Value]) -> Vec<ir::Value> {
        let addr = self.b.ins().iconst(I64, f as i64);
        let mut argv = vec![self.m];
        argv.extend_from_slice(args);
        let call = self.b.ins().call_indirect(sig, addr, &argv);
        self.b.inst_results(call).to_vec()
    }

    /// `(cons a d)`: a pair the machine holds until the code returns (see
    /// `jit::Made`).
    fn cons(&mut self, a: V, d: V) -> V {
        let (ta, td) = (self.tag(a.tag), self.tag(d.tag));
        let r = self.call_fn(self.cons_sig, super::cons as *const () as usize, &[ta, a.bits, td, d.bits]);
        let failed = self.b.ins().icmp_imm(IntCC::Equal, r[0], 0);
        self.fail_if(failed);
        V { tag: Tag::K(PAIR), bits: r[0] }
    }

    /// A walk, `(map f l)` or `(map2 f l1 l2)` (see `jit::walk_lists`): the
    /// list of `f`'s values on the lists' elements, first to last, as many
    /// as the first list has, as the primitives make it; gives up where a
    /// list ends in anything but `()`, the second is the shorter, or `f`
    /// gives up on an element.
    fn walk(&mut self, f: &'c CAtom, lists: &'c [CAtom]) -> V {
        let n = lists.len();
        let fun = match f {
            CAtom::Const(Value::Prim(p)) => match (n, Unary::of(*p), arith_prim(*p)) {
                (1, Some(u), _) => WalkFn::Unary(u),
                (2, _, Some(op)) => WalkFn::Arith(op),
                _ => return self.give_up(),
            },
            CAtom::Global(_) => WalkFn::Global(f),
            CAtom::Local(s) => match self.closures.iter().find(|c| c.0 == *s) {
                Some((_, lam, caps)) if arity(lam) == Some(n) => WalkFn::Lambda(lam, caps.clone()),
                _ => return self.give_up(),
            },
            _ => return self.give_up(),
        };
        let ls = self.atoms(lists);
        // (the lists' rests; the list made: its first pair, 0 while empty,
        // and where it ends, see `jit::snoc`)
        let mut vars = Vec::new();
        for l in ls {
            let (t, x) = (self.b.declare_var(I64), self.b.declare_var(I64));
            let tv = self.tag(l.tag);
            self.b.def_var(t, tv);
            self.b.def_var(x, l.bits);
            vars.push((t, x));
        }
        let (first, end) = (self.b.declare_var(I64), self.b.declare_var(I64));
        let zero = self.b.ins().iconst(I64, 0);
        self.b.def_var(first, zero);
        self.b.def_var(end, zero);
        let header = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let (t0, x0) = (self.b.use_var(vars[0].0), self.b.use_var(vars[0].1));
        let is_pair = self.b.ins().icmp_imm(IntCC::Equal, t0, PAIR);
        let (body, done) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(is_pair, body, &[], done, &[]);
        self.b.switch_to_block(body);
        let mut elems = Vec::new();
        for (i, &(t, x)) in vars.iter().enumerate() {
            let l = match i {
                0 => V { tag: Tag::D(t0), bits: x0 },
                _ => V { tag: Tag::D(self.b.use_var(t)), bits: self.b.use_var(x) },
            };
            let (car, cdr) = self.uncons(l);
            let tv = self.tag(cdr.tag);
            self.b.def_var(t, tv);
            self.b.def_var(x, cdr.bits);
            elems.push(car);
        }
        let v = match fun {
            WalkFn::Unary(u) => self.unary(u, elems[0]),
            WalkFn::Arith(op) => self.arith(op, elems[0], elems[1]),
            WalkFn::Global(g) => self.app(g, elems, false),
            WalkFn::Lambda(lam, caps) => self.call_lambda(lam, (start(lam), None), caps, elems, &[]),
        };
        let tv = self.tag(v.tag);
        let e = self.b.use_var(end);
        let r = self.call_fn(self.snoc_sig, super::snoc as *const () as usize, &[e, tv, v.bits]);
        let failed = self.b.ins().icmp_imm(IntCC::Equal, r[1], 0);
        self.fail_if(failed);
        let f = self.b.use_var(first);
        let was_empty = self.b.ins().icmp_imm(IntCC::Equal, e, 0);
        let f = self.b.ins().select(was_empty, r[0], f);
        self.b.def_var(first, f);
        self.b.def_var(end, r[1]);
        self.b.ins().jump(header, &[]);
        // (the first list ended: in `()`, else the evaluator reports it)
        self.b.switch_to_block(done);
        let is_nil = self.b.ins().icmp_imm(IntCC::Equal, t0, NIL);
        self.check(is_nil);
        let f = self.b.use_var(first);
        let empty = self.b.ins().icmp_imm(IntCC::Equal, f, 0);
        let (pair, nil) = (self.b.ins().iconst(I64, PAIR), self.b.ins().iconst(I64, NIL));
        let tag = self.b.ins().select(empty, nil, pair);
        V { tag: Tag::D(tag), bits: f }
    }

    /// A call of a closure's lambda (`lam`, having captured `caps`) on
    /// `args`, its body run here: a step and a level, as the call takes.
    fn call_lambda(
        &mut self,
        lam: &'c LambdaCode,
        (from, tuple): (usize, Option<u32>),
        caps: Vec<V>,
        args: Vec<V>,
        expected_env: &'c [Value],
    ) -> V {
        self.level_down();
        self.tick();
        let slots = std::mem::take(&mut self.slots);
        let env = std::mem::replace(&mut self.env, caps);
        let closures = std::mem::take(&mut self.closures);
        let loops = std::mem::take(&mut self.loops);
        let expected_slots = std::mem::take(&mut self.expected_slots);
        let expected_env = std::mem::replace(&mut self.expected_env, expected_env);
        for (i, a) in args.into_iter().enumerate() {
            self.set_slot(tuple.unwrap_or(i as u32), a);
        }
        let v = self.value(|g, dest| g.block(&lam.body, from, dest));
        (self.slots, self.env, self.closures, self.loops) = (slots, env, closures, loops);
        (self.expected_slots, self.expected_env) = (expected_slots, expected_env);
        self.level_up();
        v
    }

    /// A call (not a tail call) of the procedure `f` holds (a slot a loop
    /// reads, or a value a closure whose body it runs so captured) on `args`,
    /// where the loop was compiled with `f` holding a closure whose lambda's
    /// body compiled code may run in place of a call of it (`jit::spec_ok`):
    /// where `f` holds a closure of the same lambda when the call is made
    /// (`jit::closure_env`), its body run here on the values that closure
    /// captured (a step and a level, as the evaluator's call takes), else the
    /// call made by the evaluator ([`Gen::call_value`]). `None` where no such
    /// closure is expected.
    fn expected_call(&mut self, f: &CAtom, args: &[V]) -> Option<V> {
        if !self.held_ops || self.expected_depth >= MAX_EXPECTED_DEPTH {
            return None;
        }
        let want: &'c Value = match f {
            CAtom::Local(s) => self.expected_slots.iter().find(|x| x.0 == *s)?.1,
            CAtom::Env(i) => self.expected_env.get(*i as usize)?,
            _ => return None,
        };
        let Value::Closure(inst, 0) = want else { return None };
        let code = inst.group.code.get()?;
        if !super::spec_ok(&inst.group, code) {
            return None;
        }
        let lam = &code.members[0];
        let at = super::entry(lam, args.len())?;
        let layout = super::pair_layout()?;
        if !self.groups.iter().any(|g| Rc::ptr_eq(g, &inst.group)) {
            self.groups.push(inst.group.clone());
        }
        let n = inst.env.len();
        let args = args.to_vec();
        let same = |g: &mut Self, env| {
            let caps: Vec<V> = (0..n).map(|i| g.part(layout, env, 16 * i as i32)).collect();
            g.expected_depth += 1;
            let v = g.call_lambda(lam, at, caps, args.clone(), &inst.env);
            g.expected_depth -= 1;
            v
        };
        Some(self.if_closure_of(f, &inst.group, super::closure_env, same, |g| {
            g.call_value(f, args.clone(), false)
        }))
    }

    /// `same` (given the address of the values it captured) where `f` holds a
    /// closure of `group` (as `test`, `jit::closure_env` or `jit::guard_env`,
    /// tells), else `other`.
    fn if_closure_of(
        &mut self,
        f: &CAtom,
        group: &Rc<Group>,
        test: unsafe extern "C" fn(*mut Machine, i64, i64, i64) -> i64,
        same: impl FnOnce(&mut Self, ir::Value) -> V,
        other: impl FnOnce(&mut Self) -> V,
    ) -> V {
        let fv = self.atom(f);
        let ft = self.tag(fv.tag);
        let group = self.b.ins().iconst(I64, Rc::as_ptr(group) as i64);
        let env = self.call_fn(self.env_sig, test as usize, &[ft, fv.bits, group])[0];
        self.value(|g, dest| {
            let (same_b, other_b) = (g.b.create_block(), g.b.create_block());
            g.b.ins().brif(env, same_b, &[], other_b, &[]);
            g.b.switch_to_block(same_b);
            let v = same(g, env);
            g.deliver(v, dest);
            g.b.switch_to_block(other_b);
            let v = other(g);
            g.deliver(v, dest);
        })
    }

    fn deliver(&mut self, v: V, dest: Dest) {
        let t = self.tag(v.tag);
        match dest {
            Dest::Return => {
                self.b.ins().return_(&[t, v.bits]);
            }
            Dest::Join(blk, tv, xv) => {
                self.b.def_var(tv, t);
                self.b.def_var(xv, v.bits);
                self.b.ins().jump(blk, &[]);
            }
        }
    }

    /// The value of `e`, computed where a binding's value is.
    fn expr(&mut self, e: &'c CExpr) -> V {
        match e {
            CExpr::Atom(a) => self.atom(a),
            CExpr::Arith2(op, a, b, ..) => {
                let (x, y) = (self.atom(a), self.atom(b));
                self.arith(*op, x, y)
            }
            CExpr::Arith2Int(op, s, k, ..) => {
                let x = self.atom(&CAtom::Local(*s));
                let y = self.konst(INT, *k);
                self.arith(*op, x, y)
            }
            CExpr::App(f, args, ..) => {
                let vs = self.atoms(args.atoms());
                self.app(f, vs, false)
            }
            CExpr::AppArith(c) => {
                let x = self.expr(&c.arg);
                self.app(&c.f, vec![x], false)
            }
            CExpr::Inline(il) => self.inline(il),
            CExpr::Guarded(g) => self.guarded(g),
            e @ (CExpr::If(..) | CExpr::Loop(..)) => self.value(|g, dest| g.tail(e, dest)),
            CExpr::Prim(p, CArgs::One(a), _) if Unary::of(*p).is_some() => {
                let x = self.atom(a);
                self.unary(Unary::of(*p).expect("tested above"), x)
            }
            // (in the body of a closure's lambda, see `jit::spec_ok`)
            CExpr::Prim(p, args, _) if self.held_ops && super::prim_call_ok(*p, args.atoms().len()) => {
                let vs = self.atoms(args.atoms());
                self.call_prim(*p, vs)
            }
            CExpr::Prim(_, CArgs::One(_), _) => self.give_up(),
            CExpr::Prim(p, CArgs::Tuple(xs), _) if walk_lists(*p).is_some_and(|n| n + 1 == xs.len()) => {
                self.walk(&xs[0], &xs[1..])
            }
            CExpr::Cons(a, d, _) => {
                let (x, y) = (self.atom(a), self.atom(d));
                self.cons(x, y)
            }
            CExpr::Prim(p, CArgs::Tuple(xs), _) if super::is_atan(*p) && xs.len() == 2 => {
                // (`num::atan2` of two numbers: their doubles')
                let (y, x) = (self.atom(&xs[0]), self.atom(&xs[1]));
                let (fy, fx) = (self.double(y, true), self.double(x, true));
                let addr = self.b.ins().iconst(I64, super::atan2 as *const () as usize as i64);
                let call = self.b.ins().call_indirect(self.f64x2_sig, addr, &[fy, fx]);
                let r = self.b.inst_results(call)[0];
                let bits = self.b.ins().bitcast(I64, MemFlags::new(), r);
                V { tag: Tag::K(REAL), bits }
            }
            _ => self.give_up(),
        }
    }

    /// A call run in place (`resolve::Inline`): a step, and a level unless
    /// it stands for a tail call.
    fn inline(&mut self, il: &'c Inline) -> V {
        if !il.tail {
            self.level_down();
        }
        self.tick();
        let v = self.value(|g, dest| g.block(&il.body, 0, dest));
        if !il.tail {
            self.level_up();
        }
        v
    }

    /// A call run in place where the variable called holds a closure of a
    /// lambda, else made (`resolve::Guard`; only in the body of a closure's
    /// lambda a loop runs in place of a call, see `jit::spec_ok`): the
    /// closure's group told by `jit::closure_env`, as by `Guard::holds`.
    fn guarded(&mut self, g: &'c Guard) -> V {
        self.if_closure_of(
            &g.callee,
            &g.group,
            super::guard_env,
            |gen, _| gen.inline(&g.inline),
            |gen| gen.expr(&g.call),
        )
    }

    /// The value `f` leaves in a join's variables.
    fn value(&mut self, f: impl FnOnce(&mut Self, Dest)) -> V {
        let join = self.b.create_block();
        let t = self.b.declare_var(I64);
        let x = self.b.declare_var(I64);
        f(self, Dest::Join(join, t, x));
        self.b.switch_to_block(join);
        V { tag: Tag::D(self.b.use_var(t)), bits: self.b.use_var(x) }
    }

    /// A call of the procedure a global holds: a step, and a level unless
    /// `tail`.
    fn app(&mut self, f: &CAtom, vs: Vec<V>, tail: bool) -> V {
        if let CAtom::Local(_) | CAtom::Env(_) = f {
            if !tail {
                if let Some(v) = self.expected_call(f, &vs) {
                    return v;
                }
            }
            return self.call_value(f, vs, tail);
        }
        let CAtom::Global(g) = f else { return self.give_up() };
        let Some(&k) = self.globals.get(g) else { return self.give_up() };
        if !tail {
            self.level_down();
        }
        self.tick();
        let mut argv = vec![self.m];
        for v in vs {
            argv.push(self.tag(v.tag));
            argv.push(v.bits);
        }
        // (where the native stack is short, the call is made on a new segment)
        let (near, far, join) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(far);
        self.b.append_block_param(join, I64);
        self.b.append_block_param(join, I64);
        let ok = self.stack_ok();
        self.b.ins().brif(ok, near, &[], far, &[]);
        self.b.switch_to_block(near);
        let call = self.b.ins().call(self.refs[k], &argv);
        let r = self.b.inst_results(call).to_vec();
        self.b.ins().jump(join, &[r[0].into(), r[1].into()]);
        self.b.switch_to_block(far);
        let n = argv.len() - 1;
        let at = self.spill(&argv[1..]);
        let code = self.b.ins().func_addr(I64, self.refs[k]);
        let nargs = self.b.ins().iconst(I64, (n / 2) as i64);
        let addr = self.b.ins().iconst(I64, super::deeper as *const () as usize as i64);
        let call = self.b.ins().call_indirect(self.deeper_sig, addr, &[self.m, code, nargs, at]);
        let r = self.b.inst_results(call).to_vec();
        self.b.ins().jump(join, &[r[0].into(), r[1].into()]);
        self.b.switch_to_block(join);
        let (t, x) = (self.b.block_params(join)[0], self.b.block_params(join)[1]);
        let failed = self.b.ins().icmp_imm(IntCC::Equal, t, FAIL);
        self.fail_if(failed);
        if !tail {
            self.level_up();
        }
        V { tag: Tag::D(t), bits: x }
    }

    /// The address of a stack slot holding `words` (a call's arguments, a
    /// tag and bits each, for a function that reads them there).
    fn spill(&mut self, words: &[ir::Value]) -> ir::Value {
        let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            8 * words.len().max(1) as u32,
            3,
        ));
        for (i, &w) in words.iter().enumerate() {
            self.b.ins().stack_store(w, slot, 8 * i as i32);
        }
        self.b.ins().stack_addr(I64, slot, 0)
    }

    /// A call of the procedure a slot holds, made by the evaluator
    /// (`jit::call_value`, which counts its step and level as the evaluator's
    /// call does); a tail call gives up (the evaluator's takes no level).
    fn call_value(&mut self, f: &CAtom, vs: Vec<V>, tail: bool) -> V {
        if tail {
            return self.give_up();
        }
        let fv = self.atom(f);
        let (nargs, at) = self.spill_args(vs);
        let ft = self.tag(fv.tag);
        let r =
            self.call_fn(self.value_sig, super::call_value as *const () as usize, &[ft, fv.bits, nargs, at]);
        self.value_or_give_up(&r)
    }

    /// The number of `vs` and the address of a stack slot holding them, a
    /// tag and bits each (for `jit::call_value` and `jit::call_prim`).
    fn spill_args(&mut self, vs: Vec<V>) -> (ir::Value, ir::Value) {
        let n = vs.len();
        let mut words = Vec::with_capacity(2 * n);
        for v in vs {
            words.push(self.tag(v.tag));
            words.push(v.bits);
        }
        let at = self.spill(&words);
        (self.b.ins().iconst(I64, n as i64), at)
    }

    /// The value a function called out returned (a tag and bits); gives up
    /// where it is `FAIL`.
    fn value_or_give_up(&mut self, r: &[ir::Value]) -> V {
        let failed = self.b.ins().icmp_imm(IntCC::Equal, r[0], FAIL);
        self.fail_if(failed);
        V { tag: Tag::D(r[0]), bits: r[1] }
    }

    /// A call of primitive `p` on `vs` (as many as it takes), made by the
    /// evaluator's code for it (`jit::call_prim`).
    fn call_prim(&mut self, p: crate::prims::PrimId, vs: Vec<V>) -> V {
        let (nargs, at) = self.spill_args(vs);
        let p = self.b.ins().iconst(I64, p as i64);
        let r = self.call_fn(self.prim_sig, super::call_prim as *const () as usize, &[p, nargs, at]);
        self.value_or_give_up(&r)
    }

    /// A named `let`'s loop: entered (a step, its variables set; a level if
    /// its value is used, unless it stands for a tail call), or, for a
    /// procedure's own loop, run on the parameters.
    fn run_loop(&mut self, lp: &'c Loop, dest: Dest) {
        let leveled = !lp.entered && matches!(dest, Dest::Join(..)) && !lp.in_place_tail;
        if !lp.entered {
            if leveled {
                self.level_down();
            }
            self.tick();
            let vs = self.atoms(lp.init.atoms());
            for (v, p) in vs.into_iter().zip(lp.params.iter()) {
                self.set_slot(*p, v);
            }
        }
        let mark = self.loop_mark(lp, false);
        let header = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        self.loops.push((header, lp, mark));
        if leveled {
            let v = self.value(|g, d| g.block(&lp.body, 0, d));
            self.loops.pop();
            self.level_up();
            self.deliver(v, dest);
        } else {
            self.block(&lp.body, 0, dest);
            self.loops.pop();
        }
    }

    /// The innermost loop's call of itself: a step, its variables set, its
    /// body again.
    fn again(&mut self, a: &'c Again, dest: Dest) {
        let Some(&(header, lp, mark)) = self.loops.last() else {
            self.give_up();
            return;
        };
        if a.global.is_some() && matches!(dest, Dest::Join(..)) {
            // (run as a call by the evaluator: not compiled)
            self.give_up();
            return;
        }
        let vs = self.atoms(a.set.atoms());
        self.tick();
        for (v, p) in vs.into_iter().zip(a.params.iter()) {
            self.set_slot(*p, v);
        }
        match mark {
            Some(mark) => {
                // (all its variables: those `set` leaves are in their slots already)
                let vars: Vec<V> = lp.params.iter().map(|p| self.atom(&CAtom::Local(*p))).collect();
                self.compact(mark, &lp.params, &vars, header);
            }
            None => {
                self.b.ins().jump(header, &[]);
            }
        }
    }

    /// For a loop that makes values (`jit::makes_values`), how many the
    /// machine holds as it is entered (`jit::Made`), where its calls of
    /// itself test whether to drop what it made (`compact`); `None` for
    /// another, and for a loop nested in one compiled on its own (`root`:
    /// that one, which may run long). The loops nested there are mostly short
    /// walks run in place (a dot product's), entered several times an
    /// iteration, whose tests cost the saddle RR 0.7% more instructions and
    /// 3% more time with no compaction ever due.
    fn loop_mark(&mut self, lp: &Loop, root: bool) -> Option<ir::Value> {
        ((root || !self.held_ops) && makes_values(&lp.body, self.held_ops)).then(|| self.load(MADE_LEN))
    }

    /// A loop's call of itself, its variables (`params`) set to `vs`, going
    /// back to its top (`header`): where its iterations made more than
    /// `jit::COMPACT_AFTER` values since it was entered (`mark`), what they
    /// made that its variables no longer hold dropped first (`jit::compact`),
    /// the variables read back (a value held for the code moves).
    fn compact(&mut self, mark: ir::Value, params: &[u32], vs: &[V], header: ir::Block) {
        let len = self.load(MADE_LEN);
        let made = self.b.ins().isub(len, mark);
        let due = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, made, COMPACT_AFTER as i64);
        let now = self.b.create_block();
        self.b.set_cold_block(now);
        self.b.ins().brif(due, now, &[], header, &[]);
        self.b.switch_to_block(now);
        let mut words = Vec::with_capacity(2 * vs.len());
        for v in vs {
            words.push(self.tag(v.tag));
            words.push(v.bits);
        }
        let at = self.spill(&words);
        let n = self.b.ins().iconst(I64, vs.len() as i64);
        self.call_fn(self.compact_sig, super::compact as *const () as usize, &[mark, at, n]);
        for (i, (p, v)) in params.iter().zip(vs).enumerate() {
            let bits = self.b.ins().load(I64, MemFlags::trusted(), at, 16 * i as i32 + 8);
            self.set_slot(*p, V { tag: v.tag, bits });
        }
        self.b.ins().jump(header, &[]);
    }

    /// A one-argument primitive (see [`Unary`]).
    fn unary(&mut self, u: Unary, x: V) -> V {
        if let Some((icc, fcc)) = u.sign_test() {
            return self.sign_test(x, icc, fcc);
        }
        if u == Unary::Sqrt {
            return self.value(|g, d| g.sqrt(x, d));
        }
        if u == Unary::Real {
            // (a number as it is)
            self.number(x);
            return x;
        }
        let f = self.double(x, u != Unary::Sqrt);
        let r = match u.function() {
            None => self.b.ins().sqrt(f),
            Some(func) => {
                let addr = self.b.ins().iconst(I64, func as usize as i64);
                let call = self.b.ins().call_indirect(self.f64_sig, addr, &[f]);
                self.b.inst_results(call)[0]
            }
        };
        let bits = self.b.ins().bitcast(I64, MemFlags::new(), r);
        V { tag: Tag::K(REAL), bits }
    }

    /// `zero?`, `positive?` or `negative?` of a number (`num::sign`: false
    /// for NaN); gives up on anything else.
    fn sign_test(&mut self, x: V, icc: IntCC, fcc: FloatCC) -> V {
        let is_int = self.number(x);
        let i = self.b.ins().icmp_imm(icc, x.bits, 0);
        let f = self.b.ins().bitcast(F64, MemFlags::new(), x.bits);
        let zero = self.b.ins().f64const(0.0);
        let r = self.b.ins().fcmp(fcc, f, zero);
        let flag = self.b.ins().select(is_int, i, r);
        let bits = self.b.ins().uextend(I64, flag);
        V { tag: Tag::K(BOOL), bits }
    }

    /// `sqrt` (`num::sqrt`): of a real, its double's; of an exact integer
    /// from 0 to 2^53, exact for a perfect square, else its double's (that
    /// integer's double is exact); gives up on anything else.
    fn sqrt(&mut self, x: V, dest: Dest) {
        let t = self.tag(x.tag);
        let (real_b, other) = (self.b.create_block(), self.b.create_block());
        let is_real = self.b.ins().icmp_imm(IntCC::Equal, t, REAL);
        self.b.ins().brif(is_real, real_b, &[], other, &[]);
        self.b.switch_to_block(real_b);
        let f = self.b.ins().bitcast(F64, MemFlags::new(), x.bits);
        let r = self.b.ins().sqrt(f);
        let bits = self.b.ins().bitcast(I64, MemFlags::new(), r);
        self.deliver(V { tag: Tag::K(REAL), bits }, dest);
        self.b.switch_to_block(other);
        let is_int = self.b.ins().icmp_imm(IntCC::Equal, t, INT);
        self.check(is_int);
        let in_range = self.b.ins().icmp_imm(IntCC::UnsignedLessThanOrEqual, x.bits, 1 << 53);
        self.check(in_range);
        let f = self.b.ins().fcvt_from_sint(F64, x.bits);
        let r = self.b.ins().sqrt(f);
        // (below 2^27: its integer part is exact; a perfect square's root is)
        let k = self.b.ins().fcvt_to_sint(I64, r);
        let kk = self.b.ins().imul(k, k);
        let square = self.b.ins().icmp(IntCC::Equal, kk, x.bits);
        let (exact_b, inexact_b) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(square, exact_b, &[], inexact_b, &[]);
        self.b.switch_to_block(exact_b);
        self.deliver(V { tag: Tag::K(INT), bits: k }, dest);
        self.b.switch_to_block(inexact_b);
        let bits = self.b.ins().bitcast(I64, MemFlags::new(), r);
        self.deliver(V { tag: Tag::K(REAL), bits }, dest);
    }

    /// Gives up unless `x` is a number (an exact integer or a real);
    /// whether it is an exact integer.
    fn number(&mut self, x: V) -> ir::Value {
        let t = self.tag(x.tag);
        let is_int = self.b.ins().icmp_imm(IntCC::Equal, t, INT);
        let is_real = self.b.ins().icmp_imm(IntCC::Equal, t, REAL);
        let ok = self.b.ins().bor(is_int, is_real);
        self.check(ok);
        is_int
    }

    /// A real's double, or (`int`) an exact integer's; gives up on anything else.
    fn double(&mut self, x: V, int: bool) -> ir::Value {
        if int {
            let is_int = self.number(x);
            return self.as_double(is_int, x.bits);
        }
        let t = self.tag(x.tag);
        let is_real = self.b.ins().icmp_imm(IntCC::Equal, t, REAL);
        self.check(is_real);
        self.b.ins().bitcast(F64, MemFlags::new(), x.bits)
    }

    /// The double of `bits`: an exact integer's where `is_int`, else the
    /// real they are.
    fn as_double(&mut self, is_int: ir::Value, bits: ir::Value) -> ir::Value {
        let r = self.b.ins().bitcast(F64, MemFlags::new(), bits);
        let i = self.b.ins().fcvt_from_sint(F64, bits);
        self.b.ins().select(is_int, i, r)
    }

    /// Branches to `t` or `f` on `c`.
    fn cond(&mut self, c: &Cond, t: ir::Block, f: ir::Block) {
        let flag = match c {
            Cond::Atom(a) => {
                // (only #f is false; an `OTHER` may be one under tags:
                // `Value::is_true_stripped`)
                let v = self.atom(a);
                self.not_other(v);
                let tv = self.tag(v.tag);
                let is_bool = self.b.ins().icmp_imm(IntCC::Equal, tv, BOOL);
                let is_zero = self.b.ins().icmp_imm(IntCC::Equal, v.bits, 0);
                let is_false = self.b.ins().band(is_bool, is_zero);
                self.b.ins().brif(is_false, f, &[], t, &[]);
                return;
            }
            Cond::Cmp(op, a, b, ..) => {
                let (x, y) = (self.atom(a), self.atom(b));
                self.arith(*op, x, y).bits
            }
            Cond::CmpInt(op, s, k, ..) => {
                let x = self.atom(&CAtom::Local(*s));
                let y = self.konst(INT, *k);
                self.arith(*op, x, y).bits
            }
            Cond::Is(shape, a) => {
                let v = self.atom(a);
                let tv = self.tag(v.tag);
                let want = match shape {
                    // (`()` is never `OTHER`)
                    Shape::Null => NIL,
                    // (an `OTHER` may be a lazy pair: `Value::is_pair`)
                    Shape::Pair => {
                        self.not_other(v);
                        PAIR
                    }
                };
                self.b.ins().icmp_imm(IntCC::Equal, tv, want)
            }
        };
        self.b.ins().brif(flag, t, &[], f, &[]);
    }

    /// `op` on two values: integers (giving up on overflow, and for `/`),
    /// reals, or an integer and a real (as doubles: for a comparison only
    /// where the integer is within ±2^53, its double exact), as the
    /// evaluator computes them; anything else gives up.
    fn arith(&mut self, op: Op2, x: V, y: V) -> V {
        match (x.tag, y.tag) {
            (Tag::K(INT), Tag::K(INT)) => return self.int_op(op, x.bits, y.bits),
            (Tag::K(REAL), Tag::K(REAL)) => return self.real_op(op, x.bits, y.bits),
            (Tag::K(a), Tag::K(b)) if ![INT, REAL].contains(&a) || ![INT, REAL].contains(&b) => {
                return self.give_up()
            }
            _ => {}
        }
        let (tx, ty) = (self.tag(x.tag), self.tag(y.tag));
        let rt = self.b.declare_var(I64);
        let rx = self.b.declare_var(I64);
        let join = self.b.create_block();
        let either = self.b.ins().bor(tx, ty);
        let both = self.b.ins().band(tx, ty);
        // both integers (INT is 0)
        let ints = self.b.ins().icmp_imm(IntCC::Equal, either, INT);
        let (int_b, other) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(ints, int_b, &[], other, &[]);
        self.b.switch_to_block(int_b);
        let v = self.int_op(op, x.bits, y.bits);
        self.deliver(v, Dest::Join(join, rt, rx));
        // both reals (of the tags, only `REAL` is odd: `and` is 1 only for two 1s)
        self.b.switch_to_block(other);
        let reals = self.b.ins().icmp_imm(IntCC::Equal, both, REAL);
        let (real_b, other) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(reals, real_b, &[], other, &[]);
        self.b.switch_to_block(real_b);
        let v = self.real_op(op, x.bits, y.bits);
        self.deliver(v, Dest::Join(join, rt, rx));
        self.b.switch_to_block(other);
        // an integer and a real (`or` is 1), converted to doubles
        let mixed = self.b.ins().icmp_imm(IntCC::Equal, either, REAL);
        if self.held_ops {
            // (anything else made by the evaluator, in a loop's code)
            let (mixed_b, held_b) = (self.b.create_block(), self.b.create_block());
            self.b.set_cold_block(held_b);
            self.b.ins().brif(mixed, mixed_b, &[], held_b, &[]);
            self.b.switch_to_block(held_b);
            let opv = self.b.ins().iconst(I64, op as i64);
            let f = super::held_arith as *const () as usize;
            let r = self.call_fn(self.held_sig, f, &[opv, tx, x.bits, ty, y.bits]);
            let failed = self.b.ins().icmp_imm(IntCC::Equal, r[0], FAIL);
            self.fail_if(failed);
            self.deliver(V { tag: Tag::D(r[0]), bits: r[1] }, Dest::Join(join, rt, rx));
            self.b.switch_to_block(mixed_b);
        } else {
            self.check(mixed);
        }
        let x_int = self.b.ins().icmp_imm(IntCC::Equal, tx, INT);
        if op.is_comparison() {
            // (compared exactly, as `num::compare` compares them, where the
            // integer's double is exact: its magnitude at most 2^53)
            let i = self.b.ins().select(x_int, x.bits, y.bits);
            let biased = self.b.ins().iadd_imm(i, 1 << 53);
            let exact = self.b.ins().icmp_imm(IntCC::UnsignedLessThanOrEqual, biased, 1 << 54);
            self.check(exact);
        }
        let xf = self.as_double(x_int, x.bits);
        let y_int = self.b.ins().icmp_imm(IntCC::Equal, ty, INT);
        let yf = self.as_double(y_int, y.bits);
        let xb = self.b.ins().bitcast(I64, MemFlags::new(), xf);
        let yb = self.b.ins().bitcast(I64, MemFlags::new(), yf);
        let v = self.real_op(op, xb, yb);
        self.deliver(v, Dest::Join(join, rt, rx));
        self.b.switch_to_block(join);
        let tag = if op.is_comparison() { Tag::K(BOOL) } else { Tag::D(self.b.use_var(rt)) };
        V { tag, bits: self.b.use_var(rx) }
    }

    fn int_op(&mut self, op: Op2, a: ir::Value, b: ir::Value) -> V {
        if op == Op2::Div {
            // (an exact quotient)
            return self.give_up();
        }
        let ins = self.b.ins();
        let (r, overflow) = match op {
            Op2::Add => ins.sadd_overflow(a, b),
            Op2::Sub => ins.ssub_overflow(a, b),
            Op2::Mul => ins.smul_overflow(a, b),
            _ => {
                let cc = match op {
                    Op2::Lt => IntCC::SignedLessThan,
                    Op2::Gt => IntCC::SignedGreaterThan,
                    Op2::Le => IntCC::SignedLessThanOrEqual,
                    Op2::Ge => IntCC::SignedGreaterThanOrEqual,
                    _ => IntCC::Equal,
                };
                let f = ins.icmp(cc, a, b);
                let bits = self.b.ins().uextend(I64, f);
                return V { tag: Tag::K(BOOL), bits };
            }
        };
        self.fail_if(overflow);
        V { tag: Tag::K(INT), bits: r }
    }

    fn real_op(&mut self, op: Op2, a: ir::Value, b: ir::Value) -> V {
        let fa = self.b.ins().bitcast(F64, MemFlags::new(), a);
        let fb = self.b.ins().bitcast(F64, MemFlags::new(), b);
        let ins = self.b.ins();
        let r = match op {
            Op2::Add => ins.fadd(fa, fb),
            Op2::Sub => ins.fsub(fa, fb),
            Op2::Mul => ins.fmul(fa, fb),
            Op2::Div => ins.fdiv(fa, fb),
            _ => {
                let cc = match op {
                    Op2::Lt => FloatCC::LessThan,
                    Op2::Gt => FloatCC::GreaterThan,
                    Op2::Le => FloatCC::LessThanOrEqual,
                    Op2::Ge => FloatCC::GreaterThanOrEqual,
                    _ => FloatCC::Equal,
                };
                let f = ins.fcmp(cc, fa, fb);
                let bits = self.b.ins().uextend(I64, f);
                return V { tag: Tag::K(BOOL), bits };
            }
        };
        let bits = self.b.ins().bitcast(I64, MemFlags::new(), r);
        V { tag: Tag::K(REAL), bits }
    }
}
