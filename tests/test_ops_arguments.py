"""fearless.ops refuses malformed scalar and shape arguments with a fearless error at the
caller's line (issue 33's fault campaign: each of these ended in a raw traceback), and takes
the NumPy and torch scalars torch itself takes."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import ops

x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)


@pytest.mark.parametrize("p", ["0.5", None, True, [0.5]])
def test_dropout_refuses_a_probability_that_is_not_a_number(p: object) -> None:
    with pytest.raises(
        fl.KernelTypeError, match=r"`p` of `fearless\.ops\.dropout` must be a number"
    ) as e:
        ops.dropout(x, p)  # type: ignore[arg-type]
    loc = e.value.diagnostic.loc
    assert loc is not None and loc.file == __file__


def test_dropout_takes_numpy_and_torch_scalars() -> None:
    want = ops.dropout(x, 0.25, seed=3)
    np.testing.assert_array_equal(ops.dropout(x, np.float32(0.25), seed=3), want)
    np.testing.assert_array_equal(ops.dropout(x, np.array(0.25), seed=3), want)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(ops.dropout(x, torch.tensor(0.25), seed=3), want)


@pytest.mark.parametrize("eps", ["small", None, object()])
def test_layer_norm_refuses_an_eps_that_is_not_a_number(eps: object) -> None:
    with pytest.raises(fl.KernelTypeError, match=r"`eps` of `fearless\.ops\.layer_norm`"):
        ops.layer_norm(x, (32,), eps=eps)  # type: ignore[arg-type]


def test_rms_norm_refuses_a_string_eps() -> None:
    with pytest.raises(fl.KernelTypeError, match=r"`eps` of `fearless\.ops\.rms_norm`"):
        ops.rms_norm(x, 32, eps="1e-6")


def test_normalized_shape_takes_numpy_integers() -> None:
    want = ops.layer_norm(x, (32,))
    np.testing.assert_array_equal(ops.layer_norm(x, np.int64(32)), want)
    np.testing.assert_array_equal(ops.layer_norm(x, (np.int32(32),)), want)
    np.testing.assert_array_equal(ops.rms_norm(x, np.int64(32)), ops.rms_norm(x, 32))


@pytest.mark.parametrize("shape", ["32", 32.0, (32.5,)])
def test_normalized_shape_refuses_what_is_not_ints(shape: object) -> None:
    with pytest.raises(
        fl.KernelTypeError, match=r"`normalized_shape` of `fearless\.ops\.layer_norm`"
    ):
        ops.layer_norm(x, shape)


def test_inplace_dropout_refuses_a_read_only_array() -> None:
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(fl.KernelTypeError, match="read-only NumPy array"):
        ops.dropout(ro, 0.5, inplace=True)


def test_inplace_dropout_refuses_before_its_kernels_what_torch_cannot_write() -> None:
    """A broadcast tensor and a leaf that requires grad are E0701 before any kernel runs (they
    were torch's raw RuntimeError from `x.copy_`, after the kernels)."""
    torch = pytest.importorskip("torch")
    leaf = torch.randn(4, requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="leaf tensor that requires grad"):
        ops.dropout(leaf, 0.5, seed=1, inplace=True)
    with pytest.raises(fl.KernelTypeError, match="broadcast dimension"):
        ops.dropout(torch.ones(1, 4).expand(3, 4), 0.5, seed=1, inplace=True)
    with torch.no_grad():
        assert ops.dropout(leaf, 0.5, seed=1, inplace=True) is leaf


def test_inplace_dropout_refuses_an_x_whose_elements_share_memory() -> None:
    """A writeable view of stride 0 (NumPy's `as_strided`) or with overlapping rows: each
    place could keep only one of its elements' results (tests/test_ops_layout_mutations.py:
    it ran, and every row held the last row's result). Torch's in-place ops refuse it."""
    stride_0 = np.lib.stride_tricks.as_strided(x[0].copy(), x.shape, (0, 4), writeable=True)
    with pytest.raises(fl.KernelTypeError, match=r"`x` .* has elements that share memory") as e:
        ops.dropout(stride_0, 0.5, seed=1, inplace=True)
    assert e.value.diagnostic.loc is not None and e.value.diagnostic.loc.file == __file__
    torch = pytest.importorskip("torch")
    with pytest.raises(fl.KernelTypeError, match="has elements that share memory"):
        ops.dropout(torch.ones(40).as_strided((4, 32), (2, 1)), 0.5, seed=1, inplace=True)


def _misaligned(a: np.ndarray) -> np.ndarray:
    """`a`'s values one byte into a buffer: contiguous, but not at a multiple of 4."""
    m = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
    m[...] = a
    return m


def test_a_misaligned_numpy_operand_is_copied_as_a_strided_one_is() -> None:
    """An operator copies a misaligned NumPy array (a view into a byte buffer), as it copies a
    non-contiguous one (tests/test_ops_layout_mutations.py: it was refused by `fl.asarray`,
    whose error named the call's first argument, `x` below, not the misaligned `gate`), and
    writes an in-place one back."""
    gate = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(ops.swiglu(x, _misaligned(gate)), ops.swiglu(x, gate))
    y = _misaligned(x)
    ops.dropout(y, 0.5, seed=1, inplace=True)
    np.testing.assert_array_equal(y, ops.dropout(x, 0.5, seed=1))
    y = _misaligned(np.ascontiguousarray(x[:, :8]))
    want = ops.mhc_sinkhorn(y.copy(), 2)
    assert ops.mhc_sinkhorn(y, 2) is y
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(
    ("shape", "strides", "overlaps"),
    [
        ((4, 8), (32, 4), False),  # dense
        ((8, 4), (4, 32), False),  # transposed
        ((4, 8), (64, 8), False),  # every other element
        ((4, 8), (-32, -4), False),  # reversed
        ((3, 2), (8, 12), False),  # interleaved: offsets 0, 8, 16, 12, 20, 28
        ((1, 8), (0, 4), False),  # stride 0 on an axis of one element
        ((0, 8), (0, 4), False),  # no elements
        ((4, 8), (0, 4), True),  # stride 0
        ((4, 8), (16, 4), True),  # rows overlapping by half
        ((3, 3), (8, 4), True),  # a Hankel view: offset 8 twice
        ((2, 2), (2, 8), True),  # half an element apart
        ((1 << 13, 1 << 13), (8, 12), True),  # interleaved past 2**24 elements: not listed
        ((1 << 13, 1 << 13), (4 << 13, 4), False),  # dense, as large: the stride test clears it
    ],
)
def test_overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...], overlaps: bool) -> None:
    from fearless.ops._io import overlaps_itself

    assert overlaps_itself(shape, strides, 4) is overlaps


def test_a_backward_operator_on_a_tensor_that_requires_grad_says_why() -> None:
    torch = pytest.importorskip("torch")
    if not hasattr(torch.library, "custom_op"):
        pytest.skip("torch older than 2.4")
    from fearless.ops.backward_rows import softmax_backward

    y = torch.softmax(torch.randn(4, 32), -1).requires_grad_()
    with pytest.raises(fl.KernelTypeError, match="has no backward of its own") as e:
        softmax_backward(y, torch.randn(4, 32))
    assert "custom_op" not in str(e.value) and "detach()" in (e.value.help or "")


def test_sdpa_refuses_a_string_scale() -> None:
    q = np.ones((1, 1, 4, 8), np.float32)
    with pytest.raises(
        fl.KernelTypeError, match=r"`scale` of `fearless\.ops\.scaled_dot_product_attention`"
    ):
        ops.scaled_dot_product_attention(q, q, q, scale="0.1")


def test_a_wrong_dtype_help_names_a_dtype_the_operator_takes() -> None:
    """An integer input where int32 is wanted (block tables, top-k indices) is told to become
    int32, not float32; a float one the operator's first float dtype."""
    from fearless import dtypes
    from fearless.ops import _io

    with pytest.raises(fl.KernelTypeError, match=r"astype\(np\.int32\)"):
        _io.operand(np.zeros(3, np.int64), "op", "indices", (dtypes.i32,))
    with pytest.raises(fl.KernelTypeError, match=r"astype\(np\.float32\)"):
        _io.operand(np.zeros(3, np.float64), "op", "x", (dtypes.f32, dtypes.f16))
    with pytest.raises(fl.KernelTypeError, match=r"astype\(fl\.i32\)"):
        _io.operand(fl.asarray(np.zeros(3, np.int64)), "op", "indices", (dtypes.i32,))


def test_a_big_endian_array_is_named_with_its_byte_order() -> None:
    """A NumPy array in the other byte order: E0701 naming the operator's argument and the
    conversion (it named fl.asarray's internal `obj` and suggested another dtype)."""
    with pytest.raises(
        fl.KernelTypeError, match=r"`x` of `fearless\.ops\.softmax` is a NumPy"
    ) as e:
        ops.softmax(x.astype(">f4"))
    assert "newbyteorder('=')" in str(e.value)
    with pytest.raises(fl.KernelTypeError, match="byte order other than this machine's"):
        fl.asarray(x.astype(">f4"))
