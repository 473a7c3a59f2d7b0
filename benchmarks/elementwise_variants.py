"""Variants of the elementwise map behind relu_scale, polynomial_activation and vector_add,
side by side (llm.c's dev/cuda style): each is validated, then timed beside eager PyTorch and
torch.compile with the harness. The winner went into kernels/common/kwb_elementwise.cuh.

    python benchmarks/elementwise_variants.py [--out DIR]     # needs a CUDA GPU

variant 0: grid-stride loop, 8 blocks of 256 threads per SM, one 16-byte vector per trip
           (the first kwb_elementwise.cuh)
variant 1: no loop: one 16-byte vector per thread, as many blocks as the data needs
variant 2: no loop: U=2 vectors per thread, loads issued before any store (more bytes in flight)
variant 3: no loop: U=4 vectors per thread
variant 4: variant 2 with streaming hints (ld.global.cs / st.global.cs: data used once)
variant 5: variant 3 with streaming hints
variant 6: variant 2 with 128-thread blocks

Two inputs (vector_add, c = a + b: 3 streams of memory instead of 2):
add variant 1: one 16-byte vector of each input per thread (kwb_elementwise.cuh)
add variant 2: U=2 vectors of each input per thread, every load before any store
add variant 3: U=4
"""
from __future__ import annotations

import argparse

import torch

import workbench as wb

CUDA = r"""
template <typename T> struct Relu {
  __device__ T operator()(T x) const {
    float v = kwb::to_acc<float>(x);
    return kwb::from_acc<T>(v < 0.f ? 0.f : v * 1.5f);
  }
};

template <typename V, bool kStream> __device__ __forceinline__ V load(const V* p) {
  if constexpr (kStream) {
    float4 r = __ldcs(reinterpret_cast<const float4*>(p));
    return *reinterpret_cast<V*>(&r);
  } else {
    return *p;
  }
}
template <typename V, bool kStream> __device__ __forceinline__ void store(V* p, const V& v) {
  if constexpr (kStream) __stcs(reinterpret_cast<float4*>(p), *reinterpret_cast<const float4*>(&v));
  else *p = v;
}

// Variant 0: the grid-stride loop.
template <typename T> __global__ void grid_stride(const T* in, T* out, int64_t n) {
  constexpr int kVec = 16 / sizeof(T);
  using V = kwb::Vec<T, kVec>;
  const int64_t n_vec = n / kVec;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_vec; i += (int64_t)gridDim.x * blockDim.x) {
    V a = reinterpret_cast<const V*>(in)[i], b;
#pragma unroll
    for (int j = 0; j < kVec; ++j) b.v[j] = Relu<T>{}(a.v[j]);
    reinterpret_cast<V*>(out)[i] = b;
  }
}

// Variants 1-6: each block owns U * blockDim vectors; thread t takes vectors t, t + blockDim, ...
template <typename T, int U, bool kStream> __global__ void unrolled(const T* in, T* out, int64_t n) {
  constexpr int kVec = 16 / sizeof(T);
  using V = kwb::Vec<T, kVec>;
  const int64_t n_vec = n / kVec;
  const int64_t base = blockIdx.x * (int64_t)blockDim.x * U + threadIdx.x;
  V a[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + (int64_t)u * blockDim.x;
    if (i < n_vec) a[u] = load<V, kStream>(reinterpret_cast<const V*>(in) + i);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + (int64_t)u * blockDim.x;
    if (i < n_vec) {
      V b;
#pragma unroll
      for (int j = 0; j < kVec; ++j) b.v[j] = Relu<T>{}(a[u].v[j]);
      store<V, kStream>(reinterpret_cast<V*>(out) + i, b);
    }
  }
}

template <typename T> const char* launch(const T* in, T* out, int64_t n, int variant, cudaStream_t s) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n_vec = n / kVec;
  auto blocks = [&](int threads, int u) { return (unsigned)((n_vec + (int64_t)threads * u - 1) / ((int64_t)threads * u)); };
  switch (variant) {
    case 0: grid_stride<T><<<kwb::sm_count() * 8, 256, 0, s>>>(in, out, n); break;
    case 1: unrolled<T, 1, false><<<blocks(256, 1), 256, 0, s>>>(in, out, n); break;
    case 2: unrolled<T, 2, false><<<blocks(256, 2), 256, 0, s>>>(in, out, n); break;
    case 3: unrolled<T, 4, false><<<blocks(256, 4), 256, 0, s>>>(in, out, n); break;
    case 4: unrolled<T, 2, true><<<blocks(256, 2), 256, 0, s>>>(in, out, n); break;
    case 5: unrolled<T, 4, true><<<blocks(256, 4), 256, 0, s>>>(in, out, n); break;
    case 6: unrolled<T, 2, false><<<blocks(128, 2), 128, 0, s>>>(in, out, n); break;
    default: return "no such variant";
  }
  return kwb::last_launch_error();
}

template <typename T, int U> __global__ void add_unrolled(const T* a, const T* b, T* out, int64_t n) {
  constexpr int kVec = 16 / sizeof(T);
  using V = kwb::Vec<T, kVec>;
  const int64_t n_vec = n / kVec;
  const int64_t base = blockIdx.x * (int64_t)blockDim.x * U + threadIdx.x;
  V x[U], y[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + (int64_t)u * blockDim.x;
    if (i < n_vec) { x[u] = reinterpret_cast<const V*>(a)[i]; y[u] = reinterpret_cast<const V*>(b)[i]; }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + (int64_t)u * blockDim.x;
    if (i < n_vec) {
      V z;
#pragma unroll
      for (int j = 0; j < kVec; ++j) z.v[j] = kwb::from_acc<T>(kwb::to_acc<float>(x[u].v[j]) + kwb::to_acc<float>(y[u].v[j]));
      reinterpret_cast<V*>(out)[i] = z;
    }
  }
}

const char* add_variant_launch(const float* a, const float* b, float* out, int64_t n, int variant, cudaStream_t s) {
  const int64_t n_vec = n / 4;
  auto blocks = [&](int u) { return (unsigned)((n_vec + 256LL * u - 1) / (256LL * u)); };
  switch (variant) {
    case 1: add_unrolled<float, 1><<<blocks(1), 256, 0, s>>>(a, b, out, n); break;
    case 2: add_unrolled<float, 2><<<blocks(2), 256, 0, s>>>(a, b, out, n); break;
    case 3: add_unrolled<float, 4><<<blocks(4), 256, 0, s>>>(a, b, out, n); break;
    default: return "no such variant";
  }
  return kwb::last_launch_error();
}

const char* relu_variant_launch(const void* in, void* out, int64_t n, int dtype, int variant, cudaStream_t s) {
  if (n == 0) return nullptr;
  if (dtype == 0) return launch<float>((const float*)in, (float*)out, n, variant, s);
  return launch<__nv_bfloat16>((const __nv_bfloat16*)in, (__nv_bfloat16*)out, n, variant, s);
}
"""

CPP = r"""
const char* relu_variant_launch(const void* in, void* out, int64_t n, int dtype, int variant, cudaStream_t s);
at::Tensor relu_variant(const at::Tensor& x, int64_t variant) {
  TORCH_CHECK(x.is_contiguous() && x.numel() % 8 == 0, "relu_variant: x must be contiguous with numel % 8 == 0");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "relu_variant: float or bfloat16");
  at::Tensor y = at::empty_like(x);
  KWB_CHECK_LAUNCH("relu_variant", relu_variant_launch(x.const_data_ptr(), y.mutable_data_ptr(), x.numel(),
                   x.scalar_type() == at::kFloat ? 0 : 1, (int)variant, kwb::current_stream(x)));
  return y;
}

const char* add_variant_launch(const float* a, const float* b, float* out, int64_t n, int variant, cudaStream_t s);
at::Tensor add_variant(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() % 4 == 0 && a.sizes() == b.sizes() &&
              a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "add_variant: float32, same shape, numel % 4 == 0");
  at::Tensor c = at::empty_like(a);
  KWB_CHECK_LAUNCH("add_variant", add_variant_launch(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                   c.mutable_data_ptr<float>(), a.numel(), (int)variant, kwb::current_stream(a)));
  return c;
}
"""

VARIANTS = range(7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="append the rows to DIR/<device>/bench.csv")
    args = parser.parse_args()
    k = wb.load_inline("elementwise_variants", cuda=CUDA, cpp=CPP, functions=["relu_variant", "add_variant"])
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(1 << 26, device="cuda").to(dtype)
        for v in VARIANTS:
            report = wb.bench(lambda t, v=v: k.relu_variant(t, v), lambda t: torch.relu(t) * 1.5, inputs=[(x,)],
                              name=f"relu_scale variant {v}", label=f"variant {v}",
                              baselines="eager,compile" if v == 0 else "none", bytes_moved=2 * x.numel() * x.element_size())
            rows += report.rows
            for r in report.rows:
                print(f"{r['dtype']:>5} {r['provider']:>14} {r['median_us'] or 0:9.1f} us  {r['pct_of_ceiling'] or 0:5.1f}%  {r['status']}")
            if args.out:
                report.save(args.out)
    a, b = torch.randn(1 << 26, device="cuda"), torch.randn(1 << 26, device="cuda")
    for v in (1, 2, 3):
        report = wb.bench(lambda x, y, v=v: k.add_variant(x, y, v), lambda x, y: x + y, inputs=[(a, b)],
                          name=f"vector_add variant {v}", label=f"add variant {v}",
                          baselines="eager,compile" if v == 1 else "none", bytes_moved=3 * a.numel() * 4)
        for r in report.rows:
            print(f"{r['dtype']:>5} {r['provider']:>14} {r['median_us'] or 0:9.1f} us  {r['pct_of_ceiling'] or 0:5.1f}%  {r['status']}")
        if args.out:
            report.save(args.out)


if __name__ == "__main__":
    main()
