"""How fearless.transformers patches a Hugging Face modeling module (and, with `model=`, that
model's existing modules) to run on fearless.ops: the table of model types (MODELS), the piece
each flag installs (FLAGS, `_pieces`), and `install`, the body of every
`apply_fearless_kernel_to_<model_type>` (entry_points.py holds those and `apply`).

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

Every entry point's flags are table-driven: FLAGS names the piece (`_pieces`: class swaps,
module functions, the `sdpa` dispatcher) each flag of each model type installs. Models with the
same flags share one signature (`like`).

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


def install(
    model_type: str, /, fused_linear_cross_entropy: bool, model: Any, **flags: bool
) -> None:
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


def like(base: Callable[P, None], model_type: str, doc: str) -> Callable[P, None]:
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
        install(model_type, **bound.arguments)

    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = doc
    entry.__signature__ = signature  # type: ignore[attr-defined]
    entry.__annotations__ = dict(base.__annotations__)
    return entry
