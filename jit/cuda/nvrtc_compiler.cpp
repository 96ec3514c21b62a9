// Finds libnvrtc (13, then 12; also under $CUDA_HOME), compiles to CUBIN, or PTX for an arch it cannot target.
#include "jit/cuda/nvrtc_compiler.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>

#include <sys/stat.h>

#include "support/hashing.hpp"
#include "jit/cuda/include_scan.hpp"
#include "jit/rtc_compile.hpp"
#include "support/dynamic_library.hpp"
#include "support/logging.hpp"
#include "support/memo_store.hpp"
#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::detail {

using nvrtcResult = int;

struct NvrtcLibrary {
  DynamicLibrary library;
  RtcFunctions rtc{};
  RtcOutput cubin{}, ptx{};
  nvrtcResult (*nvrtcVersion)(int*, int*);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
  nvrtcResult (*nvrtcGetSupportedArchs)(int*);
  NvrtcFacts facts;
};

namespace {

struct Opened {
  NvrtcLibrary lib{};
  std::string reason;
  bool foreign = false;  // a libnvrtc was mapped before jitk opened one (torch's, CuPy's): never remembered
};

// The file remembered facts name (set before the first open, when the keys came from them): opened
// first and by its full path, which the loader never answers with a library of that soname mapped
// by someone else, so a compile runs in the NVRTC its keys name.
std::mutex g_preferred_mutex;
std::string g_preferred_file;

std::string preferred_file() {
  std::lock_guard lock(g_preferred_mutex);
  return g_preferred_file;
}

// Where NVRTC is looked for after the loader's own search (by soname): $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
std::vector<std::string> fallback_folders() {
  std::vector<std::string> folders;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(env); home && *home) folders.push_back(std::string(home) + "/lib64");
  folders.push_back("/usr/local/cuda/lib64");
  return folders;
}

std::atomic<bool> g_opened{false};  // opened() has run (the library is mapped, or could not be)

const Opened& opened() {
  static const Opened o = [] {
    Opened o;
    std::vector<std::string> candidates = {"libnvrtc.so.13", "libnvrtc.so.12"};
    if (std::string file = preferred_file(); !file.empty()) candidates.insert(candidates.begin(), std::move(file));
    o.foreign = library_loaded("libnvrtc.so");
    for (const auto& folder : fallback_folders())
      for (const char* v : {"13", "12"}) candidates.push_back(folder + "/libnvrtc.so." + v);
    auto& l = o.lib;
    l.library = DynamicLibrary::open_first(candidates);
    if (!l.library) {
      o.reason = "cannot open NVRTC (tried libnvrtc.so.13, .so.12, $CUDA_HOME/lib64): " + l.library.error();
      return o;
    }
    SymbolTable symbols;
    symbols.required(l.nvrtcVersion, "nvrtcVersion")
        .required(l.rtc.get_error_string, "nvrtcGetErrorString")
        .required(l.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs")
        .required(l.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs")
        .required(l.rtc.create_program, "nvrtcCreateProgram")
        .required(l.rtc.destroy_program, "nvrtcDestroyProgram")
        .required(l.rtc.compile_program, "nvrtcCompileProgram")
        .required(l.rtc.get_program_log_size, "nvrtcGetProgramLogSize")
        .required(l.rtc.get_program_log, "nvrtcGetProgramLog")
        .required(l.cubin.get_size, "nvrtcGetCUBINSize")
        .required(l.cubin.get, "nvrtcGetCUBIN")
        .required(l.ptx.get_size, "nvrtcGetPTXSize")
        .required(l.ptx.get, "nvrtcGetPTX");
    if (std::string missing = symbols.resolve(l.library); !missing.empty()) {
      o.reason = l.library.path() + " lacks " + missing;
      return o;
    }
    l.library.keep_open();  // compilers hold its functions for the life of the process
    l.nvrtcVersion(&l.facts.major, &l.facts.minor);
    int n = 0;
    l.nvrtcGetNumSupportedArchs(&n);
    l.facts.archs.resize(static_cast<std::size_t>(std::max(n, 0)));
    if (n > 0) l.nvrtcGetSupportedArchs(l.facts.archs.data());
    return o;
  }();
  g_opened.store(true);
  return o;
}

// ---- NVRTC's facts remembered between processes -------------------------------------------------
// A process that only finds its kernels in the cache needs NVRTC's version and architectures for the
// keys, not NVRTC: opening it maps 110 MB and runs its initializers (6-7 ms, 1,650 page faults on
// the build VM). They are remembered beside the toolkit-header fingerprints, with the stamp of where
// the loader would look for NVRTC and the identity of the file it opened; a reader that finds either
// changed (a folder gained or lost a file, a new ld.so.cache, another LD_LIBRARY_PATH or CUDA_HOME,
// the file replaced or rewritten) opens NVRTC and writes them again.
constexpr const char* kFactsMemo = "nvrtc-library";
constexpr std::string_view kFactsHeader = "jitk-nvrtc-library 1";
constexpr std::size_t kMaxFactsBytes = 16 * 1024;

// Everything the loader's choice of NVRTC depends on, hashed ("" when the search cannot be known):
// the folders it searches and what they hold, and $CUDA_HOME / $CUDA_PATH (read at each open).
std::string search_stamp() {
  const std::string searched = library_search_stamp(fallback_folders());
  if (searched.empty()) return "";
  KeyBuilder h;
  h.add("search", searched);
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) h.add(env, std::getenv(env) ? std::getenv(env) : "(unset)");
  return h.finish().hex();
}

std::optional<NvrtcFacts> read_facts(const MemoStore& memos, const std::string& stamp, std::string* named_file = nullptr) {
  const std::optional<std::string> sealed = memos.read(kFactsMemo, kMaxFactsBytes);
  if (!sealed) return std::nullopt;
  const std::optional<std::string_view> text = unseal_memo(*sealed);
  if (!text) return std::nullopt;
  // Exactly: header, search, file, version, archs, end (each line ending in a newline).
  std::vector<std::string_view> lines;
  for (std::string_view rest = *text; !rest.empty();) {
    const auto end = rest.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    lines.push_back(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
  auto value = [&](std::size_t i, std::string_view name) -> std::optional<std::string_view> {
    if (i >= lines.size() || lines[i].substr(0, name.size() + 1) != std::string(name) + " ") return std::nullopt;
    return lines[i].substr(name.size() + 1);
  };
  if (lines.size() != 6 || lines[0] != kFactsHeader || lines[5] != "end") return std::nullopt;
  const auto search = value(1, "search"), file = value(2, "file"), version = value(3, "version"), archs = value(4, "archs");
  if (!search || !file || !version || !archs || *search != stamp) return std::nullopt;
  // file: "<identity: 5 fields> <path>", the path absolute (it may hold spaces); the file must be
  // the one it names now.
  std::size_t space = 0;
  for (int field = 0; field < 5 && space != std::string_view::npos; ++field) space = file->find(' ', space + (field ? 1 : 0));
  if (space == std::string_view::npos || space + 1 >= file->size() || (*file)[space + 1] != '/') return std::nullopt;
  const std::string path(file->substr(space + 1));
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || file->substr(0, space) != stat_identity(st)) return std::nullopt;
  if (named_file) *named_file = path;
  NvrtcFacts f;
  auto numbers = [](std::string_view text, std::vector<int>& out) {
    while (!text.empty()) {
      const auto end = std::min(text.find(' '), text.size());
      int n = -1;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, n);
      if (ec != std::errc() || ptr != text.data() + end || n < 0 || n > 100000) return false;
      out.push_back(n);
      text.remove_prefix(std::min(end + 1, text.size()));
    }
    return true;
  };
  std::vector<int> v;
  if (!numbers(*version, v) || v.size() != 2 || !numbers(*archs, f.archs) || f.archs.empty() || f.archs.size() > 256)
    return std::nullopt;
  f.major = v[0];
  f.minor = v[1];
  return f;
}

// Whether the memo now holds `lib`'s facts (false: not written, e.g. a read-only cache).
bool write_facts(const MemoStore& memos, const std::string& stamp, const NvrtcLibrary& lib) {
  const std::string path = lib.library.loaded_file();
  struct stat st{};
  if (stamp.empty() || path.empty() || path.find('\n') != std::string::npos || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      lib.facts.archs.empty())
    return false;
  std::string text = std::string(kFactsHeader) + "\nsearch " + stamp + "\nfile " + stat_identity(st) + " " + path + "\nversion " +
                     std::to_string(lib.facts.major) + " " + std::to_string(lib.facts.minor) + "\narchs";
  for (int a : lib.facts.archs) text += " " + std::to_string(a);
  text += "\nend\n";
  return memos.write(kFactsMemo, seal_memo(text));  // one that cannot be written costs the next process the open
}

// The facts of the NVRTC this process would open: remembered where `memos` holds them for the file
// the loader would open now, else from opening it (and then remembered, unless someone else's
// NVRTC was mapped first). nullopt when NVRTC cannot be opened (opened().reason says why).
struct Remembered {
  std::mutex mutex;
  std::optional<NvrtcFacts> facts;  // read from the memo, once a process
  std::atomic<bool> settled{false};  // the memo holds this process's NVRTC (read valid, or written)
};
Remembered& remembered() {
  static Remembered r;
  return r;
}

std::optional<NvrtcFacts> facts(const MemoStore* memos) {
  Remembered& r = remembered();
  // Opened already; or a libnvrtc mapped by someone else (torch, CuPy), which dlopen may return
  // whatever the search says: open it (as every process did before facts were remembered).
  if (g_opened.load() || !memos || library_loaded("libnvrtc.so")) {
    const Opened& o = opened();
    if (!o.reason.empty()) return std::nullopt;
    if (memos && !o.foreign && !r.settled.load()) {  // opened by a probe without a writable cache: remember it now
      std::lock_guard lock(r.mutex);
      const std::string stamp = search_stamp();
      if (!r.settled.load() && !stamp.empty() && (read_facts(*memos, stamp) == o.lib.facts || write_facts(*memos, stamp, o.lib)))
        r.settled = true;
    }
    return o.lib.facts;
  }
  std::lock_guard lock(r.mutex);
  if (r.facts) return r.facts;
  const std::string stamp = search_stamp();
  std::string file;
  if (!stamp.empty()) r.facts = read_facts(*memos, stamp, &file);
  if (r.facts) {
    std::lock_guard preferred(g_preferred_mutex);
    if (!g_opened.load()) g_preferred_file = file;
    r.settled = true;
    return r.facts;
  }
  const Opened& o = opened();
  if (!o.reason.empty()) return std::nullopt;
  if (!o.foreign && write_facts(*memos, stamp, o.lib)) r.settled = true;
  return o.lib.facts;
}

// A memo whose facts are not the NVRTC a compile opened: emptied (the next process asks NVRTC).
void forget_facts(const MemoStore* memos) {
  if (memos) memos->write(kFactsMemo, "");
}

// 90 from "sm_90" / "sm_90a"; -1 when not of that form.
int arch_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  try {
    return std::stoi(arch.substr(3));
  } catch (...) {
    return -1;
  }
}

// Toolkit headers for an NVRTC that lacks built-in cuda_fp16.h / cuda_bf16.h.
std::string toolkit_include_dir() {
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(env); home && *home && std::filesystem::exists(std::string(home) + "/include/cuda_fp16.h"))
      return std::string(home) + "/include";
  if (std::filesystem::exists("/usr/local/cuda/include/cuda_fp16.h")) return "/usr/local/cuda/include";
  return "";
}

}  // namespace

std::string NvrtcCompiler::unavailable_reason(const MemoStore* memos) { return facts(memos) ? "" : opened().reason; }

NvrtcCompiler::NvrtcCompiler(std::string arch, bool force_ptx, std::shared_ptr<const MemoStore> memos)
    : arch_(std::move(arch)), memos_(std::move(memos)) {
  std::optional<NvrtcFacts> known = facts(memos_.get());
  if (!known) throw Error(ErrorCode::BackendUnavailable, opened().reason);
  facts_ = std::move(*known);
  int want = arch_number(arch_);
  if (want < 0) throw Error(ErrorCode::InvalidParams, "CUDA arch '" + arch_ + "' is not of the form sm_XY (e.g. sm_90)");
  id_ = "nvrtc " + std::to_string(facts_.major) + "." + std::to_string(facts_.minor);
  if (!force_ptx && std::find(facts_.archs.begin(), facts_.archs.end(), want) != facts_.archs.end()) {
    code_target_ = arch_;  // exact CUBIN; "sm_90a" passes through for Hopper-only instructions
  } else {
    // NVRTC cannot target this GPU: PTX of the newest architecture below it, JIT-compiled by the driver.
    int best = -1;
    for (int a : facts_.archs)
      if (a <= want) best = std::max(best, a);
    if (best < 0) throw Error(ErrorCode::BackendUnavailable, id_ + " cannot generate code for " + arch_);
    code_target_ = "compute_" + std::to_string(best);
    cubin_ = false;
  }
  options_ = {"--gpu-architecture=" + code_target_, "-std=c++17", "--device-as-default-execution-space"};
  include_dir_ = toolkit_include_dir();
  if (!include_dir_.empty()) options_.push_back("--include-path=" + include_dir_);
  // NVRTC's automatic precompiled headers (the PCH does not change the generated code, so it stays
  // out of options() and the key). By default (JITK_NVRTC_PCH unset or auto) only for a compile that
  // starts while no other NVRTC compile of the process runs; 1: for every compile; 0: never.
  // Alone they pay: on the H100, a fresh process's cold compiles of softmax bf16 took 15 ms each
  // instead of 276 ms (a CUB block reduce: 0.15-0.3 s instead of 1.5-2.2 s). Beside others they
  // cost: NVRTC parses the start of a unit and makes its PCH under one lock of the process (futex
  // traces on CPU: a compile takes it twice with -pch, and 8 started together queue there), and a
  // cold start's 8 kernels share no PCH: the Llama layer's cold start on the H100 took 2.79 s with
  // the PCH on every compile, 2.30 s with auto, 2.23 s without (median of 3 each, one machine;
  // docs/decoder-layer.md).
  if (const char* pch = std::getenv("JITK_NVRTC_PCH"); pch && *pch) {
    const std::string v = pch;
    if (v == "0") pch_ = Pch::Off;
    else if (v == "1") pch_ = Pch::On;
    else if (v != "auto")
      warn_once("JITK_NVRTC_PCH", "JITK_NVRTC_PCH='" + printable(v.substr(0, 64)) + "' is not 0, 1 or auto; using auto");
  }
}

namespace {
std::atomic<int> g_compiles_running{0};  // NVRTC compiles running in the process (every arch's compiler)
}  // namespace

int NvrtcCompiler::compiles_running() { return g_compiles_running.load(); }

std::string NvrtcCompiler::external_headers_fingerprint(const SourceUnit& unit) const {
  if (include_dir_.empty()) return "";
  // What the scan starts from, named by its hash (no text is copied on this path, a warm get's):
  // the folder, the unit's own headers and every #include named by any of its texts (a kernel text
  // of its own that includes CUB gets a fingerprint of its own).
  std::vector<std::string> names;
  for (const auto& h : unit.headers)
    for (auto& n : included_names(h.text)) names.push_back(std::move(n));
  for (auto& n : included_names(unit.main.text)) names.push_back(std::move(n));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  KeyBuilder start;
  start.add("include dir", include_dir_);
  for (const auto& h : unit.headers) start.add("own header " + h.name, h.text);
  for (const auto& n : names) start.add("#include", n);
  const std::string scan = start.finish().hex();
  std::lock_guard lock(fingerprint_mutex_);
  auto& fp = fingerprints_[scan];
  if (fp.empty()) {
    std::vector<std::string> roots;
    for (const auto& h : unit.headers) roots.push_back(h.text);
    roots.push_back(unit.main.text);
    // The memo is named after everything the scan starts from.
    fp = !memos_ ? fingerprint_includes(roots, include_dir_, unit.headers)
                 : fingerprint_includes_memoized(roots, include_dir_, unit.headers, *memos_, scan);
  }
  return fp;
}

CompiledArtifact NvrtcCompiler::compile(const SourceUnit& unit) const {
  std::vector<std::string> options = options_;
  struct Running {
    int before = g_compiles_running.fetch_add(1);
    ~Running() { g_compiles_running.fetch_sub(1); }
  } running;
  if (pch_ == Pch::On || (pch_ == Pch::Alone && running.before == 0)) options.push_back("-pch");
  const NvrtcLibrary& lib = library();
  return rtc_compile(lib.rtc, cubin_ ? lib.cubin : lib.ptx, {unit, std::move(options), "cuda:" + arch_, id_});
}

const NvrtcLibrary& NvrtcCompiler::library() const {
  const Opened& o = opened();  // the first compile of a process whose keys came from remembered facts opens NVRTC here
  if (!o.reason.empty()) throw Error(ErrorCode::BackendUnavailable, o.reason);
  if (!(o.lib.facts == facts_)) {
    forget_facts(memos_.get());  // a wrong memo costs at most this process
    throw Error(ErrorCode::BackendUnavailable,
                o.lib.library.path() + " is NVRTC " + std::to_string(o.lib.facts.major) + "." + std::to_string(o.lib.facts.minor) +
                    ", but this process keyed its kernels for " + id_ +
                    " (remembered by an earlier process): NVRTC changed while this one ran; start it again");
  }
  return o.lib;
}

}  // namespace jit::detail
