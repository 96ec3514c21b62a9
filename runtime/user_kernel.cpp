// The non-template half of jit/user_kernel.hpp: a declaration made into a registered KernelSpec,
// and the checks of a call's arguments that only the call can make.
#include "jit/user_kernel.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "jit/kernel_catalog.hpp"
#include "support/text.hpp"

namespace jit {

KernelText cpu_file(std::string file, std::vector<DType> dtypes) {
  return {Backend::Cpu, std::move(file), "", std::move(dtypes)};
}
KernelText cpu_text(std::string name, std::string text, std::vector<DType> dtypes) {
  return {Backend::Cpu, std::move(name), std::move(text), std::move(dtypes)};
}
KernelText cuda_file(std::string file, GpuLayout layout, std::vector<DType> dtypes) {
  return {Backend::Cuda, std::move(file), "", std::move(dtypes), layout, 70};
}
KernelText cuda_text(std::string name, std::string text, GpuLayout layout, std::vector<DType> dtypes) {
  return {Backend::Cuda, std::move(name), std::move(text), std::move(dtypes), layout, 70};
}
KernelText hip_file(std::string file, GpuLayout layout, std::vector<DType> dtypes) {
  return {Backend::Hip, std::move(file), "", std::move(dtypes), layout, 0};
}

ParamSpec dtype_param(std::vector<std::string> choices, std::optional<std::string> fallback) {
  ParamSpec p{"dtype", std::move(choices), 0, 0, "element type"};
  if (fallback) p.fallback = ParamValue(*fallback);
  return p;
}
ParamSpec int_param(std::string name, std::int64_t min, std::int64_t max, std::optional<std::int64_t> fallback, std::string doc) {
  ParamSpec p{std::move(name), {}, min, max, std::move(doc)};
  if (fallback) p.fallback = ParamValue(*fallback);
  return p;
}
ParamSpec text_param(std::string name, std::vector<std::string> choices, std::optional<std::string> fallback, std::string doc) {
  ParamSpec p{std::move(name), std::move(choices), 0, 0, std::move(doc)};
  if (fallback) p.fallback = ParamValue(*fallback);
  return p;
}

namespace detail {
namespace {

namespace fs = std::filesystem;

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string declared_type(const ArgumentCheck& c) {
  switch (c.kind) {
    case ArgKind::In: return std::string("const ") + c.element + "*";
    case ArgKind::Out: return std::string(c.element) + "*";
    case ArgKind::Scalar: return c.element;
    case ArgKind::Count: return "std::int64_t (a count)";
  }
  return "?";
}

std::string who(const ArgumentCheck& c) {
  return std::string(c.kernel) + ": argument '" + c.name + "' (" + std::to_string(c.index) + " of " + std::to_string(c.count) + ")";
}

std::optional<DType> dtype_named(const std::string& name) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

std::optional<DType> fixed_dtype(const std::string& c_type) {
  if (c_type == "float") return DType::f32;
  if (c_type == "double") return DType::f64;
  return std::nullopt;
}

// The folder of the running program: a program's kernel texts may sit beside it.
std::string program_folder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// The dtype a get with these params specializes for: the params', else the declaration's default
// (a get may leave out a parameter that has one: its key is the same either way).
const ParamValue* dtype_of_get(const char* kernel, const ParamSet& params) {
  if (const auto* v = params.find("dtype")) return v;
  for (const auto& spec : find_kernel(kernel).params)
    if (spec.name == "dtype" && spec.fallback) return &*spec.fallback;
  return nullptr;
}

}  // namespace

void check_count(const ArgumentCheck& c, std::int64_t v) {
  if (v < 0)
    throw Error(ErrorCode::InvalidArgument, who(c) + " = " + std::to_string(v) + " is negative; it counts work items");
}

void check_pointer(const ArgumentCheck& c, const PassedPointer& p, const ParamSet& params, std::int64_t work) {
  const std::string element = c.element;
  std::optional<DType> expected;
  std::string expected_text = declared_type(c);
  if (element == "T") {
    const auto* v = dtype_of_get(c.kernel, params);
    if (v && std::holds_alternative<std::string>(*v)) {
      expected = dtype_named(std::get<std::string>(*v));
      expected_text += " with T = " + std::get<std::string>(*v) + " (the kernel's dtype)";
    }
  } else {
    expected = fixed_dtype(element);
  }
  if (p.dtype >= 0) {
    const DType given = static_cast<DType>(p.dtype);
    const std::string given_text = std::string(p.mutable_data ? "" : "const ") + std::string(dtype_name(given)) + "*";
    if (!expected || *expected != given)
      throw Error(ErrorCode::InvalidArgument, who(c) + " is declared " + expected_text + "; the call passes " + given_text);
  }
  if (p.data == nullptr && work > 0)
    throw Error(ErrorCode::InvalidArgument, who(c) + ", declared " + expected_text + ", is null; the launch covers " +
                                                std::to_string(work) + " work items");
}

void register_declared(const char* name, KernelDeclaration decl, std::vector<ArgumentSpec> arguments) {
  const std::string kernel = name ? name : "";
  auto refuse = [&](const std::string& why) {
    return Error(ErrorCode::InvalidParams, "cannot declare kernel '" + printable(kernel) + "': " + why);
  };
  const bool has_dtype = std::any_of(decl.params.begin(), decl.params.end(), [](const ParamSpec& p) { return p.name == "dtype"; });
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const auto& a = arguments[i];
    if (!is_identifier(a.name) || a.name.rfind("jitk_", 0) == 0)
      throw refuse("argument name '" + printable(a.name) + "' is not a C identifier (or starts with jitk_)");
    for (std::size_t j = 0; j < i; ++j)
      if (arguments[j].name == a.name) throw refuse("argument '" + a.name + "' is declared twice");
    if (!has_dtype && (a.type == "const T*" || a.type == "T*"))
      throw refuse("argument '" + a.name + "' has the element type jit::dtype_t but the kernel has no 'dtype' parameter");
  }
  if (arguments.size() > static_cast<std::size_t>(ArgPack::kMaxArgs) - 8)
    throw refuse("more than " + std::to_string(ArgPack::kMaxArgs - 8) + " arguments");
  if (decl.texts.empty()) throw refuse("it has no text (jit::cpu_file, jit::cuda_file, ...)");

  std::vector<std::string> search;
  for (const auto& s : decl.search_path) {
    if (s.empty()) continue;
    std::error_code ec;
    const fs::path abs = fs::absolute(s, ec);
    search.push_back(ec ? s : abs.lexically_normal().string());
  }
  if (std::string here = program_folder(); !here.empty()) search.push_back(here);

  KernelSpec spec;
  spec.name = kernel;
  spec.summary = decl.summary;
  spec.params = std::move(decl.params);
  spec.params_check = std::move(decl.params_check);
  spec.arguments = std::move(arguments);
  for (auto& t : decl.texts) {
    if (t.file.empty() || std::any_of(t.file.begin(), t.file.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\' || c == 0x7f;
        }))
      throw refuse("text file name '" + printable(t.file) + "' is empty or has quotes, backslashes or control characters");
    Implementation impl;
    impl.name = std::string(backend_name(t.backend));
    impl.backend = t.backend;
    impl.generic = true;
    impl.file = t.file;
    impl.text = std::move(t.text);
    impl.search_path = search;
    impl.dtypes = t.dtypes;
    // The CPU texts take float and double (its headers have no 16-bit arithmetic).
    if (impl.dtypes.empty() && t.backend == Backend::Cpu && has_dtype) {
      const auto& choices = std::find_if(spec.params.begin(), spec.params.end(), [](const ParamSpec& p) { return p.name == "dtype"; })->choices;
      for (DType d : {DType::f32, DType::f64})
        if (std::find(choices.begin(), choices.end(), std::string(dtype_name(d))) != choices.end()) impl.dtypes.push_back(d);
    }
    impl.layout = t.layout;
    impl.min_capability = t.min_capability;
    impl.note = "declared by the program (" + t.file + ")";
    spec.implementations.push_back(std::move(impl));
  }
  register_kernel(std::move(spec));
}

}  // namespace detail
}  // namespace jit
