// Which build of jitk is running: the GNU build id of the object its code was linked into.
#pragma once
#include <string>

namespace jit::detail {

// The build id (hex) of the shared library or program holding jitk's code, read once from its
// loaded ELF notes; "" where it has none (linked without --build-id). It changes with any change
// to the code, so what this build renders (preludes, launch shapes) can be named by it.
const std::string& library_build_id();

}  // namespace jit::detail
