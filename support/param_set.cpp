// ParamSet: a kernel's specialization parameters in their type-erased form.
#include <string>

#include "jit/jit.hpp"

namespace jit {

ParamSet::ParamSet(std::initializer_list<std::pair<std::string, ParamValue>> values) {
  for (const auto& [k, v] : values) set(k, v);
}

void ParamSet::set(std::string name, ParamValue value) {
  for (auto& [k, v] : values_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  values_.emplace_back(std::move(name), std::move(value));
}

const ParamValue* ParamSet::find(std::string_view name) const {
  for (const auto& [k, v] : values_)
    if (k == name) return &v;
  return nullptr;
}

std::string ParamSet::to_string() const {
  std::string out;
  for (const auto& [k, v] : values_) {
    if (!out.empty()) out += ',';
    out += k + '=';
    if (const auto* n = std::get_if<std::int64_t>(&v)) out += std::to_string(*n);
    else out += std::get<std::string>(v);
  }
  return out;
}
}  // namespace jit
