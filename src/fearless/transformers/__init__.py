"""fearless.transformers: Hugging Face transformers models on fearless kernels (DESIGN 2c,
"Models"), TileGym's and Liger-Kernel's convention.

    from fearless import transformers as flt
    flt.apply(model)                                    # by model.config.model_type
    flt.apply_fearless_kernel_to_llama(model=model)     # or per model type, with flags
    flt.MODEL_TYPES                                     # the model types apply takes

Supported model types: deepseek_v2, deepseek_v3, llama, mistral, mixtral, qwen2, qwen2_moe,
qwen3, qwen3_moe, glm4_moe, gemma, gemma2, gemma3 (and gemma3_text), gpt_oss, olmoe, olmo2,
olmo3, phi3, qwen3_next, qwen3_5 (and qwen3_5_text), qwen3_5_moe (and qwen3_5_moe_text),
smollm3, granite. The patches are in patch.py (the model table, the pieces each flag installs,
`install`) and entry_points.py (the `apply_fearless_kernel_to_<type>` functions and `apply`),
the forwards they install in layers.py (RMSNorm, the SwiGLU MLP, OLMo 2's and 3's fused MLP,
Phi-3's fused gate-up projection, RoPE, attention, the sliding windows, DeepSeek's latent
attention), experts.py (the MoE experts as fused_moe), gemma.py (Gemma's RMSNorm and GELU MLP,
Gemma 2's soft-capped attention), sinks.py (GPT-OSS's attention with sinks),
linear_attention.py (Qwen3-Next's gated delta rule and gated RMSNorm) and loss.py (the
causal-LM loss as fused linear cross-entropy). In training (autograd recording) the ops with a
backward run as in inference: rms_norm, swiglu, silu_and_mul, geglu, rope, attention without a
mask (or with exactly the causal window: gemma_attention, Gemma 2's global layers' too,
swa_attention, GPT-OSS's attention_sink, whose backward gives the sinks their gradient too),
fused_moe and the fused loss; the forward-only ones (the fused MLP, masked attention, mla, the
gated delta rule) leave the call to Hugging Face's torch code. `import fearless` does not
import this package, and this package imports Hugging Face transformers only when one of its
functions is called.
"""

from .entry_points import (
    MODEL_TYPES,
    apply,
    apply_fearless_kernel_to_deepseek_v2,
    apply_fearless_kernel_to_deepseek_v3,
    apply_fearless_kernel_to_gemma,
    apply_fearless_kernel_to_gemma2,
    apply_fearless_kernel_to_gemma3,
    apply_fearless_kernel_to_glm4_moe,
    apply_fearless_kernel_to_gpt_oss,
    apply_fearless_kernel_to_granite,
    apply_fearless_kernel_to_llama,
    apply_fearless_kernel_to_mistral,
    apply_fearless_kernel_to_mixtral,
    apply_fearless_kernel_to_olmo2,
    apply_fearless_kernel_to_olmo3,
    apply_fearless_kernel_to_olmoe,
    apply_fearless_kernel_to_phi3,
    apply_fearless_kernel_to_qwen2,
    apply_fearless_kernel_to_qwen2_moe,
    apply_fearless_kernel_to_qwen3,
    apply_fearless_kernel_to_qwen3_5,
    apply_fearless_kernel_to_qwen3_5_moe,
    apply_fearless_kernel_to_qwen3_moe,
    apply_fearless_kernel_to_qwen3_next,
    apply_fearless_kernel_to_smollm3,
)

__all__ = [
    "MODEL_TYPES",
    "apply",
    "apply_fearless_kernel_to_deepseek_v2",
    "apply_fearless_kernel_to_deepseek_v3",
    "apply_fearless_kernel_to_gemma",
    "apply_fearless_kernel_to_gemma2",
    "apply_fearless_kernel_to_gemma3",
    "apply_fearless_kernel_to_glm4_moe",
    "apply_fearless_kernel_to_gpt_oss",
    "apply_fearless_kernel_to_granite",
    "apply_fearless_kernel_to_llama",
    "apply_fearless_kernel_to_mistral",
    "apply_fearless_kernel_to_mixtral",
    "apply_fearless_kernel_to_olmo2",
    "apply_fearless_kernel_to_olmo3",
    "apply_fearless_kernel_to_olmoe",
    "apply_fearless_kernel_to_phi3",
    "apply_fearless_kernel_to_qwen2",
    "apply_fearless_kernel_to_qwen2_moe",
    "apply_fearless_kernel_to_qwen3",
    "apply_fearless_kernel_to_qwen3_5",
    "apply_fearless_kernel_to_qwen3_5_moe",
    "apply_fearless_kernel_to_qwen3_moe",
    "apply_fearless_kernel_to_qwen3_next",
    "apply_fearless_kernel_to_smollm3",
]
