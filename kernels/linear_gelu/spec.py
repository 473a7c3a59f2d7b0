"""linear_gelu: y = GELU(x W^T + b) — reference, inputs, tolerances, flops and bytes models,
sizes. A shape is (m, k, n): x is m x k, W is n x k (nn.Linear's layout), y is m x n. Two
entries, one per form of GELU; both call the public function linear_gelu."""
import math

import torch
import torch.nn.functional as F
from workbench.spec import (
    MATMUL_GRAD_TOLERANCES,
    MATMUL_TOLERANCES,
    KernelSpec,
    OpSpec,
    element_bytes,
    randn,
)


def reference(x, weight, bias, approximate):
    return F.gelu(F.linear(x, weight, bias), approximate=approximate)


def addmm_gelu(x, weight, bias, approximate):
    """cuBLASLt's GELU + bias epilogue through PyTorch (tanh form only). CUDA only: on the CPU,
    torch 2.15's _addmm_activation applies the erf form (kernels/linear_gelu/NOTES.md)."""
    return torch._addmm_activation(bias, x, weight.t(), use_gelu=True)


def inputs_for(approximate):
    def make_inputs(shape, dtype, device, generator):
        m, k, n = shape
        # nn.Linear's scale, 1/sqrt(k): products of order 1, where GELU bends
        return (randn((m, k), dtype, device, generator), randn((n, k), dtype, device, generator, scale=1.0 / math.sqrt(max(k, 1))),
                randn((n,), dtype, device, generator, scale=0.5), approximate)
    return make_inputs


def flops(shape, dtype):  # 2 m n k (the GELU's few flops per output are noise)
    m, k, n = shape
    return 2 * m * n * k


def bytes_moved(shape, dtype):  # read x, W, b, write y
    m, k, n = shape
    return (m * k + n * k + n + m * n) * element_bytes(dtype)


# A product rounded once (and the erf form's GELU pass rounds again); grad_W and grad_b sum
# over all m rows (8192 at the large size): the matrix presets of workbench.spec.
TOLERANCES, GRAD_TOLERANCES = MATMUL_TOLERANCES, MATMUL_GRAD_TOLERANCES

# (m, k, n): one of each; the awkward sizes in every position; no rows; k = 0 (y = GELU(b));
# both sides of the fp32 skinny route's 2..32 rows (1, 2, 32, 33; k = 50 and 199 keep it off its
# 16-byte path); the small fp32 shape that was slow.
SHAPES = [(1, 1, 1), (3, 37, 5), (7, 199, 33), (33, 64, 760), (2, 1128, 17), (3, 5, 0), (4, 9, 199), (2, 3, 1128),
          (0, 8, 4), (5, 0, 3), (16, 40, 37), (20, 50, 9), (49, 40, 37), (130, 96, 64), (32, 768, 3072)]

SPEC = KernelSpec(
    ops=[
        OpSpec("linear_gelu_tanh", reference, inputs_for("tanh"), flops=flops, bytes_moved=bytes_moved, grad_inputs=(0, 1, 2),
               calls="linear_gelu", vendor=addmm_gelu, vendor_name="addmm_activation", vendor_device="cuda", tolerances=TOLERANCES,
               grad_tolerances=GRAD_TOLERANCES),
        OpSpec("linear_gelu_erf", reference, inputs_for("none"), flops=flops, bytes_moved=bytes_moved, grad_inputs=(0, 1, 2),
               calls="linear_gelu", tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES),
    ],
    shapes=SHAPES,
    bench_sizes={"cuda": [(32, 768, 3072), (8192, 4096, 16384)], "cpu": [(32, 768, 3072), (256, 1024, 1024)]},
    sweep_sizes={"cuda": [(m, 768, 3072) for m in (1, 8, 32, 64, 128, 512)] + [(2048, 4096, 4096), (8192, 4096, 16384)],
                 "cpu": [(m, 768, 3072) for m in (1, 32, 128)]},
)
