"""A lambda's body is checked like a `def`'s (later, against the module's names); its
defaults run where it is made."""

from mykernels import add, vecadd

import fearless as fl

x = fl.zeros(256, dtype=fl.f32)
callbacks = [
    lambda a: vecadd[1, 256](a, a, a),  # error[E0502] col 36: cannot borrow `a` as mutable
    lambda: vecadd[1, 256](x, x, x),  # error[E0502] col 34: cannot borrow `x` as mutable
    lambda a, b: vecadd[1, 256](a, a, b),
]
many = [lambda i=i: vecadd[1, 256](x, x, fl.empty(256, dtype=fl.f32)) for i in range(3)]

z = fl.empty(1024, dtype=fl.f32)
zp = z.partition((128,))
add(zp, x, x)
callbacks.append(lambda t=z: t)  # error[E0382] col 27: use of moved value: `z`
z = zp.unpartition()
callbacks.append(lambda: z)
