"""TileGym's `fmha_variant` (DESIGN 2c): `fearless.ops.fmha_variant`, its arguments checked
and turned into the flags and operands of the kernel in ops/kernels_attention_fmha_variant.py.

One attention forward with its optional pieces: layout "bnsd" (q (B, N, S_q, D), k, v
(B, N_kv, S_kv, D)) or "nsbd" ((N, S, B, D)), N a multiple of N_kv (query head h reads KV head
h // (N / N_kv)), f32, f16 or bf16 of one dtype, v's head size its own (the output's); per
sequence lengths of a padded batch (q_lens, kv_lens) with causal bottom-right aligned per
sequence (query i sits at i + kv_len - q_len); a window; a vector, matrix or ALiBi bias added
to the scaled scores; a random mask; dropout with a seed (Triton's `tl.rand` mask). Where
TileGym leaves them undefined, fearless gives 0: padded query rows (i >= q_lens[b]) and a query
that sees no key. Forward only (TileGym has no backward): an input that requires grad is
refused at the call. Torch tensors run the kernels directly (no `torch.ops.fearless` entry yet,
so torch.compile does not trace it: it runs eagerly there, `_route.untraceable`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import dtypes
from ..runtime import trace
from ..runtime.location import argument_error
from ..runtime.tensor import Tensor
from ._arguments import flag, is_one_of
from ._attention_checks import attention_scale, broadcasts_over_heads, sequence_lengths
from ._io import FLOATS, Operand, float_operands, number, operand, output, result, zeros_output
from ._replay import replayable
from ._route import untraceable
from .kernels_attention_fmha_variant import fmha_variant_tuned

_OP = "fmha_variant"
_LAYOUTS = ("bnsd", "nsbd")
_BIAS_TYPES = ("vector", "matrix", "alibi")
_MASKS = (dtypes.bool_, dtypes.i8, dtypes.u8)
_MASK32 = 0xFFFFFFFF


@untraceable(_OP)  # no torch operator: never traced by torch.compile
@replayable()
def fmha_variant(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    is_causal: bool = True,
    q_lens: Any = None,
    kv_lens: Any = None,
    bias_type: str | None = None,
    bias: Any = None,
    dropout: float = 0.0,
    seed: int | None = None,
    window_size: int = 0,
    random_mask: Any = None,
    layout: str = "bnsd",
) -> Any:
    """TileGym's `fmha_variant`: softmax(q k^T * scaling + bias, masked) v, per sequence b of
    the batch over its first q_lens[b] queries and kv_lens[b] keys.

    - layout: "bnsd" (q (B, N, S_q, D), k, v (B, N_kv, S_kv, D)) or "nsbd" ((N, S, B, D));
      the output has q's layout and v's head size.
    - scaling: the scores' scale (None: 1 / sqrt(D)).
    - is_causal: query i sees keys j <= i + kv_len - q_len (bottom-right aligned).
    - q_lens, kv_lens: None (all S_q / S_kv), or B lengths (a list, a tuple, an int32 / int64
      tensor); rows i >= q_lens[b] give 0, keys j >= kv_lens[b] are masked.
    - bias_type None / "none", "vector" (bias (1 or B, 1 or N, 1, S_kv)), "matrix" (bias
      (1 or B, 1 or N, S_q, S_kv)), both added to the scaled scores, in q's dtype or f32; or
      "alibi": bias holds N slopes and -slope[h] * |i + kv_len - q_len - j| is added.
    - dropout: p in [0, 1) on the probabilities, kept ones divided by 1 - p; element
      (b, h, i, j) is kept where Triton's `tl.rand(seed, ((b * N + h) * S_q + i) * S_kv + j)`
      > p (TileGym's Triton kernel's mask, bit for bit). seed: a 64-bit integer, or None for
      `torch.initial_seed()` (0 without torch; TileGym reads it once, when it is imported).
    - window_size: 0 for none, else keys with |j - (i + kv_len - q_len)| > window_size masked.
    - random_mask: None or (1 or B, 1 or N, S_q, S_kv) bool, int8 or uint8: nonzero masks.
    A query that sees no key gives 0."""
    is_causal = flag(is_causal, _OP, "is_causal")
    if not is_one_of(layout, _LAYOUTS):
        raise argument_error(
            f"`layout` of `fearless.ops.{_OP}` must be 'bnsd' or 'nsbd', got {layout!r:.40}",
            help="'bnsd': (batch, heads, sequence, head dim); 'nsbd': (heads, sequence, batch, "
            "head dim)",
        )
    nsbd = layout == "nsbd"
    qa, ka, va = _qkv(q, k, v, nsbd)
    b, n, s_q, d = _bnsd(qa.shape, nsbd)
    _, n_kv, s_kv, dv = _bnsd(va.shape, nsbd)
    sc = attention_scale(scaling, d, _OP, "scaling")
    window = _window(window_size)
    p = _dropout(dropout)
    lo, hi = _seed(seed, p)
    ql = sequence_lengths(q_lens, qa, b, s_q, "q_lens", "S_q (q's sequence axis)", _OP)
    kl = sequence_lengths(kv_lens, qa, b, s_kv, "kv_lens", "S_kv (k's sequence axis)", _OP)
    bias_t, bias_form = _bias(bias_type, bias, qa, b, n, s_q, s_kv)
    mask_t, mask_form = _mask(random_mask, qa, b, n, s_q, s_kv)
    out_shape = (n, s_q, b, dv) if nsbd else (b, n, s_q, dv)
    if s_kv == 0:  # no key to see: every row is 0
        return result(qa, *zeros_output(qa, out_shape))
    out, ret = output(qa, out_shape)
    if out.size:
        flags = (nsbd, is_causal, window > 0, bias_form, mask_form, p > 0.0)
        scalars = (sc, min(window, s_q + s_kv), p, 1.0 - p, lo, hi, n // n_kv)
        fmha_variant_tuned(
            qa.tensor, ka.tensor, va.tensor, bias_t, mask_t, ql, kl, out, scalars, flags
        )
    return result(qa, out, ret)


def _bnsd(shape: tuple[int, ...], nsbd: bool) -> tuple[int, int, int, int]:
    """(B, N, S, D) of a tensor's shape in the layout."""
    if nsbd:
        return shape[2], shape[0], shape[1], shape[3]
    return shape[0], shape[1], shape[2], shape[3]


def _qkv(q: Any, k: Any, v: Any, nsbd: bool) -> tuple[Operand, Operand, Operand]:
    qa, ka, va = float_operands(_OP, q=q, k=k, v=v)
    form = "(N, S, B, D)" if nsbd else "(B, N, S, D)"
    what = f"shapes {qa.shape}, {ka.shape} and {va.shape}"
    if not qa.dtype == ka.dtype == va.dtype:
        what = f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}"
    elif len(qa.shape) == len(ka.shape) == len(va.shape) == 4:
        b, n, _, d = _bnsd(qa.shape, nsbd)
        bk, nk, sk, dk = _bnsd(ka.shape, nsbd)
        bv, nv, sv, _ = _bnsd(va.shape, nsbd)
        if b == bk == bv and nk == nv and nk and n % nk == 0 and sk == sv and dk == d > 0:
            return qa, ka, va
    raise argument_error(
        f"`fearless.ops.{_OP}` needs q {form.replace('N', 'N_q')} and k, v "
        f"{form.replace('N', 'N_kv')} in layout {'nsbd' if nsbd else 'bnsd'}, of one dtype, "
        f"k's head size q's (above 0), N_q a multiple of N_kv, got {what}",
        help="pass `layout='nsbd'` for (heads, sequence, batch, head dim) tensors",
    )


def _window(window_size: Any) -> int:
    if isinstance(window_size, bool) or not isinstance(window_size, (int, np.integer)):
        window_size = None
    if window_size is None or window_size < 0:
        raise argument_error(
            f"`window_size` of `fearless.ops.{_OP}` must be an int of 0 or more, got "
            f"{window_size!r:.40}",
            help="pass 0 for no window",
        )
    return int(window_size)


def _dropout(dropout: Any) -> float:
    p = number(dropout, _OP, "dropout")
    if not 0.0 <= p < 1.0:
        raise argument_error(
            f"`dropout` of `fearless.ops.{_OP}` must be in [0, 1), got {dropout!r:.40}",
            help="pass the probability of dropping an attention weight, e.g. `dropout=0.1`",
        )
    return p


def _seed(seed: Any, p: float) -> tuple[int, int]:
    """The kernel's seed as (low, high) 32-bit words of its 64 bits (two launch values under
    2**32, so that a replay never takes one for a pointer)."""
    if seed is None:
        value = 0
        if p > 0.0 and (torch := sys.modules.get("torch")) is not None:
            value = torch.initial_seed()
            trace.refuse("a seed read from torch")  # it may change between calls
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        value = int(seed)
        if not -(2**63) <= value < 2**64:
            raise argument_error(
                f"`seed` of `fearless.ops.{_OP}` must fit in 64 bits, got {value}",
                help="pass a seed in -2**63 .. 2**64 - 1",
            )
    else:
        raise argument_error(
            f"`seed` of `fearless.ops.{_OP}` must be an int or None, got {seed!r:.40}",
            help="pass an integer seed, e.g. `seed=0`",
        )
    value &= 2**64 - 1
    return value & _MASK32, value >> 32


def _bias(
    bias_type: Any, bias: Any, qa: Operand, b: int, n: int, s_q: int, s_kv: int
) -> tuple[Tensor | None, tuple | None]:
    """(the bias tensor, the kernel's bias_form) of `bias_type` and `bias`."""
    if bias_type is None or bias_type == "none":
        if bias is not None:
            raise argument_error(
                f"`fearless.ops.{_OP}` was given a bias but no bias_type",
                help="pass bias_type='vector', 'matrix' or 'alibi' with it",
            )
        return None, None
    if bias_type not in _BIAS_TYPES:
        raise argument_error(
            f"`bias_type` of `fearless.ops.{_OP}` must be None, 'vector', 'matrix' or 'alibi', "
            f"got {bias_type!r:.40}",
        )
    if bias is None:
        raise argument_error(
            f"`fearless.ops.{_OP}` has bias_type={bias_type!r} but no bias",
            help=_BIAS_HELP[bias_type],
        )
    ba = operand(bias, _OP, "bias", FLOATS, device=qa.tensor.device)
    if ba.dtype not in (qa.dtype, dtypes.f32):
        raise argument_error(
            f"`bias` of `fearless.ops.{_OP}` must be q's dtype ({qa.dtype.name}) or f32, got "
            f"{ba.dtype.name}",
        )
    if bias_type == "alibi":
        if ba.shape != (n,):
            raise argument_error(
                f"`bias` of `fearless.ops.{_OP}` with bias_type='alibi' holds one slope per "
                f"head, ({n},), got shape {ba.shape}",
                help=_BIAS_HELP["alibi"],
            )
        return ba.tensor, (bias_type, ba.dtype, False, False)
    rows = 1 if bias_type == "vector" else s_q
    shape = ba.shape
    if not broadcasts_over_heads(shape, b, n, rows, s_kv):
        raise argument_error(
            f"`bias` of `fearless.ops.{_OP}` with bias_type={bias_type!r} must be "
            f"(1 or {b}, 1 or {n}, {rows}, {s_kv}), got shape {shape}",
            help=_BIAS_HELP[bias_type],
        )
    return ba.tensor, (bias_type, ba.dtype, shape[0] > 1, shape[1] > 1)


_BIAS_HELP = {
    "vector": "a vector bias is (B, N, 1, S_kv): one value per key, added to every query's row",
    "matrix": "a matrix bias is (B, N, S_q, S_kv): one value per query and key",
    "alibi": "ALiBi's bias is the heads' slopes, (N,): -slope * distance is added",
}


def _mask(
    random_mask: Any, qa: Operand, b: int, n: int, s_q: int, s_kv: int
) -> tuple[Tensor | None, tuple | None]:
    """(the mask tensor, the kernel's mask_form) of `random_mask`."""
    if random_mask is None:
        return None, None
    ma = operand(random_mask, _OP, "random_mask", _MASKS, device=qa.tensor.device)
    shape = ma.shape
    if not broadcasts_over_heads(shape, b, n, s_q, s_kv):
        raise argument_error(
            f"`random_mask` of `fearless.ops.{_OP}` must be (1 or {b}, 1 or {n}, {s_q}, "
            f"{s_kv}) in any layout, got shape {shape}",
            help="nonzero (True) masks the key for that query",
        )
    mdt = dtypes.i8 if ma.dtype == dtypes.u8 else ma.dtype
    mt = ma.tensor if ma.dtype != dtypes.u8 else _as_i8(ma.tensor)
    return mt, (mdt, shape[0] > 1, shape[1] > 1)


def _as_i8(t: Tensor) -> Tensor:
    """A uint8 mask read as int8 (only zero or not matters), sharing its memory."""
    return Tensor._make(
        t._ptr,
        t.shape,
        dtypes.i8,
        on_device=t._on_device,
        owner=t,
        host=None if t._host is None else t._host.view(np.int8),
        device=t._device,
    )
