"""Each SIMT pass on its own, starting from IR text: parse, run one pass, FileCheck the result.

The inputs are small functions written in the printer's syntax (`ir/simt/parser.py` reads them),
so a test states exactly the IR a pass sees instead of whatever the frontend lowers a Python
kernel to. Every input and output is verified, and every output parses back to itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from filecheck.matcher import Matcher
from filecheck.options import Options

from fearless.ir.core import Function
from fearless.ir.simt.parser import parse_function
from fearless.ir.simt.printer import print_function
from fearless.ir.simt.verifier import verify
from fearless.simt.passes import bounds_elim, bounds_insert, bounds_merge, dce
from fearless.simt.passes.options import PassOptions

Pass = Callable[[Function, PassOptions], None]


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    """Run FileCheck directives (`CHECK:`, `CHECK-NEXT:`, `CHECK-NOT:`, ...) against `text`."""
    check_file, input_file = tmp_path / "checks.txt", tmp_path / "input.txt"
    check_file.write_text(checks)
    input_file.write_text(text)
    matcher = Matcher.from_opts(Options(match_filename=str(check_file), input_file=str(input_file)))
    assert matcher.run() == 0, f"FileCheck failed (details on stderr) on:\n{text}"


def run_pass(text: str, run: Pass, options: PassOptions | None = None) -> tuple[str, PassOptions]:
    """Parse `text`, run the one pass, return the printed result (without locations)."""
    fn = parse_function(text, "k.py")
    verify(fn)
    options = options if options is not None else PassOptions()
    run(fn, options)
    verify(fn)
    out = print_function(fn, with_locs=False)
    assert print_function(parse_function(out), with_locs=False) == out
    return out, options


# ------------------------------------------------------------------------------ bounds_insert

COPY = """
func @copy(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, c
^bb0:  // entry
  %2 = thread.index_1d : ThreadIndex                       // 3:9
  %3 = index.int %2 : i64                                  // 4:14
  %4 = load %0, %3 : f32                                   // 4:12
  store %1, %3, %4                                         // 4:5
  return                                                   // 4:5
}
"""


def test_insert_puts_a_check_before_each_load_and_store(tmp_path: Path) -> None:
    out, options = run_pass(COPY, bounds_insert.run)
    filecheck(
        out,
        """
CHECK:      %[[I:[0-9]+]] = index.int
CHECK-NEXT: %[[NA:[0-9]+]] = len %0 : i64
CHECK-NEXT: check.bounds {sites=(0,)} %[[I]], %[[NA]]
CHECK-NEXT: %[[X:[0-9]+]] = load %0, %[[I]] : f32
CHECK-NEXT: %[[NC:[0-9]+]] = len %1 : i64
CHECK-NEXT: check.bounds {sites=(1,)} %[[I]], %[[NC]]
CHECK-NEXT: store %1, %[[I]], %[[X]]
CHECK-NEXT: return
""",
        tmp_path,
    )
    # The sites name the parameter (from the `// params:` comment) and the user's line.
    assert [(s.kind, s.param, s.axis, str(s.loc)) for s in options.sites] == [
        ("read", "a", None, "k.py:4:12"),
        ("write", "c", None, "k.py:4:5"),
    ]


def test_insert_checks_each_axis_of_a_2d_access(tmp_path: Path) -> None:
    text = """
func @t(%0: Slice[f32, 2], %1: DisjointSlice[f32, 2]) {   // params: x, out
^bb0:
  %2 = thread.index_2d : ThreadIndex2D
  %3 = index.axis {axis=0} %2 : i64
  %4 = index.axis {axis=1} %2 : i64
  %5 = load %0, %4, %3 : f32                               // 7:18
  store %1, %3, %4, %5
  return
}
"""
    out, options = run_pass(text, bounds_insert.run)
    filecheck(
        out,
        """
CHECK:      %[[R:[0-9]+]] = index.axis {axis=0}
CHECK-NEXT: %[[C:[0-9]+]] = index.axis {axis=1}
CHECK-NEXT: %[[N0:[0-9]+]] = len {axis=0} %0 : i64
CHECK-NEXT: check.bounds {sites=(0,)} %[[C]], %[[N0]]
CHECK-NEXT: %[[N1:[0-9]+]] = len {axis=1} %0 : i64
CHECK-NEXT: check.bounds {sites=(1,)} %[[R]], %[[N1]]
CHECK-NEXT: load %0, %[[C]], %[[R]] : f32
CHECK-NEXT: len {axis=0} %1
CHECK-NEXT: check.bounds {sites=(2,)} %[[R]]
CHECK-NEXT: len {axis=1} %1
CHECK-NEXT: check.bounds {sites=(3,)} %[[C]]
CHECK-NEXT: store %1
""",
        tmp_path,
    )
    assert [(s.kind, s.param, s.axis) for s in options.sites] == [
        ("read", "x", 0),
        ("read", "x", 1),
        ("write", "out", 0),
        ("write", "out", 1),
    ]
    assert options.sites[0].loc.line == 7


def test_insert_adds_nothing_to_an_unsafe_kernel() -> None:
    out, options = run_pass(COPY, bounds_insert.run, PassOptions(insert_checks=False))
    assert out == print_function(parse_function(COPY), with_locs=False)
    assert options.sites == []


# ------------------------------------------------------------------------------- bounds_elim

# `if i < len(a): c[i] = a[i]`, after bounds_insert; ^bb2 reads a[i] outside the guard.
GUARDED = """
func @k(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, c
^bb0:  // entry
  %2 = thread.index_1d : ThreadIndex
  %3 = len %0 : i64
  %4 = index.int %2 : i64
  %5 = compare {pred='lt'} %4, %3 : bool
  cond_br %5, ^bb1, ^bb2
^bb1:  // if.then
  %6 = len %0 : i64
  check.bounds {sites=(0,)} %4, %6
  %7 = load %0, %4 : f32
  %8 = len %1 : i64
  check.bounds {sites=(1,)} %4, %8
  store %1, %4, %7
  return
^bb2:  // if.else
  %9 = len %0 : i64
  check.bounds {sites=(2,)} %4, %9
  %10 = load %0, %4 : f32
  return
}
"""


def test_elim_removes_a_guarded_check_and_keeps_the_others(tmp_path: Path) -> None:
    out, options = run_pass(GUARDED, bounds_elim.run)
    filecheck(
        out,
        """
CHECK-LABEL: ^bb1:  // if.then
CHECK-NOT:   check.bounds {sites=(0,)}
CHECK:       load %0
CHECK:       check.bounds {sites=(1,)}
CHECK-NEXT:  store %1
CHECK-LABEL: ^bb2:  // if.else
CHECK:       check.bounds {sites=(2,)}
CHECK-NEXT:  load %0
""",
        tmp_path,
    )
    assert options.checks_removed == 1  # a[i] under the guard; not c[i], not a[i] outside


def test_elim_uses_the_false_edge_of_a_negated_guard(tmp_path: Path) -> None:
    # `if i >= len(a): return` then `a[i]`
    text = """
func @k(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, c
^bb0:
  %2 = thread.index_1d : ThreadIndex
  %3 = index.int %2 : i64
  %4 = len %0 : i64
  %5 = compare {pred='ge'} %3, %4 : bool
  cond_br %5, ^bb1, ^bb2
^bb1:
  return
^bb2:
  %6 = len %0 : i64
  check.bounds {sites=(0,)} %3, %6
  %7 = load %0, %3 : f32
  return
}
"""
    out, options = run_pass(text, bounds_elim.run)
    filecheck(out, "CHECK-LABEL: ^bb2:\nCHECK-NOT: check.bounds\nCHECK: load %0\n", tmp_path)
    assert options.checks_removed == 1


def test_elim_keeps_a_check_reached_around_the_guard(tmp_path: Path) -> None:
    # ^bb2 is reached from the guard's true edge and from its false edge: nothing is proven.
    text = """
func @k(%0: Slice[f32]) {   // params: a
^bb0:
  %1 = thread.index_1d : ThreadIndex
  %2 = index.int %1 : i64
  %3 = len %0 : i64
  %4 = compare {pred='lt'} %2, %3 : bool
  cond_br %4, ^bb1, ^bb2
^bb1:
  br ^bb2
^bb2:
  %5 = len %0 : i64
  check.bounds {sites=(0,)} %2, %5
  %6 = load %0, %2 : f32
  return
}
"""
    out, options = run_pass(text, bounds_elim.run)
    filecheck(out, "CHECK-LABEL: ^bb2:\nCHECK-NEXT: len %0\nCHECK-NEXT: check.bounds\n", tmp_path)
    assert options.checks_removed == 0


def test_elim_needs_a_non_negative_index(tmp_path: Path) -> None:
    # `j = idx[i]` may be negative: `j < len(a)` alone does not prove a[j].
    text = """
func @k(%0: Slice[f32], %1: Slice[i64]) {   // params: a, idx
^bb0:
  %2 = thread.index_1d : ThreadIndex
  %3 = index.int %2 : i64
  %4 = load %1, %3 : i64
  %5 = len %0 : i64
  %6 = compare {pred='lt'} %4, %5 : bool
  cond_br %6, ^bb1, ^bb2
^bb1:
  %7 = len %0 : i64
  check.bounds {sites=(0,)} %4, %7
  %8 = load %0, %4 : f32
  check.bounds {sites=(1,)} %3, %7
  %9 = load %0, %3 : f32
  return
^bb2:
  return
}
"""
    out, options = run_pass(text, bounds_elim.run)
    filecheck(
        out,
        """
CHECK-LABEL: ^bb1:
CHECK:       check.bounds {sites=(0,)}
CHECK-NEXT:  load %0
CHECK-NEXT:  check.bounds {sites=(1,)}
CHECK-NEXT:  load %0
""",
        tmp_path,
    )
    assert options.checks_removed == 0  # nor a[i]: the guard is on j, not on i


def test_elim_follows_requires_relations_and_constant_offsets(tmp_path: Path) -> None:
    # `if i < len(c) - 1: ... a[i + 1] ... a[i + 2]`, with or without len(a) >= len(c)
    text = """
func @k(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, c
^bb0:
  %2 = thread.index_1d : ThreadIndex
  %3 = index.int %2 : i64
  %4 = len %1 : i64
  %5 = constant {value=1} : i64
  %6 = binary {kind='sub'} %4, %5 : i64
  %7 = compare {pred='lt'} %3, %6 : bool
  cond_br %7, ^bb1, ^bb2
^bb1:
  %8 = binary {kind='add'} %3, %5 : i64
  %9 = len %0 : i64
  check.bounds {sites=(0,)} %8, %9
  %10 = load %0, %8 : f32
  %11 = constant {value=2} : i64
  %12 = binary {kind='add'} %3, %11 : i64
  check.bounds {sites=(1,)} %12, %9
  %13 = load %0, %12 : f32
  return
^bb2:
  return
}
"""
    out, options = run_pass(text, bounds_elim.run)
    assert options.checks_removed == 0  # nothing relates len(a) to len(c)
    out, options = run_pass(text, bounds_elim.run, PassOptions(len_relations=[("a", ">=", "c")]))
    filecheck(
        out,
        """
CHECK-LABEL: ^bb1:
CHECK-NOT:   check.bounds {sites=(0,)}
CHECK:       check.bounds {sites=(1,)}
""",
        tmp_path,
    )
    assert options.checks_removed == 1  # i + 1 < len(c) <= len(a); i + 2 may equal len(a)


# --------------------------------------------------------------------------------------- dce


def test_dce_removes_unused_pure_ops_and_loads_but_not_effects(tmp_path: Path) -> None:
    text = """
func @k(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, c
^bb0:
  %2 = thread.index_1d : ThreadIndex
  %3 = index.int %2 : i64
  %4 = constant {value=2.0} : f32
  %5 = constant {value=3.0} : f32
  %6 = binary {kind='mul'} %4, %5 : f32
  %7 = math {fn='sqrt'} %6 : f32
  %8 = load %0, %3 : f32
  %9 = len %0 : i64
  %10 = len %1 : i64
  check.bounds {sites=(0,)} %3, %10
  store %1, %3, %4
  %11 = constant {value=True} : bool
  cond_br %11, ^bb1, ^bb1
^bb1:
  return
}
"""
    out, _ = run_pass(text, dce.run)
    filecheck(
        out,
        """
CHECK:      %[[T:[0-9]+]] = thread.index_1d
CHECK-NEXT: %[[I:[0-9]+]] = index.int %[[T]]
CHECK-NEXT: %[[TWO:[0-9]+]] = constant {value=2.0} : f32
CHECK-NEXT: %[[N:[0-9]+]] = len %1
CHECK-NEXT: check.bounds {sites=(0,)} %[[I]], %[[N]]
CHECK-NEXT: store %1, %[[I]], %[[TWO]]
CHECK-NEXT: %[[B:[0-9]+]] = constant {value=True}
CHECK-NEXT: cond_br %[[B]], ^bb1, ^bb1
CHECK-NOT:  constant {value=3.0}
CHECK-NOT:  load
""",
        tmp_path,
    )
    # The chain constant 3.0 -> mul -> sqrt goes in one run (to a fixed point).
    assert "binary" not in out and "math" not in out and "load" not in out


def test_dce_keeps_values_passed_to_a_block() -> None:
    text = """
func @k(%0: DisjointSlice[i64]) {   // params: c
^bb0:
  %1 = thread.index_1d : ThreadIndex
  %2 = index.int %1 : i64
  %3 = constant {value=0} : i64
  %4 = constant {value=1} : i64
  br ^bb1(%3, %4)
^bb1(%5: i64, %6: i64):
  store %0, %2, %5
  return
}
"""
    out, _ = run_pass(text, dce.run)
    # %6 is unused, but a block argument is no op: both constants stay, passed by the branch
    assert out == print_function(parse_function(text), with_locs=False)


def test_dce_after_elim_drops_the_lengths_of_removed_checks(tmp_path: Path) -> None:
    elim_out, _ = run_pass(GUARDED, bounds_elim.run)
    out, _ = run_pass(elim_out, dce.run)
    filecheck(
        out,
        """
CHECK-LABEL: ^bb1:  // if.then
CHECK-NEXT:  %[[X:[0-9]+]] = load %0
CHECK-NEXT:  %[[N:[0-9]+]] = len %1
CHECK-NEXT:  check.bounds {sites=(1,)} %{{[0-9]+}}, %[[N]]
CHECK-LABEL: ^bb2:  // if.else
CHECK-NEXT:  len %0
CHECK-NEXT:  check.bounds {sites=(2,)}
CHECK-NEXT:  return
""",
        tmp_path,
    )


# ------------------------------------------------------------------------------ bounds_merge


def test_merge_groups_the_checks_of_a_block(tmp_path: Path) -> None:
    text = """
func @k(%0: Slice[f32], %1: Slice[f32]) {   // params: a, b
^bb0:
  %2 = thread.index_1d : ThreadIndex
  %3 = index.int %2 : i64
  %4 = len %0 : i64
  check.bounds {sites=(0,)} %3, %4
  %5 = load %0, %3 : f32
  %6 = len %1 : i64
  check.bounds {sites=(1,)} %3, %6
  %7 = load %1, %3 : f32
  return
}
"""
    out, _ = run_pass(text, bounds_merge.run)
    filecheck(
        out,
        """
CHECK:      %[[NA:[0-9]+]] = len %0
CHECK-NEXT: %[[NB:[0-9]+]] = len %1
CHECK-NEXT: check.bounds {sites=(0, 1)} %[[I:[0-9]+]], %[[NA]], %[[I]], %[[NB]]
CHECK-NEXT: load %0
CHECK-NEXT: load %1
""",
        tmp_path,
    )
