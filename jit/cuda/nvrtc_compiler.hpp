// The CUDA compiler: NVRTC (opened with dlopen) from a source unit to a CUBIN for one architecture.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "support/memo_store.hpp"

namespace jit::detail {

struct NvrtcLibrary;

// What a cache key needs of NVRTC: its version and the architectures it generates code for.
struct NvrtcFacts {
  int major = 0, minor = 0;
  std::vector<int> archs;  // compute capabilities, e.g. 90
  bool operator==(const NvrtcFacts&) const = default;
};

class NvrtcCompiler final : public Compiler {
 public:
  // arch like "sm_90"; throws Error{BackendUnavailable} when NVRTC cannot be opened.
  // force_ptx emits PTX even for an arch NVRTC can target (tests of the fallback path).
  // memos: where the toolkit-header fingerprints and NVRTC's facts are remembered between processes
  // (null for nowhere: every process hashes the headers again, ~6 ms, and opens NVRTC, ~7 ms). With
  // NVRTC's facts remembered for the library the loader would open now, NVRTC is opened only by the
  // first compile (a process that finds its kernels in the cache never maps it).
  explicit NvrtcCompiler(std::string arch, bool force_ptx = false, std::shared_ptr<const MemoStore> memos = nullptr);
  std::string id() const override { return id_; }
  std::string arch() const override { return arch_; }
  std::string target_fingerprint() const override { return "nvptx64 " + code_target_; }
  std::vector<std::string> options() const override { return options_; }
  CompiledArtifact compile(const SourceUnit& unit) const override;
  std::string external_headers_fingerprint(const SourceUnit& unit) const override;
  // Whether the artifact is a CUBIN (exact arch) or PTX (NVRTC too old for the arch).
  bool emits_cubin() const { return cubin_; }

  // "" when NVRTC can be opened (or its facts are remembered in `memos` for the library the loader
  // would open), else why not.
  static std::string unavailable_reason(const MemoStore* memos = nullptr);
  // NVRTC compiles running in the process now (the PCH's choice; tests wait on it).
  static int compiles_running();

 private:
  // NVRTC itself, opened at the first compile; throws when it cannot be, or is not the NVRTC whose
  // facts this compiler was made with.
  const NvrtcLibrary& library() const;

  NvrtcFacts facts_;
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
