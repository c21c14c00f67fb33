"""`fearless tune`'s operator table and shape lists (cli/tune_ops.py, cli/tune_cases.py): every
operator builds its inputs and reaches its tuners at a tiny case on the simulator, the named
case formats parse (and bad ones are refused), `--ops` / `--models` select, and a simulator
run over two such cases writes both tuned functions' entries. (The command's refusals and the
plain shape lists: test_autotune_tables.py.)"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

import fearless as fl
from fearless import autotune_timing, autotuning, config
from fearless.cli import tune_cases
from fearless.cli.main import main
from fearless.cli.tune import select
from fearless.cli.tune_cases import DEFAULT_CASES, MODEL_CASES, check_case, read_cases
from fearless.cli.tune_ops import OPS, run_case, tiny_case


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tune-cache")  # one per module: kernels compile once


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(cache))
    monkeypatch.delenv("FEARLESS_AUTOTUNE", raising=False)
    monkeypatch.delenv("FEARLESS_TUNING_TABLE", raising=False)
    monkeypatch.setattr(autotune_timing, "MAX_REPS", 2)
    monkeypatch.setattr(autotuning, "_winners", {})  # as in the command's own process


def _tuned(name: str) -> autotuning.Autotuned:
    module, func = name.rsplit(".", 1)
    return getattr(importlib.import_module(f"fearless.ops.{module}"), func)


@pytest.mark.parametrize("name", list(OPS))
def test_every_operator_runs_its_tiny_case_and_reaches_its_tuners(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for f in OPS[name].tuned:
        monkeypatch.setattr(_tuned(f), "_best", {})  # so the key is looked up again
    dtype = "bfloat16" if name == "w8a8_block_fp8_matmul" else "float32"
    case = check_case(tiny_case(name, dtype), "tiny")
    from fearless import ops

    run_case(ops, case, on_device=False)
    for module, setting, value in ALSO_UNDER.get(name, ()):  # tuners of other head dims
        monkeypatch.setattr(importlib.import_module(f"fearless.ops.{module}"), setting, value)
        run_case(ops, case, on_device=False)
    reached = {ident.split("fearless.ops.", 1)[1] for ident, _, _ in autotuning._winners}
    assert set(OPS[name].tuned) <= reached, reached


# Settings an Op's tiny case also runs under, to reach the tuners its real shapes reach: the
# backward takes FlashAttention-2's dQ (atomic_tuned) unless torch asks for determinism, and
# dk_dv then dq (dkdv_tuned, dq_tuned) then; flash_attn_with_kvcache takes the split-KV decode at
# one query, the tiny case's, and the general kernel at more.
ALSO_UNDER: dict[str, tuple[tuple[str, str, object], ...]] = {
    "scaled_dot_product_attention_backward": (
        ("kernels_attention_backward", "DQ_BY_ATOMICS_UP_TO", 0),
    ),
    "flash_attn_with_kvcache": (("kvcache_attention", "SPLIT_KV_DECODE", False),),
}

# Autotuned functions of fearless.ops that no Op reaches, with why.
NOT_TUNED_BY_OPS: dict[str, str] = {}


def _autotuned_in_ops() -> set[str]:
    """The "module.name" of every function in src/fearless/ops/*.py decorated `@fl.autotune`."""
    found = set()
    for path in sorted((Path(fl.__file__).parent / "ops").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(f) in ("fl.autotune", "autotune"):
                    found.add(f"{path.stem}.{node.name}")
    return found


def test_every_autotuned_function_of_ops_is_reached_by_some_op() -> None:
    autotuned = _autotuned_in_ops()
    assert len(autotuned) >= 39  # the parse finds them (39 when this was written)
    listed = {f for op in OPS.values() for f in op.tuned}
    assert listed <= autotuned, listed - autotuned  # no Op names a function that is not tuned
    assert autotuned - listed == set(NOT_TUNED_BY_OPS), autotuned - listed
    for f in listed:
        assert isinstance(_tuned(f), autotuning.Autotuned), f


def test_named_cases_in_text_and_json(tmp_path: Path) -> None:
    text = tmp_path / "s.txt"
    text.write_text(
        "fmha bfloat16 batch=1 q_heads=32 kv_heads=8 seq=1024 head_dim=128  # prefill\n"
        "matmul float16 16x4096 4096x4096\n"
    )
    fmha, mm = read_cases(text)
    assert fmha["shapes"] == {"batch": 1, "q_heads": 32, "kv_heads": 8, "seq": 1024,
                              "head_dim": 128}  # fmt: skip
    assert mm["shapes"] == [[16, 4096], [4096, 4096]]
    js = tmp_path / "s.json"
    js.write_text(json.dumps([{"op": "fused_moe", "dtype": "bfloat16", "model": "m",
                               "shapes": {"tokens": 16, "hidden": 2048, "inter": 768,
                                          "experts": 128, "top_k": 8}}]))  # fmt: skip
    assert read_cases(js)[0]["shapes"]["experts"] == 128
    bad = {
        "fmha bfloat16 batch=1 q_heads=32\n": "missing kv_heads, seq, head_dim",
        "fmha bfloat16 batch=1 q_heads=32 kv_heads=8 seq=8 head_dim=8 depth=2\n": "unknown depth",
        "fmha bfloat16 1x32x8x128\n": "must name its extents",
        "matmul float16 seq=4\n": "list of shapes",
        "fmha bfloat16 batch=1 q_heads=x\n": "name=integer",
        "fmha bfloat16 batch=0 q_heads=1 kv_heads=1 seq=8 head_dim=8\n": "positive int",
    }
    for line, says in bad.items():
        text.write_text(line)
        with pytest.raises(ValueError, match=re.escape(says)):
            read_cases(text)
    assert main(["tune", "--shapes", str(text), "--simulator"]) == 2


def test_the_built_in_cases_are_well_formed_and_counted() -> None:
    for c in DEFAULT_CASES:
        check_case(c, "default")
    assert all(MODEL_CASES.values())
    doc = tune_cases.__doc__ or ""
    assert f"`len(DEFAULT_CASES)` is {len(DEFAULT_CASES)}." in doc
    models = {"llama3-8b", "qwen3-8b", "mistral-7b", "gemma3-12b", "gpt-oss-20b",
              "qwen3-30b-a3b", "deepseek-v3"}  # fmt: skip
    assert models <= set(MODEL_CASES)
    ops_used = {c["op"] for c in DEFAULT_CASES}
    assert {"fmha", "fmha_decode", "gemma_attention", "attention_sink_decode", "mla_decoding",
            "fused_moe", "w8a8_block_fp8_matmul", "chunk_gated_delta_rule",
            "moe_actgrad_bwd"} <= ops_used  # fmt: skip
    # the backward operators at their forward's shapes
    assert {"softmax_backward", "layer_norm_backward", "swiglu_backward"} <= ops_used
    fwd = {"rms_norm": "rms_norm_backward", "silu_and_mul": "silu_and_mul_backward",
           "geglu": "geglu_backward", "fused_linear_cross_entropy":
           "fused_linear_cross_entropy_backward"}  # fmt: skip
    for f, b in fwd.items():
        at = {json.dumps(c["shapes"]) for c in DEFAULT_CASES if c["op"] == f}
        assert at == {json.dumps(c["shapes"]) for c in DEFAULT_CASES if c["op"] == b}, b


def test_moe_actgrad_bwd_is_tuned_at_every_moe_model_and_the_near_specs_class() -> None:
    """moe_actgrad_bwd at each MoE model's fused_moe shapes (and more token counts), and at the
    key of the tuning family's spec (family_tuning.py): its rows' size class and I."""
    from fearless.ops.kernels_rows import size_class
    from fearless_bench.family_tuning import SPECS

    def of(op: str) -> list[dict[str, Any]]:
        return [c for c in DEFAULT_CASES if c["op"] == op]

    bwd = {(c["model"], json.dumps(c["shapes"])) for c in of("moe_actgrad_bwd")}
    assert {(c["model"], json.dumps(c["shapes"])) for c in of("fused_moe")} < bwd
    assert {c["model"] for c in of("moe_actgrad_bwd")} == {
        "gpt-oss-20b", "qwen3-30b-a3b", "deepseek-v3", "qwen3-next-80b"}  # fmt: skip
    (spec,) = (s for s in SPECS if s.op == "moe_actgrad_bwd")
    tokens, _, inter, _, top_k = spec.shape

    def key(s: dict[str, int]) -> tuple[int, int]:  # actgrad_tuned's: the rows' class, I
        return size_class(s["tokens"] * s["top_k"]), s["inter"]

    near = key({"tokens": tokens, "inter": inter, "top_k": top_k})
    assert near in {key(c["shapes"]) for c in of("moe_actgrad_bwd")}


def test_ops_and_models_select() -> None:
    llama = select(None, None, ["llama3-8b"])
    assert llama and {c["model"] for c in llama} == {"llama3-8b"}
    two = select(None, ["fmha", "fused_moe"], ["llama3-8b", "qwen3-30b-a3b"])
    assert {c["op"] for c in two} == {"fmha", "fused_moe"}
    assert all(c["op"] != "fused_moe" or c["model"] == "qwen3-30b-a3b" for c in two)
    listed = [{"op": "softmax", "dtype": "float32", "shapes": [[4, 16]], "model": "a"},
              {"op": "relu", "dtype": "float32", "shapes": [[64]]}]  # fmt: skip
    assert select(listed, None, ["a"]) == listed[:1]
    assert select(listed, ["relu"], None) == listed[1:]
    with pytest.raises(ValueError, match="unknown models"):
        select(None, None, ["llama-9"])
    with pytest.raises(ValueError, match="unknown operators"):
        select(None, ["fmhaa"], None)
    assert main(["tune", "--models", "llama-9", "--simulator"]) == 2
    moe = select(None, ["moe_actgrad_bwd"], ["qwen3-30b-a3b"])
    assert len(moe) == 5 and {(c["op"], c["model"]) for c in moe} == {
        ("moe_actgrad_bwd", "qwen3-30b-a3b")}  # fmt: skip


def test_a_simulator_run_over_two_named_cases_writes_both_tuners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("fmha", "fused_moe", "moe_actgrad_bwd"):
        for f in OPS[name].tuned:
            monkeypatch.setattr(_tuned(f), "_best", {})
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(
        "fmha float32 batch=1 q_heads=4 kv_heads=2 seq=16 head_dim=16\n"
        "fused_moe float32 tokens=5 hidden=32 inter=16 experts=4 top_k=2\n"
        "softmax float32 4x16\n"
        "moe_actgrad_bwd float32 tokens=5 hidden=32 inter=16 experts=4 top_k=2\n"
    )
    out = tmp_path / "sim.json"
    ops = "fmha,fused_moe,moe_actgrad_bwd"
    argv = ["tune", "--shapes", str(shapes), "--ops", ops, "--out", str(out)]
    budgets: list[float | None] = []  # a table weighs every configuration: no compile budget
    tune_module = importlib.import_module("fearless.cli.tune")
    budget = autotune_timing.COMPILE_BUDGET_S
    with monkeypatch.context() as m:
        m.setattr(
            tune_module, "run_case", lambda *a: budgets.append(autotune_timing.COMPILE_BUDGET_S)
        )
        main([*argv[:-1], str(tmp_path / "unused.json"), "--simulator"])
    assert budgets == [None, None, None] and budget == autotune_timing.COMPILE_BUDGET_S  # put back
    assert main([*argv, "--simulator"]) == 0
    entries = json.loads(out.read_text())["entries"]
    names = {e["function"].rsplit(".", 1)[-1] for e in entries}
    assert names == {"attention_tuned", "gate_up_tuned", "down_tuned", "actgrad_tuned"}
    assert all(e["arch"] == "sim" and e["versions"]["fearless"] == fl.__version__ for e in entries)
    said = capsys.readouterr().out
    assert "[1/3] fmha float32 batch=1" in said and "3 of 3 cases ran" in said


def test_a_run_cut_short_keeps_the_cases_it_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is written after every case, so a run killed by a time limit (the GPU
    machine's) keeps what it measured: here the second case is interrupted."""
    from fearless.cli import tune as tune_cli

    for f in OPS["fmha"].tuned:
        monkeypatch.setattr(_tuned(f), "_best", {})
    ran: list[str] = []

    def cut(ops, case, on_device):  # type: ignore[no-untyped-def]
        if ran:
            raise KeyboardInterrupt
        ran.append(case["op"])
        return run_case(ops, case, on_device)

    monkeypatch.setattr(tune_cli, "run_case", cut)
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(
        "fmha float32 batch=1 q_heads=4 kv_heads=2 seq=16 head_dim=16\n"
        "fmha float32 batch=1 q_heads=4 kv_heads=2 seq=40 head_dim=16\n"
    )
    out = tmp_path / "cut.json"
    # Ctrl-C ends the command with one line and status 130 (cli/main.py)
    assert main(["tune", "--shapes", str(shapes), "--out", str(out), "--simulator"]) == 130
    entries = json.loads(out.read_text())["entries"]
    assert {e["function"].rsplit(".", 1)[-1] for e in entries} == {"attention_tuned"}


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ({"op": ["softmax"], "dtype": "float32", "shapes": [[4, 16]]}, "`op` must be one of"),
        ({"op": {"a": 1}, "dtype": "float32", "shapes": [[4, 16]]}, "`op` must be one of"),
        (
            {"op": "matmul", "dtype": "float32", "shapes": [[8, 16]]},
            "matmul takes 2 shapes, got 1 (e.g. `matmul float32 8x16 16x8`)",
        ),
        (
            {"op": "softmax", "dtype": "float16", "shapes": [[4, 16], [4, 16]]},
            "softmax takes 1 shape, got 2",
        ),
        (
            {"op": "group_gemm", "dtype": "float16", "shapes": [[8, 16], [16, 8], [8, 16]]},
            "group_gemm takes an even number of shapes",
        ),
    ],
)
def test_a_case_of_the_wrong_op_or_number_of_shapes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: dict[str, Any], says: str
) -> None:
    shapes = tmp_path / "c.json"
    shapes.write_text(json.dumps([case]))
    with pytest.raises(ValueError, match=re.escape(says)):
        read_cases(shapes)
    assert main(["tune", "--simulator", "--shapes", str(shapes)]) == 2
    assert says in capsys.readouterr().err


def test_every_list_operators_tiny_case_has_the_shapes_it_takes() -> None:
    for name, op in OPS.items():
        if not op.fields:
            check_case(tiny_case(name), name)


@pytest.mark.parametrize("where", ["missing", "folder", "proc"])
def test_an_out_that_cannot_be_written_is_refused_before_any_case(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fearless.cli import tune as tune_cli

    if where == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    out = {
        "missing": tmp_path / "no-such-folder" / "t.json",
        "folder": tmp_path,
        "proc": Path("/proc/fearless-tuning.json"),
    }[where]
    ran: list[Any] = []
    monkeypatch.setattr(tune_cli, "run_case", lambda *a: ran.append(a))
    shapes = tmp_path / "s.txt"
    shapes.write_text("softmax float32 4x16\n")
    assert main(["tune", "--simulator", "--shapes", str(shapes), "--out", str(out)]) == 2
    said = capsys.readouterr()
    assert ran == [] and "[1/1]" not in said.out
    assert f"fearless tune: error: cannot write the table to {out}: " in said.err
    assert ".tmp" not in said.err
