"""A Tile kernel's compiled forms: its tile IR per signature, its cubin per (signature, arch),
the autotuner's compiles started ahead of their launches (tile/compile_ahead.py), and the GPU
modules loaded from the cubins (runtime/tile_gpu.py, filled by tile/prepare.py).

One `Compiles` serves a kernel and the views of its tuple parameters (tile/tuples.py), whose
signatures differ; `Kernel.options(...)` variants have their own (their hints are part of what
compiles). When a global the kernel reads is bound again, `clear()` drops every form at once
(tile/kernel.py `_check_globals`)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from ..abi import CompiledTile, Signature
from ..frontend.source import FunctionSource
from ..ir.tile.kernel import TileHints, TileIR
from ..runtime import warmup
from .compiler import build_ir, compile_cubin, render_stage, warm

CubinKey = tuple[Signature, str]  # (signature, arch)


class Compiles:
    """The compiled forms of one kernel under one set of tileiras hints."""

    def __init__(self, hints: TileHints) -> None:
        self.hints = hints
        self.ir: dict[Signature, TileIR] = {}
        self.cubins: dict[CubinKey, CompiledTile] = {}
        self.ahead: dict[CubinKey, Future[CompiledTile]] = {}
        self.gpu: dict[CubinKey, Any] = {}
        warmup.start("tile", warm)  # the toolchain's first use, while the program goes on

    def clear(self) -> None:
        """Drop every compiled form (a global the kernel reads was bound again)."""
        self.ir.clear()
        self.cubins.clear()
        self.ahead.clear()
        self.gpu.clear()

    def ir_for(self, src: FunctionSource, signature: Signature) -> TileIR:
        """The tile IR of `signature`, built at its first use."""
        ir = self.ir.get(signature)
        if ir is None:
            ir = self.ir[signature] = build_ir(src, signature, self.hints)
        return ir

    def cubin(self, src: FunctionSource, signature: Signature, arch: str) -> CompiledTile:
        """The cubin of `signature` for `arch`: compiled here, or the compile started ahead,
        waited for."""
        key = (signature, arch)
        ct = self.cubins.get(key)
        if ct is None:
            pending = self.ahead.pop(key, None)
            if pending is not None:
                ct = pending.result()
            else:
                ct = compile_cubin(self.ir_for(src, signature), arch)
            self.cubins[key] = ct
        return ct

    def stage(self, src: FunctionSource, signature: Signature, stage: str, arch: str) -> str:
        """The text of a compile stage of `signature` (tile/compiler.py `render_stage`)."""
        return render_stage(self.ir_for(src, signature), stage, arch)
