#!/usr/bin/env bash
# Launch overhead only (fearless bench --cases launch) of two checkouts, interleaved for ROUNDS
# rounds in one GPU-machine call, and the median of each row: the quick form of
# bench/before_after.sh (which adds compile times and bench/simt_bench.py and takes ~4x longer).
# From the repo root on the GPU machine, after bench/h200_run.sh has installed the wheels into
# /tmp/site and the older tree is unpacked in BEFORE:
#     bash bench/launch_rounds.sh BEFORE [ROUNDS]
# Each round's results go to /tmp/lc/{before,after}-N (not $OUT: a call returns few files).
set -u
before=$1; rounds=${2:-3}
mkdir -p /tmp/lc
for r in $(seq 1 "$rounds"); do
  for v in before after; do
    [ $v = before ] && dir=$before || dir=$PWD
    (cd "$dir" && PYTHONPATH=src:/tmp/site FEARLESS_CACHE_DIR=/tmp/fl-cache-$v timeout 120 \
       python3 -m fearless bench --cases launch --out /tmp/lc/$v-$r > /tmp/lc/$v-$r.log 2>&1)
  done
done
python3 - <<'PY'
import json, pathlib, statistics
rows: dict = {}
for p in sorted(pathlib.Path("/tmp/lc").glob("*/results.json")):
    side = p.parent.name.split("-")[0]
    for rec in json.loads(p.read_text())["records"]:
        if rec["status"] == "ok":
            rows.setdefault((rec["case"], rec["impl"]), {}).setdefault(side, []).append(rec["time"])
def med(xs): return f"{statistics.median(xs):.3f}" if xs else "-"
def each(xs): return " ".join(f"{x:.2f}" for x in xs)
print(f"{'case':16} {'impl':22} {'before med':>10} {'after med':>10}  each round, before | after")
for (case, impl), d in sorted(rows.items()):
    b, a = d.get("before", []), d.get("after", [])
    print(f"{case:16} {impl:22} {med(b):>10} {med(a):>10}  {each(b)} | {each(a)}")
PY
