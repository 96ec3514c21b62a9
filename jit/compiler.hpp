// What every compiler in jit/ is: a pure function from a specialized source unit to artifact bytes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "jit/specializer.hpp"

namespace jit::detail {

struct CompiledArtifact {
  std::vector<char> bytes;  // object code (CPU), cubin/PTX (CUDA), code object (HIP)
  std::string log;
  double compile_ms = 0;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Names the compiler and its version: part of every cache key.
  virtual std::string id() const = 0;
  // The architecture it generates code for (host CPU name, sm_90, gfx90a).
  virtual std::string arch() const = 0;
  // Everything about the target that changes the generated code beyond arch (CPU features).
  virtual std::string target_fingerprint() const = 0;
  virtual std::vector<std::string> options() const = 0;
  // A hash of the content of every header outside the unit that its text can include (toolkit
  // headers): part of the key, so a toolkit upgrade never loads a stale binary. "" when none.
  virtual std::string external_headers_fingerprint(const SourceUnit& unit) const { return ""; }
  // Throws Error{CompileFailed} carrying the log and the source with line numbers.
  virtual CompiledArtifact compile(const SourceUnit& unit) const = 0;
};

// The fields of every compiler's Error{CompileFailed} about `unit`.
inline ErrorFields compile_error_fields(const SourceUnit& unit, std::string target, std::string compiler_id,
                                        std::vector<std::string> options, std::string log) {
  ErrorFields f;
  f.kernel = unit.kernel;
  f.params = unit.params_text;
  f.target = std::move(target);
  f.compiler = std::move(compiler_id);
  f.options = std::move(options);
  f.log = std::move(log);
  f.source = ErrorSource{unit.main.name, unit.text_origin, with_line_numbers(unit.main.text), unit.text_first_line};
  return f;
}

}  // namespace jit::detail
