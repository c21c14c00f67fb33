"""A cubin's resource usage read from the ELF file (backends/cubin_info.py), checked against
what ptxas -v says of the same PTX, and the "resources" stage of `inspect` on both tracks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from fearless.backends import cubin_info
from fearless.backends.toolchain import find_ptxas
from fearless.cli.main import main
from fearless.errors import ToolchainError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# a kernel with a 256-byte local array read at a run-time index: ptxas gives it a stack frame
LOCAL_ARRAY_PTX = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry with_stack(.param .u64 out, .param .u32 i)
{
  .local .align 4 .b8 buf[256];
  .reg .b32 %r<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [i];
  mov.u32 %r2, %tid.x;
  mov.u64 %rd2, buf;
  mul.wide.u32 %rd3, %r2, 4;
  add.u64 %rd4, %rd2, %rd3;
  st.local.u32 [%rd4], %r2;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd4, %rd2, %rd3;
  ld.local.u32 %r3, [%rd4];
  cvta.to.global.u64 %rd5, %rd1;
  st.global.u32 [%rd5], %r3;
  ret;
}
"""


def _ptxas(ptx: str, tmp: Path, arch: str = "sm_90") -> tuple[bytes, dict[str, int]]:
    """The cubin of `ptx` for `arch` and ptxas -v's registers, stack frame and smem."""
    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas")
    (tmp / "k.ptx").write_text(ptx)
    said = subprocess.run(
        [str(ptxas), f"-arch={arch}", "-v", str(tmp / "k.ptx"), "-o", str(tmp / "k.cubin")],
        capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    numbers = {
        key: int(m.group(1)) if (m := re.search(pattern, said)) else 0
        for key, pattern in (
            ("registers", r"Used (\d+) registers"),
            ("stack", r"(\d+) bytes stack frame"),
            ("shared", r"(\d+) bytes smem"),
        )
    }
    return (tmp / "k.cubin").read_bytes(), numbers


def test_a_local_array_is_stack_as_ptxas_says(tmp_path: Path) -> None:
    cubin, said = _ptxas(LOCAL_ARRAY_PTX, tmp_path)
    (got,) = cubin_info.kernel_resources(cubin)
    assert got.name == "with_stack"
    assert (got.registers, got.stack, got.shared) == (said["registers"], said["stack"], 0)
    assert said["stack"] >= 256
    assert "bytes of stack a thread (local memory" in got.describe()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])  # sm_90's section holds a reserved 1 KB
def test_a_simt_kernels_shared_memory_and_registers_as_ptxas_says(
    tmp_path: Path, arch: str
) -> None:
    import simt_kernels as K  # examples/ is on the tests' path (pyproject.toml)

    cubin, said = _ptxas(K.shared_matmul.inspect(stage="ptx", arch=arch), tmp_path, arch)
    (got,) = cubin_info.kernel_resources(cubin)
    assert (got.registers, got.stack, got.shared) == (said["registers"], 0, 2 * 16 * 16 * 4)
    # fearless assembles with nvJitLink, whose register count may differ from ptxas's
    text = K.shared_matmul.inspect(stage="resources", arch="sm_90")
    assert re.search(r"\d+ registers a thread, no stack \(nothing spilled\), 2,048 bytes", text)


def test_a_tile_kernels_resources_come_from_its_tileiras_cubin() -> None:
    from fearless.tile.compiler import render_stage
    from support.tile_examples import ex
    from support.tile_signatures import SIGNATURES

    text = render_stage(ex.matmul_f16.ir_for(SIGNATURES["matmul_f16"]), "resources")
    (line,) = text.splitlines()[1:]
    m = re.fullmatch(r"matmul: (\d+) registers a thread, (.*), ([\d,]+) bytes of shared "
                     r"memory a block", line)  # fmt: skip
    assert m is not None, line
    assert int(m.group(1)) > 0 and int(m.group(3).replace(",", "")) > 0  # its TMA buffers


def test_not_a_cubin_is_a_toolchain_error() -> None:
    with pytest.raises(ToolchainError, match="could not be read as an ELF file"):
        cubin_info.kernel_resources(b"\x7fELF\x02 not really")


def test_the_cli_emits_resources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", f"{EXAMPLES}/simt_kernels.py::shared_matmul", "--emit",
                 "resources"]) == 0  # fmt: skip
    assert "registers a thread" in capsys.readouterr().out
