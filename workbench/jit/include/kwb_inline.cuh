// What wb.load_inline() puts in front of the cuda= source: CUDA's runtime and half types and
// kwb's device helpers. No torch headers, so an edit recompiles fast
// (benchmarks/reference/h100_compile_times.md).
#pragma once
#include <cstdint>

#include "kwb_cuda.cuh"
#include "kwb_elementwise.cuh"
