// The CUDA compiler: NVRTC (opened with dlopen) from a source unit to a CUBIN for one architecture.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "jit/compiler.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

struct NvrtcLibrary;

class NvrtcCompiler final : public Compiler {
 public:
  // arch like "sm_90"; throws Error{BackendUnavailable} when NVRTC cannot be opened.
  // force_ptx emits PTX even for an arch NVRTC can target (tests of the fallback path).
  // memos: where the toolkit-header fingerprints are remembered between processes (null for
  // nowhere: every process hashes the headers again, ~6 ms).
  explicit NvrtcCompiler(std::string arch, bool force_ptx = false, std::shared_ptr<const MemoStore> memos = nullptr);
  std::string id() const override { return id_; }
  std::string arch() const override { return arch_; }
  std::string target_fingerprint() const override { return "nvptx64 " + code_target_; }
  std::vector<std::string> options() const override { return options_; }
  CompiledArtifact compile(const SourceUnit& unit) const override;
  std::string external_headers_fingerprint(const SourceUnit& unit) const override;
  // Whether the artifact is a CUBIN (exact arch) or PTX (NVRTC too old for the arch).
  bool emits_cubin() const { return cubin_; }

  // "" when NVRTC can be opened, else why not.
  static std::string unavailable_reason();
  // NVRTC compiles running in the process now (the PCH's choice; tests wait on it).
  static int compiles_running();

 private:
  const NvrtcLibrary* lib_;
  std::string arch_, code_target_, id_;
  bool cubin_ = true;
  // NVRTC's automatic PCH ($JITK_NVRTC_PCH): only for a compile that starts while no other NVRTC
  // compile of the process runs (unset or auto: the PCH is made under NVRTC's process-wide lock, so
  // compiles started together would queue behind each other's), on every compile (1), never (0).
  enum class Pch { On, Off, Alone } pch_ = Pch::Alone;
  std::vector<std::string> options_;
  std::string include_dir_;  // toolkit headers NVRTC reads ("" when it has its own)
  std::shared_ptr<const MemoStore> memos_;
  mutable std::mutex fingerprint_mutex_;
  mutable std::map<std::string, std::string> fingerprints_;  // by the hash of what the scan starts from
};

}  // namespace jit::detail
