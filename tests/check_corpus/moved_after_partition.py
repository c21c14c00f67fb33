"""Using a tensor after `partition()` moved it (E0382), on every path and on some."""

from mykernels import add

import fearless as fl

x = fl.zeros(1024, dtype=fl.f32)
y = fl.zeros(1024, dtype=fl.f32)
z = fl.empty(1024, dtype=fl.f32)
zp = z.partition((128,))
add(zp, x, y)
print(z.numpy())  # error[E0382] col 7: use of moved value: `z`
z = zp.unpartition()
print(z.numpy())

w = fl.empty(1024, dtype=fl.f32)
alias = w
wp = w.partition((128,))
add(wp, x, alias)  # error[E0382] col 12: use of moved value: `alias`


def maybe_moved(t, flag):
    if flag:
        tp = t.partition((128,))
        add(tp, x, y)
    return t.shape  # error[E0382] col 12: use of moved value: `t`


def moved_in_loop(t):
    for _ in range(3):
        tp = t.partition((128,))  # error[E0382] col 14: use of moved value: `t`
        add(tp, x, y)


def moved_in_a_with_block(t):
    with t.partition((128,)) as tp:
        add(tp, x, y)
        print(t.shape)  # error[E0382] col 15: use of moved value: `t`
    return t.shape  # given back at the block's end
