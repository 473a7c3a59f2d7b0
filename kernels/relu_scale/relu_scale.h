// relu_scale's launch interface, shared by relu_scale.cpp and relu_scale.cu (no torch headers).
#pragma once
#include "kwb_dtype.h"

struct ReluScaleParams {
  const void* x;     // n elements of the dtype
  void* y;           // n elements, written in full
  int64_t n;
  double alpha;
};

struct ReluScaleBackwardParams {
  const void* grad;  // dL/dy, n elements
  const void* x;     // the forward input, n elements
  void* grad_x;      // dL/dx, n elements, written in full
  int64_t n;
  double alpha;
};

// The training forward: y as relu_scale's, and one bit per element (!(x <= 0)) for the backward,
// bit j of mask[i] for element 8 i + j: n / 8 bytes to save instead of x's n elements.
struct ReluScaleTrainParams {
  const void* x;     // n elements of the dtype
  void* y;           // n elements, written in full
  uint8_t* mask;     // (n + 7) / 8 bytes, written in full
  int64_t n;
  double alpha;
};

struct ReluScaleMaskedBackwardParams {
  const void* grad;     // dL/dy, n elements
  const uint8_t* mask;  // the training forward's bits
  void* grad_x;         // dL/dx, n elements, written in full
  int64_t n;
  double alpha;
};

inline int64_t relu_scale_mask_bytes(int64_t n) { return (n + 7) / 8; }

// Each returns nullptr on success, else CUDA's error string.
const char* relu_scale_cuda(const ReluScaleParams& p, kwb::DType dtype, cudaStream_t stream);
const char* relu_scale_backward_cuda(const ReluScaleBackwardParams& p, kwb::DType dtype,
                                     cudaStream_t stream);
const char* relu_scale_train_cuda(const ReluScaleTrainParams& p, kwb::DType dtype, cudaStream_t stream);
const char* relu_scale_masked_backward_cuda(const ReluScaleMaskedBackwardParams& p, kwb::DType dtype,
                                            cudaStream_t stream);
