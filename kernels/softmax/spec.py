"""softmax over the last dimension — reference, inputs, tolerances, bytes model, sizes.
A shape is the tensor's shape; softmax runs along its last dimension."""
import torch

from workbench.spec import AWKWARD_SIZES, KernelSpec, OpSpec, Tolerance, element_bytes, numel


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    # Spread 3: exp(x - max) spans ~e^-20..1, where a wrong max or a lost rescale shows.
    return ((torch.randn(shape, generator=generator, dtype=torch.float64) * 3).to(device=device, dtype=dtype),)


def bytes_moved(shape, dtype):  # read x, write y
    return 2 * numel(shape) * element_bytes(dtype)


# Outputs are probabilities of about 1/cols (2.4e-4 at 4096): the absolute bounds sit far below
# that, so a wrong small value cannot hide under atol. Half types: one rounding of the output
# (bf16 2^-8, two units 7.8e-3). fp32: the exp of (x - max), rounded in fp32, and a sum over up
# to 262144 terms: 1e-5 relative.
TOLERANCES = {
    torch.float64: Tolerance(1e-15, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-10, 1e-5, 1e-6),
    torch.float16: Tolerance(1e-7, 2e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-6, 1.6e-2, 8e-3),
}
# grad_x = y * (grad - sum(grad * y)) cancels where grad is close to the row's dot product:
# the error is then relative to y * |grad|, not to grad_x. Half types take y as the forward
# rounded it: bf16 at 17 columns (y ~ 0.06) had grad_x off by 1.4e-3 (0.0016 for 0.0031) on
# the H100, as eager bf16 is; the norm-wise bound stays tight.
GRAD_TOLERANCES = {
    torch.float64: Tolerance(1e-14, 1e-10, 1e-12),
    torch.float32: Tolerance(1e-8, 1e-3, 1e-5),
    torch.float16: Tolerance(5e-4, 8e-3, 2e-3),
    torch.bfloat16: Tolerance(4e-3, 3e-2, 1.6e-2),
}

# The awkward lengths; a row longer than the register path holds (8192 fp32, 16384 bf16; 2048
# when rows are not whole 16-byte vectors): the two-pass path; rows sharing blocks (17, 64).
SHAPES = [(3, n) for n in AWKWARD_SIZES] + [(0, 64), (3, 5, 17), (130, 64), (5, 2049), (3, 4096), (2, 8200), (2, 16400)]
ROW_SWEEP = [1 << k for k in range(8, 19)]  # 256 .. 262144 at 2^26 elements

SPEC = KernelSpec(
    ops=[OpSpec("softmax", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0,),
                tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES)],
    shapes=SHAPES,
    bench_sizes={"cuda": [(4096, 1024), (16384, 4096)], "cpu": [(256, 1024), (1024, 4096)]},
    sweep_sizes={"cuda": [((1 << 26) // n, n) for n in ROW_SWEEP],
                 "cpu": [((1 << 20) // n, n) for n in ROW_SWEEP[:7]]},
)
