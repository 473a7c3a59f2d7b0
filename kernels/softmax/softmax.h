// softmax's launch interface, shared by softmax.cpp and softmax.cu (no torch headers).
// The data is viewed as rows x cols, cols = the last dimension; softmax runs along each row.
#pragma once
#include "kwb_dtype.h"

struct SoftmaxParams {
  const void* x;  // rows x cols
  void* y;        // rows x cols, written in full
  int64_t rows, cols;
};

struct SoftmaxBackwardParams {
  const void* grad;  // dL/dy, rows x cols
  const void* y;     // the forward's output, rows x cols
  void* grad_x;      // rows x cols, written in full
  int64_t rows, cols;
};

// Each returns nullptr on success, else CUDA's error string. aligned: every pointer is 16-byte
// aligned (then rows that are whole 16-byte vectors use them). fp32, fp16 and bf16.
const char* softmax_cuda(const SoftmaxParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
const char* softmax_backward_cuda(const SoftmaxBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
