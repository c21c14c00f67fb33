"""The Tile kernels behind `fearless.ops`' row operators (softmax, rms_norm, layer_norm, and
Liger's fused add + rms_norm), and their autotuned launches.

Each operator has one row helper (a plain function, inlined into the kernels that call it)
and a factory with its structural forms: one block per row tile, `persistent` (one wave of
blocks walking the row tiles, TileGym's static schedule), TMA loads, and, for softmax,
`chunk`ed rows for rows too long for registers (`out.chunks`). `ROW_CONFIGS` and
`SOFTMAX_CONFIGS` are the autotuner's spaces (the H200 sweeps in bench/results); the `*_tuned`
functions pick per shape and dtype, once, and keep the winner on disk. examples/tile_kernels.py
shows the same kernels as examples and `fearless bench --cases 'shapes_*'` measures them.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import functools
import math

import fearless as fl
from fearless import tile


@functools.cache
def kernel_of(make, *args, **kwargs):
    """`make(*args, **kwargs)`, made once: one kernel per factory and arguments, shared by every
    launch of fearless.ops that asks for it (configurations vary it with `.options(...)`)."""
    return make(*args, **kwargs)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def size_class(n):
    """An extent as the tuners' keys hold it: rounded up to a power of two (its exponent). An
    extent that varies from call to call (a batch, the tokens of a step, a sequence length)
    then tunes once per class, not per value; each new value still compiles only the winner."""
    return (n - 1).bit_length()


def rows_key(x, *_, **__):
    """The tuners' key of a row op on x (M, n): (M's size class, n)."""
    m, n = x.shape
    return size_class(m), n


def sm_count():
    """The GPU's SM count (a persistent grid is a multiple of it); 4 on the simulator."""
    if fl.get_target() != "cuda":
        return 4
    from fearless.runtime import driver

    return driver.device_info().sm_count


def memory_hints(mem):
    """(load latency, store allow_tma, store latency) of the row kernels: with `mem`,
    TileGym's rms_norm hints (row loads at latency 10, stores off TMA at latency 3; its comments
    measure +2%, +30% and +3% on the H200), else tileiras's defaults."""
    return (10, False, 3) if mem else (None, True, None)


@tile.function
def softmax_rows(x, at, tma, lat):
    """softmax of `x`'s rows at `at` (a Part, or a tile `part.tiles()` gave), in f32.

    The row goes straight to registers unless `tma`. The hardware exp and one division per
    row: the per-element exact exp and division would cost more than the memory traffic of a
    bf16 row."""
    rows = tile.load_like(x, at, padding=-math.inf, allow_tma=tma, latency=lat).astype(fl.f32)
    e = tile.exp(rows - tile.max(rows, axis=1, keepdims=True), approx=True)
    return e * (1.0 / tile.sum(e, axis=1, keepdims=True))


@tile.function
def softmax_chunked(x, at, CH, tma):
    """`softmax_rows` for rows too long for registers: one pass over the row's chunks of CH
    columns for its max and sum (online: the sum rescaled when the max grows), then one that
    writes each chunk. The second pass reads the row again, from L2 while it is recent."""
    BM, _ = at.shape
    m = tile.full((BM, 1), -math.inf, fl.f32)
    s = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        v = tile.load_like(x, c, padding=-math.inf, allow_tma=tma).astype(fl.f32)
        m_new = tile.maximum(m, tile.max(v, axis=1, keepdims=True))
        s = s * tile.exp(m - m_new, approx=True) + tile.sum(
            tile.exp(v - m_new, approx=True), axis=1, keepdims=True
        )
        m = m_new
    r = 1.0 / s
    for c in at.chunks((BM, CH)):
        v = tile.load_like(x, c, padding=-math.inf, allow_tma=tma).astype(fl.f32)
        c.store((tile.exp(v - m, approx=True) * r).astype(x.dtype))


def make_softmax(dt, tma=False, persistent=False, chunk=0, mem=False, **hints):
    """Row softmax: each block owns BM whole rows (BN, a power of two, covers a row); with
    `persistent`, one wave of blocks walks the row tiles (`out.tiles()`, launched with
    `kernel.launch(grid, ...)`); with `chunk`, long rows go through registers `chunk` columns
    at a time (`softmax_chunked`); `mem`: `memory_hints`. `hints` are tileiras's kernel hints:
    on the H200 they matter more than anything else here (bench/tile_bench.py sweeps them;
    results in bench/results/h200-2026-12-02-tile/)."""
    lat, st_tma, st_lat = memory_hints(mem)

    @tile.kernel(**hints)
    def softmax(out: tile.Part[dt], x: tile.Tensor[dt]):
        if chunk:  # compile-time: rows in chunks of `chunk` columns
            softmax_chunked(x, out, chunk, tma)
        elif persistent:  # compile-time: one wave of blocks walks the row tiles
            for t in out.tiles():
                y = softmax_rows(x, t, tma, lat).astype(dt)
                t.store(y, allow_tma=st_tma, latency=st_lat)
        else:
            y = softmax_rows(x, out, tma, lat).astype(dt)
            out.store(y, allow_tma=st_tma, latency=st_lat)

    return softmax


@tile.function
def rms_scaled(v, n, eps, wt):
    """v * rsqrt(mean(v^2) + eps) * wt for the f32 rows `v` of `n` (f32) real columns (the
    padded ones read 0 and add nothing to the mean)."""
    ms = tile.sum(v * v, axis=1, keepdims=True) / n
    return v * tile.rsqrt(ms + eps) * wt


@tile.function
def rms_norm_rows(x, at, wt, eps, tma, lat):
    """`rms_scaled` of `x`'s rows at `at`, in f32 (`wt`: the weight row, f32, loaded once per
    block by the kernel; loads as softmax_rows)."""
    n = x.shape[1].astype(fl.f32)
    v = tile.load_like(x, at, allow_tma=tma, latency=lat).astype(fl.f32)
    return rms_scaled(v, n, eps, wt)


def make_rms_norm(dt=fl.f32, tma=False, persistent=False, chunk=0, mem=False, **hints):
    """RMS norm per row, in f32 whatever `dt` (x, w and out are `dt`); the forms and hints of
    `make_softmax`. A persistent block loads the weight once for all its row tiles."""
    lat, st_tma, st_lat = memory_hints(mem)

    @tile.kernel(**hints)
    def rms_norm(out: tile.Part[dt], x: tile.Tensor[dt], w: tile.Tensor[dt], eps: fl.f32):
        _, BN = out.shape
        wt = tile.load(w, (0,), (BN,), allow_tma=tma).astype(fl.f32)
        if persistent:  # compile-time, as in make_softmax
            for t in out.tiles():
                y = rms_norm_rows(x, t, wt, eps, tma, lat).astype(dt)
                t.store(y, allow_tma=st_tma, latency=st_lat)
        else:
            y = rms_norm_rows(x, out, wt, eps, tma, lat).astype(dt)
            out.store(y, allow_tma=st_tma, latency=st_lat)

    return rms_norm


def make_add_rms_norm(dt=fl.f32, tma=False, mem=False, **hints):
    """Liger's fused add + RMS norm per row: s = x + r (the residual stream's sum, rounded to
    `dt` as an unfused add stores it) and y = rms_norm(s) * w in f32 whatever `dt`, one pass
    over memory for both; one block per row tile (two outputs of one tiling), the hints of
    `make_rms_norm`."""
    lat, st_tma, st_lat = memory_hints(mem)

    @tile.kernel(**hints)
    def add_rms_norm(
        out: tile.Part[dt],
        s: tile.Part[dt],
        x: tile.Tensor[dt],
        r: tile.Tensor[dt],
        w: tile.Tensor[dt],
        eps: fl.f32,
    ):
        _, BN = out.shape
        wt = tile.load(w, (0,), (BN,), allow_tma=tma).astype(fl.f32)
        xs = tile.load_like(x, out, allow_tma=tma, latency=lat).astype(fl.f32)
        rs = tile.load_like(r, out, allow_tma=tma, latency=lat).astype(fl.f32)
        v = (xs + rs).astype(dt)
        s.store(v, allow_tma=st_tma, latency=st_lat)
        y = rms_scaled(v.astype(fl.f32), x.shape[1].astype(fl.f32), eps, wt)
        out.store(y.astype(dt), allow_tma=st_tma, latency=st_lat)

    return add_rms_norm


@tile.function
def layer_norm_stats(v, n, eps):
    """(x - mean, mean, rstd) of the f32 rows `v` (BM, BN) of a tensor with `n` columns (the
    padded columns past n read 0 and come out 0), rstd = rsqrt(var + eps), the variance the
    mean of the centred squares (two passes over registers, no E[x^2] - mean^2 cancellation)."""
    _, BN = v.shape
    mean = tile.sum(v, axis=1, keepdims=True) / n.astype(fl.f32)
    d = tile.where(tile.arange(BN) < n, v - mean, 0.0)
    var = tile.sum(d * d, axis=1, keepdims=True) / n.astype(fl.f32)
    return d, mean, tile.rsqrt(var + eps)


@tile.function
def layer_norm_rows(x, at, wt, bt, eps, tma, lat):
    """(x - mean) * rsqrt(var + eps) * wt + bt for `x`'s rows at `at`, in f32 (`wt`, `bt` as
    rms_norm_rows' weight)."""
    v = tile.load_like(x, at, allow_tma=tma, latency=lat).astype(fl.f32)
    d, _, rstd = layer_norm_stats(v, x.shape[1], eps)
    return d * rstd * wt + bt


def make_layer_norm(dt=fl.f32, tma=False, persistent=False, chunk=0, mem=False, **hints):
    """Layer norm per row, in f32 whatever `dt`; the forms and hints of `make_rms_norm`."""
    lat, st_tma, st_lat = memory_hints(mem)

    @tile.kernel(**hints)
    def layer_norm(
        out: tile.Part[dt],
        x: tile.Tensor[dt],
        w: tile.Tensor[dt],
        b: tile.Tensor[dt],
        eps: fl.f32,
    ):
        _, BN = out.shape
        wt = tile.load(w, (0,), (BN,), allow_tma=tma).astype(fl.f32)
        bt = tile.load(b, (0,), (BN,), allow_tma=tma).astype(fl.f32)
        if persistent:  # compile-time, as in make_softmax
            for t in out.tiles():
                y = layer_norm_rows(x, t, wt, bt, eps, tma, lat).astype(dt)
                t.store(y, allow_tma=st_tma, latency=st_lat)
        else:
            y = layer_norm_rows(x, out, wt, bt, eps, tma, lat).astype(dt)
            out.store(y, allow_tma=st_tma, latency=st_lat)

    return layer_norm


def _row(rows, occupancy, num_worker_warps, persistent=False, tma=False, chunk=0, mem=False):
    return dict(rows=rows, occupancy=occupancy, num_worker_warps=num_worker_warps,
                persistent=persistent, tma=tma, chunk=chunk, mem=mem)  # fmt: skip


ROW_CONFIGS = [
    _row(1, 8, None),
    _row(1, 4, 8),
    _row(1, 2, 8),
    _row(1, 1, 16),
    _row(2, 4, None),
    _row(4, 4, 8),
    # structural variants: one wave of blocks walking the rows (TileGym's static persistent
    # schedule: grid = SMs x occupancy), and TMA loads
    _row(1, 4, None, persistent=True),
    _row(1, 4, 8, persistent=True),
    _row(2, 4, None, persistent=True),
    _row(1, 2, 8, tma=True),
    _row(1, 4, None, persistent=True, tma=True),
    # TileGym's rms_norm: one block per SM walking tiles of 16 / 4 / 2 rows (short / middling
    # / long rows), with its memory hints (`memory_hints`); and the hints on our best forms
    _row(16, 1, None, persistent=True, mem=True),
    _row(4, 1, None, persistent=True, mem=True),
    _row(2, 1, None, persistent=True, mem=True),
    _row(2, 4, None, mem=True),
    _row(1, 4, 8, mem=True),
    # TileGym's persistent layer norm on long rows: one block per SM, 8 worker warps (its
    # nww=8 "large win"), one row per tile; with and without its memory hints
    _row(1, 1, 8, persistent=True),
    _row(1, 2, 8, persistent=True),
    _row(1, 1, 8, persistent=True, mem=True),
]
# Long softmax rows in chunks (softmax_chunked): a row of 16384 bf16 does not fit registers.
SOFTMAX_CONFIGS = [
    *ROW_CONFIGS,
    _row(1, 4, None, chunk=4096),
    _row(1, 2, 8, chunk=4096),
    _row(1, 4, None, chunk=2048),
]


ROW_FACTORIES = {"softmax": None, "rms_norm": None, "layer_norm": None}  # set below


def prepare_rows(
    op,
    out,
    x,
    *rest,
    rows,
    occupancy,
    num_worker_warps,
    persistent=False,
    tma=False,
    chunk=0,
    mem=False,
):
    """The launch of row kernel `op` with one configuration, prepared: (launch, partition).
    `launch()` runs it again on the same arguments; `partition.unpartition()` ends it. The
    `*_tuned` functions call it once per call; the benchmark times `launch` itself."""
    x, out = fl.asarray(x), fl.asarray(out)
    n = next_pow2(x.shape[1])
    if rows > 1 and rows * n * x.dtype.itemsize > 32768:
        raise fl.LaunchContractError(f"{rows} rows of {n} do not fit one block's registers")
    chunk = min(chunk, n)
    make = ROW_FACTORIES[op]
    kernel = kernel_of(make, x.dtype, tma=tma, persistent=persistent, chunk=chunk, mem=mem).options(
        occupancy=occupancy, num_worker_warps=num_worker_warps
    )
    part = out.partition((rows, n))
    args = (part, x, *[fl.asarray(r) if hasattr(r, "shape") else r for r in rest])
    if not persistent:
        return (lambda: kernel(*args)), part
    grid = max(1, min(math.ceil(x.shape[0] / rows), sm_count() * (occupancy or 1)))
    return (lambda: kernel.launch(grid, *args)), part


def _row_launch(op, out, x, *rest, **config):
    launch, part = prepare_rows(op, out, x, *rest, **config)
    with part:  # a configuration the tuner tries may fail to compile: `out` is given back
        launch()


@fl.autotune(configs=SOFTMAX_CONFIGS, key=rows_key)
def softmax_tuned(x, out, **config):
    """out = softmax(x, axis=1) for a 2-D x of any dtype the kernel takes (f32, f16, bf16)."""
    _row_launch("softmax", out, x, **config)


@fl.autotune(configs=ROW_CONFIGS, key=rows_key)
def rms_norm_tuned(x, w, eps, out, **config):
    _row_launch("rms_norm", out, x, w, eps, **config)


@fl.autotune(configs=ROW_CONFIGS, key=rows_key)
def layer_norm_tuned(x, w, b, eps, out, **config):
    _row_launch("layer_norm", out, x, w, b, eps, **config)


ROW_FACTORIES.update(softmax=make_softmax, rms_norm=make_rms_norm, layer_norm=make_layer_norm)
# add_rms_norm's two outputs share one tiling: one block per row tile, no persistent walk
ADD_NORM_CONFIGS = [c for c in ROW_CONFIGS if not c["persistent"]]


@fl.autotune(configs=ADD_NORM_CONFIGS, key=rows_key)
def add_rms_norm_tuned(x, r, w, eps, out, s, *, rows, occupancy, num_worker_warps, tma, mem, **_):
    """out = rms_norm(s) * w and s = x + r for 2-D x, r, out, s of one dtype (f32, f16, bf16)."""
    n = next_pow2(x.shape[1])
    if rows > 1 and rows * n * x.dtype.itemsize > 32768:
        raise fl.LaunchContractError(f"{rows} rows of {n} do not fit one block's registers")
    kernel = kernel_of(make_add_rms_norm, x.dtype, tma=tma, mem=mem).options(
        occupancy=occupancy, num_worker_warps=num_worker_warps
    )
    with out.partition((rows, n)) as op, s.partition((rows, n)) as sp:
        kernel(op, sp, x, r, w, eps)
