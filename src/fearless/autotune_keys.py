"""What an `fl.autotune` call is keyed by, and the checks of the decorator's arguments: the key
function built from `key=` (parameter names, whose arrays count by shape and tile and scalars by
value, or a function of the call's arguments, whose value is frozen into a hashable one), the
dtypes every key includes, a launch grid as part of a key, the configuration list's shape, and
a call that does not bind to the function (`call_error`); autotuning.py's `Autotuned` uses them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import CompileError, KernelTypeError
from .runtime.location import user_location
from .runtime.partition import Partition

KeySpec = Sequence[str] | Callable[..., Any] | None
KeyFn = Callable[[tuple[Any, ...], dict[str, Any]], Hashable]


def make_key(
    key: KeySpec, params: list[str], owner: str, key_dtypes: Sequence[str] | None = None
) -> KeyFn:
    """The function that computes a call's key from `key` (None: every parameter; a name or
    names; a function of the call's arguments), for the autotuned function `owner` with
    parameters `params`; the dtypes of the arrays among `key_dtypes` (None: every argument)
    join it."""
    dtypes = _dtypes_of(key_dtypes, params, owner)
    if callable(key):
        user_key = key
        key_name = getattr(key, "__qualname__", None) or repr(key)

        def by_function(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
            try:
                value = user_key(*args, **kwargs)
            except TypeError as exc:
                raise _key_call_error(exc, user_key, key_name, owner, args, kwargs) from None
            return (freeze(value, key_name, owner), dtypes(args, kwargs))

        return by_function
    if isinstance(key, str):
        key = [key]
    names = check_names(
        "the autotuning key", tuple(key) if key is not None else params, params, owner
    )
    positions = tuple(params.index(n) for n in names)

    def by_names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
        parts = []
        for name, pos in zip(names, positions, strict=True):
            value = args[pos] if pos < len(args) else kwargs.get(name)
            parts.append(key_part(value))
        return (tuple(parts), dtypes(args, kwargs))

    return by_names


def check_names(
    what: str, names: Sequence[str], params: Sequence[str], owner: str
) -> tuple[str, ...]:
    """`names` (of `what`: the key, `restore_value`, ...) when each is a parameter of `owner`,
    else a CompileError listing them."""
    for name in names:
        if name not in params:
            raise CompileError(
                f"{what} names `{name}`, which is not a parameter of `{owner}`",
                user_location(),
                help=f"the parameters are {', '.join(f'`{p}`' for p in params)}",
            )
    return tuple(names)


def check_configs(name: str, configs: Any) -> list[dict[str, Any]]:
    """`configs` as a list of dicts, each naming the same tunables, or a CompileError."""
    if isinstance(configs, Mapping) or not isinstance(configs, Sequence) or not configs:
        raise CompileError(
            f"`fl.autotune` for `{name}` needs a non-empty list of configurations",
            user_location(),
            help="`@fl.autotune(configs=[{'tile': 128}, {'tile': 256}], key=['x'])`",
        )
    out = []
    for cfg in configs:
        if not isinstance(cfg, Mapping) or not all(isinstance(k, str) for k in cfg):
            raise CompileError(
                f"a configuration of `{name}` is `{cfg!r}`, not a mapping of keyword names to values",
                user_location(),
                help="write each configuration as a dict: `{'tile': 128, 'occupancy': 2}`",
            )
        out.append(dict(cfg))
    first = set(out[0])
    for cfg in out[1:]:
        if set(cfg) != first:
            raise CompileError(
                f"the configurations of `{name}` set different names: {sorted(first)} and "
                f"{sorted(cfg)}",
                user_location(),
                help="give every configuration a value for the same tunables",
            )
    return out


def key_part(value: Any) -> Hashable:
    """What of an argument decides the configuration: an array's shape (and a partition's
    tile), a scalar's value (a NumPy scalar's as the Python number it holds)."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        if isinstance(value, np.generic):
            return value.item()  # type: ignore[no-any-return]
        tile = value.tile if isinstance(value, Partition) else None  # not torch's Tensor.tile
        return ("shape", tuple(int(d) for d in shape), tile)
    if isinstance(value, Hashable):
        return value
    return repr(value)


def freeze(value: Any, key_name: str, name: str) -> Hashable:
    """A key function's value as a hashable one: lists and tuples as tuples, dicts as tuples of
    their items sorted, sets sorted; anything else unhashable is refused, naming the function."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v, key_name, name) for v in value)
    if isinstance(value, Mapping):
        items = ((freeze(k, key_name, name), freeze(v, key_name, name)) for k, v in value.items())
        return tuple(sorted(items, key=repr))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((freeze(v, key_name, name) for v in value), key=repr))
    if isinstance(value, np.generic):
        return value.item()  # type: ignore[no-any-return]
    if isinstance(value, np.ndarray) or not isinstance(value, Hashable):
        raise KernelTypeError(
            f"the autotuning key function `{key_name}` of `{name}` returned a "
            f"`{type(value).__name__}`, which cannot be a key",
            user_location(),
            help="return numbers, strings, or tuples, lists and dicts of them: e.g. "
            "`key=lambda x, out: (x.shape[0], str(x.dtype))`",
        )
    try:
        hash(value)
    except TypeError:  # a tuple subclass or an object whose __hash__ refuses
        raise KernelTypeError(
            f"the autotuning key function `{key_name}` of `{name}` returned `{value!r}`, "
            "which is not hashable",
            user_location(),
            help="return numbers, strings, or tuples, lists and dicts of them",
        ) from None
    return value


def freeze_grid(grid: Any) -> Hashable:
    """A launch grid as part of a key (the kernel checks it when it launches)."""
    if isinstance(grid, (list, tuple)):
        return tuple(grid)
    return grid if isinstance(grid, Hashable) else repr(grid)


def dtypes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The dtypes of a call's arrays, in order: part of every key (a NumPy scalar's is not:
    `key_part` keys it by its value, as the Python number)."""
    return tuple(
        str(dt)
        for v in (*args, *kwargs.values())
        if (dt := getattr(v, "dtype", None)) is not None and not isinstance(v, np.generic)
    )


def _dtypes_of(
    names: Sequence[str] | None, params: list[str], owner: str
) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[str, ...]]:
    """`dtypes`, or (`names` given) the dtypes of those arguments' arrays only, in parameter
    order: an argument whose dtype follows from the others' (an attention forward's kept f32
    lse) then shares their key."""
    if names is None:
        return dtypes
    chosen = check_names("`key_dtypes`", names, params, owner)
    at = sorted((params.index(n), n) for n in chosen)

    def some(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
        found = (args[i] if i < len(args) else kwargs.get(n) for i, n in at)
        return tuple(
            str(dt)
            for v in found
            if (dt := getattr(v, "dtype", None)) is not None and not isinstance(v, np.generic)
        )

    return some


def _key_call_error(
    exc: TypeError,
    key: Callable[..., Any],
    key_name: str,
    owner: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Exception:
    """A key function that does not take the call's arguments, as a KernelTypeError naming
    it; `exc` as it is when they bind (the TypeError came from the key function's body)."""
    try:
        signature = inspect.signature(key)
    except (TypeError, ValueError):  # a callable without a signature: its own error stands
        return exc
    try:
        signature.bind(*args, **kwargs)
        return exc
    except TypeError as unbound:
        why = str(unbound)
    return KernelTypeError(
        f"the autotuning key function `{key_name}` of `{owner}` does not take the call's "
        f"arguments: {why}",
        user_location(),
        code="E0061",
        help="a key function is called with every argument of the call, as the function is: "
        "`key=lambda x, out: x.shape` (or `lambda *args, **kwargs: ...`)",
    )


def call_error(
    exc: TypeError,
    fn: Callable[..., Any],
    name: str,
    params: list[str],
    cfg: Mapping[str, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Exception:
    """A call of the autotuned `fn` (its non-tunable parameters `params`) that does not bind
    (an argument missing, one too many, a tunable passed by hand) as E0061 at the caller's
    line; `exc` as it is when the arguments bind (the TypeError came from `fn`'s body)."""
    passed = sorted(set(cfg) & set(kwargs))
    if passed:  # `f(**kwargs, **cfg)` says so with a KeyError, bind would too
        why = f"multiple values for argument {passed[0]!r}"
    else:
        try:
            inspect.signature(fn).bind(*args, **kwargs, **cfg)
            return exc
        except TypeError as unbound:
            why = str(unbound)
        passed = [n for n in cfg if n in params[: len(args)]]
    help = (
        f"leave {', '.join(f'`{n}`' for n in passed)} out of the call: the autotuner passes it "
        "from the configurations"
        if passed
        else f"call it as `{name}({', '.join(params)})`, the tunables left out"
    )
    return KernelTypeError(
        f"the call of `{name}` does not match its parameters: {why}",
        user_location(),
        code="E0061",
        help=help,
    )
