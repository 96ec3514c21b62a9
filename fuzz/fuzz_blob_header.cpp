// libFuzzer target: any bytes as a blob (header and payload). The header parser and the binding
// check must answer Ok, Outdated or Damaged with a reason, never crash, hang, allocate what a
// length field claims, or throw; a header that parses re-encodes to the same fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cache/blob_format.hpp"

namespace {

void check(std::string_view bytes);

// Mutated bytes rarely keep a valid header checksum: each input is also tried with its checksum
// made to fit, so the length fields and the field parsing behind it get hostile values too.
void check_with_fitted_checksum(std::string_view bytes) {
  using namespace jit::detail;
  if (bytes.size() < kBlobFixedHeader) return;
  std::uint32_t header_size;
  std::memcpy(&header_size, bytes.data() + 12, sizeof header_size);
  if (header_size < kBlobFixedHeader || header_size > bytes.size()) return;
  std::string fitted(bytes);
  const std::string sum = blob_header_checksum(std::string_view(fitted).substr(0, header_size));
  std::memcpy(fitted.data() + 88, sum.data(), sum.size());
  check(fitted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  check_with_fitted_checksum(bytes);
  return 0;
}

namespace {

void check(std::string_view bytes) {
  using namespace jit::detail;
  const std::size_t size = bytes.size();
  BlobHeader h;
  std::string problem;
  const HeaderStatus status = parse_blob_header(bytes, &h, &problem);
  if (status != HeaderStatus::Ok) {
    if (problem.empty()) std::abort();  // every refusal says why
    return;
  }
  if (h.header_size > size || !is_cache_key(h.key)) std::abort();
  // The binding check against the key the header names, and against another key.
  (void)check_blob_binding(bytes, h.key, nullptr);
  if (check_blob_binding(bytes, std::string(32, h.key[0] == 'a' ? 'b' : 'a'), nullptr).empty()) std::abort();
  if (!binding_mismatch(h, h.key, &h.meta).empty()) std::abort();
  // Re-encoding what was parsed gives a header that parses to the same fields.
  const std::string again = encode_blob_header(h.key, h.meta, bytes.substr(h.header_size));
  BlobHeader h2;
  if (parse_blob_header(again, &h2, &problem) != HeaderStatus::Ok) std::abort();
  if (!binding_mismatch(h2, h.key, &h.meta).empty() || h2.meta.compile_ms != h.meta.compile_ms) std::abort();
}

}  // namespace
