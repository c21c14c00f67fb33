"""What the fearless.transformers tests share: `keep_hugging_face`, which makes a test's
class-level patches of Hugging Face's modeling modules (and its `sdpa` attention entry) undo
themselves when the test ends."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

PREFIX = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}


def modeling(model_type: str) -> Any:
    """transformers.models.<model_type>.modeling_<model_type>."""
    return importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")


def keep_hugging_face(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record, in `monkeypatch`, every name fearless.transformers may replace, so that its
    teardown puts Hugging Face's own back."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    for model_type, prefix in PREFIX.items():
        module = modeling(model_type)
        for name in ("RMSNorm", "MLP", "Attention"):
            monkeypatch.setattr(module, prefix + name, getattr(module, prefix + name))
        monkeypatch.setattr(module, "apply_rotary_pos_emb", module.apply_rotary_pos_emb)
        causal_lm = getattr(module, prefix + "ForCausalLM")
        monkeypatch.setattr(causal_lm, "forward", causal_lm.forward)
    table = ALL_ATTENTION_FUNCTIONS
    monkeypatch.setattr(table, "_local_mapping", dict(table._local_mapping))
