// layernorm's launch interface, shared by layernorm.cpp and layernorm.cu (no torch headers).
// LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dimension; the parameter structs are kwb_norm.h's.
#pragma once
#include "kwb_norm.h"

// Rows of each workspace plane layernorm_backward_cuda needs (its workspace is rows x 2 x cols floats).
int64_t layernorm_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned);

// Each returns nullptr on success, else CUDA's error string. aligned: every pointer is 16-byte
// aligned (then rows that are whole 16-byte vectors use them). fp32, fp16 and bf16.
const char* layernorm_cuda(const kwb::NormParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
const char* layernorm_backward_cuda(const kwb::NormBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
