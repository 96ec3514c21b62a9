// The backends this build has, whether each can run on this machine, and the default target.
#include <future>
#include <mutex>

#include "runtime/backend_driver.hpp"

namespace jit::detail {
namespace {

struct Registry {
  std::vector<BackendState> states;
  Registry() {
    // Probing CUDA (dlopen, cuInit) and starting the CPU compiler are independent: do them at once.
    static std::unique_ptr<BackendDriver> cuda;
    auto cuda_probe = std::async(std::launch::async, [] {
      auto driver = make_cuda_driver();
      std::string reason = driver->unavailable_reason();
      cuda = std::move(driver);
      return reason;
    });
#ifdef JITK_WITH_CPU
    static std::unique_ptr<BackendDriver> cpu = make_cpu_driver();
    states.push_back({Backend::Cpu, cpu->unavailable_reason(), cpu.get()});
#else
    states.push_back({Backend::Cpu, "this build has no CPU backend (configured without LLVM/Clang 16)", nullptr});
#endif
    std::string cuda_reason = cuda_probe.get();
    states.push_back({Backend::Cuda, cuda_reason, cuda.get()});
    states.push_back({Backend::Hip, "not in this version of jitk yet", nullptr});
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

std::vector<BackendState> backend_states() { return registry().states; }

const BackendDriver& driver_for(const Target& target) {
  for (const auto& s : registry().states) {
    if (s.backend != target.backend) continue;
    if (s.driver && s.reason.empty()) return *s.driver;
    throw Error(ErrorCode::BackendUnavailable,
                "target " + target.to_string() + " is unavailable: " + s.reason + " (run `jitk info`)");
  }
  throw Error(ErrorCode::BackendUnavailable, "unknown backend in target " + target.to_string());
}

}  // namespace jit::detail

namespace jit {

const Target& default_target() {
  static const Target target = [] {
    for (const auto& s : detail::backend_states())
      if (s.backend != Backend::Cpu && s.reason.empty()) return Target{s.backend, "", 0};
    return Target::cpu();
  }();
  return target;
}

}  // namespace jit
