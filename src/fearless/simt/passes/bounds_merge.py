"""Merge the bounds checks of a block into groups: one branch per group on the device.

    check.bounds {sites=(0,)} %i, %na        check.bounds {sites=(0, 1)} %i, %na, %i, %nb
    %x = load %a, %i                   ->    %x = load %a, %i
    check.bounds {sites=(1,)} %i, %nb        %y = load %b, %i
    %y = load %b, %i

A later check joins the group of an earlier one when nothing between them writes memory and
its operands can be computed before the group: the ops they depend on in this block are pure
and depend on no load after the group's start (a gather's `src[idx[i]]` check needs the load
of `idx[i]`, so it starts a group of its own). Those ops move up, before the group.

Behaviour is unchanged: a failing thread stops before any of the group's loads, and the loads
it skips have no effect; stores are never crossed; the error reported is the first failing
check in program order (ops.BoundsCheck), as before the merge.
"""

from __future__ import annotations

from ...ir.core import Block, Effect, Function, Op
from ...ir.simt import ops
from .options import PassOptions


def run(fn: Function, options: PassOptions) -> None:
    for block in fn.blocks:
        _merge_block(block)


def _merge_block(block: Block) -> None:
    body = list(block.ops)
    i = 0
    while i < len(body):
        head = body[i]
        if not isinstance(head, ops.BoundsCheck):
            i += 1
            continue
        members: list[ops.BoundsCheck] = [head]
        j = i + 1
        while j < len(body):
            op = body[j]
            if op.effect in (Effect.WRITE, Effect.CONTROL):
                break
            if isinstance(op, ops.BoundsCheck):
                deps = _local_deps(op, body, i, j)
                if deps is None:
                    break
                # Hoist the check's pure inputs above the group, keeping their order.
                for d in deps:
                    body.remove(d)
                for k, d in enumerate(deps):
                    body.insert(i + k, d)
                i += len(deps)
                body.remove(op)
                members.append(op)
                continue  # body[j] is now the op after the merged check
            j += 1
        if len(members) > 1:
            group = ops.BoundsCheck.group(members, head.loc)
            group.block = block
            body[i] = group
        i += 1
    block.ops = body


def _local_deps(check: Op, body: list[Op], start: int, end: int) -> list[Op] | None:
    """The ops in body[start:end] that `check` depends on, in order; None if one is not pure."""
    window = {id(op): op for op in body[start:end]}
    needed: dict[int, Op] = {}
    stack = [v.owner for v in check.operands]
    while stack:
        owner = stack.pop()
        if not isinstance(owner, Op) or id(owner) not in window or id(owner) in needed:
            continue
        if owner.effect is not Effect.PURE:
            return None
        needed[id(owner)] = owner
        stack.extend(v.owner for v in owner.operands)
    return [op for op in body[start:end] if id(op) in needed]
