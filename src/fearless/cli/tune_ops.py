"""The operators `fearless tune` runs: for each, how to build random inputs of a case's shapes
and dtype and call the fearless.ops operator on them (so its autotuned launches tune).

A case is {"op", "dtype", "shapes"}. For the operators of plain tensors (matmul, softmax, ...)
"shapes" is a list of shapes, one per tensor argument; for the others it is a dict of named
extents (`Op.fields`, with `Op.optional` defaults), e.g. fmha's {"batch": 1, "q_heads": 32,
"kv_heads": 8, "seq": 1024, "head_dim": 128}. Each Op also carries a tiny stand-in case (`tiny`)
that the tests run on the simulator, and the tuned functions it reaches (`tuned`).

The backward operators are here too, called directly (what torch autograd calls in training):
softmax_backward, rms_norm_backward, layer_norm_backward (ops/backward_rows.py),
silu_and_mul_backward, geglu_backward, swiglu_backward, relu_backward, gelu_backward
(ops/backward_activation.py),
fused_linear_cross_entropy_backward (the loss with its gradients, ops/linear_cross_entropy.py's
`forward(..., grads=True)`, which reaches kernels_linear_ce.dw_tuned), and
scaled_dot_product_attention_backward (ops/attention.py; its three kernels' tuners, the row
statistics' too: called without the forward's lse). Every function of
fearless.ops decorated `@fl.autotune` is in some Op's `tuned` (tests/test_cli_tune.py checks).

Operators of fearless.ops left out, and why: rope and mamba2_chunk_forward/backward launch fixed
kernels (nothing is tuned), and so does nvfp4_quantize; moe_align_block_size tunes nothing. A
table cannot shorten their first call, which is their kernels' compile (at Mamba-2 2.7B's heads
in bf16, mamba2_chunk_backward's kernels take about 8 s of tileiras for sm_90 on a 2-core CPU,
compiled side by side on a first call: bench/experiments/compile_slow_kernels.py).
fmha_variant's optional extents pick its variant (VARIANT_OPT): window, bias (0 none, 1 vector,
2 matrix, 3 alibi), dropout_pct, random_mask (0 / 1), nsbd (0 / 1: the layout).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


class Inputs:
    """Random inputs of one case, the same for a given seed: torch CUDA tensors on the GPU
    where torch is installed, else fl.Tensors (from NumPy, ml_dtypes for bf16 and fp8)."""

    def __init__(self, dtype: str, on_device: bool, seed: int = 0) -> None:
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)
        self.torch: Any = None
        if on_device:
            try:
                import torch
            except ImportError:
                pass
            else:
                self.torch = torch
                self.gen = torch.Generator("cuda").manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0, dtype: str | None = None) -> Any:
        """N(0, scale^2) of `shape` in `dtype` (default: the case's)."""
        dt = dtype or self.dtype
        if self.torch is not None:
            x = self.torch.randn(shape, generator=self.gen, device="cuda") * scale
            return x.to(getattr(self.torch, dt))
        return self.of(self.rng.standard_normal(shape, dtype=np.float32) * np.float32(scale), dt)

    def zeros(self, *shape: int, dtype: str | None = None) -> Any:
        return self.of(np.zeros(shape, np.float32), dtype or self.dtype)

    def of(self, x: np.ndarray, dtype: str | None = None) -> Any:
        """NumPy values as an input: floats in `dtype` (default: the case's), integers as
        they are."""
        import fearless as fl

        if x.dtype.kind in "iu":
            dt: Any = x.dtype
        else:
            dt = dtype or self.dtype
        if self.torch is not None:
            t = self.torch.from_numpy(np.ascontiguousarray(x)).to("cuda")
            return t if x.dtype.kind in "iu" else t.to(getattr(self.torch, dt))
        if x.dtype.kind not in "iu":
            import ml_dtypes

            x = x.astype(getattr(ml_dtypes, dt, None) or np.dtype(dt))
        return fl.asarray(np.ascontiguousarray(x))


@dataclass(frozen=True)
class Op:
    """How `fearless tune` runs one operator (see the module docstring)."""

    run: Callable[[Any, Inputs, Any], Any]  # (fearless.ops, inputs, the case's shapes)
    tiny: Any  # a tiny case's shapes, for the simulator
    tuned: tuple[str, ...]  # the autotuned functions it reaches (module.name under ops)
    fields: tuple[str, ...] = ()  # required named extents; () = a list of shapes
    optional: Mapping[str, int] = field(default_factory=dict)  # named extents with defaults


def _listed(call: Callable[..., Any]) -> Callable[[Any, Inputs, Any], Any]:
    return lambda ops, mk, shapes: call(ops, *(mk.randn(*s) for s in shapes))


def _group_gemm(ops: Any, mk: Inputs, shapes: Any) -> Any:
    xs = [mk.randn(*s) for s in shapes]
    return ops.group_gemm(xs[0::2], xs[1::2])


# ---------------------------------------------------------------------------- attention

ATT = ("batch", "q_heads", "kv_heads", "seq", "head_dim")
ATT_OPT = {"kv_seq": 0, "causal": 1}
DEC = ("batch", "q_heads", "kv_heads", "kv_seq", "head_dim")


def _qkv(mk: Inputs, s: Mapping[str, int], q_len: int | None = None) -> tuple[Any, Any, Any]:
    b, d = s["batch"], s["head_dim"]
    q_len = s["seq"] if q_len is None else q_len
    kv = s.get("kv_seq") or s["seq"]
    q = mk.randn(b, s["q_heads"], q_len, d)
    return q, mk.randn(b, s["kv_heads"], kv, d), mk.randn(b, s["kv_heads"], kv, d)


def _fmha(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.fmha(*_qkv(mk, s), None, bool(s["causal"]))


def _swa(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.swa_attention(*_qkv(mk, s), s["window"], None, bool(s["causal"]))


def _gemma(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    cap = s["soft_cap"] or None
    return ops.gemma_attention(*_qkv(mk, s), None, s["window"], cap, bool(s["causal"]))


def _varlen(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b = s["batch"]
    ql, kl = [s["seq"]] * b, [s["kv_seq"] or s["seq"]] * b
    return ops.fmha_varlen(*_qkv(mk, s), None, bool(s["causal"]), ql, kl)


# fmha_variant's optional extents beyond ATT_OPT: a window, a bias (BIASES' index), dropout in
# percent, a random mask (0 / 1) and the layout (0 bnsd, 1 nsbd); each choice its own kernel.
VARIANT_OPT = {**ATT_OPT, "window": 0, "bias": 0, "dropout_pct": 0, "random_mask": 0, "nsbd": 0}
BIASES = (None, "vector", "matrix", "alibi")


def _fmha_variant(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b, n, d, sq = s["batch"], s["q_heads"], s["head_dim"], s["seq"]
    skv = s["kv_seq"] or sq
    if s["nsbd"]:  # (N, S, B, D)
        hk = s["kv_heads"]
        q, k, v = mk.randn(n, sq, b, d), mk.randn(hk, skv, b, d), mk.randn(hk, skv, b, d)
    else:
        q, k, v = _qkv(mk, s)
    bias_type, bias = BIASES[s["bias"]], None
    if bias_type == "alibi":
        bias = mk.of(mk.rng.random(n, dtype=np.float32), "float32")
    elif bias_type is not None:
        bias = mk.randn(b, n, 1 if bias_type == "vector" else sq, skv)
    mask = None
    if s["random_mask"]:
        mask = mk.of((mk.rng.random((b, n, sq, skv)) < 0.2).astype(np.int8))
    return ops.fmha_variant(
        q, k, v, None, bool(s["causal"]), None, None, bias_type, bias, s["dropout_pct"] / 100,
        0, s["window"], mask, "nsbd" if s["nsbd"] else "bnsd",
    )  # fmt: skip


def _decode(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.fmha_decode(*_qkv(mk, s, 1), None, s["split"] or None)


def _gemma_decode(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    cap = s["soft_cap"] or None
    q, k, v = _qkv(mk, s, 1)
    return ops.gemma_attention_decode(q, k, v, None, s["window"], cap, s["split"] or None)


def _sink_args(mk: Inputs, s: Mapping[str, int], q_len: int) -> list[Any]:
    b, hq, hk, d = s["batch"], s["q_heads"], s["kv_heads"], s["head_dim"]
    kv = s.get("kv_seq") or s["seq"]
    return [
        mk.randn(b, q_len, hk, hq // hk, d),
        mk.randn(b, kv, hk, d),
        mk.randn(b, kv, hk, d),
        mk.randn(hq),
        d**-0.5,
        s["window"] or None,
        kv - q_len,
    ]


def _sink(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.attention_sink(*_sink_args(mk, s, s["seq"]))


def _sink_decode(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.attention_sink_decode(*_sink_args(mk, s, 1), s["split"] or None)


def _kvcache(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b, hk, d, kv, page = s["batch"], s["kv_heads"], s["head_dim"], s["kv_seq"], s["page_size"]
    q = mk.randn(b, s["seq"], s["q_heads"], d)
    table = None
    if page:
        per = -(-kv // page)
        table = mk.of(mk.rng.permutation(b * per).astype(np.int32).reshape(b, per))
        k, v = (mk.randn(b * per, page, hk, d) for _ in "kv")
    else:
        k, v = (mk.randn(b, kv, hk, d) for _ in "kv")
    lens = mk.of(np.full(b, kv, np.int32))
    return ops.flash_attn_with_kvcache(q, k, v, lens, table, None, True)


def _mla(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b, h, seq, d, p = s["batch"], s["heads"], s["seq"], s["head_dim"], s["rope_dim"]
    kv, hk = s["kv_seq"] or seq, s["kv_heads"] or h
    q, qpe = mk.randn(b, h, seq, d), mk.randn(b, h, seq, p)
    k, v, kpe = mk.randn(b, hk, kv, d), mk.randn(b, hk, kv, d), mk.randn(b, s["pe_heads"], kv, p)
    return ops.mla(q, k, v, qpe, kpe, bool(s["causal"]))


def _mla_decode_args(mk: Inputs, s: Mapping[str, int]) -> list[Any]:
    b, h, kv, r, p = s["batch"], s["heads"], s["kv_seq"], s["kv_rank"], s["rope_dim"]
    return [mk.randn(b, h, r), mk.randn(b, h, p), mk.randn(b, kv, r), mk.randn(b, kv, p)]


def _mla_decoding(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.mla_decoding(*_mla_decode_args(mk, s))


def _mla_split(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.mla_decoding_split_kv(*_mla_decode_args(mk, s), None, s["split"] or None)


def _sparse_mla(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b, h, hk, seq, kv = s["batch"], s["heads"], s["kv_heads"], s["seq"], s["kv_seq"]
    d, p = s["head_dim"], s["rope_dim"]
    idx = mk.of(mk.rng.integers(0, kv, (b, seq, hk, s["topk"]), dtype=np.int32))
    q, qpe = mk.randn(b, h, seq, d), mk.randn(b, h, seq, p)
    k, v, kpe = mk.randn(b, hk, kv, d), mk.randn(b, hk, kv, d), mk.randn(b, 1, kv, p)
    return ops.sparse_mla(q, k, v, idx, qpe, kpe, False)


def _splitk(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    b, h, n, d = s["batch"], s["heads"], s["splits"], s["head_dim"]
    lse = mk.randn(b, h, n, scale=2.0, dtype="float32")
    return ops.splitk_reduce(mk.randn(b, h, n, d), lse, mk.zeros(b, h, d), s["kv_seq"])


# ---------------------------------------------------------------------------- MoE, GEMMs

MOE = ("tokens", "hidden", "inter", "experts", "top_k")


def _routing(mk: Inputs, s: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each token's top_k distinct experts (a seeded draw) and softmax weights, (T, top_k)."""
    t, e, k = s["tokens"], s["experts"], s["top_k"]
    ids = np.argsort(mk.rng.random((t, e)), axis=1)[:, :k].astype(np.int64)
    logits = mk.rng.standard_normal((t, k))
    return ids, np.exp(logits) / np.exp(logits).sum(1, keepdims=True)


def _fused_moe(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    t, h, i, e = s["tokens"], s["hidden"], s["inter"], s["experts"]
    ids, weights = _routing(mk, s)
    x = mk.randn(t, h, scale=0.5)
    w1, w2 = mk.randn(e, 2 * i, h, scale=0.05), mk.randn(e, h, i, scale=0.05)
    return ops.fused_moe(x, w1, w2, mk.of(weights.astype(np.float32)), mk.of(ids))


def _moe_actgrad(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    t, h, i, e, k = s["tokens"], s["hidden"], s["inter"], s["experts"], s["top_k"]
    ids, weights = _routing(mk, s)
    flat = ids.reshape(-1)
    order = np.argsort(flat, kind="stable")  # the (token, k) slots grouped by expert
    offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=e))]).astype(np.int32)
    tk = t * k
    return ops.moe_actgrad_bwd(
        dout=mk.randn(t, h),
        h=mk.randn(tk, 2 * i),
        w2=mk.randn(e, i, h, scale=0.05),
        dh=mk.zeros(tk, 2 * i),
        ds=mk.zeros(tk, dtype="float32"),
        b2=None,
        db2=None,
        a_prime=mk.zeros(tk, i),
        topk_scores=mk.of(weights.reshape(-1).astype(np.float32), "float32"),
        expert_frequency_offset=mk.of(offsets),
        x_gather_idx=mk.of((order // k).astype(np.int64)),
        s_scatter_idx=mk.of(order.astype(np.int32)),
        activation_type="swiglu",
    )


def _fp8(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    m, n, k, blk = s["m"], s["n"], s["k"], s["block"]
    nb, kb = -(-n // blk), -(-k // blk)
    a = mk.randn(m, k, dtype="float8_e4m3fn")
    b = mk.randn(n, k, dtype="float8_e4m3fn")
    a_s = mk.of(np.abs(mk.rng.standard_normal((m, kb))) * 0.01 + 1e-3, "float32")
    b_s = mk.of(np.abs(mk.rng.standard_normal((nb, kb))) * 0.01 + 1e-3, "float32")
    return ops.w8a8_block_fp8_matmul(a, b, a_s, b_s, [blk, blk], mk.dtype)


def _gluact(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    t, h, i = s["tokens"], s["hidden"], s["inter"]
    wa, wn = mk.randn(i, h, scale=0.05), mk.randn(i, h, scale=0.05)
    return ops.linear_gluact_linear(mk.randn(t, h), wa, wn, mk.randn(h, i, scale=0.05))


def _lce(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    t, h, v = s["tokens"], s["hidden"], s["vocab"]
    target = mk.of(mk.rng.integers(0, v, t, dtype=np.int64))
    return ops.fused_linear_cross_entropy(mk.randn(t, h), mk.randn(v, h, scale=0.05), target)


# ---------------------------------------------------------------------------- recurrences

DELTA = ("batch", "seq", "heads", "v_heads", "k_dim", "v_dim")


def _delta_args(mk: Inputs, s: Mapping[str, int]) -> list[Any]:
    b, t, h, hv, k, v = (s[n] for n in DELTA)
    g = -np.abs(mk.rng.standard_normal((b, t, hv), dtype=np.float32)) * 0.5
    beta = 1.0 / (1.0 + np.exp(-mk.rng.standard_normal((b, t, hv), dtype=np.float32)))
    return [
        mk.randn(b, t, h, k, scale=0.3),
        mk.randn(b, t, h, k, scale=0.3),
        mk.randn(b, t, hv, v, scale=0.3),
        mk.of(g),
        mk.of(beta),
    ]


def _chunk_delta(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    return ops.chunk_gated_delta_rule(*_delta_args(mk, s), s["chunk"], None, True, True)


def _recurrent_delta(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    state = mk.randn(s["batch"], s["v_heads"], s["k_dim"], s["v_dim"], scale=0.1, dtype="float32")
    return ops.recurrent_gated_delta_rule(*_delta_args(mk, s), state, True, True)


# ---------------------------------------------------------------------------- rows, mHC


def _persistent_ln(ops: Any, mk: Inputs, shapes: Any) -> Any:
    (m, h) = shapes[0]
    return ops.persistent_layer_norm(mk.randn(m, h), (h,), mk.randn(h), mk.randn(h), 1e-5)


def _backward(ops: Any, module: str) -> Any:
    """fearless.ops' backward module `module` (backward_rows, backward_activation, ...)."""
    import importlib

    return importlib.import_module(f"{ops.__name__}.{module}")


def _attention_bwd(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    """scaled_dot_product_attention's backward at an ATT case (dout and out random)."""
    q, k, v = _qkv(mk, s)
    dout, out = mk.randn(*q.shape), mk.randn(*q.shape)
    gqa = s["q_heads"] != s["kv_heads"]
    back = _backward(ops, "attention").scaled_dot_product_attention_backward
    return back(dout, q, k, v, out, bool(s["causal"]), None, gqa)


def _softmax_bwd(ops: Any, mk: Inputs, shapes: Any) -> Any:
    y, dy = (mk.randn(*s) for s in shapes)
    return _backward(ops, "backward_rows").softmax_backward(y, dy)


def _rms_norm_bwd(ops: Any, mk: Inputs, shapes: Any) -> Any:
    (m, h) = shapes[0]
    dy, x = mk.randn(m, h), mk.randn(m, h)
    return _backward(ops, "backward_rows").rms_norm_backward(dy, x, mk.randn(h), 1e-6)


def _layer_norm_bwd(ops: Any, mk: Inputs, shapes: Any) -> Any:
    (m, h) = shapes[0]
    dy, x, w, b = mk.randn(m, h), mk.randn(m, h), mk.randn(h), mk.randn(h)
    return _backward(ops, "backward_rows").layer_norm_backward(dy, x, w, b, 1e-5)


def _gated_bwd(name: str, *args: Any) -> Callable[[Any, Inputs, Any], Any]:
    """The backward of a gated activation whose case is its forward's x [[M, 2d]]."""

    def run(ops: Any, mk: Inputs, shapes: Any) -> Any:
        (*lead, n2) = shapes[0]
        x, dy = mk.randn(*lead, n2), mk.randn(*lead, n2 // 2)
        return getattr(_backward(ops, "backward_activation"), name)(dy, x, *args)

    return run


def _unary_bwd(name: str) -> Callable[[Any, Inputs, Any], Any]:
    """relu's or gelu's backward, whose case is its forward's x [[...]] (dy the same shape)."""

    def run(ops: Any, mk: Inputs, shapes: Any) -> Any:
        x, dy = mk.randn(*shapes[0]), mk.randn(*shapes[0])
        return getattr(_backward(ops, "backward_activation"), name)(dy, x)

    return run


def _swiglu_bwd(ops: Any, mk: Inputs, shapes: Any) -> Any:
    dy, a, b = (mk.randn(*s) for s in shapes)
    return _backward(ops, "backward_activation").swiglu_backward(dy, a, b)


def _lce_bwd(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    """The loss with its gradients (reduction "mean"), as autograd's forward computes them."""
    t, h, v = s["tokens"], s["hidden"], s["vocab"]
    target = mk.of(mk.rng.integers(0, v, t, dtype=np.int64))
    lce = _backward(ops, "linear_cross_entropy")
    x, w = mk.randn(t, h), mk.randn(v, h, scale=0.05)
    return lce.forward(x, w, target, None, -100, 4096, "mean", True)


def _mhc_gemm(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    m, n, c = s["tokens"], s["n"], s["channels"]
    w = mk.randn(n * c, n * n + 2 * n, scale=0.05)
    bias = mk.randn(n * n + 2 * n, dtype="float32")
    return ops.mhc_gemm_rms_scale(mk.randn(m, n * c), w, n, 1.0, 1.0, 1.0, bias)


def _mhc_residual(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    m, n, c = s["tokens"], s["n"], s["channels"]
    y = mk.randn(m, n * n + 2 * n, dtype="float32")
    return ops.mhc_apply_residual(mk.randn(m, n * c), mk.randn(m, c), y, n)


def _mhc_sinkhorn(ops: Any, mk: Inputs, s: Mapping[str, int]) -> Any:
    n = s["n"]
    return ops.mhc_sinkhorn(mk.randn(s["tokens"], n * n + 2 * n, dtype="float32"), n)


def _ops() -> dict[str, Op]:
    t = "kernels_"
    rows = f"{t}rows."
    att_tiny = {"batch": 1, "q_heads": 4, "kv_heads": 2, "seq": 16, "head_dim": 16}
    dec_tiny = {"batch": 1, "q_heads": 4, "kv_heads": 2, "kv_seq": 32, "head_dim": 16}
    moe_tiny = {"tokens": 5, "hidden": 32, "inter": 16, "experts": 4, "top_k": 2}
    delta_tiny = {"batch": 1, "seq": 16, "heads": 1, "v_heads": 2, "k_dim": 16, "v_dim": 16}
    mla_tiny = {"batch": 1, "heads": 2, "seq": 16, "head_dim": 16, "rope_dim": 8}
    mla_dec = {"batch": 1, "heads": 2, "kv_seq": 32, "kv_rank": 16, "rope_dim": 8}
    mla_opt = {"kv_seq": 0, "kv_heads": 0, "pe_heads": 1, "causal": 1}
    gem = f"{t}gemm.matmul_tuned"
    act = f"{t}activation."
    rows_bwd = f"{t}rows_backward."
    act_bwd = f"{t}activation_backward."
    lce = ("tokens", "hidden", "vocab")
    lce_tiny = {"tokens": 8, "hidden": 16, "vocab": 32}
    mhc = ("tokens", "n", "channels")
    mhc_tiny = {"tokens": 4, "n": 2, "channels": 16}
    return {
        "matmul": Op(_listed(lambda ops, a, b: ops.matmul(a, b)), [[8, 16], [16, 8]], (gem,)),
        "bmm": Op(
            _listed(lambda ops, a, b: ops.bmm(a, b)),
            [[2, 8, 16], [2, 16, 8]],
            (f"{t}gemm.bmm_tuned",),
        ),
        "group_gemm": Op(
            _group_gemm,
            [[8, 16], [16, 8], [4, 16], [16, 16]],
            (f"{t}group_gemm.group_gemm_tuned",),
        ),
        "softmax": Op(_listed(lambda ops, x: ops.softmax(x)), [[4, 16]], (f"{rows}softmax_tuned",)),
        "rms_norm": Op(
            _listed(lambda ops, x: ops.rms_norm(x, x.shape[-1])),
            [[4, 16]],
            (f"{rows}rms_norm_tuned",),
        ),
        "layer_norm": Op(
            _listed(lambda ops, x: ops.layer_norm(x, x.shape[-1])),
            [[4, 16]],
            (f"{rows}layer_norm_tuned",),
        ),
        "fused_add_rms_norm": Op(
            _listed(lambda ops, x, r: ops.fused_add_rms_norm(x, r)),
            [[4, 16], [4, 16]],
            (f"{rows}add_rms_norm_tuned",),
        ),
        "persistent_layer_norm": Op(
            _persistent_ln, [[4, 16]], (f"{t}persistent_norm.persistent_layer_norm_tuned",)
        ),
        "relu": Op(_listed(lambda ops, x: ops.relu(x)), [[64]], (f"{act}elementwise_tuned",)),
        "gelu": Op(_listed(lambda ops, x: ops.gelu(x)), [[64]], (f"{act}elementwise_tuned",)),
        "dropout": Op(
            _listed(lambda ops, x: ops.dropout(x, 0.1, seed=0)),
            [[64]],
            (f"{act}elementwise_tuned",),
        ),
        "silu_and_mul": Op(
            _listed(lambda ops, x: ops.silu_and_mul(x)), [[4, 32]], (f"{act}gated_tuned",)
        ),
        "geglu": Op(
            _listed(lambda ops, x: ops.geglu(x, -1, "tanh")), [[4, 32]], (f"{act}gated_tuned",)
        ),
        "swiglu": Op(
            _listed(lambda ops, a, b: ops.swiglu(a, b)), [[64], [64]], (f"{act}elementwise_tuned",)
        ),
        "transpose": Op(
            _listed(lambda ops, x: ops.transpose(x)), [[8, 16]], (f"{t}layout.transpose_tuned",)
        ),
        "scaled_dot_product_attention": Op(
            _listed(lambda ops, q, k, v: ops.scaled_dot_product_attention(q, k, v)),
            [[1, 2, 16, 16]] * 3,
            (f"{t}attention.attention_tuned",),
        ),
        "fmha": Op(_fmha, att_tiny, (f"{t}attention.attention_tuned",), ATT, ATT_OPT),
        "scaled_dot_product_attention_backward": Op(
            _attention_bwd,
            att_tiny,
            tuple(f"{t}attention_backward.{f}_tuned" for f in ("stats", "dkdv", "dq", "atomic")),
            ATT,
            ATT_OPT,
        ),
        "swa_attention": Op(
            _swa,
            {**att_tiny, "window": 8},
            (f"{t}attention.attention_variant_tuned",),
            (*ATT, "window"),
            ATT_OPT,
        ),
        "gemma_attention": Op(
            _gemma,
            {**att_tiny, "window": 8, "soft_cap": 50},
            (f"{t}attention.attention_variant_tuned",),
            ATT,
            {**ATT_OPT, "window": 0, "soft_cap": 0},
        ),
        "fmha_varlen": Op(
            _varlen, att_tiny, (f"{t}attention_varlen.attention_varlen_tuned",), ATT, ATT_OPT
        ),
        "fmha_variant": Op(
            _fmha_variant,
            {**att_tiny, "seq": 8, "kv_seq": 16, "window": 4, "bias": 3, "dropout_pct": 10},
            (f"{t}attention_fmha_variant.fmha_variant_tuned",),
            ATT,
            VARIANT_OPT,
        ),
        "fmha_decode": Op(
            _decode, dec_tiny, (f"{t}attention_decode.attention_decode",), DEC, {"split": 0}
        ),
        "gemma_attention_decode": Op(
            _gemma_decode,
            {**dec_tiny, "window": 8, "soft_cap": 50},
            (f"{t}attention_gemma.gemma_decode",),
            DEC,
            {"window": 0, "soft_cap": 0, "split": 0},
        ),
        "attention_sink": Op(
            _sink,
            {**att_tiny, "window": 8},
            (f"{t}attention_sink.attention_sink_tuned",),
            ATT,
            {"kv_seq": 0, "window": 0},
        ),
        "attention_sink_decode": Op(
            _sink_decode,
            dec_tiny,
            (f"{t}attention_sink_decode.sink_decode_tuned",),
            DEC,
            {"window": 0, "split": 0},
        ),
        "flash_attn_with_kvcache": Op(
            _kvcache,
            {**dec_tiny, "page_size": 16},
            (f"{t}kvcache_decode.kvcache_decode_tuned", f"{t}kvcache.kvcache_attention_tuned"),
            DEC,
            {"seq": 1, "page_size": 0},
        ),
        "mla": Op(
            _mla,
            mla_tiny,
            (f"{t}attention_mla.mla_tuned",),
            ("batch", "heads", "seq", "head_dim", "rope_dim"),
            mla_opt,
        ),
        "mla_decoding": Op(
            _mla_decoding, mla_dec, (f"{t}attention_mla.mla_decode_tuned",), tuple(mla_dec)
        ),
        "mla_decoding_split_kv": Op(
            _mla_split,
            mla_dec,
            (f"{t}attention_mla.mla_decode_tuned",),
            tuple(mla_dec),
            {"split": 0},
        ),
        "sparse_mla": Op(
            _sparse_mla,
            {**mla_tiny, "kv_seq": 32, "topk": 8},
            (f"{t}attention_mla_sparse.sparse_mla_tuned",),
            ("batch", "heads", "seq", "kv_seq", "head_dim", "rope_dim", "topk"),
            {"kv_heads": 1},
        ),
        "splitk_reduce": Op(
            _splitk,
            {"batch": 1, "heads": 2, "splits": 4, "head_dim": 16, "kv_seq": 64},
            (f"{t}attention_splitk.splitk_reduce_tuned",),
            ("batch", "heads", "splits", "head_dim", "kv_seq"),
        ),
        "fused_moe": Op(_fused_moe, moe_tiny, (f"{t}moe.gate_up_tuned", f"{t}moe.down_tuned"), MOE),
        "moe_actgrad_bwd": Op(_moe_actgrad, moe_tiny, (f"{t}moe_actgrad.actgrad_tuned",), MOE),
        "w8a8_block_fp8_matmul": Op(
            _fp8,
            {"m": 8, "n": 32, "k": 64, "block": 32},
            (f"{t}fp8_block.fp8_block_matmul_tuned",),
            ("m", "n", "k"),
            {"block": 128},
        ),
        "linear_gluact_linear": Op(
            _gluact,
            {"tokens": 4, "hidden": 32, "inter": 16},
            (f"{t}gluact.gluact_tuned",),
            ("tokens", "hidden", "inter"),
        ),
        "fused_linear_cross_entropy": Op(
            _lce,
            lce_tiny,
            (f"{t}linear_ce.logits_tuned", f"{t}linear_ce.cross_entropy_tuned"),
            lce,
        ),
        "fused_linear_cross_entropy_backward": Op(
            _lce_bwd,
            lce_tiny,
            (
                f"{t}linear_ce.logits_tuned",
                f"{t}linear_ce.cross_entropy_tuned",
                f"{t}linear_ce.dw_tuned",
                gem,
            ),
            lce,
        ),
        "softmax_backward": Op(_softmax_bwd, [[4, 16], [4, 16]], (f"{rows_bwd}softmax_bwd_tuned",)),
        "rms_norm_backward": Op(_rms_norm_bwd, [[4, 16]], (f"{rows_bwd}rms_norm_bwd_tuned",)),
        "layer_norm_backward": Op(_layer_norm_bwd, [[4, 16]], (f"{rows_bwd}layer_norm_bwd_tuned",)),
        "silu_and_mul_backward": Op(
            _gated_bwd("silu_and_mul_backward"), [[4, 32]], (f"{act_bwd}gated_backward_tuned",)
        ),
        "geglu_backward": Op(
            _gated_bwd("geglu_backward", "tanh"), [[4, 32]], (f"{act_bwd}gated_backward_tuned",)
        ),
        "swiglu_backward": Op(
            _swiglu_bwd, [[64], [64], [64]], (f"{act_bwd}swiglu_backward_tuned",)
        ),
        # relu's and gelu's backward tune elementwise_tuned under keys of their own
        "relu_backward": Op(_unary_bwd("relu_backward"), [[64]], (f"{act}elementwise_tuned",)),
        "gelu_backward": Op(_unary_bwd("gelu_backward"), [[64]], (f"{act}elementwise_tuned",)),
        "chunk_gated_delta_rule": Op(
            _chunk_delta,
            {**delta_tiny, "chunk": 16},
            (f"{t}delta_rule.chunk_inter_tuned",),
            DELTA,
            {"chunk": 64},
        ),
        "recurrent_gated_delta_rule": Op(
            _recurrent_delta, delta_tiny, (f"{t}delta_rule.recurrent_tuned",), DELTA
        ),
        "mhc_gemm_rms_scale": Op(_mhc_gemm, mhc_tiny, (f"{t}mhc.mhc_gemm_rms_scale_tuned",), mhc),
        "mhc_apply_residual": Op(
            _mhc_residual, mhc_tiny, (f"{t}mhc.mhc_apply_residual_tuned",), mhc
        ),
        "mhc_sinkhorn": Op(
            _mhc_sinkhorn,
            {"tokens": 4, "n": 2},
            (f"{t}mhc.mhc_sinkhorn_tuned",),
            ("tokens", "n"),
        ),
    }


OPS: dict[str, Op] = _ops()


def run_case(ops: Any, case: Mapping[str, Any], on_device: bool) -> Any:
    """Build the case's inputs and call its operator (its tuners time what is new)."""
    op = OPS[case["op"]]
    shapes = case["shapes"]
    if op.fields:
        shapes = {**op.optional, **shapes}
    return op.run(ops, Inputs(case["dtype"], on_device), shapes)


def shapes_wanted(name: str, count: int) -> str | None:
    """None when operator `name`, one of a list of shapes, takes `count` shapes; else how many
    it takes, for a message: as many as its tiny case has (group_gemm: an a and a b per group)."""
    if name == "group_gemm":
        if count >= 2 and count % 2 == 0:
            return None
        return "an even number of shapes (each group's a and b in turn)"
    want = len(OPS[name].tiny)
    return None if count == want else f"{want} shape{'' if want == 1 else 's'}"


def tiny_case(name: str, dtype: str = "float32") -> dict[str, Any]:
    """A tiny stand-in case of operator `name` (what the simulator tests run)."""
    op = OPS[name]
    tiny = op.tiny if isinstance(op.tiny, list) else dict(op.tiny)
    return {"op": name, "dtype": dtype, "shapes": tiny}
