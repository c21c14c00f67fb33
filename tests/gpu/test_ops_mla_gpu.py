"""`fearless.ops.mla`, `mla_decoding` and `mla_decoding_split_kv` on the GPU at TileGym's test
shapes (tests/ops/test_mla.py: bf16, 16 query heads over 16 or 4 KV heads, S 9, D 128, D_PE 64,
causal and not, and its fp8 case; test_mla_decoding.py: f16, B 2, 32 heads, D 512, D_PE 64, S 1024;
test_mla_decoding_split_kv.py: f16, 8 to 32 heads, S 129 to 11049, 128 and 512 keys per
split), against the float64 references of tests/support/mla_ref.py, with TileGym's tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from fearless import ops
from support.mla_ref import mla_decoding_reference, mla_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _host(*xs: object) -> list[np.ndarray]:
    return [x.float().cpu().numpy() for x in xs]  # type: ignore[attr-defined]


def _check(got: object, want: np.ndarray) -> None:
    np.testing.assert_allclose(_host(got)[0], want, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("s", [9, 512])
def test_mla_matches_the_reference(causal: bool, group: int, s: int) -> None:
    torch.manual_seed(0)

    def data(*shape: int) -> object:
        return torch.empty(*shape, device="cuda").normal_(0.0, 0.3).to(torch.bfloat16)

    q, qpe = data(1, 16, s, 128), data(1, 16, s, 64)
    k, v, kpe = data(1, 16 // group, s, 128), data(1, 16 // group, s, 128), data(1, 1, s, 64)
    got = ops.mla(q, k, v, qpe, kpe, causal)
    assert got.is_cuda and got.shape == q.shape and got.dtype == torch.bfloat16
    _check(got, mla_reference(*_host(q, k, v, qpe, kpe), causal))


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize("s", [512, 1000])
def test_mla_in_fp8(dtype: str, s: int) -> None:
    """TileGym's test_mla.py fp8 case (4 batches of 32 heads, D 128, D_PE 64, causal, inputs
    N(0, 0.3) rounded to fp8, its tolerance 0.1), fewer batches; keys that fill no whole tile
    at 1000. The reference reads the same fp8 inputs."""
    torch.manual_seed(2)
    kind = getattr(torch, dtype)

    def data(*shape: int) -> object:
        return torch.empty(*shape, device="cuda").normal_(0.0, 0.3).half().to(kind)

    q, qpe = data(1, 32, s, 128), data(1, 32, s, 64)
    k, v, kpe = data(1, 32, s, 128), data(1, 32, s, 128), data(1, 1, s, 64)
    got = ops.mla(q, k, v, qpe, kpe, True)
    assert got.is_cuda and got.shape == q.shape and got.dtype == kind
    want = mla_reference(*_host(q, k, v, qpe, kpe), True)
    np.testing.assert_allclose(_host(got)[0], want, atol=1e-1, rtol=1e-1)


def test_mla_decoding_matches_the_reference() -> None:
    torch.manual_seed(1)

    def data(*shape: int, std: float = 0.2) -> object:
        return torch.empty(*shape, device="cuda").normal_(0.3, std).to(torch.float16)

    q, qpe = data(2, 32, 512), data(2, 32, 64, std=0.1)
    kv, kpe = data(2, 1024, 512), data(2, 1024, 64, std=0.1)
    o, lse = ops.mla_decoding(q, qpe, kv, kpe)
    assert o.shape == (2, 32, 512) and lse.shape == (2, 32) and lse.dtype == torch.float32
    want_o, want_lse = mla_decoding_reference(*_host(q, qpe, kv, kpe))
    _check(o, want_o)
    _check(lse, want_lse)


@pytest.mark.parametrize("heads", [8, 16, 24, 32])
@pytest.mark.parametrize("s", [129, 1024, 8192, 11049])
@pytest.mark.parametrize("split", [128, 512, None])
def test_mla_decoding_split_kv_matches_the_reference(heads: int, s: int, split: object) -> None:
    torch.manual_seed(42)
    q, qpe = torch.randn(1, heads, 512, device="cuda"), torch.randn(1, heads, 64, device="cuda")
    kv, kpe = torch.randn(1, s, 512, device="cuda"), torch.randn(1, s, 64, device="cuda")
    q, qpe, kv, kpe = (x.half() for x in (q, qpe, kv, kpe))
    got = ops.mla_decoding_split_kv(q, qpe, kv, kpe, None, split)
    assert got.shape == (1, heads, 512) and got.dtype == torch.float16
    _check(got, mla_decoding_reference(*_host(q, qpe, kv, kpe))[0])
