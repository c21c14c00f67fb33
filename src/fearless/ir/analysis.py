"""CFG analyses used by passes, the verifier and the backends: dominators, cyclic blocks."""

from __future__ import annotations

from .core import Block, Function


def dominators(fn: Function) -> dict[Block, set[Block]]:
    """For each reachable block, the set of blocks dominating it (itself included).

    The classic iterative data-flow formulation over reverse postorder; kernels are small,
    so the simplicity is worth more than Lengauer-Tarjan's speed.
    """
    order = fn.reverse_postorder()
    preds = fn.predecessors()
    all_blocks = set(order)
    dom: dict[Block, set[Block]] = {b: set(all_blocks) for b in order}
    dom[fn.entry] = {fn.entry}
    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            ps = [p for p in preds[b] if p in all_blocks]
            new = set.intersection(*(dom[p] for p in ps)) if ps else set()
            new = new | {b}
            if new != dom[b]:
                dom[b] = new
                changed = True
    return dom


def cyclic_blocks(fn: Function) -> set[Block]:
    """The blocks on a cycle of the CFG: those a thread can run again (a loop's blocks)."""
    cyclic: set[Block] = set()
    for start in fn.blocks:
        seen: set[Block] = set()
        stack = list(start.successors())
        while stack:
            b = stack.pop()
            if b is start:
                cyclic.add(start)
                break
            if b not in seen:
                seen.add(b)
                stack.extend(b.successors())
    return cyclic
