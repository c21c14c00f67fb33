"""The compiled warm launcher: the C units claunch_*.c and the module claunch.c over them, built
when fearless is installed (setup.py), else with the system's C compiler at first use.

A SIMT launch plan whose parameters are all arrays and int or float scalars (no bool, f16 or
bf16 scalar to convert) and whose `requires=` relations and fast-variant assumptions compare
lengths only gets a C plan here: the
generated Python launcher of launch.py then hands each warm launch to `launch(...)` in C, which
reads the arrays (fl.Tensor fields, or a plain torch.Tensor's accessors), range-checks the
scalars, runs the borrow check, packs the plan's parameter buffer and calls cuLaunchKernel
itself, without the interpreter and without cuda.bindings' argument conversion. Anything else
(another array type, a NumPy array, a wrong dtype, an overlap) returns -1 before launching,
and the Python launcher runs as before: it explains every error. A prepared launch
(`kernel.prepare`) binds its configuration in C once, so that `k(prep, *args)` is one C call
(claunch_prepared.c); launches on the default stream decide it in C as streams.py does
(claunch_streams.c).

`pip install` compiles the module into the package (`fearless/runtime/_fearless_claunch*.so`),
tagged with the digest of its sources (claunch_units.py); it is used when its tag is these
sources'. Otherwise (no compiler at install, an editable install whose C changed since) the
module is compiled at first use, once per source, Python version and platform, into the cache
directory (`FEARLESS_CACHE_DIR/claunch/`), like Triton's launcher. Where no C compiler or no Python
headers are found, or `FEARLESS_CLAUNCH=0`, plans stay on the pure-Python launcher; why is
kept in `unavailable_reason()`.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import config
from ..abi import ParamSpec, Requirement
from ..dtypes import DType
from . import claunch_units, process_gpu, streams
from .borrow import output_pairs

_SOURCES = claunch_units.SOURCES
_lock = threading.Lock()
_module: ModuleType | None = None
_why: str | None = None  # set once building or loading failed
_launch_address: int | None = None  # libcuda's cuLaunchKernel
_prefetching: threading.Thread | None = None  # the build `prefetch` started

ARR1, ARR2 = 1, 2
SCALAR_KINDS = {
    "i8": 10, "i16": 11, "i32": 12, "i64": 13, "u8": 14, "u16": 15, "u32": 16, "u64": 17,
    "f32": 18, "f64": 19,
}  # fmt: skip


def module() -> ModuleType | None:
    """The compiled module, built on first use; None where it cannot be (see the reason)."""
    global _module, _why
    if _module is not None or _why is not None:
        return _module
    with _lock:
        if _module is None and _why is None:
            try:
                _module = _installed() or _load(_build())
            except (OSError, ImportError, subprocess.SubprocessError) as exc:
                _why = f"{type(exc).__name__}: {exc}"
    return _module


def prefetch() -> None:
    """Start building the module on a worker thread, so that the C compiler runs while a
    kernel's first launch compiles the kernel (both launchers call this first); `module()`
    then waits for the build, under the lock."""
    global _prefetching
    if _module is not None or _why is not None or _prefetching is not None:
        return
    if not config.compiled_launcher_enabled():
        return
    _prefetching = threading.Thread(target=module, name="fearless-claunch-build", daemon=True)
    _prefetching.start()


def unavailable_reason() -> str | None:
    """Why launches use the pure-Python launcher (None: they need not)."""
    if not config.compiled_launcher_enabled():
        return "FEARLESS_CLAUNCH=0"
    module()
    return _why


def _installed() -> ModuleType | None:
    """The module `pip install` built into the package (setup.py), if there is one and it was
    built from these very sources (an editable install's C may have changed since)."""
    name = f"{__package__}.{claunch_units.MODULE}"
    if importlib.util.find_spec(name) is None:
        return None
    mod = importlib.import_module(name)
    if getattr(mod, "TAG", "") != claunch_units.tag():
        return None
    return _ready(mod)


def _build() -> Path:
    tag = claunch_units.tag()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    folder = config.cache_dir() / "claunch"
    target = folder / f"_fearless_claunch_{tag}{suffix}"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    compiler = config.c_compiler() or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc or gcc) on PATH")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise OSError(f"no Python.h in {include} (install the Python development headers)")
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    objects = [partial.with_name(f"{partial.name}.{f.stem}.o") for f in _SOURCES]
    try:
        # one compiler per source, at once (0.26 s here against 0.62 s for one command), then
        # the link
        compiles = [
            [compiler, "-O2", "-fPIC", f"-I{include}", "-c", str(f), "-o", str(o)]
            for f, o in zip(_SOURCES, objects, strict=True)
        ]
        running = [
            (cmd, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            for cmd in compiles
        ]
        for cmd, proc in running:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise OSError(f"{' '.join(cmd)} failed: {err.decode().strip()[-2000:]}")
        link = [compiler, "-shared", *map(str, objects), "-o", str(partial)]
        done = subprocess.run(link, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{' '.join(link)} failed: {done.stderr.strip()[-2000:]}")
    finally:
        for o in objects:
            o.unlink(missing_ok=True)
    partial.replace(target)  # atomic: a concurrent build writes the same bytes
    return target


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("_fearless_claunch", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return _ready(mod)


def _ready(mod: ModuleType) -> ModuleType:
    # the default stream (`stream=None`) is decided in C from streams.py's own globals, on the
    # process's GPU (told again if it is chosen after this module loads)
    globals_ = vars(streams)
    process_gpu.on_choice(lambda index: mod.use_streams(globals_, index))
    return mod


def driver_launch_address() -> int:
    """The address of libcuda's cuLaunchKernel (the library cuda.bindings has loaded)."""
    global _launch_address
    if _launch_address is None:
        lib = ctypes.CDLL("libcuda.so.1")  # the driver cuda.bindings loads
        address = ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value
        if not address:
            raise OSError("libcuda has no cuLaunchKernel")
        _launch_address = address
    return _launch_address


OPS = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}


def eligible(
    params: tuple[ParamSpec, ...],
    requires: tuple[Requirement, ...] = (),
    assumes: tuple[Requirement, ...] = (),
) -> bool:
    """Whether the C launcher does what the Python one would for this signature: its relations
    all compare two lengths (`Requirement.relation`)."""
    if any(r.relation is None or r.relation[1] not in OPS for r in requires):
        return False
    if any(r.relation is None or r.relation[1] != ">=" for r in assumes):
        return False
    return all(
        (p.is_array and p.ndim in (1, 2)) or (not p.is_array and p.dtype.name in SCALAR_KINDS)
        for p in params
    )


def make_plan(
    params: tuple[ParamSpec, ...],
    offsets: tuple[int, ...],
    buffer_address: int,
    buffer_size: int,
    pairs: Any,
    device: int,
    tensor_type: type,
    torch_type: type,
    torch_dtype_of: Any,
    requires: tuple[Requirement, ...] = (),
    assumes: tuple[Requirement, ...] = (),
    launch_address: int | None = None,
) -> Any | None:
    """A C plan for one packer layout (`offsets`: ParamPacker's, in ABI order, the thread
    count and error record last), or None where the module is unavailable. The plan packs
    into its own copy of the packer's buffer (`buffer_address`, `buffer_size`: the error
    record's pointer comes along). `pairs` are the (output, other) array pairs of the borrow
    check, None for every pair with an output."""
    mod = module() if config.compiled_launcher_enabled() else None
    if mod is None:
        return None
    entries = []
    k = 0
    for p in params:
        if p.is_array:
            kind = ARR1 if p.ndim == 1 else ARR2
            ext = offsets[k + 1 : k + 1 + p.ndim]
            entries.append(
                (kind, offsets[k], ext[0], ext[-1], p.dtype.itemsize, p.dtype,
                 torch_dtype_of(p.dtype), dlpack_code(p.dtype), int(p.is_output))
            )  # fmt: skip
            k += 1 + p.ndim
        else:
            entries.append((SCALAR_KINDS[p.dtype.name], offsets[k], 0, 0, 0, p.dtype, None, -1, 0))
            k += 1
    arrays = [p for p in params if p.is_array]
    if pairs is None:  # past PAIRWISE_MAX arrays Python sweeps; C compares every pair
        pairs = output_pairs([p.is_output for p in arrays])
    index = {p.name: i for i, p in enumerate(params)}

    def relation(r: Requirement) -> tuple[int, int, int]:
        assert r.relation is not None
        a, op, b = r.relation
        return index[a], OPS[op], index[b]

    address = launch_address if launch_address is not None else driver_launch_address()
    return mod.make_plan(
        address,
        buffer_address,
        buffer_size,
        tuple(offsets),
        offsets[k],
        device,
        tensor_type,
        torch_type,
        tuple(entries),
        tuple((int(o), int(j)) for o, j in pairs),
        tuple(relation(r) for r in requires),
        tuple((relation(r)[0], relation(r)[2]) for r in assumes),
    )


# struct codes (runtime/params.py) of the values a Tile launch packs -> claunch_common.h's kinds
TILE_KINDS = {
    "?": 30, "b": 10, "h": 11, "i": 12, "q": 13, "B": 14, "H": 15, "I": 16, "Q": 31,
    "f": 18, "d": 19,
}  # fmt: skip


def tile_plan(
    function: int,
    grid: tuple[int, int, int],
    buffer_address: int,
    buffer_size: int,
    param_offsets: tuple[int, ...],
    codes: tuple[str, ...],
    value_offsets: tuple[int, ...],
    launch_address: int | None = None,
) -> Any | None:
    """A C plan of one prepared Tile launch (runtime/tile_gpu.py), or None where the module is
    unavailable or a value's code has no C packer (f16; bf16 bits are converted in Python).
    The plan copies the buffer (`buffer_address`, `buffer_size`: the extents and strides are
    already in it) and packs `codes` at `value_offsets` into its copy; `param_offsets` are the
    kernel parameters' offsets in ABI order."""
    mod = module() if config.compiled_launcher_enabled() else None
    if mod is None or any(c not in TILE_KINDS for c in codes):
        return None
    address = launch_address if launch_address is not None else driver_launch_address()
    return mod.tile_plan(
        address,
        function,
        *grid,
        buffer_address,
        buffer_size,
        tuple(param_offsets),
        tuple(TILE_KINDS[c] for c in codes),
        tuple(value_offsets),
    )


# WARM_ATOMIC: a WARM_TENSOR the kernel writes (its torch memory is autograd's: torch_write)
WARM_PART, WARM_TENSOR, WARM_CONST, WARM_SCALAR, WARM_ATOMIC = 1, 2, 3, 4, 5

# DLPack's type codes (kDLInt, kDLUInt, kDLFloat, kDLBool) by DType.kind, and those of the
# floats with a code of their own (kDLBfloat, kDLFloat8_e4m3fn, kDLFloat8_e5m2; DLPack 1.1)
_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_DLPACK_OWN_CODES = {"bf16": 4, "f8e4m3fn": 10, "f8e5m2": 12}


def dlpack_code(dtype: DType) -> int:
    """`dtype` as a DLPack data type, code << 8 | bits (one lane): what claunch_common.c's dl_read
    compares a torch tensor's DLPack description with."""
    code = _DLPACK_OWN_CODES.get(dtype.name, _DLPACK_CODES[dtype.kind])
    return code << 8 | dtype.bits


def tile_warm_plan(
    kinds: tuple[int, ...],
    wants: tuple[Any, ...],
    pairs: Any,
    entries: dict[Any, Any],
    part_type: type,
    tensor_type: type,
    torch_type: type,
    target: Any,
    device: int,
    torch_dtype_of: Any,
) -> Any | None:
    """The compiled Tile warm path of one kernel (runtime/dispatch.py), or None where the module
    is unavailable. `kinds` are WARM_* per parameter, `wants` the dtype of each array
    parameter (None otherwise), `pairs` the borrow check's (output, other) array pairs;
    `entries` (key -> (byte extent of each array, tile plan)) is the caller's dict, which it
    fills as the slow path prepares launches."""
    mod = module() if config.compiled_launcher_enabled() else None
    if mod is None:
        return None
    torch_wants = tuple(torch_dtype_of(w) if w is not None else None for w in wants)
    return mod.tile_warm_plan(
        tuple(kinds),
        tuple(wants),
        torch_wants,
        tuple(dlpack_code(w) if w is not None else -1 for w in wants),
        tuple((int(o), int(j)) for o, j in pairs),
        entries,
        part_type,
        tensor_type,
        torch_type,
        target,
        device,
    )
