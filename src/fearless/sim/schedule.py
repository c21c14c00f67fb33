"""The order in which the SIMT simulator prefers to run blocks: loops before their exits.

The simulator runs, at each step, the waiting block that comes first in this order (see
`simt.py`). Any reverse postorder makes lanes split by an `if` meet again at the join, since
a join comes after both arms. Loops need more: in a plain reverse postorder a loop's exit may
come before part of its body

    ^h: cond_br %c, ^body, ^exit       DFS visits ^body first, so ^exit precedes ^body
    ^body: ... br ^h

and then every iteration in which some lane leaves runs `^exit` and all that follows it for
those few lanes. Here the depth-first search takes, at each block, the successors that lie in
fewer loops first, so they finish first and come *after* the loop in the reverse postorder:
lanes that leave a loop wait at its exit until the last lane leaves. The result is still a
reverse postorder (a topological order of the CFG without its back edges).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..ir.analysis import dominators
from ..ir.core import Block, Function


def loop_depths(fn: Function) -> dict[Block, int]:
    """How many natural loops contain each reachable block (back edges by dominance)."""
    order = fn.reverse_postorder()
    reachable = set(order)
    doms = dominators(fn)
    preds = fn.predecessors()
    loops: dict[Block, set[Block]] = {}
    for b in order:
        for header in b.successors():
            if header in doms[b]:  # b -> header is a back edge
                body = loops.setdefault(header, {header})
                work = [b]
                while work:
                    x = work.pop()
                    if x not in body:
                        body.add(x)
                        work.extend(p for p in preds[x] if p in reachable)
    return {b: sum(b in body for body in loops.values()) for b in order}


def schedule_order(fn: Function) -> list[Block]:
    """Reachable blocks in a reverse postorder that puts each loop before its exits."""
    depth = loop_depths(fn)

    def successors(b: Block) -> Iterator[Block]:
        return iter(sorted(b.successors(), key=lambda s: depth[s]))  # stable: shallower first

    post: list[Block] = []
    seen = {fn.entry}
    stack = [(fn.entry, successors(fn.entry))]
    while stack:  # iterative DFS, as Function.reverse_postorder
        node, it = stack[-1]
        for s in it:
            if s not in seen:
                seen.add(s)
                stack.append((s, successors(s)))
                break
        else:
            stack.pop()
            post.append(node)
    post.reverse()
    return post
