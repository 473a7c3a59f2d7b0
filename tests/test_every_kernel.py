"""Every shipped kernel, found by wb.list_kernels() (a new kernel folder is tested here with no
edit of this file): checked against its spec on every dtype and shape the spec lists, and every
dispatcher op that its public functions call, forward and backward, run through
torch.library.opcheck with the arguments those calls passed on the spec's own inputs.
The CPU here; the GPU under the `cuda` marker."""
from __future__ import annotations

import functools
import re
import types

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from workbench.spec import numel

import workbench as wb
from workbench.jit import kernel as kernel_module

KERNELS = wb.list_kernels()


@functools.cache
def _kernel(name: str, device: str):
    return wb.load(name, device=device)


def test_the_kernels_are_found_from_their_folders():
    assert {"relu_scale", "vector_add", "softmax", "layernorm", "rmsnorm", "linear_gelu", "lltm"} <= set(KERNELS)
    assert all((wb.kernels_dir() / name / "spec.py").is_file() for name in KERNELS)


def _check(name: str, device: str) -> None:
    k = _kernel(name, device)
    report = wb.check(k, device=device, seed=0)
    assert report.passed, str(report)
    spec = k.spec.SPEC
    ops = {c.op for c in report.cases}
    assert ops == {o.name for o in spec.ops}
    assert {c.dtype for c in report.cases} == set(spec.dtypes[device])


@pytest.mark.parametrize("name", KERNELS)
def test_matches_its_spec_on_the_cpu(name):
    _check(name, "cpu")


@pytest.mark.cuda
@pytest.mark.parametrize("name", KERNELS)
def test_matches_its_spec_on_the_gpu(name):
    _check(name, "cuda")


class _RecordOps(TorchDispatchMode):
    """Each call of one build's ops that reaches a kernel (below autograd), with its arguments."""

    def __init__(self, namespace: str):
        super().__init__()
        self.namespace = namespace
        self.calls: dict[tuple, tuple] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == self.namespace:
            # one opcheck per op and per non-tensor argument (bias_gelu's two forms of GELU)
            key = (func.name(), tuple(repr(a) for a in args if not isinstance(a, torch.Tensor)))
            saved = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
            self.calls.setdefault(key, (func, saved, dict(kwargs)))
        return func(*args, **kwargs)


def _small_shape(spec) -> tuple:
    """The smallest of the spec's shapes with at least 30 elements: small enough for opcheck's
    compiles, large enough for every dimension to be more than one."""
    return min((s for s in spec.shapes if numel(s) >= 30), key=numel)


def _recorded_calls(k, device: str, dtype: torch.dtype) -> list[tuple]:
    spec = k.spec.SPEC
    shape = _small_shape(spec)
    record = _RecordOps(k.namespace)
    for op in spec.ops:
        fn = getattr(k, op.kernel_op)
        args = op.make_inputs(shape, dtype, device, torch.Generator().manual_seed(0))
        with record:
            with torch.no_grad():
                fn(*args)
            if op.grad_inputs:
                leaves = [a.detach().requires_grad_(i in op.grad_inputs) if isinstance(a, torch.Tensor) else a
                          for i, a in enumerate(args)]
                outs = fn(*leaves)
                outs = outs if isinstance(outs, (tuple, list)) else (outs,)
                diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
                torch.autograd.backward(diff, [torch.randn_like(o) for o in diff])
    return list(record.calls.values())


def _opcheck(name: str, device: str, dtype: torch.dtype) -> None:
    k = _kernel(name, device)
    calls = _recorded_calls(k, device, dtype)
    assert calls, f"{name}: no op of {k.namespace} ran"
    for func, args, kwargs in calls:
        # autograd is registered on the forward ops: opcheck tests it with inputs that need grad
        differentiable = kernel_module.differentiable(func.name())
        args = tuple(a.clone().requires_grad_(differentiable and a.is_floating_point()) if isinstance(a, torch.Tensor) else a
                     for a in args)
        torch.library.opcheck(func, args, kwargs)


@pytest.mark.parametrize("name", KERNELS)
def test_opcheck_every_op_its_functions_call_on_the_cpu(name):
    _opcheck(name, "cpu", torch.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", KERNELS)
def test_opcheck_every_op_its_functions_call_on_the_gpu(name, dtype):
    _opcheck(name, "cuda", dtype)


def test_the_recorder_sees_a_kernels_ops_forward_and_backward():
    # the check of the check: relu_scale's forward and, through autograd, its backward op
    k = _kernel("relu_scale", "cpu")
    ran = {func.name().split("::")[1] for func, _, _ in _recorded_calls(k, "cpu", torch.float32)}
    assert ran == {"relu_scale", "relu_scale_backward"}


@pytest.mark.parametrize("name", KERNELS)
def test_each_public_function_is_typed_and_documented(name):
    k = _kernel(name, "cpu")
    assert k._functions, f"{name}: ops.py's register() returns no public functions"
    for fn_name, fn in k._functions.items():
        assert fn.__doc__ and fn.__doc__.strip(), f"{name}.{fn_name} has no docstring"
        if isinstance(fn, types.BuiltinFunctionType):  # a C++ entry: its typed signature opens its docstring
            first_line = fn.__doc__.splitlines()[0]
            assert re.fullmatch(rf"{fn_name}\(\w+: \w+(, \w+: \w+)*\) -> \w+", first_line), f"{name}.{fn_name}: {first_line!r}"
            continue
        hints = fn.__annotations__
        assert "return" in hints and len(hints) > 1, f"{name}.{fn_name} is not typed: {hints}"
    # every dispatcher op has a public function of its name
    assert set(k.ops) <= set(k._functions)
