// The CPU compiler: clang's frontend, in-process, from a source unit to object code for this host.
#pragma once
#include "jit/compiler.hpp"

namespace jit::detail {

// Registers LLVM's native target, once per process: compiling and starting ORC need it.
void initialize_native_target();

class OrcCompiler final : public Compiler {
 public:
  OrcCompiler();
  std::string id() const override { return id_; }
  std::string arch() const override { return cpu_; }
  std::string target_fingerprint() const override { return fingerprint_; }
  std::vector<std::string> options() const override { return options_; }
  CompiledArtifact compile(const SourceUnit& unit) const override;
  // The cc1 arguments for this host's CPU and jitk's language/optimization flags, without the
  // include folder, output kind and input file. Benchmarks reuse them to call clang directly.
  std::vector<std::string> cc1_args() const;

 private:
  std::string id_, triple_, cpu_, fingerprint_;
  std::vector<std::string> features_;  // "+avx2", "-avx512f", ...
  std::vector<std::string> options_;   // the language and optimization flags (part of the key)
};

}  // namespace jit::detail
