// How a Python call maps onto a kernel's typed launch arguments: one Signature a kernel, parsed from
// a one-line declaration (signatures.cpp) that names each field of the descriptor's Args, in order.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jitk_py {

// What a field of a descriptor's Args is in C++ (found by probing the aggregate: field_probe.hpp).
enum class FieldType : std::uint8_t { I64, F64, Bool, Size, ConstPtr, MutPtr, I32Ptr, I64Ptr, F32Ptr, VoidPtr, Operands, Other };
std::string_view field_type_name(FieldType t);

// One factor product, divided, plus an offset: "rows", "2*hidden", "kv_heads*group", "batch+1", "n/2"
// (a whole quotient: the product must divide). A dimension may depend on a param of the kernel:
// "n/2 if gate!=none else n" is n/2 for a kernel got with gate other than none, else n; the
// launcher resolves it once (its params are fixed) into the branch that holds.
struct DimExpr {
  std::int64_t coef = 1;
  std::vector<std::string> names;
  std::int64_t divisor = 1;
  std::int64_t offset = 0;
  bool flat = false;  // "*n": the array's whole element count, any shape
  std::string text;
  // "<this> if <when_param>(==|!=)<when_value> else <otherwise[0]>"; when_param empty: unconditional
  std::string when_param, when_value;
  bool when_equal = true;
  std::vector<DimExpr> otherwise;  // one element when conditional
};

// The element type an array must have: the kernel's (dtype param), its scalar type (f32; f64 for f64), or a fixed one.
enum class ElemRule : std::uint8_t { Kernel, Scalar, I32, I64, F32, Any };

struct Field {
  enum class Source : std::uint8_t {
    Dim,       // a count taken from the arrays' shapes ("rows"); 0 when only absent arrays name it
    Int,       // an integer the caller passes
    Float,     // a number the caller passes
    Array,     // an array the caller passes
    Chain,     // a fusion chain's operands (a sequence of arrays and numbers)
    Buffer,    // an optional scratch array of any type (attention_decode's workspace)
    HostPtr,   // another array's address when it is in host memory, else null
    IsHost,    // whether another array is in host memory
    Ld,        // another array's leading dimension, in elements
    Nbytes,    // another array's size in bytes (0 when absent)
  };
  std::string name;
  Source source = Source::Dim;
  FieldType expected = FieldType::Other;  // what the C++ field must be for this source
  // Int, Float: the default (has_default false: required)
  bool has_default = false;
  double default_value = 0;
  // Array
  bool output = false;
  bool optional = false;
  ElemRule elem = ElemRule::Kernel;
  std::vector<DimExpr> dims;
  std::string layout_param;  // "a_layout": the array is row-major unless that param says "col" (then column-major)
  // Chain: the param holding the chain's text, and the array its tensors are shaped like
  // HostPtr, IsHost, Ld, Nbytes: the array named
  std::string other;
  int other_index = -1;  // index of `other` among the fields
  int user_index = -1;   // position among the caller's arguments (-1: not the caller's)
};

struct Signature {
  std::string kernel;
  std::string declaration;  // the text it was parsed from
  std::vector<Field> fields;
  std::vector<int> user_order;  // field indices in the order the caller passes them: required arrays, required numbers, defaulted
  std::string python_signature() const;  // "(x, weight, y, eps=1e-06, prologue=(), epilogue=())"
};

// Parses a declaration; throws std::invalid_argument naming the kernel and the part it could not read.
Signature parse_signature(std::string_view kernel, std::string_view declaration);
// The first dimension of sig whose condition names a param has_param does not know (and its field),
// or {nullptr, nullptr}: a registration's or a descriptor's check before any launch.
template <class HasParam> std::pair<const Field*, const DimExpr*> dim_on_unknown_param(const Signature& sig, HasParam&& has_param) {
  for (const auto& f : sig.fields)
    for (const auto& d : f.dims)
      if (!d.when_param.empty() && !has_param(d.when_param)) return {&f, &d};
  return {nullptr, nullptr};
}

}  // namespace jitk_py
