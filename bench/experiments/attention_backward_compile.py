"""What the first training call of causal attention at a new size class compiles, kernel by
kernel: the tuning family's `tuning_near_attention_backward_causal_hd128_bf16_2x16x3000x128`
(bf16, causal, B 2, H 16, L = S = 3000, head dim 128; issue 37: 8.58 s on the H100, session
24, against a 3 s goal).

That call (ops/attention.py with keep_lse) opens one compile-ahead pass over the forward and
its backward (kernels_attention_backward.forward_with_backward_ahead), then tunes the forward,
and in the backward runs attention_delta and tunes dk_dv and dq (head dim 128: no atomic dQ).
Its key (size classes 5, 12, 12, group 1) is in no shipped table entry, so each tuned function
queues the winners of its NEAR nearest entries of the same key form in
src/fearless/tuning/sm_90.json (`Autotuned._order`), or every configuration where no entry has
its form; the pass compiles them all on `compile_ahead.workers()` threads (one tileiras per
core, at most 16), side by side, forward and backward together.

This runs that pass on any machine (no GPU: the pass forced on the simulator, the tables read
as sm_90's, the backward's prune as on a device; its compiles real, for sm_90) on WORKERS
threads (1: each compile's own time), and prints each compile (the tuned function and
configuration that queued it, tileiras seconds, cubin bytes, registers, spills, threads), the
pass's wall time, and then whether the backward as the real call makes it (a fresh d_out and
fresh gradients) would compile anything the pass did not.

    .venv/bin/python bench/experiments/attention_backward_compile.py [WORKERS] [--backward]

`--backward`: the backward's kernels only.

Measured on the 2-core CPU machine (2026-12-06; load average 4 to 6 from other sessions, so
a compile's time moves by up to 40 % between runs: the ranges are 2 to 5 runs), WORKERS 1,
tileiras seconds / cubin bytes (registers, stack bytes a thread, threads a block):
  forward  attention_tuned, all 9 configurations (tile_m, tile_n, occupancy, worker warps):
           its training key holds lse's f32 beside the 4 bf16 dtypes of the table's entries,
           a form no entry has, so no neighbour shortlists it (without lse: configs 5 and 7;
           since `key_dtypes` left lse's dtype out of the key, the pass compiles those two:
           8 compiles in all, 30.1 s of tileiras, the slowest 6.2 s, on 2 loaded workers)
           (128,128,2) 2.4-2.5 / 73,872 (128, 328)     (256,128,1) 4.3-4.6 / 244,368 (168, 6088)
           (256,128,2) 4.3-4.7 / 244,368 (168, 6088)   (128,64,2)  1.2-1.4 / 50,576 (128, 0)
           (64,64,4)   1.3-1.4 / 57,104 (128, 0)       (64,128,2)  1.1 / 44,048 (128, 0)
           (128,128,1) 2.0 / 73,744 (168, 312)         (128,128,1,8) 1.0-1.1 / 44,304 (168, 0)
           (256,128,1,8) 2.1-2.4 / 74,896 (168, 320)
  backward attention_delta 0.4-0.7 / 22,032
           dkdv_tuned choice 2 (128,64,-) 2.5-3.5 and choice 0 (128,64,2) 2.8-4.9 / 86,416
           (168, 0, 384 threads: two consumer warp groups, two setmaxnreg.inc sites)
           dq_tuned choice 0 (128,128,-,8) 1.1-1.6 / 47,440; choice 2 (64,64,2) 0.8-1.0 /
           39,504; choice 1 (64,128,-) 1.2-1.5 / 46,160
  15 compiles: 29.8-32.7 s of tileiras one after another (backward alone: 6, 12.0 s). On 2
  workers the pass takes the same wall time here (two cores, already loaded): on the H100's 16
  the 15 run side by side and the pass is about its slowest compile, a (256,128) forward. The
  real backward after the pass compiles nothing new (its specialisations are the pass's).
Beside them (dkdv alone, `_step`, patched in memory): the other dkdv candidates at D 128,
(64,64,2) 1.2-1.4 / 47,632 (128 regs, 256 threads) and (64,128,-,8) 0.9-1.0 / 47,888; without
the GROUP loop 2.9 s / the same 86,416 bytes (it folds); with the scores computed transposed
(S^T = K Q^T, P^T and dS^T without register transposes, as Triton's tutorial) 2.0 s / 60,304
but 255 registers and 160 B of spills on one consumer warp group: another GPU schedule, not
taken. Every mma of the backward already takes bf16 operands (the forward's form).
"""

import os
import sys
import tempfile
import threading
import time

os.environ["FEARLESS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-attn-bwd-")
os.environ["CUDA_TILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-attn-bwd-tile-")

import importlib
from collections.abc import Callable
from typing import Any

import fearless as fl
from fearless import autotuning
from fearless.backends.cubin_info import kernel_resources
from fearless.ops import kernels_attention as KA
from fearless.ops import kernels_attention_backward as KB
from fearless.tile import compile_ahead as ahead

B, H, L, D = 2, 16, 3000, 128
LABEL = ["-"]  # the tuned function and configuration queueing now
SECONDS: list[float] = []


class _Device:
    on_device = True


def forced() -> None:
    """The pass on the simulator as on an sm_90 GPU, each compile timed and printed."""
    kernel_module: Any = importlib.import_module("fearless.tile.kernel")
    kernel_module.ahead_applies = lambda target: threading.get_ident() == ahead.STATE.thread
    autotuning.table_arch = lambda: "sm_90"
    # `_distinct` (a module attribute, replaced): the candidates a GPU prunes to
    setattr(KB, "current_target", _Device)  # noqa: B010
    real_compile, real_submit = ahead.compile_cubin, ahead.submit

    def compile_cubin(ir: Any, arch: str, label: str) -> Any:
        t = time.perf_counter()
        out = real_compile(ir, "sm_90")
        s = time.perf_counter() - t
        SECONDS.append(s)
        r = kernel_resources(out.cubin)[0]
        print(
            f"{ir.name:16s} {label:48s} {s:6.2f} s {len(out.cubin):>9,} B  {r.registers} regs "
            f"{r.stack} B stack {r.threads} threads",
            flush=True,
        )
        return out

    def submit(kernel: Any, args: tuple[Any, ...], target: Any) -> None:
        label = LABEL[0]  # the pool's compile of this launch, labelled (a module attribute)
        labelled_compile = lambda ir, arch: compile_cubin(ir, arch, label)  # noqa: E731
        setattr(ahead, "compile_cubin", labelled_compile)  # noqa: B010
        real_submit(kernel, args, target)

    kernel_module.ahead_submit = submit
    for tuned in (KA.attention_tuned, KB.dkdv_tuned, KB.dq_tuned, KB.stats_tuned):
        labelled(tuned)


def labelled(tuned: Any) -> None:
    real = tuned._run

    def run(cfg: dict[str, Any], *a: Any, **kw: Any) -> Any:
        LABEL[0] = f"{tuned.name} {tuple(cfg.values())}"
        try:
            return real(cfg, *a, **kw)
        finally:
            LABEL[0] = "-"

    tuned._run = run


def pass_of(call: Callable[[], None], workers: int) -> tuple[float, int]:
    """(wall seconds, compiles started) of a forced pass over `call`, its compiles awaited."""
    t = time.perf_counter()
    with ahead.compile_ahead(workers):
        call()
        pending = {
            id(f): f for kernel, key in ahead.STATE.launches if (f := kernel.compiles.ahead.get(key))
        }
    for f in pending.values():
        f.result()
    return time.perf_counter() - t, len(pending)


def main() -> None:
    argv = sys.argv[1:]
    workers = int(argv[0]) if argv and argv[0].isdigit() else 1
    backward_only = "--backward" in argv
    forced()
    q, k, v, out = (fl.zeros((B, H, L, D), dtype=fl.bf16) for _ in range(4))
    lse = fl.zeros((B, H, L), dtype=fl.f32)
    scale = D**-0.5

    def backward(dout: Any) -> None:
        dq, dk, dv = (fl.empty((B, H, L, D), dtype=fl.bf16) for _ in range(3))
        KB.attention_backward(q, k, v, out, dout, dq, dk, dv, scale, True, 1, lse=lse)

    def first_call() -> None:  # forward_with_backward_ahead's pass: d_out is `out` there
        if not backward_only:
            KA.attention_tuned(q, k, v, None, out, scale, True, 1, lse)
        backward(out)

    wall, _ = pass_of(first_call, workers)
    print(
        f"{len(SECONDS)} compiles on {workers} worker(s): {sum(SECONDS):.2f} s of tileiras, "
        f"the slowest {max(SECONDS):.2f} s; the pass {wall:.2f} s wall"
    )
    n = len(SECONDS)
    pass_of(lambda: backward(fl.zeros((B, H, L, D), dtype=fl.bf16)), workers)
    print(f"the real backward after it: {len(SECONDS) - n} new compiles")


if __name__ == "__main__":
    main()
