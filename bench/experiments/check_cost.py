"""Experiment: what makes a device bounds check expensive in vecadd (2^28 f32)?

Variants of the same kernel's code generation, timed in one process:
  checked       the backend as it is (grouped checks: compares, one branch, inlined report)
  inlined       the report routine forced inline (the same as `checked` since it is inlined)
  no_report     the cold block only returns (no record written): the price of the branch alone
  unsafe        no checks at all
Writes SASS of each to $OUT/sass_<variant>.txt when cuobjdump is present.
    PYTHONPATH=src python bench/experiments/check_cost.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples"))


def build_variants() -> dict[str, str]:
    from llvmlite import ir

    import simt_cases as C
    import simt_kernels as K
    from fearless.backends.llvm import ptx as backend
    from fearless.backends.llvm import lower as llvm_lower, support as llvm_support
    from fearless.ir.simt import ops

    def ptx_of(kernel) -> str:  # type: ignore[no-untyped-def]
        irx = kernel.compiled_ir()
        mod = backend.lower_function(irx.fn, irx.params, irx.contract, "k")
        return backend.compile_ptx(mod, "sm_90")

    out = {"checked": ptx_of(K.vecadd), "unsafe": ptx_of(C.vecadd_unsafe)}
    orig_report = llvm_support.Support.report_oob if hasattr(llvm_support, "Support") else None
    cls = next(v for v in vars(llvm_support).values()
               if isinstance(v, type) and hasattr(v, "report_oob"))
    orig_report = cls.report_oob

    def inlined(self):  # type: ignore[no-untyped-def]
        fn = orig_report(self)
        fn.attributes._known = fn.attributes._known | {"alwaysinline"}  # type: ignore[attr-defined]
        fn.attributes.discard("noinline")
        fn.attributes.discard("cold")
        fn.attributes.add("alwaysinline")
        return fn

    cls.report_oob = inlined
    try:
        out["inlined"] = ptx_of(K.vecadd)
    finally:
        cls.report_oob = orig_report

    orig_check = llvm_lower._HANDLERS[ops.BoundsCheck]

    def no_report(self, op):  # type: ignore[no-untyped-def]
        b = self.builder
        index, length = (self._v(v) for v in op.operands)
        ok = b.icmp_unsigned("<", index, length)
        good = self.kernel.append_basic_block("ok")
        bad = self.kernel.append_basic_block("bad")
        b.cbranch(ok, good, bad).set_weights([1 << 20, 1])
        b.position_at_end(bad)
        b.ret_void()
        b.position_at_end(good)

    llvm_lower._HANDLERS[ops.BoundsCheck] = no_report
    try:
        out["no_report"] = ptx_of(K.vecadd)
    finally:
        llvm_lower._HANDLERS[ops.BoundsCheck] = orig_check
    del ir
    return out


def main() -> None:
    import ctypes
    import statistics

    import torch
    from cuda.bindings import driver as cu

    from fearless.runtime import driver

    driver.ensure_initialized()
    variants = build_variants()
    n = 1 << 28
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    rec = torch.zeros(16, dtype=torch.int64, device="cuda")
    outdir = Path(os.environ.get("OUT", tempfile.mkdtemp()))
    results = {}
    for name, ptx in variants.items():
        (outdir / f"ptx_{name}.ptx").write_text(ptx)
        err, mod = cu.cuModuleLoadData(ptx.encode() + b"\0")
        assert err == 0, err
        err, fn = cu.cuModuleGetFunction(mod, b"k")
        assert err == 0, err
        vals = [ctypes.c_uint64(a.data_ptr()), ctypes.c_int64(n), ctypes.c_uint64(b.data_ptr()),
                ctypes.c_int64(n), ctypes.c_uint64(c.data_ptr()), ctypes.c_int64(n),
                ctypes.c_uint64(rec.data_ptr())]
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        grid = (n + 255) // 256

        def launch() -> None:
            cu.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, 0, ctypes.addressof(arr), 0)

        c.zero_()
        launch()
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), name
        times = []
        for _ in range(3):
            launch()
        for _ in range(40):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            launch()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        results[name] = statistics.median(times)
        if shutil.which("cuobjdump"):
            cubin = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(outdir / f"ptx_{name}.ptx"),
                                    "-o", str(outdir / f"{name}.cubin")], capture_output=True,
                                   text=True, check=False)
            sass = subprocess.run(["cuobjdump", "--dump-sass", str(outdir / f"{name}.cubin")],
                                  capture_output=True, text=True, check=False).stdout
            (outdir / f"sass_{name}.txt").write_text(cubin.stderr + sass)
    for name, ms in results.items():
        print(f"{name:10s} {ms:.4f} ms  {3 * 4 * n / ms / 1e6:.0f} GB/s  x{ms / results['unsafe']:.3f} of unsafe")


if __name__ == "__main__":
    main()
