"""The tuning of a new key: what `fl.autotune` does the first time it meets a key that neither this
machine's disk store nor a fresh tuning-table entry answers (autotuning.py decides when).

`Tuner`, which autotuning.py's `Autotuned` inherits, holds it: the configurations to time and
their order (`_kept`: those `prune` keeps; `_order`: where the tables hold the function at other
sizes, only the winners of the NEAR nearest entries, a stale winner of the key first; the
compile-ahead pass's `Autotuned._candidates` and the untimed rules read them too), on the GPU a
compile-ahead pass over them (`_compile_ahead`, tile/compile_ahead.py), the timing of each as
its compiles finish (`_time_all`: `autotune_timing.measure`, the spill and compile-budget rules,
the progress line), the arguments put back around every timed call and, whatever happens,
after the session (`_tune`), and the winner: stored on disk (`autotune_store.py`), recorded in
`timings` and `spills`, and kept through `Autotuned._remember`. A configuration that raises a
fearless error is skipped; when every one tried fails, `_every_failed` gives the first's error
with a note listing each (the untimed path of autotuning.py raises it too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import autotune_store, autotune_tables, autotune_timing, config
from .autotune_tables import table_arch
from .autotune_timing import (
    Clock,
    DeviceClock,
    HostClock,
    Progress,
    Watch,
    keep,
    measure,
    spilling,
    spills_much,
    zero,
)
from .errors import CompileError, FearlessError
from .runtime import trace
from .runtime.location import user_location

# prune(configs, *args, **kwargs) -> the configurations worth timing (a subset of `configs`)
Prune = Callable[..., Sequence[Mapping[str, Any]]]
# A key the tuning tables lack, where they hold its function at other sizes, times only the
# winners of its NEAR nearest entries (distinct ones; `Autotuned._order`).
NEAR = 3


class Tuner:
    """The tuning session of `Autotuned` (autotuning.py), which inherits it: a new key's
    configurations ordered, compiled ahead, timed with the arguments put back, and the fastest
    stored and kept."""

    # Autotuned's, set in its __init__ (autotuning.py)
    name: str
    configs: list[dict[str, Any]]
    timings: dict[Hashable, list[float | None]]  # key -> seconds per config
    spills: dict[Hashable, list[int | None]]  # key -> each config's stack a thread (bytes)
    _prune: Prune | None
    _params: list[str]
    _reset: tuple[str, ...]
    _restore: tuple[str, ...]
    _ours: bool

    if TYPE_CHECKING:  # Autotuned's methods (autotuning.py)

        @property
        def identity(self) -> str: ...

        def _run(
            self,
            cfg: Mapping[str, Any],
            grid: Any,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
            returns: bool = True,
        ) -> Any: ...

        def _argument(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

        def _remember(self, key: Hashable, n: int, seconds: float | None) -> None: ...

    def _tune(
        self,
        key: Hashable,
        grid: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        path: Path,
        first: int | None = None,
    ) -> int:
        """Time every configuration (`first` before the others), store the fastest and return
        it. Before each timed call `reset_to_zero`'s arguments are zeroed and `restore_value`'s
        put back; after tuning, whatever happened (a winner, every configuration failing, an
        exception of the function's own), both hold the call's contents again, and so do the
        arguments `Watch` saw the function change again on a second call."""
        started = time.perf_counter()
        trace.refuse("the autotuner timed its configurations", first_call_only=True)
        originals = {
            name: keep(name, self._argument(name, args, kwargs))
            for name in dict.fromkeys((*self._reset, *self._restore))
        }
        zeroes = [zero(name, self._argument(name, args, kwargs)) for name in self._reset]
        restored = [originals[name] for name in self._restore if name not in self._reset]
        named = [*zip(self._params, args, strict=False), *kwargs.items()]
        named += [(f"argument {n}", a) for n, a in enumerate(args) if n >= len(self._params)]
        declared = [self._argument(name, args, kwargs) for name in originals]
        # fearless's own operators name what they change (their tests hold it), and copying
        # their operands would slow every first call: only users' functions are watched
        watch = Watch(self.name, [] if self._ours else named, declared)

        def restore() -> None:
            for put_back in (*zeroes, *restored):
                put_back()
            watch.put_back()

        try:
            return self._time_all(key, grid, args, kwargs, path, first, restore, watch, started)
        finally:
            for put_back in originals.values():
                put_back()
            watch.put_back()
            watch.release()

    def _time_all(
        self,
        key: Hashable,
        grid: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        path: Path,
        first: int | None,
        restore: Callable[[], None],
        watch: Watch,
        started: float,
    ) -> int:
        """`_tune`'s timing, `restore` putting the arguments back before each call."""
        from .runtime.target import current_target

        target = current_target()
        order, near = self._order(key, args, kwargs, first)
        from .tile.compile_ahead import ready_order, stack_bytes

        launches: dict[int, list[tuple[Any, Any]]] = {}
        steps: Iterable[int] = order
        clock: Clock = DeviceClock() if target.on_device else HostClock()
        progress = Progress(self.name, key)
        if target.on_device:
            launches = self._compile_ahead(grid, args, kwargs, restore, order)
            budget = autotune_timing.COMPILE_BUDGET_S
            deadline = None if budget is None else started + budget
            steps = ready_order(  # as compiles finish
                order,
                launches,
                first,
                deadline=deadline,
                waiting=lambda left: progress.compiling(left, len(order)),
            )
        times: list[float | None] = [None] * len(self.configs)
        failures: list[tuple[int, FearlessError]] = []
        stacks: dict[int, int | None] = {}
        spilled: list[int] = []  # timed at the end only if every configuration spills

        def time_config(step: int, n: int) -> None:
            cfg = self.configs[n]
            progress.show(step, len(order), cfg)
            try:
                call = functools.partial(self._run, cfg, grid, args, kwargs, False)
                times[n] = measure(call, restore, clock, watch.check if watch.pending else None)
            except FearlessError as exc:
                failures.append((n, exc))
                progress.failed(step, len(order), cfg, first_line(exc))

        def take(step: int, n: int) -> None:
            if launches:
                stacks[n] = stack_bytes(launches[n])  # compiled: read at once
                if autotune_timing.SKIP_SPILLING and n != first and spills_much(stacks[n]):
                    spilled.append(n)
                    return
            time_config(step, n)

        for step, n in enumerate(steps):
            take(step, n)
        late = [n for n in order if launches and n not in stacks]  # compiling past the budget
        if late and all(times[n] is None for n in stacks):
            for step, n in enumerate(late, len(stacks)):  # nothing ran yet: wait for them
                take(step, n)
            late = []
        untimed = spilling(stacks, keep=first)  # all of `spilled`, or none if all spill
        for step, n in enumerate(spilled, len(order) - len(spilled)):
            if n not in untimed:
                time_config(step, n)  # nothing without spills to prefer: timed after all
        if launches:
            self.spills[key] = [stacks.get(n) for n in range(len(self.configs))]
        timed = [(t, n) for n, t in enumerate(times) if t is not None]
        if not timed:
            progress.done(None, None)
            assert failures, "every configuration was left untimed"
            raise self._every_failed(failures)
        best_time, best = min(timed)
        shortlist = (len(order), len(self.configs)) if near else None
        progress.done(self.configs[best], best_time, len(late), shortlist)
        self.timings[key] = times
        # a winner without the late configurations serves this process only: the next one,
        # their cubins on disk by then, tunes in full
        if not late:
            autotune_store.store(path, self.configs[best], times, near)
        self._remember(key, best, best_time)
        return best

    def _order(
        self, key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any], first: int | None
    ) -> tuple[list[int], bool]:
        """The configurations a first call with `key` times, in order, and whether they were
        shortlisted. They are those `prune` keeps; where the tuning tables hold this function
        at other sizes of the same form, only the winners of the nearest other entries that
        prune keeps (NEAR of them, nearest first; FEARLESS_AUTOTUNE_FULL times all), so that a new size
        class compiles a few configurations, not every one. A shortlisted winner is stored as
        such: `fearless tune`, which reads no table, measures the key again. A stale table
        winner of `key` itself (`first`) comes first and is always timed; an entry of `key` is
        never its own neighbour (a failed winner is tuned again over the others)."""
        kept = self._kept(args, kwargs)
        near: list[int] = []
        if not config.autotune_full():
            # every entry's winner by distance, then the NEAR nearest that `prune` keeps: a
            # pruned winner leaves its place to the next entry's, not an empty shortlist
            ranked = autotune_tables.neighbours(
                self.identity, table_arch(), key, self.configs, self.name, len(self.configs),
                exclude_own=True,
            )  # fmt: skip
            near = [n for n in ranked if n in kept][:NEAR]
        shortlisted = bool(near) and len(near) < len(kept)
        order = near if shortlisted else kept
        return (order if first is None else [first, *(n for n in order if n != first)]), shortlisted

    def _kept(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        """The indices of the configurations to time for this call: all of them, or those
        `prune` keeps (in the configurations' order; it may return any iterable of them). A
        pruner that keeps none, or returns configurations of its own, is the decorator's
        mistake: a CompileError."""
        if self._prune is None:
            return list(range(len(self.configs)))
        returned = self._prune(list(self.configs), *args, **kwargs)
        try:
            kept = list(returned)  # any iterable: a list, a tuple, a generator
        except TypeError:
            raise CompileError(
                f"the `prune` of `{self.name}` returned a `{type(returned).__name__}`, not "
                "configurations",
                user_location(),
                help="return a non-empty subset of the `configs` it is given (a list)",
            ) from None
        picked = [n for n, cfg in enumerate(self.configs) if any(cfg == k for k in kept)]
        strangers = [dict(k) for k in kept if not any(k == cfg for cfg in self.configs)]
        if not picked or strangers:
            raise CompileError(
                f"the `prune` of `{self.name}` returned "
                + (f"configurations not among its own: {strangers}" if strangers else "none"),
                user_location(),
                help="return a non-empty subset of the `configs` it is given",
            )
        return picked

    def _compile_ahead(
        self,
        grid: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        restore: Callable[[], None],
        order: Sequence[int] | None = None,
    ) -> dict[int, list[tuple[Any, Any]]]:
        """The call of each configuration to time (`order`, default all) once, its Tile launches compiling
        on worker threads instead of running (tile/compile_ahead.py), so the timing pass that
        follows finds them compiled. A configuration that fails here is met again, and
        skipped, there. Returns each configuration's launches, (kernel, key) pairs (`stack_bytes`
        reads what they spill once compiled)."""
        from .tile import compile_ahead as ahead

        met: dict[int, tuple[int, int]] = {}
        with ahead.compile_ahead():
            for n in range(len(self.configs)) if order is None else order:
                cfg = self.configs[n]
                restore()
                start = len(ahead.STATE.launches)
                with contextlib.suppress(FearlessError):
                    self._run(cfg, grid, args, kwargs, False)
                met[n] = (start, len(ahead.STATE.launches))
            launches = list(ahead.STATE.launches)
        return {n: launches[a:b] for n, (a, b) in met.items()}

    def _every_failed(self, failures: Sequence[tuple[int, FearlessError]]) -> FearlessError:
        """The first failure's error, with notes saying that every configuration tried failed
        and each one's error (a copy: the error itself may be kept and raised again)."""
        first = failures[0][1]
        if len(failures) == 1:
            return first
        notes = [
            f"every configuration of `{self.name}` tried failed ({len(failures)}); the error "
            "above is the first's"
        ]
        notes += [f"{dict(self.configs[m])}: {first_line(exc)}" for m, exc in failures]
        return with_notes(first, notes)


def first_line(exc: BaseException) -> str:
    """An error's kind and the first line of its message, for a progress line or a note."""
    message = exc.message if isinstance(exc, FearlessError) else str(exc)
    return f"{type(exc).__name__}: {(message.splitlines() or [''])[0]}"


def with_notes(exc: FearlessError, notes: list[str]) -> FearlessError:
    """A copy of `exc` (same class, code and location) whose diagnostic ends with `notes`."""
    new = type(exc).__new__(type(exc))
    new.__dict__.update(exc.__dict__)
    new.diagnostic = dataclasses.replace(exc.diagnostic, notes=[*exc.diagnostic.notes, *notes])
    new.args = (new.diagnostic.render(),)
    return new.with_traceback(exc.__traceback__)
