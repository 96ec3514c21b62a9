// A kernel text of the user's own: found on its search path, its #includes of the user's headers
// inlined, with #line directives so that compiler messages name the user's files and lines.
#pragma once
#include <string>

#include "jit/registry.hpp"
#include "jit/specializer.hpp"

namespace jit::detail {

// impl.search_path is non-empty. The text is $JITK_KERNEL_DIR/<file> when that folder has it, else
// impl.text when given, else the file `file` names (itself when absolute, else the first folder of
// the search path that has it). Each `#include "name"` (or `<name>`) that names a file of the text's
// folder or of the search path (quoted: the including file's folder first) is inlined once per
// inclusion chain; other includes are left for the compiler (jitk_cpu.h, toolkit headers). An
// include naming an absolute path, or one that resolves outside every one of these folders, or a
// file that is not a regular file, is refused: never read, it becomes an `#error` at its line, so
// the compile fails there naming the file and line (unless the preprocessor skips that branch).
// Throws Error{InvalidArgument} when the text itself is missing or unreadable.
// `origin` receives where the main text came from (a path, or "registered").
SourceFile user_kernel_text(const std::string& kernel, const Implementation& impl, std::string* origin);

// `#line 1 "<file>"`: what a user's text follows the prelude with.
std::string first_line_directive(const std::string& file);

}  // namespace jit::detail
