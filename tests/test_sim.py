"""The SIMT simulator on IR built by hand: control flow, lanes, checks, memory, launches.

Each kernel here is written with the op classes of `ir/simt/ops.py`, verified, then run on random
data of irregular sizes (not multiples of the block) and compared with NumPy or with Python.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from fearless import dtypes as D
from fearless.errors import KernelIndexError, Location
from fearless.ir.core import ArrayType, Block, Function, ScalarType, Type, Value
from fearless.ir.simt import ops
from fearless.ir.simt.verifier import verify
from fearless.sim.schedule import schedule_order
from fearless.sim.simt import SimError, SimKernel, run_kernel

LOC = Location("test_sim.py", 1, 0)
RNG = np.random.default_rng(20261202)


def arr(dt: D.DType, disjoint: bool = False) -> ArrayType:
    return ArrayType(dt, disjoint)


class Builder:
    """Appends ops to a current block of a new function; every helper returns the result."""

    def __init__(self, name: str, params: Sequence[tuple[str, Type]]) -> None:
        self.fn = Function(name, LOC)
        self.block = self.fn.new_block("entry")
        self.params = [self.block.add_arg(t, LOC, n) for n, t in params]
        self.site = 0

    def emit(self, op: ops.Op) -> Any:
        self.block.append(op)
        return op.results[0] if op.results else None

    def block_(self, label: str, *types: Type) -> tuple[Block, list[Value]]:
        b = self.fn.new_block(label)
        return b, [b.add_arg(t, LOC) for t in types]

    def const(self, v: Any, dt: D.DType) -> Value:
        return self.emit(ops.Constant(v, dt, LOC))

    def bin(self, kind: str, a: Value, b: Value) -> Value:
        return self.emit(ops.Binary(kind, a, b, LOC))

    def cmp(self, pred: str, a: Value, b: Value) -> Value:
        return self.emit(ops.Compare(pred, a, b, LOC))

    def index(self) -> Value:
        return self.emit(ops.IndexToInt(self.emit(ops.ThreadIndex1D(LOC)), LOC))

    def length(self, a: Value) -> Value:
        return self.emit(ops.ArrayLen(a, LOC))

    def load(self, a: Value, i: Value, check: bool = True) -> Value:
        if check:
            self.emit(ops.BoundsCheck(i, self.length(a), self.site, LOC))
            self.site += 1
        return self.emit(ops.Load(a, i, LOC))

    def store(self, a: Value, i: Value, v: Value, check: bool = True) -> None:
        if check:
            self.emit(ops.BoundsCheck(i, self.length(a), self.site, LOC))
            self.site += 1
        self.emit(ops.Store(a, i, v, LOC))

    def br(self, dest: Block, *args: Value) -> None:
        self.emit(ops.Br(dest, list(args), LOC))

    def cond_br(
        self, c: Value, t: Block, f: Block, targs: Sequence[Value] = (), fargs: Sequence[Value] = ()
    ) -> None:
        self.emit(ops.CondBr(c, t, list(targs), f, list(fargs), LOC))

    def ret(self) -> None:
        self.emit(ops.Return(LOC))

    def guarded(self, out: Value) -> tuple[Value, Block]:
        """`i = index_1d; if i < len(out):` -> (i, the exit block); continues in the body."""
        i = self.index()
        body, _ = self.block_("body")
        done, _ = self.block_("done")
        self.cond_br(self.cmp("lt", i, self.length(out)), body, done)
        self.block = done
        self.ret()
        self.block = body
        return i, done

    def done(self) -> Function:
        verify(self.fn)
        return self.fn


def launch(n: int, block: int = 128) -> tuple[int, int]:
    return max(1, -(-n // block)), block


# ------------------------------------------------------------------------------- kernels


def vecadd_ir(dt: D.DType = D.f32) -> Function:
    b = Builder("vecadd", [("a", arr(dt)), ("b", arr(dt)), ("c", arr(dt, True))])
    a, bb, c = b.params
    i, done = b.guarded(c)
    s = b.bin("add", b.load(a, i), b.load(bb, i))
    b.store(c, i, s)
    b.br(done)
    return b.done()


@pytest.mark.parametrize("n", [1, 127, 128, 1000, 4099])
def test_vecadd_matches_numpy(n: int) -> None:
    a = RNG.standard_normal(n).astype(np.float32)
    bb = RNG.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    assert run_kernel(vecadd_ir(), *launch(n), [a, bb, c]) is None
    np.testing.assert_array_equal(c, a + bb)


def test_vecadd_surplus_threads_and_chunks_agree() -> None:
    n = 3001
    a = RNG.integers(-1000, 1000, n).astype(np.int64)
    bb = RNG.integers(-1000, 1000, n).astype(np.int64)
    fn = vecadd_ir(D.i64)
    k = SimKernel(fn)
    outs = []
    for chunk in (1, 64, 200, 1 << 20):  # 1 and 64: one block per chunk
        c = np.zeros(n, np.int64)
        stats: dict[str, int] = {}
        assert k.run((50, 1, 1), (64, 1, 1), [a, bb, c], chunk_lanes=chunk, stats=stats) is None
        outs.append(c)
        assert stats["chunks"] == -(-50 // max(1, chunk // 64))
    for c in outs:
        np.testing.assert_array_equal(c, a + bb)


def test_saxpy_scalar_param() -> None:
    b = Builder(
        "saxpy",
        [
            ("alpha", ScalarType(D.f32)),
            ("x", arr(D.f32)),
            ("y", arr(D.f32)),
            ("out", arr(D.f32, True)),
        ],
    )
    alpha, x, y, out = b.params
    i, done = b.guarded(out)
    v = b.bin("add", b.bin("mul", alpha, b.load(x, i)), b.load(y, i))
    b.store(out, i, v)
    b.br(done)
    fn = b.done()
    n = 777
    xs = RNG.standard_normal(n).astype(np.float32)
    ys = RNG.standard_normal(n).astype(np.float32)
    out_a = np.zeros(n, np.float32)
    assert run_kernel(fn, *launch(n, 64), [2.5, xs, ys, out_a]) is None
    np.testing.assert_array_equal(out_a, np.float32(2.5) * xs + ys)  # no FMA contraction
    out_b = np.zeros(n, np.float32)
    run_kernel(fn, *launch(n, 64), [np.float32(-0.75), xs, ys, out_b])
    np.testing.assert_array_equal(out_b, np.float32(-0.75) * xs + ys)


def window_sum_ir() -> Function:
    """out[i] = sum(x[(i + k) % n] for k in range(i % 13)): a counted loop with block args."""
    b = Builder("window_sum", [("x", arr(D.i64)), ("out", arr(D.i64, True))])
    x, out = b.params
    i, done = b.guarded(out)
    n = b.length(x)
    trips = b.bin("mod", i, b.const(13, D.i64))
    header, (k, acc) = b.block_("header", ScalarType(D.i64), ScalarType(D.i64))
    body, _ = b.block_("loop.body")
    exit_, _ = b.block_("loop.exit")
    b.br(header, b.const(0, D.i64), b.const(0, D.i64))
    b.block = header
    b.cond_br(b.cmp("lt", k, trips), body, exit_)
    b.block = body
    j = b.bin("mod", b.bin("add", i, k), n)
    b.br(header, b.bin("add", k, b.const(1, D.i64)), b.bin("add", acc, b.load(x, j)))
    b.block = exit_
    b.store(out, i, acc)
    b.br(done)
    return b.done()


def test_loop_with_block_args_sums() -> None:
    n = 1003
    x = RNG.integers(-(10**6), 10**6, n).astype(np.int64)
    out = np.full(n, -1, np.int64)
    stats: dict[str, int] = {}
    assert SimKernel(window_sum_ir()).run(*launch(n), [x, out], stats=stats) is None
    ref = [sum(int(x[(i + k) % n]) for k in range(i % 13)) for i in range(n)]
    np.testing.assert_array_equal(out, ref)
    # Lanes leaving early wait at the exit: the loop runs 13 times, everything else once.
    assert stats["steps"] <= 2 * 13 + 1 + 6


def collatz_ir() -> Function:
    """Steps of the Collatz sequence from start[i], or -1 past `limit` steps.

    while True:
        if v == 1: break                  -> found: out[i] = steps
        if steps >= limit: out[i] = -1; return          (an early exit of its own)
        v = v // 2 if v % 2 == 0 else 3 * v + 1   (an if/else inside the loop)
        steps += 1
    """
    i64 = ScalarType(D.i64)
    b = Builder("collatz", [("start", arr(D.i64)), ("limit", i64), ("out", arr(D.i64, True))])
    start, limit, out = b.params
    i, done = b.guarded(out)
    v0 = b.load(start, i)
    head, (v, steps) = b.block_("head", i64, i64)
    not_one, _ = b.block_("not_one")
    found, _ = b.block_("found")
    gave_up, _ = b.block_("gave_up")
    step, _ = b.block_("step")
    even, _ = b.block_("even")
    odd, _ = b.block_("odd")
    join, (nv,) = b.block_("join", i64)
    b.br(head, v0, b.const(0, D.i64))
    b.block = head
    b.cond_br(b.cmp("eq", v, b.const(1, D.i64)), found, not_one)
    b.block = not_one
    b.cond_br(b.cmp("ge", steps, limit), gave_up, step)
    b.block = step
    two = b.const(2, D.i64)
    b.cond_br(b.cmp("eq", b.bin("mod", v, two), b.const(0, D.i64)), even, odd)
    b.block = even
    b.br(join, b.bin("floordiv", v, two))
    b.block = odd
    b.br(join, b.bin("add", b.bin("mul", b.const(3, D.i64), v), b.const(1, D.i64)))
    b.block = join
    b.br(head, nv, b.bin("add", steps, b.const(1, D.i64)))
    b.block = found
    b.store(out, i, steps)
    b.br(done)
    b.block = gave_up
    b.store(out, i, b.const(-1, D.i64))
    b.ret()
    return b.done()


def collatz(v: int, limit: int) -> int:
    steps = 0
    while v != 1:
        if steps >= limit:
            return -1
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def test_divergent_while_loop_with_early_exits() -> None:
    n = 2345
    start = RNG.integers(1, 10**5, n).astype(np.int64)
    start[:5] = [1, 2, 3, 27, 97]
    out = np.zeros(n, np.int64)
    fn = collatz_ir()
    stats: dict[str, int] = {}
    assert SimKernel(fn).run(*launch(n, 96), [start, 100, out], stats=stats) is None
    ref = [collatz(int(v), 100) for v in start]
    assert -1 in ref and 0 in ref  # both exits taken
    np.testing.assert_array_equal(out, ref)
    # Reconvergence: about one step per loop block per iteration, not per lane path.
    longest = max(r if r >= 0 else 100 for r in ref)
    assert stats["steps"] <= 6 * (longest + 1) + 8


def test_schedule_puts_loop_bodies_before_exits() -> None:
    fn = collatz_ir()
    order = [b.label for b in schedule_order(fn)]
    for inside in ("head", "not_one", "step", "even", "odd", "join"):
        for outside in ("found", "gave_up", "done"):
            assert order.index(inside) < order.index(outside), order


def test_parallel_copy_of_swapped_block_args() -> None:
    """`br ^h(%b, %a)` swaps: a branch reads all its values before writing any argument."""
    i32 = ScalarType(D.i32)
    b = Builder("fib", [("out", arr(D.i32, True))])
    (out,) = b.params
    i, done = b.guarded(out)
    trips = b.emit(ops.Cast(i, D.i32, LOC))
    head, (k, x, y) = b.block_("head", i32, i32, i32)
    body, _ = b.block_("body")
    exit_, _ = b.block_("exit")
    b.br(head, b.const(0, D.i32), b.const(0, D.i32), b.const(1, D.i32))
    b.block = head
    b.cond_br(b.cmp("lt", k, trips), body, exit_)
    b.block = body
    b.br(head, b.bin("add", k, b.const(1, D.i32)), y, b.bin("add", x, y))  # wraps past 2**31
    b.block = exit_
    b.store(out, i, x)
    b.br(done)
    fn = b.done()
    n = 100
    res = np.zeros(n, np.int32)
    run_kernel(fn, (2, 1, 1), (64, 1, 1), [res])
    fib = [0, 1]
    while len(fib) < n:
        fib.append(fib[-1] + fib[-2])
    np.testing.assert_array_equal(
        res, np.array([f % 2**32 for f in fib[:n]]).astype(np.uint32).view(np.int32)
    )


# ------------------------------------------------------------------------ integer semantics


def binop_ir(kind: str, dt: D.DType) -> Function:
    b = Builder(kind, [("x", arr(dt)), ("y", arr(dt)), ("out", arr(dt, True))])
    x, y, out = b.params
    i, done = b.guarded(out)
    b.store(out, i, b.bin(kind, b.load(x, i), b.load(y, i)))
    b.br(done)
    return b.done()


def run_binop(kind: str, dt: D.DType, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), dt.np)
    assert run_kernel(binop_ir(kind, dt), *launch(len(x), 32), [x, y, out]) is None
    return out


def wrap(v: int, dt: D.DType) -> int:
    v &= (1 << dt.bits) - 1
    return v - (1 << dt.bits) if dt.is_signed and v >= 1 << (dt.bits - 1) else v


@pytest.mark.parametrize("dt", [D.i8, D.i32, D.i64])
def test_floordiv_and_mod_follow_python_on_negative_ints(dt: D.DType) -> None:
    lo, hi = D.int_range(dt)
    x = RNG.integers(lo, hi, 501, endpoint=True).astype(dt.np)
    y = RNG.integers(-9, 10, 501).astype(dt.np)
    x[:4] = [lo, lo, -7, 7]
    y[:4] = [-1, 1, 2, -2]
    q = run_binop("floordiv", dt, x, y)
    r = run_binop("mod", dt, x, y)
    for a, b, qq, rr in zip(x.tolist(), y.tolist(), q.tolist(), r.tolist(), strict=True):
        if b == 0:  # defined: x // 0 == x % 0 == 0
            assert (qq, rr) == (0, 0)
        else:
            assert (qq, rr) == (wrap(a // b, dt), wrap(a % b, dt)), (a, b)
    assert q[0] == lo and r[0] == 0  # MIN // -1 wraps to MIN


def test_i32_arithmetic_wraps() -> None:
    x = np.array([2**31 - 1, -(2**31), 65536, -3, 123456789], np.int32)
    y = np.array([1, -1, 65536, 7, 987654321], np.int32)
    for kind, op in [("add", int.__add__), ("sub", int.__sub__), ("mul", int.__mul__)]:
        got = run_binop(kind, D.i32, x, y)
        assert got.tolist() == [
            wrap(op(a, b), D.i32) for a, b in zip(x.tolist(), y.tolist(), strict=True)
        ], kind


def test_shifts_by_width_or_more() -> None:
    x = np.array([1, -8, -8, 5, 1, -1], np.int32)
    y = np.array([31, 32, 100, -1, 33, 0], np.int32)
    assert run_binop("shl", D.i32, x, y).tolist() == [-(2**31), 0, 0, 0, 0, -1]
    assert run_binop("shr", D.i32, x, y).tolist() == [0, -1, -1, 0, 0, -1]
    u = np.array([2**32 - 1, 8, 8], np.uint32)
    assert run_binop("shr", D.u32, u, np.array([31, 32, 3], np.uint32)).tolist() == [1, 0, 1]


def test_casts() -> None:
    b = Builder(
        "casts",
        [
            ("x", arr(D.f32)),
            ("i", arr(D.i32, True)),
            ("u8", arr(D.u8, True)),
            ("w", arr(D.i64, True)),
            ("f", arr(D.f64, True)),
        ],
    )
    x, oi, ou8, ow, of = b.params
    i, done = b.guarded(oi)
    v = b.load(x, i)
    as_i32 = b.emit(ops.Cast(v, D.i32, LOC))
    b.store(oi, i, as_i32)
    b.store(ou8, i, b.emit(ops.Cast(v, D.u8, LOC)))
    as_i8 = b.emit(ops.Cast(as_i32, D.i8, LOC))  # wraps
    b.store(ow, i, b.emit(ops.Cast(as_i8, D.i64, LOC)))  # sign-extends
    b.store(of, i, b.emit(ops.Cast(v, D.f64, LOC)))
    b.br(done)
    fn = b.done()
    xs = np.array([-2.7, -0.5, 0.5, 2.7, 300.9, -129.5, 3e9, -3e9, np.nan, np.inf], np.float32)
    n = len(xs)
    oi_, ou_, ow_, of_ = (np.zeros(n, t) for t in (np.int32, np.uint8, np.int64, np.float64))
    assert run_kernel(fn, (1, 1, 1), (32, 1, 1), [xs, oi_, ou_, ow_, of_]) is None
    assert oi_.tolist() == [-2, 0, 0, 2, 300, -129, 2**31 - 1, -(2**31), 0, 2**31 - 1]
    assert ou_.tolist() == [0, 0, 0, 2, 255, 0, 255, 0, 0, 255]  # saturates, NaN -> 0
    assert ow_.tolist() == [wrap(v, D.i8) for v in oi_.tolist()]
    np.testing.assert_array_equal(of_, xs.astype(np.float64))


# -------------------------------------------------------------------- checks and memory


def gather_ir() -> Function:
    b = Builder("gather", [("src", arr(D.f32)), ("idx", arr(D.i32)), ("out", arr(D.f32, True))])
    src, idx, out = b.params
    i, done = b.guarded(out)
    j = b.emit(ops.Cast(b.load(idx, i), D.i64, LOC))
    b.store(out, i, b.load(src, j))  # sites: 0 idx, 1 src, 2 out
    b.br(done)
    return b.done()


def test_out_of_bounds_read_reports_the_first_failure_and_skips_the_write() -> None:
    n = 300
    src = RNG.standard_normal(50).astype(np.float32)
    idx = RNG.integers(0, 50, n).astype(np.int32)
    idx[[70, 150, 290]] = [50, -1, 1000]
    out = np.full(n, 7.0, np.float32)
    err = run_kernel(gather_ir(), (3, 1, 1), (128, 1, 1), [src, idx, out])
    assert err == SimError(site=1, block=(0, 0, 0), thread=(70, 0, 0), index=50, length=50)
    assert err.record_words() == [1, 1, 0, 0, 0, 70, 0, 0, 50, 50]
    bad = [70, 150, 290]
    np.testing.assert_array_equal(out[bad], 7.0)  # failed threads stopped before writing
    good = np.setdiff1d(np.arange(n), bad)
    np.testing.assert_array_equal(out[good], src[idx[good]])  # the others all ran


def test_first_error_is_in_the_first_chunk_in_block_order() -> None:
    n = 300
    src = np.arange(10, dtype=np.float32)
    idx = np.zeros(n, np.int32)
    idx[[299, 200]] = [-5, 10]
    for chunk in (128, 1 << 20):
        err = run_kernel(
            gather_ir(),
            (3, 1, 1),
            (128, 1, 1),
            [src, idx, np.zeros(n, np.float32)],
            chunk_lanes=chunk,
        )
        assert err == SimError(1, (1, 0, 0), (72, 0, 0), 10, 10)


def test_unchecked_out_of_bounds_access_raises() -> None:
    b = Builder("raw", [("src", arr(D.f32)), ("out", arr(D.f32, True))])
    src, out = b.params
    i, done = b.guarded(out)
    b.store(out, i, b.load(src, b.bin("sub", i, b.const(1, D.i64)), check=False), check=False)
    b.br(done)
    fn = b.done()
    with pytest.raises(KernelIndexError) as info:
        run_kernel(fn, (1, 1, 1), (8, 1, 1), [np.ones(8, np.float32), np.zeros(8, np.float32)])
    assert "the len is 8 but the index is -1" in str(info.value)
    assert "thread (0, 0, 0)" in str(info.value)


def test_special_registers_in_a_3d_launch() -> None:
    """out[global linear id] = a code of (ctaid, tid, ntid, nctaid) per thread."""
    i64 = D.i64
    b = Builder("regs", [("out", arr(i64, True))])
    (out,) = b.params

    def reg(name: str) -> Value:
        return b.emit(ops.Cast(b.emit(ops.SpecialReg(name, LOC)), i64, LOC))

    def lin(prefix: str, size: str) -> Value:  # x + X * (y + Y * z)
        x, y, z = (reg(f"{prefix}.{a}") for a in "xyz")
        sx, sy = reg(f"{size}.x"), reg(f"{size}.y")
        return b.bin("add", x, b.bin("mul", sx, b.bin("add", y, b.bin("mul", sy, z))))

    blk, thr = lin("ctaid", "nctaid"), lin("tid", "ntid")
    per_block = b.bin("mul", reg("ntid.x"), b.bin("mul", reg("ntid.y"), reg("ntid.z")))
    gid = b.bin("add", b.bin("mul", blk, per_block), thr)
    code = b.bin(
        "add",
        b.bin(
            "mul", b.emit(ops.IndexToInt(b.emit(ops.ThreadIndex1D(LOC)), LOC)), b.const(1000, i64)
        ),
        reg("nctaid.z"),
    )
    b.store(out, gid, code)
    b.ret()
    fn = b.done()
    grid, block = (3, 2, 2), (4, 3, 2)
    total = 3 * 2 * 2 * 4 * 3 * 2
    res = np.zeros(total, np.int64)
    assert run_kernel(fn, grid, block, [res], chunk_lanes=24 * 5) is None
    ref = np.zeros(total, np.int64)
    for bz in range(2):
        for by in range(2):
            for bx in range(3):
                for tz in range(2):
                    for ty in range(3):
                        for tx in range(4):
                            blin = bx + 3 * (by + 2 * bz)
                            g = blin * 24 + tx + 4 * (ty + 3 * tz)
                            ref[g] = (bx * 4 + tx) * 1000 + 2
    np.testing.assert_array_equal(res, ref)


def test_uniform_values_and_select_across_blocks() -> None:
    """Values shared by all lanes (scalars) meet per-lane ones in later blocks and branches."""
    f32 = ScalarType(D.f32)
    b = Builder("mix", [("x", arr(D.f32)), ("t", f32), ("out", arr(D.f32, True))])
    x, t, out = b.params
    i, done = b.guarded(out)
    twice = b.bin("mul", t, b.const(2.0, D.f32))  # uniform, used in two other blocks
    v = b.load(x, i)
    big, _ = b.block_("big")
    small, _ = b.block_("small")
    join, (r,) = b.block_("join", f32)
    b.cond_br(b.cmp("gt", t, b.const(0.0, D.f32)), big, small)  # a uniform branch
    b.block = big
    b.br(join, b.emit(ops.Select(b.cmp("gt", v, twice), v, twice, LOC)))
    b.block = small
    b.br(join, twice)  # a uniform value into a per-lane block argument
    b.block = join
    b.store(out, i, b.bin("add", r, twice))
    b.br(done)
    fn = b.done()
    n = 333
    xs = RNG.uniform(-5, 5, n).astype(np.float32)
    for tv in (1.25, -1.5):
        o = np.zeros(n, np.float32)
        assert run_kernel(fn, *launch(n, 64), [xs, tv, o]) is None
        tw = np.float32(tv) * 2
        ref = (np.where(xs > tw, xs, tw) if tv > 0 else np.full(n, tw)) + tw
        np.testing.assert_array_equal(o, ref)


def test_nested_loops_with_per_lane_trip_counts() -> None:
    """out[i] = sum(j * k for j in range(i % 7) for k in range(j + i % 3))."""
    i64 = ScalarType(D.i64)
    b = Builder("nested", [("out", arr(D.i64, True))])
    (out,) = b.params
    i, done = b.guarded(out)
    zero, one = b.const(0, D.i64), b.const(1, D.i64)
    outer_n = b.bin("mod", i, b.const(7, D.i64))
    extra = b.bin("mod", i, b.const(3, D.i64))
    oh, (j, acc) = b.block_("outer", i64, i64)
    ob, _ = b.block_("outer.body")
    ih, (k, acc2) = b.block_("inner", i64, i64)
    ib, _ = b.block_("inner.body")
    ie, _ = b.block_("inner.exit")
    oe, _ = b.block_("outer.exit")
    b.br(oh, zero, zero)
    b.block = oh
    b.cond_br(b.cmp("lt", j, outer_n), ob, oe)
    b.block = ob
    b.br(ih, zero, acc)
    b.block = ih
    b.cond_br(b.cmp("lt", k, b.bin("add", j, extra)), ib, ie)
    b.block = ib
    b.br(ih, b.bin("add", k, one), b.bin("add", acc2, b.bin("mul", j, k)))
    b.block = ie
    b.br(oh, b.bin("add", j, one), acc2)
    b.block = oe
    b.store(out, i, acc)
    b.br(done)
    fn = b.done()
    n = 500
    res = np.zeros(n, np.int64)
    assert run_kernel(fn, *launch(n, 64), [res]) is None
    ref = [sum(j * k for j in range(i % 7) for k in range(j + i % 3)) for i in range(n)]
    np.testing.assert_array_equal(res, ref)


def test_bf16_arrays_round_trip_and_round() -> None:
    b = Builder("bf", [("x", arr(D.bf16)), ("out", arr(D.bf16, True))])
    x, out = b.params
    i, done = b.guarded(out)
    v = b.load(x, i)
    b.store(out, i, b.bin("mul", v, b.const(3.0, D.bf16)))
    b.br(done)
    fn = b.done()
    vals = np.array([1.0, 1.0078125, -2.5, 65280.0, 1e-3], np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    res = np.zeros(len(vals), np.uint16)
    assert run_kernel(fn, (1, 1, 1), (32, 1, 1), [bits, res]) is None
    got = (res.astype(np.uint32) << 16).view(np.float32)
    exact = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64) * 3
    for g, e in zip(got.tolist(), exact.tolist(), strict=True):  # the nearest bf16 of x * 3
        cands = [c for c in _bf16_neighbours(e)]
        assert abs(g - e) == min(abs(c - e) for c in cands), (g, e)


def _bf16_neighbours(x: float) -> list[float]:
    f = np.float32(x).view(np.uint32) & np.uint32(0xFFFF0000)
    lo = np.uint32(f).view(np.float32)
    hi = np.uint32(f + np.uint32(0x10000)).view(np.float32)
    return [float(lo), float(hi)]


def test_wrong_arguments_are_rejected() -> None:
    from fearless.errors import KernelTypeError

    fn = vecadd_ir()
    a = np.ones(4, np.float32)
    with pytest.raises(KernelTypeError, match="f64"):
        run_kernel(fn, (1, 1, 1), (4, 1, 1), [a, a, np.zeros(4, np.float64)])
    with pytest.raises(KernelTypeError, match="takes 3 arguments"):
        run_kernel(fn, (1, 1, 1), (4, 1, 1), [a, a])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(KernelTypeError, match="read-only"):
        run_kernel(fn, (1, 1, 1), (4, 1, 1), [a, a, ro])


def test_empty_launch_runs_nothing() -> None:
    c = np.zeros(4, np.float32)
    assert run_kernel(vecadd_ir(), (0, 1, 1), (4, 1, 1), [c, c.copy(), c.copy()]) is None


def test_million_element_vecadd_speed() -> None:
    n = 1 << 20
    a = RNG.standard_normal(n).astype(np.float32)
    bb = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    fn = vecadd_ir()
    t0 = time.perf_counter()
    assert run_kernel(fn, (4096, 1, 1), (256, 1, 1), [a, bb, c]) is None
    elapsed = time.perf_counter() - t0
    np.testing.assert_array_equal(c, a + bb)
    assert elapsed < 2.0, f"1M vecadd took {elapsed:.2f} s"
