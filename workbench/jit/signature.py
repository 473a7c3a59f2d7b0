"""A __global__ function's parameters as its source declares them, for checking a launch's
arguments: `const float* __restrict__ x` is a pointer to float32, `int n` a 4-byte integer.

Read from the text (comments removed), not compiled: a type this cannot name (a typedef, a
template parameter, a struct) is kept as its text with no dtype, and the launch then checks only
what the cubin says (cubin.param_slots: each parameter's size). No torch here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# base type -> (torch dtype name, struct format of a scalar, size in bytes)
_SCALARS = {
    "float": ("float32", "f", 4), "double": ("float64", "d", 8),
    "__half": ("float16", "e", 2), "half": ("float16", "e", 2),
    "__nv_bfloat16": ("bfloat16", None, 2), "nv_bfloat16": ("bfloat16", None, 2),
    "int": ("int32", "i", 4), "signed": ("int32", "i", 4), "signed int": ("int32", "i", 4), "int32_t": ("int32", "i", 4),
    "unsigned": ("uint32", "I", 4), "unsigned int": ("uint32", "I", 4), "uint32_t": ("uint32", "I", 4),
    "long": ("int64", "q", 8), "long int": ("int64", "q", 8), "long long": ("int64", "q", 8),
    "long long int": ("int64", "q", 8), "int64_t": ("int64", "q", 8), "ptrdiff_t": ("int64", "q", 8),
    "unsigned long": ("uint64", "Q", 8), "unsigned long long": ("uint64", "Q", 8), "uint64_t": ("uint64", "Q", 8),
    "size_t": ("uint64", "Q", 8),
    "short": ("int16", "h", 2), "short int": ("int16", "h", 2), "int16_t": ("int16", "h", 2),
    "unsigned short": ("uint16", "H", 2), "uint16_t": ("uint16", "H", 2),
    "char": ("int8", "b", 1), "signed char": ("int8", "b", 1), "int8_t": ("int8", "b", 1),
    "unsigned char": ("uint8", "B", 1), "uint8_t": ("uint8", "B", 1),
    "bool": ("bool", "?", 1),
}
# vector types a pointer may point at: element dtype and the alignment the pointer needs (CUDA's
# vector_types.h: n elements' size for 1, 2 and 4 up to 16 bytes; a 3-vector its element's)
_VECTORS = {f"{t}{n}": (_SCALARS[t][0], _SCALARS[t][2] if n == 3 else min(_SCALARS[t][2] * n, 16))
            for t in ("float", "double", "int", "char", "short", "long") for n in (1, 2, 3, 4)}
_VECTORS.update({"uint4": ("uint32", 16), "uint2": ("uint32", 8), "__half2": ("float16", 4), "half2": ("float16", 4),
                 "__nv_bfloat162": ("bfloat16", 4), "nv_bfloat162": ("bfloat16", 4)})
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__", "struct"}
_TYPE_WORDS = {w for t in _SCALARS for w in t.split()} | set(_VECTORS)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][\w:]*")


@dataclass(frozen=True)
class Param:
    name: str
    type: str                 # as written, qualifiers dropped: "float*", "int", "MyStruct"
    pointer: bool
    dtype: str | None         # a pointer's element dtype or a scalar's ("float32"); None: not known
    fmt: str | None = None    # struct format of a scalar ("f", "q"); None: not a known scalar
    size: int | None = None   # a scalar's bytes (8 for any pointer)
    align: int = 1            # the alignment a pointer's data needs (16 for float4*)

    def describe(self) -> str:
        return f"{self.type} {self.name}".strip()


def strip_comments(source: str) -> str:
    return _COMMENTS.sub(" ", source)


def _balanced(text: str, start: int) -> int:
    """Index of the ')' closing the '(' at start."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and p.strip() != "void"]


def _param(text: str, position: int) -> Param:
    text = re.sub(r"\s*=.*$", "", text)  # a default value
    stars = text.count("*") + text.count("&")
    words = [w for w in _WORD.findall(text) if w not in _QUALIFIERS]
    words = [w.removeprefix("std::").removeprefix("cuda::std::") for w in words]
    named = len(words) >= 2 and words[-1] not in _TYPE_WORDS  # `unsigned char` alone is a type, no name
    name = words[-1] if named else f"arg{position}"
    base = " ".join(words[:-1] if named else words)
    type_text = base + "*" * stars
    if stars:
        if base == "void":
            return Param(name, type_text, True, None, size=8)
        if base in _VECTORS:
            dtype, align = _VECTORS[base]
            return Param(name, type_text, True, dtype, size=8, align=align)
        known = _SCALARS.get(base)
        return Param(name, type_text, True, known[0] if known else None, size=8, align=known[2] if known else 1)
    known = _SCALARS.get(base)
    if known:
        return Param(name, type_text, False, known[0], known[1], known[2])
    return Param(name, type_text, False, None)


def find(source: str, kernel: str) -> list[Param] | None:
    """The parameters of __global__ `kernel` in source, or None where no such definition is found."""
    text = strip_comments(source)
    for m in re.finditer(rf"\b{re.escape(kernel)}\s*\(", text):
        head = text[max(0, text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start())):m.start()]
        if "__global__" not in head:
            continue
        end = _balanced(text, m.end() - 1)
        if end < 0:
            return None
        return [_param(p, i) for i, p in enumerate(_split_params(text[m.end():end]))]
    return None
