// RMSNorm (rms_norm, fused_add_rms_norm): the family descriptor.
#include "jit/family.hpp"

namespace jit::detail {

std::vector<KernelSpec> rms_norm_family() {
  // At most 256 threads a row: at hidden 16384 (bf16) this was 9-13% faster on the H100 than 512.
  const GpuLayout block_per_row{Kind::BlockPerRow, 256, 4};
  const char* row = "one block per row, row in registers";
  Implementation rms_sm90;
  rms_sm90.name = "cuda-sm90";
  rms_sm90.backend = Backend::Cuda;
  rms_sm90.min_capability = rms_sm90.max_capability = 90;
  rms_sm90.priority = 1;
  rms_sm90.version = 2;  // v2: rms_norm.cu's text (JITK_IMPLEMENTATION_CUDA_SM90), with the fusion chains
  rms_sm90.file = "rms_norm/rms_norm.cu";
  rms_sm90.dtypes = kGpuTypes;
  rms_sm90.layout = {Kind::BlockPerRow, 1024, 8};
  rms_sm90.note = "Hopper: twice the row per thread (half the threads to reduce over), streaming loads of x";
  // With a residual-add prologue it measured 0.85 of copy against the generic text's 0.99 (H100,
  // bf16, hidden 2048..8192): chains go to the generic text.
  rms_sm90.fusion = false;
  return {
      {"rms_norm", "y = x / sqrt(mean(x^2) + eps) * weight, per row",
       {dtype_param(), hidden_param(), prologue_param(), epilogue_param()},
       [&] {
         auto impls = generic_impls("rms_norm/rms_norm.cpp", "rms_norm/rms_norm.cu", block_per_row, row);
         impls.push_back(rms_sm90);
         return impls;
       }()},
      {"fused_add_rms_norm", "residual += x, then y = rms_norm(residual) * weight, per row (one pass)",
       {dtype_param(), hidden_param()},
       // (cuda-sm90's text serves this kernel too, but measured slower here: 0.79 vs 0.95 of copy at 8192)
       generic_impls("rms_norm/rms_norm.cpp", "rms_norm/rms_norm.cu", {Kind::BlockPerRow, 256, 4, 2}, "one block per row, row and residual in registers")}};
}

}  // namespace jit::detail
