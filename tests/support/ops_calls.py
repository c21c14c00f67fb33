"""The table of small VALID calls of every public fearless.ops operator (and attention's
scaled_dot_product_attention_backward and _lse), NumPy in, f32 and f16: 79 calls of 48
operators, the operators' own tests' smallest shapes, their sizes picked mostly distinct (so
that a size names one axis across q, k, v and the rest). tests/test_ops_shape_mutations.py
changes one dimension of them, tests/test_ops_layout_mutations.py one argument's memory
layout; the helpers below find, copy and replace their array arguments."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from fearless import ops
from fearless.ops import attention

F32, F16 = np.float32, np.float16


def rand(seed: int, *shape: int, dtype: Any = F32) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(dtype)


@dataclass
class Call:
    """`op(*args, **kwargs)`: a valid call; `index` names the integer index arrays (by
    position or keyword) that also get an out-of-range and a negative element."""

    name: str
    op: Callable[..., Any]
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    index: tuple[int | str, ...] = ()


def _attention_calls() -> list[Call]:
    b, h, hk, lq, s, d = 1, 4, 2, 3, 5, 8
    q, k, v = rand(1, b, h, lq, d), rand(2, b, hk, s, d), rand(3, b, hk, s, d)
    mask = np.tril(np.ones((lq, s), bool), 2)
    out, lse = attention.scaled_dot_product_attention_lse(q, k, v, enable_gqa=True)
    dout = rand(4, b, h, lq, d)
    qs = rand(5, b, lq, hk, 2, d)  # attention_sink: (B, L, H_kv, G, D)
    ks, vs, sinks = rand(6, b, s, hk, d), rand(7, b, s, hk, d), rand(8, hk * 2)
    q1 = rand(9, b, h, 1, d)
    # flash_attn_with_kvcache: (B, L, H, D), caches (B, S, H_kv, D), pages of 4 rows
    qc = rand(10, 2, 2, h, d)
    kc, vc = rand(11, 2, s, hk, d), rand(12, 2, s, hk, d)
    kb, vb = rand(13, 5, 4, hk, d), rand(14, 5, 4, hk, d)
    table = np.array([[3, 0], [1, 4]], np.int32)
    lens = np.array([5, 3], np.int32)
    # MLA: q (B, H, L, D), k, v (B, H_kv, S, D), qpe (B, H, L, Dp), kpe (B, 1, S, Dp)
    dp = 4
    qpe, kpe = rand(15, b, h, lq, dp), rand(16, b, 1, s, dp)
    mq, mqpe = rand(17, 2, h, d), rand(18, 2, h, dp)  # decoding: (B, H, D)
    mkv, mkpe = rand(19, 2, s, d), rand(20, 2, s, dp)
    sq, sk, sv = rand(21, b, h, lq, d), rand(22, b, 1, s, d), rand(23, b, 1, s, d)
    idx = np.array([[[[0, 1]], [[1, 2]], [[2, 0]]]], np.int32)  # (B, S_q, H_kv, topk)
    sqpe, skpe = rand(24, b, h, lq, dp), rand(25, b, 1, s, dp)
    ql, kl = np.array([3, 2], np.int32), np.array([4, 5], np.int32)
    vq, vk, vv = rand(26, 2, h, lq, d), rand(27, 2, hk, s, d), rand(28, 2, hk, s, d)
    fq, fk, fv = rand(29, b, lq, h, d), rand(30, b, s, hk, d), rand(31, b, s, hk, d)
    return [
        Call("sdpa", ops.scaled_dot_product_attention, [q, k, v], {"enable_gqa": True}),
        Call("sdpa mask", ops.scaled_dot_product_attention, [q, k, v, mask], {"enable_gqa": True}),
        Call(
            "sdpa_lse",
            attention.scaled_dot_product_attention_lse,
            [q, k, v, mask],
            {"enable_gqa": True},
        ),
        Call(
            "sdpa_backward",
            attention.scaled_dot_product_attention_backward,
            [dout, q, k, v, out],
            {"enable_gqa": True, "lse": lse},
        ),
        Call(
            "sdpa_backward mask",
            attention.scaled_dot_product_attention_backward,
            [dout, q, k, v, out],
            {"enable_gqa": True, "attn_mask": mask},
        ),
        Call("fmha", ops.fmha, [q, k, v]),
        Call(
            "fmha_varlen",
            ops.fmha_varlen,
            [vq, vk, vv],
            {"q_lens": ql, "kv_lens": kl},
            index=("q_lens", "kv_lens"),
        ),
        Call("swa_attention", ops.swa_attention, [q, k, v, 2]),
        Call("attention_sink", ops.attention_sink, [qs, ks, vs, sinks], {"sliding_window": 3}),
        Call("attention_sink_decode", ops.attention_sink_decode, [qs[:, :1].copy(), ks, vs, sinks]),
        Call(
            "gemma_attention", ops.gemma_attention, [q, k, v], {"window_size": 2, "soft_cap": 5.0}
        ),
        Call(
            "gemma_attention_decode",
            ops.gemma_attention_decode,
            [q1, k, v],
            {"kv_len_per_split": 16},
        ),
        Call("fmha_decode", ops.fmha_decode, [q1, k, v, 0.3]),
        Call(
            "fmha_variant",
            ops.fmha_variant,
            [vq, vk, vv],
            {"q_lens": ql, "kv_lens": kl, "is_causal": False},
            index=("q_lens", "kv_lens"),
        ),
        Call("flash_attn_func", ops.flash_attn_func, [fq, fk, fv], {"causal": True}),
        Call(
            "flash_attn_with_kvcache",
            ops.flash_attn_with_kvcache,
            [qc, kc, vc, lens],
            {"causal": True},
            index=(3,),
        ),
        Call(
            "flash_attn_with_kvcache paged",
            ops.flash_attn_with_kvcache,
            [qc, kb, vb, lens, table],
            index=(3, 4),
        ),
        Call("mla", ops.mla, [q, k, v, qpe, kpe, True]),
        Call("mla_decoding", ops.mla_decoding, [mq, mqpe, mkv, mkpe]),
        Call("mla_decoding_split_kv", ops.mla_decoding_split_kv, [mq, mqpe, mkv, mkpe, 0.2, 16]),
        Call("sparse_mla", ops.sparse_mla, [sq, sk, sv, idx, sqpe, skpe], index=(3,)),
    ]


def _moe_calls() -> list[Call]:
    t, hid, inter, e, topk = 3, 16, 8, 4, 2
    x, w1, w2 = rand(40, t, hid), rand(41, e, 2 * inter, hid), rand(42, e, hid, inter)
    ids = np.array([[0, 1], [2, 0], [3, 1]], np.int32)
    wts = np.full((t, topk), 0.5, F32)
    counts = [2, 0, 3, 1]
    tk = sum(counts)
    return [
        Call("fused_moe", ops.fused_moe, [x, w1, w2, wts, ids], index=(4,)),
        Call("moe_align_block_size", ops.moe_align_block_size, [ids, 4, e], index=(0,)),
        Call(
            "moe_actgrad_bwd",
            ops.moe_actgrad_bwd,
            [],
            {
                "dout": rand(43, t, hid),
                "h": rand(44, tk, 2 * inter),
                "w2": rand(45, e, inter, hid),
                "dh": np.zeros((tk, 2 * inter), F32),
                "ds": np.zeros(tk, F32),
                "b2": None,
                "db2": None,
                "a_prime": np.zeros((tk, inter), F32),
                "topk_scores": rand(46, t * topk),
                "expert_frequency_offset": np.cumsum([0, *counts]).astype(np.int32),
                "x_gather_idx": np.array([0, 1, 2, 0, 1, 2], np.int64),
                "s_scatter_idx": np.array([0, 1, 2, 3, 4, 5], np.int32),
                "activation_type": "swiglu",
            },
            index=("expert_frequency_offset", "x_gather_idx", "s_scatter_idx"),
        ),
    ]


def _sequence_calls() -> list[Call]:
    b, t, h, hv, k, v = 1, 5, 1, 2, 8, 4
    q, kk, vv = rand(50, b, t, h, k), rand(51, b, t, h, k), rand(52, b, t, hv, v)
    g, beta = -np.abs(rand(53, b, t, hv)), np.full((b, t, hv), 0.5, F32)
    s0 = rand(54, b, hv, k, v)
    mh, mg, p, n = 2, 1, 4, 8
    mx, ma = rand(55, b, t, mh, p), -np.ones(mh, F32)
    mb, mc, md = rand(56, b, t, mg, n), rand(57, b, t, mg, n), rand(58, mh)
    mdt, ms0 = np.full((b, t, mh), 0.3, F32), rand(59, b, mh, p, n)
    return [
        Call(
            "chunk_gated_delta_rule", ops.chunk_gated_delta_rule, [q, kk, vv, g, beta, 16, s0, True]
        ),
        Call(
            "recurrent_gated_delta_rule",
            ops.recurrent_gated_delta_rule,
            [q, kk, vv, g, beta, s0, True],
        ),
        Call("mamba2_chunk_forward", ops.mamba2_chunk_forward, [mx, ma, mb, mc, md, mdt, ms0, 16]),
        Call(
            "mamba2_chunk_backward",
            ops.mamba2_chunk_backward,
            [mx, ma, mb, mc, md, mdt, ms0, rand(60, b, t, mh, p), rand(61, b, mh, p, n), 16],
        ),
    ]


def _other_calls() -> list[Call]:
    m, kdim, n = 3, 8, 5
    x, w = rand(70, m, kdim), rand(71, kdim)
    a, bm = rand(72, m, kdim), rand(73, kdim, n)
    ba, bb = rand(74, 2, m, kdim), rand(75, 2, kdim, n)
    q4, k4 = rand(76, 1, 2, 3, 8), rand(77, 1, 1, 3, 8)
    ang = rand(78, 3, 4)
    cos, sin = np.concatenate([np.cos(ang)] * 2, -1), np.concatenate([np.sin(ang)] * 2, -1)
    fa, fb = (
        (rand(79, 5, 32) * 8).astype(ml_dtypes.float8_e4m3fn),
        (rand(80, 6, 32) * 8).astype(ml_dtypes.float8_e4m3fn),
    )
    fas, fbs = np.full((5, 1), 0.02, F32), np.full((1, 1), 0.03, F32)
    mn = 2
    nn = mn * mn + 2 * mn
    o_split, lse_split = rand(81, 1, 2, 3, 8), rand(82, 1, 2, 3) + 5
    return [
        Call(
            "fused_linear_cross_entropy",
            ops.fused_linear_cross_entropy,
            [rand(83, 4, 8), rand(84, 6, 8), np.array([0, 5, -100, 2], np.int64), rand(85, 6)],
            index=(2,),
        ),
        Call("group_gemm", ops.group_gemm, [[a, rand(86, 2, 4)], [bm, rand(87, 4, 3)]]),
        Call("w8a8_block_fp8_matmul", ops.w8a8_block_fp8_matmul, [fa, fb, fas, fbs, [32, 32]]),
        Call("rms_norm", ops.rms_norm, [x, (kdim,), w]),
        Call("layer_norm", ops.layer_norm, [x, (kdim,), w, rand(88, kdim)]),
        Call(
            "persistent_layer_norm",
            ops.persistent_layer_norm,
            [x, (kdim,), w, rand(89, kdim), 1e-5],
        ),
        Call("softmax", ops.softmax, [x]),
        Call("softmax f16", ops.softmax, [x.astype(F16)]),
        Call("rope", ops.rope, [q4, k4, cos, sin]),
        Call("matmul", ops.matmul, [a, bm]),
        Call("bmm", ops.bmm, [ba, bb]),
        Call("relu", ops.relu, [x]),
        Call("gelu", ops.gelu, [x]),
        Call("silu_and_mul", ops.silu_and_mul, [x]),
        Call("swiglu", ops.swiglu, [x, rand(90, m, kdim)]),
        Call("geglu", ops.geglu, [x]),
        Call("dropout", ops.dropout, [x, 0.5, True, 3]),
        Call("transpose", ops.transpose, [x]),
        Call("splitk_reduce", ops.splitk_reduce, [o_split, lse_split, np.zeros((1, 2, 8), F32), 5]),
        Call(
            "mhc_gemm_rms_scale",
            ops.mhc_gemm_rms_scale,
            [rand(91, 3, 20), rand(92, 20, nn), mn, 0.5, 0.7, 0.9, rand(93, nn)],
        ),
        Call(
            "mhc_apply_residual",
            ops.mhc_apply_residual,
            [rand(94, 3, mn * 4), rand(95, 3, 4), rand(96, 3, nn), mn],
        ),
        Call("mhc_sinkhorn", ops.mhc_sinkhorn, [rand(97, 3, nn), mn]),
        Call("nvfp4_quantize", ops.nvfp4_quantize, [rand(98, 2, 32)]),
        Call(
            "linear_gluact_linear",
            ops.linear_gluact_linear,
            [rand(99, 3, 8), rand(100, 6, 8), rand(101, 6, 8), rand(102, 5, 6)],
        ),
    ]


def _variant_calls() -> list[Call]:
    """Other forms of the calls above: no GQA, causal, f16, 3-D, masks and biases of other
    shapes, tensors where ints go, optional arguments left out."""
    b, h, lq, s, d = 2, 3, 5, 7, 4
    q, k, v = rand(110, b, h, lq, d), rand(111, b, h, s, d), rand(112, b, h, s, d)
    qh, kh, vh = (x.astype(F16) for x in (q, k, v))
    out, lse = attention.scaled_dot_product_attention_lse(q, k, v, is_causal=True)
    fmask = rand(113, b, h, lq, s)
    q3, k3, v3 = rand(114, b, lq, d), rand(115, b, s, d), rand(116, b, s, d)
    qs, ks, vs = rand(117, 1, 2, 2, 3, d), rand(118, 1, 6, 2, d), rand(119, 1, 6, 2, d)
    sinks, start = rand(120, 6), np.array([2], np.int32)
    ql, kl = np.array([5, 1], np.int32), np.array([6, 7], np.int32)
    t, hid, inter, e = 4, 8, 6, 3
    ids = np.array([[2], [0], [2], [1]], np.int64)
    return [
        Call("sdpa causal", ops.scaled_dot_product_attention, [q, k, v], {"is_causal": True}),
        Call("sdpa f16", ops.scaled_dot_product_attention, [qh, kh, vh]),
        Call("sdpa 3-d", ops.scaled_dot_product_attention, [q3, k3, v3, None, True]),
        Call("sdpa float mask", ops.scaled_dot_product_attention, [q, k, v, fmask]),
        Call(
            "sdpa_backward causal",
            attention.scaled_dot_product_attention_backward,
            [rand(121, b, h, lq, d), q, k, v, out, True],
            {"lse": lse},
        ),
        Call(
            "sdpa_backward float mask",
            attention.scaled_dot_product_attention_backward,
            [rand(122, b, h, lq, d), q, k, v, out],
            {"attn_mask": fmask},
        ),
        Call("fmha f16 not causal", ops.fmha, [qh, kh, vh, 0.5, False]),
        Call(
            "attention_sink start tensor",
            ops.attention_sink,
            [qs, ks, vs, sinks, 0.3, 2, start],
            index=(6,),
        ),
        Call(
            "attention_sink_decode split",
            ops.attention_sink_decode,
            [qs[:, :1].copy(), ks, vs, sinks],
            {"sliding_window": 3, "start_q": start, "kv_len_per_split": 16},
            index=("start_q",),
        ),
        Call(
            "fmha_variant matrix bias",
            ops.fmha_variant,
            [q, k, v],
            {
                "bias_type": "matrix",
                "bias": rand(123, 1, h, lq, s),
                "window_size": 3,
                "random_mask": np.eye(lq, s, dtype=np.uint8)[None, None],
                "kv_lens": kl,
                "q_lens": ql,
            },
            index=("q_lens", "kv_lens"),
        ),
        Call(
            "fmha_variant alibi nsbd",
            ops.fmha_variant,
            [
                q.transpose(1, 2, 0, 3).copy(),
                k.transpose(1, 2, 0, 3).copy(),
                v.transpose(1, 2, 0, 3).copy(),
            ],
            {"bias_type": "alibi", "bias": rand(124, h), "layout": "nsbd"},
        ),
        Call(
            "fmha_variant vector bias dropout",
            ops.fmha_variant,
            [q, k, v],
            {
                "bias_type": "vector",
                "bias": rand(125, b, 1, 1, s),
                "dropout": 0.5,
                "seed": 3,
                "is_causal": False,
            },
        ),
        Call("fmha_decode split", ops.fmha_decode, [q[:, :, :1].copy(), k, v, None, 16]),
        Call(
            "fused_moe topk 1 f16",
            ops.fused_moe,
            [
                rand(126, t, hid, dtype=F16),
                rand(127, e, 2 * inter, hid, dtype=F16),
                rand(128, e, hid, inter, dtype=F16),
                np.ones((t, 1), F16),
                ids,
            ],
            index=(4,),
        ),
        Call("moe_align_block_size i64", ops.moe_align_block_size, [ids, 2, e], index=(0,)),
        Call(
            "chunk_gated_delta_rule l2norm",
            ops.chunk_gated_delta_rule,
            [
                rand(129, 2, 6, 2, 4),
                rand(130, 2, 6, 2, 4),
                rand(131, 2, 6, 2, 3),
                -np.abs(rand(132, 2, 6, 2)),
                np.full((2, 6, 2), 0.5, F32),
            ],
            {"chunk_size": 16, "use_qk_l2norm_in_kernel": True},
        ),
        Call(
            "mamba2_chunk_forward no state",
            ops.mamba2_chunk_forward,
            [
                rand(133, 2, 6, 3, 4),
                -np.ones(3, F32),
                rand(134, 2, 6, 1, 5),
                rand(135, 2, 6, 1, 5),
                rand(136, 3),
                np.full((2, 6, 3), 0.3, F32),
                None,
                16,
            ],
        ),
        Call(
            "fused_linear_cross_entropy none",
            ops.fused_linear_cross_entropy,
            [rand(137, 5, 4), rand(138, 7, 4), np.array([0, 6, 3, 3, 1], np.int32)],
            {"reduction": "none", "chunk_size": 2, "ignore_index": 3},
            index=(2,),
        ),
        Call(
            "group_gemm f16",
            ops.group_gemm,
            [[rand(139, 3, 5, dtype=F16)], [rand(140, 5, 2, dtype=F16)]],
        ),
        Call(
            "w8a8_block_fp8_matmul lead",
            ops.w8a8_block_fp8_matmul,
            [
                (rand(141, 2, 3, 48) * 8).astype(ml_dtypes.float8_e4m3fn),
                (rand(142, 5, 48) * 8).astype(ml_dtypes.float8_e4m3fn),
                np.full((2, 3, 2), 0.02, F32),
                np.full((3, 2), 0.03, F32),
                [2, 32],
                "float16",
            ],
        ),
        Call("rms_norm f16 3-d", ops.rms_norm, [rand(143, 2, 3, 5, dtype=F16), 5]),
        Call("layer_norm 3-d", ops.layer_norm, [rand(144, 2, 3, 5), 5, rand(145, 5)]),
        Call("softmax 3-d", ops.softmax, [rand(147, 2, 3, 5), 2]),
        Call(
            "rope batched tables",
            ops.rope,
            [
                rand(148, 2, 3, 5, 4),
                rand(149, 2, 1, 5, 4),
                rand(150, 2, 5, 4),
                rand(151, 2, 5, 4),
            ],
        ),
        Call("matmul f16", ops.matmul, [rand(152, 3, 4, dtype=F16), rand(153, 4, 5, dtype=F16)]),
        Call(
            "splitk_reduce f16",
            ops.splitk_reduce,
            [
                rand(154, 2, 3, 2, 5, dtype=F16),
                rand(155, 2, 3, 2) + 5,
                np.zeros((2, 3, 5), F16),
                40,
            ],
        ),
        Call("geglu f16 3-d", ops.geglu, [rand(156, 2, 3, 6, dtype=F16)]),
    ]


def calls() -> list[Call]:
    return [
        *_attention_calls(),
        *_moe_calls(),
        *_sequence_calls(),
        *_other_calls(),
        *_variant_calls(),
    ]


def get_arg(call: Call, where: int | str) -> Any:
    return call.args[where] if isinstance(where, int) else call.kwargs[where]


def fresh_args(call: Call) -> tuple[list[Any], dict[str, Any]]:
    """The call's arguments, with fresh copies of its arrays (an in-place op writes them)."""

    def fresh(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return x.copy()
        if isinstance(x, list):
            return [fresh(y) for y in x]
        return x

    return [fresh(a) for a in call.args], {k: fresh(v) for k, v in call.kwargs.items()}


def put_arg(args: list[Any], kwargs: dict[str, Any], where: int | str, value: Any) -> None:
    if isinstance(where, int):
        args[where] = value
    else:
        kwargs[where] = value


def with_arg(call: Call, where: int | str, value: Any) -> tuple[list[Any], dict[str, Any]]:
    """The call's arguments (fresh) with `where` replaced by `value`."""
    args, kwargs = fresh_args(call)
    put_arg(args, kwargs, where, value)
    return args, kwargs


def array_args(call: Call) -> Iterator[tuple[str, int | str, int | None, np.ndarray]]:
    """(label, where, item, array): each array argument at `where`, and each array of a list
    argument (group_gemm's) as its `item`."""
    for where in [*range(len(call.args)), *call.kwargs]:
        value = get_arg(call, where)
        if isinstance(value, np.ndarray):
            yield str(where), where, None, value
        elif isinstance(value, list):
            for i, x in enumerate(value):
                if isinstance(x, np.ndarray):
                    yield f"{where}[{i}]", where, i, x


def replace_array(
    args: list[Any], kwargs: dict[str, Any], where: int | str, item: int | None, new: np.ndarray
) -> None:
    """Put `new` where `array_args` found an array, in fresh arguments."""
    if item is None:
        put_arg(args, kwargs, where, new)
    else:
        (args[where] if isinstance(where, int) else kwargs[where])[item] = new
