"""docs/errors.md, the error-code reference, against the code: every code in `errors.CODES` has a
section and no other section exists; every example runs on the simulator and does what the page
says; `fearless explain` prints the sections.

The page marks its examples in the fence's info string:
  ```python fail=E0502   raises a FearlessError with that code; the ```text block after it is the
                         diagnostic exactly as fearless renders it (file shown as `example.py`)
  ```python fix          the corrected program: runs without error
  ... no-run             not executed; a `> Not run by the doc tests: why` note precedes it
A section with no failing example (E0999, a bug in fearless) says why in a `> No example:` note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import fearless as fl
from fearless.cli import explain
from fearless.cli.main import main
from fearless.errors import CODES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "errors.md"
PACKAGED = ROOT / "src" / "fearless" / "cli" / explain.REFERENCE

HEADING = re.compile(r"^## (\S+?): (.+)$", re.MULTILINE)
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOT_RUN_NOTE = "> Not run by the doc tests"
NO_EXAMPLE_NOTE = "> No example:"


@dataclass(frozen=True)
class Block:
    section: str  # the code of the section holding it
    number: int  # position among the section's blocks
    lang: str
    flags: frozenset[str]  # `fix`, `no-run`, `fail=E0502`
    text: str
    before: str  # the section's text between the previous block and this one

    @property
    def fails_with(self) -> str | None:
        return next((f[5:] for f in self.flags if f.startswith("fail=")), None)

    @property
    def runs(self) -> bool:
        return self.lang == "python" and "no-run" not in self.flags

    @property
    def id(self) -> str:
        kind = "fail" if self.fails_with else "fix" if "fix" in self.flags else self.lang
        return f"{self.section}-{self.number}-{kind}"


def doc_sections() -> dict[str, tuple[str, str]]:
    """code -> (title, body) for every `## CODE: title` heading, in page order."""
    text = DOC.read_text(encoding="utf-8")
    heads = list(HEADING.finditer(text))
    return {
        m.group(1): (
            m.group(2),
            text[m.end() : heads[k + 1].start() if k + 1 < len(heads) else None],
        )
        for k, m in enumerate(heads)
    }


def doc_blocks() -> list[Block]:
    blocks = []
    for code, (_, body) in doc_sections().items():
        end = 0
        for number, m in enumerate(FENCE.finditer(body)):
            flags = frozenset(m.group(2).split())
            blocks.append(Block(code, number, m.group(1), flags, m.group(3), body[end : m.start()]))
            end = m.end()
    return blocks


BLOCKS = doc_blocks()


def run_example(block: Block, where: Path) -> tuple[fl.FearlessError | None, Path]:
    """Run a block as the program `where/example.py`: the FearlessError it raised, if any."""
    where.mkdir()
    path = where / "example.py"  # a file, so diagnostics can quote its lines
    path.write_text(block.text, encoding="utf-8")
    namespace = {"__name__": "__main__", "__file__": str(path)}
    try:
        exec(compile(block.text, str(path), "exec"), namespace)
    except fl.FearlessError as err:
        return err, path
    finally:
        fl.set_target(None)  # the E0900 examples choose a target
    return None, path


# --- the page against errors.CODES ----------------------------------------------------------


def test_every_code_has_a_section_titled_as_in_CODES() -> None:
    sections = doc_sections()
    missing = [code for code in CODES if code not in sections]
    assert not missing, f"docs/errors.md has no section for {missing}"
    for code, (title, _) in sections.items():
        assert code in CODES, f"docs/errors.md explains {code}, which errors.CODES does not have"
        assert title == CODES[code], f"{code}: the heading says {title!r}, CODES {CODES[code]!r}"
    assert list(sections) == list(CODES), "sections are in the order of errors.CODES"


@pytest.mark.parametrize("code", list(CODES))
def test_each_section_has_an_explanation_a_failing_example_its_output_and_a_fix(code: str) -> None:
    _, body = doc_sections()[code]
    explanation = body.split("```", 1)[0].strip()
    assert len(explanation.split()) >= 40, f"{code}: explain the rule and why it exists"
    blocks = [b for b in BLOCKS if b.section == code]
    fails = [b for b in blocks if b.fails_with is not None]
    if not fails:  # only a code that no correct fearless raises (E0999) has no example
        assert NO_EXAMPLE_NOTE in body, f"{code}: no ```python fail={code} example"
        assert any(b.lang == "text" and b.text.startswith(f"error[{code}]: ") for b in blocks)
        return
    assert any(b.runs for b in fails) or all(NOT_RUN_NOTE in b.before for b in fails)
    for b in fails:
        assert b.fails_with == code, f"{code}: an example in its section is marked {b.fails_with}"
        after = blocks[b.number + 1] if b.number + 1 < len(blocks) else None
        assert after is not None and after.lang == "text", f"{b.id}: no ```text output after it"
        assert after.text.startswith(f"error[{code}]: "), f"{b.id}: the output is not {code}'s"
    assert any("fix" in b.flags for b in blocks), f"{code}: no ```python fix block"


def test_blocks_that_do_not_run_say_why() -> None:
    for b in BLOCKS:
        if "no-run" in b.flags:
            assert NOT_RUN_NOTE in b.before, f"{b.id} is no-run: say why in a `{NOT_RUN_NOTE}` note"


# --- the examples, run on the simulator -----------------------------------------------------


def _output_after(block: Block) -> str:
    return next(
        b for b in BLOCKS if b.section == block.section and b.number == block.number + 1
    ).text


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.fails_with and b.runs], ids=lambda b: b.id
)
def test_failing_example_raises_its_code_with_the_output_shown(
    block: Block, tmp_path: Path
) -> None:
    err, path = run_example(block, tmp_path / block.id)
    assert err is not None, f"{block.id} ran without error; it should raise {block.fails_with}"
    assert err.diagnostic.code == block.fails_with, str(err)
    rendered = str(err).replace(str(path), "example.py")
    assert "Traceback" not in rendered
    assert rendered + "\n" == _output_after(block), (
        f"docs/errors.md shows another diagnostic for {block.id}; fearless now prints:\n{rendered}"
    )


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if "fix" in b.flags and b.runs], ids=lambda b: b.id
)
def test_fixed_example_runs(block: Block, tmp_path: Path) -> None:
    err, _ = run_example(block, tmp_path / block.id)
    assert err is None, f"the fix of {block.section} still fails:\n{err}"


# --- `fearless explain` ---------------------------------------------------------------------


def test_the_packaged_reference_is_docs_errors_md() -> None:
    assert PACKAGED.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8"), (
        f"{PACKAGED.relative_to(ROOT)} is the copy `fearless explain` ships: "
        "cp docs/errors.md src/fearless/cli/errors.md"
    )


@pytest.mark.parametrize("spelling", ["E0502", "e0502", "0502", "502"])
def test_explain_prints_the_section(spelling: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", spelling]) == 0
    out = capsys.readouterr().out
    title, body = doc_sections()["E0502"]
    assert out.startswith(f"## E0502: {title}\n")
    assert out.rstrip() == f"## E0502: {title}{body}".rstrip()
    assert "## E0594" not in out


def test_explain_without_a_code_lists_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain"]) == 0
    out = capsys.readouterr().out
    for code, title in CODES.items():
        assert f"{code}  {title}" in out


@pytest.mark.parametrize("code", ["E9999", "borrow"])
def test_explain_an_unknown_code_exits_2(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", code]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert "E0502" in captured.err and "fearless explain" in captured.err


def test_no_error_renders_an_undocumented_code() -> None:
    import fearless.errors as errors

    for cls in vars(errors).values():
        if (
            isinstance(cls, type)
            and issubclass(cls, errors.FearlessError)
            and cls is not errors.FearlessError
        ):
            assert cls("x").code in errors.CODES, cls
    bare = errors.FearlessError("something")
    assert bare.code == "E0999" and "undocumented code E0000" in str(bare)
    assert errors.FearlessError("x", code="E1234").code == "E0999"


def test_a_wrong_argument_is_an_argument_error_python_can_catch() -> None:
    """E0701 is always `fl.ArgumentError`: a KernelTypeError that is also a TypeError and a
    ValueError, so `except ValueError` (TileGym's tests of its operators' invalid inputs) and
    `except TypeError` catch it, at an operator and at a launch alike; no module builds an E0701
    as a bare KernelTypeError."""
    import numpy as np

    from fearless import ops

    for call in (
        lambda: ops.softmax(np.zeros((4, 8), np.int8)),  # a dtype the operator does not take
        lambda: ops.nvfp4_quantize(np.zeros((128, 63), np.float32)),  # cols not a multiple of 16
        lambda: ops.layer_norm(np.zeros((4, 8), np.float32), (7,)),  # a shape that does not fit
    ):
        with pytest.raises(ValueError) as e:
            call()
        assert type(e.value) is fl.ArgumentError and e.value.code == "E0701"
        assert isinstance(e.value, (fl.KernelTypeError, TypeError, fl.FearlessError))
    src = Path(fl.__file__).parent
    bare = [
        p.name
        for p in src.rglob("*.py")
        if 'code="E0701"' in p.read_text() and p.name != "errors.py"
    ]
    assert bare == [], f"E0701 built as a bare KernelTypeError in {bare}: use ArgumentError"
