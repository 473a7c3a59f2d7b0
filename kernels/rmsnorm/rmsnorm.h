// rmsnorm's launch interface, shared by rmsnorm.cpp and rmsnorm.cu (no torch headers).
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, over the last dimension; the parameter structs are kwb_norm.h's.
#pragma once
#include "kwb_norm.h"

// Rows of each workspace plane rmsnorm_backward_cuda needs (its workspace is 1 x rows x cols floats).
int64_t rmsnorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned);

// Each returns nullptr on success, else CUDA's error string. aligned: every pointer is 16-byte
// aligned (then rows that are whole 16-byte vectors use them). fp32, fp16 and bf16.
const char* rmsnorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
const char* rmsnorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
