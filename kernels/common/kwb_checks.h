// Host-side argument checks for binding .cpp files. Every message names the op, the argument
// and the rule it broke ("vector_add: b must be on the same device as a (a: cuda:0, b: cpu)"),
// so a user never has to read a stack trace to learn what was wrong.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <initializer_list>

#include "kwb_dtype.h"

#ifdef KWB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace kwb {

// Elements per CPU task: below ~32k elements a thread pool costs more than it saves.
constexpr int64_t kCpuGrain = 32768;

// Rows per CPU task for rows of `cols` elements: kCpuGrain elements' worth, at least one row.
inline int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kCpuGrain / std::max<int64_t>(cols, 1)); }

inline void check_dtype_in(const char* op, const char* arg, const at::Tensor& t,
                           std::initializer_list<at::ScalarType> allowed, const char* where) {
  for (at::ScalarType s : allowed) {
    if (t.scalar_type() == s) return;
  }
  std::string names;
  for (at::ScalarType s : allowed) {
    if (!names.empty()) names += ", ";
    names += c10::toString(s);
  }
  TORCH_CHECK_TYPE(false, op, ": ", arg, " has dtype ", t.scalar_type(), "; the ", where,
                   " implementation supports ", names);
}

inline void check_same_device(const char* op, const char* a_name, const at::Tensor& a,
                              const char* b_name, const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), op, ": ", b_name, " must be on the same device as ",
              a_name, " (", a_name, ": ", a.device(), ", ", b_name, ": ", b.device(), ")");
}

inline void check_same_dtype(const char* op, const char* a_name, const at::Tensor& a,
                             const char* b_name, const at::Tensor& b) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), op, ": ", b_name,
                   " must have the same dtype as ", a_name, " (", a_name, ": ", a.scalar_type(),
                   ", ", b_name, ": ", b.scalar_type(), ")");
}

inline void check_same_shape(const char* op, const char* a_name, const at::Tensor& a,
                             const char* b_name, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": ", b_name, " must have the same shape as ", a_name,
              " (", a_name, ": ", a.sizes(), ", ", b_name, ": ", b.sizes(), ")");
}

// Dense row-major data for raw-pointer kernels. Non-contiguous input is copied (the output is
// always contiguous, which the fake kernels in ops.py mirror).
inline at::Tensor contiguous(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// Every tensor's data starts on a 16-byte boundary: kernels may then use 16-byte vectors.
inline bool all_aligned(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->const_data_ptr()) % 16 != 0) return false;
  }
  return true;
}

inline DType to_dtype(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    case at::kDouble: return DType::Float64;
    default: TORCH_CHECK_TYPE(false, "kwb: no kernel element type for ", s);
  }
}

#ifdef KWB_WITH_CUDA
inline cudaStream_t current_stream(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}
#endif

}  // namespace kwb

// A launcher returns nullptr or CUDA's error string; this raises it as a torch error naming
// the op, so a bad launch never passes silently.
#define KWB_CHECK_LAUNCH(op, call)                                       \
  do {                                                                   \
    const char* kwb_launch_error_ = (call);                              \
    TORCH_CHECK(kwb_launch_error_ == nullptr, op, ": CUDA launch failed: ", \
                kwb_launch_error_);                                      \
  } while (0)
