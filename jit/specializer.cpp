// Renders the specialization prelude (#defines and a type alias) in front of the kernel text.
#include "jit/specializer.hpp"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "jit/embedded_sources.hpp"

namespace jit::detail {
namespace {

// Headers of kernel_sources/ that kernel text may include, per backend.
const char* const kCpuHeaders[] = {"jitk_cpu.h"};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* c_type(const std::string& dtype) {
  if (dtype == "f64") return "double";
  if (dtype == "f32") return "float";
  return nullptr;  // f16/bf16 come with the GPU backends
}

}  // namespace

SourceFile kernel_file(const std::string& name, std::string* origin) {
  if (const char* dir = std::getenv("JITK_KERNEL_DIR"); dir && *dir) {
    std::ifstream in(std::string(dir) + "/" + name, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      if (origin) *origin = std::string(dir) + "/" + name;
      return {name, text.str()};
    }
  }
  for (const auto& e : embedded_sources()) {
    if (e.file == name) {
      if (origin) *origin = "embedded";
      return {name, std::string(e.text)};
    }
  }
  throw Error(ErrorCode::Internal, "kernel text '" + name + "' is neither embedded nor in $JITK_KERNEL_DIR");
}

SourceUnit specialize(const KernelDef& def, const ParamSet& params, Backend backend) {
  if (backend != Backend::Cpu)
    throw Error(ErrorCode::BackendUnavailable,
                def.name + ": no " + std::string(backend_name(backend)) + " implementation in this build");
  SourceUnit unit;
  unit.kernel = def.name;
  unit.params_text = params.to_string();

  std::ostringstream prelude;
  prelude << "// jitk specialization of " << def.name << " (" << unit.params_text << ")\n";
  prelude << "#define JITK_ENTRY jitk_entry\n";
  for (const auto& [name, value] : params.values()) {
    if (const auto* n = std::get_if<std::int64_t>(&value)) {
      prelude << "#define JITK_" << upper(name) << " " << *n << "LL\n";
    } else {
      const auto& text = std::get<std::string>(value);
      prelude << "#define JITK_" << upper(name) << "_" << upper(text) << " 1\n";
      if (name == "dtype") prelude << "typedef " << c_type(text) << " T;\n";
    }
  }
  SourceFile text = kernel_file(def.cpu_source, &unit.text_origin);
  unit.main = {text.name, prelude.str() + text.text};
  for (const char* h : kCpuHeaders) unit.headers.push_back(kernel_file(h));
  return unit;
}

std::string with_line_numbers(const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    out.width(5);
    out << n << " | " << line << "\n";
  }
  return out.str();
}

}  // namespace jit::detail
