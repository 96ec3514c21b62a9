// The backends this build has, whether each can run on this machine, and the default target.
#include <future>
#include <mutex>

#include "runtime/backend_driver.hpp"

namespace jit::detail {
namespace {

// Each backend is probed at its first use, on the caller's thread: a GPU program never starts the
// CPU compiler, and a first get spawns no thread (0.1-0.2 ms each on the H100 host).
struct Slot {
  std::once_flag once;
  BackendState state;
  std::unique_ptr<BackendDriver> driver;
};

Slot& slot(Backend b) {
  static Slot slots[3];
  return slots[static_cast<int>(b)];
}

const BackendState& probe(Backend b) {
  Slot& s = slot(b);
  std::call_once(s.once, [&] {
    s.state.backend = b;
    switch (b) {
      case Backend::Cpu:
#ifdef JITK_WITH_CPU
        s.driver = make_cpu_driver();
        s.state.reason = s.driver->unavailable_reason();
#else
        s.state.reason = "this build has no CPU backend (configured without LLVM/Clang 16)";
#endif
        break;
      case Backend::Cuda:
        s.driver = make_cuda_driver();
        s.state.reason = s.driver->unavailable_reason();
        break;
      case Backend::Hip:
        s.driver = make_hip_driver();
        s.state.reason = s.driver->unavailable_reason();
        break;
    }
    s.state.driver = s.driver.get();
  });
  return s.state;
}

}  // namespace

std::vector<BackendState> backend_states() {
  // Every backend (`jitk info`): probe CUDA (cuInit can take 100 ms) while the CPU starts.
  auto cuda = std::async(std::launch::async, [] { probe(Backend::Cuda); });
  probe(Backend::Cpu);
  cuda.get();
  return {probe(Backend::Cpu), probe(Backend::Cuda), probe(Backend::Hip)};
}

const BackendDriver& driver_for(const Target& target) {
  if (target.backend != Backend::Cpu && target.backend != Backend::Cuda && target.backend != Backend::Hip)
    throw Error(ErrorCode::BackendUnavailable, "unknown backend in target " + target.to_string());
  const BackendState& s = probe(target.backend);
  if (s.driver && s.reason.empty()) return *s.driver;
  throw Error(ErrorCode::BackendUnavailable,
              "target " + target.to_string() + " is unavailable: " + s.reason + " (run `jitk info`)");
}

const BackendDriver& compiling_driver_for(const Target& target) {
  if (target.backend == Backend::Cpu || target.arch.empty()) return driver_for(target);
  const BackendState& s = probe(target.backend);
  if (s.driver && s.reason.empty()) return *s.driver;
  if (s.driver && s.driver->compile_unavailable_reason().empty()) return *s.driver;
  return driver_for(target);  // throws, saying why
}

}  // namespace jit::detail

namespace jit {

const Target& default_target() {
  static const Target target = [] {
    if (detail::probe(Backend::Cuda).reason.empty()) return Target{Backend::Cuda, "", 0};
    detail::probe(Backend::Cpu);  // what will run: start it now (its LLVM ORC starts on its own thread)
    return Target::cpu();
  }();
  return target;
}

}  // namespace jit
