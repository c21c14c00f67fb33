"""fearless inside torch on the H200 (issue 14): autograd through fearless backward kernels,
torch.compile, torch's current stream, CUDA graphs (torch.cuda.graph and fl.graph), and device
errors raised by graph replays."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.runtime.streams import default_cu_stream
from support.graph_kernels import axpy, double, shifted  # the CPU tests' kernels

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _pairs(*shapes: tuple[int, ...], dt: Any = torch.float32) -> tuple[list[Any], list[Any]]:
    g = torch.Generator(device="cuda").manual_seed(0)
    xs = [torch.randn(s, device="cuda", generator=g).to(dt).requires_grad_() for s in shapes]
    return xs, [x.detach().clone().requires_grad_() for x in xs]


def _rot(x: Any) -> Any:
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_autograd_matches_torch(dt: Any) -> None:
    tol = 2e-4 if dt == torch.float32 else 5e-2
    (x, w, b), (rx, rw, rb) = _pairs((256, 1024), (1024,), (1024,), dt=dt)
    (ops.layer_norm(x, (1024,), w, b).float().square().sum()).backward()
    (F.layer_norm(rx.float(), (1024,), rw.float(), rb.float()).square().sum()).backward()
    for got, want in ((x, rx), (w, rw), (b, rb)):
        torch.testing.assert_close(got.grad.float(), want.grad.float(), rtol=tol, atol=tol * 10)
    (a, m), (ra, rm) = _pairs((300, 200), (200, 150), dt=dt)
    ops.softmax(ops.matmul(a, m)).float().sum().backward()
    (F.softmax((ra.float() @ rm.float()), -1)).sum().backward()
    torch.testing.assert_close(a.grad.float(), ra.grad.float(), rtol=tol, atol=tol)
    torch.testing.assert_close(m.grad.float(), rm.grad.float(), rtol=tol, atol=tol)
    (p, q), (rp, rq) = _pairs((64, 512), (64, 512), dt=dt)
    dy = torch.randn(64, 512, device="cuda").to(dt)
    ops.swiglu(p, q).backward(dy)
    (F.silu(rp.float()) * rq.float()).backward(dy.float())
    torch.testing.assert_close(p.grad.float(), rp.grad.float(), rtol=tol, atol=tol * 10)


def test_rope_and_dropout_backward() -> None:
    (q, k), (rq, rk) = _pairs((2, 8, 64, 128), (2, 2, 64, 128))
    ang = torch.rand(64, 64, device="cuda") * 6
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    qo, ko = ops.rope(q, k, cos, sin)
    (qo.square().sum() + ko.sum()).backward()
    ((rq * cos + _rot(rq) * sin).square().sum() + (rk * cos + _rot(rk) * sin).sum()).backward()
    torch.testing.assert_close(q.grad, rq.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(k.grad, rk.grad, rtol=1e-4, atol=1e-4)
    (x,), _ = _pairs((1 << 20,))
    y = ops.dropout(x, 0.25)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y.detach() != 0).float() / 0.75)


def test_torch_compile_fullgraph() -> None:
    def block(x: Any, w: Any, a: Any) -> Any:
        return ops.softmax(ops.matmul(ops.rms_norm(x, (256,), w), a))

    (x, w, a), _ = _pairs((128, 256), (256,), (256, 256))
    eager = block(x, w, a)
    for backend in ("aot_eager", "inductor"):
        got = torch.compile(block, fullgraph=True, backend=backend)(x, w, a)
        torch.testing.assert_close(got, eager)
        got.sum().backward()


def test_launches_follow_torch_current_stream() -> None:
    legacy = object()
    assert default_cu_stream(legacy) is legacy  # torch on its default stream
    s = torch.cuda.Stream()
    n = 1 << 20
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y, out = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
    with torch.cuda.stream(s):
        assert int(default_cu_stream(legacy)) == s.cuda_stream
        axpy[math.ceil(n / 256), 256](2.0, x, y, out)
        part = fl.asarray(out).partition((1024,))
        double(part, out.clone())
        part.unpartition()
    s.synchronize()
    torch.testing.assert_close(out, 2 * (2 * x + 1))


def test_torch_cuda_graph_captures_ops_and_kernels() -> None:
    x = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    n = 1 << 16
    v = torch.arange(n, device="cuda", dtype=torch.float32)
    vo = torch.empty(n, device="cuda")

    def step() -> Any:
        axpy[n // 256, 256](3.0, v, v, vo)
        return ops.softmax(ops.matmul(ops.rms_norm(x, (4096,)), w))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up: compile, load and tune outside the capture
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = step()
    x.copy_(torch.randn_like(x))
    v.fill_(1.0)
    g.replay()
    torch.cuda.synchronize()
    want = torch.softmax(F.rms_norm(x.float(), (4096,), eps=2.0**-7) @ w.float(), -1)
    torch.testing.assert_close(y.float(), want, rtol=5e-2, atol=5e-3)
    torch.testing.assert_close(vo, torch.full((n,), 4.0, device="cuda"))


def test_fl_graph_on_the_gpu() -> None:
    n = 1 << 20
    x = fl.asarray(np.arange(n, dtype=np.float32))
    y, mid, out = fl.ones(n), fl.zeros(n), fl.zeros(n)
    part = out.partition((1024,))
    axpy[n // 256, 256](1.0, x, y, mid)  # warm-up: mid = x + 1, out = 2 (x + 1)
    double(part, mid)
    g = fl.CUDAGraph()
    with fl.graph(g):
        axpy[n // 256, 256](3.0, x, y, mid)
        double(part, mid)
    fl.synchronize()
    base = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(mid.numpy(), base + 1)  # captured, not run
    g.replay()
    fl.synchronize()
    part.unpartition()
    np.testing.assert_array_equal(out.numpy(), 2 * (3 * base + 1))


def test_device_errors_of_graph_replays_are_raised() -> None:
    x, out = fl.zeros(256), fl.zeros(256)
    with pytest.raises(fl.KernelIndexError):
        shifted[1, 256](x, out)  # warm-up, which already fails
        fl.synchronize()
    g = fl.CUDAGraph()
    with fl.graph(g):
        shifted[1, 256](x, out)
    for _ in range(2):  # the second replay is counted by no launch: still checked
        g.replay()
        with pytest.raises(fl.KernelIndexError, match="index out of bounds"):
            fl.synchronize()
