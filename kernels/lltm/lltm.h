// lltm's launch interface, shared by lltm.cpp and lltm.cu (no torch headers).
//
// The cell (PyTorch's C++-extension tutorial): gates = [old_h, input] W^T + bias, split into
// three [batch, state] blocks; i = sigmoid, o = sigmoid, g = elu of each;
// new_cell = old_cell + i * g; new_h = tanh(new_cell) * o.
// The matrix products run on cuBLAS (through ATen, in lltm.cpp); these kernels do the rest.
#pragma once
#include "kwb_dtype.h"

struct LltmForwardParams {
  const void* gates;     // batch x 3*state: [old_h, input] W^T + bias
  const void* old_cell;  // batch x state
  void* new_h;           // batch x state, written in full
  void* new_cell;        // batch x state, written in full
  int64_t batch, state;
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
const char* lltm_backward_cuda(const LltmBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
