"""layernorm: LayerNorm over the last dimension — reference, inputs, tolerances, bytes model,
sizes. A shape is x's shape; weight and bias have its last dimension as their length."""
import torch
import torch.nn.functional as F

from workbench.spec import AWKWARD_SIZES, KernelSpec, OpSpec, Tolerance, element_bytes, numel

EPS = 1e-5


def reference(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias, EPS)


def make_inputs(shape, dtype, device, generator):
    def draw(s, scale, shift):
        return (torch.randn(s, generator=generator, dtype=torch.float64) * scale + shift).to(device=device, dtype=dtype)
    # x off-center (mean 2, spread 3): a kernel that skips the mean, or computes the variance as
    # E[x^2] - E[x]^2, shows; weight and bias of order 1 and never all ones/zeros.
    return draw(shape, 3.0, 2.0), draw(shape[-1:], 1.0, 1.0), draw(shape[-1:], 1.0, 0.0)


def bytes_moved(shape, dtype):  # read x, weight and bias, write y (mean and rstd: 8 bytes a row)
    return (2 * numel(shape) + 2 * shape[-1]) * element_bytes(dtype)


# Outputs are of order 1 after the affine part; half types get one output rounding (bf16 2
# units = 7.8e-3, with atol for values near 0). fp32: the statistics of up to 262144 values
# in fp32. Gradients: grad_x subtracts two row means from grad * w (cancellation), and the
# parameter gradients add up to 16384 rows.
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
    ops=[OpSpec("layernorm", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0, 1, 2),
                tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES)],
    shapes=SHAPES,
    bench_sizes={"cuda": [(4096, 1024), (16384, 4096)], "cpu": [(256, 1024), (1024, 4096)]},
    sweep_sizes={"cuda": [((1 << 26) // n, n) for n in ROW_SWEEP],
                 "cpu": [((1 << 20) // n, n) for n in ROW_SWEEP[:7]]},
)
