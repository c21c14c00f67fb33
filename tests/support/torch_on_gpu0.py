"""`report_cuda0`: plain CPU torch tensors that say they live on cuda:0 (`report_cuda`: on any
GPU index), for the launch tests that only pack their pointers, never dereference them
(tests/test_launch_overhead_paths.py, tests/test_tile_launch_fast.py, tests/test_devices.py)."""

from __future__ import annotations

import pytest


def report_cuda0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make plain CPU torch tensors (not a subclass) report cuda:0 until the test ends:
    `is_cuda`, `get_device()` and `device`; `_not_cuda = True` on one makes it MPS-like
    (get_device() still 0, is_cuda False). The caller has imported torch (importorskip)."""
    report_cuda(monkeypatch, 0)


def report_cuda(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    """`report_cuda0` for GPU `index`."""
    import torch

    monkeypatch.setattr(
        torch.Tensor, "is_cuda", property(lambda t: not getattr(t, "_not_cuda", False))
    )
    monkeypatch.setattr(torch.Tensor, "get_device", lambda t: index)
    monkeypatch.setattr(
        torch.Tensor,
        "device",
        property(
            lambda t: (
                torch.device("mps", index)
                if getattr(t, "_not_cuda", False)
                else torch.device("cuda", index)
            )
        ),
    )
