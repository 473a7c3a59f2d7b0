#!/usr/bin/env bash
# Wheels the GPU machine lacks (it has no network): what notebooks/run.py needs to execute the
# notebooks there (nbclient, ipykernel and their dependencies), and CUTLASS's headers
# (nvidia-cutlass, for linear_gelu's sm_90a units; its Python dependencies are not needed for
# headers and would not fit), for its Python 3.12, into
# .nbwheels/ (ignored by git; benchmarks/gpu_run.sh installs them when they are there). Run here,
# where pip reaches PyPI; pass the folder to the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" -d "$tmp" \
  nbclient nbformat ipykernel
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" -d "$tmp" \
  "nvidia-cutlass>=4.2"
# The GPU machine's image has these already (its own versions stay in charge).
rm -f "$tmp"/{packaging,psutil,pygments,attrs,python_dateutil,typing_extensions,tzdata}-*.whl
# ipykernel and IPython import these only when they are there (the debugger, completion); their
# 10 MB took the device tool's 64 MB transfer past its limit beside the repository's 55 MB.
rm -f "$tmp"/{debugpy,jedi}-*.whl
mkdir -p .nbwheels
rm -f .nbwheels/*.whl
mv "$tmp"/*.whl .nbwheels/
ls .nbwheels
