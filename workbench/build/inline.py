"""wb.load_inline(): kernels from strings (notebook cells, quick experiments), with the same
cache, errors and fast defaults as kernel folders.

    k = wb.load_inline("square",
        cuda='''
        __global__ void square_kernel(const float* x, float* y, int64_t n) {
          int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
          if (i < n) y[i] = x[i] * x[i];
        }
        void square_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
          square_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
        }''',
        cpp='''
        void square_launch(const float* x, float* y, int64_t n, cudaStream_t s);
        at::Tensor square(const at::Tensor& x) {
          at::Tensor y = at::empty_like(x);
          square_launch(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), kwb::current_stream(x));
          return y;
        }''',
        functions=["square"])
    y = k.square(x)

Each source is written verbatim to its own file in the cache (inline/<hash>/NAME.cu and NAME.cpp)
and compiled through a small wrapper that includes kwb's prelude first, so diagnostics carry
the line numbers of the string you wrote. Each function's op schema is inferred from its C++
signature (use at::Tensor, double, int64_t, bool).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from cache_tools import layout
from cache_tools.fsutil import atomic_write_text

from . import device as devices
from .kernel import Kernel
from .loader import cache_root, load_source
from .sources import KernelSource, common_dir, identifier

_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def _write_once(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)


def load_inline(name: str, cuda: str | None = None, cpp: str | None = None, functions: list[str] | None = None, *,
                device=None, verbose: bool = False, force: bool = False, cuda_includes_torch: bool = False,
                extra_cflags=(), extra_cuda_cflags=(), extra_ldflags=(),
                labels: dict[str, tuple[str, int]] | None = None) -> Kernel:
    """Compile C++/CUDA source strings into ops and load them.

    name: a name for the cache entry and the ops' namespace.
    cuda: CUDA source (kernels and launchers). By default it sees CUDA headers and kwb's
        kwb_cuda.cuh helpers only; cuda_includes_torch=True also includes torch/extension.h
        (tutorial-style code, ~25x slower to compile).
    cpp: C++ source with the functions to expose, taking and returning at::Tensor; it sees
        ATen, kwb_checks.h and kwb::current_stream(). Declare here what it calls in `cuda`.
    functions: names of functions in `cpp` to expose as ops (k.<name>(...)).
    device: "cuda", "cpu" or None ("cuda" when `cuda` is given).
    labels: what diagnostics call each part and the line its first line is, {"cuda": (label,
        first line), "cpp": ...}; the %%cuda magic passes ("%%cuda NAME", the cell's line).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"load_inline: name must be a non-empty string, got {name!r}")
    if cuda is None and cpp is None:
        raise ValueError("load_inline: give cpp= source (with the functions to expose), and cuda= source for CUDA code")
    functions = list(functions or [])
    bad = [f for f in functions if not isinstance(f, str) or not _IDENT.match(f)]
    if bad:
        raise ValueError(f"load_inline: functions must be C++ identifiers, got {bad!r}")
    if functions and cpp is None:
        raise ValueError(f"load_inline: functions={functions!r} must be defined or declared in cpp= (the op schema is inferred from the C++ signature)")
    if not functions and (cpp is None or "KWB_LIBRARY" not in cpp):
        raise ValueError("load_inline: name the functions to expose with functions=[...], or register ops yourself with KWB_LIBRARY(m) { ... } in cpp=")
    ident = identifier(name)
    device = devices.normalize(device)
    if cuda is not None:
        if device == devices.CPU:
            raise ValueError("load_inline: cuda= source was given but device='cpu'; drop the cuda= source or use device='cuda'")
        device = devices.CUDA  # a cuda= part is CUDA code: it builds with nvcc or not at all
    device = devices.choose(device, what=ident)
    if cuda is None:
        device = devices.CPU  # nothing to compile with nvcc; the ops run wherever their code does

    root = cache_root()
    entry = layout.entry_dir(root, f"{ident}-inline")

    def part_folder(kind: str, *content) -> Path:
        """A folder per distinct text of one part: an edit to the CUDA part leaves the C++ part's
        path, and so its ninja command, as it was, and only the .cu recompiles (1.4 s instead of
        9.8 s: benchmarks/reference/workbench_choices.md)."""
        digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()[:16]
        folder = entry / "inline" / f"{kind}-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    cpp_sources: list[Path] = []
    cuda_sources: list[Path] = []
    display: dict[str, tuple[str, int]] = {}
    folders: list[Path] = []
    if cpp is not None:
        folder = part_folder("cpp", cpp, functions)
        folders.append(folder)
        user = folder / f"{ident}.cpp"
        _write_once(user, cpp)
        registration = "".join(f'  m.def("{f}", TORCH_FN({f}));\n' for f in functions)
        wrapper = f'#include "kwb_inline.h"\n#include "{user.name}"\n'
        if functions:
            wrapper += f"\nKWB_LIBRARY(m) {{\n{registration}}}\n"
        wrapped = folder / f"{ident}_bindings.cpp"
        _write_once(wrapped, wrapper)
        cpp_sources.append(wrapped)
        label, first = (labels or {}).get("cpp", (f"load_inline {name!r} cpp", 1))
        display[str(user)] = (f"<{label}>", first)
    if cuda is not None:
        folder = part_folder("cu", cuda, cuda_includes_torch)
        folders.append(folder)
        user = folder / f"{ident}.cu"
        _write_once(user, cuda)
        prelude = "#include <torch/extension.h>\n" if cuda_includes_torch else ""
        wrapped = folder / f"{ident}_kernels.cu"
        _write_once(wrapped, f'{prelude}#include "kwb_inline.cuh"\n#include "{user.name}"\n')
        cuda_sources.append(wrapped)
        label, first = (labels or {}).get("cuda", (f"load_inline {name!r} cuda", 1))
        display[str(user)] = (f"<{label}>", first)

    # Each wrapper finds its user file beside it ("..." includes), so no part's folder is an
    # include path: another part's edit must not change this part's compile command.
    source = KernelSource(name=ident, folder=folders[0], ident=f"{ident}-inline", cpp_sources=cpp_sources,
                          cuda_sources=cuda_sources, include_dirs=[common_dir()], kind="inline",
                          display_paths=display)
    return load_source(source, device, verbose, force, extra_cflags, extra_cuda_cflags, extra_ldflags, cuda_includes_torch)
