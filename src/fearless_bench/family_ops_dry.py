"""The ops family's dry run: each op of fearless.ops, variant and dtype once, on the simulator.

At a small ragged shape per op (DRY_SHAPES, in `Spec.shape`'s terms: partial tiles
in every kernel, the GPU grid's head count and head_dim for rope), through the same
`fearless.ops` call as the GPU run, against NumPy in float64 on the dtype-rounded inputs.
Dropout is checked as on the GPU: kept elements x / (1 - p), dropped ones 0, the kept fraction
within 6 sigma of 1 - p.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry
from .family_ops_attention import ATTENTION_DRY_SHAPES, dry_body, small
from .family_ops_base import EPS_LN, EPS_RMS, FAMILY, P_DROP, SEED, Spec
from .family_ops_cases import rotary_tables, specs
from .family_ops_more import MORE_DRY_SHAPES, more_dry_body
from .family_ops_ssm import SSM_DRY_SHAPES, ssm_dry_body
from .model import FEARLESS_TILE, Record
from .peers import Peers

# Small ragged shapes (in Spec.shape's terms): partial tiles in every kernel, the GPU grid's
# head count and head_dim for rope.
DRY_SHAPES: dict[str, tuple[int, ...]] = {
    "softmax": (6, 37),
    "rms_norm": (6, 37),
    "layer_norm": (6, 37),
    "matmul": (37, 24, 56),
    "bmm": (2, 37, 24, 56),
    "group_gemm": (2, 37, 24, 56),
    "relu": (3000,),
    "gelu": (3000,),
    "dropout": (4096,),
    "silu_and_mul": (5, 96),
    "swiglu": (2, 5, 37),
    "geglu": (2, 5, 80),
    "rope": (1, 16, 7, 64),
    "transpose": (37, 70),
    "attention": (2, 2, 37, 40),
    **ATTENTION_DRY_SHAPES,  # family_ops_attention.py's ops (their dry runs are there too)
    **MORE_DRY_SHAPES,
    **SSM_DRY_SHAPES,
}


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """Each op, variant and dtype once, on the simulator at its DRY_SHAPES shape, against
    NumPy in float64 on the dtype-rounded inputs (the record's `covers`: the cases it stands
    for; the autotuned ops tune on the simulator too)."""
    rng = np.random.default_rng(23)
    groups: dict[str, list[Spec]] = {}
    for s in specs():
        if s.name in selected:
            groups.setdefault(s.group, []).append(s)
    out: list[Record] = []
    for group, members in groups.items():
        first = members[0]
        attn = first.op in ATTENTION_DRY_SHAPES
        little = small(first) if attn else Spec(first.op, first.dtype, DRY_SHAPES[first.op], first.variant)  # fmt: skip
        params = {k: v for k, v in little.params().items() if k != "tilegym_op"}
        params["covers"] = [m.name for m in members]
        body = dry_body(little, rng) if attn else _dry_body(little, rng)
        out.append(dry.dry_record(group, FAMILY, FEARLESS_TILE, little.dtype, body, **params))
    return out


def _values(t: Any, dt: str) -> np.ndarray:
    """An fl.Tensor's values as float64 (bf16 stored as ml_dtypes' bfloat16 or raw bits)."""
    from .check import bf16_to_f32

    host = t.numpy()
    return np.asarray(bf16_to_f32(host) if dt == "bf16" else host, dtype=np.float64)


def _gelu_np(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _silu_np(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def _dry_body(s: Spec, rng: np.random.Generator) -> Callable[[], float]:
    """Compile and simulate `s` through fearless.ops: the relative error against NumPy."""
    if s.op in MORE_DRY_SHAPES:  # family_ops_more's ops: their GPU builders on CPU tensors
        return more_dry_body(s)
    if s.op in SSM_DRY_SHAPES:  # family_ops_ssm's: likewise
        return ssm_dry_body(s)

    def body() -> float:
        import fearless as fl
        from fearless import ops

        from .check import rel_err_numpy

        want = fl.dtypes.BY_NAME[s.dtype]

        def arr(*shape: int) -> tuple[Any, np.ndarray]:
            t = fl.asarray(rng.standard_normal(shape).astype(np.float32), dtype=want)
            return t, _values(t, s.dtype)

        def err(got: Any, ref: np.ndarray) -> float:
            return rel_err_numpy(_values(got, s.dtype), ref)

        op, shape, v = s.op, s.shape, s.variant
        if op in ("softmax", "rms_norm", "layer_norm"):
            (x, xv), (w, wv), (b, bv) = arr(*shape), arr(shape[1]), arr(shape[1])
            n = shape[1]
            if op == "softmax":
                e = np.exp(xv - xv.max(axis=1, keepdims=True))
                return err(ops.softmax(x), e / e.sum(axis=1, keepdims=True))
            if op == "rms_norm":
                ref = xv / np.sqrt((xv * xv).mean(axis=1, keepdims=True) + EPS_RMS) * wv
                return err(ops.rms_norm(x, (n,), w, EPS_RMS), ref)
            mu, var = xv.mean(axis=1, keepdims=True), xv.var(axis=1, keepdims=True)
            ref = (xv - mu) / np.sqrt(var + EPS_LN) * wv + bv
            return err(ops.layer_norm(x, (n,), w, b, EPS_LN), ref)
        if op == "matmul":
            m, n, k = shape
            (a, av), (b, bv) = arr(m, k), arr(k, n)
            return err(ops.matmul(a, b), av @ bv)
        if op == "bmm":
            c, m, n, k = shape
            (a, av), (b, bv) = arr(c, m, k), arr(c, k, n)
            return err(ops.bmm(a, b), av @ bv)
        if op == "group_gemm":
            c, m, n, k = shape
            pairs = [(arr(m, k), arr(k, n)) for _ in range(c)]
            outs = ops.group_gemm([a for (a, _), _ in pairs], [b for _, (b, _) in pairs])
            got = np.concatenate([_values(o, s.dtype).reshape(-1) for o in outs])
            ref = np.concatenate([(av @ bv).reshape(-1) for (_, av), (_, bv) in pairs])
            return rel_err_numpy(got, ref)
        if op == "relu":
            x, xv = arr(*shape)
            return err(ops.relu(x), np.maximum(xv, 0))
        if op == "gelu":
            x, xv = arr(*shape)
            return err(ops.gelu(x, approximate=v), _gelu_np(xv, v))
        if op == "swiglu":
            (a, av), (b, bv) = arr(*shape), arr(*shape)
            return err(ops.swiglu(a, b), _silu_np(av) * bv)
        if op in ("silu_and_mul", "geglu"):
            x, xv = arr(*shape)
            d = shape[-1] // 2
            gate, up = xv[..., :d], xv[..., d:]
            if op == "silu_and_mul":
                return err(ops.silu_and_mul(x), _silu_np(gate) * up)
            return err(ops.geglu(x, approximate=v), gate * _gelu_np(up, v))  # TileGym's halves
        if op == "dropout":
            x, xv = arr(*shape)
            y = _values(ops.dropout(x, P_DROP, True, seed=SEED), s.dtype)
            keep = y != 0
            sigma = math.sqrt(P_DROP * (1 - P_DROP) / y.size)
            excess = max(0.0, abs(keep.mean() - (1 - P_DROP)) - 6 * sigma)
            scaled = xv / (1 - P_DROP)
            dev = np.linalg.norm(y - keep * scaled) / np.linalg.norm(scaled)
            return rel_err_numpy(np.array([1 + excess, 1 + dev]), np.ones(2))
        if op == "rope":
            (q, qv), (k, kv) = arr(*shape), arr(*shape)
            cos_np, sin_np = rotary_tables(shape[2], shape[3])
            cos = fl.asarray(cos_np[None].astype(np.float32), dtype=want)
            sin = fl.asarray(sin_np[None].astype(np.float32), dtype=want)
            cv, sv = _values(cos, s.dtype), _values(sin, s.dtype)
            qo, ko = ops.rope(q, k, cos, sin)
            got = np.concatenate([_values(qo, s.dtype), _values(ko, s.dtype)])
            ref = np.concatenate([rope_numpy(qv, cv, sv), rope_numpy(kv, cv, sv)])
            return rel_err_numpy(got, ref)
        if op == "attention":
            (q, qv), (k, kv), (w, wv) = arr(*shape), arr(*shape), arr(*shape)
            if v == "decode":  # one query per head
                (q, qv) = arr(shape[0], shape[1], 1, shape[3])
            scores = qv @ kv.swapaxes(-1, -2) / math.sqrt(shape[3])
            if v == "causal":
                scores = scores + np.triu(np.full(scores.shape[-2:], -np.inf), 1)
            e = np.exp(scores - scores.max(axis=-1, keepdims=True))
            ref = e / e.sum(axis=-1, keepdims=True) @ wv
            return err(ops.scaled_dot_product_attention(q, k, w, is_causal=v == "causal"), ref)
        x, xv = arr(*shape)  # transpose
        return err(ops.transpose(x), xv.T)

    return body


def rope_numpy(q: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Hugging Face's rotation: q * cos + rotate_half(q) * sin, cos and sin (1, S, D)."""
    half = q.shape[-1] // 2
    rotated = np.concatenate([-q[..., half:], q[..., :half]], axis=-1)
    return q * cos[:, None] + rotated * sin[:, None]
