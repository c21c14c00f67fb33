"""DeepSeek's multi-head latent attention (DESIGN 2c), TileGym's operators: `fearless.ops.mla`
(prefill), `mla_decoding` (one token, returns the output and the log2-sum-exp) and
`mla_decoding_split_kv` (the same decode, its keys split across blocks), on the kernels of
ops/kernels_attention_mla.py.

The scores are q k^T + qpe kpe^T (the latent part plus the decoupled RoPE part), times the scale
(default 1 / sqrt(D + D_PE), TileGym's). Layouts, TileGym's (tilegym/ops/ops.py, cutile
mla.py, mla_decoding.py, mla_decoding_split_kv.py):
  - mla: q (B, H, L, D), k and v (B, H_kv, S, D), qpe (B, H, L, D_PE), kpe (B, H_pe, S, D_PE)
    (TileGym's kernel takes H_pe = 1; any H_pe dividing H is accepted: head h reads RoPE head
    h // (H / H_pe), as TileGym's reference broadcasts); returns (B, H, L, D). Causal is
    top-left, as TileGym's MLA kernel and reference (query i sees keys j <= i; not fmha's
    bottom-right). TileGym's cuTile kernel refuses is_causal=False; its reference, and this
    operator, attend to every key.
  - decode: q (B, H, D), qpe (B, H, D_PE), the absorbed latent cache kv (B, S, D), which is
    both keys and values, and kpe (B, S, D_PE). mla_decoding returns (o (B, H, D), lse (B, H)
    f32), lse = log2 of sum_j exp(score_j * scale) (TileGym's `m / ln 2 + log2(l)`); with no
    key, o is 0 and lse -inf. mla_decoding_split_kv returns o.
One float dtype (f32, f16, bf16; for mla also fp8 e5m2 and e4m3fn, as TileGym's, P rounded to
fp8 and the softmax in f32) for every tensor; the output in it. D_PE may be 0 (no RoPE
part). Forward only: an input that requires grad is refused at the call (ops/torch_ops_tilegym.py),
never detached.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtypes
from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ._arguments import flag
from ._attention_checks import FP8_INFERENCE, attention_scale, split_len
from ._io import Operand, float_operands, full, output, result, view, zeros_output
from ._replay import replayable
from ._route import torch_ops
from .kernels_attention_mla import mla_decode_pinned, mla_decode_tuned, mla_tuned
from .kernels_rows import sm_count


@replayable()
def mla(
    q: Any,
    k: Any,
    v: Any,
    qpe: Any,
    kpe: Any,
    is_causal: bool,
    scaling: float | None = None,
) -> Any:
    """TileGym's `mla` (prefill): softmax((q k^T + qpe kpe^T) * scaling) v of q (B, H, L, D),
    qpe (B, H, L, D_PE) over k, v (B, H_kv, S, D), kpe (B, H_pe, S, D_PE); `is_causal`: query i
    sees keys j <= i (top-left); scaling None: 1 / sqrt(D + D_PE). Returns (B, H, L, D).
    Forward only (no backward yet)."""
    is_causal = flag(is_causal, "mla", "is_causal")
    if (t := torch_ops(q, k, v, qpe, kpe)) is not None:
        return t.mla(q, k, v, qpe, kpe, is_causal, scaling)
    op = "mla"
    qa, ka, va, pa, kpa = float_operands(op, FP8_INFERENCE, q=q, k=k, v=v, qpe=qpe, kpe=kpe)
    _same_dtype(op, qa, ka, va, pa, kpa)
    shapes = f"shapes {qa.shape}, {ka.shape}, {va.shape}, {pa.shape} and {kpa.shape}"
    if not all(len(x.shape) == 4 for x in (qa, ka, va, pa, kpa)):
        raise _prefill_mismatch(shapes)
    (b, h, lq, d), (bk, hk, s, dk), (bp, hp, sp, dp) = qa.shape, ka.shape, kpa.shape
    if (
        va.shape != ka.shape
        or pa.shape != (b, h, lq, dp)
        or (bk, dk, bp, sp) != (b, d, b, s)
        or not hk
        or not hp
        or h % hk
        or h % hp
    ):
        raise _prefill_mismatch(shapes)
    sc = attention_scale(scaling, max(d + dp, 1), op, "scaling")  # TileGym's D + D_PE
    if s == 0:  # no keys: every row is 0
        return result(qa, *zeros_output(qa, qa.shape))
    out, ret = output(qa, qa.shape)
    if out.size:
        q4, k4, v4, p4, kp4 = (view(x.tensor, x.shape) for x in (qa, ka, va, pa, kpa))
        mla_tuned(q4, k4, v4, p4, kp4, view(out, qa.shape), sc, is_causal, h // hk, h // hp)
    return result(qa, out, ret)


@replayable()
def mla_decoding(
    q: Any,
    qpe: Any,
    kv: Any,
    kpe: Any,
    sm_scale: float | None = None,
    transpose: bool = True,
) -> Any:
    """TileGym's `mla_decoding`: one query token per head, q (B, H, D), qpe (B, H, D_PE) over
    the latent cache kv (B, S, D) (keys and values both) and kpe (B, S, D_PE); sm_scale None:
    1 / sqrt(D + D_PE). Returns (o (B, H, D), lse (B, H) f32, the log2-sum-exp of the scaled
    scores). `transpose` (TileGym's choice of kernel layout) does not change the result.
    Forward only (no backward yet)."""
    if not isinstance(transpose, bool):
        raise argument_error(
            f"`transpose` of `fearless.ops.mla_decoding` must be a bool, got {transpose!r:.40}",
            help="leave it out (True, TileGym's default): it picks a kernel layout, not a result",
        )
    if (t := torch_ops(q, qpe, kv, kpe)) is not None:
        return t.mla_decoding(q, qpe, kv, kpe, sm_scale, transpose)
    qa, out, ret, lse, lret = _decode("mla_decoding", q, qpe, kv, kpe, sm_scale, None)
    return result(qa, out, ret), result(qa, lse, lret)


@replayable()
def mla_decoding_split_kv(
    q: Any,
    qpe: Any,
    kv: Any,
    kpe: Any,
    sm_scale: float | None = None,
    kv_len_per_split: int | None = None,
) -> Any:
    """TileGym's `mla_decoding_split_kv`: `mla_decoding`'s output (B, H, D) alone, the keys
    split across blocks, each split's partial output and log-sum-exp combined by a second
    kernel: kv_len_per_split (a power of two, 16 or more; TileGym's cuTile kernel asks 128 or
    more) keys per split, or None to choose the split from the batch and the GPU. Forward only
    (no backward yet)."""
    op = "mla_decoding_split_kv"
    split_len(kv_len_per_split, op, example=512)
    if (t := torch_ops(q, qpe, kv, kpe)) is not None:
        return t.mla_decoding_split_kv(q, qpe, kv, kpe, sm_scale, kv_len_per_split)
    qa, out, ret, _, _ = _decode(op, q, qpe, kv, kpe, sm_scale, kv_len_per_split)
    return result(qa, out, ret)


def _decode(
    op: str, q: Any, qpe: Any, kv: Any, kpe: Any, sm_scale: Any, split: int | None
) -> tuple[Operand, Any, Any, Any, Any]:
    """The decode's checks, then its kernels: (q's operand, out, what returns it, lse, what
    returns it)."""
    qa, pa, ca, kpa = float_operands(op, q=q, qpe=qpe, kv=kv, kpe=kpe)
    _same_dtype(op, qa, pa, ca, kpa)
    shapes = f"shapes {qa.shape}, {pa.shape}, {ca.shape} and {kpa.shape}"
    if not all(len(x.shape) == 3 for x in (qa, pa, ca, kpa)):
        raise _decode_mismatch(op, shapes)
    (b, h, d), (_, _, dp), (bc, s, dc) = qa.shape, pa.shape, ca.shape
    if pa.shape[:2] != (b, h) or (bc, dc) != (b, d) or kpa.shape != (b, s, dp):
        raise _decode_mismatch(op, shapes)
    if not d:
        raise argument_error(
            f"`fearless.ops.{op}` needs a latent head dim D of 1 or more, got q of {qa.shape}",
            help="DeepSeek's latent cache has D = kv_lora_rank (512)",
        )
    sc = attention_scale(sm_scale, max(d + dp, 1), op, "sm_scale")
    out, ret = output(qa, qa.shape) if s else zeros_output(qa, qa.shape)
    if not s:  # no keys: o is 0, the log of an empty sum -inf
        lse, lret = _minus_inf(qa, (b, h))
        return qa, out, ret, lse, lret
    lse, lret = output(qa, (b, h), dtypes.f32)
    if lse.size:
        args = (qa.tensor, pa.tensor, ca.tensor, kpa.tensor, out, view(lse, (b, h, 1)), sc)
        if split is None:
            mla_decode_tuned(*args, sm_count())
        else:
            mla_decode_pinned(*args, split)
    return qa, out, ret, lse, lret


def _minus_inf(like: Operand, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """An f32 output of `shape` filled with -inf, and what returns it (as `output`)."""
    if like.kind == "torch":
        t, ret = output(like, shape, dtypes.f32)
        ret.fill_(-math.inf)
        return t, ret
    t = full(like, shape, -math.inf, dtypes.f32)
    return t, t


def _same_dtype(op: str, *xs: Operand) -> None:
    if len({x.dtype for x in xs}) > 1:
        raise argument_error(
            f"`fearless.ops.{op}` needs one dtype for every tensor, got "
            f"{', '.join(x.dtype.name for x in xs)}",
            help="convert them to one dtype, e.g. `t.to(torch.bfloat16)` for each",
        )


def _prefill_mismatch(what: str) -> KernelTypeError:
    return argument_error(
        "`fearless.ops.mla` needs q (B, H, L, D), k and v (B, H_kv, S, D), qpe (B, H, L, D_PE) "
        f"and kpe (B, H_pe, S, D_PE), H a multiple of H_kv and of H_pe, got {what}",
    )


def _decode_mismatch(op: str, what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` needs q (B, H, D), qpe (B, H, D_PE), kv (B, S, D) and kpe "
        f"(B, S, D_PE), got {what}",
    )
