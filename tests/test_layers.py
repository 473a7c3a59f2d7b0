"""The package's rooms import one way, read from the source (every import statement, at any
depth, relative ones resolved): jit <- harness <- report <- the faces; kwb_store (the cache
format) stands alone and cache_tools (`kwb cache`) stands on it alone. A new import that breaks
the rule fails here, naming the file and the line."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FACES = {"workbench.cli", "workbench.magics", "workbench.doctor", "workbench.runner"}
# What each room may not import (a module, or anything under it).
FORBIDDEN = {
    "workbench.jit": {"workbench.harness", "workbench.report", *FACES},
    "workbench.harness": {"workbench.report", *FACES},
    "workbench.report": FACES,
    "cache_tools": {"workbench", "torch"},
    "kwb_store": {"workbench", "cache_tools", "torch"},
}
PACKAGES = ("workbench", "cache_tools", "kwb_store")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _public_modules() -> dict[str, str]:
    """workbench's short module names ("workbench.spec") and the rooms' modules they are, read
    from the front door's _PUBLIC_MODULES without importing it."""
    tree = ast.parse((ROOT / "workbench" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_PUBLIC_MODULES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("workbench/__init__.py has no _PUBLIC_MODULES")


PUBLIC = _public_modules()


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names imported from it) for every import in the file; the short
    public names (workbench.spec, `from workbench import plots`) as the rooms' modules they are."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [a.name for a in node.names]
            found.append((node.lineno, PUBLIC.get(base, base), names))
            # `from . import loader` imports the module workbench.jit.loader
            found += [(node.lineno, f"{base}.{n}", []) for n in names if (ROOT / Path(*f"{base}.{n}".split("."))).with_suffix(".py").exists()]
            found += [(node.lineno, PUBLIC[f"{base}.{n}"], []) for n in names if f"{base}.{n}" in PUBLIC]
    return [(line, PUBLIC.get(module, module), names) for line, module, names in found]


def _room(module: str) -> str | None:
    return next((room for room in FORBIDDEN if module == room or module.startswith(room + ".")), None)


def _files():
    for folder in PACKAGES:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _under(module: str, target: str) -> bool:
    return module == target or module.startswith(target + ".")


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_room_imports_only_what_it_may(path):
    module = _module_name(path)
    room = _room(module)
    if room is None:
        return  # the front door and the faces may import every room
    broken = []
    for line, imported, names in _imports(path):
        if any(_under(imported, target) for target in FORBIDDEN[room]):
            if imported == "workbench" and names == ["__version__"] and room not in ("cache_tools", "kwb_store"):
                continue  # the one version string lives in the front door's module
            broken.append(f"{path.relative_to(ROOT)}:{line} imports {imported} ({room} may not)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_a_package(path):
    module = _module_name(path)
    top = module.split(".")[0] if module.split(".")[0] != "workbench" else ".".join(module.split(".")[:2])
    broken = []
    for line, imported, names in _imports(path):
        other = imported.split(".")[0] if imported.split(".")[0] != "workbench" else ".".join(imported.split(".")[:2])
        if (other in PACKAGES or other.startswith(("workbench.", "cache_tools", "kwb_store"))) and other != top:
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                broken.append(f"{path.relative_to(ROOT)}:{line} imports {', '.join(private)} from {imported}")
    assert not broken, "\n".join(broken)


def test_every_package_is_a_room_or_the_front_door():
    """kwb_store and cache_tools are rooms of their own (their files are checked above); no
    package of the repository's is left out of the check."""
    assert {"kwb_store", "cache_tools"} <= set(FORBIDDEN)
    assert [_room(_module_name(p)) for p in sorted((ROOT / "kwb_store").rglob("*.py"))] == \
        ["kwb_store"] * len(list((ROOT / "kwb_store").rglob("*.py")))
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"kernels"} <= set(PACKAGES), packages


def test_no_two_modules_share_a_file_name():
    """One name, one job: `from .locks import` or a traceback's file name says which module."""
    names = [p.name for folder in PACKAGES for p in (ROOT / folder).rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_the_store_imports_nothing_of_the_rooms_above_it():
    # the probe of test_the_import_reader_sees_a_violation, for the kwb_store room
    bad = ROOT / "kwb_store" / "_layers_probe.py"
    bad.write_text("def f():\n    from cache_tools import api\n    import workbench.jit.notices\n    import torch\n"
                   "    from . import layout\n")
    try:
        found = [imported for _, imported, _ in _imports(bad)]
        assert [m for m in found if any(_under(m, t) for t in FORBIDDEN["kwb_store"])] == \
            ["cache_tools", "cache_tools.api", "workbench.jit.notices", "torch"]
        assert "kwb_store.layout" in found
    finally:
        bad.unlink()


def test_the_rule_is_written_in_each_rooms_docstring():
    for room in ("jit", "harness", "report"):
        doc = ast.get_docstring(ast.parse((ROOT / "workbench" / room / "__init__.py").read_text())) or ""
        assert "never imports" in doc, f"workbench/{room}/__init__.py must say what it never imports"
    for room in ("cache_tools", "kwb_store"):
        doc = ast.get_docstring(ast.parse((ROOT / room / "__init__.py").read_text())) or ""
        assert "imports neither" in doc, f"{room}/__init__.py must say what it never imports"


def test_the_import_reader_sees_a_violation():
    # the check itself: relative imports of the report room, and its modules under their short
    # public names, from a harness module are all caught
    bad = ROOT / "workbench" / "harness" / "_layers_probe.py"
    bad.write_text("def f():\n    from ..report import render\n    from . import spec\n"
                   "    from workbench import plots\n    import workbench.notebook\n    from workbench.plots import save\n")
    try:
        found = [(imported, names) for _, imported, names in _imports(bad)]
        assert ("workbench.report", ["render"]) in found and ("workbench.harness", ["spec"]) in found
        assert [m for m, _ in found if _under(m, "workbench.report")] == \
            ["workbench.report", "workbench.report.render", "workbench.report.plots", "workbench.report.notebook",
             "workbench.report.plots"]
    finally:
        bad.unlink()


def test_kernels_common_holds_kernel_math_and_the_loaders_headers_live_in_the_core():
    """kernels/common is what kernels compute with; what the builder force-includes or puts in
    front of a user's source (op registration, load_inline's preludes, the lighter torch
    headers) is workbench/jit/include's."""
    common = ROOT / "kernels" / "common"
    core = ROOT / "workbench" / "jit" / "include"
    loaders = {"kwb_library.h", "kwb_torch_library.h", "kwb_deferred_registration.h", "kwb_inline.h", "kwb_inline.cuh",
               "kwb_light_torch", "kwb_light_torch_py"}
    assert loaders <= {p.name for p in core.iterdir()}
    assert not loaders & {p.name for p in common.iterdir()}
    for header in common.iterdir():
        text = header.read_text() if header.is_file() else ""
        assert "torch::Library" not in text and "PYBIND11_MODULE" not in text, f"{header.name} registers ops"
    # deferred registration is written once: both macro families record blocks in one list
    assert sum("std::vector<Block>& blocks()" in p.read_text() for p in core.glob("*.h")) == 1


def test_one_compile_and_cache_path_owns_the_shared_steps():
    """Both compilers (nvcc/ninja, NVRTC) sit behind compile_cache.compile_cached: neither takes
    the entry's lock, loops over attempts, builds a Manifest or words the spill notice itself,
    and neither reads an architecture or an argument of a front door (build_spec does)."""
    jit = ROOT / "workbench" / "jit"
    for backend in ("builder.py", "raw_kernel.py"):
        text = (jit / backend).read_text()
        assert "compile_cache.compile_cached(" in text and "compile_cache.write_manifest(" in text, backend
        for own in ("Manifest(", "spills registers", "build_lock(", "until_inputs_hold(", "for _ in range(", "parse_archs("):
            assert own not in text, f"{backend} does {own!r} itself"
        assert "def prepare(" in text and "def cached(" in text and "def compile(" in text, backend
    assert "def parse_archs(" in (jit / "toolchain.py").read_text()
    shared = (jit / "compile_cache.py").read_text()
    assert shared.count("build_lock(") >= 2 and "def compile_cached(" in shared


def test_every_front_door_only_constructs_a_build_spec():
    """load, load_inline, cuda_kernel and the CLI construct a BuildSpec and hand it on whole."""
    jit = ROOT / "workbench" / "jit"
    assert "build_spec(" in (jit / "loader.py").read_text()
    assert (jit / "inline.py").read_text().count("load_source(build_spec(") == 2
    assert "raw_kernel_spec(" in (jit / "raw_kernel.py").read_text()
    assert "build_spec(" in (ROOT / "workbench" / "cli.py").read_text()
    for name in ("builder.py", "raw_kernel.py", "loader.py"):
        tree = ast.parse((jit / name).read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")):
            if fn.name in {"load", "cuda_kernel", "flag_list", "compiler_flags", "torch_device", "refuse_unsupported"}:
                continue  # the front doors themselves and their argument readers
            args = [a.arg for a in fn.args.args]
            assert not {"extra_cflags", "extra_cuda_cflags", "options", "arch", "include_dirs"} & set(args), \
                f"{name}:{fn.name} takes a build setting loose instead of a BuildSpec"


def _runtime_imports(path: Path) -> set[str]:
    """The jit modules a file imports when it runs (imports under `if TYPE_CHECKING:` aside)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in typing_only and node.level == 1:
            found |= {node.module} if node.module else {a.name for a in node.names}
    return found


def test_launching_lives_apart_from_compiling():
    """Kernel, RawKernel, raw_op and the driver calls load and launch what was built; none of
    them imports a compiler (nvcc/ninja, NVRTC) or the compile-and-cache path."""
    jit = ROOT / "workbench" / "jit"
    compiling = {"builder", "raw_kernel", "nvrtc", "ninja", "compile_cache", "pch", "light_headers", "build_spec"}
    for launcher in ("kernel.py", "raw_launch.py", "raw_op.py", "cuda_driver.py"):
        assert not _runtime_imports(jit / launcher) & compiling, launcher
