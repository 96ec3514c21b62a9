// What every backend in runtime/ provides: its compiler, whether it can run here, and loading artifacts.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/compiler.hpp"
#include "jit/jit.hpp"

namespace jit::detail {

class BackendDriver {
 public:
  virtual ~BackendDriver() = default;
  virtual Backend backend() const = 0;
  // "" when usable on this machine, else why not.
  virtual std::string unavailable_reason() const = 0;
  // "" when this machine can compile for the backend (a named arch), even if nothing can run here:
  // NVRTC needs no GPU. Backends that compile only where they run answer unavailable_reason().
  virtual std::string compile_unavailable_reason() const { return unavailable_reason(); }
  // What `jitk info` adds to an unavailable backend that can still compile here ("" for nothing).
  virtual std::string compile_only_note() const { return ""; }
  virtual const Compiler& compiler(const Target& target) const = 0;
  // Which hardware a tuning decision belongs to, seen the way it was measured: the backend's name
  // and the arch its compiler targets; drivers add the device's name (and what else changes timings).
  virtual std::string device_identity(const Target& target) const;
  // Throws Error{LoadFailed}.
  virtual std::shared_ptr<const LoadedKernel> load(const std::vector<char>& artifact, const SourceUnit& unit,
                                                   const Target& target, const std::string& key) const = 0;
};

// The driver for a target's backend. Throws Error{BackendUnavailable} saying why.
const BackendDriver& driver_for(const Target& target);
// The driver to compile for a target: driver_for's, or, for a target naming its arch, one that
// can compile but not run here (warming for a device elsewhere). Throws Error{BackendUnavailable}.
const BackendDriver& compiling_driver_for(const Target& target);

struct BackendState {
  Backend backend;
  std::string reason;                  // "" when available
  const BackendDriver* driver = nullptr;
};
std::vector<BackendState> backend_states();

}  // namespace jit::detail
