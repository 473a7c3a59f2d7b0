// vector_add: c = a + b for two tensors of one shape, dtype and device. Op schema, argument
// checks, the CPU implementation and the CPU/CUDA registrations; the CUDA kernel is in
// vector_add.cu.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "vector_add.h"

namespace {

constexpr const char* kOp = "vector_add";

void check_pair(const at::Tensor& a, const at::Tensor& b) {
  kwb::check_same_device(kOp, "a", a, "b", b);
  kwb::check_same_dtype(kOp, "a", a, "b", b);
  kwb::check_same_shape(kOp, "a", a, "b", b);
}

// One span of a parallel_for; __restrict__: c[i] aliases neither input, so the loop vectorizes
// (see relu_scale.cpp).
template <typename scalar_t>
void vector_add_span(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b, scalar_t* __restrict__ c,
                     int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) c[i] = a[i] + b[i];
}

at::Tensor vector_add_cpu(const at::Tensor& a, const at::Tensor& b) {
  check_pair(a, b);
  kwb::check_dtype_in(kOp, "a", a, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor ac = kwb::contiguous(a), bc = kwb::contiguous(b);
  at::Tensor c = at::empty(ac.sizes(), ac.options());
  AT_DISPATCH_FLOATING_TYPES(ac.scalar_type(), "vector_add_cpu", [&] {
    const scalar_t* pa = ac.const_data_ptr<scalar_t>();
    const scalar_t* pb = bc.const_data_ptr<scalar_t>();
    scalar_t* pc = c.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, ac.numel(), kwb::kCpuGrain,
                     [=](int64_t begin, int64_t end) { vector_add_span(pa, pb, pc, begin, end); });
  });
  return c;
}

#ifdef KWB_WITH_CUDA
at::Tensor vector_add_cuda_op(const at::Tensor& a, const at::Tensor& b) {
  check_pair(a, b);
  kwb::check_dtype_in(kOp, "a", a, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor ac = kwb::contiguous(a), bc = kwb::contiguous(b);
  at::Tensor c = at::empty(ac.sizes(), ac.options());
  const c10::cuda::CUDAGuard guard(a.device());
  const VectorAddParams p{ac.const_data_ptr(), bc.const_data_ptr(), c.mutable_data_ptr(), ac.numel()};
  KWB_CHECK_LAUNCH(kOp, vector_add_cuda(p, kwb::to_dtype(ac.scalar_type()), kwb::current_stream(ac)));
  return c;
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("vector_add(Tensor a, Tensor b) -> Tensor");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("vector_add", &vector_add_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("vector_add", &vector_add_cuda_op);
}
#endif
