"""Test-wide settings: the IR verifier after every pass, a private compile cache, the simulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fearless_env(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[None]:
    monkeypatch.setenv("FEARLESS_VERIFY", "1")
    cache = tmp_path_factory.getbasetemp() / "fearless-cache"
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(cache))
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setenv("FEARLESS_TARGET", "sim")
    yield
