//! The vector primitives (VECTORS.md) and their derivative rules. Every rule is
//! written with vector primitives that have rules themselves, so the forward and
//! reverse versions compiled from them can be transformed again (nested AD).
//!
//! In a rule `(lambda (x y dx) dy)` / `(lambda (x y y-bar) x-bar)`, `x` is the
//! untransformed argument (a tuple for several arguments) and `y` the result.

use super::ops::{self, Bin, Un};
use super::{Backend, RealVec, Shape};
use crate::ad::ops::strip;
use crate::error::{Error, Result};
use crate::eval::Machine;
use crate::prims::{Class, PrimDef, PrimFn, Rule};
use crate::value::Value;
use std::rc::Rc;

fn err(name: &str, msg: impl std::fmt::Display) -> Error {
    Error::runtime(None, format!("{}: {}", name, msg))
}

fn short(v: &Value) -> String {
    crate::print::brief(v, 60)
}

fn vec_arg<'a>(name: &str, v: &'a Value) -> Result<&'a Rc<RealVec>> {
    match v {
        Value::Vector(x) => Ok(x),
        other => Err(err(name, format!("expected a vector, got {} ({})", short(other), other.kind_name()))),
    }
}

fn real_arg(name: &str, v: &Value) -> Result<f64> {
    v.as_f64().ok_or_else(|| err(name, format!("expected a number, got {} ({})", short(v), v.kind_name())))
}

fn index_arg(name: &str, v: &Value) -> Result<usize> {
    let bad = || err(name, format!("expected a non-negative integer, got {} ({})", short(v), v.kind_name()));
    let too_large = || err(name, format!("{} is too large for a length or an index", short(v)));
    match v {
        Value::Int(i) if *i >= 0 => Ok(*i as usize),
        Value::Real(r) if *r >= 0.0 && r.fract() == 0.0 && *r < 9e15 => Ok(*r as usize),
        // (a whole number from 0, but past any length or index)
        Value::Big(b) if b.sign() == num_bigint::Sign::Plus => Err(too_large()),
        Value::Real(r) if *r >= 9e15 && r.fract() == 0.0 => Err(too_large()),
        _ => Err(bad()),
    }
}

fn be(m: &Machine) -> Backend {
    m.backend
}

fn out(name: &str, r: std::result::Result<Rc<RealVec>, String>) -> Result<Value> {
    r.map(Value::Vector).map_err(|e| err(name, e))
}

fn real_out(name: &str, r: std::result::Result<f64, String>) -> Result<Value> {
    r.map(Value::Real).map_err(|e| err(name, e))
}

/// The numbers of a proper list of numbers.
fn list_numbers(name: &str, l: &Value, out: &mut Vec<f64>) -> Result<usize> {
    let mut cur = l;
    let mut n = 0;
    loop {
        match cur {
            Value::Nil => return Ok(n),
            Value::Pair(p) => {
                out.push(real_arg(name, &p.car)?);
                n += 1;
                cur = &p.cdr;
            }
            other => {
                return Err(err(
                    name,
                    format!("expected a list of numbers, got a list ending in {}", short(other)),
                ))
            }
        }
    }
}

/// `(vector-of list)`: a vector from a list of numbers, or a matrix from a list of rows.
fn vector_of(m: &mut Machine, a: &[Value]) -> Result<Value> {
    const NAME: &str = "vector-of";
    // A sensitivity list may have lazy zeros inside.
    let l = crate::ad::ops::force(m, &a[0])?;
    let mut xs = Vec::new();
    // A list whose first element is a list (an empty one too: r x 0) is a list of rows.
    let first_is_row = matches!(&l, Value::Pair(p) if matches!(p.car, Value::Pair(_) | Value::Nil));
    if !first_is_row {
        list_numbers(NAME, &l, &mut xs)?;
        return Ok(Value::Vector(Rc::new(RealVec::from_vec(xs, Shape::Vector))));
    }
    let (mut rows, mut cols) = (0, None);
    let mut cur = &l;
    while let Value::Pair(p) = cur {
        let n = list_numbers(NAME, &p.car, &mut xs)?;
        if *cols.get_or_insert(n) != n {
            return Err(err(NAME, format!("rows of different lengths ({} and {})", cols.unwrap(), n)));
        }
        rows += 1;
        cur = &p.cdr;
    }
    if !matches!(cur, Value::Nil) {
        return Err(err(NAME, "expected a proper list of rows"));
    }
    Ok(Value::Vector(Rc::new(RealVec::from_vec(xs, Shape::Matrix(rows, cols.unwrap_or(0))))))
}

/// `(list-of v)`: the numbers of a vector as a list (a matrix: a list of rows).
fn list_of(_: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("list-of", &a[0])?;
    let xs = v.host();
    let list = |s: &[f64]| Value::list(s.iter().map(|x| Value::Real(*x)));
    Ok(match v.shape() {
        Shape::Vector => list(xs),
        Shape::Matrix(r, c) => {
            // (an r x 0 matrix has no numbers but r rows: `()` each, a pair
            // each in the list, of about five words)
            let need = r as u128 * 40;
            if let Some(mem) = memory_bytes().filter(|m| c == 0 && need > m.bytes as u128) {
                return Err(err(
                    "list-of",
                    format!(
                        "the {} rows of a {}x0 matrix need {:.1} GB as a list, more than {}",
                        r,
                        r,
                        need as f64 * 1e-9,
                        mem
                    ),
                ));
            }
            Value::list((0..r).map(|i| list(&xs[i * c..(i + 1) * c])))
        }
    })
}

/// A length `n` given to a primitive that builds a vector of it: an error if
/// `n` doubles would not fit in the machine's memory (RAM and swap), rather
/// than a process that pages until it is killed.
fn length_arg(name: &str, v: &Value) -> Result<usize> {
    let n = index_arg(name, v)?;
    fits(name, "a vector", n as u128)?;
    Ok(n)
}

/// An error if `n` doubles (`what`: a vector, a result) would not fit in memory.
fn fits(name: &str, what: &str, n: u128) -> Result<()> {
    if let Some(mem) = memory_bytes() {
        if n * 8 > mem.bytes as u128 {
            return Err(err(
                name,
                format!("{} of {} numbers needs {:.1} GB, more than {}", what, n, n as f64 * 8e-9, mem),
            ));
        }
    }
    // (a large one against the memory left now, which the evaluator's own
    // check, every so many steps, would not see before the vector is made)
    if n * 8 >= LARGE && !crate::stack::room_for(n as usize * 8) {
        return Err(err(
            name,
            format!(
                "{} of {} numbers needs {} MB, and {} MB of memory is left (of which {} MB is kept free)",
                what,
                n,
                (n * 8) >> 20,
                crate::stack::memory_room().unwrap_or(0) >> 20,
                crate::stack::MARGIN >> 20
            ),
        ));
    }
    Ok(())
}

/// The size (bytes) from which [`fits`] also checks a vector against the
/// memory left.
const LARGE: u128 = 16 << 20;

/// The most memory a vector could take: the machine's memory and swap, or
/// the memory limit of the process's control group (a container's) where
/// that is less.
#[derive(Clone, Copy)]
struct Memory {
    bytes: u64,
    limited: bool,
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gb = self.bytes as f64 * 1e-9;
        if self.limited {
            write!(f, "the {gb:.1} GB of memory this process may use (its control group's limit)")
        } else {
            write!(f, "this machine's {gb:.1} GB of memory")
        }
    }
}

/// [`Memory`], where the system says (Linux).
fn memory_bytes() -> Option<Memory> {
    static TOTAL: std::sync::OnceLock<Option<Memory>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let machine = crate::stack::machine_memory()?;
        Some(match crate::stack::memory_limit() {
            Some(l) if l < machine => Memory { bytes: l, limited: true },
            _ => Memory { bytes: machine, limited: false },
        })
    })
}

fn make_vec(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let n = length_arg("make-vec", &a[0])?;
    let x = real_arg("make-vec", &a[1])?;
    out("make-vec", ops::fill(be(m), n, Shape::Vector, x, None))
}

fn vec_fill(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-fill", &a[0])?;
    let x = real_arg("vec-fill", &a[1])?;
    out("vec-fill", ops::fill(be(m), v.len(), v.shape(), x, Some(v)))
}

fn vec_iota(_: &mut Machine, a: &[Value]) -> Result<Value> {
    let n = length_arg("vec-iota", &a[0])?;
    Ok(Value::Vector(Rc::new(RealVec::from_vec((0..n).map(|i| i as f64).collect(), Shape::Vector))))
}

fn vec_ref(_: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-ref", &a[0])?;
    let i = index_arg("vec-ref", &a[1])?;
    if i >= v.len() {
        return Err(err("vec-ref", format!("index {} out of range for {}", i, v.describe())));
    }
    Ok(Value::Real(v.get(i)))
}

fn vec_one_hot(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-one-hot", &a[0])?;
    let i = index_arg("vec-one-hot", &a[1])?;
    let x = real_arg("vec-one-hot", &a[2])?;
    if i >= v.len() {
        return Err(err("vec-one-hot", format!("index {} out of range for {}", i, v.describe())));
    }
    out("vec-one-hot", ops::one_hot(be(m), v, i, x))
}

fn unary(name: &'static str, op: Un, m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg(name, &a[0])?;
    out(name, ops::unary(be(m), op, v))
}

fn binary(name: &'static str, op: Bin, m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg(name, &a[0])?, vec_arg(name, &a[1])?);
    out(name, ops::binary(be(m), op, x, y))
}

fn vec_scale(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let s = real_arg("vec-scale", &a[0])?;
    let v = vec_arg("vec-scale", &a[1])?;
    out("vec-scale", ops::unary(be(m), Un::Affine(s, 0.0), v))
}

fn vec_shift(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let s = real_arg("vec-shift", &a[0])?;
    let v = vec_arg("vec-shift", &a[1])?;
    out("vec-shift", ops::unary(be(m), Un::Affine(1.0, s), v))
}

fn vec_sum(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-sum", &a[0])?;
    real_out("vec-sum", ops::sum(be(m), v))
}

fn vec_dot(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg("vec-dot", &a[0])?, vec_arg("vec-dot", &a[1])?);
    real_out("vec-dot", ops::dot(be(m), x, y))
}

fn vec_max(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-max", &a[0])?;
    real_out("vec-max", ops::max(be(m), v).map(|p| p.0))
}

/// A predicate-style primitive (sees through AD tags): the index of the largest element.
fn vec_argmax(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let s = strip(&a[0]);
    let v = vec_arg("vec-argmax", &s)?;
    ops::max(be(m), v).map(|p| Value::Int(p.1 as i64)).map_err(|e| err("vec-argmax", e))
}

fn vec_length(_: &mut Machine, a: &[Value]) -> Result<Value> {
    let s = strip(&a[0]);
    let v = vec_arg("vec-length", &s)?;
    Ok(Value::Int(v.len() as i64))
}

/// A type predicate like `real?`: a tagged vector is not a vector, and the
/// transformed versions (a shape rule) test the primal.
fn is_vector(_: &mut Machine, a: &[Value]) -> Result<Value> {
    Ok(Value::Bool(matches!(&a[0], Value::Vector(_))))
}

fn mat_dim(name: &str, v: &Value, which: usize) -> Result<Value> {
    let s = strip(v);
    let v = vec_arg(name, &s)?;
    match v.shape() {
        Shape::Matrix(r, c) => Ok(Value::Int([r, c][which] as i64)),
        Shape::Vector => Err(err(name, format!("expected a matrix, got {}", v.describe()))),
    }
}

fn vec_scan(name: &'static str, reverse: bool, m: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg(name, &a[0])?;
    out(name, ops::scan(be(m), v, reverse))
}

fn vec_reshape(_: &mut Machine, a: &[Value]) -> Result<Value> {
    const NAME: &str = "vec-reshape";
    let v = vec_arg(NAME, &a[0])?;
    let (r, c) = (index_arg(NAME, &a[1])?, index_arg(NAME, &a[2])?);
    if r.checked_mul(c) != Some(v.len()) {
        return Err(err(NAME, format!("cannot make a {}x{} matrix from {}", r, c, v.describe())));
    }
    Ok(Value::Vector(Rc::new(v.reshaped(Shape::Matrix(r, c)))))
}

fn vec_flatten(_: &mut Machine, a: &[Value]) -> Result<Value> {
    let v = vec_arg("vec-flatten", &a[0])?;
    Ok(Value::Vector(if v.shape() == Shape::Vector { v.clone() } else { Rc::new(v.reshaped(Shape::Vector)) }))
}

fn vec_shape_like(_: &mut Machine, a: &[Value]) -> Result<Value> {
    const NAME: &str = "vec-shape-like";
    let (v, like) = (vec_arg(NAME, &a[0])?, vec_arg(NAME, &a[1])?);
    if v.len() != like.len() {
        return Err(err(NAME, format!("cannot give {} the shape of {}", v.describe(), like.describe())));
    }
    Ok(Value::Vector(if v.shape() == like.shape() { v.clone() } else { Rc::new(v.reshaped(like.shape())) }))
}

fn mat_vec(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg("mat-vec", &a[0])?, vec_arg("mat-vec", &a[1])?);
    // (an r x 0 matrix holds no numbers, whatever r: the result has r)
    if let Shape::Matrix(r, _) = x.shape() {
        fits("mat-vec", "a result", r as u128)?;
    }
    out("mat-vec", ops::mat_vec(be(m), x, y))
}

fn vec_mat(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg("vec-mat", &a[0])?, vec_arg("vec-mat", &a[1])?);
    if let Shape::Matrix(_, c) = y.shape() {
        fits("vec-mat", "a result", c as u128)?;
    }
    out("vec-mat", ops::vec_mat(be(m), x, y))
}

fn mat_mat(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg("mat-mat", &a[0])?, vec_arg("mat-mat", &a[1])?);
    // (the result can be far larger than the arguments)
    if let (Shape::Matrix(r, _), Shape::Matrix(_, c)) = (x.shape(), y.shape()) {
        fits("mat-mat", "a result", r as u128 * c as u128)?;
    }
    out("mat-mat", ops::mat_mat(be(m), x, y))
}

fn transpose(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let x = vec_arg("transpose", &a[0])?;
    out("transpose", ops::transpose(be(m), x))
}

fn vec_outer(m: &mut Machine, a: &[Value]) -> Result<Value> {
    let (x, y) = (vec_arg("vec-outer", &a[0])?, vec_arg("vec-outer", &a[1])?);
    fits("vec-outer", "a result", x.len() as u128 * y.len() as u128)?;
    out("vec-outer", ops::outer(be(m), x, y))
}

/// `plus` on two vectors: elementwise (a symbolic zero costs nothing; a one-hot
/// costs constant time, amortised).
pub fn plus(m: &Machine, a: &Rc<RealVec>, b: &Rc<RealVec>) -> Result<Value> {
    out("plus", ops::add(be(m), a, b))
}

const ZERO: Rule = Rule::Rules { jvp: "(lambda (x y dx) (zero y))", vjp: "(lambda (x y yb) (zero x))" };

macro_rules! rules {
    ($jvp:expr, $vjp:expr) => {
        Rule::Rules { jvp: $jvp, vjp: $vjp }
    };
}

macro_rules! un {
    ($name:literal, $op:expr) => {
        (|m: &mut Machine, a: &[Value]| unary($name, $op, m, a)) as PrimFn
    };
}

macro_rules! bin {
    ($name:literal, $op:expr) => {
        (|m: &mut Machine, a: &[Value]| binary($name, $op, m, a)) as PrimFn
    };
}

/// The vector primitives, appended to the primitive table.
pub fn table() -> Vec<PrimDef> {
    use Class::*;
    let p = PrimDef::new;
    let transpose_as = |name| {
        p(
            name,
            1,
            transpose,
            rules!("(lambda (x y dx) (transpose dx))", "(lambda (x y yb) (transpose yb))"),
            Other,
        )
    };
    vec![
        // Construction and conversion.
        p(
            "vector-of",
            1,
            vector_of,
            rules!("(lambda (x y dx) (vector-of dx))", "(lambda (x y yb) (list-of yb))"),
            Other,
        ),
        p(
            "list-of",
            1,
            list_of,
            // (a 0 x c matrix is the list (), so the cotangent gets its shape back from x)
            rules!("(lambda (x y dx) (list-of dx))", "(lambda (x y yb) (vec-shape-like (vector-of yb) x))"),
            Other,
        ),
        p(
            "make-vec",
            2,
            make_vec,
            rules!(
                "(lambda ((cons n x) y (cons dn dx)) (make-vec n dx))",
                "(lambda ((cons n x) y yb) (cons (zero n) (vec-sum yb)))"
            ),
            Other,
        ),
        p(
            "vec-fill",
            2,
            vec_fill,
            rules!(
                "(lambda ((cons v x) y (cons dv dx)) (vec-fill v dx))",
                "(lambda ((cons v x) y yb) (cons (zero v) (vec-sum yb)))"
            ),
            Other,
        ),
        p("vec-iota", 1, vec_iota, ZERO, Other),
        p("vec-length", 1, vec_length, Rule::Predicate, Other),
        p(
            "vector?",
            1,
            is_vector,
            Rule::Shape { test: "(if (pair? v) #f (if (procedure? v) #f (vector? (STRIP v))))" },
            Other,
        ),
        p("mat-rows", 1, |_, a| mat_dim("mat-rows", &a[0], 0), Rule::Predicate, Other),
        p("mat-cols", 1, |_, a| mat_dim("mat-cols", &a[0], 1), Rule::Predicate, Other),
        p(
            "vec-ref",
            2,
            vec_ref,
            rules!(
                "(lambda ((cons v i) y (cons dv di)) (vec-ref dv i))",
                "(lambda ((cons v i) y yb) (cons (vec-one-hot v i yb) (zero i)))"
            ),
            Other,
        ),
        p(
            "vec-one-hot",
            3,
            vec_one_hot,
            rules!(
                "(lambda ((cons* v i x) y (cons* dv di dx)) (vec-one-hot v i dx))",
                "(lambda ((cons* v i x) y yb) (cons* (zero v) (zero i) (vec-ref yb i)))"
            ),
            Other,
        ),
        // Elementwise arithmetic.
        p(
            "vec+",
            2,
            bin!("vec+", Bin::Add),
            rules!("(lambda (x y (cons da db)) (vec+ da db))", "(lambda (x y yb) (cons yb yb))"),
            Arith,
        ),
        p(
            "vec-",
            2,
            bin!("vec-", Bin::Sub),
            rules!("(lambda (x y (cons da db)) (vec- da db))", "(lambda (x y yb) (cons yb (vec-neg yb)))"),
            Arith,
        ),
        p(
            "vec*",
            2,
            bin!("vec*", Bin::Mul),
            rules!(
                "(lambda ((cons a b) y (cons da db)) (vec+ (vec* da b) (vec* a db)))",
                "(lambda ((cons a b) y yb) (cons (vec* yb b) (vec* yb a)))"
            ),
            Arith,
        ),
        p(
            "vec/",
            2,
            bin!("vec/", Bin::Div),
            rules!(
                "(lambda ((cons a b) y (cons da db)) (vec/ (vec- da (vec* y db)) b))",
                "(lambda ((cons a b) y yb) (let ((ab (vec/ yb b))) (cons ab (vec-neg (vec* ab y)))))"
            ),
            Arith,
        ),
        p(
            "vec-neg",
            1,
            un!("vec-neg", Un::Affine(-1.0, 0.0)),
            rules!("(lambda (x y dx) (vec-neg dx))", "(lambda (x y yb) (vec-neg yb))"),
            Arith,
        ),
        p(
            "vec-scale",
            2,
            vec_scale,
            rules!(
                "(lambda ((cons s v) y (cons ds dv)) (vec+ (vec-scale ds v) (vec-scale s dv)))",
                "(lambda ((cons s v) y yb) (cons (vec-dot yb v) (vec-scale s yb)))"
            ),
            Arith,
        ),
        p(
            "vec-shift",
            2,
            vec_shift,
            rules!(
                "(lambda ((cons s v) y (cons ds dv)) (vec-shift ds dv))",
                "(lambda ((cons s v) y yb) (cons (vec-sum yb) yb))"
            ),
            Arith,
        ),
        // Elementwise functions.
        p(
            "vec-exp",
            1,
            un!("vec-exp", Un::Exp),
            rules!("(lambda (x y dx) (vec* dx y))", "(lambda (x y yb) (vec* yb y))"),
            Arith,
        ),
        p(
            "vec-log",
            1,
            un!("vec-log", Un::Log),
            rules!("(lambda (x y dx) (vec/ dx x))", "(lambda (x y yb) (vec/ yb x))"),
            Arith,
        ),
        p(
            "vec-sin",
            1,
            un!("vec-sin", Un::Sin),
            rules!("(lambda (x y dx) (vec* dx (vec-cos x)))", "(lambda (x y yb) (vec* yb (vec-cos x)))"),
            Arith,
        ),
        p(
            "vec-cos",
            1,
            un!("vec-cos", Un::Cos),
            rules!(
                "(lambda (x y dx) (vec-neg (vec* dx (vec-sin x))))",
                "(lambda (x y yb) (vec-neg (vec* yb (vec-sin x))))"
            ),
            Arith,
        ),
        p(
            "vec-sqrt",
            1,
            un!("vec-sqrt", Un::Sqrt),
            rules!(
                "(lambda (x y dx) (vec/ dx (vec-scale 2 y)))",
                "(lambda (x y yb) (vec/ yb (vec-scale 2 y)))"
            ),
            Arith,
        ),
        p(
            "vec-tanh",
            1,
            un!("vec-tanh", Un::Tanh),
            rules!(
                "(lambda (x y dx) (vec* dx (vec-shift 1 (vec-neg (vec* y y)))))",
                "(lambda (x y yb) (vec* yb (vec-shift 1 (vec-neg (vec* y y)))))"
            ),
            Arith,
        ),
        p(
            "vec-max0",
            1,
            un!("vec-max0", Un::Max0),
            rules!("(lambda (x y dx) (vec* dx (vec-step x)))", "(lambda (x y yb) (vec* yb (vec-step x)))"),
            Arith,
        ),
        p("vec-step", 1, un!("vec-step", Un::Step), ZERO, Arith),
        // Reductions and scans.
        p(
            "vec-sum",
            1,
            vec_sum,
            rules!("(lambda (x y dx) (vec-sum dx))", "(lambda (x y yb) (vec-fill x yb))"),
            Arith,
        ),
        p(
            "vec-dot",
            2,
            vec_dot,
            rules!(
                "(lambda ((cons a b) y (cons da db)) (+ (vec-dot da b) (vec-dot a db)))",
                "(lambda ((cons a b) y yb) (cons (vec-scale yb b) (vec-scale yb a)))"
            ),
            Arith,
        ),
        p(
            "vec-max",
            1,
            vec_max,
            rules!(
                "(lambda (x y dx) (vec-ref dx (vec-argmax x)))",
                "(lambda (x y yb) (vec-one-hot x (vec-argmax x) yb))"
            ),
            Arith,
        ),
        p("vec-argmax", 1, vec_argmax, Rule::Predicate, Other),
        p(
            "vec-prefix-sum",
            1,
            |m, a| vec_scan("vec-prefix-sum", false, m, a),
            rules!("(lambda (x y dx) (vec-prefix-sum dx))", "(lambda (x y yb) (vec-suffix-sum yb))"),
            Arith,
        ),
        p(
            "vec-suffix-sum",
            1,
            |m, a| vec_scan("vec-suffix-sum", true, m, a),
            rules!("(lambda (x y dx) (vec-suffix-sum dx))", "(lambda (x y yb) (vec-prefix-sum yb))"),
            Arith,
        ),
        // Matrices.
        p(
            "vec-reshape",
            3,
            vec_reshape,
            rules!(
                "(lambda ((cons* v r c) y (cons* dv dr dc)) (vec-reshape dv r c))",
                "(lambda ((cons* v r c) y yb) (cons* (vec-shape-like yb v) (zero r) (zero c)))"
            ),
            Other,
        ),
        p(
            "vec-flatten",
            1,
            vec_flatten,
            rules!("(lambda (x y dx) (vec-flatten dx))", "(lambda (x y yb) (vec-shape-like yb x))"),
            Other,
        ),
        p(
            "vec-shape-like",
            2,
            vec_shape_like,
            rules!(
                "(lambda ((cons v l) y (cons dv dl)) (vec-shape-like dv l))",
                "(lambda ((cons v l) y yb) (cons (vec-shape-like yb v) (zero l)))"
            ),
            Other,
        ),
        p(
            "mat-vec",
            2,
            mat_vec,
            rules!(
                "(lambda ((cons a v) y (cons da dv)) (vec+ (mat-vec da v) (mat-vec a dv)))",
                "(lambda ((cons a v) y yb) (cons (vec-outer yb v) (vec-mat yb a)))"
            ),
            Arith,
        ),
        p(
            "vec-mat",
            2,
            vec_mat,
            rules!(
                "(lambda ((cons v a) y (cons dv da)) (vec+ (vec-mat dv a) (vec-mat v da)))",
                "(lambda ((cons v a) y yb) (cons (mat-vec a yb) (vec-outer v yb)))"
            ),
            Arith,
        ),
        p(
            "mat-mat",
            2,
            mat_mat,
            rules!(
                "(lambda ((cons a b) y (cons da db)) (vec+ (mat-mat da b) (mat-mat a db)))",
                "(lambda ((cons a b) y yb) (cons (mat-mat yb (transpose b)) (mat-mat (transpose a) yb)))"
            ),
            Arith,
        ),
        transpose_as("transpose"),
        // (`transpose` by another name, for prelude/optimize.vlad, whose `transpose` of
        // lists of rows shadows it in the programs that include it and passes it packed
        // matrices)
        transpose_as("%transpose"),
        p(
            "vec-outer",
            2,
            vec_outer,
            rules!(
                "(lambda ((cons u v) y (cons du dv)) (vec+ (vec-outer du v) (vec-outer u dv)))",
                "(lambda ((cons u v) y yb) (cons (mat-vec yb v) (vec-mat u yb)))"
            ),
            Arith,
        ),
    ]
}
