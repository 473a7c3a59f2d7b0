// rmsnorm CUDA kernels: RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight. The kernels are kwb_norm.cuh's, shared with
// LayerNorm (kCentered = true there); this file picks the element type.
#include "kwb_norm.cuh"
#include "rmsnorm.h"

namespace {
constexpr bool kCentered = false;
}  // namespace

int64_t rmsnorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  int64_t ws_rows = 0;
  KWB_FLOAT_SWITCH(dtype, T, [&] {
    ws_rows = kwb::norm_workspace_rows<T>(rows, cols, aligned);
    return static_cast<const char*>(nullptr);
  });
  return ws_rows;
}

const char* rmsnorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return kwb::norm_forward<T, kCentered>(p, aligned, stream); });
}

const char* rmsnorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return kwb::norm_backward<T, kCentered>(p, aligned, stream); });
}
