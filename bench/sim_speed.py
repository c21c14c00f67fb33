"""How fast the simulator runs a 1M-element vecadd (issue 2 asks for well under 2 s).

PYTHONPATH=src python bench/sim_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))


def main() -> None:
    import fearless as fl
    import simt_kernels as K

    fl.set_target("sim")
    n = 1 << 20
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    t0 = time.perf_counter()
    K.vecadd[(n + 255) // 256, 256](a, b, c)
    first = time.perf_counter() - t0
    assert np.array_equal(c, a + b)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        K.vecadd[(n + 255) // 256, 256](a, b, c)
        times.append(time.perf_counter() - t0)
    print(
        f"simulator vecadd 2^20: first call {first * 1e3:.0f} ms (compile included), "
        f"warm median {statistics.median(times) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
