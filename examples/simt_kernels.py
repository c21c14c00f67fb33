"""Example SIMT kernels: the corpus the tests run on the simulator, through ptxas, and on the GPU."""

from __future__ import annotations

import math

import fearless as fl
from fearless import simt


@simt.kernel(block=256)
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel
def saxpy(
    alpha: fl.f32, x: simt.Slice[fl.f32], y: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]
):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


@simt.device
def clamp(v: fl.f32, lo: fl.f32, hi: fl.f32) -> fl.f32:
    return min(max(v, lo), hi)


@simt.kernel
def stencil3(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """out[i] = mean of x[i-1..i+1], clamped to [-1, 1]; edges copy x."""
    i = simt.thread.index_1d()
    n = len(out)
    if i >= n:
        return
    if i == 0 or i == n - 1:
        out[i] = x[i]
        return
    out[i] = clamp((x[i - 1] + x[i] + x[i + 1]) / 3.0, -1.0, 1.0)


@simt.kernel
def row_sum(m: simt.Slice[fl.f64], cols: int, out: simt.DisjointSlice[fl.f64]):
    """out[r] = sum of row r of a row-major matrix with `cols` columns."""
    r = simt.thread.index_1d()
    if r < len(out):
        s = 0.0
        base = int(r) * cols
        for k in range(cols):
            s += m[base + k]
        out[r] = s


@simt.kernel
def int_ops(a: simt.Slice[fl.i32], b: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    """Python semantics of // and % on signed ints, bit operations, wrapping arithmetic."""
    i = simt.thread.index_1d()
    if i < len(out):
        x = a[i]
        y = b[i]
        out[i] = (x // y) * 7 + (x % y) + ((x ^ y) & 0xFF) - (x >> 2) + (y << 1) + x * y


@simt.kernel
def collatz_steps(start: simt.Slice[fl.i64], out: simt.DisjointSlice[fl.i64]):
    """Data-dependent while loops with break and continue: per-thread trip counts diverge."""
    i = simt.thread.index_1d()
    if i < len(out):
        n = start[i]
        steps = 0
        while True:
            if n == 1:
                break
            steps += 1
            if n % 2 == 0:
                n = n // 2
                continue
            n = 3 * n + 1
        out[i] = steps


@simt.kernel
def softplus(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        v = x[i]
        out[i] = math.log1p(math.exp(-abs(v))) + max(v, 0.0)


@simt.kernel
def casts(
    x: simt.Slice[fl.f32], out_i: simt.DisjointSlice[fl.i32], out_u: simt.DisjointSlice[fl.u32]
):
    i = simt.thread.index_1d()
    if i < len(out_i):
        out_i[i] = fl.i32(x[i])
        out_u[i] = fl.u32(fl.i32(x[i]))


@simt.kernel
def gather(src: simt.Slice[fl.f32], idx: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
    """Reads src at data-dependent positions: each read is bounds-checked on the device."""
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = src[idx[i]]


# ------------------------------------------------------------------------------ 2-D kernels
# 2-D arrays are row-major; `t = simt.thread.index_2d()` is the 2-D witness: `t.row` follows
# the launch's y axis and `t.col` its x axis, and only `c[t]` opens a 2-D DisjointSlice.


@simt.kernel
def matadd(a: simt.Slice[fl.f32, 2], b: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
    """c = a + b; guarded by each operand's shape, so no check remains on the device."""
    t = simt.thread.index_2d()
    rows = t.row < c.shape[0] and t.row < a.shape[0] and t.row < b.shape[0]
    if rows and t.col < c.shape[1] and t.col < a.shape[1] and t.col < b.shape[1]:
        c[t] = a[t] + b[t]


@simt.kernel
def transpose(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """out (cols x rows) = x (rows x cols) transposed: each thread writes its own out[t]."""
    t = simt.thread.index_2d()
    if t.row < out.shape[0] and t.col < out.shape[1]:
        out[t] = x[t.col, t.row]


@simt.kernel
def matmul(a: simt.Slice[fl.f32, 2], b: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
    """c (m x n) = a (m x k) @ b (k x n), one output element per thread, summed in k order."""
    t = simt.thread.index_2d()
    if t.row >= c.shape[0]:
        return
    if t.col >= c.shape[1]:
        return
    acc = fl.f32(0.0)
    for k in range(a.shape[1]):
        acc += a[t.row, k] * b[k, t.col]
    c[t] = acc


TPB = 16  # shared_matmul's tile: a block of TPB x TPB threads


@simt.kernel(block=(TPB, TPB))
def shared_matmul(
    a: simt.Slice[fl.f32, 2], b: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]
):
    """numba's shared-memory matmul (`fast_matmul` of its docs): each block stages a TPB x TPB
    tile of a and of b in shared memory per step of k, every thread writing its own slot, then
    after the barrier reads the tiles' rows and columns (zeros past the edges); the sums run in
    k order, as `matmul`'s."""
    sa = simt.shared.array((TPB, TPB), fl.f32)
    sb = simt.shared.array((TPB, TPB), fl.f32)
    t = simt.thread.block_index_2d()  # (ty, tx): this thread's slot of each tile
    g = simt.thread.index_2d()  # its element of c
    acc = fl.f32(0.0)
    for i in range((a.shape[1] + TPB - 1) // TPB):
        ac, br = i * TPB + t.col, i * TPB + t.row
        if g.row < a.shape[0] and ac < a.shape[1]:
            sa[t] = a[g.row, ac]
        else:
            sa[t] = 0.0
        if br < b.shape[0] and g.col < b.shape[1]:
            sb[t] = b[br, g.col]
        else:
            sb[t] = 0.0
        simt.syncthreads()  # every slot written: any may be read
        for j in range(TPB):
            acc += sa[t.row, j] * sb[j, t.col]
        simt.syncthreads()  # every read done before the next step overwrites the tiles
    if g.row < c.shape[0] and g.col < c.shape[1]:
        c[g] = acc


@simt.kernel
def histogram(x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32]):
    """counts[b] = how many x[i] == b; every thread adds 1 to the bin its element names."""
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(counts, x[i], 1)  # any bin, bounds-checked; returns the old count


@simt.kernel(requires="len(a) == len(b)")
def dot(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], out: simt.AtomicSlice[fl.f32], per: int):
    """out[0] += a . b: each thread sums `per` consecutive products, then adds its partial sum."""
    i = simt.thread.index_1d()
    start = int(i) * per
    acc = fl.f32(0.0)
    for k in range(start, min(start + per, len(a))):
        acc += a[k] * b[k]
    simt.atomic.add(out, 0, acc)


@simt.kernel
def scale_positive(alpha: float, x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """out = alpha * x where x > 0, else x, for any launch: each thread walks t, t + G, ...
    (G threads in all). `alpha: float` takes the type of `x[i]`, as a literal would."""
    for i in simt.thread.grid_stride(len(out)):
        out[i] = alpha * x[i] if x[i] > 0.0 else x[i]


@simt.kernel
def thread_ids(out: simt.DisjointSlice[fl.i64]):
    """out[i] = blockIdx.x * 10^6 + threadIdx.x * 10^3 + laneid, for the thread i names: the raw
    coordinates (numba's names) are plain integers, read freely."""
    i = simt.thread.index_1d()
    x, y = simt.grid(2)
    if i < len(out) and x == int(i) and y == 0:
        out[i] = simt.blockIdx.x * 1000000 + simt.threadIdx.x * 1000 + simt.laneid


@simt.kernel
def reverse(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """out[len(out) - 1 - g] = x[g]: another thread's element, so written in an unsafe region
    (still bounds-checked; the kernel is reported unsafe)."""
    g = simt.grid(1)
    if g < len(x):
        with simt.unsafe():
            out[len(out) - 1 - g] = x[g]


# ---------------------------------------------------------------------- run as a script
# `python examples/simt_kernels.py` runs a few kernels (GPU if there is one, else the
# simulator) and prints what it checked against NumPy. Keep this block last in the file.


def main() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    print(f"target: {fl.get_target()}")
    n = 1000
    a = fl.asarray(rng.standard_normal(n).astype(np.float32))
    b = fl.asarray(rng.standard_normal(n).astype(np.float32))
    c = fl.empty_like(a)
    vecadd[math.ceil(n / 256), 256](a, b, c)  # 1-D: blocks of 256 threads cover n elements
    print("vecadd  max error:", np.abs(c.numpy() - (a.numpy() + b.numpy())).max())

    rows, cols = 100, 300
    x = fl.asarray(rng.standard_normal((rows, cols)).astype(np.float32))
    y = fl.asarray(rng.standard_normal((rows, cols)).astype(np.float32))
    z = fl.empty((rows, cols), fl.f32)
    block = (16, 16)  # 2-D: x covers the columns (t.col), y the rows (t.row)
    grid = (math.ceil(cols / block[0]), math.ceil(rows / block[1]))
    matadd[grid, block](x, y, z)
    print("matadd  max error:", np.abs(z.numpy() - (x.numpy() + y.numpy())).max())

    m, k = 64, 48
    p = fl.asarray(rng.standard_normal((m, k)).astype(np.float32))
    q = fl.asarray(rng.standard_normal((k, m)).astype(np.float32))
    r = fl.empty((m, m), fl.f32)
    matmul[(math.ceil(m / 16), math.ceil(m / 16)), (16, 16)](p, q, r)
    print("matmul  max error:", np.abs(r.numpy() - p.numpy() @ q.numpy()).max())

    try:
        vecadd[math.ceil(n / 256), 256](a, b, a)  # fearless: ignore[E0502] (on purpose)
    except fl.BorrowError as exc:
        print("aliased launch refused:", exc.message)


if __name__ == "__main__":
    main()
