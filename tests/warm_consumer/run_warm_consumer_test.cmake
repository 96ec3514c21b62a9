# The warm test (cmake -P): installs jitk's build tree into WORK_DIR/prefix, builds tests/warm_consumer
# against it (its build warms, tunes and warms its own kernel with jitk_warm(... TUNE JOBS KERNELS)),
# then runs it with no cache environment (and again with JITK_CACHE_DIR pointing elsewhere): every
# kernel must come from disk, nothing is tuned, and the tuning left only its winner in the cache.
# -D: JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER
#     CXX_FLAGS LINKER_FLAGS BINDIR LIBDIR INCLUDEDIR
cmake_minimum_required(VERSION 3.22)

set(TEST_LABEL "warm test")
include("${CMAKE_CURRENT_LIST_DIR}/../install_test_support.cmake")
require_defined(JITK_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER BINDIR LIBDIR INCLUDEDIR)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
set(cache_dir "${build}/jitk-cache")  # jitk_warm's default
set(BINDIR "${prefix}/${BINDIR}")

run("cmake --install ${JITK_BINARY_DIR}" ${CMAKE_COMMAND} --install "${JITK_BINARY_DIR}" --prefix "${prefix}")
configure_project("configuring the consumer" "${prefix}" "${build}")
# The build's own environment must not steer the warm: it warms the folder the program names.
run("building the consumer" ${CMAKE_COMMAND} -E env --unset=JITK_CACHE_DIR --unset=JITK_RECORD
    ${CMAKE_COMMAND} --build "${build}")
expect_match("the build warms" "jitk: warming" "${out}")
expect_match("the warm used 2 jobs" "2 jobs\\)" "${out}")
expect_match("the warm tuned gemm" "tune: 1 tuned, 0 reused" "${out}")

# Tuning kept its winner only: one gemm artifact.
run("listing the warmed cache" ${CMAKE_COMMAND} -E env "JITK_CACHE_DIR=${cache_dir}" "${BINDIR}/jitk" ls --json)
string(REGEX MATCHALL "\"kernel\": \"gemm\"" gemm_rows "${out}")
list(LENGTH gemm_rows gemm_count)
if(NOT gemm_count EQUAL 1)
  message(FATAL_ERROR "warm test: the warmed cache holds ${gemm_count} gemm artifacts, not the tuning's winner alone:\n${out}")
endif()
expect_match("the own kernel was warmed" "\"kernel\": \"consumer_add_one\"" "${out}")

foreach(env "--unset=JITK_CACHE_DIR" "JITK_CACHE_DIR=${WORK_DIR}/elsewhere")
  run("running the consumer (${env})" ${CMAKE_COMMAND} -E env --unset=XDG_CACHE_HOME --unset=JITK_CACHE_MODE
      "${env}" JITK_LOG_LEVEL=info "${build}/warm_consumer")
  message(STATUS "warm_consumer (${env}):\n${out}")
  expect_match("the consumer reads the warmed cache" "cache: ${cache_dir}\n" "${out}")
  expect_match("saxpy from disk" "\nsaxpy disk\n" "${out}")
  expect_match("gemm's winner from disk" "\ngemm-tuned disk\n" "${out}")
  expect_match("the own kernel from disk" "\nconsumer_add_one disk\n" "${out}")
  expect_match("right results" "\nOK\n" "${out}")
  if(out MATCHES "autotuned|\n[a-z_-]+ compiled\n")
    message(FATAL_ERROR "warm test: the consumer tuned or compiled at run time:\n${out}")
  endif()
endforeach()
if(EXISTS "${WORK_DIR}/elsewhere")
  message(FATAL_ERROR "warm test: JITK_CACHE_DIR won over jit::configure's cache_dir (it made ${WORK_DIR}/elsewhere)")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")  # kept only when something failed
message(STATUS "warm test: passed")
