"""`fearless bench --family ops` (family_ops.py): its cases, its dry run, and its GPU-run
builders checked on the CPU.

The GPU run needs an H200; what can be checked here is: the case list (TileGym's grids), the
dry run of every op on the simulator, and each case's three runs and reference as the GPU run
builds them, with torch CPU tensors (fearless.ops on the simulator, torch eager, and a stand-in
for TileGym that has TileGym's calling conventions: rope in place, the
persistent layer norm's tuple), each checked against the reference as the harness checks.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fearless as fl
from fearless.cli.main import main
from fearless_bench import (
    check,
    family_ops,
    family_ops_attention,
    family_ops_base,
    family_ops_dry,
    family_ops_more,
    family_ops_ssm,
    model,
    suite,
)
from fearless_bench.family_ops_base import Spec

OPS = [
    "softmax",
    "rms_norm",
    "layer_norm",
    "matmul",
    "bmm",
    "group_gemm",
    "relu",
    "gelu",
    "silu_and_mul",
    "swiglu",
    "geglu",
    "dropout",
    "rope",
    "transpose",
    "attention",
]
ATTENTION_OPS = list(family_ops_attention.FEARLESS_CALLS)


@pytest.fixture(autouse=True)
def _restore_target() -> Iterator[None]:
    yield
    fl.set_target(None)


def test_cases_cover_every_op_over_tilegyms_grids(capsys: pytest.CaptureFixture[str]) -> None:
    specs = family_ops.specs()
    assert tuple(s.name for s in specs) == family_ops.CASES
    n_more = len(family_ops_more.more_specs()) + len(family_ops_ssm.ssm_specs())
    assert len(set(family_ops.CASES)) == len(specs) == 220 + 132 + n_more
    per_op = {op: [s for s in specs if s.op == op] for op in OPS + ATTENTION_OPS}
    assert {op: len(v) for op, v in per_op.items()} == {
        "softmax": 10,
        "rms_norm": 10,
        "layer_norm": 12,
        "matmul": 10,
        "bmm": 6,
        "group_gemm": 6,
        "relu": 8,
        "gelu": 16,
        "silu_and_mul": 10,
        "swiglu": 90,
        "geglu": 8,
        "dropout": 8,
        "rope": 4,
        "transpose": 10,
        "attention": 12,
        "attention_backward": 24,
        "fmha": 8,
        "swa_attention": 6,
        "gemma_attention": 5,
        "gemma_attention_decode": 3,
        "attention_sink": 8,
        "attention_sink_decode": 8,
        "fmha_varlen": 4,
        "mla": 4,
        "mla_decoding": 16,
        "mla_decoding_split_kv": 16,
        "sparse_mla": 6,
        "flash_attn_with_kvcache": 8,
        "flash_attn_func": 4,
        "fmha_variant": 12,
    }
    assert {s.dtype for s in per_op["softmax"]} == {"f32", "bf16"}
    assert {(s.dtype, s.shape) for s in per_op["matmul"]} == {
        (dt, (n, n, n)) for n in (1024, 2048, 4096, 8192, 16384) for dt in ("f16", "f8e4m3fn")
    }
    assert {s.variant for s in per_op["gelu"]} == {"none", "tanh"}
    assert "ops_swiglu_bf16_8x4096x16384" in family_ops.CASES
    assert "ops_bmm_f16_8x4096" in family_ops.CASES
    assert "ops_rope_f16_1x16x32768x64" in family_ops.CASES
    ln = {s.name: s.params()["tilegym_op"] for s in per_op["layer_norm"]}
    assert ln["ops_layer_norm_bf16_4096x256"] == "layer_norm_legacy"
    assert ln["ops_layer_norm_bf16_30000x16384"] == "persistent_layer_norm"
    # selection by family and by pattern, and `--list`
    assert suite.select(["ops"]) == set(family_ops.CASES)
    assert suite.select(["ops_gelu_tanh_*"]) == {
        s.name for s in per_op["gelu"] if s.variant == "tanh"
    }
    assert main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"ops          {c}" in listed for c in family_ops.CASES)


def test_quick_takes_the_first_and_last_shape_of_each_group() -> None:
    quick = family_ops.quick_specs()
    sizes: dict[str, int] = {}
    for s in family_ops.specs():
        sizes[s.grid] = sizes.get(s.grid, 0) + 1
    assert {s.grid for s in quick} == set(sizes)
    assert len(quick) == sum(min(2, n) for n in sizes.values())  # mHC's grids: one shape
    names = {s.name for s in quick}
    assert {"ops_layer_norm_bf16_4096x16384", "ops_layer_norm_bf16_30000x256"} <= names
    assert {"ops_matmul_f16_1024", "ops_matmul_f16_16384"} <= names
    assert "ops_matmul_f16_4096" not in names


# ----------------------------------------------------------- the GPU run's builders, on CPU


def _tilegym_stand_in(torch: Any) -> Any:
    """TileGym's operators as the family calls them, computed by torch with TileGym's
    conventions (what the family must adapt to)."""
    fn = torch.nn.functional

    def geglu(x: Any, dim: int = -1, approximate: str = "none") -> Any:
        a, b = x.chunk(2, dim=dim)
        return a * fn.gelu(b, approximate=approximate)  # TileGym: x[:d] * gelu(x[d:])

    def rope(q: Any, k: Any, cos: Any, sin: Any) -> Any:
        c, s, h = cos.unsqueeze(1), sin.unsqueeze(1), q.shape[-1] // 2
        for t in (q, k):  # in place, as TileGym's
            t.copy_(t * c + torch.cat([-t[..., h:], t[..., :h]], dim=-1) * s)
        return q, k

    return types.SimpleNamespace(
        softmax=lambda x: torch.softmax(x, dim=-1),
        rms_norm=lambda x, shape, w, eps: fn.rms_norm(x, shape, w, eps),
        layer_norm_legacy=lambda x, shape, w, b, eps: fn.layer_norm(x, shape, w, b, eps),
        persistent_layer_norm=lambda x, shape, w, b, eps: (
            fn.layer_norm(x, shape, w, b, eps),
            None,
            None,
        ),
        # TileGym's matmul returns its operands' dtype, fp8 too (f32 sums, one rounding)
        matmul=lambda a, b, use_tma, static_persistent: (a.float() @ b.float()).to(a.dtype),
        bmm=torch.bmm,
        group_gemm=lambda As, Bs: [a @ b for a, b in zip(As, Bs, strict=True)],
        activation=types.SimpleNamespace(
            relu=fn.relu,
            gelu=lambda x, approximate: fn.gelu(x, approximate=approximate),
            geglu=geglu,
        ),
        silu_and_mul=lambda x: fn.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2 :],
        get_swiglu=lambda: lambda a, b: fn.silu(a) * b,
        dropout=lambda x, seed, p, training, inplace: fn.dropout(x, p, training),
        apply_rope_base=rope,
        transpose=lambda x: x.t().contiguous(),
        fmha=lambda q, k, v, scaling, is_causal: fn.scaled_dot_product_attention(
            q, k, v, is_causal=is_causal, scale=scaling
        ),
        fmha_decode=lambda q, k, v, sm_scale: fn.scaled_dot_product_attention(q, k, v),
        **_tilegym_attention_stand_in(torch),
        **_more_stand_ins(torch),
        cutile=types.SimpleNamespace(
            attention=types.SimpleNamespace(tile_fmha_with_backward=_fmha_bwd(torch)),
            rms_norm=types.SimpleNamespace(rms_norm_backward=_rms_norm_backward),
        ),
    )


def _tilegym_attention_stand_in(torch: Any) -> dict[str, Any]:
    """family_ops_attention's TileGym calls, with TileGym 1.5.1's signatures (tilegym/ops/ops.py
    and cutile/attention.py), computed by fearless.ops (on the simulator) or by torch."""
    from fearless import ops

    def mla_decoding(q: Any, qpe: Any, kv: Any, kpe: Any, sm_scale: Any, transpose: bool = True) -> Any:  # fmt: skip
        return ops.mla_decoding(q, qpe, kv, kpe, sm_scale, transpose)

    def split_kv(q: Any, qpe: Any, kv: Any, kpe: Any, sm_scale: Any = None, kv_len_per_split: Any = None) -> Any:  # fmt: skip
        return ops.mla_decoding_split_kv(q, qpe, kv, kpe, sm_scale, kv_len_per_split)

    return {
        "swa_attention": ops.swa_attention,
        "gemma_attention": ops.gemma_attention,
        "gemma_attention_decode": ops.gemma_attention_decode,
        "attention_sink": ops.attention_sink,
        "attention_sink_decode": ops.attention_sink_decode,
        "fmha_varlen": ops.fmha_varlen,
        "mla": ops.mla,
        "mla_decoding": mla_decoding,
        "mla_decoding_split_kv": split_kv,
        "sparse_mla": ops.sparse_mla,
        "fmha_variant": ops.fmha_variant,
    }


def _more_stand_ins(torch: Any) -> dict[str, Any]:
    """family_ops_more's and family_ops_ssm's TileGym operators with TileGym's signatures
    (ops.py, cutile rms_norm.py, moe_interface.py): fearless.ops where it has the same call,
    torch otherwise."""
    from fearless import ops

    fn = torch.nn.functional

    def lce(x: Any, w: Any, t: Any, ignore_index: int, chunk_size: int, reduction: str) -> Any:
        return fn.cross_entropy(fn.linear(x.float(), w.float()), t, reduction=reduction)

    def actgrad(dout: Any, h: Any, w2: Any, dh: Any, ds: Any, b2: Any, db2: Any, a_prime: Any,
                scores: Any, offsets: Any, gather: Any, scatter: Any, activation_type: str,
                max_tokens_per_expert: Any = None) -> None:  # fmt: skip
        assert activation_type == "swiglu" and b2 is None and db2 is None
        family_ops_more.actgrad_torch(dout, h, w2, scores, offsets.tolist(), gather.long(),
                                      scatter.long(), (dh, a_prime, ds))  # fmt: skip

    def mamba2_backward(x: Any, a: Any, b: Any, c: Any, d: Any, dt: Any, s0: Any, dout: Any,
                        dfinal: Any, chunk_size: int = 64, state_dtype: Any = None) -> Any:  # fmt: skip
        leaves = [v.detach().clone().requires_grad_() for v in (x, a, b, c, d, dt, s0)]
        y, final = family_ops_ssm.ssd_chunked_torch(*leaves, cs=chunk_size)
        return torch.autograd.grad((y, final), leaves, (dout, dfinal))

    return {
        "splitk_reduce": lambda o, lse, out, s_kv: ops.splitk_reduce(o, lse, out, s_kv),
        "mhc_gemm_rms_scale": ops.mhc_gemm_rms_scale,
        "mhc_sinkhorn": ops.mhc_sinkhorn,
        "mhc_apply_residual": ops.mhc_apply_residual,
        "w8a8_block_fp8_matmul": lambda a, b, sa, sb, block_size: ops.w8a8_block_fp8_matmul(
            a, b, sa, sb, block_size
        ),
        "nvfp4_quantize": ops.nvfp4_quantize,
        "fused_linear_cross_entropy": lce,
        "linear_gluact_linear": lambda x, wa, wn, w2, act_type: fn.linear(
            fn.silu(fn.linear(x, wa)) * fn.linear(x, wn), w2
        ),
        "fused_moe": ops.fused_moe,
        "recurrent_gated_delta_rule": lambda q, k, v, g, b, s0, final: (
            family_ops_more.delta_recurrent_torch(q, k, v, g, b, s0)
        ),
        "chunk_gated_delta_rule": lambda q, k, v, g, b, cs: (
            family_ops_more.delta_chunk_torch(q, k, v, g, b, cs),
            None,
        ),
        "moe_actgrad_bwd": actgrad,
        "mamba2_chunk_forward": lambda x, a, b, c, d, dt, s0, chunk_size=64: (
            family_ops_ssm.ssd_chunked_torch(x, a, b, c, d, dt, s0, cs=chunk_size)
        ),
        "mamba2_chunk_backward": mamba2_backward,
    }


def _fmha_bwd(torch: Any) -> Any:
    """TileGym's cutile.attention.tile_fmha_with_backward: the forward, autograd does the rest."""

    def fmha_bwd(q: Any, k: Any, v: Any, scaling: Any = None, is_causal: bool = True) -> Any:
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=is_causal, scale=scaling
        )

    return fmha_bwd


def _rms_norm_backward(x: Any, dy: Any, w: Any, rstd: Any) -> Any:  # rstd (M,) f32
    """TileGym's cutile.rms_norm.rms_norm_backward(x, dy, weight, rstd) -> (dx, dw)."""
    xn = x.float() * rstd[:, None]
    dw = (dy.float() * xn).sum(0)
    dyw = dy.float() * w.float()
    dx = rstd[:, None] * (dyw - xn * (dyw * xn).sum(1, keepdim=True) / x.shape[-1])
    return dx.to(x.dtype), dw.to(w.dtype)


def _small(spec: Spec) -> Spec:
    """`spec` at its dry-run shape; the layer norm's legacy grid (M = LEGACY_LN_ROWS, which the
    test sets to 6) at 6 rows, its persistent grid at 5."""
    if spec.op in family_ops_attention.ATTENTION_DRY_SHAPES:
        return family_ops_attention.small(spec)
    shape = family_ops_dry.DRY_SHAPES[spec.op]
    if spec.op == "layer_norm":
        shape = (6 if spec.shape[0] == family_ops_base.LEGACY_LN_ROWS else 5, shape[1])
    return Spec(spec.op, spec.dtype, shape, spec.variant)


def test_gpu_builders_check_every_impl_on_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from fearless import ops

    firsts: dict[str, Spec] = {}
    for s in family_ops.specs():  # each group once, and both layer-norm grids
        # family_ops_more's and _ssm's ops: each op once (one dtype), for the time (sim compiles)
        once = s.op in family_ops_more.MORE_BUILDERS or s.op in family_ops_ssm.SSM_BUILDERS
        firsts.setdefault(s.op if once else s.grid, s)
    smalls = [_small(s) for s in firsts.values()]
    monkeypatch.setattr(family_ops_base, "DEVICE", "cpu")
    monkeypatch.setattr(family_ops_base, "LEGACY_LN_ROWS", 6)
    fl.set_target("sim")
    torch.manual_seed(0)
    tilegym = _tilegym_stand_in(torch)
    for spec in smalls:
        bench = family_ops.BUILDERS[spec.op](torch, spec)
        ref = bench.reference()
        assert ref.dtype == torch.float64, spec
        runs = {"fearless": bench.fearless(ops)}
        try:
            runs["tilegym"] = bench.tilegym(tilegym)
        except model.Skip:  # TileGym has no such op (flash-attn's, Liger's), or no dropout
            no_tilegym = spec.op.startswith("flash_attn_") or spec.op == "fused_add_rms_norm"
            assert no_tilegym or spec.variant == "dropout", spec
        if bench.torch is not None:  # None: torch has no such op (fp8 matmul), a skip
            runs["torch"] = bench.torch
        for impl, run in runs.items():
            first = run()  # the harness checks the first run, then times the same call
            err = check.rel_err_torch(first, ref)
            assert check.count_nan_torch(first) == 0, (spec, impl)
            assert check.verdict(err, spec.dtype) is None, (spec.name, impl, err)
            if spec.op not in family_ops_attention.FEARLESS_CALLS:  # (simulator time)
                run()
        assert (bench.bytes is None) != (bench.flops is None), spec


def test_dropout_check_fails_a_wrong_dropout() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(1 << 16)
    ones = torch.ones(2, dtype=torch.float64)
    keep = torch.rand(x.shape) >= 0.5
    good = family_ops_base.DropoutStats(torch.where(keep, x * 2, 0), x, 0.5)
    assert check.verdict(check.rel_err_torch(good, ones), "f32") is None
    unscaled = family_ops_base.DropoutStats(torch.where(keep, x, 0), x, 0.5)
    assert check.verdict(check.rel_err_torch(unscaled, ones), "f32") is not None
    nothing_dropped = family_ops_base.DropoutStats(x * 2, x, 0.5)
    assert check.verdict(check.rel_err_torch(nothing_dropped, ones), "f32") is not None


def test_cases_past_the_time_budget_are_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    clock = [0.0]  # family_ops's clock: each case takes 1 s of it (a real 10 ms budget was
    # spent before the first case on a loaded machine)

    def fake_case(ctx: Any, spec: Spec) -> list[model.Record]:
        ran.append(spec.name)
        clock[0] += 1.0
        return []

    monkeypatch.setattr(family_ops, "_case", fake_case)
    monkeypatch.setattr(family_ops, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setenv(family_ops.BUDGET_ENV, "0.5")
    chosen = {"ops_relu_f16_1048576", "ops_relu_f16_4194304", "ops_matmul_f16_1024"}
    kept: list[int] = []  # the records partial.json holds after each case
    ctx: Any = types.SimpleNamespace(quick=False, checkpoint=lambda r: kept.append(len(r)))
    records = family_ops.run(ctx, chosen)
    assert ran == ["ops_relu_f16_1048576"]
    assert kept == [0]  # after each case run (the fake one gave no record)
    assert {r.case for r in records} == chosen - set(ran)
    assert all(r.status == "skipped" and "time budget" in (r.reason or "") for r in records)
    assert "--cases 'ops_matmul_f16_*'" in next(
        r.reason or "" for r in records if r.case == "ops_matmul_f16_1024"
    )


def test_op_table_gives_per_op_geomeans_against_each_peer(tmp_path: Path) -> None:
    def rec(case: str, op: str, impl: str, t: float | None) -> dict[str, Any]:
        status = "ok" if t is not None else "skipped"
        params = {"op": op}
        return {
            "case": case,
            "family": "ops",
            "impl": impl,
            "status": status,
            "time": t,
            "params": params,
        }

    records = [
        rec("ops_softmax_f32_4096x1024", "softmax", model.FEARLESS_TILE, 1.0),
        rec("ops_softmax_f32_4096x1024", "softmax", model.TILEGYM, 2.0),
        rec("ops_softmax_f32_4096x1024", "softmax", model.TORCH, 0.5),
        rec("ops_softmax_f32_4096x2048", "softmax", model.FEARLESS_TILE, 1.0),
        rec("ops_softmax_f32_4096x2048", "softmax", model.TILEGYM, 2.0),
        rec("ops_softmax_f32_4096x2048", "softmax", model.TORCH, 0.5),
        rec("ops_relu_f16_1048576", "relu", model.FEARLESS_TILE, 2.0),
        rec("ops_relu_f16_1048576", "relu", model.TILEGYM, None),
        rec("ops_relu_f16_1048576", "relu", model.TORCH, 1.0),
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"records": records}))
    lines = family_ops.op_table(str(path)).splitlines()
    assert lines[0] == "| op | vs TileGym (n) | vs torch (n) | vs best peer (n) |"
    assert "| softmax | 2.000 (2) | 0.500 (2) | 0.500 (2) |" in lines
    assert "| relu | - (0) | 0.500 (1) | 0.500 (1) |" in lines
    assert "| matmul | - (0) | - (0) | - (0) |" in lines
    assert lines[-1] == "| **all** | 2.000 (2) | 0.500 (3) | 0.500 (3) |"


def test_a_case_that_raises_fails_that_case_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_case(ctx: Any, spec: Spec) -> list[model.Record]:
        if spec.op == "relu":
            raise MemoryError("CUDA out of memory")
        return [model.Record(spec.name, "ops", model.TORCH, "ok")]

    monkeypatch.setattr(family_ops, "_case", fake_case)
    cuda = types.SimpleNamespace(empty_cache=lambda: None)
    ctx: Any = types.SimpleNamespace(
        quick=False,
        log=lambda line: None,
        torch=types.SimpleNamespace(cuda=cuda),
        checkpoint=lambda records: None,
    )
    records = family_ops.run(ctx, {"ops_relu_f16_1048576", "ops_matmul_f16_1024"})
    relu = [r for r in records if r.case == "ops_relu_f16_1048576"]
    assert {r.impl for r in relu} == set(family_ops.IMPLS)
    assert all(r.status == "failed" and "out of memory" in (r.reason or "") for r in relu)
    assert [r.status for r in records if r.case == "ops_matmul_f16_1024"] == ["ok"]


def test_cases_run_through_the_harness_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_case` end to end (builders, harness check, timing call, records) on CPU tensors, with
    a stand-in timer and peers: every implementation ok, its note and metric set."""
    torch = pytest.importorskip("torch")
    from fearless_bench.harness import Ctx
    from fearless_bench.timing import QUICK, Timing

    class Timer:
        def time(self, fn: Any) -> Timing:
            fn()
            return Timing(0.5, 0.4, 0.6, 1)

    class CpuCtx(Ctx):
        def sync(self) -> None:
            pass

    peers = types.SimpleNamespace(
        fearless_gpu=lambda: None,
        tilegym=lambda: types.SimpleNamespace(ops=_tilegym_stand_in(torch)),
    )
    monkeypatch.setattr(family_ops_base, "DEVICE", "cpu")
    fl.set_target("sim")
    ctx = CpuCtx(torch, Timer(), QUICK, peers, True, "sm_90", lambda line: None)  # type: ignore[arg-type]
    for spec in (
        Spec("rope", "f16", (1, 16, 7, 64)),
        Spec("group_gemm", "f16", (2, 37, 24, 56)),
        Spec("dropout", "f32", (4096,)),
        Spec("geglu", "bf16", (2, 5, 80), "tanh"),
    ):
        records = family_ops._case(ctx, spec)
        assert [r.impl for r in records] == list(family_ops.IMPLS)
        assert all(r.status == "ok" for r in records), records
        assert all(r.metric in ("GB/s", "TFLOP/s") and r.time == 0.5 for r in records)
        assert records[0].note is not None and "first call" in records[0].note
        assert records[0].params["op"] == spec.op


def test_the_attention_reference_in_head_chunks_is_torchs_sdpa() -> None:
    """The prefill cases' float64 reference runs SDPA a few heads at a time (the whole 8192
    case's scores are 69 GB of float64); it is the same function."""
    torch = pytest.importorskip("torch")
    from fearless_bench.family_ops import _sdpa_f64

    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (torch.randn(2, 5, 33, 16, dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        want = sdpa(q.double(), k.double(), v.double(), is_causal=causal)
        assert torch.allclose(_sdpa_f64(torch, q, k, v, causal, heads=3), want, atol=1e-12)


def test_every_attention_operator_of_fearless_ops_is_benchmarked() -> None:
    """Each attention operator that fearless.ops exports is called by a case of the family
    (splitk_reduce is split-KV decode's combine step, run inside the decode operators)."""
    from fearless import ops

    attention = {
        n for n in ops.__all__ if any(w in n for w in ("attention", "attn", "fmha", "mla"))
    }
    calls = {"attention": {"scaled_dot_product_attention"}}  # family_ops._attention
    calls["attention"].add("fmha_decode")  # its decode cases: TileGym's fmha_decode's grid
    for op, names in family_ops_attention.FEARLESS_CALLS.items():
        calls.setdefault(op, set()).update(names)
    ops_in_family = {s.op for s in family_ops.specs()}
    assert set(calls) <= ops_in_family
    assert attention <= set().union(*calls.values()), attention - set().union(*calls.values())
    table = family_ops.op_table.__doc__ or ""
    assert "per op" in table
    quick = [s for s in family_ops.quick_specs() if s.op in family_ops_attention.FEARLESS_CALLS]
    assert len(quick) == 58


def test_the_op_table_lists_the_attention_ops(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"records": []}))
    rows = family_ops.op_table(str(path)).splitlines()
    for op in family_ops_attention.FEARLESS_CALLS:
        assert f"| {op} | - (0) | - (0) | - (0) |" in rows


def test_the_attention_ops_dry_run_on_the_simulator() -> None:
    """`fearless bench --dry-run --cases 'ops_<op>_*'` for two of this module's ops: one record
    per group, ok against the float64 reference. The dry run is each op's GPU builder at its
    small shape, which test_gpu_builders_check_every_impl_on_cpu_tensors runs for every group
    (fearless on the simulator): here only the wiring, to keep the simulator time down."""
    pytest.importorskip("torch")
    fl.set_target("sim")
    specs = [
        s
        for s in family_ops_attention.attention_specs()
        if s.op in ("mla_decoding_split_kv", "flash_attn_with_kvcache")
    ]
    chosen = {s.name for s in specs}
    records = family_ops_dry.dry_run(None, chosen)  # type: ignore[arg-type]
    groups = {s.group for s in specs}
    assert {r.case for r in records} == groups
    assert all(r.status == "ok" for r in records), [(r.case, r.reason) for r in records]


# fearless.ops's operators the family leaves out, and why. The attention operators are the
# attention benchmark's (another pass); the rest:
EXCLUDED = {
    "moe_align_block_size",  # runs inside every fused_moe call (fearless's and TileGym's)
}
ATTENTION = {
    "attention_sink",
    "attention_sink_decode",
    "flash_attn_with_kvcache",
    "fmha",
    "fmha_decode",
    "fmha_varlen",
    "gemma_attention",
    "gemma_attention_decode",
    "mla",
    "mla_decoding",
    "mla_decoding_split_kv",
    "scaled_dot_product_attention",
    "sparse_mla",
    "swa_attention",
}


def test_every_non_attention_operator_is_benchmarked_or_excluded_with_a_reason() -> None:
    from fearless import ops

    benched = {s.op for s in family_ops.specs()} - {"attention"}
    for op in family_ops.BUILDERS:
        assert any(s.op == op for s in family_ops.specs()), op
    missing = set(ops.__all__) - ATTENTION - EXCLUDED - benched
    assert not missing, f"fearless.ops operators the ops family lacks: {sorted(missing)}"
    assert not (EXCLUDED & benched), EXCLUDED & benched
    # the backward passes benchmarked are fearless's (backward_rows, torch autograd)
    assert {"rms_norm_backward", "silu_and_mul_backward", "swiglu_backward"} <= benched


def test_more_ops_dry_run_on_the_simulator() -> None:
    """family_ops_more's dry run for two of its ops (the wiring: each op's GPU builder at its
    small shape runs in test_gpu_builders_check_every_impl_on_cpu_tensors), on the simulator."""
    pytest.importorskip("torch")
    peers: Any = None  # the dry run needs none
    firsts: dict[str, str] = {}
    for s in family_ops_more.more_specs():  # the wiring: the builders test runs each op
        if s.op in ("splitk_reduce", "w8a8_block_fp8_matmul"):
            firsts.setdefault(s.op, s.name)
    fl.set_target("sim")
    records = family_ops_dry.dry_run(peers, set(firsts.values()))
    assert {r.params["op"] for r in records} == set(firsts)
    bad = [(r.case, r.status, r.reason) for r in records if r.status != "ok"]
    assert not bad, bad


def test_the_chunked_ssd_is_the_sequential_recurrence_and_its_autograd() -> None:
    """family_ops_ssm's torch eager peer and float64 reference (the chunked SSD) against
    tests/support/mamba2_ref.py's step-by-step scan and its autograd, in float64."""
    torch = pytest.importorskip("torch")
    from support.mamba2_ref import grad_reference, scan_reference

    gen = torch.Generator().manual_seed(3)
    bsz, t, h, p, g, n = 2, 48, 4, 6, 2, 5
    rn = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    ins = [rn(bsz, t, h, p), -(torch.rand(h, generator=gen, dtype=torch.float64) + 0.5),
           rn(bsz, t, g, n), rn(bsz, t, g, n), rn(h),
           torch.nn.functional.softplus(rn(bsz, t, h)), rn(bsz, h, p, n)]  # fmt: skip
    leaves = [v.clone().requires_grad_() for v in ins]
    y, final = family_ops_ssm.ssd_chunked_torch(*leaves, cs=16)
    want_y, want_final = scan_reference(*(v.numpy() for v in ins))
    torch.testing.assert_close(y.detach(), torch.from_numpy(want_y), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(final.detach(), torch.from_numpy(want_final), rtol=1e-10, atol=1e-10)  # fmt: skip
    dy, dfinal = rn(*y.shape), rn(*final.shape)
    grads = torch.autograd.grad((y, final), leaves, (dy, dfinal))
    want = grad_reference(*(v.numpy() for v in (*ins, dy, dfinal)))
    for got, w in zip(grads, want, strict=True):
        torch.testing.assert_close(got, torch.from_numpy(w), rtol=1e-9, atol=1e-9)
