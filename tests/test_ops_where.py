"""Where a tensor lives, for every operator (ops/_io.py), on the simulator: each operator on
NumPy, fl.Tensor and torch inputs returns its first argument's kind, written; a torch operand
the kernels cannot use in place is copied in and its result copied back out (the bug this
guards: `ops.softmax(torch.randn(16, 200))` on a GPU machine returned a never-written CPU
tensor); a moved fl.Tensor is refused; a NumPy weight follows its input's device.

The GPU half, with CUDA and CPU torch tensors on the cuda target, is
tests/gpu/test_ops_where_gpu.py, over the same table (tests/support/ops_kinds.py)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import _io
from fearless.runtime import devices
from support.ops_kinds import as_kind, cases, run_case

CASES = cases()
IDS = [c.name for c in CASES]


@pytest.fixture(autouse=True)
def sim() -> Iterator[None]:
    fl.set_target("sim")
    yield
    fl.set_target(None)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("kind", ["numpy", "fl"])
def test_every_operator_returns_its_inputs_kind(case, kind: str) -> None:  # type: ignore[no-untyped-def]
    run_case(case, kind)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_operator_on_cpu_torch_tensors(case) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    run_case(case, "torch_cpu")
    run_case(case, "torch_cpu", mixed=True)  # weights and second operands as NumPy


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_torch_tensor_the_kernels_cannot_use_is_copied_in_and_out(  # type: ignore[no-untyped-def]
    case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a CPU tensor on the cuda target (or a CUDA one on the simulator) takes: with every
    torch tensor counted as living elsewhere, the operator works on copies and still returns
    written CPU torch tensors, with one HostCopyWarning per operator."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_io, "_resident", lambda x: False)
    monkeypatch.setattr(_io, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run_case(case, "torch_cpu")
        run_case(case, "torch_cpu")
    copies = [w for w in seen if issubclass(w.category, fl.HostCopyWarning)]
    assert len(copies) == 1, [str(w.message) for w in seen]
    text = str(copies[0].message)
    assert f"fearless.ops.{case.name}" in text and "torch tensor" in text
    assert "/tests/" in copies[0].filename  # at the caller's line, not inside fearless


def test_the_copied_result_is_the_callers_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_io, "_resident", lambda x: False)
    x = torch.randn(4, 64).to(torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fl.HostCopyWarning)
        y = ops.softmax(x)
    assert y.dtype == torch.bfloat16 and y.device.type == "cpu"
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_moved_tensor_is_refused_by_every_operator(case) -> None:  # type: ignore[no-untyped-def]
    """The ownership check of launches applies to an operator's inputs: an fl.Tensor moved into
    a partition is a MovedError naming where it moved, before any kernel runs."""
    first, *rest = case.inputs
    t = fl.asarray(first.copy())
    part = t.partition((1,) * t.ndim)  # moved here
    with pytest.raises(fl.MovedError, match="moved"):
        case.call(t, *(as_kind(r, "numpy") for r in rest))
    part.unpartition()
    case.call(t, *(as_kind(r, "numpy") for r in rest))  # given back: fine again


def test_numpy_weights_follow_their_inputs_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NumPy weight beside an input on pretend device 1 is placed there, as on device 0,
    instead of being refused as a second device."""
    monkeypatch.setenv("FEARLESS_SIM_DEVICES", "2")
    try:
        x = fl.asarray(np.ones((4, 32), np.float32), device=1)
        w = np.full(32, 2.0, np.float32)
        y = ops.rms_norm(x, (32,), w, 1e-6)
        assert y.device == 1
        np.testing.assert_allclose(y.numpy(), 2.0, rtol=1e-5)
        z = ops.matmul(x, np.ones((32, 8), np.float32))
        assert z.device == 1
        np.testing.assert_allclose(z.numpy(), 32.0)
    finally:
        devices._current.device = 0
