"""fearless.ops inside torch, on the simulator with CPU tensors: `torch.ops.fearless.<name>`,
autograd through fearless backward kernels against torch's own gradients, torch.compile
(fullgraph) and torch.export, and which calls go through the dispatcher."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import fearless as fl
from fearless import config, ops
from fearless.ops import _route

torch = pytest.importorskip("torch")
F = torch.nn.functional
torch_eager = pytest.importorskip("fearless.ops.torch_eager")


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


def _leaves(*shapes: tuple[int, ...], dtype: Any = None) -> list[Any]:
    g = torch.Generator().manual_seed(0)
    return [
        torch.randn(s, generator=g, dtype=dtype or torch.float32).requires_grad_() for s in shapes
    ]


def _rope_ref(q: Any, k: Any, cos: Any, sin: Any) -> tuple[Any, Any]:
    def rot(x: Any) -> Any:
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], -1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def _tables(s: int, d: int) -> tuple[Any, Any]:
    ang = torch.linspace(0, 3, s * (d // 2)).reshape(s, d // 2)
    return torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)


COS, SIN = _tables(5, 16)

# name: (fearless call, torch reference, input shapes)
CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "softmax": (ops.softmax, lambda x: F.softmax(x, -1), [(3, 5, 40)]),
    "rms_norm": (
        lambda x, w: ops.rms_norm(x, 40, w, 1e-6),
        lambda x, w: F.rms_norm(x, (40,), w, 1e-6),
        [(6, 40), (40,)],
    ),
    "layer_norm": (
        lambda x, w, b: ops.layer_norm(x, (40,), w, b),
        lambda x, w, b: F.layer_norm(x, (40,), w, b),
        [(2, 3, 40), (40,), (40,)],
    ),
    "matmul": (ops.matmul, torch.matmul, [(9, 20), (20, 7)]),
    "bmm": (ops.bmm, torch.bmm, [(2, 9, 20), (2, 20, 7)]),
    "relu": (ops.relu, F.relu, [(7, 130)]),
    "gelu": (ops.gelu, F.gelu, [(7, 130)]),
    "gelu_tanh": (
        lambda x: ops.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x, approximate="tanh"),
        [(7, 130)],
    ),
    "silu_and_mul": (
        ops.silu_and_mul,
        lambda x: F.silu(x[..., :32]) * x[..., 32:],
        [(5, 64)],
    ),
    "geglu": (ops.geglu, lambda x: x[..., :32] * F.gelu(x[..., 32:]), [(5, 64)]),
    "swiglu": (ops.swiglu, lambda a, b: F.silu(a) * b, [(5, 48), (5, 48)]),
    "transpose": (ops.transpose, lambda x: x.transpose(-2, -1), [(33, 70)]),
    "rope": (
        lambda q, k: ops.rope(q, k, COS, SIN),
        lambda q, k: _rope_ref(q, k, COS, SIN),
        [(2, 3, 5, 16), (2, 1, 5, 16)],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_autograd_matches_torch(name: str) -> None:
    ours, reference, shapes = CASES[name]
    xs = _leaves(*shapes)
    refs = [x.detach().clone().requires_grad_() for x in xs]
    got, want = ours(*xs), reference(*refs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert all(g.grad_fn is not None for g in got)  # recorded, not cut from the graph
    g = torch.Generator().manual_seed(1)
    dys = [torch.randn(w.shape, generator=g) for w in want]
    torch.autograd.backward(got, dys)
    torch.autograd.backward(want, dys)
    for out, ref in zip(got, want, strict=True):
        torch.testing.assert_close(out.detach(), ref.detach(), rtol=1e-4, atol=1e-5)
    for x, r in zip(xs, refs, strict=True):
        torch.testing.assert_close(x.grad, r.grad, rtol=1e-4, atol=1e-4)


def test_autograd_in_bf16() -> None:
    (x,) = _leaves((4, 256), dtype=torch.bfloat16)
    r = x.detach().clone().requires_grad_()
    ops.softmax(x).sum().backward()  # the sum's gradient arrives expanded (stride 0)
    (F.softmax(r.float(), -1).to(torch.bfloat16)).sum().backward()
    torch.testing.assert_close(x.grad, r.grad, rtol=2e-2, atol=2e-3)


def test_dropout_backward_replays_the_mask() -> None:
    (x,) = _leaves((8, 300))
    y = ops.dropout(x, 0.3)
    dy = torch.randn(y.shape)
    y.backward(dy)
    kept = y.detach() != 0
    torch.testing.assert_close(x.grad, torch.where(kept, dy / 0.7, 0.0))
    assert 0.55 < kept.float().mean().item() < 0.85
    y2 = ops.dropout(x.detach(), 0.3, seed=5)
    torch.testing.assert_close(y2, ops.dropout(x.detach(), 0.3, seed=5))


def test_group_gemm_backward() -> None:
    a0, b0, a1, b1 = _leaves((4, 6), (6, 3), (5, 2), (2, 7))
    outs = ops.group_gemm([a0, a1], [b0, b1])
    (outs[0].sum() + outs[1].sum()).backward()
    torch.testing.assert_close(a0.grad, torch.ones(4, 3) @ b0.detach().T)
    torch.testing.assert_close(b1.grad, a1.detach().T @ torch.ones(5, 7))


def test_operators_are_torch_ops() -> None:
    x = torch.randn(4, 40)
    torch.testing.assert_close(torch.ops.fearless.softmax(x, -1), F.softmax(x, -1))
    y = torch.ops.fearless.dropout(x, 0.5, torch.tensor(7))  # the seed: a tensor input
    torch.testing.assert_close(y, ops.dropout(x, 0.5, seed=7))
    schema = str(torch.ops.fearless.layer_norm.default._schema)
    assert "Tensor? weight=None" in schema and "float eps=1" in schema


def test_only_what_torch_must_see_goes_through_the_dispatcher() -> None:
    plain = torch.randn(3, 4)
    assert _route.torch_ops(plain) is None  # eager, no grad: straight to the kernels
    # autograd records it: the operators' eager forms (ops/torch_eager.py), the custom ops
    # where torch must see the call
    assert _route.torch_ops(plain.requires_grad_()) is torch_eager.EAGER
    with torch.no_grad():
        assert _route.torch_ops(plain) is None
    assert _route.torch_ops([torch.randn(2)], [torch.nn.Parameter(torch.randn(2))]) is not None
    assert _route.torch_ops(fl.zeros(3)) is None


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_functorch_vmap_runs_and_gradient_transforms_are_refused() -> None:
    """Under `torch.func.vmap` a tensor is a BatchedTensor, of the plain type but without
    memory: the call goes to the dispatcher (torch's per-example fallback), past the warm
    path's key, and matches torch; `torch.func.grad` over an operator is a fearless error at
    the caller's line (torch runs a custom operator's backward under autograd only)."""
    from torch.func import grad, vmap

    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(vmap(ops.softmax)(x), torch.softmax(x, -1), atol=1e-6)
    w = torch.randn(2, 8, 5)
    assert torch.allclose(vmap(ops.matmul)(x, w), x @ w, atol=1e-5)
    with pytest.raises(fl.KernelTypeError, match=r"torch\.func gradient transform") as info:
        grad(lambda t: ops.softmax(t).pow(2).sum())(x[0])
    assert f"{__file__}:" in str(info.value)  # the caller's line


@pytest.mark.parametrize("op", ["softmax", "gelu", "layer_norm"])
def test_a_gradient_of_a_gradient_is_refused_where_it_is_asked(op: str) -> None:
    """`create_graph=True` makes autograd record the backward operator itself, which has no
    formula: E0701 at the caller's line when the first gradient is taken, instead of torch's
    "no autograd formula was registered" at the second; first-order gradients run."""
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2)).requires_grad_()
    run = {
        "softmax": lambda t: ops.softmax(t),
        "gelu": lambda t: ops.gelu(t),
        "layer_norm": lambda t: ops.layer_norm(t, (4,)),
    }[op]
    with pytest.raises(fl.KernelTypeError, match="first-order gradients only") as info:
        torch.autograd.grad(run(x).pow(2).sum(), x, create_graph=True)
    assert f"{__file__}:" in str(info.value)
    (g,) = torch.autograd.grad(run(x).pow(2).sum(), x)
    assert g.shape == x.shape and not g.requires_grad


def test_eager_autograd_skips_the_dispatcher_and_matches_the_custom_op() -> None:
    # a training call outside torch.compile: the operator's autograd.Function (its grad_fn
    # names it), same result and gradients as its custom op through torch's dispatcher
    x, w = _leaves((6, 32), (32,))
    y = ops.rms_norm(x, (32,), w)
    assert y.grad_fn is not None and y.grad_fn.name() == "fearless_rms_normBackward"
    y.square().sum().backward()
    eager = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    z = torch.ops.fearless.rms_norm(x, [32], w)
    assert "GeneratedBackwardFor_fearless_rms_norm" in z.grad_fn.name()
    z.square().sum().backward()
    torch.testing.assert_close(y, z)
    torch.testing.assert_close(eager, [x.grad, w.grad])


def test_every_operator_has_an_eager_form_but_those_torch_must_run() -> None:
    # an operator whose schema holds a type the eager forms do not check (a list of tensors)
    # or that writes an argument in place stays with the custom op; every other has its form,
    # with its Function wherever it has an autograd formula
    from fearless.ops import torch_ops

    without = sorted(set(torch_ops._SIGNATURES) - set(torch_eager._FORMS))
    assert without == ["group_gemm", "mhc_sinkhorn", "moe_actgrad_bwd", "splitk_reduce"]
    with_autograd = {name for name, form in torch_eager._FORMS.items() if form.function}
    assert {"scaled_dot_product_attention_lse", "rms_norm", "rope", "fused_moe"} <= with_autograd


def test_eager_forms_leave_to_the_dispatcher_what_it_converts() -> None:
    # an argument the schema's type does not take as it is: the dispatcher's refusal, as ever
    with pytest.raises(fl.FearlessError, match="argument `dim` must be int"):
        ops.softmax(torch.randn(2, 3, requires_grad=True), 1.5)
    # an int list given as a tuple reaches the body as the dispatcher gives it, a list
    x, w = _leaves((2, 8), (8,))
    torch.testing.assert_close(
        torch_eager.EAGER.rms_norm(x, (8,), w), torch.ops.fearless.rms_norm(x, [8], w)
    )


def test_torch_compile_fullgraph_forward_and_backward() -> None:
    def block(x: Any, w: Any, a: Any) -> Any:
        h = ops.rms_norm(x, (32,), w)
        return ops.softmax(ops.matmul(ops.silu_and_mul(ops.matmul(h, a)), a[:, :32].T.T))

    x, w, a = _leaves((6, 32), (32,), (32, 64))
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(x, w, a)
    got.square().sum().backward()
    grads = [t.grad.clone() for t in (x, w, a)]
    for t in (x, w, a):
        t.grad = None
    want = block(x, w, a)
    want.square().sum().backward()
    torch.testing.assert_close(got, want)
    for g, t in zip(grads, (x, w, a), strict=True):
        torch.testing.assert_close(g, t.grad)


def test_torch_export() -> None:
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.Parameter(torch.ones(16))

        def forward(self, x: Any) -> Any:
            return ops.gelu(ops.layer_norm(x, 16, self.norm), approximate="tanh")

    x = torch.randn(3, 16)
    ep = torch.export.export(Block(), (x,))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"fearless.layer_norm.default", "fearless.gelu.default"} <= targets
    torch.testing.assert_close(ep.module()(x), Block()(x))


def test_rope_refuses_tables_that_require_grad() -> None:
    q, k = _leaves((1, 2, 5, 16), (1, 2, 5, 16))
    cos = COS.clone().requires_grad_()
    with pytest.raises(
        fl.KernelTypeError, match=r"`cos` of `fearless\.ops\.rope` requires grad"
    ) as e:
        ops.rope(q, k, cos, SIN)
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_errors_through_the_dispatcher_point_at_the_caller() -> None:
    a, b = _leaves((4, 5), (6, 7))
    with pytest.raises(fl.KernelTypeError, match="multiplies") as e:
        ops.matmul(a, b)
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_torch_ops_exist_whichever_is_imported_first() -> None:
    code = (
        "from fearless import ops\n"
        "import torch\n"
        "y = torch.ops.fearless.softmax(torch.zeros(2, 4), -1)\n"
        "assert torch.equal(y, torch.full((2, 4), 0.25)), y\n"
    )
    env = {**os.environ, "FEARLESS_TARGET": "sim"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cuda_operands_are_wrapped_without_the_generic_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from fearless.ops import _io

    class OnGpu0(torch.Tensor):
        """A CPU tensor that says it lives on cuda:0 (only its pointer is read)."""

        @property
        def is_cuda(self) -> bool:
            return True

        def get_device(self) -> int:
            return 0

    monkeypatch.setattr(_io, "current_target", lambda: SimpleNamespace(on_device=True))
    x = torch.zeros(6, 4, dtype=torch.bfloat16).as_subclass(OnGpu0)
    t = _io.from_torch(x)
    assert (t.shape, t.dtype, t._ptr, t._owner) == ((6, 4), fl.bf16, x.data_ptr(), x)
    assert t._on_device and not t._dev1d
    strided = torch.zeros(4, 6).as_subclass(OnGpu0).t()
    s = _io.from_torch(strided)
    assert s.shape == (6, 4) and s._ptr != strided.data_ptr()  # a contiguous copy


def _opcheck_cases() -> list[tuple[str, Callable[[], tuple[Any, ...]]]]:
    def x() -> Any:
        return torch.randn(6, 64, requires_grad=True)

    def v(n: int) -> Any:
        return torch.randn(n, requires_grad=True)

    def mats() -> tuple[Any, Any]:
        return torch.randn(9, 20, requires_grad=True), torch.randn(20, 7, requires_grad=True)

    return [
        ("softmax", lambda: (x(), -1)),
        ("rms_norm", lambda: (x(), [64], v(64), 1e-6)),
        ("layer_norm", lambda: (x(), [64], v(64), v(64), 1e-5)),
        ("matmul", mats),
        (
            "bmm",
            lambda: tuple(t[None].expand(2, *t.shape).detach().requires_grad_() for t in mats()),
        ),
        ("group_gemm", lambda: tuple([t] for t in mats())),
        ("relu", lambda: (x(),)),
        ("gelu", lambda: (x(), "tanh")),
        ("silu_and_mul", lambda: (x(),)),
        ("geglu", lambda: (x(), -1, "none")),
        ("swiglu", lambda: (x(), x())),
        ("dropout", lambda: (x(), 0.3, torch.tensor(5))),
        ("transpose", lambda: (mats()[0],)),
        (
            "scaled_dot_product_attention",
            lambda: (
                torch.randn(1, 4, 24, 16, requires_grad=True),
                torch.randn(1, 2, 20, 16, requires_grad=True),
                torch.randn(1, 2, 20, 16, requires_grad=True),
                None,
                True,
                None,
                True,
            ),
        ),
        (  # forward only: inputs that need no grad
            "attention_sink",
            lambda: (
                torch.randn(1, 12, 2, 2, 16),
                torch.randn(1, 20, 2, 16),
                torch.randn(1, 20, 2, 16),
                torch.randn(4),
                0.2,
                5,
                torch.tensor([3], dtype=torch.int32),
            ),
        ),
        (
            "attention_sink_decode",
            lambda: (
                torch.randn(2, 1, 2, 4, 16),
                torch.randn(2, 20, 2, 16),
                torch.randn(2, 20, 2, 16),
                None,
                0.2,
                None,
                torch.tensor([19], dtype=torch.int32),
                None,
            ),
        ),
        (  # contiguous cache, ragged lengths, causal with a window and a soft cap
            "flash_attn_with_kvcache",
            lambda: (
                torch.randn(2, 3, 4, 16),
                torch.randn(2, 20, 2, 16),
                torch.randn(2, 20, 2, 16),
                torch.tensor([20, 7], dtype=torch.int32),
                None,
                None,
                True,
                [5, 0],
                3.0,
            ),
        ),
        (  # paged: pages of 4 in shuffled blocks
            "flash_attn_with_kvcache",
            lambda: (
                torch.randn(2, 1, 4, 16),
                torch.randn(12, 4, 2, 16),
                torch.randn(12, 4, 2, 16),
                torch.tensor([13, 20], dtype=torch.int32),
                torch.randperm(12)[:10].reshape(2, 5).to(torch.int32),
                0.3,
                False,
                None,
                0.0,
            ),
        ),
        (
            "fmha_varlen",
            lambda: (
                torch.randn(2, 4, 12, 16),
                torch.randn(2, 2, 20, 16),
                torch.randn(2, 2, 20, 16),
                0.2,
                True,
                torch.tensor([12, 5], dtype=torch.int32),
                torch.tensor([7, 20], dtype=torch.int32),
            ),
        ),
        (
            "fmha_decode",
            lambda: (
                torch.randn(2, 8, 1, 16),
                torch.randn(2, 2, 40, 16),
                torch.randn(2, 2, 40, 16),
                0.25,
                16,
            ),
        ),
        (  # Gemma decode: GQA, a window mid-tile, a soft cap, 3 splits of 16
            "gemma_attention_decode",
            lambda: (
                torch.randn(2, 8, 1, 16),
                torch.randn(2, 2, 40, 16),
                torch.randn(2, 2, 40, 16),
                0.25,
                25,
                4.0,
                16,
            ),
        ),
        (  # sparse MLA: GQA 2, topk 6 of 17 keys (distinct per row), not causal
            "sparse_mla",
            lambda: (
                torch.randn(1, 4, 5, 16),
                torch.randn(1, 2, 17, 16),
                torch.randn(1, 2, 17, 16),
                torch.stack([torch.randperm(17)[:6] for _ in range(10)]).reshape(1, 5, 2, 6).int(),
                torch.randn(1, 4, 5, 8),
                torch.randn(1, 1, 17, 8),
                False,
                0.3,
            ),
        ),
        (  # MLA prefill: GQA, one RoPE head, L > S
            "mla",
            lambda: (
                torch.randn(1, 4, 12, 16),
                torch.randn(1, 2, 10, 16),
                torch.randn(1, 2, 10, 16),
                torch.randn(1, 4, 12, 8),
                torch.randn(1, 1, 10, 8),
                True,
                None,
            ),
        ),
        (  # (o, lse)
            "mla_decoding",
            lambda: (
                torch.randn(2, 5, 16),
                torch.randn(2, 5, 8),
                torch.randn(2, 30, 16),
                torch.randn(2, 30, 8),
                0.2,
                True,
            ),
        ),
        (
            "mla_decoding_split_kv",
            lambda: (
                torch.randn(2, 5, 16),
                torch.randn(2, 5, 8),
                torch.randn(2, 30, 16),
                torch.randn(2, 30, 8),
                None,
                16,
            ),
        ),
        (  # with autograd; experts 0..3 of 4, expert 3 idle, a repeat in row 2
            "fused_moe",
            lambda: (
                torch.randn(5, 32, requires_grad=True),
                (torch.randn(4, 64, 32) * 0.1).requires_grad_(),
                (torch.randn(4, 32, 32) * 0.1).requires_grad_(),
                torch.rand(5, 2, requires_grad=True),
                torch.tensor([[0, 1], [2, 0], [1, 1], [0, 2], [2, 1]]),
            ),
        ),
        (
            "fused_moe_backward",
            lambda: (
                torch.randn(5, 32),
                torch.randn(5, 32),
                torch.randn(4, 64, 32) * 0.1,
                torch.randn(4, 32, 32) * 0.1,
                torch.rand(5, 2),
                torch.tensor([[0, 1], [2, 0], [1, 1], [0, 2], [2, 1]]),
            ),
        ),
        ("moe_align_block_size", lambda: (torch.tensor([[0, 3], [2, 0], [3, 3]]), 4, 5)),
        (  # forward only; two value heads per key head, an initial and a final state
            "recurrent_gated_delta_rule",
            lambda: (
                torch.randn(1, 9, 1, 8) * 0.3,
                torch.randn(1, 9, 1, 8) * 0.3,
                torch.randn(1, 9, 2, 12),
                -torch.rand(1, 9, 2),
                torch.rand(1, 9, 2),
                torch.randn(1, 2, 8, 12) * 0.1,
                True,
                True,
            ),
        ),
        (  # two chunks of 16, the last partial; no final state (an empty tensor)
            "chunk_gated_delta_rule",
            lambda: (
                torch.randn(1, 20, 2, 8) * 0.3,
                torch.randn(1, 20, 2, 8) * 0.3,
                torch.randn(1, 20, 2, 12),
                -torch.rand(1, 20, 2),
                torch.rand(1, 20, 2),
                16,
                None,
                False,
                False,
            ),
        ),
        (  # two heads over one group, two chunks of 16 (the last partial), with autograd
            "mamba2_chunk_forward",
            lambda: (
                torch.randn(1, 20, 2, 8, requires_grad=True),
                -torch.rand(2) - 0.5,
                torch.randn(1, 20, 1, 12, requires_grad=True),
                torch.randn(1, 20, 1, 12),
                torch.randn(2),
                torch.rand(1, 20, 2, requires_grad=True),
                torch.randn(1, 2, 8, 12) * 0.1,
                16,
            ),
        ),
        (
            "mamba2_chunk_backward",
            lambda: (
                torch.randn(1, 20, 2, 8),
                -torch.rand(2) - 0.5,
                torch.randn(1, 20, 1, 12),
                torch.randn(1, 20, 1, 12),
                torch.randn(2),
                torch.rand(1, 20, 2),
                None,
                torch.randn(1, 20, 2, 8),
                torch.randn(1, 2, 8, 12),
                16,
            ),
        ),
        (
            "rope",
            lambda: (
                torch.randn(2, 3, 5, 16, requires_grad=True),
                torch.randn(2, 1, 5, 16, requires_grad=True),
                COS,
                SIN,
            ),
        ),
    ]


@pytest.mark.parametrize(
    ("name", "make"), _opcheck_cases(), ids=lambda c: c if isinstance(c, str) else ""
)
def test_torch_library_opcheck(name: str, make: Callable[[], tuple[Any, ...]]) -> None:
    """torch's own checker of custom ops: schema, fake kernel against the real one, autograd
    registration, and AOT dispatch (what torch.compile relies on)."""
    torch.library.opcheck(getattr(torch.ops.fearless, name).default, make())
