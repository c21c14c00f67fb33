"""The SIMT compilation driver: Python -> IR (+ passes) -> LLVM -> PTX -> cubin, with caching.

    compile_ir        frontend and the pass pipeline; the simulator runs its result
    compile_for_cuda  LLVM lowering, PTX, cubin (when the driver can link one), on-disk cache
    render_stage      the text `Kernel.inspect` and `fearless inspect` print
FEARLESS_DUMP=ir,llvm,ptx writes each stage to FEARLESS_DUMP_DIR when it is produced.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__, cache, config
from ..abi import CompiledKernel, LaunchContract, ParamSpec, SiteInfo
from ..dtypes import DType
from ..errors import FearlessError, ToolchainError
from ..frontend.kernel import build_kernel_ir
from ..frontend.source import FunctionSource, load_source
from ..ir.core import Function
from ..ir.printer import print_function
from .passes.options import PassOptions
from .pipeline import run_pipeline
from .requires import parse_requires

if TYPE_CHECKING:
    from .api import Kernel


@dataclass
class CompiledIR:
    fn: Function
    params: tuple[ParamSpec, ...]
    sites: tuple[SiteInfo, ...]
    contract: LaunchContract
    checks_removed: int
    source: FunctionSource

    def ck_for_sim(self) -> CompiledKernel:
        """A CompiledKernel without code: what the simulator's error messages need."""
        return CompiledKernel(
            self.fn.name, self.fn.name, self.params, self.sites, self.contract, arch="sim"
        )


def compile_ir(
    func: Callable[..., Any],
    contract: LaunchContract,
    *,
    unsafe: bool,
    requires_text: tuple[str, ...] = (),
) -> CompiledIR:
    from .api import resolve_annotations

    src = load_source(func)
    kir = build_kernel_ir(src, resolve_annotations(func), unsafe=unsafe)
    requires = parse_requires(requires_text, kir.params, src.loc(src.tree))
    options = PassOptions(
        insert_checks=not unsafe,
        len_relations=[r.relation for r in requires if r.relation is not None],
    )
    run_pipeline(kir.fn, options)
    c = LaunchContract(
        contract.block, contract.launch_bounds, index_dims=kir.index_dims, requires=requires
    )
    ir = CompiledIR(kir.fn, kir.params, tuple(options.sites), c, options.checks_removed, src)
    _dump("ir", src.name, render_ir(ir))
    return ir


def render_ir(ir: CompiledIR) -> str:
    remaining = sum(len(op.attrs["sites"]) for op in ir.fn.ops() if op.opname == "check.bounds")
    header = (
        f"// kernel {ir.fn.name}: {remaining} bounds check(s) remain on the device, "
        f"{ir.checks_removed} proven by guards and removed\n"
    )
    return header + print_function(ir.fn)


@functools.cache
def compiler_digest() -> str:
    """sha256 of the compiler's own source: a changed compiler never reuses old binaries."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for part in ("abi.py", "dtypes.py", "frontend", "ir", "simt", "backends"):
        path = root / part
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def cache_key(kernel: Kernel, arch: str) -> str:
    """sha256 of the kernel's source, the globals it resolves, its options and the versions."""
    import llvmlite

    h = hashlib.sha256()
    seen: set[int] = set()

    def add_function(func: Callable[..., Any]) -> None:
        if id(func) in seen:
            return
        seen.add(id(func))
        src = load_source(func)
        h.update(src.text.encode())
        for node in ast.walk(src.tree):
            if isinstance(node, ast.Name):
                found, obj = src.lookup(node.id)
                if found:
                    add_global(node.id, obj)

    def add_global(name: str, obj: Any) -> None:
        from .api import DeviceFunction

        if isinstance(obj, DeviceFunction):
            add_function(obj.func)
        elif isinstance(obj, bool | int | float | str | DType):
            h.update(f"{name}={obj!r};".encode())
        elif hasattr(obj, "__name__"):
            h.update(f"{name}->{getattr(obj, '__module__', '')}.{obj.__name__};".encode())

    add_function(kernel.func)
    h.update(
        repr(
            (
                kernel.contract,
                kernel.requires,
                kernel.unsafe,
                arch,
                __version__,
                llvmlite.__version__,
                "simt-abi-2",
                compiler_digest(),
            )
        ).encode()
    )
    return h.hexdigest()


def compile_for_cuda(kernel: Kernel, arch: str) -> CompiledKernel:
    key = cache_key(kernel, arch)
    hit = cache.load(key)
    if isinstance(hit, CompiledKernel):
        return hit
    ir = kernel.compiled_ir()
    from ..backends import llvm as backend

    entry = _entry_name(ir.fn.name)
    coarse = f"{entry}_x{backend.COARSEN}" if backend.coarsenable(ir.fn) else None
    module = backend.lower_function(ir.fn, ir.params, ir.contract, entry, coarse)
    llvm_text = str(module)
    _dump("llvm", ir.fn.name, llvm_text)
    ptx = backend.compile_ptx(module, arch)
    _dump("ptx", ir.fn.name, ptx)
    cubin = None
    try:
        from ..runtime.driver import ptx_to_cubin

        cubin = ptx_to_cubin(ptx, arch)
    except (FearlessError, ImportError, OSError):
        cubin = None  # the driver JIT compiles the PTX at load instead
    ck = CompiledKernel(
        name=ir.fn.name,
        entry=entry,
        params=ir.params,
        sites=ir.sites,
        contract=ir.contract,
        arch=arch,
        ptx=ptx,
        cubin=cubin,
        stages={"llvm": llvm_text},
        coarse_entry=coarse,
        coarsen=backend.COARSEN if coarse else 1,
    )
    cache.store(key, ck)
    return ck


def _entry_name(name: str) -> str:
    return f"fearless_{name}"


def render_stage(kernel: Kernel, stage: str, arch: str | None) -> str:
    stage = stage.lower()
    if stage == "ir":
        return render_ir(kernel.compiled_ir())
    if stage not in ("llvm", "ptx", "sass"):
        raise FearlessError(
            f"unknown stage `{stage}` for a SIMT kernel",
            help="SIMT stages are: ir, llvm, ptx, sass",
        )
    from ..runtime.target import default_arch

    arch = arch or default_arch()
    ck = compile_for_cuda(kernel, arch)
    if stage == "llvm":
        if "llvm" in ck.stages:
            return ck.stages["llvm"]
        from ..backends import llvm as backend

        ir = kernel.compiled_ir()
        return str(backend.lower_function(ir.fn, ir.params, ir.contract, ck.entry))
    if stage == "ptx":
        return ck.ptx
    from ..backends.sass import disassemble

    if ck.cubin is None:
        raise ToolchainError(
            "no cubin to disassemble: the PTX was left to the driver's JIT",
            help="run on a machine with a CUDA driver, or install ptxas",
        )
    return disassemble(ck.cubin)


def _dump(stage: str, name: str, text: str) -> None:
    if stage not in config.dump_stages():
        return
    out = config.dump_dir()
    out.mkdir(parents=True, exist_ok=True)
    suffix = {"ir": "ir", "llvm": "ll", "ptx": "ptx"}.get(stage, stage)
    (out / f"{name}.{suffix}").write_text(text)
