// The number of fields of an aggregate, so a static_assert can hold a fields() listing to all of them.
#pragma once
#include <cstddef>
#include <tuple>
#include <utility>

namespace jit::detail {

// Converts to any field's type, so T{AnyField{}, ...} compiles with up to as many as T has fields.
struct AnyField {
  template <class T> operator T() const;  // never defined: only asked about, never called
};

template <class T, std::size_t... I> constexpr bool brace_initializable(std::index_sequence<I...>) {
  return requires { T{(void(I), AnyField{})...}; };
}

// For aggregates without C arrays or bases (an array's elements would count one by one).
template <class T, std::size_t N = 0> constexpr std::size_t field_count() {
  if constexpr (brace_initializable<T>(std::make_index_sequence<N + 1>{}))
    return field_count<T, N + 1>();
  else
    return N;
}

// How many fields a struct's fields() listing names.
template <class T> constexpr std::size_t listed_count() {
  return std::tuple_size_v<decltype(std::declval<const T&>().fields())>;
}

}  // namespace jit::detail
