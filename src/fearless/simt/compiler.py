"""The SIMT compilation driver: Python -> IR (+ passes) -> LLVM -> PTX -> cubin, with caching.

    compile_ir        frontend and the pass pipeline; the simulator runs its result
    compile_for_cuda  LLVM lowering, PTX, cubin (when the driver can link one), on-disk cache
    render_stage      the text `Kernel.inspect` and `fearless inspect` print
FEARLESS_DUMP=ir,llvm,ptx writes each stage to FEARLESS_DUMP_DIR when it is produced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import cache
from ..abi import CompiledKernel, LaunchContract, ParamSpec, Requirement, SiteInfo
from ..backends.stages import Stage, compile_cached, dump, run_stages
from ..dtypes import DType
from ..errors import CompileError, FearlessError, Location, ToolchainError
from ..frontend.source import FunctionSource, GlobalRef, load_source, resolve_annotations
from ..ir.clone import clone_function
from ..ir.core import Function
from ..ir.simt import ops
from ..ir.simt.printer import print_function
from .constants import fingerprint
from .frontend import build_kernel_ir
from .passes.options import PassOptions
from .pipeline import run_pipeline
from .requires import parse_requires
from .types import ArrayAnnotation, DeviceFunction


@dataclass(frozen=True)
class KernelSpec:
    """What the compiler is told about a kernel: its function and its options (plain data;
    the user-facing `Kernel` of api.py holds one and never reaches the compiler itself)."""

    func: Callable[..., Any]
    contract: LaunchContract
    requires: tuple[str, ...] = ()
    unsafe: bool = False

    @property
    def name(self) -> str:
        return str(self.func.__name__)


@dataclass
class FastVariant:
    """The kernel compiled assuming length relations the launcher checks before choosing it."""

    fn: Function
    assumes: tuple[Requirement, ...]
    checks: int


@dataclass
class CompiledIR:
    fn: Function
    params: tuple[ParamSpec, ...]
    sites: tuple[SiteInfo, ...]
    contract: LaunchContract
    checks_removed: int
    source: FunctionSource
    fast: FastVariant | None = None
    # The kernel's `with simt.unsafe():` statements (inspect reports the kernel unsafe).
    unsafe_regions: tuple[Location, ...] = ()
    # The module-level arrays it holds as constants, with the fingerprints of the bytes it
    # froze (constants.py): the cache key of a build from this IR hashes these.
    constants: tuple[tuple[Any, str], ...] = ()

    def ck_for_sim(self) -> CompiledKernel:
        """A CompiledKernel without code: what the simulator's error messages need."""
        return CompiledKernel(
            self.fn.name, self.fn.name, self.params, self.sites, self.contract, arch="sim"
        )


def compile_ir(spec: KernelSpec) -> CompiledIR:
    func, contract, unsafe, requires_text = spec.func, spec.contract, spec.unsafe, spec.requires
    src = load_source(func)
    hints = resolve_annotations(func)
    kir = build_kernel_ir(src, hints, unsafe=unsafe)
    requires = parse_requires(requires_text, kir.params, src.loc(src.tree))
    declared = [r.relation for r in requires if r.relation is not None]
    options = PassOptions(
        insert_checks=not unsafe,
        len_relations=list(declared),
        unsafe_regions=kir.unsafe_regions,
    )
    pristine = clone_function(kir.fn)  # the frontend's IR, for variants: never parsed again
    run_pipeline(kir.fn, options)
    c = LaunchContract(
        contract.block,
        contract.launch_bounds,
        index_dims=kir.index_dims,
        requires=requires,
        max_registers=contract.max_registers,
        block_1d=kir.block_1d,
    )
    ir = CompiledIR(kir.fn, kir.params, tuple(options.sites), c, options.checks_removed, src)
    ir.unsafe_regions = kir.unsafe_regions
    ir.constants = kir.constants
    if not unsafe and count_checks(kir.fn):
        ir.fast = fast_variant(
            pristine, kir.params, declared, count_checks(kir.fn), kir.unsafe_regions
        )
    dump("ir", lambda: {f"{src.name}.ir": render_ir(ir)})
    return ir


def count_checks(fn: Function) -> int:
    return sum(len(op.attrs["sites"]) for op in fn.ops() if op.opname == "check.bounds")


def fast_variant(
    frontend_ir: Function,
    params: tuple[ParamSpec, ...],
    declared: list[tuple[str, str, str]],
    checks: int,
    unsafe_regions: tuple[Location, ...] = (),
) -> FastVariant | None:
    """The kernel again (a clone of the frontend's IR, through the passes again), assuming
    `len(a) >= len(c)` for each output `c` and other 1-D array `a`.

    A guard `i < len(c)` then proves the checks on `a[i]` too. The launcher compares the
    lengths (a few integer compares) and runs this variant only when the assumptions hold, so
    the result is the same with fewer device checks. Only the assumptions that remove checks
    are kept, so that the fast variant is chosen whenever it can be.
    """
    arrays = [p for p in params if p.is_array and p.ndim == 1]
    candidates = [
        (a.name, ">=", c.name) for c in arrays if c.is_output for a in arrays if a is not c
    ]
    if not candidates:
        return None

    def compile_with(assumed: list[tuple[str, str, str]]) -> Function:
        fn = clone_function(frontend_ir)
        options = PassOptions(len_relations=[*declared, *assumed], unsafe_regions=unsafe_regions)
        run_pipeline(fn, options)
        return fn

    best = count_checks(compile_with(candidates))
    if best >= checks:
        return None
    needed = list(candidates)
    for rel in candidates:  # drop each assumption that removes no check
        trial = [r for r in needed if r != rel]
        if count_checks(compile_with(trial)) == best:
            needed = trial
    index = {p.name: i for i, p in enumerate(params)}
    assumes = tuple(
        Requirement(
            f"len({a}) >= len({b})", f"(__len_{index[a]}) >= (__len_{index[b]})", (a, op, b)
        )
        for a, op, b in needed
    )
    return FastVariant(compile_with(needed), assumes, best)


def render_ir(ir: CompiledIR) -> str:
    remaining = sum(len(op.attrs["sites"]) for op in ir.fn.ops() if op.opname == "check.bounds")
    header = (
        f"// kernel {ir.fn.name}: {remaining} bounds check(s) remain on the device, "
        f"{ir.checks_removed} proven by guards and removed\n"
    )
    if ir.fast is not None:
        header += (
            f"// a second variant runs when {' and '.join(r.text for r in ir.fast.assumes)}"
            f" (checked at launch): {ir.fast.checks} bounds check(s) remain in it\n"
        )
    for r in ir.unsafe_regions:
        header += (
            f"// unsafe: `with simt.unsafe():` at line {r.line} writes outputs at any index "
            "(bounds still checked); this kernel is not proven race-free\n"
        )
    return header + print_function(ir.fn)


def compiler_digest() -> str:
    """sha256 of the SIMT compiler's own source: a changed compiler never reuses old binaries."""
    return cache.source_digest(*cache.SIMT_COMPILER)


def dependencies(
    func: Callable[..., Any], src: FunctionSource | None = None
) -> Iterator[FunctionSource | tuple[str, Any, GlobalRef | None]]:
    """What a kernel's compiled form depends on besides its options, in a fixed order: the
    source of the kernel, then each free name it resolves (name, value, where it was found;
    frontend/source.py) and each module attribute chain it names; at each `@simt.device`
    function found so, that function's source and free names in turn (once each)."""
    seen: set[int] = set()

    def walk(
        func: Callable[..., Any], src: FunctionSource
    ) -> Iterator[FunctionSource | tuple[str, Any, GlobalRef | None]]:
        seen.add(id(func))
        yield src
        for name, obj, ref in src.free_values():
            yield name, obj, ref
            if isinstance(obj, DeviceFunction) and id(obj.func) not in seen:
                yield from walk(obj.func, obj.source())

    yield from walk(func, src or load_source(func))


def global_refs(kernel: KernelSpec, src: FunctionSource | None = None) -> tuple[GlobalRef, ...]:
    """The module globals and closure variables the kernel and its device functions read,
    with the objects they hold now: what `Kernel` compares on each launch (make_guard).
    `src`: the kernel's source, if already loaded (its closure cells are read afresh)."""
    return tuple(d[2] for d in dependencies(kernel.func, src) if isinstance(d, tuple) and d[2])


def cache_key(kernel: KernelSpec, arch: str, frozen: Sequence[tuple[Any, str]] = ()) -> str:
    """sha256 of the kernel's source, the globals it resolves (the source of each device
    function it calls, the value of each constant, the dtype, shape and bytes of each NumPy
    array), its options, LLVM's version and the SIMT compiler's own source (which stands for
    the fearless version: an upgrade that left the compiler alone keeps every binary).
    `frozen`: (array, fingerprint) of the arrays an IR already compiled holds, whose bytes may
    have changed in place since (constants.py)."""
    import llvmlite

    h = hashlib.sha256()
    for dep in dependencies(kernel.func):
        if isinstance(dep, FunctionSource):
            h.update(dep.text.encode())
            continue
        name, obj, _ = dep
        if isinstance(obj, DeviceFunction):
            continue  # its source comes next in the walk (or came before)
        if isinstance(obj, bool | int | float | str | DType | ArrayAnnotation):
            # an annotation alias (`In = simt.Slice[fl.f32]`) names a type: its dtype counts
            h.update(f"{name}={obj!r};".encode())
        elif isinstance(obj, np.ndarray):
            held = next((fp for arr, fp in frozen if arr is obj), None)
            h.update(f"{name}={held or fingerprint(obj)};".encode())
        elif hasattr(obj, "__name__"):
            h.update(f"{name}->{getattr(obj, '__module__', '')}.{obj.__name__};".encode())
    h.update(
        repr(
            (
                kernel.contract,
                kernel.requires,
                kernel.unsafe,
                arch,
                llvmlite.__version__,
                "simt-abi-2",
                compiler_digest(),
            )
        ).encode()
    )
    return h.hexdigest()


def compile_for_cuda(
    kernel: KernelSpec,
    compiled_ir: Callable[[], CompiledIR],
    arch: str,
    kept: CompiledIR | None = None,
) -> CompiledKernel:
    """PTX (and cubin) for `arch`, from the disk cache when this kernel was built before;
    `compiled_ir` runs the frontend only on a miss. `kept`: the IR compiled already, if any
    (`compiled_ir` returns it): the key then hashes the array bytes that IR froze."""
    key = cache_key(kernel, arch, kept.constants if kept is not None else ())
    return compile_cached(key, CompiledKernel, lambda: _build_cuda(compiled_ir(), arch))


def cuda_stages(ir: CompiledIR, variants: list[Any], arch: str) -> list[Stage]:
    """The SIMT backend for CUDA: LLVM IR (every variant in one module) -> PTX -> cubin."""
    from ..backends.llvm import ptx as backend

    def link(ptx: str) -> bytes | None:
        try:
            from ..runtime.driver import ptx_to_cubin

            return ptx_to_cubin(ptx, arch)
        except (FearlessError, ImportError, OSError):
            return None  # the driver JIT compiles the PTX at load instead

    return [
        Stage(
            "llvm",
            lambda _: backend.lower_variants(variants, ir.params, ir.contract),
            lambda name, module: {f"{name}.ll": str(module)},
        ),
        Stage(
            "ptx",
            lambda module: backend.compile_ptx(module, arch),
            lambda name, ptx: {f"{name}.ptx": ptx},
        ),
        Stage("cubin", link),
    ]


def _build_cuda(ir: CompiledIR, arch: str) -> CompiledKernel:
    from ..backends.llvm import ptx as backend

    entry = _entry_name(ir.fn.name)
    coarse = f"{entry}_x{backend.COARSEN}" if backend.coarsenable(ir.fn) else None
    variants: list[Any] = [(ir.fn, entry, coarse)]
    fast = fast_coarse = None
    if ir.fast is not None:
        fast = f"{entry}_fast"
        fast_coarse = f"{fast}_x{backend.COARSEN}" if coarse else None
        variants.append((ir.fast.fn, fast, fast_coarse))
    out = run_stages(cuda_stages(ir, variants, arch), ir, ir.fn.name)
    cache.mark_built("simt")  # later processes skip the warm-up (runtime/warmup.py)
    return CompiledKernel(
        name=ir.fn.name,
        entry=entry,
        params=ir.params,
        sites=ir.sites,
        contract=ir.contract,
        arch=arch,
        ptx=out["ptx"],
        cubin=out["cubin"],
        stages={"llvm": str(out["llvm"])},
        coarse_entry=coarse,
        coarsen=backend.COARSEN if coarse else 1,
        fast_entry=fast,
        fast_coarse_entry=fast_coarse,
        fast_assumes=ir.fast.assumes if ir.fast is not None else (),
        cooperative=ops.is_cooperative(ir.fn),
    )


def _entry_name(name: str) -> str:
    return f"fearless_{name}"


def render_stage(
    kernel: KernelSpec,
    compiled_ir: Callable[[], CompiledIR],
    stage: str,
    arch: str | None,
    kept: CompiledIR | None = None,
) -> str:
    stage = stage.lower()
    if stage == "ir":
        return render_ir(compiled_ir())
    if stage not in ("llvm", "ptx", "sass", "resources"):
        raise CompileError(
            f"unknown stage {stage!r} for a SIMT kernel",
            help='SIMT kernels have the stages "ir", "llvm", "ptx", "sass" and "resources"',
        )
    from ..runtime.target import default_arch

    arch = arch or default_arch()
    ck = compile_for_cuda(kernel, compiled_ir, arch, kept)
    if stage == "llvm":
        if "llvm" in ck.stages:
            return ck.stages["llvm"]
        from ..backends.llvm import ptx as backend

        ir = compiled_ir()
        return str(backend.lower_function(ir.fn, ir.params, ir.contract, ck.entry))
    if stage == "ptx":
        return ck.ptx
    from ..backends.sass import disassemble

    if ck.cubin is None:
        raise ToolchainError(
            f"no cubin to read for {stage}: the PTX was left to the driver's JIT",
            help="install ptxas (`pip install nvidia-cuda-nvcc`): it assembles the PTX into a "
            "cubin, no GPU needed",
        )
    if stage == "resources":  # registers, stack (spills) and shared memory, from the cubin
        from ..backends.cubin_info import describe

        return describe(ck.cubin, arch)
    return disassemble(ck.cubin)


def warm() -> None:
    """What a first SIMT compile waits for, done now (runtime/warmup.py runs it on a thread when
    the first kernel is defined): llvmlite imported and LLVM's NVPTX target set up (70 ms), and
    nvJitLink loaded (40 ms)."""
    from ..backends.llvm import ptx as backend
    from ..runtime.driver import warm_linker

    backend.warm()
    warm_linker()
