// The one dlopen loader of vendor libraries (CUDA driver, NVRTC, HIP, hipRTC, comgr): an owned handle
// opened from the first of several candidate names, and a table of symbols resolved from it.
#pragma once
#include <dlfcn.h>

#include <string>
#include <vector>

namespace jit::detail {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  // The first of `candidates` that dlopen opens with `flags`; an empty library when none does,
  // error() then holding the first dlerror (the most telling: later names are fallbacks).
  static DynamicLibrary open_first(const std::vector<std::string>& candidates, int flags = RTLD_NOW | RTLD_LOCAL);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  explicit operator bool() const { return handle_ != nullptr; }
  void* handle() const { return handle_; }
  const std::string& path() const { return path_; }    // the candidate that opened
  // The file the loader opened it from, a full path ("" when the loader does not say).
  std::string loaded_file() const;
  const std::string& error() const { return error_; }  // why none opened
  void* symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

  // Never dlclose it: a vendor runtime must outlive every module loaded through it and every static
  // destructor that may still call into it at exit.
  void keep_open() { close_ = false; }

 private:
  void* handle_ = nullptr;
  bool close_ = true;
  std::string path_, error_;
};

// Whether the process has an object loaded whose file name begins with `prefix` ("libnvrtc.so"):
// a dlopen by that name would then return it without searching.
bool library_loaded(const std::string& prefix);

// Where a dlopen of a bare library name from libjitk looks and what those places hold now, as one
// text that changes when the answer could: the folders the loader searches for libjitk
// (LD_LIBRARY_PATH's, its RUNPATH, the system's), each with its glibc-hwcaps folders, /etc/ld.so.cache, and
// `extra_folders` (full-path fallbacks), each named with its stat_identity or "absent". A folder's
// identity changes when a file in it is added, removed or renamed; one rewritten in place is not
// seen here: check the opened file's own identity too.
std::string library_search_stamp(const std::vector<std::string>& extra_folders);

// Function pointers to fill from a library, each required or optional; resolve() names the
// required ones it lacks, so a backend can say "libX lacks a, b" instead of crashing later.
class SymbolTable {
 public:
  template <class F> SymbolTable& required(F& fn, const char* name) { return add(fn, name, true); }
  // Left nullptr when absent (newer entry points the caller can do without).
  template <class F> SymbolTable& optional(F& fn, const char* name) { return add(fn, name, false); }

  // Fills every entry from `lib`; returns the required names it lacks, joined by ", " ("" when none).
  std::string resolve(const DynamicLibrary& lib) const;

 private:
  struct Entry {
    void* slot;
    void (*store)(void* slot, void* address);
    const char* name;
    bool required;
  };
  template <class F> SymbolTable& add(F& fn, const char* name, bool required) {
    entries_.push_back({&fn, [](void* slot, void* address) { *static_cast<F*>(slot) = reinterpret_cast<F>(address); }, name,
                        required});
    return *this;
  }
  std::vector<Entry> entries_;
};

}  // namespace jit::detail
