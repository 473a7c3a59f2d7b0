// relu_scale as a raw kernel for benchmarks/jit_loop.py: extern "C" (an unmangled name that
// NVRTC users look up), CUDA headers only; the EDIT_SCALE literal and the header's OFFSET are
// the two edit points, as in the kwb and tutorial copies. alpha is a double and n an int:
// torch.cuda._compile_kernel passes Python floats and ints as those, and takes no other types.
#include "relu_scale_raw.h"

extern "C" __global__ void relu_scale_raw(const float* __restrict__ x, float* __restrict__ y, double alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) * ((float)alpha * 1.0f /*EDIT_SCALE*/ + RAW_BENCH_OFFSET);
}
