// kwb_torch_library.h: kwb force-includes this (-include) into each translation unit of a
// TORCH_LIBRARY extension it builds (pytorch/extension-cpp's way). It redefines
// TORCH_LIBRARY, TORCH_LIBRARY_FRAGMENT and TORCH_LIBRARY_IMPL so that loading the library
// registers nothing; kwb then calls kwb_register_torch_library(suffix), which registers each
// block as torch's macros would, under its namespace with `suffix` appended to the namespaces
// the library defines. Why: torch accepts a namespace once per process, so an edited build
// loaded into the same process must register its ops under a new name ("" the first time).
#pragma once
#include <torch/library.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace kwb {
namespace torch_library {

using InitFn = void (*)(torch::Library&);

struct Block {
  torch::Library::Kind kind;
  const char* ns;
  std::optional<c10::DispatchKey> key;
  InitFn init;
  const char* file;
  uint32_t line;
};

// inline: the blocks of every translation unit of one library land in one list; each library
// is built with -fvisibility=hidden, so two libraries (or two builds of one) never share it.
inline std::vector<Block>& blocks() {
  static std::vector<Block> list;
  return list;
}

struct Registrar {
  Registrar(torch::Library::Kind kind, const char* ns, std::optional<c10::DispatchKey> key, InitFn init,
            const char* file, uint32_t line) {
    blocks().push_back({kind, ns, key, init, file, line});
  }
};

// A namespace the library defines (TORCH_LIBRARY or TORCH_LIBRARY_FRAGMENT) is renamed on a
// reload; one it only adds kernels to (TORCH_LIBRARY_IMPL(aten, ...)) keeps its name.
inline bool defines(const char* ns) {
  for (const Block& b : blocks())
    if (b.kind != torch::Library::IMPL && std::strcmp(b.ns, ns) == 0) return true;
  return false;
}

inline void copy_out(const std::string& text, char* out, size_t len) {
  if (!out || !len) return;
  std::strncpy(out, text.c_str(), len - 1);
  out[len - 1] = '\0';
}

}  // namespace torch_library
}  // namespace kwb

// The namespaces the library defines, comma-separated, into out.
extern "C" __attribute__((used, visibility("default"))) inline int kwb_torch_library_namespaces(char* out, size_t len) {
  std::string names;
  for (const auto& b : kwb::torch_library::blocks()) {
    if (b.kind == torch::Library::IMPL) continue;
    const std::string ns = b.ns;
    if (("," + names + ",").find("," + ns + ",") == std::string::npos) names += (names.empty() ? "" : ",") + ns;
  }
  kwb::torch_library::copy_out(names, out, len);
  return 0;
}

// Registers every block: definitions, then fragments, then implementations. The Library
// objects are leaked on purpose, as kwb_library.h's: the ops must outlive every Python
// reference to them. Returns 0, or 1 with torch's message in err.
extern "C" __attribute__((used, visibility("default"))) inline int kwb_register_torch_library(const char* suffix, char* err,
                                                                                            size_t len) {
  using Kind = torch::Library::Kind;
  try {
    for (Kind pass : {Kind::DEF, Kind::FRAGMENT, Kind::IMPL}) {
      for (const auto& b : kwb::torch_library::blocks()) {
        if (b.kind != pass) continue;
        const std::string ns = kwb::torch_library::defines(b.ns) ? std::string(b.ns) + suffix : std::string(b.ns);
        auto* lib = new torch::Library(b.kind, ns, b.key, b.file, b.line);
        b.init(*lib);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    kwb::torch_library::copy_out(e.what(), err, len);
    return 1;
  }
}

#define KWB_TL_CONCAT_INNER_(a, b) a##b
#define KWB_TL_CONCAT_(a, b) KWB_TL_CONCAT_INNER_(a, b)
#define KWB_TL_BLOCK_(kind, ns, key, m, uid)                                                                 \
  static void uid(torch::Library&);                                                                        \
  static const ::kwb::torch_library::Registrar KWB_TL_CONCAT_(uid, _registrar_)(kind, #ns, key, &uid, __FILE__, \
                                                                              __LINE__);                    \
  static void uid(torch::Library& m)

#undef TORCH_LIBRARY
#undef TORCH_LIBRARY_FRAGMENT
#undef TORCH_LIBRARY_IMPL
#define TORCH_LIBRARY(ns, m) \
  KWB_TL_BLOCK_(torch::Library::DEF, ns, std::nullopt, m, KWB_TL_CONCAT_(kwb_torch_library_def_, __COUNTER__))
#define TORCH_LIBRARY_FRAGMENT(ns, m) \
  KWB_TL_BLOCK_(torch::Library::FRAGMENT, ns, std::nullopt, m, KWB_TL_CONCAT_(kwb_torch_library_fragment_, __COUNTER__))
#define TORCH_LIBRARY_IMPL(ns, k, m)                                                                  \
  KWB_TL_BLOCK_(torch::Library::IMPL, ns, std::make_optional(c10::DispatchKey::k), m, \
                KWB_TL_CONCAT_(kwb_torch_library_impl_, __COUNTER__))
