"""`fearless bench --cases models` (family_models.py, models_configs.py, models_probe.py,
models_figures.py): Hugging Face models end to end. The GPU run needs an H200; checked here: the
cases, the configurations' real dimensions, the records, ratios and peak-memory tables and plots
from made-up probe results, the run's selection, order and budget, and the probe's measurement
itself on the simulator at toy size (a tiny Llama patched by fearless.transformers: one training
step and one decode run through the code the GPU run takes)."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path
from typing import Any

import pytest

from fearless import autotune_timing
from fearless_bench import (
    family_models,
    figures,
    model,
    models_configs,
    models_figures,
    models_probe,
    report,
    suite,
)
from fearless_bench.models_configs import MODEL, WORKLOAD, Workload
from support.hf_patches import count_calls, on_the_simulator

# The released config.json values the configurations must keep (restated, not imported).
REAL = {
    "llama3_8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=128, vocab_size=128256),
    "qwen3_8b": dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "mistral_7b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, vocab_size=32000),
    "gpt_oss_20b": dict(hidden_size=2880, intermediate_size=2880, num_attention_heads=64,
                        num_key_value_heads=8, head_dim=64, vocab_size=201088,
                        num_local_experts=32, num_experts_per_tok=4),
    "qwen3_moe_30b_a3b": dict(hidden_size=2048, moe_intermediate_size=768,
                              num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                              vocab_size=151936, num_experts=128, num_experts_per_tok=8),
    "gemma3_12b": dict(hidden_size=3840, intermediate_size=15360, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=256, vocab_size=262208),
    "deepseek_v3_small_moe": dict(hidden_size=7168, intermediate_size=18432,
                                  moe_intermediate_size=2048, num_attention_heads=128,
                                  vocab_size=129280, kv_lora_rank=512, q_lora_rank=1536,
                                  qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    "olmoe_1b_7b": dict(hidden_size=2048, intermediate_size=1024, num_attention_heads=16,
                        num_key_value_heads=16, vocab_size=50304, num_experts=64,
                        num_experts_per_tok=8),
    "qwen3_next_80b_a3b": dict(hidden_size=2048, moe_intermediate_size=512,
                               num_attention_heads=16, num_key_value_heads=2, head_dim=256,
                               vocab_size=151936, num_experts=512, num_experts_per_tok=10,
                               linear_num_value_heads=32, linear_num_key_heads=16),
}  # fmt: skip
TOY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=96,
    num_hidden_layers=1,
    max_position_embeddings=64,
)


def test_every_model_has_every_workload_and_quick_keeps_llama_small() -> None:
    assert set(REAL) == set(MODEL)
    assert len(family_models.CASES) == len(set(family_models.CASES)) == 9 * 5
    assert "models_llama3_8b_train_4x2048" in family_models.CASES
    assert "models_qwen3_moe_30b_a3b_decode_b32" in family_models.CASES
    assert suite.all_cases()["models_gemma3_12b_prefill_4x2048"] == "models"
    assert suite.select(["models"]) == set(family_models.CASES)
    quick = family_models.chosen(set(family_models.CASES), quick=True)
    assert [(m.tag, w.name) for m, w in quick] == [
        ("llama3_8b", "train_4x2048"),
        ("llama3_8b", "prefill_4x2048"),
        ("llama3_8b", "decode_b1"),
    ]
    w = WORKLOAD
    assert (w["train_1x8192"].batch, w["train_1x8192"].seq) == (1, 8192)
    assert w["decode_b32"].tokens_per_step() == 32 and w["train_4x2048"].tokens_per_step() == 8192
    assert "models" in figures.FAMILY_ORDER and "models" in [g for g, _ in report.GROUPS]


@pytest.mark.parametrize("tag", sorted(REAL))
def test_configurations_keep_the_real_dimensions_with_few_layers(tag: str) -> None:
    pytest.importorskip("transformers")
    spec = MODEL[tag]
    cfg = models_configs.hf_config(spec)
    for key, value in REAL[tag].items():
        assert getattr(cfg, key) == value, key
        if key in spec.dims:
            assert spec.dims[key] == value, key
    assert 2 <= cfg.num_hidden_layers == spec.layers <= 4
    assert cfg.max_position_embeddings >= 8192 + 1024


def test_the_probe_command_line_round_trips_and_a_missing_gpu_is_a_skip(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec, w = MODEL["olmoe_1b_7b"], WORKLOAD["decode_b32"]
    for impl in models_probe.IMPLS:
        assert models_probe.parse([impl, spec.tag, w.name, "--quick"]) == (impl, spec, w, True)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert models_probe.main([model.TORCH, spec.tag, w.name]) == 0
    assert json.loads(capsys.readouterr().out) == {"skip": "torch sees no GPU"}


def _result(seconds: float, peak_gib: float, tokens: int = 8192) -> dict[str, Any]:
    return {
        "seconds": seconds,
        "spread": [seconds * 0.99, seconds * 1.01],
        "reps": 10,
        "first_s": 40.0,
        "tokens": tokens,
        "peak_bytes": int(peak_gib * 2**30),
        "losses": [11.9, 11.7],
        "note": "fearless.transformers.apply(model)",
    }


def _records() -> list[model.Record]:
    spec, w = MODEL["llama3_8b"], WORKLOAD["train_4x2048"]
    results = {
        model.TORCH: _result(1.2, 40.0),
        model.FEARLESS_TILE: _result(0.8, 30.0),
        model.FEARLESS_COMPILED: _result(0.625, 29.0),
        model.TORCH_COMPILE: _result(1.0, 36.0),
        model.TILEGYM: {"skip": "TileGym is not installed"},
        model.LIGER: {"error": "probe exit 1: RuntimeError: boom"},
    }
    return [family_models.record(spec, w, impl, results[impl]) for impl in family_models.IMPLS]


def test_records_ratios_and_peak_memory_from_probe_results(tmp_path: Path) -> None:
    recs = _records()
    model.assign_ratios(recs)
    by = {r.impl: r for r in recs}
    mine = by[model.FEARLESS_TILE]
    assert (mine.time, mine.time_unit, mine.metric) == (0.8, "s", "tokens/s")
    assert mine.value == pytest.approx(8192 / 0.8) and mine.reps == 10
    assert mine.ratio == pytest.approx(1.25) and mine.best_peer == model.TORCH_COMPILE
    assert by[model.TORCH].ratio == pytest.approx(1.0 / 1.2)
    # the patched model under torch.compile is fearless's own: no peer of either fearless row
    compiled = by[model.FEARLESS_COMPILED]
    assert compiled.ratio == pytest.approx(1.6) and compiled.best_peer == model.TORCH_COMPILE
    assert mine.peak_bytes == 30 * 2**30 and mine.spread == (0.8 * 0.99, 0.8 * 1.01)
    assert mine.note and "first step 40.0 s" in mine.note and "loss 11.9000" in mine.note
    assert mine.params["workload"] == "train" and mine.params["model"] == "Llama-3-8B"
    assert by[model.TILEGYM].status == "skipped" and by[model.LIGER].status == "failed"
    assert by[model.LIGER].reason == "probe exit 1: RuntimeError: boom"
    assert report.memory_ratios(recs)[("models_llama3_8b_train_4x2048", model.FEARLESS_TILE)] == (
        pytest.approx(36 / 30)
    )
    meta = {"command": "fearless bench --cases models", "mode": "full"}
    md = report.markdown(meta, {}, recs, None)
    assert "## Peak memory" in md and "| 30.00 GiB (1.20) |" in md
    assert "**geomean, models**" in md and "10240.0 tokens/s, 30.00 GiB" in md
    assert "tokens/s" in family_models.format_record(mine)
    assert json.loads(json.dumps(mine.to_json()))["peak_bytes"] == 30 * 2**30

    (plot,) = models_figures.plots(recs)
    assert plot.file == "results_models_llama3_8b.png" and plot.workloads == ["train_4x2048"]
    row = plot.impls.index(model.FEARLESS_TILE)
    assert plot.speed[row] == [pytest.approx(1.5)] and plot.memory[row] == [pytest.approx(30)]
    assert plot.gaps[plot.impls.index(model.TILEGYM)] == ["skip"]
    if importlib.util.find_spec("matplotlib") is not None:
        models_figures.render(plot, tmp_path / plot.file)
        assert (tmp_path / plot.file).stat().st_size > 0


def test_run_probes_the_baseline_first_and_skips_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, str, str, bool]] = []
    clock = iter(float(t) for t in range(1000))

    def probe(impl: str, spec: Any, w: Workload, quick: bool) -> dict[str, Any]:
        seen.append((impl, spec.tag, w.name, quick))
        return _result(1.0, 1.0, w.tokens_per_step())

    monkeypatch.setattr(family_models, "probe", probe)
    monkeypatch.setattr(
        family_models, "time", types.SimpleNamespace(perf_counter=lambda: next(clock))
    )
    monkeypatch.setattr(family_models.config, "bench_models_budget", lambda default: 0.0)
    saved: list[int] = []
    ctx = types.SimpleNamespace(
        quick=False, log=lambda line: None, checkpoint=lambda r: saved.append(len(r))
    )
    pick = {"models_qwen3_8b_decode_b1", "models_mistral_7b_prefill_4x2048"}
    out = family_models.run(ctx, pick)  # type: ignore[arg-type]
    n = len(family_models.IMPLS)
    assert [s[0] for s in seen[:n]] == list(family_models.IMPLS) and seen[0][0] == model.TORCH
    assert [s[1] for s in seen[::n]] == ["qwen3_8b", "mistral_7b"]  # the family's order
    assert {r.case for r in out} == pick and len(out) == 2 * n and saved[-1] == 2 * n
    assert all(r.status == "ok" for r in out)

    seen.clear()
    monkeypatch.setattr(family_models.config, "bench_models_budget", lambda default: 3.5)
    out = family_models.run(ctx, pick)  # type: ignore[arg-type]
    assert len(seen) == 3 and [r.status for r in out].count("skipped") == 2 * n - 3
    late = out[-1]
    assert late.reason and "--cases 'models_mistral_7b_prefill_4x2048'" in late.reason

    seen.clear()
    ctx.quick = True
    family_models.run(ctx, {"models_llama3_8b_decode_b32", "models_llama3_8b_decode_b1"})  # type: ignore[arg-type]
    assert {(s[2], s[3]) for s in seen} == {("decode_b1", True)}


def test_the_measurement_runs_a_patched_toy_llama_on_the_simulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GPU run's code path on CPU tensors: the model built from Llama-3-8B's configuration
    at toy size, patched by fearless.transformers (its kernels on the simulator), one training
    step (fused loss included) and one decode run whose cache must hold every token; torch
    eager's first loss is the same, from the same seed."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    on_the_simulator(monkeypatch)
    monkeypatch.setattr(models_probe, "DEVICE", "cpu")
    monkeypatch.setattr(autotune_timing, "COMPILE_BUDGET_S", 2.0)  # put back after
    spec = MODEL["llama3_8b"]
    train = Workload("train_toy", "train", 1, 8)
    calls = count_calls(monkeypatch, "rms_norm", "swiglu", "fused_linear_cross_entropy")
    got = models_probe.measure(model.FEARLESS_TILE, spec, train, overrides=TOY, plan=(1, 1))
    assert calls["fused_linear_cross_entropy"] == 2 and calls["rms_norm"] and calls["swiglu"]
    assert autotune_timing.COMPILE_BUDGET_S is None  # timed as a later process runs
    assert got["seconds"] > 0 and got["tokens"] == 8 and got["peak_bytes"] is None
    assert "fearless.transformers.apply" in got["note"] and "sdpa" in got["note"]
    rec = family_models.record(spec, train, model.FEARLESS_TILE, got)
    assert rec.status == "ok" and rec.value == pytest.approx(8 / got["seconds"])
    ref = models_probe.measure(model.TORCH, spec, train, overrides=TOY, plan=(1, 1))
    assert got["losses"][0] == pytest.approx(ref["losses"][0], rel=2e-2)

    decode = Workload("decode_toy", "decode", 2, 6, new_tokens=2)
    calls.clear()
    got = models_probe.measure(model.FEARLESS_TILE, spec, decode, overrides=TOY, plan=(1, 1))
    assert got["tokens"] == 2 and got["losses"] == [] and calls["rms_norm"]
    if importlib.util.find_spec("liger_kernel") is None:
        with pytest.raises(model.Skip, match="liger_kernel is not installed"):
            models_probe.measure(model.LIGER, spec, decode, overrides=TOY, plan=(1, 1))


@pytest.mark.slow  # torch.compile of a training step on the CPU: about 50 s
def test_the_compiled_patched_model_trains_on_the_simulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fearless+compile`: the patched model under torch.compile (inductor on the CPU, the
    fearless operators on the simulator) takes a training step whose first loss is torch
    eager's."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    on_the_simulator(monkeypatch)
    monkeypatch.setattr(models_probe, "DEVICE", "cpu")
    monkeypatch.setattr(autotune_timing, "COMPILE_BUDGET_S", 2.0)
    spec, train = MODEL["llama3_8b"], Workload("train_toy", "train", 1, 8)
    got = models_probe.measure(model.FEARLESS_COMPILED, spec, train, overrides=TOY, plan=(1, 1))
    assert "then torch.compile(model)" in got["note"] and got["tokens"] == 8
    ref = models_probe.measure(model.TORCH, spec, train, overrides=TOY, plan=(1, 1))
    assert got["losses"][0] == pytest.approx(ref["losses"][0], rel=2e-2)


def test_the_trimmed_transformers_keeps_every_patched_model() -> None:
    """bench/pack_whl_hf.sh keeps the model folders fearless.transformers patches (the GPU
    tests import each at setup: phi3's absence failed every one of them, session 26)."""
    from fearless.transformers.patch import MODELS

    script = (Path(__file__).parents[1] / "bench" / "pack_whl_hf.sh").read_text()
    keep = next(line for line in script.splitlines() if line.startswith("keep="))
    kept = set(keep.split("=", 1)[1].strip('"').split())
    assert set(MODELS) <= kept, sorted(set(MODELS) - kept)
