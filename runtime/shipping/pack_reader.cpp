// Reading a pack: bounded, field by field, every checksum checked, nothing trusted.
#include "runtime/shipping/pack_reader.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/blob_format.hpp"
#include "cache/cache_key.hpp"
#include "cache/tuning_store.hpp"
#include "jit/error.hpp"
#include "support/hashing.hpp"
#include "support/text.hpp"

namespace jit::detail {
namespace {

using nlohmann::json;

// The table of contents is two levels of arrays of flat objects: nothing deeper is read.
constexpr int kMaxJsonDepth = 4;
// Fields of text: names and params are short; params of a fusion chain are the longest.
constexpr std::size_t kMaxName = 1024, kMaxParams = 64 << 10;
constexpr double kMaxCompileMs = 1e9;
// Payloads are read (and hashed) a piece at a time.
constexpr std::size_t kReadPiece = 1 << 20;

struct DepthExceeded {};

std::string pack_name(const std::string& name) { return "pack " + printable(name); }

[[noreturn]] void damaged(const std::string& name, const std::string& what) {
  throw Error(ErrorCode::CacheIo, pack_name(name) + " is damaged: " + what + "; nothing imported");
}

bool is_hex32(const std::string& s) {
  return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

const char* json_type(const json& v) {
  if (v.is_number_integer()) return "a whole number";
  if (v.is_number_float()) return "a number with a fraction";
  return v.type_name();
}

// One entry of the table of contents, read field by field; each problem names the entry and the field.
class Fields {
 public:
  Fields(const std::string& pack, const json& entry, std::string where) : pack_(pack), entry_(entry), where_(std::move(where)) {
    if (!entry_.is_object()) damaged(pack_, where_ + " is " + std::string(json_type(entry_)) + ", not an object");
  }
  const std::string& where() const { return where_; }
  void also_name(const std::string& what) { where_ += " (" + what + ")"; }

  [[noreturn]] void bad(const char* field, const std::string& what) const {
    damaged(pack_, where_ + ": field '" + field + "' " + what);
  }
  const json& at(const char* field) const {
    auto it = entry_.find(field);
    if (it == entry_.end()) bad(field, "is missing");
    return *it;
  }
  std::string text(const char* field, std::size_t max, bool may_be_empty = true) const {
    const json& v = at(field);
    if (!v.is_string()) bad(field, std::string("must be text, not ") + json_type(v));
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > max) bad(field, "is " + std::to_string(s.size()) + " bytes, more than " + std::to_string(max));
    if (!is_plain_text(s)) bad(field, "has control characters: \"" + printable(s) + "\"");
    if (!may_be_empty && s.empty()) bad(field, "is empty");
    return s;
  }
  std::int64_t whole(const char* field, std::int64_t min, std::int64_t max) const {
    const json& v = at(field);
    if (!v.is_number_integer()) bad(field, std::string("must be a whole number, not ") + json_type(v) + " (" + printable(v.dump()) + ")");
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)
                               : v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
      bad(field, "is " + v.dump() + ", not in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
  }
  double number(const char* field, double min, double max) const {
    const json& v = at(field);
    if (!v.is_number()) bad(field, std::string("must be a number, not ") + json_type(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < min || d > max) bad(field, "is " + v.dump() + ", not in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return d;
  }

 private:
  const std::string& pack_;
  const json& entry_;
  std::string where_;
};

json parse_contents(const std::string& name, const std::string& text) {
  try {
    return json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) throw DepthExceeded{};
      return true;
    });
  } catch (const DepthExceeded&) {
    damaged(name, "its table of contents nests deeper than a pack's does");
  } catch (const json::exception& e) {
    damaged(name, std::string("its table of contents is not JSON: ") + e.what());
  }
}

PackArtifact read_artifact(const std::string& name, const json& entry, int number) {
  Fields f(name, entry, "artifact #" + std::to_string(number));
  if (auto it = entry.find("kernel"); it != entry.end() && it->is_string()) f.also_name(printable(it->get<std::string>()));
  PackArtifact a;
  a.number = number;
  a.key = f.text("key", 32);
  if (!is_hex32(a.key)) f.bad("key", "is not 32 lowercase hex digits");
  a.meta.kernel = f.text("kernel", kMaxName, false);
  a.meta.params = f.text("params", kMaxParams);
  a.meta.backend = f.text("backend", kMaxName, false);
  a.meta.arch = f.text("arch", kMaxName);
  a.meta.compiler = f.text("compiler", kMaxName);
  a.meta.implementation = f.text("implementation", kMaxName);
  a.meta.implementation_version = f.whole("implementation_version", 0, std::numeric_limits<int>::max());
  a.meta.compile_ms = f.number("compile_ms", 0, kMaxCompileMs);
  a.size = f.whole("size", 0, kMaxPackPayloadBytes);
  a.checksum = f.text("checksum", 32);
  if (!is_hex32(a.checksum)) f.bad("checksum", "is not 32 lowercase hex digits");
  return a;
}

TuningRow read_decision(const std::string& name, const json& entry, int number, std::int64_t now) {
  Fields f(name, entry, "autotuning decision #" + std::to_string(number));
  if (auto it = entry.find("kernel"); it != entry.end() && it->is_string()) f.also_name(printable(it->get<std::string>()));
  TuningRow t;
  t.kernel = f.text("kernel", kMaxParams);
  t.base_params = f.text("base_params", kMaxParams);
  t.shape_class = f.text("shape_class", kMaxParams);
  t.device = f.text("device", kMaxParams);
  t.choice = f.text("choice", kMaxParams);
  t.candidates = f.whole("candidates", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  t.best_ms = f.number("best_ms", -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
  t.default_ms = f.number("default_ms", -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
  t.tuning_ms = f.number("tuning_ms", -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
  t.created = f.whole("created", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  // The ranges are the store's (one rule for what a decision may be, wherever it comes from).
  if (auto why = tuning_row_problem(t, now); !why.empty()) damaged(name, f.where() + ": " + why);
  return t;
}

}  // namespace

std::string PackArtifact::describe() const {
  return "artifact #" + std::to_string(number) + " (" + printable(meta.kernel) + " (" + printable(meta.params) + ") " +
         printable(meta.backend) + " " + printable(meta.arch) + ")";
}

std::string artifact_problem(const std::string& key, const ArtifactMeta& meta) {
  if (!is_hex32(key)) return "its key is not 32 lowercase hex digits";
  const std::pair<const char*, const std::string*> texts[] = {{"kernel", &meta.kernel},   {"params", &meta.params},
                                                              {"backend", &meta.backend}, {"arch", &meta.arch},
                                                              {"compiler", &meta.compiler}, {"implementation", &meta.implementation}};
  for (const auto& [field, text] : texts)
    if (!is_plain_text(*text) || text->size() > (std::strcmp(field, "params") == 0 ? kMaxParams : kMaxName))
      return std::string(field) + " is too long or has control characters";
  if (meta.kernel.empty() || meta.backend.empty()) return "kernel or backend is empty";
  if (meta.implementation_version < 0 || meta.implementation_version > std::numeric_limits<int>::max())
    return "implementation_version is out of range";
  if (!std::isfinite(meta.compile_ms) || meta.compile_ms < 0 || meta.compile_ms > kMaxCompileMs) return "compile_ms is out of range";
  return "";
}

PackContents read_pack(const PackBytes& bytes, const std::string& name, std::int64_t now) {
  const std::int64_t size = bytes.size();
  if (size > kMaxPackBytes)
    throw Error(ErrorCode::CacheIo, pack_name(name) + " is " + std::to_string(size) + " bytes, more than a pack may be (" +
                                        std::to_string(kMaxPackBytes) + "); nothing imported");
  char header[kPackHeaderBytes];
  if (size < kPackHeaderBytes + kPackTrailerBytes || !bytes.read_at(header, sizeof header, 0) ||
      std::memcmp(header, kPackMagic, sizeof kPackMagic) != 0)
    damaged(name, "not a jitk pack (no JITKPACK header)");
  std::uint32_t version, format;
  std::uint64_t json_size;
  std::memcpy(&version, header + 8, sizeof version);
  std::memcpy(&format, header + 12, sizeof format);
  std::memcpy(&json_size, header + 16, sizeof json_size);
  if (version != kPackVersion)
    throw Error(ErrorCode::CacheIo, pack_name(name) + " has pack version " + std::to_string(version) + ", this jitk reads " +
                                        std::to_string(kPackVersion) + "; nothing imported");
  if (format != static_cast<std::uint32_t>(kCacheFormatVersion))
    throw Error(ErrorCode::CacheIo, pack_name(name) + " holds artifacts of cache format " + std::to_string(format) +
                                        "; this jitk uses format " + std::to_string(kCacheFormatVersion) +
                                        " and would never use them: nothing imported");
  const std::int64_t body = size - kPackHeaderBytes - kPackTrailerBytes;
  if (json_size > static_cast<std::uint64_t>(body)) damaged(name, "its table of contents runs past its end");
  if (json_size > static_cast<std::uint64_t>(kMaxPackIndexBytes))
    damaged(name, "its table of contents is " + std::to_string(json_size) + " bytes, more than " + std::to_string(kMaxPackIndexBytes));
  std::string text(json_size, '\0');
  if (!bytes.read_at(text.data(), text.size(), kPackHeaderBytes)) damaged(name, "its table of contents cannot be read");

  const json doc = parse_contents(name, text);
  if (!doc.is_object()) damaged(name, "its table of contents is not a JSON object");
  const auto artifacts = doc.find("artifacts");
  if (artifacts == doc.end() || !artifacts->is_array()) damaged(name, "its table of contents has no list of artifacts");
  const auto tuning = doc.find("tuning");  // packs before decisions travelled have none
  if (tuning != doc.end() && !tuning->is_array()) damaged(name, "its autotuning decisions are not a list");
  for (const auto* list : {&*artifacts, tuning != doc.end() ? &*tuning : nullptr})
    if (list && list->size() > kMaxPackEntries)
      damaged(name, "it lists " + std::to_string(list->size()) + " entries, more than a pack may (" + std::to_string(kMaxPackEntries) + ")");
  PackContents out;
  std::set<std::string> keys;
  std::int64_t at = kPackHeaderBytes + static_cast<std::int64_t>(json_size);
  const std::int64_t payload_end = size - kPackTrailerBytes;
  for (const auto& entry : *artifacts) {
    PackArtifact a = read_artifact(name, entry, static_cast<int>(out.artifacts.size()) + 1);
    if (!keys.insert(a.key).second) damaged(name, a.describe() + ": key " + a.key + " appears twice");
    if (a.size > payload_end - at)
      damaged(name, "the payload of " + a.describe() + " runs past the end (truncated, or its size is wrong)");
    a.offset = at;
    at += a.size;
    out.artifacts.push_back(std::move(a));
  }
  if (at != payload_end) damaged(name, std::to_string(payload_end - at) + " bytes after the last payload");
  if (tuning != doc.end())
    for (const auto& entry : *tuning) out.tuning.push_back(read_decision(name, entry, static_cast<int>(out.tuning.size()) + 1, now));

  // Every byte once, a piece at a time: the whole file's checksum, and each payload's.
  ChecksumStream whole;
  whole.add(header, sizeof header);
  whole.add(text.data(), text.size());
  std::vector<char> piece(kReadPiece);
  const PackArtifact* bad_payload = nullptr;
  for (const auto& a : out.artifacts) {
    ChecksumStream own;
    for (std::int64_t done = 0; done < a.size;) {
      const auto n = static_cast<std::size_t>(std::min<std::int64_t>(a.size - done, kReadPiece));
      if (!bytes.read_at(piece.data(), n, a.offset + done)) damaged(name, "the payload of " + a.describe() + " cannot be read");
      whole.add(piece.data(), n);
      own.add(piece.data(), n);
      done += static_cast<std::int64_t>(n);
    }
    if (!bad_payload && own.hex() != a.checksum) bad_payload = &a;
  }
  char trailer[kPackTrailerBytes];
  if (!bytes.read_at(trailer, sizeof trailer, payload_end)) damaged(name, "its checksum cannot be read");
  if (whole.hex() != std::string(trailer, sizeof trailer)) damaged(name, "its checksum does not match its contents (truncated or changed)");
  if (bad_payload) damaged(name, "the payload of " + bad_payload->describe() + " fails its checksum");
  // Every payload bound to the entry it sits in, before anything is merged.
  for (const auto& a : out.artifacts) (void)read_pack_payload(bytes, a, name);
  return out;
}

std::vector<char> read_pack_payload(const PackBytes& bytes, const PackArtifact& a, const std::string& name) {
  std::vector<char> payload(static_cast<std::size_t>(a.size));
  if (!bytes.read_at(payload.data(), payload.size(), a.offset) || checksum_hex(payload.data(), payload.size()) != a.checksum)
    throw Error(ErrorCode::CacheIo, pack_name(name) + " changed while it was imported (" + a.describe() +
                                        " no longer matches its checksum)");
  // The blob's header binds it to its key, kernel, params, backend, target, compiler and
  // implementation: payloads swapped between entries, or an entry relabelled, are refused.
  BlobHeader bound;
  std::string why = check_blob_binding(std::string_view(payload.data(), payload.size()), a.key, &bound);
  if (why.empty()) why = binding_mismatch(bound, a.key, &a.meta);
  if (!why.empty()) damaged(name, "the payload of " + a.describe() + " is not the artifact its entry names: " + printable(why));
  return payload;
}

}  // namespace jit::detail
