"""Writes each GpuLaunchPlan's warm launch function, unrolled for its kernel's signature.

A loop over the parameters with per-parameter metadata costs about 1.3 us per launch of three
arrays in CPython; the same checks written out straight-line for one signature cost about half
(tuple unpacking, loop and list bookkeeping go away). Triton and numba generate their
launchers for the same reason. The generated function does exactly this, in order:

    1. grid/block: a dict hit once the pair was validated (`plan.check_dims` on a miss);
    2. per array: pointer, length and dtype, dtype compared with the ParamSpec's. Inline for
       an fl.Tensor (its fields) and for a plain torch.Tensor (shape, is_cuda, get_device,
       is_contiguous, dtype against the parameter's torch dtype, data_ptr: 0.35 us, against
       0.55 us through `_extract_torch`); other types (torch subclasses too, whose accessors
       may be overridden) through the per-type extractor cache of arrays.py. A 2-D array
       gives pointer, rows and cols the same way;
       per scalar: bf16/bool conversion where needed;
    3. the borrow check on the (output, other) pairs of borrow.py, or the sorted sweep;
    4. one `struct.pack_into` of all values, then cuLaunchKernel on the stream's handle;
    5. count the launch in the error pool; synchronise and check under FEARLESS_SYNC=1.

Every error goes back to a method of the plan, which explains it. Only indices and
constants appear in the source, never user-chosen names. `plan.launcher_source` keeps the text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import config
from .arrays import (
    DEVICE_ID,
    _extractors,
    _extractors_2d,
    launch_extractor,
    launch_extractor_2d,
    torch_dtype_of,
)
from .streams import Stream, stream_handle
from .tensor import Tensor

if TYPE_CHECKING:
    from .launch import GpuLaunchPlan


def build_launcher(
    plan: GpuLaunchPlan, pack_errors: tuple[type[BaseException], ...]
) -> tuple[Callable[..., None], str]:
    """The plan's launch function and its source text."""
    params = plan.params
    lines = [
        "def launch(grid, block, args, stream=None):",
        "    try:",
        "        g, b, fnc, fast, gx, nthreads = dims[grid, block]",
        "    except (KeyError, TypeError):  # TypeError: a list is not hashable",
        "        g, b, fnc, fast, gx, nthreads = launch_shape(grid, block)",
        f"    if len(args) != {len(params)}:",
        "        raise arity_error(args)",
    ]
    names = [f"x{i}" for i in range(len(params))]
    if names:
        lines.append(f"    {', '.join(names)}, = args")
    env: dict[str, Any] = {}
    packed: list[str] = []
    arrays: list[int] = []  # parameter index of each array, in order
    for i, p in enumerate(params):
        x = names[i]
        if p.is_array and p.ndim == 2:
            # n<i> is `len(x)` for `requires=`: the extent along axis 0, as in the kernel
            arrays.append(i)
            env[f"D{i}"] = p.dtype
            env[f"TD{i}"] = torch_dtype_of(p.dtype)
            lines += [
                f"    tp = type({x})",
                f"    if tp is Tensor and {x}._on_device and {x}._moved is None"
                f" and len({x}._shape) == 2:",
                f"        (n{i}, m{i}), p{i} = {x}._shape, {x}._ptr",
                f"        if {x}._dtype is not D{i}:",
                f"            raise dtype_error({i}, {x}._dtype)",
                "    elif tp is TorchTensor:",
                f"        s{i} = {x}.shape",
                f"        if len(s{i}) != 2 or not {x}.is_cuda or {x}.get_device() != {DEVICE_ID}"
                f" or not {x}.is_contiguous():",
                f"            raise argument_error({i}, {x})",
                f"        if {x}.dtype is not TD{i}:",
                f"            raise torch_dtype_error({i}, {x})",
                f"        (n{i}, m{i}), p{i} = s{i}, {x}.data_ptr()",
                "    else:",
                "        ex = extractors_2d.get(tp) or launch_extractor_2d(tp)",
                f"        got = ex({x}) if ex is not None else None",
                "        if got is None:",
                f"            raise argument_error({i}, {x})",
                f"        p{i}, n{i}, m{i}, t{i} = got",
                f"        if t{i} is not D{i}:",
                f"            raise dtype_error({i}, t{i})",
                f"    e{i} = p{i} + n{i} * m{i} * {p.dtype.itemsize}",
            ]
            packed += [f"p{i}", f"n{i}", f"m{i}"]
        elif p.is_array:
            arrays.append(i)
            env[f"D{i}"] = p.dtype
            env[f"TD{i}"] = torch_dtype_of(p.dtype)
            lines += [
                f"    tp = type({x})",
                f"    if tp is Tensor and {x}._dev1d:",
                f"        p{i}, n{i} = {x}._ptr, {x}._size",
                f"        if {x}._dtype is not D{i}:",
                f"            raise dtype_error({i}, {x}._dtype)",
                "    elif tp is TorchTensor:",
                f"        s{i} = {x}.shape",
                f"        if len(s{i}) != 1 or not {x}.is_cuda or {x}.get_device() != {DEVICE_ID}"
                f" or not {x}.is_contiguous():",
                f"            raise argument_error({i}, {x})",
                f"        if {x}.dtype is not TD{i}:",
                f"            raise torch_dtype_error({i}, {x})",
                f"        n{i}, p{i} = s{i}[0], {x}.data_ptr()",
                "    else:",
                "        ex = extractors.get(tp) or launch_extractor(tp)",
                f"        got = ex({x}) if ex is not None else None",
                "        if got is None:",
                f"            raise argument_error({i}, {x})",
                f"        p{i}, n{i}, t{i} = got",
                f"        if t{i} is not D{i}:",
                f"            raise dtype_error({i}, t{i})",
                f"    e{i} = p{i} + n{i} * {p.dtype.itemsize}",
            ]
            packed += [f"p{i}", f"n{i}"]
        elif plan.converters[i] is not None:
            env[f"C{i}"] = plan.converters[i]
            lines += [
                "    try:",
                f"        v{i} = C{i}({x})",
                "    except PACK_ERRORS:",
                "        raise scalar_error(args) from None",
            ]
            packed.append(f"v{i}")
        else:
            packed.append(x)

    # `requires=` relations, inline, in Python integers: lengths are n<i>, scalars x<i>.
    def placeholder(m: re.Match[str]) -> str:
        i = int(m.group(2))
        if m.group(1) == "len":
            return f"n{i}"
        return f"{'float' if params[i].dtype.is_float else 'int'}(x{i})"

    for k, req in enumerate(plan.ck.contract.requires):
        expr = re.sub(r"__(len|arg)_(\d+)", placeholder, req.template)
        lines += [f"    if not ({expr}):", f"        requires_failed({k}, args)"]
    if plan.ck.fast_entry is not None:
        # The variant compiled assuming these length relations has fewer device checks.
        held = " and ".join(
            re.sub(r"__(len|arg)_(\d+)", placeholder, r.template) for r in plan.ck.fast_assumes
        )
        lines += [f"    if fast is not None and {held}:", "        fnc = fast"]
    starts = "[" + ", ".join(f"p{i}" for i in arrays) + "]"
    ends = "[" + ", ".join(f"e{i}" for i in arrays) + "]"
    if plan.borrow_pairs:
        # zero-sized arrays pass this cheap test by accident; `overlap` looks again and decides
        tests = " or ".join(
            f"(p{arrays[j]} < e{arrays[o]} and p{arrays[o]} < e{arrays[j]})"
            for o, j in plan.borrow_pairs
        )
        lines += [f"    if {tests}:", f"        overlap({starts}, {ends})"]
    elif plan.borrow_pairs is None:  # more than PAIRWISE_MAX arrays: the sorted sweep
        lines.append(f"    overlap({starts}, {ends})")
    lines += [
        "    try:",
        f"        pack_into({', '.join(['buffer', '0', *packed, 'nthreads'])})",
        "    except PACK_ERRORS:",
        "        raise scalar_error(args) from None",
        "    if stream is None:",
        "        cs = legacy_stream",
        "    elif type(stream) is Stream:",
        "        cs = stream._cu if stream._cu is not None else stream.cu_stream()",
        "    else:",
        "        cs = CUstream(stream_handle(stream))",
        "    err, = cu_launch(fnc, gx, g[1], g[2], b[0], b[1], b[2], 0, cs, params_address, 0)",
        "    if err:",
        "        relaunch(err, fnc, (gx, g[1], g[2]), b, cs)",
        "    pool.launches += 1  # ErrorPool.mark_launched, inlined",
        "    if sync_after_launch():",
        "        synchronize()",
    ]
    source = "\n".join(lines) + "\n"
    env.update(
        dims=plan._dims,
        launch_shape=plan._shape,
        arity_error=plan._arity_error,
        argument_error=plan._argument_error,
        dtype_error=plan._dtype_error,
        torch_dtype_error=plan._torch_dtype_error,
        scalar_error=plan._scalar_error,
        overlap=plan._overlap,
        requires_failed=plan._requires_failed,
        relaunch=plan._relaunch,
        Tensor=Tensor,
        TorchTensor=_torch_tensor_type(),
        Stream=Stream,
        extractors=_extractors,
        launch_extractor=launch_extractor,
        extractors_2d=_extractors_2d,
        launch_extractor_2d=launch_extractor_2d,
        stream_handle=stream_handle,
        PACK_ERRORS=pack_errors,
        pack_into=plan.packer.pack_target()[0],
        buffer=plan.packer.pack_target()[1],
        legacy_stream=plan._legacy_stream,
        CUstream=plan._cu.CUstream,
        cu_launch=plan._cu.cuLaunchKernel,
        params_address=plan.packer.address,
        pool=plan.pool,
        sync_after_launch=config.sync_after_launch,
        synchronize=_synchronize,
    )
    code = compile(source, f"<fearless launcher for {plan.ck.name}>", "exec")
    exec(code, env)
    return env["launch"], source


class _NoTorch:
    """Stands for torch.Tensor when torch was not loaded as the launcher was built: no argument
    has this type, so torch tensors (if torch is loaded later) take the extractor branch."""


def _torch_tensor_type() -> type:
    """torch.Tensor itself (not a subclass: their accessors may be overridden), if loaded."""
    torch = sys.modules.get("torch")  # never imported here: it takes seconds
    return torch.Tensor if torch is not None else _NoTorch


def _synchronize() -> None:
    from .device_errors import synchronize

    synchronize()
