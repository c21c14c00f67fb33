"""`fearless new NAME`: scaffold a project with one kernel per track, a test and a README.

    NAME/kernels.py        a SIMT vecadd and a Tile add
    NAME/main.py           runs both (GPU if there is one, else the simulator)
    NAME/test_kernels.py   pytest: both kernels against NumPy, and a refused aliasing launch
    NAME/README.md         how to set up (which Python has fearless), run and test it

The closing hint names the Python that runs `fearless new` (it can import fearless): a plain
`python main.py` fails unless that environment is active.

NAME may be a path; the project is named after its last folder (for `.`, the folder it
resolves to). Errors go to stderr.

Exit status: 0 created, 2 the folder exists and is not empty, NAME is not a valid name, or
the folder cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

KERNELS = '''"""Kernels of {name}: one per fearless track."""

import fearless as fl
from fearless import simt, tile


@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    """SIMT: one thread per element; each thread writes only its own element of `c`."""
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    """Tile: each block loads, adds and stores one whole tile of `z`."""
    z.store(tile.load_like(x, z) + tile.load_like(y, z))
'''

MAIN = '''"""Runs the kernels of {name} on the GPU, or on the CPU simulator when there is none."""

import numpy as np

import fearless as fl
from kernels import add, vecadd


def main() -> None:
    n = 1 << 20
    rng = np.random.default_rng(0)
    a = fl.asarray(rng.standard_normal(n).astype(np.float32))
    b = fl.asarray(rng.standard_normal(n).astype(np.float32))

    c = fl.zeros(n, dtype=fl.f32)
    vecadd[(n + 255) // 256, 256](a, b, c)
    print("SIMT vecadd ok:", np.array_equal(c.numpy(), a.numpy() + b.numpy()))

    z = fl.zeros(n, dtype=fl.f32)
    zp = z.partition((1024,))  # moves z into 1024-element tiles, one per block
    add(zp, a, b)
    z = zp.unpartition()  # ownership comes back
    print("Tile add ok:   ", np.array_equal(z.numpy(), a.numpy() + b.numpy()))
    print("target:", fl.get_target())


if __name__ == "__main__":
    main()
'''

TEST = '''"""Tests of {name}'s kernels on the CPU simulator (no GPU needed)."""

import numpy as np
import pytest

import fearless as fl
from kernels import add, vecadd


@pytest.fixture(autouse=True)
def _simulator():
    fl.set_target("sim")
    yield
    fl.set_target(None)


def test_vecadd_matches_numpy():
    n = 1000  # not a multiple of the block: the guard `i < len(c)` matters
    a = np.random.rand(n).astype(np.float32)
    b = np.random.rand(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    vecadd[(n + 255) // 256, 256](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_tile_add_matches_numpy():
    n = 1000  # the last tile is partial: its loads are padded and its stores dropped
    x = fl.asarray(np.random.rand(n).astype(np.float32))
    y = fl.asarray(np.random.rand(n).astype(np.float32))
    z = fl.zeros(n, dtype=fl.f32)
    zp = z.partition((128,))
    add(zp, x, y)
    z = zp.unpartition()
    np.testing.assert_array_equal(z.numpy(), x.numpy() + y.numpy())


def test_aliasing_launch_is_refused():
    a = np.ones(64, np.float32)
    with pytest.raises(fl.BorrowError):
        vecadd[1, 256](a, a.copy(), a)
'''

README = """# {name}

A fearless project: memory-safe GPU kernels in Python (`fearless --help` lists the commands).

## Setup

The Python that runs these files must have fearless installed. Either use the environment
fearless is installed in (this project was made with `{python}`): activate it
(`source {activate}`) or call its Python directly (`{python} main.py`), or install fearless
into your own environment: `pip install fearless` (`pip install -e PATH` from a checkout).

## Run

    python main.py          # runs the kernels (GPU if there is one, else the simulator)
    python -m pytest -q     # tests them on the simulator
    fearless check .        # the static host-code check (aliasing, use after a move)
    fearless inspect kernels.py::vecadd --emit ptx    # the PTX of the SIMT kernel

`kernels.py` has one kernel per track: `vecadd` (SIMT, one thread per element) and `add`
(Tile, one block per tile). Run a script with `fearless run main.py` to see fearless errors as
diagnostics; `fearless explain E0502` explains an error code.
"""


HELP = "scaffold a project: one kernel per track, a test and a README"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the project folder to create")


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    root = Path(args.name)
    # `.` and `..` name the folder they resolve to
    name = root.name if root.name not in ("", "..") else root.resolve().name
    if not name:
        _error(f"`{args.name}` names no folder to call the project after")
        print("  = help: give the project a name: `fearless new NAME`", file=sys.stderr)
        return 2
    if not name.replace("-", "_").isidentifier():
        resolved = f" (the folder `{args.name}` resolves to)" if name != root.name else ""
        _error(f"{name!r}{resolved} is not a valid project name (letters, digits, - and _)")
        return 2
    if root.exists() and not root.is_dir():
        _error(f"{root} already exists and is a file, not a folder")
        return 2
    if root.exists() and any(root.iterdir()):
        _error(f"{root} already exists and is not empty")
        return 2
    files = {
        "kernels.py": KERNELS,
        "main.py": MAIN,
        "test_kernels.py": TEST,
        "README.md": README,
    }
    python, activate = _environment()
    try:
        root.mkdir(parents=True, exist_ok=True)
        for file, template in files.items():
            (root / file).write_text(template.format(name=name, python=python, activate=activate))
            print(f"  created {root / file}")
    except OSError as exc:  # a folder that cannot be made or written: read-only, /proc, ...
        _error(f"cannot write the project at {root}: {exc.strerror or exc}")
        return 2
    print(
        f"\nnext, with the Python fearless is installed in:\n"
        f"  cd {root}\n  {python} main.py\n  {python} -m pytest -q\n"
        f"(or activate that environment first: `source {activate}`, then `python main.py`; "
        "in another environment, `pip install fearless` first)"
    )
    return 0


def _environment() -> tuple[str, str]:
    """The Python running fearless now (it can import it) and its environment's activate script."""
    python = Path(sys.executable)
    activate = Path(sys.prefix) / "bin" / "activate"
    return str(python), str(activate)
