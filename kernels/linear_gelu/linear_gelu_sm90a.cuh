// linear_gelu's Hopper product: y = GELU(x W^T + b) as one CUTLASS 3 kernel (TMA loads,
// warp-specialized wgmma mainloop, persistent tiles), the bias and the erf GELU applied to the
// fp32 accumulators in its epilogue, so y is written once and never read back. cuBLASLt's GELU
// epilogue is the tanh form only; its erf route (bias epilogue, then a GELU pass over y) spends
// 268 MB of traffic more at bf16 8192 x 4096 -> 16384 (NOTES.md, "Round 13").
//
// Included only by the *_sm90a.cu units, which the builder compiles for sm_90a with
// -DKWB_SM90A and CUTLASS's headers (workbench/jit/arch_units.py); elsewhere each unit
// defines its entry points to refuse (linear_gelu.h says what they return).
#pragma once
#include "linear_gelu.h"

#ifdef KWB_SM90A
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

namespace kwb_sm90a {

using namespace cute;

template <kwb::DType D> struct Element;
template <> struct Element<kwb::DType::BFloat16> { using type = cutlass::bfloat16_t; };
template <> struct Element<kwb::DType::Float16> { using type = cutlass::half_t; };

// A tile configuration: the output tile each consumer step owns, the cluster that shares its
// TMA loads, the kernel and epilogue schedules, and how the persistent grid hands out tiles.
template <class Tile_, class Cluster_, class Kernel_, class Epilogue_, class Scheduler_ = cutlass::gemm::PersistentScheduler>
struct Config {
  using Tile = Tile_;
  using Cluster = Cluster_;
  using KernelSchedule = Kernel_;
  using EpilogueSchedule = Epilogue_;
  using Scheduler = Scheduler_;
};

using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CooperativeEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingpongEpilogue = cutlass::epilogue::TmaWarpSpecialized;

// The shipped tile: ping-pong, each of two consumer warp groups owning a 128 x 128 tile in turn,
// so one group's epilogue (bias and the erf GELU, about 20 instructions an output) runs under
// the other's mainloop; pairs of tiles along n share x's loads. Timed in turns against the
// others on the H200 (bf16 8192 x 4096 -> 16384, erf): 1646 us against 1860 for the cooperative
// 128 x 256 tile below, whose epilogue leaves the tensor cores idle (NOTES.md, "Round 14").
using Pingpong128x128 = Config<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue>;
using Shipped = Pingpong128x128;

// 128 x 256 outputs a tile over two consumer warp groups working together, pairs of tiles along
// m sharing W's loads: CUTLASS's profiler's usual pick for large 16-bit products on the H100.
using Cooperative128x256 = Config<Shape<_128, _256, _64>, Shape<_2, _1, _1>, Cooperative, CooperativeEpilogue>;

// x [m, k] row-major is A (m x k, k contiguous); W [n, k] row-major is B as CUTLASS reads it
// (n x k, k contiguous: "column-major k x n"); y and pre [m, n] row-major. kPre: also store
// x W^T + b (before the GELU) for the backward. kTanh: GELU's tanh form.
template <kwb::DType D, class Cfg, bool kPre, bool kTanh>
struct Gemm {
  using T = typename Element<D>::type;
  template <class V>
  using Act = std::conditional_t<kTanh, cutlass::epilogue::thread::GELU_taylor<V>, cutlass::epilogue::thread::GELU<V>>;
  template <class V>
  struct Activation : Act<V> {};
  using RowMajor = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(T);  // elements in TMA's 16-byte unit
  using Fusion = std::conditional_t<
      kPre, cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<RowMajor, Activation, T, float, T, T, T, float>,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Activation, T, float, T, T, float>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Cfg::Tile, typename Cfg::Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, RowMajor, kAlign, T, RowMajor, kAlign,
      typename Cfg::EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, RowMajor, kAlign, T, cutlass::layout::ColumnMajor, kAlign,
      float, typename Cfg::Tile, typename Cfg::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Cfg::KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      typename Cfg::Scheduler>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Adapter::Arguments arguments(const LinearGeluParams& p, const Sm90aSchedule& s) {
    const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
    const auto stride_x = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
    const auto stride_w = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
    const auto stride_y = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {m, n, 1});
    typename Adapter::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                     {m, n, k, 1},
                                     {static_cast<const T*>(p.x), stride_x, static_cast<const T*>(p.w), stride_w},
                                     {{}, nullptr, stride_y, static_cast<T*>(p.y), stride_y}};
    auto& fused = args.epilogue.thread;
    fused.alpha = 1.0f;
    fused.beta = 0.0f;
    fused.bias_ptr = static_cast<const T*>(p.bias);
    if constexpr (kPre) {
      fused.aux_ptr = static_cast<T*>(p.pre);
      fused.dAux = stride_y;
    }
    args.hw_info.device_id = s.device;
    args.hw_info.sm_count = s.sm_count;
    args.scheduler.max_swizzle_size = s.swizzle;
    using Raster = decltype(args.scheduler.raster_order);
    args.scheduler.raster_order = s.raster == 1 ? Raster::AlongM : s.raster == 2 ? Raster::AlongN : Raster::Heuristic;
    return args;
  }

  // nullptr where CUTLASS takes the problem (and its workspace size in *bytes), else why not.
  // Reads the shapes only: p's pointers may be null (the caller checks their alignment).
  static const char* check(const LinearGeluParams& p, const Sm90aSchedule& s, size_t* bytes) {
    auto args = arguments(p, s);
    if (Adapter::can_implement(args) != cutlass::Status::kSuccess)
      return "CUTLASS cannot take this problem (k and n must be multiples of 8)";
    *bytes = Adapter::get_workspace_size(args);
    return nullptr;
  }

  static const char* run(const LinearGeluParams& p, const Sm90aSchedule& s, void* workspace, cudaStream_t stream) {
    auto args = arguments(p, s);
    Adapter gemm;
    cutlass::Status status = gemm.initialize(args, workspace, stream);
    if (status == cutlass::Status::kSuccess) status = gemm.run(stream);
    if (status != cutlass::Status::kSuccess) {
      const cudaError_t err = cudaGetLastError();
      return err != cudaSuccess ? cudaGetErrorString(err) : cutlass::cutlassGetStatusString(status);
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
  }
};

}  // namespace kwb_sm90a

// One entry point: its check (workspace == nullptr, the size written to *bytes) and its run.
#define KWB_LINEAR_GELU_SM90A_ENTRY(name, dtype, cfg, pre, tanh)                                                     \
  const char* name(const LinearGeluParams& p, const Sm90aSchedule& s, void* workspace, size_t* bytes,               \
                   cudaStream_t stream) {                                                                           \
    using G = kwb_sm90a::Gemm<dtype, cfg, pre, tanh>;                                                               \
    return workspace == nullptr && bytes != nullptr ? G::check(p, s, bytes) : G::run(p, s, workspace, stream);      \
  }
#else
#define KWB_LINEAR_GELU_SM90A_ENTRY(name, dtype, cfg, pre, tanh)                                                     \
  const char* name(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t) {                  \
    return kLinearGeluSm90aAbsent;                                                                                  \
  }
#endif
