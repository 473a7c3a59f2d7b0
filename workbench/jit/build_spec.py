"""BuildSpec: the one value that describes an nvcc/ninja build, from the front doors (load,
load_inline, the CLI) to the builder (flashinfer's jit/ idea: one spec carried everywhere).

The front doors only construct it (build_spec()); everything downstream (builder.make_config,
find_cached, build, loader.load_source) takes it whole, so a new build setting is one field
here, not one more argument threaded through five signatures.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kwb_store import layout

from . import device as devices
from . import toolchain
from .compile_cache import cache_root
from .sources import KWB, KernelSource


@dataclass(frozen=True)
class BuildSpec:
    source: KernelSource  # name, sources, include folders, binding kind (kwb, pybind, TORCH_LIBRARY)
    device: str  # "cpu" or "cuda"
    root: Path  # the cache root the build goes under
    archs: tuple[str, ...] = ()  # CUDA architectures ("9.0"): the visible GPUs' unless KWB_CUDA_ARCH says; () for the CPU
    extra_cflags: tuple[str, ...] = ()  # as the compiler sees them (torch's strings already split)
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    cuda_includes_torch: bool = False  # load_inline's kwb form: torch/extension.h in the CUDA part too

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def what(self) -> str:
        """How messages name the build: "relu_scale (cuda)"."""
        return f"{self.source.name} ({self.device})"

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
