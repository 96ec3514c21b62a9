// Opening vendor libraries with dlopen and resolving their symbols (see dynamic_library.hpp).
#include "support/dynamic_library.hpp"

#include <dirent.h>
#include <link.h>
#include <sys/stat.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "support/regular_file.hpp"

namespace jit::detail {

DynamicLibrary DynamicLibrary::open_first(const std::vector<std::string>& candidates, int flags) {
  DynamicLibrary lib;
  for (const auto& name : candidates) {
    if ((lib.handle_ = ::dlopen(name.c_str(), flags))) {
      lib.path_ = name;
      lib.error_.clear();
      return lib;
    }
    if (const char* e = ::dlerror(); e && lib.error_.empty()) lib.error_ = e;
  }
  if (lib.error_.empty()) lib.error_ = candidates.empty() ? "no library named" : "unknown error";
  return lib;
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), close_(other.close_), path_(std::move(other.path_)),
      error_(std::move(other.error_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ && close_) ::dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    close_ = other.close_;
    path_ = std::move(other.path_);
    error_ = std::move(other.error_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ && close_) ::dlclose(handle_);
}

std::string DynamicLibrary::loaded_file() const {
  struct link_map* map = nullptr;
  if (!handle_ || ::dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || map->l_name[0] != '/') return "";
  return map->l_name;
}

bool library_loaded(const std::string& prefix) {
  struct Search {
    const std::string* prefix;
    bool found = false;
  } search{&prefix};
  ::dl_iterate_phdr(
      [](struct dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
        const auto slash = name.rfind('/');
        const std::string_view base = slash == std::string_view::npos ? name : name.substr(slash + 1);
        s->found = base.substr(0, s->prefix->size()) == *s->prefix;
        return s->found ? 1 : 0;
      },
      &search);
  return search.found;
}

std::string library_search_stamp(const std::vector<std::string>& extra_folders) {
  std::string out;
  auto add = [&out](const std::string& path) {
    struct stat st{};
    out += path + (::stat(path.c_str(), &st) == 0 ? " " + stat_identity(st) : std::string(" absent")) + "\n";
  };
  // The folders this library's dlopen searches (LD_LIBRARY_PATH as the loader read it at the
  // process's start, RUNPATH, the system's), in order.
  Dl_info self{};
  void* handle = nullptr;
  if (::dladdr(reinterpret_cast<void*>(&library_search_stamp), &self) && self.dli_fname)
    handle = ::dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  Dl_serinfo size{};
  if (!handle || ::dlinfo(handle, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof(Dl_serinfo)) {
    if (handle) ::dlclose(handle);
    return "";  // the search is not known: no stamp (callers then always open the library)
  }
  std::vector<std::max_align_t> storage((size.dls_size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
  auto* info = reinterpret_cast<Dl_serinfo*>(storage.data());
  *info = size;
  const bool listed = ::dlinfo(handle, RTLD_DI_SERINFOSIZE, info) == 0 && ::dlinfo(handle, RTLD_DI_SERINFO, info) == 0;
  ::dlclose(handle);  // the NOLOAD reference only
  if (!listed) return "";
  for (unsigned i = 0; i < info->dls_cnt; ++i) {
    const std::string folder = info->dls_serpath[i].dls_name ? info->dls_serpath[i].dls_name : "";
    add(folder);
    // glibc 2.33+ searches <folder>/glibc-hwcaps/<level>/ first: that folder and each level's.
    const std::string hwcaps = folder + "/glibc-hwcaps";
    add(hwcaps);
    if (DIR* d = ::opendir(hwcaps.c_str())) {
      int listed_levels = 0;
      while (const dirent* e = ::readdir(d))
        if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != ".." && ++listed_levels <= 16)
          add(hwcaps + "/" + e->d_name);
      ::closedir(d);
    }
  }
  add("/etc/ld.so.cache");
  for (const auto& folder : extra_folders) add(folder);
  return out;
}

std::string SymbolTable::resolve(const DynamicLibrary& lib) const {
  std::string missing;
  for (const Entry& e : entries_) {
    void* address = lib.symbol(e.name);
    e.store(e.slot, address);
    if (!address && e.required) missing += (missing.empty() ? "" : ", ") + std::string(e.name);
  }
  return missing;
}

}  // namespace jit::detail
