"""What a cubin says each of its kernels uses: registers a thread, stack (local memory: spilled
registers, local arrays) a thread, static shared memory a block, the threads a block it requires,
and the register counts its warp groups move to with setmaxnreg, read from the ELF file itself
(the `.nv.info` attributes, the `.nv.shared.<kernel>` sections, what
`cuobjdump --dump-resource-usage` reports, and the USETMAXREG instructions of the sm_90 code);
and whether those setmaxnreg counts can ever be met in the block's registers. No GPU and no tool
is needed: the Tile track's cubins come from tileiras, which keeps ptxas's report to itself."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import ToolchainError

# .nv.info attributes (EIATTR_*), each (format u8, attribute u8, then by format) and each starting
# at a multiple of 4 bytes: format 4 a u16 size and that many bytes, in `.nv.info` (symbol index
# u32, value u32), in a kernel's own `.nv.info.<kernel>` as the attribute has it (REQNTID: x, y, z
# u32); formats 2 and 3 a u16 value; format 1 nothing (2 bytes of padding follow it)
_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE = 0x2F, 0x11, 0x12, 0x23
_STACK_ATTRS = (_FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE)
_REQNTID = 0x10
_SIZED, _NO_VALUE = 4, 1
_SYMTAB = 2
_RESERVED_SHARED = 1024

# sm_90's USETMAXREG (PTX's setmaxnreg), a 128-bit instruction read as two little-endian u64s,
# lo and hi: bits 0-11 of lo are 0x9c8 (bits 12-15 its predicate), bit 91 (27 of hi) is set,
# bits 72-73 (8-9 of hi) are 2 for TRY_ALLOC (setmaxnreg.inc, which tileiras retries until the
# block's pool has the registers) and 1 for DEALLOC (.dec), and bits 32-41 (of lo) are the
# register count. Found by flipping each bit of tileiras's instructions under `nvdisasm -b SM90`
# (any other value of those opcode bits is another instruction or none); checked against
# nvdisasm's text on every instruction of 281 sm_90 cubins (827,848 instructions, 896 of them
# USETMAXREG: all found, nothing else taken). Other archs encode their instructions otherwise.
_USETMAXREG_OPCODE, _USETMAXREG_INC, _USETMAXREG_DEC = 0x9C8, 2, 1
_WARP_GROUP = 128  # threads: setmaxnreg moves a warp group's registers together
_REGISTER_UNIT = 8  # registers a thread: what an SM gives a warp is a multiple of 8 x 32


@dataclass(frozen=True)
class KernelResources:
    """One kernel's use of the SM, as the cubin records it."""

    name: str
    registers: int  # a thread
    stack: int  # bytes a thread of local memory (spills, local arrays); 0: none
    shared: int  # bytes a block of static shared memory
    threads: int = 0  # a block, as the kernel requires (.reqntid); 0: any the launch gives
    # the register counts its setmaxnreg.inc / .dec instructions move a warp group to, one a site
    # in code order (sm_90 cubins only: () for other archs)
    setmaxnreg_inc: tuple[int, ...] = ()
    setmaxnreg_dec: tuple[int, ...] = ()

    def describe(self) -> str:
        stack = (
            f"{self.stack:,} bytes of stack a thread (local memory: spilled registers or "
            "local arrays)"
            if self.stack
            else "no stack (nothing spilled)"
        )
        return (
            f"{self.name}: {self.registers} registers a thread, {stack}, "
            f"{self.shared:,} bytes of shared memory a block"
        )


class _Section(NamedTuple):
    name: str
    kind: int
    offset: int
    size: int
    link: int


def kernel_resources(cubin: bytes) -> list[KernelResources]:
    """Each kernel of `cubin` (one `.text.<name>` section each), in section order."""
    try:
        sections = _sections(cubin)
        symbols = _symbol_indices(cubin, sections)
        by_name = {s.name: s for s in sections}
        info = by_name.get(".nv.info")
        attrs = _info_attributes(cubin[info.offset : info.offset + info.size] if info else b"")
        threads = {
            s.name.removeprefix(".nv.info."): _required_threads(cubin[s.offset : s.offset + s.size])
            for s in sections
            if s.name.startswith(".nv.info.")
        }
    except (struct.error, ValueError, IndexError, StopIteration) as exc:
        raise ToolchainError(f"the cubin could not be read as an ELF file: {exc}") from None
    # For sm_90 each kernel's shared section also holds the 1 KB the system reserves a block;
    # ptxas -v leaves it out, as here (measured: ptxas's 2,048 and 165,264 bytes against
    # sections of 3,072 and 166,288, from ptxas, nvJitLink and tileiras alike; sm_80's section
    # is ptxas's figure; other archs not measured, taken as they are)
    sm90 = _arch(cubin) == 90
    reserved = _RESERVED_SHARED if sm90 else 0
    found = []
    for s in sections:
        if not s.name.startswith(".text."):
            continue
        name = s.name.removeprefix(".text.")
        index = symbols.get(name)
        shared = by_name.get(f".nv.shared.{name}")
        inc, dec = _setmaxnreg(cubin[s.offset : s.offset + s.size]) if sm90 else ((), ())
        found.append(
            KernelResources(
                name,
                registers=attrs.get((index, _REGCOUNT), 0),
                stack=max(attrs.get((index, a), 0) for a in _STACK_ATTRS),
                shared=max(0, shared.size - reserved) if shared else 0,
                threads=threads.get(name, 0),
                setmaxnreg_inc=inc,
                setmaxnreg_dec=dec,
            )
        )
    return found


def unsatisfiable_setmaxnreg(kernel: KernelResources) -> str | None:
    """Why `kernel` can never finish a launch: its setmaxnreg.inc asks for more registers than
    its block holds; None when it may fit (or has no setmaxnreg.inc, or no fixed block size).

    A block's warp groups share the registers the launch gave it, threads x registers (the
    CTAPOOL of USETMAXREG); setmaxnreg.dec hands some back, and setmaxnreg.inc waits (tileiras's
    code retries it for ever) until the pool can raise its warp group to the count asked.
    tileiras's warp-specialised kernels raise their consumer groups (one or two: sparse MLA has
    both) and lower the producer group; which group reaches which instruction is up to branches
    on the warp index, beyond what this reads. So this counts the least the code can ask: one
    warp group at the smallest .inc count and every other thread at the smallest .dec count (or
    the launch's, if lower). When even that exceeds the pool, no group's .inc can return (the
    sparse MLA kernel at occupancy 2: 384 threads, 80 registers, .inc 224, .dec 32, hung on the
    H100). It flags no kernel that could run; a kernel whose two consumer groups raise
    themselves can still hang unflagged (sparse MLA at occupancy 1 asks 2 x 128 x 232 +
    128 x 32 = 63,488 of 64,512: fits, but 160 registers would not)."""
    if not kernel.setmaxnreg_inc or kernel.threads <= 0 or kernel.registers <= 0:
        return None
    unit = _REGISTER_UNIT
    registers = -(-kernel.registers // unit) * unit
    pool = kernel.threads * registers
    raised, group = min(kernel.setmaxnreg_inc), min(_WARP_GROUP, kernel.threads)
    others, lowered = kernel.threads - group, min((*kernel.setmaxnreg_dec, registers))
    need = group * raised + others * lowered
    if need <= pool:
        return None
    beside = f" with the other {others:,} threads at {lowered}" if others else ""
    return (
        f"{kernel.threads:,} threads at {registers} registers make a {pool:,}-register block, "
        f"and the warp group that raises itself to {raised} registers (setmaxnreg){beside} "
        f"would need {need:,}: the launch would never finish"
    )


def never_finishes(cubin: bytes) -> str | None:
    """Why a kernel of `cubin` can never finish a launch (`unsatisfiable_setmaxnreg`), None
    when each may."""
    for kernel in kernel_resources(cubin):
        if (why := unsatisfiable_setmaxnreg(kernel)) is not None:
            return why
    return None


def describe(cubin: bytes, arch: str) -> str:
    """`inspect`'s "resources" stage: a line a kernel."""
    lines = []
    for r in kernel_resources(cubin):
        lines.append(r.describe())
        if hang := unsatisfiable_setmaxnreg(r):
            lines.append(f"// {r.name} hangs: {hang}")
    return f"// {arch}, as the cubin records it\n" + "\n".join(lines) + "\n"


def _arch(elf: bytes) -> int:
    """The SM version a CUDA ELF file is for (90 for sm_90), from its e_flags."""
    (flags,) = struct.unpack_from("<I", elf, 0x30)
    return (flags >> 8) & 0xFF


def _sections(elf: bytes) -> list[_Section]:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    (at,) = struct.unpack_from("<Q", elf, 0x28)
    entry, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, at + i * entry) for i in range(count)]
    names_at = raw[names][4]
    # a NOBITS section (shared memory) has a size and no bytes in the file
    return [_Section(_c_string(elf, names_at + h[0]), h[1], h[4], h[5], h[6]) for h in raw]


def _symbol_indices(elf: bytes, sections: list[_Section]) -> dict[str, int]:
    """Symbol name -> its index in the symbol table (what .nv.info's attributes name)."""
    symtab = next(s for s in sections if s.kind == _SYMTAB)
    strings = sections[symtab.link].offset
    names = {}
    for index in range(symtab.size // 24):  # Elf64_Sym: 24 bytes, st_name first
        (name_at,) = struct.unpack_from("<I", elf, symtab.offset + 24 * index)
        if name_at:
            names[_c_string(elf, strings + name_at)] = index
    return names


def _info_attributes(info: bytes) -> dict[tuple[int | None, int], int]:
    """(symbol index, attribute) -> value of `.nv.info`'s per-function attributes."""
    attrs: dict[tuple[int | None, int], int] = {}
    for fmt, attr, value in _attributes(info):
        if fmt == _SIZED and len(value) == 8:
            symbol, number = struct.unpack("<II", value)
            attrs[(symbol, attr)] = number
    return attrs


def _required_threads(info: bytes) -> int:
    """The threads a block of `.nv.info.<kernel>`'s kernel must have (REQNTID); 0: not fixed."""
    for fmt, attr, value in _attributes(info):
        if fmt == _SIZED and attr == _REQNTID and len(value) == 12:
            x, y, z = struct.unpack("<III", value)
            return x * y * z
    return 0


def _attributes(info: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(format, attribute, its bytes) of each attribute of an `.nv.info` section."""
    at = 0
    while at + 2 <= len(info):
        fmt, attr = info[at], info[at + 1]
        if fmt == _SIZED:
            (size,) = struct.unpack_from("<H", info, at + 2)
            yield fmt, attr, info[at + 4 : at + 4 + size]
            at += 4 + size
        else:
            yield fmt, attr, b"" if fmt == _NO_VALUE else info[at + 2 : at + 4]
            at += 2 if fmt == _NO_VALUE else 4
        at = -(-at // 4) * 4


def _setmaxnreg(code: bytes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The counts of the setmaxnreg.inc and .dec instructions of an sm_90 `.text.<kernel>`
    (a kernel's first launch reads them: a vectorised scan, about 0.1 ms for 10,000 of them)."""
    words = np.frombuffer(code, dtype="<u8", count=len(code) // 16 * 2).reshape(-1, 2)
    lo, hi = words[:, 0], words[:, 1]
    found = ((lo & 0xFFF) == _USETMAXREG_OPCODE) & ((hi >> 27) & 1 == 1)
    kinds, counts = (hi[found] >> 8) & 3, (lo[found] >> 32) & 0x3FF
    inc = tuple(int(c) for c in counts[kinds == _USETMAXREG_INC])
    dec = tuple(int(c) for c in counts[kinds == _USETMAXREG_DEC])
    return inc, dec


def _c_string(data: bytes, at: int) -> str:
    return data[at : data.index(b"\0", at)].decode("utf-8", "replace")
