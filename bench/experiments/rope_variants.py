"""ops.rope's kernel against TileGym's rope at bench_rope's shapes, by variant and occupancy, in
one process on the GPU machine: `python3 bench/experiments/rope_variants.py`. GB/s counts what
the ops family counts: q and k read and written, cos and sin read.

Variants: `native` is ops.rope's kernel (the math in the tensors' dtype, as TileGym does, both
halves joined into one (XH, 2, H) tile and stored whole); `halves` stores each half as its own
chunk of the block's tile (TileGym stores the halves apart). The `joined` f32 figures of
bench/results/h200-2026-12-03l-launch-rope are ops.rope before a9c2159, which converted the
halves and the tables to f32 (`git show a9c2159^:src/fearless/ops/kernels_layout.py`)."""

from typing import Any

import torch

import fearless as fl
from fearless import tile
from fearless.ops.kernels_layout import make_rope
from fearless_bench.family_ops_cases import rotary_tables
from fearless_bench.timing import FULL, DeviceTimer


def make_halves(dt: Any) -> Any:
    @tile.kernel
    def rope_halves(
        qo: tile.Part[dt],
        ko: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        cos: tile.Tensor[dt],
        sin: tile.Tensor[dt],
        COS_BS: tile.Const[int],
    ):
        _, QH, _, D = qo.shape
        _, KH, _, _ = ko.shape
        H = D // 2
        b, _, s, _ = qo.index
        cb = b if COS_BS > 1 else 0
        c = tile.load(cos, (cb, s, 0), (1, 1, H)).reshape((1, 1, 1, H))
        sn = tile.load(sin, (cb, s, 0), (1, 1, H)).reshape((1, 1, 1, H))
        q1 = tile.load(q, (b, 0, s, 0), (1, QH, 1, H))
        q2 = tile.load(q, (b, 0, s, 1), (1, QH, 1, H))
        k1 = tile.load(k, (b, 0, s, 0), (1, KH, 1, H))
        k2 = tile.load(k, (b, 0, s, 1), (1, KH, 1, H))
        for h in qo.chunks((1, QH, 1, H)):
            first = h.index[3] == 0
            h.store(tile.where(first, q1 * c - q2 * sn, q2 * c + q1 * sn))
        for h in ko.chunks((1, KH, 1, H)):
            first = h.index[3] == 0
            h.store(tile.where(first, k1 * c - k2 * sn, k2 * c + k1 * sn))

    return rope_halves


def gbps(fn: Any, nbytes: int) -> float:
    """GB/s of `fn` from the suite's timer (CUDA events, L2 flushed before each run)."""
    return nbytes / (DeviceTimer(torch, FULL).time(fn).median * 1e-3) / 1e9


def main() -> None:
    fl.set_target("cuda")
    dt, tdt = fl.f16, torch.float16
    for seq in (4096, 32768):
        shape = (1, 16, seq, 64)
        q, k = (
            torch.randn(shape, device="cuda", dtype=tdt),
            torch.randn(shape, device="cuda", dtype=tdt),
        )
        cos_np, sin_np = rotary_tables(seq, 64)
        cos = torch.from_numpy(cos_np[None]).cuda().to(tdt)
        sin = torch.from_numpy(sin_np[None]).cuda().to(tdt)
        nbytes = (4 * q.numel() + 2 * seq * 64) * q.element_size()
        rows: dict[str, float] = {}
        try:
            import tilegym.ops as tg  # type: ignore[import-not-found]

            qw, kw = q.clone(), k.clone()
            rows["tilegym"] = gbps(lambda a=(qw, kw, cos, sin): tg.apply_rope_base(*a), nbytes)
        except Exception as exc:
            print("tilegym:", str(exc).splitlines()[0])
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        want = None
        for name, make in (("native", make_rope), ("halves", make_halves)):
            base = make(dt)
            for occ in (None, 4, 8, 12, 16):
                kern = base if occ is None else base.options(occupancy=occ)
                qp, kp = (
                    fl.asarray(qo).partition((1, 16, 1, 64)),
                    fl.asarray(ko).partition((1, 16, 1, 64)),
                )
                args = (qp, kp, fl.asarray(q), fl.asarray(k), fl.asarray(cos), fl.asarray(sin), 1)
                try:
                    rows[f"{name} occ={occ}"] = gbps(
                        lambda kern=kern, args=args: kern(*args), nbytes
                    )
                except Exception as exc:  # a variant that does not compile is reported, not fatal
                    print(f"{name} occ={occ}:", str(exc).splitlines()[0])
                qp.unpartition()
                kp.unpartition()
                got = torch.cat([qo.flatten(), ko.flatten()]).float()
                if want is None:
                    want = got.clone()
                err = (got - want).abs().max().item()
                if err > 1e-2:
                    print(f"  {name} occ={occ}: differs from native by {err}")
        print(f"== rope f16 {shape}")
        for name, v in sorted(rows.items(), key=lambda kv: -kv[1]):
            print(f"  {v:7.1f} GB/s  {name}")


if __name__ == "__main__":
    main()
