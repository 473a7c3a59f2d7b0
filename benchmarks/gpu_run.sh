#!/usr/bin/env bash
# One GPU session's work: install kwb, `kwb run` (build, check, time every kernel; the report
# goes to benchmarks/results/<device>/), then the tests. Everything is also copied under $OUT
# (the device tool's output folder; default ./gpu-out) as one archive, since the report holds
# more files than come back one by one.
#
#   KWB_GIT_DESCRIBE=$(git describe --always --dirty) bash benchmarks/gpu_run.sh [pytest args]
#
# With no pytest args it runs the GPU tests (-m "cuda or nvcc"); pass e.g. `tests` for all.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1

# python -m: the machine's `pip` and `kwb` may belong to another interpreter than the one
# holding torch (seen on the GPU machine: kwb's script ran a python without click).
python -m pip install --no-deps --no-build-isolation -q -e . 2>&1 | tail -2
python -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())' | tee "$out/env.txt"
nvcc --version | tail -2 | tee -a "$out/env.txt"

python -m workbench.cli run --full --out benchmarks/results 2>&1 | tee "$out/kwb_run.log"
echo "kwb run exit: ${PIPESTATUS[0]}" | tee -a "$out/kwb_run.log"
tar -czf "$out/results.tar.gz" benchmarks/results  # now, in case the tests outrun the call
# One OpenMP runtime in the process: the extension's libgomp must be the one torch loads.
lib=$(ls -t "${TORCH_EXTENSIONS_DIR:-$HOME/.cache/torch_extensions}"/*/kwb_relu_scale/*.so 2>/dev/null | head -1)
[ -n "$lib" ] && { echo "$lib"; ldd "$lib" | grep -i omp; ldd "$(python -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')" | grep -i omp; } | tee -a "$out/env.txt"

if [ "$#" -eq 0 ]; then set -- -m "cuda or nvcc"; fi
python -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$out/pytest.txt"
echo "pytest exit: ${PIPESTATUS[0]}" | tee -a "$out/pytest.txt"

tar -czf "$out/results.tar.gz" benchmarks/results
ls -la "$out"
