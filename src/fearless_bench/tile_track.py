"""Calling the Tile track's examples (examples/tile_kernels.py) from the suite, GPU or simulator.

The suite does not write Tile kernels of its own: it measures the examples the Tile track
ships, so a faster example is a faster benchmark. Each case names its kernel and tile shape
here; arguments bind by parameter kind (the one `tile.Part` gets the partitioned output,
`tile.Tensor`s the inputs in order, scalars the case's scalars, `tile.Const`s the case's
constants by name), so a kernel whose parameters do not fit is skipped with the mismatch
spelled out rather than called wrongly.

The examples module may override tile shapes and constants with module-level dicts
`BENCH_TILES = {"softmax": (1, 1024)}` and `BENCH_CONSTS = {"gemm": {"BK": 64}}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .model import Skip


@dataclass(frozen=True)
class TileCase:
    """Which example kernel a case runs, and how its output is tiled."""

    kernel: str  # attribute of examples/tile_kernels.py
    tile: tuple[int, ...]
    consts: dict[str, int | float] = field(default_factory=dict)
    key: str = ""  # the BENCH_TILES / BENCH_CONSTS key (defaults to the kernel name)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def vecadd_case() -> TileCase:
    return TileCase("vecadd", (1024,), key="vecadd")


def saxpy_case() -> TileCase:
    return TileCase("saxpy", (1024,), key="saxpy")


def transpose_case() -> TileCase:
    """out (cols x rows) in 64 x 64 tiles, each the transpose of one of x's, as the peers do."""
    return TileCase("transpose", (64, 64), key="transpose")


SUM_TILE = 4096  # elements of x each first-pass block adds per step (the cuTile peer's tile)
SUM_PARTIALS = 1024  # first-pass blocks, so partials (the Triton and cuTile peers' count)


def sum_cases() -> tuple[TileCase, TileCase]:
    """The two launches of `sum_tiles`: x into SUM_PARTIALS partials, then those into one.

    Both partition their output into 1-element tiles (one block per partial); the second
    loads the partials as one tile of SUM_PARTIALS."""
    return (
        TileCase("sum_tiles", (1,), {"TILE": SUM_TILE}, key="sum"),
        TileCase("sum_tiles", (1,), {"TILE": SUM_PARTIALS}, key="sum_final"),
    )


def launch_case(arity: int) -> TileCase:
    """The launch-overhead kernel with `arity` arrays: one 1024-element tile, one block.

    3 arrays is the vecadd case itself (its cubin); a Tile launch needs a Part, so 0 has none."""
    if arity == 3:
        return vecadd_case()
    names = {1: "fill_ones", 8: "add7"}
    if arity not in names:
        raise Skip(f"a Tile launch needs a Part, so no Tile kernel has {arity} array arguments")
    return TileCase(names[arity], (1024,), key=names[arity])


def row_case(kernel: str, cols: int, key: str) -> TileCase:
    """softmax / rms_norm / layer_norm: one block per row, the row in one power-of-two tile."""
    return TileCase(kernel, (1, next_pow2(cols)), key=key)


def gemm_case(dtype: str, tile: tuple[int, int] = (128, 128), bk: int = 64) -> TileCase:
    return TileCase(f"matmul_{dtype}", tile, {"BK": bk}, key="gemm")


def resolve(examples: Any, case: TileCase) -> tuple[Any, TileCase]:
    """The kernel object and the case with the examples' overrides applied."""
    kernel = getattr(examples, case.kernel, None)
    if kernel is None:
        raise Skip(f"examples/tile_kernels.py has no `{case.kernel}`")
    key = case.key or case.kernel
    tiles = getattr(examples, "BENCH_TILES", {})
    consts = getattr(examples, "BENCH_CONSTS", {})
    tile = tuple(tiles.get(key, case.tile))
    merged = {**case.consts, **consts.get(key, {})}
    return kernel, TileCase(case.kernel, tile, merged, key)


def bind(
    kernel: Any,
    part: Any,
    tensors: Sequence[Any],
    scalars: Sequence[Any] = (),
    consts: dict[str, int | float] | None = None,
) -> tuple[Any, ...]:
    """The argument tuple for `kernel`, matched to its annotations by kind (see module doc)."""
    from fearless.tile.types import ConstAnnotation, PartAnnotation, TensorAnnotation

    consts = consts or {}
    args: list[Any] = []
    ts, ss = list(tensors), list(scalars)
    parts = 0
    shape = []
    for name, ann in kernel.annotations():
        if isinstance(ann, PartAnnotation):
            parts += 1
            args.append(part)
            shape.append(f"{name}: Part")
        elif isinstance(ann, TensorAnnotation):
            if not ts:
                raise Skip(_mismatch(kernel, "more Tensor parameters than the case has inputs"))
            args.append(ts.pop(0))
            shape.append(f"{name}: Tensor")
        elif isinstance(ann, ConstAnnotation):
            if name not in consts:
                raise Skip(
                    _mismatch(kernel, f"Const parameter `{name}` has no value in the suite "
                              "(set BENCH_CONSTS in examples/tile_kernels.py)")
                )  # fmt: skip
            args.append(consts[name])
        else:
            if not ss:
                raise Skip(_mismatch(kernel, f"scalar parameter `{name}` has no value"))
            args.append(ss.pop(0))
    if parts != 1 or ts or ss:
        raise Skip(
            _mismatch(kernel, f"{parts} Part parameter(s), {len(ts)} input(s) and "
                      f"{len(ss)} scalar(s) left unbound")
        )  # fmt: skip
    return tuple(args)


def _mismatch(kernel: Any, what: str) -> str:
    return f"examples/tile_kernels.py `{getattr(kernel, 'name', kernel)}` does not fit: {what}"


def compile_for(kernel: Any, args: Sequence[Any], arch: str) -> None:
    """Compile the specialisation `args` selects to a cubin (tileiras); no GPU needed."""
    from fearless.runtime.target import current_target

    signature, _ = kernel.signature_of(tuple(args), current_target())
    kernel.compile(signature, arch)
