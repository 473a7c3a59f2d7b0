// The launch interface of the two normalizations over the last dimension, LayerNorm and
// RMSNorm, shared by their binding .cpp and .cu files (no torch headers). One implementation
// serves both (kwb_norm.cuh): RMSNorm is LayerNorm without the mean and the bias.
//
//   layernorm: y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(mean((x - mean)^2) + eps)
//   rmsnorm:   y = x * rstd * w,               rstd = 1 / sqrt(mean(x^2) + eps)
#pragma once
#include "kwb_dtype.h"

namespace kwb {

struct NormParams {
  const void* x;       // rows x cols
  const void* weight;  // cols
  const void* bias;    // cols (LayerNorm only)
  void* y;             // rows x cols, written in full
  float* mean;         // rows, written in full (LayerNorm only): saved for backward
  float* rstd;         // rows, written in full: saved for backward
  int64_t rows, cols;
  float eps;
};

struct NormBackwardParams {
  const void* grad;    // dL/dy, rows x cols
  const void* x;       // rows x cols
  const void* weight;  // cols
  const float* mean;   // rows (LayerNorm only)
  const float* rstd;   // rows
  void* grad_x;        // rows x cols, written in full
  void* grad_weight;   // cols, written in full: sum over rows of grad * xhat
  void* grad_bias;     // cols, written in full (LayerNorm only): sum over rows of grad
  float* workspace;    // workspace_rows x planes x cols: partial column sums (planes: grad_w, grad_b)
  int64_t rows, cols;
};

}  // namespace kwb
