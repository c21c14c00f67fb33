#!/usr/bin/env bash
# Packs tileiras, ptxas, libnvvm and libdevice from .venv into .tiletools-slim/ (no
# tileirdisasm), small enough that it, .whl and the tree travel together to the GPU machine
# (64 MiB in all). The 13.5 wheels pack to 62.2 MB with ../shared/device/pack-tile-tools.sh's
# `xz -T0 -9` (too big beside the tree) and to 58.7 MB here: one thread and a 256 MiB
# dictionary (about 3 minutes). On the machine: `source .tiletools-slim/unpack.sh`.
# .whl: `pip download --no-deps --only-binary=:all: --python-version 3.12 --platform
# manylinux2014_x86_64 cuda-tile -d .whl`, and tilegym's wheel unzipped into .whl/tilegym.tar.xz.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
root=$(.venv/bin/python -c "import nvidia, pathlib; print(pathlib.Path(list(nvidia.__path__)[0]).parent)")
mkdir -p .tiletools-slim
grep -qx '/.tiletools-slim/' .git/info/exclude || echo '/.tiletools-slim/' >> .git/info/exclude
tar -C "$root" -cf - nvidia/cu13/bin/tileiras nvidia/cu13/bin/ptxas nvidia/cu13/lib/libnvvm.so.4 \
    nvidia/cu13/nvvm/libdevice | xz -9e --lzma2=dict=256MiB -T1 > .tiletools-slim/tiletools.tar.xz
cat > .tiletools-slim/unpack.sh <<'SH'
# source me on the GPU machine: unpacks the Tile toolchain beside this file and points at it.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cu="$here/unpacked/nvidia/cu13"
if [ ! -x "$cu/bin/tileiras" ]; then
  mkdir -p "$here/unpacked" && xz -dc "$here/tiletools.tar.xz" | tar -x -C "$here/unpacked"
  mkdir -p "$cu/nvvm/lib64" && ln -sf "$cu/lib/libnvvm.so.4" "$cu/nvvm/lib64/libnvvm.so"
fi
export CUDA_HOME="$cu" CUDA_PATH="$cu" PATH="$cu/bin:$PATH"
SH
ls -la .tiletools-slim
