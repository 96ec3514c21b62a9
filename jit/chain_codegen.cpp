// Generates the fused prologue/epilogue code of a specialization: one struct, jitk_chain, whose
// members are the chains' launch operands and whose functions apply the steps to a pack of
// elements (GPU) or to one element (CPU). Kernel text calls it the same way whatever the chain.
#include "jit/chain_codegen.hpp"

#include <sstream>
#include <vector>

#include "jit/chain.hpp"

namespace jit::detail {
namespace {

struct Member {
  std::string name;  // p0, e1, ...
  OperandKind kind;
};

Chain chain_param(const ParamSet& params, const char* name) {
  const auto* v = params.find(name);
  return v ? Chain::parse(std::get<std::string>(*v)) : Chain{};
}

// The unary steps' functions: jitk::<name> in jitk_gpu.h and jitk_cpu.h; tanh is the math library's.
std::string unary_call(Step s, const std::string& v, bool gpu) {
  if (s == Step::tanh) return gpu ? "tanhf(" + v + ")" : "jitk::tanh(" + v + ")";
  return "jitk::" + std::string(step_name(s)) + "(" + v + ")";
}

// One step on float v[k] (GPU, inside `for k < W`) or T v (CPU). `loads` names the prologue's
// tensor pack loaded ahead (GPU), or "" to load it here.
std::string gpu_step(Step s, const Member* m, const std::string& loaded) {
  const std::string each = "for (int k = 0; k < W; ++k) ";
  switch (s) {
    case Step::add:
    case Step::mul: {
      const std::string op = s == Step::add ? " += " : " *= ";
      const std::string pack = loaded.empty() ? "t" : loaded;
      std::string out = "{ ";
      if (loaded.empty()) out += "const auto t = jitk::load<W>(" + m->name + " + at); ";
      return out + each + "v[k]" + op + "jitk::to_float(" + pack + ".v[k]); }";
    }
    case Step::add_vec:
    case Step::mul_vec: {
      const std::string pack = loaded.empty() ? "b" : loaded;
      std::string out = "{ ";
      if (loaded.empty()) out += "const auto b = jitk::load<W>(" + m->name + " + col); ";
      return out + each + "v[k]" + (s == Step::add_vec ? " += " : " *= ") + "jitk::to_float(" + pack + ".v[k]); }";
    }
    case Step::add_scalar: return each + "v[k] += " + m->name + ";";
    case Step::mul_scalar: return each + "v[k] *= " + m->name + ";";
    case Step::store:
      return "{ jitk::Pack<T, W> s; " + each + "{ s.v[k] = jitk::from_float<T>(v[k]); v[k] = jitk::to_float(s.v[k]); } jitk::store<W>(" +
             m->name + " + at, s); }";
    default: return each + "v[k] = " + unary_call(s, "v[k]", true) + ";";
  }
}

std::string cpu_step(Step s, const Member* m) {
  switch (s) {
    case Step::add: return "v = v + " + m->name + "[at];";
    case Step::mul: return "v = v * " + m->name + "[at];";
    case Step::add_vec: return "v = v + " + m->name + "[col];";
    case Step::mul_vec: return "v = v * " + m->name + "[col];";
    case Step::add_scalar: return "v = v + " + m->name + ";";
    case Step::mul_scalar: return "v = v * " + m->name + ";";
    case Step::store: return m->name + "[at] = v;";
    default: return "v = " + unary_call(s, "v", false) + ";";
  }
}

std::string member_type(OperandKind k, bool gpu) {
  switch (k) {
    case OperandKind::Output: return "T*";
    case OperandKind::Scalar: return gpu ? "float" : "T";
    default: return "const T*";
  }
}

}  // namespace

std::string chain_code(const ParamSet& params, bool gpu) {
  const Chain pro = chain_param(params, "prologue"), epi = chain_param(params, "epilogue");
  // Members in launch order (the prologue's operands, then the epilogue's), and which step owns each.
  std::vector<Member> members;
  std::vector<const Member*> pro_owner(pro.size(), nullptr), epi_owner(epi.size(), nullptr);
  members.reserve(Chain::kMaxOperands * 2);
  for (int pass = 0; pass < 2; ++pass) {
    const Chain& c = pass == 0 ? pro : epi;
    int n = 0;
    for (int i = 0; i < c.size(); ++i) {
      if (step_operand(c[i]) == OperandKind::None) continue;
      members.push_back({(pass == 0 ? "p" : "e") + std::to_string(n++), step_operand(c[i])});
      (pass == 0 ? pro_owner : epi_owner)[i] = &members.back();
    }
  }

  std::ostringstream out;
  out << "// fusion chains: prologue '" << pro.to_string() << "', epilogue '" << epi.to_string() << "'\n";
  out << "struct jitk_chain {\n";
  for (const auto& m : members) out << "  " << member_type(m.kind, gpu) << " " << m.name << ";\n";
  if (gpu) {
    std::string params, args, aligned = "true";
    for (const auto& m : members) {
      params += ", " + member_type(m.kind, true) + " jitk_" + m.name;
      args += std::string(args.empty() ? "" : ", ") + "jitk_" + m.name;
      if (m.kind != OperandKind::Scalar) aligned += " && jitk::aligned16(" + m.name + ")";
    }
    out << "  __device__ bool aligned() const { return " << aligned << "; }\n";
    out << "  enum : bool { has_epilogue = " << (epi.empty() ? "false" : "true") << " };\n";
    // The prologue's tensors are loaded with the row (all loads in flight first), applied after.
    std::vector<std::string> loaded(pro.size());
    std::string loads_members, loads_code;
    int t = 0;
    for (int i = 0; i < pro.size(); ++i) {
      if (step_operand(pro[i]) != OperandKind::Tensor) continue;
      loaded[i] = "l.t" + std::to_string(t);
      loads_members += " jitk::Pack<T, W> t" + std::to_string(t) + ";";
      loads_code += " l.t" + std::to_string(t) + " = jitk::load<W>(" + pro_owner[i]->name + " + at);";
      ++t;
    }
    out << "  template <int W> struct Loads {" << loads_members << " };\n";
    out << "  template <int W> __device__ Loads<W> prologue_load(i64 at) const { Loads<W> l;" << loads_code << " return l; }\n";
    out << "  // x: W elements of the row at element `at` (column `col`), as loaded; becomes the prologue's result\n";
    out << "  template <int W> __device__ void prologue(jitk::Pack<T, W>& x, const Loads<W>& l, i64 at, i64 col) const {";
    if (!pro.empty()) {
      out << "\n    float v[W];\n    for (int k = 0; k < W; ++k) v[k] = jitk::to_float(x.v[k]);\n";
      for (int i = 0; i < pro.size(); ++i) out << "    " << gpu_step(pro[i], pro_owner[i], loaded[i]) << "\n";
      out << "    for (int k = 0; k < W; ++k) x.v[k] = jitk::from_float<T>(v[k]);\n  ";
    }
    out << "}\n";
    // The epilogue's tensors and vectors can be loaded ahead too (epilogue_load, then the steps on
    // what it loaded), so that a kernel puts several elements' loads in flight before it applies
    // them; those after a store step stay in their step (the store may write what they read).
    std::vector<std::string> epi_loaded(epi.size());
    std::string epi_members, epi_code;
    t = 0;
    for (int i = 0; i < epi.size(); ++i) {
      if (epi[i] == Step::store) break;
      const OperandKind kind = step_operand(epi[i]);
      if (kind != OperandKind::Tensor && kind != OperandKind::Vector) continue;
      epi_loaded[i] = "l.t" + std::to_string(t);
      epi_members += " jitk::Pack<T, W> t" + std::to_string(t) + ";";
      epi_code += " l.t" + std::to_string(t) + " = jitk::load<W>(" + epi_owner[i]->name + (kind == OperandKind::Tensor ? " + at);" : " + col);");
      ++t;
    }
    out << "  template <int W> struct EpilogueLoads {" << epi_members << " };\n";
    out << "  template <int W> __device__ EpilogueLoads<W> epilogue_load(i64 at, i64 col) const { EpilogueLoads<W> l;" << epi_code
        << " (void)at; (void)col; return l; }\n";
    out << "  // v: the kernel's W results for element `at` (column `col`), before they are stored; l: epilogue_load's\n";
    out << "  template <int W> __device__ void epilogue(float (&v)[W], const EpilogueLoads<W>& l, i64 at, i64 col) const {";
    if (!epi.empty()) {
      out << "\n";
      for (int i = 0; i < epi.size(); ++i) out << "    " << gpu_step(epi[i], epi_owner[i], epi_loaded[i]) << "\n";
      out << "  ";
    }
    out << "(void)v; (void)l; (void)at; (void)col; }\n";
    out << "  template <int W> __device__ void epilogue(float (&v)[W], i64 at, i64 col) const { epilogue<W>(v, epilogue_load<W>(at, col), at, col); }\n";
    out << "};\n";
    out << "#define JITK_CHAIN_PARAMS " << params << "\n";
    out << "#define JITK_CHAIN_ARGS " << args << "\n";
  } else {
    out << "  enum : bool { has_prologue = " << (pro.empty() ? "false" : "true") << " };\n";
    out << "  // a: the chains' operands in the kernel's arguments (pointers to their values)\n";
    out << "  static jitk_chain from(void* const* a) { (void)a; return {";
    for (std::size_t i = 0; i < members.size(); ++i)
      out << (i ? ", " : "") << "*static_cast<" << member_type(members[i].kind, false) << " const*>(a[" << i << "])";
    out << "}; }\n";
    out << "  inline T prologue(T v, i64 at, i64 col) const {";
    for (int i = 0; i < pro.size(); ++i) out << " " << cpu_step(pro[i], pro_owner[i]);
    out << " (void)at; (void)col; return v; }\n";
    out << "  inline T epilogue(T v, i64 at, i64 col) const {";
    for (int i = 0; i < epi.size(); ++i) out << " " << cpu_step(epi[i], epi_owner[i]);
    out << " (void)at; (void)col; return v; }\n};\n";
  }
  return out.str();
}

}  // namespace jit::detail
