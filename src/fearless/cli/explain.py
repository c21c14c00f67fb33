"""`fearless explain CODE`: prints the reference section for an error code, like `rustc --explain`.

The reference is `docs/errors.md` in the repository, one `## E0502: title` section per code in
`errors.CODES`. An installed fearless has no repository, so the package carries a copy,
`fearless/cli/errors.md`, read with importlib.resources (it works from a wheel, a zip or an
editable checkout alike); tests/test_errors_doc.py fails when the copy differs from docs/errors.md.

Exit status: 0 printed, 1 the reference is not installed, 2 an unknown or malformed code.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import resources

from ..errors import CODES

REFERENCE = "errors.md"  # beside this module, a copy of docs/errors.md
_HEADING = re.compile(r"^## (E\d{4}):", re.MULTILINE)
_CODE = re.compile(r"[Ee]?(\d{1,4})")


HELP = "explain an error code (e.g. E0502): the rule, an example and its fix"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "code",
        metavar="CODE",
        nargs="?",
        help="the code from `error[E0502]` (E0502, e0502 and 0502 all work)",
    )


def reference_text() -> str:
    """The error-code reference shipped with the package (docs/errors.md)."""
    return resources.files(__package__).joinpath(REFERENCE).read_text(encoding="utf-8")


def sections(text: str) -> dict[str, str]:
    """Each code's section of the reference: its `## Ennnn:` heading up to the next `## `."""
    out: dict[str, str] = {}
    for m in _HEADING.finditer(text):
        end = text.find("\n## ", m.end())
        out[m.group(1)] = text[m.start() : len(text) if end < 0 else end + 1].rstrip() + "\n"
    return out


def normalize(code: str) -> str | None:
    """`E0502`, `e0502`, `0502` and `502` as "E0502"; None for anything that is not a code."""
    m = _CODE.fullmatch(code.strip())
    return f"E{int(m.group(1)):04d}" if m else None


def run(args: argparse.Namespace) -> int:
    if args.code is None:
        for known, title in CODES.items():
            print(f"{known}  {title}")
        print("\nrun `fearless explain CODE` for the rule, an example and its fix")
        return 0
    code = normalize(args.code)
    if code is None or code not in CODES:
        if code is None:
            print(
                f"error: `{args.code}` is not an error code (they look like E0502)", file=sys.stderr
            )
        else:
            print(f"error: fearless has no error code {code}", file=sys.stderr)
        print(f"the codes are {', '.join(CODES)}", file=sys.stderr)
        print("  = help: `fearless explain` lists them with their titles", file=sys.stderr)
        return 2
    try:
        text = reference_text()
    except OSError as exc:
        print(f"{code}: {CODES[code]}", file=sys.stderr)
        print(f"error: the error reference is not installed with fearless ({exc})", file=sys.stderr)
        print("  = help: read docs/errors.md in the fearless repository", file=sys.stderr)
        return 1
    section = sections(text).get(code)
    if section is None:  # tests/test_errors_doc.py rules this out for the shipped reference
        print(f"{code}: {CODES[code]}\n\n(no section for {code} in the reference yet)")
        return 0
    print(section, end="")
    return 0
