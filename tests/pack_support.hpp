// Helpers for tests of jitk packs: editing a pack as another jitk would have written it.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "support/hashing.hpp"
#include "test_support.hpp"

namespace jitk_test {

// A pack's table of contents, edited, and the pack put back together with valid checksums: what
// another jitk (or a build with another compiler) would have written.
inline void rewrite_pack(const fs::path& pack, const std::function<void(nlohmann::json&)>& edit) {
  std::string in = read_file(pack);
  std::uint64_t json_size;
  std::memcpy(&json_size, in.data() + 16, sizeof json_size);
  auto doc = nlohmann::json::parse(in.substr(24, json_size));
  edit(doc);
  const std::string json = doc.dump();
  std::string out = in.substr(0, 16);
  const std::uint64_t size = json.size();
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out += json;
  out += in.substr(24 + json_size, in.size() - 32 - 24 - json_size);
  out += jit::detail::checksum_hex(out.data(), out.size());
  write_file(pack, out);
}

}  // namespace jitk_test
