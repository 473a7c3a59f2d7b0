"""relu_scale and vector_add on the CPU: what their specs cannot say (the kink at 0, NaN,
non-contiguous inputs, gradcheck, torch.compile across two kernels) and clear errors on bad
input. The harness check and opcheck of every kernel are in test_every_kernel.py."""
from __future__ import annotations

import inspect
import types

import pytest
import torch
import torch.fx
from torch.overrides import TorchFunctionMode

import workbench as wb

KERNELS = {name: wb.load(name, device="cpu") for name in ("relu_scale", "vector_add")}


def test_the_spec_reference_agrees_with_the_kernel_at_the_kink():
    # x == 0 exactly: the kernel's gradient is 0 (torch.relu's); a reference with another
    # subgradient there (clamp_min's 1) would fail here, as it did on fp16 inputs on the GPU.
    k = KERNELS["relu_scale"]
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.0], dtype=torch.float64)
    report = wb.check(k.relu_scale, k.spec.reference, inputs=[(x, 1.5)], grad_inputs=(0,), seed=0)
    assert report.passed, str(report)
    args = k.spec.SPEC.op("relu_scale").make_inputs((2000,), torch.float32, "cpu", torch.Generator().manual_seed(0))
    assert (args[0] == 0).sum() == 2  # the spec's inputs hold exact zeros, at 7 and 1016


def test_relu_scale_nan_propagates_and_zero_has_zero_gradient():
    k = KERNELS["relu_scale"]
    x = torch.tensor([float("nan"), -1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = k.relu_scale(x, 3.0)
    assert torch.isnan(y[0]) and y[1:].tolist() == [0.0, 0.0, 6.0]
    y[1:].sum().backward()
    assert x.grad[1:].tolist() == [0.0, 0.0, 3.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_relu_scale_with_a_nan_alpha_is_nan_everywhere_as_eager(dtype):
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan")] * 9, dtype=dtype)  # past one vector's width
    y = KERNELS["relu_scale"].relu_scale(x, float("nan"))
    torch.testing.assert_close(y, torch.relu(x) * float("nan"), equal_nan=True)
    assert torch.isnan(y).all()


@pytest.mark.parametrize("kernel", ["relu_scale", "vector_add"])
def test_non_contiguous_input_is_handled(kernel):
    k = KERNELS[kernel]
    base = torch.randn(64, 37, dtype=torch.float64)
    x = base.t()  # transposed: not contiguous
    assert not x.is_contiguous()
    if kernel == "relu_scale":
        torch.testing.assert_close(k.relu_scale(x, 2.0), x.clamp_min(0) * 2.0)
    else:
        y = torch.randn(64, 37, dtype=torch.float64)[:, ::1].t()
        torch.testing.assert_close(k.vector_add(x, y), x + y)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1023, 65536 + 13])
def test_the_training_ops_save_a_bit_per_element_and_their_backward_matches(n):
    """relu_scale_train saves one bit per element (not x <= 0, so set for NaN) for the backward
    instead of x (the GPU path from MASK_FROM elements), and relu_scale_masked_backward turns it
    back into eager's gradient, NaN x included, at every length's tail."""
    k = KERNELS["relu_scale"]
    x = torch.randn(n, dtype=torch.float64)
    x[::5] = 0.0
    x[1::7] = float("nan")
    g = torch.randn(n, dtype=torch.float64)
    y, mask = k.relu_scale_train(x, 1.5)
    torch.testing.assert_close(y, torch.relu(x) * 1.5, equal_nan=True)
    assert mask.dtype == torch.uint8 and mask.shape == ((n + 7) // 8,)
    bits = ((mask.repeat_interleave(8) >> torch.arange(8, dtype=torch.uint8).repeat(mask.numel())) & 1)[:n]
    assert torch.equal(bits.bool(), ~(x <= 0))
    ref_leaf = x.clone().requires_grad_()
    (torch.relu(ref_leaf) * 1.5).backward(g)
    grad = k.relu_scale_masked_backward(g, mask, 1.5)
    torch.testing.assert_close(grad, ref_leaf.grad, rtol=0, atol=0)  # grad * 1.5 where x is NaN, as eager


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1023, 65536 + 13])
def test_on_the_cpu_the_training_step_keeps_x_not_the_mask(n, monkeypatch):
    """On the CPU the bit mask's scalar packing costs more than it saves (kernels/relu_scale/ops.py):
    relu_scale under autograd keeps x whatever the length, and its outputs and gradient are
    eager's (0 at x == 0, NaN passed through)."""
    k = KERNELS["relu_scale"]
    monkeypatch.setitem(k.relu_scale.__globals__, "MASK_FROM", 0)
    x = torch.randn(n, dtype=torch.float64)
    x[::5] = 0.0
    x[1::7] = float("nan")
    g = torch.randn(n, dtype=torch.float64)
    leaf = x.clone().requires_grad_()
    y = k.relu_scale(leaf, 1.5)
    assert y.grad_fn.name().endswith("_relu_scale_defaultBackward"), y.grad_fn.name()
    y.backward(g)
    ref_leaf = x.clone().requires_grad_()
    (torch.relu(ref_leaf) * 1.5).backward(g)
    torch.testing.assert_close(y.detach(), torch.relu(x) * 1.5, equal_nan=True)
    torch.testing.assert_close(leaf.grad, ref_leaf.grad, rtol=0, atol=0)
    assert (leaf.grad[1::7] != 0).all()  # where x is NaN: grad * 1.5, not 0


def test_the_masked_backward_refuses_a_mask_of_another_length():
    k = KERNELS["relu_scale"]
    _, mask = k.relu_scale_train(torch.randn(17), 2.0)
    with pytest.raises(RuntimeError, match=r"relu_scale_masked_backward: mask must be relu_scale_train's second "
                                           r"output for grad's 9 elements: uint8, 1-D, 2 bytes; got Byte of shape \[3\]"):
        k.relu_scale_masked_backward(torch.randn(9), mask, 2.0)
    with pytest.raises(RuntimeError, match="mask must be"):
        k.relu_scale_masked_backward(torch.randn(17), mask.float(), 2.0)


def test_the_training_ops_pass_opcheck():
    k = KERNELS["relu_scale"]
    x = torch.randn(37, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(k.op("relu_scale_train").default, (x, 1.5))
    _, mask = k.relu_scale_train(x.detach(), 1.5)
    torch.library.opcheck(k.op("relu_scale_masked_backward").default, (torch.randn(37, dtype=torch.float64), mask, 1.5))


def test_gradcheck_fp64():
    k = KERNELS["relu_scale"]
    x = torch.randn(53, dtype=torch.float64)
    x = (x + 0.1 * x.sign()).requires_grad_()  # keep away from the kink at 0
    assert torch.autograd.gradcheck(lambda t: k.relu_scale(t, 1.5), (x,))
    a = torch.randn(41, dtype=torch.float64, requires_grad=True)
    b = torch.randn(41, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(KERNELS["vector_add"].vector_add, (a, b))


def test_vector_add_is_called_through_its_cpp_entry_and_differentiated_in_cpp():
    """The public function skips torch.ops' Python layers (vector_add_python.cpp's entry), and
    the gradient comes from the C++ autograd kernel, the same whether the op is called through
    the entry or torch.ops; a second derivative goes through it too."""
    k = KERNELS["vector_add"]
    assert k.module is not None and callable(k.module.vector_add)
    a = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, 3, dtype=torch.float64)
    for call in (k.vector_add, k.module.vector_add, k.op("vector_add")):
        out = call(a, b)
        assert "VectorAdd" in out.grad_fn.name()
        torch.testing.assert_close(out, a + b)
    (grad,) = torch.autograd.grad(k.vector_add(a, a).sum(), a, create_graph=True)
    torch.testing.assert_close(grad, torch.full_like(a, 2.0))
    assert torch.autograd.gradgradcheck(k.vector_add, (a, b.requires_grad_()))
    with torch.no_grad():
        assert k.vector_add(a, b).grad_fn is None
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():  # no jvp: a tangent is refused, never dropped, no_grad or not
        dual = fwAD.make_dual(a.detach(), torch.ones_like(a))
        with pytest.raises(RuntimeError, match="jvp is not implemented"):
            k.vector_add(dual, b.detach())
        with torch.no_grad(), pytest.raises(RuntimeError, match="jvp is not implemented"):
            k.vector_add(b.detach(), dual)


def test_vector_adds_cpp_entry_leaves_overrides_keywords_and_bad_calls_to_torch_ops():
    """The public function is a builtin (no Python frame): two plain tensors go straight to the
    dispatcher; a __torch_function__ subclass, a torch function mode, an fx trace and keywords
    still see or make the op's call, and a bad call names the argument, as torch.ops does."""
    k = KERNELS["vector_add"]
    a, b = torch.randn(6), torch.randn(6)
    assert isinstance(k.vector_add, types.BuiltinFunctionType)
    assert list(inspect.signature(k.vector_add).parameters) == ["a", "b"]  # the harness names gradients by it
    torch.testing.assert_close(k.vector_add(a=a, b=b), a + b)

    seen = []

    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types_, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types_, args, kwargs or {})

    out = k.vector_add(a.as_subclass(Logged), b)
    assert type(out) is Logged and seen[0] is k.op("vector_add")
    torch.testing.assert_close(out.as_subclass(torch.Tensor), a + b)

    class Mode(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types_, args=(), kwargs=None):
            self.calls.append(func)
            return func(*args, **(kwargs or {}))

    with Mode() as mode:
        k.vector_add(a, b)
    assert mode.calls == [k.op("vector_add")]
    traced = torch.fx.symbolic_trace(lambda x, y: k.vector_add(x, y) * 2)
    assert k.op("vector_add") in [node.target for node in traced.graph.nodes]
    torch.testing.assert_close(traced(a, b), (a + b) * 2)
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'b'"):
        k.vector_add(a, "b")
    with pytest.raises(RuntimeError, match="missing value for argument 'b'"):
        k.vector_add(a)


def test_torch_compile_fullgraph():
    rs, va = KERNELS["relu_scale"], KERNELS["vector_add"]

    def f(a, b):
        return rs.relu_scale(va.vector_add(a, b), 0.5) * 2

    a, b = torch.randn(199), torch.randn(199)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), (a + b).clamp_min(0))
    a.requires_grad_()  # the training forward, with its mask, under the compiler too
    compiled(a, b).sum().backward()
    torch.testing.assert_close(a.grad, ((a + b) > 0).float())


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda k: k.vector_add(torch.randn(3), torch.randn(4)), RuntimeError, "vector_add: b must have the same shape as a"),
        (lambda k: k.vector_add(torch.randn(3), torch.randn(3, dtype=torch.float64)), TypeError, "vector_add: b must have the same dtype as a"),
        (lambda k: k.vector_add(torch.randn(3).half(), torch.randn(3).half()), TypeError, "vector_add: a has dtype Half; the CPU implementation supports Float, Double"),
        (lambda k: k.vector_add(torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)), TypeError, "a has dtype Long"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call(KERNELS["vector_add"])


def test_relu_scale_rejects_half_on_cpu():
    with pytest.raises(TypeError, match="relu_scale: x has dtype Half; the CPU implementation supports"):
        KERNELS["relu_scale"].relu_scale(torch.randn(4).half(), 1.0)


def test_unknown_op_names_the_ops_there_are():
    with pytest.raises(AttributeError, match="has no op or function 'relu'; it has: relu_scale, relu_scale_backward"):
        _ = KERNELS["relu_scale"].relu


def test_vector_adds_ops_py_registers_again_in_the_same_process():
    """register(ops) run a second time for the same build (its ops.py imported again) returns the
    same entry, and torch.compile still traces it as the op, with no duplicate-rule error."""
    from workbench.jit.kernel import OpNamespace

    k = KERNELS["vector_add"]
    again = k._ops_module.register(OpNamespace(k.namespace, k.module))
    assert again == {"vector_add": k.vector_add}
    a = torch.randn(37)
    torch.testing.assert_close(torch.compile(lambda x, y: again["vector_add"](x, y) * 2, fullgraph=True)(a, a), 4 * a)


def test_a_kernels_functions_and_ops_are_looked_up_once():
    """k.<name> resolves through Kernel.__getattr__ the first time only: it lists every dispatcher
    op (3600 on torch 2.14: 1.7 ms) where the name is an op, and each call of `k.op(...)` paid it."""
    k = KERNELS["vector_add"]
    k.__dict__.pop("vector_add", None)
    first = k.vector_add
    assert k.__dict__["vector_add"] is first and k.vector_add is first
    with pytest.raises(AttributeError, match="has no op or function 'nope'"):
        _ = k.nope
    assert "nope" not in k.__dict__
