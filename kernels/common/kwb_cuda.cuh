// Device-side helpers for kernel .cu files: dtype switch, float conversions, 16-byte vectors,
// launch checks. CUDA headers only (no torch): compile times in benchmarks/reference/h100_compile_times.md.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kwb_dtype.h"

// Turns a runtime kwb::DType into a compile-time type T for the body, a lambda returning the
// launcher's status (flash-attention's static_switch.h idea):
//   return KWB_DTYPE_SWITCH(dtype, T, [&] { ...; return kwb::elementwise(...); });
#define KWB_DTYPE_SWITCH(dtype, T, ...)                                              \
  [&]() -> const char* {                                                             \
    switch (dtype) {                                                                 \
      case ::kwb::DType::Float32: { using T = float; return __VA_ARGS__(); }          \
      case ::kwb::DType::Float16: { using T = __half; return __VA_ARGS__(); }         \
      case ::kwb::DType::BFloat16: { using T = __nv_bfloat16; return __VA_ARGS__(); } \
      case ::kwb::DType::Float64: { using T = double; return __VA_ARGS__(); }         \
    }                                                                                \
    return "unsupported dtype";                                                      \
  }()

namespace kwb {
namespace {  // internal linkage: two builds of one kernel loaded in one process never share these

// Arithmetic type for an element type: half types compute in float, as PyTorch does.
template <typename T> struct AccType { using type = T; };
template <> struct AccType<__half> { using type = float; };
template <> struct AccType<__nv_bfloat16> { using type = float; };
template <typename T> using acc_t = typename AccType<T>::type;

template <typename A, typename T> __device__ __forceinline__ A to_acc(T v) { return static_cast<A>(v); }
template <> __device__ __forceinline__ float to_acc<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T, typename A> __device__ __forceinline__ T from_acc(A v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_acc<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

// fp16 and bf16 data: math in fp32, outputs that keep 11 or 8 bits.
template <typename T> constexpr bool kHalfType = sizeof(T) == 2;

// kFast (for kHalfType data): the hardware's exp2 and reciprocal (__expf, __fdividef), a few ulps
// of fp32; with expf and IEEE divisions bias_gelu's bf16 GELU and lltm's 16-bit cell were
// compute-bound (kernels/bias_gelu/NOTES.md, kernels/lltm/NOTES.md). fp32 and fp64 data keep the
// library functions.
template <bool kFast> __device__ __forceinline__ float exp_(float v) { return kFast ? __expf(v) : expf(v); }
template <bool kFast> __device__ __forceinline__ double exp_(double v) { return exp(v); }
template <bool kFast> __device__ __forceinline__ float div_(float a, float b) { return kFast ? __fdividef(a, b) : a / b; }
template <bool kFast> __device__ __forceinline__ double div_(double a, double b) { return a / b; }

// N elements moved as one aligned access: 16 bytes gives LDG.128/STG.128.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80+;
// a plain copy before that), and the groups that track them: commit after a batch of copies,
// wait until at most N of the thread's batches are still in flight. A thread that reads back
// only what it copied itself needs no barrier.
__device__ __forceinline__ void copy_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

inline bool is_aligned(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

// Multiprocessor count of the current device, read once per device (cudaDeviceGetAttribute
// is cheap, but launches happen millions of times).
inline int sm_count() {
  static int cache[64] = {0};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 132;
  if (cache[device] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    cache[device] = n > 0 ? n : 132;
  }
  return cache[device];
}

// Programmatic dependent launch (sm_90+). A kernel launched by launch_kernel may be dispatched
// while the kernel before it in the stream still runs; wait_prior_grid() then holds it until
// that kernel has ended and its writes are visible, so only the launch and the block dispatch
// overlap the kernel before. Every such kernel calls wait_prior_grid() first, before any memory
// access or early return, and release_next_grid() to let the next one dispatch (its blocks then
// wait, resident, in whatever slots are free). Both are no-ops for a <<<>>> launch and compile to
// nothing below sm_90. Inductor has the same (its enable_pdl), off by default in torch 2.11.
// A kernel of another library launched with PDL right after one of these may start at once (the
// release is the first statement here): that library's own wait, before it touches memory, is
// what orders it, as it is after any kernel that releases early.
__device__ __forceinline__ void wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void release_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// KWB_PDL set to 0, false, off or no (any case): programmatic dependent launch off.
inline bool pdl_turned_off(const char* v) {
  if (v == nullptr) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "0" || s == "false" || s == "off" || s == "no";
}

// Whether launch_kernel asks for programmatic dependent launch of `kernel` on the current
// device: unless the environment turns it off (KWB_PDL=0, read once a process; on an H100 PDL
// took the map's CUDA-graph replays at 2^20 from 4.89 to 4.26 us fp32 and 3.35 to 2.75 us bf16,
// where torch.compile ran 4.88 and 3.38), and where the code the device runs was compiled for
// compute capability 9.0 or more. That is the kernel's PTX version, not the device's: a build
// for 8.0+PTX runs on an H100 from compute_80 PTX, with no wait in it, and must launch plainly.
// Asked of the runtime once a (device, kernel); a launch after that takes a lock and a lookup
// among the module's few dozen kernels.
inline bool pdl_enabled(const void* kernel) {
  static const bool on = !pdl_turned_off(std::getenv("KWB_PDL"));
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> known;
  int device = 0;
  if (!on || cudaGetDevice(&device) != cudaSuccess) return false;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device, kernel);
  auto found = known.find(key);
  if (found != known.end()) return found->second;
  cudaFuncAttributes attributes = {};
  // a failed query (no image for this device, or an earlier asynchronous error it returned) is
  // not remembered: this launch goes plainly and reports the error as its own, through
  // last_launch_error(), and the next launch asks again
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) return false;
  const bool pdl = attributes.ptxVersion >= 90;
  known.emplace(key, pdl);
  return pdl;
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch where
// pdl_enabled(kernel). Errors land where a <<<>>> launch's do: last_launch_error().
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args&&... args) {
  if (!pdl_enabled(reinterpret_cast<const void*>(kernel))) {
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// n % d on the device for a divisor fixed at launch. Divider32 (n and d below 2^31): a multiply-high,
// an add and a shift with a round-up multiplier (Granlund and Montgomery, as PyTorch's IntDivider),
// where a 32-bit `%` is a ~20-instruction sequence; Divider64 for larger indices is a plain `%`.
struct Divider32 {
  uint32_t d, m, s;
  explicit Divider32(uint32_t divisor) : d(divisor), s(0) {
    while (s < 31 && (1u << s) < d) ++s;
    const uint64_t one = 1;
    m = static_cast<uint32_t>(((one << 32) * ((one << s) - d)) / d + 1);
  }
  __host__ __device__ __forceinline__ uint32_t mod(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, m);
#else  // the same arithmetic on the host, for tests
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
#endif
    return n - ((hi + n) >> s) * d;
  }
};
struct Divider64 {
  int64_t d;
  explicit Divider64(int64_t divisor) : d(divisor) {}
  __device__ __forceinline__ int64_t mod(int64_t n) const { return n % d; }
};

// nullptr when the last launch went well, else CUDA's message; the .cpp turns it into a
// TORCH_CHECK naming the op.
inline const char* last_launch_error() {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace
}  // namespace kwb
