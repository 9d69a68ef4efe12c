//! The CUDA backend, through the driver API with `cudarc` (dynamic loading: the
//! binary needs no CUDA to build or to run, and looks for `libcuda` at run time).
//!
//! The kernels (`kernels.cu`) are compiled ahead of time to PTX (`kernels.ptx`, made
//! by `tools/gen-ptx.sh`) and embedded; the driver JIT-compiles them for the GPU it
//! finds. One context and one stream per thread; every launch goes on that stream, so
//! a chain of operations runs in order without host synchronisation, and nothing is
//! copied back until the host needs the numbers.
//!
//! Initialisation checks, in order: `VLAD_NO_CUDA` unset, `libcuda` loadable
//! (`is_culib_present`), a device present, a context made, the module loaded. Any
//! failure (or a panic inside the driver bindings) makes the GPU unavailable, with a
//! reason that `--backend cuda` reports; `auto` then uses the CPU.

use super::ops::{Bin, Un};
use super::HostBuf;
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;

type R<T> = std::result::Result<T, String>;

const PTX: &str = include_str!("kernels.ptx");

/// Threads per block of the one-dimensional kernels (the reductions and the scan
/// assume exactly this many).
const THREADS: u32 = 256;
/// Elements per block of the scan's first pass (`SCAN_CHUNK` in kernels.cu).
const SCAN_CHUNK: usize = 256 * 8;

/// Numbers on the device.
pub struct DevBuf(CudaSlice<f64>);

struct Kernels {
    unary: CudaFunction,
    binary: CudaFunction,
    fill: CudaFunction,
    one_hot: CudaFunction,
    reduce: CudaFunction,
    argmax: CudaFunction,
    scan_chunks: CudaFunction,
    scan_sums: CudaFunction,
    scan_add: CudaFunction,
    mat_vec: CudaFunction,
    vec_mat: CudaFunction,
    mat_mat: CudaFunction,
    transpose: CudaFunction,
    outer: CudaFunction,
}

/// A GPU with the kernels loaded.
pub struct Gpu {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    k: Kernels,
    /// Most blocks a grid-stride kernel is launched with.
    max_blocks: u32,
    /// The device's default memory pool (where `cuMemAllocAsync` allocates), when the
    /// driver has one: freed buffers stay in it for reuse (see `keep_freed_memory`).
    pool: Option<sys::CUmemoryPool>,
}

thread_local! {
    static GPU: OnceCell<Result<Rc<Gpu>, String>> = const { OnceCell::new() };
}

fn state<T>(f: impl FnOnce(&Result<Rc<Gpu>, String>) -> T) -> T {
    GPU.with(|c| f(c.get_or_init(|| init().map(Rc::new))))
}

/// The GPU, if one is usable (initialised on first use, once per thread).
pub fn gpu() -> Option<Rc<Gpu>> {
    state(|s| s.as_ref().ok().cloned())
}

pub fn available() -> bool {
    gpu().is_some()
}

pub fn unavailable_reason() -> String {
    state(|s| match s {
        Ok(_) => "a device is available".to_string(),
        Err(e) => e.clone(),
    })
}

fn init() -> R<Gpu> {
    if std::env::var_os("VLAD_NO_CUDA").is_some_and(|v| !v.is_empty()) {
        return Err("VLAD_NO_CUDA is set".into());
    }
    // SAFETY: only tries to open the driver library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the CUDA driver (libcuda) was not found".into());
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(init_device)) {
        Ok(r) => r,
        Err(_) => Err("the CUDA driver failed during initialisation".into()),
    }
}

fn init_device() -> R<Gpu> {
    fn e(what: impl std::fmt::Display) -> impl FnOnce(cudarc::driver::DriverError) -> String {
        move |err| format!("{}: {:?}", what, err)
    }
    let count = CudaContext::device_count().map_err(e("cannot initialise the CUDA driver"))?;
    if count < 1 {
        return Err("no CUDA device found".into());
    }
    let ctx = CudaContext::new(0).map_err(e("cannot create a CUDA context"))?;
    // One stream orders everything; per-buffer events are not needed.
    // SAFETY: all work goes on the one stream below.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.default_stream();
    let module =
        ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).map_err(e("cannot load the vector kernels"))?;
    let f = |name: &str| module.load_function(name).map_err(e(format!("kernel {} missing", name)));
    let k = Kernels {
        unary: f("vec_unary")?,
        binary: f("vec_binary")?,
        fill: f("vec_fill")?,
        one_hot: f("vec_one_hot")?,
        reduce: f("vec_reduce")?,
        argmax: f("vec_argmax")?,
        scan_chunks: f("vec_scan_chunks")?,
        scan_sums: f("vec_scan_sums")?,
        scan_add: f("vec_scan_add")?,
        mat_vec: f("vec_mat_vec")?,
        vec_mat: f("vec_vec_mat")?,
        mat_mat: f("vec_mat_mat")?,
        transpose: f("vec_transpose")?,
        outer: f("vec_outer")?,
    };
    let sms = ctx
        .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .unwrap_or(16)
        .max(1) as u32;
    let pool = if ctx.has_async_alloc() { keep_freed_memory(&ctx) } else { None };
    Ok(Gpu { _ctx: ctx, stream, k, max_blocks: sms * 8, pool })
}

/// Makes the device's default memory pool keep freed memory for reuse instead of
/// returning it to the driver at every synchronisation (its default release threshold
/// is 0). Without this, a chain of operations on long vectors maps and unmaps its
/// buffers' memory again at each result read back: the 10^8-element chain of
/// `bench/vectors.rs` ran at 1.2 TB/s on an H100. `Gpu::retry` gives the cached memory
/// back when an allocation runs out of memory.
fn keep_freed_memory(ctx: &CudaContext) -> Option<sys::CUmemoryPool> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold = u64::MAX;
    // SAFETY: plain driver calls on the context's device with valid out-pointers.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result().ok()?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()
        .ok()?;
    }
    Some(pool)
}

fn derr(what: &'static str) -> impl Fn(DriverError) -> String {
    move |e| match e.error_string() {
        Ok(text) => format!("CUDA error in {}: {} ({:?})", what, text.to_string_lossy(), e.0),
        Err(_) => format!("CUDA error in {}: {:?}", what, e.0),
    }
}

/// How the error of an allocation the GPU has no room for begins (see [`no_room`]).
const NO_ROOM: &str = "the GPU has no room for ";

/// Is `e` the error of an allocation the GPU had no room for (made by `alloc_err`)?
/// (`auto` then computes on the CPU: `ops::run`.)
pub fn no_room(e: &str) -> bool {
    e.starts_with(NO_ROOM)
}

/// The error of `what` (an allocation of `n` numbers): out of memory says how much was
/// asked for and that the CPU backend is the way round it.
fn alloc_err(what: &'static str, n: usize) -> impl Fn(DriverError) -> String {
    move |e| {
        if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
            format!(
                "{}{} numbers ({:.1} GB) (--backend auto or cpu computes on the host)",
                NO_ROOM,
                n,
                n as f64 * 8e-9
            )
        } else {
            derr(what)(e)
        }
    }
}

/// Copies a device vector back to the host.
pub fn to_host(d: &DevBuf, n: usize) -> HostBuf {
    let mut h = HostBuf::for_overwrite(n);
    if n > 0 {
        let s = d.0.stream().clone();
        if let Err(e) = s.memcpy_dtoh(&d.0, h.as_mut_slice()).and_then(|_| s.synchronize()) {
            device_lost("copying a vector back", e);
        }
    }
    h
}

/// Reads one number of a device vector.
pub fn read_one(d: &DevBuf, i: usize) -> f64 {
    let s = d.0.stream().clone();
    let mut x = [0.0f64];
    if let Err(e) = s.memcpy_dtoh(&d.0.slice(i..i + 1), &mut x[..]).and_then(|_| s.synchronize()) {
        device_lost("reading a number back", e);
    }
    x[0]
}

/// Ends the process after a failed copy from the device: an error there is a
/// fault of the device's context (sticky: every later call fails too), whose
/// vectors are lost, so the run cannot go on. A message and exit status 70
/// (EX_SOFTWARE), not a panic.
#[cold]
fn device_lost(what: &'static str, e: DriverError) -> ! {
    eprintln!("vlad: error: {} (--backend cpu computes on the host)", derr(what)(e));
    std::process::exit(70)
}

impl Gpu {
    fn cfg(&self, n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(THREADS as usize).clamp(1, self.max_blocks as usize) as u32;
        LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
    }

    fn one_block(&self) -> LaunchConfig {
        LaunchConfig { grid_dim: (1, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
    }

    /// Runs an allocating call; when it runs out of device memory, gives the memory
    /// pool's cached free memory back to the driver and tries once more.
    fn retry<T>(&self, f: impl Fn() -> Result<T, DriverError>) -> Result<T, DriverError> {
        match (f(), self.pool) {
            (Err(e), Some(pool)) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                self.stream.synchronize()?;
                // SAFETY: the pool is the device's default pool, alive with the context.
                unsafe { sys::cuMemPoolTrimTo(pool, 0) }.result()?;
                f()
            }
            (r, _) => r,
        }
    }

    fn alloc(&self, n: usize) -> R<CudaSlice<f64>> {
        self.alloc_as::<f64>(n)
    }

    /// [`Gpu::alloc`] of `n` elements of type `T`.
    fn alloc_as<T: cudarc::driver::DeviceRepr>(&self, n: usize) -> R<CudaSlice<T>> {
        // SAFETY: every caller overwrites the whole buffer before it is read.
        self.retry(|| unsafe { self.stream.alloc::<T>(n.max(1)) }).map_err(alloc_err("allocation", n))
    }

    pub fn upload(&self, h: &[f64]) -> R<DevBuf> {
        if h.is_empty() {
            return self.zeros(0);
        }
        self.retry(|| self.stream.clone_htod(h)).map(DevBuf).map_err(alloc_err("copy to device", h.len()))
    }

    pub fn zeros(&self, n: usize) -> R<DevBuf> {
        self.retry(|| self.stream.alloc_zeros::<f64>(n.max(1)))
            .map(DevBuf)
            .map_err(alloc_err("allocation", n))
    }

    pub fn fill(&self, n: usize, x: f64) -> R<DevBuf> {
        let mut out = self.alloc(n)?;
        let nn = n as u64;
        let mut b = self.stream.launch_builder(&self.k.fill);
        b.arg(&x).arg(&mut out).arg(&nn);
        unsafe { b.launch(self.cfg(n)) }.map_err(derr("vec_fill"))?;
        Ok(DevBuf(out))
    }

    pub fn one_hot(&self, n: usize, i: usize, x: f64) -> R<DevBuf> {
        let mut out = self.alloc(n)?;
        let (nn, at) = (n as u64, i as u64);
        let mut b = self.stream.launch_builder(&self.k.one_hot);
        b.arg(&at).arg(&x).arg(&mut out).arg(&nn);
        unsafe { b.launch(self.cfg(n)) }.map_err(derr("vec_one_hot"))?;
        Ok(DevBuf(out))
    }

    pub fn unary(&self, op: Un, a: &DevBuf, n: usize) -> R<DevBuf> {
        let (code, p, q): (i32, f64, f64) = match op {
            Un::Affine(p, q) => (0, p, q),
            Un::Exp => (1, 0.0, 0.0),
            Un::Log => (2, 0.0, 0.0),
            Un::Sin => (3, 0.0, 0.0),
            Un::Cos => (4, 0.0, 0.0),
            Un::Sqrt => (5, 0.0, 0.0),
            Un::Tanh => (6, 0.0, 0.0),
            Un::Max0 => (7, 0.0, 0.0),
            Un::Step => (8, 0.0, 0.0),
        };
        let mut out = self.alloc(n)?;
        let nn = n as u64;
        let mut b = self.stream.launch_builder(&self.k.unary);
        b.arg(&code).arg(&p).arg(&q).arg(&a.0).arg(&mut out).arg(&nn);
        unsafe { b.launch(self.cfg(n)) }.map_err(derr("vec_unary"))?;
        Ok(DevBuf(out))
    }

    pub fn binary(&self, op: Bin, a: &DevBuf, x: &DevBuf, n: usize) -> R<DevBuf> {
        let code: i32 = match op {
            Bin::Add => 0,
            Bin::Sub => 1,
            Bin::Mul => 2,
            Bin::Div => 3,
        };
        let mut out = self.alloc(n)?;
        let nn = n as u64;
        let mut b = self.stream.launch_builder(&self.k.binary);
        b.arg(&code).arg(&a.0).arg(&x.0).arg(&mut out).arg(&nn);
        unsafe { b.launch(self.cfg(n)) }.map_err(derr("vec_binary"))?;
        Ok(DevBuf(out))
    }

    /// Sum (`b` None) or dot product, in two passes, read back as one number.
    fn reduce(&self, a: &DevBuf, b: Option<&DevBuf>, n: usize) -> R<f64> {
        let cfg = self.cfg(n);
        let blocks = cfg.grid_dim.0 as usize;
        let mut partial = self.alloc(blocks)?;
        let nn = n as u64;
        let null = 0u64;
        let mut l = self.stream.launch_builder(&self.k.reduce);
        l.arg(&a.0);
        match b {
            Some(b) => l.arg(&b.0),
            None => l.arg(&null),
        };
        l.arg(&mut partial).arg(&nn);
        unsafe { l.launch(cfg) }.map_err(derr("vec_reduce"))?;
        let mut total = self.alloc(1)?;
        let nb = blocks as u64;
        let mut l = self.stream.launch_builder(&self.k.reduce);
        l.arg(&partial).arg(&null).arg(&mut total).arg(&nb);
        unsafe { l.launch(self.one_block()) }.map_err(derr("vec_reduce"))?;
        super::count_scalar();
        Ok(read_one(&DevBuf(total), 0))
    }

    pub fn sum(&self, a: &DevBuf, n: usize) -> R<f64> {
        self.reduce(a, None, n)
    }

    pub fn dot(&self, a: &DevBuf, b: &DevBuf, n: usize) -> R<f64> {
        self.reduce(a, Some(b), n)
    }

    pub fn max(&self, a: &DevBuf, n: usize) -> R<(f64, usize)> {
        let cfg = self.cfg(n);
        let blocks = cfg.grid_dim.0 as usize;
        let mut pval = self.alloc(blocks)?;
        // (fully written by the first pass)
        let mut pidx = self.alloc_as::<u64>(blocks)?;
        let (nn, null) = (n as u64, 0u64);
        let mut l = self.stream.launch_builder(&self.k.argmax);
        l.arg(&a.0).arg(&null).arg(&mut pval).arg(&mut pidx).arg(&nn);
        unsafe { l.launch(cfg) }.map_err(derr("vec_argmax"))?;
        let mut val = self.alloc(1)?;
        // (written by the second pass)
        let mut idx = self.alloc_as::<u64>(1)?;
        let nb = blocks as u64;
        let mut l = self.stream.launch_builder(&self.k.argmax);
        l.arg(&pval).arg(&pidx).arg(&mut val).arg(&mut idx).arg(&nb);
        unsafe { l.launch(self.one_block()) }.map_err(derr("vec_argmax"))?;
        let mut i = [0u64];
        self.stream.memcpy_dtoh(&idx, &mut i[..]).map_err(derr("copy back"))?;
        super::count_scalar();
        let v = read_one(&DevBuf(val), 0);
        Ok((v, i[0] as usize))
    }

    pub fn scan(&self, a: &DevBuf, n: usize, reverse: bool) -> R<DevBuf> {
        let mut out = self.alloc(n)?;
        let chunks = n.div_ceil(SCAN_CHUNK);
        let mut sums = self.alloc(chunks)?;
        let (nn, rev) = (n as u64, reverse as i32);
        let blocks = chunks.clamp(1, self.max_blocks as usize) as u32;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let mut l = self.stream.launch_builder(&self.k.scan_chunks);
        l.arg(&a.0).arg(&mut out).arg(&mut sums).arg(&nn).arg(&rev);
        unsafe { l.launch(cfg) }.map_err(derr("vec_scan_chunks"))?;
        if chunks > 1 {
            let m = chunks as u64;
            let mut l = self.stream.launch_builder(&self.k.scan_sums);
            l.arg(&mut sums).arg(&m);
            unsafe { l.launch(self.one_block()) }.map_err(derr("vec_scan_sums"))?;
            let mut l = self.stream.launch_builder(&self.k.scan_add);
            l.arg(&mut out).arg(&sums).arg(&nn).arg(&rev);
            unsafe { l.launch(self.cfg(n)) }.map_err(derr("vec_scan_add"))?;
        }
        Ok(DevBuf(out))
    }

    pub fn mat_vec(&self, a: &DevBuf, x: &DevBuf, r: usize, c: usize) -> R<DevBuf> {
        let mut out = self.alloc(r)?;
        let (rr, cc) = (r as u64, c as u64);
        let mut l = self.stream.launch_builder(&self.k.mat_vec);
        l.arg(&a.0).arg(&x.0).arg(&mut out).arg(&rr).arg(&cc);
        // One warp per row.
        unsafe { l.launch(self.cfg(r * 32)) }.map_err(derr("vec_mat_vec"))?;
        Ok(DevBuf(out))
    }

    pub fn vec_mat(&self, x: &DevBuf, a: &DevBuf, r: usize, c: usize) -> R<DevBuf> {
        let mut out = self.alloc(c)?;
        let (rr, cc) = (r as u64, c as u64);
        let mut l = self.stream.launch_builder(&self.k.vec_mat);
        l.arg(&x.0).arg(&a.0).arg(&mut out).arg(&rr).arg(&cc);
        unsafe { l.launch(self.cfg(c)) }.map_err(derr("vec_vec_mat"))?;
        Ok(DevBuf(out))
    }

    pub fn mat_mat(&self, a: &DevBuf, b: &DevBuf, r: usize, k: usize, c: usize) -> R<DevBuf> {
        let mut out = self.alloc(r * c)?;
        let (gx, gy) = (c.div_ceil(16), r.div_ceil(16));
        if gy > 65535 || gx > i32::MAX as usize {
            return Err(format!("a {}x{} result is too large for one kernel launch", r, c));
        }
        let cfg = LaunchConfig {
            grid_dim: (gx.max(1) as u32, gy.max(1) as u32, 1),
            block_dim: (16, 16, 1),
            shared_mem_bytes: 0,
        };
        let (rr, kk, cc) = (r as u64, k as u64, c as u64);
        let mut l = self.stream.launch_builder(&self.k.mat_mat);
        l.arg(&a.0).arg(&b.0).arg(&mut out).arg(&rr).arg(&kk).arg(&cc);
        unsafe { l.launch(cfg) }.map_err(derr("vec_mat_mat"))?;
        Ok(DevBuf(out))
    }

    pub fn transpose(&self, a: &DevBuf, r: usize, c: usize) -> R<DevBuf> {
        let mut out = self.alloc(r * c)?;
        let (rr, cc) = (r as u64, c as u64);
        let mut l = self.stream.launch_builder(&self.k.transpose);
        l.arg(&a.0).arg(&mut out).arg(&rr).arg(&cc);
        unsafe { l.launch(self.cfg(r * c)) }.map_err(derr("vec_transpose"))?;
        Ok(DevBuf(out))
    }

    pub fn outer(&self, u: &DevBuf, v: &DevBuf, r: usize, c: usize) -> R<DevBuf> {
        let mut out = self.alloc(r * c)?;
        let (rr, cc) = (r as u64, c as u64);
        let mut l = self.stream.launch_builder(&self.k.outer);
        l.arg(&u.0).arg(&v.0).arg(&mut out).arg(&rr).arg(&cc);
        unsafe { l.launch(self.cfg(r * c)) }.map_err(derr("vec_outer"))?;
        Ok(DevBuf(out))
    }
}
