// kwb's torch/extension.h for the C++ translation units of torch-style extensions, found first
// on their include path: torch/types.h (ATen and the torch:: tensor API) and torch/python.h
// (pybind11 and torch's casters, for PYBIND11_MODULE) without the C++ frontend (torch/all.h:
// nn, optim, data). The frontend's templates are instantiated and emitted in every unit that
// includes it, precompiled or not: a unit holding only torch's own header takes 11.0 s on the
// 2-core machine with it precompiled, the tutorial LLTM's lltm.cpp 6.5 s with this one
// (benchmarks/reference/workbench_choices.md). A unit that needs more fails to compile with this
// one, and kwb compiles it again with torch's own header.
#pragma once
#include <torch/types.h>
#include <torch/python.h>
