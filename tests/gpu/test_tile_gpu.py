"""Tile examples on the GPU against the simulator, the cubins loaded through the runtime.

Without tileiras on the GPU machine, precompile here and carry the cache:
    FEARLESS_GPU_CACHE=.tilecache pytest tests/test_tile_compile.py     # fills .tilecache
    FEARLESS_GPU_CACHE=.tilecache pytest -m gpu tests/gpu/test_tile_gpu.py
The shapes below give the specialisations test_tile_compile.SIGNATURES compiles (sm_90).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tile_kernels

import fearless as fl
from fearless.sim.numerics import bf16_load

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = os.environ.get("FEARLESS_GPU_CACHE")
    if folder:
        monkeypatch.setenv("FEARLESS_CACHE_DIR", str(Path(folder).resolve()))


def _ex():
    return tile_kernels


def _run(target: str, kernel, out_shape, out_dt, tile, inputs, extra=()):
    fl.set_target(target)
    try:
        args = [fl.asarray(a, dtype=dt) for a, dt in inputs]
        op = fl.zeros(out_shape, dtype=out_dt).partition(tile)
        kernel(op, *args, *extra)
        fl.synchronize()
        out = op.unpartition().numpy()
        return bf16_load(out) if out_dt is fl.bf16 else out
    finally:
        fl.set_target(None)


def _both(*args, **kw):
    return _run("cuda", *args, **kw), _run("sim", *args, **kw)


rng = np.random.default_rng(7)


def test_vecadd_gpu_matches_sim() -> None:
    x, y = (
        rng.standard_normal(1000).astype(np.float32),
        rng.standard_normal(1000).astype(np.float32),
    )
    gpu, sim = _both(_ex().vecadd, 1000, fl.f32, (128,), [(x, fl.f32), (y, fl.f32)])
    np.testing.assert_array_equal(gpu, sim)


@pytest.mark.parametrize("dt", [fl.f32, fl.bf16])
def test_softmax_gpu_matches_sim(dt) -> None:
    a = rng.standard_normal((37, 100)).astype(np.float32)
    k = _ex().softmax_f32 if dt is fl.f32 else _ex().softmax_bf16
    gpu, sim = _both(k, (37, 100), dt, (4, 128), [(a, dt)])
    np.testing.assert_allclose(gpu, sim, rtol=1e-2 if dt is fl.bf16 else 1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["matmul_f16", "matmul_bf16"])
def test_matmul_gpu_matches_sim(name: str) -> None:
    dt = fl.f16 if name == "matmul_f16" else fl.bf16
    a = rng.standard_normal((200, 96)).astype(np.float32)
    b = rng.standard_normal((96, 130)).astype(np.float32)
    gpu, sim = _both(
        getattr(_ex(), name), (200, 130), dt, (64, 64), [(a, dt), (b, dt)], extra=(32,)
    )
    # Both round the same f32 sums, added in different orders, to f16 or bf16.
    tol = 2.0**-9 if dt is fl.f16 else 2.0**-6
    np.testing.assert_allclose(gpu.astype(np.float32), sim.astype(np.float32), rtol=tol, atol=tol)


def test_norms_gpu_match_sim() -> None:
    x = rng.standard_normal((21, 100)).astype(np.float32)
    w, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    ex = _ex()
    gpu, sim = _both(
        ex.rms_norm, (21, 100), fl.f32, (4, 128), [(x, fl.f32), (w, fl.f32)], extra=(1e-5,)
    )
    np.testing.assert_allclose(gpu, sim, rtol=1e-4, atol=1e-5)
    gpu, sim = _both(
        ex.layer_norm,
        (21, 100),
        fl.f32,
        (4, 128),
        [(x, fl.f32), (w, fl.f32), (b, fl.f32)],
        extra=(1e-5,),
    )
    np.testing.assert_allclose(gpu, sim, rtol=1e-4, atol=1e-5)


def test_cluster_hint_runs_and_a_grid_it_does_not_divide_is_refused() -> None:
    """num_ctas=2: an even grid runs and matches the simulator; an odd one is refused before
    the launch when tileiras compiled the cluster shape into the cubin."""
    from fearless.runtime.tile_gpu import _cluster_dims

    k = _ex().vecadd.options(num_ctas=2)
    x, y = (
        rng.standard_normal(1024).astype(np.float32),
        rng.standard_normal(1024).astype(np.float32),
    )
    gpu, sim = _both(k, 1024, fl.f32, (128,), [(x, fl.f32), (y, fl.f32)])
    np.testing.assert_array_equal(gpu, sim)
    ((loaded, cluster),) = k.compiles.gpu.values()
    assert cluster == _cluster_dims(loaded.function)
    if cluster[0] > 1:
        with pytest.raises(fl.LaunchContractError, match="do not divide its grid"):
            _run("cuda", k, 600, fl.f32, (256,), [(x[:600], fl.f32), (y[:600], fl.f32)])
    else:  # no cluster in the cubin: an odd grid is an ordinary launch
        gpu = _run("cuda", k, 600, fl.f32, (256,), [(x[:600], fl.f32), (y[:600], fl.f32)])
        np.testing.assert_array_equal(gpu, x[:600] + y[:600])


def test_runtime_if_gpu_matches_sim() -> None:
    """`if` on the block id: even blocks store x, odd ones -x (tests/test_tile_if.py)."""
    from support.tile_if_kernels import even_odd

    x = rng.standard_normal(1000).astype(np.float32)
    gpu, sim = _both(even_odd, 1000, fl.f32, (128,), [(x, fl.f32)])
    np.testing.assert_array_equal(gpu, sim)
    sign = np.where((np.arange(1000) // 128) % 2 == 0, 1.0, -1.0).astype(np.float32)
    np.testing.assert_array_equal(sim, x * sign)


def _on(target: str, body):
    fl.set_target(target)
    try:
        out = body()
        fl.synchronize()
        return out
    finally:
        fl.set_target(None)


def test_saxpy_gpu_matches_sim() -> None:
    x, y = (
        rng.standard_normal(1000).astype(np.float32),
        rng.standard_normal(1000).astype(np.float32),
    )

    def body():
        op = fl.zeros(1000, dtype=fl.f32).partition((128,))
        _ex().saxpy(op, 2.5, fl.asarray(x), fl.asarray(y))
        return op.unpartition().numpy()

    # tileiras may fuse the multiply and the add (one rounding instead of two).
    np.testing.assert_allclose(_on("cuda", body), _on("sim", body), rtol=1e-6, atol=1e-6)


def test_transpose_gpu_matches_sim() -> None:
    x = rng.standard_normal((100, 68)).astype(np.float32)
    gpu, sim = _both(_ex().transpose, (68, 100), fl.f32, (32, 16), [(x, fl.f32)])
    np.testing.assert_array_equal(gpu, sim)
    np.testing.assert_array_equal(sim, x.T)


def test_sum_tiles_gpu_matches_sim() -> None:
    """The two launches of the bench's sum: 70000 into 8 partials, then those into one."""
    x = rng.random(70000, dtype=np.float32)

    def body():
        k = _ex().sum_tiles
        pp = fl.zeros(8, dtype=fl.f32).partition((1,))
        k(pp, fl.asarray(x), 1024)
        partials = pp.unpartition()
        total = fl.zeros(1, dtype=fl.f32).partition((1,))
        k(total, partials, 16)
        return partials.numpy(), total.unpartition().numpy()

    (gp, gt), (sp, st) = _on("cuda", body), _on("sim", body)
    # Both sum in f32, in different orders.
    np.testing.assert_allclose(gp, sp, rtol=1e-5)
    np.testing.assert_allclose(gt, st, rtol=1e-5)
    np.testing.assert_allclose(gt, [x.astype(np.float64).sum()], rtol=1e-5)


def test_launch_kernels_gpu_match_sim() -> None:
    gpu, sim = _both(_ex().fill_ones, 1000, fl.f32, (128,), [])
    np.testing.assert_array_equal(gpu, np.ones(1000, np.float32))
    np.testing.assert_array_equal(sim, gpu)
    xs = [(rng.standard_normal(1000).astype(np.float32), fl.f32) for _ in range(7)]
    gpu, sim = _both(_ex().add7, 1000, fl.f32, (128,), xs)
    np.testing.assert_allclose(gpu, sim, rtol=1e-6, atol=1e-6)
