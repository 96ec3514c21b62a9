// The one table of backends: adding a backend is adding its row here (and its folders).
#include "runtime/backend_table.hpp"

#include <iterator>

#include "runtime/backend_driver.hpp"

namespace jit::detail {

// Each backend's folder defines its factory; only this table names them.
#ifdef JITK_WITH_CPU
std::unique_ptr<BackendDriver> make_cpu_driver();
#else
constexpr std::unique_ptr<BackendDriver> (*make_cpu_driver)() = nullptr;
#endif
std::unique_ptr<BackendDriver> make_cuda_driver();
std::unique_ptr<BackendDriver> make_hip_driver();

namespace {

const BackendEntry kBackends[] = {
    {Backend::Cpu, "cpu", "", make_cpu_driver, "this build has no CPU backend (configured without LLVM/Clang 16)"},
    {Backend::Cuda, "cuda", "sm_XX", make_cuda_driver, "", /*slow_probe=*/true, /*default_when_available=*/true},
    {Backend::Hip, "hip", "gfxXXX", make_hip_driver, ""},
};

}  // namespace

std::span<const BackendEntry> backend_table() { return kBackends; }

const BackendEntry* backend_entry(Backend b) {
  for (const auto& e : kBackends)
    if (e.backend == b) return &e;
  return nullptr;
}

}  // namespace jit::detail
