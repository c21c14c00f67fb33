"""The TileGym-tests harness (bench/tilegym_tests) on the CPU: its adapters take the call forms
TileGym's tests/ops use and match those tests' torch references on the simulator; every adapter
names an existing fearless.ops function; the pytest plugin registers them in TileGym's real
dispatcher (skipped when tilegym does not import) and skips the tests of ops fearless lacks;
the same for TileGym's suites (adapters_suites.py: liger.*, unsloth.*, flashinfer.*)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import fearless as fl
from fearless import ops

torch = pytest.importorskip("torch")
import adapters as A  # noqa: E402  (bench/tilegym_tests: pyproject's pytest pythonpath)
import adapters_suites as S  # noqa: E402

F = torch.nn.functional


@pytest.fixture(autouse=True)
def _sim() -> Any:
    fl.set_target("sim")
    yield
    fl.set_target(None)


def _call(name: str, *args: Any, **kwargs: Any) -> Any:
    return A.ADAPTERS[name][1](*args, **kwargs)


def test_every_adapter_names_a_fearless_op() -> None:
    for name, (uses, fn) in A.ADAPTERS.items():
        assert uses in ops.__all__, name
        assert callable(fn) and A.fearless_op(name) is getattr(ops, uses)
    for name in A.PATCHES.values():
        assert name in A.ADAPTERS
    assert not set(A.UNCOVERED) & set(A.ADAPTERS)


def test_rms_norm_call_forms() -> None:  # test_rms_norm.py: keywords, then positional with mode=
    x = torch.rand(4, 64).mul_(0.5).add_(-2.3)
    w = torch.randn(64)

    def ref(x: Any, w: Any, eps: float, offset: float = 0.0) -> Any:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return ((offset + w) * (x.float() * torch.rsqrt(var + eps))).to(x.dtype)

    y = _call(
        "rms_norm", input=x, normalized_shape=(64,), weight=w, eps=1e-5, mode="static_persistent"
    )
    torch.testing.assert_close(y, ref(x, w, 1e-5), rtol=1e-4, atol=1e-4)
    y = _call("rms_norm", x, (64,), w, 1e-6, mode=None, offset=1.0)
    torch.testing.assert_close(y, ref(x, w, 1e-6, 1.0), rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError):
        _call("rms_norm", x, (64,), w, 1e-6, bias=w)


def test_softmax_and_activations() -> None:
    x = torch.randn(8, 96)
    kw = {"use_tma": True, "use_chunked": False, "use_multi_wave": True}  # test_softmax.py
    torch.testing.assert_close(
        _call("softmax", x=x, **kw), torch.softmax(x, -1), rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(_call("relu", x), F.relu(x))
    torch.testing.assert_close(
        _call("gelu", x, "tanh"), F.gelu(x, approximate="tanh"), rtol=1e-4, atol=1e-5
    )
    a, b = x.chunk(2, -1)
    torch.testing.assert_close(_call("geglu", x, -1, "none"), a * F.gelu(b), rtol=1e-4, atol=1e-5)


def test_silu_and_mul_and_swiglu() -> None:
    x = torch.randn(6, 128)
    a, b = x.chunk(2, -1)
    ref = F.silu(a) * b
    torch.testing.assert_close(_call("silu_and_mul", x), ref, rtol=1e-5, atol=1e-5)
    out = torch.empty(6, 64)
    assert _call("silu_and_mul", x, out=out) is out
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        _call("get_swiglu")(a, b), ref, rtol=1e-5, atol=1e-5
    )  # get_swiglu()(a, b)


def test_dropout_identity_and_ratio() -> (
    None
):  # test_dropout.py: dropout(x, seed, p, training, inplace)
    x = torch.rand(4096) + 1e-5
    assert _call("dropout", x, 7, 0.4, False, False) is x
    y = _call("dropout", x.clone(), 7, 0.4, True, False)
    assert abs((1 - torch.count_nonzero(y) / y.numel()).item() - 0.4) < 0.04
    z = x.clone()
    assert _call("dropout", z, 7, 0.4, True, True) is z


def test_matmul_bmm_group_gemm_transposes() -> None:  # test_matmul.py stores op(a) transposed
    a, b = torch.randn(32, 16), torch.randn(16, 24)
    kw = {"static_persistent": True, "use_tma": False}
    torch.testing.assert_close(
        _call("matmul", a, b, trans_a=False, trans_b=False, **kw), a @ b, rtol=1e-4, atol=1e-4
    )
    at, bt = a.t().contiguous(), b.t().contiguous()
    torch.testing.assert_close(
        _call("matmul", at, bt, trans_a=True, trans_b=True, **kw), a @ b, rtol=1e-4, atol=1e-4
    )
    qa, qb = torch.randn(2, 16, 8), torch.randn(2, 24, 8)
    y = _call("bmm", qa, qb, transpose_a=False, transpose_b=True, static_persistent=False)
    torch.testing.assert_close(y, qa @ qb.transpose(1, 2), rtol=1e-4, atol=1e-4)
    ys = _call("group_gemm", group_A=[a, a[:8]], group_B=[bt, bt], transpose_b=True)
    assert isinstance(ys, list)
    torch.testing.assert_close(ys[1], a[:8] @ b, rtol=1e-4, atol=1e-4)


def _rotate_half(x: Any) -> Any:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def test_rope_full_and_partial() -> None:  # test_rope.py: HF cos/sin (B, S, rope_dim)
    q, k = torch.randn(1, 4, 8, 32), torch.randn(1, 2, 8, 32)
    for rd in (32, 16):
        inv = 1.0 / (10000 ** (torch.arange(0, rd, 2).float() / rd))
        f = torch.outer(torch.arange(8).float(), inv)
        emb = torch.cat((f, f), -1)[None]
        cos, sin = emb.cos(), emb.sin()
        qo, ko = _call("apply_rope_base", q, k, cos, sin, partial_rotary_factor=rd / 32)
        for t, o in ((q, qo), (k, ko)):
            r = t[..., :rd]
            want = torch.cat([r * cos[:, None] + _rotate_half(r) * sin[:, None], t[..., rd:]], -1)
            torch.testing.assert_close(o, want, rtol=1e-4, atol=1e-4)


def test_the_module_factories() -> (
    None
):  # get_rms_norm_module, get_swiglu_module, get_apply_rope_func
    from types import SimpleNamespace

    x = torch.randn(3, 64)
    norm = _call("get_rms_norm_module")(64, eps=1e-6)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), want, rtol=1e-4, atol=1e-4)
    gemma = _call("get_rms_norm_module", model="gemma3")(64)  # weight zeros, offset 1
    torch.testing.assert_close(gemma(x), want, rtol=1e-4, atol=1e-4)
    config = SimpleNamespace(hidden_size=64, intermediate_size=96, hidden_act="silu")
    mlp = _call("get_swiglu_module")(config)
    with torch.no_grad():
        ref = mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
        torch.testing.assert_close(mlp(x), ref, rtol=1e-4, atol=1e-4)
    q, k = torch.randn(1, 4, 8, 32), torch.randn(1, 2, 8, 32)
    inv = 1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32))
    f = torch.outer(torch.arange(8).float(), inv)
    emb = torch.cat((f, f), -1)[None]
    rope = _call("get_apply_rope_func", model="llama")
    for got, want_ in zip(
        rope(q, k, emb.cos(), emb.sin()),
        _call("apply_rope_base", q, k, emb.cos(), emb.sin()),
        strict=True,
    ):
        torch.testing.assert_close(got, want_)
    with pytest.raises(ValueError, match="Unsupported model"):
        _call("get_apply_rope_func", model="nope")


def test_fmha_interface_kwargs() -> None:  # test_attention.py via fmha_interface
    q, k, v = (torch.randn(1, 2, 16, 16) for _ in range(3))
    s = 1 / math.sqrt(16)
    y = _call("fmha", q, k, v, scaling=s, is_causal=True, has_backward=False, kernel_configs=None)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=s)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)


def test_attention_backward_module_functions() -> None:
    """experimental/test_attention_backward.py's three cuTile functions: fmha_forward_with_lse
    (out and TileGym's base-2 lse), tile_fmha_with_backward and tile_fmha_functional (fmha with
    autograd), GQA included."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 16, 16, generator=gen)
    k, v = (torch.randn(1, 2, 16, 16, generator=gen) for _ in range(2))
    s = 1 / math.sqrt(16)
    out, lse = _call("fmha_forward_with_lse", q, k, v, s, True)
    kr, vr = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, kr, vr, is_causal=True, scale=s),
        rtol=1e-4,
        atol=1e-4,
    )
    scores = (q @ kr.transpose(-1, -2) * s).masked_fill(
        torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf")
    )
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1) / math.log(2), rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="input_pos"):
        _call("fmha_forward_with_lse", q, k, v, s, True, input_pos=3)
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
    y = _call("fmha_backward", qg, kg, vg, scaling=s, is_causal=True)
    do = torch.randn(y.shape, generator=gen)
    y.backward(do)
    qr, krr, vrr = (t.clone().requires_grad_(True) for t in (q, kr, vr))
    F.scaled_dot_product_attention(qr, krr, vrr, is_causal=True, scale=s).backward(do)
    torch.testing.assert_close(qg.grad, qr.grad, rtol=1e-4, atol=1e-4)
    want_dk = krr.grad.reshape(1, 2, 2, 16, 16).sum(2)
    torch.testing.assert_close(kg.grad, want_dk, rtol=1e-4, atol=1e-4)


def test_rms_norm_module_standalone_backward() -> None:
    """experimental/test_rmsnorm_backward.py: the module's compute_rstd_torch and its
    standalone rms_norm_backward(x, dy, weight, rstd), against torch autograd."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(37, 24, generator=gen) * 0.5 - 2.3
    w, dy = torch.randn(24, generator=gen), torch.randn(37, 24, generator=gen)
    module = _call("get_rms_norm_module")
    rstd = module.compute_rstd_torch(x, 1e-5)
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1) + 1e-5))
    dx, dw = module.rms_norm_backward(x, dy, w, rstd)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    F.rms_norm(xr, (24,), wr, 1e-5).backward(dy)
    torch.testing.assert_close(dx, xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dw, wr.grad, rtol=1e-4, atol=1e-4)


def test_rms_norm_module_reference_is_tilegyms_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """test_rmsnorm_backward.py's reference, `get_rms_norm_module().rms_norm_backward_torch`,
    hands the call to TileGym's tilegym.ops.cutile.rms_norm (a stand-in module here)."""
    import sys
    import types

    seen: list[tuple[Any, ...]] = []
    fake = types.ModuleType("tilegym.ops.cutile.rms_norm")
    fake.rms_norm_backward_torch = lambda *a: seen.append(a) or "tilegym's"  # type: ignore[attr-defined]
    for name in ("tilegym", "tilegym.ops", "tilegym.ops.cutile"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "tilegym.ops.cutile.rms_norm", fake)
    monkeypatch.setattr(sys.modules["tilegym.ops.cutile"], "rms_norm", fake, raising=False)
    module = _call("get_rms_norm_module")
    assert module.rms_norm_backward_torch(1, 2, 3, 4) == "tilegym's"
    assert seen == [(1, 2, 3, 4)]


def test_splitk_reduce_in_place() -> None:  # test_splitk_reduce.py's reference: a base-2 lse merge
    B, H, S, D = 1, 2, 4, 16
    part, lse = torch.randn(B, H, S, D), torch.randn(B, H, S)
    out = torch.empty(B, H, D)
    _call("splitk_reduce", part, lse, out, 256)
    w = torch.exp2(lse - lse.max(-1, keepdim=True).values)
    torch.testing.assert_close(
        out, (part * w[..., None]).sum(2) / w.sum(-1, keepdim=True), rtol=1e-4, atol=1e-5
    )


def test_moe_align_block_size() -> None:  # the align's contract: expert-sorted slots, padded blocks
    ids = torch.tensor([[0, 2], [1, 2], [2, 0]], dtype=torch.int32)
    sorted_ids, expert_ids, n_post = _call("moe_align_block_size", ids, 4, 3)[:3]
    n = int(n_post.reshape(-1)[0])
    assert n % 4 == 0 and n >= ids.numel()
    flat = ids.reshape(-1)
    for blk in range(n // 4):
        for slot in sorted_ids[blk * 4 : (blk + 1) * 4].tolist():
            if slot < ids.numel():
                assert int(flat[slot]) == int(expert_ids[blk])


def test_plugin_skip_rules() -> None:
    import fearless_as_cutile as P

    assert P.is_cutile("test_op[cutile-4]") and not P.is_cutile("test_op[cutile_rs-4]")
    assert P.ops_file("/x/tests/ops/experimental/test_mhc.py") == "experimental/test_mhc.py"
    assert P.skip_reason("test_rms_norm.py", "test_op") is None
    assert P.skip_reason("experimental/test_nvfp4_quantize.py", "x") is None
    assert P.skip_reason("test_attention_variant.py", "test_op") is None
    assert P.skip_reason("experimental/test_rmsnorm_backward.py", "Test_RMSNormBackward") is None
    assert P.skip_reason("experimental/test_attention_backward.py", "Test_FMHA_Backward") is None
    assert P.skip_reason("test_new_op.py", "test_op").startswith("fearless has no operator mapped")
    for rel, names in P.COVERAGE.items():
        assert all(n in A.ADAPTERS for n in names), rel


def test_the_cutile_compiler_skip_is_lifted_only_where_listed() -> None:
    """test_nvfp4_quantize.py skips its module unless cuTile's tileiras takes V_13_3 bytecode;
    fearless's nvfp4_quantize needs none, so the plugin drops that skipif (and no other mark)
    from the chain of nodes above each of the file's cutile tests."""
    import fearless_as_cutile as P

    class Node:
        def __init__(self, marks: list[Any], chain: list[Any]) -> None:
            self.own_markers, self.chain = marks, chain

        def listchain(self) -> list[Any]:
            return [*self.chain, self]

    reason = P.LIFTED_SKIPS["experimental/test_nvfp4_quantize.py"]
    cuda_skip = pytest.mark.skipif(True, reason="CUDA not available").mark
    module = Node([pytest.mark.skipif(True, reason=reason + " (fp4_e2m1fn)").mark, cuda_skip], [])
    item = Node([pytest.mark.parametrize("x", [1]).mark], [module])
    assert P.lift_skips(item, reason) == 1  # type: ignore[arg-type]
    assert module.own_markers == [cuda_skip] and len(item.own_markers) == 1
    assert P.lift_skips(item, reason) == 0  # type: ignore[arg-type]


def test_rotary_embedding_takes_a_device() -> None:
    """test_rope.py's LlamaRotaryEmbedding(config=..., device=...) under transformers 5."""
    transformers = pytest.importorskip("transformers")
    import fearless_as_cutile as P
    from transformers.models.llama import modeling_llama

    saved = modeling_llama.LlamaRotaryEmbedding
    try:
        P.shim_rotary_device()
        config = transformers.LlamaConfig(num_key_value_heads=2, head_dim=16)
        rotary = modeling_llama.LlamaRotaryEmbedding(config=config, device=torch.device("cpu"))
        x = torch.randn(1, 5, 16)
        cos, sin = rotary(x, torch.arange(5)[None])
        want_cos, want_sin = saved(config)(x, torch.arange(5)[None])
        torch.testing.assert_close((cos, sin), (want_cos, want_sin))
        assert not P.shim_rotary_device()  # the class now takes device: nothing more to do
    finally:
        modeling_llama.LlamaRotaryEmbedding = saved


@pytest.mark.parametrize(("hq", "hk", "d", "factor"), [(4, 2, 64, 1.0), (4, 2, 256, 0.25)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rope_as_tilegyms_test_rope(hq: int, hk: int, d: int, factor: float, dtype: Any) -> None:
    """test_rope.py's test_op_backward at small size: q, k sequence-major views that require
    grad, cos and sin from Hugging Face's rotary embedding (built with `device=`), Hugging
    Face's apply_rotary_pos_emb (or slice, rotate, cat) as the reference, forward and grads."""
    pytest.importorskip("transformers")
    import fearless_as_cutile as P
    from transformers.models.llama import modeling_llama as ml
    from transformers.models.llama.configuration_llama import LlamaConfig

    saved = ml.LlamaRotaryEmbedding
    try:
        P.shim_rotary_device()
        b, s, rd, tol = 2, 16, int(d * factor), 1e-5 if dtype == torch.float32 else 2e-2
        gen = torch.Generator().manual_seed(d)
        qb = torch.randn(b, s, hq, d, generator=gen).transpose(1, 2).to(dtype)
        kb = torch.randn(b, s, hk, d, generator=gen).transpose(1, 2).to(dtype)
        q1, k1, q2, k2 = (t.clone().requires_grad_(True) for t in (qb, kb, qb, kb))
        config = LlamaConfig(num_kv_heads=hk, head_dim=rd)
        rotary = ml.LlamaRotaryEmbedding(config=config, device=torch.device("cpu"))
        cos, sin = rotary(k1, torch.arange(s).unsqueeze(0).expand(b, -1))
        rq, rk = ml.apply_rotary_pos_emb(q1[..., :rd], k1[..., :rd], cos, sin)
        rq, rk = torch.cat([rq, q1[..., rd:]], -1), torch.cat([rk, k1[..., rd:]], -1)
        tq, tk = _call("apply_rope_base", q2, k2, cos, sin, partial_rotary_factor=factor)
        torch.testing.assert_close((tq, tk), (rq, rk), atol=tol, rtol=tol)
        gq, gk = torch.randn(rq.shape, generator=gen), torch.randn(rk.shape, generator=gen)
        ((rq * gq.to(dtype)).sum() + (rk * gk.to(dtype)).sum()).backward()
        ((tq * gq.to(dtype)).sum() + (tk * gk.to(dtype)).sum()).backward()
        torch.testing.assert_close((q2.grad, k2.grad), (q1.grad, k1.grad), atol=tol, rtol=tol)
    finally:
        ml.LlamaRotaryEmbedding = saved


def test_plugin_registers_in_tilegyms_dispatcher() -> None:
    try:
        import tilegym
        from tilegym.backend import dispatcher
    except Exception as e:
        pytest.skip(f"tilegym does not import here: {type(e).__name__}: {e}")
    import importlib

    import fearless_as_cutile as P

    saved = {n: dict(d) for n, d in dispatcher._REGISTRY.items()}
    mods = []
    for target in A.PATCHES:
        mod_name, attr = target.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except Exception:
            continue
        mods.append((mod, attr, getattr(mod, attr, None)))
    try:
        done = P.install()
        for name in done["registered"]:
            impl = dispatcher._REGISTRY[name]["cutile"]
            if name in S.SUITE_ADAPTERS:
                assert impl.__wrapped__ is S.SUITE_ADAPTERS[name][1]
            else:
                assert impl is A.ADAPTERS[name][1]
        assert {"rms_norm", "softmax", "fmha", "apply_rope_base", "get_swiglu"} <= set(
            done["registered"]
        )
        x = torch.randn(4, 32)
        y = tilegym.ops.softmax(x, backend="cutile")  # through TileGym's own dispatch
        torch.testing.assert_close(y, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    finally:
        dispatcher._REGISTRY.clear()
        dispatcher._REGISTRY.update(saved)
        for mod, attr, original in mods:
            setattr(mod, attr, original)


def _suite(name: str, *args: Any, **kwargs: Any) -> Any:
    return S.SUITE_ADAPTERS[name][1](*args, **kwargs)


def test_every_suite_adapter_names_a_fearless_op() -> None:
    """Each suite adapter calls an existing fearless.ops function; each suite op the plugin
    maps is adapted or listed uncovered with a reason, never both."""
    import fearless_as_cutile as P

    for name, (uses, fn) in S.SUITE_ADAPTERS.items():
        assert name.split(".")[0] in P.SUITES and uses in ops.__all__ and callable(fn), name
    assert not set(S.SUITE_ADAPTERS) & set(S.SUITE_UNCOVERED)
    for key, names in P.SUITE_COVERAGE.items():
        assert key.startswith("suites/"), key
        for n in names:
            assert n in S.SUITE_ADAPTERS or S.SUITE_UNCOVERED[n], (key, n)
    assert {"liger.rms_norm", "liger.rope", "unsloth.swiglu_fg"} <= set(S.SUITE_ADAPTERS)


def test_suite_skip_rules() -> None:
    """Suite test files are keyed relative to TileGym's tests/, by class where a file's classes
    test different ops; tests/ops' keys are unchanged."""
    import fearless_as_cutile as P

    assert P.suite_file("/w/tests/suites/liger/test_rms_norm.py") == "suites/liger/test_rms_norm.py"
    assert P.suite_file("/w/tests/ops/test_rms_norm.py") is None
    assert P.ops_file("/w/tests/suites/liger/test_rms_norm.py") is None
    assert P.is_cutile(
        "tests/suites/liger/test_rms_norm.py::Test_Liger_RMSNorm::test_op[cutile-s0]"
    )
    assert P.suite_skip_reason("suites/liger/test_rms_norm.py", "Test_Liger_RMSNorm") is None
    assert P.suite_skip_reason("suites/liger/test_jsd.py", "Test_Liger_JSD") == (
        "liger.jsd: fearless has no JSD"
    )
    swiglu = "suites/unsloth/test_swiglu.py"
    assert P.suite_skip_reason(swiglu, "Test_Unsloth_SwiGLU_Forward") is None
    reason = P.suite_skip_reason(swiglu, "Test_Unsloth_SwiGLU_Backward")
    assert reason is not None and reason.startswith("unsloth.swiglu_bwd: ")
    flashinfer = "suites/flashinfer/test_flashinfer_attention.py"
    assert P.suite_skip_reason(flashinfer, "Test_FlashInfer_DecodePaged") is None
    assert str(P.suite_skip_reason("suites/liger/test_new.py", None)).startswith(
        "fearless has no operator mapped"
    )


def test_uncovered_case_skips_or_goes_to_tilegym(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registered suite entry skips a case fearless does not compute, with the reason, and
    with FEARLESS_TG_KEEP_TILEGYM=1 hands it to TileGym's own cuTile implementation."""
    import fearless_as_cutile as P

    def tilegyms(*a: Any, **k: Any) -> str:
        return "tilegym's"

    impl = P.suite_impl("liger.swiglu", S.SUITE_ADAPTERS["liger.swiglu"][1], tilegyms)
    a = torch.randn(2, 8)
    torch.testing.assert_close(impl(a, a), F.silu(a) * a, rtol=1e-5, atol=1e-5)
    monkeypatch.delenv("FEARLESS_TG_KEEP_TILEGYM", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"liger\.swiglu: .*gate_multiplier"):
        impl(a, a, gate_multiplier=2.0)
    monkeypatch.setenv("FEARLESS_TG_KEEP_TILEGYM", "1")
    assert impl(a, a, gate_multiplier=2.0) == "tilegym's"


def _rms_ref(x: Any, w: Any, eps: float, offset: float = 0.0) -> Any:
    """Liger's test reference: f32, rounded once to x's dtype."""
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (y if w is None else y * (w.float() + offset)).to(x.dtype)


def test_liger_norms() -> None:
    """liger.rms_norm (offset, W None, casting modes), fused_add_rms_norm, layer_norm against
    the references of TileGym's tests/suites/liger; a 16-bit case in a casting mode other than
    "gemma" is Uncovered."""
    gen = torch.Generator().manual_seed(0)
    x, r = torch.randn(4, 2, 48, generator=gen), torch.randn(4, 2, 48, generator=gen)
    w, b = torch.randn(48, generator=gen), torch.randn(48, generator=gen)
    tol = {"rtol": 1e-4, "atol": 1e-4}
    for mode in ("llama", "gemma", "none"):
        y = _suite("liger.rms_norm", x, w, 1e-6, offset=1.0, casting_mode=mode)
        torch.testing.assert_close(y, _rms_ref(x, w, 1e-6, 1.0), **tol)
    torch.testing.assert_close(_suite("liger.rms_norm", x, None, 1e-6), _rms_ref(x, None, 1e-6))
    xb, wb = x.bfloat16(), w.bfloat16()
    y = _suite("liger.rms_norm", xb, wb, 1e-6, 1.0, "gemma")
    torch.testing.assert_close(y, _rms_ref(xb, wb, 1e-6, 1.0), rtol=1e-2, atol=1e-2)
    with pytest.raises(S.Uncovered, match="casting_mode 'llama'"):
        _suite("liger.rms_norm", xb, wb, 1e-6)
    y, s = _suite("liger.fused_add_rms_norm", x, r, w, eps=1e-6, offset=1.0)
    torch.testing.assert_close(s, x + r)
    torch.testing.assert_close(y, _rms_ref(x + r, w, 1e-6, 1.0), **tol)
    with pytest.raises(S.Uncovered):
        _suite("liger.fused_add_rms_norm", xb, r.bfloat16(), wb, casting_mode="none")
    y = _suite("liger.layer_norm", x, w, b, 1e-5)
    torch.testing.assert_close(y, F.layer_norm(x, (48,), w, b, 1e-5), **tol)


def test_liger_activations_and_rope() -> None:
    """liger.swiglu, geglu (gelu_tanh of the first argument), softmax and rope, with grads."""
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(3, 5, 40, generator=gen), torch.randn(3, 5, 40, generator=gen)
    tol = {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(_suite("liger.swiglu", a, b), F.silu(a) * b, **tol)
    torch.testing.assert_close(
        _suite("liger.geglu", a, b), F.gelu(a, approximate="tanh") * b, **tol
    )
    torch.testing.assert_close(_suite("liger.softmax", a), torch.softmax(a, -1), **tol)
    ag, bg = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    _suite("liger.geglu", ag, bg).sum().backward()
    ar, br = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    (F.gelu(ar, approximate="tanh") * br).sum().backward()
    torch.testing.assert_close((ag.grad, bg.grad), (ar.grad, br.grad), **tol)
    q, k = torch.randn(2, 4, 8, 32, generator=gen), torch.randn(2, 2, 8, 32, generator=gen)
    inv = 1.0 / (10000 ** (torch.arange(0, 16).float() * 2.0 / 32))
    f = torch.outer(torch.arange(8).float(), inv)
    emb = torch.cat((f, f), -1)[None]  # (1, S, D): Liger's broadcast_batch
    qo, ko = _suite("liger.rope", q, k, emb.cos(), emb.sin())
    for t, o in ((q, qo), (k, ko)):
        want = t * emb.cos()[:, None] + _rotate_half(t) * emb.sin()[:, None]
        torch.testing.assert_close(o, want, rtol=1e-4, atol=1e-4)


def test_liger_fused_linear_cross_entropy() -> None:
    """Liger's positional order (bias, then ce_weight, then ignore_index); the extras it has
    and fearless lacks are Uncovered."""
    gen = torch.Generator().manual_seed(2)
    x, w = torch.randn(8, 16, generator=gen), torch.randn(24, 16, generator=gen)
    bias, t = torch.randn(24, generator=gen), torch.randint(0, 24, (8,), generator=gen)
    t[:2] = -100
    for red in ("mean", "sum"):
        got = _suite("liger.fused_linear_cross_entropy", x, w, t, bias, None, -100, reduction=red)
        want = F.cross_entropy(F.linear(x, w, bias), t, ignore_index=-100, reduction=red)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(S.Uncovered, match="softcap, return_z_loss"):
        _suite("liger.fused_linear_cross_entropy", x, w, t, softcap=30.0, return_z_loss=True)


def test_unsloth_ops() -> None:
    """unsloth.swiglu_fg, geglu_{exact,approx}_forward, rms_layernorm (gemma: W + 1), layernorm;
    plain rms_layernorm on 16-bit inputs is Uncovered (Unsloth rounds before the product)."""
    gen = torch.Generator().manual_seed(3)
    e, g = torch.randn(2, 6, 64, generator=gen), torch.randn(2, 6, 64, generator=gen)
    w, b = torch.randn(64, generator=gen), torch.randn(64, generator=gen)
    tol = {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(_suite("unsloth.swiglu_fg", e, g), F.silu(e) * g, **tol)
    torch.testing.assert_close(_suite("unsloth.geglu_exact_forward", e, g), F.gelu(e) * g, **tol)
    torch.testing.assert_close(
        _suite("unsloth.geglu_approx_forward", e, g), F.gelu(e, approximate="tanh") * g, **tol
    )
    torch.testing.assert_close(_suite("unsloth.rms_layernorm", e, w, 1e-6), _rms_ref(e, w, 1e-6))
    eb, wb = e.half(), w.half()
    y = _suite("unsloth.rms_layernorm", eb, wb, 1e-6, True)
    torch.testing.assert_close(y, _rms_ref(eb, wb, 1e-6, 1.0), rtol=1e-2, atol=1e-2)
    with pytest.raises(S.Uncovered, match="gemma=False"):
        _suite("unsloth.rms_layernorm", eb, wb, 1e-6, False)
    y = _suite("unsloth.layernorm", e, w, b, 1e-6)
    torch.testing.assert_close(y, F.layer_norm(e, (64,), w, b, 1e-6), **tol)


def _paged(cache: Any, table: Any, b: int, n: int) -> Any:
    """Sequence b's first n rows of a paged (pages, page_size, ...) cache, in f32."""
    pages = table[b, : -(-n // cache.shape[1])].long()
    return cache.float()[pages].flatten(0, 1)[:n]


def _attend_ref(q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """(out (m, H, Dv), natural lse (m, H)) of q (m, H, D) over k (n, Hk, D), v (n, Hk, Dv) in
    f32, causal top-left (query i sees keys 0..i), as TileGym's FlashInfer references."""
    g = q.shape[1] // k.shape[1]
    qh = q.float().transpose(0, 1)
    kh, vh = (x.float().transpose(0, 1).repeat_interleave(g, 0) for x in (k, v))
    s = qh @ kh.transpose(1, 2) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[1:], dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ vh).transpose(0, 1), s.logsumexp(-1).transpose(0, 1)


def _flashinfer_paged_data(dt: Any, d: int = 32) -> tuple[Any, ...]:
    """A paged cache (6 pages of 8, 2 KV heads), both TileGym's HND storage and the NHD views
    its tests pass, a table whose rows are out of order and padded past the pages used."""
    kc, vc = (torch.randn(6, 2, 8, d, dtype=dt) for _ in range(2))
    table = torch.tensor([[3, 1, 0], [5, 2, 4]], dtype=torch.int32)
    return kc.transpose(1, 2), vc.transpose(1, 2), table


def test_flashinfer_decode_attention_kv_paged() -> None:
    """test_flashinfer_attention.py's DecodePaged: q (B, H, D) over ragged paged sequences
    (19 and 7 keys of pages of 8: a partial last page, a padded table row), k_scale the whole
    score scale, v_scale on the output; `outputs` filled in place."""
    name = "flashinfer.attention.decode_attention_kv_paged"
    k, v, table = _flashinfer_paged_data(torch.float16)
    lens = torch.tensor([19, 7], dtype=torch.int32).view(2, 1, 1, 1)
    q = torch.randn(2, 4, 32, dtype=torch.float16)
    want = torch.stack(
        [
            _attend_ref(q[b : b + 1], _paged(k, table, b, n), _paged(v, table, b, n), 0.2, False)[
                0
            ][0]
            for b, n in enumerate((19, 7))
        ]
    )
    out = torch.empty_like(q)
    got = _suite(name, q, k, v, lens, table, 0.2, 1.7, max_seq_len=19, outputs=out)
    assert got is out
    torch.testing.assert_close(got.float(), want * 1.7, rtol=1e-2, atol=1e-2)
    with pytest.raises(S.Uncovered, match="no fp8"):
        f8 = torch.float8_e4m3fn
        _suite(name, q, k.to(f8), v.to(f8), lens, table, 0.2, 1.7)
    with pytest.raises(S.Uncovered, match="head_dim"):
        _suite(name, q, k, v[..., :16], lens, table, 0.2, 1.7)


def test_flashinfer_prefill_attention_kv_paged() -> None:
    """PrefillPaged: ragged queries (5 and 3 tokens at offsets 0, 5) over paged keys (5 and 6:
    more keys than queries, causal top-left as TileGym's kernel), (out, natural lse)."""
    name = "flashinfer.attention.prefill_attention_kv_paged"
    k, v, table = _flashinfer_paged_data(torch.float16)
    lq, lkv, off = (torch.tensor(x) for x in ([5, 3], [5, 6], [0, 5, 8]))
    q = torch.randn(9, 4, 32, dtype=torch.float16)  # a last row outside every sequence
    for causal in (True, False):
        out, lse = _suite(
            name, q, k, v, lq.int(), lkv.int(), off, table, 0.2, 1.5, 2, 6, is_causal=causal
        )
        for b, (m, n, o) in enumerate(zip((5, 3), (5, 6), (0, 5), strict=True)):
            kb, vb = _paged(k, table, b, n), _paged(v, table, b, n)
            want, wl = _attend_ref(q[o : o + m], kb, vb, 0.2, causal)
            torch.testing.assert_close(out[o : o + m].float(), want * 1.5, rtol=1e-2, atol=1e-2)
            torch.testing.assert_close(lse[o : o + m], wl, rtol=1e-3, atol=1e-3)
        assert not out[8].any() and not lse[8].any()
    with pytest.raises(S.Uncovered, match="no keys"):
        _suite(name, q, k, v, lq.int(), torch.tensor([5, 0]), off, table, 0.2, 1.5, 2, 6)


def test_flashinfer_prefill_attention_kv_ragged() -> None:
    """PrefillRagged: q, k and v sliced at one offset per sequence (4 and 3 tokens), head_dim_qk
    48 > head_dim_vo 32 (TileGym's 192 / 128 form: v padded with zero columns)."""
    name = "flashinfer.attention.prefill_attention_kv_ragged"
    lens, off = torch.tensor([4, 3], dtype=torch.int32), torch.tensor([0, 4, 7])
    q, k = torch.randn(7, 4, 64, dtype=torch.bfloat16), torch.randn(7, 2, 64, dtype=torch.bfloat16)
    v = torch.randn(7, 2, 32, dtype=torch.bfloat16)
    out, lse = _suite(name, q, k, v, lens, lens, off, None, 0.15, 2.0, 2, 4)
    assert out.shape == (7, 4, 32)
    for o, m in ((0, 4), (4, 3)):
        want, wl = _attend_ref(q[o : o + m], k[o : o + m], v[o : o + m], 0.15, True)
        torch.testing.assert_close(out[o : o + m].float(), want * 2.0, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(lse[o : o + m], wl, rtol=1e-3, atol=1e-3)
    with pytest.raises(S.Uncovered, match="head_dim_vo"):
        _suite(name, q[..., :16], k[..., :16], v, lens, lens, off, None, 0.15, 2.0, 2, 4)


def test_flashinfer_decode_mla_kv_paged() -> None:
    """MLADecodePaged: q and q_rope over a paged latent cache (pages of 8, 64 + 16 wide) and its
    rope keys, ragged sequences (19 and 7), kv as keys and values."""
    name = "flashinfer.attention.decode_mla_kv_paged"
    kv, kr = torch.randn(6, 8, 64, dtype=torch.float16), torch.randn(6, 8, 16, dtype=torch.float16)
    table = torch.tensor([[3, 1, 0], [5, 2, 4]], dtype=torch.int32)
    q, qr = torch.randn(2, 4, 64, dtype=torch.float16), torch.randn(2, 4, 16, dtype=torch.float16)
    lens = torch.tensor([19, 7], dtype=torch.int32).view(2, 1, 1, 1)
    got = _suite(name, q, qr, kv, kr, lens, table, 0.1, 2.0)
    for b, n in enumerate((19, 7)):
        c, r = _paged(kv, table, b, n), _paged(kr, table, b, n)
        s = (q[b].float() @ c.T + qr[b].float() @ r.T) * 0.1
        torch.testing.assert_close(got[b].float(), s.softmax(-1) @ c * 2.0, rtol=1e-2, atol=1e-2)
    with pytest.raises(S.Uncovered, match="no keys"):
        _suite(name, q, qr, kv, kr, torch.tensor([3, 0]), table, 0.1, 2.0)


def _unsloth_rope_ref(x: Any, cos: Any, sin: Any) -> Any:
    """test_rope_embedding.py's rotation of x (..., D) by half-width cos and sin (broadcast)."""
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)


def test_unsloth_rope_embedding() -> None:
    """Unsloth's single-tensor RoPE: Q (B, S, H, D), cos and sin (S, D / 2), longer than S;
    its gradient; a non-power-of-two head_dim and f16 tables with f32 Q are Uncovered."""
    name = "unsloth.rope_embedding"
    cos, sin = torch.randn(7, 8), torch.randn(7, 8)
    q = torch.randn(2, 5, 3, 16, requires_grad=True)
    out = _suite(name, q, cos, sin)
    want = _unsloth_rope_ref(q.detach(), cos[:5, None], sin[:5, None])
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(out)
    out.backward(g)
    ref_q = q.detach().clone().requires_grad_(True)
    _unsloth_rope_ref(ref_q, cos[:5, None], sin[:5, None]).backward(g)
    torch.testing.assert_close(q.grad, ref_q.grad, rtol=1e-5, atol=1e-5)
    with pytest.raises(S.Uncovered, match="power-of-two"):
        _suite(name, torch.randn(1, 5, 2, 12), torch.randn(5, 6), torch.randn(5, 6))
    with pytest.raises(S.Uncovered, match="cos's dtype"):
        _suite(name, q.detach(), cos.half(), sin.half())


def test_unsloth_rope_embedding_qk() -> None:
    """Unsloth's joint RoPE: Q (B, Hq, S, D), K (B, Hk, S, D); half-width and full-width
    (Hugging Face's, second half ignored) tables; f32 tables with f16 Q and K (rotated in f32);
    rope_indices picking each row's position."""
    name = "unsloth.rope_embedding_qk"
    q, k = (
        torch.randn(2, 4, 5, 16, dtype=torch.float16),
        torch.randn(2, 2, 5, 16, dtype=torch.float16),
    )
    cos, sin = torch.randn(6, 8), torch.randn(6, 8)
    for c, s in ((cos.half(), sin.half()), (cos, sin)):
        qo, ko = _suite(name, q, k, torch.cat([c, -c], -1), torch.cat([s, -s], -1))
        for x, got in ((q, qo), (k, ko)):
            want = _unsloth_rope_ref(x.float(), c[:5].float(), s[:5].float())
            torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)
    idx = torch.tensor([[5, 0, 2, 2, 1], [3, 4, 0, 1, 5]])
    qo, ko = _suite(name, q, k, cos, sin, rope_indices=idx.reshape(-1).int())
    for x, got in ((q, qo), (k, ko)):
        want = _unsloth_rope_ref(x.float(), cos[idx][:, None], sin[idx][:, None])
        torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)
    with pytest.raises(S.Uncovered, match="one dtype"):
        _suite(name, q, k.float(), cos, sin)
