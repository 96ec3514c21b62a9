// The backends this build has (runtime/backend_table.cpp lists them), whether each can run on this
// machine, and the default target.
#include <future>
#include <mutex>

#include "runtime/backend_driver.hpp"
#include "runtime/backend_table.hpp"

namespace jit::detail {
namespace {

// Each backend is probed at its first use, on the caller's thread: a GPU program never starts the
// CPU compiler, and a first get spawns no thread (0.1-0.2 ms each on the H100 host).
struct Slot {
  std::once_flag once;
  BackendState state;
  std::unique_ptr<BackendDriver> driver;
};

const BackendState& probe(const BackendEntry& e) {
  static const auto slots = std::make_unique<Slot[]>(backend_table().size());
  Slot& s = slots[static_cast<std::size_t>(&e - backend_table().data())];
  std::call_once(s.once, [&] {
    s.state.backend = e.backend;
    if (e.make_driver) {
      s.driver = e.make_driver();
      s.state.reason = s.driver->unavailable_reason();
    } else {
      s.state.reason = std::string(e.absent);
    }
    s.state.driver = s.driver.get();
  });
  return s.state;
}

}  // namespace

std::string BackendDriver::device_identity(const Target& target) const {
  return std::string(backend_name(backend())) + " " + compiler(target).arch();
}

std::vector<BackendState> backend_states() {
  // Every backend (`jitk info`): the slow probes (cuInit can take 100 ms) on threads while the rest run here.
  std::vector<std::future<void>> slow;
  for (const auto& e : backend_table())
    if (e.slow_probe) slow.push_back(std::async(std::launch::async, [&e] { probe(e); }));
  for (const auto& e : backend_table())
    if (!e.slow_probe) probe(e);
  for (auto& f : slow) f.get();
  std::vector<BackendState> out;
  for (const auto& e : backend_table()) out.push_back(probe(e));
  return out;
}

const BackendDriver& driver_for(const Target& target) {
  const BackendEntry* e = backend_entry(target.backend);
  if (!e) throw Error(ErrorCode::BackendUnavailable, "unknown backend in target " + target.to_string());
  const BackendState& s = probe(*e);
  if (s.driver && s.reason.empty()) return *s.driver;
  throw Error(ErrorCode::BackendUnavailable,
              "target " + target.to_string() + " is unavailable: " + s.reason + " (run `jitk info`)");
}

const BackendDriver& compiling_driver_for(const Target& target) {
  const BackendEntry* e = backend_entry(target.backend);
  if (!e || target.arch.empty()) return driver_for(target);
  const BackendState& s = probe(*e);
  if (s.driver && s.reason.empty()) return *s.driver;
  // A backend that compiles only where it runs answers unavailable_reason() here (the CPU).
  if (s.driver && s.driver->compile_unavailable_reason().empty()) return *s.driver;
  return driver_for(target);  // throws, saying why
}

}  // namespace jit::detail

namespace jit {

const Target& default_target() {
  static const Target target = [] {
    for (const auto& e : detail::backend_table())
      if (e.default_when_available && detail::probe(e).reason.empty()) return Target{e.backend, "", 0};
    // The CPU backend's module (LLVM) opens at the first CPU compile or load, not here: a process
    // that only asks which target is the default never maps it.
    return Target::cpu();
  }();
  return target;
}

}  // namespace jit
