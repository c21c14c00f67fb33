"""Chunk copies on the GPU against the simulator: the vector path (rows that start aligned)
and the element path (a torch view that starts 4 bytes past an aligned address), the bench's
chunk row kernels, and a chunk past the row's end failing its check (tests/test_simt_chunks.py
holds the kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
import support.simt_chunks_kernels as C
from fearless.errors import KernelIndexError
from fearless_bench.kernels_simt_chunks import CHUNK_KERNELS, CHUNK_THREADS
from support.gpu_compare import both

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(43)


def test_copies_agree_with_the_simulator() -> None:
    x = RNG.standard_normal((3, 100)).astype(np.float32)
    sim, dev = both(C.copy_rows, 3, 32, x, np.full_like(x, np.nan), out=1)
    np.testing.assert_array_equal(dev, sim)
    np.testing.assert_array_equal(dev, x + 1)
    xh = RNG.integers(0, 1 << 16, (2, 128)).astype(np.uint16)
    wh = RNG.integers(0, 1 << 16, 128).astype(np.uint16)
    sim, dev = both(C.copy_u16, 2, 16, xh, wh, np.zeros_like(xh), out=2)
    np.testing.assert_array_equal(dev, sim)


def test_half_types_agree_with_the_simulator() -> None:
    x = RNG.random((2, 128)).astype(np.float16)
    w = RNG.random(128).astype(np.float16)
    sim, dev = both(C.scale_half, 2, 16, x, w, np.zeros_like(x), out=2)
    np.testing.assert_array_equal(dev, sim)


def test_an_unaligned_row_takes_the_element_path() -> None:
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, 100)).astype(np.float32)
    flat = torch.zeros(3 * 100 + 1, device="cuda")
    view = flat[1:].view(3, 100)  # 4 bytes past the allocation's alignment
    view.copy_(torch.from_numpy(x))
    out = torch.full((3 * 100 + 1,), float("nan"), device="cuda")[1:].view(3, 100)
    C.copy_rows[3, 32](view, out)
    np.testing.assert_array_equal(out.cpu().numpy(), x + 1)


def test_row_kernels_agree_with_the_simulator() -> None:
    x = RNG.standard_normal((20, 1000)).astype(np.float32)
    w = RNG.standard_normal(1000).astype(np.float32)
    b = RNG.standard_normal(1000).astype(np.float32)
    eps = np.float32(1e-5)
    sim, dev = both(CHUNK_KERNELS["softmax"], 20, CHUNK_THREADS, x, np.zeros_like(x), out=1)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-8)
    kernel = CHUNK_KERNELS["rms_norm"]
    sim, dev = both(kernel, 20, CHUNK_THREADS, x, w, eps, np.zeros_like(x), out=3)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-6)
    kernel = CHUNK_KERNELS["layer_norm"]
    sim, dev = both(kernel, 20, CHUNK_THREADS, x, w, b, eps, np.zeros_like(x), out=4)
    np.testing.assert_allclose(dev, sim, rtol=1e-5, atol=1e-5)


def test_a_chunk_past_the_row_is_a_checked_error() -> None:
    x = fl.asarray(RNG.standard_normal((2, 10)).astype(np.float32))
    with pytest.raises(KernelIndexError, match="the len is 10 but the index is 11"):
        C.copy_rows[2, 32](x, fl.asarray(np.zeros((2, 10), np.float32)))
        fl.synchronize()
