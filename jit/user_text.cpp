// Reads a user's kernel text and inlines the user's headers it includes, with #line directives.
#include "jit/user_text.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

namespace fs = std::filesystem;

// A kernel text or one header is a few thousand lines, never this; a unit with its headers neither.
constexpr std::int64_t kMaxFileBytes = 16 << 20;
constexpr std::size_t kMaxUnitBytes = 64 << 20;
constexpr int kMaxIncludeDepth = 64;
constexpr int kMaxInclusions = 4096;  // headers inlined into one unit (a header included twice counts twice)

// A file name as a C string literal for #line: quotes and backslashes escaped, control characters dropped.
std::string line_name(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
  }
  return out + "\"";
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

bool inside(const fs::path& file, const fs::path& root) {
  auto f = file.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++f) {
    if (r->empty()) continue;  // a trailing separator
    if (f == file.end() || *f != *r) return false;
  }
  return true;
}

bool names_parent(const fs::path& p) {
  for (const auto& part : p)
    if (part == "..") return true;
  return false;
}

// An #include directive on one line: the name and whether it was quoted ("") or angled (<>).
struct Include {
  std::string name;
  bool quoted = true;
};

// The include a line holds, if it is one; `in_comment` carries a /* comment across lines.
std::optional<Include> include_of(std::string_view line, bool& in_comment) {
  std::optional<Include> found;
  std::size_t i = 0;
  const bool began_in_comment = in_comment;
  auto skip_space = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  if (!began_in_comment) {
    skip_space();
    if (i < line.size() && line[i] == '#') {
      ++i;
      skip_space();
      if (line.substr(i, 7) == "include") {
        i += 7;
        skip_space();
        if (i < line.size() && (line[i] == '"' || line[i] == '<')) {
          const char close = line[i] == '"' ? '"' : '>';
          const std::size_t end = line.find(close, i + 1);
          if (end != std::string_view::npos) found = Include{std::string(line.substr(i + 1, end - i - 1)), close == '"'};
        }
      }
    }
  }
  // Whether a block comment is left open at the end of the line (strings and // comments aside).
  char quote = 0;
  for (std::size_t j = 0; j < line.size(); ++j) {
    const char c = line[j];
    const char next = j + 1 < line.size() ? line[j + 1] : '\0';
    if (in_comment) {
      if (c == '*' && next == '/') in_comment = false, ++j;
    } else if (quote) {
      if (c == '\\') ++j;
      else if (c == quote) quote = 0;
    } else if (c == '/' && next == '/') {
      break;
    } else if (c == '/' && next == '*') {
      in_comment = true, ++j;
    } else if (c == '"' || c == '\'') {
      quote = c;
    }
  }
  return found;
}

class Expander {
 public:
  Expander(std::string kernel, std::vector<fs::path> search) : kernel_(std::move(kernel)), search_(std::move(search)) {}

  // Appends `text` (named `display`, in folder `dir` when it is a file) with its includes inlined.
  void expand(const std::string& text, const std::string& display, const std::optional<fs::path>& dir, int depth) {
    if (depth > kMaxIncludeDepth)
      throw refused(display, 0, "includes nest more than " + std::to_string(kMaxIncludeDepth) + " deep");
    std::istringstream in(text);
    std::string line;
    bool in_comment = false;
    for (int number = 1; std::getline(in, line); ++number) {
      std::optional<Include> inc = include_of(line, in_comment);
      if (depth > 0 && !inc && is_pragma_once(line)) {
        out_ += "\n";  // the inlined header is guarded by once_ instead; keeps its line numbers
        continue;
      }
      std::string refusal;
      std::optional<fs::path> file = inc ? resolve(*inc, dir, &refusal) : std::nullopt;
      std::optional<std::string> header;
      if (file && !once_.count(*file) && std::find(stack_.begin(), stack_.end(), *file) == stack_.end()) {
        std::string why;
        header = read_regular_file(*file, kMaxFileBytes, &why);
        if (!header) refusal = "#include \"" + inc->name + "\": " + file->string() + " cannot be used: " + why;
      }
      // A refused include becomes an #error in its place: a compile error at this line when the
      // preprocessor reaches it, nothing in a branch it skips (this is no preprocessor).
      if (!refusal.empty()) {
        out_ += "#error " + line_name("jitk: " + refusal) + "\n";
        continue;
      }
      if (!file) {
        out_ += line + "\n";
        continue;
      }
      if (!header) {
        out_ += "// " + printable(inc->name) + ": already included\n";
        continue;
      }
      if (++inclusions_ > kMaxInclusions)
        throw refused(display, number, "more than " + std::to_string(kMaxInclusions) + " headers inlined into one unit");
      if (header->size() + out_.size() > kMaxUnitBytes)
        throw refused(display, number, "the text with its headers is over " + std::to_string(kMaxUnitBytes >> 20) + " MiB");
      if (has_pragma_once(*header)) once_.insert(*file);
      const std::string name = display_name(*inc, *file, display, dir);
      out_ += "#line 1 " + line_name(name) + "\n";
      stack_.push_back(*file);
      expand(*header, name, file->parent_path(), depth + 1);
      stack_.pop_back();
      out_ += "#line " + std::to_string(number + 1) + " " + line_name(display) + "\n";
    }
  }

  std::string take() { return std::move(out_); }

 private:
  Error refused(const std::string& file, int line, const std::string& what) const {
    std::string where = printable(file) + (line > 0 ? ":" + std::to_string(line) : "");
    return Error(ErrorCode::InvalidArgument, kernel_ + ": " + where + ": " + what);
  }

  static bool is_pragma_once(const std::string& line) {
    std::istringstream words(line);
    std::string hash, pragma, once;
    words >> hash;
    if (hash == "#") words >> pragma;
    else if (hash.size() > 1 && hash[0] == '#') pragma = hash.substr(1);
    else return false;
    words >> once;
    return pragma == "pragma" && once == "once";
  }
  static bool has_pragma_once(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (is_pragma_once(line)) return true;
    return false;
  }

  // The file an include names among the folders it may come from; nullopt when none has it and the
  // compiler may find it elsewhere (jitk's headers, the toolkit's).
  std::optional<fs::path> resolve(const Include& inc, const std::optional<fs::path>& dir, std::string* refusal) {
    const fs::path name(inc.name);
    if (inc.name.empty()) return std::nullopt;
    if (name.is_absolute()) {
      *refusal = "#include of an absolute path ('" + inc.name + "') is refused: a kernel includes from its own folder or its search path";
      return std::nullopt;
    }
    std::vector<fs::path> folders;
    if (inc.quoted && dir) folders.push_back(*dir);
    folders.insert(folders.end(), search_.begin(), search_.end());
    for (const auto& folder : folders) {
      std::error_code ec;
      const fs::path candidate = canonical_or_self(folder / name);
      if (!fs::exists(fs::symlink_status(candidate, ec))) continue;
      if (!allowed(candidate)) {
        *refusal = "#include \"" + inc.name + "\" resolves to " + candidate.string() +
                   ", outside the kernel text's folder and its search path";
        return std::nullopt;
      }
      return candidate;
    }
    if (names_parent(name))
      *refusal = "#include \"" + inc.name + "\" names a parent folder and is in none of the kernel's folders (" +
                 folders_text(folders) + ")";
    return std::nullopt;
  }

  bool allowed(const fs::path& file) const {
    for (const auto& root : roots_)
      if (inside(file, root)) return true;
    return false;
  }

  static std::string folders_text(const std::vector<fs::path>& folders) {
    std::string out;
    for (const auto& f : folders) out += (out.empty() ? "" : ", ") + printable(f.string());
    return out.empty() ? "none" : out;
  }

  // How messages name a header: beside the including file's name when it came from that folder,
  // else its path under the search folder it came from.
  std::string display_name(const Include& inc, const fs::path& file, const std::string& includer,
                           const std::optional<fs::path>& dir) const {
    if (inc.quoted && dir && inside(file, canonical_or_self(*dir)))
      return (fs::path(includer).parent_path() / file.lexically_relative(canonical_or_self(*dir))).lexically_normal().string();
    for (const auto& root : search_)
      if (inside(file, root)) return file.lexically_relative(root).string();
    return file.string();
  }

 public:
  std::vector<fs::path> roots_;  // every folder a header may come from (canonical)

 private:
  std::string kernel_;
  std::vector<fs::path> search_;  // the search path (canonical), in order
  std::vector<fs::path> stack_;   // the headers being inlined: a cycle stops here
  std::set<fs::path> once_;       // headers that say #pragma once, inlined already
  std::string out_;
  int inclusions_ = 0;
};

}  // namespace

SourceFile user_kernel_text(const std::string& kernel, const Implementation& impl, std::string* origin) {
  std::vector<fs::path> search;
  for (const auto& s : impl.search_path) {
    std::error_code ec;
    if (!s.empty() && fs::is_directory(s, ec)) search.push_back(canonical_or_self(s));
  }
  std::string where;
  std::string text;
  std::optional<fs::path> dir;
  const char* kernel_dir = std::getenv("JITK_KERNEL_DIR");
  std::error_code ec;
  const bool overridden = kernel_dir && *kernel_dir && fs::is_directory(kernel_dir, ec) &&
                          fs::symlink_status(fs::path(kernel_dir) / impl.file, ec).type() != fs::file_type::not_found;
  if (overridden || !impl.text.empty()) {
    SourceFile f = kernel_file(impl.file, &where, impl.text.empty() ? nullptr : &impl.text);
    text = std::move(f.text);
    if (where != "registered" && where != "embedded") dir = canonical_or_self(fs::path(where)).parent_path();
  } else {
    std::vector<fs::path> candidates;
    if (fs::path(impl.file).is_absolute()) candidates.push_back(impl.file);
    else
      for (const auto& folder : search) candidates.push_back(folder / impl.file);
    std::optional<fs::path> found;
    for (const auto& c : candidates)
      if (fs::exists(fs::symlink_status(c, ec))) {
        found = c;
        break;
      }
    if (!found) {
      std::string looked;
      for (const auto& s : impl.search_path) looked += (looked.empty() ? "" : ", ") + printable(s);
      throw Error(ErrorCode::InvalidArgument, kernel + ": kernel text '" + printable(impl.file) + "' (implementation '" +
                                                  impl.name + "') not found; looked in: " + (looked.empty() ? "nothing" : looked));
    }
    std::string why;
    auto read = read_regular_file(*found, kMaxFileBytes, &why);
    if (!read)
      throw Error(ErrorCode::InvalidArgument, kernel + ": kernel text " + printable(found->string()) + " cannot be used: " + why);
    text = std::move(*read);
    where = found->string();
    dir = canonical_or_self(*found).parent_path();
  }
  Expander expander(kernel, search);
  if (dir) expander.roots_.push_back(*dir);
  expander.roots_.insert(expander.roots_.end(), search.begin(), search.end());
  expander.expand(text, impl.file, dir, 0);
  if (origin) *origin = where;
  return {impl.file, expander.take()};
}

// The #line directive that names the text's own file at its first line.
std::string first_line_directive(const std::string& file) { return "#line 1 " + line_name(file) + "\n"; }

}  // namespace jit::detail
