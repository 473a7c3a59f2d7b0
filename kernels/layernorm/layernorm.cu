// layernorm CUDA kernels: LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias. The kernels are kwb_norm.cuh's, shared with
// RMSNorm (kCentered = false there); this file picks LayerNorm's.
#include "kwb_norm.cuh"
#include "layernorm.h"

namespace {
constexpr bool kCentered = true;
}  // namespace

int64_t layernorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::norm_backward_workspace_rows<kCentered>(rows, cols, dtype, aligned);
}

const char* layernorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::norm_forward_cuda<kCentered>(p, dtype, aligned, stream);
}

const char* layernorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::norm_backward_cuda<kCentered>(p, dtype, aligned, stream);
}
