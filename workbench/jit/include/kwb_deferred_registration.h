// Deferred op registration, shared by kwb_library.h (KWB_LIBRARY: the namespace is chosen when
// the library is loaded) and kwb_torch_library.h (TORCH_LIBRARY blocks of a user's extension,
// renamed on a reload). Why: the dispatcher accepts a namespace once per process, so a build
// that registered its ops while being loaded could never be reloaded after an edit. Each block
// is recorded here at load time and registered when kwb calls the library's entry point.
#pragma once
#include <torch/library.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace kwb {
namespace deferred {

using InitFn = void (*)(torch::Library&);

struct Block {
  torch::Library::Kind kind;
  const char* ns;  // nullptr: a KWB_LIBRARY block, under the namespace given at registration
  std::optional<c10::DispatchKey> key;
  InitFn init;
  const char* file;
  uint32_t line;
};

// inline, not internal: the blocks of every translation unit of one library land in one list.
// Each library is built with -fvisibility=hidden, so two libraries (or two builds of one) never
// share it.
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

inline void copy_out(const std::string& text, char* out, size_t len) {
  if (!out || !len) return;
  std::strncpy(out, text.c_str(), len - 1);
  out[len - 1] = '\0';
}

// Registers the blocks `pick` accepts under the namespace `name_of` gives them: definitions,
// then fragments, then implementations. The Library objects are leaked on purpose: the ops must
// outlive every Python reference to them, and destroying them at exit could race torch's own
// teardown. Returns 0, or 1 with torch's message in err.
template <typename Pick, typename NameOf>
int register_blocks(Pick pick, NameOf name_of, char* err, size_t err_len) {
  using Kind = torch::Library::Kind;
  try {
    for (Kind pass : {Kind::DEF, Kind::FRAGMENT, Kind::IMPL}) {
      for (const Block& b : blocks()) {
        if (b.kind != pass || !pick(b)) continue;
        auto* lib = new torch::Library(b.kind, name_of(b), b.key, b.file, b.line);
        b.init(*lib);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    copy_out(e.what(), err, err_len);
    return 1;
  }
}

}  // namespace deferred
}  // namespace kwb

#define KWB_DEFERRED_CONCAT_INNER_(a, b) a##b
#define KWB_DEFERRED_CONCAT_(a, b) KWB_DEFERRED_CONCAT_INNER_(a, b)
// A static function `uid(torch::Library& m)` whose body follows, recorded as a block.
#define KWB_DEFERRED_BLOCK_(kind, ns, key, m, uid)                                                       \
  static void uid(torch::Library&);                                                                    \
  static const ::kwb::deferred::Registrar KWB_DEFERRED_CONCAT_(uid, _registrar_)(kind, ns, key, &uid, __FILE__, \
                                                                               __LINE__);               \
  static void uid(torch::Library& m)
