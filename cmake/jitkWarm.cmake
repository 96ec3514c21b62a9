# jitk_warm(TARGET <target> MANIFEST <file> [CACHE_DIR <dir>] [TUNE] [JOBS <n>] [KERNELS <lib>...]):
# at build time, before <target> is built, `jitk warm <file>` compiles every specialization the
# manifest lists into a cache folder (default: ${CMAKE_CURRENT_BINARY_DIR}/jitk-cache), again
# whenever the manifest, a KERNELS library or jitk changes.
#   TUNE       also tunes each entry's `tune = [[m, n, k], ...]` shapes (jitk warm --tune)
#   JOBS n     compiles n at a time (default: all cores)
#   KERNELS    shared libraries (targets of this project, or files) of the program's own kernels,
#              each exporting JITK_KERNEL_MODULE(...) (jit/kernel_module.hpp): loaded before the
#              manifest is read, so it may name their kernels
# The folder is the target's property JITK_CACHE_DIR and the macro JITK_WARMED_CACHE_DIR in its
# sources: the program uses it with jit::configure({.cache_dir = JITK_WARMED_CACHE_DIR}) (jit/config.hpp).
# Installed with jitk's package (find_package(jitk)); needs the target jitk::tool.
function(jitk_warm)
  cmake_parse_arguments(PARSE_ARGV 0 arg "TUNE" "TARGET;MANIFEST;CACHE_DIR;JOBS" "KERNELS")
  set(usage "usage: jitk_warm(TARGET <target> MANIFEST <file> [CACHE_DIR <dir>] [TUNE] [JOBS <n>] [KERNELS <library>...])")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "jitk_warm: unknown arguments: ${arg_UNPARSED_ARGUMENTS}\n${usage}")
  endif()
  if(arg_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "jitk_warm: ${arg_KEYWORDS_MISSING_VALUES} given without a value\n${usage}")
  endif()
  if(NOT arg_TARGET)
    message(FATAL_ERROR "jitk_warm: TARGET is missing: the target whose build warms the cache\n${usage}")
  endif()
  if(NOT arg_MANIFEST)
    message(FATAL_ERROR "jitk_warm: MANIFEST is missing: the TOML file listing the kernels to warm\n${usage}")
  endif()
  if(NOT TARGET ${arg_TARGET})
    message(FATAL_ERROR "jitk_warm: there is no target '${arg_TARGET}' (call jitk_warm after add_executable or add_library)")
  endif()
  get_target_property(aliased ${arg_TARGET} ALIASED_TARGET)
  if(aliased)
    set(arg_TARGET ${aliased})
  endif()
  get_target_property(imported ${arg_TARGET} IMPORTED)
  if(imported)
    message(FATAL_ERROR "jitk_warm: '${arg_TARGET}' is an imported target; give a target this project builds")
  endif()
  if(NOT TARGET jitk::tool)
    message(FATAL_ERROR "jitk_warm: there is no target jitk::tool; call find_package(jitk) first")
  endif()
  set(warm_options "")
  if(arg_TUNE)
    list(APPEND warm_options --tune)
  endif()
  if(DEFINED arg_JOBS)
    if(NOT arg_JOBS MATCHES "^[1-9][0-9]*$" OR arg_JOBS GREATER 65536)
      message(FATAL_ERROR "jitk_warm: JOBS '${arg_JOBS}' is not a whole number in [1, 65536]\n${usage}")
    endif()
    list(APPEND warm_options --jobs ${arg_JOBS})
  endif()
  set(module_depends "")
  foreach(module IN LISTS arg_KERNELS)
    if(TARGET ${module})
      get_target_property(module_type ${module} TYPE)
      if(NOT module_type STREQUAL "SHARED_LIBRARY" AND NOT module_type STREQUAL "MODULE_LIBRARY")
        message(FATAL_ERROR "jitk_warm: KERNELS '${module}' is a ${module_type}; give a SHARED or MODULE library exporting JITK_KERNEL_MODULE(...)")
      endif()
      list(APPEND warm_options --kernels $<TARGET_FILE:${module}>)
      list(APPEND module_depends ${module})  # a target: built first, and a file-level dependency
    else()
      get_filename_component(module_file "${module}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      if(NOT EXISTS "${module_file}" OR IS_DIRECTORY "${module_file}")
        message(FATAL_ERROR "jitk_warm: KERNELS '${module}' is neither a target nor a file (a relative one is read from ${CMAKE_CURRENT_SOURCE_DIR})")
      endif()
      list(APPEND warm_options --kernels "${module_file}")
      list(APPEND module_depends "${module_file}")
    endif()
  endforeach()
  get_filename_component(manifest "${arg_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${manifest}" OR IS_DIRECTORY "${manifest}")
    message(FATAL_ERROR "jitk_warm: manifest '${manifest}' not found (a relative MANIFEST is read from ${CMAKE_CURRENT_SOURCE_DIR})")
  endif()
  set(cache_dir "${CMAKE_CURRENT_BINARY_DIR}/jitk-cache")
  if(arg_CACHE_DIR)
    get_filename_component(cache_dir "${arg_CACHE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  # One program reads one cache folder: further manifests for the same target must share it.
  get_target_property(previous ${arg_TARGET} JITK_CACHE_DIR)
  if(previous AND NOT previous STREQUAL cache_dir)
    message(FATAL_ERROR "jitk_warm: '${arg_TARGET}' already warms ${previous}; give it CACHE_DIR ${previous}")
  endif()

  string(SHA1 id "${manifest};${cache_dir}")
  string(SUBSTRING "${id}" 0 8 id)
  set(warm_target jitk_warm_${arg_TARGET}_${id})
  if(TARGET ${warm_target})
    return()  # this manifest already warms this folder for this target
  endif()
  get_filename_component(manifest_name "${manifest}" NAME)
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/jitk_warm/${manifest_name}.${id}.stamp")
  # The stamp is written only when the warm succeeds; a failed warm fails the build.
  add_custom_command(
    OUTPUT "${stamp}"
    COMMAND ${CMAKE_COMMAND} -E env --unset=JITK_CACHE_MODE "JITK_CACHE_DIR=${cache_dir}" $<TARGET_FILE:jitk::tool> warm ${warm_options} "${manifest}"
    COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
    DEPENDS "${manifest}" $<TARGET_FILE:jitk::tool> $<TARGET_FILE:jitk::jitk> ${module_depends}
    COMMENT "jitk: warming ${cache_dir} from ${manifest_name}"
    VERBATIM)
  add_custom_target(${warm_target} DEPENDS "${stamp}")
  add_dependencies(${arg_TARGET} ${warm_target})
  if(NOT previous)
    set_property(TARGET ${arg_TARGET} PROPERTY JITK_CACHE_DIR "${cache_dir}")
    get_target_property(type ${arg_TARGET} TYPE)
    if(NOT type STREQUAL "UTILITY" AND NOT type STREQUAL "INTERFACE_LIBRARY")
      target_compile_definitions(${arg_TARGET} PRIVATE "JITK_WARMED_CACHE_DIR=\"${cache_dir}\"")
    endif()
  endif()
endfunction()
