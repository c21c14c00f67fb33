"""The eager form of `torch.ops.fearless`: outside torch.compile, a call with plain torch tensors
skips torch's dispatcher.

A `torch.library.custom_op` call passes through the dispatcher's Python layers (its autograd
kernel, a redispatch below autograd, the defaults filled in again): tens of microseconds a call
on the host, more than the kernel of a small tensor, and a training step pays it twice per
operator (its forward, then its backward's operator). torch.compile and torch.export need those
layers; eager autograd does not. So each operator with an autograd formula is also a
`torch.autograd.Function` over the same body, setup_context and backward as its custom op
(`record`, `record_autograd`: ops/torch_ops.py calls them as it defines the operators), and
`EAGER.<name>(...)` runs

    the custom op       while torch.compile traces, under a functorch transform (vmap, grad),
                        for an operator that writes an argument in place (torch bumps its
                        version counter), and for any argument whose type is not exactly the
                        schema's (a tensor subclass, an fl.Tensor, an int where the schema
                        takes a float): the dispatcher converts or refuses it, with its message;
    the Function        where grad mode is on and a tensor argument requires grad;
    the body            otherwise: a backward formula's operators (autograd runs them without
                        grad), or a call under `torch.no_grad()`.

Each runs the same body, under `kernels_only`, so the result is the custom op's: the same
kernels, the same saved tensors, the same backward. `EAGER.<name>` is what
`fearless.ops.<name>` reaches through (ops/_route.py) and what the backward formulas call.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import torch

_NONE = type(None)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_INTS = (list, tuple)  # an int list: what the dispatcher takes for a `list[int]`
# a schema annotation -> the exact argument types that reach the body unchanged
_EXACT: dict[Any, tuple[type, ...]] = {
    torch.Tensor: _PLAIN,
    int: (int,),
    float: (float,),
    bool: (bool,),
    str: (str,),
    torch.dtype: (torch.dtype,),
}


class _Form:
    """One operator's eager form: its body, parameters and, with autograd, its Function."""

    def __init__(self, body: Callable[..., Any], signature: inspect.Signature) -> None:
        self.body = body
        self.signature = signature
        self.accepted = tuple(_accepted(p.annotation) for p in signature.parameters.values())
        self.function: type[torch.autograd.Function] | None = None


_FORMS: dict[str, _Form] = {}


def _accepted(annotation: Any) -> tuple[type, ...]:
    """The exact types of an argument the body may take as it is for `annotation`, `_INTS` for
    an int list (its items checked, a tuple made a list, as the dispatcher does), () where only
    the dispatcher may take it (a list of tensors, a type this module does not know)."""
    if annotation in _EXACT:
        return _EXACT[annotation]
    if annotation == list[int]:
        return _INTS
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not _NONE]
        taken = _accepted(inner[0]) if len(inner) == 1 else ()
        if taken:
            return (*taken, _NONE)
    return ()


def record(
    name: str, body: Callable[..., Any], signature: inspect.Signature, mutates: bool
) -> None:
    """`fearless::<name>` runs `body` (its custom op's, under kernels_only) with `signature`
    (its schema's); an operator that writes an argument in place (`mutates`), or takes an
    argument these forms do not check, gets no eager form: the custom op takes its calls."""
    form = _Form(body, signature)
    if (
        not mutates
        and all(form.accepted)
        and all(
            p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in signature.parameters.values()
        )
    ):
        _FORMS[name] = form


def record_autograd(
    name: str, backward: Callable[..., Any], setup: Callable[..., Any] | None
) -> None:
    """`fearless::<name>`'s autograd formula, as its custom op registers it: the Function."""
    form = _FORMS.get(name)
    if form is None:
        return
    body = form.body

    # forward(ctx, ...) with the setup inside: a Function with a separate setup_context binds
    # its arguments through inspect.signature on every apply (tens of microseconds)
    def forward(ctx: Any, *args: Any) -> Any:
        output = body(*args)
        if setup is not None:
            setup(ctx, args, output)
        return output

    form.function = type(
        f"fearless_{name}",
        (torch.autograd.Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )


# whether a functorch transform (vmap, grad, ...) is active: then the custom op takes the call
_transforms_active: Callable[[], bool] = getattr(
    torch._C, "_are_functorch_transforms_active", lambda: False
)


def _caller(name: str) -> Callable[..., Any]:
    """`EAGER.<name>`: the custom op, the Function or the body, per call (module docstring)."""
    op = getattr(torch.ops.fearless, name)
    form = _FORMS.get(name)
    if form is None:
        return op  # type: ignore[no-any-return]
    body, function, accepted = form.body, form.function, form.accepted
    params = tuple(form.signature.parameters.values())
    n = len(params)
    is_compiling = torch.compiler.is_compiling
    grad_enabled = torch.is_grad_enabled

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != n:
            filled = _filled(params, args, kwargs)
            if filled is None:
                return op(*args, **kwargs)  # the dispatcher says what is wrong
            args = filled
        needs_grad = False
        for i, (a, ok) in enumerate(zip(args, accepted, strict=True)):
            tp = type(a)
            if tp not in ok:
                return op(*args)
            if tp in _INTS:
                if any(type(v) is not int for v in a):
                    return op(*args)
                if tp is tuple:
                    args = (*args[:i], list(a), *args[i + 1 :])
            elif not needs_grad and tp in _PLAIN and a.requires_grad:
                needs_grad = True
        if is_compiling() or _transforms_active():
            return op(*args)
        if needs_grad and grad_enabled():
            return op(*args) if function is None else function.apply(*args)
        return body(*args)

    call.__name__ = call.__qualname__ = name
    return call


def _filled(
    params: tuple[inspect.Parameter, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...] | None:
    """`args` and `kwargs` as every parameter in order, defaults filled in; None where they do
    not bind (too many, a name the operator has not, one missing)."""
    if len(args) > len(params):
        return None
    out = list(args)
    left = dict(kwargs)
    for p in params[len(args) :]:
        if p.name in left:
            out.append(left.pop(p.name))
        elif p.default is not inspect.Parameter.empty:
            out.append(p.default)
        else:
            return None
    return None if left else tuple(out)


class _Namespace:
    """`EAGER`: attribute `name` is `_caller(name)`, made at its first use."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        call = _caller(name)
        setattr(self, name, call)
        return call


EAGER: Any = _Namespace()
