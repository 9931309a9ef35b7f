# SPDX-License-Identifier: BSL-1.0
# Finds hiredis (only its RESP reader is used) and defines the imported target dlock::hiredis.
# Shared by the build and by the installed dlock-config.cmake, so the exported link interface
# names a target instead of this machine's absolute library path.
if(NOT TARGET dlock::hiredis)
  find_path(DLOCK_HIREDIS_INCLUDE_DIR hiredis/read.h)
  find_library(DLOCK_HIREDIS_LIBRARY hiredis)
  if(DLOCK_HIREDIS_INCLUDE_DIR AND DLOCK_HIREDIS_LIBRARY)
    add_library(dlock::hiredis UNKNOWN IMPORTED)
    set_target_properties(dlock::hiredis PROPERTIES
      IMPORTED_LOCATION "${DLOCK_HIREDIS_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_HIREDIS_INCLUDE_DIR}")
  endif()
endif()
