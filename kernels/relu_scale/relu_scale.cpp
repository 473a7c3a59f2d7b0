// relu_scale: y = max(x, 0) * alpha. Op schemas, argument checks, the CPU implementation and
// the CPU/CUDA registrations; the CUDA kernels are in relu_scale.cu.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "relu_scale.h"

namespace {

constexpr const char* kOp = "relu_scale";

// The CPU loops work on one span of a parallel_for each. __restrict__ and by-value
// arguments tell the compiler that writing out[i] changes no input and not `a`, so the loop
// inside the OpenMP region vectorizes (kernels/relu_scale/NOTES.md).
template <typename scalar_t>
void relu_scale_span(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, scalar_t a,
                     int64_t begin, int64_t end) {
  // x < 0 (not x > 0) so a NaN x propagates; 0 * a (not 0) so a NaN alpha gives NaN everywhere
  // and a negative one -0, as eager's relu(x) * alpha
  for (int64_t i = begin; i < end; ++i) {
    const scalar_t scaled = in[i] * a;  // computed on both arms, so the select vectorizes
    out[i] = in[i] < scalar_t(0) ? scalar_t(0) * a : scaled;
  }
}

template <typename scalar_t>
void relu_scale_backward_span(const scalar_t* __restrict__ g, const scalar_t* __restrict__ in,
                              scalar_t* __restrict__ out, scalar_t a, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const scalar_t scaled = g[i] * a;
    out[i] = in[i] <= scalar_t(0) ? scalar_t(0) : scaled;  // a NaN x passes the gradient, as relu's
  }
}

at::Tensor relu_scale_cpu(const at::Tensor& x, double alpha) {
  kwb::check_dtype_in(kOp, "x", x, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "relu_scale_cpu", [&] {
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    const scalar_t a = static_cast<scalar_t>(alpha);
    at::parallel_for(0, xc.numel(), kwb::kCpuGrain,
                     [=](int64_t begin, int64_t end) { relu_scale_span(in, out, a, begin, end); });
  });
  return y;
}

at::Tensor relu_scale_backward_cpu(const at::Tensor& grad, const at::Tensor& x, double alpha) {
  kwb::check_dtype_in("relu_scale_backward", "x", x, {at::kFloat, at::kDouble}, "CPU");
  kwb::check_same_dtype("relu_scale_backward", "x", x, "grad", grad);
  kwb::check_same_shape("relu_scale_backward", "x", x, "grad", grad);
  kwb::check_same_device("relu_scale_backward", "x", x, "grad", grad);
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "relu_scale_backward_cpu", [&] {
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    const scalar_t a = static_cast<scalar_t>(alpha);
    at::parallel_for(0, xc.numel(), kwb::kCpuGrain,
                     [=](int64_t begin, int64_t end) { relu_scale_backward_span(g, in, out, a, begin, end); });
  });
  return gx;
}

// The training pair (relu_scale.h): y and a bit per element (!(x <= 0)), then the gradient from
// the bits. The mask's layout is the CUDA kernels': bit j of mask[i] is element 8 i + j.
at::Tensor check_mask(const char* op, const at::Tensor& mask, const at::Tensor& grad) {
  kwb::check_same_device(op, "grad", grad, "mask", mask);
  TORCH_CHECK(mask.scalar_type() == at::kByte && mask.dim() == 1 &&
                  mask.numel() == relu_scale_mask_bytes(grad.numel()),
              op, ": mask must be relu_scale_train's second output for grad's ", grad.numel(),
              " elements: uint8, 1-D, ", relu_scale_mask_bytes(grad.numel()), " bytes; got ",
              mask.scalar_type(), " of shape ", mask.sizes());
  return kwb::contiguous(mask);
}

std::tuple<at::Tensor, at::Tensor> relu_scale_train_cpu(const at::Tensor& x, double alpha) {
  kwb::check_dtype_in("relu_scale_train", "x", x, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  at::Tensor mask = at::empty({relu_scale_mask_bytes(xc.numel())}, xc.options().dtype(at::kByte));
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "relu_scale_train_cpu", [&] {
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    uint8_t* bits = mask.mutable_data_ptr<uint8_t>();
    const scalar_t a = static_cast<scalar_t>(alpha);
    const int64_t n = xc.numel();
    at::parallel_for(0, mask.numel(), kwb::kCpuGrain / 8, [=](int64_t begin, int64_t end) {
      relu_scale_span(in, out, a, begin * 8, std::min(end * 8, n));
      for (int64_t g = begin; g < end; ++g) {
        uint8_t b = 0;
        for (int64_t j = 0; j < 8 && g * 8 + j < n; ++j) b |= static_cast<uint8_t>(!(in[g * 8 + j] <= scalar_t(0))) << j;
        bits[g] = b;
      }
    });
  });
  return {y, mask};
}

at::Tensor relu_scale_masked_backward_cpu(const at::Tensor& grad, const at::Tensor& mask, double alpha) {
  const char* op = "relu_scale_masked_backward";
  kwb::check_dtype_in(op, "grad", grad, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor mc = check_mask(op, mask, grad), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(gc.sizes(), gc.options());
  AT_DISPATCH_FLOATING_TYPES(gc.scalar_type(), "relu_scale_masked_backward_cpu", [&] {
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const uint8_t* bits = mc.const_data_ptr<uint8_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    const scalar_t a = static_cast<scalar_t>(alpha);
    at::parallel_for(0, gc.numel(), kwb::kCpuGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = ((bits[i / 8] >> (i % 8)) & 1) ? g[i] * a : scalar_t(0);
    });
  });
  return gx;
}

#ifdef KWB_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> relu_scale_train_cuda_op(const at::Tensor& x, double alpha) {
  const char* op = "relu_scale_train";
  kwb::check_dtype_in(op, "x", x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  at::Tensor mask = at::empty({relu_scale_mask_bytes(xc.numel())}, xc.options().dtype(at::kByte));
  const c10::cuda::CUDAGuard guard(x.device());
  const ReluScaleTrainParams p{xc.const_data_ptr(), y.mutable_data_ptr(), mask.mutable_data_ptr<uint8_t>(),
                               xc.numel(), alpha};
  KWB_CHECK_LAUNCH(op, relu_scale_train_cuda(p, kwb::to_dtype(xc.scalar_type()), kwb::current_stream(xc)));
  return {y, mask};
}

at::Tensor relu_scale_masked_backward_cuda_op(const at::Tensor& grad, const at::Tensor& mask, double alpha) {
  const char* op = "relu_scale_masked_backward";
  kwb::check_dtype_in(op, "grad", grad, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor mc = check_mask(op, mask, grad), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(gc.sizes(), gc.options());
  const c10::cuda::CUDAGuard guard(grad.device());
  const ReluScaleMaskedBackwardParams p{gc.const_data_ptr(), mc.const_data_ptr<uint8_t>(), gx.mutable_data_ptr(),
                                        gc.numel(), alpha};
  KWB_CHECK_LAUNCH(op, relu_scale_masked_backward_cuda(p, kwb::to_dtype(gc.scalar_type()),
                                                       kwb::current_stream(gc)));
  return gx;
}

at::Tensor relu_scale_cuda_op(const at::Tensor& x, double alpha) {
  kwb::check_dtype_in(kOp, "x", x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const ReluScaleParams p{xc.const_data_ptr(), y.mutable_data_ptr(), xc.numel(), alpha};
  KWB_CHECK_LAUNCH(kOp, relu_scale_cuda(p, kwb::to_dtype(xc.scalar_type()), kwb::current_stream(xc)));
  return y;
}

at::Tensor relu_scale_backward_cuda_op(const at::Tensor& grad, const at::Tensor& x, double alpha) {
  const char* op = "relu_scale_backward";
  kwb::check_dtype_in(op, "x", x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, "CUDA");
  kwb::check_same_dtype(op, "x", x, "grad", grad);
  kwb::check_same_shape(op, "x", x, "grad", grad);
  kwb::check_same_device(op, "x", x, "grad", grad);
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const ReluScaleBackwardParams p{gc.const_data_ptr(), xc.const_data_ptr(), gx.mutable_data_ptr(),
                                  xc.numel(), alpha};
  KWB_CHECK_LAUNCH(op, relu_scale_backward_cuda(p, kwb::to_dtype(xc.scalar_type()),
                                                kwb::current_stream(xc)));
  return gx;
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("relu_scale(Tensor x, float alpha) -> Tensor");
  m.def("relu_scale_backward(Tensor grad, Tensor x, float alpha) -> Tensor");
  m.def("relu_scale_train(Tensor x, float alpha) -> (Tensor, Tensor)");
  m.def("relu_scale_masked_backward(Tensor grad, Tensor mask, float alpha) -> Tensor");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("relu_scale", &relu_scale_cpu);
  m.impl("relu_scale_backward", &relu_scale_backward_cpu);
  m.impl("relu_scale_train", &relu_scale_train_cpu);
  m.impl("relu_scale_masked_backward", &relu_scale_masked_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("relu_scale", &relu_scale_cuda_op);
  m.impl("relu_scale_backward", &relu_scale_backward_cuda_op);
  m.impl("relu_scale_train", &relu_scale_train_cuda_op);
  m.impl("relu_scale_masked_backward", &relu_scale_masked_backward_cuda_op);
}
#endif
