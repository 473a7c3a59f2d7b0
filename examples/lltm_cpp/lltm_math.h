// The derivatives the LLTM backward takes, on torch::Tensor.
#pragma once
#include <torch/extension.h>

namespace lltm {

// tanh'(z) = 1 - tanh(z)^2
inline torch::Tensor d_tanh(torch::Tensor z) { return 1 - z.tanh().pow(2); }

// sigmoid'(z) = s (1 - s)
inline torch::Tensor d_sigmoid(torch::Tensor z) {
  auto s = torch::sigmoid(z);
  return (1 - s) * s;
}

// elu'(z) = 1 for z > 0, else alpha * exp(z)
inline torch::Tensor d_elu(torch::Tensor z, torch::Scalar alpha = 1.0) {
  auto e = z.exp();
  auto mask = (alpha * (e - 1)) < 0;
  return (z > 0).type_as(z) + mask.type_as(z) * (alpha * e);
}

}  // namespace lltm
