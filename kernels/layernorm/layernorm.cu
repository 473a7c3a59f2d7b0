// layernorm CUDA kernels: LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias. The kernels are kwb_norm.cuh's, shared with
// RMSNorm (kCentered = false there); this file picks the element type.
#include "kwb_norm.cuh"
#include "layernorm.h"

namespace {
constexpr bool kCentered = true;
}  // namespace

int64_t layernorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  int64_t ws_rows = 0;
  KWB_FLOAT_SWITCH(dtype, T, [&] {
    ws_rows = kwb::norm_workspace_rows<T>(rows, cols, aligned);
    return static_cast<const char*>(nullptr);
  });
  return ws_rows;
}

const char* layernorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return kwb::norm_forward<T, kCentered>(p, aligned, stream); });
}

const char* layernorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return kwb::norm_backward<T, kCentered>(p, aligned, stream); });
}
