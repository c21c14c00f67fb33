"""Block-level safety on the kernel's CFG: barriers every thread reaches, shared memory phases.

Run on the kernel's IR right after lowering (`frontend.build_kernel_ir`), before the passes.

Uniformity (E0633). A value is *thread-dependent* when it comes from the thread's position
(`thread.index_1d/2d`, `thread.block_index_1d/2d`, `tid.*`, `laneid`), from memory (loads,
atomics: data differs between threads), from warp collectives, or from a thread-dependent
operand; scalar parameters, constants, `len`, `ctaid.*` / `ntid.*` / `nctaid.*`, the result of
`block.reduce` and what is computed from them alone are the same for every thread of a block.
A `cond_br` on a thread-dependent condition makes the blocks between it and its immediate
post-dominator *divergent* (a `return` leads to a virtual exit, so `if i >= n: return` makes
all that follows divergent), and the block arguments of those blocks and of the join
thread-dependent. Iterated to a fixed point. A barrier or collective in a divergent block is
refused: some threads of the block might not reach it, which hangs the GPU.

Phases (E0632). Between two barriers (a *phase*) threads of a block run in any order. For each
shared array a forward data-flow over the CFG tracks, since the last barrier on some path,
whether threads wrote their own slots, wrote other slots (only inside `simt.unsafe()`), or
read other threads' slots. Refused: reading another slot in a phase with writes (the owner may
be writing it), writing the own slot in a phase with reads of other slots (a reader may still
read it), any access in a phase with writes to other slots. A slot is the thread's own when the
index is `block_index_1d()` itself (or `s[t]` with `t = block_index_2d()`).

Atomics (`simt.atomic.*` on a shared array) may update any slot; in one phase a shared array
takes either atomics or plain reads and writes, never both (E0632, pointing at both lines),
because an atomic may hit the slot another thread reads or writes plainly, its own included.
So numba's per-block histogram is safe: zero the own slot, barrier, atomics at any bin,
barrier, read the own slot.

One case of plain writes and reads of other slots is proved race-free, the tree reduction step

    if j < k:
        s[j] = s[j] + s[j + k]

when every write of the phase stands under a guard `j < K` and every read of another slot is
at `j + K`, for one block-uniform value K: the written slots lie below K, the read ones at K or
above. A phase that runs around a loop's back edge without a barrier sees K change, so it
forgets K there. Accesses inside `simt.unsafe()` (the hook: `PassOptions.in_unsafe` over the
kernel's unsafe regions) raise nothing but still count for the others; `unsafe=True` kernels
skip both checks.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Location, SafetyError
from ..ir.analysis import dominators
from ..ir.core import ArrayType, Block, Effect, Function, Op, Value
from ..ir.simt import ops
from .passes.options import PassOptions

_THREAD_REGS = frozenset(("tid.x", "tid.y", "tid.z", "laneid"))
_BLOCK_REGS = frozenset(("ctaid.x", "ctaid.y", "ctaid.z"))
_SOURCES = (ops.ThreadIndex1D, ops.ThreadIndex2D, ops.BlockIndex1D, ops.BlockIndex2D)


def check_sync(fn: Function, in_unsafe: Callable[..., bool]) -> None:
    """Raise a SafetyError for the first barrier or shared access that is not safe."""
    has_barrier = any(isinstance(op, (ops.Barrier, *ops.COLLECTIVES)) for op in fn.ops())
    has_shared = any(isinstance(op, ops.SharedAlloc) for op in fn.ops())
    if has_barrier:
        _check_barriers(fn)
    if has_shared:
        _check_phases(fn, in_unsafe)


# --------------------------------------------------------------------------- uniformity


def _post_dominators(fn: Function, order: list[Block]) -> dict[Block, set[Block | None]]:
    """Post-dominator sets; None stands for the virtual exit every `return` leads to."""
    everything: set[Block | None] = {*order, None}
    pdom: dict[Block, set[Block | None]] = {b: set(everything) for b in order}
    changed = True
    while changed:
        changed = False
        for b in reversed(order):
            succ = b.successors()
            if not succ:
                new: set[Block | None] = {b, None}
            else:
                new = set.intersection(*(pdom[s] for s in succ)) | {b}
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    return pdom


def _ipdom(b: Block, pdom: dict[Block, set[Block | None]]) -> Block | None:
    strict = pdom[b] - {b}
    for c in strict:  # the strict post-dominator that every other one post-dominates
        if c is None:
            if strict == {None}:
                return None
            continue
        if all(d in pdom[c] for d in strict):
            return c
    return None


def divergence(fn: Function, grid: bool = False) -> tuple[dict[Block, Op], set[Value]]:
    """The divergent blocks (each with the thread-dependent branch that makes it so) and the
    thread-dependent values. With `grid`, uniform means the same for every thread of the grid
    (`grid_check.py`): `ctaid.*` and `block.reduce` then differ too."""
    regs = _THREAD_REGS | _BLOCK_REGS if grid else _THREAD_REGS
    order = fn.reverse_postorder()
    pdom = _post_dominators(fn, order)
    varying: set[Value] = set()
    divergent: dict[Block, Op] = {}
    changed = True
    while changed:
        changed = False
        for b in order:
            for op in b.ops:
                if not op.results or op.results[0] in varying:
                    continue
                if type(op) is ops.BlockReduce and not grid:
                    continue  # (a block reduction gives every thread of the block one value)
                source = (
                    isinstance(op, _SOURCES)
                    or (isinstance(op, ops.SpecialReg) and op.reg in regs)
                    or op.effect in (Effect.READ, Effect.WRITE)
                )
                if source or any(v in varying for v in op.operands):
                    varying.update(op.results)
                    changed = True
            term = b.terminator
            for s in b.successors():
                if isinstance(term, ops.Br | ops.CondBr):
                    for a, p in zip(ops.branch_args(term, s), s.args, strict=True):
                        if a in varying and p not in varying:
                            varying.add(p)
                            changed = True
            if isinstance(term, ops.CondBr) and term.cond in varying:
                join = _ipdom(b, pdom)
                region = _region(b, join)
                for r in region:
                    if r not in divergent:
                        divergent[r] = term
                        changed = True
                for r in [*region, *([join] if join is not None else [])]:
                    new = [a for a in r.args if a not in varying]
                    if new:
                        varying.update(new)
                        changed = True
    return divergent, varying


def _region(branch: Block, join: Block | None) -> set[Block]:
    """The blocks reachable from `branch`'s successors without passing `join`."""
    seen: set[Block] = set()
    work = list(branch.successors())
    while work:
        b = work.pop()
        if b is join or b in seen:
            continue
        seen.add(b)
        work.extend(b.successors())
    return seen


def _check_barriers(fn: Function) -> None:
    divergent, _ = divergence(fn)
    for b in fn.reverse_postorder():
        for op in b.ops:
            if isinstance(op, (ops.Barrier, *ops.COLLECTIVES)) and b in divergent:
                raise not_uniform(f"`{user_name(op)}`", op, divergent[b])


def user_name(op: Op) -> str:
    """The call a barrier or collective op came from, as the user wrote it."""
    if isinstance(op, ops.Barrier):
        return "simt.syncthreads()"
    if isinstance(op, ops.WarpShuffle):
        return {"idx": "simt.warp.shfl", "down": "simt.warp.shfl_down"}.get(
            op.attrs["mode"], "simt.warp.shfl_xor"
        )
    if isinstance(op, ops.WarpVote):
        return f"simt.warp.{op.attrs['kind']}"
    return f"simt.{op.opname}"


def not_uniform(what: str, op: Op, branch: Op) -> SafetyError:
    """E0633: a barrier or collective that some threads of the block might not reach."""
    where = branch.loc
    return SafetyError(
        f"{what} under control flow that depends on the thread",
        op.loc,
        code="E0633",
        label="not every thread of the block may get here",
        notes=[
            f"the branch at line {where.line} depends on the thread's index or on loaded "
            "data (an early `return` counts too), so threads of one block may take "
            "different paths; a barrier that some of them skip hangs the GPU"
        ],
        help="move it where every thread of the block arrives: out of the `if` (guard only "
        "the memory accesses, e.g. `if i < n: s[j] = x[i]`), or branch on values that are "
        "the same for the whole block (scalar parameters, `len(...)`, `simt.blockIdx`, "
        "loop counters)",
    )


# ------------------------------------------------------------------------------- phases


def _is_own(indices: list[Value]) -> bool:
    """Whether the indices are the thread's own slot: `block_index_1d()` or `block_index_2d()`
    (with a step too)."""
    if len(indices) == 2:
        axes = [v.owner for v in indices]
        return (
            all(isinstance(a, ops.ThreadIndexAxis) for a in axes)
            and [a.axis for a in axes] == [0, 1]  # type: ignore[union-attr]
            and axes[0].operands[0] is axes[1].operands[0]  # type: ignore[union-attr]
            and isinstance(axes[0].operands[0].owner, ops.BlockIndex2D | ops.BlockTileRow)  # type: ignore[union-attr]
        )
    return ops.block_thread_index(indices[0]) is not None


def _shared(op: Op) -> Value | None:
    if isinstance(op, ops.Load | ops.Store | ops.AtomicRMW | ops.AtomicCAS):
        arr = op.operands[0]
        if isinstance(arr.type, ArrayType) and arr.type.shared is not None:
            return arr
    return None


# Per shared array and phase: (writes, reads of other slots, writes of other slots, the first
# atomic, the first plain access). Writes are None (none), a uniform value K (each under a
# guard `j < K`) or ANY; reads are None, K (each at `j + K`) or ANY. Writes below K and reads at
# K or above never meet: the tree reduction step. Atomics and plain accesses never share a
# phase: an atomic may hit any slot, the thread's own included.
ANY = object()
Phase = tuple[object, object, bool, Op | None, Op | None]
_EMPTY: Phase = (None, None, False, None, None)


def _join(a: object, b: object) -> object:
    return a if b is None or a is b else b if a is None else ANY


def _join_phase(p: Phase, q: Phase) -> Phase:
    return _join(p[0], q[0]), _join(p[1], q[1]), p[2] or q[2], p[3] or q[3], p[4] or q[4]


def _widen(k: object) -> object:
    return None if k is None else ANY


def _disjoint(w: object, r: object) -> bool:
    """Writes and reads of other slots in one phase: race-free when one is absent, or when the
    writes are below K and the reads at j + K for one uniform K."""
    return w is None or r is None or (w is r and w is not ANY)


class _Phases:
    def __init__(self, fn: Function, in_unsafe: Callable[..., bool]) -> None:
        self.fn, self.in_unsafe = fn, in_unsafe
        _, self.varying = divergence(fn)
        self.doms = dominators(fn)
        self.preds = fn.predecessors()

    def run(self) -> None:
        order = self.fn.reverse_postorder()
        state_in: dict[Block, dict[Value, Phase]] = {b: {} for b in order}
        out: dict[Block, dict[Value, Phase]] = {}
        changed = True
        while changed:
            changed = False
            for b in order:
                s: dict[Value, Phase] = {}
                for p in self.preds.get(b, ()):
                    back = b in self.doms[p]  # a phase across a back edge sees K change
                    for arr, ph in out.get(p, {}).items():
                        if back:
                            ph = (_widen(ph[0]), _widen(ph[1]), *ph[2:])
                        s[arr] = _join_phase(s.get(arr, _EMPTY), ph)
                state_in[b] = s
                new = self.transfer(b, dict(s), check=False)
                if out.get(b) != new:
                    out[b] = new
                    changed = True
        for b in order:
            self.transfer(b, dict(state_in[b]), check=True)

    def transfer(self, b: Block, s: dict[Value, Phase], check: bool) -> dict[Value, Phase]:
        for op in b.ops:
            if isinstance(op, ops.Barrier):
                s.clear()
                continue
            arr = _shared(op)
            if arr is None:
                continue
            w, r, x, atomic, plain = s.get(arr, _EMPTY)
            if isinstance(op, ops.AtomicRMW | ops.AtomicCAS):
                if check and plain is not None and not self.in_unsafe(op.loc):
                    raise _mixed(op, plain, arr)
                s[arr] = (w, r, x, atomic or op, plain)
                continue
            if check and atomic is not None and not self.in_unsafe(op.loc):
                raise _mixed(op, atomic, arr)
            plain = plain or op
            indices = op.indices  # type: ignore[attr-defined]
            own = _is_own(indices)
            write = isinstance(op, ops.Store)
            if write and own:
                w = _join(w, self.guard(b))
                ok = not x and _disjoint(w, r)
            elif write:
                x, ok = True, True  # inside `simt.unsafe()`: counted, never refused itself
            elif own:
                ok = not x
            else:
                r = _join(r, self.offset(indices))
                ok = not x and _disjoint(w, r)
            if check and not ok and not self.in_unsafe(op.loc):
                raise _race(op, arr, write)
            s[arr] = (w, r, x, atomic, plain)
        return s

    def uniform(self, v: Value) -> bool:
        return v not in self.varying

    def guard(self, b: Block) -> object:
        """K when `b` runs only on the true edge of `if j < K` (K uniform), else ANY."""
        for d in self.doms[b]:
            preds = self.preds.get(d, [])
            term = preds[0].terminator if len(preds) == 1 else None
            if not (isinstance(term, ops.CondBr) and term.if_true is d and term.if_false is not d):
                continue
            cmp = term.cond.owner
            if isinstance(cmp, ops.Compare) and cmp.pred in ("lt", "gt"):
                j, k = cmp.operands if cmp.pred == "lt" else reversed(cmp.operands)
                if _is_own([j]) and self.uniform(k):
                    return k
        return ANY

    def offset(self, indices: list[Value]) -> object:
        """K when the index is `j + K` (K uniform), else ANY."""
        add = indices[0].owner if len(indices) == 1 else None
        if isinstance(add, ops.Binary) and add.kind == "add":
            for a, k in (add.operands, reversed(add.operands)):
                if _is_own([a]) and self.uniform(k):
                    return k
        return ANY


def _check_phases(fn: Function, in_unsafe: Callable[..., bool]) -> None:
    _Phases(fn, in_unsafe).run()


def _race(op: Op, arr: Value, write: bool) -> SafetyError:
    name = arr.name or "the shared array"
    if write:
        msg = f"`{name}` is written while other threads of the block may still read this slot"
        note = "an earlier read of another thread's slot, with no barrier since, is in this phase"
    else:
        msg = f"`{name}` is read at another thread's slot before a barrier"
        note = "a write to this shared array, with no barrier since, is in the same phase"
    return SafetyError(
        msg,
        op.loc,
        code="E0632",
        label="races with another thread of the block",
        notes=[note],
        help="put `simt.syncthreads()` between the writes and the reads of other slots (each "
        "phase between two barriers either writes own slots or reads others'), combine "
        'values with `simt.block.reduce(v, "sum")`, or do it inside `with simt.unsafe():`',
    )


def _mixed(op: Op, other: Op, arr: Value) -> SafetyError:
    """E0632: an atomic and a plain read or write of one shared array in one phase."""
    name = arr.name or "the shared array"
    atomic = isinstance(op, ops.AtomicRMW | ops.AtomicCAS)
    verb = "read" if isinstance(other if atomic else op, ops.Load) else "written"
    if atomic:
        msg = f"`{name}` takes an atomic in a phase where it is also {verb} plainly"
        label = "an atomic update"
        note = f"`{name}` is {verb} without an atomic at line {other.loc.line}, with no barrier between"
    else:
        msg = f"`{name}` is {verb} plainly in a phase where it takes atomics"
        label = f"a plain {'read' if verb == 'read' else 'write'}"
        note = f"`{name}` is updated by an atomic at line {other.loc.line}, with no barrier between"
    return SafetyError(
        msg,
        op.loc,
        code="E0632",
        label=label,
        notes=[
            note,
            "an atomic may update any slot, this thread's own included, while other threads "
            "of the block read or write it",
        ],
        help=f"put `simt.syncthreads()` between the plain accesses of `{name}` and its "
        "atomics (each phase between two barriers either takes atomics or plain reads and "
        "writes), or do it inside `with simt.unsafe():`",
    )


def in_unsafe_regions(regions: tuple[Location, ...]) -> Callable[[Location], bool]:
    """The `simt.unsafe()` hook: whether a location lies in one of the kernel's regions."""
    return PassOptions(unsafe_regions=regions).in_unsafe
