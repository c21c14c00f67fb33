"""SIMT loops: `while`, `for i in range(...)`, `break` and `continue`, lowered to a CFG.

A loop gets a header block whose arguments are the induction variable and the variables the
body assigns that exist before it; each `continue` (and the end of the body) branches back to
the header with their new values, and the exit joins the header's "done" edge with every
`break`. A carried variable whose header type was guessed from a literal makes the loop be
lowered again (`Lowerer.lower_retrying`).
"""

from __future__ import annotations

import ast

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.core import unsupported
from ..frontend.loops import Token, assigned_names
from ..frontend.values import PyObj, Undefined, Weak
from ..ir.core import BLOCK_INDEX, ThreadIndexType, Value
from ..ir.simt import ops
from ..ir.simt.ranges import MAX_LENGTH, value_bounds
from .coords import block_thread_count, thread_count
from .emitter import value_type
from .intrinsics import claim_index, stride_loop_help, thread_index
from .ssa import LoopFrame, SsaLowerer, no_witness_2d_merge
from .types import thread


class LoopLowerer(SsaLowerer):
    """The loop statements of the SIMT lowerer."""

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise unsupported("`while ... else`", self.loc(node))
        self.lower_retrying(node, lambda token: self._lower_loop_once(node, token))

    def lower_for(self, node: ast.For, target: str, bounds: list[ast.expr]) -> None:
        self.lower_retrying(node, lambda token: self._lower_loop_once(node, token))

    def lower_for_iter(self, node: ast.For, target: str) -> bool:
        """`for i in simt.thread.grid_stride(n)`: a loop whose counter is a ThreadIndex;
        `for i in simt.thread.block_stride(n)`: one whose counter is a BlockIndex (the column),
        with `i` the pair (block, column)."""
        it = node.iter
        if not isinstance(it, ast.Call):
            return False
        func = self.expr(it.func)
        if not (isinstance(func, PyObj) and func.obj in (thread.grid_stride, thread.block_stride)):
            return False
        name = func.obj.__name__
        if len(it.args) != 1 or it.keywords:
            raise CompileError(
                f"simt.thread.{name}() takes one positional argument, the stop",
                self.loc(it),
                code="E0061",
                help=stride_loop_help(name),
            )
        self.lower_retrying(node, lambda token: self._lower_loop_once(node, token))
        return True

    def stmt_Break(self, node: ast.Break) -> None:
        assert self.em.block is not None
        self.loops[-1].breaks.append((self.em.block, dict(self.env)))
        self.em.block = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        assert self.em.block is not None
        self.loops[-1].continues.append((self.em.block, dict(self.env)))
        self.em.block = None

    def _lower_loop_once(self, node: ast.While | ast.For, token: Token) -> None:
        fn, em = self.ctx.fn, self.em
        loc = self.loc(node)
        induction: tuple[Value, Value, Weak | Value] | None = None  # (start, stop, step)
        target = (
            node.target.id
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name)
            else None
        )
        if isinstance(node, ast.For):
            assert isinstance(node.iter, ast.Call)
            induction = (
                self._range_bounds(node.iter)
                if isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"
                else self._stride_bounds(node.iter)
            )
        carried = [
            n
            for n in assigned_names(node.body)
            if n != target and isinstance(self.env.get(n), Value | Weak)
        ]
        header = fn.new_block("for.header" if target else "while.header")
        inits: list[Value] = []
        if induction is not None:
            k = header.add_arg(induction[0].type, loc, target or "")
            inits.append(induction[0])
        for name in carried:
            init = self.env[name]
            assert isinstance(init, Value | Weak)
            hint = self.loop_types.hint(token, name)
            t = hint or value_type(init)
            no_witness_2d_merge(t, name, loc)
            init_v = self.coerce(init, t, name, loc)
            arg = header.add_arg(t, loc, name)
            if (isinstance(init, Weak) or em.is_weak(init)) and hint is None:
                self.loop_types.guessed(arg, token, name)
                if em.is_weak(init):  # `acc = lo` then `acc = acc + x[i]`: like a literal
                    em.weak.add(arg)
            else:
                self.loop_types.inherit(arg, init)
            inits.append(init_v)
            self.env[name] = arg
        em.emit(ops.Br(header, inits, loc))
        em.block = header
        header_env = dict(self.env)
        body, exit_pre = fn.new_block("loop.body"), fn.new_block("loop.exit")
        if induction is not None:
            assert target is not None
            cond = self._range_cond(k, induction[1], induction[2], loc)
        else:
            c = self.condition(node.test)  # type: ignore[union-attr]
            cond = c if isinstance(c, Value) else em.const(c.value, dtypes.bool_, loc)
        em.emit(ops.CondBr(cond, body, [], exit_pre, [], loc))
        frame = LoopFrame()
        self.loops.append(frame)
        em.block = body
        if target is not None:
            block_row = k.type == BLOCK_INDEX  # `block_stride`: the pair (block, column)
            self.env[target] = em.emit(ops.BlockRowIndex(k, loc)).result if block_row else k
        self.lower_body(node.body)
        self.loops.pop()
        if em.block is not None:
            frame.continues.append((em.block, self.env))
        for block, env in frame.continues:
            em.block = block
            args: list[Value] = []
            more: Value | None = None
            if induction is not None and isinstance(k.type, ThreadIndexType):
                assert isinstance(induction[2], Value)
                args.append(em.emit(ops.IndexAdvance(k, induction[2], loc)).result)
            elif induction is not None:
                step = em.as_value(induction[2], loc, k.dtype)
                # Python's trip count: the next value is taken only where it does not pass the
                # stop, so the counter never wraps (`nowrap`, which bounds_elim trusts)
                nxt = ops.Binary("add", k, step, loc, nowrap=True)
                args.append(em.emit(nxt).result)
                more = self._range_more(k, induction[1], induction[2], loc)
            for arg, name in zip(header.args[len(args) :], carried, strict=True):
                args.append(self.coerce(env.get(name), arg.type, name, loc, header_arg=arg))
            if more is None:
                em.emit(ops.Br(header, args, loc))
            else:  # the last step of a loop whose next value could wrap leaves it here
                last = fn.new_block("loop.last")
                em.emit(ops.CondBr(more, header, args, last, [], loc))
                frame.breaks.append((last, dict(env)))
        after_env = dict(header_env)
        if target is not None:
            after_env[target] = Undefined(target, loc)
        for _, env in frame.breaks:
            if target is not None:
                env[target] = Undefined(target, loc)
        self.env = self.merge([(exit_pre, after_env), *frame.breaks], loc, label="loop.end")

    def _range_bounds(self, call: ast.Call) -> tuple[Value, Value, Weak | Value]:
        em = self.em
        loc = self.loc(call)
        raw = [em.scalar(self.expr(a), self.loc(a), "range() argument") for a in call.args]
        if len(raw) == 1:
            raw = [Weak(0), raw[0]]
        if len(raw) == 2:
            raw.append(Weak(1))
        strong = sorted((r for r in raw if isinstance(r, Value)), key=em.is_weak)
        dt = strong[0].dtype if strong else dtypes.i64
        for r in raw:
            if isinstance(r, Value) and r.dtype != dt:
                em.unify(strong[0], r, loc, "range()")
            if (isinstance(r, Value) and not r.dtype.is_int) or (
                isinstance(r, Weak) and not isinstance(r.value, int)
            ):
                raise KernelTypeError(
                    "range() needs integer arguments",
                    loc,
                    help="convert with `int(x)` or a dtype such as `fl.i32(x)`",
                )
        step = raw[2]
        if isinstance(step, Weak) and step.value == 0:
            raise CompileError("range() step must not be zero", self.loc(call.args[2]))
        start = em.as_value(raw[0], loc, dt)
        stop = em.as_value(raw[1], loc, dt)
        return start, stop, step if isinstance(step, Weak) else em.as_value(step, loc, dt)

    def _stride_bounds(self, call: ast.Call) -> tuple[Value, Value, Value]:
        """`grid_stride(n)`: (this thread's ThreadIndex, n as i64, the launch's thread count);
        `block_stride(n)`: (its BlockIndex, n as i64, the block's thread count)."""
        em = self.em
        loc = self.loc(call)
        func = self.expr(call.func)
        grid = isinstance(func, PyObj) and func.obj == thread.grid_stride
        name = "grid_stride" if grid else "block_stride"
        stop = em.scalar(self.expr(call.args[0]), self.loc(call.args[0]), f"{name}() stop")
        if (isinstance(stop, Value) and not stop.dtype.is_int) or (
            isinstance(stop, Weak) and type(stop.value) is not int
        ):
            raise KernelTypeError(
                f"simt.thread.{name}() needs an integer stop",
                self.loc(call.args[0]),
                help="convert with `int(x)`",
            )
        stop_v = em.cast(em.as_value(stop, loc, dtypes.i64), dtypes.i64, loc)
        if value_bounds(stop_v)[1] > MAX_LENGTH:  # no counter passes 2^62 + a stride: no wrap
            limit = em.const(MAX_LENGTH, dtypes.i64, loc)
            stop_v = em.emit(ops.Binary("min", stop_v, limit, loc)).result
        if grid:
            return thread_index(self, "index_1d", loc), stop_v, thread_count(em, loc)
        claim_index(self, "block_stride", loc)
        start = em.emit(ops.BlockIndex1D(loc)).result
        return start, stop_v, block_thread_count(em, loc)

    def _range_cond(self, k: Value, stop: Value, step: Weak | Value, loc: Location) -> Value:
        em = self.em
        if isinstance(k.type, ThreadIndexType):  # a grid-stride counter
            return em.emit(ops.Compare("lt", em.index_int(k, loc), stop, loc)).result
        if isinstance(step, Weak):
            pred = "lt" if step.value > 0 else "gt"
            return em.emit(ops.Compare(pred, k, stop, loc)).result
        # a run-time step of 0 runs no iteration (Python raises ValueError)
        zero = em.const(0, k.dtype, loc)
        up = em.emit(ops.Compare("gt", step, zero, loc)).result
        down = em.emit(ops.Compare("lt", step, zero, loc)).result
        lt = em.emit(ops.Compare("lt", k, stop, loc)).result
        gt = em.emit(ops.Compare("gt", k, stop, loc)).result
        gt_down = em.emit(ops.Binary("and", down, gt, loc)).result
        return em.emit(ops.Select(up, lt, gt_down, loc)).result

    def _range_more(self, k: Value, stop: Value, step: Weak | Value, loc: Location) -> Value | None:
        """On a `range` loop's continue edge (where `k` is before `stop`): whether `k + step`
        is still before `stop`, computed without wrapping (the distance to the stop, unsigned,
        against the step's size); None where the dtype's range proves that `k + step` cannot
        wrap, so that the header's test alone decides (a constant `range` stays one compare)."""
        em = self.em
        dt = k.dtype
        udt = dtypes.by_name(f"u{dt.bits}")
        if isinstance(step, Weak):
            s = int(step.value)
            lo, hi = dtypes.int_range(dt)
            s_lo, s_hi = value_bounds(stop)
            if (s > 0 and s_hi - 1 + s <= hi) or (s < 0 and s_lo + 1 + s >= lo):
                return None
            far, near = (stop, k) if s > 0 else (k, stop)
            gap = em.emit(ops.Binary("sub", far, near, loc)).result
            size = em.const(abs(s), udt, loc)
            return em.emit(ops.Compare("gt", em.cast(gap, udt, loc), size, loc)).result
        up = em.emit(ops.Compare("gt", step, em.const(0, dt, loc), loc)).result
        ahead_up = em.emit(ops.Binary("sub", stop, k, loc)).result
        ahead_down = em.emit(ops.Binary("sub", k, stop, loc)).result
        gap = em.emit(ops.Select(up, ahead_up, ahead_down, loc)).result
        neg = em.emit(ops.Binary("sub", em.const(0, dt, loc), step, loc)).result
        size = em.emit(ops.Select(up, step, neg, loc)).result
        u_gap, u_size = em.cast(gap, udt, loc), em.cast(size, udt, loc)
        return em.emit(ops.Compare("gt", u_gap, u_size, loc)).result
