"""How Tile IR's print prints a tile of several elements on the GPU (cuTile Python's
`ct.printf` of whole tiles), so that fearless's Tile `print` and its simulator can print them
the same way: `python3 bench/experiments/tile_print_probe.py` on the GPU machine."""

import cuda.tile as ct  # type: ignore[import-not-found]
import torch


@ct.kernel
def probe(x):
    a = ct.arange(4, dtype=ct.int32)
    ct.printf("ints: %d\n", a)
    ct.printf("floats: %.2f\n", ct.load(x, index=(0, 0), shape=(2, 4)))
    ct.printf("pair: %d and %f\n", a, a.astype(ct.float32) * 0.5)


def main() -> None:
    x = torch.arange(8, dtype=torch.float32, device="cuda").reshape(2, 4)
    ct.launch(torch.cuda.current_stream(), (1, 1, 1), probe, (x,))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
