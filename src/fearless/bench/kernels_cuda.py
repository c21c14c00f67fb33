"""CUDA C++ peers, compiled with NVRTC through cuda.core and launched with `cuda.core.launch`.

They are the SIMT track's parity reference: each kernel is the algorithm of its twin in
`kernels_simt.py`, written as a CUDA C++ programmer would (64-bit indices as fearless uses,
`__restrict__` where fearless proves non-aliasing, NVRTC's default flags: precise division
and square root, FMA contraction on). A gap between the two is a gap in fearless's codegen,
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

extern "C" __global__ void partial_sum(const float* __restrict__ x, long long n,
                                       float* __restrict__ out, long long t) {
    long long i = TID;
    if (i < t) {
        float s = 0.0f;
        for (long long k = i; k < n; k += t) s += x[k];
        out[i] = s;
    }
}

extern "C" __global__ void transpose(const float* __restrict__ x, long long rows, long long cols,
                                     float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = x[(i % rows) * cols + i / rows];
}

extern "C" __global__ void softmax_stats(const float* __restrict__ x, long long cols,
                                         float* __restrict__ row_max, float* __restrict__ row_sum,
                                         long long rows) {
    long long r = TID;
    if (r < rows) {
        const float* row = x + r * cols;
        float m = row[0];
        for (long long k = 1; k < cols; ++k) m = fmaxf(m, row[k]);
        float s = 0.0f;
        for (long long k = 0; k < cols; ++k) s += expf(row[k] - m);
        row_max[r] = m;
        row_sum[r] = s;
    }
}

extern "C" __global__ void softmax_apply(const float* __restrict__ x, long long cols,
                                         const float* __restrict__ row_max,
                                         const float* __restrict__ row_sum,
                                         float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) {
        long long r = i / cols;
        out[i] = expf(x[i] - row_max[r]) / row_sum[r];
    }
}

extern "C" __global__ void rms_stats(const float* __restrict__ x, long long cols, float eps,
                                     float* __restrict__ rstd, long long rows) {
    long long r = TID;
    if (r < rows) {
        const float* row = x + r * cols;
        float s = 0.0f;
        for (long long k = 0; k < cols; ++k) s += row[k] * row[k];
        rstd[r] = rsqrtf(s / (float)cols + eps);
    }
}

extern "C" __global__ void rms_apply(const float* __restrict__ x, const float* __restrict__ w,
                                     long long cols, const float* __restrict__ rstd,
                                     float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) out[i] = x[i] * rstd[i / cols] * w[i % cols];
}

extern "C" __global__ void layer_norm_stats(const float* __restrict__ x, long long cols, float eps,
                                            float* __restrict__ mean, float* __restrict__ rstd,
                                            long long rows) {
    long long r = TID;
    if (r < rows) {
        const float* row = x + r * cols;
        float s = 0.0f;
        for (long long k = 0; k < cols; ++k) s += row[k];
        float mu = s / (float)cols;
        float q = 0.0f;
        for (long long k = 0; k < cols; ++k) { float d = row[k] - mu; q += d * d; }
        mean[r] = mu;
        rstd[r] = rsqrtf(q / (float)cols + eps);
    }
}

extern "C" __global__ void layer_norm_apply(const float* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ b, long long cols,
                                            const float* __restrict__ mean,
                                            const float* __restrict__ rstd,
                                            float* __restrict__ out, long long n) {
    long long i = TID;
    if (i < n) {
        long long r = i / cols, c = i % cols;
        out[i] = (x[i] - mean[r]) * rstd[r] * w[c] + b[c];
    }
}

// Element i of a (m x k) @ b (k x n), row-major, summed in f32; `load` widens a 16-bit value.
template <float (*load)(u16)>
__device__ __forceinline__ float gemm_element(const u16* __restrict__ a, const u16* __restrict__ b,
                                              long long n, long long k, long long i) {
    long long row = i / n, col = i % n;
    float acc = 0.0f;
    for (long long kk = 0; kk < k; ++kk) acc += load(a[row * k + kk]) * load(b[kk * n + col]);
    return acc;
}

extern "C" __global__ void gemm_f16(const u16* __restrict__ a, const u16* __restrict__ b,
                                    long long n, long long k, u16* __restrict__ c, long long total) {
    long long i = TID;
    if (i < total) c[i] = f2h(gemm_element<h2f>(a, b, n, k, i));
}

extern "C" __global__ void gemm_bf16(const u16* __restrict__ a, const u16* __restrict__ b,
                                     long long n, long long k, u16* __restrict__ c, long long total) {
    long long i = TID;
    if (i < total) c[i] = f2bf(gemm_element<bf2f>(a, b, n, k, i));
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
    "partial_sum",
    "transpose",
    "softmax_stats",
    "softmax_apply",
    "rms_stats",
    "rms_apply",
    "layer_norm_stats",
    "layer_norm_apply",
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

    def launcher(self, name: str, threads: int, args: Sequence[Any]) -> Launch:
        """A callable launching `name` over `threads` threads (blocks of BLOCK) with `args`.

        Arguments are converted once: ints that are device pointers stay Python ints
        (`intptr_t`), the rest must already be NumPy scalars of the kernel's C types.
        """
        from cuda.core import LEGACY_DEFAULT_STREAM, LaunchConfig, launch

        kernel = self.code.get_kernel(name)
        grid = max(1, (threads + BLOCK - 1) // BLOCK)
        config = LaunchConfig(grid=grid, block=BLOCK)
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
