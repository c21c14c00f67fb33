"""`fearless check`, part 2: a flow-sensitive walk of host code that records every kernel launch
with what its arguments may refer to, and every use of a name whose tensor may have moved.

Each scope (the module body, then every function and class body) is walked statement by
statement over a list of paths, one abstract `State` per path: what each name refers to, which
names hold a kernel, a configured launch (`k[grid, block]`) or a prepared one (`k.prepare(...)`),
and which values moved into a partition (`t.partition(shape)`). `if`/`try`/`match` split the
paths and later statements run on each; paths that end in the same state are merged, and past
`MAX_PATHS` all are joined into one (a name then refers to any of several values). A loop body
is iterated until no new state reaches its head, without recording, then walked once more to
record. `return`, `raise`, `break` and `continue` end a path.

Before walking, `analyse` skips a file that can neither launch a kernel the check knows nor
move a tensor, and a function or class body that names no kernel of the module, partitions
nothing and imports nothing.

What one statement or expression does on one path (bindings, moves, the records) is
effects.py; what names refer to, and how two arguments relate, is values.py.
The walk only records (`LaunchObs`, `UseObs`); report.py turns records into diagnostics.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .effects import Effects, LaunchObs, UseObs
from .kernels import ImportRef, Resolver, attr_chain, import_bindings
from .values import NO_CALLEES, NO_VALS, State, join_all, value_of

MAX_PATHS = 8  # more paths than this through one scope are joined into one state
MAX_LOOP_ROUNDS = 8  # rounds over separate paths before a loop head is joined into one state
MAX_JOINED_ROUNDS = 32  # rounds on the joined state (a finite lattice: it converges before)
# Statement visits (one per path) one scope may take; past that it is walked again on one
# joined path, with BUDGET_JOINED; past that too, it is left unchecked (a generated monster).
BUDGET = 20_000
BUDGET_JOINED = 60_000


@dataclass
class Observations:
    launches: list[LaunchObs]
    uses: list[UseObs]


def analyse(tree: ast.Module, file: str, resolver: Resolver) -> Observations:
    """Walk every scope of a parsed file that may launch a kernel or move a tensor, and return
    what the walk recorded."""
    walker = Walker(file, resolver, tensor_partitions(tree))
    if not walker.partitions and not _may_launch(tree, Path(file), resolver):
        return Observations([], [])  # no kernel is known here and nothing is partitioned
    paths = walker.scope(tree.body, State())
    module_callees = join_all(paths).callees if paths else {}
    names = {  # module names that may stand for a kernel or a launch of one
        key.split(".")[0]
        for key, callees in module_callees.items()
        for _, what in callees
        if not isinstance(what, ImportRef) or resolver.may_hold_kernels(what)
    }
    # Function and class bodies run later, against the module's final names.
    while walker.pending:
        body, params = walker.pending.pop(0)
        if _mentions(body, names, walker.partitions):
            walker.scope(
                body, State(callees={**module_callees, **dict.fromkeys(params, NO_CALLEES)})
            )
    uses = [u for u in walker.uses.values() if u.moved_paths]
    return Observations(list(walker.launches.values()), uses)


def tensor_partitions(tree: ast.Module) -> set[int]:
    """The `name.partition(shape)` calls that may move a tensor (their ids). `str.partition`
    is common, so a call counts only when it looks like the Tile API's: one positional
    argument that is not a string, and the result stored in one name (`zp = z.partition(s)`,
    `with z.partition(s) as zp:`), passed to a call (`add(z.partition(s), x)`) or dropped.
    `head, _, tail = s.partition(x)` and `s.partition(x)[0]` are string splits. A name bound to `tile.Spec(...)` describes an
    array without data: its `.partition(tile)` moves nothing."""
    specs = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and (attr_chain(node.value.func) or [""])[-1] == "Spec"
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    out: set[int] = set()
    for node in ast.walk(tree):
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Call):  # passed on: `add(z.partition(s), x)`, `f(t=z.partition(s))`
            candidates = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.With | ast.AsyncWith):  # `with z.partition(s) as zp:`
            candidates = [
                item.context_expr
                for item in node.items
                if item.optional_vars is None or isinstance(item.optional_vars, ast.Name)
            ]
        elif isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = (
                [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
            )
            if all(isinstance(t, ast.Name) for t in targets) and len(targets) <= 1:
                candidates = [node.value]
        for c in candidates:
            if (
                isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr == "partition"
                and isinstance(c.func.value, ast.Name)
                and c.func.value.id not in specs
                and len(c.args) == 1
                and not c.keywords
                and not isinstance(c.args[0], ast.JoinedStr)
                and not (
                    isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str | bytes)
                )
            ):
                out.add(id(c))
    return out


def _may_launch(tree: ast.Module, file: Path, resolver: Resolver) -> bool:
    """Whether the file defines something decorated `...kernel` or imports from a module that
    may hold kernels: if not, it cannot launch a kernel the check knows."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                chain = attr_chain(dec.func if isinstance(dec, ast.Call) else dec)
                if chain and chain[-1] == "kernel":
                    return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
            resolver.may_hold_kernels(ref) for _, ref in import_bindings(node, file)
        ):
            return True
    return False


def _mentions(body: Sequence[ast.stmt], names: set[str], partitions: set[int]) -> bool:
    """Whether a scope may launch or move: it names a kernel (or a launch of one) of the module,
    partitions something, or imports something."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id in names:
                return True
            if id(node) in partitions:
                return True
            if isinstance(node, ast.Import | ast.ImportFrom):
                return True
    return False


class _OverBudget(Exception):
    """A scope took more than its budget of statement visits."""


class Walker(Effects):
    """Walks statements over paths (see the module docstring); records only when `report`.
    What each statement and expression does on one path is `Effects`' part."""

    def __init__(self, file: str, resolver: Resolver, partitions: set[int]) -> None:
        super().__init__(file, resolver, partitions)
        self.loops: list[tuple[list[State], list[State]]] = []  # (breaks, continues)
        self.max_paths = MAX_PATHS
        self.budget = BUDGET
        self._loop_memo: dict[tuple[int, frozenset[object]], list[State]] = {}

    def scope(self, body: Sequence[ast.stmt], entry: State) -> list[State]:
        """Walk a scope; return the last paths alive (those that reach its end, or, when every
        path ends in `return`/`raise`, those before the statement that ended the last)."""
        mark = (set(self.launches), set(self.uses), len(self.pending))
        for self.max_paths, self.budget in ((MAX_PATHS, BUDGET), (1, BUDGET_JOINED)):
            self._loop_memo = {}  # loop exits depend on max_paths
            try:
                paths = alive = [entry.copy()]
                for stmt in body:
                    paths = self.block([stmt], paths)
                    if not paths:
                        break
                    alive = paths
                return alive
            except _OverBudget:  # forget what this scope recorded, and try the cheap way
                self.report, self.loops = True, []
                for key in set(self.launches) - mark[0]:
                    del self.launches[key]
                for node in set(self.uses) - mark[1]:
                    del self.uses[node]
                del self.pending[mark[2] :]
        return []

    # ------------------------------------------------------------------------------ paths

    def merge(self, paths: Iterable[State]) -> list[State]:
        """Drop duplicate paths; join them all when there are too many."""
        seen: dict[object, State] = {}
        for st in paths:
            seen.setdefault(st.key(), st)
        out = list(seen.values())
        return out if len(out) <= self.max_paths else [join_all(out)]

    def block(self, body: Sequence[ast.stmt], paths: list[State]) -> list[State]:
        for stmt in body:
            if not paths:
                break  # unreachable
            self.budget -= len(paths)
            if self.budget < 0:
                raise _OverBudget
            paths = self.stmt(stmt, paths)
        return paths

    # ------------------------------------------------------------------------- statements

    def stmt(self, s: ast.stmt, paths: list[State]) -> list[State]:
        if isinstance(s, ast.If):
            for st in paths:
                self.expr(s.test, st)
            body = self.block(s.body, [st.copy() for st in paths])
            return self.merge(body + self.block(s.orelse, paths))
        if isinstance(s, ast.For | ast.AsyncFor | ast.While):
            return self.loop(s, paths)
        if isinstance(s, ast.Try | ast.TryStar):
            return self.try_(s, paths)
        if isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                self._scoped.add(id(item.context_expr))
                if isinstance(item.optional_vars, ast.Name):
                    self._into[id(item.context_expr)] = item.optional_vars.id
            for st in paths:
                for item in s.items:
                    self.expr(item.context_expr, st)
                    if item.optional_vars is not None:  # a partition's __enter__ is itself
                        moved = id(item.context_expr) in self.partitions
                        vals = value_of(item.context_expr, st) if moved else NO_VALS
                        self.bind(item.optional_vars, vals, NO_CALLEES, st, item.context_expr)
            return self.given_back(s, self.block(s.body, paths))
        if isinstance(s, ast.Match):
            return self.match(s, paths)
        if isinstance(s, ast.Return | ast.Raise):
            for st in paths:
                for child in ast.iter_child_nodes(s):
                    self.expr(child, st)
            return []
        if isinstance(s, ast.Break | ast.Continue):
            if self.loops:
                self.loops[-1][0 if isinstance(s, ast.Break) else 1].extend(paths)
            return []
        for st in paths:
            self.simple(s, st)
        return paths

    def given_back(self, s: ast.With | ast.AsyncWith, paths: list[State]) -> list[State]:
        """The paths out of a `with` block's end: the tensors its `with t.partition(...)` items
        moved are given back there (`Partition.__exit__`)."""
        ends = {
            (e.lineno, e.col_offset)
            for item in s.items
            if id(e := item.context_expr) in self.partitions
        }
        for st in paths if ends else ():
            for v, sites in list(st.moved.items()):
                left = frozenset(m for m in sites if (m.line, m.col) not in ends)
                if left:
                    st.moved[v] = left
                else:
                    del st.moved[v]
        return paths

    def loop(self, s: ast.For | ast.AsyncFor | ast.While, paths: list[State]) -> list[State]:
        if not isinstance(s, ast.While):
            for st in paths:
                self.expr(s.iter, st)
        # Without recording, a loop is a function of the paths that enter it: an inner loop is
        # walked again in each round of its outer loop's fixed point, often on the same paths.
        memo_key = (id(s), frozenset(st.key() for st in paths)) if not self.report else None
        if memo_key is not None and memo_key in self._loop_memo:
            return [st.copy() for st in self._loop_memo[memo_key]]
        exits = self._loop(s, paths)
        if memo_key is not None:
            self._loop_memo[memo_key] = [st.copy() for st in exits]
        return exits

    def _loop(self, s: ast.For | ast.AsyncFor | ast.While, paths: list[State]) -> list[State]:
        saved, self.report = self.report, False
        head = self.merge(st.copy() for st in paths)
        for _ in range(MAX_LOOP_ROUNDS):
            out, continues, _ = self.loop_body(s, head)
            grown = self.merge(head + out + continues)
            if {st.key() for st in grown} <= {st.key() for st in head}:
                break
            head = grown
        else:  # still growing: iterate on one joined state, which must converge
            joined = join_all(head)
            for _ in range(MAX_JOINED_ROUNDS):
                out, continues, _ = self.loop_body(s, [joined])
                bigger = join_all([joined, *out, *continues])
                if bigger.key() == joined.key():
                    break
                joined = bigger
            head = [joined]
        self.report = saved
        exits = [] if _runs_forever(s) else [st.copy() for st in head]
        _, _, breaks = self.loop_body(s, head)  # the recording walk
        return self.merge(self.block(s.orelse, exits) + breaks)

    def loop_body(
        self, s: ast.For | ast.AsyncFor | ast.While, head: list[State]
    ) -> tuple[list[State], list[State], list[State]]:
        """One iteration from each head state: (fall-through paths, continues, breaks)."""
        paths = [st.copy() for st in head]
        for st in paths:
            if isinstance(s, ast.While):
                self.expr(s.test, st)
            else:
                self.bind(s.target, NO_VALS, NO_CALLEES, st, s.target)
        self.loops.append(([], []))
        out = self.block(s.body, paths)
        breaks, continues = self.loops.pop()
        return out, continues, breaks

    def try_(self, s: ast.Try | ast.TryStar, paths: list[State]) -> list[State]:
        entry = [st.copy() for st in paths]
        body = self.block(s.body, paths)
        # An exception may leave the body at its start or its end (between: approximated).
        raised = self.merge([st.copy() for st in entry] + [st.copy() for st in body])
        handled: list[State] = []
        for handler in s.handlers:
            hpaths = [st.copy() for st in raised]
            for st in hpaths:
                self.expr(handler.type, st)
                if handler.name:
                    self.rebind(st, handler.name, self.fresh(st, handler), NO_CALLEES)
            handled += self.block(handler.body, hpaths)
        out = self.merge(self.block(s.orelse, body) + handled)
        if s.finalbody:
            if out:
                return self.block(s.finalbody, out)
            self.block(s.finalbody, raised)
        return out

    def match(self, s: ast.Match, paths: list[State]) -> list[State]:
        for st in paths:
            self.expr(s.subject, st)
        out: list[State] = []
        for case in s.cases:
            cpaths = [st.copy() for st in paths]
            for st in cpaths:
                for node in ast.walk(case.pattern):
                    name = getattr(node, "name", None) or getattr(node, "rest", None)
                    if isinstance(name, str):
                        self.rebind(st, name, self.fresh(st, node), NO_CALLEES)
                self.expr(case.guard, st)
            out += self.block(case.body, cpaths)
        return self.merge(out + paths)  # no case may match


def _runs_forever(s: ast.For | ast.AsyncFor | ast.While) -> bool:
    """`while True:` leaves only through `break` (or return/raise)."""
    return isinstance(s, ast.While) and isinstance(s.test, ast.Constant) and bool(s.test.value)
