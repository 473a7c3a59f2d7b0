set -uo pipefail
export PYTHONUNBUFFERED=1 KWB_GIT_DESCRIBE=81bb7f6 KWB_CUDA_ARCH=9.0
python -m pip install --no-deps --no-build-isolation -q -e . 2>&1 | tail -2
python -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())' | tee $OUT/env.txt
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_row_and_matrix_kernels_gpu.py -k "not linear_gelu" 2>&1 | tail -15 | tee $OUT/pytest.txt
for v in 4 8; do KWB_ROW_VECS=$v timeout 90 python -m workbench.cli bench softmax layernorm rmsnorm --sizes 16384x4096 --dtype bf16,float32 --no-backward --baselines none --no-graphs --out $OUT/vecs$v 2>&1 | grep -E "kwb " | tee -a $OUT/vecs.log; done
KWB_ROW_VECS=8 timeout 80 python -m pytest -q -p no:cacheprovider tests/test_row_and_matrix_kernels_gpu.py -k "row_lengths or awkward or infinite or outlier" 2>&1 | tail -4 | tee $OUT/pytest_vecs8.txt
mkdir -p $OUT/bench
timeout 300 python -m workbench.cli bench softmax layernorm rmsnorm --sizes 16384x4096 --dtype bf16,float32 --baselines eager,compile --no-graphs --out $OUT/bench 2>&1 | grep -E "│" | tee $OUT/bench.log
