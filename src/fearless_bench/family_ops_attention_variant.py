"""The ops family's `fmha_variant` cases (TileGym's attention with its optional pieces): their
`Spec`s, GPU-run builder and dry-run shape; family_ops_attention.py lists them with its own.

TileGym has no benchmark of `fmha_variant`; the cases take tests/ops/test_attention_variant.py's
configuration (batch 4, 32 heads, one KV head per query head, head_dim 128, bf16, layout bnsd,
causal bottom-right) at longer sequences: a query block over a longer KV cache, S_q = 128 and
2048 over S_kv = 4096 (`Spec.shape` is (B, H, S_q, S_kv, D)), one group per variant of its
test list: causal alone; a window of 512 (keys with |j - pos| > 512 masked); ALiBi (slopes
U[0, 1) in f32, as the test's); a vector bias (B, H, 1, S_kv) of N(0.3, 1.2) in bf16 (the
test's); varlen (q_lens (S_q, 3S_q/4, S_q/2, S_q/4), kv_lens likewise of S_kv: only each
sequence's rows are checked); dropout 0.1 with a fixed seed. 12 cases, all in `--quick`.

Peers: TileGym's `tilegym.ops.fmha_variant` (cutile backend), which refuses dropout (its cutile
kernel raises NotImplementedError: a skip that says so). Torch eager: SDPA with the variant's
mask as `attn_mask` (bool, or the bias with -inf where masked, built outside the timing), per
sequence for varlen; torch has no peer for the dropout case (SDPA's dropout draws its own
mask, not Triton's `tl.rand`, so its output cannot be checked: a skip). Reference: float64,
a few heads at a time, the dropout mask Triton's `tl.rand` (Philox4x32-10) computed in torch.
flops: 4 D per visible (query, key) pair, counted exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import family_ops_base as base
from .family_ops_base import SEED, Bench, Joined, Spec, randn
from .model import Skip

OP = "fmha_variant"
QKV = ((128, 4096), (2048, 4096))  # (S_q, S_kv)
VARIANTS: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
    ("causal", ()),
    ("w512", (("window_size", 512),)),
    ("alibi", (("bias_type", "alibi"),)),
    ("vector", (("bias_type", "vector"),)),
    ("varlen", (("varlen", True),)),
    ("dropout", (("dropout", 0.1), ("seed", SEED))),
)
DRY_SHAPE = (4, 2, 13, 37, 16)  # (B, H, S_q, S_kv, D): ragged tiles, four sequences for varlen
DRY_WINDOW = 9
ROUND = (0xD2511F53, 0xCD9E8D57)  # Philox4x32's multipliers and key increments
KEY_STEP = (0x9E3779B9, 0xBB67AE85)
M32 = 0xFFFFFFFF


def variant_specs() -> list[Spec]:
    out = []
    for tag, extra in VARIANTS:
        x = (("is_causal", True), *extra)
        out += [Spec(OP, "bf16", (4, 32, sq, skv, 128), tag, x) for sq, skv in QKV]
    return out


def variant_small(spec: Spec) -> Spec:
    """`spec` at its dry-run shape (the window scaled to it)."""
    x = dict(spec.extra)
    if x.get("window_size"):
        x["window_size"] = DRY_WINDOW
    return Spec(spec.op, spec.dtype, DRY_SHAPE, spec.variant, tuple(x.items()))


def _lens(n: int) -> tuple[int, ...]:
    return (n, 3 * n // 4, n // 2, n // 4)


def _pairs(ql: int, kl: int, causal: bool, window: int) -> int:
    """The (query, key) pairs a sequence of ql queries over kl keys sees."""
    total = 0
    for i in range(ql):
        pos = i + kl - ql
        hi = min(pos, kl - 1) if causal else (min(kl - 1, pos + window) if window else kl - 1)
        lo = max(0, pos - window) if window else 0
        total += max(0, hi - lo + 1)
    return total


def _mulhilo(torch: Any, a: int, c: Any) -> tuple[Any, Any]:
    """(high, low) 32-bit words of a * c (c u32 values in int64), in 48-bit pieces."""
    x, y = a * (c >> 16), a * (c & 0xFFFF)
    return (x + (y >> 16)) >> 16, (((x & 0xFFFF) << 16) + y) & M32


def triton_rand(torch: Any, seed: int, offsets: Any) -> Any:
    """Triton's `tl.rand(seed, offsets)` (Philox4x32-10 at counter (offset low, high, 0, 0)
    keyed by the seed's words, word 0 as a float in [0, 1)) of int64 offsets, in torch."""
    c0, c1 = offsets & M32, (offsets >> 32) & M32
    c2, c3 = torch.zeros_like(c0), torch.zeros_like(c0)
    ka, kb = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        hi0, lo0 = _mulhilo(torch, ROUND[0], c0)
        hi2, lo2 = _mulhilo(torch, ROUND[1], c2)
        c0, c1, c2, c3 = hi2 ^ c1 ^ ka, lo2, hi0 ^ c3 ^ kb, lo0
        ka, kb = (ka + KEY_STEP[0]) & M32, (kb + KEY_STEP[1]) & M32
    x = torch.where(c0 >= 2**31, c0 - 2**32, c0)
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def fmha_variant_bench(torch: Any, s: Spec) -> Bench:
    b, h, sq, skv, d = s.shape
    p = s.params()
    causal, w = bool(p["is_causal"]), int(p.get("window_size", 0))
    bias_type, drop = p.get("bias_type"), float(p.get("dropout", 0.0))
    seed = int(p.get("seed", 0))
    dev = base.DEVICE
    q = randn(torch, s.dtype, b, h, sq, d)
    k, v = (randn(torch, s.dtype, b, h, skv, d) for _ in range(2))
    scale = 1 / math.sqrt(d)
    varlen = bool(p.get("varlen"))
    qls, kls = (_lens(sq), _lens(skv)) if varlen else ((sq,) * b, (skv,) * b)
    bias: Any = None
    if bias_type == "alibi":
        bias = torch.rand(h, device=dev)
    elif bias_type == "vector":
        bias = (torch.randn(b, h, 1, skv, device=dev) * 1.2 + 0.3).to(q.dtype)
    lens = {}
    if varlen:
        lens = {
            "q_lens": torch.tensor(qls, dtype=torch.int32, device=dev),
            "kv_lens": torch.tensor(kls, dtype=torch.int32, device=dev),
        }
    kw = {"scaling": scale, "is_causal": causal, "bias_type": bias_type, "bias": bias,
          "dropout": drop, "seed": seed, "window_size": w, **lens}  # fmt: skip

    def visible(ql: int, kl: int, dev: Any) -> Any:
        """(ql, kl) bool: which keys the queries see (pos = i + kl - ql)."""
        pos = torch.arange(ql, device=dev)[:, None] + (kl - ql)
        j = torch.arange(kl, device=dev)[None, :]
        keep = torch.ones(ql, kl, dtype=torch.bool, device=dev)
        if causal:
            keep &= j <= pos
        if w:
            keep &= (j - pos).abs() <= w
        return keep

    def added(bi: int, hs: slice, ql: int, kl: int, acc: Any) -> Any:
        """The bias term of heads `hs` of sequence bi, or 0."""
        if bias_type == "vector":
            return bias[bi, hs, :, :kl].to(acc)
        if bias_type == "alibi":
            pos = torch.arange(ql, device=q.device)[:, None] + (kl - ql)
            dist = (pos - torch.arange(kl, device=q.device)[None, :]).abs().to(acc)
            return -bias[hs].to(acc)[:, None, None] * dist
        return 0.0

    def attend(q: Any, k: Any, v: Any) -> Joined:
        """Each sequence's rows, in q's dtype (float64: the reference), a few heads at once."""
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        outs = []
        for bi, (ql, kl) in enumerate(zip(qls, kls, strict=True)):
            o = torch.empty(h, ql, d, dtype=acc, device=q.device)
            keep = visible(ql, kl, q.device)
            step = max(1, (1 << 25) // max(1, ql * kl))
            for h0 in range(0, h, step):
                hs = slice(h0, h0 + step)
                sc = q[bi, hs, :ql].to(acc) @ k[bi, hs, :kl].to(acc).transpose(-1, -2) * scale
                sc = (sc + added(bi, hs, ql, kl, acc)).masked_fill(~keep, -math.inf)
                pr = torch.softmax(sc, dim=-1).nan_to_num(0.0)  # a row that sees no key: 0
                if drop:
                    pr = pr * _kept(bi, hs, ql, kl) / (1 - drop)
                o[hs] = pr @ v[bi, hs, :kl].to(acc)
            outs.append(o.to(q.dtype))
        return Joined(outs)

    def _kept(bi: int, hs: slice, ql: int, kl: int) -> Any:
        heads = torch.arange(h, device=q.device)[hs]
        i = torch.arange(ql, device=q.device)
        j = torch.arange(kl, device=q.device)
        off = (((bi * h + heads[:, None, None]) * sq + i[None, :, None]) * skv) + j[None, None, :]
        return triton_rand(torch, seed, off) > torch.tensor(drop, dtype=torch.float32)

    def rows(o: Any) -> Joined:
        return Joined([o[bi, :, :ql] for bi, ql in enumerate(qls)])

    def tilegym(tg: Any) -> Callable[[], Any]:
        if drop:
            raise Skip("TileGym's cutile fmha_variant has no dropout (NotImplementedError)")
        return lambda: rows(tg.fmha_variant(q, k, v, **kw))

    return Bench(
        lambda fo: lambda: rows(fo.fmha_variant(q, k, v, **kw)),
        tilegym,
        None
        if drop
        else _eager_sdpa(torch, q, k, v, scale, qls, kls, visible, added, bias_type == "vector"),
        lambda: attend(q.double(), k.double(), v.double()).double(),
        flops=4 * d * h * sum(_pairs(a, c, causal, w) for a, c in zip(qls, kls, strict=True)),
        no_torch="torch's SDPA dropout draws its own mask (not Triton's tl.rand): no checkable "
        "torch peer",
    )


def _eager_sdpa(
    torch: Any,
    q: Any,
    k: Any,
    v: Any,
    scale: float,
    qls: tuple[int, ...],
    kls: tuple[int, ...],
    visible: Callable[..., Any],
    added: Callable[..., Any],
    per_batch: bool,
) -> Callable[[], Joined]:
    """Torch eager: SDPA per sequence with the variant's mask (bool, or the bias with -inf
        where masked, in q's dtype), the masks built here, outside the timing; `per_batch`: the
    bias differs by sequence (the vector bias)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    h = q.shape[1]
    masks = []
    for bi, (ql, kl) in enumerate(zip(qls, kls, strict=True)):
        keep = visible(ql, kl, q.device)
        bias = added(bi, slice(0, h), ql, kl, torch.float32)
        if isinstance(bias, float):
            masks.append(keep)
        else:
            masks.append(bias.masked_fill(~keep, -math.inf).to(q.dtype).unsqueeze(0))
    if len(set(qls)) == len(set(kls)) == 1:  # one call over the batch
        m = torch.cat(masks) if per_batch else masks[0]
        return lambda: Joined([sdpa(q, k, v, attn_mask=m, scale=scale)])

    def per_sequence() -> Joined:
        outs = []
        for bi, (ql, kl) in enumerate(zip(qls, kls, strict=True)):
            sl = slice(bi, bi + 1)
            o = sdpa(q[sl, :, :ql], k[sl, :, :kl], v[sl, :, :kl], attn_mask=masks[bi], scale=scale)
            outs.append(o[0])
        return Joined(outs)

    return per_sequence
