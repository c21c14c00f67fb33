"""What a new user meets first (issue 16, "the first hour"): the tensor conveniences, the help
texts of common mistakes, and the CLI's guidance."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import simt, tile


@pytest.fixture(autouse=True)
def _sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_TARGET", "sim")
    from fearless import config

    monkeypatch.setattr(config, "_target_override", None)


# ------------------------------------------------------------------------------ conveniences


def test_ones_and_the_like_constructors() -> None:
    o = fl.ones((2, 3))
    assert o.dtype is fl.f32 and o.shape == (2, 3) and (o.numpy() == 1).all()
    assert fl.ones(3, fl.bool_).numpy().tolist() == [True, True, True]
    ones = fl.ones(2, "bf16").numpy()  # ml_dtypes' bfloat16, sharing the raw bits 0x3F80
    assert ones.dtype.name == "bfloat16" and ones.tolist() == [1.0, 1.0]
    assert ones.view(np.uint16).tolist() == [0x3F80, 0x3F80]
    base = fl.arange(6, dtype=fl.i32)
    for make, fill in ((fl.zeros_like, 0), (fl.ones_like, 1)):
        t = make(base)
        assert t.dtype is fl.i32 and t.shape == (6,) and (t.numpy() == fill).all()
        assert t.data_ptr != base.data_ptr
    e = fl.empty_like(np.zeros((4, 2), np.float16))
    assert e.shape == (4, 2) and e.dtype is fl.f16
    f = fl.full_like(base, 7, dtype=fl.f64)
    assert f.dtype is fl.f64 and (f.numpy() == 7.0).all()
    assert fl.zeros_like(base, dtype=fl.u8).dtype is fl.u8
    with pytest.raises(fl.KernelTypeError, match="`list` is not an array") as err:
        fl.zeros_like([1, 2, 3])
    assert err.value.loc is not None and err.value.loc.file == __file__
    with pytest.raises(fl.KernelTypeError, match="cannot fill a tensor of u8 with -1"):
        fl.full_like(base, -1, dtype=fl.u8)


def test_astype_converts_into_a_copy() -> None:
    x = fl.asarray(np.array([1.75, -2.5, 300.0], np.float32))
    i = x.astype(fl.i32)
    assert i.dtype is fl.i32 and i.numpy().tolist() == [1, -2, 300]  # toward zero, as NumPy
    assert x.astype("f64").numpy().dtype == np.float64
    same = x.astype(fl.f32)
    assert same.data_ptr != x.data_ptr and same.numpy().tolist() == x.numpy().tolist()
    b = x.astype(fl.bf16)
    assert b.numpy().view(np.uint16).tolist() == [0x3FE0, 0xC020, 0x4396]  # nearest even
    assert b.astype(fl.f32).numpy().tolist() == [1.75, -2.5, 300.0]
    assert fl.arange(3).astype(fl.bool_).numpy().tolist() == [False, True, True]
    part = x.partition((1,))
    with pytest.raises(fl.MovedError):
        x.astype(fl.f64)
    part.unpartition()
    with pytest.raises(fl.KernelTypeError, match="is not a fearless dtype"):
        x.astype("complex64")


# ------------------------------------------------------------------------------ help texts


@simt.kernel
def _numpy_exp(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = np.exp(a[i])


@simt.kernel
def _numpy_other(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = np.linalg.norm(a[i])


@tile.kernel
def _tile_numpy_exp(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(np.exp(tile.load_like(x, z)))


@simt.kernel
def _float_sum_of_ints(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = 0.0
    for j in range(4):
        s += j
    c[i] = s


@simt.kernel
def _int_sum_of_floats(x: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = 0
    for j in range(4):
        s += x[j]
    c[i] = s


def test_numpy_calls_in_kernels_point_at_the_kernel_function() -> None:
    x, out = fl.zeros(4), fl.zeros(4)
    with pytest.raises(fl.CompileError, match=r"cannot call `np\.exp`") as err:
        _numpy_exp[1, 4](x, out)
    assert err.value.help == (
        "NumPy functions run on the host; in a kernel call `fl.math.exp(...)` (or `math.exp(...)`)"
    )
    with pytest.raises(fl.CompileError, match=r"cannot call `np\.linalg\.norm`") as err:
        _numpy_other[1, 4](x, out)
    assert err.value.help is not None and "@simt.device" in err.value.help  # no kernel form
    with pytest.raises(fl.CompileError, match=r"cannot call `np\.exp`") as err:
        _tile_numpy_exp(fl.zeros(4).partition((4,)), x)
    assert err.value.help == "NumPy functions run on the host; in a kernel call `tile.exp(...)`"


def test_a_float_literal_loop_value_does_not_become_an_int() -> None:
    with pytest.raises(fl.KernelTypeError, match="mismatched types in `\\+`: f32 and i64") as err:
        _float_sum_of_ints[1, 4](fl.zeros(4))
    assert err.value.help is not None and "fl.f32(...)" in err.value.help
    out = fl.zeros(4)
    _int_sum_of_floats[1, 4](fl.arange(4, dtype=fl.f32), out)  # an int literal adopts f32
    assert out.numpy().tolist() == [6.0] * 4


# ------------------------------------------------------------------------------ the CLI


def test_doctor_checks_the_disassembler_and_cuda_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from fearless.backends import toolchain
    from fearless.cli import doctor

    monkeypatch.setattr(toolchain, "find_sass_disassembler", lambda: None)
    check = doctor.check_disassembler()
    assert check.status == "warn" and "pip install nvidia-cuda-nvdisasm" in (check.fix or "")
    monkeypatch.setattr(toolchain, "find_sass_disassembler", lambda: Path("/opt/x/nvdisasm"))
    monkeypatch.setattr(toolchain, "tool_version", lambda path: "13.5.37")
    assert doctor.check_disassembler().status == "ok"
    monkeypatch.setattr(doctor, "_version", lambda dist: None)
    check = doctor.check_cuda_tile()
    assert check.status == "warn" and "pip install 'cuda-tile" in (check.fix or "")
    names = [c.__name__ for c in (doctor.check_disassembler, doctor.check_cuda_tile)]
    import inspect

    run_checks = inspect.getsource(doctor.run_checks)
    assert all(name in run_checks for name in names)


def test_sass_without_a_disassembler_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from fearless.backends import sass, toolchain

    monkeypatch.setattr(toolchain, "find_sass_disassembler", lambda: None)
    with pytest.raises(fl.ToolchainError, match="no GPU is needed") as err:
        sass.disassemble(b"\x7fELF")
    assert err.value.help is not None and "pip install nvidia-cuda-nvdisasm" in err.value.help


def test_a_tile_kernels_sass_is_its_cubin_disassembled(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--emit sass` of a Tile kernel: tileiras's cubin through the disassembler (stubbed here:
    nvdisasm is not a test dependency)."""
    from fearless import tile
    from fearless.backends import sass

    @tile.kernel
    def double(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z) * 2.0)

    seen: list[bytes] = []
    monkeypatch.setattr(sass, "disassemble", lambda cubin: seen.append(cubin) or "SASS")
    x = fl.zeros(256)
    with fl.empty(256).partition((128,)) as zp:
        assert double.inspect(zp, x, stage="sass") == "SASS"
    assert len(seen) == 1 and seen[0][:4] == b"\x7fELF"


def test_inspect_help_names_a_file_that_exists() -> None:
    import argparse
    import re
    from pathlib import Path

    from fearless.cli import inspect as cli_inspect

    parser = argparse.ArgumentParser()
    cli_inspect.add_arguments(parser)
    examples = re.findall(r"([\w/]+\.py)::(\w+)", parser.format_help())
    assert examples
    root = Path(__file__).resolve().parents[1]
    for file, kernel in examples:
        assert (root / file).is_file(), file
        assert f"def {kernel}(" in (root / file).read_text()


def test_the_simt_example_script_prints_what_it_checked() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "FEARLESS_TARGET": "sim", "PYTHONPATH": str(root / "src")}
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "simt_kernels.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "target: sim"
    for name in ("vecadd", "matadd", "matmul"):
        line = next(x for x in lines if x.startswith(name))
        assert float(line.rsplit(":", 1)[1]) < 1e-4, line
    assert any(x.startswith("aliased launch refused: cannot borrow") for x in lines)


# ------------------------------------------------------------------------------ unclear messages


@simt.kernel
def _fill(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0


@simt.kernel
def _calls_a_kernel(c: simt.DisjointSlice[fl.f32]):
    _fill(c)


def test_a_kernel_called_inside_a_kernel_is_named_as_such() -> None:
    with pytest.raises(fl.CompileError, match="cannot launch the kernel `_fill` from inside") as e:
        _calls_a_kernel[1, 4](fl.zeros(4))
    assert e.value.help is not None and "@simt.device" in e.value.help
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_a_read_only_output_names_the_launch_line() -> None:
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(fl.KernelTypeError, match="`c` is a read-only array") as err:
        _fill[1, 4](out)
    assert err.value.loc is not None and err.value.loc.file == __file__
    assert err.value.help is not None and "x.copy()" in err.value.help


def test_a_kernel_made_by_exec_says_why_it_cannot_compile() -> None:
    scope = {"fl": fl, "simt": simt}
    exec(
        "@simt.kernel\ndef made(c: simt.DisjointSlice[fl.f32]):\n    c[simt.thread.index_1d()] = 1.0\n",
        scope,
    )
    with pytest.raises(fl.CompileError, match="cannot read the source of `made`") as err:
        scope["made"][1, 4](fl.zeros(4))  # type: ignore[index]
    assert err.value.loc is not None and err.value.loc.file == "<string>"
    assert err.value.help is not None and "exec()" in err.value.help


CHECKED = """
import numpy as np
import pytest
import fearless as fl
from fearless import simt


@simt.kernel
def k(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i]


def test_alias():
    a = np.ones(4, np.float32)
    with pytest.raises({cls}):
        k[1, 4](a, a)
    t = fl.zeros(4)
    p = t.partition((4,))
    with pytest.raises({moved}):
        t.numpy()
"""


@pytest.mark.parametrize(
    ("cls", "moved", "codes"),
    [
        ("fl.BorrowError", "fl.MovedError", []),
        ("(ValueError, fl.FearlessError)", "fearless.errors.MovedError", []),
        ("ValueError", "fl.BorrowError", ["E0382", "E0502"]),
    ],
)
def test_check_leaves_errors_a_test_expects(cls: str, moved: str, codes: list[str]) -> None:
    from fearless.check.driver import check_source

    findings = check_source(CHECKED.format(cls=cls, moved=moved), "t.py")
    assert sorted(f.diagnostic.code for f in findings) == codes
