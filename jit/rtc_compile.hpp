// The compile NVRTC and hipRTC share (program with the unit's headers, compile, log, code), over a
// table of the vendor's functions, so each compiler keeps only what differs.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "jit/compiler.hpp"

namespace jit::detail {

// nvrtcProgram and hiprtcProgram are both opaque pointers, and their functions have the same shapes
// (hipRTC's take `const char**` where NVRTC's take `const char* const*`: the same in the ABI).
using RtcResult = int;
using RtcProgram = struct RtcProgramHandle*;

// The vendor's functions, resolved from its library under its own names (nvrtc*, hiprtc*).
struct RtcFunctions {
  const char* (*get_error_string)(RtcResult);
  RtcResult (*create_program)(RtcProgram*, const char* text, const char* name, int header_count,
                              const char* const* header_texts, const char* const* header_names);
  RtcResult (*destroy_program)(RtcProgram*);
  RtcResult (*compile_program)(RtcProgram, int option_count, const char* const* options);
  RtcResult (*get_program_log_size)(RtcProgram, std::size_t*);
  RtcResult (*get_program_log)(RtcProgram, char*);
};

// Where the code comes out: NVRTC's CUBIN or PTX, hipRTC's code object.
struct RtcOutput {
  RtcResult (*get_size)(RtcProgram, std::size_t*);
  RtcResult (*get)(RtcProgram, char*);
};

// What one compile is and is for, as the error of a failed one names it.
struct RtcRequest {
  const SourceUnit& unit;
  std::vector<std::string> options;  // everything the compiler is given
  std::string target;                // "cuda:sm_90", "hip:gfx90a"
  std::string compiler_id;           // "nvrtc 13.0"
};

// Compiles request.unit; throws Error{CompileFailed} carrying the log, options and numbered source.
CompiledArtifact rtc_compile(const RtcFunctions& rtc, const RtcOutput& output, const RtcRequest& request);

}  // namespace jit::detail
