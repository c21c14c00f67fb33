import fearless as fl
from fearless import simt


@simt.device
def fact(n: int) -> int:
    if n <= 1:
        return 1
    return n * fact(n - 1)  # error[E0604] col 16: recursive call of device function `fact`


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    c[i] = fact(5)
