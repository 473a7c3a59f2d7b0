// Tile configurations of linear_gelu's Hopper product other than the shipped one, for
// benchmarks/linear_gelu_variants.py (bf16), and their table. Compiled only with
// -DKWB_LINEAR_GELU_SM90A_VARIANTS (about 95 s of nvcc each on 2 cores, two a unit);
// otherwise every config but the shipped one refuses.
#ifndef KWB_LINEAR_GELU_SM90A_VARIANTS
#undef KWB_SM90A  // not asked for: CUTLASS's headers go unparsed
#endif
#include "linear_gelu_sm90a.cuh"

#ifdef KWB_SM90A
namespace kwb_sm90a {
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Cluster1x2 = Config<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Coop, CoopEpi>;
using Cluster1x1 = Config<Shape<_128, _256, _64>, Shape<_1, _1, _1>, Coop, CoopEpi>;
}  // namespace kwb_sm90a

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v1, kwb::DType::BFloat16, kwb_sm90a::Cluster1x2, false, false)
KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v2, kwb::DType::BFloat16, kwb_sm90a::Cluster1x1, false, false)
const char* linear_gelu_sm90a_v3(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v4(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);

const char* linear_gelu_sm90a_variant(int config, const LinearGeluParams& p, const Sm90aSchedule& s, void* workspace,
                                      size_t* bytes, cudaStream_t stream) {
  constexpr LinearGeluSm90aEntry kConfigs[] = {linear_gelu_sm90a_bf16, linear_gelu_sm90a_v1, linear_gelu_sm90a_v2,
                                               linear_gelu_sm90a_v3, linear_gelu_sm90a_v4};
  if (config < 0 || config >= static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]))) return "no such config";
  return kConfigs[config](p, s, workspace, bytes, stream);
}
#else
const char* linear_gelu_sm90a_variant(int config, const LinearGeluParams& p, const Sm90aSchedule& s, void* workspace,
                                      size_t* bytes, cudaStream_t stream) {
  return config == 0 ? linear_gelu_sm90a_bf16(p, s, workspace, bytes, stream) : kLinearGeluSm90aAbsent;
}
#endif
