"""The ops family's non-attention operators beyond TileGym's core benchmarks: fused losses,
MoE, fp8 block GEMM, the fused GLU MLP, mHC, the gated delta rule, split-K merges, the
persistent layer norm, and the backward passes of rms_norm, silu_and_mul and swiglu.

Each case runs `fearless.ops` against the TileGym 1.5.1 operator of the same name (cutile
backend, `tilegym.ops.<name>` through its dispatcher) and torch eager, checked as the rest of
the family (family_ops.py) against a float64 torch reference. Grids (NVIDIA/TileGym's
tests/benchmark at 75a1430, file by file; where TileGym has no benchmark, its
tests/ops/test_<op>.py or a real model's sizes, as said):

- rms_norm_backward: M = 4096, N = 1024 ... 16384, bf16, f16 and f32
  (experimental/bench_rmsnorm_backward.py: standalone, no autograd). fearless's
  `ops.backward_rows.rms_norm_backward(dy, x, w, eps)` against TileGym's
  `tilegym.ops.cutile.rms_norm.rms_norm_backward(x, dy, w, rstd)` (rstd precomputed, f32,
  outside the timing, as the benchmark does) and torch autograd; checked on (dx, dw) joined;
- silu_and_mul_backward: M = 1024 ... 16384 rows of 2 x hidden, hidden 2048, 4096, 11008,
  f32 and bf16 (experimental/bench_silu_and_mul_backward.py, its "backward" mode): each impl's
  forward under torch autograd, the timed call `torch.autograd.grad(y, x, dy,
  retain_graph=True)` (the benchmark times `y.backward(dy, retain_graph=True)`);
- swiglu_backward: M = 1024 ... 16384, hidden 2048 and 4096, f32 and bf16
  (experimental/bench_swiglu_backward.py), as silu_and_mul_backward with (da, db) joined;
  TileGym's is `tilegym.ops.get_swiglu()`;
- fused_linear_cross_entropy: BT = 512 ... 16384, H = 1024, V = 32768, bf16 and f16, mean
  reduction (experimental/bench_fused_linear_cross_entropy.py; TileGym called with the
  benchmark's chunk_size=512, fearless with its default chunking);
- mhc_gemm_rms_scale (M 8192, K 4 x 7168, N 24, n 4; x bf16, w and bias f32, alphas 0.8, 1.1,
  0.9), mhc_sinkhorn (y (8192, 24), n 4, bf16) and mhc_apply_residual (M 8192, C 7168, n 4,
  all bf16): experimental/bench_mhc.py's one shape each. Sinkhorn is in place: each impl
  works on its own copy, refilled from y at every call (the copy is in every impl's time);
- w8a8_block_fp8_matmul: M = 1024, N = 2048, K = 256 ... 2048, blocks [128, 128], f32 out,
  A and B normals * 0.1 in e4m3, scales U[0.1, 1.1) (suites/unsloth/bench_fp8.py; the family
  calls `tilegym.ops.w8a8_block_fp8_matmul`, the benchmark the unsloth suite's twin). Torch
  eager: dequantise, then an f32 matmul;
- nvfp4_quantize: no TileGym benchmark; bf16 x of 4096 x 4096, 8192 x 8192, 16384 x 7168
  (family_ops_nvfp4.py: its cases, builder and torch eager twin; TileGym's kernel needs
  sm_100 and Tile IR bytecode 13.3, a skip on the H100 / H200);
- linear_gluact_linear: Llama-7B's MLP (H 4096, I 11008), batch 1 and 4, seq 128 ... 2048,
  bf16, silu (experimental/bench_fused_swiglu_mlp.py's forward mode: its
  PartiallyFusedSwiGLUMLP is TileGym's linear_gluact_linear);
- fused_moe: no TileGym benchmark (suites/unsloth/bench_grouped_gemm.py times one grouped
  GEMM, not the MoE): Mixtral-8x7B's experts (H 4096, I 14336, 8 experts, top 2) and
  Qwen3-30B-A3B's (H 2048, I 768, 128 experts, top 8) at 64, 512 and 4096 tokens, bf16,
  routing from softmax over random logits. Torch eager: the per-expert loop (Hugging Face's
  MixtralSparseMoeBlock). moe_align_block_size runs inside every fused_moe call;
- moe_actgrad_bwd: no TileGym benchmark; the same two models' experts (Qwen3-30B-A3B, then
  Mixtral) at 512 and 4096 tokens, swiglu, bf16 (scores f32). Routing from softmax over random
  logits, then as tests/gpu/test_ops_moe_actgrad_gpu.py's `_args`: slots sorted by expert
  (x_gather_idx = slot // K, s_scatter_idx = slot, int32), the offsets the counts' prefix sum,
  max_tokens_per_expert given (as a caller that routed knows it). Every impl writes its own dh,
  a_prime (NaN until written) and ds; ds is zeroed inside the timed call (a memset of TK floats
  in every impl's time: the operator adds into it). Checked on (dh, a_prime, ds) joined against
  `actgrad_torch` in float64 (tests/support/moe_actgrad_ref.py's rows, in torch). Torch eager:
  the same per-expert loop (matmul in bf16, the activation in f32);
- splitk_reduce: no benchmark; TileGym's tests/ops/test_splitk_reduce.py perf shapes: B 2,
  H 32, D 512, 16 and 64 splits, f16 and bf16, lse normals * 2 + 5;
- persistent_layer_norm: bench_layernorm.py's persistent grid, M = 30000, N = 256, 1024,
  4096, 16384, bf16, eps 1e-6 (the layer_norm cases call fearless's layer_norm there);
- fused_add_rms_norm (Liger's and vLLM's; TileGym has none, a skip): a decoder layer's
  residual add and norm at Llama-3-8B's hidden 4096, M = 1 (decode), 64, 4096 and 16384
  tokens, bf16; torch eager is the add then rms_norm; checked on (y, s) joined;
- chunk_gated_delta_rule: no benchmark; Qwen3-Next's linear attention (32 heads, K = V = 128;
  q and k per value head), B 1, T 1024 and 4096, bf16, chunk 64, inputs scaled as
  tests/ops/test_chunk_gated_delta_rule.py. Torch eager: Hugging Face's
  torch_chunk_gated_delta_rule form; reference: the float64 recurrence;
- recurrent_gated_delta_rule: a decode step (T 1) of the same heads at batch 1, 16 and 64,
  with an initial state and the final state returned (checked on (out, state) joined).

Mamba-2's chunked scan (mamba2_chunk_forward / _backward) is in family_ops_ssm.py. Not in the
family: moe_align_block_size, which runs inside every fused_moe call (`EXCLUDED` in
tests/test_bench_ops.py).

Cost (estimate, H200): `--quick` takes each group's first and last shape: 41 cases, each
a few tunings on fearless's first call (about 1 to 5 s for the GEMM-shaped ones) plus a few
seconds of timing and the float64 reference; the largest are Mixtral fused_moe at 4096
tokens (float64 reference about 3 TFLOP, well under a second on an H200) and the linear
cross entropy at BT 16384. About 2 to 3 minutes together.

The dry run (`more_dry_body`) runs the same builders on CPU torch tensors at DRY_SHAPES,
fearless on the simulator, against the same float64 reference.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from . import family_ops_base as base
from .family_ops_base import (
    EPS_LN,
    EPS_RMS,
    POW2_N,
    Bench,
    Joined,
    Spec,
    builder_dry_body,
    randn,
)
from .family_ops_nvfp4 import DRY_SHAPE as NVFP4_DRY_SHAPE
from .family_ops_nvfp4 import OP as NVFP4
from .family_ops_nvfp4 import nvfp4_bench, nvfp4_specs
from .model import Skip

MHC_ALPHAS = (0.8, 1.1, 0.9)
MIXTRAL = (4096, 14336, 8, 2)  # hidden, intermediate, experts, top_k
QWEN3_MOE = (2048, 768, 128, 8)
DELTA_HEADS, DELTA_DIM = 32, 128


def more_specs() -> list[Spec]:
    """This module's cases, in run order (see the module doc for the grids)."""
    out: list[Spec] = []
    for dt in ("bf16", "f16", "f32"):
        out += [Spec("rms_norm_backward", dt, (4096, n)) for n in POW2_N]
    for dt in ("f32", "bf16"):
        for hidden in (2048, 4096, 11008):
            out += [Spec("silu_and_mul_backward", dt, (m, 2 * hidden)) for m in POW2_N]
    for dt in ("f32", "bf16"):
        for hidden in (2048, 4096):
            out += [Spec("swiglu_backward", dt, (m, hidden)) for m in POW2_N]
    out += [Spec("persistent_layer_norm", "bf16", (30000, n)) for n in (256, 1024, 4096, 16384)]
    out += [Spec("fused_add_rms_norm", "bf16", (m, 4096)) for m in (1, 64, 4096, 16384)]
    for dt in ("f16", "bf16"):
        out += [Spec("splitk_reduce", dt, (2, 32, s, 512)) for s in (16, 64)]
    out += [
        Spec("mhc_gemm_rms_scale", "bf16", (8192, 4 * 7168, 4)),
        Spec("mhc_sinkhorn", "bf16", (8192, 4)),
        Spec("mhc_apply_residual", "bf16", (8192, 7168, 4)),
    ]
    out += [
        Spec("w8a8_block_fp8_matmul", "f8e4m3fn", (1024, 2048, k)) for k in (256, 512, 1024, 2048)
    ]
    out += nvfp4_specs()
    for dt in ("bf16", "f16"):
        out += [
            Spec("fused_linear_cross_entropy", dt, (bt, 1024, 32768))
            for bt in (512, 1024, 2048, 4096, 8192, 16384)
        ]
    for batch in (1, 4):
        out += [
            Spec("linear_gluact_linear", "bf16", (batch, s, 4096, 11008))
            for s in (128, 256, 512, 1024, 2048)
        ]
    for model in (MIXTRAL, QWEN3_MOE):
        out += [Spec("fused_moe", "bf16", (t, *model)) for t in (64, 512, 4096)]
    for model in (QWEN3_MOE, MIXTRAL):
        out += [Spec("moe_actgrad_bwd", "bf16", (t, *model)) for t in (512, 4096)]
    out += [
        Spec("recurrent_gated_delta_rule", "bf16", (b, 1, DELTA_HEADS, DELTA_DIM))
        for b in (1, 16, 64)
    ]
    out += [
        Spec("chunk_gated_delta_rule", "bf16", (1, t, DELTA_HEADS, DELTA_DIM)) for t in (1024, 4096)
    ]
    return out


# Small shapes (in more_specs' terms) for the dry run and the CPU tests: ragged where the
# operator allows it.
MORE_DRY_SHAPES: dict[str, tuple[int, ...]] = {
    "rms_norm_backward": (6, 37),
    "silu_and_mul_backward": (5, 96),
    "swiglu_backward": (5, 37),
    "persistent_layer_norm": (5, 37),
    "fused_add_rms_norm": (5, 37),
    "splitk_reduce": (1, 2, 3, 64),
    "mhc_gemm_rms_scale": (9, 40, 2),
    "mhc_sinkhorn": (9, 2),
    "mhc_apply_residual": (9, 24, 2),
    "w8a8_block_fp8_matmul": (5, 128, 256),
    NVFP4: NVFP4_DRY_SHAPE,
    "fused_linear_cross_entropy": (7, 32, 50),
    "linear_gluact_linear": (1, 5, 32, 48),
    "fused_moe": (6, 32, 16, 4, 2),
    "moe_actgrad_bwd": (9, 40, 24, 5, 2),
    "recurrent_gated_delta_rule": (2, 1, 2, 16),
    "chunk_gated_delta_rule": (1, 20, 2, 16),
}


# ------------------------------------------------------------------------------ builders


def _grads(torch: Any, y: Any, xs: list[Any], dy: Any) -> Any:
    return Joined(torch.autograd.grad(y, xs, dy, retain_graph=True))


def _backward(torch: Any, s: Spec) -> Bench:
    fn = torch.nn.functional
    if s.op == "rms_norm_backward":
        m, n = s.shape
        # bench_rmsnorm_backward's inputs: x uniform in [-2.3, -1.8), w and dy normal
        x = (torch.rand(m, n, device=base.DEVICE) * 0.5 - 2.3).to(randn(torch, s.dtype, 1).dtype)
        w, dy = randn(torch, s.dtype, n), randn(torch, s.dtype, m, n)
        rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS_RMS)  # what TileGym's forward keeps
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        y_eager = fn.rms_norm(xg, (n,), wg, EPS_RMS)

        def fearless(fo: Any) -> Callable[[], Any]:
            from fearless.ops.backward_rows import rms_norm_backward

            return lambda: Joined(rms_norm_backward(dy, x, w, EPS_RMS))

        def rms_reference() -> Any:
            xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
            yd = fn.rms_norm(xd, (n,), wd, EPS_RMS)
            return Joined(torch.autograd.grad(yd, [xd, wd], dy.double())).double()

        item = x.element_size()
        return Bench(
            fearless,
            lambda tg: lambda: Joined(_tilegym_rms_norm_backward(tg)(x, dy, w, rstd)),
            lambda: _grads(torch, y_eager, [xg, wg], dy),
            rms_reference,
            bytes=3 * m * n * item + 2 * n * item + 4 * m,
            tilegym_note="tilegym.ops.cutile.rms_norm.rms_norm_backward (standalone), cutile",
        )
    gated = s.op == "silu_and_mul_backward"
    m, width = s.shape
    if gated:
        x = randn(torch, s.dtype, m, width)
        d = width // 2
        ins = [x]
        dy = randn(torch, s.dtype, m, d)

        def eager(*xs: Any) -> Any:
            return fn.silu(xs[0][..., :d]) * xs[0][..., d:]

        nbytes = (2 * x.numel() + dy.numel()) * x.element_size()
    else:
        ins = [randn(torch, s.dtype, m, width) for _ in range(2)]
        dy = randn(torch, s.dtype, m, width)

        def eager(*xs: Any) -> Any:
            return fn.silu(xs[0]) * xs[1]

        nbytes = 5 * dy.numel() * dy.element_size()

    def graph(call: Callable[..., Any]) -> Callable[[], Any]:
        leaves = [t.clone().requires_grad_() for t in ins]
        y = call(*leaves)
        return lambda: _grads(torch, y, leaves, dy)

    def reference() -> Any:
        leaves = [t.double().requires_grad_() for t in ins]
        return _grads(torch, eager(*leaves), leaves, dy.double()).double()

    if gated:
        fearless = lambda fo: graph(fo.silu_and_mul)  # noqa: E731
        tilegym = lambda tg: graph(tg.silu_and_mul)  # noqa: E731
    else:
        fearless = lambda fo: graph(fo.swiglu)  # noqa: E731
        tilegym = lambda tg: graph(tg.get_swiglu())  # noqa: E731
    return Bench(
        fearless,
        tilegym,
        graph(eager),
        reference,
        bytes=nbytes,
        tilegym_note=("tilegym.ops.silu_and_mul" if gated else "tilegym.ops.get_swiglu()")
        + "'s backward through torch autograd, cutile",
    )


def _add_norm(torch: Any, s: Spec) -> Bench:
    m, n = s.shape
    x, r, w = (randn(torch, s.dtype, *sh) for sh in ((m, n), (m, n), (n,)))
    fn = torch.nn.functional

    def eager(x: Any, r: Any, w: Any) -> Joined:
        t = x + r
        return Joined([fn.rms_norm(t, (n,), w, EPS_RMS), t])

    def tilegym(tg: Any) -> Callable[[], Any]:
        raise Skip("TileGym has no fused add + rms_norm (Liger's and vLLM's operator)")

    return Bench(
        lambda fo: lambda: Joined(fo.fused_add_rms_norm(x, r, w, EPS_RMS)),
        tilegym,
        lambda: eager(x, r, w),
        lambda: eager(x.double(), r.double(), w.double()).double(),
        bytes=4 * m * n * x.element_size() + n * x.element_size(),
    )


def _rows_more(torch: Any, s: Spec) -> Bench:
    fn = torch.nn.functional
    if s.op == "persistent_layer_norm":
        m, n = s.shape
        x, w, b = (randn(torch, s.dtype, *sh) for sh in ((m, n), (n,), (n,)))
        return Bench(
            lambda fo: lambda: fo.persistent_layer_norm(x, (n,), w, b, EPS_LN)[0],
            lambda tg: lambda: tg.persistent_layer_norm(x, (n,), w, b, EPS_LN)[0],
            lambda: fn.layer_norm(x, (n,), w, b, EPS_LN),
            lambda: fn.layer_norm(x.double(), (n,), w.double(), b.double(), EPS_LN),
            bytes=2 * m * n * x.element_size() + 2 * n * x.element_size(),
        )
    # splitk_reduce: o (B, H, S, D), lse (B, H, S) base-2, out (B, H, D) written in place
    bsz, h, splits, d = s.shape
    o = randn(torch, s.dtype, bsz, h, splits, d)
    lse = torch.randn(bsz, h, splits, device=base.DEVICE) * 2.0 + 5.0

    def eager(o: Any, lse: Any) -> Any:
        w = torch.exp2(lse - lse.amax(-1, keepdim=True))
        return (o * w.unsqueeze(-1)).sum(2) / w.sum(-1, keepdim=True)

    def into(call: Callable[..., Any]) -> Callable[[], Any]:
        out = torch.empty(bsz, h, d, device=o.device, dtype=o.dtype)
        return lambda: call(o, lse, out, splits * 128)

    return Bench(
        lambda fo: into(fo.splitk_reduce),
        lambda tg: into(tg.splitk_reduce),
        lambda: eager(o.float(), lse).to(o.dtype),
        lambda: eager(o.double(), lse.double()),
        bytes=(o.numel() + bsz * h * d) * o.element_size() + lse.numel() * 4,
    )


def _mhc(torch: Any, s: Spec) -> Bench:
    if s.op == "mhc_gemm_rms_scale":
        m, k, n = s.shape
        nn = n * n + 2 * n
        x = randn(torch, "bf16", m, k)
        w, bias = torch.randn(k, nn, device=base.DEVICE), torch.randn(nn, device=base.DEVICE)

        def gemm_eager(x: Any, w: Any, bias: Any) -> Joined:
            rms = torch.sqrt(x.pow(2).mean(dim=1, keepdim=True))
            scale = torch.tensor(
                [MHC_ALPHAS[0]] * n + [MHC_ALPHAS[1]] * n + [MHC_ALPHAS[2]] * n * n
            )
            lin = (x @ w) * scale.to(x.device, x.dtype) / rms + bias
            out = torch.cat(
                [torch.sigmoid(lin[:, :n]), 2 * torch.sigmoid(lin[:, n : 2 * n]), lin[:, 2 * n :]],
                dim=1,
            )
            return Joined([out, rms])

        return Bench(
            lambda fo: lambda: Joined(fo.mhc_gemm_rms_scale(x, w, n, *MHC_ALPHAS, bias)),
            lambda tg: lambda: Joined(tg.mhc_gemm_rms_scale(x, w, n, *MHC_ALPHAS, bias)),
            lambda: gemm_eager(x.float(), w, bias),
            lambda: gemm_eager(x.double(), w.double(), bias.double()).double(),
            bytes=m * k * 2 + k * nn * 4 + nn * 4 + m * nn * 4 + m * 4,
        )
    if s.op == "mhc_sinkhorn":
        m, n = s.shape
        y = randn(torch, s.dtype, m, n * n + 2 * n)

        def sinkhorn(y: Any) -> Any:
            mat = torch.exp(y[:, 2 * n :].float().reshape(-1, n, n))
            for _ in range(20):
                mat = mat / mat.sum(dim=2, keepdim=True)
                mat = mat / mat.sum(dim=1, keepdim=True)
            y[:, 2 * n :] = mat.reshape(-1, n * n).to(y.dtype)
            return y

        def own(call: Callable[[Any], Any]) -> Callable[[], Any]:
            work = y.clone()  # in place: refilled from y at every call
            return lambda: call(work.copy_(y))

        return Bench(
            lambda fo: own(lambda t: fo.mhc_sinkhorn(t, n)),
            lambda tg: own(lambda t: tg.mhc_sinkhorn(t, n)),
            own(sinkhorn),
            lambda: sinkhorn(y.double()),
            bytes=2 * 2 * y.numel() * y.element_size(),  # the refill, then sinkhorn's pass
        )
    m, c, n = s.shape
    x, f = randn(torch, s.dtype, m, n * c), randn(torch, s.dtype, m, c)
    y = randn(torch, s.dtype, m, n * n + 2 * n)

    def residual(x: Any, f: Any, y: Any) -> Any:
        h_res = y[:, 2 * n :].reshape(m, n, n)
        return (h_res @ x.reshape(m, n, c) + y[:, n : 2 * n, None] * f[:, None]).reshape(m, n * c)

    return Bench(
        lambda fo: lambda: fo.mhc_apply_residual(x, f, y, n),
        lambda tg: lambda: tg.mhc_apply_residual(x, f, y, n),
        lambda: residual(x.float(), f.float(), y.float()).to(x.dtype),
        lambda: residual(x.double(), f.double(), y.double()),
        bytes=(2 * x.numel() + f.numel() + y.numel()) * x.element_size(),
    )


def _gemm_more(torch: Any, s: Spec) -> Bench:
    fn = torch.nn.functional
    if s.op == "w8a8_block_fp8_matmul":
        m, n, k = s.shape
        blk = 128
        a = (torch.randn(m, k, device=base.DEVICE) * 0.1).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device=base.DEVICE) * 0.1).to(torch.float8_e4m3fn)
        sa = torch.rand(m, -(-k // blk), device=base.DEVICE) + 0.1
        sb = torch.rand(-(-n // blk), -(-k // blk), device=base.DEVICE) + 0.1

        def dequant_mm(dt: Any) -> Any:
            aa = a.to(dt) * sa.to(dt).repeat_interleave(blk, 1)[:, :k]
            sbb = sb.to(dt).repeat_interleave(blk, 0).repeat_interleave(blk, 1)[:n, :k]
            return aa @ (b.to(dt) * sbb).T

        return Bench(
            lambda fo: lambda: fo.w8a8_block_fp8_matmul(a, b, sa, sb, [blk, blk]),
            lambda tg: lambda: tg.w8a8_block_fp8_matmul(a, b, sa, sb, block_size=[blk, blk]),
            lambda: dequant_mm(torch.float32),
            lambda: dequant_mm(torch.float64),
            flops=2 * m * n * k,
            tilegym_note="tilegym.ops.w8a8_block_fp8_matmul(block_size=[128, 128]), cutile",
        )
    if s.op == "fused_linear_cross_entropy":
        bt, hid, vocab = s.shape
        x, w = randn(torch, s.dtype, bt, hid), randn(torch, s.dtype, vocab, hid)
        t = torch.randint(0, vocab, (bt,), device=base.DEVICE)
        return Bench(
            lambda fo: lambda: fo.fused_linear_cross_entropy(x, w, t),
            lambda tg: (
                lambda: tg.fused_linear_cross_entropy(
                    x, w, t, ignore_index=-100, chunk_size=512, reduction="mean"
                )
            ),
            lambda: fn.cross_entropy(fn.linear(x, w), t),
            lambda: fn.cross_entropy(fn.linear(x.double(), w.double()), t).reshape(1),
            flops=2 * bt * hid * vocab,
            tilegym_note="tilegym.ops.fused_linear_cross_entropy(chunk_size=512), cutile",
        )
    # linear_gluact_linear: x (B, S, H), w_act and w_noact (I, H), w2 (H, I)
    bsz, seq, hid, inter = s.shape
    x = randn(torch, s.dtype, bsz, seq, hid)
    wa, wn = (randn(torch, s.dtype, inter, hid) * hid**-0.5 for _ in range(2))
    w2 = randn(torch, s.dtype, hid, inter) * inter**-0.5

    def mlp(x: Any, wa: Any, wn: Any, w2: Any) -> Any:
        return fn.linear(fn.silu(fn.linear(x, wa)) * fn.linear(x, wn), w2)

    return Bench(
        lambda fo: lambda: fo.linear_gluact_linear(x, wa, wn, w2, act_type="silu"),
        lambda tg: lambda: tg.linear_gluact_linear(x, wa, wn, w2, act_type="silu"),
        lambda: mlp(x, wa, wn, w2),
        lambda: mlp(x.double(), wa.double(), wn.double(), w2.double()),
        flops=2 * bsz * seq * 3 * hid * inter,
    )


def _moe(torch: Any, s: Spec) -> Bench:
    tokens, hid, inter, experts, topk = s.shape
    x = randn(torch, s.dtype, tokens, hid) * 0.5
    w1 = randn(torch, s.dtype, experts, 2 * inter, hid) * hid**-0.5
    w2 = randn(torch, s.dtype, experts, hid, inter) * inter**-0.5
    probs = torch.softmax(torch.randn(tokens, experts, device=base.DEVICE), dim=-1)
    weights, ids = torch.topk(probs, topk, dim=-1)
    weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)

    def eager(x: Any, w1: Any, w2: Any, weights: Any) -> Any:
        """Hugging Face's MixtralSparseMoeBlock loop: each expert over its tokens."""
        out = torch.zeros_like(x)
        for e in range(experts):
            rows, slot = torch.where(ids == e)
            if rows.numel() == 0:
                continue
            h = x[rows] @ w1[e].T
            act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
            out.index_add_(0, rows, (act @ w2[e].T) * weights[rows, slot, None])
        return out

    return Bench(
        lambda fo: lambda: fo.fused_moe(x, w1, w2, weights, ids),
        lambda tg: lambda: tg.fused_moe(x, w1, w2, weights, ids),
        lambda: eager(x, w1, w2, weights),
        lambda: eager(x.double(), w1.double(), w2.double(), weights.double()),
        flops=2 * tokens * topk * 3 * hid * inter,
        tilegym_note="tilegym.ops.fused_moe (moe_interface), cutile",
    )


def actgrad_torch(
    dout: Any,
    h: Any,
    w2: Any,
    scores: Any,
    offsets: list[int],
    gather: Any,
    scatter: Any,
    out: tuple[Any, Any, Any],
) -> None:
    """moe_actgrad_bwd (swiglu) expert by expert, in float64 where the inputs are, else f32
    after a matmul in the inputs' dtype: writes dh and a_prime of `out` = (dh, a_prime, ds) and
    adds into ds (tests/support/moe_actgrad_ref.py's rows, in torch)."""
    import torch

    dh, a_prime, ds = out
    f64 = h.dtype == torch.float64
    inter = w2.shape[1]
    for e in range(len(offsets) - 1):
        lo, hi = offsets[e], offsets[e + 1]
        if lo == hi:
            continue
        dy = dout[gather[lo:hi]] @ w2[e].T
        gate, up = (v if f64 else v.float() for v in (h[lo:hi, :inter], h[lo:hi, inter:]))
        dy = dy if f64 else dy.float()
        s = scores[scatter[lo:hi], None]
        sig = torch.sigmoid(gate)
        act = gate * sig
        dh[lo:hi, :inter] = dy * up * sig * (1 + gate * (1 - sig)) * s
        dh[lo:hi, inter:] = dy * act * s
        a_prime[lo:hi] = act * up * s
        ds[lo:hi] += (dy * act * up).sum(1)


def _actgrad(torch: Any, s: Spec) -> Bench:
    """Routed as tests/gpu/test_ops_moe_actgrad_gpu.py's `_args` (slots sorted by expert, the
    offsets the counts' prefix sum), from fused_moe's softmax-top-k routing."""
    tokens, hid, inter, experts, topk = s.shape
    tk = tokens * topk
    probs = torch.softmax(torch.randn(tokens, experts, device=base.DEVICE), dim=-1)
    weights, ids = torch.topk(probs, topk, dim=-1)
    scores = (weights / weights.sum(-1, keepdim=True)).reshape(-1)  # f32, flat (T * K)
    slots = torch.argsort(ids.reshape(-1), stable=True)
    counts = torch.bincount(ids.reshape(-1), minlength=experts)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).int()
    gather, scatter = (slots // topk).int(), slots.int()
    most = int(counts.max())  # max_tokens_per_expert, known to the caller (no sync in the call)
    dout = randn(torch, s.dtype, tokens, hid)
    h = randn(torch, s.dtype, tk, 2 * inter)
    w2 = randn(torch, s.dtype, experts, inter, hid) * hid**-0.5
    host_offsets = offsets.tolist()

    def own(call: Callable[..., Any]) -> Callable[[], Joined]:
        """The impl's own outputs (dh and a_prime NaN until written); ds zeroed in the call."""
        dh = torch.full_like(h, float("nan"))
        a_prime = torch.full((tk, inter), float("nan"), dtype=h.dtype, device=h.device)
        ds = torch.zeros(tk, device=h.device)

        def run() -> Joined:
            ds.zero_()
            call(dh, ds, a_prime)
            return Joined((dh, a_prime, ds))

        return run

    def routed(op: Callable[..., Any]) -> Callable[[], Joined]:
        return own(lambda dh, ds, ap: op(dout, h, w2, dh, ds, None, None, ap, scores, offsets,
                                         gather, scatter, "swiglu", max_tokens_per_expert=most))  # fmt: skip

    gather_l, scatter_l = gather.long(), scatter.long()

    def loop(dh: Any, ds: Any, ap: Any) -> None:
        actgrad_torch(dout, h, w2, scores, host_offsets, gather_l, scatter_l, (dh, ap, ds))

    def reference() -> Any:
        out = (torch.zeros_like(h, dtype=torch.float64),
               torch.zeros(tk, inter, dtype=torch.float64, device=h.device),
               torch.zeros(tk, dtype=torch.float64, device=h.device))  # fmt: skip
        actgrad_torch(dout.double(), h.double(), w2.double(), scores.double(), host_offsets,
                      gather_l, scatter_l, out)  # fmt: skip
        return Joined(out).double()

    return Bench(
        lambda fo: routed(fo.moe_actgrad_bwd),
        lambda tg: routed(tg.moe_actgrad_bwd),
        own(loop),
        reference,
        flops=2 * tk * hid * inter,
        tilegym_note="tilegym.ops.moe_actgrad_bwd (swiglu, max_tokens_per_expert given), cutile",
    )


def _delta_inputs(torch: Any, s: Spec) -> tuple[Any, ...]:
    """TileGym's test inputs (tests/ops/test_*_gated_delta_rule.py's scaling)."""
    b, t, h, d = s.shape
    q, k, v = (randn(torch, s.dtype, b, t, h, d) * 0.1 for _ in range(3))
    g = -(randn(torch, s.dtype, b, t, h).abs() * 0.5)
    beta = torch.sigmoid(randn(torch, s.dtype, b, t, h))
    return q, k, v, g, beta


def delta_recurrent_torch(q: Any, k: Any, v: Any, g: Any, beta: Any, s0: Any) -> tuple[Any, Any]:
    """The gated delta rule step by step (Hugging Face's torch_recurrent_gated_delta_rule), in
    the inputs' dtype: (out (B, T, H, V), final state (B, H, K, V))."""
    import torch

    q = q * q.shape[-1] ** -0.5
    b, t, h, _ = k.shape
    state = torch.zeros(b, h, k.shape[-1], v.shape[-1], dtype=q.dtype, device=q.device)
    if s0 is not None:
        state = s0.to(q.dtype).clone()
    outs = []
    for i in range(t):
        state = state * g[:, i].exp()[..., None, None]
        kv = torch.einsum("bhkv,bhk->bhv", state, k[:, i])
        delta = (v[:, i] - kv) * beta[:, i, :, None]
        state = state + k[:, i, :, :, None] * delta[:, :, None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, i]))
    return torch.stack(outs, dim=1), state


def delta_chunk_torch(q: Any, k: Any, v: Any, g: Any, beta: Any, cs: int = 64) -> Any:
    """The chunked WY form (Hugging Face's torch_chunk_gated_delta_rule), in f32: out."""
    import torch

    dt = q.dtype
    q, k, v, g, beta = (x.transpose(1, 2).float() for x in (q, k, v, g, beta))
    q = q * q.shape[-1] ** -0.5
    b, h, t, kd = k.shape
    pad = (-t) % cs
    q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (torch.nn.functional.pad(x, (0, pad)) for x in (g, beta))
    nc = (t + pad) // cs
    q, k, v = (x.reshape(b, h, nc, cs, -1) for x in (q, k, v))
    g, beta = (x.reshape(b, h, nc, cs) for x in (g, beta))
    g = g.cumsum(-1)
    lower = torch.tril(torch.ones(cs, cs, dtype=torch.bool, device=q.device))
    decay = torch.where(lower, (g[..., :, None] - g[..., None, :]).masked_fill(~lower, 0).exp(), 0)
    kb, vb = k * beta[..., None], v * beta[..., None]
    strict = torch.tril(torch.ones(cs, cs, dtype=torch.bool, device=q.device), -1)
    a = torch.where(strict, -(kb @ k.transpose(-1, -2)) * decay, 0)
    for i in range(1, cs):
        row = a[..., i, :i].clone()
        a[..., i, :i] = row + (row[..., :, None] * a[..., :i, :i]).sum(-2)
    a = a + torch.eye(cs, device=q.device)
    u, w = a @ vb, a @ (kb * g.exp()[..., None])
    state = torch.zeros(b, h, kd, v.shape[-1], device=q.device)
    out = torch.zeros_like(v)
    for i in range(nc):
        qi, ki = q[:, :, i], k[:, :, i]
        attn = (qi @ ki.transpose(-1, -2) * decay[:, :, i]).masked_fill(~lower, 0)
        vnew = u[:, :, i] - w[:, :, i] @ state
        out[:, :, i] = (qi * g[:, :, i, :, None].exp()) @ state + attn @ vnew
        gl = g[:, :, i, -1]
        state = (
            state * gl.exp()[..., None, None]
            + (ki * (gl[..., None] - g[:, :, i]).exp()[..., None]).transpose(-1, -2) @ vnew
        )
    out = out.reshape(b, h, -1, v.shape[-1])[:, :, :t]
    return out.transpose(1, 2).to(dt)


def _delta(torch: Any, s: Spec) -> Bench:
    q, k, v, g, beta = _delta_inputs(torch, s)
    b, t, h, d = s.shape
    if s.op == "recurrent_gated_delta_rule":
        s0 = torch.randn(b, h, d, d, device=base.DEVICE) * 0.01
        return Bench(
            lambda fo: lambda: Joined(fo.recurrent_gated_delta_rule(q, k, v, g, beta, s0, True)),
            lambda tg: lambda: Joined(tg.recurrent_gated_delta_rule(q, k, v, g, beta, s0, True)),
            lambda: Joined(
                delta_recurrent_torch(q.float(), k.float(), v.float(), g.float(), beta.float(), s0)
            ),
            lambda: Joined(
                delta_recurrent_torch(
                    q.double(), k.double(), v.double(), g.double(), beta.double(), s0.double()
                )
            ).double(),
            bytes=(4 * q.numel()) * q.element_size() + 2 * s0.numel() * 4,
        )
    return Bench(
        lambda fo: lambda: fo.chunk_gated_delta_rule(q, k, v, g, beta, 64)[0],
        lambda tg: lambda: tg.chunk_gated_delta_rule(q, k, v, g, beta, 64)[0],
        lambda: delta_chunk_torch(q, k, v, g, beta),
        lambda: delta_recurrent_torch(
            q.double(), k.double(), v.double(), g.double(), beta.double(), None
        )[0],
        # per chunk of 64: about 4 (64 x 64 x 128) products, and the state's 3 (128 x 128)
        flops=2 * b * h * t * (4 * 64 * d + 3 * d * d),
    )


MORE_BUILDERS: dict[str, Callable[[Any, Spec], Bench]] = {
    "rms_norm_backward": _backward,
    "silu_and_mul_backward": _backward,
    "swiglu_backward": _backward,
    "persistent_layer_norm": _rows_more,
    "fused_add_rms_norm": _add_norm,
    "splitk_reduce": _rows_more,
    "mhc_gemm_rms_scale": _mhc,
    "mhc_sinkhorn": _mhc,
    "mhc_apply_residual": _mhc,
    "w8a8_block_fp8_matmul": _gemm_more,
    NVFP4: nvfp4_bench,
    "fused_linear_cross_entropy": _gemm_more,
    "linear_gluact_linear": _gemm_more,
    "fused_moe": _moe,
    "moe_actgrad_bwd": _actgrad,
    "recurrent_gated_delta_rule": _delta,
    "chunk_gated_delta_rule": _delta,
}


def more_dry_body(s: Spec) -> Callable[[], float]:
    """The dry run of `s` (at its small shape): the GPU run's builder on CPU torch tensors,
    fearless.ops on the simulator, against the float64 reference (the relative error)."""
    return builder_dry_body(MORE_BUILDERS[s.op], s)


def _tilegym_rms_norm_backward(tg: Any) -> Any:
    """`tilegym.ops.cutile.rms_norm.rms_norm_backward` from TileGym's ops (`tg`): in TileGym 1.5.1
    the attribute `cutile.rms_norm` is the function its package re-exports under the module's
    name, so the module is imported by name."""
    module = tg.cutile.rms_norm
    if not hasattr(module, "rms_norm_backward"):
        module = importlib.import_module(f"{tg.__name__}.cutile.rms_norm")
    return module.rms_norm_backward
