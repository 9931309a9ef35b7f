# SPDX-License-Identifier: BSL-1.0
# Builds and runs a project that consumes dlock, the way users do. Run by ctest as
#   cmake -DMODE=find_package|find_package_shared|add_subdirectory|pkg_config|core_only -DSOURCE_DIR=... -DBINARY_DIR=...
#         -DWORK_DIR=... [-DCXX_COMPILER=...] [-DLAUNCHER=ccache] [-DBUILD_TYPE=...] [-DSANITIZE=...]
#         -P run_consumer.cmake
# find_package: installs the built dlock into a staging prefix, moves the prefix (the package
# must be relocatable), checks no build or source path leaked into it, then builds against it.
# find_package_shared: the same with dlock built here as shared libraries (BUILD_SHARED_LIBS=ON,
# the tool too): the consumers must load libdlock_*.so.<soversion>, which export the public API
# and none of src/'s internals.
# add_subdirectory: builds dlock's source tree as part of the consumer project.
# core_only: builds dlock here with every store switched off and OpenSSL's find disabled, installs
# it and builds a consumer of dlock::core: neither configure may look for OpenSSL, hiredis or
# any store's client library (their cache entries), nor any object include their headers.
# pkg_config: installs as find_package does, then builds the consumers with nothing but
# `c++ FILE $(pkg-config --cflags --libs dlock)` (dlock-core for the core alone); the shared
# variant does that too.
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

# Builds consumer.cpp against `dlock` and core_consumer.cpp against `dlock-core` with only the
# flags pkg-config gives for the modules installed under `prefix`, and runs them.
function(build_with_pkg_config prefix)
  file(GLOB_RECURSE pc "${prefix}/*/pkgconfig/dlock.pc")
  if(NOT pc)
    message(FATAL_ERROR "no dlock.pc installed under ${prefix}")
  endif()
  get_filename_component(pcdir "${pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pcdir}")
  foreach(pair "dlock consumer" "dlock-core core_consumer")
    separate_arguments(pair UNIX_COMMAND "${pair}")
    list(GET pair 0 module)
    list(GET pair 1 program)
    execute_process(COMMAND pkg-config --cflags --libs ${module} OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "pkg-config --cflags --libs ${module} failed (${rc})")
    endif()
    message(STATUS "pkg-config --cflags --libs ${module}: ${flags}")
    separate_arguments(flags UNIX_COMMAND "${flags}")
    set(san)
    if(SANITIZE)
      set(san "-fsanitize=${SANITIZE}")
    endif()
    run(${LAUNCHER} ${CXX_COMPILER} "${CMAKE_CURRENT_LIST_DIR}/${program}.cpp" -o "${WORK_DIR}/pc_${program}"
        ${flags} ${san})
    run("${WORK_DIR}/pc_${program}")
  endforeach()
endfunction()
if(NOT CXX_COMPILER)
  set(CXX_COMPILER c++)
endif()

set(shared OFF)
set(pkg_config_only OFF)
if(MODE STREQUAL "pkg_config")
  set(pkg_config_only ON)
  set(MODE find_package)
endif()
if(MODE STREQUAL "find_package_shared")
  set(shared ON)
  set(MODE find_package)
  set(SANITIZE "")  # a shared libdlock with sanitizers would need their runtime preloaded
  set(BINARY_DIR "${WORK_DIR}/dlock-build")
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BINARY_DIR}" ${configure_args} -DBUILD_SHARED_LIBS=ON
      -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_TOOLS=ON)
  run(${CMAKE_COMMAND} --build "${BINARY_DIR}" --parallel 2)
endif()

# No cache entry of a store's dependency in `build`, no header of one in its objects' dependencies.
function(check_no_store_deps build)
  file(STRINGS "${build}/CMakeCache.txt" entries REGEX "^[^#/]*(OPENSSL|OpenSSL|HIREDIS|hiredis|PostgreSQL|LIBPQ|ZOOKEEPER|MARIADB|boost_json|boost_url)[^=]*=")
  list(FILTER entries EXCLUDE REGEX "^(DLOCK_WITH_|CMAKE_DISABLE_FIND_PACKAGE_)")  # what this script set
  if(entries)
    message(FATAL_ERROR "${build} looked for a store's dependency:\n${entries}")
  endif()
  file(GLOB_RECURSE depfiles "${build}/*.o.d")
  if(NOT depfiles)
    message(FATAL_ERROR "no compiler dependency files (*.o.d) under ${build}: nothing to check")
  endif()
  foreach(d IN LISTS depfiles)
    file(STRINGS "${d}" hit REGEX "/(openssl|hiredis|libpq-fe[.]h|zookeeper|mariadb)/?")
    if(hit)
      message(FATAL_ERROR "${d}: a core-only object includes a store's library header:\n${hit}")
    endif()
  endforeach()
endfunction()

if(MODE STREQUAL "core_only")
  set(BINARY_DIR "${WORK_DIR}/dlock-build")
  set(no_stores)
  foreach(store REDIS ETCD MEMCACHED ZOOKEEPER POSTGRES MARIADB)
    list(APPEND no_stores -DDLOCK_WITH_${store}=OFF)
  endforeach()
  # The stores' options alone: the tool, tests, examples and benchmarks leave themselves out.
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BINARY_DIR}" ${configure_args} ${no_stores}
      -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON)
  run(${CMAKE_COMMAND} --build "${BINARY_DIR}" --parallel 2)
  check_no_store_deps("${BINARY_DIR}")
  run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${WORK_DIR}/prefix" ${install_config})
  file(GLOB_RECURSE deps_files "${WORK_DIR}/prefix/*-deps.cmake")
  if(deps_files)
    message(FATAL_ERROR "a core-only install carries store dependency finders: ${deps_files}")
  endif()
  run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/core_only" -B "${WORK_DIR}/build"
      "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON ${configure_args})
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" --parallel 2)
  check_no_store_deps("${WORK_DIR}/build")
  run("${WORK_DIR}/build/core_consumer")
  return()
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

  if(pkg_config_only)
    build_with_pkg_config("${prefix}")
    return()
  endif()
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
  message(FATAL_ERROR "MODE must be find_package, find_package_shared, add_subdirectory, pkg_config or core_only, not '${MODE}'")
endif()

# Only the consumers: as a subproject dlock would also build its tool, which this test does not use.
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" --parallel 2 --target consumer core_consumer)
run("${WORK_DIR}/build/consumer")
run("${WORK_DIR}/build/core_consumer")

if(shared)
  # The consumers load the shared libraries by their soname, and these export only the API.
  file(GLOB sonames "${prefix}/lib*/libdlock_core.so.*.*")
  if(NOT sonames)
    message(FATAL_ERROR "no versioned libdlock_core.so.* installed in ${prefix}")
  endif()
  execute_process(COMMAND objdump -p "${WORK_DIR}/build/consumer" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT dyn MATCHES "NEEDED +libdlock_redis[.]so[.][0-9]" OR NOT dyn MATCHES "NEEDED +libdlock_core[.]so[.][0-9]")
    message(FATAL_ERROR "the consumer does not load libdlock_redis.so and libdlock_core.so by soname:\n${dyn}")
  endif()
  file(GLOB libs "${prefix}/lib*/libdlock_*.so")
  foreach(lib IN LISTS libs)
    execute_process(COMMAND nm -D -C --defined-only "${lib}" OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "nm -D ${lib} failed")
    endif()
    # Internals of src/ (the state machine, the pipelining core, the channel table) stay hidden.
    string(REGEX MATCH "[^\n]*(dlock::detail::lock_fsm|dlock::detail::lock_driver::|dlock::redis::detail::request_queue|dlock::detail::channel_table)[^\n]*" leaked "${syms}")
    if(leaked)
      message(FATAL_ERROR "${lib} exports an internal symbol: ${leaked}")
    endif()
  endforeach()
  execute_process(COMMAND nm -D -C --defined-only "${prefix}/lib/libdlock_core.so" OUTPUT_VARIABLE syms)
  if(NOT syms MATCHES "dlock::registry::obtain")
    message(FATAL_ERROR "libdlock_core.so does not export dlock::registry::obtain")
  endif()
  # The tool, linked against the shared libraries, runs from the installed prefix; and
  # pkg-config's flags alone link the shared libraries.
  set(ENV{LD_LIBRARY_PATH} "${prefix}/lib")
  build_with_pkg_config("${prefix}")
  execute_process(COMMAND "${prefix}/bin/dlock" --version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^dlock [0-9]+[.][0-9]+[.][0-9]+")
    message(FATAL_ERROR "installed dlock --version: status ${rc}, output '${out}'")
  endif()
endif()
