"""TileGym's `splitk_reduce` (DESIGN 2c): the last step of split-KV attention decode, which
merges the partial outputs of the key splits into one output per head, on the kernel of
ops/kernels_attention_splitk.py.

What it takes (TileGym's tilegym/ops/cutile/splitk_reduce.py and tests/ops/test_splitk_reduce.py):
attn_splitk_out (B, H, S, D), each split's output normalised by its own softmax sum, in f32,
f16 or bf16; lse_splitk_out (B, H, S), each split's log-sum-exp in base 2 (max + log2(sum) of
the scores times log2(e)), any of those dtypes; attn_out (B, H, D), any of those dtypes, which
it writes in place and returns:

    attn_out[b, h] = sum_s 2^(lse[b, h, s] - m) o[b, h, s] / sum_s 2^(lse[b, h, s] - m)

with m the head's largest lse, summed in f32. S_kv (the keys' length) is checked to be an int
and otherwise unused, as in TileGym. A head whose every lse is -inf gives 0 (TileGym: NaN).
An attn_out that may share memory with attn_splitk_out or lse_splitk_out (a view into them,
contiguous or strided) is a BorrowError naming both. Forward only.
"""

from __future__ import annotations

from typing import Any

from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ._arguments import integer
from ._io import FLOATS, operand, refuse_grad, refuse_overlap, write_back
from ._route import clean_op_errors, torch_ops
from .kernels_attention_splitk import splitk_reduce_tuned

OP = "splitk_reduce"


@clean_op_errors
def splitk_reduce(attn_splitk_out: Any, lse_splitk_out: Any, attn_out: Any, S_kv: int) -> Any:
    """TileGym's `splitk_reduce`: attn_out (B, H, D) = the splits of attn_splitk_out
    (B, H, S, D) weighed by 2 ** lse_splitk_out (B, H, S), base-2 log-sum-exps, written in
    place; returns attn_out. Forward only."""
    refuse_grad(
        OP, attn_splitk_out=attn_splitk_out, lse_splitk_out=lse_splitk_out, attn_out=attn_out
    )
    if (t := torch_ops(attn_splitk_out, lse_splitk_out, attn_out)) is not None:
        t.splitk_reduce(attn_splitk_out, lse_splitk_out, attn_out, _kv_len(S_kv))
        return attn_out
    _kv_len(S_kv)
    po = operand(attn_splitk_out, OP, "attn_splitk_out", FLOATS)
    dev = po.tensor.device
    ls = operand(lse_splitk_out, OP, "lse_splitk_out", FLOATS, device=dev)
    out = operand(attn_out, OP, "attn_out", FLOATS, device=dev, written=True)
    # the caller's memory, before the kernels get a dense copy of a strided attn_out (the
    # launch's borrow check would not see the alias, and write_back would overwrite an input)
    refuse_overlap(
        OP, {"attn_out": out, "attn_splitk_out": po, "lse_splitk_out": ls}, ("attn_out",)
    )
    if len(po.shape) != 4:
        raise _mismatch(f"attn_splitk_out of shape {po.shape}")
    b, h, s, d = po.shape
    if ls.shape != (b, h, s) or out.shape != (b, h, d):
        raise _mismatch(f"shapes {po.shape}, {ls.shape} and {out.shape}")
    if not s:
        raise argument_error(
            f"`fearless.ops.{OP}` needs one split or more, got attn_splitk_out of shape {po.shape}",
            help="a decode over keys writes at least one split",
        )
    if out.tensor.size:
        splitk_reduce_tuned(po.tensor, ls.tensor, out.tensor)
    write_back(out)
    return attn_out


def _kv_len(S_kv: Any) -> int:
    n = integer(
        S_kv, OP, "S_kv", "an int (the keys' length)", help="pass the KV length, e.g. `k.shape[1]`"
    )
    if n < 0:
        raise argument_error(f"`S_kv` of `fearless.ops.{OP}` must be 0 or more, got {n}")
    return n


def _mismatch(what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{OP}` needs attn_splitk_out (B, H, S, D), lse_splitk_out (B, H, S) and "
        f"attn_out (B, H, D), got {what}",
    )
