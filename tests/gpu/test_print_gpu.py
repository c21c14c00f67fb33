"""`print(...)` in kernels on the GPU prints what the simulator prints.

The device's printf writes to the process's standard output (file descriptor 1, not
`sys.stdout`), so each launch runs in a subprocess: once on the GPU, once on the simulator.
Lines of different warps (SIMT) or blocks (Tile) come in any order on the GPU, so the two
outputs are compared as sorted lines, and the simulator's text as it is (tests/test_print.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fearless as fl

pytestmark = pytest.mark.gpu
TESTS = Path(__file__).resolve().parents[1]


def _output(target: str, runner: str) -> str:
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_print; test_print.{runner}()"
    )
    env = dict(os.environ, FEARLESS_TARGET=target)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("runner", ["run_simt", "run_tile"])
def test_device_print_matches_the_simulator(runner: str) -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    gpu, sim = _output("cuda", runner), _output("sim", runner)
    assert sim
    assert sorted(gpu.splitlines()) == sorted(sim.splitlines())
