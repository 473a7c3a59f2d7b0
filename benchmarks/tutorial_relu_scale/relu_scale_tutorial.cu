// relu_scale "the tutorial way": one .cu holding the kernel, a torch::Tensor wrapper and the
// pybind11 module, loaded with torch.utils.cpp_extension.load(). It is the baseline that
// benchmarks/jit_loop.py compares kwb's edit-reload loop against.
//
// y = max(x, 0) * (alpha * EDIT_SCALE + TUTORIAL_OFFSET). Both extra terms are no-ops (1.0f
// and 0.0f) as shipped; the benchmark edits the literal marked EDIT_SCALE (a .cu edit) and
// the define in relu_scale_tutorial.h (a header edit) in a temporary copy, so every edit
// changes the output by a predictable amount.
#include <torch/extension.h>
// c10's stream and guard headers rather than ATen/cuda/CUDAContext.h, which also pulls in the
// cuBLAS/cuSPARSE headers that a bare CUDA toolkit may not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "relu_scale_tutorial.h"

template <typename scalar_t>
__global__ void relu_scale_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                  float alpha, int64_t n) {
  const float a = alpha * 1.0f /*EDIT_SCALE*/ + TUTORIAL_OFFSET;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(x[i]);
    y[i] = static_cast<scalar_t>(v < 0.0f ? 0.0f : v * a);
  }
}

torch::Tensor relu_scale(torch::Tensor x, double alpha) {
  TORCH_CHECK(x.is_cuda(), "relu_scale: x must be a CUDA tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "relu_scale", [&] {
    relu_scale_kernel<scalar_t><<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), static_cast<float>(alpha), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("relu_scale", &relu_scale, "y = max(x, 0) * alpha (CUDA)");
}
