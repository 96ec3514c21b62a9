// Warm manifests: TOML text -> validated, expanded warm items (a pure function; fuzzed in fuzz/).
#include "runtime/shipping/manifest.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

#include "jit/kernel_catalog.hpp"
#include "jit/tuning.hpp"
#include "runtime/shipping/shipped_descriptors.hpp"
#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

using cache::WarmItem;

[[noreturn]] void manifest_error(const std::string& where, const std::string& what) {
  throw Error(ErrorCode::Manifest, where + ": " + what);
}

// One parameter's values: a scalar is one value, an array lists the values to expand.
std::vector<ParamValue> param_values(const std::string& where, const std::string& name, const toml::node& node) {
  auto one = [&](const toml::node& n) -> ParamValue {
    // The type first: toml++'s value<int64_t>() of a float node casts it unchecked (UB past int64's range).
    if (const auto* i = n.as_integer()) return i->get();
    if (const auto* s = n.as_string()) return s->get();
    manifest_error(where, "parameter '" + name + "' must be an integer, a string, or an array of them");
  };
  std::vector<ParamValue> out;
  if (const auto* arr = node.as_array()) {
    if (arr->empty()) manifest_error(where, "parameter '" + name + "' is an empty array");
    for (const auto& n : *arr) out.push_back(one(n));
  } else {
    out.push_back(one(node));
  }
  return out;
}

// One entry may expand to at most this many specializations (arrays multiply).
constexpr std::size_t kMaxCombinations = 100000;

}  // namespace

std::vector<WarmItem> parse_manifest_text(std::string_view text, const std::string& origin, const Target& fallback_target) {
  const std::filesystem::path file = origin;
  toml::table doc;
  try {
    doc = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "syntax error at line " << e.source().begin.line << ", column " << e.source().begin.column << ": "
        << e.description();
    manifest_error(file.string(), msg.str());
  }
  for (const auto& [key, node] : doc)
    if (key.str() != "kernel") manifest_error(file.string(), "unknown top-level key '" + std::string(key.str()) + "'; expected [[kernel]] entries");
  const toml::array* entries = doc["kernel"].as_array();
  if (!entries) manifest_error(file.string(), "no [[kernel]] entries");

  std::vector<WarmItem> items;
  int index = 0;
  for (const auto& entry_node : *entries) {
    ++index;
    std::string where = file.string() + ": kernel #" + std::to_string(index);
    const toml::table* entry = entry_node.as_table();
    if (!entry) manifest_error(where, "is not a table");
    for (const auto& [key, node] : *entry) {
      std::string k(key.str());
      if (k != "name" && k != "target" && k != "params" && k != "tune")
        manifest_error(where, "unknown key '" + k + "' (expected name, target, params, tune)");
    }
    auto name = (*entry)["name"].value<std::string>();
    if (!name) manifest_error(where, "missing name = \"<kernel>\"");
    where += " (" + *name + ")";
    Target target = fallback_target;
    if (auto t = (*entry)["target"].value<std::string>()) {
      try {
        target = Target::parse(*t);
      } catch (const Error& e) {
        manifest_error(where, e.what());
      }
    }
    const KernelDef* def = nullptr;
    try {
      def = &find_kernel(*name);
    } catch (const Error& e) {
      manifest_error(where, e.what());
    }
    // Expand arrays into every combination (names checked first, so a typo never multiplies).
    std::vector<ParamSet> combos(1);
    if (const toml::table* params = (*entry)["params"].as_table()) {
      for (const auto& [key, node] : *params) {
        std::string pname(key.str());
        if (std::none_of(def->params.begin(), def->params.end(), [&](const ParamSpec& s) { return s.name == pname; }))
          manifest_error(where, "unknown parameter '" + pname + "' for " + def->name);
        auto values = param_values(where, pname, node);
        if (combos.size() * values.size() > kMaxCombinations)
          manifest_error(where, "expands to more than " + std::to_string(kMaxCombinations) + " specializations");
        std::vector<ParamSet> next;
        for (const auto& combo : combos)
          for (const auto& v : values) {
            ParamSet p = combo;
            p.set(pname, v);
            next.push_back(std::move(p));
          }
        combos = std::move(next);
      }
    } else if ((*entry)["params"]) {
      manifest_error(where, "params must be a table, e.g. params = { dtype = \"f32\" }");
    }
    // A param left out takes the descriptor's default (what jit::get<K>({}) asks for) where the
    // kernel allows it; one without a usable default stays missing, and validation names it.
    const toml::table* given = (*entry)["params"].as_table();
    for (const ParamSpec& spec : def->params) {
      if (given && given->contains(spec.name)) continue;
      if (const ParamValue* v = omitted_param_value(*name, spec))
        for (auto& combo : combos) combo.set(spec.name, *v);
    }
    // tune = [[m, n, k], ...]: the shapes `jitk warm --tune` tunes each combination for
    std::vector<std::vector<std::int64_t>> shapes;
    if (const toml::node_view tune = (*entry)["tune"]) {
      const Tuner* tuner = tuner_for(*name);
      if (!tuner) manifest_error(where, *name + " cannot be tuned (tune = ... is for kernels with tunable params, e.g. gemm)");
      const toml::array* list = tune.as_array();
      if (!list || list->empty()) manifest_error(where, std::string("tune must be a list of shapes, e.g. tune = [[") + tuner->shape_names + "]]");
      for (const auto& shape_node : *list) {
        const toml::array* numbers = shape_node.as_array();
        std::vector<std::int64_t> shape;
        for (std::size_t i = 0; numbers && i < numbers->size(); ++i)
          if (const auto* v = (*numbers)[i].as_integer()) shape.push_back(v->get());
        try {
          if (!numbers || shape.size() != numbers->size()) throw Error(ErrorCode::InvalidArgument, "not a list of integers");
          tuner->check_shape(shape);
        } catch (const Error& e) {
          manifest_error(where, std::string("tune: each shape is [") + tuner->shape_names + "]: " + e.what());
        }
        shapes.push_back(std::move(shape));
      }
    }
    for (auto& p : combos) {
      try {
        p = validate_params(*def, p, target.backend);
      } catch (const Error& e) {
        manifest_error(where, e.what());
      }
      items.push_back({*name, target, std::move(p), where, shapes});
    }
  }
  return items;
}

}  // namespace jit::detail

namespace jit::cache {

std::vector<WarmItem> parse_manifest(const std::filesystem::path& file) {
  std::string why;
  const auto text = detail::read_regular_file(file, detail::kMaxManifestBytes, &why);
  if (!text) throw Error(ErrorCode::Manifest, detail::printable(file.string()) + ": cannot be read: " + why);
  return detail::parse_manifest_text(*text, file.string(), default_target());
}

}  // namespace jit::cache
