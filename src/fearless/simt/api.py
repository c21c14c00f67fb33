"""The SIMT track's public objects: `@simt.kernel`, `@simt.device`, launches and `inspect`.

A `Kernel` compiles lazily on its first launch (or `inspect`): frontend -> passes -> (cuda)
LLVM -> PTX -> cubin. The compiled form is kept per target in memory, and on disk through
`cache.py`; a warm launch goes straight to the launcher built for that compiled form.

Globals and closure variables: the compiled form holds the values of the module globals and
closure variables the kernel and its `@simt.device` functions name (a constant is folded in,
a device function inlined). Each launch checks that every one of them is still bound to the
object the compile read (an identity test per name, frontend/source.py `make_guard`); when one
was bound again, to a different value, the kernel is compiled again with the new value, whose
cache key then differs, so the GPU runs the binary built for it. Modules, builtins, attributes
(`cfg.SCALE`) and objects changed in place are not followed: pass such values as arguments.

Launch errors (a missing `[grid, block]`, a bad configuration, keyword arguments, a
PreparedLaunch of another kernel) name the user's line (`runtime.location.user_location`).
"""

from __future__ import annotations

import contextlib
import inspect as pyinspect
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack

from .. import config
from ..abi import CompiledKernel, LaunchContract
from ..crash import user_facing
from ..errors import FearlessError, LaunchContractError
from ..frontend.source import (
    FunctionSource,
    GlobalsGuard,
    check_decorated,
    load_source,
    remember_scope,
)
from ..runtime import device_errors, warmup
from ..runtime import target as target_module
from ..runtime.contract import Dim3, normalize_dims
from ..runtime.launch import keyword_error
from ..runtime.location import user_location
from ..runtime.target import current_target
from .compiler import (
    CompiledIR,
    KernelSpec,
    compile_for_cuda,
    compile_ir,
    global_refs,
    render_stage,
    warm,
)
from .launcher import Launcher, make_launcher
from .types import DeviceFunction

# The registers PTX's `.maxnreg` may give a thread (ptxas takes 16 .. 255 on sm_80 and sm_90).
MIN_REGISTERS, MAX_REGISTERS = 16, 255


class KernelOptions(TypedDict, total=False):
    """The options of `@simt.kernel(...)`, all keywords."""

    block: int | Sequence[int] | None  # the contract's exact block (ntid.* become constants)
    launch_bounds: int | None  # at most this many threads per block
    unsafe: bool  # writes at any index, reported unsafe
    requires: Sequence[str] | str  # relations between lengths checked at every launch
    max_registers: int | None  # numba's name: at most this many registers a thread (.maxnreg)


@dataclass(frozen=True)
class PreparedLaunch:
    """A launch configuration validated once (`kernel.prepare`), bound to its kernel.

    `guard` says whether the globals the launcher's compiled form read still hold the same
    objects (frontend/source.py `make_guard`). Once one was bound again, the launch goes
    through the kernel's current launcher, compiled for the new values and validated again
    on each call: prepare again for the warm path."""

    kernel: Kernel
    grid: Dim3
    block: Dim3
    launcher: Launcher
    guard: Callable[[], bool]
    # The launcher's compiled launch of this configuration (claunch_prepared.c), or None.
    compiled: Callable[[tuple[Any, ...]], int] | None = None

    @user_facing
    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        if kwargs:
            raise keyword_error(self.kernel.name, self.kernel.param_names(), kwargs)
        launcher = self.launcher if self.guard() else self.kernel._prepared_launcher(self)
        launcher.launch(self.grid, self.block, args, stream)


class _Configured:
    """`kernel[grid, block]` (or `[grid, block, stream]`): launches when called."""

    __slots__ = ("block", "grid", "kernel", "stream")

    def __init__(self, kernel: Kernel, grid: Any, block: Any, stream: Any) -> None:
        self.kernel, self.grid, self.block, self.stream = kernel, grid, block, stream

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        # grid and block are validated (and remembered) by the launcher, not here: a warm
        # `k[g, b](...)` costs one dictionary hit for them.
        try:
            if kwargs:
                raise keyword_error(self.kernel.name, self.kernel.param_names(), kwargs)
            self.kernel._launcher().launch(self.grid, self.block, args, self.stream)
        except FearlessError as exc:
            if config.show_internal_frames():
                raise
            raise exc.with_traceback(None) from None


class Kernel:
    """A `@simt.kernel` function. Launch with `k[grid, block](...)` or `k(k.prepare(...), ...)`."""

    # Marks a kernel object for the frontends (no import of this module needed), so that a
    # kernel launched or called inside a kernel can be refused as such.
    __fearless_kernel__ = "simt"

    def __init__(self, func: Callable[..., Any], **options: Unpack[KernelOptions]) -> None:
        check_decorated(func, "simt.kernel", "@simt.kernel(block=256)", LaunchContractError)
        unknown = sorted(set(options) - set(KernelOptions.__annotations__))
        if unknown:
            raise LaunchContractError(
                f"@simt.kernel has no option {', '.join(f'`{u}`' for u in unknown)}",
                user_location(),
                help="its options are "
                + ", ".join(f"`{o}`" for o in KernelOptions.__annotations__),
            )
        block = options.get("block")
        launch_bounds = options.get("launch_bounds")
        unsafe = options.get("unsafe", False)
        requires = options.get("requires", ())
        max_registers = options.get("max_registers")
        remember_scope(func)  # a factory's dtype in annotations, under future annotations
        self.func = func
        self.requires: tuple[str, ...] = _requirements(requires)
        self.name: str = func.__name__
        self.unsafe = unsafe
        self.contract = LaunchContract(
            block=normalize_dims(block, "block") if block is not None else None,
            launch_bounds=launch_bounds,
            max_registers=max_registers,
        )
        if launch_bounds is not None and (not _integer(launch_bounds) or launch_bounds <= 0):
            raise LaunchContractError(
                "launch_bounds must be a positive thread count",
                user_location(),
                help="e.g. `launch_bounds=256`",
            )
        if max_registers is not None and not (
            type(max_registers) is int and MIN_REGISTERS <= max_registers <= MAX_REGISTERS
        ):
            raise LaunchContractError(
                f"max_registers must be an int from {MIN_REGISTERS} to {MAX_REGISTERS}, "
                f"not {max_registers!r}",
                user_location(),
                help="e.g. `max_registers=32`: 2048 threads of an SM fit its 65536 registers",
            )
        self.spec = KernelSpec(func, self.contract, self.requires, unsafe)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self._ir: CompiledIR | None = None
        self._compiled: dict[str, CompiledKernel] = {}
        self._launchers: dict[str, Launcher] = {}
        self._configured: dict[Any, _Configured] = {}  # (grid, block) -> k[grid, block]
        # (set_target's override, raw FEARLESS_TARGET, GPU probe, the launcher they chose)
        self._last_launcher: tuple[Any, Any, Any, Launcher] | None = None
        self._src: FunctionSource | None = None  # parsed once, for `global_refs`
        # The globals and closure variables the compiled form read (module docstring).
        self._guard = GlobalsGuard()
        warmup.start("simt", warm)  # the toolchain's first use, while the program goes on

    # ----------------------------------------------------------------------------- compile

    def _check_globals(self) -> None:
        """Record the globals the compiled form reads, or, when one was bound again since,
        drop the compiled form (unless the new values compile alike) and record anew."""
        if self._guard.fresh():
            return
        if self._src is None:
            self._src = load_source(self.func)
        # recorded before compiling: a change during the compile shows at the next launch
        refs = global_refs(self.spec, self._src)
        if self._guard.record(refs):
            self._ir = None
            self._compiled = {}
            self._launchers = {}
            self._last_launcher = None

    def param_names(self) -> list[str]:
        """The kernel's parameters, in order (for messages)."""
        return list(pyinspect.signature(self.func).parameters)

    @user_facing
    def compiled_ir(self) -> CompiledIR:
        """The kernel's IR after the SIMT passes (compiled once per value of its globals)."""
        self._check_globals()
        if self._ir is None:
            self._ir = compile_ir(self.spec)
        return self._ir

    @user_facing
    def compile(self, arch: str | None = None) -> CompiledKernel:
        """Compile for the GPU (PTX, and cubin where the driver can link one)."""
        from ..runtime.target import default_arch

        arch = arch or default_arch()
        self._check_globals()
        ck = self._compiled.get(arch)
        if ck is None:
            ck = compile_for_cuda(self.spec, self.compiled_ir, arch, self._ir)
            self._compiled[arch] = ck
        return ck

    def _launcher(self) -> Launcher:
        # `current_target()` reads FEARLESS_TARGET through the environment (0.7 us, a third of
        # a warm launch). Its answer depends only on what `_target_facts` reads (0.1 us), so
        # while those are the very same objects as last time, so is the launcher.
        # And while the globals the kernel read hold the same objects (an identity test each).
        facts = _target_facts()
        last = self._last_launcher
        if (
            last is not None
            and last[0] is facts[0]
            and last[1] is facts[1]
            and last[2] is facts[2]
            and self._guard.fresh()
        ):
            return last[3]
        self._check_globals()
        target = current_target()
        launcher = self._launchers.get(target)
        if launcher is None:
            launcher = make_launcher(target, self.name, self.compiled_ir, self.compile)
            self._launchers[target] = launcher
        facts = _target_facts()  # current_target() may have probed the GPU just now
        self._last_launcher = (*facts, launcher)
        return launcher

    # ------------------------------------------------------------------------------ launch

    def __getitem__(self, key: Any) -> _Configured:
        # A warm `k[grid, block]` is one dictionary hit: a `_Configured` holds nothing but the
        # three values (validated at launch), so the one built for an equal pair serves again.
        # Only for integers: `1.0` and `True` hash and compare equal to `1`, and must not find
        # the configuration an int made (nor the launcher's remembered dims).
        try:
            made = self._configured[key]
        except (KeyError, TypeError):  # TypeError: unhashable, e.g. a list grid
            pass
        else:  # a kept key is a (grid, block) pair
            if type(key[0]) is int and type(key[1]) is int:
                return made
            if _integral(key[0]) and _integral(key[1]):
                return made
        try:
            return self._configure(key)
        except FearlessError as exc:
            if config.show_internal_frames():
                raise
            raise exc.with_traceback(None) from None

    def _configure(self, key: Any) -> _Configured:
        """`k[grid, block]` (or `[grid, block, stream]`) not found among the configurations
        made so far: made, and kept when its grid and block are integers."""
        if not isinstance(key, tuple) or not 2 <= len(key) <= 3:
            raise LaunchContractError(
                f"`{self.name}[...]` takes a launch configuration `[grid, block]`",
                user_location(),
                help=f"launch as `{self.name}[grid, block](args...)`, e.g. `[(n + 255) // 256, 256]`",
            )
        grid, block = key[0], key[1]
        if not (_integral(grid) and _integral(block)):
            # validated now (a float or bool is refused here), so that the launcher is given
            # plain ints, never a value equal to an int it has validated
            grid, block = normalize_dims(grid, "grid"), normalize_dims(block, "block")
            return _Configured(self, grid, block, key[2] if len(key) == 3 else None)
        if len(key) == 3:  # not kept: the stream would be kept alive
            return _Configured(self, grid, block, key[2])
        made = _Configured(self, grid, block, None)
        if len(self._configured) >= _CONFIGURED_MAX:
            self._configured.clear()
        with contextlib.suppress(TypeError):  # unhashable grid or block: built again next time
            self._configured[key] = made
        return made

    @user_facing
    def prepare(
        self, grid: int | Sequence[int], block: int | Sequence[int] | None = None
    ) -> PreparedLaunch:
        """Validate a launch configuration once; the result launches with `kernel(prep, ...)`."""
        if block is None:
            if self.contract.block is None:
                raise LaunchContractError(
                    f"`{self.name}.prepare` needs a block size: the kernel has no `block=` contract",
                    user_location(),
                    help="pass `block=256` (or declare `@simt.kernel(block=256)`)",
                )
            block = self.contract.block
        g, b = normalize_dims(grid, "grid"), normalize_dims(block, "block")
        launcher = self._launcher()
        launcher.validate(g, b)
        return PreparedLaunch(self, g, b, launcher, self._guard.fresh, launcher.prepared(g, b))

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        # The warm path: no wrapper call, no checks beyond these identity tests and the
        # globals guard of the prepared launch; then, on the GPU, one C call that checks,
        # packs and launches (-1: it launched nothing, and the launcher runs and explains).
        prep = args[0] if args else None
        if type(prep) is PreparedLaunch and prep.kernel is self and not kwargs:
            try:
                if prep.guard():
                    compiled = prep.compiled
                    if compiled is not None and stream is None:
                        done = compiled(args)
                        if done >= 0:
                            if done:  # FEARLESS_SYNC
                                device_errors.synchronize()
                            return
                    launcher = prep.launcher
                else:
                    launcher = self._prepared_launcher(prep)
                launcher.launch(prep.grid, prep.block, args[1:], stream)
            except FearlessError as exc:
                if config.show_internal_frames():
                    raise
                raise exc.with_traceback(None) from None
            return
        self._bad_launch(args, kwargs)

    def _prepared_launcher(self, prep: PreparedLaunch) -> Launcher:
        """The launcher for a PreparedLaunch one of whose globals was bound again since: the
        kernel's current one (compiled again if the new values compile differently)."""
        launcher = self._launcher()
        if launcher is not prep.launcher:
            launcher.validate(prep.grid, prep.block)
        return launcher

    @user_facing
    def _bad_launch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not args or not isinstance(args[0], PreparedLaunch):
            raise LaunchContractError(
                f"`{self.name}` needs a launch configuration",
                user_location(),
                help=f"launch as `{self.name}[grid, block](...)` or "
                f"`{self.name}({self.name}.prepare(grid, block), ...)`",
            )
        prep = args[0]
        if prep.kernel is not self:
            raise LaunchContractError(
                f"this PreparedLaunch belongs to `{prep.kernel.name}`, not `{self.name}`",
                user_location(),
                help=f"prepare it with `{self.name}.prepare(...)`",
            )
        if kwargs:
            raise keyword_error(self.name, self.param_names(), kwargs)

    # ----------------------------------------------------------------------------- inspect

    @user_facing
    def inspect(self, *args: Any, stage: str = "ir", arch: str | None = None) -> str:
        """The text of a compilation stage: "ir", "llvm", "ptx", "sass" or "resources"."""
        self._check_globals()
        return render_stage(self.spec, self.compiled_ir, stage, arch, self._ir)

    def __repr__(self) -> str:
        return f"<simt.kernel {self.name}{' (unsafe)' if self.unsafe else ''}>"


_CONFIGURED_MAX = 256


def _integral(value: Any) -> bool:
    """Whether a grid or block is an integer or a tuple of integers (NumPy's too), no bool."""
    if isinstance(value, tuple):
        return all(_integer(d) for d in value)
    return _integer(value)


def _integer(value: Any) -> bool:
    return type(value) is int or (
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
    )


def _requirements(requires: Any) -> tuple[str, ...]:
    """`requires=` of `@simt.kernel` as a tuple of relations ("len(a) == len(b)"): one string
    or a sequence of them; anything else is E0700 at the decorator's line."""
    items = (requires,) if isinstance(requires, str) else requires
    if isinstance(items, (list, tuple)) and all(isinstance(r, str) for r in items):
        return tuple(items)
    raise LaunchContractError(
        f"`requires=` of @simt.kernel is a relation or a list of them, as strings, not "
        f"{requires!r:.40}",
        user_location(),
        help='e.g. `requires="len(out) == len(x)"` or `requires=["n <= len(x)", ...]`',
    )


def _target_facts() -> tuple[Any, Any, Any]:
    """Everything `current_target()` depends on: `fl.set_target`'s override, FEARLESS_TARGET
    (as stored, `config.target_env_raw`: the same object until the variable is set again)
    and the cached GPU probe (None until probed)."""
    return config._target_override, config.target_env_raw(), target_module._probe


def kernel(func: Callable[..., Any] | None = None, **options: Unpack[KernelOptions]) -> Any:
    """Decorate a SIMT kernel: `@simt.kernel` or `@simt.kernel(block=256, requires=(...))`
    (the options are `KernelOptions`)."""
    if func is not None:
        return Kernel(func, **options)

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, **options)

    return wrap


def device(func: Callable[..., Any]) -> DeviceFunction:
    """Decorate a helper callable from kernels."""
    return DeviceFunction(func)
