"""flash-attn's `flash_attn_with_kvcache` (DESIGN 2c): `fearless.ops.flash_attn_with_kvcache`,
attention of new queries over a KV cache, contiguous or paged through a block table, on the
kernel of ops/kernels_kvcache.py (one new query, a decode step: the split-KV kernels of
ops/kernels_kvcache_decode.py); and the fearless error a bad block table or length becomes.

What it takes (flash-attn 2's names and layouts, flash_attn/flash_attn_interface.py's
docstring): q (B, L, H, D); k_cache, v_cache (B_cache >= B, S_cache, H_kv, D), or with
`block_table` (B, MB) int32 (num_blocks, PAGE, H_kv, D): sequence b's cache position p lives in
block block_table[b, p // PAGE] at row p % PAGE; `cache_seqlens` None (the whole cache), an int,
or a (B,) int32 tensor (read inside the kernel: no host sync); H a multiple of H_kv (query head
h reads KV head h // (H / H_kv)); f32, f16 or bf16, one dtype. Query i of sequence b sits at
position cache_seqlens[b] - L + i: `causal` keeps keys up to it (bottom-right aligned),
`window_size` (left, right) keeps keys in [pos - left, pos + right] (-1: unbounded; causal sets
right to 0, as flash-attn); `softcap` > 0 caps the scaled scores, softcap * tanh(s / softcap),
before the softmax; `softmax_scale` defaults to 1 / sqrt(D). Returns (B, L, H, D) in q's dtype;
a row that sees no key is 0. Forward only, without flash-attn's optional k / v append, rotary,
cache_batch_idx, alibi and lse outputs.

A bad table or length (an id outside [0, num_blocks) in a slot sequence b uses, or a length
outside [0, capacity]) never reads another block (the kernel clamps and masks): the kernel
records it, and it is raised as a KernelIndexError naming the sequence and the slot at the next
synchronisation: on the simulator at the call itself (each launch runs to completion there), on
the GPU at `fl.synchronize()` (ops/_device_checks.py, whose words and check registration a
replay keeps: the operator is @replayable, so a decode loop's calls cost a replay's few
microseconds and are checked all the same). An int cache_seqlens out of range is refused at the
call.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from typing import Any

from .. import dtypes
from ..errors import KernelIndexError, KernelTypeError
from ..runtime.location import Location, argument_error, user_location
from ._arguments import flag
from ._attention_checks import attention_scale
from ._device_checks import NO_ERROR, check_after, host_values, since, words
from ._io import FLOATS, Operand, full, number, operand, output, result, view, zeros_output
from ._replay import replayable
from ._route import torch_ops
from .kernels_kvcache import kvcache_attention_tuned
from .kernels_kvcache_decode import kvcache_decode_tuned
from .kernels_rows import sm_count

OP = "flash_attn_with_kvcache"
# One new query (L = 1) runs the split-KV decode of ops/kernels_kvcache_decode.py; False sends it
# to the general kernel too (the tests' and `fearless tune`'s way to reach both tuners).
SPLIT_KV_DECODE = True


@replayable()
def flash_attn_with_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    cache_seqlens: Any = None,
    block_table: Any = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
) -> Any:
    """flash-attn's `flash_attn_with_kvcache` (no append): softmax(cap(q k^T * scale)) v of q
    (B, L, H, D) over sequence b's first cache_seqlens[b] cache entries, contiguous
    (B_cache, S_cache, H_kv, D) or paged through `block_table`; query i at position
    cache_seqlens[b] - L + i. Returns (B, L, H, D). Forward only."""
    causal = flag(causal, "flash_attn_with_kvcache", "causal")
    if (t := torch_ops(q, k_cache, v_cache, cache_seqlens, block_table)) is not None:
        left, right = window_bounds(window_size, causal)
        return t.flash_attn_with_kvcache(
            q, k_cache, v_cache, _seqlens_tensor(cache_seqlens, q), block_table, softmax_scale,
            causal, [left, right], float(softcap),
        )  # fmt: skip
    return _attend(q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, causal,
                   window_size, softcap)  # fmt: skip


def _seqlens_tensor(cache_seqlens: Any, q: Any) -> Any:
    """An int cache_seqlens as the torch operator's (B,) int32 tensor beside q (checked as the
    tensor is: in the kernel)."""
    if cache_seqlens is None or hasattr(cache_seqlens, "shape"):
        return cache_seqlens
    torch = sys.modules["torch"]
    n = max(min(_seqlens_int(cache_seqlens), 2**31 - 1), -(2**31))
    if not isinstance(q, torch.Tensor):  # the dispatcher refuses q next
        return torch.full((1,), n, dtype=torch.int32)
    return torch.full((q.shape[0],), n, dtype=torch.int32, device=q.device)


def _seqlens_int(n: Any) -> int:
    """cache_seqlens given as no tensor: an int (not a bool), else E0701."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise argument_error(
            f"`cache_seqlens` of `fearless.ops.{OP}` must be None, an int or a (batch,) int32 "
            f"tensor, not {type(n).__name__}",
        )
    return n


def window_bounds(window_size: Any, causal: bool, op: str = OP) -> tuple[int, int]:
    """flash-attn's `window_size` as (left, right), -1 unbounded, with right 0 where causal
    (flash-attn's rule), or a fearless error naming `op`."""
    try:
        left, right = (operator.index(w) for w in window_size)
        if isinstance(window_size[0], bool) or isinstance(window_size[1], bool):
            raise TypeError
    except (TypeError, ValueError):
        raise argument_error(
            f"`window_size` of `fearless.ops.{op}` must be two ints (left, right), got "
            f"{window_size!r:.60}",
            help="pass (-1, -1) for no window, e.g. (256, 0) for 256 keys before each query",
        ) from None
    if left < -1 or right < -1 or max(left, right) > 2**31 - 1:
        raise argument_error(
            f"`window_size` of `fearless.ops.{op}` must hold ints of -1 (unbounded) or more, "
            f"got {window_size!r}",
        )
    return left, 0 if causal else right


def soft_cap(softcap: Any, op: str = OP) -> float:
    """flash-attn's `softcap` (0: none), or a fearless error naming `op`."""
    cap = number(softcap, op, "softcap")
    if not cap >= 0.0 or math.isinf(cap):
        raise argument_error(
            f"`softcap` of `fearless.ops.{op}` must be 0 (none) or above, finite, got {softcap!r}"
        )
    return cap


def _attend(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    cache_seqlens: Any,
    block_table: Any,
    softmax_scale: Any,
    causal: Any,
    window_size: Any,
    softcap: Any,
) -> Any:
    """The checks, the kernel, then the device check of the table and lengths."""
    qa = operand(q, OP, "q", FLOATS)
    dev = qa.tensor.device
    ka, va = (operand(x, OP, n, FLOATS, device=dev) for x, n in ((k_cache, "k_cache"),
                                                                (v_cache, "v_cache")))  # fmt: skip
    if not qa.dtype == ka.dtype == va.dtype:
        raise _mismatch(f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}")
    if len(qa.shape) != 4 or len(ka.shape) != 4 or va.shape != ka.shape:
        raise _mismatch(f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    (b, lq, h, d), (nb, rows, hk, dk) = qa.shape, ka.shape
    if dk != d or not hk or h % hk:
        raise _mismatch(f"shapes {qa.shape}, {ka.shape}: D differs or H not a multiple of H_kv")
    table = None
    if block_table is None:
        if nb < b:
            raise _mismatch(f"a cache of {nb} sequences for {b} queries' sequences")
        capacity = rows
    else:
        ta = operand(block_table, OP, "block_table", (dtypes.i32,), device=dev)
        if len(ta.shape) != 2 or ta.shape[0] != b or not ta.shape[1]:
            raise argument_error(
                f"`block_table` of `fearless.ops.{OP}` must be (batch, max_num_blocks_per_seq) "
                f"= ({b}, MB >= 1), got {ta.shape}",
            )
        table, capacity = ta, ta.shape[1] * rows
    left, right = window_bounds(window_size, bool(causal))
    scale = attention_scale(softmax_scale, d, OP, "softmax_scale")
    cap = soft_cap(softcap)
    seqlens = _seqlens(cache_seqlens, qa, b, capacity)
    out, ret = output(qa, (b, lq, h, d)) if capacity else zeros_output(qa, (b, lq, h, d))
    if capacity and out.size:
        mb = 0 if table is None else table.shape[1]
        err, pending = words(qa, (OP, mb))
        tt = None if table is None else table.tensor
        if lq == 1 and SPLIT_KV_DECODE:  # a decode step: split-KV, a KV head's query heads packed
            q1, o1 = view(qa.tensor, (b, hk, h // hk, d)), view(out, (b, hk, h // hk, d))
            kvcache_decode_tuned(
                q1, ka.tensor, va.tensor, seqlens, tt, err, o1, scale, (left >= 0, cap > 0.0),
                max(left, 0), cap or 1.0, sm_count(),
            )  # fmt: skip
        else:
            flags = (bool(causal), left >= 0, right >= 0, cap > 0.0)
            kvcache_attention_tuned(
                qa.tensor, ka.tensor, va.tensor, seqlens, tt, err, out, scale, h // hk, flags,
                max(left, 0), max(right, 0), cap or 1.0,
            )  # fmt: skip
        check_after(err, pending, functools.partial(_Check, b, nb, capacity, rows), tt, seqlens)
    return result(qa, out, ret)


def _seqlens(cache_seqlens: Any, qa: Operand, b: int, capacity: int) -> Any:
    """The (B,) i32 tensor of lengths the kernel reads (an int or None filled beside q)."""
    if (
        cache_seqlens is None
        or isinstance(cache_seqlens, int)
        or not hasattr(cache_seqlens, "shape")
    ):
        n = capacity if cache_seqlens is None else _seqlens_int(cache_seqlens)
        if not 0 <= n <= capacity:
            raise KernelIndexError(
                f"cache_seqlens = {n} is outside the cache's {capacity} positions",
                user_location(),
                help="each sequence uses between 0 and (the cache's rows, or "
                "max_num_blocks_per_seq * page_block_size) positions",
            )
        return full(qa, (b,), n, dtypes.i32)
    sa = operand(cache_seqlens, OP, "cache_seqlens", (dtypes.i32,), device=qa.tensor.device)
    if sa.shape != (b,):
        raise argument_error(
            f"`cache_seqlens` of `fearless.ops.{OP}` must have shape (batch,) = ({b},), got "
            f"{sa.shape}",
        )
    return sa.tensor


class _Check:
    """The kernel's error words read for one call (ops/_device_checks.py): the first bad slot
    or length as a KernelIndexError at the call's line. `table` and `seqlens` are the call's
    (fl.Tensors, or a replay's torch tensors)."""

    def __init__(
        self, b: int, nb: int, capacity: int, page: int, table: Any, seqlens: Any,
        loc: Location | None,
    ) -> None:  # fmt: skip
        self.table, self.seqlens, self.loc = table, seqlens, loc
        self.b, self.nb, self.capacity, self.page = b, nb, capacity, page

    def raise_for(self, words: Any, calls: int = 1) -> None:
        """Raise what the error words record (nothing when they record nothing). After
        `calls` > 1 launches (0: the replays of a captured graph) the words may be another
        launch's: the sequence and slot are named, the values this launch passed are not."""
        bad_slot, bad_len = (int(w) for w in words)
        if calls != 1 and (bad_slot, bad_len) != (NO_ERROR, NO_ERROR):
            if bad_len != NO_ERROR:
                what = f"cache_seqlens[{bad_len}] is outside the cache"
            else:
                mb = self.table.shape[1] if self.table is not None else 1
                what = f"block_table[{bad_slot // mb}, {bad_slot % mb}] is outside the cache"
            raise KernelIndexError(
                f"{what} {since(calls)}",
                self.loc,
                label="out of range",
                notes=["the kernel clamped it and read nothing outside the cache"],
                help="synchronise (`fl.synchronize()`) after a call to name its launch and value",
            )
        if bad_len != NO_ERROR:
            n = int(host_values(self.seqlens).reshape(-1)[bad_len])
            raise KernelIndexError(
                f"cache_seqlens[{bad_len}] = {n} is outside the cache's {self.capacity} positions",
                self.loc,
                label="cache length out of range",
                notes=["the kernel clamped it and read nothing outside the cache"],
                help="each sequence uses between 0 and (the cache's rows, or "
                "max_num_blocks_per_seq * page_block_size) positions",
            )
        if bad_slot != NO_ERROR and self.table is not None:
            mb = self.table.shape[1]
            seq, slot = divmod(bad_slot, mb)
            ids = host_values(self.table)
            n = int(host_values(self.seqlens).reshape(-1)[seq])
            used = -(-n // self.page)
            raise KernelIndexError(
                f"block_table[{seq}, {slot}] = {int(ids[seq, slot])} is outside the cache's "
                f"{self.nb} blocks",
                self.loc,
                label="block id out of range",
                notes=[
                    f"cache_seqlens[{seq}] = {n}: sequence {seq} uses slots 0..{used - 1} of its "
                    "row of block_table; the kernel read no key of that block",
                ],
                help="every block id a sequence uses must be in [0, num_blocks)",
            )


def _mismatch(what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{OP}` needs q (B, L, H, D) and k_cache, v_cache (B_cache >= B, S, H_kv, "
        f"D) or (num_blocks, page_block_size, H_kv, D) of one dtype, got {what}",
    )
