"""When an operator of fearless.ops goes through torch's dispatcher instead of straight to its
kernels.

A call with plain torch tensors that need no gradient, outside torch.compile, runs the kernels
directly: the dispatcher would only add its cost. Anything torch must see goes to the
operator's torch form (registered by ops/torch_library.py; ops/torch_eager.py): an input that
requires grad (so that autograd records the backward: in eager mode an autograd.Function, no
dispatcher), a call while torch.compile or torch.export traces, and tensor subclasses
(FakeTensor, FunctionalTensor and the like, which have no memory to read), which
`torch.ops.fearless.<name>` takes.

torch_library.py installs itself here (`set_registrar`) when fearless.ops is imported, so this
module, which functional.py imports, depends on nothing above it.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

from ..crash import raise_clean
from ..errors import FearlessError
from ..runtime.location import argument_error
from ._arguments import call_error

F = TypeVar("F", bound=Callable[..., Any])
# torch's dispatcher refusing an argument of an operator's schema (its wording since 2.4)
_REFUSED = re.compile(
    r"fearless::(\w+)\(\) Expected a value of type '([^']+)' for argument '(\w+)' but instead "
    r"found type '([^']+)'"
)

# torch refusing an autograd.Function (a custom operator's registered backward) under a
# torch.func transform
_FUNCTORCH_GRAD = "autograd.Function with functorch transforms"

_registrar: Callable[[], Any] | None = None
_inside = threading.local()  # .depth: how many torch.ops.fearless bodies run on this thread


class kernels_only:
    """Within: every operator runs its kernels, never the dispatcher. The bodies of
    `torch.ops.fearless.<name>` run in it, so that a Parameter or another tensor subclass
    arriving there (torch.export's module, no_grad) does not dispatch to the same op again.
    A class, not a generator context manager: it is entered on every training call's forward
    and backward, where contextlib's machinery costs a microsecond or two of host time."""

    __slots__ = ()

    def __enter__(self) -> None:
        _inside.depth = getattr(_inside, "depth", 0) + 1

    def __exit__(self, *_: object) -> None:
        _inside.depth -= 1


def set_registrar(register: Callable[[], Any]) -> None:
    """`register()` registers the operators with torch and returns their torch forms
    (ops/torch_eager.py's `EAGER`), or None where this torch cannot (older than 2.4)."""
    global _registrar
    _registrar = register


def torch_ops(*tensors: Any) -> Any:
    """`torch.ops.fearless` when this call must go through torch's dispatcher, else None."""
    torch = sys.modules.get("torch")
    if torch is None or _registrar is None or getattr(_inside, "depth", 0) > 0:
        return None
    if not _needs_dispatcher(torch, tensors):
        return None
    return _registrar()


# the operators with no torch.ops.fearless form: name -> their function, and that function
# wrapped by torch.compiler.disable (made outside any trace: torch.compile cannot trace the
# wrapping), which a call while torch.compile traces runs instead (`untraceable`)
_UNTRACEABLE: dict[str, Callable[..., Any]] = {}
_EAGER_ONLY: dict[str, Callable[..., Any]] = {}


def untraceable(op: str) -> Callable[[F], F]:
    """Decorate the function of `op`, an operator with no `torch.ops.fearless` form (its kernels
    read tensor memory, which the tracer's tensors do not have): while torch.compile traces, a
    call runs it through `torch.compiler.disable`, never traced. Without `fullgraph` the graph
    breaks there and `op` runs eagerly; with `fullgraph=True` torch's Unsupported error gives
    the reason, naming `op`, instead of failing deep inside the operator (or, on the
    simulator, tracing the simulator itself). Not a fearless error: that would fail a compile
    without `fullgraph` too."""

    def wrap(fn: F) -> F:
        _UNTRACEABLE[op] = fn
        if (torch := sys.modules.get("torch")) is not None:
            _EAGER_ONLY[op] = _disabled(torch, op, fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            torch = sys.modules.get("torch")
            if torch is not None and torch.compiler.is_compiling():
                eager = _EAGER_ONLY.get(op)
                if eager is not None:
                    return eager(*args, **kwargs)
            return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def disable_untraceable(torch: Any) -> None:
    """The `untraceable` operators' functions wrapped by `torch.compiler.disable`, where torch
    came after them (torch_library.py calls it when it registers the operators)."""
    for op, fn in _UNTRACEABLE.items():
        if op not in _EAGER_ONLY:
            _EAGER_ONLY[op] = _disabled(torch, op, fn)


def _disabled(torch: Any, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    reason = (
        f"`fearless.ops.{op}` has no torch.ops.fearless operator, so torch.compile does not "
        "trace it (docs/ops.md): without fullgraph=True it runs eagerly there, a graph "
        "break; with it, call the operator outside the compiled function"
    )
    try:
        return torch.compiler.disable(fn, reason=reason)  # type: ignore[no-any-return]
    except TypeError:  # a torch whose disable takes no reason
        return torch.compiler.disable(fn)  # type: ignore[no-any-return]


def training(*tensors: Any) -> bool:
    """Whether autograd will record this call: grad mode is on and a torch tensor among
    `tensors` requires grad (a forward then keeps what its backward would recompute)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _needs_dispatcher(torch: Any, tensors: Iterable[Any]) -> bool:
    plain = torch.Tensor
    # a module's weight is an nn.Parameter: a subclass with torch's own behaviour, as plain as
    # a tensor for the dispatcher (grad mode and requires_grad decide it, below)
    param = torch.nn.Parameter
    grad = torch.is_grad_enabled()
    seen = False
    for t in tensors:
        if isinstance(t, (list, tuple)):
            if _needs_dispatcher(torch, t):
                return True
            continue
        if not isinstance(t, plain):
            continue
        seen = True
        if (type(t) is not plain and type(t) is not param) or (grad and t.requires_grad):
            return True
    # a functorch transform (vmap's BatchedTensor, grad's wrapper) wraps a plain tensor type
    return seen and bool(
        torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()
    )


def refused_argument(exc: BaseException) -> FearlessError | None:
    """The fearless error for torch's dispatcher refusing an argument of
    `torch.ops.fearless.<op>`: a call routed through torch (a torch tensor among its arguments
    asked for it) with another argument of a type the operator's schema does not take, or a
    torch.func gradient transform over an operator's backward. None for any other
    exception."""
    if isinstance(exc, RuntimeError) and _FUNCTORCH_GRAD in str(exc):
        return argument_error(
            "a torch.func gradient transform (grad, jacrev, jvp, vjp) reached a fearless "
            "operator: torch runs the backward of a custom operator (torch.library's "
            "register_autograd) under autograd only, not under these transforms",
            help="take the gradient with autograd instead (`loss.backward()` or "
            "`torch.autograd.grad(loss, inputs)`); `torch.func.vmap` alone does run",
        )
    found = _REFUSED.match(str(exc)) if isinstance(exc, RuntimeError) else None
    if found is None:
        return None
    op, want, name, got = found.groups()
    return argument_error(
        f"argument `{name}` must be {want}, not {got}: torch's dispatcher runs this call (a "
        f"torch tensor among its arguments asks for it), and fearless::{op} takes {want} there",
        help="pass torch tensors for every tensor argument, and Python numbers or bools for "
        "the others",
    )


def raise_refused(exc: RuntimeError) -> NoReturn:
    """Raise torch's refusal of an argument (`refused_argument`) as its fearless error, without
    fearless's frames; any other RuntimeError as it is."""
    refused = refused_argument(exc)
    if refused is None:
        raise exc
    raise_clean(refused)


def clean_op_errors(fn: F) -> F:
    """`fn` raising its fearless errors without fearless's frames (crash.raise_clean), and
    torch's refusal of an argument (`raise_refused`) and a call that does not fit `fn`'s
    signature (`call_error`) as fearless errors at the caller's line; any other exception
    passes as it is."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FearlessError as exc:
            raise_clean(exc)
        except RuntimeError as exc:
            raise_refused(exc)
        except TypeError:
            if (wrong := call_error(fn, args, kwargs)) is None:
                raise  # from inside the operator, not the call's arguments
            raise_clean(wrong)

    return wrapper  # type: ignore[return-value]
