// The compile skeleton NVRTC and hipRTC share (see rtc_compile.hpp).
#include "jit/rtc_compile.hpp"

#include <chrono>

namespace jit::detail {

CompiledArtifact rtc_compile(const RtcFunctions& rtc, const RtcOutput& output, const RtcRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  const SourceUnit& unit = request.unit;
  auto failed = [&](RtcResult r, std::string log, const char* stage) {
    return Error(ErrorCode::CompileFailed,
                 "compiling " + unit.kernel + " (" + unit.params_text + ") for " + request.target + " with " +
                     request.compiler_id + " failed" + stage + ": " + rtc.get_error_string(r),
                 compile_error_fields(unit, request.target, request.compiler_id, request.options, std::move(log)));
  };
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : unit.headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  RtcProgram program = nullptr;
  if (RtcResult r = rtc.create_program(&program, unit.main.text.c_str(), unit.main.name.c_str(),
                                       static_cast<int>(header_texts.size()), header_texts.data(), header_names.data());
      r != 0)
    throw failed(r, "", " to create the program");
  struct Destroy {
    const RtcFunctions& rtc;
    RtcProgram* program;
    ~Destroy() { rtc.destroy_program(program); }
  } destroy{rtc, &program};

  std::vector<const char*> options;
  for (const auto& o : request.options) options.push_back(o.c_str());
  const RtcResult compiled = rtc.compile_program(program, static_cast<int>(options.size()), options.data());
  std::size_t log_size = 0;
  rtc.get_program_log_size(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) rtc.get_program_log(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (compiled != 0) throw failed(compiled, std::move(log), "");

  CompiledArtifact out;
  std::size_t size = 0;
  output.get_size(program, &size);
  out.bytes.resize(size);
  if (size > 0) output.get(program, out.bytes.data());
  out.log = std::move(log);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace jit::detail
