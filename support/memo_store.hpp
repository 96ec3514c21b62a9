// Small remembered facts a later process reads to skip work (a toolkit's header fingerprint, the CPU
// compiler's key fields, the key of a request): an interface, so what computes them never opens the cache.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace jit::detail {

// Each memo is a hint: its reader checks what it holds (a format line, a checksum, stamps of what
// it was computed from) and recomputes when anything is off; a memo is never the only proof.
class MemoStore {
 public:
  virtual ~MemoStore() = default;
  // The text of memo `name` (a plain file name); nullopt when there is none, when it is not a regular
  // file of ours, or is larger than max_bytes.
  virtual std::optional<std::string> read(const std::string& name, std::size_t max_bytes) const = 0;
  // Replaces memo `name` atomically (readers see the old text or the new); false when it cannot.
  virtual bool write(const std::string& name, std::string_view text) const = 0;
};

// The text of a memo with a checksum line after it ("xxh3 <32 hex>\n"), and back: nullopt when the
// line is missing or does not match (a torn or damaged memo).
std::string seal_memo(std::string_view text);
std::optional<std::string_view> unseal_memo(std::string_view sealed);

}  // namespace jit::detail
