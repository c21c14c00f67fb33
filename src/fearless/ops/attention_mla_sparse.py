"""TileGym's `sparse_mla` (DESIGN 2c): `fearless.ops.sparse_mla`, DeepSeek's sparse multi-head
latent attention forward, on the kernel of ops/kernels_attention_mla_sparse.py; and the fearless
error an index outside the cache becomes.

What it takes (TileGym 1.5.1's ops.py and cutile/experimental/sparse_mla.py): q (B, H, S, D),
k, v (B, H_kv, S_kv, D), indices (B, S, H_kv, topk) int32, qpe (B, H, S, D_PE), kpe
(B, 1, S_kv, D_PE); H a multiple of H_kv (query head h reads KV group h // (H / H_kv) and its
row of indices); f32, f16 or bf16, one dtype. Query s of head h attends only to the keys
indices[b, s, g, :] names: scores (q k^T + qpe kpe^T) * scaling (default 1 / sqrt(D + D_PE)),
`is_causal` drops an index above s (TileGym's; its kernel refuses is_causal=False, its
reference computes it, as we do). Returns (B, H, S, D). A row that keeps no key is 0 (TileGym's
gives NaN). topk need not be a multiple of the tile. Forward only.

An index outside [0, S_kv) never reads outside the cache (the kernel clamps its address, masks
its gather and drops its score) and is not silent: the kernel records the first such row and it
is raised as a KernelIndexError naming indices[b, s, g, j] at the next synchronisation: on the
simulator at the call itself, on the GPU at `fl.synchronize()` (ops/_device_checks.py, whose
words and check registration a replay keeps: the operator is @replayable).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import KernelIndexError, KernelTypeError
from ..runtime.location import Location, argument_error
from ._arguments import flag
from ._attention_checks import attention_scale
from ._device_checks import NO_ERROR, check_after, host_values, since, words
from ._io import float_operands, operand, output, result, view, zeros_output
from ._replay import replayable
from ._route import torch_ops
from .kernels_attention_mla_sparse import sparse_mla_tuned

OP = "sparse_mla"


@replayable()
def sparse_mla(
    q: Any,
    k: Any,
    v: Any,
    indices: Any,
    qpe: Any,
    kpe: Any,
    is_causal: bool = True,
    scaling: float | None = None,
) -> Any:
    """TileGym's `sparse_mla`: MLA of q, qpe (B, H, S, D / D_PE) over the keys of k, v
    (B, H_kv, S_kv, D) and kpe (B, 1, S_kv, D_PE) that `indices` (B, S, H_kv, topk) int32
    names per query; `is_causal` drops an index above the query's position. Forward only (no
    backward yet). An index outside [0, S_kv) is a KernelIndexError; nothing outside the cache
    is read."""
    is_causal = flag(is_causal, "sparse_mla", "is_causal")
    if (t := torch_ops(q, k, v, indices, qpe, kpe)) is not None:
        return t.sparse_mla(q, k, v, indices, qpe, kpe, is_causal, scaling)
    qa, ka, va, pa, kpa = float_operands(OP, q=q, k=k, v=v, qpe=qpe, kpe=kpe)
    ia = operand(indices, OP, "indices", (dtypes.i32,), device=qa.tensor.device)
    if len({x.dtype for x in (qa, ka, va, pa, kpa)}) != 1:
        raise _mismatch(f"dtypes {[x.dtype.name for x in (qa, ka, va, pa, kpa)]}")
    if any(len(x.shape) != 4 for x in (qa, ka, va, pa, kpa, ia)):
        raise _mismatch(f"shapes {[x.shape for x in (qa, ka, va, pa, kpa, ia)]}")
    (b, h, s, d), (_, hk, s_kv, _), dp = qa.shape, ka.shape, pa.shape[3]
    if (
        ka.shape != va.shape
        or ka.shape[0] != b
        or ka.shape[3] != d
        or not hk
        or h % hk
        or pa.shape[:3] != (b, h, s)
        or not dp
        or kpa.shape != (b, 1, s_kv, dp)
        or ia.shape[:3] != (b, s, hk)
    ):
        raise _mismatch(f"shapes {[x.shape for x in (qa, ka, va, pa, kpa, ia)]}")
    topk = ia.shape[3]
    sc = attention_scale(scaling, d + dp, OP, "scaling")
    if not topk or not s_kv:  # no key for any query: every row is 0
        return result(qa, *zeros_output(qa, qa.shape))
    out, ret = output(qa, qa.shape)
    if out.size:
        g = h // hk
        q5, p5, o5 = (view(x, (b, hk, g, s, x.shape[3])) for x in (qa.tensor, pa.tensor, out))
        err, pending = words(qa, (OP,), 1)
        sparse_mla_tuned(q5, p5, ka.tensor, va.tensor, kpa.tensor, ia.tensor, err, o5, sc,
                         is_causal)  # fmt: skip
        check_after(err, pending, functools.partial(_Check, s_kv), ia.tensor)
    return result(qa, out, ret)


class _Check:
    """The kernel's error word read for one call (ops/_device_checks.py): the first index
    outside the cache as a KernelIndexError at the call's line. `indices` is the call's (an
    fl.Tensor, or a replay's torch tensor)."""

    def __init__(self, s_kv: int, indices: Any, loc: Location | None) -> None:
        self.s_kv, self.indices, self.loc = s_kv, indices, loc

    def raise_for(self, words: np.ndarray, calls: int = 1) -> None:
        row = int(words[0])
        if row == NO_ERROR:
            return
        _, s, hk, topk = self.indices.shape
        bb, rest = divmod(row, s * hk)
        ss, g = divmod(rest, hk)
        ids = host_values(self.indices).reshape(-1, topk)[row] if calls == 1 else np.zeros(0)
        bad = np.flatnonzero((ids < 0) | (ids >= self.s_kv))
        if not len(bad):  # after several launches or a graph's, or changed since: no value
            raise KernelIndexError(
                f"an index of indices[{bb}, {ss}, {g}] is outside the cache's {self.s_kv} keys "
                f"{since(calls)}",
                self.loc,
                label="key index out of range",
                notes=["the kernel read nothing outside the cache and dropped its score"],
                help="synchronise (`fl.synchronize()`) after a call to name its launch and value",
            )
        j = int(bad[0])
        raise KernelIndexError(
            f"indices[{bb}, {ss}, {g}, {j}] = {int(ids[j])} is outside the cache's {self.s_kv} "
            "keys",
            self.loc,
            label="key index out of range",
            notes=[
                "the kernel clamped its address, read nothing outside the cache and dropped "
                "its score"
            ],
            help="every index must be in [0, S_kv) (TileGym has no sentinel value; fill unused "
            "slots with a future position, which the causal mask drops)",
        )


def _mismatch(what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{OP}` needs q (B, H, S, D), k, v (B, H_kv, S_kv, D), indices "
        "(B, S, H_kv, topk) int32, qpe (B, H, S, D_PE >= 1) and kpe (B, 1, S_kv, D_PE), one "
        f"float dtype, H a multiple of H_kv, got {what}",
    )
