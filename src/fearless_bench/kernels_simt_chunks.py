# Kernel source: `simt.Slice[fl.f32]` and friends are the DSL's types, not Python's.
# mypy: disable-error-code="no-untyped-def,valid-type,index,operator,attr-defined,call-arg"
"""The SIMT row kernels with chunk copies: a block per row, each thread holding its row's
chunks of CHUNK_WIDTH contiguous columns in a `simt.local.array((CHUNKS, CHUNK_WIDTH))`,
moved by `v[k] = x[i]` and `out[i] = v[k]` with `i = simt.thread.block_column(k, CHUNK_WIDTH)`
(simt/chunks.py): one vector access per chunk (`ld.global.nc.v4.b32`, `st.global.v4.b32`), as
Triton lays out a row of 1024 f32 over 4 warps. Rows of at most CHUNK_THREADS * CHUNKS *
CHUNK_WIDTH columns, a multiple of CHUNK_WIDTH (a chunk past the row's end fails its check).

The algorithms are those of `kernels_simt.make_register_kernels`: softmax with the row's max
then its sum, rms_norm with the sum of squares, layer_norm with the mean then the variance of
x - mean, each statistic a `simt.block.reduce`; the weights are read in the last loop, as
chunks too (`g[k] = w[i]`). softmax takes e^x as 2^(x log2 e) and divides once per row.
No `from __future__ import annotations`: kernel annotations are evaluated as written.
"""

import math

import fearless as fl
from fearless import simt

# The parameter types (kernels_simt.py's aliases, which this module does not import: it
# imports this one).
In = simt.Slice[fl.f32]
In2 = simt.Slice[fl.f32, 2]
Out2 = simt.DisjointSlice[fl.f32, 2]

# Measured as CUDA C++ on the H200 at 65536 x 1024 f32 (bench/experiments/simt_algorithms.py,
# "block2_v4"): 128 threads x 2 float4 reach Triton (softmax and rms_norm 1.00, layer_norm 0.93).
CHUNK_THREADS = 128
CHUNKS = 2
CHUNK_WIDTH = 4
CHUNK_COLS = CHUNK_THREADS * CHUNKS * CHUNK_WIDTH
# layer_norm's `max_registers`. H200, 65536 x 1024 f32 (bench/experiments/simt_ln_registers.py),
# GB/s against Triton's 4083: unbounded (ptxas takes 39) 3463, at most 32 (16 blocks of 128 per
# SM, but 16 bytes spilled) 3078, 40: 3707, 48: 3589. An empirical choice: ptxas schedules the
# kernel better with the cap of 40 than with its own 39.
LN_REGISTERS: int | None = 40
LOG2E = 1.4426950408889634  # softmax's e^x is 2^(x log2 e), as Triton computes it


@simt.device
def load_chunk(x: In2, v, k: int, width, fill: fl.f32):
    """Row k of the local array `v` = the thread's k-th chunk of its block's row of x, or
    `fill` past the row's end. `v` and `width` are unannotated: the local array, and the
    constant chunk width `block_column` needs, pass through as they are."""
    i = simt.thread.block_column(k, width)
    if i.col < x.shape[1]:
        v[k] = x[i]
    else:
        for j in range(width):
            v[k, j] = fill


@simt.device
def load_row(x: In2, v, chunks, width, squares):
    """The thread's chunks of its block's row of x into `v` (0 past the row's end), as
    `load_chunk`, and the sum of their elements, or of their squares when `squares` (a
    constant): the first pass of both norms."""
    s = fl.f32(0.0)
    for k in range(chunks):
        load_chunk(x, v, k, width, fl.f32(0.0))
        for j in range(width):
            s += v[k, j] * v[k, j] if squares else v[k, j]
    return s


@simt.device
def store_chunk(out: Out2, v, k: int, width):
    """The thread's k-th chunk of its block's row of out = row k of `v` (inside the row)."""
    i = simt.thread.block_column(k, width)
    if i.col < out.shape[1]:
        out[i] = v[k]


def make_chunk_kernels(
    threads: int, chunks: int, width: int, ln_registers: int | None = None
) -> dict[str, simt.Kernel]:
    """softmax, rms_norm and layer_norm over rows of at most `threads * chunks * width`
    columns, `chunks` chunks of `width` a thread; `ln_registers`, layer_norm's
    `max_registers`."""

    @simt.kernel(block=threads)
    def softmax_chunks(x: In2, out: Out2):
        v = simt.local.array((chunks, width), fl.f32)
        m = fl.f32(-math.inf)
        for k in range(chunks):
            load_chunk(x, v, k, width, fl.f32(-math.inf))
            for j in range(width):
                m = max(m, v[k, j])
        m = simt.block.reduce(m, "max")
        s = fl.f32(0.0)
        for k in range(chunks):
            for j in range(width):
                v[k, j] = math.exp2((v[k, j] - m) * LOG2E)  # e^x as 2^(x log2 e); 0 past the end
                s += v[k, j]
        inv = 1.0 / simt.block.reduce(s, "sum")
        for k in range(chunks):
            for j in range(width):
                v[k, j] = v[k, j] * inv
            store_chunk(out, v, k, width)

    @simt.kernel(block=threads)
    def rms_norm_chunks(x: In2, w: In, eps: fl.f32, out: Out2):
        v = simt.local.array((chunks, width), fl.f32)
        g = simt.local.array((chunks, width), fl.f32)
        q = load_row(x, v, chunks, width, True)
        rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / fl.f32(len(w)) + eps)
        for k in range(chunks):
            i = simt.thread.block_column(k, width)
            if i.col < out.shape[1]:
                g[k] = w[i]  # the chunk's columns of w
                for j in range(width):
                    v[k, j] = v[k, j] * rstd * g[k, j]
                out[i] = v[k]

    @simt.kernel(block=threads, max_registers=ln_registers)
    def layer_norm_chunks(x: In2, w: In, b: In, eps: fl.f32, out: Out2):
        cols = fl.f32(len(w))
        v = simt.local.array((chunks, width), fl.f32)
        g = simt.local.array((chunks, width), fl.f32)
        h = simt.local.array((chunks, width), fl.f32)
        mean = simt.block.reduce(load_row(x, v, chunks, width, False), "sum") / cols
        q = fl.f32(0.0)
        for k in range(chunks):
            i = simt.thread.block_column(k, width)
            inside = i.col < x.shape[1]
            for j in range(width):
                d = v[k, j] - mean if inside else fl.f32(0.0)
                q += d * d
        rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / cols + eps)
        for k in range(chunks):
            i = simt.thread.block_column(k, width)
            if i.col < out.shape[1]:  # w, b and out: the chunk's columns
                g[k] = w[i]
                h[k] = b[i]
                for j in range(width):
                    v[k, j] = (v[k, j] - mean) * rstd * g[k, j] + h[k, j]
                out[i] = v[k]

    return {
        "softmax": softmax_chunks,
        "rms_norm": rms_norm_chunks,
        "layer_norm": layer_norm_chunks,
    }


CHUNK_KERNELS = make_chunk_kernels(CHUNK_THREADS, CHUNKS, CHUNK_WIDTH, LN_REGISTERS)
