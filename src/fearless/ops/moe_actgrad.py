"""TileGym's `moe_actgrad_bwd` (DESIGN 2c): the MoE down-projection's activation-gradient
backward, written into its caller's dh, ds and a_prime, on the kernel of
ops/kernels_moe_actgrad.py; and the checks that make a bad routing a fearless error.

What it takes (TileGym 1.5.1's `tilegym.ops.moe_actgrad_bwd` docstring and cuTile backend):
dout (T, H), the upstream gradient in token order; h (TK, N), the pre-activations in grouped
order (expert e's rows are expert_frequency_offset[e] .. [e + 1]), N = 2I for the GLU forms
(gate columns [0, I), up columns [I, 2I): split, not interleaved), N = I else; w2 (E, I, H);
topk_scores, the routing scores (flat: any shape, read as its T * K values);
expert_frequency_offset (E + 1,), x_gather_idx (TK,) (row r's token in dout) and s_scatter_idx
(TK,) (row r's score), int32 or int64. With dy1[r] = dout[x_gather_idx[r]] @ w2[e]^T (e: r's
expert) and s[r] = topk_scores[s_scatter_idx[r]]:

    dh = act'(h) dy1 * s  (GLU: d gate = dy1 * up * act'(gate), d up = dy1 * act(gate), each * s)
    a_prime = act(h) * s  (GLU: act(gate) * up * s)
    ds += sum over I of dy1 * act(h)  (unscaled; TileGym's ds must be zeroed: it adds)

for activation_type "swiglu", "geglu", "reglu" (the GLU forms), "silu", "relu", "gelu" (exact,
erf) or "relu_sq". dout, h, w2, dh and a_prime share one dtype (f32, f16, bf16); ds is f32;
the scores may be any of those (read as f32). b2 and db2 are accepted and unused, as TileGym's
(`del b2, db2`): db2 is not written. max_tokens_per_expert (TileGym's grid bound) is checked
against the offsets and otherwise unneeded. Returns None.

Refused before any launch: shapes and dtypes that do not fit; offsets that do not start at 0,
decrease, or do not end at TK; an x_gather_idx entry outside [0, T) or an s_scatter_idx entry
outside the scores (KernelIndexError); an output that shares memory with another argument
(BorrowError), TileGym's data race. The offsets and indices are read on the host for these
checks (a wait for the GPU where they live there, as fused_moe's topk ids), so the operator is
not `@replayable`. The kernel itself is bounds-checked whatever it is given.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import KernelIndexError, KernelTypeError
from ..runtime.location import argument_error, user_location
from ._arguments import index, one_of
from ._io import (
    FLOATS,
    Operand,
    cast,
    flat,
    operand,
    refuse_grad,
    refuse_overlap,
    view,
    write_back,
)
from ._route import clean_op_errors, torch_ops
from .kernels_moe_actgrad import ACTIVATIONS, GLU, actgrad_tuned

OP = "moe_actgrad_bwd"
INTS = (dtypes.i32, dtypes.i64)


@clean_op_errors
def moe_actgrad_bwd(
    dout: Any,
    h: Any,
    w2: Any,
    dh: Any,
    ds: Any,
    b2: Any,
    db2: Any,
    a_prime: Any,
    topk_scores: Any,
    expert_frequency_offset: Any,
    x_gather_idx: Any,
    s_scatter_idx: Any,
    activation_type: str,
    max_tokens_per_expert: int | None = None,
) -> None:
    """TileGym's `moe_actgrad_bwd`: dh, a_prime and ds (added to) of the MoE down-projection
    for `activation_type`, over each expert's group of rows (see the module docstring)."""
    tensors = dict(
        dout=dout, h=h, w2=w2, dh=dh, ds=ds, a_prime=a_prime, topk_scores=topk_scores,
        expert_frequency_offset=expert_frequency_offset, x_gather_idx=x_gather_idx,
        s_scatter_idx=s_scatter_idx,
    )  # fmt: skip
    refuse_grad(OP, **tensors)
    kind = _activation(activation_type)
    limit = _limit(max_tokens_per_expert)
    if (t := torch_ops(*tensors.values(), b2, db2)) is not None:
        t.moe_actgrad_bwd(
            dout, h, w2, dh, ds, b2, db2, a_prime, topk_scores, expert_frequency_offset,
            x_gather_idx, s_scatter_idx, kind, limit,
        )  # fmt: skip
        return
    ops = _operands(tensors, kind)
    refuse_overlap(OP, ops, ("dh", "ds", "a_prime"))
    tk, inter = ops["h"].shape[0], ops["w2"].shape[1]
    offsets, src, slot = (_host(ops[n]) for n in ("expert_frequency_offset", "x_gather_idx",
                                                   "s_scatter_idx"))  # fmt: skip
    _check_offsets(offsets, tk, limit)
    _check_index(src, "x_gather_idx", ops["dout"].shape[0], "dout's tokens (T = dout.shape[0])")
    _check_index(slot, "s_scatter_idx", ops["topk_scores"].tensor.size, "topk_scores' values")
    if tk == 0 or inter == 0:
        return
    g = 2 if kind in GLU else 1
    dh_t, ds_t, ap_t = ops["dh"].tensor, ops["ds"].tensor, ops["a_prime"].tensor
    actgrad_tuned(
        kind, view(dh_t, (tk, g, inter)), ap_t, ds_t, ops["dout"].tensor,
        view(ops["h"].tensor, (tk, g, inter)), ops["w2"].tensor,
        flat(cast(ops["topk_scores"], dtypes.f32)),
        *(cast(ops[n], dtypes.i32) for n in ("expert_frequency_offset", "x_gather_idx",
                                              "s_scatter_idx")),
    )  # fmt: skip
    for name in ("dh", "ds", "a_prime"):
        write_back(ops[name])


def _activation(activation_type: Any) -> str:
    wants = "one of " + ", ".join(repr(a) for a in ACTIVATIONS)
    hint = "TileGym's names: the GLU forms read h as [gate | up]"
    return one_of(activation_type, ACTIVATIONS, OP, "activation_type", wants, hint)


def _limit(value: Any) -> int | None:
    """max_tokens_per_expert: None or an int of 0 or more."""
    if value is None:
        return None
    n = index(value)
    if n is None:
        raise argument_error(
            f"`max_tokens_per_expert` of `fearless.ops.{OP}` must be None or an int, not "
            f"{type(value).__name__}",
        )
    if n < 0:
        raise argument_error(
            f"`max_tokens_per_expert` of `fearless.ops.{OP}` must be 0 or more, got {n}"
        )
    return n


def _operands(tensors: dict[str, Any], kind: str) -> dict[str, Operand]:
    """The tensor arguments as operands, their dtypes and shapes checked (E0701)."""
    d = operand(tensors["dout"], OP, "dout", FLOATS)
    dev = d.tensor.device
    ops = {"dout": d}
    for name in ("h", "w2", "dh", "a_prime", "topk_scores"):
        written = name in ("dh", "a_prime")
        ops[name] = operand(tensors[name], OP, name, FLOATS, device=dev, written=written)
    ops["ds"] = operand(tensors["ds"], OP, "ds", (dtypes.f32,), device=dev, written=True)
    for name in ("expert_frequency_offset", "x_gather_idx", "s_scatter_idx"):
        ops[name] = operand(tensors[name], OP, name, INTS, device=dev)
    names = ("dout", "h", "w2", "dh", "a_prime")
    if len({ops[n].dtype for n in names}) != 1:
        got = ", ".join(f"{n} {ops[n].dtype.name}" for n in names)
        raise _mismatch(f"dtypes {got}")
    w2 = ops["w2"].shape
    if len(ops["dout"].shape) != 2 or len(w2) != 3 or len(ops["h"].shape) != 2:
        raise _mismatch(f"dout {ops['dout'].shape}, h {ops['h'].shape} and w2 {w2}")
    (experts, inter, hidden), tk = w2, ops["h"].shape[0]
    width = 2 * inter if kind in GLU else inter
    want = {
        "dout": (ops["dout"].shape[0], hidden),
        "h": (tk, width),
        "dh": (tk, width),
        "a_prime": (tk, inter),
        "ds": (tk,),
        "expert_frequency_offset": (experts + 1,),
        "x_gather_idx": (tk,),
        "s_scatter_idx": (tk,),
    }
    for name, shape in want.items():
        if ops[name].shape != shape:
            glu = f" ({kind}: h is [gate | up], 2I = {width} columns)" if kind in GLU else ""
            raise _mismatch(
                f"`{name}` of shape {ops[name].shape} where {shape} fits w2 {w2} and h "
                f"{ops['h'].shape}{glu}"
            )
    return ops


def _host(x: Operand) -> np.ndarray:
    """x's values on the host, flat int64 (a copy back from the GPU where they live there)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x.original, torch.Tensor):
        values = x.original.detach().cpu().numpy()
    elif isinstance(x.original, np.ndarray):
        values = x.original
    else:
        values = x.tensor.numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _check_offsets(offsets: np.ndarray, tk: int, limit: int | None) -> None:
    """expert_frequency_offset: 0 first, non-decreasing, TK last; the largest group within
    max_tokens_per_expert where given."""
    name = f"`expert_frequency_offset` of `fearless.ops.{OP}`"
    why = "it is the exclusive prefix sum of the experts' token counts (h's grouped rows)"
    if offsets[0] != 0 or offsets[-1] != tk:
        raise argument_error(
            f"{name} must start at 0 and end at TK = {tk} (h's rows), got {int(offsets[0])} .. "
            f"{int(offsets[-1])}",
            help=why,
        )
    counts = np.diff(offsets)
    if (counts < 0).any():
        e = int(np.argmax(counts < 0))
        raise argument_error(
            f"{name} decreases at expert {e}: offset[{e}] = {int(offsets[e])} > offset[{e + 1}] "
            f"= {int(offsets[e + 1])}",
            help=why + ": non-decreasing",
        )
    most = int(counts.max(initial=0))
    if limit is not None and limit < most:
        raise argument_error(
            f"`max_tokens_per_expert` of `fearless.ops.{OP}` is {limit}, but expert "
            f"{int(np.argmax(counts))} has {most} tokens (expert_frequency_offset)",
            help="pass the largest group's size or more (TileGym's kernel would skip the rest "
            "of the rows), or None",
        )


def _check_index(values: np.ndarray, name: str, n: int, what: str) -> None:
    bad = np.flatnonzero((values < 0) | (values >= n))
    if len(bad):
        r = int(bad[0])
        raise KernelIndexError(
            f"`{name}[{r}]` of `fearless.ops.{OP}` is {int(values[r])}, outside 0..{n - 1} "
            f"({what}); {len(bad)} entr{'y' if len(bad) == 1 else 'ies'} out of range",
            user_location(),
            label="index out of range",
            help=f"each entry of `{name}` must be in [0, {n}): checked on the host before any "
            "launch",
        )


def _mismatch(what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{OP}` needs dout (T, H), h and dh (TK, N), w2 (E, I, H), a_prime "
        f"(TK, I), ds (TK,) f32, expert_frequency_offset (E + 1,) and x_gather_idx, "
        f"s_scatter_idx (TK,), N = 2I for the GLU forms, I else; dout, h, w2, dh and a_prime "
        f"of one dtype; got {what}",
    )
