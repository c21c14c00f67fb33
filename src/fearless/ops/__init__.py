"""fearless.ops: TileGym's operator set with torch.nn.functional's signatures, on fearless
Tile kernels (issue 13, part 1: softmax, rms_norm, layer_norm, matmul, bmm, group_gemm, relu, gelu,
silu_and_mul, swiglu, geglu, dropout, rope, transpose; and scaled_dot_product_attention, its
backward through torch autograd with or without a mask; issue 35: TileGym's fmha, swa_attention, gemma_attention and gemma_attention_decode,
forward only; TileGym's attention_sink (with its backward through torch autograd) and
attention_sink_decode, GPT-OSS's attention with sinks; TileGym's fmha_varlen (per-sequence
lengths in a padded batch, with its backward through torch autograd) and fmha_decode;
flash-attn's flash_attn_with_kvcache over a contiguous or paged KV cache, forward only; issue
36: fused_linear_cross_entropy, Liger's chunked loss with its gradients; Liger's and vLLM's
fused_add_rms_norm (the residual add and the norm in one pass, with autograd); TileGym's
moe_align_block_size and fused_moe (with its backward through torch autograd) and
moe_actgrad_bwd (the down-projection's activation-gradient backward, in place); DeepSeek-V3's block-scaled fp8 GEMM
w8a8_block_fp8_matmul, forward only; DeepSeek's multi-head latent attention, TileGym's mla,
mla_decoding and mla_decoding_split_kv, and sparse_mla (top-k key indices), forward only;
Qwen3-Next's gated delta rule, recurrent_gated_delta_rule and chunk_gated_delta_rule, forward
only; TileGym's
splitk_reduce, the merge of split-KV decode partials, in place, forward only; TileGym's
persistent_layer_norm, forward only; Mamba-2's chunked SSD scan, mamba2_chunk_forward and
mamba2_chunk_backward, with autograd; TileGym's experimental mHC operators
mhc_gemm_rms_scale, mhc_apply_residual and mhc_sinkhorn (in place), forward only; TileGym's
fused GLU MLP linear_gluact_linear, forward only; TileGym's experimental NVFP4 quantization
nvfp4_quantize, forward only; TileGym's fmha_variant (layouts, per-sequence lengths, window,
vector / matrix / ALiBi bias, random mask, dropout), forward only).

    from fearless import ops
    y = ops.softmax(x)              # x: a torch tensor, an fl.Tensor or a NumPy array
    h = ops.silu_and_mul(ops.matmul(a, w))

Each operator returns the kind of tensor it was given and runs an autotuned kernel (the first
call for a new shape tunes, `FEARLESS_AUTOTUNE=0` takes the first configuration that runs). With torch
loaded, each is also `torch.ops.fearless.<name>` (ops/torch_ops.py: fake kernels for
torch.compile and torch.export, autograd whose backward runs fearless kernels); a call whose
inputs require grad, or made while torch.compile traces, goes through it (ops/_route.py). The
kernels are in ops/kernels_*.py (examples/tile_kernels.py shows the row and GEMM ones).
"""

from . import torch_library  # noqa: F401  (sets up torch.ops.fearless)
from .add_norm import fused_add_rms_norm
from .attention import scaled_dot_product_attention
from .attention_flash import flash_attn_func
from .attention_fmha_variant import fmha_variant
from .attention_mla import mla, mla_decoding, mla_decoding_split_kv
from .attention_mla_sparse import sparse_mla
from .attention_sinks import attention_sink, attention_sink_decode
from .attention_splitk import splitk_reduce
from .attention_variants import fmha, gemma_attention, gemma_attention_decode, swa_attention
from .attention_varlen import fmha_decode, fmha_varlen
from .delta_rule import chunk_gated_delta_rule, recurrent_gated_delta_rule
from .fp8_block_matmul import w8a8_block_fp8_matmul
from .functional import (
    bmm,
    dropout,
    geglu,
    gelu,
    group_gemm,
    layer_norm,
    matmul,
    relu,
    rms_norm,
    rope,
    silu_and_mul,
    softmax,
    swiglu,
    transpose,
)
from .kvcache_attention import flash_attn_with_kvcache
from .linear_cross_entropy import fused_linear_cross_entropy
from .linear_gluact import linear_gluact_linear
from .mamba2 import mamba2_chunk_backward, mamba2_chunk_forward
from .mhc import mhc_apply_residual, mhc_gemm_rms_scale, mhc_sinkhorn
from .moe import fused_moe, moe_align_block_size
from .moe_actgrad import moe_actgrad_bwd
from .nvfp4 import nvfp4_quantize
from .persistent_norm import persistent_layer_norm

__all__ = [
    "attention_sink",
    "attention_sink_decode",
    "bmm",
    "chunk_gated_delta_rule",
    "dropout",
    "flash_attn_func",
    "flash_attn_with_kvcache",
    "fmha",
    "fmha_decode",
    "fmha_variant",
    "fmha_varlen",
    "fused_add_rms_norm",
    "fused_linear_cross_entropy",
    "fused_moe",
    "geglu",
    "gelu",
    "gemma_attention",
    "gemma_attention_decode",
    "group_gemm",
    "layer_norm",
    "linear_gluact_linear",
    "mamba2_chunk_backward",
    "mamba2_chunk_forward",
    "matmul",
    "mhc_apply_residual",
    "mhc_gemm_rms_scale",
    "mhc_sinkhorn",
    "mla",
    "mla_decoding",
    "mla_decoding_split_kv",
    "moe_actgrad_bwd",
    "moe_align_block_size",
    "nvfp4_quantize",
    "persistent_layer_norm",
    "recurrent_gated_delta_rule",
    "relu",
    "rms_norm",
    "rope",
    "scaled_dot_product_attention",
    "silu_and_mul",
    "softmax",
    "sparse_mla",
    "splitk_reduce",
    "swa_attention",
    "swiglu",
    "transpose",
    "w8a8_block_fp8_matmul",
]
