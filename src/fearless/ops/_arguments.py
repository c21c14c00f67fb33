"""The argument refusals that several operators of fearless.ops share, each an E0701 at the
caller's line in one wording: an integer argument (`index`, `integer`: "`n` of
`fearless.ops.<op>` must be an int ..., not <its type> (<value>)"), a string that names one of
a few choices (`one_of`: "... must be <the choices>, got <value>"; `is_one_of` for any choice
without the refusal), a yes-or-no argument (`flag`), an array-like's shape whatever was passed
(`shape_of`: a class such as `np.float16` has a `shape` descriptor), a dtype argument read
whatever names it (`dtype_or_none`: the caller words the refusal) and tensors outside an
operator's layout (`layout_error`: "`fearless.ops.<op>` needs <layout>, got <what>"). Tensor
operands themselves are ops/_io.py's; the attention family's shared checks are
ops/_attention_checks.py's.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Collection
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
    `chunk_size`); an array or a tensor is none of them (`in` would compare it elementwise)."""
    if hasattr(value, "shape"):
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
