"""Guards every loaded kwb kernel gets from the loader: a derivative kwb does not provide is an
error naming the op (not a silent zero), and tensors on different devices are refused by name
before any implementation runs (a CPU tensor beside a meta one reached the fake kernel, which
returned uninitialised memory)."""
from __future__ import annotations

import pytest
import torch

import workbench as wb
from workbench.jit import kernel as kernel_module


@pytest.fixture(scope="module")
def kernels():
    return {name: wb.load(name, device="cpu") for name in ("polynomial_activation", "softmax", "bias_gelu", "layernorm",
                                                          "rmsnorm", "linear_gelu", "vector_add", "relu_scale", "lltm")}


def _gradient_penalty(loss_of, *inputs):
    """d/dx of |d loss / d x|^2, the double backward of a gradient penalty."""
    loss = loss_of(*inputs)
    grads = torch.autograd.grad(loss, inputs, create_graph=True)
    return torch.autograd.grad(sum((g * g).sum() for g in grads), inputs)


@pytest.mark.parametrize("name, call", [
    ("polynomial_activation", lambda k, x, w, b: k.polynomial_activation(x).sum()),
    ("softmax", lambda k, x, w, b: (k.softmax(x) * torch.arange(x.shape[-1], dtype=x.dtype)).sum()),
    ("bias_gelu", lambda k, x, w, b: k.bias_gelu(x, b).sum()),
    ("layernorm", lambda k, x, w, b: (k.layernorm(x, w, b) ** 2).sum()),
    ("rmsnorm", lambda k, x, w, b: (k.rmsnorm(x, w) ** 2).sum()),
    ("linear_gelu", lambda k, x, w, b: k.linear_gelu(x, torch.ones(3, x.shape[-1], dtype=x.dtype), b[:3]).sum()),
])
def test_a_second_derivative_through_a_backward_op_is_an_error_naming_it(kernels, name, call):
    k = kernels[name]
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    w, b = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"_backward is not differentiable: kwb gives no derivative"):
        _gradient_penalty(lambda x: call(k, x, w, b), x)
    # first derivatives, with and without create_graph, are unchanged
    (g,) = torch.autograd.grad(call(k, x, w, b), (x,))
    (g2,) = torch.autograd.grad(call(k, x, w, b), (x,), create_graph=True)
    torch.testing.assert_close(g, g2.detach())


def test_ops_with_a_derivative_keep_theirs_and_the_others_are_listed(kernels):
    ns = kernels["relu_scale"].namespace
    assert kernel_module.differentiable(f"{ns}::relu_scale")
    assert not kernel_module.differentiable(f"{ns}::relu_scale_backward")


@pytest.mark.parametrize("call", [
    lambda ks, cpu, meta: ks["vector_add"].vector_add(cpu, meta),
    lambda ks, cpu, meta: ks["vector_add"].op("vector_add")(meta, cpu),
    lambda ks, cpu, meta: ks["bias_gelu"].bias_gelu(cpu.reshape(2, 4), meta[:4]),
    lambda ks, cpu, meta: ks["layernorm"].layernorm(cpu.reshape(2, 4), meta[:4], cpu[:4]),
    lambda ks, cpu, meta: ks["lltm"].lltm(cpu.reshape(2, 4), torch.ones(6, 6), torch.ones(6), meta.reshape(4, 2)[:2], cpu.reshape(4, 2)[:2]),
    lambda ks, cpu, meta: ks["relu_scale"].relu_scale_backward(cpu, meta, 1.0),
])
def test_a_cpu_tensor_beside_a_meta_one_is_refused_by_name(kernels, call):
    cpu, meta = torch.ones(8), torch.ones(8, device="meta")
    with pytest.raises(RuntimeError, match=r"every tensor argument must be on one device, got .*(cpu.*meta|meta.*cpu)"):
        call(kernels, cpu, meta)


def test_a_non_tensor_where_a_tensor_goes_is_a_type_error_naming_it(kernels):
    x, b = torch.randn(2, 4), torch.randn(3)
    with pytest.raises(TypeError, match="linear_gelu: weight must be a Tensor, got bool"):
        kernels["linear_gelu"].linear_gelu(x, True, b)


def test_all_meta_tensors_still_give_shapes(kernels):
    meta = torch.ones(2, 8, device="meta")
    out = kernels["bias_gelu"].bias_gelu(meta, torch.ones(8, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 8)


def test_ops_skip_autograds_python_kernel_only_where_no_input_needs_a_gradient(kernels):
    """ops.py's ops go past register_autograd's Python kernel when nothing needs a gradient (its
    fixed cost on every small call), and through it otherwise: results and gradients as before."""
    k = kernels["rmsnorm"]
    ops = __import__("sys").modules[k.rmsnorm.__module__]._ops
    assert isinstance(ops.rmsnorm_forward, kernel_module._BelowAutogradWhenNoGrad)
    x, w = torch.randn(5, 33, dtype=torch.float64), torch.randn(33, dtype=torch.float64)
    ref = torch.nn.functional.rms_norm(x, (33,), w, 1e-6)
    plain = k.rmsnorm(x, w)
    assert plain.grad_fn is None and not plain.requires_grad
    torch.testing.assert_close(plain, ref)
    xg = x.clone().requires_grad_()
    y = k.rmsnorm(xg, w)
    assert y.grad_fn is not None
    y.sum().backward()
    xr = x.clone().requires_grad_()
    torch.nn.functional.rms_norm(xr, (33,), w, 1e-6).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad)
    with torch.no_grad():
        assert not k.rmsnorm(xg, w).requires_grad
    with torch.inference_mode():
        torch.testing.assert_close(k.rmsnorm(x, w), ref)
    # a list of tensors counts too, and kwargs
    assert kernel_module._needs_grad(([x, xg],), {}) and kernel_module._needs_grad((), {"t": xg})
    assert not kernel_module._needs_grad((x, 1.5, [x]), {"t": x})


def test_only_ops_that_write_and_alias_nothing_skip_autograd():
    assert kernel_module._pure(torch.ops.aten.sigmoid) is False  # overloads besides default (out)
    assert kernel_module._pure(torch.ops.aten.relu_) is False  # writes its argument
    assert kernel_module._pure(torch.ops.aten.alias) is False  # returns a view
