#!/usr/bin/env bash
# Makes room for a GPU-machine call: the call carries the working tree and the named ignored
# paths in 64 MiB, counted in disk blocks, and the tree's many small files (8.3 MB in blocks)
# with .tiletools-slim (58.7 MB), .whl and .head leave no room (session 35). `out` moves what a
# GPU run never reads (bench/results, docs, tests/compile_fail, tests/check_corpus) to
# $ASIDE (default /tmp/fearless-aside); `back` returns it; `status` says where it is.
#   bash bench/device_aside.sh out && <the call> ; bash bench/device_aside.sh back
# `out-wide` moves the CPU test modules (tests/test_*.py) and bench/experiments too: on
# 2026-12-08 the tree had grown so that .tiletools-slim (57.3 MiB in blocks), .whl and .whl-hf
# fitted beside it only so (7.3 MiB of tree after `out`, 4.8 after `out-wide`). Every step of
# bench/h200_run.sh but `tests`, `exp` and `sanitizer` reads only tests/gpu, tests/support and
# tests/conftest.py of the tests. `out-hf` moves src/fearless_bench and every tests/gpu module
# but test_transformers_gpu.py too (4.1 MiB of tree): then .whl-tg fits as well, for a call of
# the `hf` and `tgtests` steps (TileGym's tests and its suites), which read nothing else.
# `back` returns all of it.
# Commit first: while the paths are aside, `git status` shows them deleted, and a commit of
# everything would record that.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
aside=${ASIDE:-/tmp/fearless-aside}
paths=(bench/results docs tests/compile_fail tests/check_corpus)
wide=(bench/experiments)
narrow=(src/fearless_bench)
case ${1:-status} in
  out-hf)
    bash "$0" out-wide
    if [ -e "$aside/tests-gpu" ]; then echo "$aside/tests-gpu exists already: run 'back' first" >&2; exit 1; fi
    mkdir -p "$aside/tests-gpu" "$aside/src"
    for f in tests/gpu/test_*.py; do
      [ "$(basename "$f")" = test_transformers_gpu.py ] || mv "$f" "$aside/tests-gpu/"
    done
    for p in "${narrow[@]}"; do mv "$p" "$aside/$p"; done
    echo "moved aside too: tests/gpu/test_*.py but test_transformers_gpu.py, ${narrow[*]}" ;;
  out-wide)
    bash "$0" out
    if [ -e "$aside/tests-cpu" ]; then echo "$aside/tests-cpu exists already: run 'back' first" >&2; exit 1; fi
    mkdir -p "$aside/tests-cpu" "$aside/bench"
    mv tests/test_*.py "$aside/tests-cpu/"
    for p in "${wide[@]}"; do mv "$p" "$aside/$p"; done
    echo "moved aside too: tests/test_*.py ${wide[*]}" ;;
  out)
    for p in "${paths[@]}"; do
      if [ -e "$aside/$p" ]; then echo "$aside/$p exists already: run 'back' first" >&2; exit 1; fi
    done
    for p in "${paths[@]}"; do
      mkdir -p "$aside/$(dirname "$p")" && mv "$p" "$aside/$p"
    done
    echo "moved aside to $aside: ${paths[*]}" ;;
  back)
    if [ -d "$aside/tests-cpu" ]; then
      mv "$aside"/tests-cpu/test_*.py tests/ && rmdir "$aside/tests-cpu"
    fi
    if [ -d "$aside/tests-gpu" ]; then
      mv "$aside"/tests-gpu/test_*.py tests/gpu/ && rmdir "$aside/tests-gpu"
    fi
    for p in "${paths[@]}" "${wide[@]}" "${narrow[@]}"; do
      if [ -e "$aside/$p" ]; then
        if [ -e "$p" ]; then echo "$p is in the tree and in $aside: left both" >&2; continue; fi
        mv "$aside/$p" "$p"
      fi
    done
    echo "back in the tree: $(git status --short | wc -l) paths differ from HEAD" ;;
  status)
    for p in "${paths[@]}"; do
      if [ -e "$p" ]; then echo "$p: in the tree"; else echo "$p: aside ($aside/$p)"; fi
    done ;;
  *) echo "usage: bash bench/device_aside.sh out|out-wide|out-hf|back|status" >&2; exit 2 ;;
esac
