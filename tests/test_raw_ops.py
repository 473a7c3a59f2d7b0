"""wb.raw_op on the CPU: a launch function turned into a torch op (custom_op) with a fake, a CPU
implementation and a backward, under autograd, torch.compile(fullgraph=True), opcheck and
wb.check; redefinition in one process (a re-run cell) keeps the op and swaps the functions.
The CUDA path (a raw kernel launched inside the op) is in test_raw_kernels_gpu.py."""
from __future__ import annotations

import pytest
import torch

import workbench as wb


def _relu_scale_cpu(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.clamp_min(x, 0) * alpha


def _setup(ctx, inputs, output):
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.alpha = alpha


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * (x > 0) * ctx.alpha, None


def _define(name: str, cpu=_relu_scale_cpu, **kwargs):
    def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
        raise AssertionError("the CUDA launch function ran for CPU tensors")

    return wb.raw_op(relu_scale, name=name, fake=lambda x, alpha: torch.empty_like(x), cpu=cpu, **kwargs)


def test_an_op_runs_under_autograd_compile_and_opcheck():
    op = _define("kwb_raw_test::relu_scale_a", backward=_backward, setup_context=_setup)
    x = torch.randn(37, 5, dtype=torch.float64, requires_grad=True)
    y = op(x, 1.5)
    assert torch.equal(y, torch.clamp_min(x, 0) * 1.5)
    y.sum().backward()
    assert torch.equal(x.grad, (x > 0) * 1.5)
    compiled = torch.compile(lambda t: op(t, 2.0) + 1, fullgraph=True)
    assert torch.equal(compiled(x.detach()), torch.clamp_min(x.detach(), 0) * 2.0 + 1)
    torch.library.opcheck(op, (torch.randn(199, dtype=torch.float32, requires_grad=True), 0.5))
    assert torch.ops.kwb_raw_test.relu_scale_a(x.detach(), 1.0).shape == (37, 5)


def test_wb_check_takes_the_op_like_any_function():
    op = _define("kwb_raw_test::relu_scale_b")
    report = wb.check(op, lambda x, alpha: torch.relu(x) * alpha, inputs=lambda shape, dtype, device, gen: (
        torch.randn(shape, dtype=dtype, device=device, generator=gen), 1.5), device="cpu", shapes=[(1,), (1128,)],
        dtypes=["float32", "float64"])
    assert report.passed, report


def test_defining_it_again_swaps_the_functions_behind_the_same_op():
    first = _define("kwb_raw_test::relu_scale_c")
    x = torch.randn(11)
    assert torch.equal(first(x, 2.0), torch.clamp_min(x, 0) * 2.0)
    second = _define("kwb_raw_test::relu_scale_c", cpu=lambda x, alpha: x * alpha)  # the edited cell
    assert second is first
    assert torch.equal(first(x, 2.0), x * 2.0)
    assert torch.equal(torch.ops.kwb_raw_test.relu_scale_c(x, 2.0), x * 2.0)


def test_a_changed_signature_gets_a_new_name_with_a_notice(capfd):
    old = _define("kwb_raw_test::relu_scale_d")

    def relu_scale(x: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
        raise AssertionError("not on the CPU")

    new = wb.raw_op(relu_scale, name="kwb_raw_test::relu_scale_d", fake=lambda x, a, b: torch.empty_like(x),
                    cpu=lambda x, a, b: x * a + b)
    assert new is not old and "relu_scale_d_v2" in str(new._qualname)
    assert "signature changed" in capfd.readouterr().err
    assert torch.equal(new(torch.ones(2), 2.0, 1.0), torch.full((2,), 3.0))


@pytest.mark.parametrize("kwargs, message", [
    ({"fake": None}, "fake= is required"),
    ({"name": "no_namespace"}, "name must be 'namespace::op'"),
    ({"setup_context": _setup}, "setup_context= goes with backward="),
])
def test_bad_definitions_are_named(kwargs, message):
    def op(x: torch.Tensor) -> torch.Tensor:
        return x

    args = {"name": "kwb_raw_test::refused", "fake": lambda x: torch.empty_like(x)} | kwargs
    with pytest.raises(ValueError, match=message):
        wb.raw_op(op, **args)


def test_without_a_cpu_implementation_a_cpu_tensor_is_refused_by_torch():
    def only_cuda(x: torch.Tensor) -> torch.Tensor:
        raise AssertionError("ran")

    op = wb.raw_op(only_cuda, name="kwb_raw_test::only_cuda", fake=lambda x: torch.empty_like(x))
    with pytest.raises(NotImplementedError, match="only_cuda"):
        op(torch.ones(2))


def test_a_redefinition_without_a_cpu_implementation_or_backward_stops_the_old_ones():
    first = _define("kwb_raw_test::relu_scale_e", backward=_backward, setup_context=_setup)
    x = torch.randn(5, requires_grad=True)
    first(x, 1.0).sum().backward()

    def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
        raise AssertionError("the CUDA launch function ran for CPU tensors")

    again = wb.raw_op(relu_scale, name="kwb_raw_test::relu_scale_e", fake=lambda x, alpha: torch.empty_like(x))
    assert again is first
    with pytest.raises(NotImplementedError, match="has no CPU implementation in its latest definition"):
        again(torch.randn(3), 1.0)
    with_cpu = _define("kwb_raw_test::relu_scale_e")  # a CPU implementation again, still no backward
    y = with_cpu(torch.randn(3, requires_grad=True), 1.0)
    with pytest.raises(NotImplementedError, match="has no backward in its latest definition"):
        y.sum().backward()
