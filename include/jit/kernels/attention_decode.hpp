// attention_decode: attention of a few new query tokens a sequence over a paged KV cache (its descriptor).
#pragma once
#include <cstdint>
#include <string>

#include "jit/kernels/common.hpp"

namespace jit::kernels {

// Checks a paged decode's tables on the host: each context length in [0, max_pages * page_size],
// and each page a sequence reads (the first ceil(context / page_size) entries of its row of the
// block table) in [0, num_pages). Throws Error{InvalidArgument} naming the sequence and the value.
inline void check_paged_decode(const std::int32_t* block_table, const std::int32_t* context_lens, std::int64_t batch,
                               std::int64_t max_pages, std::int64_t num_pages, std::int64_t page_size) {
  const std::string kernel = "attention_decode";
  for (std::int64_t s = 0; s < batch; ++s) {
    const std::int64_t context = context_lens[s];
    if (context < 0 || context > max_pages * page_size)
      throw Error(ErrorCode::InvalidArgument, kernel + ": sequence " + std::to_string(s) + " has context length " +
                                                  std::to_string(context) + "; allowed: 0 to max_pages * page_size = " +
                                                  std::to_string(max_pages * page_size));
    for (std::int64_t i = 0; i < (context + page_size - 1) / page_size; ++i) {
      const std::int64_t page = block_table[s * max_pages + i];
      if (page < 0 || page >= num_pages)
        throw Error(ErrorCode::InvalidArgument, kernel + ": sequence " + std::to_string(s) + " reads page " +
                                                    std::to_string(page) + " (block_table[" + std::to_string(s) + ", " +
                                                    std::to_string(i) + "]), outside the pool of " +
                                                    std::to_string(num_pages) + " pages");
    }
  }
}

// o = softmax(scale * q k^T) v for q_len new tokens a sequence (decode: 1; speculative decoding
// and chunked prefill: up to 8), keys and values read from a paged cache in the layout
// kv_cache_append writes:
//   q, o          [batch * q_len, kv_heads * group, head_dim]   a sequence's tokens consecutive
//   k/v_cache     [num_pages, page_size, kv_heads, head_dim]    (NHD)
//   block_table   int32 [batch, max_pages]                       the pages of each sequence, in order
//   context_lens  int32 [batch]                                  keys of each sequence, its new tokens included
//   lse           float [batch * q_len, heads] (optional)        log-sum-exp of the scaled scores (natural log)
// q's token rows may lie further apart than heads x head_dim: q_stride (elements between
// consecutive tokens, 0: packed, as attention_prefill's) reads q in place as a column slice of one
// QKV projection's output [tokens, (heads + 2 kv_heads) x head_dim]; o is packed. The GPU reads q
// in 16-byte packs, so a q_stride other than the packed width must be a multiple of 16 bytes (checked).
// Query i of a sequence of context c sits at position c - q_len + i and sees keys 0 .. c - q_len + i
// (causal, aligned to the end); a query that sees no key gets o = 0 and lse = -inf.
//
// A block (CPU: a task) takes up to kRowsPerItem query rows of one (sequence, kv head): all of the
// group's heads for each new token, so each page is read once for them all. Long contexts are
// split over several blocks (flash-decoding) when a workspace is given: each writes its partial
// (o, max, sum) there, and the last of a (sequence, kv head) to finish merges them (an atomic
// count in the workspace). Without a workspace there is no split.
//
// Safety: a page index outside [0, num_pages) and keys past max_pages * page_size are never read
// (their keys are masked); with host_tables (the tables in host memory: the CPU) pack checks the
// tables first with check_paged_decode and throws instead.
struct AttentionDecode {
  static constexpr const char* name = "attention_decode";
  // Args' fields in order, with their defaults (docs; a build check holds the count to Args').
  static constexpr const char* arg_names = "batch, kv_heads, num_pages, max_pages, q, k_cache, v_cache, block_table, context_lens, o, lse = nullptr, scale = 1.0, max_context = 0, workspace = nullptr, workspace_size = 0, host_tables = false, q_stride = 0";
  // Query rows (group heads x new tokens) a block holds; more rows are further blocks over the
  // same pages. The kernel texts define the same number.
  static constexpr std::int64_t kRowsPerItem = 8;
  // Blocks a launch aims for before it splits contexts, and the fewest keys a split keeps: about
  // the blocks an H100 holds at once (132 SMs x 4 of 128 threads), so that one wave of blocks of
  // equal work covers the call. Measured there (bf16, 32/8 heads of 128): 64 x 4096 unsplit (512
  // blocks) read 0.824 of copy bandwidth, in 4 splits (2048 blocks) 0.811; 8 x 32768 in 32 splits
  // 0.792, unsplit (64 blocks) 0.18.
  static constexpr std::int64_t kTargetBlocks = 512;
  static constexpr std::int64_t kMinKeysPerSplit = 512;

  struct Params {
    DType dtype = DType::f32;
    std::int64_t head_dim = 0;
    std::int64_t page_size = 0;
    std::int64_t group = 1;  // query heads a kv head
    std::int64_t q_len = 1;  // new tokens a sequence
    std::int64_t warps = 0;  // GPU: warps a block (0: the default, 4)
    auto fields() const { return std::tie(dtype, head_dim, page_size, group, q_len, warps); }
  };
  struct Args {
    std::int64_t batch;
    std::int64_t kv_heads;
    std::int64_t num_pages;
    std::int64_t max_pages;  // block_table's row stride
    ConstPtr q;
    ConstPtr k_cache;
    ConstPtr v_cache;
    const std::int32_t* block_table;
    const std::int32_t* context_lens;
    MutPtr o;
    float* lse = nullptr;  // nullptr: not written
    double scale = 1.0;    // softmax scale, usually 1 / sqrt(head_dim)
    // The longest context of the call (it sizes the split); 0: max_pages * page_size.
    std::int64_t max_context = 0;
    // workspace_bytes(...) bytes, zero-filled before its first use (every launch leaves it so);
    // nullptr: no split.
    void* workspace = nullptr;
    std::size_t workspace_size = 0;
    bool host_tables = false;  // block_table and context_lens are host memory: checked before the launch
    std::int64_t q_stride = 0;  // elements between tokens of q; 0: kv_heads x group x head_dim (packed)
  };

  static ParamSet to_params(const Params& p) {
    return {{"dtype", std::string(dtype_name(p.dtype))}, {"head_dim", p.head_dim}, {"page_size", p.page_size},
            {"group", p.group},   {"q_len", p.q_len},   {"warps", p.warps}};
  }

  // How a launch divides its work: blocks of (sequence, kv head, row chunk, split).
  struct Split {
    std::int64_t chunks = 1;           // row chunks of a (sequence, kv head)
    std::int64_t splits = 1;           // blocks sharing one context
    std::int64_t pages_per_split = 1;  // pages each walks
  };
  static std::int64_t accumulator_bytes(const Params& p) { return p.dtype == DType::f64 ? 8 : 4; }
  static std::int64_t rows_per_item(const Params& p) { return std::min(kRowsPerItem, p.group * p.q_len); }
  static Split split_for(const Params& p, std::int64_t batch, std::int64_t kv_heads, std::int64_t max_context, bool may_split) {
    Split s;
    s.chunks = (p.group * p.q_len + rows_per_item(p) - 1) / rows_per_item(p);
    const std::int64_t pages = std::max<std::int64_t>(1, (max_context + p.page_size - 1) / p.page_size);
    s.pages_per_split = pages;
    const std::int64_t blocks = batch * kv_heads * s.chunks;
    if (!may_split || blocks <= 0 || blocks >= kTargetBlocks) return s;
    const std::int64_t min_pages = std::max<std::int64_t>(1, kMinKeysPerSplit / p.page_size);
    const std::int64_t want = std::min((kTargetBlocks + blocks - 1) / blocks, (pages + min_pages - 1) / min_pages);
    if (want < 2) return s;
    s.pages_per_split = (pages + want - 1) / want;
    s.splits = (pages + s.pages_per_split - 1) / s.pages_per_split;
    return s;
  }
  // Bytes of workspace a split launch needs: each block's partial rows (rows_per_item x (head_dim
  // + 2) accumulators) and one counter a (sequence, kv head, row chunk). 0 when it would not split.
  static std::size_t workspace_bytes(const Params& p, std::int64_t batch, std::int64_t kv_heads, std::int64_t max_context) {
    const Split s = split_for(p, batch, kv_heads, max_context, true);
    if (s.splits == 1) return 0;
    const std::int64_t pairs = batch * kv_heads * s.chunks;
    const std::int64_t partials = pairs * s.splits * rows_per_item(p) * (p.head_dim + 2) * accumulator_bytes(p);
    return static_cast<std::size_t>(partials + pairs * 4);
  }

  static void pack(const Params& p, const Args& a, jit::detail::ArgPack& out) {
    jit::detail::check_non_negative(name, "batch", a.batch);
    jit::detail::check_non_negative(name, "kv_heads", a.kv_heads);
    jit::detail::check_non_negative(name, "num_pages", a.num_pages);
    jit::detail::check_non_negative(name, "max_pages", a.max_pages);
    jit::detail::check_non_negative(name, "max_context", a.max_context);
    const auto fail = [](const std::string& why) { throw Error(ErrorCode::InvalidArgument, std::string(name) + ": " + why); };
    // The tables are int32: no count they index passes INT32_MAX; a token's row must be addressable.
    constexpr std::int64_t kMaxIndex = 2147483647;
    for (auto [what, v] : {std::pair{"batch", a.batch}, {"num_pages", a.num_pages}, {"max_pages", a.max_pages}, {"max_context", a.max_context}})
      if (v > kMaxIndex) fail(std::string(what) + " = " + std::to_string(v) + " is more than int32 tables can index (" + std::to_string(kMaxIndex) + ")");
    if (a.kv_heads > kMaxIndex / (p.group * p.q_len * p.head_dim))
      fail("kv_heads = " + std::to_string(a.kv_heads) + ": a token's rows of kv_heads x group x head_dim elements pass " + std::to_string(kMaxIndex));
    if (!(a.scale > 0) || !std::isfinite(a.scale)) fail("scale must be a finite number > 0, got " + std::to_string(a.scale));
    const std::int64_t q_tokens = a.batch * p.q_len;  // fits: batch <= INT32_MAX, q_len <= 8
    const std::int64_t q_width = a.kv_heads * p.group * p.head_dim;
    const std::int64_t q_stride = detail::token_stride(name, "q_stride", a.q_stride, q_width, q_tokens, p.dtype);
    if (q_stride != q_width && (q_stride * static_cast<std::int64_t>(dtype_size(p.dtype))) % 16 != 0)
      fail("q_stride = " + std::to_string(q_stride) + ": a token's row of q must start 16-byte aligned (the GPU reads 16-byte packs); " +
           "q_stride x " + std::to_string(dtype_size(p.dtype)) + " bytes is not a multiple of 16");
    const std::int64_t pairs = a.batch * a.kv_heads;
    detail::check_tensors(name, p.dtype, pairs, {{"q", a.q}, {"k_cache", a.k_cache}, {"v_cache", a.v_cache}, {"o", a.o}});
    jit::detail::check_not_null(name, "block_table", a.block_table, a.batch * a.max_pages);
    jit::detail::check_not_null(name, "context_lens", a.context_lens, a.batch);
    for (auto [arg, ptr] : {std::pair<const char*, const void*>{"q", a.q.data}, {"k_cache", a.k_cache.data}, {"v_cache", a.v_cache.data}, {"o", a.o.data}})
      if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0)
        throw Error(ErrorCode::InvalidArgument, std::string(name) + ": '" + arg + "' is not 16-byte aligned (the GPU reads 16-byte packs)");
    std::int64_t max_context = a.max_context > 0 ? a.max_context : a.max_pages * p.page_size;
    if (a.host_tables && a.batch > 0) {
      check_paged_decode(a.block_table, a.context_lens, a.batch, a.max_pages, a.num_pages, p.page_size);
      max_context = *std::max_element(a.context_lens, a.context_lens + a.batch);
    }
    Split s = split_for(p, a.batch, a.kv_heads, max_context, a.workspace != nullptr);
    if (s.splits > 1 && reinterpret_cast<std::uintptr_t>(a.workspace) % 16 != 0)
      fail("the workspace is not 16-byte aligned (its partial rows are floats and its counters atomics)");
    if (s.splits > 1 && a.workspace_size < workspace_bytes(p, a.batch, a.kv_heads, max_context))
      throw Error(ErrorCode::InvalidArgument, std::string(name) + ": the workspace holds " + std::to_string(a.workspace_size) +
                                                  " bytes; this call needs " +
                                                  std::to_string(workspace_bytes(p, a.batch, a.kv_heads, max_context)) +
                                                  " (workspace_bytes)");
    out.add_pointer(a.q.data);             // 0
    out.add_pointer(a.k_cache.data);       // 1
    out.add_pointer(a.v_cache.data);       // 2
    out.add_pointer(a.block_table);        // 3
    out.add_pointer(a.context_lens);       // 4
    out.add_pointer(a.o.data);             // 5
    out.add_pointer(a.lse);                // 6
    out.add_pointer(s.splits > 1 ? a.workspace : nullptr);  // 7
    out.add_scalar(a.scale, detail::scalar_type(p.dtype));  // 8: float, double for f64
    out.add_i64(a.kv_heads);               // 9
    out.add_i64(a.num_pages);              // 10
    out.add_i64(a.max_pages);              // 11
    out.add_i64(s.splits);                 // 12
    out.add_i64(s.pages_per_split);        // 13
    out.add_i64(a.batch);                  // 14
    out.add_i64(q_stride);                 // 15
    out.work_items = pairs * s.chunks * s.splits;  // (sequence, kv head, row chunk, split), the split fastest
    out.work_columns = 1;
    out.min_grain = 1;
  }
};

}  // namespace jit::kernels
