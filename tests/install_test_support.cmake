# Shared by the install tests' `cmake -P` scripts (tests/consumer, tests/own_kernel,
# tests/warm_consumer): checks of their -D arguments, running a step, matching its output, and
# configuring a project against the installed package. TEST_LABEL names the test in every message.

# Stops naming each of the variables that was not given with -D.
function(require_defined)
  foreach(var ${ARGN})
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${TEST_LABEL}: -D${var}=... is missing")
    endif()
  endforeach()
endfunction()

# Runs a command; on failure stops with its output. The output lands in `out`.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TEST_LABEL}: ${what} failed (exit ${rc}):\n${output}")
  endif()
  set(out "${output}" PARENT_SCOPE)
endfunction()

function(expect_match what regex text)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${TEST_LABEL}: ${what}: expected output matching '${regex}', got:\n${text}")
  endif()
endfunction()

function(expect_text what text output)
  string(FIND "${output}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${TEST_LABEL}: ${what}: expected output containing '${text}', got:\n${output}")
  endif()
endfunction()

# Configures CONSUMER_SOURCE_DIR into `build` against the package installed at `prefix`, with the
# compiler and (sanitizer) flags jitk was built with; extra arguments go to the configure as they are.
function(configure_project what prefix build)
  set(args -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
      "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
      "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" "-DCMAKE_SHARED_LINKER_FLAGS=${LINKER_FLAGS}" ${ARGN})
  if(MAKE_PROGRAM)
    list(APPEND args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
  run("${what}" ${CMAKE_COMMAND} ${args})
  set(out "${out}" PARENT_SCOPE)
endfunction()
