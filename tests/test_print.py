"""`print(...)` in kernels of both tracks: the simulator's text, PTX through ptxas, Tile IR
through tileiras, and the printf mapping (frontend/printing.py) they share.

`run_simt` and `run_tile` launch on the current target; tests/gpu/test_print_gpu.py runs them
in a subprocess on the GPU and on the simulator and compares the two outputs.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import fearless as fl
from fearless import f32, i32
from fearless.abi import TileParam, array_align
from fearless.backends.llvm.ptx import ptxas_check
from fearless.backends.toolchain import find_ptxas, find_tileiras
from fearless.dtypes import DType
from fearless.errors import CompileError, Location
from fearless.frontend.printing import c_format, conversion
from fearless.ir.tile.printer import print_function
from fearless.tile.compiler import compile_cubin
from support.print_runners import (
    run_simt,
    run_tile,
    run_tile_whole,
    simt_print,
    tile_print,
    tile_print_whole,
)

LOC = Location("t.py", 1, 0)


# what cuTile Python's printf of the same tiles printed on the H200
# (bench/experiments/tile_print_probe.py, bench/results/h200-2026-12-03h-ops-elementwise/notes.md)
TILE_WHOLE_TEXT = (
    "ints: [0, 1, 2, 3]\n"
    "floats: [[0.00, 1.00, 2.00, 3.00], [4.00, 5.00, 6.00, 7.00]]\n"
    "pair: [0, 1, 2, 3] and [0.000000, 0.500000, 1.000000, 1.500000]\n"
)


SIMT_TEXT = (
    "i =, 0, 0.000000, -2, 254, 0, 3\n"
    "i =, 1, 1.500000, -1, 255, 1, 3\n"
    "i =, 2, 3.000000, 0, 0, 1, 3\n"
    "x[0] = 0.000 n=  -2 hex=fffffffe 0.000000e+00 100%|\n"
    "x[1] = 1.500 n=  -1 hex=ffffffff 1.500000e+00 100%|\n"
    "x[2] = 3.000 n=   0 hex=0 3.000000e+00 100%|\n"
    "done\n"
)
TILE_TEXT = (
    "block | 0 | sum | 6.000000 | 1 | 2.5\n"
    "0: max=    3.00 n=1 50%\n"
    "block | 1 | sum | 22.000000 | 1 | 2.5\n"
    "0: max=    7.00 n=1 50%\n"
)


def test_tile_prints_whole_tiles_as_the_gpu_does(capsys: pytest.CaptureFixture[str]) -> None:
    fl.set_target("sim")
    try:
        run_tile_whole()
    finally:
        fl.set_target(None)
    assert capsys.readouterr().out == TILE_WHOLE_TEXT


@pytest.mark.skipif(find_tileiras() is None, reason="tileiras not installed")
def test_a_whole_tile_print_compiles_to_a_cubin() -> None:
    sig = (
        TileParam("out", "part", f32, 2, (2, 4), align=array_align(0, (2, 4), 4)),
        TileParam("x", "tensor", f32, 2, align=array_align(0, (2, 4), 4)),
    )
    ct = compile_cubin(tile_print_whole.ir_for(sig), "sm_90")
    assert ct.cubin[:4] == b"\x7fELF"


def test_simt_print_on_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    fl.set_target("sim")
    try:
        run_simt()
    finally:
        fl.set_target(None)
    assert capsys.readouterr().out == SIMT_TEXT


def test_tile_print_on_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    fl.set_target("sim")
    try:
        run_tile()
    finally:
        fl.set_target(None)
    assert capsys.readouterr().out == TILE_TEXT


def test_simt_print_ir_names_the_printf_format() -> None:
    text = simt_print.inspect(stage="ir")
    assert "print {format='i =, %lld, %f, %d, %u, %d, 3\\n'}" in text
    assert "100%%|\\n'}" in text


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_simt_print_lowers_to_vprintf_and_assembles(arch: str) -> None:
    ptx = simt_print.inspect(stage="ptx", arch=arch)
    assert ptx.count("call.uni (retval0), vprintf,") % 3 == 0 < ptx.count("vprintf,")
    assert "cvt.f64.f32" in ptx  # a float is passed as a double, as C varargs are
    assert "cvta.global.u64" in ptx  # the format string's generic address
    report = ptxas_check(ptx, arch)
    assert "Compiling entry function" in report


@pytest.mark.skipif(find_tileiras() is None, reason="tileiras not installed")
def test_tile_print_compiles_to_a_cubin() -> None:
    sig = (
        TileParam("out", "part", f32, 1, (4,), align=array_align(0, (8,), 4)),
        TileParam("x", "tensor", f32, 1, align=array_align(0, (8,), 4)),
        TileParam("n", "scalar", i32),
    )
    ir = tile_print.ir_for(sig)
    text = print_function(ir.fn)
    assert "tile.print" in text and "%d | sum | %f | %d | 2.5\\n" in text
    ct = compile_cubin(ir, "sm_90")
    assert ct.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize(
    ("dtype", "spec", "want"),
    [
        (fl.i32, "", "%d"),
        (fl.bool_, "", "%d"),
        (fl.u16, "", "%u"),
        (fl.i64, "", "%lld"),
        (fl.u64, "x", "%llx"),
        (fl.f32, "", "%f"),
        (fl.f64, "", "%lf"),
        (fl.bf16, ".3e", "%.3e"),
        (fl.f32, "<8.2f", "%-8.2f"),
        (fl.i32, "+05d", "%+05d"),
        (fl.i32, "#x", "%#x"),
    ],
)
def test_python_specs_map_to_printf(dtype: DType, spec: str, want: str) -> None:
    assert conversion(dtype, spec, LOC) == want


@pytest.mark.parametrize(
    ("dtype", "spec"), [(fl.f32, "d"), (fl.i32, "f"), (fl.i32, "^8"), (fl.i32, ",")]
)
def test_specs_without_a_printf_form_are_refused(dtype: DType, spec: str) -> None:
    with pytest.raises(CompileError) as info:
        conversion(dtype, spec, LOC)
    assert info.value.diagnostic.code == "E0640"


def test_c_format_reads_integers_as_printf_does() -> None:
    assert c_format("%d %u", [np.uint32(0xFFFFFFFF), np.int32(-1)]) == "-1 4294967295"
    assert c_format("%lld %llx", [np.int64(-5), np.int64(-1)]) == "-5 ffffffffffffffff"
    assert c_format("%.2f%% %e", [np.float32(0.125), 1.0]) == "0.12% 1.000000e+00"
    assert c_format("%f %f", [math.inf, -math.inf]) == "inf -inf"


def test_print_on_the_host_still_prints(capsys: pytest.CaptureFixture[str]) -> None:
    print("host", file=sys.stdout)
    assert capsys.readouterr().out == "host\n"
