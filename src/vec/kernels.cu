// CUDA kernels of the vector backend (src/vec/cuda.rs). Compiled ahead of time to
// PTX (src/vec/kernels.ptx, embedded in the binary and JIT-compiled by the driver for
// whatever GPU it finds) by tools/gen-ptx.sh: clang in CUDA device-only mode, with
// NVIDIA's libdevice linked in for exp/log/sin/cos/tanh. No CUDA headers are used.
//
// Every kernel takes 64-bit lengths and walks its range with a grid-stride loop, so
// any grid size is correct; reductions write one partial result per block and are
// finished by a second one-block launch, which keeps results deterministic.

typedef unsigned long long u64;

// What the CUDA headers would define.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define GLOBAL extern "C" __global__
#define DEVICE static __device__ __attribute__((always_inline)) inline
#define __syncthreads() __nvvm_bar_sync(0)

extern "C" __device__ double __nv_exp(double);
extern "C" __device__ double __nv_log(double);
extern "C" __device__ double __nv_sin(double);
extern "C" __device__ double __nv_cos(double);
extern "C" __device__ double __nv_sqrt(double);
extern "C" __device__ double __nv_tanh(double);
extern "C" __device__ int __nv_isnand(double);

#define THREAD_X __nvvm_read_ptx_sreg_tid_x()
#define BLOCK_X __nvvm_read_ptx_sreg_ntid_x()
#define BLOCK_ID __nvvm_read_ptx_sreg_ctaid_x()
#define GRID_X __nvvm_read_ptx_sreg_nctaid_x()

#define FOR_EACH(i, n) \
    for (u64 i = (u64)BLOCK_ID * BLOCK_X + THREAD_X; i < (n); i += (u64)GRID_X * BLOCK_X)

// Unary operations, numbered as in cuda.rs: 0 affine (p x + q), 1 exp, 2 log, 3 sin,
// 4 cos, 5 sqrt, 6 tanh, 7 max(x, 0), 8 step (x > 0).
DEVICE double unary_op(int op, double p, double q, double x) {
    switch (op) {
    case 0: return p * x + q;
    case 1: return __nv_exp(x);
    case 2: return __nv_log(x);
    case 3: return __nv_sin(x);
    case 4: return __nv_cos(x);
    case 5: return __nv_sqrt(x);
    case 6: return __nv_tanh(x);
    case 7: return x > 0.0 ? x : 0.0;
    default: return x > 0.0 ? 1.0 : 0.0;
    }
}

GLOBAL void vec_unary(int op, double p, double q, const double* __restrict__ a, double* __restrict__ out, u64 n) {
    switch (op) {  // one loop per operation, so each loop body is straight-line code
    case 0: FOR_EACH(i, n) out[i] = p * a[i] + q; break;
    case 1: FOR_EACH(i, n) out[i] = __nv_exp(a[i]); break;
    case 2: FOR_EACH(i, n) out[i] = __nv_log(a[i]); break;
    case 3: FOR_EACH(i, n) out[i] = __nv_sin(a[i]); break;
    case 4: FOR_EACH(i, n) out[i] = __nv_cos(a[i]); break;
    case 5: FOR_EACH(i, n) out[i] = __nv_sqrt(a[i]); break;
    case 6: FOR_EACH(i, n) out[i] = __nv_tanh(a[i]); break;
    default: FOR_EACH(i, n) out[i] = unary_op(op, p, q, a[i]); break;
    }
}

// Binary operations: 0 +, 1 -, 2 *, 3 /.
GLOBAL void vec_binary(int op, const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ out, u64 n) {
    switch (op) {
    case 0: FOR_EACH(i, n) out[i] = a[i] + b[i]; break;
    case 1: FOR_EACH(i, n) out[i] = a[i] - b[i]; break;
    case 2: FOR_EACH(i, n) out[i] = a[i] * b[i]; break;
    default: FOR_EACH(i, n) out[i] = a[i] / b[i]; break;
    }
}

GLOBAL void vec_fill(double x, double* __restrict__ out, u64 n) {
    FOR_EACH(i, n) out[i] = x;
}

GLOBAL void vec_one_hot(u64 at, double x, double* __restrict__ out, u64 n) {
    FOR_EACH(i, n) out[i] = i == at ? x : 0.0;
}

// Block-wide sum of one value per thread (blockDim.x a power of two, at most 1024).
DEVICE double block_sum(double v, double* sh) {
    unsigned t = THREAD_X;
    sh[t] = v;
    __syncthreads();
    for (unsigned s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// Partial sums (b == 0) or dot products, one per block, into partial[blockIdx.x].
GLOBAL void vec_reduce(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ partial, u64 n) {
    __shared__ double sh[1024];
    double acc = 0.0;
    if (b) {
        FOR_EACH(i, n) acc += a[i] * b[i];
    } else {
        FOR_EACH(i, n) acc += a[i];
    }
    double s = block_sum(acc, sh);
    if (THREAD_X == 0) partial[BLOCK_ID] = s;
}

// (value, index) pairs: the larger wins; NaN is largest; ties go to the smaller index.
DEVICE bool better(double v1, u64 i1, double v2, u64 i2) {
    bool n1 = __nv_isnand(v1), n2 = __nv_isnand(v2);
    if (n1 || n2) return n1 && (!n2 || i1 < i2);
    return v1 > v2 || (v1 == v2 && i1 < i2);
}

// Per-block argmax of a[0..n) (idx == 0) or of the pairs (a, idx)[0..n) (the second pass).
GLOBAL void vec_argmax(const double* __restrict__ a, const u64* __restrict__ idx, double* __restrict__ pval, u64* __restrict__ pidx, u64 n) {
    __shared__ double sv[1024];
    __shared__ u64 si[1024];
    double bv = 0.0;
    u64 bi = ~0ull;
    FOR_EACH(i, n) {
        double v = a[i];
        u64 k = idx ? idx[i] : i;
        if (bi == ~0ull || better(v, k, bv, bi)) { bv = v; bi = k; }
    }
    unsigned t = THREAD_X;
    sv[t] = bv;
    si[t] = bi;
    __syncthreads();
    for (unsigned s = BLOCK_X / 2; s > 0; s >>= 1) {
        if (t < s && si[t + s] != ~0ull && (si[t] == ~0ull || better(sv[t + s], si[t + s], sv[t], si[t]))) {
            sv[t] = sv[t + s];
            si[t] = si[t + s];
        }
        __syncthreads();
    }
    if (t == 0) { pval[BLOCK_ID] = sv[0]; pidx[BLOCK_ID] = si[0]; }
}

// Inclusive scan in three passes over chunks of SCAN_CHUNK elements (one block of
// SCAN_THREADS threads per chunk, SCAN_ITEMS consecutive items per thread). With
// `rev`, element k is a[n - 1 - k] (suffix sums), read and written in place of a[k].
#define SCAN_THREADS 256
#define SCAN_ITEMS 8
#define SCAN_CHUNK (SCAN_THREADS * SCAN_ITEMS)

// Inclusive scan of one value per thread within the block (Hillis-Steele).
DEVICE double block_scan(double v, double* sh) {
    unsigned t = THREAD_X;
    sh[t] = v;
    __syncthreads();
    for (unsigned s = 1; s < BLOCK_X; s <<= 1) {
        double add = t >= s ? sh[t - s] : 0.0;
        __syncthreads();
        sh[t] += add;
        __syncthreads();
    }
    double r = sh[t];
    __syncthreads();
    return r;
}

// Pass 1: scan each chunk; write its total to sums[chunk].
GLOBAL void vec_scan_chunks(const double* __restrict__ a, double* __restrict__ out, double* __restrict__ sums, u64 n, int rev) {
    __shared__ double sh[SCAN_THREADS];
    for (u64 c = BLOCK_ID; c * SCAN_CHUNK < n; c += GRID_X) {
        u64 base = c * SCAN_CHUNK + (u64)THREAD_X * SCAN_ITEMS;
        double v[SCAN_ITEMS];
        double s = 0.0;
        for (int k = 0; k < SCAN_ITEMS; k++) {
            u64 i = base + k;
            double x = i < n ? a[rev ? n - 1 - i : i] : 0.0;
            s += x;
            v[k] = s;
        }
        double incl = block_scan(s, sh);
        double before = incl - s;
        for (int k = 0; k < SCAN_ITEMS; k++) {
            u64 i = base + k;
            if (i < n) out[rev ? n - 1 - i : i] = before + v[k];
        }
        if (THREAD_X == BLOCK_X - 1) sums[c] = incl;
        __syncthreads();
    }
}

// Pass 2 (one block): inclusive scan of the m chunk totals, in place.
GLOBAL void vec_scan_sums(double* __restrict__ sums, u64 m) {
    __shared__ double sh[SCAN_THREADS];
    __shared__ double last[1];
    double carry = 0.0;
    for (u64 base = 0; base < m; base += BLOCK_X) {
        u64 i = base + THREAD_X;
        double x = i < m ? sums[i] : 0.0;
        double incl = block_scan(x, sh);
        if (i < m) sums[i] = carry + incl;
        // The tile's total is the last thread's inclusive value.
        if (THREAD_X == BLOCK_X - 1) last[0] = incl;
        __syncthreads();
        carry += last[0];
        __syncthreads();
    }
}

// Pass 3: add the totals of the chunks before each element's chunk.
GLOBAL void vec_scan_add(double* __restrict__ out, const double* __restrict__ sums, u64 n, int rev) {
    FOR_EACH(i, n) {
        u64 c = i / SCAN_CHUNK;
        if (c > 0) out[rev ? n - 1 - i : i] += sums[c - 1];
    }
}

// A double from the lane `off` places up in the warp.
DEVICE double shfl_down(double v, int off) {
    long long b = __nvvm_bitcast_d2ll(v);
    int lo = __nvvm_shfl_sync_down_i32(0xffffffffu, (int)b, off, 0x1f);
    int hi = __nvvm_shfl_sync_down_i32(0xffffffffu, (int)(b >> 32), off, 0x1f);
    return __nvvm_bitcast_ll2d(((long long)hi << 32) | (unsigned)lo);
}

// y = A x, A r x c row-major: one warp per row.
GLOBAL void vec_mat_vec(const double* __restrict__ A, const double* __restrict__ x, double* __restrict__ y, u64 r, u64 c) {
    u64 warp = ((u64)BLOCK_ID * BLOCK_X + THREAD_X) / 32;
    u64 warps = ((u64)GRID_X * BLOCK_X) / 32;
    unsigned lane = THREAD_X % 32;
    for (u64 i = warp; i < r; i += warps) {
        const double* row = A + i * c;
        double s = 0.0;
        for (u64 j = lane; j < c; j += 32) s += row[j] * x[j];
        for (int off = 16; off > 0; off >>= 1) s += shfl_down(s, off);
        if (lane == 0) y[i] = s;
    }
}

// y = x^T A, A r x c row-major: one thread per column.
GLOBAL void vec_vec_mat(const double* __restrict__ x, const double* __restrict__ A, double* __restrict__ y, u64 r, u64 c) {
    FOR_EACH(j, c) {
        double s = 0.0;
        for (u64 i = 0; i < r; i++) s += x[i] * A[i * c + j];
        y[j] = s;
    }
}

// C = A B, A r x k, B k x c: 16 x 16 tiles through shared memory; grid (ceil(c/16), ceil(r/16)).
#define TILE 16
GLOBAL void vec_mat_mat(const double* __restrict__ A, const double* __restrict__ B, double* __restrict__ C, u64 r, u64 k, u64 c) {
    __shared__ double ta[TILE][TILE];
    __shared__ double tb[TILE][TILE];
    unsigned tx = THREAD_X, ty = __nvvm_read_ptx_sreg_tid_y();
    u64 row = (u64)__nvvm_read_ptx_sreg_ctaid_y() * TILE + ty;
    u64 col = (u64)BLOCK_ID * TILE + tx;
    double s = 0.0;
    for (u64 t = 0; t < k; t += TILE) {
        ta[ty][tx] = row < r && t + tx < k ? A[row * k + t + tx] : 0.0;
        tb[ty][tx] = t + ty < k && col < c ? B[(t + ty) * c + col] : 0.0;
        __syncthreads();
        for (int l = 0; l < TILE; l++) s += ta[ty][l] * tb[l][tx];
        __syncthreads();
    }
    if (row < r && col < c) C[row * c + col] = s;
}

// out = A^T (c x r), A r x c.
GLOBAL void vec_transpose(const double* __restrict__ A, double* __restrict__ out, u64 r, u64 c) {
    FOR_EACH(i, r * c) {
        u64 j = i / r, q = i % r;  // out[j][q] = A[q][j]
        out[i] = A[q * c + j];
    }
}

// out = u v^T (r x c).
GLOBAL void vec_outer(const double* __restrict__ u, const double* __restrict__ v, double* __restrict__ out, u64 r, u64 c) {
    FOR_EACH(i, r * c) out[i] = u[i / c] * v[i % c];
}
