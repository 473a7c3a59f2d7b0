// kwb_torch_library.h: kwb force-includes this (-include) into each translation unit of a
// TORCH_LIBRARY extension it builds (pytorch/extension-cpp's way). It redefines
// TORCH_LIBRARY, TORCH_LIBRARY_FRAGMENT and TORCH_LIBRARY_IMPL so that loading the library
// registers nothing; kwb then calls kwb_register_torch_library(suffix), which registers each
// block as torch's macros would, under its namespace with `suffix` appended to the namespaces
// the library defines. Why: torch accepts a namespace once per process, so an edited build
// loaded into the same process must register its ops under a new name ("" the first time).
#pragma once
#include "kwb_deferred_registration.h"

namespace kwb {
namespace torch_library {

inline bool is_torchs(const deferred::Block& b) { return b.ns != nullptr; }

// A namespace the library defines (TORCH_LIBRARY or TORCH_LIBRARY_FRAGMENT) is renamed on a
// reload; one it only adds kernels to (TORCH_LIBRARY_IMPL(aten, ...)) keeps its name.
inline bool defines(const char* ns) {
  for (const deferred::Block& b : deferred::blocks())
    if (is_torchs(b) && b.kind != torch::Library::IMPL && std::strcmp(b.ns, ns) == 0) return true;
  return false;
}

}  // namespace torch_library
}  // namespace kwb

// The namespaces the library defines, comma-separated, into out.
extern "C" __attribute__((used, visibility("default"))) inline int kwb_torch_library_namespaces(char* out, size_t len) {
  std::string names;
  for (const auto& b : kwb::deferred::blocks()) {
    if (!kwb::torch_library::is_torchs(b) || b.kind == torch::Library::IMPL) continue;
    const std::string ns = b.ns;
    if (("," + names + ",").find("," + ns + ",") == std::string::npos) names += (names.empty() ? "" : ",") + ns;
  }
  kwb::deferred::copy_out(names, out, len);
  return 0;
}

// Registers every TORCH_LIBRARY* block as torch's macros would, each namespace the library
// defines with `suffix` appended. Returns 0, or 1 with torch's message in err.
extern "C" __attribute__((used, visibility("default"))) inline int kwb_register_torch_library(const char* suffix, char* err,
                                                                                            size_t len) {
  return kwb::deferred::register_blocks(
      kwb::torch_library::is_torchs,
      [suffix](const kwb::deferred::Block& b) {
        return kwb::torch_library::defines(b.ns) ? std::string(b.ns) + suffix : std::string(b.ns);
      },
      err, len);
}

// Two levels, as torch's C10_STRINGIZE: TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) names the
// namespace the macro expands to (the module's name), not "TORCH_EXTENSION_NAME".
#define KWB_TL_STRINGIZE_INNER_(x) #x
#define KWB_TL_STRINGIZE_(x) KWB_TL_STRINGIZE_INNER_(x)

#undef TORCH_LIBRARY
#undef TORCH_LIBRARY_FRAGMENT
#undef TORCH_LIBRARY_IMPL
#define TORCH_LIBRARY(ns, m)                                             \
  KWB_DEFERRED_BLOCK_(torch::Library::DEF, KWB_TL_STRINGIZE_(ns), std::nullopt, m, \
                      KWB_DEFERRED_CONCAT_(kwb_torch_library_def_, __COUNTER__))
#define TORCH_LIBRARY_FRAGMENT(ns, m)                                         \
  KWB_DEFERRED_BLOCK_(torch::Library::FRAGMENT, KWB_TL_STRINGIZE_(ns), std::nullopt, m, \
                      KWB_DEFERRED_CONCAT_(kwb_torch_library_fragment_, __COUNTER__))
#define TORCH_LIBRARY_IMPL(ns, k, m)                                                                    \
  KWB_DEFERRED_BLOCK_(torch::Library::IMPL, KWB_TL_STRINGIZE_(ns), std::make_optional(c10::DispatchKey::k), m, \
                      KWB_DEFERRED_CONCAT_(kwb_torch_library_impl_, __COUNTER__))
