// Declaring a kernel of one's own: its name, parameters, typed arguments, text per backend and
// launch geometry, in one struct that jit::get takes like a shipped kernel's descriptor.
//
//   struct AddBias : jit::UserKernel<AddBias, jit::count<"rows">, jit::in<"x">, jit::in<"bias">, jit::out<"y">> {
//     static constexpr const char* name = "add_bias";
//     static jit::KernelDeclaration declaration() {
//       return {.summary = "y = x + bias, per row",
//               .params = {jit::dtype_param({"f32", "f64"}), jit::int_param("hidden", 1, 1 << 20)},
//               .texts = {jit::cpu_file("add_bias.cpp")},
//               .search_path = {MY_KERNEL_DIR}};
//     }
//   };
//   auto k = jit::get<AddBias>({{"dtype", "f32"}, {"hidden", 1024}});
//   k(rows, x, bias, y);  // const float*, const float*, float*: checked when compiled where it can be, else at the call
//
// The text reads its arguments by name: the prelude defines JITK_ARGS (CPU: `JITK_CPU_KERNEL {
// JITK_ARGS ... }`) and JITK_PARAMS (GPU: `JITK_GPU_KERNEL(JITK_PARAMS) { ... }`). See
// docs/writing-kernels.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "jit/jit.hpp"
#include "jit/registry.hpp"

namespace jit {

// A name fixed at compile time, so it can be a template argument (jit::in<"x">) and appear in the
// compiler's message when a call passes the wrong thing.
template <std::size_t N> struct fixed_name {
  char text[N]{};
  constexpr fixed_name(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  constexpr const char* c_str() const { return text; }
};

// The element type the kernel's `dtype` parameter names (f32 -> float, ...): checked at the call.
struct dtype_t {};

// The arguments, in the order a call passes them and the text reads them.
// A pointer the kernel reads: `const T*` (T = dtype_t or one of float, double, std::int8_t ... std::uint64_t).
template <fixed_name Name, class T = dtype_t> struct in {};
// A pointer the kernel writes (and may read): `T*`.
template <fixed_name Name, class T = dtype_t> struct out {};
// A value: float, double or std::int64_t.
template <fixed_name Name, class T> struct scalar {};
// A std::int64_t >= 0: how many work items (rows, elements) the launch covers. The CPU splits
// [0, count) over its threads (the text gets [jitk_begin, jitk_end)); a GPU launch sizes its grid
// from it by the text's GpuLayout. The text also gets it as a value.
template <fixed_name Name> struct count {};

// One backend's text: a file (looked up on the declaration's search path, then next to the program;
// $JITK_KERNEL_DIR/<file> overrides it) or the text itself.
struct KernelText {
  Backend backend = Backend::Cpu;
  std::string file;        // the file, or the text's name in messages
  std::string text;        // "" : read `file`
  std::vector<DType> dtypes = {};  // the element types this text implements (empty: every `dtype` choice)
  GpuLayout layout = {};   // GPU: how the launch covers the work items
  int min_capability = 0;  // GPU: the least device capability (CUDA 70 = sm_70)
};
KernelText cpu_file(std::string file, std::vector<DType> dtypes = {});
KernelText cpu_text(std::string name, std::string text, std::vector<DType> dtypes = {});
KernelText cuda_file(std::string file, GpuLayout layout = {}, std::vector<DType> dtypes = {});
KernelText cuda_text(std::string name, std::string text, GpuLayout layout = {}, std::vector<DType> dtypes = {});
KernelText hip_file(std::string file, GpuLayout layout = {}, std::vector<DType> dtypes = {});

// Parameters. A default makes the parameter optional in a get (and its key the same either way).
ParamSpec dtype_param(std::vector<std::string> choices = {"f32", "f64"}, std::optional<std::string> fallback = {});
ParamSpec int_param(std::string name, std::int64_t min, std::int64_t max, std::optional<std::int64_t> fallback = {},
                    std::string doc = "");
ParamSpec text_param(std::string name, std::vector<std::string> choices, std::optional<std::string> fallback = {},
                     std::string doc = "");

struct KernelDeclaration {
  std::string summary;                   // one line for `jitk info --kernels`
  std::vector<ParamSpec> params;         // its specialization parameters
  std::vector<KernelText> texts;         // one per backend
  // Folders the texts' files are looked up in and their `#include`s resolve from (after the
  // including file's own folder); relative ones are taken from the current directory when the
  // kernel is first used. The folder of the program itself is searched last.
  std::vector<std::string> search_path = {};
  std::int64_t min_grain = 1;            // CPU: the fewest work items worth a task of their own
  // Where one parameter bounds another: what is wrong (naming them), or "".
  std::function<std::string(const ParamSet&)> params_check = nullptr;
};

// The params of a declared kernel: names and values, as jit::get takes them ({{"dtype", "f32"}, {"hidden", 1024}}).
class KernelParams : public ParamSet {
 public:
  using ParamSet::ParamSet;
  KernelParams(ParamSet p) : ParamSet(std::move(p)) {}
  auto fields() const { return std::make_tuple(to_string()); }
};

namespace detail {

template <class T> struct always_false : std::false_type {};
template <auto V> struct always_false_value : std::false_type {};

// ---- what each declared argument accepts ----------------------------------------------------
template <class T> constexpr bool is_fixed_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int8_t> ||
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>;
template <class T> constexpr bool has_dtype =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T> constexpr const char* c_name() {
  if constexpr (std::is_same_v<T, dtype_t>) return "T";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int8_t>) return "signed char";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "unsigned char";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "unsigned int";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "long long";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "unsigned long long";
  else return "?";
}

// What a pointer argument holds once the call is checked: its address and, where the call's type
// did not fix it (jit::ConstPtr, jit::MutPtr), its element type, checked against the declaration at the call.
struct PassedPointer {
  const void* data = nullptr;
  int dtype = -1;  // a DType, or -1: checked when the call was compiled
  bool mutable_data = true;
};

enum class ArgKind { In, Out, Scalar, Count };

template <class Decl> struct arg_traits;
template <fixed_name N, class T> struct arg_traits<in<N, T>> {
  static constexpr ArgKind kind = ArgKind::In;
  static constexpr auto name = N;
  using element = T;
  using stored = PassedPointer;
  static_assert(std::is_same_v<T, dtype_t> || is_fixed_element<T>,
                "jitk: jit::in<name, T>: T is jit::dtype_t, float, double or a fixed-width integer");
};
template <fixed_name N, class T> struct arg_traits<out<N, T>> {
  static constexpr ArgKind kind = ArgKind::Out;
  static constexpr auto name = N;
  using element = T;
  using stored = PassedPointer;
  static_assert(std::is_same_v<T, dtype_t> || is_fixed_element<T>,
                "jitk: jit::out<name, T>: T is jit::dtype_t, float, double or a fixed-width integer");
};
template <fixed_name N, class T> struct arg_traits<scalar<N, T>> {
  static constexpr ArgKind kind = ArgKind::Scalar;
  static constexpr auto name = N;
  using element = T;
  using stored = T;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>,
                "jitk: jit::scalar<name, T>: T is float, double or std::int64_t");
};
template <fixed_name N> struct arg_traits<count<N>> {
  static constexpr ArgKind kind = ArgKind::Count;
  static constexpr auto name = N;
  using element = std::int64_t;
  using stored = std::int64_t;
};

// Whether a call may pass a `Given` for the declared argument `Decl` (the rest is checked at the call).
template <class Decl, class Given> constexpr bool accepts() {
  using A = arg_traits<Decl>;
  using G = std::decay_t<Given>;
  if constexpr (A::kind == ArgKind::Count) {
    return std::is_integral_v<G> && !std::is_same_v<G, bool>;
  } else if constexpr (A::kind == ArgKind::Scalar) {
    if constexpr (std::is_floating_point_v<typename A::element>)
      return std::is_arithmetic_v<G> && !std::is_same_v<G, bool>;
    else
      return std::is_integral_v<G> && !std::is_same_v<G, bool>;
  } else {
    using E = typename A::element;
    constexpr bool writes = A::kind == ArgKind::Out;
    if constexpr (std::is_same_v<G, std::nullptr_t>) return true;  // refused at the call unless nothing is read
    else if constexpr (std::is_same_v<G, MutPtr>) return true;
    else if constexpr (std::is_same_v<G, ConstPtr>) return !writes && (std::is_same_v<E, dtype_t> || has_dtype<E>);
    else if constexpr (std::is_pointer_v<G>) {
      using P = std::remove_pointer_t<G>;
      using U = std::remove_cv_t<P>;
      if constexpr (writes && std::is_const_v<P>) return false;
      else if constexpr (std::is_same_v<E, dtype_t>) return has_dtype<U>;
      else return std::is_same_v<U, E>;
    } else {
      return false;
    }
  }
}

// The compile-time refusals. Each names what is wrong in its template arguments, which the
// compiler prints with the instantiation ("argument_type_mismatch<jit::in<"x", float>, int*>").
template <class Declared, class Given> struct argument_type_mismatch {
  static_assert(always_false<Given>::value,
                "jitk: a kernel argument has the wrong type: see argument_type_mismatch<declared, given> in the "
                "instantiation (jit::in<name, T> takes const T*, jit::out<name, T> takes T* (not const), "
                "jit::dtype_t takes float, double, jit::half, jit::bfloat16 or a jit::ConstPtr/MutPtr)");
  static constexpr bool value = false;
};
template <fixed_name Missing> struct argument_missing {
  static_assert(always_false_value<Missing>::value,
                "jitk: too few kernel arguments: the first missing one is named in argument_missing<\"name\"> in the "
                "instantiation");
  static constexpr bool value = false;
};
template <std::size_t Declared, std::size_t Given> struct too_many_arguments {
  static_assert(Declared == Given, "jitk: too many kernel arguments: too_many_arguments<declared, given> in the instantiation");
  static constexpr bool value = false;
};

template <class Decl, class Given> constexpr bool check_argument() {
  if constexpr (accepts<Decl, Given>()) return true;
  else return argument_type_mismatch<Decl, std::decay_t<Given>>::value;
}

template <class... Decls> struct arg_list {};
template <std::size_t I, class... Decls> using nth_decl = std::tuple_element_t<I, std::tuple<Decls...>>;

// The non-template half (runtime/user_kernel.cpp).
struct ArgumentCheck {
  const char* kernel;
  const char* name;
  int index;   // 1-based
  int count;   // how many the kernel declares
  ArgKind kind;
  const char* element;  // "T" or a C type
};
// The call's element type against the declaration; null pointers where work is to be done.
void check_pointer(const ArgumentCheck& c, const PassedPointer& p, const ParamSet& params, std::int64_t work);
void check_count(const ArgumentCheck& c, std::int64_t v);
// Registers the declaration (once per process, from jit::get's first use or jit::declare).
void register_declared(const char* name, KernelDeclaration decl, std::vector<ArgumentSpec> arguments);

template <class Decl> ArgumentSpec argument_spec() {
  using A = arg_traits<Decl>;
  std::string type;
  if constexpr (A::kind == ArgKind::In) type = std::string("const ") + c_name<typename A::element>() + "*";
  else if constexpr (A::kind == ArgKind::Out) type = std::string(c_name<typename A::element>()) + "*";
  else type = c_name<typename A::element>();
  return {A::name.c_str(), type};
}

template <class Decl, class Given> typename arg_traits<Decl>::stored store(Given&& g) {
  using A = arg_traits<Decl>;
  using G = std::decay_t<Given>;
  if constexpr (A::kind == ArgKind::Count || A::kind == ArgKind::Scalar) {
    return static_cast<typename A::stored>(g);
  } else if constexpr (std::is_same_v<G, std::nullptr_t>) {
    return PassedPointer{nullptr, -1, true};
  } else if constexpr (std::is_same_v<G, MutPtr>) {
    return PassedPointer{g.data, static_cast<int>(g.dtype), true};
  } else if constexpr (std::is_same_v<G, ConstPtr>) {
    return PassedPointer{g.data, static_cast<int>(g.dtype), false};
  } else {
    using U = std::remove_cv_t<std::remove_pointer_t<G>>;
    if constexpr (has_dtype<U>) return PassedPointer{g, static_cast<int>(dtype_of<U>()), !std::is_const_v<std::remove_pointer_t<G>>};
    else return PassedPointer{g, -1, !std::is_const_v<std::remove_pointer_t<G>>};
  }
}

}  // namespace detail

// The base of a declared kernel: `Self` gives `name` and `declaration()`; the arguments are its
// template arguments. It supplies what jit::get and jit::Kernel need (Params, Args, to_params, pack).
template <class Self, class... Arguments> struct UserKernel {
  using Params = KernelParams;
  static constexpr std::size_t argument_count = sizeof...(Arguments);
  static_assert(argument_count <= 16, "jitk: a kernel takes at most 16 arguments");

  // The arguments of one call, checked as they are made: types where the call's are known.
  class Args {
   public:
    template <class... Given>
      requires(!(sizeof...(Given) == 1 && (std::is_same_v<std::decay_t<Given>, Args> && ...)))
    Args(Given&&... given) {
      if constexpr (sizeof...(Given) < sizeof...(Arguments)) {
        [[maybe_unused]] constexpr bool missing =
            detail::argument_missing<detail::arg_traits<detail::nth_decl<sizeof...(Given), Arguments...>>::name>::value;
      } else if constexpr (sizeof...(Given) > sizeof...(Arguments)) {
        [[maybe_unused]] constexpr bool too_many = detail::too_many_arguments<sizeof...(Arguments), sizeof...(Given)>::value;
      } else {
        // A mismatch stops the compile in argument_type_mismatch<declared, given>, which names both.
        [[maybe_unused]] constexpr bool checked = (detail::check_argument<Arguments, Given>() && ...);
        values_ = std::tuple<typename detail::arg_traits<Arguments>::stored...>(
            detail::store<Arguments>(std::forward<Given>(given))...);
      }
    }
    const auto& values() const { return values_; }

   private:
    std::tuple<typename detail::arg_traits<Arguments>::stored...> values_;
  };

  // Registers the kernel now (else at its first jit::get): jit::choose, jit::cache::warm and `jitk
  // info` in this process then know it.
  static void declare() {
    static const bool registered = [] {
      detail::register_declared(Self::name, Self::declaration(), {detail::argument_spec<Arguments>()...});
      return true;
    }();
    (void)registered;
  }

  static ParamSet to_params(const Params& p) {
    declare();
    return p;
  }

  static void pack(const Params& p, const Args& a, detail::ArgPack& out) {
    std::int64_t work = 0;
    bool has_count = false;
    std::apply([&](const auto&... v) { ((pick_count<Arguments>(v, work, has_count)), ...); }, a.values());
    int index = 0;
    std::apply([&](const auto&... v) { (pack_one<Arguments>(p, v, ++index, work, out), ...); }, a.values());
    out.work_items = has_count ? work : 1;
    out.min_grain = min_grain();
  }

 private:
  static std::int64_t min_grain() {
    static const std::int64_t grain = Self::declaration().min_grain;
    return grain < 1 ? 1 : grain;
  }
  template <class Decl, class V> static void pick_count(const V& v, std::int64_t& work, bool& has) {
    if constexpr (detail::arg_traits<Decl>::kind == detail::ArgKind::Count)
      if (!has) work = v, has = true;
  }
  template <class Decl, class V>
  static void pack_one(const Params& p, const V& v, int index, std::int64_t work, detail::ArgPack& out) {
    using A = detail::arg_traits<Decl>;
    const detail::ArgumentCheck c{Self::name, A::name.c_str(), index, static_cast<int>(sizeof...(Arguments)), A::kind,
                                  detail::c_name<typename A::element>()};
    if constexpr (A::kind == detail::ArgKind::Count) {
      detail::check_count(c, v);
      out.add_i64(v);
    } else if constexpr (A::kind == detail::ArgKind::Scalar) {
      if constexpr (std::is_same_v<typename A::element, std::int64_t>) out.add_i64(v);
      else out.add_scalar(static_cast<double>(v), std::is_same_v<typename A::element, float> ? DType::f32 : DType::f64);
    } else {
      detail::check_pointer(c, v, p, work);
      out.add_pointer(v.data);
    }
  }
};

// Registers a declared kernel now rather than at its first jit::get.
template <class K> void declare() { K::declare(); }

}  // namespace jit
