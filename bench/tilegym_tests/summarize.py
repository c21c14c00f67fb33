"""Per-file pass/fail/skip counts of a TileGym-tests run, from pytest's JUnit XML (run.sh)."""

import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict


def summarize(junit_xml: str) -> str:
    """A table: TileGym test file, passed, failed (failures and errors), skipped, and the first
    skip reason of the file."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: dict[str, str] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        cls = case.get("classname", "")
        parts = cls.split(".")
        mod = [p for p in parts if not p[:1].isupper()]
        f = "/".join(mod[mod.index("ops") + 1 :] if "ops" in mod else mod) + ".py"
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            counts[f]["failed"] += 1
        elif "skipped" in kinds:
            counts[f]["skipped"] += 1
            reasons.setdefault(f, (case.find("skipped").get("message") or "")[:90])
        else:
            counts[f]["passed"] += 1
    lines = [f"{'file':48} {'pass':>5} {'fail':>5} {'skip':>5}  first skip reason"]
    total: Counter[str] = Counter()
    for f in sorted(counts):
        c = counts[f]
        total.update(c)
        lines.append(
            f"{f:48} {c['passed']:5} {c['failed']:5} {c['skipped']:5}  {reasons.get(f, '')}"
        )
    lines.append(f"{'TOTAL':48} {total['passed']:5} {total['failed']:5} {total['skipped']:5}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(sys.argv[1]))
