"""A numpy model of LayerNorm's long-row statistics in fp32, to size the error of each way of
computing them (the GPU test's tolerances and kernels/layernorm/NOTES.md come from it).

    python benchmarks/layernorm_stats_model.py

Rows of 20000 fp32 values around 1000 with one value 1e4 away, as the GPU test builds them:
- "shifted": the old one pass, sums of x - x[0] and (x - x[0])^2, var = E[d^2] - E[d]^2;
- "chan": the shipped path, each 4-value vector's (count, mean, M2) merged into a thread's
  running triple, then across 1024 threads by the same merge (warp butterfly, then warps in
  order), as kwb_norm.cuh's norm_forward_loop and kwb_rowwise.cuh's RowReducer do.
"""
from __future__ import annotations

import numpy as np

f = np.float32
THREADS, KVEC, COLS = 1024, 4, 20000


def merge(a, b):
    """MeanM2Combine: (count, mean, M2) pairs, elementwise over arrays."""
    n = a[0] + b[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = f(1) / n
        delta = b[1] - a[1]
        mean = (a[0] * a[1] + b[0] * b[1]) * inv
        m2 = a[2] + b[2] + delta * delta * (a[0] * b[0] * inv)
    keep = n == 0
    return [np.where(keep, a[k], v).astype(f) for k, v in enumerate((n, mean, m2))]


def chan(x):
    v = x[: len(x) // KVEC * KVEC].reshape(-1, KVEC)
    vm = (v.sum(1, dtype=f) * f(1 / KVEC)).astype(f)
    vm2 = ((v - vm[:, None]) ** 2).sum(1, dtype=f).astype(f)
    st = [np.zeros(THREADS, f) for _ in range(3)]
    for i0 in range(0, len(v), THREADS):
        idx = np.arange(i0, min(i0 + THREADS, len(v)))
        t = idx - i0
        r = merge([s[t] for s in st], [np.full(len(t), f(KVEC)), vm[idx], vm2[idx]])
        for k in range(3):
            st[k][t] = r[k]
    st = [s.reshape(32, 32) for s in st]
    for o in (16, 8, 4, 2, 1):
        st = merge(st, [s[:, np.arange(32) ^ o] for s in st])
    acc = [np.array([s[0, 0]]) for s in st]
    for w in range(1, 32):
        acc = merge(acc, [np.array([st[k][w, 0]]) for k in range(3)])
    return float(acc[1][0]), float(acc[2][0] / f(len(x)))


def shifted(x):
    d = (x - x[0]).astype(f)
    s, ss = np.zeros(THREADS, f), np.zeros(THREADS, f)
    for i in range(0, len(d), THREADS):
        c = d[i:i + THREADS]
        s[: len(c)] += c
        ss[: len(c)] += c * c
    n = f(len(x))
    ds = s.sum(dtype=f) / n
    return float(x[0] + ds), float(ss.sum(dtype=f) / n - ds * ds)


def main() -> None:
    rng = np.random.default_rng(0)
    worst = {"shifted": [0.0, 0.0], "chan": [0.0, 0.0]}
    for _ in range(20):
        x = (rng.standard_normal(COLS) + 1e3).astype(f)
        x[0] += f(1e4)
        xd = x.astype(np.float64)
        for name, fn in (("shifted", shifted), ("chan", chan)):
            mean, var = fn(x)
            w = worst[name]
            w[0] = max(w[0], abs(mean - xd.mean()))
            w[1] = max(w[1], abs(var - xd.var()) / xd.var())
    for name, (em, ev) in worst.items():
        print(f"{name:8s} mean abs error {em:.1e}   variance relative error {ev:.1e}")


if __name__ == "__main__":
    main()
