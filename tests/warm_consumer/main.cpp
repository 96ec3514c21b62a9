// warm_consumer: uses the cache its build warmed, named from code (no environment), and prints where
// each kernel came from: "disk" (warmed at build time) or "compiled" (at run time).
#include <cstdio>
#include <vector>

#include <jit/cache.hpp>
#include <jit/config.hpp>
#include <jit/kernels.hpp>
#include <jit/tuning.hpp>

#include "consumer_kernels.hpp"

namespace {
template <class K> void report(const char* what, const jit::Kernel<K>& k) {
  std::printf("%s %s\n", what, k.origin() == jit::Origin::DiskCache ? "disk" : "compiled");
}
}  // namespace

int main() try {
  jit::configure({.cache_dir = JITK_WARMED_CACHE_DIR});
  register_consumer_kernels();
  std::printf("cache: %s\n", jit::cache::root().c_str());
  const jit::Target cpu = jit::Target::cpu();
  int wrong = 0;

  auto saxpy = jit::get<jit::kernels::Saxpy>({}, cpu);
  std::vector<float> x{1, 2, 3}, y{10, 20, 30};
  saxpy(std::int64_t{3}, 2.0, x.data(), y.data());
  wrong += y[2] != 36.0f;
  report("saxpy", saxpy);

  // The decision jitk warm --tune stored is found: nothing is timed, the winner loads from disk.
  auto gemm = jit::get_tuned<jit::kernels::Gemm>({}, {96, 80, 64}, cpu);
  report("gemm-tuned", gemm);

  auto add_one = jit::get<AddOne>({}, cpu);
  std::vector<float> in{1.5f, 2.5f}, out(2);
  add_one(std::int64_t{2}, in.data(), out.data());
  wrong += out[1] != 3.5f;
  report("consumer_add_one", add_one);

  std::printf("%s\n", wrong ? "WRONG" : "OK");
  return wrong ? 1 : 0;
} catch (const jit::Error& e) {
  std::fprintf(stderr, "warm_consumer: %s: %s\n", jit::to_string(e.code()), e.what());
  return 1;
}
