"""`@tile.kernel`: specialise per launch signature, check the launch, run on the GPU or simulator.

A launch `k(zp, x, y)` reads each argument's kind and dtype (and a Part's tile shape, a
Const's value) into a `Signature`, compiles that specialisation once per target, takes the grid
from the Partition arguments (all must agree), runs the borrow check (no read-only argument
may share a byte with a partitioned output) and prepares the launch: `sim/tile/interpreter.py`
on "sim", `runtime/tile_gpu.py` on "cuda". That is tile/prepare.py's `prepare_launch`, the
slow path of the runtime's dispatcher (runtime/dispatch.py), taken once per argument key:
later launches whose arguments read the same cheap facts reuse what it prepared. This module
keeps the kernel object: its source and globals guard, its signature, its compiles (per
signature and arch, with the autotuner's compiles ahead) and its two ways to launch.

Globals and closure variables: a specialisation's IR holds the values of the module globals
and closure variables the kernel names (constants are folded in). Every launch checks, by one
identity test per name (frontend/source.py `make_guard`), that each still holds the object the
compile read; when one was bound again to a different value, everything compiled and prepared
is dropped and the next launch compiles with the new value (the tile IR, hence the cache key,
differs). Modules, builtins, attributes (`cfg.SCALE`) and objects changed in place are not
followed: pass such values as arguments (a `tile.Const` for a compile-time one).

Keyword arguments to a launch (`k(z=zp)`) are refused as E0061 at the user's line (by the
dispatcher, which knows the parameters). NumPy
arrays given for `tile.Tensor` parameters on "cuda" are copied to the GPU for the launch
(runtime/host_arrays.py, a one-time HostCopyWarning); outputs are Partitions of fl.Tensors,
so there is nothing to copy back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from ..abi import CompiledTile, Declared, Signature
from ..crash import reraise, user_facing
from ..frontend.source import (
    FunctionSource,
    GlobalsGuard,
    check_decorated,
    load_source,
    remember_scope,
)
from ..ir.tile.kernel import TileHints, TileIR
from ..runtime.dispatch import Dispatcher, Prepared
from ..runtime.target import Target, current_target, default_arch
from .compile_ahead import STATE as AHEAD
from .compile_ahead import applies as ahead_applies
from .compile_ahead import submit as ahead_submit
from .compiles import Compiles
from .grid import check_host_grid
from .prepare import prepare_launch
from .signature import (
    check_annotations,
    declared,
    signature_from_specs,
    signature_of,
    static_signature,
)
from .tuples import Flattening, TupleDispatch


class Kernel:
    """A `@tile.kernel` function: call it with its arguments; the grid comes from the Partitions."""

    # The launches prepared so far, by argument key (runtime/dispatch.py); made at the first
    # launch.
    _dispatch: Dispatcher | TupleDispatch | None = None
    # Its tuple parameters and their views by length (tile/tuples.py); made at the first use.
    _flattening: Flattening | None = None
    # Marks a kernel object for the frontends (no import of this module needed), so that a
    # kernel launched or called inside a kernel can be refused as such.
    __fearless_kernel__ = "tile"

    def __init__(self, func: Callable[..., Any], hints: TileHints | None = None) -> None:
        remember_scope(func)  # a factory's dtype in `tile.Part[dt]`, under future annotations
        self.func = func
        self.hints = hints or TileHints()
        self.name: str = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self._src: FunctionSource | None = None
        self._annotations: list[tuple[str, Any]] | None = None
        # its IR, cubins and loaded modules, per signature (tile/compiles.py)
        self.compiles = Compiles(self.hints)
        self._variants: dict[TileHints, Kernel] = {}  # options(...) results, made once each
        self._grid_dispatch: dict[
            tuple[int, int, int], Dispatcher | TupleDispatch
        ] = {}  # launch(grid): per grid
        self._declared: list[tuple[Any, ...]] = []  # specialise(...) calls, for AOT compiles
        # The globals and closure variables the compiled forms read (see the module docstring).
        self._guard = GlobalsGuard()

    # ---------------------------------------------------------------------- signature

    def source(self) -> FunctionSource:
        if self._src is None:
            self._src = load_source(self.func)
        return self._src

    def _check_globals(self) -> None:
        """Record the globals the compiled forms read, or, when one was bound again since,
        drop every specialisation (unless the new values compile alike) and record anew."""
        if self._guard.fresh():
            return
        refs = tuple(ref for _, _, ref in self.source().free_values() if ref is not None)
        if self._guard.record(refs):
            self._annotations = None  # string annotations are evaluated in the globals
            self.compiles.clear()
            self._dispatch = None
            self._grid_dispatch = {}
            self._flattening = None

    def annotations(self) -> list[tuple[str, Any]]:
        """Each parameter's name and Tile annotation (checked at the first call)."""
        if self._annotations is None:
            self._annotations = check_annotations(self.func, self.source())
        return self._annotations

    def signature_of(self, args: tuple[Any, ...], target: Target) -> tuple[Signature, list[Any]]:
        """The specialisation of a launch and, per parameter, its runtime value or ArrayInfo
        (per element of a tuple parameter: tile/tuples.py)."""
        flattening = self.flattening()
        if flattening is not None:
            view, args = flattening.flatten(self.name, args)
            return signature_of(self.name, view.annotations(), args, target)
        return signature_of(self.name, self.annotations(), args, target)

    def flattening(self) -> Flattening | None:
        """The tuple parameters and their views (None: the kernel has none)."""
        f = self._flattening
        if f is None:
            f = self._flattening = Flattening(self.annotations(), self._view)
        return f if f.at else None

    def _view(self, annotations: list[tuple[str, Any]]) -> Kernel:
        """This kernel over `annotations`, a tuple parameter's elements spread out: it shares
        the source, the globals guard and every compiled form (their signatures differ)."""
        view = Kernel(self.func, self.hints)
        view._src, view._annotations, view._guard = self._src, annotations, self._guard
        view.compiles = self.compiles
        return view

    def declared(self) -> list[Declared]:
        """The parameters as declared, in the runtime's vocabulary (what the dispatcher reads)."""
        return declared(self.annotations())

    def static_signature(self) -> Signature:
        """A signature from the annotations alone, for `inspect` without arguments: Parts of
        rank 1 in tiles of 128, Tensors of rank 1; a Const needs a value."""
        return static_signature(self.name, self.annotations())

    # ------------------------------------------------------------------------ compile

    def ir_for(self, signature: Signature) -> TileIR:
        self._check_globals()
        return self.compiles.ir_for(self.source(), signature)

    @user_facing
    def compile(self, signature: Signature, arch: str | None = None) -> CompiledTile:
        self._check_globals()
        return self.compiles.cubin(self.source(), signature, arch or default_arch())

    def options(
        self,
        *,
        num_ctas: int | None = None,
        occupancy: int | None = None,
        num_worker_warps: int | None = None,
    ) -> Kernel:
        """This kernel with other tileiras hints (a separate compile and cache entry):
        `softmax.options(occupancy=2)(out, x)`. None keeps the decorator's value."""
        h = self.hints
        hints = TileHints(
            num_ctas if num_ctas is not None else h.num_ctas,
            occupancy if occupancy is not None else h.occupancy,
            num_worker_warps if num_worker_warps is not None else h.num_worker_warps,
        )
        if hints == self.hints:
            return self
        other = self._variants.get(hints)
        if other is None:
            other = Kernel(self.func, hints)
            other._src, other._annotations = self._src, self._annotations
            self._variants[hints] = other
        return other

    def specialise(self, *specs: Any) -> Kernel:
        """Declare a launch to compile ahead of time (`fearless compile FILE --arch sm_90`):
        `tile.Spec(shape, dtype).partition(tile)` for a Part, `tile.Spec(shape, dtype)` for a
        Tensor, a value or a dtype for a scalar, the value for a Const (tile/aot.py). The specs
        are checked against the parameters now; returns the kernel, so calls can chain."""
        self.signature_of_specs(specs)
        self._declared.append(tuple(specs))
        return self

    def signature_of_specs(self, specs: Sequence[Any]) -> Signature:
        """The specialisation a launch with arguments like `specs` (tile/aot.py) compiles: a
        tuple parameter's spec is a tuple of specs."""
        flattening = self.flattening()
        if flattening is not None:
            view, flat = flattening.flatten(self.name, specs)
            return signature_from_specs(self.name, view.annotations(), flat)
        return signature_from_specs(self.name, self.annotations(), specs)

    def declared_specialisations(self) -> list[tuple[Any, ...]]:
        """The launches `specialise(...)` declared, in order."""
        return list(self._declared)

    # ------------------------------------------------------------------------- launch

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        # crash.user_facing written inline: a try costs nothing on the warm path, a wrapper
        # call would.
        try:
            if not self._guard.fresh():
                self._check_globals()
            dispatch = self._dispatch or self._make_dispatcher(None)
            if kwargs:
                raise dispatch.keyword_error(kwargs)
            target = current_target()
            if AHEAD.thread is not None and ahead_applies(target):
                return ahead_submit(self, args, target)  # the autotuner's compile pass
            if not dispatch.launched_in_c(args, target, stream):
                dispatch.launch(args, target, stream)
        except Exception as exc:
            reraise(exc, Kernel.__call__, (self, *args))

    def _make_dispatcher(
        self, host_grid: tuple[int, int, int] | None
    ) -> Dispatcher | TupleDispatch:
        """The dispatcher of launches on the partitions' grid (None) or on a host grid; with
        tuple parameters, the one that hands each call to its view's (tile/tuples.py)."""
        flattening = self.flattening()
        if flattening is not None:
            dispatch: Dispatcher | TupleDispatch = TupleDispatch(
                self.name, flattening, lambda view: view._dispatcher(host_grid)
            )
        else:
            dispatch = self._plain_dispatcher(host_grid)
        if host_grid is None:
            self._dispatch = dispatch
        else:
            self._grid_dispatch[host_grid] = dispatch
        return dispatch

    def _dispatcher(self, host_grid: tuple[int, int, int] | None) -> Dispatcher | TupleDispatch:
        """The dispatcher of launches on the partitions' grid (None) or on `host_grid`, made
        at its first use (`__call__` and `launch` inline this on their warm paths)."""
        found = self._dispatch if host_grid is None else self._grid_dispatch.get(host_grid)
        return found or self._make_dispatcher(host_grid)

    def _plain_dispatcher(self, host_grid: tuple[int, int, int] | None) -> Dispatcher:
        def specialise(args: tuple[Any, ...], target: Target) -> tuple[Prepared, list[Any]]:
            return prepare_launch(self, args, target, host_grid)

        return Dispatcher(self.name, self.declared(), specialise, self)

    def launch(self, grid: Any, *args: Any, stream: Any = None) -> None:
        """Run on a grid the host chooses (an int or up to three ints), for persistent kernels:
        each Part is walked with `for t in out.tiles():`, block b taking tiles b, b + G, ...
        (persistent.py), so the grid need not match the partition. A kernel that stores a
        Part's own tile (`out.store(...)`) is refused: only the partition's grid makes that
        disjoint."""
        try:
            dims = check_host_grid(self.name, grid)
            if not self._guard.fresh():
                self._check_globals()
            dispatch = self._grid_dispatch.get(dims) or self._make_dispatcher(dims)
            target = current_target()
            if AHEAD.thread is not None and ahead_applies(target):
                return ahead_submit(self, args, target)
            if not dispatch.launched_in_c(args, target, stream):
                dispatch.launch(args, target, stream)
        except Exception as exc:
            reraise(exc, Kernel.launch, (self, grid, *args))

    # ------------------------------------------------------------------------ inspect

    @user_facing
    def inspect(self, *args: Any, stage: str = "ir", arch: str | None = None) -> str:
        """The text of a stage, "ir", "tileir", "sass" (the cubin disassembled: nvdisasm or
        cuobjdump) or "resources" (registers, stack and shared memory, from the cubin), for
        these arguments; without arguments, for the first launch
        `specialise(...)` declared, else from the annotations alone."""
        if args:
            signature, _ = self.signature_of(args, current_target())
        elif self._declared:
            signature = self.signature_of_specs(self._declared[0])
        else:
            signature = self.static_signature()
        self._check_globals()
        return self.compiles.stage(self.source(), signature, stage, arch or "sm_90")

    def __repr__(self) -> str:
        return f"<tile.kernel {self.name}>"


@overload
def kernel(func: Callable[..., Any], /) -> Kernel: ...


@overload
def kernel(
    *,
    num_ctas: int | None = None,
    occupancy: int | None = None,
    num_worker_warps: int | None = None,
) -> Callable[[Callable[..., Any]], Kernel]: ...


def kernel(
    func: Callable[..., Any] | None = None,
    /,
    *,
    num_ctas: int | None = None,
    occupancy: int | None = None,
    num_worker_warps: int | None = None,
) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """Decorate a Tile kernel: `@tile.kernel`, or with tileiras hints
    `@tile.kernel(num_ctas=2, occupancy=1, num_worker_warps=8)` (see `TileHints`)."""
    hints = TileHints(num_ctas, occupancy, num_worker_warps)

    def wrap(f: Callable[..., Any]) -> Kernel:
        check_decorated(f, "tile.kernel", "@tile.kernel(occupancy=2)")
        return Kernel(f, hints)

    return wrap if func is None else wrap(func)
