"""What the GPU tests share: every test here is skipped, with the reason, without a usable GPU
(`cuda_target`, which the modules name in `pytestmark`, is tests/conftest.py's)."""

from __future__ import annotations

import pytest

import fearless as fl


@pytest.fixture(autouse=True)
def _needs_a_gpu() -> None:
    """Every test here runs on the GPU: without a usable one it is skipped with the reason,
    also in modules that choose the target per test instead of through `cuda_target`."""
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")


@pytest.fixture(autouse=True)
def _device_checks_at_synchronize(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between synchronisations a checked operator reads its error words without waiting
    (ops/_device_checks.py `POLL_S`), so a bad index may be raised by the call that made it or
    a later one, whichever reads it first; the tests of the synchronisation's check turn the
    reads off (test_ops_kvcache_gpu.py's poll test turns them back on)."""
    from fearless.ops import _device_checks

    monkeypatch.setattr(_device_checks, "POLL_S", float("inf"))
    for pending in _device_checks._pending.values():
        monkeypatch.setattr(pending, "next_read", float("inf"))
