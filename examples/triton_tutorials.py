"""Triton's tutorials (github.com/triton-lang/triton, `python/tutorials/`) written in fearless
Tile: the same algorithms, tiled the same way, as fearless kernels.

| tutorial                    | here                                                       |
|-----------------------------|------------------------------------------------------------|
| 01-vector-add.py            | `add_kernel`; host `add`                                   |
| 02-fused-softmax.py         | `make_softmax` (persistent: programs walk rows); `softmax` |
| 03-matrix-multiplication.py | `make_matmul` (grouped order, fused leaky_relu); `matmul`  |
| 04-low-memory-dropout.py    | `seeded_dropout_kernel`; host `seeded_dropout`             |
| 05-layer-norm.py            | `make_layer_norm_fwd`; `layer_norm_fwd`                    |
|                             | `make_layer_norm_bwd_dx` (spin lock per group of rows),    |
|                             | `make_layer_norm_bwd_dwdb`; host `layer_norm_bwd`          |

Where a Triton program computes pointers and masks (`X + row * stride + cols`, `mask=cols <
N`), the fearless kernel loads its tile of a tensor and the padding stands for the mask; where
it stores at `program_id`, the fearless kernel stores its own tile of a `tile.Part`, so the
grid is the output's partition. A persistent program (02's `tl.range(start, n_rows, step)`)
walks its tiles with `for t in y.tiles()`, on the grid `kernel.launch(grid, ...)` is given.

05's backward adds its rows' dW and dB into GROUP_SIZE_M partial buffers that rows share,
behind one spin lock per buffer (`atomic_cas` to take it, plain loads and stores inside,
`atomic_xchg` to give it back). The buffers and locks are `tile.Atomic` parameters, and the
critical section stands inside `with tile.unsafe():`, the only place a plain read of a
`tile.Atomic` is allowed: the lock, not the compiler, keeps those accesses apart.

    python examples/triton_tutorials.py    # runs each one (GPU if usable, else the simulator)
"""

import math

import numpy as np

import fearless as fl
from fearless import tile


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _programs() -> int:
    """How many persistent programs 02's softmax starts: a wave of the GPU (its SM count, as
    the tutorial's occupancy sums to), 4 on the simulator."""
    if fl.get_target() != "cuda":
        return 4
    from fearless.runtime import driver

    return driver.device_info().sm_count * 4


# ------------------------------------------------------------------------- 01 vector add


@tile.kernel
def add_kernel(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) + tile.load_like(y, out))


def add(x, y, block_size=1024):
    out = fl.empty(x.shape, dtype=fl.f32)
    part = out.partition((block_size,))
    add_kernel(part, x, y)
    return part.unpartition()


# ----------------------------------------------------------------------- 02 fused softmax


def make_softmax(dt):
    @tile.kernel
    def softmax_kernel(y: tile.Part[dt], x: tile.Tensor[dt]):
        for t in y.tiles():  # rows start, start + programs, ...
            row = tile.load_like(x, t, padding=-math.inf).astype(fl.f32)
            row_minus_max = row - tile.max(row, axis=1, keepdims=True)
            numerator = tile.exp(row_minus_max)
            denominator = tile.sum(numerator, axis=1, keepdims=True)
            t.store((numerator / denominator).astype(dt))

    return softmax_kernel


_SOFTMAX = {}


def softmax(x):
    n_rows, n_cols = x.shape
    kernel = _SOFTMAX.setdefault(x.dtype, make_softmax(x.dtype))
    y = fl.empty(x.shape, dtype=x.dtype)
    part = y.partition((1, next_pow2(n_cols)))
    kernel.launch(min(_programs(), n_rows), part, x)
    return part.unpartition()


# -------------------------------------------------------------------------------- 03 matmul


def make_matmul(dt, activation=""):
    """C = A @ B (f32 sums, C in `dt`), then `activation` ("leaky_relu" or none) fused."""

    @tile.kernel
    def matmul_kernel(
        c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]
    ):
        BM, BN = c.shape
        pid_m, pid_n = c.index
        acc = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.num_tiles(a, 1, (BM, BK))):  # the K tail reads zeros, as the mask
            at = tile.load(a, (pid_m, k), (BM, BK))
            bt = tile.load(b, (k, pid_n), (BK, BN))
            acc = tile.mma(at, bt, acc)
        if activation == "leaky_relu":  # compile-time
            acc = tile.where(acc >= 0, acc, 0.01 * acc)
        c.store(acc.astype(dt))

    return matmul_kernel


_MATMUL = {}


def matmul(a, b, activation="", tiles=(128, 256, 64), group_size_m=8):
    """The tutorial's host: C (M, N) in A's dtype, the program order grouped by
    `group_size_m` rows of tiles (its L2 reuse), tile shape (BM, BN, BK)."""
    (m, k), (k2, n) = a.shape, b.shape
    assert k == k2, "incompatible dimensions"
    bm, bn, bk = tiles
    kernel = _MATMUL.setdefault((a.dtype, activation), make_matmul(a.dtype, activation))
    c = fl.empty((m, n), dtype=a.dtype)
    part = c.partition((bm, bn), order=tile.grouped(group_size_m))
    kernel(part, a, b, bk)
    return part.unpartition()


# ------------------------------------------------------------------- 04 low-memory dropout


@tile.kernel
def seeded_dropout_kernel(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], p: fl.f32, seed: fl.i32):
    (BLOCK,) = out.shape
    offsets = out.index[0] * BLOCK + tile.arange(BLOCK)
    xt = tile.load_like(x, out)
    random = tile.rand(seed, offsets)  # Philox, as tl.rand: the same seed gives the same mask
    out.store(tile.where(random > p, xt / (1 - p), 0.0))


def seeded_dropout(x, p, seed, block_size=1024):
    out = fl.empty(x.shape, dtype=fl.f32)
    part = out.partition((block_size,))
    seeded_dropout_kernel(part, x, p, seed)
    return part.unpartition()


# ---------------------------------------------------------------------------- 05 layer norm


def make_layer_norm_fwd(dt):
    @tile.kernel
    def layer_norm_fwd(
        y: tile.Part[dt],
        mean: tile.Part[fl.f32],
        rstd: tile.Part[fl.f32],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        b: tile.Tensor[dt],
        eps: fl.f32,
    ):
        _, BLOCK = y.shape
        n = x.shape[1].astype(fl.f32)
        v = tile.load_like(x, y).astype(fl.f32)  # one row; zeros past N
        mu = tile.sum(v, axis=1, keepdims=True) / n
        xmean = tile.where(tile.arange(BLOCK)[None, :] < x.shape[1], v - mu, 0.0)
        var = tile.sum(xmean * xmean, axis=1, keepdims=True) / n
        r = 1.0 / tile.sqrt(var + eps)
        mean.store(mu.reshape((1,)))
        rstd.store(r.reshape((1,)))
        wt = tile.load(w, (0,), (BLOCK,)).astype(fl.f32)
        bt = tile.load(b, (0,), (BLOCK,)).astype(fl.f32)
        y.store((xmean * r * wt + bt).astype(dt))

    return layer_norm_fwd


def make_layer_norm_bwd_dx(dt, GROUP_SIZE_M):
    """dx of one row, and the row's dy * xhat and dy added into partial buffer
    `row % GROUP_SIZE_M` of dw and db under that buffer's lock (locks[i]; locks[GROUP_SIZE_M
    + i] counts whether the buffer has been written)."""

    @tile.kernel
    def layer_norm_bwd_dx(
        dx: tile.Part[dt],
        dw: tile.Atomic[dt],
        db: tile.Atomic[dt],
        locks: tile.Atomic[fl.i32],
        dy: tile.Tensor[dt],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        mean: tile.Tensor[fl.f32],
        rstd: tile.Tensor[fl.f32],
    ):
        _, BLOCK = dx.shape
        row = dx.index[0]
        n = x.shape[1]
        cols = tile.arange(BLOCK)
        inside = cols < n
        lock_id = row % GROUP_SIZE_M
        v = tile.load_like(x, dx).astype(fl.f32).reshape((BLOCK,))
        g = tile.load_like(dy, dx).astype(fl.f32).reshape((BLOCK,))
        wt = tile.load(w, (0,), (BLOCK,)).astype(fl.f32)
        mu = tile.load(mean, (row,), (1,))
        r = tile.load(rstd, (row,), (1,))
        xhat = tile.where(inside, (v - mu) * r, 0.0)
        wdy = tile.where(inside, wt * g, 0.0)
        mean1 = tile.sum(xhat * wdy, axis=0) / n.astype(fl.f32)
        mean2 = tile.sum(wdy, axis=0) / n.astype(fl.f32)
        dx.store(((wdy - (xhat * mean1 + mean2)) * r).astype(dt).reshape((1, BLOCK)))
        partial_dw = (g * xhat).astype(dt)
        partial_db = g.astype(dt)
        with tile.unsafe():  # the lock keeps the buffer's readers and writers apart
            while tile.atomic_cas(locks, (lock_id,), 0, 1) == 1:
                pass
            count = tile.gather(locks, (lock_id + GROUP_SIZE_M,))
            if count == 0:  # the first store does not accumulate
                tile.atomic_xchg(locks, (lock_id + GROUP_SIZE_M,), 1)
            else:
                partial_dw = partial_dw + tile.gather(dw, (lock_id, cols), mask=inside)
                partial_db = partial_db + tile.gather(db, (lock_id, cols), mask=inside)
            tile.scatter(dw, (lock_id, cols), partial_dw, mask=inside)
            tile.scatter(db, (lock_id, cols), partial_db, mask=inside)
            tile.atomic_xchg(locks, (lock_id,), 0)  # release

    return layer_norm_bwd_dx


def make_layer_norm_bwd_dwdb(dt):
    """The sum over the partial buffers' rows, a (BLOCK_M, BLOCK_N) tile of them at a time."""

    @tile.kernel
    def layer_norm_bwd_dwdb(
        final_dw: tile.Part[dt],
        final_db: tile.Part[dt],
        dw: tile.Tensor[dt],
        db: tile.Tensor[dt],
        BLOCK_M: tile.Const[int],
    ):
        (BLOCK_N,) = final_dw.shape
        j = final_dw.index[0]
        sw = tile.zeros((BLOCK_M, BLOCK_N), fl.f32)
        sb = tile.zeros((BLOCK_M, BLOCK_N), fl.f32)
        for i in range(tile.num_tiles(dw, 0, (BLOCK_M, BLOCK_N))):
            sw = sw + tile.load(dw, (i, j), (BLOCK_M, BLOCK_N)).astype(fl.f32)
            sb = sb + tile.load(db, (i, j), (BLOCK_M, BLOCK_N)).astype(fl.f32)
        final_dw.store(tile.sum(sw, axis=0).astype(dt))
        final_db.store(tile.sum(sb, axis=0).astype(dt))

    return layer_norm_bwd_dwdb


def layer_norm_fwd(x, weight, bias, eps=1e-5):
    """(y, mean, rstd) of rows of x, one row a program (the tutorial's fused forward)."""
    m, n = x.shape
    block = next_pow2(n)
    y, mean, rstd = fl.empty((m, n), dtype=x.dtype), fl.empty(m), fl.empty(m)
    yp, mp, rp = y.partition((1, block)), mean.partition((1,)), rstd.partition((1,))
    make_layer_norm_fwd(x.dtype)(yp, mp, rp, x, weight, bias, eps)
    return yp.unpartition(), mp.unpartition(), rp.unpartition()


def group_size_m(n):
    """The tutorial's heuristic: more partial buffers for narrower rows."""
    if n <= 1024:
        return 256
    if n <= 4096:
        return 128
    return 96 if n <= 8192 else 64


def layer_norm_bwd(dy, x, weight, mean, rstd, group=None):
    """(dx, dw, db) of layer_norm, dw and db through the partial buffers and their sum."""
    m, n = x.shape
    group = group or group_size_m(n)
    block = next_pow2(n)
    dx = fl.empty((m, n), dtype=x.dtype)
    partial_dw = fl.zeros((group, n), dtype=x.dtype)
    partial_db = fl.zeros((group, n), dtype=x.dtype)
    locks = fl.zeros(2 * group, dtype=fl.i32)
    dxp = dx.partition((1, block))
    make_layer_norm_bwd_dx(x.dtype, group)(
        dxp, partial_dw, partial_db, locks, dy, x, weight, mean, rstd
    )
    dw, db = fl.empty(n, dtype=x.dtype), fl.empty(n, dtype=x.dtype)
    dwp, dbp = dw.partition((128,)), db.partition((128,))
    make_layer_norm_bwd_dwdb(x.dtype)(dwp, dbp, partial_dw, partial_db, 32)
    return dxp.unpartition(), dwp.unpartition(), dbp.unpartition()


# ------------------------------------------------------------------------------------ main


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"target: {fl.get_target()}")
    n = 98432
    x, y = (rng.random(n, dtype=np.float32) for _ in range(2))
    got = add(fl.asarray(x), fl.asarray(y)).numpy()
    print(f"01 vector add: max error {np.abs(got - (x + y)).max():.1e}")
    xs = rng.standard_normal((1823, 781), dtype=np.float32)
    e = np.exp(xs - xs.max(1, keepdims=True))
    got = softmax(fl.asarray(xs)).numpy()
    print(f"02 fused softmax: max error {np.abs(got - e / e.sum(1, keepdims=True)).max():.1e}")
    a = rng.standard_normal((512, 512), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((512, 512), dtype=np.float32).astype(np.float16)
    got = matmul(fl.asarray(a), fl.asarray(b)).numpy().astype(np.float32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    print(f"03 matmul: rel error {np.linalg.norm(got - want) / np.linalg.norm(want):.1e}")
    xd = rng.standard_normal(10, dtype=np.float32)
    o1, o2 = (seeded_dropout(fl.asarray(xd), 0.5, 123).numpy() for _ in range(2))
    print(f"04 dropout: same seed, same mask: {np.array_equal(o1, o2)}")
    m, n = 1151, 8192
    xl = (-2.3 + 0.5 * rng.standard_normal((m, n))).astype(np.float32)
    w, bias = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    yl, mean, rstd = layer_norm_fwd(fl.asarray(xl), fl.asarray(w), fl.asarray(bias))
    mu, var = xl.mean(1, keepdims=True), xl.var(1, keepdims=True)
    want = (xl - mu) / np.sqrt(var + 1e-5) * w + bias
    print(f"05 layer norm forward: max error {np.abs(yl.numpy() - want).max():.1e}")
    dy = (0.1 * rng.standard_normal((m, n))).astype(np.float32)
    _dx, dw, db = layer_norm_bwd(fl.asarray(dy), fl.asarray(xl), fl.asarray(w), mean, rstd)
    xhat = (xl - mu) / np.sqrt(var + 1e-5)
    print(
        f"05 layer norm backward: dw error {np.abs(dw.numpy() - (dy * xhat).sum(0)).max():.1e}, "
        f"db error {np.abs(db.numpy() - dy.sum(0)).max():.1e}"
    )


if __name__ == "__main__":
    main()
