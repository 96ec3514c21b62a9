// Helpers for tests of jitk packs: editing a pack as another jitk would have written it.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cache/blob_format.hpp"
#include "support/hashing.hpp"
#include "test_support.hpp"

namespace jitk_test {

// A pack's table of contents, edited, and the pack put back together with valid checksums: what
// another jitk (or a build with another compiler) would have written. Pack version 2: each payload
// is a whole bound blob. rebind: each payload's blob header is rewritten to name what its edited
// entry names, as that jitk would have made it (sizes and checksums follow); without it the
// payloads stay as they were (an edit of what the header binds is then refused as unbound).
// edit_payloads also sees the payloads, in entry order (a test that moves code between entries).
inline void rewrite_pack(const fs::path& pack, const std::function<void(nlohmann::json&, std::vector<std::string>&)>& edit_payloads,
                         bool rebind = false) {
  std::string in = read_file(pack);
  std::uint64_t json_size;
  std::memcpy(&json_size, in.data() + 16, sizeof json_size);
  auto doc = nlohmann::json::parse(in.substr(24, json_size));
  std::vector<std::string> payloads;
  std::size_t at = 24 + json_size;
  for (const auto& r : doc["artifacts"]) {
    payloads.push_back(in.substr(at, r["size"].get<std::size_t>()));
    at += payloads.back().size();
  }
  edit_payloads(doc, payloads);
  if (rebind)
    for (std::size_t i = 0; i < payloads.size(); ++i) {
      auto& r = doc["artifacts"][i];
      jit::detail::BlobHeader h;
      REQUIRE(jit::detail::check_blob_binding(payloads[i], r["key"].get<std::string>(), &h).empty());
      const jit::detail::ArtifactMeta meta{r["kernel"], r["params"], r["backend"], r["arch"], r["compiler"],
                                           r["compile_ms"], r["implementation"], r["implementation_version"]};
      const std::string code = payloads[i].substr(h.header_size);
      payloads[i] = jit::detail::encode_blob_header(r["key"], meta, code) + code;
      r["size"] = payloads[i].size();
      r["checksum"] = jit::detail::checksum_hex(payloads[i].data(), payloads[i].size());
    }
  const std::string json = doc.dump();
  std::string out = in.substr(0, 16);
  const std::uint64_t size = json.size();
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out += json;
  for (const auto& p : payloads) out += p;
  out += in.substr(at, in.size() - 32 - at);  // bytes after the last payload, if a test put any there
  out += jit::detail::checksum_hex(out.data(), out.size());
  write_file(pack, out);
}
inline void rewrite_pack(const fs::path& pack, const std::function<void(nlohmann::json&)>& edit, bool rebind = false) {
  rewrite_pack(pack, [&](nlohmann::json& doc, std::vector<std::string>&) { edit(doc); }, rebind);
}

}  // namespace jitk_test
