"""The GPU launcher: one `GpuLaunchPlan` per compiled specialisation, and its warm path.

Everything that does not depend on the arguments is done once, when the plan is built: the
module is loaded, the error record allocated, the parameter buffer laid out, the borrow-check
pairs listed, and grid/block pairs are validated once each and remembered. A warm `launch`
then reads each array's pointer, length and dtype through a per-type extractor, compares the
output ranges with the others, packs the values with one `struct.pack_into`, and calls
cuLaunchKernel. No dicts are built and no frames inspected unless an error is being raised.

The warm launch function is written for each plan, unrolled for its kernel's signature.

A loop over the parameters with per-parameter metadata costs about 1.3 us per launch of three
arrays in CPython; the same checks written out straight-line for one signature cost about half
(tuple unpacking, loop and list bookkeeping go away). Triton and numba generate their
launchers for the same reason. The generated function does exactly this, in order:

    1. grid/block: a dict hit once the pair was validated (`plan.check_dims` on a miss);
    2. per array: pointer, length and dtype, dtype compared with the ParamSpec's (an array
       that is no device memory goes to `_host_arrays`: NumPy arrays are copied). Inline for
       an fl.Tensor (its fields) and for a plain torch.Tensor (shape, is_cuda, get_device,
       is_contiguous, dtype against the parameter's torch dtype, data_ptr: 0.35 us, against
       0.55 us through `_extract_torch`); other types (torch subclasses too, whose accessors
       may be overridden) through the per-type extractor cache of arrays.py. A 2-D array
       gives pointer, rows and cols the same way;
       per scalar: bf16/bool conversion where needed;
    3. the borrow check on the (output, other) pairs of borrow.py, or the sorted sweep;
    4. one `struct.pack_into` of all values, then cuLaunchKernel on the stream's handle
       (a cooperative kernel: `cooperative.GridBarriers.launch`, cuLaunchCooperativeKernel);
    5. count the launch in the error pool; synchronise and check under FEARLESS_SYNC=1.

Every error goes back to a method of the plan, which explains it. Only indices and
constants appear in the source, never user-chosen names. `plan.launcher_source` keeps the text.
"""

from __future__ import annotations

import contextlib
import functools
import re
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import config, dtypes
from ..abi import CompiledKernel, ParamSpec
from ..errors import KernelTypeError
from . import claunch, driver, process_gpu, streams
from .arrays import (
    _extractors,
    _extractors_2d,
    bump_versions,
    describe,
    launch_extractor,
    launch_extractor_2d,
    torch_dtype,
    torch_dtype_of,
    torch_write,
)
from .binder import arity_error, dtype_error, scalar_error, scalar_fits
from .borrow import PAIRWISE_MAX, Pairs, borrow_error, find_overlap, output_pairs
from .contract import (
    Dim3,
    Limits,
    check_launch,
    normalize_dims,
    requires_error,
    requires_values,
)
from .cooperative import GridBarriers, blocks_per_sm, check_co_resident
from .device_errors import ErrorPool, default_pool
from .host_arrays import finish, stage
from .location import argument_error, user_location
from .params import ParamPacker, bf16_bits
from .streams import Stream, captured, default_cu_stream, keep_if_captured, stream_handle
from .target import Target
from .tensor import Tensor

_PACK_ERRORS = (struct.error, OverflowError, TypeError, ValueError)
_DIM_CACHE_MAX = 256


class GpuLaunchPlan:
    """Launches one compiled kernel on the GPU; build once per CompiledKernel, launch many times.

    `plan.launch(grid, block, args, stream=None)` checks and launches `ck` with `args` (one per
    parameter, in order) on `stream`: None (the legacy default stream), an fl.Stream, a
    torch/CuPy stream, an object with `__cuda_stream__`, or a handle. It is generated for the
    kernel's signature (below); `plan.launcher_source` shows it.
    """

    launch: Callable[..., None]

    def __init__(self, ck: CompiledKernel, pool: ErrorPool | None = None) -> None:
        self.ck = ck
        self.device = driver.ensure_initialized()
        self.kernel = driver.load_kernel(ck)
        self.pool = pool or default_pool()
        self.slot, record = self.pool.alloc(ck)
        self.packer = ParamPacker(ck.params, ck.cooperative)
        self.packer.set_error_record(record)
        # A cooperative kernel (cooperative.py): its grid barriers, and per block shape the
        # most blocks the GPU holds at once.
        self.barriers = GridBarriers(self.packer) if ck.cooperative else None
        self._co_resident: dict[Dim3, int] = {}
        self.params: tuple[ParamSpec, ...] = ck.params
        arrays = [p for p in ck.params if p.is_array]
        self._array_names = [p.name for p in arrays]
        self._outputs = [p.is_output for p in arrays]
        # (output, other) array pairs to compare; () when nothing is written, None: sweep
        self.borrow_pairs: Pairs | None = (
            output_pairs(self._outputs)
            if len(arrays) <= PAIRWISE_MAX or not any(self._outputs)
            else None
        )
        self.converters = tuple(_converter(p) for p in ck.params)
        # (grid, block) as given -> (grid, block, function, fast function or None,
        # physical grid.x, logical threads)
        self._dims: dict[Any, tuple[Dim3, Dim3, Any, Any, int, int]] = {}
        # Large 1-D launches run the coarsened entry (abi.py) when the module has one: a grid
        # of at least this many blocks still fills every SM after dividing it by `coarsen`.
        self.coarse_min_blocks = ck.coarsen * 8 * max(1, self.device.sm_count)
        info = self.device
        self.limits = Limits(
            info.max_threads_per_block,
            info.max_block_dims,
            info.max_grid_dims,
            self.kernel.max_threads_per_block,
            f"`{ck.name}` uses {self.kernel.num_regs} registers per thread, which allows "
            f"{self.kernel.max_threads_per_block}",
        )
        self._cu = driver.cu()
        self._cu_launch = self._cu.cuLaunchKernel if self.barriers is None else self.barriers.launch
        self._legacy_stream = self._cu.CUstream(0)
        self.cplan = self._compiled_plan()
        self.launch, self.launcher_source = build_launcher(self, _PACK_ERRORS)

    def _compiled_plan(self) -> Any:
        """The C launcher's plan for this signature (claunch.py), or None: the Python one."""
        ck = self.ck
        assumes = ck.fast_assumes if ck.fast_entry is not None else ()
        if ck.cooperative:  # the C launcher calls cuLaunchKernel: cooperative.py's path instead
            return None
        if not claunch.eligible(ck.params, ck.contract.requires, assumes):
            return None
        try:
            return claunch.make_plan(
                ck.params,
                self.packer.offsets,
                self.packer.buffer_address,
                self.packer.size,
                self.borrow_pairs,
                process_gpu.GPU,
                Tensor,
                _torch_tensor_type(),  # _NoTorch, no argument's type, before torch loads
                torch_dtype_of,
                ck.contract.requires,
                assumes,
            )
        except OSError:  # no libcuda to call: the Python launcher calls cuda.bindings
            return None

    def prepared(self, grid: Dim3, block: Dim3) -> Callable[[tuple[Any, ...]], int] | None:
        """The compiled launch of `kernel(prep, *args)` with this grid and block
        (claunch_prepared.c), called with the whole argument tuple, the PreparedLaunch first:
        0 launched, 1 launched and FEARLESS_SYNC wants a synchronisation, -1 nothing launched
        (the generated launcher runs and explains). None where there is no C plan."""
        store = config.sync_store()
        if self.cplan is None or store is None:
            return None
        g, b, fn, fast, gx, threads = self._shape(grid, block)
        module = claunch.module()
        assert module is not None  # it made cplan
        bound = module.bind(
            self.cplan, fn, fast, gx, g[1], g[2], b[0], b[1], b[2], threads, self.pool, *store
        )
        return functools.partial(module.run, bound)

    # ------------------------------------------------------------------------ grid, block

    def check_dims(self, grid: Any, block: Any) -> tuple[Dim3, Dim3]:
        """Validate a grid/block pair against the contract and the device; remembered once valid."""
        g, b, *_ = self._shape(grid, block)
        return g, b

    def _shape(self, grid: Any, block: Any) -> tuple[Dim3, Dim3, Any, Any, int, int]:
        """Validate a launch and choose how it runs.

        Returns (grid, block, function, fast function, physical grid.x, logical threads); the
        launcher runs the fast function (ck.fast_entry) when the arguments meet its length
        assumptions.
        """
        g = normalize_dims(grid, "grid")
        b = normalize_dims(block, "block")
        check_launch(self.ck.name, self.ck.contract, g, b, self.limits)
        threads = g[0] * g[1] * g[2] * b[0] * b[1] * b[2]
        k = self.kernel
        fn, fast, gx = k.function, k.fast_function, g[0]
        one_d = (g[1], g[2], b[1], b[2]) == (1, 1, 1, 1)
        if k.coarse_function is not None and one_d and gx >= self.coarse_min_blocks:
            fn, fast, gx = k.coarse_function, k.fast_coarse_function, -(-gx // self.ck.coarsen)
        if self.barriers is not None:
            check_co_resident(self.ck.name, g, b, self.co_resident(b), self._co_resident_why(b))
        shape = (g, b, fn, fast, gx, threads)
        if len(self._dims) >= _DIM_CACHE_MAX:
            self._dims.clear()
        with contextlib.suppress(TypeError):  # unhashable (a list): validated again next time
            self._dims[grid, block] = shape
        return shape

    def co_resident(self, block: Dim3) -> int:
        """The most blocks of this shape a cooperative launch may have: occupancy per SM (of
        the plain and the fast entry, whichever is lower) times the SMs; asked once per shape."""
        limit = self._co_resident.get(block)
        if limit is None:
            threads = block[0] * block[1] * block[2]
            k = self.kernel
            functions = [f for f in (k.function, k.fast_function) if f is not None]
            per_sm = min(blocks_per_sm(f, threads) for f in functions)
            limit = self._co_resident[block] = per_sm * max(1, self.device.sm_count)
        return limit

    def _co_resident_why(self, block: Dim3) -> str:
        threads = block[0] * block[1] * block[2]
        sms = max(1, self.device.sm_count)
        per_sm = self.co_resident(block) // sms
        return (
            f"{per_sm} blocks of {threads} threads per SM (the occupancy of `{self.ck.name}`, "
            f"which uses {self.kernel.num_regs} registers per thread) times {sms} SMs"
        )

    # ---------------------------------------------------------------------- error paths

    def _requires_failed(self, k: int, args: Sequence[Any]) -> None:
        lengths = [
            describe(a, Target.CUDA, name=p.name, ndim=p.ndim).shape[0] if p.is_array else None
            for p, a in zip(self.params, args, strict=True)
        ]
        env = requires_values(args, lengths)
        raise requires_error(self.ck.name, self.params, self.ck.contract.requires[k], env)

    def _overlap(self, starts: list[int], ends: list[int]) -> None:
        hit = find_overlap(starts, ends, self._outputs, self.borrow_pairs)
        if hit is not None:
            raise borrow_error(self._array_names, self._outputs, starts, ends, *hit)

    def _argument_error(self, index: int, arg: Any) -> KernelTypeError:
        spec = self.params[index]
        describe(arg, Target.CUDA, name=spec.name, ndim=spec.ndim)  # raises the precise reason
        return argument_error(
            f"argument `{spec.name}` cannot be passed to `{self.ck.name}`",
            help=f"pass a {spec.ndim}-D contiguous GPU array: an fl.Tensor, a torch tensor, "
            "or a DLPack array",
        )

    def _host_arrays(
        self, grid: Any, block: Any, args: Sequence[Any], stream: Any, index: int
    ) -> None:
        """Argument `index` is no device array: NumPy arrays are copied to the GPU for this
        launch and the outputs back (host_arrays.py); anything else is refused."""
        staging = stage(self.ck.name, [p if p.is_array else None for p in self.params], args, self)
        if staging is None:
            raise self._argument_error(index, args[index])
        self.launch(grid, block, staging.args, stream)
        finish(staging)

    def _torch_write(self, obj: Any, index: int) -> Any:
        """arrays.torch_write for output `index`: the torch tensor written, or None."""
        return torch_write(obj, f"argument `{self.params[index].name}`")

    def _dtype_error(self, index: int, have: Any) -> KernelTypeError:
        spec = self.params[index]
        return dtype_error(self.ck.name, spec.name, getattr(have, "name", str(have)), spec.dtype)

    def _torch_dtype_error(self, index: int, t: Any) -> KernelTypeError:
        """A torch tensor whose dtype is not the parameter's (or has no fearless type)."""
        have = torch_dtype(t.dtype)
        if have is None:
            return self._argument_error(index, t)  # describe names the unsupported type
        return self._dtype_error(index, have)

    def _arity_error(self, args: Sequence[Any]) -> KernelTypeError:
        return arity_error(self.ck.name, [p.name for p in self.params], len(args))

    def _scalar_error(self, args: Sequence[Any]) -> KernelTypeError:
        for spec, arg in zip(self.params, args, strict=True):
            if not spec.is_array and not scalar_fits(arg, spec.dtype):
                return scalar_error(spec.name, arg, spec.dtype)
        return argument_error(f"the arguments of `{self.ck.name}` could not be packed")

    def _relaunch(self, err: Any, fn: Any, g: Dim3, b: Dim3, cs: Any) -> None:
        if err == self._cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:  # a thread that never used the GPU
            driver.make_current()
            (err,) = self._cu_launch(fn, *g, *b, 0, cs, self.packer.address, 0)
            if not err:
                return
        raise driver.driver_error(err, f"launching `{self.ck.name}` with grid={g} block={b}")


def keyword_error(kernel: str, names: Sequence[str], kwargs: dict[str, Any]) -> KernelTypeError:
    """E0061 for a launch given keyword arguments (`k[1, 256](a=x)`, `tile_kernel(z=zp)`):
    kernel parameters are bound by position, on both tracks."""
    given = ", ".join(f"`{k}=`" for k in kwargs)
    listed = ", ".join(names)
    return KernelTypeError(
        f"`{kernel}` takes its arguments by position, but was given the keyword "
        f"argument{'s' if len(kwargs) != 1 else ''} {given}",
        user_location(),
        code="E0061",
        help=f"pass one argument per parameter, in order: {kernel}({listed})",
    )


def _converter(p: ParamSpec) -> Any:
    """Scalars whose value needs work before packing: bf16 (raw bits) and bool (strict)."""
    if p.is_array:
        return None
    if p.dtype.name == "bf16":
        return _strict_bf16
    if p.dtype.is_bool:
        return _strict_bool
    return None


def _strict_bf16(value: Any) -> int:
    if not scalar_fits(value, dtypes.bf16):
        raise TypeError("not a bf16 value")
    return bf16_bits(float(value))


def _strict_bool(value: Any) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError("a bool parameter takes True or False")


# ------------------------------------------------------------------ the generated warm launcher


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
    store = config.sync_store()
    # FEARLESS_SYNC, read inline where os.environ's dict is at hand (a call less per launch)
    sync_test = "sync_env.get(SYNC_KEY) in SYNC_ON" if store else "sync_after_launch()"
    if plan.cplan is not None:
        # The compiled launcher (claunch.py) takes the common case whole; -1: it launched
        # nothing, and the Python checks below run and explain.
        lines += [
            # None: the default stream, which claunch_streams.c decides as streams.py would
            # a launch on this thread's `fl.graph` capture stream: the Python path, which
            # keeps the arguments for the graph (a launch the capture does not take stays here)
            "    h = None if stream is None else (stream._handle if type(stream) is Stream"
            " and not (streams._captures and captured(stream)) else -1)",
            "    if h != -1 and type(args) is tuple:",
            "        r = claunch(cplan, fnc, fast, gx, g[1], g[2], b[0], b[1], b[2], nthreads,"
            " args, h)",
            "        if r == 0:",
            "            pool.launches += 1",
            f"            if {sync_test}:",
            "                synchronize()",
            "            return",
        ]
    names = [f"x{i}" for i in range(len(params))]
    if names:
        lines.append(f"    {', '.join(names)}, = args")

    def written(i: int, branch: str) -> list[str]:
        """For an output: w<i>, the torch tensor whose memory the launch writes (None: not
        torch's), once autograd allows it (arrays.torch_write); its version is bumped after."""
        if not params[i].is_output:
            return []
        x = names[i]
        if branch == "tensor":  # an fl.Tensor: torch's memory only when made over torch's
            return [f"        w{i} = None if {x}._owner.__class__ in PLAIN else write({x}, {i})"]
        if branch == "torch":
            return [f"        w{i} = write({x}, {i}) if {x}.requires_grad else {x}"]
        return [f"        w{i} = write({x}, {i})"]

    env: dict[str, Any] = {}
    packed: list[str] = []
    arrays: list[int] = []  # parameter index of each array, in order
    for i, p in enumerate(params):
        x = names[i]
        if p.is_array:
            # n<i> is `len(x)` for `requires=`: the extent along axis 0, as in the kernel; a
            # 2-D array's columns are m<i>
            arrays.append(i)
            env[f"D{i}"] = p.dtype
            env[f"TD{i}"] = torch_dtype_of(p.dtype)
            lines += _array_read(i, x, p.ndim, p.dtype.itemsize, written)
            packed += [f"p{i}", f"n{i}", f"m{i}"] if p.ndim == 2 else [f"p{i}", f"n{i}"]
        elif plan.converters[i] is not None:
            env[f"C{i}"] = plan.converters[i]
            lines += [
                "    try:",
                f"        v{i} = C{i}({x})",
                "    except PACK_ERRORS:",
                "        raise scalar_error(args) from None",
            ]
            packed.append(f"v{i}")
        else:  # struct refuses what does not fit, except bools: binder.scalar_fits's rule
            lines += [
                f"    if {x}.__class__ in BOOL_TYPES:",
                "        raise scalar_error(args)",
            ]
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
    # The buffer is the plan's, shared by every thread: the pack and the cuLaunchKernel that
    # copies it happen under the plan's lock (params.py), or a second thread's pack could
    # reach this launch.
    written_names = [f"w{i}" for i in arrays if params[i].is_output]
    bump: list[str] = []
    if len(written_names) == 1:
        bump = [f"    if {written_names[0]} is not None:", f"        bump(({written_names[0]},))"]
    elif written_names:
        listed = ", ".join(written_names)
        bump = [
            f"    ws = [w for w in ({listed}) if w is not None]",
            "    if ws:",
            "        bump(ws)",
        ]
    lines += [
        "    if stream is None:",
        "        cs = default_stream(legacy_stream, args)",
        "    elif type(stream) is Stream:",
        "        cs = stream._cu if stream._cu is not None else stream.cu_stream()",
        "    else:",
        "        cs = CUstream(stream_handle(stream))",
        "    if stream is not None and streams._captures:  # captured: the graph holds the args",
        "        keep_if_captured(args, stream)",
        "    with lock:",
        "        try:",
        f"            pack_into({', '.join(['buffer', '0', *packed, 'nthreads'])})",
        "        except PACK_ERRORS:",
        "            raise scalar_error(args) from None",
        "        err, = cu_launch(fnc, gx, g[1], g[2], b[0], b[1], b[2], 0, cs, params_address, 0)",
        "        if err:",
        "            relaunch(err, fnc, (gx, g[1], g[2]), b, cs)",
        "    pool.launches += 1  # ErrorPool.mark_launched, inlined",
        *bump,  # torch's tensors written: their versions, as an in-place op bumps them
        "    if sync_after_launch():",
        "        synchronize()",
    ]
    source = "\n".join(lines) + "\n"
    env.update(
        dims=plan._dims,
        launch_shape=plan._shape,
        arity_error=plan._arity_error,
        host_arrays=plan._host_arrays,
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
        BOOL_TYPES=(bool, np.bool_),
        pack_into=plan.packer.pack_target()[0],
        buffer=plan.packer.pack_target()[1],
        lock=plan.packer.lock,
        legacy_stream=plan._legacy_stream,
        default_stream=default_cu_stream,
        cplan=plan.cplan,
        claunch=claunch.module().launch if plan.cplan is not None else None,  # type: ignore[union-attr]
        CUstream=plan._cu.CUstream,
        cu_launch=plan._cu_launch,
        params_address=plan.packer.address,
        pool=plan.pool,
        sync_after_launch=config.sync_after_launch,
        sync_env=store[0] if store else None,
        SYNC_KEY=store[1] if store else None,
        SYNC_ON=config.SYNC_ON,
        synchronize=_synchronize,
        streams=streams,
        keep_if_captured=keep_if_captured,
        captured=captured,
        write=plan._torch_write,
        bump=bump_versions,
        PLAIN=(type(None), driver.DeviceAllocation),
    )
    code = compile(source, f"<fearless launcher for {plan.ck.name}>", "exec")
    exec(code, env)
    return env["launch"], source


def _array_read(
    i: int, x: str, ndim: int, itemsize: int, written: Callable[[int, str], list[str]]
) -> list[str]:
    """The generated launcher's lines that read array argument `x` (parameter `i`, of `ndim`
    1 or 2): pointer p<i>, extents n<i> (and m<i>) and the end e<i>, from an fl.Tensor's
    fields, a plain torch.Tensor's accessors, or the per-type extractor; `written(i, branch)`
    adds an output's torch bookkeeping to each branch."""
    two = ndim == 2
    dims = f"(n{i}, m{i})" if two else f"n{i}"
    fl_test = (
        f"{x}._on_device and {x}._moved is None and len({x}._shape) == 2" if two else f"{x}._dev1d"
    )
    fl_read = f"{dims}, p{i} = {x}._shape, {x}._ptr" if two else f"p{i}, n{i} = {x}._ptr, {x}._size"
    torch_extents = f"s{i}" if two else f"s{i}[0]"
    extractors = (
        "extractors_2d.get(tp) or launch_extractor_2d(tp)"
        if two
        else ("extractors.get(tp) or launch_extractor(tp)")
    )
    got = f"p{i}, n{i}, m{i}, t{i}" if two else f"p{i}, n{i}, t{i}"
    size = f"n{i} * m{i}" if two else f"n{i}"
    return [
        f"    tp = type({x})",
        f"    if tp is Tensor and {fl_test}:",
        f"        {fl_read}",
        f"        if {x}._dtype is not D{i}:",
        f"            raise dtype_error({i}, {x}._dtype)",
        *written(i, "tensor"),
        "    elif tp is TorchTensor:",
        "        try:  # a sparse or nested tensor raises here: describe() says why",
        f"            s{i} = {x}.shape",
        f"            bad = (len(s{i}) != {ndim} or not {x}.is_cuda"
        f" or {x}.get_device() != {process_gpu.GPU} or not {x}.is_contiguous())",
        "        except RuntimeError:",
        "            bad = True",
        "        if bad:",
        f"            raise argument_error({i}, {x})",
        f"        if {x}.dtype is not TD{i}:",
        f"            raise torch_dtype_error({i}, {x})",
        f"        {dims}, p{i} = {torch_extents}, {x}.data_ptr()",
        *written(i, "torch"),
        "    else:",
        f"        ex = {extractors}",
        f"        got = ex({x}) if ex is not None else None",
        "        if got is None:  # not device memory: a NumPy array is copied",
        f"            return host_arrays(grid, block, args, stream, {i})",
        f"        {got} = got",
        f"        if t{i} is not D{i}:",
        f"            raise dtype_error({i}, t{i})",
        *written(i, "other"),
        f"    e{i} = p{i} + {size} * {itemsize}",
    ]


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
