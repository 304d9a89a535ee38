# SPDX-License-Identifier: MIT
"""What the benchmark report needs to know of a shared object file: whether
it is a 64-bit ELF shared object, and its soname (DT_SONAME)."""

import struct

ET_DYN = 3
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_STRTAB, DT_SONAME = 0, 5, 14


class NotSharedObject(Exception):
    pass


def soname(path):
    """The soname of the 64-bit ELF shared object at path, or None if it has
    none.  Raises NotSharedObject if the file is not one, OSError if it
    cannot be read."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise NotSharedObject("not an ELF file")
    if data[4] != 2:
        raise NotSharedObject("a 32-bit ELF file; the benchmarks are 64-bit programs")
    order = {1: "<", 2: ">"}.get(data[5])
    if order is None:
        raise NotSharedObject("an ELF file of unknown byte order")
    try:
        e_type, = struct.unpack_from(order + "H", data, 16)
        e_phoff, = struct.unpack_from(order + "Q", data, 32)
        e_phentsize, e_phnum = struct.unpack_from(order + "HH", data, 54)
        # (p_type, p_offset, p_vaddr, p_filesz) of each program header
        headers = [struct.unpack_from(order + "I4xQQ8xQ", data, e_phoff + i * e_phentsize) for i in range(e_phnum)]
    except struct.error:
        raise NotSharedObject("a truncated ELF file") from None
    dynamic = [h for h in headers if h[0] == PT_DYNAMIC]
    if e_type != ET_DYN or not dynamic:
        raise NotSharedObject("an ELF file but not a shared object")

    _, offset, _, size = dynamic[0]
    entries = {}
    for pos in range(offset, min(offset + size, len(data) - 15), 16):
        tag, value = struct.unpack_from(order + "qQ", data, pos)
        if tag == DT_NULL:
            break
        entries.setdefault(tag, value)
    if DT_SONAME not in entries or DT_STRTAB not in entries:
        return None
    # DT_STRTAB is an address: the loadable segment that holds it says where
    # it is in the file.
    strtab = entries[DT_STRTAB]
    for p_type, p_offset, p_vaddr, p_filesz in headers:
        if p_type == PT_LOAD and p_vaddr <= strtab < p_vaddr + p_filesz:
            start = strtab - p_vaddr + p_offset + entries[DT_SONAME]
            end = data.find(b"\0", start)
            return data[start:end].decode(errors="replace") if end >= 0 else None
    return None
