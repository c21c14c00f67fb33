"""`if` on run-time scalars in Tile kernels: simulator against NumPy, tileiras cubins, errors."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.runtime.target import Target
from support.tile_if_kernels import even_odd
from support.tile_signatures import P, T

rng = np.random.default_rng(3)


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _cubin(kernel, signature) -> None:
    ct = kernel.compile(signature, "sm_90")
    assert ct.cubin[:4] == b"\x7fELF"


def _has_if(text: str) -> bool:
    return re.search(r"\bif %", text) is not None


@pytest.fixture(autouse=True)
def _gpu_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """FEARLESS_GPU_CACHE=DIR keeps the cubins in DIR, for tests/gpu on a machine without tileiras."""
    import os

    folder = os.environ.get("FEARLESS_GPU_CACHE")
    if folder:
        monkeypatch.setenv("FEARLESS_CACHE_DIR", str(Path(folder).resolve()))


# ------------------------------------------------------------------------------- kernels


# tests/gpu/test_tile_gpu.py launches even_odd with this specialisation.
EVEN_ODD_SIG = (P("z", fl.f32, (128,), (1000,)), T("x", fl.f32, (1000,)))


@tile.kernel
def row_mean(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], BK: tile.Const[int]):
    """Row sums divided by the number of column tiles that exist (counted by the `if`)."""
    BM, BN = z.shape
    i, _ = z.index
    n = x.shape[1]
    acc = tile.zeros((BM, 1), fl.f32)
    count = 0
    for k in range(8):
        if k * BK < n:
            acc = acc + tile.sum(tile.load(x, (i, k), (BM, BK)), axis=1, keepdims=True)
            count = count + 1
    z.store(tile.broadcast_to(acc / count.astype(fl.f32), (BM, BN)))


@tile.kernel
def chain(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, z)
    b = tile.block_id(0) % 3
    if b == 0:
        y = v
    elif b == 1:
        y = v * 2.0
    else:
        y = tile.zeros(z.shape, fl.f32)
    z.store(y)


@tile.kernel
def weak_branch(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, z)
    scale = 1.0
    if x.shape[0] > 512:
        scale = 2.0  # both branches literals: the if yields an f32 scalar
    s = v * scale
    if tile.block_id(0) == 1:
        s = 0.0  # the literal takes the other branch's type, tile<128xf32>
    z.store(s)


@tile.kernel
def store_in_loop(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """Each block stores once, from the iteration that matches its id; then reads it back."""
    v = tile.load_like(x, z)
    last = tile.block_id(0) == 5
    for k in range(4):
        if k == tile.block_id(0) % 4 and not last:
            z.store(v + k.astype(fl.f32))
    z.store(tile.load_like(z, z) * 2.0)


@tile.kernel
def literal_then_tile(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """`acc` starts as a literal; the `if` in the loop gives it its tile type (the loop retries)."""
    acc = 0
    for k in range(3):
        if k == 1:
            acc = tile.load_like(x, z) * 3.0
    z.store(acc)


def _run(kernel, shape, tile_shape, x, *extra):
    zp = fl.zeros(shape, dtype=fl.f32).partition(tile_shape)
    xa = fl.asarray(x)
    kernel(zp, xa, *extra)
    sig, _ = kernel.signature_of((zp, xa, *extra), Target.SIM)
    return zp.unpartition().numpy(), sig


# ----------------------------------------------------------------------------- simulator


def test_even_odd_blocks() -> None:
    x = rng.standard_normal(1000).astype(np.float32)
    got, _ = _run(even_odd, 1000, (128,), x)
    sign = np.where((np.arange(1000) // 128) % 2 == 0, 1.0, -1.0).astype(np.float32)
    np.testing.assert_array_equal(got, x * sign)


@pytest.mark.parametrize("n", [96, 100, 250])
def test_loop_accumulates_only_tiles_in_range(n: int) -> None:
    x = rng.standard_normal((37, n)).astype(np.float32)
    got, _ = _run(row_mean, (37, 4), (8, 4), x, 32)
    tiles = -(-n // 32)
    ref = x.sum(1) / tiles
    np.testing.assert_allclose(got, np.repeat(ref[:, None], 4, 1), rtol=1e-5, atol=1e-6)


def test_if_elif_else_chain() -> None:
    x = rng.standard_normal(1000).astype(np.float32)
    got, _ = _run(chain, 1000, (128,), x)
    b = (np.arange(1000) // 128) % 3
    ref = np.where(b == 0, x, np.where(b == 1, x * 2, 0)).astype(np.float32)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("n", [1000, 300])
def test_weak_literal_in_one_branch(n: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    got, _ = _run(weak_branch, n, (128,), x)
    ref = x * (2.0 if n > 512 else 1.0)
    ref[128:256] = 0.0
    np.testing.assert_array_equal(got, ref)


def test_store_in_an_if_in_a_loop_then_read_back() -> None:
    x = rng.standard_normal(1000).astype(np.float32)
    got, _ = _run(store_in_loop, 1000, (128,), x)
    b = np.arange(1000) // 128
    ref = np.where(b == 5, 0.0, (x + b % 4) * 2).astype(np.float32)
    np.testing.assert_array_equal(got, ref)


def test_loop_variable_typed_by_an_if() -> None:
    x = rng.standard_normal(300).astype(np.float32)
    got, _ = _run(literal_then_tile, 300, (128,), x)
    np.testing.assert_array_equal(got, x * np.float32(3.0))
    zp = fl.zeros(300, dtype=fl.f32).partition((128,))
    text = literal_then_tile.inspect(zp, fl.asarray(x))
    assert "tile.constant {value=0.0} : tile<128xf32>" in text  # the loop's initial value


@tile.kernel
def nested(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], MODE: tile.Const[int]):
    v = tile.load_like(x, z)
    b = tile.block_id(0)
    out = v
    if b == 0 or b == 3:
        if MODE == 1:  # compile time, inside a run-time if
            out = v * 2.0
        elif b == 0:
            acc = v
            for _ in range(3):
                acc = acc + 1.0
            out = acc
    z.store(out)


@pytest.mark.parametrize("mode", [0, 1])
def test_nested_ifs_with_a_loop_in_a_branch(mode: int) -> None:
    x = rng.standard_normal(512).astype(np.float32)
    got, sig = _run(nested, 512, (128,), x, mode)
    ref = x.copy()
    if mode == 1:
        ref[:128] *= 2
        ref[384:] *= 2
    else:
        for _ in range(3):
            ref[:128] += np.float32(1.0)
    np.testing.assert_array_equal(got, ref)
    _cubin(nested, sig)


def test_loop_variable_that_starts_as_a_literal_is_lowered_again() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        acc = 0
        for _ in range(2):
            acc = tile.load_like(x, z) * 2.0
        z.store(acc)

    x = rng.standard_normal(256).astype(np.float32)
    got, _ = _run(k, 256, (128,), x)
    np.testing.assert_array_equal(got, x * 2)


def test_compile_time_if_still_picks_a_branch() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], NEG: tile.Const[bool]):
        v = tile.load_like(x, z)
        if NEG:
            v = -v
        z.store(v)

    x = rng.standard_normal(256).astype(np.float32)
    zp = fl.zeros(256, dtype=fl.f32).partition((128,))
    text = k.inspect(zp, fl.asarray(x), True)
    assert "tile.if" not in text and "kind='neg'" in text
    k(zp, fl.asarray(x), True)
    np.testing.assert_array_equal(zp.unpartition().numpy(), -x)


def test_printed_ir_shows_both_branches() -> None:
    zp = fl.zeros(1000, dtype=fl.f32).partition((128,))
    text = chain.inspect(zp, fl.zeros(1000, dtype=fl.f32))
    assert text.count("tile.if") == 2  # the elif is an if in the else-block
    assert "} else {" in text and "tile.yield" in text


# ------------------------------------------------------------------------ bytecode, cubin

CASES = {
    "even_odd": (even_odd, 1000, (128,), (1000,), ()),
    "row_mean": (row_mean, (37, 4), (8, 4), (37, 100), (32,)),
    "chain": (chain, 1000, (128,), (1000,), ()),
    "weak_branch": (weak_branch, 1000, (128,), (1000,), ()),
    "store_in_loop": (store_in_loop, 1000, (128,), (1000,), ()),
    "literal_then_tile": (literal_then_tile, 300, (128,), (300,), ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bytecode_has_an_if_and_compiles(name: str) -> None:
    kernel, shape, tile_shape, xshape, extra = CASES[name]
    zp = fl.zeros(shape, dtype=fl.f32).partition(tile_shape)
    x = fl.zeros(xshape, dtype=fl.f32)
    text = kernel.inspect(zp, x, *extra, stage="tileir")
    assert _has_if(text)
    sig, _ = kernel.signature_of((zp, x, *extra), Target.SIM)
    _cubin(kernel, sig)


def test_even_odd_gpu_specialisation_compiles() -> None:
    _cubin(even_odd, EVEN_ODD_SIG)


def test_stores_in_branches_thread_the_token() -> None:
    zp = fl.zeros(1000, dtype=fl.f32).partition((128,))
    x = fl.zeros(1000, dtype=fl.f32)
    text = even_odd.inspect(zp, x, stage="tileir")
    assert re.search(r"%\w+ = if %\w+ -> \(token\)", text)
    assert text.count("yield %") >= 2
    # In a loop the token is carried, so the read after the loop orders after its stores.
    text = store_in_loop.inspect(zp, x, stage="tileir")
    assert re.search(r"iter_values\(%\w+ = %\w+\) -> \(token\)", text)
    assert re.search(r"load_view_tko weak %\w+\[%\w+\] token = %for\b", text)


def test_if_without_stores_carries_no_token() -> None:
    zp = fl.zeros(1000, dtype=fl.f32).partition((128,))
    text = chain.inspect(zp, fl.zeros(1000, dtype=fl.f32), stage="tileir")
    assert "-> (token" not in text and "-> (tile<128xf32>)" in text


# ---------------------------------------------------------------------------- diagnostics


def _zx(n: int = 256):
    return fl.zeros(n, dtype=fl.f32).partition((128,)), fl.zeros(n, dtype=fl.f32)


def test_non_bool_condition() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        if tile.block_id(0):  # error: i32
            z.store(1.0)

    with pytest.raises(fl.KernelTypeError, match="a condition must be bool, found i32") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: i32")
    assert "`if tile.block_id(0) != 0:`" in str(info.value)


def test_tile_condition_suggests_where() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, z)
        if v > 0.0:  # error: a tile
            z.store(v)

    with pytest.raises(fl.KernelTypeError, match="must be a scalar") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: a tile")
    assert "tile.where" in str(info.value)


def test_branches_disagree_on_a_type() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, z)
        if tile.block_id(0) == 0:  # noqa: SIM108 (a conditional expression is another test)
            y = v
        else:
            y = v.astype(fl.f16)  # error: f16
        z.store(y.astype(fl.f32))

    with pytest.raises(fl.KernelTypeError, match="different type in each branch") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: f16")
    text = str(info.value)
    assert "tile<128xf32> and tile<128xf16>" in text and "astype" in text


def test_branch_changes_the_type_of_an_outer_variable() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, z)
        if tile.block_id(0) == 0:
            v = tile.sum(v)  # error: scalar
        z.store(v)

    with pytest.raises(fl.KernelTypeError, match="different type in each branch") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: scalar")
    assert "before the `if`" in str(info.value)


def test_name_assigned_in_one_branch_only() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        if tile.block_id(0) == 0:
            t = tile.load_like(x, z)
        z.store(t)  # error: use

    with pytest.raises(fl.CompileError, match="`t` may be used before it is assigned") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: use")
    assert info.value.diagnostic.code == "E0381"
    assert "only one branch" in str(info.value)


def test_name_local_to_one_branch_is_fine_when_unused_after() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        if tile.block_id(0) == 0:
            t = tile.load_like(x, z)
            z.store(t + 1.0)

    zp, x = _zx()
    k(zp, x)
    np.testing.assert_array_equal(zp.unpartition().numpy(), np.r_[np.ones(128), np.zeros(128)])


def test_return_in_a_runtime_if() -> None:
    @tile.kernel
    def k(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        if tile.block_id(0) == 0:
            return  # error: return
        z.store(1.0)

    with pytest.raises(fl.CompileError, match="`return` inside an `if`") as info:
        k(*_zx())
    assert info.value.loc is not None and info.value.loc.line == _line(k.func, "error: return")
    assert "else:" in str(info.value)
