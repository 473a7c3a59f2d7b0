// KWB_LIBRARY / KWB_LIBRARY_IMPL: TORCH_LIBRARY / TORCH_LIBRARY_IMPL with the namespace chosen
// when the library is loaded rather than when it is compiled.
//
// kwb registers each build under "kwb_<kernel>_<build key>" by calling kwb_register_library(ns)
// after loading the .so, so an edited kernel gets fresh ops beside the old ones, and editing the
// .cu does not recompile this .cpp (the slow part of the edit-reload loop:
// benchmarks/reference/h100_compile_times.md). kwb_deferred_registration.h holds the blocks.
//
//   KWB_LIBRARY(m) { m.def("relu_scale(Tensor x, float alpha) -> Tensor"); }
//   KWB_LIBRARY_IMPL(m, CPU) { m.impl("relu_scale", &relu_scale_cpu); }
//
// KWB_LIBRARY appears once per kernel; KWB_LIBRARY_IMPL blocks may be in any of its .cpp files.
//
// C++ that calls the build's own ops (an Autograd kernel, a Python entry) finds them with
// kwb::typed_op<Signature>("relu_scale"), under the namespace the build was registered with.
#pragma once
#include <string>

#include "kwb_deferred_registration.h"

namespace kwb {
// The namespace this library's ops were registered under ("" before kwb registered them).
inline std::string& library_namespace() {
  static std::string ns;
  return ns;
}

// The dispatcher's handle on this build's op `name`, typed: a call costs what a direct C++ call
// through the dispatcher does (no Python argument parsing, no boxing).
template <typename Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  TORCH_CHECK(!library_namespace().empty(), "kwb::typed_op(\"", name, "\"): this library's ops are not registered yet; "
              "kwb registers them when it loads the build, so look ops up when called, not while the library loads");
  return c10::Dispatcher::singleton().findSchemaOrThrow((library_namespace() + "::" + name).c_str(), "").typed<Signature>();
}
}  // namespace kwb

#define KWB_LIBRARY(m)                                                                                   \
  extern "C" __attribute__((visibility("default"))) int kwb_register_library(const char* ns, char* err,  \
                                                                             size_t err_len) {           \
    ::kwb::library_namespace() = ns;                                                                     \
    return ::kwb::deferred::register_blocks([](const ::kwb::deferred::Block& b) { return b.ns == nullptr; }, \
                                            [ns](const ::kwb::deferred::Block&) { return std::string(ns); }, \
                                            err, err_len);                                               \
  }                                                                                                      \
  KWB_DEFERRED_BLOCK_(torch::Library::DEF, nullptr, std::nullopt, m, kwb_library_def_)

#define KWB_LIBRARY_IMPL(m, k)                                                                \
  KWB_DEFERRED_BLOCK_(torch::Library::IMPL, nullptr, std::make_optional(c10::DispatchKey::k), m, \
                      KWB_DEFERRED_CONCAT_(kwb_library_impl_, __COUNTER__))
