//! The evaluator: runs resolved A-normal form with a value stack for frames,
//! proper tail calls, a growable native stack for deep recursion, and step,
//! time and interrupt limits.

use crate::anf::{Group, Lambda};
use crate::error::{Error, ErrorKind, Result};
use crate::prims::{self, Class, PrimId};
use crate::resolve::{CArgs, CAtom, CBind, CBlock, CExpr, GroupCode, Param};
use crate::source::Span;
use crate::value::{Inst, Value};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Arguments of a call: one value, or a tuple not (yet) built as pairs.
pub enum ArgVals {
    One(Value),
    Many(SmallVec<[Value; 4]>),
}

impl ArgVals {
    /// The argument as one value (building the tuple if needed).
    pub fn into_value(self) -> Value {
        match self {
            ArgVals::One(v) => v,
            ArgVals::Many(mut vs) => {
                let mut acc = vs.pop().unwrap_or(Value::Nil);
                while let Some(v) = vs.pop() {
                    acc = Value::cons(v, acc);
                }
                acc
            }
        }
    }
}

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
    TailCall(Value, ArgVals, Span),
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
    pub deadline: Option<Instant>,
    pub interrupt: Arc<AtomicBool>,
    /// Per-primitive call counts when metering.
    pub meter: Option<Vec<u64>>,
    /// Compiled forward/reverse versions of primitives, by (primitive, kind).
    pub prim_rules: FxHashMap<(PrimId, u8), Value>,
    pub out: Box<dyn Write>,
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
            deadline: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            meter: None,
            prim_rules: FxHashMap::default(),
            out: Box::new(std::io::stdout()),
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
                let r = self.call_closure(
                    Rc::new(Inst { group: g.clone(), env: Box::new([]) }),
                    0,
                    ArgVals::One(Value::Nil),
                    None,
                );
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

    /// Applies any procedure value to an argument.
    pub fn apply(&mut self, f: Value, arg: ArgVals, span: Option<Span>) -> Result<Value> {
        match f {
            Value::Closure(inst, idx) => self.call_closure(inst, idx, arg, span),
            Value::Prim(p) => self.call_prim(p, arg).map_err(|e| match span {
                Some(s) => e.at(s),
                None => e,
            }),
            other => Err(Error::runtime(
                span,
                format!(
                    "cannot apply {} ({}): not a procedure",
                    crate::print::to_string(&other),
                    other.kind_name()
                ),
            )),
        }
    }

    /// Calls a primitive with evaluated arguments.
    pub fn call_prim(&mut self, p: PrimId, arg: ArgVals) -> Result<Value> {
        let def = prims::prim(p);
        if let Some(m) = &mut self.meter {
            if def.class != Class::Other {
                m[p as usize] += 1;
            }
        }
        let mut args: SmallVec<[Value; 4]> = SmallVec::new();
        match arg {
            ArgVals::Many(vs) if vs.len() == def.arity as usize => args = vs,
            ArgVals::Many(vs) if def.arity >= 2 => {
                return Err(Error::runtime(
                    None,
                    format!("{}: expected {} arguments, got {}", def.name, def.arity, vs.len()),
                ))
            }
            a => prims::spread(p, a.into_value(), &mut args)?,
        }
        (def.imp)(self, &args)
    }

    /// Calls a closure; deep recursion grows the native stack instead of overflowing.
    pub fn call_closure(
        &mut self,
        inst: Rc<Inst>,
        idx: u32,
        arg: ArgVals,
        span: Option<Span>,
    ) -> Result<Value> {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            return Err(Error::runtime(
                span,
                format!("recursion too deep (more than {} nested calls)", self.max_depth),
            ));
        }
        let name_src = inst.clone();
        let r = stacker::maybe_grow(RED_ZONE, SEGMENT, || self.call_loop(inst, idx, arg));
        self.depth -= 1;
        r.map_err(|mut e| {
            if let Some(s) = span {
                if e.kind != ErrorKind::Limit || e.trace.len() < 3 {
                    e.push_frame(&name_src.group.display_name(idx as usize), s);
                }
                if e.span.is_none() {
                    e.span = Some(s);
                }
            }
            e
        })
    }

    fn call_loop(&mut self, mut inst: Rc<Inst>, mut idx: u32, mut arg: ArgVals) -> Result<Value> {
        let base = self.stack.len();
        loop {
            self.tick()?;
            if inst.group.is_shape() {
                self.stack.truncate(base);
                return Err(Error::runtime(
                    None,
                    format!(
                        "cannot apply {}: a {} procedure is a shape, not code",
                        inst.group.display_name(idx as usize),
                        inst.group.tags()[0].name()
                    ),
                ));
            }
            let code = self.group_code(&inst.group)?;
            let lam = &code.members[idx as usize];
            self.stack.truncate(base);
            self.stack.resize(base + lam.nslots as usize, Value::Nil);
            let start = match (&lam.param, arg) {
                (Param::Slot(s), a) => {
                    self.stack[base + *s as usize] = a.into_value();
                    0
                }
                (Param::Tuple { parts, skip, .. }, ArgVals::Many(vs)) if vs.len() == parts.len() => {
                    for (s, v) in parts.iter().zip(vs) {
                        self.stack[base + *s as usize] = v;
                    }
                    *skip
                }
                (Param::Tuple { slot, .. }, a) => {
                    self.stack[base + *slot as usize] = a.into_value();
                    0
                }
            };
            match self.run_block(base, &inst, &lam.body, start)? {
                Next::Return(v) => {
                    self.stack.truncate(base);
                    return Ok(v);
                }
                Next::TailCall(f, a, span) => match f {
                    Value::Closure(i2, k2) => {
                        inst = i2;
                        idx = k2;
                        arg = a;
                    }
                    other => {
                        self.stack.truncate(base);
                        return self.apply(other, a, Some(span));
                    }
                },
            }
        }
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
                    let av = self.args(base, inst, args)?;
                    return Ok(Next::TailCall(fv, av, *span));
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
            CAtom::Global(g) => return self.global(*g),
            CAtom::Const(v) => v.clone(),
        })
    }

    fn args(&mut self, base: usize, inst: &Rc<Inst>, a: &CArgs) -> Result<ArgVals> {
        Ok(match a {
            CArgs::One(x) => ArgVals::One(self.atom(base, inst, x)?),
            CArgs::Tuple(xs) => {
                let mut vs = SmallVec::with_capacity(xs.len());
                for x in xs.iter() {
                    vs.push(self.atom(base, inst, x)?);
                }
                ArgVals::Many(vs)
            }
        })
    }

    fn eval_expr(&mut self, base: usize, inst: &Rc<Inst>, e: &CExpr) -> Result<Value> {
        match e {
            CExpr::Atom(a) => self.atom(base, inst, a),
            CExpr::App(f, args, span) => {
                let fv = self.atom(base, inst, f)?;
                let av = self.args(base, inst, args)?;
                self.apply(fv, av, Some(*span))
            }
            CExpr::Prim(p, args, span) => {
                let av = self.args(base, inst, args)?;
                self.call_prim(*p, av).map_err(|e| e.at(*span))
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
                    Next::TailCall(f, a, s) => self.apply(f, a, Some(s)),
                }
            }
            CExpr::MakeEnvSensLike(l, xs) => {
                let lv = self.atom(base, inst, l)?;
                if crate::ad::ops::is_prim_based(&lv) || matches!(lv, Value::Nil) {
                    return Ok(Value::Nil);
                }
                let (g, i) = match &lv {
                    Value::Closure(li, i) if li.env.len() == xs.len() => (li.group.clone(), *i),
                    other => {
                        return Err(Error::runtime(
                            None,
                            format!(
                                "internal error: expected a closure with {} captured values, got {}",
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
                                "internal error: expected an environment sensitivity of {} values, got {}",
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
