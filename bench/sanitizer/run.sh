#!/usr/bin/env bash
# compute-sanitizer's memcheck over what issue 33 lists, on the GPU machine (bench/h200_run.sh's
# `sanitizer` step): controls first (the bare start-up of cuda-bindings, cuda-core and torch:
# what a dependency reports on its own), then `fearless demo`, every example, one call of every
# operator and a sample of the GPU tests. Logs go to OUT/sanitizer/, the summary to stdout.
set -uo pipefail
out=$1/sanitizer
mkdir -p "$out"
export FEARLESS_AUTOTUNE=0  # one configuration per operator: the sanitizer runs 10-100x slower
san=(timeout 150 compute-sanitizer --tool memcheck --show-backtrace host --print-limit 10000)
run() {
  local name=$1; shift
  "${san[@]}" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -E 'ERROR SUMMARY' "$out/$name.log" | tail -1)"
}
run control-bindings python3 -c "from cuda.bindings import driver; print(driver.cuInit(0))"
run control-core python3 -c "from cuda.core import Device; d = Device(0); d.set_current(); print(d.name)"
run control-torch python3 -c "import torch; print(torch.ones(4, device='cuda').sum().item())"
run demo python3 -m fearless demo
for ex in examples/*.py; do
  case $ex in *ddp_allreduce*) continue ;; esac  # a torchrun job: tests/test_ddp_example.py
  run "example-$(basename "$ex" .py)" python3 "$ex"
done
run every-op python3 bench/sanitizer/every_op.py
run gpu-tests python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_host_arrays_gpu.py \
  tests/gpu/test_torch_gpu.py
python3 bench/sanitizer/report.py "$out"/*.log
