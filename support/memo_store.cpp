// The checksum line every memo ends with.
#include "support/memo_store.hpp"

#include "support/hashing.hpp"

namespace jit::detail {
namespace {
constexpr std::string_view kSealPrefix = "xxh3 ";
constexpr std::size_t kSealLine = 5 + 32 + 1;  // "xxh3 " + 32 hex + "\n"
}  // namespace

std::string seal_memo(std::string_view text) {
  std::string out(text);
  out += kSealPrefix;
  out += checksum_hex(text.data(), text.size());
  out += '\n';
  return out;
}

std::optional<std::string_view> unseal_memo(std::string_view sealed) {
  if (sealed.size() < kSealLine) return std::nullopt;
  const std::string_view text = sealed.substr(0, sealed.size() - kSealLine);
  const std::string_view line = sealed.substr(text.size());
  if (!text.empty() && text.back() != '\n') return std::nullopt;  // the seal is a line of its own
  if (line.substr(0, kSealPrefix.size()) != kSealPrefix || line.back() != '\n') return std::nullopt;
  if (line.substr(kSealPrefix.size(), 32) != checksum_hex(text.data(), text.size())) return std::nullopt;
  return text;
}

}  // namespace jit::detail
