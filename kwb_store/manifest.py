"""The manifest of one finished kwb build: the only description of a build on disk.

The builder (workbench.jit.builder) writes one beside each library, last, so its presence
means the library is whole; everything else (the warm load, `kwb cache`, reports) reads it
through `Manifest.read`. A file that is not a whole manifest of this format reads as None,
never as a half-filled object. `library_problem` checks a library (or cubin) against its
manifest before anything loads it. No torch import here.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

from .fsutil import atomic_write_text, sha256_file

FORMAT = 1  # bump when the manifest or the build recipe changes meaning

# What a field's annotation admits in JSON (a float field may hold an integer).
_JSON_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "dict": (dict,)}


@dataclass
class Manifest:
    """What went into a build, where its library is, and how the build went."""

    name: str               # the kernel's (or load_inline's) name
    kind: str               # "kernel" or "inline"
    ident: str              # the cache entry's name: kwb_<ident>
    device: str             # "cpu" or "cuda"
    folder: str             # the kernel's folder
    base: str               # hash of what is known before compiling (config, sources)
    key: str                # base plus the headers the compiler reported
    library: str            # the library's file name, beside the manifest
    library_size: int
    library_sha256: str
    sources: dict           # path -> sha256
    headers: dict           # path -> sha256: every header the compiler read, but the toolchain's
    config: dict            # the build config's fingerprint: device, flags, archs, versions
    compilers: dict         # {"cxx": path, "nvcc": path or None}
    built_at: float         # seconds since the epoch
    build_seconds: float
    build_log: str
    warnings: int = 0
    binding: str = "kwb"    # how it binds to Python: "kwb", "pybind" or "torch_library"
    # {"functions": [...]}: each GPU function's registers, spills, shared memory (kwb_store.resources)
    resources: dict = field(default_factory=dict)
    format: int = FORMAT

    @property
    def versions(self) -> dict:
        """python, torch, torch_git, torch_cuda, cxx, nvcc, kwb and kwb_format of the build."""
        return self.config.get("versions", {})

    @property
    def archs(self) -> list[str]:
        return list(self.config.get("archs", []))

    def flags(self, which: str) -> list[str]:
        """"cflags", "cuda_cflags" or "ldflags" as the build used them."""
        return list(self.config.get(which, []))

    def to_dict(self) -> dict:
        return asdict(self)

    def write(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, data) -> Manifest | None:
        """None unless data is a whole manifest of this format, every field of its type."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        values = {}
        for f in fields(cls):
            if f.name not in data:
                if f.default is not MISSING or f.default_factory is not MISSING:  # newer than the manifest: its default
                    continue
                return None
            value = data[f.name]
            if not isinstance(value, _JSON_TYPES.get(f.type, ())) or isinstance(value, bool):
                return None
            values[f.name] = value
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        return cls.read_why(path)[0]

    @classmethod
    def read_why(cls, path: Path) -> tuple[Manifest | None, str]:
        """(the manifest, "") or (None, why the file is not one: "is not JSON", ...). A
        manifest of another format is None with no reason: it is not damaged, only older."""
        try:
            text = Path(path).read_text()
        except OSError as e:
            return None, f"cannot be read ({e.strerror})"
        try:
            data = json.loads(text)
        except ValueError:
            return None, "is not JSON"
        manifest = cls.from_dict(data)
        if manifest is not None:
            return manifest, ""
        if isinstance(data, dict) and "format" in data and data["format"] != FORMAT:
            return None, ""
        return None, "is not a whole manifest (a field missing or of the wrong type)"


_verified: set[tuple[str, int, int]] = set()


def library_problem(library: Path, manifest: Manifest) -> str | None:
    """Why a cached library must not be loaded (its size, or the sha256 of its bytes, differs
    from what its build wrote), or None. A library cut short crashed every load with SIGBUS; a
    patched one loaded and computed wrong values. The hash is taken once per process per file
    version (a 1.5 MB CUDA build: ~3 ms)."""
    try:
        st = library.stat()
    except OSError as e:
        return f"{library} cannot be read ({e.strerror})"
    if st.st_size != manifest.library_size:
        return f"{library.name} is {st.st_size} bytes, its build wrote {manifest.library_size} (damaged)"
    ident = (str(library), st.st_size, st.st_mtime_ns)
    if ident not in _verified:
        try:
            digest = sha256_file(library)
        except OSError as e:
            return f"{library} cannot be read ({e.strerror})"
        if digest != manifest.library_sha256:
            return f"{library.name}'s bytes differ from what its build wrote (sha256; damaged)"
        _verified.add(ident)
    return None
