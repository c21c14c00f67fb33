"""The one adapter to NVIDIA's Tile IR tools: the bytecode encoders, `tileiras`, `tileirdisasm`.

Everything fearless needs from the `cuda-tile` package goes through here, so that a change of
its (private) `cuda.tile._bytecode` API or of the bytecode format touches this file only:

    encoders()            the encoder module (`write_bytecode`, `TypeTable`, `encode_<Op>`, ...)
    bytecode_version()    the newest bytecode version both the encoders and the installed
                          tileiras accept, asked of `tileiras --list-versions` once per tool
    write_module(...)     one entry function's bytecode, given a callback that emits its body
    entry_hints(...)      kernel hints (num_ctas, occupancy); load_store_hints(...) per load
    compile_cubin(...)    bytecode -> cubin with tileiras (CUDA_HOME set to the wheels' root)
    cached_cubin(...)     the same through the disk cache, keyed by the bytecode (`cubin_key`)
    disassemble(...)      bytecode -> text with tileirdisasm (`inspect(stage="tileir")`, goldens)

Missing tools and failed runs are `ToolchainError`s that say what to install or report.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import cache, config
from ...errors import ToolchainError
from .. import toolchain

# cuda-tile versions whose encoders this adapter was written against (pyproject pins the same).
SUPPORTED_CUDA_TILE = ((1, 7), (1, 8))
# Bytecode versions cuda-tile marks as development-only are never chosen: their format may still
# change under the same number.
_DEV_ONLY = ("13.5",)
TILEIRAS_TIMEOUT_S = 300.0
# How much lower the tileiras processes of a background compile run (Unix niceness): the
# autotuner's compile-ahead pass keeps compiling past its budget while the program goes on, one
# tileiras a core, and at normal priority they took the launching thread's core (a decode loop
# ran at 0.63 of torch beside them, H100, session 36).
BACKGROUND_NICENESS = 10
_background = threading.local()


def compile_in_background(compile: Callable[..., Any], *args: Any) -> Any:
    """`compile(*args)` with the tileiras processes it runs at BACKGROUND_NICENESS below this
    process (tile/compile_ahead.py's worker threads)."""
    _background.on = True
    try:
        return compile(*args)
    finally:
        _background.on = False


def _lower_priority(pid: int) -> None:
    """Run process `pid` at BACKGROUND_NICENESS below this process when this thread compiles
    in the background; nothing where priorities cannot be set."""
    if not getattr(_background, "on", False):
        return
    with contextlib.suppress(AttributeError, OSError):  # not Unix, or the process has ended
        niceness = os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICENESS
        os.setpriority(os.PRIO_PROCESS, pid, niceness)


@functools.cache
def encoders() -> Any:
    """`cuda.tile._bytecode`, imported on first use; ToolchainError when cuda-tile is missing."""
    try:
        bc = _encoders_alone()
    except ImportError as exc:
        raise ToolchainError(
            f"the Tile track needs the `cuda-tile` package (its bytecode encoders): {exc}",
            help="pip install 'fearless[tile]' (or: pip install 'cuda-tile>=1.7,<1.9')",
        ) from None
    return bc


def _encoders_alone() -> Any:
    """`cuda.tile._bytecode` without running `cuda.tile`'s `__init__`, which imports all of cuTile
    Python (its frontend, tuner and cache, multiprocessing): 110 ms of a fresh process's first
    Tile compile against 30 ms for the encoders alone, which import only each other. The module is
    registered under its own name, so a later `import cuda.tile` (a user's cuTile kernels) finds
    and shares it. Once `cuda.tile` is imported, the plain import. Under a lock: the warm-up
    thread and the compile-ahead workers may ask at once, and the import system's own module
    lock does not cover a module executed by hand (a second thread would get it half made)."""
    with _LOADING:
        return _load_encoders_alone()


_LOADING = threading.Lock()


def _load_encoders_alone() -> Any:
    name = "cuda.tile._bytecode"
    if name in sys.modules or "cuda.tile" in sys.modules:
        return importlib.import_module(name)
    package = importlib.util.find_spec("cuda.tile")  # finds it; runs nothing of it
    where = package.submodule_search_locations if package is not None else None
    init = Path(next(iter(where or []), "")) / "_bytecode" / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(init.parent)]
    )
    if not init.is_file() or spec is None or spec.loader is None:
        return importlib.import_module(name)  # a layout this does not know: the plain import
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def cuda_tile_version() -> str:
    """The installed cuda-tile version ("1.7.0"), or "" if it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cuda-tile")
    except PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class Tools:
    tileiras: Path
    tileirdisasm: Path | None
    env: dict[str, str]


def tools() -> Tools:
    """tileiras (and tileirdisasm beside it) with the environment they must run in."""
    tileiras = toolchain.find_tileiras()
    if tileiras is None:
        raise ToolchainError(
            "`tileiras` (the Tile IR assembler) was not found",
            help="pip install nvidia-cuda-tileiras nvidia-cuda-nvcc nvidia-nvvm "
            "(or install CUDA 13.1+ and set CUDA_HOME); `fearless doctor` checks the setup",
        )
    env = config.child_environment()
    root = toolchain.cuda_root_of_wheels()
    if root is not None and tileiras.is_relative_to(root):
        # tileiras prefers $CUDA_HOME's libnvvm; a system CUDA older than 13.1 makes it fail with
        # exit 5 and no message (DESIGN section 4), so point it at the wheels it came with.
        env["CUDA_HOME"] = str(root)
        env.pop("CUDA_PATH", None)
    env["PATH"] = os.pathsep.join([str(tileiras.parent), env.get("PATH", "")])
    return Tools(tileiras, toolchain.find_tileirdisasm(), env)


@functools.cache
def _listed_versions(tileiras: Path, mtime: float, size: int) -> tuple[str, ...]:
    """What `tileiras --list-versions` says, kept in the disk cache under the binary's path,
    time and size: asking costs a process (45 ms), which a fresh process's first compile
    would otherwise wait for every time."""
    key = "tileiras-versions-" + hashlib.sha256(f"{tileiras}|{mtime}|{size}".encode()).hexdigest()
    stored = cache.load(key)
    if isinstance(stored, tuple) and all(isinstance(v, str) for v in stored):
        return stored
    proc = _run([str(tileiras), "--list-versions"], tools().env, "listing bytecode versions")
    listed = tuple(line.strip() for line in proc.stdout.splitlines() if line.strip())
    cache.store(key, listed)
    return listed


def tileiras_versions() -> tuple[str, ...]:
    """The bytecode versions the installed tileiras reads ("13.1", ...), asked once per binary
    (and remembered on disk)."""
    t = tools().tileiras
    st = t.stat()
    return _listed_versions(t, st.st_mtime, st.st_size)


def bytecode_version() -> Any:
    """The newest `BytecodeVersion` both the encoders write and the installed tileiras reads."""
    bc = encoders()
    accepted = set(tileiras_versions())
    usable = [
        v
        for v in bc.BytecodeVersion
        if v.as_string() in accepted and v.as_string() not in _DEV_ONLY
    ]
    if not usable:
        raise ToolchainError(
            "the installed tileiras reads none of the bytecode versions cuda-tile "
            f"{cuda_tile_version()} writes",
            notes=[
                f"tileiras reads {', '.join(sorted(accepted)) or 'nothing'}; the encoders write "
                f"{', '.join(v.as_string() for v in bc.BytecodeVersion)}"
            ],
            help="install matching versions: pip install -U cuda-tile nvidia-cuda-tileiras",
        )
    return max(usable)


def write_module(
    name: str,
    param_types: Callable[[Any], Sequence[Any]],
    body: Callable[[Any, Any, Sequence[Any]], None],
    version: Any = None,
    hints: dict[str, Any] | None = None,
) -> bytes:
    """The bytecode of a module with one entry function `name`.

    `param_types(type_table)` gives the parameter type ids; `body(builder, type_table, params)`
    emits the body (ending with a return); `hints` maps an arch ("sm_90") to its `EntryHints`.
    """
    bc = encoders()
    version = version or bytecode_version()
    buf = bytearray()
    with bc.write_bytecode(num_functions=1, buf=buf, version=version) as writer:
        tt = writer.type_table
        ptypes = list(param_types(tt))
        with writer.function(
            name=name,
            parameter_types=ptypes,
            result_types=(),
            entry_point=True,
            hints=hints or {},
            debug_attr=bc.MISSING_DEBUG_ATTR_ID,
        ) as (builder, params):
            body(builder, tt, params)
    return bytes(buf)


def entry_hints(
    arch: str, num_ctas: int | None, occupancy: int | None, num_worker_warps: int | None = None
) -> dict[str, Any]:
    """`write_module`'s `hints` for one arch (None leaves a hint to tileiras)."""
    hints = encoders().EntryHints(
        num_cta_in_cga=num_ctas, occupancy=occupancy, num_worker_warps_per_cta=num_worker_warps
    )
    return {arch: hints}


def check_worker_warps(warps: int, version: Any) -> None:
    """tileiras reads `num_worker_warps` from bytecode 13.3 on, other values than 4 and 8 from
    13.5 on; a CompileError says which tileiras the hint needs."""
    from ...errors import CompileError

    bc = encoders()
    need = bc.BytecodeVersion.V_13_3 if warps in (4, 8) else bc.BytecodeVersion.V_13_5
    if version < need:
        raise CompileError(
            f"`num_worker_warps={warps}` needs Tile IR bytecode {need.as_string()}, but the "
            f"installed tileiras reads up to {version.as_string()}",
            help="use num_worker_warps=4 or 8, or install a newer nvidia-cuda-tileiras",
        )


def load_store_hints(arch: str, latency: int | None, allow_tma: bool) -> Any:
    """The `optimization_hints` attribute of one load or store, for one arch."""
    from cuda.tile._bytecode.attribute import make_load_store_hints

    hint = encoders().LoadStoreHints(latency=latency, allow_tma=allow_tma)
    return make_load_store_hints({arch: hint})


def cached_cubin(bytecode: bytes, arch: str) -> bytes:
    """`compile_cubin` through the disk cache, keyed by what tileiras reads (`cubin_key`).

    The Tile cache key (tile/compiler.py `cache_key`) changes with any change of the Tile
    compiler's source, or of the kernel's own text: both are needed to reuse a compiled kernel
    without building its IR. Below it, a kernel whose bytecode such a change left as it was
    (a fearless upgrade that did not touch its lowering, a comment edited in its body) takes its
    cubin from here, after its IR and bytecode (tens of milliseconds), not from tileiras
    (seconds for an attention kernel)."""
    key = cubin_key(bytecode, arch)
    hit = cache.load(key)
    if isinstance(hit, bytes):
        return hit
    cubin = compile_cubin(bytecode, arch)
    cache.store(key, cubin)
    return cubin


def cubin_key(bytecode: bytes, arch: str, opt_level: int = 3) -> str:
    """The cache key of tileiras's cubin of `bytecode`: the bytecode, the arch, the optimisation
    level and the tileiras binary (its size and the bytecode versions it reads: another tileiras
    compiles anew)."""
    t = tools().tileiras
    h = hashlib.sha256(bytecode)
    h.update(f"|{arch}|O{opt_level}|{t.stat().st_size}|{','.join(tileiras_versions())}".encode())
    return "tileiras-" + h.hexdigest()


def compile_cubin(bytecode: bytes, arch: str, opt_level: int = 3) -> bytes:
    """Assemble Tile IR bytecode into a cubin for `arch` ("sm_90") with tileiras."""
    t = tools()
    with tempfile.TemporaryDirectory(prefix="fearless-tileir-") as tmp:
        src = Path(tmp) / "kernel.tileirbc"
        out = Path(tmp) / "kernel.cubin"
        src.write_bytes(bytecode)
        cmd = [str(t.tileiras), str(src), "-o", str(out), "--gpu-name", arch, f"-O{opt_level}"]
        _run(cmd, t.env, f"assembling Tile IR for {arch}", explain=_failed_remarks)
        return out.read_bytes()


def _failed_remarks(cmd: list[str], env: dict[str, str]) -> list[str]:
    """What tileiras's remarks say failed, from the same command run again with them on (a
    failing compile says only "failed to compile Tile IR program"): e.g. "Failed to select TMA
    store instruction (Shape = [64, 128, 1, 1])". Empty when that run gives none."""
    try:
        proc = subprocess.run(
            [*cmd, "--remarks=all"], env=env, capture_output=True, text=True,
            timeout=TILEIRAS_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    found: list[str] = []
    lines = (proc.stderr + proc.stdout).splitlines()
    for n, line in enumerate(lines):
        _, sep, what = line.partition("remark[failed]:")
        if sep:
            details = []
            for more in lines[n + 1 :]:
                if "remark[" in more or not more.strip():
                    break
                _, eq, note = more.partition("= note:")
                if eq:
                    details.append(note.strip())
            found.append(what.strip() + (f" ({'; '.join(details)})" if details else ""))
    return [f"tileiras's remarks: {r}" for r in dict.fromkeys(found)]


def disassemble(bytecode: bytes) -> str:
    """The bytecode as Tile IR text (tileirdisasm)."""
    t = tools()
    if t.tileirdisasm is None:
        raise ToolchainError(
            "`tileirdisasm` was not found beside tileiras",
            help="pip install -U nvidia-cuda-tileiras",
        )
    with tempfile.TemporaryDirectory(prefix="fearless-tileir-") as tmp:
        src = Path(tmp) / "kernel.tileirbc"
        src.write_bytes(bytecode)
        return _run([str(t.tileirdisasm), str(src)], t.env, "disassembling Tile IR").stdout


def _run(
    cmd: list[str],
    env: dict[str, str],
    what: str,
    explain: Callable[[list[str], dict[str, str]], list[str]] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`cmd`'s completed run; a ToolchainError when it fails, with `explain`'s notes on why."""
    try:
        with subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as child:
            _lower_priority(child.pid)
            try:
                out, err = child.communicate(timeout=TILEIRAS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise ToolchainError(
                    f"{Path(cmd[0]).name} took longer than {TILEIRAS_TIMEOUT_S:.0f} s {what}",
                    help="smaller tile shapes compile faster",
                ) from None
    except OSError as exc:
        raise ToolchainError(
            f"could not run {cmd[0]}: {exc}", help="`fearless doctor` checks the toolchain"
        ) from None
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    if proc.returncode != 0:
        text = (proc.stderr + proc.stdout).strip()
        notes = [f"{Path(cmd[0]).name} said: {text}"] if text else []
        if explain is not None:
            notes += explain(cmd, env)
        if proc.returncode == 5 and not text:
            notes.append("exit 5 without a message usually means a libnvvm older than 13.1")
        raise ToolchainError(
            f"{Path(cmd[0]).name} failed (exit {proc.returncode}) {what}",
            notes=notes,
            help="if the bytecode is at fault this is a fearless bug: please report it with "
            "FEARLESS_DUMP=ir,tileir output; `fearless doctor` checks the toolchain",
        )
    return proc
