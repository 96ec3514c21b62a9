// Helpers shared by the tests: temporary folders, running the tool and client as processes, files.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

}  // namespace jitk_test
