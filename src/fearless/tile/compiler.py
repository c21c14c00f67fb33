"""The Tile compilation driver: one specialisation -> tile IR (+ passes) -> bytecode -> cubin.

    build_ir         frontend (frontend.py) and the pass pipeline (passes.py)
    compile_cubin    tile IR -> Tile IR bytecode (backends/tileir/lower.py) -> tileiras, cached on disk
    render_stage     the text of "ir" / "tileir" for `inspect`

A specialisation (`Signature`) fixes each parameter's kind and dtype, every Part's tile shape
and every Const's value; the kernel's ABI follows from it (`TileParam.abi`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .. import cache
from ..abi import CompiledTile, Signature, TileParam
from ..backends.cubin_info import never_finishes
from ..backends.stages import Stage, compile_cached, dump, run_stages
from ..errors import CompileError, Location
from ..frontend.source import FunctionSource
from ..frontend.values import PyObj, Weak
from ..ir.core import Function
from ..ir.tile import ops
from ..ir.tile.kernel import TileHints, TileIR
from ..ir.tile.printer import print_function
from ..ir.tile.types import ArrayParamType, TileType
from .frontend import TileLowerer
from .padding_check import padded_reductions
from .passes import run_pipeline
from .persistent import check_walks
from .structs import StructValue
from .tuples import bind


def _param(entry: Any, p: TileParam, loc: Location, weak: list[Any]) -> Any:
    """The body's value of parameter `p`: an entry block argument, or a compile-time value."""
    if p.absent:  # an optional array passed as None: the constant None, named
        return PyObj(None, p.name)
    if p.kind == "const":
        return Weak(p.value)
    assert p.dtype is not None
    if p.kind == "scalar":
        value = entry.add_arg(TileType(p.dtype), loc, p.name)
        if p.weak:
            weak.append(value)
        return value
    return entry.add_arg(
        ArrayParamType(p.dtype, p.ndim, p.tile, p.group, p.kind == "atomic"), loc, p.name
    )


def build_ir(src: FunctionSource, signature: Signature, hints: TileHints | None = None) -> TileIR:
    tree = src.tree
    fn = Function(tree.name, src.loc(tree))
    entry = fn.new_block("entry")
    env: dict[str, Any] = {}
    weak: list[Any] = []  # the `float` / `int` scalars (TileParam.weak)
    args = {a.arg: a for a in tree.args.args}
    for name, bound in bind(list(args), signature):
        loc = src.loc(args[name])
        if isinstance(bound, tuple):  # a tuple parameter (tile/tuples.py): its elements
            env[name] = tuple(_param(entry, p, loc, weak) for p in bound)
        elif isinstance(bound, dict):  # a struct parameter (tile/structs.py): its fields
            fields = {f: _param(entry, p, loc, weak) for f, p in bound.items()}
            env[name] = StructValue(name, fields)
        else:
            env[name] = _param(entry, bound, loc, weak)
    lowerer = TileLowerer(src, fn, env)
    lowerer.weak.update(weak)
    lowerer.lower_body(tree.body)
    lowerer.block.append(ops.Return(src.loc(tree.body[-1])))
    check_walks(fn, lowerer.walks)  # before the passes rewrite the offsets it follows
    run_pipeline(fn)
    ir = TileIR(fn, signature, src.text, hints or TileHints(), tuple(lowerer.unsafe_regions))
    ir.padded_reductions = padded_reductions(ir)  # the certain ones warn now
    dump("ir", lambda: {f"{fn.name}.tile.ir": print_function(fn)})
    return ir


def render_ir(ir: TileIR) -> str:
    return print_function(ir.fn)


def cache_key(ir: TileIR, arch: str) -> str:
    """sha256 of the source, the specialisation, the hints, the tile IR (which covers the
    globals the body resolved), the Tile compiler's own source and the arch.

    The compiler's source stands for the fearless version: a lowering changed within one
    version never reuses an old cubin, and an upgrade that left the Tile compiler alone keeps
    every cubin compiled before it. It needs neither cuda-tile nor tileiras, so cubins
    compiled here load on a GPU machine that has neither (DESIGN section 7): the bytecode is a
    function of the tile IR for one compiler, whose pyproject pins the cuda-tile range (a
    tileiras of another version compiles the same bytecode to a cubin as valid).
    """
    h = hashlib.sha256()
    h.update(ir.source_text.encode())
    h.update(repr(ir.signature).encode())
    h.update(repr(ir.hints).encode())
    h.update(render_ir(ir).encode())
    h.update(compiler_digest().encode())
    h.update(f"|{arch}".encode())
    return "tile-" + h.hexdigest()


def compiler_digest() -> str:
    """sha256 of the Tile compiler's own source: the front end, tile IR, passes and lowering."""
    return cache.source_digest(*cache.TILE_COMPILER)


def compile_cubin(ir: TileIR, arch: str) -> CompiledTile:
    """Bytecode and cubin for `arch`, from the disk cache when the same kernel was built before."""

    def build() -> CompiledTile:
        out = run_stages(tileir_stages(arch), ir, ir.name)
        cache.mark_built("tile")  # later processes skip the warm-up (runtime/warmup.py)
        cubin = out["cubin"]
        return CompiledTile(
            ir.name, arch, ir.signature, out["tileir"], cubin, never_finishes=never_finishes(cubin)
        )

    return compile_cached(cache_key(ir, arch), CompiledTile, build)


def tileir_stages(arch: str) -> list[Stage]:
    """The Tile backend: tile IR -> Tile IR bytecode (NVIDIA's encoders) -> cubin (tileiras)."""
    from ..backends.tileir import cuda_tile as tileir
    from ..backends.tileir.lower import lower_to_bytecode

    return [
        Stage(
            "tileir",
            lambda ir: lower_to_bytecode(ir, tileir.bytecode_version(), arch),
            lambda name, bc: {f"{name}.tileirbc": bc, f"{name}.tileir": tileir.disassemble(bc)},
        ),
        Stage("cubin", lambda bc: tileir.cached_cubin(bc, arch)),
    ]


def render_tileir(ir: TileIR, arch: str = "sm_90") -> str:
    from ..backends.tileir import cuda_tile as tileir
    from ..backends.tileir.lower import lower_to_bytecode

    return tileir.disassemble(lower_to_bytecode(ir, tileir.bytecode_version(), arch))


def render_stage(ir: TileIR, stage: str, arch: str = "sm_90") -> str:
    if stage == "ir":
        header = "".join(
            f"// unsafe: `with tile.unsafe():` at line {r.line} writes a Part at any coordinates "
            "(bounds still checked); this kernel is not proven race-free\n"
            for r in ir.unsafe_regions
        )
        return header + render_ir(ir)
    if stage == "tileir":
        return render_tileir(ir, arch)
    if stage == "resources":  # registers, stack (spills) and shared memory, from the cubin
        from ..backends.cubin_info import describe

        return describe(compile_cubin(ir, arch).cubin, arch)
    if stage == "sass":  # tileiras's machine code, through NVIDIA's disassembler
        from ..backends.sass import disassemble

        return disassemble(compile_cubin(ir, arch).cubin)
    raise CompileError(
        f"unknown stage {stage!r} for a Tile kernel",
        help='Tile kernels have the stages "ir", "tileir", "sass" and "resources"',
    )


def warm() -> None:
    """What a first Tile compile waits for, done now (runtime/warmup.py runs it on a thread when
    the first kernel is defined): cuda-tile's encoders imported (80 ms) and tileiras asked which
    bytecode versions it reads (a process)."""
    from ..backends.tileir import cuda_tile as tileir

    tileir.bytecode_version()
