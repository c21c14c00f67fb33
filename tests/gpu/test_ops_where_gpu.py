"""Every fearless.ops operator on every input kind on the H200 (torch CUDA, torch CPU, NumPy,
fl.Tensor), against NumPy references: the result is written, of its first argument's kind and
on its device. A CPU torch tensor on the cuda target is copied in and out, as NumPy arrays are
(issue 33: `ops.softmax(torch.randn(16, 200))` returned a never-written CPU tensor here)."""

from __future__ import annotations

import warnings

import pytest

import fearless as fl
from fearless.ops import _io
from support.ops_kinds import KINDS, cases, run_case

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("kind", KINDS)
def test_every_operator_on_every_input_kind(  # type: ignore[no-untyped-def]
    case, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind.startswith("torch"):
        pytest.importorskip("torch")
    monkeypatch.setattr(_io, "_warned", set())  # each operator warns once per process
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run_case(case, kind)
        if kind != "fl":
            run_case(case, kind, mixed=True)
    copies = [w for w in seen if issubclass(w.category, fl.HostCopyWarning)]
    if kind in ("numpy", "torch_cpu"):
        assert copies, "a host operand on the cuda target is copied with a HostCopyWarning"
