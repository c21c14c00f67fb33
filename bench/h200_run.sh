#!/usr/bin/env bash
# How the H200 runs under bench/results were made. On the GPU machine, from the repo root, with
# .tiletools (../shared/device/pack-tile-tools.sh) and .whl (the cuda-tile and tilegym wheels for
# its Python 3.12) carried:   bash bench/h200_run.sh OUT STEP...
# (.tiletools-slim from bench/pack_tiletools_slim.sh is taken when .tiletools is not there.)
# A call carries at most 64 MiB, the tracked tree included: the tree (8.3 MB, 3.1 of it
# bench/results), .tiletools-slim (58.5 MB) and .whl (0.5 MB) are just over, so move
# bench/results out of the tree for the call and back after (2026-12-06). With .whl-tg too,
# under 1 MB is left (2026-12-07): to run HEAD while helpers edit the working tree, carry
# only HEAD's copies of the changed files (`git archive HEAD $(git diff --name-only HEAD --
# src tests) | xz > .head/head.tar.xz`, unpacked over the tree first on the GPU machine).
# The limit counts disk blocks: with .head as well, `bash bench/device_aside.sh out` before the
# call and `back` after (it also moves docs and the compile-fail and check corpora, 2026-12-07).
# Steps: tests (every GPU test but hf's and benchops'), benchops (test_bench_ops_gpu.py's slices),
#        hf (the transformers GPU tests), new (this session's GPU tests), decode (decode attention by
#        configuration), attnbwd (the attention backward's kernels alone, and an atomic dQ),
#        spills (each configuration's time beside the stack its kernels spill),
#        bmm (fearless bench's bmm cases), attn (fearless bench's attention and fp8 matmul
#        cases), gaps (the ops cases under 0.95 of TileGym, by configuration),
#        tile (bench/tile_bench.py; rows: its softmax and norm sections),
#        simt (bench/simt_bench.py),
#        suite (fearless bench, full size), quick (fearless bench --quick),
#        lc (fearless bench --cases launch compile: launch overhead and compile times),
#        launchbase (the launch family for this tree, the tree before issue 34's work, this again),
#        ahead (the GPU tests of the ops that compile their steps in one pass on a first call),
#        aheadbench (their first calls), devices (device choice and the torchrun example),
#        near (every op's first call at a new size class with the
#        shipped table), tuning (time to first result at a new size class, --quick), tuningpart (the whole
#        tuning family in TUNING_PART=k/n slices),
#        models (fearless bench --cases models: Hugging Face models end to end; one model per
#        command: MODELS='models_llama3_8b_*'),
#        cases (CASES='patterns' [QUICK=1]: those cases of any family),
#        gsizes (bench/tile_bench.py's GEMM configurations at every suite size),
#        sanitizer (compute-sanitizer memcheck: controls, demo, examples, every operator, a
#        sample of the GPU tests; bench/sanitizer/run.sh).
set -uo pipefail
out=$1; shift
mkdir -p "$out"
# .whl: cuda-tile, pytest-xdist; .whl-tg: TileGym's wheel alone (the ops family's peer); .whl-hf (bench/pack_whl_hf.sh): the Hugging Face
# side of the transformers tests and the models family (a transformers trimmed to the model types
# fearless patches, its dependencies, TileGym and Liger-Kernel). Each .tar.xz is unpacked as is.
for d in .whl .whl-tg .whl-hf; do
  if ls $d/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $d/*.whl && export PYTHONPATH=/tmp/site
  fi
  for t in $d/*.tar.xz; do  # TileGym's tests stay packed: bench/tilegym_tests/run.sh unpacks them
    case $t in *tilegym-tests*) continue ;; esac
    [ -f "$t" ] && tar xJf "$t" -C /tmp/site && export PYTHONPATH=/tmp/site
  done
done
# The toolchain and .whl-hf do not fit in one call's 64 MiB together: a call that carries the
# toolchain leaves a copy in the checkout's ignored .cache (kept between calls while the
# machine stays warm; /tmp is not: session 24's models call found no tileiras there), and a
# later call that carries .whl-hf instead takes it from there.
staged=$PWD/.cache/staged-tiletools/nvidia/cu13
# shellcheck disable=SC1091
if [ -f .tiletools/unpack.sh ]; then source .tiletools/unpack.sh
elif [ -f .tiletools-slim/unpack.sh ]; then source .tiletools-slim/unpack.sh; fi
if [ -n "${CUDA_HOME:-}" ] && [ ! -x "$staged/bin/tileiras" ]; then
  mkdir -p "${staged%/cu13}" && cp -a "$CUDA_HOME" "${staged%/cu13}/"
elif [ -z "${CUDA_HOME:-}" ] && [ -x "$staged/bin/tileiras" ]; then
  export CUDA_HOME="$staged" CUDA_PATH="$staged" PATH="$staged/bin:$PATH"
fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
# the compiled launcher, built as `pip install` builds it (setup.py), so that a first call
# measures what an installed fearless does (runtime/claunch.py builds it at first use otherwise)
python3 setup.py -q build_ext --inplace > "$out/build_ext.log" 2>&1 || echo "build_ext failed: see build_ext.log"
export FEARLESS_CACHE_DIR=$PWD/.cache/h200 CUDA_TILE_CACHE_DIR=$PWD/.cache/h200-cutile
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  python3 -c 'import cuda.tile, tilegym; print("cuda-tile", cuda.tile.__version__)' 2>&1 | tail -1
  command -v tileiras && tileiras --version | tail -1
} > "$out/env.txt" 2>&1
# --failure-log (tests/conftest.py): each failure's reason as it happens, for a run cut short.
# pytest-timeout (in the machine's image) ends a hung GPU test after TEST_TIMEOUT_S with every
# thread's stack in the log, so that a hang is named (2026-12-05: one hid the run's summary)
tmo=$(python3 -c 'import pytest_timeout' 2>/dev/null \
  && echo "--timeout ${TEST_TIMEOUT_S:-240} -o timeout_method=thread")
for step in "$@"; do
  echo "== $step $(date +%T)"
  case $step in
    tests) # every GPU test, on 12 workers when pytest-xdist travelled in .whl (about 70 s on
           # the H200 with a warm cache; over 420 s on a fresh H100, 2026-12-05: tileiras
           # compiles every kernel on the CPUs), tuning off but for the autotune tests.
           # PART=1/2 or 2/2 runs every other file, for two calls under the per-call limit.
           par=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 12")
           files=$(ls tests/gpu/test_*.py tests/test_tile_heldout.py tests/test_tile_fp8.py \
             tests/test_tile_cutile_ops.py tests/test_ops_attention.py \
             | grep -v -e test_autotune_gpu.py -e test_transformers_gpu.py -e test_bench_ops_gpu.py)
           if [ -n "${PART:-}" ]; then
             files=$(echo "$files" | awk -v k="${PART%/*}" -v n="${PART#*/}" 'NR % n == k % n')
           fi
           # shellcheck disable=SC2086
           FEARLESS_AUTOTUNE=0 python3 -m pytest -v -m gpu $par $tmo -p no:cacheprovider -rfE \
             --failure-log "$out/gpu_test_failures.log" \
             $files 2>&1 | tee "$out/gpu_tests_full.log" | tail -40 > "$out/gpu_tests.log"
           python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_autotune_gpu.py 2>&1 \
             | tail -5 >> "$out/gpu_tests.log"
           grep -E "passed|failed" "$out/gpu_tests.log" ;;
    benchops) # tests/gpu/test_bench_ops_gpu.py alone, its 8 slices on 8 workers: every operator
           # at its smallest shape against its peers, compiled cold (in the tests step, xdist
           # gave one worker several slices in a row, and PART=1/2 ran past a call's 600 s on a
           # fresh H100, 2026-12-07)
           FEARLESS_AUTOTUNE=0 python3 -m pytest -v -m gpu -n 8 $tmo -p no:cacheprovider -rfE \
             --failure-log "$out/gpu_benchops_failures.log" tests/gpu/test_bench_ops_gpu.py 2>&1 \
             | tee "$out/gpu_benchops_full.log" | grep -E "(FAILED|ERROR) tests|passed|failed" ;;
    hf)    # the transformers GPU tests (full layer sizes of 8B to 30B models) on 2 workers: in
           # the tests step's 12, with the rest, they ran the H100's 80 GB out (2026-12-05)
           par=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 2")
           # shellcheck disable=SC2086
           FEARLESS_AUTOTUNE=0 python3 -m pytest -v -m gpu $par $tmo -p no:cacheprovider -rfE \
             --failure-log "$out/gpu_hf_failures.log" tests/gpu/test_transformers_gpu.py 2>&1 \
             | tee "$out/gpu_hf_full.log" | grep -E "(FAILED|ERROR) tests|passed|failed" ;;
    new)   # the last sessions' GPU tests alone (2026-12-05, sessions 12 to 14: where a tensor
           # lives, the first hour, the dispatcher's launches and replays, the new attention
           # operators and their backward, the fused loss, linear_gluact_linear,
           # moe_actgrad_bwd, fearless.transformers; that one needs the transformers
           # wheel and its dependencies in .whl)
           # NEW_TESTS='file ...' runs those files instead, on NEW_WORKERS (15) workers, tuning
           # off unless NEW_AUTOTUNE=1 (a tuned op's other configurations then launch too)
           if [ -n "${NEW_TESTS:-}" ]; then
             # shellcheck disable=SC2086
             FEARLESS_AUTOTUNE=${NEW_AUTOTUNE:-0} timeout "${NEW_TIMEOUT_S:-540}" python3 -m pytest -v -m gpu $tmo \
               -p no:cacheprovider -n "${NEW_WORKERS:-15}" -rfE $NEW_TESTS \
               --failure-log "$out/gpu_new_failures.log" 2>&1 | tee "$out/gpu_new_full.log" \
               | tail -40 > "$out/gpu_new.log"
             # -v: each test's verdict as it ends, so a cut run still names its failures
             grep -E "(FAILED|ERROR) tests|Timeout|passed|failed" "$out/gpu_new_full.log"; continue
           fi
           python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/gpu/test_ops_where_gpu.py \
             tests/test_tile_first_hour.py tests/test_simt_shared_atomics.py \
             tests/test_simt_block_leader.py tests/test_guards.py tests/test_guards_tile.py \
             tests/test_autotune_first_hour.py tests/test_ops_attention.py tests/gpu/test_simt_grid_sync_gpu.py \
             tests/gpu/test_first_hour_gpu.py tests/gpu/test_print_gpu.py \
             tests/test_ops_attention_variants.py tests/gpu/test_tile_gpu.py \
             tests/gpu/test_ops_replay_gpu.py tests/gpu/test_ops_attention_sink_gpu.py \
             tests/gpu/test_ops_attention_varlen_gpu.py tests/gpu/test_ops_kvcache_gpu.py \
             tests/gpu/test_ops_linear_cross_entropy_gpu.py tests/gpu/test_transformers_gpu.py \
             tests/gpu/test_ops_moe_gpu.py tests/gpu/test_ops_mla_gpu.py \
             tests/gpu/test_ops_delta_rule_gpu.py tests/gpu/test_ops_fp8_block_matmul_gpu.py \
             tests/gpu/test_ops_splitk_reduce_gpu.py tests/gpu/test_ops_persistent_layer_norm_gpu.py \
             tests/gpu/test_ops_mamba2_gpu.py tests/gpu/test_ops_mhc_gpu.py \
             tests/gpu/test_ops_attention_variants_backward_gpu.py \
             tests/gpu/test_ops_gemma_attention_decode_gpu.py tests/gpu/test_ops_sparse_mla_gpu.py \
             tests/gpu/test_ops_linear_gluact_linear_gpu.py tests/gpu/test_ops_moe_actgrad_gpu.py \
             tests/gpu/test_ops_attention_sink_varlen_backward_gpu.py \
             tests/gpu/test_ops_attention_mask_backward_gpu.py \
             tests/gpu/test_ops_fmha_variant_gpu.py tests/gpu/test_ops_nvfp4_gpu.py \
             2>&1 | tee "$out/gpu_new_full.log" | tail -40 > "$out/gpu_new.log"
           tail -3 "$out/gpu_new.log" ;;
    tgtests) # NVIDIA TileGym's tests/ops with fearless.ops as its cuTile backend (per-file
           # pass/fail/skip in tilegym_summary.txt; tests of ops fearless lacks are skipped);
           # TG_TESTS='tests/suites/liger tests/suites/unsloth tests/suites/flashinfer' runs
           # TileGym's suites instead (bench/tilegym_tests/adapters_suites.py), 'tests/ops
           # tests/suites' both
           bash bench/tilegym_tests/run.sh "$out/tgtests" 2>&1 | tail -50 ;;
    decode) python3 bench/experiments/decode_configs.py 2>&1 | tail -90 ;;
    exp)   # EXP=name.py [EXP_ARGS=...]: one script of bench/experiments/, with the toolchain set up
           # shellcheck disable=SC2086
           python3 "bench/experiments/$EXP" ${EXP_ARGS:-} 2>&1 | tee "$out/exp-${EXP%.py}.txt" | tail -120 ;;
    dprof) # issue 38, session 25: a patched Llama decode step's host and GPU time, by operator
           # (DPROF_ARGS=--prefill: a 4 x 2048 prefill's kernels, eager against fearless; --train: a
           # training step's; --probe: the models family's decode_b1 measurement and its replays)
           # shellcheck disable=SC2086
           python3 bench/experiments/decode_host_profile.py ${DPROF_ARGS:-} > "$out/dprof.txt" 2>&1
           tail -40 "$out/dprof.txt" ;;
    dcomp) # session 26: a Llama decode step of torch eager, torch.compile, fearless and fearless
           # under torch.compile (bench/experiments/decode_compiled.py)
           python3 bench/experiments/decode_compiled.py 2>&1 | tee "$out/dcomp.txt" | tail -8 ;;
    layouts) # session 26: the inference attention over sequence-major q, k, v read in place,
           # against dense copies and cuDNN (bench/experiments/attention_layouts.py)
           python3 bench/experiments/attention_layouts.py 2>&1 | tee "$out/layouts.txt" ;;
    attnbwd) # issue 35: each attention backward kernel alone by tiles and occupancy, the delta
           # step, FlashAttention-2's dQ by relaxed atomics, in the kernels' row-major tile order
           # (bench/experiments/attention_backward_variants.py)
           # ATTNBWD='--forms=0 64,128 ...' passes other forms and settings; GRID=1 adds the
           # grid-order pass
           for order in "" ${GRID:+--grid-order}; do
             # shellcheck disable=SC2086
             python3 bench/experiments/attention_backward_variants.py ${ATTNBWD:---forms=0,1} $order 2>&1 \
               | grep --line-buffered -v autotun \
               | tee -a "$out/attention_backward_variants.txt" | tail -30
           done ;;
    spills) # issue 37: each configuration's time beside the stack its kernels spill (does a
           # spilling configuration ever win? autotune_timing.SKIP_SPILLING)
           python3 bench/experiments/spills_vs_times.py 2>&1 | grep --line-buffered -v autotun \
             | tee "$out/spills_vs_times.txt" | tail -60 ;;
    gaps)  # the ops cases under 0.95 of TileGym: every configuration, then the bench's peers
           python3 bench/experiments/ops_gaps.py 2>&1 | grep --line-buffered -v autotun | tee "$out/gaps.log" | head -150
           python3 -m fearless bench --quick --cases 'ops_layer_norm_bf16_*x16384' \
             'ops_rms_norm_f16_4096x16384' 'ops_transpose_bf16_*' 'ops_silu_and_mul_f16_*' \
             'ops_gelu_*_f16_67108864' --out "$out/gaps" 2>&1 | tail -30 ;;
    cases) # CASES='pattern ...' of any families, QUICK=1 for --quick (results in $out/cases)
           set -f  # the patterns reach fearless bench unexpanded
           # shellcheck disable=SC2086
           python3 -m fearless bench ${QUICK:+--quick} --cases $CASES --out "$out/cases" 2>&1 \
             | grep --line-buffered -v autotun | tee "$out/cases.log" | tail -60
           set +f ;;
    bmm)   python3 -m fearless bench --cases 'ops_bmm_*' --out "$out/bmm" 2>&1 | tail -12 ;;
    attn)  python3 -m fearless bench --cases 'ops_attention_*' 'ops_matmul_f8e4m3fn_*' \
             --out "$out/attn" 2>&1 | tail -40 ;;
    tile)  python3 bench/tile_bench.py --out "$out" 2>&1 | tee "$out/tile.log" | grep -v "^ " ;;
    rows)  python3 bench/tile_bench.py --only softmax norms --out "$out" 2>&1 | tee "$out/tile.log" \
             | grep -v "^ " ;;
    simt)  python3 bench/simt_bench.py --out "$out" > "$out/simt.log" 2>&1; tail -5 "$out/simt.log" ;;
    suite) python3 -m fearless bench --out "$out/bench" 2>&1 | tail -60 ;;
    quick) python3 -m fearless bench --quick --out "$out/bench" 2>&1 | tail -60 ;;
    gsizes) python3 bench/tile_bench.py --only gemm-sizes --out "$out/gsizes" 2>&1 \
             | tee "$out/gsizes.log" | grep -v "^ " ;;
    sanitizer) bash bench/sanitizer/run.sh "$out" 2>&1 | tee "$out/sanitizer.txt" ;;
    lc)    python3 -m fearless bench --cases launch compile --out "$out/lc" 2>&1 | tail -30 ;;
    launchbase) # issue 34's speed guard in one run: the launch family for this tree, for the
           # tree before the one-launch-layer work, and for this tree again (the run's noise).
           # The old tree travels packed: `mkdir -p .head && git archive 54a50ec src examples
           # pyproject.toml | xz -9 > .head/base_src.tar.xz` (0.4 MB; the launch family reads
           # examples/), with .head carried (.tiletools-slim, .whl and .head fit beside the
           # tree without bench/results); both trees' `--dry-run` pass on the CPU (2026-12-07)
           python3 -m fearless bench --cases launch --out "$out/launch-head" 2>&1 | tail -8
           rm -rf /tmp/base && mkdir -p /tmp/base && tar xJf "${BASE_SRC:-.head/base_src.tar.xz}" -C /tmp/base
           (cd /tmp/base && PYTHONPATH=/tmp/base/src${PYTHONPATH#src} python3 -m fearless bench \
              --cases launch --out "$out/launch-base" 2>&1 | tail -8)
           python3 -m fearless bench --cases launch --out "$out/launch-head2" 2>&1 | tail -8 ;;
    models) # end to end (family_models.py): one fresh process per model, workload and
           # implementation; FEARLESS_BENCH_MODELS_BUDGET_S (default 300) bounds one run;
           # QUICK=1: Llama-3-8B's layers at the quick workloads only
           python3 -m fearless bench ${QUICK:+--quick} --cases "${MODELS:-models}" --out "$out/models" \
             2>&1 | tail -60 ;;
    train8b) # issue 38: Llama-3-8B's layers (two of them) trained 200 steps beside torch eager
           # (TRAIN8B_ARGS: other arguments, e.g. '--steps 60 --lr 1e-4')
           # shellcheck disable=SC2086
           python3 examples/train_tiny_llama.py --device cuda --size llama3-8b ${TRAIN8B_ARGS:---steps 200} 2>&1 \
             | tee "$out/train8b.log" | tail -5 ;;
    tune)  # issue 37: the shipped table; every autotuned operator over real models' shapes
           # (cli/tune_cases.py: 389 bf16 cases, an estimated 13-26 min; TUNE_MODELS picks
           # groups, TUNE_OPS operators). It merges into the carried src/fearless/tuning/sm_90.json
           # after every case and the table comes back as $out/sm_90.json, so calls cut by
           # TUNE_TIMEOUT_S (default 500 s) add up: copy it over the repo's before the next call.
           timeout "${TUNE_TIMEOUT_S:-500}" python3 -m fearless tune \
             ${TUNE_MODELS:+--models "$TUNE_MODELS"} ${TUNE_OPS:+--ops "$TUNE_OPS"} \
             --out src/fearless/tuning/sm_90.json 2>&1 | tee "$out/tune.log" | tail -20
           cp src/fearless/tuning/sm_90.json "$out/sm_90.json" ;;
    ahead) # issue 37, session 22: the ops whose first call compiles its steps in one pass, their
           # GPU tests with tuning on: 319 tests, 317 of them done in 9 minutes on 14 workers of the H100
           # (2026-12-06), where 8 large cases ran out of the card's memory and passed alone on 4.
           # So 6 workers, and aheadbench in a call of its own
           timeout 580 python3 -m pytest -q -m gpu -p no:cacheprovider -n 6 -rfE $tmo \
             tests/gpu/test_autotune_ahead_gpu.py tests/gpu/test_ops_linear_cross_entropy_gpu.py \
             tests/gpu/test_ops_moe_gpu.py tests/gpu/test_ops_mamba2_gpu.py \
             tests/gpu/test_ops_delta_rule_gpu.py tests/gpu/test_ops_backward_rows_gpu.py \
             tests/gpu/test_ops_mla_gpu.py tests/gpu/test_ops_attention_sink_gpu.py \
             tests/gpu/test_ops_gemma_attention_decode_gpu.py \
             tests/gpu/test_ops_linear_gluact_linear_gpu.py 2>&1 | tail -15 ;;
    aheadbench) # their tuning-family first calls (no table, table, TileGym where .whl-tg
           # travelled): about 5 minutes for the first four on the H100, so two calls
           set -f  # the patterns reach fearless bench unexpanded
           python3 -m fearless bench --out "$out/ahead" --cases 'tuning*attention_backward_*' \
             'tuning*fused_linear_cross_entropy*' 'tuning*fused_moe*' 'tuning*group_gemm*' \
             'tuning*mamba2_chunk_backward*' 'tuning*mla_decoding_split_kv*' 2>&1 \
             | grep --line-buffered -v autotun | tail -20
           set +f ;;
    tuning) # time to first result at a new size class (issue 37), --quick: 4 ops, 3 processes each
           python3 -m fearless bench --quick --cases tuning --out "$out/tuning" 2>&1 | tail -20 ;;
    devices) # issue 15, session 23: device choice on this machine's GPUs, and the torchrun
           # example on every visible GPU (one rank each)
           python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 -rfE $tmo \
             --failure-log "$out/devices_failures.log" tests/gpu/test_devices_gpu.py 2>&1 | tail -6
           ranks=$(python3 -c 'import torch; print(torch.cuda.device_count())')
           timeout 240 torchrun --nproc_per_node="$ranks" examples/ddp_allreduce.py 2>&1 \
             | grep -E "ranks|^ok|MISMATCH|Error" ;;
    near)  # issue 37, session 23: every spec's first call with the shipped table as installed
           # (tuning_near_*: no cold or table probe), beside TileGym's where .whl-tg travelled
           python3 -m fearless bench --out "$out/near" --cases 'tuning_near_*' 2>&1 | tail -52 ;;
    tuningpart) # TUNING_PART=k/n (default 1/4): every n-th spec of the whole tuning family from
           # the k-th, with its table and near rows, so that the family (48 specs, about 30 s
           # each on the H100 before the near row) runs over n calls of under 10 minutes
           part=${TUNING_PART:-1/4}
           # shellcheck disable=SC2046
           python3 -m fearless bench --out "$out/tuning-${part/\//of}" --cases $(python3 -c '
import sys
from fearless_bench import family_tuning as f
k, n = map(int, sys.argv[1].split("/"))
specs = [c for c in f.CASES if not c.startswith(("tuning_table_", "tuning_near_"))][k - 1 :: n]
print(" ".join(c for s in specs for kind in ("", "table_", "near_")
               for c in [s.replace("tuning_", "tuning_" + kind, 1)]))
' "$part") 2>&1 | tail -40 ;;
  esac
done
