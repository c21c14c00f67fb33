"""The Tile kernels behind `fearless.ops.matmul` and `bmm`, and their autotuned launches.

`matmul_tile` is one (BM, BN) tile of A @ B accumulated in f32 (a plain function, inlined),
`matmul_bt_tile` the same of A @ B^T (the linear layers' kernels share it);
`make_matmul` runs one block per tile of C in the grouped order (TileGym's swizzle), and
`make_matmul_persistent` one wave of blocks walking C's tiles; `mm` is an mma on operands of
`mma_operands` (the delta rule's and Mamba-2's f32 tiles). `GEMM_CONFIGS` is the
autotuner's space (tile shape, K step, occupancy, clusters, persistent), with TileGym's SM90
configurations in it.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from ._io import view
from .kernels_rows import kernel_of, size_class, sm_count


def mma_operands(dt):
    """The mma operand type of kernels that compute on f32 tiles made from inputs of `dt`:
    tf32 for 16-bit inputs (the tensor cores; tileiras assembles an f32 x f32 mma from scalar
    FMAs, which spill: the delta rule's chunk kernels took 5 to 10 s of tileiras each, Mamba-2's
    chunk_grads 4 to 5 minutes and 3 MB of cubin, bench/experiments/compile_slow_kernels.py),
    f32 for f32 inputs (their tolerance is f32's)."""
    return fl.tf32 if dt in (fl.bf16, fl.f16) else fl.f32


@tile.function
def mm(a, b, acc, MX):
    """a @ b + acc with a and b as `MX` (`mma_operands`)."""
    return tile.mma(a.astype(MX), b.astype(MX), acc)


@tile.function
def matmul_tile(a, b, i, j, BM, BN, BK):
    """Tile (i, j) of A @ B, (BM, BN) accumulated in f32 over K in steps of BK: a plain
    function, inlined into the kernels that call it."""
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 1, (BM, BK))):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    return acc


@tile.function
def matmul_bt_tile(a, b, i, j, BM, BN, BK):
    """Tile (i, j) of A @ B^T, (BM, BN) accumulated in f32 over K in steps of BK: B (N, K), a
    weight in torch's (out, in) layout, is read transposed by its load (`order=(1, 0)`, a
    (BK, BN) tile of B^T), never copied."""
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 1, (BM, BK))):
        bt = tile.load(b, (k, j), (BK, BN), order=(1, 0))
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), bt, acc)
    return acc


def make_matmul(dt):
    """C = A @ B with A, B and C in `dt` and the product accumulated in f32 (as torch.matmul)."""

    @tile.kernel
    def matmul(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        BM, BN = c.shape
        i, j = c.index
        c.store(matmul_tile(a, b, i, j, BM, BN, BK).astype(dt))

    return matmul


def _gemm(shape, BK, occupancy, num_ctas, persistent=False):
    return dict(shape=shape, BK=BK, occupancy=occupancy, num_ctas=num_ctas,
                persistent=persistent)  # fmt: skip


GEMM_CONFIGS = [
    _gemm((128, 128), 64, 2, None),
    _gemm((128, 128), 64, 1, None),
    _gemm((128, 128), 32, 2, None),
    _gemm((256, 128), 64, None, 2),
    _gemm((128, 256), 64, None, 2),
    _gemm((64, 128), 64, 2, None),
    # M = N = K = 1024 on the H200: 8.8 us (f16) and 9.5 us (bf16) against cuBLAS's 9.4 and
    # 9.2 (bench/experiments/gemm_small.py); the configurations above take 10.3 to 11.4
    _gemm((64, 128), 64, 1, None),
    _gemm((64, 64), 64, 4, None),  # small problems: more blocks than SMs
    # TileGym's SM90 spaces: large tiles over clusters of 2 and 4
    _gemm((256, 256), 64, 1, 2),
    _gemm((256, 256), 64, 1, 4),
    _gemm((512, 256), 64, 1, 2),
    # persistent and grouped (8 rows of tiles per group): one wave of blocks loops over tiles
    _gemm((128, 128), 64, 2, None, persistent=True),
    _gemm((128, 128), 64, 1, None, persistent=True),
    _gemm((256, 128), 64, None, 2, persistent=True),
    _gemm((256, 256), 64, 1, 2, persistent=True),
    _gemm((128, 512), 64, 1, 4, persistent=True),
    _gemm((256, 256), 128, 1, 2, persistent=True),
]


def make_matmul_persistent(dt):
    """`make_matmul`, persistent: each block walks its tiles of C (`c.tiles()`), so a launch
    on one wave of blocks (`matmul.launch(grid, ...)`) loops instead of launching a block per
    tile; with `order=tile.grouped(8)` on C, neighbouring tiles share A rows and B columns."""

    @tile.kernel
    def matmul(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        for t in c.tiles():
            i, j = t.index
            BM, BN = t.shape
            t.store(matmul_tile(a, b, i, j, BM, BN, BK).astype(dt))

    return matmul


def prepare_matmul(a, b, c, *, shape, BK, occupancy, num_ctas, persistent):
    """The launch of c = a @ b with one configuration, prepared: (launch, partition of c)."""
    a, b, c = fl.asarray(a), fl.asarray(b), fl.asarray(c)
    make = make_matmul_persistent if persistent else make_matmul
    if not persistent:
        num_ctas = dividing_cluster(c.shape[0], shape[0], num_ctas)
    kernel = kernel_of(make, a.dtype).options(occupancy=occupancy, num_ctas=num_ctas)
    part = c.partition(shape, order=tile.grouped(8))  # TileGym's swizzle: L2 reuse
    if not persistent:
        return (lambda: kernel(part, a, b, BK)), part
    tiles = math.ceil(c.shape[0] / shape[0]) * math.ceil(c.shape[1] / shape[1])
    grid = persistent_grid(tiles, occupancy, num_ctas)
    return (lambda: kernel.launch(grid, part, a, b, BK)), part


def persistent_grid(tiles, occupancy, num_ctas):
    """The grid of a persistent GEMM over `tiles` output tiles: one wave of blocks (the SMs
    times `occupancy`, whole clusters of `num_ctas`), fewer where there are fewer tiles."""
    clusters = num_ctas or 1
    return max(1, min(tiles, sm_count() * (occupancy or 1) // clusters * clusters))


def dividing_cluster(extent, tile_rows, num_ctas):
    """The `num_ctas` a launch runs with whose grid's axis x takes `extent` in tiles of
    `tile_rows`: `num_ctas` where its clusters divide those blocks, else None (no cluster; a
    cluster of 2 over an odd count cannot launch, E0700). A tuned winner serves every call of
    its key, whose extents (M's size class) hold odd counts of tile rows beside even ones:
    such a call runs the winner's tiles unclustered instead of failing."""
    blocks = -(-extent // tile_rows)
    return num_ctas if num_ctas and blocks % num_ctas == 0 else None


def clustered(configs, rows):
    """The configurations whose clusters divide an output of `rows` rows split in their tiles'
    rows, all of them where none do: at an odd count of tile rows a clustered configuration
    would run as its unclustered twin (`dividing_cluster`), which the tuner need not time
    twice. A persistent configuration's grid is whole clusters (`persistent_grid`): kept."""
    kept = [
        c
        for c in configs
        if not c["num_ctas"]
        or c.get("persistent")
        or dividing_cluster(rows, c["shape"][0], c["num_ctas"])
    ]
    return kept or configs


def fitting_tiles(configs, m, n):
    """The configurations whose (BM, BN) tiles fit an M x N output (each extent rounded up to
    a power of two, 64 at least): a tile past the problem in an axis only pads, so it cannot
    beat one that fits (issue 37's pruning). The smallest tiles when none fit."""
    m, n = max(64, 1 << size_class(m)), max(64, 1 << size_class(n))
    fit = [c for c in configs if c["shape"][0] <= m and c["shape"][1] <= n]
    if fit:
        return fit
    least = min(c["shape"][0] * c["shape"][1] for c in configs)
    return [c for c in configs if c["shape"][0] * c["shape"][1] == least]


def _gemm_prune(configs, a, b, *_, **__):
    """matmul's pruning: by M's size class (the key's) and N, and clusters that divide M's
    tiles."""
    return clustered(fitting_tiles(configs, a.shape[0], b.shape[1]), a.shape[0])


def _gemm_key(a, b, *_, **__):
    """(M's size class, K, N): M is the extent that varies between calls (tokens, batch)."""
    return size_class(a.shape[0]), a.shape[1], b.shape[1]


@fl.autotune(configs=GEMM_CONFIGS, key=_gemm_key, prune=_gemm_prune)
def matmul_tuned(a, b, c, *, shape, BK, occupancy, num_ctas, persistent):
    """c = a @ b (f16 or bf16, f32 accumulation) with the fastest tiles for these shapes."""
    launch, part = prepare_matmul(a, b, c, shape=shape, BK=BK, occupancy=occupancy,
                                  num_ctas=num_ctas, persistent=persistent)  # fmt: skip
    with part:  # a configuration the tuner tries may fail to compile: `c` is the caller's again
        launch()


@tile.function
def bmm_tile(a, b, z, i, j, BM, BN, BK):
    """Tile (i, j) of batch z of A @ B, accumulated in f32 over K in steps of BK."""
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 2, (1, BM, BK))):
        ta = tile.load(a, (z, i, k), (1, BM, BK)).reshape((BM, BK))
        tb = tile.load(b, (z, k, j), (1, BK, BN)).reshape((BK, BN))
        acc = tile.mma(ta, tb, acc)
    return acc


def make_bmm(dt):
    """C[z] = A[z] @ B[z] for a batch of matrices: one block per (1, BM, BN) tile of C."""

    @tile.kernel
    def bmm(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        _, BM, BN = c.shape
        z, i, j = c.index
        c.store(bmm_tile(a, b, z, i, j, BM, BN, BK).astype(dt).reshape((1, BM, BN)))

    return bmm


@tile.function
def bmm_flat_tile(a, b, i, j, BM, BN, BK):
    """Tile (i, j) of the batch folded into rows: A (B * M, K) row tile i is batch
    i // (M / BM), whose B (B, K, N) it multiplies; f32 sums over K in steps of BK."""
    z = i // (a.shape[0] // b.shape[0] // BM)
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.num_tiles(a, 1, (BM, BK))):
        tb = tile.load(b, (z, k, j), (1, BK, BN)).reshape((BK, BN))
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tb, acc)
    return acc


def make_bmm_flat(dt, persistent):
    """C[z] = A[z] @ B[z] with the batch folded into C's rows, C (B * M, N) and A (B * M, K)
    viewed 2-D (BM divides M, so no tile straddles two batches): C's tiles then take
    matmul's grouped order (L2 reuse across a batch's tiles) and, `persistent`, its one wave
    of blocks walking them (TileGym's static persistent bmm)."""

    @tile.kernel
    def bmm_flat(c: tile.Part[dt], a: tile.Tensor[dt], b: tile.Tensor[dt], BK: tile.Const[int]):
        if persistent:  # compile-time
            for t in c.tiles():
                i, j = t.index
                BM, BN = t.shape
                t.store(bmm_flat_tile(a, b, i, j, BM, BN, BK).astype(dt))
        else:
            BM, BN = c.shape
            i, j = c.index
            c.store(bmm_flat_tile(a, b, i, j, BM, BN, BK).astype(dt))

    return bmm_flat


def _flat(config):
    return dict(config, flat=True)


# The batched (1, BM, BN) kernel first (it takes every shape); the flat forms, which take the
# GEMM space's best forms (clusters, 256-wide tiles, persistent, grouped), where BM divides M.
BMM_CONFIGS = [
    *(
        dict(config, flat=False)
        for config in (
            _gemm((128, 128), 64, 2, None),
            _gemm((128, 128), 64, 1, None),
            _gemm((64, 128), 64, 2, None),
            _gemm((128, 256), 64, 1, None),
            _gemm((64, 64), 64, 4, None),
        )
    ),
    _flat(_gemm((128, 128), 64, 2, None)),
    _flat(_gemm((256, 128), 64, None, 2)),
    _flat(_gemm((128, 256), 64, None, 2)),
    _flat(_gemm((256, 256), 64, 1, 2)),
    _flat(_gemm((128, 128), 64, 2, None, persistent=True)),
    _flat(_gemm((256, 256), 64, 1, 2, persistent=True)),
]


def _bmm_key(a, b, *_, **__):
    return size_class(a.shape[0]), size_class(a.shape[1]), a.shape[2], b.shape[2]


def _bmm_prune(configs, a, b, *_, **__):
    """bmm's pruning: by M's size class (the key's) and N."""
    return fitting_tiles(configs, a.shape[1], b.shape[2])


@fl.autotune(configs=BMM_CONFIGS, key=_bmm_key, prune=_bmm_prune)
def bmm_tuned(a, b, c, *, shape, BK, occupancy, num_ctas, persistent, flat):
    """c = a @ b batched over the first axis (B, M, K) @ (B, K, N), f32 accumulation; a flat
    configuration runs the batched kernel where its BM does not divide M."""
    batch, m, k = a.shape
    if flat and m % shape[0] == 0:
        c2, a2 = view(c, (batch * m, c.shape[2])), view(a, (batch * m, k))
        if not persistent:
            num_ctas = dividing_cluster(batch * m, shape[0], num_ctas)
        make = kernel_of(make_bmm_flat, a.dtype, persistent)
        kernel = make.options(occupancy=occupancy, num_ctas=num_ctas)
        with c2.partition(shape, order=tile.grouped(8)) as part:  # as in matmul_tuned
            if persistent:
                tiles = math.ceil(batch * m / shape[0]) * math.ceil(c.shape[2] / shape[1])
                kernel.launch(persistent_grid(tiles, occupancy, num_ctas), part, a2, b, BK)
            else:
                kernel(part, a2, b, BK)
        return
    num_ctas = dividing_cluster(batch, 1, num_ctas)  # the batched grid's axis x: the batch
    with c.partition((1, *shape)) as part:  # as in matmul_tuned
        kernel = kernel_of(make_bmm, a.dtype).options(occupancy=occupancy, num_ctas=num_ctas)
        kernel(part, a, b, BK)
