"""The functions tile kernels call (`tile.load`, `tile.sum`, ...), as host-side stubs.

Each stub carries the signature the frontend binds a call against and a docstring that is the
reference for its semantics; calling one on the host is an error (E0605, at the caller's
line). The frontend finds the operation by the stub's `__fearless_tile__` name (frontend.py,
`TileLowerer.call_api`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

from ..runtime.location import kernel_only

F = TypeVar("F", bound=Callable[..., Any])


def _kernel_only(fn: F) -> F:
    name = fn.__name__.rstrip("_")

    def host_call(*args: Any, **kwargs: Any) -> Any:
        # E0605, the code of a call across the host/kernel boundary (docs/errors.md), at the
        # user's line
        raise kernel_only(
            f"`tile.{name}`",
            "@tile.kernel",
            "tile operations run on the device; use NumPy on the host",
        )

    host_call.__name__ = fn.__name__
    host_call.__doc__ = fn.__doc__
    host_call.__wrapped__ = fn  # type: ignore[attr-defined]
    host_call.__fearless_tile__ = name  # type: ignore[attr-defined]
    return host_call  # type: ignore[return-value]


def _named(stub: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
    """`stub`, a signature made by a factory, as the kernel-only `tile.<name>` documented by `doc`."""
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    return _kernel_only(stub)


# ---------------------------------------------------------------------------- memory, grid


@_kernel_only
def load(
    t: Any,
    index: Any,
    shape: Any,
    padding: Any = 0,
    latency: Any = None,
    allow_tma: Any = True,
    order: Any = None,
) -> Any:
    """The tile at tile coordinates `index` of shape `shape` from tensor `t` (elements beyond
    `t` read as `padding`, any number or run-time scalar as Triton's `other=`: Tile IR pads
    with 0, -0.0, inf, -inf or nan itself, and the load emulates any other value with a
    `tile.where` on the in-bounds mask, tile/load_padding.py).

    `order` (a compile-time permutation of t's axes, as cuTile Python's `order=`) loads a
    transposed tile: tile axis d runs along t's axis order[d], with `shape[d]` elements and tile
    coordinate `index[d]`. So `tile.load(a, (j, i), (tn, tm), order=(1, 0))[y, x]` is
    `a[i * tm + x, j * tn + y]`, the transpose of `tile.load(a, (i, j), (tm, tn))`.

    Hints for tileiras, compile-time constants: `latency` (1-10, how long the load is expected
    to take, which sets how far ahead it is issued) and `allow_tma=False` (no TMA for it)."""


@_kernel_only
def load_like(
    t: Any, part: Any, padding: Any = 0, latency: Any = None, allow_tma: Any = True
) -> Any:
    """The tile of `t` at `part`'s index with `part`'s shape (t may be the Part itself);
    `padding`, `latency` and `allow_tma` as for `tile.load`."""


@_kernel_only
def block_id(axis: Any) -> Any:
    """This block's coordinate along grid `axis` (i32)."""


@_kernel_only
def num_blocks(axis: Any) -> Any:
    """The number of blocks along grid `axis` (i32)."""


@_kernel_only
def num_tiles(t: Any, axis: Any, shape: Any) -> Any:
    """How many tiles of `shape` cover `t` along `axis`: cdiv(t.shape[axis], shape[axis])."""


@_kernel_only
def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of integers."""


# ------------------------------------------------- gather, scatter, atomics (indexed.py)


@_kernel_only
def gather(t: Any, indices: Any, mask: Any = None, padding: Any = 0) -> Any:
    """The elements of tensor `t` at `indices`: one integer tile per axis (a tuple; one tile
    for a 1-D `t`), broadcast together; the result has their shape. Coordinates outside `t`
    (negative ones too), and elements where `mask` is false, read `padding`."""


@_kernel_only
def scatter(t: Any, indices: Any, value: Any, mask: Any = None) -> Any:
    """Write `value` (broadcast to the indices' shape) at `indices` of `t`, a `tile.Atomic`:
    coordinates outside `t` and masked-off elements are dropped. Where several elements (or
    blocks) write one place, one of the values lands whole."""


class MemoryOrder(enum.Enum):
    """The memory ordering of an atomic (cuTile Python's names; Tile IR's memory model), the
    `memory_order=` of `tile.atomic_*`: ACQ_REL (the default) orders this block's other reads
    and writes around it, so that it can publish or take data (a lock, a flag); RELAXED keeps
    only the update itself atomic, which is all an accumulation needs (a sum where only the
    final value is read, after the kernel), and lets the GPU batch the updates (vector `red`
    instructions instead of one ordered `atom` a value). ACQUIRE and RELEASE are the halves."""

    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


def _atomic(mode: str, doc: str) -> Callable[..., Any]:
    """The stub of `tile.atomic_<mode>(t, indices, value, mask=None, memory_order=None)`
    (tile/indexed.py)."""

    def stub(
        t: Any, indices: Any, value: Any, mask: Any = None, memory_order: Any = None
    ) -> Any: ...

    doc = (
        f"{doc} at `indices` of `t` (a `tile.Atomic`); returns the old values. `memory_order`:"
        " a `tile.MemoryOrder` or its name, compile-time (None: ACQ_REL)."
    )
    return _named(stub, f"atomic_{mode}", doc)


atomic_add = _atomic("add", "Atomically add `value`")
atomic_max = _atomic("max", "Atomic max (integer `t`)")
atomic_min = _atomic("min", "Atomic min (integer `t`)")
atomic_xchg = _atomic("xchg", "Atomically store `value`")
atomic_and = _atomic("and", "Atomic bitwise and (integer `t`)")
atomic_or = _atomic("or", "Atomic bitwise or (integer `t`)")
atomic_xor = _atomic("xor", "Atomic bitwise xor (integer `t`)")


def _atomic_store(mode: str, doc: str) -> Callable[..., Any]:
    """The stub of `tile.atomic_store_<mode>(t, index, value)` (tile/indexed.py)."""

    def stub(t: Any, index: Any, value: Any) -> None: ...

    doc = (
        f"{doc} into tile `index` of `t` (a `tile.Atomic`), tiles of `value`'s shape counted "
        f"as `tile.load` counts them (cuTile Python's `TiledView.atomic_store_{mode}`): each "
        "element is one relaxed atomic update, what falls outside `t` is dropped, and no old "
        "values come back. Many blocks may update one tile."
    )
    return _named(stub, f"atomic_store_{mode}", doc)


atomic_store_add = _atomic_store(
    "add",
    "Atomically add the tile `value` (flash attention's dQ: "
    "`tile.atomic_store_add(dq, (b, h, i, 0), part.reshape((1, 1, M, D)))`)",
)
atomic_store_max = _atomic_store("max", "Atomic max with the tile `value` (integer `t`)")
atomic_store_min = _atomic_store("min", "Atomic min with the tile `value` (integer `t`)")
atomic_store_and = _atomic_store("and", "Atomic bitwise and with the tile `value` (integer `t`)")
atomic_store_or = _atomic_store("or", "Atomic bitwise or with the tile `value` (integer `t`)")
atomic_store_xor = _atomic_store("xor", "Atomic bitwise xor with the tile `value` (integer `t`)")


@_kernel_only
def atomic_cas(
    t: Any, indices: Any, expected: Any, desired: Any, mask: Any = None, memory_order: Any = None
) -> Any:
    """Per element, atomically: where `t[indices]` equals `expected`, write `desired`; returns
    the old values (a lock: `tile.atomic_cas(locks, i, 0, 1) == 0` took it). `memory_order` as
    the other atomics'."""


class RoundingMode(enum.Enum):
    """How `tile.truediv` rounds (cuTile Python's names): NEAREST_EVEN, IEEE division (the
    default and `/`); APPROX, the hardware's fast reciprocal-based division (f32, a few ulp);
    FULL, full-range division in about 2 ulp (f32)."""

    NEAREST_EVEN = "nearest_even"
    APPROX = "approx"
    FULL = "full"


@_kernel_only
def truediv(a: Any, b: Any, rounding_mode: Any = None, flush_to_zero: Any = False) -> Any:
    """a / b for float tiles, rounded as `rounding_mode` says (a `tile.RoundingMode` or its
    name as a string in any case, `"approx"`, a compile-time constant; None is NEAREST_EVEN,
    as `/`); `flush_to_zero=True` (f32) treats
    subnormal inputs and results as zero. The simulator computes the exact quotient for every
    mode (APPROX and FULL differ from it on the GPU by a few ulp)."""


# ------------------------------------------------------------------------------ creation


@_kernel_only
def zeros(shape: Any, dtype: Any) -> Any:
    """A tile of zeros."""


@_kernel_only
def ones(shape: Any, dtype: Any) -> Any:
    """A tile of ones."""


@_kernel_only
def full(shape: Any, value: Any, dtype: Any) -> Any:
    """A tile with every element `value`."""


@_kernel_only
def arange(n: Any, dtype: Any = None) -> Any:
    """[0, 1, ..., n-1] (n a power of two); i32 unless `dtype` says otherwise."""


# ----------------------------------------------------------------------------- elementwise


@_kernel_only
def exp(x: Any, approx: Any = False) -> Any:
    """e**x, elementwise. `approx=True` (a compile-time bool) uses the hardware's fast exp2:
    a few ulp of error, much cheaper; the simulator computes the exact value either way."""


@_kernel_only
def tanh(x: Any, approx: Any = False) -> Any:
    """Hyperbolic tangent, elementwise. `approx=True` (a compile-time bool, f32 tiles) uses the
    hardware's tanh (tanh.approx.f32: about 2^-11 relative error, one instruction instead of
    an exp and a reciprocal); the simulator computes the exact value either way."""


@_kernel_only
def exp2(x: Any, flush_to_zero: Any = False) -> Any:
    """2**x, elementwise. `flush_to_zero=True` (a compile-time bool, f32 tiles) flushes
    subnormal inputs and results to zero of the same sign, as the hardware's ex2.ftz does."""


def _unary(name: str, doc: str) -> Callable[..., Any]:
    """The stub of an elementwise `tile.<name>(x)`."""

    def stub(x: Any) -> Any: ...

    return _named(stub, name, doc)


def _binary(name: str, doc: str) -> Callable[..., Any]:
    """The stub of an elementwise `tile.<name>(x, y)` (the two broadcast together)."""

    def stub(x: Any, y: Any) -> Any: ...

    return _named(stub, name, doc)


log = _unary("log", "Natural logarithm, elementwise.")
log2 = _unary("log2", "Base-2 logarithm, elementwise.")
sqrt = _unary("sqrt", "Square root, elementwise.")
rsqrt = _unary("rsqrt", "1 / sqrt(x), elementwise.")
sin = _unary("sin", "Sine, elementwise.")
cos = _unary("cos", "Cosine, elementwise.")
abs_ = _unary("abs_", "|x|, elementwise (also the builtin `abs(x)`).")
floor = _unary("floor", "Round down, elementwise.")
ceil = _unary("ceil", "Round up, elementwise.")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x)), elementwise.")
erf = _unary(
    "erf",
    "The error function, elementwise (f32, f16 and bf16 tiles; computed in f32): Tile IR "
    "has no erf, so it is a rational approximation of tile ops, about 4e-7 relative error "
    "(tile/special.py).",
)
tan = _unary("tan", "Tangent, elementwise.")
sinh = _unary("sinh", "Hyperbolic sine, elementwise.")
cosh = _unary("cosh", "Hyperbolic cosine, elementwise.")
isnan = _unary("isnan", "Whether each element is NaN (a bool tile; False for integer tiles).")
negative = _unary("negative", "`-x`, elementwise (cuTile's function form).")
bitwise_not = _unary("bitwise_not", "`~x` of an integer or bool tile, elementwise.")
maximum = _binary("maximum", "Elementwise maximum (NaN wins), broadcasting.")
minimum = _binary("minimum", "Elementwise minimum (NaN wins), broadcasting.")
bitwise_and = _binary(
    "bitwise_and", "Elementwise `x & y` of integer (or bool) tiles, broadcasting."
)
bitwise_or = _binary("bitwise_or", "Elementwise `x | y` of integer (or bool) tiles, broadcasting.")
bitwise_xor = _binary(
    "bitwise_xor", "Elementwise `x ^ y` of integer (or bool) tiles, broadcasting."
)
# cuTile Python's function forms of the operators
add = _binary("add", "`x + y`, broadcasting.")
sub = _binary("sub", "`x - y`, broadcasting.")
mul = _binary("mul", "`x * y`, broadcasting.")
floordiv = _binary("floordiv", "`x // y` (Python's: rounding toward -inf), broadcasting.")
mod = _binary("mod", "`x % y` (Python's: the divisor's sign), broadcasting.")
pow = _binary("pow", "`x ** y`, broadcasting (an int tile by a literal exponent only).")
bitwise_lshift = _binary("bitwise_lshift", "`x << y` of integer tiles, broadcasting.")
bitwise_rshift = _binary("bitwise_rshift", "`x >> y` of integer tiles, broadcasting.")
matmul = _binary("matmul", "`x @ y`: the matrix product of two 2-d tiles (`tile.mma` into zeros).")
equal = _binary("equal", "`x == y`, broadcasting (a bool tile).")
not_equal = _binary("not_equal", "`x != y`, broadcasting (a bool tile).")
less = _binary("less", "`x < y`, broadcasting (a bool tile).")
less_equal = _binary("less_equal", "`x <= y`, broadcasting (a bool tile).")
greater = _binary("greater", "`x > y`, broadcasting (a bool tile).")
greater_equal = _binary("greater_equal", "`x >= y`, broadcasting (a bool tile).")


@_kernel_only
def atan2(x1: Any, x2: Any) -> Any:
    """The angle of (x2, x1) in radians, in [-pi, pi], elementwise (float tiles, broadcasting),
    as NumPy's arctan2."""


@_kernel_only
def static_iter(iterable: Any) -> Any:
    """cuTile's `ct.static_iter`, only as a loop's iterable: `for i in
    tile.static_iter(range(4)):` unrolls the loop at compile time, the target a compile-time
    value in each copy of the body (tile/static_loops.py)."""


@_kernel_only
def bid(axis: Any) -> Any:
    """cuTile's `ct.bid`: this block's coordinate along grid `axis` (`tile.block_id`)."""


@_kernel_only
def cat(tiles: Any, axis: Any) -> Any:
    """cuTile's `ct.cat((x, y), axis)`: x then y along `axis` (a compile-time int); the other
    axes must agree and the result's extent along `axis` be a power of two."""


@_kernel_only
def where(cond: Any, x: Any, y: Any) -> Any:
    """x where cond is true, else y; all three broadcast."""


# ------------------------------------------------------------------------------ shape ops


@_kernel_only
def sum(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Sum over `axis` (all axes when None)."""


@_kernel_only
def prod(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Product over `axis` (all axes when None)."""


@_kernel_only
def cumsum(x: Any, axis: Any = 0, reverse: Any = False) -> Any:
    """Inclusive prefix sums along `axis` (cuTile's `ct.cumsum`), from the end when `reverse`;
    f16 and bf16 sum in f32, each prefix rounded once."""


@_kernel_only
def cumprod(x: Any, axis: Any = 0, reverse: Any = False) -> Any:
    """Inclusive prefix products along `axis` (cuTile's `ct.cumprod`), as `cumsum`."""


@_kernel_only
def argmax(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """The i32 index of the first maximum along `axis` (of the row-major flattened tile when
    None); a NaN counts as the maximum, as in NumPy."""


@_kernel_only
def argmin(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """The i32 index of the first minimum along `axis` (as `argmax`)."""


@_kernel_only
def max(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Maximum over `axis` (all axes when None)."""


@_kernel_only
def min(x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    """Minimum over `axis` (all axes when None)."""


@_kernel_only
def mma(a: Any, b: Any, acc: Any) -> Any:
    """acc + a @ b on the tensor cores: a (M, K), b (K, N), acc (M, N)."""


@_kernel_only
def transpose(x: Any, axis0: Any = None, axis1: Any = None) -> Any:
    """cuTile's `ct.transpose(x, axis0, axis1)`: swap two axes; with no axes, reverse them all,
    as NumPy's `transpose` does (a 2-d tile's transpose; a (2, 4, 8) tile becomes (8, 4, 2)).
    NumPy's form, one tuple of all the axes, permutes them."""


@_kernel_only
def item(x: Any) -> Any:
    """The value of a one-element tile as a 0-d tile (cuTile's `Tile.item()`; also `x.item()`)."""


@_kernel_only
def permute(x: Any, axes: Any) -> Any:
    """Reorder the axes: axis i of the result is axis `axes[i]` of `x`."""


@_kernel_only
def expand_dims(x: Any, axis: Any) -> Any:
    """`x` with a new axis of extent 1 at `axis` (also `x[:, None]`)."""


@_kernel_only
def reshape(x: Any, shape: Any) -> Any:
    """The same elements in row-major order with another shape."""


@_kernel_only
def extract(x: Any, index: Any, shape: Any) -> Any:
    """cuTile's `ct.extract`: the sub-tile of `shape` at `index` of tile `x`, the index counted
    in units of `shape` (`tile.extract(t, (0, 1), (16, 16))` of a (16, 64) tile is its columns
    16 to 31). Index and shape are compile-time; each shape dimension divides x's."""


@_kernel_only
def bitcast(x: Any, dtype: Any) -> Any:
    """The same bits read as `dtype`, of the same width (f32 and i32, bf16 and u16, ...)."""


@_kernel_only
def static_assert(cond: Any, msg: Any = None) -> Any:
    """Stop the compile with `msg` where the compile-time `cond` is false (a Const, a shape,
    a dtype comparison)."""


@_kernel_only
def broadcast_to(x: Any, shape: Any) -> Any:
    """Broadcast `x` to `shape` with NumPy's rules."""


@_kernel_only
def astype(x: Any, dtype: Any) -> Any:
    """`x` converted to `dtype` (also the method `x.astype(dtype)`)."""


# ------------------------------------------------------------------ random numbers (random.py)


@_kernel_only
def randint(seed: Any, offsets: Any, n_rounds: Any = 10) -> Any:
    """A u32 tile of random bits, one element per offset: word 0 of Philox4x32 with counter
    (offsets, 0, 0, 0) and key `seed`, as Triton's `tl.randint` (whose result is u32 too).

    `seed`: an integer scalar (literal, `tile.Const[int]` or scalar parameter of any int dtype),
    widened to 64 bits (signed ones by sign extension): its low and high halves are the key.
    `offsets`: an i32 or u32 tile (or literal), e.g. `tile.arange(N, fl.i32) + base`, read as
    u32. `n_rounds`: a compile-time int in 1..16. The same seed and offsets give the same bits
    on the simulator and the GPU, in every launch."""


@_kernel_only
def randint4x(seed: Any, offsets: Any, n_rounds: Any = 10) -> Any:
    """The four u32 words of Philox4x32 for counter (offsets, 0, 0, 0) and key `seed`, as a
    tuple: `r0, r1, r2, r3 = tile.randint4x(seed, offs)` (`r0` is `tile.randint`'s)."""


@_kernel_only
def rand(seed: Any, offsets: Any, n_rounds: Any = 10) -> Any:
    """An f32 tile uniform in [0, 1): `tile.randint(seed, offsets)` converted as Triton's
    `tl.rand` does (the bits read as i32, x < 0 -> -x - 1, times 4.6566127342e-10)."""


@_kernel_only
def randn(seed: Any, offsets: Any, n_rounds: Any = 10) -> Any:
    """An f32 tile of standard normal numbers, as Triton's `tl.randn`: with u0, u1 the uniforms
    (as `tile.rand`) of Philox words 0 and 1, sqrt(-2 log max(u0, 1e-7)) * cos(2 pi u1)."""


@_kernel_only
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = 10) -> Any:
    """Philox4x32 itself (Triton's `tl.philox`): the four u32 words for the counter
    (c0, c1, c2, c3), i32/u32 tiles or literals that broadcast together, keyed by `seed` as
    in `tile.randint`."""


_STUBS: tuple[Callable[..., Any], ...] = (
    load, load_like, block_id, num_blocks, num_tiles, cdiv, zeros, ones, full, arange, exp, exp2,
    log, log2, sqrt, rsqrt, tanh, sin, cos, abs_, floor, ceil, sigmoid, maximum, minimum,
    where, sum, prod, max, min, argmax, argmin, cumsum, cumprod, mma, transpose, item, reshape,
    broadcast_to, astype, extract, bitcast, static_assert,
    bitwise_and, bitwise_or, bitwise_xor, permute, expand_dims,
    add, sub, mul, floordiv, mod, pow, bitwise_lshift, bitwise_rshift, cat,
    tan, sinh, cosh, erf, isnan, negative, bitwise_not, matmul, equal, not_equal, less, less_equal,
    greater, greater_equal, atan2, bid, static_iter,
    gather, scatter, atomic_add, atomic_max, atomic_min, atomic_xchg, atomic_and, atomic_or,
    atomic_xor, atomic_cas, atomic_store_add, atomic_store_max, atomic_store_min,
    atomic_store_and, atomic_store_or, atomic_store_xor, truediv,
    randint, randint4x, rand, randn, philox,
)  # fmt: skip

# The stubs by tile name; each also carries `__wrapped__`, the function whose signature calls
# are bound against (set by `_kernel_only`, hence the ignores where they are read).
KERNEL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__fearless_tile__: f  # type: ignore[attr-defined]
    for f in _STUBS
}
