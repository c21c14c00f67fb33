"""`for c in out.chunks(shape):` (issue 11): a block reads and writes its own tile in chunks,
for rows too long for registers. Chunks stay inside the block's tile, so ownership holds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tile_kernels

import fearless as fl
from fearless import config, tile


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@tile.kernel
def mark_chunks(out: tile.Part[fl.i32], CH: tile.Const[int]):
    """Each element: 1000 * its chunk's row index + its chunk's column index."""
    BM, _ = out.shape
    for c in out.chunks((BM, CH)):
        i, j = c.index
        c.store(tile.full((BM, CH), 0, fl.i32) + i * 1000 + j)


@tile.kernel
def doubled_in_chunks(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for t in out.tiles():
        for c in t.chunks((2, 8)):
            c.store(tile.load_like(x, c) * 2.0)


@pytest.mark.parametrize(("tile_shape", "ch"), [((2, 64), 16), ((4, 32), 32), ((1, 128), 8)])
def test_chunk_indices_cover_the_tile(tile_shape: tuple[int, int], ch: int) -> None:
    part = fl.full((6, 100), -1, dtype=fl.i32).partition(tile_shape)
    mark_chunks(part, ch)
    rows, cols = np.indices((6, 100))
    assert np.array_equal(part.unpartition().numpy(), 1000 * (rows // tile_shape[0]) + cols // ch)


@pytest.mark.parametrize("grid", [1, 3])
def test_chunks_of_a_persistent_tile(grid: int) -> None:
    x = np.arange(10 * 50, dtype=np.float32).reshape(10, 50)
    part = fl.full(x.shape, np.nan).partition((4, 32))
    doubled_in_chunks.launch(grid, part, fl.asarray(x))
    assert np.array_equal(part.unpartition().numpy(), 2 * x)


@pytest.mark.parametrize("dt", [fl.f32, fl.bf16])
def test_the_chunked_softmax_example(dt: fl.DType) -> None:
    x = np.random.default_rng(0).standard_normal((5, 3000)).astype(np.float32)
    kernel = tile_kernels.make_softmax(dt, chunk=1024)
    part = fl.empty(x.shape, dtype=dt).partition((1, 4096))
    kernel(part, fl.asarray(x, dtype=dt))
    got = part.unpartition().numpy()
    if dt == fl.bf16:
        got = got.astype(np.float32)  # ml_dtypes' bfloat16
        x = fl.asarray(x, dtype=dt).numpy().astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    tol = 1e-2 if dt == fl.bf16 else 1e-5
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=tol, atol=tol * 1e-2)


def test_chunks_must_split_the_tile() -> None:
    with pytest.raises(fl.KernelTypeError, match=r"chunks of shape \(2, 256\) do not split"):
        mark_chunks(fl.zeros((6, 100), dtype=fl.i32).partition((2, 64)), 256)


def test_a_chunk_stores_a_chunk_sized_tile() -> None:
    @tile.kernel
    def wrong(out: tile.Part[fl.f32]):
        for c in out.chunks((1, 16)):
            c.store(tile.zeros((2, 16), fl.f32))

    with pytest.raises(fl.KernelTypeError, match=r"whose chunks are \(1, 16\)"):
        wrong(fl.zeros((2, 64)).partition((1, 64)))


def test_chunked_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    softmax = tile_kernels.make_softmax(fl.bf16, chunk=4096)
    cases = [
        (mark_chunks, (fl.zeros((6, 100), dtype=fl.i32).partition((2, 64)), 16)),
        (doubled_in_chunks, (fl.zeros((10, 50)).partition((4, 32)), fl.zeros((10, 50)))),
        (
            softmax,
            (
                fl.zeros((4, 16384), dtype=fl.bf16).partition((1, 16384)),
                fl.zeros((4, 16384), dtype=fl.bf16),
            ),
        ),
    ]
    for kernel, args in cases:
        assert "tile.store_at" in kernel.inspect(*args, stage="ir")
        assert cubin(kernel, *args)


@tile.kernel
def grouped_copy(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out))


def test_own_tile_stores_are_refused_on_a_host_grid() -> None:
    """A grouped order's own tile (and a chunk of a block's own tile) derives from the block
    id: on a grid the host chooses two blocks could name one tile, so `.launch` refuses them
    as it refuses a plain `out.store`."""
    x = fl.zeros((64, 64))
    part = fl.zeros((64, 64)).partition((16, 16), order=tile.grouped(2))
    with pytest.raises(fl.LaunchContractError, match="cannot run on a grid the host chooses"):
        grouped_copy.launch((8, 2), part, x)
    with pytest.raises(fl.LaunchContractError, match="cannot run on a grid the host chooses"):
        mark_chunks.launch(4, fl.zeros((6, 100), dtype=fl.i32).partition((2, 64)), 16)
