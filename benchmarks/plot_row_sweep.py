"""The row-length sweep of softmax, layernorm and rmsnorm as one plot: % of the copy ceiling
against the row length (256 to 262144 at 2^26 elements), kwb beside torch.compile.

    python benchmarks/plot_row_sweep.py benchmarks/results/<device>/<date>-<commit>/bench.csv [out.png]

The CSV comes from `kwb bench softmax layernorm rmsnorm --sweep --dtype bf16 --no-backward
--baselines compile --out DIR` on the GPU machine (it writes DIR/<device>/bench.csv), kept as
benchmarks/results/<device>/<date>-<commit>/bench.csv (the H100's: 2026-11-22-100cba7).
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from workbench import results


def main() -> None:
    csv = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else csv.with_name("row_sweep.png")
    rows = [r for r in results.read(csv) if r["status"] == "ok" and r["pct_of_ceiling"] not in ("", None)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for op, color in (("softmax", "C0"), ("layernorm", "C1"), ("rmsnorm", "C2")):
        for provider, style in (("kwb", "-o"), ("torch.compile", ":x")):
            pts = sorted((int(str(r["shape"]).split("x")[1]), float(r["pct_of_ceiling"]))
                         for r in rows if r["op"] == op and r["provider"] == provider)
            if pts:
                ax.plot(*zip(*pts), style, color=color, label=f"{op} ({provider})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("row length (elements; rows = 2^26 / length)")
    ax.set_ylabel("% of the copy ceiling")
    ax.set_ylim(0, 105)
    ax.axhline(85, color="gray", lw=0.5)
    first = results.read(csv)[0]
    ax.set_title(f"bf16 forward, {first.get('device_name', '')}, torch {first.get('torch', '')}", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
