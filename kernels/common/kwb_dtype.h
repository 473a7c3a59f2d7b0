// Types shared by a kernel's binding .cpp and its .cu: no torch headers and no CUDA headers,
// so the .cu stays a fast translation unit (benchmarks/reference/h100_compile_times.md).
#pragma once
#include <cstdint>

// The same declaration as CUDA's driver_types.h; repeating a typedef is legal C++.
typedef struct CUstream_st* cudaStream_t;

namespace kwb {

// Element types a launcher accepts; the .cpp maps at::ScalarType onto these and the .cu turns
// them into template arguments with KWB_DTYPE_SWITCH (kwb_cuda.cuh).
enum class DType : int { Float32 = 0, Float16 = 1, BFloat16 = 2, Float64 = 3 };

}  // namespace kwb
