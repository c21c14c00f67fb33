"""fearless.transformers on the mixtures of experts, on the simulator with CPU torch: a tiny
random Qwen3-MoE (one sparse layer, one dense) patched by `apply` gives Hugging Face's logits,
loss and gradients in training and its logits in inference, the experts going through
`fearless.ops.fused_moe` (counted) in both; the experts alone give Hugging Face's gradients of
the activations, both expert weights and the routing weights; the fused loss without logits; a
tiny GPT-OSS: attention with sinks through `fearless.ops.attention_sink` in training (its
backward: Hugging Face's loss and gradients, the sinks' included) and inference (prefill and
KV-cache decode, sliding-window and full layers), Hugging Face's eager attention under a
padding mask; its experts stay torch. A tiny Mixtral (every layer sparse, a sliding window)
runs its experts on fused_moe and its windowed attention on swa_attention, in training too."""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers")
flt = importlib.import_module("fearless.transformers")
flt_errors = importlib.import_module("fearless.errors")
from support.hf_patches import (  # noqa: E402
    TINY,
    VIAS,
    assert_grads_match,
    check_train_then_infer,
    count_calls,
    on_the_simulator,
    patch_via,
    run_with_grads,
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
    "attention_sink",
    "fused_linear_cross_entropy",
    "swa_attention",
)


@pytest.fixture(autouse=True)
def restore(monkeypatch: pytest.MonkeyPatch) -> None:
    on_the_simulator(monkeypatch)


def _batch(batch: int = 2) -> tuple[Any, Any]:
    return token_batch(VOCAB, SEQ, batch)


def _qwen3_moe(seed: int = 0) -> Any:
    """Layer 0 sparse (4 experts of 32, top 2), layer 1 dense (mlp_only_layers)."""
    return tiny_model(
        "Qwen3Moe",
        seed,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        mlp_only_layers=[1],
        head_dim=16,
        tie_word_embeddings=False,
    )


@pytest.mark.parametrize("via", VIAS)
def test_qwen3_moe_trains_and_infers_on_fused_moe(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_qwen3_moe)
        assert type(model.model.layers[0].mlp.experts).__name__ == "FearlessQwen3MoeExperts"

    # 2 norms per layer, q and k norms, the final norm; the dense layer's SwiGLU; rope and
    # attention per layer; fused_moe in the sparse layer, with grad too (its backward)
    dense = {"rms_norm": 4 * LAYERS + 1, "swiglu": 1, "rope": LAYERS}
    both = Counter({**dense, "scaled_dot_product_attention": LAYERS, "fused_moe": 1})
    check_train_then_infer(_qwen3_moe(), patch, monkeypatch, _batch(), OPS, both, both)


def test_qwen3_moe_experts_alone_match_with_and_without_grad(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    experts = _qwen3_moe().model.layers[0].mlp.experts
    x = torch.randn(7, 64, requires_grad=True)
    ids = torch.tensor([[0, 3], [1, 2], [3, 0], [2, 2], [1, 0], [0, 1], [3, 2]])
    w = torch.softmax(torch.randn(7, 2), -1).requires_grad_()
    dy = torch.randn(7, 64)
    params = (experts.gate_up_proj, experts.down_proj)
    want = experts(x, ids, w)  # Hugging Face's loop, with a graph
    want_grads = torch.autograd.grad(want, (x, w, *params), dy)
    flt.apply_fearless_kernel_to_qwen3_moe(rope=False, rms_norm=False, attention=False)
    from transformers.models.qwen3_moe import modeling_qwen3_moe

    experts.__class__ = modeling_qwen3_moe.Qwen3MoeExperts  # the swapped class
    calls = count_calls(monkeypatch, "fused_moe")
    with torch.no_grad():
        got = experts(x, ids, w)
    assert calls["fused_moe"] == 1
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)
    # grad enabled: fused_moe again, its backward reaching the activations, the routing
    # weights and the experts' Parameters
    y = experts(x, ids, w)
    assert calls["fused_moe"] == 2 and y.requires_grad
    torch.testing.assert_close(y.detach(), want.detach(), rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(y, (x, w, *params), dy)
    for name, g, ref in zip(("x", "w", "gate_up", "down"), grads, want_grads, strict=True):
        torch.testing.assert_close(g, ref, rtol=1e-4, atol=1e-5, msg=name)


def _gpt_oss(seed: int = 0) -> Any:
    """A sliding-window layer (window 4) and a full one, 4 experts of 32, top 2."""
    model = tiny_model(
        "GptOss",
        seed,
        intermediate_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=16,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
    )
    assert model.config._attn_implementation == "eager"
    return model


@pytest.mark.parametrize("via", VIAS)
def test_gpt_oss_trains_and_infers_on_attention_sink(
    via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        patch_via(via, model, flt.apply_fearless_kernel_to_gpt_oss)

    # 2 norms per layer and the final one, rope and attention_sink per layer, with grad too
    # (its backward: the loss and every gradient, the sinks' included, are Hugging Face's);
    # the experts are torch's
    both = Counter({"rms_norm": 2 * LAYERS + 1, "rope": LAYERS, "attention_sink": LAYERS})
    check_train_then_infer(_gpt_oss(), patch, monkeypatch, _batch(), OPS, both, both)


def test_gpt_oss_padding_runs_eager_and_generation_decodes_on_attention_sink(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _gpt_oss().eval()
    ids, _ = _batch()
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    kw = {"max_new_tokens": 3, "do_sample": False, "output_logits": True}
    with torch.no_grad():
        want_padded = model(input_ids=ids, attention_mask=mask).logits
        want = model.generate(ids[:1], attention_mask=mask[:1], return_dict_in_generate=True, **kw)
    flt.apply(model)
    calls = count_calls(monkeypatch, "attention_sink")
    with torch.no_grad():
        got_padded = model(input_ids=ids, attention_mask=mask).logits
        assert calls["attention_sink"] == 0  # the padded mask is not the plain causal one
        got = model.generate(ids[:1], attention_mask=mask[:1], return_dict_in_generate=True, **kw)
    # the prefill and two decode steps (start_q = S - 1 over the full and the sliding cache)
    assert calls["attention_sink"] == 3 * LAYERS, calls
    keep = mask.bool()
    torch.testing.assert_close(got_padded[keep], want_padded[keep], rtol=1e-4, atol=1e-4)
    assert torch.equal(got.sequences, want.sequences)
    for g, w in zip(got.logits, want.logits, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_gpt_oss_sink_attention_with_grad_reaches_q_k_v_and_the_sinks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The patched eager_attention_forward with grad, on q, k, v as Hugging Face passes them
    ((batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim) leaves, which
    sinks.py views back): attention_sink and its backward (counted) give Hugging Face's output
    and the gradients of the leaves and of the sinks Parameter; a padded mask stays eager."""
    from transformers.models.gpt_oss import modeling_gpt_oss

    import fearless.ops.attention_sinks as attention_sinks

    original = modeling_gpt_oss.eager_attention_forward
    flt.apply_fearless_kernel_to_gpt_oss(rope=False, rms_norm=False)
    patched = modeling_gpt_oss.eager_attention_forward
    calls = count_calls(monkeypatch, "attention_sink")
    backward = attention_sinks.attention_sink_backward

    def counted(*args: Any, **kw: Any) -> Any:
        calls["attention_sink_backward"] += 1
        return backward(*args, **kw)

    monkeypatch.setattr(attention_sinks, "attention_sink_backward", counted)
    module = torch.nn.Module()
    module.sinks = torch.nn.Parameter(torch.randn(4))
    module.num_key_value_groups = 2
    g = torch.Generator().manual_seed(2)
    b, lq, s = 2, 3, 7  # start_q = 4 over a window of 4: keys cut on both sides
    leaves = [torch.randn(b, n, hh, 16, generator=g) for n, hh in ((lq, 4), (s, 2), (s, 2))]
    dy = torch.randn(b, lq, 4, 16, generator=g)
    pos = torch.arange(lq)[:, None] + s - lq
    key = torch.arange(s)[None, :]
    allowed = ((key <= pos) & (key > pos - 4)).expand(b, 1, lq, s).clone()
    causal = torch.zeros(b, 1, lq, s).masked_fill(~allowed, torch.finfo(torch.float32).min)
    padded = causal.clone()
    padded[1, ..., :5] = torch.finfo(torch.float32).min  # eager's additive mask, padded
    for mask, sink_calls in ((causal, 1), (padded, 0)):
        grads = []
        for fn in (original, patched):
            q, k, v = (t.clone().requires_grad_() for t in leaves)
            module.sinks.grad = None
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            out, _ = fn(module, qt, kt, vt, mask, 0.25, sliding_window=4)
            out.backward(dy)
            grads.append((out.detach(), q.grad, k.grad, v.grad, module.sinks.grad))
        assert calls["attention_sink"] == calls["attention_sink_backward"] == sink_calls
        assert grads[0][4].abs().max() > 0  # Hugging Face's sinks gradient, matched below
        for name, got, want in zip(("out", "q", "k", "v", "sinks"), *grads[::-1], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)
        calls.clear()


def test_gpt_oss_rope_takes_half_width_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.gpt_oss import modeling_gpt_oss

    original = modeling_gpt_oss.apply_rotary_pos_emb
    flt.apply_fearless_kernel_to_gpt_oss(rms_norm=False, attention=False)
    calls = count_calls(monkeypatch, "rope")
    q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 2, 5, 16)
    cos, sin = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    got = modeling_gpt_oss.apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(got, original(q, k, cos, sin), rtol=1e-5, atol=1e-5)
    assert calls["rope"] == 1
    q12, k12 = q[..., :12], k[..., :12]  # head_dim 12: no power of two, Hugging Face's code
    got = modeling_gpt_oss.apply_rotary_pos_emb(q12, k12, cos[..., :6], sin[..., :6])
    want = original(q12, k12, cos[..., :6], sin[..., :6])
    assert calls["rope"] == 1
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_transformers_without_the_experts_modules_is_refused_before_anything_is_patched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers 4 has no stacked `Qwen3MoeExperts` (5 introduced it): `moe=True` is a
    fearless error at the call that names the class and the flag, and patches nothing (not
    even the RMSNorm that needs no Experts); `moe=False` patches the rest."""
    modeling = importlib.import_module("transformers.models.qwen3_moe.modeling_qwen3_moe")
    norm = modeling.Qwen3MoeRMSNorm
    monkeypatch.delattr(modeling, "Qwen3MoeExperts", raising=False)  # 4 has none
    with pytest.raises(flt_errors.ToolchainError) as e:
        flt.apply_fearless_kernel_to_qwen3_moe()  # the line the error names
    assert "`Qwen3MoeExperts` (for `moe=`)" in e.value.message
    assert "moe=False" in (e.value.help or "")
    assert e.value.loc is not None and e.value.loc.file == __file__
    assert modeling.Qwen3MoeRMSNorm is norm
    flt.apply_fearless_kernel_to_qwen3_moe(moe=False)
    assert modeling.Qwen3MoeRMSNorm is not norm


# ------------------------------------------------------------------------------------ Mixtral


def _mixtral(seed: int = 0, window: int | None = 4) -> Any:
    """Two sparse layers of 4 experts of 32, top 2, a sliding window of 4 keys."""
    return tiny_model(
        "Mixtral",
        seed,
        intermediate_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=16,
        sliding_window=window,
    )


@pytest.mark.parametrize("window", [4, None])
def test_mixtral_trains_and_infers_on_fused_moe(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def patch(model: Any) -> None:
        flt.apply(model)
        assert type(model.model.layers[1].mlp.experts).__name__ == "FearlessMixtralExperts"

    # 2 norms per layer and the final one; rope and attention per layer (the exact causal
    # window on swa_attention, no window on fearless's SDPA); fused_moe once per layer, in
    # training too
    attention = "swa_attention" if window else "scaled_dot_product_attention"
    both = Counter(
        {"rms_norm": 2 * LAYERS + 1, "rope": LAYERS, attention: LAYERS, "fused_moe": LAYERS}
    )
    check_train_then_infer(_mixtral(window=window), patch, monkeypatch, _batch(), OPS, both, both)


@pytest.mark.parametrize(
    ("build", "sparse"), [(_qwen3_moe, 1), (_mixtral, LAYERS)], ids=["qwen3_moe", "mixtral"]
)
def test_moe_fused_loss_never_makes_logits_unless_router_logits_are_asked(
    build: Any, sparse: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused loss (and the experts on fused_moe, one call per sparse layer) gives Hugging
    Face's loss and gradients without logits; asked for the router logits, the auxiliary
    load-balancing loss needs them: Hugging Face's forward, its loss."""
    model = build()
    ids, labels = _batch()
    ref, ref_grads = run_with_grads(model, input_ids=ids, labels=labels)
    with_aux = model(input_ids=ids, labels=labels, output_router_logits=True)
    flt.apply(model, fused_linear_cross_entropy=True)
    calls = count_calls(monkeypatch, "fused_linear_cross_entropy", "fused_moe")
    out, grads = run_with_grads(model, input_ids=ids, labels=labels)
    assert out.logits is None and calls["fused_linear_cross_entropy"] == 1
    assert calls["fused_moe"] == sparse
    assert type(out).__name__ == "MoeCausalLMOutputWithPast"
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-5)
    assert_grads_match(grads, ref_grads)
    aux = model(input_ids=ids, labels=labels, output_router_logits=True)
    assert calls["fused_linear_cross_entropy"] == 1 and aux.aux_loss is not None
    torch.testing.assert_close(aux.loss, with_aux.loss, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------- Qwen2-MoE and GLM-4-MoE


def _qwen2_moe(seed: int = 0) -> Any:
    """Layer 0 sparse (4 experts of 32, top 2, a gated shared expert of 32), layer 1 dense
    (mlp_only_layers); biased q, k, v projections, 2 KV heads."""
    return tiny_model(
        "Qwen2Moe",
        seed,
        intermediate_size=128,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        mlp_only_layers=[1],
    )


def _glm4_moe(seed: int = 0) -> Any:
    """Layer 0 dense (first_k_dense_replace), layer 1 sparse (4 routed experts of 32 in one
    group, top 2, a shared expert); RoPE on half of head_dim 16; q and k norms."""
    return tiny_model(
        "Glm4Moe",
        seed,
        intermediate_size=128,
        moe_intermediate_size=32,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        head_dim=16,
        use_qk_norm=True,
    )


@pytest.mark.parametrize(
    ("build", "counts"),
    [
        # 2 norms per layer and the final one; the dense layer's SwiGLU and the shared expert's;
        # rope and attention per layer; fused_moe in the sparse layer, with grad too
        (_qwen2_moe, {"rms_norm": 2 * LAYERS + 1, "swiglu": 2, "fused_moe": 1}),
        # GLM's q and k norms besides
        (_glm4_moe, {"rms_norm": 4 * LAYERS + 1, "swiglu": 2, "fused_moe": 1}),
    ],
    ids=["qwen2_moe", "glm4_moe"],
)
def test_qwen2_moe_and_glm4_moe_train_and_infer_on_fused_moe(
    build: Any, counts: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build()

    def patch(model: Any) -> None:
        flt.apply(model)
        experts = next(m for m in model.modules() if type(m).__name__.endswith("Experts"))
        assert type(experts).__name__.startswith("Fearless")

    per_layer = {"rope": LAYERS, "scaled_dot_product_attention": LAYERS}
    both = Counter({**counts, **per_layer})
    check_train_then_infer(model, patch, monkeypatch, _batch(), OPS, both, both)
