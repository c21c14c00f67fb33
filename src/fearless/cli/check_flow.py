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

What names refer to, and how two arguments relate, is check_values.py.
The walk only records (`LaunchObs`, `UseObs`); check_report.py turns records into diagnostics.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .check_kernels import (
    ImportRef,
    KernelSig,
    Param,
    Resolver,
    attr_chain,
    decorator_track,
    import_bindings,
    kernel_sig,
)
from .check_values import (
    NO_CALLEES,
    NO_VALS,
    Callee,
    Callees,
    MoveSite,
    State,
    Vals,
    import_ref,
    join_all,
    reachable,
    relation_sets,
    renew,
    site_of,
    sites_in,
    value_of,
    widen,
)

MAX_PATHS = 8  # more paths than this through one scope are joined into one state
MAX_LOOP_ROUNDS = 8  # rounds over separate paths before a loop head is joined into one state
MAX_JOINED_ROUNDS = 32  # rounds on the joined state (a finite lattice: it converges before)
# Statement visits (one per path) one scope may take; past that it is walked again on one
# joined path, with BUDGET_JOINED; past that too, it is left unchecked (a generated monster).
BUDGET = 20_000
BUDGET_JOINED = 60_000


@dataclass
class LaunchObs:
    """A launch seen on `paths` paths; `rels[(i, j)]` lists the relation of arguments i and j
    on each path where they were related (indices into `args`)."""

    call: ast.Call
    kernel: KernelSig
    args: list[tuple[ast.expr, Param]]
    paths: int = 0
    rels: dict[tuple[int, int], list[str]] = field(default_factory=dict)


@dataclass
class UseObs:
    """A use of a name, seen on `paths` paths, of which `moved_paths` had its value moved."""

    node: ast.Name
    paths: int = 0
    moved_paths: int = 0
    sites: set[MoveSite] = field(default_factory=set)


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
    argument that is not a string, and the result stored in one name (`zp = z.partition(s)`),
    passed to a call (`add(z.partition(s), x)`) or dropped. `head, _, tail = s.partition(x)`
    and `s.partition(x)[0]` are string splits. A name bound to `tile.Spec(...)` describes an
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
        if isinstance(node, ast.Call):
            candidates = list(node.args)
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


class Walker:
    """Walks statements over paths (see the module docstring); records only when `report`."""

    def __init__(self, file: str, resolver: Resolver, partitions: set[int]) -> None:
        self.file = file
        self.resolver = resolver
        self.partitions = partitions  # the calls that move a tensor (`tensor_partitions`)
        self.report = True
        self.loops: list[tuple[list[State], list[State]]] = []  # (breaks, continues)
        self.pending: list[tuple[list[ast.stmt], list[str]]] = []
        self.launches: dict[tuple[int, KernelSig], LaunchObs] = {}
        self.uses: dict[int, UseObs] = {}
        self._into: dict[int, str] = {}  # `.partition(` call -> the name it is assigned to
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
            for st in paths:
                for item in s.items:
                    self.expr(item.context_expr, st)
                    if item.optional_vars is not None:
                        self.bind(item.optional_vars, NO_VALS, NO_CALLEES, st, item.context_expr)
            return self.block(s.body, paths)
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

    def simple(self, s: ast.stmt, st: State) -> None:
        """A statement that does not branch."""
        if isinstance(s, ast.Assign):
            self.assign(s.targets, s.value, st)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign([s.target], s.value, st)
        elif isinstance(s, ast.AugAssign):  # `x += y` updates x in place: a use, no rebinding
            if isinstance(s.target, ast.Name):
                self.use(s.target, st)
            else:
                self.expr(s.target, st)
            self.expr(s.value, st)
        elif isinstance(s, ast.Import | ast.ImportFrom):
            for name, ref in import_bindings(s, Path(self.file)):
                val = frozenset({(f"@{s.lineno}:{s.col_offset}:{name}",)})
                self.rebind(st, name, val, frozenset({("import", ref)}))
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            self.function_def(s, st)
        elif isinstance(s, ast.ClassDef):
            for base in s.bases:
                self.expr(base, st)
            self.rebind(st, s.name, self.fresh(st, s), NO_CALLEES)
            if self.report:
                self.pending.append((s.body, []))
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                if isinstance(target, ast.Name):
                    self.rebind(st, target.id, self.fresh(st, target), NO_CALLEES)
                else:
                    self.expr(target, st)
        else:  # Expr, Assert, Global, Nonlocal, Pass
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child, st)

    def assign(self, targets: list[ast.expr], value: ast.expr, st: State) -> None:
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            self._into[id(value)] = targets[0].id
        self.expr(value, st)
        renew(st, sites_in(value) | {site_of(value)})  # what `value` makes is new this time
        for target in targets:
            if (
                isinstance(target, ast.Tuple | ast.List)
                and isinstance(value, ast.Tuple | ast.List)
                and len(target.elts) == len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
            ):  # `a, b = b, a`: every right-hand value first, then the bindings
                pairs = [(value_of(v, st), self.callee(v, st), v) for v in value.elts]
                for elt, (vals, callees, site) in zip(target.elts, pairs, strict=True):
                    self.bind(elt, vals or self.fresh(st, site), callees, st, site)
                continue
            vals = value_of(value, st)
            if not vals and isinstance(target, ast.Name | ast.Attribute):
                vals = self.fresh(st, value)  # once: `x = y = fl.empty(n)` binds one object
            self.bind(target, vals, self.callee(value, st), st, value)

    def bind(
        self, target: ast.expr, vals: Vals, callees: Callees, st: State, site: ast.expr, i: int = 0
    ) -> None:
        if isinstance(target, ast.Name):
            self.rebind(st, target.id, vals or self.fresh(st, site, i), callees)
        elif isinstance(target, ast.Attribute) and attr_chain(target):
            self.expr(target.value, st)
            self.rebind(
                st, ".".join(attr_chain(target) or ()), vals or self.fresh(st, site, i), callees
            )
        elif isinstance(target, ast.Starred):
            self.bind(target.value, NO_VALS, NO_CALLEES, st, site, i)
        elif isinstance(target, ast.Tuple | ast.List):
            for j, elt in enumerate(target.elts):
                self.bind(elt, NO_VALS, NO_CALLEES, st, site, i * 64 + j + 1)
        else:  # a subscript or an attribute of a call result: the target's parts are uses
            self.expr(target, st)

    def rebind(self, st: State, key: str, vals: Vals, callees: Callees) -> None:
        prefix = key + "."
        for k in [k for k in st.chains if k.startswith(prefix)]:  # `self` rebound: `self.x` too
            st.chains.discard(k)
            st.vals.pop(k, None)
            st.callees.pop(k, None)
        if "." in key:
            st.chains.add(key)
        st.vals[key] = vals = widen(vals)
        st.callees[key] = callees
        st.made.update(c.lstrip("[(").rstrip("'") for v in vals for c in v if "@" in c)
        if st.moved:
            live = {v for vs in st.vals.values() for v in vs}
            for v in [v for v in st.moved if not reachable(v, st, live)]:
                del st.moved[v]  # no name can reach it any more

    def fresh(self, st: State, site: ast.AST, i: int = 0) -> Vals:
        """A new object made at `site`; an object made there before is renamed as older."""
        root = site_of(site, i)
        renew(st, {root})
        return frozenset({(root,)})

    def function_def(self, s: ast.FunctionDef | ast.AsyncFunctionDef, st: State) -> None:
        for default in (*s.args.defaults, *s.args.kw_defaults):
            self.expr(default, st)
        track = None
        for dec in s.decorator_list:
            track = track or decorator_track(dec, lambda name: import_ref(st, name))
        if track:  # a kernel: its body is device code, checked by the compiler
            sig = kernel_sig(s, track, self.file)
            self.rebind(st, s.name, self.fresh(st, s), frozenset({("kernel", sig)}))
            return
        self.rebind(st, s.name, self.fresh(st, s), NO_CALLEES)
        if self.report:
            a = s.args
            params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
            self.pending.append((s.body, params))

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

    # ------------------------------------------------------------------------ expressions

    def expr(self, e: ast.AST | None, st: State) -> None:
        """Evaluate `e` for its effects, in Python's order: uses, moves, launches."""
        if e is None or isinstance(e, ast.Lambda):  # a lambda's body runs later
            return
        if isinstance(e, ast.Name):
            if isinstance(e.ctx, ast.Load):
                self.use(e, st)
            return
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            self.comprehension(e, st)
            return
        if isinstance(e, ast.NamedExpr):
            self.expr(e.value, st)
            self.bind(e.target, value_of(e.value, st), self.callee(e.value, st), st, e.value)
            return
        for child in ast.iter_child_nodes(e):
            self.expr(child.value if isinstance(child, ast.keyword) else child, st)
        if isinstance(e, ast.Call):
            self.call(e, st)

    def comprehension(
        self, e: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, st: State
    ) -> None:
        """The first iterable runs in the scope; the rest in an inner one that binds the
        targets (so `[t for t in ts]` does not use an outer `t`)."""
        inner = st
        for i, gen in enumerate(e.generators):
            self.expr(gen.iter, inner)
            if i == 0:
                inner = st.copy()
            self.bind(gen.target, NO_VALS, NO_CALLEES, inner, gen.target)
            for cond in gen.ifs:
                self.expr(cond, inner)
        parts = (e.key, e.value) if isinstance(e, ast.DictComp) else (e.elt,)
        for part in parts:
            self.expr(part, inner)

    def use(self, node: ast.Name, st: State) -> None:
        if not self.report:
            return
        obs = self.uses.setdefault(id(node), UseObs(node))
        obs.paths += 1
        sites = frozenset().union(*(st.moved.get(v, frozenset()) for v in st.lookup(node.id)))
        if sites:
            obs.moved_paths += 1
            obs.sites |= sites

    def call(self, e: ast.Call, st: State) -> None:
        """After a call's parts ran: record it if it launches a kernel; apply a move or a
        give-back."""
        for kernel, args in self.launch_forms(e, st):
            self.record_launch(e, kernel, args, st)
        f = e.func
        if (
            id(e) in self.partitions
            and isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
        ):
            site = MoveSite(e.lineno, e.col_offset, f.value.id, self._into.get(id(e)))
            for v in st.lookup(f.value.id):
                st.moved[v] = st.moved.get(v, frozenset()) | {site}
        elif isinstance(f, ast.Attribute) and f.attr == "unpartition":
            for v in value_of(f.value, st):
                if v[-1] == "#part":
                    st.moved.pop(v[:-1], None)

    def launch_forms(self, e: ast.Call, st: State) -> list[tuple[KernelSig, list[ast.expr]]]:
        """The kernels this call launches, each with the arguments that go to its parameters."""
        out: list[tuple[KernelSig, list[ast.expr]]] = []
        for mode, what in self.callee(e.func, st):
            if not isinstance(what, KernelSig):
                continue
            if mode in ("configured", "prepared") or what.track == "tile":
                out.append((what, e.args))
            else:  # `k(prep, args...)`: the first argument is the PreparedLaunch
                out.append((what, e.args[1:]))
        if isinstance(e.func, ast.Attribute) and e.func.attr == "launch":
            for mode, what in self.callee(e.func.value, st):  # tile: `k.launch(grid, args...)`
                if mode == "kernel" and isinstance(what, KernelSig) and what.track == "tile":
                    out.append((what, e.args[1:]))
        return out

    def record_launch(
        self, e: ast.Call, kernel: KernelSig, args: list[ast.expr], st: State
    ) -> None:
        if not self.report:
            return
        obs = self.launches.get((id(e), kernel))
        if obs is None:
            aligned: list[tuple[ast.expr, Param]] = []
            for arg, param in zip(args, kernel.params, strict=False):
                if isinstance(arg, ast.Starred):
                    break  # positions after `*xs` are unknown
                if param.is_array:
                    aligned.append((arg, param))
            obs = self.launches[(id(e), kernel)] = LaunchObs(e, kernel, aligned)
        obs.paths += 1
        # A moved tensor passed along is E0382 already, not also an overlap with its partition.
        vals = [value_of(arg, st) - st.moved.keys() for arg, _ in obs.args]
        for i in range(len(obs.args)):
            for j in range(i + 1, len(obs.args)):
                if not (obs.args[i][1].is_output or obs.args[j][1].is_output):
                    continue
                rel = relation_sets(vals[i], vals[j])
                if rel:
                    obs.rels.setdefault((i, j), []).append(rel)

    # ---------------------------------------------------------------------- abstract values

    def callee(self, e: ast.expr, st: State) -> Callees:
        """What `e` is as a thing to call: a kernel, a configured or a prepared launch."""
        if isinstance(e, ast.Name | ast.Attribute):
            chain = attr_chain(e)
            if not chain:
                return NO_CALLEES
            key = ".".join(chain)
            if key in st.callees:
                return frozenset(self._resolved(st.callees[key], ()))
            if len(chain) == 1:
                return NO_CALLEES
            return frozenset(self._resolved(st.callees.get(chain[0], NO_CALLEES), chain[1:]))
        if isinstance(e, ast.Subscript):
            return frozenset(
                ("configured", k) for m, k in self.callee(e.value, st) if m == "kernel"
            )
        f = e.func if isinstance(e, ast.Call) else None
        if isinstance(f, ast.Attribute) and f.attr == "prepare":
            kernels = self.callee(f.value, st)
            return frozenset(("prepared", k) for m, k in kernels if m == "kernel")
        if isinstance(e, ast.NamedExpr):
            return self.callee(e.value, st)
        return NO_CALLEES

    def _resolved(self, callees: Callees, attrs: Sequence[str]) -> Iterable[Callee]:
        for mode, what in callees:
            if mode == "import" and isinstance(what, ImportRef):
                sig = self.resolver.resolve(what, attrs)
                if sig is not None:
                    yield ("kernel", sig)
            elif not attrs:
                yield (mode, what)


def _runs_forever(s: ast.For | ast.AsyncFor | ast.While) -> bool:
    """`while True:` leaves only through `break` (or return/raise)."""
    return isinstance(s, ast.While) and isinstance(s.test, ast.Constant) and bool(s.test.value)
