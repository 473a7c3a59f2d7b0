// Tile configurations of linear_gelu's Hopper product other than the shipped one, for
// benchmarks/linear_gelu_variants.py (bf16): the cooperative 128 x 256 tile with clusters of
// 1 x 2 and of 1 x 1. Compiled only with
// -DKWB_LINEAR_GELU_SM90A_VARIANTS (about 95 s of nvcc each on 2 cores, two a unit); otherwise
// each refuses.
#ifndef KWB_LINEAR_GELU_SM90A_VARIANTS
#undef KWB_SM90A  // not asked for: CUTLASS's headers go unparsed
#endif
#include "linear_gelu_sm90a.cuh"

#ifdef KWB_SM90A
namespace kwb_sm90a {
using Cluster1x2 = Config<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue>;
using Cluster1x1 = Config<Shape<_128, _256, _64>, Shape<_1, _1, _1>, Cooperative, CooperativeEpilogue>;
}  // namespace kwb_sm90a
#endif

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v1, kwb::DType::BFloat16, kwb_sm90a::Cluster1x2, false, false)
KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v2, kwb::DType::BFloat16, kwb_sm90a::Cluster1x1, false, false)
