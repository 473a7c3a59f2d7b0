"""The build key and the cache, with real builds: what rebuilds, what does not, and reloading
edited code in one process."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import TINY_CPP, run_python, write_tiny_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import workbench as wb
from kwb_store import layout


def _value(k) -> float:
    return k.add_value(torch.zeros(1, dtype=torch.float64)).item()


def test_nothing_changed_loads_without_compiling_in_process_and_in_a_fresh_process(tiny_kernel):
    k = wb.load(tiny_kernel)
    assert k.build.compiled and _value(k) == 1.0
    log = layout.build_dir(k.library_path.parent, k.device) / "build.log"
    log_mtime = log.stat().st_mtime_ns
    assert wb.load(tiny_kernel) is k
    assert log.stat().st_mtime_ns == log_mtime
    res = run_python(f"""
        import json, torch, workbench as wb
        k = wb.load({str(tiny_kernel)!r})
        print(json.dumps({{"compiled": k.build.compiled, "value": k.add_value(torch.zeros(1)).item(), "key": k.key}}))
    """)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data == {"compiled": False, "value": 1.0, "key": k.key}
    assert log.stat().st_mtime_ns == log_mtime, "a warm load ran ninja"
    assert res.stderr.strip() == "", f"a cache hit must be silent, got: {res.stderr}"


def test_header_edit_reloads_new_code_in_the_same_process(tiny_kernel):
    k1 = wb.load(tiny_kernel)
    assert _value(k1) == 1.0
    (tiny_kernel / "value.h").write_text("#pragma once\n#define VALUE 3.0\n")
    k2 = wb.load(tiny_kernel)
    assert k2.build.compiled and k2.key != k1.key and k2.namespace != k1.namespace
    assert _value(k2) == 3.0
    assert _value(k1) == 1.0, "the old build must stay usable by whoever holds it"
    assert str(tiny_kernel / "value.h") in k2.info["headers"]


@pytest.mark.slow
def test_source_edit_rebuilds_and_reverting_reuses_the_first_build(tiny_kernel):
    k1 = wb.load(tiny_kernel)
    cpp = tiny_kernel / "tiny.cpp"
    original = cpp.read_text()
    cpp.write_text(original.replace("VALUE * 1.0", "VALUE * 5.0"))
    k2 = wb.load(tiny_kernel)
    assert k2.build.compiled and _value(k2) == 5.0
    log = layout.build_dir(k1.library_path.parent, k1.device) / "build.log"
    log_mtime = log.stat().st_mtime_ns
    cpp.write_text(original)
    assert wb.load(tiny_kernel) is k1
    assert log.stat().st_mtime_ns == log_mtime, "the reverted source was compiled again"


@pytest.mark.slow
def test_flag_change_rebuilds(tiny_kernel):
    k1 = wb.load(tiny_kernel)
    k2 = wb.load(tiny_kernel, extra_cflags=["-DVALUE_UNUSED_FLAG=1"])
    assert k2.build.compiled and k2.key != k1.key
    assert "-DVALUE_UNUSED_FLAG=1" in k2.info["config"]["cflags"]


@pytest.mark.slow
def test_content_change_with_an_old_mtime_still_rebuilds(tiny_kernel):
    """ninja trusts mtimes; a file copied with its old mtime (cp -p, tar) must not pass."""
    k1 = wb.load(tiny_kernel)
    header = tiny_kernel / "value.h"
    old = header.stat()
    header.write_text("#pragma once\n#define VALUE 7.0\n")
    os.utime(header, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))
    k2 = wb.load(tiny_kernel)
    assert _value(k2) == 7.0 and k2.key != k1.key


@pytest.mark.slow
def test_failed_build_records_nothing_and_the_fix_rebuilds_in_the_same_process(tmp_path, cache_root):
    from workbench.jit.sources import resolve

    folder = write_tiny_kernel(tmp_path / "broken", cpp=TINY_CPP.replace("return at::add", "return at::addd"))
    with pytest.raises(wb.BuildError) as info:
        wb.load(folder)
    assert "tiny.cpp" in str(info.value)
    entry = layout.entry_dir(cache_root, resolve(folder).ident)
    assert not list(entry.glob("*.json")) and not list(entry.glob("*.so"))
    assert list(entry.glob(f"build-*/{layout.FAILURE_RECORD}")), "kwb cache tells a failed compile by this record"
    # Loading the same broken source again fails again (nothing was recorded as built) ...
    with pytest.raises(wb.BuildError):
        wb.load(folder)
    # ... and fixing it builds and runs, in this process (torch's load() would not, pytorch#119206).
    write_tiny_kernel(folder, value="2.0")
    assert _value(wb.load(folder)) == 2.0
    assert not list(entry.glob(f"build-*/{layout.FAILURE_RECORD}"))


def test_library_and_manifest_land_under_the_cache_root_with_content_keyed_names(tiny_kernel, cache_root):
    k = wb.load(tiny_kernel)
    entry = k.library_path.parent
    assert entry.parent == cache_root and entry.name.startswith("kwb_tiny-")
    manifest = json.loads(k.build.manifest_path.read_text())
    assert manifest["key"] == k.key and manifest["library"] == k.library_path.name
    assert k.key[:12] in k.library_path.name
    for v in ("torch", "torch_cuda", "cxx", "kwb_format", "python"):
        assert v in manifest["config"]["versions"]
    assert not list(entry.glob("*.tmp")), "temporary files must be renamed into place"


def test_two_folders_with_one_name_do_not_share_a_cache_entry(tmp_path):
    a = wb.load(write_tiny_kernel(tmp_path / "a" / "tiny", value="4.0"))
    b = wb.load(write_tiny_kernel(tmp_path / "b" / "tiny", value="6.0"))
    assert a.library_path.parent != b.library_path.parent
    assert (_value(a), _value(b)) == (4.0, 6.0)


def test_force_recompiles_every_object(tiny_kernel):
    k = wb.load(tiny_kernel)
    obj = layout.build_dir(k.library_path.parent, k.device) / "tiny.o"
    before = obj.stat().st_mtime_ns
    forced = wb.load(tiny_kernel, force=True)
    assert obj.stat().st_mtime_ns != before and forced.build.compiled and _value(forced) == 1.0


def test_impl_blocks_in_a_second_cpp_are_registered(tmp_path):
    folder = tmp_path / "split"
    folder.mkdir()
    (folder / "defs.cpp").write_text('#include "kwb_library.h"\nKWB_LIBRARY(m) { m.def("twice(Tensor x) -> Tensor"); }\n')
    (folder / "impls.cpp").write_text(
        '#include <ATen/ops/mul.h>\n#include "kwb_library.h"\n'
        'namespace { at::Tensor twice(const at::Tensor& x) { return at::mul(x, 2); } }\n'
        'KWB_LIBRARY_IMPL(m, CPU) { m.impl("twice", &twice); }\n')
    k = wb.load(folder, device="cpu")
    assert k.twice(torch.ones(3, dtype=torch.float64)).tolist() == [2.0, 2.0, 2.0]


def test_headers_of_the_kernel_count_even_under_the_python_prefix(tmp_path):
    """An installed kwb keeps its kernels under site-packages; their headers must stay in the key."""
    import sys

    from workbench.jit.builder import _user_headers

    own = tmp_path / "fake-prefix" / "kwb_kernels" / "common"
    inside = os.path.join(sys.prefix, "lib", "site-packages", "kwb_kernels", "common", "kwb_cuda.cuh")
    kept = _user_headers([inside, "/usr/include/stdio.h"], set(), tmp_path, [own, Path(inside).parent])
    assert kept == [inside]


def _replace_file(path: Path, data: bytes) -> None:
    """Damage a library this test process has loaded: a new file at its path. Written in place,
    the pages this process maps would change under it, and its exit crashed (CI: exit 139 after
    every test passed); a fresh process sees the same damage either way."""
    tmp = path.with_name(path.name + ".damaged")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("damage", ["cut to half", "bytes patched"])
@pytest.mark.slow
def test_a_damaged_library_is_rebuilt_in_a_fresh_process_never_loaded(tiny_kernel, damage):
    k = wb.load(tiny_kernel)
    lib = k.library_path
    data = lib.read_bytes()
    if damage == "cut to half":
        _replace_file(lib, data[: len(data) // 2])  # loaded as it was, this crashed every load with SIGBUS
    else:  # one byte changed, the size kept: loaded as it was, a patched library computed wrong values
        i = data.index(b"\x00" * 64, len(data) // 3) + 16
        _replace_file(lib, data[:i] + b"\x01" + data[i + 1:])
    res = run_python(f"""
        import json, torch, workbench as wb
        k = wb.load({str(tiny_kernel)!r})
        print(json.dumps({{"compiled": k.build.compiled, "value": k.add_value(torch.zeros(1)).item()}}))
    """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"compiled": True, "value": 1.0}
    assert "damaged" in res.stderr and "building it again" in res.stderr, res.stderr
    assert lib.read_bytes() != data[: len(data) // 2] and lib.stat().st_size > 0
    # and the rebuilt library loads silently afterwards
    res = run_python(f"""
        import workbench as wb
        print(wb.load({str(tiny_kernel)!r}).build.compiled)
    """)
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == "False" and "damaged" not in res.stderr


LOAD_TINY = """
    import json, torch, workbench as wb
    try:
        k = wb.load({folder!r})
        print(json.dumps({{"compiled": k.build.compiled, "value": k.add_value(torch.zeros(1)).item()}}))
    except wb.KwbError as e:
        print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
"""


def _damage(case: str, k, tmp_path) -> dict:
    """Damage the tiny kernel's cache as a crash, a bad copy or a user might; env for the load."""
    manifest, entry = k.build.manifest_path, k.library_path.parent
    data = json.loads(manifest.read_text())
    if case == "manifest not JSON":
        manifest.write_text("{not json")
    elif case == "manifest without key":
        del data["key"]
        manifest.write_text(json.dumps(data))
    elif case == "headers null":
        data["headers"] = None
        manifest.write_text(json.dumps(data))
    elif case == "library names another file":
        (entry / "other.so").write_bytes(k.library_path.read_bytes()[:-1])
        data["library"] = "other.so"
        manifest.write_text(json.dumps(data))
    elif case == "tool versions null":
        (entry.parent / layout.TOOL_VERSIONS).write_text("null")
    elif case == "lock is a folder":
        manifest.unlink()
        (entry / layout.LOCK_NAME).unlink()
        (entry / layout.LOCK_NAME).mkdir()
    elif case == "entry is a file":
        import shutil

        shutil.rmtree(entry)
        entry.write_text("not a folder")
    elif case == "root under a file":
        (tmp_path / "afile").write_text("x")
        return {"TORCH_EXTENSIONS_DIR": str(tmp_path / "afile" / "cache")}
    return {}


@pytest.mark.parametrize("case, want", [
    ("manifest not JSON", "rebuilt"),
    ("manifest without key", "rebuilt"),
    ("headers null", "rebuilt"),
    ("library names another file", "rebuilt"),
    ("tool versions null", "loads"),
    ("lock is a folder", "build lock, .*/lock: Is a directory; a folder is where that file goes"),
    ("entry is a file", "cache folder for this build, .*: File exists; a file is where that folder goes"),
    ("root under a file", r"cache root \(TORCH_EXTENSIONS_DIR\), .*afile/cache: Not a directory"),
])
@pytest.mark.slow
def test_a_damaged_cache_is_rebuilt_past_or_named_in_one_sentence(tiny_kernel, tmp_path, cache_root, case, want):
    k = wb.load(tiny_kernel)
    env = _damage(case, k, tmp_path)
    res = run_python(LOAD_TINY.format(folder=str(tiny_kernel)), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if want == "rebuilt":
        assert out == {"compiled": True, "value": 1.0}, out
        notices = [line for line in res.stderr.splitlines() if "building it again" in line]
        assert len(notices) == 1, res.stderr  # one notice, naming what was wrong
        assert {"manifest not JSON": "is not JSON", "manifest without key": "is not a whole manifest",
                "headers null": "is not a whole manifest", "library names another file": "other.so"}[case] in notices[0]
    elif want == "loads":
        assert out.get("value") == 1.0, out
    else:
        assert out["error"] == "CacheError" and re.search(want, out["message"]), out
        assert "Traceback" not in res.stderr


@pytest.mark.parametrize("folder_name", ["we$ird", "has #hash", "a$b #c d"])
@pytest.mark.slow
def test_a_kernel_folder_whose_path_holds_dollar_or_hash_builds_and_tracks_its_header(tmp_path, folder_name):
    folder = write_tiny_kernel(tmp_path / folder_name / "tiny", value="2.0")
    k1 = wb.load(folder)
    assert _value(k1) == 2.0
    assert str(folder / "value.h") in k1.build.manifest.headers, k1.build.manifest.headers
    (folder / "value.h").write_text("#pragma once\n#define VALUE 5.0\n")
    k2 = wb.load(folder)
    assert k2.key != k1.key and _value(k2) == 5.0


def test_depfile_escapes_read_back_as_the_paths(tmp_path):
    from workbench.jit.ninja import parse_depfile

    dep = tmp_path / "x.o.d"
    dep.write_text("x.o: /tmp/a$$b/x.cpp /tmp/has\\ \\#hash/v.h \\\n /usr/include/y.h\n")
    assert parse_depfile(dep) == ["/tmp/a$b/x.cpp", "/tmp/has #hash/v.h", "/usr/include/y.h"]


def test_a_load_failures_advice_names_the_users_folder_not_a_shipped_kernel(tiny_kernel):
    from types import SimpleNamespace

    from workbench.jit.kernel import _load_failure
    from workbench.jit.sources import resolve

    build = SimpleNamespace(library=Path("/cache/tiny.cpu.x.y.so"), device="cpu")
    text = _load_failure(resolve(str(tiny_kernel)), build, OSError("file too short"))
    assert f"kwb build --force {tiny_kernel}" in text, text
    shipped = _load_failure(resolve("relu_scale"), build, OSError("file too short"))
    assert "kwb build --force relu_scale)" in shipped, shipped


FULL_DISK_DRIVER = """
import json, subprocess, sys
mount, load = sys.argv[1], sys.argv[2]
for size in ("8k", "40k", "160k", "4m"):  # fills up while writing build.ninja, objects, the library; then room
    subprocess.run(["mount", "-o", f"remount,size={size}", "tmpfs", mount], check=True)
    res = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=600)
    print(json.dumps({"size": size, "rc": res.returncode, "out": res.stdout.strip().splitlines()[-1:],
                      "stderr": res.stderr[-2000:]}), flush=True)
"""


def _can_mount_a_small_disk(where: Path) -> bool:
    import shutil

    if shutil.which("unshare") is None:
        return False
    res = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=8k tmpfs {where}"], capture_output=True, check=False)
    return res.returncode == 0


@pytest.mark.slow
def test_a_full_disk_is_named_in_one_sentence_and_the_next_load_with_room_builds(tiny_kernel, tmp_path):
    # a full disk gave 'OSError: [Errno 28] No space left on device', naming no path
    disk = tmp_path / "small-disk"
    disk.mkdir()
    if not _can_mount_a_small_disk(disk):
        pytest.skip("making a full disk needs a private mount (unshare -m, mount -t tmpfs): not allowed on this machine")
    load = textwrap.dedent(LOAD_TINY.format(folder=str(tiny_kernel)))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(disk / "cache"))
    res = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=8k tmpfs "$0" && exec "$1" -c "$2" "$0" "$3"',
                          str(disk), sys.executable, FULL_DISK_DRIVER, load], capture_output=True, text=True, env=env, timeout=1800, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["size"] for r in runs] == ["8k", "40k", "160k", "4m"]
    for r in runs[:-1]:
        assert r["rc"] == 0 and "Traceback" not in r["stderr"], r
        out = json.loads(r["out"][0])
        assert out["error"] == "CacheError", r
        assert re.search(rf"cannot write .*{re.escape(str(disk))}/cache/\S+: No space left on device; the disk is full",
                         out["message"]), out
    assert json.loads(runs[-1]["out"][0]) == {"compiled": True, "value": 1.0}, runs[-1]


EDIT_AFTER_COMPILING = """#!/bin/sh
# c++, then (once) the header saved anew: an edit that lands while the build is still running
"{cxx}" "$@"; status=$?
case "$*" in *tiny.cpp*) if [ ! -e "{flag}" ]; then touch "{flag}"; printf '#pragma once\\n#define VALUE 2.0\\n' > "{header}.tmp"; mv "{header}.tmp" "{header}"; fi;; esac
exit $status
"""


@pytest.mark.slow
def test_a_header_saved_during_a_first_build_is_never_recorded_as_built(tiny_kernel, tmp_path):
    # benchmarks/chaos.py found it: loaders racing header edits, a first build compiled VALUE
    # 1.0, recorded the header as it was after the edit (2.0), and later processes loaded the
    # 1.0 library as fresh
    import shutil

    wrapper = tmp_path / "bin" / "c++"
    wrapper.parent.mkdir()
    wrapper.write_text(EDIT_AFTER_COMPILING.format(cxx=shutil.which("c++"), flag=tmp_path / "edited",
                                                   header=tiny_kernel / "value.h"))
    wrapper.chmod(0o755)
    env = {"CXX": str(wrapper), "KWB_CXX": "", "TORCH_EXTENSIONS_DIR": str(tmp_path / "fresh-root")}
    first = run_python(LOAD_TINY.format(folder=str(tiny_kernel)), env=env)
    assert first.returncode == 0 and (tmp_path / "edited").exists(), first.stderr[-3000:]
    assert json.loads(first.stdout.strip().splitlines()[-1])["value"] == 2.0, first.stdout
    again = run_python(LOAD_TINY.format(folder=str(tiny_kernel)), env=env)
    assert json.loads(again.stdout.strip().splitlines()[-1]) == {"compiled": False, "value": 2.0}, again.stdout


PYTHON_ENTRY = """\
#include <torch/csrc/utils/pybind.h>
#include "kwb_library.h"

// The op through the dispatcher, from C++, and a number that says which build answered.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("twice", [](const at::Tensor& x) { return kwb::typed_op<at::Tensor(const at::Tensor&)>("twice").call(x); });
  m.def("build", [] { return BUILD; });
}
"""


@pytest.mark.slow
def test_a_kernel_with_a_python_entry_is_imported_beside_its_ops_and_reloads_after_an_edit(tmp_path):
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "defs.cpp").write_text(
        '#include <ATen/ops/mul.h>\n#include "kwb_library.h"\n'
        'namespace { at::Tensor twice(const at::Tensor& x) { return at::mul(x, 2); } }\n'
        'KWB_LIBRARY(m) { m.def("twice(Tensor x) -> Tensor"); }\nKWB_LIBRARY_IMPL(m, CPU) { m.impl("twice", &twice); }\n')
    (folder / "entry_python.cpp").write_text(PYTHON_ENTRY.replace("BUILD", "1"))
    first = wb.load(folder, device="cpu")
    x = torch.arange(3.0)
    assert first.module.build() == 1 and first.module.twice(x).tolist() == [0.0, 2.0, 4.0]
    assert first.twice(x).tolist() == [0.0, 2.0, 4.0]  # the op itself, as before
    with pytest.raises(TypeError):
        first.module.twice("not a tensor")
    (folder / "entry_python.cpp").write_text(PYTHON_ENTRY.replace("BUILD", "2"))
    second = wb.load(folder, device="cpu")
    # the edited unit's module, in the same process; the first stays as it was
    assert second.module.build() == 2 and second.module.twice(x).tolist() == [0.0, 2.0, 4.0]
    assert first.module.build() == 1 and second.module is not first.module
    # ops.py edited, the C++ not: the same library under a new namespace, whose entry calls the
    # new namespace's op (its C++ looked its op up once, under the namespace it was loaded with)
    (folder / "ops.py").write_text("def register(ops):\n    return None\n")
    third = wb.load(folder, device="cpu")
    assert third.namespace != second.namespace and third.library_path == second.library_path
    for k in (second, third):
        with _OpsCalled() as called:
            k.module.twice(x)
        assert called.namespaces == [k.namespace]


class _OpsCalled(TorchDispatchMode):
    def __enter__(self):
        self.namespaces = []
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.namespace.startswith("aten"):
            self.namespaces.append(func.namespace)
        return func(*args, **(kwargs or {}))
