"""Where the SIMT row kernels lose time: rms_norm and softmax on a (65536 x 1024) f32 matrix, as
the bench's fearless SIMT kernels (`kernels_simt.make_row_kernels`: `block_stride`, and
`make_register_kernels`: rows in `simt.local.array`s) at several block sizes, and as CUDA C++
variants (a pass per statistic re-reading x, against register-resident rows and float4 loads).
`python3 bench/experiments/simt_rows_variants.py` on the GPU machine; GB/s counts one read and
one write of the matrix."""

from __future__ import annotations

import numpy as np
import torch

import fearless as fl
from fearless_bench.kernels_cuda import i64, ptr
from fearless_bench.kernels_simt import make_register_kernels, make_row_kernels
from fearless_bench.timing import FULL, DeviceTimer

ROWS, COLS = 65536, 1024
EPS = 1e-5

SOURCE = r"""
#define FULL 0xffffffffu
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(FULL, v, off);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_down_sync(FULL, v, off));
    return v;
}
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* buf) {
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float u = lane < nw ? buf[lane] : (MAX ? __int_as_float(0xff800000) : 0.0f);
        u = MAX ? warp_max(u) : warp_sum(u);
        if (lane == 0) buf[32] = u;
    }
    __syncthreads();
    float r = buf[32];
    __syncthreads();
    return r;
}

// The twin: two passes over x.
extern "C" __global__ void rms_twin(const float* __restrict__ x, const float* __restrict__ w,
                                    long long cols, float eps, float* __restrict__ out) {
    __shared__ float buf[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float q = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) q += xr[c] * xr[c];
    float rstd = rsqrtf(block_reduce<false>(q, buf) / (float)cols + eps);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * rstd * w[c];
}

// Register-resident: PER columns per thread, loaded once.
template <int PER>
__device__ void rms_regs(const float* __restrict__ x, const float* __restrict__ w, long long cols,
                         float eps, float* __restrict__ out) {
    __shared__ float buf[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float v[PER];
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        long long c = threadIdx.x + (long long)k * blockDim.x;
        v[k] = c < cols ? xr[c] : 0.0f;
        q += v[k] * v[k];
    }
    float rstd = rsqrtf(block_reduce<false>(q, buf) / (float)cols + eps);
#pragma unroll
    for (int k = 0; k < PER; k++) {
        long long c = threadIdx.x + (long long)k * blockDim.x;
        if (c < cols) yr[c] = v[k] * rstd * w[c];
    }
}
extern "C" __global__ void rms_regs4(const float* x, const float* w, long long cols, float eps, float* out) {
    rms_regs<4>(x, w, cols, eps, out);
}
extern "C" __global__ void rms_regs8(const float* x, const float* w, long long cols, float eps, float* out) {
    rms_regs<8>(x, w, cols, eps, out);
}

// Register-resident with float4 loads: thread t holds columns 4t..4t+3 (blockDim.x * 4 == cols).
extern "C" __global__ void rms_vec4(const float4* __restrict__ x, const float4* __restrict__ w,
                                    long long cols, float eps, float4* __restrict__ out) {
    __shared__ float buf[64];
    long long i = blockIdx.x * (cols / 4) + threadIdx.x;
    float4 v = x[i];
    float q = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    float rstd = rsqrtf(block_reduce<false>(q, buf) / (float)cols + eps);
    float4 g = w[threadIdx.x];
    out[i] = make_float4(v.x * rstd * g.x, v.y * rstd * g.y, v.z * rstd * g.z, v.w * rstd * g.w);
}

// Softmax, register-resident (4 per thread).
extern "C" __global__ void softmax_regs4(const float* __restrict__ x, float* __restrict__ out,
                                         long long cols) {
    __shared__ float b0[64], b1[64];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float v[4];
    float m = __int_as_float(0xff800000);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long c = threadIdx.x + (long long)k * blockDim.x;
        v[k] = c < cols ? xr[c] : __int_as_float(0xff800000);
        m = fmaxf(m, v[k]);
    }
    m = block_reduce<true>(m, b0);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) { v[k] = expf(v[k] - m); s += v[k]; }
    s = block_reduce<false>(s, b1);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long c = threadIdx.x + (long long)k * blockDim.x;
        if (c < cols) yr[c] = v[k] / s;
    }
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

    fl.set_target("cuda")
    Device(0).set_current()
    code = Program(SOURCE, code_type="c++", options=ProgramOptions(arch="sm_90", std="c++17"))
    mod = code.compile("cubin")
    x = torch.randn(ROWS, COLS, device="cuda")
    w = torch.randn(COLS, device="cuda")
    out = torch.empty_like(x)
    nbytes = 2 * x.numel() * 4
    ref_rms = x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * w
    ref_sm = torch.softmax(x, 1)

    def cuda(name: str, block: int, args: list) -> float:  # type: ignore[type-arg]
        k = mod.get_kernel(name)
        cfg = LaunchConfig(grid=ROWS, block=block)
        out.zero_()
        t = ms(lambda: launch(LEGACY_DEFAULT_STREAM, cfg, k, *args))
        return t

    rows = []
    eps = np.float32(EPS)
    for label, kernels, threads in [
        *((f"block_stride {t}", make_row_kernels(t), t) for t in (64, 128, 256, 512)),
        *(
            (f"registers {t}x{COLS // t}", make_register_kernels(t, COLS // t), t)
            for t in (64, 128, 256)
        ),
    ]:
        rms, sm = kernels["rms_norm"], kernels["softmax"]
        prep = rms.prepare(ROWS, threads)
        t_rms = ms(lambda rms=rms, prep=prep: rms(prep, x, w, eps, out))
        rows.append((f"fearless rms {label}", t_rms, (out - ref_rms).abs().max().item()))
        prep = sm.prepare(ROWS, threads)
        t_sm = ms(lambda sm=sm, prep=prep: sm(prep, x, out))
        rows.append((f"fearless softmax {label}", t_sm, (out - ref_sm).abs().max().item()))
    base = [ptr(x), ptr(w), i64(COLS), np.float32(EPS), ptr(out)]
    for threads in (128, 256, 512, 1024):
        t = cuda("rms_twin", threads, base)
        rows.append((f"cuda rms twin {threads}", t, (out - ref_rms).abs().max().item()))
    t = cuda("rms_regs4", 256, base)
    rows.append(("cuda rms regs4 256", t, (out - ref_rms).abs().max().item()))
    t = cuda("rms_regs8", 128, base)
    rows.append(("cuda rms regs8 128", t, (out - ref_rms).abs().max().item()))
    t = cuda("rms_vec4", 256, base)
    rows.append(("cuda rms vec4 256", t, (out - ref_rms).abs().max().item()))
    t = cuda("softmax_regs4", 256, [ptr(x), ptr(out), i64(COLS)])
    rows.append(("cuda softmax regs4 256", t, (out - ref_sm).abs().max().item()))
    rows.append(
        (
            "torch rms (eager, several kernels)",
            ms(lambda: x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * w),
            0.0,
        )
    )
    rows.append(("torch softmax", ms(lambda: torch.softmax(x, 1)), 0.0))
    for name, t, err in rows:
        print(f"{name:40s} {t:8.4f} ms {nbytes / (t * 1e-3) / 1e9:8.1f} GB/s  max err {err:.2e}")


if __name__ == "__main__":
    main()
