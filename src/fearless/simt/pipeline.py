"""The SIMT pass pipeline: one list, in order, with the reasons for the order.

  bounds_insert   every load/store gets a check.bounds (sites recorded for error messages)
  bounds_elim     checks proven by dominating guards are removed; must run after
                  bounds_insert and before dce (dce would otherwise keep `len` ops alive
                  only for checks that are about to disappear... and then drop them)
  bounds_merge    the remaining checks of a block become groups with one branch each; after
                  bounds_elim, which reasons about single checks
  dce             drops ops whose results are unused (e.g. the `len` of removed checks)

The witness rules are enforced while lowering (simt/access.py), so nothing unsafe
reaches this pipeline. Under FEARLESS_VERIFY=1 the verifier runs after every pass.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import config
from ..ir.core import Function
from ..ir.simt.verifier import verify
from .passes import bounds_elim, bounds_insert, bounds_merge, dce
from .passes.options import PassOptions

Pass = Callable[[Function, PassOptions], None]

PIPELINE: list[tuple[str, Pass]] = [
    ("bounds_insert", bounds_insert.run),
    ("bounds_elim", bounds_elim.run),
    ("bounds_merge", bounds_merge.run),
    ("dce", dce.run),
]


def run_pipeline(fn: Function, options: PassOptions) -> None:
    check = config.verify_each_pass()
    if check:
        verify(fn)
    for _name, run in PIPELINE:
        run(fn, options)
        if check:
            verify(fn)
