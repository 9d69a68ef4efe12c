//! The evaluator: runs resolved A-normal form with a value stack for frames,
//! proper tail calls, a growable native stack for deep recursion, and step,
//! time and interrupt limits.

use crate::anf::{Group, Kind, Lambda};
use crate::error::{Error, ErrorKind, Result};
use crate::prims::{self, Class, PrimId};
use crate::resolve::{CArgs, CAtom, CBind, CBlock, CExpr, GroupCode, Op2, Param};
use crate::source::Span;
use crate::value::{Inst, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A top-level definition's slot.
pub struct Global {
    pub name: Rc<str>,
    pub span: Span,
    pub state: GState,
}

pub enum GState {
    Value(Value),
    /// A constant definition not evaluated yet: a thunk group taking `'()`.
    Thunk(Rc<Group>),
    Forcing,
}

enum Next {
    Return(Value),
    /// Call this procedure with the given number of arguments on top of the stack.
    TailCall(Value, usize, Span),
}

/// Machine-integer and double arithmetic without going through the primitive table.
#[inline]
fn fast_arith(op: Op2, x: &Value, y: &Value) -> Option<Value> {
    match (x, y) {
        (Value::Int(a), Value::Int(b)) => Some(match op {
            Op2::Add => Value::Int(a.checked_add(*b)?),
            Op2::Sub => Value::Int(a.checked_sub(*b)?),
            Op2::Mul => Value::Int(a.checked_mul(*b)?),
            Op2::Lt => Value::Bool(a < b),
            Op2::Gt => Value::Bool(a > b),
            Op2::Le => Value::Bool(a <= b),
            Op2::Ge => Value::Bool(a >= b),
            Op2::Eq => Value::Bool(a == b),
        }),
        (Value::Real(a), Value::Real(b)) => Some(match op {
            Op2::Add => Value::Real(a + b),
            Op2::Sub => Value::Real(a - b),
            Op2::Mul => Value::Real(a * b),
            Op2::Lt => Value::Bool(a < b),
            Op2::Gt => Value::Bool(a > b),
            Op2::Le => Value::Bool(a <= b),
            Op2::Ge => Value::Bool(a >= b),
            Op2::Eq => Value::Bool(a == b),
        }),
        _ => None,
    }
}

#[cold]
#[inline(never)]
fn not_a_procedure(v: &Value, span: Option<Span>) -> Error {
    Error::runtime(
        span,
        format!("cannot apply {} ({}): not a procedure", crate::print::to_string(v), v.kind_name()),
    )
}

#[cold]
#[inline(never)]
fn arity_error(name: &str, arity: u8, n: usize) -> Error {
    Error::runtime(None, format!("{}: expected {} arguments, got {}", name, arity, n))
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

/// Bytes of native stack kept free before growing onto a new segment.
const RED_ZONE: usize = 256 * 1024;
const SEGMENT: usize = 16 * 1024 * 1024;

/// The interpreter state.
pub struct Machine {
    pub stack: Vec<Value>,
    pub globals: Vec<Global>,
    pub depth: usize,
    pub max_depth: usize,
    pub steps: u64,
    pub max_steps: u64,
    /// Value-level AD work done natively (lazy expansions, `plus`, `zero`, tag
    /// and bundle steps): with `steps`, a deterministic measure of total work.
    pub ad_work: u64,
    /// Run primitives' derivative rules natively where possible (`ad::native`);
    /// off only to check the native rules against the interpreted ones.
    pub native_rules: bool,
    pub deadline: Option<Instant>,
    pub interrupt: Arc<AtomicBool>,
    /// Per-primitive call counts when metering.
    pub meter: Option<Vec<u64>>,
    /// When set (with `meter`), per-primitive counts of the calls made by
    /// AD-transformed code (derivative work; the REPL's `:meter`).
    pub meter_derivative: Option<Vec<u64>>,
    /// Compiled forward/reverse versions of primitives, by (primitive, kind).
    pub prim_rules: FxHashMap<(PrimId, u8), Value>,
    pub out: Box<dyn Write>,
    /// Where vector primitives run (`--backend`).
    pub backend: crate::vec::Backend,
    pub input: Box<dyn std::io::BufRead>,
}

impl Default for Machine {
    fn default() -> Self {
        Machine::new()
    }
}

impl Machine {
    pub fn new() -> Machine {
        Machine {
            stack: Vec::with_capacity(1024),
            globals: Vec::new(),
            depth: 0,
            max_depth: 10_000_000,
            steps: 0,
            max_steps: u64::MAX,
            ad_work: 0,
            native_rules: true,
            deadline: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            meter: None,
            meter_derivative: None,
            prim_rules: FxHashMap::default(),
            out: Box::new(std::io::stdout()),
            backend: crate::vec::default_backend(),
            input: Box::new(std::io::BufReader::new(std::io::stdin())),
        }
    }

    /// Prints a value and a newline on the program's output (`write`).
    pub fn write_value(&mut self, v: &Value) {
        let s = crate::print::to_string(v);
        let _ = writeln!(self.out, "{}", s);
    }

    /// `read-real`: reads one number from standard input.
    pub fn read_real(&mut self) -> Result<Value> {
        let _ = self.out.flush();
        let mut line = String::new();
        loop {
            line.clear();
            match self.input.read_line(&mut line) {
                Ok(0) => return Err(Error::runtime(None, "read-real: end of input")),
                Ok(_) => {
                    let t = line.trim();
                    if t.is_empty() {
                        continue;
                    }
                    let ds = crate::reader::read_all(t, u32::MAX)
                        .map_err(|e| Error::runtime(None, format!("read-real: {}", e.message)))?;
                    return match ds.first().map(|d| &d.kind) {
                        Some(crate::datum::DatumKind::Int(i)) => Ok(Value::Int(*i)),
                        Some(crate::datum::DatumKind::Big(b)) => Ok(Value::Big(b.clone())),
                        Some(crate::datum::DatumKind::Real(r)) => Ok(Value::Real(*r)),
                        Some(crate::datum::DatumKind::Rat(q)) => Ok(Value::Rat(q.clone())),
                        _ => Err(Error::runtime(None, format!("read-real: not a number: {}", t))),
                    };
                }
                Err(e) => return Err(Error::runtime(None, format!("read-real: {}", e))),
            }
        }
    }

    /// Adds a global slot.
    pub fn add_global(&mut self, name: Rc<str>, span: Span, state: GState) -> u32 {
        let id = self.globals.len() as u32;
        crate::show::set_global_name(id, name.clone());
        self.globals.push(Global { name, span, state });
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
            GState::Thunk(g) => {
                let g = g.clone();
                self.globals[id as usize].state = GState::Forcing;
                self.stack.push(Value::Nil);
                let r = self.call_closure(Rc::new(Inst { group: g.clone(), env: Box::new([]) }), 0, 1, None);
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
    pub fn group_code(&mut self, g: &Rc<Group>) -> Result<Rc<GroupCode>> {
        if let Some(c) = g.code.get() {
            return Ok(c.clone());
        }
        let members = self.group_members(g)?;
        if g.is_derivative_code() {
            g.mark_nested_derivative();
        }
        let code = Rc::new(crate::resolve::resolve_group(g, members));
        let _ = g.code.set(code.clone());
        Ok(code)
    }

    #[inline]
    fn tick(&mut self) -> Result<()> {
        self.steps += 1;
        if self.steps & 0x3fff == 0 {
            if self.interrupt.load(Ordering::Relaxed) {
                self.interrupt.store(false, Ordering::Relaxed);
                return Err(Error::new(ErrorKind::Limit, None, "interrupted"));
            }
            if let Some(d) = self.deadline {
                if Instant::now() > d {
                    return Err(Error::new(ErrorKind::Limit, None, "time limit exceeded (--timeout)"));
                }
            }
        }
        if self.steps > self.max_steps {
            return Err(Error::new(
                ErrorKind::Limit,
                None,
                format!("step limit of {} exceeded (--max-steps)", self.max_steps),
            ));
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
        match f {
            Value::Closure(inst, idx) => self.call_closure(inst, idx, nargs, span),
            Value::Lazy(_) => {
                // A lazily zeroed or tagged closure: build it, then call it.
                let h = crate::ad::ops::hnf(self, &f)?;
                self.call(h, nargs, span)
            }
            Value::Prim(p) => self.call_prim(p, nargs).map_err(|e| match span {
                Some(s) => e.at(s),
                None => e,
            }),
            other => {
                let len = self.stack.len();
                self.stack.truncate(len - nargs);
                Err(not_a_procedure(&other, span))
            }
        }
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

    /// Calls a primitive on the `nargs` values on top of the stack.
    pub fn call_prim(&mut self, p: PrimId, nargs: usize) -> Result<Value> {
        let def = prims::prim(p);
        if let Some(m) = &mut self.meter {
            if def.class != Class::Other {
                m[p as usize] += 1;
            }
        }
        if nargs == def.arity as usize && nargs <= 3 {
            let mut buf: [Value; 3] = [Value::Nil, Value::Nil, Value::Nil];
            for i in (0..nargs).rev() {
                buf[i] = self.stack.pop().unwrap_or(Value::Nil);
            }
            if !def.lazy {
                for b in buf[..nargs].iter_mut() {
                    if let Value::Lazy(_) = b {
                        *b = crate::ad::ops::force(self, b)?;
                    }
                }
            }
            return (def.imp)(self, &buf[..nargs]);
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
        if !def.lazy {
            for b in args.iter_mut() {
                if let Value::Lazy(_) = b {
                    *b = crate::ad::ops::force(self, b)?;
                }
            }
        }
        (def.imp)(self, &args)
    }

    /// Counts a primitive call made by AD-transformed code (see `meter_derivative`).
    #[cold]
    fn meter_site(&mut self, p: PrimId, inst: &Rc<Inst>) {
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
        inst: Rc<Inst>,
        idx: u32,
        nargs: usize,
        span: Option<Span>,
    ) -> Result<Value> {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            let len = self.stack.len();
            self.stack.truncate(len - nargs);
            return Err(too_deep(self.max_depth, span));
        }
        let r = stacker::maybe_grow(RED_ZONE, SEGMENT, || self.call_loop(inst, idx, nargs));
        self.depth -= 1;
        match r {
            Ok(v) => Ok(v),
            Err((mut e, name)) => {
                if let Some(s) = span {
                    e.push_frame(&name, s);
                    if e.span.is_none() && s.is_known() {
                        e.span = Some(s);
                    }
                }
                Err(e)
            }
        }
    }

    /// Runs closure calls, looping on tail calls. On error, also returns the name
    /// of the procedure this call entered (the caller's trace line names it even
    /// when the failure happened further down a chain of tail calls).
    fn call_loop(
        &mut self,
        mut inst: Rc<Inst>,
        mut idx: u32,
        mut nargs: usize,
    ) -> std::result::Result<Value, (Error, String)> {
        let base = self.stack.len() - nargs;
        // Where the running procedure was tail-called from, and the procedure first
        // entered (both unset until the first tail call).
        let mut tail_site: Option<Span> = None;
        // The procedure originally called, kept once a tail call replaces it.
        let mut entered: Option<(Rc<Group>, u32)> = None;
        let mut e = loop {
            match self.enter(base, &inst, idx, nargs) {
                Ok(Next::Return(v)) => {
                    self.stack.truncate(base);
                    return Ok(v);
                }
                Ok(Next::TailCall(f, n, span)) => {
                    let len = self.stack.len();
                    self.stack.drain(base..len - n);
                    if entered.is_none() {
                        entered = Some((inst.group.clone(), idx));
                    }
                    match f {
                        Value::Closure(i2, k2) => {
                            inst = i2;
                            idx = k2;
                            nargs = n;
                            tail_site = Some(span);
                        }
                        // A primitive (or a non-procedure) in tail position.
                        other => match self.call(other, n, Some(span)) {
                            Ok(v) => return Ok(v),
                            Err(e) => break e,
                        },
                    }
                }
                Err(e) => break e,
            }
        };
        self.stack.truncate(base);
        if let Some(s) = tail_site {
            // The running procedure was reached by a tail call: show where.
            e.push_frame(&inst.group.display_name(idx as usize), s);
            if e.span.is_none() && s.is_known() {
                e.span = Some(s);
            }
        }
        let name = match &entered {
            Some((g, i)) => g.display_name(*i as usize),
            None => inst.group.display_name(idx as usize),
        };
        Err((e, name))
    }

    /// Sets up the frame of member `idx` with its arguments and runs its body.
    fn enter(&mut self, base: usize, inst: &Rc<Inst>, idx: u32, nargs: usize) -> Result<Next> {
        self.tick()?;
        if let (Some(nat), true) = (inst.group.native.get(), self.native_rules) {
            if let Some(v) = crate::ad::native::run(self, nat, inst, base, nargs)? {
                return Ok(Next::Return(v));
            }
        }
        if inst.group.is_shape() {
            return Err(shape_error(inst, idx));
        }
        if let crate::anf::Origin::Transformed(k @ (Kind::F | Kind::R), _) = &inst.group.origin {
            if nargs > 0 {
                let arg = &self.stack[base];
                if let Some(msg) = crate::ad::ops::tag_mismatch(*k, arg) {
                    return Err(Error::runtime(
                        None,
                        format!("{}: {}", inst.group.display_name(idx as usize), msg),
                    ));
                }
            }
        }
        let code = match inst.group.code.get() {
            Some(c) => c.clone(),
            None => self.group_code(&inst.group)?,
        };
        let lam = &code.members[idx as usize];
        let nslots = lam.nslots as usize;
        let start = match &lam.param {
            Param::Tuple { parts, skip, .. } if parts.len() == nargs => {
                self.stack.resize(base + nslots, Value::Nil);
                *skip
            }
            Param::Slot(slot) | Param::Tuple { slot, .. } => {
                let v = self.pop_args_value(nargs);
                self.stack.resize(base + nslots, Value::Nil);
                self.stack[base + *slot as usize] = v;
                0
            }
        };
        self.run_block(base, inst, &lam.body, start)
    }

    fn run_block(&mut self, base: usize, inst: &Rc<Inst>, block: &CBlock, start: usize) -> Result<Next> {
        let mut block = block;
        let mut start = start;
        loop {
            for b in &block.binds[start..] {
                self.exec_bind(base, inst, b)?;
            }
            start = 0;
            match &block.tail {
                CExpr::If(c, t, e) => {
                    block = if self.atom(base, inst, c)?.is_true_stripped() { t } else { e };
                }
                CExpr::App(f, args, span) => {
                    let fv = self.atom(base, inst, f)?;
                    let n = self.push_args(base, inst, args)?;
                    return Ok(Next::TailCall(fv, n, *span));
                }
                other => return Ok(Next::Return(self.eval_expr(base, inst, other)?)),
            }
        }
    }

    #[inline]
    fn atom(&mut self, base: usize, inst: &Rc<Inst>, a: &CAtom) -> Result<Value> {
        Ok(match a {
            CAtom::Local(s) => self.stack[base + *s as usize].clone(),
            CAtom::Env(i) => inst.env[*i as usize].clone(),
            CAtom::Sibling(j) => Value::Closure(inst.clone(), *j),
            CAtom::Global(g) => match &self.globals[*g as usize].state {
                GState::Value(v) => v.clone(),
                _ => return self.global(*g),
            },
            CAtom::Const(v) => v.clone(),
        })
    }

    /// Pushes the arguments; returns how many.
    #[inline]
    fn push_args(&mut self, base: usize, inst: &Rc<Inst>, a: &CArgs) -> Result<usize> {
        match a {
            CArgs::One(x) => {
                let v = self.atom(base, inst, x)?;
                self.stack.push(v);
                Ok(1)
            }
            CArgs::Tuple(xs) => {
                for x in xs.iter() {
                    let v = self.atom(base, inst, x)?;
                    self.stack.push(v);
                }
                Ok(xs.len())
            }
        }
    }

    fn eval_expr(&mut self, base: usize, inst: &Rc<Inst>, e: &CExpr) -> Result<Value> {
        match e {
            CExpr::Atom(a) => self.atom(base, inst, a),
            CExpr::App(f, args, span) => {
                let fv = self.atom(base, inst, f)?;
                let n = self.push_args(base, inst, args)?;
                self.call(fv, n, Some(*span))
            }
            CExpr::Arith2(op, a, b, p, span) => {
                let x = self.atom(base, inst, a)?;
                let y = self.atom(base, inst, b)?;
                if self.meter.is_none() {
                    if let Some(v) = fast_arith(*op, &x, &y) {
                        return Ok(v);
                    }
                }
                self.stack.push(x);
                self.stack.push(y);
                if self.meter_derivative.is_some() {
                    self.meter_site(*p, inst);
                }
                self.call_prim(*p, 2).map_err(|e| e.at(*span))
            }
            CExpr::Prim(p, args, span) => {
                let n = self.push_args(base, inst, args)?;
                if self.meter_derivative.is_some() {
                    self.meter_site(*p, inst);
                }
                self.call_prim(*p, n).map_err(|e| e.at(*span))
            }
            CExpr::Cons(a, d) => {
                let av = self.atom(base, inst, a)?;
                let dv = self.atom(base, inst, d)?;
                Ok(Value::cons(av, dv))
            }
            CExpr::Closure(g, caps) => {
                let mut env = Vec::with_capacity(caps.len());
                for c in caps.iter() {
                    env.push(self.atom(base, inst, c)?);
                }
                Ok(Value::closure(g.clone(), env, 0))
            }
            CExpr::If(c, t, f) => {
                let b = if self.atom(base, inst, c)?.is_true_stripped() { t } else { f };
                match self.run_block(base, inst, b, 0)? {
                    Next::Return(v) => Ok(v),
                    Next::TailCall(f, n, s) => self.call(f, n, Some(s)),
                }
            }
            CExpr::MakeEnvSensLike(l, xs) => {
                let lv = self.atom(base, inst, l)?;
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
                                crate::print::to_string(other)
                            ),
                        ))
                    }
                };
                let mut env = Vec::with_capacity(xs.len());
                for c in xs.iter() {
                    env.push(self.atom(base, inst, c)?);
                }
                Ok(Value::closure(g, env, i))
            }
            CExpr::MakeEnvSens(g, i, xs) => {
                if crate::ad::ops::group_is_prim_based(g) {
                    return Ok(Value::Nil);
                }
                let mut env = Vec::with_capacity(xs.len());
                for c in xs.iter() {
                    env.push(self.atom(base, inst, c)?);
                }
                Ok(Value::closure(g.clone(), env, *i))
            }
        }
    }

    fn exec_bind(&mut self, base: usize, inst: &Rc<Inst>, b: &CBind) -> Result<()> {
        match b {
            CBind::Let(s, e) => {
                let v = self.eval_expr(base, inst, e)?;
                self.stack[base + *s as usize] = v;
            }
            CBind::Uncons(x, y, a, span) => {
                let v = self.atom(base, inst, a)?;
                match v {
                    Value::Pair(p) => {
                        self.stack[base + *x as usize] = p.car.clone();
                        self.stack[base + *y as usize] = p.cdr.clone();
                    }
                    Value::Lazy(_) if v.is_pair() => {
                        let Value::Pair(p) = crate::ad::ops::hnf(self, &v)? else { unreachable!() };
                        self.stack[base + *x as usize] = p.car.clone();
                        self.stack[base + *y as usize] = p.cdr.clone();
                    }
                    other => {
                        return Err(Error::runtime(
                            Some(*span),
                            format!(
                                "pattern mismatch: expected a pair, got {} ({})",
                                crate::print::to_string(&other),
                                other.kind_name()
                            ),
                        ))
                    }
                }
            }
            CBind::Check(c, a, span) => {
                let v = self.atom(base, inst, a)?;
                let v = crate::ad::ops::force(self, &v)?;
                if !crate::ad::ops::literal_matches(c, &v) {
                    return Err(Error::runtime(
                        Some(*span),
                        format!(
                            "pattern mismatch: expected {}, got {}",
                            crate::print::to_string(c),
                            crate::print::to_string(&v)
                        ),
                    ));
                }
            }
            CBind::Letrec(slots, g, caps) => {
                let mut env = Vec::with_capacity(caps.len());
                for c in caps.iter() {
                    env.push(self.atom(base, inst, c)?);
                }
                let ni = Rc::new(Inst { group: g.clone(), env: env.into_boxed_slice() });
                for (j, s) in slots.iter().enumerate() {
                    self.stack[base + *s as usize] = Value::Closure(ni.clone(), j as u32);
                }
            }
            CBind::EnvSens(slots, a) => {
                let v = self.atom(base, inst, a)?;
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
                                crate::print::to_string(other)
                            ),
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
