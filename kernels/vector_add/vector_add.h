// vector_add's launch interface, shared by vector_add.cpp and vector_add.cu (no torch headers).
#pragma once
#include "kwb_dtype.h"

struct VectorAddParams {
  const void* a;  // n elements of the dtype
  const void* b;  // n elements
  void* c;        // n elements, written in full
  int64_t n;
};

// Returns nullptr on success, else CUDA's error string.
const char* vector_add_cuda(const VectorAddParams& p, kwb::DType dtype, cudaStream_t stream);
