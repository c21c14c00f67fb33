"""fearless.transformers on Gemma 3, on the simulator with CPU torch: a tiny random
Gemma3ForCausalLM (a sliding-window layer of window 4 and a full layer, random norm weights so
that the (1 + weight) scale matters) patched by `apply` gives Hugging Face's logits, loss and
gradients in training and its logits in inference, the windowed layer running
`fearless.ops.gemma_attention` (counted) in both (its backward in training); a padded batch
keeps gemma_attention out (its mask is not the plain window); greedy generation with a
KV cache (decode steps: bottom-right windows) matches; the RMSNorm and the MLP alone. A tiny
random Gemma2ForCausalLM (eager attention, soft-capped logits; a windowed and a global layer)
runs both layers' attention on `fearless.ops.gemma_attention` with the cap, in training and
inference and in generation, and a padded batch on Hugging Face's eager code (with a cap) or
the masked fearless SDPA (without). A tiny random GemmaForCausalLM (the first Gemma: no cap, no
window) runs Llama's attention path and the GELU its `hidden_act` names, exact or tanh."""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers")
flt = importlib.import_module("fearless.transformers")
from support.hf_patches import (  # noqa: E402
    TINY,
    VIAS,
    check_greedy_generation,
    check_padded_logits,
    check_train_then_infer,
    count_calls,
    draw_norm_weights,
    modeling,
    on_the_simulator,
    patch_via,
    tiny_model,
    token_batch,
)

LAYERS, VOCAB, SEQ, WINDOW = TINY["num_hidden_layers"], TINY["vocab_size"], 12, 4
OPS = (
    "rms_norm",
    "geglu",
    "rope",
    "scaled_dot_product_attention",
    "gemma_attention",
    "fused_linear_cross_entropy",
)
ATTENTION = ("gemma_attention", "scaled_dot_product_attention")


@pytest.fixture(autouse=True)
def restore(monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_simulator(monkeypatch)


def _gemma3(seed: int = 0) -> Any:
    cfg = hf.Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = hf.Gemma3ForCausalLM(cfg)
    draw_norm_weights(model, 0.3)
    assert model.config._attn_implementation == "sdpa"
    return model


def _batch(batch: int = 2) -> tuple[Any, Any]:
    return token_batch(VOCAB, SEQ, batch)


@pytest.mark.parametrize("via", VIAS)
def test_gemma3_matches_hugging_face_and_runs_gemma_attention_in_training_and_inference(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_gemma3)

    # 4 norms per layer, q and k norms, the final one; one GeGLU and one rope per layer; the
    # full layer's attention is fearless's SDPA (no mask), the windowed one's gemma_attention
    # (the exact causal window), with grad too
    dense = {"rms_norm": 6 * LAYERS + 1, "geglu": LAYERS, "rope": LAYERS}
    both = Counter({**dense, "scaled_dot_product_attention": 1, "gemma_attention": 1})
    check_train_then_infer(_gemma3(), patch, monkeypatch, _batch(), OPS, both, both)


def test_gemma3_padded_batch_keeps_gemma_attention_out(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, _ = _batch()
    calls = check_padded_logits(_gemma3().eval(), ids, monkeypatch, ATTENTION)
    # the windowed layer's mask has padding: the masked fearless SDPA, not gemma_attention
    assert calls == Counter({"scaled_dot_product_attention": LAYERS}), calls


def test_gemma3_greedy_generation_with_a_kv_cache_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gemma3().eval()
    ids, _ = _batch(batch=1)
    # an explicit mask: Gemma's pad token is 0, and without one generate would take the
    # prompt's zeros for padding
    kw = {"attention_mask": torch.ones_like(ids), "max_new_tokens": 3, "do_sample": False}
    kw["output_logits"] = True
    calls = check_greedy_generation(model, ids, monkeypatch, flt.apply, ATTENTION, **kw)
    # prefill and two decode steps: the windowed layer on gemma_attention each time (the
    # decode window over the sliding cache), the full layer on the fearless SDPA
    assert calls == Counter({"gemma_attention": 3, "scaled_dot_product_attention": 3}), calls


def test_gemma3_rms_norm_and_mlp_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    gemma3 = modeling("gemma3")
    model = _gemma3()
    norm, mlp = model.model.norm, model.model.layers[0].mlp
    x = torch.randn(3, 5, 64)
    with torch.no_grad():
        want_norm, want_mlp = norm(x), mlp(x)
    flt.apply_fearless_kernel_to_gemma3(rope=False, attention=False)
    norm.__class__, mlp.__class__ = gemma3.Gemma3RMSNorm, gemma3.Gemma3MLP
    calls = count_calls(monkeypatch, "rms_norm", "geglu")
    with torch.no_grad():
        torch.testing.assert_close(norm(x), want_norm, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(mlp(x), want_mlp, rtol=1e-5, atol=1e-5)
        assert calls == Counter({"rms_norm": 1, "geglu": 1})
        norm.weight.data = norm.weight.data.double()  # f64: no fearless kernel takes it
        torch.testing.assert_close(norm(x), want_norm, rtol=1e-5, atol=1e-5)
    assert calls == Counter({"rms_norm": 1, "geglu": 1})


# ------------------------------------------------------------------------------------ Gemma 2


def _gemma2(seed: int = 0, softcap: float | None = 50.0) -> Any:
    """Gemma 2's eager attention (it has no sdpa): a sliding-window layer of window 4 and a
    global layer, both soft-capping their logits (at 5.0 in the tests: at Gemma 2's 50.0 tiny
    random scores barely bend the tanh)."""
    model = tiny_model(
        "Gemma2",
        seed,
        intermediate_size=128,
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        attn_logit_softcapping=softcap,
        tie_word_embeddings=False,
    )
    with torch.no_grad():  # (1 + weight) norms start at 0; larger q, k make the cap bite
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.3)
            elif "q_proj" in name or "k_proj" in name:
                p.mul_(8.0)
    assert model.config._attn_implementation == "eager"
    return model


@pytest.mark.parametrize("via", VIAS)
def test_gemma2_runs_capped_gemma_attention_in_training_and_inference(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_gemma2)

    # 4 norms per layer and the final one (no q and k norms); one GeGLU and one rope per
    # layer; both layers' attention on gemma_attention with the cap (the windowed layer's
    # window, the global layer's none), with grad too
    model = _gemma2(softcap=5.0)
    dense = {"rms_norm": 4 * LAYERS + 1, "geglu": LAYERS, "rope": LAYERS}
    both = Counter({**dense, "gemma_attention": LAYERS})
    check_train_then_infer(model, patch, monkeypatch, _batch(), OPS, both, both)


@pytest.mark.parametrize("softcap", [5.0, None])
def test_gemma2_padded_batch_with_a_cap_runs_hugging_faces_attention(
    softcap: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fearless's masked SDPA has no soft cap: a padded batch with one runs Hugging Face's eager
    attention; without one, the masked fearless SDPA."""
    ids, _ = _batch()
    calls = check_padded_logits(_gemma2(softcap=softcap).eval(), ids, monkeypatch, ATTENTION)
    sdpa = Counter() if softcap else Counter({"scaled_dot_product_attention": LAYERS})
    assert calls == sdpa, calls


def test_gemma2_greedy_generation_with_a_kv_cache_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gemma2(softcap=5.0).eval()
    ids, _ = _batch(batch=1)
    kw = {"attention_mask": torch.ones_like(ids), "max_new_tokens": 3, "do_sample": False}
    kw["output_logits"] = True
    calls = check_greedy_generation(model, ids, monkeypatch, flt.apply, ATTENTION, **kw)
    # prefill and two decode steps, both layers on gemma_attention each time
    assert calls == Counter({"gemma_attention": 3 * LAYERS}), calls


# ------------------------------------------------------------------------- Gemma (the first)


def _gemma(seed: int = 0, hidden_act: str = "gelu_pytorch_tanh") -> Any:
    model = tiny_model(
        "Gemma",
        seed,
        intermediate_size=128,
        head_dim=16,
        hidden_act=hidden_act,
    )
    draw_norm_weights(model, 0.3)
    assert model.config._attn_implementation == "sdpa"
    return model


@pytest.mark.parametrize("hidden_act", ["gelu_pytorch_tanh", "gelu"])
def test_gemma_matches_hugging_face_in_training_and_inference(
    hidden_act: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Gemma's MLP computes the GELU its config's `hidden_act` names (Gemma 2 and 3
    name theirs `hidden_activation`): geglu with that GELU, tanh or exact, either way."""

    def patch(model: Any) -> None:
        flt.apply(model)
        assert type(model.model.layers[0].mlp).__name__ == "FearlessGemmaMLP"

    # 2 norms per layer and the final one; one GeGLU, one rope and one attention per layer
    # (fearless's SDPA: causal, no mask), with grad too
    both = Counter(
        {"rms_norm": 2 * LAYERS + 1, "geglu": LAYERS, "rope": LAYERS,
         "scaled_dot_product_attention": LAYERS}
    )  # fmt: skip
    model = _gemma(hidden_act=hidden_act)
    check_train_then_infer(model, patch, monkeypatch, _batch(), OPS, both, both)


def test_gemma_mlp_with_another_activation_runs_hugging_faces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _gemma(hidden_act="silu")
    mlp = model.model.layers[0].mlp
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        want = mlp(x)
        flt.apply(model)
        calls = count_calls(monkeypatch, "geglu")
        got = mlp(x)
    assert calls["geglu"] == 0
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_gemma_greedy_generation_with_a_kv_cache_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gemma().eval()
    ids, _ = _batch(batch=1)
    kw = {"attention_mask": torch.ones_like(ids), "max_new_tokens": 3, "do_sample": False}
    kw["output_logits"] = True
    calls = check_greedy_generation(model, ids, monkeypatch, flt.apply, ATTENTION, **kw)
    # prefill and two decode steps, every layer on the fearless SDPA
    assert calls == Counter({"scaled_dot_product_attention": 3 * LAYERS}), calls
