"""ops.dropout's kernel at the elementwise grid's largest size, by tile size and tileiras
hints, against TileGym's dropout and torch's, in one process on the GPU machine:
`python3 bench/experiments/dropout_variants.py`. GB/s counts one read and one write."""

from __future__ import annotations

import torch

import fearless as fl
from fearless.ops.kernels_activation import make_dropout
from fearless_bench.timing import FULL, DeviceTimer

N = 1 << 26
P = 0.5


def gbps(fn, nbytes: int) -> float:  # type: ignore[no-untyped-def]
    """GB/s of `fn` from the suite's timer (CUDA events, L2 flushed before each run)."""
    return nbytes / (DeviceTimer(torch, FULL).time(fn).median * 1e-3) / 1e9


def main() -> None:
    fl.set_target("cuda")
    for tdt, dt in ((torch.float16, fl.f16), (torch.float32, fl.f32)):
        x = torch.randn(N, device="cuda").to(tdt)
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        rows = {"torch": gbps(lambda x=x: torch.nn.functional.dropout(x, P), nbytes)}
        try:
            import tilegym.ops as tg  # type: ignore[import-not-found]

            rows["tilegym"] = gbps(lambda x=x: tg.dropout(x, 7, P, True, False), nbytes)
        except Exception as exc:
            print("tilegym:", str(exc).splitlines()[0])
        base = make_dropout(dt)
        for block in (1024, 4096):
            for occ in (None, 4, 16):
                k = base if occ is None else base.options(occupancy=occ)
                part = fl.asarray(out).partition((block,))
                xs = fl.asarray(x)

                def run(k=k, part=part, xs=xs) -> None:  # type: ignore[no-untyped-def]
                    k(part, xs, 2**31, 2.0, 7)

                rows[f"fearless B={block} occ={occ}"] = gbps(run, nbytes)
                part.unpartition()
        print(f"== dropout {tdt}, {N} elements")
        for name, v in sorted(rows.items(), key=lambda kv: -kv[1]):
            print(f"  {v:7.1f} GB/s  {name}")


if __name__ == "__main__":
    main()
