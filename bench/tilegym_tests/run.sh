#!/usr/bin/env bash
# Runs NVIDIA TileGym's own operator tests (tests/ops) with fearless.ops as TileGym's "cutile"
# backend (bench/tilegym_tests/fearless_as_cutile.py) and writes OUT/tilegym_tests.log (pytest's
# tail, with failures), OUT/tilegym_tests.xml (JUnit) and OUT/tilegym_summary.txt (per file:
# passed, failed, skipped). Needs a GPU, torch, cuda-tile and tilegym 1.5.1 importable (h200_run.sh
# installs .whl/.whl-hf) and TileGym's tests in .whl-hf/tilegym-tests.tar.xz (bench/pack_whl_hf.sh).
# TG_K overrides the -k expression; TG_TESTS the test paths (default tests/ops; TileGym's suites:
# TG_TESTS='tests/suites/liger tests/suites/unsloth tests/suites/flashinfer', whose cutile
# tests the default -k selects too: their ids carry the backend parameter "cutile").
set -uo pipefail
out=${1:?usage: bench/tilegym_tests/run.sh OUT}
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$root/.whl-hf/tilegym-tests.tar.xz" || { echo "no $root/.whl-hf/tilegym-tests.tar.xz"; exit 1; }
cd "$work"
PYTHONPATH="$root/bench/tilegym_tests:$root/src${PYTHONPATH:+:$PYTHONPATH}" \
  timeout "${TG_TIMEOUT:-1500}" python3 -m pytest -p fearless_as_cutile -p no:cacheprovider \
  ${TG_TESTS:-tests/ops} -k "${TG_K:-cutile and not cutile_rs and not test_perf}" -q -rfE \
  --junitxml "$out/tilegym_tests.xml" 2>&1 | tail -400 > "$out/tilegym_tests.log"
python3 "$root/bench/tilegym_tests/summarize.py" "$out/tilegym_tests.xml" | tee "$out/tilegym_summary.txt"
