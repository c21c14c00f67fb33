"""The stage seam (backends/stages.py): one loop runs a track's stage list, writes the dumps
FEARLESS_DUMP asks for and puts the disk cache around the build."""

from __future__ import annotations

from pathlib import Path

import pytest

import fearless as fl
from fearless import simt, tile
from fearless.backends.stages import Stage, compile_cached, run_stages
from fearless.tile.compiler import compile_cubin
from support.tile_examples import ex
from support.tile_signatures import SIGNATURES


@simt.kernel
def dumped_scale(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * 2.0


def test_stages_run_in_order_and_only_named_stages_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEARLESS_DUMP", "b")
    monkeypatch.setenv("FEARLESS_DUMP_DIR", str(tmp_path))
    made: list[str] = []

    def files(tag: str):  # type: ignore[no-untyped-def]
        def make(name: str, v: object) -> dict[str, str]:
            made.append(tag)
            return {f"{name}.{tag}": repr(v)}

        return make

    stages = [
        Stage("a", lambda v: v + 1, files("a")),
        Stage("b", lambda v: v * 10, files("b")),
        Stage("c", lambda v: -v),
    ]
    assert run_stages(stages, 1, "k") == {"a": 2, "b": 20, "c": -20}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.b"]
    assert (tmp_path / "k.b").read_text() == "20"
    assert made == ["b"]  # a dump that is not asked for is never made


def test_compile_cached_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    builds: list[int] = []

    def build() -> tuple[int, ...]:
        builds.append(1)
        return (7, 8)

    assert compile_cached("stage-test-key", tuple, build) == (7, 8)
    assert compile_cached("stage-test-key", tuple, build) == (7, 8)
    assert builds == [1]
    assert compile_cached("stage-test-key", list, lambda: [1]) == [1]  # another kind: a miss


def test_simt_dumps_every_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_DUMP", "ir,llvm,ptx")
    monkeypatch.setenv("FEARLESS_DUMP_DIR", str(tmp_path / "dump"))
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    ck = simt.kernel(dumped_scale.func).compile("sm_90")  # a fresh Kernel: nothing memoised
    dump = tmp_path / "dump"
    assert (dump / "dumped_scale.ir").read_text().startswith("// kernel dumped_scale")
    assert "define" in (dump / "dumped_scale.ll").read_text()
    assert (dump / "dumped_scale.ptx").read_text() == ck.ptx
    assert ck.stages["llvm"] == (dump / "dumped_scale.ll").read_text()


def test_tile_dumps_every_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_DUMP", "ir,tileir")
    monkeypatch.setenv("FEARLESS_DUMP_DIR", str(tmp_path / "dump"))
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    fresh = tile.kernel(ex.vecadd.func)  # no IR built in this process yet: the "ir" stage runs
    ct = compile_cubin(fresh.ir_for(SIGNATURES["vecadd"]), "sm_90")
    dump = tmp_path / "dump"
    assert (dump / "vecadd.tile.ir").read_text().startswith("tile.kernel @vecadd")
    assert (dump / "vecadd.tileirbc").read_bytes() == ct.bytecode
    assert (dump / "vecadd.tileir").read_text().startswith("entry @vecadd(")


def test_tile_verifier_runs_after_passes_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frontend's IR is always verified; the run after dce only under FEARLESS_VERIFY=1
    (both entries of PIPELINE are one function, so an identity test cannot tell them apart)."""
    from fearless.tile import passes

    runs: list[str] = []

    def counting_verify(fn: object) -> None:
        runs.append("verify")

    monkeypatch.setattr(passes, "verify", counting_verify)
    monkeypatch.setattr(passes, "PIPELINE", [counting_verify, passes.dce, counting_verify])
    fn = tile.kernel(ex.vecadd.func).ir_for(SIGNATURES["vecadd"]).fn
    for env, expected in (("0", ["verify"]), ("1", ["verify", "verify"])):
        monkeypatch.setenv("FEARLESS_VERIFY", env)
        runs.clear()
        passes.run_pipeline(fn)
        assert runs == expected
