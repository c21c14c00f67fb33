"""fearless.transformers on the simulator with CPU torch: tiny random Llama, Mistral, Qwen2 and
Qwen3 causal LMs in f32, patched by `apply(model)` and by `apply_fearless_kernel_to_<type>`,
give Hugging Face's logits, loss and gradients, and its greedy generation with a KV cache; the
patched model really calls fearless.ops (counted); Mistral's sliding window (a window shorter
than the batch) trains and generates on swa_attention; a padded batch runs fearless's
masked attention, in training too; the fallbacks (a mixed-dtype RMSNorm, an odd head_dim for
rope) run torch's code; patching one
model type leaves others alone; `import fearless` does not import the package; and
examples/train_tiny_llama.py runs three steps; examples/generate.py generates what Hugging Face
does."""

from __future__ import annotations

import copy
import importlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fearless.errors import KernelTypeError

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers")
flt = importlib.import_module("fearless.transformers")
from support.hf_patches import (  # noqa: E402
    PREFIX,
    TINY,
    VIAS,
    assert_grads_match,
    count_calls,
    modeling,
    on_the_simulator,
    patch_via,
    run_with_grads,
    tiny_model,
    token_batch,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_tiny_llama.py"
TYPES = sorted(PREFIX)
LAYERS, VOCAB, SEQ = TINY["num_hidden_layers"], TINY["vocab_size"], 12


@pytest.fixture(autouse=True)
def restore(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator, and Hugging Face's classes, functions and attention table as they were
    once the test ends: class-level patches made in a test do not leak into the next."""
    on_the_simulator(monkeypatch)


def _model(model_type: str, seed: int = 0, **config: Any) -> Any:
    """A tiny random causal LM of `model_type` in f32 (4 heads over 2 KV heads, head_dim 16),
    with the further `config` settings."""
    model = tiny_model(
        PREFIX[model_type],
        seed,
        **config,
        intermediate_size=128,
        head_dim=16,
        tie_word_embeddings=False,
    )
    assert model.config._attn_implementation == "sdpa"
    return model


def _batch(batch: int = 2) -> tuple[Any, Any]:
    return token_batch(VOCAB, SEQ, batch)


_run, _assert_grads_match, _count = run_with_grads, assert_grads_match, count_calls


OPS = ("rms_norm", "swiglu", "rope", "scaled_dot_product_attention", "fused_linear_cross_entropy")


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("model_type", TYPES)
def test_patched_model_matches_hugging_face(
    model_type: str, via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(model_type)
    ids, labels = _batch()
    ref, ref_grads = _run(model, input_ids=ids, labels=labels)
    calls = _count(monkeypatch, *OPS)
    patch_via(via, model, getattr(flt, f"apply_fearless_kernel_to_{model_type}"))
    out, grads = _run(model, input_ids=ids, labels=labels)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-4)
    _assert_grads_match(grads, ref_grads)
    # every layer went through fearless: 2 norms per layer and the final one (Qwen3: and its
    # q and k norms), one SwiGLU, one RoPE and one attention per layer; the loss is torch's
    norms = 2 * LAYERS + 1 + (2 * LAYERS if model_type == "qwen3" else 0)
    want = {"rms_norm": norms, "swiglu": LAYERS, "rope": LAYERS}
    assert calls == Counter({**want, "scaled_dot_product_attention": LAYERS}), calls


@pytest.mark.parametrize("model_type", ["qwen3_5_moe", "deepseek_v3"])
def test_generate_example_matches_hugging_face(model_type: str) -> None:
    """examples/generate.py on a tiny random model: Qwen3.5-MoE (a multimodal family's text
    model, hybrid layers, experts), DeepSeek-V3 (latent attention's own head sizes)."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLE.parent / "generate.py"), "--random", model_type],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "FEARLESS_TARGET": "sim"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "ok", run.stdout
    assert lines[-3].startswith("Hugging Face: [") and lines[-2].startswith("fearless:     ["), (
        lines
    )
    assert lines[-3].split(": ", 1)[1] == lines[-2].split(": ", 1)[1].strip(), lines


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_fused_linear_cross_entropy_loss_never_makes_logits(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(model_type)
    ids, labels = _batch()
    ref, ref_grads = _run(model, input_ids=ids, labels=labels)
    getattr(flt, f"apply_fearless_kernel_to_{model_type}")(
        fused_linear_cross_entropy=True, model=model
    )
    calls = _count(monkeypatch, "fused_linear_cross_entropy")
    heads: list[int] = []
    model.lm_head.register_forward_hook(lambda *_: heads.append(1))
    out, grads = _run(model, input_ids=ids, labels=labels)
    assert out.logits is None and not heads and calls["fused_linear_cross_entropy"] == 1
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-5)
    _assert_grads_match(grads, ref_grads)
    # in eval mode (or with skip_logits=False) the logits are wanted: Hugging Face's forward
    model.eval()
    with torch.no_grad():
        full = model(input_ids=ids, labels=labels)
    torch.testing.assert_close(full.logits, ref.logits, rtol=1e-4, atol=1e-4)
    assert heads and calls["fused_linear_cross_entropy"] == 1


def test_class_patch_reaches_models_built_later_and_no_other_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flt.apply_fearless_kernel_to_llama()  # no model: the classes only
    calls = _count(monkeypatch, *OPS)
    llama = _model("llama")
    assert type(llama.model.norm).__name__ == "FearlessLlamaRMSNorm"
    ids, labels = _batch()
    with torch.no_grad():
        llama(input_ids=ids)
    assert calls["scaled_dot_product_attention"] == LAYERS and calls["rope"] == LAYERS
    # a Mistral model shares the `sdpa` entry that now dispatches, but its modules are not
    # marked: torch's SDPA, torch's RMSNorm and rope, as before
    calls.clear()
    mistral = _model("mistral")
    want = copy.deepcopy(mistral)
    with torch.no_grad():
        got = mistral(input_ids=ids, labels=labels)
        ref = want(input_ids=ids, labels=labels)
    assert not calls, calls
    torch.testing.assert_close(got.logits, ref.logits, rtol=0, atol=0)


def test_padded_batch_attention_runs_fearless_in_training_and_in_inference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _model("llama")
    ids, labels = _batch()
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # the second row left-padded: Hugging Face builds a 4-d boolean mask
    ref, ref_grads = _run(model, input_ids=ids, attention_mask=mask, labels=labels)
    with torch.no_grad():
        ref_eval = model(input_ids=ids, attention_mask=mask).logits
    flt.apply(model)
    calls = _count(monkeypatch, "scaled_dot_product_attention", "rms_norm")
    out, grads = _run(model, input_ids=ids, attention_mask=mask, labels=labels)
    # the masked fearless attention, with its backward, and the norms are ours
    assert calls["scaled_dot_product_attention"] == LAYERS and calls["rms_norm"] == 2 * LAYERS + 1
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    _assert_grads_match(grads, ref_grads)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits
    assert calls["scaled_dot_product_attention"] == 2 * LAYERS
    # the padded queries see no key at all in Hugging Face's mask (torch's SDPA gives their
    # rows NaN or zeros): compare the positions that are not padding
    keep = mask.bool()
    torch.testing.assert_close(got[keep], ref_eval[keep], rtol=1e-4, atol=1e-4)


def test_a_causal_mask_without_padding_is_left_to_the_attention_while_compiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While torch.compile traces, before torch 2.14, Hugging Face's `is_torchdynamo_exporting`
    is always true and it builds the (L, L) causal mask it skips in eager; the fearless
    attention then ran its masked form, with no causal tiles skipped. For a patched model the
    `sdpa` mask function leaves that mask out, as eager does, and the attention runs causal,
    with the same logits; a padded batch keeps its mask, and another model type's masks stay
    Hugging Face's."""
    masking_utils = importlib.import_module("transformers.masking_utils")
    model = _model("llama")
    ids, _ = _batch()
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    flt.apply(model)
    monkeypatch.setattr(masking_utils, "is_torchdynamo_exporting", lambda: True)
    seen: list[tuple[Any, Any]] = []
    sdpa = flt.layers.ops.scaled_dot_product_attention

    def spy(*args: Any, attn_mask: Any = None, is_causal: bool = False, **kw: Any) -> Any:
        seen.append((attn_mask, is_causal))
        return sdpa(*args, attn_mask=attn_mask, is_causal=is_causal, **kw)

    monkeypatch.setattr(flt.layers.ops, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        got = model(input_ids=ids).logits
    assert seen == [(None, True)] * LAYERS
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    seen.clear()
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    assert all(m is not None and m.dim() == 4 for m, _ in seen) and len(seen) == LAYERS
    other = _model("qwen3").config  # built, not patched: its type is not llama's
    built = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["sdpa"](
        batch_size=1, q_length=SEQ, kv_length=SEQ, config=other, device="cpu"
    )
    assert built is not None and built.shape[-2:] == (SEQ, SEQ)


def test_a_patched_model_traces_into_one_graph_with_its_fused_loss() -> None:
    """torch.compile sees the patched forward and its fused loss without a graph break: every
    fearless operator is a torch.library op with a fake implementation."""
    model = _model("llama")
    flt.apply(model, fused_linear_cross_entropy=True)
    ids, labels = _batch()
    explained = torch._dynamo.explain(lambda: model(input_ids=ids, labels=labels).loss)()
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_rms_norm_with_a_weight_of_another_dtype_runs_hugging_faces_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llama = modeling("llama")
    norm = llama.LlamaRMSNorm(16, eps=1e-6)
    flt.apply_fearless_kernel_to_llama(rope=False, swiglu=False, attention=False)
    fearless_norm = llama.LlamaRMSNorm(16, eps=1e-6)
    calls = _count(monkeypatch, "rms_norm")
    x = torch.randn(3, 16)
    with torch.no_grad():
        torch.testing.assert_close(fearless_norm(x), norm(x), rtol=1e-5, atol=1e-6)
        assert calls["rms_norm"] == 1
        fearless_norm.weight.data = fearless_norm.weight.data.double()  # f64 weight, f32 x
        norm.weight.data = norm.weight.data.double()
        y = fearless_norm(x)
    assert calls["rms_norm"] == 1 and y.dtype == torch.float64
    torch.testing.assert_close(y, norm(x).detach())


def test_rope_with_an_odd_head_dim_runs_hugging_faces_code(monkeypatch: pytest.MonkeyPatch) -> None:
    llama = modeling("llama")
    original = llama.apply_rotary_pos_emb
    flt.apply_fearless_kernel_to_llama(rms_norm=False, swiglu=False, attention=False)
    calls = _count(monkeypatch, "rope")
    q, k = torch.randn(1, 4, 5, 12), torch.randn(1, 2, 5, 12)  # head_dim 12: not a power of 2
    cos, sin = torch.randn(1, 5, 12), torch.randn(1, 5, 12)
    got = llama.apply_rotary_pos_emb(q, k, cos, sin)
    want = original(q, k, cos, sin)
    assert calls["rope"] == 0
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    q, k, cos, sin = (
        torch.randn(s) for s in ((1, 4, 5, 16), (1, 2, 5, 16), (1, 5, 16), (1, 5, 16))
    )
    cos, sin = torch.cat([cos[..., :8]] * 2, -1), torch.cat([sin[..., :8]] * 2, -1)
    torch.testing.assert_close(
        llama.apply_rotary_pos_emb(q, k, cos, sin),
        original(q, k, cos, sin),
        rtol=1e-5,
        atol=1e-5,
    )
    assert calls["rope"] == 1


def test_model_types_are_the_ones_apply_takes() -> None:
    """flt.MODEL_TYPES, sorted; each has its apply_fearless_kernel_to_<type>, or (a multimodal
    family's text config, "gemma3_text") its family's."""
    assert sorted(flt.MODEL_TYPES) == list(flt.MODEL_TYPES)
    for model_type in flt.MODEL_TYPES:
        family = model_type.removesuffix("_text")
        assert callable(getattr(flt, f"apply_fearless_kernel_to_{family}")), model_type


def test_apply_names_the_supported_model_types() -> None:
    supported = "deepseek_v2, deepseek_v3, gemma, gemma2, gemma3, gemma3_text, glm4_moe, gpt_oss, granite, llama, mistral, mixtral, olmo2, olmo3, olmoe, phi3, qwen2, qwen2_moe, qwen3, qwen3_5, qwen3_5_moe, qwen3_5_moe_text, qwen3_5_text, qwen3_moe, qwen3_next, smollm3"
    with pytest.raises(KernelTypeError, match=rf"'gpt2'.*{supported}"):
        flt.apply(SimpleNamespace(config=SimpleNamespace(model_type="gpt2")))


def test_import_fearless_does_not_import_transformers() -> None:
    code = (
        "import sys, fearless, fearless.ops; "
        "print(sorted(m for m in ('transformers', 'fearless.transformers') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_train_tiny_llama_example_matches_eager_for_three_steps() -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "3"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "FEARLESS_TARGET": "sim"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("step ")]
    assert len(lines) == 3, run.stdout
    assert run.stdout.rstrip().endswith("ok"), run.stdout


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_greedy_generation_with_a_kv_cache_matches_hugging_face(
    model_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(model_type).eval()
    ids, _ = _batch(batch=1)
    with torch.no_grad():
        want = model.generate(
            ids, max_new_tokens=4, do_sample=False, output_logits=True, return_dict_in_generate=True
        )
    flt.apply(model)
    calls = _count(monkeypatch, "scaled_dot_product_attention", "rope")
    with torch.no_grad():
        got = model.generate(
            ids, max_new_tokens=4, do_sample=False, output_logits=True, return_dict_in_generate=True
        )
    # the prefill and three decode steps (one query against the cache: fearless's split-KV
    # kernel, rope at positions past the prompt) all went through fearless
    assert calls["scaled_dot_product_attention"] == 4 * LAYERS and calls["rope"] == 4 * LAYERS
    assert torch.equal(got.sequences, want.sequences)
    for g, w in zip(got.logits, want.logits, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_mistral_sliding_window_trains_and_generates_on_swa_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # window 4 of the batch's 12 tokens: Hugging Face builds the sliding-window mask, which
    # is the exact causal window (no padding): swa_attention, with its backward in training
    model = _model("mistral", sliding_window=4)
    ids, labels = _batch()
    ref, ref_grads = _run(model, input_ids=ids, labels=labels)
    kw = {"max_new_tokens": 3, "do_sample": False, "output_logits": True}
    with torch.no_grad():
        want = model.generate(ids[:1], return_dict_in_generate=True, **kw)
    flt.apply(model)
    calls = _count(monkeypatch, "swa_attention", "scaled_dot_product_attention")
    out, grads = _run(model, input_ids=ids, labels=labels)
    assert calls == Counter({"swa_attention": LAYERS}), calls
    calls.clear()
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-4)
    _assert_grads_match(grads, ref_grads)
    with torch.no_grad():
        got = model.generate(ids[:1], return_dict_in_generate=True, **kw)
    # the prefill and two decode steps (one query over the sliding cache, its mask the
    # bottom-right window) of each layer
    assert calls == Counter({"swa_attention": 3 * LAYERS}), calls
    assert torch.equal(got.sequences, want.sequences)
    for g, w in zip(got.logits, want.logits, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_the_fused_loss_forward_keeps_a_cache_given_as_past_key_values() -> None:
    """transformers 5's deprecated `past_key_values=` keyword reaches the decoder through the
    patched causal-LM forward (which once passed `cache=None` beside it, so that Hugging Face
    dropped the cache and the next token saw no context)."""
    model = _model("llama").eval()
    ids, _ = _batch(batch=1)

    def next_logits() -> Any:
        with torch.no_grad():
            past = model(ids[:, :-1], use_cache=True).cache
            return model(ids[:, -1:], past_key_values=past).logits

    want = next_logits()
    flt.apply(model, fused_linear_cross_entropy=True)
    torch.testing.assert_close(next_logits(), want, rtol=1e-4, atol=1e-4)


def test_the_fused_loss_forward_fills_transformers_4s_output_classes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers 4's CausalLMOutputWithPast (and an earlier 5's) names its cache
    `past_key_values` (5.25's: `cache`): the patched forward fills whichever field the
    installed class has (it once passed `cache=` to such a class, a TypeError in every
    fused-loss training step on the GPU machine's transformers)."""
    from dataclasses import dataclass

    from transformers import modeling_outputs

    @dataclass
    class Old(modeling_outputs.ModelOutput):  # transformers 4's fields
        loss: Any = None
        logits: Any = None
        past_key_values: Any = None
        hidden_states: Any = None
        attentions: Any = None

    monkeypatch.setattr(modeling_outputs, "CausalLMOutputWithPast", Old)
    model = _model("llama").train()
    ids, labels = _batch(batch=2)
    flt.apply(model, fused_linear_cross_entropy=True)
    out = model(ids, labels=labels)
    assert isinstance(out, Old) and out.logits is None
    assert torch.isfinite(out.loss)


def test_a_flag_that_is_no_bool_or_a_model_that_is_no_module_is_refused_before_patching() -> None:
    import numpy as np

    before = modeling("llama").LlamaRMSNorm
    with pytest.raises(
        KernelTypeError,
        match=r"`rope` of `apply_fearless_kernel_to_llama` is True or False, not ndarray",
    ) as info:
        flt.apply_fearless_kernel_to_llama(rms_norm=True, rope=np.zeros((2, 2)))
    assert "test_transformers.py" in str(info.value)
    with pytest.raises(
        KernelTypeError, match=r"`model` of `apply_fearless_kernel_to_llama` is a loaded"
    ):
        flt.apply_fearless_kernel_to_llama(model="meta-llama/Llama-3.1-8B")
    assert modeling("llama").LlamaRMSNorm is before  # nothing was patched


# ../shared/DESIGN.md section 2c: every one of these takes the common flags by these names
DESIGN_MODELS = (
    "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3", "deepseek_v2", "deepseek_v3",
    "gpt_oss", "qwen3_next", "olmoe",
)  # fmt: skip


@pytest.mark.parametrize("model_type", DESIGN_MODELS)
def test_every_model_takes_the_common_flags_design_names(model_type: str) -> None:
    import inspect

    apply = getattr(flt, f"apply_fearless_kernel_to_{model_type}")
    common = dict(rope=True, rms_norm=True, swiglu=True, attention=True)
    inspect.signature(apply).bind(**common, fused_linear_cross_entropy=False, model=None)


def test_a_flag_naming_a_part_without_a_fearless_form_patches_nothing_and_off_wins() -> None:
    """OLMoE has no dense MLP (`swiglu` installs nothing); Gemma's gated MLP is named by
    `swiglu` and by its older `mlp`, and either one off keeps Hugging Face's."""
    flt.apply_fearless_kernel_to_olmoe(swiglu=True, rope=False, rms_norm=False, attention=False,
                                       moe=False)  # fmt: skip
    gemma = modeling("gemma3")
    flt.apply_fearless_kernel_to_gemma3(swiglu=False)
    assert not gemma.Gemma3MLP.__name__.startswith("Fearless")
    assert gemma.Gemma3RMSNorm.__name__.startswith("Fearless")
    flt.apply_fearless_kernel_to_gemma3()
    assert gemma.Gemma3MLP.__name__.startswith("Fearless")
