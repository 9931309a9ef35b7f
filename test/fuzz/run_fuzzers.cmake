# SPDX-License-Identifier: BSL-1.0
# Builds the libFuzzer targets in a clang tree of their own, or runs one of them a bounded time
# on its checked-in seed corpus (test/fuzz/corpus/<name>/). Run by ctest as
#   cmake -DACTION=build -DSOURCE_DIR=... -DWORK_DIR=... [-DCLANGXX=clang++] [-DLAUNCHER=ccache] -P run_fuzzers.cmake
#   cmake -DACTION=run -DNAME=<name> -DWORK_DIR=... -DSOURCE_DIR=... [-DSECONDS=5] [-DDICT=file] -P run_fuzzers.cmake
# The main build may use g++: the fuzzers need clang's -fsanitize=fuzzer, hence their own tree
# (kept between runs, so rebuilds are incremental; ccache shares the objects).
cmake_minimum_required(VERSION 3.25)
foreach(v ACTION SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_fuzzers.cmake: -D${v}=... is required")
  endif()
endforeach()
set(tree "${WORK_DIR}/build")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
endfunction()

if(ACTION STREQUAL "build")
  if(NOT CLANGXX)
    message(FATAL_ERROR "no clang++ for the fuzzers (Debian: apt-get install clang libclang-rt-14-dev, "
                        "or bash scripts/setup.sh --tests), then reconfigure")
  endif()
  set(args -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_FUZZERS=ON
    -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_TOOLS=OFF -DDLOCK_INSTALL=OFF)
  if(LAUNCHER)
    list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
  endif()
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${tree}" ${args})
  run(${CMAKE_COMMAND} --build "${tree}" --parallel 2 --target dlock_fuzzers)
elseif(ACTION STREQUAL "run")
  set(fuzzer "${tree}/test/fuzz/dlock_${NAME}_fuzzer")
  set(seeds "${SOURCE_DIR}/test/fuzz/corpus/${NAME}")
  if(NOT EXISTS "${fuzzer}" OR NOT IS_DIRECTORY "${seeds}")
    message(FATAL_ERROR "no ${fuzzer} (run the test fuzz_build) or no seed corpus ${seeds}")
  endif()
  if(NOT SECONDS)
    set(SECONDS 5)
  endif()
  # New inputs go to a scratch corpus; a crash's input is written as ${WORK_DIR}/<name>-crash-<sha1>.
  set(corpus "${WORK_DIR}/corpus-${NAME}")
  file(MAKE_DIRECTORY "${corpus}")
  set(options -max_total_time=${SECONDS} -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    "-artifact_prefix=${WORK_DIR}/${NAME}-")
  if(DICT)
    list(APPEND options "-dict=${DICT}")
  endif()
  run("${fuzzer}" ${options} "${corpus}" "${seeds}")
else()
  message(FATAL_ERROR "ACTION must be build or run, not '${ACTION}'")
endif()
