// Where a remote tier is and how it is used: the URL and the JITK_REMOTE_* settings read into values.
#pragma once
#include <optional>
#include <string>

#include "jit/cache.hpp"

namespace jit::detail {

// redis://[user:password@]host:port[/db] or unix:///path, taken apart.
struct RedisAddress {
  std::string host;  // empty for a unix socket
  int port = 6379;
  std::string socket_path;  // for unix://
  std::string user, password;
  int db = 0;
  std::string shown;  // the URL with its password hidden: for logs and `jitk stats`
};

// The address url names, or nullopt with *problem saying what is wrong (naming the part).
std::optional<RedisAddress> parse_redis_url(const std::string& url, std::string* problem);
// "read-write", "read-only", "off".
const char* mode_name(cache::RemoteOptions::Mode mode);

}  // namespace jit::detail
