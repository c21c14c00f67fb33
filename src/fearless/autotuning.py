"""`fl.autotune`: pick the fastest of several configurations per key, once, and remember it.

    @fl.autotune(configs=[{"tile": 64}, {"tile": 128}, {"tile": 256}], key=["x"])
    def scale(x, out, *, tile):
        kernel(out.partition((tile,)), x)

`configs` are the keyword arguments to try (each a mapping of the tunables to values); `key`
names the arguments whose shapes (arrays) or values (scalars) decide which configuration wins,
or is a function of the call's arguments returning a hashable value (lists become tuples,
dicts tuples of their sorted items). The dtypes of every array argument are part of the key
(`key_dtypes=[names]`: of those arguments' only). Without `key`, every argument is.

This module holds the decorator (`fl.autotune`, `fl.autotune.export`), `Autotuned`'s call path
(a call, `launch`, `inspect`, one configuration run with its partitions given back) and the
rules that choose a configuration without timing one: a stored or table winner (proved on its
first call), capture, tuning off, a compile-ahead pass. Timing a new key's configurations is
autotune_session.py's (`Tuner`, which `Autotuned` inherits); the rest of the protocol below is
in the modules it names.

Before timing, a new key is looked up: first in the disk store below (this machine's own
measurements), then in the tuning tables (`autotune_tables.py`: FEARLESS_TUNING_TABLE's, then
those the package ships), by the function's module and qualified name, the key and the arch. A
table entry measured with today's versions is used as a stored winner is: only it compiles and
runs. A stale one (another fearless, tileiras or driver) is a starting point: the key is tuned,
the stale winner timed first. `fl.autotune.export(path)` writes the winners of this process as
a table.

Under capture (torch.compile tracing, a CUDA graph capture by torch or `fl.graph`) a new key is
never timed: nothing may synchronise or run twice there. It takes the stored winner or the
table's entry for the key, else the nearest table entry that `prune` keeps
(`autotune_tables.neighbours`), else the first configuration `prune` keeps, and keeps none of
them as the key's winner: the first call outside capture tunes as usual. Only that one runs: if
it fails, what it launched stays captured, so the call raises an error saying to tune outside
the capture first (call it once before capturing) instead of trying another; so does a stored
winner that fails there (`_prove`). With tuning off, a configuration the GPU refuses (a kernel
too large for it, or one that would hang) gives way to the next (`_first_that_runs`), as the
tuner skips it.

A call borrows its arguments: a partition the function makes of an argument and leaves open
(one it neither gave back with `unpartition()` nor returned) is given back when the call
returns, as it is when the call raises. So `out` holds the result after `scale(x, out)`, and the
tuner can call `scale` again on the same `out`, as Triton's autotuner re-runs a kernel on the
same output buffers.

`prune(configs, *args, **kwargs)` (Triton's `early_config_prune`) returns the configurations
worth timing for a call (a non-empty subset of `configs`, a function of the key alone): ops'
GEMMs drop tiles larger than the problem; it may return any iterable of them. A stale table
winner is timed whether kept or not.

The first call with a new key times every configuration (autotune_session.py, with
`autotune_timing.measure`: a warm-up call, which compiles, then repeated calls each between two
synchronisations, the median kept), keeps the fastest and calls the function with it. On the
GPU the configurations' Tile kernels compile first, side by side (tile/compile_ahead.py), and
each is timed as soon as its compiles are done (`ready_order`), so one slow compile holds up
only its own timing; past
`autotune_timing.COMPILE_BUDGET_S` it is left out. A configuration that raises a fearless error
(a tile too large, a launch the device refuses) is skipped (the progress line names it and the
first line of its error); if every one fails, the first's error is raised with a note listing
each configuration's, tuned or not. When tuning has run for over a second, progress goes to
stderr. The winner is stored on
disk (`autotune_store.py`), keyed by the function's module, name and source, the key, the
device (its name and arch, or "sim") and the compilers' source digest (for the fearless
version), so a later process does not
tune again. A stored winner that fails in a later process (a kernel the function calls was
edited, and the winner no longer compiles) is dropped with a warning and the key tuned again,
from the call's contents (the arguments named below are put back first); an unreadable entry
is a miss. `FEARLESS_AUTOTUNE=0` takes the first configuration that `prune` keeps and runs, and
times nothing.

Inside a compile-ahead pass (the tuner's own, or `autotune_ahead.compile_ahead_of`'s, which an
op opens on its first call so that its several steps compile side by side) a call tunes
nothing: it queues the compiles its real call will need and chooses nothing
(`Autotuned._queue`).

Tuning calls the function several times. Arguments it accumulates into are named (Triton's
names): `restore_value=[names]` are put back to the call's contents before each timed call,
`reset_to_zero=[names]` zeroed before each; after tuning both hold the call's contents again
(whatever happened: a winner, every configuration failing, an exception of the function's own),
and the winner runs once on them, as every later call does: a call that tuned gives what a
warm one gives. An array argument named in neither that the function changes again on a second
call (`out += x`, `x *= 2`) is caught on the tuning path (`autotune_timing.Watch`: copied as tuning starts,
compared across the first timed call, which follows the warm-up with nothing put back): a
FearlessWarning names it, and it is put back as `restore_value` would be, so the result is
right. The simulator runs the same protocol, so the CPU tests cover it; its timings say nothing
about a GPU, and its winners are stored under "sim".

A Tile kernel can be decorated directly: a configuration's keys are then its hints
(`num_ctas`, `occupancy`, `num_worker_warps`, as `kernel.options`) and its `tile.Const`
parameters, which the caller leaves out of the call. `tuned.launch(grid, *args)` launches a
persistent or atomic kernel on a grid of the host's (tuned per grid), `tuned.inspect(*args)`
shows a stage of the configuration those arguments use, and other attributes are the kernel's.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import autotune_store, autotune_tables, config
from .autotune_ahead import capturing
from .autotune_keys import (
    KeySpec,
    call_error,
    check_configs,
    check_names,
    freeze_grid,
    make_key,
)
from .autotune_session import NEAR as NEAR  # `fearless.autotuning.NEAR` (docs/ops.md)
from .autotune_session import Prune, Tuner, first_line
from .autotune_tables import table_arch
from .autotune_timing import keep
from .errors import (
    CompileError,
    FearlessError,
    FearlessWarning,
    KernelTypeError,
    LaunchContractError,
)
from .frames import user_stacklevel
from .runtime.location import user_location
from .runtime.partition import Partition, start_recording, stop_recording
from .tile.compile_ahead import STATE as AHEAD  # the pass open, if any (tile/compile_ahead.py)

TILE_HINTS = ("num_ctas", "occupancy", "num_worker_warps")
_MISSING = object()


class Autotuned(Tuner):
    """A function (or Tile kernel) called with the fastest of its configurations per key."""

    def __init__(
        self,
        fn: Callable[..., Any],
        configs: Sequence[Mapping[str, Any]],
        key: KeySpec,
        reset_to_zero: Sequence[str],
        restore_value: Sequence[str],
        prune: Prune | None = None,
        key_dtypes: Sequence[str] | None = None,
    ) -> None:
        self.fn = fn
        self._prune = prune
        self.name: str = str(getattr(fn, "name", None) or getattr(fn, "__name__", repr(fn)))
        self._ours = self.identity.startswith("fearless.")  # an operator of fearless's (`Watch`)
        self._kernel = getattr(fn, "__fearless_kernel__", None)
        if self._kernel == "simt":
            raise CompileError(
                f"`{self.name}` is a SIMT kernel: its tunables (the block size, the work per "
                "thread) are chosen where it is launched",
                user_location(),
                help="decorate the host function that launches it, with the block size as a "
                "keyword argument: `@fl.autotune(configs=[{'block': 128}, {'block': 256}])`",
            )
        self.configs = check_configs(self.name, configs)
        self._all_params = self._parameters()
        self._check_tunables()
        # what a call passes: for a Tile kernel, the parameters no configuration sets
        self._params = [p for p in self._all_params if p not in self.configs[0]]
        if self._kernel != "tile":
            self._params = self._all_params
        self._key_fn = make_key(key, self._params, self.name, key_dtypes)
        self._reset = check_names("`reset_to_zero`", reset_to_zero, self._params, self.name)
        self._restore = check_names("`restore_value`", restore_value, self._params, self.name)
        self._best: dict[Hashable, int] = {}  # key -> index into configs
        # keys whose winner came from the disk (its file) or a table (None) and has not run yet
        self._unproven: dict[Hashable, Path | None] = {}
        self.timings: dict[Hashable, list[float | None]] = {}  # key -> seconds per config
        # key -> the stack a thread (bytes: spills) of each config's kernels, as compiled for
        # the GPU (None: not compiled, or not a Tile kernel)
        self.spills: dict[Hashable, list[int | None]] = {}
        # a kernel's own attributes stay the kernel's (`__getattr__`), not copies of them
        functools.update_wrapper(self, fn, updated=() if self._kernel else ("__dict__",))  # type: ignore[arg-type]

    # ------------------------------------------------------------------------------- call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(None, args, kwargs)

    def launch(self, grid: Any, *args: Any, stream: Any = None) -> None:
        """A decorated Tile kernel's `kernel.launch(grid, *args)` (persistent kernels, kernels
        whose outputs are `tile.Atomic`), with the fastest configuration for these arguments
        on this grid; the arguments leave out what the configurations set, as a call does."""
        if self._kernel != "tile":
            raise KernelTypeError(
                f"`{self.name}` is a host function, not a Tile kernel: it has no `.launch`",
                user_location(),
                help=f"call it: `{self.name}(...)`; the grid is its own business",
            )
        return self._call((freeze_grid(grid), stream), args, {})  # type: ignore[no-any-return]

    def inspect(self, *args: Any, stage: str = "ir", arch: str | None = None) -> str:
        """A decorated Tile kernel's `kernel.inspect`: the text of `stage` for the configuration
        these arguments use (the one tuned or stored for them, else the first; nothing is timed
        for it)."""
        if self._kernel != "tile":
            raise KernelTypeError(
                f"`{self.name}` is a host function: inspect the Tile kernels it launches",
                user_location(),
                help="call `.inspect(...)` on the `@tile.kernel` itself",
            )
        cfg = self.configs[0]
        if args:
            key = self._key_fn(args, {})
            known = self._best.get(key)
            if known is None and config.autotune_enabled() and len(self.configs) > 1:
                path = self._entry(key)
                known = autotune_store.load(path, self.configs, self.name)
            cfg = self.configs[known or 0]
        kernel, full = self._bind(cfg, args)
        return kernel.inspect(*full, stage=stage, arch=arch)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        """A decorated Tile kernel's other attributes (`name`, `hints`, `annotations`, ...)."""
        fn = self.__dict__.get("fn")
        if name.startswith("_") or fn is None or self.__dict__.get("_kernel") != "tile":
            raise AttributeError(name)
        return getattr(fn, name)

    def best_config(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The configuration a call with these arguments uses (tuning first if needed)."""
        key = self._key_fn(args, kwargs)
        if key not in self._best:
            if capturing():
                return dict(self.configs[self._untimed(key, args, kwargs)])
            self._best[key] = self._choose(key, None, args, kwargs)
        return dict(self.configs[self._best[key]])

    def _call(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        key = self._key_fn(args, kwargs)
        if grid is not None:
            key = (key, "grid", grid[0])
        if AHEAD.thread is not None and AHEAD.thread == threading.get_ident():
            return self._queue(key, grid, args, kwargs)
        best = self._best.get(key)
        if best is None:
            if capturing():
                untimed = [self._untimed(key, args, kwargs)]
                return self._first_that_runs(untimed, grid, args, kwargs)[1]
            if not config.autotune_enabled() or len(self.configs) == 1:
                order = self._untimed_order(args, kwargs)
                best, result = self._first_that_runs(order, grid, args, kwargs)
                self._best[key] = best
                return result
            best = self._best[key] = self._choose(key, grid, args, kwargs)
        if self._unproven and key in self._unproven:
            return self._prove(key, grid, args, kwargs)
        return self._run(self.configs[best], grid, args, kwargs)

    def _first_that_runs(
        self, order: Sequence[int], grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[int, Any]:
        """(index, result) of the first configuration of `order` that runs, where nothing is
        timed (tuning off): one this GPU refuses (a kernel too large for it, or one tileiras made
        that would hang) gives way to the next, as the tuner skips it, the arguments the
        function accumulates into (`restore_value`, `reset_to_zero`) put back to the call's
        contents before each retry. Under capture only `order[0]` runs: what a failed
        configuration launched stays recorded, and putting arguments back would synchronise,
        so its failure is an error saying to tune outside the capture first. When every
        configuration fails, the first's error is raised, with a note listing each."""
        if capturing():
            n = order[0]
            try:
                return n, self._run(self.configs[n], grid, args, kwargs)
            except FearlessError as exc:
                if len(self.configs) == 1:
                    raise
                raise self._capture_error(n, exc) from exc
        if len(order) == 1:
            return order[0], self._run(self.configs[order[0]], grid, args, kwargs)
        originals = self._originals(args, kwargs)
        failures: list[tuple[int, FearlessError]] = []
        for n in order:
            try:
                return n, self._run(self.configs[n], grid, args, kwargs)
            except FearlessError as exc:
                failures.append((n, exc))
                for put_back in originals:
                    put_back()
        raise self._every_failed(failures)

    def _untimed_order(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[int]:
        """The configurations an untimed call (tuning off) tries, in order: those `prune`
        keeps, then the others."""
        if len(self.configs) == 1:
            return [0]
        kept = self._kept(args, kwargs)
        return [*kept, *(n for n in range(len(self.configs)) if n not in kept)]

    def _originals(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Callable[[], None]]:
        """What puts back the call's contents of the arguments the function accumulates into
        (`reset_to_zero`'s and `restore_value`'s), as they are now."""
        return [
            keep(name, self._argument(name, args, kwargs))
            for name in dict.fromkeys((*self._reset, *self._restore))
        ]

    def _capture_error(self, n: int, exc: FearlessError) -> LaunchContractError:
        """Configuration `n` failed inside a capture, where the tuner may not try another."""
        return LaunchContractError(
            f"configuration {dict(self.configs[n])} of `{self.name}` failed inside a capture "
            f"({first_line(exc)}); the autotuner cannot try another there: what the failed "
            "one launched stays captured, and tuning would synchronise",
            user_location(),
            help=f"tune `{self.name}` outside the capture first: call it once with arguments of "
            "these shapes before capturing, and the capture takes the winner",
        )

    def _prove(
        self, key: Hashable, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The first call with a winner read from the disk or a table: if it fails (the
        function or a kernel it calls changed since it was stored), put back the arguments it
        accumulates into, drop it, warn, and tune again (under capture: an error, as in
        `_first_that_runs`)."""
        path = self._unproven.pop(key)
        n = self._best[key]
        if capturing():  # nothing put back, nothing tuned: see `_first_that_runs`
            try:
                return self._run(self.configs[n], grid, args, kwargs)
            except FearlessError as exc:
                del self._best[key]  # the next call outside the capture reads it again
                _winners.pop((self.identity, table_arch(), repr(key)), None)
                raise self._capture_error(n, exc) from exc
        originals = self._originals(args, kwargs)  # the tuning starts from the call's contents
        try:
            return self._run(self.configs[n], grid, args, kwargs)
        except FearlessError as exc:
            for put_back in originals:
                put_back()
            if path is not None:
                autotune_store.drop(path)
            _winners.pop((self.identity, table_arch(), repr(key)), None)
            where = "stored autotuning" if path is not None else "tuning table's"
            warnings.warn(
                f"fearless: the {where} winner of `{self.name}`, "
                f"{self.configs[self._best[key]]}, failed ({type(exc).__name__}: "
                f"{exc.message}); tuning again",
                FearlessWarning,
                stacklevel=user_stacklevel(),
            )
        best = self._best[key] = self._tune(key, grid, args, kwargs, path or self._entry(key))
        return self._run(self.configs[best], grid, args, kwargs)

    def _run(
        self,
        cfg: Mapping[str, Any],
        grid: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        returns: bool = True,
    ) -> Any:
        """One call with `cfg`, giving back the partitions of arguments it leaves open, but
        those it returns (`returns`: the result goes to the caller, not a tuning call's)."""
        made = start_recording()
        result = None
        try:
            if self._kernel != "tile":
                try:
                    result = self.fn(*args, **kwargs, **cfg)
                except TypeError as exc:
                    raise call_error(
                        exc, self.fn, self.name, self._params, cfg, args, kwargs
                    ) from None
            else:
                kernel, full = self._bind(cfg, args)
                if grid is None:
                    result = kernel(*full, **kwargs)
                else:
                    result = kernel.launch(grid[0], *full, stream=grid[1])
            return result
        finally:
            stop_recording(made)
            if made:
                _give_back(made, args, kwargs, result if returns else None)

    def _bind(self, cfg: Mapping[str, Any], args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        """The kernel with `cfg`'s hints, and the call's arguments with `cfg`'s Consts in place."""
        hints = {k: v for k, v in cfg.items() if k in TILE_HINTS}
        kernel = self.fn.options(**hints) if hints else self.fn  # type: ignore[attr-defined]
        full, it = [], iter(args)
        for name in self._all_params:
            if name in cfg:
                full.append(cfg[name])
                continue
            arg = next(it, _MISSING)
            if arg is _MISSING:
                break  # too few arguments: the kernel's own arity error says so
            full.append(arg)
        return kernel, [*full, *it]

    # --------------------------------------------------------------- choosing, keeping

    def _choose(
        self, key: Hashable, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> int:
        """The configuration for `key`: the first `prune` keeps (tuning off), the stored one,
        or the fastest."""
        if not config.autotune_enabled() or len(self.configs) == 1:
            return self._untimed_order(args, kwargs)[0]
        path, stored, entry, first = self._read(key)
        if stored is not None:
            self._unproven[key] = path
            self._remember(key, stored, None)
            return stored
        if entry is not None and first is not None and entry.fresh():
            self._unproven[key] = None
            _winners[(self.identity, entry.arch, repr(key))] = entry
            return first
        return self._tune(key, grid, args, kwargs, path, first)

    def _read(
        self, key: Hashable
    ) -> tuple[Path, int | None, autotune_tables.Entry | None, int | None]:
        """What this machine knows of `key` before tuning: the disk store's path for it, the
        winner stored there, the tuning tables' entry and that entry's configuration (None
        where there is none, or the entry names a configuration no longer among `configs`)."""
        path = self._entry(key)
        measured_all = not autotune_tables.enabled()  # `fearless tune` takes no near winner
        stored = autotune_store.load(path, self.configs, self.name, measured_all=measured_all)
        if stored is not None:
            return path, stored, None, None
        entry = autotune_tables.lookup(self.identity, table_arch(), key)
        first = None if entry is None else autotune_tables.index_of(entry, self.configs, self.name)
        return path, None, entry, first

    def _queue(
        self, key: Hashable, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A call inside a compile-ahead pass (`compile_ahead_of`, or the tuning pass of an
        autotuned function calling this one): start compiling what the real call will need and
        choose nothing. That is the winner once known (in this process, on the disk or in a
        fresh table entry), else every configuration the tuner will time. Returns the first
        result of a configuration that did not raise (what the op's next step takes in the
        pass: its shape, not its values)."""
        picks = [self._best[key]] if key in self._best else self._candidates(key, args, kwargs)
        result, found = None, False
        for n in picks:
            with contextlib.suppress(FearlessError):
                outcome = self._run(self.configs[n], grid, args, kwargs, not found)
                if not found:
                    result, found = outcome, True
        return result

    def _candidates(
        self, key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[int]:
        """The configurations the first call with `key` will run: one when tuning is off or a
        winner is stored or in a fresh table entry, else those it will time (a stale table
        winner first). Reads, and keeps nothing."""
        if not config.autotune_enabled() or len(self.configs) == 1:
            return self._untimed_order(args, kwargs)[:1]
        if capturing():
            return [self._untimed(key, args, kwargs)]
        _, stored, entry, first = self._read(key)
        if stored is not None:
            return [stored]
        if entry is not None and first is not None and entry.fresh():
            return [first]
        return self._order(key, args, kwargs, first)[0]

    def _untimed(self, key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        """The configuration for `key` under capture, where nothing is timed: the stored
        winner, the table's entry for the key (stale or not), the nearest table entry that
        `prune` keeps, else the first it keeps; kept as no winner."""
        if not config.autotune_enabled() or len(self.configs) == 1:
            return self._untimed_order(args, kwargs)[0]
        stored = autotune_store.load(self._entry(key), self.configs, self.name)
        if stored is not None:
            return stored
        arch = table_arch()
        entry = autotune_tables.lookup(self.identity, arch, key)
        if entry is not None:
            n = autotune_tables.index_of(entry, self.configs, self.name)
            if n is not None:
                return n
        kept = self._kept(args, kwargs)
        near = autotune_tables.neighbours(
            self.identity, arch, key, self.configs, self.name, len(self.configs)
        )
        return next((n for n in near if n in kept), kept[0])

    @property
    def identity(self) -> str:
        """The function as tuning tables name it: its module and qualified name."""
        fn = getattr(self.fn, "func", self.fn)
        module = getattr(fn, "__module__", None) or ""
        name = getattr(fn, "__qualname__", None) or self.name
        return f"{module}.{name}" if module else name

    def _remember(self, key: Hashable, n: int, seconds: float | None) -> None:
        """Keep `configs[n]`, measured now (or stored on this machine), as `key`'s winner."""
        arch = table_arch()
        _winners[(self.identity, arch, repr(key))] = autotune_tables.Entry(
            self.identity,
            arch,
            autotune_tables.plain(key),
            autotune_tables.plain(self.configs[n]),
            dict(autotune_tables.current_versions(arch)),
            seconds,
        )

    def _entry(self, key: Hashable) -> Path:
        from .runtime.target import current_target

        device = _device_name(current_target().on_device)
        return autotune_store.entry_path(self.fn, self.name, key, device, self.configs)

    # ----------------------------------------------------------------------- the signature

    def _parameters(self) -> list[str]:
        """The parameters a call passes (for a Tile kernel: all of them, in order)."""
        if self._kernel == "tile":
            return [name for name, _ in self.fn.annotations()]  # type: ignore[attr-defined]
        return list(inspect.signature(self.fn).parameters)

    def _check_tunables(self) -> None:
        names = set(self.configs[0])
        if self._kernel == "tile":
            allowed = set(TILE_HINTS) | set(self._all_params)
            what = "a hint (num_ctas, occupancy, num_worker_warps) or a parameter"
        else:
            sig = inspect.signature(self.fn)
            if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
                return
            allowed = {
                p.name
                for p in sig.parameters.values()
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            }
            what = "a keyword parameter"
        for name in sorted(names - allowed):
            raise CompileError(
                f"`{name}` in the configurations of `{self.name}` is not {what} of it",
                user_location(),
                help=f"add `{name}` to `{self.name}`'s parameters (e.g. `*, {name}`), or "
                "remove it from the configurations",
            )

    def _argument(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in kwargs:
            return kwargs[name]
        pos = self._params.index(name)
        if pos < len(args):
            return args[pos]
        raise KernelTypeError(
            f"`{self.name}` was called without `{name}`, which its autotuning key or "
            "restore list names",
            user_location(),
            help=f"pass `{name}` in the call",
        )

    def __repr__(self) -> str:
        return f"<fl.autotune {self.name}: {len(self.configs)} configs>"


# (function, arch, key) -> the table entry its winner in this process makes (`export`)
_winners: dict[tuple[str, str, str], autotune_tables.Entry] = {}


class _Autotune:
    """`fl.autotune`: the decorator, and `fl.autotune.export(path)`."""

    def __call__(
        self,
        configs: Sequence[Mapping[str, Any]],
        key: KeySpec = None,
        *,
        reset_to_zero: Sequence[str] = (),
        restore_value: Sequence[str] = (),
        prune: Prune | None = None,
        key_dtypes: Sequence[str] | None = None,
    ) -> Callable[[Callable[..., Any]], Autotuned]:
        """Decorate a host function (or a Tile kernel) whose keyword arguments are tunables:
        each call uses the fastest of `configs` for its `key` (the module docstring has the
        protocol). `prune(configs, *args, **kwargs)` (Triton's `early_config_prune`) returns
        the configurations worth timing for a new key: it must depend on the key alone.
        `key_dtypes` names the arguments whose dtypes join the key (None: every array's)."""

        def decorate(fn: Callable[..., Any]) -> Autotuned:
            return Autotuned(fn, configs, key, reset_to_zero, restore_value, prune, key_dtypes)

        return decorate

    @staticmethod
    def export(path: str | Path) -> int:
        """Write the winners of this process (tuned here, read from this machine's disk store
        or from a table) as a tuning table at `path`, merged with the table already there;
        returns how many entries the file holds. Keys chosen untimed (under capture, or with
        FEARLESS_AUTOTUNE=0) are not winners and are left out."""
        return autotune_tables.write(Path(path), list(_winners.values()))

    def __repr__(self) -> str:
        return "<fl.autotune>"


autotune = _Autotune()


# ---------------------------------------------------------------------------------- helpers


def _give_back(
    made: list[Partition[Any]], args: tuple[Any, ...], kwargs: dict[str, Any], result: Any
) -> None:
    """Unpartition what a call made of its arguments and left open, except what it returned."""
    arguments = {id(a) for a in (*args, *kwargs.values())}
    returned = {id(r) for r in (result if isinstance(result, (tuple, list)) else (result,))}
    for part in made:
        if part.open and id(part.tensor) in arguments and id(part) not in returned:
            part.unpartition()


def _device_name(on_device: bool) -> str:
    if not on_device:
        return "sim"
    from .runtime import driver

    info = driver.device_info()
    return f"{info.name}|{info.arch}"
