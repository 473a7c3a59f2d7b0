// vector_add CUDA kernel: c = a + b, two reads and one write per element (12 bytes per fp32
// element; predicted and measured: kernels/relu_scale/NOTES.md), through kwb::elementwise
// (8-byte vectors, one a thread; fp16 and bf16 added two at a time).
#include "kwb_elementwise.cuh"
#include "vector_add.h"

namespace {

template <typename T>
struct Add {
  __device__ T operator()(T a, T b) const {
    using A = kwb::acc_t<T>;
    return kwb::from_acc<T>(kwb::to_acc<A>(a) + kwb::to_acc<A>(b));
  }
  // 16-bit data two at a time, bit for bit the fp32 sum rounded once (kwb_elementwise.cuh): one
  // HADD2/HFMA2 a pair where the fp32 form takes 7 instructions.
  static constexpr bool kPacked = true;
  template <typename P>
  __device__ P pair(P a, P b) const { return __hadd2(a, b); }
};

}  // namespace

const char* vector_add_cuda(const VectorAddParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    kwb::MapArgs<T, 2> args{{static_cast<const T*>(p.a), static_cast<const T*>(p.b)},
                            static_cast<T*>(p.c), p.n};
    return kwb::elementwise(args, Add<T>{}, stream);
  });
}
