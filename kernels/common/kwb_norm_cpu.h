// LayerNorm and RMSNorm for binding .cpp files: argument checks and the CPU implementation,
// templated on kCentered as kwb_norm.cuh is (RMSNorm: no mean, no bias). layernorm.cpp and
// rmsnorm.cpp add the schemas and the CUDA launches.
#pragma once
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kwb_checks.h"

namespace kwb {

// The rows of x viewed as rows x cols (cols = the last dimension), 0-column tensors included.
inline int64_t norm_rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// The saved statistics' dtype: fp32 (as PyTorch saves them for fp32, fp16 and bf16), fp64 for
// fp64 data, whose gradients gradcheck holds to fp64 precision.
inline at::ScalarType norm_stat_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

inline void check_norm_params(const char* op, const at::Tensor& x, const at::Tensor& weight, const at::Tensor* bias,
                              std::initializer_list<at::ScalarType> dtypes, const char* where) {
  kwb::check_dtype_in(op, "x", x, dtypes, where);
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (the one normalized), got a 0-d tensor");
  kwb::check_same_dtype(op, "x", x, "weight", weight);
  kwb::check_same_device(op, "x", x, "weight", weight);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op, ": weight must be 1-D with x's last dimension (",
              x.size(-1), ") as its length, got shape ", weight.sizes());
  if (bias) {
    kwb::check_same_dtype(op, "x", x, "bias", *bias);
    kwb::check_same_device(op, "x", x, "bias", *bias);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == x.size(-1), op, ": bias must be 1-D with x's last dimension (",
                x.size(-1), ") as its length, got shape ", bias->sizes());
  }
}

inline void check_eps(const char* op, double eps) {
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0, op, ": eps must be a finite number >= 0, got ", eps);
}

// A saved statistic (mean or rstd) as the forward wrote it: one value per row, of the stat type.
inline void check_stat(const char* op, const char* name, const at::Tensor& stat, const at::Tensor& x) {
  kwb::check_same_device(op, "x", x, name, stat);
  TORCH_CHECK_TYPE(stat.scalar_type() == norm_stat_type(x), op, ": ", name, " must be ", norm_stat_type(x), " for ",
                   x.scalar_type(), " x (as the forward returns it), got ", stat.scalar_type());
  TORCH_CHECK(stat.numel() == norm_rows(x), op, ": ", name, " must hold one value per row of x (", norm_rows(x),
              "), got shape ", stat.sizes());
}

// Forward on the CPU: (y, mean, rstd); mean is an empty tensor when !kCentered.
template <bool kCentered>
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                               const at::Tensor* bias, double eps) {
  const at::Tensor xc = contiguous(x), wc = contiguous(weight);
  const at::Tensor bc = bias ? contiguous(*bias) : at::Tensor();
  const int64_t cols = xc.size(-1), rows = norm_rows(xc);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  std::vector<int64_t> stat_shape(xc.sizes().begin(), xc.sizes().end() - 1);
  const auto stat_opts = xc.options().dtype(norm_stat_type(xc));
  at::Tensor mean = kCentered ? at::empty(stat_shape, stat_opts) : at::empty({0}, stat_opts);
  at::Tensor rstd = at::empty(stat_shape, stat_opts);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "norm_forward_cpu", [&] {
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    const scalar_t* w = wc.const_data_ptr<scalar_t>();
    const scalar_t* b = kCentered ? bc.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    scalar_t* mean_out = kCentered ? mean.mutable_data_ptr<scalar_t>() : nullptr;
    scalar_t* rstd_out = rstd.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(cols), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = in + r * cols;
        double m = 0, ss = 0;  // double sums: fp32 rows of 262144 drift otherwise
        if (kCentered) {
          for (int64_t c = 0; c < cols; ++c) m += xr[c];
          m /= static_cast<double>(cols);
        }
        for (int64_t c = 0; c < cols; ++c) ss += (xr[c] - m) * (xr[c] - m);
        const double rs = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
        if (kCentered) mean_out[r] = static_cast<scalar_t>(m);
        rstd_out[r] = static_cast<scalar_t>(rs);
        for (int64_t c = 0; c < cols; ++c) {
          const double v = (xr[c] - m) * rs * w[c] + (kCentered ? static_cast<double>(b[c]) : 0.0);
          out[r * cols + c] = static_cast<scalar_t>(v);
        }
      }
    });
  });
  return {y, mean, rstd};
}

// Backward on the CPU: (grad_x, grad_weight, grad_bias); grad_bias is empty when !kCentered.
template <bool kCentered>
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_backward_cpu(const at::Tensor& grad, const at::Tensor& x,
                                                                const at::Tensor& weight, const at::Tensor* mean,
                                                                const at::Tensor& rstd) {
  const at::Tensor xc = contiguous(x), gc = contiguous(grad), wc = contiguous(weight), rc = contiguous(rstd);
  const at::Tensor mc = kCentered ? contiguous(*mean) : at::Tensor();
  const int64_t cols = xc.size(-1), rows = norm_rows(xc);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  at::Tensor xhat = at::empty({rows, cols}, xc.options());  // for the weight's gradient below
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "norm_backward_cpu", [&] {
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    const scalar_t* w = wc.const_data_ptr<scalar_t>();
    const scalar_t* ms = kCentered ? mc.const_data_ptr<scalar_t>() : nullptr;
    const scalar_t* rs = rc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    scalar_t* xh = xhat.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(cols), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const double m = kCentered ? static_cast<double>(ms[r]) : 0.0, rstd_r = rs[r];
        double sg = 0, sgx = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double gw = static_cast<double>(g[r * cols + c]) * w[c], xhat_c = (in[r * cols + c] - m) * rstd_r;
          xh[r * cols + c] = static_cast<scalar_t>(xhat_c);
          sg += gw;
          sgx += gw * xhat_c;
        }
        const double mean_g = kCentered ? sg / cols : 0.0, mean_gx = sgx / cols;
        for (int64_t c = 0; c < cols; ++c) {
          const double gw = static_cast<double>(g[r * cols + c]) * w[c], xhat_c = (in[r * cols + c] - m) * rstd_r;
          out[r * cols + c] = static_cast<scalar_t>(rstd_r * (gw - mean_g - xhat_c * mean_gx));
        }
      }
    });
  });
  // The parameters' gradients: column sums (ATen's sum is deterministic on the CPU).
  const at::Tensor g2 = gc.reshape({rows, cols});
  at::Tensor gw = rows ? at::sum(at::mul(g2, xhat), {0}) : at::zeros({cols}, xc.options());
  at::Tensor gb = kCentered ? (rows ? at::sum(g2, {0}) : at::zeros({cols}, xc.options())) : at::empty({0}, xc.options());
  return {gx, gw, gb};
}

}  // namespace kwb
