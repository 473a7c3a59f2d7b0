// bias_gelu: y = GELU(x + bias) over the last dimension, approximate = "none" (erf) or "tanh",
// as torch.nn.functional.gelu. Op schemas, argument checks, the CPU implementation and the
// CPU/CUDA registrations; the CUDA kernels are in bias_gelu.cu.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <string>
#include <tuple>

#include "bias_gelu.h"
#include "kwb_checks.h"
#include "kwb_library.h"
#include "kwb_vec_cpu.h"

namespace {

constexpr const char* kOp = "bias_gelu";
constexpr const char* kBackward = "bias_gelu_backward";

bool is_tanh(const char* op, c10::string_view approximate) {
  if (approximate == "tanh") return true;
  TORCH_CHECK_VALUE(approximate == "none", op, ": approximate must be 'none' (the erf form) or 'tanh', got '",
                    std::string(approximate), "'");
  return false;
}

// x is [..., cols] and bias is [cols], same dtype and device.
void check_args(const char* op, const at::Tensor& x, const at::Tensor& bias,
                std::initializer_list<at::ScalarType> dtypes, const char* where) {
  kwb::check_dtype_in(op, "x", x, dtypes, where);
  kwb::check_same_dtype(op, "x", x, "bias", bias);
  kwb::check_same_device(op, "x", x, "bias", bias);
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (the one bias runs along), got a 0-d tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op,
              ": bias must be 1-D with x's last dimension (", x.size(-1), ") as its length, got shape ", bias.sizes());
}

// ---- CPU --------------------------------------------------------------------------------

at::Tensor bias_gelu_cpu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh(kOp, approximate);
  check_args(kOp, x, bias, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x), bc = kwb::contiguous(bias);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), kOp, [&] {
    using Vec = kwb::Vec<scalar_t>;
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    const scalar_t* b = bc.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    kwb::with_gelu_form(tanh_form, [&](auto form) {
      at::parallel_for(0, rows, kwb::row_grain(cols), [=](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          at::vec::map2([](Vec v, Vec bv) { return kwb::gelu_vec<decltype(form)::value>(v + bv); }, out + r * cols,
                        in + r * cols, b, cols);
      });
    });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward_cpu(const at::Tensor& grad, const at::Tensor& x,
                                                          const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh(kBackward, approximate);
  check_args(kBackward, x, bias, {at::kFloat, at::kDouble}, "CPU");
  kwb::check_same_dtype(kBackward, "x", x, "grad", grad);
  kwb::check_same_shape(kBackward, "x", x, "grad", grad);
  kwb::check_same_device(kBackward, "x", x, "grad", grad);
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad), bc = kwb::contiguous(bias);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  at::Tensor gb = at::empty({bc.size(0)}, xc.options());
  // grad_bias, the column sums of grad_x, taken in the same pass: one partial row per block
  const kwb::RowBlocks blocks(rows, kwb::row_grain(cols), at::get_num_threads());
  at::Tensor partial = at::empty({blocks.count, cols}, xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), kBackward, [&] {
    using Vec = kwb::Vec<scalar_t>;
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    const scalar_t* b = bc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    scalar_t* part = partial.mutable_data_ptr<scalar_t>();
    kwb::with_gelu_form(tanh_form, [&](auto form) {
      at::parallel_for(0, blocks.count, 1, [=](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          scalar_t* sums = part + blk * cols;
          std::fill(sums, sums + cols, scalar_t(0));
          const int64_t r_end = std::min(rows, (blk + 1) * blocks.rows_per_block);
          for (int64_t r = blk * blocks.rows_per_block; r < r_end; ++r) {
            scalar_t* gr = out + r * cols;
            at::vec::map3([](Vec gv, Vec v, Vec bv) { return gv * kwb::gelu_grad_vec<decltype(form)::value>(v + bv); },
                          gr, g + r * cols, in + r * cols, b, cols);
            at::vec::map2([](Vec s, Vec v) { return s + v; }, sums, sums, gr, cols);
          }
        }
      });
    });
    kwb::add_blocks(part, blocks.count, cols, gb.mutable_data_ptr<scalar_t>());
  });
  return {gx, gb};
}

// ---- CUDA -------------------------------------------------------------------------------

#ifdef KWB_WITH_CUDA
constexpr std::initializer_list<at::ScalarType> kCudaTypes = {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble};

at::Tensor bias_gelu_cuda_op(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh(kOp, approximate);
  check_args(kOp, x, bias, kCudaTypes, "CUDA");
  const at::Tensor xc = kwb::contiguous(x), bc = kwb::contiguous(bias);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  const c10::cuda::CUDAGuard guard(x.device());
  const BiasGeluParams p{xc.const_data_ptr(), bc.const_data_ptr(), y.mutable_data_ptr(), rows, cols, tanh_form};
  const bool aligned = kwb::all_aligned({&xc, &bc, &y});
  KWB_CHECK_LAUNCH(kOp, bias_gelu_cuda(p, kwb::to_dtype(xc.scalar_type()), aligned, kwb::current_stream(xc)));
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward_cuda_op(const at::Tensor& grad, const at::Tensor& x,
                                                              const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh(kBackward, approximate);
  check_args(kBackward, x, bias, kCudaTypes, "CUDA");
  kwb::check_same_dtype(kBackward, "x", x, "grad", grad);
  kwb::check_same_shape(kBackward, "x", x, "grad", grad);
  kwb::check_same_device(kBackward, "x", x, "grad", grad);
  const at::Tensor xc = kwb::contiguous(x), gc = kwb::contiguous(grad), bc = kwb::contiguous(bias);
  at::Tensor gx = at::empty(xc.sizes(), xc.options());
  at::Tensor gb = at::empty({bc.size(0)}, bc.options());
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  const c10::cuda::CUDAGuard guard(x.device());
  const bool aligned = kwb::all_aligned({&xc, &gc, &bc, &gx});
  const kwb::DType dtype = kwb::to_dtype(xc.scalar_type());
  // Partial column sums in the compute type: float, or double for double data.
  const int64_t ws_rows = bias_gelu_backward_workspace_rows(rows, cols, dtype, aligned);
  at::Tensor ws = at::empty({ws_rows, cols}, xc.options().dtype(xc.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  const BiasGeluBackwardParams p{gc.const_data_ptr(), xc.const_data_ptr(), bc.const_data_ptr(), gx.mutable_data_ptr(),
                                 gb.mutable_data_ptr(), ws.mutable_data_ptr(), rows, cols, tanh_form};
  KWB_CHECK_LAUNCH(kBackward, bias_gelu_backward_cuda(p, dtype, aligned, kwb::current_stream(xc)));
  return {gx, gb};
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("bias_gelu(Tensor x, Tensor bias, str approximate='none') -> Tensor");
  m.def("bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate='none') -> (Tensor, Tensor)");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("bias_gelu", &bias_gelu_cpu);
  m.impl("bias_gelu_backward", &bias_gelu_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("bias_gelu", &bias_gelu_cuda_op);
  m.impl("bias_gelu_backward", &bias_gelu_backward_cuda_op);
}
#endif
