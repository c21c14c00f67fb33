"""The warm path of fearless.ops: a call whose arguments read the same cheap facts as an earlier
one does again what that one launched, without the Python that decided it.

An operator's Python (checks, the autotuner's choice, views, partitions, the warm path of each
Tile launch) costs tens of microseconds per call on the GPU, more than the kernel of a small
tensor. What it decides depends on its arguments only through a few facts, which `replayable`
reads on every call into a key:

    a torch.Tensor  its shape, dtype, device, contiguity and pointer mod 16 (what the slow path
    or a module's   checks and what a kernel's alignment is compiled for); its pointer itself
    nn.Parameter    is where the replayed launches read
    an fl.Tensor    on the GPU and not moved: its shape, dtype and pointer mod 16
    None, a bool, int, float or str, a tuple or list of those, a torch.dtype or fearless DType
                    its type and value
    a tuple or list of tensors (group_gemm's As and Bs)
                    its type, length and each tensor's facts as above
    a `dynamic` int argument (dropout's seed)
                    only whether it is given: its value goes into the launches as it is
    and the target `fl.set_target` or FEARLESS_TARGET names.

Anything else (a NumPy array, a tensor on the simulator, a tensor subclass other than
nn.Parameter, a list mixing tensors and scalars, an input that requires grad while grad is enabled, a call
while torch.compile traces or while its thread has a compile-ahead pass open:
autotune_ahead.compile_ahead_of, whose launches must not run)
takes the slow path every time, and a call in a pass leaves no mark of its key. The first call
with a key takes it while runtime/trace.py records what it launched and allocated (where it
tuned or compiled ahead, which only a first call does, the next call records instead); every
later one replays that record: the same allocations made again (torch's allocator: one
`torch.empty` per output), the same prepared launches (runtime/dispatch.py) with each pointer moved from the
recorded call's tensors to this call's, new random seeds where the recorded call drew them,
and the same result structure, in this call's tensors. Where the operator said so
(runtime/trace.py), a replay also launches on a buffer the operator keeps between calls as it
is, and runs its host steps again (flash_attn_with_kvcache's registration of the check of its
block table, with this call's table and lengths).

Why a replay is the slow path's launch: every check the slow path made passed for the
recorded arguments and depends on the key alone; its outputs are new allocations, which alias
nothing; the kernels it chose depend on the key alone. A recorded call that did anything a
replay would skip (a dtype conversion, a contiguous copy, an allocation outside torch, no
launch at all, or inputs that overlap so a pointer's owner is ambiguous) is never replayed:
its key takes the slow path from then on. Recording at the first call matters where a key
changes often: a decode step's attention sees a KV cache one token longer than the last
step's, so its first layer records and every later layer of that step replays. A replay skips `Kernel.__call__`,
and with it the check that recompiles a kernel whose module globals changed: the operators'
kernels read only their own modules' constants.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import config
from ..crash import raise_clean
from ..dtypes import DType
from ..errors import FearlessError
from ..runtime import streams, trace
from ..runtime.streams import keep_if_captured
from ..runtime.tensor import Tensor
from ..tile.compile_ahead import STATE as AHEAD
from ._arguments import call_error
from ._route import raise_refused

F = TypeVar("F", bound=Callable[..., Any])

# Keys kept per operator: a program that makes new shapes without end starts over.
MAX_PLANS = 512
_SCALARS = (type(None), bool, int, float, str)
_I64 = (-(2**63), 2**63)

# What a launch value is, in a plan: a constant, a pointer (buffer, offset), a seed drawn anew,
# or a dynamic argument's value.
CONST, POINTER, SEED, DYNAMIC = range(4)
Source = tuple[int, Any, int]


@dataclass(frozen=True, slots=True)
class Plan:
    """A recorded call as its generated replay (`_compile`): `run(tensors, ptrs, values)`
    makes the allocations again, checks their alignment, draws the seeds, launches and returns
    the result; `source` is its text."""

    run: Callable[[list[Any], list[int], list[Any]], Any]
    source: str


@dataclass(frozen=True, slots=True)
class Never:
    """A key whose call is not replayed, and why (for tests and `explain`)."""

    why: str


_AGAIN = Never("its first call tuned or compiled ahead: the next call records")


def replayable(dynamic: Sequence[str] = ()) -> Callable[[F], F]:
    """Give operator `fn` the warm path above. `dynamic` names int arguments the kernels take
    as they are (never in a check or a choice): their value is not in the key."""

    def decorate(fn: F) -> F:
        params = list(inspect.signature(fn).parameters)
        dyn = tuple((params.index(name), name) for name in dynamic)
        plans: dict[Any, Plan | Never] = {}

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:  # free until something raises; then a fearless error loses fearless's frames
                torch = sys.modules.get("torch")
                if torch is None or torch.compiler.is_compiling() or _in_pass():
                    return fn(*args, **kwargs)  # in a compile-ahead pass: launch, see nothing
                try:
                    found = _key(torch, args, kwargs, dyn)
                except RuntimeError:  # a tensor without storage (vmap's BatchedTensor): no
                    found = None  # pointer to key on, the dispatcher's path takes it
                if found is None:
                    return fn(*args, **kwargs)
                key, tensors, ptrs, values = found
                plan = plans.get(key)
                # a replay or a record inside this thread's recording would hide its launches
                # from it; another thread's recording (a first call compiling for seconds) is
                # no bar
                inside = trace.recording and trace.current() is not None
                if type(plan) is Plan and not inside:
                    out = plan.run(tensors, ptrs, values)
                    if out is not _MISS:
                        return out
                    return fn(*args, **kwargs)
                if inside or (plan is not None and plan is not _AGAIN):
                    return fn(*args, **kwargs)  # never replayed, or inside another's recording
                if plan is None and len(plans) >= MAX_PLANS:
                    plans.clear()
                with trace.record() as rec:
                    out = fn(*args, **kwargs)
                if rec.refused is not None and not rec.lasting:
                    # only a first call tuned or compiled ahead: the next call records
                    plans[key] = _AGAIN
                else:
                    plans[key] = _plan(rec, out, ptrs, tensors, values)
                return out
            except FearlessError as exc:
                raise_clean(exc)
            except RuntimeError as exc:  # torch's dispatcher refusing an argument, say so
                raise_refused(exc)
            except TypeError:  # a missing argument, an unknown keyword: the signature says so
                if (wrong := call_error(fn, args, kwargs)) is None:
                    raise  # from inside the operator, not the call's arguments
                raise_clean(wrong)

        call.plans = plans  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


_MISS = object()


def _in_pass() -> bool:
    """Whether this thread has a compile-ahead pass open (its launches queue compiles and run
    nothing); another thread's pass leaves this one's calls as they are."""
    owner = AHEAD.thread
    return owner is not None and owner == threading.get_ident()


def _key(
    torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dyn: tuple[tuple[int, str], ...]
) -> tuple[Any, list[Any], list[int], list[Any]] | None:
    """(key, the tensor arguments in order, their pointers, the dynamic values) of a call, or
    None for the slow path."""
    plain = torch.Tensor
    parts: list[Any] = [config.target_override(), len(args)]
    tensors: list[Any] = []
    ptrs: list[int] = []
    values: list[Any] = []
    skip: tuple[int, ...] = ()
    if dyn:
        skip = tuple(i for i, _ in dyn)
        for i, name in dyn:
            v = args[i] if i < len(args) else kwargs.get(name)
            if v is not None and (type(v) is not int or not _I64[0] <= v < _I64[1]):
                return None
            values.append(v)
            parts.append(v is None)
    read = _torch_reader()
    grad = torch.is_grad_enabled()
    for i, a in enumerate(args):
        tp = type(a)
        if tp is plain and not (grad and a.requires_grad):  # the common cases, inline
            ptr, part = read(a)
            parts.append(part)
            tensors.append(a)
            ptrs.append(ptr)
        elif i in skip:
            continue
        elif tp in _SCALARS:
            parts.append((tp, a))
        elif not _part(torch, plain, a, parts, tensors, ptrs):
            return None
    for name, a in kwargs.items():
        if skip and any(name == n for _, n in dyn):
            continue
        parts.append(name)
        if not _part(torch, plain, a, parts, tensors, ptrs):
            return None
    return tuple(parts), tensors, ptrs, values


def _accessors(a: Any) -> tuple[int, Any]:
    """(pointer, key part) of a plain torch tensor through its accessors."""
    ptr = a.data_ptr()
    return ptr, (a.shape, a.dtype, a.get_device(), a.is_contiguous(), ptr & 15)


def _dlpack_or_accessors(a: Any) -> tuple[int, Any]:
    """(pointer, key part) of a plain torch tensor in one call of DLPack's C exchange API
    (claunch.c's torch_key: shape, dtype, device, contiguity, pointer mod 16), else through its
    accessors. Both forms tell apart what the other does; a tensor read one way never shares a
    key with one read the other way, so at worst a call misses."""
    found = _torch_key(a)
    return found if found is not None else _accessors(a)


_torch_key: Any = None
_reader: Callable[[Any], tuple[int, Any]] | None = None


def _torch_reader() -> Callable[[Any], tuple[int, Any]]:
    """The reader of plain torch tensors: DLPack's where the compiled launcher is built."""
    global _reader, _torch_key
    if _reader is None:
        from ..runtime import claunch

        module = claunch.module() if config.compiled_launcher_enabled() else None
        _torch_key = getattr(module, "torch_key", None)
        _reader = _dlpack_or_accessors if _torch_key is not None else _accessors
    return _reader


def _part(
    torch: Any, plain: type, a: Any, parts: list[Any], tensors: list[Any], ptrs: list[int]
) -> bool:
    tp = type(a)
    if tp is plain or tp is torch.nn.Parameter:  # a module's weight, read as a plain tensor
        if a.requires_grad and torch.is_grad_enabled():
            return False  # autograd records it: the dispatcher's path
        ptr, part = _torch_reader()(a)
        parts.append(part)
        tensors.append(a)
        ptrs.append(ptr)
        return True
    if tp is Tensor:
        if a._moved is not None or not a._on_device:
            return False  # the slow path says why (moved), or runs on the simulator
        ptr = a._ptr
        parts.append((Tensor, a._shape, a._dtype, ptr & 15))
        tensors.append(a)
        ptrs.append(ptr)
        return True
    if tp in _SCALARS or tp is DType or tp is getattr(torch, "dtype", None):
        parts.append((tp, a))  # a dtype (an output's) is a constant, as a scalar is
        return True
    if tp is tuple or tp is list:
        if all(type(v) in _SCALARS for v in a):
            parts.append((tp, tuple(a)))
            return True
        items: list[Any] = []  # a list of tensors (group_gemm's): each read as an argument
        for v in a:
            if type(v) in _SCALARS or not _part(torch, plain, v, items, tensors, ptrs):
                return False
        parts.append((tp, len(a), tuple(items)))
        return True
    return False


def _compile(
    inputs: int,
    allocations: Sequence[tuple[Any, Callable[[], Any]]],
    launches: Sequence[tuple[Callable[[list[Any], Any], None], Sequence[Source]]],
    draws: Sequence[Callable[[], int]],
    result: Any,
    steps: Sequence[tuple[int, Callable[..., None], Sequence[int | None]]] = (),
) -> tuple[Callable[[list[Any], list[int], list[Any]], Any], str]:
    """The replay of a plan as one generated function `(tensors, ptrs, values) -> result`
    (or _MISS), and its text, with every source and constant written in, so a replay runs no loop or branch
    per value. Buffers 0 .. inputs - 1 are the call's tensors, then the allocations; each host
    step (after how many launches, its function, the buffers it takes: None for None) runs
    where the recorded call ran it."""
    env: dict[str, Any] = {"MISS": _MISS, "keep": keep_if_captured, "streams": streams}
    lines = ["def replay(tensors, ptrs, values):"]
    for j, (t, again) in enumerate(allocations):
        env[f"again{j}"] = again
        read = "_ptr" if type(t) is Tensor else "data_ptr()"
        lines += [f"    t{j} = again{j}()", f"    b{j} = t{j}.{read}"]
        # the kernels were compiled for the recorded alignment
        lines.append(f"    if b{j} & 15 != {_ptr(t) & 15}: return MISS")
    for k, draw in enumerate(draws):
        env[f"draw{k}"] = draw
        lines.append(f"    s{k} = draw{k}()")
    allocated = "".join(f"t{j}, " for j in range(len(allocations)))
    lines.append("    if streams._captures:")  # inside `fl.graph`: the graph holds them
    lines.append(f"        keep((tensors, ({allocated})), None)")
    for h, (_, step, _) in enumerate(steps):
        env[f"step{h}"] = step

    def run_steps(after: int) -> None:
        for h, (at, _, taken) in enumerate(steps):
            if at == after:
                args = ", ".join(_buffer_expr(i, inputs) for i in taken)
                lines.append(f"    step{h}({args})")

    for n, (run, sources) in enumerate(launches):
        run_steps(n)
        env[f"run{n}"] = run
        values = []
        for i, (kind, a, b) in enumerate(sources):
            if kind == POINTER:
                base = f"ptrs[{a}]" if a < inputs else f"b{a - inputs}"
                values.append(f"{base} + {b}" if b else base)
            elif kind == CONST:
                env[f"c{n}_{i}"] = a
                values.append(f"c{n}_{i}")
            else:
                values.append(f"s{a}" if kind == SEED else f"values[{a}]")
        lines.append(f"    run{n}([{', '.join(values)}], None)")
    run_steps(len(launches))
    lines.append(f"    return {_result_expr(result)}")
    source = "\n".join(lines)
    # our own text, as runtime/launch.py generates its launcher; named as fearless's, so that a
    # host step's `user_location` passes over its frame to the user's line
    exec(compile(source, "<fearless replay>", "exec"), env)
    return env["replay"], source


def _buffer_expr(i: int | None, inputs: int) -> str:
    """The replay's tensor of buffer `i` (None: None): the call's argument, or an allocation."""
    if i is None:
        return "None"
    return f"tensors[{i}]" if i < inputs else f"t{i - inputs}"


def _result_expr(shape: Any) -> str:
    """The expression of a result structure (`_structure`) over the allocations t0, t1, ..."""
    if type(shape) is int:
        return f"t{shape}" if shape >= 0 else "None"
    kind, items = shape
    inner = "".join(f"{_result_expr(s)}, " for s in items)
    return f"({inner})" if kind is tuple else f"[{inner}]"


# --------------------------------------------------------------------------- recording


def _nbytes(t: Any) -> int:
    return t._nbytes if type(t) is Tensor else t.numel() * t.element_size()


def _ptr(t: Any) -> int:
    return t._ptr if type(t) is Tensor else t.data_ptr()  # type: ignore[no-any-return]


def _plan(
    rec: trace.Trace, out: Any, ptrs: list[int], inputs: list[Any], values: list[Any]
) -> Plan | Never:
    """The plan of a recorded call (its tensor arguments `inputs`, at `ptrs`), or why it cannot
    be replayed."""
    sizes = [_nbytes(t) for t in inputs]
    if rec.refused is not None:
        return Never(rec.refused)
    if not rec.launches:
        return Never("it launched nothing")
    kept = [(_ptr(t), _nbytes(t)) for t in rec.kept]
    # a kept buffer the recorded call allocated (its first) is not allocated again
    allocations = [a for a in rec.allocations if all(_ptr(a[0]) != p for p, _ in kept)]
    buffers = list(zip(ptrs, sizes, strict=True))
    buffers += [(_ptr(t), _nbytes(t)) for t, _ in allocations]
    spans = sorted((p, p + n) for p, n in buffers + kept if n)
    if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
        return Never("tensors that overlap: a pointer's owner is ambiguous")
    seeds = {v: k for k, (v, _) in enumerate(rec.seeds)}
    dynamic = {v: k for k, v in enumerate(values) if v is not None}
    launches = []
    for run, recorded in rec.launches:
        sources: list[Source] = []
        for v in recorded:
            source = _source(v, buffers, seeds, dynamic, kept)
            if source is None:
                return Never(f"a launch value {v!r} comes from no argument")
            sources.append(source)
        launches.append((run, tuple(sources)))
    used = {(kind, a) for _, sources in launches for kind, a, _ in sources}
    if any((SEED, k) not in used for k in range(len(rec.seeds))) or any(
        (DYNAMIC, k) not in used for k in dynamic.values()
    ):
        return Never("a seed that reaches no launch as it is")
    result = _structure(out, [t for t, _ in allocations])
    if result is None:
        return Never("it returned something other than the tensors it allocated")
    steps = []
    owners = [*inputs, *(t for t, _ in allocations)]
    for at, step, tensors in rec.steps:
        taken = [None if t is None else _owner(t, buffers, owners) for t in tensors]
        if any(i is None and t is not None for i, t in zip(taken, tensors, strict=True)):
            return Never("a host step takes a tensor that is no argument or allocation")
        steps.append((at, step, taken))
    draws = [draw for _, draw in rec.seeds]
    return Plan(*_compile(len(ptrs), allocations, launches, draws, result, steps))


def _owner(t: Any, buffers: list[tuple[int, int]], owners: list[Any]) -> int | None:
    """The buffer that `t` is (starting where it starts, of its shape: a view of another shape
    would reach a host step as its owner's shape), if any."""
    ptr, shape = _ptr(t), tuple(t.shape)
    return next(
        (i for i, (p, _) in enumerate(buffers) if p == ptr and tuple(owners[i].shape) == shape),
        None,
    )


def _source(
    v: Any,
    buffers: list[tuple[int, int]],
    seeds: dict[int, int],
    dynamic: dict[int, int],
    kept: list[tuple[int, int]],
) -> Source | None:
    if type(v) is not int:
        return (CONST, v, 0) if type(v) in (float, bool) else None
    if v in seeds:
        return (SEED, seeds[v], 0)
    if v in dynamic:
        return (DYNAMIC, dynamic[v], 0)
    for i, (ptr, n) in enumerate(buffers):
        if ptr <= v < ptr + n:
            return (POINTER, i, v - ptr)
    if any(ptr <= v < ptr + n for ptr, n in kept):
        return (CONST, v, 0)  # the operator's own buffer, the same for every call
    # an int this large is a pointer into memory the call did not report: refuse it
    return (CONST, v, 0) if -(2**32) < v < 2**32 else None


def _structure(out: Any, allocated: list[Any]) -> Any:
    """The result as allocation indices (an int, -1 for None, or (tuple or list, items)); None
    if it holds anything else."""
    if out is None:
        return -1
    for i, t in enumerate(allocated):
        if out is t:
            return i
    if type(out) in (tuple, list):
        items = [_structure(o, allocated) for o in out]
        if any(s is None for s in items):
            return None
        return (type(out), tuple(items))
    return None
