//! Vector operations: shape checks, the symbolic-zero shortcuts, the choice of
//! backend, and the dispatch to the CPU loops ([`super::cpu`]) or the GPU kernels.
//!
//! Where an operation runs: `--backend cpu` always on the CPU; `cuda` always on the
//! GPU; `auto` on the GPU when one is usable and either an input already lives only
//! there (so chains stay on the device) or the vector is at least [`auto_min`] long,
//! and on the CPU where the GPU has no room for an operation's buffers (`run`).
//! Results stay where they were computed.

use super::cpu;
use super::cuda::{self, Gpu};
use super::{Backend, HostBuf, RealVec, Shape};
use std::rc::Rc;

type R<T> = std::result::Result<T, String>;

/// Elementwise unary functions. `Affine(a, b)` is `a x + b` (scale, shift, negation, fill).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Un {
    Affine(f64, f64),
    Exp,
    Log,
    Sin,
    Cos,
    Sqrt,
    Tanh,
    /// ReLU: `max(x, 0)`.
    Max0,
    /// Heaviside step: 1 where `x > 0`, else 0 (the derivative of ReLU).
    Step,
}

impl Un {
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Un::Affine(a, b) => a * x + b,
            Un::Exp => x.exp(),
            Un::Log => x.ln(),
            Un::Sin => x.sin(),
            Un::Cos => x.cos(),
            Un::Sqrt => x.sqrt(),
            Un::Tanh => x.tanh(),
            Un::Max0 => {
                if x > 0.0 {
                    x
                } else {
                    0.0
                }
            }
            Un::Step => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
}

impl Bin {
    pub fn apply(self, x: f64, y: f64) -> f64 {
        match self {
            Bin::Add => x + y,
            Bin::Sub => x - y,
            Bin::Mul => x * y,
            Bin::Div => x / y,
        }
    }
}

/// The shortest vector `auto` sends to the GPU (`VLAD_CUDA_MIN` overrides it).
pub fn auto_min() -> usize {
    thread_local! {
        static MIN: usize = std::env::var("VLAD_CUDA_MIN").ok().and_then(|s| s.parse().ok()).unwrap_or(1 << 16);
    }
    MIN.with(|m| *m)
}

enum Place {
    Cpu,
    Gpu(Rc<Gpu>),
}

fn place(be: Backend, len: usize, inputs: &[&RealVec]) -> Place {
    if len == 0 {
        return Place::Cpu;
    }
    match be {
        Backend::Cpu => Place::Cpu,
        Backend::Cuda => cuda::gpu().map(Place::Gpu).unwrap_or(Place::Cpu),
        Backend::Auto => {
            let wants = inputs.iter().any(|v| v.on_device_only()) || len >= auto_min();
            if !wants {
                return Place::Cpu;
            }
            cuda::gpu().map(Place::Gpu).unwrap_or(Place::Cpu)
        }
    }
}

/// An operation of length `len` on `inputs`: `host` where [`place`] puts it on the
/// CPU, else `dev` on the GPU; under `auto`, also `host` where the GPU has no room
/// for `dev`'s buffers (an input's copy or the result: the inputs are then read on
/// the host, copied back where they live only on the device), so that a program
/// whose vectors outgrow the GPU's memory runs on, on the CPU. `cuda` reports it.
fn run<T>(
    be: Backend,
    len: usize,
    inputs: &[&RealVec],
    host: impl FnOnce() -> T,
    dev: impl FnOnce(&Gpu) -> R<T>,
) -> R<T> {
    match place(be, len, inputs) {
        Place::Cpu => Ok(host()),
        Place::Gpu(g) => match dev(&g) {
            Err(e) if be == Backend::Auto && cuda::no_room(&e) => Ok(host()),
            r => r,
        },
    }
}

fn host_out(n: usize, shape: Shape, f: impl FnOnce(&mut [f64])) -> Rc<RealVec> {
    super::count_written(n);
    let mut b = HostBuf::for_overwrite(n);
    f(b.as_mut_slice());
    Rc::new(RealVec::from_host(b, shape))
}

fn dev_out(d: cuda::DevBuf, n: usize, shape: Shape) -> Rc<RealVec> {
    Rc::new(RealVec::from_dev(d, n, shape))
}

/// A vector of `len` copies of `x` (a symbolic zero when `x` is 0), placed like `like`.
pub fn fill(be: Backend, len: usize, shape: Shape, x: f64, like: Option<&RealVec>) -> R<Rc<RealVec>> {
    if x == 0.0 && x.is_sign_positive() {
        return Ok(Rc::new(RealVec::zeros(len, shape)));
    }
    let inputs: Vec<&RealVec> = like.into_iter().collect();
    run(
        be,
        len,
        &inputs,
        || host_out(len, shape, |o| o.fill(x)),
        |g| Ok(dev_out(g.fill(len, x)?, len, shape)),
    )
}

/// `like`-shaped zeros with `x` at index `i`.
pub fn one_hot(be: Backend, like: &RealVec, i: usize, x: f64) -> R<Rc<RealVec>> {
    let (n, shape) = (like.len(), like.shape());
    if x == 0.0 && x.is_sign_positive() {
        return Ok(Rc::new(RealVec::zeros(n, shape)));
    }
    run(
        be,
        n,
        &[like],
        // Kept as a one-hot (no numbers until something needs them): `plus` adds it to a
        // sum in constant time (see [`add`]).
        || Rc::new(RealVec::one_hot(n, shape, i, x)),
        |g| Ok(dev_out(g.one_hot(n, i, x)?, n, shape)),
    )
}

pub fn unary(be: Backend, op: Un, a: &Rc<RealVec>) -> R<Rc<RealVec>> {
    let (n, shape) = (a.len(), a.shape());
    match op {
        Un::Affine(s, q) if s == 1.0 && q == 0.0 => return Ok(a.clone()),
        // 0 x + q: a constant (a symbolic zero when q is 0), e.g. a zero tangent scaling a vector.
        Un::Affine(0.0, q) => return fill(be, n, shape, q, Some(a)),
        _ => {}
    }
    if a.is_zero() {
        let y = op.apply(0.0);
        return fill(be, n, shape, y, Some(a));
    }
    run(
        be,
        n,
        &[a],
        || host_out(n, shape, |o| cpu::unary(op, a.host(), o)),
        |g| Ok(dev_out(g.unary(op, a.dev_or_upload(g)?, n)?, n, shape)),
    )
}

/// Elementwise binary operation on two vectors of the same shape.
pub fn binary(be: Backend, op: Bin, a: &Rc<RealVec>, b: &Rc<RealVec>) -> R<Rc<RealVec>> {
    if a.len() != b.len() || a.shape() != b.shape() {
        return Err(format!("shapes differ: {} and {}", a.describe(), b.describe()));
    }
    let (n, shape) = (a.len(), a.shape());
    match op {
        Bin::Add if b.is_zero() => return Ok(a.clone()),
        Bin::Add if a.is_zero() => return Ok(b.clone()),
        Bin::Sub if b.is_zero() => return Ok(a.clone()),
        Bin::Sub if a.is_zero() => return unary(be, Un::Affine(-1.0, 0.0), b),
        Bin::Mul if a.is_zero() => return Ok(a.clone()),
        Bin::Mul if b.is_zero() => return Ok(b.clone()),
        Bin::Div if a.is_zero() && !b.is_zero() => return Ok(a.clone()),
        _ => {}
    }
    run(
        be,
        n,
        &[a, b],
        || host_out(n, shape, |o| cpu::binary(op, a.host(), b.host(), o)),
        |g| Ok(dev_out(g.binary(op, a.dev_or_upload(g)?, b.dev_or_upload(g)?, n)?, n, shape)),
    )
}

/// `a + b` for `plus` (of the same shape, as `vec+`): where either is a one-hot or a
/// pending sum of them, a pending sum (computed when first needed, or now once it
/// would cost more than a few times the length); otherwise as `vec+`.
pub fn add(be: Backend, a: &Rc<RealVec>, b: &Rc<RealVec>) -> R<Rc<RealVec>> {
    if a.len() == b.len()
        && a.shape() == b.shape()
        && !a.is_zero()
        && !b.is_zero()
        && (a.is_sparse() || b.is_sparse())
    {
        return Ok(Rc::new(RealVec::sparse_sum(a, b)));
    }
    binary(be, Bin::Add, a, b)
}

pub fn sum(be: Backend, a: &RealVec) -> R<f64> {
    if a.is_zero() {
        return Ok(0.0);
    }
    run(be, a.len(), &[a], || cpu::sum(a.host()), |g| g.sum(a.dev_or_upload(g)?, a.len()))
}

pub fn dot(be: Backend, a: &RealVec, b: &RealVec) -> R<f64> {
    if a.len() != b.len() || a.shape() != b.shape() {
        return Err(format!("shapes differ: {} and {}", a.describe(), b.describe()));
    }
    if a.is_zero() || b.is_zero() {
        return Ok(0.0);
    }
    run(
        be,
        a.len(),
        &[a, b],
        || cpu::dot(a.host(), b.host()),
        |g| g.dot(a.dev_or_upload(g)?, b.dev_or_upload(g)?, a.len()),
    )
}

/// The largest element and its (first) index.
pub fn max(be: Backend, a: &RealVec) -> R<(f64, usize)> {
    if a.is_empty() {
        return Err("empty vector".into());
    }
    if a.is_zero() {
        return Ok((0.0, 0));
    }
    run(be, a.len(), &[a], || cpu::max(a.host()), |g| g.max(a.dev_or_upload(g)?, a.len()))
}

/// Inclusive prefix sums (`reverse`: suffix sums).
pub fn scan(be: Backend, a: &Rc<RealVec>, reverse: bool) -> R<Rc<RealVec>> {
    if a.is_zero() {
        return Ok(a.clone());
    }
    let (n, shape) = (a.len(), a.shape());
    run(
        be,
        n,
        &[a],
        || host_out(n, shape, |o| cpu::scan(a.host(), o, reverse)),
        |g| Ok(dev_out(g.scan(a.dev_or_upload(g)?, n, reverse)?, n, shape)),
    )
}

fn dims(m: &RealVec, what: &str) -> R<(usize, usize)> {
    match m.shape() {
        Shape::Matrix(r, c) => Ok((r, c)),
        Shape::Vector => Err(format!("expected a matrix as {}, got {}", what, m.describe())),
    }
}

fn plain(v: &RealVec, what: &str) -> R<()> {
    match v.shape() {
        Shape::Vector => Ok(()),
        _ => Err(format!("expected a vector as {}, got {}", what, v.describe())),
    }
}

/// `A x` for an r×c matrix and a vector of length c.
pub fn mat_vec(be: Backend, a: &RealVec, x: &RealVec) -> R<Rc<RealVec>> {
    let (r, c) = dims(a, "first argument")?;
    plain(x, "second argument")?;
    if x.len() != c {
        return Err(format!("a {}x{} matrix times a vector of length {}", r, c, x.len()));
    }
    if a.is_zero() || x.is_zero() {
        return Ok(Rc::new(RealVec::zeros(r, Shape::Vector)));
    }
    run(
        be,
        r * c,
        &[a, x],
        || host_out(r, Shape::Vector, |o| cpu::mat_vec(a.host(), x.host(), r, c, o)),
        |g| Ok(dev_out(g.mat_vec(a.dev_or_upload(g)?, x.dev_or_upload(g)?, r, c)?, r, Shape::Vector)),
    )
}

/// `xᵀ A` for a vector of length r and an r×c matrix.
pub fn vec_mat(be: Backend, x: &RealVec, a: &RealVec) -> R<Rc<RealVec>> {
    plain(x, "first argument")?;
    let (r, c) = dims(a, "second argument")?;
    if x.len() != r {
        return Err(format!("a vector of length {} times a {}x{} matrix", x.len(), r, c));
    }
    if a.is_zero() || x.is_zero() {
        return Ok(Rc::new(RealVec::zeros(c, Shape::Vector)));
    }
    run(
        be,
        r * c,
        &[a, x],
        || host_out(c, Shape::Vector, |o| cpu::vec_mat(x.host(), a.host(), r, c, o)),
        |g| Ok(dev_out(g.vec_mat(x.dev_or_upload(g)?, a.dev_or_upload(g)?, r, c)?, c, Shape::Vector)),
    )
}

/// `A B` for an r×k and a k×c matrix.
pub fn mat_mat(be: Backend, a: &RealVec, b: &RealVec) -> R<Rc<RealVec>> {
    let (r, k) = dims(a, "first argument")?;
    let (k2, c) = dims(b, "second argument")?;
    if k != k2 {
        return Err(format!("a {}x{} matrix times a {}x{} matrix", r, k, k2, c));
    }
    let shape = Shape::Matrix(r, c);
    if a.is_zero() || b.is_zero() {
        return Ok(Rc::new(RealVec::zeros(r * c, shape)));
    }
    run(
        be,
        (r * k).max(k * c).max(r * c),
        &[a, b],
        || host_out(r * c, shape, |o| cpu::mat_mat(a.host(), b.host(), r, k, c, o)),
        |g| Ok(dev_out(g.mat_mat(a.dev_or_upload(g)?, b.dev_or_upload(g)?, r, k, c)?, r * c, shape)),
    )
}

pub fn transpose(be: Backend, a: &Rc<RealVec>) -> R<Rc<RealVec>> {
    let (r, c) = dims(a, "argument")?;
    let shape = Shape::Matrix(c, r);
    if a.is_zero() {
        return Ok(Rc::new(RealVec::zeros(r * c, shape)));
    }
    if r == 1 || c == 1 {
        return Ok(Rc::new(a.reshaped(shape)));
    }
    run(
        be,
        r * c,
        &[a],
        || host_out(r * c, shape, |o| cpu::transpose(a.host(), r, c, o)),
        |g| Ok(dev_out(g.transpose(a.dev_or_upload(g)?, r, c)?, r * c, shape)),
    )
}

/// `u vᵀ`: the len(u)×len(v) matrix of products.
pub fn outer(be: Backend, u: &RealVec, v: &RealVec) -> R<Rc<RealVec>> {
    plain(u, "first argument")?;
    plain(v, "second argument")?;
    let (r, c) = (u.len(), v.len());
    let shape = Shape::Matrix(r, c);
    if u.is_zero() || v.is_zero() {
        return Ok(Rc::new(RealVec::zeros(r * c, shape)));
    }
    run(
        be,
        r * c,
        &[u, v],
        || host_out(r * c, shape, |o| cpu::outer(u.host(), v.host(), o)),
        |g| Ok(dev_out(g.outer(u.dev_or_upload(g)?, v.dev_or_upload(g)?, r, c)?, r * c, shape)),
    )
}
