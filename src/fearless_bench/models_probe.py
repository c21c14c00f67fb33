"""One model, one workload, one implementation, measured in a fresh process:
`python -m fearless_bench.models_probe IMPL MODEL WORKLOAD [--quick]` (MODEL a tag of
models_configs.MODELS, WORKLOAD a name of its WORKLOADS).

Prints one JSON line: {"seconds", "spread", "reps", "first_s", "tokens", "peak_bytes", "losses",
"note"} or {"skip": reason} or {"error": what}. `measure` is the whole measurement, called on
this process's DEVICE (the CPU tests set "cpu" and run it on fearless's simulator at toy size):

1. the implementation's patch where it patches classes (TileGym, Liger-Kernel: before the model
   is built, as they ask), then the model from its configuration with a fixed seed, random
   weights in bf16, on DEVICE; then fearless.transformers.apply(model) (fused linear
   cross-entropy on, as Liger-Kernel's default) or torch.compile(model);
2. warm-up units (fearless's autotuning and compiles, torch.compile's compile, TileGym's and
   Liger's Triton or cuTile compiles all happen here; the first unit's wall time is `first_s`,
   for decode the whole first run, its prompt's prefill included);
3. the timed units, each synchronised: a training step (forward with labels, backward, AdamW
   step, zero_grad), a prefill (forward of the batch into a fresh KV cache, the last position's
   logits, as generate asks), or a decode run (a prompt prefilled untimed, then `new_tokens`
   greedy steps with the cache, timed together: seconds per step);
4. the peak memory: torch.cuda.max_memory_allocated over the timed units, the statistics reset
   after the warm-up (training and prefill) or after each run's prompt prefill (decode), so it
   holds the weights, optimizer state, cache and the units' activations, not the tuning's.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from .harness import print_probe_result
from .model import FEARLESS_COMPILED, FEARLESS_TILE, LIGER, TILEGYM, TORCH, TORCH_COMPILE, Skip
from .models_configs import MODEL, WORKLOAD, ModelSpec, Workload, hf_config
from .timing import weigh_every_configuration

DEVICE = "cuda"  # where the model is built and run (the CPU tests set "cpu")
DTYPE = "bfloat16"
SEED = 0
IMPLS = (FEARLESS_TILE, FEARLESS_COMPILED, LIGER, TILEGYM, TORCH_COMPILE, TORCH)
# (warm-up units, timed units) per workload kind, full and --quick. A decode unit (a prompt's
# prefill, then 64 steps) takes well under a second, and its time per token moved from 2.56 to
# 3.74 ms between and within runs of 3 on one H100 (session 40): 2 warm-up and 7 timed units
# give a steadier median at a few seconds more.
UNITS = {"train": (3, 10), "prefill": (3, 10), "decode": (2, 7)}
QUICK_UNITS = {"train": (2, 4), "prefill": (2, 4), "decode": (2, 5)}


def parse(argv: list[str]) -> tuple[str, ModelSpec, Workload, bool]:
    p = argparse.ArgumentParser(prog="python -m fearless_bench.models_probe")
    p.add_argument("impl", choices=IMPLS)
    p.add_argument("model", choices=sorted(MODEL))
    p.add_argument("workload", choices=sorted(WORKLOAD))
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    return a.impl, MODEL[a.model], WORKLOAD[a.workload], a.quick


def _on_gpu() -> bool:
    return DEVICE.startswith("cuda")


def _sync(torch: Any) -> None:
    if _on_gpu():
        torch.cuda.synchronize()


def _peer_patch(package: str, function: str, model_type: str, **flags: Any) -> str:
    """Call `package.transformers.<function>` with the `flags` it takes (before the model is
    built: TileGym's patches replace classes only); its note, or Skip when it is missing."""
    if importlib.util.find_spec(package) is None:
        raise Skip(f"{package} is not installed")
    module = importlib.import_module(f"{package}.transformers")
    fn = getattr(module, function, None)
    if fn is None:
        raise Skip(f"{package}.transformers has no {function} (model type {model_type})")
    accepted = inspect.signature(fn).parameters
    fn(**{k: v for k, v in flags.items() if k in accepted})
    return f"{package}.transformers.{function}"


def patch_peer(impl: str, spec: ModelSpec, model_type: str) -> str | None:
    """TileGym's or Liger-Kernel's patch of `spec`'s model type (before the build); its note."""
    if impl == TILEGYM:
        if importlib.util.find_spec("tilegym") is None:
            raise Skip("TileGym is not installed")
        importlib.import_module("tilegym").set_backend("cutile")
        name = f"apply_tilegym_kernel_to_{spec.tilegym}"
        return _peer_patch("tilegym", name, model_type, use_cutile=True) + " (cutile backend)"
    if impl == LIGER:
        return _peer_patch("liger_kernel", f"apply_liger_kernel_to_{spec.liger}", model_type)
    return None


def build(spec: ModelSpec, torch: Any, dtype: str, overrides: dict[str, Any]) -> Any:
    """`spec`'s causal LM with random weights (seed SEED) in `dtype` on DEVICE."""
    try:
        import transformers
    except ImportError as exc:
        raise Skip(f"Hugging Face transformers is not installed: {exc}") from exc
    if not hasattr(transformers, spec.config_class):
        raise Skip(f"transformers {transformers.__version__} has no {spec.config_class}")
    config = hf_config(spec, **overrides)
    torch.manual_seed(SEED)
    with torch.device(DEVICE):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))


def prepare(impl: str, model: Any, torch: Any, workload: Workload) -> tuple[Any, str | None]:
    """(what to call, note) for `impl` on the built `model`."""
    if impl in (FEARLESS_TILE, FEARLESS_COMPILED):
        import fearless as fl
        from fearless import transformers as flt

        if _on_gpu():
            ok, why = fl.cuda_status()
            if not ok:
                raise Skip(f"fearless cannot use the GPU: {why}")
        flt.apply(model, fused_linear_cross_entropy=True)
        note = "fearless.transformers.apply(model)"
        note += " with fused linear cross-entropy" if workload.kind == "train" else ""
        if impl == FEARLESS_TILE:
            return model, note
        return _compiled(torch, model), f"{note}, then torch.compile(model), default mode"
    if impl == TORCH_COMPILE:
        return _compiled(torch, model), "torch.compile(model), default mode"
    return model, None


def _compiled(torch: Any, model: Any) -> Any:
    """torch.compile(model) in its default mode; Skip where inductor cannot run."""
    if _on_gpu() and importlib.util.find_spec("triton") is None:
        raise Skip("torch.compile's inductor needs Triton on the GPU: not installed")
    return torch.compile(model)


def _tokens(torch: Any, vocab: int, batch: int, seq: int) -> Any:
    g = torch.Generator(device="cpu").manual_seed(SEED + 1)
    return torch.randint(0, vocab, (batch, seq), generator=g).to(DEVICE)


def units(
    runner: Any, model: Any, torch: Any, workload: Workload
) -> tuple[Callable[[], float], list[float]]:
    """(one unit: runs it, returns its seconds, synchronised; the training losses it records)."""
    vocab = model.config.vocab_size
    ids = _tokens(torch, vocab, workload.batch, workload.seq)
    losses: list[float] = []
    if workload.kind == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def train() -> float:
            _sync(torch)
            t0 = time.perf_counter()
            out = runner(input_ids=ids, labels=ids, use_cache=False)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            _sync(torch)
            losses.append(float(out.loss.detach()))
            return time.perf_counter() - t0

        return train, losses
    model.eval()

    def prefill() -> float:
        with torch.no_grad():
            _sync(torch)
            t0 = time.perf_counter()
            out = runner(input_ids=ids, use_cache=True, logits_to_keep=1)
            _sync(torch)
            if not bool(torch.isfinite(out.logits).all()):
                raise ValueError("prefill logits are not finite")
            return time.perf_counter() - t0

    if workload.kind == "prefill":
        return prefill, losses

    # transformers 5 names the cache argument and output `cache` (`past_key_values` before)
    takes = inspect.signature(model.forward).parameters
    name = "cache" if "cache" in takes else "past_key_values"

    def decode() -> float:
        with torch.no_grad():
            out = runner(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache, tok = getattr(out, name), out.logits[:, -1:].argmax(-1)
            _sync(torch)
            if _on_gpu():
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            for _ in range(workload.new_tokens):
                out = runner(input_ids=tok, use_cache=True, **{name: cache})
                cache, tok = getattr(out, name), out.logits[:, -1:].argmax(-1)
            _sync(torch)
            seconds = (time.perf_counter() - t0) / workload.new_tokens
            check_decode(out, cache, workload, torch)
            return seconds

    return decode, losses


def check_decode(out: Any, cache: Any, workload: Workload, torch: Any) -> None:
    """A decode run's last logits are finite and its cache holds every token (a model that
    dropped the cache would still run, on one token a step)."""
    if not bool(torch.isfinite(out.logits).all()):
        raise ValueError("decode logits are not finite")
    held = cache.get_seq_length() if hasattr(cache, "get_seq_length") else None
    want = workload.seq + workload.new_tokens
    if held is not None and held != want:
        raise ValueError(f"the KV cache holds {held} tokens after the run, not {want}")


def measure(
    impl: str,
    spec: ModelSpec,
    workload: Workload,
    quick: bool = False,
    dtype: str = DTYPE,
    overrides: dict[str, Any] | None = None,
    plan: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The measurement (the module doc); `overrides` change the configuration (the CPU test's
    toy sizes), `plan` the (warm-up, timed) unit counts."""
    import torch

    weigh_every_configuration()  # timed after warm-up: as a later process runs

    if _on_gpu() and not torch.cuda.is_available():
        raise Skip("torch sees no GPU")
    warmup, reps = plan or (QUICK_UNITS if quick else UNITS)[workload.kind]
    model_type = hf_config(spec, **(overrides or {})).model_type
    notes = [n for n in (patch_peer(impl, spec, model_type),) if n]
    model = build(spec, torch, dtype, overrides or {})
    runner, note = prepare(impl, model, torch, workload)
    notes += [n for n in (note,) if n]
    run, losses = units(runner, model, torch, workload)
    t0 = time.perf_counter()
    run()  # synchronised: the first unit's wall time, tuning and compiles included
    first = time.perf_counter() - t0
    for _ in range(warmup - 1):
        run()
    if _on_gpu():
        torch.cuda.reset_peak_memory_stats()
    times = [run() for _ in range(reps)]
    peak = torch.cuda.max_memory_allocated() if _on_gpu() else None
    if any(x != x or x in (float("inf"), float("-inf")) for x in losses):
        raise ValueError(f"the training loss is not finite: {losses}")
    q = statistics.quantiles(times, n=5) if len(times) > 1 else [times[0]] * 4
    notes.append(f"attention {model.config._attn_implementation}")
    return {
        "seconds": statistics.median(times),
        "spread": [q[0], q[3]],
        "reps": len(times),
        "first_s": first,
        "tokens": workload.tokens_per_step(),
        "peak_bytes": peak,
        "losses": [losses[0], losses[-1]] if losses else [],
        "note": "; ".join(notes),
    }


def main(argv: list[str]) -> int:
    impl, spec, workload, quick = parse(argv)
    return print_probe_result(lambda: measure(impl, spec, workload, quick))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
