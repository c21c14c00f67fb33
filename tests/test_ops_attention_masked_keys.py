"""A key that a row's mask leaves out (the causal future, outside a sliding window) takes no
part in that row, even where it holds NaN or Inf: the attention kernels replace a masked score
with -inf (`tile.where(keep, s, -inf)`) instead of adding -inf to it, which left NaN + -inf =
NaN and spread one bad key over every row of its tile (found by a red-team helper, 2026-12-07).
torch's SDPA gives the same finite rows. Each operator on the simulator, its result with the
bad key beside its result with that key finite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fearless import ops

torch = pytest.importorskip("torch")


def _randn(*shape: int) -> Any:
    return torch.randn(*shape, generator=GEN)


GEN = torch.Generator().manual_seed(7)
Q4, K4, V4 = _randn(1, 1, 4, 16), _randn(1, 1, 4, 16), _randn(1, 1, 4, 16)
Q8, K8, V8 = _randn(1, 1, 8, 16), _randn(1, 1, 8, 16), _randn(1, 1, 8, 16)
QS, KS, VS = _randn(1, 3, 1, 2, 16), _randn(1, 40, 1, 16), _randn(1, 40, 1, 16)
QM, KM, VM, QPE, KPE = (_randn(1, 1, n, d) for n, d in ((5, 16), (6, 16), (6, 16), (5, 8), (6, 8)))


def _bsh(x: Any) -> Any:  # (B, H, L, D) as flash-attn's (B, L, H, D)
    return x.transpose(1, 2)


# (operator on keys k, the keys, the bad key's index, the rows that must stay finite)
CASES: dict[str, tuple[Callable[[Any], Any], Any, tuple[int, ...], slice]] = {
    "sdpa_causal": (
        lambda k: ops.scaled_dot_product_attention(Q4, k, V4, is_causal=True),
        K4, (0, 0, 3), slice(0, 3),
    ),
    "fmha": (lambda k: ops.fmha(Q4, k, V4), K4, (0, 0, 3), slice(0, 3)),
    "flash_attn_func": (
        lambda k: _bsh(ops.flash_attn_func(_bsh(Q4), _bsh(k), _bsh(V4), causal=True)),
        K4, (0, 0, 3), slice(0, 3),
    ),
    "swa_attention": (lambda k: ops.swa_attention(Q8, k, V8, 2), K8, (0, 0, 0), slice(2, 8)),
    "gemma_attention_decode": (
        lambda k: ops.gemma_attention_decode(Q8[:, :, :1], k, V8, window_size=2),
        K8, (0, 0, 0), slice(0, 1),
    ),
    "attention_sink": (  # positions 5..7 never see key 39
        lambda k: ops.attention_sink(QS, k, VS, torch.zeros(2), 0.25, None, 5).view(1, 3, 2, 16),
        KS, (0, 39), slice(0, 3),
    ),
    "attention_sink_decode": (  # one query at position 20 with a window of 4: keys 17..20
        lambda k: ops.attention_sink_decode(QS[:, :1], k, VS, torch.zeros(2), 0.25, 4, 20),
        KS, (0, 3), slice(0, 1),
    ),
    "mla_causal": (  # mla's causal mask is top-left: no row of 5 sees key 5
        lambda k: ops.mla(QM, k, VM, QPE, KPE, True), KM, (0, 0, 5), slice(0, 5),
    ),
}  # fmt: skip


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("name", list(CASES))
def test_a_masked_bad_key_reaches_no_row(name: str, value: float) -> None:
    run, keys, at, rows = CASES[name]
    bad = keys.clone()
    bad[at] = value
    got, clean = run(bad), run(keys)
    axis = 1 if name.startswith("attention_sink") else 2
    index = (slice(None),) * axis + (rows,)
    assert torch.isfinite(got[index]).all()
    assert torch.allclose(got[index], clean[index], rtol=1e-6, atol=1e-6)
