// The HIP compiler: hipRTC (opened with dlopen) from a source unit to an AMDGPU code object for one gfx target.
#pragma once
#include <string>
#include <vector>

#include "jit/compiler.hpp"

namespace jit::detail {

struct HiprtcLibrary;
class DynamicLibrary;

class HiprtcCompiler final : public Compiler {
 public:
  // arch like "gfx90a" (a target ID such as "gfx90a:xnack-" too). Throws Error{BackendUnavailable}
  // when hipRTC cannot be opened or its comgr does not know the target (comgr would abort the
  // process), Error{InvalidParams} when arch is not of the form gfxNNN.
  explicit HiprtcCompiler(std::string arch);
  std::string id() const override { return id_; }
  std::string arch() const override { return arch_; }
  std::string target_fingerprint() const override { return "amdgcn-amd-amdhsa " + arch_; }
  std::vector<std::string> options() const override { return options_; }
  // The pre-included HIP headers live inside libamdhip64 itself: its version (in id()) covers them.
  CompiledArtifact compile(const SourceUnit& unit) const override;

  // "" when hipRTC can be opened, else why not.
  static std::string unavailable_reason();
  // The HIP runtime library hipRTC was found in (its hip* entry points serve the HIP driver too).
  static void* library_handle();
  static const DynamicLibrary& runtime_library();
  // The gfx targets comgr knows ("gfx90a", ...); empty when comgr cannot be opened.
  static const std::vector<std::string>& known_targets();

 private:
  const HiprtcLibrary* lib_;
  std::string arch_, id_;
  std::vector<std::string> options_;
};

}  // namespace jit::detail
