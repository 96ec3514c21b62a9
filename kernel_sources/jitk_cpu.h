// jitk_cpu.h: what CPU kernel text may use: fixed-width types, the entry point, vectorizable math.
// Kernel text is plain C++ (no standard headers), so clang in-process and g++ both compile it.
// The specialization prelude defines JITK_ENTRY, T (the element type) and JITK_<PARAM> macros.
#pragma once

typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef unsigned int u32;

// void JITK_ENTRY(void* const* args, i64 begin, i64 end): args[i] points at argument i's value
// (the same layout as cuLaunchKernel's kernelParams); [begin, end) is this call's share of the
// work items (rows or elements); the library runs calls on all cores.
#define JITK_CPU_KERNEL extern "C" void JITK_ENTRY(void* const* jitk_args, i64 jitk_begin, i64 jitk_end)
#define JITK_ARG(i, type) (*static_cast<type*>(jitk_args[i]))

namespace jitk {

// Independent accumulators per reduction: enough to fill the vector units and hide FMA latency,
// and written so any compiler vectorizes them without -ffast-math.
template <class V> constexpr int lanes = 64 / sizeof(V);

inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline double sqrt(double x) { return __builtin_sqrt(x); }

// sum of f(i) for i in [0, n)
template <class V, class F> inline V reduce_sum(i64 n, F f) {
  constexpr int L = lanes<V>;
  V acc[L] = {};
  i64 i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] += f(i + l);
  V tail = 0;
  for (; i < n; ++i) tail += f(i);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0] + tail;
}

// max of f(i) for i in [0, n), n >= 1
template <class V, class F> inline V reduce_max(i64 n, F f) {
  constexpr int L = lanes<V>;
  V acc[L];
  const V first = f(0);  // seeds every lane; max is idempotent, so counting it twice is harmless
  for (int l = 0; l < L; ++l) acc[l] = first;
  i64 i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) {
      V v = f(i + l);
      acc[l] = v > acc[l] ? v : acc[l];
    }
  for (; i < n; ++i) {
    V v = f(i);
    acc[0] = v > acc[0] ? v : acc[0];
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
  return acc[0];
}

// exp(x) by range reduction to [-ln2/2, ln2/2] and a polynomial; branch-free so loops vectorize.
// float: relative error < 2e-7 on [-87.3, 88.3] (inputs outside are clamped; softmax and silu
// never need more). double: < 5e-16 on [-708, 709].
inline float exp(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  float t = x * 1.44269504088896341f + magic;
  float n = t - magic;
  i32 ni = __builtin_bit_cast(i32, t) - __builtin_bit_cast(i32, magic);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  return y * __builtin_bit_cast(float, (ni + 127) << 23);
}

inline double exp(double x) {
  x = x < -708.0 ? -708.0 : x;
  x = x > 709.0 ? 709.0 : x;
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  double t = x * 1.4426950408889634074 + magic;
  double n = t - magic;
  i64 ni = __builtin_bit_cast(i64, t) - __builtin_bit_cast(i64, magic);
  double r = x - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  // Taylor series to r^13: the first dropped term is below 5e-18 for |r| <= ln2/2.
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * __builtin_bit_cast(double, static_cast<u64>(ni + 1023) << 52);
}

// log and erfc: libm's (resolved from the host process when the kernel loads). They are calls, so
// a loop using them does not vectorize: log_softmax takes one log per row; gelu's erfc is per element.
inline float log(float x) { return __builtin_logf(x); }
inline double log(double x) { return __builtin_log(x); }
inline float erfc(float x) { return __builtin_erfcf(x); }
inline double erfc(double x) { return __builtin_erfc(x); }
inline float tanh(float x) { return __builtin_tanhf(x); }
inline double tanh(double x) { return __builtin_tanh(x); }
// sin, cos and pow: libm's too; rotary_embedding takes them once a token, shared by its heads.
inline float sin(float x) { return __builtin_sinf(x); }
inline double sin(double x) { return __builtin_sin(x); }
inline float cos(float x) { return __builtin_cosf(x); }
inline double cos(double x) { return __builtin_cos(x); }
inline float pow(float x, float y) { return __builtin_powf(x, y); }
inline double pow(double x, double y) { return __builtin_pow(x, y); }

// Activations (gated kernels and fusion chains), as PyTorch defines them; both gelus in forms
// without cancellation for negative g (where 1 + erf and 1 + tanh lose every digit):
// 0.5 g erfc(-g / sqrt 2), and 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)).
template <class V> inline V relu(V v) { return v < V(0) ? V(0) : v; }  // NaN stays NaN
template <class V> inline V sigmoid(V v) { return V(1) / (V(1) + exp(-v)); }
template <class V> inline V silu(V v) { return v / (V(1) + exp(-v)); }
template <class V> inline V gelu(V g) { return V(0.5) * g * erfc(g * V(-0.7071067811865476)); }
template <class V> inline V gelu_tanh(V g) {
  const V u = V(0.7978845608028654) * (g + V(0.044715) * g * g * g);
  return g / (V(1) + exp(V(-2) * u));
}

}  // namespace jitk

#ifdef JITK_EMPTY_CHAIN
// No fusion chain, for text compiled outside jitk (the g++ baseline of jitk_bench): jitk's prelude
// writes jitk_chain for every specialization (jit/chain_codegen.cpp), this is its empty form.
struct jitk_chain {
  static constexpr bool has_prologue = false;
  static jitk_chain from(void* const*) { return {}; }
  template <class V> V prologue(V v, i64, i64) const { return v; }
  template <class V> V epilogue(V v, i64, i64) const { return v; }
};
#endif
