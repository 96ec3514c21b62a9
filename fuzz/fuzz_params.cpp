// libFuzzer target: a target line then "name=value,..." params, validated against every kernel for
// the CPU and the GPU. Must end in a canonical ParamSet or a jit::Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "jit/chain.hpp"
#include "jit/kernel_catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string target_line = text.substr(0, text.find('\n'));
  std::string rest = text.size() > target_line.size() ? text.substr(target_line.size() + 1) : "";
  try {
    jit::Target::parse(target_line).to_string();
  } catch (const jit::Error&) {
  }
  jit::ParamSet params;
  std::size_t start = 0;
  while (start <= rest.size()) {
    std::size_t end = rest.find(',', start);
    std::string item = rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::size_t eq = item.find('=');
    if (eq != std::string::npos) {
      std::string name = item.substr(0, eq), value = item.substr(eq + 1);
      char* stop = nullptr;
      long long n = std::strtoll(value.c_str(), &stop, 10);
      if (!value.empty() && stop && *stop == '\0') params.set(name, static_cast<std::int64_t>(n));
      else params.set(name, value);
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (const auto& def : jit::detail::kernel_catalog())
    for (auto backend : {jit::Backend::Cpu, jit::Backend::Cuda}) {
      try {
        auto canonical = jit::detail::validate_params(def, params, backend);
        // every parameter once, but a fusion chain only when one was given
        std::size_t required = 0;
        for (const auto& spec : def.params) required += !spec.chain;
        if (canonical.values().size() < required || canonical.values().size() > def.params.size()) std::abort();
        if (const auto* chain = canonical.find("prologue")) jit::Chain::parse(std::get<std::string>(*chain));  // canonical parses
        canonical.to_string();
      } catch (const jit::Error&) {
      }
    }
  return 0;
}
