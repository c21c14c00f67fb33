import sys

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32]):
    i = simt.thread.index_1d()
    print(i, file=sys.stderr)  # error[E0640] col 14: `print` in a kernel does not take `file=`
