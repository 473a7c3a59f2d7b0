// bias_gelu's launch interface, shared by bias_gelu.cpp and bias_gelu.cu (no torch headers).
// The data is viewed as rows x cols, cols = the last dimension (the bias's length).
#pragma once
#include "kwb_dtype.h"

struct BiasGeluParams {
  const void* x;     // rows x cols
  const void* bias;  // cols
  void* y;           // rows x cols, written in full
  int64_t rows, cols;
  bool tanh;         // GELU's tanh approximation, else the exact erf form
};

struct BiasGeluBackwardParams {
  const void* grad;  // dL/dy, rows x cols
  const void* x;     // rows x cols
  const void* bias;  // cols
  void* grad_x;      // rows x cols, written in full
  void* grad_bias;   // cols, written in full: the column sums of grad_x
  void* workspace;   // workspace_rows x cols of float (double for fp64 data): partial column sums
  int64_t rows, cols;
  bool tanh;
};

// Rows of the workspace bias_gelu_backward_cuda needs (row blocks of its launch).
int64_t bias_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned);

// Each returns nullptr on success, else CUDA's error string. `aligned`: every pointer of the
// rows x cols tensors is 16-byte aligned (then cols that fill whole 16-byte vectors use them).
const char* bias_gelu_cuda(const BiasGeluParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
const char* bias_gelu_backward_cuda(const BiasGeluBackwardParams& p, kwb::DType dtype, bool aligned,
                                    cudaStream_t stream);
