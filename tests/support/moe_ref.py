"""NumPy references of TileGym's mixture of experts (its torch references restated:
`moe_align_block_size_torch` of tilegym/ops/moe_interface.py, laid out as its cuTile
`moe_align_block_size` returns, and `Test_MOE.reference` of tests/ops/test_moe.py in float64):
what tests/test_ops_moe.py and its GPU test compare `fearless.ops` with; and the same in torch
float64 (`fused_moe_torch_reference`), whose autograd gives the gradients that
tests/test_ops_moe_backward.py compares the backward with; and the GPU tests' bf16 cases drawn
from a seed (`moe_inputs`, `moe_backward_case`)."""

from __future__ import annotations

import numpy as np


def moe_align_reference(
    topk_ids: np.ndarray, block_size: int, num_experts: int
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, int]:
    """(sorted_token_ids, expert_ids, num_tokens_post_padded, cumsum, max_expert_cnt): the
    slots (flat indices of topk_ids) stably sorted by expert, each group padded to a multiple
    of block_size with the sentinel topk_ids.size, in arrays of TileGym's cuTile lengths
    (size + E * (block_size - 1) slots; the sentinel, and expert -1, past the padded total)."""
    flat = topk_ids.reshape(-1).astype(np.int64)
    n = flat.size
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=num_experts)
    blocks = (counts + block_size - 1) // block_size
    length = n + num_experts * (block_size - 1)
    sorted_ids = np.full(length, n, dtype=np.int32)
    expert_ids = np.full(-(-length // block_size), -1, dtype=np.int32)
    cumsum = np.zeros(num_experts + 1, dtype=np.int32)
    block, taken = 0, 0
    for e in range(num_experts):
        expert_ids[block : block + blocks[e]] = e
        start = block * block_size
        sorted_ids[start : start + counts[e]] = order[taken : taken + counts[e]]
        taken += counts[e]
        block += blocks[e]
        cumsum[e + 1] = block * block_size
    return sorted_ids, expert_ids, block * block_size, cumsum, int(counts.max(initial=0))


def fused_moe_reference(
    hidden_states: np.ndarray,
    w1: np.ndarray,
    w2: np.ndarray,
    topk_weights: np.ndarray,
    topk_ids: np.ndarray,
) -> np.ndarray:
    """(T, H) float64: out[t] = sum over k of topk_weights[t, k] * w2[e] (silu(gate) * up),
    gate and up = w1[e, :I] x and w1[e, I:] x, e = topk_ids[t, k]."""
    x = hidden_states.astype(np.float64)
    a, b = w1.astype(np.float64), w2.astype(np.float64)
    inter = a.shape[1] // 2
    out = np.zeros((x.shape[0], b.shape[1]))
    for t in range(x.shape[0]):
        for k in range(topk_ids.shape[1]):
            e = int(topk_ids[t, k])
            gate, up = a[e, :inter] @ x[t], a[e, inter:] @ x[t]
            out[t] += float(topk_weights[t, k]) * (b[e] @ (gate / (1.0 + np.exp(-gate)) * up))
    return out


def fused_moe_torch_reference(hidden_states, w1, w2, topk_weights, topk_ids):  # type: ignore[no-untyped-def]
    """The same sum in torch, differentiable: float64 copies of the four float inputs (leaves
    that require grad) and out (T, H), batched over the (token, k) slots, so that
    `out.backward(dy)` leaves the float64 gradients the backward is compared with."""
    import torch

    leaves = [
        t.detach().to(torch.float64).requires_grad_() for t in (hidden_states, w1, w2, topk_weights)
    ]
    x, a, b, weights = leaves
    inter = a.shape[1] // 2
    e = topk_ids.reshape(-1).long()
    xs = x.repeat_interleave(topk_ids.shape[1], 0)
    h = torch.einsum("sh,sih->si", xs, a[e])
    act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    y = torch.einsum("si,shi->sh", act, b[e]) * weights.reshape(-1, 1)
    return y.reshape(*topk_ids.shape, -1).sum(1), leaves


def moe_inputs(tokens, hidden, inter, experts, topk, seed):  # type: ignore[no-untyped-def]
    """A bf16 MoE case on the GPU, drawn after `torch.manual_seed(seed)`: (hidden_states, w1,
    w2, topk_weights (softmax), topk_ids)."""
    import torch

    torch.manual_seed(seed)
    dt = torch.bfloat16
    x = torch.randn(tokens, hidden, dtype=dt, device="cuda").normal_(0, 0.5)
    w1 = torch.randn(experts, 2 * inter, hidden, dtype=dt, device="cuda").normal_(0, 0.1)
    w2 = torch.randn(experts, hidden, inter, dtype=dt, device="cuda").normal_(0, 0.1)
    ids = torch.randint(0, experts, (tokens, topk), dtype=torch.long, device="cuda")
    weights = torch.softmax(torch.randn(tokens, topk, device="cuda"), dim=-1).to(dt)
    return x, w1, w2, weights, ids


def moe_backward_case(tokens, hidden, inter, experts, topk, seed):  # type: ignore[no-untyped-def]
    """`moe_inputs`, then dy, and the float64 reference's gradients: (x, w1, w2 and
    topk_weights as leaves that require grad, topk_ids, dy, the reference's float64 leaves
    after `backward(dy)`)."""
    import torch

    x, w1, w2, weights, ids = moe_inputs(tokens, hidden, inter, experts, topk, seed)
    dy = torch.randn(tokens, hidden, dtype=x.dtype, device="cuda")
    want, leaves = fused_moe_torch_reference(x, w1, w2, weights, ids)
    want.backward(dy.double())
    inputs = [t.clone().requires_grad_() for t in (x, w1, w2, weights)]
    return inputs, ids, dy, leaves
