// Kernels and their implementations: what jitk ships, what users add (globally or for a scope),
// and how jit::get picks one implementation for a target.
//
// A kernel (a name, its specialization parameters) has one or more implementations. Each says
// which backend it runs on, the device capability range it suits (CUDA: 90 = sm_90), the modes
// it suits, its priority and its version. For a target, jit::get keeps the implementations whose
// backend is the target's and whose range holds the device, then takes the one with the
// narrowest range (the most specialized), then the highest priority, then the one registered last.
// A `generic` implementation is the fallback; Selection::allow_fallback = false refuses it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "jit/jit.hpp"

namespace jit {

std::string_view mode_name(Mode m);

// One specialization parameter of a kernel.
struct ParamSpec {
  std::string name;
  std::vector<std::string> choices;  // a text parameter when non-empty, else an integer in [min, max]
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::string doc;
  // A fusion chain (jit/chain.hpp): optional text of steps joined by '>'; absent or "" is no chain,
  // and then the parameter is left out of the params (and the key) altogether.
  bool chain = false;
  // Given when the parameter may be left out (gemm's tiles: 0, the implementation's default); a
  // params set without it then holds this value, so its key is the same either way.
  std::optional<ParamValue> fallback = std::nullopt;
  bool is_text() const { return !choices.empty(); }
  std::string allowed() const;  // "one of f32, f64" / "an integer in [1, 65536]" / "a chain ..."
};

// How a GPU launch covers the work items (rows, or elements) of an implementation.
struct GpuLayout {
  enum class Kind : std::uint8_t {
    Elementwise,  // one 16-byte pack per thread, `block` threads a block
    BlockPerRow,  // one block per row; the row in registers, `packs_per_thread` 16-byte packs each
    WarpPerRow,   // one warp per row, `block / 32` rows a block
    Tile,         // one block per tile_m x tile_n tile of the output (gemm); `tile_plan` gives the threads
  };
  Kind kind = Kind::Elementwise;
  int block = 256;           // threads per block (Elementwise, WarpPerRow); BlockPerRow: the most a row gets
  int packs_per_thread = 4;  // BlockPerRow: how much of the row each thread keeps (more when `block` caps the threads)
  // BlockPerRow: row-shaped arrays a thread holds at once (fused_add_rms_norm: x and residual; a
  // prologue's tensors add theirs). Each raises the cap on threads by `block`, so long rows keep
  // the same registers a thread.
  int row_arrays = 1;
  // Tile: what a tile_m, tile_n, tile_k or stages param of 0 stands for (the CPU's tiled texts
  // take them too), and whether the kernel takes its two operands' tiles through
  // the copy engine (CUDA tensor maps, made at each launch from the ArgPack's tensor_maps).
  int tile_m = 0, tile_n = 0, tile_k = 0, stages = 1;
  bool tensor_maps = false;
  // Tile: the text copies rows 16 bytes at a time and cannot take others: a launch whose ArgPack
  // says `unaligned` runs the backend's generic implementation instead (attention_prefill on Hopper).
  bool aligned_rows = false;
  // Every field, for what hashes them (a scoped mapping's id); a build check holds it to all of them.
  auto fields() const {
    return std::tie(kind, block, packs_per_thread, row_arrays, tile_m, tile_n, tile_k, stages, tensor_maps, aligned_rows);
  }
};

// What a Tile implementation makes of its resolved tile params (tile_m, tile_n, tile_k, stages,
// the kernel's others): the launch, or why these params do not suit it.
struct TilePlan {
  std::string problem;             // "" when the params suit the implementation
  int threads = 0;                 // threads a block
  std::int64_t shared_bytes = 0;   // dynamic shared memory a block
  // The tile a block covers: tile_m work items (rows) by tile_n work columns, walking tile_k.
  std::int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  // Persistent kernels: blocks an SM holds at once; the grid is then at most that many per SM and
  // each block loops over tiles (the text reads it as JITK_BLOCKS_PER_SM). 0: one block a tile.
  int blocks_per_sm = 0;
  // Blocks a cluster (sm_90): the grid is launched in clusters of this many along x.
  int cluster = 1;
  // The most blocks that may share one tile's K walk, each a share of its slices, reduced through
  // the cluster's shared memory (sm_90; the text reads the split as its cluster's size). The
  // launch splits only when the tiles leave SMs idle (decode's few rows). 1: never.
  int max_split_k = 1;
  // The launch may finish the tiles past its last whole wave stream-K: blocks of a last wave each
  // walking an equal share of those tiles' K slices, partial sums meeting in global memory (the
  // text reads JITK_STREAM_K and takes a workspace, its flags and the count of whole-tile blocks
  // after the work count).
  bool stream_k = false;
  // A plan refused for lack of shared memory says so here too: shared_bytes is then what the tile
  // needs and shared_limit the most a block may have, and the error carries both (0: not that refusal).
  std::int64_t shared_limit = 0;
};

inline constexpr int kAnyCapability = 1 << 30;

struct Implementation {
  std::string name;  // unique within its kernel, e.g. "cuda-sm90"
  Backend backend = Backend::Cpu;
  int min_capability = 0;               // inclusive; CUDA: 70 = sm_70. Ignored on the CPU.
  int max_capability = kAnyCapability;  // inclusive
  bool inference = true;                // the modes it suits
  bool training = false;                // (training: a backward exists)
  int priority = 0;
  int version = 1;       // bump when the text changes meaning; in the cache key and `jitk ls`
  bool generic = false;  // the fallback, refused under Selection::allow_fallback = false
  // The kernel text: a file of kernel_sources/ (built in; $JITK_KERNEL_DIR/<file> overrides it),
  // or, when `text` is given, that text (its name for messages is `file`).
  std::string file;
  std::string text;
  // A text of the user's own (jit/user_kernel.hpp): folders its `file` is looked up in (when `text`
  // is empty) and its `#include`s resolve from, after the text's own folder. The headers found are
  // inlined, so their content is in the cache key, and `#line` directives make compiler messages
  // name `file` and the header's lines. Empty: a shipped text (or a registered one without includes).
  std::vector<std::string> search_path;
  std::vector<DType> dtypes;  // the element types it implements (empty: every dtype the kernel allows)
  bool fusion = true;         // takes the kernel's fusion chains (prologue/epilogue params), where it has them
  // Compiled for the device's arch with this suffix: "a" builds sm_90a code (wgmma, setmaxnreg)
  // that runs on exactly that arch.
  std::string arch_suffix;
  GpuLayout layout;
  // Tile layouts: checks params (tile values resolved) and plans the launch. Params never reach
  // the compiler when it names a problem.
  std::function<TilePlan(const ParamSet&)> tile_plan;
  // Tile layouts whose best default tile depends on the other params (the dtype): the layout whose
  // tile_m, tile_n, tile_k, stages stand for params of 0. Unset: `layout`'s.
  std::function<GpuLayout(const ParamSet&)> tile_defaults;
  std::string note;  // one line for `jitk info --kernels`
  // Words `jitk ls` adds to the description of a launch with these (validated) params, e.g. gemm's
  // "packs A along M/N when large". Unset: none.
  std::function<std::string(const ParamSet&)> launch_note;
  // Every field, for what hashes them: a KernelMapping's identity, which picks jit::get's memo
  // entries. Two function members match only when they hold the same plain function; any other
  // callable (a lambda's captures cannot be compared) makes its mapping unlike every other, so a
  // mapping made again in a loop shares its loaded kernels only when it names plain functions.
  auto fields() const {
    return std::tie(name, backend, min_capability, max_capability, inference, training, priority, version, generic, file,
                    text, search_path, dtypes, fusion, arch_suffix, layout, tile_plan, tile_defaults, note, launch_note);
  }
};

// One launch argument as the kernel text sees it (a kernel declared with jit/user_kernel.hpp): the
// prelude then declares them (CPU: JITK_ARGS, GPU: JITK_PARAMS) so the text names them.
struct ArgumentSpec {
  std::string name;
  std::string type;  // as the text reads it: "const T*", "float*", "double", "long long"
};

struct KernelSpec {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::vector<Implementation> implementations;
  // Where one param bounds another (rotary_dim <= head_dim): checks them together, after each was
  // checked alone and before anything compiles. What is wrong, naming the params, or "" when they suit.
  std::function<std::string(const ParamSet&)> params_check = nullptr;
  // The launch arguments in order, where the kernel declared them (jit/user_kernel.hpp); empty: the
  // text reads them with JITK_ARG(i, type) as its descriptor's pack stored them.
  std::vector<ArgumentSpec> arguments = {};
};

// Adds a kernel of the user's (its own descriptor and text). Throws Error{InvalidParams} when the
// name is taken or the spec is incomplete.
void register_kernel(KernelSpec spec);
// Adds an implementation to a kernel for every thread (shipped or the user's). Throws when the
// kernel is unknown or the name is taken.
void register_implementation(std::string_view kernel, Implementation impl);
// Every kernel this process knows: the shipped ones, then the user's, with their implementations.
std::vector<KernelSpec> registered_kernels();

// While alive, gets on this thread use the mapped implementations for their kernels (when one
// suits the target; else the usual choice, logged). Nested mappings stack: the innermost that
// maps a kernel wins, and destroying a mapping restores the one before. Other threads do not
// see it unless given it: `KernelMapping::current()` there, `KernelMapping adopt(snapshot)` here.
class KernelMapping {
 public:
  struct Frame;
  using Snapshot = std::shared_ptr<const Frame>;

  explicit KernelMapping(std::vector<std::pair<std::string, Implementation>> mapping);
  explicit KernelMapping(Snapshot adopt);  // installs another thread's mappings on this one
  ~KernelMapping();
  KernelMapping(const KernelMapping&) = delete;
  KernelMapping& operator=(const KernelMapping&) = delete;

  static Snapshot current();  // this thread's mappings, to hand to another thread

 private:
  Snapshot previous_;
  const Frame* installed_;
};

// Which implementation a get would use, and why; throws the Error the get would throw.
struct Choice {
  std::string kernel;
  std::string implementation;
  int version = 0;
  bool fallback = false;  // a generic implementation was chosen
  std::string reason;     // one line: why this one over the others
};
Choice choose(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection = {});

// The names of a kernel's implementations whose backend is the target's and whose capability
// range holds its device, and that take `params` when given (modes aside), in registration order:
// what a test or a bench runs side by side with Selection::implementation.
std::vector<std::string> implementations_for(std::string_view kernel, const Target& target, const ParamSet& params = {});

}  // namespace jit
