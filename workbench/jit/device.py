"""Where kwb builds kernels and where their ops run: the one device policy, in choose().

Every part of kwb that picks a device (load, load_inline, check, bench, run, the CLI, the
magics, the notebooks) asks choose(); nothing else compares a request against the machine.
"""
from __future__ import annotations

from . import notices, toolchain
from .errors import KwbError, ToolchainError

CPU, CUDA = "cpu", "cuda"
DEVICES = (CPU, CUDA)


class NoGpuError(KwbError):
    """CUDA was asked for, to run something, where no GPU is visible."""


def gpu_visible() -> bool:
    return toolchain.gpu_available()


def cuda_build_problem() -> str | None:
    """Why this machine cannot build CUDA code (no nvcc, a CPU-only torch), or None."""
    return toolchain.cuda_unavailable_reason()


def normalize(device) -> str | None:
    """None, "cpu", "cuda" ("cuda:0"), or a torch.device -> None, "cpu" or "cuda"; anything else is
    a ValueError."""
    device = getattr(device, "type", device)  # torch.device("cuda:0") -> "cuda"
    if isinstance(device, str) and device.partition(":")[0] in DEVICES:
        return device.partition(":")[0]
    if device is None:
        return device
    raise ValueError(f"device must be 'cpu' or 'cuda' (or None for the best available), got {device!r}")


def choose(device=None, *, purpose: str = "build", built_for: str | None = None, what: str = "kernels") -> str:
    """The device to build for (purpose="build") or to run ops on (purpose="run").

    device None: "cuda" where a GPU is visible and (for a build) this machine can build CUDA
        code, else "cpu", with a one-time notice when a GPU is visible but CUDA cannot be
        built; to run ops built for the CPU only (built_for="cpu"): "cpu".
    device "cuda": a build needs nvcc and a CUDA build of torch (ToolchainError says which is
        missing); running needs a visible GPU (NoGpuError) and ops built for CUDA.
    device "cpu": always "cpu" (a CUDA build holds the CPU implementation too).
    what: the kernel (or kernels) named in the messages.
    """
    device = normalize(device)
    if purpose not in ("build", "run"):
        raise ValueError(f"purpose must be 'build' or 'run', got {purpose!r}")
    if purpose == "build":
        if device == CUDA:
            problem = cuda_build_problem()
            if problem is not None:
                raise ToolchainError(f"cannot build {what} for CUDA: {problem}.")
            return CUDA
        if device == CPU or not gpu_visible():
            return CPU
        problem = cuda_build_problem()
        if problem is None:
            return CUDA
        notices.once(f"cpu-only-{what}", f"kwb: building {what} for the CPU only: {problem}")
        return CPU
    if device == CUDA:
        if not gpu_visible():
            raise NoGpuError(f"cannot run {what} on cuda: no GPU is visible; use device='cpu'")
        if built_for == CPU:
            raise KwbError(f"{what} was built for the CPU only; load it with device='cuda' to run its CUDA code")
        return CUDA
    if device == CPU or built_for == CPU or not gpu_visible():
        return CPU
    return CUDA


def why_cpu() -> str | None:
    """Why choose() picks the CPU by default on this machine, in one sentence; None when it picks CUDA."""
    if not gpu_visible():
        return "no GPU is visible"
    problem = cuda_build_problem()
    return None if problem is None else f"a GPU is here, but CUDA kernels cannot be built: {problem}"
