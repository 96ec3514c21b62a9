// A kernel of the program's own, declared with jit/user_kernel.hpp: typed arguments checked at the
// call, its text and headers read from its folders, compiler messages naming the user's file and line.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/user_kernel.hpp"
#include "jit/cuda/nvrtc_compiler.hpp"
#include "runtime/get_kernel.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

// Every kernel's text lives here; the cache too (a fresh one per run).
const jitk_test::TempDir& kernel_dir() {
  static jitk_test::TempDir dir;
  return dir;
}
const std::string& cache_root() {
  static jitk_test::TempDir own;
  static const std::string root = [] {
    ::setenv("JITK_CACHE_DIR", own.str().c_str(), 1);
    return own.str();
  }();
  return root;
}
const std::string& root = cache_root();

std::string folder(const char* sub) {
  const fs::path p = kernel_dir().path() / sub;
  fs::create_directories(p);
  return p.string();
}

// ---- out[r, i] = scale(x[r, i] + bias[i]): text in add_bias/add_bias.cpp, scale() in a header
// of its folder, offset() in a header of the search path ----------------------------------------
const char* const kAddBiasText = R"(#include "jitk_cpu.h"
#include "scale.h"
#include <offset.h>
constexpr i64 H = JITK_HIDDEN;
JITK_CPU_KERNEL {
  JITK_ARGS
  for (i64 r = jitk_begin; r < jitk_end; ++r)
    for (i64 i = 0; i < H; ++i) out[r * H + i] = scale(x[r * H + i] + bias[i]) + offset() + T(0 * rows) + T(factor);
}
)";

void write_add_bias(const std::string& scale_body) {
  jitk_test::write_file(fs::path(folder("add_bias")) / "add_bias.cpp", kAddBiasText);
  jitk_test::write_file(fs::path(folder("add_bias")) / "scale.h",
                        "#pragma once\n#ifdef __CUDACC__\n#define SCALE_DEVICE __device__\n#else\n#define SCALE_DEVICE\n#endif\n"
                        "template <class V> SCALE_DEVICE V scale(V v) { " + scale_body + " }\n");
  jitk_test::write_file(fs::path(folder("include")) / "offset.h", "#pragma once\ninline double offset() { return 0.0; }\n");
}

struct AddBias : jit::UserKernel<AddBias, jit::count<"rows">, jit::in<"x">, jit::in<"bias">, jit::out<"out">,
                                 jit::scalar<"factor", double>> {
  static constexpr const char* name = "test_user_add_bias";
  static jit::KernelDeclaration declaration() {
    return {.summary = "out = scale(x + bias) + factor, per row",
            .params = {jit::dtype_param({"f32", "f64"}), jit::int_param("hidden", 1, 1 << 20, 64)},
            .texts = {jit::cpu_file("add_bias.cpp"), jit::cuda_file("add_bias.cu", {jit::GpuLayout::Kind::Elementwise, 256})},
            .search_path = {folder("add_bias"), folder("include")}};
  }
};

template <class T> void run_add_bias(std::int64_t hidden, double want_scale) {
  const std::int64_t rows = 5;
  std::vector<T> x(rows * hidden), bias(hidden), out(rows * hidden, T(NAN));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(0.25 * double(i % 17));
  for (std::int64_t i = 0; i < hidden; ++i) bias[i] = T(-0.5 * double(i % 5));
  auto k = jit::get<AddBias>({{"dtype", std::string(jit::dtype_name(jit::dtype_of<T>()))}, {"hidden", hidden}},
                             jit::Target::cpu());
  k(rows, x.data(), bias.data(), out.data(), 1.5);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < hidden; ++i)
      REQUIRE(out[r * hidden + i] == Approx(want_scale * (double(x[r * hidden + i]) + double(bias[i])) + 1.5));
}

// ---- a text with a deliberate error at a known line of its file, and one in a header ---------
struct Broken : jit::UserKernel<Broken, jit::count<"n">, jit::out<"y">> {
  static constexpr const char* name = "test_user_broken";
  static jit::KernelDeclaration declaration() {
    return {.summary = "does not compile",
            .params = {jit::dtype_param(), jit::text_param("where", {"text", "header"}, "text")},
            .texts = {jit::cpu_file("broken/broken.cpp")},
            .search_path = {kernel_dir().str()}};
  }
};

// ---- includes that try to leave the kernel's folders ---------------------------------------
struct Escape : jit::UserKernel<Escape, jit::count<"n">, jit::out<"y">> {
  static constexpr const char* name = "test_user_escape";
  static jit::KernelDeclaration declaration() {
    return {.summary = "includes what it must not",
            .params = {jit::dtype_param(), jit::text_param("how", {"absolute", "parent", "symlink", "fifo", "absent_parent", "cycle", "many", "deep"})},
            .texts = {jit::cpu_file("escape.cpp")},
            .search_path = {folder("escape")}};
  }
};

// ---- a text that is nowhere on the search path; a declaration with a mistake -----------------
struct Missing : jit::UserKernel<Missing, jit::count<"n">, jit::out<"y">> {
  static constexpr const char* name = "test_user_missing";
  static jit::KernelDeclaration declaration() {
    return {.summary = "its text is elsewhere", .params = {jit::dtype_param()}, .texts = {jit::cpu_file("nowhere.cpp")},
            .search_path = {folder("missing")}};
  }
};

struct NoDtype : jit::UserKernel<NoDtype, jit::in<"x">> {
  static constexpr const char* name = "test_user_no_dtype";
  static jit::KernelDeclaration declaration() {
    return {.summary = "x's type names a dtype param it lacks", .params = {jit::int_param("n", 1, 4)},
            .texts = {jit::cpu_text("no_dtype.cpp", "")}};
  }
};

jit::Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const jit::Error& e) {
    return e;
  }
  FAIL("no jit::Error was thrown");
  return jit::Error(jit::ErrorCode::Internal, "unreachable");
}

}  // namespace

TEST_CASE("a declared kernel runs on the CPU, its text and headers read from its folders") {
  write_add_bias("return v * V(2);");
  run_add_bias<float>(37, 2.0);
  run_add_bias<double>(64, 2.0);  // hidden's default is 64: the same key as leaving it out
  auto with_default = jit::get<AddBias>({{"dtype", "f64"}}, jit::Target::cpu());
  auto explicit_64 = jit::get<AddBias>({{"dtype", "f64"}, {"hidden", 64}}, jit::Target::cpu());
  CHECK(with_default.cache_key() == explicit_64.cache_key());
  CHECK(explicit_64.implementation() == "cpu");
}

TEST_CASE("a declared kernel's header is part of its key: changing it recompiles, reverting finds the old artifact") {
  write_add_bias("return v * V(2);");
  const jit::ParamSet params{{"dtype", "f32"}, {"hidden", 8}};
  AddBias::declare();
  const auto first = jit::detail::get_kernel(AddBias::name, params, jit::Target::cpu());
  write_add_bias("return v * V(3);");
  const auto changed = jit::detail::get_kernel(AddBias::name, params, jit::Target::cpu());
  CHECK(changed.key != first.key);
  CHECK(changed.origin == jit::Origin::Compiled);
  // What it computes is the new header's (a fresh memo entry: another hidden).
  run_add_bias<float>(9, 3.0);
  write_add_bias("return v * V(2);");
  CHECK(jit::detail::get_kernel(AddBias::name, params, jit::Target::cpu()).key == first.key);
}

TEST_CASE("a compile error of a declared kernel names the user's file and line, and the params") {
  jitk_test::write_file(fs::path(folder("broken")) / "broken.cpp",
                        "#include \"jitk_cpu.h\"\n"
                        "#include \"helper.h\"\n"
                        "JITK_CPU_KERNEL {\n"
                        "  JITK_ARGS\n"
                        "#if JITK_WHERE_TEXT\n"
                        "  y[jitk_begin] = not_declared_anywhere;\n"  // line 6
                        "#endif\n"
                        "  y[jitk_begin] = helper();\n"
                        "}\n");
  jitk_test::write_file(fs::path(folder("broken")) / "helper.h",
                        "// a header of the kernel's folder\n"
                        "inline float helper() {\n"
                        "  return undeclared_in_header;\n"  // line 3
                        "}\n");
  const jit::Error e = error_of([] { jit::get<Broken>({{"dtype", "f32"}}, jit::Target::cpu()); });
  CHECK(e.kind() == jit::ErrorCode::CompileFailed);
  const std::string what = e.what();
  INFO(what);
  CHECK(what.find("broken/broken.cpp:6:") != std::string::npos);
  CHECK(what.find("broken/helper.h:3:") != std::string::npos);
  CHECK(e.message().find("dtype=f32,where=text") != std::string::npos);
  CHECK(e.source()->origin == (fs::path(kernel_dir().str()) / "broken/broken.cpp").string());

  const jit::Error h = error_of([] { jit::get<Broken>({{"dtype", "f64"}, {"where", "header"}}, jit::Target::cpu()); });
  const std::string header_what = h.what();
  CHECK(header_what.find("broken/helper.h:3:") != std::string::npos);
  CHECK(header_what.find("broken/broken.cpp:6:") == std::string::npos);
  CHECK(h.message().find("where=header") != std::string::npos);
}

TEST_CASE("a declared kernel's call is checked: the argument, what it is declared and what was given") {
  write_add_bias("return v * V(2);");
  auto k = jit::get<AddBias>({{"dtype", "f32"}, {"hidden", 4}}, jit::Target::cpu());
  std::vector<float> x(8), bias(4), out(8);
  std::vector<double> wide(8);
  // A jit::ConstPtr carries its element type to the call: f64 where the kernel is f32.
  const jit::Error dtype = error_of([&] { k(std::int64_t{2}, jit::ConstPtr(wide.data(), jit::DType::f64), bias.data(), out.data(), 1.0); });
  CHECK(dtype.kind() == jit::ErrorCode::InvalidArgument);
  CHECK(dtype.message() ==
        "test_user_add_bias: argument 'x' (2 of 5) is declared const T* with T = f32 (the kernel's dtype); the call passes const f64*");
  // A pointer of the right type whose dtype is not the kernel's: double* for an f32 kernel.
  const jit::Error typed = error_of([&] { k(std::int64_t{2}, x.data(), wide.data(), out.data(), 1.0); });
  CHECK(typed.message().find("argument 'bias' (3 of 5) is declared const T* with T = f32") != std::string::npos);
  CHECK(typed.message().find("passes f64*") != std::string::npos);
  const jit::Error null = error_of([&] { k(std::int64_t{2}, x.data(), bias.data(), nullptr, 1.0); });
  CHECK(null.message() ==
        "test_user_add_bias: argument 'out' (4 of 5), declared T* with T = f32 (the kernel's dtype), is null; the launch covers 2 work items");
  const jit::Error negative = error_of([&] { k(std::int64_t{-1}, x.data(), bias.data(), out.data(), 1.0); });
  CHECK(negative.message() == "test_user_add_bias: argument 'rows' (1 of 5) = -1 is negative; it counts work items");
  // No work: null pointers are fine (an empty tensor).
  k(std::int64_t{0}, nullptr, nullptr, nullptr, 1.0);
}

// dtype with a default: a get may leave it out, and the call is checked against the default.
struct AddOneDefault : jit::UserKernel<AddOneDefault, jit::count<"n">, jit::in<"x">, jit::out<"y">> {
  static constexpr const char* name = "test_user_add_one_default";
  static jit::KernelDeclaration declaration() {
    return {.summary = "y = x + 1",
            .params = {jit::dtype_param({"f32", "f64"}, "f64")},
            .texts = {jit::cpu_text("add_one.cpp", "#include \"jitk_cpu.h\"\nJITK_CPU_KERNEL {\n  JITK_ARGS\n"
                                                   "  for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = x[i] + T(1);\n}\n")}};
  }
};

TEST_CASE("a declared kernel's call is checked against a dtype left to its default") {
  auto k = jit::get<AddOneDefault>({}, jit::Target::cpu());
  std::vector<double> x{1.5, 2.5}, y(2);
  k(std::int64_t{2}, x.data(), y.data());  // a mutable pointer where const T* is declared, T = the default
  CHECK(y[1] == 3.5);
  std::vector<float> narrow(2);
  const jit::Error wrong = error_of([&] { k(std::int64_t{2}, narrow.data(), y.data()); });
  CHECK(wrong.message() ==
        "test_user_add_one_default: argument 'x' (2 of 3) is declared const T* with T = f64 (the kernel's dtype); the call passes f32*");
}

TEST_CASE("a declared kernel's includes stay in its folders: escapes and files that are not regular are refused") {
  const std::string inside = folder("escape");
  const std::string outside = folder("outside");
  jitk_test::write_file(fs::path(outside) / "secret.h", "inline int secret() { return 1; }\n");
  fs::create_symlink(fs::path(outside) / "secret.h", fs::path(inside) / "link.h");
  REQUIRE(::mkfifo((fs::path(inside) / "fifo.h").c_str(), 0600) == 0);
  jitk_test::write_file(fs::path(inside) / "a.h", "#pragma once\n#include \"b.h\"\ninline int a() { return 1; }\n");
  jitk_test::write_file(fs::path(inside) / "b.h", "#include \"a.h\"\ninline int b() { return 2; }\n");
  jitk_test::write_file(fs::path(inside) / "escape.cpp",
                        "#include \"jitk_cpu.h\"\n"
                        "#if JITK_HOW_ABSOLUTE\n"
                        "#include \"" + outside + "/secret.h\"\n"
                        "#elif JITK_HOW_PARENT\n"
                        "#include \"../outside/secret.h\"\n"
                        "#elif JITK_HOW_SYMLINK\n"
                        "#include \"link.h\"\n"
                        "#elif JITK_HOW_FIFO\n"
                        "#include \"fifo.h\"\n"
                        "#elif JITK_HOW_MANY\n"
                        "#include \"many0.h\"\n"
                        "#elif JITK_HOW_DEEP\n"
                        "#include \"deep0.h\"\n"
                        "#elif JITK_HOW_ABSENT_PARENT\n"
                        "#include \"../../no_such_folder_of_jitk/x.h\"\n"
                        "#else\n"
                        "#include \"a.h\"\n"
                        "#endif\n"
                        "JITK_CPU_KERNEL { JITK_ARGS for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = T(a() + b()); }\n");
  // A refused include is an #error at its line: the compile fails there, the file never read.
  auto refusal = [](const char* how) {
    const jit::Error e = error_of([&] { jit::get<Escape>({{"dtype", "f32"}, {"how", how}}, jit::Target::cpu()); });
    CHECK(e.kind() == jit::ErrorCode::CompileFailed);
    return std::string(e.what());
  };
  CHECK(refusal("absolute").find("escape.cpp:3:2: error: \"jitk: #include of an absolute path") != std::string::npos);
  CHECK(refusal("parent").find("escape.cpp:5:2: error: \"jitk: #include \\\"../outside/secret.h\\\" resolves to") !=
        std::string::npos);
  CHECK(refusal("symlink").find("outside the kernel text's folder and its search path") != std::string::npos);
  const std::string fifo = refusal("fifo");
  CHECK(fifo.find("escape.cpp:9:2: error:") != std::string::npos);
  CHECK(fifo.find("FIFO") != std::string::npos);
  CHECK(refusal("absent_parent").find("names a parent folder") != std::string::npos);
  // Headers that include each other are inlined once each.
  auto k = jit::get<Escape>({{"dtype", "f32"}, {"how", "cycle"}}, jit::Target::cpu());
  std::vector<float> y(3, 0);
  k(std::int64_t{3}, y.data());
  CHECK(y[2] == 3.0f);
  // (written only now: the scan inlines the includes of every branch, and these exceed its bounds)
  // Bounded: each of 13 headers including the next twice would inline 8192; 70 nested ones are too deep.
  for (int i = 0; i < 70; ++i)
    jitk_test::write_file(fs::path(inside) / ("deep" + std::to_string(i) + ".h"), "#include \"deep" + std::to_string(i + 1) + ".h\"\n");
  const jit::Error deep = error_of([] { jit::get<Escape>({{"dtype", "f32"}, {"how", "deep"}}, jit::Target::cpu()); });
  CHECK(deep.message().find("includes nest more than 64 deep") != std::string::npos);
  for (int i = 0; i < 13; ++i)
    jitk_test::write_file(fs::path(inside) / ("many" + std::to_string(i) + ".h"),
                          "#include \"many" + std::to_string(i + 1) + ".h\"\n#include \"many" + std::to_string(i + 1) + ".h\"\n");
  jitk_test::write_file(fs::path(inside) / "many13.h", "// the last\n");
  const jit::Error many = error_of([] { jit::get<Escape>({{"dtype", "f32"}, {"how", "many"}}, jit::Target::cpu()); });
  CHECK(many.kind() == jit::ErrorCode::InvalidArgument);
  CHECK(many.message().find("more than 4096 headers inlined into one unit") != std::string::npos);
}

TEST_CASE("a declared kernel whose text is missing says where it looked, and JITK_KERNEL_DIR overrides its text") {
  const jit::Error missing = error_of([] { jit::get<Missing>({{"dtype", "f32"}}, jit::Target::cpu()); });
  CHECK(missing.message().find("kernel text 'nowhere.cpp' (implementation 'cpu') not found; looked in: " + folder("missing")) !=
        std::string::npos);

  const std::string override_dir = folder("override");
  jitk_test::write_file(fs::path(override_dir) / "nowhere.cpp",
                        "#include \"jitk_cpu.h\"\nJITK_CPU_KERNEL { JITK_ARGS for (i64 i = jitk_begin; i < jitk_end; ++i) y[i] = T(7); }\n");
  ::setenv("JITK_KERNEL_DIR", override_dir.c_str(), 1);
  std::vector<double> y(4, 0);
  try {
    jit::get<Missing>({{"dtype", "f64"}}, jit::Target::cpu())(std::int64_t{4}, y.data());
  } catch (...) {
    ::unsetenv("JITK_KERNEL_DIR");
    throw;
  }
  ::unsetenv("JITK_KERNEL_DIR");
  CHECK(y[3] == 7.0);
}

TEST_CASE("a declaration's mistakes are refused when it is first used, naming them") {
  const jit::Error e = error_of([] { jit::get<NoDtype>({{"n", 1}}, jit::Target::cpu()); });
  CHECK(e.message() ==
        "cannot declare kernel 'test_user_no_dtype': argument 'x' has the element type jit::dtype_t but the kernel has no 'dtype' parameter");
}

TEST_CASE("a declared kernel's CUDA text compiles with NVRTC where there is one, naming its file and line on error") {
  // Only the compile: no GPU is needed to specialize and compile for a named arch.
  jitk_test::write_file(fs::path(folder("add_bias")) / "add_bias.cu",
                        "#include \"scale.h\"\n"
                        "JITK_GPU_KERNEL(JITK_PARAMS) {\n"
                        "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i < jitk_work_items * JITK_HIDDEN) out[i] = x[i] + bias[i % JITK_HIDDEN];\n"
                        "  undeclared_on_the_gpu;\n"  // line 5
                        "}\n");
  write_add_bias("return v * V(2);");
  AddBias::declare();
  if (auto why = jit::detail::NvrtcCompiler::unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED: NVRTC is unavailable: %s\n", why.c_str());
    return;
  }
  auto s = jit::detail::resolve(AddBias::name, {{"dtype", "f32"}, {"hidden", 64}}, jit::Target::parse("cuda:sm_90"));
  CHECK(s.unit.main.text.find("#define JITK_PARAMS long long rows, const T* x, const T* bias, T* out, double factor, long long "
                              "jitk_work_items") != std::string::npos);
  const jit::Error e = error_of([&] { s.compiler->compile(s.unit); });
  INFO(e.what());
  CHECK(e.kind() == jit::ErrorCode::CompileFailed);
  CHECK(std::string(e.what()).find("add_bias.cu(5)") != std::string::npos);
  // Without the mistake it compiles.
  jitk_test::write_file(fs::path(folder("add_bias")) / "add_bias.cu",
                        "#include \"scale.h\"\n"
                        "JITK_GPU_KERNEL(JITK_PARAMS) {\n"
                        "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i < jitk_work_items * JITK_HIDDEN) out[i] = scale(x[i] + bias[i % JITK_HIDDEN]) + T(factor);\n"
                        "}\n");
  auto fixed = jit::detail::resolve(AddBias::name, {{"dtype", "f32"}, {"hidden", 64}}, jit::Target::parse("cuda:sm_90"));
  CHECK_FALSE(fixed.compiler->compile(fixed.unit).bytes.empty());
}

TEST_CASE("the README's and writing-kernels.md's own-kernel example is tests/own_kernel's files, verbatim") {
  const fs::path source = JITK_SOURCE_DIR;
  const std::string readme = jitk_test::read_file(source / "README.md");
  const std::string guide = jitk_test::read_file(source / "docs/writing-kernels.md");
  for (const char* file : {"axpby.hpp", "kernels/axpby.cpp", "kernels/axpby_math.h", "main.cpp"}) {
    const std::string text = jitk_test::read_file(source / "tests/own_kernel" / file);
    INFO(file);
    REQUIRE(!text.empty());
    CHECK(readme.find(text) != std::string::npos);
    CHECK(guide.find(text) != std::string::npos);
  }
  // The README's CMake file is the project's, up to its checking programs.
  const std::string cmake = jitk_test::read_file(source / "tests/own_kernel/CMakeLists.txt");
  const std::string app = cmake.substr(0, cmake.find("# What the test checks beyond it"));
  REQUIRE(app.size() < cmake.size());
  CHECK(readme.find(app.substr(0, app.find_last_not_of('\n') + 1)) != std::string::npos);
}
