"""`fearless check FILE...`: finds aliased launches and uses of moved tensors without running.

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
Directories are searched for `*.py` (hidden folders and `__pycache__` skipped). A diagnostic on
a line that says `# fearless: ignore` is dropped (a launch made on purpose to show the error).

Left to the launch-time check (which sees addresses): names the check did not see bound
(parameters, globals) are taken as distinct arrays; a call returns a new array unless it is a
known view or wrapper (`x.reshape`, `np.asarray`, ...); kernels reached through a parameter, a
container, `getattr` or `importlib`, and launches in a helper called with aliased arguments, are
not followed; moves are seen only for `name.partition(shape)` used like the Tile API (stored in
one name or passed on; `a, _, b = s.partition(":")` is a string split), and only in the scope
that made them. Exceptions are approximated; a scope too large to walk is skipped.

The pipeline: check_kernels.py (what is a kernel, which parameters are outputs) ->
check_flow.py (the flow-sensitive walk of each scope, over paths) -> check_report.py (the
diagnostics). The walk uses check_effects.py (what one statement or expression does on one
path, and what it records) and check_values.py (what a name may refer to).
Exit status: 0 no errors, 1 errors found, 2 a file could not be read or parsed.
"""

from __future__ import annotations

import argparse
import ast
import linecache
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import Diagnostic, Location
from .check_flow import analyse
from .check_kernels import Resolver
from .check_report import Finding, Source, launch_findings, use_finding

IGNORE = re.compile(r"#\s*fearless:\s*ignore\b(?:\[([A-Z0-9, ]+)\])?")
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


HELP = "find aliased launches (E0502) and uses of moved tensors (E0382) without running"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="files or folders")


@dataclass
class FileReport:
    path: Path
    findings: list[Finding]
    readable: bool = True  # False: could not be read or parsed (exit status 2)


def check_source(source: str, file: str, resolver: Resolver | None = None) -> list[Finding]:
    """The findings for one file's text (raises SyntaxError if it is not valid Python)."""
    tree = ast.parse(source, filename=file)
    obs = analyse(tree, file, resolver or Resolver())
    src = Source(file, source)
    findings = [f for launch in obs.launches for f in launch_findings(launch, src)]
    findings += [use_finding(use, src) for use in obs.uses]
    findings = [f for f in findings if not _ignored(f, src)]
    return sorted(findings, key=Finding.sort_key)


def check_file(path: Path, resolver: Resolver | None = None) -> FileReport:
    file = str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
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


def python_files(paths: Iterable[Path]) -> list[Path]:
    """Named files as given (whatever their suffix); folders searched for `*.py`."""
    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        for found in sorted(path.rglob("*.py")):
            parts = found.relative_to(path).parts[:-1]
            if not any(p.startswith(".") or p in SKIP_DIRS for p in parts):
                out.append(found)
    return out


def check_paths(paths: Sequence[Path]) -> list[FileReport]:
    resolver = Resolver()  # shared: each imported module is read once per run
    return [check_file(path, resolver) for path in python_files(paths)]


def summary(reports: Sequence[FileReport]) -> str:
    errors = sum(f.severity == "error" for r in reports for f in r.findings)
    warnings = sum(f.severity == "warning" for r in reports for f in r.findings)
    unreadable = sum(not r.readable for r in reports)
    n = len(reports)
    head = f"checked {n} file{'s' if n != 1 else ''}: "
    if not errors and not warnings:
        return head + "no problems found"
    counts = [_plural(errors, "error")] if errors else []
    counts += [_plural(warnings, "warning")] if warnings else []
    tail = f" ({_plural(unreadable, 'file')} could not be checked)" if unreadable else ""
    return head + ", ".join(counts) + tail


def run(args: argparse.Namespace) -> int:
    reports = check_paths(args.paths)
    for report in reports:
        for finding in report.findings:
            print(finding.render(), end="\n\n")
    print(summary(reports))
    if not all(r.readable for r in reports):
        return 2
    return 1 if any(f.severity == "error" for r in reports for f in r.findings) else 0


def _fatal(message: str, loc: Location | None = None) -> Finding:
    help = "`fearless check` reads files without running them; each must be valid Python"
    return Finding("error", Diagnostic("", message, loc, help=help if loc else None))


def _ignored(finding: Finding, src: Source) -> bool:
    loc = finding.diagnostic.loc
    if loc is None or not 0 < loc.line <= len(src.lines):
        return False
    m = IGNORE.search(src.lines[loc.line - 1])
    if m is None:
        return False
    codes = {c.strip() for c in (m.group(1) or "").split(",") if c.strip()}
    return not codes or finding.diagnostic.code in codes


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"
