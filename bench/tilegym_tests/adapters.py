"""TileGym-call-signature adapters onto fearless.ops: one callable per TileGym registry name that
fearless implements, with no tilegym import (the pytest plugin fearless_as_cutile.py registers
them in TileGym's dispatcher; tests/test_tilegym_harness.py calls them directly).

Each adapter takes TileGym 1.5.1's cuTile signature (tilegym/ops/ops.py and the
`@register_impl(..., backend="cutile")` functions): its positional order, its keyword names,
its return convention, and the tuning keywords cuTile takes (`mode=`, `kernel_configs=`,
`static_persistent=`, `use_tma=`, ...), which are accepted and ignored. A keyword that changes
the result and that fearless lacks is refused (NotImplementedError), never dropped. The only
torch work an adapter does itself is argument preparation: a transposed view (`trans_a=`), a
shifted weight (`offset=`, `weight_shift=`), partial RoPE's slicing, copying into `out=`.

ADAPTERS maps a TileGym registry name to (the fearless.ops function it calls, the adapter);
PATCHES maps a TileGym module attribute that TileGym's tests call directly (not through the
dispatcher) to the registry name whose adapter replaces it; UNCOVERED lists the registry names
fearless has no operator for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fearless import ops
from fearless.ops import attention, backward_rows

# Keywords that pick a cuTile kernel variant or its tiles, never the result: accepted, ignored.
TUNING_KWARGS = frozenset(
    {
        "mode",
        "kernel_configs",
        "static_persistent",
        "use_tma",
        "use_chunked",
        "use_multi_wave",
        "use_autotune",
        "has_backward",
        "cfg",
        "w_nt",
        "num_ctas",
    }
)

ADAPTERS: dict[str, tuple[str, Callable[..., Any]]] = {}

# "module:attribute" that a TileGym test calls directly -> the registry name of its adapter
PATCHES: dict[str, str] = {
    "tilegym.ops.moe_interface:fused_moe": "fused_moe",
    "tilegym.ops.cutile.mla_decoding:mla_decoding": "mla_decoding",
    # experimental/test_attention_backward.py imports these three from TileGym's cuTile module
    "tilegym.ops.cutile.attention:tile_fmha_with_backward": "fmha_backward",
    "tilegym.ops.cutile.attention:tile_fmha_functional": "fmha_backward",
    "tilegym.ops.cutile.attention:fmha_forward_with_lse": "fmha_forward_with_lse",
}

# TileGym registry names (1.5.1) with no fearless operator behind them: left to TileGym
UNCOVERED = (
    "invoke_fused_moe_kernel",
    "layer_norm",  # TileGym's normalises dims [start_dim, end_dim); fearless's the last axis
)


def _clean(kwargs: dict[str, Any]) -> dict[str, Any]:
    """kwargs without the tuning keywords."""
    return {k: v for k, v in kwargs.items() if k not in TUNING_KWARGS}


def adapter(name: str, uses: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers the decorated function as TileGym `name`'s adapter onto fearless.ops.`uses`."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__name__ = f"fearless_{name}"
        ADAPTERS[name] = (uses, fn)
        return fn

    return deco


def _passthrough(name: str, uses: str | None = None, rename: dict[str, str] | None = None) -> None:
    """An adapter for an operator whose fearless signature is TileGym's: tuning keywords dropped,
    `rename` mapping a TileGym keyword onto fearless's."""
    target = uses or name

    def fn(*args: Any, **kwargs: Any) -> Any:
        kw = _clean(kwargs)
        for old, new in (rename or {}).items():
            if old in kw:
                kw[new] = kw.pop(old)
        return getattr(ops, target)(*args, **kw)

    adapter(name, target)(fn)


for _n in (
    "fmha",
    "fmha_decode",
    "fmha_varlen",
    "fmha_variant",
    "swa_attention",
    "gemma_attention",
    "attention_sink",
    "attention_sink_decode",
    "mla",
    "mla_decoding_split_kv",
    "sparse_mla",
    "splitk_reduce",
    "persistent_layer_norm",
    "fused_linear_cross_entropy",
    "moe_align_block_size",
    "moe_actgrad_bwd",
    "w8a8_block_fp8_matmul",
    "recurrent_gated_delta_rule",
    "chunk_gated_delta_rule",
    "mamba2_chunk_forward",
    "mhc_gemm_rms_scale",
    "mhc_apply_residual",
    "mhc_sinkhorn",
    "linear_gluact_linear",
    "nvfp4_quantize",
):
    _passthrough(_n)
# cuTile's gemma_attention_decode names its scale sm_scale, ops.py's dispatch names it scaling
_passthrough("gemma_attention_decode", rename={"sm_scale": "scaling"})
# TileGym's "fmha_backward" is fmha with autograd (tile_fmha_with_backward): fearless's fmha
# routes inputs that require grad through torch autograd onto its own backward kernels
_passthrough("fmha_backward", uses="fmha")


@adapter("fmha_forward_with_lse", uses="scaled_dot_product_attention")
def fmha_forward_with_lse(
    q: Any, k: Any, v: Any, sm_scale: float, is_causal: bool = True, **kw: Any
) -> tuple[Any, Any]:
    """TileGym's cuTile forward that keeps the rows' log-sum-exp: (out, lse (B, H, L) f32),
    lse = m + log2(l) of the scores times sm_scale / ln 2, as fearless's lse; its causal mask
    is top-left (its kernel's input_pos 0), as torch's; GQA where k has fewer heads than q.
    Through scaled_dot_product_attention's training forward, which keeps the lse
    (fearless.ops.attention.scaled_dot_product_attention_lse, not exported)."""
    if kw := _clean(kw):
        raise NotImplementedError(f"fearless's fmha_forward_with_lse takes no {sorted(kw)}")
    gqa = q.shape[1] != k.shape[1]
    return attention.scaled_dot_product_attention_lse(  # type: ignore[no-any-return]
        q, k, v, is_causal=is_causal, scale=sm_scale, enable_gqa=gqa
    )


@adapter("mla_decoding", uses="mla_decoding")
def mla_decoding(
    q: Any,
    qpe: Any,
    kv: Any,
    kpe: Any,
    sm_scale: float | None = None,
    transpose: bool = True,
    **kw: Any,
) -> Any:
    """TileGym: mla_decoding(q, qpe, kv, kpe, sm_scale, transpose=True)."""
    return ops.mla_decoding(q, qpe, kv, kpe, sm_scale, transpose, **_clean(kw))


@adapter("mamba2_chunk_backward", uses="mamba2_chunk_backward")
def mamba2_chunk_backward(*args: Any, state_dtype: Any = torch.float32, **kw: Any) -> Any:
    """TileGym's extra `state_dtype` (f32 by default): fearless keeps its state in f32 only."""
    if state_dtype != torch.float32:
        raise NotImplementedError(
            f"fearless mamba2_chunk_backward keeps f32 states, not {state_dtype}"
        )
    return ops.mamba2_chunk_backward(*args, **_clean(kw))


@adapter("softmax", uses="softmax")
def softmax(x: Any, use_tma: bool = False, **kw: Any) -> Any:
    """TileGym: softmax over the last axis of (M, N); use_tma and the variant flags ignored."""
    if _clean(kw):
        raise NotImplementedError(f"fearless softmax: unknown keywords {sorted(_clean(kw))}")
    return ops.softmax(x)


@adapter("rms_norm", uses="rms_norm")
def rms_norm(
    input: Any,
    normalized_shape: Any,
    weight: Any,
    eps: float,
    bias: Any = None,
    mode: str | None = None,
    offset: float = 0.0,
    **kw: Any,
) -> Any:
    """TileGym: rms_norm(input, normalized_shape, weight, eps, bias=None, mode=None, offset=0.0);
    Gemma's offset is added to the weight; a bias is refused (cuTile's refuses it too)."""
    if bias is not None:
        raise NotImplementedError("fearless rms_norm takes no bias")
    if normalized_shape is None:
        normalized_shape = (input.shape[-1],)
    w = weight + offset if offset else weight
    return ops.rms_norm(input, normalized_shape, w, eps)


@adapter("silu_and_mul", uses="silu_and_mul")
def silu_and_mul(input: Any, out: Any = None, **kw: Any) -> Any:
    """TileGym: silu_and_mul(input, out=None): silu(input[..., :h]) * input[..., h:]."""
    y = ops.silu_and_mul(input)
    if out is None:
        return y
    out.copy_(y)
    return out


def _swiglu(a: Any, b: Any) -> Any:
    """The function get_swiglu() returns: silu(a) * b."""
    return ops.swiglu(a, b)


@adapter("get_swiglu", uses="swiglu")
def get_swiglu(**kw: Any) -> Callable[[Any, Any], Any]:
    """TileGym: get_swiglu() returns swiglu(a, b)."""
    return _swiglu


@adapter("dropout", uses="dropout")
def dropout(
    x: Any, seed: int, p: float = 0.5, training: bool = True, inplace: bool = False, **kw: Any
) -> Any:
    """TileGym: dropout(x, seed, p, training, inplace) (seed second); returns x itself when not
    training or in place, as TileGym's test checks by id()."""
    if not training:
        return x
    y = ops.dropout(x, p=p, training=True, seed=seed, inplace=inplace)
    return x if inplace else y


@adapter("relu", uses="relu")
def relu(x: Any, **kw: Any) -> Any:
    """TileGym: relu(x)."""
    return ops.relu(x)


@adapter("gelu", uses="gelu")
def gelu(input: Any, approximate: str = "none", **kw: Any) -> Any:
    """TileGym: gelu(input, approximate="none")."""
    return ops.gelu(input, approximate=approximate)


@adapter("geglu", uses="geglu")
def geglu(input: Any, dim: int = -1, approximate: str = "none", **kw: Any) -> Any:
    """TileGym: geglu(input, dim=-1, approximate="none")."""
    return ops.geglu(input, dim=dim, approximate=approximate)


def _t(x: Any, flag: bool | None) -> Any:
    """x with its last two axes swapped when flag (a view, as TileGym's transposed operands)."""
    return x.transpose(-1, -2) if flag else x


@adapter("matmul", uses="matmul")
def matmul(
    a: Any, b: Any, trans_a: bool | None = False, trans_b: bool | None = False, **kw: Any
) -> Any:
    """TileGym: matmul(a, b, trans_a, trans_b, static_persistent, use_tma): op(a) @ op(b)."""
    return ops.matmul(_t(a, trans_a), _t(b, trans_b))


@adapter("bmm", uses="bmm")
def bmm(
    a: Any, b: Any, transpose_a: bool | None = False, transpose_b: bool | None = False, **kw: Any
) -> Any:
    """TileGym: bmm(a, b, transpose_a, transpose_b, static_persistent)."""
    return ops.bmm(_t(a, transpose_a), _t(b, transpose_b))


@adapter("group_gemm", uses="group_gemm")
def group_gemm(
    group_A: Any, group_B: Any, static_persistent: bool = True, transpose_b: bool = False, **kw: Any
) -> Any:
    """TileGym: group_gemm(group_A, group_B, static_persistent, transpose_b) -> list."""
    if len(group_A) == 0 or len(group_A) != len(group_B):
        raise ValueError("group_A and group_B must be non-empty and of the same length")
    return list(ops.group_gemm(list(group_A), [_t(b, transpose_b) for b in group_B]))


@adapter("transpose", uses="transpose")
def transpose(inp: Any, out: Any = None, **kw: Any) -> Any:
    """TileGym: transpose(inp, out=None) of a 2-D tensor."""
    y = ops.transpose(inp)
    if out is None:
        return y
    out.copy_(y)
    return out


@adapter("layer_norm_legacy", uses="layer_norm")
def layer_norm_legacy(
    input: Any,
    normalized_shape: Any,
    weight: Any,
    bias: Any,
    eps: float,
    weight_shift: float = 0.0,
    **kw: Any,
) -> Any:
    """TileGym: layer norm over the last axis with weight + weight_shift."""
    w = weight + weight_shift if weight_shift else weight
    return ops.layer_norm(input, (input.shape[-1],), w, bias, eps)


@adapter("apply_rope_base", uses="rope")
def apply_rope_base(
    q: Any,
    k: Any,
    cos: Any,
    sin: Any,
    position_ids: Any = None,
    unsqueeze_dim: int = 1,
    partial_rotary_factor: float = 1.0,
    **kw: Any,
) -> tuple[Any, Any]:
    """TileGym: apply_rope_base(q, k, cos, sin, position_ids=None, unsqueeze_dim=1,
    partial_rotary_factor=1.0) -> (q, k); position_ids unused, as cuTile's. Partial RoPE rotates
    the first cos.shape[-1] columns and passes the rest through."""
    if unsqueeze_dim != 1:
        raise NotImplementedError("fearless rope takes (B, H, S, D) q and k (unsqueeze_dim=1)")
    d, rd = q.shape[-1], cos.shape[-1]
    if partial_rotary_factor >= 1.0 or rd == d:
        qo, ko = ops.rope(q, k, cos, sin)
        return qo, ko
    qr, kr = ops.rope(q[..., :rd].contiguous(), k[..., :rd].contiguous(), cos, sin)
    return torch.cat([qr, q[..., rd:]], dim=-1), torch.cat([kr, k[..., rd:]], dim=-1)


@adapter("fused_moe", uses="fused_moe")
def fused_moe(
    hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any, **kw: Any
) -> Any:
    """TileGym: tilegym.ops.moe_interface.fused_moe(hidden_states, w1, w2, topk_weights, topk_ids)."""
    return ops.fused_moe(hidden_states, w1, w2, topk_weights, topk_ids)


class _RMSNorm(torch.nn.Module):
    """TileGym's RMSNorm module (get_rms_norm_module()): weight ones, `offset` added to it."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, offset: float = 0.0) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.hidden_size = hidden_size
        self.offset = offset

    def forward(self, hidden_states: Any, mode: Any = None) -> Any:
        w = self.weight + self.offset if self.offset else self.weight
        return ops.rms_norm(hidden_states, (self.hidden_size,), w, self.variance_epsilon)

    @staticmethod
    def compute_rstd_torch(x: Any, eps: float) -> Any:
        """TileGym's torch reference of the rows' rstd, (rows,) f32 (what its forward saves)."""
        x2 = x.reshape(-1, x.shape[-1]).float()
        return torch.rsqrt(x2.pow(2).mean(-1) + eps)

    @staticmethod
    def rms_norm_backward_torch(x: Any, dy: Any, weight: Any, rstd: Any) -> Any:
        """The reference test_rmsnorm_backward.py takes from the module class: TileGym's own
        torch backward (tilegym.ops.cutile.rms_norm's), so the reference stays TileGym's code."""
        from tilegym.ops.cutile.rms_norm import rms_norm_backward_torch

        return rms_norm_backward_torch(x, dy, weight, rstd)

    @staticmethod
    def rms_norm_backward(x: Any, dy: Any, weight: Any, rstd: Any) -> tuple[Any, Any]:
        """TileGym's standalone backward from the saved rstd: (dx, dw). fearless's
        `rms_norm_backward(dy, x, weight, eps)` recomputes rstd from x and eps, as its autograd
        does, so the eps that gave `rstd` is recovered (1/rstd^2 - mean(x^2), the rows'
        median, at least 0): the kernel under test is fearless's."""
        x2 = x.reshape(-1, x.shape[-1]).float()
        eps = (rstd.float().reshape(-1).pow(-2) - x2.pow(2).mean(-1)).median().clamp(min=0)
        dx, dw = backward_rows.rms_norm_backward(dy, x, weight, float(eps))
        return dx, dw


class _RMSNormGemma3(_RMSNorm):
    """get_rms_norm_module("gemma3"): `dim`, weight zeros, offset 1 (x * (1 + weight))."""

    def __init__(self, dim: int, eps: float = 1e-6, offset: float = 1.0, **kw: Any) -> None:
        super().__init__(dim, eps, offset)
        self.weight = torch.nn.Parameter(torch.zeros(dim))


@adapter("get_rms_norm_module", uses="rms_norm")
def get_rms_norm_module(model: str = "llama", **kw: Any) -> type:
    """TileGym: get_rms_norm_module(model) returns its RMSNorm nn.Module class."""
    return _RMSNormGemma3 if model == "gemma3" else _RMSNorm


class _SwiGLUMLP(torch.nn.Module):
    """TileGym's SwiGLU MLP module (get_swiglu_module()): down(swiglu(gate(x), up(x)))."""

    def __init__(
        self, config: Any, hidden_size: int | None = None, intermediate_size: int | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size if hidden_size is None else hidden_size
        self.intermediate_size = (
            config.intermediate_size if intermediate_size is None else intermediate_size
        )
        h, i = self.hidden_size, self.intermediate_size
        self.gate_proj = torch.nn.Linear(h, i, bias=False)
        self.up_proj = torch.nn.Linear(h, i, bias=False)
        self.down_proj = torch.nn.Linear(i, h, bias=False)
        if config.hidden_act not in ("silu", "swish"):
            raise ValueError(f"Activation function {config.hidden_act} not supported.")

    def forward(self, x: Any) -> Any:
        return self.down_proj(ops.swiglu(self.gate_proj(x), self.up_proj(x)))


@adapter("get_swiglu_module", uses="swiglu")
def get_swiglu_module(**kw: Any) -> type:
    """TileGym: get_swiglu_module() returns its SwiGLU MLP nn.Module class."""
    return _SwiGLUMLP


@adapter("get_apply_rope_func", uses="rope")
def get_apply_rope_func(model: str = "llama", **kw: Any) -> Callable[..., Any]:
    """TileGym: get_apply_rope_func(model) returns apply_rope_base for llama, qwen2, gemma3 and
    gpt-oss; a quarter-width partial RoPE for qwen3_5; DeepSeek's form over complex freqs_cis
    (q and k de-interleaved first)."""
    if model in ("llama", "qwen2", "gemma3", "gpt-oss"):
        return apply_rope_base
    if model == "qwen3_5":

        def partial(q: Any, k: Any, cos: Any, sin: Any, *a: Any, **k2: Any) -> tuple[Any, Any]:
            return apply_rope_base(q, k, cos, sin, partial_rotary_factor=0.25)

        return partial
    if model == "deepseek":

        def interleaved(q: Any, k: Any, freqs_cis: Any) -> tuple[Any, Any]:
            def split(t: Any) -> Any:
                b, h, s, d = t.shape
                return t.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)

            return apply_rope_base(split(q), split(k), freqs_cis.real, freqs_cis.imag)

        return interleaved
    raise ValueError(f"Unsupported model: {model}")


def fearless_op(name: str) -> Callable[..., Any]:
    """The fearless.ops function behind TileGym registry name `name` (KeyError if none)."""
    return getattr(ops, ADAPTERS[name][0])
