// Rotary position embedding (rotary_embedding): the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {
namespace {

// The params' cross-checks (each was checked alone before): rotary_dim pairs elements, inside the head.
std::string rotary_params_problem(const ParamSet& p) {
  const std::int64_t head_dim = int_param(p, "head_dim"), rotary_dim = int_param(p, "rotary_dim");
  if (rotary_dim % 2 != 0)
    return "parameter 'rotary_dim' = " + std::to_string(rotary_dim) + " is odd; allowed: an even number (it rotates pairs)";
  if (rotary_dim > head_dim)
    return "parameter 'rotary_dim' = " + std::to_string(rotary_dim) + " is larger than 'head_dim' = " + std::to_string(head_dim) +
           "; allowed: an even number in [2, head_dim]";
  return "";
}

}  // namespace

std::vector<KernelSpec> rotary_family() {
  // The grid covers the rotation pairs, W (one 16-byte pack of elements) a thread: a thread moves
  // two packs (neox: one from each half; gptj: two neighbours).
  const GpuLayout pairs{Kind::Elementwise, 256, 1};
  KernelSpec rotary{
      "rotary_embedding",
      "q and k rotated in place by position: pairs (i, i + rotary_dim/2) (neox) or (2i, 2i+1) (gptj) of each head",
      {dtype_param(),
       {"head_dim", {}, 2, kMaxHeadDim, "elements of one head (q's and k's rows are heads x head_dim)"},
       {"rotary_dim", {}, 2, kMaxHeadDim, "leading elements of each head rotated (even, <= head_dim); the rest is left as it is"},
       {"style", {"neox", "gptj"}, 0, 0, "the pairs rotated: neox (i, i + rotary_dim/2), gptj (2i, 2i+1)"},
       {"source", {"theta", "table"}, 0, 0, "cos and sin: computed from theta, or read from a cos_sin table"}},
      generic_impls("rotary/rotary.cpp", "rotary/rotary.cu", pairs, "one thread a pack of pairs, cos/sin in float")};
  rotary.params_check = rotary_params_problem;
  return {std::move(rotary)};
}

}  // namespace jit::detail
