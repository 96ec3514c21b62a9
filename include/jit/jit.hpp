// The public API of jitk: jit::get<Kernel>(params[, target]) -> jit::Kernel<Kernel>, and the types around it.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "jit/error.hpp"

namespace jit {

// ---- element types -------------------------------------------------------------------------
enum class DType : std::uint8_t { f16, bf16, f32, f64 };

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}
constexpr std::size_t dtype_size(DType t) {
  return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2;
}
// Host-side storage of the 16-bit float types (IEEE half, bfloat16): bits only, converted with
// the functions below; device code uses the toolkit's own types.
struct half {
  std::uint16_t bits = 0;
};
struct bfloat16 {
  std::uint16_t bits = 0;
};
half to_half(float f);          // round to nearest even
bfloat16 to_bfloat16(float f);  // round to nearest even
float to_float(half h);
float to_float(bfloat16 b);

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<half>() { return DType::f16; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }

// ---- where a kernel runs ---------------------------------------------------------------------
enum class Backend : std::uint8_t { Cpu, Cuda, Hip };
std::string_view backend_name(Backend b);

struct Target {
  Backend backend = Backend::Cpu;
  std::string arch;  // "" = this machine's own (host CPU, or the device's architecture)
  int device = 0;

  static Target cpu();                 // the host CPU, compiled for its exact features
  static Target parse(std::string_view text);  // "cpu", "cuda:sm_90", "hip:gfx90a"
  std::string to_string() const;
  bool operator==(const Target&) const = default;
};

// The GPU 0 when one is usable, else the CPU.
const Target& default_target();

// A stream to launch on: a CUstream (or hipStream_t) of the caller's, or the default stream.
struct Stream {
  void* handle = nullptr;
};

// What the caller will do with the kernel: training needs an implementation with a backward.
enum class Mode : std::uint8_t { Inference, Training };

// How a get chooses among a kernel's implementations (see jit/registry.hpp).
struct Selection {
  Mode mode = Mode::Inference;
  bool allow_fallback = true;  // false: a generic implementation is refused (an Error says what was missing)
  std::string implementation;  // non-empty: exactly this one (still checked against the target)
  bool operator==(const Selection&) const = default;
};

// How this process first got a kernel: compiled it, or loaded it from the disk cache.
enum class Origin : std::uint8_t { Compiled, DiskCache };

// ---- specialization parameters (the type-erased form used by the cache, the tool and manifests)
using ParamValue = std::variant<std::int64_t, std::string>;

class ParamSet {
 public:
  ParamSet() = default;
  ParamSet(std::initializer_list<std::pair<std::string, ParamValue>> values);
  void set(std::string name, ParamValue value);
  const ParamValue* find(std::string_view name) const;
  const std::vector<std::pair<std::string, ParamValue>>& values() const { return values_; }
  std::string to_string() const;  // "dtype=f32,hidden=4096", in insertion order
  bool operator==(const ParamSet&) const = default;

 private:
  std::vector<std::pair<std::string, ParamValue>> values_;
};

// ---- launch arguments --------------------------------------------------------------------------
// A typed pointer: the element type travels with the address so a launch can check it against
// the kernel's dtype.
struct ConstPtr {
  const void* data = nullptr;
  DType dtype = DType::f32;
  ConstPtr() = default;
  ConstPtr(const void* p, DType t) : data(p), dtype(t) {}
  template <class T> ConstPtr(const T* p) : data(p), dtype(dtype_of<T>()) {}
};
struct MutPtr {
  void* data = nullptr;
  DType dtype = DType::f32;
  MutPtr() = default;
  MutPtr(void* p, DType t) : data(p), dtype(t) {}
  template <class T> MutPtr(T* p) : data(p), dtype(dtype_of<T>()) {}
  operator ConstPtr() const { return {data, dtype}; }
};

namespace detail {

// Arguments as the compiled kernel receives them: an array of pointers to values, the same
// shape as cuLaunchKernel's kernelParams, plus how much work there is.
class ArgPack {
 public:
  static constexpr int kMaxArgs = 24;
  // Copies are member by member (the compiler's, so none is forgotten); the packed values copy
  // themselves so that a copy points at its own (a launch that rewrites some: a packed gemm's operands).
  void add_pointer(const void* p) { add_bytes(&p, sizeof p); }
  // Argument i (added by add_pointer, add_i64) set to another value.
  void set_pointer(int i, const void* p) { set_bytes(i, &p, sizeof p); }
  void set_i64(int i, std::int64_t v) { set_bytes(i, &v, sizeof v); }
  void add_i64(std::int64_t v) { add_bytes(&v, sizeof v); }
  void add_scalar(double v, DType t);  // converted to the kernel's element type
  void* const* pointers() const { return values_.ptrs; }
  int size() const { return values_.count; }

  std::int64_t work_items = 0;  // rows or elements the kernel's range covers
  std::int64_t work_columns = 1;  // Tile kernels: the output's columns (their blocks cover rows x columns)
  std::int64_t work_depth = 0;    // Tile kernels: the K their tiles walk (0: not said; K is then never split)
  std::int64_t min_grain = 1;   // smallest range worth a task of its own (CPU)
  bool unaligned = false;       // some row of the operands is not 16-byte aligned (GpuLayout::aligned_rows)
  Stream stream;                // GPU launches

  // Tile kernels that load through the copy engine (GpuLayout::tensor_maps): each operand's
  // matrix as rows of `inner` elements, `row_bytes` apart. The CUDA driver encodes them as
  // tensor maps (boxes of the tile), passed after the work count; other backends ignore them.
  struct Matrix {
    const void* base = nullptr;
    DType dtype = DType::f32;
    std::int64_t inner = 0, outer = 0, row_bytes = 0;
    bool k_inner = true;  // its contiguous dimension is the product's K (boxes of tile_k x rows), else M or N (64 x tile_k)
    int arg = -1;  // the argument holding its address, its leading dimension (elements, i64) the next one
  };
  Matrix matrices[2];
  int matrix_count = 0;

 private:
  void add_bytes(const void* p, std::size_t n);
  void set_bytes(int i, const void* p, std::size_t n);
  // The values and the pointers to them that the kernel reads; a copy's pointers are to its own values.
  struct Values {
    Values() = default;
    Values(const Values& o) { *this = o; }
    Values& operator=(const Values& o);
    // Left uninitialized: only the first `count` slots are ever read (this is on every launch).
    alignas(16) unsigned char storage[kMaxArgs][16];
    void* ptrs[kMaxArgs];
    int count = 0;
  };
  Values values_;
};

void check_dtype(std::string_view kernel, std::string_view arg, DType expected, DType got);
void check_not_null(std::string_view kernel, std::string_view arg, const void* p, std::int64_t count);
void check_non_negative(std::string_view kernel, std::string_view arg, std::int64_t v);

// A compiled kernel loaded into this process, whatever the backend.
class LoadedKernel {
 public:
  virtual ~LoadedKernel() = default;
  virtual void launch(const ArgPack& args) const = 0;
  virtual Backend backend() const = 0;
};

struct KernelHandle {
  std::shared_ptr<const LoadedKernel> kernel;
  std::string key;  // the content hash of the artifact, hex
  Origin origin = Origin::Compiled;
  std::string implementation;  // the implementation chosen, e.g. "cuda-sm90"
};

// The type-erased entry point behind jit::get: validates, specializes, looks up the cache,
// compiles on a miss, loads.
KernelHandle get_kernel(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection = {});
// Changes when what a get may choose changes: a registration, or this thread's kernel mappings.
std::uint64_t selection_context();

template <class Tuple> std::size_t hash_fields(const Tuple& t) {
  std::size_t h = 0x9e3779b97f4a7c15ull;
  std::apply([&](const auto&... f) { ((h = (h ^ std::hash<std::decay_t<decltype(f)>>{}(f)) * 0x100000001b3ull), ...); }, t);
  return h;
}

// Memory tier in front of get_kernel for one descriptor: typed params -> loaded kernel. Each thread
// keeps its own map of what it has seen, so the hot path takes no lock; a thread's first request
// for a kernel reads the shared map under a shared lock.
template <class K> class TypedMemo {
 public:
  const KernelHandle* find(const typename K::Params& p, const Target& t, const Selection& s, std::uint64_t context) const {
    Key key{p, t, s, context};
    auto& local = thread_local_map();
    if (auto it = local.find(key); it != local.end()) return it->second;
    std::shared_lock lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    local.emplace(std::move(key), &it->second);
    return &it->second;
  }
  const KernelHandle* insert(const typename K::Params& p, const Target& t, const Selection& s, std::uint64_t context,
                             KernelHandle h) {
    std::unique_lock lock(mutex_);
    return &map_.try_emplace(Key{p, t, s, context}, std::move(h)).first->second;
  }

 private:
  struct Key {
    typename K::Params params;
    Target target;
    Selection selection;
    std::uint64_t context;
    bool operator==(const Key& o) const {
      return context == o.context && params.fields() == o.params.fields() && target == o.target &&
             selection == o.selection;
    }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::size_t h = hash_fields(k.params.fields()) ^ (std::size_t(k.target.backend) << 1) ^
                      (std::size_t(k.target.device) << 8) ^ std::hash<std::string>{}(k.target.arch);
      h ^= (std::size_t(k.selection.mode) << 3) ^ (std::size_t(k.selection.allow_fallback) << 5) ^ k.context * 0x9e3779b97f4a7c15ull;
      if (!k.selection.implementation.empty()) h ^= std::hash<std::string>{}(k.selection.implementation) << 1;
      return h;
    }
  };
  // One memo per descriptor (a static in jit::get), so one thread-local map per descriptor too.
  static std::unordered_map<Key, const KernelHandle*, KeyHash>& thread_local_map() {
    static thread_local std::unordered_map<Key, const KernelHandle*, KeyHash> local;
    return local;
  }
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, KernelHandle, KeyHash> map_;  // node-based, never erased: handles stay put
};

}  // namespace detail

// ---- the kernel a user holds -------------------------------------------------------------------
template <class K> class Kernel {
 public:
  using Params = typename K::Params;
  using Args = typename K::Args;

  Kernel(const detail::KernelHandle* handle, const Params& params) : handle_(handle), params_(params) {}

  // k(args...), or k(stream, args...) for a GPU launch on the caller's stream: packs K's typed
  // arguments, checks them, runs to completion (CPU) or enqueues (GPU). k.launch({...}) takes Args.
  template <class First, class... A> void operator()(First&& first, A&&... rest) const {
    if constexpr (std::is_convertible_v<First, Stream>)
      launch(Args{std::forward<A>(rest)...}, Stream(first));
    else
      launch(Args{std::forward<First>(first), std::forward<A>(rest)...});
  }
  void launch(const Args& args, Stream stream = {}) const {
    detail::ArgPack pack;
    K::pack(params_, args, pack);
    pack.stream = stream;
    handle_->kernel->launch(pack);
  }

  const Params& params() const { return params_; }
  const std::string& cache_key() const { return handle_->key; }
  Backend backend() const { return handle_->kernel->backend(); }
  Origin origin() const { return handle_->origin; }
  const std::string& implementation() const { return handle_->implementation; }

 private:
  const detail::KernelHandle* handle_;  // owned by the process-wide memory tier
  Params params_;
};

// The one call: a kernel specialized for exactly these params on this target, compiled at
// first use, loaded from the disk cache when another process already compiled it. `selection`
// says how to choose among the kernel's implementations (jit/registry.hpp).
template <class K>
Kernel<K> get(const typename K::Params& params, const Target& target = default_target(), const Selection& selection = {}) {
  static detail::TypedMemo<K> memo;
  const std::uint64_t context = detail::selection_context();
  if (const detail::KernelHandle* hit = memo.find(params, target, selection, context)) return Kernel<K>(hit, params);
  return Kernel<K>(memo.insert(params, target, selection, context,
                               detail::get_kernel(K::name, K::to_params(params), target, selection)),
                   params);
}

}  // namespace jit
