// The shipped descriptors' defaults and launch arguments, read from the descriptors themselves.
#include "runtime/shipping/shipped_descriptors.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "jit/kernels.hpp"
#include "support/field_count.hpp"

namespace jit::detail {
namespace {

template <class T> const char* type_name() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, std::int64_t>) return "int";
  else if constexpr (std::is_same_v<U, double>) return "float";
  else if constexpr (std::is_same_v<U, bool>) return "bool";
  else if constexpr (std::is_same_v<U, std::size_t>) return "size";
  else if constexpr (std::is_same_v<U, ConstPtr>) return "const T*";
  else if constexpr (std::is_same_v<U, MutPtr>) return "T*";
  else if constexpr (std::is_same_v<U, const std::int32_t*>) return "const i32*";
  else if constexpr (std::is_same_v<U, const std::int64_t*>) return "const i64*";
  else if constexpr (std::is_same_v<U, float*>) return "f32*";
  else if constexpr (std::is_same_v<U, void*>) return "void*";
  else if constexpr (std::is_same_v<U, Operands>) return "Operands";
  else if constexpr (std::is_same_v<U, const BlockMask*>) return "const BlockMask*";
  else return nullptr;
}

// Converts to any field's type once, noting the type's name.
struct TypeProbe {
  const char** out;
  template <class T> operator T() const {
    *out = type_name<T>();
    return T{};
  }
};

template <class A, std::size_t... I> std::vector<const char*> arg_types(std::index_sequence<I...>) {
  std::vector<const char*> types(sizeof...(I), nullptr);
  [[maybe_unused]] A a{TypeProbe{&types[I]}...};
  return types;
}

constexpr std::size_t count_names(const char* text) {
  std::size_t n = 1;
  for (const char* c = text; *c; ++c) n += *c == ',' ? 1 : 0;
  return n;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

template <class K> DescriptorInfo describe(const char* descriptor) {
  using Args = typename K::Args;
  constexpr std::size_t fields = field_count<Args>();
  static_assert(count_names(K::arg_names) == fields, "a descriptor's arg_names must name every field of its Args");
  DescriptorInfo d{K::name, descriptor, K::to_params(typename K::Params{}), {}};
  const auto types = arg_types<Args>(std::make_index_sequence<fields>{});
  std::string_view names = K::arg_names;
  for (std::size_t i = 0; i < fields; ++i) {
    const std::size_t comma = names.find(',');
    const std::string_view one = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view{} : names.substr(comma + 1);
    const std::size_t eq = one.find('=');
    ArgInfo arg{trimmed(one.substr(0, eq)), eq == std::string_view::npos ? "" : trimmed(one.substr(eq + 1)),
                types[i] ? types[i] : "?"};
    d.args.push_back(std::move(arg));
  }
  return d;
}

}  // namespace

const std::vector<DescriptorInfo>& shipped_descriptors() {
  using namespace kernels;
  // One row per descriptor of include/jit/kernels.hpp.
  static const std::vector<DescriptorInfo> rows{
      describe<Saxpy>("Saxpy"),
      describe<SiluAndMul>("SiluAndMul"),
      describe<GeluAndMul>("GeluAndMul"),
      describe<RmsNorm>("RmsNorm"),
      describe<FusedAddRmsNorm>("FusedAddRmsNorm"),
      describe<Softmax>("Softmax"),
      describe<LogSoftmax>("LogSoftmax"),
      describe<LayerNorm>("LayerNorm"),
      describe<AdamW>("AdamW"),
      describe<Gemm>("Gemm"),
      describe<BlockSparseMatmul>("BlockSparseMatmul"),
      describe<RotaryEmbedding>("RotaryEmbedding"),
      describe<KvCacheAppend>("KvCacheAppend"),
      describe<AttentionPrefill>("AttentionPrefill"),
      describe<AttentionDecode>("AttentionDecode"),
  };
  return rows;
}

const DescriptorInfo* shipped_descriptor(std::string_view kernel) {
  for (const auto& d : shipped_descriptors())
    if (d.kernel == kernel) return &d;
  return nullptr;
}

const ParamValue* omitted_param_value(std::string_view kernel, const ParamSpec& spec) {
  if (spec.chain) return nullptr;
  if (spec.fallback) return &*spec.fallback;
  const DescriptorInfo* d = shipped_descriptor(kernel);
  const ParamValue* v = d ? d->defaults.find(spec.name) : nullptr;
  if (!v) return nullptr;
  if (const auto* text = std::get_if<std::string>(v))
    return spec.is_text() && std::find(spec.choices.begin(), spec.choices.end(), *text) != spec.choices.end() ? v : nullptr;
  const auto n = std::get<std::int64_t>(*v);
  return !spec.is_text() && n >= spec.min && n <= spec.max ? v : nullptr;
}

}  // namespace jit::detail
