// The fuzz targets parse targets and params without any backend: the backend table's driver factories, made empty.
#include <memory>

#include "runtime/backend_driver.hpp"

namespace jit::detail {
std::unique_ptr<BackendDriver> make_cuda_driver() { return nullptr; }
std::unique_ptr<BackendDriver> make_hip_driver() { return nullptr; }
}  // namespace jit::detail
