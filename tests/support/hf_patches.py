"""What the fearless.transformers tests share: `keep_hugging_face`, which makes a test's
class-level patches of Hugging Face's modeling modules (and its `sdpa` attention entry) undo
themselves when the test ends; `count_calls` (fearless.ops calls by operator);
`run_with_grads` (one forward with labels and its parameter gradients); `assert_grads_match`;
`draw_norm_weights` (norm weights of a trained model's size); `tiny_model` (a tiny random
causal LM of a model type);
and the comparisons with Hugging Face that several model tests make: `check_train_then_infer`,
`check_fused_loss`, `check_padded_logits` and `check_greedy_generation`."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

# How a test patches: `apply(model)`, and (make test-slow: the same comparison again, through
# the per-model entry point, which the table-driven patch shares with `apply`) the
# `apply_fearless_kernel_to_<type>` function.
VIAS = ["apply", pytest.param("function", marks=pytest.mark.slow)]

PREFIX = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}

# model_type -> (class name prefix, classes fearless.transformers may swap, module functions
# it may replace), for every model type it patches
PATCHED = {
    **{
        t: (p, ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",))
        for t, p in PREFIX.items()
    },
    "qwen3_moe": (
        "Qwen3Moe",
        ("RMSNorm", "MLP", "Attention", "Experts"),
        ("apply_rotary_pos_emb",),
    ),
    "mixtral": ("Mixtral", ("RMSNorm", "Attention", "Experts"), ("apply_rotary_pos_emb",)),
    **{
        t: (p, ("RMSNorm", "MLP", "Attention", "Experts"), ("apply_rotary_pos_emb",))
        for t, p in (("qwen2_moe", "Qwen2Moe"), ("glm4_moe", "Glm4Moe"))
    },
    "gemma": ("Gemma", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "gemma2": ("Gemma2", ("RMSNorm", "MLP"), ("apply_rotary_pos_emb", "eager_attention_forward")),
    "gemma3": ("Gemma3", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "gpt_oss": ("GptOss", ("RMSNorm",), ("apply_rotary_pos_emb", "eager_attention_forward")),
    "olmoe": ("Olmoe", ("RMSNorm", "Attention", "Experts"), ("apply_rotary_pos_emb",)),
    "deepseek_v2": ("DeepseekV2", ("RMSNorm", "MLP", "Attention", "Experts"), ()),
    "olmo2": ("Olmo2", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "olmo3": ("Olmo3", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "phi3": ("Phi3", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "smollm3": ("SmolLM3", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "granite": ("Granite", ("RMSNorm", "MLP", "Attention"), ("apply_rotary_pos_emb",)),
    "deepseek_v3": ("DeepseekV3", ("RMSNorm", "MLP", "Attention", "Experts"), ()),
    # Qwen3-Next's hybrid layers, which Qwen3.5's (dense and MoE) are
    **{
        t: (
            p,
            ("RMSNorm", "RMSNormGated", "MLP", "Attention", "Experts"),
            (
                "apply_rotary_pos_emb",
                "torch_chunk_gated_delta_rule",
                "torch_recurrent_gated_delta_rule",
            ),
        )
        for t, p in (
            ("qwen3_next", "Qwen3Next"),
            ("qwen3_5", "Qwen3_5"),
            ("qwen3_5_moe", "Qwen3_5Moe"),
        )
    },
}


def modeling(model_type: str) -> Any:
    """transformers.models.<model_type>.modeling_<model_type>."""
    return importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")


def keep_hugging_face(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record, in `monkeypatch`, every name fearless.transformers may replace, so that its
    teardown puts Hugging Face's own back."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    for model_type, (prefix, classes, functions) in PATCHED.items():
        module = modeling(model_type)
        for name in (prefix + c for c in classes):  # transformers 4 lacks some (Experts)
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(module, name))
        for name in functions:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(module, name))
        causal_lm = getattr(module, prefix + "ForCausalLM")
        monkeypatch.setattr(causal_lm, "forward", causal_lm.forward)
    table = ALL_ATTENTION_FUNCTIONS
    monkeypatch.setattr(table, "_local_mapping", dict(table._local_mapping))
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    except ImportError:  # transformers 4.x
        return
    masks = ALL_MASK_ATTENTION_FUNCTIONS
    monkeypatch.setattr(masks, "_local_mapping", dict(masks._local_mapping))
    from fearless.transformers import layers

    monkeypatch.setattr(layers, "CAUSAL_SKIP_TYPES", set(layers.CAUSAL_SKIP_TYPES))


def count_calls(monkeypatch: pytest.MonkeyPatch, *names: str) -> Counter[str]:
    """Count the calls of these fearless.ops operators (the patched layers call them by
    attribute, so the wrappers see every call)."""
    from fearless import ops

    calls: Counter[str] = Counter()

    def counting(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kw: Any) -> Any:
            calls[name] += 1
            return op(*args, **kw)

        return wrapped

    for name in names:
        monkeypatch.setattr(ops, name, counting(name, getattr(ops, name)))
    return calls


# A tiny model's sizes, which `tiny_model` gives every configuration it builds (the test
# modules' VOCAB and LAYERS are these): 4 query heads over 2 KV heads of hidden 64
TINY = {
    "vocab_size": 96,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}


def tiny_model(prefix: str, seed: int = 0, text: bool = False, **config: Any) -> Any:
    """Hugging Face's `<prefix>ForCausalLM` of `<prefix>Config` (`<prefix>TextConfig` with
    `text`: a multimodal model's) at TINY's sizes with the further (or overriding) `config`
    settings, its random weights drawn after `seed`."""
    import torch
    import transformers

    kind = "TextConfig" if text else "Config"
    cfg = getattr(transformers, prefix + kind)(**{**TINY, **config})
    torch.manual_seed(seed)
    return getattr(transformers, prefix + "ForCausalLM")(cfg)


def draw_norm_weights(model: Any, std: float) -> None:
    """Every norm weight of `model` drawn from N(0, std): Hugging Face initialises the
    (1 + weight) norms' weights to 0 (a scale of 1), which would hide a norm that ignores them."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, std)


def run_with_grads(model: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """The output of one forward with labels and the parameter gradients of its loss."""
    model.zero_grad(set_to_none=True)
    out = model(**kwargs)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


def assert_grads_match(got: dict[str, Any], want: dict[str, Any]) -> None:
    """f32 end to end; the fearless kernels sum in other orders than torch's (flash attention's
    blocked softmax, the recomputed probabilities of its backward, rms_norm's row reduction),
    which moves each gradient by a few f32 ulps of its largest entry per layer: 1e-5 of the
    tensor's largest magnitude is ~100 ulps of headroom and far below any real error. A
    Parameter whose whole gradient is tiny beside the model's (Qwen3.5's delta-rule dt_bias,
    5e-7 where others reach 0.35) inherits the other orders' noise at the scale of the
    gradients it flows through: 1e-9 of the model's largest gradient entry is that floor."""
    import torch

    assert got.keys() == want.keys()
    floor = 1e-9 * max((float(ref.abs().max()) for ref in want.values()), default=0.0)
    for name, ref in want.items():
        scale = float(ref.abs().max()) or 1.0
        atol = max(1e-5 * scale, floor)
        torch.testing.assert_close(got[name], ref, rtol=1e-4, atol=atol, msg=name)


def on_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transformers tests' setting: the simulator target, no tuning, and Hugging Face's
    classes, functions and attention table put back when the test ends (`keep_hugging_face`)."""
    from fearless import config

    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    keep_hugging_face(monkeypatch)


def token_batch(vocab: int, seq: int, batch: int = 2) -> tuple[Any, Any]:
    """(input_ids, labels) of `batch` sequences of `seq` random tokens; the first 3 labels
    ignored (-100), as a prompt's would be."""
    import torch

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = ids.clone()
    labels[:, :3] = -100
    return ids, labels


def patch_via(via: str, model: Any, function: Callable[..., None]) -> None:
    """Patch `model` through `fearless.transformers.apply` ("apply"), or through its model
    type's `apply_fearless_kernel_to_<type>` (`function`) with `model=`."""
    if via == "apply":
        flt = importlib.import_module("fearless.transformers")
        assert flt.apply(model) is model
    else:
        function(model=model)


def check_train_then_infer(
    model: Any,
    patch: Callable[[Any], None],
    monkeypatch: pytest.MonkeyPatch,
    batch: tuple[Any, Any],
    ops: tuple[str, ...],
    train: Counter[str],
    infer: Counter[str],
) -> None:
    """Patch `model` with `patch`: on `batch` its loss, logits and gradients must be Hugging
    Face's in training, with the calls `train` of the operators `ops`, and its logits in
    inference, with the calls `infer`."""
    import torch

    ids, labels = batch
    ref, ref_grads = run_with_grads(model, input_ids=ids, labels=labels)
    with torch.no_grad():
        ref_eval = model(input_ids=ids).logits
    calls = count_calls(monkeypatch, *ops)
    patch(model)
    out, grads = run_with_grads(model, input_ids=ids, labels=labels)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-4)
    assert_grads_match(grads, ref_grads)
    assert calls == train, calls
    calls.clear()
    with torch.no_grad():
        got = model(input_ids=ids).logits
    assert calls == infer, calls
    torch.testing.assert_close(got, ref_eval, rtol=1e-4, atol=1e-4)


def check_fused_loss(
    model: Any, batch: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, *ops: str
) -> Counter[str]:
    """Patch `model` by `apply` with the fused linear cross-entropy: on `batch` it must make no
    logits and give Hugging Face's loss and gradients. Returns the patched forward's calls of
    fused_linear_cross_entropy and of the further operators `ops`."""
    import torch

    flt = importlib.import_module("fearless.transformers")
    ids, labels = batch
    ref, ref_grads = run_with_grads(model, input_ids=ids, labels=labels)
    flt.apply(model, fused_linear_cross_entropy=True)
    calls = count_calls(monkeypatch, "fused_linear_cross_entropy", *ops)
    out, grads = run_with_grads(model, input_ids=ids, labels=labels)
    assert out.logits is None
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-5)
    assert_grads_match(grads, ref_grads)
    return calls


def check_padded_logits(
    model: Any, ids: Any, monkeypatch: pytest.MonkeyPatch, ops: tuple[str, ...]
) -> Counter[str]:
    """`model` (in eval) on `ids` with the second row left-padded by 4 tokens, then patched by
    `apply`: the logits of the unpadded positions must be Hugging Face's. Returns the patched
    forward's calls of the operators `ops`."""
    import torch

    flt = importlib.import_module("fearless.transformers")
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
    flt.apply(model)
    calls = count_calls(monkeypatch, *ops)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits
    keep = mask.bool()
    torch.testing.assert_close(got[keep], want[keep], rtol=1e-4, atol=1e-4)
    return calls


def check_greedy_generation(
    model: Any,
    ids: Any,
    monkeypatch: pytest.MonkeyPatch,
    patch: Callable[[Any], Any],
    ops: tuple[str, ...],
    **generate: Any,
) -> Counter[str]:
    """`model.generate(ids, **generate)` (greedy, with `output_logits`), then again once `patch`
    has patched `model`: the same tokens and the same logits at each step. Returns the patched
    generation's calls of the operators `ops`."""
    import torch

    with torch.no_grad():
        want = model.generate(ids, return_dict_in_generate=True, **generate)
    patch(model)
    calls = count_calls(monkeypatch, *ops)
    with torch.no_grad():
        got = model.generate(ids, return_dict_in_generate=True, **generate)
    assert torch.equal(got.sequences, want.sequences)
    for g, w in zip(got.logits, want.logits, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    return calls
