// XXH3-128 keys and checksums (xxHash).
#include "support/hashing.hpp"

// XXH_INLINE_ALL compiles xxHash into this file with internal linkage: libjitk imports no XXH*
// symbol, so a library that exports its own (another xxHash version, bundled by a framework that
// loads its libraries with RTLD_GLOBAL) cannot be bound in its place -- a state made by one version
// and updated or freed by another would corrupt the heap.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>
#include <new>

namespace jit::detail {
namespace {
std::string to_hex(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}
}  // namespace

std::string CacheKey::hex() const { return to_hex(XXH128_hash_t{low, high}); }

KeyBuilder::KeyBuilder() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
KeyBuilder::~KeyBuilder() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

KeyBuilder& KeyBuilder::add(std::string_view field, std::string_view value) {
  auto* s = static_cast<XXH3_state_t*>(state_);
  for (std::string_view part : {field, value}) {
    std::uint64_t n = part.size();
    XXH3_128bits_update(s, &n, sizeof n);
    XXH3_128bits_update(s, part.data(), part.size());
  }
  return *this;
}

CacheKey KeyBuilder::finish() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return {h.high64, h.low64};
}

std::string checksum_hex(const void* data, std::size_t size) { return to_hex(XXH3_128bits(data, size)); }

ChecksumStream::ChecksumStream() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
ChecksumStream::~ChecksumStream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void ChecksumStream::add(const void* data, std::size_t size) { XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size); }
std::string ChecksumStream::hex() const { return to_hex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace jit::detail
