"""`fearless demo`: compiles and runs the demo kernels, checks them, shows rejected launches.

On the current target (`fl.get_target()`: the GPU when one is usable, else the CPU simulator)
it runs the kernels of `demo_kernels.py` on random data, checks each result against NumPy, and
prints the first-call time (compile included) and the warm launch time. Two tracks:

- SIMT: vecadd, saxpy and a row softmax (a block of 256 threads per 1024-wide row, its max and
  sum the block's reductions); then the launch fearless exists to refuse,
  `vecadd[grid, block](a, b, a)`: the output aliases an input, so it raises `BorrowError`
  before anything runs, and the demo prints that diagnostic.
- Tile: `add` (z = x + y, the output partitioned into tiles of 1024 elements) and a row
  softmax (one 1024-wide row per block); then the mistake Tile ownership refuses: after
  `zp = z.partition(...)` moved `z`, the launch `add(zp, z, y)` uses `z` again, so it raises
  `MovedError`, naming the line where `z` moved, before anything runs.

Exit status 0 when every step did what it should, 1 otherwise (each ✗ line says what).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import config
from ..errors import FearlessError
from . import doctor

# Large enough on the GPU to measure bandwidth, small enough on the simulator to take seconds.
DEFAULT_SIZES = {"cuda": 1 << 24, "sim": 1 << 20}
BLOCK = 256
# Tile track: `add`'s tile (elements per block) and the softmax's row width (one row per block).
# The softmax matrix holds as many elements as a vector: size // TILE rows.
TILE = 1024
# The softmax uses the hardware's approximate exp on the GPU (a few ulp); the simulator's is exact.
SOFTMAX_RTOL, SOFTMAX_ATOL = 1e-4, 1e-7
# The SIMT softmax's block (demo_kernels.softmax_rows' contract): 256 threads share a row.
SOFTMAX_BLOCK = 256
WARM_RUNS = {"cuda": 20, "sim": 3}
# The public API the demo uses (DESIGN section 2); named here so a gap reads as one clear line.
# (`simt` and `tile` are subpackages: importing demo_kernels checks them.)
REQUIRED_API = ("get_target", "from_numpy", "synchronize", "f32", "BorrowError", "MovedError")


class DemoFailed(Exception):
    """A step ran but did not do what it should (wrong result, unsafe launch accepted)."""


HELP = (
    "compile and run the SIMT and Tile demo kernels on the GPU (else the simulator), "
    "check them against NumPy, show the unsafe launches fearless rejects"
)


def positive_int(text: str) -> int:
    """An argparse type: a whole number above 0 (argparse turns the error into a usage line)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of elements")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size",
        type=positive_int,
        default=None,
        help="elements per array (default: 2^24 on the GPU, 2^20 on the simulator); the "
        f"Tile softmax runs on SIZE // {TILE} rows of {TILE}",
    )


def _fmt_time(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _fmt_size(n: int) -> str:
    exp = n.bit_length() - 1
    return f"2^{exp} = {n:,}" if n == 1 << exp else f"{n:,}"


def _indent(text: str, prefix: str = "      ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def load_api() -> tuple[ModuleType, ModuleType]:
    """`fearless` and the demo kernels, or ImportError saying what is missing."""
    fl = importlib.import_module("fearless")
    missing = [name for name in REQUIRED_API if not hasattr(fl, name)]
    if missing:
        raise ImportError(f"`fearless` has no {', '.join(missing)} yet")
    kernels = importlib.import_module("fearless.cli.demo_kernels")
    return fl, kernels


def describe_target(target: str) -> str:
    if target == "cuda":
        probe = doctor.probe_gpu()
        if probe.usable:
            return f"cuda, {probe.name} ({probe.arch}, driver for CUDA {probe.driver})"
        return "cuda, the GPU"
    if config.target_override() == "sim":
        why = "chosen by FEARLESS_TARGET=sim"
    else:
        why = doctor.probe_gpu().error or "no usable GPU"
    return f"sim, the CPU simulator ({why}; on a GPU the same kernels run there)"


class Demo:
    """The demo's state: the API, the target, the problem size; one method per step."""

    def __init__(self, fl: ModuleType, kernels: ModuleType, size: int | None) -> None:
        self.fl = fl
        self.kernels = kernels
        self.target: str = fl.get_target()
        self.n = size or DEFAULT_SIZES.get(self.target, DEFAULT_SIZES["sim"])
        self.grid = (self.n + BLOCK - 1) // BLOCK
        self.rows = max(1, self.n // TILE)  # of the softmax's (rows x TILE) matrix
        self.rng = np.random.default_rng(0)
        self.borrow_diagnostic: str | None = None  # what the rejected SIMT launch printed
        self.moved_diagnostic: str | None = None  # what the rejected Tile launch printed

    def random(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        return self.rng.standard_normal(self.n, dtype=np.float32)

    def first_call(self, launch: Callable[[], object]) -> float:
        """Seconds for one launch, synchronised: for the first, compile included."""
        start = time.perf_counter()
        launch()
        self.fl.synchronize()
        return time.perf_counter() - start

    def warm_call(self, launch: Callable[[], object]) -> float:
        """Median seconds of a warm launch, each synchronised (launch cost + kernel time)."""
        runs = WARM_RUNS.get(self.target, 3)
        return statistics.median(self.first_call(launch) for _ in range(runs))

    def timing(self, first: float, warm: float, bytes_moved: int) -> str:
        text = f"first call {_fmt_time(first)} (compile + run), warm {_fmt_time(warm)}"
        if self.target == "cuda":
            text += f" ({bytes_moved / warm / 1e9:,.0f} GB/s)"
        return text

    @staticmethod
    def check(got: Any, want: Any, rtol: float = 1e-6, atol: float = 1e-6) -> None:
        got = np.asarray(got)
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            diff = np.abs(got.astype(np.float64) - want) if got.shape == want.shape else None
            why = f"max abs error {float(np.max(diff)):g}" if diff is not None else "wrong shape"
            raise DemoFailed(f"result differs from NumPy ({why})")

    def vecadd(self) -> str:
        fl, vecadd, grid, block = self.fl, self.kernels.vecadd, self.grid, BLOCK
        a_np, b_np = self.random(), self.random()
        a, b, c = fl.from_numpy(a_np), fl.from_numpy(b_np), fl.from_numpy(np.zeros_like(a_np))

        def launch() -> None:
            vecadd[grid, block](a, b, c)

        first = self.first_call(launch)
        self.check(c.numpy(), a_np + b_np)
        warm = self.warm_call(launch)
        return f"c = a + b     matches NumPy; {self.timing(first, warm, 12 * self.n)}"

    def saxpy(self) -> str:
        fl, saxpy, grid, block = self.fl, self.kernels.saxpy, self.grid, BLOCK
        x_np, y_np = self.random(), self.random()
        expected = np.float32(2.0) * x_np + y_np  # before the launch: y may share y_np's memory
        x, y = fl.from_numpy(x_np), fl.from_numpy(y_np)
        alpha = fl.f32(2.0)

        def launch() -> None:
            saxpy[grid, block](alpha, x, y)

        first = self.first_call(launch)
        self.check(y.numpy(), expected)
        warm = self.warm_call(launch)  # keeps updating y in place; checked above
        return f"y = 2·x + y   matches NumPy; {self.timing(first, warm, 12 * self.n)}"

    def rejected_launch(self) -> str:
        """The launch fearless refuses: the output `c` is the input `a`."""
        fl, vecadd, grid, block = self.fl, self.kernels.vecadd, self.grid, BLOCK
        a_np = self.random()
        a, b = fl.from_numpy(a_np.copy()), fl.from_numpy(self.random())
        try:
            vecadd[grid, block](a, b, a)
            fl.synchronize()
        except fl.BorrowError as exc:
            self.borrow_diagnostic = str(exc)
        else:
            raise DemoFailed("vecadd[grid, block](a, b, a) was NOT rejected: a fearless bug")
        if not np.array_equal(np.asarray(a.numpy()), a_np):
            raise DemoFailed("BorrowError was raised, but `a` changed: the kernel ran anyway")
        return "vecadd[grid, block](a, b, a) rejected with BorrowError before it ran; `a` unchanged"

    # ---------------------------------------------------------------------- Tile track

    def tile_add(self) -> str:
        fl, add = self.fl, self.kernels.add
        x_np, y_np = self.random(), self.random()
        x, y = fl.from_numpy(x_np), fl.from_numpy(y_np)
        zp = fl.from_numpy(np.zeros_like(x_np)).partition((TILE,))  # one block per tile

        def launch() -> None:
            add(zp, x, y)

        first = self.first_call(launch)
        warm = self.warm_call(launch)  # z = x + y again: the same result
        self.check(zp.unpartition().numpy(), x_np + y_np)  # the tensor, given back
        return f"z = x + y     matches NumPy; {self.timing(first, warm, 12 * self.n)}"

    def softmax_inputs(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """A (rows x TILE) f32 matrix and its row softmax, in f64."""
        x_np = self.rng.standard_normal((self.rows, TILE), dtype=np.float32)
        e = np.exp(x_np.astype(np.float64) - x_np.max(axis=1, keepdims=True))
        return x_np, e / e.sum(axis=1, keepdims=True)

    def simt_softmax(self) -> str:
        fl, softmax_rows = self.fl, self.kernels.softmax_rows
        x_np, expected = self.softmax_inputs()
        x, out = fl.from_numpy(x_np), fl.from_numpy(np.zeros_like(x_np))

        def launch() -> None:
            softmax_rows[self.rows, SOFTMAX_BLOCK](x, out)  # a block per row

        first = self.first_call(launch)
        warm = self.warm_call(launch)
        self.check(out.numpy(), expected, rtol=SOFTMAX_RTOL, atol=SOFTMAX_ATOL)
        timing = self.timing(first, warm, 8 * self.rows * TILE)
        return f"row softmax   matches NumPy (rtol {SOFTMAX_RTOL:.0e}); {timing}"

    def softmax(self) -> str:
        fl, softmax = self.fl, self.kernels.softmax
        x_np, expected = self.softmax_inputs()
        x = fl.from_numpy(x_np)
        out = fl.from_numpy(np.zeros_like(x_np)).partition((1, TILE))  # one row per block

        def launch() -> None:
            softmax(out, x)

        first = self.first_call(launch)
        warm = self.warm_call(launch)
        self.check(out.unpartition().numpy(), expected, rtol=SOFTMAX_RTOL, atol=SOFTMAX_ATOL)
        timing = self.timing(first, warm, 8 * self.rows * TILE)
        return f"row softmax   matches NumPy (rtol {SOFTMAX_RTOL:.0e}); {timing}"

    def moved_use(self) -> str:
        """The use Tile ownership refuses: `z` again after `z.partition()` moved it."""
        fl, add = self.fl, self.kernels.add
        z_np = self.random()
        z, y = fl.from_numpy(z_np.copy()), fl.from_numpy(self.random())
        moved_at = f"{Path(__file__).name}:{sys._getframe().f_lineno + 1}:"  # the next line
        zp = z.partition((TILE,))  # `zp` owns z's memory now, until `zp.unpartition()`
        try:
            add(zp, z, y)  # `z` as an input: it would read the tiles other blocks write
            fl.synchronize()
        except fl.MovedError as exc:
            self.moved_diagnostic = diagnostic = str(exc)
        else:
            raise DemoFailed("add(zp, z, y) was NOT rejected although `z` moved: a fearless bug")
        if not np.array_equal(np.asarray(zp.unpartition().numpy()), z_np):
            raise DemoFailed("MovedError was raised, but `z` changed: the kernel ran anyway")
        if moved_at not in diagnostic:
            raise DemoFailed(f"MovedError does not name the line where `z` moved ({moved_at})")
        return "add(zp, z, y) rejected with MovedError before it ran; `z` unchanged"


def _step(name: str, step: Callable[[], str]) -> bool:
    """Run one step and print its ✓/✗ line; never raises (a failing step is reported)."""
    try:
        line = step()
    except DemoFailed as exc:
        print(f"  ✗ {name:<8} {exc}", flush=True)
        return False
    except FearlessError as exc:
        print(f"  ✗ {name:<8} {type(exc).__name__}:\n\n{_indent(str(exc))}\n", flush=True)
        return False
    except Exception as exc:
        print(f"  ✗ {name:<8} {type(exc).__name__}: {exc}", flush=True)
        if config.show_internal_frames():
            traceback.print_exc()
        else:
            print("    (FEARLESS_TRACEBACK=1 shows the traceback)", flush=True)
        return False
    print(f"  ✓ {name:<8} {line}", flush=True)
    return True


def _said(diagnostic: str | None) -> None:
    """Print the diagnostic a rejected launch raised, indented under its ✓ line."""
    if diagnostic:
        print(f"\n    what fearless said about it:\n\n{_indent(diagnostic)}")


def run(args: argparse.Namespace) -> int:
    print("fearless demo: memory-safe GPU kernels in Python", flush=True)
    try:
        fl, kernels = load_api()
        demo = Demo(fl, kernels, args.size)
    except FearlessError as exc:
        print(f"✗ the demo kernels do not compile:\n\n{_indent(str(exc))}\n")
        return 1
    except Exception as exc:
        print(f"✗ the fearless API the demo needs is not available: {type(exc).__name__}: {exc}")
        print("  fix: run `fearless doctor`; in a fearless checkout, `make test` shows what fails")
        if config.show_internal_frames():
            traceback.print_exc()
        return 1

    print(f"target: {describe_target(demo.target)}")
    print(f"\nSIMT track: {_fmt_size(demo.n)} f32 elements per array, {BLOCK} threads per block")
    results = [
        _step("vecadd", demo.vecadd),
        _step("saxpy", demo.saxpy),
        _step("softmax", demo.simt_softmax),
        _step("unsafe", demo.rejected_launch),
    ]
    _said(demo.borrow_diagnostic)

    print(
        f"\nTile track: the same arrays in tiles of {TILE} elements; softmax of a "
        f"{demo.rows:,} x {TILE:,} matrix, one row per block"
    )
    results += [
        _step("tile add", demo.tile_add),
        _step("softmax", demo.softmax),
        _step("moved", demo.moved_use),
    ]
    _said(demo.moved_diagnostic)

    print()
    if all(results):
        where = "the GPU" if demo.target == "cuda" else "the CPU simulator"
        print(
            f"Summary: SIMT vecadd, saxpy and softmax, Tile add and softmax compiled, ran on "
            f"{where} and matched NumPy; the aliasing launch and the use of a moved tensor were "
            "rejected before they ran."
        )
        return 0
    print(f"Summary: {results.count(False)} of {len(results)} steps failed (the ✗ lines above).")
    return 1
