"""The entry points of fearless.transformers: `apply_fearless_kernel_to_<model_type>` patches a
Hugging Face modeling module (and, with `model=`, that model's existing modules) to run on
fearless.ops, and `apply(model)` picks the function by `model.config.model_type`.

Each patch, after TileGym's and Liger-Kernel's convention:
- rms_norm: the module's `XxxRMSNorm` class is replaced by its fearless subclass (layers.py), so
  that models built afterwards get it; a given model's existing RMSNorm modules are switched to it.
- swiglu: the same for `XxxMLP` (the gated MLP's SiLU-and-multiply as `fearless.ops.swiglu`;
  OLMo 2's and OLMo 3's whole MLP as `fearless.ops.linear_gluact_linear` in inference; Phi-3's fused
  gate_up_proj's output as `fearless.ops.silu_and_mul`).
- rope: the module's `apply_rotary_pos_emb` function (its attention calls it by that name);
  OLMo 2's and OLMo 3's f32 tables with f16/bf16 q and k too (`wide_rope`).
- attention: `XxxAttention` gets a fearless subclass that marks it, and Hugging Face's `sdpa`
  attention function becomes a dispatcher that sends marked modules to
  `fearless.ops.scaled_dot_product_attention` (a sliding-window layer whose mask is exactly the
  causal window to `fearless.ops.gemma_attention` (Gemma) or `swa_attention` (Mistral, Qwen2,
  Qwen3, Qwen3-MoE, OLMo 3, Phi-3), in training too; DeepSeek's latent attention, whose key and
  value head dims differ, to `fearless.ops.mla`) and every other module to torch's SDPA as before.
  Models running another attention implementation (eager, flash_attention_2) are left as they
  are, but for GPT-OSS and Gemma 2, which run `eager` (they have no `sdpa`): their modeling
  module's `eager_attention_forward` is replaced (sinks.py, gemma.py).
- fused_linear_cross_entropy: `XxxForCausalLM.forward` (the class's, or with `model=` that
  model's) computes the loss with `fearless.ops.fused_linear_cross_entropy` (loss.py).

Every function's flags are table-driven: FLAGS names the piece (`_pieces`: class swaps, module
functions, the `sdpa` dispatcher) each flag of each model type installs. Models with the same
flags share one signature (`_like`): four are written out, Llama's (the common flags), Qwen3-MoE's
(and `moe`), Gemma 2's (and `mlp`) and Qwen3-Next's (and `linear_attention`), and every other
model's function takes one of them.

Transformers is imported only when a function here is called.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ParamSpec

from ..errors import ToolchainError
from ..runtime.location import argument_error, user_location

P = ParamSpec("P")

# model_type -> (modeling module, class name prefix)
MODELS: dict[str, tuple[str, str]] = {
    "llama": ("transformers.models.llama.modeling_llama", "Llama"),
    "mistral": ("transformers.models.mistral.modeling_mistral", "Mistral"),
    "mixtral": ("transformers.models.mixtral.modeling_mixtral", "Mixtral"),
    "qwen2": ("transformers.models.qwen2.modeling_qwen2", "Qwen2"),
    "qwen3": ("transformers.models.qwen3.modeling_qwen3", "Qwen3"),
    "qwen3_moe": ("transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3Moe"),
    "qwen2_moe": ("transformers.models.qwen2_moe.modeling_qwen2_moe", "Qwen2Moe"),
    "glm4_moe": ("transformers.models.glm4_moe.modeling_glm4_moe", "Glm4Moe"),
    "gemma": ("transformers.models.gemma.modeling_gemma", "Gemma"),
    "gemma2": ("transformers.models.gemma2.modeling_gemma2", "Gemma2"),
    "gemma3": ("transformers.models.gemma3.modeling_gemma3", "Gemma3"),
    "gpt_oss": ("transformers.models.gpt_oss.modeling_gpt_oss", "GptOss"),
    "olmoe": ("transformers.models.olmoe.modeling_olmoe", "Olmoe"),
    "qwen3_next": ("transformers.models.qwen3_next.modeling_qwen3_next", "Qwen3Next"),
    "qwen3_5": ("transformers.models.qwen3_5.modeling_qwen3_5", "Qwen3_5"),
    "qwen3_5_moe": ("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe", "Qwen3_5Moe"),
    "deepseek_v2": ("transformers.models.deepseek_v2.modeling_deepseek_v2", "DeepseekV2"),
    "deepseek_v3": ("transformers.models.deepseek_v3.modeling_deepseek_v3", "DeepseekV3"),
    "olmo2": ("transformers.models.olmo2.modeling_olmo2", "Olmo2"),
    "olmo3": ("transformers.models.olmo3.modeling_olmo3", "Olmo3"),
    "phi3": ("transformers.models.phi3.modeling_phi3", "Phi3"),
    "smollm3": ("transformers.models.smollm3.modeling_smollm3", "SmolLM3"),
    "granite": ("transformers.models.granite.modeling_granite", "Granite"),
}

# (class name without the prefix, its fearless forward (None: Hugging Face's), class attributes)
Swap = tuple[str, Any, dict[str, Any]]


def _modeling(model_type: str) -> Any:
    try:
        return importlib.import_module(MODELS[model_type][0])
    except ImportError as e:
        raise argument_error(
            f"fearless.transformers needs Hugging Face transformers ({e})",
            help="pip install 'fearless[transformers]'",
        ) from None


# model_type -> its `apply_fearless_kernel_to_<model_type>` flags -> the piece (of `_pieces`)
# each installs when on. Every function takes DESIGN's common flags (rope, rms_norm, swiglu,
# attention); one naming a part the model has no fearless form of maps to None and installs
# nothing, and a piece two flags name (Gemma's gated MLP: `swiglu` and its older `mlp`) is
# installed only while both are on.
_DENSE: dict[str, str | None] = {
    "rope": "rope",
    "rms_norm": "rms_norm",
    "swiglu": "swiglu",
    "attention": "attention",
}
# the dense models whose attention passes Hugging Face's `sliding_window` (a window layer's, or
# the config's): their windowed layers on swa_attention
_SLIDING: dict[str, str | None] = {**_DENSE, "attention": "swa_attention"}
_DEEPSEEK: dict[str, str | None] = {
    "rope": None,
    "rms_norm": "rms_norm",
    "swiglu": "swiglu",
    "attention": "mla",
    "moe": "experts",
}
# Qwen3-Next's hybrid layers (gated delta rule and full attention), Qwen3.5's too
_NEXT: dict[str, str | None] = {
    "rope": "partial_rope",
    "rms_norm": "gated_rms_norm",
    "swiglu": "swiglu",
    "attention": "attention",
    "linear_attention": "gated_delta_rule",
    "moe": "experts",
}
FLAGS: dict[str, dict[str, str | None]] = {
    "llama": _DENSE,
    "mistral": _SLIDING,
    "qwen2": _SLIDING,
    "qwen3": _SLIDING,
    "qwen3_moe": {**_SLIDING, "moe": "experts"},
    "mixtral": {**_SLIDING, "swiglu": None, "moe": "experts"},
    "qwen2_moe": {**_DENSE, "moe": "experts"},
    "glm4_moe": {**_DENSE, "rope": "partial_rope", "moe": "experts"},
    "gemma": {
        "rope": "rope",
        "rms_norm": "gemma_rms_norm",
        "swiglu": "gemma_mlp",
        "attention": "attention",
        "mlp": "gemma_mlp",
    },
    "gemma2": {
        "rope": "rope",
        "rms_norm": "gemma_rms_norm",
        "swiglu": "gemma_mlp",
        "attention": "capped_attention",
        "mlp": "gemma_mlp",
    },
    "gemma3": {
        "rope": "rope",
        "rms_norm": "gemma_rms_norm",
        "swiglu": "gemma_mlp",
        "attention": "windowed_attention",
        "mlp": "gemma_mlp",
    },
    "gpt_oss": {
        "rope": "half_rope",
        "rms_norm": "rms_norm",
        "swiglu": None,
        "attention": "sink_attention",
    },
    "olmoe": {
        "rope": "rope",
        "rms_norm": "rms_norm",
        "swiglu": None,
        "attention": "attention",
        "moe": "experts",
    },
    "qwen3_next": _NEXT,
    "qwen3_5": {**_NEXT, "moe": None},
    "qwen3_5_moe": _NEXT,
    "deepseek_v2": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK,
    "olmo2": {**_DENSE, "rope": "wide_rope", "swiglu": "gluact_mlp"},
    "olmo3": {**_SLIDING, "rope": "wide_rope", "swiglu": "gluact_mlp"},
    "phi3": {**_SLIDING, "rope": "partial_rope", "swiglu": "gate_up_mlp"},
    "smollm3": _SLIDING,
    "granite": _DENSE,
}


@dataclass(frozen=True)
class _Piece:
    """What one flag installs: class swaps, module functions (name -> a function of Hugging
    Face's function), and whether Hugging Face's `sdpa` entry becomes the dispatcher."""

    swaps: tuple[Swap, ...] = ()
    functions: tuple[tuple[str, Callable[[Any], Any]], ...] = ()
    sdpa: bool = False


def _pieces() -> dict[str, _Piece]:
    """Every piece a flag of FLAGS names, by name (imports the forwards they install)."""
    from . import experts, gemma, layers, sinks
    from . import linear_attention as la

    rotary = "apply_rotary_pos_emb"
    norm: Swap = ("RMSNorm", gemma.gemma_rms_norm_forward, {})
    marks = {"_fearless_attention": True, "_fearless_windowed": "gemma_attention"}
    swa = {"_fearless_attention": True, "_fearless_windowed": "swa_attention"}
    latent = {"_fearless_attention": True, "_fearless_mla": True}
    return {
        "rope": _Piece(functions=((rotary, layers.rope_function),)),
        "half_rope": _Piece(functions=((rotary, partial(layers.rope_function, half=True)),)),
        "partial_rope": _Piece(functions=((rotary, partial(layers.rope_function, partial=True)),)),
        "wide_rope": _Piece(functions=((rotary, partial(layers.rope_function, wide=True)),)),
        "rms_norm": _Piece(swaps=(("RMSNorm", layers.rms_norm_forward, {}),)),
        "gemma_rms_norm": _Piece(swaps=(norm,)),
        "gated_rms_norm": _Piece(swaps=(norm, ("RMSNormGated", la.gated_rms_norm_forward, {}))),
        "swiglu": _Piece(swaps=(("MLP", layers.mlp_forward, {}),)),
        "gluact_mlp": _Piece(swaps=(("MLP", layers.gluact_mlp_forward, {}),)),
        "gate_up_mlp": _Piece(swaps=(("MLP", layers.gate_up_mlp_forward, {}),)),
        "gemma_mlp": _Piece(swaps=(("MLP", gemma.gemma_mlp_forward, {}),)),
        "attention": _Piece(swaps=(("Attention", None, {"_fearless_attention": True}),), sdpa=True),
        "windowed_attention": _Piece(swaps=(("Attention", None, marks),), sdpa=True),
        "swa_attention": _Piece(swaps=(("Attention", None, swa),), sdpa=True),
        "mla": _Piece(swaps=(("Attention", None, latent),), sdpa=True),
        "capped_attention": _Piece(
            functions=(("eager_attention_forward", gemma.capped_attention_function),)
        ),
        "sink_attention": _Piece(
            functions=(("eager_attention_forward", sinks.sink_attention_function),)
        ),
        "gated_delta_rule": _Piece(
            functions=(
                ("torch_chunk_gated_delta_rule", la.chunk_function),
                ("torch_recurrent_gated_delta_rule", la.recurrent_function),
            )
        ),
        "experts": _Piece(swaps=(("Experts", experts.experts_forward, {}),)),
    }


def _apply(model_type: str, /, fused_linear_cross_entropy: bool, model: Any, **flags: bool) -> None:
    """The body of every `apply_fearless_kernel_to_<model_type>`, which passes its arguments as
    `**locals()`: install the piece FLAGS names for each of `flags` that is on, then patch the
    loss and `model` as `_patch` does."""
    _check_arguments(
        model_type, {**flags, "fused_linear_cross_entropy": fused_linear_cross_entropy}, model
    )
    pieces = _pieces()
    wanted: dict[str, str] = {}  # piece -> the first flag naming it, while all of them are on
    off: set[str] = set()
    for flag, on in flags.items():
        piece = FLAGS[model_type][flag]
        if piece is not None and on:
            wanted.setdefault(piece, flag)
        elif piece is not None:
            off.add(piece)
    named = {flag: pieces[piece] for piece, flag in wanted.items() if piece not in off}
    _check_installed(model_type, named)
    chosen = list(named.values())
    swaps = [swap for piece in chosen for swap in piece.swaps]
    functions = {name: wrap for piece in chosen for name, wrap in piece.functions}
    sdpa = any(piece.sdpa for piece in chosen)
    _patch(model_type, swaps, functions, sdpa, fused_linear_cross_entropy, model)


def _check_arguments(model_type: str, flags: dict[str, Any], model: Any) -> None:
    """Refuse, before anything is patched, a flag that is not a bool (an array or a string
    there would be taken for on or off, or be NumPy's error) and a `model` that is not a
    module (it has no `.modules()` to switch)."""
    call = f"apply_fearless_kernel_to_{model_type}"
    for name, value in flags.items():
        if not isinstance(value, bool | int) or hasattr(value, "shape"):
            raise argument_error(
                f"`{name}` of `{call}` is True or False, not {type(value).__name__} "
                f"({value!r:.40})",
                help=f"pass `{name}=True` to patch that piece, `{name}=False` to leave it",
            )
    if model is not None and not callable(getattr(model, "modules", None)):
        raise argument_error(
            f"`model` of `{call}` is a loaded model (a torch.nn.Module), or None for the "
            f"classes alone, not {type(model).__name__}",
            help="call it before loading the model, or pass the model you loaded: "
            "`model = AutoModelForCausalLM.from_pretrained(...)`, then `model=model`",
        )


def _check_installed(model_type: str, named: dict[str, _Piece]) -> None:
    """Refuse, before anything is patched, flags whose classes or functions the installed
    transformers does not have (transformers 4 has no stacked `...Experts` modules, which
    transformers 5 introduced: `moe=` needs 5), naming each."""
    modeling = _modeling(model_type)
    prefix = MODELS[model_type][1]
    missing = [
        (flag, name)
        for flag, piece in named.items()
        for name in [prefix + swap[0] for swap in piece.swaps] + [f[0] for f in piece.functions]
        if not hasattr(modeling, name)
    ]
    if not missing:
        return
    import transformers

    flags = sorted({flag for flag, _ in missing})
    raise ToolchainError(
        f"the installed transformers {transformers.__version__} has no "
        + ", ".join(f"`{name}` (for `{flag}=`)" for flag, name in missing)
        + f" in {modeling.__name__}",
        user_location(),
        help=f"pass {', '.join(f'{flag}=False' for flag in flags)} to patch the rest, or "
        "install the transformers these layers were written for: pip install -U "
        "'transformers>=5'",
    )


def _patch(
    model_type: str,
    swaps: list[Swap],
    functions: dict[str, Any],
    sdpa: bool,
    fused_linear_cross_entropy: bool,
    model: Any,
) -> None:
    """Swap the classes `swaps`, wrap the module functions `functions` (name -> a function of
    Hugging Face's function), make the `sdpa` entry the dispatcher when `sdpa`, and patch the
    causal LM's loss; with `model`, switch its existing modules to the swapped classes."""
    modeling = _modeling(model_type)
    from . import layers

    prefix = MODELS[model_type][1]
    classes = [_swap(modeling, prefix + name, fwd, **attrs) for name, fwd, attrs in swaps]
    if sdpa:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        ALL_ATTENTION_FUNCTIONS["sdpa"] = layers.sdpa_dispatch(ALL_ATTENTION_FUNCTIONS["sdpa"])
        _skip_causal_masks(model_type, model)
    for name, wrap in functions.items():
        setattr(modeling, name, wrap(getattr(modeling, name)))
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


def _skip_causal_masks(model_type: str, model: Any) -> None:
    """Make the `sdpa` mask entry `layers.sdpa_mask_dispatch`, for `model_type` and the model
    type of `model`'s config (a text config's own, Gemma 3's "gemma3_text" say), where the
    installed transformers has the mask interface (5.x)."""
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    except ImportError:  # transformers 4.x: masks made in the modeling modules
        return
    from . import layers

    layers.CAUSAL_SKIP_TYPES.add(model_type)
    config = getattr(model, "config", None)
    for cfg in (config, getattr(config, "text_config", None)):
        name = getattr(cfg, "model_type", None)
        if isinstance(name, str):
            layers.CAUSAL_SKIP_TYPES.add(name)
    ALL_MASK_ATTENTION_FUNCTIONS["sdpa"] = layers.sdpa_mask_dispatch(
        ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]
    )


def _swap(modeling: Any, name: str, forward: Any, **attrs: Any) -> type:
    """Replace class `name` of module `modeling` by its fearless subclass; return it."""
    from .layers import fearless_class

    cls = fearless_class(getattr(modeling, name), forward, **attrs)
    setattr(modeling, name, cls)
    return cls


def _like(base: Callable[P, None], model_type: str, doc: str) -> Callable[P, None]:
    """The patch function of `model_type`, whose flags are those of `base` (same names, order,
    defaults and types, for the type checker too), documented by `doc`."""
    signature = inspect.signature(base)
    name = f"apply_fearless_kernel_to_{model_type}"

    def entry(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # as Python words it: "f() got an unexpected keyword argument"
            raise TypeError(f"{name}() {e}") from None
        bound.apply_defaults()
        _apply(model_type, **bound.arguments)

    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = doc
    entry.__signature__ = signature  # type: ignore[attr-defined]
    entry.__annotations__ = dict(base.__annotations__)
    return entry


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
    _apply("llama", **locals())


apply_fearless_kernel_to_mistral = _like(
    apply_fearless_kernel_to_llama,
    "mistral",
    """`apply_fearless_kernel_to_llama` for Mistral (transformers.models.mistral); where the
    sliding window bites (Hugging Face builds its mask), a mask that is exactly the causal
    window (no padding) runs `fearless.ops.swa_attention`, in training too (its backward); a
    padded one runs fearless's masked attention, in inference and in training.""",
)


apply_fearless_kernel_to_qwen2 = _like(
    apply_fearless_kernel_to_llama,
    "qwen2",
    """`apply_fearless_kernel_to_llama` for Qwen2 (transformers.models.qwen2); its sliding-window
    layers (`use_sliding_window`) as Mistral's.""",
)


apply_fearless_kernel_to_qwen3 = _like(
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
    _apply("qwen3_moe", **locals())


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
    _apply("gemma2", **locals())


apply_fearless_kernel_to_gemma = _like(
    apply_fearless_kernel_to_gemma2,
    "gemma",
    """Run Hugging Face's Gemma (the first, transformers.models.gemma) on fearless kernels: its
    RMSNorm ((1 + weight), as Gemma 2's), the GELU-gated MLP (`swiglu` and `mlp`, as Gemma
    2's; as `fearless.ops.geglu`, with the GELU its `hidden_act` names), RoPE, and every
    layer's attention with the `sdpa` implementation as Llama's (Gemma has no soft cap and no
    sliding window), and when asked the fused loss.""",
)


apply_fearless_kernel_to_gemma3 = _like(
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


apply_fearless_kernel_to_gpt_oss = _like(
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


apply_fearless_kernel_to_olmoe = _like(
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


apply_fearless_kernel_to_mixtral = _like(
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
    _apply("qwen3_next", **locals())


apply_fearless_kernel_to_qwen2_moe = _like(
    apply_fearless_kernel_to_qwen3_moe,
    "qwen2_moe",
    """Run Hugging Face's Qwen2-MoE (transformers.models.qwen2_moe: Qwen1.5-MoE, Qwen2-57B-A14B)
    on fearless kernels: its RMSNorm, RoPE, attention with the `sdpa` implementation as
    Llama's, the SwiGLU MLP (`swiglu`: its shared expert and any dense layer), and with `moe`
    the routed experts through `fearless.ops.fused_moe` in inference and training; the router
    and the shared expert's sigmoid gate stay Hugging Face's. The fused loss is taken when the
    router logits are not asked for.""",
)


apply_fearless_kernel_to_glm4_moe = _like(
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


apply_fearless_kernel_to_qwen3_5_moe = _like(
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


apply_fearless_kernel_to_qwen3_5 = _like(
    apply_fearless_kernel_to_qwen3_next,
    "qwen3_5",
    """`apply_fearless_kernel_to_qwen3_5_moe` for the dense Qwen3.5 (transformers.models.qwen3_5):
    the same hybrid layers with a SwiGLU MLP in every layer (`swiglu`); it has no experts, so
    `moe` patches nothing.""",
)


apply_fearless_kernel_to_deepseek_v3 = _like(
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


apply_fearless_kernel_to_deepseek_v2 = _like(
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


apply_fearless_kernel_to_olmo3 = _like(
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


apply_fearless_kernel_to_olmo2 = _like(
    apply_fearless_kernel_to_llama,
    "olmo2",
    """`apply_fearless_kernel_to_olmo3` for OLMo 2 (transformers.models.olmo2), which has no
    sliding window: its RMSNorm (the post-attention and post-feedforward norms, and the q and k
    norms over the whole projection width), RoPE (f32 tables, taken with f16/bf16
    activations as OLMo 3's), every layer's attention with the `sdpa` implementation as Llama's,
    and with `swiglu` the MLP as one `fearless.ops.linear_gluact_linear` in inference and
    `fearless.ops.swiglu` between Hugging Face's projections in training.""",
)


apply_fearless_kernel_to_phi3 = _like(
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


apply_fearless_kernel_to_smollm3 = _like(
    apply_fearless_kernel_to_llama,
    "smollm3",
    """Run Hugging Face's SmolLM3 (transformers.models.smollm3) on fearless kernels: its
    RMSNorm, the SwiGLU MLP, RoPE (on the layers that rotate: its `no_rope_layers` skip
    `apply_rotary_pos_emb`, so those stay unrotated), attention with the `sdpa`
    implementation as Mistral's (with `use_sliding_window`, a layer whose mask is exactly the
    causal window runs `fearless.ops.swa_attention`, in training too), and when asked the fused
    loss.""",
)


apply_fearless_kernel_to_granite = _like(
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
