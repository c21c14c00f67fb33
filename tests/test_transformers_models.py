"""fearless.transformers on OLMoE, OLMo 2 and 3, Qwen3-Next, DeepSeek-V2/V3, Phi-3, SmolLM3 and
Granite, on the simulator with CPU torch: tiny random models patched by `apply` (or the
per-model function) give Hugging Face's logits, loss and gradients in training, where the
forward-only ops (the gated delta rule, mla) fall back to Hugging Face's code and fused_moe
runs with its backward, and its logits in inference, where they all run; the op calls are
counted to prove the routing. OLMo 2 and 3 in bf16 rotate by their f32 RoPE tables on rope:
Hugging Face's logits bit for bit. Granite's fused loss divides by its logits_scaling."""

from __future__ import annotations

import importlib
from collections import Counter
from functools import partial
from typing import Any

import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers")
flt = importlib.import_module("fearless.transformers")
from support.hf_patches import (  # noqa: E402
    TINY,
    VIAS,
    check_fused_loss,
    check_greedy_generation,
    check_train_then_infer,
    count_calls,
    draw_norm_weights,
    on_the_simulator,
    patch_via,
    tiny_model,
    token_batch,
)

LAYERS, VOCAB, SEQ = TINY["num_hidden_layers"], TINY["vocab_size"], 12
OPS = (
    "rms_norm",
    "swiglu",
    "rope",
    "scaled_dot_product_attention",
    "fused_moe",
    "chunk_gated_delta_rule",
    "recurrent_gated_delta_rule",
    "fused_linear_cross_entropy",
    "mla",
    "linear_gluact_linear",
    "swa_attention",
    "silu_and_mul",
)


@pytest.fixture(autouse=True)
def restore(monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_simulator(monkeypatch)


def _batch(batch: int = 2) -> tuple[Any, Any]:
    return token_batch(VOCAB, SEQ, batch)


# ------------------------------------------------------------------------------------- OLMoE


def _olmoe(seed: int = 0, clip_qkv: float | None = None) -> Any:
    """Two sparse layers of 4 experts of 32, top 2."""
    return tiny_model(
        "Olmoe",
        seed,
        intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        clip_qkv=clip_qkv,
        pad_token_id=0,
        eos_token_id=1,
    )


@pytest.mark.parametrize("via", VIAS)
def test_olmoe_trains_and_infers_on_fused_moe(via: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_olmoe)
        assert type(model.model.layers[1].mlp.experts).__name__ == "FearlessOlmoeExperts"

    # 2 norms per layer, the whole-width q and k norms, the final norm; rope and attention
    # per layer; fused_moe once per (sparse) layer, in training too
    dense = {"rms_norm": 4 * LAYERS + 1, "rope": LAYERS, "scaled_dot_product_attention": LAYERS}
    both = Counter({**dense, "fused_moe": LAYERS})
    check_train_then_infer(_olmoe(), patch, monkeypatch, _batch(), OPS, both, both)


def test_olmoe_clip_qkv_and_fused_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """clip_qkv clamps the normed q and k in place (on fearless's rms_norm output); the fused
    loss makes no logits."""
    calls = check_fused_loss(_olmoe(clip_qkv=0.5), _batch(), monkeypatch, "rms_norm")
    assert calls["fused_linear_cross_entropy"] == 1
    assert calls["rms_norm"] == 4 * LAYERS + 1


# ---------------------------------------------------------------------------------- Qwen3-Next


def _qwen3_next(seed: int = 0) -> Any:
    """Layer 0 linear attention (gated delta rule, 2 key heads, 4 value heads) with a sparse
    MoE (4 experts of 32, top 2, a shared expert), layer 1 full attention (rotary on the first
    quarter of head_dim 16) with a dense MLP."""
    model = tiny_model(
        "Qwen3Next",
        seed,
        intermediate_size=64,
        head_dim=16,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        mlp_only_layers=[1],
        layer_types=["linear_attention", "full_attention"],
    )
    draw_norm_weights(model, 0.2)
    return model


# the three Gemma-form norms of each layer's ends and the final one, the full layer's q and k
# norms, the linear layer's gated norm; SwiGLU in its gated norm, the shared expert and the
# dense MLP; rope and attention on the full layer
NEXT = {"rms_norm": 2 * LAYERS + 2 + 1 + 1, "swiglu": 3, "rope": 1}
NEXT_ATTENTION = {**NEXT, "scaled_dot_product_attention": 1}


@pytest.mark.parametrize("via", VIAS)
def test_qwen3_next_trains_on_hugging_faces_delta_rule_and_infers_on_fearless(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_qwen3_next)
        assert type(model.model.layers[0].linear_attn.norm).__name__ == (
            "FearlessQwen3NextRMSNormGated"
        )

    # the experts on fused_moe in training too; the delta rule only without grad
    train = Counter({**NEXT_ATTENTION, "fused_moe": 1})
    infer = Counter({**train, "chunk_gated_delta_rule": 1})
    check_train_then_infer(_qwen3_next(), patch, monkeypatch, _batch(), OPS, train, infer)


def _qwen3_5(seed: int = 0, moe: bool = True) -> Any:
    """Qwen3.5's text model, Qwen3-Next's layers: layer 0 linear attention (gated delta rule)
    with, for the MoE form, 4 experts of 32 (top 2) and a shared expert, layer 1 full
    attention (rotary on the first quarter of head_dim 16); the dense form's MLPs."""
    experts = {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
               "num_experts": 4, "num_experts_per_tok": 2} if moe else {}  # fmt: skip
    model = tiny_model(
        "Qwen3_5Moe" if moe else "Qwen3_5",
        seed,
        text=True,
        intermediate_size=64,
        head_dim=16,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        layer_types=["linear_attention", "full_attention"],
        **experts,
    )
    draw_norm_weights(model, 0.2)
    return model


@pytest.mark.parametrize("moe", [True, False], ids=["qwen3_5_moe", "qwen3_5"])
def test_qwen3_5_trains_and_infers_as_qwen3_next(
    moe: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qwen3.5 (its text model) takes Qwen3-Next's pieces: the norms, partial RoPE, the full
    attention, the delta rule without grad; the MoE form's experts (both layers sparse) on
    fused_moe with its shared expert's SwiGLU, the dense form's SwiGLU MLP in both layers."""
    model = _qwen3_5(moe=moe)

    def patch(model: Any) -> None:
        flt.apply(model)
        prefix = "Qwen3_5Moe" if moe else "Qwen3_5"
        assert type(model.model.layers[0].linear_attn.norm).__name__ == (
            f"Fearless{prefix}RMSNormGated"
        )

    dense = {**NEXT_ATTENTION, "swiglu": 1 + LAYERS}
    train = Counter({**dense, "fused_moe": LAYERS} if moe else dense)
    infer = Counter({**train, "chunk_gated_delta_rule": 1})
    check_train_then_infer(model, patch, monkeypatch, _batch(), OPS, train, infer)


@pytest.mark.parametrize("moe", [True, False], ids=["qwen3_5_moe", "qwen3_5"])
def test_qwen3_5_generation_decodes_on_the_recurrent_delta_rule(
    moe: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _qwen3_5(moe=moe).eval()
    ids, _ = _batch(1)
    kw = {"max_new_tokens": 3, "do_sample": False, "output_logits": True}
    calls = check_greedy_generation(model, ids, monkeypatch, flt.apply, OPS, **kw)
    # the prefill chunked, two decode steps recurrent over the cached state
    assert calls["chunk_gated_delta_rule"] == 1 and calls["recurrent_gated_delta_rule"] == 2
    assert calls["scaled_dot_product_attention"] == 3, calls
    assert calls["fused_moe"] == (3 * LAYERS if moe else 0), calls


def test_qwen3_next_generation_decodes_on_the_recurrent_delta_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _qwen3_next().eval()
    ids, _ = _batch(1)
    kw = {"max_new_tokens": 3, "do_sample": False, "output_logits": True}
    calls = check_greedy_generation(model, ids, monkeypatch, flt.apply, OPS, **kw)
    # the prefill chunked, two decode steps recurrent over the cached state
    assert calls["chunk_gated_delta_rule"] == 1 and calls["recurrent_gated_delta_rule"] == 2
    assert calls["fused_moe"] == 3 and calls["scaled_dot_product_attention"] == 3, calls


def test_qwen3_next_partial_rope_and_gated_norm_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.qwen3_next import modeling_qwen3_next as m

    rope, norm_cls = m.apply_rotary_pos_emb, m.Qwen3NextRMSNormGated
    norm = norm_cls(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x, gate = torch.randn(10, 16), torch.randn(10, 16)
    want_norm = norm(x, gate)
    flt.apply_fearless_kernel_to_qwen3_next(model=norm)
    calls = count_calls(monkeypatch, "rope", "rms_norm", "swiglu")
    torch.testing.assert_close(norm(x, gate), want_norm, rtol=1e-5, atol=1e-5)
    assert calls == Counter({"rms_norm": 1, "swiglu": 1})
    q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 2, 5, 16)
    angles = torch.randn(1, 5, 2)  # Hugging Face's tables repeat one angle per pair
    cos, sin = torch.cat((angles.cos(),) * 2, -1), torch.cat((angles.sin(),) * 2, -1)
    got = m.apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(got, rope(q, k, cos, sin), rtol=1e-5, atol=1e-5)
    assert calls["rope"] == 1
    got = m.apply_rotary_pos_emb(q, k, cos[..., :3], sin[..., :3])  # 3 columns: torch's
    assert calls["rope"] == 1
    torch.testing.assert_close(got, rope(q, k, cos[..., :3], sin[..., :3]), rtol=0, atol=0)


# --------------------------------------------------------------------------------- DeepSeek-V3


def _deepseek_v3(seed: int = 0, v_head_dim: int = 16) -> Any:
    """Layer 0 dense, layer 1 sparse (4 routed experts of 32 in 2 groups, top 2, a shared
    expert); MLA with q and kv LoRA ranks."""
    return tiny_model(
        "DeepseekV3",
        seed,
        intermediate_size=64,
        moe_intermediate_size=32,
        num_key_value_heads=4,
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=1,
        q_lora_rank=32,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=v_head_dim,
    )


def test_deepseek_v3_norms_mlps_and_experts(monkeypatch: pytest.MonkeyPatch) -> None:
    def patch(model: Any) -> None:
        assert flt.apply(model) is model

    # 2 norms per layer, the q_a and kv_a latent norms, the final one; the dense MLP and the
    # shared expert; RoPE stays Hugging Face's, and its latent attention (qk_head_dim 24 !=
    # v_head_dim 16) is torch's SDPA in training, fearless.ops.mla without grad; the routed
    # experts on fused_moe in both
    dense = {"rms_norm": 4 * LAYERS + 1, "swiglu": 2, "fused_moe": 1}
    train, infer = Counter(dense), Counter({**dense, "mla": LAYERS})
    check_train_then_infer(_deepseek_v3(), patch, monkeypatch, _batch(), OPS, train, infer)


def test_deepseek_v3_generation_prefills_and_decodes_on_mla(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _deepseek_v3().eval()
    ids, _ = _batch(1)
    kw = {"max_new_tokens": 3, "do_sample": False, "output_logits": True}
    mla_only = partial(flt.apply, rms_norm=False, swiglu=False, moe=False)
    calls = check_greedy_generation(model, ids, monkeypatch, mla_only, OPS, **kw)
    assert calls == Counter({"mla": 3 * LAYERS}), calls  # the prefill and two decode steps


def test_deepseek_v3_value_head_narrower_than_the_nope_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """v_head_dim 8 < qk_nope_head_dim 16: mla's latent part is q, k's first 8 columns, its
    RoPE part the other 16 (part of it per head: every key head is passed)."""
    model = _deepseek_v3(v_head_dim=8).eval()
    ids, _ = _batch()
    with torch.no_grad():
        want = model(input_ids=ids).logits
    flt.apply(model, rms_norm=False, swiglu=False, moe=False)
    calls = count_calls(monkeypatch, *OPS)
    with torch.no_grad():
        got = model(input_ids=ids).logits
    assert calls == Counter({"mla": LAYERS}), calls
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_deepseek_v3_padding_runs_hugging_faces_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mla has no mask: a padded batch's attention is torch's SDPA, a chunk of queries over a
    cache too (mla's causal diagonal is top-left); the result stays Hugging Face's."""
    model = _deepseek_v3().eval()
    ids, _ = _batch()
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
        cache = model(input_ids=ids[:, :5], use_cache=True).cache
        want_chunk = model(input_ids=ids[:, 5:], cache=cache).logits
    flt.apply(model, rms_norm=False, swiglu=False, moe=False)
    calls = count_calls(monkeypatch, *OPS)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits
        cache = model(input_ids=ids[:, :5], use_cache=True).cache
        got_chunk = model(input_ids=ids[:, 5:], cache=cache).logits
    assert calls == Counter({"mla": LAYERS}), calls  # the unpadded prefill only
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[0, 4:], want[0, 4:], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_chunk, want_chunk, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------------- DeepSeek-V2


def _deepseek_v2(seed: int = 0) -> Any:
    """DeepSeek-V2-Lite's shape, tiny: layer 0 dense, layer 1 sparse (4 routed experts of 32,
    greedy top 2 of a softmax router, a shared expert); MLA with no q LoRA (q_proj), a kv LoRA
    rank."""
    return tiny_model(
        "DeepseekV2",
        seed,
        num_key_value_heads=4,  # its latent attention: as many KV heads as query heads
        intermediate_size=64,
        moe_intermediate_size=32,
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        q_lora_rank=None,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=16,
    )


def test_deepseek_v2_norms_mlps_and_experts(monkeypatch: pytest.MonkeyPatch) -> None:
    def patch(model: Any) -> None:  # the per-model function (the fused-loss test: `apply`)
        patch_via("function", model, flt.apply_fearless_kernel_to_deepseek_v2)
        assert type(model.model.layers[1].mlp.experts).__name__ == "FearlessDeepseekV2Experts"

    # 2 norms per layer, the kv_a latent norm (no q LoRA: no q_a norm), the final one; the
    # dense MLP and the shared expert; fused_moe in both, mla only without grad
    dense = {"rms_norm": 3 * LAYERS + 1, "swiglu": 2, "fused_moe": 1}
    train, infer = Counter(dense), Counter({**dense, "mla": LAYERS})
    check_train_then_infer(_deepseek_v2(), patch, monkeypatch, _batch(), OPS, train, infer)


def test_deepseek_v2_fused_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = check_fused_loss(_deepseek_v2(), _batch(), monkeypatch)
    assert calls["fused_linear_cross_entropy"] == 1


# ------------------------------------------------------------------------------------- OLMo 3


def _olmo3(seed: int = 0) -> Any:
    """Layer 0 sliding-window attention (window 4, shorter than the batch's 12 tokens: Hugging
    Face builds its mask), layer 1 full attention; head_dim 16, 4 query heads over 2 KV."""
    return tiny_model(
        "Olmo3",
        seed,
        intermediate_size=64,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        pad_token_id=0,
    )


def test_olmo3_trains_on_swiglu_and_swa_attention_and_infers_on_the_fused_mlp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def patch(model: Any) -> None:
        patch_via("apply", model, flt.apply_fearless_kernel_to_olmo3)
        assert type(model.model.layers[0].mlp).__name__ == "FearlessOlmo3MLP"

    # the post-attention and post-feedforward norms, the whole-width q and k norms, the final
    # norm; rope per layer; the full layer's attention on the fearless SDPA, the windowed
    # layer's on swa_attention (its mask is the exact causal window), in training too; swiglu
    # per layer in training, linear_gluact_linear per layer in inference
    attention = {"scaled_dot_product_attention": 1, "swa_attention": 1}
    norms = {"rms_norm": 4 * LAYERS + 1, "rope": LAYERS, **attention}
    train = Counter({**norms, "swiglu": LAYERS})
    infer = Counter({**norms, "linear_gluact_linear": LAYERS})
    check_train_then_infer(_olmo3(), patch, monkeypatch, _batch(), OPS, train, infer)


def test_olmo3_fused_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = check_fused_loss(_olmo3(), _batch(), monkeypatch)
    assert calls["fused_linear_cross_entropy"] == 1


@pytest.mark.parametrize("model_type", ["olmo3", "olmo2"])
def test_olmo_bf16_rotates_by_its_f32_tables_on_rope(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OLMo 2 and 3 in bf16 keep their RoPE tables f32: rope takes them (one rounding after
    the f32 rotation, as Hugging Face's), so the logits are Hugging Face's bit for bit; rope
    alone is patched, every layer's call counted, in training too."""
    model = {"olmo3": _olmo3, "olmo2": _olmo2}[model_type]().to(torch.bfloat16)
    ids, labels = _batch()
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    patch = getattr(flt, f"apply_fearless_kernel_to_{model_type}")
    patch(rms_norm=False, swiglu=False, attention=False, model=model)
    calls = count_calls(monkeypatch, "rope")
    with torch.no_grad():
        out = model(input_ids=ids).logits
    assert calls["rope"] == LAYERS
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    model(input_ids=ids, labels=labels).loss.backward()
    assert calls["rope"] == 2 * LAYERS


# ------------------------------------------------------------------------------------- OLMo 2


def _olmo2(seed: int = 0) -> Any:
    """OLMo 3's shape without the sliding window: two full-attention layers."""
    return tiny_model(
        "Olmo2",
        seed,
        intermediate_size=64,
        pad_token_id=0,
    )


@pytest.mark.parametrize("via", VIAS)
def test_olmo2_trains_on_swiglu_and_infers_on_the_fused_mlp(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_olmo2)
        assert type(model.model.layers[0].mlp).__name__ == "FearlessOlmo2MLP"

    # OLMo 3's norms (post-attention, post-feedforward, whole-width q and k, the final one);
    # rope and the fearless SDPA per layer; swiglu per layer in training,
    # linear_gluact_linear in inference
    norms = {"rms_norm": 4 * LAYERS + 1, "rope": LAYERS, "scaled_dot_product_attention": LAYERS}
    train = Counter({**norms, "swiglu": LAYERS})
    infer = Counter({**norms, "linear_gluact_linear": LAYERS})
    check_train_then_infer(_olmo2(), patch, monkeypatch, _batch(), OPS, train, infer)


# -------------------------------------------------------------------------------------- Phi-3


def _phi3(seed: int = 0, sliding_window: int | None = None) -> Any:
    """Phi-3's fused qkv_proj and gate_up_proj; head_dim 16 with partial_rotary_factor 0.5 (RoPE
    on the first 8 columns), 4 query heads over 2 KV."""
    return tiny_model(
        "Phi3",
        seed,
        intermediate_size=64,
        partial_rotary_factor=0.5,
        sliding_window=sliding_window,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
    )


@pytest.mark.parametrize("via", VIAS)
def test_phi3_trains_and_infers_on_silu_and_mul_and_partial_rope(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_phi3)
        assert type(model.model.layers[0].mlp).__name__ == "FearlessPhi3MLP"

    # 2 norms per layer and the final one; the fused gate-up projection's output on
    # silu_and_mul, rope (its first 8 columns) and attention per layer, in training too
    per_layer = ("silu_and_mul", "rope", "scaled_dot_product_attention")
    both = Counter({"rms_norm": 2 * LAYERS + 1, **dict.fromkeys(per_layer, LAYERS)})
    check_train_then_infer(_phi3(), patch, monkeypatch, _batch(), OPS, both, both)


def test_phi3_sliding_window_on_swa_attention_and_fused_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `sliding_window` (Phi-3-mini's 2047; 4 here) every layer's mask is the causal window:
    swa_attention, with grad; the fused loss makes no logits."""
    calls = check_fused_loss(_phi3(sliding_window=4), _batch(), monkeypatch, "swa_attention")
    assert calls == Counter({"fused_linear_cross_entropy": 1, "swa_attention": LAYERS}), calls


# ------------------------------------------------------------------------------------ SmolLM3


def _smollm3(seed: int = 0, window: int | None = None) -> Any:
    """4 layers, the last of each 4 without RoPE (SmolLM3's `no_rope_layers`: 0 skips the
    rotation), 4 query heads over 2 KV of 16; with `window`, every layer slides."""
    return tiny_model(
        "SmolLM3",
        seed,
        intermediate_size=128,
        num_hidden_layers=4,
        no_rope_layers=[1, 1, 1, 0],
        use_sliding_window=window is not None,
        sliding_window=window,
        pad_token_id=0,
    )


@pytest.mark.parametrize("window", [None, 4])
def test_smollm3_trains_and_infers_skipping_rope_on_its_nope_layers(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        flt.apply(model)
        assert type(model.model.layers[0].mlp).__name__ == "FearlessSmolLM3MLP"

    # 2 norms per layer and the final one; swiglu and attention per layer (a sliding layer's
    # exact causal window on swa_attention, the full layers on fearless's SDPA); rope on the 3
    # rotating layers
    model = _smollm3(window=window)
    sliding = model.config.layer_types.count("sliding_attention")
    assert sliding == (0 if window is None else 1)  # its default layer_types: the 4th layer slides
    attention = {"swa_attention": sliding, "scaled_dot_product_attention": 4 - sliding}
    both = Counter({"rms_norm": 9, "swiglu": 4, "rope": 3, **attention})
    check_train_then_infer(model, patch, monkeypatch, _batch(), OPS, +both, +both)


def test_smollm3_fused_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = check_fused_loss(_smollm3(), _batch(), monkeypatch, "rope")
    assert calls == Counter({"fused_linear_cross_entropy": 1, "rope": 3}), calls


# ------------------------------------------------------------------------------------ Granite


def _granite(seed: int = 0) -> Any:
    """Granite's multipliers away from 1: the embeddings, the residual branches, the attention
    scale (in place of 1/sqrt(head_dim)) and the logits' divisor."""
    return tiny_model(
        "Granite",
        seed,
        intermediate_size=128,
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.0078125,
        logits_scaling=8.0,
        pad_token_id=0,
    )


@pytest.mark.parametrize("via", VIAS)
def test_granite_trains_and_infers_with_its_multipliers(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_granite)
        assert type(model.model.layers[0].self_attn).__name__ == "FearlessGraniteAttention"

    per_layer = ("swiglu", "rope", "scaled_dot_product_attention")
    both = Counter({"rms_norm": 2 * LAYERS + 1, **dict.fromkeys(per_layer, LAYERS)})
    check_train_then_infer(_granite(), patch, monkeypatch, _batch(), OPS, both, both)


def test_granite_fused_loss_divides_by_logits_scaling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loss of the logits Granite divides by logits_scaling (8 here), without them; with a
    bias on the head, Hugging Face's forward."""
    calls = check_fused_loss(_granite(), _batch(), monkeypatch)
    assert calls == Counter({"fused_linear_cross_entropy": 1}), calls
    model = _granite()
    model.lm_head.bias = torch.nn.Parameter(torch.randn(VOCAB) * 0.1)
    ids, labels = _batch()
    want = model(input_ids=ids, labels=labels).loss
    flt.apply(model, fused_linear_cross_entropy=True)
    calls = count_calls(monkeypatch, "fused_linear_cross_entropy")
    out = model(input_ids=ids, labels=labels)
    assert calls["fused_linear_cross_entropy"] == 0 and out.logits is not None
    torch.testing.assert_close(out.loss, want, rtol=1e-5, atol=1e-5)
