"""`fearless check`, the abstract values: what a host-code name may refer to, per path.

A `Val` is a path that names an object: its root is a name the scope did not bind (a parameter,
a global: distinct names are assumed to be distinct objects) or the position `@L:C` of the
expression that made a new object, then how it was derived: `.attr`, `[@L:C` (a subscript at
L:C), `(@L:C` (a call that may return a view), `#part` (the partition of it). Re-running an
allocation site (in a loop) renames the older object's root to `@L:C'`, so last iteration's
buffer is not this iteration's. `relation` says what two values mean for a launch:

    b = a          -> a: (a,)  b: (a,)                "same": one array passed twice
    v = a[0:10]    -> v: (a, [@3:4)                   "overlap" with (a,): a view of it
    a.T, a.x       -> (a, .T), (a, .x)                `a.T` overlaps `a`; `self.x`, `self.y` do not

A `State` holds, for one path, the values of names and attribute chains (`self.buf`), what names
are as callees (a kernel, `k[grid, block]`, `k.prepare(...)`, or an import to resolve lazily),
and which values moved into a partition, with where.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from .kernels import ImportRef, KernelSig, attr_chain

Val = tuple[str, ...]
Vals = frozenset[Val]
# ("kernel" | "configured" | "prepared", KernelSig), or ("import", ImportRef) resolved lazily.
Callee = tuple[str, KernelSig | ImportRef]
Callees = frozenset[Callee]
NO_VALS: Vals = frozenset()
NO_CALLEES: Callees = frozenset()
# Bounds that make loops converge: `x = x[1:]` in a loop derives a value from the last one.
MAX_DEPTH = 6  # derivation steps kept; deeper ones are summarised as the view "[*"
MAX_VALS = 32  # values one name may refer to; past that, each is summarised as a view of its root


# `fl.asarray(x)` wraps `x` without copying (DESIGN section 2): the same array.
SAME_ARRAY_FUNCS = frozenset({"asarray", "as_tensor", "from_numpy", "from_dlpack"})
# Functions and methods that may return a view of their first argument / their receiver.
VIEW_FUNCS = frozenset(
    {"ascontiguousarray", "reshape", "ravel", "transpose", "squeeze", "expand_dims",
     "broadcast_to", "swapaxes", "moveaxis", "atleast_1d", "atleast_2d", "narrow", "permute"}
)  # fmt: skip
VIEW_METHODS = frozenset(
    {"view", "view_as", "reshape", "ravel", "transpose", "permute", "squeeze", "unsqueeze",
     "expand", "expand_as", "narrow", "swapaxes", "swapdims", "movedim", "unflatten",
     "as_strided", "diagonal", "unfold", "contiguous", "detach", "numpy"}
)  # fmt: skip


@dataclass(frozen=True)
class MoveSite:
    """Where a tensor moved: the `.partition(` call, the name it moved through, the name the
    partition was stored in (None when it was not stored), and whether the call is a `with`
    item (`with t.partition(s) as tp:`, whose block's end gives the tensor back)."""

    line: int
    col: int
    name: str
    into: str | None
    scoped: bool = False


@dataclass
class State:
    """One path's view of a scope (see the module docstring)."""

    vals: dict[str, Vals] = field(default_factory=dict)
    callees: dict[str, Callees] = field(default_factory=dict)
    moved: dict[Val, frozenset[MoveSite]] = field(default_factory=dict)
    # Bookkeeping that only makes updates cheaper: the attribute-chain keys bound, and every
    # site (`@L:C`) some value mentions, so that `renew` skips states it cannot change.
    chains: set[str] = field(default_factory=set)
    made: set[str] = field(default_factory=set)

    def copy(self) -> State:
        return State(
            dict(self.vals), dict(self.callees), dict(self.moved), set(self.chains), set(self.made)
        )

    def key(self) -> tuple[frozenset[object], ...]:
        return (
            frozenset(self.vals.items()),
            frozenset(self.callees.items()),
            frozenset(self.moved.items()),
        )

    def lookup(self, key: str) -> Vals:
        """What a name or attribute chain (`self.buf`) refers to."""
        if key in self.vals:
            return self.vals[key]
        head, dot, last = key.rpartition(".")
        if not dot:
            return frozenset({(key,)})
        return frozenset((*v, "." + last) for v in self.lookup(head))


def join_all(states: Sequence[State]) -> State:
    """One state that allows everything any of `states` allows (a name refers to any value it
    refers to on some path; a value is moved if it is moved on some path)."""
    out = State()
    for key in {k for st in states for k in st.vals}:
        out.vals[key] = widen(frozenset().union(*(st.lookup(key) for st in states)))
    for key in {k for st in states for k in st.callees}:
        out.callees[key] = frozenset().union(*(st.callees.get(key, NO_CALLEES) for st in states))
    for val in {v for st in states for v in st.moved}:
        out.moved[val] = frozenset().union(*(st.moved.get(val, frozenset()) for st in states))
    out.chains = set().union(*(st.chains for st in states))
    out.made = set().union(*(st.made for st in states))
    return out


def relation(x: Val, y: Val) -> str | None:
    """How two values relate: "same" (one object), "overlap" (one derives from the other, or
    both from one object through a subscript or view) or None (different roots or attributes)."""
    if x == y:
        return "same"
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    if n == 0:
        return None
    if n == len(x) or n == len(y) or x[n][0] in "[(#" or y[n][0] in "[(#":
        return "overlap"
    return None


def relation_sets(xs: Vals, ys: Vals) -> str | None:
    """The relation of two arguments on one path: "same" only when both are one known object;
    "maybe" when they may be the same object (joined paths, or an older loop iteration's)."""
    if not xs or not ys:
        return None
    if len(xs) == 1 and xs == ys:
        (v,) = xs
        return "maybe" if is_summary(v) else "same"
    if xs & ys:
        return "maybe"
    if any(relation(x, y) for x in xs for y in ys):
        return "overlap"
    return None


def value_of(e: ast.expr, st: State) -> Vals:
    """What `e` refers to, as far as aliasing goes; empty when it makes a new object or is
    not an array at all."""
    if isinstance(e, ast.Name):
        return st.lookup(e.id)
    if isinstance(e, ast.Attribute):
        chain = attr_chain(e)
        if chain and ".".join(chain) in st.vals:
            return st.vals[".".join(chain)]
        return frozenset((*v, "." + e.attr) for v in value_of(e.value, st))
    if isinstance(e, ast.Subscript):
        return _derive(value_of(e.value, st), "[", e)
    if isinstance(e, ast.NamedExpr):
        return value_of(e.value, st)
    if isinstance(e, ast.IfExp):
        return value_of(e.body, st) | value_of(e.orelse, st)
    if not isinstance(e, ast.Call):
        return NO_VALS
    f = e.func
    if isinstance(f, ast.Attribute) and f.attr == "partition":
        return frozenset(extend(v, "#part") for v in value_of(f.value, st))
    if isinstance(f, ast.Attribute) and f.attr == "unpartition":
        return frozenset(v[:-1] for v in value_of(f.value, st) if v[-1] == "#part")
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    module_call = isinstance(f, ast.Name) or (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and import_ref(st, f.value.id) is not None
    )
    if module_call and e.args and name in SAME_ARRAY_FUNCS:
        return value_of(e.args[0], st)
    if module_call and e.args and name in VIEW_FUNCS:
        return _derive(value_of(e.args[0], st), "(", e)
    if isinstance(f, ast.Attribute) and not module_call and name in VIEW_METHODS:
        return _derive(value_of(f.value, st), "(", e)
    return NO_VALS


def import_ref(st: State, name: str) -> ImportRef | None:
    """The import that bound `name` on this path, if an import did (and nothing else may have)."""
    callees = st.callees.get(name, NO_CALLEES)
    if len(callees) == 1:
        ((mode, what),) = callees
        if mode == "import" and isinstance(what, ImportRef):
            return what
    return None


def reachable(v: Val, st: State, held: set[Val]) -> bool:
    """Whether a name can still refer to `v`: some name holds it (`held`: every value held), or
    it is what a name the scope has not bound refers to (a parameter, a global)."""
    return v in held or (len(v) == 1 and not v[0].startswith("@") and v[0] not in st.vals)


def site_of(node: ast.AST, i: int = 0) -> str:
    """The name of the object an expression makes: `@line:col`, `#i` for the i-th of a tuple."""
    site = f"@{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0)}"
    return f"{site}#{i}" if i else site


def sites_in(e: ast.expr) -> set[str]:
    """The sites of the objects evaluating `e` may make (subscripts and calls in it)."""
    return {site_of(n) for n in ast.walk(e) if isinstance(n, ast.Subscript | ast.Call)}


def renew(st: State, sites: set[str]) -> None:
    """Objects made at `sites` are about to be made again: rename the ones that exist to their
    older selves (`@3:4` -> `@3:4'`, `[@3:4` -> `[@3:4'`), which are not the new ones."""

    def older(v: Val) -> Val:
        out: list[str] = []
        for c in v:
            c = c + "'" if c.lstrip("[(") in sites else c
            if not out or c != out[-1]:  # `x = x[1:]` again and again: one older view
                out.append(c)
        return tuple(out)

    if not sites & st.made:
        return

    def touched(v: Val) -> bool:
        return any(c.lstrip("[(") in sites for c in v)

    for key, vals in st.vals.items():
        if any(touched(v) for v in vals):
            st.vals[key] = frozenset(older(v) for v in vals)
    for v in [v for v in st.moved if touched(v)]:
        moved = st.moved.pop(v)
        st.moved[older(v)] = st.moved.get(older(v), frozenset()) | moved


def extend(v: Val, step: str) -> Val:
    """`v` derived one step further; past MAX_DEPTH steps, a summary view of it."""
    if len(v) > MAX_DEPTH:
        return (*v[:MAX_DEPTH], "[*")
    return (*v, step)


def widen(vals: Vals) -> Vals:
    """At most about MAX_VALS values: past that, each becomes a summary view of its root."""
    if len(vals) <= MAX_VALS:
        return vals
    return frozenset((v[0], "[*") if len(v) > 1 else v for v in vals)


def is_summary(v: Val) -> bool:
    """Whether `v` stands for several objects (older ones of a loop, or a summarised view):
    two arguments that are both `v` may, not must, be the same array."""
    return any(c.endswith("'") or c == "[*" for c in v)


def _derive(vals: Vals, how: str, at: ast.expr) -> Vals:
    return frozenset(extend(v, f"{how}{site_of(at)}") for v in vals)
