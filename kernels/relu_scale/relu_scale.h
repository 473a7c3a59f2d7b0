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

// Each returns nullptr on success, else CUDA's error string.
const char* relu_scale_cuda(const ReluScaleParams& p, kwb::DType dtype, cudaStream_t stream);
const char* relu_scale_backward_cuda(const ReluScaleBackwardParams& p, kwb::DType dtype,
                                     cudaStream_t stream);
