"""`fearless tune`: run the fearless.ops tuners over a list of shapes and write a tuning table.

Tuning times kernels on the GPU, so without one the command refuses, unless `--simulator` asks
for the simulator (to test the command only: its timings say nothing about a GPU, and its
entries are keyed by arch "sim"). Every key is measured: tables are not read while it runs (the
winners this machine already keeps on disk for today's versions count as measured).

The shape list (`--shapes FILE`) is JSON, a list of {"op": "matmul", "dtype": "float16",
"shapes": [[128, 4096], [4096, 4096]]}, or text, one case a line: `matmul float16 128x4096
4096x4096` (`#` starts a comment). Without it, DEFAULT_CASES: common model dimensions.
Exit status: 0 written, 1 refused (no GPU, tuning off) or nothing tuned, 2 a bad shape list.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HELP = "tune fearless.ops over a shape list on the GPU and write a tuning table"

# op -> how to call it on its inputs
OPS: dict[str, Callable[..., Any]] = {
    "matmul": lambda ops, a, b: ops.matmul(a, b),
    "bmm": lambda ops, a, b: ops.bmm(a, b),
    "softmax": lambda ops, x: ops.softmax(x),
    "rms_norm": lambda ops, x: ops.rms_norm(x, x.shape[-1]),
    "layer_norm": lambda ops, x: ops.layer_norm(x, x.shape[-1]),
    "relu": lambda ops, x: ops.relu(x),
    "gelu": lambda ops, x: ops.gelu(x),
    "silu_and_mul": lambda ops, x: ops.silu_and_mul(x),
    "swiglu": lambda ops, a, b: ops.swiglu(a, b),
    "transpose": lambda ops, x: ops.transpose(x),
    "scaled_dot_product_attention": lambda ops, q, k, v: ops.scaled_dot_product_attention(q, k, v),
}
DTYPES = ("float32", "float16", "bfloat16")


def _default_cases() -> list[dict[str, Any]]:
    """Common model dimensions (Llama-like hidden sizes 4096 and 8192, their MLP widths) at
    token counts from decode to prefill, in f16 and bf16."""
    cases: list[dict[str, Any]] = []
    for dtype in ("float16", "bfloat16"):
        for m in (16, 128, 1024, 4096):
            for k, n in ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672)):
                cases.append({"op": "matmul", "dtype": dtype, "shapes": [[m, k], [k, n]]})
            for h in (4096, 8192):
                for op in ("softmax", "rms_norm", "layer_norm", "relu", "gelu"):
                    cases.append({"op": op, "dtype": dtype, "shapes": [[m, h]]})
                cases.append({"op": "silu_and_mul", "dtype": dtype, "shapes": [[m, 2 * h]]})
        for s in (512, 2048, 8192):
            qkv = [[1, 32, s, 128]] * 3
            cases.append({"op": "scaled_dot_product_attention", "dtype": dtype, "shapes": qkv})
    return cases


DEFAULT_CASES = _default_cases()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ops", nargs="+", metavar="OP", help=f"only these operators (of {', '.join(OPS)})"
    )
    parser.add_argument("--shapes", metavar="FILE", help="the shape list (JSON or text lines)")
    parser.add_argument(
        "--out", metavar="FILE", help="the table to write (default: fearless-tuning-<arch>.json)"
    )
    parser.add_argument(
        "--simulator",
        action="store_true",
        help="tune on the simulator: for testing the command only, its timings mean nothing",
    )


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a shape list file (ValueError naming the line or item that is wrong)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        items = json.loads(text)
        return [_check(item, f"item {n}") for n, item in enumerate(items)]
    cases = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3:
            raise ValueError(
                f"line {n}: write `op dtype shape...`, e.g. `softmax float16 128x4096`"
            )
        try:
            shapes = [[int(d) for d in w.lower().split("x")] for w in words[2:]]
        except ValueError:
            raise ValueError(f"line {n}: a shape is extents joined by x, e.g. 128x4096") from None
        cases.append(_check({"op": words[0], "dtype": words[1], "shapes": shapes}, f"line {n}"))
    return cases


def _check(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("op") not in OPS:
        raise ValueError(f"{where}: `op` must be one of {', '.join(OPS)}")
    if item.get("dtype") not in DTYPES:
        raise ValueError(f"{where}: `dtype` must be one of {', '.join(DTYPES)}")
    shapes = item.get("shapes")
    if not isinstance(shapes, list) or not all(
        isinstance(s, list) and all(isinstance(d, int) and d > 0 for d in s) for s in shapes
    ):
        raise ValueError(f"{where}: `shapes` must be a list of shapes (lists of positive ints)")
    return item


def _inputs(case: dict[str, Any], on_device: bool) -> list[Any]:
    """Random inputs of the case's shapes and dtype: fl.Tensors, or torch CUDA tensors for bf16
    on the GPU (NumPy has no bf16; on the simulator, fl.Tensors of fl.bf16)."""
    import numpy as np

    import fearless as fl

    rng = np.random.default_rng(0)
    out: list[Any] = []
    for shape in case["shapes"]:
        x = rng.standard_normal(shape, dtype=np.float32)
        if case["dtype"] == "bfloat16":
            if on_device:
                import torch

                out.append(torch.from_numpy(x).to("cuda", torch.bfloat16))
                continue
            out.append(fl.asarray(x).astype(fl.bf16))
            continue
        out.append(fl.asarray(x.astype(case["dtype"])))
    return out


def run(args: argparse.Namespace) -> int:
    from .. import autotune_tables, config
    from ..autotuning import autotune
    from ..runtime.target import cuda_status, current_target, set_target

    if args.simulator:
        set_target("sim")
    else:
        usable, why = cuda_status()
        if not usable:
            print(
                "fearless tune times kernels on the GPU, and there is no usable GPU here "
                f"({why}).\nRun it on the machine whose table you want; `--simulator` runs "
                "the tuners on the simulator to test the command only (its timings say "
                "nothing about a GPU).",
                file=sys.stderr,
            )
            return 1
    if not config.autotune_enabled():
        print("fearless tune: FEARLESS_AUTOTUNE is off, so nothing would be timed", file=sys.stderr)
        return 1
    try:
        cases = read_cases(Path(args.shapes)) if args.shapes else DEFAULT_CASES
    except (OSError, ValueError) as exc:
        print(f"fearless tune: {args.shapes}: {exc}", file=sys.stderr)
        return 2
    wanted = set(args.ops or OPS)
    unknown = wanted - set(OPS)
    if unknown:
        print(f"fearless tune: unknown operators {sorted(unknown)}; known: {', '.join(OPS)}")
        return 2
    cases = [c for c in cases if c["op"] in wanted]
    target = current_target()
    from .. import ops
    from ..autotuning import table_arch

    arch_name = table_arch()
    out = Path(args.out or f"fearless-tuning-{arch_name}.json")
    tuned = 0
    with autotune_tables.disabled():
        for n, case in enumerate(cases, 1):
            shapes = " ".join("x".join(map(str, s)) for s in case["shapes"])
            print(f"[{n}/{len(cases)}] {case['op']} {case['dtype']} {shapes}", flush=True)
            try:
                OPS[case["op"]](ops, *_inputs(case, target.on_device))
                tuned += 1
            except Exception as exc:  # one case failing does not lose the others
                print(f"  failed: {type(exc).__name__}: {exc}".splitlines()[0], flush=True)
    if not tuned:
        print("fearless tune: no case ran; no table written", file=sys.stderr)
        return 1
    try:
        total = autotune.export(out)
    except (OSError, ValueError) as exc:
        print(f"fearless tune: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}: {total} entries for {arch_name} ({tuned} of {len(cases)} cases ran)")
    return 0
