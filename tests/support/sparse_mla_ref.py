"""The NumPy (float64) reference of TileGym's sparse MLA (its test's torch reference,
tests/ops/experimental/test_sparse_mla.py's Test_SparseMLA.reference, restated): what
tests/test_ops_sparse_mla.py compares `fearless.ops.sparse_mla` with."""

from __future__ import annotations

import numpy as np


def sparse_mla_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    indices: np.ndarray,
    qpe: np.ndarray,
    kpe: np.ndarray,
    is_causal: bool = True,
    scaling: float | None = None,
) -> np.ndarray:
    """(B, H, S, D), float64: query (b, h, s) over the keys indices[b, s, h // G, :] (G = H /
    H_kv) of k, v and kpe[:, 0]; scores (q k + qpe kpe) * scaling (default 1 / sqrt(D + D_PE));
    `is_causal` drops an index above s; a row that keeps no key is 0 (TileGym's: NaN)."""
    b, h, s, d = q.shape
    hk = k.shape[1]
    dp = qpe.shape[3]
    sc = 1.0 / np.sqrt(d + dp) if scaling is None else scaling
    f = [x.astype(np.float64) for x in (q, k, v, qpe, kpe)]
    out = np.zeros((b, h, s, d))
    for bb in range(b):
        for hh in range(h):
            g = hh // (h // hk)
            for ss in range(s):
                idx = indices[bb, ss, g].astype(np.int64)
                logits = f[1][bb, g, idx] @ f[0][bb, hh, ss] + f[4][bb, 0, idx] @ f[3][bb, hh, ss]
                logits = logits * sc
                if is_causal:
                    logits = np.where(idx <= ss, logits, -np.inf)
                if np.isinf(logits).all():
                    continue
                p = np.exp(logits - logits.max())
                out[bb, hh, ss] = (p / p.sum()) @ f[2][bb, g, idx]
    return out
