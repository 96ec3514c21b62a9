// Parsing a kernel's Python signature declaration (the grammar is in signatures.cpp's header comment).
#include "signature.hpp"

#include <cctype>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace jitk_py {

std::string_view field_type_name(FieldType t) {
  switch (t) {
    case FieldType::I64: return "int64";
    case FieldType::F64: return "double";
    case FieldType::Bool: return "bool";
    case FieldType::Size: return "size_t";
    case FieldType::ConstPtr: return "ConstPtr";
    case FieldType::MutPtr: return "MutPtr";
    case FieldType::I32Ptr: return "const int32*";
    case FieldType::I64Ptr: return "const int64*";
    case FieldType::F32Ptr: return "float*";
    case FieldType::VoidPtr: return "void*";
    case FieldType::Operands: return "Operands";
    case FieldType::Other: return "another type";
  }
  return "?";
}

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

bool is_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool is_number(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

Signature parse_signature(std::string_view kernel, std::string_view declaration) {
  Signature sig;
  sig.kernel = std::string(kernel);
  sig.declaration = std::string(declaration);
  const auto fail = [&](const std::string& part, const std::string& why) {
    throw std::invalid_argument(sig.kernel + ": cannot read '" + part + "' of its Python signature: " + why);
  };
  const auto parse_product = [&](const std::string& text, const std::string& part) {
    DimExpr d;
    d.text = text;
    if (!text.empty() && text[0] == '*') {
      if (!is_name(text.substr(1))) fail(part, "'*' takes one name");
      d.flat = true;
      d.names.push_back(text.substr(1));
      return d;
    }
    auto plus = split(text, '+');
    if (plus.size() > 2) fail(part, "one '+' at most in a dimension");
    if (plus.size() == 2) {
      if (!is_number(plus[1]) || plus[1].size() > 15) fail(part, "what follows '+' must be a number (15 digits at most)");
      d.offset = std::stoll(plus[1]);
    }
    auto slash = split(plus[0], '/');
    if (slash.size() > 2) fail(part, "one '/' at most in a dimension");
    if (slash.size() == 2) {
      if (!is_number(slash[1]) || slash[1].size() > 15 || std::stoll(slash[1]) < 1)
        fail(part, "what follows '/' must be a number >= 1 (15 digits at most)");
      d.divisor = std::stoll(slash[1]);
    }
    for (const auto& factor : split(slash[0], '*')) {
      if (is_number(factor)) {
        if (factor.size() > 15) fail(part, "a factor has 15 digits at most");
        d.coef *= std::stoll(factor);
        if (d.coef > (std::int64_t{1} << 50)) fail(part, "the factors' product is too large");
      } else if (is_name(factor)) {
        d.names.push_back(factor);
      } else {
        fail(part, "'" + factor + "' is neither a name nor a number");
      }
    }
    return d;
  };
  // "<dim> if <param>!=<value> else <dim>" (or ==): a dimension that depends on a param
  const auto parse_dim = [&](const std::string& text, const std::string& part) {
    const auto at_if = text.find(" if ");
    if (at_if == std::string::npos) {
      if (text.find(" else ") != std::string::npos) fail(part, "'else' without 'if'");
      return parse_product(text, part);
    }
    if (text.find(" if ", at_if + 1) != std::string::npos) fail(part, "one condition a dimension");
    const auto at_else = text.find(" else ", at_if);
    if (at_else == std::string::npos) fail(part, "'<dim> if <param>!=<value>' needs 'else <dim>'");
    if (text.find(" else ", at_else + 1) != std::string::npos) fail(part, "one 'else' a dimension");
    DimExpr d = parse_product(trim(text.substr(0, at_if)), part);
    DimExpr other = parse_product(trim(text.substr(at_else + 6)), part);
    if (d.flat || other.flat) fail(part, "a '*n' dimension has no condition");
    const std::string cond = trim(text.substr(at_if + 4, at_else - at_if - 4));
    const auto ne = cond.find("!="), eq = cond.find("==");
    if ((ne == std::string::npos) == (eq == std::string::npos)) fail(part, "the condition is <param>!=<value> or <param>==<value>");
    const auto op = ne != std::string::npos ? ne : eq;
    d.when_param = trim(cond.substr(0, op));
    d.when_value = trim(cond.substr(op + 2));
    d.when_equal = eq != std::string::npos;
    if (!is_name(d.when_param)) fail(part, "the condition's param '" + d.when_param + "' is not a name");
    if (!is_name(d.when_value) && !is_number(d.when_value))
      fail(part, "the condition's value '" + d.when_value + "' is neither a name nor a number");
    d.text = text;
    d.otherwise.push_back(std::move(other));
    return d;
  };

  for (const auto& part : split(declaration, ';')) {
    if (part.empty()) continue;
    Field f;
    const auto colon = part.find(':');
    f.name = trim(part.substr(0, colon));
    if (!is_name(f.name)) fail(part, "the field's name");
    std::string form = colon == std::string::npos ? "" : trim(part.substr(colon + 1));
    const auto call_of = [&](const std::string& head) -> std::optional<std::string> {
      if (form.rfind(head + "(", 0) != 0 || form.back() != ')') return std::nullopt;
      std::string inner = form.substr(head.size() + 1, form.size() - head.size() - 2);
      if (!is_name(inner)) fail(part, head + "(...) takes a field's name");
      return inner;
    };
    const auto number_default = [&](const std::string& head) {
      if (form == head) return;
      if (form.rfind(head + "=", 0) != 0) fail(part, "expected " + head + " or " + head + "=<default>");
      const std::string v = form.substr(head.size() + 1);
      char* end = nullptr;
      f.default_value = std::strtod(v.c_str(), &end);
      if (v.empty() || *end) fail(part, "the default '" + v + "' is not a number");
      f.has_default = true;
    };
    if (form.empty()) {
      f.source = Field::Source::Dim, f.expected = FieldType::I64;
    } else if (form.rfind("int", 0) == 0) {
      f.source = Field::Source::Int, f.expected = FieldType::I64;
      number_default("int");
    } else if (form.rfind("float", 0) == 0) {
      f.source = Field::Source::Float, f.expected = FieldType::F64;
      number_default("float");
    } else if (form.rfind("in", 0) == 0 || form.rfind("out", 0) == 0) {
      f.source = Field::Source::Array;
      f.output = form[0] == 'o';
      std::string rest = form.substr(f.output ? 3 : 2);
      if (!rest.empty() && rest[0] == '?') f.optional = true, rest = rest.substr(1);
      const auto open = rest.find('['), close = rest.find(']');
      if (open != 0 || close == std::string::npos) fail(part, "an array's shape is [dims]");
      for (const auto& d : split(rest.substr(1, close - 1), ',')) f.dims.push_back(parse_dim(d, part));
      for (const auto& d : f.dims)
        if (d.flat && f.dims.size() != 1) fail(part, "a '*n' dimension stands alone");
      rest = rest.substr(close + 1);
      if (!rest.empty() && rest[0] == '@') {
        const auto slash = rest.find('/');
        f.layout_param = rest.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
        if (!is_name(f.layout_param) || f.dims.size() != 2) fail(part, "@<param> names the layout param of a 2-D array");
        rest = slash == std::string::npos ? "" : rest.substr(slash);
      }
      if (rest.empty()) f.elem = ElemRule::Kernel;
      else if (rest == "/acc") f.elem = ElemRule::Scalar;
      else if (rest == "/i32") f.elem = ElemRule::I32;
      else if (rest == "/i64") f.elem = ElemRule::I64;
      else if (rest == "/f32") f.elem = ElemRule::F32;
      else fail(part, "the element type is /acc, /i32, /i64 or /f32 (none: the kernel's dtype)");
      switch (f.elem) {
        case ElemRule::I32: f.expected = FieldType::I32Ptr; break;
        case ElemRule::I64: f.expected = FieldType::I64Ptr; break;
        case ElemRule::F32: f.expected = FieldType::F32Ptr; break;
        default: f.expected = f.output ? FieldType::MutPtr : FieldType::ConstPtr;
      }
    } else if (auto shaped_like = call_of("chain")) {
      f.source = Field::Source::Chain, f.expected = FieldType::Operands, f.other = *shaped_like;
    } else if (form == "buf?") {
      f.source = Field::Source::Buffer, f.expected = FieldType::VoidPtr, f.optional = true, f.output = true;
    } else if (auto of = call_of("host")) {
      f.source = Field::Source::HostPtr, f.expected = FieldType::I32Ptr, f.other = *of;
    } else if (auto of2 = call_of("ishost")) {
      f.source = Field::Source::IsHost, f.expected = FieldType::Bool, f.other = *of2;
    } else if (auto of3 = call_of("ld")) {
      f.source = Field::Source::Ld, f.expected = FieldType::I64, f.other = *of3;
    } else if (auto of4 = call_of("nbytes")) {
      f.source = Field::Source::Nbytes, f.expected = FieldType::Size, f.other = *of4;
    } else {
      fail(part, "unknown form '" + form + "'");
    }
    for (const auto& g : sig.fields)
      if (g.name == f.name) fail(part, "the name is used twice");
    sig.fields.push_back(std::move(f));
  }
  if (sig.fields.size() > 32) fail(sig.kernel, "more than 32 fields");  // the binding's fixed tables
  std::size_t names = 0;
  for (const auto& f : sig.fields) {
    names += f.source == Field::Source::Dim || f.source == Field::Source::Int ? 1 : 0;
    for (const auto& d : f.dims) names += d.names.size() + (d.otherwise.empty() ? 0 : d.otherwise[0].names.size());
  }
  if (names > 64) fail(sig.kernel, "more than 64 dimension names");
  for (auto& f : sig.fields) {
    if (f.other.empty()) continue;
    for (std::size_t i = 0; i < sig.fields.size(); ++i)
      if (sig.fields[i].name == f.other &&
          (sig.fields[i].source == Field::Source::Array || sig.fields[i].source == Field::Source::Buffer))
        f.other_index = static_cast<int>(i);
    if (f.other_index < 0) fail(f.name, "'" + f.other + "' is not an array of this signature");
  }
  // The caller's arguments: required arrays in the declaration's order, then required numbers, then
  // those with defaults (rms_norm(x, weight, y, eps=1e-6); attention_prefill(q, k, v, o, ..., max_seqlen_q, scale)).
  for (int pass = 0; pass < 3; ++pass)
    for (std::size_t i = 0; i < sig.fields.size(); ++i) {
      const Field& f = sig.fields[i];
      const bool user = f.source == Field::Source::Int || f.source == Field::Source::Float ||
                        f.source == Field::Source::Array || f.source == Field::Source::Chain ||
                        f.source == Field::Source::Buffer;
      if (!user) continue;
      const bool defaulted = f.has_default || f.optional || f.source == Field::Source::Chain;
      const int group = defaulted ? 2 : f.source == Field::Source::Array ? 0 : 1;
      if (group == pass) {
        sig.fields[i].user_index = static_cast<int>(sig.user_order.size());
        sig.user_order.push_back(static_cast<int>(i));
      }
    }
  return sig;
}

std::string Signature::python_signature() const {
  std::ostringstream out;
  out << "(";
  for (std::size_t j = 0; j < user_order.size(); ++j) {
    const Field& f = fields[static_cast<std::size_t>(user_order[j])];
    if (j) out << ", ";
    out << f.name;
    if (f.source == Field::Source::Array) {
      out << "[";
      for (std::size_t d = 0; d < f.dims.size(); ++d) out << (d ? ", " : "") << f.dims[d].text;
      out << "]";
    }
    if (f.has_default) out << "=" << f.default_value;
    else if (f.optional) out << "=None";
    else if (f.source == Field::Source::Chain) out << "=()";
  }
  out << ")";
  return out.str();
}

}  // namespace jitk_py
