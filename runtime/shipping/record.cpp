// JITK_RECORD: append what a program uses to a warm manifest, deduplicated under a file lock.
#include "runtime/shipping/record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "jit/kernel_catalog.hpp"
#include "support/logging.hpp"

namespace jit::detail {
namespace {

// Reads the whole file from fd's start.
std::string read_all(int fd) {
  std::string text;
  char buf[65536];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

bool write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string manifest_entry(const std::string& kernel, const ParamSet& params, const Target& target) {
  // Parameter values are validated identifiers and integers: no TOML escaping is needed.
  std::string table;
  for (const auto& [name, value] : params.values()) {
    table += table.empty() ? "" : ", ";
    if (const auto* n = std::get_if<std::int64_t>(&value)) table += name + " = " + std::to_string(*n);
    else table += name + " = \"" + std::get<std::string>(value) + "\"";
  }
  return "[[kernel]]  # " + kernel + " " + target.to_string() + " " + params.to_string() + "\n" +
         "name = \"" + kernel + "\"\n" + "target = \"" + target.to_string() + "\"\n" +
         "params = { " + table + " }\n\n";
}

void record_use(const std::string& kernel, const ParamSet& params, const Target& target) {
  const char* file = std::getenv("JITK_RECORD");
  if (!file || !*file) return;
  if (!is_shipped_kernel(kernel)) {
    // `jitk warm` cannot build a program's own kernel: it does not know its text.
    if (logging_at(spdlog::level::info))
      log().info("JITK_RECORD: {} is this program's own kernel; not recorded (jitk warm could not build it)", kernel);
    return;
  }
  const std::string entry = manifest_entry(kernel, params, target);
  const std::string signature = entry.substr(0, entry.find('\n') + 1);
  // This process has written it already: no need to lock and read the file again.
  static std::mutex mutex;
  static std::set<std::string> written;
  std::lock_guard guard(mutex);
  if (written.count(signature)) return;
  int fd = ::open(file, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn_once("record", std::string("JITK_RECORD=") + file + " cannot be opened (" + std::strerror(errno) +
                            "); what this program uses is not recorded");
    return;
  }
  // Other processes append too: read, compare and append under one exclusive lock.
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  const std::string text = read_all(fd);
  bool ok = true;
  if (text.find(signature) == std::string::npos) {
    const std::string header = text.empty() ? "# Recorded by jitk (JITK_RECORD): warm with `jitk warm FILE`.\n\n" : "";
    ok = write_all(fd, header + entry);
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  if (!ok) {
    warn_once("record", std::string("JITK_RECORD=") + file + ": cannot append (" + std::strerror(errno) +
                            "); what this program uses is not fully recorded");
    return;
  }
  written.insert(signature);
}

}  // namespace jit::detail
