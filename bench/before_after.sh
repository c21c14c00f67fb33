#!/usr/bin/env bash
# Launch overhead and compile time of two checkouts in one GPU-machine run, interleaved, so a
# refactor can show it made neither worse (issue 9). From the repo root, with .tiletools and
# .whl carried (bench/h200_run.sh says how) and the older tree unpacked in BEFORE:
#     bash bench/before_after.sh OUT BEFORE [ROUNDS]
# Writes OUT/lc_{before,after}_{round}/ (fearless bench --cases launch compile) and
# OUT/simt_{before,after}.json (bench/simt_bench.py: vecadd, safe vs unsafe, launch, compile),
# then prints the launch and compile rows of each run side by side.
set -uo pipefail
out=$1; before=$2; rounds=${3:-2}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
# shellcheck disable=SC1091
if [ -f .tiletools/unpack.sh ]; then source .tiletools/unpack.sh
elif [ -f .tiletools-slim/unpack.sh ]; then source .tiletools-slim/unpack.sh; fi
site=${PYTHONPATH:-}
after=$PWD
run_lc() {  # $1 = before|after, $2 = round
  local dir; [ "$1" = before ] && dir=$before || dir=$after
  (cd "$dir" && PYTHONPATH=src${site:+:$site} FEARLESS_CACHE_DIR=/tmp/fl-cache-$1 \
     CUDA_TILE_CACHE_DIR=/tmp/ct-cache-$1 \
     python3 -m fearless bench --cases launch compile --out "$out/lc_$1_$2" > "$out/lc_$1_$2.log" 2>&1)
}
for r in $(seq 1 "$rounds"); do
  run_lc before "$r"; run_lc after "$r"
done
for v in before after; do
  [ $v = before ] && dir=$before || dir=$after
  (cd "$dir" && PYTHONPATH=src${site:+:$site} FEARLESS_CACHE_DIR=/tmp/fl-simt-$v \
     python3 bench/simt_bench.py --out "$out/simt_$v" > "$out/simt_$v.log" 2>&1)
done
python3 - "$out" "$rounds" <<'PY'
import json, pathlib, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
rows = {}
for v in ("before", "after"):
    for r in range(1, rounds + 1):
        p = out / f"lc_{v}_{r}" / "results.json"
        if not p.exists():
            print(f"{v} round {r}: no results ({p})"); continue
        data = json.loads(p.read_text())
        for rec in data["records"]:
            if rec["status"] == "ok" and (
                rec["impl"].startswith("fearless") or rec["impl"] == "raw-cuLaunchKernel"
            ):
                key = (rec["case"], rec["impl"])
                rows.setdefault(key, {}).setdefault(v, []).append(f"{rec['time']:.4g}{rec['time_unit']}")
print(f"{'case':20} {'impl':20} {'before (each round)':>28} {'after (each round)':>28}")
for (case, impl), d in sorted(rows.items()):
    fmt = " ".join
    print(f"{case:20} {impl:20} {fmt(d.get('before', [])):>28} {fmt(d.get('after', [])):>28}")
PY
