#!/usr/bin/env bash
# Wheels the GPU machine lacks (it has no network): what notebooks/run.py needs to execute the
# notebooks there (nbclient, ipykernel and their dependencies), for its Python 3.12, into
# .nbwheels/; and CUTLASS's headers (linear_gelu's sm_90a units) from the nvidia-cutlass wheel
# into .cutlass.tar.xz (1 MB; the wheel, 6.4 MB, takes the device tool's 64 MiB transfer past
# its limit beside the repository's 62 MiB). Both are ignored by git; benchmarks/gpu_run.sh
# installs them when they are there. Run here, where pip reaches PyPI; pass what a run needs to
# the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" -d "$tmp" \
  nbclient nbformat ipykernel
# The GPU machine's image has these already (its own versions stay in charge).
rm -f "$tmp"/{packaging,psutil,pygments,attrs,python_dateutil,typing_extensions,tzdata}-*.whl
# ipykernel and IPython import these only when they are there (the debugger, completion); their
# 10 MB took the device tool's 64 MB transfer past its limit beside the repository's 55 MB.
rm -f "$tmp"/{debugpy,jedi}-*.whl
mkdir -p .nbwheels
rm -f .nbwheels/*.whl
mv "$tmp"/*.whl .nbwheels/
ls .nbwheels
python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp/cutlass" "nvidia-cutlass>=4.2"
python3 -m zipfile -e "$tmp"/cutlass/nvidia_cutlass-*.whl "$tmp/cutlass/x"
tar -cJf .cutlass.tar.xz -C "$tmp/cutlass/x/cutlass_library/source" include tools/util/include
ls -la .cutlass.tar.xz
