// Targets: parsing and printing "cpu" / "cuda:sm_90" / "hip:gfx90a".
#include <string>

#include "jit/jit.hpp"

namespace jit {

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::Cpu: return "cpu";
    case Backend::Cuda: return "cuda";
    case Backend::Hip: return "hip";
  }
  return "?";
}

Target Target::cpu() { return Target{Backend::Cpu, "", 0}; }

Target Target::parse(std::string_view text) {
  std::string_view name = text, arch;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    arch = text.substr(colon + 1);
  }
  for (Backend b : {Backend::Cpu, Backend::Cuda, Backend::Hip})
    if (name == backend_name(b)) return Target{b, std::string(arch), 0};
  throw Error(ErrorCode::InvalidParams,
              "unknown target '" + std::string(text) + "'; use cpu, cuda[:sm_XX] or hip[:gfxXXX]");
}

std::string Target::to_string() const {
  std::string out(backend_name(backend));
  if (!arch.empty()) out += ":" + arch;
  return out;
}

}  // namespace jit
