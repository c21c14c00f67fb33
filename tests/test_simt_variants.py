"""The fast variant of a SIMT kernel comes from a clone of the frontend's IR: the source is
lowered once per kernel, however many assumption sets the variant search tries."""

from __future__ import annotations

import pytest

import fearless as fl
from fearless import simt
from fearless.simt import compiler


def _add4(
    a: simt.Slice[fl.f32],
    b: simt.Slice[fl.f32],
    c: simt.Slice[fl.f32],
    d: simt.Slice[fl.f32],
    out: simt.DisjointSlice[fl.f32],
):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i] + b[i] + c[i] + d[i]


def test_the_frontend_runs_once_for_every_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = compiler.build_kernel_ir

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("frontend")
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "build_kernel_ir", counted)
    ir = simt.kernel(_add4).compiled_ir()
    assert calls == ["frontend"]
    assert ir.fast is not None and ir.fast.checks == 0
    assert [r.text for r in ir.fast.assumes] == [f"len({x}) >= len(out)" for x in "abcd"]


def test_the_fast_variant_is_the_one_a_fresh_frontend_gives() -> None:
    from fearless.frontend.source import load_source, resolve_annotations
    from fearless.ir.simt.printer import print_function
    from fearless.simt.passes.options import PassOptions
    from fearless.simt.pipeline import run_pipeline

    ir = simt.kernel(_add4).compiled_ir()
    assert ir.fast is not None
    kir = compiler.build_kernel_ir(load_source(_add4), resolve_annotations(_add4))
    run_pipeline(kir.fn, PassOptions(len_relations=[r.relation for r in ir.fast.assumes]))
    assert print_function(ir.fast.fn) == print_function(kir.fn)


def test_an_annotation_alias_is_part_of_the_cache_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two modules alike but for what an alias names compile to different kernels."""
    src = (
        "import fearless as fl\nfrom fearless import simt\nIn = simt.Slice[fl.{dt}]\n"
        "Out = simt.DisjointSlice[fl.{dt}]\n"
        "@simt.kernel\ndef copy(x: In, out: Out):\n"
        "    i = simt.thread.index_1d()\n    if i < len(out):\n        out[i] = x[i]\n"
    )
    keys = []
    for dt in ("f32", "f16"):
        path = tmp_path / f"alias_{dt}.py"
        path.write_text(src.format(dt=dt))
        scope: dict[str, object] = {"__name__": f"alias_{dt}", "__file__": str(path)}
        exec(compile(path.read_text(), str(path), "exec"), scope)
        keys.append(compiler.cache_key(scope["copy"].spec, "sm_90"))  # type: ignore[attr-defined]
    assert keys[0] != keys[1]
