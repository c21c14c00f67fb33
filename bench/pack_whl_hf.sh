#!/usr/bin/env bash
# Packs .whl-hf/: what the transformers GPU tests and `fearless bench --cases models` need on the
# GPU machine beside its image (which has torch, huggingface_hub 1.x, safetensors, tokenizers and
# regex: KINDS.md's package list), for its Python 3.12: Hugging Face transformers trimmed to the
# model types fearless.transformers patches (its patch.py table, phi3 among them; transformers-trimmed.tar.xz: 1.4 MB instead of a
# 13.8 MB wheel; `auto` kept, and llava and mixtral, which Liger's patch modules import; every
# other model folder dropped) and the peer Liger-Kernel (2.3 MB in all). TileGym's wheel is
# .whl-tg's. With .tiletools-slim, .whl and the tree less bench/results that is 63.9 of the
# 64 MiB a call carries (.whl-tg's 0.7 MB more does not fit: TileGym's models rows need a call
# of their own). The newest huggingface_hub (2.x) needs httpx2, which the image lacks: the
# image's 1.x (1.33) is used, so transformers is 5.24, the last that takes huggingface_hub 1.31
# or later (5.25 asks for 2.4; session 25's models call failed on it). bench/h200_run.sh
# installs and unpacks it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
version=${TRANSFORMERS_VERSION:-5.24.0}
keep="auto llama llava mistral mixtral qwen2 qwen3 qwen3_moe gemma gemma2 gemma3 siglip gpt_oss olmoe olmo2 olmo3 phi3 qwen3_next deepseek_v2 deepseek_v3 smollm3 granite qwen3_5 qwen3_5_moe qwen2_moe glm4_moe"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip=".venv/bin/pip"
$pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$tmp" "transformers==$version" liger-kernel
rm -rf .whl-hf && mkdir -p .whl-hf "$tmp/site"
(cd "$tmp/site" && unzip -q "$tmp"/transformers-*.whl)
for d in "$tmp"/site/transformers/models/*/; do
  case " $keep " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
done
rm -f "$tmp"/site/transformers-*.dist-info/RECORD
tar -C "$tmp/site" -cJf .whl-hf/transformers-trimmed.tar.xz transformers "$(cd "$tmp/site" && ls -d transformers-*.dist-info)"
# TileGym's own tests (tests/ops, run by bench/tilegym_tests/run.sh with fearless as its cuTile),
# where a TileGym mirror is here (the `fetch` tool's copy of NVIDIA/TileGym)
mirror=${TILEGYM_MIRROR:-/work/.mirror/NVIDIA+TileGym/repo}
if [ -d "$mirror" ]; then
  git -C "$mirror" archive HEAD tests | xz -9 > .whl-hf/tilegym-tests.tar.xz
fi
find "$tmp" -maxdepth 1 -name '*.whl' ! -name 'transformers-*' -exec cp {} .whl-hf/ \;
du -sh .whl-hf
