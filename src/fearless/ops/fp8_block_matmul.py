"""DeepSeek-V3's block-scaled fp8 GEMM (DESIGN 2c): `fearless.ops.w8a8_block_fp8_matmul`, on
the kernel of ops/kernels_fp8_block.py.

What it takes (TileGym's `w8a8_block_fp8_matmul`, tilegym/suites/unsloth/ops.py and its cuTile
kernel in suites/unsloth/cutile/fp8.py; vLLM's of fp8_utils.py has the same layouts):
  - A (..., K) and B (N, K), one fp8 dtype (f8e4m3fn, DeepSeek-V3's, or f8e5m2);
  - As (..., ceil(K / block_k)) f32: one scale per row of A and block of block_k columns;
  - Bs (ceil(N / block_n), ceil(K / block_k)) f32: one scale per (block_n, block_k) block of B;
  - block_size [block_n, block_k] (default [128, 128]); output_dtype f32 (the default,
    TileGym's; vLLM's is f16), f16 or bf16 (torch dtypes, fearless dtypes or NumPy /
    ml_dtypes ones).
It returns C (..., N) = (A * As) @ (B * Bs)^T, the scales broadcast over their blocks (the
last blocks may be partial), summed in f32: per K block the fp8 tiles are multiplied on the
tensor cores into an f32 partial, which the block's scales multiply before it joins the sum.
K must be a multiple of 16 (fp8 rows of whole 16-byte units, as the fp8 tensor-core steps and
the TMA loads take them; TileGym's kernel loads through TMA too) and block_k too (the kernel's
K step divides it); shapes and scale shapes that do not match, other dtypes and other block
sizes are refused (E0701) with what was expected. Forward only: an input that requires grad
is refused at the call (ops/torch_ops.py), never detached.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..runtime.arrays import torch_dtype_of
from ..runtime.location import argument_error
from ._arguments import dtype_or_none
from ._io import Operand, full, operand, output, result, view
from ._replay import replayable
from ._route import torch_ops
from .kernels_fp8_block import fp8_block_matmul_tuned

OP = "w8a8_block_fp8_matmul"
FP8 = (dtypes.f8e4m3fn, dtypes.f8e5m2)
OUTPUTS = (dtypes.f32, dtypes.f16, dtypes.bf16)
K_GRANULE = 16  # fp8 rows of whole 16-byte units: TMA's strides, the tensor cores' K steps


@replayable()
def w8a8_block_fp8_matmul(
    A: Any,
    B: Any,
    As: Any,
    Bs: Any,
    block_size: Any = None,
    output_dtype: Any = None,
) -> Any:
    """TileGym's `w8a8_block_fp8_matmul`: (A * As) @ (B * Bs)^T for fp8 A (..., K) and B
    (N, K) with f32 scales per (row, block_k columns) of A and per (block_n, block_k) block of
    B, summed in f32; returns (..., N) in output_dtype (default f32). Forward only."""
    block_n, block_k = _block_size(block_size)
    out_dt = _output_dtype(output_dtype)
    if (t := torch_ops(A, B, As, Bs)) is not None:
        blocks = [block_n, block_k]
        return t.w8a8_block_fp8_matmul(A, B, As, Bs, blocks, torch_dtype_of(out_dt))
    a = _fp8(operand(A, OP, "A"), "A")
    dev = a.tensor.device
    b = _fp8(operand(B, OP, "B", device=dev), "B")
    if b.dtype != a.dtype:
        raise argument_error(
            f"`fearless.ops.{OP}` needs A and B of one fp8 dtype, got {a.dtype.name} and "
            f"{b.dtype.name}",
            help="quantize both to float8_e4m3fn (DeepSeek-V3's)",
        )
    a_s = operand(As, OP, "As", (dtypes.f32,), device=dev)
    b_s = operand(Bs, OP, "Bs", (dtypes.f32,), device=dev)
    m, n, k = _check_shapes(a, b, a_s, b_s, block_n, block_k)
    lead = a.shape[:-1]
    if m * n == 0 or k == 0:
        return result(a, *_zeros(a, (*lead, n), out_dt))
    out, ret = output(a, (*lead, n), out_dt)
    a2, s2 = view(a.tensor, (m, k)), view(a_s.tensor, (m, a_s.shape[-1]))
    c2 = view(out, (m, n))
    fp8_block_matmul_tuned(c2, a2, b.tensor, s2, b_s.tensor, block_n, block_k)
    return result(a, out, ret)


def _fp8(x: Operand, name: str) -> Operand:
    """x, an fp8 operand; E0701 for any other dtype (converting would not quantize it)."""
    if x.dtype not in FP8:
        raise argument_error(
            f"`fearless.ops.{OP}` takes fp8 (f8e4m3fn or f8e5m2) A and B, but `{name}` is "
            f"{x.dtype.name}",
            help=f"quantize `{name}` to float8_e4m3fn with one f32 scale per block (its "
            "largest magnitude / 448), and pass the scales",
        )
    return x


def _zeros(like: Operand, shape: tuple[int, ...], dtype: DType) -> tuple[Any, Any]:
    """A zero-filled output of `shape` in `dtype`, in like's kind: a product over no K, or
    an empty one."""
    if like.kind == "torch":
        out, ret = output(like, shape, dtype)
        ret.zero_()
        return out, ret
    t = full(like, shape, 0.0, dtype)
    return t, t


def _block_size(block_size: Any) -> tuple[int, int]:
    """[block_n, block_k] as two ints ([128, 128] for None); E0701 for anything the kernel
    cannot take."""
    if block_size is None:
        return 128, 128
    try:
        if isinstance(block_size, (str, bytes)) or len(block_size) != 2:
            raise TypeError
        if any(isinstance(v, bool) for v in block_size):
            raise TypeError
        block_n, block_k = (operator.index(v) for v in block_size)
    except TypeError:
        raise argument_error(
            f"`block_size` of `fearless.ops.{OP}` must be [block_n, block_k], two ints, got "
            f"{block_size!r:.60}",
            help="pass e.g. `block_size=[128, 128]` (DeepSeek-V3's), or None for that",
        ) from None
    if block_n < 1 or block_k < 1 or block_k % K_GRANULE:
        raise argument_error(
            f"`fearless.ops.{OP}` takes block_n >= 1 and block_k a positive multiple of "
            f"{K_GRANULE} (each K step of the fp8 tensor cores lies in one scale block), got "
            f"block_size [{block_n}, {block_k}]",
            help="quantize with block_k 128 (DeepSeek-V3's), 64 or another multiple of 16",
        )
    return block_n, block_k


def _output_dtype(value: Any) -> DType:
    """output_dtype as a DType: f32 for None (TileGym's default), f16 or bf16."""
    if value is None:
        return dtypes.f32
    dt = dtype_or_none(value)
    if dt not in OUTPUTS:
        raise argument_error(
            f"`output_dtype` of `fearless.ops.{OP}` must be float32, float16 or bfloat16, got "
            f"{value!r:.40}",
            help="pass e.g. `output_dtype=torch.bfloat16` (or None for float32, TileGym's default)",
        )
    return dt


def _check_shapes(
    a: Operand, b: Operand, a_s: Operand, b_s: Operand, block_n: int, block_k: int
) -> tuple[int, int, int]:
    """(M, N, K) of A (..., K) and B (N, K) once every shape matches; E0701 otherwise."""
    if len(a.shape) < 1 or len(b.shape) != 2:
        raise argument_error(
            f"`fearless.ops.{OP}` multiplies A (..., K) by B (N, K)^T, got A {a.shape} and "
            f"B {b.shape}",
            help="B is the weight, (out_features, in_features), as nn.Linear's",
        )
    k = a.shape[-1]
    n = b.shape[0]
    if b.shape[1] != k:
        raise argument_error(
            f"`fearless.ops.{OP}` needs A (..., K) and B (N, K) of one K, got A {a.shape} and "
            f"B {b.shape}",
            help="B is the weight, (out_features, in_features), as nn.Linear's",
        )
    if k % K_GRANULE:
        raise argument_error(
            f"`fearless.ops.{OP}` needs K (A's last axis, {k}) a multiple of {K_GRANULE}: its "
            "fp8 tensor-core steps and tensor-memory-accelerator loads take rows of whole "
            "16-byte units",
            help=f"pad K to {-(-k // K_GRANULE) * K_GRANULE} with zeros in A and B (and "
            "their scale blocks)",
        )
    kb, nb = -(-k // block_k), -(-n // block_n)
    want_as = (*a.shape[:-1], kb)
    if a_s.shape != want_as:
        raise argument_error(
            f"`As` of `fearless.ops.{OP}` must be {want_as} (A's rows, ceil(K / block_k) = "
            f"ceil({k} / {block_k})), got {a_s.shape}",
            help="one f32 scale per row of A and block of block_k columns: check block_size",
        )
    if b_s.shape != (nb, kb):
        raise argument_error(
            f"`Bs` of `fearless.ops.{OP}` must be {(nb, kb)} (ceil(N / block_n) = "
            f"ceil({n} / {block_n}), ceil(K / block_k) = ceil({k} / {block_k})), got "
            f"{b_s.shape}",
            help="one f32 scale per (block_n, block_k) block of B: check block_size",
        )
    return math.prod(a.shape[:-1]), n, k
