"""TileGym's mixture of experts (DESIGN 2c): `fearless.ops.moe_align_block_size` and
`fearless.ops.fused_moe`, on the kernels of ops/kernels_moe.py.

The layouts and meanings are TileGym 1.5.1's (`tilegym/ops/moe_interface.py`, its cuTile
backend's `moe_align_block.py` and `moe.py`, and the torch reference of `tests/ops/test_moe.py`):
  - topk_ids (T, top_k), int32 or int64: the (token, k) slot s = token * top_k + k goes to
    expert topk_ids[token, k];
  - `moe_align_block_size(topk_ids, block_size, num_experts)` returns TileGym's five tensors,
    all int32: sorted_token_ids (T * top_k + E * (block_size - 1),), each expert's slots in
    slot order, its group padded to a multiple of block_size with the sentinel T * top_k (also
    every entry past the padded total); expert_ids (ceil of that length / block_size,), the
    expert of each block, -1 past the padded total (TileGym leaves those unset; -1 is vLLM's
    "no expert"); num_tokens_post_padded (1,); cumsum (E + 1,), the padded groups' ends
    (cumsum[0] = 0); max_expert_cnt (1,), the largest group before padding;
  - `fused_moe(hidden_states, w1, w2, topk_weights, topk_ids)`: hidden_states (T, H), w1
    (E, 2I, H) with the gate rows first and the up rows second, w2 (E, H, I), topk_weights
    (T, top_k): out[t] = sum over k of topk_weights[t, k] * w2[e] (silu(w1[e, :I] x) *
    w1[e, I:] x), e = topk_ids[t, k]. Returns (T, H) in hidden_states' dtype (TileGym returns
    f16 for an f32 input; fearless keeps f32). The sums are f32; the intermediates are in the
    input dtype, as TileGym's caches.
A slot whose expert repeats in its token's row is its own slot, in its own row of the sorted
intermediates, so a repeat adds that expert twice (as TileGym's reference) and races with
nothing. An expert id outside [0, E) is dropped by the align kernel (its slot goes to no
expert and adds nothing), which records it; it is raised as a KernelIndexError naming
topk_ids[t, k] and the call's line: on the simulator before the GEMMs launch, on the GPU at
the next `fl.synchronize()` (ops/_device_checks.py). No call reads the ids back (a wait for
the GPU, and a break in a CUDA graph's capture), and both operators are `@replayable`.

`fused_moe_backward(grad_output, hidden_states, w1, w2, topk_weights, topk_ids)` gives the
gradients of hidden_states, w1, w2 and topk_weights (topk_ids is integer: none), in their
dtypes; torch autograd reaches it through `torch.ops.fearless.fused_moe` (ops/
torch_ops_tilegym.py), which saves only the inputs: the backward aligns the slots again and
recomputes the gate and up pre-activations in the K loop that also forms the activation's
gradient (ops/kernels_moe_backward.py), rather than keeping the forward's (EM, 2I) of them.
The weight gradients are sums over each expert's contiguous range of sorted rows, one writer
per tile, in a fixed order (deterministic, no atomics); the routing weights' gradient is
<dy[t], w2[e] act> per slot, from per-column-tile parts summed through the inverse
permutation.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import dtypes
from ..autotune_ahead import compile_ahead_once
from ..errors import KernelIndexError, KernelTypeError, Location
from ..runtime.location import argument_error
from ..runtime.tensor import Tensor
from ._arguments import index
from ._device_checks import NO_ERROR, check_after, host_values, since, words
from ._io import (
    FLOATS,
    Operand,
    cast,
    empty_beside,
    filled_output,
    flat,
    operand,
    output,
    result,
    view,
    zeros_output,
)
from ._replay import replayable
from ._route import torch_ops
from .kernels_moe import align_launch, down_tuned, gate_up_tuned, sum_launch
from .kernels_moe_backward import (
    BM_ACT,
    act_bwd_launch,
    dw1_launch,
    dw2_launch,
    dweights_launch,
    dx_launch,
)
from .kernels_rows import next_pow2, size_class

OP = "fused_moe"
INTS = (dtypes.i32, dtypes.i64)


@replayable()
def moe_align_block_size(topk_ids: Any, block_size: int, num_experts: int) -> tuple[Any, ...]:
    """TileGym's `moe_align_block_size`: the (token, k) slots of topk_ids (T, top_k) sorted by
    expert, each expert's group padded to a multiple of block_size with the sentinel
    T * top_k. Returns (sorted_token_ids, expert_ids, num_tokens_post_padded, cumsum,
    max_expert_cnt), int32, laid out as the module docstring says."""
    op = "moe_align_block_size"
    block = _positive(block_size, op, "block_size")
    experts = _positive(num_experts, op, "num_experts")
    if (t := torch_ops(topk_ids)) is not None:
        return tuple(t.moe_align_block_size(topk_ids, block, experts))
    ids = _ids(op, topk_ids)
    pairs = _align(op, ids, block, experts)
    return tuple(result(ids, tensor, ret) for tensor, ret in pairs[:5])


@replayable()
def fused_moe(hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any) -> Any:
    """TileGym's `fused_moe`: each token's top_k experts' SiLU-and-mul MLPs (w1 (E, 2I, H)
    gate then up, w2 (E, H, I)) weighted by topk_weights and summed, as one grouped GEMM per
    projection over the slots sorted by expert. hidden_states (T, H) gives (T, H). Its
    backward is `fused_moe_backward` (through torch autograd for torch tensors)."""
    return _fused_moe(hidden_states, w1, w2, topk_weights, topk_ids, None)


def _fused_moe(
    hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any, block: int | None
) -> Any:
    """`fused_moe` with the sorted blocks' row count `block` (None: chosen from the shapes)."""
    if (t := torch_ops(hidden_states, w1, w2, topk_weights, topk_ids)) is not None:
        return t.fused_moe(hidden_states, w1, w2, topk_weights, topk_ids)
    xa, w1a, w2a, wa, ids = _operands(OP, hidden_states, w1, w2, topk_weights, topk_ids)
    (tokens, hidden), (experts, _, _), (_, _, inter) = xa.shape, w1a.shape, w2a.shape
    topk = ids.shape[1]
    if tokens * topk == 0 or hidden == 0:
        return result(xa, *zeros_output(xa, (tokens, hidden)))
    if block is None:
        block = _block(tokens * topk, experts)
    aligned = _align(OP, ids, block, experts, tight=True)
    sorted_ids, expert_ids, post, _, _, inv = (t for t, _ in aligned)
    rows = sorted_ids.shape[0]
    x = xa.tensor
    inter_rows = empty_beside(x, (rows, inter), xa.dtype)
    down = empty_beside(x, (rows, hidden), xa.dtype)
    weights = flat(wa.tensor)  # read in its dtype by the down kernel
    out, ret = output(xa, (tokens, hidden))

    def project() -> None:
        if inter:
            w1v = view(w1a.tensor, (experts, 2, inter, hidden))
            gate_up_tuned(inter_rows, x, w1v, sorted_ids, expert_ids, post, topk, block)
        down_tuned(down, inter_rows, w2a.tensor, sorted_ids, expert_ids, post, weights, block)
        sum_launch(out, down, inv, topk)

    # the first call with these sizes (rows by size class): both projections' kernels compile
    # side by side
    sizes = (size_class(rows), hidden, inter, experts, topk, block, xa.dtype, w1a.dtype)
    compile_ahead_once(("fused_moe", *sizes), project)
    project()
    return result(xa, out, ret)


def fused_moe_backward(
    grad_output: Any, hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any
) -> tuple[Any, Any, Any, Any]:
    """(d hidden_states, d w1, d w2, d topk_weights) of `fused_moe(hidden_states, w1, w2,
    topk_weights, topk_ids)` for the gradient `grad_output` (T, H) of its result. The slots are
    aligned again and the gate and up pre-activations recomputed (nothing but the inputs is
    saved); see ops/kernels_moe_backward.py for the kernels."""
    return _fused_moe_backward(grad_output, hidden_states, w1, w2, topk_weights, topk_ids, None)


def _fused_moe_backward(
    grad_output: Any,
    hidden_states: Any,
    w1: Any,
    w2: Any,
    topk_weights: Any,
    topk_ids: Any,
    block: int | None,
) -> tuple[Any, Any, Any, Any]:
    """`fused_moe_backward` with the sorted blocks' row count `block` (None: from the shapes;
    else a power of two of at least 16)."""
    if (t := torch_ops(grad_output, hidden_states, w1, w2, topk_weights, topk_ids)) is not None:
        return tuple(  # type: ignore[return-value]
            t.fused_moe_backward(grad_output, hidden_states, w1, w2, topk_weights, topk_ids)
        )
    op = "fused_moe_backward"
    xa, w1a, w2a, wa, ids = _operands(op, hidden_states, w1, w2, topk_weights, topk_ids)
    dya = operand(grad_output, op, "grad_output", FLOATS, device=xa.tensor.device)
    if dya.shape != xa.shape or dya.dtype != xa.dtype:
        raise argument_error(
            f"`grad_output` of `fearless.ops.{op}` must be hidden_states' shape {xa.shape} and "
            f"dtype {xa.dtype.name} (fused_moe's result), got {dya.shape} {dya.dtype.name}",
            help="pass the gradient of fused_moe's output",
        )
    (tokens, hidden), (experts, two_i, _), topk = xa.shape, w1a.shape, ids.shape[1]
    inter = two_i // 2
    if tokens * topk == 0 or hidden == 0 or inter == 0:
        outs = [zeros_output(a, a.shape) for a in (xa, w1a, w2a, wa)]
        return tuple(result(a, *o) for a, o in zip((xa, w1a, w2a, wa), outs, strict=True))  # type: ignore[return-value]
    block = _block(tokens * topk, experts) if block is None else block
    aligned = _align(op, ids, block, experts, tight=True)
    sorted_ids, expert_ids, post, cumsum, _, inv = (t for t, _ in aligned)
    rows, x, dt = sorted_ids.shape[0], xa.tensor, xa.dtype
    act = empty_beside(x, (rows, inter), dt)
    dh = empty_beside(x, (rows, inter, 2), dt)
    dwp = empty_beside(x, (rows, -(-inter // min(BM_ACT, next_pow2(inter)))), dtypes.f32)
    w1v = view(w1a.tensor, (experts, 2, inter, hidden))
    weights = flat(cast(wa, dtypes.f32))
    dxs = empty_beside(x, (rows, hidden), dt)
    outs = [output(a, a.shape) for a in (xa, w1a, w2a, wa)]
    (dx, _), (dw1, _), (dw2, _), (dw, _) = outs

    def run() -> None:  # the activation's backward, then dx and the weights' gradients
        act_bwd_launch(
            act, dh, dwp, x, dya.tensor, w1v, w2a.tensor, sorted_ids, expert_ids, post, weights,
            topk, block,
        )  # fmt: skip
        dx_launch(dxs, dh, w1a.tensor, expert_ids, post, block)
        sum_launch(dx, dxs, inv, topk)
        dw1_launch(dw1, dh, x, sorted_ids, cumsum, topk, block)
        dw2_launch(dw2, act, dya.tensor, sorted_ids, cumsum, topk, block)
        dweights_launch(flat(dw), dwp, inv)

    # the first call with these sizes (rows by size class): the six kernels compile side by side
    sizes = (size_class(rows), hidden, inter, experts, topk, block, dt, w1a.dtype, wa.dtype)
    compile_ahead_once((op, *sizes), run)
    run()
    return tuple(result(a, *o) for a, o in zip((xa, w1a, w2a, wa), outs, strict=True))  # type: ignore[return-value]


def _operands(
    op: str, hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any
) -> tuple[Operand, Operand, Operand, Operand, Operand]:
    """The MoE's inputs as operands, their dtypes and shapes checked (E0701)."""
    xa = operand(hidden_states, op, "hidden_states", FLOATS)
    dev = xa.tensor.device
    w1a = operand(w1, op, "w1", FLOATS, device=dev)
    w2a = operand(w2, op, "w2", FLOATS, device=dev)
    wa = operand(topk_weights, op, "topk_weights", FLOATS, device=dev)
    if not xa.dtype == w1a.dtype == w2a.dtype:
        raise _mismatch(op, f"dtypes {xa.dtype.name}, {w1a.dtype.name} and {w2a.dtype.name}")
    if len(xa.shape) != 2 or len(w1a.shape) != 3 or len(w2a.shape) != 3:
        raise _mismatch(op, f"shapes {xa.shape}, {w1a.shape} and {w2a.shape}")
    (tokens, hidden), (experts, two_i, h1), (e2, h2, inter) = xa.shape, w1a.shape, w2a.shape
    if h1 != hidden or h2 != hidden or e2 != experts or two_i != 2 * inter or not experts:
        raise _mismatch(op, f"shapes {xa.shape}, {w1a.shape} and {w2a.shape}")
    ids = _ids(op, topk_ids, device=dev)
    if wa.shape != ids.shape or ids.shape[0] != tokens:
        raise argument_error(
            f"`fearless.ops.{op}` needs topk_weights and topk_ids of shape (T, top_k) with T = "
            f"{tokens} (hidden_states' rows), got {wa.shape} and {ids.shape}",
            help="route each token to top_k experts: both come from `torch.topk(router_logits, "
            "top_k)` (the weights softmaxed)",
        )
    return xa, w1a, w2a, wa, ids


def _block(slots: int, experts: int) -> int:
    """The sorted blocks' row count: about as many as the average expert has slots, a power of
    two in 16..128."""
    return min(128, max(16, next_pow2(-(-slots // experts))))


def _align(
    op: str, ids: Operand, block: int, experts: int, tight: bool = False
) -> list[tuple[Tensor, Any]]:
    """(tensor, returned) pairs of sorted_ids, expert_ids, num_tokens_post_padded, cumsum,
    max_expert_cnt and the inverse permutation (each slot's place in sorted_ids); an id outside
    [0, E) is recorded and checked (ops/_device_checks.py) for `op`. sorted_ids has TileGym's
    length, n + E (block - 1) for n slots; `tight` (fused_moe's own use), n + min(E, n)
    (block - 1): at most n experts have a slot, so the padded total never reaches past that,
    and at a decode step's few slots the grouped GEMMs' grids shrink with it."""
    n = ids.shape[0] * ids.shape[1]
    length = n + (min(experts, n) if tight else experts) * (block - 1)
    shapes = [(length,), (-(-length // block),), (1,), (experts + 1,), (1,), (max(n, 1),)]
    if not n:  # no slot: nothing launches, the outputs are filled here
        fills = (n, -1, 0, 0, 0, length)
        return [filled_output(ids, s, f, dtypes.i32) for s, f in zip(shapes, fills, strict=True)]
    pairs = [output(ids, s, dtypes.i32) for s in shapes]  # the align kernels write them all
    counts = empty_beside(ids.tensor, (experts,), dtypes.i32)
    sorted_ids, expert_ids, post, cumsum, max_cnt, inv = (t for t, _ in pairs)
    err, pending = words(ids, ("moe topk_ids", ids.shape[1]), 1)
    align_launch(
        flat(ids.tensor), counts, sorted_ids, expert_ids, inv, cumsum, post, max_cnt, err, block
    )
    check_after(err, pending, functools.partial(_IdsCheck, op, experts), ids.tensor)
    return pairs


class _IdsCheck:
    """The align kernel's error word read for one call (ops/_device_checks.py): the first
    (token, k) slot whose expert id is outside [0, E), as a KernelIndexError at the call's
    line. `ids` is the call's topk_ids (an fl.Tensor, or a replay's torch tensor)."""

    def __init__(self, op: str, experts: int, ids: Any, loc: Location | None) -> None:
        self.op, self.experts, self.ids, self.loc = op, experts, ids, loc

    def raise_for(self, words: np.ndarray, calls: int = 1) -> None:
        slot = int(words[0])
        if slot == NO_ERROR:
            return
        t, k = divmod(slot, self.ids.shape[1])
        where = f"`topk_ids[{t}, {k}]` of `fearless.ops.{self.op}`"
        # after several launches or a graph's, or ids changed since: no value to name
        what = (
            f"{where} is outside 0..{self.experts - 1} (num_experts = {self.experts}) "
            f"{since(calls)}"
        )
        if calls == 1:
            values = host_values(self.ids)
            bad = (values < 0) | (values >= self.experts)
            if bad[t, k]:
                what = (
                    f"{where} is {int(values[t, k])}, outside 0..{self.experts - 1} "
                    f"(num_experts = {self.experts}); {int(bad.sum())} id(s) out of range"
                )
        raise KernelIndexError(
            what,
            self.loc,
            label="expert id out of range",
            notes=["the kernels routed that slot to no expert: it added nothing to the output"],
            help="each id names one of the E experts (w1.shape[0]): check the router's top_k "
            "and the experts' count",
        )


def _positive(value: Any, op: str, name: str) -> int:
    n = index(value)
    if n is None or n < 1:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be a positive int, got {value!r:.40}",
            help=f"pass e.g. `{name}=16`",
        )
    return n


def _ids(op: str, topk_ids: Any, device: int | None = None) -> Operand:
    """topk_ids as an operand: (T, top_k) int32 or int64 (its values are the align kernel's to
    check: `_IdsCheck`)."""
    ids = operand(topk_ids, op, "topk_ids", device=device)
    if ids.dtype not in INTS:
        raise argument_error(
            f"`topk_ids` of `fearless.ops.{op}` must be an int32 or int64 tensor, got "
            f"{ids.dtype.name}",
            help="pass the expert indices of `torch.topk(router_logits, top_k).indices`",
        )
    if len(ids.shape) != 2:
        raise argument_error(
            f"`topk_ids` of `fearless.ops.{op}` must be (T, top_k), got shape {ids.shape}",
            help="one row per token, one column per chosen expert",
        )
    return ids


def _mismatch(op: str, what: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` needs hidden_states (T, H), w1 (E, 2I, H) and w2 (E, H, I) of "
        f"one dtype, got {what}",
    )
