// A CUDA kernel loaded into this process: its launch (grid, clusters, tensor maps, stream-K,
// packing scratch) and the routes some launches take instead.
#pragma once
#include <memory>
#include <vector>

#include "jit/jit.hpp"
#include "jit/specializer.hpp"
#include "runtime/cuda/cuda_api.hpp"
#include "runtime/cuda/cuda_routes.hpp"

namespace jit::detail {

// fn: the module's entry; pack: its jitk_pack (f32 gemm texts), or null.
std::shared_ptr<const LoadedKernel> make_cuda_kernel(cuda::CUfunction fn, cuda::CUfunction pack, const LaunchShape& shape, int device,
                                                     std::unique_ptr<Fallback> fallback,
                                                     std::vector<std::unique_ptr<Fallback>> few_rows, PackRoutes packing);

}  // namespace jit::detail
