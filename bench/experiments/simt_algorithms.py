"""Which SIMT algorithms can reach 0.90 of Triton (issue 10), measured as CUDA C++ first:
softmax, rms_norm and layer_norm on a (65536 x 1024) f32 matrix and the transpose of a
(4096 x 16384) f32 matrix, each in several forms, next to the bench's Triton peers.

Row forms (all keep a row in registers, x read once):
- block<T, PER>: a block of T threads per row, PER strided scalar columns per thread, block
  reductions (shared buffer, barriers); `fused` reduces softmax's (max, sum) and layer_norm's
  (sum, sum of squares) as one pair instead of one after the other;
- warp<W, PER>: blocks of W warps, a warp per row, PER strided scalar columns per lane, shuffle
  reductions only (no shared memory, no barrier);
- *_v4: the same with float4 loads and stores (a thread's columns 4j..4j+3).
Transpose forms: a T x T tile moved by a (32 x R) block, each thread T*T/(32*R) elements.

`python3 bench/experiments/simt_algorithms.py` on the GPU machine; GB/s counts one read and one
write."""

from __future__ import annotations

import numpy as np
import torch

from fearless_bench import kernels_triton as KT
from fearless_bench.kernels_cuda import i64, ptr
from fearless_bench.timing import FULL, DeviceTimer

ROWS, COLS = 65536, 1024
TR, TC = 4096, 16384
EPS = 1e-5

SOURCE = r"""
#define FULL 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)
struct P { float a, b; };

__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}
__device__ __forceinline__ float wmax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}
// online softmax pair (max, sum of exp(x - max))
__device__ __forceinline__ P msum(P x, P y) {
    float m = fmaxf(x.a, y.a);
    float s = (x.a == NEG_INF ? 0.f : x.b * __expf(x.a - m)) + (y.a == NEG_INF ? 0.f : y.b * __expf(y.a - m));
    return {m, s};
}
__device__ __forceinline__ P wmsum(P v) {
    for (int o = 16; o > 0; o >>= 1)
        v = msum(v, {__shfl_xor_sync(FULL, v.a, o), __shfl_xor_sync(FULL, v.b, o)});
    return v;
}
__device__ __forceinline__ P wsum2(P v) {
    for (int o = 16; o > 0; o >>= 1) {
        v.a += __shfl_xor_sync(FULL, v.a, o);
        v.b += __shfl_xor_sync(FULL, v.b, o);
    }
    return v;
}

// Block reductions: warps reduce by shuffles, lane 0 writes, one barrier, every warp
// reduces the warps' values (each thread reads them all), a barrier before reuse.
struct BlockRed {
    float* buf;
    __device__ float sum(float v) {
        v = wsum(v);
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if ((threadIdx.x & 31) == 0) buf[w] = v;
        __syncthreads();
        float r = (threadIdx.x & 31) < nw ? buf[threadIdx.x & 31] : 0.f;
        r = wsum(r);
        __syncthreads();
        return r;
    }
    __device__ float max(float v) {
        v = wmax(v);
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if ((threadIdx.x & 31) == 0) buf[w] = v;
        __syncthreads();
        float r = (threadIdx.x & 31) < nw ? buf[threadIdx.x & 31] : NEG_INF;
        r = wmax(r);
        __syncthreads();
        return r;
    }
    __device__ P msum(P v) {
        v = wmsum(v);
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if ((threadIdx.x & 31) == 0) { buf[w] = v.a; buf[32 + w] = v.b; }
        __syncthreads();
        int l = threadIdx.x & 31;
        P r = l < nw ? P{buf[l], buf[32 + l]} : P{NEG_INF, 0.f};
        r = wmsum(r);
        __syncthreads();
        return r;
    }
    __device__ P sum2(P v) {
        v = wsum2(v);
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if ((threadIdx.x & 31) == 0) { buf[w] = v.a; buf[32 + w] = v.b; }
        __syncthreads();
        int l = threadIdx.x & 31;
        P r = l < nw ? P{buf[l], buf[32 + l]} : P{0.f, 0.f};
        r = wsum2(r);
        __syncthreads();
        return r;
    }
};
struct WarpRed {
    __device__ float sum(float v) { return wsum(v); }
    __device__ float max(float v) { return wmax(v); }
    __device__ P msum(P v) { return wmsum(v); }
    __device__ P sum2(P v) { return wsum2(v); }
};

// OP: 0 softmax, 1 rms_norm, 2 layer_norm. v[N] the thread's values, col[N] their columns,
// ok[N] whether they are in the row.
template <int OP, bool FUSED, int N, class R>
__device__ __forceinline__ void row_math(float* v, const long long* col, const bool* ok,
                                         const float* __restrict__ w, const float* __restrict__ b,
                                         long long cols, float eps, R red) {
    if (OP == 0) {
        if (FUSED) {
            P p{NEG_INF, 0.f};
#pragma unroll
            for (int k = 0; k < N; k++) if (ok[k]) p = msum(p, {v[k], 1.f});
            p = red.msum(p);
#pragma unroll
            for (int k = 0; k < N; k++) v[k] = __expf(v[k] - p.a) / p.b;
        } else {
            float m = NEG_INF, s = 0.f;
#pragma unroll
            for (int k = 0; k < N; k++) m = fmaxf(m, ok[k] ? v[k] : NEG_INF);
            m = red.max(m);
#pragma unroll
            for (int k = 0; k < N; k++) { v[k] = ok[k] ? __expf(v[k] - m) : 0.f; s += v[k]; }
            s = red.sum(s);
            float inv = 1.f / s;
#pragma unroll
            for (int k = 0; k < N; k++) v[k] *= inv;
        }
    } else if (OP == 1) {
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) q += ok[k] ? v[k] * v[k] : 0.f;
        float rstd = rsqrtf(red.sum(q) / (float)cols + eps);
#pragma unroll
        for (int k = 0; k < N; k++) v[k] = v[k] * rstd * (ok[k] ? w[col[k]] : 0.f);
    } else {
        float mean, rstd;
        if (FUSED) {
            P p{0.f, 0.f};
#pragma unroll
            for (int k = 0; k < N; k++) if (ok[k]) { p.a += v[k]; p.b += v[k] * v[k]; }
            p = red.sum2(p);
            mean = p.a / (float)cols;
            rstd = rsqrtf(fmaxf(p.b / (float)cols - mean * mean, 0.f) + eps);
        } else {
            float s = 0.f, q = 0.f;
#pragma unroll
            for (int k = 0; k < N; k++) s += ok[k] ? v[k] : 0.f;
            mean = red.sum(s) / (float)cols;
#pragma unroll
            for (int k = 0; k < N; k++) { float d = ok[k] ? v[k] - mean : 0.f; q += d * d; }
            rstd = rsqrtf(red.sum(q) / (float)cols + eps);
        }
#pragma unroll
        for (int k = 0; k < N; k++)
            v[k] = ok[k] ? (v[k] - mean) * rstd * w[col[k]] + b[col[k]] : 0.f;
    }
}

// Scalar: thread `t` of `T` (per row) holds columns t + k*T.
template <int OP, bool FUSED, int PER, class R>
__device__ __forceinline__ void row_scalar(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ b, float* __restrict__ out, long long row, long long cols,
        float eps, int t, int T, R red) {
    const float* xr = x + row * cols;
    float* yr = out + row * cols;
    float v[PER]; long long col[PER]; bool ok[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        col[k] = t + (long long)k * T; ok[k] = col[k] < cols;
        v[k] = ok[k] ? xr[col[k]] : 0.f;
    }
    row_math<OP, FUSED, PER>(v, col, ok, w, b, cols, eps, red);
#pragma unroll
    for (int k = 0; k < PER; k++) if (ok[k]) yr[col[k]] = v[k];
}
// float4: thread t holds columns 4(t + k*T) .. +3 (cols a multiple of 4).
template <int OP, bool FUSED, int PER4, class R>
__device__ __forceinline__ void row_vec4(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ b, float* __restrict__ out, long long row, long long cols,
        float eps, int t, int T, R red) {
    const float4* xr = (const float4*)(x + row * cols);
    float4* yr = (float4*)(out + row * cols);
    float v[4 * PER4]; long long col[4 * PER4]; bool ok[4 * PER4];
#pragma unroll
    for (int k = 0; k < PER4; k++) {
        long long c4 = t + (long long)k * T;
        bool in = 4 * c4 < cols;
        float4 q = in ? xr[c4] : make_float4(0.f, 0.f, 0.f, 0.f);
        v[4 * k] = q.x; v[4 * k + 1] = q.y; v[4 * k + 2] = q.z; v[4 * k + 3] = q.w;
#pragma unroll
        for (int j = 0; j < 4; j++) { col[4 * k + j] = 4 * c4 + j; ok[4 * k + j] = in; }
    }
    row_math<OP, FUSED, 4 * PER4>(v, col, ok, w, b, cols, eps, red);
#pragma unroll
    for (int k = 0; k < PER4; k++) {
        long long c4 = t + (long long)k * T;
        if (4 * c4 < cols) yr[c4] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
    }
}

#define ARGS const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
             float* __restrict__ out, long long rows, long long cols, float eps
#define BLOCK_K(NAME, OP, FUSED, PER, FORM) \
extern "C" __global__ void NAME(ARGS) { \
    __shared__ float buf[64]; \
    FORM<OP, FUSED, PER>(x, w, b, out, blockIdx.x, cols, eps, threadIdx.x, blockDim.x, BlockRed{buf}); }
#define WARP_K(NAME, OP, PER, FORM) \
extern "C" __global__ void NAME(ARGS) { \
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); \
    if (row >= rows) return; \
    FORM<OP, false, PER>(x, w, b, out, row, cols, eps, threadIdx.x & 31, 32, WarpRed{}); }
#define FORMS(OPN, OP) \
    BLOCK_K(OPN##_block8, OP, false, 8, row_scalar) \
    BLOCK_K(OPN##_block8_fused, OP, true, 8, row_scalar) \
    BLOCK_K(OPN##_block4, OP, false, 4, row_scalar) \
    BLOCK_K(OPN##_block2_v4, OP, false, 2, row_vec4) \
    BLOCK_K(OPN##_block2_v4_fused, OP, true, 2, row_vec4) \
    BLOCK_K(OPN##_block1_v4_fused, OP, true, 1, row_vec4) \
    WARP_K(OPN##_warp32, OP, 32, row_scalar) \
    WARP_K(OPN##_warp8_v4, OP, 8, row_vec4)
FORMS(softmax, 0)
FORMS(rms, 1)
FORMS(ln, 2)

// Transpose: a T x T tile, blocks of 32 x R threads.
template <int T>
__device__ __forceinline__ void transpose_tile(const float* __restrict__ x, long long rows,
                                               long long cols, float* __restrict__ out) {
    __shared__ float s[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y, R = blockDim.y;
#pragma unroll
    for (int cx = 0; cx < T; cx += 32)
#pragma unroll 8
        for (int ry = 0; ry < T; ry += R) {
            long long r = (long long)blockIdx.x * T + ty + ry, c = (long long)blockIdx.y * T + tx + cx;
            if (r < rows && c < cols) s[ty + ry][tx + cx] = x[r * cols + c];
        }
    __syncthreads();
#pragma unroll
    for (int cx = 0; cx < T; cx += 32)
#pragma unroll 8
        for (int ry = 0; ry < T; ry += R) {
            long long orow = (long long)blockIdx.y * T + ty + ry, ocol = (long long)blockIdx.x * T + tx + cx;
            if (orow < cols && ocol < rows) out[orow * rows + ocol] = s[tx + cx][ty + ry];
        }
}
extern "C" __global__ void transpose32(const float* x, long long rows, long long cols, float* out) {
    transpose_tile<32>(x, rows, cols, out);
}
extern "C" __global__ void transpose64(const float* x, long long rows, long long cols, float* out) {
    transpose_tile<64>(x, rows, cols, out);
}
"""


def ms(fn) -> float:  # type: ignore[no-untyped-def]
    """Median device time of `fn` in ms (the suite's timer: CUDA events, L2 flushed)."""
    return DeviceTimer(torch, FULL).time(fn).median


def main() -> None:
    from cuda.core import (
        LEGACY_DEFAULT_STREAM,
        Device,
        LaunchConfig,
        Program,
        ProgramOptions,
        launch,
    )

    Device(0).set_current()
    prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch="sm_90", std="c++17"))
    mod = prog.compile("cubin")
    x = torch.randn(ROWS, COLS, device="cuda")
    w = torch.randn(COLS, device="cuda")
    b = torch.randn(COLS, device="cuda")
    out = torch.empty_like(x)
    gb = 2 * x.numel() * 4 / 1e9
    refs = {
        "softmax": torch.softmax(x, 1),
        "rms": x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * w,
        "ln": torch.nn.functional.layer_norm(x, (COLS,), w, b, EPS),
    }
    triton = {
        "softmax": KT.softmax_launch(x, out),
        "rms": KT.rms_norm_launch(x, w, EPS, out),
        "ln": KT.layer_norm_launch(x, w, b, EPS, out),
    }
    forms = {  # form: (threads per block, rows per block)
        "block8": (128, 1),
        "block8_fused": (128, 1),
        "block4": (256, 1),
        "block2_v4": (128, 1),
        "block2_v4_fused": (128, 1),
        "block1_v4_fused": (256, 1),
        "warp32": (128, 4),
        "warp8_v4": (128, 4),
    }
    args = [ptr(x), ptr(w), ptr(b), ptr(out), i64(ROWS), i64(COLS), np.float32(EPS)]
    for op, ref in refs.items():
        t_tr = ms(triton[op])
        err = (out - ref).abs().max().item()
        print(
            f"{op:8s} {'triton':18s} {t_tr:8.4f} ms {gb / (t_tr * 1e-3):7.1f} GB/s 1.00  err {err:.1e}"
        )
        for form, (threads, per_block) in forms.items():
            k = mod.get_kernel(f"{op}_{form}")
            cfg = LaunchConfig(grid=ROWS // per_block, block=threads)
            out.zero_()
            t = ms(lambda k=k, cfg=cfg: launch(LEGACY_DEFAULT_STREAM, cfg, k, *args))
            err = (out - ref).abs().max().item()
            print(
                f"{op:8s} {form:18s} {t:8.4f} ms {gb / (t * 1e-3):7.1f} GB/s {t_tr / t:.2f}  err {err:.1e}"
            )
    xt = torch.randn(TR, TC, device="cuda")
    yt = torch.empty(TC, TR, device="cuda")
    gbt = 2 * xt.numel() * 4 / 1e9
    t_tr = ms(KT.transpose_launch(xt, yt))
    print(f"transpose triton 64x64        {t_tr:8.4f} ms {gbt / (t_tr * 1e-3):7.1f} GB/s 1.00")
    import fearless as fl
    from fearless_bench.kernels_simt import TILE, make_transpose

    fl.set_target("cuda")
    for rows_per in (1, 2, 4, 8):
        k = make_transpose(rows_per)
        prep = k.prepare((TR // TILE, TC // TILE))
        yt.zero_()
        t = ms(lambda k=k, prep=prep: k(prep, xt, yt))
        err = (yt - xt.t()).abs().max().item()
        print(
            f"transpose fearless block 32x{rows_per:<3d} {t:8.4f} ms {gbt / (t * 1e-3):7.1f} GB/s "
            f"{t_tr / t:.2f} err {err:.1e}"
        )
    for tile, rows_per in ((32, 8), (32, 4), (32, 2), (32, 1), (64, 8), (64, 4), (64, 2)):
        k = mod.get_kernel(f"transpose{tile}")
        cfg = LaunchConfig(grid=(TR // tile, TC // tile), block=(32, rows_per))
        yt.zero_()
        t = ms(
            lambda k=k, cfg=cfg: launch(
                LEGACY_DEFAULT_STREAM, cfg, k, ptr(xt), i64(TR), i64(TC), ptr(yt)
            )
        )
        err = (yt - xt.t()).abs().max().item()
        print(
            f"transpose tile {tile} block 32x{rows_per:<3d} {t:8.4f} ms {gbt / (t * 1e-3):7.1f} GB/s "
            f"{t_tr / t:.2f} err {err:.1e}"
        )


if __name__ == "__main__":
    main()
