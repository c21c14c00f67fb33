"""Tuning tables (issue 37): the lookup before timing, fresh and stale entries, entries naming
configurations the function lacks, a new key timing only its nearest entries' winners
(FEARLESS_AUTOTUNE_FULL times all), `fl.autotune.export`, FEARLESS_TUNING_TABLE, the rules under
capture (torch.compile tracing, CUDA graph capture, fl.graph), and `fearless tune` on the
simulator."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_ahead, autotune_session, autotune_tables, autotune_timing, config
from fearless.cli.main import main

CONFIGS = [{"delay": 0.02}, {"delay": 0.0}, {"delay": 0.01}]


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FEARLESS_AUTOTUNE", raising=False)
    monkeypatch.delenv("FEARLESS_TUNING_TABLE", raising=False)
    monkeypatch.setattr(autotune_timing, "MAX_REPS", 2)


def sleepy(calls: list[Any], prune: Any = None) -> Any:
    @fl.autotune(configs=CONFIGS, key=["x"], prune=prune)
    def f(x: np.ndarray, *, delay: float) -> float:
        calls.append(delay)
        time.sleep(delay)
        return float(x.sum()) + delay

    return f


def no_slow(configs: list[dict[str, Any]], x: np.ndarray) -> list[dict[str, Any]]:
    """A prune that leaves out the slowest configuration (delay 0.02)."""
    return [c for c in configs if c["delay"] < 0.015]


def table(tmp_path: Path, entries: list[dict[str, Any]], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(
        json.dumps({"format": "fearless-tuning-table", "version": 1, "entries": entries})
    )
    return path


def entry(f: Any, key: Any, cfg: dict[str, Any], fearless: str | None = None) -> dict[str, Any]:
    versions = dict(autotune_tables.current_versions("sim"))
    if fearless is not None:
        versions["fearless"] = fearless
    return {"function": f.identity, "arch": "sim", "key": autotune_tables.plain(key),
            "config": cfg, "versions": versions, "seconds": 1e-5}  # fmt: skip


def key_of(f: Any, x: np.ndarray) -> Any:
    return f._key_fn((x,), {})


def test_export_writes_a_table_that_a_new_process_uses_without_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy([])
    f(np.ones(4))
    out = tmp_path / "table.json"
    assert fl.autotune.export(out) >= 1
    data = json.loads(out.read_text())
    assert data["format"] == "fearless-tuning-table" and data["version"] == 1
    mine = [e for e in data["entries"] if e["function"] == f.identity]  # not another module's
    assert mine[0]["config"] == {"delay": 0.0} and mine[0]["arch"] == "sim"
    assert mine[0]["versions"]["fearless"] == fl.__version__
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "other-cache"))  # a new machine
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(out))
    calls: list[Any] = []
    g = sleepy(calls)
    assert g(np.ones(4)) == 4.0
    assert calls == [0.0]  # only the winner ran: nothing was timed
    assert not g.timings


def test_export_merges_with_the_table_already_there(tmp_path: Path) -> None:
    f = sleepy([])
    other = entry(f, ("some", "key"), {"delay": 0.01})
    out = table(tmp_path, [other])
    f(np.ones(4))
    fl.autotune.export(out)
    entries = json.loads(out.read_text())["entries"]
    assert other in entries and len([e for e in entries if e["function"] == f.identity]) == 2
    (tmp_path / "junk.json").write_text("not a table")
    with pytest.raises(ValueError, match="not a tuning table"):
        fl.autotune.export(tmp_path / "junk.json")
    assert (tmp_path / "junk.json").read_text() == "not a table"


def test_a_stale_entry_is_a_starting_point_timed_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    x = np.ones(4)
    path = table(tmp_path, [entry(f, key_of(f, x), {"delay": 0.01}, fearless="0.0.0-old")])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(x) == 4.0  # tuned: the stale winner is not the answer
    assert calls[0] == 0.01 and set(calls) == {0.02, 0.0, 0.01}
    assert f.best_config(x) == {"delay": 0.0}


def test_an_entry_naming_a_configuration_the_function_lacks_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    x = np.ones(4)
    path = table(tmp_path, [entry(f, key_of(f, x), {"delay": 0.5})])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    with pytest.warns(fl.FearlessWarning, match="not one of its configurations"):
        assert f(x) == 4.0
    assert set(calls) == {0.02, 0.0, 0.01}


@pytest.mark.parametrize(
    "content", ["{not json", '{"format": "other"}', "[1, 2]", '{"format": "fearless-tuning-table"}']
)
def test_a_file_that_is_not_a_table_is_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    path = tmp_path / f"bad{abs(hash(content))}.json"
    path.write_text(content)
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    with pytest.warns(fl.FearlessWarning, match="tuning table .* is not used"):
        assert sleepy([])(np.ones(4)) == 4.0


def test_malformed_entries_are_skipped_and_the_good_ones_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    x = np.ones(4)
    path = table(tmp_path, [{"function": 3}, "no", entry(f, key_of(f, x), {"delay": 0.01})])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", f"{tmp_path / 'missing-is-fine-later'}:{path}")
    with pytest.warns(fl.FearlessWarning):
        assert f(x) == 4.01
    assert calls == [0.01]


def test_a_table_winner_that_fails_is_tuned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @fl.autotune(configs=[{"ok": False}, {"ok": True}], key=["x"])
    def f(x: np.ndarray, *, ok: bool) -> bool:
        if not ok:
            raise fl.KernelTypeError("no", None)
        return ok

    x = np.ones(2)
    monkeypatch.setenv(
        "FEARLESS_TUNING_TABLE", str(table(tmp_path, [entry(f, key_of(f, x), {"ok": False})]))
    )
    with pytest.warns(fl.FearlessWarning, match="tuning table's winner .* failed"):
        assert f(x) is True


def test_the_shipped_table_is_a_table() -> None:
    shipped = [p for p in autotune_tables.table_paths() if p.parent.name == "tuning"]
    assert any(p.name == "sm_90.json" for p in shipped)
    for p in shipped:
        data = json.loads(p.read_text())
        assert data["format"] == "fearless-tuning-table" and data["version"] == 1


def test_the_training_attention_forward_finds_the_shipped_entries() -> None:
    """attention_tuned with a kept lse (training's forward) has the key of the inference
    forward, whose entries the shipped table holds: its first call compiles the nearest
    entries' winners, not all nine configurations (the lse's f32 made a key of another form,
    with no neighbour: session 25)."""
    from fearless.ops import kernels_attention as ka

    fn = ka.attention_tuned
    q = fl.zeros((2, 16, 3000, 128), dtype=fl.bf16)
    out, lse = fl.zeros((2, 16, 3000, 128), dtype=fl.bf16), fl.zeros((2, 16, 3000), dtype=fl.f32)
    args = (q, q, q, None, out, 0.088, True, 1)
    trained = fn._key_fn(args, {"lse": lse})
    assert trained == fn._key_fn(args, {})
    assert trained[1] == ("bf16",) * 4
    found = autotune_tables.neighbours(
        f"{fn.fn.__module__}.{fn.fn.__qualname__}", "sm_90", trained, fn.configs, fn.name, 3
    )
    assert found, "no shipped entry of the training forward's key form"
    variant = ka.attention_variant_tuned._key_fn
    vargs = (q, q, q, out, 0.088, True, 1, 1, 127, 0, 0.0)
    assert variant(vargs, {"lse": lse}) == variant(vargs, {})


# ------------------------------------------------------------------------------- capture


@pytest.fixture
def compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile tracing, as torch.compiler.is_compiling() reports it (a stand-in torch)."""
    torch = types.SimpleNamespace(
        compiler=types.SimpleNamespace(is_compiling=lambda: True),
        cuda=types.SimpleNamespace(is_initialized=lambda: False),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)


@pytest.fixture
def graph_capturing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch CUDA graph capture on the current stream (a stand-in torch)."""
    torch = types.SimpleNamespace(
        compiler=types.SimpleNamespace(is_compiling=lambda: False),
        cuda=types.SimpleNamespace(
            is_initialized=lambda: True, is_current_stream_capturing=lambda: True
        ),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)


@pytest.mark.parametrize("capture", ["compiling", "graph_capturing"])
def test_under_capture_a_miss_takes_the_first_configuration_and_keeps_nothing(
    request: pytest.FixtureRequest, capture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    x = np.ones(4)
    request.getfixturevalue(capture)
    assert f(x) == 4.02 and calls == [0.02]  # the first configuration, once: nothing timed
    assert f.best_config(x) == {"delay": 0.02} and not f.timings and not f._best
    monkeypatch.delitem(sys.modules, "torch")
    calls.clear()
    assert f(x) == 4.0 and set(calls) == {0.02, 0.0, 0.01}  # outside capture: tuned


def test_under_capture_a_miss_takes_the_nearest_table_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiling: None
) -> None:
    f = sleepy(calls := [])
    near, far = np.ones(1000), np.ones(4)
    path = table(tmp_path, [
        entry(f, key_of(f, far), {"delay": 0.02}),
        entry(f, key_of(f, near), {"delay": 0.01}),
        entry(f, key_of(f, np.ones(1000, np.float32)), {"delay": 0.0}),  # another dtype
    ])  # fmt: skip
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(np.ones(2000)) == 2000.01 and calls == [0.01]
    assert f(np.ones(8)) == 8.02  # nearer to 4 than to 1000
    calls.clear()
    assert f(np.ones(4)) == 4.02 and calls == [0.02]  # the exact entry
    assert not f._best and not f.timings


def test_inside_fl_graph_a_miss_is_not_timed() -> None:
    out = fl.zeros(4, fl.f32)

    @fl.autotune(configs=[{"v": 1.0}, {"v": 2.0}], key=["o"])
    def f(o: Any, *, v: float) -> None:
        fill(o, v)

    calls: list[float] = []

    def fill(o: Any, v: float) -> None:
        calls.append(v)

    g = fl.CUDAGraph()
    with fl.graph(g):
        assert autotune_ahead.capturing()
        f(out)
    assert calls == [1.0] and not f._best
    assert not autotune_ahead.capturing()


# ------------------------------------------------------------------------------ the CLI


def test_fearless_tune_on_the_simulator_writes_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fl.autotuning, "_winners", {})  # as in the command's own process
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(
        "# op dtype shapes\nsoftmax float32 4x16\nrelu float16 64\nmatmul float32 8x8 8x8\n"
    )
    out = tmp_path / "sim.json"
    assert (
        main(
            [
                "tune",
                "--shapes",
                str(shapes),
                "--ops",
                "softmax",
                "relu",
                "--out",
                str(out),
                "--simulator",
            ]
        )
        == 0
    )
    entries = json.loads(out.read_text())["entries"]
    names = {e["function"].rsplit(".", 1)[-1] for e in entries}
    assert names == {"softmax_tuned", "elementwise_tuned"}
    assert all(e["arch"] == "sim" and e["versions"]["fearless"] == fl.__version__ for e in entries)
    assert "wrote" in capsys.readouterr().out


def test_fearless_tune_refuses_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fearless.runtime import target

    monkeypatch.setattr(target, "cuda_status", lambda: (False, "no NVIDIA driver"))
    assert main(["tune", "--out", str(tmp_path / "x.json")]) == 1
    err = capsys.readouterr().err
    assert "times kernels on the GPU" in err and "--simulator" in err
    assert not (tmp_path / "x.json").exists()


def test_fearless_tune_reads_json_shape_lists_and_refuses_bad_ones(tmp_path: Path) -> None:
    from fearless.cli.tune import read_cases

    good = tmp_path / "s.json"
    good.write_text('[{"op": "softmax", "dtype": "float16", "shapes": [[4, 16]]}]')
    assert read_cases(good)[0]["shapes"] == [[4, 16]]
    bad = tmp_path / "b.txt"
    bad.write_text("softmax float16 4xq\n")
    assert main(["tune", "--shapes", str(bad), "--simulator"]) == 2


def test_a_new_key_times_only_the_winners_of_its_nearest_table_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key the tables lack, where they hold the function at other sizes: only the kept
    winners of the nearest entries are timed (autotune_session.NEAR of them, nearest first), so a
    new size class costs a few compiles, not every configuration's."""
    f = sleepy(calls := [])
    path = table(tmp_path, [
        entry(f, key_of(f, np.ones(4)), {"delay": 0.02}),
        entry(f, key_of(f, np.ones(1000)), {"delay": 0.01}),
        entry(f, key_of(f, np.ones(1000, np.float32)), {"delay": 0.0}),  # another dtype
    ])  # fmt: skip
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    monkeypatch.setattr(autotune_session, "NEAR", 1)
    assert f(np.ones(2000)) == 2000.01 and set(calls) == {0.01}  # timed, then the real call
    assert f.best_config(np.ones(2000)) == {"delay": 0.01}
    monkeypatch.setattr(autotune_session, "NEAR", 2)
    calls.clear()
    assert f(np.ones(16)) == 16.01 and set(calls) == {0.02, 0.01}  # 16 is nearer to 4
    assert calls[0] == 0.02  # the nearest entry's winner first


def test_with_no_entry_of_its_form_or_with_full_tuning_every_configuration_is_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    path = table(tmp_path, [entry(f, key_of(f, np.ones(1000, np.float32)), {"delay": 0.01})])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(np.ones(8)) == 8.0 and set(calls) == {0.02, 0.0, 0.01}  # f64: no entry of its form
    calls.clear()
    assert f(np.ones(8, np.float32)) == 8.01 and set(calls) == {0.01}
    monkeypatch.setenv("FEARLESS_AUTOTUNE_FULL", "1")
    calls.clear()
    assert f(np.ones(4000, np.float32)) == 4000.0 and set(calls) == {0.02, 0.0, 0.01}


def test_a_neighbours_winner_that_prune_leaves_out_is_not_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [], prune=no_slow)
    path = table(tmp_path, [entry(f, key_of(f, np.ones(4)), {"delay": 0.02})])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(np.ones(8)) == 8.0 and set(calls) == {0.0, 0.01}  # its one neighbour is pruned


def test_a_pruned_neighbours_place_goes_to_the_next_nearest_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shortlist is the NEAR nearest winners that prune keeps: the nearest entry's winner
    pruned, the next entry's is timed alone (not every kept configuration)."""
    f = sleepy(calls := [], prune=no_slow)
    path = table(tmp_path, [
        entry(f, key_of(f, np.ones(4)), {"delay": 0.02}),  # nearest to 8, pruned
        entry(f, key_of(f, np.ones(1000)), {"delay": 0.01}),
    ])  # fmt: skip
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    monkeypatch.setattr(autotune_session, "NEAR", 1)
    assert f(np.ones(8)) == 8.01 and set(calls) == {0.01}


def test_a_stale_entry_of_the_key_comes_first_beside_its_neighbours_winners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = sleepy(calls := [])
    x = np.ones(16)
    path = table(tmp_path, [
        entry(f, key_of(f, x), {"delay": 0.02}, fearless="0.0.0-old"),
        entry(f, key_of(f, np.ones(4)), {"delay": 0.01}),
    ])  # fmt: skip
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(x) == 16.01 and calls[0] == 0.02 and set(calls) == {0.02, 0.01}


def test_a_shortlisted_winner_is_stored_as_such_and_fearless_tune_measures_the_key_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later process takes the stored winner of a shortlisted tuning as any other; `fearless
    tune` (tables off) does not: its table must hold winners measured over every
    configuration."""
    f = sleepy(calls := [])
    path = table(tmp_path, [entry(f, key_of(f, np.ones(4)), {"delay": 0.02})])
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert f(np.ones(16)) == 16.02 and set(calls) == {0.02}  # the one neighbour's winner
    stored = json.loads(f._entry(key_of(f, np.ones(16))).read_text())
    assert stored["near"] is True
    g = sleepy(calls := [])  # a later process
    assert g(np.ones(16)) == 16.02 and calls == [0.02]  # the stored winner, untimed
    h = sleepy(calls := [])
    with autotune_tables.disabled():  # as `fearless tune` runs
        assert h(np.ones(16)) == 16.0 and set(calls) == {0.02, 0.0, 0.01}
    assert "near" not in json.loads(h._entry(key_of(h, np.ones(16))).read_text())
