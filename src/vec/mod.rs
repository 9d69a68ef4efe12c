//! Packed real vectors and row-major matrices (spec: VECTORS.md; docs/vectors.md).
//!
//! A [`RealVec`] is a leaf value (`Value::Vector`): AD tags wrap it like a real. Its
//! numbers live on the host, on the GPU, or both (a copy is made the first time the
//! other side needs it, and kept); a vector with neither is a symbolic zero that costs
//! nothing until it is touched. Operations ([`ops`]) pick where to run from the
//! machine's [`Backend`] and where their inputs are: the CPU loops are in [`cpu`], the
//! CUDA kernels in `cuda` (only with the `cuda` feature, and only when a driver and a
//! device are found at run time). The primitives and their derivative rules are in
//! [`prims`].

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "nocuda.rs"]
pub mod cuda;
pub mod ops;
pub mod prims;

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Where vector primitives run (`--backend`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Backend {
    /// The GPU when one is usable and the vector is long enough; otherwise the CPU.
    Auto,
    Cpu,
    /// The GPU, always (checked at start-up: a missing device is an error).
    Cuda,
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "auto" => Some(Backend::Auto),
            "cpu" => Some(Backend::Cpu),
            "cuda" => Some(Backend::Cuda),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        }
    }
}

static DEFAULT_BACKEND: AtomicU8 = AtomicU8::new(0);

/// The backend new machines start with (set once from the command line).
pub fn set_default_backend(b: Backend) {
    DEFAULT_BACKEND.store(b as u8, Ordering::Relaxed);
}

pub fn default_backend() -> Backend {
    match DEFAULT_BACKEND.load(Ordering::Relaxed) {
        1 => Backend::Cpu,
        2 => Backend::Cuda,
        _ => Backend::Auto,
    }
}

/// Is a CUDA device usable (feature built in, driver found, a device present, kernels loaded)?
pub fn cuda_available() -> bool {
    cuda::available()
}

/// Why the GPU is not usable, for `--backend cuda`'s error message.
pub fn cuda_unavailable_reason() -> String {
    cuda::unavailable_reason()
}

/// The shape of a vector value: a plain vector, or a row-major matrix.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    Vector,
    Matrix(usize, usize),
}

impl Shape {
    pub fn describe(self, len: usize) -> String {
        match self {
            Shape::Vector => format!("a vector of length {}", len),
            Shape::Matrix(r, c) => format!("a {}x{} matrix", r, c),
        }
    }
}

/// Counts of copies between host and device (for residency tests and `vlad` users who
/// want to know). Whole-vector copies and single numbers read back are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Vectors copied host → device.
    pub to_device: u64,
    /// Vectors copied device → host.
    pub to_host: u64,
    /// Scalars read back (reductions, `vec-ref`).
    pub scalars: u64,
}

thread_local! {
    static TRANSFERS: std::cell::Cell<Transfers> = const {
        std::cell::Cell::new(Transfers { to_device: 0, to_host: 0, scalars: 0 })
    };
}

/// The transfer counters of this thread so far (each thread has its own GPU context and
/// stream, so a thread's counts are exactly its own copies).
pub fn transfers() -> Transfers {
    TRANSFERS.with(|t| t.get())
}

fn count(f: impl FnOnce(&mut Transfers)) {
    TRANSFERS.with(|t| {
        let mut x = t.get();
        f(&mut x);
        t.set(x)
    })
}

pub(crate) fn count_to_device() {
    count(|t| t.to_device += 1);
}
pub(crate) fn count_to_host() {
    count(|t| t.to_host += 1);
}
pub(crate) fn count_scalar() {
    count(|t| t.scalars += 1);
}

thread_local! {
    static WRITTEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Numbers written by vector operations on the host on this thread so far (results of
/// elementwise operations, reductions' inputs excepted, and the numbers of pending sums
/// when computed): a measure of the work of vector code, for complexity tests.
pub fn numbers_written() -> u64 {
    WRITTEN.with(|w| w.get())
}

pub(crate) fn count_written(n: usize) {
    WRITTEN.with(|w| w.set(w.get() + n as u64));
}

/// A host buffer. Large buffers go back to a small per-thread pool when dropped, so a
/// chain of operations on long vectors reuses memory that is already mapped instead of
/// faulting fresh pages in for every result.
pub struct HostBuf(Vec<f64>);

const POOL_MIN: usize = 1 << 14;
const POOL_MAX_BUFFERS: usize = 16;
const POOL_MAX_BYTES: usize = 1 << 30;

thread_local! {
    static POOL: RefCell<Vec<Vec<f64>>> = const { RefCell::new(Vec::new()) };
}

impl HostBuf {
    /// A buffer of `n` numbers whose contents the caller overwrites entirely.
    pub fn for_overwrite(n: usize) -> HostBuf {
        HostBuf::pooled(n).unwrap_or_else(|| HostBuf(vec![0.0; n]))
    }
    /// A buffer of `n` zeros.
    pub fn zeroed(n: usize) -> HostBuf {
        match HostBuf::pooled(n) {
            Some(mut b) => {
                b.0.fill(0.0);
                b
            }
            None => HostBuf(vec![0.0; n]),
        }
    }
    fn pooled(n: usize) -> Option<HostBuf> {
        if n < POOL_MIN {
            return None;
        }
        POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            p.iter().position(|v| v.len() == n).map(|i| HostBuf(p.swap_remove(i)))
        })
        .ok()
        .flatten()
    }
    pub fn from_vec(v: Vec<f64>) -> HostBuf {
        HostBuf(v)
    }
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.0
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.0.len() < POOL_MIN {
            return;
        }
        let v = std::mem::take(&mut self.0);
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            let bytes: usize = p.iter().map(|b| b.len() * 8).sum();
            if p.len() >= POOL_MAX_BUFFERS || bytes + v.len() * 8 > POOL_MAX_BYTES {
                // Make room by dropping the oldest buffer.
                if !p.is_empty() {
                    p.remove(0);
                }
                let bytes: usize = p.iter().map(|b| b.len() * 8).sum();
                if bytes + v.len() * 8 > POOL_MAX_BYTES {
                    return;
                }
            }
            p.push(v);
        });
    }
}

/// A sum not yet computed: what `vec-one-hot` and `plus` (the sensitivity sums of
/// reverse mode) build instead of a full-length vector, so that reading a vector element
/// by element costs constant work per element in the reverse phase. Its numbers are
/// computed once, when something needs them, adding exactly what the dense sums would
/// have added (same pairs, same order), by merging the smaller side into the larger.
pub(crate) enum Term {
    /// Zeros with `x` at index `i`.
    OneHot(usize, f64),
    /// A vector with its numbers (never itself a pending sum).
    Dense(Rc<RealVec>),
    /// The elementwise sum of the two (`None` only while being dropped).
    Sum(Option<(Rc<Term>, Rc<Term>)>),
}

impl Drop for Term {
    // A long chain of sums is dropped without recursion.
    fn drop(&mut self) {
        let Term::Sum(kids) = self else { return };
        let Some((a, b)) = kids.take() else { return };
        let mut stack = vec![a, b];
        while let Some(t) = stack.pop() {
            let Ok(mut t) = Rc::try_unwrap(t) else { continue };
            if let Some((a, b)) = match &mut t {
                Term::Sum(kids) => kids.take(),
                _ => None,
            } {
                stack.push(a);
                stack.push(b);
            }
        }
    }
}

/// The numbers of a term while it is being computed: all of them, or a few.
enum Acc {
    Dense(Vec<f64>),
    Few(rustc_hash::FxHashMap<usize, f64>),
}

fn add_into(big: &mut Acc, small: Acc) {
    match (big, small) {
        (Acc::Dense(d), Acc::Dense(e)) => {
            for (x, y) in d.iter_mut().zip(e) {
                *x += y;
            }
        }
        (Acc::Dense(d), Acc::Few(e)) => {
            for (i, y) in e {
                d[i] += y;
            }
        }
        (Acc::Few(d), Acc::Few(e)) => {
            for (i, y) in e {
                *d.entry(i).or_insert(0.0) += y;
            }
        }
        (Acc::Few(_), Acc::Dense(_)) => unreachable!(),
    }
}

fn acc_size(a: &Acc) -> usize {
    match a {
        Acc::Dense(d) => usize::MAX - d.len(),
        Acc::Few(m) => m.len(),
    }
}

impl Term {
    fn eval(&self) -> Acc {
        stacker::maybe_grow(128 * 1024, 8 * 1024 * 1024, || match self {
            Term::OneHot(i, x) => {
                count_written(1);
                let mut m = rustc_hash::FxHashMap::default();
                m.insert(*i, *x);
                Acc::Few(m)
            }
            Term::Dense(v) => {
                count_written(v.len);
                Acc::Dense(v.host().to_vec())
            }
            Term::Sum(kids) => {
                let (a, b) = kids.as_ref().expect("a sum being dropped");
                let (mut x, mut y) = (a.eval(), b.eval());
                // Addition commutes exactly: add the smaller side into the larger.
                if acc_size(&x) < acc_size(&y) {
                    std::mem::swap(&mut x, &mut y);
                }
                add_into(&mut x, y);
                x
            }
        })
    }
}

/// A packed vector of doubles (or a row-major matrix), immutable. The numbers are on
/// the host, on the device, or both; with neither, the vector is a symbolic zero, or
/// a pending sum (`Term`) whose numbers are computed on the host when first needed.
pub struct RealVec {
    len: usize,
    shape: Shape,
    host: OnceCell<Rc<HostBuf>>,
    dev: OnceCell<Rc<cuda::DevBuf>>,
    /// A pending sum and its weight (a bound on the work of computing it).
    sparse: Option<(Rc<Term>, usize)>,
    /// Made a symbolic zero (`zeros`): still one once its numbers were made
    /// (by printing it, say), so that the operations that treat a zero
    /// symbolically (`vec*` by it is it) give the same value either way.
    zero: bool,
}

impl RealVec {
    pub fn from_host(buf: HostBuf, shape: Shape) -> RealVec {
        let len = buf.as_slice().len();
        debug_assert!(match shape {
            Shape::Matrix(r, c) => r * c == len,
            Shape::Vector => true,
        });
        let host = OnceCell::new();
        let _ = host.set(Rc::new(buf));
        RealVec { len, shape, host, dev: OnceCell::new(), sparse: None, zero: false }
    }

    pub fn from_vec(v: Vec<f64>, shape: Shape) -> RealVec {
        RealVec::from_host(HostBuf::from_vec(v), shape)
    }

    pub fn from_dev(buf: cuda::DevBuf, len: usize, shape: Shape) -> RealVec {
        let dev = OnceCell::new();
        let _ = dev.set(Rc::new(buf));
        RealVec { len, shape, host: OnceCell::new(), dev, sparse: None, zero: false }
    }

    /// A symbolic zero: no storage until something needs its numbers.
    pub fn zeros(len: usize, shape: Shape) -> RealVec {
        RealVec { len, shape, host: OnceCell::new(), dev: OnceCell::new(), sparse: None, zero: true }
    }

    /// Zeros with `x` at index `i`, kept as a one-hot until its numbers are needed.
    pub fn one_hot(len: usize, shape: Shape, i: usize, x: f64) -> RealVec {
        debug_assert!(i < len);
        RealVec {
            len,
            shape,
            host: OnceCell::new(),
            dev: OnceCell::new(),
            sparse: Some((Rc::new(Term::OneHot(i, x)), 1)),
            zero: false,
        }
    }

    /// Is this a pending sum (a one-hot, or a sum with one)?
    pub fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }

    /// This vector as a term of a pending sum, and its weight.
    fn term(self: &Rc<RealVec>) -> (Rc<Term>, usize) {
        match &self.sparse {
            Some((t, w)) => (t.clone(), *w),
            None => (Rc::new(Term::Dense(self.clone())), self.len.max(1)),
        }
    }

    /// `a + b` (of the same length; the result has `a`'s shape) where one of them is a
    /// pending sum: pending too while the work of computing it stays within a few times
    /// the length (so a chain of one-hots added up costs constant work per one-hot,
    /// amortised), computed now otherwise.
    pub fn sparse_sum(a: &Rc<RealVec>, b: &Rc<RealVec>) -> RealVec {
        let ((ta, wa), (tb, wb)) = (a.term(), b.term());
        let (len, shape) = (a.len, a.shape);
        let w = wa.saturating_add(wb);
        let sum = RealVec {
            len,
            shape,
            host: OnceCell::new(),
            dev: OnceCell::new(),
            sparse: Some((Rc::new(Term::Sum(Some((ta, tb)))), w)),
            zero: false,
        };
        if w <= 2 * len + 8 {
            return sum;
        }
        RealVec::from_host(sum.compute(), shape)
    }

    /// The numbers of a pending sum.
    fn compute(&self) -> HostBuf {
        let (t, _) = self.sparse.as_ref().expect("a pending sum");
        match t.eval() {
            Acc::Dense(d) => HostBuf::from_vec(d),
            Acc::Few(m) => {
                count_written(self.len);
                let mut b = HostBuf::zeroed(self.len);
                let o = b.as_mut_slice();
                for (i, x) in m {
                    o[i] = x;
                }
                b
            }
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn shape(&self) -> Shape {
        self.shape
    }
    pub fn is_matrix(&self) -> bool {
        matches!(self.shape, Shape::Matrix(..))
    }
    pub fn describe(&self) -> String {
        self.shape.describe(self.len)
    }

    /// Is this a symbolic zero (made by `zeros`; its numbers, if made since,
    /// are all 0)?
    pub fn is_zero(&self) -> bool {
        self.zero
    }

    /// Are the numbers on the device (and not on the host)?
    pub fn on_device_only(&self) -> bool {
        self.host.get().is_none() && self.dev.get().is_some()
    }

    /// Are the numbers on the device (possibly also on the host)?
    pub fn on_device(&self) -> bool {
        self.dev.get().is_some()
    }

    /// Are the numbers on the host (possibly also on the device)?
    pub fn on_host(&self) -> bool {
        self.host.get().is_some()
    }

    /// The numbers on the host: copied back from the device (once) if they live there,
    /// computed if this is a pending sum, materialised if this is a symbolic zero.
    pub fn host(&self) -> &[f64] {
        self.host
            .get_or_init(|| match self.dev.get() {
                Some(d) => {
                    count_to_host();
                    Rc::new(cuda::to_host(d, self.len))
                }
                None if self.sparse.is_some() => Rc::new(self.compute()),
                None => Rc::new(HostBuf::zeroed(self.len)),
            })
            .as_slice()
    }

    /// The device buffer, if the numbers are there already.
    pub fn dev(&self) -> Option<&cuda::DevBuf> {
        self.dev.get().map(|d| &**d)
    }

    /// The device buffer, copying the numbers over (once) if needed.
    pub fn dev_or_upload(&self, g: &cuda::Gpu) -> Result<&cuda::DevBuf, String> {
        if let Some(d) = self.dev.get() {
            return Ok(&**d);
        }
        if self.sparse.is_some() {
            // A pending sum is computed on the host first.
            self.host();
        }
        let d = match self.host.get() {
            Some(h) => {
                count_to_device();
                g.upload(h.as_slice())?
            }
            None => g.zeros(self.len)?,
        };
        let _ = self.dev.set(Rc::new(d));
        Ok(self.dev.get().unwrap()).map(|d| &**d)
    }

    /// The same numbers seen with another shape of the same length (shares the storage).
    pub fn reshaped(&self, shape: Shape) -> RealVec {
        RealVec {
            len: self.len,
            shape,
            host: self.host.clone(),
            dev: self.dev.clone(),
            sparse: self.sparse.clone(),
            zero: self.zero,
        }
    }

    /// One element (reads back a single number if the vector lives on the device).
    pub fn get(&self, i: usize) -> f64 {
        if let Some(h) = self.host.get() {
            return h.as_slice()[i];
        }
        if self.sparse.is_some() {
            return self.host()[i];
        }
        match self.dev.get() {
            Some(d) => {
                count_scalar();
                cuda::read_one(d, i)
            }
            None => 0.0,
        }
    }

    /// A symbolic zero of the same shape.
    pub fn zero_like(&self) -> RealVec {
        RealVec::zeros(self.len, self.shape)
    }
}
