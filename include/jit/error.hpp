// jit::Error: the one exception type the library throws, with a code and a message a person can act on.
#pragma once
#include <stdexcept>
#include <string>

namespace jit {

enum class ErrorCode {
  InvalidParams,       // a specialization parameter is unknown, missing or out of range
  UnknownKernel,       // no kernel of that name
  InvalidArgument,     // a launch argument does not fit the kernel (dtype, size, null pointer)
  CompileFailed,       // the compiler rejected the specialized source
  BackendUnavailable,  // the target's backend is not built in or not present on this machine
  LoadFailed,          // an artifact could not be loaded into the process
  Device,              // the device or its driver failed a launch, an allocation, a copy, a sync
  CacheIo,             // the cache on disk could not be read or written
  Manifest,            // a warm manifest is malformed
  Internal,
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace jit
