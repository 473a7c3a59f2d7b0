// polynomial_activation: y = x^2 + x + 1. Op schemas, argument checks, the CPU implementation
// and the CPU/CUDA registrations; the CUDA kernels are in polynomial_activation.cu.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "polynomial_activation.h"

namespace {

constexpr const char* kOp = "polynomial_activation";
constexpr const char* kBackward = "polynomial_activation_backward";

// Span functions with __restrict__ pointers: the loop vectorizes inside the OpenMP region
// (what that is worth: kernels/relu_scale/NOTES.md).
template <typename scalar_t>
void polynomial_span(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = in[i] * in[i] + in[i] + scalar_t(1);
}

template <typename scalar_t>
void polynomial_backward_span(const scalar_t* __restrict__ g, const scalar_t* __restrict__ in,
                              scalar_t* __restrict__ out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = g[i] * (scalar_t(2) * in[i] + scalar_t(1));
}

at::Tensor polynomial_cpu(const at::Tensor& x) {
  kwb::check_dtype_in(kOp, "x", x, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), kOp, [&] {
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, xc.numel(), kwb::kCpuGrain, [=](int64_t b, int64_t e) { polynomial_span(in, out, b, e); });
  });
  return y;
}

void check_backward_args(const at::Tensor& grad, const at::Tensor& x, std::initializer_list<at::ScalarType> dtypes,
                         const char* where) {
  kwb::check_dtype_in(kBackward, "x", x, dtypes, where);
  kwb::check_same_dtype(kBackward, "x", x, "grad", grad);
  kwb::check_same_shape(kBackward, "x", x, "grad", grad);
  kwb::check_same_device(kBackward, "x", x, "grad", grad);
}

at::Tensor polynomial_backward_cpu(const at::Tensor& grad, const at::Tensor& x) {
  check_backward_args(grad, x, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), kBackward, [&] {
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, xc.numel(), kwb::kCpuGrain,
                     [=](int64_t b, int64_t e) { polynomial_backward_span(g, in, out, b, e); });
  });
  return gx;
}

#ifdef KWB_WITH_CUDA
at::Tensor polynomial_cuda_op(const at::Tensor& x) {
  kwb::check_dtype_in(kOp, "x", x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const PolynomialParams p{xc.const_data_ptr(), y.mutable_data_ptr(), xc.numel()};
  KWB_CHECK_LAUNCH(kOp, polynomial_activation_cuda(p, kwb::to_dtype(xc.scalar_type()), kwb::current_stream(xc)));
  return y;
}

at::Tensor polynomial_backward_cuda_op(const at::Tensor& grad, const at::Tensor& x) {
  check_backward_args(grad, x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const PolynomialBackwardParams p{gc.const_data_ptr(), xc.const_data_ptr(), gx.mutable_data_ptr(), xc.numel()};
  KWB_CHECK_LAUNCH(kBackward, polynomial_activation_backward_cuda(p, kwb::to_dtype(xc.scalar_type()),
                                                                  kwb::current_stream(xc)));
  return gx;
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("polynomial_activation(Tensor x) -> Tensor");
  m.def("polynomial_activation_backward(Tensor grad, Tensor x) -> Tensor");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("polynomial_activation", &polynomial_cpu);
  m.impl("polynomial_activation_backward", &polynomial_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("polynomial_activation", &polynomial_cuda_op);
  m.impl("polynomial_activation_backward", &polynomial_backward_cuda_op);
}
#endif
