"""What a cubin says of its kernels' parameters: how many, and each one's offset and size in
bytes, from the ELF section `.nv.info.<kernel>` the compiler writes for the driver (its
EIATTR_KPARAM_INFO records). The launch checks the arguments against it, whatever the source's
text (macros, typedefs, templates) says. No torch, no GPU here.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_KPARAM_INFO = 0x17  # EIATTR_KPARAM_INFO: one record per parameter
_FIXED = {1, 2, 3}  # EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL: 4 bytes a record, the value inside
_SVAL = 4  # EIFMT_SVAL: a 2-byte length, then that many bytes


@dataclass(frozen=True)
class ParamSlot:
    index: int   # the parameter's position in the signature
    offset: int  # bytes from the start of the parameter block
    size: int    # bytes


class CubinError(ValueError):
    """Bytes that are not a cubin kwb can read."""


def _sections(data: bytes) -> dict[str, bytes]:
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise CubinError("its section table lies past its end (cut short?)")
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]
    found = {}
    for name_at, _type, _flags, _addr, offset, size, *_ in headers:
        start = names_offset + name_at
        end = data.find(b"\0", start)
        if end < 0:
            raise CubinError("a section name runs past its end (cut short?)")
        name = data[start:end].decode(errors="replace")
        found[name] = data[offset:offset + size]
    return found


def kernel_names(data: bytes) -> list[str]:
    """The kernels (entry functions) the cubin holds, as compiled (extern "C": as written)."""
    return sorted(name[len(".nv.info."):] for name in _sections(data) if name.startswith(".nv.info."))


def param_slots(data: bytes, kernel: str) -> list[ParamSlot] | None:
    """kernel's parameters in order, or None where the cubin has no record of them."""
    info = _sections(data).get(f".nv.info.{kernel}")
    if info is None:
        return None
    slots = []
    at = 0
    while at + 4 <= len(info):
        fmt, attr = info[at], info[at + 1]
        if fmt == _SVAL:
            (length,) = struct.unpack_from("<H", info, at + 2)
            value = info[at + 4:at + 4 + length]
            at += 4 + length
            if attr == _KPARAM_INFO and len(value) >= 12:
                ordinal, offset = struct.unpack_from("<HH", value, 4)
                (flags,) = struct.unpack_from("<I", value, 8)
                slots.append(ParamSlot(ordinal, offset, (flags >> 18) & 0x3FFF))
        elif fmt in _FIXED:
            at += 4
        else:
            raise CubinError(f"unknown record format {fmt} in .nv.info.{kernel}")
    return sorted(slots, key=lambda s: s.index)
