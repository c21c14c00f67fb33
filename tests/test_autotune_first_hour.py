"""Issue 33: what a new user and a fault campaign met in `fl.autotune`: the docstring's own
Tile pattern (a partition made per call), the moved-at note, progress lines in logs,
FEARLESS_AUTOTUNE=false and the other yes-or-no knobs, `.launch` and `.inspect` of a tuned
Tile kernel, key functions returning lists and dicts, hostile cache entries and stored winners
that no longer compile."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_timing, config, tile

pytestmark = pytest.mark.usefixtures("autotune_on_sim")


@tile.kernel
def doubled(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) * 2.0)


def test_the_docstring_pattern_partitions_out_on_every_call_and_gives_it_back() -> None:
    tried: list[int] = []

    @fl.autotune(configs=[{"tile": 64}, {"tile": 128}, {"tile": 256}], key=["x"])
    def scale(x: fl.Tensor, out: fl.Tensor, *, tile: int) -> None:
        tried.append(tile)
        doubled(out.partition((tile,)), x)

    x, out = fl.arange(1000, dtype=fl.f32), fl.zeros(1000)
    scale(x, out)  # tuning calls `scale` on the same `out` for each configuration
    assert set(tried) == {64, 128, 256}
    assert np.array_equal(out.numpy(), np.arange(1000, dtype=np.float32) * 2)
    scale(fl.ones(1000), out)  # and the caller's `out` stays usable, call after call
    assert np.array_equal(out.numpy(), np.full(1000, 2.0, np.float32))


def test_a_returned_partition_stays_open_and_a_failed_call_gives_back_too() -> None:
    @fl.autotune(configs=[{"tile": 64}, {"tile": 128}], key=["x"])
    def scale(x: fl.Tensor, out: fl.Tensor, *, tile: int) -> Any:
        part = out.partition((tile,))
        doubled(part, x)
        return part

    x, out = fl.arange(256, dtype=fl.f32), fl.zeros(256)
    part = scale(x, out)
    assert part.open
    with pytest.raises(fl.MovedError):
        out.numpy()  # the partition it returned owns the memory
    assert part.unpartition().numpy()[3] == 6.0

    @fl.autotune(configs=[{"tile": 64}, {"tile": 128}], key=["x"])
    def broken(x: fl.Tensor, out: fl.Tensor, *, tile: int) -> None:
        out.partition((tile,))
        raise fl.LaunchContractError("refused")

    with pytest.raises(fl.LaunchContractError):
        broken(x, out)
    assert out.numpy()[3] == 6.0  # given back although the call raised


def test_a_use_on_the_line_that_moved_the_tensor_says_it_moved_in_an_earlier_run() -> None:
    out, x = fl.zeros(8), fl.arange(8, dtype=fl.f32)
    with pytest.raises(fl.MovedError) as info:
        for _ in range(2):
            doubled(out.partition((8,)), x)
    (note,) = info.value.diagnostic.notes
    assert f"{__file__}:{info.value.loc.line}:" in note  # type: ignore[union-attr]
    assert "by an earlier run of this same line" in note
    moved = fl.zeros(8)
    moved.partition((8,))
    with pytest.raises(fl.MovedError) as info:
        moved.numpy()
    assert "earlier run" not in info.value.diagnostic.notes[0]


class _Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_is_plain_lines_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    stream = _Stream(terminal)
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(autotune_timing, "PROGRESS_AFTER_S", 0.0)

    @fl.autotune(configs=[{"a": 1}, {"a": 2}])
    def f(*, a: int) -> int:
        return a

    f()
    text = stream.getvalue()
    if terminal:
        assert text.startswith("\rfearless: autotuning f: config 1/2") and text.endswith("\n")
        assert text.count("\n") == 1
    else:
        assert "\r" not in text and "\x1b" not in text
        assert text.splitlines() == [
            "fearless: autotuning f: config 1/2 {'a': 1}",
            "fearless: autotuning f: config 2/2 {'a': 2}",
            text.splitlines()[2],
        ]
        assert text.splitlines()[2].startswith("fearless: autotuned f in ")
        assert text.endswith("\n")


@pytest.mark.parametrize(
    ("value", "tuned"),
    [
        *[("0", False), ("false", False), ("FALSE", False), ("No", False), ("off", False)],
        *[("1", True), ("true", True), ("Yes", True), ("ON", True), ("", True)],
    ],
)
def test_autotune_off_in_every_spelling(
    monkeypatch: pytest.MonkeyPatch, value: str, tuned: bool
) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", value)
    calls: list[int] = []

    @fl.autotune(configs=[{"a": 1}, {"a": 2}])
    def f(*, a: int) -> int:
        calls.append(a)
        return a

    f()
    assert (calls != [1]) is tuned


@pytest.mark.parametrize(
    ("read", "name", "default"),
    [
        (config.autotune_enabled, "FEARLESS_AUTOTUNE", True),
        (config.cache_disabled, "FEARLESS_NO_DISK_CACHE", False),
        (config.verify_each_pass, "FEARLESS_VERIFY", False),
        (config.show_internal_frames, "FEARLESS_TRACEBACK", False),
        (config.compiled_launcher_enabled, "FEARLESS_CLAUNCH", True),
        (config.sync_after_launch, "FEARLESS_SYNC", False),
    ],
)
def test_every_yes_or_no_knob_reads_the_same_way(
    monkeypatch: pytest.MonkeyPatch, read: Any, name: str, default: bool
) -> None:
    for off in ("0", "false", "False", "NO", "off"):
        monkeypatch.setenv(name, off)
        assert read() is False, (name, off)
    for on in ("1", "true", "TRUE", "yes", "On"):
        monkeypatch.setenv(name, on)
        assert read() is True, (name, on)
    monkeypatch.delenv(name)
    assert read() is default
    monkeypatch.setenv(name, f"maybe-{name}")
    with pytest.warns(fl.FearlessWarning, match=f"{name}='maybe-{name}' is neither on"):
        assert read() is default


def test_the_inline_sync_test_agrees_with_the_knob() -> None:
    for value in ("1", "TRUE", "yes", "oN"):
        assert value in config.SYNC_ON and value.encode() in config.SYNC_ON
    for value in ("", "0", "false", "off", "no", "2", None):
        assert value not in config.SYNC_ON


def test_a_tuned_tile_kernel_launches_on_a_host_grid_and_inspects() -> None:
    # tuning launches it several times: `reset_to_zero` zeroes the counts before each
    @fl.autotune(configs=[{"occupancy": 1}, {"occupancy": 2}], key=["x"], reset_to_zero=["counts"])
    @tile.kernel
    def histogram(counts: tile.Atomic[fl.i32], x: tile.Tensor[fl.i32]):
        i = tile.block_id(0)
        tile.atomic_add(counts, tile.load(x, (i,), (16,)), tile.full((16,), 1, fl.i32))

    x = fl.asarray(np.arange(64, dtype=np.int32) % 4)
    counts = fl.zeros(4, dtype=fl.i32)
    histogram.launch(4, counts, x)
    assert counts.numpy().tolist() == [16, 16, 16, 16]
    assert histogram.name == "histogram" and callable(histogram.annotations)
    assert "atomic" in histogram.inspect(counts, x).lower()

    @fl.autotune(configs=[{"a": 1}])
    def host(*, a: int) -> None:
        return None

    with pytest.raises(fl.KernelTypeError, match=r"has no `\.launch`"):
        host.launch(1)


@pytest.mark.parametrize(
    "key", [lambda x: [x.shape[0], "rows"], lambda x: {"n": x.shape[0], "kind": ["a", "b"]}]
)
def test_a_key_function_may_return_lists_and_dicts(key: Any) -> None:
    calls: list[int] = []

    @fl.autotune(configs=[{"a": 1}, {"a": 2}], key=key)
    def f(x: np.ndarray, *, a: int) -> int:
        calls.append(a)
        return a

    f(np.ones(3))
    n = len(calls)
    f(np.ones(3))  # the same key: not tuned again
    assert len(calls) == n + 1


def test_a_key_function_returning_what_cannot_be_a_key_is_a_clear_error() -> None:
    def shape_key(x: np.ndarray) -> Any:
        return np.array(x.shape)

    @fl.autotune(configs=[{"a": 1}, {"a": 2}], key=shape_key)
    def f(x: np.ndarray, *, a: int) -> int:
        return a

    with pytest.raises(fl.KernelTypeError, match=r"key function `.*shape_key` of `f` returned"):
        f(np.ones(3))


def _sleepy(calls: list[Any], refuse: dict[str, Any]) -> Any:
    @fl.autotune(configs=[{"tile": 1}, {"tile": 2}], key=["x"])
    def f(x: np.ndarray, *, tile: int) -> int:
        calls.append(tile)
        if tile == refuse.get("tile"):  # a kernel it calls no longer compiles with this tile
            raise fl.CompileError(f"tile {tile} no longer fits")
        return tile

    return f


def _entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "autotune").rglob("*.json"))


def test_a_deeply_nested_cache_entry_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    _sleepy([], {})(np.ones(4))
    (entry,) = _entries(tmp_path)
    entry.write_text("[" * 200_000 + "]" * 200_000)
    calls: list[Any] = []
    with pytest.warns(fl.FearlessWarning, match="unusable: it nests too deeply"):
        _sleepy(calls, {})(np.ones(4))
    assert sorted(set(calls)) == [1, 2]  # tuned again
    assert _sleepy([], {}).best_config(np.ones(4))["tile"] in (1, 2)  # and stored again


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe not utf-8", "not JSON"),
        (b'{"best": [1, 2]}', "no winning configuration"),
        (b"[]", "no winning configuration"),
        (b" " * (2 << 20), "over"),
    ],
)
def test_other_hostile_cache_entries_are_misses(tmp_path: Path, content: bytes, why: str) -> None:
    _sleepy([], {})(np.ones(4))
    (entry,) = _entries(tmp_path)
    entry.write_bytes(content)
    calls: list[Any] = []
    with pytest.warns(fl.FearlessWarning, match=why):
        _sleepy(calls, {})(np.ones(4))
    assert sorted(set(calls)) == [1, 2]


def test_a_stored_winner_that_no_longer_compiles_is_dropped_and_tuned_again(
    tmp_path: Path,
) -> None:
    first = _sleepy([], {})
    first(np.ones(4))
    winner = first.best_config(np.ones(4))["tile"]
    refuse = {"tile": winner}  # the next process: the stored winner fails
    calls: list[Any] = []
    again = _sleepy(calls, refuse)
    with pytest.warns(fl.FearlessWarning, match="stored autotuning winner of `f`.*tuning again"):
        assert again(np.ones(4)) == 3 - winner
    assert calls[0] == winner and 3 - winner in calls[1:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert again(np.ones(4)) == 3 - winner  # no second warning, no second tuning
    third: list[Any] = []
    _sleepy(third, refuse)(np.ones(4))  # the store now holds the new winner
    assert third == [3 - winner]


def test_progress_says_how_many_configurations_still_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the timing waits for compiles (tile/compile_ahead.py's `ready_order`), the line
    says how many configurations are still compiling; off a terminal, once per count."""
    import threading
    from concurrent.futures import Future
    from types import SimpleNamespace

    from fearless.tile.compile_ahead import ready_order

    stream = _Stream(False)
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(autotune_timing, "PROGRESS_AFTER_S", 0.0)
    progress = autotune_timing.Progress("f", ())
    slow: Future[None] = Future()
    slower: Future[None] = Future()
    kernel = SimpleNamespace(compiles=SimpleNamespace(ahead={"a": slow, "b": slower}))
    met = {0: [(kernel, "a")], 1: [(kernel, "b")]}
    threading.Timer(0.05, lambda: slow.set_result(None)).start()
    threading.Timer(0.15, lambda: slower.set_result(None)).start()
    waits: list[int] = []

    def waiting(left: int) -> None:
        waits.append(left)
        progress.compiling(left, 2)

    assert list(ready_order([0, 1], met, busy=0, waiting=waiting)) == [0, 1]
    assert waits[0] == 2 and waits[-1] == 1
    assert stream.getvalue().splitlines() == [
        "fearless: autotuning f: 2 of 2 configurations compiling",
        "fearless: autotuning f: 1 of 2 configurations compiling",
    ]


def test_the_closing_line_says_when_only_the_tables_nearest_winners_were_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = _Stream(False)
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(autotune_timing, "PROGRESS_AFTER_S", 0.0)
    autotune_timing.Progress("f", ()).done({"a": 1}, 1e-3, shortlist=(2, 17))
    assert stream.getvalue().endswith(
        "2 of 17 configurations timed, the tuning tables' nearest winners "
        "(FEARLESS_AUTOTUNE_FULL=1 times all)\n"
    )
