// Parsing remote URLs: pure functions (fuzz/fuzz_remote_url.cpp runs them alone).
#include "cache/remote_address.hpp"

#include <charconv>

namespace jit::detail {
namespace {

std::optional<std::int64_t> parse_int(std::string_view t) {
  std::int64_t v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
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
    // The user as written (still %-escaped: a decoded one could hold a newline), never the password.
    shown_auth = (a.user.empty() ? "" : auth.substr(0, colon) + ":") + "***@";
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
