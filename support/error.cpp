// jit::Error and the checks of launch arguments that throw it.
#include <string>

#include "jit/jit.hpp"

namespace jit {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidParams: return "invalid params";
    case ErrorCode::UnknownKernel: return "unknown kernel";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::CompileFailed: return "compile failed";
    case ErrorCode::BackendUnavailable: return "backend unavailable";
    case ErrorCode::LoadFailed: return "load failed";
    case ErrorCode::Device: return "device error";
    case ErrorCode::CacheIo: return "cache i/o";
    case ErrorCode::Manifest: return "manifest";
    case ErrorCode::Internal: return "internal";
  }
  return "?";
}

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

namespace detail {

void check_dtype(std::string_view kernel, std::string_view arg, DType expected, DType got) {
  if (expected != got)
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": argument '" + std::string(arg) + "' is " +
                                                std::string(dtype_name(got)) + " but the kernel was specialized for " +
                                                std::string(dtype_name(expected)));
}

void check_not_null(std::string_view kernel, std::string_view arg, const void* p, std::int64_t count) {
  if (count > 0 && p == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(kernel) + ": argument '" + std::string(arg) + "' is null");
}

void check_non_negative(std::string_view kernel, std::string_view arg, std::int64_t v) {
  if (v < 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(kernel) + ": argument '" + std::string(arg) + "' = " + std::to_string(v) + " is negative");
}

}  // namespace detail
}  // namespace jit
