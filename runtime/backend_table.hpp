// The backends jitk knows, one row each: what target names call it, how its driver is made and probed.
#pragma once
#include <memory>
#include <span>
#include <string_view>

#include "jit/jit.hpp"

namespace jit::detail {

class BackendDriver;

struct BackendEntry {
  Backend backend;
  std::string_view name;       // in targets ("cuda:sm_90"), cache keys and `jitk info`
  std::string_view arch_hint;  // how a target names its arch ("sm_XX"), for messages; "" where it names none
  // Makes the driver; null where this build lacks the backend, and `absent` says why.
  std::unique_ptr<BackendDriver> (*make_driver)();
  std::string_view absent;
  // Its probe can take long (cuInit: 100 ms), so `jitk info` runs it beside the others.
  bool slow_probe = false;
  // The default target where it can run (in table order); else the CPU.
  bool default_when_available = false;
};

// Every backend, in the order `jitk info` lists them.
std::span<const BackendEntry> backend_table();
// The row of b; null for a value no row has.
const BackendEntry* backend_entry(Backend b);

}  // namespace jit::detail
