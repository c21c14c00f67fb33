"""fl.autotune against the red-team findings: a failing stored winner tuned from the call's own
contents, nothing retried or tuned inside a capture, reset_to_zero the same cold or warm, an
undeclared accumulated argument warned about and put back, keys of torch tensors and NumPy
scalars, `fl.autotune.export` under concurrency and over files it would lose data of, the
messages of failing configurations, and `prune` where nothing is timed."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_tables, autotune_timing, config
from fearless.autotune_tables import TableError


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FEARLESS_AUTOTUNE", raising=False)
    monkeypatch.delenv("FEARLESS_TUNING_TABLE", raising=False)
    monkeypatch.setattr(autotune_timing, "MAX_REPS", 2)


def fresh_table(tmp_path: Path, f: Any, key: Any, cfg: dict[str, Any], **top: Any) -> Path:
    """A table whose one entry, measured with today's versions, names `cfg` for `key`."""
    entry = {"function": f.identity, "arch": "sim", "key": autotune_tables.plain(key),
             "config": cfg, "versions": dict(autotune_tables.current_versions("sim"))}  # fmt: skip
    path = tmp_path / "t.json"
    table = {"format": "fearless-tuning-table", "version": 1, "entries": [entry], **top}
    path.write_text(json.dumps(table))
    return path


def failing_winner(broken: int) -> Any:
    """A function adding 1 into `acc` (restored), whose configuration `broken` then fails."""

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["acc"], restore_value=["acc"])
    def g(acc: np.ndarray, *, c: int) -> int:
        acc += 1
        if c == broken:
            raise fl.LaunchContractError(f"c={c} no longer runs")
        return c

    return g


# ------------------------------------------------------------------ 1, 3: a failing winner


def test_a_failing_table_winner_is_tuned_again_from_the_calls_contents(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    g, acc = failing_winner(broken=2), np.zeros(2)
    path = fresh_table(tmp_path, g, g._key_fn((acc,), {}), {"c": 2})
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    with pytest.warns(fl.FearlessWarning, match="winner of `g`.*failed"):
        assert g(acc) == 1
    assert acc.tolist() == [1.0, 1.0]  # the failed run's `+= 1` was put back before tuning


def test_a_stored_winner_failing_inside_a_capture_is_not_tuned_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    g, acc = failing_winner(broken=2), np.zeros(2)
    path = fresh_table(tmp_path, g, g._key_fn((acc,), {}), {"c": 2})
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    assert g.best_config(acc) == {"c": 2}  # chosen outside, not run yet
    with (
        pytest.raises(fl.LaunchContractError, match="failed inside a capture"),
        fl.graph(fl.CUDAGraph()),
    ):
        g(acc)
    assert g.timings == {}  # nothing was timed inside the capture
    acc[:] = 0
    with pytest.warns(fl.FearlessWarning, match="failed"):
        assert g(acc) == 1  # outside: warned, tuned
    assert acc.tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------- 2, 12: capture


def test_under_capture_a_failing_configuration_is_an_error_not_a_retry() -> None:
    ran: list[int] = []

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["n"])
    def f(n: int, *, c: int) -> int:
        ran.append(c)
        if c == 1:
            raise fl.LaunchContractError("c=1 is refused")
        return c

    with (
        pytest.raises(fl.LaunchContractError, match="cannot try another") as info,
        fl.graph(fl.CUDAGraph()),
    ):
        f(4)
    assert ran == [1]  # no second configuration recorded behind the failed one
    assert "c=1 is refused" in str(info.value) and "outside the capture first" in str(info.value)
    assert f(4) == 2  # outside the capture it tunes as usual


def test_untimed_calls_take_the_first_configuration_prune_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[int] = []

    @fl.autotune(
        configs=[{"t": 4}, {"t": 16}, {"t": 32}],
        key=["x"],
        prune=lambda configs, x: (c for c in configs if c["t"] >= 16),  # any iterable
    )
    def f(x: np.ndarray, *, t: int) -> int:
        ran.append(t)
        return t

    with fl.graph(fl.CUDAGraph()):
        assert f(np.ones(8)) == 16
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    assert f(np.ones(16)) == 16
    assert f.best_config(np.ones(32)) == {"t": 16}
    assert 4 not in ran


# ------------------------------------------------------------- 4, 5, 9: arguments put back


def test_reset_to_zero_gives_every_call_the_same_result_cold_or_warm() -> None:
    def make(seen: list[int]) -> Any:
        @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["hits"], reset_to_zero=["hits"])
        def count(hits: np.ndarray, *, c: int) -> None:
            seen.append(int(hits[0]))
            hits += 1

        return count

    seen: list[int] = []
    hits = np.full(3, 5)
    make(seen)(hits)  # tunes
    assert hits.tolist() == [6] * 3 and seen[-1] == 5 and set(seen[:-1]) == {0}
    warm: list[int] = []
    hits = np.full(3, 5)
    make(warm)(hits)  # the stored winner, in a new object (a later process)
    assert hits.tolist() == [6] * 3 and warm == [5]


def test_an_undeclared_accumulated_argument_is_warned_about_and_put_back() -> None:
    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["x"])
    def acc(x: np.ndarray, out: np.ndarray, *, c: int) -> None:
        out += x

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["x"])
    def write(x: np.ndarray, out: np.ndarray, *, c: int) -> None:
        out[:] = 2 * x

    x, out = np.ones(4), np.zeros(4)
    with pytest.warns(fl.FearlessWarning, match=r"`acc` changed `out` again.*restore_value"):
        acc(x, out)
    assert out.tolist() == [1.0] * 4  # one application, as a warm call makes
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an output written, not added into: nothing to say
        write(x, out)
    assert out.tolist() == [2.0] * 4


def test_an_exception_of_the_functions_own_leaves_restored_arguments_as_they_were() -> None:
    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["acc"], restore_value=["acc"])
    def f(acc: np.ndarray, *, c: int) -> None:
        acc += 1
        if c == 2:
            raise ValueError("a bug in c=2")

    acc = np.zeros(2)
    with pytest.raises(ValueError, match="a bug"):
        f(acc)
    assert acc.tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------- 6, 10: keys


def test_a_torch_tensor_in_the_key_keys_by_its_shape() -> None:
    torch = pytest.importorskip("torch")
    ran: list[int] = []

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["x"])
    def f(x: Any, *, c: int) -> None:
        ran.append(c)

    f(torch.ones(8))  # tunes
    tuned = len(ran)
    f(torch.ones(8))
    f(torch.ones(8))
    assert len(f._best) == 1 and len(ran) == tuned + 2  # a new tensor is no new key
    (key,) = f._best
    assert "method" not in repr(key)  # not torch's `Tensor.tile`


def test_numpy_scalars_key_as_the_python_numbers_they_hold() -> None:
    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["n"])
    def f(x: np.ndarray, n: Any, *, c: int) -> int:
        return c

    x = np.ones(2)
    assert f._key_fn((x, np.int64(4)), {}) == f._key_fn((x, 4), {})
    assert autotune_tables.plain(f._key_fn((x, np.float32(0.5)), {})) == [[0.5], ["float64"]]


def test_a_key_function_of_the_wrong_arguments_says_so() -> None:
    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=lambda x: x.shape)
    def f(x: np.ndarray, out: np.ndarray, *, c: int) -> None:
        pass

    with pytest.raises(fl.KernelTypeError, match=r"key function .* does not take the call's"):
        f(np.ones(2), np.ones(2))


# -------------------------------------------------------------------------- 7, 8: export


def entry(function: str, n: int) -> autotune_tables.Entry:
    return autotune_tables.Entry(function, "sim", [n], {"c": 1}, {"fearless": "0"}, None)


def test_concurrent_exports_to_one_table_keep_every_entry(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    threads = [
        threading.Thread(target=autotune_tables.write, args=(path, [entry("f", n)]))
        for n in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(json.loads(path.read_text())["entries"]) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.json", "shared.json.lock"]


def test_export_refuses_a_table_it_would_lose_data_of(tmp_path: Path) -> None:
    for name, table in [
        ("v2.json", {"format": "fearless-tuning-table", "version": 2, "entries": []}),
        ("dict.json", {"format": "fearless-tuning-table", "version": 1, "entries": {}}),
    ]:
        path = tmp_path / name
        path.write_text(json.dumps(table))
        with pytest.raises(TableError, match=name):
            autotune_tables.write(path, [entry("f", 1)])
        assert json.loads(path.read_text()) == table  # not overwritten
    with pytest.raises(TableError, match="cannot write the tuning table"):
        autotune_tables.write(tmp_path / "v2.json" / "under-a-file.json", [entry("f", 1)])


def test_export_keeps_what_it_cannot_read_and_writes_through_a_link(tmp_path: Path) -> None:
    odd = {"function": "g", "arch": "sim", "key": 1, "config": {}, "seconds": "fast"}
    target = tmp_path / "real.json"
    table = {"format": "fearless-tuning-table", "version": 1, "note": "kept", "entries": [odd]}
    target.write_text(json.dumps(table))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert autotune_tables.write(link, [entry("f", 1)]) == 2
    assert link.is_symlink()
    data = json.loads(target.read_text())
    assert data["entries"][0] == odd and data["note"] == "kept"


# ----------------------------------------------------------------------------- 11: messages


def test_a_failing_configuration_is_named_on_the_progress_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(autotune_timing, "PROGRESS_AFTER_S", 0.0)

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["n"])
    def f(n: int, *, c: int) -> int:
        if c == 1:
            raise fl.LaunchContractError("c=1 is refused")
        return c

    assert f(4) == 2
    err = capsys.readouterr().err
    assert "config 1/2 {'c': 1} failed: LaunchContractError: c=1 is refused" in err
    assert "1 failed and skipped" in err


@pytest.mark.parametrize("tuning", ["1", "0"])
def test_every_configuration_failing_lists_each(
    monkeypatch: pytest.MonkeyPatch, tuning: str
) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", tuning)

    @fl.autotune(configs=[{"c": 3}, {"c": 5}], key=["n"])
    def f(n: int, *, c: int) -> int:
        raise fl.LaunchContractError(f"{n} is not a multiple of {c}")

    with pytest.raises(fl.LaunchContractError, match="7 is not a multiple of 3") as info:
        f(7)
    text = str(info.value)
    assert "every configuration of `f` tried failed (2)" in text
    assert "{'c': 3}: LaunchContractError: 7 is not a multiple of 3" in text
    assert "{'c': 5}: LaunchContractError: 7 is not a multiple of 5" in text


def test_a_table_config_matches_by_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[float] = []

    @fl.autotune(configs=[{"delay": 0.01}, {"delay": 0.0}], key=["x"])
    def f(x: np.ndarray, *, delay: float) -> float:
        ran.append(delay)
        return delay

    x = np.ones(3)
    path = fresh_table(tmp_path, f, f._key_fn((x,), {}), {"delay": 0})  # an int for 0.0
    monkeypatch.setenv("FEARLESS_TUNING_TABLE", str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "not one of its configurations"
        assert f(x) == 0.0
    assert ran == [0.0]  # the table's winner, untimed
