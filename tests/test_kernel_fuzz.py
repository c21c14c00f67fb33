"""Kernels with random bodies, of both tracks, compile and run on the simulator or fail with a
fearless error that points into their file: never an internal compiler error (E0999) or a
Python exception from inside the compiler. Each body is a few statements drawn from pools of
statements and expressions that mix the tracks' API with wrong arities, wrong types, Python
values where tiles or scalars go, and forms kernels do not take (`with`, `try`, `del`,
lambdas). A fuzz of 1,500 Tile and 2,800 SIMT bodies found one internal error this way
(`t + print(t)` in SIMT: a call that gives no value, used as one); these seeds find it
again (as `while print(t):`) where it comes back."""

from __future__ import annotations

import importlib.util
import random
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless.crash import InternalCompilerError

STATEMENTS = (
    "t = {e}", "u = {e} + {e}", "if {e}:\n    t = {e}", "for j in range(2):\n    t = t + {e}",
    "while {e}:\n    break", "t += {e}", "assert {e}", "return {e}", "with {e}:\n    pass",
    "try:\n    t = {e}\nexcept Exception:\n    pass", "t = [{e} for j in range(2)]", "del t",
    "global g\ng = {e}", "t = {e}.{name}", "t = {e}({e})", "print({e})",
)  # fmt: skip
COMMON = (
    "1", "2.0", "None", "'a'", "True", "(1, 2)", "[1]", "t", "t * 2", "-t", "t[0]", "t @ t",
    "abs(t)", "max(t, 1)", "t ** 2", "t // 2", "t % 2", "float(s)", "int(s)", "range(3)",
    "lambda: 1", "{}", "s if t else s", "print(t)", "fl.f32", "t == t", "not t", "t and t",
    "len(t)", "t.shape",
)  # fmt: skip
TILE = (
    *COMMON,
    "x", "z", "tile.load_like(x, z)", "tile.sum(t)", "tile.sum(t, axis=5)", "tile.exp(t)",
    "t.astype(fl.f16)", "tile.arange(8)", "tile.full((8,), 0.0)", "tile.full((3,), s)",
    "tile.where(t > 0, t, 0.0)", "z.shape", "x.shape[0]", "tile.bid(0)", "tile.mma(t, t, t)",
    "tile.reshape(t, (3, 3))", "tile.permute(t, (1, 0))", "tile.bitcast(t, fl.i32)", "t[:, None]",
    "tile.cumsum(t, axis=0)", "z.store(t)", "z.store(t, t)", "tile.static_iter(range(2))",
)  # fmt: skip
SIMT = (
    *COMMON,
    "a[i]", "b[i]", "i", "a[i] * 2.0", "c", "a", "len(a)", "a[0:2]", "simt.thread.index_1d()",
    "simt.shared.array((8,), fl.f32)", "simt.sync_threads()", "simt.atomic.add(c, i, 1.0)",
    "a[i] if i > 0 else 0.0", "math.exp(a[i])", "fl.f16(a[i])", "c[i]",
)  # fmt: skip
NAMES = ("load", "store", "sum", "shape", "T", "astype", "nonexistent", "index_1d")
TILE_SOURCE = """import fearless as fl
from fearless import tile


@tile.kernel
def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], s: fl.f32):
    t = tile.load_like(x, z)
{body}
    z.store(t)
"""
SIMT_SOURCE = """import math

import fearless as fl
from fearless import simt


@simt.kernel
def k(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32], s: fl.f32):
    i = simt.thread.index_1d()
    t = a[i]
{body}
    c[i] = t
"""


def _body(rng: random.Random, expressions: tuple[str, ...]) -> str:
    lines = []
    for _ in range(rng.randint(1, 4)):
        statement = rng.choice(STATEMENTS)
        while "{e}" in statement:
            statement = statement.replace("{e}", rng.choice(expressions), 1)
        lines.append(statement.replace("{name}", rng.choice(NAMES)))
    return textwrap.indent("\n".join(lines), "    ")


def _launch(track: str, kernel: Any) -> None:
    if track == "tile":
        kernel(fl.zeros(64).partition((8,)), np.ones(64, np.float32), 2.0)
    else:
        kernel[1, 64](np.ones(64, np.float32), np.ones(64, np.float32), fl.zeros(64), 2.0)


@pytest.mark.parametrize("track", ["tile", "simt"])
def test_random_kernel_bodies_fail_as_fearless_errors_in_their_file(
    track: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fl.config, "_target_override", "sim")
    rng = random.Random(28)
    source, expressions = (TILE_SOURCE, TILE) if track == "tile" else (SIMT_SOURCE, SIMT)
    problems: list[str] = []
    for n in range(150):
        body = _body(rng, expressions)
        path = tmp_path / f"fuzzed_{track}_{n}.py"
        path.write_text(source.format(body=body))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # `2(t)`: Python's own SyntaxWarning
                spec.loader.exec_module(module)
                _launch(track, module.k)
        except SyntaxError:
            continue  # a drawn `return` or `global` that Python itself refuses
        except InternalCompilerError as exc:
            problems.append(f"{body}\n  -> {str(exc).splitlines()[0]}")
        except fl.FearlessError as exc:
            if str(path) not in str(exc) and path.name not in str(exc):
                problems.append(f"{body}\n  -> no location: {str(exc).splitlines()[0]}")
        except Exception as exc:  # what this test is for
            problems.append(f"{body}\n  -> {type(exc).__name__}: {exc}")
    assert not problems, "\n\n".join(problems)
