"""`fearless.ops.fused_linear_cross_entropy` (DESIGN 2c, Liger-Kernel's and TileGym's): the
cross-entropy loss of `hidden_states @ weight.T + bias` against `target` that never holds the
whole (tokens, vocab) logits, and its gradients.

Its responsibility: the chunk loop and every check. The tokens go in chunks of `chunk_size`
rows through one (chunk_size, vocab) buffer: the chunk's logits (one GEMM, W read transposed),
then one kernel per chunk for each row's log-sum-exp and loss that, when gradients are asked
for, overwrites the logits with their gradient (softmax - onehot) * scale[row] (1 / n_valid for
"mean", 1 for "sum", 0 for an ignored row), from which grad_hidden's rows (G @ W) and the f32
sums of grad_weight (G^T @ h) and grad_bias come before the next chunk reuses the buffer. So
the forward computes the gradients, as Liger does, and autograd's backward only scales them
by the incoming gradient (ops/torch_ops.py). With reduction="none" the backward needs a scale
per row, which the forward cannot know: its backward runs the chunk loop again with the
incoming gradient as the row scales (`fused_linear_cross_entropy_backward`).

The targets are read on the host once per call (a synchronisation, as Liger's count of the
non-ignored tokens): a target outside [0, vocab) other than `ignore_index` is refused there,
and the kernels never index memory with a target anyway (ops/kernels_linear_ce.py).

The kernels are in ops/kernels_linear_ce.py; dh = G @ W is fearless's matmul
(ops/kernels_gemm.py). On the GPU, torch operands take the three GEMMs through torch's cuBLAS
instead (`_CuBlas`), as TileGym's and Liger-Kernel's fused losses do, and keep fearless's row
kernel; fl.Tensor operands keep fearless's GEMMs.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..autotune_ahead import compile_ahead_once, compile_ahead_pass
from ..runtime import trace
from ..runtime.arrays import torch_dtype, torch_dtype_of
from ..runtime.location import argument_error
from ..runtime.target import current_target
from ..runtime.tensor import Tensor
from ._arguments import dtype_or_none, integer, is_one_of
from ._io import (
    FLOATS,
    Operand,
    cast,
    empty_beside,
    from_torch,
    full,
    operand,
    output,
    result,
    view,
    zeros_output,
)
from ._route import clean_op_errors, torch_ops
from .kernels_gemm import matmul_tuned
from .kernels_linear_ce import (
    cross_entropy_tuned,
    db_launch,
    dw_tuned,
    logits_tuned,
    loss_sum,
)
from .kernels_rows import size_class

OP = "fused_linear_cross_entropy"
REDUCTIONS = ("mean", "sum", "none")
INTS = (dtypes.i64, dtypes.i32)
F32 = dtypes.f32


@clean_op_errors
def fused_linear_cross_entropy(
    hidden_states: Any,
    weight: Any,
    target: Any,
    bias: Any = None,
    ignore_index: int = -100,
    chunk_size: int = 4096,
    reduction: str = "mean",
    *,
    accum_dtype: Any = None,
) -> Any:
    """`F.cross_entropy(F.linear(hidden_states, weight, bias), target, ignore_index=...,
    reduction=...)` without the full logits: hidden_states (..., H), weight (V, H), bias (V,)
    or None, target (...) of integers in [0, V) or `ignore_index`; the tokens go `chunk_size`
    rows at a time. Returns a 0-d loss ("mean" over the non-ignored tokens: NaN when there is
    none, as torch; "sum") or the per-token losses in target's shape ("none"), in
    hidden_states' dtype and kind. With inputs that require grad it goes through
    `torch.ops.fearless.fused_linear_cross_entropy`, whose autograd takes the gradients the
    forward computed. `accum_dtype` (Liger-Kernel's, with its meaning): the dtype grad_weight
    and grad_bias sum in across chunks; None (the default) is the weight's own dtype, whose
    chunks each add into the gradient (f32 sums within a chunk, one rounding per chunk, no
    buffer beside it), and float32 keeps f32 sums in a buffer of the weight's size while there
    are several chunks (the weight's dtype rounds them once, at the end)."""
    if (t := torch_ops(hidden_states, weight, target, bias)) is not None:
        # the schema's torch.dtype; checked here, so that a wrong one is this operator's error
        tdt = accum_dtype
        if accum_dtype is not None:
            # a weight that is no tensor: the dispatcher refuses it next
            wdt = torch_dtype(weight.dtype) if hasattr(weight, "dtype") else None
            tdt = torch_dtype_of(_accum(accum_dtype, wdt or F32))
        # the gradients beside the loss are dropped here: the backward may scale them in place
        return t.fused_linear_cross_entropy(
            hidden_states, weight, target, bias, ignore_index, chunk_size, reduction, tdt, True
        )[0]
    loss, _, _, _ = forward(
        hidden_states, weight, target, bias, ignore_index, chunk_size, reduction, grads=False,
        accum_dtype=accum_dtype,
    )  # fmt: skip
    return loss


def forward(
    hidden_states: Any,
    weight: Any,
    target: Any,
    bias: Any,
    ignore_index: int,
    chunk_size: int,
    reduction: str,
    grads: bool,
    accum_dtype: Any = None,
) -> tuple[Any, Any, Any, Any]:
    """(loss, grad_hidden, grad_weight, grad_bias) for an incoming gradient of 1; the three
    gradients are None unless `grads` (and grad_bias when `bias` is None). With reduction
    "none" no gradient can be computed here: `grads` must be False."""
    p = _Problem.of(
        hidden_states, weight, target, bias, ignore_index, chunk_size, reduction, accum_dtype
    )
    assert not (grads and p.reduction == "none"), "none's gradients need the backward's scales"
    factor = 1.0 / max(p.n_valid, 1) if p.reduction == "mean" else 1.0
    none = p.reduction == "none"
    rows_t, rows_ret = output(p.h, p.target_shape if none else (p.n,), p.dtype if none else F32)
    scale = full(p.h, (max(p.n, 1),), factor, F32)
    grads_out = _chunks(p, view(rows_t, (p.n,)), scale, grads)
    if none:
        return result(p.h, rows_t, rows_ret), None, None, None
    out, ret = output(p.h, ())
    if p.n:
        loss_sum(rows_t, view(out, (1,)), factor)
    else:
        _fill(out, p, 0.0)
    if p.reduction == "mean" and p.n_valid == 0:
        _fill(out, p, math.nan)  # 0 / 0, as torch's mean over no token
    return result(p.h, out, ret), *_results(p, grads_out)


def backward(
    grad_output: Any,
    hidden_states: Any,
    weight: Any,
    target: Any,
    bias: Any,
    ignore_index: int,
    chunk_size: int,
    accum_dtype: Any = None,
) -> tuple[Any, Any, Any]:
    """(grad_hidden, grad_weight, grad_bias) of reduction="none"'s per-token losses for their
    incoming gradient `grad_output` (target's shape): the chunk loop again, each row's
    gradient scaled by its own grad_output. grad_bias is None when `bias` is."""
    p = _Problem.of(
        hidden_states, weight, target, bias, ignore_index, chunk_size, "none", accum_dtype
    )
    g = operand(grad_output, f"{OP}_backward", "grad_output", FLOATS)
    if g.shape != p.target_shape:
        raise argument_error(
            f"`grad_output` of `fearless.ops.{OP}_backward` has shape {g.shape}, but the "
            f"per-token losses have {p.target_shape}",
            help="pass the gradient of the forward's output (reduction='none'), target's shape",
        )
    scale = cast(g, F32)
    scale = view(scale, (p.n,)) if p.n else full(p.h, (1,), 0.0, F32)
    rows_out = empty_beside(p.h.tensor, (p.n,), F32)
    return _results(p, _chunks(p, rows_out, scale, True))


@dataclass
class _Problem:
    """A call's checked operands: h (n, H), w (V, H), b (V,) or None, the targets (n,) as i64,
    and what the host read of them."""

    h: Operand
    h2: Tensor
    w: Operand
    b: Operand | None
    target: Tensor
    target_shape: tuple[int, ...]
    hidden_shape: tuple[int, ...]
    n: int
    vocab: int
    n_valid: int
    ignore_index: int
    chunk: int
    reduction: str
    low_accum: bool  # grad_weight and grad_bias sum in their own dtype (`accum_dtype`)

    @property
    def dtype(self) -> dtypes.DType:
        return self.h.dtype

    @classmethod
    def of(
        cls,
        hidden_states: Any,
        weight: Any,
        target: Any,
        bias: Any,
        ignore_index: Any,
        chunk_size: Any,
        reduction: Any,
        accum_dtype: Any = None,
    ) -> _Problem:
        if not is_one_of(reduction, REDUCTIONS):
            raise argument_error(
                f"`reduction` of `fearless.ops.{OP}` must be 'mean', 'sum' or 'none', not "
                f"{reduction!r:.40}",
                help="pass reduction='mean' (the default), 'sum' or 'none'",
            )
        ignore = _int(ignore_index, "ignore_index", "-100")
        chunk = _int(chunk_size, "chunk_size", "4096")
        if chunk < 1:
            raise argument_error(
                f"`chunk_size` of `fearless.ops.{OP}` must be at least 1, not {chunk}",
                help="pass the tokens per chunk, e.g. chunk_size=4096 (the default)",
            )
        h = operand(hidden_states, OP, "hidden_states", FLOATS)
        dev = h.tensor.device
        w = operand(weight, OP, "weight", FLOATS, device=dev)
        if h.tensor.ndim < 1 or w.tensor.ndim != 2:
            raise _shape_error(h, w)
        vocab, width = w.shape
        if h.shape[-1] != width:
            raise _shape_error(h, w)
        _same_dtype(w, h, "weight")
        b = None
        if bias is not None:
            b = operand(bias, OP, "bias", FLOATS, device=dev)
            if b.shape != (vocab,):
                raise argument_error(
                    f"`bias` of `fearless.ops.{OP}` has shape {b.shape}, but `weight` has "
                    f"{vocab} rows (the vocabulary): it must be ({vocab},)",
                    help="pass the output layer's bias, one value per vocabulary entry",
                )
            _same_dtype(b, h, "bias")
        t = operand(target, OP, "target", None, device=dev)
        if t.dtype not in INTS:
            raise argument_error(
                f"`target` of `fearless.ops.{OP}` must hold class indices (int64 or int32), "
                f"not {t.dtype.name}",
                help="pass the token ids as integers, e.g. `target.long()`; class "
                "probabilities are not supported",
            )
        lead = h.shape[:-1]
        if t.shape != lead:
            raise argument_error(
                f"`target` of `fearless.ops.{OP}` has shape {t.shape}, but `hidden_states` "
                f"{h.shape} has {lead} tokens: target needs one class index per token",
                help="pass one target per row of hidden_states (the labels shifted as the "
                "model's logits are)",
            )
        if vocab == 0:
            raise argument_error(
                f"`weight` of `fearless.ops.{OP}` has no rows: a vocabulary of 0 classes",
            )
        n = math.prod(lead)
        h2 = view(h.tensor, (n, width))
        trace.refuse("the targets read on the host")
        host = np.asarray(t.tensor.numpy()).reshape(-1).astype(np.int64)
        valid = host != ignore
        bad = valid & ((host < 0) | (host >= vocab))
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise argument_error(
                f"`target` of `fearless.ops.{OP}` holds {int(host[at])} at token {at} "
                f"(of {n}), outside the vocabulary [0, {vocab}) and not ignore_index "
                f"({ignore}); {int(bad.sum())} such target(s) in all",
                help="targets are class indices below weight.shape[0]; mark tokens to skip "
                "with ignore_index (-100 by default)",
            )
        target64 = cast(t, dtypes.i64)
        return cls(
            h=h, h2=h2, w=w, b=b, target=view(target64, (n,)), target_shape=t.shape,
            hidden_shape=h.shape, n=n, vocab=vocab, n_valid=int(valid.sum()),
            ignore_index=ignore, chunk=min(chunk, max(n, 1)), reduction=reduction,
            low_accum=_accum(accum_dtype, w.dtype) != F32,
        )  # fmt: skip


Grads = list[tuple[Tensor, Any]]  # (the tensor the kernels write, what the op returns)


def _chunks(p: _Problem, rows_out: Tensor, scale: Tensor, grads: bool) -> Grads:
    """The chunk loop: each row's loss into rows_out (n,), and with `grads` the gradients
    for the row scales `scale` (n,) f32, as `output` pairs: dh in hidden_states' shape and
    dtype, dW and db (when there is a bias) as their parameters. Peak scratch: one
    (chunk, V) logits buffer, and W's and b's f32 sums."""
    make = output if p.n else zeros_output  # no token: zero gradients, and no kernel
    outs: Grads = []
    if grads:
        outs = [make(p.h, p.hidden_shape), make(p.w, p.w.shape)]
        if p.b is not None:
            outs.append(make(p.b, p.b.shape))
    if not p.n:
        return outs
    h, w, dt = p.h2, p.w.tensor, p.dtype
    width = h.shape[1]
    gemms = _CuBlas.of(p, outs) if _CuBlas.takes(p) else None
    buf = gemms.buffer if gemms is not None else empty_beside(h, (p.chunk, p.vocab), dt)
    bias = p.b.tensor if p.b is not None else full(p.h, (1,), 0.0)
    # gradients over more than one chunk: the gradients themselves, which every chunk adds
    # into (accum_dtype the weight's), or f32 sums across chunks; else an unread placeholder
    several = grads and p.n > p.chunk
    into = several and p.low_accum
    sums = several and not p.low_accum
    if into:
        dw_acc = outs[1][0]
        db_acc = outs[2][0] if p.b is not None else empty_beside(h, (1,), F32)
    else:
        dw_acc = empty_beside(h, (p.vocab, width) if sums else (1, 1), F32)
        db_acc = empty_beside(h, (p.vocab,) if sums else (1,), F32)

    def loop() -> None:
        # inside the compile-ahead pass nothing runs: neither do the GEMMs through torch
        torch_runs = gemms is not None and not compile_ahead_pass()
        for k, start in enumerate(range(0, p.n, p.chunk)):
            stop = min(start + p.chunk, p.n)
            hc, logits = _rows(h, start, stop), _rows(buf, 0, stop - start)
            if gemms is None:
                logits_tuned(hc, w, bias, logits, p.b is not None)
            elif torch_runs:
                gemms.logits(start, stop)
            cross_entropy_tuned(
                logits, _rows(rows_out, start, stop), _rows(p.target, start, stop),
                _rows(scale, start, stop), p.ignore_index, grads,
            )  # fmt: skip
            if not grads:
                continue
            first, last = k == 0, stop == p.n and not into
            if gemms is None:
                matmul_tuned(logits, w, _rows(view(outs[0][0], (p.n, width)), start, stop))
            elif torch_runs:
                gemms.dh(start, stop)
            if gemms is None or sums:  # f32 sums across chunks: fearless's kernels
                dw_tuned(logits, hc, dw_acc, outs[1][0], first, last)
            elif torch_runs:
                gemms.dw(start, stop, first)
            if p.b is not None:
                db_launch(logits, db_acc, outs[2][0], first, last)

    # the first call with these sizes (tokens by size class, as the tuners' keys read them):
    # the four tuned steps' kernels compile side by side
    sizes = (size_class(p.n), p.chunk, p.vocab, width, dt, grads, p.b is not None, into)
    compile_ahead_once((OP, *sizes), loop)
    loop()
    return outs


class _CuBlas:
    """The chunk loop's three GEMMs through torch (cuBLAS) where hidden_states and weight are
    torch CUDA tensors, as TileGym's and Liger-Kernel's fused losses compute them: fearless's
    own GEMMs run at 0.65 to 0.82 of cuBLAS's at a Llama-3-8B step's shapes (H100,
    bench/experiments/lce_parts.py). The row kernel stays fearless's, on the (chunk, V)
    buffer allocated here. dW goes into the gradient itself (the first chunk writes it, the
    next ones add, cuBLAS's f32 sums within a chunk and one rounding per chunk: the default
    accum_dtype); f32 sums across chunks are fearless's kernels'."""

    def __init__(self, torch: Any, h: Any, w: Any, b: Any, buf: Any, outs: Grads) -> None:
        self.torch, self.h, self.w, self.b, self.buf = torch, h, w, b, buf
        self.buffer = from_torch(buf)
        self.dh_out: Any = outs[0][1].view(h.shape) if outs else None  # with gradients
        self.dw_out: Any = outs[1][1] if outs else None

    @staticmethod
    def takes(p: _Problem) -> bool:
        return (
            current_target().on_device
            and p.h.kind == "torch"
            and p.w.kind == "torch"
            and (p.b is None or p.b.kind == "torch")
        )

    @classmethod
    def of(cls, p: _Problem, outs: Grads) -> _CuBlas:
        torch = sys.modules["torch"]
        h = p.h.original.reshape(p.n, p.h.shape[-1])
        buf = torch.empty((p.chunk, p.vocab), dtype=h.dtype, device=h.device)
        return cls(torch, h, p.w.original, p.b.original if p.b is not None else None, buf, outs)

    def logits(self, start: int, stop: int) -> None:
        """The buffer's first rows = h[start:stop] @ W^T (+ b)."""
        rows, h = self.buf[: stop - start], self.h[start:stop]
        if self.b is None:
            self.torch.mm(h, self.w.t(), out=rows)
        else:
            self.torch.addmm(self.b, h, self.w.t(), out=rows)

    def dh(self, start: int, stop: int) -> None:
        """dh[start:stop] = G @ W, G the buffer's rows (the logits' gradient)."""
        self.torch.mm(self.buf[: stop - start], self.w, out=self.dh_out[start:stop])

    def dw(self, start: int, stop: int, first: bool) -> None:
        """dW (=, the first chunk; else +=) G^T @ h[start:stop]."""
        g, h = self.buf[: stop - start].t(), self.h[start:stop]
        if first:
            self.torch.mm(g, h, out=self.dw_out)
        else:
            self.dw_out.addmm_(g, h)


def _results(p: _Problem, outs: Grads) -> tuple[Any, Any, Any]:
    """The gradients in the caller's kinds (None for each not computed)."""
    if not outs:
        return None, None, None
    dh, dw = (result(like, t, ret) for like, (t, ret) in zip((p.h, p.w), outs, strict=False))
    db = result(p.b, *outs[2]) if p.b is not None else None
    return dh, dw, db


def _fill(out: Tensor, p: _Problem, value: float) -> None:
    """out (a 0-d loss) = value."""
    loss_sum(full(p.h, (1,), value, F32), view(out, (1,)), 1.0)


def _rows(t: Tensor, start: int, stop: int) -> Tensor:
    """Rows [start, stop) of t (C-contiguous), sharing its memory."""
    row = t.size // max(t.shape[0], 1)
    shape = (stop - start, *t.shape[1:])
    host = t._host[start:stop] if t._host is not None else None
    return Tensor._make(
        t._ptr + start * row * t.dtype.itemsize, shape, t._dtype, on_device=t._on_device,
        owner=t, host=host, device=t._device,
    )  # fmt: skip


def _accum(value: Any, weight: dtypes.DType) -> dtypes.DType:
    """`accum_dtype` as a DType: the weight's for None; f32 or the weight's dtype, else
    E0701."""
    if value is None:
        return weight
    dt = dtype_or_none(value)
    if dt not in (F32, weight):
        raise argument_error(
            f"`accum_dtype` of `fearless.ops.{OP}` must be float32 or the weight's dtype "
            f"({weight.name}), not {value!r:.40}",
            help="pass accum_dtype=None (the weight's dtype, Liger-Kernel's default) or "
            "torch.float32 (float32 sums across chunks, in a buffer of the weight's size)",
        )
    return dt


def _int(value: Any, name: str, example: str) -> int:
    """An integer argument (`ignore_index`, `chunk_size`), or E0701."""
    return integer(value, OP, name, help=f"pass an int, e.g. `{name}={example}`")


def _same_dtype(x: Operand, h: Operand, name: str) -> None:
    if x.dtype != h.dtype:
        raise argument_error(
            f"`{name}` of `fearless.ops.{OP}` is {x.dtype.name}, but `hidden_states` is "
            f"{h.dtype.name}: they must be one dtype (as torch's F.linear)",
            help=f"convert one of them, e.g. `{name}.to(hidden_states.dtype)`",
        )


def _shape_error(h: Operand, w: Operand) -> Exception:
    return argument_error(
        f"`fearless.ops.{OP}` takes hidden_states (..., H) and weight (V, H), got "
        f"{h.shape} and {w.shape}",
        help="pass the output layer's weight as (vocab, hidden), as nn.Linear holds it",
    )
