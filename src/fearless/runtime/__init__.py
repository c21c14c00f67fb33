"""The runtime: targets, the CUDA driver, arrays and `fl.Tensor`, streams, launches, device errors.

    target.py         which target runs kernels ("cuda" or "sim"); the GPU probe
    driver.py         device/context (cuda.core), kernel loading, cubin linking, memory, copies
    arrays.py         what an array argument is (`describe`), per-type warm-launch extractors
    tensor.py         `fl.Tensor` and `fl.empty/zeros/full/arange/asarray/from_numpy`
    streams.py        `fl.Stream` and stream handles of torch/CuPy/cuda.core streams
    params.py         kernel parameter buffers for cuLaunchKernel, laid out once per signature
    borrow.py         the launch-time borrow check (outputs overlap nothing), shared with sim
    device_errors.py  device error records -> KernelIndexError; `fl.synchronize`
    launch.py         `GpuLaunchPlan`: one per compiled kernel, and its warm launch path
    location.py       the user's line for launch-time errors

Importing this package imports nothing (its modules import each other by name, and the public
names are re-exported by `fearless/__init__.py`); the GPU is touched on first use.
"""
