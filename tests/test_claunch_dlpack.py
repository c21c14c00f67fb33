"""claunch_common.c's read of torch tensors through DLPack's C exchange API (`dl_read`), on CPU
tensors (`dl_view` takes them as if they were on the GPU): the pointer, shape and contiguity
it finds must be torch's own `data_ptr()`, `shape` and `is_contiguous()` for every view."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import dtypes
from fearless.runtime import claunch

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def view() -> Any:
    mod = claunch.module()
    if mod is None:
        pytest.skip(f"no compiled launcher here: {claunch.unavailable_reason()}")
    if getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this torch has no DLPack C exchange API (torch < 2.10)")
    return mod.dl_view


PAIRS = [
    (torch.float32, dtypes.f32), (torch.float16, dtypes.f16), (torch.bfloat16, dtypes.bf16),
    (torch.float64, dtypes.f64), (torch.int8, dtypes.i8), (torch.int32, dtypes.i32),
    (torch.int64, dtypes.i64), (torch.uint8, dtypes.u8), (torch.uint32, dtypes.u32),
    (torch.bool, dtypes.bool_),
]  # fmt: skip


@pytest.mark.parametrize(("tdt", "dt"), PAIRS, ids=[d.name for _, d in PAIRS])
def test_each_dtype_is_read_and_no_other(view: Any, tdt: Any, dt: dtypes.DType) -> None:
    t = torch.zeros((3, 5), dtype=tdt)
    assert view(t, claunch.dlpack_code(dt), 0) == (t.data_ptr(), (3, 5))
    for _, other in PAIRS:
        if other is not dt:
            assert view(t, claunch.dlpack_code(other), 0) is False, other


def test_views_are_taken_exactly_when_torch_calls_them_contiguous(view: Any) -> None:
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    views = [
        base, base[1], base[:, 1:2], base[1:], base[:, :, 2:3, :], base.transpose(0, 1),
        base[..., ::2], base[:, :, :, 1:], base.permute(3, 2, 1, 0), base[0, 0, 0],
        base[0, 0, 0, 0], base[:0], base.transpose(1, 2)[:, :1, :1],
        torch.ones(1, 4).expand(3, 4), torch.ones(4, 1).expand(4, 1), base.reshape(-1)[7:],
        torch.empty_strided((3, 1, 4), (4, 99, 1)), torch.empty_strided((0, 4), (1, 7)),
    ]  # fmt: skip
    code = claunch.dlpack_code(dtypes.f32)
    for v in views:
        got = view(v, code, 0)
        if v.is_contiguous():
            assert got == (v.data_ptr(), tuple(v.shape)), (v.shape, v.stride())
        else:
            assert got is False, (v.shape, v.stride())


def test_the_shape_compares_and_hashes_as_torch_size(view: Any) -> None:
    """The warm path's keys mix shapes read in C with torch.Size read in Python."""
    t = torch.zeros(2, 7)
    _, shape = view(t, claunch.dlpack_code(dtypes.f32), 0)
    assert shape == t.shape and hash(shape) == hash(t.shape)


def test_torch_key_tells_apart_what_the_accessors_do(view: Any) -> None:
    """ops/_replay.py keys plain torch tensors by claunch's torch_key: two tensors share a key
    exactly when their accessor keys (shape, dtype, device, contiguity, pointer mod 16) match."""
    from fearless.ops import _replay

    key = claunch.module().torch_key  # type: ignore[union-attr]
    base = torch.zeros(64, dtype=torch.float32)
    tensors = [
        base[:16], base[16:32], base[1:17], base[:16].view(4, 4), base[:32].view(4, 8)[:, :4],
        base[:16].to(torch.float16), base[:16].to(torch.bfloat16), base[:16].to(torch.int32),
        base[:16].bool(), base[:16].to(torch.uint8), torch.zeros(0), torch.zeros(4, 1),
        torch.zeros(4, 1).expand(4, 1), torch.zeros(4, 4).T, torch.zeros(())
    ]  # fmt: skip
    for a in tensors:
        ptr, part = key(a)
        assert ptr == a.data_ptr() and part[0] == tuple(a.shape)
        assert part[3] is a.is_contiguous()
    for a in tensors:
        for b in tensors:
            same = _replay._accessors(a)[1] == _replay._accessors(b)[1]
            assert (key(a)[1] == key(b)[1]) is same, (a.shape, a.dtype, b.shape, b.dtype)
