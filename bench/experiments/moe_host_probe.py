"""Session 36: `fearless.ops.fused_moe` at a serving step's token counts, host time and time per
call, for the tree it runs in. Until e511001 every call read topk_ids back to the host to check
them (a wait for the GPU each MoE layer, and no replay: the check, the int64 ids' and bf16
weights' conversions); now the align kernel records a bad id for the next synchronisation, and
the operator replays. Run it in both trees on one machine:

    EXP=moe_host_probe.py bash bench/h200_run.sh OUT exp                    # this tree
    EXP=moe_host_probe.py EXP_ARGS='--tree /tmp/base/src' bash bench/h200_run.sh OUT exp

(`--tree DIR`: import fearless from DIR, e.g. `git archive 6ec6008 src` unpacked there.)

Qwen3-30B-A3B's MoE layer (hidden 2048, expert intermediate 768, 128 experts, top 8), bf16,
router weights softmaxed in bf16 and int64 ids from torch.topk, as Hugging Face's block gives
them. Per token count: host us a call (200 calls enqueued, no sync; a call that waits for the
GPU shows the GPU's time here), ms a call end to end (CUDA events), the call's path
(`fused_moe.plans`: a replay where a Plan is kept), and torch eager's loop over the chosen
experts (Hugging Face's form) for scale.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

if "--tree" in sys.argv:  # another tree's fearless, imported before this one's
    sys.path.insert(0, sys.argv[sys.argv.index("--tree") + 1])

import torch
from cuda_timing import events_ms, host_us

import fearless
from fearless import ops

HIDDEN, INTER, EXPERTS, TOPK, REPS = 2048, 768, 128, 8, 200


def _eager(x: Any, w1: Any, w2: Any, weights: Any, ids: Any) -> Any:
    """Hugging Face's sparse MoE block's loop: each chosen expert's MLP on its tokens."""
    out = torch.zeros_like(x)
    for e in ids.unique().tolist():  # the host reads the ids, as the block's loop does
        token, k = torch.where(ids == e)
        h = x[token] @ w1[e].t()
        act = torch.nn.functional.silu(h[:, :INTER]) * h[:, INTER:]
        out.index_add_(0, token, (act @ w2[e].t()) * weights[token, k, None])
    return out


def main() -> None:
    torch.manual_seed(0)
    dt = torch.bfloat16
    w1 = torch.randn(EXPERTS, 2 * INTER, HIDDEN, device="cuda", dtype=dt) * 0.02
    w2 = torch.randn(EXPERTS, HIDDEN, INTER, device="cuda", dtype=dt) * 0.02
    print(f"fearless at {fearless.__file__}")
    print(f"{'tokens':>6s} {'host us':>8s} {'ms':>8s} {'eager ms':>8s}  path")
    for tokens in (1, 8, 64):
        x = torch.randn(tokens, HIDDEN, device="cuda", dtype=dt)
        logits = torch.randn(tokens, EXPERTS, device="cuda")
        top, ids = torch.topk(torch.softmax(logits, -1), TOPK)
        weights = (top / top.sum(-1, keepdim=True)).to(dt)
        call = functools.partial(ops.fused_moe, x, w1, w2, weights, ids)
        want = _eager(x, w1, w2, weights, ids)
        got = call()
        torch.cuda.synchronize()
        err = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
        host, ms = host_us(call, REPS), events_ms(call, REPS, 5)
        eager = events_ms(functools.partial(_eager, x, w1, w2, weights, ids), REPS, 5)
        plans = getattr(ops.fused_moe, "plans", None)
        path = "no replay" if plans is None else str([type(p).__name__ for p in plans.values()])
        print(f"{tokens:6d} {host:8.1f} {ms:8.4f} {eager:8.4f}  {path} (max rel err {err:.1e})",
              flush=True)  # fmt: skip
    fearless.synchronize()


if __name__ == "__main__":
    main()
