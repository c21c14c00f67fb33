"""What the GPU tests share: `cuda_target`, for the modules whose every test runs on the GPU
(`pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fearless as fl


@pytest.fixture
def cuda_target() -> Iterator[None]:
    """The cuda target for one test (skipped without a usable GPU), then the default again."""
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    fl.set_target("cuda")
    yield
    fl.set_target(None)


@pytest.fixture(autouse=True)
def _needs_a_gpu() -> None:
    """Every test here runs on the GPU: without a usable one it is skipped with the reason,
    also in modules that choose the target per test instead of through `cuda_target`."""
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
