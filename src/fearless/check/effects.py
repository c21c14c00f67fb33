"""`fearless check`, the walk's effects on one path: what one statement or expression does to
one abstract `State`, and what it records.

A statement that does not branch (`Effects.simple`: assignments, imports, `def`, `class`,
`del`, expression statements) and every expression (`Effects.expr`, in Python's order of
evaluation) update one path's `State`: names are bound and rebound (a new object made at a
site renames the older one made there), `t.partition(shape)` moves `t`'s value and
`tp.unpartition()` gives it back. On the way, when `report` is on, a use of a name is recorded
with whether its value may have moved (`UseObs`), a call that launches a kernel with how each
pair of its array arguments relates (`LaunchObs`), and the bodies of functions and classes are
queued (`pending`) to be walked as scopes of their own.

flow.py drives these over paths and control flow (`Walker` extends `Effects`); what
names refer to, and how two arguments relate, is values.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .kernels import (
    ImportRef,
    KernelSig,
    Param,
    Resolver,
    attr_chain,
    decorator_track,
    import_bindings,
    kernel_sig,
)
from .values import (
    NO_CALLEES,
    NO_VALS,
    Callee,
    Callees,
    MoveSite,
    State,
    Vals,
    import_ref,
    reachable,
    relation_sets,
    renew,
    site_of,
    sites_in,
    value_of,
    widen,
)


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


class Effects:
    """What statements and expressions do on one path; records only when `report`."""

    def __init__(self, file: str, resolver: Resolver, partitions: set[int]) -> None:
        self.file = file
        self.resolver = resolver
        self.partitions = partitions  # the calls that move a tensor (`tensor_partitions`)
        self.report = True
        self.pending: list[tuple[list[ast.stmt], list[str]]] = []
        self.launches: dict[tuple[int, KernelSig], LaunchObs] = {}
        self.uses: dict[int, UseObs] = {}
        self._into: dict[int, str] = {}  # `.partition(` call -> the name it is assigned to
        self._scoped: set[int] = set()  # the `.partition(` calls that are `with` items
        self._lambda_bodies: dict[int, list[ast.stmt]] = {}  # lambda -> its body as a statement

    # ------------------------------------------------------------------------- statements

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
        made: Vals | None = None  # once: `x = y = fl.empty(n)` binds one object to both
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
                made = vals = made or self.fresh(st, value)
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

    def lambda_def(self, e: ast.Lambda, st: State) -> None:
        a = e.args
        for default in (*a.defaults, *a.kw_defaults):
            self.expr(default, st)
        if not self.report:
            return
        body = self._lambda_bodies.get(id(e))
        if body is None:
            body = self._lambda_bodies[id(e)] = [ast.copy_location(ast.Expr(e.body), e.body)]
        if any(pending is body for pending, _ in self.pending):
            return  # pending already (a lambda in a loop or on several paths)
        params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        self.pending.append((body, params))

    # ------------------------------------------------------------------------ expressions

    def expr(self, e: ast.AST | None, st: State) -> None:
        """Evaluate `e` for its effects, in Python's order: uses, moves, launches."""
        if e is None:
            return
        if isinstance(e, ast.Lambda):  # defaults run now; the body later, like a `def`'s
            self.lambda_def(e, st)
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
            site = MoveSite(
                e.lineno, e.col_offset, f.value.id, self._into.get(id(e)), id(e) in self._scoped
            )
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
            starred = False
            for arg, param in zip(args, kernel.params, strict=False):
                if isinstance(arg, ast.Starred):
                    starred = True
                    break  # positions after `*xs` are unknown
                if param.is_array:
                    aligned.append((arg, param))
            by_name = {p.name: p for p in kernel.params[len(args) :]} if not starred else {}
            for kw in e.keywords:  # `k[g, b](x, c=out)`: keywords go to the parameter named
                named = by_name.get(kw.arg or "")
                if named is not None and named.is_array:
                    aligned.append((kw.value, named))
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
