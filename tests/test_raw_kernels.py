"""Raw kernels through NVRTC (wb.cuda_kernel), without a GPU: compiling for sm_90, the cache
(memory, disk, a fresh process; headers in the key), errors at the user's lines, and every
check a launch makes of its arguments before it reaches the driver. Launches are in
test_raw_kernels_gpu.py."""
from __future__ import annotations

import json
import struct

import pytest
import torch
from conftest import run_python

import workbench as wb
from cache_tools import api
from workbench.jit import nvrtc, raw_kernel, raw_launch, signature
from workbench.jit.build_spec import raw_kernel_spec

pytestmark = pytest.mark.nvrtc

RELU_SCALE = """\
// y = max(x, 0) * alpha, one element a thread
extern "C" __global__ void relu_scale(const float* __restrict__ x, float* __restrict__ y, float alpha,
                                      long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f) * alpha;
}
"""


@pytest.fixture(autouse=True)
def _fresh_memory(monkeypatch):
    """Each test starts with nothing compiled in this process (the disk cache is the session's)."""
    monkeypatch.setattr(raw_kernel, "_memory", {})


def _no_compiling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("NVRTC compiled where the cache should have answered")

    monkeypatch.setattr(nvrtc, "compile", refuse)


def test_a_kernel_compiles_for_the_arch_with_its_parameters_and_resources(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # compiled here, whatever other tests put in the session's cache
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    assert k.compiled and k.arch == "sm_90" and k.cubin[:4] == b"\x7fELF"
    assert [s.size for s in k.slots] == [8, 8, 4, 8] and [s.offset for s in k.slots] == [0, 8, 16, 24]
    assert [(p.name, p.dtype, p.pointer) for p in k.params] == [
        ("x", "float32", True), ("y", "float32", True), ("alpha", "float32", False), ("n", "int64", False)]
    assert k.signature() == "relu_scale(float* x, float* y, float alpha, long long n)"
    (own,) = k.resources
    assert own.name == "relu_scale" and own.arch == "sm_90" and own.registers > 0 and not own.spills
    assert 0 < k.occupancy(256) <= 1.0
    assert k.cubin_path.read_bytes() == k.cubin and k.manifest_path.exists()


def test_unchanged_source_is_a_cache_hit_in_memory_on_disk_and_in_a_fresh_process(monkeypatch):
    first = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    _no_compiling(monkeypatch)
    again = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    assert not again.compiled and again.key == first.key and again.cubin == first.cubin
    monkeypatch.setattr(raw_kernel, "_memory", {})
    from_disk = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    assert not from_disk.compiled and from_disk.key == first.key
    res = run_python(f"""
        import json, workbench as wb
        from workbench.jit import nvrtc
        nvrtc.compile = None   # calling it would fail: the cubin must come from the disk
        k = wb.cuda_kernel({RELU_SCALE!r}, "relu_scale", arch="9.0")
        print(json.dumps({{"compiled": k.compiled, "key": k.key}}))
    """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"compiled": False, "key": first.key}


def test_an_edited_source_or_header_is_new_code_and_reverting_finds_the_old(tmp_path, monkeypatch):
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "scale.h").write_text("#pragma once\n#define SCALE 2.0f\n")
    source = folder / "scaled.cu"
    source.write_text('#include "scale.h"\nextern "C" __global__ void scaled(float* y) { y[threadIdx.x] *= SCALE; }\n')
    first = wb.cuda_kernel(source, "scaled", arch="9.0")
    assert first.compiled and str(folder / "scale.h") in json.loads(first.manifest_path.read_text())["headers"]
    (folder / "scale.h").write_text("#pragma once\n#define SCALE 3.0f\n")
    header_edit = wb.cuda_kernel(source, "scaled", arch="9.0")
    assert header_edit.compiled and header_edit.key != first.key and header_edit.cubin != first.cubin
    source.write_text(source.read_text().replace("*= SCALE", "*= SCALE * 2.0f"))
    source_edit = wb.cuda_kernel(source, "scaled", arch="9.0")
    assert source_edit.compiled and source_edit.key not in (first.key, header_edit.key)
    source.write_text(source.read_text().replace("*= SCALE * 2.0f", "*= SCALE"))
    (folder / "scale.h").write_text("#pragma once\n#define SCALE 2.0f\n")
    _no_compiling(monkeypatch)
    reverted = wb.cuda_kernel(source, "scaled", arch="9.0")
    assert not reverted.compiled and reverted.key == first.key


def test_options_and_arch_are_in_the_key():
    base = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    fast = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0", options=["--use_fast_math"])
    ampere = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="8.0")
    assert len({base.key, fast.key, ampere.key}) == 3 and ampere.arch == "sm_80"


def test_a_compile_error_points_at_the_users_line_with_a_caret(tmp_path):
    bad = RELU_SCALE.replace("fmaxf(x[i], 0.f)", "fmaxf(x[i], zero)")
    with pytest.raises(wb.BuildError) as e:
        wb.cuda_kernel(bad, "relu_scale", arch="9.0", label="%%cuda_kernel relu_scale", first_line=2)
    text = str(e.value)
    assert "building relu_scale (cuda, NVRTC) failed: 1 error" in text, text
    assert '%%cuda_kernel relu_scale:6:33: error: identifier "zero" is undefined' in text, text
    lines = text.splitlines()
    shown = next(i for i, line in enumerate(lines) if "fmaxf(x[i], zero)" in line)
    assert lines[shown + 1].index("^") == lines[shown].index("zero")
    assert "full log:" in text


def test_an_error_in_an_included_header_names_the_header(tmp_path):
    (tmp_path / "broken.h").write_text("#pragma once\nstatic __device__ float twice(float v) { return v * two; }\n")
    source = tmp_path / "uses.cu"
    source.write_text('#include "broken.h"\nextern "C" __global__ void uses(float* y) { y[0] = twice(y[0]); }\n')
    with pytest.raises(wb.BuildError) as e:
        wb.cuda_kernel(source, "uses", arch="9.0")
    assert f"{tmp_path / 'broken.h'}:2:" in str(e.value) and '"two" is undefined' in str(e.value)


def test_a_name_the_cubin_lacks_is_named_with_what_it_holds():
    mangled = 'extern "C" __global__ void other(float* y) {}\n__global__ void plain(float* y) {}\n'
    with pytest.raises(wb.BuildError, match=r"no extern \"C\" __global__ function named wanted; the cubin holds: "
                                            r"_Z5plainPf, other"):
        wb.cuda_kernel(mangled, "wanted", arch="9.0")


@pytest.mark.parametrize("kwargs, error, message", [
    ({"name": "not a name"}, ValueError, "name must be the kernel's C identifier"),
    ({"options": ["-arch=sm_80"]}, ValueError, "give the architecture as arch="),
    ({"options": [3]}, TypeError, "options must be NVRTC options as strings"),
    ({"arch": "banana"}, ValueError, "arch must name a GPU architecture"),
    ({"source": b"bytes"}, TypeError, "source must be CUDA C\\+\\+ text or the path of a .cu file"),
    ({"source": "/nowhere/k.cu"}, FileNotFoundError, "source: cannot read /nowhere/k.cu"),
])
def test_bad_arguments_are_named(kwargs, error, message):
    args = {"source": RELU_SCALE, "name": "relu_scale", "arch": "9.0"} | kwargs
    with pytest.raises(error, match=message):
        wb.cuda_kernel(args.pop("source"), args.pop("name"), **args)


@pytest.mark.parametrize("given, sm", [("9.0", "sm_90"), ("90", "sm_90"), ("sm_90a", "sm_90a"), ("SM_90", "sm_90"),
                                       ("9.0+PTX", "sm_90"), ("9.0+ptx", "sm_90"), ("compute_90", "sm_90"),
                                       ("100", "sm_100"), ("10.0a", "sm_100a"), (" 12.0f ", "sm_120f")])
def test_arch_takes_the_forms_cuda_builds_take(given, sm, tmp_path):
    spec = raw_kernel_spec(RELU_SCALE, "relu_scale", arch=given, root=tmp_path)
    assert raw_kernel._sm(spec.archs[0]) == sm  # one reading for nvcc builds and NVRTC: toolchain.parse_archs


@pytest.mark.parametrize("given", ["1000", "sm90", "10.00", "8.0;9.0"])
def test_arch_refuses_what_names_no_single_architecture(given, tmp_path):
    with pytest.raises(ValueError, match="arch must name a GPU architecture"):
        raw_kernel_spec(RELU_SCALE, "relu_scale", arch=given, root=tmp_path)


def test_a_load_from_disk_clears_the_record_of_a_killed_compile(tmp_path, monkeypatch):
    import os
    import time

    from kwb_store import layout

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    lock = k.manifest_path.parent / layout.LOCK_NAME
    assert lock.exists() and lock.read_text() == ""  # compiled under the entry's lock, released
    lock.write_text(json.dumps({"pid": 999_999_999, "host": os.uname().nodename, "started": time.time(),
                                "what": "relu_scale (cuda, NVRTC)"}))
    [entry] = [e for e in api.open_cache(tmp_path).entries if e.kernel == "relu_scale"]
    assert entry.state == "stale lock"
    monkeypatch.setattr(raw_kernel, "_memory", {})
    again = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    assert not again.compiled and lock.read_text() == ""


def test_a_damaged_cubin_is_compiled_again_and_verify_flags_it(monkeypatch, tmp_path, capfd):
    # a root of its own: in the session's shared root, another worker loading the same kernel
    # between the damage and the load below compiled it again first (GPU suite, -n 8)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(raw_kernel, "_memory", {})
    cache_root = tmp_path
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    k.cubin_path.write_bytes(k.cubin[: len(k.cubin) // 2])
    broken = [e for e in api.verify(api.open_cache(cache_root)) if e.kernel == "relu_scale" and e.origin == "kwb NVRTC kernel"]
    assert broken, "kwb cache verify passed a cubin cut to half"
    monkeypatch.setattr(raw_kernel, "_memory", {})
    again = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    assert again.compiled and again.cubin == k.cubin
    assert "damaged" in capfd.readouterr().err


def test_kwb_cache_lists_raw_kernels(cache_root):
    wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")
    entries = {e.kernel: e for e in api.open_cache(cache_root).entries if e.origin == "kwb NVRTC kernel"}
    assert "relu_scale" in entries and entries["relu_scale"].state == "fresh", {k: e.state for k, e in entries.items()}


# --- arguments, checked before any driver call --------------------------------------------------

@pytest.fixture
def relu():
    return wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="9.0")


def _packed(kernel, args) -> list[bytes]:
    _, buffers, _ = kernel._pack(args, check_device=False)
    return [bytes(b) for b in buffers]


def test_arguments_are_packed_as_the_parameters_declare(relu):
    x, y = torch.randn(7), torch.empty(7)
    packed = _packed(relu, (x, y, 1.5, 7))
    assert packed == [struct.pack("<Q", x.data_ptr()), struct.pack("<Q", y.data_ptr()), struct.pack("<f", 1.5),
                      struct.pack("<q", 7)]
    assert _packed(relu, (x, None, 2, 7))[1:3] == [struct.pack("<Q", 0), struct.pack("<f", 2.0)]


@pytest.mark.parametrize("args, message", [
    (lambda x: (x, x, 1.5), r"relu_scale takes 4 arguments, relu_scale\(float\* x, float\* y, float alpha, long long n\); got 3"),
    (lambda x: (x.half(), x, 1.5, 7), r"argument 0 \(float\* x\) points at float32 elements, got a float16 tensor"),
    (lambda x: (x, x, x, 7), r"argument 2 \(float alpha\) is a value, not a pointer"),
    (lambda x: (x, x, 1.5, 7.0), r"argument 3 \(long long n\) is an integer, got the float 7.0"),
    (lambda x: (x, x, 1.5, 2**63), r"argument 3 \(long long n\) cannot hold 9223372036854775808"),
    (lambda x: (x, "y", 1.5, 7), r"argument 1 \(float\* y\) is a pointer: pass a tensor"),
    (lambda x: (x.view(2, 4).t(), x, 1.5, 7), r"argument 0 \(float\* x\) must be contiguous"),
    (lambda x: (x, x, "1.5", 7), r"argument 2 \(float alpha\) must be a number, got str"),
])
def test_a_wrong_argument_is_named_with_the_rule(relu, args, message):
    with pytest.raises(wb.LaunchError, match=message):
        relu._pack(args(torch.randn(8)), check_device=False)


def test_a_cpu_tensor_is_refused_before_any_launch(relu):
    with pytest.raises(wb.LaunchError, match=r"argument 0 \(float\* x\) must be a CUDA tensor, got one on cpu"):
        relu._pack((torch.randn(4), torch.randn(4), 1.0, 4))


def test_types_the_text_cannot_name_follow_the_cubins_sizes():
    src = """
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    typedef float real;
    struct Pair { float a; int b; };
    extern "C" __global__ void mixed(real* out, Pair p, __half h, __nv_bfloat16 b, unsigned short u, const float4* v) {}
    """
    k = wb.cuda_kernel(src, "mixed", arch="9.0")
    assert [s.size for s in k.slots] == [8, 8, 2, 2, 2, 8]
    out = torch.empty(4, dtype=torch.float64)  # real is a typedef: no dtype to hold it to
    packed = _packed(k, (out, struct.pack("<fi", 1.0, 2), 0.5, 1.5, 65535, torch.empty(8)))
    assert packed[1] == struct.pack("<fi", 1.0, 2) and packed[2] == struct.pack("<e", 0.5)
    assert packed[3] == torch.tensor(1.5, dtype=torch.bfloat16).view(torch.int16).item().to_bytes(2, "little", signed=True)
    assert packed[4] == struct.pack("<H", 65535)
    with pytest.raises(wb.LaunchError, match=r"argument 1 \(Pair p\) takes 8 bytes, got 4"):
        _packed(k, (out, b"\0" * 4, 0.5, 1.5, 1, torch.empty(8)))
    misaligned = torch.empty(9)[1:]
    with pytest.raises(wb.LaunchError, match=r"argument 5 \(float4\* v\) must be aligned to 16 bytes"):
        _packed(k, (out, b"\0" * 8, 0.5, 1.5, 1, misaligned))


@pytest.mark.parametrize("what, value, message", [
    ("grid", 0, r"grid\[0\] must be between 1 and 2147483647, got 0"),
    ("block", (32, 32, 65), r"block\[2\] must be between 1 and 64, got 65"),
    ("block", (1, 2, 3, 4), "block must be a whole number or a tuple of 1 to 3 of them"),
    ("grid", "8", "grid must be a whole number or a tuple of 1 to 3 of them"),
])
def test_launch_dimensions_are_checked(what, value, message):
    limits = (2**31 - 1, 65535, 65535) if what == "grid" else (1024, 1024, 64)
    with pytest.raises(wb.LaunchError, match=message):
        raw_launch._dims(value, what, limits)


@pytest.mark.parametrize("declaration, expected", [
    ("const float4* __restrict__ v", ("v", "float4*", True, "float32", 16)),
    ("unsigned long long n", ("n", "unsigned long long", False, "uint64", 1)),
    ("std::int64_t n", ("n", "int64_t", False, "int64", 1)),
    ("__nv_bfloat16 *__restrict__ out", ("out", "__nv_bfloat16*", True, "bfloat16", 2)),
    ("const __grid_constant__ Params p", ("p", "Params", False, None, 1)),
    ("void* raw", ("raw", "void*", True, None, 1)),
])
def test_parameter_declarations_are_read(declaration, expected):
    src = f'/* k(int a, int b) in a comment */\nextern "C" __global__ void __launch_bounds__(256) k({declaration}) {{ }}\n'
    (p,) = signature.find(src, "k")
    assert (p.name, p.type, p.pointer, p.dtype, p.align) == expected


def test_a_kernel_not_in_the_text_has_no_declared_parameters():
    assert signature.find("__device__ void k(int a) {}\n", "k") is None
    assert signature.find('extern "C" __global__ void k(void) {}\n', "k") == []


def test_include_folders_and_pre_includes_given_as_options_are_in_the_key(tmp_path, monkeypatch):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "k.h").write_text("#define K 1.0f\n")
    (tmp_path / "pre.h").write_text("#define P 2.0f\n")
    src = '#include "k.h"\nextern "C" __global__ void opt_inc(float* y) { y[0] = K + P; }\n'
    options = [f"-I{tmp_path / 'inc'}", "-include", str(tmp_path / "pre.h")]
    first = wb.cuda_kernel(src, "opt_inc", arch="9.0", options=options)
    (tmp_path / "inc" / "k.h").write_text("#define K 3.0f\n")
    header_edit = wb.cuda_kernel(src, "opt_inc", arch="9.0", options=options)
    assert header_edit.compiled and header_edit.key != first.key, "a header reached through -I was not in the key"
    (tmp_path / "pre.h").write_text("#define P 4.0f\n")
    pre_edit = wb.cuda_kernel(src, "opt_inc", arch="9.0", options=options)
    assert pre_edit.compiled and pre_edit.key not in (first.key, header_edit.key)
    with pytest.raises(ValueError, match="options: -include needs a value"):
        wb.cuda_kernel(src, "opt_inc", arch="9.0", options=["-include"])


def test_an_arch_list_entry_with_ptx_names_its_architecture(monkeypatch):
    monkeypatch.setenv("KWB_CUDA_ARCH", "9.0+PTX")
    assert wb.cuda_kernel(RELU_SCALE, "relu_scale").arch == "sm_90"


def test_parameters_the_text_reads_wrong_fall_back_to_the_cubins_sizes(capfd):
    src = '#define ARGS float* x, int n\nextern "C" __global__ void by_macro(ARGS) { if (n) x[0] = 1.f; }\n'
    k = wb.cuda_kernel(src, "by_macro", arch="9.0")
    assert k.params is None and [s.size for s in k.slots] == [8, 4]
    assert "do not match the compiled kernel's" in capfd.readouterr().err
    x = torch.empty(2)
    assert _packed(k, (x, 3)) == [struct.pack("<Q", x.data_ptr()), struct.pack("<i", 3)]
    unnamed = wb.cuda_kernel('extern "C" __global__ void unnamed(float* y, unsigned char) {}\n', "unnamed", arch="9.0")
    assert [p.type for p in unnamed.params] == ["float*", "unsigned char"]


def test_a_three_vector_pointer_needs_only_its_elements_alignment():
    k = wb.cuda_kernel('extern "C" __global__ void v3(const float3* v, double4* w) {}\n', "v3", arch="9.0")
    assert [p.align for p in k.params] == [4, 16]
    _packed(k, (torch.empty(10)[3:], torch.empty(8, dtype=torch.float64)))  # 12 bytes in: a float3 may start there


class FakeDriver:
    """libcuda's calls as a raw kernel makes them, recorded; outputs written through byref."""

    def __init__(self, current_context=0, max_threads=1024):
        self.calls, self.current, self.max_threads = [], current_context, max_threads

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            out = {"cuCtxGetCurrent": self.current, "cuDeviceGet": 0, "cuDevicePrimaryCtxRetain": 0xC0,
                   "cuModuleLoadData": 0x10, "cuModuleGetFunction": 0x20}.get(name)
            if out is not None:
                args[0]._obj.value = out
            if name == "cuFuncGetAttribute":
                args[0]._obj.value = {0: self.max_threads, 4: 10}.get(args[1], 0)
            return 0
        return call


@pytest.mark.parametrize("context", ["none", "the primary"])
def test_a_launch_reaches_the_driver_in_its_order_inside_the_devices_context(relu, monkeypatch, context):
    from workbench.jit import cuda_driver

    fake = FakeDriver(current_context=0 if context == "none" else 0xC0)
    monkeypatch.setattr(cuda_driver, "library", lambda: fake)
    monkeypatch.setattr(cuda_driver, "_primaries", {})
    x, y = torch.randn(8), torch.empty(8)
    params, keep, _ = relu._pack((x, y, 1.5, 8), check_device=False)
    with cuda_driver.on_device(0):
        relu._launch(0, (3, 1, 1), (256, 1, 1), 64 * 1024, 0x5717, params)
    names = [name for name, _ in fake.calls]
    if context == "none":  # a thread that never touched CUDA: the primary context pushed, then popped
        assert names[:4] == ["cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxGetCurrent", "cuCtxPushCurrent_v2"]
        assert names[-1] == "cuCtxPopCurrent_v2"
    else:
        assert "cuCtxPushCurrent_v2" not in names and "cuCtxPopCurrent_v2" not in names
    assert names.count("cuModuleLoadData") == 1 and "cuFuncSetAttribute" in names  # 64 KiB: opted in
    (launch,) = [args for name, args in fake.calls if name == "cuLaunchKernel"]
    func, gx, gy, gz, bx, by, bz, smem, stream, array, extra = launch
    assert (func.value, gx, gy, gz, bx, by, bz, smem, stream, extra) == (0x20, 3, 1, 1, 256, 1, 1, 65536, 0x5717, None)
    sizes = [s.size for s in relu.slots]
    assert [ctypes_bytes(array[i], n) for i, n in enumerate(sizes)] == [bytes(b) for b in keep]
    with pytest.raises(wb.LaunchError, match="a block of 2048 threads is more than it can have: 1024"):
        relu._launch(0, (1, 1, 1), (1024, 2, 1), 0, 0, params)


def ctypes_bytes(address: int, size: int) -> bytes:
    import ctypes

    return ctypes.string_at(address, size)


def test_a_header_saved_while_nvrtc_compiles_is_compiled_again(tmp_path, monkeypatch):
    (tmp_path / "v.h").write_text("#define V 1.0f\n")
    source = tmp_path / "racing.cu"
    source.write_text('#include "v.h"\nextern "C" __global__ void racing(float* y) { y[0] = V; }\n')
    real, calls = nvrtc.compile, []

    def compile_then_save(*args):
        done = real(*args)
        calls.append(done.cubin)
        if len(calls) == 1:  # the editor saves while the first compile runs
            (tmp_path / "v.h").write_text("#define V 2.0f\n")
        return done

    monkeypatch.setattr(nvrtc, "compile", compile_then_save)
    k = wb.cuda_kernel(source, "racing", arch="9.0")
    assert len(calls) == 2 and k.cubin == calls[1]
    assert json.loads(k.manifest_path.read_text())["headers"] == {
        str(tmp_path / "v.h"): __import__("hashlib").sha256(b"#define V 2.0f\n").hexdigest()}
    monkeypatch.setattr(raw_kernel, "_memory", {})
    _no_compiling(monkeypatch)
    assert wb.cuda_kernel(source, "racing", arch="9.0").cubin == calls[1]
