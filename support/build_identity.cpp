// Reads the NT_GNU_BUILD_ID note of the loaded object that holds this function.
#include "support/build_identity.hpp"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace jit::detail {
namespace {

struct Search {
  std::uintptr_t address = 0;  // of code in the object sought
  std::string id;
};

std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// The build id in one PT_NOTE segment of `size` bytes at p, or "".
std::string build_id_in(const unsigned char* p, std::size_t size) {
  std::size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) note;
    std::memcpy(&note, p + at, sizeof note);
    const std::size_t name_at = at + sizeof note, desc_at = name_at + align4(note.n_namesz);
    if (desc_at > size || note.n_descsz > size - desc_at) return "";
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(p + name_at, "GNU", 4) == 0 && note.n_descsz > 0) {
      std::string hex;
      char byte[3];
      for (std::size_t i = 0; i < note.n_descsz; ++i) {
        std::snprintf(byte, sizeof byte, "%02x", p[desc_at + i]);
        hex += byte;
      }
      return hex;
    }
    at = desc_at + align4(note.n_descsz);
  }
  return "";
}

int visit(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search->address >= start && search->address - start < ph.p_memsz;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    search->id = build_id_in(reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    if (!search->id.empty()) break;
  }
  return 1;  // found the object: stop
}

}  // namespace

const std::string& library_build_id() {
  static const std::string id = [] {
    Search search;
    search.address = reinterpret_cast<std::uintptr_t>(&library_build_id);
    dl_iterate_phdr(visit, &search);
    return search.id;
  }();
  return id;
}

}  // namespace jit::detail
