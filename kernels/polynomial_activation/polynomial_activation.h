// polynomial_activation's launch interface, shared by the .cpp and the .cu (no torch headers).
#pragma once
#include "kwb_dtype.h"

struct PolynomialParams {
  const void* x;  // n elements of the dtype
  void* y;        // n elements, written in full
  int64_t n;
};

struct PolynomialBackwardParams {
  const void* grad;  // dL/dy, n elements
  const void* x;     // the forward input, n elements
  void* grad_x;      // dL/dx = grad * (2x + 1), n elements, written in full
  int64_t n;
};

// Each returns nullptr on success, else CUDA's error string.
const char* polynomial_activation_cuda(const PolynomialParams& p, kwb::DType dtype, cudaStream_t stream);
const char* polynomial_activation_backward_cuda(const PolynomialBackwardParams& p, kwb::DType dtype,
                                                cudaStream_t stream);
