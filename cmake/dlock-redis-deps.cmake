# SPDX-License-Identifier: BSL-1.0
# dlock::redis's dependencies: Boost.JSON and Boost.URL, OpenSSL (rediss://) and hiredis (only
# its RESP reader), the last as the imported target dlock::hiredis. Run by dlock_add_backend()
# and by the installed dlock-config.cmake, so the exported link interface names a target
# instead of this machine's absolute library path. Appends what is missing to _dlock_missing.
find_package(Boost 1.81 CONFIG QUIET COMPONENTS json url)
if(NOT Boost_FOUND)
  list(APPEND _dlock_missing "Boost.JSON and Boost.URL (Debian: libboost-json1.81-dev libboost-url1.81-dev)")
endif()
find_package(OpenSSL QUIET)
if(NOT OpenSSL_FOUND)
  list(APPEND _dlock_missing "OpenSSL (Debian: libssl-dev)")
endif()
if(NOT TARGET dlock::hiredis)
  find_path(DLOCK_HIREDIS_INCLUDE_DIR hiredis/read.h)
  find_library(DLOCK_HIREDIS_LIBRARY hiredis)
  if(DLOCK_HIREDIS_INCLUDE_DIR AND DLOCK_HIREDIS_LIBRARY)
    add_library(dlock::hiredis UNKNOWN IMPORTED)
    set_target_properties(dlock::hiredis PROPERTIES
      IMPORTED_LOCATION "${DLOCK_HIREDIS_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_HIREDIS_INCLUDE_DIR}")
  else()
    list(APPEND _dlock_missing "hiredis (Debian: libhiredis-dev)")
  endif()
endif()
