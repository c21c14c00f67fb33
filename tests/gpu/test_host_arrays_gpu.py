"""NumPy arrays on the cuda target (runtime/host_arrays.py), `Tensor.astype` and the `*_like`
constructors on the GPU, against the simulator and NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
from fearless import tile

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]
RNG = np.random.default_rng(11)


def test_one_script_runs_on_both_targets_with_numpy_arrays() -> None:
    n = 5000
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    on_gpu, on_sim = np.zeros(n, np.float32), np.zeros(n, np.float32)
    with pytest.warns(fl.HostCopyWarning, match="60,000 bytes"):
        K.vecadd[(n + 255) // 256, 256](a, b, on_gpu)
    fl.set_target("sim")
    K.vecadd[(n + 255) // 256, 256](a, b, on_sim)
    np.testing.assert_array_equal(on_gpu, on_sim)
    np.testing.assert_array_equal(on_gpu, a + b)


def test_numpy_2d_outputs_and_later_launches_warn_no_more() -> None:
    rows, cols = 70, 130
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    y = np.ones((rows, cols), np.float32)
    z = np.zeros((rows, cols), np.float32)
    grid = ((cols + 15) // 16, (rows + 15) // 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        K.matadd[grid, (16, 16)](x, y, z)
        K.matadd[grid, (16, 16)](x, y, z)
    assert sum(issubclass(w.category, fl.HostCopyWarning) for w in caught) == 1
    np.testing.assert_array_equal(z, x + 1.0)


def test_numpy_device_errors_raise_before_the_copy_back() -> None:
    src = np.arange(10, dtype=np.float32)
    idx = np.array([0, 1, 99], np.int32)  # 99 is out of bounds for `src`
    out = np.full(3, -1.0, np.float32)
    with pytest.raises(fl.KernelIndexError):
        K.gather[1, 32](src, idx, out)
    assert (out == -1.0).all()  # a failed kernel's output is not copied back


@tile.kernel
def _add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


def test_numpy_inputs_of_a_tile_kernel() -> None:
    n = 3000
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    z = fl.zeros(n)
    zp = z.partition((1024,))
    with pytest.warns(fl.HostCopyWarning):
        _add(zp, x, y)
    np.testing.assert_array_equal(zp.unpartition().numpy(), x + y)


def test_astype_and_like_constructors_on_the_gpu() -> None:
    h = RNG.standard_normal(1000).astype(np.float32) * 100
    t = fl.asarray(h)
    np.testing.assert_array_equal(t.astype(fl.i32).numpy(), h.astype(np.int32))
    np.testing.assert_array_equal(t.astype(fl.f64).numpy(), h.astype(np.float64))
    back = t.astype(fl.bf16).astype(fl.f32).numpy()
    np.testing.assert_allclose(back, h, rtol=2**-8)
    assert t.astype(fl.f16).target == "cuda"
    np.testing.assert_array_equal(fl.ones_like(t).numpy(), np.ones(1000, np.float32))
    np.testing.assert_array_equal(fl.zeros_like(t, fl.i64).numpy(), np.zeros(1000, np.int64))
    np.testing.assert_array_equal(fl.full_like(h, 3.5).numpy(), np.full(1000, 3.5, np.float32))
    assert fl.empty_like(t).shape == (1000,)
