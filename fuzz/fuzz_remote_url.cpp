// libFuzzer target: any bytes as JITK_REMOTE. The URL parser must accept or refuse with a reason,
// never crash or throw; what it accepts has a host and port in range, and a shown URL that hides its password.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cache/remote_address.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  std::string problem;
  auto a = jit::detail::parse_redis_url(url, &problem);
  if (!a) {
    if (problem.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  if (a->socket_path.empty() && (a->port < 1 || a->port > 65535 || a->host.empty())) std::abort();
  // With a password, what is shown hides it behind "***@" and holds nothing after "redis://" but
  // the (escaped) user before it.
  if (!a->password.empty() && a->shown.find("***@") == std::string::npos) std::abort();
  return 0;
}
