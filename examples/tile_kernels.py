"""Tile-track examples: vecadd, saxpy, row softmax, matmul, rms_norm, layer_norm, transpose, a
sum reduction, and the launch-overhead kernels fill_ones and add7.

Each kernel runs on the simulator anywhere and compiles through tileiras to a cubin with no
GPU (`fearless compile examples/tile_kernels.py --arch sm_90`). Kernels whose dtypes vary are
made by small factories; the module-level names are the kernels `fearless inspect` finds.

    python examples/tile_kernels.py      # runs each one (GPU if usable, else the simulator)
"""

import numpy as np

import fearless as fl
from fearless import tile

# The row and GEMM kernels live in fearless.ops (its operators run them, autotuned): their
# factories, helpers, configuration spaces and tuned launches, used here as examples.
from fearless.ops.kernels_gemm import (  # noqa: F401
    GEMM_CONFIGS,
    make_matmul,
    make_matmul_persistent,
    matmul_tile,
    matmul_tuned,
    prepare_matmul,
)
from fearless.ops.kernels_rows import (  # noqa: F401
    ROW_CONFIGS,
    SOFTMAX_CONFIGS,
    layer_norm_rows,
    layer_norm_tuned,
    make_layer_norm,
    make_rms_norm,
    make_softmax,
    next_pow2,
    prepare_rows,
    rms_norm_rows,
    rms_norm_tuned,
    softmax_chunked,
    softmax_rows,
    softmax_tuned,
)


@tile.kernel
def vecadd(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


# Tuned for the suite's shapes: f32 rows of 1024 and bf16 rows of 8192, one row per block.
softmax_f32 = make_softmax(fl.f32, occupancy=8)
softmax_bf16 = make_softmax(fl.bf16, occupancy=4, num_worker_warps=8)


matmul_f16 = make_matmul(fl.f16)
matmul_bf16 = make_matmul(fl.bf16)


# Like softmax, the norms load rows straight to registers; occupancy=8 suits rows of 1024 f32.
rms_norm = make_rms_norm(occupancy=8)
layer_norm = make_layer_norm(occupancy=8)


@tile.kernel
def saxpy(out: tile.Part[fl.f32], alpha: fl.f32, x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    out.store(alpha * tile.load_like(x, out) + tile.load_like(y, out))


@tile.kernel
def transpose(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out = x.T: out's (BM, BN) tile (i, j) is the transpose of x's (BN, BM) tile (j, i)."""
    BM, BN = out.shape
    i, j = out.index
    out.store(tile.transpose(tile.load(x, (j, i), (BN, BM))))


@tile.kernel
def sum_tiles(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], TILE: tile.Const[int]):
    """out[p] = the sum of x's TILE-element tiles p, p + P, p + 2P, ... (P = len(out)).

    `out` is partitioned into 1-element tiles, one block each, so a whole sum is two launches:
    into P partials, then with `out` of one element and the partials as `x`. Sums in f32."""
    acc = tile.zeros((TILE,), fl.f32)
    for k in range(tile.block_id(0), tile.num_tiles(x, 0, (TILE,)), tile.num_blocks(0)):
        acc = acc + tile.load(x, (k,), (TILE,))
    out.store(tile.sum(acc))


@tile.kernel
def fill_ones(z: tile.Part[fl.f32]):
    z.store(tile.full(z.shape, 1.0, fl.f32))


@tile.kernel
def add7(
    z: tile.Part[fl.f32],
    a: tile.Tensor[fl.f32],
    b: tile.Tensor[fl.f32],
    c: tile.Tensor[fl.f32],
    d: tile.Tensor[fl.f32],
    e: tile.Tensor[fl.f32],
    f: tile.Tensor[fl.f32],
    g: tile.Tensor[fl.f32],
):
    s = tile.load_like(a, z) + tile.load_like(b, z) + tile.load_like(c, z)
    s = s + tile.load_like(d, z) + tile.load_like(e, z) + tile.load_like(f, z)
    z.store(s + tile.load_like(g, z))


# Launches that `fearless compile examples/tile_kernels.py --arch sm_90` prepares ahead of time
# (no GPU needed): the benchmark suite's shapes. A specialisation depends on the tile shape,
# the Consts and how the extents divide (by up to 16 bytes), not on the extents themselves, so
# each cubin also serves every other launch whose extents divide the same way.
_f32_rows = tile.Spec((65536, 1024), fl.f32)
vecadd.specialise(
    tile.Spec((1 << 28,), fl.f32).partition((1024,)),
    tile.Spec((1 << 28,), fl.f32),
    tile.Spec((1 << 28,), fl.f32),
)
softmax_f32.specialise(_f32_rows.partition((1, 1024)), _f32_rows)
softmax_bf16.specialise(
    tile.Spec((8192, 8192), fl.bf16).partition((1, 8192)), tile.Spec((8192, 8192), fl.bf16)
)
rms_norm.specialise(_f32_rows.partition((1, 1024)), _f32_rows, tile.Spec((1024,), fl.f32), fl.f32)
layer_norm.specialise(
    _f32_rows.partition((1, 1024)),
    _f32_rows,
    tile.Spec((1024,), fl.f32),
    tile.Spec((1024,), fl.f32),
    fl.f32,
)
for _mm, _dt in ((matmul_f16, fl.f16), (matmul_bf16, fl.bf16)):
    _sq = tile.Spec((8192, 8192), _dt)
    _mm.specialise(_sq.partition((128, 128)), _sq, _sq, 64)
_vec = tile.Spec((1 << 28,), fl.f32)
saxpy.specialise(_vec.partition((1024,)), fl.f32, _vec, _vec)
_tall, _wide = tile.Spec((16384, 4096), fl.f32), tile.Spec((4096, 16384), fl.f32)
transpose.specialise(_tall.partition((64, 64)), _wide)
# The sum's two launches: 2^28 into 1024 partials in tiles of 4096, then the partials into one.
_partials = tile.Spec((1024,), fl.f32)
sum_tiles.specialise(_partials.partition((1,)), _vec, 4096)
sum_tiles.specialise(tile.Spec((1,), fl.f32).partition((1,)), _partials, 1024)
# The launch-overhead cases: arrays of 1024 elements, one tile each.
_small = tile.Spec((1024,), fl.f32)
fill_ones.specialise(_small.partition((1024,)))
add7.specialise(_small.partition((1024,)), *[_small] * 7)


def main() -> None:
    rng = np.random.default_rng(0)
    x = fl.asarray(rng.standard_normal(1000).astype(np.float32))
    y = fl.asarray(rng.standard_normal(1000).astype(np.float32))
    zp = fl.empty(1000, dtype=fl.f32).partition((256,))
    vecadd(zp, x, y)
    print("vecadd max error:", np.abs(zp.unpartition().numpy() - (x.numpy() + y.numpy())).max())

    m, n = 100, 300
    a = fl.asarray(rng.standard_normal((m, n)).astype(np.float32))
    op = fl.empty((m, n), dtype=fl.f32).partition((4, next_pow2(n)))
    softmax_f32(op, a)
    ref = np.exp(a.numpy() - a.numpy().max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    print("softmax max error:", np.abs(op.unpartition().numpy() - ref).max())


if __name__ == "__main__":
    main()
