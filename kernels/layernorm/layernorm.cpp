// layernorm: y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension, as
// torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps). The forward also returns
// the row statistics (mean, rstd) its backward reads. Op schemas and registrations; the checks
// and the CPU implementation are kwb_norm_cpu.h's, the CUDA kernels kwb_norm.cuh's.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "kwb_library.h"
#include "kwb_norm_cpu.h"
#include "layernorm.h"

namespace {

constexpr const char* kOp = "layernorm_forward";
constexpr const char* kBackward = "layernorm_backward";

void check_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& mean,
                    const at::Tensor& rstd, std::initializer_list<at::ScalarType> dtypes, const char* where) {
  kwb::check_norm_params(kBackward, x, weight, nullptr, dtypes, where);
  kwb::check_same_dtype(kBackward, "x", x, "grad", grad);
  kwb::check_same_shape(kBackward, "x", x, "grad", grad);
  kwb::check_same_device(kBackward, "x", x, "grad", grad);
  kwb::check_stat(kBackward, "mean", mean, x);
  kwb::check_stat(kBackward, "rstd", rstd, x);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                                     const at::Tensor& bias, double eps) {
  kwb::check_norm_params(kOp, x, weight, &bias, {at::kFloat, at::kDouble}, "CPU");
  kwb::check_eps(kOp, eps);
  return kwb::norm_forward_cpu<true>(x, weight, &bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward_cpu(const at::Tensor& grad, const at::Tensor& x,
                                                                      const at::Tensor& weight, const at::Tensor& mean,
                                                                      const at::Tensor& rstd) {
  check_backward(grad, x, weight, mean, rstd, {at::kFloat, at::kDouble}, "CPU");
  return kwb::norm_backward_cpu<true>(grad, x, weight, &mean, rstd);
}

#ifdef KWB_WITH_CUDA
constexpr std::initializer_list<at::ScalarType> kCudaTypes = {at::kFloat, at::kHalf, at::kBFloat16};

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_forward_cuda_op(const at::Tensor& x, const at::Tensor& weight,
                                                                      const at::Tensor& bias, double eps) {
  kwb::check_norm_params(kOp, x, weight, &bias, kCudaTypes, "CUDA");
  kwb::check_eps(kOp, eps);
  const at::Tensor xc = kwb::contiguous(x), wc = kwb::contiguous(weight), bc = kwb::contiguous(bias);
  const int64_t cols = xc.size(-1), rows = kwb::norm_rows(xc);
  std::vector<int64_t> stat_shape(xc.sizes().begin(), xc.sizes().end() - 1);
  const auto stat_opts = xc.options().dtype(at::kFloat);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  // no columns: nothing to normalize, and the statistics are defined as zeros
  at::Tensor mean = cols ? at::empty(stat_shape, stat_opts) : at::zeros(stat_shape, stat_opts);
  at::Tensor rstd = cols ? at::empty(stat_shape, stat_opts) : at::zeros(stat_shape, stat_opts);
  const c10::cuda::CUDAGuard guard(x.device());
  const kwb::NormParams p{xc.const_data_ptr(), wc.const_data_ptr(), bc.const_data_ptr(), y.mutable_data_ptr(),
                          mean.mutable_data_ptr<float>(), rstd.mutable_data_ptr<float>(), rows, cols,
                          static_cast<float>(eps)};
  KWB_CHECK_LAUNCH(kOp, layernorm_cuda(p, kwb::to_dtype(xc.scalar_type()), kwb::all_aligned({&xc, &wc, &bc, &y}),
                                       kwb::current_stream(xc)));
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward_cuda_op(const at::Tensor& grad, const at::Tensor& x,
                                                                       const at::Tensor& weight, const at::Tensor& mean,
                                                                       const at::Tensor& rstd) {
  check_backward(grad, x, weight, mean, rstd, kCudaTypes, "CUDA");
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad), wc = kwb::contiguous(weight);
  const at::Tensor mc = kwb::contiguous(mean), rc = kwb::contiguous(rstd);
  const int64_t cols = xc.size(-1), rows = kwb::norm_rows(xc);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  at::Tensor gw = at::empty({cols}, xc.options()), gb = at::empty({cols}, xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const bool aligned = kwb::all_aligned({&xc, &gc, &wc, &gx});
  const kwb::DType dtype = kwb::to_dtype(xc.scalar_type());
  const int64_t ws_rows = layernorm_backward_workspace_rows(rows, cols, dtype, aligned);
  at::Tensor ws = at::empty({ws_rows, 2, cols}, xc.options().dtype(at::kFloat));
  const kwb::NormBackwardParams p{gc.const_data_ptr(), xc.const_data_ptr(), wc.const_data_ptr(), mc.const_data_ptr<float>(),
                                  rc.const_data_ptr<float>(), gx.mutable_data_ptr(), gw.mutable_data_ptr(),
                                  gb.mutable_data_ptr(), ws.mutable_data_ptr<float>(), rows, cols};
  KWB_CHECK_LAUNCH(kBackward, layernorm_backward_cuda(p, dtype, aligned, kwb::current_stream(xc)));
  return {gx, gw, gb};
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("layernorm_forward(Tensor x, Tensor weight, Tensor bias, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)");
  m.def("layernorm_backward(Tensor grad, Tensor x, Tensor weight, Tensor mean, Tensor rstd) -> "
        "(Tensor grad_x, Tensor grad_weight, Tensor grad_bias)");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("layernorm_forward", &layernorm_forward_cpu);
  m.impl("layernorm_backward", &layernorm_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("layernorm_forward", &layernorm_forward_cuda_op);
  m.impl("layernorm_backward", &layernorm_backward_cuda_op);
}
#endif
