"""Generate with a Hugging Face causal LM on fearless kernels and check it against Hugging Face.

The model is a checkpoint (`--model`, a local folder or a Hub id: transformers loads it) or a
tiny random model of any model type fearless.transformers patches (`--random TYPE`, built in
code, no download). Greedy generation runs twice from one prompt: as Hugging Face runs the
model, then on a copy patched by `fearless.transformers.apply`. The script prints both token
streams (and, on a GPU, their speed); it ends with "ok" only if the tokens are the same, else
it exits 1.

    python examples/generate.py --random mixtral              # the simulator (CPU), toy size
    python examples/generate.py --random qwen3_5_moe --tokens 8
    python examples/generate.py --device cuda --dtype bf16 --model Qwen/Qwen3-0.6B
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import fearless as fl
from fearless import transformers as flt

# A tiny model's sizes; a configuration takes those of its keys it has (the experts' only in a
# mixture of experts, each under its model's own name)
TINY: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def random_model(model_type: str) -> Any:
    """A tiny random causal LM of `model_type` (a multimodal family's: its text model), f32; a
    hybrid model's two layers are one of linear attention and one of full attention."""
    # Gemma 3's, Qwen3.5's: the language model alone (a text model's config is its own)
    text = AutoConfig.for_model(model_type).get_text_config()
    known = text.to_dict()
    sizes = {k: v for k, v in TINY.items() if k in known}
    if "qk_rope_head_dim" in known:  # latent attention: its head dims are the qk_* and v ones,
        sizes.pop("head_dim", None)  # and as many key and value heads as query heads
        sizes["num_key_value_heads"] = sizes["num_attention_heads"]
    if "linear_attention" in (known.get("layer_types") or ()):
        sizes["layer_types"] = ["linear_attention", "full_attention"]
    config = AutoConfig.for_model(text.model_type, **sizes)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config)


def generate(model: Any, ids: torch.Tensor, tokens: int) -> tuple[torch.Tensor, float]:
    """Greedy generation of `tokens` new tokens after `ids`; (the new tokens, seconds)."""
    with torch.no_grad():
        model.generate(ids, max_new_tokens=1, do_sample=False)  # compiles, tunes, warms up
        if ids.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        if ids.is_cuda:
            torch.cuda.synchronize()
    return out[:, ids.shape[1] :], time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a checkpoint folder or Hub id (transformers loads it)")
    which.add_argument(
        "--random", metavar="TYPE", choices=flt.MODEL_TYPES, help="a tiny random model"
    )
    parser.add_argument("--device", default="cpu", help="cpu (the simulator) or cuda")
    parser.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    parser.add_argument("--prompt", type=int, default=12, help="prompt length, random tokens")
    parser.add_argument("--tokens", type=int, default=6, help="new tokens to generate")
    args = parser.parse_args()
    if args.device == "cpu":
        fl.set_target("sim")
        # the simulator's timings say nothing of a GPU's: each tuned op takes its first
        # configuration
        os.environ.setdefault("FEARLESS_AUTOTUNE", "0")
    if args.random:
        model = random_model(args.random)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="sdpa")
    model = model.to(args.device, DTYPES[args.dtype]).eval()
    torch.manual_seed(1)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(3, vocab, (1, args.prompt), device=args.device)
    print(f"{model.config.model_type} ({transformers.__version__}), {args.dtype} on {args.device}")
    want, t_hf = generate(model, ids, args.tokens)
    patched = flt.apply(copy.deepcopy(model))
    got, t_fl = generate(patched, ids, args.tokens)
    speed = args.device != "cpu"  # the simulator interprets the kernels: no speed to speak of
    print(
        f"Hugging Face: {want[0].tolist()}"
        + (f"  ({args.tokens / t_hf:.1f} tokens/s)" if speed else "")
    )
    print(
        f"fearless:     {got[0].tolist()}"
        + (f"  ({args.tokens / t_fl:.1f} tokens/s)" if speed else "")
    )
    if not torch.equal(got, want):
        print("MISMATCH: the patched model generated other tokens")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
