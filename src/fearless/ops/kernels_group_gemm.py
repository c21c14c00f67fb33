"""The Tile kernel behind `fearless.ops.group_gemm`: every group's product in one persistent
launch (TileGym's group_gemm), and its autotuned launch.

The kernel takes the groups as tuple parameters (tile/tuples.py): `cs`, `a_s` and `bs` hold
one array per group (at most `GROUPS_PER_LAUNCH`), and the kernel is compiled per group count, its body unrolled over the
groups (`tile.static_iter`). One wave of blocks walks the groups' tiles as one list: group g's
walk goes on where group g - 1's ended (`c.tiles(offset=done)`), so a block that finished its
share of a small group takes the next group's tiles at once, and every SM has work while any
group has tiles left. Each group's output is its own Part, so the writes are disjoint by the
same rule as a single GEMM's.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_gemm import _gemm, fitting_tiles, matmul_tile, persistent_grid
from .kernels_rows import kernel_of, size_class

# The groups one launch takes: the body is unrolled per group, and its tileiras compile grows
# faster than the groups (one 1024^3 f16 group 0.6 s, 4 groups 3.0 s, 16 groups 19.1 s on
# this repository's 2-core CPU machine), while 4 groups of small products already fill the
# GPU's SMs that one alone leaves idle. More groups go in launches of 4 (functional.py), which
# share one compiled kernel where their shapes' alignments agree.
GROUPS_PER_LAUNCH = 4
# A group is small when its M x N output is at most one (128, 128) tile per SM: launched alone
# it would leave SMs idle, which a launch of several groups fills.
SMALL_TILE = 128 * 128


def make_group_gemm(dt):
    """cs[g] = a_s[g] @ bs[g] for every group g, in `dt` with f32 accumulation."""

    @tile.kernel
    def group_gemm(
        cs: tuple[tile.Part[dt], ...],
        a_s: tuple[tile.Tensor[dt], ...],
        bs: tuple[tile.Tensor[dt], ...],
        BK: tile.Const[int],
    ):
        done = 0  # the tiles of the groups before this one
        for g in tile.static_iter(range(len(cs))):
            c = cs[g]
            BM, BN = c.shape
            for t in c.tiles(offset=done):
                i, j = t.index
                t.store(matmul_tile(a_s[g], bs[g], i, j, BM, BN, BK).astype(dt))
            done = done + tile.num_tiles(c, 0, (BM, BN)) * tile.num_tiles(c, 1, (BM, BN))

    return group_gemm


def _group(shape, BK, occupancy, num_ctas, num_worker_warps=None):
    return dict(_gemm(shape, BK, occupancy, num_ctas, persistent=True),
                num_worker_warps=num_worker_warps)  # fmt: skip


# Persistent GEMM configurations (kernels_gemm.py's), and smaller tiles for small groups: five,
# as each compiles the whole unrolled body (a new size class tunes them side by side). With two
# or more groups tileiras lays the large tiles out on 168 registers a thread and spills 144 to
# 184 bytes (one group: 255 registers, nothing spilled); on 8 worker warps nothing spills
# (4 groups of (128, 128) or (256, 128) tiles, sm_90 cubins read on the CPU, session 27), and
# tileiras takes half the time (4 groups of 1024^3 in (128, 128) tiles: 1.68 s against 3.19).
GROUP_GEMM_CONFIGS = [
    _group((128, 128), 64, 1, None, 8),
    _group((256, 128), 64, None, 2, 8),
    _group((128, 128), 64, 2, None),
    _group((64, 128), 64, 2, None),
    _group((64, 64), 64, 4, None),
]


def _group_key(a_s, bs, *_, **__):
    """The dtype, then per group (M's size class, K, N), as matmul's key."""
    groups = tuple(
        (size_class(a.shape[0]), a.shape[1], b.shape[1]) for a, b in zip(a_s, bs, strict=True)
    )
    return a_s[0].dtype.name, groups


def _group_prune(configs, a_s, bs, *_, **__):
    """The tiles that fit the largest group (matmul's pruning)."""
    return fitting_tiles(configs, max(a.shape[0] for a in a_s), max(b.shape[1] for b in bs))


@fl.autotune(configs=GROUP_GEMM_CONFIGS, key=_group_key, prune=_group_prune)
def group_gemm_tuned(a_s, bs, cs, *, shape, BK, occupancy, num_ctas, persistent, num_worker_warps):
    """cs[g] = a_s[g] @ bs[g] for every group, in one launch (fl.Tensors of one dtype)."""
    del persistent  # every configuration here is
    kernel = kernel_of(make_group_gemm, a_s[0].dtype).options(
        occupancy=occupancy, num_ctas=num_ctas, num_worker_warps=num_worker_warps
    )
    parts = []
    try:  # a configuration the tuner tries may fail to compile: `cs` are the caller's again
        for c in cs:
            parts.append(c.partition(shape, order=tile.grouped(8)))
        tiles = sum(math.ceil(c.shape[0] / shape[0]) * math.ceil(c.shape[1] / shape[1]) for c in cs)
        grid = persistent_grid(tiles, occupancy, num_ctas)
        kernel.launch(grid, tuple(parts), tuple(a_s), tuple(bs), BK)
    finally:
        for p in parts:
            p.unpartition()
