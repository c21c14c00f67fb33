"""SIMT kernels on the GPU agree with the simulator (bit for bit where the arithmetic is exact)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(99)


def both(
    kernel: object, grid: int, block: int, *host_args: object, outputs: tuple[int, ...]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run on the simulator and on the GPU; return the outputs of each."""
    sim_args = [a.copy() if isinstance(a, np.ndarray) else a for a in host_args]
    fl.set_target("sim")
    kernel[grid, block](*sim_args)  # type: ignore[index]
    fl.set_target("cuda")
    dev_args = [fl.asarray(a) if isinstance(a, np.ndarray) else a for a in host_args]
    kernel[grid, block](*dev_args)  # type: ignore[index]
    fl.synchronize()
    return [sim_args[i] for i in outputs], [dev_args[i].numpy() for i in outputs]  # type: ignore[union-attr]


CASES: dict[
    str, Callable[[int], tuple[object, int, int, tuple[object, ...], tuple[int, ...], bool]]
] = {
    "vecadd": lambda n: (
        K.vecadd,
        (n + 255) // 256,
        256,
        (
            RNG.standard_normal(n).astype(np.float32),
            RNG.standard_normal(n).astype(np.float32),
            np.zeros(n, np.float32),
        ),
        (2,),
        True,
    ),
    "saxpy": lambda n: (
        K.saxpy,
        (n + 127) // 128,
        128,
        (
            np.float32(1.7),
            RNG.standard_normal(n).astype(np.float32),
            RNG.standard_normal(n).astype(np.float32),
            np.zeros(n, np.float32),
        ),
        (3,),
        True,
    ),
    "stencil3": lambda n: (
        K.stencil3,
        (n + 255) // 256,
        256,
        (RNG.uniform(-3, 3, n).astype(np.float32), np.zeros(n, np.float32)),
        (1,),
        True,
    ),
    "int_ops": lambda n: (
        K.int_ops,
        (n + 255) // 256,
        256,
        (
            RNG.integers(-(10**6), 10**6, n).astype(np.int32),
            np.where((b := RNG.integers(-999, 999, n).astype(np.int32)) == 0, 3, b).astype(
                np.int32
            ),
            np.zeros(n, np.int32),
        ),
        (2,),
        True,
    ),
    "collatz": lambda n: (
        K.collatz_steps,
        (n + 63) // 64,
        64,
        (RNG.integers(1, 10**5, n).astype(np.int64), np.zeros(n, np.int64)),
        (1,),
        True,
    ),
    "casts": lambda n: (
        K.casts,
        (n + 255) // 256,
        256,
        (
            RNG.uniform(-1e4, 1e4, n).astype(np.float32),
            np.zeros(n, np.int32),
            np.zeros(n, np.uint32),
        ),
        (1, 2),
        True,
    ),
    "softplus": lambda n: (
        K.softplus,
        (n + 255) // 256,
        256,
        (RNG.uniform(-20, 20, n).astype(np.float32), np.zeros(n, np.float32)),
        (1,),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("n", [1, 1000, 65537])
def test_gpu_matches_simulator(name: str, n: int) -> None:
    kernel, grid, block, args, outs, exact = CASES[name](n)
    sim, dev = both(kernel, grid, block, *args, outputs=outs)
    for s, d in zip(sim, dev, strict=True):
        if exact:
            np.testing.assert_array_equal(d, s)
        else:
            np.testing.assert_allclose(d, s, rtol=2e-6, atol=1e-6)


def test_row_sum_f64_exact() -> None:
    rows, cols = 300, 77
    m = RNG.standard_normal(rows * cols)
    sim, dev = both(K.row_sum, 5, 64, m, cols, np.zeros(rows), outputs=(2,))
    np.testing.assert_array_equal(dev[0], sim[0])


def test_device_bounds_error_keeps_context_usable() -> None:
    src = fl.asarray(np.arange(10, dtype=np.float32))
    idx = fl.asarray(np.array([0, 3, 9, 10, 2], np.int32))
    out = fl.asarray(np.full(5, -1.0, np.float32))
    K.gather[1, 32](src, idx, out)
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    assert "the len is 10 but the index is 10" in info.value.message
    assert "thread (3, 0, 0)" in str(info.value)
    np.testing.assert_array_equal(out.numpy(), [0, 3, 9, -1, 2])
    # The context survives: a good launch afterwards runs and is right.
    idx_ok = fl.asarray(np.array([1, 2, 3, 4, 5], np.int32))
    K.gather[1, 32](src, idx_ok, out)
    fl.synchronize()
    np.testing.assert_array_equal(out.numpy(), [1, 2, 3, 4, 5])


def test_torch_tensors_and_streams() -> None:
    torch = pytest.importorskip("torch")
    n = 10_000
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    s = torch.cuda.Stream()
    K.vecadd[(n + 255) // 256, 256, s](a, b, c)
    s.synchronize()
    assert torch.equal(c, a + b)
    fs = fl.Stream()
    c2 = torch.empty(n, device="cuda")
    K.vecadd(K.vecadd.prepare((n + 255) // 256), a, b, c2, stream=fs)
    fs.synchronize()
    assert torch.equal(c2, a + b)


def test_borrow_error_on_gpu_with_torch_views() -> None:
    torch = pytest.importorskip("torch")
    buf = torch.zeros(2048, device="cuda")
    a, c = buf[:1024], buf[512:1536]
    with pytest.raises(fl.BorrowError):
        K.vecadd[4, 256](a, a, c)
    K.vecadd[4, 256](buf[:1024], buf[:1024], buf[1024:])  # disjoint views are fine
    torch.cuda.synchronize()


@pytest.mark.parametrize("name", ["vecadd", "int_ops", "collatz", "stencil3"])
def test_large_launches_run_coarsened_and_match_the_simulator(name: str) -> None:
    n = (1 << 21) + 3  # 8193 blocks of 256: the launcher picks the 4x coarsened entry
    kernel, grid, block, args, outs, _ = CASES[name](n)
    assert grid >= 4 * 8 * 132
    sim, dev = both(kernel, grid, block, *args, outputs=outs)
    for s, d in zip(sim, dev, strict=True):
        np.testing.assert_array_equal(d, s)


def test_coarsened_bounds_error_names_the_logical_thread() -> None:
    n = 1 << 21
    src = fl.asarray(np.arange(n, dtype=np.float32))
    idx_np = np.arange(n, dtype=np.int32)
    bad = 1_234_567
    idx_np[bad] = n  # one logical thread reads past the end
    out = fl.asarray(np.zeros(n, np.float32))
    K.gather[n // 256, 256](fl.asarray(src.numpy()), fl.asarray(idx_np), out)
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    text = str(info.value)
    assert f"the len is {n} but the index is {n}" in info.value.message
    assert f"block ({bad // 256}, 0, 0), thread ({bad % 256}, 0, 0)" in text
    got = out.numpy()
    assert got[bad] == 0.0 and got[bad + 1] == bad + 1  # only the failing thread stopped


# ------------------------------------------------------------------------------ 2-D kernels


def grid_2d(rows: int, cols: int, block: tuple[int, int]) -> tuple[int, int]:
    return (cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1]


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (37, 53), (1000, 33), (5, 4099)])
def test_matadd_2d_matches_simulator(rows: int, cols: int) -> None:
    a = RNG.standard_normal((rows, cols)).astype(np.float32)
    b = RNG.standard_normal((rows, cols)).astype(np.float32)
    c = np.full((rows, cols), np.nan, np.float32)
    grid = grid_2d(rows, cols, (16, 16))
    sim, dev = both(K.matadd, grid, (16, 16), a, b, c, outputs=(2,))  # type: ignore[arg-type]
    np.testing.assert_array_equal(dev[0], sim[0])
    np.testing.assert_array_equal(dev[0], a + b)


@pytest.mark.parametrize(("rows", "cols"), [(3, 1), (129, 67), (512, 1000)])
def test_transpose_2d_matches_simulator(rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros((cols, rows), np.float32)
    grid = grid_2d(cols, rows, (32, 8))
    sim, dev = both(K.transpose, grid, (32, 8), x, out, outputs=(1,))  # type: ignore[arg-type]
    np.testing.assert_array_equal(dev[0], sim[0])
    np.testing.assert_array_equal(dev[0], x.T)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (33, 17, 45), (128, 64, 200)])
def test_matmul_2d_matches_simulator_bit_for_bit(m: int, k: int, n: int) -> None:
    # No FMA contraction and the same order of additions: the GPU agrees with the simulator.
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    grid = grid_2d(m, n, (16, 16))
    sim, dev = both(K.matmul, grid, (16, 16), a, b, c, outputs=(2,))  # type: ignore[arg-type]
    np.testing.assert_array_equal(dev[0], sim[0])
    np.testing.assert_allclose(dev[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("m", "k", "n"), [(33, 17, 45), (256, 300, 200)])
def test_shared_matmul_matches_the_simulator_bit_for_bit(m: int, k: int, n: int) -> None:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    block = (K.TPB, K.TPB)
    sim, dev = both(K.shared_matmul, grid_2d(m, n, block), block, a, b, c, outputs=(2,))  # type: ignore[arg-type]
    np.testing.assert_array_equal(dev[0], sim[0])
    np.testing.assert_allclose(dev[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_2d_device_bounds_error_names_the_axis_and_keeps_context_usable() -> None:
    @fl.simt.kernel
    def add_cols(
        a: fl.simt.Slice[fl.f32, 2],
        b: fl.simt.Slice[fl.f32, 2],
        c: fl.simt.DisjointSlice[fl.f32, 2],
    ):
        t = fl.simt.thread.index_2d()
        if t.row < c.shape[0] and t.col < c.shape[1]:
            c[t] = a[t] + b[t.row, t.col]

    a = fl.asarray(np.ones((4, 6), np.float32))
    b = fl.asarray(np.ones((4, 5), np.float32))  # one column short: flat offsets stay inside
    c = fl.asarray(np.zeros((4, 6), np.float32))
    add_cols[(1, 1), (8, 8)](a, b, c)
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    assert "the len is 5 but the index is 5" in info.value.message
    assert "on axis 1 of `b`" in str(info.value)
    got = c.numpy()
    np.testing.assert_array_equal(got[:, :5], 2.0)
    np.testing.assert_array_equal(got[:, 5], 0.0)  # the failing threads stopped
    b_ok = fl.asarray(np.ones((4, 6), np.float32))
    add_cols[(1, 1), (8, 8)](a, b_ok, c)
    fl.synchronize()
    np.testing.assert_array_equal(c.numpy(), 2.0)


def test_2d_torch_tensors_views_and_borrows() -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(70, 130, device="cuda")
    b = torch.randn(70, 130, device="cuda")
    c = torch.empty(70, 130, device="cuda")
    K.matadd[grid_2d(70, 130, (16, 16)), (16, 16)](a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    with pytest.raises(fl.KernelTypeError, match="not contiguous"):
        K.matadd[grid_2d(130, 70, (16, 16)), (16, 16)](a.t(), b.t(), c.t())
    buf = torch.zeros(200, 130, device="cuda")
    with pytest.raises(fl.BorrowError):
        K.matadd[grid_2d(70, 130, (16, 16)), (16, 16)](buf[:70], b, buf[50:120])
    K.matadd[grid_2d(70, 130, (16, 16)), (16, 16)](buf[:70], b, buf[70:140])  # disjoint rows
    torch.cuda.synchronize()
    assert torch.equal(buf[70:140], b)
    with pytest.raises(fl.KernelTypeError, match="`b` has 1 dimension, but kernels take 2-D"):
        K.matadd[(1, 1), (16, 16)](a, b.reshape(-1), c)


def test_shorter_input_runs_the_checked_variant_and_reports() -> None:
    n = 1 << 20
    a = fl.asarray(np.ones(n - 5, np.float32))  # shorter than the output: no fast variant
    b = fl.asarray(np.ones(n, np.float32))
    c = fl.asarray(np.zeros(n, np.float32))
    K.vecadd[n // 256, 256](a, b, c)
    with pytest.raises(fl.KernelIndexError) as info:
        fl.synchronize()
    assert f"the len is {n - 5} but the index is" in info.value.message
    got = c.numpy()
    assert (got[: n - 5] == 2.0).all()  # every in-bounds thread ran
