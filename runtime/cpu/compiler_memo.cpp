// Reading and writing the remembered CPU compiler facts, and the cpuid stamp they are valid for.
#include "runtime/cpu/compiler_memo.hpp"

#include <cstdio>
#include <fstream>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "support/hashing.hpp"

namespace jit::detail {
namespace {

constexpr const char* kHeader = "jitk-cpu-compiler-facts 2";
constexpr std::size_t kMaxFileBytes = 64 * 1024;

#if defined(__x86_64__)
// Every cpuid leaf the host CPU's name and features are derived from (LLVM reads these), without
// the fields that differ between the cores of one machine (APIC ids, core types, cache topology).
std::string cpuid_identity() {
  KeyBuilder h;
  unsigned a = 0, b = 0, c = 0, d = 0;
  auto leaf = [&](const char* name, unsigned leaf, unsigned sub, bool keep_b = true) {
    a = b = c = d = 0;
    __cpuid_count(leaf, sub, a, b, c, d);
    h.add(name, std::to_string(a) + " " + std::to_string(keep_b ? b : 0) + " " + std::to_string(c) + " " + std::to_string(d));
  };
  leaf("0", 0, 0);
  const unsigned max_leaf = a;
  leaf("1", 1, 0, /*keep_b=*/false);  // EBX: APIC id and logical count
  const bool osxsave = (c >> 27) & 1;
  if (max_leaf >= 7) {
    leaf("7.0", 7, 0);
    leaf("7.1", 7, 1);
  }
  if (max_leaf >= 0xd) leaf("d.1", 0xd, 1);
  if (max_leaf >= 0x14) leaf("14.0", 0x14, 0);
  if (max_leaf >= 0x19) leaf("19.0", 0x19, 0);
  leaf("80000000", 0x80000000u, 0);
  const unsigned max_ext = a;
  if (max_ext >= 0x80000001u) leaf("80000001", 0x80000001u, 0);
  if (max_ext >= 0x80000008u) leaf("80000008", 0x80000008u, 0, /*keep_b=*/true);
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    h.add("xcr0", std::to_string(lo) + " " + std::to_string(hi));
  }
  return h.finish().hex();
}
#endif

// Text that fits on one line of the file.
bool one_line(const std::string& s) { return s.find('\n') == std::string::npos && s.find('\r') == std::string::npos; }

}  // namespace

std::string compiler_facts_stamp(const std::string& module_identity) {
#if defined(__x86_64__)
  if (module_identity.empty()) return "";
  KeyBuilder h;
  h.add("module", module_identity).add("jitk", JITK_CPU_MODULE_ABI).add("cpu", cpuid_identity());
  return h.finish().hex();
#else
  (void)module_identity;
  return "";
#endif
}

std::optional<CompilerFacts> read_compiler_facts(const MemoStore& memos, const std::string& stamp) {
  if (stamp.empty()) return std::nullopt;
  // Sealed with a checksum line: a damaged byte anywhere makes it no memo.
  const std::string sealed = memos.read(kCompilerFactsMemo, kMaxFileBytes).value_or("");
  const std::optional<std::string_view> unsealed = unseal_memo(sealed);
  if (!unsealed) return std::nullopt;
  const std::string text(*unsealed);
  // Plain string scanning (no stream): this runs on every process's first CPU get.
  std::size_t pos = 0;
  auto next_line = [&](std::string& line) {
    if (pos >= text.size()) return false;
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) return false;  // every line ends in a newline; a torn file does not
    line.assign(text, pos, end - pos);
    pos = end + 1;
    return true;
  };
  std::string line;
  if (!next_line(line) || line != kHeader) return std::nullopt;
  if (!next_line(line) || line != "stamp " + stamp) return std::nullopt;
  CompilerFacts f;
  bool ended = false;
  while (next_line(line)) {
    if (ended) return std::nullopt;  // nothing after the end
    if (line == "end") {
      ended = true;
      continue;
    }
    const auto space = line.find(' ');
    if (space == std::string::npos) return std::nullopt;
    const std::string_view name(line.data(), space);
    std::string value = line.substr(space + 1);
    if (name == "id") f.id = std::move(value);
    else if (name == "arch") f.arch = std::move(value);
    else if (name == "fingerprint") f.target_fingerprint = std::move(value);
    else if (name == "option") f.options.push_back(std::move(value));
    else return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  if (!ended || f.id.empty() || f.arch.empty() || f.target_fingerprint.empty()) return std::nullopt;  // torn or foreign
  return f;
}

void write_compiler_facts(const MemoStore& memos, const std::string& stamp, const CompilerFacts& f) {
  if (stamp.empty() || !one_line(f.id) || !one_line(f.arch) || !one_line(f.target_fingerprint)) return;
  std::string text = std::string(kHeader) + "\nstamp " + stamp + "\nid " + f.id + "\narch " + f.arch + "\nfingerprint " +
                     f.target_fingerprint + "\n";
  for (const auto& o : f.options) {
    if (!one_line(o)) return;
    text += "option " + o + "\n";
  }
  text += "end\n";
  memos.write(kCompilerFactsMemo, seal_memo(text));
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 1 < line.size()) {
        const auto start = line.find_first_not_of(' ', colon + 1);
        if (start != std::string::npos) return line.substr(start);
      }
    }
  return "unknown CPU";
}

}  // namespace jit::detail
