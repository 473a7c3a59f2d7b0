// KWB_LIBRARY / KWB_LIBRARY_IMPL: TORCH_LIBRARY / TORCH_LIBRARY_IMPL with the namespace chosen
// when the library is loaded rather than when it is compiled.
//
// Why: the dispatcher accepts a namespace once per process, so ops registered under a fixed
// name can never be reloaded after an edit. kwb registers each build under
// "kwb_<kernel>_<build key>" by calling kwb_register_library(ns) after loading the .so, so an
// edited kernel gets fresh ops beside the old ones, and editing the .cu does not recompile
// this .cpp (the slow part of the edit-reload loop: benchmarks/reference/h100_compile_times.md).
//
//   KWB_LIBRARY(m) { m.def("relu_scale(Tensor x, float alpha) -> Tensor"); }
//   KWB_LIBRARY_IMPL(m, CPU) { m.impl("relu_scale", &relu_scale_cpu); }
//
// KWB_LIBRARY appears once per kernel; KWB_LIBRARY_IMPL blocks may be in any of its .cpp files.
#pragma once
#include <torch/library.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

namespace kwb {
namespace detail {
// inline, not internal: a kernel's KWB_LIBRARY_IMPL blocks may sit in several .cpp files and
// must land in one list. Each library is built with -fvisibility=hidden, so two kernel
// libraries (or two builds of one) never share it.

using InitFn = void (*)(torch::Library&);

struct Registration {
  torch::Library::Kind kind;
  std::optional<c10::DispatchKey> key;
  InitFn init;
  const char* file;
  uint32_t line;
};

inline std::vector<Registration>& registrations() {
  static std::vector<Registration> list;
  return list;
}

struct Registrar {
  Registrar(torch::Library::Kind kind, std::optional<c10::DispatchKey> key, InitFn init,
            const char* file, uint32_t line) {
    registrations().push_back({kind, key, init, file, line});
  }
};

// Creates the libraries under `ns`: definitions first, then implementations. The Library
// objects are leaked on purpose: the ops must outlive every Python reference to them, and
// destroying them at exit could race torch's own teardown.
inline int register_all(const char* ns, char* err, size_t err_len) {
  try {
    for (int pass = 0; pass < 2; ++pass) {
      for (const Registration& r : registrations()) {
        if ((r.kind == torch::Library::DEF) != (pass == 0)) continue;
        auto* lib = new torch::Library(r.kind, ns, r.key, r.file, r.line);
        r.init(*lib);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    if (err && err_len) {
      std::strncpy(err, e.what(), err_len - 1);
      err[err_len - 1] = '\0';
    }
    return 1;
  }
}

}  // namespace detail
}  // namespace kwb

#define KWB_CONCAT_INNER_(a, b) a##b
#define KWB_CONCAT_(a, b) KWB_CONCAT_INNER_(a, b)

#define KWB_LIBRARY(m)                                                                    \
  static void kwb_library_def_(torch::Library&);                                          \
  static const ::kwb::detail::Registrar kwb_library_def_registrar_(                       \
      torch::Library::DEF, std::nullopt, &kwb_library_def_, __FILE__, __LINE__);           \
  extern "C" __attribute__((visibility("default"))) int kwb_register_library(             \
      const char* ns, char* err, size_t err_len) {                                        \
    return ::kwb::detail::register_all(ns, err, err_len);                                 \
  }                                                                                       \
  static void kwb_library_def_(torch::Library& m)

#define KWB_LIBRARY_IMPL(m, k) KWB_LIBRARY_IMPL_UID_(m, k, KWB_CONCAT_(kwb_library_impl_, __COUNTER__))
#define KWB_LIBRARY_IMPL_UID_(m, k, uid)                                                  \
  static void uid(torch::Library&);                                                       \
  static const ::kwb::detail::Registrar KWB_CONCAT_(uid, _registrar_)(                    \
      torch::Library::IMPL, c10::DispatchKey::k, &uid, __FILE__, __LINE__);                \
  static void uid(torch::Library& m)
