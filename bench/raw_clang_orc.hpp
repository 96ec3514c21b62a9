// The raw-compile baseline of jitk_bench: clang in-process -> object -> LLVM ORC, with nothing of jitk in between.
#pragma once
#include <memory>
#include <string>

namespace jitk_bench {

// The CPU entry ABI every kernel text defines (kernel_sources/jitk_cpu.h).
using CpuEntry = void (*)(void* const* args, long long begin, long long end);

// Where a raw compile_and_load spent its time.
struct RawTiming {
  double compile_ms = 0;  // clang: source to object
  double load_ms = 0;     // ORC: dylib, add object, lookup
};

// Calls clang and ORC directly (not through jit::get), with the cc1 flags taken from
// jit::detail::OrcCompiler, so that timing it against jit::get measures what jitk adds: keying,
// the disk cache, locking and bookkeeping.
// It lives in a library of its own (libjitk_bench_raw.so) that jitk_bench opens only for the compile
// bench, so the other benches' processes map LLVM only where jitk does: open_raw_clang_orc() makes
// one, and its methods are virtual so that jitk_bench names no symbol of that library.
class RawClangOrc {
 public:
  RawClangOrc();  // initializes LLVM's native target and starts one LLJIT, as the library does
  virtual ~RawClangOrc();
  RawClangOrc(const RawClangOrc&) = delete;
  RawClangOrc& operator=(const RawClangOrc&) = delete;

  // Compiles `source` (as file_name, with header_name includable) to an object in memory, adds it
  // to a fresh JITDylib and returns its entry symbol. Throws std::runtime_error with the log.
  virtual CpuEntry compile_and_load(const std::string& file_name, const std::string& source, const std::string& header_name,
                            const std::string& header_text, RawTiming* timing = nullptr);

  virtual const std::string& target_cpu() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Opens libjitk_bench_raw.so (the path CMake built it at) and makes a RawClangOrc; exits on failure.
std::unique_ptr<RawClangOrc> open_raw_clang_orc();

}  // namespace jitk_bench

// libjitk_bench_raw.so's one entry point: a new RawClangOrc the caller owns.
extern "C" jitk_bench::RawClangOrc* jitk_bench_new_raw_clang_orc();
