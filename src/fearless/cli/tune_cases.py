"""`fearless tune`'s shape lists: reading and checking a case file, and the built-in cases, the
dimensions of real models grouped by model (MODEL_CASES; DEFAULT_CASES is their union).

Case formats. JSON: a list of {"op": ..., "dtype": ..., "shapes": ..., "model": optional tag}.
"shapes" is a list of shapes for the operators of plain tensors (`[[128, 4096], [4096, 4096]]`
for matmul) and a dict of named extents for the others (`{"batch": 1, "q_heads": 32,
"kv_heads": 8, "seq": 1024, "head_dim": 128}` for fmha; each operator's names are in
cli/tune_ops.py's OPS: `Op.fields` required, `Op.optional` with their defaults). Text: one case
a line, `matmul bfloat16 128x4096 4096x4096` or `fmha bfloat16 batch=1 q_heads=32 kv_heads=8
seq=1024 head_dim=128` (`#` starts a comment).

The built-in cases (bf16, as the models ship) are each model's GEMMs (fused QKV, output,
gate-and-up, down, router, and the LM head at decode), norms, gated activation, attention
(prefill at 1024 and 8192 tokens, decode of batch 1 and 16 over 1024- and 8192-key caches), MoE
and loss, and the backward of the norms, the gated activation, the loss and attention at their
forward's shapes (what training's autograd runs; the MoE down projection's activation gradient,
moe_actgrad_bwd, at fused_moe's and at 512 tokens), at TOKENS tokens (1 and 16: decode; 1024
and 8192: prefill). Tuner keys hold the token count by size class (a power of two), so 1 / 16 /
1024 / 8192 are four keys and the counts between them reuse the nearest class's winner;
duplicates across models are run once.

How long: `len(DEFAULT_CASES)` is 389. Each case tunes one or two keys; per key the tuner
compiles its 2 to 22 configurations (after pruning) on up to 16 worker threads (tileiras about
0.25 s a kernel, docs/design.md) and times each for about 50 ms (autotune_timing.BUDGET_S), so
about 1 to 2 s a key and 2 to 4 s a case with input set-up: 389 cases are about 13 to 26
minutes on one H200, plus, per MoE model, moe_actgrad_bwd's (128, 128, 64) configuration (37 s
of tileiras on a CPU at Qwen3-30B-A3B's I; its other three, 2 to 4 s). The largest inputs
(DeepSeek-V3's 256 experts in bf16, 22 GB of weights) fit one GPU; `--models` and `--ops` run a
part.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .tune_ops import OPS, shapes_wanted, tiny_case

DTYPES = ("float32", "float16", "bfloat16")
TOKENS = (1, 16, 1024, 8192)
DECODE = (1, 16)
PREFILL = (1024, 8192)
BF16 = "bfloat16"
LCE = "fused_linear_cross_entropy"
# moe_actgrad_bwd's key holds its tokens * top_k rows by size class: at top 8, 16 and 1024
# tokens are 128 and 8192 rows, five classes apart; 512 tokens fill the class of 2049 to 4096
# rows between (the tuning family's near spec, family_tuning.py: 300 tokens, top 8).
MOE_BWD_EXTRA = (512,)


# ---------------------------------------------------------------------------- reading


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a shape list file (ValueError naming the line or item that is wrong)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        items = json.loads(text)
        return [check_case(item, f"item {n}") for n, item in enumerate(items)]
    cases = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3:
            raise ValueError(
                f"line {n}: write `op dtype shape...`, e.g. `softmax float16 128x4096`, or "
                "`op dtype name=extent...`, e.g. `fmha bfloat16 batch=1 q_heads=32 ...`"
            )
        shapes: Any
        try:
            if all("=" in w for w in words[2:]):
                shapes = {k: int(v) for k, v in (w.split("=", 1) for w in words[2:])}
            else:
                shapes = [[int(d) for d in w.lower().split("x")] for w in words[2:]]
        except ValueError:
            raise ValueError(
                f"line {n}: a shape is extents joined by x, e.g. 128x4096; a named extent is "
                "name=integer, e.g. seq=1024 (one form a line)"
            ) from None
        cases.append(check_case({"op": words[0], "dtype": words[1], "shapes": shapes}, f"line {n}"))
    return cases


def check_case(item: Any, where: str) -> dict[str, Any]:
    """`item` if it is a well-formed case of a known operator, else a ValueError."""
    name = item.get("op") if isinstance(item, dict) else None
    if not isinstance(name, str) or name not in OPS:
        raise ValueError(f"{where}: `op` must be one of {', '.join(OPS)}")
    op = OPS[item["op"]]
    if item.get("dtype") not in DTYPES:
        raise ValueError(f"{where}: `dtype` must be one of {', '.join(DTYPES)}")
    shapes = item.get("shapes")
    if not op.fields:
        if not isinstance(shapes, list) or not all(
            isinstance(s, list) and all(_int(d) and d > 0 for d in s) for s in shapes
        ):
            raise ValueError(
                f"{where}: `shapes` of {item['op']} must be a list of shapes (lists of positive "
                "ints)"
            )
        wanted = shapes_wanted(name, len(shapes))
        if wanted is not None:
            example = describe(tiny_case(name, item["dtype"]))
            raise ValueError(
                f"{where}: {name} takes {wanted}, got {len(shapes)} (e.g. `{example}`)"
            )
        return item
    names = (*op.fields, *op.optional)
    if not isinstance(shapes, dict):
        raise ValueError(
            f"{where}: `shapes` of {item['op']} must name its extents: {', '.join(names)}"
        )
    missing = [f for f in op.fields if f not in shapes]
    unknown = [f for f in shapes if f not in names]
    if missing or unknown:
        said = [f"missing {', '.join(missing)}"] if missing else []
        said += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise ValueError(
            f"{where}: {item['op']}'s extents are {', '.join(op.fields)} (and optionally "
            f"{', '.join(op.optional) or 'nothing else'}): {'; '.join(said)}"
        )
    for k, v in shapes.items():
        if not _int(v) or v < (1 if k in op.fields else 0):
            raise ValueError(f"{where}: {item['op']}'s `{k}` must be a positive int, got {v!r}")
    return item


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def describe(case: dict[str, Any]) -> str:
    """A case as one line of the text format."""
    shapes = case["shapes"]
    if isinstance(shapes, dict):
        words = [f"{k}={v}" for k, v in shapes.items()]
    else:
        words = ["x".join(map(str, s)) for s in shapes]
    return " ".join([case["op"], case["dtype"], *words])


# ---------------------------------------------------------------------------- model cases


def _case(op: str, shapes: Any, model: str) -> dict[str, Any]:
    return {"op": op, "dtype": BF16, "shapes": shapes, "model": model}


def _gemms(model: str, hidden: int, kn: Iterable[tuple[int, int]], vocab: int) -> list[Any]:
    """matmul at every token count for each (K, N), the LM head at decode, and the loss."""
    out = [_case("matmul", [[m, k], [k, n]], model) for k, n in kn for m in TOKENS]
    out += [_case("matmul", [[m, hidden], [hidden, vocab]], model) for m in DECODE]
    lce = {"tokens": 8192, "hidden": hidden, "vocab": vocab}
    loss = [_case(op, lce, model) for op in ("fused_linear_cross_entropy", f"{LCE}_backward")]
    return [*out, *loss]


def _rms_norms(model: str, shapes: Iterable[list[int]]) -> list[Any]:
    """rms_norm and its backward at each (rows, width)."""
    return [_case(op, [s], model) for s in shapes for op in ("rms_norm", "rms_norm_backward")]


def _dense(
    model: str,
    hidden: int,
    heads: tuple[int, int, int],
    inter: int,
    vocab: int,
    qk_norm: bool = False,
    act: str = "silu_and_mul",
) -> list[Any]:
    """A dense decoder layer's GEMMs, norms and gated activation."""
    q, kv, d = heads
    kn = ((hidden, (q + 2 * kv) * d), (q * d, hidden), (hidden, 2 * inter), (inter, hidden))
    out = _gemms(model, hidden, kn, vocab)
    out += _rms_norms(model, ([m, hidden] for m in TOKENS))
    out += [_case("fused_add_rms_norm", [[m, hidden]] * 2, model) for m in TOKENS]
    out += [_case(a, [[m, 2 * inter]], model) for m in TOKENS for a in (act, f"{act}_backward")]
    if qk_norm:
        out += _rms_norms(model, ([m * h, d] for m in TOKENS for h in (q, kv)))
    if act == "silu_and_mul":
        mlp = [{"tokens": m, "hidden": hidden, "inter": inter} for m in DECODE]
        out += [_case("linear_gluact_linear", s, model) for s in mlp]
    return out


def _gqa(model: str, q: int, kv: int, d: int, kvcache: bool = True) -> list[Any]:
    """Causal prefill (fmha) and one-token decode (fmha_decode, flash_attn_with_kvcache)."""
    heads = {"q_heads": q, "kv_heads": kv, "head_dim": d}
    out = [_case("fmha", {"batch": 1, **heads, "seq": s}, model) for s in PREFILL]
    out += [  # training: the backward at the prefill's shapes (causal, torch's diagonal)
        _case("scaled_dot_product_attention_backward", {"batch": 1, **heads, "seq": s}, model)
        for s in PREFILL
    ]
    out += [
        _case("fmha_decode", {"batch": b, **heads, "kv_seq": s}, model)
        for b in DECODE
        for s in PREFILL
    ]
    if kvcache:
        for b, page in ((1, 0), (16, 16)):
            s = {"batch": b, **heads, "kv_seq": 8192, "page_size": page}
            out.append(_case("flash_attn_with_kvcache", s, model))
    return out


def _windowed(model: str, op: str, heads: dict[str, int], window: int) -> list[Any]:
    """`op`'s prefill cases and `op`_decode's (over 8192 keys) of a model whose layers
    alternate a `window`-key window (local layers) and none (global ones)."""
    out = []
    for w in (window, 0):
        out += [_case(op, {"batch": 1, **heads, "seq": s, "window": w}, model) for s in PREFILL]
        out += [
            _case(f"{op}_decode", {"batch": b, **heads, "kv_seq": 8192, "window": w}, model)
            for b in DECODE
        ]
    return out


def _moe(model: str, hidden: int, inter: int, experts: int, top_k: int) -> list[Any]:
    """The router, fused_moe at every token count, and the down projection's activation
    gradient (moe_actgrad_bwd, SwiGLU) at those and at MOE_BWD_EXTRA tokens."""
    dims = {"hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k}
    router = [_case("matmul", [[m, hidden], [hidden, experts]], model) for m in TOKENS]
    out = [*router, *(_case("fused_moe", {"tokens": m, **dims}, model) for m in TOKENS)]
    bwd = sorted((*TOKENS, *MOE_BWD_EXTRA))
    return out + [_case("moe_actgrad_bwd", {"tokens": m, **dims}, model) for m in bwd]


def _llama3_8b() -> list[Any]:
    m = "llama3-8b"
    return _dense(m, 4096, (32, 8, 128), 14336, 128256) + _gqa(m, 32, 8, 128)


def _qwen3_8b() -> list[Any]:
    m = "qwen3-8b"
    return _dense(m, 4096, (32, 8, 128), 12288, 151936, qk_norm=True) + _gqa(m, 32, 8, 128)


def _mistral_7b() -> list[Any]:
    """Mistral-7B v0.1: Llama-3-8B's layer with a 4096-token sliding window."""
    m = "mistral-7b"
    swa = [
        _case("swa_attention", {"batch": 1, "q_heads": 32, "kv_heads": 8, "seq": s,
                                "head_dim": 128, "window": 4096}, m)
        for s in PREFILL
    ]  # fmt: skip
    return _dense(m, 4096, (32, 8, 128), 14336, 32000) + swa + _gqa(m, 32, 8, 128, False)


def _gemma3_12b() -> list[Any]:
    """Gemma-3-12B: head_dim 256, local layers of a 1024-key window (TileGym's window_size
    1023: the query and the 1023 keys before it), no soft cap, GeGLU (tanh)."""
    m = "gemma3-12b"
    out = _dense(m, 3840, (16, 8, 256), 15360, 262208, qk_norm=True, act="geglu")
    heads = {"q_heads": 16, "kv_heads": 8, "head_dim": 256}
    return out + _windowed(m, "gemma_attention", heads, 1023)


def _gpt_oss_20b() -> list[Any]:
    """GPT-OSS-20B: 64 query heads over 8 KV heads of 64, sinks, every other layer a
    128-token window; 32 experts of 2880, top 4."""
    m = "gpt-oss-20b"
    out = _gemms(m, 2880, ((2880, 5120), (4096, 2880)), 201088)
    out += _rms_norms(m, ([t, 2880] for t in TOKENS))
    out += _moe(m, 2880, 2880, 32, 4)
    heads = {"q_heads": 64, "kv_heads": 8, "head_dim": 64}
    return out + _windowed(m, "attention_sink", heads, 128)


def _qwen3_30b_a3b() -> list[Any]:
    """Qwen3-30B-A3B: hidden 2048, 32 query heads over 4, 128 experts of 768, top 8."""
    m = "qwen3-30b-a3b"
    out = _gemms(m, 2048, ((2048, 5120), (4096, 2048)), 151936)
    out += _rms_norms(m, ([t, 2048] for t in TOKENS))
    out += _rms_norms(m, ([t * h, 128] for t in TOKENS for h in (32, 4)))
    return out + _moe(m, 2048, 768, 128, 8) + _gqa(m, 32, 4, 128, False)


def _deepseek_v3() -> list[Any]:
    """DeepSeek-V3: MLA (128 heads, 128 + 64 rope dims, a 512-wide latent cache), its
    block-scaled fp8 projections (N, K) and its 256 experts of 2048, top 8 (bf16 here)."""
    m = "deepseek-v3"
    out = [
        _case("mla", {"batch": 1, "heads": 128, "seq": s, "head_dim": 128, "rope_dim": 64}, m)
        for s in PREFILL
    ]
    out += [
        _case("mla_decoding",
              {"batch": b, "heads": 128, "kv_seq": s, "kv_rank": 512, "rope_dim": 64}, m)
        for b in DECODE
        for s in PREFILL
    ]  # fmt: skip
    nk = ((1536, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384),
          (36864, 7168), (7168, 18432))  # fmt: skip
    out += [
        _case("w8a8_block_fp8_matmul", {"m": t, "n": n, "k": k}, m) for n, k in nk for t in TOKENS
    ]
    out += _rms_norms(m, ([t, h] for h in (7168, 1536, 512) for t in TOKENS))
    out += _moe(m, 7168, 2048, 256, 8)
    return out + [_case("matmul", [[t, 7168], [7168, 129280]], m) for t in DECODE]


def _qwen3_next_80b() -> list[Any]:
    """Qwen3-Next-80B-A3B: gated delta rule layers (16 query/key heads, 32 value heads, 128
    dims), full attention of 16 heads over 2 of 256, 512 experts of 512, top 10."""
    m = "qwen3-next-80b"
    delta = {"heads": 16, "v_heads": 32, "k_dim": 128, "v_dim": 128}
    out = [_case("chunk_gated_delta_rule", {"batch": 1, "seq": s, **delta}, m) for s in PREFILL]
    out += [_case("recurrent_gated_delta_rule", {"batch": b, "seq": 1, **delta}, m) for b in DECODE]
    return out + _moe(m, 2048, 512, 512, 10) + _gqa(m, 16, 2, 256, False)


def _common() -> list[Any]:
    """The row and elementwise operators no model above calls, at hidden 4096, and group_gemm."""
    m = "common"
    ops = ("softmax", "layer_norm", "persistent_layer_norm", "gelu", "relu", "dropout")
    out = [_case(op, [[t, 4096]], m) for op in ops for t in (16, 1024, 8192)]
    out += [
        _case(f"{op}_backward", [[t, 4096]], m) for op in ("gelu", "relu") for t in (1024, 8192)
    ]
    out += [_case("softmax_backward", [[t, 4096]] * 2, m) for t in (16, 1024, 8192)]
    out += [_case("layer_norm_backward", [[t, 4096]], m) for t in (16, 1024, 8192)]
    out += [_case("swiglu", [[t, 14336]] * 2, m) for t in (16, 1024, 8192)]
    out += [_case("swiglu_backward", [[t, 14336]] * 3, m) for t in (16, 1024, 8192)]
    out += [_case("transpose", [[t, 4096]], m) for t in (1024, 8192)]
    for s in (512, 2048, 8192):
        out.append(_case("scaled_dot_product_attention", [[1, 32, s, 128]] * 3, m))
    # group_gemm's group kernel takes groups of at most a wave of (128, 128) tiles each
    # (ops/functional.py): 4 and 16 square groups at 512 and 1024, as TileGym's benchmark grid
    out += [_case("group_gemm", [[n, n]] * (2 * g), m) for g in (4, 16) for n in (512, 1024)]
    return out


MODEL_CASES: dict[str, list[dict[str, Any]]] = {
    "llama3-8b": _llama3_8b(),
    "qwen3-8b": _qwen3_8b(),
    "mistral-7b": _mistral_7b(),
    "gemma3-12b": _gemma3_12b(),
    "gpt-oss-20b": _gpt_oss_20b(),
    "qwen3-30b-a3b": _qwen3_30b_a3b(),
    "deepseek-v3": _deepseek_v3(),
    "qwen3-next-80b": _qwen3_next_80b(),
    "common": _common(),
}


def unique(cases: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`cases` without repeats of one (op, dtype, shapes), the first kept."""
    seen: set[str] = set()
    out = []
    for c in cases:
        key = json.dumps([c["op"], c["dtype"], c["shapes"]], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def model_cases(models: Iterable[str]) -> list[dict[str, Any]]:
    """The built-in cases of these model groups, each (op, dtype, shapes) once."""
    return unique(c for m in models for c in MODEL_CASES[m])


DEFAULT_CASES = model_cases(MODEL_CASES)
