import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32]):
    print("x =", x)  # error[E0640] col 18: `print` in a kernel cannot print a value of type `Slice[f32]`
