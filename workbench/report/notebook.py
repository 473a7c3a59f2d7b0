"""What the walkthrough notebooks (notebooks/) show beside kwb's own reports: the machine a
run is on, a kernel's source with highlighting, and the memory traffic and launches an op
costs, eager against fused.

    from workbench import notebook as nb
    dev = nb.device(); nb.banner(dev)                       # says when timings are CPU timings
    nb.source(k, "relu_scale.cu", match="struct ReluScale") # one block of a file, highlighted
    nb.traffic(lambda x: torch.relu(x) * 1.5, x)            # the ATen ops run, bytes each moves
    nb.why_fuse({"eager": nb.traffic(ref, x), "kwb": nb.traffic(k.relu_scale, x, 1.5)}, 3.0e12)
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

LANGUAGES = {".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp", ".py": "python", ".md": "markdown"}


class Markdown(str):
    """A string a notebook renders as Markdown (and a terminal prints as it is)."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return str(self)


def device() -> str:
    """"cuda" where kwb builds for a GPU (one is visible, and nvcc is there), else "cpu": what
    wb.load picks, so a notebook's inputs land where its kernels run."""
    from ..jit import device as devices

    return devices.choose(None, what="the notebook's kernels")


def banner(dev: str) -> Markdown:
    """One line naming the machine, and on a CPU saying what the numbers below are."""
    from ..harness.results import environment

    env = environment(dev)
    if dev == "cuda":
        return Markdown(f"**Running on {env.device_name}** (torch {env.torch}, CUDA {env.cuda}, kwb {env.kwb_version}). "
                        "Timings below are GPU times per call (CUDA events, L2 flushed, median).")
    return Markdown(f"**CPU run: no GPU here** ({env.device_name}, torch {env.torch}, kwb {env.kwb_version}). Every op below runs its "
                    "CPU implementation, and **every timing below is a CPU timing** (kwb's C++ loop against "
                    "eager PyTorch and torch.compile on this CPU), not a GPU number. The committed notebook "
                    "shows the H100 run.")


@dataclass
class Source:
    """Lines of a source file, shown highlighted in a notebook."""
    path: Path
    first: int  # 1-based number of the first line shown
    text: str

    @property
    def last(self) -> int:
        return self.first + self.text.count("\n")

    def _repr_markdown_(self) -> str:
        lang = LANGUAGES.get(self.path.suffix, "")
        where = f"`{self.path.parent.name}/{self.path.name}`, lines {self.first}-{self.last}"
        return f"{where}\n\n```{lang}\n{self.text}\n```"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{self.path.name}:{self.first}-{self.last}\n{self.text}"


_CODE_NOISE = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|/\*.*?\*/|//[^\n]*', re.DOTALL)


def _block_end(lines: list[str], start: int) -> int:
    """Index of the line closing the first brace block opened at or after `start` (or the line
    ending the statement, for a declaration without a body). Braces in comments and in string
    and character literals do not count."""
    text = "\n".join(lines[start:])
    code = _CODE_NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text).split("\n")
    depth, opened = 0, False
    for i, line in enumerate(code, start):
        for ch in line:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
        if opened and depth <= 0:
            return i
        if not opened and line.rstrip().endswith(";"):
            return i
    return len(lines) - 1


def source(kernel, file: str, match: str | None = None, lines: tuple[int, int] | None = None,
           before: int = 0) -> Source:
    """A file of a kernel (a loaded Kernel, a kernel folder, or "common" for kernels/common),
    whole, or `lines` (first, last; 1-based), or the block that starts on the first line
    containing `match` (through its closing brace), with `before` lines above it."""
    if kernel == "common":
        from ..jit.sources import common_dir

        folder = common_dir()
    else:
        folder = Path(getattr(kernel, "folder", kernel))
    path = folder / file
    if not path.is_file():
        raise FileNotFoundError(f"file: {path} does not exist")
    all_lines = path.read_text().splitlines()
    if lines is not None:
        a, b = lines
        if not 1 <= a <= b <= len(all_lines):
            raise ValueError(f"lines: need 1 <= first <= last <= {len(all_lines)} for {path.name}, got {lines}")
        return Source(path, a, "\n".join(all_lines[a - 1:b]))
    if match is None:
        return Source(path, 1, "\n".join(all_lines))
    hits = [i for i, text in enumerate(all_lines) if match in text]
    if not hits:
        raise ValueError(f"match: no line of {path.name} contains {match!r}")
    start = max(0, hits[0] - before)
    end = _block_end(all_lines, hits[0])
    return Source(path, start + 1, "\n".join(all_lines[start:end + 1]))


@dataclass
class Traffic:
    """The ATen (or custom) ops one call ran, and the bytes each moves if it reads each tensor
    it is given once and writes each output once: a model of memory traffic (an op that
    re-reads its input, as a GEMM does, moves more)."""
    ops: list[tuple[str, int, int]] = field(default_factory=list)  # (op, bytes read, bytes written)

    @property
    def launches(self) -> int:
        return len(self.ops)

    @property
    def bytes(self) -> int:
        return sum(r + w for _, r, w in self.ops)

    def _repr_markdown_(self) -> str:
        rows = "\n".join(f"| `{op}` | {r / 1e6:,.1f} | {w / 1e6:,.1f} |" for op, r, w in self.ops)
        return (f"| op | MB read | MB written |\n|---|---:|---:|\n{rows}\n"
                f"| **{self.launches} ops** | | **{self.bytes / 1e6:,.1f} MB in all** |\n")

    def __repr__(self) -> str:
        return "\n".join(f"{op}: {r / 1e6:,.1f} MB read, {w / 1e6:,.1f} MB written" for op, r, w in self.ops) + \
            f"\n{self.launches} ops, {self.bytes / 1e6:,.1f} MB in all"


def _tensors(tree) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


# Ops that move no data: views under other names, and allocations (empty*: nothing written).
_NO_TRAFFIC = {"aten::detach", "aten::lift_fresh", "aten::_unsafe_view", "aten::alias",
               "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided"}


def _unique_bytes(tensors) -> int:
    """Bytes of distinct memory: a tensor passed twice (x * x) is read once, and a broadcast
    view (expand) is its storage, not its shape."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        if t.dim() == 0 or t.device.type == "meta":
            continue  # 0-dim: a scalar operand
        span = min(t.nbytes, t.untyped_storage().nbytes())
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        seen[key] = max(seen.get(key, 0), span)
    return sum(seen.values())


def traffic(fn, *args, **kwargs) -> Traffic:
    """Run fn(*args) once and record every op that reached a device kernel, with the bytes it
    reads and writes. Views (reshape, transpose, ...) and allocations move nothing and are left
    out; on a GPU each op left is at least one kernel launch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    record = Traffic()

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            out = func(*a, **kw)
            if getattr(func, "is_view", False) or func.name() in _NO_TRAFFIC:
                return out
            # arguments the op writes are outputs; an in-place op (relu_) also reads what it
            # writes, an out= argument and copy_'s destination are only written
            schema = func._schema.arguments
            written = {arg.name for arg in schema if arg.alias_info is not None and arg.alias_info.is_write}
            write_only = {arg.name for arg in schema if arg.name in written and (getattr(arg, "is_out", False) or func.name() == "aten::copy_")}
            given = dict(zip([arg.name for arg in schema], a), **kw)
            inputs = [v for n, v in given.items() if n not in write_only]
            outputs = [v for n, v in given.items() if n in written] + [out]
            record.ops.append((func.name().split("::")[-1], _unique_bytes(_tensors(inputs)),
                               _unique_bytes(_tensors(outputs))))
            return out

    with torch.no_grad(), _Record():
        fn(*args, **kwargs)
    return record


def why_fuse(traffics: dict[str, Traffic], ceiling: float) -> Markdown:
    """A table: for each way of computing one thing, its ops, its bytes, and the time those
    bytes take at `ceiling` bytes/s (the copy ceiling a bench run measured): the time no
    implementation moving those bytes can beat."""
    lines = ["| | ops (launches) | bytes moved | at the copy ceiling |", "|---|---:|---:|---:|"]
    for name, t in traffics.items():
        lines.append(f"| {name} | {t.launches} | {t.bytes / 1e6:,.1f} MB | {t.bytes / ceiling * 1e6:,.1f} us |")
    return Markdown("\n".join(lines) + f"\n\nCopy ceiling: {ceiling / 1e9:,.0f} GB/s, measured on this machine.")


def cuda_kernel_launches(fn, *args, **kwargs) -> int | None:
    """How many CUDA kernels one call of fn launches (torch.profiler), or None without a GPU."""
    from ..jit import device as devices

    if not devices.gpu_visible():
        return None
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():  # as the profiled call: torch.compile guards on grad mode
        fn(*args, **kwargs)  # first call outside: lazy init and autotuning are not the op's launches
    torch.cuda.synchronize()
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
        warnings.simplefilter("ignore", UserWarning)
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(*args, **kwargs)
            torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def fusion(kernel, op: str, shape: tuple, dtype: torch.dtype, dev: str, ceiling: float, seed: int = 0) -> Markdown:
    """why_fuse for one op of a loaded kernel: its spec's reference (the PyTorch a person would
    write) against the kernel's op, on the spec's inputs of `shape`, priced at `ceiling`."""
    from ..harness.cases import select_ops

    (entry,) = select_ops(kernel.spec.SPEC, [op], kernel.name)
    gen = torch.Generator().manual_seed(seed)
    args = entry.make_inputs(shape, dtype, dev, gen)
    table = why_fuse({"eager (the reference as written)": traffic(entry.reference, *args),
                      f"kwb: `{entry.kernel_op}`": traffic(getattr(kernel, entry.kernel_op), *args)},
                     ceiling)
    return Markdown(f"{op}, {dtype}, shape {tuple(shape)}:\n\n{table}")
