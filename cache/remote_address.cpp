// Parsing remote URLs and the JITK_REMOTE_* environment.
#include "cache/remote_address.hpp"

#include <charconv>
#include <cstdlib>

#include "support/logging.hpp"
#include "support/units.hpp"

namespace jit::detail {
namespace {

std::optional<std::int64_t> parse_int(std::string_view t) {
  std::int64_t v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

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

// %XX in a user name or password (a password may hold '@' or ':').
std::optional<std::string> percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int v = 0;
    auto r = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + i + 3) return std::nullopt;
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

bool has_control(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

const char* mode_name(cache::RemoteOptions::Mode mode) {
  switch (mode) {
    case cache::RemoteOptions::Mode::ReadWrite: return "read-write";
    case cache::RemoteOptions::Mode::ReadOnly: return "read-only";
    case cache::RemoteOptions::Mode::Off: return "off";
  }
  return "off";
}

std::optional<RedisAddress> parse_redis_url(const std::string& url, std::string* problem) {
  auto fail = [&](std::string why) -> std::optional<RedisAddress> {
    *problem = std::move(why);
    return std::nullopt;
  };
  if (has_control(url)) return fail("it holds control characters");
  RedisAddress a;
  if (url.starts_with("unix://")) {
    a.socket_path = url.substr(7);
    if (a.socket_path.empty() || a.socket_path[0] != '/') return fail("unix:// needs an absolute socket path (unix:///run/redis/redis.sock)");
    a.shown = url;
    return a;
  }
  if (!url.starts_with("redis://")) return fail("the scheme is neither redis:// nor unix://");
  std::string rest = url.substr(8);
  std::string shown_auth;
  if (auto at = rest.rfind('@'); at != std::string::npos) {
    std::string auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = auth.find(':');
    auto user = percent_decoded(auth.substr(0, colon));
    auto password = colon == std::string::npos ? std::optional<std::string>("") : percent_decoded(auth.substr(colon + 1));
    if (!user || !password) return fail("a bad %-escape in its user or password");
    a.user = *user;
    a.password = *password;
    if (colon == std::string::npos) {  // redis://password@host: the password alone
      a.password = a.user;
      a.user.clear();
    }
    if (a.password.empty()) return fail("user given without a password (redis://user:password@host:port)");
    shown_auth = (a.user.empty() ? "" : a.user + ":") + "***@";
  }
  std::string db;
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  std::string port = "6379";
  if (!rest.empty() && rest[0] == '[') {  // [::1]:6379
    auto close = rest.find(']');
    if (close == std::string::npos) return fail("an IPv6 host without its ']'");
    a.host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return fail("text after the IPv6 host");
      port = rest.substr(1);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    a.host = rest;
  }
  if (a.host.empty()) return fail("no host (redis://host:port)");
  auto p = parse_int(port);
  if (!p || *p < 1 || *p > 65535) return fail("port '" + port + "' is not a number in 1-65535");
  a.port = static_cast<int>(*p);
  if (!db.empty()) {
    auto d = parse_int(db);
    if (!d || *d < 0 || *d > 1000000) return fail("database '" + db + "' is not a number");
    a.db = static_cast<int>(*d);
  }
  a.shown = "redis://" + shown_auth + (a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host) + ":" +
            std::to_string(a.port) + "/" + std::to_string(a.db);
  return a;
}

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
