"""What each compiled GPU function of a build uses: registers a thread, spilled bytes, stack,
static shared memory, and what follows from them on its architecture (the most threads a block
can have, the theoretical occupancy of a launch), as the CUDA occupancy calculator computes them.

The builder records the functions in the build's manifest (from ptxas's --resource-usage
report, workbench/jit/ptxas.py); `kwb build -v`, `kwb cache info` and `kwb bench` show them
(their table rows: cache_tools/resource_rows.py). No torch, no GPU here.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class ArchLimits:
    """One architecture's per-multiprocessor limits (CUDA C Programming Guide, table of
    technical specifications per compute capability; the occupancy calculator's granularities)."""

    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256          # registers are given to a warp in units of this many
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    smem_per_sm: int = 233472         # bytes the blocks of one SM may share (228 KiB on sm_90)
    smem_unit: int = 128              # shared memory is given to a block in units of this many bytes
    smem_reserved_per_block: int = 1024  # taken by the system for every block (sm_80 and later)
    warp_size: int = 32


# Compute capability -> limits; an architecture not listed takes sm_90's.
ARCH_LIMITS = {
    "sm_70": ArchLimits(smem_per_sm=98304, smem_reserved_per_block=0),
    "sm_75": ArchLimits(max_warps_per_sm=32, max_blocks_per_sm=16, smem_per_sm=65536, smem_reserved_per_block=0),
    "sm_80": ArchLimits(smem_per_sm=167936),
    "sm_86": ArchLimits(max_warps_per_sm=48, max_blocks_per_sm=16, smem_per_sm=102400),
    "sm_87": ArchLimits(max_warps_per_sm=48, max_blocks_per_sm=16, smem_per_sm=167936),
    "sm_89": ArchLimits(max_warps_per_sm=48, max_blocks_per_sm=24, smem_per_sm=102400),
    "sm_90": ArchLimits(),
    "sm_100": ArchLimits(),
    "sm_120": ArchLimits(max_warps_per_sm=48, max_blocks_per_sm=24, smem_per_sm=102400),
}


def limits_for(arch: str) -> ArchLimits:
    """The limits of 'sm_90' (or '9.0', 'sm_90a')."""
    arch = arch.strip().lower()
    if "." in arch:
        major, minor = arch.split(".", 1)
        arch = f"sm_{major}{minor}"
    return ARCH_LIMITS.get(arch.rstrip("af"), ARCH_LIMITS["sm_90"])


@dataclass(frozen=True)
class FunctionResources:
    """One compiled GPU function (a kernel) on one architecture, as ptxas reported it."""

    name: str           # demangled where a demangler was found, else as compiled
    mangled: str
    source: str         # the .cu (or .cpp) file it was compiled from
    arch: str           # "sm_90"
    registers: int      # a thread
    spill_stores: int   # bytes a thread spills to local memory
    spill_loads: int
    stack_bytes: int    # a thread's stack frame (local arrays, spills)
    static_smem: int    # bytes of __shared__ a block, besides what the launch asks for
    constant_bytes: int  # cmem[0]: the kernel's parameters and constants
    barriers: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0

    def max_threads_per_block(self) -> int:
        """cudaFuncAttributes::maxThreadsPerBlock: as many warps as the register file holds at
        this register count, at most the architecture's block limit."""
        lim = limits_for(self.arch)
        warps = _warps_by_registers(self.registers, lim)
        return min(lim.max_threads_per_block, warps * lim.warp_size)

    def occupancy(self, block_threads: int, dynamic_smem: int = 0) -> float:
        """Theoretical occupancy of a launch of block_threads threads a block: resident warps
        over the SM's maximum, 0.0 when the block cannot launch at all."""
        return occupancy(self.registers, self.static_smem + dynamic_smem, block_threads, self.arch)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> FunctionResources | None:
        """None unless data holds every field with the right type."""
        if not isinstance(data, dict):
            return None
        values = {}
        for f in fields(cls):
            value = data.get(f.name)
            want = str if f.type == "str" else int
            if not isinstance(value, want) or isinstance(value, bool):
                if f.name == "barriers" and value is None:
                    continue
                return None
            values[f.name] = value
        return cls(**values)


def _warps_by_registers(registers: int, lim: ArchLimits) -> int:
    """How many warps the register file holds at `registers` a thread."""
    if registers <= 0:
        return lim.max_warps_per_sm
    per_warp = math.ceil(registers * lim.warp_size / lim.register_unit) * lim.register_unit
    return min(lim.max_warps_per_sm, lim.registers_per_sm // per_warp)


def resident_blocks(registers: int, smem_bytes: int, block_threads: int, arch: str = "sm_90") -> int:
    """Blocks of one launch resident on an SM at once: the least of what the warps, the
    registers, the shared memory and the block slots allow (the occupancy calculator's rule)."""
    lim = limits_for(arch)
    if block_threads <= 0 or block_threads > lim.max_threads_per_block or registers > lim.max_registers_per_thread:
        return 0
    warps_per_block = math.ceil(block_threads / lim.warp_size)
    by_warps = lim.max_warps_per_sm // warps_per_block
    by_registers = _warps_by_registers(registers, lim) // warps_per_block
    smem = math.ceil((smem_bytes + lim.smem_reserved_per_block) / lim.smem_unit) * lim.smem_unit
    by_smem = lim.smem_per_sm // smem if smem > 0 else lim.max_blocks_per_sm
    return max(0, min(lim.max_blocks_per_sm, by_warps, by_registers, by_smem))


def occupancy(registers: int, smem_bytes: int, block_threads: int, arch: str = "sm_90") -> float:
    """Resident warps of a launch over the SM's maximum, in [0, 1]."""
    lim = limits_for(arch)
    blocks = resident_blocks(registers, smem_bytes, block_threads, arch)
    return blocks * math.ceil(max(block_threads, 0) / lim.warp_size) / lim.max_warps_per_sm


def functions_of(manifest_resources) -> list[FunctionResources]:
    """The functions a manifest's `resources` field holds (damaged entries skipped)."""
    items = manifest_resources.get("functions", []) if isinstance(manifest_resources, dict) else []
    found = [FunctionResources.from_dict(d) for d in items if isinstance(d, dict)]
    return [f for f in found if f is not None]
