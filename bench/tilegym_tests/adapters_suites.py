"""TileGym 1.5.1 "suites" (tilegym/suites/{liger,unsloth,flashinfer}/ops.py) onto fearless.ops: one adapter
per suite dispatch name ("liger.rms_norm", "unsloth.swiglu_fg", ...) whose semantics fearless
computes, with no tilegym import (fearless_as_cutile.py registers them as the "cutile" entry of
TileGym's dispatcher; tests/test_tilegym_harness.py calls them directly).

Each adapter takes the suite op's signature (its ops.py `@dispatch` stub and the cuTile
`@register_impl` under tilegym/suites/*/cutile/). A parameter value that asks for what fearless
does not compute raises `Uncovered` (a NotImplementedError) before any work: the plugin turns
it into a skip of that test case with the reason (or, with FEARLESS_TG_KEEP_TILEGYM=1, hands the
call to TileGym's own cuTile implementation). Precision modes: fearless's norms compute in f32
and round once, Liger's casting_mode "gemma" and Unsloth's gemma=True; Liger's "llama" and
"none" (and Unsloth's plain rms_layernorm) round in between for 16-bit inputs, so those run on
fearless only where the input is f32 (the casts are then no-ops).

SUITE_ADAPTERS maps a suite dispatch name to (the fearless.ops function, the adapter);
SUITE_UNCOVERED maps the suite dispatch names fearless does not serve to why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from fearless import ops
from fearless.ops import attention


class Uncovered(NotImplementedError):
    """A suite op's parameter value that fearless does not compute (the case is skipped)."""


SUITE_ADAPTERS: dict[str, tuple[str, Callable[..., Any]]] = {}

_NOT_YET = "not adapted in this harness yet"
SUITE_UNCOVERED: dict[str, str] = {
    "liger.cross_entropy": "fearless has no standalone cross entropy (only fused_linear_cross_entropy)",
    "liger.dyt": "fearless has no DyT",
    "liger.fused_linear_jsd": "fearless has no JSD",
    "liger.fused_neighborhood_attention": "fearless has no neighborhood attention",
    "liger.group_norm": "fearless has no group norm",
    "liger.grpo_loss": "fearless has no GRPO loss",
    "liger.jsd": "fearless has no JSD",
    "liger.kl_div": "fearless has no KL divergence",
    "liger.llama4_rope": "fearless has no complex (freqs_cis) Llama 4 RoPE",
    "liger.modulated_rms_norm": "fearless has no modulated RMS norm",
    "liger.multi_token_attention": "fearless has no multi-token attention",
    "liger.poly_norm": "fearless has no PolyNorm",
    "liger.qwen2vl_mrope": "fearless has no multimodal M-RoPE",
    "liger.relu_squared": "fearless has no relu squared",
    "liger.sparsemax": "fearless has no sparsemax",
    "liger.tiled_mlp": "fearless has no tiled MLP",
    "liger.tvd": "fearless has no TVD loss",
    "unsloth.swiglu_bwd": "fearless has no in-place SwiGLU backward of Unsloth's (DW, e, g) form",
    "unsloth.geglu_exact_backward": "fearless has no in-place GEGLU backward of Unsloth's form",
    "unsloth.geglu_approx_backward": "fearless has no in-place GEGLU backward of Unsloth's form",
    "unsloth.act_quant": "fearless has no fp8 activation quantizer",
    "unsloth.weight_dequant": "fearless has no fp8 weight dequantizer",
    "unsloth.cross_entropy_loss": "fearless has no standalone cross entropy",
    "unsloth.grouped_gemm": f"{_NOT_YET}: Unsloth's MoE grouped GEMM (m_sizes, gather/permute, "
    "fused topk weights) is not fearless's group_gemm",
}


def suite_adapter(name: str, uses: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers the decorated function as suite op `name`'s adapter onto fearless.ops.`uses`."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__name__ = "fearless_" + name.replace(".", "_")
        SUITE_ADAPTERS[name] = (uses, fn)
        return fn

    return deco


def _f32(*tensors: Any) -> bool:
    """Whether every tensor given (None skipped) is f32: precision casts are then no-ops."""
    return all(t is None or t.dtype == torch.float32 for t in tensors)


def _rounds_once(name: str, mode: str, *tensors: Any) -> None:
    """Refuses a casting mode other than one rounding ("gemma") unless the tensors are f32."""
    if mode not in ("llama", "gemma", "none"):
        raise ValueError(f"{name}: invalid casting_mode {mode!r}")
    if mode != "gemma" and not _f32(*tensors):
        raise Uncovered(
            f"fearless {name} rounds once (casting_mode 'gemma'); casting_mode {mode!r} on "
            f"{tensors[0].dtype} rounds in between"
        )


def _shifted(w: Any, offset: float) -> Any:
    """w + offset in f32 (Liger's gemma mode adds the offset in f32), w itself at offset 0."""
    return w.float() + offset if offset else w


@suite_adapter("liger.rms_norm", uses="rms_norm")
def liger_rms_norm(
    X: Any,
    W: Any,
    eps: float,
    offset: float = 0.0,
    casting_mode: str = "llama",
    in_place: bool = True,
    row_mode: bool | None = None,
) -> Any:
    """Liger: X / rms(X) * (W + offset) over the last axis, W None for no affine; in_place (dX
    reusing dY's buffer) and row_mode pick memory and kernel, not the result: ignored."""
    _rounds_once("liger.rms_norm", casting_mode, X, W)
    w = None if W is None else _shifted(W, offset)
    return ops.rms_norm(X, (X.shape[-1],), w, eps)


@suite_adapter("liger.fused_add_rms_norm", uses="fused_add_rms_norm")
def liger_fused_add_rms_norm(
    X: Any, R: Any, W: Any, eps: float = 1e-6, offset: float = 0.0, casting_mode: str = "llama"
) -> tuple[Any, Any]:
    """Liger: (rms_norm(X + R) * (W + offset), X + R), the sum in X's dtype."""
    _rounds_once("liger.fused_add_rms_norm", casting_mode, X, R, W)
    y, s = ops.fused_add_rms_norm(X, R, _shifted(W, offset), eps)
    return y, s


@suite_adapter("liger.layer_norm", uses="layer_norm")
def liger_layer_norm(X: Any, W: Any, B: Any, eps: float = 1e-5) -> Any:
    """Liger: layer norm over the last axis, in f32 (as Liger's kernel)."""
    return ops.layer_norm(X, (X.shape[-1],), W, B, eps)


@suite_adapter("liger.swiglu", uses="swiglu")
def liger_swiglu(a: Any, b: Any, gate_multiplier: float = 1.0, down_multiplier: float = 1.0) -> Any:
    """Liger: silu(a * gate_multiplier) * b * down_multiplier; fearless's swiglu is the
    multipliers' 1.0 (computed in f32, rounded once; Liger's kernel rounds silu(a) to b's dtype
    before the product)."""
    if gate_multiplier != 1.0 or down_multiplier != 1.0:
        raise Uncovered(
            "fearless swiglu has no gate_multiplier / down_multiplier "
            f"({gate_multiplier}, {down_multiplier})"
        )
    return ops.swiglu(a, b)


def _gelu_times(gate: Any, up: Any, approximate: str) -> Any:
    """gelu(gate) * up through fearless's geglu, whose gelu is of its second half."""
    return ops.geglu(torch.cat([up, gate], dim=-1), dim=-1, approximate=approximate)


@suite_adapter("liger.geglu", uses="geglu")
def liger_geglu(a: Any, b: Any) -> Any:
    """Liger: gelu_tanh(a) * b, as fearless's geglu of [b, a] (its gelu is of the second half)."""
    return _gelu_times(a, b, "tanh")


@suite_adapter("liger.softmax", uses="softmax")
def liger_softmax(input: Any) -> Any:
    """Liger: softmax over the last axis."""
    return ops.softmax(input, dim=-1)


@suite_adapter("liger.rope", uses="rope")
def liger_rope(q: Any, k: Any, cos: Any, sin: Any, **kw: Any) -> tuple[Any, Any]:
    """Liger: Hugging Face's half-split RoPE of q (B, Hq, S, D) and k (B, Hk, S, D) with cos and
    sin (1 or B, S, D); returns new tensors (Liger's kernel may write into q and k)."""
    if kw:
        raise Uncovered(f"fearless rope takes no {sorted(kw)}")
    qo, ko = ops.rope(q, k, cos, sin)
    return qo, ko


@suite_adapter("liger.fused_linear_cross_entropy", uses="fused_linear_cross_entropy")
def liger_fused_linear_cross_entropy(
    input: Any,
    weight: Any,
    target: Any,
    bias: Any = None,
    ce_weight: Any = None,
    ignore_index: int = -100,
    lse_square_scale: float = 0.0,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    softcap: float | None = None,
    return_z_loss: bool = False,
    accum_dtype: Any = None,
    use_token_scaling: bool = False,
    return_token_accuracy: bool = False,
    return_predicted_tokens: bool = False,
) -> Any:
    """Liger: cross_entropy(input @ weight.T + bias, target) without the logits; fearless has
    bias, ignore_index, reduction and accum_dtype, not the class weights, z-loss, label
    smoothing, softcap, token scaling or the extra returns (those are Uncovered)."""
    asked = {
        "ce_weight": ce_weight is not None,
        "lse_square_scale": lse_square_scale != 0.0,
        "label_smoothing": label_smoothing != 0.0,
        "softcap": softcap is not None,
        "return_z_loss": return_z_loss,
        "use_token_scaling": use_token_scaling,
        "return_token_accuracy": return_token_accuracy,
        "return_predicted_tokens": return_predicted_tokens,
    }
    if lacking := [k for k, v in asked.items() if v]:
        raise Uncovered(f"fearless fused_linear_cross_entropy has no {', '.join(lacking)}")
    return ops.fused_linear_cross_entropy(
        input, weight, target, bias, ignore_index, reduction=reduction, accum_dtype=accum_dtype
    )


@suite_adapter("unsloth.swiglu_fg", uses="swiglu")
def unsloth_swiglu_fg(e: Any, g: Any) -> Any:
    """Unsloth: silu(e) * g."""
    return ops.swiglu(e, g)


@suite_adapter("unsloth.geglu_exact_forward", uses="geglu")
def unsloth_geglu_exact_forward(gate: Any, up: Any) -> Any:
    """Unsloth: gelu(gate) * up with erf's gelu."""
    return _gelu_times(gate, up, "none")


@suite_adapter("unsloth.geglu_approx_forward", uses="geglu")
def unsloth_geglu_approx_forward(gate: Any, up: Any) -> Any:
    """Unsloth: gelu(gate) * up with tanh's gelu."""
    return _gelu_times(gate, up, "tanh")


@suite_adapter("unsloth.rms_layernorm", uses="rms_norm")
def unsloth_rms_layernorm(X: Any, W: Any, eps: float = 1e-6, gemma: bool = False) -> Any:
    """Unsloth: X / rms(X) * W, or * (W + 1) with gemma=True (in f32, rounded once). Without
    gemma Unsloth rounds the normalised X to W's dtype before the product: fearless serves it
    for f32 only."""
    if not gemma and not _f32(X, W):
        raise Uncovered(
            "fearless rms_norm rounds once; Unsloth's rms_layernorm (gemma=False) rounds "
            f"X / rms(X) to {W.dtype} before the product"
        )
    return ops.rms_norm(X, (X.shape[-1],), _shifted(W, 1.0 if gemma else 0.0), eps)


@suite_adapter("unsloth.layernorm", uses="layer_norm")
def unsloth_layernorm(X: Any, W: Any, b: Any, eps: float = 1e-6) -> Any:
    """Unsloth: layer norm with bias over the last axis, in f32."""
    return ops.layer_norm(X, (X.shape[-1],), W, b, eps)


@suite_adapter("unsloth.w8a8_block_fp8_matmul", uses="w8a8_block_fp8_matmul")
def unsloth_w8a8_block_fp8_matmul(
    A: Any,
    B: Any,
    As: Any,
    Bs: Any,
    block_size: list[int] | None = None,
    output_dtype: Any = torch.float32,
) -> Any:
    """Unsloth: (A * As) @ (B * Bs)^T with block scales, block_size [block_n, block_k]."""
    return ops.w8a8_block_fp8_matmul(A, B, As, Bs, block_size, output_dtype)


# ---------------------------------------------------------------- Unsloth's RoPE

_HALF_FLOATS = (torch.float16, torch.bfloat16)


def _unsloth_tables(
    name: str, x: Any, cos: Any, sin: Any, rope_indices: Any = None
) -> tuple[Any, Any]:
    """Unsloth's half-width cos and sin ((seq, >= head_dim / 2), any size-1 axes; their first
    head_dim / 2 columns used), rows picked by `rope_indices` ((batch * seq) positions) or the
    first seq, as fearless rope's full-width (seq, D) or (batch, seq, D) tables (the halves
    repeated: fearless reads the first half). Refuses what Unsloth's kernel computes otherwise:
    it rotates in cos's dtype, so 16-bit tables with f32 x (x rounded first) or with the other
    16-bit dtype are Uncovered; fearless rope takes power-of-two head dims only."""
    batch, seq, d = x.shape[0], x.shape[2], x.shape[3]
    if cos.dtype != sin.dtype or not (
        cos.dtype == x.dtype or (cos.dtype == torch.float32 and x.dtype in _HALF_FLOATS)
    ):
        raise Uncovered(
            f"{name}: Unsloth rotates in cos's dtype; cos {cos.dtype}, sin {sin.dtype} with "
            f"{x.dtype} inputs is not fearless rope's (tables in the inputs' dtype, or f32)"
        )
    if d % 2 or d & (d - 1):
        raise Uncovered(f"{name}: fearless rope takes a power-of-two head_dim, not {d}")
    half = d // 2
    c, s = cos.squeeze(), sin.squeeze()
    c, s = (c.unsqueeze(0), s.unsqueeze(0)) if c.dim() == 1 else (c, s)
    if c.dim() != 2 or c.shape != s.shape or c.shape[1] < half:
        raise ValueError(f"{name}: cos and sin must be (seq, >= {half}), got {tuple(cos.shape)}")
    c, s = c[:, :half], s[:, :half]
    if rope_indices is not None:
        idx = rope_indices.reshape(batch, seq).to(device=c.device, dtype=torch.long)
        c, s = c[idx], s[idx]  # (batch, seq, half): each row's own position
    elif c.shape[0] < seq:
        raise ValueError(f"{name}: seq_len ({seq}) > cos.shape[0] ({c.shape[0]})")
    else:
        c, s = c[:seq], s[:seq]
    return torch.cat([c, c], dim=-1), torch.cat([s, s], dim=-1)


@suite_adapter("unsloth.rope_embedding", uses="rope")
def unsloth_rope_embedding(Q: Any, cos: Any, sin: Any) -> Any:
    """Unsloth: the half-split RoPE of Q (batch, seq, heads, head_dim) by cos and sin
    (seq, head_dim / 2): fearless rope of Q's (batch, heads, seq, head_dim) view (read in
    place), with a K of no heads; autograd through fearless rope's backward."""
    heads_major = Q.transpose(1, 2)
    c, s = _unsloth_tables("unsloth.rope_embedding", heads_major, cos, sin)
    qo, _ = ops.rope(heads_major, heads_major[:, :0], c, s)
    return qo.transpose(1, 2)


@suite_adapter("unsloth.rope_embedding_qk", uses="rope")
def unsloth_rope_embedding_qk(
    Q: Any, K: Any, cos: Any, sin: Any, rope_indices: Any = None
) -> tuple[Any, Any]:
    """Unsloth: the half-split RoPE of Q (batch, heads_Q, seq, head_dim) and K
    (batch, heads_K, seq, head_dim) by cos and sin (seq, head_dim / 2), row (b, s) at position
    rope_indices[b * seq + s] where given (the tables' rows gathered per row)."""
    if Q.dtype != K.dtype:
        raise Uncovered(f"fearless rope takes Q and K of one dtype, got {Q.dtype} and {K.dtype}")
    c, s = _unsloth_tables("unsloth.rope_embedding_qk", Q, cos, sin, rope_indices)
    qo, ko = ops.rope(Q, K, c, s)
    return qo, ko


# ----------------------------------------------------------- FlashInfer's attention
# TileGym's FlashInfer suite takes TensorRT-LLM-style paged caches (num_pages, page_size, H_kv,
# D) with a dense block table (batch, max_pages) and per-sequence lengths (actual_seq_lens,
# any shape of batch elements), not FlashInfer's kv_indptr / kv_indices / kv_last_page_len.
# `k_scale` is the whole scale of the scores (its tests pass sm_scale * k_scale) and `v_scale`
# multiplies the output: TileGym's kernels compute v_scale * acc / l in f32 and round once;
# here fearless's output (rounded to q's dtype) is multiplied by v_scale in f32 and rounded
# again, one more rounding of a 16-bit output (TileGym's own split-KV decode rounds its
# partials too). Caches of another dtype than f32 / f16 / bf16 (fp8, whose k_scale / v_scale
# dequantise) are Uncovered: fearless's attention has no fp8 operands.

_LN2 = math.log(2.0)


def _attention_dtypes(name: str, *tensors: Any) -> None:
    """Refuses operands fearless's attention does not take: one dtype of f32, f16 or bf16."""
    dts = {t.dtype for t in tensors}
    if len(dts) != 1 or not dts <= {torch.float32, torch.float16, torch.bfloat16}:
        raise Uncovered(
            f"{name}: fearless attention takes q, k and v of one dtype of f32, f16 or bf16 "
            f"(no fp8 caches), got {sorted(str(d) for d in dts)}"
        )


def _times(out: Any, v_scale: Any) -> Any:
    """out * v_scale, in f32 and rounded to out's dtype (out itself at v_scale 1)."""
    v = float(v_scale)
    return out if v == 1.0 else (out.float() * v).to(out.dtype)


def _into(outputs: Any, out: Any) -> Any:
    """out, copied into the caller's `outputs` where one was given."""
    return out if outputs is None else outputs.copy_(out)


def _table(name: str, block_tables: Any, batch: int, num_pages: int) -> Any:
    """The (batch, max_pages) block table on the host, its ids checked (gathering a page out of
    the cache would read past it)."""
    if block_tables is None or block_tables.dim() != 2 or block_tables.shape[0] < batch:
        raise Uncovered(f"{name}: a block table of (batch, max_pages) ids is what fearless maps")
    table = block_tables[:batch].cpu()
    if table.numel() and (int(table.min()) < 0 or int(table.max()) >= num_pages):
        raise ValueError(f"{name}: a block table id outside [0, {num_pages})")
    return table


def _paged_rows(cache: Any, table: Any, b: int, n: int) -> Any:
    """Sequence b's first n rows of a paged cache (num_pages, page_size, ...), gathered."""
    page = cache.shape[1]
    pages = table[b, : -(-n // page)].to(device=cache.device, dtype=torch.long)
    return cache[pages].flatten(0, 1)[:n]


@suite_adapter("flashinfer.attention.decode_attention_kv_paged", uses="flash_attn_with_kvcache")
def flashinfer_decode_attention_kv_paged(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    actual_seq_lens: Any,
    block_tables: Any,
    k_scale: Any,
    v_scale: Any,
    max_seq_len: int = -1,
    outputs: Any = None,
    force_split_kv: bool = False,
    force_persistent: bool = False,
) -> Any:
    """FlashInfer: one query per sequence, q (batch, H, D), over sequence b's first
    actual_seq_lens[b] keys of the paged k_cache, v_cache (num_pages, page_size, H_kv, D) at
    pages block_tables[b]: softmax(q k^T * k_scale) v * v_scale, (batch, H, D). Through
    flash_attn_with_kvcache (q as (batch, 1, H, D), the table and lengths as they are, read in
    the kernel); max_seq_len, force_split_kv and force_persistent pick TileGym's kernel, not
    the result."""
    name = "flashinfer.attention.decode_attention_kv_paged"
    _attention_dtypes(name, q, k_cache, v_cache)
    if v_cache.shape[-1] != q.shape[-1] or k_cache.shape[-1] != q.shape[-1]:
        raise Uncovered(f"{name}: fearless's paged attention has one head_dim for q, k and v")
    if block_tables.dim() != 2:
        raise Uncovered(f"{name}: a block table of (batch, max_pages) ids is what fearless maps")
    lens = actual_seq_lens.reshape(-1).to(torch.int32)
    table = block_tables.to(torch.int32)
    out = ops.flash_attn_with_kvcache(
        q.unsqueeze(1), k_cache, v_cache, lens, table, softmax_scale=float(k_scale)
    )
    return _into(outputs, _times(out[:, 0], v_scale))


def _prefill(
    name: str,
    q: Any,
    keys: Callable[[int, int], Any],
    values: Callable[[int, int], Any],
    d_vo: int,
    lens: tuple[Any, Any, Any],
    num_batch: int,
    scales: tuple[Any, Any],
    is_causal: bool,
    outputs: Any,
    out_lse: Any,
) -> tuple[Any, Any]:
    """TileGym's FlashInfer prefill, one fearless attention per sequence: queries
    q[offset[b] : offset[b] + lens_q[b]] over keys(b, lens_kv[b]) and values(b, lens_kv[b])
    ((n, H_kv, D) each), causal top-left (query i sees keys 0..i, as TileGym's kernels and
    scaled_dot_product_attention); returns (out (tokens, H, d_vo), lse (tokens, H) f32, the
    natural log-sum-exp of the scaled scores). Through scaled_dot_product_attention_lse, whose
    lse is base 2 (times ln 2 here); values narrower than the keys (TileGym's head_dim_qk >
    head_dim_vo) are padded with zero columns, which leave the first d_vo columns as they are."""
    d_qk = q.shape[-1]
    if d_vo > d_qk:
        raise Uncovered(f"{name}: head_dim_vo {d_vo} > head_dim_qk {d_qk}")
    lq, lkv, off = (x.reshape(-1)[:num_batch].tolist() for x in lens)
    if any(m > 0 and n == 0 for m, n in zip(lq, lkv, strict=True)):
        raise Uncovered(f"{name}: a sequence with queries and no keys (fearless's lse is +inf)")
    out = outputs if outputs is not None else q.new_zeros((q.shape[0], q.shape[1], d_vo))
    lse = out_lse
    if lse is None:
        lse = torch.zeros((q.shape[0], q.shape[1]), dtype=torch.float32, device=q.device)
    k_scale, v_scale = scales
    for b, (m, n, o) in enumerate(zip(lq, lkv, off, strict=True)):
        if m == 0:
            continue
        k, v = keys(b, n), values(b, n)
        v = torch.nn.functional.pad(v, (0, d_qk - d_vo)) if d_vo < d_qk else v
        qb, kb, vb = (x.transpose(0, 1).unsqueeze(0) for x in (q[o : o + m], k, v))
        ob, lb = attention.scaled_dot_product_attention_lse(
            qb, kb, vb, is_causal=is_causal, scale=float(k_scale), enable_gqa=True
        )
        out[o : o + m] = _times(ob[0, :, :, :d_vo].transpose(0, 1), v_scale)
        lse[o : o + m] = lb[0].transpose(0, 1) * _LN2
    return out, lse


@suite_adapter(
    "flashinfer.attention.prefill_attention_kv_paged", uses="scaled_dot_product_attention"
)
def flashinfer_prefill_attention_kv_paged(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    actual_seq_lens_q: Any,
    actual_seq_lens_kv: Any,
    actual_seq_offset: Any,
    block_tables: Any,
    k_scale: Any,
    v_scale: Any,
    num_batch: int,
    max_seq_len: int,
    is_causal: bool = True,
    outputs: Any = None,
    out_lse: Any = None,
    use_lpt_scheduler: bool = True,
) -> tuple[Any, Any]:
    """FlashInfer: ragged queries q (tokens, H, D_qk), sequence b's at rows actual_seq_offset[b]
    on, over its first actual_seq_lens_kv[b] keys of the paged k_cache (num_pages, page_size,
    H_kv, D_qk), v_cache (..., D_vo) at pages block_tables[b]; returns (out, lse) (`_prefill`).
    Each sequence's pages are gathered into a contiguous copy (flash_attn_with_kvcache reads
    the pages in place but keeps no lse, and aligns causal bottom-right); use_lpt_scheduler and
    max_seq_len pick TileGym's kernel, not the result."""
    name = "flashinfer.attention.prefill_attention_kv_paged"
    _attention_dtypes(name, q, k_cache, v_cache)
    table = _table(name, block_tables, num_batch, k_cache.shape[0])
    return _prefill(
        name, q,
        lambda b, n: _paged_rows(k_cache, table, b, n),
        lambda b, n: _paged_rows(v_cache, table, b, n),
        v_cache.shape[-1], (actual_seq_lens_q, actual_seq_lens_kv, actual_seq_offset),
        num_batch, (k_scale, v_scale), is_causal, outputs, out_lse,
    )  # fmt: skip


@suite_adapter(
    "flashinfer.attention.prefill_attention_kv_ragged", uses="scaled_dot_product_attention"
)
def flashinfer_prefill_attention_kv_ragged(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    actual_seq_lens_q: Any,
    actual_seq_lens_kv: Any,
    actual_seq_offset: Any,
    block_tables: Any,
    k_scale: Any,
    v_scale: Any,
    num_batch: int,
    max_seq_len: int,
    is_causal: bool = True,
    outputs: Any = None,
    out_lse: Any = None,
    use_lpt_scheduler: bool = True,
) -> tuple[Any, Any]:
    """FlashInfer: ragged q (tokens, H, D_qk), k_cache (tokens, H_kv, D_qk), v_cache
    (tokens, H_kv, D_vo), sequence b's queries and keys both from row actual_seq_offset[b]
    (TileGym's kernel slices all three there); returns (out, lse) (`_prefill`). block_tables
    is unused (as TileGym's); not fmha_varlen, which keeps no lse and aligns causal
    bottom-right."""
    name = "flashinfer.attention.prefill_attention_kv_ragged"
    _attention_dtypes(name, q, k_cache, v_cache)
    offsets = actual_seq_offset.reshape(-1)[:num_batch].tolist()
    return _prefill(
        name, q,
        lambda b, n: k_cache[offsets[b] : offsets[b] + n],
        lambda b, n: v_cache[offsets[b] : offsets[b] + n],
        v_cache.shape[-1], (actual_seq_lens_q, actual_seq_lens_kv, actual_seq_offset),
        num_batch, (k_scale, v_scale), is_causal, outputs, out_lse,
    )  # fmt: skip


@suite_adapter("flashinfer.attention.decode_mla_kv_paged", uses="mla_decoding")
def flashinfer_decode_mla_kv_paged(
    q: Any,
    q_rope: Any,
    kv_cache: Any,
    k_rope: Any,
    actual_seq_lens: Any,
    block_tables: Any,
    k_scale: Any,
    v_scale: Any,
    max_seq_len: int = -1,
    outputs: Any = None,
    force_split_kv: bool = False,
    force_persistent: bool = False,
) -> Any:
    """FlashInfer: MLA decode, q (batch, H, D) and q_rope (batch, H, D_PE) over sequence b's
    first actual_seq_lens[b] rows of the paged latent cache kv_cache (num_pages, page_size, D)
    (keys and values) and k_rope (num_pages, page_size, D_PE) at pages block_tables[b]:
    softmax((q kv^T + q_rope k_rope^T) * k_scale) kv * v_scale, (batch, H, D). One
    mla_decoding per sequence over its pages gathered into a contiguous copy (mla_decoding
    takes no block table or lengths)."""
    name = "flashinfer.attention.decode_mla_kv_paged"
    _attention_dtypes(name, q, kv_cache)
    _attention_dtypes(name, q_rope, k_rope, q)
    if kv_cache.dim() != 3 or k_rope.dim() != 3:
        raise Uncovered(f"{name}: caches of (num_pages, page_size, D) are what fearless maps")
    table = _table(name, block_tables, q.shape[0], kv_cache.shape[0])
    lens = actual_seq_lens.reshape(-1)[: q.shape[0]].tolist()
    if 0 in lens:
        raise Uncovered(f"{name}: a sequence with no keys")
    out = torch.empty_like(q)
    for b, n in enumerate(lens):
        kv = _paged_rows(kv_cache, table, b, n).unsqueeze(0)
        kpe = _paged_rows(k_rope, table, b, n).unsqueeze(0)
        ob, _ = ops.mla_decoding(q[b : b + 1], q_rope[b : b + 1], kv, kpe, float(k_scale))
        out[b] = _times(ob[0], v_scale)
    return _into(outputs, out)
