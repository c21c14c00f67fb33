"""Host cost of a warm launch, fearless against the raw cuLaunchKernel floor, in one process:
Tile and SIMT on torch tensors and on fl.Tensors, for 1, 3 and 8 arrays, with the rounds of
every implementation interleaved so that a drift of the host's clock hits them all alike.
Run on the GPU machine: `python3 bench/experiments/launch_ab.py [LABEL]`; prints one table
and a JSON line (so two source trees can be compared from one call)."""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import torch

import fearless as fl
from fearless_bench import tile_track
from fearless_bench.family_launch import N, raw_launcher, simt_kernel
from fearless_bench.peers import Peers


def timed(fn: Any, n: int = 4000) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return us


def launches(peers: Peers, arity: int) -> dict[str, Any]:
    arrays = [torch.randn(N, device="cuda") for _ in range(arity)]
    blocks = (N + 255) // 256
    k = simt_kernel(peers, arity)
    prep = k.prepare(blocks)
    kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.launch_case(arity))

    def tile(on: list[Any]) -> Any:
        part = fl.asarray(on[-1]).partition(tc.tile)
        args = tile_track.bind(kernel, part, on[:-1], consts=tc.consts)
        return lambda: kernel(*args)

    fls = [fl.asarray(a) for a in arrays]  # for SIMT: the Tile launch moves its own output
    return {
        "raw": raw_launcher(torch, k, arrays, blocks),
        "tile/torch": tile(arrays),
        "tile/fl": tile([fl.asarray(a) for a in arrays]),
        "simt/torch": lambda: k(prep, *arrays),
        "simt/fl": lambda: k(prep, *fls),
    }


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "here"
    fl.set_target("cuda")
    peers = Peers("sm_90")
    peers.fearless_gpu()
    result: dict[str, dict[str, float]] = {}
    for arity in (1, 3, 8):
        fns = launches(peers, arity)
        for fn in fns.values():
            timed(fn, 2000)  # warm: compiled, C plans made
        runs: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(9):
            for name, fn in fns.items():
                runs[name].append(timed(fn))
        result[str(arity)] = {name: statistics.median(r) for name, r in runs.items()}
    print(f"{label}: us per launch (median of 9 interleaved rounds of 4000)")
    for arity, row in result.items():
        raw = row["raw"]
        cells = "  ".join(f"{n} {t:5.2f} ({t / raw:4.2f}x)" for n, t in row.items())
        print(f"  {arity} arrays: {cells}")
    print("JSON", json.dumps({"label": label, "us": result}))


if __name__ == "__main__":
    main()
