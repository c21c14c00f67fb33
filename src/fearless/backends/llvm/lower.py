"""SIMT IR -> LLVM IR: one visitor over a kernel's blocks and ops, building an llvmlite module.

The kernel follows the ABI of `abi.py`. For `vecadd(a: Slice[f32], b: Slice[f32],
c: DisjointSlice[f32])` with `block=(256, 1, 1)`:

    define ptx_kernel void @vecadd(
        ptr addrspace(1) noalias readonly captures(none) %a, i64 %a.len,
        ptr addrspace(1) noalias readonly captures(none) %b, i64 %b.len,
        ptr addrspace(1) noalias captures(none) %c, i64 %c.len,
        ptr addrspace(1) noalias %err) "nvvm.reqntid"="256,1,1"

A 2-D array `x: Slice[f32, 2]` comes as `ptr %x, i64 %x.shape0, i64 %x.shape1` and `x[r, c]`
addresses element r * shape1 + c. `noalias` is what the launch-time borrow check proves; `readonly` plus `!invariant.load` on a
Slice's loads gives `ld.global.nc`. Scalars come by value (bool as i8). IR block arguments
become phis; `check.bounds` becomes an unsigned compare and a branch to a cold block that calls
`__fearless_report_oob` (`support.py`) and returns. Scalar arithmetic is in
`arith.py`; target machine, libdevice and PTX emission are in `ptx.py`. Each op goes to the
handler of its class in `registry.lowers`: a method below or a function of a family module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from ... import dtypes
from ...abi import LaunchContract, ParamSpec
from ...dtypes import DType
from ...errors import InternalError
from ...ir.core import ArrayType, Block, Function, Op, ScalarType, Value
from ...ir.simt import ops

# Each op family module registers its handlers with `lowers` when imported; importing every
# one here makes `lowers` complete wherever this module is.
from . import atomics as llvm_atomics  # noqa: F401
from . import chunks as llvm_chunks
from . import collectives as llvm_collectives  # noqa: F401
from . import const as llvm_const  # noqa: F401
from . import coords as llvm_coords  # noqa: F401
from . import grid as llvm_grid
from . import loops as llvm_loops
from . import print as llvm_print  # noqa: F401
from . import shared as llvm_shared  # noqa: F401
from .arith import ScalarEmitter
from .registry import lowers
from .support import ModuleSupport
from .types import (
    GLOBAL_PTR,
    I1,
    I8,
    I32,
    I64,
    VOID,
    KernelAttributes,
    ParamAttributes,
    check_param,
    constant,
    memory_type,
    value_type,
)

TRIPLE = "nvptx64-nvidia-cuda"

# Module flags read by NVVMReflect when it folds libdevice's `__nvvm_reflect` queries.
# 4 = "override" (clang's choice). FTZ 0 keeps IEEE subnormals. LLVM 22 ignores the prec-sqrt
# flag (newer NVVMReflect reads it, as clang emits it); `ptx.py` also passes
# `-nvvm-reflect-add=__CUDA_PREC_SQRT=1`, which LLVM 22 does honour.
MODULE_FLAGS = (("nvvm-reflect-ftz", 0), ("nvvm-reflect-prec-sqrt", 1))


@dataclass(frozen=True)
class _Array:
    """A lowered array parameter: its element pointer, extent per axis and read-only-ness."""

    ptr: ir.Value
    extents: tuple[ir.Value, ...]
    readonly: bool


def lower_function(
    fn: Function,
    params: Sequence[ParamSpec],
    contract: LaunchContract,
    entry: str,
    coarse_entry: str | None = None,
) -> ir.Module:
    """The LLVM module of kernel `fn`, exported as `entry`, with the parameters `params`.

    `fn.params` (the entry block's arguments) correspond one to one, in order, to `params`.
    The module declares the libdevice functions it calls; `compile_ptx` links them.
    With `coarse_entry`, the module also exports the thread-coarsened kernel (`coarsenable`).
    """
    plain = _KernelLowering(fn, params, contract, entry)
    plain.run()
    if coarse_entry is not None:
        coarse = _KernelLowering(fn, params, contract, coarse_entry, plain.support, COARSEN)
        coarse.run()
    return plain.module


def lower_variants(
    variants: Sequence[tuple[Function, str, str | None]],
    params: Sequence[ParamSpec],
    contract: LaunchContract,
) -> ir.Module:
    """One module exporting several compiled variants of a kernel (same parameters).

    Each variant is (IR function, entry name, coarsened entry name or None).
    """
    support: ModuleSupport | None = None
    for fn, entry, coarse_entry in variants:
        plain = _KernelLowering(fn, params, contract, entry, support)
        plain.run()
        support = plain.support
        if coarse_entry is not None:
            _KernelLowering(fn, params, contract, coarse_entry, support, COARSEN).run()
    assert support is not None
    return support.module


# Logical threads per physical thread in the coarsened kernel (measured on the H200 with CUDA
# C++: vecadd 2^28 one element per thread 3479 GB/s, four logical threads in sequence strided by
# the grid 4328 GB/s, float4 loads 4355 GB/s).
COARSEN = 4


# Ops that tell the threads of a block apart or make them cooperate.
_NOT_COARSENABLE = (
    ops.SpecialReg,
    ops.BlockId,
    ops.ThreadIndex2D,
    ops.BlockIndex1D,
    ops.BlockIndex2D,
    ops.BlockRowIndex,
    ops.BlockTileRow,
    ops.TileRow,
    ops.SharedAlloc,
    ops.LocalAlloc,
    *ops.COLLECTIVES,
    ops.GridSync,  # every block must run to each sync: one thread each
)


def coarsenable(fn: Function) -> bool:
    """Whether `fn` can run several logical threads per physical thread.

    Its only notion of position must be `thread.index_1d` (no special registers, no
    `thread.index_2d`, whose row comes from the y registers), so that logical thread
    i = p + k * S (p the physical index, S the physical thread count) is all a copy of the
    body needs; logical threads are independent (no shared memory or barriers). Atomics need
    nothing: each logical thread performs its own, as it would as a physical thread.
    """
    return not any(isinstance(op, _NOT_COARSENABLE) for op in fn.ops())


class _KernelLowering:
    def __init__(
        self,
        fn: Function,
        params: Sequence[ParamSpec],
        contract: LaunchContract,
        entry: str,
        support: ModuleSupport | None = None,
        coarsen: int = 1,
    ) -> None:
        self.fn = fn
        self.specs = list(params)
        self.contract = contract
        self.coarsen = coarsen
        if support is None:  # the first kernel of a new module
            module = ir.Module(name=fn.name)
            module.triple = TRIPLE
            for flag, setting in MODULE_FLAGS:
                module.add_named_metadata(
                    "llvm.module.flags", [ir.Constant(I32, 4), flag, ir.Constant(I32, setting)]
                )
            support = ModuleSupport(module, contract.block)
        self.support = support
        self.module = support.module
        self.cooperative = ops.is_cooperative(fn)
        self.kernel = self._declare_kernel(entry)
        hidden = self.kernel.args[-3:] if self.cooperative else [*self.kernel.args[-2:], None]
        self.logical_threads, self.err, self.grid_barrier = hidden
        # Where a thread goes when it returns or fails a check: `ret`, or in the coarsened
        # kernel the guard of the next logical thread. Set per copy of the body.
        self.exit: ir.Block | None = None
        self.logical_index: ir.Value | None = None
        self.builder = ir.IRBuilder()
        self.scalar = ScalarEmitter(self.builder, self.support)
        self.values: dict[Value, ir.Value] = {}
        self.arrays: dict[Value, _Array] = {}
        self.index_2d: dict[Value, tuple[ir.Value, ir.Value]] = {}  # ThreadIndex2D: (row, col)
        self.blocks: dict[Block, ir.Block] = {}
        self.chunk_pending: list[ops.Load | ops.Store] = []  # a chunk copy's lanes before 0
        self.loops = llvm_loops.Loops(fn, self.module)

    # ------------------------------------------------------------------------- signature

    def _declare_kernel(self, entry: str) -> ir.Function:
        if len(self.specs) != len(self.fn.params):
            raise InternalError(
                f"@{self.fn.name} has {len(self.fn.params)} parameters, ABI has {len(self.specs)}"
            )
        arg_types: list[ir.Type] = []
        for spec, value in zip(self.specs, self.fn.params, strict=True):
            check_param(spec, value)
            if spec.is_array:
                arg_types += [GLOBAL_PTR] + [I64] * spec.ndim  # pointer, extent per axis
            else:
                arg_types.append(memory_type(spec.dtype))
        arg_types.append(I64)  # the launch's logical thread count (the coarsened kernel's bound)
        arg_types.append(GLOBAL_PTR)  # the device error record
        arg_types += [GLOBAL_PTR] if self.cooperative else []  # the grid barrier (grid.py)
        kernel = ir.Function(self.module, ir.FunctionType(VOID, arg_types), entry)
        kernel.calling_convention = "ptx_kernel"
        kernel.attributes = KernelAttributes.of_contract(self.contract)
        return kernel

    def _bind_params(self) -> None:
        args = iter(self.kernel.args)
        for spec, value in zip(self.specs, self.fn.params, strict=True):
            arg = next(args)
            arg.name = spec.name
            arg.attributes = ParamAttributes()
            if spec.is_array:
                extents = tuple(next(args) for _ in range(spec.ndim))
                if spec.ndim == 1:
                    extents[0].name = f"{spec.name}.len"
                else:
                    for axis, extent in enumerate(extents):
                        extent.name = f"{spec.name}.shape{axis}"
                readonly = not spec.is_output
                # The borrow check proved that no other argument overlaps an array (other
                # threads' writes between grid syncs: grid.array_attributes).
                attrs = llvm_grid.array_attributes(self.cooperative and not readonly)
                for attr in (*attrs, "readonly") if readonly else attrs:
                    arg.attributes.add(attr)
                arg.attributes.align = spec.dtype.itemsize
                self.arrays[value] = _Array(arg, extents, readonly)
            elif spec.dtype.is_bool:
                self.values[value] = self.builder.icmp_unsigned("!=", arg, ir.Constant(I8, 0))
            else:
                self.values[value] = arg
        self.logical_threads.name = "logical_threads"
        self.err.name = "err"
        self.err.attributes = ParamAttributes()
        if self.grid_barrier is None:  # (a grid sync polls the record's flag: grid.py)
            self.err.attributes.add("noalias")

    # ------------------------------------------------------------------------------ body

    def run(self) -> None:
        if self.fn.predecessors()[self.fn.entry]:
            raise InternalError(f"@{self.fn.name}: a branch targets the entry block")
        start = self.kernel.append_basic_block("start")
        self.builder.position_at_end(start)
        self._bind_params()
        params = dict(self.values)
        if self.coarsen == 1:
            self._lower_body(start, None)
            return
        # Logical thread i = p + k * S for k < coarsen, p the physical index and S the physical
        # thread count; each runs a copy of the body when i < the launch's logical threads.
        b = self.builder
        p = self._physical_index()
        total = b.mul(
            b.zext(self.support.sreg(b, "nctaid.x"), I64),
            b.zext(self.support.sreg(b, "ntid.x"), I64),
        )
        done = self.kernel.append_basic_block("done")
        guard = self.kernel.append_basic_block("logical0")
        b.branch(guard)
        for k in range(self.coarsen):
            nxt = (
                done if k == self.coarsen - 1 else self.kernel.append_basic_block(f"logical{k + 1}")
            )
            b.position_at_end(guard)
            i = b.add(p, b.mul(total, ir.Constant(I64, k)), name=f"i{k}")
            body = self.kernel.append_basic_block(f"copy{k}")
            b.cbranch(b.icmp_signed("<", i, self.logical_threads), body, nxt)
            self.values = dict(params)
            self.blocks = {}
            self._lower_body(body, i, exit_to=nxt)
            guard = nxt
        b.position_at_end(done)
        b.ret_void()

    def _lower_body(
        self, start: ir.Block, logical_index: ir.Value | None, exit_to: ir.Block | None = None
    ) -> None:
        """One copy of the function body, entered from `start`; returns go to `exit_to`."""
        order = self.fn.reverse_postorder()
        self.logical_index = logical_index
        self.exit = exit_to
        for block in order:
            label = block.label or f"bb{len(self.blocks)}"
            self.blocks[block] = self.kernel.append_basic_block(label)
        self.builder.position_at_end(start)
        self.builder.branch(self.blocks[self.fn.entry])
        # Every block's phis exist before any branch is lowered, so a back edge can fill in its
        # incoming values the moment it is seen.
        for block in order[1:]:
            self.builder.position_at_end(self.blocks[block])
            for arg in block.args:
                self.values[arg] = self.builder.phi(value_type(arg.type), name=arg.name)
        for block in order:
            self.builder.position_at_end(self.blocks[block])
            for op in block.ops:
                self._lower_op(op)

    def _leave(self) -> None:
        """End this logical thread: `ret`, or on to the next logical thread's guard."""
        if self.exit is None:
            self.builder.ret_void()
        else:
            self.builder.branch(self.exit)

    def _lower_op(self, op: Op) -> None:
        lowers.lookup(op)(self, op)

    def _v(self, value: Value) -> ir.Value:
        try:
            return self.values[value]
        except KeyError:
            raise InternalError(f"{value!r} used before the backend saw its definition") from None

    def _set(self, result: Value, lowered: ir.Value) -> None:
        if result.name and isinstance(lowered, ir.Instruction) and lowered.name.startswith("."):
            lowered.name = result.name  # keep the user's variable names in the LLVM text
        self.values[result] = lowered

    def _array(self, value: Value) -> _Array:
        try:
            return self.arrays[value]
        except KeyError:
            raise InternalError(f"{value!r} is not an array parameter") from None

    # ------------------------------------------------------------------------ scalar ops

    @lowers(ops.Constant)
    def _constant(self, op: ops.Constant) -> None:
        self._set(op.result, constant(op.result.dtype, op.value))

    @lowers(ops.Binary)
    def _binary(self, op: ops.Binary) -> None:
        x, y = op.operands
        self._set(op.result, self.scalar.binary(op.kind, x.dtype, self._v(x), self._v(y)))

    @lowers(ops.Unary)
    def _unary(self, op: ops.Unary) -> None:
        (x,) = op.operands
        self._set(op.result, self.scalar.unary(op.kind, x.dtype, self._v(x)))

    @lowers(ops.Compare)
    def _compare(self, op: ops.Compare) -> None:
        x, y = op.operands
        self._set(op.result, self.scalar.compare(op.pred, _dtype_of(x), self._v(x), self._v(y)))

    @lowers(ops.Cast)
    def _cast(self, op: ops.Cast) -> None:
        (x,) = op.operands
        self._set(op.result, self.scalar.cast(self._v(x), _dtype_of(x), op.result.dtype))

    @lowers(ops.Select)
    def _select(self, op: ops.Select) -> None:
        cond, a, b = (self._v(v) for v in op.operands)
        self._set(op.result, self.builder.select(cond, a, b))

    @lowers(ops.MathCall)
    def _math(self, op: ops.MathCall) -> None:
        args = [self._v(v) for v in op.operands]
        self._set(op.result, self.scalar.math(op.fn, op.result.dtype, args))

    # ------------------------------------------------------------------------ thread ops

    @lowers(ops.ThreadIndex1D)
    def _thread_index_1d(self, op: ops.ThreadIndex1D) -> None:
        if self.logical_index is not None:  # the coarsened kernel: this copy's logical thread
            self._set(op.result, self.logical_index)
            return
        self._set(op.result, self._physical_index())

    def _physical_index(self) -> ir.Value:
        # ctaid.x * ntid.x + tid.x in i64: the product can exceed 2^32 but never 2^63, which
        # the nuw/nsw flags tell LLVM (so it knows the index is non-negative).
        b = self.builder
        ctaid, ntid, tid = (
            b.zext(self.support.sreg(b, r), I64) for r in ("ctaid.x", "ntid.x", "tid.x")
        )
        base = b.mul(ctaid, ntid, flags=("nuw", "nsw"))
        return b.add(base, tid, name="index", flags=("nuw", "nsw"))

    def _reported_position(self) -> tuple[ir.Value, ir.Value]:
        """(block.x, thread.x) of the failing thread as the user launched it."""
        b = self.builder
        if self.logical_index is None:
            return tuple(b.zext(self.support.sreg(b, r), I64) for r in ("ctaid.x", "tid.x"))  # type: ignore[return-value]
        ntid = b.zext(self.support.sreg(b, "ntid.x"), I64)
        return b.udiv(self.logical_index, ntid), b.urem(self.logical_index, ntid)

    @lowers(ops.ThreadIndex2D)
    def _thread_index_2d(self, op: ops.ThreadIndex2D) -> None:
        # (ctaid.y * ntid.y + tid.y, ctaid.x * ntid.x + tid.x) in i64, nuw/nsw as in 1-D.
        b = self.builder
        coords = []
        for axis, name in (("y", "row"), ("x", "col")):
            ctaid, ntid, tid = (
                b.zext(self.support.sreg(b, f"{r}.{axis}"), I64) for r in ("ctaid", "ntid", "tid")
            )
            base = b.mul(ctaid, ntid, flags=("nuw", "nsw"))
            coords.append(b.add(base, tid, name=name, flags=("nuw", "nsw")))
        self.index_2d[op.result] = (coords[0], coords[1])

    @lowers(ops.ThreadIndexAxis)
    def _thread_index_axis(self, op: ops.ThreadIndexAxis) -> None:
        try:
            pair = self.index_2d[op.operands[0]]
        except KeyError:
            raise InternalError(f"{op.operands[0]!r} is not a lowered ThreadIndex2D") from None
        self.values[op.result] = pair[op.axis]

    @lowers(ops.SpecialReg)
    def _special_reg(self, op: ops.SpecialReg) -> None:
        self._set(op.result, self.support.sreg(self.builder, op.reg))

    @lowers(ops.IndexToInt)
    def _index_to_int(self, op: ops.IndexToInt) -> None:
        self.values[op.result] = self._v(op.operands[0])  # a ThreadIndex is its i64 value

    # ------------------------------------------------------------------------ memory ops

    @lowers(ops.ArrayLen)
    def _len(self, op: ops.ArrayLen) -> None:
        self.values[op.result] = self._array(op.operands[0]).extents[op.axis]

    def _element(self, array: Value, indices: Sequence[Value]) -> tuple[ir.Value, ir.Type, int]:
        dtype = _array_type(array).dtype
        ty = memory_type(dtype)
        lowered = self._array(array)
        offset, b = self._v(indices[0]), self.builder
        for axis in range(1, len(indices)):  # row-major: r * shape[1] + c (and on, in 3-D);
            # each axis was checked (or proved) in range, so neither product nor sum wraps
            row = b.mul(offset, lowered.extents[axis], flags=("nuw", "nsw"))
            offset = b.add(row, self._v(indices[axis]), name="offset", flags=("nuw", "nsw"))
        ptr = self.builder.gep(lowered.ptr, [offset], inbounds=True, source_etype=ty)
        return ptr, ty, dtype.itemsize

    @lowers(ops.Load)
    def _load(self, op: ops.Load) -> None:
        if llvm_chunks.lower_load(self, op):
            return
        array = op.operands[0]
        ptr, ty, align = self._element(array, op.indices)
        loaded = self.builder.load(ptr, typ=ty, align=align)
        if self._array(array).readonly:
            # A Slice is read-only for the whole launch: its loads may use the non-coherent
            # (texture) path.
            loaded.set_metadata("invariant.load", self.module.add_metadata([]))
        if _array_type(array).dtype.is_bool:
            loaded = self.builder.icmp_unsigned("!=", loaded, ir.Constant(I8, 0))
        self._set(op.result, loaded)

    @lowers(ops.Store)
    def _store(self, op: ops.Store) -> None:
        array, value = op.operands[0], op.operands[-1]
        if self._array(array).readonly:
            raise InternalError(f"store to the read-only Slice {array.name!r} ({op.loc})")
        if llvm_chunks.lower_store(self, op):
            return
        ptr, _, align = self._element(array, op.indices)
        v = self._v(value)
        if v.type == I1:
            v = self.builder.zext(v, I8)
        self.builder.store(v, ptr, align=align)

    @lowers(ops.BoundsCheck)
    def _check_bounds(self, op: ops.BoundsCheck) -> None:
        """One unsigned compare per pair, one branch for the whole group.

        The cold block picks the first failing pair with a chain of selects and reports it, so
        a group of checks costs the hot path its compares and a single branch.
        """
        b = self.builder
        pairs = [(self._v(i), self._v(n), site) for i, n, site in op.pairs()]
        tag = "_".join(str(site) for _, _, site in pairs)
        # One unsigned compare covers both index < 0 and index >= length.
        oks = [b.icmp_unsigned("<", i, n, name=f"inbounds{site}") for i, n, site in pairs]
        all_ok = oks[0]
        for ok_k in oks[1:]:
            all_ok = b.and_(all_ok, ok_k)
        ok = self.kernel.append_basic_block(f"checked{tag}")
        fail = self.kernel.append_basic_block(f"oob{tag}")
        branch = b.cbranch(all_ok, ok, fail)
        branch.set_weights([1 << 20, 1])
        b.position_at_end(fail)
        index, length = pairs[-1][0], pairs[-1][1]
        site: ir.Value = ir.Constant(I64, pairs[-1][2])
        for (i, n, s), ok_k in zip(reversed(pairs[:-1]), reversed(oks[:-1]), strict=True):
            index = b.select(ok_k, index, i)
            length = b.select(ok_k, length, n)
            site = b.select(ok_k, site, ir.Constant(I64, s))
        bx, tx = self._reported_position()
        b.call(self.support.report_oob(), [self.err, site, index, length, bx, tx])
        self._leave()
        b.position_at_end(ok)

    # ----------------------------------------------------------------------- control flow

    def _edge(self, target: Block, args: Sequence[Value]) -> None:
        """Add this block's incoming values to `target`'s phis (the builder is at the branch)."""
        for param, arg in zip(target.args, args, strict=True):
            phi = self.values[param]
            assert isinstance(phi, ir.PhiInstr)
            phi.add_incoming(self._v(arg), self.builder.block)

    @lowers(ops.Br)
    def _br(self, op: ops.Br) -> None:
        self._edge(op.dest, op.operands)
        branch = self.builder.branch(self.blocks[op.dest])
        loop_id = self.loops.loop_id(op)
        if loop_id is not None:
            branch.set_metadata("llvm.loop", loop_id)

    @lowers(ops.CondBr)
    def _cond_br(self, op: ops.CondBr) -> None:
        b = self.builder
        cond = self._v(op.cond)
        if op.if_true is op.if_false and op.if_true.args:
            # Both edges reach one block with arguments: a phi cannot tell two edges from one
            # predecessor apart, so the false edge goes through a block of its own.
            edge = self.kernel.append_basic_block("edge")
            self._edge(op.if_true, op.true_args)
            b.cbranch(cond, self.blocks[op.if_true], edge)
            b.position_at_end(edge)
            self._edge(op.if_false, op.false_args)
            b.branch(self.blocks[op.if_false])
            return
        self._edge(op.if_true, op.true_args)
        self._edge(op.if_false, op.false_args)
        b.cbranch(cond, self.blocks[op.if_true], self.blocks[op.if_false])

    @lowers(ops.Return)
    def _return(self, op: ops.Return) -> None:
        self._leave()


def _array_type(value: Value) -> ArrayType:
    assert isinstance(value.type, ArrayType)
    return value.type


def _dtype_of(value: Value) -> DType:
    """The scalar type of an operand; a ThreadIndex compares and casts as the i64 it is."""
    if isinstance(value.type, ScalarType):
        return value.type.dtype
    return dtypes.i64
