// What wb.load_inline() puts in front of the cpp= source: ATen (tensor math, at::empty_like),
// the op registration macros, the argument checks, and cudaStream_t / kwb::current_stream().
// ATen/ATen.h, not torch/extension.h: no pybind or C++ frontend to compile
// (benchmarks/reference/h100_compile_times.md). This part recompiles only when the cpp= string
// changes, never on a cuda= edit.
#pragma once
#include <ATen/ATen.h>

#include "kwb_checks.h"
#include "kwb_dtype.h"
#include "kwb_library.h"
