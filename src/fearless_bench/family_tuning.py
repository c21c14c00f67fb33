"""Time to first result at a new size class, per operator of fearless.ops, in fresh processes:
fearless tuning from nothing, fearless with a tuning-table entry, and TileGym's own first call.

For each spec (an op of the ops family at a model-like shape on none of TileGym's grids, so in
no shipped table), `tuning_probe.py` runs in three fresh processes, each with empty compile
caches (fresh_process.py):

1. fearless.ops with the tuning tables off: the first call tunes (the configurations compile
   side by side, tile/compile_ahead.py, then each is timed) and the winners are exported as a
   table;
2. fearless.ops with that table (FEARLESS_TUNING_TABLE): the first call finds the entry and
   compiles only the winner;
3. fearless.ops as installed: the shipped table holds the operator at other sizes but not this
   one, so the first call times only the winners of the nearest entries
   (`Autotuned._order`), what a user's new size class meets;
4. TileGym (cutile backend), whose autotuner runs again in every process.

Case `tuning_<spec>` holds 1 and 4, case `tuning_table_<spec>` 2 and 4, case
`tuning_near_<spec>` 3 and 4 (the same TileGym process: it has no table to read). Times are
seconds; the ratio is TileGym's over fearless's. Goals (issue 37): at most 3 s without a table
entry and 0.3 s with one, on the H200's 16 cores. The
compile caches start empty, so every first call also pays its kernels' first compiles: what a
fresh machine, or a process after an upgrade, waits for. `--quick` takes QUICK_OPS only.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from . import fresh_process
from .family_ops_base import Spec
from .harness import Ctx, format_line
from .model import FEARLESS_TILE, TILEGYM, Record, unmeasured
from .peers import Peers

FAMILY = "tuning"
IMPLS = (FEARLESS_TILE, TILEGYM)
TIMEOUT_S = 300
QUICK_OPS = ("rms_norm", "softmax", "matmul", "attention")

# One spec per op (and attention kind): model-like shapes, none on TileGym's benchmark grids.
SPECS = (
    Spec("relu", "f16", (3_000_000,)),
    Spec("gelu", "f16", (3_000_000,), "tanh"),
    Spec("silu_and_mul", "bf16", (3000, 2 * 5120)),
    Spec("swiglu", "bf16", (2, 1000, 5120)),
    Spec("geglu", "bf16", (2, 1000, 2 * 3000), "tanh"),
    Spec("dropout", "f16", (3_000_000,)),
    Spec("rope", "f16", (1, 16, 3000, 64)),
    Spec("transpose", "bf16", (3000, 5120)),
    Spec("softmax", "bf16", (3000, 5120)),
    Spec("rms_norm", "bf16", (3000, 5120)),
    Spec("layer_norm", "bf16", (3000, 5120)),
    Spec("matmul", "bf16", (3000, 5120, 5120)),
    Spec("bmm", "f16", (4, 1500, 1500, 1500)),
    Spec("group_gemm", "f16", (4, 1500, 1500, 1500)),
    Spec("attention", "bf16", (2, 16, 3000, 128), "causal"),
    Spec("attention", "bf16", (4, 32, 6000, 128), "decode"),
    # family_ops_attention.py's operators (shapes in its Specs' terms, `extra` as there)
    Spec("attention_backward", "bf16", (2, 16, 3000, 128), "causal_hd128", (("is_causal", True),)),
    Spec("fmha", "bf16", (2, 16, 3000, 64), "causal", (("is_causal", True),)),
    Spec("swa_attention", "f16", (1, 32, 3000, 128), "", (("window_size", 1024), ("is_causal", True))),
    Spec("gemma_attention", "bf16", (2, 8, 3000, 256), "", (("kv_heads", 1), ("soft_cap", 50.0), ("is_causal", True))),
    Spec("gemma_attention_decode", "bf16", (1, 16, 6000, 128), "", (("kv_heads", 8), ("window_size", 0), ("soft_cap", 50.0))),
    Spec("attention_sink", "bf16", (2, 3000, 8, 4, 64), "full", (("sliding_window", None),)),
    Spec("attention_sink_decode", "bf16", (4, 6000, 8, 4, 64), "full", (("sliding_window", None),)),
    Spec("fmha_varlen", "bf16", (4, 32, 3000, 128), "", (("is_causal", True), ("lens", (3000, 2250, 1500, 750)))),
    Spec("mla", "bf16", (2, 16, 3000, 128), "", (("d_pe", 64),)),
    Spec("mla_decoding", "f16", (1, 16, 6000, 128), "hd128", (("d_pe", 64),)),
    Spec("mla_decoding_split_kv", "f16", (1, 16, 6000, 128), "hd128", (("d_pe", 64),)),
    Spec("sparse_mla", "bf16", (1, 256, 1, 768), "", (("heads", 16), ("head_dim", 128), ("s_kv", 6000), ("d_pe", 64))),
    Spec("flash_attn_with_kvcache", "bf16", (8, 6000, 32, 128), "contiguous", (("kv_heads", 8), ("page_block_size", 0))),
    Spec("flash_attn_func", "bf16", (2, 3000, 32, 128), "causal", (("kv_heads", 8), ("is_causal", True))),
    Spec("fmha_variant", "bf16", (2, 16, 1000, 3000, 128), "alibi", (("is_causal", True), ("bias_type", "alibi"))),
    # family_ops_more.py's operators
    Spec("rms_norm_backward", "bf16", (3000, 5120)),
    Spec("silu_and_mul_backward", "bf16", (3000, 2 * 5120)),
    Spec("swiglu_backward", "bf16", (3000, 5120)),
    Spec("persistent_layer_norm", "bf16", (3000, 5120)),
    Spec("fused_add_rms_norm", "bf16", (3000, 5120)),
    Spec("splitk_reduce", "f16", (3, 32, 16, 512)),
    Spec("mhc_gemm_rms_scale", "bf16", (3000, 28672, 4)),
    Spec("mhc_sinkhorn", "bf16", (3000, 4)),
    Spec("mhc_apply_residual", "bf16", (3000, 7168, 4)),
    Spec("w8a8_block_fp8_matmul", "f8e4m3fn", (3000, 2048, 1536)),
    Spec("fused_linear_cross_entropy", "bf16", (3000, 2048, 32000)),
    Spec("linear_gluact_linear", "bf16", (1, 1000, 4096, 11008)),
    Spec("fused_moe", "bf16", (300, 4096, 14336, 8, 2)),
    Spec("recurrent_gated_delta_rule", "bf16", (3, 1, 32, 128)),
    Spec("chunk_gated_delta_rule", "bf16", (1, 3072, 32, 128)),
    Spec("moe_actgrad_bwd", "bf16", (300, 2048, 768, 128, 8)),
    Spec("nvfp4_quantize", "bf16", (3000, 5120)),
    # family_ops_ssm.py's operators: Mamba-2 2.7B's heads at T 3072
    Spec("mamba2_chunk_forward", "bf16", (1, 3072, 80, 64, 1, 128)),
    Spec("mamba2_chunk_backward", "bf16", (1, 3072, 80, 64, 1, 128)),
)  # fmt: skip


def cold_case(spec: Spec) -> str:
    return f"tuning_{spec.name.removeprefix('ops_')}"


def table_case(spec: Spec) -> str:
    return f"tuning_table_{spec.name.removeprefix('ops_')}"


def near_case(spec: Spec) -> str:
    return f"tuning_near_{spec.name.removeprefix('ops_')}"


CASE_KINDS = (cold_case, table_case, near_case)
KINDS = frozenset({"cold", "table", "near"})  # measure's names of them
CASES = tuple(case(s) for s in SPECS for case in CASE_KINDS)


def probe_argv(impl: str, spec: Spec) -> list[str]:
    """tuning_probe.py's command line for `spec`, before the options."""
    argv = [impl, spec.op, spec.dtype, "x".join(map(str, spec.shape))]
    argv += [spec.variant] if spec.variant else []
    return [*argv, "--extra", json.dumps(spec.extra)] if spec.extra else argv


def probe(impl: str, spec: Spec, cache: Path, *options: str, **env: str) -> dict[str, object]:
    """One fresh process's first call of `spec` (fresh_process.probe's result)."""
    environment = fresh_process.environment(cache, **env)
    return fresh_process.probe(
        "tuning_probe", [*probe_argv(impl, spec), *options], environment, TIMEOUT_S
    )


def measure(spec: Spec, kinds: frozenset[str] = KINDS) -> dict[str, dict[str, object]]:
    """The first calls of `spec` that `kinds` (of KINDS) asks for, and TileGym's: "cold" (also
    run for "table", which reads its export), "table", "near" and "tilegym"."""
    out: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="fearless-bench-tuning-") as tmp:
        root = Path(tmp)
        table = root / "table.json"
        if kinds & {"cold", "table"}:
            out["cold"] = probe(
                FEARLESS_TILE, spec, root / "cold", "--no-tables", "--export", str(table)
            )
        if "table" in kinds:
            cold = out["cold"]
            if "seconds" in cold and cold.get("entries"):
                warm = probe(FEARLESS_TILE, spec, root / "table", FEARLESS_TUNING_TABLE=str(table))
            else:
                warm = {"skip": "the run without a table tuned nothing to export"}
            out["table"] = warm
        if "near" in kinds:
            out["near"] = probe(FEARLESS_TILE, spec, root / "near")
        out["tilegym"] = probe(TILEGYM, spec, root / "tilegym")
    return out


def records(spec: Spec, results: dict[str, dict[str, object]]) -> list[Record]:
    """The three cases' records of one spec from `measure`'s results (a case whose result
    `measure` left out has none)."""
    params = {**spec.params(), "new_size_class": True}
    out: list[Record] = []
    for case, mine, note in (
        (cold_case(spec), "cold", "tuning tables off: every configuration compiled and timed"),
        (table_case(spec), "table", "a tuning-table entry: only the winner compiled"),
        (near_case(spec), "near", "the shipped table: the nearest entries' winners timed"),
    ):
        if mine not in results:
            continue  # not measured: not asked for
        for impl, key in ((FEARLESS_TILE, mine), (TILEGYM, "tilegym")):
            out.append(_record(case, impl, results[key], params, note if impl != TILEGYM else None))
    return out


def _record(
    case: str, impl: str, result: dict[str, object], params: dict[str, object], note: str | None
) -> Record:
    if (refused := unmeasured(case, FAMILY, impl, result, **params)) is not None:
        return refused
    rec = Record(case, FAMILY, impl, "ok", params=dict(params), note=note)
    rec.time = float(result["seconds"])  # type: ignore[arg-type]
    rec.time_unit, rec.metric, rec.value, rec.reps = "s", "s", rec.time, 1
    return rec


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    out: list[Record] = []
    for spec in SPECS:
        if not {case(spec) for case in CASE_KINDS} & selected:
            continue
        if ctx.quick and spec.op not in QUICK_OPS:
            continue
        kinds = frozenset(
            kind
            for kind, case in zip(("cold", "table", "near"), CASE_KINDS, strict=True)
            if case(spec) in selected
        )
        got = [r for r in records(spec, measure(spec, kinds)) if r.case in selected]
        for r in got:
            ctx.log(format_line(r))
        out += got
        ctx.checkpoint(out)
    return out


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """First calls need the GPU (tuning times kernels there); the ops family's dry run checks
    these operators' kernels on the simulator."""
    return []
