"""A held-out program campaign for the Tile track: kernels a user coming from cuTile Python,
TileGym or the Triton tutorials would plausibly write, none of them copied from examples/ or
the other tests. Each runs on the simulator against NumPy, and the ones that run compile
through tileiras (skipped where tileiras is not installed). What a user would expect to work
and does not is an xfail with the diagnosis; a feature refused with a clear message is
asserted as such. The `-m gpu` tests at the end run a few kernels on the simulator and on the
GPU and compare (deselected by default; on a GPU machine without tileiras, compile here with
FEARLESS_GPU_CACHE=DIR and carry DIR): they are xfails where the two were seen to differ."""

import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from fearless.errors import PaddedReductionWarning
from support.tile_random_kernels import rand_ref


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@pytest.fixture(autouse=True)
def _gpu_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """FEARLESS_GPU_CACHE=DIR keeps the cubins in DIR, for the `-m gpu` tests below on a GPU
    machine without tileiras (as tests/test_tile_compile.py does)."""
    folder = os.environ.get("FEARLESS_GPU_CACHE")
    if folder:
        monkeypatch.setenv("FEARLESS_CACHE_DIR", str(Path(folder).resolve()))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(shape: Any, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(np.float32)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# ----------------------------------------------------------------------------------- kernels


@tile.kernel
def scale_shift(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], g: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]
):
    """out = x * g[None, :] + b[:, None]: a row vector and a column vector broadcast."""
    BM, BN = out.shape
    i, j = out.index
    t = tile.load_like(x, out)
    out.store(t * tile.load(g, (j,), (BN,)) + tile.load(b, (i,), (BM,))[:, None])


@tile.kernel
def bias_gelu(out: tile.Part[fl.bf16], x: tile.Tensor[fl.bf16], bias: tile.Tensor[fl.bf16]):
    """Fused bias + tanh-GELU: bf16 in and out, f32 arithmetic."""
    _, BN = out.shape
    _, j = out.index
    v = tile.load_like(x, out).astype(fl.f32)
    v = v + tile.load(bias, (j,), (BN,)).astype(fl.f32)[None, :]
    y = 0.5 * v * (1.0 + tile.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))
    out.store(y.astype(fl.bf16))


@tile.kernel
def row_argmax(idx: tile.Part[fl.i32], x: tile.Tensor[fl.f32], N: tile.Const[int]):
    """cuTile Python's `ct.argmax`."""
    (i,) = idx.index
    v = tile.load(x, (i, 0), (idx.shape[0], N), padding=-math.inf)
    idx.store(tile.argmax(v, axis=1))


@tile.kernel
def row_max_with_index(
    mx: tile.Part[fl.f32], idx: tile.Part[fl.i32], x: tile.Tensor[fl.f32], N: tile.Const[int]
):
    """Row max and the first column where it is reached, from max, where and min."""
    BM = mx.shape[0]
    (i,) = mx.index
    v = tile.load(x, (i, 0), (BM, N), padding=-math.inf)
    m = tile.max(v, axis=1, keepdims=True)
    cols = tile.arange(N, fl.i32)[None, :]
    idx.store(tile.min(tile.where(v == m, cols, N), axis=1))
    mx.store(tile.reshape(m, (BM,)))


@tile.kernel
def row_cumsum(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """cuTile Python's `ct.cumsum`."""
    out.store(tile.cumsum(tile.load_like(x, out), axis=1))


@tile.kernel
def row_prefix_sum(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Inclusive prefix sum of each row through a lower-triangular mask and a sum."""
    _, BN = out.shape
    v = tile.load_like(x, out)
    r = tile.arange(BN, fl.i32)
    tri = tile.where(r[None, :] <= r[:, None], 1.0, 0.0)  # tri[k, j] = j <= k
    out.store(tile.sum(v[:, None, :] * tri[None, :, :], axis=2))


@tile.kernel
def row_prod(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], N: tile.Const[int]):
    """cuTile Python's `ct.prod`."""
    (i,) = out.index
    v = tile.load(x, (i, 0), (out.shape[0], N))
    out.store(tile.prod(v, axis=1))


@tile.kernel
def batched_transpose_scale(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], s: tile.Tensor[fl.f32]):
    """out[b] = x[b].T * s[b] on a 3-D partition: the tile transposed with tile.permute."""
    b, i, j = out.index
    _, BM, BN = out.shape
    v = tile.load(x, (b, j, i), (1, BN, BM))
    sc = tile.load(s, (b,), (1,))
    out.store(tile.permute(v, (0, 2, 1)) * sc[:, None, None])


@tile.kernel
def head_softmax(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], hb: tile.Tensor[fl.f32]):
    """(batch, heads, seq, dim): a per-head bias gathered by the head index, softmax over dim."""
    _, h, _, _ = out.index
    v = tile.load_like(x, out, padding=-math.inf) + tile.gather(hb, h)
    e = tile.exp(v - tile.max(v, axis=3, keepdims=True))
    out.store(e / tile.sum(e, axis=3, keepdims=True))


@tile.kernel
def persistent_clamp(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], lo: fl.f32, hi: fl.f32):
    """A persistent kernel: each block walks its tiles; the grid comes from the host."""
    for t in out.tiles():
        t.store(tile.minimum(tile.maximum(tile.load_like(x, t), lo), hi))


@tile.kernel
def l2_normalize_rows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], CH: tile.Const[int]):
    """Rows too long for one tile: a sum of squares over chunks, then the scaled chunks."""
    BM, _ = out.shape
    ss = tile.zeros((BM, 1), fl.f32)
    for c in out.chunks((BM, CH)):
        v = tile.load_like(x, c)
        ss = ss + tile.sum(v * v, axis=1, keepdims=True)
    inv = tile.rsqrt(ss + 1e-12)
    for c in out.chunks((BM, CH)):
        c.store(tile.load_like(x, c) * inv)


@tile.kernel
def row_sums(out: tile.Part[fl.f32], x: tile.Tensor[fl.bf16], BK: tile.Const[int]):
    """A reduction output: bf16 rows summed in f32 over a loop of column tiles."""
    (BM,) = out.shape
    (i,) = out.index
    acc = tile.zeros((BM,), fl.f32)
    for k in range(tile.num_tiles(x, 1, (BM, BK))):
        acc = acc + tile.sum(tile.load(x, (i, k), (BM, BK)).astype(fl.f32), axis=1)
    out.store(acc)


@tile.kernel
def embed_with_positions(
    out: tile.Part[fl.f32],
    tok: tile.Tensor[fl.f16],
    pos: tile.Tensor[fl.f16],
    ids: tile.Tensor[fl.i32],
):
    """out[b, s, :] = tok[ids[b, s], :] + pos[s, :]: a 3-D gather, f16 tables, f32 out."""
    _, BS, BD = out.shape
    b, s, d = out.index
    rows = tile.load(ids, (b, s), (1, BS))
    cols = tile.arange(BD, fl.i32) + d * BD
    e = tile.gather(tok, (rows[:, :, None], cols[None, None, :]))
    p = tile.load(pos, (s, d), (BS, BD))
    out.store(e.astype(fl.f32) + p.astype(fl.f32)[None, :, :])


@tile.kernel
def weighted_histogram(
    hist: tile.Atomic[fl.f32],
    x: tile.Tensor[fl.f32],
    w: tile.Tensor[fl.f32],
    lo: fl.f32,
    width: fl.f32,
    NB: tile.Const[int],
    BLOCK: tile.Const[int],
):
    """hist[floor((x - lo) / width)] += w, values outside [lo, lo + NB * width) masked off."""
    i = tile.block_id(0)
    v = tile.load(x, (i,), (BLOCK,), padding=math.nan)
    wt = tile.load(w, (i,), (BLOCK,))
    b = tile.floor((v - lo) / width).astype(fl.i32)
    tile.atomic_add(hist, b, wt, mask=(v >= lo) & (b < NB))


@tile.kernel
def dropout_2d(
    out: tile.Part[fl.f32], keep: tile.Part[fl.i8], x: tile.Tensor[fl.f32], p: fl.f32, seed: fl.i64
):
    """Dropout on 2-D tiles, one Philox counter per element (its flat index)."""
    BM, BN = out.shape
    i, j = out.index
    r = tile.arange(BM, fl.i32)[:, None] + i * BM
    c = tile.arange(BN, fl.i32)[None, :] + j * BN
    k = tile.rand(seed, r * x.shape[1] + c) >= p
    keep.store(k.astype(fl.i8))
    out.store(tile.where(k, tile.load_like(x, out) / (1.0 - p), 0.0))


@tile.kernel
def deinterleave(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Each row [a0 b0 a1 b1 ...] -> [a0 a1 ... b0 b1 ...], by reshape and permute."""
    BM, BN = out.shape
    v = tile.load_like(x, out).reshape((BM, BN // 2, 2))
    out.store(tile.permute(v, (0, 2, 1)).reshape((BM, BN)))


@tile.kernel
def transpose_in_registers(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out = x.T with tile.transpose of the loaded tile (not the load's order=)."""
    i, j = out.index
    BM, BN = out.shape
    out.store(tile.transpose(tile.load(x, (j, i), (BN, BM))))


@tile.kernel
def max_pool_2x2(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """2x2 max pooling of an image with odd sides (ceil mode): -inf padding at the edges."""
    BM, BN = out.shape
    i, j = out.index
    v = tile.load(x, (i, j), (2 * BM, 2 * BN), padding=-math.inf)
    out.store(tile.max(v.reshape((BM, 2, BN, 2)), axis=(1, 3)))


@tile.function
def rms_normalize(v, w, eps):
    ms = tile.sum(v * v, axis=1, keepdims=True) / v.shape[1]
    return v * tile.rsqrt(ms + eps) * w[None, :]


@tile.kernel
def qk_norm(
    qo: tile.Part[fl.f32],
    ko: tile.Part[fl.f32],
    q: tile.Tensor[fl.f32],
    k: tile.Tensor[fl.f32],
    wq: tile.Tensor[fl.f32],
    wk: tile.Tensor[fl.f32],
):
    """QK-norm: one `@tile.function` helper called twice, for q and for k."""
    _, D = qo.shape
    qo.store(rms_normalize(tile.load_like(q, qo), tile.load(wq, (0,), (D,)), 1e-6))
    ko.store(rms_normalize(tile.load_like(k, ko), tile.load(wk, (0,), (D,)), 1e-6))


@tile.kernel
def activation(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], ACT: tile.Const[int], SLOPE: tile.Const[float]
):
    """The activation picked at compile time: 0 relu, 1 leaky relu (SLOPE), else silu."""
    v = tile.load_like(x, out)
    if ACT == 0:
        y = tile.maximum(v, 0.0)
    elif ACT == 1:
        y = tile.where(v > 0.0, v, v * SLOPE)
    else:
        y = v * tile.sigmoid(v)
    out.store(y)


@tile.kernel
def gemv(y: tile.Part[fl.f32], a: tile.Tensor[fl.f16], x: tile.Tensor[fl.f16], BK: tile.Const[int]):
    """y = A @ x, f16 in, f32 accumulation, K not a multiple of BK."""
    (BM,) = y.shape
    (i,) = y.index
    acc = tile.zeros((BM,), fl.f32)
    for k in range(tile.cdiv(a.shape[1], BK)):
        t = tile.load(a, (i, k), (BM, BK)).astype(fl.f32)
        v = tile.load(x, (k,), (BK,)).astype(fl.f32)
        acc = acc + tile.sum(t * v[None, :], axis=1)
    y.store(acc)


@tile.kernel
def linear_bias_relu(
    c: tile.Part[fl.bf16],
    a: tile.Tensor[fl.bf16],
    w: tile.Tensor[fl.bf16],
    bias: tile.Tensor[fl.f32],
    BK: tile.Const[int],
):
    """relu(A @ W + bias): bf16 mma into an f32 accumulator; M, N and K all leave edge tiles."""
    BM, BN = c.shape
    i, j = c.index
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 1, (BM, BK))):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
    acc = acc + tile.load(bias, (j,), (BN,))[None, :]
    c.store(tile.maximum(acc, 0.0).astype(fl.bf16))


@tile.kernel
def unpack_int4(out: tile.Part[fl.i32], x: tile.Tensor[fl.u32]):
    """out[r, 8 w + k] = (x[r, w] >> 4 k) & 15: eight nibbles per u32 word."""
    BM, BN = out.shape
    i, j = out.index
    words = tile.load(x, (i, j), (BM, BN // 8))
    shifts = tile.arange(8, fl.u32) * 4
    nib = (words[:, :, None] >> shifts[None, None, :]) & 15
    out.store(nib.reshape((BM, BN)).astype(fl.i32))


@tile.kernel
def floor_divmod(q: tile.Part[fl.i32], r: tile.Part[fl.i32], x: tile.Tensor[fl.i32], d: fl.i32):
    """Python's `//` and `%` on signed ints (floor semantics), by a run-time divisor."""
    v = tile.load_like(x, q)
    q.store(v // d)
    r.store(v % d)


@tile.kernel
def conditional_scale(
    out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], n: fl.i32, NEG: tile.Const[int]
):
    """Conditional expressions on a run-time scalar and on a Const, then tile.where."""
    v = tile.load_like(x, out)
    s = 2.0 if n > 10 else 0.5
    v = -v if NEG else v
    out.store(tile.where(v > 0.0, v * s, 0.0))


@tile.kernel
def stencil_3pt(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out[k] = x[k-1] + 2 x[k] + x[k+1], the halo read by gather (zero outside the array)."""
    (B,) = out.shape
    k = tile.arange(B, fl.i32) + out.index[0] * B
    out.store(tile.gather(x, k - 1) + 2.0 * tile.gather(x, k) + tile.gather(x, k + 1))


@tile.kernel
def paged_gather(out: tile.Part[fl.f32], pages: tile.Tensor[fl.f32], table: tile.Tensor[fl.i32]):
    """A paged-KV-cache read: the tile index of the load comes from a block table."""
    BP, D = out.shape
    i, _ = out.index
    out.store(tile.load(pages, (tile.gather(table, i), 0), (BP, D)))


@tile.kernel
def conv3x3(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], w: tile.Tensor[fl.f32]):
    """A 'same' 3x3 convolution: two nested compile-time loops over the taps, gathers."""
    BM, BN = out.shape
    i, j = out.index
    r = tile.arange(BM, fl.i32)[:, None] + i * BM
    c = tile.arange(BN, fl.i32)[None, :] + j * BN
    acc = tile.zeros((BM, BN), fl.f32)
    for di in range(3):
        for dj in range(3):
            acc = acc + tile.gather(w, (di, dj)) * tile.gather(x, (r + (di - 1), c + (dj - 1)))
    out.store(acc)


@tile.kernel
def compact_positive(
    out: tile.Atomic[fl.f32], count: tile.Atomic[fl.i32], x: tile.Tensor[fl.f32], B: tile.Const[int]
):
    """Stream compaction: the block's base from atomic_add's old value, then a scatter."""
    v = tile.load(x, (tile.block_id(0),), (B,), padding=-math.inf)
    keep = v > 0.0
    k = keep.astype(fl.i32)
    r = tile.arange(B, fl.i32)
    before = tile.sum(tile.where(r[None, :] < r[:, None], k[None, :], 0), axis=1)
    base = tile.atomic_add(count, 0, tile.sum(k))
    tile.scatter(out, base + before, v, mask=keep)


@tile.kernel
def online_argmax(
    mx: tile.Part[fl.f32], am: tile.Part[fl.i32], x: tile.Tensor[fl.f32], BK: tile.Const[int]
):
    """Row max and argmax over a loop of column tiles: two values carried by the loop."""
    (BM,) = mx.shape
    (i,) = mx.index
    best = tile.full((BM,), -math.inf, fl.f32)
    arg = tile.zeros((BM,), fl.i32)
    for k in range(tile.cdiv(x.shape[1], BK)):
        v = tile.load(x, (i, k), (BM, BK), padding=-math.inf)
        m = tile.max(v, axis=1)
        cols = tile.arange(BK, fl.i32)[None, :] + k * BK
        a = tile.min(tile.where(v == m[:, None], cols, 2**30), axis=1)
        better = m > best
        arg = tile.where(better, a, arg)
        best = tile.where(better, m, best)
    mx.store(best)
    am.store(arg)


@tile.kernel
def persistent_rows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], CH: tile.Const[int]):
    """Persistent tiles, each walked in chunks, a run-time `if` on the tile's row."""
    for t in out.tiles():
        i, _ = t.index
        for c in t.chunks((1, CH)):
            v = tile.load_like(x, c)
            if i % 2 == 0:
                c.store(v * 2.0)
            else:
                c.store(-v)


def mean_var(v):
    m = tile.sum(v, axis=1, keepdims=True) / v.shape[1]
    d = v - m
    return m, tile.sum(d * d, axis=1, keepdims=True) / v.shape[1]


@tile.kernel
def standardize(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """A plain helper that returns a tuple (mean, variance)."""
    v = tile.load_like(x, out)
    m, var = mean_var(v)
    out.store((v - m) * tile.rsqrt(var + 1e-5))


@tile.kernel
def phase_wrap(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """x % 1.0 and x // 0.5 on floats: Python's floor semantics."""
    v = tile.load_like(x, out)
    out.store(v % 1.0 + v // 0.5)


@tile.kernel
def int_square(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    v = tile.load_like(x, out)
    out.store(v**2)


@tile.kernel
def bitwise_not(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """cuTile Python's `~x` (ct.bitwise_not) on an integer tile."""
    out.store(~tile.load_like(x, out))


@tile.kernel
def row_max_shift(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """x - max(x, axis=-1): zero padding, so a PaddedReductionWarning at compile time."""
    v = tile.load_like(x, out)
    out.store(v - tile.max(v, axis=-1, keepdims=True))


@tile.kernel
def tile_methods(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """cuTile Python's Tile methods: .transpose(), .item()."""
    i, j = out.index
    BM, BN = out.shape
    s = tile.load(x, (0, 0), (1, 1)).item()
    out.store(tile.load(x, (j, i), (BN, BM)).transpose() * s)


@tile.kernel
def transpose_axes(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """cuTile Python's `ct.transpose(x, axis0, axis1)` on a 3-D tile."""
    b, i, j = out.index
    _, BM, BN = out.shape
    out.store(tile.transpose(tile.load(x, (b, j, i), (1, BN, BM)), 1, 2))


@tile.kernel
def add_column(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    """A new trailing axis written NumPy's way, `v[..., None]`."""
    BM, _ = out.shape
    i, _ = out.index
    out.store(tile.load_like(x, out) + tile.load(b, (i,), (BM,))[..., None])


@tile.kernel
def clamp_below(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Triton's idiom for -inf: float("-inf")."""
    out.store(tile.maximum(tile.load_like(x, out), float("-inf")))


@tile.kernel
def abs_unsigned(out: tile.Part[fl.u8], x: tile.Tensor[fl.u8]):
    """abs of an unsigned tile: the identity (sim/numerics.py)."""
    out.store(abs(tile.load_like(x, out)))


@tile.kernel
def abs_u32(out: tile.Part[fl.u32], x: tile.Tensor[fl.u32]):
    out.store(abs(tile.load_like(x, out)))


@tile.kernel
def to_i8(out: tile.Part[fl.i8], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out).astype(fl.i8))


@tile.kernel
def to_i64(out: tile.Part[fl.i64], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out).astype(fl.i64))


@tile.kernel
def quantize_u8(out: tile.Part[fl.u8], x: tile.Tensor[fl.f32]):
    """f32 -> u8 by astype: truncation toward zero, saturating (sim/numerics.py)."""
    out.store((tile.load_like(x, out) * 255.0).astype(fl.u8))


# ------------------------------------------------------------------------------------ tests


def test_broadcast_row_and_column_vectors_with_edge_tiles() -> None:
    x, g, b = normal((37, 50)), normal(50, 1), normal(37, 2)
    part = fl.empty((37, 50)).partition((16, 32))
    scale_shift(part, fl.asarray(x), fl.asarray(g), fl.asarray(b))
    np.testing.assert_allclose(part.unpartition().numpy(), x * g + b[:, None], rtol=1e-6)


def test_fused_bias_gelu_in_bf16() -> None:
    x = fl.asarray(normal((37, 50))).astype(fl.bf16)
    bias = fl.asarray(normal(50, 1)).astype(fl.bf16)
    part = fl.empty((37, 50), dtype=fl.bf16).partition((8, 64))
    bias_gelu(part, x, bias)
    v = x.numpy().astype(np.float32) + bias.numpy().astype(np.float32)
    want = 0.5 * v * (1 + np.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v**3)))
    got = part.unpartition().numpy().astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_a_host_math_call_on_constants_is_folded() -> None:
    """Issue 33: `math.*` of compile-time numbers runs when the kernel compiles."""

    @tile.kernel
    def gelu_c(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load_like(x, out) * math.sqrt(2.0 / math.pi))

    part = fl.empty(8).partition((8,))
    gelu_c(part, fl.ones(8))
    assert np.array_equal(part.unpartition().numpy(), np.full(8, SQRT_2_OVER_PI, np.float32))


def test_row_argmax() -> None:
    x = normal((10, 20))
    part = fl.empty(10, dtype=fl.i32).partition((4,))
    row_argmax(part, fl.asarray(x), 32)
    assert np.array_equal(part.unpartition().numpy(), x.argmax(1))


def test_row_max_with_index_first_of_ties() -> None:
    x = normal((10, 20))
    x[3, 5] = x[3, 7] = 100.0  # a tie: the first column wins, as np.argmax
    mx = fl.empty(10).partition((4,))
    idx = fl.empty(10, dtype=fl.i32).partition((4,))
    row_max_with_index(mx, idx, fl.asarray(x), 32)
    assert np.array_equal(idx.unpartition().numpy(), x.argmax(1))
    assert np.array_equal(mx.unpartition().numpy(), x.max(1))


def test_row_cumsum() -> None:
    x = normal((6, 16))
    part = fl.empty((6, 16)).partition((2, 16))
    row_cumsum(part, fl.asarray(x))
    np.testing.assert_allclose(part.unpartition().numpy(), np.cumsum(x, 1), rtol=1e-5, atol=1e-5)


def make_scans(dt: Any) -> Any:
    @tile.kernel
    def scans(out: tile.Part[dt], x: tile.Tensor[dt]):
        """cumsum along the rows, reversed cumprod down the columns, and a 1-d cumsum."""
        v = tile.load_like(x, out)
        BM, BN = out.shape
        flat = tile.cumsum(v.reshape((BM * BN,)), axis=0).reshape((BM, BN))
        out.store(tile.cumsum(v, axis=1) + tile.cumprod(v, axis=0, reverse=True) - flat)

    return scans


def _scans_reference(x: np.ndarray) -> np.ndarray:
    w = x.astype(np.float64)
    rev = np.flip(np.cumprod(np.flip(w, 0), axis=0), 0)
    return np.cumsum(w, 1) + rev - np.cumsum(w.ravel()).reshape(w.shape)


def test_cumsum_and_cumprod_on_the_simulator() -> None:
    x = rng(4).uniform(0.5, 1.5, (8, 16)).astype(np.float32)
    part = fl.empty(x.shape).partition((8, 16))
    make_scans(fl.f32)(part, fl.asarray(x))
    np.testing.assert_allclose(part.unpartition().numpy(), _scans_reference(x), rtol=1e-5)
    xi = np.arange(-64, 64, dtype=np.int32).reshape(8, 16) % 5
    ipart = fl.empty(xi.shape, dtype=fl.i32).partition((8, 16))
    make_scans(fl.i32)(ipart, fl.asarray(xi))
    assert np.array_equal(ipart.unpartition().numpy(), _scans_reference(xi).astype(np.int32))


def test_scans_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    for dt in (fl.f32, fl.bf16, fl.i32):
        args = (fl.zeros((8, 16), dtype=dt).partition((8, 16)), fl.zeros((8, 16), dtype=dt))
        assert cubin(make_scans(dt), *args)


@pytest.mark.gpu
def test_gpu_scans_match_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    x = rng(5).uniform(0.5, 1.5, (8, 16)).astype(np.float32)

    def run() -> np.ndarray:
        part = fl.empty(x.shape).partition((8, 16))
        make_scans(fl.f32)(part, fl.asarray(x))
        return part.unpartition().numpy()

    sim, gpu = sim_and_gpu(run)
    np.testing.assert_allclose(gpu, sim, rtol=1e-5)  # a parallel scan adds in its order


def test_row_prefix_sum_through_a_triangular_mask() -> None:
    x = normal((6, 16))
    part = fl.empty((6, 16)).partition((2, 16))
    row_prefix_sum(part, fl.asarray(x))
    np.testing.assert_allclose(part.unpartition().numpy(), np.cumsum(x, 1), rtol=1e-5, atol=1e-5)


def test_row_prod() -> None:
    x = rng(3).uniform(0.5, 1.5, (8, 16)).astype(np.float32)
    part = fl.empty(8).partition((4,))
    row_prod(part, fl.asarray(x), 16)
    np.testing.assert_allclose(part.unpartition().numpy(), x.prod(1), rtol=1e-5)


def test_a_3d_partition_transposes_each_batch() -> None:
    x = normal((3, 20, 12))
    s = np.array([1.0, -2.0, 0.5], np.float32)
    part = fl.empty((3, 12, 20)).partition((1, 8, 16))
    batched_transpose_scale(part, fl.asarray(x), fl.asarray(s))
    want = np.transpose(x, (0, 2, 1)) * s[:, None, None]
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_a_4d_partition_softmax_with_a_gathered_head_bias() -> None:
    x = normal((2, 3, 10, 24))
    hb = np.array([0.0, 1.0, -3.0], np.float32)
    part = fl.empty(x.shape).partition((1, 1, 4, 32))  # partial tiles on seq and dim
    head_softmax(part, fl.asarray(x), fl.asarray(hb))
    v = x + hb[None, :, None, None]
    e = np.exp(v - v.max(3, keepdims=True))
    want = e / e.sum(3, keepdims=True)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grid", [1, 4, 64])
def test_persistent_clamp_on_a_host_grid(grid: int) -> None:
    x = normal((45, 70)) * 3
    part = fl.full((45, 70), np.nan).partition((16, 32))
    persistent_clamp.launch(grid, part, fl.asarray(x), -1.0, 2.0)
    np.testing.assert_array_equal(part.unpartition().numpy(), np.clip(x, -1.0, 2.0))


def test_chunked_l2_normalize_of_long_rows() -> None:
    x = normal((5, 3000))
    part = fl.empty(x.shape).partition((2, 4096))
    l2_normalize_rows(part, fl.asarray(x), 512)
    want = x / np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)


def test_row_sums_of_bf16_in_f32() -> None:
    x = fl.asarray(normal((9, 300))).astype(fl.bf16)
    part = fl.empty(9).partition((4,))
    row_sums(part, x, 64)
    want = x.numpy().astype(np.float32).sum(1)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-4, atol=1e-4)


def test_token_and_position_embedding() -> None:
    g = rng(4)
    tok = g.standard_normal((50, 24)).astype(np.float16)
    pos = g.standard_normal((12, 24)).astype(np.float16)
    ids = g.integers(0, 50, (3, 12)).astype(np.int32)
    part = fl.empty((3, 12, 24)).partition((1, 8, 16))
    embed_with_positions(part, fl.asarray(tok), fl.asarray(pos), fl.asarray(ids))
    want = tok[ids].astype(np.float32) + pos.astype(np.float32)[None]
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_weighted_histogram_with_float_atomics() -> None:
    g = rng(5)
    x = g.uniform(-1.5, 1.5, 1000).astype(np.float32)
    w = g.uniform(0.0, 1.0, 1000).astype(np.float32)
    hist = fl.zeros(8)
    weighted_histogram.launch(
        math.ceil(1000 / 256), hist, fl.asarray(x), fl.asarray(w), -1.0, 0.25, 8, 256
    )
    bins = np.floor((x + np.float32(1.0)) / np.float32(0.25)).astype(np.int64)
    ok = (x >= -1.0) & (bins < 8)
    want = np.bincount(bins[ok], weights=w[ok], minlength=8)
    np.testing.assert_allclose(hist.numpy(), want, rtol=1e-5)


def test_dropout_2d_matches_philox_whatever_the_tile() -> None:
    x = normal((33, 40)) + 5.0
    offsets = np.arange(33 * 40, dtype=np.uint32).reshape(33, 40)
    want_keep = rand_ref(42, offsets) >= np.float32(0.3)
    for tile_shape in ((8, 16), (32, 8)):
        out = fl.empty(x.shape).partition(tile_shape)
        keep = fl.empty(x.shape, dtype=fl.i8).partition(tile_shape)
        dropout_2d(out, keep, fl.asarray(x), 0.3, 42)
        k = keep.unpartition().numpy().astype(bool)
        assert np.array_equal(k, want_keep)
        want = np.where(k, x / np.float32(0.7), np.float32(0.0))
        np.testing.assert_allclose(out.unpartition().numpy(), want, rtol=1e-6)


def test_deinterleave_by_reshape_and_permute() -> None:
    x = normal((6, 32))
    part = fl.empty(x.shape).partition((2, 32))
    deinterleave(part, fl.asarray(x))
    want = np.concatenate([x[:, 0::2], x[:, 1::2]], axis=1)
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_transpose_in_registers() -> None:
    x = normal((24, 40))
    part = fl.empty((40, 24)).partition((16, 8))
    transpose_in_registers(part, fl.asarray(x))
    np.testing.assert_array_equal(part.unpartition().numpy(), x.T)


def test_max_pool_2x2_of_odd_sides() -> None:
    x = normal((13, 21))
    part = fl.empty((7, 11)).partition((4, 8))
    max_pool_2x2(part, fl.asarray(x))
    padded = np.full((14, 22), -np.inf, np.float32)
    padded[:13, :21] = x
    want = padded.reshape(7, 2, 11, 2).max(axis=(1, 3))
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_a_tile_function_helper_called_twice() -> None:
    q, k, wq, wk = normal((8, 16), 1), normal((8, 16), 2), normal(16, 3), normal(16, 4)
    qo, ko = fl.empty(q.shape).partition((4, 16)), fl.empty(k.shape).partition((4, 16))
    qk_norm(qo, ko, *(fl.asarray(a) for a in (q, k, wq, wk)))

    def ref(v: np.ndarray, w: np.ndarray) -> np.ndarray:
        return v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6) * w

    np.testing.assert_allclose(qo.unpartition().numpy(), ref(q, wq), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ko.unpartition().numpy(), ref(k, wk), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act", [0, 1, 2])
def test_const_int_picks_the_activation(act: int) -> None:
    x = normal(100)
    want = [np.maximum(x, 0), np.where(x > 0, x, np.float32(0.1) * x), x / (1 + np.exp(-x))][act]
    part = fl.empty(100).partition((64,))
    activation(part, fl.asarray(x), act, 0.1)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-6)


def test_gemv_f16_with_f32_accumulation() -> None:
    g = rng(6)
    a = g.standard_normal((37, 100)).astype(np.float16)
    x = g.standard_normal(100).astype(np.float16)
    part = fl.empty(37).partition((16,))
    gemv(part, fl.asarray(a), fl.asarray(x), 32)
    want = a.astype(np.float32) @ x.astype(np.float32)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-4, atol=1e-4)


def test_linear_bias_relu_in_bf16() -> None:
    a = fl.asarray(normal((40, 50), 1)).astype(fl.bf16)
    w = fl.asarray(normal((50, 24), 2)).astype(fl.bf16)
    bias = normal(24, 3)
    part = fl.empty((40, 24), dtype=fl.bf16).partition((16, 16))
    linear_bias_relu(part, a, w, fl.asarray(bias), 16)
    af, wf = a.numpy().astype(np.float32), w.numpy().astype(np.float32)
    want = np.maximum(af @ wf + bias, 0)
    got = part.unpartition().numpy().astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_unpack_int4_nibbles() -> None:
    x = rng(7).integers(0, 2**32, (5, 4), dtype=np.uint64).astype(np.uint32)
    part = fl.empty((5, 32), dtype=fl.i32).partition((4, 16))
    unpack_int4(part, fl.asarray(x))
    shifts = np.arange(8, dtype=np.uint32) * 4
    want = ((x[:, :, None] >> shifts) & 15).reshape(5, 32).astype(np.int32)
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


@pytest.mark.parametrize("d", [7, -3])
def test_floor_division_and_modulo_of_signed_ints(d: int) -> None:
    x = np.arange(-20, 20, dtype=np.int32)
    q = fl.empty(40, dtype=fl.i32).partition((16,))
    r = fl.empty(40, dtype=fl.i32).partition((16,))
    floor_divmod(q, r, fl.asarray(x), d)
    assert np.array_equal(q.unpartition().numpy(), x // d)
    assert np.array_equal(r.unpartition().numpy(), x % d)


@pytest.mark.parametrize(("n", "neg"), [(20, 0), (3, 1)])
def test_conditional_expressions_and_where(n: int, neg: int) -> None:
    x = normal(50)
    part = fl.empty(50).partition((32,))
    conditional_scale(part, fl.asarray(x), n, neg)
    v = -x if neg else x
    want = np.where(v > 0, v * np.float32(2.0 if n > 10 else 0.5), 0)
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_stencil_with_a_gathered_halo() -> None:
    x = normal(100)
    part = fl.empty(100).partition((32,))
    stencil_3pt(part, fl.asarray(x))
    xp = np.pad(x, 1)
    want = xp[:-2] + 2 * xp[1:-1] + xp[2:]
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-6, atol=1e-6)


def test_paged_gather_through_a_block_table() -> None:
    pages = normal((24, 16))
    table = np.array([5, 2, 0, 3], np.int32)
    part = fl.empty((16, 16)).partition((4, 16))
    paged_gather(part, fl.asarray(pages), fl.asarray(table))
    want = np.concatenate([pages[t * 4 : (t + 1) * 4] for t in table])
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_conv3x3_with_nested_loops() -> None:
    x, w = normal((19, 23)), normal((3, 3), 1)
    part = fl.empty(x.shape).partition((8, 16))
    conv3x3(part, fl.asarray(x), fl.asarray(w))
    xp = np.pad(x, 1)
    want = sum(w[a, b] * xp[a : a + 19, b : b + 23] for a in range(3) for b in range(3))
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-5, atol=1e-5)


def test_stream_compaction_with_atomics() -> None:
    x = normal(200)
    out, count = fl.full(200, np.nan), fl.zeros(1, dtype=fl.i32)
    compact_positive.launch(4, out, count, fl.asarray(x), 64)
    n = int(count.numpy()[0])
    assert n == int((x > 0).sum())
    got = out.numpy()
    np.testing.assert_array_equal(np.sort(got[:n]), np.sort(x[x > 0]))
    assert np.isnan(got[n:]).all()


def test_online_argmax_over_column_tiles() -> None:
    x = normal((10, 100))
    mx, am = fl.empty(10).partition((4,)), fl.empty(10, dtype=fl.i32).partition((4,))
    online_argmax(mx, am, fl.asarray(x), 32)
    np.testing.assert_array_equal(am.unpartition().numpy(), x.argmax(1))
    np.testing.assert_array_equal(mx.unpartition().numpy(), x.max(1))


def test_persistent_tiles_in_chunks_with_a_run_time_if() -> None:
    x = normal((7, 300))
    part = fl.empty(x.shape).partition((1, 512))
    persistent_rows.launch(3, part, fl.asarray(x), 128)
    want = np.where((np.arange(7) % 2 == 0)[:, None], x * 2, -x)
    np.testing.assert_array_equal(part.unpartition().numpy(), want)


def test_a_helper_returning_a_tuple() -> None:
    x = normal((8, 32))
    part = fl.empty(x.shape).partition((2, 32))
    standardize(part, fl.asarray(x))
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-4, atol=1e-5)


def test_float_mod_and_floordiv_on_the_simulator() -> None:
    x = normal(40) * 3
    part = fl.empty(40).partition((16,))
    phase_wrap(part, fl.asarray(x))
    want = np.mod(x, np.float32(1.0)) + np.floor_divide(x, np.float32(0.5))
    np.testing.assert_allclose(part.unpartition().numpy(), want, rtol=1e-6, atol=1e-6)


def test_int_pow_by_a_literal_is_square_and_multiply() -> None:
    xi = np.arange(-20, 20, dtype=np.int32)
    ipart = fl.empty(40, dtype=fl.i32).partition((16,))
    int_square(ipart, fl.asarray(xi))
    assert np.array_equal(ipart.unpartition().numpy(), xi**2)
    for n in (0, 1, 5, 13):  # 13 wraps in i32, as the simulator's and NumPy's power do
        part = fl.empty(40, dtype=fl.i32).partition((16,))
        make_int_power(n)(part, fl.asarray(xi))
        assert np.array_equal(part.unpartition().numpy(), xi**n), n


def make_int_power(n: int) -> Any:
    @tile.kernel
    def power(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
        out.store(tile.load_like(x, out) ** n)

    return power


def test_int_pow_by_a_run_time_exponent_is_refused_with_a_fix() -> None:
    @tile.kernel
    def power(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32], e: fl.i32):
        out.store(tile.load_like(x, out) ** e)

    with pytest.raises(fl.KernelTypeError, match=r"takes a literal exponent"):
        power(fl.empty(16, dtype=fl.i32).partition((16,)), fl.zeros(16, dtype=fl.i32), 3)


def test_int_pow_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    i32 = fl.i32
    assert cubin(int_square, fl.zeros(40, dtype=i32).partition((16,)), fl.zeros(40, dtype=i32))


def test_float_mod_and_floordiv_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(phase_wrap, fl.zeros(40).partition((16,)), fl.zeros(40))
    for dt in (fl.f16, fl.bf16, fl.f64):
        args = (fl.zeros(32, dtype=dt).partition((32,)), fl.zeros(32, dtype=dt))
        assert cubin(make_divmod(dt), *args, fl.zeros(32, dtype=dt))


def make_divmod(dt: Any) -> Any:
    @tile.kernel
    def divmod_(out: tile.Part[dt], x: tile.Tensor[dt], w: tile.Tensor[dt]):
        a, b = tile.load_like(x, out), tile.load_like(w, out)
        out.store(a % b - a // b)

    return divmod_


def test_bitwise_not_of_int_tiles() -> None:
    x = np.arange(-20, 20, dtype=np.int32)
    part = fl.empty(40, dtype=fl.i32).partition((16,))
    bitwise_not(part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), ~x)


def test_bitwise_not_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    i32 = fl.i32
    assert cubin(bitwise_not, fl.zeros(40, dtype=i32).partition((16,)), fl.zeros(40, dtype=i32))


def test_warnings_as_errors_raise_the_padded_reduction_warning() -> None:
    x = normal((8, 40))
    with warnings.catch_warnings():
        warnings.simplefilter("error", fl.FearlessWarning)
        with pytest.raises(fl.FearlessWarning, match=r"padding=-math\.inf"):
            row_max_shift(fl.empty(x.shape).partition((2, 64)), fl.asarray(x))


def test_the_padded_reduction_warning_with_a_negative_axis() -> None:
    """Rows of 40 in tiles of 64: the launch sees the padding the compile could not decide
    (it knows extents mod 4 only)."""
    x = normal((8, 40))
    part = fl.empty(x.shape).partition((2, 64))
    with pytest.warns(fl.FearlessWarning, match=r"`tile.max` takes in padding 0.0"):
        row_max_shift(part, fl.asarray(x))
    np.testing.assert_array_equal(part.unpartition().numpy(), x - x.max(-1, keepdims=True))


def test_a_tile_that_divides_the_extent_does_not_warn() -> None:
    """32 divides 32, which the compile cannot know (extents mod 4): the launch does."""
    x = normal((8, 32))
    part = fl.empty(x.shape).partition((2, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("error", fl.FearlessWarning)
        row_max_shift(part, fl.asarray(x))
    np.testing.assert_array_equal(part.unpartition().numpy(), x - x.max(-1, keepdims=True))


def test_cutile_tile_methods() -> None:
    x = normal((8, 32))
    part = fl.empty((32, 8)).partition((16, 8))
    tile_methods(part, fl.asarray(x))
    np.testing.assert_allclose(part.unpartition().numpy(), x.T * x[0, 0])


def test_cutile_transpose_of_two_axes() -> None:
    x = normal((2, 8, 16))
    part = fl.empty((2, 16, 8)).partition((1, 8, 8))
    transpose_axes(part, fl.asarray(x))
    np.testing.assert_array_equal(part.unpartition().numpy(), x.transpose(0, 2, 1))


def test_ellipsis_new_axis() -> None:
    x, b = normal((8, 32)), normal(8, 1)
    part = fl.empty(x.shape).partition((2, 32))
    add_column(part, fl.asarray(x), fl.asarray(b))
    np.testing.assert_array_equal(part.unpartition().numpy(), x + b[:, None])


def test_float_of_a_string_constant_says_to_write_math_inf() -> None:
    x = normal(32)
    part = fl.empty(32).partition((32,))
    with pytest.raises(fl.CompileError, match=r"write `-math.inf` \(import math\)"):
        clamp_below(part, fl.asarray(x))


U8_VALUES = np.arange(0, 256, 8, dtype=np.uint8)
U32_VALUES = np.array([0, 1, 2**31 - 1, 2**31, 2**31 + 5, 2**32 - 1, 7, 8] * 4, np.uint32)
QUANT_IN = np.array([-0.5, 0.0, 0.5, 1.0, 1.004, 1.2, 4.0, -2.0] * 4, np.float32)
WIDE = np.array([-300.0, -129.0, 127.9, 128.0, 1000.0, np.nan, 3.5, -3.5] * 4, np.float32)


def test_unsigned_abs_and_saturating_casts_on_the_simulator() -> None:
    part = fl.empty(32, dtype=fl.u8).partition((32,))
    abs_unsigned(part, fl.asarray(U8_VALUES))
    assert np.array_equal(part.unpartition().numpy(), U8_VALUES)
    part = fl.empty(32, dtype=fl.u32).partition((32,))
    abs_u32(part, fl.asarray(U32_VALUES))
    assert np.array_equal(part.unpartition().numpy(), U32_VALUES)
    part = fl.empty(32, dtype=fl.i8).partition((32,))
    to_i8(part, fl.asarray(WIDE))
    want = np.clip(np.nan_to_num(np.trunc(WIDE), nan=0.0), -128, 127).astype(np.int8)
    assert np.array_equal(part.unpartition().numpy(), want)
    part = fl.empty(32, dtype=fl.i64).partition((32,))
    to_i64(part, fl.asarray(WIDE))
    assert np.array_equal(
        part.unpartition().numpy(), np.nan_to_num(np.trunc(WIDE)).astype(np.int64)
    )
    part = fl.empty(32, dtype=fl.u8).partition((32,))
    quantize_u8(part, fl.asarray(QUANT_IN))
    want = np.clip(np.trunc(QUANT_IN * np.float32(255.0)), 0, 255).astype(np.uint8)
    assert np.array_equal(part.unpartition().numpy(), want)


def _sim_and_gpu(
    sim_and_gpu: Callable[..., Any], kernel: Any, x: np.ndarray, out_dt: Any
) -> tuple[np.ndarray, np.ndarray]:
    def run() -> np.ndarray:
        part = fl.empty(x.shape, dtype=out_dt).partition((32,))
        kernel(part, fl.asarray(x))
        return part.unpartition().numpy()

    return sim_and_gpu(run)


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["u8", "u32"])
def test_gpu_abs_of_unsigned_matches_the_simulator(
    which: str, sim_and_gpu: Callable[..., Any]
) -> None:
    if which == "u8":
        sim_out, gpu_out = _sim_and_gpu(sim_and_gpu, abs_unsigned, U8_VALUES, fl.u8)
    else:
        sim_out, gpu_out = _sim_and_gpu(sim_and_gpu, abs_u32, U32_VALUES, fl.u32)
    assert np.array_equal(gpu_out, sim_out)


@pytest.mark.gpu
def test_gpu_float_to_u8_saturates_as_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    sim_out, gpu_out = _sim_and_gpu(sim_and_gpu, quantize_u8, QUANT_IN, fl.u8)
    assert np.array_equal(gpu_out, sim_out)


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["i8", "i64"])
def test_gpu_float_to_int_edge_cases_match_the_simulator(
    which: str, sim_and_gpu: Callable[..., Any]
) -> None:
    kernel, dt = (to_i8, fl.i8) if which == "i8" else (to_i64, fl.i64)
    sim_out, gpu_out = _sim_and_gpu(sim_and_gpu, kernel, WIDE, dt)
    assert np.array_equal(gpu_out, sim_out)


MOD_X = np.array(
    [5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 7.0, 1e30, np.inf, np.nan, 3.0, -3.0] * 3 + [1.0] * 4
)
MOD_W = np.array(
    [2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 7.0, 2.0, 2.0, np.inf, -np.inf] * 3 + [0.1] * 4
)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["f32", "f16", "bf16", "f64"])
def test_gpu_float_mod_and_floordiv_match_the_simulator(
    name: str, sim_and_gpu: Callable[..., Any]
) -> None:
    dt = getattr(fl, name)
    kernel = make_divmod(dt)

    def run() -> np.ndarray:
        x = fl.asarray(MOD_X.astype(np.float64)).astype(dt) if name == "bf16" else None
        xs = fl.asarray(MOD_X.astype(dt.np)) if x is None else x
        w = fl.asarray(MOD_W.astype(np.float64)).astype(dt) if name == "bf16" else None
        ws = fl.asarray(MOD_W.astype(dt.np)) if w is None else w
        part = fl.empty(40, dtype=dt).partition((64,))
        kernel(part, xs, ws)
        return np.asarray(part.unpartition().numpy(), np.float64)

    sim, gpu = sim_and_gpu(run)
    np.testing.assert_array_equal(gpu, sim)


# ---------------------------------------------------- refused with a message that says why


def _refused(kernel: tile.Kernel, args: tuple[Any, ...], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        kernel(*args)


def test_mixed_precision_arithmetic_asks_for_a_cast() -> None:
    """cuTile Python promotes f16 * f32 to f32; fearless asks for an explicit astype."""

    @tile.kernel
    def mixed(out: tile.Part[fl.f16], x: tile.Tensor[fl.f16], s: fl.f32):
        out.store(tile.load_like(x, out) * s)

    @tile.kernel
    def mean_by_extent(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], N: tile.Const[int]):
        (i,) = out.index
        v = tile.load(x, (i, 0), (out.shape[0], N))
        out.store(tile.sum(v, axis=1) / x.shape[1])  # f32 / i32 (a run-time extent)

    @tile.kernel
    def store_wider(out: tile.Part[fl.bf16], x: tile.Tensor[fl.f32]):
        out.store(tile.load_like(x, out))

    half = fl.zeros(8, dtype=fl.f16)
    out = fl.empty(8, dtype=fl.f16).partition((8,))
    _refused(mixed, (out, half, 2.0), fl.KernelTypeError, r"mismatched types in `\*`: f16 and f32")
    _refused(
        mean_by_extent,
        (fl.empty(8).partition((4,)), fl.zeros((8, 16)), 16),
        fl.KernelTypeError,
        r"mismatched types in `/`: f32 and i32",
    )
    _refused(
        store_wider,
        (fl.empty(8, dtype=fl.bf16).partition((8,)), fl.zeros(8)),
        fl.KernelTypeError,
        r"cannot store a f32 tile into `out`, a Part of bf16",
    )


@tile.kernel
def sums_until_past_the_row(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], BK: tile.Const[int]):
    """Row sums in chunks of BK over a fixed 64-chunk loop that `break`s past the row's end."""
    (i,) = out.index
    acc = tile.zeros(out.shape, fl.f32)
    for k in range(64):
        if k * BK >= x.shape[1]:
            break
        acc = acc + tile.sum(tile.load(x, (i, k), (out.shape[0], BK)), axis=1)
    out.store(acc)


@tile.kernel
def odd_chunk_sums(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], BK: tile.Const[int]):
    """Row sums of the odd-numbered chunks only (`continue` skips the even ones)."""
    (i,) = out.index
    acc = tile.zeros(out.shape, fl.f32)
    for k in range(tile.cdiv(x.shape[1], BK)):
        if k % 2 == 0:
            continue
        acc = acc + tile.sum(tile.load(x, (i, k), (out.shape[0], BK)), axis=1)
    out.store(acc)


@tile.kernel
def first_chunk_over(out: tile.Part[fl.i32], x: tile.Tensor[fl.f32], limit: fl.f32):
    """Per row block: the first chunk (of 16) whose sum passes `limit`, skipping chunks with a
    negative first element, and how many chunks it looked at; -1 when none does. Statements
    after an `if` that jumps, a value assigned just before a `break`, nested `if`s."""
    (i,) = out.index
    found = tile.full((), -1, fl.i32)
    looked = tile.full((), 0, fl.i32)
    for k in range(x.shape[0] // 16):
        v = tile.load(x, (k,), (16,))
        if tile.sum(tile.where(tile.arange(16) == 0, v, 0.0)) < 0:
            continue
        looked = looked + 1
        if tile.sum(v) > limit:
            if i == 0:
                found = tile.full((), k, fl.i32)
                break
            found = tile.full((), k + 1000, fl.i32)
            break
    out.store(tile.full((2,), 0, fl.i32) + tile.where(tile.arange(2) == 0, found, looked))


@tile.kernel
def collatz_by_break(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """Collatz steps with `while True:` and a `break`."""
    (i,) = out.index
    v = tile.load(x, (i,), (1,)).reshape(())
    steps = 0
    while True:
        if v == 1:
            break
        v = tile.where(v % 2 == 0, v // 2, 3 * v + 1)
        steps = steps + 1
    out.store(tile.full((1,), 0, fl.i32) + steps.astype(fl.i32))


@tile.kernel
def nested_jumps(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """An inner loop that breaks inside an outer one that continues: each jump leaves its
    own loop. Counts, over rows r of an (R, 8) block whose first element is not 0, the leading
    elements below 5."""
    total = 0
    for r in range(x.shape[0]):
        row = tile.load(x, (r, 0), (1, 8)).reshape((8,))
        if tile.sum(tile.where(tile.arange(8) == 0, row, 0)) == 0:
            continue
        j = 0
        while j < 8:
            e = tile.sum(tile.where(tile.arange(8) == j, row, 0))
            if e >= 5:
                break
            total = total + 1
            j += 1
    out.store(tile.full((1,), 0, fl.i32) + total.astype(fl.i32))


@tile.kernel
def break_then_continue(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """An inner `for` that breaks, then an outer `continue`: the inner loop's break must not
    leak into the outer loop (it skipped the outer rest, and broke the outer loop, once)."""
    total = tile.full((), 0, fl.i32)
    for r in range(x.shape[0]):
        row = tile.load(x, (r, 0), (1, 8)).reshape((8,))
        for j in range(8):
            if tile.sum(tile.where(tile.arange(8) == j, row, 0)) >= 5:
                break
            total = total + 1
        if tile.sum(row) == 0:
            continue
        total = total + 100
    out.store(tile.full((1,), 0, fl.i32) + total)


def _break_then_continue(x: np.ndarray) -> int:
    total = 0
    for row in x:
        for e in row:
            if e >= 5:
                break
            total += 1
        if row.sum() == 0:
            continue
        total += 100
    return total


def _first_chunk_over(x: np.ndarray, limit: float, block: int) -> list[int]:
    found, looked = -1, 0
    for k in range(len(x) // 16):
        v = x[16 * k : 16 * k + 16]
        if v[0] < 0:
            continue
        looked += 1
        if v.sum(dtype=np.float32) > limit:
            found = k if block == 0 else k + 1000
            break
    return [found, looked]


def _nested_jumps(x: np.ndarray) -> int:
    total = 0
    for row in x:
        if row[0] == 0:
            continue
        for e in row:
            if e >= 5:
                break
            total += 1
    return total


JUMP_X = np.random.default_rng(7).integers(0, 8, (12, 8)).astype(np.int32)
JUMP_X[[2, 5], 0] = 0


def test_break_and_continue_in_for_and_while_loops() -> None:
    x = normal((8, 100))
    part = fl.empty(8).partition((4,))
    sums_until_past_the_row(part, fl.asarray(x), 32)
    np.testing.assert_allclose(part.unpartition().numpy(), x.sum(1), rtol=1e-5, atol=1e-5)
    part = fl.empty(8).partition((4,))
    odd_chunk_sums(part, fl.asarray(x), 32)
    np.testing.assert_allclose(
        part.unpartition().numpy(), x[:, 32:64].sum(1) + x[:, 96:].sum(1), rtol=1e-5, atol=1e-5
    )
    v = normal((16 * 20,))
    for limit in (2.0, 4.0, 100.0):
        got = fl.empty(4, dtype=fl.i32).partition((2,))
        first_chunk_over(got, fl.asarray(v), limit)
        want = _first_chunk_over(v, limit, 0) + _first_chunk_over(v, limit, 1)
        assert got.unpartition().numpy().tolist() == want, limit
    steps = fl.empty(8, dtype=fl.i32).partition((1,))
    collatz_by_break(steps, fl.asarray(COLLATZ))
    assert steps.unpartition().numpy().tolist() == [_collatz(int(n)) for n in COLLATZ]
    total = fl.empty(1, dtype=fl.i32).partition((1,))
    nested_jumps(total, fl.asarray(JUMP_X))
    assert total.unpartition().numpy().tolist() == [_nested_jumps(JUMP_X)]
    total = fl.empty(1, dtype=fl.i32).partition((1,))
    break_then_continue(total, fl.asarray(JUMP_X))
    assert total.unpartition().numpy().tolist() == [_break_then_continue(JUMP_X)]


def test_loops_with_jumps_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    x = fl.zeros((8, 100))
    assert cubin(sums_until_past_the_row, fl.empty(8).partition((4,)), x, 32)
    assert cubin(odd_chunk_sums, fl.empty(8).partition((4,)), x, 32)
    assert cubin(first_chunk_over, fl.empty(4, dtype=fl.i32).partition((2,)), fl.zeros(320), 2.0)
    assert cubin(collatz_by_break, fl.empty(8, dtype=fl.i32).partition((1,)), fl.asarray(COLLATZ))
    assert cubin(nested_jumps, fl.empty(1, dtype=fl.i32).partition((1,)), fl.asarray(JUMP_X))
    one = fl.empty(1, dtype=fl.i32).partition((1,))
    assert cubin(break_then_continue, one, fl.asarray(JUMP_X))


@tile.kernel
def while_row_sums(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], BK: tile.Const[int]):
    """Row sums in column chunks of BK, while the chunk starts inside the row."""
    (i,) = out.index
    acc = tile.zeros(out.shape, fl.f32)
    k = 0
    while k * BK < x.shape[1]:
        acc = acc + tile.sum(tile.load(x, (i, k), (out.shape[0], BK)), axis=1)
        k += 1
    out.store(acc)


@tile.kernel
def collatz_steps(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    """A data-dependent trip count per block: Collatz steps of one value until it is 1."""
    (i,) = out.index
    v = tile.load(x, (i,), (1,)).reshape(())
    steps = 0
    while v != 1:
        v = tile.where(v % 2 == 0, v // 2, 3 * v + 1)
        steps = steps + 1
    out.store(tile.full((1,), 0, fl.i32) + steps.astype(fl.i32))


COLLATZ = np.array([1, 2, 3, 6, 7, 27, 97, 871], np.int32)


def _collatz(n: int) -> int:
    steps = 0
    while n != 1:
        n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
    return steps


def test_a_while_loop_on_a_run_time_condition() -> None:
    x = normal((8, 100))
    part = fl.empty(8).partition((4,))
    while_row_sums(part, fl.asarray(x), 32)
    np.testing.assert_allclose(part.unpartition().numpy(), x.sum(1), rtol=1e-5, atol=1e-5)
    steps = fl.empty(8, dtype=fl.i32).partition((1,))
    collatz_steps(steps, fl.asarray(COLLATZ))
    assert steps.unpartition().numpy().tolist() == [_collatz(int(n)) for n in COLLATZ]


def test_a_while_loop_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    assert cubin(while_row_sums, fl.empty(8).partition((4,)), fl.zeros((8, 100)), 32)
    assert cubin(collatz_steps, fl.empty(8, dtype=fl.i32).partition((1,)), fl.asarray(COLLATZ))


def test_a_while_on_a_compile_time_condition_is_refused() -> None:
    @tile.kernel
    def forever(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, out)
        while True:
            v = v + 1.0
        out.store(v)

    _refused(
        forever,
        (fl.empty(8).partition((8,)), fl.zeros(8)),
        fl.CompileError,
        "a `while` whose condition is known at compile time",
    )


@pytest.mark.gpu
def test_gpu_while_loops_match_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    x = normal((8, 100))

    def run() -> tuple[np.ndarray, np.ndarray]:
        part = fl.empty(8).partition((4,))
        while_row_sums(part, fl.asarray(x), 32)
        steps = fl.empty(8, dtype=fl.i32).partition((1,))
        collatz_steps(steps, fl.asarray(COLLATZ))
        return part.unpartition().numpy(), steps.unpartition().numpy()

    sim, gpu = sim_and_gpu(run)
    # f32 sums: the GPU's reduction tree and the simulator's NumPy sum round differently.
    np.testing.assert_allclose(gpu[0], sim[0], rtol=1e-5, atol=1e-5)
    assert np.array_equal(gpu[1], sim[1])


@pytest.mark.gpu
def test_gpu_break_and_continue_match_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    x, v = normal((8, 100)), normal((16 * 20,))

    def run() -> list[np.ndarray]:
        outs = [fl.empty(8).partition((4,)), fl.empty(8).partition((4,))]
        sums_until_past_the_row(outs[0], fl.asarray(x), 32)
        odd_chunk_sums(outs[1], fl.asarray(x), 32)
        for limit in (2.0, 4.0, 100.0):
            outs.append(fl.empty(4, dtype=fl.i32).partition((2,)))
            first_chunk_over(outs[-1], fl.asarray(v), limit)
        outs.append(fl.empty(8, dtype=fl.i32).partition((1,)))
        collatz_by_break(outs[-1], fl.asarray(COLLATZ))
        outs.append(fl.empty(1, dtype=fl.i32).partition((1,)))
        nested_jumps(outs[-1], fl.asarray(JUMP_X))
        outs.append(fl.empty(1, dtype=fl.i32).partition((1,)))
        break_then_continue(outs[-1], fl.asarray(JUMP_X))
        return [o.unpartition().numpy() for o in outs]

    sims, gpus = sim_and_gpu(run)
    for gpu, sim in zip(gpus, sims, strict=True):
        if sim.dtype.kind == "f":  # f32 sums round differently (see the while test above)
            np.testing.assert_allclose(gpu, sim, rtol=1e-5, atol=1e-5)
        else:
            assert np.array_equal(gpu, sim)


def test_a_padding_other_than_the_five_is_emulated() -> None:
    """Issue 33: any padding, as Triton's `other=` (a masked `tile.where` after the load)."""

    @tile.kernel
    def pad_sum(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.sum(tile.load(x, (0,), (64,), padding=1.0), keepdims=True))

    part = fl.empty(1).partition((1,))
    with pytest.warns(PaddedReductionWarning, match="takes in padding 1.0"):  # as it means to
        pad_sum(part, fl.zeros(50))
    assert part.unpartition().numpy().tolist() == [14.0]  # the 14 padded elements


@tile.kernel
def mma_i8(c: tile.Part[fl.i32], a: tile.Tensor[fl.i8], b: tile.Tensor[fl.i8]):
    """cuTile Python's int8 GEMM: i8 x i8 products summed in i32, over K in tiles of 32."""
    BM, BN = c.shape
    i, j = c.index
    acc = tile.zeros((BM, BN), fl.i32)
    for k in range(tile.cdiv(a.shape[1], 32)):
        acc = tile.mma(tile.load(a, (i, k), (BM, 32)), tile.load(b, (k, j), (32, BN)), acc)
    c.store(acc)


@tile.kernel
def matmul_u8_i8(c: tile.Part[fl.i32], a: tile.Tensor[fl.u8], b: tile.Tensor[fl.i8]):
    """`a @ b` of an unsigned and a signed 8-bit tile: an i32 product."""
    BM, BN = c.shape
    i, j = c.index
    c.store(tile.load(a, (i, 0), (BM, 32)) @ tile.load(b, (0, j), (32, BN)))


I8_A = np.random.default_rng(3).integers(-128, 128, (32, 96)).astype(np.int8)
I8_B = np.random.default_rng(4).integers(-128, 128, (96, 32)).astype(np.int8)
U8_A = np.random.default_rng(5).integers(0, 256, (32, 32)).astype(np.uint8)


def test_int8_mma_sums_in_i32() -> None:
    c = fl.empty((32, 32), dtype=fl.i32).partition((16, 16))
    mma_i8(c, fl.asarray(I8_A), fl.asarray(I8_B))
    want = I8_A.astype(np.int64) @ I8_B.astype(np.int64)
    assert np.array_equal(c.unpartition().numpy(), want.astype(np.int32))
    c = fl.empty((32, 32), dtype=fl.i32).partition((16, 16))
    matmul_u8_i8(c, fl.asarray(U8_A), fl.asarray(I8_B[:32]))
    want = U8_A.astype(np.int64) @ I8_B[:32].astype(np.int64)
    assert np.array_equal(c.unpartition().numpy(), want.astype(np.int32))


def test_int8_mma_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    c = fl.empty((32, 32), dtype=fl.i32).partition((16, 16))
    assert cubin(mma_i8, c, fl.asarray(I8_A), fl.asarray(I8_B))
    assert cubin(matmul_u8_i8, c, fl.asarray(U8_A), fl.asarray(I8_B[:32]))


@pytest.mark.gpu
def test_gpu_int8_mma_matches_numpy() -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    fl.set_target("cuda")
    try:
        c = fl.empty((32, 32), dtype=fl.i32).partition((16, 16))
        mma_i8(c, fl.asarray(I8_A), fl.asarray(I8_B))
        d = fl.empty((32, 32), dtype=fl.i32).partition((16, 16))
        matmul_u8_i8(d, fl.asarray(U8_A), fl.asarray(I8_B[:32]))
        fl.synchronize()
        got_c, got_d = c.unpartition().numpy(), d.unpartition().numpy()
    finally:
        fl.set_target(None)
    assert np.array_equal(got_c, (I8_A.astype(np.int64) @ I8_B.astype(np.int64)).astype(np.int32))
    want_d = U8_A.astype(np.int64) @ I8_B[:32].astype(np.int64)
    assert np.array_equal(got_d, want_d.astype(np.int32))


def test_mma_of_other_int_tiles_defaults_keywords_and_slices_are_refused() -> None:
    """An i16 mma (the tensor cores take 8-bit integers), and Triton's keyword launches and
    defaults: refused clearly."""

    @tile.kernel
    def mma_i16(c: tile.Part[fl.i32], a: tile.Tensor[fl.i16], b: tile.Tensor[fl.i16]):
        BM, BN = c.shape
        i, j = c.index
        acc = tile.zeros((BM, BN), fl.i32)
        c.store(tile.mma(tile.load(a, (i, 0), (BM, 32)), tile.load(b, (0, j), (32, BN)), acc))

    @tile.kernel
    def with_default(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], eps: fl.f32 = 1e-5):
        out.store(tile.load_like(x, out) + eps)

    @tile.kernel
    def sliced(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store(tile.load(x, (0, 0), (2, 64))[:, 8:40])

    i16 = fl.i16
    _refused(
        mma_i16,
        (
            fl.empty((32, 32), dtype=fl.i32).partition((16, 16)),
            fl.zeros((32, 32), dtype=i16),
            fl.zeros((32, 32), dtype=i16),
        ),
        fl.KernelTypeError,
        r"`tile.mma` needs two float tiles of one dtype, or two 8-bit integer tiles, "
        r"found i16 and i16",
    )
    x = fl.zeros((8, 32))
    _refused(
        with_default,
        (fl.empty((8, 32)).partition((2, 32)), x),
        fl.KernelTypeError,
        r"takes 3 arguments \(out, x, eps\) but 2 were given",
    )
    with pytest.raises(fl.KernelTypeError, match="takes its arguments by position"):
        with_default(fl.empty((8, 32)).partition((2, 32)), x, eps=2.0)
    _refused(
        sliced,
        (fl.empty((8, 32)).partition((2, 32)), x),
        fl.KernelTypeError,
        r"cannot take \[8:40\] of axis 1 of a \(2, 64\) tile",
    )


# --------------------------------------------------------------------- through tileiras


def _compile_cases() -> list[Any]:
    z, f16, bf16, i32, u8 = fl.zeros, fl.f16, fl.bf16, fl.i32, fl.u8
    return [
        (
            "scale_shift",
            scale_shift,
            lambda: (z((37, 50)).partition((16, 32)), z((37, 50)), z(50), z(37)),
        ),
        (
            "bias_gelu",
            bias_gelu,
            lambda: (
                z((37, 50), dtype=bf16).partition((8, 64)),
                z((37, 50), dtype=bf16),
                z(50, dtype=bf16),
            ),
        ),
        (
            "row_max_with_index",
            row_max_with_index,
            lambda: (z(10).partition((4,)), z(10, dtype=i32).partition((4,)), z((10, 20)), 32),
        ),
        ("row_prefix_sum", row_prefix_sum, lambda: (z((6, 16)).partition((2, 16)), z((6, 16)))),
        (
            "batched_transpose_scale",
            batched_transpose_scale,
            lambda: (z((3, 12, 20)).partition((1, 8, 16)), z((3, 20, 12)), z(3)),
        ),
        (
            "head_softmax",
            head_softmax,
            lambda: (z((2, 3, 10, 24)).partition((1, 1, 4, 32)), z((2, 3, 10, 24)), z(3)),
        ),
        (
            "persistent_clamp",
            persistent_clamp,
            lambda: (z((45, 70)).partition((16, 32)), z((45, 70)), -1.0, 2.0),
        ),
        (
            "l2_normalize_rows",
            l2_normalize_rows,
            lambda: (z((5, 3000)).partition((2, 4096)), z((5, 3000)), 512),
        ),
        ("row_sums", row_sums, lambda: (z(9).partition((4,)), z((9, 300), dtype=bf16), 64)),
        (
            "embed_with_positions",
            embed_with_positions,
            lambda: (
                z((3, 12, 24)).partition((1, 8, 16)),
                z((50, 24), dtype=f16),
                z((12, 24), dtype=f16),
                z((3, 12), dtype=i32),
            ),
        ),
        (
            "weighted_histogram",
            weighted_histogram,
            lambda: (z(8), z(1000), z(1000), -1.0, 0.25, 8, 256),
        ),
        (
            "dropout_2d",
            dropout_2d,
            lambda: (
                z((33, 40)).partition((8, 16)),
                z((33, 40), dtype=fl.i8).partition((8, 16)),
                z((33, 40)),
                0.3,
                42,
            ),
        ),
        ("deinterleave", deinterleave, lambda: (z((6, 32)).partition((2, 32)), z((6, 32)))),
        (
            "row_argmax",
            row_argmax,
            lambda: (z(10, dtype=fl.i32).partition((4,)), z((10, 20)), 32),
        ),
        ("row_prod", row_prod, lambda: (z(8).partition((4,)), z((8, 16)), 16)),
        (
            "bitwise_not",
            bitwise_not,
            lambda: (z(40, dtype=fl.i32).partition((16,)), z(40, dtype=fl.i32)),
        ),
        (
            "transpose_in_registers",
            transpose_in_registers,
            lambda: (z((40, 24)).partition((16, 8)), z((24, 40))),
        ),
        ("max_pool_2x2", max_pool_2x2, lambda: (z((7, 11)).partition((4, 8)), z((13, 21)))),
        (
            "qk_norm",
            qk_norm,
            lambda: (
                z((8, 16)).partition((4, 16)),
                z((8, 16)).partition((4, 16)),
                z((8, 16)),
                z((8, 16)),
                z(16),
                z(16),
            ),
        ),
        ("activation:silu", activation, lambda: (z(100).partition((64,)), z(100), 2, 0.1)),
        ("activation:leaky", activation, lambda: (z(100).partition((64,)), z(100), 1, 0.1)),
        (
            "gemv",
            gemv,
            lambda: (z(37).partition((16,)), z((37, 100), dtype=f16), z(100, dtype=f16), 32),
        ),
        (
            "linear_bias_relu",
            linear_bias_relu,
            lambda: (
                z((40, 24), dtype=bf16).partition((16, 16)),
                z((40, 50), dtype=bf16),
                z((50, 24), dtype=bf16),
                z(24),
                16,
            ),
        ),
        (
            "unpack_int4",
            unpack_int4,
            lambda: (z((5, 32), dtype=i32).partition((4, 16)), z((5, 4), dtype=fl.u32)),
        ),
        (
            "floor_divmod",
            floor_divmod,
            lambda: (
                z(40, dtype=i32).partition((16,)),
                z(40, dtype=i32).partition((16,)),
                z(40, dtype=i32),
                7,
            ),
        ),
        ("conditional_scale", conditional_scale, lambda: (z(50).partition((32,)), z(50), 20, 1)),
        ("stencil_3pt", stencil_3pt, lambda: (z(100).partition((32,)), z(100))),
        (
            "paged_gather",
            paged_gather,
            lambda: (z((16, 16)).partition((4, 16)), z((24, 16)), z(4, dtype=i32)),
        ),
        ("conv3x3", conv3x3, lambda: (z((19, 23)).partition((8, 16)), z((19, 23)), z((3, 3)))),
        ("compact_positive", compact_positive, lambda: (z(200), z(1, dtype=i32), z(200), 64)),
        (
            "online_argmax",
            online_argmax,
            lambda: (z(10).partition((4,)), z(10, dtype=i32).partition((4,)), z((10, 100)), 32),
        ),
        (
            "persistent_rows",
            persistent_rows,
            lambda: (z((7, 300)).partition((1, 512)), z((7, 300)), 128),
        ),
        ("standardize", standardize, lambda: (z((8, 32)).partition((2, 32)), z((8, 32)))),
        ("abs_unsigned", abs_unsigned, lambda: (z(32, dtype=u8).partition((32,)), z(32, dtype=u8))),
        ("quantize_u8", quantize_u8, lambda: (z(32, dtype=u8).partition((32,)), z(32))),
        ("abs_u32", abs_u32, lambda: (z(32, dtype=fl.u32).partition((32,)), z(32, dtype=fl.u32))),
        ("to_i8", to_i8, lambda: (z(32, dtype=fl.i8).partition((32,)), z(32))),
        ("to_i64", to_i64, lambda: (z(32, dtype=fl.i64).partition((32,)), z(32))),
    ]


@pytest.mark.parametrize(
    ("kernel", "make_args"),
    [pytest.param(k, a, id=name) for name, k, a in _compile_cases()],
)
def test_compiles_through_tileiras(
    cubin: Callable[..., bytes], kernel: tile.Kernel, make_args: Callable[[], tuple[Any, ...]]
) -> None:
    assert cubin(kernel, *make_args())


@tile.kernel
def sum_of_indices(out: tile.Part[fl.i32], x: tile.Tensor[fl.i32], N: tile.Const[int]):
    """`s = 0` then `s = s + k` with the loop's i32 `k`: the literal takes k's type."""
    s = 0
    for k in range(N):
        s = s + k * 2
    out.store(tile.load_like(x, out) + s)


def test_a_literal_started_loop_variable_takes_the_type_it_meets() -> None:
    part = fl.empty(8, dtype=fl.i32).partition((8,))
    sum_of_indices(part, fl.zeros(8, dtype=fl.i32), 5)
    assert part.unpartition().numpy().tolist() == [20] * 8


@tile.kernel
def where_ints(out: tile.Part[fl.i32], x: tile.Tensor[fl.f32]):
    out.store(tile.where(tile.load_like(x, out) > 0.0, 1, 0))  # two int literals: i32, as cuTile


def test_where_of_two_int_literals_is_i32() -> None:
    x = normal(8)
    part = fl.empty(8, dtype=fl.i32).partition((8,))
    where_ints(part, fl.asarray(x))
    assert part.unpartition().numpy().tolist() == [int(v > 0) for v in x]


@tile.kernel
def counted(out: tile.Part[fl.i32], wide: tile.Part[fl.i64], x: tile.Tensor[fl.f32]):
    """cuTile's literal types: an int literal standing alone is i32 when i32 holds it (`n = 0`
    counted up by literals stores into an i32 Part as it is), else i64."""
    n = 0
    for _ in range(8):
        n = n + 1
    big = tile.where(tile.load_like(x, out) > 0.0, 2**40, 0)
    out.store(tile.full((8,), 0, fl.i32) + n)
    wide.store(big)


def test_int_literals_default_to_i32_as_in_cutile() -> None:
    x = normal(8)
    out, wide = fl.empty(8, dtype=fl.i32).partition((8,)), fl.empty(8, dtype=fl.i64).partition((8,))
    counted(out, wide, fl.asarray(x))
    assert out.unpartition().numpy().tolist() == [8] * 8
    assert wide.unpartition().numpy().tolist() == [2**40 if v > 0 else 0 for v in x]
    ir = counted.inspect(
        fl.empty(8, dtype=fl.i32).partition((8,)),
        fl.empty(8, dtype=fl.i64).partition((8,)),
        fl.asarray(x),
        stage="ir",
    )
    assert "tile<i32>" in ir and "tile<8xi64>" in ir
