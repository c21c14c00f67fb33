"""Shared memory, barriers and warp/block collectives on the GPU agree with the simulator, bit for
bit (float reductions included: the simulator adds in the GPU lowering's tree order)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
import support.collectives_kernels as C
import support.shared_kernels as S

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(2024)


def both(kernel: object, grid: int, block: int, x: np.ndarray, outs: list[np.ndarray]):  # type: ignore[no-untyped-def,type-arg]
    """The outputs on the simulator and on the GPU."""
    sim = [o.copy() for o in outs]
    fl.set_target("sim")
    kernel[grid, block](x, *sim)  # type: ignore[index]
    fl.set_target("cuda")
    dev = [fl.asarray(o) for o in outs]
    kernel[grid, block](fl.asarray(x), *dev)  # type: ignore[index]
    fl.synchronize()
    return sim, [d.numpy() for d in dev]


@pytest.mark.parametrize("n", [S.BLOCK, 64 * S.BLOCK])
def test_reverse_in_block(n: int) -> None:
    x = RNG.standard_normal(n).astype(np.float32)
    sim, gpu = both(S.reverse_in_block, n // S.BLOCK, S.BLOCK, x, [np.zeros(n, np.float32)])
    np.testing.assert_array_equal(gpu[0], sim[0])


@pytest.mark.parametrize("n", [77, 128, 100_003])
def test_block_sums_tree_in_shared_memory(n: int) -> None:
    x = RNG.standard_normal(n).astype(np.float32)
    grid = (n + S.BLOCK - 1) // S.BLOCK
    sim, gpu = both(S.block_sums, grid, S.BLOCK, x, [np.zeros(n, np.float32)])
    np.testing.assert_array_equal(gpu[0], sim[0])


def test_two_dimensional_shared_array() -> None:
    x = np.arange(300, dtype=np.int32)
    sim, gpu = both(S.rotate_2d, 3, S.BLOCK, x, [np.zeros(300, np.int32)])
    np.testing.assert_array_equal(gpu[0], sim[0])


def test_transpose_tiles_with_block_index_2d() -> None:
    x = RNG.standard_normal((64, 80)).astype(np.float32)
    sim = np.zeros_like(x)
    fl.set_target("sim")
    S.transpose_tiles[(5, 4), (16, 16)](x, sim)
    fl.set_target("cuda")
    dev = fl.asarray(np.zeros_like(x))
    S.transpose_tiles[(5, 4), (16, 16)](fl.asarray(x), dev)
    fl.synchronize()
    np.testing.assert_array_equal(dev.numpy(), sim)


@pytest.mark.parametrize("kernel,dtype", [(C.coll_f32, np.float32), (C.coll_i64, np.int64)])
def test_collectives_agree_bit_for_bit(kernel, dtype) -> None:  # type: ignore[no-untyped-def]
    if dtype == np.float32:
        x = (RNG.standard_normal(C.N) * 1e4).astype(dtype)  # rounding shows the order
    else:
        x = RNG.integers(-(2**40), 2**40, C.N).astype(dtype)
    outs = [np.zeros(C.N, dtype) for _ in range(8)]
    sim, gpu = both(kernel, C.N // C.BLOCK, C.BLOCK, x, outs)
    for k, (s, g) in enumerate(zip(sim, gpu, strict=True)):
        np.testing.assert_array_equal(g, s, err_msg=f"output {k}")


def test_warp_reduce_and_votes() -> None:
    x = RNG.integers(-50, 50, C.N).astype(np.int32)
    outs = [np.zeros(C.N, np.int32)] * 2 + [np.zeros(C.N, np.uint32)] * 3
    sim, gpu = both(C.coll_i32_votes, C.N // C.BLOCK, C.BLOCK, x, [o.copy() for o in outs])
    for k, (s, g) in enumerate(zip(sim, gpu, strict=True)):
        np.testing.assert_array_equal(g, s, err_msg=f"output {k}")
