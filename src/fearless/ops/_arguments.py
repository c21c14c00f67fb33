"""The argument refusals that several operators of fearless.ops share, each an E0701 at the
caller's line in one wording: an integer argument (`index`, `integer`: "`n` of
`fearless.ops.<op>` must be an int ..., not <its type> (<value>)"), a string that names one of
a few choices (`one_of`: "... must be <the choices>, got <value>"; `is_one_of` for any choice
without the refusal), a yes-or-no argument (`flag`), an array-like's shape whatever was passed
(`shape_of`: a class such as `np.float16` has a `shape` descriptor), a dtype argument read
whatever names it (`dtype_or_none`: the caller words the refusal) and tensors outside an
operator's layout (`layout_error`: "`fearless.ops.<op>` needs <layout>, got <what>"), and a call
that does not fit the operator's signature at all (`call_error`: a missing argument, an unknown
keyword, one too many). Tensor operands themselves are ops/_io.py's; the attention family's
shared checks are ops/_attention_checks.py's.
"""

from __future__ import annotations

import inspect
import operator
import sys
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ..dtypes import DType
from ..errors import KernelTypeError
from ..runtime.arrays import as_dtype, torch_dtype
from ..runtime.location import argument_error


def dtype_or_none(value: Any) -> DType | None:
    """`value` (a torch.dtype, a fearless DType, a NumPy dtype or a name) as a DType, or None
    where it names none: the caller refuses it in its own words."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return torch_dtype(value)
    try:
        return as_dtype(value)
    except KernelTypeError:
        return None


def index(value: Any) -> int | None:
    """`value` as a Python int where it is an integer (an int, a NumPy integer, anything with
    `__index__`, a one-element integer torch tensor among them), else None: a bool is not one
    here, though Python counts it as an int."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def integer(value: Any, op: str, name: str, wants: str = "an int", help: str | None = None) -> int:
    """The integer argument `name` of `op` as an int (see `index`), else the E0701 "`name` of
    `fearless.ops.op` must be `wants`, not <its type> (<value>)" with `help`."""
    n = index(value)
    if n is None:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be {wants}, not {type(value).__name__} "
            f"({value!r:.40})",
            help=help,
        )
    return n


def one_of(value: Any, choices: Collection[str], op: str, name: str, wants: str, help: str) -> str:
    """The string argument `name` of `op` where it is one of `choices`, else the E0701
    "`name` of `fearless.ops.op` must be `wants`, got <value>" with `help`."""
    if not isinstance(value, str) or value not in choices:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be {wants}, got {value!r:.40}", help=help
        )
    return value


def layout_error(op: str, layout: str, what: str) -> KernelTypeError:
    """The E0701 of tensors outside `op`'s layout: "`fearless.ops.op` needs `layout`, got
    `what`" (`layout` names each tensor's shape, `what` the shapes or dtypes it got)."""
    return argument_error(f"`fearless.ops.{op}` needs {layout}, got {what}")


def flag(value: Any, op: str, name: str) -> bool:
    """A yes-or-no argument (`is_causal`, `inplace`, `training`) as a bool: a Python or NumPy
    bool, an int, or None (no); anything else (an array: often an argument one place off, a
    string, a float) is E0701, where `bool()` of an array would be NumPy's error from inside
    fearless."""
    if value is True or value is False:  # the common case
        return value
    if value is None or isinstance(value, (bool, np.bool_, int, np.integer)):
        return bool(value)
    raise argument_error(
        f"`{name}` of `fearless.ops.{op}` must be a bool, not {_kind_of(value)}",
        help=f"pass `{name}=True` or `{name}=False`",
    )


def is_one_of(value: Any, allowed: tuple[Any, ...]) -> bool:
    """Whether `value` is one of `allowed` (a choice argument: `reduction`, `layout`,
    `chunk_size`, `dim`); an array or a tensor of one axis or more is none of them (`in` would
    compare it elementwise), while a NumPy scalar or a 0-d one compares as its value does, as
    torch takes `dim=np.int64(-1)`. A bool is no number here (torch refuses `dim=True`)."""
    if len(shape_of(value)) > 0 or type(value) is bool:
        return False
    try:
        return value in allowed
    except (TypeError, ValueError):  # an object whose == refuses
        return False


def _kind_of(value: Any) -> str:
    """How an error names a wrong argument: its type, and an array's shape and dtype."""
    if hasattr(value, "shape") and not isinstance(value, type):
        return f"{type(value).__name__} of shape {shape_of(value)} ({getattr(value, 'dtype', '?')})"
    return f"{type(value).__name__} ({value!r:.40})"


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array-like argument, () for anything else (a class such as `np.float16`
    has a `shape` attribute too: a descriptor, not a shape)."""
    shape = None if isinstance(x, type) else getattr(x, "shape", None)
    try:
        return () if shape is None else tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return ()


def call_error(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> KernelTypeError | None:
    """The E0701 of operator `fn` called with `args` and `kwargs` that do not fit its signature
    (Python's TypeError from binding them, which would show fearless's wrapper), or None where
    they fit: the TypeError came from inside, and is not this. Only a failed call asks: the
    wrappers of ops/_route.py and ops/_replay.py call this from their `except TypeError`."""
    sig = inspect.signature(fn)
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        wrong = _misfit(sig, args, kwargs) or str(exc)
    else:
        return None
    shown = sig.replace(
        parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
        return_annotation=sig.empty,
    )
    return argument_error(
        f"`fearless.ops.{fn.__name__}` {wrong}",
        help=f"its signature is `fearless.ops.{fn.__name__}{shown}`",
    )


def _misfit(sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What is wrong with a call that `sig.bind` refused, in the words of an error that follows
    "`fearless.ops.<op>` ", or None where it is none of these (the caller words it)."""
    params = list(sig.parameters.values())
    kinds = {p.kind for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_keyword = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        unknown = [name for name in kwargs if name not in by_keyword]
        if unknown:
            return f"has no argument{'s' if len(unknown) > 1 else ''} {_names(unknown)}"
    if inspect.Parameter.VAR_POSITIONAL not in kinds and len(args) > len(positional):
        only = " (the others are keyword-only)" if inspect.Parameter.KEYWORD_ONLY in kinds else ""
        return f"takes at most {len(positional)} positional arguments, got {len(args)}{only}"
    twice = [p.name for p in positional[: len(args)] if p.name in kwargs]
    if twice:
        return f"got {_names(twice)} twice, by position and by keyword"
    given = {p.name for p in positional[: len(args)]} | set(kwargs)
    missing = [
        p.name
        for p in params
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in given
    ]
    if missing:
        s = "s" if len(missing) > 1 else ""
        return f"is missing its argument{s} {_names(missing)}"
    return None


def _names(names: list[str]) -> str:
    """`a`, `a` and `b`, `a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
