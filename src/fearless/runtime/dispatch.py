"""The dispatcher: how a call of a kernel becomes a launch, for whatever track compiled it.

A track hands the dispatcher its parameters as declared (`abi.Declared`) and a `specialise`
callback. A call `dispatcher.launch(args, target, stream)` then goes one of three ways:

    compiled warm path  on the GPU, on the default stream, outside `fl.graph` and ops'
                        recording: claunch_tile.c's `tile_warm` reads the arguments, checks,
                        packs and launches in one C call (`launched_in_c`, tried inline by the
                        track before it calls `launch`)
    warm path           the readers of runtime/arg_keys.py read each argument into a key;
                        a key seen before whose arrays pass the borrow check runs the launch
                        prepared for it (`lookup`)
    slow path           anything else: on "cuda" NumPy arrays for read-only parameters are
                        copied to the GPU (runtime/host_arrays.py); the track's
                        `specialise(args, target)` checks every argument, compiles and
                        returns the launch prepared for them and its payload, which is kept
                        under the key (unless arrays were copied) and run

Everything a prepared launch holds is a function of the key: the specialisation (alignment
included: the power of two up to 16 dividing a pointer is fixed by the pointer mod 16), the
grid, the byte extent of each array, and the packed extents and strides. What varies within
one key, the pointers and scalar values, goes into the launch as it is; the borrow check runs
on every call, on those pointers. An argument the warm path does not recognise, a failed
check, an overlap or a key seen for the first time all go to the slow path, so every error
is the track's own. Inside `fl.graph` the graph keeps a launch's arguments alive; while ops
record a call (runtime/trace.py), every GPU launch the dispatcher runs is recorded with its
payload, which is what ops/_replay.py replays.

On "cuda" a prepared launch keeps the cubin of the arch the slow path compiled for: a warm
launch does not read FEARLESS_ARCH again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..abi import Declared, ParamSpec
from . import claunch, process_gpu, trace
from .arg_keys import NoTorch, reader_for
from .arrays import bump_versions, torch_dtype_of, torch_write
from .borrow import PAIRWISE_MAX, Pairs, find_overlap, output_pairs
from .host_arrays import finish, stage
from .launch import keyword_error
from .partition import Partition
from .streams import keep_if_captured
from .target import Target
from .tensor import Tensor

# Prepared launches kept per dispatcher; a program that allocates new shapes without end starts
# over.
MAX_ENTRIES = 256

Key = tuple[Any, ...]
# Runs a prepared launch: (payload, stream).
Runner = Callable[[list[Any], Any], None]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A launch the slow path checked and prepared, valid for every call with the same key.

    `nbytes` is the byte extent of each array argument in parameter order (the borrow check's
    ranges are [pointer, pointer + nbytes)); `run(payload, stream)` launches it; `signature`
    and `ir` are the specialisation's, for inspection.
    """

    signature: Any
    ir: Any
    grid: tuple[int, int, int]
    nbytes: tuple[int, ...]
    run: Runner


# specialise(args, target) -> (the launch prepared for these arguments, this call's payload)
Specialise = Callable[[tuple[Any, ...], Target], tuple[Prepared, list[Any]]]

_ARRAY_KINDS = ("part", "tensor", "atomic")
_CUDA = Target.CUDA  # (a member read through its class costs a descriptor call)


class Dispatcher:
    """One kernel's prepared launches, by argument key, and the readers that make the key.

    The payload of a call is what its launch takes besides the prepared parts: on "sim" what
    the readers give for each argument, on "cuda" the pointers and scalar values in ABI order.
    `owner` is the object whose one host-copy warning a launch may give (the kernel).
    """

    def __init__(
        self, name: str, params: Sequence[Declared], specialise: Specialise, owner: Any
    ) -> None:
        self.name = name
        self.params = tuple(params)
        self.specialise = specialise
        self.owner = owner
        self.readers = tuple(reader_for(p) for p in self.params)
        outputs = [p.kind in ("part", "atomic") for p in self.params if p.kind in _ARRAY_KINDS]
        self.outputs = tuple(outputs)
        # the atomic parameters: written in place (a Part's torch memory is checked when it
        # is partitioned, and its version bumped when it is given back)
        self.atomics = tuple(i for i, p in enumerate(self.params) if p.kind == "atomic")
        self.pairs: Pairs | None = output_pairs(outputs) if len(outputs) <= PAIRWISE_MAX else None
        # what host-array staging copies: a read-only parameter's NumPy array
        self._staged = [
            ParamSpec(p.name, "slice", p.dtype, 0)
            if p.kind == "tensor" and p.dtype is not None
            else None
            for p in self.params
        ]
        self.entries: dict[Key, Prepared] = {}
        # The compiled warm path (claunch_tile.c's tile_warm): what it launches, by the same keys:
        # (byte extent of each array, the launch's C plan). `c` is made at the first store.
        self.c_entries: dict[Key, tuple[tuple[int, ...], Any]] = {}
        self.c: Any = None
        self.c_launch: Any = None  # claunch_tile.c's tile_warm(c, args, stream handle) -> 0
        self._c_torch: Any = None  # the torch.Tensor type `c` was made with
        self._c_forget: Any = None  # claunch_tile.c's tile_warm_forget(c)

    # --------------------------------------------------------------------------- launch

    def keyword_error(self, kwargs: dict[str, Any]) -> Exception:
        """E0061 for a call given keyword arguments: a kernel's are bound by position."""
        return keyword_error(self.name, [p.name for p in self.params], kwargs)

    def launched_in_c(self, args: tuple[Any, ...], target: Target, stream: Any) -> bool:
        """Whether the compiled warm path launched this call: on the GPU, on the default
        stream, outside `fl.graph` and ops' recording (runtime/trace.py); False: nothing was
        launched, and `launch` goes on."""
        c = self.c
        if c is None or stream is not None or target is not _CUDA or trace.recording:
            return False
        # None: the default stream, decided in C as streams.py decides it (-1 in fl.graph)
        return self.c_launch(c, args, None) == 0

    def launch(self, args: tuple[Any, ...], target: Target, stream: Any) -> None:
        """Launch a call the compiled warm path did not: prepared before, else the slow path."""
        entry, key, payload = self.lookup(args, target)
        if entry is None:
            return self._slow(args, target, key, stream)
        written = self._torch_written(args) if self.atomics else None
        keep_if_captured(args, stream)  # inside `fl.graph`: the graph holds the arrays
        if trace.recording and target is _CUDA:
            _record(self.name, entry.run, payload, stream)
        entry.run(payload, stream)
        if written:
            bump_versions(written)

    def _slow(self, args: tuple[Any, ...], target: Target, key: Key | None, stream: Any) -> None:
        """A launch the warm path did not recognise: prepared by the track (and kept under
        `key`), with NumPy arrays on "cuda" copied to the GPU for it."""
        staging = None
        if target.on_device:
            claunch.prefetch()  # the compiled launcher builds while the kernel compiles
            staging = stage(self.name, self._staged, args, self.owner)
        launched = staging.args if staging else args
        entry, payload = self.specialise(launched, target)
        if key is not None and staging is None:
            self.store(key, entry)
        written = self._torch_written(launched) if self.atomics else None
        keep_if_captured(args, stream)  # inside `fl.graph`: the graph holds the arrays
        if trace.recording and target.on_device:
            _record(self.name, entry.run, payload, stream)
        entry.run(payload, stream)
        if written:
            bump_versions(written)
        if staging is not None:
            finish(staging)  # the copies live until the kernel is done (and bump torch's)

    def _torch_written(self, args: Sequence[Any]) -> list[Any]:
        """The torch tensors the atomic arguments are (or are made over), once autograd's rule
        allows the writes (arrays.torch_write: a leaf that requires grad, in grad mode, is
        refused); the launch bumps their versions after, as an in-place op would."""
        written = []
        for i in self.atomics:
            if args[i] is not None:  # None: an optional array left out
                t = torch_write(args[i], f"argument `{self.params[i].name}`")
                if t is not None:
                    written.append(t)
        return written

    # ------------------------------------------------------------------------ warm path

    def lookup(
        self, args: Sequence[Any], target: Target
    ) -> tuple[Prepared | None, Key | None, list[Any]]:
        """(prepared launch, key, payload) of a call. The launch is None when the slow path
        must run: then the key is where to store what it prepares (None: nothing to store)."""
        if len(args) != len(self.readers):
            return None, None, []
        on_device = target.on_device
        parts: list[Any] = [target]
        starts: list[int] = []
        payload: list[Any] = []
        for read, arg in zip(self.readers, args, strict=False):  # same length: checked above
            if not read(arg, on_device, parts, starts, payload):
                return None, None, payload
        key = tuple(parts)
        try:
            entry = self.entries.get(key)
        except TypeError:  # an unhashable Const value: never cached
            return None, None, payload
        if entry is None or not self._disjoint(starts, entry.nbytes):
            return None, key, payload
        return entry, key, payload

    def _disjoint(self, starts: list[int], nbytes: tuple[int, ...]) -> bool:
        """The borrow check of `check_borrows` on these ranges (an overlap: the slow path raises).

        The pairwise test first, as the SIMT launcher does: zero-size arrays pass it by
        accident, and `find_overlap` decides those."""
        pairs = self.pairs
        if pairs is not None:
            for o, j in pairs:
                if starts[j] < starts[o] + nbytes[o] and starts[o] < starts[j] + nbytes[j]:
                    break
            else:
                return True
        ends = [s + n for s, n in zip(starts, nbytes, strict=True)]
        return find_overlap(starts, ends, self.outputs, pairs) is None

    def store(self, key: Key, entry: Prepared) -> None:
        """Keep what the slow path prepared for `key` (a key `lookup` returned: hashable)."""
        if len(self.entries) >= MAX_ENTRIES:
            self.entries.clear()
            self.c_entries.clear()
            if self.c is not None:
                self._c_forget(self.c)  # its remembered last entry was one of them
        self.entries[key] = entry
        cplan = getattr(entry.run, "_cplan", None)
        if cplan is not None and key[0] is Target.CUDA:
            self.c_entries[key] = (entry.nbytes, cplan)
            torch = sys.modules.get("torch")
            if self.c is None or (torch is not None and self._c_torch is not torch.Tensor):
                self._make_c(torch.Tensor if torch is not None else NoTorch)

    def _make_c(self, torch_type: type) -> None:
        """The compiled warm path of this kernel (None: it has none here)."""
        self._c_torch = torch_type
        if self.pairs is None:
            return  # past PAIRWISE_MAX arrays the Python sweep decides
        kinds = tuple(_WARM_KINDS[p.kind] for p in self.params)
        wants = tuple(p.dtype if p.kind in _ARRAY_KINDS else None for p in self.params)
        self.c = claunch.tile_warm_plan(
            kinds,
            wants,
            self.pairs,
            self.c_entries,
            Partition,
            Tensor,
            torch_type,
            Target.CUDA,
            process_gpu.GPU,
            torch_dtype_of,
        )
        module = claunch.module()
        self.c_launch = module.tile_warm if module is not None else None
        self._c_forget = module.tile_warm_forget if module is not None else None


# An optional array (`Declared.optional`) is its array kind here: claunch_tile.c reads None in
# a Tensor slot as the array left out, as the readers do: key part None, no payload, start 0
# (the declared arrays keep their indices, which `pairs` index), and a pair with it overlaps
# nothing. None in a required slot makes a key no entry has, so the Python path refuses it.
_WARM_KINDS = {
    "part": claunch.WARM_PART,
    "tensor": claunch.WARM_TENSOR,
    "atomic": claunch.WARM_ATOMIC,
    "const": claunch.WARM_CONST,
    "scalar": claunch.WARM_SCALAR,
}


def _record(name: str, run: Runner, payload: list[Any], stream: Any) -> None:
    """Tell the trace recording on this thread (ops/_replay.py) of a GPU launch and its payload:
    a replay runs `run` again with the payload's pointers moved to its own tensors."""
    t = trace.current()
    if t is not None:
        if stream is None:
            t.launch(run, payload)
        else:
            t.refuse(f"`{name}` launched on a stream the call chose")
