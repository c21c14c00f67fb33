"""The Tile compilation driver: one specialisation -> tile IR (+ passes) -> bytecode -> cubin.

    build_ir         frontend (frontend.py) and the pass pipeline (passes.py)
    compile_cubin    tile IR -> Tile IR bytecode (lower_tileir.py) -> tileiras, cached on disk
    render_stage     the text of "ir" / "tileir" for `inspect`

A specialisation (`Signature`) fixes each parameter's kind and dtype, every Part's tile shape
and every Const's value; the kernel's ABI follows from it (`TileParam.abi`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import __version__, cache, config
from ..dtypes import DType
from ..errors import CompileError
from ..frontend.source import FunctionSource
from ..frontend.values import Weak
from ..ir.core import Function
from .frontend import TileLowerer
from .passes import run_pipeline
from .printer import print_function
from .types import ArrayParamType, TileType

ParamKind = Literal["part", "tensor", "const", "scalar"]


@dataclass(frozen=True)
class TileParam:
    """One parameter of one specialisation.

    Kernel ABI (the cubin's parameters), per array parameter ("part" or "tensor") of rank d:
    a u64 pointer to element 0, d i32 extents, then d-1 i32 strides in elements (the last
    stride is 1: arrays are C-contiguous); per scalar its value; a const has no parameter.

    `align` (arrays) is what the launch saw of its argument: the power of two, up to 16, that
    divides the pointer in bytes, then per extent and per stride (d-1 of them) the power of two
    up to 16 bytes' worth of elements that divides it (`array_align`). The lowering turns it into
    `assume` ops, which let tileiras use TMA and vector accesses; a launch whose arguments divide
    differently is another specialisation, so the assumptions always hold.
    """

    name: str
    kind: ParamKind
    dtype: DType | None = None
    ndim: int = 0
    tile: tuple[int, ...] | None = None
    value: Any = None
    align: tuple[int, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.kind in ("part", "tensor")


ALIGN_BYTES = 16  # TMA needs 16-byte aligned addresses and strides


def _pow2_divisor(v: int, cap: int) -> int:
    """The largest power of two up to `cap` that divides `v` (0 is divisible by all)."""
    if v == 0:
        return cap
    return min(cap, v & -v)


def element_strides(shape: Sequence[int]) -> list[int]:
    """The strides in elements of a C-contiguous array, as the kernel ABI passes them."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def array_align(ptr: int, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """`TileParam.align` of a C-contiguous array: (pointer, *extents, *strides[:-1])."""
    cap = max(1, ALIGN_BYTES // itemsize)
    return (
        _pow2_divisor(ptr, ALIGN_BYTES),
        *(_pow2_divisor(d, cap) for d in shape),
        *(_pow2_divisor(s, cap) for s in element_strides(shape)[:-1]),
    )


Signature = tuple[TileParam, ...]


@dataclass(frozen=True)
class TileHints:
    """Whole-kernel hints for tileiras (`@tile.kernel(num_ctas=..., occupancy=...)`).

    num_ctas:  CTAs per cluster on sm_90+ (1, 2, 4, 8 or 16), which may share loaded tiles.
    occupancy: how many CTAs tileiras should plan to keep resident per multiprocessor (1-32);
               it trades registers per CTA for latency hiding.
    num_worker_warps: warps doing the arithmetic in a warp-specialised CTA (tileiras may add
               warps for memory transfers): 4 or 8 (1-32, powers of two, from bytecode 13.5);
               row kernels with large tiles and many registers are where it pays.
    """

    num_ctas: int | None = None
    occupancy: int | None = None
    num_worker_warps: int | None = None

    def __post_init__(self) -> None:
        if self.num_ctas is not None and (
            isinstance(self.num_ctas, bool) or self.num_ctas not in (1, 2, 4, 8, 16)
        ):
            raise CompileError(
                f"`num_ctas` must be 1, 2, 4, 8 or 16, got {self.num_ctas!r}",
                help="it is the number of CTAs in a cluster, a power of two up to 16",
            )
        if self.occupancy is not None and (
            not isinstance(self.occupancy, int)
            or isinstance(self.occupancy, bool)
            or not 1 <= self.occupancy <= 32
        ):
            raise CompileError(
                f"`occupancy` must be an integer from 1 to 32, got {self.occupancy!r}",
                help="it is the number of CTAs tileiras plans to keep on one multiprocessor",
            )

        if self.num_worker_warps is not None and (
            isinstance(self.num_worker_warps, bool)
            or self.num_worker_warps not in (1, 2, 4, 8, 16, 32)
        ):
            raise CompileError(
                f"`num_worker_warps` must be 1, 2, 4, 8, 16 or 32, got {self.num_worker_warps!r}",
                help="it is the number of warps doing a CTA's arithmetic; 4 and 8 work with "
                "every tileiras",
            )

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.num_ctas, self.occupancy, self.num_worker_warps))


@dataclass
class TileIR:
    fn: Function
    signature: Signature
    source: FunctionSource
    hints: TileHints = field(default_factory=TileHints)

    @property
    def name(self) -> str:
        return self.fn.name


@dataclass
class CompiledTile:
    name: str
    arch: str
    signature: Signature
    bytecode: bytes
    cubin: bytes
    stages: dict[str, str] = field(default_factory=dict)


def build_ir(src: FunctionSource, signature: Signature, hints: TileHints | None = None) -> TileIR:
    tree = src.tree
    fn = Function(tree.name, src.loc(tree))
    entry = fn.new_block("entry")
    env: dict[str, Any] = {}
    for arg, p in zip(tree.args.args, signature, strict=True):
        loc = src.loc(arg)
        if p.kind == "const":
            env[arg.arg] = Weak(p.value)
        elif p.kind == "scalar":
            assert p.dtype is not None
            env[arg.arg] = entry.add_arg(TileType(p.dtype), loc, arg.arg)
        else:
            assert p.dtype is not None
            env[arg.arg] = entry.add_arg(ArrayParamType(p.dtype, p.ndim, p.tile), loc, arg.arg)
    lowerer = TileLowerer(src, fn, env)
    lowerer.lower_body(tree.body)
    from . import ops

    lowerer.block.append(ops.Return(src.loc(tree.body[-1])))
    run_pipeline(fn)
    ir = TileIR(fn, signature, src, hints or TileHints())
    _dump("ir", fn.name, print_function(fn))
    return ir


def render_ir(ir: TileIR) -> str:
    return print_function(ir.fn)


def cache_key(ir: TileIR, arch: str) -> str:
    """sha256 of the source, the specialisation, the hints, the tile IR (which covers the
    globals the body resolved), the fearless version and the arch.

    It needs neither cuda-tile nor tileiras, so cubins compiled here load on a GPU machine that
    has neither (DESIGN section 7): the bytecode is a function of the tile IR for one version
    of fearless, whose pyproject pins the cuda-tile range.
    """
    h = hashlib.sha256()
    h.update(ir.source.text.encode())
    h.update(repr(ir.signature).encode())
    h.update(repr(ir.hints).encode())
    h.update(render_ir(ir).encode())
    h.update(f"{__version__}|{arch}".encode())
    return "tile-" + h.hexdigest()


def compile_cubin(ir: TileIR, arch: str) -> CompiledTile:
    """Bytecode and cubin for `arch`, from the disk cache when the same kernel was built before."""
    key = cache_key(ir, arch)
    hit = cache.load(key)
    if isinstance(hit, CompiledTile):
        return hit
    from ..backends import tileir
    from .lower_tileir import lower_to_bytecode

    bytecode = lower_to_bytecode(ir, tileir.bytecode_version(), arch)
    _dump_bytes("tileir", ir.name, bytecode, lambda: tileir.disassemble(bytecode))
    cubin = tileir.compile_cubin(bytecode, arch)
    ct = CompiledTile(ir.name, arch, ir.signature, bytecode, cubin)
    cache.store(key, ct)
    return ct


def render_tileir(ir: TileIR, arch: str = "sm_90") -> str:
    from ..backends import tileir
    from .lower_tileir import lower_to_bytecode

    return tileir.disassemble(lower_to_bytecode(ir, tileir.bytecode_version(), arch))


def render_stage(ir: TileIR, stage: str, arch: str = "sm_90") -> str:
    if stage == "ir":
        return render_ir(ir)
    if stage == "tileir":
        return render_tileir(ir, arch)
    raise CompileError(
        f"unknown stage {stage!r} for a Tile kernel",
        help='Tile kernels have the stages "ir" and "tileir"',
    )


def _dump(stage: str, name: str, text: str) -> None:
    if stage not in config.dump_stages():
        return
    out = config.dump_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.tile.{stage}").write_text(text)


def _dump_bytes(stage: str, name: str, data: bytes, text: Callable[[], str]) -> None:
    if stage not in config.dump_stages():
        return
    out = config.dump_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.tileirbc").write_bytes(data)
    (out / f"{name}.{stage}").write_text(text())
