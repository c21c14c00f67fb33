"""Every public fearless.ops operator, every tensor-making function of `fearless` (fl.zeros,
fl.full, fl.arange, fl.asarray, ...) and the kernels' host API (the decorators, a launch of
either track, Tile's `launch(grid)`, `options`, `specialise` and `tile.Spec`, SIMT's
`prepare`, `Tensor.partition`, `Tensor.astype`), called with wrong arguments drawn at random
(arrays of the wrong rank or dtype, 0-d and empty arrays, fl.Tensors, dtypes, None, numbers,
NaN, strings, lists, bools, in any parameter, keyword-only ones included), raises a fearless
error that points at the caller's line: never NumPy's "truth value of an array is
ambiguous", an IndexError or a TypeError from inside fearless (an array where a flag such as
`is_causal` goes, an fl.Tensor given as a shape or a dtype, NaN to fl.arange, a string to
`@simt.kernel`: each was one, found so)."""

from __future__ import annotations

import inspect
import random
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops, simt, tile

POOL: list[tuple[str, Callable[[], Any]]] = [
    ("0-d", lambda: np.array(1.0, np.float32)),
    ("1-d", lambda: np.zeros((4,), np.float32)),
    ("2-d", lambda: np.zeros((2, 8), np.float32)),
    ("3-d", lambda: np.zeros((2, 4, 8), np.float32)),
    ("4-d", lambda: np.zeros((1, 2, 4, 8), np.float32)),
    ("5-d", lambda: np.zeros((1, 2, 2, 2, 8), np.float32)),
    ("empty", lambda: np.zeros((0, 8), np.float32)),
    ("i32", lambda: np.zeros((2, 8), np.int32)),
    ("f16", lambda: np.zeros((2, 8), np.float16)),
    ("None", lambda: None),
    ("3", lambda: 3),
    ("-1", lambda: -1),
    ("0.5", lambda: 0.5),
    ("'x'", lambda: "x"),
    ("[1.0, 2.0]", lambda: [1.0, 2.0]),
    ("True", lambda: True),
    ("0", lambda: 0),
    ("nan", lambda: float("nan")),
    ("2**70", lambda: 2**70),
    ("(2, -3)", lambda: (2, -3)),
    ("fl.Tensor", lambda: fl.zeros((2, 8))),
    ("fl.f16", lambda: fl.f16),
    ("np.float16", lambda: np.float16),
    ("object()", lambda: object()),
]
TENSOR_MAKERS = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "from_numpy",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
    "set_target",
]
TRIALS = 30  # per function and seed: the whole module runs in about 6 s


def _draws(op: Callable[..., Any], rng: random.Random) -> tuple[list[Any], dict[str, Any], str]:
    """Random arguments for `op`: every required positional one, some optional ones, and some
    keyword-only ones; with their description."""
    params = list(inspect.signature(op).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    n = rng.randint(required, len(positional))
    picked = [rng.choice(POOL) for _ in range(n)]
    named = {p.name: rng.choice(POOL) for p in params if p.kind == p.KEYWORD_ONLY}
    named = {k: v for k, v in named.items() if rng.random() < 0.5}
    said = ", ".join([d for d, _ in picked] + [f"{k}={d}" for k, (d, _) in named.items()])
    return [make() for _, make in picked], {k: make() for k, (_, make) in named.items()}, said


def _escapes(functions: list[tuple[str, Callable[..., Any]]], seed: int) -> str:
    """What got out of `functions` called with wrong arguments, other than a fearless error
    at this file's line: one line per function and kind of escape."""
    rng = random.Random(seed)
    escaped: dict[tuple[str, str], str] = {}
    for name, function in functions:
        for _ in range(TRIALS):
            args, kwargs, said = _draws(function, rng)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # HostCopyWarning and the like
                    function(*args, **kwargs)
            except fl.FearlessError as e:
                if __file__ not in str(e):
                    escaped.setdefault((name, "no location"), f"({said}): {str(e)[:120]}")
            except Exception as e:  # what these tests are for
                escaped.setdefault((name, type(e).__name__), f"({said}): {str(e)[:120]}")
            finally:
                fl.set_target(None)  # a drawn fl.set_target("sim") stays in this process
    return "\n".join(f"{n}{what}: {kind}" for (n, kind), what in escaped.items())


@pytest.mark.parametrize("seed", [0, 1])
def test_wrong_arguments_to_an_operator_are_fearless_errors_at_the_callers_line(
    seed: int,
) -> None:
    assert not (problems := _escapes([(n, getattr(ops, n)) for n in ops.__all__], seed)), problems


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wrong_arguments_to_a_tensor_maker_are_fearless_errors_at_the_callers_line(
    seed: int,
) -> None:
    makers = [(name, getattr(fl, name)) for name in TENSOR_MAKERS]
    assert not (problems := _escapes(makers, seed)), problems


@tile.kernel
def scaled(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], s: fl.f32):
    z.store(tile.load_like(x, z) * s)


@simt.kernel
def added(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[i] + b[i]


def _simt_options(
    block: Any = None,
    launch_bounds: Any = None,
    requires: Any = (),
    max_registers: Any = None,
    unsafe: Any = False,
) -> Any:
    """`@simt.kernel(...)` with these options, on a kernel (its options are keywords only)."""
    decorate = simt.kernel(
        block=block,
        launch_bounds=launch_bounds,
        requires=requires,
        max_registers=max_registers,
        unsafe=unsafe,
    )
    return decorate(added.func)


def _kernel_api() -> list[tuple[str, Callable[..., Any]]]:
    """The host API of the kernels of both tracks, of the decorators and of partitions, on
    fresh tensors (a partition moves its tensor)."""
    return [
        ("simt.kernel", simt.kernel),
        ("@simt.kernel(...)", _simt_options),
        ("tile.kernel", tile.kernel),
        ("fl.autotune", fl.autotune),
        ("SIMT launch", added),
        ("SIMT prepare", added.prepare),
        ("launch", scaled),
        ("launch(grid)", scaled.launch),
        ("options", scaled.options),
        ("specialise", scaled.specialise),
        ("tile.Spec", tile.Spec),
        ("Tensor.partition", fl.zeros((4, 8)).partition),
        ("Tensor.astype", fl.zeros((4, 8)).astype),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wrong_arguments_to_a_kernel_or_a_partition_are_fearless_errors(seed: int) -> None:
    problems = [_escapes([api], seed + 10 * n) for n, api in enumerate(_kernel_api())]
    assert not any(problems), "\n".join(p for p in problems if p)


@pytest.mark.parametrize("seed", [0, 1])
def test_wrong_arguments_beside_a_torch_tensor_are_fearless_errors(seed: int) -> None:
    """A torch tensor that requires grad routes a call through torch's dispatcher, whose own
    refusal of a wrong argument (a float where the schema takes a Tensor) is turned into a
    fearless error at the caller's line too (ops/_route.py `refused_argument`)."""
    torch = pytest.importorskip("torch")
    POOL.extend(
        TORCH := [
            ("torch 2-d", lambda: torch.zeros(2, 8)),
            ("torch 4-d", lambda: torch.zeros(1, 2, 4, 8)),
            ("torch 0-d", lambda: torch.tensor(1.0)),
            ("torch i32", lambda: torch.zeros(2, 8, dtype=torch.int32)),
            ("torch grad", lambda: torch.zeros(2, 8, requires_grad=True)),
            ("torch 4-d grad", lambda: torch.zeros(1, 2, 4, 8, requires_grad=True)),
        ]
    )
    try:
        problems = _escapes([(n, getattr(ops, n)) for n in ops.__all__], 100 + seed)
    finally:
        del POOL[-len(TORCH) :]
    assert not problems, problems


def test_a_call_that_does_not_fit_an_operators_signature_is_a_fearless_error_at_its_line() -> None:
    """A missing argument, an unknown keyword, one argument too many or one given twice is the
    E0701 of ops/_arguments.py's `call_error` at this file's line, with the signature as help:
    never Python's TypeError from fearless's wrapper. The operators cover the warm path's
    wrapper (ops/_replay.py: mla, softmax), the plain one (ops/_route.py: splitk_reduce,
    fused_moe) and both (group_gemm)."""
    x = np.zeros((1, 1, 16, 16), np.float32)
    pe = np.zeros((1, 1, 16, 8), np.float32)
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], str]] = [
        (ops.mla, (x, x, x, pe, pe), {}, "`fearless.ops.mla` is missing its argument `is_causal`"),
        (ops.mla, (x, x, x, pe, pe, True), {"causal": True}, "has no argument `causal`"),
        (ops.softmax, (), {}, "`fearless.ops.softmax` is missing its argument `x`"),
        (ops.softmax, (x,), {"dims": 1}, "`fearless.ops.softmax` has no argument `dims`"),
        (ops.softmax, (x, -1, None, 3), {}, "takes at most"),
        (ops.splitk_reduce, (x, x, x), {}, "is missing its argument `S_kv`"),
        (ops.splitk_reduce, (x, x, x, 16), {"S_kv": 16}, "got `S_kv` twice"),
        (ops.fused_moe, (x,), {"bogus": 1, "extra": 2}, "has no arguments `bogus` and `extra`"),
        (ops.group_gemm, ([x],), {}, "`fearless.ops.group_gemm` is missing its argument `Bs`"),
        (ops.group_gemm, ([x], [x]), {"transpose": True}, "has no argument `transpose`"),
    ]
    for op, args, kwargs, said in calls:
        with pytest.raises(fl.KernelTypeError) as e:
            op(*args, **kwargs)
        line = e.traceback[0].lineno + 1  # pytest's lines are 0-based
        assert e.value.code == "E0701"
        assert e.value.loc is not None and (e.value.loc.file, e.value.loc.line) == (__file__, line)
        assert said in str(e.value), str(e.value)
        assert f"`fearless.ops.{op.__name__}(" in (e.value.help or "")


def test_a_type_error_from_inside_an_operator_is_not_taken_for_a_wrong_call() -> None:
    """`call_error` answers only where the arguments do not fit the signature: a TypeError
    that came from inside an operator called as its signature allows passes as it is."""
    from fearless.ops._arguments import call_error

    assert call_error(ops.softmax, (np.zeros(4, np.float32),), {"dim": 0}) is None
    err = call_error(ops.softmax, (), {"dim": 0})
    assert err is not None and "missing its argument `x`" in str(err)


def test_a_lazily_negated_torch_tensor_is_refused_by_kernels_and_operators() -> None:
    """`torch.conj(z).imag` (and `torch._neg_view`) is a view with torch's negative bit: its
    memory holds the values before the negation. A kernel or an operator reading that memory
    would get them unnegated, and torch's `.numpy()` raised from inside fearless: each is
    an E0701 at the caller's line that names the argument and says `resolve_neg()`."""
    torch = pytest.importorskip("torch")
    r = torch.arange(8, dtype=torch.float32)
    views = (torch.conj(torch.complex(r, r)).imag, torch._neg_view(r))
    fl.set_target("sim")
    try:
        for x in views:
            assert x.is_neg()
            z = fl.zeros(8)
            calls: list[tuple[str, Callable[[], Any]]] = [
                ("argument `a`", lambda: added[1, 8](x, r, torch.zeros(8))),  # noqa: B023
                ("argument `x`", lambda: scaled(z.partition((8,)), x, 2.0)),  # noqa: B023
                ("`x` of `fearless.ops.relu`", lambda: ops.relu(x)),  # noqa: B023
            ]
            for named, call in calls:
                with pytest.raises(fl.KernelTypeError) as e:
                    call()
                line = e.traceback[1].lineno + 1  # the lambda's line: pytest's are 0-based
                assert e.value.code == "E0701"
                assert e.value.loc is not None and (e.value.loc.file, e.value.loc.line) == (
                    __file__,
                    line,
                ), str(e.value)
                assert f"{named} is a torch tensor with its negative bit set" in str(e.value)
                assert "resolve_neg()" in (e.value.help or "")
        c = torch.zeros(8)
        added[1, 8](views[1].resolve_neg(), r, c)
        assert c.tolist() == [0.0] * 8  # -r + r
        assert ops.relu(views[1].resolve_neg()).tolist() == [0.0] * 8
    finally:
        fl.set_target(None)
