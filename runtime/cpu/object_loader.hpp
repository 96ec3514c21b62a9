// Loads the object code clang makes of a CPU kernel (a relocatable ELF object for x86-64) into
// executable memory without LLVM, so that a CPU kernel found in the cache needs no LLVM in the process.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace jit::detail {

// The memory an object was loaded into; unmapped when the last kernel using it goes.
class ObjectImage {
 public:
  ObjectImage(void* base, std::size_t size) : base_(base), size_(size) {}
  ~ObjectImage();
  ObjectImage(const ObjectImage&) = delete;
  ObjectImage& operator=(const ObjectImage&) = delete;

 private:
  void* base_;
  std::size_t size_;
};

struct LoadedObject {
  std::shared_ptr<ObjectImage> image;
  void* entry = nullptr;  // the address of `entry_symbol`
  std::string refused;    // why not, when image is null: what the object has that this loader does not do
};

// Places the object's sections, resolves its undefined symbols in the process (dlsym), applies its
// relocations and returns the entry symbol's address. Bounds-checks everything it reads: bytes that
// are not such an object, or use what this loader does not handle (TLS, constructors, a relocation
// type it does not know), are refused with the reason, never a crash; the caller then loads with ORC.
LoadedObject load_relocatable_object(const std::vector<char>& bytes, const char* entry_symbol);

}  // namespace jit::detail
