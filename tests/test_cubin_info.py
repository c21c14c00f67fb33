"""A cubin's resource usage read from the ELF file (backends/cubin_info.py), checked against
what ptxas -v says of the same PTX, and the "resources" stage of `inspect` on both tracks; the
block size and setmaxnreg counts read from the code, and the check that a warp group's
setmaxnreg.inc can be met (tileiras's sparse MLA at occupancy 2 could not, and hung)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import fearless as fl
from fearless.backends import cubin_info
from fearless.backends.toolchain import find_ptxas
from fearless.cli.main import main
from fearless.errors import ToolchainError
from fearless.runtime import tile_gpu
from fearless.runtime.target import current_target

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


# a warp-specialised kernel in miniature: the first `raised` warp groups of 384 threads raise
# themselves to `inc` registers, the others lower themselves to 32 (ptxas gives it `maxnreg`)
SETMAXNREG_PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry ws(.param .u64 out) .reqntid 384, 1, 1 .maxnreg {maxnreg}
{{
  .reg .b32 %r<2>;
  .reg .pred %p<2>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, {raised_threads};
  @%p1 bra RAISE;
  setmaxnreg.dec.sync.aligned.u32 32;
  bra.uni STORE;
RAISE:
  setmaxnreg.inc.sync.aligned.u32 {inc};
STORE:
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r1;
  ret;
}}
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


def test_a_kernel_without_setmaxnreg_reports_none(tmp_path: Path) -> None:
    cubin, _ = _ptxas(LOCAL_ARRAY_PTX, tmp_path)
    (got,) = cubin_info.kernel_resources(cubin)
    assert (got.threads, got.setmaxnreg_inc, got.setmaxnreg_dec) == (0, (), ())  # no .reqntid
    assert cubin_info.unsatisfiable_setmaxnreg(got) is None


@pytest.mark.parametrize(
    ("maxnreg", "inc", "raised", "hangs"),
    [(80, 224, 1, True),  # 128 x 224 + 256 x 32 = 36,864 > 384 x 80 = 30,720
     (80, 176, 1, False),  # 128 x 176 + 256 x 32 = 30,720: just fits
     (168, 232, 2, False)],  # 2 x 128 x 232 + 128 x 32 = 63,488 <= 64,512
)  # fmt: skip
def test_setmaxnreg_is_read_from_the_code_and_checked_against_the_block(
    tmp_path: Path, maxnreg: int, inc: int, raised: int, hangs: bool
) -> None:
    ptx = SETMAXNREG_PTX.format(maxnreg=maxnreg, inc=inc, raised_threads=128 * raised)
    cubin, said = _ptxas(ptx, tmp_path, "sm_90a")
    (got,) = cubin_info.kernel_resources(cubin)
    assert (got.registers, got.threads) == (said["registers"], 384) == (maxnreg, 384)
    assert (got.setmaxnreg_inc, got.setmaxnreg_dec) == ((inc,), (32,))
    said_hangs = cubin_info.unsatisfiable_setmaxnreg(got)
    assert (said_hangs is not None) == hangs
    if maxnreg == 80 and hangs:
        assert said_hangs == (
            "384 threads at 80 registers make a 30,720-register block, and the warp group that "
            "raises itself to 224 registers (setmaxnreg) with the other 256 threads at 32 would "
            "need 36,864: the launch would never finish"
        )


def test_tileiras_sparse_mla_cannot_raise_its_registers_at_occupancy_2(
    cubin: Callable[..., bytes],
) -> None:
    """At occupancy 2 tileiras gives sparse MLA's 384 threads 80 registers, and its consumer
    warp group asks for 224: it hung on the H100 (session 20). At occupancy 1 (168 registers,
    two consumer groups at 232) it runs."""
    from fearless.ops.kernels_attention_mla_sparse import make_sparse_mla

    b, g, s, s_kv, d, dp, topk = 1, 16, 64, 128, 128, 64, 64
    q, qpe = fl.zeros((b, 1, g, s, d), dtype=fl.bf16), fl.zeros((b, 1, g, s, dp), dtype=fl.bf16)
    kv, kpe = fl.zeros((b, 1, s_kv, d), dtype=fl.bf16), fl.zeros((b, 1, s_kv, dp), dtype=fl.bf16)
    indices, err = fl.zeros((b, s, 1, topk), dtype=fl.i32), fl.zeros((1,), dtype=fl.i32)
    out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, g, 1, d))
    args = (out, q, qpe, kv, kv, kpe, indices, err, 0.07, 64, 64)
    kernel = make_sparse_mla(fl.bf16, True)
    hung = cubin(kernel.options(occupancy=2), *args)
    (got,) = cubin_info.kernel_resources(hung)
    assert got.threads == 384 and got.setmaxnreg_inc and got.setmaxnreg_dec
    said = cubin_info.unsatisfiable_setmaxnreg(got)
    assert said is not None and said.endswith("the launch would never finish"), said
    assert f"// sparse_mla hangs: {said}" in cubin_info.describe(hung, "sm_90")
    # the compile keeps the verdict, and the launch refuses it before the GPU sees the cubin
    slow = kernel.options(occupancy=2)
    compiled = slow.compile(slow.signature_of(args, current_target())[0], "sm_90")
    assert compiled.never_finishes == said
    with pytest.raises(fl.LaunchContractError, match="would hang the GPU") as refused:
        tile_gpu.prepare(compiled, {}, None, (1, 1, 1), [])
    assert "occupancy=1" in (refused.value.help or "")
    (runs,) = cubin_info.kernel_resources(cubin(kernel.options(occupancy=1), *args))
    assert runs.threads == 384 and runs.setmaxnreg_inc
    assert cubin_info.unsatisfiable_setmaxnreg(runs) is None


def test_a_tile_matmul_only_lowers_its_registers() -> None:
    """tileiras's matmul (256 threads) only gives registers back: nothing to wait for."""
    from fearless.tile.compiler import compile_cubin
    from support.tile_examples import ex
    from support.tile_signatures import SIGNATURES

    compiled = compile_cubin(ex.matmul_f16.ir_for(SIGNATURES["matmul_f16"]), "sm_90")
    (got,) = cubin_info.kernel_resources(compiled.cubin)
    assert got.threads > 0 and got.setmaxnreg_dec and not got.setmaxnreg_inc
    assert cubin_info.unsatisfiable_setmaxnreg(got) is None
