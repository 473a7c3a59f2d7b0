// lltm: the LLTM cell of PyTorch's C++-extension tutorial, forward and backward. Op schemas,
// argument checks, the matrix products (ATen: cuBLAS on the GPU), the CPU implementation of
// the pointwise part and the CPU/CUDA registrations; the CUDA kernels are in lltm.cu.
//
// One product each: gates = bias + X W^T forward with X = [old_h, input] (addmm: the bias
// rides in cuBLASLt's epilogue, as in F.linear; split products and a plain mm were slower:
// kernels/lltm/NOTES.md), and X's and W's gradients backward. Small batches on the GPU skip
// cat and addmm: one kernel does the forward's product and cell, and backward one kernel the
// cell and the weight gradient, beside the product for X's gradient (lltm.h, lltm_small_step).
// X is returned and saved for backward; X's gradient goes back whole and ops.py hands out its
// two column blocks as old_h's and input's gradients (views, no copy).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <tuple>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "kwb_vec_cpu.h"
#include "lltm.h"

namespace {

constexpr const char* kForward = "lltm_forward";
constexpr const char* kBackward = "lltm_backward";

void check_matrix(const char* op, const char* name, const at::Tensor& t, int64_t rows, int64_t cols, const char* rule) {
  TORCH_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == cols, op, ": ", name, " must have shape [", rows, ", ",
              cols, "] (", rule, "), got ", t.sizes());
}

// input [B, I], weights [3S, S + I], bias [3S], old_h [B, S], old_cell [B, S]; S from old_h.
void check_args(const char* op, const at::Tensor& input, const at::Tensor& weights, const at::Tensor& bias,
                const at::Tensor& old_h, const at::Tensor& old_cell, std::initializer_list<at::ScalarType> dtypes,
                const char* where) {
  kwb::check_dtype_in(op, "input", input, dtypes, where);
  for (auto [name, t] : {std::pair<const char*, const at::Tensor*>{"weights", &weights}, {"bias", &bias},
                         {"old_h", &old_h}, {"old_cell", &old_cell}}) {
    kwb::check_same_dtype(op, "input", input, name, *t);
    kwb::check_same_device(op, "input", input, name, *t);
  }
  TORCH_CHECK(input.dim() == 2, op, ": input must be 2-D [batch, features], got shape ", input.sizes());
  TORCH_CHECK(old_h.dim() == 2, op, ": old_h must be 2-D [batch, state], got shape ", old_h.sizes());
  const int64_t B = input.size(0), I = input.size(1), S = old_h.size(1);
  check_matrix(op, "old_h", old_h, B, S, "batch from input");
  check_matrix(op, "old_cell", old_cell, B, S, "old_h's shape");
  check_matrix(op, "weights", weights, 3 * S, S + I, "3 * state rows, state + features columns");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == 3 * S, op, ": bias must have shape [", 3 * S,
              "] (3 * state), got ", bias.sizes());
}

// ---- CPU: the pointwise part, a row of the batch per task step, a vector of columns at a time

template <typename T> kwb::Vec<T> sigmoid(const kwb::Vec<T>& z) {
  return kwb::Vec<T>(T(1)) / (kwb::Vec<T>(T(1)) + (kwb::Vec<T>(T(0)) - z).exp());
}
template <typename T> kwb::Vec<T> elu(const kwb::Vec<T>& z) {
  return kwb::Vec<T>::blendv(z.expm1(), z, z > kwb::Vec<T>(T(0)));
}

using Forward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;  // new_h, new_cell, X, gates
using Backward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;  // grad X, weights, bias, old_cell

Forward lltm_forward_cpu(const at::Tensor& input, const at::Tensor& weights, const at::Tensor& bias,
                         const at::Tensor& old_h, const at::Tensor& old_cell) {
  check_args(kForward, input, weights, bias, old_h, old_cell, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor X = at::cat({old_h, input}, 1);
  const at::Tensor gates = at::addmm(bias, X, weights.t());
  const at::Tensor cc = kwb::contiguous(old_cell);
  at::Tensor new_h = at::empty(old_h.sizes(), old_h.options()), new_cell = at::empty(old_h.sizes(), old_h.options());
  const int64_t B = old_h.size(0), S = old_h.size(1);
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), kForward, [&] {
    const scalar_t* z = gates.const_data_ptr<scalar_t>();
    const scalar_t* c = cc.const_data_ptr<scalar_t>();
    scalar_t* h = new_h.mutable_data_ptr<scalar_t>();
    scalar_t* nc = new_cell.mutable_data_ptr<scalar_t>();
    using Vec = kwb::Vec<scalar_t>;
    at::parallel_for(0, B, kwb::row_grain(S), [=](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* zr = z + r * 3 * S;
        for (int64_t j = 0; j < S; j += Vec::size()) {
          const int64_t n = std::min<int64_t>(Vec::size(), S - j);
          const Vec i = sigmoid(Vec::loadu(zr + j, n)), o = sigmoid(Vec::loadu(zr + S + j, n)),
                    g = elu(Vec::loadu(zr + 2 * S + j, n));
          const Vec cell = Vec::loadu(c + r * S + j, n) + i * g;
          cell.store(nc + r * S + j, n);
          (cell.tanh() * o).store(h + r * S + j, n);
        }
      }
    });
  });
  return {new_h, new_cell, X, gates};
}

// The forward's saved X [B, S + I] and gates [B, 3S]; grad_h, grad_cell, old_cell [B, S].
void check_backward_args(const at::Tensor& grad_h, const at::Tensor& grad_cell, const at::Tensor& X,
                         const at::Tensor& gates, const at::Tensor& weights, const at::Tensor& bias,
                         const at::Tensor& old_cell, std::initializer_list<at::ScalarType> dtypes, const char* where) {
  kwb::check_dtype_in(kBackward, "old_cell", old_cell, dtypes, where);
  for (auto [name, t] : {std::pair<const char*, const at::Tensor*>{"grad_h", &grad_h}, {"grad_cell", &grad_cell},
                         {"X", &X}, {"gates", &gates}, {"weights", &weights}, {"bias", &bias}}) {
    kwb::check_same_dtype(kBackward, "old_cell", old_cell, name, *t);
    kwb::check_same_device(kBackward, "old_cell", old_cell, name, *t);
  }
  TORCH_CHECK(old_cell.dim() == 2, kBackward, ": old_cell must be 2-D [batch, state], got shape ", old_cell.sizes());
  TORCH_CHECK(X.dim() == 2, kBackward, ": X must be 2-D [batch, state + features], got shape ", X.sizes());
  const int64_t B = old_cell.size(0), S = old_cell.size(1);
  kwb::check_same_shape(kBackward, "old_cell", old_cell, "grad_h", grad_h);
  kwb::check_same_shape(kBackward, "old_cell", old_cell, "grad_cell", grad_cell);
  check_matrix(kBackward, "gates", gates, B, 3 * S, "batch, 3 * state");
  check_matrix(kBackward, "X", X, B, X.size(1), "batch from old_cell");
  check_matrix(kBackward, "weights", weights, 3 * S, X.size(1), "3 * state rows, X's columns");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == 3 * S, kBackward, ": bias must have shape [", 3 * S,
              "] (3 * state), got ", bias.sizes());
}

Backward lltm_backward_cpu(const at::Tensor& grad_h, const at::Tensor& grad_cell, const at::Tensor& X,
                           const at::Tensor& gates, const at::Tensor& weights, const at::Tensor& bias,
                           const at::Tensor& old_cell) {
  check_backward_args(grad_h, grad_cell, X, gates, weights, bias, old_cell, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor dh = kwb::contiguous(grad_h), dc = kwb::contiguous(grad_cell), zc = kwb::contiguous(gates),
                   cc = kwb::contiguous(old_cell);
  const int64_t B = old_cell.size(0), S = old_cell.size(1);
  at::Tensor grad_gates = at::empty({B, 3 * S}, gates.options());
  at::Tensor grad_old_cell = at::empty({B, S}, old_cell.options());
  AT_DISPATCH_FLOATING_TYPES(old_cell.scalar_type(), kBackward, [&] {
    const scalar_t *z = zc.const_data_ptr<scalar_t>(), *c = cc.const_data_ptr<scalar_t>(), *gh = dh.const_data_ptr<scalar_t>(),
                   *gcell = dc.const_data_ptr<scalar_t>();
    scalar_t* dz = grad_gates.mutable_data_ptr<scalar_t>();
    scalar_t* dcell = grad_old_cell.mutable_data_ptr<scalar_t>();
    using Vec = kwb::Vec<scalar_t>;
    at::parallel_for(0, B, kwb::row_grain(S), [=](int64_t r0, int64_t r1) {
      const Vec one(scalar_t(1)), zero(scalar_t(0));
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* zr = z + r * 3 * S;
        scalar_t* dzr = dz + r * 3 * S;
        for (int64_t j = 0; j < S; j += Vec::size()) {
          const int64_t n = std::min<int64_t>(Vec::size(), S - j);
          const Vec zg = Vec::loadu(zr + 2 * S + j, n);
          const Vec i = sigmoid(Vec::loadu(zr + j, n)), o = sigmoid(Vec::loadu(zr + S + j, n)), g = elu(zg);
          const Vec tc = (Vec::loadu(c + r * S + j, n) + i * g).tanh();
          const Vec h = Vec::loadu(gh + r * S + j, n);
          const Vec cell = Vec::loadu(gcell + r * S + j, n) + h * o * (one - tc * tc);
          (cell * g * i * (one - i)).store(dzr + j, n);
          (h * tc * o * (one - o)).store(dzr + S + j, n);
          (cell * i * Vec::blendv(zg.exp(), one, zg > zero)).store(dzr + 2 * S + j, n);
          cell.store(dcell + r * S + j, n);
        }
      }
    });
  });
  at::Tensor grad_bias = B ? at::sum(grad_gates, {0}) : at::zeros({3 * S}, bias.options());
  return {at::mm(grad_gates, weights), at::mm(grad_gates.t(), X), grad_bias, grad_old_cell};
}

// ---- CUDA -------------------------------------------------------------------------------

#ifdef KWB_WITH_CUDA
constexpr std::initializer_list<at::ScalarType> kCudaTypes = {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble};

// One launch for the product and the cell (lltm.h, lltm_small_step).
Forward lltm_forward_small(const at::Tensor& input, const at::Tensor& weights, const at::Tensor& bias,
                           const at::Tensor& old_h, const at::Tensor& old_cell, int64_t B, int64_t I, int64_t S) {
  const at::Tensor in = kwb::contiguous(input), w = kwb::contiguous(weights), b = kwb::contiguous(bias),
                   h = kwb::contiguous(old_h), cc = kwb::contiguous(old_cell);
  at::Tensor X = at::empty({B, S + I}, in.options()), gates = at::empty({B, 3 * S}, in.options());
  at::Tensor new_h = at::empty({B, S}, in.options()), new_cell = at::empty({B, S}, in.options());
  const LltmSmallForwardParams p{in.const_data_ptr(), w.const_data_ptr(), b.const_data_ptr(), h.const_data_ptr(),
                                 cc.const_data_ptr(), X.mutable_data_ptr(), gates.mutable_data_ptr(),
                                 new_h.mutable_data_ptr(), new_cell.mutable_data_ptr(), B, I, S};
  KWB_CHECK_LAUNCH(kForward, lltm_forward_small_cuda(p, kwb::to_dtype(in.scalar_type()), kwb::current_stream(in)));
  return {new_h, new_cell, X, gates};
}

Forward lltm_forward_cuda_op(const at::Tensor& input, const at::Tensor& weights, const at::Tensor& bias,
                             const at::Tensor& old_h, const at::Tensor& old_cell) {
  check_args(kForward, input, weights, bias, old_h, old_cell, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t B = input.size(0), I = input.size(1), S = old_h.size(1);
  if (lltm_small_step(B, I, S))
    return lltm_forward_small(input, weights, bias, old_h, old_cell, B, I, S);
  const at::Tensor X = at::cat({old_h, input}, 1);
  const at::Tensor gates = at::addmm(bias, X, weights.t());
  const at::Tensor cc = kwb::contiguous(old_cell);
  at::Tensor new_h = at::empty(old_h.sizes(), old_h.options()), new_cell = at::empty(old_h.sizes(), old_h.options());
  const LltmForwardParams p{gates.const_data_ptr(), cc.const_data_ptr(), new_h.mutable_data_ptr(),
                            new_cell.mutable_data_ptr(), old_h.size(0), old_h.size(1)};
  const bool aligned = kwb::all_aligned({&gates, &cc, &new_h, &new_cell});
  KWB_CHECK_LAUNCH(kForward, lltm_forward_cuda(p, kwb::to_dtype(input.scalar_type()), aligned, kwb::current_stream(input)));
  return {new_h, new_cell, X, gates};
}

// One kernel for the cell, the bias's and the weights' gradients, and X's gradient as one product
// (lltm.h, lltm_small_step).
Backward lltm_backward_small(const at::Tensor& grad_h, const at::Tensor& grad_cell, const at::Tensor& X,
                             const at::Tensor& gates, const at::Tensor& weights, const at::Tensor& old_cell,
                             int64_t B, int64_t I, int64_t S) {
  const at::Tensor dh = kwb::contiguous(grad_h), dc = kwb::contiguous(grad_cell), x = kwb::contiguous(X),
                   zc = kwb::contiguous(gates), cc = kwb::contiguous(old_cell);
  at::Tensor grad_gates = at::empty({B, 3 * S}, cc.options()), grad_old_cell = at::empty({B, S}, cc.options());
  at::Tensor grad_bias = at::empty({3 * S}, cc.options()), grad_weights = at::empty({3 * S, S + I}, cc.options());
  const LltmSmallBackwardParams p{dh.const_data_ptr(), dc.const_data_ptr(), x.const_data_ptr(), zc.const_data_ptr(),
                                  cc.const_data_ptr(), grad_gates.mutable_data_ptr(), grad_old_cell.mutable_data_ptr(),
                                  grad_bias.mutable_data_ptr(), grad_weights.mutable_data_ptr(), B, I, S};
  KWB_CHECK_LAUNCH(kBackward, lltm_backward_small_cuda(p, kwb::to_dtype(cc.scalar_type()), kwb::current_stream(cc)));
  return {at::mm(grad_gates, weights), grad_weights, grad_bias, grad_old_cell};
}

Backward lltm_backward_cuda_op(const at::Tensor& grad_h, const at::Tensor& grad_cell, const at::Tensor& X,
                               const at::Tensor& gates, const at::Tensor& weights, const at::Tensor& bias,
                               const at::Tensor& old_cell) {
  check_backward_args(grad_h, grad_cell, X, gates, weights, bias, old_cell, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(old_cell.device());
  const int64_t B = old_cell.size(0), S = old_cell.size(1);
  if (lltm_small_step(B, X.size(1) - S, S))
    return lltm_backward_small(grad_h, grad_cell, X, gates, weights, old_cell, B, X.size(1) - S, S);
  const at::Tensor dh = kwb::contiguous(grad_h), dc = kwb::contiguous(grad_cell), zc = kwb::contiguous(gates),
                   cc = kwb::contiguous(old_cell);
  at::Tensor grad_gates = at::empty({B, 3 * S}, gates.options());
  at::Tensor grad_old_cell = at::empty({B, S}, old_cell.options());
  at::Tensor grad_bias = at::empty({3 * S}, bias.options());
  const bool aligned = kwb::all_aligned({&dh, &dc, &zc, &cc, &grad_gates, &grad_old_cell});
  const kwb::DType dtype = kwb::to_dtype(old_cell.scalar_type());
  const int64_t ws_rows = lltm_backward_workspace_rows(B, S, dtype, aligned);
  at::Tensor ws = at::empty({ws_rows, 3 * S}, cc.options().dtype(cc.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  const LltmBackwardParams p{dh.const_data_ptr(), dc.const_data_ptr(), zc.const_data_ptr(), cc.const_data_ptr(), grad_gates.mutable_data_ptr(), grad_old_cell.mutable_data_ptr(),
                             grad_bias.mutable_data_ptr(), ws.mutable_data_ptr(), B, S};
  KWB_CHECK_LAUNCH(kBackward, lltm_backward_cuda(p, dtype, aligned, kwb::current_stream(cc)));
  return {at::mm(grad_gates, weights), at::mm(grad_gates.t(), X), grad_bias, grad_old_cell};
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  // X = [old_h, input] and gates = bias + X W^T are what backward needs.
  m.def("lltm_forward(Tensor input, Tensor weights, Tensor bias, Tensor old_h, Tensor old_cell) "
        "-> (Tensor new_h, Tensor new_cell, Tensor X, Tensor gates)");
  m.def("lltm_backward(Tensor grad_h, Tensor grad_cell, Tensor X, Tensor gates, Tensor weights, Tensor bias, "
        "Tensor old_cell) -> (Tensor grad_X, Tensor grad_weights, Tensor grad_bias, Tensor grad_old_cell)");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("lltm_forward", &lltm_forward_cpu);
  m.impl("lltm_backward", &lltm_backward_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("lltm_forward", &lltm_forward_cuda_op);
  m.impl("lltm_backward", &lltm_backward_cuda_op);
}
#endif
