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
#include "kwb_vec_cpu.h"

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
    using Vec = kwb::Vec<scalar_t>;
    at::parallel_for(0, rows, row_grain(cols), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = in + r * cols;
        const auto load_x = [=](int64_t c, int64_t n) { return Vec::loadu(xr + c, n); };
        // sums flushed to double (kwb_vec_cpu.h): fp32 rows of 262144 drift in a float sum.
        // Two passes, mean then squares about it: no cancellation for rows far from zero.
        const double m = kCentered ? sum_over<scalar_t>(cols, load_x, [](Vec v) { return v; }) / cols : 0.0;
        const Vec mv(static_cast<scalar_t>(m));
        const double ss = sum_over<scalar_t>(cols, load_x, [=](Vec v) { return (v - mv) * (v - mv); });
        const double rs = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
        if (kCentered) mean_out[r] = static_cast<scalar_t>(m);
        rstd_out[r] = static_cast<scalar_t>(rs);
        const Vec rsv(static_cast<scalar_t>(rs));
        if constexpr (kCentered)
          at::vec::map3([=](Vec v, Vec wv, Vec bv) { return at::vec::fmadd((v - mv) * rsv, wv, bv); }, out + r * cols, xr,
                        w, b, cols);
        else
          at::vec::map2([=](Vec v, Vec wv) { return v * rsv * wv; }, out + r * cols, xr, w, cols);
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
  at::Tensor gw = at::empty({cols}, xc.options());
  at::Tensor gb = at::empty({kCentered ? cols : 0}, xc.options());
  // The parameters' gradients are column sums over the rows, taken in the same pass: one
  // partial row per block (per block: weight's, then bias's), added in block order.
  const RowBlocks blocks(rows, row_grain(cols), at::get_num_threads());
  const int64_t parts = kCentered ? 2 : 1;
  at::Tensor partial = at::empty({parts * blocks.count, cols}, xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "norm_backward_cpu", [&] {
    using Vec = kwb::Vec<scalar_t>;
    constexpr int64_t W = Vec::size();
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    const scalar_t* w = wc.const_data_ptr<scalar_t>();
    const scalar_t* ms = kCentered ? mc.const_data_ptr<scalar_t>() : nullptr;
    const scalar_t* rs = rc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    scalar_t* part = partial.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, blocks.count, 1, [=](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        scalar_t* sum_gw = part + blk * cols;                                    // sum of g * xhat
        scalar_t* sum_gb = kCentered ? part + (blocks.count + blk) * cols : nullptr;  // sum of g
        std::fill(sum_gw, sum_gw + cols, scalar_t(0));
        if (kCentered) std::fill(sum_gb, sum_gb + cols, scalar_t(0));
        const int64_t r_end = std::min(rows, (blk + 1) * blocks.rows_per_block);
        for (int64_t r = blk * blocks.rows_per_block; r < r_end; ++r) {
          const scalar_t *gr = g + r * cols, *xr = in + r * cols;
          const Vec mv(kCentered ? ms[r] : scalar_t(0)), rsv(rs[r]);
          // sg = sum(g w), sgx = sum(g w xhat): each flushed to double, one pass for both
          double sg = 0, sgx = 0;
          for (int64_t c0 = 0; c0 < cols; c0 += kFlush) {
            const int64_t c1 = std::min(cols, c0 + kFlush);
            Vec acc_g(scalar_t(0)), acc_gx(scalar_t(0));
            for (int64_t c = c0; c < c1; c += W) {
              const int64_t n = std::min<int64_t>(W, c1 - c);
              const Vec gv = Vec::loadu(gr + c, n) * Vec::loadu(w + c, n);  // zero past n
              const Vec xhat = (Vec::loadu(xr + c, n) - mv) * rsv;
              acc_g = acc_g + gv;
              acc_gx = at::vec::fmadd(gv, xhat, acc_gx);
              // the parameters' column sums
              const Vec graw = Vec::loadu(gr + c, n);
              at::vec::fmadd(graw, xhat, Vec::loadu(sum_gw + c, n)).store(sum_gw + c, n);
              if (kCentered) (Vec::loadu(sum_gb + c, n) + graw).store(sum_gb + c, n);
            }
            sg += lane_sum<scalar_t>(acc_g);
            sgx += lane_sum<scalar_t>(acc_gx);
          }
          const Vec mean_g(static_cast<scalar_t>(kCentered ? sg / cols : 0.0)), mean_gx(static_cast<scalar_t>(sgx / cols));
          at::vec::map3(
              [=](Vec gv, Vec v, Vec wv) { return rsv * (gv * wv - mean_g - (v - mv) * rsv * mean_gx); },
              out + r * cols, gr, xr, w, cols);
        }
      }
    });
    add_blocks(part, blocks.count, cols, gw.mutable_data_ptr<scalar_t>());
    if (kCentered) add_blocks(part + blocks.count * cols, blocks.count, cols, gb.mutable_data_ptr<scalar_t>());
  });
  return {gx, gw, gb};
}

}  // namespace kwb
