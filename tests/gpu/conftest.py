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
