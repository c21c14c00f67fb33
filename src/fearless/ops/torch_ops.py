"""fearless.ops as torch operators: `torch.ops.fearless.<name>`, with fake (meta) kernels for
torch.compile and torch.export, and autograd formulas whose backward runs fearless kernels.

Importing this module imports torch and registers everything (torch_library.py does it once,
on first need). Each operator is a `torch.library.custom_op` over the function of the same name
in functional.py; its fake kernel gives the output's shape, dtype and device without running
anything; `register_autograd` saves what the backward needs and calls the backward operators
(`fearless::softmax_backward`, ...), themselves custom ops, so that torch.compile traces the
backward graph too. Every operator has a backward; an input that requires grad where no
gradient can flow (rope's cos and sin) is refused at the call, never detached.

dropout returns its mask's seed beside its output (a 0-d int64 CPU tensor): the seed is drawn
inside the operator, at run time, so a compiled graph draws a new mask per call, and the
backward replays the same mask from it.
"""

import secrets

import torch
from torch import Tensor

import fearless.ops.backward_activation as bwa
import fearless.ops.backward_rows as bwr
import fearless.ops.functional as F

from ..errors import KernelTypeError
from ..runtime.location import user_location
from ._route import kernels_only

NS = "fearless"
_op = torch.library.custom_op


def _new(x: Tensor, shape: tuple[int, ...] | list[int]) -> Tensor:
    """A contiguous tensor like `x` (dtype, device) of `shape`: what every operator returns."""
    return x.new_empty(tuple(shape))


# ------------------------------------------------------------------------------------ rows


@_op(f"{NS}::softmax", mutates_args=())
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    with kernels_only():
        return F.softmax(x, dim)  # type: ignore[no-any-return]


@softmax.register_fake
def _(x: Tensor, dim: int = -1) -> Tensor:
    return _new(x, x.shape)


def _softmax_ctx(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(output)
    ctx.dim = inputs[1]  # type: ignore[attr-defined]


def _softmax_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return torch.ops.fearless.softmax_backward(y, dy, ctx.dim), None  # type: ignore[attr-defined]


@_op(f"{NS}::softmax_backward", mutates_args=())
def softmax_backward(y: Tensor, dy: Tensor, dim: int = -1) -> Tensor:
    with kernels_only():
        return bwr.softmax_backward(y, dy, dim)  # type: ignore[no-any-return]


@softmax_backward.register_fake
def _(y: Tensor, dy: Tensor, dim: int = -1) -> Tensor:
    return _new(y, y.shape)


@_op(f"{NS}::rms_norm", mutates_args=())
def rms_norm(
    x: Tensor, normalized_shape: list[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    with kernels_only():
        return F.rms_norm(x, normalized_shape, weight, eps)  # type: ignore[no-any-return]


@rms_norm.register_fake
def _(
    x: Tensor, normalized_shape: list[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    return _new(x, x.shape)


def _rms_norm_ctx(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: Tensor) -> None:
    x, _, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = float(eps) if eps is not None else torch.finfo(x.dtype).eps  # type: ignore[attr-defined]


def _rms_norm_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    x, weight = ctx.saved_tensors  # type: ignore[attr-defined]
    dx, dw = torch.ops.fearless.rms_norm_backward(dy, x, weight, ctx.eps)  # type: ignore[attr-defined]
    return dx, None, (dw if weight is not None else None), None


@_op(f"{NS}::rms_norm_backward", mutates_args=())
def rms_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, eps: float
) -> tuple[Tensor, Tensor]:
    with kernels_only():
        dx, dw = bwr.rms_norm_backward(dy, x, weight, eps)
    return dx, (dw if dw is not None else x.new_empty((0,)))


@rms_norm_backward.register_fake
def _(dy: Tensor, x: Tensor, weight: Tensor | None, eps: float) -> tuple[Tensor, Tensor]:
    return _new(x, x.shape), _new(x, weight.shape if weight is not None else (0,))


@_op(f"{NS}::layer_norm", mutates_args=())
def layer_norm(
    x: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    with kernels_only():
        return F.layer_norm(x, normalized_shape, weight, bias, eps)  # type: ignore[no-any-return]


@layer_norm.register_fake
def _(
    x: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    return _new(x, x.shape)


def _layer_norm_ctx(
    ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: Tensor
) -> None:
    x, _, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = float(eps)  # type: ignore[attr-defined]


def _layer_norm_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    x, weight, bias = ctx.saved_tensors  # type: ignore[attr-defined]
    dx, dw, db = torch.ops.fearless.layer_norm_backward(dy, x, weight, bias, ctx.eps)  # type: ignore[attr-defined]
    return dx, None, (dw if weight is not None else None), (db if bias is not None else None), None


@_op(f"{NS}::layer_norm_backward", mutates_args=())
def layer_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    with kernels_only():
        dx, dw, db = bwr.layer_norm_backward(dy, x, weight, bias, eps)
    none = x.new_empty((0,))
    return dx, (dw if dw is not None else none), (db if db is not None else none)


@layer_norm_backward.register_fake
def _(
    dy: Tensor, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    n = (x.shape[-1],)
    return (
        _new(x, x.shape),
        _new(x, n if weight is not None else (0,)),
        _new(x, n if bias is not None else (0,)),
    )


# ------------------------------------------------------------------------------------ GEMM


@_op(f"{NS}::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor) -> Tensor:
    with kernels_only():
        return F.matmul(a, b)  # type: ignore[no-any-return]


@matmul.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    return _new(a, (a.shape[0], b.shape[1]))


def _gemm_ctx(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _matmul_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors  # type: ignore[attr-defined]
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, torch.ops.fearless.matmul)  # type: ignore[attr-defined]


def _gemm_grads(needs: tuple, a: Tensor, b: Tensor, dy: Tensor, mm: object) -> tuple:
    """(dA, dB) of A @ B: dY @ B^T and A^T @ dY, each only where an input needs it."""
    t = torch.ops.fearless.transpose
    da = mm(dy, t(b)) if needs[0] else None  # type: ignore[operator]
    db = mm(t(a), dy) if needs[1] else None  # type: ignore[operator]
    return da, db


@_op(f"{NS}::bmm", mutates_args=())
def bmm(a: Tensor, b: Tensor) -> Tensor:
    with kernels_only():
        return F.bmm(a, b)  # type: ignore[no-any-return]


@bmm.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    return _new(a, (a.shape[0], a.shape[1], b.shape[2]))


def _bmm_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors  # type: ignore[attr-defined]
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, torch.ops.fearless.bmm)  # type: ignore[attr-defined]


@_op(f"{NS}::group_gemm", mutates_args=())
def group_gemm(As: list[Tensor], Bs: list[Tensor]) -> list[Tensor]:
    with kernels_only():
        return F.group_gemm(As, Bs)


@group_gemm.register_fake
def _(As: list[Tensor], Bs: list[Tensor]) -> list[Tensor]:
    return [_new(a, (a.shape[0], b.shape[1])) for a, b in zip(As, Bs, strict=True)]


def _group_gemm_ctx(
    ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: list[Tensor]
) -> None:
    As, Bs = inputs
    ctx.n = len(As)  # type: ignore[attr-defined]
    ctx.needs = [(a.requires_grad, b.requires_grad) for a, b in zip(As, Bs, strict=True)]  # type: ignore[attr-defined]
    ctx.save_for_backward(*As, *Bs)


def _group_gemm_bwd(ctx: torch.autograd.function.FunctionCtx, dys: list[Tensor]) -> tuple:
    saved = ctx.saved_tensors  # type: ignore[attr-defined]
    n = ctx.n  # type: ignore[attr-defined]
    mm = torch.ops.fearless.matmul
    grads = [
        _gemm_grads(ctx.needs[i], saved[i], saved[n + i], dys[i], mm)  # type: ignore[attr-defined]
        for i in range(n)
    ]
    return [g[0] for g in grads], [g[1] for g in grads]


# ----------------------------------------------------------------------------- activations


@_op(f"{NS}::relu", mutates_args=())
def relu(x: Tensor) -> Tensor:
    with kernels_only():
        return F.relu(x)  # type: ignore[no-any-return]


@relu.register_fake
def _(x: Tensor) -> Tensor:
    return _new(x, x.shape)


@_op(f"{NS}::relu_backward", mutates_args=())
def relu_backward(dy: Tensor, x: Tensor) -> Tensor:
    with kernels_only():
        return bwa.relu_backward(dy, x)  # type: ignore[no-any-return]


@relu_backward.register_fake
def _(dy: Tensor, x: Tensor) -> Tensor:
    return _new(x, x.shape)


@_op(f"{NS}::gelu", mutates_args=())
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    with kernels_only():
        return F.gelu(x, approximate)  # type: ignore[no-any-return]


@gelu.register_fake
def _(x: Tensor, approximate: str = "none") -> Tensor:
    return _new(x, x.shape)


@_op(f"{NS}::gelu_backward", mutates_args=())
def gelu_backward(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    with kernels_only():
        return bwa.gelu_backward(dy, x, approximate)  # type: ignore[no-any-return]


@gelu_backward.register_fake
def _(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    return _new(x, x.shape)


@_op(f"{NS}::silu_and_mul", mutates_args=())
def silu_and_mul(x: Tensor) -> Tensor:
    with kernels_only():
        return F.silu_and_mul(x)  # type: ignore[no-any-return]


@silu_and_mul.register_fake
def _(x: Tensor) -> Tensor:
    return _new(x, (*x.shape[:-1], x.shape[-1] // 2))


@_op(f"{NS}::silu_and_mul_backward", mutates_args=())
def silu_and_mul_backward(dy: Tensor, x: Tensor) -> Tensor:
    with kernels_only():
        return bwa.silu_and_mul_backward(dy, x)  # type: ignore[no-any-return]


@silu_and_mul_backward.register_fake
def _(dy: Tensor, x: Tensor) -> Tensor:
    return _new(x, x.shape)


@_op(f"{NS}::geglu", mutates_args=())
def geglu(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    with kernels_only():
        return F.geglu(x, dim, approximate)  # type: ignore[no-any-return]


@geglu.register_fake
def _(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    return _new(x, (*x.shape[:-1], x.shape[-1] // 2))


@_op(f"{NS}::geglu_backward", mutates_args=())
def geglu_backward(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    with kernels_only():
        return bwa.geglu_backward(dy, x, approximate)  # type: ignore[no-any-return]


@geglu_backward.register_fake
def _(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    return _new(x, x.shape)


def _save_inputs(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: Tensor) -> None:
    """Save the tensor inputs; keep the others (approximate, dim) as `ctx.args`."""
    ctx.save_for_backward(*(i for i in inputs if isinstance(i, Tensor)))
    ctx.args = [i for i in inputs if not isinstance(i, Tensor)]  # type: ignore[attr-defined]


def _relu_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return (torch.ops.fearless.relu_backward(dy, x),)


def _gelu_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return torch.ops.fearless.gelu_backward(dy, x, *ctx.args), None  # type: ignore[attr-defined]


def _silu_and_mul_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return (torch.ops.fearless.silu_and_mul_backward(dy, x),)


def _geglu_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
    _, approximate = ctx.args  # type: ignore[attr-defined]
    return torch.ops.fearless.geglu_backward(dy, x, approximate), None, None


@_op(f"{NS}::swiglu", mutates_args=())
def swiglu(a: Tensor, b: Tensor) -> Tensor:
    with kernels_only():
        return F.swiglu(a, b)  # type: ignore[no-any-return]


@swiglu.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    return _new(a, a.shape)


@_op(f"{NS}::swiglu_backward", mutates_args=())
def swiglu_backward(dy: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    with kernels_only():
        return bwa.swiglu_backward(dy, a, b)  # type: ignore[no-any-return]


@swiglu_backward.register_fake
def _(dy: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return _new(a, a.shape), _new(b, b.shape)


def _swiglu_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors  # type: ignore[attr-defined]
    return torch.ops.fearless.swiglu_backward(dy, a, b)  # type: ignore[no-any-return]


@_op(f"{NS}::dropout", mutates_args=())
def dropout(x: Tensor, p: float, seed: int | None = None) -> tuple[Tensor, Tensor]:
    s = secrets.randbits(63) if seed is None else int(seed)
    with kernels_only():
        out = F.dropout(x, p, True, s)
    return (out if out is not x else x.clone()), torch.tensor(s, dtype=torch.int64)


@dropout.register_fake
def _(x: Tensor, p: float, seed: int | None = None) -> tuple[Tensor, Tensor]:
    return _new(x, x.shape), torch.empty((), dtype=torch.int64)


@_op(f"{NS}::dropout_backward", mutates_args=())
def dropout_backward(dy: Tensor, seed: Tensor, p: float) -> Tensor:
    with kernels_only():
        dx = F.dropout(dy, p, True, int(seed))
    return dx if dx is not dy else dy.clone()  # type: ignore[no-any-return]


@dropout_backward.register_fake
def _(dy: Tensor, seed: Tensor, p: float) -> Tensor:
    return _new(dy, dy.shape)


def _dropout_ctx(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(output[1])
    ctx.p = inputs[1]  # type: ignore[attr-defined]


def _dropout_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor, _dseed: Tensor) -> tuple:
    (seed,) = ctx.saved_tensors  # type: ignore[attr-defined]
    return torch.ops.fearless.dropout_backward(dy, seed, ctx.p), None, None  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------- layout


@_op(f"{NS}::transpose", mutates_args=())
def transpose(x: Tensor) -> Tensor:
    with kernels_only():
        return F.transpose(x)  # type: ignore[no-any-return]


@transpose.register_fake
def _(x: Tensor) -> Tensor:
    return _new(x, (*x.shape[:-2], x.shape[-1], x.shape[-2]))


def _transpose_bwd(ctx: torch.autograd.function.FunctionCtx, dy: Tensor) -> tuple:
    return (torch.ops.fearless.transpose(dy),)


@_op(f"{NS}::rope", mutates_args=())
def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    with kernels_only():
        return F.rope(q, k, cos, sin)  # type: ignore[no-any-return]


@rope.register_fake
def _(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return _new(q, q.shape), _new(k, k.shape)


@_op(f"{NS}::rope_backward", mutates_args=())
def rope_backward(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    with kernels_only():
        return F.rope_backward(dq, dk, cos, sin)  # type: ignore[no-any-return]


@rope_backward.register_fake
def _(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return _new(dq, dq.shape), _new(dk, dk.shape)


def _rope_ctx(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: tuple) -> None:
    _, _, cos, sin = inputs
    for t, name in ((cos, "cos"), (sin, "sin")):
        if t.requires_grad:
            raise KernelTypeError(
                f"`{name}` of `fearless.ops.rope` requires grad, but rope has no gradient "
                "for its cos and sin tables: it would be cut from the autograd graph",
                user_location(),
                code="E0701",
                help=f"pass `{name}.detach()` (position tables are constants in training)",
            )
    ctx.save_for_backward(cos, sin)


def _rope_bwd(ctx: torch.autograd.function.FunctionCtx, dq: Tensor, dk: Tensor) -> tuple:
    cos, sin = ctx.saved_tensors  # type: ignore[attr-defined]
    dq_in, dk_in = torch.ops.fearless.rope_backward(dq, dk, cos, sin)  # type: ignore[attr-defined]
    return dq_in, dk_in, None, None


# ------------------------------------------------------------------------------- autograd

_AUTOGRAD = {
    softmax: (_softmax_bwd, _softmax_ctx),
    rms_norm: (_rms_norm_bwd, _rms_norm_ctx),
    layer_norm: (_layer_norm_bwd, _layer_norm_ctx),
    matmul: (_matmul_bwd, _gemm_ctx),
    bmm: (_bmm_bwd, _gemm_ctx),
    group_gemm: (_group_gemm_bwd, _group_gemm_ctx),
    relu: (_relu_bwd, _save_inputs),
    gelu: (_gelu_bwd, _save_inputs),
    silu_and_mul: (_silu_and_mul_bwd, _save_inputs),
    geglu: (_geglu_bwd, _save_inputs),
    swiglu: (_swiglu_bwd, _save_inputs),
    dropout: (_dropout_bwd, _dropout_ctx),
    transpose: (_transpose_bwd, None),
    rope: (_rope_bwd, _rope_ctx),
}
for _fwd, (_bwd, _ctx) in _AUTOGRAD.items():
    _fwd.register_autograd(_bwd, setup_context=_ctx)  # type: ignore[arg-type]
