// Specialization: kernel text + parameters -> one self-contained source unit with a rendered prelude.
#pragma once
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "jit/jit.hpp"
#include "jit/kernel_catalog.hpp"

namespace jit::detail {

// The symbol every specialized unit gives its entry point (the prelude defines JITK_ENTRY as it);
// each driver looks the kernel up under this name.
inline constexpr const char* kEntrySymbol = "jitk_entry";

struct SourceFile {
  std::string name;
  std::string text;
};

// What a tile plan (TilePlan) decides of a launch, by the names both it and LaunchShape give them:
// the one listing of what tile_shape carries over (a build check holds TilePlan to it).
template <class Tile> auto planned_fields(Tile& t) {
  return std::tie(t.shared_bytes, t.tile_m, t.tile_n, t.tile_k, t.blocks_per_sm, t.cluster, t.max_split_k, t.stream_k);
}

// How a GPU launch covers the work (CPU launches split work items over threads instead).
struct LaunchShape {
  int block = 1;                     // threads per block
  std::int64_t items_per_block = 1;  // work items one block covers
  std::int64_t elements_per_item = 1;  // e.g. a row of silu_and_mul covers hidden elements
  // Tile layouts: a block covers tile_m work items (rows) by tile_n work columns, with this much
  // dynamic shared memory, and takes tensor maps of its operands after the work count.
  std::int64_t tile_m = 0, tile_n = 0;
  std::int64_t shared_bytes = 0;
  bool tensor_maps = false;
  bool aligned_rows = false;  // GpuLayout::aligned_rows
  std::int64_t tile_k = 0;
  int blocks_per_sm = 0;  // persistent: the grid is at most this many blocks per SM
  int cluster = 1;        // blocks a cluster (along x)
  int max_split_k = 1;    // blocks that may share a tile's K walk in one cluster, chosen at launch (TilePlan)
  bool stream_k = false;  // the last wave's tiles may be finished stream-K, chosen at launch (TilePlan)
};

struct SourceUnit {
  std::string kernel;
  std::string params_text;           // canonical "dtype=f32,hidden=4096"
  ParamSet params;                   // the same, as given to specialize
  SourceFile main;                   // prelude + kernel text
  int text_first_line = 1;           // main's line where the kernel text begins (after the prelude)
  std::vector<SourceFile> headers;   // jitk's own headers the text may include
  std::string implementation;        // which implementation's text, e.g. "cuda-sm90"
  int implementation_version = 1;
  std::string text_origin;           // "embedded", "registered" or the JITK_KERNEL_DIR path used
  LaunchShape shape;                 // GPU backends
};

// The text of a file of kernel_sources/: from $JITK_KERNEL_DIR when it has the file, else the
// copy embedded at build time.
// `fallback_text`, when given, stands in for the embedded copy (a user's registered text).
SourceFile kernel_file(const std::string& name, std::string* origin = nullptr, const std::string* fallback_text = nullptr);

// The texts a specialization of `impl` is made of, as read now (kernel_file): the kernel text and
// the headers handed to the compiler with it.
struct UnitTexts {
  SourceFile text;
  std::string origin;  // kernel_file's origin of text
  std::vector<SourceFile> headers;
};
UnitTexts unit_texts(const KernelDef& def, const Implementation& impl);

// A unit's every field but its texts (main, headers, text_first_line, text_origin): what loading
// and launching an artifact of it need. params: validated (validate_params).
SourceUnit describe_unit(const KernelDef& def, const Implementation& impl, const ParamSet& params);

// params: validated (validate_params). The implementation's backend is the unit's.
SourceUnit specialize(const KernelDef& def, const Implementation& impl, const ParamSet& params);
// The same from texts already read (unit_texts(def, impl)).
SourceUnit specialize(const KernelDef& def, const Implementation& impl, const ParamSet& params, UnitTexts texts);
// The backend's generic implementation (raw baselines in benches and tests).
SourceUnit specialize(const KernelDef& def, const ParamSet& params, Backend backend);

// "  12 | text" per line, for compile errors.
std::string with_line_numbers(const std::string& text);

// How a launch of `impl` with these (validated) params covers its work, in a few words for
// `jitk ls`: "row/block 256 thr", "256 thr x 8 elem", "8 rows/block", "all cores".
std::string describe_launch(const Implementation& impl, const ParamSet& params, std::string_view kernel = {});

}  // namespace jit::detail
