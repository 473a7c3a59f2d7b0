"""workbench.notebook (what the walkthroughs show beside kwb's reports) and the plot they add:
memory traffic counted from the ops that run, source blocks cut at the right brace, the
why-fuse table, bandwidth against size."""
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
    return dict(kernel="k", op="op", provider=provider, dtype="float32", shape=str(numel), numel=numel,
                method="cuda_events", median_us=1.0, p20_us=0.9, p80_us=1.1, pct_of_ceiling=pct,
                ceiling_gbps=3000.0, device_name="GPU", torch="2.x", cuda="13.0", kwb_version="v", timestamp="2026-11-22")


def test_ceiling_by_size_draws_a_line_per_provider():
    rows = [_row(p, n, pct) for p, base in (("kwb", 90), ("eager", 45)) for n, pct in ((1 << 20, base / 3), (1 << 26, base))]
    fig = plots.ceiling_by_size(rows, "k")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert sorted(line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")) == ["eager", "kwb"]
    with pytest.raises(ValueError, match="no rows with a bytes model for kernel 'other'"):
        plots.ceiling_by_size(rows, "other")


def test_the_notebooks_device_is_where_kwb_builds():
    from workbench.build import device as devices

    assert nb.device() == devices.choose(None)
