// A process for the configure tests: calls jit::configure with what its options give, prints the
// settings in effect and where each came from, optionally gets a kernel, then configures again.
// Usage: jitk_configure_probe [--dir D] [--mode M] [--level L] [--remote URL] [--get]
//                             [--again-dir D] [--again-mode M] [--again-level L]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/config.hpp"
#include "jit/kernels.hpp"

namespace {

void print_config() {
  const jit::EffectiveConfig c = jit::current_config();
  std::printf("cache_dir %s from %s\n", c.config.cache_dir->c_str(), c.cache_dir_from.c_str());
  std::printf("cache_mode %s from %s\n", jit::to_string(*c.config.cache_mode), c.cache_mode_from.c_str());
  std::printf("log_level %s from %s\n", jit::to_string(*c.config.log_level), c.log_level_from.c_str());
  std::printf("remote '%s' from %s\n", c.config.remote->url.c_str(), c.remote_from.c_str());
}

// Applies one option to `config`; false for an option it does not know.
bool apply(const std::string& option, const std::string& value, jit::Config& config) {
  if (option.ends_with("dir")) config.cache_dir = value;
  else if (option.ends_with("mode")) {
    auto m = jit::parse_cache_mode(value);
    if (!m) return false;
    config.cache_mode = *m;
  } else if (option.ends_with("level")) {
    auto l = jit::parse_log_level(value);
    if (!l) return false;
    config.log_level = *l;
  } else if (option.ends_with("remote")) {
    jit::cache::RemoteOptions r;
    r.url = value;
    config.remote = r;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  jit::Config first, again;
  bool get = false, configure_again = false;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--get") {
      get = true;
      continue;
    }
    if (i + 1 >= argc) return std::fprintf(stderr, "%s needs a value\n", option.c_str()), 64;
    const std::string value = argv[++i];
    const bool later = option.starts_with("--again-");
    configure_again = configure_again || later;
    if (!apply(option, value, later ? again : first)) return std::fprintf(stderr, "unknown option %s %s\n", option.c_str(), value.c_str()), 64;
  }
  try {
    jit::configure(first);
    std::printf("configure: ok\n");
  } catch (const jit::Error& e) {
    std::printf("configure: error (%s): %s\n", jit::to_string(e.code()), e.what());
  }
  print_config();
  if (get) {
    auto k = jit::get<jit::kernels::Saxpy>({jit::DType::f32}, jit::Target::cpu());
    std::vector<float> x{1, 2}, y{3, 4};
    k(std::int64_t{2}, 2.0, x.data(), y.data());
    std::printf("saxpy %s %s\n", k.origin() == jit::Origin::DiskCache ? "disk" : "compiled", y[1] == 8.0f ? "ok" : "WRONG");
    const std::string why = jit::cache::unavailable_reason();
    std::printf("disk: %s\n", why.empty() ? "on disk" : why.c_str());
  }
  if (configure_again) {
    try {
      jit::configure(again);
      std::printf("again: ok\n");
    } catch (const jit::Error& e) {
      std::printf("again: error (%s): %s\n", jit::to_string(e.code()), e.what());
    }
    print_config();
  }
  return 0;
}
