"""Declarations and small device routines a kernel module needs, created once per module.

`ModuleSupport` hands out, on first use, the LLVM intrinsics (`llvm.sqrt.f32`, the PTX special
registers, ...), libdevice prototypes (`__nv_expf`; their bodies are linked in later by
`backends/llvm/ptx.py`) and two routines written here:

  __fearless_report_oob(err, site, index, length)
      the cold path of a failed bounds check: compare-and-swap word 0 of the error record
      (`abi.py`) from 0 to 1; the thread that wins writes [site, ctaid.xyz, tid.xyz, index,
      length] into words 1..9. The caller then returns from the kernel; nothing traps, so the
      CUDA context stays usable and the host raises `KernelIndexError` at the next sync.

  __fearless_ipow_<iN>(base, exp)
      integer `**` by square-and-multiply, wrapping as every integer op of the IR does (any
      evaluation order gives the same bits: multiplication modulo 2^N is associative).
      A negative exponent (signed types) gives the real result truncated toward zero: 1 for
      base 1, +-1 for base -1 by the exponent's parity, 0 otherwise (0 ** -n included).
      NumPy raises for negative integer powers; the device cannot, so this is the defined
      result the simulator must reproduce.

One `ModuleSupport` belongs to one module being built; nothing is shared between compilations.
"""

from __future__ import annotations

from llvmlite import ir

from ...abi import ERROR_RECORD_WORDS
from ...dtypes import DType
from .types import GLOBAL_PTR, I1, I32, I64, VOID, scalar_type


class ModuleSupport:
    """Lazily declares intrinsics, libdevice functions and the helper routines of one module."""

    def __init__(self, module: ir.Module, block: tuple[int, int, int] | None = None) -> None:
        self.module = module
        # The block of a `@simt.kernel(block=...)` contract: the launch checks it, so `ntid.*`
        # are constants, and loops strided by the block have a trip count LLVM can unroll.
        self.block = block
        self._functions: dict[str, ir.Function] = {}

    # ------------------------------------------------------------------------- declarations

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The function `name` of this module, declared with this prototype on first use."""
        fn = self._functions.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
            self._functions[name] = fn
        return fn

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """An LLVM intrinsic, e.g. intrinsic("llvm.sqrt.f32", f32, [f32])."""
        return self.declare(name, ret, args)

    def libdevice(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """A libdevice function (`__nv_expf`); `backends/llvm/ptx.py` links its body."""
        assert name.startswith("__nv_"), name
        return self.declare(name, ret, args)

    def sreg(self, builder: ir.IRBuilder, reg: str) -> ir.Value:
        """Read a PTX special register ("tid.x", "ntid.y", "ctaid.z", "nctaid.x", ...) as i32.
        Of a fixed block, `ntid.*` is the constant, and `tid.*` is 0 along an axis of one
        thread and carries its range otherwise (so LLVM folds checks such as `tid.y < 8`)."""
        extent = self.block["xyz".index(reg[-1])] if self.block is not None else 0
        if extent and reg.startswith("ntid."):
            return ir.Constant(I32, extent)
        if extent == 1 and reg.startswith("tid."):
            return ir.Constant(I32, 0)
        fn = self.intrinsic(f"llvm.nvvm.read.ptx.sreg.{reg}", I32, [])
        value = builder.call(fn, [], name=reg.replace(".", "_"))
        if extent and reg.startswith("tid."):
            bounds = [ir.Constant(I32, 0), ir.Constant(I32, extent)]
            value.set_metadata("range", self.module.add_metadata(bounds))
        return value

    # -------------------------------------------------------------------- helper routines

    def report_oob(self) -> ir.Function:
        """`__fearless_report_oob(err, i64 site, i64 index, i64 length, i64 block.x, i64 thread.x)`.

        block.x and thread.x come from the caller: in a coarsened kernel they are the logical
        thread's, not the physical one's.
        """
        name = "__fearless_report_oob"
        if name in self._functions:
            return self._functions[name]
        fn = self.declare(name, VOID, [GLOBAL_PTR, I64, I64, I64, I64, I64])
        fn.linkage = "internal"
        # Inlined into each cold block: a call makes ptxas follow the ABI in the whole kernel,
        # and a cubin linked by nvJitLink/cuLink keeps it (measured on the H200: vecadd 2^28
        # checked 1.354 ms with the call vs 0.964 ms inlined and 0.940 ms unchecked).
        for attr in ("alwaysinline", "nounwind"):
            fn.attributes.add(attr)
        err, site, index, length, bx, tx = fn.args
        err.name, site.name, index.name, length.name = "err", "site", "index", "length"
        bx.name, tx.name = "block_x", "thread_x"
        entry, record, done = (fn.append_basic_block(n) for n in ("entry", "record", "done"))

        b = ir.IRBuilder(entry)
        # First failing thread wins; relaxed ordering suffices because the host reads the record
        # only after the kernel has finished.
        pair = b.cmpxchg(err, ir.Constant(I64, 0), ir.Constant(I64, 1), "monotonic", name="cas")
        won = b.extract_value(pair, 1, name="won")
        b.cbranch(won, record, done)

        b.position_at_end(record)
        words = [site, bx]
        words += [b.zext(self.sreg(b, reg), I64) for reg in ("ctaid.y", "ctaid.z")]
        words.append(tx)
        words += [b.zext(self.sreg(b, reg), I64) for reg in ("tid.y", "tid.z")]
        words += [index, length]
        assert len(words) == ERROR_RECORD_WORDS - 1
        for offset, value in enumerate(words, start=1):
            slot = b.gep(err, [ir.Constant(I64, offset)], source_etype=I64)
            b.store(value, slot, align=8)
        b.branch(done)

        b.position_at_end(done)
        b.ret_void()
        return fn

    def ipow(self, dtype: DType) -> ir.Function:
        """`__fearless_ipow_<dtype>(base, exp)`: wrapping integer power (see module docstring)."""
        name = f"__fearless_ipow_{dtype.name}"
        if name in self._functions:
            return self._functions[name]
        ty = scalar_type(dtype)
        fn = self.declare(name, ty, [ty, ty])
        fn.linkage = "internal"
        base, exp = fn.args
        base.name, exp.name = "base", "exp"
        one, zero = ir.Constant(ty, 1), ir.Constant(ty, 0)
        entry, head, body, done = (
            fn.append_basic_block(n) for n in ("entry", "head", "body", "done")
        )

        b = ir.IRBuilder(entry)
        if dtype.is_signed:
            negative = fn.append_basic_block("negative")
            b.cbranch(b.icmp_signed("<", exp, zero), negative, head)
            b.position_at_end(negative)
            odd = b.trunc(exp, I1)
            minus_one = ir.Constant(ty, -1)
            of_minus_one = b.select(odd, minus_one, one)
            result = b.select(b.icmp_signed("==", base, one), one, zero)
            result = b.select(b.icmp_signed("==", base, minus_one), of_minus_one, result)
            b.ret(result)
        else:
            b.branch(head)

        b.position_at_end(head)
        acc = b.phi(ty, name="acc")
        sq = b.phi(ty, name="sq")
        e = b.phi(ty, name="e")
        b.cbranch(b.icmp_unsigned("==", e, zero), done, body)

        b.position_at_end(body)
        acc_next = b.select(b.trunc(e, I1), b.mul(acc, sq), acc)
        sq_next = b.mul(sq, sq)
        e_next = b.lshr(e, one)
        b.branch(head)

        acc.add_incoming(one, entry)
        acc.add_incoming(acc_next, body)
        sq.add_incoming(base, entry)
        sq.add_incoming(sq_next, body)
        e.add_incoming(exp, entry)
        e.add_incoming(e_next, body)

        b.position_at_end(done)
        b.ret(acc)
        return fn
