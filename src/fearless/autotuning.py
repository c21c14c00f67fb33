"""`fl.autotune`: pick the fastest of several configurations per key, once, and remember it.

    @fl.autotune(configs=[{"tile": 64}, {"tile": 128}, {"tile": 256}], key=["x"])
    def scale(x, out, *, tile):
        kernel(out.partition((tile,)), x)

`configs` are the keyword arguments to try (each a mapping of the tunables to values); `key`
names the arguments whose shapes (arrays) or values (scalars) decide which configuration wins,
or is a function of the call's arguments. The dtypes of every array argument are always part
of the key. Without `key`, every argument is.

The first call with a new key times every configuration (`_measure`: a warm-up call, which
compiles, then repeated calls each between two synchronisations, the median kept), keeps the
fastest and calls the function with it. A configuration that raises a fearless error (a tile
too large, a launch the device refuses) is skipped and reported only if every one fails. When
tuning has run for over a second, a progress line on stderr says what is being tuned. The
winner is stored on disk (`config.cache_dir()/autotune/`), keyed by the function's module,
name and source, the key, the device (its name and arch, or "sim") and the fearless version,
so a later process does not tune again. `FEARLESS_AUTOTUNE=0` takes the first configuration and
times nothing.

Tuning calls the function several times. Arguments it accumulates into are restored before
each timed call and after tuning: `restore_value=[names]` keeps their contents, `reset_to_zero=
[names]` zeroes them (Triton's names). The simulator runs the same protocol, so the CPU tests
cover it; its timings say nothing about a GPU, and its winners are stored under "sim".

A Tile kernel can be decorated directly: a configuration's keys are then its hints
(`num_ctas`, `occupancy`, `num_worker_warps`, as `kernel.options`) and its `tile.Const`
parameters, which the caller leaves out of the call.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import config
from .errors import CompileError, FearlessError, KernelTypeError
from .runtime import trace
from .runtime.location import user_location
from .version import __version__

KeySpec = Sequence[str] | Callable[..., Hashable] | None
TILE_HINTS = ("num_ctas", "occupancy", "num_worker_warps")
PROGRESS_AFTER_S = 1.0  # tuning shorter than this prints nothing
BUDGET_S = 0.05  # timed calls per configuration fill about this much time ...
MAX_REPS = 50  # ... within these bounds
MIN_REPS = 1
_MISSING = object()


class Autotuned:
    """A function (or Tile kernel) called with the fastest of its configurations per key."""

    def __init__(
        self,
        fn: Callable[..., Any],
        configs: Sequence[Mapping[str, Any]],
        key: KeySpec,
        reset_to_zero: Sequence[str],
        restore_value: Sequence[str],
    ) -> None:
        self.fn = fn
        self.name: str = str(getattr(fn, "name", None) or getattr(fn, "__name__", repr(fn)))
        self._kernel = getattr(fn, "__fearless_kernel__", None)
        if self._kernel == "simt":
            raise CompileError(
                f"`{self.name}` is a SIMT kernel: its tunables (the block size, the work per "
                "thread) are chosen where it is launched",
                user_location(),
                help="decorate the host function that launches it, with the block size as a "
                "keyword argument: `@fl.autotune(configs=[{'block': 128}, {'block': 256}])`",
            )
        self.configs = _check_configs(self.name, configs)
        self._all_params = self._parameters()
        self._check_tunables()
        # what a call passes: for a Tile kernel, the parameters no configuration sets
        self._params = [p for p in self._all_params if p not in self.configs[0]]
        if self._kernel != "tile":
            self._params = self._all_params
        self._key_fn = self._make_key(key)
        self._reset = self._check_names("reset_to_zero", reset_to_zero)
        self._restore = self._check_names("restore_value", restore_value)
        self._best: dict[Hashable, int] = {}  # key -> index into configs
        self.timings: dict[Hashable, list[float | None]] = {}  # key -> seconds per config
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    # ------------------------------------------------------------------------------- call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self._key_fn(args, kwargs)
        best = self._best.get(key)
        if best is None:
            best = self._choose(key, args, kwargs)
            self._best[key] = best
        return self._run(self.configs[best], args, kwargs)

    def best_config(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The configuration a call with these arguments uses (tuning first if needed)."""
        key = self._key_fn(args, kwargs)
        if key not in self._best:
            self._best[key] = self._choose(key, args, kwargs)
        return dict(self.configs[self._best[key]])

    def _run(self, cfg: Mapping[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._kernel != "tile":
            return self.fn(*args, **kwargs, **cfg)
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
        return kernel(*full, *it, **kwargs)

    # ------------------------------------------------------------------------------ tuning

    def _choose(self, key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        if not config.autotune_enabled() or len(self.configs) == 1:
            return 0
        from .runtime.target import current_target

        target = current_target()
        device = _device_name(target.on_device)
        path = self._store_path(key, device)
        stored = _load(path, self.configs)
        if stored is not None:
            return stored
        trace.refuse("the autotuner timed its configurations")
        snapshots = [
            _snapshot(name, self._argument(name, args, kwargs), zero=name in self._reset)
            for name in (*self._reset, *self._restore)
        ]

        def restore() -> None:
            for put_back in snapshots:
                put_back()

        if target.on_device:
            self._compile_ahead(args, kwargs, restore)
        clock: _Clock = _DeviceClock() if target.on_device else _HostClock()
        progress = _Progress(self.name, key)
        times: list[float | None] = []
        failures: list[FearlessError] = []
        for n, cfg in enumerate(self.configs):
            progress.show(n, len(self.configs))
            try:
                call = functools.partial(self._run, cfg, args, kwargs)
                times.append(_measure(call, restore, clock))
            except FearlessError as exc:
                times.append(None)
                failures.append(exc)
        restore()
        timed = [(t, n) for n, t in enumerate(times) if t is not None]
        if not timed:
            progress.done(None, None)
            raise failures[-1]
        best_time, best = min(timed)
        progress.done(self.configs[best], best_time)
        self.timings[key] = times
        _store(path, self.configs[best], times)
        return best

    def _compile_ahead(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], restore: Callable[[], None]
    ) -> None:
        """Every configuration's call once, its Tile launches compiling on worker threads
        instead of running (tile/ahead.py), so the timing pass that follows finds them
        compiled. A configuration that fails here is met again, and skipped, there."""
        from .tile.ahead import compile_ahead

        with compile_ahead():
            for cfg in self.configs:
                restore()
                with contextlib.suppress(FearlessError):
                    self._run(cfg, args, kwargs)

    def _store_path(self, key: Hashable, device: str) -> Path:
        try:
            source = inspect.getsource(getattr(self.fn, "func", self.fn))
        except (OSError, TypeError):
            source = ""
        ident = json.dumps(
            [
                getattr(self.fn, "__module__", ""),
                getattr(self.fn, "__qualname__", self.name),
                hashlib.sha256(source.encode()).hexdigest(),
                repr(key),
                device,
                __version__,
                [sorted((k, repr(v)) for k, v in c.items()) for c in self.configs],
            ]
        )
        digest = hashlib.sha256(ident.encode()).hexdigest()
        return config.cache_dir() / "autotune" / "v1" / f"{digest}.json"

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

    def _check_names(self, what: str, names: Sequence[str]) -> tuple[str, ...]:
        known = set(self._params)
        for name in names:
            if name not in known:
                raise CompileError(
                    f"`{what}` names `{name}`, which is not a parameter of `{self.name}`",
                    user_location(),
                    help=f"the parameters are {', '.join(f'`{p}`' for p in self._params)}",
                )
        return tuple(names)

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

    def _make_key(self, key: KeySpec) -> Callable[[tuple[Any, ...], dict[str, Any]], Hashable]:
        if callable(key):
            user_key = key

            def by_function(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
                return (user_key(*args, **kwargs), _dtypes(args, kwargs))

            return by_function
        if isinstance(key, str):
            key = [key]
        names = tuple(key) if key is not None else tuple(self._params)
        for name in names:
            if name not in self._params:
                raise CompileError(
                    f"the autotuning key names `{name}`, which is not a parameter of `{self.name}`",
                    user_location(),
                    help=f"the parameters are {', '.join(f'`{p}`' for p in self._params)}",
                )
        positions = tuple(self._params.index(n) for n in names)

        def by_names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
            parts = []
            for name, pos in zip(names, positions, strict=True):
                value = args[pos] if pos < len(args) else kwargs.get(name)
                parts.append(_key_part(value))
            return (tuple(parts), _dtypes(args, kwargs))

        return by_names

    def __repr__(self) -> str:
        return f"<fl.autotune {self.name}: {len(self.configs)} configs>"


def autotune(
    configs: Sequence[Mapping[str, Any]],
    key: KeySpec = None,
    *,
    reset_to_zero: Sequence[str] = (),
    restore_value: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Autotuned]:
    """Decorate a host function (or a Tile kernel) whose keyword arguments are tunables: each
    call uses the fastest of `configs` for its `key` (the module docstring has the protocol)."""

    def decorate(fn: Callable[..., Any]) -> Autotuned:
        return Autotuned(fn, configs, key, reset_to_zero, restore_value)

    return decorate


# ---------------------------------------------------------------------------------- helpers


def _check_configs(name: str, configs: Any) -> list[dict[str, Any]]:
    if isinstance(configs, Mapping) or not isinstance(configs, Sequence) or not configs:
        raise CompileError(
            f"`fl.autotune` for `{name}` needs a non-empty list of configurations",
            user_location(),
            help="`@fl.autotune(configs=[{'tile': 128}, {'tile': 256}], key=['x'])`",
        )
    out = []
    for cfg in configs:
        if not isinstance(cfg, Mapping) or not all(isinstance(k, str) for k in cfg):
            raise CompileError(
                f"a configuration of `{name}` is `{cfg!r}`, not a mapping of keyword names to values",
                user_location(),
                help="write each configuration as a dict: `{'tile': 128, 'occupancy': 2}`",
            )
        out.append(dict(cfg))
    first = set(out[0])
    for cfg in out[1:]:
        if set(cfg) != first:
            raise CompileError(
                f"the configurations of `{name}` set different names: {sorted(first)} and "
                f"{sorted(cfg)}",
                user_location(),
                help="give every configuration a value for the same tunables",
            )
    return out


def _key_part(value: Any) -> Hashable:
    """What of an argument decides the configuration: an array's shape, a scalar's value."""
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(value, np.generic):
        return ("shape", tuple(int(d) for d in shape), getattr(value, "tile", None))
    if isinstance(value, Hashable):
        return value
    return repr(value)


def _dtypes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(v.dtype) for v in (*args, *kwargs.values()) if getattr(v, "dtype", None) is not None
    )


def _measure(call: Callable[[], Any], restore: Callable[[], None], clock: _Clock) -> float:
    """Seconds per call: the median of timed calls, after one warm-up call that compiles."""
    restore()
    call()
    clock.wait()
    restore()
    estimate = clock.time(call)
    reps = max(MIN_REPS, min(MAX_REPS, int(BUDGET_S / max(estimate, 1e-9))))
    times = [estimate]
    for _ in range(reps - 1):
        restore()
        times.append(clock.time(call))
    return statistics.median(times)


class _Clock:
    def time(self, call: Callable[[], Any]) -> float:
        raise NotImplementedError

    def wait(self) -> None:
        raise NotImplementedError


class _HostClock(_Clock):
    """Wall time (the simulator: its launches finish before they return)."""

    def time(self, call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    def wait(self) -> None:
        return None


class _DeviceClock(_Clock):
    """Device time between two CUDA events on the legacy default stream, which orders them
    after the work of every blocking stream (fearless's and torch's default ones);
    `fl.synchronize` after each call raises device errors.

    Ahead of the start event the stream gets a memset of FLUSH_BYTES, which flushes L2 as the
    benchmarks do, and a spin kernel (`runtime/spin.py`) that keeps the GPU busy for `gate`
    seconds while the host runs the call's Python and enqueues its kernels. The events then
    time the kernels, not the host: without the wait a 10 us kernel behind 50 us of Python
    measures 60 us, and small shapes rank configurations by host noise. The gate follows the
    host: each call sets the next one to twice its host time (at least GATE_S), and a call
    whose host time outran its gate is timed again behind the longer one."""

    FLUSH_BYTES = 256 << 20
    GATE_S = 200e-6  # the shortest gate
    MAX_GATE_S = 0.05

    def __init__(self) -> None:
        from .runtime import driver
        from .runtime.spin import Spinner

        self.driver = driver
        d = driver.cu()
        self.start = driver.call("cuEventCreate", d.cuEventCreate, 0)
        self.end = driver.call("cuEventCreate", d.cuEventCreate, 0)
        self.stream = d.CUstream(0)
        self.scratch = driver.DeviceAllocation(self.FLUSH_BYTES)
        self.spinner = Spinner()
        self.spinner.load()  # not inside the first timed call: the driver compiles it
        self.gate = self.GATE_S

    def time(self, call: Callable[[], Any]) -> float:
        while True:
            gate = self.gate
            seconds, host = self._time_once(call)
            self.gate = min(self.MAX_GATE_S, max(self.GATE_S, 2 * host))
            if host < 0.8 * gate or gate >= self.MAX_GATE_S:
                return seconds

    def _time_once(self, call: Callable[[], Any]) -> tuple[float, float]:
        """(device seconds between the events, host seconds from the spin to the end event)."""
        d, call_driver = self.driver.cu(), self.driver.call
        call_driver(
            "cuMemsetD32Async",
            d.cuMemsetD32Async,
            self.scratch.ptr,
            0,
            self.FLUSH_BYTES // 4,
            self.stream,
        )
        host = time.perf_counter()
        self.spinner.spin(self.stream, self.gate)
        call_driver("cuEventRecord", d.cuEventRecord, self.start, self.stream)
        call()
        call_driver("cuEventRecord", d.cuEventRecord, self.end, self.stream)
        host = time.perf_counter() - host
        self.wait()
        ms = call_driver("cuEventElapsedTime", d.cuEventElapsedTime, self.start, self.end)
        return float(ms) * 1e-3, host

    def wait(self) -> None:
        from .runtime.device_errors import synchronize

        synchronize()

    def __del__(self) -> None:
        d = self.driver.cu()
        for event in (getattr(self, "start", None), getattr(self, "end", None)):
            if event is not None:
                d.cuEventDestroy(event)


def _device_name(on_device: bool) -> str:
    if not on_device:
        return "sim"
    from .runtime import driver

    info = driver.device_info()
    return f"{info.name}|{info.arch}"


def _snapshot(name: str, value: Any, *, zero: bool) -> Callable[[], None]:
    """A function that puts `value`'s contents back (or zeroes them)."""
    from .runtime.partition import Partition
    from .runtime.tensor import Tensor

    if isinstance(value, Partition):
        value = value.tensor
    if isinstance(value, np.ndarray):
        saved = np.zeros_like(value) if zero else value.copy()
        return functools.partial(np.copyto, value, saved)
    if isinstance(value, Tensor):
        host = value._host  # a moved tensor's memory: its partition still owns it
        if host is not None:
            saved = np.zeros_like(host) if zero else host.copy()
            return functools.partial(np.copyto, host, saved)
        from .runtime import driver
        from .runtime.device_errors import synchronize

        synchronize()
        saved = np.zeros(value.shape, value.dtype.np)
        if not zero:
            driver.copy_device_to_host(saved, value.data_ptr)
        return functools.partial(driver.copy_host_to_device, value.data_ptr, saved)
    if hasattr(value, "clone") and hasattr(value, "copy_"):  # torch
        saved = value.clone()
        if zero:
            saved.zero_()
        return functools.partial(value.copy_, saved)
    raise KernelTypeError(
        f"autotuning cannot restore `{name}`: a `{type(value).__name__}` is not an array it knows",
        user_location(),
        help="pass an fl.Tensor, a NumPy array or a torch tensor",
    )


def _load(path: Path, configs: list[dict[str, Any]]) -> int | None:
    try:
        data = json.loads(path.read_text())
        best = data["best"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for n, cfg in enumerate(configs):
        if {k: repr(v) for k, v in cfg.items()} == best:
            return n
    return None


def _store(path: Path, best: Mapping[str, Any], times: list[float | None]) -> None:
    data = {"best": {k: repr(v) for k, v in best.items()}, "seconds": times}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        Path(tmp).replace(path)
    except OSError:
        pass  # the winner stays in memory; a later process tunes again


class _Progress:
    """One stderr line, once tuning has taken more than PROGRESS_AFTER_S."""

    def __init__(self, name: str, key: Hashable) -> None:
        self.name, self.key = name, key
        self.start = time.perf_counter()
        self.shown = False

    def show(self, n: int, total: int) -> None:
        if time.perf_counter() - self.start < PROGRESS_AFTER_S:
            return
        self.shown = True
        sys.stderr.write(f"\rfearless: autotuning {self.name}: config {n + 1}/{total}")
        sys.stderr.flush()

    def done(self, best: Mapping[str, Any] | None, seconds: float | None) -> None:
        elapsed = time.perf_counter() - self.start
        if not self.shown and elapsed < PROGRESS_AFTER_S:
            return
        if best is None or seconds is None:
            what = "no configuration ran"
        else:
            what = f"chose {dict(best)} ({seconds * 1e3:.3f} ms)"
        sys.stderr.write(f"\rfearless: autotuned {self.name} in {elapsed:.1f} s: {what}\n")
        sys.stderr.flush()
