# Kernel source: `simt.Slice[fl.f32]` and friends are the DSL's types, not Python's.
# mypy: disable-error-code="no-untyped-def,valid-type,index"
"""SIMT kernels the benchmark suite needs beyond `examples/simt_kernels.py` (vecadd, saxpy).

What fearless SIMT allows today shapes them: no shared memory, no atomics, no warp shuffles,
and a thread may write only the element of a `DisjointSlice` its own ThreadIndex names. So:

- sum: a strided partial sum per thread (`partial_sum`), launched again on the partials until
  one value is left (2^28 -> 2^20 -> 2^12 -> 2^4 -> 1); no atomics, no shared-memory tree.
- softmax / rms_norm / layer_norm: a thread cannot write a whole row, so each is two safe
  kernels: one thread per row walks its row and writes that row's statistics (max and sum of
  exponentials, 1/rms, mean and 1/std), then one thread per element normalises.
- transpose: one thread per output element, 1-D index arithmetic over row-major arrays
  (coalesced writes, strided reads).
- GEMM: one thread per output element, a K loop in f32 over f16/bf16 operands (`make_gemm`
  makes one kernel per dtype); no tiling without shared memory, so it runs far below the
  matrix units (the suite runs it at the smaller sizes only).

`kernels_cuda.py` holds the same algorithms in CUDA C++: the parity reference of this file.
No `from __future__ import annotations`: kernel annotations are evaluated as written.
"""

import math

import fearless as fl
from fearless import simt
from fearless.dtypes import DType

# Threads per block of every kernel here (and of their CUDA C++ twins).
BLOCK = 256

# The parameter types of these f32 kernels (an alias is part of a kernel's cache key).
In = simt.Slice[fl.f32]
Out = simt.DisjointSlice[fl.f32]


@simt.kernel(block=BLOCK)
def partial_sum(x: In, out: Out):
    """out[i] = x[i] + x[i + T] + x[i + 2T] + ..., T = len(out): coalesced across threads."""
    i = simt.thread.index_1d()
    if i < len(out):
        stride = len(out)
        n = len(x)
        k = int(i)
        s = fl.f32(0.0)
        while k < n:
            s += x[k]
            k += stride
        out[i] = s


@simt.kernel(block=BLOCK)
def transpose(x: In, rows: int, cols: int, out: Out):
    """out (cols x rows) = x (rows x cols) transposed, both row-major."""
    i = simt.thread.index_1d()
    if i < len(out):
        r = int(i) // rows  # row of out = column of x
        c = int(i) % rows
        out[i] = x[c * cols + r]


@simt.kernel(block=BLOCK)
def softmax_stats(x: In, cols: int, row_max: Out, row_sum: Out):
    """Per row: its max, and the sum of exp(x - max) (two walks over the row)."""
    r = simt.thread.index_1d()
    if r < len(row_max) and r < len(row_sum):
        base = int(r) * cols
        m = x[base]
        for k in range(1, cols):
            m = max(m, x[base + k])
        s = fl.f32(0.0)
        for k in range(cols):
            s += math.exp(x[base + k] - m)
        row_max[r] = m
        row_sum[r] = s


@simt.kernel(block=BLOCK)
def softmax_apply(x: In, cols: int, row_max: In, row_sum: In, out: Out):
    i = simt.thread.index_1d()
    if i < len(out):
        r = int(i) // cols
        out[i] = math.exp(x[i] - row_max[r]) / row_sum[r]


@simt.kernel(block=BLOCK)
def rms_stats(x: In, cols: int, eps: fl.f32, rstd: Out):
    """Per row: 1 / sqrt(mean(x^2) + eps)."""
    r = simt.thread.index_1d()
    if r < len(rstd):
        base = int(r) * cols
        s = fl.f32(0.0)
        for k in range(cols):
            v = x[base + k]
            s += v * v
        rstd[r] = fl.math.rsqrt(s / fl.f32(cols) + eps)


@simt.kernel(block=BLOCK)
def rms_apply(x: In, w: In, rstd: In, out: Out):
    i = simt.thread.index_1d()
    if i < len(out):
        cols = len(w)
        j = int(i)
        out[i] = x[i] * rstd[j // cols] * w[j % cols]


@simt.kernel(block=BLOCK)
def layer_norm_stats(x: In, cols: int, eps: fl.f32, mean: Out, rstd: Out):
    """Per row: the mean, then 1 / sqrt(var + eps) from a second walk (no cancellation)."""
    r = simt.thread.index_1d()
    if r < len(mean) and r < len(rstd):
        base = int(r) * cols
        s = fl.f32(0.0)
        for k in range(cols):
            s += x[base + k]
        mu = s / fl.f32(cols)
        q = fl.f32(0.0)
        for k in range(cols):
            d = x[base + k] - mu
            q += d * d
        mean[r] = mu
        rstd[r] = fl.math.rsqrt(q / fl.f32(cols) + eps)


@simt.kernel(block=BLOCK)
def layer_norm_apply(x: In, w: In, b: In, mean: In, rstd: In, out: Out):
    i = simt.thread.index_1d()
    if i < len(out):
        cols = len(w)
        j = int(i)
        r = j // cols
        c = j % cols
        out[i] = (x[i] - mean[r]) * rstd[r] * w[c] + b[c]


def make_gemm(dt: DType) -> simt.Kernel:
    """c (m x n) = a (m x k) @ b (k x n) over `dt` operands, row-major; one thread per element of
    c, f32 sums. Every dtype's kernel is named `gemm` (as the examples' factories name theirs);
    the module names below and the CUDA C++ twins carry the dtype."""

    @simt.kernel(block=BLOCK)
    def gemm(a: simt.Slice[dt], b: simt.Slice[dt], n: int, k: int, c: simt.DisjointSlice[dt]):
        i = simt.thread.index_1d()
        if i < len(c):
            row = int(i) // n
            col = int(i) % n
            acc = fl.f32(0.0)
            for kk in range(k):
                acc += fl.f32(a[row * k + kk]) * fl.f32(b[kk * n + col])
            c[i] = dt(acc)

    return gemm


gemm_f16 = make_gemm(fl.f16)
gemm_bf16 = make_gemm(fl.bf16)


@simt.kernel(block=BLOCK)
def noop():
    """No parameters but the error record: the launch-overhead floor of a fearless launch."""
    return


@simt.kernel(block=BLOCK)
def fill1(out: Out):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 1.0


@simt.kernel(block=BLOCK)
def sum8(a: In, b: In, c: In, d: In, e: In, f: In, g: In, out: Out):
    """Eight array arguments (seven in, one out), for launch overhead."""
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i] + b[i] + c[i] + d[i] + e[i] + f[i] + g[i]
