"""Shape-general speed: the Tile examples, autotuned, over TileGym's benchmark grids.

The other families measure one shape per kernel, the one its hints were tuned for. This one
runs `examples/tile_kernels.py`'s `*_tuned` functions (`fl.autotune` over rows per block,
occupancy and worker warps for the row kernels; tile shape, K step, occupancy and clusters
for the GEMM) at every shape of the grids TileGym benchmarks (`tests/benchmark/bench_*.py`):

- softmax, M = 4096, N = 1024 ... 16384, f32 and bf16;
- rms_norm, M = 4096, N = 1024 ... 16384, f16 and bf16 (TileGym's dtypes);
- layer_norm, M = 4096, N = 1024 ... 16384, f32 and bf16;
- GEMM, M = N = K = 1024 ... 16384 in f16 and bf16, and four non-square bf16 problems.

Peers: TileGym (cutile backend), torch, and Triton where the suite's Triton kernel computes in
the case's dtype (f32 rows, and its GEMM). The fearless record's note names the chosen
configuration and how long tuning took (the first call; later calls and processes reuse it).
What is timed is that configuration's launch with its arguments bound once, as the other
families time the Tile examples; the autotuned call itself adds its Python (key, partition,
wrappers) per call, which is host overhead (issue 14), not kernel speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import dry, family_gemm, family_rows
from .harness import Ctx, DeviceCase, Prepared, device_impls, run_device_case
from .model import FEARLESS_TILE, Record, Skip
from .peers import Peers

FAMILY = "shapes"
ROWS = 4096
EPS = 1e-5
ROW_NS = (1024, 2048, 4096, 8192, 16384)
QUICK_ROW_NS = (1024, 4096, 16384)
ROW_OPS = {"softmax": ("f32", "bf16"), "rms_norm": ("f16", "bf16"), "layer_norm": ("f32", "bf16")}
GEMM_SQUARES = (1024, 2048, 4096, 8192, 16384)
QUICK_SQUARES = (2048, 8192)
GEMM_OTHERS = ((8192, 8192, 1024), (1024, 8192, 8192), (16384, 2048, 4096), (4096, 14336, 4096))
NO_SIMT = "the shapes family measures the Tile track's autotuned examples"


def row_case(op: str, dt: str, n: int) -> str:
    return f"shapes_{op}_{dt}_{n}"


def gemm_case(dt: str, m: int, n: int, k: int) -> str:
    return f"shapes_gemm_{dt}_{m}" if m == n == k else f"shapes_gemm_{dt}_{m}x{n}x{k}"


def gemm_problems(quick: bool) -> list[tuple[str, int, int, int]]:
    squares = QUICK_SQUARES if quick else GEMM_SQUARES
    out = [(dt, s, s, s) for dt in ("f16", "bf16") for s in squares]
    others = GEMM_OTHERS[:2] if quick else GEMM_OTHERS
    return out + [("bf16", m, n, k) for m, n, k in others]


CASES = tuple(
    [row_case(op, dt, n) for op, dts in ROW_OPS.items() for dt in dts for n in ROW_NS]
    + [gemm_case(*p) for p in gemm_problems(quick=False)]
)


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    out: list[Record] = []
    ns = QUICK_ROW_NS if ctx.quick else ROW_NS
    for op, dts in ROW_OPS.items():
        for dt in dts:
            for n in ns:
                if row_case(op, dt, n) in selected:
                    out += _rows(ctx, op, dt, n)
    for dt, m, n, k in gemm_problems(ctx.quick):
        if gemm_case(dt, m, n, k) in selected:
            out += _gemm(ctx, dt, m, n, k)
    return out


def _tuned(ctx: Ctx, name: str) -> Any:
    ctx.peers.fearless_gpu()
    fn = getattr(ctx.peers.tile_examples(), name, None)
    if fn is None:
        raise Skip(f"examples/tile_kernels.py has no `{name}`")
    return fn


def _first_call(
    fn: Any, args: tuple[Any, ...], sync: Callable[[], None]
) -> tuple[dict[str, Any], str]:
    """Run the autotuned `fn` once (it tunes for this key): the configuration it chose, and a
    note saying which and how long tuning took."""
    start = time.perf_counter()
    fn(*args)
    sync()
    seconds = time.perf_counter() - start
    config = fn.best_config(*args)
    return config, f"autotuned in {seconds:.1f} s: {config}"


def _skip(why: str) -> Callable[[], Prepared]:
    def build() -> Prepared:
        raise Skip(why)

    return build


def _rows(ctx: Ctx, op: str, dt: str, n: int) -> list[Record]:
    torch = ctx.torch
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]
    x = torch.randn(ROWS, n, device="cuda").to(tdt)
    w = torch.randn(n, device="cuda").to(tdt)
    b = torch.randn(n, device="cuda").to(tdt)
    vectors = {"softmax": 0, "rms_norm": 1, "layer_norm": 2}[op]
    itemsize = x.element_size()

    def reference() -> Any:
        xd, fn = x.double(), torch.nn.functional
        if op == "softmax":
            return torch.softmax(xd, dim=1)
        if op == "rms_norm":
            return fn.rms_norm(xd, (n,), w.double(), EPS)
        return fn.layer_norm(xd, (n,), w.double(), b.double(), EPS)

    case = DeviceCase(
        row_case(op, dt, n),
        FAMILY,
        dt,
        reference=reference,
        bytes=2 * ROWS * n * itemsize + vectors * n * itemsize,
        params={"op": op, "rows": ROWS, "cols": n, "dtype": dt},
    )
    inputs = {"softmax": (x,), "rms_norm": (x, w, EPS), "layer_norm": (x, w, b, EPS)}[op]

    def new() -> Any:
        return torch.empty(ROWS, n, device="cuda", dtype=tdt)

    def tile() -> Prepared:
        fn, y = _tuned(ctx, f"{op}_tuned"), new()
        config, note = _first_call(fn, (*inputs, y), ctx.sync)
        # timed as the other families time Tile kernels: the chosen configuration's launch,
        # arguments bound once (the autotuned call adds its Python per call: host overhead)
        launch, _ = ctx.peers.tile_examples().prepare_rows(op, y, *inputs, **config)
        return Prepared(launch, y, note=note)

    def triton() -> Prepared:
        if dt != "f32":
            raise Skip("the suite's Triton row kernels compute in the input dtype: f32 only")
        kt, y = ctx.peers.triton(), new()
        return Prepared(getattr(kt, f"{op}_launch")(*inputs, y), y)

    tilegym, eager = family_rows.peer_builders(ctx, op, x, w, b)
    skip = _skip(NO_SIMT)
    impls = device_impls(skip, tile, skip, triton, skip, eager, tilegym=tilegym)
    return run_device_case(ctx, case, impls)


def _gemm(ctx: Ctx, dt: str, m: int, n: int, k: int) -> list[Record]:
    torch = ctx.torch
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
    a = torch.randn(m, k, device="cuda").to(tdt)
    b = torch.randn(k, n, device="cuda").to(tdt)
    case = DeviceCase(
        gemm_case(dt, m, n, k),
        FAMILY,
        dt,
        reference=lambda: a.double() @ b.double(),
        flops=2 * m * n * k,
        params={"op": "gemm", "m": m, "n": n, "k": k, "dtype": dt},
    )

    def new() -> Any:
        return torch.empty(m, n, device="cuda", dtype=tdt)

    def tile() -> Prepared:
        fn, c = _tuned(ctx, "matmul_tuned"), new()
        config, note = _first_call(fn, (a, b, c), ctx.sync)
        launch, _ = ctx.peers.tile_examples().prepare_matmul(a, b, c, **config)
        return Prepared(launch, c, note=note)

    def triton() -> Prepared:
        c, kt = new(), ctx.peers.triton()
        return Prepared(kt.matmul_launch(a, b, c), c, note=f"config {kt.MATMUL_CONFIG}")

    tilegym, eager = family_gemm.peer_builders(ctx, a, b, new)
    skip = _skip(NO_SIMT)
    impls = device_impls(skip, tile, skip, triton, skip, eager, tilegym=tilegym)
    return run_device_case(ctx, case, impls)


# ------------------------------------------------------------------------------- dry run


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """Each op and dtype once, through its autotuned function on the simulator (the tuning
    protocol runs there too), at a small ragged shape, against NumPy."""
    import fearless as fl

    from .check import bf16_to_f32, rel_err_numpy

    rng = np.random.default_rng(17)
    rows, cols = 6, 37
    out: list[Record] = []

    def values(t: Any, dt: str) -> np.ndarray:
        host = t.numpy()
        return np.asarray(bf16_to_f32(host) if dt == "bf16" else host, dtype=np.float64)

    for op, dts in ROW_OPS.items():
        for dt in dts:
            names = [c for c in selected if c.startswith(f"shapes_{op}_{dt}_")]
            if not names:
                continue
            want = {"f32": fl.f32, "f16": fl.f16, "bf16": fl.bf16}[dt]
            x = fl.asarray(rng.standard_normal((rows, cols)).astype(np.float32), dtype=want)
            w = fl.asarray(rng.standard_normal(cols).astype(np.float32), dtype=want)
            b = fl.asarray(rng.standard_normal(cols).astype(np.float32), dtype=want)

            def body(op: str = op, dt: str = dt, x: Any = x, w: Any = w, b: Any = b) -> float:
                from .family_rows import numpy_reference

                fn = getattr(peers.tile_examples(), f"{op}_tuned", None)
                if fn is None:
                    raise Skip(f"examples/tile_kernels.py has no `{op}_tuned`")
                y = fl.zeros((rows, cols), dtype=x.dtype)
                args = {"softmax": (x,), "rms_norm": (x, w, EPS), "layer_norm": (x, w, b, EPS)}
                fn(*args[op], y)
                ref = numpy_reference(op, values(x, dt), values(w, dt), values(b, dt))
                return rel_err_numpy(values(y, dt), ref)

            params = {"op": op, "rows": rows, "cols": cols, "dtype": dt, "covers": sorted(names)}
            out.append(
                dry.dry_record(f"shapes_{op}_{dt}", FAMILY, FEARLESS_TILE, dt, body, **params)
            )
    for dt in ("f16", "bf16"):
        names = [c for c in selected if c.startswith(f"shapes_gemm_{dt}_")]
        if not names:
            continue
        want = fl.f16 if dt == "f16" else fl.bf16
        a = fl.asarray(rng.standard_normal((70, 90)).astype(np.float32), dtype=want)
        bm = fl.asarray(rng.standard_normal((90, 50)).astype(np.float32), dtype=want)

        def gemm(dt: str = dt, a: Any = a, bm: Any = bm) -> float:
            fn = getattr(peers.tile_examples(), "matmul_tuned", None)
            if fn is None:
                raise Skip("examples/tile_kernels.py has no `matmul_tuned`")
            c = fl.zeros((70, 50), dtype=a.dtype)
            fn(a, bm, c)
            return rel_err_numpy(values(c, dt), values(a, dt) @ values(bm, dt))

        params = {"m": 70, "n": 50, "k": 90, "dtype": dt, "covers": sorted(names)}
        out.append(dry.dry_record(f"shapes_gemm_{dt}", FAMILY, FEARLESS_TILE, dt, gemm, **params))
    return out
