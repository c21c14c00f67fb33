"""Tile kernels compiled ahead of time: `Spec`s, `kernel.specialise(...)`, `fearless compile`."""

from __future__ import annotations

from pathlib import Path

import pytest
import tile_kernels as ex

import fearless as fl
from fearless import tile
from fearless.cli.main import main as cli_main
from fearless.runtime.target import Target

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_specs_give_the_signature_a_launch_with_such_arrays_computes() -> None:
    m, k, n = 200, 96, 130
    a = fl.zeros((m, k), dtype=fl.f16)
    b = fl.zeros((k, n), dtype=fl.f16)
    cp = fl.zeros((m, n), dtype=fl.f16).partition((64, 64))
    assert all(t._ptr % 16 == 0 for t in (a, b, cp.tensor))  # NumPy's allocations are
    real, _ = ex.matmul_f16.signature_of((cp, a, b, 32), Target.SIM)
    specs = (
        tile.Spec((m, n), fl.f16).partition((64, 64)),
        tile.Spec((m, k), fl.f16),
        tile.Spec((k, n), fl.f16),
        32,
    )
    assert ex.matmul_f16.signature_of_specs(specs) == real
    # Extents that divide the same way give the same specialisation: one cubin serves both.
    other = (tile.Spec((8, 16), fl.f16).partition((64, 64)), tile.Spec((8, 8), fl.f16),
             tile.Spec((8, 16), fl.f16), 32)  # fmt: skip
    assert ex.matmul_f16.signature_of_specs(other) != real
    assert ex.rms_norm.signature_of_specs((
        tile.Spec((21, 100), fl.f32).partition((4, 128)), tile.Spec((21, 100), fl.f32),
        tile.Spec((100,), fl.f32), fl.f32)) == ex.rms_norm.signature_of((
            fl.zeros((21, 100), dtype=fl.f32).partition((4, 128)), fl.zeros((21, 100), dtype=fl.f32),
            fl.zeros(100, dtype=fl.f32), 1e-5), Target.SIM)[0]  # fmt: skip


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ((tile.Spec((8,), fl.f32), tile.Spec((8,), fl.f32), tile.Spec((8,), fl.f32)),
         "`z` is specialised by tile.Spec\\(shape, dtype\\).partition\\(tile\\)"),
        ((tile.Spec((8,), fl.f32).partition((8,)), tile.Spec((8,), fl.f16),
          tile.Spec((8,), fl.f32)), "the spec of `x` holds f16 but the kernel declares f32"),
        ((tile.Spec((8,), fl.f32).partition((8,)),), "takes 3 argument\\(s\\) but 1 specs"),
    ],
)  # fmt: skip
def test_specs_that_do_not_fit_the_kernel_are_refused(specs: tuple, message: str) -> None:
    with pytest.raises(fl.KernelTypeError, match=message):
        ex.vecadd.signature_of_specs(specs)


def test_spec_partition_needs_power_of_two_tiles_of_its_rank() -> None:
    with pytest.raises(fl.KernelTypeError, match="power-of-two tile"):
        tile.Spec((100, 100), fl.f32).partition((100, 128))
    with pytest.raises(fl.KernelTypeError, match="2-d Spec"):
        tile.Spec((100, 100), fl.f32).partition((128,))


def test_fearless_compile_builds_the_declared_specialisations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "kern.py"
    src.write_text(
        "import fearless as fl\n"
        "from fearless import tile\n\n"
        "@tile.kernel\n"
        "def scale(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], s: fl.f32):\n"
        "    z.store(tile.load_like(x, z) * s)\n\n"
        "@tile.kernel\n"
        "def undeclared(z: tile.Part[fl.f32]):\n"
        "    z.store(tile.zeros(z.shape, fl.f32))\n\n"
        "n = 1 << 20\n"
        "scale.specialise(tile.Spec((n,), fl.f32).partition((1024,)), tile.Spec((n,), fl.f32), fl.f32)\n"
        "scale.specialise(tile.Spec((n,), fl.f32).partition((256,)), tile.Spec((n,), fl.f32), 2.0)\n"
    )
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    assert cli_main(["compile", str(src), "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    assert out.count("✓") == 2 and "tiles [1024]" in out and "tiles [256]" in out
    assert "undeclared" in out and "compiled at its first launch" in out
    assert "compiled 2 kernel(s)" in out
    # A launch of the same specialisation finds the cubin in the cache: no tileiras needed.
    import importlib.util

    spec = importlib.util.spec_from_file_location("kern_aot", src)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from fearless.backends.tileir import cuda_tile as tileir

    def no_tileiras(*args: object, **kw: object) -> bytes:
        raise AssertionError("tileiras ran although the cubin was compiled ahead of time")

    monkeypatch.setattr(tileir, "compile_cubin", no_tileiras)
    x = fl.zeros(1 << 20, dtype=fl.f32)
    zp = fl.empty(1 << 20, dtype=fl.f32).partition((1024,))
    sig, _ = mod.scale.signature_of((zp, x, 3.0), Target.SIM)
    assert mod.scale.compile(sig, "sm_90").cubin[:4] == b"\x7fELF"


def test_inspect_without_arguments_uses_the_first_declared_launch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # matmul_f16 has a Const (BK): without a declared launch there is nothing to inspect.
    assert ex.matmul_f16.declared_specialisations()
    text = ex.matmul_f16.inspect(stage="tileir")
    assert "tile<128x64xf16>" in text and "mmaf" in text  # the declared 128x128 tiles, BK 64
    assert cli_main(["inspect", f"{EXAMPLES / 'tile_kernels.py'}::matmul_f16", "--emit", "ir"]) == 0
    assert "tile=(128, 128)" in capsys.readouterr().out

    @tile.kernel
    def k(z: tile.Part[fl.f32], BK: tile.Const[int]):
        z.store(tile.zeros(z.shape, fl.f32))

    with pytest.raises(fl.CompileError, match=r"declare a launch with `k\.specialise"):
        k.inspect(stage="ir")
