"""What fearless.ops takes and gives back: an operator accepts `fl.Tensor`s, torch tensors or
NumPy arrays, and returns the kind its first tensor argument was (a torch tensor on the same
device for torch, an `fl.Tensor` for an `fl.Tensor`, a NumPy array for NumPy), so it drops into
torch code and into fearless code alike.

Where a tensor lives is decided here, once, for every operator (`operand`): an operand whose
memory is where the kernels run (a torch CUDA tensor on the cuda target, a CPU torch tensor or
NumPy array on the simulator, any fl.Tensor) is shared; any other (NumPy or a CPU torch tensor
on the cuda target, a CUDA tensor on the simulator) is copied in, and the result made beside
the copy is copied back out by `result` into the caller's kind and device, as launches do with
NumPy arrays (runtime/host_arrays.py): numba's behaviour, with one `HostCopyWarning` per
operator. An output is never allocated in the caller's memory when the kernels write a copy.
Several operands of one call (`float_operands`) live where the first does: the others are
copied beside it.
"""

from __future__ import annotations

import math
import numbers
import operator
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import BorrowError, HostCopyWarning
from ..runtime import process_gpu, trace
from ..runtime import tensor as fl_tensor
from ..runtime.arrays import lazy_view_error, nbytes_text, torch_dtype, torch_dtype_of
from ..runtime.location import argument_error, user_location, warn_at_user
from ..runtime.target import current_target
from ..runtime.tensor import Tensor
from ._arguments import is_one_of


@dataclass(frozen=True)
class Operand:
    """One tensor argument of an operator: `tensor` (an fl.Tensor on the current target) and
    what the caller passed (`original`, of `kind` "fl", "torch" or "numpy"). `kind` "torch" is
    a torch tensor whose memory the kernels use; "torch_copy" one that was copied in (a CPU
    tensor on the cuda target, a CUDA tensor on the simulator): its results go back out."""

    tensor: Tensor
    kind: str
    original: Any

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensor.shape

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype


def operand(
    x: Any,
    op: str,
    name: str,
    dtypes_ok: Sequence[DType] | None = None,
    device: int | None = None,
    written: bool = False,
) -> Operand:
    """`x` as an operand of `op`'s argument `name`, or a KernelTypeError (E0701) at the caller.
    A moved fl.Tensor is a MovedError. `device`: where a copied operand goes (a weight beside
    its input's device; default the current device). `written`: the operator writes `x` in
    place (`write_back`), so memory it cannot write back into is refused here, before any
    kernel runs (`refuse_unwritable`)."""
    torch = sys.modules.get("torch")
    if written:
        refuse_unwritable(x, op, name)
    if isinstance(x, Tensor):
        x._check_live()
        op_ = Operand(x, "fl", x)
    elif torch is not None and isinstance(x, torch.Tensor):
        if x.requires_grad and torch.is_grad_enabled():
            if hasattr(torch.library, "custom_op"):  # an operator autograd does not record
                raise argument_error(
                    f"`{name}` of `fearless.ops.{op}` requires grad, but `{op}` has no "
                    "backward of its own (it is a gradient, or a building block of one): the "
                    "result would be cut from the graph",
                    help=f"call it under `torch.no_grad()` or with `{name}.detach()`; for "
                    "gradients, call the forward operator and let autograd run its backward",
                )
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` requires grad, but this torch "
                f"({torch.__version__}) has no `torch.library.custom_op`, through which "
                "fearless.ops records its backward: the result would be cut from the graph",
                help=f"use torch 2.4 or newer, or call it under `torch.no_grad()` or with "
                f"`{name}.detach()`",
            )
        if (lazy := lazy_view_error(x, f"`{name}` of `fearless.ops.{op}`", name)) is not None:
            raise lazy  # on the GPU `from_torch` wraps its memory, read as it is
        if _resident(x):
            op_ = Operand(from_torch(x), "torch", x)
        else:
            _copied(op, name, f"a {x.device.type.upper()} torch tensor", x.nbytes)
            trace.refuse("a torch tensor copied for the target")
            op_ = Operand(
                fl_tensor.asarray(x.detach().contiguous(), device=device), "torch_copy", x
            )
    elif isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` is a NumPy array of {x.dtype}, in a byte "
                "order other than this machine's, which kernels do not read",
                help=f"convert it: `{name}.astype({name}.dtype.newbyteorder('='))`",
            )
        if current_target().on_device:
            _copied(op, name, "a NumPy array", x.nbytes)
        # a misaligned array (a view into a byte buffer) is copied, as a strided one is by
        # `fl.asarray`: refused there, the error named the user's first argument, not `name`
        values = x if x.flags.aligned else np.array(x, order="C")
        op_ = Operand(fl_tensor.asarray(values, device=device), "numpy", x)
    else:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be a tensor (fl.Tensor, torch.Tensor or "
            f"NumPy array), not {type(x).__name__}",
            help="convert it first: `fl.asarray(x)`",
        )
    if dtypes_ok is not None and op_.dtype not in dtypes_ok:
        # the first accepted dtype of the same family: an int32 for integer indices, f32 else
        want = next((d for d in dtypes_ok if d.is_int == op_.dtype.is_int), dtypes_ok[0])
        torch_name = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}.get(
            want.name, f"int{want.itemsize * 8}" if want.is_int else want.name
        )
        numpy_type = "ml_dtypes.bfloat16" if want.name == "bf16" else f"np.{torch_name}"
        convert = {
            "torch": f"`{name}.to(torch.{torch_name})`",
            "torch_copy": f"`{name}.to(torch.{torch_name})`",
            "numpy": f"`{name}.astype({numpy_type})`",
            "fl": f"`{name}.astype(fl.{want.name})`",
        }[op_.kind]
        raise argument_error(
            f"`fearless.ops.{op}` takes {', '.join(d.name for d in dtypes_ok)} tensors, but "
            f"`{name}` is {op_.dtype.name}",
            help=f"convert it: {convert}",
        )
    return op_


def float_operands(op: str, allowed: tuple[DType, ...] = (), **tensors: Any) -> list[Operand]:
    """`tensors` (keyed by the operator's argument names) as operands of a float dtype
    (`allowed`, FLOATS by default), in the order given: the first one where it lives (see
    `operand`), the others beside it. Their dtypes and shapes are the caller's to check."""
    kinds = allowed or FLOATS
    (name, first), *rest = tensors.items()
    fa = operand(first, op, name, kinds)
    return [fa, *(operand(x, op, n, kinds, device=fa.tensor.device) for n, x in rest)]


def refuse_unwritable(x: Any, op: str, name: str) -> None:
    """Refuse an in-place operand whose memory cannot take the result: a read-only NumPy array
    (`np.broadcast_to`'s view among them), or a torch tensor with a broadcast dimension
    (`expand`'s stride 0: one element stands for several), or a view with elements that share
    memory (a writeable NumPy view of stride 0, or any `as_strided` view whose elements
    overlap: `write_back` would leave in each place whichever result came last, torch's own
    in-place ops refuse it), or a leaf tensor that requires grad in grad mode (torch's own
    in-place ops refuse it). A launch refuses a read-only array it writes itself, but an
    operand the kernels write a copy of (a non-contiguous one, or any on the cuda target)
    reaches that check as the writable copy, and only `write_back`, after the kernels, would
    find out."""
    torch = sys.modules.get("torch")
    if isinstance(x, np.ndarray):
        if not x.flags.writeable:
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` is a read-only NumPy array, but `{op}` writes "
                "it in place",
                help=f"pass a writeable array (`{name}.copy()`); a view made by "
                "`np.broadcast_to` is read-only",
            )
        if not x.flags.c_contiguous and overlaps_itself(x.shape, x.strides, x.itemsize):
            raise _overlapping_error(op, name, f"`{name}.copy()`")
        return
    if torch is None or not isinstance(x, torch.Tensor):
        return
    if any(s == 0 and n > 1 for n, s in zip(x.shape, x.stride(), strict=True)):
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` has a broadcast dimension (stride 0: one "
            f"element stands for several, as `expand` makes), but `{op}` writes it in place",
            help=f"pass a tensor with memory of its own (`{name}.clone()`)",
        )
    if not x.is_contiguous() and overlaps_itself(tuple(x.shape), x.stride(), 1):
        raise _overlapping_error(op, name, f"`{name}.clone()`")
    if x.requires_grad and x.is_leaf and torch.is_grad_enabled():  # torch refuses it too
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` is a leaf tensor that requires grad, but `{op}` "
            "writes it in place: autograd would lose the values it was created with",
            help=f"write into a copy (`{name}.clone()`), or call it under `torch.no_grad()`",
        )


def _overlapping_error(op: str, name: str, copy: str) -> Exception:
    return argument_error(
        f"`{name}` of `fearless.ops.{op}` has elements that share memory (a view with a "
        f"stride of 0, or strides that make elements overlap), but `{op}` writes it in place: "
        "each place can hold only one of the results",
        help=f"pass an array with memory of its own ({copy})",
    )


def overlaps_itself(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """Whether two elements of a view of `shape` and `strides` (in units of which an element
    takes `itemsize`: bytes for NumPy, elements for torch) share memory. The axes sorted by
    stride, each stride past the reach of the smaller ones proves no overlap (every slicing,
    transpose and reversal of a dense array so is); otherwise the elements' offsets decide
    (exotic `as_strided` views only; one of more than 2**24 elements is taken as overlapping,
    rather than listing its offsets)."""
    axes = sorted((abs(st), n) for n, st in zip(shape, strides, strict=True) if n > 1)
    if any(n == 0 for n in shape) or not axes:
        return False
    if axes[0][0] == 0:  # a broadcast axis: one element stands for several
        return True
    reach = itemsize
    for stride, n in axes:
        if stride < reach:
            break
        reach += stride * (n - 1)
    else:
        return False
    if math.prod(n for _, n in axes) > 1 << 24:
        return True
    offsets = np.zeros(1, np.int64)
    for stride, n in axes:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * stride).ravel()
    offsets.sort()
    return bool((np.diff(offsets) < itemsize).any())


def refuse_grad(op: str, **tensors: Any) -> None:
    """An operator that writes an argument in place has no autograd formula (torch takes none
    for a mutating op): an input that requires grad is refused at the call, before the
    dispatcher, rather than cut from the graph."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return
    for name, x in tensors.items():
        if isinstance(x, torch.Tensor) and x.requires_grad:
            raise argument_error(
                f"`{name}` of `fearless.ops.{op}` requires grad, but `{op}` has no backward "
                "(forward only; it writes an argument in place): the result would be cut from "
                "the autograd graph",
                help=f"call it under `torch.no_grad()` (inference) or with `{name}.detach()`",
            )


def _resident(x: Any) -> bool:
    """Whether the kernels can use torch tensor `x`'s memory where it is: a CUDA tensor on the
    cuda target, a CPU one on the simulator."""
    return bool(x.is_cuda) == current_target().on_device


# The operators that warned of a copy already: once each, as a kernel warns once of NumPy
# arguments (runtime/host_arrays.py).
_warned: set[str] = set()


def _copied(op: str, name: str, what: str, nbytes: int) -> None:
    """Warn once per operator that its operand `name` (`what`) is copied in and out."""
    if op in _warned:
        return
    _warned.add(op)
    target = current_target()
    where, fix = (
        ("the GPU", f"`{name}.cuda()` (or `fl.asarray({name})`)")
        if target.on_device
        else ("host memory", f"`{name}.cpu()`")
    )
    message = (
        f"`{name}` of `fearless.ops.{op}` is {what}, but fearless runs on the {target} target: "
        f"each call copies it ({nbytes_text(nbytes)}) to {where}, and the result back, and "
        f"waits for the kernels; keep the data there with {fix}"
    )
    warn_at_user(message, HostCopyWarning)


def from_torch(x: Any) -> Tensor:
    """An fl.Tensor over a torch tensor's memory (a contiguous copy first when it is not). A
    CUDA tensor on fearless's GPU on the cuda target is wrapped directly (a few hundred
    nanoseconds: an operator reads two or three); anything else goes through `fl.asarray`.
    Detached: inside torch.ops.fearless a tensor may still say requires_grad (autograd runs
    above the op), and torch refuses `__cuda_array_interface__` on such a tensor."""
    if x.is_cuda and x.get_device() == process_gpu.GPU and current_target().on_device:
        dtype = torch_dtype(x.dtype)
        if dtype is not None:
            if not x.is_contiguous():
                trace.refuse("a contiguous copy of a strided input")
                x = x.detach().contiguous()
            return Tensor._make(x.data_ptr(), tuple(x.shape), dtype, on_device=True, owner=x)
    trace.refuse("an input copied for the target")
    return fl_tensor.asarray(x.detach().contiguous())


def seq_major_base(x: Any) -> Any:
    """The (B, S, H, D) torch tensor of which `x`, a torch tensor of (B, H, S, D), is the
    transposed view (`t.view(b, s, h, d).transpose(1, 2)`: Hugging Face's q, k and v between
    their projections and attention, flash-attn's layout), sharing its memory; None for anything
    else, a contiguous tensor among them. fl.Tensor is dense, so `from_torch` would copy `x`;
    the attention and rope kernels read and write the base in place instead."""
    base = _dense_transpose(x)
    return None if base is None or x.is_contiguous() else base


def seq_major_bases(*xs: Any) -> tuple[Any, ...] | None:
    """The (B, S, H, D) bases of `xs` where each is dense as (B, S, H, D) and one at least is a
    sequence-major view (`seq_major_base`), else None. A tensor dense in both layouts (one head,
    (B, 1, S, D)) counts beside one that is a view: a multi-query model's k beside its q."""
    bases = tuple(_dense_transpose(x) for x in xs)
    if any(b is None for b in bases) or all(x.is_contiguous() for x in xs):
        return None
    return bases


def read_in_place(*xs: Any) -> tuple[Any, ...] | None:
    """`seq_major_bases(*xs)`, for a kernel that reads them in place (None: the caller passes
    `xs` as they are, and a strided one is copied). A call that reads a base is not replayed:
    the replay key tells a dense tensor from a strided one, not one stride order from
    another."""
    bases = seq_major_bases(*xs)
    if bases is not None:
        trace.refuse("a sequence-major view")
    return bases


def _dense_transpose(x: Any) -> Any:
    """x.transpose(1, 2) where x is a 4-d torch tensor and that view is dense, else None."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or x.dim() != 4:
        return None
    base = x.transpose(1, 2)
    return base if base.is_contiguous() else None


def heads_major(shape: Sequence[int], seq: bool) -> tuple[int, ...]:
    """(B, H, L, D) of a 4-d `shape` that is (B, L, H, D) where `seq` (sequence-major, as
    `seq_major_base` gives), else `shape` itself: the swap is its own inverse."""
    b, x, y, d = shape
    return (b, y, x, d) if seq else (b, x, y, d)


def output(like: Operand, shape: tuple[int, ...], dtype: DType | None = None) -> tuple[Tensor, Any]:
    """A new output of `shape` and `dtype` (like's by default) in `like`'s kind: the fl.Tensor
    the kernels write, and what the operator returns (pass both to `result`). Only a torch
    operand whose memory the kernels use gets a torch output; a copied one gets an fl.Tensor
    beside its copy, which `result` copies out."""
    dt = dtype or like.dtype
    if like.kind == "torch":
        torch = sys.modules["torch"]
        tdt, device = torch_dtype_of(dt), like.original.device
        out = _allocate(lambda: torch.empty(shape, dtype=tdt, device=device))
        return from_torch(out), out
    dev = like.tensor.device
    t = _allocate(lambda: fl_tensor.empty(shape, dtype=dt, device=dev))
    return t, t


def zeros_output(like: Operand, shape: tuple[int, ...]) -> tuple[Tensor, Any]:
    """`output(like, shape)` filled with zeros: what an operator returns where no kernel runs
    (attention over no keys, the gradients of an empty batch)."""
    return filled_output(like, shape, 0.0)


def filled_output(
    like: Operand, shape: tuple[int, ...], value: float, dtype: DType | None = None
) -> tuple[Tensor, Any]:
    """`output(like, shape, dtype)` filled with `value` (for a torch operand one `torch.full`,
    which a replay makes again, fill and all)."""
    if like.kind == "torch":
        out = _torch_full(like, shape, value, dtype or like.dtype)
        return from_torch(out), out
    t = full(like, shape, value, dtype)
    return t, t


def _allocate(make: Callable[[], Any]) -> Any:
    """`make()`, told to a recording trace (runtime/trace.py) with how to make it again."""
    t = make()
    trace.allocated(t, make)
    return t


def full(like: Operand, shape: tuple[int, ...], value: float, dtype: DType | None = None) -> Tensor:
    """A tensor of `shape` filled with `value`, on like's side: through torch's allocator for a
    torch operand (so that the operator stays capturable in a CUDA graph and on torch's
    stream), an fl.Tensor otherwise."""
    dt = dtype or like.dtype
    if like.kind == "torch":
        return from_torch(_torch_full(like, shape, value, dt))
    dev = like.tensor.device
    return _allocate(lambda: fl_tensor.full(shape, value, dtype=dt, device=dev))


def _torch_full(like: Operand, shape: tuple[int, ...], value: float, dtype: DType) -> Any:
    """One `torch.full` beside the torch operand `like`, told to a recording trace (a replay
    makes it again, fill and all)."""
    torch = sys.modules["torch"]
    tdt, device = torch_dtype_of(dtype), like.original.device
    return _allocate(lambda: torch.full(shape, value, dtype=tdt, device=device))


def zeros_beside(t: Tensor, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """A zeroed scratch tensor next to `t`: from torch's allocator when `t` is (a view of) a
    torch tensor's memory, as `full` allocates, else an fl.Tensor."""
    return _beside(t, shape, dtype, "zeros")


def empty_beside(t: Tensor, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """An uninitialised scratch tensor next to `t`, allocated as `zeros_beside`'s. Through
    torch's caching allocator the operator neither waits for the GPU (cuMemFree would, when
    the scratch is collected) nor breaks a CUDA graph's capture."""
    return _beside(t, shape, dtype, "empty")


def _beside(t: Tensor, shape: tuple[int, ...], dtype: DType, fill: str) -> Tensor:
    owner: Any = t
    while isinstance(owner, Tensor):
        owner = owner._owner
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(owner, torch.Tensor):
        tdt, device, make = torch_dtype_of(dtype), owner.device, getattr(torch, fill)
        return from_torch(_allocate(lambda: make(shape, dtype=tdt, device=device)))
    fl_make, dev = getattr(fl_tensor, fill), t.device
    return _allocate(lambda: fl_make(shape, dtype=dtype, device=dev))


def cast(x: Operand, dtype: DType) -> Tensor:
    """`x` in `dtype` (itself when it is already), converted on x's side as `full` allocates."""
    if x.dtype == dtype:
        return x.tensor
    trace.refuse(f"{x.dtype.name} converted to {dtype.name}")
    if x.kind == "torch":
        return from_torch(x.original.detach().to(torch_dtype_of(dtype)))
    return x.tensor.astype(dtype)


def param(p: Any, n: int, like: Operand, op: str, name: str, fill: float) -> Tensor:
    """A weight or bias `p` of `n` elements in like's dtype (`fill` everywhere when None)."""
    if p is None:
        return full(like, (max(n, 1),), fill)
    w = operand(p, op, name, FLOATS, device=like.tensor.device)
    if w.shape != (n,):
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` has shape {w.shape}, but the normalized axis has "
            f"{n} elements",
        )
    return cast(w, like.dtype)


def number(value: Any, op: str, name: str) -> float:
    """A scalar argument (`eps`, `p`, `scale`) as a float: a Python or NumPy number, or a
    one-element NumPy array or torch tensor; anything else (a string, a bool, None) is E0701."""
    tp = type(value)
    if tp is float or tp is int:  # the common case, before the ABC checks below
        return float(value)
    torch = sys.modules.get("torch")
    one_element = (isinstance(value, np.ndarray) and value.size == 1) or (
        torch is not None and isinstance(value, torch.Tensor) and value.numel() == 1
    )
    item = value.item() if one_element else value
    if isinstance(item, (numbers.Real, np.floating, np.integer)) and not isinstance(
        item, (bool, np.bool_)
    ):
        return float(item)
    raise argument_error(
        f"`{name}` of `fearless.ops.{op}` must be a number, not {type(value).__name__} "
        f"({value!r:.40})",
        help=f"pass a float, e.g. `{name}=0.5`",
    )


def dims(shape: Any, op: str, name: str) -> tuple[int, ...]:
    """A shape argument (`normalized_shape`) as a tuple of ints: one int (Python or NumPy) or a
    sequence of them, as torch takes it; anything else is E0701."""
    items = (
        [shape]
        if not isinstance(shape, (list, tuple)) and not hasattr(shape, "__iter__")
        else shape
    )
    try:
        return tuple(operator.index(n) for n in items)
    except TypeError:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` must be an int or a sequence of ints, not "
            f"{shape!r:.60}",
            help=f"pass the last axis's length, e.g. `{name}=x.shape[-1]`",
        ) from None


def fresh_seed() -> int:
    """A random 64-bit seed as the kernels' i64, drawn anew by a replay (ops/_replay.py)."""
    s = _draw_seed()
    trace.drew(s, _draw_seed)
    return s


def _draw_seed() -> int:
    return secrets.randbits(64) - 2**63


def gelu_kind(approximate: str) -> str:
    """The kernels' name of gelu's `approximate` form ("gelu", "gelu_tanh"), or E0701."""
    if not is_one_of(approximate, ("none", "tanh")):
        raise argument_error(
            f"`approximate` must be 'none' or 'tanh', not {approximate!r}",
        )
    return "gelu" if approximate == "none" else "gelu_tanh"


def result(like: Operand, tensor: Tensor, returned: Any) -> Any:
    """What the operator returns: `returned` (from `output`), read back for NumPy callers and
    copied out to a copied torch operand's device (waiting for the kernels, raising their
    device errors)."""
    if like.kind == "numpy":
        return tensor.numpy()
    if like.kind == "torch_copy":
        return to_torch(tensor, like.original.device)
    return returned


def write_back(x: Operand) -> None:
    """After kernels wrote `x.tensor` in place (an operator that updates an argument, as
    TileGym's `splitk_reduce` and `mhc_sinkhorn` do): the values back into what the caller
    passed where the kernels wrote a copy of it (a NumPy array or torch tensor copied for the
    target, a non-contiguous one made contiguous); nothing where they wrote its memory."""
    original = x.original
    if x.kind == "fl":
        return
    if x.kind == "numpy":
        values = x.tensor.numpy()
        if not np.shares_memory(values, original):
            np.copyto(original, values)
        return
    if x.kind == "torch" and original.is_contiguous():
        return  # the kernels wrote its memory (from_torch wraps a contiguous tensor)
    original.copy_(to_torch(x.tensor, original.device))  # through the host: a rare case


def refuse_overlap(op: str, operands: dict[str, Operand], written: Sequence[str]) -> None:
    """BorrowError where an argument `op` writes in place (`written`, the caller's names) may
    share memory with another of `operands` (name: operand): the caller's memory, as passed,
    not the dense copy the kernels may get (`operand` copies a strided tensor, which hides
    the alias from the launch's own borrow check, and `write_back` would then overwrite an
    input with the result). Spans are each tensor's first to last byte, so two interleaved
    views of one buffer count as overlapping. Call it before any kernel runs."""
    spans = {name: memory_span(x) for name, x in operands.items()}
    for out in written:
        start, end = spans[out]
        for other, (lo, hi) in spans.items():
            if other == out or start == end or lo == hi or not (lo < end and start < hi):
                continue
            kind = "mutable" if other in written else "immutable"
            raise BorrowError(
                f"`{out}` of `fearless.ops.{op}` shares memory with `{other}`: cannot write "
                f"`{out}` in place while it is also borrowed as {kind}",
                user_location(),
                label=f"`{out}` and `{other}` overlap",
                help=f"give `{out}` memory of its own (e.g. `torch.empty_like(...)`): the "
                "kernel reads its inputs while it writes its outputs",
            )


def memory_span(x: Operand) -> tuple[int, int]:
    """The byte range [start, end) of the caller's memory behind x (empty: (0, 0))."""
    original = x.original
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(original, torch.Tensor):
        if original.numel() == 0:
            return 0, 0
        size = original.element_size()
        dims = tuple(zip(original.shape, original.stride(), strict=True))
        lo = sum(min(0, (n - 1) * st) for n, st in dims)
        hi = sum(max(0, (n - 1) * st) for n, st in dims)
        base = original.data_ptr()
        return base + lo * size, base + (hi + 1) * size
    if isinstance(original, np.ndarray):
        if original.size == 0:
            return 0, 0
        lo, hi = np.lib.array_utils.byte_bounds(original)
        return int(lo), int(hi)
    t = x.tensor
    return (t.data_ptr, t.data_ptr + t.nbytes) if t.size else (0, 0)


def to_torch(t: Tensor, device: Any) -> Any:
    """A torch tensor on `device` holding a copy of `t` (its raw bits for bf16 and fp8)."""
    torch = sys.modules["torch"]
    host = fl_tensor.storage_view(np.ascontiguousarray(t.numpy()))
    return torch.from_numpy(host.copy()).view(torch_dtype_of(t.dtype)).to(device)


def view(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`t` with another shape of the same size, sharing its memory (t is C-contiguous)."""
    assert math.prod(shape) == t.size, (shape, t.shape)
    host = t._host.reshape(shape) if t._host is not None else None
    return Tensor._make(
        t._ptr, shape, t._dtype, on_device=t._on_device, owner=t, host=host, device=t._device
    )


def flat(t: Tensor) -> Tensor:
    """`t` as one axis, sharing its memory."""
    return view(t, (t.size,))


def rows_of(x: Tensor, dim: int, op: str) -> Tensor:
    """`x` as a 2-D (rows, cols) view for an operator over its last axis (`dim` must name it)."""
    nd = x.ndim
    if nd == 0 or not is_one_of(dim, (-1, nd - 1)):
        raise argument_error(
            f"`fearless.ops.{op}` works over the last axis, not axis {dim} of a {nd}-d tensor",
            help="move the axis last first (`x.transpose(dim, -1)`), or pass `dim=-1`",
        )
    cols = x.shape[-1]
    return view(x, (x.size // max(cols, 1), cols))


def halves_of(x: Tensor, dim: int, op: str, name: str = "x") -> tuple[Tensor, tuple[int, ...]]:
    """(`x` as a 2-D (rows, 2h) view, the shape of one half) for a gated operator that splits
    axis `dim` of `x` in two halves of h' elements: a row is one index of the axes before the
    axis, and holds the axis and every axis after it, so (x being contiguous) its first h
    elements are that index's part of the first half and its last h the second's (h = h'
    times the size of the axes after). Any axis, as torch's `glu(dim=)`, with no copy."""
    nd = x.ndim
    try:  # an int, or what stands for one (np.int64, a 0-d integer array or tensor)
        axis = operator.index(dim) if type(dim) is not bool else nd
    except TypeError:
        axis = nd  # a float, a string, a 1-d array: no axis
    if nd == 0 or not -nd <= axis < nd:
        raise argument_error(
            f"`fearless.ops.{op}` splits an axis of `{name}` in two halves, but a {nd}-d "
            f"tensor has no axis {dim!r}",
            help=f"pass `dim=-1` (the last axis), or an axis from {-nd} to {nd - 1}"
            if nd
            else "pass a tensor of one axis or more",
        )
    axis %= nd
    if x.shape[axis] % 2:
        raise argument_error(
            f"`fearless.ops.{op}` splits axis {axis} of `{name}` in two halves, but it has "
            f"{x.shape[axis]} elements",
            help="give that axis an even size: the gate and its input, one half each",
        )
    rows = view(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    return rows, (*x.shape[:axis], x.shape[axis] // 2, *x.shape[axis + 1 :])


FLOATS = (dtypes.f32, dtypes.f16, dtypes.bf16)
GEMM_FLOATS = (*FLOATS, dtypes.f8e4m3fn, dtypes.f8e5m2)  # matmul's: the fp8 tensor cores too
HALF = (dtypes.f16, dtypes.bf16)


def machine_eps(a: Operand) -> float:
    """The machine epsilon of a float operand's dtype: torch's rms_norm's default `eps`."""
    return {"f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}[a.dtype.name]
