"""SASS text of a cubin through NVIDIA's disassembler (nvdisasm or cuobjdump), when present."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import ToolchainError


def disassemble(cubin: bytes) -> str:
    tool = shutil.which("nvdisasm") or shutil.which("cuobjdump")
    if tool is None:
        raise ToolchainError(
            "no SASS disassembler found (nvdisasm or cuobjdump)",
            help="install the CUDA toolkit's binary utilities and put them on PATH",
        )
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        args = [tool, str(path)] if tool.endswith("nvdisasm") else [tool, "--dump-sass", str(path)]
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(f"{Path(tool).name} failed: {proc.stderr.strip()}")
    return proc.stdout
