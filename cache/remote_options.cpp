// The remote options from the JITK_REMOTE_* environment.
#include <charconv>
#include <cstdlib>

#include "cache/remote_address.hpp"
#include "support/logging.hpp"
#include "support/units.hpp"

namespace jit::detail {
namespace {

// "250" and "250ms" are milliseconds, "2s" and "1.5s" seconds; at most a day, at least 1 ms.
std::optional<std::int64_t> parse_millis(std::string t) {
  double scale = 1;
  if (t.size() > 2 && t.ends_with("ms")) t.resize(t.size() - 2);
  else if (t.size() > 1 && t.ends_with("s")) {
    t.resize(t.size() - 1);
    scale = 1000;
  }
  double v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size() || !(v * scale >= 1) || v * scale > 86400e3)
    return std::nullopt;
  return static_cast<std::int64_t>(v * scale);
}

}  // namespace
}  // namespace jit::detail

namespace jit::cache {

RemoteOptions remote_options_from_environment() {
  using detail::warn_once;
  RemoteOptions o;
  if (const char* url = std::getenv("JITK_REMOTE"); url && *url) o.url = url;
  if (const char* mode = std::getenv("JITK_REMOTE_MODE"); mode && *mode) {
    const std::string m = mode;
    if (m == "read-write" || m == "rw") o.mode = RemoteOptions::Mode::ReadWrite;
    else if (m == "read-only" || m == "ro") o.mode = RemoteOptions::Mode::ReadOnly;
    else if (m == "off") o.mode = RemoteOptions::Mode::Off;
    else {
      // Neither guess is safe (writing where one must not, or a silent fleet of cold starts): off, said once.
      o.mode = RemoteOptions::Mode::Off;
      warn_once("remote-mode", "JITK_REMOTE_MODE='" + m + "' is not read-write, read-only or off: the remote cache is off");
    }
  }
  struct Setting {
    const char* env;
    std::int64_t* value;
  };
  for (const Setting& s : {Setting{"JITK_REMOTE_CONNECT_TIMEOUT", &o.connect_timeout_ms}, Setting{"JITK_REMOTE_TIMEOUT", &o.command_timeout_ms},
                           Setting{"JITK_REMOTE_LEASE_TTL", &o.lease_ttl_ms}, Setting{"JITK_REMOTE_WAIT", &o.wait_ms},
                           Setting{"JITK_REMOTE_POLL", &o.poll_ms},
                           Setting{"JITK_REMOTE_RETRY", &o.retry_ms}}) {
    const char* v = std::getenv(s.env);
    if (!v || !*v) continue;
    if (auto ms = detail::parse_millis(v)) *s.value = *ms;
    else
      warn_once(s.env, std::string(s.env) + "='" + v + "' is not a duration (e.g. 500ms, 2s, or milliseconds); using " +
                           std::to_string(*s.value) + " ms");
  }
  if (const char* v = std::getenv("JITK_REMOTE_MAX_ENTRY"); v && *v) {
    if (auto bytes = detail::parse_size(v); bytes && *bytes > 0) o.max_entry_bytes = *bytes;
    else warn_once("JITK_REMOTE_MAX_ENTRY", std::string("JITK_REMOTE_MAX_ENTRY='") + v + "' is not a size (e.g. 64M); using " +
                                                std::to_string(o.max_entry_bytes) + " bytes");
  }
  return o;
}

}  // namespace jit::cache
