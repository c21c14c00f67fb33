# Kernel source: `simt.Slice[fl.f32]` and friends are the DSL's types, not Python's.
# mypy: disable-error-code="no-untyped-def,valid-type,index,operator,attr-defined"
"""SIMT kernels the benchmark suite needs beyond `examples/simt_kernels.py` (vecadd, saxpy).

Written as a user would, with shared memory and collectives, and all safe (no `simt.unsafe`:
a thread writes only its own element of a `DisjointSlice` and its own slot of a shared array):

- sum (`block_sum`): one launch. Each thread adds a strided share of x (coalesced across
  threads, four independent sums for memory parallelism; raw coordinates, since it only
  reads), `simt.block.reduce` adds the block's threads, and thread 0 adds the block's total
  into a one-element `AtomicSlice` with `simt.atomic.add` (the caller zeroes it).
- softmax / rms_norm / layer_norm: launched `[rows, ROW_THREADS]`, one block per row of any
  length; each thread walks its columns with `simt.thread.block_stride`, takes its share of the
  row's online max and sum (softmax), sum of squares (rms_norm) or sum and sum of squares
  shifted by the row's first element (layer_norm), combines the shares with
  `simt.block.reduce`, and writes its columns in a second pass: one read of the matrix from
  memory (the second pass mostly hits L1), one write, one launch (`make_row_kernels`).
  Rows of at most ROW_REG_COLS columns run `*_registers` instead: ROW_REG_THREADS threads
  hold ROW_REG_PER columns each in `simt.local.array`s (`simt.thread.block_column`), so x is
  read once (`make_register_kernels`; `row_kernel` picks the form).
- transpose: 32 x 32 tiles through a shared array padded to 32 x 33, one barrier, blocks of
  32 x TRANSPOSE_ROWS threads: each thread moves 32 / TRANSPOSE_ROWS rows of its tile
  (`block_index_2d(k)` opens the shared tile, `tile_index_2d(k, TILE)` out), reading x and
  writing out coalesced (`make_transpose` makes the kernel for other block heights).
- GEMM: shared-memory tiles (adapted from `shared_matmul` in examples/simt_kernels.py, numba's
  `fast_matmul`): a block of GEMM_TILE x GEMM_ROWS threads computes a GEMM_TILE x GEMM_TILE
  tile of c, GEMM_TILE / GEMM_ROWS rows of one column per thread summed in f32 in a
  `simt.local.array` (registers); per step of K each thread stages its own slots
  (`block_index_2d(k)`) of a GEMM_TILE x GEMM_TILE tile of a and of b in shared memory as f32,
  a barrier, then every thread reads the tiles' rows and its column, a barrier
  (`make_gemm` makes one kernel per dtype). CUDA cores only: no tensor cores (no `mma` in SIMT).

`kernels_cuda.py` holds the same algorithms in CUDA C++: the parity reference of this file.
No `from __future__ import annotations`: kernel annotations are evaluated as written.
"""

import math

import fearless as fl
from fearless import simt
from fearless.dtypes import DType

from .kernels_simt_chunks import CHUNK_COLS, CHUNK_KERNELS, CHUNK_THREADS, CHUNK_WIDTH

# Threads per block of the one-thread-per-element kernels here (and of their CUDA C++ twins).
BLOCK = 256

# The parameter types of these f32 kernels (an alias is part of a kernel's cache key).
In = simt.Slice[fl.f32]
Out = simt.DisjointSlice[fl.f32]

# Threads per block of the row kernels (a block per row, `block_stride` over its columns).
# Measured on the H200 at 65536 x 1024 f32 (bench/experiments/simt_rows_variants.py): rms_norm
# 3134 / 2831 / 2331 GB/s and softmax 2481 / 2142 / 1571 GB/s with 64 / 128 / 256 threads.
ROW_THREADS = 64
# The register-resident row kernels: ROW_REG_THREADS threads, ROW_REG_PER columns each in a
# `simt.local.array` (registers: LLVM unrolls the `range(ROW_REG_PER)` loops), so rows of at
# most ROW_REG_COLS columns are read once.
ROW_REG_THREADS = 128
ROW_REG_PER = 8
ROW_REG_COLS = ROW_REG_THREADS * ROW_REG_PER
# Threads per block of `block_sum`, and its grid: SUM_BLOCKS blocks, each adding a strided share.
# Many blocks (12 or more waves on an H100/H200) keep the last wave's idle SMs a small fraction;
# each block costs one block reduction and one atomic (2^28 elements: 128 per thread).
SUM_BLOCK = 256
SUM_BLOCKS = 8192
# The transpose tile (TILE x TILE elements) and the rows of its block (TILE x TRANSPOSE_ROWS
# threads, TILE / TRANSPOSE_ROWS elements each). Measured on the H200 at 4096 x 16384 f32
# (bench/experiments/simt_algorithms.py): this kernel 3124 / 3028 / 3899 / 3806 GB/s with blocks
# of 1 / 2 / 4 / 8 rows (Triton 3970). kernels_cuda.py's twin has the same constant.
TILE = 32
TRANSPOSE_ROWS = 4

In2 = simt.Slice[fl.f32, 2]
Out2 = simt.DisjointSlice[fl.f32, 2]


@simt.kernel(block=SUM_BLOCK)
def block_sum(x: In, total: simt.AtomicSlice[fl.f32]):
    """total[0] += sum(x), total zeroed by the caller. Each thread adds a strided share of x
    (coalesced across threads, four independent sums), the block adds its threads' sums
    (`simt.block.reduce`), and thread 0 adds the block's sum with one atomic."""
    n = len(x)
    stride = simt.gridDim.x * simt.blockDim.x
    k = simt.blockIdx.x * simt.blockDim.x + simt.threadIdx.x
    s0 = fl.f32(0.0)
    s1 = fl.f32(0.0)
    s2 = fl.f32(0.0)
    s3 = fl.f32(0.0)
    while k + 3 * stride < n:
        s0 += x[k]
        s1 += x[k + stride]
        s2 += x[k + 2 * stride]
        s3 += x[k + 3 * stride]
        k += 4 * stride
    while k < n:
        s0 += x[k]
        k += stride
    s = simt.block.reduce((s0 + s1) + (s2 + s3), "sum")
    if simt.threadIdx.x == 0:
        simt.atomic.add(total, 0, s)


def make_transpose(block_rows: int) -> simt.Kernel:
    """out (cols x rows) = x (rows x cols) transposed, through a TILE x TILE shared tile, by
    blocks of TILE x block_rows threads.

    Block (bx, by) reads the tile of x at rows bx*TILE.., columns by*TILE.. (step k: thread
    (ty, tx) reads x[bx*TILE + ty + k*block_rows, by*TILE + tx], coalesced, into its own
    slot `block_index_2d(k)`), and writes the tile of out at rows by*TILE.., columns bx*TILE..
    (its `tile_index_2d(k, TILE)`, coalesced). The tile's rows are padded to TILE + 1 so that
    the column reads `s[tx, ty + k*block_rows]` hit 32 different banks."""
    steps = TILE // block_rows

    @simt.kernel(block=(TILE, block_rows))
    def transpose(x: In2, out: Out2):
        s = simt.shared.array((TILE, TILE + 1), fl.f32)
        for k in range(steps):
            t = simt.thread.block_index_2d(k)
            r = simt.blockIdx.x * TILE + t.row
            c = simt.blockIdx.y * TILE + t.col
            if r < x.shape[0] and c < x.shape[1]:
                s[t] = x[r, c]
        simt.syncthreads()
        for k in range(steps):
            t = simt.thread.block_index_2d(k)
            g = simt.thread.tile_index_2d(k, TILE)
            if g.row < out.shape[0] and g.col < out.shape[1]:
                out[g] = s[t.col, t.row]

    return transpose


transpose = make_transpose(TRANSPOSE_ROWS)


# The row kernels: x and out are (rows x cols) matrices, launched `[rows, threads]`: one
# block per row, each thread walking the columns t, t + threads, ... of its block's row with
# `simt.thread.block_stride` (its pairs (row, col) open `out`). The first pass computes the
# thread's share of the row's statistics (online max and sum; sum of squares; shifted sum and
# sum of squares), `simt.block.reduce` combines the shares (outside the loops: every thread
# reaches it), and the second pass writes each column, reading x again (mostly from L1: a row
# is 4 KB at 1024 columns).
# The block is fixed, so the stride is a constant and ptxas unrolls the first pass's loads.
# These take rows of any length; rows of at most ROW_REG_COLS run the `*_registers` kernels below.


def make_row_kernels(threads: int) -> dict[str, simt.Kernel]:
    """softmax, rms_norm and layer_norm walking a row per block of `threads` (block_stride)."""

    @simt.kernel(block=threads)
    def softmax(x: In2, out: Out2):
        """Online softmax: each thread keeps its columns' running max m and sum s of exp(v - m)
        (rescaled when m grows), the block combines them, and the second pass writes."""
        m = fl.f32(-math.inf)
        s = fl.f32(0.0)
        for i in simt.thread.block_stride(x.shape[1]):
            v = x[i]
            m_new = max(m, v)
            s = s * math.exp(m - m_new) + math.exp(v - m_new)
            m = m_new
        row_max = simt.block.reduce(m, "max")
        total = simt.block.reduce(s * math.exp(m - row_max), "sum")
        for i in simt.thread.block_stride(out.shape[1]):
            out[i] = math.exp(x[i] - row_max) / total

    @simt.kernel(block=threads)
    def rms_norm(x: In2, w: In, eps: fl.f32, out: Out2):
        """w has the row's length."""
        q = fl.f32(0.0)
        for i in simt.thread.block_stride(x.shape[1]):
            v = x[i]
            q += v * v
        rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / fl.f32(len(w)) + eps)
        for i in simt.thread.block_stride(out.shape[1]):
            out[i] = x[i] * rstd * w[i.col]

    @simt.kernel(block=threads)
    def layer_norm(x: In2, w: In, b: In, eps: fl.f32, out: Out2):
        """One pass for the sums of d = x - k and d * d, k the row's first element (a shift that
        keeps E[d^2] - E[d]^2 free of cancellation: k lies within the row's spread)."""
        cols = fl.f32(len(w))
        k = x[simt.blockIdx.x, 0]
        s = fl.f32(0.0)
        q = fl.f32(0.0)
        for i in simt.thread.block_stride(x.shape[1]):
            d = x[i] - k
            s += d
            q += d * d
        mean_d = simt.block.reduce(s, "sum") / cols
        var = simt.block.reduce(q, "sum") / cols - mean_d * mean_d
        rstd = fl.math.rsqrt(max(var, fl.f32(0.0)) + eps)
        mean = k + mean_d
        for i in simt.thread.block_stride(out.shape[1]):
            out[i] = (x[i] - mean) * rstd * w[i.col] + b[i.col]

    return {"softmax": softmax, "rms_norm": rms_norm, "layer_norm": layer_norm}


# The row kernels again, each thread holding its `per` columns (c = t + k * T, step k of
# `block_stride`, `simt.thread.block_column(k)`) in a local array between the statistics and
# the write: x is read once. Columns past the row's end are skipped (the identity stands in).
# The loads read column min(c, last) and then choose, rather than `x[i] if c <= last else 0`:
# a load behind a branch waits for it, so the lazy form issued one load per branch (SASS), and
# this one issues all `per` loads together (as the CUDA twin's predicated loads). The
# weights are loaded in the same loop: loaded in the write loop, each store waited for its
# weight behind the previous store's branch.


@simt.device
def row_element(x, i, identity):
    """x at the pair i, or `identity` past the row's end: column min(col, last), then a choice."""
    last = x.shape[1] - 1
    e = x[i.row, min(i.col, last)]
    return e if i.col <= last else identity


def make_register_kernels(threads: int, per: int) -> dict[str, simt.Kernel]:
    """softmax, rms_norm and layer_norm holding rows of at most `threads * per` columns in
    registers, `per` columns a thread (keyed by the same names)."""

    @simt.kernel(block=threads)
    def softmax_registers(x: In2, out: Out2):
        v = simt.local.array(per, fl.f32)
        m = fl.f32(-math.inf)
        for k in range(per):
            v[k] = row_element(x, simt.thread.block_column(k), fl.f32(-math.inf))
            m = max(m, v[k])
        m = simt.block.reduce(m, "max")
        s = fl.f32(0.0)
        for k in range(per):
            v[k] = math.exp(v[k] - m)  # 0 past the row's end
            s += v[k]
        s = simt.block.reduce(s, "sum")
        for k in range(per):
            i = simt.thread.block_column(k)
            if i.col < out.shape[1]:
                out[i] = v[k] / s

    @simt.kernel(block=threads)
    def rms_norm_registers(x: In2, w: In, eps: fl.f32, out: Out2):
        v = simt.local.array(per, fl.f32)
        g = simt.local.array(per, fl.f32)  # w's columns, loaded with x's
        q = fl.f32(0.0)
        for k in range(per):
            i = simt.thread.block_column(k)
            v[k] = row_element(x, i, fl.f32(0.0))
            g[k] = w[min(i.col, x.shape[1] - 1)]  # past len(w): a checked error
            q += v[k] * v[k]
        rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / fl.f32(len(w)) + eps)
        for k in range(per):
            i = simt.thread.block_column(k)
            if i.col < out.shape[1]:
                out[i] = v[k] * rstd * g[k]

    @simt.kernel(block=threads)
    def layer_norm_registers(x: In2, w: In, b: In, eps: fl.f32, out: Out2):
        """The mean, then the variance of the registers' x - mean: two reductions, one read."""
        cols = fl.f32(len(w))
        v = simt.local.array(per, fl.f32)
        g = simt.local.array(per, fl.f32)  # w's and b's columns, loaded with x's
        h = simt.local.array(per, fl.f32)
        s = fl.f32(0.0)
        for k in range(per):
            i = simt.thread.block_column(k)
            v[k] = row_element(x, i, fl.f32(0.0))
            g[k] = w[min(i.col, x.shape[1] - 1)]  # past len(w): a checked error
            h[k] = b[min(i.col, x.shape[1] - 1)]
            s += v[k]
        mean = simt.block.reduce(s, "sum") / cols
        q = fl.f32(0.0)
        for k in range(per):
            i = simt.thread.block_column(k)
            d = v[k] - mean if i.col < x.shape[1] else fl.f32(0.0)
            q += d * d
        rstd = fl.math.rsqrt(simt.block.reduce(q, "sum") / cols + eps)
        for k in range(per):
            i = simt.thread.block_column(k)
            if i.col < out.shape[1]:
                out[i] = (v[k] - mean) * rstd * g[k] + h[k]

    return {
        "softmax": softmax_registers,
        "rms_norm": rms_norm_registers,
        "layer_norm": layer_norm_registers,
    }


ROW_KERNELS = make_row_kernels(ROW_THREADS)
softmax, rms_norm, layer_norm = (ROW_KERNELS[n] for n in ("softmax", "rms_norm", "layer_norm"))
REGISTER_KERNELS = make_register_kernels(ROW_REG_THREADS, ROW_REG_PER)
softmax_registers, rms_norm_registers, layer_norm_registers = (
    REGISTER_KERNELS[n] for n in ("softmax", "rms_norm", "layer_norm")
)


def row_kernel(name: str, cols: int) -> tuple[simt.Kernel, int]:
    """The SIMT kernel of row case `name` for rows of `cols` columns, and its block size: chunk
    copies (kernels_simt_chunks.py) for rows of whole chunks that fit, else registers, else
    `block_stride`."""
    if cols <= CHUNK_COLS and cols % CHUNK_WIDTH == 0:
        return CHUNK_KERNELS[name], CHUNK_THREADS
    if cols <= ROW_REG_COLS:
        return REGISTER_KERNELS[name], ROW_REG_THREADS
    return ROW_KERNELS[name], ROW_THREADS


# The GEMM's tile: a block computes GEMM_TILE x GEMM_TILE elements of c with GEMM_TILE x GEMM_ROWS
# threads, GEMM_TILE / GEMM_ROWS of them each (rows r, r + GEMM_ROWS, ... of one column); the K
# step is GEMM_TILE too. Two f32 tiles in shared memory: 2 * 64 * 64 * 4 = 32 KiB of the 48.
GEMM_TILE = 64
GEMM_ROWS = 4
GEMM_PER = GEMM_TILE // GEMM_ROWS


@simt.device
def tile_element(x, r, c):
    """x[r, c] as f32, or 0 past x's edges: the load at the clamped index, then the choice (a
    load behind a branch waits for it; this way a thread's loads issue together)."""
    e = fl.f32(x[min(r, x.shape[0] - 1), min(c, x.shape[1] - 1)])
    return e if r < x.shape[0] and c < x.shape[1] else fl.f32(0.0)


def make_gemm(dt: DType) -> simt.Kernel:
    """c (m x n) = a (m x k) @ b (k x n) over `dt` operands (2-D, row-major), f32 sums, through
    shared-memory tiles (the module doc); launch `[(ceil(n / GEMM_TILE), ceil(m / GEMM_TILE)),
    (GEMM_TILE, GEMM_ROWS)]` (`gemm_grid`). Every dtype's kernel is named `gemm` (as the
    examples' factories name theirs); the module names below and the CUDA C++ twins carry the
    dtype."""

    @simt.kernel(block=(GEMM_TILE, GEMM_ROWS))
    def gemm(a: simt.Slice[dt, 2], b: simt.Slice[dt, 2], c: simt.DisjointSlice[dt, 2]):
        sa = simt.shared.array((GEMM_TILE, GEMM_TILE), fl.f32)  # a[row0 + r, k0 + j]
        sb = simt.shared.array((GEMM_TILE, GEMM_TILE), fl.f32)  # b[k0 + j, col0 + c]
        acc = simt.local.array(GEMM_PER, fl.f32)
        for s in range(GEMM_PER):
            acc[s] = 0.0
        row0 = simt.blockIdx.y * GEMM_TILE
        col0 = simt.blockIdx.x * GEMM_TILE
        ty = simt.threadIdx.y
        tx = simt.threadIdx.x
        for step in range((a.shape[1] + GEMM_TILE - 1) // GEMM_TILE):
            k0 = step * GEMM_TILE
            for s in range(GEMM_PER):
                t = simt.thread.block_index_2d(s)  # this thread's slot (ty + s * GEMM_ROWS, tx)
                sa[t] = tile_element(a, row0 + t.row, k0 + t.col)
                sb[t] = tile_element(b, k0 + t.row, col0 + t.col)
            simt.syncthreads()  # every slot written: any may be read
            for j in range(GEMM_TILE):
                bj = sb[j, tx]
                for s in range(GEMM_PER):
                    acc[s] = fl.math.fma(sa[ty + s * GEMM_ROWS, j], bj, acc[s])  # one rounding
            simt.syncthreads()  # every read done before the next step overwrites the tiles
        for s in range(GEMM_PER):
            g = simt.thread.tile_index_2d(s, GEMM_TILE)  # (row0 + ty + s * GEMM_ROWS, col0 + tx)
            if g.row < c.shape[0] and g.col < c.shape[1]:
                c[g] = dt(acc[s])

    return gemm


def gemm_grid(m: int, n: int) -> tuple[int, int]:
    """The grid of `make_gemm`'s kernels for an m x n c: one block per GEMM_TILE x GEMM_TILE tile."""
    return (n + GEMM_TILE - 1) // GEMM_TILE, (m + GEMM_TILE - 1) // GEMM_TILE


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
