// What wb.load_inline() puts in front of the cuda= source: CUDA's runtime and half types and
// kwb's device helpers. No torch headers: the .cu compiles in ~2 s instead of ~50 s.
#pragma once
#include <cstdint>

#include "kwb_cuda.cuh"
#include "kwb_elementwise.cuh"
