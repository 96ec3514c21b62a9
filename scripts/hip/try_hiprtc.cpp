// try_hiprtc.cpp -- probe hipRTC (ROCm 5.2 as packaged by Debian 12) via dlopen,
// with or without an AMD GPU present.
//
// Build:  g++ -std=c++17 -O1 -Wall -o try_hiprtc try_hiprtc.cpp -ldl
// Run:    ./try_hiprtc [--lib PATH] [--init none|before|after] [--arch a,b,...]
//                      [--kernel NAME[,NAME...]|all] [--opt OPTION]... [--out DIR]
//
//   --init none    never call hipInit / hipGetDeviceCount (default)
//   --init before  call hipInit(0) + hipGetDeviceCount() before any hiprtc call
//   --init after   call them after all compiles
//   --opt          extra option passed to hiprtcCompileProgram (repeatable)
//   --inspect FILE only parse FILE (bare AMDGPU ELF or __CLANG_OFFLOAD_BUNDLE__) and exit
//   --arch none    pass no --offload-arch (hiprtc then asks the HIP runtime for the current device)
//
// No HIP headers are needed: all types are declared locally (ABI of hiprtc.h /
// hip_runtime_api.h in ROCm 5.2: enums are int, hiprtcProgram is an opaque ptr).
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <time.h>
#include <vector>

typedef int hiprtcResult;  // HIPRTC_SUCCESS == 0
typedef struct _hiprtcProgram* hiprtcProgram;
typedef int hipError_t;  // hipSuccess == 0

using PFN_hiprtcVersion = hiprtcResult (*)(int*, int*);
using PFN_hiprtcGetErrorString = const char* (*)(hiprtcResult);
using PFN_hiprtcCreateProgram = hiprtcResult (*)(hiprtcProgram*, const char*, const char*, int,
                                                 const char**, const char**);
using PFN_hiprtcCompileProgram = hiprtcResult (*)(hiprtcProgram, int, const char**);
using PFN_hiprtcDestroyProgram = hiprtcResult (*)(hiprtcProgram*);
using PFN_hiprtcGetCodeSize = hiprtcResult (*)(hiprtcProgram, size_t*);
using PFN_hiprtcGetCode = hiprtcResult (*)(hiprtcProgram, char*);
using PFN_hiprtcGetProgramLogSize = hiprtcResult (*)(hiprtcProgram, size_t*);
using PFN_hiprtcGetProgramLog = hiprtcResult (*)(hiprtcProgram, char*);
using PFN_hipInit = hipError_t (*)(unsigned);
using PFN_hipGetDeviceCount = hipError_t (*)(int*);
using PFN_hipGetErrorString = const char* (*)(hipError_t);
using PFN_hipGetErrorName = const char* (*)(hipError_t);
using PFN_hipVer = hipError_t (*)(int*);

struct Api {
  void* h = nullptr;
  PFN_hiprtcVersion hiprtcVersion = nullptr;
  PFN_hiprtcGetErrorString hiprtcGetErrorString = nullptr;
  PFN_hiprtcCreateProgram hiprtcCreateProgram = nullptr;
  PFN_hiprtcCompileProgram hiprtcCompileProgram = nullptr;
  PFN_hiprtcDestroyProgram hiprtcDestroyProgram = nullptr;
  PFN_hiprtcGetCodeSize hiprtcGetCodeSize = nullptr;
  PFN_hiprtcGetCode hiprtcGetCode = nullptr;
  PFN_hiprtcGetProgramLogSize hiprtcGetProgramLogSize = nullptr;
  PFN_hiprtcGetProgramLog hiprtcGetProgramLog = nullptr;
  PFN_hipInit hipInit = nullptr;
  PFN_hipGetDeviceCount hipGetDeviceCount = nullptr;
  PFN_hipGetErrorString hipGetErrorString = nullptr;
  PFN_hipGetErrorName hipGetErrorName = nullptr;
  PFN_hipVer hipRuntimeGetVersion = nullptr;
  PFN_hipVer hipDriverGetVersion = nullptr;
};

static double cpu_ms() {  // process CPU time (all threads); wall time is noisy on a shared box
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

template <class T>
static bool sym(void* h, const char* name, T& out, bool required) {
  dlerror();
  out = reinterpret_cast<T>(dlsym(h, name));
  if (!out) {
    const char* e = dlerror();
    std::printf("  dlsym(%s): %s%s\n", name, e ? e : "null", required ? "  [REQUIRED]" : "");
    return !required;
  }
  return true;
}

// ---------------------------------------------------------------- kernels
struct Kernel {
  const char* name;
  const char* file;
  const char* src;
};

static const Kernel kKernels[] = {
    {"k", "k.hip",
     "extern \"C\" __global__ void k(float* x){ x[threadIdx.x] *= 2.0f; }\n"},
    // Both headers as asked. hip_bfloat16.h (5.2) includes <cmath>, <ostream>, <type_traits>.
    {"k2", "k2.hip",
     "#include <hip/hip_fp16.h>\n"
     "#include <hip/hip_bfloat16.h>\n"
     "extern \"C\" __global__ void k2(const __half* a, const hip_bfloat16* b, float* out, int n) {\n"
     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "  float v = 0.f;\n"
     "  if (i < n) v = __half2float(a[i]) + static_cast<float>(b[i]);\n"
     "  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_xor(v, off);\n"
     "  if ((threadIdx.x % warpSize) == 0) out[i / warpSize] = v;\n"
     "  if (i == 0) out[n] = (float)warpSize;\n"
     "}\n"},
    // Only hip_fp16.h, bf16 done by hand (no std headers needed).
    {"k3", "k3.hip",
     "#include <hip/hip_fp16.h>\n"
     "__device__ inline float bf16_to_f32(unsigned short b){ return __uint_as_float(((unsigned)b) << 16); }\n"
     "__device__ inline unsigned short f32_to_bf16_rne(float f){ unsigned u = __float_as_uint(f);\n"
     "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);\n"
     "  u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n"
     "extern \"C\" __global__ void k3(const __half* a, const unsigned short* b, unsigned short* o, float* red, int n) {\n"
     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "  float v = 0.f;\n"
     "  if (i < n) { v = __half2float(a[i]) + bf16_to_f32(b[i]); o[i] = f32_to_bf16_rne(v); }\n"
     "  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_xor(v, off);\n"
     "  if ((threadIdx.x % warpSize) == 0) red[i / warpSize] = v;\n"
     "}\n"},
    // Does the 5.2 header have __hip_bfloat16 (the newer amd_hip_bf16.h type)? Expect: no.
    {"k4", "k4.hip",
     "#include <hip/hip_fp16.h>\n"
     "extern \"C\" __global__ void k4(__hip_bfloat16* x){ x[0] = __float2bfloat16(1.0f); }\n"},
    // hip_bfloat16.h alone (std headers inside)
    {"k5", "k5.hip",
     "#include <hip/hip_bfloat16.h>\n"
     "extern \"C\" __global__ void k5(hip_bfloat16* x){ float f = x[threadIdx.x]; x[threadIdx.x] = hip_bfloat16(f * 2.0f); }\n"},
    // No #include at all: everything from the pre-included hiprtc_runtime.h (5.2 embeds a
    // *preprocessed* hip_runtime.h + hip_fp16.h, so re-including HIP headers redefines them).
    {"k6", "k6.hip",
     "__device__ inline float bf16_to_f32(unsigned short b){ return __uint_as_float(((unsigned)b) << 16); }\n"
     "__device__ inline unsigned short f32_to_bf16_rne(float f){ unsigned u = __float_as_uint(f);\n"
     "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);\n"
     "  u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n"
     "extern \"C\" __global__ void k6(const __half* a, const unsigned short* b, unsigned short* o, float* red, int n) {\n"
     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "  float v = 0.f;\n"
     "  if (i < n) { v = __half2float(a[i]) + bf16_to_f32(b[i]); v = v / (1.0f + expf(-v)) + tanhf(v) * rsqrtf(2.0f);\n"
     "              o[i] = f32_to_bf16_rne(v); }\n"
     "  __half h = __float2half(v); v += __half2float(__hmul(h, h));\n"
     "  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_xor(v, off);\n"
     "  if ((threadIdx.x % warpSize) == 0) red[i / warpSize] = v;\n"
     "  if (i == 0) red[n] = (float)warpSize;\n"
     "}\n"},
    {"k7", "k7.hip",  // hip_bfloat16 without the include
     "extern \"C\" __global__ void k7(hip_bfloat16* x){ x[0] = hip_bfloat16(1.0f); }\n"},
    {"k8", "k8.hip",  // __hip_bfloat16 (ROCm >= 5.7/6.x name) without include
     "extern \"C\" __global__ void k8(__hip_bfloat16* x){ x[0] = __float2bfloat16(1.0f); }\n"},
    {"k9", "k9.hip",  // CUDA-style _sync shuffles
     "extern \"C\" __global__ void k9(float* x){ x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1); }\n"},
    {"ws64", "ws64.hip",  // warpSize is constexpr (= __AMDGCN_WAVEFRONT_SIZE) -> static_assert works
     "static_assert(warpSize == 64, \"warpSize != 64\");\n"
     "extern \"C\" __global__ void ws64(int* x){ x[0] = warpSize; x[1] = (int)__ballot(1); }\n"},
    {"ws32", "ws32.hip",
     "static_assert(warpSize == 32, \"warpSize != 32\");\n"
     "extern \"C\" __global__ void ws32(int* x){ x[0] = warpSize; }\n"},
};

// ---------------------------------------------------------------- ELF inspection
static uint16_t rd16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

static const char* amdgpu_mach_name(unsigned m) {
  switch (m) {
    case 0x2c: return "gfx900"; case 0x2d: return "gfx902"; case 0x2e: return "gfx904";
    case 0x2f: return "gfx906"; case 0x30: return "gfx908"; case 0x31: return "gfx909";
    case 0x32: return "gfx90c"; case 0x3f: return "gfx90a"; case 0x40: return "gfx940";
    case 0x4b: return "gfx941"; case 0x4c: return "gfx942";
    case 0x33: return "gfx1010"; case 0x34: return "gfx1011"; case 0x35: return "gfx1012";
    case 0x42: return "gfx1013"; case 0x36: return "gfx1030"; case 0x37: return "gfx1031";
    case 0x38: return "gfx1032"; case 0x39: return "gfx1033"; case 0x3e: return "gfx1034";
    case 0x3d: return "gfx1035"; case 0x45: return "gfx1036";
    case 0x41: return "gfx1100"; case 0x46: return "gfx1101"; case 0x47: return "gfx1102";
    case 0x44: return "gfx1103";
    default: return "?";
  }
}

static void inspect_elf(const uint8_t* d, size_t n, const char* indent, const std::string& expect) {
  if (n < 64 || std::memcmp(d, "\x7f" "ELF", 4) != 0) {
    std::printf("%snot an ELF (first bytes:", indent);
    for (size_t i = 0; i < 8 && i < n; ++i) std::printf(" %02x", d[i]);
    std::printf(")\n");
    return;
  }
  unsigned cls = d[4], osabi = d[7], abiver = d[8];
  unsigned type = rd16(d + 16), mach = rd16(d + 18);
  uint32_t flags = rd32(d + 48);
  std::printf("%sELF class=%u osabi=%u(%s) abiversion=%u(%s) e_type=%u e_machine=%u%s e_flags=0x%x\n",
              indent, cls, osabi, osabi == 64 ? "AMDGPU_HSA" : "?", abiver,
              abiver == 1 ? "code object v3" : abiver == 2 ? "code object v4" : abiver == 3 ? "code object v5" : "?",
              type, mach, mach == 224 ? " (EM_AMDGPU)" : " (NOT EM_AMDGPU)", flags);
  unsigned m = flags & 0xff;
  std::printf("%s  EF_AMDGPU_MACH=0x%02x -> %s", indent, m, amdgpu_mach_name(m));
  if (abiver >= 2) {  // v4+: 2-bit feature fields
    static const char* xn[] = {"unsupported", "any", "off", "on"};
    std::printf("  xnack=%s sramecc=%s\n", xn[(flags >> 8) & 3], xn[(flags >> 10) & 3]);
  } else {
    std::printf("  xnack=%u sramecc=%u (v3 bits)\n", (flags >> 8) & 1, (flags >> 9) & 1);
  }
  if (cls != 2) return;
  uint64_t shoff = rd64(d + 40);
  unsigned shentsize = rd16(d + 58), shnum = rd16(d + 60);
  if (shoff + (uint64_t)shnum * shentsize > n) { std::printf("%s  section table out of range\n", indent); return; }
  bool have_k = false, have_kd = false;
  for (unsigned i = 0; i < shnum; ++i) {
    const uint8_t* sh = d + shoff + (size_t)i * shentsize;
    uint32_t shtype = rd32(sh + 4);
    if (shtype != 2 && shtype != 11) continue;  // SYMTAB / DYNSYM
    uint64_t off = rd64(sh + 24), size = rd64(sh + 32), entsize = rd64(sh + 56);
    uint32_t link = rd32(sh + 40);
    const uint8_t* strsh = d + shoff + (size_t)link * shentsize;
    uint64_t stroff = rd64(strsh + 24), strsize = rd64(strsh + 32);
    if (!entsize) entsize = 24;
    std::printf("%s  %s:", indent, shtype == 2 ? ".symtab" : ".dynsym");
    for (uint64_t e = off; e + entsize <= off + size && e + entsize <= n; e += entsize) {
      uint32_t nm = rd32(d + e);
      unsigned info = d[e + 4];
      if (nm == 0 || nm >= strsize) continue;
      const char* s = reinterpret_cast<const char*>(d + stroff + nm);
      static const char* ty[] = {"NOTYPE", "OBJECT", "FUNC", "SECTION", "FILE", "COMMON", "TLS"};
      std::printf(" %s(%s,%s)", s, (info & 15) < 7 ? ty[info & 15] : "?",
                  (info >> 4) == 1 ? "GLOBAL" : (info >> 4) == 0 ? "LOCAL" : (info >> 4) == 2 ? "WEAK" : (info >> 4) == 10 ? "GNU_UNIQUE" : "other");
      std::string ss(s);
      if (expect.empty()) {  // any global FUNC = kernel entry, any *.kd OBJECT = kernel descriptor
        if ((info & 15) == 2 && (info >> 4) == 1) have_k = true;
        if ((info & 15) == 1 && ss.size() > 3 && ss.compare(ss.size() - 3, 3, ".kd") == 0) have_kd = true;
      } else {
        if (ss == expect) have_k = true;
        if (ss == expect + ".kd") have_kd = true;
      }
    }
    std::printf("\n");
  }
  std::printf("%s  kernel symbol '%s' present: %s, kernel descriptor '%s.kd' present: %s\n", indent,
              expect.empty() ? "<any global FUNC>" : expect.c_str(), have_k ? "yes" : "no",
              expect.empty() ? "<any>" : expect.c_str(), have_kd ? "yes" : "no");
}

static void inspect_code(const std::vector<char>& code, const std::string& expect = "") {
  const uint8_t* d = reinterpret_cast<const uint8_t*>(code.data());
  size_t n = code.size();
  static const char kBundle[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (n >= 24 && std::memcmp(d, kBundle, 24) == 0) {
    uint64_t cnt = rd64(d + 24);
    std::printf("    format: clang offload bundle, %llu entries\n", (unsigned long long)cnt);
    size_t p = 32;
    for (uint64_t i = 0; i < cnt && p + 24 <= n; ++i) {
      uint64_t off = rd64(d + p), sz = rd64(d + p + 8), idl = rd64(d + p + 16);
      std::string id(reinterpret_cast<const char*>(d + p + 24), idl);
      p += 24 + idl;
      std::printf("    entry %llu: id='%s' offset=%llu size=%llu\n", (unsigned long long)i, id.c_str(),
                  (unsigned long long)off, (unsigned long long)sz);
      if (sz && off + sz <= n) inspect_elf(d + off, sz, "      ", expect);
    }
  } else if (n >= 4 && std::memcmp(d, "CCOB", 4) == 0) {
    std::printf("    format: compressed clang offload bundle (CCOB)\n");
  } else {
    std::printf("    format: bare code object (no bundle header)\n");
    inspect_elf(d, n, "    ", expect);
  }
}

// ---------------------------------------------------------------- main
static std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) v.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return v;
}

static void do_init(Api& a) {
  if (!a.hipInit) { std::printf("hipInit not resolved\n"); return; }
  double t0 = now_ms();
  hipError_t e = a.hipInit(0);
  double t1 = now_ms();
  std::printf("hipInit(0) = %d %s \"%s\"  (%.1f ms)\n", e, a.hipGetErrorName ? a.hipGetErrorName(e) : "",
              a.hipGetErrorString ? a.hipGetErrorString(e) : "", t1 - t0);
  int cnt = -1;
  e = a.hipGetDeviceCount(&cnt);
  std::printf("hipGetDeviceCount = %d %s \"%s\" count=%d\n", e, a.hipGetErrorName ? a.hipGetErrorName(e) : "",
              a.hipGetErrorString ? a.hipGetErrorString(e) : "", cnt);
  int v = -1;
  if (a.hipRuntimeGetVersion) { e = a.hipRuntimeGetVersion(&v); std::printf("hipRuntimeGetVersion = %d, version=%d\n", e, v); }
  v = -1;
  if (a.hipDriverGetVersion) { e = a.hipDriverGetVersion(&v); std::printf("hipDriverGetVersion = %d, version=%d\n", e, v); }
}

int main(int argc, char** argv) {
  std::string lib = "libamdhip64.so.5", init = "none", outdir = "out";
  std::vector<std::string> archs = {"gfx90a", "gfx942", "gfx1100", "gfx1030", "gfx908"};
  std::vector<std::string> kernels = {"k", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "ws64", "ws32"};
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { if (i + 1 >= argc) { std::fprintf(stderr, "missing value for %s\n", a.c_str()); std::exit(2); } return argv[++i]; };
    if (a == "--lib") lib = next();
    else if (a == "--init") init = next();
    else if (a == "--arch") archs = split(next());
    else if (a == "--kernel") { std::string k = next(); if (k != "all") kernels = split(k); }
    else if (a == "--opt") extra.push_back(next());
    else if (a == "--out") outdir = next();
    else if (a == "--inspect") {  // just parse an existing code object / offload bundle file
      std::string fn = next();
      std::ifstream f(fn, std::ios::binary);
      std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      std::printf("%s: %zu bytes\n", fn.c_str(), buf.size());
      inspect_code(buf);
      return 0;
    }
    else { std::fprintf(stderr, "unknown arg %s\n", a.c_str()); return 2; }
  }
  mkdir(outdir.c_str(), 0755);
  setvbuf(stdout, nullptr, _IOLBF, 0);

  Api a;
  double t0 = now_ms();
  a.h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  double t1 = now_ms();
  if (!a.h) { std::printf("dlopen(%s) FAILED: %s\n", lib.c_str(), dlerror()); return 1; }
  std::printf("dlopen(%s) ok (%.1f ms)\n", lib.c_str(), t1 - t0);
  bool ok = true;
  ok &= sym(a.h, "hiprtcVersion", a.hiprtcVersion, true);
  ok &= sym(a.h, "hiprtcGetErrorString", a.hiprtcGetErrorString, true);
  ok &= sym(a.h, "hiprtcCreateProgram", a.hiprtcCreateProgram, true);
  ok &= sym(a.h, "hiprtcCompileProgram", a.hiprtcCompileProgram, true);
  ok &= sym(a.h, "hiprtcDestroyProgram", a.hiprtcDestroyProgram, true);
  ok &= sym(a.h, "hiprtcGetCodeSize", a.hiprtcGetCodeSize, true);
  ok &= sym(a.h, "hiprtcGetCode", a.hiprtcGetCode, true);
  ok &= sym(a.h, "hiprtcGetProgramLogSize", a.hiprtcGetProgramLogSize, true);
  ok &= sym(a.h, "hiprtcGetProgramLog", a.hiprtcGetProgramLog, true);
  sym(a.h, "hipInit", a.hipInit, false);
  sym(a.h, "hipGetDeviceCount", a.hipGetDeviceCount, false);
  sym(a.h, "hipGetErrorString", a.hipGetErrorString, false);
  sym(a.h, "hipGetErrorName", a.hipGetErrorName, false);
  sym(a.h, "hipRuntimeGetVersion", a.hipRuntimeGetVersion, false);
  sym(a.h, "hipDriverGetVersion", a.hipDriverGetVersion, false);
  // Symbols that newer ROCm has but 5.2 may not (informational only).
  { void* p = dlsym(a.h, "hiprtcLinkCreate"); std::printf("  hiprtcLinkCreate: %s\n", p ? "present" : "absent");
    p = dlsym(a.h, "hiprtcGetBitcode"); std::printf("  hiprtcGetBitcode: %s\n", p ? "present" : "absent"); }
  if (!ok) return 1;
  std::printf("all required hiprtc symbols resolved\n");

  int maj = -1, min = -1;
  hiprtcResult r = a.hiprtcVersion(&maj, &min);
  std::printf("hiprtcVersion = %d -> %d.%d\n", r, maj, min);

  if (init == "before") do_init(a);

  int fails = 0;
  for (const auto& kn : kernels) {
    const Kernel* K = nullptr;
    for (const auto& k : kKernels) if (kn == k.name) K = &k;
    if (!K) { std::printf("unknown kernel %s\n", kn.c_str()); continue; }
    for (const auto& arch : archs) {
      std::printf("=== kernel %s  arch %s\n", K->name, arch.c_str());
      hiprtcProgram prog = nullptr;
      double c0 = now_ms(), d0 = cpu_ms();
      r = a.hiprtcCreateProgram(&prog, K->src, K->file, 0, nullptr, nullptr);
      double c1 = now_ms(), d1 = cpu_ms();
      std::printf("  hiprtcCreateProgram = %d (%s) %.1f ms wall, %.1f ms cpu\n", r, a.hiprtcGetErrorString(r),
                  c1 - c0, d1 - d0);
      if (r) { ++fails; continue; }
      std::vector<std::string> opts;
      if (arch != "none") opts.push_back("--offload-arch=" + arch);  // "none": let hiprtc pick the current device
      for (auto& e : extra) opts.push_back(e);
      std::vector<const char*> copts;
      std::printf("  options:");
      for (auto& o : opts) { copts.push_back(o.c_str()); std::printf(" %s", o.c_str()); }
      std::printf("\n");
      double p0 = now_ms(), q0 = cpu_ms();
      r = a.hiprtcCompileProgram(prog, (int)copts.size(), copts.data());
      double p1 = now_ms(), q1 = cpu_ms();
      std::printf("  hiprtcCompileProgram = %d (%s) %.1f ms wall, %.1f ms cpu\n", r, a.hiprtcGetErrorString(r),
                  p1 - p0, q1 - q0);
      size_t ls = 0;
      hiprtcResult rl = a.hiprtcGetProgramLogSize(prog, &ls);
      std::printf("  hiprtcGetProgramLogSize = %d, size=%zu\n", rl, ls);
      if (rl == 0 && ls > 1) {
        std::string log(ls, '\0');
        a.hiprtcGetProgramLog(prog, &log[0]);
        log.resize(std::strlen(log.c_str()));
        std::printf("  ---- log ----\n%s\n  -------------\n", log.c_str());
      }
      if (r == 0) {
        size_t cs = 0;
        hiprtcResult rc = a.hiprtcGetCodeSize(prog, &cs);
        std::printf("  hiprtcGetCodeSize = %d, size=%zu\n", rc, cs);
        if (rc == 0 && cs) {
          std::vector<char> code(cs);
          rc = a.hiprtcGetCode(prog, code.data());
          std::printf("  hiprtcGetCode = %d\n", rc);
          std::string an = arch;
          for (auto& ch : an) if (ch == ':') ch = '_';
          std::string fn = outdir + "/" + K->name + "_" + an + ".co";
          std::ofstream(fn, std::ios::binary).write(code.data(), (std::streamsize)code.size());
          std::printf("  wrote %s\n", fn.c_str());
          inspect_code(code, K->name);
        }
      } else {
        ++fails;
      }
      a.hiprtcDestroyProgram(&prog);
    }
  }
  if (init == "after") do_init(a);
  std::printf("done, %d failure(s)\n", fails);
  return 0;
}
