"""torch's facts read from its files (build/torch_facts.py) are torch's own answers, and a build
is planned without importing torch, so `kwb build` starts its compilers before `import torch`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench.jit import torch_facts

ROOT = Path(__file__).resolve().parents[1]


def _fresh_python(code: str, **env) -> str:
    """code's stdout from a new interpreter (torch not imported unless code imports it)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, **env}, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_version_facts_are_torchs():
    base = torch_facts.package_dir()
    assert base == Path(torch.__file__).resolve().parent
    facts = torch_facts.version_file(base)
    assert facts["__version__"] == torch.__version__
    assert facts.get("cuda") == torch.version.cuda
    assert (facts.get("git_version") or "") == (getattr(torch.version, "git_version", "") or "")


def test_abi_read_from_libc10_is_torchs():
    code = ("import sys; from workbench.jit import torch_facts; "
            "print(torch_facts.cxx11_abi(torch_facts.package_dir()), 'torch' in sys.modules)")
    abi, imported = _fresh_python(code).split()
    assert imported == "False"
    assert abi == str(bool(torch._C._GLIBCXX_USE_CXX11_ABI))


@pytest.mark.parametrize("env", [None, "default", "avx2", "bogus"])
def test_cpu_capability_is_torchs(env):
    """By torch's rule, with ATEN_CPU_CAPABILITY unset, lowering, or a value torch ignores."""
    extra = {} if env is None else {"ATEN_CPU_CAPABILITY": env}
    if env is not None:
        extra["TORCH_CPP_LOG_LEVEL"] = "ERROR"  # torch warns about the bogus value on stderr
    ours = _fresh_python("import sys; from workbench.jit import torch_facts; "
                         "assert 'torch' not in sys.modules; print(torch_facts.cpu_capability())", **extra)
    theirs = _fresh_python("import torch; print(torch.backends.cpu.get_cpu_capability())", **extra)
    assert ours == theirs


def test_driver_agrees_with_torch_on_the_gpu():
    found = torch_facts.driver_gpu_capability()
    if torch.cuda.is_available():
        assert found == torch.cuda.get_device_capability()
    else:
        assert found is None


def test_a_build_is_planned_without_importing_torch(tmp_path):
    """Everything up to the compiler's start (sources, device choice, flags, key, cache lookup)
    leaves torch unimported; loading the result is what imports it."""
    code = f"""
import json, sys
from pathlib import Path
from workbench.jit import builder, sources
from workbench.jit.build_spec import build_spec
from workbench.jit.parallel import load_all  # noqa: F401
source = sources.resolve("relu_scale")
spec = build_spec(source, None, Path({str(tmp_path)!r}))
config = builder.make_config(spec)
builder.find_cached(spec, config)
print(json.dumps(["torch" in sys.modules, config.versions["torch"], spec.device]))
"""
    imported, version, device = json.loads(_fresh_python(code, KWB_CUDA_ARCH="9.0"))
    assert imported is False
    assert version == torch.__version__
    assert device == ("cuda" if torch.cuda.is_available() and torch_facts.driver_gpu_capability() else "cpu")
