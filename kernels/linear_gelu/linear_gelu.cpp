// linear_gelu: y = GELU(x W^T + b), the fused Linear + bias + GELU, approximate = "none" (erf)
// or "tanh", as F.gelu(F.linear(x, W, b), approximate). Op schemas, argument checks, the CPU
// implementation, the CUDA routes and the registrations; the CUDA kernels are in linear_gelu.cu.
//
// CUDA routes (kernels/linear_gelu/NOTES.md has the measurements behind them):
//   fp32 with kSkinnyMinRows to kSkinnyMaxRows rows (contiguous, k a multiple of 4): the skinny
//     kernel, bias + GELU in its epilogue.
//   erf form, 16-bit, at least kSm90aMinOutputs outputs, on the H100 (compute capability 9.0):
//     the CUTLASS product with bias + GELU in its epilogue (linear_gelu_sm90a.cuh), which
//     also writes the product before the GELU where training keeps it.
//   tanh form otherwise: cuBLASLt's GELU + bias epilogue (at::_addmm_activation): the product
//     and the activation in one kernel, no extra pass over y.
//   erf form otherwise, 16-bit: cuBLAS's product with no epilogue (at::mm), then one pass of
//     bias + GELU into y (kwb_bias_gelu.cuh), Inductor's route: 0.7-2.2% faster than the addmm
//     below at 32 x 768 -> 3072 (H100).
//   erf form otherwise: cuBLASLt's bias epilogue (at::addmm), then one GELU pass in place
//     (cuBLASLt's GELU epilogue is the tanh form only).
// For training (linear_gelu_forward) the product before the GELU is kept for the backward:
// addmm, then a GELU pass from it into y (the CUTLASS route: both from one kernel). Its
// backward: one pass for grad * GELU'(pre) and the bias gradient (its column sums), then
// cuBLAS's two products.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/_addmm_activation.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>

#include "kwb_checks.h"
#include "kwb_library.h"
#include "kwb_vec_cpu.h"
#include "linear_gelu.h"

namespace {

// fp32 batches of kSkinnyMinRows .. kSkinnyMaxRows rows take the skinny kernel. x [m, 768] ->
// 3072 on the H100, us at m = 1 / 8 / 16 / 24 / 32 / 48: skinny 13.6 / 13.7 / 13.7 / 20.4 /
// 21.0 / 33.4, cuBLAS (eager) 13.6 / 17.8 / 23.9 / 40.9 / 40.9 / 33.4, torch.compile 13.4 / 17.5
// / 23.5 / 22.4 / 21.9 / 23.1 (kernels/linear_gelu/NOTES.md).
constexpr int64_t kSkinnyMinRows = 2, kSkinnyMaxRows = 32;

// The CUTLASS route's smallest product (m x n outputs): at 2048 x 4096 -> 4096 (2^23) it took
// 109 us against cuBLAS's addmm + GELU pass 104 (H200). Its tile walk, bf16 8192 x 4096 -> 16384,
// erf, timed in turns, us by swizzle / raster: 1646 at 2 / along m, 1690 at 1 / heuristic, 1763
// at 2 / along n (NOTES.md, "Round 14").
constexpr int64_t kSm90aMinOutputs = int64_t{1} << 24;
constexpr int kSm90aSwizzle = 2, kSm90aRaster = 1;

bool is_tanh(const char* op, c10::string_view approximate) {
  if (approximate == "tanh") return true;
  TORCH_CHECK_VALUE(approximate == "none", op, ": approximate must be 'none' (the erf form) or 'tanh', got '",
                    std::string(approximate), "'");
  return false;
}

// x is [..., k], weight [n, k], bias [n]: one dtype, one device.
void check_args(const char* op, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                std::initializer_list<at::ScalarType> dtypes, const char* where) {
  kwb::check_dtype_in(op, "x", x, dtypes, where);
  kwb::check_same_dtype(op, "x", x, "weight", weight);
  kwb::check_same_dtype(op, "x", x, "bias", bias);
  kwb::check_same_device(op, "x", x, "weight", weight);
  kwb::check_same_device(op, "x", x, "bias", bias);
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (its features), got a 0-d tensor");
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == x.size(-1), op, ": weight must be 2-D [out_features, ",
              x.size(-1), "] (x's last dimension as its second), got shape ", weight.sizes());
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias must be 1-D with weight's first dimension (",
              weight.size(0), ") as its length, got shape ", bias.sizes());
}

// x as [m, k] rows (a view where it can be; k = 0 included), and y's shape [..., n].
at::Tensor rows_of(const at::Tensor& x) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  return kwb::contiguous(x).reshape({m, x.size(-1)});
}

std::vector<int64_t> out_shape(const at::Tensor& x, const at::Tensor& weight) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(weight.size(0));
  return shape;
}

// ---- CPU --------------------------------------------------------------------------------

// out = gelu(pre) (backward: grad * gelu'(pre)) over every element, on the CPU.
void gelu_map_cpu(const at::Tensor& pre, const at::Tensor* grad, at::Tensor& out, bool tanh_form) {
  AT_DISPATCH_FLOATING_TYPES(pre.scalar_type(), "linear_gelu", [&] {
    using Vec = kwb::Vec<scalar_t>;
    const scalar_t* in = pre.const_data_ptr<scalar_t>();
    const scalar_t* g = grad ? grad->const_data_ptr<scalar_t>() : nullptr;
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    kwb::with_gelu_form(tanh_form, [&](auto form) {
      constexpr bool kTanh = decltype(form)::value;
      at::parallel_for(0, pre.numel(), kwb::kCpuGrain, [=](int64_t i0, int64_t i1) {
        if (g)
          at::vec::map2([](Vec gv, Vec v) { return gv * kwb::gelu_grad_vec<kTanh>(v); }, o + i0, g + i0, in + i0, i1 - i0);
        else
          at::vec::map([](Vec v) { return kwb::gelu_vec<kTanh>(v); }, o + i0, in + i0, i1 - i0);
      });
    });
  });
}

std::tuple<at::Tensor, at::Tensor> linear_gelu_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                           const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh("linear_gelu_forward", approximate);
  check_args("linear_gelu_forward", x, weight, bias, {at::kFloat, at::kDouble}, "CPU");
  at::Tensor pre = at::addmm(bias, rows_of(x), weight.t());
  at::Tensor y = at::empty_like(pre);
  gelu_map_cpu(pre, nullptr, y, tanh_form);
  return {y.reshape(out_shape(x, weight)), pre.reshape(out_shape(x, weight))};
}

at::Tensor linear_gelu_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           c10::string_view approximate) {
  const bool tanh_form = is_tanh("linear_gelu", approximate);
  check_args("linear_gelu", x, weight, bias, {at::kFloat, at::kDouble}, "CPU");
  at::Tensor y = at::addmm(bias, rows_of(x), weight.t());
  gelu_map_cpu(y, nullptr, y, tanh_form);  // in place: each element read, then written
  return y.reshape(out_shape(x, weight));
}

void check_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& pre,
                    std::initializer_list<at::ScalarType> dtypes, const char* where) {
  constexpr const char* op = "linear_gelu_backward";
  kwb::check_dtype_in(op, "x", x, dtypes, where);
  kwb::check_same_dtype(op, "x", x, "weight", weight);
  kwb::check_same_device(op, "x", x, "weight", weight);
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1), op,
              ": weight must be 2-D [out_features, ", x.dim() ? x.size(-1) : 0, "], got shape ", weight.sizes());
  const auto shape = out_shape(x, weight);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"grad", grad}, {"pre", pre}}) {
    kwb::check_same_dtype(op, "x", x, name, t);
    kwb::check_same_device(op, "x", x, name, t);
    TORCH_CHECK(t.sizes() == at::IntArrayRef(shape), op, ": ", name, " must have shape ", at::IntArrayRef(shape),
                " (x's leading dimensions, then weight's first), got ", t.sizes());
  }
}

// The products' gradients from grad_pre = grad * GELU'(pre): grad_x = grad_pre W, grad_W = grad_pre^T x.
std::pair<at::Tensor, at::Tensor> products_from(const at::Tensor& grad_pre, const at::Tensor& x, const at::Tensor& weight) {
  return {at::mm(grad_pre, weight).reshape(x.sizes()), at::mm(grad_pre.t(), rows_of(x))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_gelu_backward_cpu(const at::Tensor& grad, const at::Tensor& x,
                                                                        const at::Tensor& weight, const at::Tensor& pre,
                                                                        c10::string_view approximate) {
  const bool tanh_form = is_tanh("linear_gelu_backward", approximate);
  check_backward(grad, x, weight, pre, {at::kFloat, at::kDouble}, "CPU");
  const at::Tensor g2 = rows_of(grad), p2 = rows_of(pre);
  at::Tensor grad_pre = at::empty_like(p2);
  gelu_map_cpu(p2, &g2, grad_pre, tanh_form);
  const auto [grad_x, grad_w] = products_from(grad_pre, x, weight);
  return {grad_x, grad_w, at::sum(grad_pre, {0})};
}

at::Tensor variant_cpu(const char* op, const char* what = "a CUDA kernel kept for teaching") {
  TORCH_CHECK(false, op, ": ", what, " (NOTES.md); on the CPU use linear_gelu");
}
at::Tensor linear_gelu_naive_cpu(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view) {
  return variant_cpu("linear_gelu_naive");
}
at::Tensor linear_gelu_tiled_cpu(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view) {
  return variant_cpu("linear_gelu_tiled");
}
at::Tensor linear_gelu_skinny_cpu(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view) {
  return variant_cpu("linear_gelu_skinny", "linear_gelu's CUDA kernel for small fp32 batches");
}
at::Tensor linear_gelu_sm90a_cpu(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view, int64_t,
                                 int64_t, int64_t) {
  return variant_cpu("linear_gelu_sm90a", "linear_gelu's CUTLASS product for the H100");
}

// ---- CUDA -------------------------------------------------------------------------------

#ifdef KWB_WITH_CUDA
constexpr std::initializer_list<at::ScalarType> kCudaTypes = {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble};

using Launcher = const char* (*)(const LinearGeluParams&, kwb::DType, cudaStream_t);

// One of this file's matrix kernels: y (and pre, if asked) from x, W and b.
at::Tensor run_matrix_kernel(const char* op, Launcher launch, const at::Tensor& x, const at::Tensor& weight,
                             const at::Tensor& bias, bool tanh_form, at::Tensor* pre) {
  const at::Tensor x2 = rows_of(x), wc = kwb::contiguous(weight), bc = kwb::contiguous(bias);
  const int64_t m = x2.size(0), n = wc.size(0), k = x2.size(1);
  at::Tensor y = at::empty({m, n}, x2.options());
  if (pre) *pre = at::empty_like(y);
  // the tiled kernel's pieces of k, summed in a workspace (the naive kernel takes k whole)
  const int splits = launch == linear_gelu_tiled_cuda ? linear_gelu_tiled_splits(m, n, k) : 1;
  at::Tensor partial;
  if (splits > 1)
    partial = at::empty({splits, m, n}, x2.options().dtype(x2.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  const LinearGeluParams p{x2.const_data_ptr(), wc.const_data_ptr(), bc.const_data_ptr(), y.mutable_data_ptr(),
                           pre ? pre->mutable_data_ptr() : nullptr, m, n, k, tanh_form,
                           splits > 1 ? partial.mutable_data_ptr() : nullptr, splits};
  KWB_CHECK_LAUNCH(op, launch(p, kwb::to_dtype(x2.scalar_type()), kwb::current_stream(x2)));
  return y;
}

bool skinny_route(const at::Tensor& x, const at::Tensor& weight) {
  if (x.scalar_type() != at::kFloat || x.size(-1) % 4 != 0) return false;
  const int64_t m = c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1);
  // contiguous inputs (rows_of and contiguous() then copy nothing) with 16-byte aligned data
  const bool aligned = x.is_contiguous() && weight.is_contiguous() &&
                       reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(weight.const_data_ptr()) % 16 == 0;
  // a grid short of one block an SM is left to cuBLAS, which can split k: the measured shapes
  // (768 -> 3072) give 192-384 blocks on 132 SMs, and nothing narrower was measured
  return aligned && m >= kSkinnyMinRows && m <= kSkinnyMaxRows && linear_gelu_skinny_fills_gpu(m, weight.size(0));
}

void gelu_pass(const char* op, const at::Tensor& pre, at::Tensor& y, bool tanh_form) {
  const GeluParams p{pre.const_data_ptr(), y.mutable_data_ptr(), pre.numel(), tanh_form};
  KWB_CHECK_LAUNCH(op, gelu_cuda(p, kwb::to_dtype(pre.scalar_type()), kwb::current_stream(pre)));
}

// y = GELU(x W^T + b) as a product without an epilogue, then bias + GELU in one pass into a new y.
at::Tensor mm_then_bias_gelu(const char* op, const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& bias,
                             bool tanh_form) {
  const at::Tensor pre = at::mm(x2, weight.t()), b = kwb::contiguous(bias);
  at::Tensor y = at::empty_like(pre);
  const BiasGeluPassParams p{pre.const_data_ptr(), b.const_data_ptr(), y.mutable_data_ptr(), pre.size(0), pre.size(1),
                             tanh_form};
  KWB_CHECK_LAUNCH(op, bias_gelu_pass_cuda(p, kwb::to_dtype(pre.scalar_type()), kwb::all_aligned({&pre, &b, &y}),
                                           kwb::current_stream(pre)));
  return y;
}

// The CUTLASS product: y (and pre, if asked) from x, W and b. nullptr where it ran, else why it
// cannot take this call (the caller then takes another route, having allocated nothing); a
// failed launch raises.
const char* run_sm90a(const char* op, LinearGeluSm90aEntry entry, const at::Tensor& x2, const at::Tensor& weight,
                      const at::Tensor& bias, at::Tensor& y, at::Tensor* pre, int swizzle, int raster) {
  if (!kwb::all_aligned({&x2, &weight, &bias}) || !weight.is_contiguous() || !bias.is_contiguous())
    return "x, weight and bias must be contiguous and 16-byte aligned";
  const int64_t m = x2.size(0), n = weight.size(0), k = x2.size(1);
  if (m == 0 || n == 0 || k == 0) return "the product is empty";
  if (std::max({m, n, k}) > std::numeric_limits<int>::max()) return "CUTLASS takes sizes below 2^31";
  Sm90aSchedule schedule{};
  if (!linear_gelu_sm90a_schedule(swizzle, raster, &schedule)) return "the GPU is not compute capability 9.0";
  LinearGeluParams p{x2.const_data_ptr(), weight.const_data_ptr(), bias.const_data_ptr(), nullptr, nullptr, m, n, k,
                     false, nullptr, 1};
  const cudaStream_t stream = kwb::current_stream(x2);
  size_t bytes = 0;
  if (const char* why = entry(p, schedule, nullptr, &bytes, stream)) return why;  // shapes only: no output yet
  y = at::empty({m, n}, x2.options());
  if (pre) *pre = at::empty_like(y);
  p.y = y.mutable_data_ptr();
  p.pre = pre ? pre->mutable_data_ptr() : nullptr;
  const at::Tensor workspace = at::empty({static_cast<int64_t>(bytes)}, x2.options().dtype(at::kByte));
  KWB_CHECK_LAUNCH(op, entry(p, schedule, bytes ? workspace.mutable_data_ptr() : nullptr, nullptr, stream));
  return nullptr;
}

// The shipped route's CUTLASS entry for this call, or nullptr where cuBLAS's route is taken:
// products of a cluster's 1 x 2 tiles of 128 x 128 or more, kSm90aMinOutputs outputs in all.
LinearGeluSm90aEntry sm90a_route(const at::Tensor& x, const at::Tensor& weight, bool tanh_form, bool with_pre) {
  const at::ScalarType t = x.scalar_type();
  if (tanh_form || (t != at::kHalf && t != at::kBFloat16)) return nullptr;
  const int64_t m = c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1), n = weight.size(0);
  if (m < 128 || n < 256 || m * n < kSm90aMinOutputs) return nullptr;
  if (t == at::kHalf) return with_pre ? linear_gelu_sm90a_fp16_pre : linear_gelu_sm90a_fp16;
  return with_pre ? linear_gelu_sm90a_bf16_pre : linear_gelu_sm90a_bf16;
}

at::Tensor linear_gelu_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            c10::string_view approximate) {
  constexpr const char* op = "linear_gelu";
  const bool tanh_form = is_tanh(op, approximate);
  check_args(op, x, weight, bias, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y;
  const LinearGeluSm90aEntry sm90a = sm90a_route(x, weight, tanh_form, false);
  if (sm90a && !run_sm90a(op, sm90a, rows_of(x), weight, bias, y, nullptr, kSm90aSwizzle, kSm90aRaster)) {
    // y holds the product and its GELU
  } else if (skinny_route(x, weight)) {
    y = run_matrix_kernel(op, linear_gelu_skinny_cuda, x, weight, bias, tanh_form, nullptr);
  } else if (tanh_form) {
    y = at::_addmm_activation(bias, rows_of(x), weight.t(), 1, 1, /*use_gelu=*/true);
  } else if (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) {
    y = mm_then_bias_gelu(op, rows_of(x), weight, bias, false);
  } else {
    y = at::addmm(bias, rows_of(x), weight.t());
    gelu_pass(op, y, y, false);
  }
  return y.reshape(out_shape(x, weight));
}

std::tuple<at::Tensor, at::Tensor> linear_gelu_forward_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                            const at::Tensor& bias, c10::string_view approximate) {
  constexpr const char* op = "linear_gelu_forward";
  const bool tanh_form = is_tanh(op, approximate);
  check_args(op, x, weight, bias, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y, pre;
  const LinearGeluSm90aEntry sm90a = sm90a_route(x, weight, tanh_form, true);
  if (sm90a && !run_sm90a(op, sm90a, rows_of(x), weight, bias, y, &pre, kSm90aSwizzle, kSm90aRaster)) {
    // y and pre from one kernel
  } else if (skinny_route(x, weight)) {
    y = run_matrix_kernel(op, linear_gelu_skinny_cuda, x, weight, bias, tanh_form, &pre);
  } else {
    pre = at::addmm(bias, rows_of(x), weight.t());
    y = at::empty_like(pre);
    gelu_pass(op, pre, y, tanh_form);
  }
  return {y.reshape(out_shape(x, weight)), pre.reshape(out_shape(x, weight))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_gelu_backward_cuda(const at::Tensor& grad, const at::Tensor& x,
                                                                         const at::Tensor& weight, const at::Tensor& pre,
                                                                         c10::string_view approximate) {
  constexpr const char* op = "linear_gelu_backward";
  const bool tanh_form = is_tanh(op, approximate);
  check_backward(grad, x, weight, pre, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor g2 = rows_of(grad), p2 = rows_of(pre);
  const int64_t rows = p2.size(0), cols = p2.size(1);
  at::Tensor grad_pre = at::empty_like(p2);
  at::Tensor grad_b = at::empty({cols}, p2.options());
  const bool aligned = kwb::all_aligned({&g2, &p2, &grad_pre});
  const kwb::DType dtype = kwb::to_dtype(p2.scalar_type());
  at::Tensor ws = at::empty({linear_gelu_backward_workspace_rows(rows, cols, dtype, aligned), cols},
                            p2.options().dtype(p2.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  const GeluBackwardParams p{g2.const_data_ptr(), p2.const_data_ptr(), grad_pre.mutable_data_ptr(),
                             grad_b.mutable_data_ptr(), ws.mutable_data_ptr(), rows, cols, tanh_form};
  KWB_CHECK_LAUNCH(op, gelu_backward_cuda(p, dtype, aligned, kwb::current_stream(p2)));
  const auto [grad_x, grad_w] = products_from(grad_pre, x, weight);
  return {grad_x, grad_w, grad_b};
}

// The ops that run one matrix kernel whatever the batch (linear_gelu_naive, _tiled, _skinny).
at::Tensor matrix_kernel_op(const char* op, Launcher launch, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, c10::string_view approximate) {
  const bool tanh_form = is_tanh(op, approximate);
  check_args(op, x, weight, bias, kCudaTypes, "CUDA");
  const c10::cuda::CUDAGuard guard(x.device());
  return run_matrix_kernel(op, launch, x, weight, bias, tanh_form, nullptr).reshape(out_shape(x, weight));
}

at::Tensor linear_gelu_naive_cuda_op(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                     c10::string_view approximate) {
  return matrix_kernel_op("linear_gelu_naive", linear_gelu_naive_cuda, x, weight, bias, approximate);
}

at::Tensor linear_gelu_tiled_cuda_op(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                     c10::string_view approximate) {
  return matrix_kernel_op("linear_gelu_tiled", linear_gelu_tiled_cuda, x, weight, bias, approximate);
}

// The CUTLASS product alone, whatever the shape: config 0 is the shipped tile (bf16 or fp16), and
// the default schedule the shipped one; 1.. the bf16 variants of a build with
// -DKWB_LINEAR_GELU_SM90A_VARIANTS; the erf form, except config 4 (tanh). Raises where it
// cannot take the call.
at::Tensor linear_gelu_sm90a_cuda_op(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                     c10::string_view approximate, int64_t config, int64_t swizzle, int64_t raster) {
  constexpr const char* op = "linear_gelu_sm90a";
  const bool tanh_form = is_tanh(op, approximate);
  check_args(op, x, weight, bias, {at::kHalf, at::kBFloat16}, "CUDA");
  TORCH_CHECK_VALUE(config >= 0 && config <= 8, op, ": config must be 0 (the shipped tile) to 8, got ", config);
  TORCH_CHECK_VALUE(tanh_form == (config == 4), op, ": config ", config, " is the ", config == 4 ? "tanh" : "erf",
                    " form; approximate='", std::string(approximate), "' asks for the other");
  TORCH_CHECK_VALUE(config == 0 || x.scalar_type() == at::kBFloat16, op, ": configs 1-8 are bf16 only, got ",
                    x.scalar_type());
  TORCH_CHECK_VALUE(swizzle == 1 || swizzle == 2 || swizzle == 4 || swizzle == 8, op,
                    ": swizzle must be 1, 2, 4 or 8, got ", swizzle);
  TORCH_CHECK_VALUE(raster >= 0 && raster <= 2, op, ": raster must be 0 (heuristic), 1 (along m) or 2 (along n), got ", raster);
  const c10::cuda::CUDAGuard guard(x.device());
  const LinearGeluSm90aEntry entries[] = {
      x.scalar_type() == at::kHalf ? linear_gelu_sm90a_fp16 : linear_gelu_sm90a_bf16, linear_gelu_sm90a_v1,
      linear_gelu_sm90a_v2, linear_gelu_sm90a_v3, linear_gelu_sm90a_v4, linear_gelu_sm90a_v5, linear_gelu_sm90a_v6,
      linear_gelu_sm90a_v7, linear_gelu_sm90a_v8};
  at::Tensor y;
  const char* why = run_sm90a(op, entries[config], rows_of(x), weight, bias, y, nullptr, static_cast<int>(swizzle),
                              static_cast<int>(raster));
  TORCH_CHECK(why == nullptr, op, ": cannot run here: ", why);
  return y.reshape(out_shape(x, weight));
}

at::Tensor linear_gelu_skinny_cuda_op(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                      c10::string_view approximate) {
  return matrix_kernel_op("linear_gelu_skinny", linear_gelu_skinny_cuda, x, weight, bias, approximate);
}
#endif

}  // namespace

KWB_LIBRARY(m) {
  m.def("linear_gelu(Tensor x, Tensor weight, Tensor bias, str approximate='none') -> Tensor");
  m.def("linear_gelu_forward(Tensor x, Tensor weight, Tensor bias, str approximate='none') -> (Tensor y, Tensor pre)");
  m.def("linear_gelu_backward(Tensor grad, Tensor x, Tensor weight, Tensor pre, str approximate='none') -> "
        "(Tensor grad_x, Tensor grad_weight, Tensor grad_bias)");
  m.def("linear_gelu_naive(Tensor x, Tensor weight, Tensor bias, str approximate='none') -> Tensor");
  m.def("linear_gelu_tiled(Tensor x, Tensor weight, Tensor bias, str approximate='none') -> Tensor");
  m.def("linear_gelu_skinny(Tensor x, Tensor weight, Tensor bias, str approximate='none') -> Tensor");
  m.def("linear_gelu_sm90a(Tensor x, Tensor weight, Tensor bias, str approximate='none', int config=0, int swizzle=2, "
        "int raster=1) -> Tensor");
}

KWB_LIBRARY_IMPL(m, CPU) {
  m.impl("linear_gelu", &linear_gelu_cpu);
  m.impl("linear_gelu_forward", &linear_gelu_forward_cpu);
  m.impl("linear_gelu_backward", &linear_gelu_backward_cpu);
  m.impl("linear_gelu_naive", &linear_gelu_naive_cpu);
  m.impl("linear_gelu_tiled", &linear_gelu_tiled_cpu);
  m.impl("linear_gelu_skinny", &linear_gelu_skinny_cpu);
  m.impl("linear_gelu_sm90a", &linear_gelu_sm90a_cpu);
}

#ifdef KWB_WITH_CUDA
KWB_LIBRARY_IMPL(m, CUDA) {
  m.impl("linear_gelu", &linear_gelu_cuda);
  m.impl("linear_gelu_forward", &linear_gelu_forward_cuda);
  m.impl("linear_gelu_backward", &linear_gelu_backward_cuda);
  m.impl("linear_gelu_naive", &linear_gelu_naive_cuda_op);
  m.impl("linear_gelu_tiled", &linear_gelu_tiled_cuda_op);
  m.impl("linear_gelu_skinny", &linear_gelu_skinny_cuda_op);
  m.impl("linear_gelu_sm90a", &linear_gelu_sm90a_cuda_op);
}
#endif
