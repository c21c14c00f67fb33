"""The ops family's attention operators beyond prefill and decode SDPA: TileGym's benchmark
grids as `Spec`s, their GPU-run builders and their simulator dry runs.

Each case calls the fearless.ops operator and the TileGym 1.5.1 operator of the same name
(`tilegym.ops`, cutile backend) on the same CUDA tensors, and a torch eager peer; each output
is checked against a float64 torch reference (a few heads at a time: a whole grid's float64
scores do not fit). Grids (NVIDIA/TileGym at 75a1430, file by file):

- attention_backward: training attention, forward then `.backward(dout)` timed as one call,
  the three gradients checked (`Joined`): q, k, v (4, 32, N, D), N = 256 ... 8192, D = 64 and
  128, causal and full, f16 (tests/benchmark/experimental/bench_attention_backward.py, its
  fwd+bwd mode). fearless: `scaled_dot_product_attention` under torch autograd; TileGym:
  `tilegym.ops.cutile.attention.tile_fmha_with_backward` (the bench's call: ops.py has no
  dispatched fmha backward); torch: SDPA (cuDNN or flash on the H200). flops: 2.5 x the
  forward's 4 B H N^2 D (halved when causal), FlashAttention's convention (the bench's
  fwd+bwd multiplier is 3.5: forward 1 + backward 2.5; we count 2.5 x forward, as asked);
- fmha: the head_dim 64 prefill, q, k, v (4, 32, L, 64), L = 1024 ... 8192, causal and full,
  f16. bench_fused_attention.py has only D = 128 (the family's "attention" cases): this is its
  batch, heads and dtype at D = 64 (its L = 16384 left out, as the D = 128 cases leave it);
- swa_attention: (1, 32, S, 128), window min(4096, S), S = 512 ... 16384, f16, causal
  (experimental/bench_swa_attention.py); flops 4 B H S W D as the bench counts them;
- gemma_attention: q (2, 8, N, 256) over k, v (2, 1, N, 256), soft cap 50, causal, N = 512
  ... 8192, bf16 (bench_gemma_attention.py);
- gemma_attention_decode: no TileGym bench: tests/ops/test_gemma_attention_decode.py's
  test_perf shapes, one query over (B, H_kv, S, 128): (1, 16/8, 4096, no window),
  (1, 16/8, 8192, window 4096), (1, 32/8, 16384, no window), soft cap 50, bf16;
- attention_sink, attention_sink_decode: no TileGym bench: the fused-attention grid (batch 4,
  32 heads, L = S = 1024 ... 8192; decode: one query over S = 2048 ... 16384, as the family's
  decode cases) with tests/ops/test_attention_sink.py's sink settings: 8 KV heads of 4 query
  heads (32 heads), head_dim 64, sm_scale 0.125, bf16 sinks per head, no window and a 128-key
  sliding window, start_q 0 (decode: S - 1), bf16;
- fmha_varlen: no TileGym bench or test of its own: a ragged batch of 4 padded to L = 1024
  ... 8192 with q_lens = kv_lens = (L, 3L/4, L/2, L/4), (4, 32, L, 128), causal, bf16; only
  each sequence's rows are checked (padded rows are left to the operator);
- mla: q, k, v (4, 16, L, 128), qpe (4, 16, L, 64), kpe (4, 1, L, 64), causal, L = 1024 ...
  8192, bf16 (bench_mla.py);
- mla_decoding, mla_decoding_split_kv: q (1, 16, D), qpe (1, 16, 64) over kv (1, S, D), kpe
  (1, S, 64), D = 128 and 512, S = 256 ... 16384 and 11043 (sorted), f16
  (bench_mla_decoding.py, which runs the split-KV op: mla_decoding takes the same grid);
- sparse_mla: q (1, 16, 256, 128), qpe (1, 16, 256, 64) over k, v (1, 1, 4096, 128), kpe
  (1, 1, 4096, 64), topk = 64 ... 2048 causal indices (past keys first, future fillers), bf16
  (experimental/bench_sparse_mla.py); its Spec.shape is the indices' (1, 256, 1, topk);
- flash_attn_with_kvcache: no TileGym op (its column is a skip that says so): one query of
  (8, 1, 32, 128) over 8 KV heads, S = 2048 ... 16384 cached keys, contiguous (8, S, 8, 128)
  and paged (pages of 256 keys, a shuffled block_table) at the same S: the issue's goal is
  paged >= 0.95 x contiguous. torch eager: SDPA (GQA), paged after gathering the pages;
- flash_attn_func: no TileGym op (a skip that says so): flash-attn's layout, q (4, L, 32, 128)
  over k, v (4, L, 8, 128), causal, L = 1024 ... 8192, bf16 (the fused-attention grid with
  Llama's 8 KV heads); torch eager: SDPA over (B, H, L, D) views of the same tensors;
- fmha_variant: no TileGym bench: tests/ops/test_attention_variant.py's batch 4, 32 heads,
  head_dim 128, bf16, causal, at S_q = 128 and 2048 over S_kv = 4096, one group per variant
  (plain, window 512, ALiBi, vector bias, varlen, dropout 0.1): family_ops_attention_variant.py
  (its cases, builder and peers' skips).

`--quick` (first and last shape of each group): 58 cases. Estimate on the H200: about 3
minutes, most of it fearless's first (tuning) call per shape and the float64 references of
the 8192-long cases (the timed calls are milliseconds); not yet measured.

The dry run (`dry_body`) runs each group's builder at a small shape (ATTENTION_DRY_SHAPES) on
torch CPU tensors, fearless.ops on the simulator, against the same float64 reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import family_ops_base as base
from .family_ops_attention_variant import DRY_SHAPE as VARIANT_DRY_SHAPE
from .family_ops_attention_variant import OP as VARIANT
from .family_ops_attention_variant import fmha_variant_bench as variant_builder
from .family_ops_attention_variant import variant_small, variant_specs
from .family_ops_base import ATTENTION_SEQ as SEQ
from .family_ops_base import Bench, Joined, Spec, drawn_on, first, randn
from .model import Skip

HEADS_BWD = (4, 32)
SEQ_BWD = tuple(2**i for i in range(8, 14))  # 256 ... 8192
SINK_SCALE = 0.125
PAGE = 256

# The fearless.ops functions each op of this module calls (the family's coverage test).
FEARLESS_CALLS: dict[str, tuple[str, ...]] = {
    "attention_backward": ("scaled_dot_product_attention",),
    "fmha": ("fmha",),
    "swa_attention": ("swa_attention",),
    "gemma_attention": ("gemma_attention",),
    "gemma_attention_decode": ("gemma_attention_decode",),
    "attention_sink": ("attention_sink",),
    "attention_sink_decode": ("attention_sink_decode",),
    "fmha_varlen": ("fmha_varlen",),
    "mla": ("mla",),
    "mla_decoding": ("mla_decoding",),
    "mla_decoding_split_kv": ("mla_decoding_split_kv",),
    "sparse_mla": ("sparse_mla",),
    "flash_attn_with_kvcache": ("flash_attn_with_kvcache",),
    "flash_attn_func": ("flash_attn_func",),
    VARIANT: (VARIANT,),
}


def attention_specs() -> list[Spec]:
    """This module's cases, in run order (see the module doc for each grid)."""
    out: list[Spec] = []
    x: tuple[tuple[str, Any], ...]
    for d in (64, 128):
        for causal in (True, False):
            v = f"{'causal' if causal else 'full'}_hd{d}"
            x = (("is_causal", causal),)
            out += [Spec("attention_backward", "f16", (4, 32, n, d), v, x) for n in SEQ_BWD]
    for causal in (True, False):
        v, x = ("causal" if causal else "full"), (("is_causal", causal),)
        out += [Spec("fmha", "f16", (4, 32, n, 64), v, x) for n in SEQ]
    swa = (512, 1024, 2048, 4096, 8192, 16384)
    out += [Spec("swa_attention", "f16", (1, 32, s, 128), "", _swa(s)) for s in swa]
    gemma = (("kv_heads", 1), ("soft_cap", 50.0), ("is_causal", True))
    out += [Spec("gemma_attention", "bf16", (2, 8, n, 256), "", gemma) for n in (512, 1024, 2048, 4096, 8192)]  # fmt: skip
    for h, s, win in ((16, 4096, 0), (16, 8192, 4096), (32, 16384, 0)):
        x = (("kv_heads", 8), ("window_size", win), ("soft_cap", 50.0))
        out.append(Spec("gemma_attention_decode", "bf16", (1, h, s, 128), "", x))
    for w in (None, 128):
        v, x = ("full" if w is None else f"w{w}"), (("sliding_window", w),)
        out += [Spec("attention_sink", "bf16", (4, n, 8, 4, 64), v, x) for n in SEQ]
    for w in (None, 128):
        v, x = ("full" if w is None else f"w{w}"), (("sliding_window", w),)
        out += [Spec("attention_sink_decode", "bf16", (4, 2 * n, 8, 4, 64), v, x) for n in SEQ]
    out += [
        Spec("fmha_varlen", "bf16", (4, 32, n, 128), "", (("is_causal", True), ("lens", _lens(n))))
        for n in SEQ
    ]
    out += [Spec("mla", "bf16", (4, 16, n, 128), "", (("d_pe", 64),)) for n in SEQ]
    kv = sorted((*(2**i for i in range(8, 15)), 11043))
    for op in ("mla_decoding", "mla_decoding_split_kv"):
        for d in (128, 512):
            out += [Spec(op, "f16", (1, 16, s, d), f"hd{d}", (("d_pe", 64),)) for s in kv]
    sp = (("heads", 16), ("head_dim", 128), ("s_kv", 4096), ("d_pe", 64))  # shape: the indices'
    out += [Spec("sparse_mla", "bf16", (1, 256, 1, k), "", sp) for k in (64, 128, 256, 512, 1024, 2048)]  # fmt: skip
    for paged in (False, True):
        v = "paged" if paged else "contiguous"
        x = (("kv_heads", 8), ("page_block_size", PAGE if paged else 0))
        out += [Spec("flash_attn_with_kvcache", "bf16", (8, 2 * n, 32, 128), v, x) for n in SEQ]
    x = (("kv_heads", 8), ("is_causal", True))
    out += [Spec("flash_attn_func", "bf16", (4, n, 32, 128), "causal", x) for n in SEQ]
    return out + variant_specs()


def _swa(s: int) -> tuple[tuple[str, Any], ...]:
    return (("window_size", min(4096, s)), ("is_causal", True))


def _lens(n: int) -> tuple[int, ...]:
    return (n, 3 * n // 4, n // 2, n // 4)


# Small shapes for the dry run and the CPU tests, in each op's Spec.shape terms.
ATTENTION_DRY_SHAPES: dict[str, tuple[int, ...]] = {
    "attention_backward": (1, 2, 37, 32),
    "fmha": (1, 2, 37, 64),
    "swa_attention": (1, 2, 37, 32),
    "gemma_attention": (1, 2, 37, 32),
    "gemma_attention_decode": (1, 2, 37, 32),
    "attention_sink": (1, 37, 2, 2, 16),
    "attention_sink_decode": (1, 37, 2, 2, 16),
    "fmha_varlen": (4, 2, 24, 16),
    "mla": (1, 2, 37, 32),
    "mla_decoding": (1, 4, 37, 32),
    "mla_decoding_split_kv": (1, 4, 37, 32),
    "sparse_mla": (1, 20, 1, 16),
    "flash_attn_with_kvcache": (2, 64, 4, 32),
    "flash_attn_func": (1, 37, 2, 32),
    VARIANT: VARIANT_DRY_SHAPE,
}


def small(spec: Spec) -> Spec:
    """`spec` at its dry-run shape, its parameters scaled to it (window, lengths, top-k)."""
    if spec.op == VARIANT:
        return variant_small(spec)
    shape = ATTENTION_DRY_SHAPES[spec.op]
    x = dict(spec.extra)
    if x.get("window_size"):
        x["window_size"] = 9
    if x.get("sliding_window"):
        x["sliding_window"] = 9
    if "lens" in x:
        x["lens"] = (24, 17, 9, 3)
    if "kv_heads" in x:
        x["kv_heads"] = min(x["kv_heads"], 2 if spec.op != "gemma_attention_decode" else 1)
    if "d_pe" in x:
        x["d_pe"] = 16
    if "s_kv" in x:
        x["s_kv"], x["heads"], x["head_dim"] = 50, 2, 32
    if x.get("page_block_size"):
        x["page_block_size"] = 16
    return Spec(spec.op, spec.dtype, shape, spec.variant, tuple(x.items()))


# ----------------------------------------------------------------------- shared references


def _eager(
    torch: Any,
    q: Any,
    k: Any,
    v: Any,
    scale: float,
    *,
    causal: bool = False,
    window: int = 0,
    cap: float | None = None,
    sinks: Any = None,
    q_start: int | None = None,
) -> Any:
    """softmax(cap(q k^T * scale) [, sink]) v of q (B, H, L, D) over k (B, H_kv, S, D) and v
    (B, H_kv, S, Dv), query i at position q_start + i (default S - L: bottom-right); causal:
    keys up to it; window W: keys after its position - W. Float32 arithmetic for the low
    precisions (float64 stays float64), a few heads at a time; returns q's dtype."""
    b, h, n, _ = q.shape
    hkv, s = k.shape[1], k.shape[2]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    if hkv != h:
        k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)
    dev = q.device
    pq = torch.arange(n, device=dev)[:, None] + (s - n if q_start is None else q_start)
    pk = torch.arange(s, device=dev)[None, :]
    keep = torch.ones(n, s, dtype=torch.bool, device=dev)
    if causal:
        keep &= pk <= pq
    if window:
        keep &= pk > pq - window
    out = torch.empty(b, h, n, v.shape[-1], dtype=acc, device=dev)
    step = max(1, (1 << 29) // max(1, b * n * s))
    for i in range(0, h, step):
        sc = (q[:, i : i + step].to(acc) @ k[:, i : i + step].to(acc).transpose(-1, -2)) * scale
        if cap is not None:
            sc = torch.tanh(sc / cap) * cap
        sc = sc.masked_fill(~keep, -math.inf)
        if sinks is not None:
            col = sinks[i : i + step].to(acc).view(1, -1, 1, 1).expand(b, -1, n, 1)
            p = torch.softmax(torch.cat([sc, col], dim=-1), dim=-1)[..., :-1]
        else:
            p = torch.softmax(sc, dim=-1)
        out[:, i : i + step] = p @ v[:, i : i + step].to(acc)
    return out.to(q.dtype)


def _f64(*ts: Any) -> list[Any]:
    return [t.double() for t in ts]


# ----------------------------------------------------------------------------- builders


def _backward(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    causal = bool(s.params()["is_causal"])
    q, k, v = (randn(torch, s.dtype, b, h, n, d).requires_grad_() for _ in range(3))
    dout = randn(torch, s.dtype, b, h, n, d)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def train(f: Callable[..., Any]) -> Callable[[], Any]:
        def call() -> Joined:
            q.grad = k.grad = v.grad = None
            f(q, k, v).backward(dout)
            return Joined([q.grad, k.grad, v.grad])

        return call

    def reference() -> Any:
        flat = [t.detach().reshape(b * h, n, d) for t in (q, k, v, dout)]
        grads: list[list[Any]] = [[], [], []]
        step = max(1, (1 << 28) // (n * n))
        for i in range(0, b * h, step):
            qq, kk, vv = (t[i : i + step].double().requires_grad_() for t in flat[:3])
            sdpa(qq, kk, vv, is_causal=causal).backward(flat[3][i : i + step].double())
            for g, t in zip(grads, (qq, kk, vv), strict=True):
                g.append(t.grad)
        return Joined([torch.cat(g) for g in grads]).double()

    def fearless(fo: Any) -> Callable[[], Any]:
        return train(lambda q, k, v: fo.scaled_dot_product_attention(q, k, v, is_causal=causal))

    def tilegym(tg: Any) -> Callable[[], Any]:
        fwd = tg.cutile.attention.tile_fmha_with_backward
        return train(lambda q, k, v: fwd(q, k, v, scaling=1 / math.sqrt(d), is_causal=causal))

    return Bench(
        fearless,
        tilegym,
        train(lambda q, k, v: sdpa(q, k, v, is_causal=causal)),
        reference,
        flops=int(2.5 * 4 * b * h * n * n * d) // (2 if causal else 1),
        tilegym_note="tilegym.ops.cutile.attention.tile_fmha_with_backward (autograd), cutile",
    )


def _prefill(torch: Any, s: Spec) -> Bench:
    """fmha, swa_attention, gemma_attention: q (B, H, L, D) over k, v (B, H_kv, L, D)."""
    b, h, n, d = s.shape
    p = s.params()
    hkv = p.get("kv_heads", h)
    causal, w, cap = bool(p["is_causal"]), int(p.get("window_size", 0)), p.get("soft_cap")
    std = 0.3 if s.op == "swa_attention" else 1.0  # bench_swa_attention's inputs
    q = randn(torch, s.dtype, b, h, n, d, std=std)
    k, v = (randn(torch, s.dtype, b, hkv, n, d, std=std) for _ in range(2))
    scale = 1 / math.sqrt(d)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def ref(q: Any, k: Any, v: Any) -> Any:
        return _eager(torch, q, k, v, scale, causal=causal, window=w, cap=cap)

    if s.op == "fmha":
        fl_call = lambda fo: lambda: fo.fmha(q, k, v, scaling=scale, is_causal=causal)  # noqa: E731
        tg_call = lambda tg: lambda: tg.fmha(q, k, v, scaling=scale, is_causal=causal)  # noqa: E731
        eager = lambda: sdpa(q, k, v, is_causal=causal, scale=scale)  # noqa: E731
        flops = 4 * b * h * n * n * d // (2 if causal else 1)
    elif s.op == "swa_attention":
        pos = torch.arange(n, device=base.DEVICE)
        mask = (pos[None] <= pos[:, None]) & (pos[None] > pos[:, None] - w)
        fl_call = lambda fo: lambda: fo.swa_attention(q, k, v, window_size=w, is_causal=causal)  # noqa: E731
        tg_call = lambda tg: lambda: tg.swa_attention(q, k, v, window_size=w, is_causal=causal)  # noqa: E731
        eager = lambda: sdpa(q, k, v, attn_mask=mask, scale=scale)  # noqa: E731
        flops = 4 * b * h * n * w * d
    else:  # gemma_attention
        kw = {"scaling": scale, "soft_cap": cap, "is_causal": causal}
        fl_call = lambda fo: lambda: fo.gemma_attention(q, k, v, **kw)  # noqa: E731
        tg_call = lambda tg: lambda: tg.gemma_attention(q, k, v, **kw)  # noqa: E731
        eager = lambda: ref(q, k, v)  # noqa: E731
        flops = 4 * b * h * n * n * d // 2
    return Bench(fl_call, tg_call, eager, lambda: ref(*_f64(q, k, v)), flops=flops)


def _gemma_decode(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    p = s.params()
    w, cap, hkv = int(p["window_size"]), p["soft_cap"], p["kv_heads"]
    q = randn(torch, s.dtype, b, h, 1, d)
    k, v = (randn(torch, s.dtype, b, hkv, n, d) for _ in range(2))
    scale = 1 / math.sqrt(d)
    kw = {"scaling": scale, "window_size": w, "soft_cap": cap}

    # TileGym's decode window keeps keys j >= S - 1 - W: W + 1 keys (its test's reference)
    def ref(q: Any, k: Any, v: Any) -> Any:
        return _eager(torch, q, k, v, scale, window=w + 1 if w else 0, cap=cap)

    return Bench(
        lambda fo: lambda: fo.gemma_attention_decode(q, k, v, **kw),
        lambda tg: lambda: tg.gemma_attention_decode(q, k, v, **kw),
        lambda: ref(q, k, v),
        lambda: ref(*_f64(q, k, v)),
        bytes=(2 * k.numel() + 2 * q.numel()) * q.element_size(),
    )


def _sink(torch: Any, s: Spec) -> Bench:
    """attention_sink (query (B, L, H_kv, G, D), L = S) and attention_sink_decode (one query
    over S keys: Spec.shape (B, S, H_kv, G, D))."""
    b, n, hkv, g, d = s.shape
    h, decode = hkv * g, s.op == "attention_sink_decode"
    w = s.params()["sliding_window"]
    q = randn(torch, s.dtype, b, 1 if decode else n, hkv, g, d)
    k, v = (randn(torch, s.dtype, b, n, hkv, d) for _ in range(2))
    sinks = randn(torch, s.dtype, h)
    start = n - 1 if decode else 0
    start_q = torch.tensor([start], dtype=torch.int32, device=base.DEVICE)

    def ref(q: Any, k: Any, v: Any, sinks: Any) -> Any:
        qb = q.permute(0, 2, 3, 1, 4).reshape(b, h, q.shape[1], d)
        kb, vb = k.transpose(1, 2), v.transpose(1, 2)
        o = _eager(torch, qb, kb, vb, SINK_SCALE, causal=True, window=w or 0, sinks=sinks,
                   q_start=start)  # fmt: skip
        return o.permute(0, 2, 1, 3).reshape(b, q.shape[1], h * d)

    args = (q, k, v, sinks, SINK_SCALE, w, start_q)
    if decode:
        keys = min(n, w) if w else n
        size: dict[str, int] = {"bytes": (4 * b * keys * hkv * d + 2 * q.numel()) * 2}
        fl_call = lambda fo: lambda: fo.attention_sink_decode(*args)  # noqa: E731
        tg_call = lambda tg: lambda: tg.attention_sink_decode(*args)  # noqa: E731
    else:
        pairs = n * (n + 1) // 2 if not w else sum(min(i + 1, w) for i in range(n))
        size = {"flops": 4 * b * h * pairs * d}
        fl_call = lambda fo: lambda: fo.attention_sink(*args)  # noqa: E731
        tg_call = lambda tg: lambda: tg.attention_sink(*args)  # noqa: E731
    return Bench(
        fl_call,
        tg_call,
        lambda: ref(q, k, v, sinks),
        lambda: ref(*_f64(q, k, v, sinks)),
        **size,  # type: ignore[arg-type]
    )


def _varlen(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    lens = s.params()["lens"]
    q, k, v = (randn(torch, s.dtype, b, h, n, d) for _ in range(3))
    ql = torch.tensor(lens, dtype=torch.int32, device=base.DEVICE)
    kl = ql.clone()
    scale = 1 / math.sqrt(d)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def rows(o: Any) -> Joined:  # each sequence's own rows (q_lens = kv_lens)
        return Joined([o[i, :, :m] for i, m in enumerate(lens)])

    def ref(*t: Any) -> Any:
        q, k, v = t
        outs = [
            _eager(
                torch,
                q[i : i + 1, :, :m],
                k[i : i + 1, :, :m],
                v[i : i + 1, :, :m],
                scale,
                causal=True,
            )
            for i, m in enumerate(lens)
        ]
        return Joined(outs)

    return Bench(
        lambda fo: lambda: rows(fo.fmha_varlen(q, k, v, scale, True, ql, kl)),
        lambda tg: (
            lambda: rows(
                tg.fmha_varlen(q, k, v, scaling=scale, is_causal=True, q_lens=ql, kv_lens=kl)
            )
        ),
        lambda: Joined(
            [
                sdpa(q[i : i + 1, :, :m], k[i : i + 1, :, :m], v[i : i + 1, :, :m], is_causal=True)
                for i, m in enumerate(lens)
            ]
        ),
        lambda: ref(*_f64(q, k, v)).double(),
        flops=sum(4 * h * m * m * d // 2 for m in lens),
    )


def _mla(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    dpe = s.params()["d_pe"]
    q, k, v = (randn(torch, s.dtype, b, h, n, d, std=0.3) for _ in range(3))
    qpe = randn(torch, s.dtype, b, h, n, dpe, std=0.3)
    kpe = randn(torch, s.dtype, b, 1, n, dpe, std=0.3)
    scale = 1 / math.sqrt(d + dpe)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def cat(q: Any, k: Any, qpe: Any, kpe: Any) -> tuple[Any, Any]:
        return torch.cat([q, qpe], -1), torch.cat([k, kpe.expand(b, h, n, dpe)], -1)

    def ref(q: Any, k: Any, v: Any, qpe: Any, kpe: Any) -> Any:
        return _eager(torch, *cat(q, k, qpe, kpe), v, scale, causal=True)

    return Bench(
        lambda fo: lambda: fo.mla(q, k, v, qpe, kpe, True, scale),
        lambda tg: lambda: tg.mla(q, k, v, qpe, kpe, True, scale),
        lambda: sdpa(*cat(q, k, qpe, kpe), v, is_causal=True, scale=scale),
        lambda: ref(*_f64(q, k, v, qpe, kpe)),
        flops=(4 * b * h * n * n * d + 2 * b * h * n * n * dpe) // 2,
    )


def _mla_decode(torch: Any, s: Spec) -> Bench:
    b, h, n, d = s.shape
    dpe = s.params()["d_pe"]
    q = randn(torch, s.dtype, b, h, d, std=0.2) + 0.3  # bench_mla_decoding's inputs
    qpe = randn(torch, s.dtype, b, h, dpe, std=0.1) + 0.3
    kv = randn(torch, s.dtype, b, n, d, std=0.2) + 0.3
    kpe = randn(torch, s.dtype, b, n, dpe, std=0.1) + 0.3
    scale = 1 / math.sqrt(d + dpe)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def heads_as_queries(q: Any, qpe: Any, kv: Any, kpe: Any) -> tuple[Any, Any, Any]:
        """The heads as the queries of one head over the latent cache."""
        return torch.cat([q, qpe], -1)[:, None], torch.cat([kv, kpe], -1)[:, None], kv[:, None]

    def ref(*t: Any) -> Any:
        return _eager(torch, *heads_as_queries(*t), scale, q_start=0)[:, 0]

    if s.op == "mla_decoding":
        fl_call = lambda fo: lambda: first(fo.mla_decoding(q, qpe, kv, kpe, scale))  # noqa: E731
        tg_call = lambda tg: lambda: first(tg.mla_decoding(q, qpe, kv, kpe, scale))  # noqa: E731
    else:
        fl_call = lambda fo: lambda: first(fo.mla_decoding_split_kv(q, qpe, kv, kpe, scale))  # noqa: E731
        tg_call = lambda tg: lambda: first(tg.mla_decoding_split_kv(q, qpe, kv, kpe, scale))  # noqa: E731
    nbytes = (2 * q.numel() + qpe.numel() + kv.numel() + kpe.numel()) * q.element_size()
    return Bench(
        fl_call,
        tg_call,
        lambda: sdpa(*heads_as_queries(q, qpe, kv, kpe), scale=scale)[:, 0],
        lambda: ref(*_f64(q, qpe, kv, kpe)),
        bytes=nbytes,  # bench_mla_decoding's count
    )


def sparse_indices(torch: Any, b: int, n: int, hkv: int, topk: int, s_kv: int, dev: str) -> Any:
    """bench_sparse_mla's indices, drawn at once: per query s, `topk` distinct keys, its past
    (j <= s) first in random order, then random future fillers (masked by causality)."""
    keys = torch.rand(b, n, hkv, s_kv, device=dev)
    future = torch.arange(s_kv, device=dev)[None, :] > torch.arange(n, device=dev)[:, None]
    keys = keys + future[None, :, None, :].to(keys.dtype)
    return keys.argsort(dim=-1)[..., :topk].to(torch.int32)


def _sparse_mla(torch: Any, s: Spec) -> Bench:
    b, n, hkv, topk = s.shape  # the indices' shape
    p = s.params()
    h, d, s_kv, dpe = p["heads"], p["head_dim"], p["s_kv"], p["d_pe"]
    if hkv != 1:
        raise ValueError("the sparse_mla cases take one KV head (bench_sparse_mla's)")
    q = randn(torch, s.dtype, b, h, n, d, std=0.3)
    k, v = (randn(torch, s.dtype, b, 1, s_kv, d, std=0.3) for _ in range(2))
    qpe = randn(torch, s.dtype, b, h, n, dpe, std=0.3)
    kpe = randn(torch, s.dtype, b, 1, s_kv, dpe, std=0.3)
    idx = sparse_indices(torch, b, n, 1, topk, s_kv, base.DEVICE)
    scale = 1 / math.sqrt(d + dpe)

    def eager(q: Any, k: Any, v: Any, qpe: Any, kpe: Any) -> Any:
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        ix = idx[:, :, 0].long()  # (B, S, topk)
        bi = torch.arange(b, device=q.device)[:, None, None]
        kg, vg, pg = k[:, 0][bi, ix], v[:, 0][bi, ix], kpe[:, 0][bi, ix]  # (B, S, topk, .)
        sc = torch.einsum("bhsd,bstd->bhst", q.to(acc), kg.to(acc))
        sc = (sc + torch.einsum("bhsd,bstd->bhst", qpe.to(acc), pg.to(acc))) * scale
        late = ix > torch.arange(n, device=q.device)[None, :, None]
        pr = torch.softmax(sc.masked_fill(late[:, None], -math.inf), dim=-1)
        return torch.einsum("bhst,bstd->bhsd", pr, vg.to(acc)).to(q.dtype)

    return Bench(
        lambda fo: lambda: fo.sparse_mla(q, k, v, idx, qpe, kpe, True, scale),
        lambda tg: lambda: tg.sparse_mla(q, k, v, idx, qpe, kpe, is_causal=True, scaling=scale),
        lambda: eager(q, k, v, qpe, kpe),
        lambda: eager(*_f64(q, k, v, qpe, kpe)),
        flops=2 * b * n * h * topk * (2 * d + dpe),  # bench_sparse_mla's count
    )


def _kvcache(torch: Any, s: Spec) -> Bench:
    b, n, h, d = s.shape
    p = s.params()
    hkv, page = p["kv_heads"], p["page_block_size"]
    q = randn(torch, s.dtype, b, 1, h, d)
    k, v = (randn(torch, s.dtype, b, n, hkv, d) for _ in range(2))
    seqlens = torch.full((b,), n, dtype=torch.int32, device=base.DEVICE)
    scale = 1 / math.sqrt(d)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    table = None
    kc, vc = k, v
    if page:
        blocks = b * n // page
        perm = torch.randperm(blocks, device=base.DEVICE)
        table = perm.view(b, n // page).to(torch.int32)
        kc, vc = torch.empty_like(k).view(blocks, page, hkv, d), torch.empty_like(v).view(blocks, page, hkv, d)  # fmt: skip
        kc[perm], vc[perm] = k.reshape(blocks, page, hkv, d), v.reshape(blocks, page, hkv, d)

    def eager() -> Any:
        kk, vv = (kc, vc) if table is None else (kc[table].reshape(b, n, hkv, d), vc[table].reshape(b, n, hkv, d))  # fmt: skip
        o = sdpa(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), enable_gqa=True)
        return o.transpose(1, 2)

    def reference() -> Any:
        qq, kk, vv = (t.double().transpose(1, 2) for t in (q, k, v))
        return _eager(torch, qq, kk, vv, scale).transpose(1, 2)

    def tilegym(tg: Any) -> Callable[[], Any]:
        raise Skip("TileGym has no flash_attn_with_kvcache (no paged-cache attention op)")

    return Bench(
        lambda fo: lambda: fo.flash_attn_with_kvcache(q, kc, vc, seqlens, table, scale),
        tilegym,
        eager,
        reference,
        bytes=(2 * k.numel() + 2 * q.numel()) * q.element_size(),
        tilegym_note="no TileGym operator",
    )


def _flash(torch: Any, s: Spec) -> Bench:
    """flash_attn_func: q (B, L, H, D) over k, v (B, L, H_kv, D), flash-attn's layout."""
    b, n, h, d = s.shape
    p = s.params()
    causal, hkv = bool(p["is_causal"]), p["kv_heads"]
    q = randn(torch, s.dtype, b, n, h, d)
    k, v = (randn(torch, s.dtype, b, n, hkv, d) for _ in range(2))
    scale = 1 / math.sqrt(d)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def eager() -> Any:
        views = (t.transpose(1, 2) for t in (q, k, v))
        return sdpa(*views, is_causal=causal, scale=scale, enable_gqa=True).transpose(1, 2)

    def reference() -> Any:
        qq, kk, vv = (t.double().transpose(1, 2) for t in (q, k, v))
        return _eager(torch, qq, kk, vv, scale, causal=causal).transpose(1, 2)

    def tilegym(tg: Any) -> Callable[[], Any]:
        raise Skip("TileGym has no flash_attn_func (its attention takes (B, H, L, D))")

    return Bench(
        lambda fo: lambda: fo.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal),
        tilegym,
        eager,
        reference,
        flops=4 * b * h * n * n * d // (2 if causal else 1),
        tilegym_note="no TileGym operator",
    )


ATTENTION_BUILDERS: dict[str, Callable[[Any, Spec], Bench]] = {
    "attention_backward": _backward,
    "fmha": _prefill,
    "swa_attention": _prefill,
    "gemma_attention": _prefill,
    "gemma_attention_decode": _gemma_decode,
    "attention_sink": _sink,
    "attention_sink_decode": _sink,
    "fmha_varlen": _varlen,
    "mla": _mla,
    "mla_decoding": _mla_decode,
    "mla_decoding_split_kv": _mla_decode,
    "sparse_mla": _sparse_mla,
    "flash_attn_with_kvcache": _kvcache,
    "flash_attn_func": _flash,
    VARIANT: variant_builder,
}


# ------------------------------------------------------------------------------- dry run


def dry_body(s: Spec, rng: Any) -> Callable[[], float]:
    """`s` (at its dry-run shape) through its GPU-run builder on torch CPU tensors, fearless.ops
    on the simulator: the relative error of fearless's output against the float64 reference."""

    def body() -> float:
        import torch

        from fearless import ops

        from .check import rel_err_torch

        torch.manual_seed(int(rng.integers(1 << 31)))
        with drawn_on("cpu"):
            bench = ATTENTION_BUILDERS[s.op](torch, s)
            return float(rel_err_torch(bench.fearless(ops)(), bench.reference()))

    return body
