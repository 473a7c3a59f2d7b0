"""bias_gelu's fp32 backward against float64 and eager PyTorch: shared by the CPU and GPU tests
(a module of its own, so that importing it loads no extension)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def fp32_gelu_grads_against_float64(bg, rows, cols, approximate, device):
    """bias_gelu's fp32 backward at `rows` rows against float64: (kwb's largest grad_x error,
    eager fp32's, kwb's grad_bias error beyond the spec's fp32 bound 1e-4 + 1e-5 |ref|)."""
    gen = torch.Generator(device=device).manual_seed(3)
    x = torch.randn(rows, cols, device=device, generator=gen)
    b = torch.randn(cols, device=device, generator=gen)
    g = torch.randn(rows, cols, device=device, generator=gen)
    grad_x, grad_b = bg.bias_gelu_backward(g, x, b, approximate)
    v = (x.double() + b.double()).requires_grad_()
    (ref_x,) = torch.autograd.grad(F.gelu(v, approximate=approximate), v, g.double())
    ve = (x + b).requires_grad_()
    (eager_x,) = torch.autograd.grad(F.gelu(ve, approximate=approximate), ve, g)
    ref_b = ref_x.sum(0)
    beyond = ((grad_b.double() - ref_b).abs() - (1e-4 + 1e-5 * ref_b.abs())).max().item()
    return (grad_x.double() - ref_x).abs().max().item(), (eager_x.double() - ref_x).abs().max().item(), beyond
