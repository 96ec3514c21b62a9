# The install test (cmake -P): installs jitk's build tree into WORK_DIR/prefix, checks the tree,
# builds tests/consumer against it with find_package(jitk) (its build warms a cache with
# jitk_warm), runs it and checks every kernel came from disk; then checks jitk_warm's re-runs and
# its errors on misuse.
# -D: JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER
#     CXX_FLAGS LINKER_FLAGS (the sanitizer flags jitk was built with) BINDIR LIBDIR INCLUDEDIR
cmake_minimum_required(VERSION 3.22)

set(TEST_LABEL "install test")
include("${CMAKE_CURRENT_LIST_DIR}/../install_test_support.cmake")
require_defined(JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER BINDIR LIBDIR INCLUDEDIR)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer")
set(cache_dir "${consumer_build}/jitk-cache")  # jitk_warm's default
foreach(dir BINDIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${${dir}}")
    message(FATAL_ERROR "install test: CMAKE_INSTALL_${dir} is absolute (${${dir}}); --prefix cannot move it")
  endif()
  set(${dir} "${prefix}/${${dir}}")
endforeach()

# 1. The installed tree.
run("cmake --install ${JITK_BINARY_DIR}" ${CMAKE_COMMAND} --install "${JITK_BINARY_DIR}" --prefix "${prefix}")
foreach(file "${INCLUDEDIR}/jit/jit.hpp" "${INCLUDEDIR}/jit/kernels.hpp" "${BINDIR}/jitk"
             "${LIBDIR}/libjitk.so" "${LIBDIR}/libjitk_cpu.so" "${LIBDIR}/cmake/jitk/jitkConfig.cmake"
             "${LIBDIR}/cmake/jitk/jitkConfigVersion.cmake" "${LIBDIR}/cmake/jitk/jitkTargets.cmake"
             "${LIBDIR}/cmake/jitk/jitkWarm.cmake")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "install test: the installed tree lacks ${file}; cmake --install said:\n${out}")
  endif()
endforeach()
file(GLOB versioned "${LIBDIR}/libjitk.so.*")
if(NOT versioned)
  message(FATAL_ERROR "install test: no versioned libjitk.so.* in ${LIBDIR}")
endif()

# 2. The consumer: configure (finds the package), build (warms), run (loads from disk).
configure_file("${CONSUMER_SOURCE_DIR}/warm.toml" "${WORK_DIR}/warm.toml" COPYONLY)  # a copy to touch in 3.
configure_project("configuring the consumer" "${prefix}" "${consumer_build}" "-DCONSUMER_MANIFEST=${WORK_DIR}/warm.toml")
file(STRINGS "${consumer_build}/CMakeCache.txt" jitk_dir REGEX "^jitk_DIR:")
if(NOT jitk_dir STREQUAL "jitk_DIR:PATH=${LIBDIR}/cmake/jitk")
  message(FATAL_ERROR "install test: the consumer found jitk elsewhere: ${jitk_dir}, not ${LIBDIR}/cmake/jitk")
endif()

run("building the consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
expect_text("the consumer's build warms" "jitk: warming" "${out}")
if(NOT IS_DIRECTORY "${cache_dir}")
  message(FATAL_ERROR "install test: the build warmed no ${cache_dir}:\n${out}")
endif()

run("running the consumer" ${CMAKE_COMMAND} -E env "JITK_CACHE_DIR=${cache_dir}" "${consumer_build}/jitk_consumer")
message(STATUS "jitk_consumer:\n${out}")
expect_text("the consumer reads the warmed cache" "cache: ${cache_dir}\n" "${out}")
expect_match("saxpy from disk" "\nsaxpy +disk [^\n]* OK" "${out}")
expect_match("rms_norm from disk" "\nrms_norm +disk [^\n]* OK" "${out}")
if(out MATCHES "\n[a-z_]+ +compiled |WRONG")
  message(FATAL_ERROR "install test: the consumer compiled at run time or got a wrong result:\n${out}")
endif()

# 3. jitk_warm re-runs only when the manifest changes.
run("rebuilding the consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
if(out MATCHES "jitk: warming")
  message(FATAL_ERROR "install test: a rebuild with nothing changed warmed again:\n${out}")
endif()
file(TOUCH "${WORK_DIR}/warm.toml")
run("rebuilding after touching the manifest" ${CMAKE_COMMAND} --build "${consumer_build}")
expect_text("a changed manifest warms again" "jitk: warming" "${out}")

# 4. jitk_warm's misuse stops the configure with a message saying what is wrong.
set(manifest "${WORK_DIR}/warm.toml")
set(cases
  "MANIFEST,${manifest}" "TARGET is missing"
  "TARGET,app" "MANIFEST is missing"
  "TARGET,nope,MANIFEST,${manifest}" "there is no target 'nope'"
  "TARGET,app,MANIFEST,${WORK_DIR}/absent.toml" "manifest '[^']*absent.toml' not found"
  "TARGET,app,MANIFEST,${manifest},WORKERS,4" "unknown arguments: WORKERS"
  "TARGET,app,MANIFEST,${manifest},JOBS,0" "JOBS '0' is not a whole number in \\[1, 65536\\]"
  "TARGET,app,MANIFEST,${manifest},JOBS,2x" "JOBS '2x' is not a whole number"
  "TARGET,app,MANIFEST,${manifest},KERNELS,${WORK_DIR}/absent.so" "KERNELS '[^']*absent.so' is neither a target nor a file"
  "TARGET,app,MANIFEST,${manifest},KERNELS,app" "KERNELS 'app' is a UTILITY")
list(LENGTH cases n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET cases ${i} args)
  list(GET cases ${j} message)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}/misuse" -B "${WORK_DIR}/misuse-${i}" -G "${GENERATOR}"
            "-DCMAKE_PREFIX_PATH=${prefix}" "-DJITK_WARM_ARGS=${args}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(rc EQUAL 0)
    message(FATAL_ERROR "install test: jitk_warm(${args}) was accepted; expected an error '${message}'")
  endif()
  string(REGEX REPLACE "[ \n]+" " " output "${output}")  # CMake wraps long messages
  expect_match("jitk_warm(${args})" "jitk_warm: ${message}" "${output}")
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")  # kept only when something failed
message(STATUS "install test: passed")
