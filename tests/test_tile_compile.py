"""Tile kernels through the whole GPU pipeline without a GPU: tile IR, bytecode, tileiras cubin."""

from __future__ import annotations

from pathlib import Path

import pytest

from fearless.tile.compiler import compile_cubin, render_stage
from support.tile_examples import ex
from support.tile_signatures import SIGNATURES

GOLDEN = Path(__file__).resolve().parent / "golden"

# The specialisations below are the launches of tests/gpu/test_tile_gpu.py (same shapes, device
# pointers 16-byte aligned), so FEARLESS_GPU_CACHE can carry their cubins to a GPU machine.
# A key is the example's name, with `:what` after it when one kernel is launched two ways.


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_example_compiles_to_a_cubin(name: str) -> None:
    kernel = getattr(ex, name.partition(":")[0])
    ct = compile_cubin(kernel.ir_for(SIGNATURES[name]), "sm_90")
    assert ct.cubin[:4] == b"\x7fELF"
    assert ct.bytecode.startswith(b"\x7fTileIR\x00")


GOLDEN_EXAMPLES = ("vecadd", "softmax_bf16", "matmul_f16", "layer_norm")


@pytest.mark.parametrize("name", GOLDEN_EXAMPLES)
def test_tileir_golden(name: str) -> None:
    """The tileirdisasm text of an example's bytecode, as committed under tests/golden.

    After an intended change of the lowering, regenerate with
    `FEARLESS_REGEN_GOLDEN=1 pytest tests/test_tile_compile.py -k golden` and read the diff."""
    import os

    text = render_stage(getattr(ex, name).ir_for(SIGNATURES[name]), "tileir")
    path = GOLDEN / f"tile_{name}.tileir"
    if os.environ.get("FEARLESS_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"regenerate {path.name} if the change is intended"


def test_vecadd_ir_text() -> None:
    text = render_stage(ex.vecadd.ir_for(SIGNATURES["vecadd"]), "ir")
    assert "tile.load %x, %0 {shape=(128,), padding=0.0} : tile<128xf32>" in text
    assert "tile.binary %1, %3 {kind='add'} : tile<128xf32>" in text
    assert "tile.store %z, %4" in text


def test_sum_tiles_strided_loop_and_one_element_store() -> None:
    """The first pass loops from the block id to the tile count by the grid size, in f32."""
    text = render_stage(ex.sum_tiles.ir_for(SIGNATURES["sum_tiles:partials"]), "tileir")
    assert "get_num_tile_blocks" in text and "tile<1024xf32>" in text
    assert "for %loopIdx in (%blockId_x to " in text
    assert "reshape %reduce : tile<f32> -> tile<1xf32>" in text


def test_transpose_loads_the_swapped_tile() -> None:
    text = render_stage(ex.transpose.ir_for(SIGNATURES["transpose"]), "ir")
    # out's tile (i, j) = (block 0, block 1) of (32, 16) reads x's tile (j, i) of (16, 32).
    assert "tile.load %x, %1, %0 {shape=(16, 32)" in text
    assert "tile.permute %2 {perm=(1, 0)} : tile<32x16xf32>" in text


def test_matmul_loop_is_a_tile_for_with_mma() -> None:
    text = render_stage(ex.matmul_f16.ir_for(SIGNATURES["matmul_f16"]), "tileir")
    assert "for " in text and "mmaf" in text
    assert "tile<64x32xf16>" in text and "tile<64x64xf32>" in text
    # The launch's divisibility facts reach tileiras: it needs them to use TMA.
    assert "assume div_by<16>, %arg0 : tile<ptr<f16>>" in text
    assert "assume bounded<0, ?>" in text


def test_inspect_tileir_with_arguments() -> None:
    import fearless as fl

    zp = fl.empty(100, dtype=fl.f32).partition((64,))
    x = fl.zeros(100, dtype=fl.f32)
    text = ex.vecadd.inspect(zp, x, x, stage="tileir")
    assert "partition_view<tile=(64)" in text


@pytest.fixture(autouse=True)
def _gpu_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """FEARLESS_GPU_CACHE=DIR keeps these cubins in DIR, for GPU runs without tileiras."""
    import os

    folder = os.environ.get("FEARLESS_GPU_CACHE")
    if folder:
        monkeypatch.setenv("FEARLESS_CACHE_DIR", str(Path(folder).resolve()))


def test_arrays_after_a_const_or_an_absent_array_keep_their_alignment() -> None:
    """Each array's divisibility facts are its own: a const or an optional array passed as None
    before it has no kernel argument, so the facts are matched by parameter, not by position
    (the attention backward's dk_dv lost q's and ran 2.6x slower on the H100, 2026-12-05)."""
    import fearless as fl
    from fearless import tile

    @tile.kernel
    def scaled_copy(
        out: tile.Part[fl.f16],
        TILE: tile.Const[int],
        extra: tile.Tensor[fl.f16] | None,
        x: tile.Tensor[fl.f16],
    ) -> None:
        (i,) = out.index
        out.store(tile.load(x, (i,), (TILE,)))

    xs = fl.zeros(256, dtype=fl.f16)
    text = scaled_copy.inspect(fl.empty(256, dtype=fl.f16).partition((64,)), 64, None, xs,
                               stage="tileir")  # fmt: skip
    # out is %arg0 (pointer, extent), x %arg2: both 16-byte aligned, x's extent divides by 8
    assert "assume div_by<16>, %arg0 : tile<ptr<f16>>" in text
    assert "assume div_by<16>, %arg2 : tile<ptr<f16>>" in text
    assert text.count("div_by<8>") == 2
