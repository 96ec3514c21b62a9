// How a GPU driver's failing result reads in jitk's errors, shared by the CUDA and HIP drivers.
#pragma once
#include <string>

namespace jit::detail {

// "<the driver's name for the result, or fallback> (<its number>)": "CUDA_ERROR_OUT_OF_MEMORY (2)".
inline std::string driver_result_text(const char* name, const char* fallback, int result) {
  return std::string(name ? name : fallback) + " (" + std::to_string(result) + ")";
}

}  // namespace jit::detail
