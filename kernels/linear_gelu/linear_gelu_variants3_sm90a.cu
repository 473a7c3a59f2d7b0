// More tile configurations of linear_gelu's Hopper product (bf16, erf form), for
// benchmarks/linear_gelu_variants.py: the cooperative 128 x 256 tile under CUTLASS's stream-K
// scheduler, with clusters of 2 x 1 and of 1 x 2. 8192 x 16384 outputs are 4096 tiles of 128 x 256, 31.03 waves
// of the H100's 132 SMs: the persistent walk runs 32, and stream-K splits the last ones along k.
// Compiled only with -DKWB_LINEAR_GELU_SM90A_VARIANTS.
#ifndef KWB_LINEAR_GELU_SM90A_VARIANTS
#undef KWB_SM90A  // not asked for: CUTLASS's headers go unparsed
#endif
#include "linear_gelu_sm90a.cuh"

#ifdef KWB_SM90A
namespace kwb_sm90a {
using StreamK = cutlass::gemm::StreamKScheduler;
using StreamK2x1 = Config<Shape<_128, _256, _64>, Shape<_2, _1, _1>, Cooperative, CooperativeEpilogue, StreamK>;
using StreamK1x2 = Config<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue, StreamK>;
}  // namespace kwb_sm90a
#endif

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v5, kwb::DType::BFloat16, kwb_sm90a::StreamK2x1, false, false)
KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v6, kwb::DType::BFloat16, kwb_sm90a::StreamK1x2, false, false)
