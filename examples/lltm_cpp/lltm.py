"""The tutorial's Python side: an autograd Function over the extension's forward and backward,
and an nn.Module. `lltm_ext` is what torch.utils.cpp_extension.load (or kwb's) returned."""
import math

import torch


def make_function(lltm_ext):
    class LLTMFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weights, bias, old_h, old_cell):
            outputs = lltm_ext.forward(input, weights, bias, old_h, old_cell)
            new_h, new_cell = outputs[:2]
            ctx.save_for_backward(*outputs[1:], weights)
            return new_h, new_cell

        @staticmethod
        def backward(ctx, grad_h, grad_cell):
            d_old_h, d_input, d_weights, d_bias, d_old_cell = lltm_ext.backward(
                grad_h.contiguous(), grad_cell.contiguous(), *ctx.saved_tensors)
            return d_input, d_weights, d_bias, d_old_h, d_old_cell

    return LLTMFunction


class LLTM(torch.nn.Module):
    def __init__(self, lltm_ext, input_features, state_size):
        super().__init__()
        self.function = make_function(lltm_ext)
        self.input_features = input_features
        self.state_size = state_size
        self.weights = torch.nn.Parameter(torch.empty(3 * state_size, input_features + state_size))
        self.bias = torch.nn.Parameter(torch.empty(3 * state_size))
        stdv = 1.0 / math.sqrt(self.state_size)
        for weight in self.parameters():
            weight.data.uniform_(-stdv, +stdv)

    def forward(self, input, state):
        return self.function.apply(input, self.weights, self.bias, *state)
