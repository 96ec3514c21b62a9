// A loaded CUDA kernel's launches: grid and clusters, tensor maps, stream-K tails, packed operands
// and the routes of launches its own text should not take.
#include "runtime/cuda/cuda_kernel.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <cstdlib>
#include <string_view>

#include "support/text.hpp"
#include "support/units.hpp"
#include "runtime/gpu_launch.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {

using namespace cuda;

// Scratch for a launch (packed operands, stream-K's partial sums), allocated and freed in the
// launch's stream order. From a pool of jitk's own on the device that keeps up to
// $JITK_SCRATCH_KEEP (default kScratchKept) bytes reserved across synchronizations: the device's
// default pool gives its memory back at each, and mapping a packed 4096^3 f32 gemm's 128 MB again
// each time would cost more than packing saves. The default pool where the driver has no pools of
// its own. False where the memory is not there (the caller launches without scratch).
constexpr unsigned long long kScratchKept = 512ull << 20;
unsigned long long scratch_kept() {
  const char* v = std::getenv("JITK_SCRATCH_KEEP");
  if (!v || !*v) return kScratchKept;
  std::string why;
  if (const auto bytes = parse_size(v, &why)) return static_cast<unsigned long long>(*bytes);
  warn_once("scratch-keep", "JITK_SCRATCH_KEEP='" + printable(v) + "' is not a size (" + why + "; give " + kSizeForms + "); keeping " +
                                std::to_string(kScratchKept >> 20) + " MiB");
  return kScratchKept;
}
bool scratch_alloc(int device, CUdeviceptr* p, std::size_t bytes, CUstream stream) {
  const DriverApi* api = driver_api();
  static std::mutex mutex;
  static std::map<int, CUmemoryPool> pools;  // created once a device, kept for the process
  CUmemoryPool pool = nullptr;
  if (api->cuMemPoolCreate && api->cuMemPoolSetAttribute && api->cuMemAllocFromPoolAsync) {
    std::lock_guard lock(mutex);
    auto it = pools.find(device);
    if (it == pools.end()) {
      CUmemPoolProps props{};
      props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.handle_types = CU_MEM_HANDLE_TYPE_NONE;
      props.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
      CUmemoryPool created = nullptr;
      unsigned long long kept = scratch_kept();
      if (api->cuMemPoolCreate(&created, &props) != CUDA_SUCCESS) created = nullptr;
      if (created) api->cuMemPoolSetAttribute(created, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &kept);
      it = pools.emplace(device, created).first;
    }
    pool = it->second;
  }
  if (pool) return api->cuMemAllocFromPoolAsync(p, bytes, pool, stream) == CUDA_SUCCESS;
  return api->cuMemAllocAsync && api->cuMemAllocAsync(p, bytes, stream) == CUDA_SUCCESS;
}

// The copy engine's limits: 16-byte aligned base and rows, and int32 coordinates within non-empty
// dimensions.
bool copy_engine_takes(const ArgPack::Matrix& m) {
  constexpr std::int64_t kMaxCoordinate = 2147483647;
  return reinterpret_cast<std::uintptr_t>(m.base) % 16 == 0 && m.row_bytes % 16 == 0 && m.inner > 0 && m.outer > 0 &&
         m.inner <= kMaxCoordinate && m.outer <= kMaxCoordinate;
}

class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(CUfunction fn, CUfunction pack, LaunchShape shape, int device, std::unique_ptr<Fallback> fallback,
             std::vector<std::unique_ptr<Fallback>> few_rows, PackRoutes packing)
      : fn_(fn),
        pack_fn_(pack),
        shape_(shape),
        device_(device),
        fallback_(std::move(fallback)),
        few_rows_(std::move(few_rows)),
        packing_(std::move(packing)) {
    // A persistent kernel's blocks loop over the tiles: no more of them than the SMs hold at once
    // (in clusters: as many whole clusters as the device runs at once).
    if (shape_.blocks_per_sm > 0) persistent_grid_ = static_cast<unsigned>(devices()[device].sm_count * shape_.blocks_per_sm);
    if (shape_.cluster > 1) persistent_grid_ = cluster_grid();
    if (shape_.max_split_k > 1) max_split_k_ = largest_cluster(shape_.max_split_k);
    if (max_split_k_ > 1) active_clusters();
    if (shape_.stream_k) wave_ = stream_k_wave();
  }
  Backend backend() const override { return Backend::Cuda; }
  void launch(const ArgPack& args) const override {
    if (args.work_items <= 0 || args.work_columns <= 0) return;
    GpuLaunch l(args, shape_);
    // few rows first: the generic text the route runs also takes what the copy engine cannot
    if (!few_rows_.empty() && args.work_items <= kFewRows) {
      const bool idle = leaves_sms_idle(l.grid, devices()[device_].sm_count);
      for (const auto& route : few_rows_)
        if (few_rows_route_takes(args.work_items, args.work_columns, idle, route->min_rows, route->max_rows, route->min_columns,
                                 route->any_tiles))
          return route->get().launch(args);
    }
    if (shape_.aligned_rows && args.unaligned && fallback_) return fallback_->get().launch(args);
    if (shape_.tensor_maps && args.matrix_count == 2 && fallback_ &&
        !(copy_engine_takes(args.matrices[0]) && copy_engine_takes(args.matrices[1])))
      return fallback_->get().launch(args);
    if ((packing_.a_along_k || packing_.b_along_k) && launch_packed(args)) return;
    // in clusters, both GpuLaunch's grid and the persistent cap are whole clusters
    if (persistent_grid_ > 0 && l.grid > persistent_grid_) l.grid = persistent_grid_;
    const ContextScope context_scope(device_);
    const DriverApi* api = driver_api();
    CUtensorMap maps[2];
    if (shape_.tensor_maps) {
      if (args.matrix_count != 2) throw Error(ErrorCode::Internal, "a tensor-map kernel was packed without its two matrices");
      // K-major: boxes of tile_m (A) or tile_n (B) rows of tile_k; M/N-major: tile_k rows of 64
      // (128-byte rows; the text loads several side by side).
      auto box = [&](const ArgPack::Matrix& m, std::int64_t rows) {
        return m.k_inner ? encode(*api, m, shape_.tile_k, rows) : encode(*api, m, 64, shape_.tile_k);
      };
      maps[0] = box(args.matrices[0], shape_.tile_m);
      maps[1] = box(args.matrices[1], shape_.tile_n / shape_.cluster);  // clusters: each block loads its part of B's rows
      l.append(&maps[0]);
      l.append(&maps[1]);
    }
    // Tiles past the last whole wave: finished stream-K, in a workspace of the launch's stream.
    CUdeviceptr work = 0, flags = 0;
    std::int64_t dp_blocks = l.grid;
    const CUstream stream = static_cast<CUstream>(args.stream.handle);
    if (shape_.stream_k) {
      const StreamK sk = stream_k_for(l.grid, args.work_depth, shape_, wave_);
      if (sk.sk_blocks > 0 && stream_k_workspace(sk, stream, &work, &flags)) {
        dp_blocks = sk.dp_blocks;
        l.grid = static_cast<unsigned>(sk.dp_blocks + sk.sk_blocks);
      }
      l.append(&work);
      l.append(&flags);
      l.append(&dp_blocks);
    }
    // Few tiles for the SMs: each tile's K walk split over the blocks of a cluster.
    const int split = split_that_fits(std::min(max_split_k_, split_k_for(l.grid, args.work_depth, shape_, devices()[device_].sm_count)),
                                      l.grid, active_clusters_);
    if (split > 1 && !(logged_splits_.fetch_or(1u << split) & (1u << split)))
      log().info("a launch of {} tiles ({} x {} x {}) splits K over clusters of {} ({} such clusters run at once; 0: unknown)", l.grid,
                 args.work_items, args.work_columns, args.work_depth, split, active_clusters_[split]);
    if (shape_.cluster > 1 || split > 1) {
      const int cluster = split > 1 ? split : shape_.cluster;
      CUlaunchAttribute attr{};
      CUlaunchConfig config = cluster_config(&attr, l.grid * static_cast<unsigned>(split), stream, cluster);
      const CUresult launched = api->cuLaunchKernelEx(&config, fn_, const_cast<void**>(l.params), nullptr);
      if (work) api->cuMemFreeAsync(work, stream);
      check(launched, "cuLaunchKernelEx");
      return;
    }
    const CUresult launched = api->cuLaunchKernel(fn_, l.grid, 1, 1, l.block, 1, 1, static_cast<unsigned>(shape_.shared_bytes), stream,
                                                  const_cast<void**>(l.params), nullptr);
    if (work) api->cuMemFreeAsync(work, stream);  // after the kernel, in stream order
    check(launched, "cuLaunchKernel");
  }

  // A launch with its operands lying along K packed along M or N into scratch of the launch's
  // stream (packing_for decides which), then run by the route for them. False, and the launch as
  // it is, where nothing is packed, or the route, the driver's stream-ordered allocation or the
  // scratch cannot be had.
  bool launch_packed(const ArgPack& args) const {
    if (args.matrix_count != 2 || args.matrices[0].arg < 0 || args.matrices[1].arg < 0 || pack_failed_) return false;
    // JITK_GEMM_PACK: 0 packs nothing, 1 every operand it can (any size: tests, comparisons); else packing_for decides
    const char* mode = std::getenv("JITK_GEMM_PACK");
    if (mode && std::string_view(mode) == "0") return false;
    const Packing p = mode && std::string_view(mode) == "1"
                          ? Packing{packing_.a_along_k, packing_.b_along_k}
                          : packing_for(args.work_items, args.work_columns, args.work_depth, packing_.a_along_k, packing_.b_along_k);
    const Fallback* route = packing_.route(p);
    const DriverApi* api = driver_api();
    if (!route || !api->cuMemAllocAsync || !api->cuMemFreeAsync) return false;
    const CudaKernel* packed_kernel = nullptr;
    try {
      packed_kernel = dynamic_cast<const CudaKernel*>(&route->get());
    } catch (const std::exception& e) {
      log().warn("gemm: the packed route could not be had ({}); launches run unpacked", e.what());
      pack_failed_ = true;
      return false;
    }
    if (!packed_kernel || !packed_kernel->pack_fn_) return false;
    // A's rows (M of K) packed as K rows of M, B's (N of K) as K rows of N, rows padded to 128 bytes.
    const ArgPack::Matrix& a = args.matrices[0];
    const ArgPack::Matrix& b = args.matrices[1];
    const auto padded = [](std::int64_t n) { return (n + 31) / 32 * 32; };
    const std::int64_t a_ld = padded(a.outer), b_ld = padded(b.outer);
    if ((p.a && !packable(a)) || (p.b && !packable(b))) return false;
    const std::size_t a_bytes = p.a ? static_cast<std::size_t>(a.inner * a_ld) * sizeof(float) : 0;
    const std::size_t b_at = (a_bytes + 255) / 256 * 256;
    const std::size_t bytes = b_at + (p.b ? static_cast<std::size_t>(b.inner * b_ld) * sizeof(float) : 0);
    const CUstream stream = static_cast<CUstream>(args.stream.handle);
    const ContextScope context_scope(device_);
    CUdeviceptr scratch = 0;
    if (!scratch_alloc(device_, &scratch, bytes, stream)) {
      log().debug("gemm: {} bytes of packing scratch not allocated: the launch runs unpacked", bytes);
      return false;
    }
    ArgPack packed = args;
    // Operand i transposed to `at` (rows ld apart), and the launch's arguments pointed there.
    const auto pack = [&](int i, CUdeviceptr at, std::int64_t ld) {
      const ArgPack::Matrix& m = args.matrices[i];
      packed_kernel->transpose(m, at, ld, stream);
      const void* base = reinterpret_cast<const void*>(at);
      packed.set_pointer(m.arg, base);
      packed.set_i64(m.arg + 1, ld);
      packed.matrices[i] = {base, m.dtype, m.outer, m.inner, ld * static_cast<std::int64_t>(sizeof(float)), false, m.arg};
    };
    try {
      if (p.a) pack(0, scratch, a_ld);
      if (p.b) pack(1, scratch + b_at, b_ld);
      packed_kernel->launch(packed);
    } catch (...) {
      api->cuMemFreeAsync(scratch, stream);
      throw;
    }
    check(api->cuMemFreeAsync(scratch, stream), "cuMemFreeAsync (packing scratch)");  // after the launch, in stream order
    if (log().should_log(spdlog::level::debug))
      log().debug("gemm: {} packed before a launch of {} x {} x {}", operands_text({p.a, p.b}), args.work_items, args.work_columns,
                  args.work_depth);
    return true;
  }

  // jitk_pack's grid for matrix m: one block a 32 x 32 tile; it takes m where that fits one grid.
  static std::int64_t pack_tiles(const ArgPack::Matrix& m) { return (m.outer + 31) / 32 * ((m.inner + 31) / 32); }
  static bool packable(const ArgPack::Matrix& m) { return pack_tiles(m) <= GpuLaunch::kMaxGrid; }

  // out (m.inner rows of m.outer floats, out_ld apart) = the transpose of matrix m (m.outer rows
  // of m.inner), by this module's jitk_pack.
  void transpose(const ArgPack::Matrix& m, CUdeviceptr out, std::int64_t out_ld, CUstream stream) const {
    const std::int64_t tiles = pack_tiles(m);  // packable(m): at most kMaxGrid
    const void* in = m.base;
    std::int64_t ld = m.row_bytes / static_cast<std::int64_t>(sizeof(float)), rows = m.outer, cols = m.inner;
    void* params[] = {&in, &ld, &out, &out_ld, &rows, &cols};
    check(driver_api()->cuLaunchKernel(pack_fn_, static_cast<unsigned>(tiles), 1, 1, 32, 8, 1, 0, stream, params, nullptr),
          "cuLaunchKernel(jitk_pack)");
  }

  // The blocks the device runs at once (a stream-K launch's last wave); 0 where the driver cannot say.
  std::int64_t stream_k_wave() const {
    const DriverApi* api = driver_api();
    if (!api->cuOccupancyMaxActiveBlocksPerMultiprocessor || !api->cuMemAllocAsync || !api->cuMemFreeAsync || !api->cuMemsetD32Async)
      return 0;
    const ContextScope context_scope(device_);
    int per_sm = 0;
    if (api->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn_, shape_.block, static_cast<std::size_t>(shape_.shared_bytes)) !=
        CUDA_SUCCESS)
      return 0;
    return static_cast<std::int64_t>(per_sm) * devices()[device_].sm_count;
  }

  // A stream-K launch's partial sums (a tile of floats for each of its last wave's blocks) and
  // their flags (zeroed), allocated in stream order. False, and a plain launch, where the device
  // has no memory for them.
  bool stream_k_workspace(const StreamK& sk, CUstream stream, CUdeviceptr* work, CUdeviceptr* flags) const {
    const DriverApi* api = driver_api();
    const std::size_t sums = static_cast<std::size_t>(sk.sk_blocks * shape_.tile_m * shape_.tile_n) * sizeof(float);
    const std::size_t flags_at = (sums + 255) / 256 * 256;
    if (!scratch_alloc(device_, work, flags_at + static_cast<std::size_t>(sk.sk_blocks) * sizeof(unsigned), stream)) {
      *work = 0;
      log().debug("stream-K workspace of {} bytes not allocated: a plain launch", flags_at + sk.sk_blocks * sizeof(unsigned));
      return false;
    }
    *flags = *work + flags_at;
    if (api->cuMemsetD32Async(*flags, 0, static_cast<std::size_t>(sk.sk_blocks), stream) != CUDA_SUCCESS) {
      api->cuMemFreeAsync(*work, stream);
      *work = *flags = 0;
      return false;
    }
    return true;
  }

  // A launch of `grid` blocks in clusters of `cluster` along x; attr is the cluster attribute.
  CUlaunchConfig cluster_config(CUlaunchAttribute* attr, unsigned grid, CUstream stream, int cluster) const {
    attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr->value.cluster_dim = {static_cast<unsigned>(cluster), 1, 1};
    return {grid, 1, 1, static_cast<unsigned>(shape_.block), 1, 1, static_cast<unsigned>(shape_.shared_bytes), stream, attr, 1};
  }

  // The largest cluster of at most `most` blocks (8, 4 or 2) that the device can run this kernel
  // in; 1 before sm_90, without cuLaunchKernelEx, or when none fits.
  int largest_cluster(int most) const {
    const DriverApi* api = driver_api();
    if (devices()[device_].cc_major < 9 || !api->cuLaunchKernelEx || !api->cuOccupancyMaxActiveClusters) return 1;
    const ContextScope context_scope(device_);
    for (int cluster = 8; cluster >= 2; cluster /= 2) {
      if (cluster > most) continue;
      CUlaunchAttribute attr{};
      CUlaunchConfig config = cluster_config(&attr, static_cast<unsigned>(cluster), nullptr, cluster);
      int clusters = 0;
      if (api->cuOccupancyMaxActiveClusters(&clusters, fn_, &config) == CUDA_SUCCESS && clusters > 0) return cluster;
    }
    return 1;
  }

  // active_clusters_[s]: the clusters of s blocks (2 .. max_split_k_) the device runs at once, where the driver says.
  void active_clusters() {
    const DriverApi* api = driver_api();
    if (!api->cuOccupancyMaxActiveClusters) return;
    const ContextScope context_scope(device_);
    for (int cluster = 2; cluster <= max_split_k_ && cluster <= 8; ++cluster) {
      CUlaunchAttribute attr{};
      CUlaunchConfig config = cluster_config(&attr, static_cast<unsigned>(cluster), nullptr, cluster);
      int clusters = 0;
      if (api->cuOccupancyMaxActiveClusters(&clusters, fn_, &config) == CUDA_SUCCESS && clusters > 0) active_clusters_[cluster] = clusters;
    }
  }

  // A persistent grid in clusters: the clusters the device runs at once (the driver's count; the
  // SMs' when it has none), each shape_.cluster blocks.
  unsigned cluster_grid() const {
    const DriverApi* api = driver_api();
    if (!api->cuLaunchKernelEx)
      throw Error(ErrorCode::BackendUnavailable, "this CUDA driver cannot launch blocks in clusters (cuLaunchKernelEx needs CUDA 12 or newer)");
    const unsigned cluster = static_cast<unsigned>(shape_.cluster);
    const unsigned by_sms = static_cast<unsigned>(devices()[device_].sm_count) / cluster * cluster;
    int clusters = 0;
    if (api->cuOccupancyMaxActiveClusters) {
      const ContextScope context_scope(device_);
      CUlaunchAttribute attr{};
      CUlaunchConfig config = cluster_config(&attr, by_sms, nullptr, shape_.cluster);
      if (api->cuOccupancyMaxActiveClusters(&clusters, fn_, &config) != CUDA_SUCCESS) clusters = 0;
    }
    if (clusters <= 0) return by_sms;
    return std::min(by_sms, static_cast<unsigned>(clusters) * cluster);
  }

  // A matrix as rows of `inner` elements, in boxes of box_inner x box_outer with 128-byte swizzle;
  // out-of-range elements of an edge box read as zeros.
  static CUtensorMap encode(const DriverApi& api, const ArgPack::Matrix& m, std::int64_t box_inner, std::int64_t box_outer) {
    if (!api.cuTensorMapEncodeTiled)
      throw Error(ErrorCode::BackendUnavailable, "this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer needed)");
    const std::size_t elem = dtype_size(m.dtype);
    if (!copy_engine_takes(m))
      throw Error(ErrorCode::InvalidArgument,
                  "the copy engine needs 16-byte aligned matrices and leading dimensions (here: address " +
                      std::to_string(reinterpret_cast<std::uintptr_t>(m.base) % 16) + " past 16, leading dimension of " +
                      std::to_string(m.row_bytes / static_cast<std::int64_t>(elem)) + " elements); pad the leading dimension to a multiple of " +
                      std::to_string(16 / elem) + " or choose implementation 'cuda'");
    const int type = m.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                     : m.dtype == DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const unsigned long long dims[2] = {static_cast<unsigned long long>(m.inner), static_cast<unsigned long long>(m.outer)};
    const unsigned long long strides[1] = {static_cast<unsigned long long>(m.row_bytes)};
    const unsigned box[2] = {static_cast<unsigned>(box_inner), static_cast<unsigned>(box_outer)};
    const unsigned element_strides[2] = {1, 1};
    CUtensorMap map;
    check(api.cuTensorMapEncodeTiled(&map, type, 2, const_cast<void*>(m.base), dims, strides, box, element_strides,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          "cuTensorMapEncodeTiled", ErrorCode::InvalidArgument);
    return map;
  }

 private:
  CUfunction fn_;
  CUfunction pack_fn_;  // the module's jitk_pack, where it has one (f32 gemm texts): null otherwise
  LaunchShape shape_;
  int device_;
  std::unique_ptr<Fallback> fallback_;  // launches the copy engine cannot take
  std::vector<std::unique_ptr<Fallback>> few_rows_;  // launches of few rows (the gemm family's few_rows_routes)
  PackRoutes packing_;                               // large launches with operands along K (pack_routes)
  mutable std::atomic<bool> pack_failed_{false};     // the packed route could not be had: launches run unpacked
  unsigned persistent_grid_ = 0;
  int max_split_k_ = 1;    // the largest cluster this kernel runs in, where its plan lets a tile's K be split
  int active_clusters_[9] = {};  // clusters of each size the device runs at once (0: unknown)
  mutable std::atomic<unsigned> logged_splits_{0};  // the splits said at INFO (bit s: split s), once each
  std::int64_t wave_ = 0;  // blocks the device runs at once, where a stream-K tail can be launched (0: never)
};

}  // namespace

std::shared_ptr<const LoadedKernel> make_cuda_kernel(cuda::CUfunction fn, cuda::CUfunction pack, const LaunchShape& shape, int device,
                                                     std::unique_ptr<Fallback> fallback,
                                                     std::vector<std::unique_ptr<Fallback>> few_rows, PackRoutes packing) {
  return std::make_shared<CudaKernel>(fn, pack, shape, device, std::move(fallback), std::move(few_rows), std::move(packing));
}

}  // namespace jit::detail
