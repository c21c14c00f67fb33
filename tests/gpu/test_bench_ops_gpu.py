"""The ops family on the GPU (`fearless bench --cases ops`, family_ops.py), at the smallest shape
of each op, variant and dtype, with `--quick`'s timing budget: every fearless.ops call and its
torch peer pass their checks, and TileGym's (where installed) passes or says why it is skipped.
A pre-flight for the full family run (bench/README.md, "The ops family")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fearless.bench import family_ops, model
from fearless.cli.main import main

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def test_every_op_passes_at_its_smallest_shape(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    firsts: dict[str, str] = {}
    for s in family_ops.specs():  # each grid's first shape (in --quick's set)
        firsts.setdefault(s.grid, s.name)
    cases = sorted(firsts.values())
    rc = main(["bench", "--quick", "--cases", *cases, "--out", str(tmp_path)])
    records = json.loads((tmp_path / "results.json").read_text())["records"]
    by_impl: dict[str, dict[str, dict]] = {}
    for r in records:
        by_impl.setdefault(r["impl"], {})[r["case"]] = r
    for impl in (model.FEARLESS_TILE, model.TORCH):
        assert sorted(by_impl[impl]) == cases
        bad = [r for r in by_impl[impl].values() if r["status"] != "ok"]
        assert not bad, bad
    for r in by_impl.get(model.TILEGYM, {}).values():
        assert r["status"] in ("ok", "skipped"), r
    assert rc == 0
