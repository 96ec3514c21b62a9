// Renders the specialization prelude (#defines and a type alias) in front of the kernel text.
#include "jit/specializer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "jit/chain.hpp"
#include "jit/chain_codegen.hpp"
#include "jit/embedded_sources.hpp"
#include "jit/user_text.hpp"
#include "support/field_count.hpp"
#include "support/logging.hpp"
#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

// Headers of kernel_sources/ that kernel text may include, per backend.
const char* const kCpuHeaders[] = {"jitk_cpu.h"};
const char* const kGpuHeaders[] = {"jitk_gpu.h"};
// Headers only some texts include (Hopper's; gemm's gate): handed to the compiler, and so part of
// the key, only for a text that includes them.
const char* const kGpuOptionalHeaders[] = {"jitk_sm90.h", "jitk_gate.h"};
const char* const kCpuOptionalHeaders[] = {"jitk_gate.h"};

constexpr int kWarp = 32, kMaxBlock = 1024, kMaxPacksPerThread = 32;

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// An implementation name as a macro name: "cuda-sm90" -> CUDA_SM90.
std::string macro_name(const std::string& name) {
  std::string out = upper(name);
  for (auto& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return out;
}

const char* c_type(const std::string& dtype) {
  if (dtype == "f64") return "double";
  if (dtype == "f32") return "float";
  // jitk_gpu.h names the 16-bit types for every GPU backend (__half, __nv_bfloat16 on CUDA).
  if (dtype == "f16") return "jitk_half";
  if (dtype == "bf16") return "jitk_bfloat16";
  return nullptr;
}

std::int64_t dtype_bytes(const std::string& dtype) { return dtype == "f64" ? 8 : dtype == "f32" ? 4 : 2; }

// Row-shaped tensors a prologue loads along with the row.
std::int64_t prologue_tensors(const ParamSet& params) {
  const auto* v = params.find("prologue");
  if (!v) return 0;
  const Chain chain = Chain::parse(std::get<std::string>(*v));
  std::int64_t n = 0;
  for (int i = 0; i < chain.size(); ++i) n += step_operand(chain[i]) == OperandKind::Tensor;
  return n;
}

// A plan's every field but its problem, its threads (LaunchShape's block) and its shared_limit (a refusal's) is in planned_fields.
static_assert(field_count<TilePlan>() == std::tuple_size_v<decltype(planned_fields(std::declval<TilePlan&>()))> + 3,
              "a new TilePlan field: list it in planned_fields (jit/specializer.hpp) so launches carry it");

LaunchShape tile_shape(const std::string& kernel, const Implementation& impl, const ParamSet& params) {
  const ParamSet resolved = resolve_tile(impl, params);
  const TilePlan plan = tile_plan(impl, resolved);
  if (!plan.problem.empty())
    throw Error(ErrorCode::InvalidParams, impl.name + ": " + plan.problem, params_error_fields(kernel, &impl, resolved));
  LaunchShape shape;
  planned_fields(shape) = planned_fields(plan);
  shape.block = plan.threads;
  shape.tensor_maps = impl.layout.tensor_maps;
  shape.aligned_rows = impl.layout.aligned_rows;
  return shape;
}

LaunchShape gpu_shape(const GpuLayout& layout, const ParamSet& params) {
  const auto* d = params.find("dtype");
  const std::int64_t vector = 16 / (d ? dtype_bytes(std::get<std::string>(*d)) : 4);
  const auto* h = params.find("hidden");
  const std::int64_t hidden = h ? std::get<std::int64_t>(*h) : 1;
  LaunchShape shape;
  switch (layout.kind) {
    case GpuLayout::Kind::BlockPerRow: {
      // Enough threads that each keeps about packs_per_thread 16-byte packs of the row, but no
      // more than layout.block of them for each array held (long rows: more packs a thread,
      // measured faster on the H100 than more threads to reduce over), and never over 32 packs a
      // thread (registers). Two arrays at hidden 16384 (bf16): 256 threads spilled (0.87 of
      // copy), 512 did not (0.97).
      const std::int64_t packs = hidden % vector == 0 ? hidden / vector : hidden;
      const std::int64_t arrays = layout.row_arrays + prologue_tensors(params);
      const std::int64_t cap = std::min<std::int64_t>(kMaxBlock, layout.block * arrays);
      std::int64_t threads = (packs + layout.packs_per_thread - 1) / layout.packs_per_thread;
      threads = std::max(std::min<std::int64_t>(threads, cap), (packs + kMaxPacksPerThread - 1) / kMaxPacksPerThread);
      threads = (threads + kWarp - 1) / kWarp * kWarp;
      shape.block = static_cast<int>(std::clamp<std::int64_t>(threads, kWarp, kMaxBlock));
      shape.items_per_block = 1;
      break;
    }
    case GpuLayout::Kind::WarpPerRow:
      shape.block = layout.block;
      shape.items_per_block = layout.block / kWarp;
      break;
    case GpuLayout::Kind::Elementwise:
      shape.block = layout.block;
      shape.items_per_block = layout.block * vector;
      shape.elements_per_item = hidden;  // 1 for kernels without rows (saxpy)
      break;
    case GpuLayout::Kind::Tile:
      throw Error(ErrorCode::Internal, "tile layouts are planned by tile_shape");
  }
  return shape;
}

// A declared kernel's arguments as its text names them: CPU `JITK_ARGS` (statements reading them
// from the packed values, for the top of JITK_CPU_KERNEL's body), GPU `JITK_PARAMS` (the entry's
// parameter list, ending with the work count the launcher appends).
std::string argument_declarations(const std::vector<ArgumentSpec>& arguments, bool gpu) {
  std::string out = gpu ? "#define JITK_PARAMS " : "#define JITK_ARGS ";
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const auto& a = arguments[i];
    if (gpu) out += a.type + " " + a.name + ", ";
    else out += a.type + " " + a.name + " = JITK_ARG(" + std::to_string(i) + ", " + a.type + "); (void)" + a.name + "; ";
  }
  if (gpu) out += "long long jitk_work_items";
  return out + "\n";
}

}  // namespace

// A kernel's text (or a header of kernel_sources/) is a few thousand lines, never this.
constexpr std::int64_t kMaxKernelTextBytes = 16 << 20;

SourceFile kernel_file(const std::string& name, std::string* origin, const std::string* fallback_text) {
  if (const char* dir = std::getenv("JITK_KERNEL_DIR"); dir && *dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      warn_once("kernel-dir", std::string("JITK_KERNEL_DIR='") + dir + "' is not a folder; using the kernel text built into jitk");
    } else if (const std::string path = std::string(dir) + "/" + name; std::filesystem::symlink_status(path, ec).type() !=
                                                                         std::filesystem::file_type::not_found) {
      // There is something under the name: the user's text. A directory, a FIFO, a device or a
      // file too large is refused (read, it would be empty text, block or fill memory).
      std::string why;
      auto text = read_regular_file(path, kMaxKernelTextBytes, &why);
      if (!text)
        throw Error(ErrorCode::InvalidArgument, "JITK_KERNEL_DIR: " + printable(path) + " cannot be used as kernel text: " + why);
      if (origin) *origin = path;
      return {name, std::move(*text)};
    } else {
      // A partial override is normal (edit one kernel, keep the rest): INFO, once per file.
      static std::mutex mutex;
      static std::set<std::string> said;
      std::lock_guard lock(mutex);
      if (said.insert(name).second)
        log().info("JITK_KERNEL_DIR={} has no {}; using the copy built into jitk", dir, name);
    }
  }
  if (fallback_text) {
    if (origin) *origin = "registered";
    return {name, *fallback_text};
  }
  for (const auto& e : embedded_sources()) {
    if (e.file == name) {
      if (origin) *origin = "embedded";
      return {name, std::string(e.text)};
    }
  }
  throw Error(ErrorCode::Internal, "kernel text '" + name + "' is neither embedded nor in $JITK_KERNEL_DIR");
}

SourceUnit specialize(const KernelDef& def, const ParamSet& params, Backend backend) {
  return specialize(def, generic_implementation(def, backend), params);
}

UnitTexts unit_texts(const KernelDef& def, const Implementation& impl) {
  UnitTexts t;
  t.text = !impl.search_path.empty() ? user_kernel_text(def.name, impl, &t.origin)
                                     : kernel_file(impl.file, &t.origin, impl.text.empty() ? nullptr : &impl.text);
  const auto optional = [&](const auto& names) {
    for (const char* h : names)
      if (t.text.text.find("#include \"" + std::string(h) + "\"") != std::string::npos) t.headers.push_back(kernel_file(h));
  };
  if (impl.backend != Backend::Cpu) {
    for (const char* h : kGpuHeaders) t.headers.push_back(kernel_file(h));
    optional(kGpuOptionalHeaders);
  } else {
    for (const char* h : kCpuHeaders) t.headers.push_back(kernel_file(h));
    optional(kCpuOptionalHeaders);
  }
  return t;
}

SourceUnit describe_unit(const KernelDef& def, const Implementation& impl, const ParamSet& params) {
  SourceUnit unit;
  unit.kernel = def.name;
  unit.params_text = params.to_string();
  unit.params = params;
  unit.implementation = impl.name;
  unit.implementation_version = impl.version;
  if (impl.backend != Backend::Cpu)
    unit.shape = impl.layout.kind == GpuLayout::Kind::Tile ? tile_shape(def.name, impl, params) : gpu_shape(impl.layout, params);
  return unit;
}

SourceUnit specialize(const KernelDef& def, const Implementation& impl, const ParamSet& params) {
  return specialize(def, impl, params, unit_texts(def, impl));
}

SourceUnit specialize(const KernelDef& def, const Implementation& impl, const ParamSet& params, UnitTexts texts) {
  const bool gpu = impl.backend != Backend::Cpu;
  SourceUnit unit = describe_unit(def, impl, params);

  std::ostringstream prelude;
  prelude << "// jitk specialization of " << def.name << " (" << unit.params_text << "), implementation "
          << impl.name << " v" << impl.version << "\n";
  prelude << "#define JITK_ENTRY " << kEntrySymbol << "\n";
  // One text may serve several kernels (softmax and log_softmax): it tells them apart by this.
  prelude << "#define JITK_KERNEL_" << upper(def.name) << " 1\n";
  // ... and several implementations (rms_norm's cuda and cuda-sm90) by this.
  prelude << "#define JITK_IMPLEMENTATION_" << macro_name(impl.name) << " 1\n";
  const bool tiled = impl.layout.kind == GpuLayout::Kind::Tile;
  if (gpu) {
    prelude << "#define JITK_BLOCK " << unit.shape.block << "\n";
    if (tiled) prelude << "#define JITK_SHARED_BYTES " << unit.shape.shared_bytes << "\n";
    if (tiled && unit.shape.blocks_per_sm > 0) prelude << "#define JITK_BLOCKS_PER_SM " << unit.shape.blocks_per_sm << "\n";
    if (tiled && unit.shape.max_split_k > 1) prelude << "#define JITK_MAX_SPLIT_K " << unit.shape.max_split_k << "\n";
    if (tiled && unit.shape.stream_k) prelude << "#define JITK_STREAM_K 1\n";
    if (impl.layout.kind == GpuLayout::Kind::WarpPerRow)
      prelude << "#define JITK_ROWS_PER_BLOCK " << unit.shape.items_per_block << "\n";
    prelude << "#include \"" << kGpuHeaders[0] << "\"  // defines the 16-bit types T may name\n";
  }
  bool has_type = false;
  // Tile params of 0 are written as the implementation's defaults.
  const ParamSet written = tiled ? resolve_tile(impl, params) : params;
  for (const auto& [name, value] : written.values()) {
    const bool chain = std::any_of(def.params.begin(), def.params.end(), [&](const ParamSpec& s) { return s.chain && s.name == name; });
    if (chain) continue;  // chain_code below writes them
    if (const auto* n = std::get_if<std::int64_t>(&value)) {
      prelude << "#define JITK_" << upper(name) << " " << *n << "LL\n";
    } else {
      const auto& text = std::get<std::string>(value);
      prelude << "#define JITK_" << upper(name) << "_" << upper(text) << " 1\n";
      if (name == "dtype" && c_type(text)) {
        prelude << "typedef " << c_type(text) << " T;\n";
        has_type = true;
      }
    }
  }
  const bool users_text = !impl.search_path.empty();
  SourceFile& text = texts.text;
  unit.text_origin = std::move(texts.origin);
  if (!def.arguments.empty()) prelude << argument_declarations(def.arguments, gpu);
  // Text that fuses chains (jit/chain.hpp) names jitk_chain; only that text gets it, so a user's
  // text keeps a prelude of plain #defines.
  if (has_type && text.text.find("jitk_chain") != std::string::npos) {
    if (!gpu) prelude << "#include \"" << kCpuHeaders[0] << "\"  // the chain's math\n";
    prelude << chain_code(params, gpu);
  }
  // The text's own lines from here on: compiler messages name the user's file and line.
  if (users_text) prelude << first_line_directive(impl.file);
  const std::string rendered = prelude.str();
  unit.text_first_line = 1 + static_cast<int>(std::count(rendered.begin(), rendered.end(), '\n'));
  unit.main = {text.name, rendered + text.text};
  unit.headers = std::move(texts.headers);
  return unit;
}

std::string describe_launch(const Implementation& impl, const ParamSet& params, std::string_view kernel) {
  const bool tiled = impl.layout.kind == GpuLayout::Kind::Tile;
  if (tiled) {
    const ParamSet r = resolve_tile(impl, params);
    const TilePlan plan = tile_plan(impl, r);
    std::string out = "tile " + std::to_string(plan.tile_m) + "x" + std::to_string(plan.tile_n) + "x" + std::to_string(plan.tile_k);
    if (impl.backend == Backend::Cpu) return out + ", all cores";
    const auto* stages = r.find("stages");
    if (stages) out += " " + std::to_string(std::get<std::int64_t>(*stages)) + " st";
    if (plan.cluster > 1) out += ", clusters of " + std::to_string(plan.cluster);
    if (plan.max_split_k > 1) out += ", K split <= " + std::to_string(plan.max_split_k);
    if (plan.stream_k) out += ", stream-K tail";
    if (impl.launch_note)
      if (std::string note = impl.launch_note(params); !note.empty()) out += ", " + note;
    return out + ", " + std::to_string(plan.threads) + " thr";
  }
  if (impl.backend == Backend::Cpu) return "all cores";
  const LaunchShape shape = gpu_shape(impl.layout, params);
  const std::string threads = std::to_string(shape.block) + " thr";
  switch (impl.layout.kind) {
    case GpuLayout::Kind::BlockPerRow: return "row/block " + threads;
    case GpuLayout::Kind::WarpPerRow: return std::to_string(shape.items_per_block) + " rows/block " + threads;
    case GpuLayout::Kind::Elementwise:
    case GpuLayout::Kind::Tile: break;
  }
  return threads + " x " + std::to_string(shape.items_per_block / shape.block) + " elem";
}

std::string with_line_numbers(const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    out.width(5);
    out << n << " | " << line << "\n";
  }
  return out.str();
}

}  // namespace jit::detail
