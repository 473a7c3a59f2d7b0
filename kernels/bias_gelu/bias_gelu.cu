// bias_gelu CUDA kernels: y = GELU(x + bias) over the last dimension, and its backward
// (grad_x, and grad_bias = the column sums of grad_x), in the tanh or the exact erf form.
//
// Bytes: forward reads x and writes y (bias is cols elements, noise), where eager PyTorch makes
// two passes (the add, then the GELU); backward reads grad and x and writes grad_x, plus the
// partial column sums (kwb_gelu_backward.cuh, shared with linear_gelu). Predicted and measured:
// kernels/bias_gelu/NOTES.md.
//
// The GELU math (fp32, one exp per element, fast exp and division for half types) is
// kwb_gelu.cuh's, and the forward kernel kwb_bias_gelu.cuh's, both shared with linear_gelu.
#include "bias_gelu.h"
#include "kwb_bias_gelu.cuh"
#include "kwb_gelu.cuh"
#include "kwb_gelu_backward.cuh"

int64_t bias_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::gelu_backward_workspace_rows(rows, cols, dtype, aligned);
}

const char* bias_gelu_cuda(const BiasGeluParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::bias_gelu_forward(p.x, p.bias, p.y, p.rows, p.cols, p.tanh, dtype, aligned, stream);
}

const char* bias_gelu_backward_cuda(const BiasGeluBackwardParams& p, kwb::DType dtype, bool aligned,
                                    cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    using A = kwb::acc_t<T>;
    const auto* g = static_cast<const T*>(p.grad);
    const auto* x = static_cast<const T*>(p.x);
    const auto* b = static_cast<const T*>(p.bias);
    auto* gx = static_cast<T*>(p.grad_x);
    auto* gb = static_cast<T*>(p.grad_bias);
    auto* ws = static_cast<A*>(p.workspace);
    return p.tanh ? kwb::gelu_backward_rows<T, true>(g, x, b, gx, gb, ws, p.rows, p.cols, aligned, stream)
                  : kwb::gelu_backward_rows<T, false>(g, x, b, gx, gb, ws, p.rows, p.cols, aligned, stream);
  });
}
