"""Counter-based random numbers in tile kernels: `tile.randint`, `tile.rand`, `tile.randn`,
`tile.randint4x` and `tile.philox`, with the semantics of Triton's `tl.randint`/`tl.rand`/...

    offs = tile.arange(BLOCK, fl.i32) + tile.block_id(0) * BLOCK
    bits = tile.randint(seed, offs)              # u32
    keep = tile.rand(seed, offs) >= p            # f32 in [0, 1)
    noise = tile.randn(seed, offs)               # f32, standard normal
    r0, r1, r2, r3 = tile.randint4x(seed, offs)  # the four words of one Philox block

The generator is Philox4x32 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy
as 1, 2, 3", SC'11; the Random123 library): a bijection of a 128-bit counter (c0, c1, c2, c3),
keyed by 64 bits (k0, k1). One round multiplies c0 and c2 by two constants, keeps both halves
of each 64-bit product and mixes them with the other words and the key:

    c0, c1, c2, c3 = hi(B*c2) ^ c1 ^ k0, lo(B*c2), hi(A*c0) ^ c3 ^ k1, lo(A*c0)
    k0, k1 = k0 + KEY_A, k1 + KEY_B

`n_rounds` rounds (10 by default, a compile-time int in 1..16) are unrolled when the kernel
compiles. As in Triton, `randint4x(seed, offsets)` is `philox(seed, offsets, 0, 0, 0)`: the
offsets are counter word 0, bitcast to u32 (so they must be 32-bit integers), and the seed, any
integer scalar widened to 64 bits (signed seeds by sign extension), gives k0 (its low half) and
k1 (its high half). `randint` is word 0, `rand` converts word 0 to f32 as Triton's
`uint_to_uniform_float` does (the bits read as i32, negatives folded onto non-negatives by
`-x - 1`, times 4.6566127342e-10: the largest f32 scale that keeps 2**31 - 1 below 1), and
`randn` is the first Box-Muller output of the uniforms of words 0 and 1
(`sqrt(-2 log max(u0, 1e-7)) * cos(2 pi u1)`).

Everything here is a composition of ops every tile backend already runs (u32/u64 `mul`,
`xor`, `>>`, casts, a compare and select, f32 `log`/`sqrt`/`cos`): the simulator and the Tile IR
lowering need nothing of their own, and the same seed and offsets give the same bits on the
simulator and on the GPU, in every launch (`randn` goes through `log`, `sqrt` and `cos`, whose
last bit may differ between NumPy and the GPU's libraries). The high half of a 32x32-bit product
is a u64 multiply and `>> 32`, which tileiras turns into a wide multiply. The handlers are
registered in lower_api.py's `HANDLERS` (imported there), their stubs are in api.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.values import Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, TileType, tile_type
from .rules import TileRules

LocOf = Callable[[str], Location]

ROUND_A = 0xD2511F53  # Philox4x32's multiplier of counter word 0
ROUND_B = 0xCD9E8D57  # ... and of counter word 2
KEY_A = 0x9E3779B9  # the Weyl increments of key words 0 and 1 between rounds
KEY_B = 0xBB67AE85
MAX_ROUNDS = 16  # Random123 defines Philox4x32 for up to 16 rounds
UNIFORM_SCALE = 4.6566127342e-10  # Triton's; the largest f32 with f32(2**31 - 1) * it < 1
NORMAL_MIN_UNIFORM = 1.0e-7  # Box-Muller's log argument is clamped here (Triton's bound)
TWO_PI = 6.283185307179586
_MASK32 = 0xFFFFFFFF

# A key word: known at compile time (a literal or Const seed) or a u32 scalar tile.
Key = int | Value

_SEED_HELP = (
    "pass an integer seed: a literal, a `tile.Const[int]` or an integer scalar parameter "
    "(`seed: fl.u32`); one seed keys the whole tile, the offsets make the elements differ"
)
_OFFSETS_HELP = "number the elements with 32-bit integers: `tile.arange(N, fl.i32) + base`"


class _Emitter:
    """Emits the elementwise ops of one random-number call, on tiles of one shape."""

    def __init__(self, lw: TileRules, loc: Location, shape: tuple[int, ...]) -> None:
        self.lw, self.loc, self.shape = lw, loc, shape

    def const(self, value: Any, dt: DType) -> Value:
        return self.lw.const(value, dt, self.loc, self.shape)

    def binary(self, kind: str, a: Value, b: Value) -> Value:
        return self.lw.emit(ops.Binary(kind, a, b, self.loc))

    def unary(self, kind: str, a: Value) -> Value:
        return self.lw.emit(ops.Unary(kind, a, self.loc))

    def cast(self, a: Value, dt: DType) -> Value:
        """A conversion; between integers of one width it keeps the bits (a bitcast), to a
        narrower one it truncates, to a wider one it extends by the source's signedness."""
        return a if tile_type(a).dtype == dt else self.lw.emit(ops.Cast(a, dt, self.loc))

    def word(self, k: Key) -> Value:
        """A key word as a u32 tile of the call's shape."""
        if isinstance(k, int):
            return self.const(k, dtypes.u32)
        return self.lw.broadcast_to(k, self.shape, self.loc)


# ------------------------------------------------------------------------------ Philox


def _bump(lw: TileRules, k: Key, step: int, loc: Location) -> Key:
    """k + step mod 2**32: folded when the key is known at compile time."""
    if isinstance(k, int):
        return (k + step) & _MASK32
    return lw.emit(ops.Binary("add", k, lw.const(step, dtypes.u32, loc), loc))


def philox(e: _Emitter, counter: list[Value], k0: Key, k1: Key, n_rounds: int) -> list[Value]:
    """`n_rounds` rounds of Philox4x32 on four u32 tiles of `e`'s shape, keyed by (k0, k1)."""
    u32, u64 = dtypes.u32, dtypes.u64
    a, b, half = e.const(ROUND_A, u64), e.const(ROUND_B, u64), e.const(32, u64)
    c0, c1, c2, c3 = counter
    for r in range(n_rounds):
        p0 = e.binary("mul", e.cast(c0, u64), a)  # the whole 64-bit products
        p2 = e.binary("mul", e.cast(c2, u64), b)
        hi0 = e.cast(e.binary("shr", p0, half), u32)
        hi2 = e.cast(e.binary("shr", p2, half), u32)
        c0, c1, c2, c3 = (
            e.binary("xor", e.binary("xor", hi2, c1), e.word(k0)),
            e.cast(p2, u32),  # the low halves: truncations
            e.binary("xor", e.binary("xor", hi0, c3), e.word(k1)),
            e.cast(p0, u32),
        )
        if r + 1 < n_rounds:
            k0, k1 = _bump(e.lw, k0, KEY_A, e.loc), _bump(e.lw, k1, KEY_B, e.loc)
    return [c0, c1, c2, c3]


def uniform(e: _Emitter, x: Value) -> Value:
    """u32 random bits -> f32 uniform in [0, 1), as Triton's `uint_to_uniform_float`."""
    i32 = dtypes.i32
    v = e.cast(x, i32)  # the bits as a signed value
    negative = e.lw.emit(ops.Compare("lt", v, e.const(0, i32), e.loc))
    flipped = e.binary("xor", v, e.const(-1, i32))  # ~x, which is -x - 1
    folded = e.lw.emit(ops.Select(negative, flipped, v, e.loc))
    return e.binary("mul", e.cast(folded, dtypes.f32), e.const(UNIFORM_SCALE, dtypes.f32))


def normal(e: _Emitter, u0: Value, u1: Value) -> Value:
    """The first output of the Box-Muller transform of two uniforms (Triton's
    `pair_uniform_to_normal`): sqrt(-2 log max(u0, 1e-7)) * cos(2 pi u1), in f32."""
    f32 = dtypes.f32
    u0 = e.binary("max", u0, e.const(NORMAL_MIN_UNIFORM, f32))
    theta = e.binary("mul", e.const(TWO_PI, f32), u1)
    radius = e.unary("sqrt", e.binary("mul", e.const(-2.0, f32), e.unary("log", u0)))
    return e.binary("mul", radius, e.unary("cos", theta))


# ------------------------------------------------------------------------------ operands


def _fn(name: str) -> str:
    return f"`tile.{name}`"


def _key(lw: TileRules, seed: Any, loc: Location, fn: str) -> tuple[Key, Key]:
    """The key words (low, high) of an integer scalar seed widened to 64 bits."""
    if isinstance(seed, Weak) and isinstance(seed.value, int) and not isinstance(seed.value, bool):
        v = seed.value
        if not -(1 << 63) <= v < 1 << 64:
            raise KernelTypeError(
                f"the seed {v} of {_fn(fn)} does not fit in 64 bits",
                loc,
                help="Philox is keyed by 64 bits: use a seed in -2**63 .. 2**64 - 1",
            )
        v &= (1 << 64) - 1
        return v & _MASK32, v >> 32
    t = seed.type if isinstance(seed, Value) else None
    if not isinstance(t, TileType) or not t.dtype.is_int or t.dtype.is_bool or t.shape != ():
        raise KernelTypeError(
            f"the seed of {_fn(fn)} must be an integer scalar, found {_describe(seed)}",
            loc,
            label="not an integer scalar",
            help=_SEED_HELP,
        )
    s = seed
    if t.dtype.is_signed and t.dtype.bits < 64:  # sign-extend first, as Triton's seed.to(u64)
        s = lw.emit(ops.Cast(s, dtypes.i64, loc))
    if tile_type(s).dtype != dtypes.u64:
        s = lw.emit(ops.Cast(s, dtypes.u64, loc))
    high = lw.emit(ops.Binary("shr", s, lw.const(32, dtypes.u64, loc), loc))
    return lw.emit(ops.Cast(s, dtypes.u32, loc)), lw.emit(ops.Cast(high, dtypes.u32, loc))


def _describe(x: Any) -> str:
    if isinstance(x, Weak):
        return f"the {type(x.value).__name__} literal {x.value!r}"
    if isinstance(x, Value) and isinstance(x.type, ArrayParamType):
        return f"the array `{x.name}`"
    if isinstance(x, Value) and isinstance(x.type, TileType):
        name = x.type.dtype.name
        what = f"{'an' if name[0] in 'fi' else 'a'} {name}"  # an i64, an f32, a u32, a bool
        return f"{what} scalar" if x.type.shape == () else f"{what} tile of shape {x.type.shape}"
    return "a tuple" if isinstance(x, tuple) else f"`{getattr(x, 'name', x)}`"


def _counter_word(lw: TileRules, x: Any, loc: Location, fn: str, what: str) -> Value:
    """An i32 or u32 tile (or integer literal) as a u32 tile, bits unchanged."""
    if isinstance(x, Weak) and isinstance(x.value, int) and not isinstance(x.value, bool):
        dt = dtypes.i32 if -(1 << 31) <= x.value < 1 << 31 else dtypes.u32
        x = lw.tile_value(x, loc, dt)  # a literal that fits neither is refused here
    t = x.type if isinstance(x, Value) else None
    if isinstance(t, TileType) and t.dtype in (dtypes.i32, dtypes.u32):
        return x if t.dtype == dtypes.u32 else lw.emit(ops.Cast(x, dtypes.u32, loc))
    wide = isinstance(t, TileType) and t.dtype.is_int and not t.dtype.is_bool
    raise KernelTypeError(
        f"the {what} of {_fn(fn)} must be 32-bit integers (i32 or u32), found {_describe(x)}",
        loc,
        label="not i32 or u32",
        help="convert them: `offsets.astype(fl.u32)` (Philox4x32 counts in 32-bit words)"
        if wide
        else _OFFSETS_HELP,
    )


def _rounds(n_rounds: Any, loc: Location, fn: str) -> int:
    if not (
        isinstance(n_rounds, Weak)
        and isinstance(n_rounds.value, int)
        and not isinstance(n_rounds.value, bool)
    ):
        raise CompileError(
            f"`n_rounds` of {_fn(fn)} must be a compile-time integer",
            loc,
            help="write a literal such as `n_rounds=10` or pass a `tile.Const[int]`: the rounds "
            "are unrolled when the kernel compiles",
        )
    n = n_rounds.value
    if not 1 <= n <= MAX_ROUNDS:
        raise CompileError(
            f"`n_rounds` of {_fn(fn)} must be between 1 and {MAX_ROUNDS}, got {n}",
            loc,
            help="10 (the default) is Philox4x32-10; 7 is the fewest rounds that pass BigCrush",
        )
    return n


def _block(
    lw: TileRules, loc_of: LocOf, fn: str, seed: Any, offsets: Any, n_rounds: Any
) -> list[Value]:
    """The four Philox words of (offsets, 0, 0, 0) keyed by `seed`: `randint4x`."""
    c0 = _counter_word(lw, offsets, loc_of("offsets"), fn, "offsets")
    n = _rounds(n_rounds, loc_of("n_rounds"), fn)
    k0, k1 = _key(lw, seed, loc_of("seed"), fn)
    e = _Emitter(lw, loc_of("offsets"), tile_type(c0).shape)
    zero = e.const(0, dtypes.u32)
    return philox(e, [c0, zero, zero, zero], k0, k1, n)


# ------------------------------------------------------------------------------ handlers


def api_philox(
    lw: TileRules, loc_of: LocOf, seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any
) -> tuple[Value, ...]:
    names = ("c0", "c1", "c2", "c3")
    words = [
        _counter_word(lw, c, loc_of(name), "philox", f"counter word `{name}`")
        for name, c in zip(names, (c0, c1, c2, c3), strict=True)
    ]
    n = _rounds(n_rounds, loc_of("n_rounds"), "philox")
    k0, k1 = _key(lw, seed, loc_of("seed"), "philox")
    words = lw.operands(words, dtypes.u32, loc_of("c0"))  # broadcast to one shape
    e = _Emitter(lw, loc_of("c0"), tile_type(words[0]).shape)
    return tuple(philox(e, words, k0, k1, n))


def api_randint4x(
    lw: TileRules, loc_of: LocOf, seed: Any, offsets: Any, n_rounds: Any
) -> tuple[Value, ...]:
    return tuple(_block(lw, loc_of, "randint4x", seed, offsets, n_rounds))


def api_randint(lw: TileRules, loc_of: LocOf, seed: Any, offsets: Any, n_rounds: Any) -> Value:
    return _block(lw, loc_of, "randint", seed, offsets, n_rounds)[0]


def api_rand(lw: TileRules, loc_of: LocOf, seed: Any, offsets: Any, n_rounds: Any) -> Value:
    words = _block(lw, loc_of, "rand", seed, offsets, n_rounds)
    e = _Emitter(lw, loc_of("offsets"), tile_type(words[0]).shape)
    return uniform(e, words[0])


def api_randn(lw: TileRules, loc_of: LocOf, seed: Any, offsets: Any, n_rounds: Any) -> Value:
    words = _block(lw, loc_of, "randn", seed, offsets, n_rounds)
    e = _Emitter(lw, loc_of("offsets"), tile_type(words[0]).shape)
    return normal(e, uniform(e, words[0]), uniform(e, words[1]))
