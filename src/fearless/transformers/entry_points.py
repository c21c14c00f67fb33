"""The entry points of fearless.transformers: `apply_fearless_kernel_to_<model_type>` patches a
Hugging Face modeling module (and, with `model=`, that model's existing modules) to run on
fearless.ops, with the flags of DESIGN section 2c (rope, rms_norm, swiglu, attention,
fused_linear_cross_entropy, model, and a model's own: moe, linear_attention, mlp), and
`apply(model)` picks the function by `model.config.model_type` (APPLY).

Four signatures are written out, Llama's (the common flags), Qwen3-MoE's (and `moe`), Gemma 2's
(and `mlp`) and Qwen3-Next's (and `linear_attention`); every other model's function takes one
of them (patch.py's `like`). Each calls patch.py's `install` with its arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.location import argument_error
from .patch import install, like


def apply_fearless_kernel_to_llama(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """Run Hugging Face's Llama (transformers.models.llama) on fearless kernels: RoPE, RMSNorm,
    the SwiGLU MLP, attention (with the `sdpa` implementation) and, when asked, the causal-LM
    loss as fused linear cross-entropy. `model`: a model already built, whose modules are
    patched too (modules built later get the patched classes)."""
    install("llama", **locals())


apply_fearless_kernel_to_mistral = like(
    apply_fearless_kernel_to_llama,
    "mistral",
    """`apply_fearless_kernel_to_llama` for Mistral (transformers.models.mistral); where the
    sliding window bites (Hugging Face builds its mask), a mask that is exactly the causal
    window (no padding) runs `fearless.ops.swa_attention`, in training too (its backward); a
    padded one runs fearless's masked attention, in inference and in training.""",
)


apply_fearless_kernel_to_qwen2 = like(
    apply_fearless_kernel_to_llama,
    "qwen2",
    """`apply_fearless_kernel_to_llama` for Qwen2 (transformers.models.qwen2); its sliding-window
    layers (`use_sliding_window`) as Mistral's.""",
)


apply_fearless_kernel_to_qwen3 = like(
    apply_fearless_kernel_to_llama,
    "qwen3",
    """`apply_fearless_kernel_to_llama` for Qwen3 (transformers.models.qwen3); its q and k
    norms are Qwen3RMSNorm modules, so `rms_norm` covers them; its sliding-window layers
    (`use_sliding_window`) as Mistral's.""",
)


def apply_fearless_kernel_to_qwen3_moe(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    moe: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """`apply_fearless_kernel_to_qwen3` for Qwen3-MoE (transformers.models.qwen3_moe): the
    dense parts as Qwen3's (`swiglu`: the MLP of its dense layers, `mlp_only_layers`), and with
    `moe` the sparse block's experts through `fearless.ops.fused_moe`, in training too (its
    backward gives the experts' and the routing weights' gradients; the router stays Hugging
    Face's). The fused loss is taken when the router logits are not asked for (no auxiliary
    loss); otherwise Hugging Face's forward runs."""
    install("qwen3_moe", **locals())


def apply_fearless_kernel_to_gemma2(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
    mlp: bool = True,
) -> None:
    """Run Hugging Face's Gemma 2 (transformers.models.gemma2) on fearless kernels: its RMSNorm
    ((1 + weight), as Gemma 3's), the GELU-gated MLP (`swiglu`, the gated MLP's flag
    of every model, or `mlp`: both must be on; as `fearless.ops.geglu`), RoPE, and its
    attention (the `eager` implementation, Gemma 2's: Hugging Face gives it no `sdpa`,
    which has no soft cap), patched through its `eager_attention_forward`: the global and the
    sliding-window layers on `fearless.ops.gemma_attention` with the config's
    attn_logit_softcapping as its soft cap where that is Hugging Face's result (no dropout, no
    attention weights asked for, and a mask that is exactly the causal (windowed) pattern of a
    prefill or decode, i.e. no padding; in training too, through its backward); a padded mask
    runs Hugging Face's eager code (fearless's masked attention has no soft cap; without a cap,
    fearless's masked attention). The fused loss is declined when the config soft-caps the
    final logits (final_logit_softcapping, 30.0 by default)."""
    install("gemma2", **locals())


apply_fearless_kernel_to_gemma = like(
    apply_fearless_kernel_to_gemma2,
    "gemma",
    """Run Hugging Face's Gemma (the first, transformers.models.gemma) on fearless kernels: its
    RMSNorm ((1 + weight), as Gemma 2's), the GELU-gated MLP (`swiglu` and `mlp`, as Gemma
    2's; as `fearless.ops.geglu`, with the GELU its `hidden_act` names), RoPE, and every
    layer's attention with the `sdpa` implementation as Llama's (Gemma has no soft cap and no
    sliding window), and when asked the fused loss.""",
)


apply_fearless_kernel_to_gemma3 = like(
    apply_fearless_kernel_to_gemma2,
    "gemma3",
    """Run Hugging Face's Gemma 3 (transformers.models.gemma3: Gemma3ForCausalLM, and the text
    model of Gemma3ForConditionalGeneration) on fearless kernels: its RMSNorm ((1 + weight),
    as `rms_norm` of 1 + weight; the q and k norms too), the GELU-gated MLP (`swiglu` and
    `mlp`, as Gemma 2's; as `fearless.ops.geglu`), RoPE, and attention with the `sdpa`
    implementation: the full layers as Llama's, the sliding-window layers on
    `fearless.ops.gemma_attention` where its result is Hugging Face's (no dropout and a mask
    that is exactly the causal window, i.e. no padding; in training too, through its
    backward), else as Llama's (a padded mask: fearless's masked attention, in training too).
    The fused loss is declined when the config soft-caps the final logits.""",
)


apply_fearless_kernel_to_gpt_oss = like(
    apply_fearless_kernel_to_llama,
    "gpt_oss",
    """Run Hugging Face's GPT-OSS (transformers.models.gpt_oss) on fearless kernels: RMSNorm,
    RoPE (its half-width tables), and its attention with sinks (the `eager` implementation,
    GPT-OSS's: it has no `sdpa`) on `fearless.ops.attention_sink` where that gives Hugging
    Face's result (no dropout and a mask that is exactly the causal or sliding-window
    pattern, i.e. no padding; prefill or decode; in training too, through its backward, which
    gives q, k, v and the `sinks` Parameter their gradients), else Hugging Face's eager
    code. The experts stay torch: their layout is not fused_moe's (biases on both
    projections, gate and up interleaved, clamped gate * sigmoid(alpha * gate) * (up + 1) in
    place of silu(gate) * up), so `swiglu` patches nothing here. The fused loss is taken when
    the router logits are not asked.""",
)


apply_fearless_kernel_to_olmoe = like(
    apply_fearless_kernel_to_qwen3_moe,
    "olmoe",
    """Run Hugging Face's OLMoE (transformers.models.olmoe) on fearless kernels: its RMSNorm
    (Llama's form; the q and k norms are OlmoeRMSNorm modules over the whole projection,
    (heads * head_dim) wide, before the split into heads, so `rms_norm` covers them as they
    are), RoPE, attention with the `sdpa` implementation as Llama's (`clip_qkv` clamps the
    normed projections in Hugging Face's code), and with `moe` the experts (every layer is
    sparse; `OlmoeExperts` is Qwen3-MoE's stacked layout) through `fearless.ops.fused_moe` in
    inference and training; the router stays Hugging Face's. It has no dense MLP, so `swiglu`
    patches nothing. The fused loss is taken when the router logits are not asked for.""",
)


apply_fearless_kernel_to_mixtral = like(
    apply_fearless_kernel_to_qwen3_moe,
    "mixtral",
    """Run Hugging Face's Mixtral (transformers.models.mixtral) on fearless kernels: its RMSNorm,
    RoPE, attention with the `sdpa` implementation as Mistral's (with `sliding_window` set, a
    mask that is exactly the causal window runs `fearless.ops.swa_attention`, in training
    too), and with `moe` the experts (every layer is sparse; `MixtralExperts` is Qwen3-MoE's
    stacked layout) through `fearless.ops.fused_moe` in inference and training; the router
    (and its training-time jitter) stays Hugging Face's. It has no dense MLP, so `swiglu`
    patches nothing. The fused loss is taken when the router logits are not asked for.""",
)


def apply_fearless_kernel_to_qwen3_next(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    linear_attention: bool = True,
    moe: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """Run Hugging Face's Qwen3-Next (transformers.models.qwen3_next) on fearless kernels: its
    RMSNorm ((1 + weight), Gemma's form, as `rms_norm` of 1 + weight; the q and k norms too) and
    the gated RMSNorm of its linear-attention layers (`rms_norm` then `swiglu`); the SwiGLU MLP
    (`swiglu`: the dense layers' and the MoE's shared expert); RoPE over the first
    partial_rotary_factor * head_dim columns; the full-attention layers with the `sdpa`
    implementation as Qwen3's (their output gate stays Hugging Face's torch); with
    `linear_attention`, the gated delta rule of the linear-attention layers on
    `fearless.ops.chunk_gated_delta_rule` (prefill) and `recurrent_gated_delta_rule` (cached
    decode) where no grad is recorded (they are forward only), else Hugging Face's torch code
    (its causal conv1d stays torch); with `moe` the routed experts through
    `fearless.ops.fused_moe` in inference and training (the router and the shared expert's
    gate stay Hugging Face's). The fused loss is taken when the router logits are not asked for."""
    install("qwen3_next", **locals())


apply_fearless_kernel_to_qwen2_moe = like(
    apply_fearless_kernel_to_qwen3_moe,
    "qwen2_moe",
    """Run Hugging Face's Qwen2-MoE (transformers.models.qwen2_moe: Qwen1.5-MoE, Qwen2-57B-A14B)
    on fearless kernels: its RMSNorm, RoPE, attention with the `sdpa` implementation as
    Llama's, the SwiGLU MLP (`swiglu`: its shared expert and any dense layer), and with `moe`
    the routed experts through `fearless.ops.fused_moe` in inference and training; the router
    and the shared expert's sigmoid gate stay Hugging Face's. The fused loss is taken when the
    router logits are not asked for.""",
)


apply_fearless_kernel_to_glm4_moe = like(
    apply_fearless_kernel_to_qwen3_moe,
    "glm4_moe",
    """Run Hugging Face's GLM-4-MoE (transformers.models.glm4_moe: GLM-4.5, GLM-4.6) on fearless
    kernels: its RMSNorm (the optional q and k norms too), RoPE over the first
    partial_rotary_factor * head_dim columns (as Qwen3-Next's), attention with the `sdpa`
    implementation as Llama's, the SwiGLU MLP (`swiglu`: the first dense layers and the shared
    experts), and with `moe` the routed experts through `fearless.ops.fused_moe` in inference
    and training; the grouped sigmoid router stays Hugging Face's. The fused loss is taken
    when the router logits are not asked for.""",
)


apply_fearless_kernel_to_qwen3_5_moe = like(
    apply_fearless_kernel_to_qwen3_next,
    "qwen3_5_moe",
    """`apply_fearless_kernel_to_qwen3_next` for Qwen3.5's mixtures of experts
    (transformers.models.qwen3_5_moe: Qwen3_5MoeForCausalLM, and the text model of the
    multimodal one), whose text layers are Qwen3-Next's: the (1 + weight) and gated RMSNorms,
    partial RoPE, the full-attention layers, the gated delta rule of the linear-attention
    layers (forward only: without grad), and with `moe` the routed experts on
    `fearless.ops.fused_moe` in inference and training. Its vision tower stays Hugging
    Face's.""",
)


apply_fearless_kernel_to_qwen3_5 = like(
    apply_fearless_kernel_to_qwen3_next,
    "qwen3_5",
    """`apply_fearless_kernel_to_qwen3_5_moe` for the dense Qwen3.5 (transformers.models.qwen3_5):
    the same hybrid layers with a SwiGLU MLP in every layer (`swiglu`); it has no experts, so
    `moe` patches nothing.""",
)


apply_fearless_kernel_to_deepseek_v3 = like(
    apply_fearless_kernel_to_qwen3_moe,
    "deepseek_v3",
    """Run Hugging Face's DeepSeek-V3 (transformers.models.deepseek_v3) on fearless kernels:
    its RMSNorm (Llama's form; the q_a and kv_a latent norms too), the SwiGLU MLP (`swiglu`:
    the dense layers' and the shared experts), its multi-head latent attention with the `sdpa`
    implementation (`attention`; Hugging Face's projections, latent cache and RoPE stay torch,
    so `rope` patches nothing) on `fearless.ops.mla` where that gives Hugging Face's result
    (no grad: mla is forward only; a prefill, or one decoded token over the cache, without
    padding), else Hugging Face's (torch's SDPA: qk_head_dim != v_head_dim, which fearless's
    flash attention does not take),
    and with `moe` the routed experts (Qwen3-MoE's stacked layout) through
    `fearless.ops.fused_moe` in inference and training (the grouped sigmoid router stays
    Hugging Face's).
    The fused loss is taken when the router logits are not asked for.""",
)


apply_fearless_kernel_to_deepseek_v2 = like(
    apply_fearless_kernel_to_deepseek_v3,
    "deepseek_v2",
    """`apply_fearless_kernel_to_deepseek_v3` for DeepSeek-V2 (transformers.models.deepseek_v2):
    its RMSNorm (Llama's form; the q_a and kv_a latent norms too), the SwiGLU MLP (the dense
    layers' and the shared experts), its multi-head latent attention on `fearless.ops.mla` in
    inference as V3's (`attention`), and with `moe` the routed experts (`DeepseekV2Experts`,
    Qwen3-MoE's stacked layout) through `fearless.ops.fused_moe` in inference and training
    (the softmax router, greedy or group-limited, stays Hugging Face's). Its
    RoPE (complex multiplication of interleaved pairs) stays Hugging Face's. The fused loss is
    taken when the router logits are not asked for.""",
)


apply_fearless_kernel_to_olmo3 = like(
    apply_fearless_kernel_to_llama,
    "olmo3",
    """Run Hugging Face's OLMo 3 (transformers.models.olmo3) on fearless kernels: its RMSNorm
    (weight times the f32 normalized rows, then cast; the post-attention and post-feedforward
    norms, and the q and k norms over the whole projection width, as OLMoE's), RoPE (its
    tables are f32: with f16/bf16 activations `fearless.ops.rope` rotates in f32 and rounds
    once to the activations' dtype, as Hugging Face's code does), attention with
    the `sdpa` implementation as Mistral's (the sliding-window layers on
    `fearless.ops.swa_attention` where the mask is exactly the causal window, in training
    too), and with `swiglu` the MLP as one `fearless.ops.linear_gluact_linear` in
    inference (TileGym's fused MLP, forward only) and `fearless.ops.swiglu` between Hugging
    Face's projections in training.""",
)


apply_fearless_kernel_to_olmo2 = like(
    apply_fearless_kernel_to_llama,
    "olmo2",
    """`apply_fearless_kernel_to_olmo3` for OLMo 2 (transformers.models.olmo2), which has no
    sliding window: its RMSNorm (the post-attention and post-feedforward norms, and the q and k
    norms over the whole projection width), RoPE (f32 tables, taken with f16/bf16
    activations as OLMo 3's), every layer's attention with the `sdpa` implementation as Llama's,
    and with `swiglu` the MLP as one `fearless.ops.linear_gluact_linear` in inference and
    `fearless.ops.swiglu` between Hugging Face's projections in training.""",
)


apply_fearless_kernel_to_phi3 = like(
    apply_fearless_kernel_to_llama,
    "phi3",
    """Run Hugging Face's Phi-3 (transformers.models.phi3) on fearless kernels: its RMSNorm
    (Llama's form), RoPE (over the first partial_rotary_factor * head_dim columns, as
    Qwen3-Next's, where that width is a power of two; else Hugging Face's rotation), the MLP
    (`swiglu`: its fused gate_up_proj's output, gate then up, through
    `fearless.ops.silu_and_mul`, in training too), and attention with the `sdpa`
    implementation as Mistral's (its fused qkv_proj is split by Hugging Face's code; with
    `sliding_window` set, a mask that is exactly the causal window runs
    `fearless.ops.swa_attention`, in training too), and when asked the fused loss.""",
)


apply_fearless_kernel_to_smollm3 = like(
    apply_fearless_kernel_to_llama,
    "smollm3",
    """Run Hugging Face's SmolLM3 (transformers.models.smollm3) on fearless kernels: its
    RMSNorm, the SwiGLU MLP, RoPE (on the layers that rotate: its `no_rope_layers` skip
    `apply_rotary_pos_emb`, so those stay unrotated), attention with the `sdpa`
    implementation as Mistral's (with `use_sliding_window`, a layer whose mask is exactly the
    causal window runs `fearless.ops.swa_attention`, in training too), and when asked the fused
    loss.""",
)


apply_fearless_kernel_to_granite = like(
    apply_fearless_kernel_to_llama,
    "granite",
    """Run Hugging Face's Granite (transformers.models.granite, IBM's Granite 3) on fearless
    kernels: its RMSNorm, the SwiGLU MLP, RoPE, and attention with the `sdpa` implementation
    as Llama's at the config's `attention_multiplier` as the scale (its embedding and residual
    multipliers stay Hugging Face's code), and when asked the fused loss, of the hidden states
    divided by `logits_scaling` (the logits Granite divides by it).""",
)


APPLY: dict[str, Callable[..., None]] = {
    "llama": apply_fearless_kernel_to_llama,
    "mistral": apply_fearless_kernel_to_mistral,
    "mixtral": apply_fearless_kernel_to_mixtral,
    "qwen2": apply_fearless_kernel_to_qwen2,
    "qwen3": apply_fearless_kernel_to_qwen3,
    "qwen3_moe": apply_fearless_kernel_to_qwen3_moe,
    "qwen2_moe": apply_fearless_kernel_to_qwen2_moe,
    "glm4_moe": apply_fearless_kernel_to_glm4_moe,
    "gemma": apply_fearless_kernel_to_gemma,
    "gemma2": apply_fearless_kernel_to_gemma2,
    "gemma3": apply_fearless_kernel_to_gemma3,  # Gemma3ForConditionalGeneration
    "gemma3_text": apply_fearless_kernel_to_gemma3,  # Gemma3ForCausalLM
    "gpt_oss": apply_fearless_kernel_to_gpt_oss,
    "olmoe": apply_fearless_kernel_to_olmoe,
    "qwen3_next": apply_fearless_kernel_to_qwen3_next,
    "qwen3_5": apply_fearless_kernel_to_qwen3_5,  # Qwen3_5ForConditionalGeneration
    "qwen3_5_text": apply_fearless_kernel_to_qwen3_5,  # Qwen3_5ForCausalLM
    "qwen3_5_moe": apply_fearless_kernel_to_qwen3_5_moe,
    "qwen3_5_moe_text": apply_fearless_kernel_to_qwen3_5_moe,
    "deepseek_v2": apply_fearless_kernel_to_deepseek_v2,
    "deepseek_v3": apply_fearless_kernel_to_deepseek_v3,
    "olmo2": apply_fearless_kernel_to_olmo2,
    "olmo3": apply_fearless_kernel_to_olmo3,
    "phi3": apply_fearless_kernel_to_phi3,
    "smollm3": apply_fearless_kernel_to_smollm3,
    "granite": apply_fearless_kernel_to_granite,
}


# The model types `apply` takes (a `config.model_type`), sorted
MODEL_TYPES: tuple[str, ...] = tuple(sorted(APPLY))


def apply(model: Any, **flags: bool) -> Any:
    """Patch `model` (a Hugging Face PreTrainedModel) by its `config.model_type` with
    `apply_fearless_kernel_to_<model_type>(model=model, **flags)`; returns the model."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in APPLY:
        raise argument_error(
            f"fearless.transformers.apply has no kernels for model_type {model_type!r}; it "
            f"supports {', '.join(MODEL_TYPES)}",
            help="patch the supported layers yourself with fearless.ops, or leave it unpatched",
        )
    APPLY[model_type](model=model, **flags)
    return model
