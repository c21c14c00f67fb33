"""The argument checks that several attention operators share (ops/attention_variants.py,
attention_varlen.py, attention_mla.py; the scale also attention.py, attention_mla_sparse.py and
kvcache_attention.py): q, k, v of TileGym's (B, H, L, D) / (B, H_kv, S, D)
layout (one query token for a decode), a split-KV decode's `kv_len_per_split`, and the scores'
scale with its 1 / sqrt(D) default (1 / sqrt(D + D_PE) for the MLA forms), and the dtypes
the inference-only forms take (fp8 besides FLOATS). Each raises E0701
at the caller's line with the operator's name in its text. Also the training forwards' kept lse
(attention.py, attention_variants.py): its output and its check where a backward takes it; the
per-sequence lengths of a padded batch (attention_varlen.py, attention_fmha_variant.py); and
the shape of a per-score mask or bias broadcast over batch and heads (attention.py,
attention_fmha_variant.py).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import KernelTypeError
from ..runtime import tensor as fl_tensor
from ..runtime.location import argument_error
from ._arguments import index
from ._io import (
    FLOATS,
    Operand,
    cast,
    filled_output,
    float_operands,
    from_torch,
    full,
    heads_major,
    number,
    operand,
    output,
    read_in_place,
    result,
    view,
)

# TileGym's fmha and mla (prefill) also take fp8 q, k, v (e5m2 in its tests; e4m3fn as well) in
# inference: the scores' and the output's products on the fp8 tensor cores, P rounded to fp8,
# the softmax in f32. Training stays on FLOATS.
FP8_INFERENCE = (*FLOATS, dtypes.f8e5m2, dtypes.f8e4m3fn)


def qkv_operands(
    op: str,
    q: Any,
    k: Any,
    v: Any,
    layout: tuple[bool, bool] = (False, False),
    allowed: tuple[DType, ...] = (),
) -> tuple[Operand, Operand, Operand]:
    """q (B, H, L, D), k and v (B, H_kv, S, D) of one float dtype (`allowed`, FLOATS by
    default), H a multiple of H_kv; in `layout` (`sequence_layout`'s), q or k and v are the
    (B, L, H, D) bases of such views."""
    qa, ka, va = float_operands(op, allowed, q=q, k=k, v=v)
    if not qa.dtype == ka.dtype == va.dtype:
        raise qkv_mismatch(op, f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}")
    if not len(qa.shape) == len(ka.shape) == len(va.shape) == 4:
        raise qkv_mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    q_seq, kv_seq = layout
    qs, ks, vs = (heads_major(x.shape, s) for x, s in ((qa, q_seq), (ka, kv_seq), (va, kv_seq)))
    (b, h, _, d), (bk, hk, _, dk) = qs, ks
    if bk != b or vs != ks or dk != d or not hk or h % hk:
        raise qkv_mismatch(op, f"shapes {qs}, {ks} and {vs}")
    return qa, ka, va


def sequence_layout(
    q: Any, k: Any, v: Any, heads_major_only: bool
) -> tuple[tuple[bool, bool], tuple[Any, Any, Any]]:
    """((q_seq, kv_seq), (q, k, v)): which of q and (k, v) are torch tensors in the
    sequence-major layout (`_io.seq_major_base`: Hugging Face's and flash-attn's, (B, H, L, D)
    transposed views of (B, L, H, D) tensors), each then replaced by its base, which the
    prefill kernels read (and for q, whose layout the output takes, write) in place; the others
    as given (a strided one is copied, as everywhere). `heads_major_only`: the call's kernels
    take heads-major tensors only (the decode kernels; the training forward, whose kept lse and
    backward are heads-major): (False, False) and q, k, v as given."""
    if heads_major_only:
        return (False, False), (q, k, v)
    qb, kvb = read_in_place(q), read_in_place(k, v)
    (q,) = qb or (q,)
    k, v = kvb or (k, v)
    return (qb is not None, kvb is not None), (q, k, v)


def decode_operands(
    op: str, q: Any, k: Any, v: Any, prefill: str
) -> tuple[Operand, Operand, Operand]:
    """`qkv_operands` of a decode step: q holds one query token, (B, H, 1, D); `prefill` names
    the operator the error's help points to for several."""
    qa, ka, va = qkv_operands(op, q, k, v)
    if qa.shape[2] != 1:
        raise argument_error(
            f"`fearless.ops.{op}` takes one query token, q (B, H, 1, D), got shape {qa.shape}",
            help=f"for several query tokens call `fearless.ops.{prefill}`",
        )
    return qa, ka, va


def qkv_mismatch(op: str, what: str) -> KernelTypeError:
    """The E0701 of q, k, v (and their gradients) outside the (B, H, L, D) layout."""
    return argument_error(
        f"`fearless.ops.{op}` needs q (B, H, L, D) and k, v (B, H_kv, S, D) of one dtype, H a "
        f"multiple of H_kv, got {what}",
    )


def split_len(kv_len_per_split: Any, op: str, example: int = 1024) -> int | None:
    """A split-KV decode's keys per split: None (the split follows the batch and the GPU) or a
    power of two of 16 or more; `example` is the value the error's help suggests."""
    n = kv_len_per_split
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 16 or n & (n - 1)):
        raise argument_error(
            f"`fearless.ops.{op}` needs kv_len_per_split None or a power of two of 16 or more, "
            f"got {n!r:.40}",
            help="pass None (the default: the split follows the batch and the GPU), or e.g. "
            f"{example}",
        )
    return n  # type: ignore[no-any-return]


def attention_scale(value: Any, d: int, op: str, name: str) -> float:
    """The scores' scale: `value` (the argument called `name`, a number) or, for None,
    1 / sqrt(d), d the head dimension; 1 where d = 0 (every score is an empty sum, 0 at any
    finite scale: 1 / sqrt(0) was a ZeroDivisionError from inside fearless)."""
    if value is not None:
        return number(value, op, name)
    return 1.0 / math.sqrt(d) if d > 0 else 1.0


def kept_lse(qa: Operand, s_len: int, keep: bool) -> tuple[Any, Any]:
    """(lse, returned) of a training forward that keeps its rows' lse (`keep`), q's shape
    without D, f32, in q's kind (else (None, None)): +inf for every row where there are no keys
    (S = 0), NaN where D = 0 (no kernel runs, no score to sum), else for the kernel to write."""
    if not keep:
        return None, None
    rows = qa.shape[:-1]
    if s_len == 0 or qa.shape[-1] == 0:
        return filled_output(qa, rows, math.inf if s_len == 0 else math.nan, dtypes.f32)
    return output(qa, rows, dtypes.f32)


def kept(like: Operand, lse: Any, returned: Any) -> Any:
    """The kept lse as the operator returns it (None where the forward kept none)."""
    return None if lse is None else result(like, lse, returned)


def lse_operand(lse: Any, op: str, qa: Operand) -> Any:
    """A backward's `lse` (None, or the forward's kept one: f32 of q's shape without D) as the
    (B, H, L) fl.Tensor the kernels read."""
    if lse is None:
        return None
    la = operand(lse, op, "lse", (dtypes.f32,), device=qa.tensor.device)
    if la.shape != qa.shape[:-1]:
        raise argument_error(
            f"`fearless.ops.{op}` takes the forward's lse, f32 of q's shape without D "
            f"({qa.shape[:-1]}), got shape {la.shape}",
            help="pass the lse that the forward returned with `out`, or None to recompute it",
        )
    # a 3-D q is (B, L, D), one head per batch entry, as the forward views it: (B, 1, L, D)
    b, h, lq = (qa.shape[0], 1, qa.shape[1]) if len(qa.shape) == 3 else qa.shape[:3]
    return view(la.tensor, (b, h, lq))


# ------------------------------------------------------------------ per-sequence lengths


def broadcasts_over_heads(shape: tuple[int, ...], b: int, h: int, rows: int, cols: int) -> bool:
    """Whether `shape` is (1 or b, 1 or h, rows, cols): a mask's or bias's, one per score of
    each query row and key column, broadcast over the batch and the heads or not."""
    return (
        len(shape) == 4 and shape[0] in (1, b) and shape[1] in (1, h) and shape[2:] == (rows, cols)
    )


def sequence_lengths(
    x: Any, like: Operand, b: int, limit: int, name: str, axis: str, op: str
) -> Any:
    """The (B,) i32 tensor a kernel reads lengths `name` from, beside `like` (all `limit` for
    None). Lengths on the host (a list, a tuple, NumPy, a CPU torch tensor, an fl.Tensor on the
    simulator) are checked: B of them, integers in 0..limit (`axis` names the padded axis);
    lengths on a GPU are not read (that would wait for it), so the kernels clamp them."""
    if x is None:
        return full(like, (max(b, 1),), limit, dtypes.i32)
    if isinstance(x, (list, tuple)):
        listed = check_lengths(np.asarray(x, dtype=object), b, limit, name, axis, op)
        arr = np.asarray(listed, dtype=np.int32).reshape(b)
        if like.kind == "torch":
            torch = sys.modules["torch"]
            return from_torch(torch.from_numpy(arr).to(like.original.device))
        return fl_tensor.asarray(arr, device=like.tensor.device)
    la = operand(x, op, name, device=like.tensor.device)
    if la.dtype not in (dtypes.i32, dtypes.i64):
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be an int32 or int64 tensor, got "
            f"{la.dtype.name}",
            help="pass per-sequence lengths, e.g. `torch.tensor([5, 7], dtype=torch.int32)`",
        )
    host = _host_lengths(x)
    # on a GPU only the shape is known here: zeros of it stand for the values
    known = np.zeros(la.shape, dtype=np.int64) if host is None else host
    check_lengths(known, b, limit, name, axis, op)
    return cast(la, dtypes.i32)


def check_lengths(vals: np.ndarray, b: int, limit: int, name: str, axis: str, op: str) -> list[int]:
    """B integer lengths in 0..limit as ints, else E0701 naming `name`, `op` and the padded
    `axis`. An integer is what `_arguments.index` takes: a NumPy integer too (a list made from
    an int64 array holds them), never a bool or a float."""
    if vals.ndim != 1 or len(vals) != b:
        got = len(vals) if vals.ndim == 1 else "shape " + str(vals.shape)
        raise _count_error(name, op, b, got)
    return check_length_list(vals.tolist(), b, limit, name, axis, op)


def _count_error(name: str, op: str, b: int, got: Any) -> Exception:
    return argument_error(
        f"`{name}` of `fearless.ops.{op}` needs one length per sequence, {b} (q's batch), "
        f"got {got}",
        help="pass B lengths, e.g. `[5, 0, 7]` for a batch of 3, or None for all",
    )


def check_length_list(
    vals: list[Any], b: int, limit: int, name: str, axis: str, op: str
) -> list[int]:
    """`check_lengths` of a Python list, in plain Python: what torch.compile's tracer follows
    (it traces no NumPy object array)."""
    if len(vals) != b:
        raise _count_error(name, op, b, len(vals))
    lengths = []
    for i, x in enumerate(vals):
        n = index(x)
        if n is None:
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` must hold integers, got {x!r:.40} at {i}",
                help="pass lengths as ints or an int32 / int64 tensor",
            )
        if not 0 <= n <= limit:
            raise argument_error(
                f"`{name}[{i}]` of `fearless.ops.{op}` is {n}, outside 0..{limit} (the padded "
                f"{axis})",
                help="the layout is padded: each sequence's length is at most the padded "
                "axis, and none is negative",
            )
        lengths.append(n)
    return lengths


def _host_lengths(x: Any) -> np.ndarray | None:
    """Lengths living on the host (NumPy, a CPU torch tensor, an fl.Tensor on the simulator)
    as NumPy, else None."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, fl_tensor.Tensor) and x.target == "sim":
        return x.numpy()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor) and x.device.type == "cpu":
        return x.detach().numpy()  # type: ignore[no-any-return]
    return None
