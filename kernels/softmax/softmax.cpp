// softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)), as
// torch.softmax(x, dim=-1). Op schemas, argument checks, the CPU implementation and the
// CPU/CUDA registrations; the CUDA kernels are in softmax.cu.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "kwb_vec_cpu.h"
#include "softmax.h"

namespace {

constexpr const char* kOp = "softmax";
constexpr const char* kBackward = "softmax_backward";

void check_x(const char* op, const char* name, const at::Tensor& x, std::initializer_list<at::ScalarType> dtypes,
             const char* where) {
  kwb::check_dtype_in(op, name, x, dtypes, where);
  TORCH_CHECK(x.dim() >= 1, op, ": ", name, " must have at least one dimension (softmax runs along the last), got a 0-d tensor");
}

void check_backward(const at::Tensor& grad, const at::Tensor& y, std::initializer_list<at::ScalarType> dtypes,
                    const char* where) {
  check_x(kBackward, "y", y, dtypes, where);
  kwb::check_same_dtype(kBackward, "y", y, "grad", grad);
  kwb::check_same_shape(kBackward, "y", y, "grad", grad);
  kwb::check_same_device(kBackward, "y", y, "grad", grad);
}

int64_t rows_of(const at::Tensor& t) { return t.size(-1) ? t.numel() / t.size(-1) : 0; }

// ---- CPU --------------------------------------------------------------------------------

at::Tensor softmax_cpu(const at::Tensor& x) {
  check_x(kOp, "x", x, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const int64_t cols = xc.size(-1), rows = rows_of(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), kOp, [&] {
    const scalar_t* in = xc.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    using Vec = kwb::Vec<scalar_t>;
    at::parallel_for(0, rows, kwb::row_grain(cols), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = in + r * cols;
        scalar_t* yr = out + r * cols;
        // A NaN or +inf element, or a row all -inf, makes the whole row NaN, as PyTorch's
        // (x - max is NaN somewhere, and NaN poisons the sum); said here, since exp_u20 takes
        // NaN to +inf rather than NaN.
        const scalar_t row_max = kwb::max_of(xr, cols);
        if (!std::isfinite(row_max)) {
          std::fill(yr, yr + cols, std::numeric_limits<scalar_t>::quiet_NaN());
          continue;
        }
        const Vec m(row_max);
        // exp written and summed in one pass; exp_u20: ATen's faster exp (20 ulp) for float,
        // SLEEF's 1-ulp one for double; the sum flushed to double, as an fp32 one summed in
        // order drifts (kernels/softmax/NOTES.md)
        const double s = kwb::sum_over<scalar_t>(cols, [=](int64_t c, int64_t n) { return std::make_pair(c, n); },
                                                 [=](std::pair<int64_t, int64_t> at) {
                                                   const Vec e = (Vec::loadu(xr + at.first, at.second) - m).exp_u20();
                                                   e.store(yr + at.first, at.second);
                                                   return e;
                                                 });
        const Vec inv(static_cast<scalar_t>(1.0 / s));
        at::vec::map([=](Vec v) { return v * inv; }, yr, yr, cols);
      }
    });
  });
  return y;
}

at::Tensor softmax_backward_cpu(const at::Tensor& grad, const at::Tensor& y) {
  check_backward(grad, y, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor yc = kwb::contiguous(y), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(yc.sizes(), yc.options());
  const int64_t cols = yc.size(-1), rows = rows_of(yc);
  AT_DISPATCH_FLOATING_TYPES(yc.scalar_type(), kBackward, [&] {
    const scalar_t* g = gc.const_data_ptr<scalar_t>();
    const scalar_t* o = yc.const_data_ptr<scalar_t>();
    scalar_t* out = gx.mutable_data_ptr<scalar_t>();
    using Vec = kwb::Vec<scalar_t>;
    at::parallel_for(0, rows, kwb::row_grain(cols), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t *gr = g + r * cols, *yr = o + r * cols;
        const double dot = kwb::sum_over<scalar_t>(
            cols, [=](int64_t c, int64_t n) { return std::make_pair(Vec::loadu(gr + c, n), Vec::loadu(yr + c, n)); },
            [](const std::pair<Vec, Vec>& gy) { return gy.first * gy.second; });
        const Vec d(static_cast<scalar_t>(dot));
        at::vec::map2([=](Vec gv, Vec yv) { return yv * (gv - d); }, out + r * cols, gr, yr, cols);
      }
    });
  });
  return gx;
}

// ---- CUDA -------------------------------------------------------------------------------

#ifdef KWB_WITH_CUDA
constexpr std::initializer_list<at::ScalarType> kCudaTypes = {at::kFloat, at::kHalf, at::kBFloat16};

at::Tensor softmax_cuda_op(const at::Tensor& x) {
  check_x(kOp, "x", x, kCudaTypes, "CUDA");
  const at::Tensor xc = kwb::contiguous(x);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const c10::cuda::CUDAGuard guard(x.device());
  const SoftmaxParams p{xc.const_data_ptr(), y.mutable_data_ptr(), rows_of(xc), xc.size(-1)};
  KWB_CHECK_LAUNCH(kOp, softmax_cuda(p, kwb::to_dtype(xc.scalar_type()), kwb::all_aligned({&xc, &y}),
                                     kwb::current_stream(xc)));
  return y;
}

at::Tensor softmax_backward_cuda_op(const at::Tensor& grad, const at::Tensor& y) {
  check_backward(grad, y, kCudaTypes, "CUDA");
  const at::Tensor yc = kwb::contiguous(y), gc = kwb::contiguous(grad);
  at::Tensor gx = at::empty(yc.sizes(), yc.options());
  const c10::cuda::CUDAGuard guard(y.device());
  const SoftmaxBackwardParams p{gc.const_data_ptr(), yc.const_data_ptr(), gx.mutable_data_ptr(), rows_of(yc), yc.size(-1)};
  KWB_CHECK_LAUNCH(kBackward, softmax_backward_cuda(p, kwb::to_dtype(yc.scalar_type()),
                                                    kwb::all_aligned({&yc, &gc, &gx}), kwb::current_stream(yc)));
  return gx;
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("softmax(Tensor x) -> Tensor");
  m.def("softmax_backward(Tensor grad, Tensor y) -> Tensor");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("softmax", &softmax_cpu);
  m.impl("softmax_backward", &softmax_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("softmax", &softmax_cuda_op);
  m.impl("softmax_backward", &softmax_backward_cuda_op);
}
#endif
