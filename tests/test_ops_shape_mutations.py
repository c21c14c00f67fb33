"""Every public fearless.ops operator (and attention's scaled_dot_product_attention_backward
and _lse), given a small VALID call with one dimension changed, either runs or raises a
fearless error at the caller's line: never a ZeroDivisionError, an IndexError, a KeyError, an
AssertionError or NumPy's ValueError from inside the library. Random wrong arguments
(tests/test_wrong_arguments.py) miss this class, because it needs an otherwise valid call.

The mutations of each call (`mutations`): one axis of one array argument at 0, 1 and d + 1;
one size changed in every array argument at once (`_joint`: the calls' sizes are picked
mostly distinct, so that a size names one axis across q, k, v and the rest, the change the
shapes' agreement checks cannot catch: 0 key/value heads in k and v, 569c3e0; D = 0 with the
default 1 / sqrt(D) scale, found here); and each integer index array (top-k ids, block
tables, cache and sequence lengths, sparse indices, MoE offsets and gathers, start_q) with its
last element out of range, then negative. Values are kept (repeated where an axis grows).

The valid calls (tests/support/ops_calls.py, which tests/test_ops_layout_mutations.py
shares) are the operators' own tests' smallest shapes, NumPy in, f32 and f16 (79 calls of 48
operators, 3423 mutated calls: every mutation runs, none sampled); a mutated call that
succeeds runs the simulator, so the shapes are tiny, and the autotuner takes the first
configuration (FEARLESS_AUTOTUNE=0). The module runs in about 15 s on one CPU, most of it
the simulator's first compile of each kernel."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from support.ops_calls import Call, array_args, calls, fresh_args, get_arg, replace_array, with_arg

BIG = 1 << 20  # an index out of range of every table below


def _resized(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """x at `shape`, its values kept (repeated where it grows)."""
    return np.resize(x, shape).astype(x.dtype)


def mutations(call: Call) -> Iterator[tuple[str, list[Any], dict[str, Any]]]:
    """(what, args, kwargs): the call with one axis of one array argument at 0, 1 and d + 1;
    with one size changed in every array at once (`_joint`); and each index array with its
    last element out of range, then negative."""
    for label, where, item, x in array_args(call):
        for dim, size in enumerate(x.shape):
            for new in sorted({0, 1, size + 1} - {size}):
                args, kwargs = fresh_args(call)
                shape = (*x.shape[:dim], new, *x.shape[dim + 1 :])
                replace_array(args, kwargs, where, item, _resized(x, shape))
                yield f"{label} dim {dim}: {size} -> {new}", args, kwargs
    yield from _joint(call)
    for where in call.index:
        for bad in (BIG, -1):
            y = get_arg(call, where).copy()
            y.flat[-1] = bad
            args, kwargs = with_arg(call, where, y)
            yield f"{where} element -1 = {bad}", args, kwargs


def _joint(call: Call) -> Iterator[tuple[str, list[Any], dict[str, Any]]]:
    """The call with one size changed in every array at once: each axis of that size, in
    every array argument, to 0, 1 and size + 1. The calls' sizes are picked mostly distinct,
    so that a size names one axis, say H_kv of k and v alike: a change that the shapes'
    agreement checks cannot catch (0 key heads in both k and v, 569c3e0; D = 0 in q, k and
    v, found here)."""
    arrays = list(array_args(call))
    for size in sorted({n for *_, x in arrays for n in x.shape}):
        for new in sorted({0, 1, size + 1} - {size}):
            args, kwargs = fresh_args(call)
            for _, where, item, x in arrays:
                if size in x.shape:
                    shape = tuple(new if n == size else n for n in x.shape)
                    replace_array(args, kwargs, where, item, _resized(x, shape))
            yield f"every axis of {size} -> {new}", args, kwargs


def _escape(op: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """None where `op(*args, **kwargs)` ran or raised a fearless error at this file's line;
    else what escaped."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op(*args, **kwargs)
    except fl.FearlessError as e:
        if __file__ not in str(e):
            return f"no location: {str(e).splitlines()[0][:160]}"
    except Exception as e:  # what this test is for
        return f"{type(e).__name__}: {str(e)[:160]}"
    return None


CALLS = calls()


@pytest.fixture(autouse=True)
def _first_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name.replace(" ", "-"))
def test_the_valid_call_runs(call: Call) -> None:
    """The table's calls are valid: otherwise each mutation would only test a refusal."""
    args, kwargs = fresh_args(call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call.op(*args, **kwargs)


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name.replace(" ", "-"))
def test_one_dimension_changed_is_a_fearless_error_or_runs(call: Call) -> None:
    problems = []
    for what, args, kwargs in mutations(call):
        if (escaped := _escape(call.op, args, kwargs)) is not None:
            problems.append(f"{call.name}, {what}: {escaped}")
    assert not problems, "\n".join(problems)
