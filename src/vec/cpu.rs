//! The CPU backend: plain loops over contiguous `f64` slices, written so that the
//! compiler vectorises them (one monomorphised loop per operation; reductions keep
//! several independent accumulators). Long inputs are split over threads in fixed
//! chunks, so results do not depend on the number of threads.

use super::ops::{Bin, Un};

/// Elementwise work on at least this many numbers is split over threads.
const PAR_MIN: usize = 1 << 18;
/// Chunk of a split loop (a multiple of the reductions' accumulator width).
const CHUNK: usize = 1 << 16;

fn threads() -> usize {
    thread_local! {
        static N: usize = std::env::var("VLAD_THREADS").ok().and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).clamp(1, 64);
    }
    N.with(|n| *n)
}

/// Runs `f(start, piece)` over `out` cut into one piece per thread (piece boundaries
/// are multiples of `unit`), or over all of `out` at once when `serial`.
fn par_split(out: &mut [f64], unit: usize, serial: bool, f: impl Fn(usize, &mut [f64]) + Sync) {
    let n = out.len();
    let t = threads();
    if serial || t == 1 || n <= unit {
        f(0, out);
        return;
    }
    let per = n.div_ceil(t).div_ceil(unit) * unit;
    std::thread::scope(|s| {
        let mut rest = out;
        let mut start = 0;
        let f = &f;
        while !rest.is_empty() {
            let k = per.min(rest.len());
            let (head, tail) = rest.split_at_mut(k);
            rest = tail;
            let st = start;
            start += k;
            if rest.is_empty() {
                f(st, head);
            } else {
                s.spawn(move || f(st, head));
            }
        }
    });
}

/// Elementwise: split long outputs over threads.
fn par_out(out: &mut [f64], f: impl Fn(usize, &mut [f64]) + Sync) {
    let serial = out.len() < PAR_MIN;
    par_split(out, CHUNK, serial, f)
}

/// Sums `f(chunk)` over fixed chunks of `0..n`, in parallel when long; the chunk
/// results are added in order, so the answer does not depend on the thread count.
fn par_reduce(n: usize, f: impl Fn(std::ops::Range<usize>) -> f64 + Sync) -> f64 {
    // (one thread too adds the same chunks: `VLAD_THREADS=1` gave other last bits)
    if n < PAR_MIN {
        return f(0..n);
    }
    let chunks = n.div_ceil(CHUNK);
    let mut parts = vec![0.0; chunks];
    par_split(&mut parts, 1, false, |start, out| {
        for (k, o) in out.iter_mut().enumerate() {
            let c = start + k;
            *o = f(c * CHUNK..((c + 1) * CHUNK).min(n));
        }
    });
    parts.iter().sum()
}

#[inline(always)]
fn map1(a: &[f64], out: &mut [f64], f: impl Fn(f64) -> f64 + Sync + Copy) {
    par_out(out, |s, o| {
        let a = &a[s..s + o.len()];
        for (y, x) in o.iter_mut().zip(a) {
            *y = f(*x);
        }
    });
}

#[inline(always)]
fn map2(a: &[f64], b: &[f64], out: &mut [f64], f: impl Fn(f64, f64) -> f64 + Sync + Copy) {
    par_out(out, |s, o| {
        let (a, b) = (&a[s..s + o.len()], &b[s..s + o.len()]);
        for ((y, x), z) in o.iter_mut().zip(a).zip(b) {
            *y = f(*x, *z);
        }
    });
}

pub fn unary(op: Un, a: &[f64], out: &mut [f64]) {
    match op {
        Un::Affine(p, q) => {
            if q == 0.0 {
                map1(a, out, move |x| p * x)
            } else {
                map1(a, out, move |x| p * x + q)
            }
        }
        Un::Exp => map1(a, out, f64::exp),
        Un::Log => map1(a, out, f64::ln),
        Un::Sin => map1(a, out, f64::sin),
        Un::Cos => map1(a, out, f64::cos),
        Un::Sqrt => map1(a, out, f64::sqrt),
        Un::Tanh => map1(a, out, f64::tanh),
        Un::Max0 => map1(a, out, |x| if x > 0.0 { x } else { 0.0 }),
        Un::Step => map1(a, out, |x| if x > 0.0 { 1.0 } else { 0.0 }),
    }
}

pub fn binary(op: Bin, a: &[f64], b: &[f64], out: &mut [f64]) {
    match op {
        Bin::Add => map2(a, b, out, |x, y| x + y),
        Bin::Sub => map2(a, b, out, |x, y| x - y),
        Bin::Mul => map2(a, b, out, |x, y| x * y),
        Bin::Div => map2(a, b, out, |x, y| x / y),
    }
}

const W: usize = 8;

/// Sum with eight independent accumulators (vectorises; pairs up the partial sums).
#[inline]
pub fn sum_seq(a: &[f64]) -> f64 {
    let mut acc = [0.0f64; W];
    let chunks = a.chunks_exact(W);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..W {
            acc[k] += c[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for x in rest {
        s += x;
    }
    s
}

#[inline]
pub fn dot_seq(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; W];
    let ca = a.chunks_exact(W);
    let cb = b.chunks_exact(W);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..W {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

pub fn sum(a: &[f64]) -> f64 {
    par_reduce(a.len(), |r| sum_seq(&a[r]))
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    par_reduce(a.len(), |r| dot_seq(&a[r.clone()], &b[r]))
}

/// The largest element and its first index (NaN counts as largest).
pub fn max(a: &[f64]) -> (f64, usize) {
    let mut best = a[0];
    let mut at = 0;
    if best.is_nan() {
        return (best, 0);
    }
    for (i, &x) in a.iter().enumerate().skip(1) {
        if x > best {
            best = x;
            at = i;
        } else if x.is_nan() {
            return (x, i);
        }
    }
    (best, at)
}

pub fn scan(a: &[f64], out: &mut [f64], reverse: bool) {
    let mut s = 0.0;
    if reverse {
        for (y, x) in out.iter_mut().zip(a).rev() {
            s += x;
            *y = s;
        }
    } else {
        for (y, x) in out.iter_mut().zip(a) {
            s += x;
            *y = s;
        }
    }
}

/// `out = A x`, A r×c row-major.
pub fn mat_vec(a: &[f64], x: &[f64], r: usize, c: usize, out: &mut [f64]) {
    par_split(out, 1, r * c < PAR_MIN, |s, o| {
        for (k, y) in o.iter_mut().enumerate() {
            let i = s + k;
            *y = dot_seq(&a[i * c..(i + 1) * c], x);
        }
    });
}

/// `out = xᵀ A`, A r×c row-major.
pub fn vec_mat(x: &[f64], a: &[f64], r: usize, c: usize, out: &mut [f64]) {
    out.fill(0.0);
    for i in 0..r {
        let xi = x[i];
        let row = &a[i * c..(i + 1) * c];
        for (y, aij) in out.iter_mut().zip(row) {
            *y += xi * aij;
        }
    }
}

/// `out = A B`, A r×k, B k×c, row-major.
pub fn mat_mat(a: &[f64], b: &[f64], r: usize, k: usize, c: usize, out: &mut [f64]) {
    let row = |i: usize, o: &mut [f64]| {
        o.fill(0.0);
        for l in 0..k {
            let ail = a[i * k + l];
            let brow = &b[l * c..(l + 1) * c];
            for (y, blj) in o.iter_mut().zip(brow) {
                *y += ail * blj;
            }
        }
    };
    if c == 0 {
        return;
    }
    // Split by whole rows.
    par_split(out, c, r * k * c < PAR_MIN, |s, o| {
        for (q, orow) in o.chunks_mut(c).enumerate() {
            row(s / c + q, orow);
        }
    });
}

/// `out = Aᵀ`, A r×c row-major (out c×r).
pub fn transpose(a: &[f64], r: usize, c: usize, out: &mut [f64]) {
    const B: usize = 32;
    for i0 in (0..r).step_by(B) {
        for j0 in (0..c).step_by(B) {
            for i in i0..(i0 + B).min(r) {
                for j in j0..(j0 + B).min(c) {
                    out[j * r + i] = a[i * c + j];
                }
            }
        }
    }
}

/// `out = u vᵀ`.
pub fn outer(u: &[f64], v: &[f64], out: &mut [f64]) {
    let c = v.len();
    if c == 0 {
        return;
    }
    for (ui, orow) in u.iter().zip(out.chunks_mut(c)) {
        for (y, vj) in orow.iter_mut().zip(v) {
            *y = ui * vj;
        }
    }
}
