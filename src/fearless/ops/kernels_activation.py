"""The Tile kernels behind fearless.ops' activations: relu, gelu (exact and tanh), silu_and_mul,
swiglu, geglu and dropout, elementwise over tiles of rows.

Every kernel computes in f32 whatever the dtype of its tensors. `erf` (for the exact gelu) is
Abramowitz and Stegun's 7.1.26 rational approximation, absolute error below 1.5e-7, under the
f32 rounding of the rest; its reciprocal and silu's are the hardware's (`recip`). Gated forms
(`silu_and_mul`, `geglu`) read the two halves of each row of x: the gate at column tile j, the
up half at column tile j + d / BN (BN divides d: the host picks it); or, the `wide` form, x seen
as (M, 2, d), each half at [i, 0 or 1, column tile j], so that a tile may be wider than the
largest power of two dividing d (128 at d = 5504), its columns past d padded and not stored.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ..runtime.target import current_target
from ._io import flat, view
from .kernels_rows import kernel_of, next_pow2, size_class

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@tile.function
def recip(x):
    """1 / x for an f32 tile by the hardware's reciprocal (a few ulp, subnormals flushed):
    exact division would cost several instructions and a slow-path branch per element, which
    bounds f16 and bf16 activations by compute instead of memory."""
    return tile.truediv(1.0, x, rounding_mode=tile.RoundingMode.APPROX, flush_to_zero=True)


@tile.function
def erf(x):
    """erf(x) for an f32 tile (A&S 7.1.26)."""
    ax = tile.abs(x)
    t = recip(1.0 + 0.3275911 * ax)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    y = 1.0 - poly * tile.exp(-(ax * ax), approx=True)
    return tile.where(x < 0.0, -y, y)


@tile.function
def gelu_f32(x, tanh_approx, fast=False):
    """gelu of an f32 tile, exact (erf) or its tanh form; `fast` (compile-time: a bf16
    kernel's, whose 8-bit mantissa hides it) takes the hardware's tanh (`tile.tanh`'s approx)."""
    if tanh_approx:
        y = 0.5 * x * (1.0 + tile.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x), approx=fast))
    else:
        y = 0.5 * x * (1.0 + erf(x * 0.7071067811865476))
    return y


@tile.function
def sigmoid_f32(x):
    """1 / (1 + exp(-x)) by the fast exp and `recip`."""
    return recip(1.0 + tile.exp(-x, approx=True))


@tile.function
def silu_f32(x):
    return x * sigmoid_f32(x)


def make_unary(kind, dt):
    """out = kind(x) elementwise for "relu", "gelu" and "gelu_tanh"; any tile shape."""
    relu, tanh_approx = kind == "relu", kind == "gelu_tanh"  # compile-time flags
    fast = dt == fl.bf16

    @tile.kernel
    def unary(out: tile.Part[dt], x: tile.Tensor[dt]):
        v = tile.load_like(x, out).astype(fl.f32)
        y = tile.maximum(v, 0.0) if relu else gelu_f32(v, tanh_approx, fast)
        out.store(y.astype(dt))

    return unary


def make_gated(kind, dt, wide=False):
    """Gated activations over (rows, d) tiles of out, x (rows, 2d): "silu" (silu_and_mul,
    vLLM's and TileGym's) is silu(x[r, c]) * x[r, c + d], the gate first; "gelu", "gelu_tanh"
    (geglu, TileGym's) is x[r, c] * gelu(x[r, c + d]), the gate second. `wide`: x as (rows, 2,
    d) (see the module docstring)."""
    silu, tanh_approx = kind == "silu", kind == "gelu_tanh"  # compile-time flags

    @tile.function
    def gate(out, first, second):
        if silu:  # compile-time
            out.store((silu_f32(first) * second).astype(dt))
        else:
            out.store((first * gelu_f32(second, tanh_approx)).astype(dt))

    if wide:

        @tile.kernel
        def gated(out: tile.Part[dt], x: tile.Tensor[dt]):
            BM, BN = out.shape
            i, j = out.index
            first = tile.load(x, (i, 0, j), (BM, 1, BN)).reshape((BM, BN)).astype(fl.f32)
            second = tile.load(x, (i, 1, j), (BM, 1, BN)).reshape((BM, BN)).astype(fl.f32)
            gate(out, first, second)

        return gated

    @tile.kernel
    def gated(out: tile.Part[dt], x: tile.Tensor[dt], HALF: tile.Const[int]):
        BM, BN = out.shape
        i, j = out.index
        first = tile.load(x, (i, j), (BM, BN)).astype(fl.f32)
        second = tile.load(x, (i, j + HALF // BN), (BM, BN)).astype(fl.f32)
        gate(out, first, second)

    return gated


def make_swiglu(dt):
    """out = silu(a) * b elementwise (TileGym's swiglu forward)."""

    @tile.kernel
    def swiglu(out: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt]):
        va = tile.load_like(a, out).astype(fl.f32)
        vb = tile.load_like(b, out).astype(fl.f32)
        out.store((silu_f32(va) * vb).astype(dt))

    return swiglu


def make_dropout(dt):
    """out = x * scale where the element's 32 random bits are >= `threshold`, else 0. The bits
    of element e are word e % 4 of Philox4x32 (10 rounds) at counter e // 4 keyed by `seed`
    (`tile.randint4x`), as cuRAND's Philox gives four consecutive elements per counter: one
    Philox per four elements, and a mask that depends on the seed and the element alone, the
    same on the simulator and the GPU, at any tile size (a multiple of 4). The host gives
    threshold = round(p * 2^32) and scale = 1 / (1 - p)."""

    @tile.kernel
    def dropout(
        out: tile.Part[dt], x: tile.Tensor[dt], threshold: fl.u32, scale: fl.f32, seed: fl.i64
    ):
        (B,) = out.shape
        Q = B // 4
        counters = tile.arange(Q) + out.index[0] * Q
        r0, r1, r2, r3 = tile.randint4x(seed, counters)
        word = tile.arange(4).reshape((1, 4))
        bits = tile.where(
            word < 2,
            tile.where(word == 0, r0[:, None], r1[:, None]),
            tile.where(word == 2, r2[:, None], r3[:, None]),
        ).reshape((B,))
        v = tile.load_like(x, out).astype(fl.f32)
        out.store(tile.where(bits >= threshold, v * scale, 0.0).astype(dt))

    return dropout


# ------------------------------------------------------------------------ tuned launches


def _ew(elems, occupancy=None):
    return dict(elems=elems, occupancy=occupancy)


# Elements per tile and blocks per SM. Tiles of 1024 elements were the one form: an f16 or bf16
# tile carries half an f32 tile's bytes, and a memory-bound kernel wants more bytes in flight
# per SM (larger tiles, more blocks; the H200 measured 2876 -> 3364 GB/s for f16 dropout at
# 4096 elements and occupancy 16).
ELEMENTWISE_CONFIGS = [
    _ew(1024),
    _ew(4096, 16),
    _ew(2048, 16),
    _ew(4096),
    _ew(8192, 8),
    _ew(1024, 16),
]


@fl.autotune(configs=ELEMENTWISE_CONFIGS, key=["name", "size"])
def elementwise_tuned(name, kernel, out, inputs, size, *, elems, occupancy):
    """Run elementwise `kernel` (`name` and `size`, the `size_class` of out, key the tuner)
    over `out` and the same-shaped tensors among `inputs` (flattened; scalars as they are) in
    tiles of `elems` elements."""
    args = [flat(x) if isinstance(x, fl.Tensor) else x for x in inputs]
    with flat(out).partition((elems,)) as part:
        kernel.options(occupancy=occupancy)(part, *args)


def _g(elems, occupancy=None, num_worker_warps=None):
    return dict(elems=elems, occupancy=occupancy, num_worker_warps=num_worker_warps)


def _gw(elems, occupancy=None, num_worker_warps=None, wide=False):
    return dict(_g(elems, occupancy, num_worker_warps), wide=wide)


# The gated forms add whole rows per block (TileGym's silu_and_mul: a row of up to 4096
# elements per block, 8 worker warps past 2 KB of tile, occupancy tuned). The `wide` ones take
# tiles up to a whole row where d has a small power-of-two factor (d = 5504, 11008: 128, 256
# columns otherwise; TileGym's kernel takes the row, its length padded to a power of two).
GATED_CONFIGS = [
    _gw(1024),
    _gw(4096, 16),
    _gw(2048, 16),
    _gw(4096, None, 8),
    _gw(4096, 4, 8),
    _gw(4096, 8, 8),
    _gw(8192, 2, 8),
    _gw(8192, None, 8, wide=True),
    _gw(2048, wide=True),
]


def _gated_key(kind, x2, *_, **__):
    return kind, size_class(x2.shape[0]), x2.shape[1]


def _gated_width(half, elems, wide):
    """The tile's columns: the largest power of two dividing d up to `elems`, or `wide`'s,
    d's next power of two up to `elems`."""
    return min(next_pow2(half) if wide else half & -half, elems)


def _wider(configs, kind, x2, *_, **__):
    """The `wide` configurations only where they are wider than the others at this d, and on
    a GPU (the simulator's timings say nothing of one; tests/test_ops.py runs each)."""
    half = x2.shape[1] // 2
    on_gpu = current_target().on_device
    return [
        c
        for c in configs
        if not c["wide"]
        or (on_gpu and _gated_width(half, c["elems"], True) > _gated_width(half, c["elems"], False))
    ]


@fl.autotune(configs=GATED_CONFIGS, key=_gated_key, prune=_wider)
def gated_tuned(kind, x2, out2, *, elems, occupancy, num_worker_warps, wide):
    """out2 (M, d) = the gated activation `kind` of x2 (M, 2d) in (BM, BN) tiles of about
    `elems` elements, BN the largest power of two dividing d up to `elems` (a whole row of a
    d of 4096 at 4096 elements); `wide`: d's next power of two up to `elems`, x2 as (M, 2, d)."""
    m, half = x2.shape[0], x2.shape[1] // 2
    bn = _gated_width(half, elems, wide)
    bm = max(1, min(elems // bn, 64))
    kernel = kernel_of(make_gated, kind, x2.dtype, wide).options(
        occupancy=occupancy, num_worker_warps=num_worker_warps
    )
    with out2.partition((bm, bn)) as part:
        if wide:
            kernel(part, view(x2, (m, 2, half)))
        else:
            kernel(part, x2, half)
