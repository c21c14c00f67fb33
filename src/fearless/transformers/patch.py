"""The entry points of fearless.transformers: `apply_fearless_kernel_to_<model_type>` patches a
Hugging Face modeling module (and, with `model=`, that model's existing modules) to run on
fearless.ops, and `apply(model)` picks the function by `model.config.model_type`.

Each patch, after TileGym's and Liger-Kernel's convention:
- rms_norm: the module's `XxxRMSNorm` class is replaced by its fearless subclass (layers.py), so
  that models built afterwards get it; a given model's existing RMSNorm modules are switched to it.
- swiglu: the same for `XxxMLP` (the gated MLP's SiLU-and-multiply as `fearless.ops.swiglu`).
- rope: the module's `apply_rotary_pos_emb` function (its attention calls it by that name).
- attention: `XxxAttention` gets a fearless subclass that marks it, and Hugging Face's `sdpa`
  attention function becomes a dispatcher that sends marked modules to
  `fearless.ops.scaled_dot_product_attention` and every other module to torch's SDPA as before.
  Models running another attention implementation (eager, flash_attention_2) are left as they are.
- fused_linear_cross_entropy: `XxxForCausalLM.forward` (the class's, or with `model=` that
  model's) computes the loss with `fearless.ops.fused_linear_cross_entropy` (loss.py).

Transformers is imported only when a function here is called.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

from ..runtime.location import argument_error

# model_type -> (modeling module, class name prefix)
MODELS: dict[str, tuple[str, str]] = {
    "llama": ("transformers.models.llama.modeling_llama", "Llama"),
    "mistral": ("transformers.models.mistral.modeling_mistral", "Mistral"),
    "qwen2": ("transformers.models.qwen2.modeling_qwen2", "Qwen2"),
    "qwen3": ("transformers.models.qwen3.modeling_qwen3", "Qwen3"),
}


def _patch(
    model_type: str,
    rope: bool,
    rms_norm: bool,
    swiglu: bool,
    attention: bool,
    fused_linear_cross_entropy: bool,
    model: Any,
) -> None:
    modeling: Any  # a modeling module: mypy does not know its functions
    try:
        modeling = importlib.import_module(MODELS[model_type][0])
    except ImportError as e:
        raise argument_error(
            f"fearless.transformers needs Hugging Face transformers ({e})",
            help="pip install 'fearless[transformers]'",
        ) from None
    from . import layers

    prefix = MODELS[model_type][1]
    classes: list[type] = []
    if rms_norm:
        classes.append(_swap(modeling, f"{prefix}RMSNorm", layers.rms_norm_forward))
    if swiglu:
        classes.append(_swap(modeling, f"{prefix}MLP", layers.mlp_forward))
    if attention:
        classes.append(_swap(modeling, f"{prefix}Attention", None, _fearless_attention=True))
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        ALL_ATTENTION_FUNCTIONS["sdpa"] = layers.sdpa_dispatch(ALL_ATTENTION_FUNCTIONS["sdpa"])
    if rope:
        modeling.apply_rotary_pos_emb = layers.rope_function(modeling.apply_rotary_pos_emb)
    if fused_linear_cross_entropy:
        from . import loss

        causal_lm = getattr(modeling, f"{prefix}ForCausalLM")
        if model is None:
            causal_lm.forward = loss.causal_lm_forward(causal_lm.forward)
        elif isinstance(model, causal_lm):
            forward = loss.causal_lm_forward(type(model).forward)
            model.forward = types.MethodType(forward, model)
    if model is not None:
        for module in model.modules():
            for fearless in classes:
                base = fearless._fearless_base  # type: ignore[attr-defined]
                if type(module) is base:
                    module.__class__ = fearless


def _swap(modeling: Any, name: str, forward: Any, **attrs: Any) -> type:
    """Replace class `name` of module `modeling` by its fearless subclass; return it."""
    from .layers import fearless_class

    cls = fearless_class(getattr(modeling, name), forward, **attrs)
    setattr(modeling, name, cls)
    return cls


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
    _patch("llama", rope, rms_norm, swiglu, attention, fused_linear_cross_entropy, model)


def apply_fearless_kernel_to_mistral(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """`apply_fearless_kernel_to_llama` for Mistral (transformers.models.mistral); a sliding
    window is kept by the attention mask Hugging Face builds (a masked call runs fearless's
    attention in inference and torch's SDPA in training)."""
    _patch("mistral", rope, rms_norm, swiglu, attention, fused_linear_cross_entropy, model)


def apply_fearless_kernel_to_qwen2(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """`apply_fearless_kernel_to_llama` for Qwen2 (transformers.models.qwen2)."""
    _patch("qwen2", rope, rms_norm, swiglu, attention, fused_linear_cross_entropy, model)


def apply_fearless_kernel_to_qwen3(
    rope: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    attention: bool = True,
    fused_linear_cross_entropy: bool = False,
    model: Any = None,
) -> None:
    """`apply_fearless_kernel_to_llama` for Qwen3 (transformers.models.qwen3); its q and k
    norms are Qwen3RMSNorm modules, so `rms_norm` covers them."""
    _patch("qwen3", rope, rms_norm, swiglu, attention, fused_linear_cross_entropy, model)


APPLY = {
    "llama": apply_fearless_kernel_to_llama,
    "mistral": apply_fearless_kernel_to_mistral,
    "qwen2": apply_fearless_kernel_to_qwen2,
    "qwen3": apply_fearless_kernel_to_qwen3,
}


def apply(model: Any, **flags: bool) -> Any:
    """Patch `model` (a Hugging Face PreTrainedModel) by its `config.model_type` with
    `apply_fearless_kernel_to_<model_type>(model=model, **flags)`; returns the model."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in APPLY:
        raise argument_error(
            f"fearless.transformers.apply has no kernels for model_type {model_type!r}; it "
            f"supports {', '.join(sorted(APPLY))}",
            help="patch the supported layers yourself with fearless.ops, or leave it unpatched",
        )
    APPLY[model_type](model=model, **flags)
    return model
