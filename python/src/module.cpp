// jitk._jitk: the nanobind module behind the jitk Python package: kernels got by name and launched on
// arrays (checked against the kernel's signature), the cache tools, and jitk's errors as Python's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"
#include "get.hpp"
#include "jit/cache.hpp"
#include "jit/config.hpp"
#include "jit/registry.hpp"
#include "kernel_table.hpp"
#include "launcher.hpp"
#include "module.hpp"
#include "user_kernels.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace jitk_py {

std::atomic<bool> g_library_used{false};  // configure() is too late once the library read its settings

namespace {

nb::dict artifact_dict(const jit::cache::ArtifactInfo& a) {
  nb::dict d;
  d["key"] = a.key, d["kernel"] = a.kernel, d["params"] = a.params, d["backend"] = a.backend, d["arch"] = a.arch;
  d["compiler"] = a.compiler, d["size_bytes"] = a.size_bytes, d["compile_ms"] = a.compile_ms, d["created"] = a.created;
  d["last_used"] = a.last_used, d["hits"] = a.hits, d["implementation"] = a.implementation;
  d["implementation_version"] = a.implementation_version, d["launch"] = a.launch;
  return d;
}

nb::dict clear_dict(const jit::cache::ClearResult& r) {
  nb::dict d;
  d["entries"] = r.entries, d["bytes"] = r.bytes;
  return d;
}

}  // namespace

}  // namespace jitk_py

NB_MODULE(_jitk, m) {
  using namespace jitk_py;
  m.doc() = "jitk's C++ core: kernels by name, launched on arrays; the cache tools";

  bind_errors(m);

  nb::class_<Launcher>(m, "Kernel", "A kernel specialized for its params on one target; call it on arrays")
      .def("__call__", &call_launcher, "args"_a, "kwargs"_a, nb::sig("def __call__(self, *args, stream=None, **kwargs) -> None"))
      .def("_time_launches", &time_launches)
      .def_prop_ro("name", [](const Launcher& l) { return l.signature().kernel; })
      .def_prop_ro("signature", [](const Launcher& l) { return l.signature().kernel + l.signature().python_signature(); })
      .def_prop_ro("params", [](const Launcher& l) { return l.kernel().params().to_string(); })
      .def_prop_ro("cache_key", [](const Launcher& l) { return l.kernel().cache_key(); })
      .def_prop_ro("implementation", [](const Launcher& l) { return l.kernel().implementation(); })
      .def_prop_ro("backend", [](const Launcher& l) { return std::string(jit::backend_name(l.kernel().backend())); })
      .def_prop_ro("origin", [](const Launcher& l) { return l.kernel().origin() == jit::Origin::Compiled ? "compiled" : "disk cache"; })
      .def("__repr__", [](const Launcher& l) {
        return "<jitk.Kernel " + l.signature().kernel + " [" + l.kernel().params().to_string() + "] on " +
               std::string(jit::backend_name(l.kernel().backend())) + " (" + l.kernel().implementation() + ")>";
      });

  m.def("_get",
        [](const std::string& kernel, const nb::dict& params, const std::optional<std::string>& target,
           const std::optional<std::string>& implementation, bool training, int device) {
          return make_launcher(kernel, params, target, implementation, training, std::nullopt, device);
        },
        "kernel"_a, "params"_a, "target"_a = nb::none(), "implementation"_a = nb::none(), "training"_a = false,
        "device"_a = -1);
  m.def("_get_tuned",
        [](const std::string& kernel, const nb::dict& params, const std::vector<std::int64_t>& shape,
           const std::optional<std::string>& target, int device) {
          return make_launcher(kernel, params, target, std::nullopt, false, shape, device);
        },
        "kernel"_a, "params"_a, "shape"_a, "target"_a = nb::none(), "device"_a = -1);
  m.def("_kernels", [] {
    nb::list out;
    const auto specs = jit::registered_kernels();
    for (const auto& b : kernel_bindings()) {
      const Signature& sig = checked_signature(b);
      nb::dict d;
      d["name"] = b.kernel;
      d["signature"] = sig.python_signature();
      d["declaration"] = b.declaration;
      d["tunable"] = b.get_tuned != nullptr;
      d["shape_names"] = b.shape_names ? std::string(b.shape_names) : std::string();
      nb::list params;
      for (const auto& s : specs)
        if (s.name == b.kernel) {
          d["summary"] = s.summary;
          for (const auto& p : s.params) {
            nb::dict pd;
            pd["name"] = p.name, pd["allowed"] = p.allowed(), pd["doc"] = p.doc, pd["optional"] = p.chain || p.fallback.has_value();
            pd["choices"] = p.choices;
            params.append(pd);
          }
        }
      d["params"] = params;
      nb::list args;
      for (int idx : sig.user_order) {
        const Field& f = sig.fields[static_cast<std::size_t>(idx)];
        nb::dict a;
        a["name"] = f.name;
        a["kind"] = f.source == Field::Source::Array ? (f.output ? "out" : "in")
                    : f.source == Field::Source::Int ? "int"
                    : f.source == Field::Source::Float ? "float"
                    : f.source == Field::Source::Chain ? "chain"
                                                        : "buffer";
        a["optional"] = f.optional || f.has_default || f.source == Field::Source::Chain;
        if (f.has_default) a["default"] = f.default_value;
        nb::list dims;
        for (const auto& e : f.dims) dims.append(e.text);
        a["dims"] = dims;
        a["dtype"] = f.elem == ElemRule::Scalar ? "acc" : f.elem == ElemRule::I32 ? "i32" : f.elem == ElemRule::I64 ? "i64" : f.elem == ElemRule::F32 ? "f32" : "dtype";
        args.append(a);
      }
      d["args"] = args;
      out.append(d);
    }
    return out;
  });
  m.def("_register_kernel", &register_user_kernel, "name"_a, "summary"_a, "params"_a, "signature"_a, "work"_a,
        "cpu"_a, "min_grain"_a = 1);
  m.def("_registered_signature", [](const std::string& name) -> std::optional<std::string> {
    if (const UserKernel* uk = find_user_kernel(name)) return name + uk->sig.python_signature();
    return std::nullopt;
  });
  m.def("_not_bound", [] { return kernels_not_bound(); });
  m.def("_catalog", [] {  // every kernel this process knows (shipped, then registered)
    std::vector<std::string> names;
    for (const auto& s : jit::registered_kernels()) names.push_back(s.name);
    return names;
  });
  m.def("_library_used", [] { return g_library_used.load(); });
  // jitk.configure: validated in Python; jit::configure throws InvalidParams once the cache is in
  // use and a value differs (the log level applies at any time).
  m.def("_configure", [](const std::optional<std::string>& cache_dir, const std::optional<std::string>& log_level,
                         const std::optional<std::string>& cache_mode) {
    jit::Config config;
    if (cache_dir) config.cache_dir = *cache_dir;
    if (log_level) {
      const auto level = jit::parse_log_level(*log_level);
      if (!level) throw jit::Error(jit::ErrorCode::InvalidParams, "log_level '" + *log_level + "' is not a level");
      config.log_level = *level;
    }
    if (cache_mode) {
      const auto mode = jit::parse_cache_mode(*cache_mode);
      if (!mode) throw jit::Error(jit::ErrorCode::InvalidParams, "cache_mode '" + *cache_mode + "' is not a cache mode");
      config.cache_mode = *mode;
    }
    jit::configure(config);
  });
  m.def("default_target", [] {
    g_library_used = true;
    return jit::default_target().to_string();
  });

  // ---- the cache tools: the functions the jitk tool calls --------------------------------------
  nb::module_ c = m.def_submodule("_cache");
  c.def("root", [] {
    g_library_used = true;
    return jit::cache::root().string();
  });
  c.def("unavailable_reason", [] {
    g_library_used = true;
    return jit::cache::unavailable_reason();
  });
  c.def("stats", [] {
    g_library_used = true;
    const auto s = jit::cache::stats();
    nb::dict d;
    d["entries"] = s.entries, d["bytes"] = s.bytes, d["hits"] = s.hits, d["misses"] = s.misses, d["compiles"] = s.compiles;
    return d;
  });
  c.def("ls", [] {
    g_library_used = true;
    nb::list out;
    for (const auto& a : jit::cache::list()) out.append(artifact_dict(a));
    return out;
  });
  c.def("clear", [](const std::optional<std::string>& kernel) {
    g_library_used = true;
    return clear_dict(kernel ? jit::cache::clear_kernel(*kernel) : jit::cache::clear());
  }, "kernel"_a = nb::none());
  c.def("prune", [](const std::optional<std::int64_t>& max_bytes, const std::optional<std::int64_t>& older_than_s) {
    g_library_used = true;
    return clear_dict(jit::cache::prune(max_bytes, older_than_s));
  }, "max_bytes"_a = nb::none(), "older_than_s"_a = nb::none());
  c.def("prune_stale", [] {
    g_library_used = true;
    const auto r = jit::cache::prune_stale();
    nb::dict d = clear_dict(r.removed);
    d["kept_unknown"] = r.kept_unknown;
    d["unknown"] = r.unknown;
    return d;
  });
  c.def("parse_size", &jit::cache::parse_size);
  c.def("parse_age", &jit::cache::parse_age);
  c.def("verify", [](bool fix) {
    g_library_used = true;
    nb::list out;
    for (const auto& p : jit::cache::verify(fix)) out.append(nb::make_tuple(p.key, p.what));
    return out;
  }, "fix"_a = false);
  c.def("backends", [] {
    g_library_used = true;
    nb::list out;
    for (const auto& b : jit::cache::backends()) {
      nb::dict d;
      d["name"] = b.name, d["available"] = b.available, d["detail"] = b.detail;
      out.append(d);
    }
    return out;
  });
  c.def("warm", [](const std::string& manifest, int jobs) {
    g_library_used = true;
    const auto items = jit::cache::parse_manifest(manifest);
    std::vector<jit::cache::WarmResult> results;
    {
      nb::gil_scoped_release unlocked;
      results = jit::cache::warm(items, std::max(1, jobs));
    }
    nb::list out;
    for (const auto& r : results) {
      nb::dict d;
      d["kernel"] = r.item ? r.item->kernel : std::string();
      d["target"] = r.item ? r.item->target.to_string() : std::string();
      d["params"] = r.item ? r.item->params.to_string() : std::string();
      d["origin"] = r.item ? r.item->origin : std::string();
      d["outcome"] = r.outcome == jit::cache::WarmResult::Outcome::Compiled        ? "compiled"
                     : r.outcome == jit::cache::WarmResult::Outcome::AlreadyCached ? "cached"
                     : r.outcome == jit::cache::WarmResult::Outcome::Failed        ? "failed"
                                                                                   : "not started";
      d["ms"] = r.ms, d["error"] = r.error;
      out.append(d);
    }
    return out;
  }, "manifest"_a, "jobs"_a = 1);
  c.def("export_pack", [](const std::string& file, const std::optional<std::string>& target) {
    g_library_used = true;
    std::optional<jit::Target> t;
    if (target) t = jit::Target::parse(*target);
    const auto r = jit::cache::export_pack(file, t);
    nb::dict d;
    d["artifacts"] = r.artifacts, d["tuning"] = r.tuning, d["bytes"] = r.bytes, d["skipped"] = r.skipped;
    return d;
  }, "file"_a, "target"_a = nb::none());
  c.def("import_pack", [](const std::string& file) {
    g_library_used = true;
    const auto r = jit::cache::import_pack(file);
    nb::dict d;
    d["imported"] = r.imported, d["already"] = r.already, d["tuning_imported"] = r.tuning_imported;
    d["tuning_already"] = r.tuning_already, d["stale"] = r.stale, d["unchecked"] = r.unchecked;
    return d;
  }, "file"_a);
}
