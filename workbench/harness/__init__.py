"""The harness room: is a kernel right, and how fast is it?

    spec (what a kernel declares) -> cases (the shared kit: dtypes, seeds, Case, selection)
    -> correctness.check() / benchmark.bench() (compare, timing) -> results (CSV rows on disk)

Imports: harness may use workbench.jit (to load kernels) and never imports workbench.report
or the faces; a report object is rendered by workbench.report through views.py's hooks, not by
itself. tests/test_layers.py checks it.
"""
