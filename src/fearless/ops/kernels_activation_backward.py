"""The Tile kernels of the activations' backward (ops/backward_activation.py launches them):
dx of relu, gelu (exact and tanh), silu_and_mul and geglu, and (da, db) of swiglu.

Every kernel computes in f32 whatever the dtype of its tensors, as the forward kernels do, and
reuses their `erf` and `gelu_f32` helpers' constants. The gelu derivatives are torch's:
exact, Phi(x) + x * phi(x); tanh form, 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * k' with
t = tanh(k * (x + 0.044715 x^3)) and k' = k * (1 + 3 * 0.044715 x^2). The gated kernels see x
as (rows, 2, d) and dx the same: a block's tile (BM, 2, BN) holds a gate tile and the up tile
of the same columns, so each block reads dy, gate and up once and writes both halves of dx.
Loads past the ends read 0 and stores there are dropped, so d needs no particular divisor.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ._io import flat
from .kernels_activation import ELEMENTWISE_CONFIGS, SQRT_2_OVER_PI, erf, gelu_f32, sigmoid_f32
from .kernels_rows import kernel_of, next_pow2, size_class

INV_SQRT_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
KAPPA = 0.044715


@tile.function
def gelu_grad_f32(x, tanh_approx):
    """d gelu(x) / dx for an f32 tile (torch's formulas, exact or tanh)."""
    if tanh_approx:
        x2 = x * x
        t = tile.tanh(SQRT_2_OVER_PI * (x + KAPPA * x2 * x))
        slope = 0.5 * x * (1.0 - t * t) * (SQRT_2_OVER_PI * (1.0 + 3.0 * KAPPA * x2))
        y = 0.5 * (1.0 + t) + slope
    else:
        cdf = 0.5 * (1.0 + erf(x * INV_SQRT_2))
        y = cdf + x * (INV_SQRT_2PI * tile.exp(-0.5 * x * x, approx=True))
    return y


@tile.function
def silu_and_grad_f32(x):
    """(silu(x), silu'(x)) for an f32 tile: x * s and s * (1 + x * (1 - s)), s = sigmoid(x)."""
    s = sigmoid_f32(x)
    return x * s, s * (1.0 + x * (1.0 - s))


def make_unary_backward(kind, dt):
    """dx = dy * kind'(x) elementwise for "relu" (0 where x <= 0, else dy: torch's
    threshold_backward, which passes dy at a NaN), "gelu" and "gelu_tanh"; any tile shape (the
    host flattens)."""
    relu, tanh_approx = kind == "relu", kind == "gelu_tanh"  # compile-time flags

    @tile.kernel
    def unary_backward(dx: tile.Part[dt], dy: tile.Tensor[dt], x: tile.Tensor[dt]):
        g = tile.load_like(dy, dx).astype(fl.f32)
        v = tile.load_like(x, dx).astype(fl.f32)
        y = tile.where(v <= 0.0, 0.0, g) if relu else g * gelu_grad_f32(v, tanh_approx)
        dx.store(y.astype(dt))

    return unary_backward


def make_gated_backward(kind, dt):
    """dx of out = act(gate) * up, gate and up the halves of x's last axis: dx (rows, 2, d) in
    (BM, 2, BN) tiles, x the same view, dy as (rows, 1, d). The gate half gets
    dy * up * act'(gate), the up half dy * act(gate). `kind`: "silu" (silu_and_mul: the gate
    is the first half), "gelu", "gelu_tanh" (geglu: the gate is the second half)."""
    silu, tanh_approx = kind == "silu", kind == "gelu_tanh"  # compile-time flags
    GATE = 0 if silu else 1  # which half is the gate

    @tile.kernel
    def gated_backward(dx: tile.Part[dt], dy: tile.Tensor[dt], x: tile.Tensor[dt]):
        BM, _, BN = dx.shape
        i, _, j = dx.index
        g = tile.load(dy, (i, 0, j), (BM, 1, BN)).astype(fl.f32)
        gate = tile.load(x, (i, GATE, j), (BM, 1, BN)).astype(fl.f32)
        up = tile.load(x, (i, 1 - GATE, j), (BM, 1, BN)).astype(fl.f32)
        if silu:
            act, grad = silu_and_grad_f32(gate)
        else:
            act, grad = gelu_f32(gate, tanh_approx), gelu_grad_f32(gate, tanh_approx)
        gate_half = (tile.arange(2) == GATE).reshape((1, 2, 1))
        dx.store(tile.where(gate_half, g * up * grad, g * act).astype(dt))

    return gated_backward


def make_swiglu_backward(dt):
    """(da, db) of out = silu(a) * b: da = dy * b * silu'(a), db = dy * silu(a), elementwise
    over two Parts of one tiling."""

    @tile.kernel
    def swiglu_backward(
        da: tile.Part[dt],
        db: tile.Part[dt],
        dy: tile.Tensor[dt],
        a: tile.Tensor[dt],
        b: tile.Tensor[dt],
    ):
        g = tile.load_like(dy, da).astype(fl.f32)
        va = tile.load_like(a, da).astype(fl.f32)
        vb = tile.load_like(b, da).astype(fl.f32)
        act, grad = silu_and_grad_f32(va)
        da.store((g * vb * grad).astype(dt))
        db.store((g * act).astype(dt))

    return swiglu_backward


# ------------------------------------------------------------------------ tuned launches


@fl.autotune(configs=ELEMENTWISE_CONFIGS, key=["size"])
def swiglu_backward_tuned(dy, a, b, da, db, size, *, elems, occupancy):
    """(da, db) of swiglu for dy, a, b (one shape; `size`: its `size_class`, with the dtype the
    tuner's key), over flat tiles of `elems` elements."""
    kernel = kernel_of(make_swiglu_backward, dy.dtype).options(occupancy=occupancy)
    with flat(da).partition((elems,)) as pa, flat(db).partition((elems,)) as pb:
        kernel(pa, pb, flat(dy), flat(a), flat(b))


def _gb(bn, elems, occupancy=None):
    return dict(bn=bn, elems=elems, occupancy=occupancy)


# (BM, 2, BN) tiles of dx: BN columns of each half (at most 256 was the one form), BM rows up
# to `elems` elements per half.
GATED_BACKWARD_CONFIGS = [_gb(256, 1024), _gb(256, 2048, 8), _gb(512, 2048), _gb(1024, 4096, 4)]


def _gated_backward_key(kind, dy2, *_, **__):
    return kind, size_class(dy2.shape[0]), dy2.shape[2]


@fl.autotune(configs=GATED_BACKWARD_CONFIGS, key=_gated_backward_key)
def gated_backward_tuned(kind, dy2, x2, dx2, *, bn, elems, occupancy):
    """dx2 (M, 2, d) of the gated activation `kind` for dy2 (M, 1, d) and x2 (M, 2, d)."""
    m, _, d = x2.shape
    bn = min(next_pow2(d), bn)  # loads past d read 0, stores there are dropped
    bm = min(16, max(1, elems // bn), next_pow2(m))
    with dx2.partition((bm, 2, bn)) as part:
        kernel_of(make_gated_backward, kind, dy2.dtype).options(occupancy=occupancy)(part, dy2, x2)
