// jit::Error: the one exception type the library throws: a kind, a message a person can act on, and
// fields where they apply (the compiler's log and options, the numbered source, required/limit).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

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
// What kind of failure an Error is: the same enumeration under the name the documentation uses.
using ErrorKind = ErrorCode;

const char* to_string(ErrorCode code);

// The specialized source unit a compiler was given, as a compile error shows it.
struct ErrorSource {
  std::string file;      // the name the compiler saw it under, e.g. "rms_norm.cpp"
  std::string origin;    // where its kernel text came from: "embedded", "registered" or a $JITK_KERNEL_DIR path
  std::string numbered;  // the whole unit (jitk's prelude, then the kernel text), each line as "  12 | text"
  int first_text_line = 1;  // the unit's line where the kernel text's line 1 is (after the prelude)
  // The line of the author's file that the unit's line `unit_line` (as a compiler log names it)
  // is; 0 for a line of the prelude.
  int text_line(int unit_line) const { return unit_line >= first_text_line ? unit_line - first_text_line + 1 : 0; }
};

// A resource a kernel needs more of than its target gives (e.g. shared memory a block).
struct ResourceLimit {
  std::string resource;       // what is counted, e.g. "shared memory bytes a block"
  std::int64_t required = 0;  // what the kernel needs
  std::int64_t limit = 0;     // the most the target (or the implementation's plan) allows
};

// What an Error carries beyond its kind and message; a field is empty where it does not apply or is unknown.
struct ErrorFields {
  std::string kernel;                       // the kernel's name
  std::string params;                       // its params, canonical: "dtype=f32,hidden=4096"
  std::string target;                       // what it was compiled or loaded for: "cuda:sm_90", "cpu"
  std::string compiler;                     // the compiler and its version: "nvrtc 13.0"
  std::string log;                          // the compiler's log (compile errors)
  std::vector<std::string> options;         // the options the compiler was given (compile errors)
  std::optional<ErrorSource> source;        // the numbered source (compile errors)
  std::optional<ResourceLimit> resource;    // required and limit (refusals for lack of a resource)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode kind, const std::string& message);
  Error(ErrorCode kind, const std::string& message, ErrorFields fields);

  ErrorCode kind() const noexcept { return kind_; }
  ErrorCode code() const noexcept { return kind_; }  // the same as kind(); the older name
  // The message meant for a person: what failed, for which kernel and params, what to do. what()
  // is this followed by the options, the compiler log and the numbered source, where there are any.
  const std::string& message() const noexcept;
  const ErrorFields& fields() const noexcept;
  // Shorthands for fields().
  const std::string& kernel() const noexcept { return fields().kernel; }
  const std::string& params() const noexcept { return fields().params; }
  const std::string& log() const noexcept { return fields().log; }
  const std::vector<std::string>& options() const noexcept { return fields().options; }
  const std::optional<ErrorSource>& source() const noexcept { return fields().source; }
  const std::optional<ResourceLimit>& resource() const noexcept { return fields().resource; }

 private:
  struct State;
  ErrorCode kind_;
  std::shared_ptr<const State> state_;  // shared: copying an exception must not throw
};

}  // namespace jit
