"""examples/ddp_allreduce.py as torchrun runs it: two ranks on the simulator (gloo), each
running fearless.ops on its shard between all-reduces, checked inside the example against one
process and against torch in f64 (it prints "ok" only then). On GPUs the same script runs with
NCCL, one GPU per rank (issue 15's two-GPU run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ddp_allreduce.py"


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="no gloo")
def test_two_ranks_on_the_simulator_match_one_process() -> None:
    env = dict(os.environ, FEARLESS_TARGET="sim", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    args = [str(EXAMPLE), "--rows", "64", "--dim", "64", "--out", "32", "--steps", "2"]
    run = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ranks 2, target sim" in run.stdout and run.stdout.rstrip().endswith("ok"), run.stdout
