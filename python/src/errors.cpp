// jitk's errors as Python's: the exception types, and a jit::Error's fields on the raised exception.
#include "errors.hpp"

#include <exception>

#include "jit/error.hpp"

namespace jitk_py {

namespace {

PyObject* g_error = nullptr;           // jitk.Error(RuntimeError)
PyObject* g_params_error = nullptr;    // jitk.ParamsError(Error, ValueError): a bad kernel name or params
PyObject* g_argument_error = nullptr;  // jitk.ArgumentError(Error, ValueError): a launch argument the kernel refuses

void raise_jit_error(const jit::Error& e) {
  PyObject* type = g_error;
  if (e.kind() == jit::ErrorCode::InvalidParams || e.kind() == jit::ErrorCode::UnknownKernel) type = g_params_error;
  if (e.kind() == jit::ErrorCode::InvalidArgument) type = g_argument_error;
  nb::object exc = nb::steal(PyObject_CallFunction(type, "s", e.what()));
  if (!exc.is_valid()) return;  // the call set its own error
  nb::setattr(exc, "kind", nb::str(jit::to_string(e.kind())));
  nb::setattr(exc, "message", nb::str(e.message().c_str()));
  nb::setattr(exc, "kernel", nb::str(e.kernel().c_str()));
  nb::setattr(exc, "params", nb::str(e.params().c_str()));
  nb::setattr(exc, "log", nb::str(e.log().c_str()));
  nb::list options;
  for (const auto& o : e.options()) options.append(nb::str(o.c_str()));
  nb::setattr(exc, "options", options);
  PyErr_SetObject(type, exc.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("jitk.Error", "A jitk failure: .kind, .message, .kernel, .params, .log, .options",
                                      PyExc_RuntimeError, nullptr);
  nb::object bases_p = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_params_error = PyErr_NewExceptionWithDoc("jitk.ParamsError", "An unknown kernel, or params it does not take", bases_p.ptr(), nullptr);
  g_argument_error = PyErr_NewExceptionWithDoc("jitk.ArgumentError", "A launch argument the kernel refuses", bases_p.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("ParamsError") = nb::handle(g_params_error);
  m.attr("ArgumentError") = nb::handle(g_argument_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const jit::Error& e) {
      raise_jit_error(e);
    }
  });
}

void type_error(const std::string& s) { throw nb::type_error(s.c_str()); }
void value_error(const std::string& s) { throw nb::value_error(s.c_str()); }

}  // namespace jitk_py
