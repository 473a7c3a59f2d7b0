"""The terminal tables at a terminal's width: a name is never cut."""
from __future__ import annotations

from typing import ClassVar

from rich.console import Console

from cache_tools.commands import resource_table
from kwb_store.resources import FunctionResources
from workbench.report.render import bench_table, check_table, headline_table

NAMES = ["linear_gelu_tanh fwd+bwd", "relu_scale_backward", "polynomial_activation_backward"]


def shown(table, width: int = 120) -> str:
    console = Console(width=width, record=True, highlight=False)
    console.print(table)
    return console.export_text()


def bench_rows() -> list[dict]:
    rows = []
    for op in NAMES:
        for provider, us in (("kwb", 812.25), ("eager", 1402.5), ("torch.compile", 998.75), ("vendor", 903.0)):
            rows.append({"kernel": op.split()[0], "op": op, "dtype": "bfloat16", "shape": "16384x4096", "numel": 16384 * 4096,
                         "provider": provider, "method": "cuda_event", "median_us": us, "p20_us": us - 1.5, "p80_us": us + 2.25,
                         "status": "ok", "gbps": 1234.0, "pct_of_ceiling": 41.2, "tflops": 123.4, "speedup_vs_eager": 1.73,
                         "speedup_vs_compile": 1.23, "speedup_vs_vendor": 1.11, "registers": 40, "spill_bytes": 0, "occupancy_pct": 75.0})
    return rows


class FakeCheck:
    target, device, seed = "linear_gelu", "cuda", 1234567890
    notes: ClassVar[list] = []

    def __init__(self):
        self._rows = [{"kernel": "k", "op": op, "what": what, "dtype": dtype, "shape": shape, "passed": True, "max_abs": 1.5e-3, "max_rel": 2.5e-2,
                       "rel_l2": 3.5e-4, "atol": 1e-2, "rtol": 1.6e-2, "rel_l2_tol": 1e-3, "detail": ""}
                      for op in NAMES for what in ("output", "grad weight") for dtype in ("bfloat16", "float16")
                      for shape in ("0", "1", "37", "199", "760", "1128x4096")]
        self.cases = self._rows
        self.failures: list = []
        self.passed = True

    def rows(self):
        return self._rows


def test_no_table_cuts_an_op_name_at_120_columns():
    tables = {"headline": headline_table(bench_rows(), title="Speed at each op's largest size"),
              "bench": bench_table(bench_rows(), title="bench"),
              "check": check_table(FakeCheck()), "check -v": check_table(FakeCheck(), verbose=True)}
    for what, table in tables.items():
        text = shown(table)
        assert "…" not in text, (what, text)
        for name in NAMES:
            assert name in text, (what, name, text)


def test_the_resource_table_keeps_function_names_whole():
    names = ["relu_scale_backward_kernel<float>", "linear_gelu_tanh_fwd_bwd_kernel<__nv_bfloat16, 128>"]
    functions = [FunctionResources(name=n, mangled=n, source="k.cu", arch="sm_90", registers=40, spill_stores=0, spill_loads=0,
                                   stack_bytes=0, static_smem=4096, constant_bytes=0) for n in names]
    text = shown(resource_table(functions, indent=4), width=80)
    assert "…" not in text, text
    for name in names:
        assert name in text, text
