# SPDX-License-Identifier: BSL-1.0
# The version has one source, project(dlock VERSION ...): include/dlock/version.hpp must say the
# same, or configuring stops here and names both (edit the header when you bump the project).
file(STRINGS "${PROJECT_SOURCE_DIR}/include/dlock/version.hpp" _dlock_version_lines
  REGEX "^#define DLOCK_VERSION_(MAJOR|MINOR|PATCH|STRING) ")
set(_dlock_header_version "")
foreach(_part MAJOR MINOR PATCH)
  string(REGEX MATCH "#define DLOCK_VERSION_${_part} ([0-9]+)" _m "${_dlock_version_lines}")
  list(APPEND _dlock_header_version "${CMAKE_MATCH_1}")
endforeach()
string(REGEX MATCH "#define DLOCK_VERSION_STRING \"([^\"]*)\"" _m "${_dlock_version_lines}")
set(_dlock_header_string "${CMAKE_MATCH_1}")
string(JOIN "." _dlock_header_version ${_dlock_header_version})
if(NOT _dlock_header_version STREQUAL PROJECT_VERSION OR NOT _dlock_header_string STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "dlock: project(VERSION ${PROJECT_VERSION}) in CMakeLists.txt but include/dlock/version.hpp "
                      "says ${_dlock_header_version} (string \"${_dlock_header_string}\"): make them agree")
endif()
# Shared libraries: before 1.0 a minor release may break the ABI, so the soname carries it.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(DLOCK_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(DLOCK_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()
# The man page names the version too (its .TH line).
file(STRINGS "${PROJECT_SOURCE_DIR}/docs/dlock.1" _dlock_man_th REGEX "^[.]TH ")
if(NOT _dlock_man_th MATCHES "\"dlock ${PROJECT_VERSION}\"")
  message(FATAL_ERROR "dlock: docs/dlock.1's .TH line (${_dlock_man_th}) does not say \"dlock ${PROJECT_VERSION}\"")
endif()
