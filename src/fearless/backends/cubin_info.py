"""What a cubin says each of its kernels uses: registers a thread, stack (local memory: spilled
registers, local arrays) a thread, and static shared memory a block, read from the ELF file
itself (the `.nv.info` attributes and the `.nv.shared.<kernel>` sections, what
`cuobjdump --dump-resource-usage` reports). No GPU and no tool is needed: the Tile track's
cubins come from tileiras, which keeps ptxas's report to itself."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import ToolchainError

# .nv.info attributes (EIATTR_*), each (format u8, attribute u8, then by format): format 4 a u16
# size and that many bytes, here (symbol index u32, value u32); formats 2 and 3 a u16 value;
# format 1 nothing
_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE = 0x2F, 0x11, 0x12, 0x23
_STACK_ATTRS = (_FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE)
_SIZED, _NO_VALUE = 4, 1
_SYMTAB = 2
_RESERVED_SHARED = 1024


@dataclass(frozen=True)
class KernelResources:
    """One kernel's use of the SM, as the cubin records it."""

    name: str
    registers: int  # a thread
    stack: int  # bytes a thread of local memory (spills, local arrays); 0: none
    shared: int  # bytes a block of static shared memory

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
    except (struct.error, ValueError, IndexError, StopIteration) as exc:
        raise ToolchainError(f"the cubin could not be read as an ELF file: {exc}") from None
    # For sm_90 each kernel's shared section also holds the 1 KB the system reserves a block;
    # ptxas -v leaves it out, as here (measured: ptxas's 2,048 and 165,264 bytes against
    # sections of 3,072 and 166,288, from ptxas, nvJitLink and tileiras alike; sm_80's section
    # is ptxas's figure; other archs not measured, taken as they are)
    reserved = _RESERVED_SHARED if _arch(cubin) == 90 else 0
    found = []
    for s in sections:
        if not s.name.startswith(".text."):
            continue
        name = s.name.removeprefix(".text.")
        index = symbols.get(name)
        shared = by_name.get(f".nv.shared.{name}")
        found.append(
            KernelResources(
                name,
                registers=attrs.get((index, _REGCOUNT), 0),
                stack=max(attrs.get((index, a), 0) for a in _STACK_ATTRS),
                shared=max(0, shared.size - reserved) if shared else 0,
            )
        )
    return found


def describe(cubin: bytes, arch: str) -> str:
    """`inspect`'s "resources" stage: a line a kernel."""
    lines = [r.describe() for r in kernel_resources(cubin)]
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
    at = 0
    while at + 2 <= len(info):
        fmt, attr = info[at], info[at + 1]
        if fmt == _SIZED:
            (size,) = struct.unpack_from("<H", info, at + 2)
            if size == 8:
                symbol, value = struct.unpack_from("<II", info, at + 4)
                attrs[(symbol, attr)] = value
            at += 4 + size
        else:
            at += 2 if fmt == _NO_VALUE else 4
    return attrs


def _c_string(data: bytes, at: int) -> str:
    return data[at : data.index(b"\0", at)].decode("utf-8", "replace")
