// The steps of jit::get that the warm-up and the tool reuse: resolving a request to its source unit and key.
#pragma once
#include <string>
#include <vector>

#include "jit/jit.hpp"
#include "cache/artifact_meta.hpp"
#include "jit/specializer.hpp"

namespace jit::detail {

class BackendDriver;
class Compiler;
class TierStack;

struct Specialization {
  Target target;
  ParamSet params;  // validated, in the kernel's order
  const BackendDriver* driver = nullptr;
  const Compiler* compiler = nullptr;
  SourceUnit unit;  // unit.implementation names the implementation chosen
  std::string reason;  // why that implementation
  std::string key;  // hex content hash
};

// Everything the key of s hashes, in order (texts whole): `jitk explain` prints them.
struct KeyPart {
  std::string name, value;
};
std::vector<KeyPart> key_parts(const Specialization& s);

// Validates and specializes; throws jit::Error naming what is wrong. Compiles nothing.
Specialization resolve(std::string_view kernel, const ParamSet& params, const Target& target,
                       const Selection& selection = {});
// Compiles and stores s unless a tier has a verified copy (without loading it into this process,
// so a target with no device present can be warmed). Without tiers: the process's.
enum class WarmOutcome { AlreadyCached, CompiledAndStored, CompiledNotStored };
// What a blob of this specialization is bound to (the cache checks a blob's header against it).
ArtifactMeta meta_of(const Specialization& s);
WarmOutcome ensure_on_disk(const Specialization& s, const TierStack& tiers);
WarmOutcome ensure_on_disk(const Specialization& s);

// jit::get's path through the given tiers instead of the process's (jit.hpp's get_kernel): memory
// (kernels loaded in this process), then each tier in order, then a single-flight compile.
KernelHandle get_kernel(std::string_view kernel, const ParamSet& params, const Target& target, const Selection& selection,
                        const TierStack& tiers);

}  // namespace jit::detail
