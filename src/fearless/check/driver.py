"""The static host-code check behind `fearless check FILE...`: files in, findings out.

A static pass over host code (read with `ast`, never imported): it reports the launches the
launch-time borrow check would refuse and the uses of tensors moved into a partition.

- E0502 (error): a launch passes one array both as an output (`simt.DisjointSlice`,
  `tile.Part`) and as another array argument, or as two outputs, on every path to the launch:
  the same name, the same attribute chain (`self.buf`), or names bound to one array (`b = a`,
  `b = fl.asarray(a)`), until one of them is rebound.
- E0502 (warning, exit status 0): the two may be the same array on some paths only, or may
  overlap: a subscript or view of the other (`a[0:10]` and `a`, `a.T` and `a`), two subscripts
  of one array. The launch-time check, which sees the addresses, decides.
- E0382 (error): a name is used after its tensor moved into `t.partition(shape)` on any path,
  before it is rebound or given back (`t = tp.unpartition()`).

Launches are `k[grid, block](...)`, a variable holding `k[grid, block]` or `k.prepare(...)`
called with the arguments, `k(prep, ...)`, and Tile's `k(...)` and `k.launch(grid, ...)`, for
kernels defined in the file or imported from a module file found next to it or on `sys.path`.
Directories are searched for `*.py` (hidden folders and `__pycache__` skipped; only regular
files are read: a FIFO, socket or device named `*.py` is skipped with a note). Files are decoded
as Python does (a PEP 263 coding line, a BOM, else UTF-8). A diagnostic on a line that says
`# fearless: ignore` is dropped (a launch made on purpose to show the error), and so is one
inside a `with pytest.raises(BorrowError):` block (or `MovedError`, `FearlessError`: a test that
expects that error; `expected_errors`).

Generated code may nest deeply (`x + x + ...` with thousands of terms nests the AST as deep),
and parsing and walking it recurse per level: the check runs in a thread with a large stack and
a recursion limit of `RECURSION_LIMIT`; a file nested deeper still is reported as one that
could not be checked, and the others are checked.

Left to the launch-time check (which sees addresses): names the check did not see bound
(parameters, globals) are taken as distinct arrays; a call returns a new array unless it is a
known view or wrapper (`x.reshape`, `np.asarray`, ...); kernels reached through a parameter, a
container, `getattr` or `importlib`, and launches in a helper called with aliased arguments, are
not followed; moves are seen only for `name.partition(shape)` used like the Tile API (stored in
one name or passed on; `a, _, b = s.partition(":")` is a string split), and only in the scope
that made them. Exceptions are approximated; a scope too large to walk is skipped.

The pipeline: kernels.py (what is a kernel, which parameters are outputs) ->
flow.py (the flow-sensitive walk of each scope, over paths) -> report.py (the
diagnostics). The walk uses effects.py (what one statement or expression does on one
path, and what it records) and values.py (what a name may refer to). cli/check.py prints the
reports and sets the exit status.
"""

from __future__ import annotations

import ast
import linecache
import re
import stat
import sys
import threading
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..errors import Diagnostic, Location
from .flow import analyse
from .kernels import Resolver
from .report import Finding, Source, launch_findings, use_finding

IGNORE = re.compile(r"#\s*fearless:\s*ignore\b(?:\[([A-Z0-9, ]+)\])?")
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
# The parse and the walk recurse about once per level of nesting: 50,000 terms of `x + x + ...`
# need some 60,000 frames. The C stack they take (well under 5 KiB a frame, even on 3.10, where
# every Python call is a C call) is the stack of the thread they run in.
RECURSION_LIMIT = 100_000
STACK_BYTES = 512 * 2**20

T = TypeVar("T")
_deep = threading.local()  # `active`: this thread already runs with the deep limits
_deep_lock = threading.Lock()  # one deep check at a time: the recursion limit is per process


@dataclass
class FileReport:
    path: Path
    findings: list[Finding]
    readable: bool = True  # False: could not be read or parsed (exit status 2)
    skipped: str | None = None  # found in a folder but not read: what it is ("a FIFO")


def deep_recursion(fn: Callable[[], T]) -> T:
    """`fn()`, run in a thread with a `STACK_BYTES` stack and a recursion limit of at least
    `RECURSION_LIMIT` (restored after; the process's limit, so such runs take turns), so that
    deeply nested code parses and is walked. Where no such thread can be made, `fn()` runs
    here with the limits as they are."""
    if getattr(_deep, "active", False):
        return fn()
    result: list[T] = []
    error: list[BaseException] = []

    def work() -> None:
        _deep.active = True
        with _deep_lock:
            old = sys.getrecursionlimit()
            sys.setrecursionlimit(max(old, RECURSION_LIMIT))
            try:
                result.append(fn())
            except BaseException as exc:  # re-raised in the calling thread
                error.append(exc)
            finally:
                sys.setrecursionlimit(old)

    try:
        old_size = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that cannot size thread stacks
        return fn()
    try:
        thread = threading.Thread(target=work, name="fearless-check", daemon=True)
        thread.start()
    except RuntimeError:  # no thread with that stack could be started
        return fn()
    finally:
        threading.stack_size(old_size)
    thread.join()
    if error:
        raise error[0]
    return result[0]


def check_source(source: str, file: str, resolver: Resolver | None = None) -> list[Finding]:
    """The findings for one file's text (raises SyntaxError if it is not valid Python, and
    RecursionError if it nests too deeply to check even with `deep_recursion`)."""
    return deep_recursion(lambda: _check_source(source, file, resolver))


def _check_source(source: str, file: str, resolver: Resolver | None) -> list[Finding]:
    tree = ast.parse(source, filename=file)
    obs = analyse(tree, file, resolver or Resolver())
    src = Source(file, source)
    findings = [f for launch in obs.launches for f in launch_findings(launch, src)]
    findings += [use_finding(use, src) for use in obs.uses]
    expected = expected_errors(tree)
    findings = [f for f in findings if not _ignored(f, src) and not _expected(f, expected)]
    return sorted(findings, key=Finding.sort_key)


def read_source(path: Path) -> str:
    """A file's text decoded as Python decodes it (its PEP 263 coding line or BOM, else UTF-8).
    Raises OSError (also for a file that is not a regular file, which is never opened: a FIFO
    would block), SyntaxError (a bad coding line) or UnicodeDecodeError."""
    kind = special_kind(path)
    if kind is not None:
        raise OSError(f"it is {kind}, not a regular file")
    with tokenize.open(path) as f:
        return f.read()


def special_kind(path: Path) -> str | None:
    """What `path` is when it exists and is neither a regular file nor a folder, else None."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None  # missing, or unreadable: opening it says why
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def check_file(path: Path, resolver: Resolver | None = None) -> FileReport:
    file = str(path)
    try:
        source = read_source(path)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        if isinstance(exc, OSError) and exc.strerror:
            reason = exc.strerror
        elif isinstance(exc, SyntaxError):  # a bad coding line; the file is named already
            reason = exc.msg.replace(f" for {file!r}", "")
        else:
            reason = str(exc)
        return FileReport(path, [_fatal(f"cannot read `{file}`: {reason}")], readable=False)
    linecache.checkcache(file)  # diagnostics quote the file as it is now
    try:
        return FileReport(path, check_source(source, file, resolver))
    except SyntaxError as exc:
        loc = None
        if exc.lineno:
            col = max(0, (exc.offset or 1) - 1)
            loc = Location(file, exc.lineno, col, exc.lineno, col + 1)
        return FileReport(path, [_fatal(f"cannot parse `{file}`: {exc.msg}", loc)], False)
    except ValueError as exc:  # e.g. a NUL byte in the source
        return FileReport(path, [_fatal(f"cannot parse `{file}`: {exc}")], readable=False)
    except RecursionError:
        return FileReport(path, [_too_deep(file)], readable=False)
    except MemoryError:
        return FileReport(path, [_fatal(f"cannot check `{file}`: out of memory")], False)


def python_files(paths: Iterable[Path], skipped: list[FileReport] | None = None) -> list[Path]:
    """Named files as given (whatever their suffix); folders searched for `*.py` regular files.
    A FIFO, socket or device found there is not read: it goes to `skipped`, saying what it is."""
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        for found in sorted(path.rglob("*.py")):
            parts = found.relative_to(path).parts[:-1]
            if any(p.startswith(".") or p in SKIP_DIRS for p in parts) or found.is_dir():
                continue  # a folder named `x.py` is searched, not read
            kind = special_kind(found)
            if kind is None:
                out.append(found)
            elif skipped is not None:
                skipped.append(FileReport(found, [], skipped=kind))
    return out


def check_paths(paths: Sequence[Path]) -> list[FileReport]:
    """A report for each file named or found, in order, then one for each file skipped."""
    resolver = Resolver()  # shared: each imported module is read once per run
    skipped: list[FileReport] = []
    files = python_files(paths, skipped)
    # One thread with the deep limits for the whole run, not one per file (`check_file`).
    return deep_recursion(lambda: [check_file(path, resolver) for path in files]) + skipped


def summary(reports: Sequence[FileReport]) -> str:
    errors = sum(f.severity == "error" for r in reports for f in r.findings)
    warnings = sum(f.severity == "warning" for r in reports for f in r.findings)
    unreadable = sum(not r.readable for r in reports)
    n = sum(r.skipped is None for r in reports)
    head = f"checked {n} file{'s' if n != 1 else ''}: "
    if not errors and not warnings:
        return head + "no problems found"
    counts = [_plural(errors, "error")] if errors else []
    counts += [_plural(warnings, "warning")] if warnings else []
    tail = f" ({_plural(unreadable, 'file')} could not be checked)" if unreadable else ""
    return head + ", ".join(counts) + tail


def _fatal(message: str, loc: Location | None = None) -> Finding:
    help = "`fearless check` reads files without running them; each must be valid Python"
    return Finding("error", Diagnostic("", message, loc, help=help if loc else None))


def _too_deep(file: str) -> Finding:
    message = (
        f"cannot check `{file}`: it nests too deeply to analyse "
        f"(an expression or block deeper than the {RECURSION_LIMIT:,} frames the check may use)"
    )
    help = "split the expression, e.g. add partial sums in a loop; the other files are checked"
    return Finding("error", Diagnostic("", message, None, help=help))


def _ignored(finding: Finding, src: Source) -> bool:
    loc = finding.diagnostic.loc
    if loc is None or not 0 < loc.line <= len(src.lines):
        return False
    m = IGNORE.search(src.lines[loc.line - 1])
    if m is None:
        return False
    codes = {c.strip() for c in (m.group(1) or "").split(",") if c.strip()}
    return not codes or finding.diagnostic.code in codes


# The exception each code raises at launch, and the broader classes that also catch it.
RAISED_AS = {"E0502": "BorrowError", "E0382": "MovedError"}
CATCH_ALL = frozenset({"FearlessError", "Exception", "BaseException"})


def expected_errors(tree: ast.AST) -> list[tuple[int, int, frozenset[str]]]:
    """(first line, last line, exception names) of each `with pytest.raises(E):` block (also
    `raises(E)`, `self.assertRaises(E)`, a tuple of classes): a test that makes the error on
    purpose."""
    out: list[tuple[int, int, frozenset[str]]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call) or not call.args:
                continue
            callee = call.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name not in ("raises", "assertRaises"):
                continue
            first = call.args[0]
            classes = first.elts if isinstance(first, ast.Tuple) else [first]
            names = frozenset(
                c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", "") for c in classes
            )
            out.append((node.lineno, node.end_lineno or node.lineno, names))
    return out


def _expected(finding: Finding, blocks: list[tuple[int, int, frozenset[str]]]) -> bool:
    """Whether `finding` stands in a block that expects the error it names (see above)."""
    loc, raised = finding.diagnostic.loc, RAISED_AS.get(finding.diagnostic.code or "")
    if loc is None or raised is None:
        return False
    return any(
        first <= loc.line <= last and (raised in names or names & CATCH_ALL)
        for first, last, names in blocks
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"
