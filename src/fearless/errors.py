"""Exception classes and the one diagnostic renderer every fearless error goes through.

A diagnostic reads like rustc's:

    error[E0594]: cannot assign to `a[i]`, as `a` is a read-only `Slice`
      --> kernels.py:12:9
       |
    12 |         a[i] = 1.0
       |         ^^^^ cannot assign
       |
       = help: declare `a` as `simt.DisjointSlice[fl.f32]` to write it

`Location` carries the user's file:line:col span; every IR value has one, so any pass can raise
an error that points at the user's code.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Location:
    """A span in the user's source: 1-based line, 0-based column (as Python's ast)."""

    file: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")


# Every error code fearless emits, with its one-line title (docs/errors.md explains each).
CODES: dict[str, str] = {
    "E0001": "unsupported Python construct in a kernel",
    "E0061": "wrong number of arguments",
    "E0070": "invalid assignment target",
    "E0308": "mismatched types",
    "E0381": "use of a possibly unassigned variable",
    "E0382": "use of a moved value",
    "E0425": "unresolved name",
    "E0433": "unknown attribute or function",
    "E0502": "output aliases another argument",
    "E0594": "write to a read-only Slice",
    "E0599": "invalid annotation",
    "E0600": "index out of bounds on the device",
    "E0601": "DisjointSlice accessed without the thread's own index",
    "E0602": "thread index forged or stored",
    "E0603": "kernel returns a value",
    "E0604": "recursion in device functions",
    "E0605": "call to a host function from a kernel",
    "E0610": "AtomicSlice accessed without an atomic",
    "E0611": "atomic on an array that is not an AtomicSlice",
    "E0620": "`simt.unsafe()` misused",
    "E0630": "invalid shared or local array",
    "E0631": "shared memory written at another thread's slot",
    "E0632": "shared memory race between barriers",
    "E0633": "barrier or collective under thread-dependent control flow",
    "E0634": "barrier not reached by every thread of the block",
    "E0635": "unknown collective operation",
    "E0636": "grid-wide race between grid syncs",
    "E0640": "unsupported `print` in a kernel",
    "E0650": "module-level array a kernel cannot hold as a constant",
    "E0700": "launch contract violated",
    "E0701": "wrong argument type at launch",
    "E0702": "arguments on different devices, or no such device",
    "E0703": "cooperative grid larger than the GPU holds at once",
    "E0704": "out of memory",
    "E0900": "toolchain problem",
    "E0999": "internal compiler error (a bug in fearless)",
}


@dataclass
class Diagnostic:
    code: str
    message: str
    loc: Location | None = None
    label: str = ""
    help: str | None = None
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        out = [f"error[{self.code}]: {self.message}"]
        if self.loc is not None:
            lineno = str(self.loc.line)
            pad = " " * len(lineno)
            out.append(f"{pad}--> {self.loc}")
            text = self.loc.source_line()
            if text:
                start = self.loc.col
                if self.loc.end_col is not None and self.loc.end_line in (None, self.loc.line):
                    width = max(1, self.loc.end_col - start)
                else:
                    width = max(1, len(text.rstrip()) - start)
                out.append(f"{pad} |")
                out.append(f"{lineno} | {text}")
                caret = " " * start + "^" * width
                out.append(f"{pad} | {caret}{' ' + self.label if self.label else ''}")
                out.append(f"{pad} |")
        for note in self.notes:
            out.append(f"  = note: {note}")
        if self.help:
            out.append(f"  = help: {self.help}")
        return "\n".join(out)


class FearlessError(Exception):
    """Base of every error fearless raises on purpose; `str()` is the rendered diagnostic.
    Subclasses name their `code` in their header (`class BorrowError(FearlessError,
    code="E0502")`); a code that is not in CODES (this base's own "E0000" included) renders as
    E0999, an internal error, so no user ever sees an undocumented code."""

    code = "E0000"

    def __init_subclass__(cls, code: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if code:
            cls.code = code

    def __init__(
        self,
        message: str,
        loc: Location | None = None,
        *,
        help: str | None = None,
        label: str = "",
        notes: list[str] | None = None,
        code: str | None = None,
    ) -> None:
        code = code or self.code
        if code not in CODES:  # every code a user sees is documented (docs/errors.md)
            notes = [*(notes or []), f"fearless raised this with the undocumented code {code}"]
            code = "E0999"
        self.diagnostic = Diagnostic(
            code, message, loc, label=label, help=help, notes=list(notes or [])
        )
        self.code = self.diagnostic.code  # the code this error was raised with
        super().__init__(self.diagnostic.render())

    @property
    def message(self) -> str:
        return self.diagnostic.message

    @property
    def loc(self) -> Location | None:
        return self.diagnostic.loc

    @property
    def help(self) -> str | None:
        return self.diagnostic.help


class CompileError(FearlessError, code="E0001"):
    """The kernel's Python cannot be compiled (unsupported construct, unknown name, ...)."""


class KernelTypeError(FearlessError, code="E0308"):
    """Types do not fit: in the kernel (at JIT time) or an argument at launch."""


class ArgumentError(KernelTypeError, TypeError, ValueError, code="E0701"):
    """A wrong argument to a launch or an operator (a dtype, a shape, a value it does not take),
    at the caller's line. Also a TypeError and a ValueError: Python's own functions raise one or
    the other for such a mistake, and code written for another library (TileGym's operators
    raise ValueError) catches it as it would theirs."""


class SafetyError(FearlessError, code="E0601"):
    """The kernel breaks a safety rule (witness rule, write to a Slice, ...)."""


class BorrowError(FearlessError, code="E0502"):
    """An output overlaps another argument of the same launch."""


class MovedError(FearlessError, code="E0382"):
    """A tensor was used after it moved into a partition."""


class LaunchContractError(FearlessError, code="E0700"):
    """The launch breaks the kernel's contract (block, bounds, requires) or the device's limits."""


class KernelIndexError(FearlessError, IndexError, code="E0600"):
    """A device-side bounds check failed; raised at the next synchronisation."""


class DeviceError(FearlessError, code="E0702"):
    """A device index that does not exist (or that this build cannot run on), or one launch's
    arrays on different devices."""


class OutOfMemoryError(FearlessError, MemoryError, code="E0704"):
    """A tensor or a launch needed more memory than the GPU (or, on the simulator, this
    machine) had free; nothing was written."""


class ToolchainError(FearlessError, code="E0900"):
    """A compiler or driver tool is missing or failed."""


class FearlessWarning(UserWarning):
    """The base of fearless's warnings: the launch ran, but something deserves a look."""


class PaddedReductionWarning(FearlessWarning):
    """A Tile reduction may take in load padding that is not its identity (a max over a
    zero-padded tile): the result is wrong where the tile passes the tensor's end
    (tile/padding_check.py)."""


class HostCopyWarning(FearlessWarning):
    """NumPy arrays on the cuda target: copied to the GPU and back at each launch (once per
    kernel, naming the bytes; runtime/host_arrays.py)."""


class InternalError(Exception):
    """A bug in fearless itself (never a user mistake)."""
