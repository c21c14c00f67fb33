"""What fearless.transformers puts into a Hugging Face model: the forwards of its RMSNorm, gated
MLP (separate gate and up projections, or Phi-3's fused one) and attention modules, the rotary
embedding function, and the causal-LM loss, each on fearless.ops, each falling back to the
model's own torch code for an input the fearless op does not take (said at each check).

A module is patched by giving it a subclass of its Hugging Face class (`fearless_class`): the
class's `__init__`, parameters and `isinstance` stay Hugging Face's; only `forward` (and, for
attention, a marker that the `sdpa` dispatcher reads) is ours. The original class is the
subclass's `_fearless_base`, whose forward is the fallback. The dispatcher's markers:
`_fearless_attention` (flash attention), `_fearless_windowed` (the sliding-window layers, in
inference and training: the marker names the op, "gemma_attention" for Gemma's,
"swa_attention" for Mistral's, Qwen2's, Qwen3's, OLMo 3's and Phi-3's) and `_fearless_mla` (DeepSeek's
latent attention on `fearless.ops.mla`, in inference).

A modeling module's function (RoPE's, an attention function, a forward) is replaced by a
stand-in that a factory decorated with `stand_in` makes around Hugging Face's own function;
the attention stand-ins hand their fearless paths one `AttentionCall` and, where none takes
it, `AttentionCall.fall_back` runs Hugging Face's function on the same arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeGuard

import torch

from .. import ops

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)  # what every fearless.ops kernel takes
_SILU = ("silu", "swish")  # Hugging Face's names of SiLU, the fused gated kernels' activation
_CLASSES: dict[type, type] = {}  # Hugging Face class -> its fearless subclass
_P = ParamSpec("_P")


def fearless_class(base: type, forward: Callable[..., Any] | None, **attrs: Any) -> type:
    """The fearless subclass of `base` (one per class, made once) whose forward is `forward`
    (None: base's) and with the class attributes `attrs`; `base` itself when it is one."""
    if "_fearless_base" in vars(base):
        return base
    if base not in _CLASSES:
        body = {"_fearless_base": base, "__module__": base.__module__, **attrs}
        if forward is not None:
            body["forward"] = forward
        _CLASSES[base] = type(f"Fearless{base.__name__}", (base,), body)
    return _CLASSES[base]


def _base_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    return type(self)._fearless_base.forward(self, *args, **kwargs)


def stand_in(
    factory: Callable[Concatenate[Callable[..., Any], _P], Callable[..., Any]],
) -> Callable[Concatenate[Callable[..., Any], _P], Callable[..., Any]]:
    """Decorates `factory(original, ...)`, which makes a stand-in for the Hugging Face function
    `original` (a modeling module's, or a forward): the factory is given Hugging Face's own
    function even when `original` is an earlier stand-in (patching twice wraps it once), and
    the stand-in it returns keeps that function as `_fearless_original` for the next patch."""

    @functools.wraps(factory)
    def make(
        original: Callable[..., Any], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> Callable[..., Any]:
        original = getattr(original, "_fearless_original", original)
        function = factory(original, *args, **kwargs)
        function._fearless_original = original  # type: ignore[attr-defined]
        return function

    return make


def wants_grad(*tensors: torch.Tensor) -> bool:
    """Whether autograd would record a call on these tensors (a forward-only fearless op then
    refuses them)."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def has_silu(module: Any) -> bool:
    """Whether `module`'s config names SiLU as its `hidden_act` (the gated MLP's or the
    experts' activation), the one fearless's gated kernels compute."""
    return getattr(getattr(module, "config", None), "hidden_act", None) in _SILU


def is_window(window: object, least: int) -> TypeGuard[int]:
    """Whether Hugging Face's `sliding_window` argument is a window of at least `least` keys
    (an int, not a bool), as the fearless sliding-window ops take it."""
    return isinstance(window, int) and not isinstance(window, bool) and window >= least


def is_causal_mask(mask: torch.Tensor | None, lq: int, s: int, window: int | None) -> bool:
    """Whether the attention mask Hugging Face built, boolean (True: attend) or additive (0 or
    the dtype's minimum / -inf), lets query i (of lq, at key index i + s - lq) see exactly the
    keys j <= i + s - lq and, with `window` W, j > i + s - lq - W: the masks of a causal or
    sliding-window prefill or decode over a cache without padding. None (no mask) is that only
    for one query with no window. Compares the mask with the pattern (a host sync over
    (batch, lq, s) booleans, far less than the attention's work)."""
    if mask is None:
        return lq == 1 and window is None
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2:] != (lq, s):
        return False
    pos = torch.arange(lq, device=mask.device)[:, None] + (s - lq)
    key = torch.arange(s, device=mask.device)[None, :]
    allowed = key <= pos
    if window is not None:
        allowed &= key > pos - window
    if mask.dtype == torch.bool:
        return bool(torch.equal(mask, allowed.expand_as(mask)))
    if not mask.is_floating_point():
        return False
    masked = mask <= torch.finfo(mask.dtype).min  # the minimum or -inf: weight 0
    return bool(torch.where(allowed, mask == 0, masked).all())


def is_attention_layout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether q, k, v (batch, heads, seq, head_dim) are as the fearless attention ops take them:
    4-D, one float dtype, one head size (the value's too), one batch, and the query heads a
    multiple of the (nonzero) KV heads."""
    if not (q.dim() == k.dim() == v.dim() == 4 and q.dtype in _FLOATS):
        return False
    if not (q.dtype == k.dtype == v.dtype and q.shape[-1] == k.shape[-1] == v.shape[-1]):
        return False
    h, hk = q.shape[1], k.shape[1]
    return k.shape[0] == q.shape[0] and hk > 0 and h % hk == 0


# ------------------------------------------------------------------------------------ RMSNorm


def rms_norm_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    """Hugging Face's `XxxRMSNorm.forward` (weight * normalize(x) over the last axis) through
    `fearless.ops.rms_norm`."""
    w = self.weight
    if hidden_states.dtype not in _FLOATS or w.dtype != hidden_states.dtype:
        # A weight in another dtype than the activations (f32 weights under bf16 autocast, say):
        # Hugging Face multiplies after casting the normalized rows back and promotes the product,
        # which the fused kernel (weight cast to x's dtype) would not reproduce.
        return _base_forward(self, hidden_states)  # type: ignore[no-any-return]
    return ops.rms_norm(hidden_states, (w.shape[0],), w, self.variance_epsilon)  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------------------- MLP


def mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's gated MLP, down(act(gate(x)) * up(x)), with act(gate) * up as
    `fearless.ops.swiglu` (silu(a) * b) when the activation is SiLU."""
    gate, up = self.gate_proj(x), self.up_proj(x)
    if not has_silu(self) or gate.dtype not in _FLOATS or gate.dtype != up.dtype:
        # Another activation (gelu for some configs) has no fused kernel here; mixed dtypes
        # (autocast) are refused by swiglu.
        return self.down_proj(self.act_fn(gate) * up)  # type: ignore[no-any-return]
    return self.down_proj(ops.swiglu(gate, up))  # type: ignore[no-any-return]


def gate_up_mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """Phi-3's MLP, one fused projection then down(up * act(gate)) of its halves (gate first,
    then up: `gate_up_proj(x).chunk(2, -1)`), with the gated product as
    `fearless.ops.silu_and_mul` (silu(x[..., :d]) * x[..., d:], the same layout; it has a
    backward) when the activation is SiLU; another activation runs Hugging Face's code."""
    gate_up = self.gate_up_proj(x)
    if not has_silu(self) or gate_up.dtype not in _FLOATS or gate_up.shape[-1] % 2:
        return _base_forward(self, x)  # type: ignore[no-any-return]
    return self.down_proj(ops.silu_and_mul(gate_up))  # type: ignore[no-any-return]


def gluact_mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """The gated SiLU MLP, down(silu(gate(x)) * up(x)), as one
    `fearless.ops.linear_gluact_linear(x, gate.weight, up.weight, down.weight)` (TileGym's
    fused MLP, its FusedOlmo3MLP's swap) where that op takes the call: SiLU, no biases, one
    float dtype, and no grad (it is forward only). Otherwise (training) `mlp_forward`: the
    projections as Hugging Face's and silu(gate) * up as `fearless.ops.swiglu`, which has a
    backward. In f16/bf16 the fused op rounds the gated product once (Hugging Face rounds the
    gate and up projections and the activation too): within a few units in the last place."""
    linears = (self.gate_proj, self.up_proj, self.down_proj)
    gate, up, down = weights = [p.weight for p in linears]
    takes = (
        has_silu(self)
        and all(getattr(p, "bias", None) is None for p in linears)
        and x.dtype in _FLOATS
        and all(w.dtype == x.dtype for w in weights)
        and not wants_grad(x, *weights)
    )
    if not takes:
        return mlp_forward(self, x)
    return ops.linear_gluact_linear(x, gate, up, down, act_type="silu")  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------- RoPE


@stand_in
def rope_function(
    original: Callable[..., Any], half: bool = False, partial: bool = False, wide: bool = False
) -> Callable[..., Any]:
    """A stand-in for a modeling module's `apply_rotary_pos_emb(q, k, cos, sin,
    unsqueeze_dim=1)` that rotates through `fearless.ops.rope`, and calls `original` for what
    that op does not take. `half`: the tables are (.., S, D / 2), one angle per pair (GPT-OSS's,
    which rotates the halves (x1, x2) to (x1 cos - x2 sin, x2 cos + x1 sin), Llama's rotation);
    they are repeated to rope's (.., S, D) shape, of which it reads the first D / 2 columns.
    `partial`: the tables may be narrower, (.., S, R) with R < D (Qwen3-Next's
    partial_rotary_factor, whose apply_rotary_pos_emb rotates the first R columns, Llama's way,
    and passes the rest): rope rotates those R columns (R a power of two). `wide`: the module
    computes `(q * cos + rotate_half(q) * sin).to(q.dtype)` (OLMo 2 and 3, whose tables stay
    f32): f32 tables with f16 or bf16 q and k take rope too, which rotates in f32 and rounds
    once to q's dtype, as that does; elsewhere the tables must be in q's dtype."""

    def apply_rotary_pos_emb(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        unsqueeze_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        d = q.shape[-1]
        r = d // 2 if half else d  # the tables' width
        if partial and cos.dim() == 3 and 2 <= cos.shape[-1] < d:
            d = r = cos.shape[-1]  # rotate the first columns only
        takes = (
            unsqueeze_dim == 1  # q and k as (batch, heads, seq, head_dim)
            and q.dim() == 4
            and k.dim() == 4
            and q.dtype in _FLOATS
            and q.dtype == k.dtype
            and cos.dtype == sin.dtype
            and (cos.dtype == q.dtype or (wide and cos.dtype == torch.float32))
            # the kernel's head_dim is a power of two, and the tables cover it whole (narrower
            # tables of partial rotary embeddings: Hugging Face's code unless `partial`)
            and d >= 2
            and d & (d - 1) == 0
            and cos.dim() == 3
            and cos.shape == sin.shape
            and cos.shape[1:] == (q.shape[2], r)
            and cos.shape[0] in (1, q.shape[0])
            and k.shape[0] == q.shape[0]
            and k.shape[2:] == q.shape[2:]
            # fearless's rope has no gradient for its tables (Hugging Face's are constants)
            and not cos.requires_grad
            and not sin.requires_grad
        )
        if not takes:
            return original(q, k, cos, sin, unsqueeze_dim)  # type: ignore[no-any-return]
        if half:
            cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        if d < q.shape[-1]:  # partial: rotate the first d columns, pass the rest
            qr, kr = ops.rope(q[..., :d].contiguous(), k[..., :d].contiguous(), cos, sin)
            return torch.cat((qr, q[..., d:]), -1), torch.cat((kr, k[..., d:]), -1)
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
            # training: rope would read the projections' sequence-major views in place and
            # give sequence-major outputs, which the training attention (heads-major: its kept
            # lse, its backward) copies, q, k and v, twice; dense q and k copy once, here
            q, k = q.contiguous(), k.contiguous()
        qr, kr = ops.rope(q, k, cos, sin)
        return qr, kr

    return apply_rotary_pos_emb


# ----------------------------------------------------------------------------------- attention


class AttentionCall(NamedTuple):
    """One call of a Hugging Face attention function (`sdpa_attention_forward`, a modeling
    module's `eager_attention_forward`) as the fearless paths below (and gemma.py's and
    sinks.py's) read it: the attention module; query, key and value as (batch, heads, seq,
    head_dim); the mask (None: none); the dropout; the scale (None: head_dim ** -0.5); and the
    other keyword arguments (`sliding_window`, `softcap`, `position_bias`, ...)."""

    module: torch.nn.Module
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None
    dropout: float
    scaling: float | None
    kwargs: dict[str, Any]

    def fall_back(self, original: Callable[..., Any], **named: Any) -> Any:
        """Hugging Face's own attention function `original` on this call (what a stand-in runs
        where no fearless path takes it), with `named`, the function's own keyword arguments
        besides dropout and scaling (`is_causal`, `softcap`)."""
        module, q, k, v, mask, dropout, scaling, kwargs = self
        return original(module, q, k, v, mask, dropout=dropout, scaling=scaling, **named, **kwargs)


@stand_in
def sdpa_dispatch(original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for Hugging Face's `sdpa` attention function: fearless's flash attention for
    the modules whose class carries `_fearless_attention`, `original` for every other module
    (other model types keep torch's SDPA) and for what the fearless op does not take."""

    def sdpa_attention_forward(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        dropout: float = 0.0,
        scaling: float | None = None,
        is_causal: bool | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        call = AttentionCall(module, query, key, value, attention_mask, dropout, scaling, kwargs)
        if getattr(module, "_fearless_attention", False):
            out = _attention(call, is_causal)
            if out is not None:
                return out, None
        return call.fall_back(original, is_causal=is_causal)  # type: ignore[no-any-return]

    return sdpa_attention_forward


CAUSAL_SKIP_TYPES: set[str] = set()  # the model types whose `sdpa` masks `sdpa_mask_dispatch` skips


@stand_in
def sdpa_mask_dispatch(original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for Hugging Face's `sdpa` mask function (masking_utils' `sdpa_mask`): for a
    model of a type in `CAUSAL_SKIP_TYPES`, no mask (None) where it would be the plain causal
    one over as many keys as queries with no padding mask, so that the attention runs causal,
    skipping the tiles past the diagonal, instead of reading a (L, L) mask; `original` for
    anything else. Hugging Face skips that mask itself, except while torch.compile traces
    before torch 2.14: there `is_torchdynamo_exporting()` is always true (pytorch#176499), so it
    builds the mask, and fearless's attention ran the masked form (1.6x the causal backward's
    time on an H100). The case needs no tensor read, so it is safe under tracing; what the
    exporting check guards (an exported graph replayed at other lengths) does not arise for a
    model whose queries and keys are one sequence."""
    from transformers.masking_utils import causal_mask_function

    def sdpa_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
        config = kwargs.get("config")
        q, kv = kwargs.get("q_length"), kwargs.get("kv_length")
        if (
            not args
            and getattr(config, "model_type", None) in CAUSAL_SKIP_TYPES
            and kwargs.get("allow_is_causal_skip", True)
            and kwargs.get("attention_mask") is None
            and kwargs.get("mask_function") is causal_mask_function
            and kwargs.get("local_size") is None
            and isinstance(q, int)
            and q == kv
            and kwargs.get("q_offset", 0) == 0
            and kwargs.get("kv_offset", 0) == 0
        ):
            return None
        return original(*args, **kwargs)  # type: ignore[no-any-return]

    return sdpa_mask


def _attention(call: AttentionCall, is_causal: bool | None) -> torch.Tensor | None:
    """Hugging Face's sdpa_attention_forward on `fearless.ops.scaled_dot_product_attention`:
    the output as (batch, seq, heads, head_dim), or None where the fearless op does not take
    the call (the caller then runs torch's)."""
    module, q, k, v, mask, dropout, scaling, kwargs = call
    if op := getattr(module, "_fearless_windowed", None):
        out = _windowed(op, call)
        if out is not None:
            return out
    if getattr(module, "_fearless_mla", False):
        out = _latent(call, is_causal)
        if out is not None:
            return out
    if dropout or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        return None  # no attention dropout, bias or soft-capping in the fearless kernel
    if not is_attention_layout(q, k, v):
        return None
    (b, h, lq, _), hk, s = q.shape, k.shape[1], k.shape[2]
    causal = lq > 1 and mask is None and (is_causal if is_causal is not None else module.is_causal)
    if causal and s > lq:
        # Hugging Face's own step (sdpa_attention_forward): a prefill into an empty static cache,
        # whose keys past the queries are masked anyway; the causal diagonal is upper-left.
        k, v, s = k[:, :, :lq], v[:, :, :lq], lq
    if mask is not None:
        dtypes_ok = mask.dtype in (torch.bool, q.dtype)
        shape_ok = mask.dim() == 4 and mask.shape[2:] == (lq, s) and mask.shape[0] in (1, b)
        if wants_grad(mask) or not dtypes_ok or not shape_ok or mask.shape[1] not in (1, h):
            # fearless's attention takes masks of (1 or B, 1 or H, L, S) only, with a backward
            # for q, k and v (a padded batch in training) but none for the mask itself
            return None
    out = ops.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=bool(causal), scale=scaling, enable_gqa=hk != h
    )
    return out.transpose(1, 2).contiguous()  # type: ignore[no-any-return]


def _windowed(op: str, call: AttentionCall) -> torch.Tensor | None:
    """A sliding-window layer on `fearless.ops.<op>`, `op` "gemma_attention" (Gemma's, which
    passes its soft cap) or "swa_attention" (Mistral's and the others': no cap), where that
    computes what Hugging Face's masked SDPA does: no dropout and a mask that is exactly the
    causal window (no padding), with or without grad (both ops' backward, through torch
    autograd, gives dq, dk, dv: training runs them too); None otherwise (the caller then tries
    the general path, which in training takes a masked call to torch's SDPA). Hugging Face's
    window W keeps keys j with i' - W < j <= i' (i' = i + S - L): swa_attention's window_size
    W exactly; gemma_attention's window_size w keeps |j - i'| <= w: w = W - 1. Both causal
    masks are bottom-right aligned, the same i'."""
    module, q, k, v, mask, dropout, scaling, kwargs = call
    window = kwargs.get("sliding_window")
    if not is_window(window, least=1):
        return None  # a full layer (no window, or Mistral's None)
    if dropout or kwargs.get("position_bias") is not None or not module.is_causal:
        return None
    cap = kwargs.get("softcap")
    if op == "gemma_attention" and window < 2:
        return None  # W = 1: gemma_attention's window_size 0 means no window
    if op == "swa_attention" and cap is not None:
        return None  # swa_attention has no soft cap
    if not is_attention_layout(q, k, v):
        return None
    lq, s = q.shape[2], k.shape[2]
    if mask is None or not is_causal_mask(mask, lq, s, window):
        return None  # no mask (HF skipped it: the generic causal path), or padding
    if op == "swa_attention":
        out = ops.swa_attention(q, k, v, window, scaling)
    else:
        out = ops.gemma_attention(q, k, v, scaling, window_size=window - 1, soft_cap=cap)
    return out.transpose(1, 2).contiguous()  # type: ignore[no-any-return]


def _latent(call: AttentionCall, is_causal: bool | None) -> torch.Tensor | None:
    """DeepSeek's multi-head latent attention (V2's, V3's) on `fearless.ops.mla`. Hugging Face
    expands the latent cache into per-head keys and values before its attention call, so this
    is softmax(q k^T * scaling + mask) v of q, k (B, H, L or S, D_qk = nope + rope) and v
    (B, H, S, D_v), D_v < D_qk (192 and 128 in V3), which fearless's flash attention does not
    take (one head dim for q, k and v). The scores split over any column, q k^T = q[:D_v]
    k[:D_v]^T + q[D_v:] k[D_v:]^T: mla's latent part (D = D_v, v's dim) and its RoPE part
    (D_PE = D_qk - D_v); where D_v is the module's qk_nope_head_dim that part is the rotated
    key every head shares (expand_kv's), passed once (H_pe = 1, TileGym's layout). mla is
    forward only and has no mask, and its causal diagonal is top-left: it takes no grad, no
    dropout, and a prefill (L = S, causal) or one decoded query over its cache (L = 1), with
    no mask or the exact causal mask (no padding); None otherwise (the caller then tries the
    general path, which takes D_v == D_qk in training, then Hugging Face's)."""
    module, q, k, v, mask, dropout, scaling, kwargs = call
    if dropout or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        return None
    if not (q.dim() == k.dim() == v.dim() == 4 and q.dtype in _FLOATS):
        return None
    (b, h, lq, dqk), (bk, hk, s, _), dv = q.shape, k.shape, v.shape[-1]
    if not (q.dtype == k.dtype == v.dtype and k.shape[-1] == dqk and v.shape[:3] == k.shape[:3]):
        return None
    if bk != b or not hk or h % hk or not 1 <= dv <= dqk or wants_grad(q, k, v):
        return None
    if mask is None:
        causal = lq > 1 and bool(is_causal if is_causal is not None else module.is_causal)
        if causal and s > lq:  # a prefill into an empty static cache (as `_attention`)
            k, v, s = k[:, :, :lq], v[:, :, :lq], lq
    elif not is_causal_mask(mask, lq, s, None):
        return None  # padding, or another pattern
    else:
        causal = lq > 1
    if causal and s != lq:
        return None  # a chunk of queries over a cache: bottom-right causal, not mla's
    shared = getattr(module, "qk_nope_head_dim", None) == dv
    kpe = k[:, :1, :, dv:] if shared else k[:, :, :, dv:]
    out = ops.mla(
        q[..., :dv].contiguous(),
        k[..., :dv].contiguous(),
        v.contiguous(),
        q[..., dv:].contiguous(),
        kpe.contiguous(),
        causal,
        scaling,
    )
    return out.transpose(1, 2).contiguous()  # type: ignore[no-any-return]
