"""A numpy model of LayerNorm's long-row statistics in fp32, to size the error of each way of
computing them (the GPU test's tolerances and kernels/layernorm/NOTES.md come from it).

    python benchmarks/layernorm_stats_model.py

Rows of 20000 fp32 values around 1000 with one value 1e4 away, as the GPU test builds them:
- "shifted": the old one pass, sums of x - x[0] and (x - x[0])^2, var = E[d^2] - E[d]^2;
- "chan": the shipped path, each 4-value vector's (count, mean, M2) merged into a thread's
  running triple, then across 1024 threads by the same merge (warp butterfly, then warps in
  order), as kwb_norm.cuh's norm_forward_loop and kwb_rowwise.cuh's RowReducer do.
And rows of 4096 (fp32's norm_forward_reread), the same offset and outlier:
- "shifted" as above;
- "equal halves": the shipped kernel, each thread's 16 values (columns 4t + 1024i + j) centered on
  their own mean, then merged in equal halves (no division) over the warp's butterfly and a tree
  over its 8 warps.
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


def merge_equal_halves(mean, m2, other_mean, other_m2, n):
    d = (other_mean - mean).astype(f)
    return (f(0.5) * (mean + other_mean)).astype(f), ((m2 + other_m2) + d * d * f(0.5 * n)).astype(f)


def equal_halves(x):
    """norm_forward_reread's statistics of a row of 4096 (256 threads of 16 values)."""
    v = x.reshape(4, 256, 4).transpose(1, 0, 2).reshape(256, 16)  # thread t: columns 4t + 1024i + j
    mean = (v.sum(1, dtype=f) * f(1 / 16)).astype(f)
    m2 = ((v - mean[:, None]) ** 2).sum(1, dtype=f).astype(f)
    n, lanes = 16.0, np.arange(256)
    for o in (1, 2, 4, 8, 16):  # the butterfly within each warp
        mean, m2 = merge_equal_halves(mean, m2, mean[lanes ^ o], m2[lanes ^ o], n)
        n *= 2
    wm, wm2 = mean[::32].copy(), m2[::32].copy()  # each warp's, as its lane 0 writes them
    step = 1
    while step < 8:
        for k in range(0, 8, 2 * step):
            wm[k], wm2[k] = merge_equal_halves(wm[k], wm2[k], wm[k + step], wm2[k + step], n)
        step, n = step * 2, n * 2
    return float(wm[0]), float(wm2[0] / f(len(x)))


def worst_errors(cols: int, methods, rng) -> dict:
    worst = {name: [0.0, 0.0] for name, _ in methods}
    for _ in range(20):
        x = (rng.standard_normal(cols) + 1e3).astype(f)
        x[0] += f(1e4)
        xd = x.astype(np.float64)
        for name, fn in methods:
            mean, var = fn(x)
            w = worst[name]
            w[0] = max(w[0], abs(mean - xd.mean()))
            w[1] = max(w[1], abs(var - xd.var()) / xd.var())
    return worst


def main() -> None:
    rng = np.random.default_rng(0)
    for cols, methods in ((COLS, (("shifted", shifted), ("chan", chan))),
                          (4096, (("shifted", shifted), ("equal halves", equal_halves)))):
        print(f"rows of {cols}")
        for name, (em, ev) in worst_errors(cols, methods, rng).items():
            print(f"  {name:12s} mean abs error {em:.1e}   variance relative error {ev:.1e}")


if __name__ == "__main__":
    main()
