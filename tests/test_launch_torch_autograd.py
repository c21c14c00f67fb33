"""A kernel's write to torch's memory is an in-place op to autograd, on every launch path.

torch refuses an in-place op on a leaf that requires grad (or a view of one) while grad mode
is on, and bumps a tensor's version on every in-place write, so that a backward that saved it
refuses its stale copy. The simulator kept both rules; these tests hold the GPU's launchers to
them: SIMT's generated launcher (its fl.Tensor, plain torch and extractor branches), SIMT's C
launcher (claunch_simt.c), Tile's dispatcher for `tile.Atomic` parameters and its C warm path
(claunch_tile.c), and host-array staging. They run on the fake drivers of tests/support, with
CPU torch tensors that say they live on cuda:0 (pointers packed, never dereferenced).
"""

from __future__ import annotations

from typing import Any

import pytest

import fearless as fl
from fearless import dtypes, tile
from fearless.abi import ParamSpec
from fearless.runtime.tensor import Tensor
from support.fake_claunch import (
    Calls,
    TileCu,
    c_driver,  # noqa: F401 (a fixture)
    tile_c,  # noqa: F401 (a fixture)
)
from support.fake_driver import FakeDriver, _plan, fake_gpu  # noqa: F401
from support.torch_on_gpu0 import report_cuda0

torch = pytest.importorskip("torch")

F32 = dtypes.f32


@pytest.fixture
def cuda_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    report_cuda0(monkeypatch)


def _over(t: Any) -> Tensor:
    """An fl.Tensor over torch tensor `t`'s memory, as fl.asarray makes one on the GPU."""
    return Tensor._make(t.data_ptr(), tuple(t.shape), F32, on_device=True, owner=t)


def _dev(ptr: int, n: int) -> Tensor:
    return Tensor._make(ptr, (n,), F32, on_device=True, owner=None)


# ------------------------------------------------------------- SIMT, the generated launcher


def test_a_simt_gpu_launch_refuses_to_write_a_leaf_that_requires_grad(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    plan, pool = _plan(fake_gpu)  # vecadd(a, b, c: DisjointSlice)
    a, b = torch.zeros(64), torch.zeros(64)
    c = torch.zeros(64, requires_grad=True)
    p = torch.nn.Parameter(torch.zeros(64))  # a subclass: the extractor branch
    view = torch.zeros(128, requires_grad=True)[:64]
    for out, words in (
        (c, "`c` is a torch leaf tensor that requires grad"),
        (p, "`c` is a torch leaf tensor that requires grad"),
        (view, r"`c` is a view of a torch leaf tensor that requires grad"),
        (_over(c), "`c` is a torch leaf tensor that requires grad"),
    ):
        with pytest.raises(fl.KernelTypeError, match=words) as info:
            plan.launch(1, 64, (a, b, out))
        assert info.value.code == "E0701"
    assert not fake_gpu.calls and pool.launches == 0
    c.detach().mul(2).requires_grad_()  # a non-leaf is written as torch writes one: allowed
    plan.launch(1, 64, (a, b, c.mul(2)))
    with torch.no_grad():  # an optimizer's step writes its parameters
        plan.launch(1, 64, (a, b, c))
        plan.launch(1, 64, (a, b, p))
    assert c._version == 1 and p._version == 1 and len(fake_gpu.calls) == 3
    a.requires_grad_()  # an input that requires grad is read, never refused
    plan.launch(1, 64, (a, b, torch.zeros(64)))


def test_a_simt_gpu_launch_bumps_the_version_of_what_it_writes(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    plan, _ = _plan(fake_gpu)
    a, b, c = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    plan.launch(1, 64, (a, b, c))
    plan.launch(1, 64, (a, b, c))  # warm
    assert (a._version, b._version, c._version) == (0, 0, 2)
    plan.launch(1, 64, (a, b, _over(c)))  # an fl.Tensor over torch's memory
    plan.launch(1, 64, (a, b, _dev(0x40000, 64)))  # fearless's own memory: nothing to bump
    assert c._version == 3
    # a backward that saved `c` refuses it once a kernel wrote it, as after `c.add_(1)`
    w = torch.ones(64, requires_grad=True)
    loss = (w * c).sum()
    plan.launch(1, 64, (a, b, c))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    with torch.inference_mode():  # an inference tensor has no version to bump: no error
        made = torch.zeros(64)
        plan.launch(1, 64, (a, b, made))
    plan.launch(1, 64, (a, b, made))


def test_every_output_of_a_simt_launch_is_bumped(
    fake_gpu: FakeDriver,  # noqa: F811
    cuda_torch: None,
) -> None:
    from support.fake_driver import _kernel

    params = (
        ParamSpec("x", "slice", F32),
        ParamSpec("y", "disjoint", F32),
        ParamSpec("z", "atomic", F32),
    )
    plan, _ = _plan(fake_gpu, _kernel("two_out", params))
    x, y, z = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    plan.launch(1, 64, (x, y, z))
    plan.launch(1, 64, (x, _dev(0x40000, 64), z))
    assert (x._version, y._version, z._version) == (0, 1, 2)


# ------------------------------------------------------------------- SIMT, the C launcher


def test_the_c_launcher_bumps_what_it_writes_and_hands_grad_leaves_back(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    cuda_torch: None,
) -> None:
    plan, _ = _plan(fake_gpu)
    assert plan.cplan is not None
    a, b = _dev(0x10000, 64), _dev(0x20000, 64)
    c, x = torch.zeros(64), torch.zeros(64)
    plan.launch(1, 64, (a, b, _over(c)))
    twice = Tensor._make(c.data_ptr(), (64,), F32, on_device=True, owner=_over(c))
    plan.launch(1, 64, (_over(x), b, twice))  # an fl.Tensor over an fl.Tensor over torch's
    assert len(c_driver) == 2 and not fake_gpu.calls  # C launched both
    assert (c._version, x._version) == (2, 0)
    leaf = torch.zeros(64, requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="leaf tensor that requires grad"):
        plan.launch(1, 64, (a, b, _over(leaf)))  # C hands it back; Python explains
    assert len(c_driver) == 2 and not fake_gpu.calls
    with torch.no_grad():
        plan.launch(1, 64, (a, b, _over(leaf)))  # grad mode off: C launches it
    assert len(c_driver) == 3 and leaf._version == 1
    inner = leaf.mul(1)  # requires grad, not a leaf: Python decides, and writes it
    plan.launch(1, 64, (a, b, _over(inner)))
    assert len(c_driver) == 3 and len(fake_gpu.calls) == 1 and inner._version == 1


# -------------------------------------------------------------- Tile, the atomic parameters


@tile.kernel
def _count(h: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32]):
    tile.atomic_add(h, tile.arange(4, fl.i32), tile.load(x, (0,), (4,)))


def test_a_tile_atomic_on_the_simulator_is_an_in_place_write() -> None:
    h, x = torch.zeros(4), torch.ones(4)  # the tests' target is the simulator (conftest.py)
    _count.launch(1, h, x)
    _count.launch(1, h, x)  # warm
    assert h.tolist() == [2.0, 2.0, 2.0, 2.0] and (h._version, x._version) == (2, 0)
    leaf = torch.zeros(4, requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="`h` is a torch leaf tensor"):
        _count.launch(1, leaf, x)
    with torch.no_grad():
        _count.launch(1, leaf, x)
    assert leaf._version == 1
    with pytest.raises(fl.KernelTypeError, match="`h` is a torch leaf tensor"):
        _count.launch(1, leaf, x)  # warm now: still refused


def test_the_tile_c_warm_path_bumps_an_atomic_and_hands_grad_leaves_back(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    from fearless.abi import TileParam
    from fearless.runtime import dispatch, tile_gpu
    from fearless.runtime.target import Target

    calls, cu = tile_c
    cu.sizes[:] = [8, 4, 8, 4]  # h and its extent, x likewise
    sig = (TileParam("h", "atomic", F32, 1), TileParam("x", "tensor", F32, 1))
    gpu = tile_gpu.GpuLaunch("k", 0xF00D, (1, 1, 1), tile_gpu.ParamBlock(sig, [(4,)] * 2))

    def never(args: Any, target: Any) -> Any:
        raise AssertionError("the slow path is not taken here")

    warm = dispatch.Dispatcher("k", _count.declared(), never, None)
    prepared = dispatch.Prepared(sig, None, (1, 1, 1), (16, 16), gpu)  # type: ignore[arg-type]
    h, x = torch.zeros(4), _dev(0x7F0000100000, 4)
    args = (_over(h), x)
    entry, key, _ = warm.lookup(args, Target.CUDA)
    assert entry is None and key is not None
    warm.store(key, prepared)
    assert warm.c_launch(warm.c, args, 0) == 0
    assert len(calls) == 1 and h._version == 1
    assert warm.c_launch(warm.c, (_dev(0x7F0000000000, 4), x), 0) == 0  # not torch's
    assert h._version == 1
    leaf = torch.zeros(4, requires_grad=True)
    assert warm.c_launch(warm.c, (_over(leaf), x), 0) == -1  # the Python path refuses it
    with torch.no_grad():
        assert warm.c_launch(warm.c, (_over(leaf), x), 0) == 0
    assert len(calls) == 3 and leaf._version == 1
    with pytest.raises(fl.KernelTypeError, match="`h` is a torch leaf tensor"):
        warm.launch((_over(leaf), x), Target.CUDA, None)
    assert not cu.calls  # the Python path launched nothing
