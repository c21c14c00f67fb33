"""The runtime red-team's findings about ownership on the host: copies and pickles of tensors
and partitions, partitions raced by threads, graph replays after a move, torch tensors the
borrow check or autograd could not see, and arrays a kernel cannot take (docs/design.md 1.3)."""

from __future__ import annotations

import contextlib
import copy
import pickle
import threading

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt, tile
from support.graph_kernels import axpy, double

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@simt.kernel
def plus_one(src: simt.Slice[fl.f32], dst: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(dst):
        dst[i] = src[i] + 1.0


@tile.kernel
def fill7(z: tile.Part[fl.f32]):
    z.store(tile.load_like(z, z) * 0.0 + 7.0)


def test_copies_of_a_tensor_are_a_handle_new_memory_or_a_value() -> None:
    a = fl.arange(8, dtype=fl.f32)
    assert copy.copy(a) is a
    for b in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert b.data_ptr != a.data_ptr and not np.shares_memory(a.numpy(), b.numpy())
        assert b.numpy().tolist() == a.numpy().tolist() and b.dtype is fl.f32
        plus_one[1, 32](a, b)  # distinct memory: no false overlap
        with pytest.raises(fl.BorrowError):  # an alias of b's real memory: caught
            plus_one[1, 32](fl.asarray(b.numpy()), b)
    bf = fl.asarray([1.5, -2.0], dtype=fl.bf16)
    assert pickle.loads(pickle.dumps(bf)).numpy().tolist() == [1.5, -2.0]
    zp = a.partition((8,))
    for how in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(fl.MovedError, match="moved tensor") as info:
            how(a)
        assert "test_runtime_redteam.py" in str(info.value).splitlines()[1]  # the user's line
    zp.unpartition()


def test_a_partition_is_never_copied_and_only_it_gives_the_tensor_back() -> None:
    z = fl.zeros(16)
    zp = z.partition((8,))
    for how in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(fl.MovedError, match="cannot be"):
            how(zp)
    for field in ("tensor", "tile", "grid", "group"):
        with pytest.raises(AttributeError, match="read-only"):
            setattr(zp, field, getattr(zp, field))
    zp.unpartition()
    with pytest.raises(fl.MovedError):
        zp.unpartition()


def test_two_threads_never_both_partition_one_tensor() -> None:
    for _ in range(50):
        z = fl.zeros(16)
        got: list[object] = []
        barrier = threading.Barrier(4)

        def grab(
            z: fl.Tensor = z, got: list[object] = got, barrier: threading.Barrier = barrier
        ) -> None:
            barrier.wait()
            with contextlib.suppress(fl.MovedError):  # the other threads': it has moved
                got.append(z.partition((8,)))

        threads = [threading.Thread(target=grab) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 1


def test_a_replay_checks_the_moves_of_its_tensors() -> None:
    x, z = fl.ones(8), fl.zeros(8)
    g = fl.CUDAGraph()
    with fl.graph(g):
        axpy[1, 32](1.0, x, x, z)
    zp = z.partition((8,))
    with pytest.raises(fl.MovedError, match=r"tensor \(shape \(8,\), f32\)"):
        g.replay()
    zp.unpartition()
    g.replay()
    assert z.numpy().tolist() == [2.0] * 8
    w = fl.zeros(8)
    g2 = fl.CUDAGraph()
    with w.partition((8,)) as wp, fl.graph(g2):
        double(wp, x)
    g2.replay()  # given back since: `w` is live again
    assert w.numpy().tolist() == [2.0] * 8
    newer = w.partition((8,))  # a partition the graph never took owns `w`
    with pytest.raises(fl.MovedError, match="since they were captured"):
        g2.replay()
    newer.unpartition()


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_torch_tensors_the_borrow_check_or_autograd_would_miss() -> None:
    class Liar(torch.Tensor):
        def data_ptr(self) -> int:  # type: ignore[override]
            return 0x1000

    base = torch.zeros(8)
    with pytest.raises(fl.BorrowError):
        plus_one[1, 32](base, base.as_subclass(Liar))
    leaf = torch.ones(8, requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="leaf tensor that requires grad"):
        plus_one[1, 32](torch.zeros(8), leaf)
    with pytest.raises(fl.KernelTypeError, match="leaf tensor that requires grad"):
        fl.asarray(leaf).partition((8,))
    with torch.no_grad():  # as an optimizer's step
        plus_one[1, 32](torch.zeros(8), leaf)
    a = torch.ones(8, requires_grad=True)
    b = a * 2.0
    loss = (b * b).sum()  # saves b
    plus_one[1, 32](torch.zeros(8), b)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    c = torch.zeros(8)
    with fl.asarray(c).partition((8,)) as cp:
        fill7(cp)
    assert c._version == 1 and c.tolist() == [7.0] * 8
    for odd in (torch.zeros(8).to_sparse(), torch.nested.nested_tensor([torch.zeros(4)] * 2)):
        with pytest.raises(fl.KernelTypeError, match="dense"):
            plus_one[1, 32](odd, np.zeros(8, np.float32))


def test_misaligned_and_strided_arrays_and_0d_partitions() -> None:
    raw = np.zeros(80, np.uint8)
    with pytest.raises(fl.KernelTypeError, match="misaligned") as info:
        fl.from_numpy(raw[1:33].view(np.float32))
    assert "argument `raw[1:33].view(np.float32)`" in str(info.value)
    with pytest.raises(fl.KernelTypeError, match="misaligned"):
        plus_one[1, 32](np.ones(8, np.float32), raw[1:33].view(np.float32))
    with pytest.raises(fl.KernelTypeError, match=r"argument `torch.zeros\(16\)\[::2\]`"):
        fl.asarray(torch.zeros(16)[::2])
    z = fl.zeros(())
    with z.partition(()) as zp:
        assert zp.grid == ()
        fill7(zp)
    assert float(z.numpy()) == 7.0
