"""fearless inside a torch.distributed job: data-parallel steps whose math is fearless.ops.

Every rank holds its own shard of a batch and the same weight. Each step it computes, with
fearless kernels, the gradient of a least-squares layer on its shard:

    h = rms_norm(x_r) @ w            (fearless.ops.rms_norm, fearless.ops.matmul)
    g_r = rms_norm(x_r)^T @ (h - y_r)

then the ranks all-reduce the g_r (torch.distributed, NCCL on GPUs, gloo on the simulator) and
step w by the mean. At the end rank 0 checks w against one process that took the same steps
on the whole batch, also with fearless.ops: data parallelism must not change the result
beyond f32 rounding.

    torchrun --nproc_per_node=2 examples/ddp_allreduce.py              # one GPU per rank
    FEARLESS_TARGET=sim torchrun --nproc_per_node=2 examples/ddp_allreduce.py   # CPU only

On GPUs each rank runs on its own GPU, cuda:LOCAL_RANK, chosen the way any torch job chooses
it: `torch.cuda.set_device(local_rank)` before the first CUDA work. fearless follows torch's
current device: a process runs its kernels on the first GPU it is given, and with none given,
on torch's current one (docs/design.md, "Devices"). Multi-node jobs are torch.distributed's
business: torchrun's --nnodes and --rdzv-endpoint start the same script on every node, and each
rank still takes its node-local GPU.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

import fearless as fl
from fearless import ops


def shard(rank: int, rows: int, d: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s rows of the batch: inputs (rows, d) and targets (rows, n), from its seed."""
    g = torch.Generator().manual_seed(1000 + rank)
    return torch.randn(rows, d, generator=g), torch.randn(rows, n, generator=g)


def gradient(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, nw: torch.Tensor) -> torch.Tensor:
    """rms_norm(x)^T @ (rms_norm(x) @ w - y), every product and the norm fearless kernels."""
    xn = ops.rms_norm(x, (x.shape[1],), nw, 1e-6)
    h = ops.matmul(xn, w)
    return ops.matmul(ops.transpose(xn), h - y)


def train(
    xs: list[tuple[torch.Tensor, torch.Tensor]],
    w: torch.Tensor,
    nw: torch.Tensor,
    steps: int,
    lr: float,
    reduce: bool,
) -> torch.Tensor:
    """`steps` steps from w; with `reduce`, this rank's shard and an all-reduce of the
    gradients, else every shard in this process."""
    for _ in range(steps):
        if reduce:
            ((x, y),) = xs
            g = gradient(x, y, w, nw)
            dist.all_reduce(g, op=dist.ReduceOp.SUM)
        else:
            g = sum(gradient(x, y, w, nw) for x, y in xs)  # type: ignore[assignment]
        w = w - lr * g / (len(xs) if not reduce else dist.get_world_size())
    return w


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=256, help="rows of the batch per rank")
    p.add_argument("--dim", type=int, default=128, help="input features")
    p.add_argument("--out", type=int, default=64, help="output features")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    on_gpu = fl.get_target() == "cuda"
    if on_gpu:  # this rank's GPU: torch's current device, which fearless takes too
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    g = torch.Generator().manual_seed(7)
    w0 = (0.05 * torch.randn(args.dim, args.out, generator=g)).to(device)
    nw = torch.ones(args.dim).to(device)
    mine = [tuple(t.to(device) for t in shard(rank, args.rows, args.dim, args.out))]
    w = train(mine, w0, nw, args.steps, 1e-3, reduce=True)  # type: ignore[arg-type]
    first = w.clone()
    dist.broadcast(first, src=0)
    apart = torch.tensor([float((w - first).abs().max())], device=device)
    dist.all_reduce(apart, op=dist.ReduceOp.MAX)  # every rank must hold rank 0's weight
    if rank == 0:
        every = [
            tuple(t.to(device) for t in shard(r, args.rows, args.dim, args.out))
            for r in range(world)
        ]
        want = train(every, w0, nw, args.steps, 1e-3, reduce=False)  # type: ignore[arg-type]
        err = float((w - want).norm() / want.norm())
        ref = reference(every, w0.double(), nw.double(), args.steps, 1e-3)
        err64 = float((w.double() - ref).norm() / ref.norm())
        moved = float((w - w0).norm() / w0.norm())
        print(
            f"ranks {world}, target {fl.get_target()}: w moved {moved:.3e}; data-parallel vs "
            f"one process: rel err {err:.2e}; vs torch in f64: {err64:.2e}; ranks apart by "
            f"{float(apart):.1e}"
        )
        ok = err < 1e-5 and err64 < 1e-4 and float(apart) == 0.0 and moved > 1e-4
        print("ok" if ok else "MISMATCH")
    dist.barrier()
    dist.destroy_process_group()


def reference(
    xs: list[tuple[torch.Tensor, torch.Tensor]],
    w: torch.Tensor,
    nw: torch.Tensor,
    steps: int,
    lr: float,
) -> torch.Tensor:
    """The same steps in torch, in f64: what fearless's kernels are checked against."""
    F = torch.nn.functional
    for _ in range(steps):
        g = torch.zeros_like(w)
        for x, y in xs:
            xn = F.rms_norm(x.double(), (x.shape[1],), nw, 1e-6)
            g = g + xn.T @ (xn @ w - y.double())
        w = w - lr * g / len(xs)
    return w


if __name__ == "__main__":
    main()
