"""The walkthrough notebooks: each runs top to bottom on this machine (the CPU in CI) through
the command that regenerates them (notebooks/run.py, nbclient), with plots and without an
error other than the cells meant to show one; and the committed copies carry a GPU run's
outputs, so a reader sees real plots without running anything."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

nbformat = pytest.importorskip("nbformat", reason="running notebooks needs nbformat, nbclient and ipykernel (pip install -e '.[test]')")
pytest.importorskip("nbclient", reason="running notebooks needs nbclient (pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="running notebooks needs ipykernel (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "notebooks" / "run.py"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def shown_text(nb) -> str:
    parts = []
    for o in outputs(nb):
        parts.append(o.get("text", ""))
        parts += [str(v) for k, v in o.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def test_there_is_a_workflow_notebook_one_per_kernel_and_bring_your_own():
    import workbench as wb

    stems = [p.stem.split("_", 1)[1] for p in NOTEBOOKS]
    assert stems[0] == "workflow" and stems[-1] == "bring_your_own"
    assert sorted(stems[1:-1]) == sorted(wb.list_kernels())
    assert not (ROOT / "notebooks" / "drafts").exists(), "every notebook is run and committed, none kept aside"


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_runs_top_to_bottom_here(path, tmp_path):
    done = subprocess.run([sys.executable, str(RUN), path.stem, "--out", str(tmp_path), "--timeout", "600"],
                          capture_output=True, text=True, timeout=1400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a cell did not run"
    errors = [c for c in code if any(o.output_type == "error" for o in c.outputs)]
    assert all("raises-exception" in c.metadata.get("tags", []) for c in errors), [c.source[:80] for c in errors]
    text = shown_text(nb)
    if not torch.cuda.is_available():
        assert "every timing below is a CPU timing" in text
    if path.stem == "00_workflow":  # the compile error it shows on purpose reads as diagnostics
        (broken,) = errors
        (error,) = [o for o in broken.outputs if o.output_type == "error"]
        assert error.ename == "CellBuildError" and "<%%cpp broken_kernels>:3:" in "\n".join(error.traceback)
    else:
        pngs = [o for o in outputs(nb) if "image/png" in o.get("data", {})]
        assert len(pngs) >= 2, f"{path.name}: {len(pngs)} plots (an error plot and a latency plot at least)"
        assert "all passed" in text, "the notebook's check did not pass"


def test_the_committed_workflow_notebook_shows_a_compile_error_as_diagnostics():
    """What a reader sees without running anything: the broken %%cpp cell's error is the
    compiler's diagnostic at the cell's line, with no traceback."""
    nb = nbformat.read(ROOT / "notebooks" / "00_workflow.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if "raises-exception" in c.metadata.get("tags", [])]
    assert cell.source.startswith("%%cpp broken_kernels")
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert error.ename == "CellBuildError"
    shown = "\n".join(error.traceback)
    assert "<%%cpp broken_kernels>:3:" in shown and "Traceback" not in shown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebooks_carry_the_outputs_of_a_gpu_run(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), f"{path.name} is committed without outputs"
    text = shown_text(nb)
    assert "Running on NVIDIA" in text, f"{path.name}'s outputs are not from a GPU run"
    assert re.search(r"kwb \d+\.\d+\.\d+\+\w+", text), f"{path.name}'s outputs do not name the kwb version they ran"
