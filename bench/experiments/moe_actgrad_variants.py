"""Which construct makes the 16-bit moe_actgrad kernel hang on the GPU (2026-12-05: every bf16 and
f16 case of tests/gpu/test_ops_moe_actgrad_gpu.py never finished on the H100 and the H200; f32
passed). Each variant runs in its own process under a timeout, on the bf16 swiglu case of the
test (256 tokens, top 4, H 1024, I 512, 16 experts): its verdict (ok / wrong / hang) and time.

Variants of ops/kernels_moe_actgrad.py's kernel (written out here, so that they stay what
they were whatever the shipped kernel becomes):
  base    the kernel as shipped at ad07ea9 (the group bounds loaded inside the K loop);
  regs    each expert's group bounds taken from the offsets tile already in registers, not a
          scalar load inside the K loop;
  notma   w2's tile loaded without TMA;
  both    regs and notma;
  cfg2    base at the second configuration (128, 64, 64), no occupancy hint;
  f32     base in f32 (passes: the control).

Run on the GPU machine: python3 bench/experiments/moe_actgrad_variants.py [variant ...]

Measured 2026-12-05 on the H100 (bench/results/h100-2026-12-05-session16/variants.txt):
base, regs and cfg2 hang; notma and both finish with relative errors 1.7e-3 (dh, a_prime) and
1e-6 (ds); f32 finishes. The shipped kernel loads w2 without TMA since.
"""

import subprocess
import sys
import time

import fearless as fl
from fearless import tile

VARIANTS = ("base", "regs", "notma", "both", "cfg2", "f32")


def patched(variant: str) -> None:
    """Replace the shipped kernel factory by the variant's."""
    from fearless.ops import kernels_moe_actgrad as K

    regs = variant in ("regs", "both")
    tma = variant not in ("notma", "both")

    def make(dt, kind):
        glu = kind in K.GLU

        @tile.kernel
        def moe_actgrad(
            dh: tile.Part[dt],
            a_prime: tile.Part[dt],
            ds: tile.Part[fl.f32],
            dout: tile.Tensor[dt],
            h: tile.Tensor[dt],
            w2: tile.Tensor[dt],
            scores: tile.Tensor[fl.f32],
            offsets: tile.Tensor[fl.i32],
            gather_idx: tile.Tensor[fl.i32],
            scatter_idx: tile.Tensor[fl.i32],
            BN: tile.Const[int],
            BK: tile.Const[int],
            EP: tile.Const[int],
        ):
            (BM,) = ds.shape
            i = ds.index[0]
            row0 = i * BM
            rows = row0 + tile.arange(BM)
            src = tile.load(gather_idx, (i,), (BM,), padding=-1)
            s = tile.gather(scores, tile.load(scatter_idx, (i,), (BM,), padding=-1))[:, None]
            experts = offsets.shape[0] - 1
            k = tile.arange(EP)
            o = tile.load(offsets, (0,), (EP,))
            first = tile.sum(tile.where((k >= 1) & (k <= experts) & (o <= row0), 1, 0))
            last = tile.sum(tile.where((k < experts) & (o < row0 + BM), 1, 0))
            steps = tile.num_tiles(dout, 1, (BM, BK))
            part = tile.zeros((BM,), fl.f32)
            for c in dh.chunks((BM, dh.shape[1], BN)):
                j = c.index[2]
                live = min(1, max(0, h.shape[2] - j * BN))
                dy = tile.zeros((BM, BN), fl.f32)
                for t in range((last - first) * steps * live):
                    e = first + t // steps
                    kk = t % steps
                    if regs:
                        start = tile.sum(tile.where(k == e, o, 0))
                        end = tile.sum(tile.where(k == e + 1, o, 0))
                    else:
                        start = tile.load(offsets, (e,), (1,)).item()
                        end = tile.load(offsets, (e + 1,), (1,)).item()
                    sel = tile.where((rows >= start) & (rows < end), src, -1)[:, None]
                    kc = (kk * BK + tile.arange(BK))[None, :]
                    w = tile.load(w2, (e, kk, j), (1, BK, BN), order=(0, 2, 1), allow_tma=tma)
                    dy = tile.mma(tile.gather(dout, (sel, kc)), w.reshape((BK, BN)), dy)
                if glu:
                    gate = K.h_chunk(h, i, j, BM, BN, 0)
                    up = K.h_chunk(h, i, j, BM, BN, 1)
                    act, grad = K.act_and_grad(gate, kind)
                    part = part + tile.sum(dy * act * up, axis=1)
                    dg = (dy * s * up * grad)[:, None, :]
                    du = (dy * s * act)[:, None, :]
                    c.store(tile.cat((dg, du), 1).astype(dt))
                else:
                    act, grad = K.act_and_grad(K.h_chunk(h, i, j, BM, BN, 0), kind)
                    part = part + tile.sum(dy * act, axis=1)
                    c.store((dy * s * grad).reshape((BM, 1, BN)).astype(dt))
            for c in a_prime.chunks((BM, BN)):
                j = c.index[1]
                act, _ = K.act_and_grad(K.h_chunk(h, i, j, BM, BN, 0), kind)
                if glu:
                    act = act * K.h_chunk(h, i, j, BM, BN, 1)
                c.store((act * s).astype(dt))
            ds.store(tile.load_like(ds, ds) + part)

        return moe_actgrad

    K.make_moe_actgrad = make
    if variant == "cfg2":
        K.ACTGRAD_CONFIGS.insert(0, K.ACTGRAD_CONFIGS.pop(1))


def one(variant: str) -> None:
    sys.path[:0] = ["tests", "tests/gpu"]
    patched(variant)
    import torch
    from test_ops_moe_actgrad_gpu import _args as make_args

    from fearless import ops
    from support.moe_actgrad_ref import moe_actgrad_reference

    a = make_args("swiglu", 256, 4, 1024, 512, 16, "float32" if variant == "f32" else "bfloat16")
    t0 = time.perf_counter()
    ops.moe_actgrad_bwd(**a)
    torch.cuda.synchronize()
    took = time.perf_counter() - t0
    names = ("dout", "h", "w2", "topk_scores", "expert_frequency_offset", "x_gather_idx",
             "s_scatter_idx")  # fmt: skip
    host = [a[n].cpu() for n in names]
    want = moe_actgrad_reference(
        *((t.double() if t.is_floating_point() else t).numpy() for t in host), "swiglu"
    )
    errs = []
    for name, w in zip(("dh", "a_prime", "ds"), want, strict=True):
        got = a[name].double().cpu().numpy()
        errs.append(float(((got - w) ** 2).sum() ** 0.5 / max(float((w**2).sum() ** 0.5), 1e-30)))
    verdict = "ok" if max(errs) < 2e-2 else "wrong"
    print(f"RESULT {variant} {verdict} first call {took:.2f} s rel errs {errs}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        one(sys.argv[2])
        return
    for variant in sys.argv[1:] or VARIANTS:
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, "--one", variant], capture_output=True,
                               text=True, timeout=45)  # fmt: skip
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
            print(lines[0] if lines else f"RESULT {variant} error rc {p.returncode}: "
                  + p.stderr.strip()[-600:], flush=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            print(f"RESULT {variant} hang (> 45 s, {time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
