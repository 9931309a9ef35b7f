# SPDX-License-Identifier: BSL-1.0
# Finds MariaDB Connector/C (Debian: libmariadb-dev; its headers in <prefix>/include/mariadb)
# and defines the imported target dlock::mariadb_c. Shared by the build and the installed config.
if(NOT TARGET dlock::mariadb_c)
  find_path(DLOCK_MARIADB_INCLUDE_DIR mysql.h PATH_SUFFIXES mariadb)
  find_library(DLOCK_MARIADB_LIBRARY NAMES mariadb libmariadb)
  if(DLOCK_MARIADB_INCLUDE_DIR AND DLOCK_MARIADB_LIBRARY AND EXISTS "${DLOCK_MARIADB_INCLUDE_DIR}/mariadb_version.h")
    add_library(dlock::mariadb_c UNKNOWN IMPORTED)
    set_target_properties(dlock::mariadb_c PROPERTIES
      IMPORTED_LOCATION "${DLOCK_MARIADB_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_MARIADB_INCLUDE_DIR}")
  endif()
endif()
