"""Session 29: where the host time of a short attention training call goes. Session 29's H100
runs (bench/results/h100-2026-12-06-session29) found the call host-bound: about 300 us of host
time around 55 us of GPU work at (4, 32, 256, 64) f16, torch's SDPA 170-210 us.

Host microseconds per call (a loop of N calls without a sync, then one sync outside the
timing), each part alone:

    fwd replay      the training forward's kernels, `attention.scaled_dot_product_attention_lse`
                    on detached tensors under no_grad (its replay)
    bwd replay      the backward's, `attention.scaled_dot_product_attention_backward` with the
                    kept lse, detached (its replay)
    fwd with grad   `fearless.ops.scaled_dot_product_attention` with inputs that require grad,
                    no backward (the eager form's Function and the glue above the replay)
    training        forward, then `.backward(dout)`
    bare Function   an autograd.Function whose forward and backward only allocate, forward and
                    backward: autograd's own cost on this host
    torch fwd / torch training
                    torch's SDPA with grad, without and with the backward

Run on the GPU machine: `EXP=train_host_parts.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fearless import ops
from fearless.ops import attention as A

N = 200


def host_us(call: Callable[[], Any]) -> float:
    """Host microseconds per call: the best of three loops of N calls, each synchronised after."""
    for _ in range(10):
        call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(N):
            call()
        best = min(best, (time.perf_counter() - t) / N * 1e6)
        torch.cuda.synchronize()
    return best


class Bare(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any) -> Any:
        ctx.save_for_backward(q, k, v)
        return torch.empty_like(q)

    @staticmethod
    def backward(ctx: Any, dy: Any) -> Any:
        q, k, v = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def training(
    f: Callable[..., Any], q: Any, k: Any, v: Any, dout: Any, causal: bool
) -> Callable[[], None]:
    """One training call of attention `f`: forward, then `.backward(dout)` into fresh grads."""

    def call() -> None:
        q.grad = k.grad = v.grad = None
        f(q, k, v, is_causal=causal).backward(dout)

    return call


@dataclass
class Case:
    """(4, 32, 256, 64) f16 inputs, causal or full, and the calls timed on them."""

    label: str
    causal: bool
    q: Any
    k: Any
    v: Any
    dout: Any
    fwd_replay: Callable[[], None]
    bwd_replay: Callable[[], None]

    def train(self, f: Callable[..., Any]) -> Callable[[], None]:
        return training(f, self.q, self.k, self.v, self.dout, self.causal)


def make_case(causal: bool) -> Case:
    shape = (4, 32, 256, 64)
    q, k, v = (
        torch.randn(shape, device="cuda", dtype=torch.float16).requires_grad_() for _ in range(3)
    )
    dout = torch.randn(shape, device="cuda", dtype=torch.float16)
    qd, kd, vd = (t.detach() for t in (q, k, v))
    with torch.no_grad():
        out, lse = A.scaled_dot_product_attention_lse(qd, kd, vd, None, causal)

    def fwd_replay() -> None:
        with torch.no_grad():
            A.scaled_dot_product_attention_lse(qd, kd, vd, None, causal)

    def bwd_replay() -> None:
        with torch.no_grad():
            A.scaled_dot_product_attention_backward(
                dout, qd, kd, vd, out, causal, None, False, None, lse
            )

    label = f"{'x'.join(map(str, shape))} {'causal' if causal else 'full'}"
    return Case(label, causal, q, k, v, dout, fwd_replay, bwd_replay)


def case(causal: bool) -> None:
    """Every part, causal or full."""
    c = make_case(causal)
    q, k, v, dout = c.q, c.k, c.v, c.dout
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def bare() -> None:
        q.grad = k.grad = v.grad = None
        Bare.apply(q, k, v).backward(dout)

    parts = (
        ("fwd replay", c.fwd_replay),
        ("bwd replay", c.bwd_replay),
        ("fwd with grad", lambda: ops.scaled_dot_product_attention(q, k, v, is_causal=causal)),
        ("training", c.train(ops.scaled_dot_product_attention)),
        ("bare Function", bare),
        ("torch fwd", lambda: sdpa(q, k, v, is_causal=causal)),
        ("torch training", c.train(sdpa)),
    )
    for name, call in parts:
        print(f"{c.label} {name:14s} {host_us(call):8.1f} us host", flush=True)


def main() -> None:
    torch.manual_seed(0)
    for causal in (True, False):
        case(causal)


if __name__ == "__main__":
    main()
