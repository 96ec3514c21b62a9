// Helpers shared by the tests: temporary folders, running the tool and client as processes, files.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace jitk_test {

namespace fs = std::filesystem;

// The programs the process-level tests run (paths from CMake).
inline const std::string kClient = JITK_TEST_CLIENT;
inline const std::string kTool = JITK_TOOL;

// Fresh random inputs for every run (METHOD.md); one generator per thread.
inline std::mt19937_64& rng() {
  thread_local std::mt19937_64 r(std::random_device{}());
  return r;
}

// n values uniform in [lo, hi), each made a T by `convert` (a cast, or rounding to f16/bf16).
template <class T, class Convert> std::vector<T> random_values(std::size_t n, double lo, double hi, Convert convert) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = convert(d(rng()));
  return v;
}

// A fresh folder under /tmp, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "jitk-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line with extra "NAME=value" environment entries in front.
inline CommandResult run(const std::string& command, const std::string& env = "") {
  TempDir out_dir;
  auto out_file = out_dir.path() / "out";
  std::string line = env + " " + command + " > '" + out_file.string() + "' 2>&1";
  int status = std::system(line.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  return r;
}

inline std::string cache_env(const TempDir& dir) { return "JITK_CACHE_DIR='" + dir.str() + "'"; }

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const fs::path& p, const std::string& bytes) {
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Every blob file under root/blobs.
inline std::vector<fs::path> blob_files(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(root / "blobs")) return out;
  for (auto& e : fs::recursive_directory_iterator(root / "blobs", ec))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  return out;
}

inline std::size_t count_lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = 0; (pos = text.find(needle, pos)) != std::string::npos; pos += needle.size()) ++n;
  return n;
}

// A cache folder of this test program's own, set in the environment before the library first reads
// it (call from a namespace-scope initializer).
inline const TempDir& own_cache_dir() {
  static TempDir dir;
  static const bool set = ::setenv("JITK_CACHE_DIR", dir.str().c_str(), 1) == 0;
  (void)set;
  return dir;
}

// ---- token rows with a stride (q, k and v as column slices of one fused QKV buffer) ----------

// Packed rows [tokens, width] placed `stride` apart from column `col` of `into` (tokens x stride elements).
template <class T>
void scatter_rows(std::vector<T>& into, const std::vector<T>& rows, std::int64_t tokens, std::int64_t width, std::int64_t stride, std::int64_t col) {
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t i = 0; i < width; ++i) into[static_cast<std::size_t>(t * stride + col + i)] = rows[static_cast<std::size_t>(t * width + i)];
}
// One column slice of a fused buffer: packed rows [tokens, width] placed from column `col`.
template <class T> struct RowSlice {
  const std::vector<T>& rows;
  std::int64_t width, col;
};
// A fused QKV buffer [tokens, stride] holding the slices, every other element all-ones bits (NaN in
// f32, f16 and bf16): what a kernel must neither let into its results nor write.
template <class T>
std::vector<T> fused_rows(std::int64_t tokens, std::int64_t stride, std::initializer_list<RowSlice<T>> slices) {
  std::vector<T> out(static_cast<std::size_t>(tokens * stride));
  std::memset(static_cast<void*>(out.data()), 0xff, out.size() * sizeof(T));
  for (const auto& s : slices) scatter_rows(out, s.rows, tokens, s.width, stride, s.col);
  return out;
}
// The rows back out, packed.
template <class T>
std::vector<T> gather_rows(const std::vector<T>& from, std::int64_t tokens, std::int64_t width, std::int64_t stride, std::int64_t col) {
  std::vector<T> out(static_cast<std::size_t>(tokens * width));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t i = 0; i < width; ++i) out[static_cast<std::size_t>(t * width + i)] = from[static_cast<std::size_t>(t * stride + col + i)];
  return out;
}
// Elements of `got` that differ in any bit from `before` outside the column ranges {col, width}
// of each `stride`-long row (the padding between strided rows and any other slice: -1 on a size mismatch).
template <class T>
std::int64_t changed_outside(const std::vector<T>& got, const std::vector<T>& before, std::int64_t stride,
                             std::initializer_list<std::pair<std::int64_t, std::int64_t>> columns) {
  if (got.size() != before.size()) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::int64_t c = static_cast<std::int64_t>(i) % stride;
    bool inside = false;
    for (const auto& [col, width] : columns) inside = inside || (c >= col && c < col + width);
    if (!inside) n += std::memcmp(&got[i], &before[i], sizeof(T)) != 0;
  }
  return n;
}

}  // namespace jitk_test
