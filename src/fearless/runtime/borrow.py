"""The launch-time borrow check: no output array shares a byte with any other array argument.

Outputs are `DisjointSlice` and `AtomicSlice` parameters (`ParamSpec.is_output`): an
AtomicSlice aliasing an input would let a thread's atomic change what another thread reads.

This is what lets every array parameter be `noalias` in the generated code. Arrays are compared
as byte ranges [ptr, ptr + nbytes), so two views of one storage collide exactly when their
bytes do (disjoint halves of one buffer are fine), whichever library made the views. Read-only
arguments may overlap each other; zero-size arrays overlap nothing.

Both launchers use it: the GPU plan with plain lists on its warm path (`find_overlap`), the
simulator with ParamSpecs and ArrayInfos (`check_borrows`), which first checks that the arrays
are on one device (runtime/devices.py): arrays on two devices are refused, never compared.
`check_borrows` (the simulator's SIMT launches, every Tile slow path, host-array staging) also
refuses an output that is a torch leaf tensor requiring grad while grad mode is on, as torch
refuses an in-place op on one; the GPU's warm launchers do not look (docs/design.md 1.3).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..abi import ParamSpec
from ..errors import BorrowError
from .arrays import ArrayInfo, torch_write
from .devices import launch_device
from .location import user_location

# Up to this many arrays, comparing each output with every other array directly beats sorting
# (a launch usually has 2-4 arrays: one or two comparisons instead of a sort).
PAIRWISE_MAX = 8

Pairs = tuple[tuple[int, int], ...]


def output_pairs(outputs: Sequence[bool]) -> Pairs:
    """The (output, other) index pairs to compare: each output against every other array, once."""
    pairs = []
    for o, is_out in enumerate(outputs):
        if not is_out:
            continue
        for j, other_out in enumerate(outputs):
            if j != o and not (other_out and j < o):  # two outputs: listed once, as (lower, higher)
                pairs.append((o, j))
    return tuple(pairs)


def find_overlap(
    starts: Sequence[int], ends: Sequence[int], outputs: Sequence[bool], pairs: Pairs | None = None
) -> tuple[int, int] | None:
    """The first (output, other) pair of indices whose non-empty byte ranges overlap, or None.

    `pairs` is `output_pairs(outputs)`, computed once per kernel; without it, or for many
    arrays, the ranges are sorted by start and swept: O(n log n) plus the overlaps found.
    """
    if pairs is not None and len(starts) <= PAIRWISE_MAX:
        for o, j in pairs:
            if (
                starts[j] < ends[o]
                and starts[o] < ends[j]
                and starts[o] != ends[o]
                and starts[j] != ends[j]
            ):
                return o, j
        return None
    return _sweep(starts, ends, outputs)


def _sweep(
    starts: Sequence[int], ends: Sequence[int], outputs: Sequence[bool]
) -> tuple[int, int] | None:
    order = sorted((i for i in range(len(starts)) if starts[i] != ends[i]), key=starts.__getitem__)
    for pos, i in enumerate(order):
        end = ends[i]
        for k in range(pos + 1, len(order)):
            j = order[k]
            if starts[j] >= end:  # sorted: nothing later starts inside range i either
                break
            if outputs[i] or outputs[j]:
                return (i, j) if outputs[i] else (j, i)
    return None


def check_borrows(specs: Sequence[ParamSpec], infos: Sequence[ArrayInfo | None]) -> int:
    """Raise BorrowError if an output of this launch overlaps another array argument; the
    launch's device (runtime/devices.py: DeviceError for arrays on two).

    `infos[i]` describes the argument of `specs[i]` (None for scalars).
    """
    names: list[str] = []
    outputs: list[bool] = []
    starts: list[int] = []
    ends: list[int] = []
    on: list[int | None] = []
    for spec, info in zip(specs, infos, strict=True):
        if info is None or not spec.is_array:
            continue
        names.append(spec.name)
        outputs.append(spec.is_output)
        if spec.is_output:  # torch's memory: refused as an in-place op would be
            torch_write(info.owner, f"argument `{spec.name}`")
        starts.append(info.ptr)
        ends.append(info.ptr + info.nbytes)
        on.append(info.device)
    device = launch_device(names, on)  # one device per launch: arrays on two are refused
    if any(outputs):
        pairs = output_pairs(outputs) if len(starts) <= PAIRWISE_MAX else None
        hit = find_overlap(starts, ends, outputs, pairs)
        if hit is not None:
            raise borrow_error(names, outputs, starts, ends, *hit)
    return device


def borrow_error(
    names: Sequence[str],
    outputs: Sequence[bool],
    starts: Sequence[int],
    ends: Sequence[int],
    out: int,
    other: int,
) -> BorrowError:
    """The rustc-style error for output `out` overlapping argument `other` (array indices)."""
    if outputs[other] and other > out:  # two outputs: the later parameter is the second borrow
        out, other = other, out
    c, a = names[out], names[other]
    kind = "mutable" if outputs[other] else "immutable"
    base = starts[out]
    lo, hi = max(starts[out], starts[other]) - base, min(ends[out], ends[other]) - base
    return BorrowError(
        f"cannot borrow `{c}` as mutable because it is also borrowed as {kind}",
        user_location(),
        label=f"`{c}` and `{a}` overlap in this launch",
        notes=[f"`{a}` overlaps bytes [{lo}, {hi}) of `{c}`"],
        help=f"give `{c}` memory of its own (e.g. `fl.empty(...)`): an output may not share a "
        "byte with any other argument of the same launch",
    )
