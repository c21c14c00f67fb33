"""Finds NVIDIA's tools and libraries that fearless drives: libdevice, ptxas, tileiras, libnvvm,
and the SASS disassemblers (nvdisasm, cuobjdump).

The pip wheels come first (`nvidia-nvvm`, `nvidia-cuda-nvcc`, `nvidia-cuda-tileiras` all unpack
into `site-packages/nvidia/cu13/`), then `$CUDA_HOME`/`$CUDA_PATH`, then `$PATH`. The wheels win
because they are the versions pyproject pins; a system CUDA is often older (tileiras fails with
exit 5 and no message when it picks up a libnvvm older than 13.1, DESIGN section 4).

Every function looks at the file system when called and caches nothing: callers that need a
tool often (the compilers, the cache key) keep the answer themselves.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from .. import config

# Relative to a CUDA root: the wheels' `nvidia/cu13` or a toolkit's `/usr/local/cuda`.
LIBDEVICE = Path("nvvm/libdevice/libdevice.10.bc")
PTXAS, TILEIRAS, TILEIRDISASM, NVDISASM, CUOBJDUMP = (
    Path("bin", tool) for tool in ("ptxas", "tileiras", "tileirdisasm", "nvdisasm", "cuobjdump")
)
# The wheel ships lib/libnvvm.so.4; a toolkit has nvvm/lib64/libnvvm.so.
LIBNVVM = (Path("lib/libnvvm.so.4"), Path("nvvm/lib64/libnvvm.so"), Path("nvvm/lib64/libnvvm.so.4"))


def wheel_cuda_roots() -> list[Path]:
    """Every `nvidia/cuXX` folder of the installed NVIDIA wheels, newest CUDA major first."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    roots: list[Path] = []
    for location in spec.submodule_search_locations:
        found = [p for p in Path(location).glob("cu[0-9]*") if p.is_dir() and p.name[2:].isdigit()]
        roots.extend(sorted(found, key=lambda p: int(p.name[2:]), reverse=True))
    return roots


def cuda_root_of_wheels() -> Path | None:
    """The wheels' CUDA root (`.../site-packages/nvidia/cu13`), or None without NVIDIA wheels.

    This is the folder to give tileiras as `CUDA_HOME` when a system CUDA is older than 13.1.
    """
    roots = wheel_cuda_roots()
    return roots[0] if roots else None


def _system_cuda_roots() -> list[Path]:
    home = config.cuda_home()
    return [Path(home)] if home else []


def _first_existing(relatives: Iterable[Path], roots: Iterable[Path]) -> Path | None:
    rels = list(relatives)
    for root in roots:
        for rel in rels:
            candidate = root / rel
            if candidate.is_file():
                return candidate
    return None


def _find_tool(rel: Path) -> Path | None:
    found = _first_existing([rel], [*wheel_cuda_roots(), *_system_cuda_roots()])
    if found is not None:
        return found
    on_path = shutil.which(rel.name)
    return Path(on_path) if on_path else None


def find_libdevice() -> Path | None:
    """`libdevice.10.bc`, the bitcode of CUDA's math functions (wheel `nvidia-nvvm`)."""
    return _first_existing([LIBDEVICE], [*wheel_cuda_roots(), *_system_cuda_roots()])


def find_ptxas() -> Path | None:
    """The `ptxas` assembler, PTX -> cubin (wheel `nvidia-cuda-nvcc`)."""
    return _find_tool(PTXAS)


def find_tileiras() -> Path | None:
    """The `tileiras` assembler, Tile IR bytecode -> cubin (wheel `nvidia-cuda-tileiras`)."""
    return _find_tool(TILEIRAS)


def find_tileirdisasm() -> Path | None:
    """`tileirdisasm`, which prints Tile IR bytecode as text (ships with tileiras)."""
    return _find_tool(TILEIRDISASM)


def find_sass_disassembler() -> Path | None:
    """`nvdisasm` (wheel `nvidia-cuda-nvdisasm`), else `cuobjdump`: cubin -> SASS text."""
    return _find_tool(NVDISASM) or _find_tool(CUOBJDUMP)


def find_libnvvm() -> Path | None:
    """`libnvvm`, which tileiras loads (wheel `nvidia-nvvm`)."""
    return _first_existing(LIBNVVM, [*wheel_cuda_roots(), *_system_cuda_roots()])


# Most specific first: ptxas prints "release 13.5, V13.5.37".
_VERSIONS = (
    re.compile(r"\bV(\d+\.\d+\.\d+)"),
    re.compile(r"release (\d+\.\d+)"),
    re.compile(r"(\d+\.\d+(?:\.\d+)?)"),
)


def tool_version(tool: Path, timeout: float = 30.0) -> str | None:
    """The version a CUDA tool reports for `--version` ("13.5.37"), or None if it cannot run."""
    try:
        proc = subprocess.run(
            [str(tool), "--version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stdout + proc.stderr
    for pattern in _VERSIONS:
        match = pattern.search(text)
        if match is not None:
            return match.group(1)
    return None
