"""Registering fearless.ops with torch, once, when torch is there.

`register()` imports ops/torch_ops.py, which defines every operator as
`torch.ops.fearless.<name>` (torch.library custom ops, with fake kernels and autograd), and
ops/torch_ops_attention.py and ops/torch_ops_tilegym.py, which add the operators of DESIGN 2c
(the attention family; the others) on its helpers. It runs
when fearless.ops is imported after torch, or, when torch comes second, right after torch's
own import finishes (a one-shot finder on `sys.meta_path` wraps torch's loader), so
`torch.ops.fearless` is there whatever the order of the imports. fearless never imports torch
itself: that takes seconds. torch older than 2.4 has no `torch.library.custom_op`: there the
operators run only eagerly, and refuse inputs that require grad.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import threading
import warnings
from typing import Any

from ._route import disable_untraceable, set_registrar

_lock = threading.Lock()
_done = False
_ops: Any = None


def register() -> Any:
    """Register the operators with torch (idempotent); their eager forms (ops/torch_eager.py:
    `torch.ops.fearless` where torch must see the call), or None where this torch has no
    `torch.library.custom_op`."""
    global _done, _ops
    if _done:
        return _ops
    with _lock:
        if not _done:
            import torch

            disable_untraceable(torch)
            if hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd"):
                from . import (  # noqa: F401  (they register on import)
                    torch_ops,
                    torch_ops_attention,
                    torch_ops_tilegym,
                )
                from .torch_eager import EAGER

                _ops = EAGER
            _done = True
    return _ops


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Registers the operators once torch's import completes (then leaves sys.meta_path)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            try:
                register()
            except Exception as exc:  # torch itself imported fine: never break that
                warnings.warn(
                    f"fearless.ops could not register its torch operators: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

        loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


set_registrar(register)
if "torch" in sys.modules:
    register()
elif not any(isinstance(f, _AfterTorch) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterTorch())
