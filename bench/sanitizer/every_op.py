"""One call of every fearless.ops operator on CUDA torch tensors, checked against NumPy: the
program bench/sanitizer/run.sh runs under compute-sanitizer (issue 33)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import fearless as fl
from support.ops_kinds import cases, run_case

fl.set_target("cuda")
for case in cases():
    run_case(case, "torch_cuda")
    print("ok", case.name)
fl.synchronize()
