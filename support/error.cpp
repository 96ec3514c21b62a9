// jit::Error and the checks of launch arguments that throw it.
#include <string>
#include <utility>

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

struct Error::State {
  std::string message;
  ErrorFields fields;
};

namespace {

// what(): the message, then what a person needs to see of a compile error to fix it.
std::string full_text(const std::string& message, const ErrorFields& f) {
  std::string text = message;
  if (!f.options.empty()) {
    text += "\noptions:";
    for (const auto& o : f.options) text += " " + o;
  }
  if (!f.log.empty() || f.source) text += "\ncompiler log:\n" + f.log;
  if (f.source)
    text += "\nspecialized source (" + f.source->file + ", text from " + f.source->origin + "; its line 1 is line " +
            std::to_string(f.source->first_text_line) + " here):\n" + f.source->numbered;
  return text;
}

}  // namespace

Error::Error(ErrorCode kind, const std::string& message) : Error(kind, message, ErrorFields{}) {}

Error::Error(ErrorCode kind, const std::string& message, ErrorFields fields)
    : std::runtime_error(full_text(message, fields)),
      kind_(kind),
      state_(std::make_shared<const State>(State{message, std::move(fields)})) {}

const std::string& Error::message() const noexcept { return state_->message; }

const ErrorFields& Error::fields() const noexcept { return state_->fields; }

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
