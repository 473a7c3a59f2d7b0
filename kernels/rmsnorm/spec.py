"""rmsnorm: RMSNorm over the last dimension — reference, inputs, tolerances, bytes model,
sizes. A shape is x's shape; weight has its last dimension as its length."""
import torch

from workbench.spec import AWKWARD_SIZES, KernelSpec, OpSpec, Tolerance, element_bytes, numel

EPS = 1e-6


def reference(x, weight):
    """RMSNorm written as people write it in PyTorch (BASELINES.md times this expression)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def make_inputs(shape, dtype, device, generator):
    def draw(s, scale, shift):
        return (torch.randn(s, generator=generator, dtype=torch.float64) * scale + shift).to(device=device, dtype=dtype)
    # x off-center (mean 1, spread 2); weight of order 1, never all ones
    return draw(shape, 2.0, 1.0), draw(shape[-1:], 1.0, 1.0)


def bytes_moved(shape, dtype):  # read x and weight, write y (rstd: 4 bytes a row)
    return (2 * numel(shape) + shape[-1]) * element_bytes(dtype)


# Outputs are of order 1; half types get one output rounding (bf16 2 units = 7.8e-3, with atol
# for values near 0). fp32: the sum of squares of up to 262144 values in fp32. Gradients:
# grad_x subtracts a row mean from grad * w (cancellation), and the weight gradient adds up
# to 16384 rows.
TOLERANCES = {
    torch.float64: Tolerance(1e-12, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-5, 1e-5, 1e-6),
    torch.float16: Tolerance(2e-3, 2e-3, 1e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2, 8e-3),
}
GRAD_TOLERANCES = {
    torch.float64: Tolerance(1e-10, 1e-10, 1e-11),
    torch.float32: Tolerance(1e-4, 1e-3, 1e-5),
    torch.float16: Tolerance(1e-2, 1e-2, 2e-3),
    torch.bfloat16: Tolerance(8e-2, 3e-2, 1.6e-2),
}

# The awkward lengths; rows sharing a block (17, 64); a row longer than the register paths
# hold (forward 8192 fp32 / 16384 bf16, backward half that; 2048 and 1024 when rows are not
# whole 16-byte vectors).
SHAPES = [(3, n) for n in AWKWARD_SIZES] + [(0, 64), (3, 5, 17), (130, 64), (5, 2049), (33, 4096), (2, 8200), (2, 16400)]
ROW_SWEEP = [1 << k for k in range(8, 19)]  # 256 .. 262144 at 2^26 elements

SPEC = KernelSpec(
    ops=[OpSpec("rmsnorm", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0, 1),
                tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES)],
    shapes=SHAPES,
    bench_sizes={"cuda": [(4096, 1024), (16384, 4096)], "cpu": [(256, 1024), (1024, 4096)]},
    sweep_sizes={"cuda": [((1 << 26) // n, n) for n in ROW_SWEEP],
                 "cpu": [((1 << 20) // n, n) for n in ROW_SWEEP[:7]]},
)
