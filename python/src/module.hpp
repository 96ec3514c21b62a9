// What the module's other files share with it: whether the library was used yet.
#pragma once
#include <atomic>

namespace jitk_py {

extern std::atomic<bool> g_library_used;  // set by the first call that reads the library's settings

}  // namespace jitk_py
