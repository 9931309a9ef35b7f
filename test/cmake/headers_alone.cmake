# SPDX-License-Identifier: BSL-1.0
# Each public header compiles on its own (it includes what it uses).
# Run by ctest: cmake -DCXX=... -DINCLUDE_DIR=... -DWORK_DIR=... -P headers_alone.cmake
file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/dlock/*.hpp)
file(MAKE_DIRECTORY ${WORK_DIR})
set(failed "")
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER ${h} id)
  file(WRITE ${WORK_DIR}/${id}.cpp "#include <${h}>\n")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${WORK_DIR}/${id}.cpp
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failed ${h})
    message("${h} does not compile alone:\n${err}")
  endif()
endforeach()
list(LENGTH headers n)
if(failed)
  message(FATAL_ERROR "headers that do not compile alone: ${failed}")
endif()
message(STATUS "${n} public headers compile alone")
