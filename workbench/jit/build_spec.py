"""BuildSpec: the one value that describes a build, from the front doors (load, load_inline,
cuda_kernel, the CLI) to the compilers (flashinfer's jit/ idea: one spec carried everywhere).

The front doors only construct it (build_spec(), raw_kernel_spec()); everything downstream
(compile_cache.compile_cached, builder's and raw_kernel's compilers, loader.load_source) takes
it whole, so a new build setting is one field here, not one more argument threaded through
five signatures. Its source says which compiler builds it: a KernelSource (an extension's
files) goes to nvcc/ninja, a RawSource (one extern "C" __global__ function) to NVRTC.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kwb_store import layout

from . import device as devices
from . import toolchain
from .compile_cache import cache_root
from .errors import ToolchainError
from .sources import KWB, KernelSource, kwb_include_dirs

RAW_BINDING = "nvrtc"  # a raw kernel's binding kind, and its cache entry's prefix


@dataclass(frozen=True)
class RawSource:
    """One extern "C" __global__ function for NVRTC: CUDA text, or a .cu file read at each compile."""

    name: str  # the kernel's C identifier
    path: Path | None  # the .cu file; None: the text below
    text: str | None
    label: str  # what error messages call the source
    first_line: int  # the number of its first line (a notebook cell's magic line comes before it)
    include_dirs: tuple[Path, ...]  # the source's folder (or the working folder), the given ones, kwb's
    pre_includes: tuple[Path, ...] = ()  # -include FILE: hashed into the key like any header
    binding: str = RAW_BINDING

    @property
    def ident(self) -> str:
        return f"{RAW_BINDING}-{self.name}"


@dataclass(frozen=True)
class BuildSpec:
    source: KernelSource | RawSource  # name, sources, include folders, binding kind (kwb, pybind, TORCH_LIBRARY, nvrtc)
    device: str  # "cpu" or "cuda"
    root: Path  # the cache root the build goes under
    archs: tuple[str, ...] = ()  # CUDA architectures ("9.0"): the visible GPUs' unless KWB_CUDA_ARCH says; () for the CPU
    extra_cflags: tuple[str, ...] = ()  # as the compiler sees them (torch's strings already split)
    extra_cuda_cflags: tuple[str, ...] = ()  # nvcc's, or NVRTC's options
    extra_ldflags: tuple[str, ...] = ()
    cuda_includes_torch: bool = False  # load_inline's kwb form: torch/extension.h in the CUDA part too

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def nvrtc(self) -> bool:
        return isinstance(self.source, RawSource)

    @property
    def target(self) -> str:
        """What it is built for, as messages say it: "cuda", "cpu", "cuda, NVRTC"."""
        return f"{self.device}, NVRTC" if self.nvrtc else self.device

    @property
    def what(self) -> str:
        """How messages name the build: "relu_scale (cuda)"."""
        return f"{self.source.name} ({self.target})"

    @property
    def entry(self) -> Path:
        """The cache entry folder (manifests, libraries, the lock)."""
        return layout.entry_dir(self.root, self.source.ident)


def build_spec(source: KernelSource, device=None, root: Path | None = None, extra_cflags=(), extra_cuda_cflags=(),
               extra_ldflags=(), cuda_includes_torch: bool = False) -> BuildSpec:
    """The spec of building `source`: device None is kwb's choice (CUDA where a GPU and nvcc
    are here; a C++-only extension is a CPU build wherever it runs); root None is the default
    cache root (TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/<py>_<cu>)."""
    requested, chosen = device, devices.choose(device, what=source.name)
    if requested is None and not source.cuda_sources and not cuda_includes_torch and source.binding != KWB:
        chosen = devices.CPU  # nothing for nvcc
    archs = toolchain.cuda_archs() if chosen == devices.CUDA else ()
    return BuildSpec(source, chosen, root or cache_root(), tuple(archs), tuple(extra_cflags), tuple(extra_cuda_cflags),
                     tuple(extra_ldflags), cuda_includes_torch)


# --- NVRTC: wb.cuda_kernel's arguments, checked -------------------------------------------------------

def raw_kernel_spec(source, name: str, options=(), include_dirs=(), arch=None, label: str | None = None,
                    first_line: int = 1, root: Path | None = None) -> BuildSpec:
    """The spec of compiling the extern "C" __global__ function `name` of `source` (CUDA text,
    or the path of a .cu file) with NVRTC; each argument checked, a wrong one named."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"name must be the kernel's C identifier (its extern \"C\" __global__ function), got {name!r}")
    if isinstance(options, str):
        options = options.split()
    options = list(options or [])
    if not all(isinstance(o, str) for o in options):
        raise TypeError(f"options must be NVRTC options as strings, got {options!r}")
    bad = [o for o in options if o.startswith(("-arch", "--gpu-architecture"))]
    if bad:
        raise ValueError(f"options: give the architecture as arch= (or KWB_CUDA_ARCH), not {bad[0]!r}")
    options, from_options, pre_includes = _include_options(options)
    dirs = [Path(d).expanduser().resolve() for d in ([include_dirs] if isinstance(include_dirs, (str, Path))
                                                      else list(include_dirs or []))] + from_options
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))):
        path = Path(source).expanduser().resolve()  # read at each compile-or-find (raw_kernel.NvrtcCompiler.prepare)
        raw = RawSource(name, path, None, label or str(path), first_line, (path.parent, *dirs, *kwb_include_dirs()),
                        tuple(pre_includes))
    elif isinstance(source, str):
        # text: "..." includes resolve against the working folder (a notebook's), as for a file beside it
        raw = RawSource(name, None, source, label or f"<{name} source>", first_line,
                        (Path.cwd(), *dirs, *kwb_include_dirs()), tuple(pre_includes))
    else:
        raise TypeError(f"source must be CUDA C++ text or the path of a .cu file, got {type(source).__name__}")
    return BuildSpec(raw, devices.CUDA, root or cache_root(), (_one_arch(arch),), extra_cuda_cflags=tuple(options))


def _one_arch(arch) -> str:
    """'9.0': arch as given ('9.0', '90', 'sm_90a', '9.0+PTX'), else as CUDA builds choose
    (toolchain.cuda_archs: KWB_CUDA_ARCH, the visible GPU's, TORCH_CUDA_ARCH_LIST's first, sm_90)."""
    given = arch if arch is not None else toolchain.cuda_archs()[0]
    try:
        [one] = toolchain.parse_archs(str(given))
    except (ToolchainError, ValueError):
        raise ValueError(f"arch must name a GPU architecture such as '9.0', '90' or 'sm_90a', got {given!r}") from None
    return one.removesuffix("+PTX")


def _include_options(options: list[str]) -> tuple[list[str], list[Path], list[Path]]:
    """(the other options, -I / --include-path folders, -include / --pre-include files): the
    folders join include_dirs and the files are hashed, so headers they reach are in the key."""
    rest, dirs, files = [], [], []
    words = iter(options)
    for word in words:
        for flag, into in (("--include-path", dirs), ("-I", dirs), ("--pre-include", files), ("-include", files)):
            if word == flag:
                value = next(words, None)
                if value is None:
                    raise ValueError(f"options: {flag} needs a value")
            elif word.startswith(flag + "=") or (flag == "-I" and word.startswith("-I") and len(word) > 2):
                value = word[len(flag) + 1:] if word.startswith(flag + "=") else word[2:]
            else:
                continue
            into.append(Path(value).expanduser().resolve())
            break
        else:
            rest.append(word)
    return rest, dirs, files
