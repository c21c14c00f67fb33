"""Test-wide settings: the IR verifier after every pass, a private compile cache, the simulator,
one BLAS and one torch thread a test process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Before NumPy and torch load (they read these once): pytest-xdist runs a worker a core, and
# each one's OpenBLAS and OpenMP pools spinning on every core beside the others' made the
# simulator's tile-sized matmuls up to 100x slower (a 128x64 by 64x128 product: 6.4 ms on
# two busy cores against 61 us with one thread) and torch's CPU ops about 1.5x slower.
for _pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

_failure_log: list[Path] = []  # --failure-log's path, once configured


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--failure-log",
        metavar="PATH",
        help="append each failure's test id and the end of its report to PATH as it happens, "
        "so that a run cut short (the GPU machine's time limit) still says why",
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--failure-log")
    if path:
        _failure_log[:] = [Path(path)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _failure_log or not report.failed:
        return
    text = report.longreprtext.strip().splitlines()[-30:]
    with _failure_log[0].open("a", encoding="utf-8") as log:  # workers append alike
        log.write(f"=== {report.nodeid} ({report.when})\n" + "\n".join(text) + "\n")


@pytest.fixture(autouse=True)
def _fearless_env(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[None]:
    from fearless import config

    monkeypatch.setenv("FEARLESS_VERIFY", "1")
    # a test's `fl.set_target(...)` ends with the test: a leaked override took the fake-GPU
    # tests that a worker ran after it to the simulator (2026-12-07)
    monkeypatch.setattr(config, "_target_override", None)
    cache = tmp_path_factory.getbasetemp() / "fearless-cache"
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(cache))
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setenv("FEARLESS_TARGET", "sim")
    yield


@pytest.fixture
def cubin() -> Callable[..., bytes]:
    """`cubin(kernel, *args)`: a Tile kernel's sm_90 cubin for these arguments, compiled
    through tileiras; the test is skipped where tileiras is not installed."""
    import fearless as fl
    from fearless.runtime.target import current_target

    def compile_for(kernel: Any, *args: Any) -> bytes:
        signature, _ = kernel.signature_of(args, current_target())
        try:
            return kernel.compile(signature, "sm_90").cubin  # type: ignore[no-any-return]
        except fl.ToolchainError as exc:
            first = str(exc).splitlines()[0]
            if "was not found" not in first and "needs the `cuda-tile`" not in first:
                raise  # tileiras ran and refused the bytecode: a real failure, not a skip
            pytest.skip(first)  # no Tile toolchain on this machine

    return compile_for


SimAndGpu = Callable[[Callable[[], Any]], tuple[Any, Any]]  # the `sim_and_gpu` fixture's type


@pytest.fixture
def sim_and_gpu() -> SimAndGpu:
    """`sim_and_gpu(body)`: `body()` run on the simulator, then on the GPU (synchronised), as
    the pair (sim, gpu) of what it returned; the test is skipped where there is no usable GPU.
    For the GPU tests that hold the GPU to the simulator's meaning."""
    import fearless as fl

    def both(body: Callable[[], Any]) -> tuple[Any, Any]:
        ok, why = fl.cuda_status()
        if not ok:
            pytest.skip(f"no usable GPU: {why}")
        got = []
        for target in ("sim", "cuda"):
            fl.set_target(target)
            try:
                result = body()
                fl.synchronize()
                got.append(result)
            finally:
                fl.set_target(None)
        return got[0], got[1]

    return both


@pytest.fixture
def cuda_target() -> Iterator[None]:
    """The cuda target for one test (skipped without a usable GPU), then the default again:
    for the modules whose every test runs on the GPU (`pytest.mark.usefixtures("cuda_target")`).
    Here, not in tests/gpu/conftest.py, so that every module and every xdist worker finds it
    (2026-12-05: on the H100, 7 of 15 workers reported "fixture 'cuda_target' not found" for
    tests/gpu modules that 4 workers ran)."""
    import fearless as fl

    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    fl.set_target("cuda")
    yield
    fl.set_target(None)


@pytest.fixture
def autotune_on_sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """fl.autotune's tests: the simulator, a disk store of the test's own, tuning on, and two
    timed calls a configuration (`pytestmark = pytest.mark.usefixtures("autotune_on_sim")`)."""
    from fearless import autotune_timing, config

    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FEARLESS_AUTOTUNE", raising=False)
    monkeypatch.setattr(autotune_timing, "MAX_REPS", 2)  # keep the tests' sleeps short
