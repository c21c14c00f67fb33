"""`fearless inspect FILE::KERNEL --emit STAGE`: prints one compiler stage of a kernel.

FILE is imported as a module (its `if __name__ == "__main__":` block does not run), KERNEL is
looked up in it, and `KERNEL.inspect(stage=STAGE)` is printed. `fearless inspect FILE` takes
the file's one kernel, or lists its kernels where it has several. That needs every parameter of
the kernel annotated, so the compiler can specialise it without arguments. `load_module` (shared
with `fearless compile`) imports the file with `sys.argv` set to `[FILE]`, and afterwards takes
the modules it imported from its own folder out of `sys.modules`, so that the next file's
`helpers` is its own.

Exit status: 0 printed, 1 a fearless diagnostic (the kernel does not compile), 2 a usage error
(no such file, no such kernel, not a kernel, a stage the kernel's track does not have, a file
that exits when imported).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from .. import config
from ..errors import FearlessError
from .run import not_a_file, print_user_exception

STAGES = ("ir", "llvm", "ptx", "sass", "tileir", "resources")
# the stages of each track's kernels (simt/compiler.py's and tile/compiler.py's render_stage)
TRACK_STAGES = {
    "SIMT": ("ir", "llvm", "ptx", "sass", "resources"),
    "Tile": ("ir", "tileir", "sass", "resources"),
}
MAIN_BLOCK = 'if __name__ == "__main__":'


class UsageError(Exception):
    """A mistake on the command line; printed as one line (and a help line), exit status 2."""

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.help = help

    def render(self, prefix: str) -> str:
        """`prefix` and the message, then the help line when there is one."""
        return f"{prefix}{self}" + (f"\n  = help: {self.help}" if self.help else "")


HELP = (
    "print a compiler stage of a kernel: ir, llvm, ptx (SIMT), tileir (Tile), sass, or its "
    "resources (registers, stack, shared memory)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="FILE[::KERNEL]",
        help="e.g. examples/simt_kernels.py::vecadd (FILE alone: its one kernel)",
    )
    parser.add_argument(
        "--emit", choices=STAGES, default="ir", help="the stage to print (default: ir)"
    )


def split_target(target: str) -> tuple[Path, str | None]:
    """FILE::KERNEL as (FILE, KERNEL); a FILE alone as (FILE, None): its one kernel."""
    file, sep, name = target.rpartition("::")
    if not sep:
        return Path(target), None
    if not file or not name:
        raise UsageError(f"expected FILE::KERNEL, got {target!r} (e.g. kernels.py::vecadd)")
    return Path(file), name


def kernels_of(module: types.ModuleType) -> list[str]:
    """The names of the fearless kernels `module` defines, sorted."""
    return sorted(k for k, v in vars(module).items() if is_kernel(v))


def only_kernel(module: types.ModuleType, path: Path) -> str:
    """The name of the one kernel `path` defines; a UsageError listing them where it defines
    none or several."""
    kernels = kernels_of(module)
    if len(kernels) == 1:
        return kernels[0]
    if not kernels:
        raise UsageError(
            f"{path} defines no kernel",
            help="fearless kernels are functions decorated with @simt.kernel or @tile.kernel",
        )
    tracks = ", ".join(f"{k} ({track_of(getattr(module, k)) or 'kernel'})" for k in kernels)
    raise UsageError(
        f"{path} defines {len(kernels)} kernels: {tracks}",
        help=f"name one: `fearless inspect {path}::{kernels[0]}`",
    )


def load_module(path: Path) -> types.ModuleType:
    """Import a file as a module named after it, without running its `__main__` block.

    While it runs, `sys.argv` is `[path]` (a file that parses its arguments at import sees none
    of fearless's) and its folder is first on `sys.path` (it can import its neighbours); then
    the modules it imported from that folder leave `sys.modules` (an entry one replaced comes
    back), so that the next file imports its own `helpers`. A file that exits at import
    (`sys.exit()`, argparse's `parse_args()`) is a UsageError naming it."""
    why = not_a_file(path)
    if why is not None:
        raise UsageError(why)
    path = path.resolve()
    # a private name: the user's `kernels.py` must not stand in for an installed package of
    # that name (Hugging Face's `kernels`, say) for the rest of the process
    name = f"_fearless_file_{path.stem}" if path.stem.isidentifier() else "__kernels__"
    if name in sys.modules:
        name = "__kernels__"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    before = dict(sys.modules)
    saved_argv = sys.argv
    sys.argv = [str(path)]
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        code = "" if exc.code is None else repr(exc.code)
        raise UsageError(
            f"{path} exits when imported (sys.exit({code})): fearless imports the file "
            "to find its kernels",
            help=f"put the script part of the file under `{MAIN_BLOCK}`",
        ) from None
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.argv = saved_argv
        sys.path.remove(str(path.parent))
        _forget_neighbours(path.parent, before)
    return module


def _forget_neighbours(folder: Path, before: dict[str, types.ModuleType]) -> None:
    """Take out of `sys.modules` the modules imported from `folder` since `before` (putting
    back an entry one of them replaced)."""
    for name, module in list(sys.modules.items()):
        if before.get(name) is module or not _imported_from(folder, name, module):
            continue
        if name in before:
            sys.modules[name] = before[name]
        else:
            del sys.modules[name]


def _imported_from(folder: Path, name: str, module: object) -> bool:
    """Whether `module` was found in `folder` as a top-level name: `folder/top.py` (or an
    extension module `top.*.so`) or within the package folder `folder/top/`, where `top` is
    the first part of `name`. An installed package that only lies below `folder` (a
    virtual environment in the project's folder) does not count."""
    top = name.partition(".")[0]
    places = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or ())]
    for place in places:
        if not isinstance(place, str):
            continue
        try:
            first = Path(place).resolve().relative_to(folder).parts[0]
        except (ValueError, IndexError, OSError):
            continue
        if first == top or first.split(".")[0] == top:
            return True
    return False


def is_kernel(obj: object) -> bool:
    """A fearless kernel of either track: it has an `inspect(*args, stage=...)` method."""
    return not isinstance(obj, (type, types.ModuleType, types.FunctionType)) and callable(
        getattr(obj, "inspect", None)
    )


def find_kernel(module: types.ModuleType, name: str, path: Path) -> Any:
    kernels = kernels_of(module)
    found = f"; its kernels: {', '.join(kernels)}" if kernels else "; it defines no kernel"
    if not hasattr(module, name):
        raise UsageError(f"{path} has no `{name}`{found}")
    obj = getattr(module, name)
    if not is_kernel(obj):
        from ..simt.types import DeviceFunction

        if isinstance(obj, DeviceFunction):
            raise UsageError(
                f"`{name}` in {path} is a `@simt.device` function, which runs only when a "
                "kernel calls it, not a kernel",
                help=f"inspect a kernel that calls `{name}` instead",
            )
        if isinstance(obj, types.FunctionType):
            found = " (decorate it with @simt.kernel or @tile.kernel)"
        raise UsageError(f"`{name}` in {path} is {_what(obj)}, not a fearless kernel{found}")
    return obj


def _what(obj: object) -> str:
    """What `obj` is, for a message: "a plain function", "a module", "a class", ..."""
    if isinstance(obj, types.FunctionType):
        return "a plain function"
    if isinstance(obj, types.ModuleType):
        return "a module"
    if isinstance(obj, type):
        return "a class"
    return f"a value of type `{type(obj).__name__}`"


def track_of(kernel: object) -> str | None:
    """The track of a fearless kernel, "SIMT" or "Tile"; None for anything else with an `inspect`."""
    from ..simt.api import Kernel
    from ..tile.kernel import Kernel as TileKernel

    if isinstance(kernel, Kernel):
        return "SIMT"
    if isinstance(kernel, TileKernel):
        return "Tile"
    return None


def check_stage(kernel: object, name: str, stage: str) -> None:
    """A UsageError when `kernel`'s track has no stage `stage` (`--emit tileir` of SIMT)."""
    track = track_of(kernel)
    if track is None or stage in TRACK_STAGES[track]:
        return
    stages = TRACK_STAGES[track]
    other = "Tile" if track == "SIMT" else "SIMT"
    raise UsageError(
        f"`{name}` is a {track} kernel, which has no `{stage}` stage (a {other} kernel's)",
        help=f"a {track} kernel's stages are {', '.join(stages)}",
    )


def inspect_kernel(target: str, stage: str) -> str:
    """The text of `stage` of the kernel `target` names (FILE::KERNEL, or FILE: its one
    kernel). The file's own errors (a SyntaxError, an exception at import) pass as they are:
    `UserFileError` wraps them."""
    path, name = split_target(target)
    try:
        module = load_module(path)
    except UsageError:
        raise
    except Exception as exc:
        raise UserFileError(exc, path.resolve()) from exc
    if name is None:
        name = only_kernel(module, path)
    kernel = find_kernel(module, name, path)
    check_stage(kernel, name, stage)
    return str(kernel.inspect(stage=stage))


class UserFileError(Exception):
    """The user's file raised when imported (shown as `python FILE` would show it)."""

    def __init__(self, error: Exception, path: Path) -> None:
        super().__init__(str(error))
        self.error, self.path = error, path


def run(args: argparse.Namespace) -> int:
    try:
        text = inspect_kernel(args.target, args.emit)
    except UserFileError as exc:
        print_user_exception(exc.error, exc.path)
        return 1
    except UsageError as exc:
        print(exc.render("fearless inspect: error: "), file=sys.stderr)
        return 2
    except FearlessError as exc:
        if config.show_internal_frames():
            raise
        print(exc, file=sys.stderr)
        return 1
    print(text, end="" if text.endswith("\n") else "\n")
    return 0
