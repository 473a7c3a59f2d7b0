// kwb's torch/extension.h for the C++ translation units of torch-style extensions, found first
// on their include path: torch/types.h (ATen and the torch:: tensor API) and the headers that
// torch/python.h includes for Python bindings (pybind11, torch's casters, THPVariable, the
// error macros), without the C++ frontend (torch/all.h: nn, optim, data; torch/python.h itself
// pulls in torch/nn/module.h to bind C++ modules). The frontend's templates are instantiated and
// emitted in every unit that includes it, precompiled or not: the tutorial LLTM's lltm.cpp
// compiles in 9.7 s with torch/python.h and 8.5 s with this one, both precompiled, on the 2-core
// machine (benchmarks/reference/workbench_choices.md). A unit that needs more fails to compile
// with this one, and kwb compiles it again with torch's own header.
#pragma once
#include <torch/types.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/python_headers.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_numbers.h>
#include <torch/csrc/utils/python_tuples.h>
