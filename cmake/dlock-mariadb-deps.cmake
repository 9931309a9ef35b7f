# SPDX-License-Identifier: BSL-1.0
# dlock::mariadb's dependency: MariaDB Connector/C (Debian: libmariadb-dev; its headers in
# <prefix>/include/mariadb) as the imported target dlock::mariadb_c. Run by dlock_add_backend()
# and by the installed dlock-config.cmake. Appends what is missing to _dlock_missing.
if(NOT TARGET dlock::mariadb_c)
  find_path(DLOCK_MARIADB_INCLUDE_DIR mysql.h PATH_SUFFIXES mariadb)
  find_library(DLOCK_MARIADB_LIBRARY NAMES mariadb libmariadb)
  if(DLOCK_MARIADB_INCLUDE_DIR AND DLOCK_MARIADB_LIBRARY AND EXISTS "${DLOCK_MARIADB_INCLUDE_DIR}/mariadb_version.h")
    add_library(dlock::mariadb_c UNKNOWN IMPORTED)
    set_target_properties(dlock::mariadb_c PROPERTIES
      IMPORTED_LOCATION "${DLOCK_MARIADB_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DLOCK_MARIADB_INCLUDE_DIR}")
  else()
    list(APPEND _dlock_missing "MariaDB Connector/C (Debian: libmariadb-dev)")
  endif()
endif()
