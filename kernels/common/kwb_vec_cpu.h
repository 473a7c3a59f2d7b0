// SIMD building blocks for the kernels' CPU implementations: ATen's at::vec::Vectorized (its
// SLEEF-backed exp/erf/tanh, the same math as eager's CPU kernels), at the width torch picked
// on this machine (the builder passes ATen's flags for that instruction set: AVX-512, AVX2).
//
// Sums over a row are taken in vector lanes and flushed into a double every kFlush elements,
// so an fp32 row of 262144 sums as accurately as the double loop it replaced and as fast as a
// float one.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace kwb {

template <typename T>
using Vec = at::vec::Vectorized<T>;

// Elements summed in vector lanes before the partial sum joins the row's double total.
constexpr int64_t kFlush = 1024;

// The lanes of v added up, in double.
template <typename T>
double lane_sum(const Vec<T>& v) {
  T lanes[Vec<T>::size()];
  v.store(lanes);
  double s = 0;
  for (int i = 0; i < Vec<T>::size(); ++i) s += lanes[i];
  return s;
}

// sum over i < n of f(vectors at i), f taking and returning Vec<T>; a tail is masked to zero
// after f (so f(0) need not be 0). `loads` reads the inputs at an offset and a lane count.
template <typename T, typename Load, typename F>
double sum_over(int64_t n, Load loads, F f) {
  constexpr int64_t W = Vec<T>::size();
  double total = 0;
  int64_t i = 0;
  while (i + W <= n) {
    const int64_t block_end = std::min(n - (n - i) % W, i + kFlush);
    Vec<T> acc0(T(0)), acc1(T(0));
    for (; i + 2 * W <= block_end; i += 2 * W) {
      acc0 = acc0 + f(loads(i, W));
      acc1 = acc1 + f(loads(i + W, W));
    }
    for (; i + W <= block_end; i += W) acc0 = acc0 + f(loads(i, W));
    total += lane_sum<T>(acc0 + acc1);
  }
  if (i < n) {
    const int64_t tail = n - i;
    total += lane_sum<T>(Vec<T>::set(Vec<T>(T(0)), f(loads(i, tail)), tail));
  }
  return total;
}

// The largest element of x[0, n) (-inf for n = 0), NaN if any element is NaN (at::vec::maximum
// propagates it; the scalar tail does the same).
template <typename T>
T max_of(const T* x, int64_t n) {
  constexpr int64_t W = Vec<T>::size();
  const T lowest = -std::numeric_limits<T>::infinity();
  Vec<T> acc(lowest);
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = at::vec::maximum(acc, Vec<T>::loadu(x + i));
  T lanes[W];
  acc.store(lanes);
  T m = lowest;
  for (int64_t j = 0; j < W; ++j) m = (lanes[j] > m || lanes[j] != lanes[j]) ? lanes[j] : m;
  for (; i < n && m == m; ++i) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
  return m;
}

// ---- GELU: kwb_gelu.cuh's formulas, a vector at a time ------------------------------------

// erf: for float, Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, as ATen's Vectorized<float>::erf)
// with ATen's faster exp (exp_u20, 20 ulp: 1.2e-6 of a term at most 0.56); eager's GELU runs
// oneDNN's erf form, 2x ATen's Vectorized erf (56 us against 110 us at 256x1024 on the 2-core
// machine). For double, SLEEF's erf (1 ulp), as eager's.
// The float form given e = exp(-x^2), so that a caller holding that exp pays for it once.
inline Vec<float> erf_given_exp(const Vec<float>& x, const Vec<float>& e) {
  const Vec<float> one(1.f), t = one / at::vec::fmadd(Vec<float>(0.3275911f), x.abs(), one);
  Vec<float> r = at::vec::fmadd(Vec<float>(1.061405429f), t, Vec<float>(-1.453152027f));
  r = at::vec::fmadd(r, t, Vec<float>(1.421413741f));
  r = at::vec::fmadd(r, t, Vec<float>(-0.284496736f));
  r = at::vec::fmadd(r, t, Vec<float>(0.254829592f));
  return (one - r * t * e).copysign(x);
}

template <typename T>
Vec<T> erf_vec(const Vec<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return erf_given_exp(x, (Vec<T>(0.f) - x * x).exp_u20());
  } else {
    return x.erf();
  }
}

// f(std::true_type) for the tanh form, f(std::false_type) for erf: the form is a template
// argument, so each loop holds one formula and no branch.
template <typename F>
void with_gelu_form(bool tanh_form, F f) {
  if (tanh_form) f(std::true_type{});
  else f(std::false_type{});
}

template <bool kTanh, typename T>
Vec<T> gelu_vec(const Vec<T>& v) {
  const Vec<T> one(T(1));
  if constexpr (kTanh) {  // v * sigmoid(2u) = v / (1 + exp(-2u)): one exp, no cancellation
    const Vec<T> u = Vec<T>(T(0.7978845608028654)) * (v + Vec<T>(T(0.044715)) * v * v * v);
    return v / (one + (Vec<T>(T(-2)) * u).exp());
  }
  return Vec<T>(T(0.5)) * v * (one + erf_vec(v * Vec<T>(T(0.7071067811865476))));
}

template <bool kTanh, typename T>
Vec<T> gelu_grad_vec(const Vec<T>& v) {
  const Vec<T> one(T(1));
  if constexpr (kTanh) {
    const Vec<T> u = Vec<T>(T(0.7978845608028654)) * (v + Vec<T>(T(0.044715)) * v * v * v);
    const Vec<T> du = Vec<T>(T(0.7978845608028654)) * (one + Vec<T>(T(3 * 0.044715)) * v * v);
    const Vec<T> e = (Vec<T>(T(-2)) * u).exp();
    const Vec<T> s = one / (one + e);
    // 1 - s as e s, without the subtraction (it cancels above x ~ 2: kwb_gelu.cuh); where e is
    // inf, e s is NaN and 1 - s is 1
    const Vec<T> es = e * s;
    const Vec<T> one_minus_s = Vec<T>::blendv(one, es, es < one);
    return s + v * s * one_minus_s * Vec<T>(T(2)) * du;
  }
  if constexpr (std::is_same_v<T, float>) {
    // erf_vec's exp(-(v / sqrt 2)^2) is the pdf's exp(-v^2 / 2): one exp serves both terms
    // (bias_gelu's erf fp32 step on the 2-core Xeon, x eager: 1.06 -> 1.15 at 256x1024, 1.23 ->
    // 1.39 at 1024x4096; largest error against float64 2.6e-7, eager's 2.9e-7)
    const Vec<T> e = (Vec<T>(-0.5f) * v * v).exp_u20();
    const Vec<T> erf = erf_given_exp(v * Vec<T>(0.7071067811865476f), e);
    return Vec<T>(0.5f) * (one + erf) + v * e * Vec<T>(0.3989422804014327f);
  } else {
    return Vec<T>(T(0.5)) * (one + erf_vec(v * Vec<T>(T(0.7071067811865476)))) +
           v * (Vec<T>(T(-0.5)) * v * v).exp() * Vec<T>(T(0.3989422804014327));
  }
}

// ---- Column sums over a block of rows, for the parameters' gradients ----------------------

// Rows [0, rows) split into equal blocks of at least `grain` rows, at most `max_blocks` of them
// unless that leaves more than kMaxBlockRows rows a block: each block sums its columns into its
// own buffer and the buffers are added in block order, so the result is the same on every run
// with the same thread count (no atomics). The cap bounds the running sums' length: two blocks
// of 4096 rows put bias_gelu's fp32 grad_bias 3.6e-4 off float64 at 8192 x 1024, eager 5.1e-5;
// blocks of 256 rows, 8.0e-5; of 64, added in double, 3.8e-5 (2-core Xeon, no time lost that
// the machine's noise showed: 13.1 ms a backward either way).
constexpr int64_t kMaxBlockRows = 64;

struct RowBlocks {
  int64_t count, rows_per_block;
  RowBlocks(int64_t rows, int64_t grain, int64_t max_blocks) {
    count = std::max<int64_t>(1, std::min<int64_t>(max_blocks, (rows + grain - 1) / std::max<int64_t>(grain, 1)));
    count = std::max<int64_t>(count, (rows + kMaxBlockRows - 1) / kMaxBlockRows);
    rows_per_block = (rows + count - 1) / count;
  }
};

// out[c] = sum over blocks b of partial[b * cols + c], in block order, in double (a partial row
// per 64 rows or more: a 64th of the pass that wrote them), the columns split among threads
// where there are enough sums to share (~64K adds a task).
template <typename T>
void add_blocks(const T* partial, int64_t blocks, int64_t cols, T* out) {
  const int64_t grain = std::max<int64_t>(256, (int64_t(1) << 16) / std::max<int64_t>(blocks, 1));
  at::parallel_for(0, cols, grain, [=](int64_t c0, int64_t c1) {
    std::vector<double> sums(static_cast<size_t>(c1 - c0), 0.0);
    for (int64_t b = 0; b < blocks; ++b) {
      const T* row = partial + b * cols;
      for (int64_t c = c0; c < c1; ++c) sums[c - c0] += static_cast<double>(row[c]);
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<T>(sums[c - c0]);
  });
}

}  // namespace kwb
