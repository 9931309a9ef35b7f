# SPDX-License-Identifier: BSL-1.0
# Builds and runs a project that consumes dlock, the way users do. Run by ctest as
#   cmake -DMODE=find_package|add_subdirectory -DSOURCE_DIR=... -DBINARY_DIR=... -DWORK_DIR=...
#         [-DCXX_COMPILER=...] [-DLAUNCHER=ccache] [-DBUILD_TYPE=...] [-DSANITIZE=...] -P run_consumer.cmake
# find_package: installs the built dlock into a staging prefix, moves the prefix (the package
# must be relocatable), checks no build or source path leaked into it, then builds against it.
# add_subdirectory: builds dlock's source tree as part of the consumer project.
cmake_minimum_required(VERSION 3.25)

foreach(v MODE SOURCE_DIR BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
endfunction()

# A fixed directory, wiped each run: with -g, ccache keys on the build directory, so a fixed
# one lets reruns hit the cache.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
set(install_config)
if(BUILD_TYPE)
  set(install_config --config ${BUILD_TYPE})
endif()
if(CXX_COMPILER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
if(LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

if(MODE STREQUAL "find_package")
  set(stage "${WORK_DIR}/stage")
  set(prefix "${WORK_DIR}/prefix")
  run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${stage}" ${install_config})
  file(RENAME "${stage}" "${prefix}")

  file(GLOB_RECURSE config_files "${prefix}/*dlock-config.cmake")
  file(GLOB_RECURSE headers "${prefix}/*/dlock/redis/connection.hpp")
  file(GLOB_RECURSE libs "${prefix}/*/libdlock_core.*")
  if(NOT config_files OR NOT headers OR NOT libs)
    message(FATAL_ERROR "install is missing files: config='${config_files}' headers='${headers}' lib='${libs}'")
  endif()
  file(GLOB_RECURSE cmake_files "${prefix}/*.cmake")
  foreach(f IN LISTS cmake_files)
    file(READ "${f}" text)
    foreach(p "${SOURCE_DIR}" "${BINARY_DIR}" "${stage}")
      string(FIND "${text}" "${p}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "${f} names the build machine's path ${p}: the package is not relocatable")
      endif()
    endforeach()
  endforeach()

  # A static libdlock built with sanitizers needs their runtime at the consumer's link.
  if(SANITIZE)
    list(APPEND configure_args "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
  endif()
  run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/find_package" -B "${WORK_DIR}/build"
      "-DCMAKE_PREFIX_PATH=${prefix}" ${configure_args})
elseif(MODE STREQUAL "add_subdirectory")
  if(SANITIZE)
    list(APPEND configure_args "-DDLOCK_SANITIZE=${SANITIZE}")
  endif()
  run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/add_subdirectory" -B "${WORK_DIR}/build"
      "-DDLOCK_SOURCE_DIR=${SOURCE_DIR}" ${configure_args})
else()
  message(FATAL_ERROR "MODE must be find_package or add_subdirectory, not '${MODE}'")
endif()

run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" --parallel 2)
run("${WORK_DIR}/build/consumer")
run("${WORK_DIR}/build/core_consumer")
