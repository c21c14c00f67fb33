"""fearless.ops against TileGym's operators and torch eager, over TileGym's benchmark grids.

Every operator of `fearless.ops` is called as a torch user calls it: on torch CUDA tensors,
its output allocated by the call (`ops.softmax(x)`), the autotuner choosing per shape on the
first call (outside the timing; the record's note says how long that call took). Peers: the
TileGym operator of the same name (`tilegym.ops`, cutile backend; the activations under
`tilegym.ops.activation`) and torch eager. Shapes and dtypes are those of TileGym's
`tests/benchmark/bench_*.py` (forward only; NVIDIA/TileGym at 75a1430):

- softmax: M = 4096, N = 1024 ... 16384, f32 and bf16 (bench_softmax; TileGym's TMA, chunked
  and multi-wave variants are its own options: its default is called);
- rms_norm: M = 4096, N = 1024 ... 16384, f16 and bf16, eps 1e-5 (bench_rmsnorm);
- layer_norm: bf16, eps 1e-6, N = 256, 1024 ... 16384 at M = 4096 (TileGym's
  `layer_norm_legacy` grid) and at M = 30000 (its `persistent_layer_norm` grid, the TileGym op
  called there). Its M = 128000 rows (4 GB per tensor) are left out for the time budget;
- matmul: M = N = K = 1024 ... 16384, f16 (bench_matrix_multiplication, called as it calls
  TileGym: `use_tma=True, static_persistent=False`), and the same sizes in f8e4m3fn, TileGym's
  fp8 grid (fp8 out, as TileGym's; torch has no fp8 matmul: skipped);
- bmm: batch 2 and 8, M = N = K = 1024 ... 4096, f16; group_gemm: 4 and 16 groups, the same
  sizes, f16. Their transposed-operand variants (TileGym's `transpose_a/b` flags, which
  torch.bmm's signature has not) and the fp8 groups are left out;
- silu_and_mul: M = 1024 ... 16384 rows of 2 x 2048, f16 and f32 (bench_silu_and_mul);
- swiglu: batch 1, 4, 8 x M = 128, 4096 x N = 1024 ... 16384, f16, bf16 and f32: the whole
  90-shape grid (bench_swiglu; elementwise, so each case is short);
- geglu: (4, 512, 2N), N = 2048, 4096, 5120, 8192, bf16 (the unsloth suite's bench_geglu, its
  only grid), for both approximations: x[:d] * gelu(x[d:]) in both;
- dropout: 2^20, 2^22, 2^24, 2^26 elements, f16 and f32, p = 0.5, a fixed seed (bench_dropout);
- rope: q and k (1, 16, S, 64), S = 4096 ... 32768, cos and sin (1, S, 64), f16 (bench_rope).
  TileGym's rotates q and k in place: it gets its own copies, rotated again at every run;
- relu and gelu (none, tanh) have no TileGym benchmark: they take dropout's elementwise grid;
  transpose has none either: it takes softmax's (4096 x N, f32 and bf16);
- attention: q, k, v (4, 32, L, 128), L = S = 1024 ... 8192, bf16, causal and full: prefill
  attention against `tilegym.ops.fmha` and torch's SDPA (flash), 4 B H L^2 D flops (half when
  causal); and decode steps, q (8, 32, 1, 128) over k, v of S = 2048 ... 16384, against
  `tilegym.ops.fmha_decode` (bytes: K and V read once).

Checks: each output against a float64 torch reference (check.py's thresholds). Multi-output
ops (rope, group_gemm) are checked on all their outputs (`Joined`). Dropout's masks differ by
design, so its check is on what every correct dropout satisfies (`DropoutStats`): kept
elements are x / (1 - p), dropped ones 0, and the kept fraction is within 6 sigma of 1 - p.

`--quick` runs the first and last shape of each op, variant and dtype (and of each of
layer_norm's two grids). The family stops starting cases after FEARLESS_BENCH_OPS_BUDGET_S
seconds (default 420, 0: no limit), so one run stays near 8 minutes (a device command may
run 10); the cases left are skipped records that say so. Cheap ops run first. The dry run
(family_ops_dry.py) checks each op, variant and dtype once on the simulator, at a small
ragged shape, against NumPy (the record's `covers`: its cases). `op_table` summarises a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fearless import config

from . import family_ops_base as base
from .family_ops_attention import ATTENTION_BUILDERS
from .family_ops_base import (
    EPS_LN,
    EPS_RMS,
    FAMILY,
    P_DROP,
    SEED,
    Bench,
    DropoutStats,
    Joined,
    Spec,
    first,
    randn,
)
from .family_ops_cases import (  # noqa: F401  (CASES re-exported: the suite's case list)
    BUDGET_ENV,
    BUDGET_S,
    CASES,
    IMPLS,
    quick_specs,
    rotary_tables,
    specs,
)
from .family_ops_dry import dry_run  # noqa: F401  (the suite's entry for --dry-run)
from .family_ops_more import MORE_BUILDERS
from .family_ops_ssm import SSM_BUILDERS
from .harness import Ctx, DeviceCase, Impls, Prepared, error_text, run_device_case
from .model import FEARLESS_TILE, TILEGYM, TORCH, Record, Skip, failed, skipped

# ------------------------------------------------------------------------------- GPU run


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    budget = config.bench_ops_budget(BUDGET_S)
    start = time.perf_counter()
    out: list[Record] = []
    for spec in quick_specs() if ctx.quick else specs():
        if spec.name not in selected:
            continue
        spent = time.perf_counter() - start
        if budget and spent > budget:
            why = (
                f"the ops family's time budget ({budget:.0f} s, {BUDGET_ENV}) ran out; run "
                f"this case with --cases '{spec.group}_*'"
            )
            out += [skipped(spec.name, FAMILY, i, why, **spec.params()) for i in IMPLS]
            continue
        try:
            out += _case(ctx, spec)
        except Exception as exc:  # drawing the inputs (out of memory, say): this case only
            why = error_text(exc)
            ctx.log(f"{spec.name}: {why}")
            out += [failed(spec.name, FAMILY, i, why, **spec.params()) for i in IMPLS]
            ctx.torch.cuda.empty_cache()
        ctx.checkpoint(out)  # a run stopped mid-family keeps the cases measured so far
    return out


def _case(ctx: Ctx, spec: Spec) -> list[Record]:
    torch = ctx.torch
    bench = BUILDERS[spec.op](torch, spec)
    case = DeviceCase(
        spec.name,
        FAMILY,
        spec.dtype,
        reference=bench.reference,
        bytes=bench.bytes,
        flops=bench.flops,
        params=spec.params(),
    )

    def fearless() -> Prepared:
        ctx.peers.fearless_gpu()
        from fearless import ops

        call = bench.fearless(ops)
        t0 = time.perf_counter()
        call()  # the first call for this shape tunes (and compiles)
        ctx.sync()
        note = f"fearless.ops; first call {time.perf_counter() - t0:.1f} s (tuning, compiles)"
        return Prepared(call, note=note)

    def tilegym() -> Prepared:
        return Prepared(bench.tilegym(ctx.peers.tilegym().ops), note=bench.tilegym_note)

    def eager() -> Prepared:
        if bench.torch is None:
            raise Skip(
                bench.no_torch
                or f"torch has no {spec.op} of {spec.dtype} (torch._scaled_mm is another op)"
            )
        return Prepared(bench.torch)

    impls: Impls = list(zip(IMPLS, (fearless, tilegym, eager), strict=True))
    return run_device_case(ctx, case, impls)


def _rows(torch: Any, s: Spec) -> Bench:
    m, n = s.shape
    x, w, b = randn(torch, s.dtype, m, n), randn(torch, s.dtype, n), randn(torch, s.dtype, n)
    fn, item = torch.nn.functional, x.element_size()
    if s.op == "softmax":
        return Bench(
            lambda fo: lambda: fo.softmax(x),
            lambda tg: lambda: tg.softmax(x),
            lambda: torch.softmax(x, dim=-1),
            lambda: torch.softmax(x.double(), dim=-1),
            bytes=2 * m * n * item,
        )
    if s.op == "rms_norm":
        return Bench(
            lambda fo: lambda: fo.rms_norm(x, (n,), w, EPS_RMS),
            lambda tg: lambda: tg.rms_norm(x, (n,), w, EPS_RMS),
            lambda: fn.rms_norm(x, (n,), w, EPS_RMS),
            lambda: fn.rms_norm(x.double(), (n,), w.double(), EPS_RMS),
            bytes=2 * m * n * item + n * item,
        )

    def tilegym(tg: Any) -> Callable[[], Any]:
        if m == base.LEGACY_LN_ROWS:
            return lambda: first(tg.layer_norm_legacy(x, (n,), w, b, EPS_LN))
        return lambda: tg.persistent_layer_norm(x, (n,), w, b, EPS_LN)[0]

    return Bench(
        lambda fo: lambda: fo.layer_norm(x, (n,), w, b, EPS_LN),
        tilegym,
        lambda: fn.layer_norm(x, (n,), w, b, EPS_LN),
        lambda: fn.layer_norm(x.double(), (n,), w.double(), b.double(), EPS_LN),
        bytes=2 * m * n * item + 2 * n * item,
        tilegym_note=f"tilegym.ops.{s.params()['tilegym_op']}, cutile backend",
    )


def _gemm(torch: Any, s: Spec) -> Bench:
    if s.op == "matmul":
        m, n, k = s.shape
        a, b = randn(torch, s.dtype, m, k), randn(torch, s.dtype, k, n)
        return Bench(
            lambda fo: lambda: fo.matmul(a, b),
            lambda tg: lambda: tg.matmul(a, b, use_tma=True, static_persistent=False),
            None if s.dtype.startswith("f8") else lambda: torch.matmul(a, b),
            lambda: a.double() @ b.double(),
            flops=2 * m * n * k,
            tilegym_note="tilegym.ops.matmul(use_tma=True, static_persistent=False), cutile",
        )
    count, m, n, k = s.shape
    if s.op == "bmm":
        a, b = randn(torch, s.dtype, count, m, k), randn(torch, s.dtype, count, k, n)
        return Bench(
            lambda fo: lambda: fo.bmm(a, b),
            lambda tg: lambda: tg.bmm(a, b),
            lambda: torch.bmm(a, b),
            lambda: torch.bmm(a.double(), b.double()),
            flops=2 * count * m * n * k,
        )
    As = [randn(torch, s.dtype, m, k) for _ in range(count)]
    Bs = [randn(torch, s.dtype, k, n) for _ in range(count)]
    return Bench(
        lambda fo: lambda: Joined(fo.group_gemm(As, Bs)),
        lambda tg: lambda: Joined(tg.group_gemm(As, Bs)),
        lambda: Joined([torch.matmul(a, b) for a, b in zip(As, Bs, strict=True)]),
        lambda: Joined([a.double() @ b.double() for a, b in zip(As, Bs, strict=True)]).double(),
        flops=2 * count * m * n * k,
    )


def _elementwise(torch: Any, s: Spec) -> Bench:
    fn = torch.nn.functional
    if s.op in ("relu", "gelu"):
        x = randn(torch, s.dtype, *s.shape)
        nbytes = 2 * x.numel() * x.element_size()
        if s.op == "relu":
            return Bench(
                lambda fo: lambda: fo.relu(x),
                lambda tg: lambda: tg.activation.relu(x),
                lambda: fn.relu(x),
                lambda: fn.relu(x.double()),
                bytes=nbytes,
            )
        v = s.variant
        return Bench(
            lambda fo: lambda: fo.gelu(x, approximate=v),
            lambda tg: lambda: tg.activation.gelu(x, approximate=v),
            lambda: fn.gelu(x, approximate=v),
            lambda: fn.gelu(x.double(), approximate=v),
            bytes=nbytes,
        )
    if s.op == "swiglu":
        a, b = randn(torch, s.dtype, *s.shape), randn(torch, s.dtype, *s.shape)

        def tilegym(tg: Any) -> Callable[[], Any]:
            swiglu = tg.get_swiglu()
            return lambda: swiglu(a, b)

        return Bench(
            lambda fo: lambda: fo.swiglu(a, b),
            tilegym,
            lambda: fn.silu(a) * b,
            lambda: fn.silu(a.double()) * b.double(),
            bytes=3 * a.numel() * a.element_size(),
            tilegym_note="tilegym.ops.get_swiglu(), cutile backend",
        )
    if s.op == "dropout":
        x = randn(torch, s.dtype, *s.shape)
        return Bench(
            lambda fo: lambda: DropoutStats(fo.dropout(x, P_DROP, True, seed=SEED), x, P_DROP),
            lambda tg: lambda: DropoutStats(tg.dropout(x, SEED, P_DROP, True, False), x, P_DROP),
            lambda: DropoutStats(fn.dropout(x, P_DROP, True), x, P_DROP),
            lambda: torch.ones(2, dtype=torch.float64, device=x.device),
            bytes=2 * x.numel() * x.element_size(),
        )
    # the gated forms: x (..., 2d)
    x = randn(torch, s.dtype, *s.shape)
    d = s.shape[-1] // 2
    nbytes = (x.numel() + x.numel() // 2) * x.element_size()
    if s.op == "silu_and_mul":
        return Bench(
            lambda fo: lambda: fo.silu_and_mul(x),
            lambda tg: lambda: tg.silu_and_mul(x),
            lambda: fn.silu(x[..., :d]) * x[..., d:],
            lambda: fn.silu(x[..., :d].double()) * x[..., d:].double(),
            bytes=nbytes,
        )
    v = s.variant

    return Bench(
        lambda fo: lambda: fo.geglu(x, approximate=v),
        lambda tg: lambda: tg.activation.geglu(x, dim=-1, approximate=v),
        lambda: x[..., :d] * fn.gelu(x[..., d:], approximate=v),
        lambda: x[..., :d].double() * fn.gelu(x[..., d:].double(), approximate=v),
        bytes=nbytes,
        tilegym_note="tilegym.ops.activation.geglu, cutile",
    )


def _layout(torch: Any, s: Spec) -> Bench:
    if s.op == "transpose":
        x = randn(torch, s.dtype, *s.shape)
        return Bench(
            lambda fo: lambda: fo.transpose(x),
            lambda tg: lambda: tg.transpose(x),
            lambda: x.t().contiguous(),
            lambda: x.double().t(),
            bytes=2 * x.numel() * x.element_size(),
        )
    batch, _, seq, dim = s.shape
    q, k = randn(torch, s.dtype, *s.shape), randn(torch, s.dtype, *s.shape)
    tdt = q.dtype
    cos_np, sin_np = rotary_tables(seq, dim)
    cos = torch.from_numpy(cos_np[None]).to(base.DEVICE).to(tdt)
    sin = torch.from_numpy(sin_np[None]).to(base.DEVICE).to(tdt)

    def eager(q: Any, k: Any, cos: Any, sin: Any) -> Joined:
        c, sn, h = cos.unsqueeze(1), sin.unsqueeze(1), dim // 2
        return Joined([t * c + torch.cat([-t[..., h:], t[..., :h]], dim=-1) * sn for t in (q, k)])

    def tilegym(tg: Any) -> Callable[[], Any]:
        qw, kw = q.clone(), k.clone()  # rotated in place, once per run
        return lambda: Joined(tg.apply_rope_base(qw, kw, cos, sin))

    return Bench(
        lambda fo: lambda: Joined(fo.rope(q, k, cos, sin)),
        tilegym,
        lambda: eager(q, k, cos, sin),
        lambda: eager(q.double(), k.double(), cos.double(), sin.double()).double(),
        bytes=(4 * q.numel() + 2 * batch * seq * dim) * q.element_size(),
        tilegym_note="tilegym.ops.apply_rope_base (in place, on its own copies), cutile",
    )


def _sdpa_f64(torch: Any, q: Any, k: Any, v: Any, causal: bool, heads: int = 8) -> Any:
    """torch's SDPA in float64, `heads` (batch, head) pairs at a time: its math kernel keeps
    the scores, (B, H, L, S) float64, 69 GB at 4 x 32 x 8192^2 (the H200 ran out of memory)."""
    b, h, n, d = q.shape
    flat = [t.reshape(b * h, n, d) for t in (q, k, v)]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    parts = [
        sdpa(*(t[i : i + heads].double() for t in flat), is_causal=causal)
        for i in range(0, b * h, heads)
    ]
    return torch.cat(parts).reshape(b, h, n, d)


def _attention(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if s.variant == "decode":
        q = randn(torch, s.dtype, b, h, 1, d)
        k, v = (randn(torch, s.dtype, b, h, n, d) for _ in range(2))
        return Bench(
            lambda fo: lambda: fo.scaled_dot_product_attention(q, k, v),
            lambda tg: lambda: tg.fmha_decode(q, k, v, None),
            lambda: sdpa(q, k, v),
            lambda: sdpa(q.double(), k.double(), v.double()),
            bytes=(2 * k.numel() + 2 * q.numel()) * q.element_size(),
            tilegym_note="tilegym.ops.fmha_decode (split-KV), cutile backend",
        )
    q, k, v = (randn(torch, s.dtype, b, h, n, d) for _ in range(3))
    causal = s.variant == "causal"
    return Bench(
        lambda fo: lambda: fo.scaled_dot_product_attention(q, k, v, is_causal=causal),
        lambda tg: lambda: tg.fmha(q, k, v, scaling=None, is_causal=causal),
        lambda: sdpa(q, k, v, is_causal=causal),
        lambda: _sdpa_f64(torch, q, k, v, causal),
        flops=4 * b * h * n * n * d // (2 if causal else 1),
        tilegym_note="tilegym.ops.fmha (prefill), cutile backend",
    )


BUILDERS: dict[str, Callable[[Any, Spec], Bench]] = {
    "attention": _attention,
    "softmax": _rows,
    "rms_norm": _rows,
    "layer_norm": _rows,
    "matmul": _gemm,
    "bmm": _gemm,
    "group_gemm": _gemm,
    "relu": _elementwise,
    "gelu": _elementwise,
    "silu_and_mul": _elementwise,
    "swiglu": _elementwise,
    "geglu": _elementwise,
    "dropout": _elementwise,
    "rope": _layout,
    "transpose": _layout,
    **ATTENTION_BUILDERS,  # family_ops_attention.py: TileGym's other attention grids
    **MORE_BUILDERS,
    **SSM_BUILDERS,  # family_ops_ssm.py: Mamba-2's chunked scan
}


# ------------------------------------------------------------------------------- dry run


# ------------------------------------------------------------------------------- summary


def op_table(results_json: str) -> str:
    """A Markdown table of a run's ops records (its results.json): per op, how many cases have
    fearless and the peer both measured and the geometric mean of peer time / fearless time
    (above 1: fearless faster) against TileGym, torch and the best peer; then all ops."""
    import json

    from .report import geomean

    times: dict[str, dict[str, float]] = {}
    ops: dict[str, str] = {}
    for r in json.loads(Path(results_json).read_text())["records"]:
        if r["family"] == FAMILY and r["status"] == "ok" and r["time"]:
            times.setdefault(r["case"], {})[r["impl"]] = r["time"]
            ops[r["case"]] = r["params"]["op"]
    rows = ["| op | vs TileGym (n) | vs torch (n) | vs best peer (n) |", "|---|---|---|---|"]
    for op in [*dict.fromkeys(s.op for s in specs()), None]:
        cells = []
        for peers in ((TILEGYM,), (TORCH,), (TILEGYM, TORCH)):
            ratios = [
                min(t[p] for p in peers if p in t) / t[FEARLESS_TILE]
                for case, t in times.items()
                if (op is None or ops[case] == op)
                and FEARLESS_TILE in t
                and any(p in t for p in peers)
            ]
            gm = geomean(ratios)
            cells.append(f"{gm:.3f} ({len(ratios)})" if gm is not None else "- (0)")
        rows.append(f"| {op or '**all**'} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
