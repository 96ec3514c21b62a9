// JITK_RECORD: append what a program uses to a warm manifest, deduplicated under a file lock.
#include "runtime/shipping/record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "jit/kernel_catalog.hpp"
#include "jit/tuning.hpp"
#include "jit/compiler.hpp"
#include "runtime/get_kernel.hpp"
#include "support/logging.hpp"
#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

// A record file is a manifest people read: one past this is not one, and is left alone.
constexpr std::int64_t kMaxRecordBytes = 64 << 20;

// Reads the whole file from fd's start (a regular file of at most kMaxRecordBytes, checked first).
std::optional<std::string> read_all(int fd, std::int64_t size) {
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!read_exactly_at(fd, text.data(), text.size(), 0)) return std::nullopt;
  return text;
}

// Set at the first problem: recording stops for the rest of the process (one warning said why).
std::atomic<bool> g_stopped{false};

void stop_recording(const std::string& file, const std::string& problem) {
  g_stopped = true;
  warn_once("record", "JITK_RECORD=" + printable(file) + " " + problem + "; what this program uses is not recorded");
}

}  // namespace

std::string manifest_entry(const std::string& kernel, const ParamSet& params, const Target& target,
                           const std::vector<std::int64_t>* tune_shape) {
  // Parameter values are validated identifiers and integers: no TOML escaping is needed.
  std::string table;
  for (const auto& [name, value] : params.values()) {
    table += table.empty() ? "" : ", ";
    if (const auto* n = std::get_if<std::int64_t>(&value)) table += name + " = " + std::to_string(*n);
    else table += name + " = \"" + std::get<std::string>(value) + "\"";
  }
  std::string shape, numbers;
  if (tune_shape) {
    for (std::int64_t n : *tune_shape) {
      shape += (shape.empty() ? "" : "x") + std::to_string(n);
      numbers += (numbers.empty() ? "" : ", ") + std::to_string(n);
    }
  }
  return "[[kernel]]  # " + kernel + " " + target.to_string() + " " + params.to_string() +
         (tune_shape ? " tuned for " + shape : "") + "\n" + "name = \"" + kernel + "\"\n" + "target = \"" +
         target.to_string() + "\"\n" + "params = { " + table + " }\n" + (tune_shape ? "tune = [[" + numbers + "]]\n" : "") +
         "\n";
}

namespace {

// Gets on this thread under a NotRecorded (tuning's candidates).
thread_local int t_not_recorded = 0;

// Whether this use is recorded at all: JITK_RECORD is set, recording has not stopped, the thread
// is not tuning, and the kernel is one `jitk warm` can build.
const char* record_file(const std::string& kernel) {
  const char* file = std::getenv("JITK_RECORD");
  if (!file || !*file || g_stopped || t_not_recorded > 0) return nullptr;
  if (!is_shipped_kernel(kernel)) {
    // `jitk warm` cannot build a program's own kernel: it does not know its text.
    if (logging_at(spdlog::level::info))
      log().info("JITK_RECORD: {} is this program's own kernel; not recorded (jitk warm could not build it)", kernel);
    return nullptr;
  }
  return file;
}

void append_entry(const char* file, const std::string& entry);

}  // namespace

NotRecorded::NotRecorded() { ++t_not_recorded; }
NotRecorded::~NotRecorded() { --t_not_recorded; }

void record_use(const std::string& kernel, const ParamSet& params, const Target& target) try {
  if (const char* file = record_file(kernel)) append_entry(file, manifest_entry(kernel, params, target));
} catch (const std::exception& e) {
  // Recording is a side line: whatever goes wrong in it, the program goes on.
  g_stopped = true;
  warn_once("record", std::string("JITK_RECORD: recording stopped: ") + e.what());
}

void record_tuned_use(const std::string& kernel, const ParamSet& base, const std::vector<std::int64_t>& shape,
                      const ParamSet& winner, const Target& target) try {
  const char* file = record_file(kernel);
  if (!file) return;
  const Specialization chosen = resolve(kernel, winner, target);
  // The target as compiled for (the device's arch), as record_use writes it.
  Target recorded = target;
  if (recorded.arch.empty() && target.backend != Backend::Cpu) recorded.arch = chosen.compiler->arch();
  append_entry(file, manifest_entry(kernel, chosen.params, recorded));
  append_entry(file, manifest_entry(kernel, validate_params(find_kernel(kernel), base), recorded, &shape));
} catch (const std::exception& e) {
  g_stopped = true;
  warn_once("record", std::string("JITK_RECORD: recording stopped: ") + e.what());
}

namespace {

void append_entry(const char* file, const std::string& entry) {
  const std::string signature = entry.substr(0, entry.find('\n') + 1);
  // This process has written it already: no need to lock and read the file again.
  static std::mutex mutex;
  static std::set<std::string> written;
  std::lock_guard guard(mutex);
  if (g_stopped || written.count(signature)) return;
  // The last component is never followed (a link planted where the record goes would make this
  // program append to another of the user's files), and only a regular file is written: a FIFO,
  // a terminal or /dev/full would block, interleave or fail forever.
  std::string why;
  struct stat st{};
  FileHandle fd = open_regular_file(file, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW, &why, &st);
  if (!fd) return stop_recording(file, "cannot be opened (" + why + ")");
  if (st.st_nlink > 1) return stop_recording(file, "has " + std::to_string(st.st_nlink) + " hard links; not written");
  // Other processes append too: read, compare and append under one exclusive lock.
  while (::flock(fd.fd(), LOCK_EX) != 0 && errno == EINTR) {
  }
  std::string problem;
  if (::fstat(fd.fd(), &st) != 0) {
    problem = std::string("cannot be read (") + std::strerror(errno) + ")";
  } else if (st.st_size > kMaxRecordBytes) {
    problem = "is " + std::to_string(st.st_size) + " bytes, more than a record file of " + std::to_string(kMaxRecordBytes) + " bytes";
  } else if (const auto text = read_all(fd.fd(), st.st_size); !text) {
    problem = std::string("cannot be read (") + std::strerror(errno) + ")";
  } else if (text->find(signature) == std::string::npos) {
    const std::string header = text->empty() ? "# Recorded by jitk (JITK_RECORD): warm with `jitk warm FILE`.\n\n" : "";
    const std::string appended = header + entry;
    if (!write_all(fd.fd(), appended.data(), appended.size())) {
      problem = std::string("cannot be appended to (") + std::strerror(errno) + ")";
      // No half entry is left for the next reader: the file goes back to its length before.
      if (::ftruncate(fd.fd(), st.st_size) != 0) problem += ", and a partial entry may remain";
    }
  }
  ::flock(fd.fd(), LOCK_UN);
  if (!problem.empty()) return stop_recording(file, problem);
  written.insert(signature);
}

}  // namespace

}  // namespace jit::detail
