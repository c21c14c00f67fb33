"""The Tile IR adapter (backends/tileir/cuda_tile.py): version negotiation, tileiras, tileirdisasm, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import fearless as fl
from fearless import tile
from fearless.backends.tileir import cuda_tile as tileir
from fearless.errors import ToolchainError


def _double(bc):  # a tiny hand-built kernel: z[tile] = x[tile] + x[tile]
    def params(tt):
        return [tt.tile(tt.pointer(tt.F32, bc.PtrAttr.Missing), []), tt.tile(tt.I32, [])]

    def body(b, tt, p):
        tv_t = tt.tensor_view(tt.F32, [bc.DYNAMIC_SHAPE], [1], bc.PtrAttr.Missing)
        tv = bc.encode_MakeTensorViewOp(b, tv_t, p[0], [p[1]], [])
        pv_t = tt.partition_view([64], tv_t, [0], bc.PaddingValue.Zero)
        pv = bc.encode_MakePartitionViewOp(b, pv_t, tv)
        i32 = tt.tile(tt.I32, [])
        bx, _, _ = bc.encode_GetTileBlockIdOp(b, i32, i32, i32)
        t = tt.tile(tt.F32, [64])
        weak = bc.MemoryOrderingSemantics.WEAK
        x, _ = bc.encode_LoadViewTkoOp(b, t, tt.Token, pv, [bx], None, weak, None, None, [False])
        y = bc.encode_AddFOp(b, t, x, x, bc.RoundingMode.NEAREST_EVEN, False)
        bc.encode_StoreViewTkoOp(b, tt.Token, y, pv, [bx], None, weak, None, None, [False])
        bc.encode_ReturnOp(b, [])

    return params, body


def test_version_is_negotiated_with_tileiras() -> None:
    listed = tileir.tileiras_versions()
    assert "13.1" in listed
    chosen = tileir.bytecode_version()
    assert chosen.as_string() in listed
    assert chosen.as_string() != "13.5"  # development-only in cuda-tile: never chosen


def test_the_listed_versions_are_kept_on_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fresh process asks tileiras once per binary: later ones read the disk cache."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    tileir._listed_versions.cache_clear()
    listed = tileir.tileiras_versions()
    tileir._listed_versions.cache_clear()  # as a new process
    ran: list[Any] = []
    monkeypatch.setattr(tileir, "_run", lambda *a: ran.append(a))
    assert tileir.tileiras_versions() == listed and ran == []
    tileir._listed_versions.cache_clear()


def test_the_encoders_load_without_the_rest_of_cutile() -> None:
    """A fresh process's first Tile compile imports `cuda.tile._bytecode` alone (30 ms, not the
    110 ms of all of cuTile Python); a later `import cuda.tile` shares the same module."""
    script = (
        "import sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from fearless.backends.tileir import cuda_tile\n"
        "with ThreadPoolExecutor(8) as pool:  # the warm-up and compile workers ask at once\n"
        "    got = list(pool.map(lambda _: cuda_tile._encoders_alone(), range(8)))\n"
        "assert all(hasattr(m, 'BytecodeVersion') for m in got), 'half made'\n"
        "bc = cuda_tile.encoders()\n"
        "assert all(m is bc for m in got)\n"
        "assert 'cuda.tile' not in sys.modules, 'cuda.tile was imported'\n"
        "assert hasattr(bc, 'write_bytecode') and hasattr(bc, 'BytecodeVersion')\n"
        "import cuda.tile\n"
        "from cuda.tile._bytecode import write_bytecode\n"
        "import cuda.tile._bytecode as again\n"
        "assert again is bc and write_bytecode is bc.write_bytecode\n"
        "assert callable(cuda.tile.kernel)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_bytecode_to_text_and_cubin() -> None:
    bc = tileir.encoders()
    code = tileir.write_module("double", *_double(bc))
    assert code.startswith(b"\x7fTileIR\x00")
    text = tileir.disassemble(code)
    assert "entry @double(%arg0: tile<ptr<f32>>, %arg1: tile<i32>)" in text
    assert "partition_view<tile=(64), padding_value = zero" in text
    cubin = tileir.compile_cubin(code, "sm_90")
    assert cubin[:4] == b"\x7fELF"


def test_missing_tileiras_is_a_toolchain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tileir.toolchain, "find_tileiras", lambda: None)
    with pytest.raises(ToolchainError, match=r"tileiras.*was not found") as info:
        tileir.compile_cubin(b"", "sm_90")
    assert "pip install nvidia-cuda-tileiras" in str(info.value)


def test_bad_bytecode_is_a_toolchain_error_with_the_tool_message() -> None:
    with pytest.raises(ToolchainError, match=r"tileiras failed \(exit \d+\)"):
        tileir.compile_cubin(b"\x7fTileIR\x00garbage", "sm_90")


def test_a_failed_compile_says_what_tileiras_remarks_failed() -> None:
    """tileiras says only "failed to compile Tile IR program"; the command is run again with
    its remarks on and the failed ones become notes (a stand-in tool prints such remarks)."""
    import sys

    remarks = (
        "in function: attention_lse:\n"
        "    remark[passed]: Load instruction selected\n"
        "       = note: Shape = [64, 128, 1, 1]\n"
        "    remark[failed]: Failed to select TMA store instruction\n"
        "       = name: RemarkMemoryStoreInstructionSelected\n"
        "       = note: Shape = [128, 1, 1, 1]\n"
        "\n"
        "error: failed to compile Tile IR program\n"
    )
    tool = [sys.executable, "-c", f"import sys; sys.stderr.write({remarks!r}); sys.exit(5)"]
    with pytest.raises(ToolchainError) as info:
        tileir._run(tool, {}, "assembling", explain=tileir._failed_remarks)
    text = str(info.value)
    assert "remarks: Failed to select TMA store instruction (Shape = [128, 1, 1, 1])" in text
    assert text.count("tileiras's remarks") == 1  # the failed one alone


def test_a_background_compile_runs_its_tool_at_a_lower_priority() -> None:
    """The compile-ahead pass's tileiras processes run BACKGROUND_NICENESS below the program
    (they may keep compiling once the tuner has moved on); a compile the program waits for
    runs at its own priority. A stand-in tool prints its niceness."""
    import os
    import threading

    tool = [sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"]
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert int(tileir._run(tool, {}, "assembling").stdout) == mine
    seen: list[Any] = []

    def worker() -> None:
        seen.append(tileir.compile_in_background(tileir._run, tool, {}, "assembling"))
        seen.append(tileir._run(tool, {}, "assembling"))  # the flag is the compile's alone

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    lowered = min(mine + tileir.BACKGROUND_NICENESS, 19)
    assert [int(p.stdout) for p in seen] == [lowered, mine]
    with pytest.raises(ToolchainError, match=r"exit 3"):
        tileir._run([sys.executable, "-c", "raise SystemExit(3)"], {}, "assembling")


def test_a_kernel_whose_bytecode_did_not_change_takes_its_cubin_without_tileiras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Tile cache key covers the kernel's text and the compiler's source, so an edited
    comment (or a fearless upgrade) misses it; the bytecode is then the same, and tileiras's
    cubin of it is taken from the cache (`cached_cubin`)."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    ran: list[str] = []
    real = tileir.compile_cubin

    def counted(bytecode: bytes, arch: str, opt_level: int = 3) -> bytes:
        ran.append(arch)
        return real(bytecode, arch, opt_level)

    monkeypatch.setattr(tileir, "compile_cubin", counted)

    def before() -> Any:
        @tile.kernel
        def twice(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
            out.store(tile.load_like(x, out) * 2.0)

        return twice

    def edited() -> Any:
        @tile.kernel
        def twice(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
            out.store(tile.load_like(x, out) * 2.0)  # the same body, commented

        return twice

    specs = (tile.Spec((4096,), fl.f32).partition((256,)), tile.Spec((4096,), fl.f32))
    k1, k2 = before(), edited()
    first = k1.compile(k1.signature_of_specs(specs), "sm_90")
    again = k2.compile(k2.signature_of_specs(specs), "sm_90")
    assert ran == ["sm_90"]  # the second kernel's Tile key differs; its bytecode does not
    assert again.cubin == first.cubin and again.bytecode == first.bytecode

    code = first.bytecode
    assert tileir.cubin_key(code, "sm_90") != tileir.cubin_key(code, "sm_100")
    assert tileir.cubin_key(code, "sm_90") != tileir.cubin_key(code + b"\x00", "sm_90")
