// Naming a request by its inputs instead of its rendered text, and remembering the key it resolved to.
#include "runtime/request_key.hpp"

#include <clocale>
#include <locale>
#include <string_view>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "jit/kernel_catalog.hpp"
#include "support/build_identity.hpp"

namespace jit::detail {
namespace {

constexpr std::string_view kMemoHeader = "jitk-request-key 1\n";
constexpr std::size_t kMaxMemoBytes = 4096;
std::atomic<std::uint64_t> g_hits{0};

std::string ctype_locale() {
  const char* name = std::setlocale(LC_CTYPE, nullptr);
  return name ? name : "";
}

}  // namespace

std::string request_key(const SourceUnit& described, const UnitTexts& texts, Backend backend, const Compiler& compiler,
                        const std::string& external_headers, bool mapped) {
  const std::string& build = library_build_id();
  if (build.empty() || mapped || !is_shipped_implementation(described.kernel, described.implementation)) return "";
  KeyBuilder k;
  k.add("request key", "1")
      .add("format", std::to_string(kCacheFormatVersion))
      .add("jitk build", build)
      .add("kernel", described.kernel)
      .add("implementation", described.implementation)
      .add("implementation version", std::to_string(described.implementation_version))
      .add("params", described.params_text)
      .add("backend", backend_name(backend))
      .add("compiler", compiler.id())
      .add("arch", compiler.arch())
      .add("target", compiler.target_fingerprint())
      // The prelude is rendered with the C and C++ locales of the process (toupper, number formats).
      .add("ctype locale", ctype_locale())
      .add("stream locale", std::locale().name());
  for (const auto& o : compiler.options()) k.add("option", o);
  k.add("source " + texts.text.name, texts.text.text);
  for (const auto& h : texts.headers) k.add("header " + h.name, h.text);
  k.add("external headers", external_headers);
  return k.finish().hex();
}

std::optional<std::string> remembered_key(const MemoStore& memos, const std::string& request_key) {
  auto sealed = memos.read(request_key, kMaxMemoBytes);
  if (!sealed) return std::nullopt;
  auto text = unseal_memo(*sealed);
  if (!text) return std::nullopt;
  // Exactly: the header, "request <request_key>", "key <32 hex>".
  const std::string want = std::string(kMemoHeader) + "request " + request_key + "\nkey ";
  if (text->size() != want.size() + 33 || text->substr(0, want.size()) != want || text->back() != '\n') return std::nullopt;
  std::string key(text->substr(want.size(), 32));
  if (!is_cache_key(key)) return std::nullopt;
  return key;
}

void remember_key(const MemoStore& memos, const std::string& request_key, const std::string& key) {
  if (request_key.empty() || !is_cache_key(key)) return;
  memos.write(request_key, seal_memo(std::string(kMemoHeader) + "request " + request_key + "\nkey " + key + "\n"));
}

std::uint64_t remembered_key_hits() { return g_hits.load(std::memory_order_relaxed); }
void count_remembered_key_hit() { g_hits.fetch_add(1, std::memory_order_relaxed); }

}  // namespace jit::detail
