"""examples/tile_kernels.py, loaded once as the module `tile_kernels`: `ex`, the Tile example
kernels the simulator, compile and stage tests run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tile_kernels.py"


def _examples():
    spec = importlib.util.spec_from_file_location("tile_kernels", EXAMPLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tile_kernels"] = module
    spec.loader.exec_module(module)
    return module


ex = _examples()
