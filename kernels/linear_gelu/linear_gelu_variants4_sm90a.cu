// More tile configurations of linear_gelu's Hopper product (bf16, erf form), for
// benchmarks/linear_gelu_variants.py: the shipped ping-pong 128 x 128 tile with clusters of
// 2 x 1 (pairs along m sharing W's loads), and the cooperative 128 x 256 tile with clusters of
// 2 x 1, which was shipped before it.
// Compiled only with -DKWB_LINEAR_GELU_SM90A_VARIANTS.
#ifndef KWB_LINEAR_GELU_SM90A_VARIANTS
#undef KWB_SM90A  // not asked for: CUTLASS's headers go unparsed
#endif
#include "linear_gelu_sm90a.cuh"

#ifdef KWB_SM90A
namespace kwb_sm90a {
using Pingpong2x1 = Config<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Pingpong, PingpongEpilogue>;
}  // namespace kwb_sm90a
#endif

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v7, kwb::DType::BFloat16, kwb_sm90a::Pingpong2x1, false, false)
KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v8, kwb::DType::BFloat16, kwb_sm90a::Cooperative128x256, false, false)
