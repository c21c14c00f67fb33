"""`fearless check`: the static host-code check (E0502 aliased launches, E0382 moved tensors).

The corpus under check_corpus/ keeps each expectation on the offending line, as
`# error[CODE] col N: message` or `# warning[CODE] col N: message`; a file without one must be
clean. The other tests write small programs into tmp_path and check one behaviour each.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fearless.check import driver, flow
from fearless.check.driver import check_file, check_source
from fearless.check.kernels import Resolver
from fearless.cli.main import main

CORPUS_DIR = Path(__file__).parent / "check_corpus"
CORPUS = sorted(CORPUS_DIR.rglob("*.py"))
EXPECT = re.compile(r"#\s*(error|warning)\[(E\d{4})\]\s*col\s*(\d+):\s*(.+)$")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(__file__).resolve().parents[1] / "src"

KERNELS = """\
import fearless as fl
from fearless import simt


@simt.kernel
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]
"""


def expectations(path: Path) -> list[tuple[str, str, int, int, str]]:
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            out.append((m.group(1), m.group(2), lineno, int(m.group(3)), m.group(4).strip()))
    return out


def found(path: Path) -> list[tuple[str, str, int, int]]:
    """(severity, code, line, 1-based column) of each finding in a file."""
    out = []
    for f in check_file(path).findings:
        loc = f.diagnostic.loc
        assert loc is not None, f.render()
        out.append((f.severity, f.diagnostic.code, loc.line, loc.col + 1))
    return out


def write(tmp_path: Path, name: str, body: str, kernels: bool = True) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((KERNELS + "\n\n" if kernels else "") + textwrap.dedent(body))
    return path


def line_of(path: Path, text: str) -> int:
    """The line number of the first line of `path` that contains `text`."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


# --- the corpus ---------------------------------------------------------------------------


def test_corpus_has_clean_and_failing_files() -> None:
    with_expectations = [p for p in CORPUS if expectations(p)]
    assert len(CORPUS) >= 12
    assert len(with_expectations) >= 8
    assert len(CORPUS) - len(with_expectations) >= 4  # clean files that must pass


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(CORPUS_DIR)))
def test_corpus(path: Path) -> None:
    want = expectations(path)
    findings = check_file(path).findings
    got = [(f.severity, f.diagnostic.code, f.diagnostic.loc) for f in findings]
    assert [(s, c, loc.line, loc.col + 1) for s, c, loc in got if loc] == [
        (s, c, line, col) for s, c, line, col, _ in want
    ], "\n\n".join(f.render() for f in findings)
    for finding, (*_, message) in zip(findings, want, strict=True):
        assert message in finding.diagnostic.message, finding.render()
        rendered = finding.render()
        loc = finding.diagnostic.loc
        assert loc is not None
        assert f"--> {path}:{loc.line}:{loc.col + 1}" in rendered
        assert "^" in rendered


# --- E0502: the diagnostic and the command ------------------------------------------------


def test_aliased_launch_is_reported_with_caret_note_and_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = CORPUS_DIR / "alias_output_input.py"
    line = line_of(path, "vecadd[(n + 255) // 256, 256](a, b, a)")
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    source = path.read_text().splitlines()[line - 1]
    expected = "\n".join(
        [
            "error[E0502]: cannot borrow `a` as mutable because it is also borrowed as immutable",
            f"  --> {path}:{line}:37",
            "   |",
            f"{line} | {source}",
            "   | " + " " * 36 + "^ mutable borrow occurs here",
            "   |",
            "  = note: `a` is passed as `c` (DisjointSlice) and as `a` (Slice) of `vecadd`",
            "  = help: give the output `c` memory of its own (e.g. a new `fl.empty(...)`): an "
            "output may not share memory with any other argument of the same launch",
        ]
    )
    assert out.startswith(expected + "\n\n"), out
    assert out.endswith("checked 1 file: 3 errors\n")


def test_alias_through_assignment_names_both(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "alias.py",
        """\
        a = fl.zeros(64)
        x = fl.zeros(64)
        b = a
        vecadd[1, 64](a, x, b)
        """,
    )
    (finding,) = check_file(path).findings
    assert finding.severity == "error"
    assert finding.diagnostic.message.startswith("cannot borrow `b` as mutable")
    assert "`b` and `a` are the same array here" in finding.diagnostic.notes
    assert "`b` is passed as `c` (DisjointSlice) and `a` as `a` (Slice) of `vecadd`" in (
        finding.diagnostic.notes
    )


def test_alias_ends_when_either_name_is_rebound(tmp_path: Path) -> None:
    rebind_new = write(
        tmp_path, "new.py", "a = fl.zeros(64)\nb = a\nb = fl.empty(64)\nvecadd[1, 64](a, a, b)\n"
    )
    rebind_old = write(
        tmp_path, "old.py", "a = fl.zeros(64)\nb = a\na = fl.empty(64)\nvecadd[1, 64](b, b, a)\n"
    )
    still = write(tmp_path, "still.py", "a = fl.zeros(64)\nb = a\nx = b\nvecadd[1, 64](x, a, a)\n")
    assert found(rebind_new) == []
    assert found(rebind_old) == []
    assert found(still) == [("error", "E0502", line_of(still, "vecadd[1, 64](x"), 21)]


def test_loops_ping_pong_and_fresh_outputs_are_clean(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "loops.py",
        """\
        a, b, c = fl.zeros(64), fl.zeros(64), fl.zeros(64)
        for _ in range(4):
            vecadd[1, 64](a, c, b)
            a, b = b, a
        prev = a
        while True:
            out = fl.empty(64)
            vecadd[1, 64](prev, c, out)
            prev = out
            if prev is None:
                break
        """,
    )
    assert found(path) == []


def test_aliasing_on_some_paths_is_a_warning_with_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        "maybe.py",
        """\
        import sys
        a = fl.zeros(64)
        out = fl.empty(64)
        if len(sys.argv) > 1:
            out = a
        vecadd[1, 64](a, a, out)
        """,
    )
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("warning[E0502]: `out` may be the same array as `a` in this launch")
    assert "possibly aliased output" in out
    assert out.endswith("checked 1 file: 1 warning\n")


def test_kernel_from_a_module_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "lib"
    write(lib, "shared_kernels.py", "")
    app = write(
        tmp_path / "app",
        "main.py",
        "import fearless as fl\nfrom shared_kernels import vecadd\na = fl.zeros(8)\n"
        "vecadd[1, 8](a, a, a)\n",
        kernels=False,
    )
    assert found(app) == []  # not next to the file, not on sys.path: unknown, not a kernel
    monkeypatch.syspath_prepend(str(lib))
    assert found(app) == [("error", "E0502", 4, 20)]


def test_the_checked_file_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = write(
        tmp_path,
        "side_effects.py",
        f"""\
        open({str(marker)!r}, "w").close()
        a = fl.zeros(8)
        vecadd[1, 8](a, a, a)
        """,
    )
    assert [f[:2] for f in found(path)] == [("error", "E0502")]
    assert not marker.exists()


def test_fearless_ignore_comment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ignored.py",
        """\
        a = fl.zeros(8)
        vecadd[1, 8](a, a, a)  # fearless: ignore[E0502] (shows the launch-time error)
        vecadd[1, 8](a, a, a)  # fearless: ignore[E0382]
        vecadd[1, 8](a, a, a)  # fearless: ignore
        """,
    )
    assert found(path) == [("error", "E0502", line_of(path, "ignore[E0382]"), 20)]


def test_columns_count_characters_not_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "utf8.py", "größe = fl.zeros(8)\nvecadd[1, 8](größe, größe, größe)\n")
    (finding,) = check_file(path).findings
    assert finding.diagnostic.loc is not None
    assert finding.diagnostic.loc.col + 1 == len("vecadd[1, 8](größe, größe, ") + 1
    assert "^^^^^ mutable borrow occurs here" in finding.render()


def test_derivations_in_a_loop_are_bounded(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "widen.py",
        """\
        a = fl.zeros(64)
        x = a
        for _ in range(100):
            x = x.T
            y = x[1:]
            x = y
        vecadd[1, 64](a, a, x)
        """,
    )
    assert found(path) == [("warning", "E0502", line_of(path, "vecadd[1, 64](a, a, x)"), 21)]


def test_a_scope_over_budget_is_walked_on_one_joined_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        tmp_path,
        "big.py",
        """\
        import sys
        a = fl.zeros(8)
        out = fl.empty(8)
        if len(sys.argv) > 2:
            out = fl.empty(8)
        vecadd[1, 8](a, a, a)
        vecadd[1, 8](a, a, out)
        """,
    )
    expected = [("error", "E0502", line_of(path, "vecadd[1, 8](a, a, a)"), 20)]
    assert found(path) == expected
    monkeypatch.setattr(flow, "BUDGET", 3)
    assert found(path) == expected  # the same answer, from the cheaper walk
    monkeypatch.setattr(flow, "BUDGET_JOINED", 3)
    assert found(path) == []  # too big to check at all: nothing is claimed


# --- E0382 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "note", "help"),
    [
        (
            """\
            z = fl.zeros(1024)
            zp = z.partition((128,))
            z.numpy()
            z = zp.unpartition()
            z.numpy()
            """,
            "`zp = z.partition((128,))`",
            "take the tensor back before using it: `z = zp.unpartition()`",
        ),
        (  # a `with` block moves the tensor for its body only
            """\
            z = fl.zeros(1024)
            with z.partition((128,)) as zp:
                z.numpy()
            z.numpy()
            with z.partition((128,)) as zp:
                z = zp.unpartition()
                z.numpy()
            """,
            "`with z.partition((128,)) as zp:`",
            "use `z` after the `with` block, whose end gives the tensor back, or take it back "
            "inside the block: `z = zp.unpartition()`",
        ),
    ],
    ids=["assigned", "with"],
)
def test_use_after_partition_and_after_give_back(
    tmp_path: Path, source: str, note: str, help: str
) -> None:
    path = write(tmp_path, "moves.py", source, kernels=False)
    findings = check_file(path).findings
    assert [(f.diagnostic.code, f.diagnostic.loc.line) for f in findings if f.diagnostic.loc] == [
        ("E0382", 3)
    ]
    text = findings[0].render()
    assert text.startswith("error[E0382]: use of moved value: `z`")
    assert f"= note: `z` moved into a partition at line 2: {note}" in text
    assert f"= help: {help}" in text


def test_partition_in_a_loop_needs_a_give_back_each_iteration(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "good.py",
        "t = fl.zeros(8)\nfor _ in range(3):\n    p = t.partition((8,))\n    t = p.unpartition()\n",
        kernels=False,
    )
    bad = write(
        tmp_path,
        "bad.py",
        "t = fl.zeros(8)\nfor _ in range(3):\n    p = t.partition((8,))\nprint(p)\n",
        kernels=False,
    )
    assert found(good) == []
    (finding,) = check_file(bad).findings
    assert finding.diagnostic.code == "E0382" and finding.diagnostic.loc is not None
    assert (finding.diagnostic.loc.line, finding.diagnostic.loc.col + 1) == (3, 9)
    assert any("earlier iteration of the loop" in n for n in finding.diagnostic.notes)


def test_a_spec_partition_moves_nothing(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "specs.py",
        """\
        s = tile.Spec((1024,), fl.f32)
        k.specialise(s.partition((128,)), s, s)
        t = fl.zeros(1024)
        k.specialise(s.partition((256,)), t.partition((128,)), t)
        """,
        kernels=False,
    )
    # The Spec's partitions are descriptions; the real tensor `t` does move.
    assert [(f.diagnostic.code, f.diagnostic.loc.line) for f in check_file(path).findings
            if f.diagnostic.loc] == [("E0382", 4)]  # fmt: skip


def test_return_and_raise_end_a_path(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "paths.py",
        """\
        def f(t, flag):
            if flag:
                p = t.partition((8,))
                return p
            if not flag:
                q = t.partition((8,))
                raise ValueError(q)
            return t
        """,
        kernels=False,
    )
    assert found(path) == []


# --- the command: files, folders, exit status ---------------------------------------------


def test_clean_files_pass_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    clean = [p for p in CORPUS if not expectations(p)]
    assert main(["check", *map(str, clean)]) == 0
    assert capsys.readouterr().out == f"checked {len(clean)} files: no problems found\n"


def test_the_examples_pass() -> None:
    assert main(["check", str(EXAMPLES)]) == 0


def test_syntax_error_is_a_diagnostic_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(tmp_path, "broken.py", "def f(:\n    pass\n", kernels=False)
    dirty = CORPUS_DIR / "two_outputs.py"
    assert main(["check", str(broken), str(dirty)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: cannot parse `")
    assert f"--> {broken}:1:7" in out
    assert "error[E0502]" in out  # the other file is still checked
    assert out.endswith("checked 2 files: 2 errors (1 file could not be checked)\n")


def test_missing_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.py")]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: cannot read `{tmp_path / 'nope.py'}`: No such file")


def test_folders_are_searched_for_python_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "a.py", "x = fl.zeros(8)\nvecadd[1, 8](x, x, x)\n")
    write(tmp_path, "sub/b.py", "y = fl.zeros(8)\nvecadd[1, 8](y, fl.zeros(8), y)\n")
    write(tmp_path, "sub/clean.py", "vecadd[1, 8](fl.zeros(8), fl.zeros(8), fl.empty(8))\n")
    write(tmp_path, ".hidden/c.py", "z = fl.zeros(8)\nvecadd[1, 8](z, z, z)\n")
    (tmp_path / "notes.txt").write_text("vecadd[1, 8](z, z, z)\n")
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.endswith("checked 3 files: 2 errors\n")
    assert f"{tmp_path / 'a.py'}:" in out and f"{tmp_path / 'sub' / 'b.py'}:" in out


def test_a_fifo_in_a_folder_is_skipped_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "x = fl.zeros(8)\nvecadd[1, 8](x, x, x)\n")
    os.mkfifo(tmp_path / "pipe.py")  # opening it to read would wait for a writer forever
    proc = python_m_fearless("check", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert f"note: skipped `{tmp_path / 'pipe.py'}`: it is a FIFO, not a regular file" in (
        proc.stdout
    )
    assert proc.stdout.endswith("checked 1 file: 1 error\n")
    named = python_m_fearless("check", str(tmp_path / "pipe.py"))  # named: not read either
    assert named.returncode == 2
    assert named.stdout.startswith(
        f"error: cannot read `{tmp_path / 'pipe.py'}`: it is a FIFO, not a regular file"
    )


def test_a_file_with_a_coding_line_is_decoded_as_python_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin.py"
    body = (
        "# -*- coding: latin-1 -*-\n"
        + KERNELS
        + '\nx = fl.zeros(8); s = "café"; vecadd[1, 8](x, x, x)\n'
    )
    path.write_bytes(body.encode("latin-1"))
    (finding,) = check_file(path).findings
    assert finding.diagnostic.code == "E0502"
    loc = finding.diagnostic.loc
    assert loc is not None and loc.line == line_of_bytes(path, b"caf\xe9")
    line = body.splitlines()[loc.line - 1]
    assert loc.col == line.rindex("x)")  # the output `c`; columns in characters: é is one
    assert main(["check", str(path)]) == 1
    assert 's = "café"; vecadd[1, 8](x, x, x)' in capsys.readouterr().out
    bad = tmp_path / "bad_coding.py"
    bad.write_bytes(b"# coding: no-such-codec\nx = 1\n")
    assert main(["check", str(bad)]) == 2
    assert f"cannot read `{bad}`: unknown encoding: no-such-codec" in capsys.readouterr().out


def line_of_bytes(path: Path, text: bytes) -> int:
    return next(i for i, line in enumerate(path.read_bytes().splitlines(), 1) if text in line)


def deep_program(tmp_path: Path, terms: int) -> Path:
    """A launch with aliased arguments after an expression of `terms` terms (nested as deep)."""
    total = " + ".join(["x[0]"] * terms)
    return write(
        tmp_path, f"deep{terms}.py", f"x = fl.zeros(8)\ny = {total}\nvecadd[1, 8](x, x, x)\n"
    )


def test_a_2000_term_expression_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = deep_program(tmp_path, 2000)
    (finding,) = check_file(path).findings
    assert finding.diagnostic.code == "E0502"
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out.endswith("checked 1 file: 1 error\n")


def test_a_50000_term_expression_does_not_crash_the_check(tmp_path: Path) -> None:
    path = deep_program(tmp_path, 50_000)
    proc = python_m_fearless("check", str(path), str(CORPUS_DIR / "two_outputs.py"))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if sys.version_info < (3, 12):  # its parser builds ASTs this deep: the file is checked
        assert proc.returncode == 1
        assert proc.stdout.endswith("checked 2 files: 2 errors\n")
    else:  # a fixed C recursion limit: reported, and the other file still checked
        assert proc.returncode == 2
        assert "nests too deeply" in proc.stdout
    assert "cannot borrow `out` as mutable more than once" in proc.stdout


def test_a_file_nested_too_deeply_is_reported_and_the_others_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(driver, "RECURSION_LIMIT", 1500)
    path = deep_program(tmp_path, 20_000)
    assert main(["check", str(path), str(CORPUS_DIR / "two_outputs.py")]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: cannot check `{path}`: it nests too deeply to analyse")
    assert "error[E0502]" in out
    assert out.endswith("checked 2 files: 2 errors (1 file could not be checked)\n")


def python_m_fearless(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m fearless ARGS` in a fresh interpreter (a hang fails, not blocks, the test)."""
    return subprocess.run(
        [sys.executable, "-m", "fearless", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": ""},
        timeout=120,
        check=False,
    )


def test_check_source_and_a_shared_resolver() -> None:
    resolver = Resolver(search_path=[])
    source = (CORPUS_DIR / "imports_kernels.py").read_text()
    file = str(CORPUS_DIR / "imports_kernels.py")
    first = check_source(source, file, resolver)
    assert [f.diagnostic.code for f in first] == ["E0502"] * 4
    assert [f.render() for f in check_source(source, file, resolver)] == [f.render() for f in first]


def test_python_m_fearless_check() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fearless", "check", str(CORPUS_DIR / "two_outputs.py")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": ""},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "error[E0502]: cannot borrow `out` as mutable more than once at a time" in proc.stdout
    assert proc.stdout.endswith("checked 1 file: 1 error\n")


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "-h"]) == 0
    assert capsys.readouterr().out.startswith("usage: fearless check")
