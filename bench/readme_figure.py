"""The README's Performance figure: fearless.ops against TileGym and torch, one row per operator.

    PYTHONPATH=src python3 bench/readme_figure.py [RESULTS_JSON [OUT_PNG]]

Reads a `fearless bench --cases ops` run's results.json (default: the latest full one, RUN),
regroups its records by operator (`params["op"]`; attention split into prefill and decode) and
draws the suite's own summary heatmap (fearless_bench.figures: each cell the geometric mean of
the ratio to the best peer over that operator's cases, with n), titled with the run's commit
and command. Then it cuts the PNG to a small palette, so the committed image stays a few tens
of KB (the tree travels to the GPU machine under one size limit). Needs matplotlib.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench/results/h200-2026-12-04-session11/ops-quick-d458db0/results.json"
OUT = ROOT / "bench/results/readme_ops.png"
MAX_BYTES = 100_000


def _group(params: dict[str, Any]) -> str:
    op = str(params.get("op", "?"))
    if op == "attention":
        return "attention decode" if params.get("decode") else "attention prefill"
    return op


def records(results_json: Path) -> tuple[list[Any], dict[str, Any]]:
    """The run's records as `model.Record`s, each family set to its operator; and its meta."""
    from fearless_bench.model import Record

    doc = json.loads(results_json.read_text())
    fields = {f.name for f in dataclasses.fields(Record)}
    out = []
    for r in doc["records"]:
        r = {k: v for k, v in r.items() if k in fields}
        r["spread"] = tuple(r["spread"]) if r.get("spread") else None
        r["family"] = _group(r.get("params") or {})
        out.append(Record(**r))
    return out, doc["meta"]


def main(argv: list[str]) -> int:
    from fearless_bench import figures

    src = Path(argv[0]) if argv else RUN
    dst = Path(argv[1]) if len(argv) > 1 else OUT
    recs, meta = records(src)
    summary = figures.figures(recs)[0]
    commit = str(meta.get("fearless_commit") or "?")[:7]
    day = str(meta.get("started") or "?")[:10]
    command = str(meta.get("command", "?")).split(" --out")[0]
    summary.title = f"fearless.ops, one H200, {day}, {commit}: geomean per operator\n`{command}`"
    summary.size = (max(summary.size[0], 8.0), summary.size[1])  # room for the title
    figures.render(summary, dst)
    _shrink(dst)
    size = dst.stat().st_size
    print(f"wrote {dst} ({size} bytes, {len(summary.rows)} operators) from {src}")
    return 0 if size < MAX_BYTES else 1


def _shrink(path: Path) -> None:
    """Re-save with a 64-colour palette (Pillow comes with matplotlib)."""
    from PIL import Image

    with Image.open(path) as img:
        small = img.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
