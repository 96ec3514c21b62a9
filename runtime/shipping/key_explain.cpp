// jit::cache::explain_key: the parts of a cache key, printable and diffable.
#include <charconv>

#include "jit/cache.hpp"
#include "jit/error.hpp"
#include "runtime/get_kernel.hpp"
#include "support/hashing.hpp"

namespace jit::cache {

namespace {
// "dtype=f32,hidden=4096": numbers where the value is all digits; anything else is an error naming it.
ParamSet params_from_text(const std::string& text) {
  ParamSet out;
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorCode::InvalidParams, "params '" + text + "': '" + item + "' is not name=value (e.g. dtype=f32,hidden=4096)");
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    std::int64_t n = 0;
    auto r = std::from_chars(value.data(), value.data() + value.size(), n);
    if (!value.empty() && r.ec == std::errc() && r.ptr == value.data() + value.size()) out.set(name, n);
    else out.set(name, value);
    if (end == text.size()) break;
  }
  return out;
}
}  // namespace

std::vector<KeyComponent> explain_key(const std::string& kernel, const std::string& params_text, const Target& target) {
  detail::Specialization s = detail::resolve(kernel, params_from_text(params_text), target);
  std::vector<KeyComponent> out;
  for (auto& part : detail::key_parts(s)) {
    const bool text = part.name.starts_with("source ") || part.name.starts_with("header ");
    out.push_back({part.name, text ? "xxh3-128 " + detail::checksum_hex(part.value.data(), part.value.size()) + ", " +
                                         std::to_string(part.value.size()) + " bytes"
                                   : part.value});
  }
  out.push_back({"jitk version", JITK_VERSION_TEXT});
  out.push_back({"key", s.key});
  return out;
}

}  // namespace jit::cache
