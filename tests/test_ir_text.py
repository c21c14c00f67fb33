"""The IR's text form read back (`ir/simt/parser.py`) and the deep copy of a function (`ir/clone.py`).

The round trip print -> parse -> print must give the same text, and the parsed function must
verify, for every SIMT kernel of the project, built through the real frontend and pipeline:
the kernels of `examples/simt_kernels.py`, of `fearless demo` (`cli/demo_kernels.py`), of the
benchmarks (`fearless_bench/kernels_simt.py`, `bench/simt_cases.py`), and those the tests and
the `fearless check` corpus define (module level or inside a test function; they are lifted
out of their files with their `@simt.device` helpers, as the CLI's `check` reads them).
Each is taken before the passes, after them, and in its fast variant. The passes run on the
parsed text, and on a clone, give the same IR as on the frontend's own function.
"""

from __future__ import annotations

import ast
import atexit
import importlib
import importlib.util
import inspect
import math
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import fearless as fl
from fearless import dtypes, simt
from fearless.errors import FearlessError, InternalError, Location
from fearless.frontend.source import resolve_annotations
from fearless.ir.clone import clone_function
from fearless.ir.core import (
    THREAD_INDEX,
    THREAD_INDEX_2D,
    ArrayType,
    Block,
    Function,
    Op,
    ScalarType,
    Type,
    Value,
)
from fearless.ir.simt import ops
from fearless.ir.simt.parser import IRParseError, parse_function, parse_type
from fearless.ir.simt.printer import print_function
from fearless.ir.simt.verifier import verify
from fearless.simt.frontend import build_kernel_ir
from fearless.simt.passes.options import PassOptions
from fearless.simt.pipeline import run_pipeline

ROOT = Path(__file__).parents[1]
LOC = Location("t.py", 1, 0)

# ------------------------------------------------------------------------------------ corpus

# Modules imported as they are (no side effect at import), under the names other tests use
# (examples/ and bench/ are on sys.path: pyproject's [tool.pytest.ini_options] pythonpath).
_IMPORTED = {
    "examples/simt_kernels.py": "simt_kernels",
    "src/fearless/cli/demo_kernels.py": "fearless.cli.demo_kernels",
    "src/fearless_bench/kernels_simt.py": "fearless_bench.kernels_simt",
    "bench/simt_cases.py": "simt_cases",
}
# Files whose kernels are lifted out: test modules define theirs inside test functions, and
# the `fearless check` corpus launches kernels at import.
_LIFTED_GLOBS = (
    "tests/*.py",
    "tests/gpu/*.py",
    "tests/support/*.py",
    "tests/check_corpus/**/*.py",
)
_KERNEL_DECORATORS = {"simt.kernel", "fl.simt.kernel", "fearless.simt.kernel", "s.kernel", "kernel"}
_DEVICE_DECORATORS = {"simt.device", "fl.simt.device", "fearless.simt.device", "s.device"}
_PRELUDE = """\
import math
import numpy as np
import fearless as fl
import fearless.simt as s
from fearless import simt
from fearless.simt import DisjointSlice, Slice, kernel
"""


def _decorator_name(d: ast.expr) -> str:
    return ast.unparse(d.func if isinstance(d, ast.Call) else d)


def _def_source(lines: list[str], node: ast.FunctionDef) -> str:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    return textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))


def _lift(path: Path, tmp: Path) -> list[tuple[str, simt.Kernel, str]]:
    """(id, kernel, source) of each SIMT kernel defined anywhere in `path`."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    devices: list[str] = []
    kernels: list[tuple[str, str]] = []

    def walk(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                names = {_decorator_name(d) for d in child.decorator_list}
                if names & _DEVICE_DECORATORS:
                    devices.append(_def_source(lines, child))
                elif names & _KERNEL_DECORATORS:
                    kernels.append((scope + child.name, _def_source(lines, child)))
                walk(child, f"{scope}{child.name}.")
            else:
                walk(child, scope)

    walk(tree, "")
    rel = path.relative_to(ROOT).as_posix()
    out: list[tuple[str, simt.Kernel, str]] = []
    for k, (qualname, source) in enumerate(kernels):
        mod_name = f"_irtext_{path.stem}_{k}"
        file = tmp / f"{mod_name}.py"
        file.write_text("\n\n".join([_PRELUDE, *devices, source]))
        spec = importlib.util.spec_from_file_location(mod_name, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:  # its decorator needs the test's locals (e.g. a parametrized value)
            continue
        kernel = getattr(module, qualname.rsplit(".", 1)[-1])
        if isinstance(kernel, simt.Kernel):
            out.append((f"{rel}::{qualname}", kernel, source))
    return out


def _collect() -> dict[str, simt.Kernel]:
    found: dict[str, simt.Kernel] = {}
    seen: set[str] = set()  # kernel sources: one copy of `vecadd`, not seven
    for rel, module_name in _IMPORTED.items():
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if isinstance(obj, simt.Kernel) and obj.func.__module__ == module.__name__:
                source = textwrap.dedent(inspect.getsource(obj.func))
                if source not in seen:
                    seen.add(source)
                    found[f"{rel}::{name}"] = obj
    tmp = Path(tempfile.mkdtemp(prefix="fearless-ir-text-"))
    atexit.register(shutil.rmtree, tmp, True)
    here = {Path(__file__).name, "test_simt_passes_text.py"}
    for pattern in _LIFTED_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path.name in here:
                continue
            for kid, kernel, source in _lift(path, tmp):
                if source not in seen:
                    seen.add(source)
                    found[kid] = kernel
    return found


CORPUS = _collect()


@dataclass
class Built:
    kernel: simt.Kernel
    before: Function  # the frontend's function, no pass run
    file: str
    options: PassOptions  # what compile_ir ran the pipeline with
    fast_relations: list[tuple[str, str, str]] | None


_BUILT: dict[str, Built] = {}


def built(kid: str) -> Built:
    """The kernel's IR before the passes (fresh) and after them (`compiled_ir`), or a skip."""
    if kid not in _BUILT:
        k = CORPUS[kid]
        try:
            ir = k.compiled_ir()
        except FearlessError as exc:  # a kernel a test defines to see it rejected
            pytest.skip(f"does not compile, by design: {exc.message}")
        src = ir.source
        before = build_kernel_ir(src, resolve_annotations(k.func), unsafe=k.unsafe).fn
        declared = [r.relation for r in ir.contract.requires if r.relation is not None]
        fast = None
        if ir.fast is not None:
            fast = [*declared, *(r.relation for r in ir.fast.assumes if r.relation is not None)]
        options = PassOptions(insert_checks=not k.unsafe, len_relations=declared)
        _BUILT[kid] = Built(k, before, src.file, options, fast)
    return _BUILT[kid]


def after_passes(kid: str) -> list[Function]:
    ir = CORPUS[kid].compiled_ir()
    return [ir.fn] + ([ir.fast.fn] if ir.fast is not None else [])


def run_passes(fn: Function, b: Built, relations: list[tuple[str, str, str]]) -> PassOptions:
    options = PassOptions(insert_checks=b.options.insert_checks, len_relations=list(relations))
    run_pipeline(fn, options)
    return options


def round_trip(fn: Function, filename: str = "<ir>") -> Function:
    """Parse `fn`'s text (with and without locations): same text back, and it verifies."""
    for with_locs in (False, True):
        text = print_function(fn, with_locs)
        parsed = parse_function(text, filename)
        verify(parsed)
        again = print_function(parsed, with_locs)
        assert again == text, f"round trip changed the text:\n{text}\n---\n{again}"
    return parsed


def test_corpus_covers_every_kernel_of_the_examples_demo_and_tests() -> None:
    ids = set(CORPUS)
    for name in ("vecadd", "saxpy", "stencil3", "gather", "collatz_steps", "matmul"):
        assert f"examples/simt_kernels.py::{name}" in ids
    assert "src/fearless/cli/demo_kernels.py::saxpy" in ids  # y is read and written
    assert "tests/test_ir.py::test_unsafe_kernel_has_no_checks.shift" in ids
    assert "tests/check_corpus/import_spellings.py::scale" in ids  # string annotations
    assert any(i.endswith(".twice_plus_one") for i in ids)  # with a @simt.device helper
    assert len(CORPUS) >= 50, sorted(CORPUS)


@pytest.mark.parametrize("kid", sorted(CORPUS))
def test_round_trip_before_passes(kid: str) -> None:
    b = built(kid)
    parsed = round_trip(b.before, b.file)
    # The locations come back (all but their end, which the text does not hold).
    for old, new in zip(b.before.ops(), parsed.ops(), strict=True):
        assert (old.loc.file, old.loc.line, old.loc.col) == (
            new.loc.file,
            new.loc.line,
            new.loc.col,
        )
    assert [p.name for p in parsed.params] == [p.name for p in b.before.params]


@pytest.mark.parametrize("kid", sorted(CORPUS))
def test_round_trip_after_passes(kid: str) -> None:
    built(kid)
    for fn in after_passes(kid):
        round_trip(fn)


@pytest.mark.parametrize("kid", sorted(CORPUS))
def test_passes_on_parsed_text_give_the_compilers_ir(kid: str) -> None:
    b = built(kid)
    ir = b.kernel.compiled_ir()
    parsed = parse_function(print_function(b.before), b.file)
    options = run_passes(parsed, b, b.options.len_relations)
    assert print_function(parsed) == print_function(ir.fn)
    assert options.checks_removed == ir.checks_removed
    # The sites of the device checks name the same parameter, axis and line.
    assert [
        (s.kind, s.param, s.axis, s.loc.file, s.loc.line, s.loc.col) for s in options.sites
    ] == [(s.kind, s.param, s.axis, s.loc.file, s.loc.line, s.loc.col) for s in ir.sites]
    if ir.fast is not None:
        assert b.fast_relations is not None
        fast = parse_function(print_function(b.before), b.file)
        run_passes(fast, b, b.fast_relations)
        assert print_function(fast) == print_function(ir.fast.fn)


@pytest.mark.parametrize("kid", sorted(CORPUS))
def test_clone_derives_each_variant_without_the_frontend(kid: str) -> None:
    b = built(kid)
    ir = b.kernel.compiled_ir()
    text = print_function(b.before)
    base, fast = clone_function(b.before), clone_function(b.before)
    verify(base)
    assert print_function(base) == text
    run_passes(base, b, b.options.len_relations)
    assert print_function(base) == print_function(ir.fn)
    if ir.fast is not None:
        assert b.fast_relations is not None
        run_passes(fast, b, b.fast_relations)
        assert print_function(fast) == print_function(ir.fast.fn)
    assert print_function(b.before) == text  # the passes ran on the copies only
    for fn in after_passes(kid):
        c = clone_function(fn)
        verify(c)
        assert print_function(c) == print_function(fn)


# ------------------------------------------------------------- every op kind and every type


def every_op_function() -> Function:
    """A function holding every op kind of ir/simt/ops.py and every type of ir/core.py."""
    fn = Function("all_ops", LOC)
    entry = fn.new_block("entry")

    def loc(n: int) -> Location:
        return Location("all.py", n, n % 7)

    params: dict[str, Value] = {}
    for dt in dtypes.ALL:  # every scalar type
        params[dt.name] = entry.add_arg(ScalarType(dt), LOC, f"s_{dt.name}")
    at = entry.add_arg(ArrayType(dtypes.u32, False, atomic=True), LOC, "at")
    a1 = entry.add_arg(ArrayType(dtypes.f32, False), LOC, "a1")
    a2 = entry.add_arg(ArrayType(dtypes.f64, False, 2), LOC, "a2")
    d1 = entry.add_arg(ArrayType(dtypes.i16, True), LOC, "d1")
    d2 = entry.add_arg(ArrayType(dtypes.bf16, True, 2), LOC, "d2")
    e = entry.append
    t1 = e(ops.ThreadIndex1D(loc(2))).result
    t2 = e(ops.ThreadIndex2D(loc(3))).result
    row = e(ops.ThreadIndexAxis(t2, 0, loc(4))).result
    col = e(ops.ThreadIndexAxis(t2, 1, loc(5))).result
    i = e(ops.IndexToInt(t1, loc(6))).result
    reg = e(ops.SpecialReg("ntid.y", loc(7))).result
    e(ops.SpecialReg("laneid", loc(7)))
    nctaid, ntid = (e(ops.SpecialReg(r, loc(7))).result for r in ("nctaid.x", "ntid.x"))
    n_blocks, per_block = (e(ops.Cast(r, dtypes.i64, loc(7))).result for r in (nctaid, ntid))
    threads = e(ops.Binary("mul", n_blocks, per_block, loc(7))).result
    e(ops.IndexAdvance(t1, threads, loc(7)))
    ny, nz = (
        e(ops.Cast(e(ops.SpecialReg(r, loc(7))).result, dtypes.i64, loc(7))).result
        for r in ("ntid.y", "ntid.z")
    )
    block_threads = e(
        ops.Binary("mul", e(ops.Binary("mul", per_block, ny, loc(7))).result, nz, loc(7))
    ).result
    column = e(ops.IndexAdvance(e(ops.BlockIndex1D(loc(7))).result, block_threads, loc(7))).result
    start = e(ops.BlockIndex1D(loc(7))).result
    e(ops.BlockStep(start, e(ops.IndexToInt(column, loc(7))).result, block_threads, loc(7)))
    local = e(ops.LocalAlloc(dtypes.f32, (2, 3), loc(7))).result
    zero = e(ops.Constant(0, dtypes.i64, loc(7))).result
    e(ops.Store(local, [zero, zero], e(ops.Load(local, [zero, zero], loc(7))).result, loc(7)))
    e(ops.ThreadIndexAxis(e(ops.BlockRowIndex(column, loc(7))).result, 0, loc(7)))
    block_rows = e(ops.Binary("mul", ny, nz, loc(7))).result
    r0 = e(ops.ThreadIndexAxis(e(ops.BlockIndex2D(loc(7))).result, 0, loc(7))).result
    tile = e(ops.BlockTileRow(r0, zero, block_rows, loc(7))).result
    by = e(ops.Cast(e(ops.SpecialReg("ctaid.y", loc(7))).result, dtypes.i64, loc(7))).result
    tile_local = e(ops.ThreadIndexAxis(tile, 0, loc(7))).result
    rows = e(ops.Constant(32, dtypes.i64, loc(7))).result
    e(ops.ThreadIndexAxis(e(ops.TileRow(tile_local, rows, by, loc(7))).result, 1, loc(7)))
    consts = [
        e(ops.Constant(v, dt, loc(8))).result
        for v, dt in [
            (True, dtypes.bool_),
            (False, dtypes.bool_),
            (-5, dtypes.i8),
            (2**63 - 1, dtypes.i64),
            (2**64 - 1, dtypes.u64),
            (0.1, dtypes.f32),
            (-0.0, dtypes.f64),
            (1e-05, dtypes.f64),
            (1.5e300, dtypes.f64),
            (math.inf, dtypes.f32),
            (-math.inf, dtypes.f16),
            (math.nan, dtypes.bf16),
        ]
    ]
    f = params["f32"]
    for kind in sorted(ops.BINARY_KINDS):
        e(ops.Binary(kind, i, i, loc(9)))
    for kind in sorted(ops.UNARY_KINDS):
        e(ops.Unary(kind, reg, loc(10)))
    for pred in sorted(ops.COMPARE_PREDS):
        e(ops.Compare(pred, f, f, loc(11)))
    for name, n in sorted(ops.MATH_FNS.items()):
        e(ops.MathCall(name, [f] * n, loc(12)))
    cast = e(ops.Cast(reg, dtypes.u8, loc(13))).result
    cond = e(ops.Compare("lt", i, i, loc(14))).result
    e(ops.Select(cond, cast, cast, loc(15)))
    e(ops.Print("i = %lld, %u 100%%\n", [i, cast], loc(15)))
    n1 = e(ops.ArrayLen(a1, loc(16))).result
    n2r = e(ops.ArrayLen(a2, loc(17), 0)).result
    n2c = e(ops.ArrayLen(a2, loc(18), 1)).result
    e(ops.BoundsCheck(i, n1, 0, loc(19)))
    e(
        ops.BoundsCheck.group(
            [ops.BoundsCheck(row, n2r, 1, LOC), ops.BoundsCheck(col, n2c, 2, LOC)], loc(20)
        )
    )
    x = e(ops.Load(a1, i, loc(21))).result
    e(ops.Load(a2, [row, col], loc(22)))
    e(ops.Store(d1, i, params["i16"], loc(23)))
    e(ops.Store(d2, [row, col], params["bf16"], loc(24)))
    for kind in sorted(ops.ATOMIC_KINDS):
        e(ops.AtomicRMW(kind, at, i, params["u32"], loc(31)))
    e(ops.AtomicCAS(at, i, params["u32"], params["u32"], loc(32)))
    sh = e(ops.SharedAlloc(dtypes.f32, (4, 8), loc(33))).result
    j = e(ops.IndexToInt(e(ops.BlockIndex1D(loc(33))).result, loc(33))).result
    e(ops.Store(sh, [j, j], e(ops.Load(sh, [j, i], loc(33))).result, loc(33)))
    e(ops.Barrier(loc(33)))
    e(ops.AtomicRMW("add", sh, [j, j], e(ops.Load(sh, [j, i], loc(33))).result, loc(33)))
    e(ops.Barrier(loc(33)))
    b = e(ops.BlockId(loc(33))).result
    e(ops.Store(d1, b, e(ops.Load(d1, b, loc(33))).result, loc(33)))
    e(ops.GridSync(loc(33)))
    bt = e(ops.BlockIndex2D(loc(33))).result
    brow, bcol = (e(ops.ThreadIndexAxis(bt, axis, loc(33))).result for axis in (0, 1))
    e(ops.Store(sh, [brow, bcol], e(ops.Load(sh, [bcol, brow], loc(33))).result, loc(33)))
    table = e(ops.ConstArray(dtypes.i16, (2, 3, 2), "0100" * 12, loc(33), "LUT")).result
    e(ops.Load(table, [j, i, j], loc(33)))
    lane = e(ops.Constant(1, dtypes.i32, loc(34))).result
    for mode in sorted(ops.SHUFFLE_MODES):
        e(ops.WarpShuffle(mode, f, lane, loc(34)))
    for kind in sorted(ops.VOTE_KINDS):
        e(ops.WarpVote(kind, cond, loc(34)))
    for cls in (ops.WarpReduce, ops.BlockReduce, ops.BlockScan):
        for name in sorted(ops.COLLECTIVE_OPS):
            e(cls(name, f, loc(34)))
    loop = fn.new_block("loop")
    exit_ = fn.new_block("exit")
    e(ops.Br(loop, [i, x, t1], loc(25)))
    k = loop.add_arg(ScalarType(dtypes.i64), LOC, "k")
    acc = loop.add_arg(ScalarType(dtypes.f32), LOC, "acc")
    tk = loop.add_arg(THREAD_INDEX, LOC, "t")  # a ThreadIndex may be a block argument
    more = loop.append(ops.Compare("lt", k, n1, loc(26))).result
    nk = loop.append(ops.Binary("add", k, i, loc(27))).result
    loop.append(ops.CondBr(more, loop, [nk, acc, tk], exit_, [consts[0]], loc(28)))
    exit_.add_arg(ScalarType(dtypes.bool_), LOC, "flag")
    exit_.append(ops.Return(loc(29)))
    fn.new_block("unreachable, with a long label").append(ops.Return(loc(30)))
    return fn


def test_every_op_kind_and_type_round_trips() -> None:
    fn = every_op_function()
    verify(fn)
    names = {op.opname for op in fn.ops()}
    kinds = {
        cls.opname
        for cls in vars(ops).values()
        if isinstance(cls, type)
        and issubclass(cls, Op)
        and cls.opname != Op.opname
        and not cls.__name__.startswith("_")
    }  # bases (`ops._Access` of load and store, core's Nullary, Choice, Exit) are no op kinds
    assert kinds <= names, f"not covered: {kinds - names}"
    types: set[Type] = {v.type for b in fn.blocks for v in b.args}
    types |= {r.type for op in fn.ops() for r in op.results}
    assert {THREAD_INDEX, THREAD_INDEX_2D} <= types
    assert {ScalarType(t) for t in dtypes.ALL} <= types
    parsed = round_trip(fn, "all.py")
    text = print_function(parsed)
    assert "constant {value=nan} : bf16" in text and "{value=-inf} : f16" in text
    assert "{value=-0.0} : f64" in text and "{value=18446744073709551615} : u64" in text
    assert "check.bounds {sites=(1, 2)}" in text
    assert "atomic.rmw {kind='exch'}" in text and "AtomicSlice[u32]" in text
    assert [p.name for p in parsed.params][-4:] == ["a1", "a2", "d1", "d2"]
    assert [b.label for b in parsed.blocks] == [b.label for b in fn.blocks]
    nan = next(op for op in parsed.ops() if isinstance(op, ops.Constant) and op.value != op.value)
    assert math.isnan(nan.value)
    assert [type(op) for op in parsed.ops()] == [type(op) for op in fn.ops()]
    assert [op.loc for op in parsed.ops()] == [op.loc for op in fn.ops()]
    assert clone_function(fn).blocks[1].ops[-1].successors()[0] is not fn.blocks[1]
    assert print_function(clone_function(fn)) == print_function(fn)


def test_every_type_parses_back() -> None:
    all_types: list[Type] = [ScalarType(t) for t in dtypes.ALL]
    all_types += [ArrayType(t, d, n) for t in dtypes.ALL for d in (False, True) for n in (1, 2)]
    all_types += [THREAD_INDEX, THREAD_INDEX_2D]
    for t in all_types:
        assert parse_type(str(t)) == t
    with pytest.raises(IRParseError, match="rank 1 or 2"):
        parse_type("Slice[f32, 3]")


def test_inspect_text_parses_as_it_is() -> None:
    import simt_kernels as K

    text = K.gather.inspect(stage="ir")  # starts with `// kernel gather: ...` comment lines
    fn = parse_function(text)
    verify(fn)
    assert print_function(fn) in text
    assert [p.name for p in fn.params] == ["src", "idx", "out"]


def test_hand_written_names_are_renumbered() -> None:
    text = """
func @k(%a: Slice[f32], %out: DisjointSlice[f32]) {
^start:
  %t = thread.index_1d : ThreadIndex
  %n = len %out : i64
  %i = index.int %t : i64
  %ok = compare {pred='lt'} %i, %n : bool
  cond_br %ok, ^body, ^done
^body:
  %x = load %a, %i : f32
  store %out, %i, %x
  br ^done
^done:
  return
}
"""
    fn = parse_function(text)
    verify(fn)
    assert [p.name for p in fn.params] == ["a", "out"]
    printed = print_function(fn, with_locs=False)
    assert printed.startswith(
        "func @k(%0: Slice[f32], %1: DisjointSlice[f32]) {   // params: a, out"
    )
    assert "  cond_br %5, ^bb1, ^bb2\n" in printed
    # ops without a location comment are located at their line of the text
    assert fn.entry.ops[0].loc == Location("<ir>", 4, 2)


def test_use_before_definition_in_block_order_parses() -> None:
    # ^bb1 uses %5, defined in ^bb2 further down: the parser builds it, the verifier judges it.
    text = """
func @f() {   // params:
^bb0:
  br ^bb2
^bb1:
  %1 = binary {kind='add'} %5, %5 : i64
  return
^bb2:
  %5 = constant {value=1} : i64
  br ^bb1
}
"""
    fn = parse_function(text)
    verify(fn)  # ^bb2 dominates ^bb1
    assert "  %0 = binary {kind='add'} %1, %1 : i64\n" in print_function(fn, with_locs=False)


# -------------------------------------------------------------------------------- clone


def test_clone_shares_nothing_mutable() -> None:
    fn = every_op_function()
    c = clone_function(fn)
    old_vals = {id(v) for b in fn.blocks for v in b.args} | {
        id(r) for op in fn.ops() for r in op.results
    }
    for b_old, b_new in zip(fn.blocks, c.blocks, strict=True):
        assert b_old is not b_new and b_old.ops is not b_new.ops and b_old.args is not b_new.args
        assert b_new.label == b_old.label
        for a in b_new.args:
            assert a.owner is b_new and id(a) not in old_vals
        for o_old, o_new in zip(b_old.ops, b_new.ops, strict=True):
            assert type(o_new) is type(o_old) and o_new is not o_old
            assert o_new.block is b_new and o_new.loc is o_old.loc
            assert o_new.operands is not o_old.operands and o_new.attrs is not o_old.attrs
            assert all(id(v) not in old_vals for v in o_new.operands)
            assert all(
                r.owner is o_new and r.type is ro.type
                for r, ro in zip(o_new.results, o_old.results, strict=True)
            )
            assert all(s in c.blocks for s in o_new.successors())
    assert c.params[-1].name == "d2" and c.loc is fn.loc and c.name == fn.name


def test_mutating_a_clone_leaves_the_original() -> None:
    import simt_kernels as K

    fn = K.collatz_steps.compiled_ir().fn
    text = print_function(fn)
    c = clone_function(fn)
    c.name = "other"
    header = next(b for b in c.blocks if b.args)
    header.args[0].name = "renamed"
    header.add_arg(ScalarType(dtypes.i32), LOC, "extra")
    header.label = "changed"
    for op in c.ops():
        if isinstance(op, ops.Constant):
            op.attrs["value"] = 7
        if isinstance(op, ops.Br) and op.dest is header:
            seven = op.operands[0]
            ops.set_branch_args(op, header, [*op.operands, seven])
    extra = ops.Constant(1, dtypes.i32, LOC)
    extra.block = c.blocks[0]
    c.blocks[0].ops.insert(0, extra)
    c.blocks[-1].ops.clear()
    c.blocks.pop(1)
    assert print_function(fn) == text
    verify(fn)
    assert all(op.block in fn.blocks for op in fn.ops())


def test_clone_of_a_clone_and_an_empty_attr_dict() -> None:
    fn = every_op_function()
    fn.attrs["note"] = ("kept", fn.blocks[1])
    c = clone_function(clone_function(fn))
    assert c.attrs["note"][0] == "kept" and c.attrs["note"][1] is c.blocks[1]
    assert print_function(c) == print_function(fn)


# ---------------------------------------------------------------------------- parse errors

_HEADER = "func @f(%0: Slice[f32], %1: i64) {   // params: a, n\n^bb0:  // entry\n"


@pytest.mark.parametrize(
    ("body", "message", "line", "col"),
    [
        ("  %2 = frobnicate %1 : i64\n", "unknown op `frobnicate`", 3, 8),
        ("  %2 = binary {kind='add'} %1, %9 : i64\n", r"value %9 is defined nowhere", 3, 32),
        ("  %1 = constant {value=1} : i64\n", r"value %1 is defined twice", 3, 3),
        ("  %2 = constant {value=1} : i65\n", "unknown type `i65`", 3, 29),
        ("  %2 = binary {kind='plus'} %1, %1 : i64\n", "kind must be one of add, and", 3, 21),
        ("  %2 = binary %1, %1 : i64\n", "needs the attribute `kind`", 3, 8),
        ("  %2 = binary {kind='add', axis=0} %1, %1 : i64\n", "no attribute `axis`", 3, 28),
        ("  %2 = binary {kind='add'} %1 : i64\n", r"takes 2 operand\(s\), not 1", 3, 8),
        ("  %2 = binary {kind='add'} %1, %1 : i32\n", "gives i64, not i32", 3, 3),
        ("  %2 = constant {value=300} : i8\n", "300 does not fit i8", 3, 24),
        ("  %2 = constant {value=1.5} : i32\n", "i32 constant is an integer, not 1.5", 3, 24),
        ("  %2 = load %0 : f32\n", r"takes 1 index\(es\), not 0", 3, 8),
        ("  %2 = load %1, %1 : f32\n", "needs an array, not i64", 3, 13),
        ("  %2 = len {axis=0} %0 : i64\n", "1-D array takes no axis", 3, 8),
        ("  check.bounds {sites=(0, 1)} %1, %1\n", "2 site", 3, 3),
        ("  %2, %3 = constant {value=1} : i64\n", "2 result", 3, 3),
        ("  store %0, %1 : f32\n", "without results takes no result type", 3, 16),
        ("  br ^bb7\n", r"block \^bb7 is defined nowhere", 3, 6),
        ("  cond_br %1 ^bb0, ^bb0\n", "expected `,`, found `\\^bb0`", 3, 14),
        ("  %2 = constant {value=1} : i64 # no\n", "unexpected character '#'", 3, 33),
        ("  return                    // here\n", "location comment", 3, 29),
        ("  %2 = constant {value='1} : i64\n", 'unexpected character "\'"', 3, 24),
        ("  %2 = constant {value=(1,} : i64\n", "expected a value, found `}`", 3, 27),
    ],
)
def test_parse_errors_name_line_and_column(body: str, message: str, line: int, col: int) -> None:
    text = _HEADER + body + "  return\n}\n"
    with pytest.raises(IRParseError, match=message) as info:
        parse_function(text)
    assert (info.value.line, info.value.col) == (line, col), str(info.value)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"line {line}, column {col}: ")
    assert "^" in str(info.value)  # the line itself, with a caret under the column


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        ("", "no function in the text", 1, 1),
        ("^bb0:\n  return\n}\n", r"expected `func @name\(...\)`", 1, 1),
        ("func @f() {\n^bb0:\n  return\n", "not closed by `}`", 4, 1),
        ("func @f() {\n^bb0:\n  return\n}\nfunc @g() {\n", "text after the end", 5, 1),
        ("func @f() {\n  return\n}\n", "an op before the first block", 2, 3),
        ("func @f() {\n}\n", "at least one block", 1, 1),
        ("func @f() {\n^bb0(%0: i64):\n  return\n}\n", "entry block's arguments", 2, 6),
        (
            "func @f() {\n^bb0:\n  br ^bb1\n^bb1:\n  return\n^bb1:\n  return\n}\n",
            "defined twice",
            6,
            1,
        ),
        ("func @f(%0: i64) {   // params: a, b\n^bb0:\n  return\n}\n", "1 parameter", 1, 22),
        ("func @f(%0: i64) {   // names\n^bb0:\n  return\n}\n", "params:", 1, 22),
        ("func f() {\n^bb0:\n  return\n}\n", "function's name", 1, 6),
        (
            "func @f() {\n^bb0:\n  %0 = constant {value=1} : i64    // 3:0\n  return\n}\n",
            "columns start at 1",
            3,
            36,
        ),
    ],
)
def test_structural_parse_errors(text: str, message: str, line: int, col: int) -> None:
    with pytest.raises(IRParseError, match=message) as info:
        parse_function(text)
    assert (info.value.line, info.value.col) == (line, col), str(info.value)


def test_verifier_judges_what_the_parser_accepts() -> None:
    # well-formed text, ill-formed IR: the use does not come after its definition
    text = (
        _HEADER
        + "  %3 = binary {kind='add'} %2, %2 : i64\n  %2 = constant {value=1} : i64\n  return\n}\n"
    )
    fn = parse_function(text)
    with pytest.raises(InternalError, match="before its definition"):
        verify(fn)


def test_parsed_ops_are_the_op_classes() -> None:
    text = _HEADER + (
        "  %2 = len %0 : i64\n"
        "  check.bounds {sites=(4,)} %1, %2           // 9:5\n"
        "  %3 = load %0, %1 : f32                     // 9:5\n"
        "  br ^bb1(%3)                                // lib/other.py:12:3\n"
        "^bb1(%4: f32):\n"
        "  return\n}\n"
    )
    fn = parse_function(text, "k.py")
    check = fn.entry.ops[1]
    assert (
        isinstance(check, ops.BoundsCheck)
        and check.sites == (4,)
        and check.loc == Location("k.py", 9, 4)
    )
    load = fn.entry.ops[2]
    assert isinstance(load, ops.Load) and load.indices == [fn.params[1]]
    assert load.result.owner is load and load.result.loc == load.loc
    br = fn.entry.ops[3]
    assert isinstance(br, ops.Br) and br.dest is fn.blocks[1] and br.operands == [load.result]
    assert br.loc == Location("lib/other.py", 12, 2)  # a comment may name the file
    assert isinstance(fn.blocks[1].args[0].owner, Block)
    assert fn.params[0].name == "a" and fn.params[1].name == "n"
    verify(fn)
    assert fl.f32 is dtypes.f32  # the parsed types use the one dtype instance of each name
    assert isinstance(load.result.type, ScalarType) and load.result.type.dtype is dtypes.f32
