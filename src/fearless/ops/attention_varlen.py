"""TileGym's attention over a batch of sequences of their own lengths (DESIGN 2c):
`fearless.ops.fmha_varlen`, on the kernel of ops/kernels_attention_varlen.py, and TileGym's
single-token decode `fearless.ops.fmha_decode`, on the split-KV decode kernels of
ops/kernels_attention_decode.py.

fmha_varlen's layout is TileGym's (its cuTile backend's `tile_fmha_varlen` and `_fmha_varlen_kernel`):
padded, not packed: q of (B, H, L, D) and k, v of (B, H_kv, S, D), H a multiple of H_kv (query
head h reads KV head h // (H / H_kv)), f32, f16 or bf16 of one dtype; sequence b holds its first
q_lens[b] queries and kv_lens[b] keys (q_lens / kv_lens: None for all L / S, or B lengths as a
list, a tuple, or an integer tensor of (B,), which the kernel reads where it lives). Sequence b's
queries see only its own first kv_lens[b] keys; causal: query i sits at i + kv_lens[b] -
q_lens[b] (bottom-right aligned per sequence, as `fmha`). Where TileGym leaves them undefined,
fearless gives 0: the padded query rows (i >= q_lens[b]) and a query that sees no key. Lengths
known on the host (lists, NumPy, CPU tensors, fl.Tensors on the simulator) are checked (0..L,
0..S, B of them); lengths on the GPU are clamped to 0..L and 0..S inside the kernel, never read
past. fmha_varlen's backward (`fmha_varlen_backward`, torch autograd's through
ops/torch_ops_attention.py) is flash attention's backward kernels with the lengths read inside them
(ops/kernels_attention_ragged_backward.py): 0 for the padded rows and keys. fmha_decode is
forward only: an input that requires grad is refused at the call (ops/torch_ops.py), never
detached. `grouped_decode` holds the checks and the output of a grouped-query decode, which
fmha_decode shares with `gemma_attention_decode` (ops/attention_variants.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..runtime.location import argument_error
from ._arguments import flag, shape_of
from ._attention_checks import (
    attention_scale,
    check_length_list,
    check_lengths,
    decode_operands,
    qkv_mismatch,
    qkv_operands,
    sequence_lengths,
    split_len,
)
from ._attention_outputs import attention_output, decode_views, qkv_backward
from ._io import FLOATS, Operand, operand, result, view
from ._replay import replayable
from ._route import torch_ops
from .kernels_attention_decode import attention_decode, attention_decode_split
from .kernels_attention_ragged_backward import varlen_attention_backward
from .kernels_attention_varlen import attention_varlen_tuned
from .kernels_rows import sm_count


@replayable()
def fmha_varlen(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None = None,
    is_causal: bool = True,
    q_lens: Any = None,
    kv_lens: Any = None,
) -> Any:
    """TileGym's `fmha_varlen`: per sequence b of the batch, softmax(q k^T * scaling) v of its
    first q_lens[b] queries of q (B, H, L, D) over its first kv_lens[b] keys of k, v
    (B, H_kv, S, D); `is_causal` bottom-right aligned per sequence. Returns (B, H, L, D), 0 in
    the padded rows. Its backward (torch autograd, `fmha_varlen_backward`) gives q, k, v their
    gradients (0 in the padded rows and keys)."""
    is_causal = flag(is_causal, "fmha_varlen", "is_causal")
    if (t := torch_ops(q, k, v, q_lens, kv_lens)) is not None:
        if len(shape_of(q)) != 4 or len(shape_of(k)) != 4:
            raise argument_error(
                "`fearless.ops.fmha_varlen` takes q (B, H, L, D) and k, v (B, H_kv, S, D), got "
                f"q of shape {shape_of(q)} and k of shape {shape_of(k)}",
                help="pass 4-d tensors, heads before the sequence",
            )
        b, lq, s = q.shape[0], q.shape[2], k.shape[2]
        ql = _lens_torch(q_lens, q, b, lq, "q_lens")
        kl = _lens_torch(kv_lens, q, b, s, "kv_lens")
        return t.fmha_varlen(q, k, v, scaling, is_causal, ql, kl)
    op = "fmha_varlen"
    qa, ka, va = qkv_operands(op, q, k, v)
    (_, h, _, d), (_, hk, s, _) = qa.shape, ka.shape
    sc = attention_scale(scaling, d, op, "scaling")
    ql, kl = _lengths(q_lens, kv_lens, qa, s)
    out, ret = attention_output(qa, qa.shape, s)  # no keys: every row is 0
    if s and out.size:
        q4, k4, v4, o4 = (view(x, x.shape) for x in (qa.tensor, ka.tensor, va.tensor, out))
        attention_varlen_tuned(q4, k4, v4, ql, kl, o4, sc, is_causal, h // hk)
    return result(qa, out, ret)


@replayable()
def fmha_varlen_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    scaling: float | None = None,
    is_causal: bool = True,
    q_lens: Any = None,
    kv_lens: Any = None,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of `fmha_varlen(q, k, v, scaling, is_causal, q_lens, kv_lens)`, whose
    result was `out`, for the gradient `dout` of that result (flash attention's backward with
    the lengths read in the kernels): 0 in the padded query rows and keys."""
    op = "fmha_varlen_backward"
    qa, ka, va = qkv_operands(op, q, k, v)
    dev = qa.tensor.device
    ga, oa = (operand(x, op, n, FLOATS, device=dev) for x, n in ((dout, "dout"), (out, "out")))
    if ga.dtype != qa.dtype or oa.dtype != qa.dtype:
        raise qkv_mismatch(op, f"dtypes {ga.dtype.name}, {qa.dtype.name} and {oa.dtype.name}")
    if ga.shape != qa.shape or oa.shape != qa.shape:
        raise qkv_mismatch(op, f"dout {ga.shape}, q {qa.shape} and out {oa.shape}")
    (_, h, _, d), (_, hk, s, _) = qa.shape, ka.shape
    sc = attention_scale(scaling, d, op, "scaling")
    ql, kl = _lengths(q_lens, kv_lens, qa, s)

    def launch(q4: Any, k4: Any, v4: Any, o4: Any, g4: Any, dq4: Any, dk4: Any, dv4: Any) -> None:
        varlen_attention_backward(
            q4, k4, v4, ql, kl, o4, g4, dq4, dk4, dv4, sc, bool(is_causal), h // hk
        )

    return qkv_backward(qa, ka, va, oa, ga, s, launch)


@replayable()
def fmha_decode(
    q: Any, k: Any, v: Any, sm_scale: float | None, kv_len_per_split: int | None = None
) -> Any:
    """TileGym's `fmha_decode` (grouped-query decode of one token): softmax(q k^T * sm_scale) v
    of q (B, H, 1, D) over every key of k, v (B, H_kv, S, D), not causal; sm_scale None:
    1 / sqrt(D). The keys split across blocks, each split's partial output and log-sum-exp
    combined by a second kernel: kv_len_per_split (a power of two, 16 or more) keys per split,
    or None to choose the split from the batch and the GPU. Returns (B, H, 1, D). Forward
    only (no backward yet)."""
    op = "fmha_decode"
    split_len(kv_len_per_split, op)
    if (t := torch_ops(q, k, v)) is not None:
        return t.fmha_decode(q, k, v, sm_scale, kv_len_per_split)

    def launch(qd: Any, k4: Any, v4: Any, od: Any, sc: float, s: int) -> None:
        if kv_len_per_split is None:
            attention_decode(qd, k4, v4, od, sc, sm_count())
        else:
            attention_decode_split(qd, k4, v4, od, sc, kv_len_per_split)

    return grouped_decode(op, q, k, v, "fmha", sm_scale, "sm_scale", launch)


def grouped_decode(
    op: str,
    q: Any,
    k: Any,
    v: Any,
    form: str,
    scaling: Any,
    scale_name: str,
    launch: Callable[[Any, Any, Any, Any, float, int], None],
) -> Any:
    """A grouped-query decode of one token (fmha_decode's, gemma_attention_decode's): q
    (B, H, 1, D) and k, v (B, H_kv, S, D) checked (`form` the prefill operator an error points
    to), the scale `scaling` (`scale_name` its keyword; None: 1 / sqrt(D)), the output made
    (zeros where there are no keys), and `launch(q, k, v, out, scale, S)` run with q and out
    grouped per KV head (B, H_kv, H / H_kv, D) where there are keys. Returns the output."""
    qa, ka, va = decode_operands(op, q, k, v, form)
    (_, _, _, d), (_, hk, s, _) = qa.shape, ka.shape
    sc = attention_scale(scaling, d, op, scale_name)
    out, ret = attention_output(qa, qa.shape, s)  # no keys: every row is 0
    if s and out.size:
        qd, od = decode_views(qa.tensor, out, qa.shape, hk)
        launch(qd, ka.tensor, va.tensor, od, sc, s)
    return result(qa, out, ret)


def _lengths(q_lens: Any, kv_lens: Any, qa: Operand, s: int) -> tuple[Any, Any]:
    """fmha_varlen's (q_lens, kv_lens) as the (B,) i32 tensors the kernels read, checked against
    q's L and k's S."""
    b, _, lq, _ = qa.shape
    ql = sequence_lengths(q_lens, qa, b, lq, "q_lens", "L (q's axis 2)", "fmha_varlen")
    kl = sequence_lengths(kv_lens, qa, b, s, "kv_lens", "S (k's axis 2)", "fmha_varlen")
    return ql, kl


def _lens_torch(x: Any, like: Any, b: int, limit: int, name: str) -> Any:
    """Lengths as the torch operator takes them: None, or an integer tensor (a list checked,
    then made an int32 tensor beside `like`; while torch.compile traces, checked in plain
    Python, which its tracer follows)."""
    if isinstance(x, (list, tuple)):
        torch = sys.modules["torch"]
        if torch.compiler.is_compiling():
            listed = check_length_list(list(x), b, limit, name, "axis", "fmha_varlen")
        else:
            vals = np.asarray(x, dtype=object)
            listed = check_lengths(vals, b, limit, name, "axis", "fmha_varlen")
        return torch.tensor(listed, dtype=torch.int32, device=like.device)
    return x
