"""A/B of the erf GELU's CPU gradient: bias_gelu and linear_gelu erf steps beside eager (harness)."""
import sys
import workbench as wb
rows = []
for name, op in (("bias_gelu", "bias_gelu_erf"), ("linear_gelu", "linear_gelu_erf")):
    k = wb.load(name, device="cpu")
    ops = [o.name for o in k.spec.SPEC.ops if "erf" in o.name or o.name == name]
    r = wb.bench(k, device="cpu", dtypes=["float32", "float64"], baselines="eager", backward=True, ops=ops)
    print(r, flush=True)
