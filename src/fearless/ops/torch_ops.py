"""fearless.ops as torch operators: `torch.ops.fearless.<name>`, with fake (meta) kernels for
torch.compile and torch.export, and autograd formulas whose backward runs fearless kernels.

Importing this module imports torch and registers everything (torch_library.py does it once,
on first need). Each operator is a `torch.library.custom_op` over the function of the same name
in functional.py (`_define`: the typed signature below is the op's schema; its body runs under
`kernels_only`, so it never dispatches again); its fake kernel gives the output's shape, dtype
and device without running anything; `register_autograd` saves what the backward needs and
calls the backward operators (`fearless::softmax_backward`, ...), themselves custom ops, so
that torch.compile traces the backward graph too. Every operator here has a backward; an input
that requires grad where no gradient can flow (rope's cos and sin, scaled_dot_product_attention's
`attn_mask`) is refused at the call, never detached. The operators with TileGym's, flash-attn's and Liger's names (DESIGN 2c) are
in ops/torch_ops_attention.py (the attention family) and ops/torch_ops_tilegym.py (the
others), on the helpers defined here (`_define`, `_forward_only`, ...; `_derive` defines a
backward or a decode operator on its forward's inputs, its schema derived from that one's).

dropout takes its mask's seed as a tensor (`fearless.ops.dropout` draws it from torch's
generator, `torch.randint`, when no seed is given): a compiled graph sees each draw as a random
operator of its own, so two dropouts of one tensor are two nodes with two masks, never merged
as one (common-subexpression elimination merges calls of one operator on the same inputs), and
`torch.manual_seed` repeats them; the backward replays the mask from the same seed.

A backward whose formula turns off autograd's zero-filling of absent gradients
(`set_materialize_grads(False)`: dropout's, the training attentions' with their kept lse, the
fused linear cross-entropy's) gets None where no gradient reaches the output (an operator
downstream gave none) and then gives None for every input, as torch's own operators do.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor

import fearless.ops.attention as A
import fearless.ops.backward_activation as bwa
import fearless.ops.backward_rows as bwr
import fearless.ops.functional as F

from ..runtime.location import argument_error
from . import torch_eager
from ._io import heads_major, seq_major_base, seq_major_bases
from ._route import kernels_only

NS = "fearless"
Ctx = torch.autograd.function.FunctionCtx
# what the backward formulas call: each operator by its eager form (ops/torch_eager.py), which
# is the custom op itself while torch.compile traces
OPS: Any = torch_eager.EAGER
_SIGNATURES: dict[str, inspect.Signature] = {}  # operator name -> its body's (its schema)
_NAMES: dict[int, str] = {}  # id of a `_define`d operator -> its name


def _new(x: Tensor, shape: tuple[int, ...] | list[int]) -> Tensor:
    """A contiguous tensor like `x` (dtype, device) of `shape`: what every operator returns."""
    return x.new_empty(tuple(shape))


def _like_first(first: Tensor, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of an operator whose output is shaped as its first argument."""
    return _new(first, first.shape)


def _like_second(_: Tensor, second: Tensor, *__: Any, **___: Any) -> Tensor:
    """The fake kernel of a backward op (dy, x, ...) whose gradient is shaped as x."""
    return _new(second, second.shape)


def _shaped_as(*tensors: Tensor) -> tuple[Tensor, ...]:
    """A fake kernel's outputs shaped as `tensors`, one each (a backward's gradients)."""
    return tuple(_new(t, t.shape) for t in tensors)


def _nothing(*_: Any, **__: Any) -> None:
    """The fake kernel of an operator that writes an argument in place and returns nothing."""


def _or_empty(t: Tensor | None, like: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """`t`, or for None an empty (0,) tensor beside `like` (`dtype`, else like's): a torch
    operator returns tensors only. Each call makes its own (outputs may not alias)."""
    return like.new_empty((0,), dtype=dtype) if t is None else t


def _with_lse(q: Tensor, *_: Any, **__: Any) -> tuple[Tensor, Tensor]:
    """The fake kernel of an attention that also returns its log-sum-exp: the output shaped as
    q, and an f32 lse shaped as q without its last axis (one per query row)."""
    return _new(q, q.shape), q.new_empty(q.shape[:-1], dtype=torch.float32)


def _halved(x: Tensor, dim: int = -1, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of a gated operator: axis `dim` halved, the last by default (the real
    call checks the axis)."""
    shape = list(x.shape)
    if shape and -len(shape) <= dim < len(shape):
        shape[dim] //= 2
    return _new(x, shape)


def _forward_only(name: str) -> Callable[..., None]:
    """The setup_context of a forward-only operator: an input that requires grad is refused at
    the call, not cut from the autograd graph."""

    def refuse(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
        raise argument_error(
            f"`fearless.ops.{name}` has no backward yet (forward only): its result would be cut "
            "from the autograd graph",
            help="call it under `torch.no_grad()` (inference)",
        )

    return refuse


def _first_order_only(name: str) -> Callable[..., None]:
    """The setup_context of a backward operator (`softmax_backward`...): autograd records one
    only while it takes a gradient of a gradient (`create_graph=True`), which fearless.ops has
    no formula for; refused there with a fearless error instead of torch's "no autograd formula
    was registered" at the second backward."""

    def refuse(ctx: Ctx, inputs: tuple, output: Any) -> None:
        raise first_order_error(name)

    return refuse


def first_order_error(name: str) -> Exception:
    """The E0701 of a gradient taken with `create_graph=True` through `name`, a gradient that
    fearless.ops has no formula to differentiate again (`_first_order_only`, and a backward
    that computes its gradients without a backward operator of its own)."""
    return argument_error(
        f"`fearless.ops.{name}` is a gradient and has no backward of its own: fearless.ops "
        "takes first-order gradients only (here autograd records a gradient, as "
        "`create_graph=True` asks, to differentiate it again)",
        help="take the gradient without `create_graph=True`; for second-order terms "
        "(a Hessian-vector product, a gradient penalty) use torch's own operators there",
    )


def _no_backward(ctx: Any, *_: Any) -> tuple:
    raise AssertionError("unreachable: the setup_context refuses first")


def _define(
    name: str,
    fake: Callable[..., Any],
    mutates: tuple[str, ...] = (),
    *,
    by_name: bool = False,
    forward_only: bool = False,
) -> Callable[[Callable[..., Any]], Any]:
    """Register the decorated typed function as `fearless::<name>`, its body run under
    `kernels_only`, with `fake` as its fake kernel; `mutates` names the arguments it writes in
    place (an operator that updates an argument returns nothing). `by_name`: `fake` takes the
    operator's arguments by name, defaults filled in (`_by_name`); `forward_only`: autograd
    refuses an input that requires grad (`_forward_only`), as it does for a `<name>_backward`
    under `create_graph=True` (`_first_order_only`)."""

    def define(body: Callable[..., Any]) -> Any:
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> Any:
            with kernels_only():
                return body(*args, **kwargs)

        _SIGNATURES[name] = inspect.signature(body)
        op = torch.library.custom_op(f"{NS}::{name}", run, mutates_args=mutates)
        op.register_fake(_by_name(body, fake) if by_name else fake)
        _NAMES[id(op)] = name
        torch_eager.record(name, run, _SIGNATURES[name], bool(mutates))
        if forward_only:
            register_autograd(op, _no_backward, _forward_only(name))
        elif name.endswith("_backward"):  # a gradient: autograd records it under create_graph
            register_autograd(op, _no_backward, _first_order_only(name))
        return op

    return define


def _by_name(body: Callable[..., Any], fake: Callable[..., Any]) -> Callable[..., Any]:
    """`fake` called with `body`'s arguments by name, its defaults filled in: a fake kernel
    that reads a few of an operator's arguments names those and takes the rest as `**_`,
    instead of restating the operator's signature."""
    signature = inspect.signature(body)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return fake(**bound.arguments)

    return call


def _input(name: str, annotation: Any = Tensor, default: Any = inspect.Parameter.empty) -> Any:
    """One input of a `_derive`d operator: `name: annotation = default`."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Parameter(name, kind, default=default, annotation=annotation)


def _derive(
    name: str,
    fake: Callable[..., Any],
    impl: Callable[..., Any],
    like: str,
    returns: Any,
    insert: dict[int, tuple[inspect.Parameter, ...]] | None = None,
    drop: tuple[str, ...] = (),
    **options: Any,
) -> Any:
    """`_define` `fearless::<name>` on the inputs of the operator `like` (a backward on its
    forward's, a decode on its prefill's) instead of restating them: `insert[i]` (`_input`s)
    before `like`'s i-th input (len: after the last), `drop` left out, `returns` its output
    type; its body is `impl` called with every input in order, defaults filled in. `options`:
    `_define`'s (by_name, forward_only)."""
    inputs = list(_SIGNATURES[like].parameters.values())
    insert = insert or {}
    params = [
        param
        for i in range(len(inputs) + 1)
        for param in (*insert.get(i, ()), *inputs[i : i + 1])
        if param.name not in drop
    ]
    signature = inspect.Signature(params, return_annotation=returns)

    def body(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return impl(*bound.args)

    body.__name__ = body.__qualname__ = name
    body.__signature__ = signature  # type: ignore[attr-defined]
    return _define(name, fake, **options)(body)


def register_autograd(
    op: Any, backward: Callable[..., Any], setup: Callable[..., Any] | None
) -> None:
    """Give `op` (a `_define`d operator) its autograd formula: `backward` after `setup` (its
    setup_context), for the custom op and its eager form (ops/torch_eager.py) alike."""
    op.register_autograd(backward, setup_context=setup)
    torch_eager.record_autograd(_NAMES[id(op)], backward, setup)


def _autograd(op: Any, setup: Callable[..., Any] | None) -> Callable[[Callable[..., Any]], Any]:
    """Register the decorated function as `op`'s backward, after `setup` (its setup_context)."""

    def register(backward: Callable[..., Any]) -> Any:
        register_autograd(op, backward, setup)
        return backward

    return register


def _save_tensors(ctx: Ctx, inputs: tuple, output: Any) -> None:
    """Save the tensor inputs; keep the others (approximate, dim, eps) as `ctx.args`."""
    ctx.save_for_backward(*(i for i in inputs if isinstance(i, Tensor)))
    ctx.args = [i for i in inputs if not isinstance(i, Tensor)]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ rows


@_define("softmax", _like_first)
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return F.softmax(x, dim)  # type: ignore[no-any-return]


def _save_output(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(output)
    ctx.dim = inputs[1]  # type: ignore[attr-defined]


@_autograd(softmax, _save_output)
def _softmax_bwd(ctx: Any, dy: Tensor) -> tuple:
    (y,) = ctx.saved_tensors
    return OPS.softmax_backward(y, dy, ctx.dim), None


@_define("softmax_backward", _like_first)
def softmax_backward(y: Tensor, dy: Tensor, dim: int = -1) -> Tensor:
    return bwr.softmax_backward(y, dy, dim)  # type: ignore[no-any-return]


@_define("rms_norm", _like_first)
def rms_norm(
    x: Tensor, normalized_shape: list[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    return F.rms_norm(x, normalized_shape, weight, eps)  # type: ignore[no-any-return]


def _rms_eps(x: Tensor, eps: float | None) -> float:
    """The eps an rms_norm forward used: the given one, else x's dtype's machine epsilon."""
    return float(eps) if eps is not None else torch.finfo(x.dtype).eps


def _rms_norm_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    x, _, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = _rms_eps(x, eps)  # type: ignore[attr-defined]


@_autograd(rms_norm, _rms_norm_ctx)
def _rms_norm_bwd(ctx: Any, dy: Tensor) -> tuple:
    x, weight = ctx.saved_tensors
    dx, dw = OPS.rms_norm_backward(dy, x, weight, ctx.eps)
    return dx, None, (dw if weight is not None else None), None


def _norm_grads_fake(dy: Tensor, x: Tensor, *params: Any) -> tuple[Tensor, ...]:
    """dx, then one gradient per parameter: (n,), or (0,) for a parameter that is None."""
    n = (x.shape[-1],)
    return (_new(x, x.shape), *(_new(x, n if p is not None else (0,)) for p in params[:-1]))


@_define("rms_norm_backward", _norm_grads_fake)
def rms_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, eps: float
) -> tuple[Tensor, Tensor]:
    dx, dw = bwr.rms_norm_backward(dy, x, weight, eps)
    return dx, _or_empty(dw, x)


@_define("layer_norm", _like_first)
def layer_norm(
    x: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    return F.layer_norm(x, normalized_shape, weight, bias, eps)  # type: ignore[no-any-return]


def _layer_norm_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    x, _, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = float(eps)  # type: ignore[attr-defined]


@_autograd(layer_norm, _layer_norm_ctx)
def _layer_norm_bwd(ctx: Any, dy: Tensor) -> tuple:
    x, weight, bias = ctx.saved_tensors
    dx, dw, db = OPS.layer_norm_backward(dy, x, weight, bias, ctx.eps)
    return dx, None, (dw if weight is not None else None), (db if bias is not None else None), None


@_define("layer_norm_backward", _norm_grads_fake)
def layer_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    dx, dw, db = bwr.layer_norm_backward(dy, x, weight, bias, eps)
    return dx, _or_empty(dw, x), _or_empty(db, x)


# ------------------------------------------------------------------------------------ GEMM


@_define("matmul", lambda a, b: _new(a, (a.shape[0], b.shape[1])))
def matmul(a: Tensor, b: Tensor) -> Tensor:
    return F.matmul(a, b)  # type: ignore[no-any-return]


def _gemm_grads(needs: Any, a: Tensor, b: Tensor, dy: Tensor, mm: Any) -> tuple:
    """(dA, dB) of A @ B: dY @ B^T and A^T @ dY, each only where an input needs it."""
    t = OPS.transpose
    return (mm(dy, t(b)) if needs[0] else None), (mm(t(a), dy) if needs[1] else None)


@_autograd(matmul, _save_tensors)
def _matmul_bwd(ctx: Any, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, OPS.matmul)


@_define("bmm", lambda a, b: _new(a, (a.shape[0], a.shape[1], b.shape[2])))
def bmm(a: Tensor, b: Tensor) -> Tensor:
    return F.bmm(a, b)  # type: ignore[no-any-return]


@_autograd(bmm, _save_tensors)
def _bmm_bwd(ctx: Any, dy: Tensor) -> tuple:
    a, b = ctx.saved_tensors
    return _gemm_grads(ctx.needs_input_grad, a, b, dy, OPS.bmm)


@_define(
    "group_gemm",
    lambda As, Bs: [_new(a, (a.shape[0], b.shape[1])) for a, b in zip(As, Bs, strict=True)],
)
def group_gemm(As: list[Tensor], Bs: list[Tensor]) -> list[Tensor]:
    return F.group_gemm(As, Bs)


def _group_gemm_ctx(ctx: Ctx, inputs: tuple, output: list[Tensor]) -> None:
    As, Bs = inputs
    ctx.needs = [(a.requires_grad, b.requires_grad) for a, b in zip(As, Bs, strict=True)]  # type: ignore[attr-defined]
    ctx.save_for_backward(*As, *Bs)


@_autograd(group_gemm, _group_gemm_ctx)
def _group_gemm_bwd(ctx: Any, dys: list[Tensor]) -> tuple:
    saved, n = ctx.saved_tensors, len(ctx.needs)
    grads = [
        _gemm_grads(ctx.needs[i], saved[i], saved[n + i], dys[i], OPS.matmul) for i in range(n)
    ]
    return [g[0] for g in grads], [g[1] for g in grads]


# ----------------------------------------------------------------------------- activations


def _activation(name: str, fake: Callable[..., Any]) -> tuple[Any, Any]:
    """`fearless::<name>(x)` over functional.py's `<name>` and `fearless::<name>_backward(dy, x)`
    over backward_activation.py's, registered as the first's autograd formula: the operators
    of an activation of x alone (none with a setting, such as gelu's `approximate`)."""
    forward, backward = getattr(F, name), getattr(bwa, f"{name}_backward")

    def op(x: Tensor) -> Tensor:
        return forward(x)  # type: ignore[no-any-return]

    def op_backward(dy: Tensor, x: Tensor) -> Tensor:
        return backward(dy, x)  # type: ignore[no-any-return]

    defined = _define(name, fake)(op)
    defined_backward = _define(f"{name}_backward", _like_second)(op_backward)

    @_autograd(defined, _save_tensors)
    def _bwd(ctx: Any, dy: Tensor) -> tuple:
        return (getattr(OPS, f"{name}_backward")(dy, *ctx.saved_tensors),)

    return defined, defined_backward


relu, relu_backward = _activation("relu", _like_first)


@_define("gelu", _like_first)
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return F.gelu(x, approximate)  # type: ignore[no-any-return]


@_define("gelu_backward", _like_second)
def gelu_backward(dy: Tensor, x: Tensor, approximate: str = "none") -> Tensor:
    return bwa.gelu_backward(dy, x, approximate)  # type: ignore[no-any-return]


@_autograd(gelu, _save_tensors)
def _gelu_bwd(ctx: Any, dy: Tensor) -> tuple:
    return OPS.gelu_backward(dy, *ctx.saved_tensors, *ctx.args), None


silu_and_mul, silu_and_mul_backward = _activation("silu_and_mul", _halved)


@_define("geglu", _halved)
def geglu(x: Tensor, dim: int = -1, approximate: str = "none") -> Tensor:
    return F.geglu(x, dim, approximate)  # type: ignore[no-any-return]


@_define("geglu_backward", _like_second)
def geglu_backward(dy: Tensor, x: Tensor, approximate: str = "none", dim: int = -1) -> Tensor:
    return bwa.geglu_backward(dy, x, approximate, dim)  # type: ignore[no-any-return]


@_autograd(geglu, _save_tensors)
def _geglu_bwd(ctx: Any, dy: Tensor) -> tuple:
    dim, approximate = ctx.args
    return OPS.geglu_backward(dy, *ctx.saved_tensors, approximate, dim), None, None


@_define("swiglu", _like_first)
def swiglu(a: Tensor, b: Tensor) -> Tensor:
    return F.swiglu(a, b)  # type: ignore[no-any-return]


@_define("swiglu_backward", lambda dy, a, b: _shaped_as(a, b))
def swiglu_backward(dy: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return bwa.swiglu_backward(dy, a, b)  # type: ignore[no-any-return]


@_autograd(swiglu, _save_tensors)
def _swiglu_bwd(ctx: Any, dy: Tensor) -> tuple:
    return tuple(OPS.swiglu_backward(dy, *ctx.saved_tensors))


@_define("dropout", _like_first)
def dropout(x: Tensor, p: float, seed: Tensor) -> Tensor:
    """x's dropout with the mask of `seed`, a one-element integer tensor (on the CPU: read on
    the host; `fearless.ops.dropout` draws it from torch's generator when given none)."""
    out = F.dropout(x, p, True, _seed_value(seed))
    return out if out is not x else x.clone()


def _seed_value(seed: Tensor) -> int:
    """The mask's seed as the kernels' int, or E0701 for a tensor that is no integer seed."""
    if not isinstance(seed, Tensor) or seed.numel() != 1 or seed.dtype.is_floating_point:
        what = type(seed).__name__
        if isinstance(seed, Tensor):
            what = f"a {seed.dtype} tensor of shape {tuple(seed.shape)}"
        raise argument_error(
            f"`seed` of `fearless.ops.dropout` (the torch operator) must be a one-element "
            f"integer tensor, not {what}",
            help="pass `torch.tensor(seed)`, or call `fearless.ops.dropout(x, p, seed=...)`, "
            "which draws one from torch's generator for seed=None",
        )
    return F.seed_i64(int(seed.item()))


@_define("dropout_backward", _like_first)
def dropout_backward(dy: Tensor, seed: Tensor, p: float) -> Tensor:
    dx = F.dropout(dy, p, True, _seed_value(seed))
    return dx if dx is not dy else dy.clone()  # type: ignore[no-any-return]


def _dropout_ctx(ctx: Ctx, inputs: tuple, output: Tensor) -> None:
    ctx.save_for_backward(inputs[2])  # the seed: the backward replays its mask
    ctx.p = inputs[1]  # type: ignore[attr-defined]
    ctx.set_materialize_grads(False)  # no gradient: None, not a zero tensor dropped out


@_autograd(dropout, _dropout_ctx)
def _dropout_bwd(ctx: Any, dy: Tensor | None) -> tuple:
    if dy is None:  # nothing reached the output (set_materialize_grads(False))
        return None, None, None
    (seed,) = ctx.saved_tensors
    return OPS.dropout_backward(dy, seed, ctx.p), None, None


# ---------------------------------------------------------------------------------- layout


@_define("transpose", lambda x: _new(x, (*x.shape[:-2], x.shape[-1], x.shape[-2])))
def transpose(x: Tensor) -> Tensor:
    return F.transpose(x)  # type: ignore[no-any-return]


@_autograd(transpose, None)
def _transpose_bwd(ctx: Any, dy: Tensor) -> tuple:
    return (OPS.transpose(dy),)


def _seq_major_like(x: Tensor) -> Tensor:
    """A new tensor of x's (B, H, S, D) shape over (B, S, H, D) memory: what an operator that
    reads a sequence-major x in place (`_io.seq_major_base`) returns in its layout."""
    return x.new_empty(heads_major(x.shape, True)).transpose(1, 2)


def _rotated_fake(q: Tensor, k: Tensor, *_: Any) -> tuple[Tensor, ...]:
    """rope's outputs: sequence-major where q and k both are (functional._rope), else dense."""
    if seq_major_bases(q, k) is not None:
        return _seq_major_like(q), _seq_major_like(k)
    return _shaped_as(q, k)


@_define("rope", _rotated_fake)
def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return F.rope(q, k, cos, sin)  # type: ignore[no-any-return]


@_define("rope_backward", _rotated_fake)
def rope_backward(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return F.rope_backward(dq, dk, cos, sin)  # type: ignore[no-any-return]


def _rope_ctx(ctx: Ctx, inputs: tuple, output: tuple) -> None:
    _, _, cos, sin = inputs
    for t, name in ((cos, "cos"), (sin, "sin")):
        if t.requires_grad:
            raise argument_error(
                f"`{name}` of `fearless.ops.rope` requires grad, but rope has no gradient "
                "for its cos and sin tables: it would be cut from the autograd graph",
                help=f"pass `{name}.detach()` (position tables are constants in training)",
            )
    ctx.save_for_backward(cos, sin)


@_autograd(rope, _rope_ctx)
def _rope_bwd(ctx: Any, dq: Tensor, dk: Tensor) -> tuple:
    cos, sin = ctx.saved_tensors
    return (*OPS.rope_backward(dq, dk, cos, sin), None, None)


# ------------------------------------------------------------------------------- attention


def _in_q_layout(q: Tensor, heads_major_only: bool = False) -> Tensor:
    """The fake output of an inference attention whose kernels read a sequence-major q in place
    and write its layout (`_attention_checks.sequence_layout`) unless `heads_major_only`:
    sequence-major there, dense otherwise."""
    if not heads_major_only and seq_major_base(q) is not None:
        return _seq_major_like(q)
    return _new(q, q.shape)


def _like_q(q: Tensor, *_: Any, **__: Any) -> Tensor:
    """The fake kernel of an inference attention that writes q's layout (TileGym's fmha,
    swa_attention, gemma_attention): `_in_q_layout`."""
    return _in_q_layout(q)


def _attention_fake(q: Tensor, attn_mask: Tensor | None, is_causal: bool, **_: Any) -> Tensor:
    """The inference forward's output: dense for a decode step (`attention.is_decode`), else in
    q's layout (`_in_q_layout`)."""
    return _in_q_layout(q, A.is_decode(q, attn_mask, is_causal))


@_define("scaled_dot_product_attention", _attention_fake, by_name=True)
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor] = None,  # noqa: UP045  (torch's schema inference reads it)
    is_causal: bool = False,
    scale: Optional[float] = None,  # noqa: UP045
    enable_gqa: bool = False,
) -> Tensor:
    return A.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, enable_gqa)  # type: ignore[no-any-return]


def _qkv_grads(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, *_: Any, **__: Any) -> tuple:
    """The fake kernel of an attention backward: (dq, dk, dv) shaped as q, k, v."""
    return _shaped_as(q, k, v)


@_define("scaled_dot_product_attention_backward", _qkv_grads)
def scaled_dot_product_attention_backward(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    is_causal: bool = False,
    scale: Optional[float] = None,  # noqa: UP045
    enable_gqa: bool = False,
    attn_mask: Optional[Tensor] = None,  # noqa: UP045
    lse: Optional[Tensor] = None,  # noqa: UP045
) -> tuple[Tensor, Tensor, Tensor]:
    return A.scaled_dot_product_attention_backward(  # type: ignore[no-any-return]
        dout, q, k, v, out, is_causal, scale, enable_gqa, attn_mask, lse
    )


# the training form: scaled_dot_product_attention's inputs (one autograd setup serves both),
# (out, lse) returned
scaled_dot_product_attention_lse = _derive(
    "scaled_dot_product_attention_lse",
    _with_lse,
    A.scaled_dot_product_attention_lse,
    "scaled_dot_product_attention",
    tuple[Tensor, Tensor],
)


def _attention_ctx(ctx: Ctx, inputs: tuple, output: Tensor | tuple[Tensor, Tensor]) -> None:
    """q, k, v, the output and the mask (a tensor or None) saved, and the kept lse of the
    training form (`scaled_dot_product_attention_lse`), which itself takes no gradient: it is
    marked non-differentiable, so that a loss through it is refused by autograd, not given a
    wrong gradient. A mask that requires grad is refused: the backward gives it none (torch's
    SDPA gives none to a mask that needs none)."""
    q, k, v, attn_mask, is_causal, scale, enable_gqa = inputs
    if attn_mask is not None and attn_mask.requires_grad:
        raise argument_error(
            "`fearless.ops.scaled_dot_product_attention` gives no gradient for its `attn_mask`, "
            "which requires grad: the mask would be cut from the autograd graph",
            help="pass `attn_mask.detach()` (a padding or causal mask is a constant), or use "
            "torch's own SDPA to learn an additive mask",
        )
    out, kept = _kept_lse(ctx, output)
    ctx.save_for_backward(q, k, v, out, attn_mask, *kept)
    ctx.args = (is_causal, scale, enable_gqa)  # type: ignore[attr-defined]


def _kept_lse(ctx: Ctx, output: Tensor | tuple[Tensor, Tensor]) -> tuple[Tensor, tuple]:
    """(the output, (lse,)) of a training forward that returns its lse beside its output,
    the lse marked non-differentiable (a loss through it is refused by autograd); (the output,
    ()) of a form that returns the output alone. The lse's gradient, which never exists, is
    not materialised either: autograd would allocate and fill a zero tensor of the lse's shape
    for every backward (a fill launch and an allocation on the host path of a short training
    call). So the backward gets None for the output's gradient too where an operator downstream
    gave it none, and then gives none (`_attention_bwd`, `_window_lse_backward`)."""
    if not isinstance(output, tuple):
        return output, ()
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)
    return out, (lse,)


def _attention_bwd(ctx: Any, dy: Tensor | None, *_dlse: Tensor | None) -> tuple:
    """Both forms' backward: the lse form's kept lse goes to the backward (its own gradient,
    `_dlse`, is none: lse is non-differentiable). No gradient for the output (None: `_kept_lse`)
    gives none for any input."""
    if dy is None:
        return None, None, None, None, None, None, None
    q, k, v, out, mask, *kept = ctx.saved_tensors
    dq, dk, dv = OPS.scaled_dot_product_attention_backward(dy, q, k, v, out, *ctx.args, mask, *kept)
    return dq, dk, dv, None, None, None, None


for _forward in (scaled_dot_product_attention, scaled_dot_product_attention_lse):
    register_autograd(_forward, _attention_bwd, _attention_ctx)
