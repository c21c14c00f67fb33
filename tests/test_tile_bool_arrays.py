"""Bool arrays in Tile kernels: bytes in memory (0 or 1, as torch and NumPy keep them), in the
simulator and in the bytecode. tileiras copies an i1 view through shared memory as packed bits,
so a bool attention mask read the wrong bytes on the GPU (2026-12-05); the backend declares
bool arrays as i8 views and pointers, compares the loaded bytes with 0 and stores 0 or 1."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.runtime.target import Target
from fearless.tile.compiler import render_stage


@tile.kernel
def keep_both(
    out: tile.Part[fl.bool_], m: tile.Tensor[fl.bool_], idx: tile.Tensor[fl.i32], p: tile.Atomic[fl.bool_]
):  # fmt: skip
    (n,) = out.shape
    i = out.index[0]
    mine = tile.load(m, (i,), (n,))
    other = tile.gather(m, tile.load(idx, (i,), (n,)))  # an index past the end reads False
    both = mine & other
    out.store(both)
    tile.scatter(p, i * n + tile.arange(n), ~both)


def _args(n: int = 300) -> tuple[fl.Tensor, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    m = rng.random(n) > 0.4
    idx = rng.integers(0, n + 20, n).astype(np.int32)  # some past the end
    return fl.zeros(n, dtype=fl.bool_), m, idx, np.zeros(n, dtype=bool)


def test_the_simulator_reads_and_writes_bytes() -> None:
    out, m, idx, p = _args()
    part = out.partition((128,))
    keep_both(part, m, idx, p)
    out = part.unpartition()
    other = np.where(idx < m.size, m[np.minimum(idx, m.size - 1)], False)
    np.testing.assert_array_equal(out.numpy(), m & other)
    np.testing.assert_array_equal(p, ~(m & other))
    assert out.numpy().view(np.uint8).max() == 1  # True is the byte 1


def test_bool_arrays_are_i8_views_and_pointers_in_the_bytecode(
    cubin: Callable[..., bytes],
) -> None:
    out, m, idx, p = _args()
    part = out.partition((128,))
    signature, _ = keep_both.signature_of((part, m, idx, p), Target.SIM)
    text = render_stage(keep_both.ir_for(signature), "tileir")
    assert "tile<ptr<i1>>" not in text and "tensor_view<?xi1" not in text
    assert text.count("tensor_view<?xi8") >= 3 and "tile<ptr<i8>>" in text
    assert "cmpi not_equal" in text and "exti" in text  # bytes to i1 and back
    assert cubin(keep_both, part, fl.asarray(m), fl.asarray(idx), fl.asarray(p))


@tile.kernel
def gather_two(out: tile.Part[fl.bool_], m: tile.Tensor[fl.bool_], idx: tile.Tensor[fl.i32]):
    (n,) = out.shape
    out.store(tile.gather(m, tile.load(idx, (out.index[0],), (n,)), padding=2))  # line 66


def test_a_bool_gathers_padding_is_true_or_false() -> None:
    out, m, idx, _ = _args()
    with pytest.raises(fl.CompileError) as info:
        gather_two(out.partition((128,)), m, idx)
    assert "the padding of `tile.gather` of the bool array `m` must be True or False" in str(
        info.value
    )
    assert info.value.loc is not None and info.value.loc.line == 66
