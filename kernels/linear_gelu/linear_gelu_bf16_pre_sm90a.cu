// linear_gelu's Hopper product, bf16, erf form: y and the product before the GELU, for the
// backward (linear_gelu_sm90a.cuh). One instantiation a unit: each is about 95 s of nvcc on 2
// cores, and ninja runs the units side by side.
#include "linear_gelu_sm90a.cuh"

KWB_LINEAR_GELU_SM90A_ENTRY(linear_gelu_sm90a_bf16_pre, kwb::DType::BFloat16, kwb_sm90a::Shipped, true, false)
