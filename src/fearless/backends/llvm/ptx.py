"""LLVM IR -> PTX with llvmlite's NVPTX target: libdevice linking, optimisation, emission, ptxas.

The backend's entry points (`lower_function` lives in `lower.py`, re-exported here):

    lower_function(fn, params, contract, entry, coarse_entry=None)
                                  SIMT IR -> llvmlite module with the kernel ABI of abi.py
    compile_ptx(module, "sm_90")  parse (own LLVM context) -> link libdevice if `__nv_*` is called
                                  -> internalise all but the kernels -> O3 (new pass manager)
                                  -> PTX text
    ptxas_check(ptx, "sm_90")     assemble with ptxas -v and return its resource report

Floating-point settings, chosen for bit-exact agreement with the NumPy simulator:
  * no FMA contraction: the lowering never sets `contract`/`fast` flags and the target machine
    keeps LLVM's default fusion mode (only flagged instructions fuse), so a*b+c stays
    `mul.rn` + `add.rn` — the explicit `.rn` also forbids ptxas to fuse them;
  * IEEE division and square root (`div.rn.f32`, `sqrt.rn.f32`): NVPTX's defaults for `fdiv`
    and `llvm.sqrt` without fast-math flags;
  * no flush-to-zero: module flag `nvvm-reflect-ftz` = 0 and no denormal-mode attributes, so
    our own arithmetic never carries `.ftz`; libdevice takes its IEEE-subnormal paths;
  * libdevice's precise square root (`__CUDA_PREC_SQRT` = 1, as nvcc's default
    `-prec-sqrt=true`): LLVM 22's NVVMReflect reads it only from the process-wide option
    `-nvvm-reflect-add`, set once here.
What remains inside libdevice bodies is NVIDIA's: approximate seeds such as
`rcp.approx.ftz.f64` (PTX has no non-FTZ form) or `ex2.approx.ftz.f32` on range-reduced
arguments, whose flushing cannot reach the result — the same PTX nvcc -ftz=false produces.

Each call parses into a fresh LLVM context and builds its own target machine, so kernels may
compile on several threads. Only immutable things are kept per process: the libdevice bitcode
bytes (re-parsing them costs ~20 ms, less than cloning a parsed module) and LLVM's one-time
initialisation.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

from ...errors import InternalError, ToolchainError
from ..toolchain import find_libdevice, find_ptxas
from . import loops as llvm_loops
from .lower import COARSEN, TRIPLE, coarsenable, lower_function, lower_variants

__all__ = [
    "COARSEN",
    "PTX_FEATURES",
    "check_arch",
    "coarsenable",
    "compile_ptx",
    "lower_function",
    "lower_variants",
    "ptxas_check",
]

# Supported targets and the PTX ISA version each needs at least (sm_90a needs PTX 8.0).
# The lowest version keeps the PTX loadable by the oldest driver that knows the GPU.
PTX_FEATURES: dict[str, str] = {"sm_80": "+ptx70", "sm_90": "+ptx78", "sm_90a": "+ptx80"}


def check_arch(arch: str) -> str:
    """`arch` if fearless can compile for it, else a ToolchainError saying which ones it can."""
    if arch not in PTX_FEATURES:
        raise ToolchainError(
            f"cannot compile for GPU architecture `{arch}`",
            help=f"use one of {', '.join(PTX_FEATURES)} (FEARLESS_ARCH or arch=...)",
        )
    return arch


def compile_ptx(module: ir.Module | str, arch: str = "sm_90", *, opt_level: int = 3) -> str:
    """The PTX of an LLVM module from `lower_function` (or its text) for `arch`."""
    check_arch(arch)
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0..3, not {opt_level}")
    _initialise_llvm()
    tm = _target_machine(arch, opt_level)
    context = llvm.create_context()
    mod = _parse(llvm_loops.link_loop_ids(str(module)), context)
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    # The kernels are the externally visible definitions before linking; everything else
    # (our helpers, libdevice) becomes internal so the optimiser may inline and delete it.
    kernels = {
        f.name for f in mod.functions if not f.is_declaration and f.linkage.name != "internal"
    }
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        mod.link_in(_parse_libdevice(mod, context))
    for gv in [*mod.functions, *mod.global_variables]:
        if not gv.is_declaration and gv.name not in kernels:
            gv.linkage = llvm.Linkage.internal
    _optimise(mod, tm, opt_level)
    return str(tm.emit_assembly(mod))


def ptxas_check(ptx: str, arch: str) -> str:
    """Assemble `ptx` for `arch` with ptxas -v; its resource report, or a ToolchainError."""
    check_arch(arch)
    ptxas = find_ptxas()
    if ptxas is None:
        raise ToolchainError(
            "ptxas was not found",
            help="pip install nvidia-cuda-nvcc (or set CUDA_HOME to a CUDA toolkit)",
        )
    with tempfile.TemporaryDirectory(prefix="fearless-ptxas-") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        cmd = [str(ptxas), f"-arch={arch}", "-v", "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolchainError(f"could not run ptxas: {exc}") from None
    report = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise ToolchainError(
            f"ptxas rejected the PTX for {arch} (exit {proc.returncode})",
            notes=report.splitlines() or ["ptxas printed nothing"],
        )
    return report


# --------------------------------------------------------------------------------- internals


def warm() -> None:
    """LLVM's one-time set-up now (runtime/warmup.py: before the first compile needs it)."""
    _initialise_llvm()


_INIT_LOCK = threading.Lock()  # the warm-up's thread and a first compile may both ask


def _initialise_llvm() -> None:
    """LLVM's process-wide setup, once, under a lock: functools.cache alone would let two
    threads that miss together both run it (LLVM's target registry is not made to be filled
    from two threads at once, and the option would be added twice)."""
    with _INIT_LOCK:
        _initialise_once()


@functools.cache
def _initialise_once() -> None:
    """The NVPTX target and libdevice's precise sqrt."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.set_option("fearless", "-nvvm-reflect-add=__CUDA_PREC_SQRT=1")


def _target_machine(arch: str, opt_level: int) -> llvm.TargetMachine:
    # Cheap to build (well under a millisecond) and not safe to share between threads.
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(
        cpu=arch, features=PTX_FEATURES[arch], opt=opt_level, codemodel="default"
    )


def _parse(text: str, context: llvm.ContextRef) -> llvm.ModuleRef:
    try:
        mod = llvm.parse_assembly(text, context=context)
        mod.verify()
    except RuntimeError as exc:
        raise InternalError(f"the backend produced invalid LLVM IR: {exc}") from None
    return mod


@functools.cache
def _libdevice_bitcode() -> bytes:
    path = find_libdevice()
    if path is None:
        raise ToolchainError(
            "libdevice (libdevice.10.bc) was not found; math functions need it",
            help="pip install nvidia-nvvm (or set CUDA_HOME to a CUDA toolkit)",
        )
    return path.read_bytes()


def _parse_libdevice(mod: llvm.ModuleRef, context: llvm.ContextRef) -> llvm.ModuleRef:
    lib = llvm.parse_bitcode(_libdevice_bitcode(), context=context)
    lib.triple = mod.triple  # libdevice says "nvptx64-nvidia-gpulibs"
    lib.data_layout = mod.data_layout
    # The linker copies a linkonce definition only when something references it: the kernel
    # gets the few functions it calls instead of all ~350, and O3 has nothing to delete
    # (exp: 31 ms instead of 73 ms in all). Its functions are one definition each, so "odr".
    for fn in lib.functions:
        if not fn.is_declaration:
            fn.linkage = llvm.Linkage.linkonce_odr
    return lib


def _optimise(mod: llvm.ModuleRef, tm: llvm.TargetMachine, opt_level: int) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    if opt_level == 0:
        pm.add_global_dead_code_eliminate_pass()  # drop the unused rest of libdevice
    pm.run(mod, pb)
