// More of linear_gelu_variants_sm90a.cu's configurations (a unit of their own, so nvcc compiles
// them beside the others): cooperative 256 x 128 tiles, and the cooperative 128 x 256 tile with
// GELU's tanh form, against cuBLASLt's epilogue.
#ifndef KWB_LINEAR_GELU_SM90A_VARIANTS
#undef KWB_SM90A  // not asked for: CUTLASS's headers go unparsed
#endif
#include "linear_gelu_sm90a.cuh"

#ifdef KWB_SM90A
namespace kwb_sm90a {
using Tile256x128 = Config<Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, CooperativeEpilogue>;
}  // namespace kwb_sm90a
#endif

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v3, kwb::DType::BFloat16, kwb_sm90a::Tile256x128, false, false)
KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_v4, kwb::DType::BFloat16, kwb_sm90a::Cooperative128x256, false, true)
