"""workbench.notebook (what the walkthroughs show beside kwb's reports) and the plot they add:
memory traffic counted from the ops that run, source blocks cut at the right brace, the
why-fuse table, bandwidth against size; and kwb's live displays, saved by a notebook run
through nbclient as what they showed rather than a bare "Output()"."""
from __future__ import annotations

import pytest
import torch

from workbench import notebook as nb
from workbench import plots

F32 = 4


def test_traffic_counts_each_op_once_and_each_tensor_once():
    x = torch.randn(1000)
    t = nb.traffic(lambda x: x * x + x + 1, x)
    # x * x reads x once; (x*x) + x reads two tensors; + 1 reads one; each writes one
    assert t.ops == [("mul.Tensor", 1000 * F32, 1000 * F32), ("add.Tensor", 2000 * F32, 1000 * F32),
                     ("add.Tensor", 1000 * F32, 1000 * F32)]
    assert t.launches == 3 and t.bytes == 7000 * F32


def test_traffic_leaves_out_views_and_allocations_and_reads_broadcasts_at_their_size():
    x, b = torch.randn(100, 10), torch.randn(10)
    t = nb.traffic(lambda x, b: (x.reshape(10, 100).t() + 0).contiguous(), x, b)
    assert [op for op, _, _ in t.ops] == ["add.Tensor", "clone"]
    t = nb.traffic(lambda x, b: x + b.expand(100, 10), x, b)
    assert t.ops == [("add.Tensor", 1010 * F32, 1000 * F32)]
    assert nb.traffic(lambda x: torch.empty_like(x), x).ops == []


def test_traffic_of_writes_out_and_in_place():
    x, out = torch.randn(1000), torch.empty(1000)
    assert nb.traffic(lambda x: torch.add(x, 1, out=out), x).ops == [("add.out", 1000 * F32, 1000 * F32)]
    assert nb.traffic(lambda x: out.copy_(x), x).ops == [("copy_", 1000 * F32, 1000 * F32)]
    assert nb.traffic(lambda x: x.relu_(), x.clone()).ops == [("relu_", 1000 * F32, 1000 * F32)]


def test_why_fuse_prices_bytes_at_the_ceiling():
    x = torch.randn(1 << 20)
    table = nb.why_fuse({"eager": nb.traffic(lambda x: torch.relu(x) * 2, x),
                         "fused": nb.traffic(lambda x: torch.relu(x), x)}, ceiling=1e12)
    assert "| eager | 2 | 16.8 MB | 16.8 us |" in table and "| fused | 1 | 8.4 MB | 8.4 us |" in table


SOURCE = '''// a header comment
template <typename T>
__global__ void k(const T* x, T* y) {
  const char* s = "}";   // a } in a string and a comment
  /* { */ char c = '}';
  if (x) { y[0] = x[0]; }
}
void launch();
int after = 1;
'''


def test_source_cuts_the_block_at_its_closing_brace(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    block = nb.source(tmp_path, "k.cu", match="__global__ void k(", before=1)
    assert (block.first, block.last) == (2, 7)
    assert block.text.splitlines()[-1] == "}" and "after" not in block.text
    assert "```cuda\n" in block._repr_markdown_() and "lines 2-7" in block._repr_markdown_()
    assert nb.source(tmp_path, "k.cu", match="void launch").text == "void launch();"
    assert nb.source(tmp_path, "k.cu", lines=(8, 9)).text == "void launch();\nint after = 1;"


def test_source_names_what_is_wrong(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    with pytest.raises(ValueError, match="match: no line of k.cu contains 'nope'"):
        nb.source(tmp_path, "k.cu", match="nope")
    with pytest.raises(ValueError, match=r"lines: need 1 <= first <= last <= 9"):
        nb.source(tmp_path, "k.cu", lines=(3, 12))
    with pytest.raises(FileNotFoundError, match="missing.cu does not exist"):
        nb.source(tmp_path, "missing.cu")


def _row(provider, numel, pct):
    return {"kernel": "k", "op": "op", "provider": provider, "dtype": "float32", "shape": str(numel), "numel": numel,
            "method": "cuda_events", "median_us": 1.0, "p20_us": 0.9, "p80_us": 1.1, "pct_of_ceiling": pct,
            "ceiling_gbps": 3000.0, "device_name": "GPU", "torch": "2.x", "cuda": "13.0", "kwb_version": "v", "timestamp": "2026-11-22"}


def test_ceiling_by_size_draws_a_line_per_provider():
    rows = [_row(p, n, pct) for p, base in (("kwb", 90), ("eager", 45)) for n, pct in ((1 << 20, base / 3), (1 << 26, base))]
    fig = plots.ceiling_by_size(rows, "k")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert sorted(line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")) == ["eager", "kwb"]
    with pytest.raises(ValueError, match="no rows with a bytes model for kernel 'other'"):
        plots.ceiling_by_size(rows, "other")


def test_the_notebooks_device_is_where_kwb_builds():
    from workbench.jit import device as devices

    assert nb.device() == devices.choose(None)


# ---- live displays in a notebook nobody watches ---------------------------------------------

# rich's live display in Jupyter is this widget; a kernel with no frontend to draw it saves the
# widget's text form alone. Where ipywidgets is not installed, this stand-in shows the same.
_WIDGETS_STUB = '''
class Output:
    def __init__(self, **kwargs):
        pass
    def __repr__(self):
        return "Output()"
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def clear_output(self, wait=False):
        pass
    def close(self):
        pass
'''

_LIVE_CELLS = [
    # one build, past the second after which it shows what compiles
    ("from rich.console import Console\n"
     "from workbench import runner\n"
     "from workbench.jit import feedback\n"
     "fb = feedback.BuildFeedback('demo_kernel')\n"
     "fb.start -= 5\n"
     "fb.line('[1/2] CXX demo.cpp')\n"
     "fb.done(True)"),
    # builds side by side, on the board
    ("with feedback.BuildBoard('kernels', total=1) as board:\n"
     "    fb = feedback.BuildFeedback('demo_board')\n"
     "    fb.start -= 5\n"
     "    fb.tick()\n"
     "    fb.done(True)\n"
     "    board.one_done()"),
    # kwb run's progress bars
    ("with runner._progress(Console(stderr=True, highlight=False)) as progress:\n"
     "    task = progress.add_task('checking demo_kernel', total=3)\n"
     "    for _ in range(3):\n"
     "        progress.advance(task)"),
]


@pytest.mark.timeout(300)
def test_a_notebook_run_by_nbclient_saves_what_live_displays_showed(tmp_path):
    import importlib.util
    import os
    from pathlib import Path

    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    paths = [str(Path(__file__).resolve().parents[1])]  # this checkout's workbench
    if importlib.util.find_spec("ipywidgets") is None:
        (tmp_path / "ipywidgets").mkdir()
        (tmp_path / "ipywidgets" / "__init__.py").write_text(_WIDGETS_STUB)
        paths.insert(0, str(tmp_path))
    # as nbclient starts a kernel from a shell: nothing says a frontend draws widgets
    env = {k: v for k, v in os.environ.items() if k not in ("KWB_LIVE", "JPY_SESSION_NAME", "VSCODE_PID")}
    env["PYTHONPATH"] = os.pathsep.join(paths + [env["PYTHONPATH"]] if env.get("PYTHONPATH") else paths)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in _LIVE_CELLS])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)

    outputs = [o for cell in nb.cells for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"], [o.get("traceback") for o in outputs]
    texts = [o.get("text", "") for o in outputs] + [str(v) for o in outputs for k, v in o.get("data", {}).items() if k.startswith("text/")]
    assert not [t for t in texts if t.strip() == "Output()"], "a live display was saved as its bare placeholder"
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    shown = "\n".join(texts)
    for what in ("kwb: built demo_kernel in", "kwb: built demo_board in", "checking demo_kernel", "3/3"):
        assert what in shown, f"{what!r} is not in the saved outputs:\n{shown}"


class _Console:
    is_terminal = False
    is_jupyter = True


@pytest.mark.parametrize("env, expected", [({}, False), ({"JPY_SESSION_NAME": "nb.ipynb"}, True), ({"VSCODE_PID": "1"}, True),
                                           ({"KWB_LIVE": "1"}, True), ({"KWB_LIVE": "0", "JPY_SESSION_NAME": "nb.ipynb"}, False)])
def test_a_jupyter_kernel_draws_live_only_where_a_frontend_draws_widgets(monkeypatch, env, expected):
    from workbench.jit import feedback

    for name in ("KWB_LIVE", "JPY_SESSION_NAME", "VSCODE_PID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(feedback, "_widgets_installed", lambda: True)
    assert feedback.live(_Console()) is expected
    monkeypatch.setattr(feedback, "_widgets_installed", lambda: False)  # rich would warn and draw nothing
    assert feedback.live(_Console()) is False


@pytest.mark.timeout(300)
def test_notebooks_run_py_tells_its_kernels_no_frontend_draws_widgets(tmp_path):
    import importlib.util
    from pathlib import Path

    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    spec = importlib.util.spec_from_file_location("notebooks_run", Path(__file__).resolve().parents[1] / "notebooks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os; print(os.environ.get('KWB_LIVE'))")]), path)
    run.execute(path, tmp_path / "out.ipynb", tmp_path / "failed.ipynb", timeout=120)
    (cell,) = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert cell.outputs[0]["text"].strip() == "0"
