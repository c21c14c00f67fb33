"""`print(...)` in kernels on the GPU prints what the simulator prints.

The device's printf writes to the process's standard output (file descriptor 1, not
`sys.stdout`), so each launch runs in a subprocess: once on the GPU, once on the simulator.
Lines of different warps (SIMT) come in any order on the GPU, so SIMT outputs are compared as
sorted lines. Tile's print is not atomic per line on the GPU: measured on the H200, two blocks'
lines interleave piece by piece ("0block | : max=1    3.00 | sum |  n=22.0000001 |  50%"), so
Tile outputs are compared as multisets of characters (a wrong value still changes them), and
a one-block launch line by line. The simulator's text itself is tests/test_print.py's; the
kernels are tests/support/print_runners.py's.
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
    code = f"from support.print_runners import {runner}; {runner}()"
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, FEARLESS_TARGET=target, PYTHONPATH=path)  # tests/ for `support`
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
    if runner == "run_tile":
        assert sorted(gpu) == sorted(sim)
    else:
        assert sorted(gpu.splitlines()) == sorted(sim.splitlines())


def test_one_tile_block_prints_whole_lines() -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    gpu, sim = _output("cuda", "run_tile_one_block"), _output("sim", "run_tile_one_block")
    assert sim and gpu.splitlines() == sim.splitlines()


def test_whole_tiles_print_as_the_simulator_prints_them() -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    gpu, sim = _output("cuda", "run_tile_whole"), _output("sim", "run_tile_whole")
    assert sim and gpu.splitlines() == sim.splitlines()
