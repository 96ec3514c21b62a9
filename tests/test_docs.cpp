// The docs that list kernels agree with the code: docs/kernels.md is what `jitk info --kernels
// --markdown` writes, and the other pages' lists and counts name the same kernels and limits.
#include <catch2/catch.hpp>

#include <regex>
#include <set>

#include "jit/jit.hpp"
#include "test_support.hpp"

using jitk_test::run;

namespace {
const std::filesystem::path kDocs = std::filesystem::path(JITK_SOURCE_DIR) / "docs";

std::string generated() {
  auto r = run(jitk_test::kTool + " info --kernels --markdown 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

// The backquoted names in column `column` of the table rows of `text` that start with "| `".
std::set<std::string> table_column(const std::string& text, int column) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    std::size_t at = 0;
    for (int c = 0; c < column; ++c) at = line.find(" | ", at) + 3;
    const std::size_t open = line.find('`', at), close = line.find('`', open + 1);
    out.insert(line.substr(open + 1, close - open - 1));
  }
  return out;
}

std::set<std::string> backquoted(const std::string& text) {
  std::set<std::string> out;
  static const std::regex name("`([a-z_0-9]+)`");
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) out.insert((*it)[1]);
  return out;
}
}  // namespace

TEST_CASE("docs: docs/kernels.md is what jitk info --kernels --markdown writes (regenerate it when this fails)", "[docs]") {
  const std::string page = jitk_test::read_file(kDocs / "kernels.md");
  const std::string now = generated();
  if (page != now) {
    // The first line that differs, to say what drifted.
    std::istringstream a(page), b(now);
    std::string la, lb;
    int line = 0;
    while (true) {
      const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
      ++line;
      if (!ga || !gb || la != lb) break;
    }
    FAIL("docs/kernels.md line " << line << " differs from the code:\n  page: " << la << "\n  code: " << lb
                                 << "\nRun: build/jitk info --kernels --markdown > docs/kernels.md");
  }
}

TEST_CASE("docs: the kernel lists in the other pages name exactly the kernels and descriptors jitk ships", "[docs]") {
  const std::string table = generated();
  const std::set<std::string> kernels = table_column(table, 0), descriptors = table_column(table, 1);
  REQUIRE(kernels.size() >= 15);
  REQUIRE(descriptors.size() == kernels.size());

  // quickstart.md's table of descriptors
  const std::string quickstart = jitk_test::read_file(kDocs / "quickstart.md");
  const std::size_t start = quickstart.find("| descriptor | computes |");
  REQUIRE(start != std::string::npos);
  const std::string qs_table = quickstart.substr(start, quickstart.find("\n\n", start) - start);
  CHECK(table_column(qs_table, 0) == descriptors);

  // jitk-tool.md's manifest `name` row
  const std::string tool = jitk_test::read_file(kDocs / "jitk-tool.md");
  const std::size_t row = tool.find("| `name` | yes |");
  REQUIRE(row != std::string::npos);
  const std::string name_row = tool.substr(row, tool.find('\n', row) - row);
  std::set<std::string> listed = backquoted(name_row.substr(name_row.find("ships:")));
  CHECK(listed == kernels);

  // every "jitk has: ..." message quoted in the docs lists them all, as the error does
  for (const char* page : {"quickstart.md", "jitk-tool.md"}) {
    const std::string text = jitk_test::read_file(kDocs / page);
    for (std::size_t at = text.find("jitk has: "); at != std::string::npos; at = text.find("jitk has: ", at + 1)) {
      std::string list = text.substr(at + 10, text.find_first_of("`\n", at) - at - 10);
      std::set<std::string> names;
      std::istringstream in(list);
      for (std::string n; std::getline(in, n, ',');) names.insert(n.substr(n.find_first_not_of(' ')));
      INFO(page << ": " << list);
      CHECK(names == kernels);
    }
  }
}

TEST_CASE("docs: every page that states how many arguments a kernel takes states the code's limit", "[docs]") {
  const std::regex limit("(at most|more than) ([0-9]+) (packed )?arguments", std::regex::icase);
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDocs)) {
    if (entry.path().extension() != ".md") continue;
    const std::string text = jitk_test::read_file(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), limit), end; it != end; ++it) {
      INFO(entry.path().filename().string() << ": " << it->str());
      CHECK(std::stoi((*it)[2]) == jit::detail::ArgPack::kMaxArgs);
      ++found;
    }
  }
  CHECK(found >= 2);
}
