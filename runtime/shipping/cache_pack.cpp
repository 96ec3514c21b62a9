// jitk export / import: a warmed cache as one file (the layout: pack_reader.hpp). A payload is the
// artifact's blob as the cache keeps it (pack version 2): its header binds it to its key, kernel,
// params, backend and target; the pack reader checks that binding for every payload before
// anything is merged, and the import stores each blob as it is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "cache/process_tiers.hpp"
#include "jit/cache.hpp"
#include "jit/kernel_catalog.hpp"
#include "runtime/backend_driver.hpp"
#include "runtime/shipping/pack_reader.hpp"
#include "support/logging.hpp"
#include "support/regular_file.hpp"
#include "support/text.hpp"

namespace jit::cache {
namespace {

template <class V> void put(std::string& out, V v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A pack on disk, read with pread from the regular file that was opened (never by its name again).
class PackFile final : public detail::PackBytes {
 public:
  explicit PackFile(const std::filesystem::path& file) {
    std::string why;
    struct stat st{};
    handle_ = detail::open_regular_file(file, O_RDONLY, &why, &st);
    if (!handle_) throw Error(ErrorCode::CacheIo, "cannot read pack " + detail::printable(file.string()) + ": " + why + "; nothing imported");
    size_ = st.st_size;
  }
  std::int64_t size() const override { return size_; }
  bool read_at(void* out, std::size_t n, std::int64_t offset) const override {
    return offset >= 0 && n <= static_cast<std::uint64_t>(size_ - offset) && detail::read_exactly_at(handle_.fd(), out, n, offset);
  }

 private:
  detail::FileHandle handle_;
  std::int64_t size_ = 0;
};

// Why this machine would never look an artifact up, or "" (unchecked: the backend cannot compile here).
std::string staleness(const detail::ArtifactMeta& m, bool* unchecked) {
  const auto& reg = detail::registry();
  for (std::size_t i = 0; i < reg.shipped; ++i) {
    if (reg.kernels[i].name != m.kernel) continue;
    if (m.implementation.empty()) return "made before implementations (cache format 1)";
    for (const auto& shipped : reg.kernels[i].implementations)
      if (shipped.name == m.implementation && shipped.version != m.implementation_version)
        return "implementation " + detail::printable(m.implementation) + " v" + std::to_string(m.implementation_version) +
               ", this jitk ships v" + std::to_string(shipped.version);
  }
  Target target;
  try {
    target = Target::parse(m.backend);
  } catch (const Error&) {
    return "unknown backend";
  }
  target.arch = target.backend == Backend::Cpu ? "" : m.arch;
  try {
    const auto& compiler = detail::compiling_driver_for(target).compiler(target);
    if (compiler.id() != m.compiler)
      return "compiled by " + detail::printable(m.compiler) + ", this machine compiles with " + compiler.id();
    if (target.backend == Backend::Cpu && compiler.arch() != m.arch)
      return "compiled for CPU " + detail::printable(m.arch) + ", this machine is " + compiler.arch();
  } catch (const Error&) {
    *unchecked = true;
  }
  return "";
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
    const std::string what = detail::printable(row.key + " " + row.kernel + " (" + row.params + ")");
    // A row import would refuse (a damaged or forged index) would make the whole pack unusable.
    if (auto why = detail::artifact_problem(row.key, row); !why.empty()) {
      result.skipped.push_back(what + ": its index row is not valid (" + why + ")");
      continue;
    }
    // Header and all (read_blob verifies it and its binding to the key): import checks what it is bound to.
    auto payload = cache.read_blob(row.key);
    std::string unbound;
    if (payload) {
      detail::BlobHeader bound;
      unbound = detail::check_blob_binding(std::string_view(payload->data(), payload->size()), row.key, &bound);
      if (unbound.empty()) unbound = detail::binding_mismatch(bound, row.key, &row);
    }
    if (!payload || !unbound.empty() || static_cast<std::int64_t>(payload->size()) > detail::kMaxPackPayloadBytes) {
      result.skipped.push_back(what + (!payload            ? ": blob missing or damaged (run `jitk verify`)"
                                       : !unbound.empty() ? ": its blob is not the artifact its row names (" + detail::printable(unbound) + "; run `jitk verify`)"
                                                          : ": larger than a pack takes"));
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
  const std::int64_t now = now_seconds();
  for (const auto& t : tuning_store.rows()) {
    if (auto why = detail::tuning_row_problem(t, now); !why.empty()) {
      result.skipped.push_back("the autotuning decision for " + detail::printable(t.kernel + " (" + t.base_params + ")") +
                               ": not valid (" + why + ")");
      continue;
    }
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
  if (static_cast<std::int64_t>(json.size()) > detail::kMaxPackIndexBytes ||
      static_cast<std::int64_t>(json.size() + payloads.size()) > detail::kMaxPackBytes - 64)
    throw Error(ErrorCode::CacheIo, "the cache is larger than a pack may be; export one target at a time (--target)");
  std::string out;
  out.append(detail::kPackMagic, sizeof detail::kPackMagic);
  put<std::uint32_t>(out, detail::kPackVersion);
  put<std::uint32_t>(out, detail::kCacheFormatVersion);
  put<std::uint64_t>(out, json.size());
  out += json;
  out += payloads;
  out += detail::checksum_hex(out.data(), out.size());
  // Whole or nothing: a temp file of a fresh name beside the destination (never one that exists:
  // a FIFO or a symbolic link planted there is not opened or followed), renamed into place.
  if (std::string problem = detail::replace_file(file, out); !problem.empty()) throw Error(ErrorCode::CacheIo, problem);
  return result;
}

ImportResult import_pack(const std::filesystem::path& file) {
  // Everything is read and checked before anything is merged; then what is merged is merged whole.
  const PackFile pack(file);
  const std::string name = file.string();
  const detail::PackContents contents = detail::read_pack(pack, name, now_seconds());

  detail::DiskTier& cache = *detail::process_tiers().disk;
  if (!cache.on_disk()) throw Error(ErrorCode::CacheIo, "cannot import: the cache runs from memory only (" + cache.unavailable_reason() + ")");
  ImportResult result;
  std::vector<const detail::PackArtifact*> wanted;
  for (const auto& a : contents.artifacts) {
    bool unchecked = false;
    if (auto why = staleness(a.meta, &unchecked); !why.empty()) {
      result.stale.push_back(a.describe() + ": " + why);
      continue;
    }
    if (cache.has_valid_blob(a.key)) {
      ++result.already;
      continue;
    }
    if (unchecked) result.unchecked.push_back(a.describe());
    wanted.push_back(&a);
  }
  // Staged one by one, committed in one transaction with the decisions; a failure on the way
  // takes back the blobs written so far.
  const detail::PackArtifact* current = nullptr;
  try {
    auto staged = cache.begin_import();
    for (const auto* a : wanted) {
      current = a;
      staged->stage(a->key, a->meta, detail::read_pack_payload(pack, *a, name));
    }
    current = nullptr;
    result.tuning_imported = staged->commit(contents.tuning);
  } catch (const Error& e) {
    throw Error(ErrorCode::CacheIo, "cannot import " + detail::printable(name) + " into " + detail::printable(cache.root().string()) +
                                        (current ? " (at " + current->describe() + ")" : "") + ": " + e.what() +
                                        "; nothing imported, the cache is as it was");
  }
  result.imported = static_cast<std::int64_t>(wanted.size());
  result.tuning_already = static_cast<std::int64_t>(contents.tuning.size()) - result.tuning_imported;
  return result;
}

}  // namespace jit::cache
