"""Kernels that print on the device and the runners that launch them: run in-process by
tests/test_print.py and in a fresh interpreter by tests/gpu/test_print_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import simt, tile


@simt.kernel
def simt_print(x: simt.Slice[fl.f32], n: simt.Slice[fl.i32], u: simt.Slice[fl.u8]):
    i = simt.thread.index_1d()
    if i < len(x):
        print("i =", i, x[i], n[i], u[i], x[i] > 1.0, 3, sep=", ")
        print(f"x[{i}] = {x[i]:.3f} n={n[i]:>4d} hex={n[i]:x} {fl.f64(x[i]):e} 100%", end="|\n")
    if i == 0:
        print("done")


@tile.kernel
def tile_print(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], n: fl.i32):
    t = tile.load_like(x, out)
    print("block", tile.block_id(0), "sum", tile.sum(t), n, 2.5, sep=" | ")
    for j in range(2):
        if j < n:
            print(f"{j}: max={tile.max(t):8.2f} n={n:x} 50%")
    out.store(t)


@tile.kernel
def tile_print_whole(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    t = tile.load_like(x, out)
    print("ints:", tile.arange(4, fl.i32))
    print(f"floats: {t:.2f}")
    print("pair:", tile.arange(4, fl.i32), "and", tile.arange(4, fl.i32).astype(fl.f32) * 0.5)
    out.store(t)


def run_simt() -> None:
    x = np.array([0.0, 1.5, 3.0], np.float32)
    n = np.array([-2, -1, 0], np.int32)
    u = np.array([254, 255, 0], np.uint8)
    simt_print[1, 32](x, n, u)
    fl.synchronize()


def run_tile() -> None:
    x = fl.asarray(np.arange(8, dtype=np.float32))
    y = fl.empty((8,), dtype=fl.f32)
    yp = y.partition((4,))
    tile_print(yp, x, 1)
    fl.synchronize()


def run_tile_one_block() -> None:
    """One block: on the GPU its lines come out whole and in order (tests/gpu)."""
    x = fl.asarray(np.arange(4, dtype=np.float32))
    yp = fl.empty((4,), dtype=fl.f32).partition((4,))
    tile_print(yp, x, 2)
    fl.synchronize()


def run_tile_whole() -> None:
    """One block printing whole tiles: a 1-D i32 tile, the (2, 4) f32 tile it loaded."""
    x = fl.asarray(np.arange(8, dtype=np.float32).reshape(2, 4))
    yp = fl.empty((2, 4), dtype=fl.f32).partition((2, 4))
    tile_print_whole(yp, x)
    fl.synchronize()
