"""fl.autotune: the tuning protocol on the simulator (timings there are real but say nothing
about a GPU, so the tests make configurations differ by sleeping), keys, the disk store,
FEARLESS_AUTOTUNE=0, failing configurations, restoring outputs, Tile kernels and the errors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_timing, simt, tile
from support.fake_autotune_driver import _FakeDriver

pytestmark = pytest.mark.usefixtures("autotune_on_sim")


def sleepy(calls: list[Any]) -> Any:
    """A function whose configuration `delay` decides its speed; it records every call."""

    @fl.autotune(configs=[{"delay": 0.03}, {"delay": 0.0}, {"delay": 0.02}], key=["x"])
    def f(x: np.ndarray, *, delay: float) -> float:
        calls.append(delay)
        time.sleep(delay)
        return float(x.sum()) + delay

    return f


def test_the_fastest_configuration_wins_and_is_kept() -> None:
    calls: list[Any] = []
    f = sleepy(calls)
    x = np.ones(4)
    assert f(x) == 4.0  # called with the winner, delay 0
    assert set(calls) == {0.03, 0.0, 0.02}  # every configuration was timed
    n = len(calls)
    assert f(x + 1) == 8.0  # same key (shape and dtype): no tuning
    assert calls[n:] == [0.0]
    assert f.best_config(x) == {"delay": 0.0}
    assert len(f.timings[next(iter(f.timings))]) == 3


def test_a_new_key_tunes_again_and_dtypes_are_part_of_it() -> None:
    calls: list[Any] = []
    f = sleepy(calls)
    f(np.ones(4))
    n = len(calls)
    f(np.ones(5))  # another shape
    assert len(calls) > n + 1
    n = len(calls)
    f(np.ones(5, dtype=np.float32))  # another dtype
    assert len(calls) > n + 1


def test_key_dtypes_names_the_arrays_whose_dtypes_join_the_key() -> None:
    """`key_dtypes=[names]`: an argument left out (a kept output whose dtype follows from the
    others', as the attention forward's f32 lse) shares the key of a call without it."""

    @fl.autotune(configs=[{"c": 1}, {"c": 2}], key=["x"], key_dtypes=["x"])
    def f(x: np.ndarray, extra: Any = None, *, c: int) -> int:
        return c

    key = f._key_fn
    assert key((np.ones(4),), {}) == key((np.ones(4), np.ones(2, np.float32)), {})
    assert key((np.ones(4),), {}) != key((np.ones(4, np.float32),), {})
    with pytest.raises(fl.CompileError, match="`key_dtypes` names `y`"):
        fl.autotune(configs=[{"c": 1}], key_dtypes=["y"])(lambda x, *, c: c)


def test_the_winner_is_stored_on_disk_for_the_next_process(tmp_path: Path) -> None:
    calls: list[Any] = []
    sleepy(calls)(np.ones(4))
    assert list((tmp_path / "autotune").rglob("*.json"))
    again: list[Any] = []
    sleepy(again)(np.ones(4))  # a new Autotuned, as in a new process
    assert again == [0.0]


def test_a_corrupt_stored_winner_is_tuned_again(tmp_path: Path) -> None:
    sleepy([])(np.ones(4))
    for path in (tmp_path / "autotune").rglob("*.json"):
        path.write_text("{not json")
    calls: list[Any] = []
    with pytest.warns(fl.FearlessWarning, match="is unusable: it is not JSON; tuning again"):
        sleepy(calls)(np.ones(4))
    assert len(calls) > 1


def test_autotune_0_takes_the_first_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    calls: list[Any] = []
    assert sleepy(calls)(np.ones(4)) == 4.03
    assert calls == [0.03]


def test_untimed_a_configuration_the_gpu_refuses_gives_way_to_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tuning off (and under capture): the first configuration that runs, as the tuner skips
    one that fails (the H100 refused training attention's first configuration as a kernel
    that would hang, session 27); accumulated arguments are put back before the retry, and
    every one failing raises the first's error."""
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    ran: list[int] = []

    @fl.autotune(configs=[{"tile": 3}, {"tile": 4}, {"tile": 5}], key=["n"], restore_value=["acc"])
    def f(n: int, acc: np.ndarray, *, tile: int) -> int:
        ran.append(tile)
        acc += 1  # written before the refusal: put back for the next configuration
        if n % tile:
            raise fl.LaunchContractError(f"{n} is not a multiple of {tile}")
        return tile

    acc = np.zeros(2)
    assert f(8, acc) == 4 and ran == [3, 4]
    np.testing.assert_array_equal(acc, [1.0, 1.0])
    assert f(8, acc) == 4 and ran == [3, 4, 4]  # the key keeps the one that ran
    with pytest.raises(fl.LaunchContractError, match="7 is not a multiple of 3"):
        f(7, acc)


def test_failing_configurations_are_skipped() -> None:
    @fl.autotune(configs=[{"tile": 3}, {"tile": 4}], key=["n"])
    def f(n: int, *, tile: int) -> int:
        if n % tile:
            raise fl.LaunchContractError(f"{n} is not a multiple of {tile}")
        return tile

    assert f(8) == 4
    with pytest.raises(fl.LaunchContractError, match="7 is not a multiple of 4"):
        f(7)  # every configuration fails: the last error is raised


def test_restore_value_and_reset_to_zero_undo_the_timed_calls() -> None:
    @fl.autotune(
        configs=[{"step": 1.0}, {"step": 1.0 + 0.0}],
        key=["acc"],
        restore_value=["acc"],
        reset_to_zero=["hits"],
    )
    def accumulate(acc: np.ndarray, hits: np.ndarray, *, step: float) -> None:
        acc += step
        hits += 1

    acc, hits = np.full(3, 10.0), np.full(3, 5)
    accumulate(acc, hits)
    assert acc.tolist() == [11.0] * 3  # one application, after the timed ones were undone
    # zeroed before each timed call, the call's own contents again after tuning: the call
    # that tuned does what every later one does
    assert hits.tolist() == [6] * 3
    hits = np.full(3, 5)
    accumulate(acc, hits)
    assert hits.tolist() == [6] * 3


def test_restoring_an_fl_tensor() -> None:
    @simt.kernel
    def add(out: simt.DisjointSlice[fl.f32], step: fl.f32):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = out[i] + step

    @fl.autotune(configs=[{"block": 32}, {"block": 64}], key=["acc"], restore_value=["acc"])
    def bump(acc: fl.Tensor, *, block: int) -> None:
        add[(len(acc) + block - 1) // block, block](acc, 1.0)

    acc = fl.arange(100, dtype=fl.f32)
    bump(acc)
    assert np.array_equal(acc.numpy(), np.arange(100, dtype=np.float32) + 1)


def test_a_partition_is_restored_through_its_tensor() -> None:
    part = fl.arange(8, dtype=fl.f32).partition((4,))
    zero = autotune_timing.zero("out", part)
    zero()
    assert part.unpartition().numpy().tolist() == [0.0] * 8
    part = fl.arange(8, dtype=fl.f32).partition((4,))
    put_back = autotune_timing.keep("out", part)
    part.tensor._host[:] = -1  # what a kernel writing the partition would do
    put_back()
    assert part.unpartition().numpy().tolist() == list(range(8))


def test_an_unknown_array_cannot_be_restored() -> None:
    with pytest.raises(fl.KernelTypeError, match="cannot restore `x`: a `list`"):
        autotune_timing.keep("x", [1, 2])


def test_a_tile_kernel_tunes_its_hints_and_consts() -> None:
    @fl.autotune(configs=[{"TILE": 16, "occupancy": 1}, {"TILE": 32, "occupancy": 2}], key=["x"])
    @tile.kernel
    def partial_sums(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], TILE: tile.Const[int]):
        acc = tile.zeros((TILE,), fl.f32)
        for k in range(tile.block_id(0), tile.num_tiles(x, 0, (TILE,)), tile.num_blocks(0)):
            acc = acc + tile.load(x, (k,), (TILE,))
        out.store(tile.sum(acc))

    x = fl.asarray(np.arange(256, dtype=np.float32))
    out = fl.zeros(1)
    part = out.partition((1,))
    partial_sums(part, x)  # TILE is left out of the call
    assert part.unpartition().numpy()[0] == np.arange(256).sum()
    assert partial_sums.best_config(part, x)["TILE"] in (16, 32)


def test_a_simt_launch_tunes_its_block_size() -> None:
    @simt.kernel
    def scale(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i] * 2.0

    @fl.autotune(configs=[{"block": 64}, {"block": 128}], key=["x"])
    def run(x: fl.Tensor, out: fl.Tensor, *, block: int) -> None:
        scale[(len(out) + block - 1) // block, block](x, out)

    x, out = fl.arange(300, dtype=fl.f32), fl.zeros(300)
    run(x, out)
    assert np.array_equal(out.numpy(), np.arange(300, dtype=np.float32) * 2)


def test_a_progress_line_once_tuning_is_slow(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(autotune_timing, "PROGRESS_AFTER_S", 0.0)
    sleepy([])(np.ones(4))
    err = capsys.readouterr().err
    assert "fearless: autotuning f: config 3/3" in err
    assert "fearless: autotuned f in" in err and "chose {'delay': 0.0}" in err


def test_quick_tuning_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    @fl.autotune(configs=[{"a": 1}, {"a": 2}])
    def f(*, a: int) -> int:
        return a

    f()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fl.autotune(configs=[])(lambda *, a: a), "needs a non-empty list"),
        (lambda: fl.autotune(configs=[1, 2])(lambda *, a: a), "not a mapping of keyword names"),
        (
            lambda: fl.autotune(configs=[{"a": 1}, {"b": 2}])(lambda *, a, b: a),
            "set different names",
        ),
        (lambda: fl.autotune(configs=[{"b": 1}])(lambda *, a: a), "`b` in the configurations"),
        (
            lambda: fl.autotune(configs=[{"a": 1}], key=["n"])(lambda x, *, a: a),
            "the autotuning key names `n`",
        ),
        (
            lambda: fl.autotune(configs=[{"a": 1}], restore_value=["y"])(lambda x, *, a: a),
            "`restore_value` names `y`",
        ),
    ],
)
def test_mistakes_are_clear_errors(make: Any, message: str) -> None:
    with pytest.raises(fl.CompileError, match=message) as info:
        make()
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_a_simt_kernel_is_decorated_through_its_host_function() -> None:
    @simt.kernel
    def k(out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = 1.0

    with pytest.raises(fl.CompileError, match="is a SIMT kernel") as info:
        fl.autotune(configs=[{"block": 64}])(k)
    assert "decorate the host function" in str(info.value)


def test_the_device_clock_spins_ahead_of_its_start_event_and_outlasts_slow_host_calls() -> None:
    # The spin keeps the GPU busy while the host enqueues the call, so the events time only the
    # kernels; a call whose host time outran the spin is timed again behind a longer one.
    clock = object.__new__(autotune_timing.DeviceClock)
    fake = _FakeDriver()
    spins: list[float] = []
    clock.driver, clock.start, clock.end, clock.stream = fake, "start", "end", None
    clock.scratch = type("S", (), {"ptr": 0})()
    clock.spinner = type("Sp", (), {"spin": lambda self, s, t: spins.append(t) or None})()
    clock.gate = clock.GATE_S
    clock.wait = lambda: None  # type: ignore[method-assign]
    assert clock.time(lambda: None) == pytest.approx(10e-6)
    assert fake.log == ["flush", "start", "end"] and spins == [clock.GATE_S]

    fake.log.clear()
    spins.clear()
    assert clock.time(lambda: time.sleep(0.001)) == pytest.approx(10e-6)
    # timed again behind a longer gate: once, or more where a loaded host's sleep outran it too
    assert len(spins) >= 2 and spins[1] > 2 * 0.001 and clock.gate >= 2 * 0.001
    assert fake.log == ["flush", "start", "end"] * len(spins)

    spins.clear()
    clock.time(lambda: time.sleep(0.2))  # the gate stops growing at MAX_GATE_S
    assert clock.gate == clock.MAX_GATE_S and spins[-1] == clock.MAX_GATE_S

    spins.clear()  # and follows the host back down
    clock.time(lambda: None)
    assert spins == [clock.MAX_GATE_S] and clock.gate == clock.GATE_S


def test_the_compile_ahead_pass_compiles_every_configuration_without_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On the GPU the tuner first calls each configuration with Tile launches compiling on
    # worker threads (tile/compile_ahead.py), then times them. Here the launches are made to take the
    # ahead path on the simulator: none may run, and each configuration's cubin is waiting.
    import importlib

    from fearless.backends import toolchain
    from fearless.tile import compile_ahead as ahead

    kernel_module = importlib.import_module("fearless.tile.kernel")

    if toolchain.find_tileiras() is None:
        pytest.skip("no tileiras on this machine")
    monkeypatch.setattr(kernel_module, "ahead_applies", lambda target: True)

    @fl.autotune(configs=[{"TILE": 16, "occupancy": 1}, {"TILE": 32, "occupancy": 2}], key=["x"])
    @tile.kernel
    def doubled(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], TILE: tile.Const[int]):
        out.store(tile.load_like(x, out) * 2.0)

    x = fl.asarray(np.arange(64, dtype=np.float32))
    host = np.zeros(64, np.float32)
    part = fl.asarray(host).partition((64,))  # on the simulator `host` is the memory
    restored: list[int] = []
    launches = doubled._compile_ahead(None, (part, x), {}, lambda: restored.append(1))
    assert restored == [1, 1] and ahead.STATE.thread is None and ahead.STATE.pool is None
    assert [len(met) for met in launches.values()] == [1, 1]  # each configuration's launch
    stacks = {n: ahead.stack_bytes(met) for n, met in launches.items()}
    assert stacks == {0: 0, 1: 0}  # what their cubins spill: nothing
    for occupancy in (1, 2):
        kernel = doubled.fn.options(occupancy=occupancy)
        (key,) = kernel.compiles.ahead
        assert kernel.compile(*key).cubin[:4] == b"\x7fELF"  # taken from the pool
        assert not kernel.compiles.ahead
    assert host.tolist() == [0.0] * 64  # the pass ran nothing
    kernel(part, x, 16)  # outside the pass a launch runs, the patched check notwithstanding
    assert part.unpartition().numpy().tolist() == [2.0 * i for i in range(64)]


def test_configurations_that_spill_much_can_be_left_untimed_beside_one_that_does_not() -> None:
    """`spilling` (with SKIP_SPILLING): 128 bytes or more a thread (SPILL_PRUNE_BYTES) is left
    untimed beside a configuration without spills; never the stale winner it is asked to keep,
    never when all spill, never one whose kernels did not compile (None: its timing says why)."""
    from fearless.autotune_timing import SPILL_PRUNE_BYTES, spilling

    big = SPILL_PRUNE_BYTES
    assert spilling({0: 0, 1: big, 2: big - 8, 3: 5504, 4: None}) == {1, 3}
    assert spilling({0: 0, 1: big, 3: 5504}, keep=3) == {1}
    assert spilling({0: 96, 1: big, 2: 5504}) == set()  # nothing without spills to prefer
    assert spilling({}) == set()


def test_the_compile_ahead_pass_reads_a_configurations_spills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dk_dv at (64, 128) D 128 on one warp group spills (584 bytes with tileiras 13.5), on two
    it does not: the pass's `stack_bytes` reads it from the cubins, as the tuner does."""
    import importlib

    from fearless.backends import toolchain
    from fearless.ops import kernels_attention_backward as KB
    from fearless.tile import compile_ahead as ahead

    if toolchain.find_tileiras() is None:
        pytest.skip("no tileiras on this machine")
    kernel_module = importlib.import_module("fearless.tile.kernel")
    monkeypatch.setattr(kernel_module, "ahead_applies", lambda target: True)
    q = fl.zeros((1, 2, 256, 128), dtype=fl.f16)
    stats = fl.zeros((1, 2, 256))
    found = []
    for warps in (None, 8):
        kernel = KB.make_attention_dkdv(fl.f16, True, True).options(num_worker_warps=warps)
        dk, dv = (fl.empty(q.shape, dtype=fl.f16).partition((1, 1, 128, 128)) for _ in range(2))
        with ahead.compile_ahead(1):
            kernel(dk, dv, None, q, q, q, q, stats, stats, None, None, None, 0.1, 0, 0, 1.0, 64, 1)
            found.append(ahead.stack_bytes(list(ahead.STATE.launches)))
        dk.unpartition()
        dv.unpartition()
    assert found[0] is not None and found[0] > 0 and found[1] == 0


def test_the_timing_pass_takes_configurations_as_their_compiles_finish() -> None:
    """`ready_order`: a slow compile (config 0 here) holds up only its own timing; a stale
    winner (`first`) is still timed first; with `busy` compiles or fewer still running, the
    ready ones go in their order; a configuration that launched nothing is ready at once."""
    import threading
    from concurrent.futures import Future
    from types import SimpleNamespace

    from fearless.tile.compile_ahead import ready_order

    def launches() -> tuple[dict[int, list[tuple[Any, Any]]], Future[None]]:
        slow: Future[None] = Future()
        done: Future[None] = Future()
        done.set_result(None)
        kernel = SimpleNamespace(compiles=SimpleNamespace(ahead={"slow": slow, "done": done}))
        met = {0: [(kernel, "slow")], 1: [(kernel, "done")], 2: [(kernel, "done")], 3: []}
        return met, slow

    def finish_later(f: Future[None]) -> None:
        threading.Timer(0.05, lambda: f.set_result(None)).start()

    met, slow = launches()
    finish_later(slow)
    assert list(ready_order([0, 1, 2, 3], met, busy=1)) == [1, 2, 3, 0]
    met, slow = launches()
    finish_later(slow)
    assert list(ready_order([0, 1, 2, 3], met, first=0, busy=1)) == [0, 1, 2, 3]
    met, slow = launches()
    finish_later(slow)  # no compile may still run: all wait for the slow one, then in order
    assert list(ready_order([2, 0, 1, 3], met, busy=0)) == [2, 0, 1, 3]


def test_ready_order_leaves_out_what_still_compiles_past_the_deadline() -> None:
    """Past `deadline` the ready configurations go at once and, once one has gone, the ones
    still compiling are left out; before anything has gone it waits for them."""
    import time
    from concurrent.futures import Future
    from types import SimpleNamespace

    from fearless.tile.compile_ahead import ready_order

    slow: Future[None] = Future()
    done: Future[None] = Future()
    done.set_result(None)
    kernel = SimpleNamespace(compiles=SimpleNamespace(ahead={"slow": slow, "done": done}))
    met = {0: [(kernel, "slow")], 1: [(kernel, "done")], 2: [(kernel, "done")]}
    start = time.perf_counter()
    assert list(ready_order([0, 1, 2], met, busy=0, deadline=start + 0.05)) == [1, 2]
    assert 0.05 <= time.perf_counter() - start < 5  # waited for the budget, not for ever
    only_slow = {0: [(kernel, "slow")]}
    import threading

    threading.Timer(0.1, lambda: slow.set_result(None)).start()
    assert list(ready_order([0], only_slow, deadline=start)) == [0]  # nothing else to time


def test_a_compile_past_the_budget_is_left_out_and_its_winner_not_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On the GPU, a configuration still compiling when the others are timed and the tuning
    has run COMPILE_BUDGET_S is left out: the winner comes from the rest, serves this process,
    and is not stored on disk (the next process tunes in full). With no budget (`fearless
    tune`) every configuration is timed."""
    import threading
    from concurrent.futures import Future
    from types import SimpleNamespace

    from fearless import autotune_session, autotune_timing, autotuning
    from fearless.runtime import driver
    from fearless.runtime import target as target_module
    from fearless.tile import compile_ahead as ahead

    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    gpu = SimpleNamespace(on_device=True, simulated=False, name="cuda")
    monkeypatch.setattr(target_module, "current_target", lambda: gpu)
    monkeypatch.setattr(driver, "device_info", lambda: SimpleNamespace(arch="sm_90", name="Fake"))
    monkeypatch.setattr(autotune_session, "DeviceClock", autotune_timing.HostClock)
    monkeypatch.setattr(ahead, "stack_bytes", lambda launches: 0)
    slow: Future[None] = Future()
    done: Future[None] = Future()
    done.set_result(None)
    kernel = SimpleNamespace(compiles=SimpleNamespace(ahead={"slow": slow, "done": done}))

    def compile_ahead(self: Any, grid: Any, args: Any, kwargs: Any, restore: Any, order: Any):
        return {0: [(kernel, "slow")], 1: [(kernel, "done")], 2: [(kernel, "done")]}

    monkeypatch.setattr(autotuning.Autotuned, "_compile_ahead", compile_ahead)
    ran: list[int] = []

    def make() -> Any:
        @fl.autotune(configs=[{"c": 0}, {"c": 1}, {"c": 2}], key=["n"])
        def f(n: int, c: int) -> int:
            ran.append(c)
            # configuration 0, the slow compile, runs fastest; 5 ms apart (at 2 ms a loaded
            # host once timed 2 before 1)
            time.sleep(0.005 * c)
            return c

        return f

    monkeypatch.setattr(autotune_timing, "COMPILE_BUDGET_S", 0.05)
    f = make()
    assert f(1) == 1 and 0 not in ran  # the best of those that compiled in time
    (timings,) = f.timings.values()
    assert timings[0] is None and not list(tmp_path.glob("autotune/v1/*.json"))
    assert f(1) == 1  # kept for the process: not tuned again
    monkeypatch.setattr(autotune_timing, "COMPILE_BUDGET_S", None)
    threading.Timer(0.1, lambda: slow.set_result(None)).start()
    ran.clear()
    g = make()
    assert g(1) == 0 and 0 in ran and None not in next(iter(g.timings.values()))
    assert len(list(tmp_path.glob("autotune/v1/*.json"))) == 1  # this one is stored


def test_compile_ahead_belongs_to_its_thread_and_does_not_nest() -> None:
    import threading

    from fearless.runtime.target import Target
    from fearless.tile import compile_ahead as ahead

    seen: list[bool] = []
    with ahead.compile_ahead(1):
        assert ahead.applies(Target.CUDA) and not ahead.applies(Target.SIM)
        worker = threading.Thread(target=lambda: seen.append(ahead.applies(Target.CUDA)))
        worker.start()
        worker.join()
        with ahead.compile_ahead(1):  # nested: the outer pass goes on
            assert ahead.applies(Target.CUDA)
        assert ahead.applies(Target.CUDA)
    assert seen == [False] and not ahead.applies(Target.CUDA)


def test_prune_times_only_the_configurations_it_keeps() -> None:
    """`prune` (Triton's early_config_prune, issue 37): a new key times only what it keeps;
    the winner comes from those; one that keeps none, or returns a configuration of its own,
    is the decorator's mistake, named."""
    calls: list[Any] = []
    seen: list[int] = []

    def keep_slow_ones(configs: list[dict[str, float]], x: np.ndarray) -> list[dict[str, float]]:
        seen.append(x.size)
        return [c for c in configs if c["delay"] > 0]

    @fl.autotune(
        configs=[{"delay": 0.03}, {"delay": 0.0}, {"delay": 0.02}], key=["x"], prune=keep_slow_ones
    )
    def f(x: np.ndarray, *, delay: float) -> float:
        calls.append(delay)
        time.sleep(delay)
        return delay

    assert f(np.ones(4)) == 0.02  # the fastest of those kept, not 0.0
    assert set(calls) == {0.03, 0.02} and seen == [4]
    times = f.timings[next(iter(f.timings))]
    assert times[1] is None and times[0] is not None and times[2] is not None

    @fl.autotune(configs=[{"delay": 0.0}, {"delay": 0.01}], prune=lambda configs, x: [])
    def none_kept(x: np.ndarray, *, delay: float) -> None:
        pass

    with pytest.raises(fl.CompileError, match="`prune` of `none_kept` returned none"):
        none_kept(np.ones(2))

    @fl.autotune(configs=[{"delay": 0.0}, {"delay": 0.01}], prune=lambda c, x: [{"delay": 5}])
    def stranger(x: np.ndarray, *, delay: float) -> None:
        pass

    with pytest.raises(
        fl.CompileError, match=r"configurations not among its own: \[\{'delay': 5\}\]"
    ):
        stranger(np.ones(2))


def test_gemm_tiles_past_the_problem_are_pruned() -> None:
    """ops' matmul and bmm time only tiles that fit the output (M by its size class, N), the
    smallest tiles when none do: a 64 x 64 GEMM times 1 of the 17 configurations."""
    from fearless.ops.kernels_gemm import BMM_CONFIGS, GEMM_CONFIGS, fitting_tiles

    small = fitting_tiles(GEMM_CONFIGS, 64, 64)
    assert small and all(c["shape"] == (64, 64) for c in small)
    assert len(small) < len(GEMM_CONFIGS)
    mid = fitting_tiles(GEMM_CONFIGS, 100, 128)  # M's class is 128
    assert {c["shape"] for c in mid} == {(128, 128), (64, 128), (64, 64)}
    assert fitting_tiles(GEMM_CONFIGS, 4096, 4096) == GEMM_CONFIGS  # large: every one
    assert all(c["shape"][0] <= 64 for c in fitting_tiles(BMM_CONFIGS, 33, 512))
    assert fitting_tiles(GEMM_CONFIGS, 1, 1) == small  # past none: the smallest tiles


def test_a_gemm_winner_runs_unclustered_where_its_cluster_does_not_divide_the_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tuned winner serves every M of its size class: a (256, 256) tile over clusters of 2
    chosen at 1024 rows (4 tile rows) meets 768 (3) in the same class. That launch takes the
    winner's tiles without a cluster (the GPU refuses a cluster of 2 over 3 blocks, E0700);
    the tuner does not time a clustered configuration that would run unclustered, and a
    persistent one (its grid is whole clusters) is kept."""
    from fearless.ops import kernels_gemm
    from fearless.ops.kernels_gemm import GEMM_CONFIGS, clustered, dividing_cluster

    # 1024 rows in tiles of 256 are 4 blocks; 768 are 3; 785 round up to 4
    assert dividing_cluster(1024, 256, 2) == 2 and dividing_cluster(768, 256, 2) is None
    assert dividing_cluster(768, 256, None) is None and dividing_cluster(2048, 256, 4) == 4
    assert dividing_cluster(785, 256, 2) == 2 and dividing_cluster(3, 1, 2) is None
    odd = clustered(GEMM_CONFIGS, 768)
    rows = [-(-768 // c["shape"][0]) for c in odd]  # its tiles' rows, rounded up
    assert all(
        c["persistent"] or not c["num_ctas"] or r % c["num_ctas"] == 0
        for c, r in zip(odd, rows, strict=True)
    )
    assert any(c["persistent"] and c["num_ctas"] for c in odd)
    assert len(odd) < len(GEMM_CONFIGS) and clustered(GEMM_CONFIGS, 1024) == GEMM_CONFIGS

    asked: list[int | None] = []
    real = kernels_gemm.kernel_of

    class Recorder:
        def __init__(self, kernel: Any) -> None:
            self.kernel = kernel

        def options(self, **hints: Any) -> Any:
            asked.append(hints["num_ctas"])
            return self.kernel.options(**hints)

    monkeypatch.setattr(kernels_gemm, "kernel_of", lambda *a: Recorder(real(*a)))
    config = {"shape": (256, 256), "BK": 64, "occupancy": 1, "num_ctas": 2, "persistent": False}
    for m in (1024, 768):
        a = fl.asarray(np.ones((m, 64), np.float16))
        b = fl.asarray(np.ones((64, 256), np.float16))
        c = fl.asarray(np.zeros((m, 256), np.float16))
        launch, part = kernels_gemm.prepare_matmul(a, b, c, **config)
        with part:
            launch()
        np.testing.assert_array_equal(c.numpy(), np.full((m, 256), 64, np.float16))
    assert asked == [2, None]


def test_a_call_that_does_not_match_the_function_is_an_error_at_the_callers_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")

    @fl.autotune(configs=[{"tile": 8}, {"tile": 16}], key=["x"])
    def scale(x: Any, out: Any, *, tile: int) -> None:
        if x is None:
            len(3)  # type: ignore[arg-type]  # a TypeError of the body's own

    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(fl.KernelTypeError, match="missing a required argument: 'out'") as info:
        scale(x)
    assert info.value.code == "E0061" and "test_autotune.py" in str(info.value)
    with pytest.raises(fl.KernelTypeError, match="multiple values for argument 'tile'") as info:
        scale(x, out, tile=8)
    assert "leave `tile` out of the call: the autotuner passes it" in str(info.value)
    with pytest.raises(TypeError, match="has no len"):  # the body's own error, as it is
        scale(None, out)
