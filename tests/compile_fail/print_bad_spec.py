import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(x):
        print(f"{x[i]:d}")  # error[E0640] col 18: format spec `d` does not fit a value of type f32
