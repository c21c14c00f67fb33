"""`fl.CUDAGraph` and `with fl.graph(g):` on the simulator: launches are captured, not run,
with every check made at capture; `replay()` runs them in order on the arrays as they are then
(the GPU's semantics: tests/gpu/test_graphs_gpu.py runs the same on the H200)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import config
from support.graph_kernels import axpy, double, shifted


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


def test_capture_runs_nothing_and_replay_runs_everything_in_order() -> None:
    n = 1000
    x = fl.asarray(np.arange(n, dtype=np.float32))
    y, mid, out = fl.ones(n), fl.zeros(n), fl.zeros(n)
    g = fl.CUDAGraph()
    with fl.graph(g):
        axpy[4, 256](3.0, x, y, mid)  # mid = 3x + 1
        part = out.partition((256,))
        double(part, mid)  # out = 2 mid
    assert g.captured
    assert not mid.numpy().any()  # captured, not run
    g.replay()
    part.unpartition()
    want = 2 * (3 * np.arange(n, dtype=np.float32) + 1)
    np.testing.assert_array_equal(out.numpy(), want)
    x.numpy()  # reading is fine; new inputs go into the same tensor
    x2 = fl.asarray(np.full(n, 5.0, np.float32))
    axpy[4, 256](1.0, x2, fl.zeros(n), x)  # x = 5 everywhere, outside the graph
    g.replay()  # `part` was given back: `out` is live, and the replay writes it as before
    np.testing.assert_array_equal(mid.numpy(), np.full(n, 16.0, np.float32))
    np.testing.assert_array_equal(out.numpy(), np.full(n, 32.0, np.float32))
    newer = out.partition((256,))  # a partition the graph never took owns `out` now
    with pytest.raises(fl.MovedError, match="moved into a partition since they were captured"):
        g.replay()
    newer.unpartition()


def test_checks_happen_at_capture() -> None:
    x = fl.zeros(256)
    g = fl.CUDAGraph()
    with pytest.raises(fl.BorrowError), fl.graph(g):
        axpy[1, 256](1.0, x, x, x)
    assert not g.captured


def test_device_errors_surface_at_replay() -> None:
    x, out = fl.zeros(256), fl.zeros(256)
    g = fl.CUDAGraph()
    with fl.graph(g):
        shifted[1, 256](x, out)  # thread 255 reads x[256]
    with pytest.raises(fl.KernelIndexError, match="index out of bounds"):
        g.replay()


def test_misuse_is_refused() -> None:
    g = fl.CUDAGraph()
    with pytest.raises(fl.LaunchContractError, match="holds nothing to replay"):
        g.replay()
    with pytest.raises(fl.LaunchContractError, match="do not nest"), fl.graph(g), fl.graph(g):
        pass
    not_a_graph = r"captures into an fl\.CUDAGraph, not int"
    with pytest.raises(fl.LaunchContractError, match=not_a_graph), fl.graph(3):  # type: ignore[arg-type]
        pass
    not_a_stream = r"`stream=` of `fl\.graph` is an fl\.Stream"
    with pytest.raises(fl.LaunchContractError, match=not_a_stream), fl.graph(g, stream=0):  # type: ignore[arg-type]
        pass


def test_the_default_stream_is_torchs_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from fearless.runtime import device_errors, streams

    legacy = object()
    monkeypatch.setattr(streams, "_torch_current", None)
    assert streams.default_cu_stream(legacy) is legacy  # torch has not touched CUDA here
    monkeypatch.setattr(streams, "_torch_current", lambda device: 0)
    assert streams.default_cu_stream(legacy) is legacy  # torch's default stream: the legacy one
    monkeypatch.setattr(streams, "_torch_current", lambda device: 0x5000)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    pool = device_errors.ErrorPool()
    monkeypatch.setattr(streams, "default_pool", lambda: pool)
    assert int(streams.default_cu_stream(legacy)) == 0x5000
    assert pool.graphs  # a torch.cuda.graph capture: every later check reads the records
