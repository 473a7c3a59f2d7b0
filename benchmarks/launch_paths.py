"""One fp32 add at 2^20 elements, the same work by five paths, as CUDA-graph replays timed in turns:
whether torch.compile's lead on the two-input maps comes from its code or from how it is built and
launched.

    kwb                   the shipped vector_add (nvcc, sm_90, launched by the CUDA runtime)
    torch.compile         Inductor's Triton kernel (sm_90a, launched by the driver)
    nvrtc sm_90           Inductor's shape in CUDA C++ (1024 floats a 128-thread block, two
                          16-byte vectors a thread 512 floats apart), NVRTC, launched by the driver
    nvrtc sm_90a          the same for sm_90a
    triton                the add in Triton, launched by Triton
    triton cubin, ...     its cubin (Triton's ptxas) launched by kwb's driver calls
    inductor module       torch.compile's generated module, its `call` used directly
    inductor cubin, ...   the cubin that module launches, launched by kwb's driver calls (and, with
                          --dump, its SASS and PTX written beside the graphs)
    inductor ptx          Inductor's own PTX for this add (saved at 2026-11-28, torch 2.11), loaded
                          by cuModuleLoadData and launched by kwb's driver calls: Triton's code,
                          kwb's launch

Each provider's output addresses are counted as its graph is captured (how many buffers its calls
write in turn), and kwb's is also run holding its last two outputs, so each call writes another
buffer than the call before.

Also torch.compile's generated module with its `call` used directly ("inductor module": Inductor's
launcher without Dynamo's and AOTAutograd's wrappers), and, with --case rmsnorm, the same three-way
test for RMSNorm bf16 4096 x 1024 (kwb, torch.compile, Inductor's module).

Timed in turns over 32 input copies (the inputs from HBM, 2.5-3% apart on the H100) and over 1
(the L2). If "inductor ptx" runs with compile, the code is what differs; if with kwb, the launch.

    python benchmarks/launch_paths.py [--case add|rmsnorm] [--copies 32,1] [--seconds 0.5] [--dump DIR]
"""
from __future__ import annotations

import argparse
import ctypes
import subprocess
from pathlib import Path

import torch
import triton
from in_turns import time_in_turns

import workbench as wb
from workbench.jit import cuda_driver as drv

N = 1 << 20
PTX = (Path(__file__).parent / "results/nvidia-h100-80gb-hbm3/2026-11-28-map-variants/inductor_ptx/"
       "DT72WFQF6NHWIZJDXJ44YQ2DEY6O2QBJHRZZCOY2CAX5YXCRZWNQ_triton_poi_fused_add_0.ptx")

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128) add_x2(const float4* __restrict__ a, const float4* __restrict__ b,
                                                         float4* __restrict__ out) {
  const unsigned i = blockIdx.x * 256 + threadIdx.x;  // in float4s: 1024 floats a block
  const float4 a0 = a[i], a1 = a[i + 128], b0 = b[i], b1 = b[i + 128];
  out[i] = make_float4(a0.x + b0.x, a0.y + b0.y, a0.z + b0.z, a0.w + b0.w);
  out[i + 128] = make_float4(a1.x + b1.x, a1.y + b1.y, a1.z + b1.z, a1.w + b1.w);
}
"""


def nvrtc_add(arch: str):
    k = wb.cuda_kernel(SOURCE, "add_x2", arch=arch)

    def add(a, b):
        out = torch.empty_like(a)
        k((N // 1024,), (128,), (a, b, out))
        return out
    return add


def ptx_add():
    """Inductor's PTX, launched as Triton launches it: (in0, in1, out, xnumel, two scratch pointers)."""
    device = torch.cuda.current_device()
    with drv.on_device(device):
        module = drv.load_module(PTX.read_bytes() + b"\0")
        func = drv.get_function(module, "triton_poi_fused_add_0")
    lib = drv.library()

    def add(a, b):
        out = torch.empty_like(a)
        args = [ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                ctypes.c_uint32(N), ctypes.c_void_p(0), ctypes.c_void_p(0)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in args])
        stream = torch.cuda.current_stream().cuda_stream
        with drv.on_device(device):
            drv.check(lib.cuLaunchKernel(func, N // 1024, 1, 1, 128, 1, 1, 0, stream, params, None), "cuLaunchKernel")
        return out
    add.module = module  # kept loaded while add lives
    return add


def triton_adds():
    """The add written in Triton (Inductor's block of 1024, 4 warps), launched by Triton's own
    launcher, and its cubin (Triton's ptxas) launched by kwb's driver calls."""
    import re

    import triton.language as tl

    @triton.jit
    def add_kernel(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs))

    def by_triton(a, b):
        out = torch.empty_like(a)
        add_kernel[(N // 1024,)](a, b, out, BLOCK=1024, num_warps=4)
        return out

    x = torch.zeros(N, device="cuda")
    compiled = add_kernel[(N // 1024,)](x, x, x, BLOCK=1024, num_warps=4)
    entry = compiled.asm["ptx"].split(".entry", 1)[1].split(")", 1)[0]
    kinds = re.findall(r"\.param \.(\w+)", entry)
    device = torch.cuda.current_device()
    with drv.on_device(device):
        module = drv.load_module(compiled.asm["cubin"])
        func = drv.get_function(module, compiled.metadata.name)
    lib = drv.library()

    def by_driver(a, b):
        out = torch.empty_like(a)
        args = [ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(out.data_ptr())]
        args += [ctypes.c_void_p(0)] * (len(kinds) - 3)  # Triton's scratch pointers
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in args])
        with drv.on_device(device):
            drv.check(lib.cuLaunchKernel(func, N // 1024, 1, 1, 128, 1, 1, compiled.metadata.shared,
                                         torch.cuda.current_stream().cuda_stream, params, None), "cuLaunchKernel")
        return out
    by_driver.module = module
    by_driver.cubin = compiled.asm["cubin"]
    print(f"triton's add: params {kinds}, shared {compiled.metadata.shared}, registers {getattr(compiled, 'n_regs', '?')}", flush=True)
    return by_triton, by_driver


def inductor_module(eager, inputs: tuple):
    """torch.compile's generated module for eager on inputs, its `call` used directly: Inductor's
    kernels and launcher without Dynamo's and AOTAutograd's wrappers around them."""
    from torch._inductor import config
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.utils import run_and_get_code

    with config.patch(fx_graph_cache=False):  # a cache hit would skip the code generation it records
        _, codes = run_and_get_code(torch.compile(eager, fullgraph=True, dynamic=False), *inputs)
    module = PyCodeCache.load(codes[-1])
    tensors = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]

    def call(*args):
        return module.call([args[i] for i in tensors])[0]
    call.module = module
    return call


def sass_of(binary: Path) -> str:
    """cuobjdump's SASS of a cubin or a library holding one (the cuobjdump Triton ships)."""
    tool = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
    run = subprocess.run([str(tool), "-sass", str(binary)], capture_output=True, text=True, check=False)
    return run.stdout or run.stderr


def inductor_cubin_add(module, dump: Path | None):
    """The cubin torch.compile's module launches for the add (Inductor's own build, from Triton's
    cache), launched by kwb's driver calls with Inductor's grid; with `dump`, its SASS beside the
    cubin of the Triton add written here (triton_adds) for comparison."""
    import glob
    import os
    import re

    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    (kernel,) = [v for v in vars(module).values() if isinstance(v, CachingAutotuner)]
    launcher = kernel.launchers[0]
    folder = os.path.join(triton_cache_dir(torch.cuda.current_device()), launcher.cache_hash)
    (cubin,) = glob.glob(os.path.join(folder, "*.cubin"))
    ptx = Path(cubin).with_suffix(".ptx").read_text()
    name = Path(cubin).stem
    entry = ptx.split(".entry", 1)[1].split(")", 1)[0]
    kinds = re.findall(r"\.param \.(\w+)", entry)
    xblock, threads = launcher.config.kwargs["XBLOCK"], 32 * launcher.config.num_warps
    print(f"inductor's add: {name}, XBLOCK {xblock}, {threads} threads, params {kinds}, shared {launcher.shared}, "
          f"registers {launcher.n_regs}", flush=True)
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "inductor_add.ptx").write_text(ptx)
        (dump / "inductor_add.sass").write_text(sass_of(Path(cubin)))
    device = torch.cuda.current_device()
    with drv.on_device(device):
        handle = drv.load_module(Path(cubin).read_bytes())
        func = drv.get_function(handle, name)
    lib = drv.library()

    def add(a, b):
        out = torch.empty_like(a)
        values = iter([a.data_ptr(), b.data_ptr(), out.data_ptr()])
        args = [ctypes.c_uint32(N) if k in ("u32", "b32", "s32") else ctypes.c_void_p(next(values, 0)) for k in kinds]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in args])
        with drv.on_device(device):
            drv.check(lib.cuLaunchKernel(func, -(-N // xblock), 1, 1, threads, 1, 1, launcher.shared,
                                         torch.cuda.current_stream().cuda_stream, params, None), "cuLaunchKernel")
        return out
    add.module = handle
    return add


def rmsnorm_paths() -> tuple[dict, tuple, int]:
    """RMSNorm bf16 4096 x 1024 as the harness times it (kwb, torch.compile), and Inductor's module
    called directly; with its inputs and bytes."""
    from graph_timeline import providers_of

    fns, inputs = providers_of("rmsnorm", "rmsnorm", torch.bfloat16, (4096, 1024))
    fns["inductor module"] = inductor_module(fns.pop("eager"), inputs)
    return fns, inputs, (2 * 4096 * 1024 + 1024) * 2


def recording(fn, seen: set):
    """fn, noting the address of every output it returns (during a graph's capture: the
    addresses its replays write)."""
    def call(*args):
        out = fn(*args)
        if torch.cuda.is_current_stream_capturing():  # not the warm-up calls before a capture
            seen.add(out.data_ptr())
        return out
    return call


def holding(fn, keep: int):
    """fn with its last `keep` outputs held, so that each call writes a buffer the last one did not."""
    held = []

    def call(*args):
        out = fn(*args)
        held.append(out)
        del held[:-keep]
        return out
    return call


def dump_graphs(fns: dict, inputs: tuple, folder: Path) -> None:
    """Each provider's graph of 3 calls as CUDA writes it (cudaGraphDebugDotPrint, verbose): its
    nodes, each kernel node's function, grid, block, shared memory and launch attributes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, fn in fns.items():
        with torch.no_grad():
            fn(*inputs)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            graph.enable_debug_mode()
            with torch.cuda.graph(graph):
                for _ in range(3):
                    fn(*inputs)
        path = folder / (name.replace(" ", "_").replace(",", "") + ".dot")
        graph.debug_dump(str(path))
        print(f"  {name}: graph written to {path}", flush=True)


def add_paths(dump: Path | None = None) -> tuple[dict, tuple, int]:
    """The fp32 add at 2^20 by every path above, its inputs and bytes."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, device="cuda", generator=g)
    b = torch.randn(N, device="cuda", generator=g)
    fns = {"kwb": wb.load("vector_add").vector_add,
           "torch.compile": torch.compile(lambda x, y: x + y, fullgraph=True, dynamic=False),
           "nvrtc sm_90": nvrtc_add("9.0"), "nvrtc sm_90a": nvrtc_add("9.0a"), "inductor ptx": ptx_add()}
    fns["triton"], fns["triton cubin, kwb launch"] = triton_adds()
    fns["inductor module"] = inductor_module(lambda x, y: x + y, (a, b))
    fns["inductor module"](a, b)  # its launcher made, so its cubin is known
    try:  # Inductor's runtime objects differ between torch versions: the other paths run regardless
        fns["inductor cubin, kwb launch"] = inductor_cubin_add(fns["inductor module"].module, dump)
    except Exception as e:  # noqa: BLE001 - said, and left out
        print(f"inductor's cubin not found or not launched: {type(e).__name__}: {e}", flush=True)
    fns["kwb, 2 outputs held"] = holding(fns["kwb"], 2)
    if dump:  # the SASS of the Triton add and of kwb's build, beside Inductor's
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "triton_add.cubin").write_bytes(fns["triton cubin, kwb launch"].cubin)
        (dump / "triton_add.sass").write_text(sass_of(dump / "triton_add.cubin"))
        (dump / "kwb_vector_add.sass").write_text(sass_of(Path(wb.load("vector_add").library_path)))
    return fns, (a, b), 3 * N * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=("add", "rmsnorm"), default="add",
                        help="add: the fp32 add at 2^20 by every path; rmsnorm: bf16 4096 x 1024 by kwb, "
                             "torch.compile and Inductor's module called directly")
    parser.add_argument("--copies", default="32,1", help="input copies each graph rotates over, comma-separated")
    parser.add_argument("--seconds", type=float, default=0.5, help="samples in turns, about this long each")
    parser.add_argument("--dump", type=Path, help="also write each provider's graph of 3 calls (CUDA's DOT) into DIR")
    args = parser.parse_args()
    fns, inputs, nbytes = add_paths(args.dump) if args.case == "add" else rmsnorm_paths()
    with torch.no_grad():
        want = fns["torch.compile"](*inputs)
        for name, fn in fns.items():
            torch.testing.assert_close(fn(*inputs), want, msg=lambda m, name=name: f"{name}: {m}")
    if args.dump:
        dump_graphs(fns, inputs, args.dump)
    addresses = {name: set() for name in fns}
    fns = {name: recording(fn, addresses[name]) for name, fn in fns.items()}
    for copies in (int(c) for c in args.copies.split(",") if c):
        for seen in addresses.values():
            seen.clear()
        time_in_turns(fns, inputs, args.seconds, f"{args.case} ({copies} input copies)", nbytes=nbytes,
                      graph_calls=200, copies=copies)
        print("  output buffers each graph's calls wrote: " +
              ", ".join(f"{name} {len(seen)}" for name, seen in addresses.items()), flush=True)


if __name__ == "__main__":
    main()
