// A minimal clang CompilerInstance -> in-memory object -> LLJIT pipeline: jitk_bench's cold-compile baseline.
#include "raw_clang_orc.hpp"

#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "jit/cpu/orc_compiler.hpp"
#include <vector>

namespace jitk_bench {
namespace {

// The in-memory folders the unit lives in; the same layout jitk uses, so include lookup costs the same.
constexpr const char* kSourceDir = "/jitk/src";
constexpr const char* kIncludeDir = "/jitk/include";
constexpr const char* kEntrySymbol = "jitk_entry";

std::string to_text(llvm::Error e) { return llvm::toString(std::move(e)); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct RawClangOrc::Impl {
  std::string triple, cpu;
  std::vector<std::string> cc1_args;  // everything but the input file
  std::unique_ptr<llvm::orc::LLJIT> jit;
  unsigned next_dylib = 0;
};

RawClangOrc::RawClangOrc() : impl_(std::make_unique<Impl>()) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();

  // The flags come from the library's compiler object (the thing under comparison is what jitk
  // does around clang, not which flags it passes); clang itself is called below, directly.
  jit::detail::OrcCompiler flags;
  impl_->cpu = flags.arch();
  impl_->cc1_args = flags.cc1_args();
  impl_->cc1_args.insert(impl_->cc1_args.end(), {"-I", kIncludeDir, "-emit-obj", "-x", "c++"});

  // The object linking layer jitk's CPU driver uses (RuntimeDyld), so loading costs the same.
  auto built = llvm::orc::LLJITBuilder()
                   .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& session, const llvm::Triple&) {
                     return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                         session, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
                   })
                   .create();
  if (!built) throw std::runtime_error("cannot start LLJIT: " + to_text(built.takeError()));
  impl_->jit = std::move(*built);
}

RawClangOrc::~RawClangOrc() = default;

const std::string& RawClangOrc::target_cpu() const { return impl_->cpu; }

CpuEntry RawClangOrc::compile_and_load(const std::string& file_name, const std::string& source,
                                       const std::string& header_name, const std::string& header_text,
                                       RawTiming* timing) {
  auto started = std::chrono::steady_clock::now();
  const std::string main_path = std::string(kSourceDir) + "/" + file_name;
  std::vector<const char*> argv;
  for (const auto& a : impl_->cc1_args) argv.push_back(a.c_str());
  argv.push_back(main_path.c_str());

  std::string log;
  llvm::raw_string_ostream log_stream(log);
  clang::CompilerInstance ci;
  auto diag_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  ci.createDiagnostics(new clang::TextDiagnosticPrinter(log_stream, diag_options.get()), /*ShouldOwnClient=*/true);
  bool parsed = clang::CompilerInvocation::CreateFromArgs(ci.getInvocation(), argv, ci.getDiagnostics());

  auto memory_fs = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  memory_fs->addFile(main_path, 0, llvm::MemoryBuffer::getMemBufferCopy(source, main_path));
  const std::string header_path = std::string(kIncludeDir) + "/" + header_name;
  memory_fs->addFile(header_path, 0, llvm::MemoryBuffer::getMemBufferCopy(header_text, header_path));
  auto overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::getRealFileSystem());
  overlay->pushOverlay(memory_fs);
  ci.createFileManager(overlay);

  llvm::SmallVector<char, 0> object;
  ci.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
  clang::EmitObjAction action;
  if (!parsed || !ci.ExecuteAction(action) || object.empty()) {
    log_stream.flush();
    throw std::runtime_error("raw clang failed on " + file_name + ":\n" + log);
  }
  double compile_ms = ms_since(started);
  auto loading = std::chrono::steady_clock::now();

  auto& jit = *impl_->jit;
  auto dylib = jit.createJITDylib("raw_" + std::to_string(impl_->next_dylib++));
  if (!dylib) throw std::runtime_error("ORC: " + to_text(dylib.takeError()));
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit.getDataLayout().getGlobalPrefix());
  if (!generator) throw std::runtime_error("ORC: " + to_text(generator.takeError()));
  dylib->addGenerator(std::move(*generator));
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), file_name);
  if (auto err = jit.addObjectFile(*dylib, std::move(buffer)))
    throw std::runtime_error("ORC could not add the object: " + to_text(std::move(err)));
  auto address = jit.lookup(*dylib, kEntrySymbol);
  if (!address) throw std::runtime_error("ORC lookup of jitk_entry failed: " + to_text(address.takeError()));
  if (timing) *timing = {compile_ms, ms_since(loading)};
  return address->toPtr<CpuEntry>();
}

}  // namespace jitk_bench

extern "C" __attribute__((visibility("default"))) jitk_bench::RawClangOrc* jitk_bench_new_raw_clang_orc() {
  return std::make_unique<jitk_bench::RawClangOrc>().release();
}
