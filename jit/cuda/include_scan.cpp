// Scans #include lines and hashes the toolkit headers they reach (for NVRTC's cache keys).
#include "jit/cuda/include_scan.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "support/hashing.hpp"

namespace jit::detail {

std::vector<std::string> included_names(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = text.find("include", pos)) != std::string::npos) {
    std::size_t line = text.rfind('\n', pos);
    line = line == std::string::npos ? 0 : line + 1;
    std::size_t p = line;
    while (p < pos && (text[p] == ' ' || text[p] == '\t')) ++p;
    bool directive = p < pos && text[p] == '#';
    pos += 7;
    if (!directive) continue;
    std::size_t q = pos;
    while (q < text.size() && (text[q] == ' ' || text[q] == '\t')) ++q;
    if (q >= text.size() || (text[q] != '<' && text[q] != '"')) continue;
    char close = text[q] == '<' ? '>' : '"';
    std::size_t end = text.find(close, q + 1);
    if (end != std::string::npos && text.find('\n', q) > end) out.push_back(text.substr(q + 1, end - q - 1));
  }
  return out;
}

std::string fingerprint_includes(const std::vector<std::string>& roots, const std::string& include_dir,
                                 const std::vector<SourceFile>& unit_headers, std::vector<std::string>* paths_read) {
  namespace fs = std::filesystem;
  KeyBuilder hash;
  std::set<std::string> seen;
  std::vector<std::pair<std::string, fs::path>> pending;  // (name, folder of the includer)
  for (const auto& r : roots)
    for (auto& n : included_names(r)) pending.push_back({n, include_dir});
  while (!pending.empty()) {
    auto [name, from] = pending.back();
    pending.pop_back();
    bool own = std::any_of(unit_headers.begin(), unit_headers.end(), [&](const SourceFile& h) { return h.name == name; });
    if (own) continue;
    std::error_code ec;
    fs::path found;
    for (const fs::path& dir : {from, fs::path(include_dir)})
      if (fs::is_regular_file(dir / name, ec)) {
        found = fs::weakly_canonical(dir / name, ec);
        break;
      }
    if (found.empty() || !seen.insert(found.string()).second) continue;
    std::ifstream in(found, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    hash.add(found.string(), text);
    if (paths_read) paths_read->push_back(found.string());
    for (auto& n : included_names(text)) pending.push_back({n, found.parent_path()});
  }
  return hash.finish().hex() + " (" + std::to_string(seen.size()) + " toolkit headers)";
}

namespace {

// size, mtime (ns) and inode of each file: what changes when a toolkit is upgraded or edited.
std::string metadata_stamp(const std::vector<std::string>& paths) {
  KeyBuilder stamp;
  for (const auto& p : paths) {
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return "";  // a header went away: rescan
    stamp.add(p, std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                     std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino));
  }
  return stamp.finish().hex();
}

}  // namespace

std::string fingerprint_includes_memoized(const std::vector<std::string>& roots, const std::string& include_dir,
                                          const std::vector<SourceFile>& unit_headers, const std::string& memo_file) {
  // memo: line 1 stamp, line 2 fingerprint, then one header path per line
  if (std::ifstream in(memo_file); in) {
    std::string stamp, fingerprint, path;
    std::vector<std::string> paths;
    std::getline(in, stamp);
    std::getline(in, fingerprint);
    while (std::getline(in, path)) paths.push_back(path);
    if (!stamp.empty() && !fingerprint.empty() && metadata_stamp(paths) == stamp) return fingerprint;
  }
  std::vector<std::string> paths;
  std::string fingerprint = fingerprint_includes(roots, include_dir, unit_headers, &paths);
  std::string stamp = metadata_stamp(paths);
  // Written to a temp file and renamed: readers see an old memo or a whole new one. A memo that
  // cannot be written only costs the next process a rescan.
  std::string temp = memo_file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << stamp << "\n" << fingerprint << "\n";
    for (const auto& p : paths) out << p << "\n";
  }
  if (std::rename(temp.c_str(), memo_file.c_str()) != 0) std::remove(temp.c_str());
  return fingerprint;
}

}  // namespace jit::detail
