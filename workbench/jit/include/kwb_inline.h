// What wb.load_inline() puts in front of the cpp= source: ATen (tensor math, at::empty_like),
// the op registration macros, the argument checks, and cudaStream_t / kwb::current_stream().
// ATen/ATen.h, not torch/extension.h: no pybind or C++ frontend to compile
// (benchmarks/reference/h100_compile_times.md). This part recompiles only when the cpp= string
// changes, never on a cuda= edit.
#pragma once
#include <ATen/ATen.h>

#include "kwb_checks.h"
#include "kwb_dtype.h"
#include "kwb_library.h"

#include <optional>
#include <utility>

namespace kwb {
namespace inline_detail {
inline void require_cuda(const char* op, int index, const at::Tensor& t) {
  TORCH_CHECK(!t.defined() || !t.device().is_cpu(), op, ": argument ", index, " is a tensor on ", t.device(),
              ", but this op runs CUDA code (load_inline's cuda= source). Pass CUDA tensors (x.cuda(), or "
              "device=\"cuda\"), or write a CPU path in cpp= and load it without cuda=.");
}
inline void require_cuda(const char* op, int index, const std::optional<at::Tensor>& t) {
  if (t.has_value()) require_cuda(op, index, *t);
}
template <typename T>
void require_cuda(const char*, int, const T&) {}
}  // namespace inline_detail

// A load_inline function whose code is CUDA, as the op's kernel: a CPU tensor is refused by
// name before the function runs (it would hand a host pointer to a CUDA launch, which fails
// as "CUDA driver version is insufficient" on a machine without a GPU).
template <const char* Name, auto F>
struct CudaOnly;
template <const char* Name, typename R, typename... A, R (*F)(A...)>
struct CudaOnly<Name, F> {
  static R call(A... args) {
    int index = 0;
    (inline_detail::require_cuda(Name, index++, args), ...);
    return F(std::forward<A>(args)...);
  }
};
}  // namespace kwb
