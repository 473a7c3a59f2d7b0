"""wb.load_inline(): kernels from strings (notebook cells, quick experiments), with the same
cache, errors and fast defaults as kernel folders. Two forms:

    torch's:  load_inline(name, cpp_sources, cuda_sources, functions=[...] or {name: doc}, ...)
              exactly as torch.utils.cpp_extension.load_inline takes it (a pybind module of
              the functions; cpp_sources see torch/extension.h), so a KernelBench problem or a
              lecture notebook's call runs by changing the import;
    kwb's:    load_inline(name, cuda=..., cpp=..., functions=[...]): ops registered with the
              dispatcher, the CUDA part torch-free so an edit recompiles in about 2 s:

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

from kwb_store import layout
from kwb_store.fsutil import atomic_write_text

from . import device as devices
from .build_spec import build_spec
from .compile_cache import cache_root
from .kernel import Kernel
from .loader import (
    compiler_flags,
    flag_list,
    load_source,
    refuse_unsupported,
    torch_device,
)
from .sources import (
    KWB,
    PYBIND,
    KernelSource,
    binding_of,
    identifier,
    kwb_include_dirs,
    uses_torch_library,
)

_IDENT = re.compile(r"^[A-Za-z_]\w*$")


def _write_once(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)


def _texts(value, what: str) -> str | None:
    """torch's cpp_sources / cuda_sources: a string or a list of strings, joined by lines."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    items = list(value)
    if not all(isinstance(v, str) for v in items):
        raise TypeError(f"load_inline: {what} must be a string or a list of strings, got {value!r}")
    return "\n".join(items)


def _function_docs(functions) -> dict[str, str]:
    """torch's functions=: a name, a list of names, or {name: docstring}."""
    if functions is None:
        return {}
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, dict):
        docs = dict(functions)
    elif isinstance(functions, (list, tuple)):
        docs = {f: f for f in functions}
    else:
        raise ValueError(f"load_inline: functions must be a list of names or a dict {{name: docstring}}, got {type(functions).__name__}")  # noqa: TRY004 - load_inline refuses every bad argument with ValueError
    bad = [f for f in docs if not isinstance(f, str) or not _IDENT.match(f)]
    if bad:
        raise ValueError(f"load_inline: functions must be C++ identifiers, got {bad!r}")
    return docs


def load_inline(name: str, cpp_sources=None, cuda_sources=None, sycl_sources=None, functions=None, extra_cflags=None,
                extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None, extra_include_paths=None,
                build_directory=None, verbose: bool = False, with_cuda=None, with_sycl=None, is_python_module: bool = True,
                with_pytorch_error_handling: bool = True, keep_intermediates: bool = True, use_pch: bool = False,
                no_implicit_headers: bool = False, gil_not_used: bool = False, *, cuda: str | None = None,
                cpp: str | None = None, device=None,
                force: bool = False, cuda_includes_torch: bool = False,
                labels: dict[str, tuple[str, int]] | None = None) -> Kernel:
    """Compile C++/CUDA source strings and load them. Takes what torch.utils.cpp_extension.load_inline
    takes, in its order (torch's form), or kwb's cuda=/cpp= form.

    Torch's form: cpp_sources (a string or a list; torch/extension.h is included first unless
    no_implicit_headers), cuda_sources (torch/types.h, cuda.h and cuda_runtime.h first),
    functions (names, or {name: docstring}) bound in a pybind module, each wrapped in torch's
    error handling unless with_pytorch_error_handling=False; gil_not_used=True declares the
    module safe without the GIL (pybind11::mod_gil_not_used(), as torch 2.15's does). The
    Kernel returned holds the module's functions (k.<name>, k.module). use_pch: as torch's,
    off by default; True precompiles torch/extension.h once into kwb's cache (never into
    torch's install, as torch's use_pch does) and compiles the C++ part against it (a cell's
    C++ edit then recompiles in a fraction of the time), False (torch's default) compiles it
    without. Every parameter of torch's is here under its name, in its order, with its
    default; cpp_sources may be left out for kwb's form.
    extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths, build_directory,
    verbose, with_cuda and is_python_module are as in kwb's load(); sycl_sources,
    extra_sycl_cflags and with_sycl are refused.

    kwb's form: cuda= CUDA source (kernels and launchers; by default it sees CUDA headers and
    kwb_cuda.cuh only, cuda_includes_torch=True adds torch/extension.h to both parts, ~25x
    slower to compile); cpp= C++ with the functions to expose, taking and returning
    at::Tensor, over ATen, kwb_checks.h and kwb::current_stream(); functions= their names,
    registered as dispatcher ops with schemas inferred from the C++ signatures.

    name: the extension's (or the ops') name and the cache entry's.
    device: "cuda", "cpu" or None ("cuda" when there is CUDA source); with_cuda says the same.
    labels: what diagnostics call each part and the line its first line is, {"cuda": (label,
        first line), "cpp": ...}; the %%cuda magic passes ("%%cuda NAME", the cell's line).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"load_inline: name must be a non-empty string, got {name!r}")
    refuse_unsupported("load_inline", sycl_sources=sycl_sources, extra_sycl_cflags=extra_sycl_cflags, with_sycl=with_sycl)
    device = torch_device(with_cuda, device, "load_inline")
    flags = {"extra_cflags": compiler_flags(extra_cflags, "extra_cflags"),
             "extra_cuda_cflags": compiler_flags(extra_cuda_cflags, "extra_cuda_cflags"),
             "extra_ldflags": compiler_flags(extra_ldflags, "extra_ldflags")}
    includes = [Path(d).expanduser().resolve() for d in flag_list(extra_include_paths, "extra_include_paths")]
    root = Path(build_directory).expanduser() if build_directory is not None else cache_root()
    if cuda is not None or cpp is not None:
        if cpp_sources is not None or cuda_sources is not None:
            raise ValueError("load_inline: give torch's cpp_sources=/cuda_sources= or kwb's cpp=/cuda=, not both")
        torch_only = {"with_pytorch_error_handling": (with_pytorch_error_handling, True), "no_implicit_headers": (no_implicit_headers, False),
                      "is_python_module": (is_python_module, True), "gil_not_used": (gil_not_used, False),
                      "use_pch": (use_pch, False)}
        for arg, (value, default) in torch_only.items():
            if value != default:
                raise ValueError(f"load_inline: {arg}={value!r} belongs to torch's form (cpp_sources=, cuda_sources=); "
                                 "kwb's cpp=/cuda= form registers dispatcher ops")
        return _load_kwb_form(name, cuda, cpp, functions, device, verbose, force, cuda_includes_torch, labels, includes, root,
                              **flags)
    if cpp_sources is None:
        raise ValueError("load_inline: give cpp= source (kwb's form, with cuda= for CUDA code) or cpp_sources= (torch's "
                         "form) holding the functions to expose")
    return _load_torch_form(name, _texts(cpp_sources, "cpp_sources"), _texts(cuda_sources, "cuda_sources"),
                            _function_docs(functions), device, verbose, force, is_python_module, with_pytorch_error_handling,
                            no_implicit_headers, use_pch is True, labels, includes, root, gil_not_used=gil_not_used,
                            **flags)


def _part_folder(entry: Path, kind: str, *content) -> Path:
    """A folder per distinct text of one part: an edit to the CUDA part leaves the C++ part's
    path, and so its ninja command, as it was, and only the .cu recompiles (1.4 s instead of
    9.8 s: benchmarks/reference/workbench_choices.md)."""
    digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()[:16]
    folder = entry / "inline" / f"{kind}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write_part(folder: Path, user_name: str, text: str, wrapper_name: str, wrapper: str) -> tuple[Path, Path]:
    """The user's text verbatim (so diagnostics carry its own line numbers) and the wrapper that
    includes it, each written only when it changed (an unchanged file keeps ninja's mtime)."""
    user, wrapped = folder / user_name, folder / wrapper_name
    _write_once(user, text)
    _write_once(wrapped, wrapper.replace("@USER@", user.name))
    return user, wrapped


def _load_torch_form(name, cpp, cuda, functions: dict[str, str], device, verbose, force, is_python_module,
                     with_pytorch_error_handling, no_implicit_headers, use_pch, labels, includes, root, gil_not_used=False,
                     **flags) -> Kernel:
    ident = identifier(name)
    entry = layout.entry_dir(root, f"{ident}-inline")
    display: dict[str, tuple[str, int]] = {}
    # gil_not_used joins the folder's hash only when set: existing builds keep their folders
    folder = _part_folder(entry, "tcpp", cpp, functions, with_pytorch_error_handling, no_implicit_headers,
                          *(["gil_not_used"] if gil_not_used else []))
    wrap = "torch::wrap_pybind_function({f})" if with_pytorch_error_handling else "{f}"
    module_def = "".join(f'  m.def("{f}", {wrap.format(f=f)}, {json.dumps(doc)});\n' for f, doc in functions.items())
    prelude = "" if no_implicit_headers else "#include <torch/extension.h>\n"
    module_args = "TORCH_EXTENSION_NAME, m, pybind11::mod_gil_not_used()" if gil_not_used else "TORCH_EXTENSION_NAME, m"
    wrapper = f'{prelude}#include "@USER@"\n' + (f"\nPYBIND11_MODULE({module_args}) {{\n{module_def}}}\n" if functions else "")
    user, cpp_wrapper = _write_part(folder, f"{ident}.cpp", cpp, "main.cpp", wrapper)
    display[str(user)] = (f"<{(labels or {}).get('cpp', (f'load_inline {name!r} cpp_sources', 1))[0]}>",
                          (labels or {}).get("cpp", ("", 1))[1])
    parts = [(user, cpp_wrapper)]
    cuda_sources: list[Path] = []
    if cuda is not None:
        folder = _part_folder(entry, "tcu", cuda, no_implicit_headers)
        prelude = "" if no_implicit_headers else "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
        user, cu_wrapper = _write_part(folder, f"{ident}.cu", cuda, "cuda.cu", f'{prelude}#include "@USER@"\n')
        display[str(user)] = (f"<{(labels or {}).get('cuda', (f'load_inline {name!r} cuda_sources', 1))[0]}>",
                              (labels or {}).get("cuda", ("", 1))[1])
        parts.append((user, cu_wrapper))
        cuda_sources.append(cu_wrapper)
        if device is None:
            device = devices.CUDA  # torch's with_cuda=None: CUDA when there are CUDA sources
    binding = PYBIND if functions else binding_of([u for u, _ in parts])
    if binding is None or binding == KWB:
        raise ValueError("load_inline: name the functions to bind with functions=[...] (or {name: docstring}), "
                         "or define PYBIND11_MODULE or TORCH_LIBRARY blocks in cpp_sources")
    source = KernelSource(name=ident, folder=cpp_wrapper.parent, ident=f"{ident}-inline", cpp_sources=[cpp_wrapper],
                          cuda_sources=cuda_sources, include_dirs=[*includes, *kwb_include_dirs()], kind="inline",
                          display_paths=display, binding=binding, module_name=ident, python_module=is_python_module,
                          torch_library_units={w for u, w in parts if uses_torch_library(u)}, use_pch=use_pch)
    return load_source(build_spec(source, device, root, flags["extra_cflags"], flags["extra_cuda_cflags"], flags["extra_ldflags"]),
                       verbose, force)


def _load_kwb_form(name, cuda, cpp, functions, device, verbose, force, cuda_includes_torch, labels, includes, root,
                   **flags) -> Kernel:
    functions = list(functions or [])
    if cuda is None and cpp is None:
        raise ValueError("load_inline: give cpp= source (with the functions to expose), and cuda= source for CUDA code")
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
    entry = layout.entry_dir(root, f"{ident}-inline")

    cpp_sources: list[Path] = []
    cuda_sources: list[Path] = []
    display: dict[str, tuple[str, int]] = {}
    folders: list[Path] = []
    torch_prelude = "#include <torch/extension.h>\n" if cuda_includes_torch else ""
    if cpp is not None:
        folder = _part_folder(entry, "cpp", cpp, functions, cuda_includes_torch)
        folders.append(folder)
        wrapper = f'{torch_prelude}#include "kwb_inline.h"\n#include "@USER@"\n'
        if functions and cuda is not None:  # CUDA code: a CPU tensor is refused by name (kwb::CudaOnly)
            wrapper += "".join(f'\nstatic constexpr char kwb_op_{f}[] = "{f}";\n'
                               f"using kwb_cuda_only_{f} = kwb::CudaOnly<kwb_op_{f}, &{f}>;\n" for f in functions)
            registration = "".join(f'  m.def("{f}", TORCH_FN(kwb_cuda_only_{f}::call));\n' for f in functions)
        else:
            registration = "".join(f'  m.def("{f}", TORCH_FN({f}));\n' for f in functions)
        if functions:
            wrapper += f"\nKWB_LIBRARY(m) {{\n{registration}}}\n"
        user, wrapped = _write_part(folder, f"{ident}.cpp", cpp, f"{ident}_bindings.cpp", wrapper)
        cpp_sources.append(wrapped)
        label, first = (labels or {}).get("cpp", (f"load_inline {name!r} cpp", 1))
        display[str(user)] = (f"<{label}>", first)
    if cuda is not None:
        folder = _part_folder(entry, "cu", cuda, cuda_includes_torch)
        folders.append(folder)
        user, wrapped = _write_part(folder, f"{ident}.cu", cuda, f"{ident}_kernels.cu",
                                    f'{torch_prelude}#include "kwb_inline.cuh"\n#include "@USER@"\n')
        cuda_sources.append(wrapped)
        label, first = (labels or {}).get("cuda", (f"load_inline {name!r} cuda", 1))
        display[str(user)] = (f"<{label}>", first)

    # Each wrapper finds its user file beside it ("..." includes), so no part's folder is an
    # include path: another part's edit must not change this part's compile command.
    source = KernelSource(name=ident, folder=folders[0], ident=f"{ident}-inline", cpp_sources=cpp_sources,
                          cuda_sources=cuda_sources, include_dirs=[*includes, *kwb_include_dirs()], kind="inline",
                          display_paths=display)
    return load_source(build_spec(source, device, root, flags["extra_cflags"], flags["extra_cuda_cflags"], flags["extra_ldflags"],
                                  cuda_includes_torch), verbose, force)
