"""`a = b = new` binds one array to both names; keyword arguments go to the parameter they
name; a partition passed on as a keyword argument moves its tensor."""

from mykernels import add, vecadd

import fearless as fl

x = fl.zeros(256, dtype=fl.f32)
a = b = fl.zeros(256, dtype=fl.f32)
vecadd[1, 256](a, x, b)  # error[E0502] col 22: cannot borrow `b` as mutable because
vecadd[1, 256](a=x, b=x, c=x)  # error[E0502] col 28: cannot borrow `x` as mutable because
vecadd[1, 256](x, b=x, c=a)
vecadd[1, 256](a, x, c=b)  # error[E0502] col 24: cannot borrow `b` as mutable because
vecadd[1, 256](x, c=a, b=x)

q = fl.empty(1024, dtype=fl.f32)
add(z=q.partition((128,)), x=x, y=x)
print(q)  # error[E0382] col 7: use of moved value: `q`
