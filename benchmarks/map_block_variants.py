"""kwb_elementwise.cuh's map at two block sizes and load paths, beside eager PyTorch and
torch.compile (llm.c's dev/cuda style), on the shipped functors' math (vector_add's packed add,
relu_scale's backward, polynomial_activation's backward). At 2^20 elements the map is one wave, and
Inductor's kernels there ran 128-thread blocks (ncu, benchmarks/ncu_compare.py) where kwb's ran 256.

variant "block B": kwb::elementwise<T, K, B> itself, so the row differs from the shipped kernel
                   only in its block size (64 and 512 ran as 128 and 256 did, 3.49-3.59 us bf16);
                   8-byte vectors since 21ff9d9 (round 23's "v8 B" below, now this variant)
variant "copy B":  the 16-byte map for n % (16 / element size) == 0: no tail, a thread a vector,
                   straight-line code as Inductor's (its SASS: load, add, store, exit); "copy 256"
                   is the shape shipped until 21ff9d9, the 16-byte baseline
variant "nc B":    the copy with its loads on the read-only path (ld.global.nc, __ldg)
variant "x2 B":    the copy with two vectors a thread, B apart, both loads before either store
                   (Inductor's fp32 two-input maps at 2^20: 1024 x 128 threads, 8 floats each)
variant "v8x2 B": two 8-byte vectors a thread, B apart, both loads before either store: the 16-byte
                   map's one wave of threads at 2^20 (the 8-byte map needs two) with the 8-byte map's
                   accesses. At 2^20 fp32 the two-input ops ran ×0.98-0.99 torch.compile with events at
                   16 bytes (b8017f6) and ×0.94-0.98 at 8 (7dfb843, 28ba9f5), where as graph replays 8
                   bytes won (×0.994 against ×0.973): does one wave keep the events rows?
variant "plain B": "block B"'s kernel launched with <<<>>>: where "block B" (kwb::elementwise) asks
                   for programmatic dependent launch (on sm_90 unless KWB_PDL=0, kwb_cuda.cuh's launch_kernel),
                   this is its control
"v8 B" (6509aca; now "block B"): the map at 8-byte vectors, two floats or four halves a thread:
                   Inductor's pick for the fp32 add at 2^20 on the H100 at 07f59c1 (XBLOCK 512, 256
                   threads, LDG.E.64; benchmarks/launch_paths.py --dump), whose cubin replayed at 4.91 us
                   where kwb's 16-byte map and every other build of the add ran 5.04-5.06

    python benchmarks/map_block_variants.py [--sizes 1048576,67108864] [--dtypes float32] [--out DIR]
        [--in-turns S] [--variants block:256,plain:256]                          # a CUDA GPU

Measured in turns at 2^20 fp32 (--in-turns 0.5, CUDA graphs of 200 calls; H100, 0c7e09f), us a call:
the eight shapes 5.062-5.079 (vector_add), 5.064-5.086 (polynomial backward), 5.067-5.093 (relu_scale
backward); torch.compile 5.058, 5.052 and 4.900. Among 16-byte shapes the shape is not the lever
there (kernels/relu_scale/NOTES.md, "Round 16"); the vector's width was: 8 bytes, 4.93 us ("Round 23").
"""
from __future__ import annotations

import argparse
import random

import torch
from in_turns import time_each_way

import workbench as wb

GRAPH_CALLS = 200  # calls a CUDA graph holds with --in-turns: ~0.6 ms of 3 us calls a replay
VARIANTS = [("block", 128), ("block", 256), ("copy", 128), ("copy", 256), ("nc", 128), ("nc", 256), ("x2", 128),
            ("x2", 256), ("v8x2", 128), ("v8x2", 256), ("plain", 256)]
KINDS = {"block": 0, "copy": 1, "nc": 2, "x2": 3, "v8x2": 4, "plain": 5}

CUDA = r"""
#include "kwb_elementwise.cuh"

template <typename T> struct Add {
  __device__ T operator()(T a, T b) const {
    return kwb::from_acc<T>(kwb::to_acc<kwb::acc_t<T>>(a) + kwb::to_acc<kwb::acc_t<T>>(b));
  }
  static constexpr bool kPacked = true;
  template <typename P> __device__ P pair(P a, P b) const { return __hadd2(a, b); }
};
template <typename T> struct ReluScaleBackward {
  float alpha;
  __device__ T operator()(T grad, T x) const {
    const float g = kwb::to_acc<float>(grad) * alpha;
    return kwb::from_acc<T>(kwb::to_acc<float>(x) <= 0.f ? 0.f : g);
  }
};
template <typename T> struct PolynomialBackward {
  __device__ T operator()(T grad, T x) const {
    return kwb::from_acc<T>(kwb::to_acc<float>(grad) * (2.f * kwb::to_acc<float>(x) + 1.f));
  }
};

// The map without a tail: aligned data, n % kVec == 0, below 2^31 elements (checked by the caller);
// kNc: loads through the read-only path.
template <typename T, int kBlock, bool kNc, typename F>
__global__ void __launch_bounds__(kBlock) copy_map(kwb::MapArgs<T, 2> args, F f) {
  constexpr int kVec = 16 / sizeof(T);
  using V = kwb::Vec<T, kVec>;
  const uint32_t i = blockIdx.x * kBlock + threadIdx.x;
  if (i < static_cast<uint32_t>(args.n) / kVec) {
    V in[2];
    const uint4* pa = reinterpret_cast<const uint4*>(args.in[0]) + i;
    const uint4* pb = reinterpret_cast<const uint4*>(args.in[1]) + i;
    const uint4 a = kNc ? __ldg(pa) : *pa;
    const uint4 b = kNc ? __ldg(pb) : *pb;
    memcpy(&in[0], &a, 16);
    memcpy(&in[1], &b, 16);
    V out;
    kwb::map_vector<T, 2, kVec>(in, out, f);
    reinterpret_cast<V*>(args.out)[i] = out;
  }
}

// Two kBytes-byte vectors a thread, kBlock vectors apart, every load before the stores.
template <typename T, int kBlock, int kBytes, typename F>
__global__ void __launch_bounds__(kBlock) copy_map_x2(kwb::MapArgs<T, 2> args, F f) {
  constexpr int kVec = kBytes / sizeof(T);
  using V = kwb::Vec<T, kVec>;
  const uint32_t n_vec = static_cast<uint32_t>(args.n) / kVec;
  const uint32_t i0 = blockIdx.x * 2 * kBlock + threadIdx.x, i1 = i0 + kBlock;
  if (i0 >= n_vec) return;
  const V* a = reinterpret_cast<const V*>(args.in[0]);
  const V* b = reinterpret_cast<const V*>(args.in[1]);
  V in0[2] = {a[i0], b[i0]}, in1[2];
  const bool second = i1 < n_vec;
  if (second) { in1[0] = a[i1]; in1[1] = b[i1]; }
  V out0, out1;
  kwb::map_vector<T, 2, kVec>(in0, out0, f);
  reinterpret_cast<V*>(args.out)[i0] = out0;
  if (second) {
    kwb::map_vector<T, 2, kVec>(in1, out1, f);
    reinterpret_cast<V*>(args.out)[i1] = out1;
  }
}

template <int kBlock, typename T, typename F>
const char* launch(int kind, const kwb::MapArgs<T, 2>& args, F f, cudaStream_t s) {
  if (kind == 0) return kwb::elementwise<T, 2, kBlock>(args, f, s);
  if (kind == 5) {  // kind 0's kernel, launched without programmatic dependent launch
    constexpr int kVec8 = 8 / sizeof(T);
    if (args.n % kVec8 || args.n >= (int64_t{1} << 31)) return "plain: n % (8 / element size) must be 0, n < 2^31";
    kwb::map_kernel<T, 2, kVec8, uint32_t, false, kBlock>
        <<<static_cast<unsigned>((args.n / kVec8 + kBlock - 1) / kBlock), kBlock, 0, s>>>(args, f);
    return kwb::last_launch_error();
  }
  constexpr int kVec = 16 / sizeof(T);
  if (args.n % kVec || args.n >= (int64_t{1} << 31)) return "copy variants: n % (16 / element size) must be 0, n < 2^31";
  const unsigned blocks = static_cast<unsigned>((args.n / kVec + kBlock - 1) / kBlock);
  if (kind == 1) copy_map<T, kBlock, false><<<blocks, kBlock, 0, s>>>(args, f);
  else if (kind == 2) copy_map<T, kBlock, true><<<blocks, kBlock, 0, s>>>(args, f);
  else if (kind == 3) copy_map_x2<T, kBlock, 16><<<(blocks + 1) / 2, kBlock, 0, s>>>(args, f);
  else copy_map_x2<T, kBlock, 8><<<blocks, kBlock, 0, s>>>(args, f);  // twice the 16-byte vectors, two a thread
  return kwb::last_launch_error();
}

template <int kBlock, typename T>
const char* run(int op, int kind, const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
  kwb::MapArgs<T, 2> args{{static_cast<const T*>(a), static_cast<const T*>(b)}, static_cast<T*>(out), n};
  if (op == 0) return launch<kBlock>(kind, args, Add<T>{}, s);
  if (op == 1) return launch<kBlock>(kind, args, ReluScaleBackward<T>{1.5f}, s);
  return launch<kBlock>(kind, args, PolynomialBackward<T>{}, s);
}

template <int kBlock>
const char* by_dtype(int op, int kind, int dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
  if (dtype == 0) return run<kBlock, float>(op, kind, a, b, out, n, s);
  if (dtype == 1) return run<kBlock, __half>(op, kind, a, b, out, n, s);
  return run<kBlock, __nv_bfloat16>(op, kind, a, b, out, n, s);
}

const char* map_variant_launch(int op, int kind, int dtype, int block, const void* a, const void* b, void* out,
                               int64_t n, cudaStream_t s) {
  switch (block) {
    case 128: return by_dtype<128>(op, kind, dtype, a, b, out, n, s);
    case 256: return by_dtype<256>(op, kind, dtype, a, b, out, n, s);
  }
  return "map_variant: block must be 128 or 256";
}
"""

CPP = r"""
const char* map_variant_launch(int op, int kind, int dtype, int block, const void* a, const void* b, void* out,
                               int64_t n, cudaStream_t s);
at::Tensor map_variant(const at::Tensor& a, const at::Tensor& b, int64_t op, int64_t block, int64_t kind) {
  TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes() &&
              a.scalar_type() == b.scalar_type(), "map_variant: two contiguous CUDA tensors of one shape and dtype");
  const auto t = a.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kHalf || t == at::kBFloat16, "map_variant: float32, float16 or bfloat16");
  at::Tensor out = at::empty_like(a);
  const int dtype = t == at::kFloat ? 0 : t == at::kHalf ? 1 : 2;
  KWB_CHECK_LAUNCH("map_variant", map_variant_launch((int)op, (int)kind, dtype, (int)block, a.const_data_ptr(), b.const_data_ptr(),
                   out.mutable_data_ptr(), a.numel(), kwb::current_stream(a)));
  return out;
}
"""

# name, op index, the eager expression
OPS = [
    ("vector_add", 0, lambda a, b: a + b),
    ("relu_scale_backward", 1, lambda g, x: torch.where(x <= 0, 0.0, g * 1.5)),
    ("polynomial_activation_backward", 2, lambda g, x: g * (2 * x + 1)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1048576,67108864", help="element counts, comma-separated")
    parser.add_argument("--dtypes", default="bfloat16,float16,float32")
    parser.add_argument("--out", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--in-turns", type=float, default=0.0, metavar="S",
                        help="then every variant, eager and torch.compile again in turns as CUDA-graph replays of "
                             f"{GRAPH_CALLS} calls, about S seconds of samples each")
    parser.add_argument("--copies", default="0", metavar="LIST",
                        help="with --in-turns: the input copies each graph rotates over, comma-separated, a round in "
                             "turns each (0: twice the L2; 1: inputs kept in the L2; 'events': calls back to back)")
    parser.add_argument("--turns-only", action="store_true", help="with --in-turns: skip timing each variant on its own")
    parser.add_argument("--variants", metavar="LIST", help="some variants, comma-separated, kind:block ('block:256,plain:256'); all by default")
    args = parser.parse_args()
    variants = VARIANTS
    if args.variants:
        variants = [(kind, int(block)) for kind, block in (v.replace(":", " ").split() for v in args.variants.split(","))]
        unknown = [f"{kind} {block}" for kind, block in variants if (kind, block) not in VARIANTS]
        if unknown:
            parser.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(f'{k} {b}' for k, b in VARIANTS)}")
    k = wb.load_inline("map_block_variants", cuda=CUDA, cpp=CPP, functions=["map_variant"])
    order = random.Random(0)
    # Each run timed its first row 3-9% below every other (3.10-3.18 us against 3.42-3.59): one
    # untimed-for-the-record row first, then the variants in a new order each case.
    warm = torch.randn(1 << 20, device="cuda")
    wb.bench(lambda x, y: k.map_variant(x, y, 0, 256, 0), lambda x, y: x + y, inputs=[(warm, warm)], baselines="none")
    for n in (int(s) for s in args.sizes.split(",")):
        for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
            g = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn(n, device="cuda", generator=g).to(dtype)
            b = torch.randn(n, device="cuda", generator=g).to(dtype)
            for name, op, eager in OPS:
                for i, (kind, block) in enumerate([] if args.turns_only and args.in_turns else
                                                  order.sample(variants, len(variants))):
                    report = wb.bench(lambda x, y, op=op, block=block, kind=KINDS[kind]: k.map_variant(x, y, op, block, kind),
                                      eager, inputs=[(a, b)], name=name, label=f"{kind} {block}",
                                      baselines="eager,compile" if i == 0 else "none",
                                      bytes_moved=3 * n * a.element_size())
                    for r in report.rows:
                        print(f"{name:32s} {r['dtype']:>9} {n:>9} {r['provider']:>10} {r['method']:>11} "
                              f"{r['median_us'] or 0:9.2f} us  {r['status']}", flush=True)
                    if args.out:
                        report.save(args.out)
                if args.in_turns:
                    turns = {f"{kind} {block}": (lambda x, y, op=op, block=block, kind=KINDS[kind]: k.map_variant(x, y, op, block, kind))
                             for kind, block in variants}
                    turns.update({"eager": eager, "torch.compile": torch.compile(eager, fullgraph=True, dynamic=False)})
                    turns["torch.compile"](a, b)  # compiled here, not in the timed calls' first
                    time_each_way(turns, (a, b), args.in_turns, f"{name} {n} {str(dtype).removeprefix('torch.')}",
                                  args.copies, GRAPH_CALLS, nbytes=3 * n * a.element_size())


if __name__ == "__main__":
    main()
