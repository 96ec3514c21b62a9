// jitk's errors as Python's: jitk.Error and its ValueError children, raised for every jit::Error.
#pragma once
#include <nanobind/nanobind.h>

#include <string>

namespace jitk_py {

namespace nb = nanobind;

// Adds Error, ParamsError and ArgumentError to the module and translates jit::Error into them.
void bind_errors(nb::module_& m);

[[noreturn]] void type_error(const std::string& s);
[[noreturn]] void value_error(const std::string& s);

}  // namespace jitk_py
