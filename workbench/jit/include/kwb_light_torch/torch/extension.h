// kwb's torch/extension.h for the CUDA translation units of torch-style extensions, found first
// on their include path: torch/types.h (ATen and the torch:: tensor API that kernels and their
// launch code use) without the C++ frontend (torch/all.h) or the Python bindings
// (torch/python.h), which halves what nvcc parses (72 s -> 34 s for the tutorial LLTM's .cu on
// the 2-core machine: benchmarks/reference/workbench_choices.md). A unit that needs more fails
// to compile with this one, and kwb compiles it again with torch's own header.
#pragma once
#include <torch/types.h>
