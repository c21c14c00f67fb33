"""CUDA C++ peers, compiled with NVRTC through cuda.core and launched with `cuda.core.launch`.

They are the SIMT track's parity reference: each kernel is the algorithm of its twin in
`kernels_simt.py`, written as a CUDA C++ programmer would (64-bit indices as fearless uses,
`__restrict__` where fearless proves non-aliasing, NVRTC's default flags: precise division
and square root, FMA contraction on). The block reductions follow fearless's lowering of
`simt.block.reduce` (a shfl.down tree per warp, a shared buffer, one barrier, the totals' tree
in every warp), the row kernels move float4 chunks as the SIMT ones do, the sum ends in
one `atomicAdd` per block, the transpose stages 32 x 33 shared tiles, the GEMM 64 x 64 f32
tiles of a and b. A gap between the two is a gap in fearless's codegen,
not in the algorithm. f16 and bf16 travel as their raw 16 bits, converted with `cvt` so that
no CUDA header is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Launch = Callable[[], None]

BLOCK = 256

SOURCE = r"""
#define TID ((long long)blockIdx.x * blockDim.x + threadIdx.x)
typedef unsigned short u16;

__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16 f2bf(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

extern "C" __global__ void vecadd(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, long long n) {
    long long i = TID;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x,
                                 const float* __restrict__ y, float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = alpha * x[i] + y[i];
}

// Block reductions as fearless lowers `simt.block.reduce`: a shfl.down tree per warp, lane 0
// stores its warp's total, barrier, warp 0 reduces the totals with the same tree and stores the
// result at slot 32, barrier, every thread loads it, barrier (the buffer is free again). Blocks
// here are 1-D, whole warps (the row kernels' blocks are 128, block_sum's 256).
#define FULL 0xffffffffu
struct SumOp {
    static __device__ __forceinline__ float id() { return -0.0f; }
    static __device__ __forceinline__ float op(float a, float b) { return a + b; }
};
struct MaxOp {
    static __device__ __forceinline__ float id() { return __int_as_float(0xff800000); }
    static __device__ __forceinline__ float op(float a, float b) { return fmaxf(a, b); }
};

template <class Op>
__device__ __forceinline__ float warp_tree(float v) {
    for (int off = 16; off > 0; off >>= 1) v = Op::op(v, __shfl_down_sync(FULL, v, off));
    return v;
}

template <class Op>
__device__ __forceinline__ float block_reduce(float v, float* buf /* __shared__ [64] */) {
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned n_warps = (blockDim.x + 31) >> 5;
    v = warp_tree<Op>(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float u = warp_tree<Op>(lane < n_warps ? buf[lane] : Op::id());
    return __shfl_sync(FULL, u, 0);  // no barrier after: each reduction has its own buffer
}

// total[0] += sum(x) (total zeroed by the caller): four strided sums per thread, the block's
// sum, one atomic per block.
extern "C" __global__ void block_sum(const float* __restrict__ x, long long n,
                                     float* __restrict__ total) {
    __shared__ float buf[64];
    long long stride = (long long)gridDim.x * blockDim.x;
    long long k = TID;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (; k + 3 * stride < n; k += 4 * stride) {
        s0 += x[k];
        s1 += x[k + stride];
        s2 += x[k + 2 * stride];
        s3 += x[k + 3 * stride];
    }
    for (; k < n; k += stride) s0 += x[k];
    float s = block_reduce<SumOp>((s0 + s1) + (s2 + s3), buf);
    if (threadIdx.x == 0) atomicAdd(total, s);
}

// out (cols x rows) = x (rows x cols) through a 32 x 33 shared tile; blocks of 32 x R threads
// (R = TRANSPOSE_ROWS, a constant as fearless's fixed block makes it), each moving the rows
// ty, ty + R, ... of its tile: block (bx, by) reads x's tile (bx, by) and writes out's tile
// (by, bx), both coalesced.
#define TRANSPOSE_ROWS 4
extern "C" __global__ void transpose(const float* __restrict__ x, long long rows, long long cols,
                                     float* __restrict__ out) {
    __shared__ float s[32][33];
    long long tx = threadIdx.x;
#pragma unroll
    for (int k = 0; k < 32 / TRANSPOSE_ROWS; k++) {
        long long ty = threadIdx.y + k * TRANSPOSE_ROWS;
        long long r = (long long)blockIdx.x * 32 + ty, c = (long long)blockIdx.y * 32 + tx;
        if (r < rows && c < cols) s[ty][tx] = x[r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32 / TRANSPOSE_ROWS; k++) {
        long long ty = threadIdx.y + k * TRANSPOSE_ROWS;
        long long orow = (long long)blockIdx.y * 32 + ty, ocol = (long long)blockIdx.x * 32 + tx;
        if (orow < cols && ocol < rows) out[orow * rows + ocol] = s[tx][ty];
    }
}

// The row kernels: one block per row (blockIdx.x), each thread holding its ROW_CHUNKS float4
// chunks of the row, columns 4 (threadIdx.x + k * blockDim.x) .. + 3 (kernels_simt_chunks.py's
// `block_column(k, 4)`), x read once with one vector load per chunk; the statistics combined by
// block_reduce; chunks past the row's end (cols <= 4 * ROW_CHUNKS * blockDim.x, a multiple of 4)
// take the identity. Weights are read as float4 chunks in the last loop.
#define ROW_CHUNKS 2
#define LOG2E 1.4426950408889634f
#define ROW_CHUNK(k, c) \
    _Pragma("unroll") for (int k = 0; k < ROW_CHUNKS; k++) \
        if (long long c = 4 * (threadIdx.x + (long long)k * blockDim.x); true)
__device__ __forceinline__ float4 chunk_or(const float* p, long long c, long long cols, float id) {
    return c < cols ? *(const float4*)(p + c) : make_float4(id, id, id, id);
}
extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   long long cols) {
    __shared__ float b0[64], b1[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float4 v[ROW_CHUNKS];
    float m = __int_as_float(0xff800000), s = 0.0f;
    ROW_CHUNK(k, c) {
        v[k] = chunk_or(xr, c, cols, __int_as_float(0xff800000));
        m = fmaxf(fmaxf(fmaxf(m, v[k].x), fmaxf(v[k].y, v[k].z)), v[k].w);
    }
    m = block_reduce<MaxOp>(m, b0);
#pragma unroll
    for (int k = 0; k < ROW_CHUNKS; k++) {
        v[k] = make_float4(exp2f((v[k].x - m) * LOG2E), exp2f((v[k].y - m) * LOG2E),
                           exp2f((v[k].z - m) * LOG2E), exp2f((v[k].w - m) * LOG2E));
        s += v[k].x + v[k].y + v[k].z + v[k].w;
    }
    float inv = 1.0f / block_reduce<SumOp>(s, b1);
    ROW_CHUNK(k, c) if (c < cols)
        *(float4*)(yr + c) = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
}

extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    long long cols, float eps, float* __restrict__ out) {
    __shared__ float b0[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float4 v[ROW_CHUNKS];
    float q = 0.0f;
    ROW_CHUNK(k, c) {
        v[k] = chunk_or(xr, c, cols, 0.0f);
        q += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
    float rstd = rsqrtf(block_reduce<SumOp>(q, b0) / (float)cols + eps);
    ROW_CHUNK(k, c) if (c < cols) {
        float4 g = *(const float4*)(w + c);
        *(float4*)(yr + c) = make_float4(v[k].x * rstd * g.x, v[k].y * rstd * g.y,
                                         v[k].z * rstd * g.z, v[k].w * rstd * g.w);
    }
}

extern "C" __global__ void layer_norm(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, long long cols, float eps,
                                      float* __restrict__ out) {
    __shared__ float b0[64], b1[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float4 v[ROW_CHUNKS];
    float s = 0.0f, q = 0.0f;
    ROW_CHUNK(k, c) { v[k] = chunk_or(xr, c, cols, 0.0f); s += v[k].x + v[k].y + v[k].z + v[k].w; }
    float mean = block_reduce<SumOp>(s, b0) / (float)cols;
    ROW_CHUNK(k, c) if (c < cols) {
        float4 d = make_float4(v[k].x - mean, v[k].y - mean, v[k].z - mean, v[k].w - mean);
        q += d.x * d.x + d.y * d.y + d.z * d.z + d.w * d.w;
    }
    float rstd = rsqrtf(block_reduce<SumOp>(q, b1) / (float)cols + eps);
    ROW_CHUNK(k, c) if (c < cols) {
        float4 g = *(const float4*)(w + c), h = *(const float4*)(b + c);
        *(float4*)(yr + c) = make_float4((v[k].x - mean) * rstd * g.x + h.x,
                                         (v[k].y - mean) * rstd * g.y + h.y,
                                         (v[k].z - mean) * rstd * g.z + h.z,
                                         (v[k].w - mean) * rstd * g.w + h.w);
    }
}

// c (m x n) = a (m x k) @ b (k x n), row-major, 16-bit operands, f32 sums: the SIMT gemm's
// tiles (kernels_simt.make_gemm). A block of GT x GR threads owns a GT x GT tile of c, GT / GR
// rows of one column per thread; per K step each thread stages its own slots of a's and b's
// GT x GT tiles in shared memory as f32 (clamped load, then zero past the edges), a barrier,
// the products, a barrier. `load` widens a 16-bit value, `store` narrows the sum.
#define GT 64
#define GR 4
template <float (*load)(u16)>
__device__ __forceinline__ float tile_element(const u16* __restrict__ x, long long rows,
                                              long long cols, long long r, long long c) {
    float e = load(x[min(r, rows - 1) * cols + min(c, cols - 1)]);
    return (r < rows && c < cols) ? e : 0.0f;
}

template <float (*load)(u16), u16 (*store)(float)>
__device__ __forceinline__ void gemm_tiled(const u16* __restrict__ a, const u16* __restrict__ b,
                                           long long m, long long n, long long k,
                                           u16* __restrict__ c) {
    __shared__ float sa[GT][GT];
    __shared__ float sb[GT][GT];
    float acc[GT / GR];
#pragma unroll
    for (int s = 0; s < GT / GR; ++s) acc[s] = 0.0f;
    long long row0 = (long long)blockIdx.y * GT, col0 = (long long)blockIdx.x * GT;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (long long k0 = 0; k0 < k; k0 += GT) {
#pragma unroll
        for (int s = 0; s < GT / GR; ++s) {
            int r = ty + s * GR;
            sa[r][tx] = tile_element<load>(a, m, k, row0 + r, k0 + tx);
            sb[r][tx] = tile_element<load>(b, k, n, k0 + r, col0 + tx);
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < GT; ++j) {
            float bj = sb[j][tx];
#pragma unroll
            for (int s = 0; s < GT / GR; ++s) acc[s] = fmaf(sa[ty + s * GR][j], bj, acc[s]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int s = 0; s < GT / GR; ++s) {
        long long r = row0 + ty + s * GR, col = col0 + tx;
        if (r < m && col < n) c[r * n + col] = store(acc[s]);
    }
}

extern "C" __global__ void __launch_bounds__(GT * GR)
gemm_f16(const u16* __restrict__ a, const u16* __restrict__ b, long long m, long long n,
         long long k, u16* __restrict__ c) {
    gemm_tiled<h2f, f2h>(a, b, m, n, k, c);
}

extern "C" __global__ void __launch_bounds__(GT * GR)
gemm_bf16(const u16* __restrict__ a, const u16* __restrict__ b, long long m, long long n,
          long long k, u16* __restrict__ c) {
    gemm_tiled<bf2f, f2bf>(a, b, m, n, k, c);
}

extern "C" __global__ void args0() {}

extern "C" __global__ void args1(float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = 1.0f;
}

extern "C" __global__ void args3(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" __global__ void args8(const float* __restrict__ a, const float* __restrict__ b,
                                 const float* __restrict__ c, const float* __restrict__ d,
                                 const float* __restrict__ e, const float* __restrict__ f,
                                 const float* __restrict__ g, float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = a[i] + b[i] + c[i] + d[i] + e[i] + f[i] + g[i];
}
"""

KERNELS = (
    "vecadd",
    "saxpy",
    "block_sum",
    "transpose",
    "softmax",
    "rms_norm",
    "layer_norm",
    "gemm_f16",
    "gemm_bf16",
    "args0",
    "args1",
    "args3",
    "args8",
)


def compile_cubin(arch: str) -> Any:
    """NVRTC -> cubin for `arch` ("sm_90"): a cuda.core ObjectCode. Needs no GPU."""
    from cuda.core import Program, ProgramOptions

    program = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=arch, std="c++17"))
    return program.compile("cubin")


@dataclass
class CudaModule:
    """The compiled module, loaded on the current device, with a launcher factory."""

    code: Any  # cuda.core ObjectCode

    def launcher(
        self,
        name: str,
        threads: int,
        args: Sequence[Any],
        *,
        grid: int | tuple[int, ...] | None = None,
        block: int | tuple[int, ...] = BLOCK,
    ) -> Launch:
        """A callable launching `name` over `threads` threads (blocks of BLOCK) with `args`;
        `grid` and `block`, when given, are the launch's shape instead (`threads` is unused).

        Arguments are converted once: ints that are device pointers stay Python ints
        (`intptr_t`), the rest must already be NumPy scalars of the kernel's C types.
        """
        from cuda.core import LEGACY_DEFAULT_STREAM, LaunchConfig, launch

        kernel = self.code.get_kernel(name)
        if grid is None:
            grid = max(1, (threads + BLOCK - 1) // BLOCK)
        config = LaunchConfig(grid=grid, block=block)
        stream = LEGACY_DEFAULT_STREAM  # torch's default stream is the legacy one too
        packed = tuple(args)

        def run() -> None:
            launch(stream, config, kernel, *packed)

        return run


def load(arch: str) -> CudaModule:
    from cuda.core import Device

    Device(0).set_current()
    return CudaModule(compile_cubin(arch))


def ptr(tensor: Any) -> int:
    """The device address of a torch tensor, as a kernel pointer argument."""
    return int(tensor.data_ptr())


def i64(value: int) -> np.int64:
    return np.int64(value)


def f32(value: float) -> np.float32:
    return np.float32(value)
