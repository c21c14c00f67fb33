"""Tile random-number kernels (Philox) and their NumPy references, for the simulator tests and
tests/gpu/test_tile_random_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import tile

M32 = np.uint64(0xFFFFFFFF)


def philox_ref(counter: list[np.ndarray], key: int, n_rounds: int = 10) -> list[np.ndarray]:
    """Philox4x32-n on u32 arrays: the round of Salmon et al. with 64-bit products in uint64."""
    c = [np.asarray(w, np.uint64) & M32 for w in np.broadcast_arrays(*counter)]
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(n_rounds):
        p0 = c[0] * np.uint64(0xD2511F53)
        p2 = c[2] * np.uint64(0xCD9E8D57)
        c = [
            (p2 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
            p2 & M32,
            (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
            p0 & M32,
        ]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return [w.astype(np.uint32) for w in c]


def uniform_ref(bits: np.ndarray) -> np.ndarray:
    """Triton's uint_to_uniform_float for 32-bit words, in f32."""
    x = bits.view(np.int32)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def randint4x_ref(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> list[np.ndarray]:
    zero = np.zeros_like(offsets, np.uint64)
    return philox_ref([offsets.view(np.uint32), zero, zero, zero], seed % 2**64, n_rounds)


def rand_ref(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> np.ndarray:
    return uniform_ref(randint4x_ref(seed, offsets, n_rounds)[0])


@tile.kernel
def philox_block(
    w0: tile.Part[fl.u32],
    w1: tile.Part[fl.u32],
    w2: tile.Part[fl.u32],
    w3: tile.Part[fl.u32],
    seed: fl.u64,
    c0: fl.u32,
    c1: fl.u32,
    c2: fl.u32,
    c3: fl.u32,
    rounds: tile.Const[int],
):
    r0, r1, r2, r3 = tile.philox(seed, c0, c1, c2, c3, n_rounds=rounds)
    w0.store(r0)
    w1.store(r1)
    w2.store(r2)
    w3.store(r3)


@tile.kernel
def draws(
    bits: tile.Part[fl.u32],
    uni: tile.Part[fl.f32],
    nrm: tile.Part[fl.f32],
    seed: fl.i64,
    base: fl.i32,
):
    """One element per offset base + i, as a Triton kernel numbers them."""
    N = bits.shape[0]
    offs = tile.arange(N, fl.i32) + tile.block_id(0) * N + base
    bits.store(tile.randint(seed, offs))
    uni.store(tile.rand(seed, offs))
    nrm.store(tile.randn(seed, offs))


@tile.kernel
def words4(
    w0: tile.Part[fl.u32],
    w1: tile.Part[fl.u32],
    w2: tile.Part[fl.u32],
    w3: tile.Part[fl.u32],
    seed: fl.i32,
    rounds: tile.Const[int],
):
    N = w0.shape[0]
    offs = (tile.arange(N, fl.i32) + tile.block_id(0) * N).astype(fl.u32)
    r0, r1, r2, r3 = tile.randint4x(seed, offs, rounds)
    w0.store(r0)
    w1.store(r1)
    w2.store(r2)
    w3.store(r3)


@tile.kernel
def literal_seed(out: tile.Part[fl.f32], seed: tile.Const[int]):
    """A compile-time seed (the key words fold) on a 2-D tile of offsets."""
    BM, BN = out.shape
    rows = tile.arange(BM, fl.i32)[:, None] * BN
    out.store(tile.rand(seed, rows + tile.arange(BN, fl.i32)[None, :], n_rounds=7))


@tile.kernel
def philox_grid(out: tile.Part[fl.u32], seed: fl.u32):
    """Counter words that broadcast: (row, 0x9E3779B9, column, literal) over an (8, 16) tile."""
    BM, BN = out.shape
    rows = tile.arange(BM, fl.u32)[:, None]
    words = tile.philox(seed, rows, 0x9E3779B9, tile.arange(BN, fl.i32)[None, :], -7)
    out.store(words[3] ^ tile.randint(seed, 5))


# Random123's kat_vectors: rounds, counter (4 words), key (2 words), result (4 words).
KAT = [
    (7, (0, 0, 0, 0), (0, 0), (0x5F6FB709, 0x0D893F64, 0x4F121F81, 0x4F730A48)),
    (7, (0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x5207DDC2, 0x45165E59, 0x4D8EE751, 0x8C52F662)),
    (
        7,
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0x4DFCCABA, 0x190A87F0, 0xC47362BA, 0xB6B5242A),
    ),
    (10, (0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (10, (0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        10,
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]
