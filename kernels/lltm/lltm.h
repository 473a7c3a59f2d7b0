// lltm's launch interface, shared by lltm.cpp and lltm.cu (no torch headers).
//
// The cell (PyTorch's C++-extension tutorial): gates = [old_h, input] W^T + bias, split into
// three [batch, state] blocks; i = sigmoid, o = sigmoid, g = elu of each;
// new_cell = old_cell + i * g; new_h = tanh(new_cell) * o.
// The matrix products run on cuBLAS (through ATen, in lltm.cpp) and these kernels do the rest,
// except for small steps (lltm_small_step): there a kernel does the forward's product as well,
// and one the backward's weight gradient.
#pragma once
#include "kwb_dtype.h"

struct LltmForwardParams {
  const void* gates;     // batch x 3*state: [old_h, input] W^T + bias
  const void* old_cell;  // batch x state
  void* new_h;           // batch x state, written in full
  void* new_cell;        // batch x state, written in full
  int64_t batch, state;
};

// Small steps take kernels of their own (lltm_forward_small_cuda, lltm_backward_small_cuda): at
// the tutorial's 16 / 32 / 128, cat + addmm + the cell kernel were three launches and 14 us on
// the H100, torch.compile's cat + mm + pointwise 12 us (kernels/lltm/NOTES.md). A batch of at
// most 32 rows (the backward gives each row a lane) and X = [old_h, input] of at most 11264
// elements (int indices; the spec's shapes reach 3052, and nothing larger was measured). The
// backward of such a step is one kernel and one product (grad_X). features < 0 is a backward
// called with an X narrower than the state: the product path handles it.
constexpr int64_t kLltmSmallBatch = 32;
constexpr int64_t kLltmSmallX = 11 * 1024;
inline bool lltm_small_step(int64_t batch, int64_t features, int64_t state) {
  return batch >= 1 && batch <= kLltmSmallBatch && state >= 1 && features >= 0 &&
         batch * (state + features) <= kLltmSmallX;
}

struct LltmSmallForwardParams {
  const void* input;     // batch x features, row-major
  const void* weights;   // 3*state x (state + features), row-major
  const void* bias;      // 3*state
  const void* old_h;     // batch x state, row-major
  const void* old_cell;  // batch x state, row-major
  void* X;               // batch x (state + features), written in full: [old_h, input]
  void* gates;           // batch x 3*state, written in full: X W^T + bias
  void* new_h;           // batch x state, written in full
  void* new_cell;        // batch x state, written in full
  int64_t batch, features, state;
};

struct LltmSmallBackwardParams {
  const void* grad_h;     // dL/dnew_h, batch x state, row-major
  const void* grad_cell;  // dL/dnew_cell, batch x state, row-major
  const void* X;          // the forward's [old_h, input], batch x K (K = state + features), row-major
  const void* gates;      // the forward's gates, batch x 3*state, row-major
  const void* old_cell;   // batch x state, row-major
  void* grad_gates;       // batch x 3*state, written in full (X's gradient is grad_gates W)
  void* grad_old_cell;    // batch x state, written in full
  void* grad_bias;        // 3*state, written in full
  void* grad_weights;     // 3*state x K, written in full: grad_gates^T X
  int64_t batch, features, state;
};

struct LltmBackwardParams {
  const void* grad_h;     // dL/dnew_h, batch x state
  const void* grad_cell;  // dL/dnew_cell, batch x state
  const void* gates;      // the forward's gates (bias included), batch x 3*state
  const void* old_cell;   // batch x state
  void* grad_gates;       // dL/dgates, batch x 3*state, written in full
  void* grad_old_cell;    // batch x state, written in full
  void* grad_bias;        // 3*state, written in full: the column sums of grad_gates
  void* workspace;        // workspace_rows x 3*state, float (double for fp64): partial sums
  int64_t batch, state;
};

int64_t lltm_backward_workspace_rows(int64_t batch, int64_t state, kwb::DType dtype, bool aligned);

// Each returns nullptr on success, else CUDA's error string. aligned: every pointer is 16-byte
// aligned (then a state that fills whole 16-byte vectors uses them).
const char* lltm_forward_cuda(const LltmForwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
// For lltm_small_step's shapes; no alignment needed.
const char* lltm_forward_small_cuda(const LltmSmallForwardParams& p, kwb::DType dtype, cudaStream_t stream);
const char* lltm_backward_cuda(const LltmBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
// For lltm_small_step's shapes: the cell's backward, the bias's and the weights' gradients.
const char* lltm_backward_small_cuda(const LltmSmallBackwardParams& p, kwb::DType dtype, cudaStream_t stream);
