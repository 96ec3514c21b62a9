// Descriptors of the kernels jitk ships (their specialization parameters and typed launch
// arguments), one header a family in include/jit/kernels/.
#pragma once

#include "jit/kernels/adamw.hpp"
#include "jit/kernels/attention_decode.hpp"
#include "jit/kernels/attention_prefill.hpp"
#include "jit/kernels/block_sparse.hpp"
#include "jit/kernels/gated_activation.hpp"
#include "jit/kernels/gemm.hpp"
#include "jit/kernels/kv_cache_append.hpp"
#include "jit/kernels/layer_norm.hpp"
#include "jit/kernels/rms_norm.hpp"
#include "jit/kernels/rotary.hpp"
#include "jit/kernels/saxpy.hpp"
#include "jit/kernels/softmax.hpp"
