"""lltm: the LLTM cell of PyTorch's C++-extension tutorial — reference, inputs, tolerances,
flops model, sizes. A shape is (batch, features, state)."""
import math

import torch
import torch.nn.functional as F
from workbench.spec import (
    DEFAULT_TOLERANCES,
    MATMUL_GRAD_TOLERANCES,
    MATMUL_TOLERANCES,
    KernelSpec,
    OpSpec,
    randn,
)


def reference(input, weights, bias, old_h, old_cell):
    """The tutorial's Python cell, as written there."""
    X = torch.cat([old_h, input], dim=1)
    gate_weights = F.linear(X, weights, bias)
    gates = gate_weights.chunk(3, dim=1)
    input_gate = torch.sigmoid(gates[0])
    output_gate = torch.sigmoid(gates[1])
    candidate_cell = F.elu(gates[2])
    new_cell = old_cell + candidate_cell * input_gate
    new_h = torch.tanh(new_cell) * output_gate
    return new_h, new_cell


def make_inputs(shape, dtype, device, generator):
    batch, features, state = shape
    # The tutorial's initialization scale, 1/sqrt(state): gates of order 1, where the
    # sigmoids, the elu and the tanh are all away from saturation.
    stdv = 1.0 / math.sqrt(max(state, 1))
    return (randn((batch, features), dtype, device, generator),
            randn((3 * state, state + features), dtype, device, generator, scale=stdv),
            randn((3 * state,), dtype, device, generator, scale=stdv),
            randn((batch, state), dtype, device, generator),
            randn((batch, state), dtype, device, generator))


def flops(shape, dtype):  # the gate product: 2 * batch * (state + features) * 3 state
    batch, features, state = shape
    return 2 * batch * (state + features) * 3 * state


# (batch, features, state): the awkward states 0, 1, 37, 199, 760, 1128; an empty batch; no
# features; the tutorial's 16 / 32 / 128; states that fill 16-byte vectors. On the GPU, batches of
# 1-32 take the small-batch kernels (a forward warp sums 4 rows, a backward warp 32 columns of X:
# 17 and 32 end a group part-way and on the edge) and 33 the product-then-cell path.
SHAPES = [(2, 3, 0), (1, 1, 1), (3, 5, 37), (2, 7, 199), (4, 3, 760), (2, 9, 1128), (0, 3, 5), (7, 0, 5),
          (16, 32, 128), (17, 6, 45), (32, 17, 33), (33, 20, 64)]

SPEC = KernelSpec(
    # the weight gradient's error grows with the batch it sums over (kernels/lltm/NOTES.md)
    ops=[OpSpec("lltm", reference, make_inputs, flops=flops, grad_inputs=(0, 1, 2, 3, 4),
                tolerances=MATMUL_TOLERANCES,
                grad_tolerances={**MATMUL_GRAD_TOLERANCES, torch.float64: DEFAULT_TOLERANCES[torch.float64]})],
    shapes=SHAPES,
    bench_sizes={"cuda": [(16, 32, 128), (4096, 1024, 1024)], "cpu": [(16, 32, 128), (256, 256, 256)]},
    sweep_sizes={"cuda": [(16, 32, 128), (256, 256, 256), (1024, 512, 512), (4096, 1024, 1024)],
                 "cpu": [(16, 32, 128), (64, 128, 128), (256, 256, 256)]},
)
