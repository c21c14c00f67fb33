"""Which implementations this machine has, each probed once, and why a missing one is missing.

Every accessor returns what the cases need (a kernels module, a compiled CUDA module, the
examples of a track) or raises `Skip` with the reason in words; the reason becomes the
skipped record, so a peer missing here is reported, never silently dropped.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .model import Skip

# src/fearless_bench/peers.py -> the checkout's root, where examples/ lives.
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def load_example(name: str) -> ModuleType:
    """examples/<name>.py as a module (imported once), or Skip saying why not."""
    path = EXAMPLES / f"{name}.py"
    if not path.is_file():
        raise Skip(f"{path.relative_to(REPO_ROOT)} does not exist in this checkout")
    mod_name = f"_fearless_bench_examples_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise Skip(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        raise Skip(f"importing examples/{name}.py failed: {type(exc).__name__}: {exc}") from exc
    return module


def _require(module: str, missing: str) -> None:
    """Skip with the reason `missing` unless `module` is installed."""
    if importlib.util.find_spec(module) is None:
        raise Skip(missing)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


class Peers:
    """Lazily probed implementations; `arch` is the GPU's ("sm_90")."""

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self._found: dict[str, Any] = {}
        self._missing: dict[str, str] = {}

    def _get(self, key: str, probe: Callable[[], Any]) -> Any:
        if key in self._found:
            return self._found[key]
        if key in self._missing:
            raise Skip(self._missing[key])
        try:
            value = probe()
        except Skip as exc:
            self._missing[key] = str(exc)
            raise
        except Exception as exc:
            self._missing[key] = _first_line(exc)
            raise Skip(self._missing[key]) from exc
        self._found[key] = value
        return value

    def _module(self, key: str, probe: Callable[[], ModuleType]) -> ModuleType:
        """`_get` for a probe that yields a module."""
        module: ModuleType = self._get(key, probe)
        return module

    def summary(self) -> dict[str, str]:
        """Every peer probed so far: "available" or the reason it is not."""
        out = {k: "available" for k in self._found}
        out.update(self._missing)
        return dict(sorted(out.items()))

    # ----------------------------------------------------------------------------- peers

    def triton(self) -> ModuleType:
        def probe() -> ModuleType:
            _require("triton", "triton is not installed")
            from . import kernels_triton

            return kernels_triton

        return self._module("triton", probe)

    def cutile(self) -> ModuleType:
        def probe() -> ModuleType:
            _require("cuda.tile", "cuTile Python (the cuda-tile wheel) is not installed")
            try:
                from cuda.tile._compile import _find_compiler_bin

                _find_compiler_bin()
            except ImportError:
                pass  # a cuda-tile without this helper: let its first compile say
            except Exception as exc:
                raise Skip(f"cuda.tile is installed but its compiler is not: {exc}") from exc
            from . import kernels_cutile

            return kernels_cutile

        return self._module("cutile", probe)

    def tilegym(self) -> ModuleType:
        def probe() -> ModuleType:
            _require("tilegym", "TileGym is not installed")
            tilegym = importlib.import_module("tilegym")
            tilegym.set_backend("cutile")
            return tilegym

        return self._module("tilegym", probe)

    def cuda_cpp(self) -> Any:
        """The CUDA C++ kernels compiled by NVRTC and loaded (a kernels_cuda.CudaModule)."""

        def probe() -> Any:
            from . import kernels_cuda

            return kernels_cuda.load(self.arch)

        return self._get("cuda-cpp (NVRTC)", probe)

    def fearless_gpu(self) -> None:
        def probe() -> bool:
            from fearless.runtime.target import cuda_status

            usable, reason = cuda_status()
            if not usable:
                raise Skip(f"fearless cannot use the GPU: {reason}")
            return True

        self._get("fearless on cuda", probe)

    def simt_examples(self) -> ModuleType:
        return self._module("examples/simt_kernels.py", lambda: load_example("simt_kernels"))

    def tile_examples(self) -> ModuleType:
        """examples/tile_kernels.py, when the Tile track and its examples exist."""

        def probe() -> ModuleType:
            _require(
                "fearless.tile", "the Tile track (fearless.tile) does not exist in this checkout"
            )
            try:
                importlib.import_module("fearless.tile")
            except Exception as exc:
                raise Skip(f"importing fearless.tile failed: {_first_line(exc)}") from exc
            return load_example("tile_kernels")

        return self._module("examples/tile_kernels.py", probe)
