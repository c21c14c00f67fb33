"""Session 35: the chunked layer_norm / rms_norm backward (rows past kernels_rows_backward.MAX_ROW
columns) adds each chunk's dw (and db) column sums into its block's row of the partial sums.
Before: `tile.atomic_add` at per-element coordinates (acq_rel, one ordered atom an element);
now: one `tile.atomic_store_add` of the chunk's (1, 1, CH) sums (relaxed, a TMA reduction).

Prints ms per `fearless.ops.backward_rows.rms_norm_backward` and `layer_norm_backward` (bf16,
tuning on, torch tensors) at rows of 8192 to 32768 columns, in two fresh processes: "tiled"
(the shipped kernels) and "element" (`part_sums` replaced by the old per-element adds before
any kernel compiles), and torch's eager backward beside them. Run on the GPU machine:
`EXP=norm_backward_sums.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

SHAPES = [(4096, 8192), (4096, 16384), (1024, 32768)]


def _element_sums() -> None:
    """`part_sums` as it was: per-element coordinates, acq_rel adds."""
    import fearless as fl  # noqa: F401
    from fearless import tile
    from fearless.ops import kernels_rows_backward as KB

    @tile.function
    def part_sums(sums, plane, g, j, t, CH):
        cols = j * CH + tile.arange(CH)
        tile.atomic_add(sums, (plane, g, cols), t)

    KB.part_sums = part_sums


def _run(form: str) -> None:
    import torch
    from cuda_timing import events_ms

    if form == "element":
        _element_sums()
    from fearless.ops.backward_rows import layer_norm_backward, rms_norm_backward

    torch.manual_seed(0)
    for m, n in SHAPES:
        x, dy = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        rms = events_ms(lambda x=x, dy=dy, w=w: rms_norm_backward(dy, x, w, 1e-6))
        ln = events_ms(lambda x=x, dy=dy, w=w, b=b: layer_norm_backward(dy, x, w, b, 1e-5))
        if form == "tiled":  # torch's eager backward, once
            xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
            y = torch.nn.functional.layer_norm(xr, (n,), wr, br, 1e-5)
            t_ln = events_ms(
                lambda y=y, dy=dy, ins=(xr, wr, br): torch.autograd.grad(
                    y, ins, dy, retain_graph=True
                )
            )
            extra = f" torch layer_norm {t_ln:7.3f}"
        else:
            extra = ""
        print(
            f"{form:8s} {m}x{n}: rms_norm_backward {rms:7.3f} layer_norm_backward {ln:7.3f}{extra}",
            flush=True,
        )


def main() -> None:
    if len(sys.argv) > 1:
        _run(sys.argv[1])
        return
    for form in ("tiled", "element", "tiled"):  # each with empty caches: no cubin is shared
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "FEARLESS_CACHE_DIR": cache}
            subprocess.run([sys.executable, __file__, form], check=False, env=env)


if __name__ == "__main__":
    main()
