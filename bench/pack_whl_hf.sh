#!/usr/bin/env bash
# Packs .whl-hf/: what the transformers GPU tests and `fearless bench --cases models` need on the
# GPU machine beside torch, for its Python 3.12: Hugging Face transformers trimmed to the model
# types fearless.transformers patches (transformers-trimmed.tar.xz: 1.4 MB instead of a 13.8 MB
# wheel; `auto` kept, every other model folder dropped), huggingface_hub, safetensors,
# tokenizers, regex, and the peers TileGym and Liger-Kernel (8.3 MB in all). With
# .tiletools-slim and .whl that is about 65 MB of the 64 MiB a call carries; leave .before out
# of such a call. bench/h200_run.sh installs and unpacks it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
version=${TRANSFORMERS_VERSION:-5.25.0}
keep="auto llama mistral qwen2 qwen3 qwen3_moe gemma gemma2 gemma3 siglip gpt_oss olmoe olmo2 olmo3 qwen3_next deepseek_v2 deepseek_v3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip=".venv/bin/pip"
$pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$tmp" "transformers==$version" huggingface_hub safetensors tokenizers regex liger-kernel tilegym==1.5.1
rm -rf .whl-hf && mkdir -p .whl-hf "$tmp/site"
(cd "$tmp/site" && unzip -q "$tmp"/transformers-*.whl)
for d in "$tmp"/site/transformers/models/*/; do
  case " $keep " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
done
rm -f "$tmp"/site/transformers-*.dist-info/RECORD
tar -C "$tmp/site" -cJf .whl-hf/transformers-trimmed.tar.xz transformers "$(cd "$tmp/site" && ls -d transformers-*.dist-info)"
# TileGym's own tests (tests/ops, run by bench/tilegym_tests/run.sh with fearless as its cuTile)
git -C "${TILEGYM_MIRROR:-/work/.mirror/NVIDIA+TileGym/repo}" archive HEAD tests | xz -9 > .whl-hf/tilegym-tests.tar.xz
find "$tmp" -maxdepth 1 -name '*.whl' ! -name 'transformers-*' -exec cp {} .whl-hf/ \;
du -sh .whl-hf
