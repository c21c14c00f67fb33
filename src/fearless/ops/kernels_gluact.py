"""The Tile kernels behind `fearless.ops.linear_gluact_linear` (TileGym's fused GLU MLP,
out = (act(x @ Wa^T) * (x @ Wn^T)) @ W2^T), and their autotuned launch.

x (M, K), Wa and Wn (I, K), W2 (N, I), out (M, N), one dtype; every product sums in f32.
The gated intermediate h = act(gate) * up is computed in f32 from the two f32 accumulators
and rounded once to the dtype before it meets W2 (TileGym stores it in the dtype too). The
weights are read transposed by their loads (`order=(1, 0)`), never copied. Two forms:
  - `gluact_fused`, one kernel: block (i, j) owns a (BM, BN) tile of out; for each block of
    BI intermediate columns it computes the gate and up tiles (BM, BI) over K in steps of BK,
    gates them and adds h @ W2^T's (BI, BN) tile into its f32 accumulator. Nothing goes
    through memory between the layers, but each column block of out computes its rows' h
    again: the form for a narrow out (N of a few tiles);
  - the split form, TileGym's (its GLU kernel, then its matmul): `gluact_gate_up` stores h
    (M, I) in (BM, BI) tiles to a scratch tensor, `gluact_down` multiplies it by W2^T.
Past the edges the loads read zeros: a padded intermediate column gates 0 * act(0) = 0 and
meets a zero row of W2, so ragged I and K add nothing, and the stores drop ragged rows.

`act` is compile-time: "silu", "relu" or "gelu_tanh" (TileGym's 'gelu' is its tanh form too).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ..autotune_ahead import compile_ahead_once
from .kernels_activation import gelu_f32, silu_f32
from .kernels_gemm import fitting_tiles, matmul_bt_tile
from .kernels_rows import kernel_of, size_class

ACTS = ("silu", "relu", "gelu_tanh")


@tile.function
def gated_tile(x, wa, wn, i, b, BM, BI, BK, act):
    """h's (BM, BI) tile (i, b) in f32: act(x @ wa^T) * (x @ wn^T) summed over K in steps of
    BK; `act` compile-time."""
    gate = tile.zeros((BM, BI), fl.f32)
    up = tile.zeros((BM, BI), fl.f32)
    for k in range(tile.num_tiles(x, 1, (BM, BK))):
        tx = tile.load(x, (i, k), (BM, BK))
        gate = tile.mma(tx, tile.load(wa, (k, b), (BK, BI), order=(1, 0)), gate)
        up = tile.mma(tx, tile.load(wn, (k, b), (BK, BI), order=(1, 0)), up)
    if act == "silu":  # compile-time
        g = silu_f32(gate)
    elif act == "relu":
        g = tile.maximum(gate, 0.0)
    else:
        g = gelu_f32(gate, True)
    return g * up


def make_gluact_fused(act, dt):
    """out (M, N) = (act(x @ wa^T) * (x @ wn^T)) @ w2^T, one block per (BM, BN) tile of out."""

    @tile.kernel
    def gluact_fused(
        out: tile.Part[dt],
        x: tile.Tensor[dt],
        wa: tile.Tensor[dt],
        wn: tile.Tensor[dt],
        w2: tile.Tensor[dt],
        BI: tile.Const[int],
        BK: tile.Const[int],
    ):
        BM, BN = out.shape
        i, j = out.index
        acc = tile.zeros((BM, BN), fl.f32)
        for b in range(tile.num_tiles(wa, 0, (BI, BK))):
            h = gated_tile(x, wa, wn, i, b, BM, BI, BK, act).astype(dt)
            acc = tile.mma(h, tile.load(w2, (b, j), (BI, BN), order=(1, 0)), acc)
        out.store(acc.astype(dt))

    return gluact_fused


def make_gluact_gate_up(act, dt):
    """h (M, I) = act(x @ wa^T) * (x @ wn^T), one block per (BM, BI) tile of h."""

    @tile.kernel
    def gluact_gate_up(
        h: tile.Part[dt],
        x: tile.Tensor[dt],
        wa: tile.Tensor[dt],
        wn: tile.Tensor[dt],
        BK: tile.Const[int],
    ):
        BM, BI = h.shape
        i, b = h.index
        h.store(gated_tile(x, wa, wn, i, b, BM, BI, BK, act).astype(dt))

    return gluact_gate_up


def make_gluact_down(dt):
    """out (M, N) = h @ w2^T for h (M, I) and w2 (N, I), one block per (BM, BN) tile of out."""

    @tile.kernel
    def gluact_down(
        out: tile.Part[dt], h: tile.Tensor[dt], w2: tile.Tensor[dt], BK: tile.Const[int]
    ):
        BM, BN = out.shape
        i, j = out.index
        out.store(matmul_bt_tile(h, w2, i, j, BM, BN, BK).astype(dt))

    return gluact_down


def _cfg(shape, bi, bk, occupancy, fused):
    return dict(shape=shape, bi=bi, bk=bk, occupancy=occupancy, fused=fused)


# (BM, BN) tiles of out, BI intermediate columns per step (the split form's h tiles are
# (BM, BI)), the K step, blocks per SM and the form. The first, the one taken untuned
# (FEARLESS_AUTOTUNE=0, or under capture with nothing stored), is TileGym's: the split form,
# (128, 128) tiles and K steps of 64 (its GLU kernel also takes K steps of 32 and (64, 64)
# tiles for small problems); the split form is safe at any width of out, where the fused one
# recomputes h per column tile. The fused form holds three f32 tiles (gate, up, out): its
# tiles are the smaller ones.
GLUACT_CONFIGS = [
    _cfg((128, 128), 128, 64, 1, False),
    _cfg((128, 128), 64, 64, 1, False),
    _cfg((128, 128), 128, 32, 1, False),
    _cfg((64, 128), 64, 64, 2, False),
    _cfg((64, 64), 64, 64, 4, False),
    _cfg((64, 64), 64, 64, 2, True),
    _cfg((64, 128), 64, 64, 2, True),
    _cfg((128, 64), 64, 64, 1, True),
    _cfg((128, 128), 64, 64, 1, True),
]

# The fused form recomputes h once per column tile of out: past this many, the split form's
# one extra pass over h in memory is the cheaper one, and the fused configurations are not
# timed.
FUSED_MAX_COLUMN_TILES = 4


def _key(act, x, wa, wn, w2, out, *_, **__):
    """The activation, M's size class, K, I, N (the dtype is the tuner's)."""
    return act, size_class(x.shape[0]), x.shape[1], wa.shape[0], w2.shape[0]


def _prune(configs, act, x, wa, wn, w2, out, *_, **__):
    """Tiles that fit out (M, N); the fused form only where out has few column tiles."""
    n = w2.shape[0]
    fit = fitting_tiles(configs, x.shape[0], n)
    keep = [c for c in fit if not c["fused"] or -(-n // c["shape"][1]) <= FUSED_MAX_COLUMN_TILES]
    return keep or fit


@fl.autotune(configs=GLUACT_CONFIGS, key=_key, prune=_prune)
def gluact_tuned(act, x, wa, wn, w2, out, scratch, *, shape, bi, bk, occupancy, fused):
    """out (M, N) = (act(x @ wa^T) * (x @ wn^T)) @ w2^T (fl.Tensors, one dtype); `scratch()`
    gives the split form's (M, I) intermediate."""
    if fused:
        kernel = kernel_of(make_gluact_fused, act, x.dtype).options(occupancy=occupancy)
        with out.partition(shape) as part:
            kernel(part, x, wa, wn, w2, bi, bk)
        return
    h = scratch()
    gate_up = kernel_of(make_gluact_gate_up, act, x.dtype).options(occupancy=occupancy)
    down = kernel_of(make_gluact_down, x.dtype).options(occupancy=occupancy)

    def launches():
        with h.partition((shape[0], bi)) as part:
            gate_up(part, x, wa, wn, bk)
        with out.partition(shape) as part:
            down(part, h, w2, bk)

    # the split form's two GEMMs compile side by side the first time (a table's winner is
    # not tuned, so no tuning pass compiled them together)
    form = (act, x.dtype, occupancy, shape, bi, bk, *_key(act, x, wa, wn, w2, out))
    compile_ahead_once(("gluact split", *form), launches)
    launches()
