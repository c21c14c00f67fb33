"""Why the chunked gated delta rule's first call takes 15 s (session 24, H100, with the shipped
table): its two kernels' mma operands are f32 (u, w and gc are f32 scratch, the state is f32),
and tileiras builds an f32 x f32 mma without tensor cores, as scalar FMAs, which makes cubins of
0.5 to 0.66 MB that take 5 to 11 s to assemble. This compiles chunk_prepare and chunk_inter
for sm_90 on any machine (no GPU: the compile-ahead pass forced on the simulator, its compiles
real) as shipped and with every mma's operands cast to tf32 or bf16, the kernel source patched
in memory, and prints each compile's time and cubin size.

    .venv/bin/python bench/experiments/delta_rule_mma_dtype.py {f32,tf32,bf16} [MMA ...]

MMA: the indices into `MMAS` to cast (all by default; 0 to 2 are chunk_prepare's).

Measured on the 2-core CPU machine (2026-12-06, session 24), seconds / cubin bytes (a second
run, on a busier machine: f32 6.93 and 12.66 s, tf32 chunk_inter 2.53 s, the same bytes):
    f32 (shipped)  chunk_prepare 4.66 / 494,160   chunk_inter 9.56 / 662,160
    tf32           chunk_prepare tileiras fails ("Failed to select TMA store instruction")
                   chunk_inter 1.69 / 79,888
    bf16           chunk_prepare fails the same way; chunk_inter 1.44 / 68,624
One at a time (`tf32 0`, `tf32 1`, ...): the failing one is chunk_prepare's first mma,
kb @ kt^T (bf16 fails there too); with only its second and third cast, chunk_prepare takes
8.1 s and 328 KB, so that first f32 mma is most of its cubin. (chunk_inter's q @ k^T, the same
form, compiles with tf32 operands.)
The trigger is chunk_prepare's `tile.cumsum` of g beside 16-bit or tf32 mmas (a kernel cut
down from it compiles in tf32 until the running sum is used): with NOSCAN=1 the running sum is
a masked row sum instead, and every mma in tf32 compiles, `NOSCAN=1 ... tf32`:
    chunk_prepare 1.8 / 94,800 (f32: 4.7 / 494,160)   chunk_inter 1.9 / 79,888
3d87773 shipped that form for 16-bit inputs (f32 inputs keep f32 operands and the scan), so
the patching below matches the kernels of its parent only: run this from `git worktree add
OLD 3d87773~1` with PYTHONPATH=OLD/src to repeat it. Before that commit, what was left: the GPU's times and the precision against
TileGym's tolerances (the simulator rounds tf32 operands: f32 inputs in tf32 miss the f32 tests'
1e-5), and the
chunk_prepare failure with 16-bit or tf32 operands (a tileiras report, or another way to write
it).
"""

import importlib
import importlib.util
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["FEARLESS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-delta-mma-")
os.environ["FEARLESS_AUTOTUNE"] = "0"  # one configuration of chunk_inter

import numpy as np

from fearless import autotune_ahead, ops
from fearless.ops import delta_rule as DR
from fearless.ops import kernels_delta_rule as KD
from fearless.tile import compile_ahead as ahead

# each mma of the two chunk kernels, as written in ops/kernels_delta_rule.py
MMAS = (
    ("kb", "kt.transpose()", "tile.zeros((CS, CS), fl.f32)"),
    ("tm", "kbe", "tile.zeros((CS, KP), fl.f32)"),
    ("tm", "vt * bt", "tile.zeros((CS, VC), fl.f32)"),
    ("wt", "s", "tile.zeros((CS, BV), fl.f32)"),
    ("qt * tile.exp(gcum)", "s", "tile.zeros((CS, BV), fl.f32)"),
    ("qt", "kt.transpose()", "tile.zeros((CS, CS), fl.f32)"),
    ("qk", "v_new", "o"),
    ("kw.transpose()", "v_new", "s * tile.exp(g_last)"),
)


def patched(dtype: str) -> None:
    """ops.delta_rule's kernels from a copy of their source whose mma operands are `dtype`."""
    src = inspect.getsource(KD)
    chosen = [int(i) for i in sys.argv[2:]] or range(len(MMAS))
    for a, b, acc in (MMAS[i] for i in chosen):
        written = f"tile.mma({a}, {b}, {acc})"
        assert written in src, written
        src = src.replace(
            written, f"tile.mma(({a}).astype(fl.{dtype}), ({b}).astype(fl.{dtype}), {acc})"
        )
    if os.environ.get("NOSCAN"):  # chunk_prepare's running sum of g without tile.cumsum
        scan = "gcum = tile.cumsum(column(g, b, ci, hv, CS), axis=0)"
        assert scan in src, scan
        src = src.replace(
            scan,
            "gcum = tile.sum(tile.where(tile.arange(CS)[:, None] >= tile.arange(CS)[None, :], "
            "column(g, b, ci, hv, CS).reshape((1, CS)), 0.0), axis=1)",
        )
    path = Path(tempfile.mkdtemp()) / "kernels_delta_rule.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("fearless.ops.kernels_delta_rule", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    DR.chunk_inter_tuned = module.chunk_inter_tuned
    DR.chunk_prepare_launch = module.chunk_prepare_launch


def timed_compiles(label: str) -> None:
    kernel_module = importlib.import_module("fearless.tile.kernel")
    kernel_module.ahead_applies = lambda target: True
    real = ahead.compile_cubin

    def compile_cubin(ir, arch):
        t = time.perf_counter()
        try:
            out = real(ir, "sm_90")
        except Exception as exc:
            print(f"{label:5s} {ir.name:14s} failed: {str(exc).splitlines()[0]}", flush=True)
            raise
        print(f"{label:5s} {ir.name:14s} {time.perf_counter() - t:6.2f} s  {len(out.cubin):>9,} B")
        return out

    def on_the_gpu(call):
        with ahead.compile_ahead(1):  # one at a time: each compile's own time
            call()

    ahead.compile_cubin = compile_cubin
    autotune_ahead.compile_ahead_of = on_the_gpu


def main() -> None:
    dtype = sys.argv[1] if len(sys.argv) > 1 else "f32"
    if dtype != "f32":
        patched(dtype)
    timed_compiles(dtype)
    rng = np.random.default_rng(0)
    b, t, h, k, v = 1, 128, 2, 128, 128
    f = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    g = (-rng.random((b, t, h)) * 0.1).astype(np.float32)
    beta = rng.random((b, t, h)).astype(np.float32)
    ops.chunk_gated_delta_rule(f(b, t, h, k), f(b, t, h, k), f(b, t, h, v), g, beta, 64)


if __name__ == "__main__":
    main()
