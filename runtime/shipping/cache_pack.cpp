// jitk export / import: a warmed cache as one file.
//
// Layout: "JITKPACK", u32 pack version, u32 cache format, u64 JSON length, the JSON (jitk version,
// rows: key, kernel, params, backend, arch, compiler, implementation, implementation_version,
// compile_ms, size, checksum; "tuning": the autotuning decisions, as `jitk ls --tuning --json`
// lists them, optional), the payloads in row order, then the XXH3-128 (32 hex digits) of
// everything before it. A payload is the artifact's blob as the cache keeps it (pack version 2):
// its header binds it to its key, kernel, params, backend and target, checked at import.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "cache/process_tiers.hpp"
#include "jit/cache.hpp"
#include "jit/kernel_catalog.hpp"
#include "runtime/backend_driver.hpp"
#include "support/logging.hpp"

namespace jit::cache {
namespace {

constexpr char kMagic[8] = {'J', 'I', 'T', 'K', 'P', 'A', 'C', 'K'};
constexpr std::uint32_t kPackVersion = 2;  // 2: payloads are bound blobs
constexpr std::size_t kHeader = 8 + 4 + 4 + 8, kTrailer = 32;

template <class V> void put(std::string& out, V v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
template <class V> V get(const std::string& in, std::size_t at) {
  V v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

[[noreturn]] void damaged(const std::filesystem::path& file, const std::string& what) {
  throw Error(ErrorCode::CacheIo, "pack " + file.string() + " is damaged: " + what + "; nothing imported");
}

bool is_hex_key(const std::string& k) {
  return k.size() == 32 && k.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string describe(const nlohmann::json& r) {
  return r.value("kernel", "?") + " (" + r.value("params", "") + ") " + r.value("backend", "") + " " + r.value("arch", "");
}

// Why this machine would never look an artifact up, or "" (unchecked: the backend cannot compile here).
std::string staleness(const nlohmann::json& r, bool* unchecked) {
  const std::string kernel = r["kernel"], impl = r["implementation"];
  const int version = r["implementation_version"];
  const auto& reg = detail::registry();
  for (std::size_t i = 0; i < reg.shipped; ++i) {
    if (reg.kernels[i].name != kernel) continue;
    if (impl.empty()) return "made before implementations (cache format 1)";
    for (const auto& shipped : reg.kernels[i].implementations)
      if (shipped.name == impl && shipped.version != version)
        return "implementation " + impl + " v" + std::to_string(version) + ", this jitk ships v" + std::to_string(shipped.version);
  }
  Target target;
  try {
    target = Target::parse(r["backend"].get<std::string>());
  } catch (const Error&) {
    return "unknown backend";
  }
  target.arch = target.backend == Backend::Cpu ? "" : r["arch"].get<std::string>();
  try {
    const auto& compiler = detail::compiling_driver_for(target).compiler(target);
    if (compiler.id() != r["compiler"].get<std::string>())
      return "compiled by " + r["compiler"].get<std::string>() + ", this machine compiles with " + compiler.id();
    if (target.backend == Backend::Cpu && compiler.arch() != r["arch"].get<std::string>())
      return "compiled for CPU " + r["arch"].get<std::string>() + ", this machine is " + compiler.arch();
  } catch (const Error&) {
    *unchecked = true;
  }
  return "";
}

// The artifact inside a pack entry's blob, after checking that the blob is bound to the entry it
// sits in (its key, kernel, params, backend, target, compiler, implementation): payloads swapped
// between entries, or an entry relabelled, are refused.
std::vector<char> unwrap_bound_payload(const std::filesystem::path& file, const nlohmann::json& r, const std::vector<char>& blob) {
  const detail::ArtifactMeta named{.kernel = r["kernel"], .params = r["params"], .backend = r["backend"], .arch = r["arch"],
                                   .compiler = r["compiler"], .compile_ms = 0, .implementation = r["implementation"],
                                   .implementation_version = r["implementation_version"]};
  detail::BlobHeader bound;
  std::string why = detail::check_blob_binding({blob.data(), blob.size()}, r["key"], &bound);
  if (why.empty()) why = detail::binding_mismatch(bound, r["key"], &named);
  if (!why.empty()) damaged(file, "the payload of " + describe(r) + " is not the artifact its entry names: " + why);
  return {blob.begin() + static_cast<std::ptrdiff_t>(bound.header_size), blob.end()};
}

}  // namespace

ExportResult export_pack(const std::filesystem::path& file, const std::optional<Target>& target) {
  detail::DiskTier& cache = *detail::process_tiers().disk;
  const detail::TuningStore& tuning_store = detail::process_tiers().tuning;
  ExportResult result;
  nlohmann::json rows = nlohmann::json::array();
  std::string payloads;
  for (const auto& row : cache.rows()) {
    if (target && (row.backend != backend_name(target->backend) || (!target->arch.empty() && row.arch != target->arch)))
      continue;
    auto payload = cache.read_blob(row.key);  // header and all: the import checks what it is bound to
    if (!payload) {
      result.skipped.push_back(row.key + " " + row.kernel + " (" + row.params + "): blob missing or damaged (run `jitk verify`)");
      continue;
    }
    rows.push_back({{"key", row.key}, {"kernel", row.kernel}, {"params", row.params}, {"backend", row.backend},
                    {"arch", row.arch}, {"compiler", row.compiler}, {"implementation", row.implementation},
                    {"implementation_version", row.implementation_version}, {"compile_ms", row.compile_ms},
                    {"size", payload->size()}, {"checksum", detail::checksum_hex(payload->data(), payload->size())}});
    payloads.append(payload->data(), payload->size());
    ++result.artifacts;
    result.bytes += static_cast<std::int64_t>(payload->size());
  }
  // Autotuning decisions go with the artifacts: a device identity starts with its backend ("cuda
  // sm_90 (NVIDIA H100 ...)"), so a target keeps its own.
  nlohmann::json tuning = nlohmann::json::array();
  for (const auto& t : tuning_store.rows()) {
    if (target) {
      const std::string backend(backend_name(target->backend));
      if (t.device.rfind(backend + " ", 0) != 0) continue;
      if (!target->arch.empty() && t.device.rfind(backend + " " + target->arch + " ", 0) != 0) continue;
    }
    tuning.push_back({{"kernel", t.kernel}, {"base_params", t.base_params}, {"shape_class", t.shape_class}, {"device", t.device},
                      {"choice", t.choice}, {"candidates", t.candidates}, {"best_ms", t.best_ms}, {"default_ms", t.default_ms},
                      {"tuning_ms", t.tuning_ms}, {"created", t.created}});
    ++result.tuning;
  }
  const std::string json = nlohmann::json{{"jitk", "0.1.0"}, {"artifacts", rows}, {"tuning", tuning}}.dump();
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put<std::uint32_t>(out, kPackVersion);
  put<std::uint32_t>(out, detail::kCacheFormatVersion);
  put<std::uint64_t>(out, json.size());
  out += json;
  out += payloads;
  out += detail::checksum_hex(out.data(), out.size());
  // Whole or nothing: a temp file beside the destination, renamed into place.
  const auto temp = file.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.flush();
    if (!f) {
      std::filesystem::remove(temp);
      throw Error(ErrorCode::CacheIo, "cannot write " + temp + ": " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, file, ec);
  if (ec) {
    std::filesystem::remove(temp);
    throw Error(ErrorCode::CacheIo, "cannot write " + file.string() + ": " + ec.message());
  }
  return result;
}

ImportResult import_pack(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  if (!f) throw Error(ErrorCode::CacheIo, "cannot read pack " + file.string() + ": " + std::strerror(errno));
  const std::string in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Everything is checked before anything is merged.
  if (in.size() < kHeader + kTrailer || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    damaged(file, "not a jitk pack (no JITKPACK header)");
  if (detail::checksum_hex(in.data(), in.size() - kTrailer) != in.substr(in.size() - kTrailer))
    damaged(file, "its checksum does not match its contents (truncated or changed)");
  if (auto v = get<std::uint32_t>(in, 8); v != kPackVersion)
    throw Error(ErrorCode::CacheIo, "pack " + file.string() + " has pack version " + std::to_string(v) +
                                        ", this jitk reads " + std::to_string(kPackVersion) + "; nothing imported");
  if (auto v = get<std::uint32_t>(in, 12); v != static_cast<std::uint32_t>(detail::kCacheFormatVersion))
    throw Error(ErrorCode::CacheIo, "pack " + file.string() + " holds artifacts of cache format " + std::to_string(v) +
                                        "; this jitk uses format " + std::to_string(detail::kCacheFormatVersion) +
                                        " and would never use them: nothing imported");
  const auto json_size = get<std::uint64_t>(in, 16);
  if (json_size > in.size() - kHeader - kTrailer) damaged(file, "its table of contents runs past its end");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in.substr(kHeader, json_size));
  } catch (const nlohmann::json::exception& e) {
    damaged(file, std::string("its table of contents is not JSON: ") + e.what());
  }
  struct Entry {
    nlohmann::json row;
    std::vector<char> payload;
  };
  std::vector<Entry> entries;
  std::size_t at = kHeader + json_size;
  const std::size_t end = in.size() - kTrailer;
  try {
    for (const auto& r : doc.at("artifacts")) {
      for (const char* field : {"key", "kernel", "params", "backend", "arch", "compiler", "implementation", "checksum"})
        if (!r.at(field).is_string()) damaged(file, std::string("field '") + field + "' of " + describe(r) + " is not text");
      const std::uint64_t size = r.at("size");
      (void)r.at("implementation_version").get<int>();
      if (!is_hex_key(r["key"])) damaged(file, "an artifact has a malformed key");
      if (size > end - at) damaged(file, "the payload of " + describe(r) + " runs past the end");
      Entry e{r, std::vector<char>(in.begin() + static_cast<std::ptrdiff_t>(at), in.begin() + static_cast<std::ptrdiff_t>(at + size))};
      if (detail::checksum_hex(e.payload.data(), e.payload.size()) != r["checksum"].get<std::string>())
        damaged(file, "the payload of " + describe(r) + " fails its checksum");
      e.payload = unwrap_bound_payload(file, r, e.payload);
      at += size;
      entries.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    damaged(file, std::string("its table of contents is incomplete: ") + e.what());
  }
  if (at != end) damaged(file, std::to_string(end - at) + " bytes after the last payload");
  std::vector<detail::TuningRow> decisions;  // packs before decisions travelled have none
  try {
    if (doc.contains("tuning"))
      for (const auto& t : doc.at("tuning"))
        decisions.push_back({t.at("kernel"), t.at("base_params"), t.at("shape_class"), t.at("device"), t.at("choice"),
                             t.at("candidates"), t.at("best_ms"), t.at("default_ms"), t.at("tuning_ms"), t.at("created")});
  } catch (const nlohmann::json::exception& e) {
    damaged(file, std::string("its autotuning decisions are incomplete: ") + e.what());
  }

  detail::DiskTier& cache = *detail::process_tiers().disk;
  const detail::TuningStore& tuning_store = detail::process_tiers().tuning;
  if (!cache.on_disk()) throw Error(ErrorCode::CacheIo, "cannot import: the cache runs from memory only (" + cache.unavailable_reason() + ")");
  ImportResult result;
  for (auto& e : entries) {
    const auto& r = e.row;
    bool unchecked = false;
    if (auto why = staleness(r, &unchecked); !why.empty()) {
      result.stale.push_back(describe(r) + ": " + why);
      continue;
    }
    if (cache.has_valid_blob(r["key"])) {
      ++result.already;
      continue;
    }
    const detail::ArtifactMeta meta{.kernel = r["kernel"],
                                    .params = r["params"],
                                    .backend = r["backend"],
                                    .arch = r["arch"],
                                    .compiler = r["compiler"],
                                    .compile_ms = r["compile_ms"].get<double>(),
                                    .implementation = r["implementation"],
                                    .implementation_version = r["implementation_version"]};
    if (!cache.put(r["key"], meta, e.payload, detail::PutReason::Copied))
      throw Error(ErrorCode::CacheIo, "cannot import into " + cache.root().string() + " after " +
                                          std::to_string(result.imported) + " artifacts (see the warning above)");
    if (unchecked) result.unchecked.push_back(describe(r));
    ++result.imported;
  }
  // A decision the index already has for the same key stays (it was measured here).
  for (const auto& t : decisions) {
    if (tuning_store.find(t.kernel, t.base_params, t.shape_class, t.device)) {
      ++result.tuning_already;
      continue;
    }
    if (!tuning_store.store(t)) throw Error(ErrorCode::CacheIo, "cannot import autotuning decisions into " + cache.root().string());
    ++result.tuning_imported;
  }
  return result;
}

}  // namespace jit::cache
