// Opening vendor libraries with dlopen and resolving their symbols (see dynamic_library.hpp).
#include "support/dynamic_library.hpp"

#include <utility>

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
