// Scans #include lines and hashes the toolkit headers they reach (for NVRTC's cache keys).
#include "jit/cuda/include_scan.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string_view>

#include "support/hashing.hpp"
#include "support/regular_file.hpp"

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

constexpr std::string_view kMemoHeader = "jitk-toolkit-headers 2\n";
constexpr std::size_t kMaxMemoBytes = 256 * 1024;

// What changes when a toolkit is upgraded or edited: each header's device, inode, size and mtime (ns),
// and those of the folders they are in (a header added beside them could shadow one). "" when one
// cannot be stat'ed (gone: rescan). The folder that holds them all (the toolkit's include/, usually)
// is opened once and every header and folder is stat'ed relative to it: a warm get walks no path
// from / again, and opens no folder but that one. The values, and so the stamp, are those stat()
// gives (symbolic links followed), so remembered stamps stay valid.
std::string metadata_stamp(const std::vector<std::string>& paths) {
  if (paths.empty()) return KeyBuilder().finish().hex();
  auto folder_of = [](const std::string& p) -> std::optional<std::string> {
    const auto slash = p.rfind('/');
    if (p.empty() || p[0] != '/' || slash == std::string::npos || slash + 1 == p.size()) return std::nullopt;
    return slash == 0 ? std::string("/") : p.substr(0, slash);
  };
  // The folders, in name order (as the stamp lists them), and the longest folder holding them all.
  std::map<std::string, struct stat> folders;
  std::string base;
  for (const auto& p : paths) {
    auto folder = folder_of(p);
    if (!folder) return "";
    folders.try_emplace(*folder);
    if (base.empty()) base = *folder;
    // Up from the base until it holds this folder too ("/" holds every one).
    while (!(*folder == base || (folder->compare(0, base.size(), base) == 0 && (base == "/" || (*folder)[base.size()] == '/')))) {
      const auto up = base.rfind('/');
      base = up == 0 ? "/" : base.substr(0, up);
    }
  }
  // A path relative to the base (the base itself: "").
  auto relative = [&](const std::string& p) {
    if (p == base) return std::string();
    return base == "/" ? p.substr(1) : p.substr(base.size() + 1);
  };
  const int fd = ::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return "";
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_base{fd};
  auto stat_at = [&](const std::string& p, struct stat* st) {
    const std::string rel = relative(p);
    return rel.empty() ? ::fstat(fd, st) == 0 : ::fstatat(fd, rel.c_str(), st, 0) == 0;
  };
  KeyBuilder stamp;
  auto add = [&](const std::string& p, const struct stat& st) {
    stamp.add(p, stat_identity(st));
  };
  for (const auto& p : paths) {
    struct stat st{};
    if (!stat_at(p, &st)) return "";
    add(p, st);
  }
  for (auto& [name, st] : folders)
    if (!stat_at(name, &st)) return "";
  for (const auto& [name, st] : folders) add(name, st);
  return stamp.finish().hex();
}

// The memo's text: "fingerprint <fp>", "stamp <hex>", then "path <p>" per header; nullopt when it is
// not exactly that.
struct ToolkitMemo {
  std::string fingerprint, stamp;
  std::vector<std::string> paths;
};

std::optional<ToolkitMemo> parse_memo(std::string_view text) {
  if (text.substr(0, kMemoHeader.size()) != kMemoHeader) return std::nullopt;
  text.remove_prefix(kMemoHeader.size());
  ToolkitMemo m;
  int line_no = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos || space + 1 == line.size()) return std::nullopt;
    const std::string_view name = line.substr(0, space), value = line.substr(space + 1);
    if (line_no == 0 && name == "fingerprint") m.fingerprint = value;
    else if (line_no == 1 && name == "stamp") m.stamp = value;
    else if (line_no >= 2 && name == "path" && value[0] == '/') m.paths.emplace_back(value);
    else return std::nullopt;
    ++line_no;
  }
  if (line_no < 2) return std::nullopt;
  return m;
}

}  // namespace

std::string fingerprint_includes_memoized(const std::vector<std::string>& roots, const std::string& include_dir,
                                          const std::vector<SourceFile>& unit_headers, const MemoStore& memos,
                                          const std::string& memo_name) {
  if (auto sealed = memos.read(memo_name, kMaxMemoBytes))
    if (auto text = unseal_memo(*sealed))
      if (auto memo = parse_memo(*text); memo && metadata_stamp(memo->paths) == memo->stamp) return memo->fingerprint;
  std::vector<std::string> paths;
  std::string fingerprint = fingerprint_includes(roots, include_dir, unit_headers, &paths);
  const std::string stamp = metadata_stamp(paths);
  if (stamp.empty()) return fingerprint;  // a header went away while scanning: nothing to remember
  std::string text(kMemoHeader);
  text += "fingerprint " + fingerprint + "\nstamp " + stamp + "\n";
  for (const auto& p : paths) {
    if (p.empty() || p[0] != '/' || p.find('\n') != std::string::npos) return fingerprint;  // not a line: not remembered
    text += "path " + p + "\n";
  }
  memos.write(memo_name, seal_memo(text));  // one that cannot be written costs the next process a rescan
  return fingerprint;
}

}  // namespace jit::detail
