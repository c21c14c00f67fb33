"""`requires=(...)`: launch-contract relations over parameter lengths and scalar parameters.

    @simt.kernel(requires=("len(c) == len(a)", "len(b) >= n * 2"))

Grammar: one comparison (== != < <= > >=) between two sums/products (+ - *) of integer
literals, `len(p)` of array parameters and scalar parameters. Parsed here at compile time;
checked on the host before every launch with Python integers, so without overflow
(runtime/contract.py). Relations between two lengths also tell the bounds
pass that a guard on one array covers the other.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..abi import ParamSpec, Requirement
from ..errors import CompileError, Location

_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}


def parse_requires(
    texts: Sequence[str], params: Sequence[ParamSpec], loc: Location
) -> tuple[Requirement, ...]:
    index = {p.name: i for i, p in enumerate(params)}
    out = []
    for text in texts:
        if not isinstance(text, str):
            raise CompileError(
                f"`requires` entries are strings, not {text!r}",
                loc,
                code="E0700",
                help='write e.g. requires=("len(c) == len(a)",)',
            )
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError as exc:
            raise _bad(text, f"it is not an expression ({exc.msg})", loc) from None
        if not isinstance(tree, ast.Compare) or len(tree.ops) != 1:
            raise _bad(text, "it must be exactly one comparison", loc)
        op = _CMP.get(type(tree.ops[0]))
        if op is None:
            raise _bad(text, "the comparison must be one of == != < <= > >=", loc)
        lhs = _term(tree.left, text, params, index, loc)
        rhs = _term(tree.comparators[0], text, params, index, loc)
        relation = None
        a, b = _len_of(tree.left), _len_of(tree.comparators[0])
        if a is not None and b is not None:
            relation = (a, op, b)
        out.append(Requirement(text, f"({lhs}) {op} ({rhs})", relation))
    return tuple(out)


def _len_of(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
    ):
        return node.args[0].id
    return None


def _term(
    node: ast.expr, text: str, params: Sequence[ParamSpec], index: dict[str, int], loc: Location
) -> str:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        left = _term(node.left, text, params, index, loc)
        right = _term(node.right, text, params, index, loc)
        return f"({left} {_ARITH[type(node.op)]} {right})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return f"(-{_term(node.operand, text, params, index, loc)})"
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value)
    name = _len_of(node)
    if name is not None:
        i = index.get(name)
        if i is None or not params[i].is_array:
            raise _bad(text, f"`{name}` is not an array parameter", loc)
        return f"__len_{i}"
    if isinstance(node, ast.Name):
        i = index.get(node.id)
        if i is None:
            raise _bad(text, f"`{node.id}` is not a parameter of the kernel", loc)
        if params[i].is_array:
            raise _bad(text, f"`{node.id}` is an array: write `len({node.id})`", loc)
        return f"__arg_{i}"
    raise _bad(text, f"`{ast.unparse(node)}` is not allowed", loc)


def _bad(text: str, why: str, loc: Location) -> CompileError:
    return CompileError(
        f'cannot use `requires` relation "{text}": {why}',
        loc,
        code="E0700",
        help="relations compare sums and products of int literals, `len(array)` and scalar "
        'parameters, e.g. "len(c) == len(a)" or "len(x) >= 2 * n"',
    )
