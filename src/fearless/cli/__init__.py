"""The `fearless` command: one module per subcommand, wired together in `main.py`."""

from __future__ import annotations

import importlib


def fearless_version() -> str:
    """The version of the fearless package the command runs from."""
    return str(getattr(importlib.import_module("fearless"), "__version__", "unknown"))
