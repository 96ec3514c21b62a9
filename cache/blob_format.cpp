// Encoding and checking blob headers.
#include "cache/blob_format.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include "cache/cache_key.hpp"
#include "support/hashing.hpp"

namespace jit::detail {
namespace {

constexpr char kMagic[8] = {'J', 'I', 'T', 'K', 'B', 'L', 'O', 'B'};
constexpr std::size_t kHex = 32;
constexpr std::size_t kFormatAt = 8, kHeaderSizeAt = 12, kPayloadSizeAt = 16, kKeyAt = 24, kPayloadSumAt = kBlobPayloadChecksumAt,
                      kHeaderSumAt = 88, kFieldCountAt = 120;
constexpr std::size_t kFieldCount = 8;
// The largest kernel or params text a header may carry (the fields share kMaxBlobHeader).
constexpr std::size_t kMaxField = 32 * 1024;

template <class V> void put(std::string& out, std::size_t at, V v) { std::memcpy(out.data() + at, &v, sizeof v); }
template <class V> V get(std::string_view in, std::size_t at) {
  V v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

// The meta's fields in header order: one listing, written and read the same way.
std::array<std::string, kFieldCount> fields_of(const ArtifactMeta& m) {
  char ms[64];
  auto r = std::to_chars(ms, ms + sizeof ms, m.compile_ms);
  return {m.kernel, m.params, m.backend, m.arch, m.compiler, m.implementation,
          std::to_string(m.implementation_version), std::string(ms, r.ptr)};
}

bool meta_from(const std::array<std::string, kFieldCount>& f, ArtifactMeta* m, std::string* problem) {
  m->kernel = f[0];
  m->params = f[1];
  m->backend = f[2];
  m->arch = f[3];
  m->compiler = f[4];
  m->implementation = f[5];
  const std::string& v = f[6];
  auto rv = std::from_chars(v.data(), v.data() + v.size(), m->implementation_version);
  if (v.empty() || rv.ec != std::errc() || rv.ptr != v.data() + v.size() || m->implementation_version < 0) {
    *problem = "header: implementation version is not a number";
    return false;
  }
  const std::string& c = f[7];
  auto rc = std::from_chars(c.data(), c.data() + c.size(), m->compile_ms);
  if (c.empty() || rc.ec != std::errc() || rc.ptr != c.data() + c.size() || !std::isfinite(m->compile_ms) || m->compile_ms < 0) {
    *problem = "header: compile time is not a number";
    return false;
  }
  return true;
}

bool is_hex(std::string_view s) {
  if (s.size() != kHex) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string blob_header_checksum(std::string_view header) {
  std::string without(header.substr(0, kHeaderSumAt));
  without.append(header.substr(kHeaderSumAt + kHex));
  return checksum_hex(without.data(), without.size());
}

bool is_cache_key(std::string_view s) { return is_hex(s); }

std::string encode_blob_header(const std::string& key, const ArtifactMeta& meta, std::string_view payload) {
  std::string fields;
  for (const auto& f : fields_of(meta)) {
    std::uint32_t n = static_cast<std::uint32_t>(f.size());
    fields.append(reinterpret_cast<const char*>(&n), sizeof n);
    fields += f;
  }
  std::string h(kBlobFixedHeader, '\0');
  std::memcpy(h.data(), kMagic, sizeof kMagic);
  put<std::uint32_t>(h, kFormatAt, static_cast<std::uint32_t>(kBlobFormatVersion));
  put<std::uint32_t>(h, kHeaderSizeAt, static_cast<std::uint32_t>(kBlobFixedHeader + fields.size()));
  put<std::uint64_t>(h, kPayloadSizeAt, payload.size());
  std::memcpy(h.data() + kKeyAt, key.data(), std::min(key.size(), kHex));
  std::string sum = checksum_hex(payload.data(), payload.size());
  std::memcpy(h.data() + kPayloadSumAt, sum.data(), kHex);
  put<std::uint32_t>(h, kFieldCountAt, static_cast<std::uint32_t>(kFieldCount));
  h += fields;
  std::string hsum = blob_header_checksum(h);
  std::memcpy(h.data() + kHeaderSumAt, hsum.data(), kHex);
  return h;
}

HeaderStatus parse_blob_header(std::string_view data, BlobHeader* out, std::string* problem) {
  auto damaged = [&](std::string why) {
    *problem = std::move(why);
    return HeaderStatus::Damaged;
  };
  if (data.size() < kFormatAt + 4 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    return damaged(data.size() < sizeof kMagic ? "truncated: shorter than its header" : "not a jitk blob (bad magic)");
  const auto format = get<std::uint32_t>(data, kFormatAt);
  if (format != static_cast<std::uint32_t>(kBlobFormatVersion)) {
    *problem = "blob format " + std::to_string(format) + ", this jitk writes " + std::to_string(kBlobFormatVersion);
    return HeaderStatus::Outdated;
  }
  if (data.size() < kBlobFixedHeader) return damaged("truncated: " + std::to_string(data.size()) + " bytes, shorter than its header");
  const std::size_t header_size = get<std::uint32_t>(data, kHeaderSizeAt);
  if (header_size < kBlobFixedHeader || header_size > kMaxBlobHeader) return damaged("header size " + std::to_string(header_size) + " out of range");
  if (header_size > data.size()) return damaged("truncated: its header runs past its end");
  const std::string_view header = data.substr(0, header_size);
  if (blob_header_checksum(header) != header.substr(kHeaderSumAt, kHex)) return damaged("header checksum mismatch (header changed on disk)");
  BlobHeader h;
  h.header_size = header_size;
  h.payload_size = get<std::uint64_t>(data, kPayloadSizeAt);
  if (h.payload_size > kMaxBlobPayload) return damaged("payload size " + std::to_string(h.payload_size) + " out of range");
  h.key = std::string(header.substr(kKeyAt, kHex));
  h.payload_checksum = std::string(header.substr(kPayloadSumAt, kHex));
  if (!is_hex(h.key) || !is_hex(h.payload_checksum)) return damaged("header: key or checksum is not hex");
  if (get<std::uint32_t>(data, kFieldCountAt) != kFieldCount) return damaged("header: unexpected field count");
  std::array<std::string, kFieldCount> fields;
  std::size_t at = kBlobFixedHeader;
  for (auto& f : fields) {
    if (header_size - at < 4) return damaged("header: a field runs past its end");
    const std::size_t n = get<std::uint32_t>(header, at);
    at += 4;
    if (n > kMaxField || n > header_size - at) return damaged("header: a field runs past its end");
    f = std::string(header.substr(at, n));
    at += n;
  }
  if (at != header_size) return damaged("header: bytes after its last field");
  if (!meta_from(fields, &h.meta, problem)) return HeaderStatus::Damaged;
  *out = std::move(h);
  return HeaderStatus::Ok;
}

std::string binding_mismatch(const BlobHeader& h, const std::string& key, const ArtifactMeta* expect) {
  if (h.key != key) return "bound to key " + h.key + ", not " + key;
  if (!expect) return "";
  const ArtifactMeta& m = h.meta;
  if (m.kernel != expect->kernel || m.params != expect->params || m.backend != expect->backend || m.arch != expect->arch ||
      m.compiler != expect->compiler || m.implementation != expect->implementation ||
      m.implementation_version != expect->implementation_version)
    return "bound to " + m.kernel + " (" + m.params + ") " + m.backend + " " + m.arch + " " + m.compiler + " " +
           m.implementation + " v" + std::to_string(m.implementation_version) + ", not " + expect->kernel + " (" +
           expect->params + ") " + expect->backend + " " + expect->arch + " " + expect->compiler + " " +
           expect->implementation + " v" + std::to_string(expect->implementation_version);
  return "";
}

std::string check_blob_binding(std::string_view bytes, const std::string& expected_key, BlobHeader* out) {
  BlobHeader h;
  std::string problem;
  switch (parse_blob_header(bytes, &h, &problem)) {
    case HeaderStatus::Ok: break;
    case HeaderStatus::Outdated: return problem;
    case HeaderStatus::Damaged: return problem;
  }
  if (h.payload_size != bytes.size() - h.header_size)
    return "size " + std::to_string(bytes.size() - h.header_size) + " bytes, header says " + std::to_string(h.payload_size);
  const std::string_view payload = bytes.substr(h.header_size);
  if (checksum_hex(payload.data(), payload.size()) != h.payload_checksum) return "checksum mismatch (contents changed)";
  if (std::string why = binding_mismatch(h, expected_key, nullptr); !why.empty()) return why;
  if (out) *out = std::move(h);
  return "";
}

}  // namespace jit::detail
