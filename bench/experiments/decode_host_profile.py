"""Where a decode step of a fearless-patched Llama goes: host or GPU, and which operator.

The models family measured Llama-3-8B (4 of its layers) decoding at batch 1 at 7.27 ms per
token patched against 4.15 ms for torch eager (H100, session 25). The model here is the
family's, with as many layers (`--layers N` for fewer): until session 40 it had 2, and its
times were read against the family's 4-layer rows as if they measured the same model. A
decode step is a few hundred microseconds of GPU work, so the host path of every operator
counts. This prints, for
torch eager and the fearless patch: the time per token; torch.profiler's GPU time per token
(what the kernels take); the replay state of every fearless operator after the run (keys
replayed, keys seen once: a key that changes every step, as the KV cache's length does, takes
the slow path every step); cProfile's top functions of a few steps; and the attention alone at
a decode shape, its host time per call with the same cache length every call (replayed) and
with a new one every call (the slow path). With `--prefill`, instead: a 4 x 2048 prefill's
time and its GPU kernels by device time, torch eager against the fearless patch (the models
family measured fearless's prefill at 0.93 of Liger's, session 25); with `--train`, a 4 x 2048
training step's (the loss and its backward, fearless with its fused loss as the models family
runs it: 0.95 of torch.compile's tokens/s, session 26; with `--compile` too, the same step of
torch.compile's default mode over the unpatched model, and over a model built after the patch,
whose layers are fearless's and whose loss is Hugging Face's). Run
on the GPU machine (transformers installed): `PYTHONPATH=src python3
bench/experiments/decode_host_profile.py [--prefill | --train | --compile] [--model TAG]` (TAG
one of fearless_bench/models_configs.py's models; Llama-3-8B by default; `--compile`: the
decode of torch.compile's default mode over the unpatched and over the fearless-patched model,
whose operators it calls as torch.ops.fearless). `--probe`: the models family's own decode
measurement (fearless_bench/models_probe.measure, fearless-tile, Llama-3-8B, decode_b1, full
units) in this process, then each fearless operator's replay state. Session 39 timed that
row at 3.37 ms a token where this script's loop, then of 2 layers, took 1.743 ms; session 40's
probe found every decode key replayed (attention: 64 plans, one per cache length, and the
prompt's prefill) and the same row at 2.56 to 3.74 ms: the gap was the layer count.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import transformers

import fearless.ops as ops
from fearless import transformers as ft
from fearless_bench.models_configs import MODELS, hf_config

PROMPT, NEW = 1024, 48


def _flag(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def llama() -> Any:
    """The models family's Llama-3-8B (fearless_bench/models_configs.py) with as many layers as
    the family builds, random bf16 weights, on the GPU; `--model TAG` another of its models
    (e.g. qwen3_moe_30b_a3b), `--layers N` N layers."""
    spec = next(m for m in MODELS if m.tag == _flag("--model", "llama3_8b"))
    torch.manual_seed(0)
    config = hf_config(spec, num_hidden_layers=int(_flag("--layers", str(spec.layers))))
    model = transformers.AutoModelForCausalLM.from_config(config)
    return model.to("cuda", torch.bfloat16).eval()


def decode(model: Any, steps: int) -> Callable[[], float]:
    ids = torch.randint(0, model.config.vocab_size, (1, PROMPT), device="cuda")

    def run() -> float:
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(steps):
                out = model(input_ids=tok, use_cache=True, past_key_values=cache)
                cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            return (time.perf_counter() - t) / steps * 1e3

    return run


def gpu_ms_per_token(model: Any) -> float:
    run = decode(model, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
    events = prof.key_averages()
    total = sum(e.device_time_total for e in events) / 1e3  # us -> ms over prefill + 16 steps
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=14))
    return total


def replay_state() -> None:
    for name in sorted(dir(ops)):
        plans = getattr(getattr(ops, name), "plans", None)
        if not plans:
            continue
        kinds: dict[str, int] = {}
        for plan in plans.values():
            kind = type(plan).__name__
            kinds[kind] = kinds.get(kind, 0) + 1
        print(f"  {name:36s} {kinds}")


def attention_alone() -> None:
    q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(1, 8, PROMPT + 600, 128, device="cuda", dtype=torch.bfloat16)
    vbig = torch.randn_like(big)  # k and v apart: one tensor as both is never replayed

    def host_us(fn: Callable[[int], object], n: int = 200, grow: bool = False) -> float:
        for _ in range(3):
            fn(0)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(n):
            fn(i if grow else 0)
        host = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        return host * 1e6

    def fl_attn(i: int) -> object:
        k = big[:, :, : PROMPT + i].contiguous() if i else big[:, :, :PROMPT]
        v = vbig[:, :, : PROMPT + i].contiguous() if i else vbig[:, :, :PROMPT]
        return ops.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    def th_attn(i: int) -> object:
        k = big[:, :, : PROMPT + i] if i else big[:, :, :PROMPT]
        return torch.nn.functional.scaled_dot_product_attention(q, k, k, enable_gqa=True)

    k0, v0 = big[:, :, :PROMPT].contiguous(), vbig[:, :, :PROMPT].contiguous()
    same = lambda i: ops.scaled_dot_product_attention(q, k0, v0, enable_gqa=True)  # noqa: E731
    print(f"  fearless, same S (replayed): {host_us(same):8.1f} us per call (host)")
    print(f"  fearless, S grows each call: {host_us(fl_attn, grow=True):8.1f} us per call (host)")
    print(f"  torch SDPA, S grows:         {host_us(th_attn, grow=True):8.1f} us per call (host)")
    print(f"  fearless, S grows again:     {host_us(fl_attn, grow=True):8.1f} us per call (host)")
    print(f"  torch SDPA, same S:          {host_us(lambda i: th_attn(0)):8.1f} us per call (host)")
    x = torch.randn(1, 1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.ones(4096, device="cuda", dtype=torch.bfloat16))
    with torch.no_grad():
        norm = lambda i: ops.rms_norm(x, (4096,), w, 1e-5)  # noqa: E731
        print(f"  fearless rms_norm, Parameter weight, no_grad: {host_us(norm):8.1f} us per call")
        eager = lambda i: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5)  # noqa: E731
        print(f"  torch rms_norm, same:                         {host_us(eager):8.1f} us per call")
    for name, fn in (("same S", same), ("S grows again", fl_attn)):
        pr = cProfile.Profile()
        pr.enable()
        for i in range(1, 101):
            fn(i)
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
        print(f"cProfile, attention, {name}:")
        print(s.getvalue()[-5000:])


def timed(run: Callable[[], None], what: str, rows: int) -> None:
    """`run`'s time (median of 5, after 2 warm-up runs), printed as `what`, then its kernels
    by device time (`rows` of them)."""
    for _ in range(2):
        run()
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    print(f"{what} {sorted(times)[2]:.2f} ms")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=rows))


def prefill(model: Any, label: str) -> None:
    """A 4 x 2048 prefill's time and its kernels by device time."""
    ids = torch.randint(0, model.config.vocab_size, (4, 2048), device="cuda")

    def run() -> None:
        with torch.no_grad():
            model(input_ids=ids, use_cache=True, logits_to_keep=1)

    timed(run, f"{label}: prefill 4 x 2048", 16)


def train(model: Any, label: str) -> None:
    """A 4 x 2048 training step's time (forward with the loss, backward) and its kernels by
    device time."""
    model.train()
    ids = torch.randint(0, model.config.vocab_size, (4, 2048), device="cuda")

    def run() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    timed(run, f"{label}: train step 4 x 2048", 30)


def probe() -> None:
    """The models family's decode_b1 row for fearless, measured as the family does, then the
    replay state of its operators."""
    from fearless_bench import model as impls
    from fearless_bench import models_probe
    from fearless_bench.models_configs import MODEL, WORKLOAD

    got = models_probe.measure(impls.FEARLESS_TILE, MODEL["llama3_8b"], WORKLOAD["decode_b1"])
    print(
        f"models_probe decode_b1: {got['seconds'] * 1e3:.3f} ms per token, spread "
        f"{[round(x * 1e3, 3) for x in got['spread']]}, first run {got['first_s']:.1f} s"
    )
    print("replay state per operator:")
    replay_state()


def main() -> None:
    if "--probe" in sys.argv:
        probe()
        return
    for flag, step in (("--prefill", prefill), ("--train", train)):
        if flag in sys.argv:
            model = llama()
            step(model, "torch eager")
            compiled = "--compile" in sys.argv
            if compiled:  # torch.compile's default mode: before the patch replaces classes
                step(torch.compile(llama()), "torch.compile")
            # training as the models family runs it: the fused loss (models_probe.py)
            ft.apply(model, fused_linear_cross_entropy=flag == "--train")
            step(model, "fearless")
            if compiled:  # a model built now has fearless's layers, and Hugging Face's loss
                step(torch.compile(llama()), "torch.compile over fearless's layers")
            return
    if "--compile" in sys.argv:  # torch.compile (default mode) of the unpatched and the patched
        for label, patch in (("torch.compile", False), ("fearless + torch.compile", True)):
            model = llama()
            if patch:
                ft.apply(model)
            run = decode(torch.compile(model), NEW)
            run()
            run()
            print(f"{label}: {run():.3f} ms per token", flush=True)
        return
    model = llama()
    eager = decode(model, NEW)
    eager()
    print(f"torch eager: {eager():.3f} ms per token")
    print(f"  GPU time of prefill + 16 steps: {gpu_ms_per_token(model):.2f} ms")
    ft.apply(model)
    patched = decode(model, NEW)
    patched()
    patched()
    print(f"fearless: {patched():.3f} ms per token")
    print(f"  GPU time of prefill + 16 steps: {gpu_ms_per_token(model):.2f} ms")
    print("replay state per operator:")
    replay_state()
    run = decode(model, 8)
    pr = cProfile.Profile()
    pr.enable()
    run()
    pr.disable()
    for order in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(order).print_stats(30)
        print(s.getvalue()[-7000:])
    print("attention alone, q (1, 32, 1, 128), k = v (1, 8, S, 128) bf16:")
    attention_alone()


if __name__ == "__main__":
    main()
