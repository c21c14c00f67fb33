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
