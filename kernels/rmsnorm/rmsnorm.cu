// rmsnorm CUDA kernels: RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight. The kernels are kwb_norm.cuh's, shared with
// LayerNorm (kCentered = true there); this file picks RMSNorm's.
#include "kwb_norm.cuh"
#include "rmsnorm.h"

namespace {
constexpr bool kCentered = false;
}  // namespace

int64_t rmsnorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::norm_backward_workspace_rows<kCentered>(rows, cols, dtype, aligned);
}

const char* rmsnorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::norm_forward_cuda<kCentered>(p, dtype, aligned, stream);
}

const char* rmsnorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::norm_backward_cuda<kCentered>(p, dtype, aligned, stream);
}
