"""The operators of fearless.ops, with torch.nn.functional's signatures (DESIGN 2b).

Each takes fl.Tensors, torch tensors or NumPy arrays and returns the kind it was given
(ops/_io.py), checks what torch would refuse (shapes, dtypes, an input that requires grad, since
no operator here has a backward yet), and runs an autotuned Tile kernel: the tuner picks a
configuration per shape and dtype once and keeps it on disk (`fl.autotune`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..autotune_ahead import compile_ahead_once
from ..dtypes import DType, f32
from ..errors import KernelTypeError
from ..runtime import tensor as fl_tensor
from ..runtime import trace
from ..runtime.arrays import as_dtype, torch_dtype_of
from ..runtime.location import argument_error
from ._arguments import flag, shape_of
from ._io import (
    FLOATS,
    GEMM_FLOATS,
    Operand,
    cast,
    dims,
    fresh_seed,
    gelu_kind,
    halves_of,
    heads_major,
    machine_eps,
    number,
    operand,
    output,
    param,
    read_in_place,
    refuse_unwritable,
    result,
    rows_of,
    view,
)
from ._replay import replayable
from ._route import clean_op_errors, torch_ops
from .kernels_activation import (
    elementwise_tuned,
    gated_tuned,
    make_dropout,
    make_swiglu,
    make_unary,
)
from .kernels_gemm import bmm_tuned, matmul_tuned
from .kernels_group_gemm import GROUPS_PER_LAUNCH, SMALL_TILE, group_gemm_tuned
from .kernels_layout import make_rope, transpose_tuned
from .kernels_rows import (
    kernel_of,
    layer_norm_tuned,
    rms_norm_tuned,
    size_class,
    sm_count,
    softmax_tuned,
)

# --------------------------------------------------------------------------- rows


@replayable()
def softmax(x: Any, dim: int = -1, dtype: Any = None) -> Any:
    """softmax over `dim` (`torch.nn.functional.softmax(x, dim=-1, dtype=None)`), computed in
    f32; with `dtype` (a torch or fearless dtype) the input is converted to it first, as torch
    converts it."""
    if dtype is not None:
        x = _converted(x, dtype, "softmax")
    if (t := torch_ops(x)) is not None:
        return t.softmax(x, dim)
    a = operand(x, "softmax", "x", FLOATS)
    out, ret = output(a, a.shape)
    if a.tensor.size:
        softmax_tuned(rows_of(a.tensor, dim, "softmax"), rows_of(out, dim, "softmax"))
    return result(a, out, ret)


def _converted(x: Any, dtype: Any, op: str) -> Any:
    """`x` in `dtype` (torch's `dtype=` argument): the same kind of array, converted."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        trace.refuse(f"`dtype=` of `{op}`")  # torch converts: a replay would skip it
        return x.to(dtype if isinstance(dtype, torch.dtype) else torch_dtype_of(as_dtype(dtype)))
    a = operand(x, op, "x", FLOATS)
    t = cast(a, as_dtype(dtype))
    return t if a.kind == "fl" else t.numpy()


def _normalized(a: Operand, normalized_shape: Any, op: str) -> int:
    shape = dims(normalized_shape, op, "normalized_shape")
    if not a.shape:
        raise argument_error(
            f"`fearless.ops.{op}` normalizes over the last axis, and `x` has none (0-d)",
            help="pass a tensor of at least one axis",
        )
    if shape != a.shape[-1:]:
        raise argument_error(
            f"`fearless.ops.{op}` normalizes over the last axis: normalized_shape must be "
            f"{a.shape[-1:]}, not {shape}",
            help="reshape so that the normalized axes are one last axis",
        )
    return shape[0]


@replayable()
def rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Any:
    """`torch.nn.functional.rms_norm`: x / sqrt(mean(x^2) + eps) * weight over the last axis;
    `eps` None is the dtype's machine epsilon, as torch."""
    if (t := torch_ops(x, weight)) is not None:
        e = None if eps is None else number(eps, "rms_norm", "eps")
        return t.rms_norm(
            x, list(dims(normalized_shape, "rms_norm", "normalized_shape")), weight, e
        )
    a = operand(x, "rms_norm", "x", FLOATS)
    n = _normalized(a, normalized_shape, "rms_norm")
    w = param(weight, n, a, "rms_norm", "weight", 1.0)
    e = number(eps, "rms_norm", "eps") if eps is not None else machine_eps(a)
    out, ret = output(a, a.shape)
    if a.tensor.size:
        rms_norm_tuned(rows_of(a.tensor, -1, "rms_norm"), w, e, rows_of(out, -1, "rms_norm"))
    return result(a, out, ret)


@replayable()
def layer_norm(
    x: Any,
    normalized_shape: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Any:
    """`torch.nn.functional.layer_norm` over the last axis, in f32."""
    eps = number(eps, "layer_norm", "eps")
    if (t := torch_ops(x, weight, bias)) is not None:
        shape = list(dims(normalized_shape, "layer_norm", "normalized_shape"))
        return t.layer_norm(x, shape, weight, bias, eps)
    a = operand(x, "layer_norm", "x", FLOATS)
    n = _normalized(a, normalized_shape, "layer_norm")
    w = param(weight, n, a, "layer_norm", "weight", 1.0)
    b = param(bias, n, a, "layer_norm", "bias", 0.0)
    out, ret = output(a, a.shape)
    if a.tensor.size:
        x2, o2 = rows_of(a.tensor, -1, "layer_norm"), rows_of(out, -1, "layer_norm")
        layer_norm_tuned(x2, w, b, eps, o2)
    return result(a, out, ret)


# --------------------------------------------------------------------------- GEMM


@replayable()
def matmul(a: Any, b: Any) -> Any:
    """`torch.matmul` of two matrices (M, K) @ (K, N), accumulated in f32. As TileGym's, it also
    takes fp8 (f8e4m3fn or f8e5m2) operands, multiplied on the fp8 tensor cores, and returns
    their dtype."""
    return _binary(
        a, b, "matmul", "(M, K) @ (K, N)", _matmul_shape, matmul_tuned, floats=GEMM_FLOATS
    )


def _matmul_shape(xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...] | None:
    return (xs[0], ys[1]) if len(xs) == len(ys) == 2 and xs[1] == ys[0] else None


@replayable()
def bmm(a: Any, b: Any) -> Any:
    """`torch.bmm`: (B, M, K) @ (B, K, N) per batch, accumulated in f32 (fp8 operands too, as
    `matmul`)."""
    return _binary(a, b, "bmm", "(B, M, K) @ (B, K, N)", _bmm_shape, bmm_tuned, floats=GEMM_FLOATS)


def _bmm_shape(xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...] | None:
    ok = len(xs) == len(ys) == 3 and xs[0] == ys[0] and xs[2] == ys[1]
    return (xs[0], xs[1], ys[2]) if ok else None


def _binary(
    a: Any,
    b: Any,
    op: str,
    form: str,
    out_shape: Callable[[tuple[int, ...], tuple[int, ...]], tuple[int, ...] | None],
    run: Callable[[Any, Any, Any], None],
    verb: str = "multiplies",
    floats: tuple[DType, ...] = FLOATS,
    names: tuple[str, str, str] | None = None,
) -> Any:
    """The body of a two-operand op (matmul, bmm, swiglu): torch's own `op` when torch routes
    (`_route.torch_ops`); otherwise `a` and `b` as float operands of one dtype, a result of
    shape `out_shape(a.shape, b.shape)` (None refuses the shapes: "`op` {verb} {form}, got
    ..."), filled by `run(a, b, out)` unless it is empty. `names`: the op and the two
    arguments as errors name them, when the call is part of another op's (group_gemm's)."""
    if (t := torch_ops(a, b)) is not None:
        return getattr(t, op)(a, b)
    label, a_name, b_name = names or (op, "a", "b")
    x = operand(a, label, a_name, floats)
    y = _same_dtype(operand(b, label, b_name, floats, device=x.tensor.device), x, label)
    shape = out_shape(x.shape, y.shape)
    if shape is None:
        raise _shapes(label, form, x, y, verb)
    out, ret = output(x, shape)
    if out.size:
        run(x.tensor, y.tensor, out)
    return result(x, out, ret)


def _same_dtype(y: Operand, x: Operand, op: str) -> Operand:
    if y.dtype != x.dtype:
        raise argument_error(
            f"`fearless.ops.{op}` needs both operands of one dtype, got {x.dtype.name} and "
            f"{y.dtype.name}",
            help="convert one of them first",
        )
    return y


def _shapes(
    op: str, form: str, x: Operand, y: Operand, verb: str = "multiplies"
) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` {verb} {form}, got {x.shape} and {y.shape}",
    )


# --------------------------------------------------------------------------- activations


def _elementwise(name: str, kernel: Any, out: Any, *inputs: Any) -> None:
    """Run elementwise `kernel` over `out` and same-shaped `inputs` (scalars as they are),
    autotuned per `name`, size class (the size rounded up to a power of two) and dtype."""
    elementwise_tuned(name, kernel, out, inputs, size_class(out.size))


def _unary(x: Any, kind: str, op: str) -> Any:
    a = operand(x, op, "x", FLOATS)
    out, ret = output(a, a.shape)
    if a.tensor.size:
        _elementwise(kind, kernel_of(make_unary, kind, a.dtype), out, a.tensor)
    return result(a, out, ret)


@replayable()
def relu(x: Any, inplace: bool = False) -> Any:
    """`torch.nn.functional.relu` (out of place: `inplace=True` is refused)."""
    if flag(inplace, "relu", "inplace"):
        raise _no_inplace("relu")
    if (t := torch_ops(x)) is not None:
        return t.relu(x)
    return _unary(x, "relu", "relu")


@replayable()
def gelu(x: Any, approximate: str = "none") -> Any:
    """`torch.nn.functional.gelu`: exact (erf) or `approximate="tanh"`, computed in f32."""
    kind = gelu_kind(approximate)
    if (t := torch_ops(x)) is not None:
        return t.gelu(x, approximate)
    return _unary(x, kind, "gelu")


def _no_inplace(op: str) -> KernelTypeError:
    return argument_error(
        f"`fearless.ops.{op}` has no in-place form: its output never aliases its input",
        help="use the returned tensor (`x = ops.relu(x)`)",
    )


def _gated(x: Any, kind: str, op: str, dim: int = -1) -> Any:
    a = operand(x, op, "x", FLOATS)
    x2, half = halves_of(a.tensor, dim, op)
    m, n2 = x2.shape
    out, ret = output(a, half)
    if out.size:
        gated_tuned(kind, x2, view(out, (m, n2 // 2)))
    return result(a, out, ret)


@replayable()
def silu_and_mul(x: Any) -> Any:
    """silu(x[..., :d]) * x[..., d:] for x of last axis 2d (vLLM's and TileGym's)."""
    if (t := torch_ops(x)) is not None:
        return t.silu_and_mul(x)
    return _gated(x, "silu", "silu_and_mul")


@replayable()
def geglu(x: Any, dim: int = -1, approximate: str = "none") -> Any:
    """a * gelu(b) for a, b the two halves of `x` along axis `dim` (the last by default; any
    axis, as torch's `glu`): the gelu is of the second half (silu_and_mul's silu is of the
    first)."""
    kind = gelu_kind(approximate)
    if (t := torch_ops(x)) is not None:
        return t.geglu(x, dim, approximate)
    return _gated(x, kind, "geglu", dim)


@replayable()
def swiglu(a: Any, b: Any) -> Any:
    """silu(a) * b elementwise (TileGym's swiglu forward)."""
    return _binary(a, b, "swiglu", "a and b of one shape", _same_shape, _swiglu, "takes")


def _same_shape(xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...] | None:
    return xs if xs == ys else None


def _swiglu(x: Any, y: Any, out: Any) -> None:
    _elementwise("swiglu", kernel_of(make_swiglu, x.dtype), out, x, y)


@replayable(dynamic=("seed",))
def dropout(
    x: Any,
    p: float = 0.5,
    training: bool = True,
    seed: int | None = None,
    inplace: bool = False,
) -> Any:
    """`torch.nn.functional.dropout`: zero each element with probability `p`, scale the rest by
    1 / (1 - p). The mask is Philox's: element e is kept when word e % 4 of Philox4x32 at
    counter e // 4 (`tile.randint4x(seed, e // 4)`) is at least p * 2^32. A given `seed` gives
    the same mask on every target; None draws a fresh one per call. `inplace=True` writes the
    result into `x` and returns it, as torch does."""
    if isinstance(seed, bool):  # torch's 4th positional parameter is `inplace`
        raise argument_error(
            f"the 4th argument of `fearless.ops.dropout` is `seed`, not torch's `inplace`: "
            f"got {seed}",
            help=f"write `inplace={seed}` (and `seed=...` for a fixed mask)",
        )
    if seed is not None and (
        isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))
    ):
        raise argument_error(
            f"`seed` of `fearless.ops.dropout` is an int or None, not {type(seed).__name__} "
            f"({seed!r:.40})",
            help="pass an integer seed for a fixed mask, e.g. `seed=0`, or None for a fresh one",
        )
    p = number(p, "dropout", "p")
    inplace, training = flag(inplace, "dropout", "inplace"), flag(training, "dropout", "training")
    if inplace:  # before the kernels: read-only, broadcast or a leaf that requires grad
        refuse_unwritable(x, "dropout", "x")
    y = _dropout(x, p, training, seed)
    if not inplace or y is x:
        return y
    trace.refuse("an in-place copy")  # not a launch: a replay would skip it
    if (torch := sys.modules.get("torch")) is not None and isinstance(x, torch.Tensor):
        return x.copy_(y)
    if isinstance(x, np.ndarray):
        np.copyto(x, y)
        return x
    raise argument_error(
        "`fearless.ops.dropout(..., inplace=True)` writes into torch tensors and NumPy arrays; "
        "an fl.Tensor is not written in place",
        help="write `x = fearless.ops.dropout(x, p)`",
    )


def _dropout(x: Any, p: float, training: bool, seed: int | None) -> Any:
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise argument_error(
            f"dropout probability has to be between 0 and 1, but got {p}",
        )
    if not training or p == 0.0:
        if torch_ops(x) is None:  # a tensor that needs autograd is returned as it is, as torch
            operand(x, "dropout", "x", FLOATS)
        return x
    if (t := torch_ops(x)) is not None:
        return t.dropout(x, float(p), _torch_seed(seed))
    a = operand(x, "dropout", "x", FLOATS)
    out, ret = output(a, a.shape)
    if p == 1.0:
        out_zero = fl_tensor.zeros(a.shape, dtype=a.dtype, device=a.tensor.device)
        return result(a, out_zero, out_zero) if a.kind != "torch" else ret.zero_()
    if a.tensor.size:
        s = fresh_seed() if seed is None else seed_i64(seed)
        threshold = min(round(p * 2**32), 2**32 - 1)
        kernel = kernel_of(make_dropout, a.dtype)
        _elementwise("dropout", kernel, out, a.tensor, threshold, 1.0 / (1.0 - p), s)
    return result(a, out, ret)


def seed_i64(seed: int) -> int:
    """The seed's 64 bits, as the kernel's (and torch's schema's) i64."""
    s = int(seed) & (2**64 - 1)
    return s - 2**64 if s >= 2**63 else s


def _torch_seed(seed: int | None) -> Any:
    """The seed `torch.ops.fearless.dropout` takes: a 0-d int64 CPU tensor, of `seed`'s 64 bits
    or, for None, drawn from torch's generator (`torch.manual_seed` repeats it). A tensor, not
    an int drawn inside the operator: a compiled graph sees each draw as a random operator of
    its own, so two dropouts of one tensor keep two masks (common-subexpression elimination
    merges two calls of one operator on the same inputs)."""
    torch = sys.modules["torch"]
    if seed is None:
        return torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64)
    return torch.tensor(seed_i64(seed), dtype=torch.int64)


# --------------------------------------------------------------------------- layout


@replayable()
def transpose(x: Any) -> Any:
    """The transpose of a matrix (`x.T`, TileGym's transpose), or of each matrix of a batch
    (B, M, N) -> (B, N, M) (`x.transpose(1, 2)`), in a new tensor."""
    if (t := torch_ops(x)) is not None:
        return t.transpose(x)
    a = operand(x, "transpose", "x")
    nd = a.tensor.ndim
    if nd not in (2, 3):
        raise argument_error(
            f"`fearless.ops.transpose` takes a matrix or a batch of matrices, not a {nd}-d tensor",
        )
    out, ret = output(a, (*a.shape[:-2], a.shape[-1], a.shape[-2]))
    if out.size:
        transpose_tuned(a.tensor, out)
    return result(a, out, ret)


@replayable()
def rope(q: Any, k: Any, cos: Any, sin: Any) -> Any:
    """Rotary position embedding (TileGym's rope, out of place): q (B, Hq, S, D) and
    k (B, Hk, S, D) rotated by cos and sin of shape (S, D) or (1 or B, S, D), whose first D / 2
    columns are used (Hugging Face's cos and sin repeat them); returns (q_rotated, k_rotated).
    The tables are in q's dtype, or f32 with f16 or bf16 q and k: then the rotation is computed
    in f32 and rounded once to q's dtype (Hugging Face's OLMo 2 and 3 rotation)."""
    if (t := torch_ops(q, k, cos, sin)) is not None:
        return tuple(t.rope(q, k, cos, sin))
    return _rope(q, k, cos, sin, inverse=False)


@replayable()
def rope_backward(dq: Any, dk: Any, cos: Any, sin: Any) -> Any:
    """The gradients of rope's q and k from those of its outputs: the inverse rotation (rope
    with -sin), since each rotation is orthogonal; (dq_in, dk_in)."""
    if (t := torch_ops(dq, dk, cos, sin)) is not None:
        return tuple(t.rope_backward(dq, dk, cos, sin))
    return _rope(dq, dk, cos, sin, inverse=True)


def _rope(q: Any, k: Any, cos: Any, sin: Any, inverse: bool) -> Any:
    # q and k both sequence-major (Hugging Face's, between the projections and attention): the
    # kernel reads their (B, S, H, D) bases in place and writes outputs of that layout
    bases = read_in_place(q, k)
    by_seq = bases is not None
    if bases is not None:
        q, k = bases
    qa = operand(q, "rope", "q", FLOATS)
    dev = qa.tensor.device
    ka = _same_dtype(operand(k, "rope", "k", FLOATS, device=dev), qa, "rope")
    ca = operand(cos, "rope", "cos", FLOATS, device=dev)
    sa = operand(sin, "rope", "sin", FLOATS, device=dev)
    if len(qa.shape) != 4 or len(ka.shape) != 4:
        raise _shapes("rope", "q and k of shape (batch, heads, seq, head_dim)", qa, ka, "takes")
    qs, ks = heads_major(qa.shape, by_seq), heads_major(ka.shape, by_seq)
    batch, _, seq, d = qs
    if ks[0] != batch or ks[2:] != (seq, d) or d % 2 or d & (d - 1):
        raise argument_error(
            "`fearless.ops.rope` takes q and k of one batch, sequence and power-of-two "
            f"head_dim, got {qs} and {ks}",
        )
    tdt = ca.dtype
    # 16-bit tables with f32 q and k widen exactly (as before); f32 tables with 16-bit q and k
    # rotate in f32 (the kernel's wide form); two dtypes of table, or f16 against bf16, would
    # round silently: refused
    widen = qa.dtype == f32 and tdt != f32
    if sa.dtype != tdt or (tdt != qa.dtype and not widen and (tdt != f32 or qa.dtype == f32)):
        tables_are = tdt.name if sa.dtype == tdt else f"{tdt.name} and {sa.dtype.name}"
        raise argument_error(
            f"`cos` and `sin` of `fearless.ops.rope` are {tables_are} with {qa.dtype.name} q "
            "and k: rope takes both tables in q's dtype, both in f32 with f16 or bf16 q and k "
            "(rotated in f32, stored in q's dtype), or both f16 or bf16 with f32 q and k",
            help=f"convert cos and sin to {qa.dtype.name} first",
        )
    if widen:
        tdt = f32
    tables = []
    for t, name in ((ca, "cos"), (sa, "sin")):
        v = cast(t, f32) if widen else t.tensor
        if v.ndim == 2:
            v = view(v, (1, *v.shape))
        if v.ndim != 3 or v.shape[1:] != (seq, d) or v.shape[0] not in (1, batch):
            raise argument_error(
                f"`{name}` of `fearless.ops.rope` has shape {t.shape}; it needs ({seq}, {d}) or "
                + (f"(1, {seq}, {d})" if batch == 1 else f"(1 or {batch}, {seq}, {d})"),
            )
        tables.append(v)
    qo, qret = output(qa, qa.shape)
    ko, kret = output(ka, ka.shape)
    wide = tdt if tdt != qa.dtype else None  # f32 tables with 16-bit q and k
    kernel = kernel_of(make_rope, qa.dtype, inverse, wide, by_seq)

    def rotate(qo: Any, ko: Any, q: Any, k: Any, qh: int, kh: int) -> None:
        # each block rotates every head of one position: (1, H, 1, D) of (B, H, S, D), or
        # (1, 1, H, D) of a sequence-major (B, S, H, D)
        qp = qo.partition(heads_major((1, _pow2(qh), 1, d), by_seq))
        kp = ko.partition(heads_major((1, _pow2(kh), 1, d), by_seq))
        kernel(qp, kp, q, k, tables[0], tables[1], tables[0].shape[0])
        qp.unpartition()
        kp.unpartition()

    if qo.size and ko.size:
        rotate(qo, ko, qa.tensor, ka.tensor, qs[1], ks[1])
    elif qo.size or ko.size:
        # one of q and k has no element (no head): the kernel rotates a pair, so the other is
        # rotated beside a scratch output of its own rotation
        out, a, heads = (qo, qa, qs[1]) if qo.size else (ko, ka, ks[1])
        scratch, _ = output(a, a.shape)
        rotate(out, scratch, a.tensor, a.tensor, heads, heads)
    qr, kr = result(qa, qo, qret), result(ka, ko, kret)
    return (qr.transpose(1, 2), kr.transpose(1, 2)) if by_seq else (qr, kr)


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@clean_op_errors
@replayable()
def group_gemm(As: Sequence[Any], Bs: Sequence[Any]) -> list[Any]:
    """[A_i @ B_i for each pair]: TileGym's group_gemm. Small groups (each product at most one
    wave of (128, 128) tiles, which alone would leave SMs idle) go in persistent launches of
    `GROUPS_PER_LAUNCH` groups each (ops/kernels_group_gemm.py) when they are 16-bit or f32
    matrices of one dtype; larger ones (where matmul's own configurations run at cuBLAS's
    speed and the group kernel's persistent tiles do not: 0.60 of torch at 16 x 4096^3 on the
    H100, session 27), fp8, mixed dtypes and shapes that do not multiply are each their own
    `matmul`, with its own checks, and on the first call for their size classes those compile
    side by side."""
    for name, xs in (("As", As), ("Bs", Bs)):
        listed = isinstance(xs, Sequence) and not isinstance(xs, (str, bytes))
        stacked = len(shape_of(xs)) >= 1 and hasattr(type(xs), "__iter__")  # iterates too
        if not listed and not stacked:
            raise argument_error(
                f"`{name}` of `fearless.ops.group_gemm` is a list of matrices, not "
                f"{type(xs).__name__}",
                help="pass lists (or tuples) of 2-D tensors: `group_gemm([a0, a1], [b0, b1])`",
            )
    if (t := torch_ops(As, Bs)) is not None:
        return list(t.group_gemm(list(As), list(Bs)))
    if len(As) != len(Bs):
        raise argument_error(
            f"`fearless.ops.group_gemm` pairs As and Bs, but got {len(As)} and {len(Bs)}",
        )
    pairs = list(zip(As, Bs, strict=True))
    done = _in_group_launches(pairs) if pairs else None
    if done is not None:
        return done
    forms = tuple(
        (str(getattr(a, "dtype", "")), *(size_class(n) for n in (*a.shape, *b.shape)))
        for a, b in pairs
        if hasattr(a, "shape") and hasattr(b, "shape")
    )
    compile_ahead_once(("group_gemm", forms), lambda: _pairwise(pairs))
    return _pairwise(pairs)


def _pairwise(pairs: list[tuple[Any, Any]]) -> list[Any]:
    """Each pair's product by `matmul`'s kernels, its errors naming group_gemm's `As[i]`, `Bs[i]`."""
    return [
        _binary(
            a,
            b,
            "matmul",
            f"As[{i}] @ Bs[{i}] as (M, K) @ (K, N)",
            _matmul_shape,
            matmul_tuned,
            floats=GEMM_FLOATS,
            names=("group_gemm", f"As[{i}]", f"Bs[{i}]"),
        )
        for i, (a, b) in enumerate(pairs)
    ]


def _in_group_launches(pairs: list[tuple[Any, Any]]) -> list[Any] | None:
    """The products of `pairs` from launches of the group kernel, `GROUPS_PER_LAUNCH` groups
    each; None where the pairs are not all small 16-bit or f32 matrices of one dtype that
    multiply (each is then `matmul`'s, with its own checks and errors)."""
    wave = sm_count() * SMALL_TILE  # from the arguments' shapes, before any is converted
    if any(_extent(a, 0) * _extent(b, -1) > wave for a, b in pairs):
        return None
    xs = [operand(a, "group_gemm", f"As[{i}]", GEMM_FLOATS) for i, (a, _) in enumerate(pairs)]
    device = xs[0].tensor.device
    ys = [
        operand(b, "group_gemm", f"Bs[{i}]", GEMM_FLOATS, device=device)
        for i, (_, b) in enumerate(pairs)
    ]
    dt = xs[0].dtype
    if dt.is_f8 or any(
        x.dtype != dt or y.dtype != dt or _matmul_shape(x.shape, y.shape) is None
        for x, y in zip(xs, ys, strict=True)
    ):
        return None
    outs = [output(x, (x.shape[0], y.shape[1])) for x, y in zip(xs, ys, strict=True)]
    live = [i for i, (out, _) in enumerate(outs) if out.size]
    for at in range(0, len(live), GROUPS_PER_LAUNCH):
        some = live[at : at + GROUPS_PER_LAUNCH]
        group_gemm_tuned(
            [xs[i].tensor for i in some], [ys[i].tensor for i in some], [outs[i][0] for i in some]
        )
    return [result(x, out, ret) for x, (out, ret) in zip(xs, outs, strict=True)]


def _extent(x: Any, axis: int) -> int:
    """x's extent along `axis`, 0 where it has no such axis (matmul then says what is wrong)."""
    shape = shape_of(x)
    return shape[axis] if shape else 0


__all__: Sequence[str] = (
    "bmm",
    "dropout",
    "geglu",
    "gelu",
    "layer_norm",
    "matmul",
    "relu",
    "rms_norm",
    "silu_and_mul",
    "softmax",
    "swiglu",
)  # fmt: skip
