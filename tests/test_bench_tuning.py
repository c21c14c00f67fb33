"""`fearless bench --cases tuning` (family_tuning.py, tuning_probe.py): time to first result at
a new size class. The GPU run needs an H200; checked here: the cases (every op, off TileGym's
grids), the probe's command line, the records and ratios from the three first calls, the run's
selection, and the probe's fearless call on the simulator, tuning with the tables off and
exporting its winner as a table."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import fearless as fl
from fearless import autotune_tables
from fearless_bench import family_ops, family_ops_base, family_tuning, model, tuning_probe
from fearless_bench.family_ops_base import Spec


@pytest.fixture(autouse=True)
def _restore_target() -> Iterator[None]:
    yield
    fl.set_target(None)


def test_every_op_has_a_cold_a_table_and_a_near_case_off_tilegyms_grids() -> None:
    grid = {(s.op, s.shape) for s in family_ops.specs()}
    assert {s.op for s in family_tuning.SPECS} == {s.op for s in family_ops.specs()}
    for spec in family_tuning.SPECS:
        assert (spec.op, spec.shape) not in grid, spec
        assert family_tuning.cold_case(spec) in family_tuning.CASES
        assert family_tuning.table_case(spec) in family_tuning.CASES
        assert family_tuning.near_case(spec) in family_tuning.CASES
    assert len(set(family_tuning.CASES)) == 3 * len(family_tuning.SPECS)
    assert "tuning_table_attention_causal_bf16_2x16x3000x128" in family_tuning.CASES


def test_the_probe_command_line_round_trips() -> None:
    for spec in family_tuning.SPECS:
        argv = [*family_tuning.probe_argv(model.FEARLESS_TILE, spec), "--no-tables"]
        impl, back, no_tables, export = tuning_probe.parse([*argv, "--export", "t.json"])
        assert (impl, back, no_tables, export) == (model.FEARLESS_TILE, spec, True, "t.json")


def test_records_put_each_fearless_first_call_beside_tilegyms() -> None:
    spec = Spec("rms_norm", "bf16", (3000, 5120))
    results: dict[str, dict[str, object]] = {
        "cold": {"seconds": 2.0, "entries": 1},
        "table": {"seconds": 0.25},
        "near": {"seconds": 1.0},
        "tilegym": {"seconds": 5.0},
    }
    recs = family_tuning.records(spec, results)
    model.assign_ratios(recs)
    by = {(r.case, r.impl): r for r in recs}
    cold = by[("tuning_rms_norm_bf16_3000x5120", model.FEARLESS_TILE)]
    table = by[("tuning_table_rms_norm_bf16_3000x5120", model.FEARLESS_TILE)]
    assert (cold.time, cold.time_unit, cold.ratio) == (2.0, "s", 2.5)
    assert table.time == 0.25 and table.ratio == 20.0
    assert table.note is not None and "only the winner" in table.note
    assert by[("tuning_table_rms_norm_bf16_3000x5120", model.TILEGYM)].time == 5.0
    near = by[("tuning_near_rms_norm_bf16_3000x5120", model.FEARLESS_TILE)]
    assert near.ratio == 5.0 and near.note is not None and "nearest" in near.note
    assert cold.params["new_size_class"] is True and cold.params["op"] == "rms_norm"

    results = {"cold": {"error": "probe exit 1: boom"}, "table": {"skip": "no"}, "tilegym": {}}
    results["tilegym"] = {"skip": "TileGym is not installed"}
    status = {(r.case, r.impl): r.status for r in family_tuning.records(spec, results)}
    assert not any(case.startswith("tuning_near_") for case, _ in status)  # not measured
    assert status[("tuning_rms_norm_bf16_3000x5120", model.FEARLESS_TILE)] == "failed"
    assert status[("tuning_table_rms_norm_bf16_3000x5120", model.TILEGYM)] == "skipped"


def test_run_measures_the_selected_specs_and_quick_keeps_the_quick_ops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Spec] = []
    asked: list[frozenset[str]] = []

    def measure(spec: Spec, kinds: frozenset[str]) -> dict[str, dict[str, object]]:
        seen.append(spec)
        asked.append(kinds)
        return {k: {"seconds": 1.0} for k in (*kinds, "tilegym")}

    monkeypatch.setattr(family_tuning, "measure", measure)
    saved: list[int] = []
    ctx = types.SimpleNamespace(
        quick=False, log=lambda line: None, checkpoint=lambda r: saved.append(len(r))
    )
    pick = {"tuning_matmul_bf16_3000", "tuning_relu_f16_3000000"}
    out = family_tuning.run(ctx, pick)  # type: ignore[arg-type]
    assert [s.op for s in seen] == ["relu", "matmul"] and asked == [{"cold"}, {"cold"}]
    assert {r.case for r in out} == pick and len(out) == 4 and saved == [2, 4]
    seen.clear()
    ctx.quick = True
    family_tuning.run(ctx, set(family_tuning.CASES))  # type: ignore[arg-type]
    assert sorted({s.op for s in seen}) == sorted(family_tuning.QUICK_OPS)


def test_the_fearless_first_call_tunes_without_tables_and_exports_its_winner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(family_ops_base, "DEVICE", "cpu")
    fl.set_target("sim")
    spec = Spec("matmul", "f32", (16, 24, 8))  # tiles larger than the problem are pruned: fast
    call = tuning_probe.first_call(model.FEARLESS_TILE, spec, torch, no_tables=True)
    assert tuple(call().shape) == (16, 24)
    table = tmp_path / "table.json"
    assert fl.autotune.export(table) >= 1
    entries = json.loads(table.read_text())["entries"]
    function = "fearless.ops.kernels_gemm.matmul_tuned"
    mine = [e for e in entries if e["function"] == function]  # with the process's other keys
    assert mine and {e["arch"] for e in mine} == {"sim"}
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(table))  # the second probe's setting
    assert [e.config for e in autotune_tables.entries(function, "sim")] == [
        e["config"] for e in mine
    ]


def test_a_peer_that_fails_is_reported_by_its_message_not_its_tracebacks_last_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TileGym's bmm failed in session 22 with only "probe exit 1: Unknown location" on
    record (the last line of a multi-line message): the probe now prints the error's type and
    first line as its JSON result, as the models family's probe does."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def fails(*_: object) -> None:
        raise RuntimeError(
            "tile shape does not divide the problem\n  in kernel bmm\nUnknown location"
        )

    monkeypatch.setattr(tuning_probe, "first_call", fails)
    argv = family_tuning.probe_argv(model.TILEGYM, family_tuning.SPECS[0])
    assert tuning_probe.main(argv) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    error = json.loads(line)["error"]
    assert error.startswith("RuntimeError: tile shape does not divide the problem (at ")


def test_measure_runs_only_the_probes_the_cases_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A near-only sweep (`--cases 'tuning_near_*'`) runs no cold probe; the table row needs
    the cold probe's export, so asking for it runs both."""
    ran: list[str] = []

    def probe(impl: str, spec: Spec, cache: Path, *options: str, **env: str) -> dict[str, object]:
        ran.append(f"{impl}:{cache.name}")
        return {"seconds": 1.0, "entries": 1}

    monkeypatch.setattr(family_tuning, "probe", probe)
    spec = family_tuning.SPECS[0]
    assert set(family_tuning.measure(spec, frozenset({"near"}))) == {"near", "tilegym"}
    assert ran == [f"{model.FEARLESS_TILE}:near", f"{model.TILEGYM}:tilegym"]
    ran.clear()
    assert set(family_tuning.measure(spec, frozenset({"table"}))) == {"cold", "table", "tilegym"}
    assert [r.split(":")[1] for r in ran] == ["cold", "table", "tilegym"]
