"""SASS text of a cubin through NVIDIA's disassembler (nvdisasm or cuobjdump), when present:
found by toolchain.py (the wheel `nvidia-cuda-nvdisasm`, CUDA_HOME, PATH). No GPU is needed."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from ..errors import ToolchainError
from . import toolchain

DISASSEMBLER_FIX = (
    "pip install nvidia-cuda-nvdisasm (or put the CUDA toolkit's nvdisasm or cuobjdump on PATH)"
)


def disassemble(cubin: bytes) -> str:
    found = toolchain.find_sass_disassembler()
    if found is None:
        raise ToolchainError(
            "no SASS disassembler found (nvdisasm or cuobjdump); no GPU is needed for SASS, "
            "only the disassembler",
            help=DISASSEMBLER_FIX,
        )
    tool = str(found)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        args = [tool, str(path)] if tool.endswith("nvdisasm") else [tool, "--dump-sass", str(path)]
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(f"{Path(tool).name} failed: {proc.stderr.strip()}")
    return proc.stdout
