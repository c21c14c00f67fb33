"""`fearless check`, part 3: what flow.py recorded, as rustc-style errors and warnings.

Every diagnostic goes through errors.py's one renderer (`Diagnostic`); a warning is the same text
headed `warning[...]` instead of `error[...]`. Which records become what:

- E0502 error: an output and another array argument of one launch are the same object on every
  path to the launch (`k[g, b](a, b, a)`, or `b = a` before it); two outputs likewise.
- E0502 warning: they are the same object on some paths only, or may overlap (a view, a
  subscript, an attribute of it: `a[0:10]` and `a`). The launch-time check decides those.
- E0382 error: a name is used while its tensor may have moved into a partition (on any path).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..errors import Diagnostic, Location
from .effects import LaunchObs, UseObs
from .values import MoveSite


@dataclass
class Finding:
    """A diagnostic and its severity, "error" or "warning"."""

    severity: str
    diagnostic: Diagnostic

    def render(self) -> str:
        text = self.diagnostic.render()
        if not self.diagnostic.code:  # a problem with no code of its own: `error: ...`
            text = "error" + text[len("error[]") :]
        if self.severity == "warning":
            text = "warning" + text[len("error") :]
        return text

    def sort_key(self) -> tuple[str, int, int]:
        loc = self.diagnostic.loc
        return (loc.file, loc.line, loc.col) if loc else ("", 0, 0)


class Source:
    """A checked file's lines, for locations in characters (ast columns count UTF-8 bytes)."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.lines = text.splitlines()

    def loc(self, node: ast.expr) -> Location:
        end_line = node.end_lineno or node.lineno
        end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset + 1
        return Location(
            self.file,
            node.lineno,
            self.column(node.lineno, node.col_offset),
            end_line,
            self.column(end_line, end_col),
        )

    def column(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def launch_findings(obs: LaunchObs, src: Source) -> list[Finding]:
    """At most one finding per output argument of a launch: its worst relation to another."""
    worst: dict[int, tuple[int, int, list[str]]] = {}  # primary -> (rank, other, relations)
    for (i, j), rels in sorted(obs.rels.items()):
        pi, pj = obs.args[i][1], obs.args[j][1]
        # The caret goes under the output; under the second one when both are outputs.
        primary, other = (i, j) if pi.is_output and not pj.is_output else (j, i)
        same = rels.count("same")
        rank = 3 if same == obs.paths else 2 if same or "maybe" in rels else 1
        if rank > worst.get(primary, (0, 0, []))[0]:
            worst[primary] = (rank, other, rels)
    return [_borrow(obs, src, p, o, rank) for p, (rank, o, _) in sorted(worst.items())]


def _borrow(obs: LaunchObs, src: Source, primary: int, other: int, rank: int) -> Finding:
    (arg, param), (oarg, oparam) = obs.args[primary], obs.args[other]
    text, otext, kernel = ast.unparse(arg), ast.unparse(oarg), obs.kernel.name
    both_out = param.is_output and oparam.is_output
    how = "as" if text == otext else f"`{otext}` as"
    notes = [
        f"`{text}` is passed as `{param.name}` ({param.kind}) and {how} `{oparam.name}` "
        f"({oparam.kind}) of `{kernel}`"
    ]
    own = (
        "give each output memory of its own: two outputs of one launch may not share memory"
        if both_out
        else f"give the output `{param.name}` memory of its own (e.g. a new `fl.empty(...)`): "
        "an output may not share memory with any other argument of the same launch"
    )
    if rank == 3:
        if text != otext:
            notes.append(f"`{text}` and `{otext}` are the same array here")
        if both_out:
            message = f"cannot borrow `{text}` as mutable more than once at a time"
            label = "second mutable borrow occurs here"
        else:
            message = f"cannot borrow `{text}` as mutable because it is also borrowed as immutable"
            label = "mutable borrow occurs here"
        return Finding("error", Diagnostic("E0502", message, src.loc(arg), label, own, notes))
    if rank == 2:
        message = f"`{text}` may be the same array as `{otext}` in this launch"
        notes.append(f"on some paths through this code `{text}` and `{otext}` are the same array")
        label = "possibly aliased output"
    else:
        message = f"`{text}` may overlap `{otext}` in this launch"
        notes.append(f"`{text}` and `{otext}` are parts or views of one array")
        label = "possibly overlapping output"
    help = f"the launch-time check raises BorrowError if they do overlap; {own}"
    return Finding("warning", Diagnostic("E0502", message, src.loc(arg), label, help, notes))


def use_finding(obs: UseObs, src: Source) -> Finding:
    name, node = obs.node.id, obs.node
    notes = []
    for site in sorted(obs.sites, key=lambda s: (s.line, s.col)):
        note = f"`{site.name}` moved into a partition at line {site.line}"
        if 0 < site.line <= len(src.lines):
            note += f": `{src.lines[site.line - 1].strip()}`"
        if (site.line, site.col) >= (node.lineno, node.col_offset):
            note += ", in an earlier iteration of the loop"
        notes.append(note)
    if obs.moved_paths < obs.paths:
        notes.append("it moved on some of the paths that reach this use")
    others = sorted({s.name for s in obs.sites if s.name != name})
    if others:
        notes.append(f"`{name}` refers to the same tensor as `{others[0]}`")
    return Finding(
        "error",
        Diagnostic(
            "E0382",
            f"use of moved value: `{name}`",
            src.loc(node),
            "value used here after move",
            _give_back_help(obs.sites),
            notes,
        ),
    )


def _give_back_help(sites: set[MoveSite]) -> str:
    if all(s.scoped for s in sites):
        site = min(sites, key=lambda s: (s.line, s.col))
        inside = f": `{site.name} = {site.into}.unpartition()`" if site.into else ""
        return (
            f"use `{site.name}` after the `with` block, whose end gives the tensor back, or take "
            f"it back inside the block{inside}"
        )
    gives_back = sorted({f"{s.name} = {s.into}.unpartition()" for s in sites if s.into})
    if len(gives_back) == 1:
        return f"take the tensor back before using it: `{gives_back[0]}`"
    return (
        "keep the partition in a variable (`p = t.partition(...)`) and take the tensor back "
        "with `t = p.unpartition()` before using it"
    )
