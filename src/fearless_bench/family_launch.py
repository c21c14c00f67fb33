"""Host launch overhead with 0, 1, 3 and 8 array arguments: microseconds of Python per launch.

Each implementation launches a tiny kernel (1024 f32 elements, 4 blocks of 256) back to back;
`timing.host_per_launch` gives the median host time per launch. The floor is the raw driver
call: `cuLaunchKernel` through cuda.bindings on fearless's own cubin with the parameters packed
once (no checks at all). fearless's number is its prepared launch (`k(prep, ...)`), safety
checks included: argument types, the launch contract, the borrow check. cuda.core's `launch`
of the NVRTC twin, torch's smallest op of that arity, Triton's and cuTile's launchers are the
peers. The Tile track's number is its plain call (`k(part, ...)`, checks included) of the
examples `fill_ones` (1 array), `vecadd` (3) and `add7` (8), one 1024-element tile each, so one
block; a Tile launch needs a Part, so it has no 0-array case. Before timing, each launch is run
once and its output checked, so no peer is timed doing nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import dry
from .harness import Ctx, error_text, format_line
from .kernels_cuda import i64, ptr
from .model import (
    CUDA_CORE,
    CUTILE,
    FEARLESS_SIMT,
    FEARLESS_TILE,
    RAW_LAUNCH,
    TORCH,
    TRITON,
    Record,
    Skip,
    failed,
    skipped,
)
from .peers import Peers
from .timing import host_per_launch

FAMILY = "launch"
ARITIES = (0, 1, 3, 8)
CASES = tuple(f"launch_{k}arrays" for k in ARITIES)
N = 1024

Launch = Callable[[], Any]


def simt_kernel(peers: Peers, arity: int) -> Any:
    from . import kernels_simt as K

    if arity == 3:
        return peers.simt_examples().vecadd
    return {0: K.noop, 1: K.fill1, 8: K.sum8}[arity]


def expected(torch: Any, arrays: list[Any]) -> Any:
    """What the last array holds after one launch of any implementation."""
    if len(arrays) == 1:
        return torch.ones_like(arrays[0])
    return sum(arrays[:-1])


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    out: list[Record] = []
    for arity in ARITIES:
        case = f"launch_{arity}arrays"
        if case in selected:
            out += _case(ctx, case, arity)
    return out


def _case(ctx: Ctx, case: str, arity: int) -> list[Record]:
    torch = ctx.torch
    arrays = [torch.randn(N, device="cuda") for _ in range(arity)]
    blocks = dry.grid(N)

    import fearless as fl

    def simt(on: list[Any] = arrays) -> Launch:
        ctx.peers.fearless_gpu()
        k = simt_kernel(ctx.peers, arity)
        prep = k.prepare(blocks if arity else 1)
        return lambda: k(prep, *on)

    def raw() -> Launch:
        ctx.peers.fearless_gpu()
        return raw_launcher(torch, simt_kernel(ctx.peers, arity), arrays, blocks if arity else 1)

    def cuda_core() -> Launch:
        args = [ptr(a) for a in arrays] + ([i64(N)] if arity else [])
        return ctx.peers.cuda_cpp().launcher(f"args{arity}", N if arity else 1, args)

    def eager() -> Launch:
        if arity == 1:
            return lambda: arrays[0].fill_(1.0)
        if arity == 3:
            return lambda: torch.add(arrays[0], arrays[1], out=arrays[2])
        raise Skip(f"no single torch operation launches one kernel with {arity} tensors")

    def triton() -> Launch:
        return ctx.peers.triton().args_launch(arrays)  # type: ignore[no-any-return]

    def cutile() -> Launch:
        if arity != 3:
            raise Skip("the cuTile launch is measured with 3 arrays only")
        return ctx.peers.cutile().args3_launch(*arrays)  # type: ignore[no-any-return]

    def tile(on: list[Any] = arrays) -> Launch:
        from . import tile_track

        case = tile_track.launch_case(arity)  # 3 arrays: the vecadd case's cubin
        ctx.peers.fearless_gpu()
        kernel, tc = tile_track.resolve(ctx.peers.tile_examples(), case)
        part = fl.asarray(on[-1]).partition(tc.tile)
        args = tile_track.bind(kernel, part, on[:-1], consts=tc.consts)
        return lambda: kernel(*args)

    impls: list[tuple[str, Callable[[], Launch]]] = [
        (FEARLESS_SIMT, simt),
        (FEARLESS_TILE, tile),
        (RAW_LAUNCH, raw),
        (CUDA_CORE, cuda_core),
        (TRITON, triton),
        (CUTILE, cutile),
        (TORCH, eager),
    ]
    records = []
    params = {"arrays": arity, "n": N}
    for name, build in impls:
        try:
            fn = build()
            _check(ctx, fn, arrays)
            t = host_per_launch(fn, ctx.sync, ctx.budget)
            rec = Record(case, FAMILY, name, "ok", params=dict(params))
            rec.time, rec.time_unit, rec.spread, rec.reps = t.median, "us", (t.p20, t.p80), t.reps
            rec.metric, rec.value = "us/launch", t.median
            if name in (FEARLESS_SIMT, FEARLESS_TILE):
                form = "prepared launch" if name == FEARLESS_SIMT else "plain call"
                rec.note = f"{form} on torch tensors, safety checks included; " + _on_fl(
                    ctx, simt if name == FEARLESS_SIMT else tile, arrays
                )
        except Skip as exc:
            rec = skipped(case, FAMILY, name, str(exc), **params)
        except Exception as exc:
            rec = failed(case, FAMILY, name, error_text(exc), **params)
        records.append(rec)
        ctx.log(format_line(rec))
    return records


def _on_fl(ctx: Ctx, build: Callable[[list[Any]], Launch], arrays: list[Any]) -> str:
    """The same launch on fl.Tensors over the same memory, in words (an fl.Tensor's fields are
    read from slots, a torch tensor's through six accessor calls)."""
    import fearless as fl

    try:
        t = host_per_launch(build([fl.asarray(a) for a in arrays]), ctx.sync, ctx.budget)
    except Exception as exc:
        return f"on fl.Tensors it failed: {error_text(exc)}"
    return f"on fl.Tensors {t.median:.2f} us"


def _check(ctx: Ctx, fn: Launch, arrays: list[Any]) -> None:
    if not arrays:
        fn()
        ctx.sync()
        return
    arrays[-1].fill_(float("nan"))
    fn()
    ctx.sync()
    want = expected(ctx.torch, arrays)
    if not ctx.torch.allclose(arrays[-1], want, rtol=1e-6, atol=1e-6):
        raise AssertionError("the launch did not compute its output")


def raw_launcher(torch: Any, kernel: Any, arrays: list[Any], blocks: int) -> Launch:
    """cuLaunchKernel on fearless's cubin with parameters packed once: the floor."""
    from cuda.bindings import driver as cu

    from fearless.runtime.driver import load_kernel
    from fearless.runtime.params import ParamPacker

    ck = kernel.compile()
    loaded = load_kernel(ck)
    packer = ParamPacker(ck.params)
    values: list[int] = []
    for a in arrays:
        values += [a.data_ptr(), a.numel()]
    if packer.count - 1 > len(values):  # an ABI whose last value is the logical thread count
        values.append(blocks * 256)
    packer.set(*values)
    record = torch.zeros(16, dtype=torch.int64, device="cuda")
    packer.set_error_record(record.data_ptr())
    function, address = loaded.function, packer.address

    def launch() -> None:
        cu.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, 0, address, 0)

    launch.keep = (packer, record, loaded)  # type: ignore[attr-defined]
    return launch


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """Compile and simulate the launch kernels (the overhead itself needs a GPU)."""
    import numpy as np

    import fearless as fl

    from . import tile_track
    from .check import rel_err_numpy

    def want(arrays: list[Any]) -> Any:
        if len(arrays) == 1:
            return np.ones(N)
        return np.asarray(np.sum(arrays[:-1], axis=0, dtype=np.float64))

    out = []
    rng = np.random.default_rng(1)
    for arity in ARITIES:
        case = f"launch_{arity}arrays"
        if case not in selected:
            continue

        def body(arity: int = arity) -> float:
            k = simt_kernel(peers, arity)
            dry.compile_simt(peers.arch, k)
            arrays = [rng.standard_normal(N).astype(np.float32) for _ in range(arity)]
            if not arrays:
                k[1, 256]()
                return 0.0
            arrays[-1][:] = np.nan
            k[dry.grid(N), 256](*arrays)
            return rel_err_numpy(arrays[-1], want(arrays))

        def tile(arity: int = arity) -> float:
            kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.launch_case(arity))
            arrays = [rng.standard_normal(N).astype(np.float32) for _ in range(arity)]
            arrays[-1][:] = np.nan
            part = fl.asarray(arrays[-1]).partition(tc.tile)
            args = tile_track.bind(kernel, part, arrays[:-1], consts=tc.consts)
            tile_track.compile_for(kernel, args, peers.arch)
            kernel(*args)
            return rel_err_numpy(part.unpartition().numpy(), want(arrays))

        out += dry.fearless_records(case, FAMILY, "f32", body, tile, arrays=arity, n=N)
    return out
