// What the binding learns from a kernel descriptor itself: the types of its Args' fields (probing the
// aggregate), and how its typed Params read from a ParamSet (each field of Params::fields() is
// changed in turn and K::to_params shows which param it is and how its values are written).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "jit/chain.hpp"
#include "jit/jit.hpp"
#include "signature.hpp"

namespace jitk_py {

template <class T> constexpr FieldType field_type_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, std::int64_t>) return FieldType::I64;
  else if constexpr (std::is_same_v<U, double>) return FieldType::F64;
  else if constexpr (std::is_same_v<U, bool>) return FieldType::Bool;
  else if constexpr (std::is_same_v<U, std::size_t>) return FieldType::Size;
  else if constexpr (std::is_same_v<U, jit::ConstPtr>) return FieldType::ConstPtr;
  else if constexpr (std::is_same_v<U, jit::MutPtr>) return FieldType::MutPtr;
  else if constexpr (std::is_same_v<U, const std::int32_t*>) return FieldType::I32Ptr;
  else if constexpr (std::is_same_v<U, const std::int64_t*>) return FieldType::I64Ptr;
  else if constexpr (std::is_same_v<U, float*>) return FieldType::F32Ptr;
  else if constexpr (std::is_same_v<U, void*>) return FieldType::VoidPtr;
  else if constexpr (std::is_same_v<U, jit::Operands>) return FieldType::Operands;
  else return FieldType::Other;
}

// ---- the fields of an aggregate ------------------------------------------------------------------
struct AnyField {
  template <class T> operator T() const;  // never called: only for counting
};
template <class A, std::size_t... I> constexpr bool aggregate_takes(std::index_sequence<I...>) {
  return requires { A{(void(I), AnyField{})...}; };
}
template <class A, std::size_t N = 0> constexpr std::size_t field_count() {
  if constexpr (N > 32) return 0;  // not an aggregate of at most 32 fields
  else if constexpr (aggregate_takes<A>(std::make_index_sequence<N + 1>{})) return field_count<A, N + 1>();
  else return N;
}

struct FieldProbe {
  FieldType* out;
  template <class T> operator T() const {
    *out = field_type_of<T>();
    return T{};
  }
};
template <class A, std::size_t... I> std::vector<FieldType> probe_fields(std::index_sequence<I...>) {
  std::vector<FieldType> types(sizeof...(I), FieldType::Other);
  [[maybe_unused]] A a{FieldProbe{&types[I]}...};
  return types;
}
template <class A> std::vector<FieldType> field_types() { return probe_fields<A>(std::make_index_sequence<field_count<A>()>{}); }

// One launch argument's value, as the binding gathered it (which member holds it follows the field's type).
struct Value {
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  const void* p = nullptr;
  jit::DType dtype = jit::DType::f32;
  jit::Operands operands;
};
struct FieldTake {
  const Value* v;
  template <class T> operator T() const {
    constexpr FieldType t = field_type_of<T>();
    if constexpr (t == FieldType::I64) return v->i;
    else if constexpr (t == FieldType::F64) return v->d;
    else if constexpr (t == FieldType::Bool) return v->b;
    else if constexpr (t == FieldType::Size) return static_cast<std::size_t>(v->i);
    else if constexpr (t == FieldType::ConstPtr) return jit::ConstPtr(v->p, v->dtype);
    else if constexpr (t == FieldType::MutPtr) return jit::MutPtr(const_cast<void*>(v->p), v->dtype);
    else if constexpr (t == FieldType::I32Ptr) return static_cast<const std::int32_t*>(v->p);
    else if constexpr (t == FieldType::I64Ptr) return static_cast<const std::int64_t*>(v->p);
    else if constexpr (t == FieldType::F32Ptr) return static_cast<float*>(const_cast<void*>(v->p));
    else if constexpr (t == FieldType::VoidPtr) return const_cast<void*>(v->p);
    else if constexpr (t == FieldType::Operands) return v->operands;
    else return T{};  // refused when the signature was checked against the descriptor
  }
};
template <class A, std::size_t... I> A make_args(const Value* values, std::index_sequence<I...>) {
  return A{FieldTake{values + I}...};
}

// ---- typed params from a ParamSet ----------------------------------------------------------------
// How one field of Params is written in the ParamSet K::to_params makes.
struct ParamField {
  enum class Kind : std::uint8_t { DType, Int, Bool, Enum, Chain, Unmapped } kind = Kind::Unmapped;
  std::string name;
  jit::ParamValue true_value;                       // Bool: how true is written
  std::vector<std::pair<jit::ParamValue, int>> enum_values;  // Enum: each value's text
};

inline bool same_value(const jit::ParamValue& a, const jit::ParamValue& b) { return a == b; }

// The entries of `changed` that differ from (or are missing in) `base`.
inline std::vector<std::pair<std::string, jit::ParamValue>> changed_entries(const jit::ParamSet& base, const jit::ParamSet& changed) {
  std::vector<std::pair<std::string, jit::ParamValue>> out;
  for (const auto& [name, value] : changed.values()) {
    const jit::ParamValue* b = base.find(name);
    if (!b || !same_value(*b, value)) out.emplace_back(name, value);
  }
  return out;
}

// Field I of a Params' fields() (a tie of const references to the members of `p`), to assign to.
template <std::size_t I, class P> auto& field_ref(P& p) {
  using T = std::remove_cvref_t<std::tuple_element_t<I, decltype(std::as_const(p).fields())>>;
  return const_cast<T&>(std::get<I>(p.fields()));
}

template <class K> class ParamsCodec {
 public:
  using P = typename K::Params;
  static constexpr std::size_t kFields = std::tuple_size_v<decltype(std::declval<P&>().fields())>;

  ParamsCodec() { learn(std::make_index_sequence<kFields>{}); }
  const std::vector<ParamField>& fields() const { return fields_; }

  // Params holding `s`'s values (the ones `s` lacks keep Params' defaults). Throws std::invalid_argument
  // for a value of the wrong type or a field the descriptor writes in a way this codec did not learn.
  P read(const jit::ParamSet& s) const {
    P p{};
    read_fields(p, s, std::make_index_sequence<kFields>{});
    return p;
  }

 private:
  template <std::size_t... I> void learn(std::index_sequence<I...>) {
    fields_.resize(kFields);
    (learn_one<I>(), ...);
  }
  template <std::size_t I> void learn_one() {
    ParamField& f = fields_[I];
    const P base{};
    const jit::ParamSet base_set = K::to_params(base);
    using T = std::remove_cvref_t<std::tuple_element_t<I, decltype(base.fields())>>;
    const auto only_change = [&](const P& q) -> std::optional<std::pair<std::string, jit::ParamValue>> {
      auto c = changed_entries(base_set, K::to_params(q));
      if (c.size() != 1) return std::nullopt;
      return c[0];
    };
    if constexpr (std::is_same_v<T, jit::DType>) {
      f.kind = ParamField::Kind::DType, f.name = "dtype";
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      P q{};
      constexpr std::int64_t kMarker = 987654321;
      field_ref<I>(q) = kMarker;
      if (auto c = only_change(q); c && c->second == jit::ParamValue(kMarker)) f.kind = ParamField::Kind::Int, f.name = c->first;
    } else if constexpr (std::is_same_v<T, bool>) {
      P q{};
      field_ref<I>(q) = !std::get<I>(base.fields());
      if (auto c = only_change(q)) {
        f.kind = ParamField::Kind::Bool, f.name = c->first;
        f.true_value = std::get<I>(base.fields()) ? *base_set.find(c->first) : c->second;
      }
    } else if constexpr (std::is_enum_v<T>) {
      // The param that changes between the first two values; then each value's text in turn until one
      // is written as an earlier one was (past the enumeration's end).
      const auto set_for = [](int v) {
        P q{};
        field_ref<I>(q) = static_cast<T>(v);
        return K::to_params(q);
      };
      if (auto c = changed_entries(set_for(0), set_for(1)); c.size() == 1) {
        f.kind = ParamField::Kind::Enum, f.name = c[0].first;
        for (int v = 0; v < 64; ++v) {
          const jit::ParamSet s = set_for(v);
          const jit::ParamValue* written = s.find(f.name);
          if (!written) break;
          bool seen = false;
          for (const auto& e : f.enum_values) seen = seen || e.first == *written;
          if (seen) break;
          f.enum_values.emplace_back(*written, v);
        }
      }
    } else if constexpr (std::is_same_v<T, jit::Chain>) {
      P q{};
      field_ref<I>(q) = jit::Chain::parse("relu");
      if (auto c = only_change(q); c && c->second == jit::ParamValue(std::string("relu"))) f.kind = ParamField::Kind::Chain, f.name = c->first;
    }
  }

  template <std::size_t... I> void read_fields(P& p, const jit::ParamSet& s, std::index_sequence<I...>) const {
    (read_one<I>(p, s), ...);
  }
  template <std::size_t I> void read_one(P& p, const jit::ParamSet& s) const {
    const ParamField& f = fields_[I];
    using T = std::remove_cvref_t<std::tuple_element_t<I, decltype(p.fields())>>;
    if (f.kind == ParamField::Kind::Unmapped)
      throw std::invalid_argument(std::string(K::name) + ": field " + std::to_string(I) + " of its Params is not reachable from Python");
    const jit::ParamValue* v = s.find(f.name);
    if (!v) return;
    const auto text = [&]() -> const std::string& {
      if (!std::holds_alternative<std::string>(*v))
        throw std::invalid_argument(std::string(K::name) + ": param " + f.name + " is a text");
      return std::get<std::string>(*v);
    };
    const auto number = [&]() {
      if (!std::holds_alternative<std::int64_t>(*v))
        throw std::invalid_argument(std::string(K::name) + ": param " + f.name + " is an integer");
      return std::get<std::int64_t>(*v);
    };
    if constexpr (std::is_same_v<T, jit::DType>) {
      const std::string& t = text();
      bool found = false;
      for (jit::DType d : {jit::DType::f16, jit::DType::bf16, jit::DType::f32, jit::DType::f64})
        if (jit::dtype_name(d) == t) field_ref<I>(p) = d, found = true;
      if (!found) throw std::invalid_argument(std::string(K::name) + ": dtype '" + t + "' is not one of f16, bf16, f32, f64");
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      field_ref<I>(p) = number();
    } else if constexpr (std::is_same_v<T, bool>) {
      field_ref<I>(p) = *v == f.true_value;
    } else if constexpr (std::is_enum_v<T>) {
      for (const auto& [written, value] : f.enum_values)
        if (written == *v) {
          field_ref<I>(p) = static_cast<T>(value);
          return;
        }
      throw std::invalid_argument(std::string(K::name) + ": param " + f.name + " has no such value");
    } else if constexpr (std::is_same_v<T, jit::Chain>) {
      field_ref<I>(p) = jit::Chain::parse(text());
    }
  }

  std::vector<ParamField> fields_;
};

}  // namespace jitk_py
