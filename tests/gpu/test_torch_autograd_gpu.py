"""On the GPU, a kernel's write to a torch CUDA tensor is an in-place op to autograd, as on the
simulator (tests/test_launch_torch_autograd.py holds each launch path on fake drivers): a
leaf that requires grad is refused as an output in grad mode, and each write bumps the
tensor's version, on the SIMT launchers (cold, warm and compiled) and for a Tile atomic."""

from __future__ import annotations

import pytest

import fearless as fl
from fearless import simt, tile

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
torch = pytest.importorskip("torch")


@simt.kernel
def _double(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 2.0 * x[i]


@tile.kernel
def _count(h: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32]):
    tile.atomic_add(h, tile.arange(4, fl.i32), tile.load(x, (0,), (4,)))


def test_a_simt_kernel_writing_a_torch_tensor_bumps_its_version_and_refuses_a_leaf() -> None:
    x = torch.arange(256, dtype=torch.float32, device="cuda")
    out = torch.zeros(256, device="cuda")
    for _ in range(3):  # cold, then warm (the compiled launcher where it is built)
        _double[1, 256](x, out)
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x) and (out._version, x._version) == (3, 0)
    w = torch.ones(256, device="cuda", requires_grad=True)
    loss = (w * out).sum()  # saves `out` for w's gradient
    _double[1, 256](x, out)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    leaf = torch.zeros(256, device="cuda", requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="torch leaf tensor that requires grad"):
        _double[1, 256](x, leaf)
    with pytest.raises(fl.KernelTypeError, match="view of a torch leaf tensor"):
        _double[1, 128](x[:128], leaf[:128])
    with torch.no_grad():
        _double[1, 256](x, leaf)
    assert leaf._version == 1 and torch.equal(leaf.detach(), 2 * x)
    over = fl.asarray(out)  # an fl.Tensor over torch's memory
    _double[1, 256](x, over)
    assert out._version == 5


def test_a_tile_atomic_over_a_torch_tensor_bumps_its_version() -> None:
    h, x = torch.zeros(4, device="cuda"), torch.ones(4, device="cuda")
    for _ in range(3):
        _count.launch(1, h, x)
    torch.cuda.synchronize()
    assert h.tolist() == [3.0] * 4 and (h._version, x._version) == (3, 0)
    leaf = torch.zeros(4, device="cuda", requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="`h` is a torch leaf tensor"):
        _count.launch(1, leaf, x)
