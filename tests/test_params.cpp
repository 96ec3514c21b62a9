// Parameters are validated before anything compiles, and a bad one is an error naming it, its value and what is allowed.
#include <catch2/catch.hpp>

#include "jit/kernels.hpp"
#include "runtime/backend_table.hpp"

using jit::ErrorCode;
using Catch::Matchers::Contains;

namespace {
// The error a call throws (fails the test when it throws nothing).
template <class F> jit::Error error_of(F&& f) {
  try {
    f();
  } catch (const jit::Error& e) {
    return e;
  }
  FAIL("expected a jit::Error");
  return jit::Error(ErrorCode::Internal, "");
}
}  // namespace

TEST_CASE("an unknown kernel is an error that lists the kernels that exist", "[params]") {
  auto e = error_of([] { jit::detail::get_kernel("rms_nrom", {{"dtype", std::string("f32")}}, jit::Target::cpu()); });
  CHECK(e.code() == ErrorCode::UnknownKernel);
  CHECK_THAT(e.what(), Contains("rms_nrom") && Contains("rms_norm") && Contains("softmax"));
}

TEST_CASE("a hidden size out of range names the parameter, its value and the range", "[params]") {
  for (std::int64_t bad : {0LL, -5LL, (1LL << 20) + 1}) {
    auto e = error_of([&] { jit::get<jit::kernels::RmsNorm>({jit::DType::f32, bad}, jit::Target::cpu()); });
    CHECK(e.code() == ErrorCode::InvalidParams);
    CHECK_THAT(e.what(), Contains("hidden") && Contains(std::to_string(bad)) && Contains("[1, 1048576]"));
  }
}

TEST_CASE("a dtype the CPU kernels lack is refused before compiling", "[params]") {
  auto e = error_of([] { jit::get<jit::kernels::Softmax>({jit::DType::bf16, 128}, jit::Target::cpu()); });
  CHECK(e.code() == ErrorCode::InvalidParams);
  CHECK_THAT(e.what(), Contains("dtype") && Contains("bf16") && Contains("f32, f64"));
}

TEST_CASE("unknown, missing and mistyped parameters are each named", "[params]") {
  auto target = jit::Target::cpu();
  auto unknown = error_of([&] {
    jit::detail::get_kernel("saxpy", {{"dtype", std::string("f32")}, {"hiden", std::int64_t{4}}}, target);
  });
  CHECK(unknown.code() == ErrorCode::InvalidParams);
  CHECK_THAT(unknown.what(), Contains("unknown parameter 'hiden'") && Contains("dtype"));

  auto missing = error_of([&] { jit::detail::get_kernel("softmax", {{"dtype", std::string("f32")}}, target); });
  CHECK_THAT(missing.what(), Contains("missing parameter 'hidden'"));

  auto mistyped = error_of([&] {
    jit::detail::get_kernel("softmax", {{"dtype", std::string("f32")}, {"hidden", std::string("4096")}}, target);
  });
  CHECK_THAT(mistyped.what(), Contains("'hidden'") && Contains("is text"));
}

TEST_CASE("targets parse from text and unknown ones are refused", "[params]") {
  CHECK(jit::Target::parse("cpu") == jit::Target::cpu());
  auto cuda = jit::Target::parse("cuda:sm_90");
  CHECK(cuda.backend == jit::Backend::Cuda);
  CHECK(cuda.arch == "sm_90");
  CHECK(cuda.to_string() == "cuda:sm_90");
  CHECK(error_of([] { jit::Target::parse("tpu"); }).code() == ErrorCode::InvalidParams);
}

TEST_CASE("every backend of the backend table parses from its name, prints it, and is listed when a target is unknown", "[params]") {
  const auto unknown = error_of([] { jit::Target::parse("tpu:v5"); });
  CHECK_THAT(unknown.what(), Contains("use cpu, cuda[:sm_XX] or hip[:gfxXXX]"));
  for (const auto& row : jit::detail::backend_table()) {
    const auto t = jit::Target::parse(std::string(row.name) + ":x");
    CHECK(t.backend == row.backend);
    CHECK(jit::backend_name(row.backend) == row.name);
    CHECK(t.to_string() == std::string(row.name) + ":x");
  }
}

TEST_CASE("a target whose backend is missing says why, not crash", "[params]") {
  auto e = error_of([] { jit::get<jit::kernels::Saxpy>({jit::DType::f32}, jit::Target::parse("hip:gfx90a")); });
  CHECK(e.code() == ErrorCode::BackendUnavailable);
  CHECK_THAT(e.what(), Contains("hip:gfx90a") && Contains("unavailable"));
}

TEST_CASE("parameter sets print canonically", "[params]") {
  jit::ParamSet p{{"dtype", std::string("f64")}, {"hidden", std::int64_t{7}}};
  CHECK(p.to_string() == "dtype=f64,hidden=7");
  p.set("hidden", std::int64_t{9});
  CHECK(p.to_string() == "dtype=f64,hidden=9");
}
