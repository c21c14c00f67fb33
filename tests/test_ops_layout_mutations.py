"""Every call of the table tests/test_ops_shape_mutations.py mutates (tests/support/
ops_calls.py: 79 valid calls of 48 operators, NumPy in), given one array argument with the SAME VALUES in another memory layout, gives the
result of the contiguous call, or raises a fearless error: never a different result.

The layouts of one argument x (`layouts`): a transposed view (the last two axes' strides
swapped), a view of every other element of a bigger array (`big[..., ::2]`), a view with
negative strides (a reversed copy, reversed), a contiguous view that starts one element into
its buffer (`big[1:]`), a Fortran-ordered copy (three axes or more: for two it is the
transposed view), a contiguous view one byte into a byte buffer (misaligned: operators copy
it, as they copy a strided one; it was refused under the name of the call's first argument),
and an fl.Tensor made by `fl.asarray` of the transposed view (dense: a copy; for the call's
first array argument only, which decides what the operator returns: the one sampling here). Every array argument is mutated (index arrays too: their values are kept);
group_gemm's lists item by item. Besides the result, every array argument is compared after
the call, so an in-place operator (splitk_reduce's attn_out, mhc_sinkhorn's y,
moe_actgrad_bwd's dh, ds and a_prime, dropout's x with inplace=True, added here) must write
a strided output as it writes a dense one.

A broadcast view (stride 0, `np.broadcast_to`) needs values equal along an axis: each float
argument's values are made so along its first axis of two or more (`_constant_along`), the
reference is the call with that dense array, and the view must give the same. A written
argument that is a read-only broadcast view must be refused; one with several elements in one
place (a writeable `as_strided` view of stride 0) too, since the kernels' results cannot all
land there (`test_an_overlapping_written_argument_is_refused`: all seven ran, and each place
kept whichever result was written last).

The simulator is deterministic, so results agree to 1e-6 relative (bit for bit in practice).
Nothing is sampled: each call runs once per argument and layout (about 1,600 calls, and
about 500 for the broadcasts); the shapes are the table's tiny ones and the autotuner takes
the first configuration (FEARLESS_AUTOTUNE=0). The module runs in about 20 s on one CPU.
The same layouts of torch tensors (and `expand` for the broadcast) were tried once by hand
and agreed too: every operand goes through ops/_io.py's `operand`, which copies what is not
dense."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from support.ops_calls import Call, array_args, calls, fresh_args, replace_array


def _transposed(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def _stepped(x: np.ndarray) -> np.ndarray:
    big = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


def _reversed(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x[::-1])[::-1]


def _offset(x: np.ndarray) -> np.ndarray:
    big = np.zeros(x.size + 1, x.dtype)
    big[1:] = x.ravel()
    return big[1:].reshape(x.shape)


def _fortran(x: np.ndarray) -> np.ndarray:
    return np.asfortranarray(x)


def _misaligned(x: np.ndarray) -> np.ndarray:
    big = np.zeros(x.nbytes + 1, np.uint8)
    y = big[1:].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


def _fl_transposed(x: np.ndarray) -> Any:
    return fl.asarray(_transposed(x))


# name -> (the layout, the least number of axes it changes anything for)
LAYOUTS: dict[str, tuple[Callable[[np.ndarray], Any], int]] = {
    "transposed": (_transposed, 2),
    "stepped": (_stepped, 1),
    "reversed": (_reversed, 1),
    "offset": (_offset, 0),
    "fortran": (_fortran, 3),  # for two axes, the transposed view's strides
    "misaligned": (_misaligned, 0),
    "fl.asarray(transposed)": (_fl_transposed, 2),
}


def layouts(x: np.ndarray) -> Iterator[tuple[str, Any]]:
    """(name, x in that layout): the same values, other strides or another start."""
    for name, (make, least) in LAYOUTS.items():
        if x.ndim >= least and x.size and (name != "misaligned" or x.itemsize > 1):
            y = make(x)
            if isinstance(y, np.ndarray):
                assert np.array_equal(y, x, equal_nan=True) and y.dtype == x.dtype
            yield name, y


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind not in "biu"


def _constant_along(x: np.ndarray) -> int | None:
    """The first axis of x of two or more elements, along which the broadcast is made."""
    return next((a for a, n in enumerate(x.shape) if n > 1), None)


def _values(x: Any) -> Any:
    """What a call gave back, or what an argument holds, as NumPy (a structure kept)."""
    if isinstance(x, (tuple, list)):
        return [_values(y) for y in x]
    if isinstance(x, dict):
        return {k: _values(v) for k, v in x.items()}
    if isinstance(x, fl.Tensor):
        return x.numpy().copy()
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


def _outcome(call: Call, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """(result, arguments after the call) as NumPy, or the exception raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = call.op(*args, **kwargs)
    except Exception as e:  # compared by the caller
        return e
    return _values(got), _values(args), _values(kwargs)


def _differs(want: Any, got: Any, path: str = "") -> str | None:
    """Where `got` differs from `want` (None where equal to 1e-6 relative)."""
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{path}: {type(got).__name__} where {type(want).__name__} expected"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            if (d := _differs(w, g, f"{path}[{i}]")) is not None:
                return d
        return None
    if isinstance(want, dict):
        for k in want:
            if (d := _differs(want[k], got.get(k), f"{path}[{k!r}]")) is not None:
                return d
        return None
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray) or got.shape != want.shape:
            return f"{path}: {getattr(got, 'shape', got)!r} where shape {want.shape} expected"
        w, g = want.astype(np.float64), got.astype(np.float64)
        try:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)
        except AssertionError:
            bad = ~np.isclose(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            return (
                f"{path}: {int(bad.sum())} of {w.size} elements differ, e.g. at {first}: "
                f"{g[first]!r} where {w[first]!r} expected"
            )
        return None
    return None


def _compare(call: Call, want: Any, args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """None where the call with `args` gives `want` or raises a fearless error."""
    got = _outcome(call, args, kwargs)
    if isinstance(got, fl.FearlessError):
        return None
    if isinstance(got, Exception):
        return f"{type(got).__name__}: {str(got)[:160]}"
    if isinstance(want, Exception):
        return f"ran, where the contiguous call raised {type(want).__name__}"
    return _differs(want, got, "result, args, kwargs")


# an in-place form beside the table's calls: dropout writes x
_x = np.random.default_rng(160).standard_normal((3, 8)).astype(np.float32)
CALLS = [*calls(), Call("dropout inplace", ops.dropout, [_x, 0.5, True, 3], {"inplace": True})]


@pytest.fixture(autouse=True)
def _first_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name.replace(" ", "-"))
def test_same_values_in_another_layout_give_the_same_result(call: Call) -> None:
    want = _outcome(call, *fresh_args(call))
    assert not isinstance(want, Exception), f"{call.name}: the valid call raised {want!r}"
    problems = []
    for n, (label, where, item, x) in enumerate(array_args(call)):
        for layout, y in layouts(x):
            if n and layout.startswith("fl."):  # a dense copy: the first argument's is enough
                continue
            args, kwargs = fresh_args(call)
            replace_array(args, kwargs, where, item, y)
            if (d := _compare(call, want, args, kwargs)) is not None:
                problems.append(f"{call.name}, argument {label} {layout}: {d}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name.replace(" ", "-"))
def test_a_broadcast_view_gives_the_dense_result(call: Call) -> None:
    problems = []
    for label, where, item, x in array_args(call):
        axis = _constant_along(x)
        if not _is_float(x) or axis is None:
            continue
        dense = np.repeat(x.take([0], axis), x.shape[axis], axis)
        args, kwargs = fresh_args(call)
        replace_array(args, kwargs, where, item, dense)
        want = _outcome(call, args, kwargs)
        if isinstance(want, Exception):  # those values are refused (not this test's concern)
            continue
        view = np.broadcast_to(x.take([0], axis), x.shape)
        for layout, y in (("broadcast", view), ("fl.asarray(broadcast)", fl.asarray(view))):
            args, kwargs = fresh_args(call)
            replace_array(args, kwargs, where, item, y)
            got = _outcome(call, args, kwargs)
            if isinstance(got, fl.FearlessError):
                continue
            if isinstance(got, Exception):
                problems.append(f"{call.name}, argument {label} {layout}: {got!r:.200}")
                continue
            # the arguments but the view itself (its values stay the dense array's)
            if (d := _differs(_but(want, where, item), _but(got, where, item), "")) is not None:
                problems.append(f"{call.name}, argument {label} {layout}: {d}")
    assert not problems, "\n".join(problems)


def _but(outcome: Any, where: int | str, item: int | None) -> Any:
    """An `_outcome` without the argument at `where` (item `item` of a list there)."""
    result, args, kwargs = outcome
    args, kwargs = list(args), dict(kwargs)
    replace_array(args, kwargs, where, item, None)
    return result, args, kwargs


def _overlapping(x: np.ndarray, axis: int) -> np.ndarray:
    """A writeable view with x's shape whose `axis` has stride 0: all its rows are row 0."""
    x = np.ascontiguousarray(x)
    strides = tuple(0 if a == axis else st for a, st in enumerate(x.strides))
    return np.lib.stride_tricks.as_strided(x, x.shape, strides, writeable=True)


# (call name, written argument)
WRITTEN = [
    ("splitk_reduce", 2),
    ("splitk_reduce f16", 2),
    ("mhc_sinkhorn", 0),
    ("dropout inplace", 0),
    ("moe_actgrad_bwd", "dh"),
    ("moe_actgrad_bwd", "ds"),
    ("moe_actgrad_bwd", "a_prime"),
]


@pytest.mark.parametrize(("name", "where"), WRITTEN, ids=[f"{n}-{w}" for n, w in WRITTEN])
@pytest.mark.parametrize("how", ["read-only broadcast", "writeable stride 0"])
def test_an_overlapping_written_argument_is_refused(name: str, where: int | str, how: str) -> None:
    """An argument written in place with several elements in one place cannot hold the
    kernels' results: refused (a torch tensor so is: `refuse_unwritable`), never written with
    whichever result came last."""
    call = next(c for c in CALLS if c.name == name)
    args, kwargs = fresh_args(call)
    x = args[where] if isinstance(where, int) else kwargs[where]
    axis = _constant_along(x)
    assert axis is not None
    view = (
        np.broadcast_to(x.take([0], axis), x.shape)
        if how == "read-only broadcast"
        else _overlapping(x, axis)
    )
    replace_array(args, kwargs, where, None, view)
    with pytest.raises(fl.FearlessError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call.op(*args, **kwargs)
