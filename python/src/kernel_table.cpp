// The Python signatures of the shipped kernels, one line each, naming the fields of the descriptor's
// Args in their order (include/jit/kernels/*.hpp). A field is
//   name                  a count taken from the arrays' shapes (rows, n, total_q, ...)
//   name:int[=v]          an integer the caller passes (required without a default)
//   name:float[=v]        a number the caller passes
//   name:in[dims] / name:out[dims]   an array (out: written); `?` after in/out: may be None;
//                         dims are names (params such as hidden, or counts bound by the arrays),
//                         products (2*hidden, kv_heads*group), a whole quotient (`n/2`), `n+1`,
//                         or `*n` (any shape, n elements); `d1 if param!=value else d2` (or ==):
//                         d1 for a kernel got with that param's value other than (equal to) value,
//                         else d2 (gemm's C: `n/2 if gate!=none else n`);
//                         `@param` after the shape: row-major unless that param is "col";
//                         `/acc` the kernel's scalar type (f32, f64 for f64), `/i32`, `/i64`, `/f32`
//                         fixed types; none: the kernel's dtype
//   name:chain(array)     a fusion chain's operands (the chain is the param of the same name),
//                         tensors shaped like `array`, vectors of its last dimension
//   name:buf?             an optional scratch array of any type
//   name:host(a) / name:ishost(a) / name:ld(a) / name:nbytes(a)   derived from array a: its address
//                         when in host memory (else null), whether it is, its leading dimension in
//                         elements, its size in bytes
// The module checks each line against the descriptor's Args when it loads (the field count and
// each field's C++ type), so a descriptor that changes without its line fails the import.
#include "kernel_table.hpp"

#include "jit/kernels.hpp"
#include "jit/tuning.hpp"

namespace jitk_py {

namespace {

template <class K> class Typed final : public TypedLaunch {
 public:
  explicit Typed(jit::Kernel<K> k) : k_(std::move(k)) {}
  void launch(const Value* values, jit::Stream stream) const override {
    using A = typename K::Args;
    k_.launch(make_args<A>(values, std::make_index_sequence<field_count<A>()>{}), stream);
  }
  jit::Backend backend() const override { return k_.backend(); }
  const std::string& cache_key() const override { return k_.cache_key(); }
  const std::string& implementation() const override { return k_.implementation(); }
  jit::Origin origin() const override { return k_.origin(); }
  jit::ParamSet params() const override { return K::to_params(k_.params()); }

 private:
  jit::Kernel<K> k_;
};

template <class K> const ParamsCodec<K>& codec() {
  static const ParamsCodec<K> c;
  return c;
}

// The typed params of `s`; every param given must be one the descriptor holds, with the same value.
template <class K> typename K::Params typed_params(const jit::ParamSet& s) {
  const auto p = codec<K>().read(s);
  const jit::ParamSet back = K::to_params(p);
  for (const auto& [name, value] : s.values()) {
    const jit::ParamValue* v = back.find(name);
    bool known = false;
    for (const auto& f : codec<K>().fields()) known = known || f.name == name;
    if (!known) throw std::invalid_argument(std::string(K::name) + ": unknown param '" + name + "'");
    if (v && !(*v == value))
      throw std::invalid_argument(std::string(K::name) + ": param '" + name + "' does not survive the descriptor's typed params");
  }
  return p;
}

template <class K> std::unique_ptr<TypedLaunch> get_typed(const jit::ParamSet& s, const jit::Target& target, const jit::Selection& selection) {
  return std::make_unique<Typed<K>>(jit::get<K>(typed_params<K>(s), target, selection));
}

template <class K> std::unique_ptr<TypedLaunch> get_tuned_typed(const jit::ParamSet& s, const std::vector<std::int64_t>& shape,
                                                                  const jit::Target& target) {
  if constexpr (requires { K::shape_of(shape); }) {
    return std::make_unique<Typed<K>>(jit::get_tuned<K>(typed_params<K>(s), K::shape_of(shape), target));
  } else {
    return nullptr;
  }
}

template <class K> KernelBinding bind(const char* declaration) {
  KernelBinding b;
  b.kernel = K::name;
  b.declaration = declaration;
  b.field_types = field_types<typename K::Args>();
  b.param_fields = codec<K>().fields();
  b.default_params = K::to_params(typename K::Params{});
  b.get = &get_typed<K>;
  if constexpr (requires { K::shape_names; }) {
    b.get_tuned = &get_tuned_typed<K>;
    b.shape_names = K::shape_names;
  } else {
    b.get_tuned = nullptr;
  }
  return b;
}

constexpr const char* kRows = "rows; x:in[rows,hidden]; y:out[rows,hidden]";

}  // namespace

const std::vector<KernelBinding>& kernel_bindings() {
  namespace k = jit::kernels;
  static const std::vector<KernelBinding> table = {
      bind<k::Saxpy>("n; a:float; x:in[*n]; y:out[*n]"),
      bind<k::SiluAndMul>("rows; x:in[rows,2*hidden]; out:out[rows,hidden]; prologue:chain(x); epilogue:chain(out)"),
      bind<k::GeluAndMul>("rows; x:in[rows,2*hidden]; out:out[rows,hidden]; prologue:chain(x); epilogue:chain(out)"),
      bind<k::RmsNorm>("rows; x:in[rows,hidden]; weight:in[hidden]; y:out[rows,hidden]; eps:float=1e-6; "
                       "prologue:chain(x); epilogue:chain(y)"),
      bind<k::FusedAddRmsNorm>("rows; x:in[rows,hidden]; residual:out[rows,hidden]; weight:in[hidden]; y:out[rows,hidden]; "
                               "eps:float=1e-6"),
      bind<k::Softmax>(kRows),
      bind<k::LogSoftmax>(kRows),
      bind<k::LayerNorm>("rows; x:in[rows,hidden]; weight:in[hidden]; bias:in[hidden]; y:out[rows,hidden]; eps:float=1e-5; "
                         "prologue:chain(x); epilogue:chain(y)"),
      bind<k::AdamW>("n; param:out[*n]/acc; grad:in[*n]; exp_avg:out[*n]/acc; exp_avg_sq:out[*n]/acc; lr:float; step:int; "
                     "beta1:float=0.9; beta2:float=0.999; eps:float=1e-8; weight_decay:float=0.01"),
      bind<k::Gemm>("m; n; k; alpha:float=1; a:in[m,k]@a_layout; lda:ld(a); b:in[k,n]@b_layout; ldb:ld(b); beta:float=0; "
                    "c:out[m, n/2 if gate!=none else n]; ldc:ld(c); epilogue:chain(c); heads:int=0; kv_heads:int=0; "
                    "positions:in?[m]/i64; theta:float=10000; slots:in?[m]/i64; num_pages:int=0; "
                    "k_cache:out?[num_pages,page_size,kv_heads,head_dim]; v_cache:out?[num_pages,page_size,kv_heads,head_dim]"),
      bind<k::RotaryEmbedding>("tokens; heads; kv_heads; positions:in[tokens]/i64; q:out[tokens,heads,head_dim]; "
                               "k:out?[tokens,kv_heads,head_dim]; theta:float=10000; cos_sin:in?[max_position,rotary_dim]/acc; "
                               "max_position; q_stride:ld(q); k_stride:ld(k)"),
      bind<k::KvCacheAppend>("tokens; kv_heads; num_pages; k:in[tokens,kv_heads,head_dim]; v:in[tokens,kv_heads,head_dim]; "
                             "slots:in[tokens]/i64; k_cache:out[num_pages,page_size,kv_heads,head_dim]; "
                             "v_cache:out[num_pages,page_size,kv_heads,head_dim]; k_stride:ld(k); v_stride:ld(v)"),
      bind<k::AttentionPrefill>("batch; kv_heads; max_seqlen_q:int; total_q; total_k; q:in[total_q,kv_heads*group,head_dim]; "
                                "k:in[total_k,kv_heads,head_dim]; v:in[total_k,kv_heads,head_dim]; "
                                "o:out[total_q,kv_heads*group,head_dim]; lse:out?[kv_heads*group,total_q]/acc; "
                                "cu_seqlens_q:in[batch+1]/i32; cu_seqlens_k:in[batch+1]/i32; scale:float; "
                                "q_stride:ld(q); k_stride:ld(k); v_stride:ld(v); "
                                "host_cu_seqlens_q:host(cu_seqlens_q); host_cu_seqlens_k:host(cu_seqlens_k)"),
      bind<k::AttentionDecode>("batch; kv_heads; num_pages; max_pages; q:in[batch*q_len,kv_heads*group,head_dim]; "
                               "k_cache:in[num_pages,page_size,kv_heads,head_dim]; v_cache:in[num_pages,page_size,kv_heads,head_dim]; "
                               "block_table:in[batch,max_pages]/i32; context_lens:in[batch]/i32; "
                               "o:out[batch*q_len,kv_heads*group,head_dim]; lse:out?[batch*q_len,kv_heads*group]/f32; "
                               "scale:float=1; max_context:int=0; workspace:buf?; workspace_size:nbytes(workspace); "
                               "host_tables:ishost(block_table); q_stride:ld(q)"),
  };
  return table;
}

const std::vector<std::pair<std::string, std::string>>& kernels_not_bound() {
  static const std::vector<std::pair<std::string, std::string>> out = {
      {"block_sparse_matmul", "takes a jit::BlockMask, which has no Python form yet"},
  };
  return out;
}

}  // namespace jitk_py
