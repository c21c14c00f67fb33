"""Why some first calls spend most of their time in tileiras (issue 37): each kernel of
`mamba2_chunk_forward` / `mamba2_chunk_backward` at the tuning family's size (batch 1, seq
3072, 80 heads, head_dim 64, 1 group, state 128, chunk 128) and `moe_actgrad_bwd`'s kernel in
each ACTGRAD_CONFIGS configuration (300 tokens, hidden 2048, intermediate 768, 128 experts,
top 8), compiled for sm_90 on any machine (no GPU: the ops' launches are caught before they
run, and each specialisation is compiled alone), printing tileiras's time, the cubin's size
and what the cubin says a thread uses (registers; stack: spilled registers, cubin_info).

    .venv/bin/python bench/experiments/compile_slow_kernels.py [mamba2|actgrad|actgrad=KIND ...]
        [--dtype bf16|f16|f32] [--warps N] [--only KERNEL ...]

`actgrad=silu` another activation (swiglu by default); `--warps N` forces the num_worker_warps
hint on every kernel; `--only chunk_dx chunk_db chunk_dc chunk_ddt` compiles only the kernels
so named (the old `chunk_grads` with PYTHONPATH pointing at a copy of src/ holding it: the
kernels compiled are those the ops launch).

Measured 2026-12-06 on the 2-core CPU machine, bf16, sharing it with other sessions (load 2.5
to 6: a time is a range over two or three runs, the same kernel varying up to 3x; the bytes
and stacks are exact). Seconds / cubin bytes / registers / stack bytes a thread:
  before (the mmas on f32 tiles made from the 16-bit inputs)
    chunk_states fwd   4.3-5.5 s    438,736 B  168  8,328
    chunk_out         23.5-28.5 s 1,186,256 B  168 16,864
    chunk_states rev   5.8-7.6 s    438,992 B  168  8,328
    chunk_grads        267-302 s  2,958,796 B  255 35,224  (one run passed the 300 s timeout)
    group_sum, head_sum 0.3-3 s, 74,044 and 17,680 B (no mma; unchanged)
  after (tf32 mma operands for 16-bit inputs, `mm`; the running sum of a dt a masked row sum)
    chunk_states fwd   1.6 s         97,232 B  168      0
    chunk_out          4.1-6.1 s    163,664 B  168    592
    chunk_states rev   2.8-3.0 s     91,472 B  168      0
    chunk_grads       13.3-36.4 s   711,884 B  255  4,800
  (f16 after: chunk_out 3.0 s 161,744 B, chunk_grads 16.5 s 711,500 B 4,800.)
  chunk_grads split (issue 37): dx, db, dc in blocks of 64 steps of the chunk that each hold
  one (CS, 64) tile of wcb or q' (columns for dx and db, rows for dc) and 8 worker warps for
  16-bit inputs, then ddt, da, dd per chunk with no mma; 2026-12-06, load 1.6 to 2.1, the
  old kernels (HEAD's kernels_mamba2.py) in the same window, two runs each:
    chunk_grads       13.4-13.6 s   711,884 B  255  4,800   (before: one kernel)
    chunk_dx          1.40-1.41 s    94,672 B  168      0
    chunk_db          1.75-1.94 s   104,528 B  168      0
    chunk_dc          1.40-1.46 s    95,120 B  168      0
    chunk_ddt         0.44-0.46 s    41,360 B  255      0
  the gradients 13.4-13.6 s -> 5.0-5.2 s of tileiras and 712 -> 335 KB of cubin; the whole
  backward (chunk_states rev 1.2-1.4 s, group_sum 1.0-1.8 s, head_sum 0.2 s unchanged)
  16.1-16.7 s -> 7.7-7.8 s on this CPU, its largest kernel 13.6 s -> 1.9 s (what a pass that
  compiles the kernels side by side waits for). f16: 1.42 / 1.99 / 1.47 / 0.62 s, 0 stack.
  Tried on the way: two kernels (dx; the rest, per chunk, one (CS, CS) tile each): chunk_dx
  2.9 s 640 B of stack, the rest 15.1 s 8,064 B (its (CS, N) f32 tiles and q' still spilled);
  dx and db in one kernel of column blocks, 9.0 s 1,448 B (32-step blocks: 1,856 B); 8 worker
  warps without the blocks left it at 1,832 B. Blocks of 64 steps with tileiras's default
  warps: chunk_dx 2.6 s 192 B, chunk_db 4.0 s 272 B, chunk_dc 3.8 s 0 B.
  The gradient of g is now c_i . dc_i - b_i . db_i (rows less columns of the old
  q * cb): a difference that nearly cancels, so q' enters those mmas as two tf32 operands
  (`mm_exact`); with one, bf16 da was 4 to 5% off (f16 19%). f32 inputs (f32 x f32 mmas
  from FMAs, as every f32 kernel here): chunk_dx 7.7 s 7,352 B, chunk_db 6.5 s 8,936 B,
  chunk_dc 5.7 s 8,336 B, chunk_ddt 0.5 s, 1.67 MB in all, against the old chunk_grads's
  171.6 s, 2,809,680 B, 35,816 B of stack (a busier window, tests beside it); 8 worker warps
  gave 2.8-4.3 s and 5,720-7,208 B, left at tileiras's default as f32's kernels elsewhere.
The cause, as the delta rule's (commit 3d87773): `rows`/`row_block` cast the 16-bit inputs
to f32 and every mma (chunk_states 1, chunk_out 3, chunk_grads 10) was f32 x f32, which
tileiras builds from scalar FMAs, spilling tens of KB a thread. tf32 operands with the scan
kept gave chunk_states 59 KB, chunk_out 117 KB, chunk_grads 647 KB / 5,384, but chunk_out at
tests/test_ops_mamba2.py's compile shape (chunk 64) failed in tileiras ("Failed to select TMA
load instruction"), as chunk_prepare's did beside its tile.cumsum: hence the masked row sum.
chunk_grads still spilled (five (CS, CS) f32 tiles at chunk 128); tried without gain, in the
same window: its statements reordered (672 KB / 7,248), the 16-bit tiles cast to tf32 at the
mma with no f32 copy (647 KB / 5,384), num_worker_warps=8 (400 KB / 4,768, 32 vs 36 s). Less
needed another shape of the kernel: the split above.

moe_actgrad (swiglu), before / after (the 128-row configurations with num_worker_warps=8 for
16-bit inputs; its mma already took bf16 operands, dout's gathered rows and w2's tile):
    (64, 64, 64)     2.3-4.0 s  121,744 B 128  168  /  unchanged (no hint)
    (128, 64, 64)    5.2-8.2 s  265,488 B 168 1,256 /  2.1 s 119,312 B 168 40
    (128, 128, 64) 40.8-47.2 s  282,256 B 168 3,240 /  2.4 s 104,720 B 168 72
    (64, 128, 64)    1.9-3.0 s  201,232 B 255    8  /  unchanged (no hint)
  (the last two runs back to back in the same window).
With tileiras's default, (128, 128, 64) kept dy and the epilogue's (128, 128) f32 tiles in 168
registers a thread and spilled; not the GLU pair as such: silu spilled 2,952 bytes there (936
at (128, 64, 64)). 8 worker warps spread those tiles over twice the threads.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

os.environ["FEARLESS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-slow-compiles-")
os.environ["FEARLESS_AUTOTUNE"] = "0"

import numpy as np

import fearless as fl
from fearless.backends.cubin_info import kernel_resources
from fearless.backends.tileir import cuda_tile as tileir
from fearless.backends.tileir.lower import lower_to_bytecode
from fearless.runtime.target import current_target
from fearless.tile.kernel import Kernel

CAUGHT: list[tuple[str, Kernel, Any]] = []


def catch_launches(label: str) -> None:
    """Kernel launches record (label, kernel, signature) and run nothing."""

    def call(self: Kernel, *args: Any, **_: Any) -> None:
        signature, _values = self.signature_of(args, current_target())
        if all(k is not self or s != signature for _, k, s in CAUGHT):
            CAUGHT.append((label, self, signature))

    Kernel.__call__ = call  # type: ignore[method-assign]


def mamba2(dtype: str) -> None:
    from fearless import ops

    bsz, t, h, p, g, n, cs = 1, 3072, 80, 64, 1, 128, 128
    np_dt = {"bf16": fl.bf16, "f16": fl.f16, "f32": fl.f32}[dtype]
    z = lambda *s, dt=np_dt: fl.zeros(s, dtype=dt)  # noqa: E731
    x, b, c, dt = z(bsz, t, h, p), z(bsz, t, g, n), z(bsz, t, g, n), z(bsz, t, h)
    a, d = z(h, dt=fl.f32), z(h, dt=fl.f32)
    catch_launches("mamba2 fwd")
    ops.mamba2_chunk_forward(x, a, b, c, d, dt, None, cs)
    catch_launches("mamba2 bwd")
    ops.mamba2_chunk_backward(x, a, b, c, d, dt, None, x, None, cs)


def actgrad(dtype: str, kind: str = "swiglu") -> None:
    from fearless.ops import kernels_moe_actgrad as K

    tokens, hidden, inter, experts, topk = 300, 2048, 768, 128, 8
    tk, g = tokens * topk, 2
    dt = {"bf16": fl.bf16, "f16": fl.f16, "f32": fl.f32}[dtype]
    i32 = fl.i32
    offsets = fl.asarray((np.arange(experts + 1) * tk // experts).astype(np.int32))
    args = (
        fl.zeros((tokens, hidden), dtype=dt), fl.zeros((tk, g, inter), dtype=dt),
        fl.zeros((experts, inter, hidden), dtype=dt), fl.zeros((tokens * topk,), dtype=fl.f32),
        offsets, fl.zeros((tk,), dtype=i32), fl.zeros((tk,), dtype=i32),
    )  # fmt: skip
    dh, ap = fl.empty((tk, g, inter), dtype=dt), fl.empty((tk, inter), dtype=dt)
    if kind not in K.GLU:  # one half: h and dh (TK, 1, I)
        args = (args[0], fl.zeros((tk, 1, inter), dtype=dt), *args[2:])
        dh = fl.empty((tk, 1, inter), dtype=dt)
    ds = fl.zeros((tk,), dtype=fl.f32)
    for cfg in K.ACTGRAD_CONFIGS:
        catch_launches(f"actgrad ({cfg['bm']},{cfg['bn']},{cfg['bk']})")
        hints = [cfg["occupancy"]] + ([cfg["warps"]] if "warps" in cfg else [])  # before: none
        K.launch(kind, dh, ap, ds, *args, cfg["bm"], cfg["bn"], cfg["bk"], *hints)


def main(argv: list[str]) -> None:
    dtype = "bf16"
    if "--dtype" in argv:
        i = argv.index("--dtype")
        dtype = argv[i + 1]
        del argv[i : i + 2]
    warps = None  # tileiras's num_worker_warps hint for every kernel (an experiment)
    if "--warps" in argv:
        i = argv.index("--warps")
        warps = int(argv[i + 1])
        del argv[i : i + 2]
    only: list[str] = []
    if "--only" in argv:
        i = argv.index("--only")
        only = argv[i + 1 :]
        del argv[i:]
    for what in argv or ["mamba2", "actgrad"]:
        if what.startswith("actgrad="):  # another activation: actgrad=silu
            actgrad(dtype, what.partition("=")[2])
        else:
            {"mamba2": mamba2, "actgrad": actgrad}[what](dtype)
    version = tileir.bytecode_version()
    tileir.TILEIRAS_TIMEOUT_S = 1800.0  # the old chunk_grads passes 300 s on a busy machine
    for label, kernel, signature in CAUGHT:
        if only and kernel.name not in only:
            continue
        if warps is not None:
            kernel = kernel.options(num_worker_warps=warps)
        code = lower_to_bytecode(kernel.ir_for(signature), version, "sm_90")
        start = time.perf_counter()
        try:
            cubin = tileir.compile_cubin(code, "sm_90")
        except fl.ToolchainError as exc:
            print(f"{label:28s} {kernel.name:14s} failed: {str(exc).splitlines()[0]}")
            continue
        took = time.perf_counter() - start
        res = kernel_resources(cubin)
        use = ", ".join(f"{r.registers} regs {r.stack} stack" for r in res)
        print(
            f"{dtype} {label:28s} {kernel.name:14s} {took:6.2f} s {len(cubin):>10,} B  {use}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
