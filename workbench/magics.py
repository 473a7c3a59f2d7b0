"""Jupyter cell magics: a kernel from a notebook cell, compiled through wb.load_inline.

    %load_ext workbench

    %%cuda square_kernels --functions square
    __global__ void square_kernel(const float* x, float* y, int64_t n) { ... }
    void square_launch(const float* x, float* y, int64_t n, cudaStream_t s) { ... }
    // --- cpp ---
    void square_launch(const float* x, float* y, int64_t n, cudaStream_t s);
    at::Tensor square(const at::Tensor& x) { ... }

    %%cpp twice_kernels --functions twice
    at::Tensor twice(const at::Tensor& x) { return x * 2; }

    %%cuda_kernel relu_scale [--options '-DBLOCK=256 --use_fast_math'] [--arch 9.0] [-v]
    extern "C" __global__ void relu_scale(const float* x, float* y, float alpha, long long n) { ... }

Above the `// --- cpp ---` line: CUDA (kernels and launchers over raw pointers; CUDA headers
only, so an edit recompiles in seconds). Below it: C++ with ATen, the functions the ops are
made of. `--cpp VAR` takes that C++ from a notebook variable instead. The functions land in
the notebook's namespace, and NAME holds the Kernel. A failed build stops the cell (and a
"Run All") with the compiler's diagnostics at the cell's line numbers as its error, and no
traceback; a bad magic line is a UsageError. An unchanged cell is a cache hit; an edited one
rebuilds only what changed.

%%cuda_kernel compiles the cell with NVRTC (wb.cuda_kernel: a fraction of a second, no
dispatcher op) and binds NAME, its extern "C" __global__ function, to the raw kernel:
`relu_scale(grid, block, (x, y, 1.5, n))`.
"""
from __future__ import annotations

import argparse
import re
import shlex

CPP_MARKER = re.compile(r"^\s*//\s*-+\s*cpp\s*-+\s*$", re.MULTILINE)


class MagicUsageError(ValueError):
    pass


class CellBuildError(Exception):
    """A cell that did not compile. IPython shows what _render_traceback_ returns in place of
    a traceback: here, the compiler's diagnostics and nothing else."""

    def _render_traceback_(self) -> list[str]:
        return str(self).splitlines()


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting (exit_on_error=False still exits on
    a missing or unknown argument in Python 3.11)."""

    def error(self, message: str):
        raise MagicUsageError(message)


def _parser(magic: str) -> argparse.ArgumentParser:
    p = _Parser(prog=f"%%{magic}", add_help=False)
    p.add_argument("name")
    if magic == "cuda_kernel":
        p.add_argument("--options", default="", help="NVRTC options, quoted: --options '-DBLOCK=256 --use_fast_math'")
        p.add_argument("--arch", default=None,
                       help="the GPU architecture, 9.0 (default: KWB_CUDA_ARCH, else the visible GPU's, else sm_90)")
        p.add_argument("-v", "--verbose", action="store_true")
        return p
    p.add_argument("--functions", default="", help="comma-separated C++ functions to expose as ops")
    if magic == "cuda":
        p.add_argument("--cpp", default=None, help="a notebook variable holding the C++ part")
    p.add_argument("--flags", default="", help="extra compiler flags, quoted: --flags '-DN=4 -O2'")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--force", action="store_true")
    return p


def parse_line(magic: str, line: str) -> argparse.Namespace:
    words = shlex.split(line)
    # "--flags '-O3'": argparse takes a value starting with '-' for an option, so join them.
    for i in range(len(words) - 1):
        if words[i] in ("--flags", "--options"):
            words[i:i + 2] = [f"{words[i]}={words[i + 1]}"]
            break
    try:
        args = _parser(magic).parse_args(words)
    except MagicUsageError as e:
        raise MagicUsageError(f"%%{magic} {line}: {e}\n{_parser(magic).format_usage().strip()}") from None
    if magic == "cuda_kernel":
        return args
    args.functions = [f.strip() for f in args.functions.split(",") if f.strip()]
    if args.name in args.functions:
        raise MagicUsageError(f"%%{magic} {line}: NAME ({args.name!r}) holds the kernel, so it must differ from the "
                              f"functions' names; try {args.name + '_kernels'!r}")
    return args


def split_cell(cell: str) -> tuple[str, str | None, int]:
    """(cuda, cpp, first): the cell split at its `// --- cpp ---` line, and the number of the
    cell line the C++ part starts on (1-based; the cell's text, without the %%magic line)."""
    m = CPP_MARKER.search(cell)
    if not m:
        return cell, None, 0
    first = cell[: m.end()].count("\n") + 2  # the line after the marker's
    return cell[: m.start()], cell[m.end():].removeprefix("\n"), first


def run_cell(magic: str, line: str, cell: str, namespace: dict):
    """Compile a %%cuda / %%cpp cell and bind its functions into namespace. Returns (Kernel,
    "built in N s" or "cached"), or (None, the line saying why) for a %%cuda cell skipped on a machine that can
    neither build nor run CUDA; raises CellBuildError when it does not build."""
    from .jit import device as devices
    from .jit.errors import KwbError
    from .jit.inline import load_inline
    from .jit.kernel import loaded_kernels

    args = parse_line(magic, line)
    flags = shlex.split(args.flags)
    label = f"%%{magic} {args.name}"
    # Line N of a diagnostic is line N of the cell as Jupyter numbers it: the %%magic line is 1.
    if magic == "cpp":
        kw = {"cpp": cell, "device": "cpu", "extra_cflags": flags, "labels": {"cpp": (label, 2)}}
    else:
        cuda, cpp, first = split_cell(cell)
        labels = {"cuda": (label, 2), "cpp": (label, first + 1)}
        if args.cpp is not None:
            if cpp is not None:
                raise MagicUsageError("%%cuda: the C++ part comes from --cpp or from below a `// --- cpp ---` line, not both")
            if args.cpp not in namespace or not isinstance(namespace[args.cpp], str):
                raise MagicUsageError(f"%%cuda --cpp {args.cpp}: no string variable named {args.cpp!r} in the notebook")
            cpp, labels["cpp"] = namespace[args.cpp], (f"{label}: the C++ in {args.cpp}", 1)
        if not devices.gpu_visible():
            reason = devices.cuda_build_problem()
            if reason is not None:  # so a notebook still runs top to bottom on a laptop: its %%cpp cells do
                return None, f"%%cuda {args.name}: skipped on this machine, which has no GPU to run it and cannot build it: {reason}"
        # --flags reach both compilers: a -DN=4 must mean the same above and below the line
        kw = {"cuda": cuda, "cpp": cpp, "device": "cuda", "extra_cflags": flags, "extra_cuda_cflags": flags, "labels": labels}
    seen = {id(k) for k in loaded_kernels()}
    try:
        kernel = load_inline(args.name, functions=args.functions, verbose=args.verbose, force=args.force, **kw)
    except KwbError as e:
        raise CellBuildError(str(e)) from None
    namespace[args.name] = kernel
    for f in args.functions:
        namespace[f] = getattr(kernel, f)
    # cached: loaded before in this process (an unchanged or reverted cell), or from the disk cache
    compiled_now = kernel.build.compiled and id(kernel) not in seen
    status = f"built in {kernel.build.manifest.build_seconds:.1f} s" if compiled_now else "cached"
    return kernel, status


def run_kernel_cell(line: str, cell: str, namespace: dict):
    """Compile a %%cuda_kernel cell with NVRTC and bind NAME to the raw kernel. Returns (RawKernel,
    the line to print); raises CellBuildError when NVRTC rejects it."""
    from .jit.errors import KwbError
    from .jit.raw_kernel import cuda_kernel

    args = parse_line("cuda_kernel", line)
    try:
        kernel = cuda_kernel(cell, args.name, options=shlex.split(args.options), arch=args.arch, verbose=args.verbose,
                             label=f"%%cuda_kernel {args.name}", first_line=2)
    except KwbError as e:
        raise CellBuildError(str(e)) from None
    namespace[args.name] = kernel
    how = f"compiled with NVRTC in {kernel.compile_seconds:.2f} s" if kernel.compiled else "cached"
    own = [f for f in kernel.resources if f.name == args.name]
    regs = f"; {own[0].registers} registers, {own[0].spill_stores} bytes spilled" if own else ""
    return kernel, f"{kernel.signature()} ({kernel.arch}): {how}{regs}"


def load_ipython_extension(ipython) -> None:
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, cell_magic, magics_class

    @magics_class
    class KwbMagics(Magics):
        def _run(self, magic: str, line: str, cell: str):
            try:
                kernel, status = run_cell(magic, line, cell, self.shell.user_ns)
            except ValueError as e:  # MagicUsageError, and load_inline's checks of names and functions
                raise UsageError(str(e)) from None
            if kernel is None:
                print(status)
            else:
                print(f"{kernel.name} ({kernel.device}): {status}; ops: {', '.join(kernel.ops)}")

        @cell_magic
        def cuda(self, line: str, cell: str):
            """%%cuda NAME [--functions f,g] [--cpp VAR] [--flags '...'] [-v] [--force]"""
            return self._run("cuda", line, cell)

        @cell_magic
        def cuda_kernel(self, line: str, cell: str):
            """%%cuda_kernel NAME [--options '...'] [--arch 9.0] [-v]: a raw kernel through NVRTC."""
            try:
                _, status = run_kernel_cell(line, cell, self.shell.user_ns)
            except ValueError as e:
                raise UsageError(str(e)) from None
            print(status)

        @cell_magic
        def cpp(self, line: str, cell: str):
            """%%cpp NAME [--functions f,g] [--flags '...'] [-v] [--force]: CPU C++ with ATen."""
            return self._run("cpp", line, cell)

    ipython.register_magics(KwbMagics)
