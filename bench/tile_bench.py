"""Tile-track benchmarks of issue 4 on the GPU, side by side with cuTile Python in one process.

    source .tiletools/unpack.sh   # tileiras for fearless and cuTile Python (DESIGN section 7)
    PYTHONPATH=src python bench/tile_bench.py --out bench/results/tile

Cases (each checked against torch before it is timed):
- f32 vecadd of 2^28 elements: fearless Tile against cuTile Python's plain kernel (1024 tiles).
- bf16 row softmax, 8192 x 8192: fearless Tile against TileGym's `ops.softmax` and cuTile
  Python's plain one-row-per-block kernel.
- fp16 (and bf16) GEMM 8192^3: fearless Tile over a sweep of tile shapes and hints, against
  cuTile Python's plain kernel at 128x128x64 (the issue's reference) and 128x256x64, and cuBLAS.

Timing is the suite's (`fearless_bench.timing.DeviceTimer`): warm-up, CUDA events around each
run, a 256 MB L2 flush before each, the median. Writes tile.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))

GEMM_N = 8192
SECTIONS = ("vecadd", "softmax", "norms", "gemm", "gemm-sizes")
# The GEMM configurations tried at every size of the suite (1024^3 to 8192^3, fp16).
GEMM_SIZE_CONFIGS = [
    (128, 128, 64, None, None),
    (128, 128, 64, None, 2),
    (128, 128, 64, None, 1),
    (128, 256, 64, 2, None),
    (256, 128, 64, 2, None),
    (128, 128, 128, None, 2),
]
# Earlier runs (results/h200-2026-12-02-tile/r1, r2) swept occupancy 2-16 and 1-4 rows per
# block; these are the neighbourhoods of the best, now also over worker warps and TMA or not.
SOFTMAX_OCCUPANCY = (None, 2, 4)  # None: the example's own hint
NORM_OCCUPANCY = (4, 8)
WORKER_WARPS = (None, 4, 8)
# (BM, BN, BK, num_ctas, occupancy): the first is the reference configuration. The
# first H200 run (results/h200-2026-12-02-tile/r1) also tried 128x256x64, 256x128x64,
# 128x256x32 and 256x256x64 without a cluster: 20-77 TFLOP/s, left out since.
GEMM_CONFIGS = [
    (128, 128, 64, None, None),
    (128, 128, 64, None, 2),
    (128, 256, 64, 2, None),
    (256, 128, 64, 2, None),
    (128, 128, 64, 2, 2),
    (128, 128, 64, None, 3),
    (128, 128, 32, None, 2),
    (128, 256, 64, 2, 2),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="fewer GEMM configurations")
    ap.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="the sections to run"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import tile_kernels as tk
    import torch

    import fearless as fl
    from fearless_bench.timing import FULL, DeviceTimer

    timer = DeviceTimer(torch, FULL)
    rows: list[dict[str, Any]] = []

    def record(case: str, impl: str, fn: Callable[[], Any], check: Callable[[], float],
               work: float, unit: str, note: str = "") -> None:  # fmt: skip
        entry: dict[str, Any] = {"case": case, "impl": impl, "note": note}
        try:
            fn()
            torch.cuda.synchronize()
            entry["rel_err"] = err = check()
            if not err < 2e-2:
                raise AssertionError(f"wrong result: relative error {err:.3g}")
            t = timer.time(fn)
            entry.update(ms=t.median, p20=t.p20, p80=t.p80, reps=t.reps)
            entry[unit] = work / (t.median * 1e-3) / (1e9 if unit == "GB/s" else 1e12)
        except Exception as exc:  # a failing implementation is reported, never dropped
            entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
            traceback.print_exc()
        rows.append(entry)
        shown = f"{entry[unit]:9.1f} {unit}" if unit in entry else entry["error"][:60]
        print(f"{case:22} {impl:34} {shown}  {note}", flush=True)

    def rel(got: Any, want: Any) -> float:
        got, want = got.double(), want.double()
        return float((got - want).norm() / want.norm())

    peers: dict[str, Any] = {}
    try:
        from fearless_bench import kernels_cutile as kc

        peers["cutile"] = kc
    except Exception as exc:
        print("cuTile Python unavailable:", exc)
    try:
        import tilegym

        tilegym.set_backend("cutile")
        peers["tilegym"] = tilegym
    except Exception as exc:
        print("TileGym unavailable:", exc)

    # ------------------------------------------------------------------ vecadd, f32, 2^28
    if "vecadd" in args.only:
        vecadd_section(record, rel, peers, torch, fl, tk)
    if "softmax" in args.only:
        softmax_section(record, rel, peers, torch, fl, tk)
    if "norms" in args.only:
        norms_section(record, rel, peers, torch, fl, tk)
    if "gemm" in args.only:
        gemm_section(record, rel, peers, torch, fl, tk, args.quick)
    if "gemm-sizes" in args.only:
        gemm_sizes_section(record, rel, torch, fl, tk)
    (args.out / "tile.json").write_text(json.dumps(rows, indent=1))
    print("wrote", args.out / "tile.json")
    return 0


def vecadd_section(record: Any, rel: Any, peers: Any, torch: Any, fl: Any, tk: Any) -> None:
    n = 1 << 28
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    want = x + y
    nbytes = 3 * 4 * n
    z = torch.empty_like(x)
    zp = fl.asarray(z).partition((1024,))
    record("vecadd_f32_2^28", "fearless-tile", lambda: tk.vecadd(zp, x, y),
           lambda: rel(z, want), nbytes, "GB/s", "tile 1024")  # fmt: skip
    if "cutile" in peers:
        zc = torch.empty_like(x)
        record("vecadd_f32_2^28", "cutile-python", peers["cutile"].vecadd_launch(x, y, zc),
               lambda: rel(zc, want), nbytes, "GB/s", "tile 1024")  # fmt: skip
    zt = torch.empty_like(x)
    record("vecadd_f32_2^28", "torch", lambda: torch.add(x, y, out=zt),
           lambda: rel(zt, want), nbytes, "GB/s")  # fmt: skip


def softmax_section(record: Any, rel: Any, peers: Any, torch: Any, fl: Any, tk: Any) -> None:
    m = 8192
    s = torch.randn(m, m, device="cuda").to(torch.bfloat16)
    sref = torch.softmax(s.float(), dim=1)
    nbytes = 2 * 2 * m * m
    so = torch.empty_like(s)
    sp = fl.asarray(so).partition((1, m))
    # The example's kernel without its hints, loading rows through TMA or straight to registers.
    bases = (("tma", tk.make_softmax(fl.bf16, tma=True)), ("ldg", tk.make_softmax(fl.bf16)))
    for label, base in bases:
        for occ in SOFTMAX_OCCUPANCY:
            for warps in WORKER_WARPS:
                ko = base.options(occupancy=occ, num_worker_warps=warps)
                h = ko.hints
                name = f"fearless-tile {label} occ={h.occupancy} warps={h.num_worker_warps}"
                record("softmax_bf16_8192^2", name, lambda ko=ko: ko(sp, s),
                       lambda: rel(so, sref), nbytes, "GB/s")  # fmt: skip
    if "tilegym" in peers:
        ops = peers["tilegym"].ops
        out: dict[str, Any] = {}

        def tg() -> None:
            out["y"] = ops.softmax(s)

        record("softmax_bf16_8192^2", "tilegym.ops.softmax", tg,
               lambda: rel(out["y"], sref), nbytes, "GB/s", "allocates its output")  # fmt: skip
    if "cutile" in peers:
        sc = torch.empty_like(s)
        record("softmax_bf16_8192^2", "cutile-python", peers["cutile"].softmax_launch(s, sc),
               lambda: rel(sc, sref), nbytes, "GB/s", "plain, one row per block")  # fmt: skip
    st = torch.empty_like(s)
    record("softmax_bf16_8192^2", "torch", lambda: torch.softmax(s, dim=1, out=st),
           lambda: rel(st, sref), nbytes, "GB/s")  # fmt: skip


def norms_section(record: Any, rel: Any, peers: Any, torch: Any, fl: Any, tk: Any) -> None:
    r, cols, eps = 65536, 1024, 1e-5
    xn = torch.randn(r, cols, device="cuda")
    w, bias = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    fn = torch.nn.functional
    norms = {
        "rms_norm": (
            (tk.make_rms_norm(tma=True), tk.make_rms_norm()),
            [xn, w],
            fn.rms_norm(xn.double(), (cols,), w.double(), eps),
        ),
        "layer_norm": (
            (tk.make_layer_norm(tma=True), tk.make_layer_norm()),
            [xn, w, bias],
            fn.layer_norm(xn.double(), (cols,), w.double(), bias.double(), eps),
        ),
    }
    nbytes = 2 * 4 * r * cols
    for name, (kerns, inputs, nref) in norms.items():
        case = f"{name}_f32_65536x1024"
        no = torch.empty_like(xn)
        for kern, how in zip(kerns, ("tma", "ldg"), strict=True):
            for bm in (1, 2, 4):
                npart = fl.asarray(no).partition((bm, cols))
                for occ in NORM_OCCUPANCY:
                    for warps in WORKER_WARPS[::2]:
                        ko = kern.options(occupancy=occ, num_worker_warps=warps)
                        h = ko.hints
                        label = (f"fearless-tile {how} {bm}x{cols} occ={h.occupancy} "
                                 f"warps={h.num_worker_warps}")  # fmt: skip
                        record(case, label,
                               lambda ko=ko, npart=npart, inputs=inputs: ko(npart, *inputs, eps),
                               lambda no=no, nref=nref: rel(no, nref), nbytes, "GB/s")  # fmt: skip
        if "tilegym" in peers:
            ops = peers["tilegym"].ops
            res2: dict[str, Any] = {}
            tg_run = {
                "rms_norm": lambda ops=ops: ops.rms_norm(xn, None, w, eps),
                "layer_norm": lambda ops=ops: ops.layer_norm_legacy(xn, None, w, bias, eps),
            }[name]

            def tgn(tg_run: Any = tg_run, res2: dict[str, Any] = res2) -> None:
                res2["y"] = tg_run()

            record(case, "tilegym.ops", tgn, lambda res2=res2, nref=nref: rel(res2["y"], nref),
                   nbytes, "GB/s")  # fmt: skip
        eager = {
            "rms_norm": lambda: fn.rms_norm(xn, (cols,), w, eps),
            "layer_norm": lambda: fn.layer_norm(xn, (cols,), w, bias, eps),
        }[name]
        res3: dict[str, Any] = {}

        def ev(eager: Any = eager, res3: dict[str, Any] = res3) -> None:
            res3["y"] = eager()

        record(case, "torch", ev, lambda res3=res3, nref=nref: rel(res3["y"], nref), nbytes, "GB/s")


def gemm_section(
    record: Any, rel: Any, peers: Any, torch: Any, fl: Any, tk: Any, quick: bool
) -> None:
    configs = GEMM_CONFIGS[:4] if quick else GEMM_CONFIGS
    flops = 2 * GEMM_N**3
    for tdt, dt_name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        a = torch.randn(GEMM_N, GEMM_N, device="cuda").to(tdt)
        b = torch.randn(GEMM_N, GEMM_N, device="cuda").to(tdt)
        ref = a.float() @ b.float()
        case = f"gemm_{dt_name}_8192^3"
        kernel = tk.matmul_f16 if dt_name == "f16" else tk.matmul_bf16
        for bm, bn, bk, ctas, occ in configs if dt_name == "f16" else configs[:2]:
            c = torch.empty(GEMM_N, GEMM_N, device="cuda", dtype=tdt)
            cp = fl.asarray(c).partition((bm, bn))
            k = kernel.options(num_ctas=ctas, occupancy=occ) if (ctas or occ) else kernel
            name = f"fearless-tile {bm}x{bn}x{bk}"
            name += f" ctas={ctas}" if ctas else ""
            name += f" occ={occ}" if occ else ""
            record(case, name, lambda k=k, cp=cp, bk=bk, a=a, b=b: k(cp, a, b, bk),
                   lambda c=c, ref=ref: rel(c, ref), flops, "TFLOP/s")  # fmt: skip
        if "cutile" in peers:
            for tiles in ((128, 128, 64), (128, 256, 64)):
                c = torch.empty(GEMM_N, GEMM_N, device="cuda", dtype=tdt)
                record(case, "cutile-python {}x{}x{}".format(*tiles),
                       peers["cutile"].matmul_launch(a, b, c, tiles),
                       lambda c=c, ref=ref: rel(c, ref), flops, "TFLOP/s")  # fmt: skip
        if "tilegym" in peers:
            res: dict[str, Any] = {}

            def tgm(a: Any = a, b: Any = b, res: dict[str, Any] = res) -> None:
                res["c"] = peers["tilegym"].ops.matmul(a, b)

            record(case, "tilegym.ops.matmul", tgm, lambda res=res, ref=ref: rel(res["c"], ref),
                   flops, "TFLOP/s", "allocates its output")  # fmt: skip
        c = torch.empty(GEMM_N, GEMM_N, device="cuda", dtype=tdt)
        record(case, "torch (cuBLAS)", lambda c=c, a=a, b=b: torch.matmul(a, b, out=c),
               lambda c=c, ref=ref: rel(c, ref), flops, "TFLOP/s")  # fmt: skip


def gemm_sizes_section(record: Any, rel: Any, torch: Any, fl: Any, tk: Any) -> None:
    for n in (1024, 2048, 4096, 8192):
        a = torch.randn(n, n, device="cuda").to(torch.float16)
        b = torch.randn(n, n, device="cuda").to(torch.float16)
        ref = a.float() @ b.float()
        case, flops = f"gemm_f16_{n}^3", 2 * n**3
        for bm, bn, bk, ctas, occ in GEMM_SIZE_CONFIGS:
            c = torch.empty(n, n, device="cuda", dtype=torch.float16)
            cp = fl.asarray(c).partition((bm, bn))
            k = tk.matmul_f16.options(num_ctas=ctas, occupancy=occ)
            name = f"fearless-tile {bm}x{bn}x{bk} ctas={k.hints.num_ctas} occ={k.hints.occupancy}"
            record(case, name, lambda k=k, cp=cp, bk=bk, a=a, b=b: k(cp, a, b, bk),
                   lambda c=c, ref=ref: rel(c, ref), flops, "TFLOP/s")  # fmt: skip
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        record(case, "torch (cuBLAS)", lambda c=c, a=a, b=b: torch.matmul(a, b, out=c),
               lambda c=c, ref=ref: rel(c, ref), flops, "TFLOP/s")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
