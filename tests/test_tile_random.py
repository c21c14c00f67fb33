"""Counter-based random numbers in tile kernels (tile/random.py): `tile.philox`, `tile.randint`,
`tile.randint4x`, `tile.rand` and `tile.randn`, on the simulator.

Philox4x32 is checked against Random123's known-answer vectors, and each function element for
element against a NumPy reference written here from the algorithm (Salmon et al., SC'11) and
Triton's conversions; then statistics, determinism, the seed's key words, the refusals, and
the bytecode through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import config, tile
from support.tile_random_kernels import (
    KAT,
    draws,
    literal_seed,
    philox_block,
    philox_grid,
    philox_ref,
    rand_ref,
    randint4x_ref,
    uniform_ref,
    words4,
)


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


# ------------------------------------------------------------------------ NumPy reference


def randn_ref(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> np.ndarray:
    w = randint4x_ref(seed, offsets, n_rounds)
    u0 = np.maximum(uniform_ref(w[0]), np.float32(1e-7))
    theta = np.float32(6.283185307179586) * uniform_ref(w[1])
    return np.sqrt(np.float32(-2.0) * np.log(u0)) * np.cos(theta)


# -------------------------------------------------------------------------------- kernels


def _parts(n: int, block: int, *dts: fl.DType) -> list[fl.Partition]:
    return [fl.zeros(n, dtype=dt).partition((block,)) for dt in dts]


def _run_draws(seed: int, base: int = 0, n: int = 4096, block: int = 1024) -> list[np.ndarray]:
    parts = _parts(n, block, fl.u32, fl.f32, fl.f32)
    draws(*parts, seed, base)
    return [p.unpartition().numpy() for p in parts]


def _run_philox(seed: int, counter: tuple[int, ...], rounds: int) -> tuple[int, ...]:
    parts = _parts(1, 1, fl.u32, fl.u32, fl.u32, fl.u32)
    philox_block(*parts, seed, *counter, rounds)
    return tuple(int(p.unpartition().numpy()[0]) for p in parts)


# --------------------------------------------------------------------------- known answers


@pytest.mark.parametrize("rounds, counter, key, want", KAT)
def test_philox_matches_random123_known_answers(
    rounds: int, counter: tuple[int, ...], key: tuple[int, int], want: tuple[int, ...]
) -> None:
    seed = key[0] | key[1] << 32  # the seed's low half is key word 0, its high half word 1
    assert _run_philox(seed, counter, rounds) == want
    got_ref = philox_ref([np.array(w) for w in counter], seed, rounds)
    assert tuple(int(w) for w in got_ref) == want  # the reference itself is Philox


def test_randint4x_is_philox_of_the_offsets() -> None:
    """Counter (offset, 0, 0, 0): offset 0 with seed 0 is the first known answer."""
    parts = _parts(2048, 512, fl.u32, fl.u32, fl.u32, fl.u32)
    words4(*parts, -5, 10)
    got = [p.unpartition().numpy() for p in parts]
    want = randint4x_ref(-5, np.arange(2048, dtype=np.int32))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.uint32 and np.array_equal(g, w)
    parts = _parts(512, 512, fl.u32, fl.u32, fl.u32, fl.u32)
    words4(*parts, 0, 10)
    first = tuple(int(p.unpartition().numpy()[0]) for p in parts)
    assert first == KAT[3][3]
    # 128 bits per offset from a bijection of the counter: no two offsets repeat
    assert len({tuple(int(w[i]) for w in got) for i in range(2048)}) == 2048


# ---------------------------------------------------------------------- against the reference


@pytest.mark.parametrize(
    "seed, base", [(0, 0), (1234567, 3), (-1, -2048), (2**40 + 17, 2**31 - 4096)]
)
def test_randint_rand_randn_match_the_numpy_reference(seed: int, base: int) -> None:
    bits, uni, nrm = _run_draws(seed, base)
    offsets = (np.arange(4096, dtype=np.int64) + base).astype(np.int32)
    assert np.array_equal(bits, randint4x_ref(seed, offsets)[0])
    assert np.array_equal(uni.view(np.uint32), rand_ref(seed, offsets).view(np.uint32))
    assert np.array_equal(nrm.view(np.uint32), randn_ref(seed, offsets).view(np.uint32))


def test_philox_counter_words_broadcast_and_scalar_offsets() -> None:
    out = fl.zeros((8, 16), dtype=fl.u32).partition((8, 16))
    philox_grid(out, 0xDEADBEEF)
    rows, cols = np.arange(8, dtype=np.uint32)[:, None], np.arange(16, dtype=np.uint32)[None, :]
    counter = [rows, np.uint32(0x9E3779B9), cols, np.uint32(2**32 - 7)]
    scalar = randint4x_ref(0xDEADBEEF, np.array(5, np.int32))[0]
    assert np.array_equal(out.unpartition().numpy(), philox_ref(counter, 0xDEADBEEF)[3] ^ scalar)


def test_a_compile_time_seed_and_n_rounds_on_a_2d_tile() -> None:
    out = fl.zeros((16, 32)).partition((16, 32))
    literal_seed(out, 99)
    offsets = np.arange(16 * 32, dtype=np.int32).reshape(16, 32)
    assert np.array_equal(out.unpartition().numpy(), rand_ref(99, offsets, n_rounds=7))


def test_the_seed_is_widened_to_64_bits_with_its_sign() -> None:
    """-1 as i32 (words4), i64 (draws) and u64 2**64 - 1 (philox) key alike: (ffffffff, ffffffff);
    seeds that differ only in their high half give other numbers."""
    parts = _parts(1024, 1024, fl.u32, fl.u32, fl.u32, fl.u32)
    words4(*parts, -1, 10)
    via_i32 = parts[0].unpartition().numpy()
    via_i64 = _run_draws(-1, n=1024)[0]
    assert np.array_equal(via_i32, via_i64)
    assert _run_philox(2**64 - 1, (0, 0, 0, 0), 10)[0] == int(via_i32[0])
    high = _run_draws(2**32, n=1024)[0]
    assert np.mean(high == _run_draws(0, n=1024)[0]) < 0.01


# ------------------------------------------------------------------------------- statistics


def test_statistics_of_64k_draws() -> None:
    bits, uni, nrm = _run_draws(2024, n=65536, block=4096)
    assert uni.dtype == np.float32 and uni.min() >= 0.0 and uni.max() < 1.0
    assert abs(uni.mean() - 0.5) < 0.01 and abs(uni.var() - 1 / 12) < 0.005
    assert abs(nrm.mean()) < 0.02 and abs(nrm.var() - 1.0) < 0.03
    assert np.isfinite(nrm).all() and np.abs(nrm).max() < 6.0
    # each of the 16 bins of the top four bits gets 1/16 of the draws, within 5 sigma
    counts = np.bincount(bits >> 28, minlength=16)
    assert np.abs(counts - 4096).max() < 5 * np.sqrt(4096)
    # word 0 alone is 32 bits: a few birthday repeats among 64k draws, not more
    assert len(np.unique(bits)) >= 65536 - 4
    again = _run_draws(2024, n=65536, block=4096)
    assert all(np.array_equal(a, b) for a, b in zip(again, (bits, uni, nrm), strict=True))
    other = _run_draws(2025, n=65536, block=4096)
    assert np.mean(other[0] == bits) < 0.001 and np.mean(other[1] == uni) < 0.01


def test_the_block_size_does_not_change_the_numbers() -> None:
    small = _run_draws(77, n=4096, block=256)
    large = _run_draws(77, n=4096, block=4096)
    assert all(np.array_equal(a, b) for a, b in zip(small, large, strict=True))


# --------------------------------------------------------------------------------- refusals


def _refused(kernel: tile.Kernel, code: str, match: str) -> fl.FearlessError:
    """The kernel (whose last line is the offending call) is refused there, with a help."""
    with pytest.raises(fl.FearlessError, match=match) as info:
        kernel(fl.zeros(8, dtype=fl.u32).partition((8,)), fl.zeros(8), 1)
    err = info.value
    last = kernel.func.__code__.co_firstlineno + 2
    assert err.code == code and err.loc is not None and err.loc.line == last and err.help
    return err


def test_offsets_of_another_width_are_refused_with_a_cast_in_the_help() -> None:
    @tile.kernel
    def wide(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(1, tile.arange(8, fl.i64)))

    @tile.kernel
    def floats(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(1, 2.5))

    err = _refused(wide, "E0308", r"32-bit integers \(i32 or u32\), found an i64 tile")
    assert "astype(fl.u32)" in str(err.help)
    _refused(floats, "E0308", "the float literal 2.5")


def test_seeds_and_rounds_that_cannot_key_philox_are_refused() -> None:
    @tile.kernel
    def tile_seed(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(tile.arange(8, fl.i32), tile.arange(8, fl.i32)))

    @tile.kernel
    def big_seed(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(2**64, tile.arange(8, fl.i32)))

    @tile.kernel
    def no_rounds(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(s, tile.arange(8, fl.i32), n_rounds=0))

    @tile.kernel
    def run_time_rounds(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(1, tile.arange(8, fl.i32), n_rounds=s))

    @tile.kernel
    def array_seed(out: tile.Part[fl.u32], x: tile.Tensor[fl.f32], s: fl.i32):
        out.store(tile.randint(x, tile.arange(8, fl.i32)))

    _refused(tile_seed, "E0308", r"must be an integer scalar, found an i32 tile of shape \(8,\)")
    _refused(big_seed, "E0308", "does not fit in 64 bits")
    _refused(no_rounds, "E0001", "between 1 and 16, got 0")
    _refused(run_time_rounds, "E0001", "compile-time integer")
    _refused(array_seed, "E0308", "found the array `x`")


# ---------------------------------------------------------------------------- to a cubin


def test_the_random_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    for kernel, args in (
        (draws, (*_parts(4096, 1024, fl.u32, fl.f32, fl.f32), 5, 0)),
        (words4, (*_parts(1024, 256, fl.u32, fl.u32, fl.u32, fl.u32), 5, 10)),
        (philox_block, (*_parts(1, 1, fl.u32, fl.u32, fl.u32, fl.u32), 1, 2, 3, 4, 5, 7)),
    ):
        assert cubin(kernel, *args)
