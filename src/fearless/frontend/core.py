"""The frontend core both tracks lower Python with: what does not depend on a track's types.

Each track's lowerer (simt/lower.py, tile/frontend.py) walks the AST with its own type rules
and intrinsic table; the pieces here are shared so that the two agree.
"""

from __future__ import annotations

import ast


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a statement list may assign (loop-carried candidates), in source order."""
    out: dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out[node.id] = None
    return list(out)
