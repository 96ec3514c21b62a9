# The own-kernel test (cmake -P): installs jitk's build tree into WORK_DIR/prefix, builds
# tests/own_kernel against it with find_package(jitk), runs its program (a kernel of its own, from
# its own text file and header), checks that a compile error names the project's file and line and
# that a wrong-type call is refused with a message naming the argument, at run time and at compile time.
# -D: JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER CXX_FLAGS LINKER_FLAGS
cmake_minimum_required(VERSION 3.22)

set(TEST_LABEL "own kernel test")
include("${CMAKE_CURRENT_LIST_DIR}/../install_test_support.cmake")
require_defined(JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")

run("cmake --install ${JITK_BINARY_DIR}" ${CMAKE_COMMAND} --install "${JITK_BINARY_DIR}" --prefix "${prefix}")

configure_project("configuring the project" "${prefix}" "${build}")
run("building the project" ${CMAKE_COMMAND} --build "${build}")

# 1. The program's own kernel, compiled at run time from kernels/axpby.cpp and its header.
set(env ${CMAKE_COMMAND} -E env "JITK_CACHE_DIR=${WORK_DIR}/cache")
run("running axpby_app" ${env} "${build}/axpby_app")
expect_match("the kernel of one's own" "axpby f32 OK" "${out}")

# 2. A compile error names the project's file and line and the params; a wrong-type call names
#    the argument, what it is declared and what was passed.
run("running axpby_checks" ${env} "${build}/axpby_checks")
expect_match("the compile error names the file and line" "broken\\.cpp:6:[0-9]+: error: use of undeclared identifier 'no_such_variable'" "${out}")
expect_match("the compile error names the params" "compiling broken \\(dtype=f64\\)" "${out}")
expect_match("the wrong-type call"
  "wrong type: axpby: argument 'x' \\(2 of 5\\) is declared const T\\* with T = f32 \\(the kernel's dtype\\); the call passes const f64\\*"
  "${out}")

# 3. A wrong type the compiler can see does not build, and the message names the argument.
execute_process(COMMAND ${CMAKE_COMMAND} --build "${build}" --target wrong_type_call
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "own kernel test: wrong_type_call.cpp (int* for a floating dtype) compiled:\n${out}")
endif()
expect_match("the compile-time refusal" "jitk: a kernel argument has the wrong type" "${out}")
expect_match("the compile-time refusal names the argument and the types" "argument_type_mismatch<jit::in<[^\n]*\"x\"[^\n]*int ?\\*" "${out}")

file(REMOVE_RECURSE "${WORK_DIR}")  # kept only when something failed
message(STATUS "own kernel test: passed")
