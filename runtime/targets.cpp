// Targets: parsing and printing "cpu" / "cuda:sm_90" / "hip:gfx90a" (the names come from the backend table).
#include <string>

#include "jit/jit.hpp"
#include "runtime/backend_table.hpp"

namespace jit {

std::string_view backend_name(Backend b) {
  const auto* e = detail::backend_entry(b);
  return e ? e->name : "?";
}

Target Target::cpu() { return Target{Backend::Cpu, "", 0}; }

Target Target::parse(std::string_view text) {
  std::string_view name = text, arch;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    arch = text.substr(colon + 1);
  }
  const auto table = detail::backend_table();
  for (const auto& e : table)
    if (name == e.name) return Target{e.backend, std::string(arch), 0};
  std::string forms;  // "cpu, cuda[:sm_XX] or hip[:gfxXXX]"
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (i > 0) forms += i + 1 == table.size() ? " or " : ", ";
    forms += std::string(table[i].name);
    if (!table[i].arch_hint.empty()) forms += "[:" + std::string(table[i].arch_hint) + "]";
  }
  throw Error(ErrorCode::InvalidParams, "unknown target '" + std::string(text) + "'; use " + forms);
}

std::string Target::to_string() const {
  std::string out(backend_name(backend));
  if (!arch.empty()) out += ":" + arch;
  return out;
}

}  // namespace jit
