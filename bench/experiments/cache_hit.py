"""Experiment: where the time of a disk-cache hit goes, in a fresh process per run.

    PYTHONPATH=src python bench/experiments/cache_hit.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STEPS = r"""
import sys, time
sys.path.insert(0, {src!r}); sys.path.insert(0, {ex!r})
t = [time.perf_counter()]
import fearless as fl
import simt_kernels as K
t.append(time.perf_counter())
fl.synchronize()
t.append(time.perf_counter())
from fearless import cache
from fearless.simt.compiler import cache_key
from fearless.runtime.target import default_arch
arch = default_arch()
t.append(time.perf_counter())
from fearless.runtime import driver
tiny = b".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry t() {{ ret; }}\0"
err, mod = driver.cu().cuModuleLoadData(tiny)
err, fn = driver.cu().cuModuleGetFunction(mod, b"t")
driver.cu().cuFuncGetAttribute(driver.cu().CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
t.append(time.perf_counter())
key = cache_key(K.vecadd, arch)
t.append(time.perf_counter())
hit = cache.load(key)
t.append(time.perf_counter())
ck = K.vecadd.compile()
t.append(time.perf_counter())
from fearless.runtime.driver import load_kernel
lk = load_kernel(ck)
t.append(time.perf_counter())
names = ["import", "context", "arch", "first_module_load(tiny)", "cache_key", "cache.load",
         "compile()", "load_kernel"]
print(" ".join(f"{{n}}={{(b - a) * 1e3:.1f}}ms" for n, a, b in zip(names, t, t[1:])),
      "hit" if hit is not None else "MISS", lk.binary, key[:12])
"""


def main() -> None:
    code = STEPS.format(src=str(ROOT / "src"), ex=str(ROOT / "examples"))
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FEARLESS_CACHE_DIR": cache}
        for run in range(3):
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=False)
            print(f"run {run}:", out.stdout.strip(), out.stderr.strip()[-500:])


if __name__ == "__main__":
    main()
