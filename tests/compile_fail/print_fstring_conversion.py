import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32]):
    i = simt.thread.index_1d()
    print(f"{i!r}")  # error[E0640] col 14: `!r` in a kernel's f-string
