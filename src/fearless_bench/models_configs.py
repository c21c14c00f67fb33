"""The models family's models and workloads: each model's Hugging Face configuration at its real
layer dimensions (hidden, intermediate, heads, KV heads, head_dim, vocabulary, experts) with 2
to 4 layers, built in code (no weights are downloaded; the probe draws random bf16 weights),
and the workloads a model is measured on (training steps, prefill, cached decode).

Sources (the released config.json of each model): Llama-3-8B (meta-llama/Meta-Llama-3-8B),
Qwen3-8B, Mistral-7B-v0.1 (its 4096-token sliding window), GPT-OSS-20B (32 experts, top 4,
sinks, alternating 128-token windows), Qwen3-30B-A3B (128 experts of 768, top 8), Gemma-3-12B
(three 1024-token sliding layers then a global one, as its 5:1 pattern), DeepSeek-V3's MLA and
MoE dimensions with 16 routed experts in place of 256 (a dense first layer, then a MoE one),
OLMoE-1B-7B (64 experts of 1024, top 8) and Qwen3-Next-80B-A3B (a gated-delta-rule layer and a
full-attention one, 512 experts of 512, top 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["train", "prefill", "decode"]


@dataclass(frozen=True)
class Workload:
    """One measured workload: `batch` sequences of `seq` tokens (decode: `seq` is the prompt
    the KV cache holds before the timed steps, and each timed run generates `new_tokens`)."""

    name: str
    kind: Kind
    batch: int
    seq: int
    new_tokens: int = 0

    def tokens_per_step(self) -> int:
        """Tokens one timed step processes (decode: one new token per sequence)."""
        return self.batch if self.kind == "decode" else self.batch * self.seq

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.kind, "batch": self.batch, "seq": self.seq}
        if self.kind == "decode":
            out["new_tokens"] = self.new_tokens
        return out


WORKLOADS = (
    Workload("train_4x2048", "train", 4, 2048),
    Workload("train_1x8192", "train", 1, 8192),
    Workload("prefill_4x2048", "prefill", 4, 2048),
    Workload("decode_b1", "decode", 1, 1024, new_tokens=64),
    Workload("decode_b32", "decode", 32, 1024, new_tokens=64),
)
QUICK_WORKLOADS = ("train_4x2048", "prefill_4x2048", "decode_b1")
WORKLOAD = {w.name: w for w in WORKLOADS}


@dataclass(frozen=True)
class ModelSpec:
    """One model: its tag in case names, the Hugging Face config class and its arguments, and
        the suffix of each kernel library's patch function for its model type (the probe skips a
    library whose installed version has no such function).
        `dims` are the real model's dimensions the configuration keeps (checked by the tests)."""

    tag: str
    title: str
    config_class: str  # a name in the transformers package
    kwargs: dict[str, Any]
    dims: dict[str, int]
    tilegym: str  # tilegym.transformers.apply_tilegym_kernel_to_<this>, where it exists
    liger: str  # liger_kernel.transformers.apply_liger_kernel_to_<this>, where it exists
    notes: tuple[str, ...] = field(default=())

    @property
    def layers(self) -> int:
        return int(self.kwargs["num_hidden_layers"])


def _dense(
    hidden: int, inter: int, heads: int, kv: int, head_dim: int, vocab: int, layers: int = 4
) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "num_hidden_layers": layers,
        "max_position_embeddings": 16384,
        "tie_word_embeddings": False,
    }


def _dims(kw: dict[str, Any], *extra: str) -> dict[str, int]:
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads")
    return {k: int(kw[k]) for k in (*keys, "head_dim", "vocab_size", *extra) if k in kw}


LLAMA = _dense(4096, 14336, 32, 8, 128, 128256) | {
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}
}
QWEN3 = _dense(4096, 12288, 32, 8, 128, 151936) | {
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}
}
MISTRAL = _dense(4096, 14336, 32, 8, 128, 32000) | {"sliding_window": 4096}
GPT_OSS = _dense(2880, 2880, 64, 8, 64, 201088, layers=2) | {
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"],
    "max_position_embeddings": 131072,  # its YaRN's 32 x 4096
}
QWEN3_MOE = _dense(2048, 6144, 32, 4, 128, 151936, layers=2) | {
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
}
GEMMA3 = _dense(3840, 15360, 16, 8, 256, 262208) | {
    "sliding_window": 1024,
    "query_pre_attn_scalar": 256,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
}
DEEPSEEK_V3 = _dense(7168, 18432, 128, 128, 192, 129280, layers=2) | {
    "moe_intermediate_size": 2048,
    "n_routed_experts": 16,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "first_k_dense_replace": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
DEEPSEEK_V3.pop("head_dim")  # MLA's: qk_nope + qk_rope, set by the config
OLMOE = _dense(2048, 1024, 16, 16, 128, 50304, layers=2) | {
    "num_experts": 64,
    "num_experts_per_tok": 8,
}
OLMOE.pop("head_dim")  # hidden / heads = 128
QWEN3_NEXT = _dense(2048, 5120, 16, 2, 256, 151936, layers=2) | {
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "layer_types": ["linear_attention", "full_attention"],
}

_MOE = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")

MODELS = (
    ModelSpec("llama3_8b", "Llama-3-8B", "LlamaConfig", LLAMA, _dims(LLAMA), "llama", "llama"),
    ModelSpec("qwen3_8b", "Qwen3-8B", "Qwen3Config", QWEN3, _dims(QWEN3), "qwen3", "qwen3"),
    ModelSpec(
        "mistral_7b", "Mistral-7B", "MistralConfig", MISTRAL, _dims(MISTRAL), "mistral", "mistral"
    ),
    ModelSpec(
        "gpt_oss_20b",
        "GPT-OSS-20B",
        "GptOssConfig",
        GPT_OSS,
        _dims(GPT_OSS, *_MOE),
        "gpt_oss",
        "gpt_oss",
        ("eager attention with sinks: GPT-OSS has no sdpa path in Hugging Face",),
    ),
    ModelSpec(
        "qwen3_moe_30b_a3b",
        "Qwen3-30B-A3B",
        "Qwen3MoeConfig",
        QWEN3_MOE,
        _dims(QWEN3_MOE, *_MOE),
        "qwen3_moe",
        "qwen3_moe",
    ),
    ModelSpec(
        "gemma3_12b",
        "Gemma-3-12B",
        "Gemma3TextConfig",
        GEMMA3,
        _dims(GEMMA3),
        "gemma3",
        "gemma3_text",
    ),
    ModelSpec(
        "deepseek_v3_small_moe",
        "DeepSeek-V3-like (MLA, 16 experts)",
        "DeepseekV3Config",
        DEEPSEEK_V3,
        _dims(DEEPSEEK_V3, *_MOE, "kv_lora_rank", "q_lora_rank"),
        "deepseek_v3",
        "deepseek_v3",
        ("16 routed experts in place of DeepSeek-V3's 256",),
    ),
    ModelSpec(
        "olmoe_1b_7b", "OLMoE-1B-7B", "OlmoeConfig", OLMOE, _dims(OLMOE, *_MOE), "olmoe", "olmoe"
    ),
    ModelSpec(
        "qwen3_next_80b_a3b",
        "Qwen3-Next-80B-A3B",
        "Qwen3NextConfig",
        QWEN3_NEXT,
        _dims(QWEN3_NEXT, *_MOE, "linear_num_value_heads"),
        "qwen3_next",
        "qwen3_next",
    ),
)
MODEL = {m.tag: m for m in MODELS}
QUICK_MODELS = ("llama3_8b",)


def case_name(spec: ModelSpec, workload: Workload) -> str:
    return f"models_{spec.tag}_{workload.name}"


def hf_config(spec: ModelSpec, **overrides: Any) -> Any:
    """The Hugging Face configuration of `spec` (its kwargs, then `overrides`: the CPU test's
    toy sizes)."""
    import transformers

    return getattr(transformers, spec.config_class)(**{**spec.kwargs, **overrides})
